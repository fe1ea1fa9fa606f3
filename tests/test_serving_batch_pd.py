"""P/D (disaggregated prefill/decode) serving as node-request jobs of the batch scheduler
(`twin.serving.batch_pd`, ``serving.mode = "pd"``), and the decode side's KV blocks for a transfer in
flight (`pd.reserve_kv`, `pd.land_kv`).

Hand-checked cases use a constant-time engine (every iteration 10 ms) and a model shape of exactly 1 MB
of KV per token, with a 1 GB/s KV link and no latency: a 10-token prompt's KV crosses in 10 ms.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from hpctwin.datasets.serving_traces import ServingRequest
from hpctwin.schedulers.registry import make_scheduler
from hpctwin.twin.contract import ModelContext
from hpctwin.twin.run import job_table, prepare
from hpctwin.twin.serving.batch import ServingBatchConfig
from hpctwin.twin.serving.batch_pd import ServingBatchPDModel
from hpctwin.twin.serving.held import attach_held, trim_held
from hpctwin.twin.serving.instance import Instance, Req
from hpctwin.twin.serving.kvcache import BlockManager
from hpctwin.twin.serving.models import ModelShape
from hpctwin.twin.serving.pd import kv_transfer_s, land_kv, reserve_kv
from hpctwin.twin.simulation import Simulation
from hpctwin.twin.workload import job_states

from .test_serving_batch import DT, workload  # noqa: F401  (DT: every iteration, s; other tests import both)
from .test_serving_batch import ConstModel as BatchConstModel

#: 2 (K, V) x 1 KV head x 250,000 head_dim x 1 layer x 2 bytes = 1,000,000 B of KV per token
MB_SHAPE = ModelShape("mb", "llama", num_layers=1, hidden=64, num_heads=1, num_kv_heads=1, head_dim=250_000,
                      intermediate=64, vocab=100)


class ConstModel(BatchConstModel):
    """test_serving_batch's constant engine with a model shape of 1 MB of KV per token."""
    shape = MB_SHAPE


def make_const(iid: int) -> Instance:
    return Instance(iid, ConstModel(), BlockManager(10_000, 16), max_num_seqs=256, max_num_batched_tokens=2048)


def run_pd(rows, reqs, total=4, scheduler="easy", controller=None, models_before=(), kv_network=None, **cfg):
    import pandas as pd
    c = dict(trace="test", start_s=10.0, interval_s=15.0, startup_s=5.0, policy="fixed", mode="pd",
             prefill_instances=1, decode_instances=1, kv_link_GBps=1.0, kv_latency_s=0.0, slots=8)
    c.update(cfg)
    m = ServingBatchPDModel(ServingBatchConfig(**c), [ServingRequest(*r) for r in reqs], make_const, make_const,
                            policy=controller, kv_network=kv_network)
    prep = prepare(workload(rows), total, "test")
    prep, jobs, k = attach_held(prep, job_table(prep), [m])
    ctx = ModelContext(n_nodes=total, jobs=jobs, runtime=prep.workload.runtime, seed=1)
    res = Simulation(jobs, prep.workload.runtime, prep.kill_limit, make_scheduler(scheduler), total,
                     models=list(models_before) + [m], context=ctx, held_jobs=k).run()
    wl = prep.workload
    df = pd.DataFrame({"job_id": wl.job_id, "submit": wl.submit, "start": res.start, "end": res.end,
                       "procs": wl.procs, "state": job_states(res.failed, res.killed, res.start, res.cancelled),
                       "nodes": res.nodes, **m.job_columns()})
    return res, trim_held(df, {}, wl.submit, k), m


