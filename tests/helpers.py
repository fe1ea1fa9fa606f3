"""Shared helpers for the tests: build tiny workloads and run them through the real engine."""
from __future__ import annotations

import numpy as np

from hpctwin.schedulers.registry import make_scheduler
from hpctwin.twin.run import job_table, prepare
from hpctwin.twin.simulation import Simulation
from hpctwin.twin.workload import Workload


def workload(rows, name="test") -> Workload:
    """rows: (job_id, submit, runtime, procs, requested_time or None)."""
    rows = list(rows)
    return Workload.from_arrays(
        name,
        job_id=[r[0] for r in rows], submit=[r[1] for r in rows], runtime=[r[2] for r in rows],
        procs=[r[3] for r in rows],
        requested_time=[np.nan if r[4] is None else r[4] for r in rows],
        machine_size=None)


def simulate(rows, total, scheduler="easy", order=None, backfill=None, kill=True, sched_obj=None,
             models=(), placer=None):
    """Run the engine; returns (result, prepared workload, scheduler)."""
    wl = workload(rows)
    prep = prepare(wl, total, "test", kill_at_walltime=kill)
    sched = sched_obj or make_scheduler(scheduler, order, backfill)
    sim = Simulation(job_table(prep), prep.workload.runtime, prep.kill_limit, sched, total,
                     placer=placer, models=models)
    return sim.run(), prep, sched


def starts_by_id(res, prep) -> dict[int, float]:
    return {int(j): float(s) for j, s in zip(prep.workload.job_id, res.start)}
