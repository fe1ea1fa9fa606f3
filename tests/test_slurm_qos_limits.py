"""Issue 27 item 3: QOS and association limits of the Slurm-like policy as slurmctld 22.05 enforces them
(`schedulers/slurm_limits.py`, src/slurmctld/acct_policy.c): MaxSubmitJobsPerUser / GrpSubmitJobs /
MaxSubmitJobs reject a submission, GrpJobs / MaxJobs / association GrpJobs / GrpTRES hold a job,
MaxWall / MaxTRESPerJob / MaxTRESPerNode keep a job pending for good (rejected with DenyOnLimit).

Every case is hand-checked on a 4-node machine (select/linear, priority/basic: FIFO, one unit a node
unless said): the starts, the reasons, the counts in the summary, the accounts-file errors with
file:line:field.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from hpctwin.schedulers.slurm_limits import load_limits, parse_wall
from hpctwin.schedulers.slurm_priority import AccountsError, load_accounts
from hpctwin.twin.run import RunConfig, run
from hpctwin.twin.workload import Workload

pytestmark = pytest.mark.filterwarnings("ignore:.*read but not modelled")
NAN = float("nan")


def simulate(tmp_path, acc: str, jobs: list[dict], nodes: int = 4, **opts):
    """jobs: dicts of submit, run, [procs (1), req (= run), user (0), qos, account, uname]. Returns the
    jobs table indexed by job id and the scheduler's summary parameters."""
    n = len(jobs)
    cols = {}
    for key, col in (("qos", "qos_name"), ("account", "account_name"), ("uname", "user_name")):
        if any(key in j for j in jobs):
            cols[col] = np.array([j.get(key, "") for j in jobs], dtype=object)
    wl = Workload.from_arrays(
        "t", submit=[j["submit"] for j in jobs], runtime=[j["run"] for j in jobs],
        procs=[j.get("procs", 1) for j in jobs], requested_time=[j.get("req", j["run"]) for j in jobs],
        user=[j.get("user", 0) for j in jobs], group=[0] * n, job_id=np.arange(1, n + 1), columns=cols)
    f = tmp_path / "acc.toml"
    f.write_text(acc)
    r = run(RunConfig(workload="t", scheduler="slurm", nodes=nodes,
                      options={"scheduler": {"accounts": str(f), **opts}}), workload=wl)
    return r.jobs.set_index("job_id"), r.summary["scheduler_params"]


def starts(df) -> dict:
    return {int(k): (None if math.isnan(v) else v) for k, v in df.start.items()}


# ---------------------------------------------------------------- rejected at submission
def test_max_submit_jobs_per_user_rejects_the_submission(tmp_path):
    """MaxSubmitJobsPerUser=2 counts the user's jobs submitted and not ended (acct_policy_add_job_submit
    at creation, removed in job_completion_logger). t=0: user 1's jobs 1, 2 are accepted, job 3 would be
    the third: rejected (it never enters the queue), user 2's job 4 is not concerned. t=100: jobs 1, 2
    end first (the engine's order: finishes, then submissions), so jobs 5 and 6 are accepted; job 7 at
    105 finds 5 and 6 running: rejected."""
    u1 = dict(run=100, user=1)
    jobs = [dict(submit=0, **u1), dict(submit=0, **u1), dict(submit=0, **u1), dict(submit=0, run=100, user=2),
            dict(submit=100, run=10, user=1), dict(submit=100, run=10, user=1), dict(submit=105, run=10, user=1)]
    df, sp = simulate(tmp_path, "[qos.normal]\nMaxSubmitJobsPerUser = 2\n", jobs)
    assert starts(df) == {1: 0.0, 2: 0.0, 3: None, 4: 0.0, 5: 100.0, 6: 100.0, 7: None}
    assert df.state.to_dict()[3] == "PENDING" and df.state.to_dict()[7] == "PENDING"
    assert df.limit_rejected.tolist() == [False, False, True, False, False, False, True]
    assert df.limit_reason.tolist() == ["", "", "QOSMaxSubmitJobPerUserLimit", "", "", "",
                                        "QOSMaxSubmitJobPerUserLimit"]
    assert sp["rejected_at_submit"] == {"QOSMaxSubmitJobPerUserLimit": 2}
    assert sp["never_runnable"] == {} and "pending_reasons" not in sp


