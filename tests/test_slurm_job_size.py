"""Issue 27: the job-size factor counts the requested CPUs until the job's first select test,
then ``total_cpus`` (Slurm 22.05 ``_get_priority_internal``; cons_common ``_job_test`` sets
``total_cpus`` on a successful RUN_NOW / WILL_RUN test, whole nodes for ``--exclusive``;
``batch_requeue_fini`` zeroes it). Every figure is hand-checked."""
from __future__ import annotations

import math

import numpy as np
import pytest

from hpctwin.datasets.sacct import read_sacct
from hpctwin.schedulers.slurm import make_slurm_scheduler
from hpctwin.schedulers.slurm_conf import PriorityParams
from hpctwin.schedulers.slurm_priority import MultifactorPriority
from hpctwin.twin.run import RunConfig, run
from hpctwin.twin.workload import Workload

pytestmark = pytest.mark.filterwarnings("ignore:.*read but not modelled")


def _prio(req=(3.0, math.nan), **kw) -> MultifactorPriority:
    """2 nodes x 8 CPUs (N = 2, C = 16); two 1-node jobs allocated 8 CPUs each; job 0 asked 3
    CPUs, job 1's request unknown. Only the job-size weight (1000)."""
    prm = PriorityParams(type="priority/multifactor", weight_jobsize=1000, **kw)
    p = MultifactorPriority(prm, submit=[0.0, 0.0], nodes=[1, 1], cpus=[8, 8], time_limit=[600.0, 600.0],
                            part_factor=[0.0, 0.0], qos_factor=[0.0, 0.0], assoc=[0, 0],
                            total_nodes=2, total_cpus=16)
    if req is not None:
        p.use_requested_size(req)
    return p


def test_requested_cpus_until_the_test_then_total_cpus_from_the_next_recalculation():
    p = _prio()
    idx = np.array([0, 1])
    # job 0: (1/2 + 3/16) / 2 * 1000 = 343.75 -> 343; job 1 (no request known): (1/2 + 8/16) / 2 * 1000
    assert p.compute(0.0, idx, None).tolist() == [343, 500]
    p.size_test(0, 30.0, 8.0)               # a will-run test at t = 30 s sets total_cpus = 8
    assert p.compute(0.0, idx, None).tolist() == [343, 500]     # the tick at 0 came before it
    assert p.compute(30.0, idx, None).tolist() == [343, 500]    # a tick at the test's own second: not yet
    assert p.compute(60.0, idx, None).tolist() == [500, 500]    # next recalculation: total_cpus
    p.size_test(0, 90.0, 16.0)              # a later test: the first one's value stays
    assert p.compute(120.0, idx, None).tolist() == [500, 500]
    p.size_reset(0)                         # requeued: total_cpus = 0, the request counts again
    assert p.compute(180.0, idx, None).tolist() == [343, 500]
    p.size_test(0, 200.0, 4.0)              # total_cpus as the new test set it: (1/2 + 4/16) / 2 * 1000
    assert p.compute(240.0, idx, None).tolist() == [375, 500]


def test_job_without_a_request_and_no_requests_at_all_change_nothing():
    p = _prio()
    p.size_test(1, 10.0, 16.0)              # job 1's request is unknown: its count stays 8
    assert p.compute(60.0, np.array([1]), None).tolist() == [500]
    q = _prio(req=None)
    assert q.use_requested_size([math.nan, 0.0]) is False
    assert q.size_tested is None
    r = _prio(req=None)
    assert r.static.tolist() == q.static.tolist() == [500.0, 500.0]


def test_favor_small_and_small_relative_to_time_use_the_same_count():
    # favour small: ((N - 1)/N + (C - 3)/C) / 2 * 1000 = (0.5 + 13/16) / 2 * 1000 = 656.25
    p = _prio(favor_small=True)
    assert p.compute(0.0, np.array([0]), None).tolist() == [656]
    p.size_test(0, 1.0, 8.0)
    assert p.compute(60.0, np.array([0]), None).tolist() == [500]
    # relative to time (10 min limit): max(1 * 16 / 2, 3) / 10 / 16 * 1000 = 50; total 8: the same
    # 8 / 10 / 16 * 1000 = 50; a request above the node share counts: max(8, 12) / 10 / 16 * 1000 = 75
    q = _prio(req=(12.0, math.nan), small_relative_to_time=True)
    assert q.compute(0.0, np.array([0]), None).tolist() == [75]
    q.size_test(0, 1.0, 8.0)
    assert q.compute(60.0, np.array([0]), None).tolist() == [50]


# ------------------------------------------------------------------ whole runs (cons_tres)
CONF = """SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=bf_interval=1,bf_resolution=1
AccountingStorageType=accounting_storage/slurmdbd
PriorityType=priority/multifactor
PriorityWeightJobSize=1000
PriorityWeightAge=1
PriorityMaxAge=1-0
PriorityCalcPeriod=1
NodeName=n0 CPUs=8
PartitionName=p Nodes=n0 Default=YES MaxTime=INFINITE
"""


