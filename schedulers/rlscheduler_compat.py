"""Replay of the RLScheduler harness's heuristic scheduling loop (``--compat rlscheduler``).

RLScheduler's table of heuristics (Zhang et al., SC'20: FCFS, SJF, WFP3, UNICEP, F1 on Lublin-1/2,
SDSC-SP2, HPC2N, with and without backfilling) comes from ``HPCEnv.schedule_curr_sequence_reset``
of ``HPCSimPickJobs.py`` (DIR-LAB/deep-batch-scheduler, commit cd433e3). This module reimplements
that loop operation for operation, so that the start times, and the table, come out the same.

Why a separate replay and not a policy on hpctwin's event engine: the harness advances time in its
own way, and the way changes the starts.

* Time moves **one event at a time** (an arrival when the next submit is at or before the next
  end, else one job end), and the committed head is checked after each single event. The engine
  applies every finish and submission at a time, then runs one pass: when two jobs end at the same
  second, the harness backfills between the two ends, the engine after both.
* The head is chosen from the queue **as the harness has filled it**: when the queue runs empty,
  time advances to the next arrival only, and that job alone is sorted and committed, even if other
  jobs arrive at the same second. The engine's pass sees all of them.
* Once committed, the head is never re-sorted away: later arrivals, however high their priority,
  wait behind it (no re-evaluation as in hpctwin's passes).
* With backfilling, the head's shadow time is computed **once**, at commitment, from the running
  jobs' requested end times, and is not updated when jobs end early; a queued job (FCFS order, the
  head included in the scan) starts when it fits now and ``now + requested < shadow`` (strict),
  with no "extra nodes" clause; the scan is repeated after every event.
* Sorting is Python's stable sort on a list whose order is the history of appends, removals and
  earlier sorts (by score at each decision, by submit time at each backfill scan, running jobs by
  requested end for the shadow and by actual end before each event); ties between equal scores,
  and between equal end times, are broken by that history, which this replay keeps.

Other conventions: jobs run their actual run time (no kill at the request); a job's bounded
slowdown is ``max(1, (start - submit + run) / max(run, 10))`` (seconds), computed when it starts;
a sequence's value is the sum of ``bsld / length`` in the order the jobs started; the loop ends when
the last job of the sequence has started.

Score functions (lower first; ``wait`` is the harness's ``scheduled_time - submit`` with
``scheduled_time = -1`` for every queued job, so ``wait = -1 - submit``): see `SCORES`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .rlscheduler_trace import HarnessTrace

#: run-time floor of the bounded slowdown, seconds (``max(run_time, 10)`` in ``HPCEnv.job_score``)
TAU_S = 10


def _fcfs(s: int, r: int, p: int):
    return s


def _sjf(s: int, r: int, p: int):
    return (r, s)


def _smallest(s: int, r: int, p: int):
    return (p, s)


def _wfp3(s: int, r: int, p: int):
    wait = -1 - s
    if r == 0:
        raise ZeroDivisionError("WFP3 with a requested time of 0 s (the harness fails the same way)")
    return -np.power(float(wait) / r, 3) * p


def _unicep(s: int, r: int, p: int):
    wait = -1 - s
    return -(wait + 1e-15) / (np.log2(p + 1e-15) * r)


def _f1(s: int, r: int, p: int):
    return np.log10(r if r > 0 else 0.1) * p + 870 * np.log10(s if s > 0 else 0.1)


#: name -> score(submit s, requested time r seconds, processors p); the harness's ``fcfs_score``,
#: ``sjf_score``, ``smallest_score``, ``wfp_score``, ``uni_score`` and ``f1_score``
SCORES: dict[str, Callable[[int, int, int], object]] = {
    "fcfs": _fcfs, "sjf": _sjf, "smallest": _smallest, "wfp3": _wfp3, "unicep": _unicep, "f1": _f1,
}


class HarnessLoopError(ValueError):
    """The harness's loop cannot go on (it would stop on an assertion at the same point)."""


@dataclass
class SequenceResult:
    """One replayed sequence: job indices into the trace, their start times (seconds) and bsld."""

    first: int
    jobs: np.ndarray
    start: np.ndarray
    bsld: np.ndarray
    order: list[int]          # trace indices in the order they started
    value: float              # sum of bsld / length in start order (the harness's sequence score)


