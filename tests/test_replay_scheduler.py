"""``--scheduler replay`` (schedulers/replay.py): the log's recorded starts and nodes, exact times
checked by hand; infeasible histories are located errors."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import hpctwin
from hpctwin import RunConfig, Workload
from hpctwin.datasets.sacct import read_sacct
from hpctwin.datasets.swf import read_swf
from hpctwin.schedulers.replay import ReplayConfigError, ReplayError
from hpctwin.twin.cli import main

HDR = "; MaxProcs: 4\n"
#: J1 4 units 0-100; J2 waits 100 s (starts 100); J3 submitted at 10 waits 140 s (starts 150), although
#: it would fit at 100 (any backfilling policy would start it then)
SWF = HDR + ("1 0 0 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n"
             "2 0 100 50 2 -1 -1 2 60 -1 1 1 1 -1 1 -1 -1 -1\n"
             "3 10 140 20 2 -1 -1 2 60 -1 1 1 1 -1 1 -1 -1 -1\n")


def swf(tmp_path, text=SWF):
    p = tmp_path / "r.swf"
    p.write_text(text)
    return p


def run(wl, nodes=4, **opts):
    return hpctwin.run(RunConfig(workload="r", nodes=nodes, scheduler="replay",
                                 options={"scheduler": opts} if opts else {}), workload=wl)


def test_swf_waits_are_the_logs(tmp_path):
    res = run(read_swf(swf(tmp_path)))
    assert res.jobs.start.tolist() == [0.0, 100.0, 150.0]
    assert res.jobs.wait.tolist() == [0.0, 100.0, 140.0]
    p = res.summary["scheduler_params"]
    assert (p["started_on_time"], p["started_late"], p["jobs_without_recorded_start"]) == (3, 0, 0)


def test_cli_prints_the_logs_waits(tmp_path):
    out = tmp_path / "run"
    assert main(["run", "-w", f"swf:{swf(tmp_path)}", "--scheduler", "replay", "-q", "--out", str(out)]) == 0
    assert pd.read_csv(out / "jobs.csv").wait.tolist() == [0.0, 100.0, 140.0]


def test_capacity_conflict_is_located_and_delay_starts_late(tmp_path):
    """J2 recorded at 50 s while J1 holds the whole machine until 100 s: the log does not fit 4 units."""
    text = SWF.replace("2 0 100 50", "2 0 50 50")
    wl = read_swf(swf(tmp_path, text))
    msg = ("scheduler replay: job 2 was recorded to start at t=50 s on 2 units, but only 0 of the machine's 4 "
           "are free then: the recorded schedule needs a larger machine (--nodes 6 at least")
    with pytest.raises(ReplayError, match=re.escape(msg)):
        run(wl)
    res = run(wl, on_conflict="delay")
    assert res.jobs.start.tolist() == [0.0, 100.0, 150.0]
    p = res.summary["scheduler_params"]
    assert (p["started_on_time"], p["started_late"], p["max_delay_s"]) == (2, 1, 50.0)
    assert run(wl, nodes=6).jobs.start.tolist() == [0.0, 50.0, 150.0]


def test_cli_conflict_is_one_line(tmp_path, capsys):
    p = swf(tmp_path, SWF.replace("2 0 100 50", "2 0 50 50"))
    assert main(["run", "-w", f"swf:{p}", "--scheduler", "replay", "-q"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "job 2 was recorded to start at t=50 s" in err and "--nodes 6" in err


SACCT = ("JobID|JobIDRaw|Submit|Start|End|NNodes|State|NodeList\n"
         "1|1|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:01:40|2|COMPLETED|n[3-4]\n"
         "2|2|2024-03-01T10:00:05|2024-03-01T10:00:10|2024-03-01T10:00:40|1|COMPLETED|n1\n"
         "3|3|2024-03-01T10:00:05|2024-03-01T10:01:40|2024-03-01T10:02:00|2|COMPLETED|n[3-4]\n")


def sacct(tmp_path, text=SACCT):
    p = tmp_path / "r.txt"
    p.write_text(text)
    return read_sacct(p)


def test_sacct_recorded_nodes_and_starts(tmp_path):
    """Nodes n1..n4 are ids 0..3 (`datasets.hostlist.node_ids`): J1 on 2-3 at 0, J2 on 0 at 10 (the
    placer would take 0-1 for J1), J3 on 2-3 at 100 when J1 leaves them."""
    res = run(sacct(tmp_path))
    assert res.jobs.start.tolist() == [0.0, 10.0, 100.0]
    assert res.jobs.nodes.tolist() == ["2-3", "0", "2-3"]
    assert res.jobs.wait.tolist() == [0.0, 5.0, 95.0]


def test_sacct_node_beyond_the_machine(tmp_path):
    with pytest.raises(ReplayConfigError, match=re.escape(
            "scheduler replay: job 1 was recorded on unit 3 (recorded_nodes, e.g. sacct NodeList), beyond the "
            "configured machine's 3 units (0-2); give the log's machine size: --nodes 4 or more")):
        run(sacct(tmp_path), nodes=3)


def test_sacct_node_used_twice_names_both_jobs(tmp_path):
    text = SACCT.replace("2024-03-01T10:01:40|2024-03-01T10:02:00|2|COMPLETED|n[3-4]",
                         "2024-03-01T10:00:50|2024-03-01T10:01:10|2|COMPLETED|n[3-4]")
    with pytest.raises(ReplayError, match=re.escape(
            "scheduler replay: job 3 was recorded to start at t=50 s on units 2-3, but unit 2 is held by job 1 "
            "(recorded start 0 s): the recorded schedule uses a node twice at once")):
        run(sacct(tmp_path, text))


def test_no_recorded_start_is_refused_unless_fcfs():
    wl = Workload.from_arrays("r", submit=[0, 0, 5], runtime=[100, 50, 10], procs=[4, 2, 2],
                              requested_time=[200, 100, 100])
    with pytest.raises(ReplayConfigError, match="the workload has no recorded start times .* "
                                                "--set scheduler.unrecorded=fcfs"):
        run(wl)
    assert run(wl, unrecorded="fcfs").jobs.start.tolist() == [0.0, 100.0, 100.0]


def test_jobs_with_unknown_wait_start_fcfs_after_the_recorded_ones(tmp_path):
    """J3's wait is -1 (unknown): with unrecorded=fcfs it starts as soon as it fits (100 s, beside J2)."""
    text = SWF.replace("3 10 140 20", "3 10 -1 20")
    wl = read_swf(swf(tmp_path, text))
    with pytest.raises(ReplayConfigError, match=r"1 jobs have no recorded start \(first: job 3\)"):
        run(wl)
    res = run(wl, unrecorded="fcfs")
    assert res.jobs.start.tolist() == [0.0, 100.0, 100.0]
    assert res.summary["scheduler_params"]["jobs_without_recorded_start"] == 1


