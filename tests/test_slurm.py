"""Slurm-like scheduler: hand-checked scenarios on the real engine, one per mechanism.

Each scenario's expected times are worked out in its docstring (runtimes equal requested times
unless stated, so expected ends are exact).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hpctwin.schedulers.base import JobTable
from hpctwin.schedulers.slurm import SlurmScheduler, make_slurm_scheduler
from hpctwin.schedulers.slurm_conf import SlurmConfError, SlurmConfig
from hpctwin.schedulers.slurm_priority import (AccountsError, FairShare, MultifactorPriority,
                                       load_accounts)
from hpctwin.twin.run import RunConfig, run
from hpctwin.twin.simulation import Simulation
from hpctwin.twin.workload import Workload

DATA = Path(__file__).parent / "data"


def simulate(jobs, nodes=4, conf=None, **opts):
    """jobs: list of dicts (submit, procs, run, req, [user, group, partition_name, qos_name]).
    Returns ({job_id: start}, RunResult)."""
    n = len(jobs)
    cols = {}
    for key in ("partition_name", "qos_name", "user_name", "account_name"):
        if any(key in j for j in jobs):
            cols[key] = np.array([j.get(key, "") for j in jobs], dtype=object)
    wl = Workload.from_arrays(
        "t", submit=[j["submit"] for j in jobs], runtime=[j["run"] for j in jobs],
        procs=[j["procs"] for j in jobs], requested_time=[j.get("req", j["run"]) for j in jobs],
        user=[j.get("user", 0) for j in jobs], group=[j.get("group", 0) for j in jobs],
        job_id=np.arange(1, n + 1), columns=cols)
    options = dict(opts)
    if conf:
        options["slurm_conf"] = str(DATA / conf)
    r = run(RunConfig(workload="t", scheduler="slurm", nodes=nodes,
                      options={"scheduler": options}), workload=wl)
    return dict(zip(r.jobs.job_id.tolist(), r.jobs.start.tolist())), r


# A on 2 of 4 nodes until 100; B (4 nodes) must wait for A; C (1 node, 50 s) fits now.
ABC = [dict(submit=0, procs=2, run=100), dict(submit=10, procs=4, run=100),
       dict(submit=20, procs=1, run=50)]


def test_strict_priority_and_backfill_tick():
    """Event pass at 20: B (higher priority) cannot start, so its partition is failed and C,
    which fits, is held back. The backfill thread started at 0 runs every bf_interval=30 s: at 30
    B is reserved from 100 to 200 (bf_resolution 1) and C ([30, 80]) does not touch it: C starts
    at 30 -- not at 20, the time it was submitted."""
    st, r = simulate(ABC, bf_resolution=1)
    assert st == {1: 0, 2: 100, 3: 30}
    stats = r.summary["scheduler_params"]["stats"]
    assert stats["backfill_starts"] == 1 and stats["main_starts"] == 2


def test_backfill_tick_follows_interval():
    """bf_interval=7: cycles at 7, 14, 21...: C (submitted at 20) starts at 21."""
    st, _ = simulate(ABC, bf_resolution=1, bf_interval=7)
    assert st[3] == 21


def test_bf_resolution_rounds_reservation_start_down():
    """Default bf_resolution=60: B's reservation starts at floor(100/60)*60 = 60 and ends at
    ceil(200/60)*60 = 240. C's interval [30, 80] now overlaps it (60 <= 80), so C cannot
    backfill at 30; it runs when B ends, at 200."""
    st, _ = simulate(ABC)
    assert st == {1: 0, 2: 100, 3: 200}
    # with C short enough to end before 60 it backfills again
    st2, _ = simulate([*ABC[:2], dict(submit=20, procs=1, run=25)])
    assert st2[3] == 30


def test_job_beyond_bf_window_gets_no_reservation():
    """A holds 2 nodes until 1000; B (4 nodes) can start at 1000. C: 1 node for 5000 s.
    bf_window=1 minute: B's start is beyond now+60, so B gets no reservation and C backfills at
    30, delaying B to 5030. With the default window (1 day) B is reserved and C waits for it."""
    jobs = [dict(submit=0, procs=2, run=1000), dict(submit=10, procs=4, run=100),
            dict(submit=20, procs=1, run=5000)]
    st, _ = simulate(jobs, bf_resolution=1, bf_window=1)
    assert st == {1: 0, 2: 5030, 3: 30}
    st, _ = simulate(jobs, bf_resolution=1)
    assert st == {1: 0, 2: 1000, 3: 1100}


def test_bf_max_job_test_truncates():
    """B (4 nodes) and C (3 nodes) cannot start before A ends at 1000; D (1 node, 50 s) could
    backfill at 30. bf_max_job_test=2 stops the cycle after B and C: D never backfills and starts
    with C when B ends (1100). With 3 it backfills at 30."""
    jobs = [dict(submit=0, procs=2, run=1000), dict(submit=10, procs=4, run=100),
            dict(submit=11, procs=3, run=100), dict(submit=12, procs=1, run=50)]
    st, _ = simulate(jobs, bf_resolution=1, bf_max_job_test=2)
    assert st == {1: 0, 2: 1000, 3: 1100, 4: 1100}
    st, _ = simulate(jobs, bf_resolution=1, bf_max_job_test=3)
    assert st[4] == 30


def test_part_count_reserve_one_is_easy_like():
    """A: 3 of 4 nodes until 1000. B (2 nodes) is reserved at 1000 on A's nodes n0, n1 (time-fit
    reserves the nodes that free latest). C (2 nodes, 100 s) can also start at 1000, on n2, n3.
    D (1 node, 2000 s) fits now on idle n3 but would delay C.
    Default (reserve for every tested job): C is protected, D waits until 1100.
    bf_job_part_count_reserve=1: only B is protected (EASY-like): D backfills at 30 and C, no
    longer protected, waits for B to end (1100)."""
    jobs = [dict(submit=0, procs=3, run=1000), dict(submit=10, procs=2, run=100),
            dict(submit=11, procs=2, run=100), dict(submit=12, procs=1, run=2000)]
    st0, _ = simulate(jobs, bf_resolution=1)
    assert st0 == {1: 0, 2: 1000, 3: 1000, 4: 1100}
    st1, _ = simulate(jobs, bf_resolution=1, bf_job_part_count_reserve=1)
    assert st1 == {1: 0, 2: 1000, 3: 1100, 4: 30}


def test_partitions_node_sets_and_tiers():
    """slurm_cluster.conf: p1 = n[0-3], p2 = n[2-3], hi = all nodes with PriorityTier 5.
    A (p1, 2 nodes) takes n0-n1 at 0. B (p1, 4 nodes) blocks p1 and removes its nodes from the
    pass; C (p2, 1 node) is on those nodes too, so the event pass does not start it either: it
    backfills at 30 (bf_resolution 1, ends before B at 100). D (hi, submitted at 40 with C's
    priority tier higher) is evaluated before B: at 100 both want all nodes and D wins."""
    jobs = [dict(submit=0, procs=2, run=100, partition_name="p1"),
            dict(submit=10, procs=4, run=100, partition_name="p1"),
            dict(submit=20, procs=1, run=50, partition_name="p2"),
            dict(submit=40, procs=4, run=100, partition_name="hi")]
    st, r = simulate(jobs, conf="slurm_cluster.conf", bf_resolution=1)
    assert st == {1: 0, 2: 200, 3: 30, 4: 100}


def test_partition_maxtime_rejected():
    jobs = [dict(submit=0, procs=1, run=100, req=7200, partition_name="short")]
    wl_conf = DATA / "slurm_cluster.conf"
    text = wl_conf.read_text() + "PartitionName=short Nodes=n[0-1] MaxTime=60\n"
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
        f.write(text)
    with pytest.raises(SlurmConfError, match="requests more time than its partition's MaxTime"):
        simulate(jobs, slurm_conf=f.name)


def test_qos_max_jobs_per_user(tmp_path):
    """QOS 'limited' allows one running job per user: user 1's second job waits for the first
    (even with free nodes) and does not block user 2's job behind it."""
    acc = tmp_path / "acc.toml"
    acc.write_text("[qos.limited]\npriority = 10\nmax_jobs_per_user = 1\n")
    jobs = [dict(submit=0, procs=1, run=100, user=1, qos_name="limited"),
            dict(submit=1, procs=1, run=100, user=1, qos_name="limited"),
            dict(submit=2, procs=1, run=100, user=2, qos_name="limited")]
    st, _ = simulate(jobs, accounts=str(acc))
    assert st == {1: 0, 2: 100, 3: 2}