def test_ttft_is_prefill_done_and_the_second_token_follows_transfer_and_decode_admission():
    # tick at 10 submits one prefill and one decode request (1 node each); EASY starts both at 10; both
    # serve from 15 (5 s cold start). The request (trace 0 -> log 10) waits at the router until 15, its
    # 10-token prompt runs [15, 15.01] (first token), its 10 MB of KV cross at 1 GB/s: [15.01, 15.02];
    # the decode instance admits it at 15.02: tokens at 15.03 and 15.04.
    assert kv_transfer_s(MB_SHAPE, 10, 1, 1, 1.0, 0.0) == pytest.approx(0.01)
    res, df, m = run_pd([], [(0.0, 10, 3)])
    r = m.reqs[0]
    assert r.first == pytest.approx(15.01) and r.last == pytest.approx(15.04)
    assert r.first - r.arrival == pytest.approx(5.01)           # TTFT
    assert r.prefill_instance == 0 and r.instance == 1
    assert [i.pool for i in m.insts] == ["prefill", "decode"]
    s = df[df.kind == "serving"].sort_values("job_id")
    assert list(s.serving_pool) == ["prefill", "decode"] and list(s.start) == [10.0, 10.0]
    assert list(s.end) == [25.0, 25.0] and list(s.serving_end) == ["end", "end"]   # first tick once served
    k = m.summary()["serving"]["kv_transfer"]
    assert k["transfers"] == 1 and k["bytes"] == 10_000_000 and k["reservations_deferred"] == 0
    assert k["transfer_s_max"] == pytest.approx(0.01)
    inst = m.tables()["serving_instances.csv"]
    assert list(inst["pool"]) == ["prefill", "decode"]


def test_kv_as_a_flow_between_the_nodes_the_batch_scheduler_chose():
    # 4 hosts, one per leaf switch, one spine: host links 1 GB/s, leaf-spine 0.5 GB/s (the bottleneck),
    # 1 ms a host hop, 2 ms a spine hop. A 2-node batch job holds nodes 0-1 (0-100 s): the prefill job gets
    # node 2, the decode job node 3 (first fit). The 10 MB of KV leave at 15.01 and take 10 MB / 0.5 GB/s
    # = 20 ms plus the path latency 2 x 1 + 2 x 2 ms = 6 ms: usable at 15.036; tokens at 15.046, 15.056.
    from hpctwin.topology.fattree import leaf_spine_graph
    from hpctwin.topology.routing import make_router
    from hpctwin.twin.serving.batch_pd import DynamicKVNetwork
    G = leaf_spine_graph(4, hosts_per_leaf=1, spines=1, terminal_bandwidth=1e9, global_bandwidth=0.5e9,
                         terminal_latency=1e-3, global_latency=2e-3)
    net = DynamicKVNetwork(make_router(G), G, gpus_per_node=1, d2d_Bps=1e12, name="leaf-spine")
    res, df, m = run_pd([(0, 2, 100, 100)], [(0.0, 10, 3)], kv_network=net)
    r = m.reqs[0]
    assert net.node_of == {0: 2, 1: 3}
    assert r.first == pytest.approx(15.01) and r.last == pytest.approx(15.056)
    k = m.summary()["serving"]["kv_transfer"]
    assert k["transfers"] == 1 and k["transfer_s_max"] == pytest.approx(0.026) and "flows" in k["model"]


def test_decode_request_waiting_in_the_batch_queue_delays_the_second_token_not_the_first():
    # a 3-node batch job holds nodes 0-100 on a 4-node machine: the prefill request gets the free node at
    # 10, the decode request waits in the queue until 100 (ready 105). The prompt is done at 15.01 and
    # waits at the decode router; its KV crosses [105, 105.01]; tokens at 105.02 and 105.03.
    res, df, m = run_pd([(0, 3, 100, 100)], [(0.0, 10, 3)])
    r = m.reqs[0]
    assert r.first == pytest.approx(15.01) and r.last == pytest.approx(105.03)
    s = df[df.kind == "serving"].sort_values("job_id")
    assert list(s.start) == [10.0, 100.0]
    k = m.summary()["serving"]["kv_transfer"]
    assert k["waited_for_decode"] == 1 and k["decode_wait_s_max"] == pytest.approx(105.0 - 15.01)
    assert m.summary()["serving"]["scale_up_wait_s"]["max"] == 90.0