class _Loop:
    """The mutable state of one sequence replay (see the module doc for each rule)."""

    def __init__(self, tr: HarnessTrace, first: int, length: int, key: list, backfill: bool,
                 lists: tuple | None = None):
        """``lists``: the trace's (submit, run, request, procs, nodes) as lists when the caller keeps them
        converted once for many sequences (the RL environment); else converted here."""
        self.tr, self.key, self.backfill = tr, key, backfill
        self.submit, self.run, self.req, self.procs, self.nodes = lists or (
            tr.submit.tolist(), tr.run.tolist(), tr.request.tolist(), tr.procs.tolist(), tr.nodes.tolist())
        self.free = tr.max_nodes
        self.end_idx = first + length
        self.now = self.submit[first]
        self.queue = [first]
        self.next = first + 1
        self.running: list[int] = []
        self.started: dict[int, int] = {}
        self.order: list[int] = []

    def _end(self, j: int) -> int:
        return self.started[j] + self.run[j]

    def _start(self, j: int) -> None:
        self.started[j] = self.now
        self.free -= self.nodes[j]
        self.running.append(j)
        self.order.append(j)
        self.queue.remove(j)

    def _event(self) -> None:
        """One arrival (if it is not after the next end) or one job end."""
        if not self.running:
            raise HarnessLoopError(f"job {int(self.tr.job_id[self.queue[0]])} can never fit the "
                                   f"{self.tr.max_nodes}-node machine (the harness asserts here)")
        self.running.sort(key=self._end)
        rel = self.running[0]
        if self.next < self.end_idx and self.submit[self.next] <= self._end(rel):
            self.now = max(self.now, self.submit[self.next])
            self.queue.append(self.next)
            self.next += 1
        else:
            self.now = max(self.now, self._end(rel))
            self.free += self.nodes[rel]
            self.running.pop(0)

    def _shadow(self, head: int) -> int:
        """The head's earliest start by the running jobs' requested ends (computed once)."""
        shadow = self.now
        ppn = self.tr.procs_per_node
        self.running.sort(key=lambda j: self.started[j] + self.req[j])
        free_procs = self.free * ppn
        for j in self.running:
            free_procs += self.nodes[j] * ppn
            shadow = self.started[j] + self.req[j]
            if free_procs >= self.procs[head]:
                break
        return shadow

    def _wait_for(self, head: int) -> None:
        shadow = self._shadow(head) if self.backfill else None
        while self.nodes[head] > self.free:
            if shadow is not None:
                self.queue.sort(key=self.submit.__getitem__)
                for j in list(self.queue):
                    if self.now + self.req[j] < shadow and self.nodes[j] <= self.free:
                        self._start(j)
            self._event()

    def _refill(self) -> bool:
        """After a start: ``False`` when the queue is empty and no job of the sequence is left."""
        if self.queue:
            return True
        if self.next >= self.end_idx:
            return False
        while True:
            if self.running:
                self.running.sort(key=self._end)
                rel = self.running[0]
                release = self._end(rel)
            else:
                rel, release = -1, None
            if release is None or self.submit[self.next] <= release:
                self.now = max(self.now, self.submit[self.next])
                self.queue.append(self.next)
                self.next += 1
                return True
            self.now = max(self.now, release)
            self.free += self.nodes[rel]
            self.running.pop(0)

    def replay(self) -> None:
        while True:
            self.queue.sort(key=self.key.__getitem__)
            head = self.queue[0]
            if self.nodes[head] > self.free:
                self._wait_for(head)
            self._start(head)
            if not self._refill():
                return


def score_keys(tr: HarnessTrace, heuristic: str) -> list:
    """The sort key of every job of the trace under ``heuristic`` (constant while a job waits)."""
    if heuristic not in SCORES:
        raise ValueError(f"unknown RLScheduler heuristic {heuristic!r}; known: {', '.join(SCORES)}")
    fn = SCORES[heuristic]
    keys = []
    for s, r, p in zip(tr.submit.tolist(), tr.request.tolist(), tr.procs.tolist()):
        try:
            keys.append(fn(s, r, p))
        except ZeroDivisionError:
            keys.append(None)              # an error only if the job is in a replayed sequence
    return keys


def replay_sequence(tr: HarnessTrace, first: int, length: int, heuristic: str, backfill: bool,
                    keys: list | None = None) -> SequenceResult:
    """Replay jobs ``first .. first + length - 1`` of ``tr`` as the harness does (module doc)."""
    if first < 0 or first + length > len(tr) or length < 1:
        raise ValueError(f"sequence [{first}, {first + length}) is outside the trace's {len(tr)} jobs")
    keys = keys if keys is not None else score_keys(tr, heuristic)
    bad = [j for j in range(first, first + length) if keys[j] is None]
    if bad:
        raise HarnessLoopError(f"{tr.path}: job {int(tr.job_id[bad[0]])} has a requested time of 0 s: its "
                               f"{heuristic} score divides by it (the harness raises ZeroDivisionError)")
    loop = _Loop(tr, first, length, keys, backfill)
    loop.replay()
    jobs = np.arange(first, first + length)
    start = np.array([loop.started[j] for j in jobs], dtype=np.int64)
    run = tr.run[jobs]
    bsld = np.maximum(1.0, (start - tr.submit[jobs] + run) / np.maximum(run, TAU_S))
    value = 0.0
    for j in loop.order:                   # the harness's sum(scheduled_logs.values()), left to right
        value += max(1.0, float(loop.started[j] - tr.submit[j] + tr.run[j]) / max(int(tr.run[j]), TAU_S)) / length
    return SequenceResult(first, jobs, start, bsld, loop.order, value)


def harness_cell(tr: HarnessTrace, starts: list[int], length: int, heuristic: str, backfill: bool) -> float:
    """A table cell: the mean over the sequences of their values (``np.mean`` as the harness)."""
    keys = score_keys(tr, heuristic)
    return float(np.mean([replay_sequence(tr, s, length, heuristic, backfill, keys).value for s in starts]))
