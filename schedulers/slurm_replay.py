"""Whole-run compiled replay of the Slurm-like policy (issue 15: Slurm <= 3x EASY's time).

The general engine (`twin.simulation`) calls the policy's hooks and passes in Python at every
event; on a whole log that Python work, not the scheduling itself, is most of the time (a
default CTC-SP2 run makes ~250,000 engine passes). `engine_fast_path` replays the run in one numba
function (`schedulers.slurm_replay_kernels.replay`) that mirrors the engine's event loop and the
policy's hooks line by line and calls the same compiled passes, so the schedule is the same byte
for byte (``tests/test_slurm_replay.py`` compares the two on synthetic logs and option sets).

Eligible runs (`eligible`): the exact `SlurmScheduler` class (no subclass or wrapper) with
``compiled`` on, select/linear, a static priority order (`SlurmScheduler.static_order`: one
partition, priority/basic or equal priorities, no recalculation), no QOS per-user limits, no
``bf_max_job_part``/``bf_max_job_user``, and a run with no model (power, failures...) and no gate;
``replay`` option ``auto`` (default: at least `MIN_JOBS` jobs), ``on`` or ``off``. Anything else
runs on the general engine.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from hpctwin.twin.aot import KernelSet

from . import slurm_replay_layout as L

#: below this many jobs the general engine is quicker than loading the compiled replay (as
#: `twin.fastpath.MIN_JOBS`)
MIN_JOBS = 20_000
#: `SlurmScheduler.stats` keys in the order of the kernel's counters
STAT_NAMES = ("event_passes", "main_passes", "backfill_passes", "backfill_cycles_skipped",
              "backfill_starts", "main_starts", "reservations", "backfill_cycles_missed")
REPLAY_MODES = ("auto", "on", "off")

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
    """Eligibility that needs no bind (`eligible` adds the bound conditions)."""
    # the class itself, not a subclass (which may change a decision the replay hard-codes); read from
    # the class's own namespace, so this module never imports schedulers.slurm (no import cycle)
    if not vars(type(sched)).get("WHOLE_RUN_REPLAY", False) or sched.replay == "off":
        return False
    if sched.replay == "auto" and sim.n < MIN_JOBS:
        return False
    cfg = sched.cfg
    return (sched.compiled and sched.linear and len(cfg.partitions) <= 1
            and not cfg.sched.bf_max_job_part and not cfg.sched.bf_max_job_user
            and not list(getattr(sim, "models", ()) or ())
            and not list(getattr(sim, "gates", ()) or ()))


def eligible(sched) -> bool:
    """After bind: the compiled passes apply and the priority order never changes."""
    return (sched.use_kernel and sched.static_order and not sched.time_varying
            and sched.fs is None and not sched.has_qos_limits)


def _bind(sim) -> None:
    """Bind the scheduler as `twin.simulation.Simulation._bind` does (same `BindContext`)."""
    from hpctwin.twin.contract import BindContext, ModelContext, bind_policy  # noqa: PLC0415
    cluster = sim.cluster
    ctx = sim.context or ModelContext(n_nodes=cluster.total, jobs=sim.jobs, runtime=sim.runtime)
    bctx = BindContext(sim.jobs, cluster, cluster.total, seed=ctx.seed, node_group=sim.node_group,
                       models={}, system=ctx.system, options=ctx.options)
    bind_policy(sim.scheduler, bctx)


def engine_fast_path(sim):
    """The `twin.simulation.Simulation` fast-path seam for the Slurm-like policy: the replay's
    `SimResult` for an eligible run, None otherwise (the general loop runs; it binds the
    scheduler again, which resets its state)."""
    sched = sim.scheduler
    if not pre_eligible(sched, sim):
        return None
    _bind(sim)
    if not eligible(sched):
        return None
    res = replay(sched, sim.runtime, sim.kill_limit, sim.quiet_limit)
    if res is not None and sim.progress is not None:
        sim.progress.update(sim.n)
    return res


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
    from hpctwin.twin.fastpath import _range_texts  # noqa: PLC0415
    from hpctwin.twin.simulation import SimResult  # noqa: PLC0415

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
