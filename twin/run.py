"""One run: resolve a configuration, load the workload, simulate, compute metrics, write the folder.

A run folder holds ``config.toml`` (the fully resolved configuration, with seeds and code version),
``jobs.csv`` (one row a job), ``timeseries.h5`` (series on the ``sample_dt`` grid, units as
attributes) and ``summary.json``. The folder is written under a temporary name and renamed when
complete, so an interrupted run never leaves a folder that looks finished.
"""
from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hpctwin.schedulers.base import JobTable
from hpctwin.schedulers.registry import make_scheduler

from . import __version__
from .runfolder import discard, fill_and_publish, prepare_out
from .metrics import CONVENTIONS, TAU, bounded_slowdown, interval_average, sample_at, summarise
from .model_api import ModelContext, ModelView, seeded_rng
from .ranges import parse_ranges
from .csvout import plain_columns, write_columns_csv, write_csv
from .fastpath import engine_fast_path
from .simulation import Simulation
from .system import SystemSpec, load_system
from .tomlwrite import dumps as toml_dumps
from .workload import Workload, job_states

if TYPE_CHECKING:
    import pandas as pd

#: the built-in default machine for synthetic runs
DEFAULT_SYSTEM = "generic"


class RunConfigError(ValueError):
    """A configuration that cannot run (bad option value, unknown workload...)."""


@dataclass
class RunConfig:
    """Everything that defines a run. Same config, same output bytes (``jobs.csv``)."""

    workload: str = "synthetic"
    scheduler: str = "easy"
    order: str | None = None
    backfill: str | None = None
    system: str | None = None
    nodes: int | None = None
    seed: int = 0
    placement: str = "first-fit"
    network: bool = False
    power: bool = False
    sample_dt: float = 15.0
    out: str | None = None
    quiet: bool = True
    kill_at_walltime: bool = True
    data_dir: str | None = None
    estimate: str = "requested"
    size_field: str = "auto"
    tau: float = TAU
    power_cap: float | None = None
    allocation: str = "node"
    gpus_per_node: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    force: bool = False      # replace an existing run folder at ``out`` (never any other folder)
    allow_empty: bool = False  # a workload with no job to simulate is an error unless this is set


class RunResult:
    """What a run gives back: ``jobs`` (pandas DataFrame, one row a job), ``summary`` (summary.json),
    ``timeseries`` ({name: (values on the sample grid, unit)}), the prepared workload, the run folder.

    The jobs table is kept as its columns ({name: array}) and turned into a DataFrame the first time
    ``jobs`` is read: the command line writes jobs.csv from the columns and never imports pandas.
    """

    def __init__(self, config: RunConfig, jobs: pd.DataFrame | dict[str, Any], summary: dict,
                 timeseries: dict[str, tuple[np.ndarray, str]], workload: Workload | None = None,
                 out: Path | None = None, system: SystemSpec | None = None, tables: dict | None = None):
        self.config, self._jobs, self.summary, self.timeseries = config, jobs, summary, timeseries
        self.workload, self.out, self.system = workload, out, system
        self.tables = {} if tables is None else tables      # models' own tables: file name -> DataFrame

    @property
    def jobs(self) -> pd.DataFrame:
        """The jobs table as a pandas DataFrame (built from the columns on first use)."""
        if isinstance(self._jobs, dict):
            self._jobs = jobs_dataframe(self._jobs)
        return self._jobs

    @jobs.setter
    def jobs(self, value: pd.DataFrame | dict[str, Any]) -> None:
        self._jobs = value

    @property
    def job_columns(self) -> dict[str, Any] | None:
        """The jobs table as {column name: array or list}, or None once it is a DataFrame."""
        return self._jobs if isinstance(self._jobs, dict) else None

    def __repr__(self) -> str:
        return (f"RunResult(workload={self.summary.get('workload')!r}, scheduler={self.summary.get('scheduler')!r}, "
                f"jobs={len(next(iter(self._jobs.values()), ())) if isinstance(self._jobs, dict) else len(self._jobs)}, "
                f"out={self.out!r})")


def jobs_dataframe(columns: dict[str, Any]) -> pd.DataFrame:
    """The jobs table's columns as the DataFrame ``RunResult.jobs`` (imports pandas)."""
    import pandas as pd  # noqa: PLC0415
    return pd.DataFrame(columns)


# ---------------------------------------------------------------------- workload loading
def load_workload(spec: str, *, data_dir: str | None = None, seed: int = 0, nodes: int | None = None,
                  size_field: str = "auto", options: dict | None = None) -> Workload:
    """A workload from a file (format detected or named: ``sacct:FILE``, ``alibaba-gpu:FILE``...), a
    registry name, ``synthetic[:k=v,...]`` or ``llm-synthetic[:...]`` (see `datasets.loader`)."""
    from hpctwin.datasets.loader import load_workload as _load  # noqa: PLC0415
    return _load(spec, data_dir=data_dir, seed=seed, nodes=nodes, size_field=size_field, options=options)


# ---------------------------------------------------------------------- preparation
@dataclass
class Prepared:
    """The jobs that will run, and what was skipped and why."""

    workload: Workload
    total: int
    total_source: str
    estimate: np.ndarray
    kill_limit: np.ndarray
    skipped: dict[str, int]
    notes: list[str]


