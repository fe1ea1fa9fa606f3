"""A minimal plain-Python conservative-backfilling replay of an SWF log: an independent reference.

Written from the textbook definition (Mu'alem and Feitelson 2001, and Batsim's batsched
``conservative_bf``, which does the same), with nothing of hpctwin: every waiting job holds a
reservation at the earliest slot of a free-units profile that disturbs no earlier one; after a
job ends, every waiting job in priority order has its reservation removed and re-added first-fit
("compression"); new jobs are reserved at the end of the queue; a job starts when its reservation
is due. The profile is two plain lists (breakpoint times, free units after each), searched and
edited linearly, so the code is short enough to check by eye and slow (O(queue x segments) per
pass). Job reading, estimates, kills and the order of events at one instant are those of
``benchmarks/plain_easy.py`` (the project's conventions; see its docstring).

    python benchmarks/plain_conservative.py KTH-SP2                       # replay, print CPU seconds
    python benchmarks/plain_conservative.py KTH-SP2 --check run/jobs.csv  # compare start/end per job

``--check`` compares with the jobs.csv of ``hpctwin run --scheduler conservative`` and exits 1 on
any difference. Agreement on a whole real log checks the engine's conservative semantics against
code that shares none of its parts (the compiled plan, per-shape slot caches and local moves of
``schedulers/profile_kernels.py``).
"""
from __future__ import annotations

import heapq
import math
import sys
from bisect import bisect_right
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plain_easy import run_cli  # noqa: E402


class Profile:
    """Free units over time: ``free[i]`` units over ``[times[i], times[i + 1])``, the last segment
    to infinity. Times in seconds."""

    def __init__(self, now: float, total: int):
        self.times, self.free = [now], [total]

    def _split(self, x: float) -> int:
        """Index of the segment starting at ``x`` (added if needed; ``x >= times[0]``)."""
        i = bisect_right(self.times, x) - 1
        if self.times[i] != x:
            self.times.insert(i + 1, x)
            self.free.insert(i + 1, self.free[i])
            i += 1
        return i

    def add(self, start: float, end: float, units: int) -> None:
        """Give back (units > 0) or take (units < 0) ``units`` over ``[start, end)``."""
        if end <= start:
            return
        i, k = self._split(start), self._split(end)
        for j in range(i, k):
            self.free[j] += units

    def advance(self, now: float) -> None:
        """Forget the past before ``now``."""
        i = bisect_right(self.times, now) - 1
        if i > 0:
            del self.times[:i], self.free[:i]
        self.times[0] = now

    def earliest(self, now: float, units: int, dur: float) -> float:
        """Earliest start >= now of a block of ``units`` for ``dur`` seconds."""
        t, f = self.times, self.free
        start = None
        for i in range(len(t)):
            if f[i] >= units:
                if start is None:
                    start = t[i] if t[i] > now else now
                if i + 1 == len(t) or t[i + 1] >= start + dur:
                    return start
            else:
                start = None
        raise AssertionError("the last segment must hold every job")


def replay(jobs: list[tuple], total: int, early_only: bool = False) -> tuple[list[float], list[float]]:
    """Conservative replay; returns start and end times (s) per job (in ``jobs`` order).
    ``early_only``: compress only after a job ended before its estimate (default: after any end)."""
    n = len(jobs)
    start, end, resv = [math.nan] * n, [math.nan] * n, [math.nan] * n
    heap: list = []          # (end, job_id, j)
    queue: list[int] = []
    prof = Profile(jobs[0][0] if jobs else 0.0, total)
    ptr, wake = 0, math.inf
    while ptr < n or heap or queue:
        # next event: a finish, a submission, or a reservation start where nothing else happens (the
        # job it waited for ended early, and compression moved it there)
        now = min(heap[0][0] if heap else math.inf, jobs[ptr][0] if ptr < n else math.inf, wake)
        prof.advance(now)
        ended = False
        while heap and heap[0][0] <= now:
            _, _, j = heapq.heappop(heap)
            end[j] = now
            prof.add(now, start[j] + jobs[j][4], jobs[j][3])   # early end: the rest of its estimate
            ended = ended or not early_only or now < start[j] + jobs[j][4]
        while ptr < n and jobs[ptr][0] <= now:
            queue.append(ptr)
            ptr += 1
        if queue:
            queue = _pass(now, queue, ended, jobs, prof, resv, start, heap)
        wake = min((resv[j] for j in queue), default=math.inf)
    return start, end


def _pass(now: float, queue: list[int], ended: bool, jobs: list, prof: Profile, resv: list, start: list,
          heap: list) -> list[int]:
    """One scheduling pass: compress after an end, reserve new jobs, start the due ones."""
    for j in queue:
        p, est = jobs[j][3], jobs[j][4]
        if resv[j] == resv[j]:
            if not ended:
                continue
            prof.add(resv[j], resv[j] + est, p)          # remove, then re-add first-fit
        s = prof.earliest(now, p, est)
        prof.add(s, s + est, -p)
        resv[j] = s
    kept = []
    for j in queue:
        if resv[j] <= now:
            _, jid, run, _, _, kill = jobs[j]
            start[j] = now
            heapq.heappush(heap, (now + min(run, kill), jid, j))
        else:
            kept.append(j)
    return kept


def main(argv: list[str] | None = None) -> int:
    return run_cli(argv, __doc__, replay, "conservative",
                   {"--early-only": ("early_only", "compress only after an end before the estimate")})


if __name__ == "__main__":
    sys.exit(main())