def test_conservation_bounds_and_ratio_under_decode_tps():
    rng = np.random.default_rng(5)
    rows = [(float(t), int(rng.integers(1, 4)), float(rng.uniform(20, 300)), 300.0)
            for t in np.sort(rng.uniform(0, 1500, 30))]
    reqs = [(float(t), int(rng.integers(5, 200)), int(rng.integers(1, 200))) for t in np.sort(rng.uniform(0, 1200, 400))]
    res, df, m = run_pd(rows, reqs, total=8, **dict(
        policy="decode_tps", tps_per_instance=40.0, pd_ratio=0.5, prefill_min_instances=1, prefill_max_instances=2,
        decode_min_instances=1, decode_max_instances=3, prefill_instances=1, decode_instances=2, slots=60))
    assert all(r.generated == r.output for r in m.reqs)
    assert sum(r.generated for r in m.reqs) == sum(q[2] for q in reqs)
    assert all(r.arrival <= r.first <= r.last for r in m.reqs)
    for name, hi in (("prefill", 2), ("decode", 3)):
        log = m.log_pools[name]
        assert log and all(a + st <= hi for a, st, _ in log)
        assert all(a + st + p >= 1 for a, st, p in log)
    # it did scale (the decode TPS signal), and every instance's job held its pool's nodes
    assert max(a for a, _, _ in m.log_pools["decode"]) >= 2
    ran = df[np.isfinite(df.start)]
    ev = sorted([(t, p) for t, p in zip(ran.start, ran.procs)] + [(t, -p) for t, p in zip(ran.end, ran.procs)],
                key=lambda e: (e[0], e[1]))
    assert np.cumsum([p for _, p in ev]).max() <= 8
    s = m.summary()["serving"]
    # one transfer a request with more than one token (a 1-token request ends at the prefill side)
    assert s["kv_transfer"]["transfers"] == sum(q[2] > 1 for q in reqs) and s["mode"] == "pd"
    assert s["pools"]["prefill"]["instances"] + s["pools"]["decode"]["instances"] == len(m.insts)
    assert (df[df.kind == "serving"].state.isin(["COMPLETED", "CANCELLED"])).all()


def test_scale_down_withdraws_a_queued_decode_request():
    # decode wanted 2 until 40, then 1: the second decode request waits behind a 3-node job (0-100) and is
    # withdrawn at the tick at 40 (CANCELLED, never starts); nothing else changes
    class Steps:
        def desired_pd(self, vp, vd):
            return 1, (2 if vp.now < 40 else 1)
    res, df, m = run_pd([(0, 2, 100, 100)], [(0.0, 10, 3)], controller=Steps(), decode_instances=2,
                        decode_max_instances=2)
    s = df[df.kind == "serving"].sort_values("job_id")
    assert list(s.serving_pool) == ["prefill", "decode", "decode"]
    assert list(s.state) == ["COMPLETED", "COMPLETED", "CANCELLED"]
    assert math.isnan(s.start.iloc[2]) and s.serving_end.iloc[2] == "withdrawn"
    assert m.counts["withdrawn"] == 1


def test_a_lost_decode_instance_sends_its_requests_back_to_prefill():
    from hpctwin.twin.failures import FailureConfig, FailureModel
    # prefill on node 0, decode on node 1 from 10 (ready 15); the request (log 10, 10-token prompt, 3000
    # tokens) decodes from 15.02. Node 1 fails at 30: the decode instance is lost, the request starts
    # over at the prefill instance ([30, 30.01], its first token again), the decode job is requeued at
    # the front and restarts at once on node 2 (ready 35); the KV crosses [35, 35.01]; the last token
    # is 2,999 iterations later, at 65.00
    fm = FailureModel(FailureConfig(events=[(30.0, 1)], repair_s=5.0))
    res, df, m = run_pd([], [(0.0, 10, 3000)], total=3, models_before=[fm])
    r = m.reqs[0]
    assert r.generated == 3000 and m.retries[0] == 1 and m.counts["instances_lost_failure"] == 1
    assert [(i.pool, i.t0) for i in m.insts] == [("prefill", 10.0), ("decode", 10.0), ("decode", 30.0)]
    assert r.first == pytest.approx(30.01) and r.last == pytest.approx(35.01 + 2999 * DT)
    assert r.instance == 2 and m.summary()["serving"]["kv_transfer"]["transfers"] == 2