def prepare(workload: Workload, total: int, total_source: str, *, estimate: str = "requested",
            kill_at_walltime: bool = True, seed: int = 0) -> Prepared:
    """Sort, skip impossible jobs (counted by reason), and set estimates and kill limits."""
    wl = workload.sorted()
    notes = list(wl.notes)
    skipped: dict[str, int] = {}
    bad_submit = ~(wl.submit >= 0)
    bad_run = ~(wl.runtime > 0) & ~bad_submit
    bad_size = (wl.procs < 1) & ~bad_submit & ~bad_run
    too_big = (wl.procs > total) & ~bad_submit & ~bad_run & ~bad_size
    for key, mask in (("submit_unknown", bad_submit), ("runtime_le_0", bad_run), ("size_le_0", bad_size),
                      ("larger_than_machine", too_big)):
        if mask.any():
            skipped[key] = int(mask.sum())
    keep = ~(bad_submit | bad_run | bad_size | too_big)
    if not keep.all():
        wl = wl.take(np.flatnonzero(keep))
    req = wl.requested_time
    has_req = np.isfinite(req) & (req > 0)
    missing = int((~has_req).sum())
    if missing:
        notes.append(f"{missing} jobs have no requested time: their runtime is used as estimate "
                     "and they are never killed")
    if estimate == "requested":
        est = np.where(has_req, req, wl.runtime)
    elif estimate == "exact":
        est = wl.runtime.copy()
        if kill_at_walltime:
            est = np.where(has_req, np.minimum(est, req), est)
        notes.append("estimate model: exact runtimes (clairvoyant)")
    else:
        try:
            from hpctwin.datasets.estimates import estimate_model  # noqa: PLC0415
        except ImportError:
            raise RunConfigError(f"unknown estimate model {estimate!r}; known: requested, exact") from None
        est = np.asarray(estimate_model(estimate, wl, seed), dtype=np.float64)
        if est.shape != (len(wl),) or not (np.isfinite(est) & (est > 0)).all():
            raise RunConfigError(f"estimate model {estimate!r} returned invalid estimates")
        notes.append(f"estimate model: {estimate} (the kill limit stays the requested time)")
    kill = np.where(has_req, req, np.inf) if kill_at_walltime else np.full(len(wl), np.inf)
    return Prepared(wl, total, total_source, est.astype(np.float64), kill, skipped, notes)


def job_table(p: Prepared) -> JobTable:
    wl = p.workload
    return JobTable(job_id=wl.job_id, submit=wl.submit, procs=wl.procs, estimate=p.estimate,
                    requested_time=wl.requested_time, user=wl.user, group=wl.group, queue=wl.queue,
                    partition=wl.partition, columns=wl.columns)


# ---------------------------------------------------------------------- run
def _resolve_machine(cfg: RunConfig, wl_machine: int | None, system: SystemSpec | None,
                     system_explicit: bool = True) -> tuple[int, str]:
    """Machine size: --nodes, else an explicit --system, else the workload's own size (SWF header,
    synthetic model), else the default system."""
    if cfg.nodes is not None:
        if cfg.nodes < 1:
            raise RunConfigError(f"--nodes must be >= 1, got {cfg.nodes}")
        return int(cfg.nodes), "--nodes option"
    if system is not None and (system_explicit or not wl_machine):
        return system.nodes, f"system {system.name} ({system.path})"
    if wl_machine:
        return int(wl_machine), "workload" + (f" ({system.name} system's node model)" if system is not None else "")
    raise RunConfigError("machine size unknown: the workload has no MaxProcs/MaxNodes header; "
                         "give --nodes or --system")


def _make_progress(total: int, quiet: bool, label: str):
    if quiet:
        return None
    try:
        from tqdm import tqdm  # noqa: PLC0415
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, unit="job", desc=label, file=sys.stderr, delay=2.0, mininterval=0.5,
                dynamic_ncols=True, leave=False)


def _build_models(cfg: RunConfig, system: SystemSpec | None, gpu: bool = False, units_per_node: int = 1) -> list:
    """The run's physics models, composed from the config by the model registry (`twin.models`)."""
    from .models import ModelConfigError, ModelSetup, build_models  # noqa: PLC0415
    try:
        return build_models(ModelSetup(cfg, system, gpu, units_per_node))
    except ModelConfigError as e:
        raise RunConfigError(str(e)) from None


def _check_policy_models(sched, models: list) -> None:
    """The policy's declared model needs are met, and it supports the models that take units down."""
    from .models import entry_of  # noqa: PLC0415
    have = {m.name for m in models}
    needs = list(getattr(sched, "needs_models", None) or ())
    if getattr(sched, "power_model", False) is None:       # older wrappers declare the need by attribute
        needs.append("power")
    for name in needs:
        if name not in have:
            raise RunConfigError(f"scheduler {sched.name} needs the {name} model: add --{name} on")
    if any(e is not None and e.interrupts for e in map(entry_of, models)) and not _supports_failures(sched):
        raise RunConfigError(f"scheduler {sched.name} does not support node failures (it keeps its own node "
                             "map); use an order x backfill policy or the llm wrapper, or turn failures off")