def test_whole_nodes_with_cpus_per_node():
    """8 units, cpus_per_node=4 (2 nodes): each 1-unit job takes a whole node, the third waits."""
    jobs = [dict(submit=0, procs=1, run=100), dict(submit=0, procs=1, run=100),
            dict(submit=0, procs=1, run=100), dict(submit=0, procs=5, run=10)]
    st, r = simulate(jobs, nodes=8, cpus_per_node=4)
    assert st == {1: 0, 2: 0, 3: 100, 4: 200}
    nodes = r.jobs.set_index("job_id").nodes.to_dict()
    assert nodes[1] == "0" and nodes[2] == "4" and nodes[4] == "0-4"


def test_walltime_kill():
    """A job running past its limit is killed at start + limit (engine), under this policy."""
    st, r = simulate([dict(submit=0, procs=1, run=500, req=100)])
    row = r.jobs.iloc[0]
    assert row.start == 0 and row.end == 100 and row.state == "TIMEOUT"


def test_node_count_mismatch():
    with pytest.raises(SlurmConfError, match="NodeName lines define 4 nodes .* the machine has 8"):
        simulate([dict(submit=0, procs=1, run=10)], nodes=8, conf="slurm_cluster.conf")


# ----------------------------------------------------------------------------- priority values
class _Prm:
    type = "priority/multifactor"
    weight_age = 1000
    weight_fairshare = 10000
    weight_jobsize = 2000
    weight_partition = 500
    weight_qos = 300
    max_age = 1000.0
    favor_small = False
    small_relative_to_time = False