def test_grp_submit_jobs_over_all_users(tmp_path):
    jobs = [dict(submit=0, run=100, user=u) for u in (1, 2, 3)] + [dict(submit=100, run=10, user=3)]
    df, sp = simulate(tmp_path, "[qos.normal]\nGrpSubmitJobs = 2\n", jobs)
    assert starts(df) == {1: 0.0, 2: 0.0, 3: None, 4: 100.0}
    assert sp["rejected_at_submit"] == {"QOSGrpSubmitJobsLimit": 1}


def test_association_max_submit_jobs(tmp_path):
    """users.alice MaxSubmitJobs=1 (no QOS MaxSubmitJobsPerUser, so the association's applies)."""
    jobs = [dict(submit=0, run=100, uname="alice", account="a"), dict(submit=0, run=100, uname="alice", account="a"),
            dict(submit=0, run=100, uname="bob", account="a")]
    df, sp = simulate(tmp_path, "[users]\nalice = { shares = 1, MaxSubmitJobs = 1 }\n", jobs)
    assert starts(df) == {1: 0.0, 2: None, 3: 0.0}
    assert sp["rejected_at_submit"] == {"AssocMaxSubmitJobLimit": 1}


def test_qos_max_submit_overrides_the_association(tmp_path):
    """The association's MaxSubmitJobs is tested only when the QOS sets no MaxSubmitJobsPerUser
    (_acct_policy_validate: qos_rec.max_submit_jobs_pu == INFINITE)."""
    acc = "[qos.normal]\nMaxSubmitJobsPerUser = 2\n[users]\nalice = { MaxSubmitJobs = 1 }\n"
    jobs = [dict(submit=0, run=100, uname="alice", account="a")] * 3
    df, sp = simulate(tmp_path, acc, jobs)
    assert starts(df) == {1: 0.0, 2: 0.0, 3: None}
    assert sp["rejected_at_submit"] == {"QOSMaxSubmitJobPerUserLimit": 1}


# ---------------------------------------------------------------- held while running jobs count
def test_grp_jobs_holds_a_job_and_not_other_qos(tmp_path):
    """QOS 'small' GrpJobs=2: job 3 waits for job 1's end (100) with QOSGrpJobsLimit; job 4 of QOS
    'normal' submitted at 1 starts at once on the free node (a held job blocks nothing)."""
    jobs = [dict(submit=0, run=100, user=1, qos="small"), dict(submit=0, run=200, user=2, qos="small"),
            dict(submit=0, run=100, user=3, qos="small"), dict(submit=1, run=10, user=4, qos="normal")]
    df, sp = simulate(tmp_path, "[qos.small]\nGrpJobs = 2\n[qos.normal]\n", jobs)
    assert starts(df) == {1: 0.0, 2: 0.0, 3: 100.0, 4: 1.0}
    assert sp["pending_reasons"] == {"QOSGrpJobsLimit": 1}
    assert df.limit_reason.to_dict()[3] == "QOSGrpJobsLimit"


def test_grp_jobs_is_tested_before_max_jobs_per_user(tmp_path):
    """_qos_job_runnable_pre_select tests grp_jobs before max_jobs_pu: job 2 (same user) is held with
    QOSGrpJobsLimit, not QOSMaxJobsPerUserLimit."""
    jobs = [dict(submit=0, run=100, user=1), dict(submit=0, run=100, user=1)]
    df, sp = simulate(tmp_path, "[qos.normal]\nGrpJobs = 1\nMaxJobsPerUser = 1\n", jobs)
    assert starts(df) == {1: 0.0, 2: 100.0}
    assert sp["pending_reasons"] == {"QOSGrpJobsLimit": 1}


def test_max_jobs_per_user_reason_is_counted(tmp_path):
    jobs = [dict(submit=0, run=100, user=1), dict(submit=0, run=100, user=1), dict(submit=0, run=50, user=2)]
    df, sp = simulate(tmp_path, "[qos.normal]\nMaxJobsPerUser = 1\nGrpJobs = 5\n", jobs)
    assert starts(df) == {1: 0.0, 2: 100.0, 3: 0.0}
    assert sp["pending_reasons"] == {"QOSMaxJobsPerUserLimit": 1}