def _supports_failures(sched) -> bool:
    """False when the policy (or one it wraps) keeps its own node map that node outages would break."""
    while sched is not None:
        if getattr(sched, "supports_failures", True) is False:
            return False
        sched = getattr(sched, "inner", None)
    return True


def failure_columns(df: pd.DataFrame, res, runtime: np.ndarray, procs: np.ndarray) -> dict:
    """Per-job recovery metrics of a run with failures (adds columns to ``df``; returns summary figures).

    ``queued_s``: time spent waiting over all (re)queueings; ``held_s``: wall time holding units over
    all runs; ``work_done_s``: engine work over all runs (nominal s: runtime plus checkpoint writes,
    restarts and lost work); ``useful_work_s``: the runtime for completed jobs, the work done minus
    restarts and lost work for jobs killed at their requested time, 0 for failed jobs; ``ettr`` =
    useful / engine work (effective training time ratio); ``lost_unit_hours`` = held x units x (1 -
    ettr) / 3600 (exact when the job's rate was constant); ``lost_energy_j`` = the job's energy x (1 -
    ettr) when the power model ran. Goodput = sum(units x held x ettr) / sum(units x held).
    """
    work_done = res.work_done
    useful = np.where(np.isnan(res.start), 0.0, runtime)
    if "lost_work_s" in df:                    # ``df``: a DataFrame or the {name: column} table
        partial = np.maximum(work_done - np.asarray(df["restart_work_s"]) - np.asarray(df["lost_work_s"]), 0.0)
        useful = np.where(res.killed, np.minimum(partial, runtime), useful)
    useful = np.where(res.failed, 0.0, useful)
    with np.errstate(invalid="ignore", divide="ignore"):
        ettr = np.where(work_done > 0, np.minimum(useful / work_done, 1.0), np.nan)
    df["queued_s"] = res.queued
    df["held_s"] = res.held
    df["work_done_s"] = work_done
    df["useful_work_s"] = useful
    df["ettr"] = ettr
    lost_frac = np.where(np.isnan(ettr), 0.0, 1.0 - ettr)
    df["lost_unit_hours"] = res.held * procs * lost_frac / 3600.0
    out = {}
    if "energy_j" in df:
        e = np.asarray(df["energy_j"], dtype=np.float64)
        df["lost_energy_j"] = np.where(np.isnan(e), 0.0, e) * lost_frac
        out["lost_energy_kwh"] = float(np.nansum(np.asarray(df["lost_energy_j"])) / 3.6e6)
    area = res.held * procs
    out.update({
        "goodput": float(np.sum(area * np.where(np.isnan(ettr), 0.0, ettr)) / area.sum()) if area.sum() > 0 else None,
        "lost_unit_hours": float(np.nansum(np.asarray(df["lost_unit_hours"]))),
        "jobs_interrupted": int((res.interruptions > 0).sum()),
        "interruptions": int(res.interruptions.sum()),
        "jobs_failed": int(res.failed.sum()),
        "mean_queued_s": float(np.nanmean(res.queued[~np.isnan(res.start)])) if (~np.isnan(res.start)).any() else None,
    })
    return out


def _build_placer(cfg: RunConfig, total: int, system: SystemSpec | None, notes: list[str], jobs: JobTable):
    """The placer (None = the engine's built-in first-fit) and the node -> group map (or None).

    The group map needs the system's topology to hold ``total`` nodes; when it does not (a resized
    machine) and neither a topology-aware placement nor the network model asks for it, the run goes
    on without groups and says so in the notes.
    """
    node_group = None
    needs_groups = cfg.placement != "first-fit" or cfg.network
    if system is not None and system.network:
        from hpctwin.topology.presets import node_groups  # noqa: PLC0415
        try:
            node_group = node_groups(system.network, total, source=f"{system.path} [network]")
        except ValueError as e:
            if needs_groups:
                raise
            notes.append(f"no network groups for {total} nodes ({e}); groups_spanned not reported")
    if not needs_groups:
        return None, node_group
    from hpctwin.topology.placement import make_placer  # noqa: PLC0415
    placer = make_placer(cfg.placement)
    placer.bind(total, node_group, seeded_rng(cfg.seed, "placement"), jobs)
    return placer, node_group


ALLOCATIONS = ("node", "gpu")