def test_decode_sets_kv_blocks_aside_while_the_transfer_is_in_flight():
    d = Instance(1, ConstModel(), BlockManager(10, 4), max_num_seqs=8, max_num_batched_tokens=64)
    d.role = "decode"
    r = Req(7, 0.0, 10, 3)
    r.computed, r.num_tokens, r.generated = 10, 11, 1       # prompt done at the prefill side
    d.expect_transfer()
    assert reserve_kv(d, r) and d.kv.free == 10 - 3          # ceil(10 / 4) blocks set aside
    land_kv(d, r, 1.0)
    assert d.kv.free == 10 and d.inbound == 0 and list(d.waiting) == [r]
    d.advance_until(1.0 + 5 * DT)
    assert r.generated == 3 and r.last == pytest.approx(1.0 + 2 * DT) and d.kv.free == 10
    # not enough free blocks: nothing set aside (allocated at admission instead)
    big = Req(8, 0.0, 60, 2)
    big.computed = 60
    assert not reserve_kv(d, big) and d.kv.free == 10


def test_an_instance_whose_blocks_are_set_aside_idles_until_the_landing():
    # 4 blocks of 4 tokens: a transfer in flight holds 3; a waiting 8-token prompt (2 blocks) cannot be
    # admitted, so the instance idles (no error) until the landing frees them
    d = Instance(1, ConstModel(), BlockManager(4, 4), max_num_seqs=8, max_num_batched_tokens=64)
    d.role = "decode"
    r = Req(1, 0.0, 12, 2)
    r.computed, r.num_tokens, r.generated = 12, 13, 1
    d.expect_transfer()
    assert reserve_kv(d, r) and d.kv.free == 1
    w = Req(2, 0.0, 8, 2)
    d.add(w, 0.0)
    d.advance_until(0.5)
    assert d.t == 0.5 and w.generated == 0                   # idle: blocked by the set-aside blocks
    land_kv(d, r, 0.5)
    d.advance_until(2.0)
    assert w.generated == 2 and r.generated == 2


def test_bad_pd_options_are_clear_errors():
    with pytest.raises(ValueError, match="serving.decode_instances"):
        ServingBatchConfig.from_options({"trace": "x", "mode": "pd", "decode_instances": 5, "decode_max_instances": 4})
    with pytest.raises(ValueError, match="serving.mode"):
        ServingBatchConfig.from_options({"trace": "x", "mode": "split"})


def test_pd_end_to_end_through_the_run(tmp_path):
    """``hpctwin run`` with ``serving.mode = pd`` (LLMServingSim RTX PRO 6000 profile, Azure conversation
    trace): every request served once, tokens conserved, both pools' node requests in jobs.csv, the
    instance table has the pool column, the job accounting balances, same bytes twice."""
    from pathlib import Path

    from hpctwin.datasets.registry import default_data_dir
    from hpctwin.twin.run import RunConfig, run
    d = default_data_dir(None)
    trace = Path(d) / "LLM-serving" / "Azure-LLM-2023" / "AzureLLMInferenceTrace_conv.csv" if d else None
    if trace is None or not trace.exists():
        pytest.skip("no Azure trace in the data directory")
    s = dict(trace=str(trace), max_requests=300, time_scale=2.0, mode="pd", policy="decode_tps",
             tps_per_instance=300.0, pd_ratio=0.5, prefill_max_instances=2, decode_max_instances=3,
             decode_instances=2, prefill_instances=1)
    import pandas as pd
    outs = []
    for k in range(2):
        res = run(RunConfig(workload="synthetic:jobs=60", nodes=16, scheduler="easy", seed=2,
                            out=str(tmp_path / f"r{k}"), options={"serving": s}))
        outs.append([(tmp_path / f"r{k}" / f).read_bytes() for f in ("jobs.csv", "serving_requests.csv",
                                                                     "serving_instances.csv")])
    assert outs[0] == outs[1]
    req = pd.read_csv(tmp_path / "r0" / "serving_requests.csv")
    inst = pd.read_csv(tmp_path / "r0" / "serving_instances.csv")
    jobs = pd.read_csv(tmp_path / "r0" / "jobs.csv")
    sv = res.summary["serving"]
    assert len(req) == 300 and sv["output_tokens"] == int(req.output_tokens.sum())
    assert (req.first_token_s >= req.arrival_s).all() and (req.last_token_s >= req.first_token_s).all()
    assert set(inst["pool"]) == {"prefill", "decode"} and set(jobs.serving_pool.dropna()) >= {"prefill", "decode"}
    assert sv["kv_transfer"]["transfers"] == int((req.output_tokens > 1).sum())
    assert res.summary["accounting"]["balanced"]


