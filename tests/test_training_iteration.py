"""Training model: iteration time by hand on toy hardware, invariants, placement on the topology, errors."""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.twin.training import BatchConfig, Constants, ParallelConfig, TrainingConfigError, iteration_time
from hpctwin.twin.training.flops import model_flops
from hpctwin.twin.training.hardware import GPU, SYSTEMS, SystemPreset, machine_for
from hpctwin.twin.training.models import TransformerModel, total_params

TOY_GPU = GPU("toy", peak_flops=100e12, memory_bytes=80e9, hbm_bw=1e12, intra_bw=100e9, intra_alpha=1e-6)
NET = {"kind": "leaf_spine", "hosts_per_leaf": 4, "spines": 4, "terminal_bandwidth": 10e9, "global_bandwidth": 10e9}
HW1 = SystemPreset("toy1", TOY_GPU, 1, NET)        # one GPU per node: every collective crosses the network
HW8 = SystemPreset("toy8", TOY_GPU, 8, NET)
K = Constants(gemm_eff_max=0.5, gemm_x_half=0.0, mem_traffic=0.0, comm_eff=1.0)   # flat 50 % GEMM efficiency
TOY = TransformerModel("toy", layers=4, hidden=1024, heads=16, kv_heads=16, ffn=4096, vocab=32000)
BATCH = BatchConfig(seq_len=1024, global_batch=8, micro_batch=1)
ACT = 2.0 * 1024 * 1024          # bytes of one micro-batch's b s h activations (bf16)


def _par(**kw):
    return ParallelConfig(**{"attention": "unfused", "dp_overlap": 0.0, **kw})


def test_single_gpu_is_flops_over_sustained_rate_plus_optimizer():
    bd = iteration_time(TOY, HW1, _par(), BATCH, k=K)
    mf = model_flops(TOY, 8, 1024)
    assert bd.compute == pytest.approx(mf / (100e12 * 0.5), rel=1e-12)
    assert bd.optimizer == pytest.approx(36.0 * total_params(TOY) / 1e12, rel=1e-12)
    assert (bd.tp, bd.bubble, bd.pp, bd.dp, bd.memory_bound) == (0.0, 0.0, 0.0, 0.0, 0.0)
    assert bd.total == pytest.approx(bd.compute + bd.optimizer, rel=1e-12)
    assert bd.mfu == pytest.approx(mf / (bd.total * 100e12), rel=1e-12)
    assert bd.tflops_per_gpu == pytest.approx(mf / bd.total / 1e12, rel=1e-12)    # no recompute: same count


def test_tensor_parallel_ring_allreduce_on_nvlink():
    bd = iteration_time(TOY, HW8, _par(tp=8), BATCH, k=K)
    ring = 14 * (1e-6 + ACT / 8 / 100e9)                 # 2 (p - 1) steps of n / p bytes
    assert bd.tp == pytest.approx(8 * 4 * 4 * ring, rel=1e-12)   # m x layers x 4 all-reduces
    assert bd.compute == pytest.approx(model_flops(TOY, 8, 1024) / 8 / 50e12, rel=1e-12)
    sp = iteration_time(TOY, HW8, _par(tp=8, sp=True), BATCH, k=K)
    assert sp.tp == pytest.approx(bd.tp, rel=1e-12)      # reduce-scatter + all-gather = all-reduce volume


def test_data_parallel_allreduce_across_nodes_and_overlap():
    bd = iteration_time(TOY, HW1, _par(dp=2), BATCH, k=K)
    grad = 2.0 * total_params(TOY)
    assert bd.dp == pytest.approx(2 * (5e-6 + grad / 2 / 10e9), rel=1e-12)
    # overlapped behind the last micro-batch's backward (8 sequences: long enough to hide it all);
    # the last 25 MB bucket stays exposed
    big = BatchConfig(1024, 64, 8)
    hidden = iteration_time(TOY, HW1, _par(dp=2, dp_overlap=1.0), big, k=K)
    assert hidden.dp == pytest.approx(bd.dp * 25e6 / grad, rel=1e-12)
    assert hidden.dp_total == pytest.approx(bd.dp, rel=1e-12)
    short = iteration_time(TOY, HW1, _par(dp=2, dp_overlap=1.0), BATCH, k=K)     # 1 sequence: partly exposed
    assert bd.dp * 25e6 / grad < short.dp < bd.dp
    z1 = iteration_time(TOY, HW1, _par(dp=2, zero=1), BATCH, k=K)
    assert z1.dp == pytest.approx(bd.dp, rel=1e-12)      # reduce-scatter + all-gather
    assert z1.optimizer == pytest.approx(bd.optimizer / 2, rel=1e-12)


