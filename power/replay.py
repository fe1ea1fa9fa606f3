"""Drive a `PowerModel` without the scheduling engine: jobs with known start times and nodes.

Used by the validation experiment (tasks replayed at their recorded times), the model-only
benchmark and the tests. Events are fed in the engine's order: at equal times finishes before
starts, ties by job index. Rate factors the model returns are applied exactly (the finish time of a
slowed job moves), like the engine's progress-rate mechanism.
"""
from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from hpctwin.schedulers.base import JobTable
from hpctwin.twin.model_api import ModelContext


def job_table(submit, procs, estimate=None, columns: dict | None = None) -> JobTable:
    """A minimal `JobTable` for ``n`` jobs (unknown user/group/queue/partition)."""
    submit = np.asarray(submit, dtype=float)
    n = len(submit)
    est = np.asarray(estimate if estimate is not None else np.full(n, 3600.0), dtype=float)
    m1 = np.full(n, -1, dtype=np.int64)
    return JobTable(job_id=np.arange(1, n + 1), submit=submit, procs=np.asarray(procs, dtype=np.int64),
                    estimate=est, requested_time=est.copy(), user=m1, group=m1.copy(), queue=m1.copy(),
                    partition=m1.copy(), columns=dict(columns or {}))


def context(n_nodes: int, submit, procs, runtime, *, system: Any = None, seed: int = 0,
            columns: dict | None = None, options: dict | None = None) -> ModelContext:
    """A `ModelContext` for a replay of ``len(submit)`` jobs."""
    return ModelContext(n_nodes=int(n_nodes), jobs=job_table(submit, procs, runtime, columns),
                        runtime=np.asarray(runtime, dtype=float), system=system, seed=seed,
                        options=dict(options or {}))


def replay(model, start, runtime, nodes: list[np.ndarray], end: float | None = None) -> dict[str, np.ndarray]:
    """Feed starts/finishes to a bound model; returns ``start`` and actual ``end`` times per job.

    ``start``: start time per job (s); ``runtime``: work at full speed (s); ``nodes``: node ids per
    job. Jobs with NaN start are skipped. The model's rate factors stretch the jobs exactly.
    """
    start = np.asarray(start, dtype=float)
    work = np.asarray(runtime, dtype=float)
    n = len(start)
    ends = np.full(n, np.nan)
    rate = np.ones(n)
    remaining = work.copy()
    last = np.full(n, np.nan)            # time of the last progress update
    version = np.zeros(n, dtype=np.int64)
    heap: list[tuple[float, int, int, int]] = []   # (time, kind 0=finish 1=start, job, version)
    for j in np.flatnonzero(~np.isnan(start)):
        heapq.heappush(heap, (float(start[j]), 1, int(j), 0))

    def apply(now: float, rates: dict | None) -> None:
        if not rates:
            return
        for j, f in rates.items():
            if np.isnan(last[j]) or not np.isnan(ends[j]):
                continue
            remaining[j] -= (now - last[j]) * rate[j]
            last[j] = now
            rate[j] = f
            version[j] += 1
            heapq.heappush(heap, (now + max(remaining[j], 0.0) / f, 0, j, int(version[j])))
            model.on_rate_change(now, j, f)

    while heap:
        t, kind, j, ver = heapq.heappop(heap)
        if kind == 0:
            if ver != version[j] or not np.isnan(ends[j]):
                continue
            ends[j] = t
            apply(t, model.on_finish(t, j))
        else:
            last[j] = t
            version[j] += 1
            heapq.heappush(heap, (t + work[j], 0, j, int(version[j])))
            apply(t, model.on_start(t, j, np.asarray(nodes[j], dtype=np.int64)))
    stop = float(np.nanmax(ends)) if np.any(~np.isnan(ends)) else 0.0
    model.finalize(stop if end is None else max(end, stop))
    return {"start": start, "end": ends}
