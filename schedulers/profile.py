"""The availability profile: free capacity as a step function of future time.

This is the project's one free-capacity module: every policy that plans on future free capacity
plans on it. All times are seconds on the log's clock. It has two forms of the same step
function (breakpoints ``t[0] < t[1] < ...``, a value per segment ``[t[i], t[i+1])``):

* the **count form**, `AvailabilityProfile` (values: free allocation units, nodes or processors),
  used by EASY (the head's shadow time: `shadow_time`, `shadow_from_sorted`, and the same walk
  compiled in the fast path, ``schedulers.backfill_replay_kernels._shadow``) and conservative backfilling (a
  reservation per queued job: `ReservationPlan`), in `schedulers.backfill` and the wrappers built
  on it (predictive, price-aware...); compiled operations in `schedulers.profile_kernels`;
* the **node-set form**, `NodeSpaceMap` (values: *which* nodes are available, node bitsets; Slurm's
  backfill ``node_space`` map, ``node_space_map_t`` of backfill.c, with ``_add_reservation``),
  used by the Slurm-like policy's backfill cycle (`schedulers.slurm`), where a job's nodes matter
  (select/linear picks consecutive nodes, a reservation names its nodes). Python form over
  Python-int bitsets in `schedulers.profile_nodeset` (re-exported here); compiled form over
  ``uint64`` words in `schedulers.profile_nodeset_kernels`, called by the compiled cycle
  (`schedulers.slurm_kernels`) and the whole-run replay (`schedulers.slurm_replay_kernels`).
  With one-second resolution the popcount of the node-set form is the count form of the same
  reservations (tested). Node-set API: ``NodeSpaceMap(begin0, window_end, res, full)``,
  ``add_reservation(start, end, nodes)``, ``walk(nodes, start, end) -> (available, record,
  later)``, ``fits(start, end, nodes)``, ``avail_at(t)``, ``first_reserved(idle)``, ``split(t)``.

The count form is described below.

The profile (`AvailabilityProfile`) is a pair of arrays:
``times[0] < times[1] < ... < times[S-1]`` (seconds) and ``free[i]`` = units free during
``[times[i], times[i+1])``; the last segment extends to +infinity. Assumptions: the origin
``times[0]`` is "now" (`advance` drops the past), a running job's expected end earlier than now
counts as now, and a job is expected to hold its units for its estimate (requested time by default).

Count-form API for a policy (all O(S) or better, S = segments):

* ``AvailabilityProfile.from_running(now, total, ends, procs)``: the machine with its running jobs.
* ``earliest_start(procs, duration, after=None) -> s``: the first slot (inf if none).
* ``fits(start, duration, procs)``, ``min_free(start, end)``, ``free_at(t)``: queries.
* ``reserve(start, duration, procs)`` / ``release(start, end, procs)``: take / give back units
  (raises ValueError if the change is impossible).
* ``advance(now)``, ``copy()``, ``compact()``.
* ``shadow_time(now, free_now, ends, procs, need)`` (arrays) and ``shadow_from_sorted(now, free,
  need, by_end, extra_ends)`` (the engine's sorted running list): EASY's (shadow time, extra units).
* ``ReservationPlan``: conservative backfilling's state (one reservation per waiting job, compressed
  after every job end), with per-pass work linear in the queue in compiled code.

Conservative compression, the algorithm and its cost (`schedulers.profile_kernels`, shared by the
general engine and the compiled fast path). Reservations persist between passes (one float per job);
a pass compresses after a job ended (early or on time: one compression pass is not a fixpoint, so a
job that moved can leave a hole an earlier job in the order could use at the next compression; pyss
and batsched compress after every end too). In priority order, a job of p units
and d seconds reserved at ``old`` moves exactly when, without its own reservation, a slot starts
before ``old``: on the profile that still holds it, the earliest (p, d) slot E or the start R of the
run of segments with p units free that reaches ``old``; it moves to min(E, R). E is cached per shape
within a pass and revised from a log of the net profile changes (searched again only from a bound
below ``old``), R is one look at the segment before ``old``, so a test is O(log S). A move edits
only the segments whose free units change (breakpoints left between equal units are dropped) and
their block summaries. The moves themselves are what the semantics ask for: on an overloaded log
(the issue-17 synthetic case, load 1.2) the queue grows with the log and each end shifts a share
of it (0.6 M / 2.3 M / 10.1 M moves for 12.5k / 25k / 50k jobs, `benchmarks/conservative_scaling.py
--count`), so any exact implementation does work quadratic in the log length there; with a
bounded queue (load 0.7) the moves, and our time, grow linearly (4.7x and 4.35x for 4x the jobs).

The operations are small loops over the S segments compiled with numba, in
`schedulers.profile_kernels` (imported on first use, so FCFS and EASY runs never load numba). The
arrays keep spare capacity so inserting a breakpoint does not reallocate.
"""
from __future__ import annotations