def test_pipeline_bubble_and_p2p():
    bd = iteration_time(TOY, HW1, _par(pp=2), BATCH, k=K)
    per_mb = (bd.compute + bd.memory_bound + bd.tp + bd.cp + bd.ep) / bd.microbatches
    assert bd.bubble == pytest.approx(per_mb, rel=1e-12)                  # (p - 1) / v = 1
    assert bd.pp == pytest.approx(2 * (8 + 1) * (5e-6 + ACT / 10e9), rel=1e-12)
    assert bd.total == pytest.approx((8 + 1) * per_mb + bd.pp + bd.dp + bd.optimizer, rel=1e-12)
    inter = iteration_time(TOY, HW1, _par(pp=2, vpp=2), BATCH, k=K)
    assert inter.bubble == pytest.approx(bd.bubble / 2, rel=1e-12)
    assert inter.pp == pytest.approx(2 * (2 * 8 + 1) * (5e-6 + ACT / 10e9), rel=1e-12)


def test_terms_sum_and_recompute_counts():
    par = ParallelConfig(tp=8, pp=2, dp=2, recompute="full", zero=1, sp=True)
    bd = iteration_time("llama3-8b", "dgx-h100", par, BatchConfig(4096, 64, 1))
    terms = bd.compute + bd.memory_bound + bd.tp + bd.cp + bd.ep + bd.bubble + bd.pp + bd.dp + bd.optimizer
    assert bd.total == pytest.approx(terms, rel=1e-12)
    assert bd.hardware_flops > bd.model_flops
    assert bd.tflops_per_gpu / bd.model_tflops_per_gpu == pytest.approx(bd.hardware_flops / bd.model_flops)
    assert bd.mfu == pytest.approx(bd.model_tflops_per_gpu * 1e12 / 989e12)
    none = iteration_time("llama3-8b", "dgx-h100", ParallelConfig(tp=8, pp=2, dp=2, zero=1, sp=True),
                          BatchConfig(4096, 64, 1))
    assert none.total < bd.total and none.mfu > bd.mfu


def test_gemm_efficiency_grows_with_size():
    k = Constants(gemm_eff_max=0.7, gemm_x_half=128.0, mem_traffic=2.0)
    assert k.gemm_eff(128) == pytest.approx(0.35)
    assert k.gemm_eff(64) < k.gemm_eff(1024) < k.gemm_eff(8192) < 0.7


# ---------------------------------------------------------------- placement on the topology
PAR = ParallelConfig(tp=8, pp=2, dp=16, zero=1, sp=True, recompute="selective", dp_overlap=0.0)
B = BatchConfig(4096, 512, 1)


def test_analytic_equals_graph_on_contiguous_nodes():
    for system in ("dgx-h100", "frontier"):
        a = iteration_time("llama3-8b", system, PAR, B)
        g = iteration_time("llama3-8b", system, PAR, B, nodes=np.arange(32))
        assert (a.path, g.path) == ("analytic", "graph")
        assert g.total == pytest.approx(a.total, rel=1e-9)
        assert g.dp == pytest.approx(a.dp, rel=1e-9) and g.pp == pytest.approx(a.pp, rel=1e-9)


def test_nonblocking_leaf_spine_placement_does_not_matter():
    packed = iteration_time("llama3-8b", "dgx-h100", PAR, B, nodes=np.arange(32))
    spread = iteration_time("llama3-8b", "dgx-h100", PAR, B, nodes=np.arange(0, 128, 4))
    assert spread.total == pytest.approx(packed.total, rel=1e-12)


