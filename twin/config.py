"""`RunConfig`: everything that defines a run, each field declared once.

Every field carries its metadata (`setting`): the `twin.options.Key` that checks its value (config
files, sweeps, the Python API), its command-line flags, argparse type and help, and whether
``config.toml`` records it. The command line (`twin.cli.add_run_arguments`, `config_from_args`), the
re-run reader (`twin.rerun.run_config_fields`), the validation schema (`twin.options.run_field_schema`)
and ``config.toml`` (`twin.run.resolved_config`) are derived from these declarations, so adding a field
is one edit here. The field order is ``config.toml``'s key order (same config, same bytes).

Help texts and choices that need an import (the scheduler list, the data directory, the queue
orders) are callables, evaluated when the parser is built or ``--help`` is shown.
"""
from __future__ import annotations

import argparse
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, Callable

from .argtypes import key_value, on_off, whole_number
from .metrics import TAU
from .schema import MAX_SEED, Key
from .workload import MAX_UNITS


def setting(default: Any = MISSING, *, key: Key, flags: tuple[str, ...] = (), help: str | Callable[[], str] = "",
            record: bool = True, default_factory: Any = MISSING, **argparse_kwargs: Any) -> Any:
    """A `RunConfig` field: ``key`` checks a value; ``flags`` (none: no command-line flag), ``help``
    (a callable is evaluated for ``--help`` only, or when the parser is built with ``eager_help=True``)
    and ``argparse_kwargs`` (type, choices as a list or a callable, metavar, action) declare the flag; ``record``:
    ``config.toml`` holds it (``out``,
    ``quiet`` and ``force`` say where and how to write, not what runs)."""
    meta = {"key": key, "flags": tuple(flags), "help": help, "record": record, "argparse": argparse_kwargs}
    return field(default=default, default_factory=default_factory, metadata={"setting": meta})


def _scheduler_help() -> str:
    from hpctwin.schedulers.registry import known_schedulers  # noqa: PLC0415
    return (f"policy: {', '.join(known_schedulers())}, module:Class, or exec:CMD (a process of any "
            "language speaking the JSON-lines protocol of docs/protocol.md) (default: easy)")


def _data_dir_help() -> str:
    from hpctwin.datasets.registry import DATA_DIR_HELP  # noqa: PLC0415
    return DATA_DIR_HELP


def _orders() -> list[str]:
    from hpctwin.schedulers.ordering import ORDERS  # noqa: PLC0415
    return list(ORDERS)


def _allocations() -> list[str]:
    from .allocation import ALLOCATIONS  # noqa: PLC0415
    return ALLOCATIONS.names()


