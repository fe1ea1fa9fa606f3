"""The compiled backend of `schedulers.backfill.QueueScheduler`: the whole replay of a built-in
order x backfill policy in one numba function (declared in `twin.backends`, entry ``backfill_replay``).

When no hook, placer or model needs Python at every event (the plain `QueueScheduler`: orders
fcfs/sjf/ljf/saf/wfp3/unicep x backfill none/easy/conservative, first-fit placement, no
power/network/failure/iteration model, no wrapper, no gate), the general engine (`twin.simulation`)
spends nearly all its time on Python overhead per event. This module replays the same semantics
over arrays and gives the same schedule, byte for byte (tested against the general engine with the
Python reference policy in ``tests/test_fastpath.py``):

* events at one instant: all finishes, then all submissions, then timers, then one pass
  (DESIGN.md section 5); a job ends at ``min(start + runtime, start + kill_limit)`` and is
  killed when it hits the limit with work left (more than 1e-9 x max(1 s, runtime));
* queue orders as `schedulers.ordering` (ties by arrival); EASY and conservative backfilling as
  `schedulers.backfill` (conservative reuses the compiled plan of `schedulers.profile_kernels`:
  same reservations, same compression, same re-plan when the profile disagrees with the machine);
* first-fit placement (the lowest-numbered free units), as `twin.cluster.Cluster.first_free`.

The kernels (`schedulers.backfill_replay_kernels`) are built ahead of time into an extension module
(`twin.aot`, ``numba.pycc``, the same functions and LLVM: same results) the first time a machine
runs them; later runs import it in under a millisecond without numba. Where that build is off or
fails, the numba JIT kernels run (compiled once and cached on disk; importing numba and loading
them costs about 0.9 CPU s per process).

Entry points: `replay` (prepared arrays in, result arrays out) and `engine_run`, which
`twin.backends` calls for an eligible run (the eligibility rule is that table's, not this module's).
This module imports numba only when a replay runs without the built module.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from hpctwin.twin.aot import KernelSet
from hpctwin.twin.simulation import SimResult

ORDER_CODES = {"fcfs": 0, "sjf": 1, "ljf": 2, "saf": 3, "wfp3": 4, "unicep": 5}
BACKFILL_CODES = {"none": 0, "easy": 1, "conservative": 2}
INF = math.inf
#: below this many jobs the general engine runs (it does EASY at ~20-45k jobs/s): a fresh machine's
#: first compiled run builds the kernels (40-100 s, once), and without the built module importing
#: numba and loading the JIT kernels costs ~0.9 CPU s per process (read by `twin.backends`)
MIN_JOBS = 20_000

_HERE = Path(__file__).resolve().parent
_A8, _I8, _I4, _B1 = "f8[::1]", "i8[::1]", "i4[::1]", "b1[::1]"
#: the compiled replay as one ahead-of-time module (`twin.aot`): exports, numba signatures (the
#: dtypes `replay` passes) and the source files compiled into them
KERNELS = KernelSet(
    "hpctwin_fastpath", "hpctwin.schedulers.backfill_replay_kernels",
    {"replay": ("_replay", f"Tuple(({_A8}, {_A8}, {_B1}, {_I4}, {_A8}, {_I8}, {_I8}, i8, i8, i8, i8))"
                           f"({_A8}, {_I8}, {_A8}, {_A8}, {_A8}, i8, i8, i8, {_I8})"),
     "range_text_bytes": ("hpctwin.twin.range_kernels:range_text_bytes", f"u1[::1]({_I4}, {_I8})")},
    [_HERE / "backfill_replay_kernels.py", _HERE / "profile_kernels.py", _HERE.parent / "twin" / "range_kernels.py"])


def kernels():
    """The replay kernels: the ahead-of-time module (`KERNELS`), else numba's JIT functions (the
    module `schedulers.backfill_replay_kernels`, and `twin.range_kernels`, under the exported names)."""
    mod = KERNELS.load()
    if mod is not None:
        return mod
    KERNELS.guard_jit_cache()               # numba's cache keys a file only: drop stale callers
    from hpctwin.twin import range_kernels as R  # noqa: PLC0415  (numba only on this path)

    from . import backfill_replay_kernels as K  # noqa: PLC0415
    return _JIT(K, R)


class _JIT:
    """The JIT kernels under the exported names."""

    def __init__(self, k, r):
        self.replay = k._replay
        self.range_text_bytes = r.range_text_bytes


class FastPathError(RuntimeError):
    """The compiled replay cannot go on (a deadlock: jobs wait on an idle machine)."""


def engine_run(sim):
    """The replay of the engine's run ``sim`` (a `twin.simulation.Simulation` that `twin.backends`
    found eligible for this backend): the engine's `SimResult`."""
    sched, jobs = sim.scheduler, sim.jobs
    return replay(jobs.submit, jobs.procs, jobs.estimate, sim.runtime, sim.kill_limit, sim.cluster.total,
                  sched.order_name, sched.backfill)


def replay(submit: np.ndarray, procs: np.ndarray, estimate: np.ndarray, runtime: np.ndarray,
           kill_limit: np.ndarray, total: int, order: str = "fcfs", backfill: str = "easy"):
    """Replay jobs sorted by (submit, job id) on ``total`` units with a built-in policy.

    ``submit``/``estimate``/``runtime``/``kill_limit`` in seconds (kill limit inf = never killed),
    ``procs`` in units (1 <= procs <= total). Returns the general engine's `twin.simulation.SimResult`:
    start/end (s), killed, the units each job held as range text (``"0-3,8"``), the piecewise-constant
    busy-units and queue-length series and the ledger (work done, held, queued; no interruptions).
    """
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
    rank = _static_rank(ocode, est, procs)
    out = kernels().replay(submit, procs, est, runtime, kill, int(total), ocode, bcode, rank)
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
    """Range text of each job's units (as `twin.ranges.ranges_of_sorted`; None for jobs never run):
    the compiled kernel writes every job's text as one ASCII line and one ``split`` makes the
    strings. Memory: about one Python string per job beyond the result."""
    buf = kernels().range_text_bytes(np.ascontiguousarray(units, dtype=np.int32),
                                     np.ascontiguousarray(procs, dtype=np.int64))
    ends = np.flatnonzero(buf == 10)        # one newline per job
    empty = np.flatnonzero(np.diff(ends, prepend=-1) == 1).tolist()
    out = buf.tobytes().decode("ascii").split("\n")
    del buf
    out.pop()                               # the text ends with a newline
    for j in empty:                         # jobs that never ran
        out[j] = None
    return out
