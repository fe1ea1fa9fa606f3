"""select/linear node choice (Slurm 22.05 ``src/plugins/select/linear/select_linear.c``), derived
by hand from the C code's rules on 4-8 node machines, and its effect on whole schedules."""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.schedulers.slurm_select import RunningSet, bits, job_test, runs, to_mask
from hpctwin.twin.run import RunConfig, run
from hpctwin.twin.workload import Workload


def m(*nodes):
    return to_mask(nodes)


def test_runs_of_consecutive_nodes():
    assert runs(m(0, 1, 2, 4, 5, 7)) == [(0, 3), (4, 2), (7, 1)]
    assert runs(0) == []


@pytest.mark.parametrize("avail, need, expect", [
    # _job_test: runs [0-2] (3), [4-5] (2), [7] (1) of 8 nodes
    ((0, 1, 2, 4, 5, 7), 1, (7,)),            # tightest sufficient run: the 1-node hole
    ((0, 1, 2, 4, 5, 7), 2, (4, 5)),          # the 2-node hole, not the low end of [0-2]
    ((0, 1, 2, 4, 5, 7), 3, (0, 1, 2)),
    # none sufficient for 4: the largest run [0-2] whole, then the tightest run for the 1 left
    ((0, 1, 2, 4, 5, 7), 4, (0, 1, 2, 7)),
    # 6: [0-2], then (none sufficient for 3) the largest [4-5], then [7]
    ((0, 1, 2, 4, 5, 7), 6, (0, 1, 2, 4, 5, 7)),
    # ties: best_fit is replaced only on a strictly tighter (or larger) run -> the first run
    ((0, 1, 3, 4), 2, (0, 1)),
    ((0, 1, 3, 4), 3, (0, 1, 3)),
    # nodes taken from the low end of the chosen run (consec_start upwards)
    ((2, 3, 4, 5), 2, (2, 3)),
])
def test_job_test_best_fit_by_hand(avail, need, expect):
    assert bits(job_test(m(*avail), need)) == list(expect)


def test_job_test_too_few_nodes():
    assert job_test(m(0, 3), 3) is None
    assert job_test(m(0, 3), 0) == 0


def test_will_run_removes_running_jobs_one_at_a_time():
    """6 nodes: job 10 on {0,1} and job 11 on {2} end at 100, job 12 on {4,5} at 50, node 3 idle.
    _will_run_test for 3 nodes: _job_test on the idle {3} fails; removing job 12 (first end)
    frees {3,4,5}: start 50 on {3,4,5} -- the reservation includes the idle node 3.
    For 4 nodes: after job 12, job 10 (end 100, lower id) frees {0,1,3,4,5}; runs [0-1] and
    [3-5], none holds 4: [3-5] whole, then [0] -> {0,3,4,5} at 100. Job 11's node 2, which also
    frees at 100, is never considered (grouping ends by time would give {0,1,2,3})."""
    rs = RunningSet(m(3), [(100.0, 11, m(2)), (100.0, 10, m(0, 1)), (50.0, 12, m(4, 5))])
    full = m(0, 1, 2, 3, 4, 5)
    t, nodes = rs.will_run(full, 3, now=10.0)
    assert (t, bits(nodes)) == (50.0, [3, 4, 5])
    t, nodes = rs.will_run(full, 4, now=10.0)
    assert (t, bits(nodes)) == (100.0, [0, 3, 4, 5])
    assert rs.will_run(full, 7, now=10.0) is None
    assert rs.earliest(full, 4, 10.0) == 100.0
    # restricted to the nodes a backfill candidate may use (avail_bitmap): {1,2}
    t, nodes = rs.will_run(m(1, 2), 1, now=10.0)
    assert (t, bits(nodes)) == (100.0, [1])
    # an idle fit starts now; a removal whose end is past gives now + 1 (as in the C code)
    assert rs.will_run(full, 1, now=10.0) == (10.0, m(3))
    late = RunningSet(0, [(5.0, 1, m(0))])
    assert late.will_run(m(0), 1, now=10.0) == (11.0, m(0))