def _occupancy_rows(wl: Workload, res, held: list, models: list, gpn: int):
    """Per-(job run) rows for the fragmentation metric: (submit, start, end, units, GPUs).

    Without failures, one row a job. With failures, a requeued job gives one row per run, the
    run's "submit" being the time it (re)entered the queue (so it counts as waiting in between),
    and every node outage gives a row that holds the node's GPUs from its failure to its repair and
    never waits."""
    outages = [o for m in models for o in (getattr(m, "outages", None) or ())]     # models taking nodes down
    if not res.segments and not outages:
        return wl.submit, res.start, res.end, held, wl.procs
    sub, st, en, un, g = [], [], [], [], []
    prev_end: dict[int, float] = {}
    for j, s0, e0, txt in res.segments:
        sub.append(prev_end.get(j, float(wl.submit[j])))
        st.append(s0); en.append(e0); un.append(parse_ranges(txt)); g.append(int(wl.procs[j]))
        prev_end[j] = e0
    last = res.last_start if res.last_start is not None else res.start
    for j in range(len(wl.submit)):
        if res.failed is not None and res.failed[j]:
            continue                              # its last run is among the interrupted segments
        sub.append(prev_end.get(j, float(wl.submit[j])))
        st.append(float(last[j])); en.append(float(res.end[j])); un.append(held[j]); g.append(int(wl.procs[j]))
    t_end = float(np.nanmax(res.end)) if np.isfinite(res.end).any() else 0.0
    for node, t0, t1 in outages:
        if t0 > t_end:
            continue
        sub.append(t0); st.append(t0); en.append(min(t1, t_end))
        un.append(np.arange(node * gpn, (node + 1) * gpn)); g.append(gpn)
    return (np.asarray(sub, dtype=float), np.asarray(st, dtype=float), np.asarray(en, dtype=float), un,
            np.asarray(g, dtype=np.int64))


def _gpu_mode(cfg: RunConfig, workload: Workload, system: SystemSpec | None,
              system_explicit: bool) -> tuple[Workload, int, int, str, np.ndarray | None]:
    """``allocation = "gpu"``: the machine's units are GPUs (``unit = node * G + local GPU``) and a
    job's ``procs`` is its GPU count (``columns["gpus"]``, fractional requests rounded up).
    Returns (workload, G, total GPUs, size source, node -> group map or None)."""
    import dataclasses  # noqa: PLC0415

    from hpctwin.topology.gpu_placement import whole_gpu_requests  # noqa: PLC0415
    gpn = cfg.gpus_per_node or (system.gpus_per_node if system is not None else 0)
    if not gpn or gpn < 1:
        raise RunConfigError("--allocation gpu needs the GPUs per node: --gpus-per-node G, or a --system "
                             "whose gpus_per_node > 0")
    unsupported = [name for name, on in (("--network on", cfg.network),
                                         ("--power-cap", cfg.power_cap is not None),
                                         (f"--placement {cfg.placement}", cfg.placement != "first-fit")) if on]
    if unsupported:
        raise RunConfigError(f"--allocation gpu does not support {', '.join(unsupported)} yet (those models "
                             "and placers work on whole nodes; GPU jobs are placed by the gpu-pack policy)")
    if "gpus" not in workload.columns:
        raise RunConfigError(f"--allocation gpu needs a per-job GPU count (workload column 'gpus'); "
                             f"workload {workload.name!r} has none")
    counts, rounded, no_gpu = whole_gpu_requests(workload.columns["gpus"], f"workload {workload.name} column 'gpus'")
    notes = list(workload.notes)
    notes.append(f"allocation gpu: units are GPUs (unit = node x {gpn} + local GPU); procs = the job's GPUs")
    if rounded:
        notes.append(f"{rounded} fractional GPU requests rounded up to whole GPUs (the engine does not share a GPU)")
    if no_gpu:
        notes.append(f"{no_gpu} jobs ask for no GPU: skipped (size_le_0)")
    wl = dataclasses.replace(workload, procs=counts, notes=notes, machine_size=None)
    if cfg.nodes is not None:
        if cfg.nodes < 1:
            raise RunConfigError(f"--nodes must be >= 1, got {cfg.nodes}")
        nodes, src = int(cfg.nodes), "--nodes option"
    elif system is not None and system_explicit:
        nodes, src = system.nodes, f"system {system.name} ({system.path})"
    else:
        raise RunConfigError("--allocation gpu: machine size unknown: give --nodes (nodes) or --system")
    node_group = None
    if system is not None and system.network:
        from hpctwin.topology.presets import node_groups  # noqa: PLC0415
        try:
            node_group = node_groups(system.network, nodes, source=f"{system.path} [network]")
        except ValueError as e:
            notes.append(f"no network groups for {nodes} nodes ({e}): multi-node GPU jobs take the lowest free nodes")
    return wl, int(gpn), nodes * int(gpn), f"{src}: {nodes} nodes x {gpn} GPUs", node_group


def run(cfg: RunConfig, workload: Workload | None = None) -> RunResult:
    """Execute one run; write its folder if ``cfg.out`` is set.

    ``cfg.out`` is checked before the simulation starts (see :mod:`hpctwin.twin.runfolder`): an existing
    run folder is replaced only with ``cfg.force``, and nothing that is not a run folder is ever deleted.
    """
    partial = prepare_out(Path(cfg.out), force=cfg.force) if cfg.out else None
    try:
        result = simulate(cfg, workload)
        if partial is not None:
            result.out = write_run(result, Path(cfg.out), result.system, force=cfg.force, partial=partial)
    except BaseException:
        if partial is not None:
            discard(partial)
        raise
    return result


@dataclass
class _Run:
    """The state of one run as `simulate` builds it, phase by phase."""

    cfg: RunConfig
    workload: Workload | None
    wall0: float