def test_association_grp_jobs_of_an_account_and_its_parent(tmp_path):
    """accounts: science (GrpJobs=2) > phys; chem (GrpJobs=1). alice and bob in phys use science's two
    slots: carol (phys) waits for the first end (100); dave and erin in chem: one at a time."""
    acc = ("[accounts]\nscience = { shares = 1, GrpJobs = 2 }\nphys = { parent = \"science\" }\n"
           "chem = { shares = 1, GrpJobs = 1 }\n")
    jobs = [dict(submit=0, run=100, uname="alice", account="phys"), dict(submit=0, run=200, uname="bob", account="phys"),
            dict(submit=0, run=10, uname="carol", account="phys"), dict(submit=0, run=30, uname="dave", account="chem"),
            dict(submit=0, run=30, uname="erin", account="chem")]
    df, sp = simulate(tmp_path, acc, jobs, nodes=8)
    assert starts(df) == {1: 0.0, 2: 0.0, 3: 100.0, 4: 0.0, 5: 30.0}
    assert sp["pending_reasons"] == {"AssocGrpJobsLimit": 2}


def test_account_max_jobs_is_inherited_by_its_users(tmp_path):
    """accounts.phys MaxJobs=1 is each user's association limit (pre-propagated): alice's second job
    waits (AssocMaxJobsLimit) while bob's runs; users.bob MaxJobs=2 overrides it for bob."""
    acc = "[accounts]\nphys = { shares = 1, MaxJobs = 1 }\n[users]\nbob = { MaxJobs = 2 }\n"
    jobs = [dict(submit=0, run=100, uname="alice", account="phys"), dict(submit=0, run=100, uname="alice", account="phys"),
            dict(submit=0, run=100, uname="bob", account="phys"), dict(submit=0, run=100, uname="bob", account="phys")]
    df, sp = simulate(tmp_path, acc, jobs, nodes=8)
    assert starts(df) == {1: 0.0, 2: 100.0, 3: 0.0, 4: 0.0}
    assert sp["pending_reasons"] == {"AssocMaxJobsLimit": 1}


def test_qos_max_jobs_per_user_overrides_association_max_jobs(tmp_path):
    acc = "[qos.normal]\nMaxJobsPerUser = 2\n[users]\nalice = { MaxJobs = 1 }\n"
    jobs = [dict(submit=0, run=100, uname="alice", account="a")] * 2
    df, sp = simulate(tmp_path, acc, jobs)
    assert starts(df) == {1: 0.0, 2: 0.0}


def test_association_grp_tres_on_nodes(tmp_path):
    """accounts.phys GrpTRES node=3: alice's 2-node job runs, bob's 2-node job (same account) waits for
    it (AssocGrpNodeLimit); a 1-node job of bob fits the third node and backfills past it."""
    acc = "[accounts]\nphys = { shares = 1, GrpTRES = \"node=3\" }\n"
    jobs = [dict(submit=0, run=100, procs=2, uname="alice", account="phys"),
            dict(submit=0, run=100, procs=2, uname="bob", account="phys"),
            dict(submit=0, run=50, procs=1, uname="bob", account="phys")]
    df, sp = simulate(tmp_path, acc, jobs)
    assert starts(df) == {1: 0.0, 2: 100.0, 3: 0.0}
    assert sp["pending_reasons"] == {"AssocGrpNodeLimit": 1}


def test_qos_grp_tres_overrides_the_association_one(tmp_path):
    """A TRES the QOS's GrpTRES sets is not tested against the association's (node=1 ignored)."""
    acc = "[qos.normal]\nGrpTRES = \"node=4\"\n[accounts]\nphys = { GrpTRES = \"node=3\" }\n"
    jobs = [dict(submit=0, run=100, procs=2, uname="alice", account="phys"),
            dict(submit=0, run=100, procs=2, uname="bob", account="phys")]
    df, sp = simulate(tmp_path, acc, jobs)
    assert starts(df) == {1: 0.0, 2: 0.0}


