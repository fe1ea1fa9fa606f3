"""Job arrays with %k throttles (twin/dependencies.py): at most k tasks of an array run at once, the
others stay queued (Slurm's JobArrayTaskLimit) with their submit time; exact times checked by hand."""
from __future__ import annotations

import re

import numpy as np
import pytest

import hpctwin
from hpctwin import RunConfig, Workload
from hpctwin.datasets.sacct import SacctError, read_sacct
from hpctwin.twin.dependencies import DependencyError

SCHEDULERS = ["fcfs", "easy", "conservative", "sjf", "slurm", "lxf", "laf", "wfp3"]


def array_wl(runtime, throttle: int, extra: int = 1) -> Workload:
    """One array (id 10) of len(runtime) 1-unit tasks at t=0 with %throttle, plus ``extra`` plain
    1-unit jobs of 5 s at t=1."""
    k = len(runtime)
    n = k + extra
    return Workload.from_arrays(
        "arr", submit=[0.0] * k + [1.0] * extra, runtime=list(runtime) + [5.0] * extra, procs=[1] * n,
        requested_time=[1000.0] * n, job_id=list(range(100, 100 + n)),
        columns={"array_job_id": np.array([10] * k + [-1] * extra), "array_task_id": np.array(list(range(k)) + [-1] * extra),
                 "array_throttle": np.array([throttle] * k + [0] * extra)})


def run(wl, scheduler="fcfs", nodes=8):
    return hpctwin.run(RunConfig(workload="arr", nodes=nodes, scheduler=scheduler), workload=wl)


@pytest.mark.parametrize("sched", SCHEDULERS)
def test_throttle_two(sched):
    """Tasks 100 s, 50, 30, 10, 10 with %2 on 8 units: 0 and 1 at 0; task 1 ends at 50 -> task 2 at 50
    (ends 80) -> task 3 at 80 (ends 90) -> task 4 at 90. The plain job is not held: it starts at 1."""
    res = run(array_wl([100, 50, 30, 10, 10], 2), sched)
    df = res.jobs.set_index("job_id")
    assert df.start.tolist() == [0.0, 0.0, 50.0, 80.0, 90.0, 1.0]
    assert df.eligible.tolist() == [0.0] * 5 + [1.0]          # a throttle does not change EligibleTime
    assert df.wait.tolist() == [0.0, 0.0, 50.0, 80.0, 90.0, 0.0]
    assert res.summary["dependencies"]["throttled_arrays"] == 1
    assert res.summary["dependencies"]["jobs_held_by_array_limit"] == 3


def test_throttle_one_runs_tasks_in_task_order():
    res = run(array_wl([30, 20, 10], 1, extra=0))
    assert res.jobs.start.tolist() == [0.0, 30.0, 50.0]


def test_throttle_is_never_exceeded_on_a_random_array():
    rng = np.random.default_rng(5)
    rt = rng.integers(1, 300, 60).astype(float)
    for sched in ("easy", "conservative", "slurm"):
        df = run(array_wl(rt, 3, extra=0), sched, nodes=16).jobs
        ev = sorted([(s, 1) for s in df.start] + [(e, -1) for e in df.end], key=lambda x: (x[0], x[1]))
        assert max(np.cumsum([d for _, d in ev])) == 3, sched


def test_no_throttle_column_means_no_gate():
    wl = array_wl([10, 10], 0)
    res = run(wl)
    assert "eligible" not in res.jobs.columns and res.jobs.start.tolist() == [0.0, 0.0, 1.0]


def test_two_throttles_for_one_array_are_refused():
    wl = array_wl([10, 10], 2, extra=0)
    wl.columns["array_throttle"] = np.array([2, 3])
    with pytest.raises(DependencyError, match="job 101: column array_throttle: 3, but another task of array 10 says 2"):
        run(wl)


HEAD = "JobID|JobIDRaw|Submit|Start|End|NNodes|State\n"


def test_sacct_throttle_from_the_pending_remainder(tmp_path):
    """sacct shows the not-started remainder of array 300 as 300_[2-4%1] (dropped: it never ran); its %1
    is the array's throttle, given to every task."""
    p = tmp_path / "a.txt"
    p.write_text(HEAD
                 + "300_0|300|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:01:00|1|COMPLETED\n"
                 + "300_1|301|2024-03-01T10:00:00|2024-03-01T10:01:00|2024-03-01T10:02:00|1|COMPLETED\n"
                 + "300_[2-4%1]|300|2024-03-01T10:00:00|Unknown|Unknown|1|PENDING\n"
                 + "400|400|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:00:30|1|COMPLETED\n")
    wl = read_sacct(p)
    assert wl.columns["array_throttle"].tolist() == [1, 1, 0]
    res = hpctwin.run(RunConfig(workload="a", nodes=4, scheduler="easy"), workload=wl)
    assert res.jobs.start.tolist() == [0.0, 60.0, 0.0]


@pytest.mark.parametrize("jid", ["300_[2-4%0]", "300_[2-4%x]"])
def test_sacct_bad_throttle_is_located(tmp_path, jid):
    p = tmp_path / "a.txt"
    p.write_text(HEAD + f"{jid}|300|2024-03-01T10:00:00|Unknown|Unknown|1|PENDING\n")
    with pytest.raises(SacctError, match=re.escape(f"{p}:2: field JobID: '[2-4%") + ".*whole number >= 1"):
        read_sacct(p)
