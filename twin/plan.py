"""The run plan: a configuration validated and resolved once, before anything is loaded.

`plan(cfg) -> Plan` runs every check the command line runs (`twin.options.validate_run_config`: names
with suggestions, sizes, numbers, ``--set`` sections and keys, what applies to the chosen scheduler)
and resolves every name to its table entry (`twin.plugins`): the scheduler entry and its options, the
physics models the configuration turns on (their system tables and GPU support checked), the
placement, the allocation strategy (`twin.allocation`), the system file and the output folder. The
`Plan` is frozen; `twin.run.execute` runs it. ``hpctwin.run(cfg)`` is ``execute(plan(cfg))`` and
``hpctwin run`` is ``execute(plan(cfg, source="command line"))``, so the Python API and the command line
cannot disagree: every configuration error is a `RunConfigError` (a ValueError) naming the field,
with a did-you-mean suggestion where one exists.

What the scheduler needs is read from its entry (`schedulers.registry.Needs`), never from its name:
GPU allocation, the models that provide what it needs (``provides`` of `twin.models.ModelEntry`), LLM
training jobs (checked once the workload is loaded), support for node failures.
"""
from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .config import RunConfig
from .errors import RunConfigError
from .plugins import Entry, Table

#: the built-in default machine for synthetic runs
DEFAULT_SYSTEM = "generic"
#: fields that may be given as a path object from Python (they are recorded as text)
_PATH_FIELDS = ("workload", "system", "data_dir", "out")


@dataclass(frozen=True)
class SchedulerChoice:
    """The scheduler of a plan: its table entry, the name (or Python class or instance) it was given
    as, the order and backfill overrides and its validated ``--set scheduler`` options."""

    entry: Any
    spec: Any
    order: str | None
    backfill: str | None
    options: Mapping[str, Any]

    @property
    def name(self) -> str:
        """The name as config.toml records it (``module:Class`` for a Python object)."""
        return self.spec if isinstance(self.spec, str) else self.entry.name


@dataclass(frozen=True)
class Plan:
    """A run, fully resolved and validated (see the module docstring).

    Examples
    --------
    >>> import hpctwin
    >>> p = hpctwin.plan(hpctwin.RunConfig(system="frontier", power=True))
    >>> p.scheduler.name, p.system_name, p.system.nodes, p.model_names(), p.out
    ('easy', 'frontier', 9408, ['power'], None)
    """

    config: RunConfig
    scheduler: SchedulerChoice
    models: tuple
    allocation: Any
    placement: Any
    system: Any
    system_name: str | None
    system_explicit: bool
    out: Path | None
    force: bool
    source: str = "RunConfig"

    def model_names(self) -> list[str]:
        return [e.name for e in self.models]


@functools.lru_cache(maxsize=None)
def _mixed(cls: type) -> type:
    """``cls`` that is also a `RunConfigError` (callers catching either keep working)."""
    return type(cls.__name__, (cls, RunConfigError), {"__module__": cls.__module__, "__doc__": cls.__doc__})


def as_config_error(e: ValueError) -> RunConfigError:
    """``e`` as a `RunConfigError` of its own class (an unknown system or dataset is a configuration error)."""
    if isinstance(e, RunConfigError):
        return e
    return _mixed(type(e))(*e.args)


def normalized(cfg: RunConfig) -> RunConfig:
    """``cfg`` with path objects given from Python as text (what config.toml records); else ``cfg``."""
    changes = {k: os.fspath(v) for k in _PATH_FIELDS
               if isinstance(v := getattr(cfg, k), os.PathLike) and not isinstance(v, str)}
    return dataclasses.replace(cfg, **changes) if changes else cfg