# ---------------------------------------------------------------- never runnable
def test_max_wall_keeps_a_job_pending_for_good(tmp_path):
    """MaxWall=60 (minutes): job 1 asks 3601 s = 61 minutes (time_str2mins rounds up): pending for good
    with QOSMaxWallDurationPerJobLimit (not rejected without DenyOnLimit); job 2 (exactly 60 min) runs.
    Job 1 still holds a MaxSubmitJobsPerUser slot (it is pending in Slurm): user 1's job 3 is rejected."""
    acc = "[qos.normal]\nMaxWall = \"1:00:00\"\nMaxSubmitJobsPerUser = 2\n"
    jobs = [dict(submit=0, run=100, req=3601, user=1), dict(submit=0, run=100, req=3600, user=1),
            dict(submit=10, run=100, user=1)]
    df, sp = simulate(tmp_path, acc, jobs)
    assert starts(df) == {1: None, 2: 0.0, 3: None}
    assert df.limit_reason.tolist() == ["QOSMaxWallDurationPerJobLimit", "", "QOSMaxSubmitJobPerUserLimit"]
    assert df.limit_rejected.tolist() == [False, False, True]
    assert sp["never_runnable"] == {"QOSMaxWallDurationPerJobLimit": 1}
    assert sp["rejected_at_submit"] == {"QOSMaxSubmitJobPerUserLimit": 1}


def test_deny_on_limit_rejects_at_submit(tmp_path):
    """Flags=DenyOnLimit: _qos_policy_validate's strict_checking rejects the job over MaxWall; it no
    longer holds a submit slot, so job 3 is accepted."""
    acc = "[qos.normal]\nMaxWall = 60\nMaxSubmitJobsPerUser = 2\nFlags = \"DenyOnLimit\"\n"
    jobs = [dict(submit=0, run=100, req=3601, user=1), dict(submit=0, run=100, req=3600, user=1),
            dict(submit=10, run=100, user=1)]
    df, sp = simulate(tmp_path, acc, jobs)
    assert starts(df) == {1: None, 2: 0.0, 3: 10.0}
    assert df.limit_rejected.tolist() == [True, False, False]
    assert sp["rejected_at_submit"] == {"QOSMaxWallDurationPerJobLimit": 1}


def test_max_tres_per_job_and_per_node(tmp_path):
    """8 units of 2 CPUs a node (4 nodes): MaxTRESPerJob node=2 keeps the 3-node job 1 pending
    (QOSMaxNodePerJobLimit); MaxTRESPerNode cpu=1 does not apply in QOS 'normal' but keeps job 3 of
    QOS 'thin' (2 CPUs on one node) pending with QOSMaxCpuPerNode."""
    acc = "[qos.normal]\nMaxTRESPerJob = \"node=2\"\n[qos.thin]\nMaxTRESPerNode = \"cpu=1\"\n"
    jobs = [dict(submit=0, run=100, procs=6, qos="normal"), dict(submit=0, run=100, procs=4, qos="normal"),
            dict(submit=0, run=100, procs=2, qos="thin")]
    df, sp = simulate(tmp_path, acc, jobs, nodes=8, cpus_per_node=2)
    assert starts(df) == {1: None, 2: 0.0, 3: None}
    assert df.limit_reason.tolist() == ["QOSMaxNodePerJobLimit", "", "QOSMaxCpuPerNode"]
    assert sp["never_runnable"] == {"QOSMaxNodePerJobLimit": 1, "QOSMaxCpuPerNode": 1}


def test_runs_without_these_limits_keep_their_tables(tmp_path):
    jobs = [dict(submit=0, run=100, user=1), dict(submit=0, run=100, user=1)]
    df, sp = simulate(tmp_path, "[qos.normal]\nMaxJobsPerUser = 1\n", jobs)
    assert "limit_reason" not in df.columns and "rejected_at_submit" not in sp
    assert starts(df) == {1: 0.0, 2: 100.0}


