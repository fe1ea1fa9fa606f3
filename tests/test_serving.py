"""LLM serving engine: hand-computed batching and KV admission, conservation, routers, profiles, traces."""
from __future__ import annotations

import csv
import random
from pathlib import Path

import numpy as np
import pytest

from hpctwin.datasets.serving_traces import ServingRequest, ServingTraceError, read_azure, read_llmservingsim
from hpctwin.twin.serving import BlockManager, Instance, IterationModel, ModelShape, simulate
from hpctwin.twin.serving.profiles import AttentionTable, LayerProfile, allreduce_s, skew_alpha_from_meta

TINY = ModelShape("tiny", "llama", num_layers=1, hidden=64, num_heads=4, num_kv_heads=2, head_dim=16,
                  intermediate=128, vocab=1000)
DENSE = ["embedding", "layernorm", "qkv_proj", "rotary_emb", "o_proj", "gate_up_proj", "act_fn", "down_proj",
         "final_layernorm"]


def write_profile(folder: Path, dense_us: float = 1000.0, attn_us: float = 1000.0, seq_us: float = 1000.0,
                  dense_slope: float = 0.0) -> Path:
    """A profile whose every layer takes a constant time (plus ``dense_slope`` us per token)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "dense.csv", "w") as f:
        f.write("layer,tokens,time_us\n")
        for name in DENSE:
            for t in (1, 4096):
                f.write(f"{name},{t},{dense_us + dense_slope * (t - 1)}\n")
    with open(folder / "per_sequence.csv", "w") as f:
        f.write("layer,sequences,time_us\n")
        for name in ("lm_head", "sampler"):
            for s in (1, 256):
                f.write(f"{name},{s},{seq_us}\n")
    with open(folder / "attention.csv", "w") as f:
        f.write("prefill_chunk,kv_prefill,n_decode,kv_decode,time_us\n")
        for pc in (0, 2048):
            for nd in (0, 256):
                if pc == 0 and nd == 0:
                    continue
                for kvp in (0, 16384):
                    for kvd in (0, 16384):
                        f.write(f"{pc},{kvp},{nd},{kvd},{attn_us}\n")
    return folder


@pytest.fixture
def const_model(tmp_path):
    """Every iteration takes D = 10 dense + 1 attention + 2 head layers = 13 ms."""
    return IterationModel(TINY, LayerProfile.load(write_profile(tmp_path / "p")))


D = 0.013


def inst(model, blocks=100, bs=2, budget=4, seqs=2, caching=False, iid=0) -> Instance:
    return Instance(iid, model, BlockManager(blocks, bs, caching=caching), seqs, budget)


def req(arrival, prompt, output, ids=None):
    return ServingRequest(arrival, prompt, output, token_ids=ids)


def test_constant_iteration_time(const_model):
    assert const_model.iteration_s(7, 2, 4, 0, 1, 3) == pytest.approx(D)
    assert const_model.decode_run_s(3, 10, 5) == pytest.approx([D] * 5)


def test_chunked_prefill_and_decode_first_batch(const_model):
    """Budget 4: A (6-token prompt) takes chunks 4+2; B joins in the second iteration's spare 2 tokens."""
    i = inst(const_model)
    res = simulate([req(0.0, 6, 3), req(0.5 * D, 3, 2)], [i])
    a, b = res.requests
    assert (a.first, a.last) == pytest.approx((2 * D, 4 * D))
    assert (b.first, b.last) == pytest.approx((3 * D, 4 * D))
    assert i.iterations == 4
    assert i.tokens_prefilled == 4 + 2 + 2  # B's last prompt token runs as a 1-token chunk
    assert i.kv.free == i.kv.num_blocks


def test_kv_preemption_by_recompute(const_model):
    """4 blocks of 2 tokens: B is preempted when A needs a third block, and recomputes after A ends."""
    i = inst(const_model, blocks=4, bs=2, budget=16, seqs=4)
    res = simulate([req(0.0, 4, 4), req(0.0, 3, 2)], [i])
    a, b = res.requests
    assert (a.first, a.last) == pytest.approx((D, 4 * D))
    assert (b.first, b.last) == pytest.approx((D, 5 * D))
    assert i.preemptions == 1 and b.preemptions == 1
    assert i.iterations == 5
    assert i.tokens_prefilled == 4 + 3 + 4  # B recomputes its prompt plus its first token