@pytest.mark.parametrize("seed", [2, 3])
def test_conservation_under_node_failures_and_kv_flows(seed):
    """Random batch mix, 12 node failures (regimes requeue / fast_recovery / fail), leases renewed, KV as
    flows (odd seed): every request finishes once with all its tokens, and instances were lost."""
    from hpctwin.topology.fattree import leaf_spine_graph
    from hpctwin.topology.routing import make_router
    from hpctwin.twin.failures import FailureConfig, FailureModel
    from hpctwin.twin.serving.batch_pd import DynamicKVNetwork
    rng = np.random.default_rng(seed)
    rows = [(float(t), int(rng.integers(1, 4)), float(rng.uniform(20, 300)), 300.0)
            for t in np.sort(rng.uniform(0, 1500, 30))]
    reqs = [(float(t), int(rng.integers(5, 200)), int(rng.integers(1, 400))) for t in np.sort(rng.uniform(0, 1200, 300))]
    ev = sorted((float(t), int(n)) for t, n in zip(rng.uniform(20, 1400, 12), rng.integers(0, 8, 12)))
    fm = FailureModel(FailureConfig(events=ev, repair_s=40.0, regimes={"default": ["requeue", "fast_recovery",
                                                                                     "fail"][seed % 3]}))
    net = None
    if seed % 2:
        G = leaf_spine_graph(8, hosts_per_leaf=2, spines=1, terminal_bandwidth=1e9, global_bandwidth=0.5e9,
                             terminal_latency=1e-3, global_latency=2e-3)
        net = DynamicKVNetwork(make_router(G), G, gpus_per_node=1, d2d_Bps=1e12, name="ls")
    res, df, m = run_pd(rows, reqs, total=8, models_before=[fm], kv_network=net, policy="decode_tps",
                        tps_per_instance=40.0, pd_ratio=0.5, prefill_max_instances=2, decode_max_instances=3,
                        decode_instances=2, slots=80, lease_s=600.0, renew_s=120.0)
    assert m.counts["instances_lost_failure"] >= 3
    assert all(r.generated == r.output for r in m.reqs)
    assert sum(r.generated for r in m.reqs) == sum(q[2] for q in reqs)
    assert all(r.arrival <= r.first <= r.last for r in m.reqs)


def test_every_serving_config_key_is_accepted_by_set():
    """`--set serving.KEY=...` and `[options.serving]` accept every `ServingBatchConfig` field (the
    P/D keys were missing from the option schema, so `serving.mode=pd` was refused on the command line)."""
    from dataclasses import fields  # noqa: PLC0415
    from hpctwin.twin.options import set_schema  # noqa: PLC0415
    from hpctwin.twin.serving.batch import ServingBatchConfig  # noqa: PLC0415
    schema = set_schema("serving", "easy")
    assert set(schema) == {f.name for f in fields(ServingBatchConfig)}
    assert schema["mode"].choices == ("colocated", "pd")