def test_multifactor_values_by_hand():
    """10 nodes/units. j0: submitted 0, 5 nodes, partition factor 1.0, QOS factor 1.0, fs 0.25;
    j1: submitted 500, 1 node, partition factor 0.5, QOS 0, fs 1.0. At now=800:
    P0 = 1000*0.8 + 2000*(5/10+5/10)/2 + 500*1 + 300*1 + 10000*0.25 = 800+1000+500+300+2500 = 5100
    P1 = 1000*0.3 + 2000*0.1 + 500*0.5 + 0 + 10000*1.0 = 300+200+250+10000 = 10750.
    Favour small: J0 = ((10-5)/10+(10-5)/10)/2 = 0.5, J1 = 0.9 -> P1 = 300+1800+250+10000 = 12350.
    At now=333: age 333/1000 -> 333.0 truncated; j1 not yet submitted (age 0)."""
    kw = dict(submit=[0.0, 500.0], nodes=[5, 1], cpus=[5, 1], time_limit=[100.0, 100.0],
              part_factor=[1.0, 0.5], qos_factor=[1.0, 0.0], assoc=[0, 1], total_nodes=10,
              total_cpus=10)
    fs = np.array([0.25, 1.0])
    mp = MultifactorPriority(_Prm(), **kw)
    assert mp.compute(800.0, np.array([0, 1]), fs).tolist() == [5100, 10750]
    small = _Prm()
    small.favor_small = True
    assert MultifactorPriority(small, **kw).compute(800.0, np.array([0, 1]), fs).tolist() == [5100, 12350]
    assert mp.compute(333.0, np.array([0]), None).tolist() == [333 + 1000 + 500 + 300]
    rel = _Prm()
    rel.small_relative_to_time = True
    # SMALL_RELATIVE_TO_TIME: J = max(nodes*C/N, cpus) / minutes / C = 5/(100/60)/10 = 0.3
    assert math.isclose(MultifactorPriority(rel, **kw).job_size[0], 0.3)


