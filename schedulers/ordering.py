"""Queue orders: which waiting job comes first.

Each order maps (now, waiting job indices in arrival order, JobTable) to the same indices in
priority order. Ties always fall back to arrival order (submit time, then job id), so every order
is a strict total order and runs are deterministic.

* ``fcfs``: arrival order.
* ``sjf``: shortest estimate first (the estimate is the requested time unless an estimate model
  replaces it).
* ``ljf``: longest estimate first.
* ``saf``: smallest area (estimate x units) first.
* ``wfp3``: largest (wait / estimate)^3 x units first (Tang et al., "Fault-aware, utility-based job
  scheduling on Blue Gene/P systems", IEEE Cluster 2009).
* ``unicep``: largest wait / (log2(units) x estimate) first (same source); for 1-unit jobs
  log2(2) = 1 is used so the score stays finite (our convention).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .base import JobTable

OrderFn = Callable[[float, np.ndarray, JobTable], np.ndarray]


def order_fcfs(now: float, queue: np.ndarray, jobs: JobTable) -> np.ndarray:
    return queue


def _by_key(queue: np.ndarray, key: np.ndarray) -> np.ndarray:
    # lexsort: last key is primary; arrival (= index order) breaks ties
    return queue[np.lexsort((queue, key))]


def order_sjf(now: float, queue: np.ndarray, jobs: JobTable) -> np.ndarray:
    return _by_key(queue, jobs.estimate[queue])


def order_ljf(now: float, queue: np.ndarray, jobs: JobTable) -> np.ndarray:
    return _by_key(queue, -jobs.estimate[queue])


def order_saf(now: float, queue: np.ndarray, jobs: JobTable) -> np.ndarray:
    return _by_key(queue, jobs.estimate[queue] * jobs.procs[queue])


def order_wfp3(now: float, queue: np.ndarray, jobs: JobTable) -> np.ndarray:
    wait = now - jobs.submit[queue]
    score = (wait / jobs.estimate[queue]) ** 3 * jobs.procs[queue]
    return _by_key(queue, -score)


def order_unicep(now: float, queue: np.ndarray, jobs: JobTable) -> np.ndarray:
    wait = now - jobs.submit[queue]
    score = wait / (np.log2(np.maximum(jobs.procs[queue], 2)) * jobs.estimate[queue])
    return _by_key(queue, -score)


ORDERS: dict[str, OrderFn] = {
    "fcfs": order_fcfs,
    "sjf": order_sjf,
    "ljf": order_ljf,
    "saf": order_saf,
    "wfp3": order_wfp3,
    "unicep": order_unicep,
}

#: Orders whose result does not depend on ``now`` (they can be cached between passes).
STATIC_ORDERS = {"fcfs", "sjf", "ljf", "saf"}


def get_order(name: str) -> OrderFn:
    try:
        return ORDERS[name]
    except KeyError:
        raise ValueError(f"unknown queue order {name!r}; known orders: {', '.join(ORDERS)}") from None
