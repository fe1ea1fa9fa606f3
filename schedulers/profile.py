"""The availability profile: free allocation units as a step function of future time.

Every backfilling policy in the project uses this one module (EASY for its head reservation,
conservative backfilling for a reservation per queued job, the Slurm-like policy for its backfill
map). The profile is a pair of arrays:

``times[0] < times[1] < ... < times[S-1]`` (seconds) and ``free[i]`` = units free during
``[times[i], times[i+1])``; the last segment extends to +infinity.

The operations are small loops over the S segments compiled with numba (``njit``): conservative
backfilling re-plans every waiting job's reservation at most job ends, millions of slot searches
over a year-long log, and a compiled loop does each in well under a microsecond where a sequence
of numpy calls costs tens of microseconds of call overhead. The arrays keep spare capacity so
inserting a breakpoint does not reallocate.
"""
from __future__ import annotations

import numpy as np
from numba import njit

INF = float("inf")


# ---------------------------------------------------------------------------- compiled kernels
@njit(cache=True)
def _seg_index(t, n, x):
    """Index of the segment containing time x (x >= t[0]): last i with t[i] <= x."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if t[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


@njit(cache=True)
def _earliest(t, f, n, p, d, after):
    """Earliest time >= after when p units are free for d seconds (inf if never)."""
    i = _seg_index(t, n, after) if after > t[0] else 0
    run_start = -1.0
    while i < n:
        if f[i] >= p:
            if run_start < 0.0:
                run_start = t[i] if t[i] > after else after
            seg_end = t[i + 1] if i + 1 < n else INF
            if seg_end - run_start >= d:
                return run_start
        else:
            run_start = -1.0
        i += 1
    return INF


@njit(cache=True)
def _split(t, f, n, x):
    """Make x a breakpoint (x >= t[0], capacity for one more). Returns (index, new n)."""
    i = _seg_index(t, n, x)
    if t[i] == x:
        return i, n
    # insert after i
    for k in range(n, i + 1, -1):
        t[k] = t[k - 1]
        f[k] = f[k - 1]
    t[i + 1] = x
    f[i + 1] = f[i]
    return i + 1, n + 1


@njit(cache=True)
def _add(t, f, n, start, end, delta, total):
    """Add delta units over [start, end) (end may be inf). Returns (new n, ok) where ok is False
    if the change would make a segment negative or exceed total (nothing is changed then)."""
    if start < t[0]:
        start = t[0]
    if end <= start:
        return n, True
    i, n = _split(t, f, n, start)
    if end == INF:
        j = n
    else:
        j, n = _split(t, f, n, end)
    for k in range(i, j):
        v = f[k] + delta
        if v < 0 or v > total:
            return n, False
    for k in range(i, j):
        f[k] += delta
    return n, True


@njit(cache=True)
def _min_free(t, f, n, start, end):
    i = _seg_index(t, n, start) if start > t[0] else 0
    m = f[i]
    i += 1
    while i < n and t[i] < end:
        if f[i] < m:
            m = f[i]
        i += 1
    return m


@njit(cache=True)
def _compact(t, f, n):
    """Merge neighbours with equal free counts. Returns new n."""
    w = 1
    for k in range(1, n):
        if f[k] != f[w - 1]:
            t[w] = t[k]
            f[w] = f[k]
            w += 1
    return w


@njit(cache=True)
def _compress(t, f, n, now, procs, dur, starts, total):
    """Conservative compression: for each job (in the given priority order) whose reserved start
    is in the future, remove its reservation and re-make it at the earliest slot (never later).
    ``starts`` is updated in place. Returns new n. Capacity must allow 2 more breakpoints a job."""
    for q in range(len(procs)):
        old = starts[q]
        if old <= now:
            continue
        p = procs[q]
        d = dur[q]
        # quick test: some segment before `old` must have p units free, else it cannot move
        i = 0
        can = False
        while i < n and t[i] < old:
            if f[i] >= p:
                can = True
                break
            i += 1
        if not can:
            continue
        n, ok = _add(t, f, n, old, old + d, p, total)
        s = _earliest(t, f, n, p, d, now)
        n, ok = _add(t, f, n, s, s + d, -p, total)
        starts[q] = s
    return n


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
        return int(self._f[max(_seg_index(self._t, self._n, float(t)), 0)])

    def min_free(self, start: float, end: float) -> int:
        """Minimum free units over ``[start, end)``."""
        return int(_min_free(self._t, self._f, self._n, float(start), float(end)))

    def fits(self, start: float, duration: float, procs: int) -> bool:
        """True if ``procs`` units are free during all of ``[start, start + duration)``."""
        return self.min_free(start, start + duration) >= procs

    def earliest_start(self, procs: int, duration: float, after: float | None = None) -> float:
        """Earliest time >= ``after`` (default: the origin) at which ``procs`` units are free for
        ``duration`` seconds. Returns +inf if ``procs`` exceeds the machine."""
        if procs > self.total:
            return INF
        a = float(self._t[0]) if after is None else max(float(after), float(self._t[0]))
        return float(_earliest(self._t, self._f, self._n, int(procs), float(duration), a))

    # ------------------------------------------------------------------ updates
    def _change(self, start: float, end: float, delta: int, what: str) -> None:
        self._reserve_capacity(2)
        n, ok = _add(self._t, self._f, self._n, float(start), float(end), int(delta), self.total)
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
        self._n = _compress(self._t, self._f, self._n, float(now), np.asarray(procs, dtype=np.int64),
                            np.asarray(durations, dtype=np.float64), starts, self.total)
        return starts

    def advance(self, now: float) -> None:
        """Move the origin to ``now``, dropping the past."""
        t = self._t
        if now <= t[0]:
            return
        i = _seg_index(t, self._n, float(now))
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
        self._n = int(_compact(self._t, self._f, self._n))

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


@njit(cache=True)
def _shadow_kernel(now, free_now, ends, procs, need):
    order = np.argsort(ends, kind="mergesort")
    avail = free_now
    n = len(order)
    k = 0
    while k < n:
        i = order[k]
        avail += procs[i]
        if avail >= need:
            t = ends[i] if ends[i] > now else now
            # every job ending at the same instant releases its units then too
            k += 1
            while k < n:
                i2 = order[k]
                e2 = ends[i2] if ends[i2] > now else now
                if e2 != t:
                    break
                avail += procs[i2]
                k += 1
            return t, avail - need
        k += 1
    return np.inf, 0


def shadow_time(now: float, free_now: int, ends: np.ndarray, procs: np.ndarray, need: int) -> tuple[float, int]:
    """EASY's head reservation on the profile of the running jobs alone.

    Returns (shadow time, extra units): the earliest time at which ``need`` units are free given
    ``free_now`` free units and running jobs holding ``procs[i]`` until ``ends[i]`` (s; ends before
    ``now`` count as ``now``), and the units free at that time beyond ``need``. Because this
    profile only ever gains units, the earliest instant is also the earliest slot of any length.
    """
    if free_now >= need:
        return float(now), free_now - need
    t, extra = _shadow_kernel(float(now), int(free_now), np.asarray(ends, dtype=np.float64),
                              np.asarray(procs, dtype=np.int64), int(need))
    return float(t), int(extra)
