"""One run: a plan executed (set-up, composition, engine, results) and its run folder written.

`run(cfg)` is ``execute(plan(cfg))``: `twin.plan.plan` validates the configuration as the command
line does and resolves every name to its table entry (scheduler, models, placement, allocation);
`execute` goes through the phases, each a function returning a record with declared fields:
`setup` (`Setup`: workload, machine units, prepared jobs), `compose` (`Composition`: policy, models,
gates, placer), the engine, and the results (`twin.results`). Nothing here is chosen by a scheduler's
or a model's name: what a policy needs comes from its entry, what a model does from its own hooks
(held node-request jobs: `twin.held`), what an allocation unit changes from the allocation strategy
(`twin.allocation`).

A run folder holds ``config.toml`` (the fully resolved configuration, with seeds and code version),
``jobs.csv`` (one row a job), ``timeseries.h5`` (series on the ``sample_dt`` grid, units as
attributes) and ``summary.json``. The folder is written under a temporary name and renamed when
complete, so an interrupted run never leaves a folder that looks finished.
"""
from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hpctwin.schedulers.base import JobTable
from hpctwin.schedulers.registry import make_scheduler

from . import __version__
from . import results as R
from .allocation import Units
from .backends import engine_fast_path
from .config import RunConfig, recorded_fields
from .csvout import plain_columns, write_columns_csv, write_csv
from .errors import RunConfigError
from .contract import lazy_seeded_rng
from .model_api import ModelContext
from .plan import DEFAULT_SYSTEM, Plan, as_config_error, check_model_needs, plan
from .results import failure_columns
from .runfolder import discard, fill_and_publish, prepare_out
from .simulation import Simulation
from .system import SystemSpec
from .tomlwrite import dumps as toml_dumps
from .workload import Workload

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DEFAULT_SYSTEM", "Plan", "RunConfig", "RunConfigError", "RunResult", "execute", "failure_columns",
           "job_table", "job_window", "load_workload", "plan", "prepare", "run", "simulate", "write_run"]


class RunResult:
    """What a run gives back: ``jobs`` (pandas DataFrame, one row a job), ``summary`` (summary.json),
    ``timeseries`` ({name: (values on the sample grid, unit)}), the prepared workload, the run folder.

    The jobs table is kept as its columns ({name: array}) and turned into a DataFrame the first time
    ``jobs`` is read: the command line writes jobs.csv from the columns and never imports pandas.

    Examples
    --------
    >>> import hpctwin
    >>> res = hpctwin.run(hpctwin.RunConfig(workload="synthetic:jobs=100,nodes=16", scheduler="easy"))
    >>> res
    RunResult(workload='lublin(jobs=100,nodes=16,seed=0,load=None)', scheduler='easy', jobs=100, out=None)
    >>> list(res.jobs.columns[:6])
    ['job_id', 'submit', 'start', 'end', 'wait', 'elapsed']
    >>> int((res.jobs["state"] == "COMPLETED").sum())
    100
    >>> res.summary["jobs_simulated"], res.summary["machine_units"], round(res.summary["utilisation"], 3)
    (100, 16, 0.534)
    >>> values, unit = res.timeseries["queue_length"]
    >>> unit
    'jobs waiting at time t'
    """

    def __init__(self, config: RunConfig, jobs: pd.DataFrame | dict[str, Any], summary: dict,
                 timeseries: dict[str, tuple[np.ndarray, str]], workload: Workload | None = None,
                 out: Path | None = None, system: SystemSpec | None = None, tables: dict | None = None,
                 plan: Plan | None = None):
        self.config, self._jobs, self.summary, self.timeseries = config, jobs, summary, timeseries
        self.workload, self.out, self.system = workload, out, system
        self.tables = {} if tables is None else tables      # models' own tables: file name -> DataFrame
        self.plan = plan                                    # the plan that ran (`twin.plan.Plan`)

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
                f"jobs="
                f"{len(next(iter(self._jobs.values()), ())) if isinstance(self._jobs, dict) else len(self._jobs)}, "
                f"out={self.out!r})")


def jobs_dataframe(columns: dict[str, Any]) -> pd.DataFrame:
    """The jobs table's columns as the DataFrame ``RunResult.jobs`` (imports pandas)."""
    import pandas as pd  # noqa: PLC0415
    return pd.DataFrame(columns)