def test_priority_orders_the_queue():
    """PriorityWeightJobSize=1000 favours large jobs: priorities C (3 nodes) 750 > D (2) 500 >
    B (1) 250. When A ends at 100 the event pass starts C, then D does not fit and blocks the
    partition, so B -- first in FIFO order -- waits for the backfill cycle at 120 (cycles every
    30 s from 0; D is reserved at 200 on C's nodes). Without weights (FIFO) B and C start at 100."""
    jobs = [dict(submit=0, procs=4, run=100), dict(submit=1, procs=1, run=100),
            dict(submit=2, procs=3, run=100), dict(submit=3, procs=2, run=100)]
    st, _ = simulate(jobs, PriorityType="priority/multifactor", PriorityWeightJobSize=1000,
                     bf_resolution=1)
    assert st == {1: 0, 2: 120, 3: 100, 4: 200}
    st, _ = simulate(jobs, bf_resolution=1)
    assert st == {1: 0, 2: 100, 3: 100, 4: 200}


# ----------------------------------------------------------------------------- fair-share by hand
def test_fairshare_usage_history_by_hand():
    """Half-life 693 s -> d = 1 - 0.693/693 = 0.999 per second; PriorityCalcPeriod 300 s.
    a1 (account A): 2 nodes from 0 to 100. b1 (account B): 1 node from 0 to 400. c1 (account C):
    submits at 600. Usage (Slurm's rules: decay at each tick, accrue D*d^D for the time since the
    last tick, and at a job's end):
      tick 300: a1 = 200 d^100 (added at 100) * d^300; b1 = 300 d^300
      end 400:  b1 += 100 d^100
      tick 600: a1 = 200 d^700; b1 = 300 d^600 + 100 d^400; c1 = 0
    Fair Tree (equal shares): C has no usage (Level FS inf) > A (less usage) > B: factors
    c1 = 3/3, a1 = 2/3, b1 = 1/3. Classic: F = 2^(-UE/S) with S = 1/3 and UE = usage/root."""
    d = 0.999
    ua = 200 * d ** 700
    ub = 300 * d ** 600 + 100 * d ** 400
    root = ua + ub
    for fair_tree, expect in ((True, {"a1": 2 / 3, "b1": 1 / 3, "c1": 1.0}),
                              (False, {"a1": 2 ** (-3 * ua / root), "b1": 2 ** (-3 * ub / root),
                                       "c1": 1.0})):
        jobs = [dict(submit=0, procs=2, run=100, user_name="a1", account_name="A"),
                dict(submit=0, procs=1, run=400, user_name="b1", account_name="B"),
                dict(submit=600, procs=1, run=10, user_name="c1", account_name="C")]
        n = len(jobs)
        jt = JobTable(job_id=np.arange(1, n + 1), submit=np.array([j["submit"] for j in jobs], float),
                      procs=np.array([j["procs"] for j in jobs]), estimate=np.array([j["run"] for j in jobs], float),
                      requested_time=np.array([j["run"] for j in jobs], float),
                      user=np.zeros(n, int), group=np.zeros(n, int), queue=np.full(n, -1),
                      partition=np.full(n, -1),
                      columns={"user_name": np.array([j["user_name"] for j in jobs], dtype=object),
                               "account_name": np.array([j["account_name"] for j in jobs], dtype=object)})
        cfg = SlurmConfig(accounting_storage_type="accounting_storage/slurmdbd")
        cfg.priority.type = "priority/multifactor"
        cfg.priority.weight_fairshare = 10000
        cfg.priority.decay_half_life = 693.0
        cfg.priority.fair_tree = fair_tree
        sched = SlurmScheduler(cfg)
        runtime = np.array([j["run"] for j in jobs], float)
        Simulation(jt, runtime, runtime.copy(), sched, 4).run()
        fs = sched.fs
        node = {nm: i for i, nm in enumerate(fs.names)}
        assert math.isclose(fs.usage_raw[node["A/a1"]], ua, rel_tol=1e-12)
        # b1's usage at 600 (c1's job adds only to C and root afterwards)
        assert math.isclose(fs.usage_raw[node["B/b1"]], ub, rel_tol=1e-12)
        got = dict(zip(["a1", "b1", "c1"], sched.fs_factor))   # factors of the 600 tick
        for k, v in expect.items():
            assert math.isclose(got[k], v, rel_tol=1e-12), (fair_tree, k, got[k], v)


