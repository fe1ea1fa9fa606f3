"""The availability profile: free allocation units as a step function of future time.

Every backfilling policy in the project uses this one module (EASY for its head reservation,
conservative backfilling for a reservation per queued job, the Slurm-like policy for its backfill
map). The profile is a pair of arrays:

``times[0] < times[1] < ... < times[S-1]`` (seconds) and ``free[i]`` = units free during
``[times[i], times[i+1])``; the last segment extends to +infinity.

All operations are vectorised with numpy over the S segments; S stays of the order of the number of
running jobs plus reservations.
"""
from __future__ import annotations

import numpy as np

INF = float("inf")


class AvailabilityProfile:
    """Free units over future time, with reservations.

    Parameters
    ----------
    now: the profile's origin (s).
    total: units of the machine.
    """

    __slots__ = ("times", "free", "total")

    def __init__(self, now: float, total: int):
        self.total = int(total)
        self.times = np.array([float(now)])
        self.free = np.array([self.total], dtype=np.int64)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_running(cls, now: float, total: int, ends: np.ndarray, procs: np.ndarray) -> "AvailabilityProfile":
        """Profile of a machine whose running jobs hold ``procs[i]`` units until ``ends[i]``.

        Ends earlier than ``now`` are treated as ``now`` (a job past its estimate is expected to end
        immediately).
        """
        prof = cls(now, total)
        if len(ends) == 0:
            return prof
        ends = np.maximum(np.asarray(ends, dtype=np.float64), now)
        procs = np.asarray(procs, dtype=np.int64)
        order = np.argsort(ends, kind="stable")
        e = ends[order]
        released = np.cumsum(procs[order])
        # unique end times: units released by each end time (last cumulative value per time)
        last = np.empty(len(e), dtype=bool)
        last[:-1] = e[1:] != e[:-1]
        last[-1] = True
        ue = e[last]
        rel = released[last]
        busy_total = int(released[-1])
        if busy_total > total:
            raise ValueError(f"running jobs hold {busy_total} units on a machine of {total}")
        base = total - busy_total
        if ue[0] == now:
            prof.times = ue.copy()
            prof.free = base + rel
        else:
            prof.times = np.concatenate(([float(now)], ue))
            prof.free = np.concatenate(([base], base + rel)).astype(np.int64)
        return prof

    def copy(self) -> "AvailabilityProfile":
        p = AvailabilityProfile.__new__(AvailabilityProfile)
        p.total = self.total
        p.times = self.times.copy()
        p.free = self.free.copy()
        return p

    # ------------------------------------------------------------------ queries
    @property
    def now(self) -> float:
        return float(self.times[0])

    def free_at(self, t: float) -> int:
        """Units free at time ``t`` (>= the profile's origin)."""
        i = int(np.searchsorted(self.times, t, side="right")) - 1
        return int(self.free[max(i, 0)])

    def min_free(self, start: float, end: float) -> int:
        """Minimum free units over ``[start, end)``."""
        i = max(int(np.searchsorted(self.times, start, side="right")) - 1, 0)
        j = int(np.searchsorted(self.times, end, side="left"))
        return int(self.free[i:max(j, i + 1)].min())

    def fits(self, start: float, duration: float, procs: int) -> bool:
        """True if ``procs`` units are free during all of ``[start, start + duration)``."""
        return self.min_free(start, start + duration) >= procs

    def earliest_start(self, procs: int, duration: float, after: float | None = None) -> float:
        """Earliest time >= ``after`` (default: the origin) at which ``procs`` units are free for
        ``duration`` seconds. Returns +inf if ``procs`` exceeds the machine.
        """
        if procs > self.total:
            return INF
        times, free = self.times, self.free
        i0 = 0
        if after is not None and after > times[0]:
            i0 = max(int(np.searchsorted(times, after, side="right")) - 1, 0)
        ok = free[i0:] >= procs
        n = len(ok)
        if n == 0:
            return INF
        # runs of consecutive feasible segments: [run_start, run_end)
        padded = np.empty(n + 2, dtype=np.int8)
        padded[0] = 0
        padded[-1] = 0
        padded[1:-1] = ok
        d = np.diff(padded)
        run_start = np.flatnonzero(d == 1)
        run_end = np.flatnonzero(d == -1)
        if len(run_start) == 0:
            return INF
        seg_t = times[i0:]
        starts = seg_t[run_start]
        if after is not None:
            starts = np.maximum(starts, after)
        # end of a run: start time of the first infeasible segment (inf if the run reaches the end)
        ends = np.where(run_end < n, seg_t[np.minimum(run_end, n - 1)], INF)
        good = np.flatnonzero(ends - starts >= duration)
        if len(good) == 0:
            return INF
        return float(starts[good[0]])

    # ------------------------------------------------------------------ updates
    def _split(self, t: float) -> int:
        """Ensure ``t`` is a breakpoint; return its index. ``t`` must be >= the origin."""
        times = self.times
        i = int(np.searchsorted(times, t, side="left"))
        if i < len(times) and times[i] == t:
            return i
        if t == INF:
            return len(times)
        self.times = np.insert(times, i, t)
        self.free = np.insert(self.free, i, self.free[i - 1])
        return i

    def reserve(self, start: float, duration: float, procs: int) -> None:
        """Take ``procs`` units during ``[start, start + duration)``. Raises if they are not free."""
        end = start + duration
        i = self._split(start)
        j = self._split(end) if end != INF else len(self.times)
        if procs and self.free[i:j].min() < procs:
            raise ValueError(f"reservation of {procs} units over [{start}, {end}) exceeds the free units")
        self.free[i:j] -= procs

    def release(self, start: float, end: float, procs: int) -> None:
        """Give back ``procs`` units during ``[start, end)`` (e.g. a job that ended early)."""
        start = max(start, float(self.times[0]))
        if end <= start:
            return
        i = self._split(start)
        j = self._split(end) if end != INF else len(self.times)
        self.free[i:j] += procs
        if self.free[i:j].max() > self.total:
            raise ValueError("profile release made more units free than the machine has")

    def advance(self, now: float) -> None:
        """Move the origin to ``now``, dropping the past."""
        times = self.times
        if now <= times[0]:
            return
        i = int(np.searchsorted(times, now, side="right")) - 1
        self.times = times[i:].copy()
        self.free = self.free[i:].copy()
        self.times[0] = now
        # merge equal neighbours occasionally keeps S small
        if len(self.times) > 64:
            self.compact()

    def compact(self) -> None:
        """Merge adjacent segments with equal free counts."""
        f = self.free
        keep = np.empty(len(f), dtype=bool)
        keep[0] = True
        keep[1:] = f[1:] != f[:-1]
        if not keep.all():
            self.times = self.times[keep]
            self.free = f[keep]

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        segs = ", ".join(f"{t:g}:{f}" for t, f in zip(self.times, self.free))
        return f"AvailabilityProfile(total={self.total}, [{segs}])"