# ---------------------------------------------------------------------- workload loading
def load_workload(spec: str, *, data_dir: str | None = None, seed: int = 0, nodes: int | None = None,
                  size_field: str = "auto", options: dict | None = None,
                  gpus_per_node: int | None = None) -> Workload:
    """A workload from a file (format detected or named: ``sacct:FILE``, ``alibaba-gpu:FILE``...), a
    registry name, ``synthetic[:k=v,...]`` or ``llm-synthetic[:...]`` (see `datasets.loader`;
    ``gpus_per_node``: the system's, which ``llm-synthetic`` sizes its gangs to).

    Examples
    --------
    >>> import hpctwin
    >>> wl = hpctwin.load_workload("synthetic:jobs=100,nodes=16")
    >>> wl.name, len(wl), wl.machine_size
    ('lublin(jobs=100,nodes=16,seed=0,load=None)', 100, 16)
    >>> wl.job(0).procs, wl.job(0).runtime
    (2, 143.0)
    """
    from hpctwin.datasets.loader import load_workload as _load  # noqa: PLC0415
    from hpctwin.datasets.registry import DatasetError  # noqa: PLC0415
    try:
        return _load(spec, data_dir=data_dir, seed=seed, nodes=nodes, size_field=size_field, options=options,
                     gpus_per_node=gpus_per_node)
    except DatasetError as e:                # an unknown or missing dataset is a configuration error too
        raise as_config_error(e) from None


def job_window(workload: Workload, max_jobs: int | None = None, skip_jobs: int | None = None) -> Workload:
    """Jobs ``skip_jobs + 1`` .. ``skip_jobs + max_jobs`` of ``workload`` in submit order (submit time,
    then job id: `Workload.sorted`, the order the engine submits them), counted over every job the
    reader returned (before jobs that cannot run are skipped). ``None`` for both returns ``workload``
    itself; a window says so in the workload's notes. A bad value or a window past the last job is a
    `RunConfigError` naming the option."""
    if max_jobs is None and skip_jobs is None:
        return workload
    for name, v, low in (("max_jobs", max_jobs, 1), ("skip_jobs", skip_jobs, 0)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low):
            raise RunConfigError(f"--{name.replace('_', '-')} must be a whole number >= {low}, got {v!r}")
    n = len(workload)
    k = int(skip_jobs or 0)
    if k and k >= n:
        raise RunConfigError(f"--skip-jobs {k} leaves no job: workload {workload.name!r} has {n} jobs")
    stop = n if max_jobs is None else min(n, k + int(max_jobs))
    wl = workload.sorted().take(np.arange(k, stop))
    wl.notes = list(wl.notes) + [f"job window: jobs {k + 1}-{stop} of {n} in submit order"
                                 + (f" (--skip-jobs {k})" if k else "")
                                 + (f" (--max-jobs {max_jobs})" if max_jobs is not None else "")]
    return wl


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
    """What the scheduler reads about the prepared run's jobs (`JobTable.of`)."""
    return JobTable.of(p.workload, p.estimate)


# ---------------------------------------------------------------------- helpers
def _make_progress(total: int, quiet: bool, label: str):
    if quiet:
        return None
    try:
        from tqdm import tqdm  # noqa: PLC0415
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, unit="job", desc=label, file=sys.stderr, delay=2.0, mininterval=0.5,
                dynamic_ncols=True, leave=False)


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


# ---------------------------------------------------------------------- the phases
@dataclass(frozen=True)
class Setup:
    """What `setup` gives: the machine's units (`twin.allocation.Units`; ``total_source`` says where
    their number came from), the prepared jobs, and what summary.json says of the loaded log (jobs in
    it, records the reader dropped). The loaded workload itself is not kept (the prepared one is its
    sorted copy; a 448k-job log's columns are ~60 MB, held through the simulation otherwise)."""

    units: Units
    total_source: str
    prep: Prepared
    jobs: JobTable
    jobs_in_log: int
    dropped: dict


@dataclass(frozen=True)
class Composition:
    """What `compose` gives: the policy (as the engine calls it), the models (registry order, then
    any extra ones), the gates, the placer (None: the engine's first fit) and its node -> group map,
    the number of held node-request rows (`twin.held`) and the prepared jobs with them."""

    sched: Any
    models: list
    gates: list
    placer: Any
    node_group: np.ndarray | None
    held: int
    prep: Prepared
    jobs: JobTable