def simulate(cfg: RunConfig, workload: Workload | None = None) -> RunResult:
    """Execute one run in memory (no folder written): set-up, composition, engine, results."""
    r = _Run(cfg, workload, time.perf_counter())
    _setup(r)
    _compose(r)
    progress = r.progress
    from . import aot  # noqa: PLC0415
    t_sim, built0 = time.perf_counter(), aot.build_seconds()
    try:
        r.res = r.sim.run()
    finally:
        if progress is not None:
            progress.close()
    # a one-time kernel build during the run is announced on stderr and not counted as simulation time
    r.sim_wall = time.perf_counter() - t_sim - (aot.build_seconds() - built0)
    r.sim = None                       # the engine's per-job state is not needed for the results
    if len(r.res.start) >= RELEASE_MEMORY_JOBS:
        _release_memory()
    _jobs_frame(r)
    _summary(r)
    _series(r)
    _model_results(r)
    tables = {k: v for m in r.models for k, v in (m.tables() if hasattr(m, "tables") else {}).items()}
    if r.held:                                 # node requests never submitted are not jobs of the run
        from .serving.held import trim_held  # noqa: PLC0415
        r.df = trim_held(jobs_dataframe(r.df), r.summary, r.wl.submit, r.held)
    return RunResult(cfg, r.df, r.summary, r.ts, r.wl, system=r.system, tables=tables)


#: runs with at least this many jobs hand the engine's freed state back to the OS before the results
#: are built (a full gc.collect costs ~0.1 s: too much for the many small runs of sweeps and tests)
RELEASE_MEMORY_JOBS = 100_000


def _release_memory() -> None:
    """Give the engine's freed per-job state back to the operating system before the results are built
    (glibc keeps freed heap pages otherwise: a 10^6-job run's peak memory is that state plus the
    series on the sample grid)."""
    import ctypes  # noqa: PLC0415
    import gc  # noqa: PLC0415
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):      # not glibc (macOS, musl, Windows): nothing to trim
        pass


def _setup(r: _Run) -> None:
    """System, workload, machine size, the prepared jobs."""
    cfg, workload = r.cfg, r.workload
    gpn, gpu_groups = 1, None
    system_explicit = cfg.system is not None
    system = load_system(cfg.system) if cfg.system else None
    if system is None and (cfg.workload == "synthetic" or cfg.workload.startswith("synthetic:")) and cfg.nodes is None:
        system = load_system(DEFAULT_SYSTEM)   # the built-in default machine for synthetic runs
    # cfg is not mutated: config.toml must say whether the system was given, for a byte-identical re-run
    system_name = cfg.system or (DEFAULT_SYSTEM if system is not None else None)
    if cfg.sample_dt <= 0:
        raise RunConfigError(f"sample_dt must be > 0 s, got {cfg.sample_dt}")
    if workload is None:
        nodes_hint = cfg.nodes or (system.nodes if system else None)
        workload = load_workload(cfg.workload, data_dir=cfg.data_dir, seed=cfg.seed, nodes=nodes_hint,
                                 size_field=cfg.size_field, options=cfg.options.get("workload"))
    from .options import check_loaded  # noqa: PLC0415
    check_loaded(cfg, workload)              # an empty or header-only file says so (issue 14)
    if cfg.allocation not in ALLOCATIONS:
        raise RunConfigError(f"unknown allocation {cfg.allocation!r}; choose one of {', '.join(ALLOCATIONS)}")
    gpu_mode = cfg.allocation == "gpu"
    if gpu_mode:
        workload, gpn, total, total_source, gpu_groups = _gpu_mode(cfg, workload, system, system_explicit)
    else:
        if cfg.scheduler == "gpu-pack":
            raise RunConfigError("--scheduler gpu-pack needs --allocation gpu (units must be GPUs)")
        total, total_source = _resolve_machine(cfg, workload.machine_size, system, system_explicit)
    if total_source.startswith("workload") and workload.machine_size_source:
        total_source = total_source.replace("workload", f"workload {workload.machine_size_source}", 1)
    prep = prepare(workload, total, total_source, estimate=cfg.estimate,
                   kill_at_walltime=cfg.kill_at_walltime, seed=cfg.seed)
    from .options import check_prepared  # noqa: PLC0415
    check_prepared(cfg, workload, prep)      # empty workload, sample grid, scheduler needs (issue 14)
    jobs = job_table(prep)
    # the loaded workload is not kept (the prepared one is its sorted copy): only what summary.json says of it
    # (a 448k-job log's columns are ~60 MB, held through the simulation otherwise)
    r.__dict__.update(system_explicit=system_explicit, system=system, system_name=system_name, workload=None,
                      jobs_in_log=len(workload), dropped=dict(workload.dropped),
                      gpu_mode=gpu_mode, gpn=gpn, gpu_groups=gpu_groups, total=total, total_source=total_source,
                      prep=prep, jobs=jobs)