def _run(tmp_path, submit_bc: float, a_run: float, req: bool = True):
    """One node of 8 CPUs. A (8 CPUs) runs from 0 for ``a_run`` s; B (--exclusive, asked 2 CPUs,
    allocated the node's 8) and C (asked and allocated 6 CPUs) are submitted at ``submit_bc``, run
    100 s; B and C cannot run together. Returns {job id: start}."""
    cols = {"req_nodes": np.array([1, 1, 1]), "cpus_per_node": np.array([8, 8, 6]),
            "exclusive": np.array([False, True, False])}
    if req:
        cols["req_cpus"] = np.array([8.0, 2.0, 6.0])
    wl = Workload.from_arrays("t", submit=[0.0, submit_bc, submit_bc], runtime=[a_run, 100.0, 100.0],
                              procs=[8, 8, 6], requested_time=[a_run, 100.0, 100.0], user=[0] * 3,
                              group=[0] * 3, job_id=np.array([1, 2, 3]), columns=cols)
    f = tmp_path / "slurm.conf"
    f.write_text(CONF)
    s = make_slurm_scheduler(str(f), {})
    r = run(RunConfig(workload="t", scheduler=s, nodes=8), workload=wl)
    return dict(zip(r.jobs.job_id.tolist(), r.jobs.start.tolist())), s


def test_job_ranked_by_its_request_before_a_recalculation_follows_its_test(tmp_path):
    """B and C are submitted at 585 s, tested by backfill (will-run: start 595), and A ends at 595,
    before the tick at 600: both still rank by their requests, B (1 + 2/8)/2 * 1000 = 625 < C
    (1 + 6/8)/2 * 1000 = 875 (+ age < 1): C starts at 595, B when C ends."""
    st, s = _run(tmp_path, 585.0, 595.0)
    assert st == {1: 0.0, 2: 695.0, 3: 595.0}
    assert s.prio_calc.size_tested[1] == 585.0        # B's first will-run test, at its submit
    assert "job-size factor: requested CPUs" in " ".join(s.notes)


def test_job_ranked_by_total_cpus_after_the_next_recalculation(tmp_path):
    """B and C are submitted at 10 s and tested by backfill then; the tick at 60 s counts B's
    total_cpus (its whole node, 8): B (1 + 8/8)/2 * 1000 = 1000 > C 875, so B starts when A ends
    at 600 and C when B ends."""
    st, s = _run(tmp_path, 10.0, 600.0)
    assert st == {1: 0.0, 2: 600.0, 3: 700.0}
    assert s.prio_calc.size_total[1] == 8.0 and s.prio_calc.size_total[2] == 6.0


def test_without_requested_cpus_the_allocated_count_ranks_as_before(tmp_path):
    """No ``req_cpus`` column (SWF, sacct without ReqTRES): B ranks by its 8 allocated CPUs from
    the start (1000 > 875) and starts first even before any recalculation."""
    st, s = _run(tmp_path, 585.0, 595.0, req=False)
    assert st == {1: 0.0, 2: 595.0, 3: 695.0}
    assert s.prio_calc.size_tested is None


def test_requeue_counts_the_request_again(tmp_path):
    """``on_requeue`` (``batch_requeue_fini``: total_cpus = 0) forgets the test."""
    _st, s = _run(tmp_path, 10.0, 600.0)
    s.prio_calc.size_reset(1)
    assert s.prio_calc.size_tested[1] == math.inf
    # at a later tick B ranks by its request again: (1 + 2/8)/2 * 1000 + age (< 1) = 625
    assert s.prio_calc.compute(720.0, np.array([1]), None).tolist() == [625]


def test_sacct_reader_keeps_reqtres_cpu(tmp_path):
    f = tmp_path / "d.txt"
    f.write_text(
        "JobID|Submit|Start|End|NNodes|NCPUS|ReqTRES|AllocTRES|State\n"
        "1|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:01:00|1|8|billing=3,cpu=3,mem=1000M,node=1|"
        "billing=8,cpu=8,node=1|COMPLETED\n"
        "2|2024-03-01T10:00:05|2024-03-01T10:00:05|2024-03-01T10:01:00|1|4||cpu=4,node=1|COMPLETED\n"
        "3|2024-03-01T10:00:06|2024-03-01T10:00:06|2024-03-01T10:01:00|1|4|mem=10M,node=1|cpu=4,node=1|COMPLETED\n")
    wl = read_sacct(f, unit="cpus")
    rc = wl.columns["req_cpus"]
    assert rc[0] == 3.0 and math.isnan(rc[1]) and math.isnan(rc[2])
    assert wl.columns["ncpus"].tolist() == [8, 4, 4]
    g = tmp_path / "e.txt"
    g.write_text("JobID|Submit|Start|End|NNodes|NCPUS|State\n"
                 "1|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:01:00|1|8|COMPLETED\n")
    assert "req_cpus" not in read_sacct(g, unit="cpus").columns