def setup(p: Plan, workload: Workload | None = None) -> Setup:
    """Load the workload (unless given), apply the job window, size the machine (the allocation
    strategy) and prepare the jobs; the workload checks of `twin.options` run on the way."""
    from .options import check_loaded, check_prepared  # noqa: PLC0415
    cfg, system = p.config, p.system
    if workload is None:
        nodes_hint = cfg.nodes or (system.nodes if system else None)
        workload = load_workload(cfg.workload, data_dir=cfg.data_dir, seed=cfg.seed, nodes=nodes_hint,
                                 size_field=cfg.size_field, options=cfg.options.get("workload"),
                                 gpus_per_node=system.gpus_per_node if system is not None else None)
    check_loaded(cfg, workload)              # an empty or header-only file says so (issue 14)
    jobs_in_log = len(workload)
    workload = job_window(workload, cfg.max_jobs, cfg.skip_jobs)   # --max-jobs / --skip-jobs
    if cfg.nodes is None and system is None and not workload.machine_size:
        workload = _policy_machine(p, workload)
    units = p.allocation.units(cfg, workload, system, p.system_explicit)
    if not p.allocation.gpu:                 # a policy may count the machine its own way (entry ``units``)
        units = p.scheduler.entry.adapt_units(cfg, units, p.scheduler.options)
    workload, total_source = units.workload, units.source
    if total_source.startswith("workload") and workload.machine_size_source:
        total_source = total_source.replace("workload", f"workload {workload.machine_size_source}", 1)
    prep = prepare(workload, units.total, total_source, estimate=cfg.estimate,
                   kill_at_walltime=cfg.kill_at_walltime, seed=cfg.seed)
    check_prepared(cfg, workload, prep)      # empty workload, sample grid, scheduler needs (issue 14)
    return Setup(units, total_source, prep, job_table(prep), jobs_in_log, dict(workload.dropped))


def _policy_machine(p: Plan, workload: Workload) -> Workload:
    """The workload sized by the machine its policy's configuration describes (the scheduler entry's
    ``machine`` hook: Slurm's slurm.conf), when nothing else sizes it; else the workload as it is."""
    got = p.scheduler.entry.machine_size(p.scheduler.options)
    if got is None:
        return workload
    return dataclasses.replace(workload, machine_size=int(got[0]), machine_size_source=got[1])


def compose(p: Plan, s: Setup, extra_models: tuple | list = ()) -> Composition:
    """The policy (its entry's run-valued options, wrapped by the allocation strategy), the models
    (the plan's entries, then ``extra_models``), held node-request rows, the gates and the placer."""
    from .held import attach_held  # noqa: PLC0415
    from .models import ModelSetup, build_models  # noqa: PLC0415
    cfg, units, entry = p.config, s.units, p.scheduler.entry
    sched_options = dict(p.scheduler.options)
    run_values = {"system": p.system_name, "placement": cfg.placement, **p.allocation.scheduler_values(units)}
    for key in entry.from_run:                   # options that default to the run's values
        if run_values.get(key) is not None:
            sched_options.setdefault(key, run_values[key])
    sched = make_scheduler(p.scheduler.spec, p.scheduler.order, p.scheduler.backfill, sched_options)
    sched = p.allocation.wrap(sched, entry, cfg, units)
    gpu = p.allocation.gpu
    models = build_models(ModelSetup(cfg, p.system, gpu, units.per_node if gpu else 1), list(p.models))
    models += list(extra_models)
    prep, jobs, held = attach_held(s.prep, s.jobs, models)    # node requests a model submits at run time
    gates = []
    if cfg.power_cap is not None:             # refuses starts above the cap (Gate protocol; the model throttles)
        from hpctwin.power.capgate import PowerCapGate  # noqa: PLC0415
        gates.append(PowerCapGate(margin=float(cfg.options.get("power", {}).get("cooling_overhead", 0.0))))
    _check_policy(p, sched, models)
    placer, node_group = p.allocation.placer(cfg, units, p.system, prep.notes, jobs,
                                             lazy_seeded_rng(cfg.seed, "placement"))
    return Composition(sched, models, gates, placer, node_group, held, prep, jobs)


def _check_policy(p: Plan, sched, models: list) -> None:
    """What the built policy object declares (``needs_models``, ``supports_failures`` of it or of a
    policy it wraps) is met by the run (the entry's declarations were checked by the plan)."""
    from .models import entry_of, providers  # noqa: PLC0415
    have = [e for e in p.models] + [m for m in models if entry_of(m) is None]   # extra models: by name
    check_model_needs(sched.name, list(getattr(sched, "needs_models", None) or ()),
                      [e if hasattr(e, "provides") else _Provides(e.name) for e in have], providers)
    if any(e.interrupts for e in p.models) and not _supports_failures(sched):
        raise RunConfigError(f"scheduler {sched.name} does not support node failures (it keeps its own node "
                             "map); use an order x backfill policy or the llm wrapper, or turn failures off")