def test_fair_tree_ties_and_nesting():
    """Users with equal Level FS share a rank; the next rank drops by the tie size. Accounts:
    root -> X (shares 2) -> {x1, x2}; root -> Y (1) -> {y1}. No usage anywhere: every Level FS is
    infinite, so all tie: X and Y merge, x1, x2, y1 all get 3/3. With usage only on y1: X (inf)
    first -> x1, x2 tie at 3/3; then Y -> y1 = 1/3."""
    from hpctwin.schedulers.slurm_priority import AccountsSpec
    spec = AccountsSpec(account_shares={"X": 2, "Y": 1})
    fs = FairShare(["X", "X", "Y"], ["x1", "x2", "y1"], spec)
    assert fs.factors().tolist() == [1.0, 1.0, 1.0]
    fs.add_usage(np.array([2]), np.array([50.0]))
    assert fs.factors().tolist() == [1.0, 1.0, 1 / 3]
    fs.add_usage(np.array([0]), np.array([10.0]))
    # X: S=2/3, U=10/60 -> LF 4; Y: S=1/3, U=50/60 -> 0.4. Inside X: x2 (no usage) before x1.
    assert fs.factors().tolist() == [2 / 3, 1.0, 1 / 3]


def test_accounts_file_errors(tmp_path):
    f = tmp_path / "a.toml"
    f.write_text("[accounts]\nphys = -1\n")
    with pytest.raises(AccountsError, match="accounts.phys: shares must be a number >= 0"):
        load_accounts(f)
    f.write_text("[accounts]\na = { shares = 1, parent = 'b' }\nb = { shares = 1, parent = 'a' }\n")
    with pytest.raises(AccountsError, match="parent cycle"):
        load_accounts(f)
    f.write_text("[qos.x]\nmax_jobs = 3\n")
    with pytest.raises(AccountsError, match=r"qos.x: unknown key\(s\) max_jobs"):
        load_accounts(f)


def test_make_scheduler_options():
    s = make_slurm_scheduler(str(DATA / "slurm_cluster.conf"), {"bf_interval": 5, "node_order": "index"})
    assert s.cfg.sched.bf_interval == 5 and s.node_order == "index"
    assert s.units_required == 4
    with pytest.raises(ValueError, match="node_order"):
        make_slurm_scheduler(None, {"node_order": "random"})


# ----------------------------------------------------------------------------- Slurm 22.05 rules
@pytest.mark.parametrize("limit, start", [(70, 200), (69, 30)])
def test_backfill_may_not_end_at_a_reservation_start(limit, start):
    """4 nodes, bf_resolution 1. A (3 nodes) runs 0-100; B (4 nodes, submitted 1) is reserved at
    the cycle at 30 on all nodes from 100 (A's end). C (1 node, submitted 2): a 70 s limit ends
    at 100 = the reservation's start; _attempt_backfill intersects the records with
    ``begin_time <= end_time`` (inclusive), so node 3 is not available and C waits for B (200).
    With 69 s it ends at 99, before the reservation, and backfills at 30."""
    jobs = [dict(submit=0, procs=3, run=100), dict(submit=1, procs=4, run=100),
            dict(submit=2, procs=1, run=limit)]
    st, _ = simulate(jobs, bf_resolution=1)
    assert st == {1: 0, 2: 100, 3: start}