def test_reserve_full_isl_blocks_admission(const_model):
    """A prompt whose whole length does not fit in the free blocks waits even if its first chunk would."""
    i = inst(const_model, blocks=3, bs=2, budget=2, seqs=4)
    res = simulate([req(0.0, 2, 3), req(0.0, 5, 1)], [i])
    a, b = res.requests
    # A holds 1 block (2 tokens), then 2 blocks when it decodes; B needs 3 blocks: only after A finishes
    assert a.last == pytest.approx(3 * D)
    assert b.first == pytest.approx(3 * D + 3 * D)  # 5 tokens in chunks of 2: 3 iterations after A ends
    assert i.preemptions == 0


def test_max_num_seqs_limits_running(const_model):
    i = inst(const_model, budget=64, seqs=1)
    res = simulate([req(0.0, 2, 2), req(0.0, 2, 2)], [i])
    a, b = res.requests
    assert (a.first, a.last) == pytest.approx((D, 2 * D))
    assert (b.first, b.last) == pytest.approx((3 * D, 4 * D))


def test_prefix_cache_hit_on_shared_prompt(const_model):
    """The second request's first two full blocks are found in the cache; only its last token is computed."""
    i = inst(const_model, blocks=20, bs=2, budget=16, seqs=4, caching=True)
    ids = (1, 2, 3, 4, 5)
    res = simulate([req(0.0, 5, 1, ids), req(1.0, 5, 1, ids)], [i])
    assert i.kv.hits_tokens == 4
    assert i.tokens_prefilled == 5  # the second prompt's single remaining token runs as a 1-token step
    assert res.requests[1].first == pytest.approx(1.0 + D)


def test_block_manager_lru_eviction_keeps_recent_hashes():
    kv = BlockManager(2, 2, caching=True)
    assert kv.allocate(1, 4, hashes=["a", "b"], cache_upto=4)
    kv.release(1)
    assert kv.free == 2
    assert kv.computed_blocks(["a", "b"], 5) == [0, 1]
    assert kv.allocate(2, 2, hashes=["x"], cache_upto=2)  # reuses block 1 (freed first: tail of request 1)
    assert kv.computed_blocks(["a", "b"], 5) == [0]
    assert not kv.allocate(3, 6)
    assert kv.free == 1


def test_decode_fast_path_matches_stepping(tmp_path, monkeypatch):
    """Vectorised decode runs give the same per-request times as one iteration at a time."""
    model = IterationModel(TINY, LayerProfile.load(write_profile(tmp_path / "p", dense_slope=0.5)))
    rng = random.Random(3)
    trace = sorted((req(rng.uniform(0, 2), rng.randint(1, 40), rng.randint(1, 60)) for _ in range(40)),
                   key=lambda r: r.arrival_s)
    fast = simulate(trace, [inst(model, blocks=60, bs=4, budget=32, seqs=8)]).requests
    monkeypatch.setattr(Instance, "_decode_run", lambda self, t: False)
    slow = simulate(trace, [inst(model, blocks=60, bs=4, budget=32, seqs=8)]).requests
    assert [r.first for r in fast] == pytest.approx([r.first for r in slow], rel=1e-12, abs=1e-12)
    assert [r.last for r in fast] == pytest.approx([r.last for r in slow], rel=1e-12, abs=1e-12)
    # the closed-form run and the vectorised one agree too
    monkeypatch.undo()
    monkeypatch.setattr(IterationModel, "decode_run", lambda self, *a: None)
    vec = simulate(trace, [inst(model, blocks=60, bs=4, budget=32, seqs=8)]).requests
    assert [r.last for r in vec] == pytest.approx([r.last for r in slow], rel=1e-12, abs=1e-12)


def test_closed_form_decode_run_matches_profile(tmp_path):
    """Real profile shape: the closed-form run reproduces summed per-iteration lookups (with skew)."""
    rows = [{"prefill_chunk": 0, "kv_prefill": 0, "n_decode": nd, "kv_decode": kv, "time_us": 5 + nd * kv / 50}
            for nd in (1, 2, 4, 8) for kv in (16, 32, 64, 128, 256)]
    rows[1]["time_us"] = rows[2]["time_us"] + 1  # a dip, as measured profiles have at short contexts
    prof = LayerProfile.load(write_profile(tmp_path / "p"))
    prof.attention = AttentionTable.from_rows(rows)
    m = IterationModel(TINY, prof, skew_alpha=0.1)
    k, last_start, end = m.decode_run(0.0, 1e9, 6, 20, 300, 90)
    dts = [m.iteration_s(6, 6, 0, 0, 6, 20 + j, 90 + j, 20 + j) for j in range(300)]
    assert k == 300
    assert end == pytest.approx(sum(dts), rel=1e-12)
    assert last_start == pytest.approx(sum(dts[:-1]), rel=1e-12)
    k2, _, end2 = m.decode_run(0.0, sum(dts[:10]) - 1e-9, 6, 20, 300, 90)
    assert k2 == 10 and end2 == pytest.approx(sum(dts[:10]), rel=1e-12)