@dataclass(frozen=True)
class _Provides:
    """A model without a registry entry (added by a caller): it provides its name."""

    name: str

    @property
    def provides(self) -> tuple[str, ...]:
        return (self.name,)


def _supports_failures(sched) -> bool:
    """False when the policy (or one it wraps) keeps its own node map that node outages would break."""
    while sched is not None:
        if getattr(sched, "supports_failures", True) is False:
            return False
        sched = getattr(sched, "inner", None)
    return True


def _engine(p: Plan, s: Setup, c: Composition) -> tuple[Simulation, Any]:
    """The engine over the composed run, and its progress bar (or None)."""
    cfg, units, prep = p.config, s.units, c.prep
    ctx = ModelContext(n_nodes=units.total, jobs=c.jobs, runtime=prep.workload.runtime, system=p.system,
                       seed=cfg.seed, options=cfg.options, units_per_node=units.per_node if p.allocation.gpu else None,
                       log_start=prep.workload.unix_start)
    progress = _make_progress(len(prep.workload), cfg.quiet, f"{prep.workload.name} {c.sched.name}")
    sim = Simulation(c.jobs, prep.workload.runtime, prep.kill_limit, c.sched, units.total, placer=c.placer,
                     models=c.models, context=ctx, progress=progress, gates=c.gates,
                     node_group=p.allocation.engine_groups(units, c.node_group),
                     fast_path=engine_fast_path, held_jobs=c.held)     # compiled replay when eligible
    return sim, progress


# ---------------------------------------------------------------------- run
def run(cfg: RunConfig, workload: Workload | None = None) -> RunResult:
    """Execute one run; write its folder if ``cfg.out`` is set. ``execute(plan(cfg))``: every
    configuration error is a `RunConfigError` raised before anything is loaded, as on the command line.

    ``cfg.out`` is checked before the simulation starts (see :mod:`hpctwin.twin.runfolder`): an existing
    run folder is replaced only with ``cfg.force``, and nothing that is not a run folder is ever deleted.

    Examples
    --------
    >>> import hpctwin
    >>> res = hpctwin.run(hpctwin.RunConfig(workload="synthetic:jobs=100,nodes=16", scheduler="easy"))
    >>> res.summary["jobs_simulated"], round(res.summary["mean_wait_s"]), res.out
    (100, 4103, None)
    >>> fcfs = hpctwin.run(hpctwin.RunConfig(workload="synthetic:jobs=100,nodes=16", scheduler="fcfs"))
    >>> round(fcfs.summary["mean_wait_s"])      # no backfilling: longer waits
    9471

    A workload built in Python is passed beside the configuration (its ``workload`` is then a label):

    >>> wl = hpctwin.Workload.from_arrays("tiny", submit=[0, 10, 20], runtime=[100, 50, 30],
    ...                                   procs=[4, 2, 8], requested_time=[120, 60, 60])
    >>> res = hpctwin.run(hpctwin.RunConfig(workload="tiny", nodes=8, scheduler="fcfs"), workload=wl)
    >>> res.jobs[["job_id", "start", "end"]].values.tolist()
    [[1.0, 0.0, 100.0], [2.0, 10.0, 60.0], [3.0, 100.0, 130.0]]
    """
    return execute(plan(cfg), workload)


def execute(p: Plan, workload: Workload | None = None, *, extra_models: tuple | list = ()) -> RunResult:
    """Run a `Plan` (``workload``: an already loaded one instead of the plan's); write its folder when
    the plan has an output. ``extra_models``: run models added after those of the plan (tools and tests).

    Examples
    --------
    >>> import hpctwin
    >>> p = hpctwin.plan(hpctwin.RunConfig(workload="synthetic:jobs=100,nodes=16", scheduler="easy"))
    >>> res = hpctwin.execute(p)
    >>> res.plan is p, res.summary["scheduler"], res.summary["jobs_simulated"]
    (True, 'easy', 100)
    """
    partial = prepare_out(p.out, force=p.force) if p.out is not None else None
    try:
        result = _simulate(p, workload, extra_models)
        if partial is not None:
            result.out = write_run(result, p.out, result.system, force=p.force, partial=partial)
    except BaseException:
        if partial is not None:
            discard(partial)
        raise
    return result


def simulate(cfg: RunConfig, workload: Workload | None = None, *, extra_models: tuple | list = ()) -> RunResult:
    """Execute one run in memory (no folder written): the plan, set-up, composition, engine, results."""
    return _simulate(plan(cfg), workload, extra_models)


