"""Node state of the machine as numpy arrays, and the read-only view schedulers get.

A machine has ``total`` allocation units (nodes, or processors for SWF logs), numbered
``0..total-1``. ``node_job[u]`` is the job index holding unit ``u`` (-1 free). Running jobs are
kept in dense slot arrays (swap-with-last removal), so the views schedulers read are slices, built
in O(1).
"""
from __future__ import annotations

from bisect import bisect_left, insort

import numpy as np


class CapacityError(RuntimeError):
    """A decision that would use a unit twice or more units than are free."""


class Cluster:
    """Mutable machine state, owned by the simulation. Implements `schedulers.base.ClusterView`."""

    def __init__(self, total: int):
        if total <= 0:
            raise ValueError(f"a machine needs at least one allocation unit, got {total}")
        self.total = int(total)
        self.now = 0.0
        self.node_job = np.full(self.total, -1, dtype=np.int64)
        self._free_mask = np.ones(self.total, dtype=bool)
        self._free = self.total
        cap = 64
        self._job = np.empty(cap, dtype=np.int64)
        self._procs = np.empty(cap, dtype=np.int64)
        self._start = np.empty(cap, dtype=np.float64)
        self._end = np.empty(cap, dtype=np.float64)
        self._n = 0
        #: incremented at every allocation and release (lets policies cache per-state results)
        self.version = 0
        self._slot: dict[int, int] = {}
        self._nodes: dict[int, np.ndarray] = {}
        self._key: dict[int, tuple[float, int, int]] = {}     # job -> its running_by_end entry
        #: running jobs as (expected end, job, units), sorted: EASY walks it for the shadow time
        self.running_by_end: list[tuple[float, int, int]] = []
        #: units out of service; a down group of units is held by the pseudo-job ``pseudo_base + first unit``
        self.down = 0
        self.pseudo_base = 1 << 40

    # ------------------------------------------------------------------ view (read-only use)
    @property
    def free(self) -> int:
        """Units free now."""
        return self._free

    @property
    def busy(self) -> int:
        return self.total - self._free

    @property
    def free_mask(self) -> np.ndarray:
        """Bool array over units, True where free. Do not modify."""
        return self._free_mask

    @property
    def running_jobs(self) -> np.ndarray:
        return self._job[: self._n]

    @property
    def running_procs(self) -> np.ndarray:
        return self._procs[: self._n]

    @property
    def running_start(self) -> np.ndarray:
        return self._start[: self._n]

    @property
    def running_expected_end(self) -> np.ndarray:
        """Start + estimate of each running job, never earlier than now (s)."""
        return np.maximum(self._end[: self._n], self.now)

    def nodes_of(self, job: int) -> np.ndarray:
        return self._nodes[job]

    def is_running(self, job: int) -> bool:
        return job in self._slot

    # ------------------------------------------------------------------ mutation (simulation only)
    def first_free(self, procs: int) -> np.ndarray:
        """The ``procs`` lowest-numbered free units (first-fit)."""
        return self._free_mask.nonzero()[0][:procs]

    def allocate(self, job: int, nodes: np.ndarray, start: float, expected_end: float,
                 checked: bool = False) -> None:
        """Give ``nodes`` (unit ids, stored sorted) to ``job``; raises CapacityError if any is in use,
        repeated or out of range. ``checked=True``: the ids come from `first_free` (sorted, free,
        distinct), so the checks are skipped."""
        if not checked:
            nodes = np.asarray(nodes, dtype=np.int64)
            if len(nodes) > 1 and not (nodes[1:] > nodes[:-1]).all():
                nodes = np.sort(nodes)
                if (nodes[1:] == nodes[:-1]).any():
                    raise CapacityError(f"job index {job}: a unit is listed twice in {nodes[:16].tolist()}...")
            if len(nodes) and (nodes[0] < 0 or nodes[-1] >= self.total):
                raise CapacityError(f"job index {job}: unit ids must be in [0, {self.total})")
            if len(nodes) and not self._free_mask[nodes].all():
                raise CapacityError(f"job index {job}: units {nodes[~self._free_mask[nodes]][:8].tolist()} "
                                    "are already in use")
        if job in self._slot:
            raise CapacityError(f"job index {job} is already running")
        k = len(nodes)
        lo = int(nodes[0]) if k else 0
        if k and int(nodes[-1]) - lo + 1 == k:  # one contiguous range: slices, not fancy indexing
            self._free_mask[lo:lo + k] = False
            self.node_job[lo:lo + k] = job
        else:
            self._free_mask[nodes] = False
            self.node_job[nodes] = job
        self._free -= k
        n = self._n
        if n == len(self._job):
            for name in ("_job", "_procs", "_start", "_end"):
                a = getattr(self, name)
                setattr(self, name, np.concatenate((a, np.empty_like(a))))
        self._job[n] = job
        self._procs[n] = k
        self._start[n] = start
        self._end[n] = expected_end
        self._slot[job] = n
        self._nodes[job] = nodes
        key = (float(expected_end), int(job), k)
        self._key[job] = key
        insort(self.running_by_end, key)
        self._n = n + 1
        self.version += 1

    def take_down(self, units: np.ndarray, now: float, until: float) -> None:
        """Take free ``units`` out of service until ``until`` (s). They are held by a pseudo-job
        (index ``pseudo_base + units[0]``, at or above the number of jobs) whose expected end is
        ``until``, so policies that plan on running jobs' ends see when they come back."""
        units = np.sort(np.asarray(units, dtype=np.int64))
        self.allocate(self.pseudo_base + int(units[0]), units, now, until)
        self.down += len(units)

    def bring_up(self, units: np.ndarray) -> None:
        """Return ``units`` (taken down together by `take_down`) to service."""
        units = np.asarray(units, dtype=np.int64)
        pid = self.pseudo_base + int(units.min())
        if pid not in self._slot:
            raise CapacityError(f"units {units[:8].tolist()} are not down")
        self.down -= len(self.release(pid))

    def release(self, job: int) -> np.ndarray:
        """Free the units of ``job``; returns them."""
        s = self._slot.pop(job)
        nodes = self._nodes.pop(job)
        by_end = self.running_by_end
        del by_end[bisect_left(by_end, self._key.pop(job))]
        last = self._n - 1
        if s != last:
            moved = int(self._job[last])
            self._job[s] = moved
            self._procs[s] = self._procs[last]
            self._start[s] = self._start[last]
            self._end[s] = self._end[last]
            self._slot[moved] = s
        self._n = last
        k = len(nodes)
        lo = int(nodes[0]) if k else 0
        if k and int(nodes[-1]) - lo + 1 == k:
            self._free_mask[lo:lo + k] = True
            self.node_job[lo:lo + k] = -1
        else:
            self._free_mask[nodes] = True
            self.node_job[nodes] = -1
        self._free += k
        self.version += 1
        return nodes