@pytest.mark.parametrize("router", ["round_robin", "least_outstanding", "kv_aware"])
def test_conservation_under_preemption(const_model, router):
    """Every request finishes once with exactly its tokens, whatever the router and KV pressure."""
    rng = random.Random(7)
    trace = sorted((req(rng.uniform(0, 1), rng.randint(1, 30), rng.randint(1, 40)) for _ in range(150)),
                   key=lambda r: r.arrival_s)
    insts = [inst(const_model, blocks=24, bs=4, budget=16, seqs=6, iid=k) for k in range(3)]
    res = simulate(trace, insts, router=router)
    finished = [r.uid for x in insts for r in x.finished]
    assert sorted(finished) == list(range(150))
    assert all(r.generated == t.output_tokens for r, t in zip(res.requests, trace))
    assert sum(x.tokens_decoded for x in insts) == sum(t.output_tokens for t in trace)
    assert all(r.arrival <= r.first <= r.last for r in res.requests)
    assert all(x.kv.free == x.kv.num_blocks for x in insts)
    assert sum(x.preemptions for x in insts) > 0


def test_round_robin_and_least_outstanding(const_model):
    trace = [req(0.0, 2, 50), req(0.0, 2, 50), req(0.0, 2, 50), req(0.001, 2, 1)]
    rr = simulate(trace, [inst(const_model, iid=k) for k in range(3)], router="round_robin")
    assert [r.instance for r in rr.requests] == [0, 1, 2, 0]
    lo = simulate(trace[:2] + [req(0.0, 2, 1)], [inst(const_model, iid=k) for k in range(2)],
                  router="least_outstanding")
    assert [r.instance for r in lo.requests] == [0, 1, 0]


def test_oversized_prompt_is_refused(const_model):
    with pytest.raises(ValueError, match="request 0: 50 prompt tokens need more KV blocks"):
        simulate([req(0.0, 50, 1)], [inst(const_model, blocks=4, bs=2)])


def test_attention_interpolation_is_linear_per_axis():
    rows = [{"prefill_chunk": 0, "kv_prefill": 0, "n_decode": nd, "kv_decode": kv, "time_us": 10 + nd * kv / 100}
            for nd in (1, 4) for kv in (16, 32, 64)]
    t = AttentionTable.from_rows(rows)
    assert t.lookup(0, 0, 4, 48) == pytest.approx(10 + 4 * 48 / 100)
    assert t.lookup(0, 0, 2, 32) == pytest.approx(10 + (1 * 32 + (4 * 32 - 32) / 3) / 100)
    assert t.lookup(0, 0, 4, 128) == pytest.approx(10 + 4 * 128 / 100)  # extrapolated from the top two
    assert t.lookup(0, 0, 4, 1) == pytest.approx(10 + 4 * 16 / 100)  # clamped below the grid
    np.testing.assert_allclose(t.decode_only_np(4, np.array([16.0, 48.0, 128.0])),
                               [t.lookup(0, 0, 4, k) for k in (16, 48, 128)])


def test_allreduce_ring_model():
    # 2 ranks, 1 GiB at 1 GiB/s, 1000 ns latency: 2 steps of 0.5 GiB
    assert allreduce_s(2 ** 30, 2, 1.0, 1000) == pytest.approx(2 * (1e-6 + 0.5))
    assert allreduce_s(2 ** 30, 1, 1.0, 1000) == 0.0


def test_skew_alpha_from_meta(tmp_path):
    m = tmp_path / "meta.yaml"
    m.write_text("model: x\nskew_fit:\n  enabled: true\n  per_tp:\n    1:\n      alpha_default: 0.05\n"
                 "    2:\n      alpha_default: 0.07\nother: 1\n")
    assert skew_alpha_from_meta(m, 1) == 0.05 and skew_alpha_from_meta(m, 2) == 0.07
    m.write_text("skew_fit:\n  enabled: false\n")
    assert skew_alpha_from_meta(m, 1) == 0.0


def test_weights_and_kv_bytes_llama8b():
    from hpctwin.twin.serving.models import model_shape
    m = model_shape("meta-llama/Llama-3.1-8B")
    assert m.kv_bytes_per_token() == 2 * 8 * 128 * 32 * 2
    assert m.weight_bytes_per_rank() == 16_060_522_496  # 8.03 G parameters in bf16
    # LLMServingSim's rule on a 24 GiB card at mem_util 0.833919: 2588 blocks, as vLLM resolved
    assert (int(24 * 2 ** 30 * 0.833919) - m.weight_bytes_per_rank()) // (m.kv_bytes_per_token() * 16) == 2588


