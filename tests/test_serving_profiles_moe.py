"""MoE and DP x EP iteration model: the profile row a rank reads, the TP1 moe table, TP all-reduce, DP padding
of lm_head, and async scheduling's one-step hold on a finished request's slot (hand-computed values)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpctwin.twin.serving import BlockManager, Instance, IterationModel, ModelShape, simulate
from hpctwin.twin.serving.bundle import _ep_size, load_bundle
from hpctwin.twin.serving.dpgroup import DUMMY_SHAPE
from hpctwin.twin.serving.profiles import LayerProfile, allreduce_s

from .test_serving import TINY as TINY_DENSE
from .test_serving import D, req, write_profile

#: a 2-layer MoE model: 16 experts, top 4 (the qwen3_moe layer walk)
MOE = ModelShape("tiny-moe", "qwen3_moe", num_layers=2, hidden=64, num_heads=4, num_kv_heads=2, head_dim=16,
                 intermediate=128, vocab=1000, num_experts=16, experts_per_token=4, moe_intermediate=32)
MOE_DENSE = ["embedding", "layernorm", "qkv_proj", "qk_norm", "rotary_emb", "o_proj", "final_layernorm"]


def write_moe_profile(folder: Path, with_moe: bool = True) -> Path:
    """Every dense/attention/head entry 1000 us; moe.csv time = 10 x tokens + 100 x activated (us), exact
    under the lookup's linear interpolation."""
    folder.mkdir(parents=True, exist_ok=True)
    write_profile(folder)
    with open(folder / "dense.csv", "w") as f:
        f.write("layer,tokens,time_us\n")
        for name in MOE_DENSE:
            for t in (1, 4096):
                f.write(f"{name},{t},1000\n")
    if with_moe:
        with open(folder / "moe.csv", "w") as f:
            f.write("tokens,activated_experts,time_us\n")
            for t in (1, 4096):
                for a in (1, 16):
                    f.write(f"{t},{a},{10 * t + 100 * a}\n")
    return folder


def model(tmp_path, **kw) -> IterationModel:
    return IterationModel(MOE, LayerProfile.load(write_moe_profile(tmp_path / "bf16" / "tp1")), **kw)


def test_moe_lookup_dp_ep_gathers_the_groups_tokens(tmp_path):
    """DP 2 x EP 2, 3 tokens per member: the EP rank's experts serve n = 6 gathered tokens; s = 2 shards;
    6 x 4 = 24 pairs -> 12 per rank = profile row T = 6; min(24, 16) = 16 experts -> 8 per rank."""
    m = model(tmp_path, ep=2, dp=2)
    assert m.moe_lookup(3) == (3.0, 8.0)
    assert m._moe_us(3) == pytest.approx(10 * 3 + 100 * 8)
    # 1 token per member: 2 x 4 = 8 pairs over at most 8 experts, 4 per rank
    assert m.moe_lookup(1) == (1.0, 4.0)


def test_dp_group_without_ep_shards_the_experts_over_dp_x_tp(tmp_path):
    """vLLM: without --enable-expert-parallel a DP group's expert layers form a DP x TP tensor-parallel
    group; the tokens are still gathered and scattered over it (no TP all-reduce after the block)."""
    m = model(tmp_path, dp=2)
    assert (m.moe_shards(), m.moe_comm_ranks(), m._n_ar) == (2, 2, 2)
    assert m.moe_lookup(3) == (3.0, 8.0)
    assert m.ep_comm_s(4) == pytest.approx(model(tmp_path, dp=2, ep=2).ep_comm_s(4))
    assert model(tmp_path, tp=2).moe_comm_ranks() == 1
    assert IterationModel(TINY_DENSE, LayerProfile.load(write_profile(tmp_path / "d")), dp=2).ep_comm_s(8) == 0.0


def test_moe_lookup_single_rank_and_tp_sharded(tmp_path):
    one = model(tmp_path)
    assert one.moe_lookup(3) == (3.0, 12.0)                    # 12 pairs, 12 experts, one rank
    assert one.moe_lookup(100) == (100.0, 16.0)                # every expert activated
    tp2 = model(tmp_path, tp=2)                                 # intermediate/2 per rank: half the pairs and experts
    assert tp2.moe_lookup(3) == (1.5, 6.0)
    assert tp2._moe_us(3) == pytest.approx(10 * 1.5 + 100 * 6)