def test_running_set_start_updates_prefixes():
    rs = RunningSet(m(2, 3), [(100.0, 1, m(0)), (200.0, 2, m(1))])
    rs.start(150.0, 3, m(3))          # a backfill start during the cycle
    assert rs.idle == m(2)
    assert rs.keys == [(100.0, 1), (150.0, 3), (200.0, 2)]
    assert rs.free == [m(0, 2), m(0, 2, 3), m(0, 1, 2, 3)]


def _schedule(scheduler, options=None):
    """6 nodes. t=0: A (2 nodes, 100 s) and B (1 node, 1000 s) start; t=1: C (4 nodes, 100 s)
    cannot start; t=2: D (1 node, 1000 s)."""
    jobs = [(0, 2, 100), (0, 1, 1000), (1, 4, 100), (2, 1, 1000)]
    wl = Workload.from_arrays("t", submit=[j[0] for j in jobs], procs=[j[1] for j in jobs],
                              runtime=[j[2] for j in jobs], requested_time=[j[2] for j in jobs],
                              job_id=np.arange(1, 5))
    r = run(RunConfig(workload="t", scheduler=scheduler, nodes=6,
                      options={"scheduler": options or {}}), workload=wl)
    return dict(zip(r.jobs.job_id.tolist(), r.jobs.start.tolist())), r


def test_reservation_on_specific_nodes_holds_back_a_long_backfill_job():
    """select/linear: A gets {0,1} and B {2} (_job_test, low end of the one run). The backfill
    cycle at 30 (bf_interval 30 from 0): C's _will_run_test frees A's {0,1} at 100; runs [0-1] and
    [3-5], so C is reserved on {0,3,4,5} -- idle nodes 3-5 included. D (1000 s) overlaps that
    reservation, may use only {1,2} (both busy) and its will-run start is 100: D does not start
    before 100, when the event pass starts C on {0,3,4,5} and D on {1}.
    Count-based EASY starts D at 2 on one of the extra nodes (5 free at C's shadow time 100, C
    needs 4). select/cons_tres (time-fit approximation) reserves {0,1,3,4} and backfills D at 30
    on node 5."""
    st, r = _schedule("slurm", {"bf_resolution": 1})
    assert st == {1: 0, 2: 0, 3: 100, 4: 100}
    assert "select/linear" in r.summary["scheduler_params"]["select"]
    st, _ = _schedule("easy")
    assert st[4] == 2
    st, r = _schedule("slurm", {"bf_resolution": 1, "SelectType": "select/cons_tres"})
    assert st == {1: 0, 2: 0, 3: 100, 4: 30}
    assert "approximated" in r.summary["scheduler_params"]["select"]


def _nodes(text: str) -> list[int]:
    """jobs.csv ``nodes`` ranges ("0,3-4") -> indices."""
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def test_main_pass_uses_best_fit():
    """8 nodes, all at 0: A (3 nodes) {0-2}, B (2) {3-4}, C (3) {5-7} (_job_test on one run:
    its low end). B ends at 50; D (1 node, submitted 60) goes to the only hole {3,4}: node 3.
    A ends at 100; E (1 node, submitted 120): holes {0,1,2} and {4}: the tightest, node 4
    (lowest-index-first would give node 0)."""
    jobs = [(0, 3, 100), (0, 2, 50), (0, 3, 1000), (60, 1, 100), (120, 1, 10)]
    wl = Workload.from_arrays("t", submit=[j[0] for j in jobs], procs=[j[1] for j in jobs],
                              runtime=[j[2] for j in jobs], requested_time=[j[2] for j in jobs],
                              job_id=np.arange(1, 6))
    r = run(RunConfig(workload="t", scheduler="slurm", nodes=8), workload=wl)
    alloc = dict(zip(r.jobs.job_id.tolist(), map(_nodes, r.jobs.nodes.tolist())))
    assert alloc == {1: [0, 1, 2], 2: [3, 4], 3: [5, 6, 7], 4: [3], 5: [4]}