def test_bad_option_is_refused():
    from hpctwin.twin.errors import RunConfigError
    wl = Workload.from_arrays("r", submit=[0], runtime=[1], procs=[1], requested_time=[1])
    with pytest.raises(RunConfigError, match="on_conflict must be one of auto, error, delay, got 'later'"):
        run(wl, on_conflict="later")


def test_a_failure_model_makes_conflicts_delays(tmp_path):
    """With node failures on, a recorded start whose units are down or held by a restarted job is late,
    not an error (auto): every job still runs, none before its recorded start."""
    rng = np.random.default_rng(1)
    n = 60
    submit = np.sort(rng.integers(0, 20000, n)).astype(float)
    runtime = rng.integers(100, 2000, n).astype(float)
    start, free_at = [], np.zeros(8)
    for s, r in zip(submit, runtime):          # a feasible 1-unit history on 8 units
        u = int(np.argmin(free_at))
        t = max(s, free_at[u])
        start.append(t)
        free_at[u] = t + r
    wl = Workload.from_arrays("r", submit=submit, runtime=runtime, procs=[1] * n, requested_time=runtime * 2,
                              columns={"recorded_start": np.array(start)})
    base = run(wl, nodes=8)
    assert base.jobs.start.tolist() == start
    res = hpctwin.run(RunConfig(workload="r", nodes=8, scheduler="replay", seed=3,
                                options={"failures": {"enabled": True, "node_mtbf_s": 20000.0, "repair_s": 500.0}}),
                      workload=wl)
    df = res.jobs
    assert res.summary["failures"]["node_failures"] > 0
    assert df.end.notna().all() and (df.start >= np.array(start)).all()
    assert res.summary["scheduler_params"]["started_late"] > 0
