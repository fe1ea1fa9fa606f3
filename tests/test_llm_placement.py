"""LLM-aware placer (hand-checked placements) and the LLMScheduler wrapper in the engine."""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.schedulers.llm import LLMScheduler
from hpctwin.topology.llm_placement import LLMPlacer, ShapeError, check_shape
from hpctwin.topology.placement import GroupPacked, groups_spanned, parse_ranges
from hpctwin.twin.run import job_table, prepare
from hpctwin.twin.simulation import Simulation
from hpctwin.twin.workload import Workload


class _Jobs:
    def __init__(self, **cols):
        self.columns = {k: np.asarray(v) for k, v in cols.items()}


def _placer(n, group_size, **cols):
    p = LLMPlacer()
    p.bind(n, np.arange(n) // group_size, np.random.default_rng(0), _Jobs(**cols) if cols else None)
    return p


def _mask(n, free):
    m = np.zeros(n, dtype=bool)
    m[list(free)] = True
    return m


def test_32_gpu_job_on_4_nodes_of_one_group():
    # 3 groups x 8 nodes of 8 GPUs; job TP 8 x PP 2 x DP 2 = 32 GPUs = 4 nodes.
    p = _placer(24, 8, tp=[8], pp=[2], dp=[2], gpus_per_node=[8])
    free = _mask(24, [0, 1, 2] + [8, 9, 11, 12, 13, 14, 15] + [16, 17, 18, 19, 21])
    nodes = p.place(0, 4, free)
    # group 0 has 3 free (too few); groups 1 (7 free) and 2 (5 free) fit: best fit is group 2, and in
    # it the run 16-19 holds the job exactly
    assert nodes.tolist() == [16, 17, 18, 19]
    assert groups_spanned(nodes, p.node_group) == 1
    assert p.groups_needed(0, 4, free) == 1


def test_replicas_kept_whole_across_groups():
    # job TP 8 x PP 2 x DP 4 = 64 GPUs = 8 nodes, a replica (pipeline) = 2 nodes
    p = _placer(24, 8, tp=[8], pp=[2], dp=[4], gpus_per_node=[8])
    free = _mask(24, [0, 1, 2, 4, 5] + [8, 9, 10, 11, 14] + [16, 17, 20])
    nodes = p.place(0, 8, free)
    # no group has 8 free; whole replicas per group: 2, 2, 1 -> groups 0 and 1, 2 replicas each
    assert nodes.tolist() == [0, 1, 2, 4, 8, 9, 10, 11]
    g = p.node_group[nodes].reshape(4, 2)            # rank layout: replica d = sorted nodes 2d, 2d+1
    assert np.all(g[:, 0] == g[:, 1])
    # group-packed (node granularity) fills group 0 (5 nodes) and group 2: a replica is split
    gp = GroupPacked()
    gp.bind(24, p.node_group, np.random.default_rng(0))
    other = gp.place(0, 8, free)
    assert other.tolist() == [0, 1, 2, 4, 5, 16, 17, 20]
    assert not np.all(p.node_group[other].reshape(4, 2)[:, 0] == p.node_group[other].reshape(4, 2)[:, 1])


def test_fallback_and_no_group_map():
    p = _placer(24, 8, tp=[8], pp=[4], dp=[1], gpus_per_node=[8])   # one 4-node replica
    free = _mask(24, [0, 1, 2, 8, 9, 16, 17, 18])
    nodes = p.place(0, 4, free)                        # no group holds the replica: node-level fewest groups
    assert groups_spanned(nodes, p.node_group) == 2
    assert len(nodes) == 4 and free[nodes].all()
    q = LLMPlacer()
    q.bind(10, None, np.random.default_rng(0))
    assert q.place(0, 3, _mask(10, [0, 2, 3, 4, 6, 7, 8, 9])).tolist() == [2, 3, 4]   # best-fit run
    assert p.min_groups(17) == 3 and q.min_groups(17) == 1


def test_shape_errors():
    assert check_shape(8, 2, 2, 8) == 4
    with pytest.raises(ShapeError, match="TP = 16 exceeds the 8 GPUs of one node"):
        check_shape(16, 1, 1, 8)
    with pytest.raises(ShapeError, match="needs 4 nodes of 8 GPUs, but the job asks for 3"):
        check_shape(8, 2, 2, 8, nodes=3)
    p = _placer(8, 4, tp=[16], pp=[1], dp=[1], gpus_per_node=[8])
    with pytest.raises(ShapeError, match="TP = 16 exceeds"):
        p.place(0, 2, np.ones(8, bool) & (np.arange(8) % 4 >= 3))   # 2 free, one per group -> replica check


def _run(max_group_wait):
    """8 nodes in 2 groups of 4. Jobs 1 and 2 (3 nodes each) fill most of both groups; job 3, a
    2-node training job with max_groups = 1, arrives at t = 10 when only nodes 3 (group 0) and 7
    (group 1) are free. Job 1 ends at t = 1000."""
    cls = np.array(["hpc_batch", "hpc_batch", "llm_finetune"], dtype=object)
    wl = Workload.from_arrays(
        "t", job_id=[1, 2, 3], submit=[0.0, 0.0, 10.0], runtime=[1000.0, 5000.0, 300.0],
        requested_time=[1000.0, 5000.0, 300.0], procs=[3, 3, 2],
        columns={"job_class": cls, "tp": np.array([0, 0, 8]), "pp": np.array([0, 0, 2]),
                 "dp": np.array([0, 0, 1]), "gpus_per_node": np.array([8, 8, 8]),
                 "max_groups": np.array([-1, -1, 1]),
                 "max_group_wait": np.array([np.nan, np.nan, max_group_wait])})
    prep = prepare(wl, 8, "test")
    sched = LLMScheduler(inner="easy", node_group=np.arange(8) // 4)
    sim = Simulation(job_table(prep), prep.workload.runtime, prep.kill_limit, sched, 8)
    return sim.run(), sched


def test_job_forced_across_groups_after_maxwait():
    res, sched = _run(500.0)
    assert parse_ranges(res.nodes[0]).tolist() == [0, 1, 2] and parse_ranges(res.nodes[1]).tolist() == [4, 5, 6]
    # deferred at t = 10 (nodes 3 and 7 span 2 groups), relaxed at t = 10 + 500
    assert res.start[2] == 510.0
    assert parse_ranges(res.nodes[2]).tolist() == [3, 7]
    assert sched.relaxed == 1 and sched.deferred == 1 and sched.met == 0


def test_job_waits_for_one_group_within_maxwait():
    res, sched = _run(2000.0)
    # job 1 ends at t = 1000 before the window closes (t = 2010): group 0 is free again
    assert res.start[2] == 1000.0
    assert parse_ranges(res.nodes[2]).tolist() == [0, 1]
    assert sched.relaxed == 0 and sched.met == 1
    assert sched.describe()["inner"]["name"] == "easy"


def test_min_groups_limit_does_not_hold_back_jobs_larger_than_a_group():
    # 6-node job on 2 groups of 4: it can never fit in one group; "min" -> limit 2, starts at once
    cls = np.array(["llm_pretrain"], dtype=object)
    wl = Workload.from_arrays("t", job_id=[1], submit=[0.0], runtime=[100.0], requested_time=[100.0], procs=[6],
                              columns={"job_class": cls, "tp": np.array([8]), "pp": np.array([1]),
                                       "dp": np.array([6]), "gpus_per_node": np.array([8])})
    prep = prepare(wl, 8, "test")
    sched = LLMScheduler(inner="easy", node_group=np.arange(8) // 4, max_groups="min", max_group_wait=1000.0)
    res = Simulation(job_table(prep), prep.workload.runtime, prep.kill_limit, sched, 8).run()
    assert res.start[0] == 0.0 and sched.max_groups.tolist() == [2] and sched.met == 1