def test_moe_buffer_traffic_beyond_the_profile_row(tmp_path):
    """Per slot 5 I + 2 h elements (w13 out, activation in/out, w2 out, moe_sum in), h per row out; k 4,
    h 64, I 32, bf16. DP 2 x EP 2, 3 tokens: 6 rows x 4 slots x 288 + 6 x 64 = 7296 elements against the
    row's 3 x 4 x 288 + 3 x 64 = 3648 -> 3648 x 2 B. TP 2 (I 16 a rank), 10 tokens: 10 x 4 x 208 + 640 =
    8960 against 5 x 4 x 288 + 320 = 6080 -> 2880 x 2 B."""
    ep = model(tmp_path, ep=2, dp=2, mem_bw_GBps=1.0)
    assert ep.moe_extra_bytes(3) == pytest.approx(7296)
    assert ep._moe_us(3) == pytest.approx(10 * 3 + 100 * 8 + 7296 / 1e3)  # 1 GB/s: 1 B = 1e-3 us
    assert model(tmp_path, tp=2).moe_extra_bytes(10) == pytest.approx(5760)
    assert model(tmp_path).moe_extra_bytes(10) == 0.0
    assert model(tmp_path, ep=2, dp=2)._moe_us(3) == pytest.approx(830)  # no bandwidth given: term left out


def test_tp_moe_without_ep_adds_the_block_all_reduce(tmp_path):
    """TP 2, EP 1: per layer an all-reduce after o_proj and one after the MoE block (vLLM reduces the
    TP-sharded experts' output); the same with EP 2 inside the instance; a DP group combines instead."""
    tokens, bw, lat = 8, 16.0, 1000.0
    ar = allreduce_s(tokens * MOE.hidden * MOE.dtype_bytes, 2, bw, lat)
    tp2 = model(tmp_path, tp=2, link_bw_GBps=bw, link_latency_ns=lat)
    # dense: 6 entries a layer (2 norms, qkv, qk_norm, rotary, o_proj) x 2 layers + 2 edges; moe row (4, 8):
    # 8 tokens, half of 8 x 4 = 32 pairs and of min(32, 16) experts on each TP rank
    us = 2 * 6 * 1000 + 2 * 1000 + 2 * (10 * 4 + 100 * 8)
    assert tp2.token_parallel_s(tokens) == pytest.approx(us * 1e-6 + 2 * 2 * ar)
    # EP 2 inside the TP 2 instance: the EP group is the TP group, the block output is all-reduced too
    ep2 = model(tmp_path, tp=2, ep=2, link_bw_GBps=bw, link_latency_ns=lat)
    assert (ep2._n_ar, ep2.moe_comm_ranks(), ep2.ep_comm_s(tokens)) == (4, 1, 0.0)


def test_tp_profile_reads_the_tp1_moe_table(tmp_path):
    """LLMServingSim _lookup_moe: the MoE table is profiled at TP 1 and read for every TP degree."""
    write_moe_profile(tmp_path / "bf16" / "tp1")
    tp2 = LayerProfile.load(write_moe_profile(tmp_path / "bf16" / "tp2", with_moe=False))
    assert tp2.moe_tp == 1 and tp2.moe_us(4, 16) == pytest.approx(40 + 1600)
    alone = LayerProfile.load(write_moe_profile(tmp_path / "other" / "tp2"))
    assert alone.moe_tp == 2
    none = LayerProfile.load(write_moe_profile(tmp_path / "x" / "tp4", with_moe=False))
    with pytest.raises(ValueError, match="moe.csv is needed"):
        none.moe_us(1, 1)