@dataclass
class RunConfig:
    """Everything that defines a run. Same config, same output bytes (``jobs.csv``).

    ``scheduler`` is a name (see `schedulers.registry`) or, from Python, a `hpctwin.Scheduler` class or
    instance. ``options`` holds the ``--set SECTION.KEY`` tables (scheduler, models, gpu, workload).
    ``out`` is None by default: nothing is written unless it names a folder.

    Examples
    --------
    >>> import hpctwin
    >>> cfg = hpctwin.RunConfig(workload="synthetic:jobs=100,nodes=16", scheduler="easy", order="sjf")
    >>> cfg.scheduler, cfg.order, cfg.seed, cfg.out
    ('easy', 'sjf', 0, None)
    >>> hpctwin.run(cfg).summary["scheduler"]
    'sjf+easy'

    A bad value is a `RunConfigError` when the configuration is planned or run, naming the field:

    >>> try:
    ...     hpctwin.run(hpctwin.RunConfig(workload="synthetic:jobs=100", nodes=0))
    ... except hpctwin.RunConfigError as e:
    ...     print(e)
    RunConfig: nodes: 0 must be >= 1
    """

    workload: str = setting(
        "synthetic", key=Key(str), flags=("--workload", "-w"),
        help="a workload file (format detected: SWF, sacct -P, Alibaba/Acme/Helios/Philly GPU traces, "
             "OpenDC tasks.parquet) or FORMAT:FILE (swf, sacct, alibaba-gpu, alibaba-dlrm, acme, helios, "
             "philly, surf), a registry name (see `hpctwin datasets list`), "
             "'synthetic' or 'synthetic:jobs=5000,nodes=256,load=0.8,seed=1' (Lublin-Feitelson "
             "model), or 'llm-synthetic[:days=30,gpus=1024]' (default: synthetic)")
    scheduler: Any = setting("easy", key=Key(str), flags=("--scheduler", "-s"), help=_scheduler_help)
    order: str | None = setting(
        None, key=Key(str, nullable=True), flags=("--order",), choices=_orders,
        help="queue order, overriding the scheduler's (fcfs, sjf = shortest estimate, ljf = "
             "longest estimate, saf = smallest area, wfp3, unicep)")
    backfill: str | None = setting(
        None, key=Key(str, choices=("none", "easy", "conservative"), nullable=True), flags=("--backfill",),
        choices=["none", "easy", "conservative"], help="backfilling rule, overriding the scheduler's")
    system: str | None = setting(
        None, key=Key(str, nullable=True), flags=("--system",),
        help="built-in machine name (see `hpctwin systems`) or a .toml file; sets the "
             "machine size unless --nodes is given")
    nodes: int | None = setting(
        None, key=Key(int, 1, MAX_UNITS, nullable=True), flags=("--nodes",), type=int,
        help="machine size in allocation units; overrides the log header and the system")
    seed: int = setting(0, key=Key(int, 0, MAX_SEED), flags=("--seed",), type=int,
                        help="seed of every random source of the run (default 0)")
    placement: str = setting(
        "first-fit", key=Key(str), flags=("--placement",),
        help="node placement: first-fit (default), contiguous, group-packed, spread, recorded, llm")
    network: bool = setting(False, key=Key(bool), flags=("--network",), type=on_off, metavar="on|off",
                            help="network contention model (needs a --system with a [network] table)")
    power: bool = setting(False, key=Key(bool), flags=("--power",), type=on_off, metavar="on|off",
                          help="power and cooling models (needs a --system with a [power] table)")
    sample_dt: float | None = setting(
        None, key=Key(float, 0.0, exclusive_min=True, nullable=True), flags=("--sample-dt",), type=float,
        help="time-series sampling step in seconds (default 15; a run without physics models whose series would "
             "exceed 131,072 samples uses the first of 30 s, 1, 2, 5, 10, 15, 30 min, 1, 2, 3, 6, 12 h, "
             "whole days that keeps them under)")
    out: str | None = setting(
        None, key=Key(str, nullable=True), flags=("--out", "-o"), record=False,
        help="run folder to write (default: runs/<workload>-<scheduler>[-<options that change "
             "results>]-seed<K>); an existing run folder is refused unless --force")
    quiet: bool = setting(True, key=Key(bool), flags=("--quiet", "-q"), record=False, action="store_true",
                          cli_default=False, help="no progress bar and no summary table")
    kill_at_walltime: bool = setting(True, key=Key(bool), flags=("--kill-at-walltime",), type=on_off,
                                     metavar="on|off", help="end a job at its requested time if it runs longer "
                                                            "(default on)")
    data_dir: str | None = setting(None, key=Key(str, nullable=True), flags=("--data-dir",), help=_data_dir_help,
                                   eager_help=True)
    estimate: str = setting(
        "requested", key=Key(str), flags=("--estimate",),
        help="runtime estimate the scheduler sees: the log's requested time (requested, "
             "default), the exact runtime (exact), or a model of datasets.estimates")
    size_field: str = setting(
        "auto", key=Key(str, choices=("auto", "requested", "allocated")), flags=("--size-field",),
        choices=["auto", "requested", "allocated"],
        help="SWF job size: requested processors when known else allocated (auto, default)")
    tau: float = setting(TAU, key=Key(float, 0.0, exclusive_min=True))
    power_cap: float | None = setting(
        None, key=Key(float, 0.0, exclusive_min=True, nullable=True), flags=("--power-cap",), type=float,
        metavar="WATTS",
        help="facility power cap (W: rack input + CDU pumps + cooling plant), held at every sample by "
             "refusing starts and throttling running jobs; the summary says if it could not be held "
             "(needs --power on)")
    allocation: str = setting(
        "node", key=Key(str), flags=("--allocation",), choices=_allocations,
        help="allocation unit: node (or processor for SWF logs; default) or gpu (several jobs "
             "share a node; a job's size is its 'gpus' column; packed by the gpu-pack policy)")
    gpus_per_node: int | None = setting(
        None, key=Key(int, 1, 4096, nullable=True), flags=("--gpus-per-node",), type=int,
        help="GPUs per node for --allocation gpu (default: the system's gpus_per_node)")
    options: dict[str, Any] = setting(
        key=Key("any"), default_factory=dict, flags=("--set",), dest="options", type=key_value, action="append",
        cli_default=[], metavar="KEY=VALUE",
        help="extra option for models/schedulers (repeatable), e.g. --set scheduler.bf_interval=30")
    force: bool = setting(False, key=Key(bool), flags=("--force",), record=False, action="store_true",
                          help="replace an existing run folder at --out (a folder holding anything hpctwin did "
                               "not write is never deleted)")
    allow_empty: bool = setting(False, key=Key(bool), flags=("--allow-empty",), action="store_true",
                                help="run even when the workload has no job to simulate (default: that is an "
                                     "error)")
    max_jobs: int | None = setting(
        None, key=Key(int, 1, nullable=True), flags=("--max-jobs",), type=whole_number(1), metavar="N",
        help="job window: replay only the first N jobs of the workload in submit order (after "
             "--skip-jobs); the summary's jobs_in_log still counts the whole log (default: all)")
    skip_jobs: int | None = setting(
        None, key=Key(int, 0, nullable=True), flags=("--skip-jobs",), type=whole_number(0), metavar="K",
        help="job window: leave out the first K jobs in submit order, e.g. --skip-jobs 1000 "
             "--max-jobs 500 replays jobs 1001-1500 (default: none)")