import numpy as np

from .profile_nodeset import NodeSpaceMap

__all__ = ["AvailabilityProfile", "NodeSpaceMap", "ReservationPlan", "shadow_from_sorted", "shadow_time"]

INF = float("inf")


_KERNELS = None


def _k():
    """The compiled kernels module (imported on first use)."""
    global _KERNELS
    if _KERNELS is None:
        from . import profile_kernels  # noqa: PLC0415
        _KERNELS = profile_kernels
    return _KERNELS


# ---------------------------------------------------------------------------- the profile object
class AvailabilityProfile:
    """Free units over future time, with reservations.

    Parameters
    ----------
    now: the profile's origin (s).
    total: units of the machine.
    """

    __slots__ = ("_t", "_f", "_n", "total")

    def __init__(self, now: float, total: int, capacity: int = 64):
        self.total = int(total)
        self._t = np.empty(capacity, dtype=np.float64)
        self._f = np.empty(capacity, dtype=np.int64)
        self._t[0] = float(now)
        self._f[0] = self.total
        self._n = 1

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_running(cls, now: float, total: int, ends: np.ndarray, procs: np.ndarray) -> "AvailabilityProfile":
        """Profile of a machine whose running jobs hold ``procs[i]`` units until ``ends[i]``.

        Ends earlier than ``now`` are treated as ``now`` (a job past its estimate is expected to end
        immediately).
        """
        prof = cls(now, total, capacity=2 * len(ends) + 64)
        if len(ends) == 0:
            return prof
        ue, free = _running_steps(now, total, ends, procs)
        if ue[0] != now:
            ue = np.concatenate(([float(now)], ue))
            free = np.concatenate(([total - int(np.sum(procs))], free))
        m = len(ue)
        prof._t[:m] = ue
        prof._f[:m] = free
        prof._n = m
        return prof

    def copy(self) -> "AvailabilityProfile":
        p = AvailabilityProfile.__new__(AvailabilityProfile)
        p.total = self.total
        p._t = self._t.copy()
        p._f = self._f.copy()
        p._n = self._n
        return p

    def _reserve_capacity(self, extra: int) -> None:
        need = self._n + extra
        if need > len(self._t):
            cap = max(need, 2 * len(self._t))
            t = np.empty(cap, dtype=np.float64)
            f = np.empty(cap, dtype=np.int64)
            t[: self._n] = self._t[: self._n]
            f[: self._n] = self._f[: self._n]
            self._t, self._f = t, f

    # ------------------------------------------------------------------ queries
    @property
    def times(self) -> np.ndarray:
        """Breakpoints (s), a view; do not modify."""
        return self._t[: self._n]

    @property
    def free(self) -> np.ndarray:
        """Free units of each segment, a view; do not modify."""
        return self._f[: self._n]

    @property
    def now(self) -> float:
        return float(self._t[0])

    def free_at(self, t: float) -> int:
        """Units free at time ``t`` (>= the profile's origin)."""
        return int(self._f[max(_k()._seg_index(self._t, self._n, float(t)), 0)])

    def min_free(self, start: float, end: float) -> int:
        """Minimum free units over ``[start, end)``."""
        return int(_k()._min_free(self._t, self._f, self._n, float(start), float(end)))

    def fits(self, start: float, duration: float, procs: int) -> bool:
        """True if ``procs`` units are free during all of ``[start, start + duration)``."""
        return self.min_free(start, start + duration) >= procs

    def earliest_start(self, procs: int, duration: float, after: float | None = None) -> float:
        """Earliest time >= ``after`` (default: the origin) at which ``procs`` units are free for
        ``duration`` seconds. Returns +inf if ``procs`` exceeds the machine."""
        if procs > self.total:
            return INF
        a = float(self._t[0]) if after is None else max(float(after), float(self._t[0]))
        return float(_k()._earliest(self._t, self._f, self._n, int(procs), float(duration), a))

    # ------------------------------------------------------------------ updates
    def _change(self, start: float, end: float, delta: int, what: str) -> None:
        self._reserve_capacity(2)
        n, ok = _k()._add(self._t, self._f, self._n, float(start), float(end), int(delta), self.total)
        self._n = n
        if not ok:
            raise ValueError(f"{what} of {abs(delta)} units over [{start}, {end}) is impossible: "
                             f"it would leave fewer than 0 or more than {self.total} units free")

    def reserve(self, start: float, duration: float, procs: int) -> None:
        """Take ``procs`` units during ``[start, start + duration)``. Raises if they are not free."""
        self._change(start, start + duration, -int(procs), "reservation")

    def release(self, start: float, end: float, procs: int) -> None:
        """Give back ``procs`` units during ``[start, end)`` (e.g. a job that ended early)."""
        self._change(start, end, int(procs), "release")

    def compress(self, now: float, procs: np.ndarray, durations: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Conservative compression of reservations given in priority order (see `_compress`).
        Returns the new start times (s)."""
        starts = np.array(starts, dtype=np.float64)
        self._reserve_capacity(2 * len(starts) + 4)
        self._n = _k()._compress(self._t, self._f, self._n, float(now), np.asarray(procs, dtype=np.int64),
                            np.asarray(durations, dtype=np.float64), starts, self.total)
        return starts

    def advance(self, now: float) -> None:
        """Move the origin to ``now``, dropping the past."""
        t = self._t
        if now <= t[0]:
            return
        i = _k()._seg_index(t, self._n, float(now))
        if i > 0:
            m = self._n - i
            t[:m] = t[i: self._n].copy()
            self._f[:m] = self._f[i: self._n].copy()
            self._n = m
        t[0] = now
        if self._n > 64:
            self.compact()

    def compact(self) -> None:
        """Merge adjacent segments with equal free counts."""
        self._n = int(_k()._compact(self._t, self._f, self._n))

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        segs = ", ".join(f"{t:g}:{f}" for t, f in zip(self.times, self.free))
        return f"AvailabilityProfile(total={self.total}, [{segs}])"


def _running_steps(now: float, total: int, ends: np.ndarray, procs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct end times (>= now) of running jobs and the free units from each on."""
    ends = np.maximum(np.asarray(ends, dtype=np.float64), now)
    procs = np.asarray(procs, dtype=np.int64)
    order = np.argsort(ends, kind="stable")
    e = ends[order]
    released = np.cumsum(procs[order])
    busy_total = int(released[-1])
    if busy_total > total:
        raise ValueError(f"running jobs hold {busy_total} units on a machine of {total}")
    last = np.empty(len(e), dtype=bool)
    last[:-1] = e[1:] != e[:-1]
    last[-1] = True
    return e[last], (total - busy_total) + released[last]


def shadow_time(now: float, free_now: int, ends: np.ndarray, procs: np.ndarray, need: int) -> tuple[float, int]:
    """EASY's head reservation on the profile of the running jobs alone.

    Returns (shadow time, extra units): the earliest time at which ``need`` units are free given
    ``free_now`` free units and running jobs holding ``procs[i]`` until ``ends[i]`` (s; ends before
    ``now`` count as ``now``), and the units free at that time beyond ``need``. Because this
    profile only ever gains units, the earliest instant is also the earliest slot of any length.
    """
    if free_now >= need:
        return float(now), free_now - need
    ends = np.maximum(ends, now)
    order = np.argsort(ends, kind="stable")
    cum = free_now + np.cumsum(procs[order])
    k = int(np.searchsorted(cum, need, side="left"))
    if k >= len(cum):
        return INF, 0
    e = ends[order]
    t = e[k]
    # all jobs ending at the same instant release together
    k_last = int(np.searchsorted(e, t, side="right")) - 1
    return float(t), int(cum[k_last]) - need


def shadow_from_sorted(now: float, free: int, need: int, by_end: list, extra_ends: list) -> tuple[float, int]:
    """EASY's (shadow time, extra units) from running jobs sorted by expected end (``by_end``:
    (end s, job, units) tuples, e.g. the engine's ``Cluster.running_by_end``) plus this pass's
    starts (``extra_ends``: sorted (end s, units)); ends before ``now`` count as ``now``. Walks only
    until enough units are free (a few steps); same result as `shadow_time`."""
    if free >= need:
        return float(now), free - need
    avail = free
    i = k = 0
    n1, n2 = len(by_end), len(extra_ends)
    t = None
    while i < n1 or k < n2:
        if k >= n2 or (i < n1 and by_end[i][0] <= extra_ends[k][0]):
            e, u = by_end[i][0], by_end[i][2]
            i += 1
        else:
            e, u = extra_ends[k]
            k += 1
        e = e if e > now else now
        if t is not None and e != t:
            break
        avail += u
        if t is None and avail >= need:
            t = e
    if t is None:
        return INF, 0
    return float(t), avail - need


# ---------------------------------------------------------------------------- conservative plan
class ReservationPlan:
    """Conservative backfilling's reservations (Mu'alem and Feitelson 2001) on an availability profile.

    Every waiting job holds a reservation, made in priority order at the earliest slot that
    disturbs no earlier one. After a running job ends (early ends give back the rest of their
    estimate, `release`), the next pass *compresses*: in priority order each waiting job's
    reservation is removed and re-made at its earliest slot, which can only be earlier, so no
    reservation is ever delayed (jobs without one are reserved in their place in the order). A job starts
    when its reservation reaches now.

    Reservations live in one array indexed by job (NaN = none), so a pass is one compiled call over
    the queue: whether a job can move and where is one run-to-run search over block summaries of
    the profile (see the module docstring), only jobs that move change the profile, and only new
    jobs are reserved.

    Parameters
    ----------
    n_jobs: jobs in the table (reservation array length).
    total: units of the machine.
    procs, durations: per job units and planned duration (s; the estimate).
    """

    def __init__(self, n_jobs: int, total: int, procs: np.ndarray, durations: np.ndarray):
        self.total = int(total)
        self.procs = np.ascontiguousarray(procs, dtype=np.int64)
        self.dur = np.ascontiguousarray(durations, dtype=np.float64)
        self.resv = np.full(n_jobs, np.nan)
        self.profile: AvailabilityProfile | None = None
        self._pm = np.empty(0, dtype=np.int64)
        self._out = np.empty(max(n_jobs, 1), dtype=np.int64)
        #: earliest reservation start of the waiting jobs after the last pass (s; inf if none)
        self.next_start = INF

    def rebuild(self, now: float, ends: np.ndarray, procs: np.ndarray) -> None:
        """Start over from the running jobs (expected ``ends`` s, ``procs`` units): no reservation
        is kept (the next `plan` reserves every waiting job in order)."""
        self.profile = AvailabilityProfile.from_running(now, self.total, ends, procs)
        self.resv.fill(np.nan)

    def release(self, now: float, end: float, procs: int) -> None:
        """A running job expected to hold ``procs`` units until ``end`` ended at ``now``."""
        self.profile.advance(now)
        self.profile.release(now, end, procs)

    def units_due(self, now: float, order: np.ndarray) -> int:
        """Units the profile holds at ``now`` for the waiting jobs in ``order`` whose reservation is due."""
        return int(_k()._units_due(order, self.procs, self.resv, float(now)))

    def plan(self, now: float, order: np.ndarray, compress: bool) -> list[int]:
        """One pass over the waiting jobs ``order`` (priority order): compress first if asked,
        reserve the jobs without a reservation, and return the jobs whose reservation starts now
        (in order; their reservations are dropped, the profile keeps their units)."""
        prof = self.profile
        order = np.ascontiguousarray(order, dtype=np.int64)
        prof._reserve_capacity(6 * len(order) + 8)    # <= 4 breakpoints a moved job, 2 a new one
        if len(self._pm) < len(prof._t):
            self._pm = np.empty(len(prof._t), dtype=np.int64)
        n, m, nxt = _k()._plan_pass(prof._t, prof._f, prof._n, self._pm, float(now), order, self.procs,
                                    self.dur, self.resv, prof.total, bool(compress), self._out)
        prof._n = int(n)
        self.next_start = float(nxt)
        return self._out[:m].tolist()
