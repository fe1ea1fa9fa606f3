"""The RLScheduler harness's policy rules as a scheduler on hpctwin's event engine (``rls-*``).

Registered names: ``rls-fcfs``, ``rls-sjf``, ``rls-wfp3``, ``rls-unicep``, ``rls-f1``,
``rls-smallest`` (no backfilling) and the same with ``-bf`` (the harness's greedy backfilling).
They carry the harness's *policy* to any hpctwin run (with power, network, failures...):

* the score functions of `schedulers.rlscheduler_compat.SCORES`, with the harness's
  ``wait = -1 - submit`` for WFP3 and UNICEP (requests: `JobTable.estimate`, seconds);
* the head, the best-scored job when the previous head started, is **committed**: it is not
  re-sorted away by later arrivals, and nothing else starts in order before it;
* ``-bf``: the head's shadow time is computed once, when it is first blocked, from the running
  jobs' expected ends (stable order by expected end, the head's size accumulated); while it waits,
  queued jobs in submit order start if they fit now and ``now + estimate < shadow`` (strict), with
  no extra-nodes clause.

What stays hpctwin's (so the numbers are *not* the harness's table; use ``--compat rlscheduler``,
`schedulers.rlscheduler_run`, for that): the engine applies every end and arrival of an instant
before one pass (the harness one event at a time), so same-second arrivals into an empty queue are
sorted together and two same-second ends are seen together; the whole log is replayed, sizes and
requests come from hpctwin's reader, jobs are killed at their request unless ``--kill-at-walltime
off``, and expected ends are never earlier than now. On the hand-checked cases of
``tests/test_rlscheduler_compat.py`` its starts equal the replay's.
"""
from __future__ import annotations

import numpy as np

from .base import BindContext, ClusterView, Scheduler
from .rlscheduler_compat import SCORES

POLICY_NAMES = {f"rls-{h}{suffix}": (h, suffix == "-bf") for h in SCORES for suffix in ("", "-bf")}


class RLSchedulerPolicy(Scheduler):
    """Committed-head scheduling with a harness score and, optionally, its greedy backfilling."""

    def __init__(self, heuristic: str = "fcfs", backfill: bool = False, name: str | None = None):
        if heuristic not in SCORES:
            raise ValueError(f"unknown RLScheduler heuristic {heuristic!r}; known: {', '.join(SCORES)}")
        self.heuristic, self.backfill = heuristic, bool(backfill)
        self.name = name or f"rls-{heuristic}{'-bf' if backfill else ''}"

    def describe(self) -> dict:
        return {"name": self.name, "heuristic": self.heuristic, "backfill": "harness-greedy" if self.backfill
                else "none"}

    def bind(self, ctx: BindContext, cluster: ClusterView | None = None) -> None:
        super().bind(ctx, cluster)
        j = self.jobs
        fn = SCORES[self.heuristic]
        submit = np.asarray(j.submit, dtype=float).tolist()          # seconds; integers in SWF logs
        est = np.asarray(j.estimate, dtype=float).tolist()           # > 0 (JobTable contract)
        self.procs = [int(p) for p in np.asarray(j.procs).tolist()]
        self.est = np.asarray(j.estimate, dtype=float)
        self.key = [fn(s, r, p) for s, r, p in zip(submit, est, self.procs)]
        self.head: int | None = None
        self.shadow: float | None = None

    def _shadow(self, head: int, cluster: ClusterView, now: float, started: list[int], free: int) -> float:
        """Running jobs (those started earlier in this pass included) by expected end: the end at
        which the free units plus theirs first cover the head."""
        ends = np.concatenate([np.asarray(cluster.running_expected_end, dtype=float),
                               now + self.est[started]]) if started else \
            np.asarray(cluster.running_expected_end, dtype=float)
        procs = np.concatenate([np.asarray(cluster.running_procs), np.asarray([self.procs[j] for j in started])]) \
            if started else np.asarray(cluster.running_procs)
        acc = free
        shadow = float("inf")
        for k in np.argsort(ends, kind="stable"):
            acc += int(procs[k])
            shadow = float(ends[k])
            if acc >= self.procs[head]:
                break
        return shadow

    def schedule(self, now: float, queue: np.ndarray, cluster: ClusterView) -> list[int]:
        waiting = [int(q) for q in queue]
        if self.head is not None and self.head not in waiting:     # started or requeued elsewhere
            self.head, self.shadow = None, None
        free = int(cluster.free)
        starts: list[int] = []
        while waiting:
            if self.head is None:
                self.head = min(waiting, key=self.key.__getitem__)   # first of a stable sort
                self.shadow = None
            h = self.head
            if self.procs[h] <= free:
                starts.append(h)
                free -= self.procs[h]
                waiting.remove(h)
                self.head, self.shadow = None, None
                continue
            if self.backfill:
                if self.shadow is None:
                    self.shadow = self._shadow(h, cluster, now, starts, free)
                for j in sorted(waiting, key=lambda x: float(self.jobs.submit[x])):
                    if now + self.est[j] < self.shadow and self.procs[j] <= free:
                        starts.append(j)
                        free -= self.procs[j]
                        waiting.remove(j)
            break
        return starts