def run_fields() -> dict[str, Field]:
    """`RunConfig`'s fields by name, in declaration (config.toml) order."""
    return {f.name: f for f in fields(RunConfig)}


def meta(f: Field) -> dict:
    """A field's `setting` metadata."""
    return f.metadata["setting"]


def recorded_fields() -> list[str]:
    """Fields ``config.toml``'s ``[run]`` table holds (``options`` is its own ``[options]`` table)."""
    return [f.name for f in fields(RunConfig) if meta(f)["record"] and f.name != "options"]


def cli_fields() -> list[Field]:
    """Fields with a command-line flag, in declaration order."""
    return [f for f in fields(RunConfig) if meta(f)["flags"]]


def add_field_argument(p: argparse.ArgumentParser, f: Field, lazy_help: Callable[[Callable[[], str]], str]) -> None:
    """``p.add_argument`` for field ``f`` from its declaration (``lazy_help`` wraps a help callable)."""
    m = meta(f)
    kw = dict(m["argparse"])
    default = kw.pop("cli_default", f.default if f.default is not MISSING else None)
    if callable(kw.get("choices")):
        kw["choices"] = kw["choices"]()
    help_ = m["help"]
    if callable(help_):                  # evaluated now, or by --help only (the scheduler list scans entry points)
        help_ = help_() if kw.pop("eager_help", False) else lazy_help(help_)
    kw["help"] = help_
    if kw.get("action") != "store_true":
        kw["default"] = default
    p.add_argument(*m["flags"], **kw)


def cli_dest(f: Field) -> str:
    """The argparse destination of a field's flag."""
    return meta(f)["argparse"].get("dest", f.name)