def test_trace_readers_and_errors(tmp_path):
    p = tmp_path / "w.jsonl"
    p.write_text('{"input_toks": 3, "output_toks": 2, "arrival_time_ns": 1500000000, "input_tok_ids": [1,2,3]}\n'
                 '{"input_toks": 4, "output_toks": 1, "arrival_time_ns": 2000000000}\n')
    r = read_llmservingsim(p)
    assert [(x.arrival_s, x.input_tokens, x.output_tokens) for x in r] == [(1.5, 3, 2), (2.0, 4, 1)]
    assert r[0].token_ids == (1, 2, 3) and r[1].token_ids is None
    p.write_text('{"input_toks": 3, "arrival_time_ns": 0}\n')
    with pytest.raises(ServingTraceError, match=r"w.jsonl:1: missing field 'output_toks'"):
        read_llmservingsim(p)
    a = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    a.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
                 "2023-11-16 18:15:50.9951690,396,0\n")
    az = read_azure(a)
    assert az[1].arrival_s == pytest.approx(4.314579) and az[1].output_tokens == 1
    a.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\nbad,374,44\n")
    with pytest.raises(ServingTraceError, match="AzureLLMInferenceTrace_conv.csv:2: field 'TIMESTAMP'"):
        read_azure(a)


def test_serve_cli_writes_outputs(tmp_path):
    """``hpctwin serve`` on a tiny hand-made bundle: requests.csv in workload order and a summary."""
    import json

    from hpctwin.twin.cli import main
    data = tmp_path / "data"
    root = data / "LLM-serving" / "LLMServingSim"
    write_profile(root / "perf" / "HW" / "meta-llama" / "Llama-3.1-8B" / "bf16" / "tp1")
    (root / "workloads").mkdir(parents=True)
    (root / "workloads" / "w.jsonl").write_text(
        '{"input_toks": 5, "output_toks": 3, "arrival_time_ns": 1000000000}\n'
        '{"input_toks": 2, "output_toks": 1, "arrival_time_ns": 0}\n')
    b = tmp_path / "bundle"
    (b / "vllm").mkdir(parents=True)
    (b / "config.json").write_text(json.dumps({"link_bw": 16, "link_latency": 1000, "nodes": [{"instances": [
        {"model_name": "meta-llama/Llama-3.1-8B", "hardware": "HW", "npu_mem": {"mem_size": 24, "mem_util": 0.9},
         "tp_size": 1}]}]}))
    (b / "vllm" / "meta.json").write_text(json.dumps({"engine_kwargs": {"max_num_seqs": 4,
                                                                         "max_num_batched_tokens": 16},
                                                       "dataset_path": "workloads/w.jsonl"}))
    out = tmp_path / "out"
    assert main(["serve", "--bundle", str(b), "--out", str(out), "--data-dir", str(data), "-q"]) == 0
    rows = list(csv.DictReader(open(out / "requests.csv")))
    assert [r["request_id"] for r in rows] == ["0", "1"]
    assert list(rows[0]) == ["request_id", "arrival_s", "first_token_s", "last_token_s", "input_tokens",
                             "output_tokens"]
    assert [(r["input_tokens"], r["output_tokens"]) for r in rows] == [("5", "3"), ("2", "1")]
    # Llama-8B has 32 layers: each iteration = 32 x 8 block layers + 2 edge + 32 attention + 2 head, in ms
    d = (32 * 8 + 2 + 32 + 2) * 1e-3
    assert float(rows[1]["first_token_s"]) == pytest.approx(d)
    assert float(rows[0]["last_token_s"]) - float(rows[0]["first_token_s"]) == pytest.approx(2 * d)
    s = json.load(open(out / "summary.json"))
    assert s["tpot"]["mean"] == pytest.approx(d / 2)  # request 0: 2d / (3 - 1); request 1: 0 / max(1, 0)
    assert s["requests"] == 2 and s["output_tokens"] == 4
    ts = list(csv.DictReader(open(out / "timeseries.csv")))
    assert ts and ts[-1]["running"] == "0" and int(ts[0]["batch_tokens"]) == 2
    assert main(["serve", "--bundle", str(tmp_path / "nope"), "--out", str(out)]) == 2


