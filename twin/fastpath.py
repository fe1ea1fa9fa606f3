"""Compiled fast path: the whole replay of a built-in order x backfill policy in one numba function.

When no hook, placer or model needs Python at every event (the plain `QueueScheduler` of
`schedulers.backfill`: orders fcfs/sjf/ljf/saf/wfp3/unicep x backfill none/easy/conservative,
first-fit placement, no power/network/failure/iteration model, no wrapper), the general engine
(`twin.simulation`) spends nearly all its time on Python overhead per event. This module replays
the same semantics over arrays and gives the same schedule, byte for byte (tested against the
general engine in ``tests/test_fastpath.py``):

* events at one instant: all finishes, then all submissions, then timers, then one pass
  (DESIGN.md section 5); a job ends at ``min(start + runtime, start + kill_limit)`` and is
  killed when it hits the limit with work left (more than 1e-9 x max(1 s, runtime));
* queue orders as `schedulers.ordering` (ties by arrival); EASY and conservative backfilling as
  `schedulers.backfill` (conservative reuses the compiled plan of `schedulers.profile_kernels`:
  same reservations, same compression, same re-plan when the profile disagrees with the machine);
* first-fit placement (the lowest-numbered free units), as `twin.cluster.Cluster.first_free`.

Compilation is cached on disk (``cache=True``): only the first run on a machine pays it (about
10-20 s on the reference machine for all kernels; later imports load in well under a second).

Entry points: `replay` (prepared arrays in, result arrays out), `eligible` (may a run use it?) and
`engine_fast_path`, the `twin.simulation.Simulation` seam (``Simulation(..., fast_path=engine_fast_path)``):
it returns the engine's `SimResult` for an eligible run of at least `MIN_JOBS` jobs, else None (the
general loop runs). This module imports numba only when a replay runs.
"""
from __future__ import annotations

import math

import numpy as np

ORDER_CODES = {"fcfs": 0, "sjf": 1, "ljf": 2, "saf": 3, "wfp3": 4, "unicep": 5}
BACKFILL_CODES = {"none": 0, "easy": 1, "conservative": 2}
INF = math.inf
#: below this many jobs the general engine is quicker than importing numba and loading the compiled
#: kernels (0.9-1.4 CPU s per process here; the general engine does EASY at ~20-45k jobs/s)
MIN_JOBS = 20_000


class FastPathError(RuntimeError):
    """The compiled replay cannot go on (a deadlock: jobs wait on an idle machine)."""


def eligible(scheduler, placer=None, models=()) -> bool:
    """True when `replay` gives the general engine's schedule for this run: the scheduler is exactly
    a built-in `QueueScheduler` (not a subclass or wrapper), with no placer and no model."""
    from hpctwin.schedulers.backfill import QueueScheduler  # noqa: PLC0415
    return (type(scheduler) is QueueScheduler and placer is None and not list(models)
            and scheduler.order_name in ORDER_CODES and scheduler.backfill in BACKFILL_CODES
            and getattr(scheduler, "first_reservation", None) is None)


def engine_fast_path(sim):
    """The `twin.simulation.Simulation` fast-path seam: the compiled replay (the engine's
    `SimResult`) when the run is eligible (`eligible`, no gate) and has at least `MIN_JOBS` jobs;
    None otherwise (the general loop runs). A scheduler with its own ``engine_fast_path(sim)``
    method (the Slurm-like policy: `schedulers.slurm_replay`) answers for itself."""
    sched = sim.scheduler
    own = getattr(sched, "engine_fast_path", None)
    if callable(own):
        return own(sim)
    if (sim.n < MIN_JOBS or list(getattr(sim, "gates", ()) or ())
            or not eligible(sched, sim.placer, sim.models)):
        return None
    jobs = sim.jobs
    fr = replay(jobs.submit, jobs.procs, jobs.estimate, sim.runtime, sim.kill_limit, sim.cluster.total,
                sched.order_name, sched.backfill)
    if sim.progress is not None:
        sim.progress.update(sim.n)
    return fr


