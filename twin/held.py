"""Held jobs, a model hook: node-request rows appended to a run's job table, submitted by a model at run time.

The engine's job table is fixed-size, so a model that asks the batch scheduler for nodes while the run
goes on (a serving deployment scaling up, `twin.serving.batch`) declares a bounded pool of *held* jobs
before the run: ``model.held_jobs(workload) -> Workload`` gives their rows (size, requested time,
user...; ``submit`` +inf). The composition root appends them after the log's jobs (`attach_held`) and
tells the engine how many there are (``Simulation(held_jobs=k)``); the model submits them with
`twin.control.EngineControl.submit` (their ``submit`` becomes that time) and ends them with
``release``. Rows never submitted are dropped from the results (`trim_held`): a run's ``jobs.csv``
holds the log's jobs and the node requests that were really made.

This is a hook of the model contract: the run (`twin.run`) calls `attach_held` and `trim_held` for
any model that declares ``held_jobs``, without knowing which model it is (serving's deployment is
one, `twin.serving.batch`; `twin.serving.held` re-exports these functions).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from hpctwin.twin.contract import JobTable
from hpctwin.twin.workload import Workload


def concat_workloads(a: Workload, b: Workload) -> Workload:
    """``a``'s rows then ``b``'s; columns of either side are filled on the other (NaN, -1, None, False)."""
    def col(x: Workload, name: str, like: np.ndarray) -> np.ndarray:
        if name in x.columns:
            return np.asarray(x.columns[name])
        n = len(x.submit)
        if like.dtype.kind == "f":
            return np.full(n, np.nan)
        if like.dtype.kind in "iu":
            return np.full(n, -1, dtype=like.dtype)
        if like.dtype.kind == "b":
            return np.zeros(n, dtype=bool)
        return np.full(n, None, dtype=object)
    cols = {}
    for name in list(a.columns) + [k for k in b.columns if k not in a.columns]:
        like = np.asarray(a.columns[name] if name in a.columns else b.columns[name])
        left, right = col(a, name, like), col(b, name, like)
        if left.dtype != right.dtype:
            left, right = left.astype(object), right.astype(object)
        cols[name] = np.concatenate((left, right))
    fields = ("job_id", "submit", "runtime", "requested_time", "procs", "user", "group", "queue", "partition", "status")
    return dataclasses.replace(a, columns=cols, **{f: np.concatenate((getattr(a, f), getattr(b, f))) for f in fields})


def attach_held(prep, jobs, models: list):
    """``(prep, jobs, k)``: the prepared run with the held rows of ``models`` appended (``k`` of them;
    estimate and kill limit = their requested time). Without such a model, the inputs unchanged and 0."""
    extra = [m.held_jobs(prep.workload) for m in models if callable(getattr(m, "held_jobs", None))]
    extra = [w for w in extra if w is not None and len(w.submit)]
    if not extra:
        return prep, jobs, 0
    if len(extra) > 1:
        raise ValueError("only one model of a run may hold node-request jobs (serving)")
    held = extra[0]
    if not np.all(held.submit == np.inf):
        raise ValueError("held jobs must have submit = +inf (the model submits them at run time)")
    wl = concat_workloads(prep.workload, held)
    est = np.concatenate((prep.estimate, held.requested_time))
    kill = np.concatenate((prep.kill_limit, held.requested_time))
    prep = dataclasses.replace(prep, workload=wl, estimate=est, kill_limit=kill)
    return prep, JobTable.of(wl, est), len(held.submit)


def trim_held(df, summary: dict, submit: np.ndarray, k: int):
    """The jobs table without the held rows never submitted (their ``submit`` is still +inf), and the
    summary's job accounting counting the node requests made as records of the run."""
    n = len(submit)
    unused = np.zeros(n, dtype=bool)
    unused[n - k:] = ~np.isfinite(submit[n - k:])
    df = df[~unused].reset_index(drop=True)
    if "jobs_simulated" in summary:
        summary["jobs_simulated"] = int(summary["jobs_simulated"]) - int(unused.sum())
    acc = summary.get("accounting")
    if acc is not None:
        used = int(k - unused.sum())
        values, counts = np.unique(df["state"].to_numpy().astype(str), return_counts=True)
        acc["simulated"] = {str(v): int(c) for v, c in zip(values, counts)}
        acc["records"] = int(acc["records"]) + used
        acc["node_requests_of_models"] = used
        total = sum(acc["dropped_by_reader"].values()) + sum(acc["skipped_by_run"].values()) + len(df)
        acc["balanced"] = bool(total == acc["records"])
    return df