# ---------------------------------------------------------------- the accounts file
def test_limits_are_read_in_both_spellings(tmp_path):
    f = tmp_path / "a.toml"
    f.write_text("[qos.normal]\nmax_submit_jobs_per_user = 3\nGrpJobs = 4\nmax_wall = \"1-02:00\"\n"
                 "MaxTRESPerJob = \"gpu=8,node=2\"\nmax_tres_per_node = \"gres/gpu=4\"\nflags = \"denyonlimit\"\n"
                 "[accounts]\nphys = { shares = 2, MaxJobs = 3, grp_tres = \"cpu=64\" }\n"
                 "[users]\nalice = { shares = 5, GrpJobs = 2, max_submit_jobs = 7 }\n")
    spec = load_limits(f)
    q = spec.qos["normal"]
    assert (q.max_submit_jobs_per_user, q.grp_jobs, q.max_wall, q.deny_on_limit) == (3, 4, 26 * 60, True)
    assert q.max_tres_per_job == {"gres/gpu": 8, "node": 2} and q.max_tres_per_node == {"gres/gpu": 4}
    assert (spec.accounts["phys"].max_jobs, spec.accounts["phys"].grp_tres) == (3, {"cpu": 64})
    assert (spec.users["alice"].grp_jobs, spec.users["alice"].max_submit_jobs) == (2, 7)
    assert load_accounts(f).user_shares == {"alice": 5.0}          # the shares still read


@pytest.mark.parametrize("value,minutes", [(90, 90), ("90", 90), ("10:30", 11), ("2:00:00", 120),
                                           ("1-0", 1440), ("1-2:30", 1590), ("1-00:00:01", 1441),
                                           ("UNLIMITED", None), (-1, None)])
def test_parse_wall(value, minutes):
    assert parse_wall(value, "w") == minutes


@pytest.mark.parametrize("text,message", [
    ("[qos.normal]\nPriority = 1\nMaxWall = \"abc\"\n",
     r"acc.toml:3: qos.normal.MaxWall: 'abc' is not a Slurm time \(minutes, M:S, H:M:S, D-H, D-H:M or D-H:M:S"),
    ("[qos.normal]\nGrpJobs = -2\n", r"acc.toml:2: qos.normal.GrpJobs: expected an integer >= 0 \(or -1: no limit\), got -2"),
    ("[qos.normal]\n\nFlags = \"NoDecay\"\n",
     r"acc.toml:3: qos.normal.Flags: flag 'NoDecay' is not modelled \(read: DenyOnLimit\); remove it"),
    ("[qos.normal]\nMaxTRESPerNode = \"node=1\"\n", r"acc.toml:2: qos.normal.MaxTRESPerNode: TRES 'node' per node"),
    ("[qos.normal]\nMaxTRESPerJob = \"mem=100\"\n",
     r"acc.toml:2: qos.normal.MaxTRESPerJob: TRES 'mem' is not modelled \(limits read: cpu, node, gres/gpu\)"),
    ("[accounts]\nchem = 1\nphys = { shares = 1, GrpJobs = \"x\" }\n",
     r"acc.toml:3: accounts.phys.GrpJobs: expected an integer >= 0 \(or -1: no limit\), got 'x'"),
    ("[users]\nalice = { MaxJobs = 1 }\n\n[users.bob]\nGrpTRES = \"gpu\"\n",
     r"acc.toml:5: users.bob.GrpTRES: 'gpu' is not NAME=COUNT"),
])
def test_accounts_file_errors_name_file_line_and_field(tmp_path, text, message):
    f = tmp_path / "acc.toml"
    f.write_text(text)
    with pytest.raises(AccountsError, match=r"^" + str(tmp_path).replace("\\", "\\\\") + "/" + message):
        load_limits(f)


def test_unknown_user_key_is_refused(tmp_path):
    f = tmp_path / "acc.toml"
    f.write_text("[users]\nalice = { shares = 1, MaxWall = 5 }\n")
    with pytest.raises(AccountsError, match=r"users.alice: unknown key\(s\) MaxWall"):
        load_accounts(f)


def test_job_over_an_association_grp_tres_alone_is_an_error(tmp_path):
    with pytest.raises(AccountsError, match=r"1 jobs can never start \(first: job 1, 3 node, whose association "
                                            r"accounts.phys GrpTRES allows node=2\)"):
        simulate(tmp_path, "[accounts]\nphys = { GrpTRES = \"node=2\" }\n",
                 [dict(submit=0, run=10, procs=3, uname="alice", account="phys")])