def plan(cfg: RunConfig, source: str = "RunConfig") -> Plan:
    """Validate ``cfg`` as the command line does and resolve it (see the module docstring).

    ``source`` names the configuration in error messages (``"command line"`` gives the flag names).
    Raises `RunConfigError` (its subclasses `twin.options.ConfigError`, `UnknownSchedulerError`...).

    Examples
    --------
    >>> import hpctwin
    >>> p = hpctwin.plan(hpctwin.RunConfig(workload="synthetic:jobs=100,nodes=16", scheduler="easy"))
    >>> p.scheduler.name, p.system_name, p.out
    ('easy', 'generic', None)
    >>> hpctwin.execute(p).summary["jobs_simulated"]
    100
    >>> try:
    ...     hpctwin.plan(hpctwin.RunConfig(scheduler="easy", order="sfj"))
    ... except hpctwin.RunConfigError as e:
    ...     print(e)
    unknown order 'sfj' (did you mean 'sjf' or 'saf'?); known: fcfs, sjf, ljf, saf, wfp3, unicep
    """
    from hpctwin.schedulers.registry import check_order_backfill, scheduler_entry  # noqa: PLC0415
    from hpctwin.topology.placement import PLACEMENTS  # noqa: PLC0415

    from .allocation import ALLOCATIONS  # noqa: PLC0415
    from .options import validate_run_config  # noqa: PLC0415
    if not isinstance(cfg, RunConfig):
        raise RunConfigError(f"{source}: expected a RunConfig, got {type(cfg).__name__}")
    cfg = normalized(cfg)
    validate_run_config(cfg, source)
    entry = scheduler_entry(cfg.scheduler)        # module:Class imported and checked here, nothing called
    check_order_backfill(cfg.order, cfg.backfill)
    system, system_name, explicit = _system(cfg)
    placement = PLACEMENTS.lookup(cfg.placement)
    allocation = ALLOCATIONS.lookup(cfg.allocation).load()(cfg, system, placement)
    models = _models(cfg, system, allocation.gpu)
    _check_needs(entry, _label(cfg.scheduler, entry), models)
    choice = SchedulerChoice(entry, cfg.scheduler, cfg.order, cfg.backfill, dict(cfg.options.get("scheduler", {})))
    return Plan(cfg, choice, tuple(models), allocation, placement, system, system_name, explicit,
                Path(cfg.out) if cfg.out else None, bool(cfg.force), source)


def _label(spec: Any, entry) -> str:
    return spec if isinstance(spec, str) else entry.name


def _system(cfg: RunConfig) -> tuple[Any, str | None, bool]:
    """(system, its name as config.toml says it, whether it was given): the built-in default machine
    for synthetic runs without --nodes; an unknown or broken system file is a `RunConfigError`."""
    from .system import SystemError_, load_system  # noqa: PLC0415
    explicit = cfg.system is not None
    synthetic = cfg.workload == "synthetic" or cfg.workload.startswith("synthetic:")
    try:
        system = load_system(cfg.system) if cfg.system else None
        if system is None and synthetic and cfg.nodes is None:
            system = load_system(DEFAULT_SYSTEM)
    except SystemError_ as e:
        raise as_config_error(e) from None
    # cfg is not changed: config.toml must say whether the system was given, for a byte-identical re-run
    return system, cfg.system or (DEFAULT_SYSTEM if system is not None else None), explicit


def _models(cfg: RunConfig, system: Any, gpu: bool) -> list:
    """The model entries ``cfg`` turns on (registry order), their requirements checked."""
    from .models import check_requirements, enabled_entries  # noqa: PLC0415
    models = enabled_entries(cfg)
    for e in models:
        check_requirements(e, system, gpu)
    return models


def _check_needs(entry, name: str, models: list) -> None:
    """The models the scheduler's entry needs are on (by what they provide), and it supports the
    models that take units down."""
    from .models import providers  # noqa: PLC0415
    check_model_needs(name, entry.needs.models, models, providers)
    if any(e.interrupts for e in models) and not entry.supports_failures:
        raise RunConfigError(f"scheduler {name} does not support node failures (it keeps its own node map); "
                             "use an order x backfill policy or the llm wrapper, or turn failures off")


def check_model_needs(name: str, needs, models: list, providers) -> None:
    """Each need (a name a model ``provides``) is provided by one of ``models``; else the error names the
    switch of the model that would provide it."""
    have = {p for e in models for p in e.provides}
    for need in needs:
        if need not in have:
            cands = providers(need)
            how = f"add {cands[0].flag}" if cands and cands[0].flag else "no registered model provides it"
            raise RunConfigError(f"scheduler {name} needs the {need} model: {how}")


#: ``--compat NAME``: replays of a published harness's conventions (each runs the configuration its own
#: way and refuses the settings it has no counterpart for); factory = ``run(args, cfg) -> exit status``
COMPAT = Table("compat preset")
COMPAT.register(Entry("rlscheduler", "hpctwin.schedulers.rlscheduler_run:run_compat_cli",
                      doc="the RLScheduler harness's test sequences and metric (docs/conventions.md)"))


def compat_plan(cfg: RunConfig, name: str, source: str = "RunConfig") -> tuple[Entry, RunConfig]:
    """The preset of ``--compat NAME`` and ``cfg`` with every field's type and range checked (the
    preset's own names, e.g. the harness's heuristics, and what it refuses are its own checks)."""
    from .options import run_field_schema  # noqa: PLC0415
    entry = COMPAT.lookup(name)
    cfg = normalized(cfg)
    for key, schema in run_field_schema().items():
        label = f"{source}: --{key.replace('_', '-')}" if source == "command line" else f"{source}: {key}"
        schema.check(getattr(cfg, key), label)
    return entry, cfg