def test_dp_group_lockstep_and_padding(tmp_path):
    """DP members step together: an idle member runs a dummy, and a request reaching it mid-iteration
    waits for the group's next boundary; every member's forward runs at the group's largest token count."""
    from hpctwin.twin.serving.dpgroup import DPGroup
    model = IterationModel(TINY, LayerProfile.load(write_profile(tmp_path / "p", dense_slope=1.0)))
    m0, m1 = inst(model, iid=0), inst(model, iid=1)
    res = simulate([req(0.0, 4, 2), req(0.5 * D, 1, 1)], [m0, m1], router="round_robin",
                   units=[DPGroup([m0, m1])])
    r0, r1 = res.requests
    e1 = D + 10 * 3e-6  # 4 tokens: 10 dense layer entries x 3 us above the 1-token time
    assert r0.first == pytest.approx(e1)
    assert r1.first == pytest.approx(e1 + D) and r1.last == pytest.approx(e1 + D)
    assert r0.last == pytest.approx(e1 + D)
    alone = simulate([req(0.0, 4, 2), req(0.5 * D, 1, 1)], [inst(model, iid=0), inst(model, iid=1)],
                     router="round_robin")
    assert alone.requests[1].first == pytest.approx(1.5 * D)


def test_least_loaded_router_rotates_on_ties(const_model):
    insts = [inst(const_model, iid=k) for k in range(3)]
    res = simulate([req(0.0, 2, 5), req(0.0, 2, 5), req(0.0, 2, 5), req(0.0, 2, 5)], insts, router="least_loaded")
    assert [r.instance for r in res.requests] == [0, 1, 2, 0]


def test_async_scheduling_joins_the_step_after_next(const_model):
    """vLLM V1 async scheduling: a request received while step k runs is formed into step k+2; it is
    received (queued) when the step in flight ends."""
    i = Instance(0, const_model, BlockManager(100, 2), 4, 16, async_scheduling=True)
    a, b = simulate([req(0.0, 2, 5), req(0.5 * D, 2, 1)], [i]).requests
    assert b.queued == pytest.approx(D)
    assert b.first == pytest.approx(3 * D)
    assert a.last == pytest.approx(5 * D)
    sync = simulate([req(0.0, 2, 5), req(0.5 * D, 2, 1)], [inst(const_model, budget=16, seqs=4)]).requests
    assert sync[1].first == pytest.approx(2 * D)
    # an engine with nothing running takes a new request at once, async or not
    i2 = Instance(0, const_model, BlockManager(100, 2), 4, 16, async_scheduling=True)
    c, d = simulate([req(0.0, 2, 1), req(1.5 * D, 2, 1)], [i2]).requests
    assert (d.queued, d.first) == pytest.approx((1.5 * D, 2.5 * D))


def test_pd_disaggregation_hand_computed(const_model):
    """Prefill on one instance (first token there), KV sent to the decode instance, decodes there."""
    from hpctwin.twin.serving.pd import kv_transfer_s, simulate_pd
    p, d = inst(const_model, iid=0), inst(const_model, iid=1)
    res = simulate_pd([req(0.0, 2, 3)], [p], [d], link_GBps=1.0, latency_s=0.0)
    r = res.requests[0]
    x = kv_transfer_s(TINY, 2, link_GBps=1.0, latency_s=0.0)
    assert x == pytest.approx(2 * 2 * 16 * 1 * 2 * 2 / 1e9)  # K+V x kv heads x head_dim x layers x bf16 x tokens
    assert r.first == pytest.approx(D)
    assert r.last == pytest.approx(D + x + 2 * D)
    assert r.prefill_instance == 0 and r.instance == 1
    assert p.tokens_prefilled == 2 and d.tokens_prefilled == 0
    assert p.kv.free == p.kv.num_blocks and d.kv.free == d.kv.num_blocks
    assert res.extra["kv_transferred_bytes"] == 2 * 2 * 16 * 1 * 2 * 2


def test_pd_conservation(const_model):
    from hpctwin.twin.serving.pd import simulate_pd
    rng = random.Random(11)
    trace = sorted((req(rng.uniform(0, 1), rng.randint(1, 30), rng.randint(1, 40)) for _ in range(120)),
                   key=lambda r: r.arrival_s)
    pre = [inst(const_model, blocks=40, bs=4, budget=32, seqs=8, iid=k) for k in range(2)]
    dec = [inst(const_model, blocks=24, bs=4, budget=32, seqs=8, iid=2 + k) for k in range(2)]
    res = simulate_pd(trace, pre, dec)
    assert all(r.generated == t.output_tokens for r, t in zip(res.requests, trace))
    assert sum(x.tokens_decoded for x in pre + dec) == sum(t.output_tokens for t in trace)
    assert sorted(r.uid for x in pre + dec for r in x.finished) == list(range(120))
    assert all(r.arrival <= r.first <= r.last for r in res.requests)
    assert all(x.kv.free == x.kv.num_blocks for x in pre + dec)


