"""The availability profile: free allocation units as a step function of future time.

Every backfilling policy in the project uses this one module (EASY for its head reservation,
conservative backfilling for a reservation per queued job, the Slurm-like policy for its backfill
map). The profile is a pair of arrays:

``times[0] < times[1] < ... < times[S-1]`` (seconds) and ``free[i]`` = units free during
``[times[i], times[i+1])``; the last segment extends to +infinity.

The operations are small loops over the S segments compiled with numba, in
`schedulers.profile_kernels` (imported on first use, so FCFS and EASY runs never load numba). The
arrays keep spare capacity so inserting a breakpoint does not reallocate.
"""
from __future__ import annotations

import numpy as np

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
