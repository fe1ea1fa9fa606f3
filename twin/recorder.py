"""The recorder: the run's piecewise-constant series (busy units, queue length, down units) and
the progress bar.

One row per event time: each value holds from its time to the next row's. ``busy`` excludes units
out of service (down); the ``down`` column exists from the first outage on (earlier rows are 0).
"""
from __future__ import annotations

from array import array

import numpy as np

#: finished jobs between two progress-bar updates
PROGRESS_EVERY = 2000


class Recorder:
    """Series recorded at every event, and the optional tqdm-like ``progress`` (``update(n)``)."""

    __slots__ = ("t", "busy", "queue", "down", "progress", "_pending")

    def __init__(self, progress=None):
        self.t = array("d")                # compact: 8 bytes a value, no Python objects kept
        self.busy = array("q")
        self.queue = array("q")
        self.down: list[int] | None = None
        self.progress = progress
        self._pending = 0

    def record(self, now: float, busy: int, down: int, queued: int) -> None:
        self.t.append(now)
        self.busy.append(busy - down)
        self.queue.append(queued)
        if self.down is not None:
            self.down.append(down)

    def outage(self) -> None:
        """Units went out of service: start the ``down`` column."""
        if self.down is None:
            self.down = [0] * len(self.t)

    def job_done(self) -> None:
        """One more job finished (progress bar)."""
        if self.progress is not None:
            self._pending += 1
            if self._pending >= PROGRESS_EVERY:
                self.progress.update(self._pending)
                self._pending = 0

    def close(self) -> None:
        if self.progress is not None and self._pending:
            self.progress.update(self._pending)
            self._pending = 0

    @property
    def end_time(self) -> float:
        return self.t[-1] if self.t else 0.0

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        down = None if self.down is None else np.asarray(self.down, dtype=np.int64)
        return (np.asarray(self.t), np.asarray(self.busy, dtype=np.int64),
                np.asarray(self.queue, dtype=np.int64), down)