def test_splitwise_and_distserve_tables(tmp_path):
    from hpctwin.twin.serving.tables import DistServeIterationModel, SplitwiseIterationModel
    p = tmp_path / "perf_model.csv"
    p.write_text("model,hardware,prompt_size,batch_size,token_size,peak_power,average_power,prompt_time,token_time,"
                 "e2e_time,tensor_parallel\n"
                 "llama2-70b,a100-80gb,128,1,128,1,0.7,100,40,0,4\nllama2-70b,a100-80gb,128,1,128,1,0.7,110,40,0,4\n"
                 "llama2-70b,a100-80gb,256,1,128,1,0.7,200,50,0,4\nllama2-70b,a100-80gb,512,1,128,1,0.7,400,60,0,4\n")
    m = SplitwiseIterationModel(p, "llama2-70b", "a100-80gb", 4)
    assert m.iteration_s(128, 1, 128, 0, 0, 0) == pytest.approx(0.105)          # median of 100 and 110 ms
    assert m.iteration_s(384, 1, 384, 0, 0, 0) == pytest.approx(0.300)          # halfway 256..512
    assert m.iteration_s(300, 2, 296, 0, 4, 10) == pytest.approx(1.1 * (0.2 + 44 / 256 * 0.2))  # mixed: 1.1 x prompt
    assert m.iteration_s(256, 256, 0, 0, 256, 10) == pytest.approx(0.050)
    with pytest.raises(ValueError, match="no rows for model='bloom-176b'"):
        SplitwiseIterationModel(p, "bloom-176b", "a100-80gb", 8)
    j = tmp_path / "c.json"
    j.write_text('{"facebook/opt-13b": {"1": {"decoding_large_small_bs_threshold": 95, "prefill": [20, 0.1, 1e-5],'
                 '"decoding_smallbs": [20, 0.001, 0.05], "decoding_largebs": [18, 0.0005, 0.1]}}}')
    d = DistServeIterationModel(j, "facebook/opt-13b", 1)
    assert d.iteration_s(1000, 1, 1000, 0, 0, 0) == pytest.approx((20 + 100 + 10) / 1e3)
    assert d.iteration_s(10, 10, 0, 0, 10, 500) == pytest.approx((20 + 0.001 * 5000 + 0.5) / 1e3)
    k, last, end = d.decode_run(0.0, 1e9, 10, 500, 5, 500)
    assert k == 5 and end == pytest.approx(sum(d.decode_s(10, 10 * (500 + i)) for i in range(5)))


def test_phase_energy(const_model, tmp_path):
    from hpctwin.twin.serving.energy import PhasePower, instance_energy, read_splitwise_power
    i = inst(const_model, budget=16, seqs=4)
    simulate([req(0.0, 2, 3)], [i])  # 1 prefill iteration, 2 decode iterations of D each
    e = instance_energy(i, 10 * D, PhasePower(10.0, 100.0, 50.0))
    assert (e["prefill_s"], e["decode_s"], e["idle_s"]) == pytest.approx((D, 2 * D, 7 * D))
    assert e["energy_j"] == pytest.approx(100 * D + 50 * 2 * D + 10 * 7 * D)
    p = tmp_path / "constant.yaml"
    p.write_text("_target_: x\nidle_power:\n  a100-80gb: 63\nprompt_power:\n  a100-80gb: 400\n"
                 "token_power:\n  a100-80gb: 250\n")
    assert read_splitwise_power(p) == {"a100-80gb": PhasePower(63.0, 400.0, 250.0)}


def test_autoscaler_fixed_hand_computed(const_model):
    """Fixed policy of 2 from 1 instance: a second one is started at the first tick and serves after
    its cold start; GPU time is billed from the decision."""
    from hpctwin.twin.serving.autoscale import FixedPolicy, simulate_autoscaled
    trace = [req(float(t), 2, 2) for t in range(0, 40)]
    res, log = simulate_autoscaled(trace, lambda iid: inst(const_model, iid=iid), FixedPolicy(2), 1, 4,
                                   cold_start=5.0, interval_s=15.0)
    assert log.times[:2] == [15.0, 30.0]
    assert (log.active[0], log.starting[0]) == (1, 1) and log.active[1] == 2
    served = {r.instance for r in res.requests if r.arrival >= 20.0}
    assert served == {0, 1}
    assert all(r.instance == 0 for r in res.requests if r.arrival < 20.0)
    assert log.gpu_seconds == pytest.approx(res.makespan_s + (res.makespan_s - 15.0))