def _compose(r: _Run) -> None:
    """The policy, the models (through the registry), the gates, the placer and the engine."""
    cfg, system, system_name, gpu_mode, gpn, gpu_groups = r.cfg, r.system, r.system_name, r.gpu_mode, r.gpn, r.gpu_groups
    total, prep, jobs = r.total, r.prep, r.jobs
    sched_options = dict(cfg.options.get("scheduler", {}))
    if cfg.scheduler == "llm" and system_name:
        sched_options.setdefault("system", system_name)
    if gpu_mode and cfg.scheduler == "gpu-pack":
        sched_options.setdefault("gpus_per_node", gpn)
        sched_options.setdefault("node_group", gpu_groups)
    sched = make_scheduler(cfg.scheduler, cfg.order, cfg.backfill, sched_options)
    if gpu_mode:
        from hpctwin.schedulers.gpu_packing import GPUPackingScheduler  # noqa: PLC0415
        if not isinstance(sched, GPUPackingScheduler):     # any policy, packed with the defaults
            gopts = dict(cfg.options.get("gpu", {}))
            sched = GPUPackingScheduler(inner=sched, policy=gopts.get("policy", "best-fit"), gpus_per_node=gpn,
                                        node_group=gpu_groups, on_unpackable=gopts.get("on_unpackable", "skip"))
        elif sched.gpus_per_node != gpn:
            raise RunConfigError(f"scheduler option gpus_per_node = {sched.gpus_per_node} differs from the "
                                 f"machine's {gpn} GPUs per node")
    if cfg.power_cap is not None and not cfg.power:
        raise RunConfigError("--power-cap needs --power on (the cap is checked against the power model)")
    models = _build_models(cfg, system, gpu_mode, gpn if gpu_mode else 1)
    held = 0
    if any(hasattr(m, "held_jobs") for m in models):   # node requests a model submits at run time (serving)
        from .serving.held import attach_held  # noqa: PLC0415
        prep, jobs, held = attach_held(prep, jobs, models)
        r.prep, r.jobs = prep, jobs
    gates = []
    if cfg.power_cap is not None:             # refuses starts above the cap (Gate protocol; the model throttles)
        from hpctwin.power.capgate import PowerCapGate  # noqa: PLC0415
        gates.append(PowerCapGate(margin=float(cfg.options.get("power", {}).get("cooling_overhead", 0.0))))
    _check_policy_models(sched, models)
    if getattr(sched, "power_model", False) is None and "power" not in (getattr(sched, "needs_models", None) or ()):
        # a wrapper written before bind contexts (it reads ``power_model``): given a read-only view
        sched.power_model = next(ModelView(m) for m in models if m.name == "power")
    if gpu_mode:
        placer, node_group = None, None          # the gpu-pack wrapper returns the units of every start
    else:
        placer, node_group = _build_placer(cfg, total, system, prep.notes, jobs)
    ctx = ModelContext(n_nodes=total, jobs=jobs, runtime=prep.workload.runtime, system=system,
                       seed=cfg.seed, options=cfg.options, units_per_node=gpn if gpu_mode else None)
    progress = _make_progress(len(prep.workload), cfg.quiet, f"{prep.workload.name} {sched.name}")
    sim = Simulation(jobs, prep.workload.runtime, prep.kill_limit, sched, total, placer=placer,
                     models=models, context=ctx, progress=progress, gates=gates,
                     node_group=node_group if node_group is not None else (gpu_groups if gpu_mode else None),
                     fast_path=engine_fast_path, held_jobs=held)     # compiled replay when eligible
    r.__dict__.update(held=held, sched=sched, models=models, gates=gates, placer=placer, node_group=node_group, sim=sim,
                      progress=progress)


