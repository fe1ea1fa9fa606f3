"""The ledger of a run: every job's segments (runs), always on, and the per-job result arrays.

A job's life is one or more *segments* (a start to a finish, a kill or an interruption), separated
by waits in the queue. The ledger keeps per job its first start, its end, whether it was killed at
its time limit or failed, the units of its last segment, and summed over segments the wall time
held, the engine work done and the time queued. Interrupted segments are listed in
``segments`` as ``(job, start s, end s, units as range text)``. Without failure models every job
has one segment, and ``held = end - start``, ``queued = start - submit`` exactly.

The units a job held are kept as arrays while the run goes on and turned into range text
(``"0-3,8"``) in batches (`flush`), not at every finish: the text is only needed in the results.
"""
from __future__ import annotations

import math
from array import array

import numpy as np

from .ranges import ranges_of_sorted

#: finished jobs whose units are kept as arrays before they are turned into text (bounds memory)
FLUSH_EVERY = 1 << 16


class Ledger:
    """Per-job outcome of a run of ``n`` jobs submitted at ``submit`` (s)."""

    __slots__ = ("n", "start", "end", "killed", "failed", "units", "interruptions", "work_done",
                 "held", "queued", "enqueued", "segments", "_pending")

    def __init__(self, submit: list):
        n = self.n = len(submit)
        nan = array("d", [math.nan])
        zero = array("d", [0.0])
        # compact per-job storage (8 bytes a value, no float objects): read and written twice a job
        self.start = nan * n               # first start (s)
        self.end = nan * n
        self.killed = bytearray(n)
        self.failed = bytearray(n)
        self.units: list = [None] * n     # units of the last segment: array, then range text
        self.interruptions = array("q", bytes(8 * n))
        self.work_done = zero * n         # engine work over all segments (nominal s)
        self.held = zero * n              # wall time holding units, over all segments (s)
        self.queued = zero * n            # time waiting, over all (re)queueings (s)
        self.enqueued = array("d", submit)   # time the job (re)entered the queue; NaN while running
        self.segments: list = []
        self._pending: list[int] = []

    def open(self, j: int, now: float) -> None:
        """``j`` starts a segment at ``now``."""
        e = self.enqueued[j]
        if e == e:
            self.queued[j] += now - e
            self.enqueued[j] = math.nan
        if self.start[j] != self.start[j]:
            self.start[j] = now

    def close(self, j: int, seg_start: float, now: float, work: float, units: np.ndarray,
              end: float | None = None, killed: bool = False) -> None:
        """``j``'s segment since ``seg_start`` ends at ``now`` after ``work`` nominal s of engine work on
        ``units``; ``end`` (s) given: the job's last segment (``killed``: at its time limit)."""
        self.held[j] += now - seg_start
        self.work_done[j] += work
        self.units[j] = units
        if end is not None:
            self.end[j] = end
            if killed:
                self.killed[j] = 1
        pending = self._pending
        pending.append(j)
        if len(pending) >= FLUSH_EVERY:
            self.flush()

    def interrupted(self, j: int, seg_start: float, now: float, units: np.ndarray) -> None:
        self.segments.append((j, seg_start, now, ranges_of_sorted(units)))
        self.interruptions[j] += 1

    def fail(self, j: int, now: float) -> None:
        """``j`` ends at ``now`` as failed (an interruption with no requeue)."""
        self.end[j] = now
        self.failed[j] = 1

    def requeued(self, j: int, now: float) -> None:
        self.enqueued[j] = now

    def flush(self) -> None:
        """Turn the kept unit arrays into range text (as `ranges_of_sorted`), vectorised over the batch."""
        units = self.units
        todo = [j for j in dict.fromkeys(self._pending) if units[j] is not None and not isinstance(units[j], str)]
        self._pending = []
        if not todo:
            return
        arrs = [units[j] for j in todo]
        lens = np.fromiter(map(len, arrs), dtype=np.int64, count=len(arrs))
        cat = np.concatenate(arrs)
        ends = np.cumsum(lens)
        run_start = np.zeros(len(cat), dtype=bool)          # a range starts at each job's first unit
        run_start[ends - lens] = True                        # and after every gap in a job's units
        run_start[1:] |= np.diff(cat) != 1
        rs = np.flatnonzero(run_start)
        lo = cat[rs].tolist()
        hi = cat[np.append(rs[1:], len(cat)) - 1].tolist()
        parts = [str(a) if a == b else f"{a}-{b}" for a, b in zip(lo, hi)]
        runs = np.bincount(np.searchsorted(ends, rs, side="right"), minlength=len(arrs)).tolist()
        pos = 0
        for j, k in zip(todo, runs):
            units[j] = parts[pos] if k == 1 else ",".join(parts[pos:pos + k])
            pos += k

    def node_text(self) -> list:
        """Range text of the units of each job's last segment (None for jobs never run)."""
        self.flush()
        return self.units