def test_dragonfly_groups_matter_when_global_links_are_busy():
    one_group = np.arange(32)                       # Frontier: 128 nodes per group
    across = np.arange(0, 128 * 32, 128)            # one node in each of 32 groups
    alone = iteration_time("llama3-8b", "frontier", PAR, B, nodes=across)
    packed_busy = iteration_time("llama3-8b", "frontier", PAR, B, nodes=one_group, background=0.9)
    spread_busy = iteration_time("llama3-8b", "frontier", PAR, B, nodes=across, background=0.9)
    packed = iteration_time("llama3-8b", "frontier", PAR, B, nodes=one_group)
    assert packed_busy.total == pytest.approx(packed.total, rel=1e-12)     # no global link used
    assert alone.total == pytest.approx(packed.total, rel=1e-12)           # idle global links suffice
    assert spread_busy.dp > 5 * packed.dp and spread_busy.pp > 5 * packed.pp
    with_system = iteration_time("llama3-8b", "frontier", PAR, B, nodes=across, system="frontier", background=0.9)
    assert with_system.total == pytest.approx(spread_busy.total, rel=1e-12)   # twin/systems/frontier.toml


def test_presets_mirror_system_files():
    from hpctwin.twin.system import load_system
    for name in ("dgx-h100", "frontier"):
        spec, preset = load_system(name), SYSTEMS[name]
        assert preset.system_file == name and spec.network == preset.network
        assert spec.nodes == preset.machine_nodes
    assert load_system("frontier").gpus_per_node * 2 == SYSTEMS["frontier"].gpus_per_node   # 4 MI250X = 8 GCDs
    assert load_system("dgx-h100").gpus_per_node == SYSTEMS["dgx-h100"].gpus_per_node


def test_machine_scaling_keeps_fabric_type():
    fr = machine_for(SYSTEMS["frontier"], 100)
    assert fr.nodes == 9408 and fr.params["g"] == 74            # fits: the real machine
    big = machine_for(SYSTEMS["frontier"], 20000)
    assert big.params["kind"] == "dragonfly" and big.params["g"] == 157 and big.nodes == 20000
    a100 = machine_for(SYSTEMS["dgx-a100-80gb"], 384)
    assert a100.params["kind"] == "leaf_spine" and a100.nodes == 384


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize("kw,batch,msg", [
    (dict(tp=16), BATCH, "tp = 16 spans nodes of 8 GPUs"),
    (dict(tp=3), BATCH, "tp = 3: must divide the 16 attention heads"),
    (dict(dp=3), BATCH, "not a multiple of dp x micro_batch = 3 x 1 = 3"),
    (dict(cp=2), BATCH, "cp = 2: context parallelism (ring attention) needs attention = flash"),
    (dict(ep=2, dp=2), BATCH, "ep = 2: needs an MoE model"),
    (dict(recompute="some"), BATCH, "recompute = 'some': expected one of none, selective, full"),
    (dict(pp=2, vpp=2), BatchConfig(1024, 5, 1), "vpp = 2: the interleaved schedule needs the 5 micro-batches"),
    (dict(zero=4), BATCH, "zero = 4: expected 0, 1, 2 or 3"),
])
def test_bad_configurations(kw, batch, msg):
    with pytest.raises(TrainingConfigError) as e:
        iteration_time(TOY, HW8, _par(**kw), batch, k=K)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_bad_nodes_and_background():
    with pytest.raises(TrainingConfigError, match="need 2 distinct nodes of 8 GPUs, got 3"):
        iteration_time(TOY, HW8, _par(tp=8, dp=2), BATCH, nodes=[0, 1, 2], k=K)
    with pytest.raises(TrainingConfigError, match="ids must lie in 0..127"):
        iteration_time("llama3-8b", "dgx-h100", PAR, B, nodes=np.arange(100, 132))
    with pytest.raises(TrainingConfigError, match=r"background = 1.0: expected a share in \[0, 1\)"):
        iteration_time(TOY, HW8, _par(tp=8), BATCH, background=1.0, k=K)
    with pytest.raises(TrainingConfigError, match=r"background: expected 512 per-link values \(bytes/s\), got shape \(3,\)"):
        iteration_time("llama3-8b", "dgx-h100", PAR, B, nodes=np.arange(32), background=np.zeros(3))
    with pytest.raises(TrainingConfigError, match="routing = 'valiant': a leaf_spine network offers minimal"):
        iteration_time("llama3-8b", "dgx-h100", PAR, B, nodes=np.arange(32), routing="valiant")
    with pytest.raises(TrainingConfigError, match="a per-link array needs the job's nodes"):
        iteration_time("llama3-8b", "dgx-h100", PAR, B, background=np.zeros(512))
    with pytest.raises(TrainingConfigError, match="unknown model 'gpt5'"):
        iteration_time("gpt5", HW8, _par(), BATCH)