def _simulate(p: Plan, workload: Workload | None, extra_models) -> RunResult:
    wall0 = time.perf_counter()
    s = setup(p, workload)
    c = compose(p, s, extra_models)
    sim, progress = _engine(p, s, c)
    from . import aot  # noqa: PLC0415
    t_sim, built0 = time.perf_counter(), aot.build_seconds()
    try:
        res = sim.run()
    finally:
        if progress is not None:
            progress.close()
    # a one-time kernel build during the run is announced on stderr and not counted as simulation time
    sim_wall = time.perf_counter() - t_sim - (aot.build_seconds() - built0)
    del sim                            # the engine's per-job state is not needed for the results
    if len(res.start) >= RELEASE_MEMORY_JOBS:
        _release_memory()
    df, state = R.jobs_frame(p, s, c, res)
    summary = R.summary(p, s, c, res, df, state, wall0, sim_wall)
    dt = R.series_step(p.config.sample_dt, *R.series_window(c.prep.workload, res), models=bool(c.models))
    ts = R.series(p, s, c, res, state, dt)
    if dt != R.DEFAULT_SAMPLE_DT and p.config.sample_dt is None:
        summary.setdefault("notes", []).append(
            f"time series on a {dt:g} s step: the default {R.DEFAULT_SAMPLE_DT:g} s would hold more than "
            f"{R.SERIES_MAX_SAMPLES:,} samples a series (--sample-dt 15 keeps it)")
    R.model_results(c, res, df, summary)
    tables = {k: v for m in c.models for k, v in (m.tables() if hasattr(m, "tables") else {}).items()}
    if c.held:                                 # node requests never submitted are not jobs of the run
        from .held import trim_held  # noqa: PLC0415
        df = trim_held(jobs_dataframe(df), summary, c.prep.workload.submit, c.held)
    cfg = p.config if p.config.sample_dt == dt else dataclasses.replace(p.config, sample_dt=dt)  # the step used
    return RunResult(cfg, df, summary, ts, c.prep.workload, system=p.system, tables=tables, plan=p)


# ---------------------------------------------------------------------- older entry points
@dataclass
class _Run:
    """Compatibility for callers of the former phase functions (``twin.rl.env``): ``_setup(r)`` fills
    ``prep``, ``jobs``, ``total`` and ``system`` from `setup`."""

    cfg: RunConfig
    workload: Workload | None = None
    wall0: float = 0.0
    prep: Prepared | None = None
    jobs: JobTable | None = None
    total: int = 0
    system: SystemSpec | None = None


def _setup(r: _Run) -> None:
    """`plan` and `setup` of ``r.cfg`` into ``r`` (compatibility; new code calls them directly)."""
    p = plan(r.cfg)
    s = setup(p, r.workload)
    r.prep, r.jobs, r.total, r.system = s.prep, s.jobs, s.units.total, p.system


def _build_models(cfg: RunConfig, system: SystemSpec | None, gpu: bool = False, units_per_node: int = 1) -> list:
    """The physics models ``cfg`` turns on (compatibility; the run builds them in `compose`)."""
    from .models import ModelSetup, build_models  # noqa: PLC0415
    return build_models(ModelSetup(cfg, system, gpu, units_per_node))


# ---------------------------------------------------------------------- writing
def resolved_config(cfg: RunConfig, summary: dict, system: SystemSpec | None) -> dict:
    """config.toml's content: ``[run]`` (the recorded `RunConfig` fields, in declaration order, and
    facts: machine units, code version and identity, Python and numpy versions), ``[options]``,
    ``[system]`` and, when the run read files, ``[inputs]`` (one ``[inputs.NAME]`` table a file:
    absolute path, SHA-256 and size in bytes; `twin.inputs`). A scheduler given as a Python class or
    instance is recorded as its ``module:Class``."""
    from .inputs import code_identity, input_fingerprints  # noqa: PLC0415
    d = {k: getattr(cfg, k) for k in recorded_fields()}
    if not isinstance(d["scheduler"], str):
        from hpctwin.schedulers.registry import object_spec  # noqa: PLC0415
        d["scheduler"] = object_spec(d["scheduler"])
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

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import hpctwin
    >>> res = hpctwin.run(hpctwin.RunConfig(workload="synthetic:jobs=100,nodes=16"))
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     folder = hpctwin.write_run(res, Path(tmp) / "run1")
    ...     print(folder.name, sorted(f.name for f in folder.iterdir()))
    run1 ['.hpctwin-run', 'config.toml', 'jobs.csv', 'summary.json', 'timeseries.h5']

    ``RunConfig(out=...)`` writes the folder as part of the run (``res.out`` is then its path).
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
