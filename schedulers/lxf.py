"""LXF: largest expansion factor first, with the backfilling rules of `schedulers.backfill`.

A waiting job's expansion factor at time ``now`` is ``(wait + estimate) / estimate`` with ``wait = now -
submit`` (s): the slowdown it would see if it started now and ran for its estimate. It is the Maui
Scheduler's XFactor priority component (Maui Scheduler Administrator's Guide, section 5.1.2 "Priority
Factors", ``XFACTOR = 1 + QueueTime / WallClockLimit``) and the LXF order of Chiang, Arpaci-Dusseau and
Vernon, "The Impact of More Accurate Requested Runtimes on Production Job Scheduling Performance"
(JSSPP 2002). Short jobs gain priority quickly, long jobs are not starved: their factor grows with
the wait. Ties fall back to arrival order (submit time, then job id), as every order of
`schedulers.ordering`, so runs are deterministic.

``--scheduler lxf`` starts jobs in LXF order without backfilling; ``--backfill easy`` or
``conservative`` adds that rule (EASY then protects the LXF head, which can change between passes,
so no head guarantee is declared; conservative never delays a first reservation).
"""
from __future__ import annotations

import numpy as np

from .backfill import QueueScheduler
from .base import JobTable


def order_lxf(now: float, queue: np.ndarray, jobs: JobTable) -> np.ndarray:
    """``queue`` (job indices in arrival order) by decreasing expansion factor, ties by arrival."""
    est = jobs.estimate[queue]
    xfactor = (now - jobs.submit[queue] + est) / est
    return queue[np.lexsort((queue, -xfactor))]


class LXFScheduler(QueueScheduler):
    """Largest expansion factor first (see the module docstring); ``backfill``: ``none`` (default),
    ``easy`` or ``conservative``."""

    def __init__(self, backfill: str = "none"):
        super().__init__("fcfs", backfill, name="lxf" if backfill == "none" else f"lxf+{backfill}")
        self.order_name = "lxf"
        self.order = order_lxf
        self._static_order = False            # the factors change with time: no order cache between passes