def test_dp_padding_leaves_lm_head_on_the_real_sequences(tmp_path):
    """A member padded from 2 to 50 tokens runs lm_head + sampler on its 2 sequences; the dummy on none."""
    m = model(tmp_path, ep=2, dp=2)
    real = (2, 2, 0, 0, 2, 10, 10, 10)
    head = 2 * 1000e-6                                          # lm_head + sampler at 2 sequences
    att = 2 * 1000e-6                                           # 2 layers x attention
    expect = m.token_parallel_s(50) + att + head + m.ep_comm_s(50)
    assert m.padded_iteration_s(real, 50) == pytest.approx(expect)
    assert m.padded_iteration_s(DUMMY_SHAPE, 50) == pytest.approx(expect - head)


def test_async_scheduling_holds_a_finished_requests_slot_for_one_step(tmp_path):
    """max_num_seqs 2: A (output 2) finishes at the end of step 2 while C keeps running; step 3 was formed
    before step 2's outputs were known (vLLM step_with_batch_queue), so B waits for step 4."""
    from .test_serving import TINY  # noqa: PLC0415
    const = IterationModel(TINY, LayerProfile.load(write_profile(tmp_path / "p")))
    i = Instance(0, const, BlockManager(100, 2), 2, 16, async_scheduling=True)
    a, c, b = simulate([req(0.0, 2, 2), req(0.0, 2, 5), req(0.0, 2, 1)], [i]).requests
    assert a.last == pytest.approx(2 * D)
    assert b.first == pytest.approx(4 * D) and b.last == pytest.approx(4 * D)
    assert c.last == pytest.approx(5 * D)
    assert i.kv.free == i.kv.num_blocks
    sync = Instance(0, const, BlockManager(100, 2), 2, 16)
    assert simulate([req(0.0, 2, 2), req(0.0, 2, 5), req(0.0, 2, 1)], [sync]).requests[2].first \
        == pytest.approx(3 * D)
    # when every running request finishes, the next step is formed afresh (vLLM reschedules at once)
    solo = Instance(0, const, BlockManager(100, 2), 1, 16, async_scheduling=True)
    assert simulate([req(0.0, 2, 2), req(0.0, 2, 1)], [solo]).requests[1].first == pytest.approx(3 * D)


def test_ep_size_from_config_else_from_the_vllm_run():
    assert _ep_size({"ep_size": 4}, {"enable_expert_parallel": False}, 2, True) == 4
    assert _ep_size({}, {"enable_expert_parallel": True, "data_parallel_size": 2}, 2, True) == 4
    assert _ep_size({}, {"enable_expert_parallel": False, "data_parallel_size": 2}, 2, True) == 1
    assert _ep_size({}, {"enable_expert_parallel": True}, 2, False) == 1


def test_bundle_gives_dp_group_members_their_group_size(tmp_path):
    data = tmp_path / "data"
    root = data / "LLM-serving" / "LLMServingSim"
    write_moe_profile(root / "perf" / "HW" / "tiny-moe" / "bf16" / "tp1")
    (root / "workloads").mkdir(parents=True)
    (root / "workloads" / "w.jsonl").write_text(json.dumps({"input_toks": 3, "output_toks": 2,
                                                            "arrival_time_ns": 0}) + "\n")
    inst = {"model_name": "tiny-moe", "hardware": "HW", "npu_mem": {"mem_size": 1, "mem_util": 0.9, "mem_bw": 100},
            "tp_size": 1, "ep_size": 2, "dp_group": "A"}
    b = tmp_path / "bundle"
    (b / "vllm").mkdir(parents=True)
    (b / "config.json").write_text(json.dumps({"nodes": [{"instances": [inst, dict(inst), dict(inst, dp_group=None,
                                                                                       ep_size=1)]}]}))
    (b / "vllm" / "meta.json").write_text(json.dumps({"dataset_path": "workloads/w.jsonl", "engine_kwargs": {}}))
    from hpctwin.twin.serving import models  # noqa: PLC0415
    models.KNOWN_MODELS.setdefault(MOE.name, MOE)
    try:
        insts = load_bundle(b, data).build_instances()
    finally:
        models.KNOWN_MODELS.pop(MOE.name, None)
    assert [(x.model.dp, x.model.ep) for x in insts] == [(2, 2), (2, 2), (1, 1)]
    assert insts[0].model.mem_bw_GBps == 100.0