def _jobs_frame(r: _Run) -> None:
    """The jobs table (one row a job), with the models' columns and GPU occupancy."""
    cfg, prep, res, models, node_group, gpu_mode = r.cfg, r.prep, r.res, r.models, r.node_group, r.gpu_mode
    gpn, total = r.gpn, r.total
    frag = frag_rows = None
    wl = prep.workload
    wait = res.start - wl.submit
    runt = res.end - res.start
    bsld = bounded_slowdown(wait, runt, cfg.tau)
    df: dict[str, Any] = {                  # the jobs table's columns (RunResult.jobs makes the DataFrame)
        "job_id": wl.job_id, "submit": wl.submit, "start": res.start, "end": res.end,
        "wait": wait, "elapsed": runt, "procs": wl.procs, "timelimit": wl.requested_time,
        "estimate": prep.estimate, "bsld": bsld,
        "state": job_states(res.failed, res.killed, res.start, res.cancelled),
        "log_status": wl.status, "user": wl.user, "group": wl.group, "queue": wl.queue,
        "partition": wl.partition,
        "nodes": [x if x is not None else "" for x in res.nodes],
    }
    if res.cancel_time is not None:         # only runs where a model withdrew a waiting job (same bytes otherwise)
        df["cancel_time"] = res.cancel_time  # s; Slurm's End of a job cancelled while pending (control.cancel)
    for m in models:
        for k, v in m.job_columns().items():
            df[k] = v
    if node_group is not None and "groups_spanned" not in df:
        from hpctwin.topology.placement import groups_spanned  # noqa: PLC0415
        df["groups_spanned"] = [groups_spanned(parse_ranges(x), node_group) if x else 0 for x in df["nodes"]]
    if gpu_mode:
        from hpctwin.twin.fragmentation import fragmentation_series  # noqa: PLC0415
        held = [parse_ranges(x) for x in df["nodes"]]
        frag_rows = f_sub, f_start, f_end, f_units, f_gpus = _occupancy_rows(wl, res, held, models, gpn)
        lens = np.fromiter((len(u) for u in held), dtype=np.int64, count=len(held))
        if lens.sum():                           # distinct nodes per job, without a per-job np.unique
            key = np.unique(np.repeat(np.arange(len(held)), lens) * (total // gpn) + np.concatenate(held) // gpn)
            df["gpu_nodes"] = np.bincount(key // (total // gpn), minlength=len(held))
        else:
            df["gpu_nodes"] = np.zeros(len(held), dtype=np.int64)
        frag = fragmentation_series(f_sub, f_start, f_end, f_units, f_gpus, gpn, total)
    r.__dict__.update(wl=wl, df=df, frag=frag, frag_rows=frag_rows)


def _summary(r: _Run) -> None:
    """summary.json: metrics, provenance, the policy's and gates' figures."""
    cfg, prep, res, sched, gates = r.cfg, r.prep, r.res, r.sched, r.gates
    placer, system, total, total_source, gpu_mode, gpn = r.placer, r.system, r.total, r.total_source, r.gpu_mode, r.gpn
    wl, df, frag, wall0, sim_wall = r.wl, r.df, r.frag, r.wall0, r.sim_wall
    if placer is not None and hasattr(placer, "describe"):
        summary_extra = {"placement": placer.describe()}
    else:
        summary_extra = {"placement": {"name": cfg.placement}}
    summary = summarise(wl.submit, res.start, res.end, wl.procs, total, cfg.tau)
    summary.update({
        "workload": wl.name, "workload_source": wl.source, "scheduler": sched.name,
        "unix_start_time": _unix_start(wl),
        "scheduler_params": sched.describe() if hasattr(sched, "describe") else {"name": sched.name},
        "machine_units": total, "machine_size_source": total_source,
        "system": system.name if system else None,
        "jobs_in_log": r.jobs_in_log, "jobs_simulated": len(wl),
        "jobs_skipped": prep.skipped, "jobs_killed_at_walltime": int(res.killed.sum()),
        "estimate_model": cfg.estimate, "kill_at_walltime": cfg.kill_at_walltime,
        "notes": prep.notes, "conventions": CONVENTIONS.format(tau=cfg.tau, window=" (no warm-up excluded)"),
        "events": res.events, "scheduling_passes": res.passes,
        "wall_seconds": round(time.perf_counter() - wall0, 3), "simulation_seconds": round(sim_wall, 3),
        "jobs_per_second": round(len(wl) / sim_wall, 1) if sim_wall > 0 else None,
        "code_version": __version__,
    })
    summary.update(summary_extra)
    if gates:                                 # starts each gate refused (res.refusals: with the rest of the pass)
        summary["gates"] = {g.name: {**g.describe(), "refusals": int(res.refusals.get(g.name, 0))} for g in gates}
    if placer is not None and getattr(placer, "warning", None) and placer.warning():
        prep.notes.append(placer.warning())
    from .workload import job_accounting  # noqa: PLC0415
    summary["accounting"] = job_accounting(r.jobs_in_log + sum(r.dropped.values()), r.dropped,
                                           prep.skipped, np.asarray(df["state"]))
    if gpu_mode:
        summary["allocation"] = {"units": "gpu", "gpus_per_node": gpn, "nodes": total // gpn}
        summary["gpu_fragmentation"] = frag.summary()
    if "groups_spanned" in df:
        gs = np.asarray(df["groups_spanned"])[~np.isnan(res.start)]
        summary["mean_groups_spanned"] = float(gs.mean()) if len(gs) else None
    r.__dict__.update(summary=summary)


def _series(r: _Run) -> None:
    """Time series on the ``sample_dt`` grid."""
    cfg, res, models, total, gpu_mode, gpn = r.cfg, r.res, r.models, r.total, r.gpu_mode, r.gpn
    wl, frag_rows = r.wl, r.frag_rows
    if gpu_mode:
        from hpctwin.twin.fragmentation import fragmentation_series  # noqa: PLC0415
        f_sub, f_start, f_end, f_units, f_gpus = frag_rows
    # time series on the sample grid
    dt = float(cfg.sample_dt)
    ts: dict[str, tuple[np.ndarray, str]] = {}
    if len(res.change_t):
        t0 = math.floor(float(wl.submit.min()) / dt) * dt if len(wl) else 0.0
        t1 = float(np.nanmax(res.end)) if np.isfinite(res.end).any() else t0
        grid = t0 + dt * np.arange(max(1, int(math.ceil((t1 - t0) / dt))))
        ts["time"] = (grid, "s (start of each interval, log clock)")
        ts["utilisation"] = (interval_average(res.change_t, res.change_busy / total, grid, dt, dtype=np.float32),
                             "fraction of units busy, average over [t, t+dt)")
        ts["queue_length"] = (sample_at(res.change_t, res.change_queue, grid, dtype=np.int32),
                              "jobs waiting at time t")
        for m in models:
            ts.update(m.timeseries(grid, dt))
        if gpu_mode:
            on_grid = fragmentation_series(f_sub, f_start, f_end, f_units, f_gpus, gpn, total, times=grid)
            ts["fragmented_gpus"] = (on_grid.fragmented.astype(np.int32),
                                     "GPUs free but unusable by every waiting job, at time t")
            ts["free_gpus"] = (on_grid.free.astype(np.int32), "GPUs free at time t")
    r.__dict__.update(ts=ts)


def _model_results(r: _Run) -> None:
    """The models' summary tables, and recovery metrics when a model interrupted jobs."""
    models, summary, df, res, wl = r.models, r.summary, r.df, r.res, r.wl
    for m in models:
        summary.update(m.summary())
    from .models import entry_of  # noqa: PLC0415
    for m in models:
        if (e := entry_of(m)) is not None and e.interrupts:    # recovery metrics of the interrupted jobs
            summary[m.name].update(failure_columns(df, res, wl.runtime, wl.procs))


def _unix_start(wl: Workload) -> float | None:
    v = wl.header.get("UnixStartTime")
    try:
        return float(str(v).split()[0]) if v is not None else None
    except ValueError:
        return None


# ---------------------------------------------------------------------- writing
def resolved_config(cfg: RunConfig, summary: dict, system: SystemSpec | None) -> dict:
    """config.toml's content: ``[run]`` (the config and facts: machine units, code version and identity,
    Python and numpy versions), ``[options]``, ``[system]`` and, when the run read files, ``[inputs]``
    (one ``[inputs.NAME]`` table a file: absolute path, SHA-256 and size in bytes; `twin.inputs`)."""
    from .inputs import code_identity, input_fingerprints  # noqa: PLC0415
    d = {k: v for k, v in asdict(cfg).items() if k not in ("options", "quiet", "out", "force")}
    d["machine_units"] = summary.get("machine_units")
    d["machine_size_source"] = summary.get("machine_size_source")
    d["code_version"] = __version__
    d["code_identity"] = code_identity()
    d["python"] = sys.version.split()[0]
    d["numpy"] = np.__version__
    out = {"run": d}
    if cfg.options:
        out["options"] = cfg.options
    if system is not None:
        out["system"] = {"name": system.name, "path": system.path, "nodes": system.nodes}
    inputs = {k: v for k, v in input_fingerprints(cfg, missing_ok=True).items() if v["sha256"] is not None}
    if inputs:
        out["inputs"] = inputs
    return out


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def _clean_json(o):
    """NaN/inf are not valid JSON: write them as null."""
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, dict):
        return {k: _clean_json(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean_json(v) for v in o]
    return o


def write_jobs_csv(result: RunResult, path: Path) -> None:
    """jobs.csv with the bytes of ``result.jobs.to_csv(index=False)``; from the columns without pandas
    when every column is a plain numeric/bool/text array (`csvout.plain_columns`)."""
    cols = result.job_columns
    if cols is not None and plain_columns(cols):
        write_columns_csv(cols, path)
    else:
        write_csv(result.jobs, path)


def write_run(result: RunResult, out: Path, system: SystemSpec | None = None, *, force: bool = False,
              partial: Path | None = None) -> Path:
    """Write the run folder: into a partial sibling folder, then published atomically (``runfolder``).

    ``partial`` is the folder :func:`runfolder.prepare_out` created before the run; without it, ``out``
    is checked and prepared here. An existing run folder at ``out`` is replaced only with ``force``.
    """
    out = Path(out)
    tmp = partial if partial is not None else prepare_out(out, force=force)
    return fill_and_publish(tmp, out, lambda d: _write_run_files(result, d, system), force=force)


def _write_run_files(result: RunResult, tmp: Path, system: SystemSpec | None) -> None:
    """config.toml, jobs.csv, the models' tables, timeseries.h5 and summary.json, into ``tmp``."""
    (tmp / "config.toml").write_text(toml_dumps(resolved_config(result.config, result.summary, system)))
    write_jobs_csv(result, tmp / "jobs.csv")      # the bytes of jobs.to_csv(index=False), faster
    for name, frame in result.tables.items():      # models' own tables (serving requests...)
        write_csv(frame, tmp / name)
    import h5py  # noqa: PLC0415
    with h5py.File(tmp / "timeseries.h5", "w", track_order=True) as h5:
        h5.attrs["sample_dt_s"] = float(result.config.sample_dt)
        h5.attrs["workload"] = str(result.summary.get("workload"))
        h5.attrs["scheduler"] = str(result.summary.get("scheduler"))
        for name, (values, unit) in result.timeseries.items():
            # gzip level 1 after byte shuffling: a third of level 4's CPU time and a smaller file on year-long
            # series (RICC: 0.05 vs 0.12 CPU s, 0.95 vs 2.2 MB); the values are the same
            dset = h5.create_dataset(name, data=np.asarray(values), compression="gzip", compression_opts=1,
                                     shuffle=True)
            dset.attrs["units"] = unit
    summary = json.loads(json.dumps(result.summary, default=_json_default))
    (tmp / "summary.json").write_text(json.dumps(_clean_json(summary), indent=2, allow_nan=False) + "\n")
