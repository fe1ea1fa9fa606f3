"""Iteration-time model: hand-computed breakdown, placement stretch, and the engine's runtime stretch."""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.topology.llm_iteration import (GPUSpec, LLMIterationModel, LLMShape, NetworkCosts, gpu_nodes, iteration_time,
                                    network_costs, stretch)
from hpctwin.twin.model_api import ModelContext
from hpctwin.twin.run import job_table, prepare
from hpctwin.twin.simulation import Simulation
from hpctwin.twin.workload import Workload

GPU = GPUSpec("test", peak_flops=1e15, mfu=0.5, intra_bw=1e12, intra_alpha=1e-6)
# per-GPU network 50 GB/s; a group's global links 800 GB/s, half usable, 4 hosts per group ->
# 100 GB/s of global bandwidth per node
COSTS = NetworkCosts(gpu_net_bw=50e9, net_alpha=5e-6, group_uplink_bw=800e9, global_factor=0.5, hosts_per_group=4,
                     gpus_per_node=8, gpu=GPU)
SHAPE = LLMShape(tp=8, pp=1, dp=2, params=8e9, hidden=1024, layers=4, seq_len=1024, global_batch=16, micro_batch=1)
GROUPS = np.array([0, 0, 1, 1])


def test_breakdown_hand_computed():
    packed = iteration_time(SHAPE, np.array([0, 1]), GROUPS, COSTS)
    # compute: 6 * 8e9 * (16 * 1024) / (16 GPUs * 1e15 * 0.5)
    assert packed.compute == pytest.approx(0.098304)
    assert packed.bubble == 0.0 and packed.pp == 0.0
    # TP: 8 micro-batches x 4 layers x 4 ring all-reduces of 1*1024*1024*2 B among 8 GPUs:
    # 14 steps of (1 us + 262,144 B / 1e12 B/s)
    assert packed.tp == pytest.approx(8 * 4 * 4 * 14 * (1e-6 + 262144 / 1e12))
    # DP: ring all-reduce of 8e9 / 8 * 2 B = 2e9 B between 2 GPUs: 2 steps of 5 us + 1e9 B / 50e9 B/s
    assert packed.dp == pytest.approx(2 * (5e-6 + 0.02))
    assert packed.groups == 1
    split = iteration_time(SHAPE, np.array([1, 2]), GROUPS, COSTS)
    # across groups each step moves 2 x 1e9 B over global links for each of the 8 concurrent
    # all-reduces: 16e9 B / (2 nodes x 100 GB/s) = 0.08 s per step
    assert split.dp == pytest.approx(2 * 0.08)
    assert split.groups == 2
    s, act, ref = stretch(SHAPE, np.array([1, 2]), GROUPS, COSTS)
    assert ref.total == pytest.approx(packed.total)
    assert s == pytest.approx(split.total / packed.total)
    assert s == pytest.approx((0.098304 + packed.tp + 0.16) / (0.098304 + packed.tp + 0.04001))


def test_rank_layout_and_errors():
    sh = LLMShape(tp=4, pp=2, dp=2, params=1e9, hidden=1024, layers=4)
    rn = gpu_nodes(np.array([7, 3]), sh, 8)
    # ranks 0..7 on node 3 (the lower id), 8..15 on node 7; [dp, pp, tp]
    assert rn[0].tolist() == [[3, 3, 3, 3], [3, 3, 3, 3]] and rn[1].tolist() == [[7] * 4, [7] * 4]
    with pytest.raises(ValueError, match="needs 2 nodes of 8 GPUs, got 3"):
        gpu_nodes(np.array([0, 1, 2]), sh, 8)
    with pytest.raises(NotImplementedError, match="torus"):
        network_costs({"preset": "fugaku"}, 158976, 4)


def test_fat_tree_placement_is_free_and_dragonfly_is_not():
    from hpctwin.topology.presets import node_groups
    dgx = network_costs({"preset": "dgx-h100"}, 128, 8, "H100")
    assert dgx.node_global_bw == pytest.approx(400e9)             # non-blocking: = 8 x 400 Gb/s
    fr = network_costs({"preset": "frontier"}, 9408, 4, "MI250X")
    # 73 x 4 cables x 25 GB/s per group, half usable, over 128 nodes
    assert fr.node_global_bw == pytest.approx(73 * 4 * 25e9 * 0.5 / 128)
    sh = LLMShape(tp=4, pp=4, dp=16, params=70e9, hidden=8192, layers=80, global_batch=512)
    g = node_groups({"preset": "frontier"}, 9408)
    spread = np.arange(64) * 128                                   # one node in each of 64 groups
    s, act, _ = stretch(sh, spread, g, fr)
    assert act.groups == 64 and s > 1.02


def test_engine_stretches_runtime():
    cls = np.array(["hpc_batch", "llm_pretrain"], dtype=object)
    wl = Workload.from_arrays(
        "t", job_id=[1, 2], submit=[0.0, 0.0], runtime=[10_000.0, 1000.0], requested_time=[10_000.0, 50_000.0],
        procs=[1, 2],
        columns={"job_class": cls, "tp": np.array([0, 8]), "pp": np.array([0, 1]), "dp": np.array([0, 2]),
                 "llm_params": np.array([np.nan, 8e9]), "llm_hidden": np.array([0, 1024]),
                 "llm_layers": np.array([0, 4]), "seq_len": np.array([0, 1024]), "global_batch": np.array([0, 16]),
                 "micro_batch": np.array([0, 1])})
    prep = prepare(wl, 4, "test")
    model = LLMIterationModel(node_group=GROUPS, costs=COSTS)
    from hpctwin.schedulers.registry import make_scheduler
    jt = job_table(prep)
    ctx = ModelContext(n_nodes=4, jobs=jt, runtime=prep.workload.runtime)
    res = Simulation(jt, prep.workload.runtime, prep.kill_limit, make_scheduler("fcfs"), 4, models=[model],
                     context=ctx).run()
    # job 1 takes node 0 (first fit), job 2 nodes 1-2, across groups 0 and 1
    s, _, _ = stretch(SHAPE, np.array([1, 2]), GROUPS, COSTS)
    assert res.end[1] == pytest.approx(1000.0 * s)
    assert res.end[0] == 10_000.0
    cols = model.job_columns()
    assert cols["iter_slowdown"][1] == pytest.approx(s) and np.isnan(cols["iter_slowdown"][0])
    assert cols["llm_groups_spanned"].tolist() == [1, 2]
    assert model.summary()["llm_training_jobs"] == 1
