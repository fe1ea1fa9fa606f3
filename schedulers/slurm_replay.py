"""Whole-run compiled replay of the Slurm-like policy (issue 15: Slurm <= 3x EASY's time).

The general engine (`twin.simulation`) calls the policy's hooks and passes in Python at every
event; on a whole log that Python work, not the scheduling itself, is most of the time (a
default CTC-SP2 run makes ~250,000 engine passes). `engine_run` replays the run in one numba
function (`schedulers.slurm_replay_kernels.replay`) that mirrors the engine's event loop and the
policy's hooks line by line and calls the same compiled passes, so the schedule is the same byte
for byte (``tests/test_slurm_replay.py`` compares the two on synthetic logs and option sets).

This is the compiled backend ``slurm_replay`` of the reference `schedulers.slurm.SlurmScheduler`,
declared in `twin.backends` with its eligibility as data: the exact `SlurmScheduler` class (no
subclass or wrapper) with ``compiled`` on, select/linear, one partition at most, no
``bf_max_job_part``/``bf_max_job_user``, a run with no model (power, failures...), no gate and no
held jobs; ``replay`` option ``auto`` (default: at least `MIN_JOBS` jobs), ``on`` or ``off``; after
bind, the compiled passes apply and the priority order is static (`SlurmScheduler.static_order`:
priority/basic or equal priorities, no recalculation, no fair share, no QOS per-user limits).
Anything else runs on the general engine. `engine_prepare` binds the policy and `engine_run`
replays; `twin.backends.engine_fast_path` calls them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from hpctwin.twin import backends
from hpctwin.twin.aot import KernelSet
from hpctwin.twin.contract import BindContext, ModelContext, bind_policy
from hpctwin.twin.simulation import SimResult

from . import slurm_replay_layout as L
from .backfill_replay import _range_texts

#: below this many jobs the general engine is quicker than loading the compiled replay (as
#: `schedulers.backfill_replay.MIN_JOBS`; the table's ``min_jobs`` of this backend)
MIN_JOBS = backends.BACKENDS["slurm_replay"].min_jobs
#: `SlurmScheduler.stats` keys in the order of the kernel's counters
STAT_NAMES = ("event_passes", "main_passes", "backfill_passes", "backfill_cycles_skipped",
              "backfill_starts", "main_starts", "reservations", "backfill_cycles_missed")
REPLAY_MODES = backends.MODES

_HERE = Path(__file__).resolve().parent
_F, _I, _W = "f8[::1]", "i8[::1]", "u8[:, ::1]"
#: the replay as an ahead-of-time module (`twin.aot`: no numba import when it is built); the
#: signature is the dtypes `replay` passes, the sources every file compiled into it
KERNELS = KernelSet(
    "hpctwin_slurm_replay", "hpctwin.schedulers.slurm_replay_kernels",
    {"replay": ("replay", f"Tuple(({_F}, {_F}, b1[::1], i4[::1], {_I}, {_F}, {_I}, {_I}, i8, i8, i8, {_I}, i8))"
                          f"({_F}, {_F}, {_F}, {_I}, {_I}, {_F}, {_F}, {_I}, {_I}, {_I}, {_W}, {_W}, i8, {_F}, {_I})")},
    [_HERE / "slurm_replay_kernels.py", _HERE / "slurm_kernels.py", _HERE / "profile_nodeset_kernels.py",
     _HERE / "profile_kernels.py", _HERE / "slurm_replay_layout.py"])


def _replay_kernel():
    """The compiled replay: the ahead-of-time module, else numba's JIT function."""
    mod = KERNELS.load()
    if mod is not None:
        return mod.replay
    KERNELS.guard_jit_cache()               # numba's cache keys a file only: drop stale callers
    from . import slurm_replay_kernels as K  # noqa: PLC0415  (numba only on this path)
    return K.replay


def pre_eligible(sched, sim) -> bool:
    """Eligibility that needs no bind: the table's rule (`twin.backends.decide_before_bind`)."""
    return backends.decide_before_bind(backends.BACKENDS["slurm_replay"], sched, sim) is None


def eligible(sched) -> bool:
    """After bind: the table's bound conditions (the compiled passes apply, the priority order never changes)."""
    return backends.first_refusal(backends.BACKENDS["slurm_replay"].bound, sched) is None


