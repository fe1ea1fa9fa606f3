"""LAF: largest area first, with the backfilling rules of `schedulers.backfill`.

A waiting job's area is ``procs x estimate`` (unit-seconds). LAF starts the queue in decreasing area,
the mirror of ``saf`` (smallest area first, `schedulers.ordering`): it favours wide, long jobs, which
FCFS-with-backfilling and SAF push back, so it is the usual opposite baseline when a study asks how much
a size-based order starves large jobs or small ones. Ties fall back to arrival order (submit time, then
job id), as every order of `schedulers.ordering`, so runs are deterministic.

``--scheduler laf`` starts jobs in LAF order without backfilling; ``--backfill easy`` or
``conservative`` adds that rule.
"""
from __future__ import annotations

import numpy as np

from .backfill import QueueScheduler
from .base import JobTable


def order_laf(now: float, queue: np.ndarray, jobs: JobTable) -> np.ndarray:
    """``queue`` (job indices in arrival order) by decreasing area ``procs x estimate``, ties by arrival."""
    area = jobs.procs[queue].astype(np.float64) * jobs.estimate[queue]
    return queue[np.lexsort((queue, -area))]


class LAFScheduler(QueueScheduler):
    """Largest area first (see the module docstring); ``backfill``: ``none`` (default), ``easy`` or
    ``conservative``."""

    def __init__(self, backfill: str = "none"):
        super().__init__("fcfs", backfill, name="laf" if backfill == "none" else f"laf+{backfill}")
        self.order_name = "laf"
        self.order = order_laf
        self._static_order = False            # a custom order: recomputed at every pass