def replay(submit: np.ndarray, procs: np.ndarray, estimate: np.ndarray, runtime: np.ndarray,
           kill_limit: np.ndarray, total: int, order: str = "fcfs", backfill: str = "easy"):
    """Replay jobs sorted by (submit, job id) on ``total`` units with a built-in policy.

    ``submit``/``estimate``/``runtime``/``kill_limit`` in seconds (kill limit inf = never killed),
    ``procs`` in units (1 <= procs <= total). Returns the general engine's `twin.simulation.SimResult`:
    start/end (s), killed, the units each job held as range text (``"0-3,8"``), the piecewise-constant
    busy-units and queue-length series and the ledger (work done, held, queued; no interruptions).
    """
    from .simulation import SimResult  # noqa: PLC0415
    n = len(submit)
    submit = np.ascontiguousarray(submit, dtype=np.float64)
    procs = np.ascontiguousarray(procs, dtype=np.int64)
    est = np.ascontiguousarray(estimate, dtype=np.float64)
    runtime = np.ascontiguousarray(runtime, dtype=np.float64)
    kill = np.ascontiguousarray(kill_limit, dtype=np.float64)
    if n and np.any(np.diff(submit) < 0):
        raise ValueError("jobs must be sorted by submit time")
    if n and (procs.min() < 1 or procs.max() > total):
        bad = int(np.flatnonzero((procs < 1) | (procs > total))[0])
        raise ValueError(f"job index {bad} needs {int(procs[bad])} units; the machine has {total}")
    try:
        ocode, bcode = ORDER_CODES[order], BACKFILL_CODES[backfill]
    except KeyError:
        raise ValueError(f"no compiled path for order {order!r} x backfill {backfill!r}") from None
    from . import fastpath_kernels as K  # noqa: PLC0415  (numba only when the fast path runs)
    rank = _static_rank(ocode, est, procs)
    out = K._replay(submit, procs, est, runtime, kill, int(total), ocode, bcode, rank)
    start, end, killed, units, ch_t, ch_busy, ch_q, n_ch, passes, events, status = out
    if status == 1:
        raise FastPathError("deadlock: jobs wait on an idle machine and no event is pending")
    nodes = _range_texts(units, procs, start)
    ran = ~np.isnan(start)
    # the engine's ledger: work done = runtime - (runtime - (end - start) x rate 1), held = end - start,
    # queued = start - submit (0 for jobs never run), computed with the same float operations
    work_done = np.where(ran, runtime - (runtime - (end - start) * 1.0), 0.0)
    return SimResult(start=start, end=end, killed=killed, nodes=nodes, change_t=ch_t[:n_ch].copy(),
                      change_busy=ch_busy[:n_ch].copy(), change_queue=ch_q[:n_ch].copy(),
                      passes=int(passes), events=int(events), failed=np.zeros(n, dtype=bool),
                      interruptions=np.zeros(n, dtype=np.int64), held=np.where(ran, end - start, 0.0),
                      work_done=work_done, queued=np.where(ran, start - submit, 0.0), last_start=start)


def _static_rank(ocode: int, est: np.ndarray, procs: np.ndarray) -> np.ndarray:
    """Priority rank of every job for the orders that do not depend on time (ties by index, as
    `schedulers.ordering._by_key`); the index itself for fcfs and the time-dependent orders."""
    n = len(est)
    idx = np.arange(n, dtype=np.int64)
    if ocode in (0, 4, 5):
        return idx
    key = {1: est, 2: -est, 3: est * procs}[ocode]
    rank = np.empty(n, dtype=np.int64)
    rank[np.lexsort((idx, key))] = idx
    return rank


def _range_texts(units: np.ndarray, procs: np.ndarray, start: np.ndarray) -> list:
    """Range text of each job's units (as `twin.ranges.ranges_of_sorted`; None for jobs never run).
    One string per run of consecutive units, built in C loops; a job with several runs joins its
    runs' strings. Memory: about one Python string per job beyond the result."""
    from .fastpath_kernels import _runs  # noqa: PLC0415
    lo, hi, first = _runs(units, procs)
    lo_l = lo.tolist()
    rt = list(map("{}-{}".format, lo_l, hi.tolist()))
    for i in np.flatnonzero(lo == hi).tolist():
        rt[i] = str(lo_l[i])
    del lo_l
    nruns = np.diff(first)
    if len(rt) == len(procs) and (nruns == 1).all():
        return rt
    out: list = [None] * len(procs)
    single = np.flatnonzero(nruns == 1)
    for j, f in zip(single.tolist(), first[single].tolist()):
        out[j] = rt[f]
    first_l = first.tolist()
    for j in np.flatnonzero(nruns > 1).tolist():
        out[j] = ",".join(rt[first_l[j]:first_l[j + 1]])
    return out
