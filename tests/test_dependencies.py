"""Job dependencies (twin/dependencies.py): Slurm's afterok/afterany/afternotok/after/singleton with ','
and '?', the engine gate, the sacct and SWF inputs; exact times checked by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest

import hpctwin
from hpctwin import RunConfig, Workload
from hpctwin.datasets.sacct import SacctError, read_sacct
from hpctwin.datasets.swf import SWFError, read_swf
from hpctwin.schedulers.checks import Canceller
from hpctwin.twin.dependencies import (NEVER_ENDED, NEVER_SATISFIED, DependencyError, Item, format_dependency,
                                       parse_dependency)
from hpctwin.twin.run import simulate

DNS, DEP = NEVER_SATISFIED, NEVER_ENDED
SCHEDULERS = ["fcfs", "easy", "conservative", "sjf", "slurm", "lxf", "laf", "wfp3"]


def wl_of(submit, runtime, procs, req=None, user=None, **cols) -> Workload:
    n = len(submit)
    columns = {k: np.asarray(v, dtype=object if k in ("dependency", "job_name", "state") else None)
               for k, v in cols.items()}
    return Workload.from_arrays("deps", submit=submit, runtime=runtime, procs=procs, user=user,
                                requested_time=req if req is not None else [1000.0] * n, columns=columns)


def run(wl: Workload, scheduler: str = "fcfs", nodes: int = 4, **kw):
    return hpctwin.run(RunConfig(workload="deps", nodes=nodes, scheduler=scheduler, **kw), workload=wl)


def col(res, name: str) -> list:
    return res.jobs.set_index("job_id")[name].tolist()


def same(a: list, b: list) -> bool:
    return all((x == y) or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))
               for x, y in zip(a, b, strict=True))


# ------------------------------------------------------------------------------------------ parsing
def test_parse_forms():
    d = parse_dependency("afterok:12:13_4,after:7+2,afterany:20_*,singleton")
    assert d.items == (Item("afterok", 12), Item("afterok", 13, 4), Item("after", 7, -1, 120.0),
                       Item("afterany", 20, -2), Item("singleton"))
    assert not d.any_of
    assert parse_dependency("afterok:1?afternotok:2").any_of
    assert parse_dependency("55").items == (Item("afterany", 55),)          # Slurm's old form
    assert parse_dependency("afterok:5(unfulfilled)").items == (Item("afterok", 5),)   # squeue's display
    for empty in ("", "(null)", None, float("nan"), "  "):
        assert parse_dependency(empty) is None
    assert format_dependency(d) == "afterok:12,afterok:13_4,after:7+2,afterany:20_*,singleton"


@pytest.mark.parametrize("text, msg", [
    ("afterok:1,afterany:2?afterok:3", "mixes ',' (all) and '?' (any): Slurm accepts one separator"),
    ("afterokk:1", "unknown dependency type 'afterokk' (did you mean 'afterok'"),
    ("aftercorr:3", "aftercorr: array task correspondence is not modelled"),
    ("afterok:x1", "'x1' is not a job id"),
    ("afterok:1+5", "+time is only allowed with after"),
    ("afterok:1,,afterok:2", "empty item"),
])
def test_parse_errors(text, msg):
    with pytest.raises(ValueError, match=re_escape(msg)):
        parse_dependency(text)


def re_escape(s: str) -> str:
    import re
    return re.escape(s)


# ------------------------------------------------------------------------------------------ semantics
def test_afterok_afternotok_after_delay_lifted_and_never(tmp_path):
    """4 units, FCFS. J1 2 units 0-100 completes. J2 afterok:1 -> eligible and started at 100. J3
    afternotok:1 can never hold (J1 completed): never started, DependencyNeverSatisfied. J4 after:1+1
    -> eligible 60 s after J1's start (a timer), starts at 60 on the 2 free units. J5 afterany:3 waits for
    a job that never runs: reason Dependency. J6 afterok:2?afterok:99: job 99 is not in the run (Slurm:
    "job is gone", the item is lifted) -> eligible at its submit, 40, runs 40-50 on 1 unit."""
    wl = wl_of([0, 0, 10, 20, 30, 40], [100, 50, 10, 30, 10, 10], [2, 2, 1, 2, 1, 1],
               dependency=["", "afterok:1", "afternotok:1", "after:1+1", "afterany:3", "afterok:2?afterok:99"])
    res = run(wl)
    assert same(col(res, "start"), [0.0, 100.0, math.nan, 60.0, math.nan, 40.0])
    assert same(col(res, "eligible"), [0.0, 100.0, math.nan, 60.0, math.nan, 40.0])
    assert col(res, "pending_reason") == ["", "", DNS, "", DEP, ""]
    assert col(res, "state") == ["COMPLETED", "COMPLETED", "PENDING", "COMPLETED", "PENDING", "COMPLETED"]
    assert col(res, "wait")[:2] == [0.0, 100.0]                  # wait stays start - submit
    assert res.summary["dependencies"] == {
        "jobs_with_dependency": 5, "items_lifted_parent_not_in_run": 1,
        "never_started_dependency_never_satisfied": 1, "never_started_dependency_never_held": 1,
        "throttled_arrays": 0, "jobs_held_by_array_limit": 0}
    acc = res.summary["accounting"]
    assert acc["simulated"] == {"COMPLETED": 4, "PENDING": 2} and acc["balanced"]


def test_timeout_parent_fails_afterok_and_satisfies_afternotok():
    """J1 runs 200 s with a 100 s limit: killed (TIMEOUT) at 100. afterok:1 never holds; afternotok:1
    becomes eligible at 100 and starts then."""
    wl = wl_of([0, 5, 5], [200, 10, 10], [1, 1, 1], req=[100, 100, 100],
               dependency=["", "afterok:1", "afternotok:1"])
    res = run(wl)
    assert same(col(res, "start"), [0.0, math.nan, 100.0])
    assert col(res, "pending_reason") == ["", DNS, ""]
    assert col(res, "state") == ["TIMEOUT", "PENDING", "COMPLETED"]


def test_log_state_decides_ok():
    """A parent that ran to its end in the twin but FAILED in the log (sacct State) is not ok."""
    wl = wl_of([0, 0, 0], [50, 10, 10], [1, 1, 1], dependency=["", "afterok:1", "afternotok:1"],
               state=["FAILED", "COMPLETED", "COMPLETED"])
    res = run(wl)
    assert same(col(res, "start"), [0.0, math.nan, 50.0])


def test_or_fails_only_when_every_item_failed():
    wl = wl_of([0, 0, 0, 1], [50, 60, 10, 10], [1, 1, 1, 1], req=[1000, 30, 1000, 1000],
               dependency=["", "", "afternotok:1?afterok:2", "afterok:1?afterok:2"])
    res = run(wl)
    # J2 is killed at 30 (TIMEOUT): both items of J3 fail at 50 (J1 completed); J4 holds at 50 through J1
    assert same(col(res, "start"), [0.0, 0.0, math.nan, 50.0])
    assert col(res, "pending_reason") == ["", "", DNS, ""]


def test_whole_array_and_one_task():
    """Array 10: tasks 0 (0-100) and 1 (0-50). afterany:10 waits for the whole array (100);
    afterany:10_1 for task 1 only (50)."""
    wl = wl_of([0, 0, 1, 1], [100, 50, 5, 5], [1, 1, 1, 1], dependency=["", "", "afterany:10", "afterany:10_1"],
               array_job_id=[10, 10, -1, -1], array_task_id=[0, 1, -1, -1])
    res = run(wl)
    assert same(col(res, "start"), [0.0, 0.0, 100.0, 50.0])


def test_singleton():
    """Same user and name 'a': J1 singleton runs 0-100; J3 (no dependency, same name) runs 0-30 beside it
    (only singleton jobs are held); J2 singleton waits for both: 100. J4 (user 2) is another key: 5."""
    wl = wl_of([0, 0, 0, 5], [100, 50, 30, 10], [1, 1, 1, 1], user=[1, 1, 1, 2],
               dependency=["singleton", "singleton", "", "singleton"], job_name=["a"] * 4)
    for s in ("fcfs", "easy", "slurm"):
        res = run(wl, s, nodes=8)
        assert same(col(res, "start"), [0.0, 100.0, 0.0, 5.0]), s
        assert same(col(res, "eligible"), [0.0, 100.0, 0.0, 5.0]), s


def test_singleton_without_names_is_lifted():
    wl = wl_of([0, 0], [100, 50], [1, 1], dependency=["singleton", "singleton"])
    res = run(wl, nodes=8)
    assert col(res, "start") == [0.0, 0.0]
    assert res.summary["dependencies"]["singleton_without_job_name_lifted"] == 2


def test_stuck_singleton_ends_the_run_with_reasons():
    """J1 (id 1) afterok:2 and J2 (id 2) singleton, same name: J2 waits for the pending J1 (smaller id),
    J1 for J2. Slurm keeps both pending; the run ends and reports them (reason Dependency)."""
    wl = wl_of([0, 0, 0], [10, 10, 10], [1, 1, 1], user=[1, 1, 1], dependency=["afterok:2", "singleton", ""],
               job_name=["a", "a", "b"])
    res = run(wl)
    assert same(col(res, "start"), [math.nan, math.nan, 0.0])
    assert col(res, "pending_reason") == [DEP, DEP, ""]


@pytest.mark.parametrize("sched", SCHEDULERS)
def test_every_scheduler_obeys_the_gate(sched):
    """A chain and a fan-in on 8 units with backfilling opportunities: no job starts before its
    eligible time, afterok children start after their parents end, and every job runs."""
    rng = np.random.default_rng(3)
    n = 40
    submit = np.sort(rng.integers(0, 2000, n)).astype(float)
    runtime = rng.integers(10, 500, n).astype(float)
    procs = rng.integers(1, 9, n)
    dep = [""] * n
    for j in range(5, n, 3):
        dep[j] = f"afterok:{j - 4}"               # job ids are 1..n: the job four places earlier
    dep[n - 1] = "afterany:" + ":".join(str(k) for k in range(1, 10))
    res = run(wl_of(submit, runtime, procs, req=runtime * 2, dependency=dep), sched, nodes=8)
    df = res.jobs.set_index("job_id")
    assert df.state.eq("COMPLETED").all()
    assert (df.start >= df.eligible).all() and (df.eligible >= df.submit).all()
    for j in range(5, n, 3):
        child, parent = j + 1, j - 4             # job ids
        assert df.start[child] >= df.end[parent]
        assert df.eligible[child] == max(df.end[parent], df.submit[child])
    assert df.start[n] >= df.end[1:9].max()


def test_runs_without_dependency_columns_are_unchanged():
    wl = wl_of([0, 10], [100, 50], [2, 2])
    res = run(wl)
    assert "eligible" not in res.jobs.columns and "dependencies" not in res.summary
    wl2 = wl_of([0, 10], [100, 50], [2, 2], dependency=["", ""])    # an empty column: no gate either
    assert "eligible" not in run(wl2).jobs.columns


def test_bad_dependency_in_a_python_workload_names_the_job():
    with pytest.raises(DependencyError, match=r"job 2: column dependency: unknown dependency type 'afterfoo'"):
        run(wl_of([0, 0], [1, 1], [1, 1], dependency=["", "afterfoo:1"]))
    with pytest.raises(DependencyError, match=r"circular job dependency: 1 -> 3 -> 2 -> 1"):
        run(wl_of([0, 0, 0], [1, 1, 1], [1, 1, 1], dependency=["afterok:3", "afterok:1", "afterany:2"]))
    with pytest.raises(DependencyError, match=r"job 1: column dependency: it depends on itself"):
        run(wl_of([0], [1], [1], dependency=["afterok:1"]))


def test_cli_error_is_one_line(tmp_path, capsys):
    from hpctwin.twin.cli import main
    p = tmp_path / "d.sacct"
    p.write_text("JobID|JobIDRaw|Submit|Start|End|NNodes|State|Dependency\n"
                 "1|1|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:01:00|1|COMPLETED|\n"
                 "2|2|2024-03-01T10:00:00|2024-03-01T10:01:00|2024-03-01T10:02:00|1|COMPLETED|afterok:1?afterany:1,x\n")
    assert main(["run", "-w", f"sacct:{p}", "--nodes", "2", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{p}:3: field Dependency: " in err and "mixes ','" in err


def test_cancelled_parent():
    """A model withdraws waiting J2 at 20 s: afterany:2 holds then (a cancelled job has ended); afterok:2
    never holds."""
    wl = wl_of([0, 10, 11, 12], [100, 10, 10, 10], [4, 1, 1, 1], dependency=["", "", "afterany:2", "afterok:2"])
    res = simulate(RunConfig(workload="deps", nodes=4, scheduler="fcfs"), wl, extra_models=[Canceller(plan=[(20.0, 1)])])
    assert same(col(res, "start"), [0.0, math.nan, 100.0, math.nan])
    assert same(col(res, "eligible"), [0.0, 10.0, 20.0, math.nan])     # J2 was eligible when withdrawn
    assert col(res, "state") == ["COMPLETED", "CANCELLED", "COMPLETED", "PENDING"]
    assert col(res, "pending_reason") == ["", "", "", DNS]


# ------------------------------------------------------------------------------------------ inputs
SACCT_HEAD = "JobID|JobIDRaw|JobName|User|Submit|Start|End|NNodes|State|Dependency|NodeList\n"


def test_sacct_dependency_and_jobname(tmp_path):
    p = tmp_path / "d.txt"
    p.write_text(SACCT_HEAD
                 + "1|1|prep|u|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:01:40|1|COMPLETED||n1\n"
                 + "2|2|main|u|2024-03-01T10:00:00|2024-03-01T10:01:40|2024-03-01T10:02:00|1|COMPLETED|"
                   "afterok:1(unfulfilled)|n2\n")
    wl = read_sacct(p)
    assert wl.columns["dependency"].tolist() == ["", "afterok:1"]
    assert wl.columns["job_name"].tolist() == ["prep", "main"]
    res = run(wl, nodes=4)
    assert col(res, "start") == [0.0, 100.0] and col(res, "eligible") == [0.0, 100.0]


def test_sacct_bad_dependency_is_located(tmp_path):
    p = tmp_path / "d.txt"
    p.write_text(SACCT_HEAD + "1|1|a|u|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:01:40|1|COMPLETED|"
                 "afterok:1:zz|n1\n")
    with pytest.raises(SacctError, match=re_escape(f"{p}:2: field Dependency: 'afterok:1:zz': 'zz' is not a job id")):
        read_sacct(p)


SWF_HDR = "; MaxProcs: 4\n"


def test_swf_preceding_job_and_think_time(tmp_path):
    """Job 2 names job 1 as preceding job with 30 s think time: eligible at 100 + 30 = 130; job 3 (no
    preceding job) backfills at 100 with EASY... and FCFS alike (it fits on the free units)."""
    p = tmp_path / "f.swf"
    p.write_text(SWF_HDR + "1 0 0 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n"
                 "2 0 100 50 2 -1 -1 2 60 -1 1 1 1 -1 1 -1 1 30\n"
                 "3 10 90 20 2 -1 -1 2 60 -1 1 1 1 -1 1 -1 -1 -1\n")
    wl = read_swf(p)
    assert wl.columns["dependency"].tolist() == ["", "afterany:1", ""]
    assert wl.columns["dependency_delay"].tolist() == [0.0, 30.0, 0.0]
    for s in ("fcfs", "easy"):
        res = run(wl, s)
        assert col(res, "start") == [0.0, 130.0, 100.0] and col(res, "eligible") == [0.0, 130.0, 10.0]


def test_swf_preceding_job_must_be_earlier(tmp_path):
    p = tmp_path / "f.swf"
    p.write_text(SWF_HDR + "1 0 0 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 2 0\n"
                 "2 0 100 50 2 -1 -1 2 60 -1 1 1 1 -1 1 -1 -1 -1\n")
    with pytest.raises(SWFError, match=re_escape(f"{p}:2: field 17 (prec_job): job 1 names preceding job 2, which "
                                                 "is not an earlier job")):
        read_swf(p)


def test_swf_without_feedback_fields_has_no_dependency_column(tmp_path):
    p = tmp_path / "f.swf"
    p.write_text(SWF_HDR + "1 0 0 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n")
    assert "dependency" not in read_swf(p).columns


def test_export_writes_the_eligible_time(tmp_path):
    from hpctwin.datasets.sacct import export_sacct
    wl = wl_of([0, 0], [100, 50], [2, 2], dependency=["", "afterok:1"])
    res = run(wl)
    export_sacct(res.jobs, tmp_path / "out.txt", epoch=1709287200)
    rows = [r.split("|") for r in (tmp_path / "out.txt").read_text().splitlines()]
    assert [r[rows[0].index("Eligible")] for r in rows[1:]] == ["2024-03-01T10:00:00", "2024-03-01T10:01:40"]
    back = read_sacct(tmp_path / "out.txt")
    assert back.columns["eligible"].tolist() == [0.0, 100.0]


def test_slurm_age_counts_from_eligible_time(tmp_path):
    """Slurm's age factor counts from begin_time (set when the dependency holds; 0 before: age 0).
    One node; A (0-100), B afterok:A submitted at 0, C submitted at 50; priority = age only, recomputed
    every second. At 100 B has aged 0 s and C 50 s: C starts at 100, B at 110 (from submit B would
    have aged 100 s and gone first)."""
    conf = tmp_path / "age.conf"
    conf.write_text("PriorityType=priority/multifactor\nAccountingStorageType=accounting_storage/slurmdbd\n"
                    "PriorityWeightAge=100000\nPriorityMaxAge=1-0\nPriorityCalcPeriod=1\n"
                    "SchedulerParameters=bf_resolution=1\nNodeName=n1\nPartitionName=p Nodes=ALL Default=YES\n")
    wl = wl_of([0, 0, 50], [100, 10, 10], [1, 1, 1], req=[100, 10, 10], dependency=["", "afterok:1", ""])
    res = run(wl, "slurm", nodes=1, options={"scheduler": {"slurm_conf": str(conf)}})
    assert col(res, "start") == [0.0, 110.0, 100.0]
    assert col(res, "eligible") == [0.0, 100.0, 50.0]
