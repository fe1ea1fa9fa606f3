"""Progress of running jobs: work left, progress rates, and the finish heap.

A running job does ``work_left`` nominal seconds of engine work at ``rate`` (1.0 = nominal; the
product of every model's factor for it). Its finish event is ``now + work_left / rate``, or its
kill time ``segment start + kill_limit`` if earlier. When a rate changes, the work done since the
last change is integrated exactly and the finish event is moved (lazy deletion: each job's entry
carries a version; only the latest is live). Heap entries are ``(time, job id, index, version)``,
so finishes at one instant pop in job-id order.
"""
from __future__ import annotations

import heapq
import math


class RateError(RuntimeError):
    """A model gave a non-positive progress rate."""


class Progress:
    """Per-job progress state (Python lists: the engine reads and writes single elements at every
    event, which lists do several times faster than numpy arrays)."""

    __slots__ = ("work_left", "seg_work", "rate", "last_t", "version", "start_seg", "kill_limit",
                 "job_id", "heap", "factors", "model_names", "rate_hooks", "_running")

    def __init__(self, work: list, kill_limit: list, job_id: list, n_models: int):
        n = len(work)
        self.work_left = list(work)
        self.seg_work = list(work)          # engine work at the start of the current segment
        self.rate = [1.0] * n
        self.last_t = [0.0] * n
        self.version = [0] * n
        self.start_seg = [math.nan] * n     # start of the current segment (s)
        self.kill_limit = kill_limit
        self.job_id = job_id
        self.heap: list = []
        #: per model, job -> its last rate factor for running jobs
        self.factors: list[dict[int, float]] = [dict() for _ in range(n_models)]
        self.model_names: list[str] = []
        self.rate_hooks: list = []          # models' on_rate_change, resolved once
        self._running = None                # cluster.is_running

    def push_finish(self, j: int, now: float) -> None:
        t_work = now + self.work_left[j] / self.rate[j]
        t_kill = self.start_seg[j] + self.kill_limit[j]
        t = t_kill if t_kill < t_work else t_work
        v = self.version[j] = self.version[j] + 1
        heapq.heappush(self.heap, (t, self.job_id[j], j, v))

    def begin(self, j: int, now: float) -> None:
        """Job ``j`` starts a segment at ``now`` with ``work_left[j]`` to do."""
        self.start_seg[j] = now
        self.last_t[j] = now
        self.push_finish(j, now)

    def next_time(self) -> float:
        """Time of the next live finish (s; inf if none)."""
        heap, version = self.heap, self.version
        while heap and heap[0][3] != version[heap[0][2]]:
            heapq.heappop(heap)
        return heap[0][0] if heap else math.inf

    def pop_one(self, now: float) -> int:
        """Pop the heap's top entry (due at ``now``): its job index with the work integrated to ``now``,
        or -1 for a stale entry."""
        _, _, j, ver = heapq.heappop(self.heap)
        if ver != self.version[j]:
            return -1
        self.work_left[j] -= (now - self.last_t[j]) * self.rate[j]
        return j

    def stop(self, j: int, now: float) -> None:
        """Integrate ``j``'s work to ``now`` and drop its finish event (an interruption)."""
        if now > self.last_t[j]:                # (a run that has not begun yet has done no work)
            self.work_left[j] -= (now - self.last_t[j]) * self.rate[j]
        self.version[j] += 1
        self.rate[j] = 1.0                      # a new run starts at full speed

    def forget(self, j: int) -> None:
        """``j`` left its units: its models' factors no longer apply."""
        for mf in self.factors:
            mf.pop(j, None)

    def apply(self, now: float, k: int, factors: dict[int, float] | None) -> None:
        """Model ``k``'s new rate factors for running jobs; moves the finish of each job whose rate changed."""
        if not factors:
            return
        mf = self.factors[k]
        rate, work_left, last_t = self.rate, self.work_left, self.last_t
        for j, f in factors.items():
            if not self._running(j):
                continue
            if f <= 0:
                raise RateError(f"model {self.model_names[k]} gave job {int(self.job_id[j])} rate {f}")
            mf[j] = f
            new_rate = 1.0
            for other in self.factors:
                new_rate *= other.get(j, 1.0)
            if new_rate != rate[j]:
                t = last_t[j]
                if now >= t:                    # else the run begins later (`start_delay`): no work done yet
                    work_left[j] -= (now - t) * rate[j]
                    last_t[j] = t = now
                rate[j] = new_rate
                self.push_finish(j, t)
                for hook in self.rate_hooks:
                    hook(now, j, new_rate)

    def done_in_segment(self, j: int, now: float) -> float:
        """Engine work (nominal s) ``j`` has done in its current segment at ``now`` (running job)."""
        w = self.work_left[j] - max(now - self.last_t[j], 0.0) * self.rate[j]
        return self.seg_work[j] - w
