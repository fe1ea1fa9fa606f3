"""The ``--compat rlscheduler`` preset: a run with the RLScheduler harness's conventions.

``hpctwin run --compat rlscheduler --workload SDSC-SP2 --scheduler wfp3 [--backfill easy] --seed 1``
(or `run_compat` on a `twin.run.RunConfig`) replays the harness's test sequences of the log with the
harness's loader (`schedulers.rlscheduler_trace`), sampling and scheduling loop
(`schedulers.rlscheduler_compat`), and reports its metric: per sequence the mean bounded slowdown
of its jobs (tau 10 s), and the mean over the sequences (one cell of the published table).

Settings of the run config it uses:

* ``scheduler``: the heuristic, ``fcfs``, ``sjf``, ``wfp3``, ``unicep``, ``f1`` or ``smallest``
  (``rls-`` prefix accepted); ``backfill``: ``none`` (default) or ``easy``, meaning the harness's
  greedy backfilling (one stale shadow, strict ``<``, no extra-nodes clause), not hpctwin's EASY;
* ``seed``: the harness's ``--seed`` (the published table: 1);
* ``options["compat"]``: ``sequences`` (default 10), ``length`` (default 1024), ``batch_job_slice``
  (default: 10,000 for the registry's ``SDSC-SP2`` and ``HPC2N``, 0 otherwise, as in the harness's
  ``make_table_script.py``);
* ``workload``: a registry name or an SWF file; ``data_dir``; ``out``/``force``/``quiet``.

Settings the harness has no counterpart for (order, system, nodes, estimate, size field, power,
network, failures, a power cap, GPU allocation) are refused with an error rather than ignored.
Jobs are never killed at their request (the harness's rule), whatever ``kill_at_walltime`` says.

The run folder holds ``jobs.csv`` (one row per job and sequence), ``summary.json`` and
``config.toml``; no ``timeseries.h5`` (the harness keeps no machine state over time).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .rlscheduler_compat import SCORES, TAU_S, replay_sequence, score_keys
from .rlscheduler_trace import HarnessTrace, load_harness_trace, sample_starts

COMPAT_NAMES = ("rlscheduler",)
#: ``make_table_script.py``'s ``batches``: start positions of SDSC-SP2 and HPC2N sequences are drawn
#: within the first 10,000 jobs; the Lublin traces use the whole log
HARNESS_SLICE = {"SDSC-SP2": 10000, "HPC2N": 10000}
_COMPAT_KEYS = {"sequences", "length", "batch_job_slice"}
_HARNESS_REF = "DIR-LAB/deep-batch-scheduler commit cd433e3"


class CompatError(ValueError):
    """A run config the compat preset cannot honour (the message names the setting)."""


@dataclass
class CompatSettings:
    heuristic: str
    backfill: bool
    seed: int
    sequences: int
    length: int
    batch_job_slice: int


@dataclass
class CompatResult:
    config: Any
    settings: CompatSettings
    jobs: pd.DataFrame
    summary: dict
    out: Path | None = None


def heuristic_name(scheduler: str) -> str:
    """``rls-wfp3`` / ``wfp3`` -> ``wfp3``; anything else is a `CompatError`."""
    name = scheduler[4:] if scheduler.startswith("rls-") else scheduler
    if name not in SCORES:
        raise CompatError(f"--compat rlscheduler: --scheduler {scheduler!r} is not a harness heuristic; "
                          f"known: {', '.join(SCORES)} (or rls-NAME)")
    return name


def _refuse_unmapped(cfg) -> None:
    checks = [("order", cfg.order is not None), ("system", cfg.system is not None),
              ("nodes", cfg.nodes is not None), ("estimate", cfg.estimate != "requested"),
              ("size-field", cfg.size_field != "auto"), ("power", bool(cfg.power)),
              ("network", bool(cfg.network)), ("power-cap", cfg.power_cap is not None),
              ("allocation", cfg.allocation != "node"), ("placement", cfg.placement != "first-fit"),
              ("failures", bool((cfg.options or {}).get("failures")))]
    bad = [name for name, on in checks if on]
    if bad:
        raise CompatError(f"--compat rlscheduler: --{', --'.join(bad)} has no counterpart in the RLScheduler "
                          "harness (its machine, sizes, requests and loop are fixed by the preset)")
    extra = set(cfg.options or {}) - {"compat"}
    if extra:
        raise CompatError(f"--compat rlscheduler: options {sorted(extra)} do not apply (only compat.sequences, "
                          "compat.length, compat.batch_job_slice)")


def compat_settings(cfg) -> CompatSettings:
    """The preset's settings from a `twin.run.RunConfig` (module doc); raises `CompatError`."""
    _refuse_unmapped(cfg)
    heuristic = heuristic_name(cfg.scheduler)
    if cfg.backfill not in (None, "none", "easy"):
        raise CompatError(f"--compat rlscheduler: --backfill {cfg.backfill!r}: the harness has none or its "
                          "greedy backfilling (--backfill easy)")
    opts = dict((cfg.options or {}).get("compat") or {})
    unknown = set(opts) - _COMPAT_KEYS
    if unknown:
        raise CompatError(f"--set compat.{sorted(unknown)[0]}: unknown key; known: {', '.join(sorted(_COMPAT_KEYS))}")
    for key in opts:
        v = opts[key]
        if not isinstance(v, int) or isinstance(v, bool) or v < (0 if key == "batch_job_slice" else 1):
            raise CompatError(f"--set compat.{key}={v!r}: a "
                              f"{'non-negative' if key == 'batch_job_slice' else 'positive'}"
                              " integer is needed")
    return CompatSettings(heuristic, cfg.backfill == "easy", int(cfg.seed), opts.get("sequences", 10),
                          opts.get("length", 1024),
                          opts.get("batch_job_slice", HARNESS_SLICE.get(str(cfg.workload), 0)))