def engine_prepare(sim) -> None:
    """Bind the scheduler as `twin.simulation.Simulation._bind` does (same `BindContext`)."""
    cluster = sim.cluster
    ctx = sim.context or ModelContext(n_nodes=cluster.total, jobs=sim.jobs, runtime=sim.runtime)
    bctx = BindContext(sim.jobs, cluster, cluster.total, seed=ctx.seed, node_group=sim.node_group,
                       models={}, system=ctx.system, options=ctx.options, log_start=ctx.log_start)
    bind_policy(sim.scheduler, bctx)


def engine_run(sim):
    """The replay of the bound, eligible run ``sim``: the engine's `SimResult`, or None when the
    replay stops on an error (the general engine then reruns the run)."""
    return replay(sim.scheduler, sim.runtime, sim.kill_limit, sim.quiet_limit)


def _params(s) -> tuple[np.ndarray, np.ndarray]:
    K = L
    sp = s.cfg.sched
    fp = np.zeros(6)
    fp[K.P_IV], fp[K.P_POLL], fp[K.P_SCHED_IV] = sp.bf_interval, s.bf_poll, sp.sched_interval
    fp[K.P_RES], fp[K.P_WINDOW], fp[K.P_MIN_AGE] = sp.bf_resolution, sp.bf_window, \
        sp.bf_min_age_reserve
    ip = np.zeros(11, dtype=np.int64)
    ip[K.Q_BF_ON] = int(bool(sp.backfill))
    ip[K.Q_DEPTH] = -1 if sp.default_queue_depth is None else int(sp.default_queue_depth)
    ip[K.Q_PART_DEPTH] = int(sp.partition_job_depth)
    ip[K.Q_MAX_TEST], ip[K.Q_JPCR] = int(sp.bf_max_job_test), int(sp.bf_job_part_count_reserve)
    ip[K.Q_MAX_START], ip[K.Q_MIN_PRIO] = int(sp.bf_max_job_start), int(sp.bf_min_prio_reserve)
    ip[K.Q_NN], ip[K.Q_CPN], ip[K.Q_NPARTS] = s.NN, s.cpn, len(s.parts)
    return fp, ip


def replay(s, runtime: np.ndarray, kill_limit: np.ndarray, quiet_limit: int):
    """Run the bound, eligible scheduler ``s`` over its jobs (``runtime``/``kill_limit`` in s);
    returns the engine's `SimResult` and sets ``s.stats``, or None when the run stops on an
    error (deadlock, stuck machine, bad wake-up): the general engine then reruns it and raises
    its own located error."""
    fp, ip = _params(s)
    ip[L.Q_QUIET] = int(quiet_limit)
    jobs = s.jobs
    f64 = lambda a: np.ascontiguousarray(a, dtype=np.float64)  # noqa: E731
    i64 = lambda a: np.ascontiguousarray(a, dtype=np.int64)  # noqa: E731
    u64 = lambda a: np.ascontiguousarray(a, dtype=np.uint64)  # noqa: E731
    submit, runtime = f64(jobs.submit), f64(runtime)
    procs = i64(jobs.procs)
    (start, end, killed, units, uoff, ch_t, ch_b, ch_q, nch, passes, events, cnt,
     status) = _replay_kernel()(submit, runtime, f64(kill_limit), procs, i64(s.req), f64(s.est),
                        f64(s.tl), i64(s.jpart), i64(s.jgres), i64(s.job_id), u64(s.pm_words),
                        u64(s.gres_words), int(s.total), fp, ip)
    if status != 0:
        return None
    for k, name in enumerate(STAT_NAMES):
        if name in s.stats or cnt[k]:
            s.stats[name] = int(cnt[k])
    nodes = _range_texts(units, procs, start)
    ran = ~np.isnan(start)
    work_done = np.where(ran, runtime - (runtime - (end - start) * 1.0), 0.0)
    n = len(submit)
    return SimResult(start=start, end=end, killed=killed, nodes=nodes,
                     change_t=ch_t[:nch].copy(), change_busy=ch_b[:nch].copy(),
                     change_queue=ch_q[:nch].copy(), passes=int(passes), events=int(events),
                     failed=np.zeros(n, dtype=bool), interruptions=np.zeros(n, dtype=np.int64),
                     held=np.where(ran, end - start, 0.0), work_done=work_done,
                     queued=np.where(ran, start - submit, 0.0), last_start=start)