@pytest.mark.parametrize("policy", ["util", "tps"])
def test_autoscaler_bounds_and_conservation(const_model, policy):
    """Never below the minimum nor above the cluster; every request finishes with its tokens."""
    from hpctwin.twin.serving.autoscale import DecodeTPSPolicy, UtilizationPolicy, simulate_autoscaled
    rng = random.Random(5)
    trace = []
    t = 0.0
    while t < 400:
        rate = 20.0 if 150 < t < 250 else 1.0  # a burst
        t += rng.expovariate(rate)
        trace.append(req(t, rng.randint(1, 20), rng.randint(1, 30)))
    pol = UtilizationPolicy(0.6, window_s=60) if policy == "util" else DecodeTPSPolicy(100.0, window_s=60)
    res, log = simulate_autoscaled(trace, lambda iid: inst(const_model, blocks=64, bs=4, budget=64, seqs=16,
                                                               iid=iid), pol, 2, 6, cold_start=20.0,
                                   interval_s=15.0)
    tot = [a + s for a, s in zip(log.active, log.starting)]
    assert min(tot) >= 2 and max(tot) <= 6
    assert max(log.active) > 2  # the burst scaled the pool up
    assert log.active[-1] <= 3  # and it came back down
    assert all(r.generated == q.output_tokens for r, q in zip(res.requests, trace))
    assert sorted(r.uid for x in res.instances for r in x.finished) == list(range(len(trace)))
    assert 0 < log.busy_gpu_seconds <= log.gpu_seconds


def test_priority_classes_order_admission_and_preemption(const_model):
    """Priority policy: a class-0 request overtakes queued class-1 ones; preemption hits class 1 first."""
    a = ServingRequest(0.0, 2, 3, klass=1)
    b = ServingRequest(0.0, 2, 3, klass=1)
    c = ServingRequest(0.0, 2, 3, klass=0)
    i = Instance(0, const_model, BlockManager(100, 2), 1, 64, policy="priority")
    r = simulate([a, b, c], [i]).requests
    assert r[2].first == pytest.approx(D)          # class 0 first although it arrived last
    assert r[0].first == pytest.approx(4 * D)      # then FCFS within class 1
    assert r[1].first == pytest.approx(7 * D)
    # preemption: 3 blocks of 2 tokens; class-0 runner grows, the class-1 one is the victim
    i2 = Instance(0, const_model, BlockManager(3, 2), 4, 64, policy="priority")
    r2 = simulate([ServingRequest(0.0, 2, 3, klass=0), ServingRequest(0.0, 2, 3, klass=1)], [i2]).requests
    assert r2[1].preemptions == 1 and r2[0].preemptions == 0
    assert r2[0].last == pytest.approx(3 * D)
    with pytest.raises(ValueError, match="fcfs or priority"):
        Instance(0, const_model, BlockManager(3, 2), policy="edf")


def test_diurnal_trace_shape_and_seed():
    from hpctwin.datasets.serving_traces import diurnal_trace
    lengths = [req(0.0, 100, 10), req(0.0, 200, 20)]
    a = diurnal_trace(lengths, hours=24, mean_rate=0.5, peak_to_trough=3.0, peak_hour=14.0, seed=3)
    assert a == diurnal_trace(lengths, hours=24, mean_rate=0.5, peak_to_trough=3.0, peak_hour=14.0, seed=3)
    t = np.array([r.arrival_s for r in a]) / 3600
    assert abs(len(a) / (24 * 3600) - 0.5) < 0.02
    peak = np.sum((t > 12) & (t < 16))
    assert peak > 2.5 * np.sum((t > 0) & (t < 4))  # 3:1 day shape, trough at 2 am
    assert {(r.input_tokens, r.output_tokens) for r in a} == {(100, 10), (200, 20)}
    with pytest.raises(ServingTraceError, match="peak_to_trough must be >= 1"):
        diurnal_trace(lengths, peak_to_trough=0.5)


def test_serve_trace_mode_colocated_and_pd(tmp_path):
    """``hpctwin serve --trace``: an Azure trace on a colocated pool and on P/D pools."""
    import json

    from hpctwin.twin.cli import main
    data = tmp_path / "data"
    write_profile(data / "LLM-serving" / "LLMServingSim" / "perf" / "RTX4090" / "meta-llama" / "Llama-3.1-8B" /
                  "bf16" / "tp1")
    tr = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    tr.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"2023-11-16 18:15:{10 + k:02d}.0000000,{100 + k},{5 + k}\n" for k in range(6)))
    for extra in (["--instances", "2"], ["--prefill", "1", "--decode", "1"]):
        out = tmp_path / ("o" + "".join(extra))
        assert main(["serve", "--trace", str(tr), "--hardware", "RTX4090", "--data-dir", str(data), "--out", str(out),
                     "-q", *extra]) == 0
        rows = list(csv.DictReader(open(out / "requests.csv")))
        assert [int(r["output_tokens"]) for r in rows] == [5 + k for k in range(6)]
        s = json.load(open(out / "summary.json"))
        assert s["output_tokens"] == sum(5 + k for k in range(6))
    assert s["kv_transferred_bytes"] == sum(100 + k for k in range(6)) * 131072
    assert {i["role"] for i in s["instances"]} == {"prefill", "decode"}


