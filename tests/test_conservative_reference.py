"""Conservative backfilling against an independent reference: `benchmarks/plain_conservative.py`,
written from the textbook definition with plain lists (remove and re-add every waiting job
first-fit after every job end, as pyss's ConservativeScheduler and batsched's conservative_bf do),
sharing no code with the engine's compiled plan. The general engine and the compiled fast path
must give its start times exactly."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from hpctwin.datasets.synthetic import lublin_workload
from hpctwin.schedulers.registry import make_scheduler
from hpctwin.schedulers import backfill_replay
from hpctwin.twin.run import job_table, load_workload, prepare
from hpctwin.twin.simulation import Simulation

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import plain_conservative  # noqa: E402


def _reference(jobs, prep) -> list[tuple]:
    """The reference's job tuples (submit, id, runtime, units, estimate, kill limit) in the engine's
    job order (which is the reference's (submit, id) order)."""
    wl = prep.workload
    tuples = [(float(jobs.submit[j]), int(wl.job_id[j]), float(wl.runtime[j]), int(jobs.procs[j]),
               float(jobs.estimate[j]), float(prep.kill_limit[j])) for j in range(len(jobs.submit))]
    assert tuples == sorted(tuples, key=lambda r: (r[0], r[1]))
    return tuples


def _both_paths(jobs, prep, total):
    res = Simulation(jobs, prep.workload.runtime, prep.kill_limit, make_scheduler("conservative"), total).run()
    fast = backfill_replay.replay(jobs.submit, jobs.procs, jobs.estimate, prep.workload.runtime, prep.kill_limit, total,
                                  "fcfs", "conservative")
    return np.asarray(res.start), np.asarray(fast.start)


@pytest.mark.parametrize("load, n_jobs", [pytest.param(0.8, 2000, marks=pytest.mark.slow),   # ~6 s
                                          pytest.param(1.1, 1500, marks=pytest.mark.slow)])  # ~16 s (2,000: 47 s)
def test_synthetic_log_matches_the_reference(load, n_jobs):
    """``n_jobs`` Lublin-model jobs on 64 nodes with Tsafrir estimates, every third job's estimate set to
    its runtime (it ends on time, as jobs killed at their limit do): engine and fast path equal the
    reference job by job; the reference's early-end-only variant differs, so the test sees the
    compression trigger. The overloaded case is 1,500 jobs: its queue grows all run long and the plain
    reference's cost with it (667 jobs start later in the early-end-only variant)."""
    wl = lublin_workload(jobs=n_jobs, nodes=64, seed=7, load=load)
    wl.requested_time[::3] = wl.runtime[::3]
    prep = prepare(wl, 64, "test")
    jobs = job_table(prep)
    tuples = _reference(jobs, prep)
    ref_start, _ = plain_conservative.replay(tuples, 64)
    engine, fast = _both_paths(jobs, prep, 64)
    assert engine.tolist() == ref_start
    assert fast.tolist() == ref_start
    early_only, _ = plain_conservative.replay(tuples, 64, early_only=True)
    assert early_only != ref_start
    assert sum(a > b for a, b in zip(early_only, ref_start)) > 0


def test_reference_waits_for_no_idle_time():
    """The golden case of tests/test_golden_schedules.py through the reference itself: J3 moves to 5
    after the on-time ends at 5 (6 with compression only after early ends)."""
    jobs = [(0.0, 1, 4.0, 4, 5.0, 5.0), (1.0, 2, 1.0, 2, 1.0, 1.0), (3.0, 3, 1.0, 3, 1.0, 1.0),
            (3.0, 4, 1.0, 2, 1.0, 1.0)]
    assert plain_conservative.replay(jobs, 4)[0] == [0.0, 4.0, 5.0, 4.0]
    assert plain_conservative.replay(jobs, 4, early_only=True)[0] == [0.0, 4.0, 6.0, 4.0]


@pytest.mark.slow
@pytest.mark.parametrize("log", ["KTH-SP2", "SDSC-SP2"])
def test_whole_log_matches_the_reference(log):
    """A whole Parallel Workloads Archive log (real data; skipped when absent)."""
    try:
        wl = load_workload(log)
    except Exception as exc:  # noqa: BLE001 - data not on this machine
        pytest.skip(f"{log}: {exc}")
    total = wl.machine_size
    prep = prepare(wl, total, "test")
    jobs = job_table(prep)
    ref_start, _ = plain_conservative.replay(_reference(jobs, prep), total)
    fast = backfill_replay.replay(jobs.submit, jobs.procs, jobs.estimate, prep.workload.runtime, prep.kill_limit, total,
                                  "fcfs", "conservative").start
    diff = [j for j, (a, b) in enumerate(zip(np.asarray(fast).tolist(), ref_start)) if a != b]
    assert diff == [], f"{len(diff)} jobs differ, first {diff[:3]}"