def resolve_trace_path(workload: str, data_dir: str | None = None) -> Path:
    """A registry name (``SDSC-SP2``, ``Lublin-256``...) or a path to an SWF file."""
    p = Path(workload)
    if p.exists():
        return p
    from hpctwin.datasets import registry  # noqa: PLC0415
    return registry.resolve(workload, data_dir)


def _sequence_rows(tr: HarnessTrace, k: int, res) -> dict:
    j = res.jobs
    return {"sequence": np.full(len(j), k, dtype=np.int64), "job_id": tr.job_id[j], "submit": tr.submit[j],
            "start": res.start, "wait": res.start - tr.submit[j], "run": tr.run[j], "request": tr.request[j],
            "procs": tr.procs[j], "nodes": tr.nodes[j], "bsld": res.bsld}


def replay_config(cfg) -> CompatResult:
    """Replay the run config's sequences in memory (no folder written)."""
    st = compat_settings(cfg)
    tr = load_harness_trace(resolve_trace_path(cfg.workload, cfg.data_dir))
    starts = sample_starts(len(tr), st.length, st.sequences, st.seed, st.batch_job_slice)
    keys = score_keys(tr, st.heuristic)
    frames, values = [], []
    for k, first in enumerate(starts):
        res = replay_sequence(tr, first, st.length, st.heuristic, st.backfill, keys)
        values.append(res.value)
        frames.append(pd.DataFrame(_sequence_rows(tr, k, res)))
    jobs = pd.concat(frames, ignore_index=True)
    summary = {
        "compat": "rlscheduler", "harness": _HARNESS_REF, "workload": str(cfg.workload), "trace": tr.path,
        "heuristic": st.heuristic, "backfill": "harness-greedy" if st.backfill else "none",
        "machine_nodes": tr.max_nodes, "procs_per_node": tr.procs_per_node, "jobs_in_log": tr.lines_read,
        "jobs_kept": len(tr), "seed": st.seed, "sequences": st.sequences, "length": st.length,
        "batch_job_slice": st.batch_job_slice, "sequence_starts": starts, "sequence_mean_bsld": values,
        "mean_bsld": float(np.mean(values)), "tau_s": TAU_S,
        "conventions": "RLScheduler harness: head committed, WFP3/UNICEP wait = -1 - submit, no kill at the "
                       "request, bsld = max(1, (wait + run) / max(run, 10 s)) per job, mean per sequence, "
                       "mean over sequences (docs/conventions.md)",
    }
    return CompatResult(cfg, st, jobs, summary)


def _write(result: CompatResult, out: Path, force: bool) -> Path:
    from hpctwin.twin import __version__  # noqa: PLC0415
    from hpctwin.twin.csvout import write_csv  # noqa: PLC0415
    from hpctwin.twin.runfolder import fill_and_publish, prepare_out  # noqa: PLC0415
    from hpctwin.twin.tomlwrite import dumps as toml_dumps  # noqa: PLC0415

    def fill(tmp: Path) -> None:
        run = {k: v for k, v in asdict(result.config).items()      # only what the preset reads
               if k in ("workload", "scheduler", "backfill", "seed", "data_dir") and v is not None}
        run.update({"compat": "rlscheduler", "code_version": __version__})
        doc = {"run": run, "compat": asdict(result.settings)}
        (tmp / "config.toml").write_text(toml_dumps(doc))
        write_csv(result.jobs, tmp / "jobs.csv")
        (tmp / "summary.json").write_text(json.dumps(result.summary, indent=2) + "\n")
    return fill_and_publish(prepare_out(out, force=force), out, fill, force=force)


def run_compat(cfg, compat: str = "rlscheduler") -> CompatResult:
    """The Python-level ``--compat``: replay, then write ``cfg.out`` when it is set."""
    if compat not in COMPAT_NAMES:
        raise CompatError(f"--compat {compat!r}: known presets: {', '.join(COMPAT_NAMES)}")
    result = replay_config(cfg)
    if cfg.out:
        result.out = _write(result, Path(cfg.out), bool(cfg.force))
    return result


def format_compat_summary(s: dict) -> str:
    """The few lines ``hpctwin run --compat`` prints."""
    per = ", ".join(f"{v:.2f}" for v in s["sequence_mean_bsld"])
    return "\n".join([
        f"compat      rlscheduler ({s['harness']})",
        f"workload    {s['workload']}: {s['jobs_kept']} jobs kept, {s['machine_nodes']} nodes",
        f"heuristic   {s['heuristic']}, backfill {s['backfill']}",
        f"sequences   {s['sequences']} x {s['length']} jobs, seed {s['seed']}, slice {s['batch_job_slice']}, "
        f"starts {s['sequence_starts']}",
        f"mean bsld   {s['mean_bsld']:.4f} (per sequence: {per})",
        f"conventions {s['conventions']}",
    ])


def run_compat_cli(a, cfg) -> int:
    """``hpctwin run --compat NAME ...``: ``cfg`` from `twin.cli.config_from_args`; the default run
    folder is ``runs/compat-NAME-<the usual run name>`` (never the folder of an engine run)."""
    if getattr(a, "config", None):
        raise CompatError("--compat cannot be combined with --config")
    if a.out is None and cfg.out:
        cfg.out = str(Path(cfg.out).parent / f"compat-{a.compat}-{Path(cfg.out).name}")
    res = run_compat(cfg, a.compat)
    if not a.quiet:
        print(format_compat_summary(res.summary))
        if res.out is not None:
            print(f"run folder: {res.out}")
    return 0