def test_age_and_fairshare_need_slurmdbd(capsys):
    """priority_multifactor.c ``init``: without slurmdbd the age and fair-share weights are
    ignored ("can only be used with SlurmDBD, ignoring") and there is no decay thread: no
    PriorityCalcPeriod ticks. With slurmdbd the ticks run and the weights apply."""
    jobs = [dict(submit=0, procs=4, run=1000), dict(submit=10, procs=1, run=100),
            dict(submit=20, procs=2, run=100)]
    opts = dict(PriorityType="priority/multifactor", PriorityWeightAge=1000,
                PriorityWeightFairshare=5000, PriorityWeightJobSize=100)
    _, r = simulate(jobs, **opts)
    sp = r.summary["scheduler_params"]
    assert "PriorityWeightAge can only be used with SlurmDBD, ignoring" in sp["priority_applied"]
    assert "PriorityWeightFairshare can only be used with SlurmDBD, ignoring" in sp["priority_applied"]
    assert sp["stats"]["priority_ticks"] == 0
    out = capsys.readouterr().out
    assert out.count("slurm: priority/multifactor without slurmdbd") == 1
    _, r = simulate(jobs, AccountingStorageType="accounting_storage/slurmdbd", **opts)
    sp = r.summary["scheduler_params"]
    assert sp["priority_applied"].startswith("priority/multifactor with slurmdbd")
    assert sp["stats"]["priority_ticks"] >= 3       # ticks at 300, 600, 900 (job A runs to 1000)


def test_not_modelled_keys_in_one_summary_line():
    jobs = [dict(submit=0, procs=1, run=10)]
    with pytest.warns(UserWarning, match=r"read but not modelled: ClusterName; SchedulerParameters "
                                         r"bf_yield_interval \[cannot change a decision here"):
        _, r = simulate(jobs, ClusterName="twin", SchedulerParameters="bf_yield_interval=10")
    assert r.summary["scheduler_params"]["warning"].count("not modelled") == 1
    with pytest.raises(SlurmConfError, match="did you mean bf_window"):
        simulate(jobs, bf_windw=10)


def test_partition_node_limits(tmp_path):
    """PartitionName MaxNodes/MinNodes: a job outside them can never start in its partition
    (Slurm rejects it with EnforcePartLimits, else it pends with PartitionNodeLimit)."""
    conf = tmp_path / "lim.conf"
    conf.write_text("NodeName=n[0-3]\nPartitionName=p Nodes=ALL Default=YES MaxNodes=2 MinNodes=1\n")
    st, _ = simulate([dict(submit=0, procs=2, run=10), dict(submit=0, procs=2, run=10)],
                     conf=str(conf))
    assert st == {1: 0, 2: 0}
    with pytest.raises(SlurmConfError, match="it needs more nodes than its partition's MaxNodes"):
        simulate([dict(submit=0, procs=3, run=10)], conf=str(conf))
    with pytest.raises(SlurmConfError, match=r"lim.conf:2: MaxNodes: 'lots' is not a number"):
        conf.write_text("NodeName=n[0-3]\nPartitionName=p Nodes=ALL MaxNodes=lots\n")
        simulate([dict(submit=0, procs=1, run=10)], conf=str(conf))


def test_time_limits_in_whole_minutes():
    """time_limit_minutes: a 70 s limit is Slurm's 2 minutes (time_str2mins rounds up). In the
    boundary scenario above, C (1 node, limit 69 s -> 120 s) would end at 30 + 120 = 150 > 100,
    the reservation's start (A's planned end is its 100 s limit, 2 minutes: 120), so it no longer
    backfills at 30 and waits for B, which starts when A really ends (100) and ends at 200."""
    jobs = [dict(submit=0, procs=3, run=100), dict(submit=1, procs=4, run=100),
            dict(submit=2, procs=1, run=69)]
    st, _ = simulate(jobs, bf_resolution=1, time_limit_minutes=True)
    assert st == {1: 0, 2: 100, 3: 200}
    st, _ = simulate(jobs, bf_resolution=1)
    assert st[3] == 30