def test_bundle_with_pd_instances(tmp_path):
    """A bundle whose config.json gives pd_type prefill/decode runs disaggregated."""
    import json

    from hpctwin.twin.serving.cli import run_bundle
    data = tmp_path / "data"
    root = data / "LLM-serving" / "LLMServingSim"
    write_profile(root / "perf" / "HW" / "meta-llama" / "Llama-3.1-8B" / "bf16" / "tp1")
    (root / "workloads").mkdir(parents=True)
    (root / "workloads" / "w.jsonl").write_text(
        "".join(f'{{"input_toks": {5 + k}, "output_toks": 3, "arrival_time_ns": {k * 10 ** 8}}}\n' for k in range(4)))
    b = tmp_path / "bundle"
    (b / "vllm").mkdir(parents=True)
    inst = {"model_name": "meta-llama/Llama-3.1-8B", "hardware": "HW", "npu_mem": {"mem_size": 24, "mem_util": 0.9},
            "tp_size": 1}
    (b / "config.json").write_text(json.dumps({"link_bw": 16, "link_latency": 1000, "nodes": [{"instances": [
        {**inst, "pd_type": "prefill"}, {**inst, "pd_type": "decode"}]}]}))
    (b / "vllm" / "meta.json").write_text(json.dumps({"dataset_path": "/elsewhere/workloads/w.jsonl"}))
    bundle, res = run_bundle(b, data)
    assert [r.prefill_instance for r in res.requests] == [0] * 4 and {r.instance for r in res.requests} == {1}
    assert res.extra["kv_transferred_bytes"] == sum(5 + k for k in range(4)) * 131072


def test_pd_autoscaler_holds_ratio_within_bounds(const_model):
    """HeteroScale on P/D pools: decode pool from decode TPS, prefill pool at the P/D ratio, total within
    [min, max]; every request finishes with its tokens."""
    from hpctwin.twin.serving.autoscale import DecodeTPSPolicy, RatioPolicy, simulate_autoscaled
    rng = random.Random(8)
    trace, t = [], 0.0
    while t < 300:
        t += rng.expovariate(15.0 if 100 < t < 200 else 1.0)
        trace.append(req(t, rng.randint(1, 20), rng.randint(2, 30)))
    mk = lambda iid: inst(const_model, blocks=64, bs=4, budget=64, seqs=16, iid=iid)  # noqa: E731
    res, log = simulate_autoscaled(trace, mk, RatioPolicy(DecodeTPSPolicy(100.0, window_s=45), 0.5), 2, 9,
                                   cold_start=10.0, make_decode=mk)
    tot = [a + s for a, s in zip(log.active, log.starting)]
    assert min(tot) >= 2 and max(tot) <= 9 and max(log.active) >= 4
    assert all(r.generated == q.output_tokens for r, q in zip(res.requests, trace))
    assert all(r.prefill_instance >= 0 for r in res.requests if r.output > 1)
    roles = {x.role for x in res.instances}
    assert roles == {"prefill", "decode"}
    n_p = sum(1 for x in res.instances if x.role == "prefill")
    n_d = sum(1 for x in res.instances if x.role == "decode")
    assert n_p <= n_d  # ratio 0.5: never more prefill than decode instances started


def test_mooncake_reader_and_prefix_hits(const_model, tmp_path):
    """Mooncake hash_ids name 512-token prompt blocks: a shared first block is a 512-token cache hit."""
    import gzip

    from hpctwin.datasets.serving_traces import read_mooncake, read_serving_trace
    p = tmp_path / "conversation_trace.jsonl.gz"
    p.write_bytes(gzip.compress(b'{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]}\n'
                                b'{"timestamp": 2000, "input_length": 1024, "output_length": 1, "hash_ids": [0, 2]}\n'))
    tr = read_mooncake(p)
    assert [(r.arrival_s, r.input_tokens, r.block_hashes) for r in tr] == [(0.0, 1024, (0, 1)), (2.0, 1024, (0, 2))]
    assert read_serving_trace(p) == tr
    i = Instance(0, const_model, BlockManager(200, 16, caching=True), 4, 2048)
    simulate(tr, [i])
    assert i.kv.hits_tokens == 512
    assert i.tokens_prefilled == 1024 + 512
    p.write_bytes(gzip.compress(b'{"timestamp": 0, "input_length": 10}\n'))
    with pytest.raises(ServingTraceError, match=r"conversation_trace.jsonl.gz:1: missing field 'output_length'"):
        read_mooncake(p)
