"""The serving instance engine (`twin.serving.engine`): one event loop for every serving mode, and the
plug-in tables of routers, autoscalers and P/D policies (`twin.serving.plugins`, issue 24 item 4).

* Hand-checked cases on a constant-time engine (every iteration 10 ms, 1 MB of KV per token, 1 GB/s
  KV link without latency: a 10-token prompt's KV crosses in 10 ms): the order of events at one
  instant, requests waiting for an instance, the P/D hand-off and a restart voiding its queued transfer.
* Same results as the five separate drivers the engine replaced: a linear-time engine (iteration time
  grows with batch tokens and context, so vectorised decode runs and their cut points matter) on
  random traces in every mode; the digests of the outcomes were computed with the drivers before the
  unification (commit 6f70bcb) and must not change.
* The module structure: no import cycle between the batch-coupled modules, the engine imports no
  topology code, the table kit imports nothing of hpctwin.
"""
from __future__ import annotations

import ast
import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

from hpctwin.datasets.serving_traces import ServingRequest
from hpctwin.twin.serving.instance import Instance
from hpctwin.twin.serving.kvcache import BlockManager
from hpctwin.twin.serving.models import ModelShape

from .serving_invariants import check_serving_result, outcome_bytes
from .serving_invariants import CONST_DT, ConstModel as _ConstModel

DT = CONST_DT     # s, every iteration of the constant engine
#: 2 (K, V) x 1 KV head x 250,000 head_dim x 1 layer x 2 bytes = 1,000,000 B of KV per token
MB_SHAPE = ModelShape("mb", "llama", num_layers=1, hidden=64, num_heads=1, num_kv_heads=1, head_dim=250_000,
                      intermediate=64, vocab=100)
SERVING = Path(__file__).resolve().parent.parent / "twin" / "serving"


class ConstModel(_ConstModel):
    """`serving_invariants.ConstModel` with the engine's micro-batch shape."""
    shape = MB_SHAPE


class LinearModel(ConstModel):
    """4 ms + 20 us per batch token + 0.1 us per token of context read (s): no two iterations alike."""

    def iteration_s(self, tokens, seqs, pc, kvp, nd, kvd, kvd_max=0, kvd_min=0) -> float:
        return 0.004 + 2e-5 * tokens + 1e-7 * (kvp + nd * kvd)

    def decode_run_s(self, nd, kvd0, steps, kvmax0=0):
        return np.array([self.iteration_s(nd, nd, 0, 0, nd, kvd0 + j) for j in range(steps)])


def const(iid: int) -> Instance:
    return Instance(iid, ConstModel(), BlockManager(10_000, 16), max_num_seqs=256, max_num_batched_tokens=2048)


def linear(iid: int, blocks: int = 400) -> Instance:
    """A small engine (``blocks`` KV blocks of 16 tokens, 256-token budget): chunked prefill, preemptions."""
    return Instance(iid, LinearModel(), BlockManager(blocks, 16), max_num_seqs=32, max_num_batched_tokens=256,
                    async_scheduling=iid % 2 == 1)


def trace(n: int, seed: int, span: float = 60.0, burst: tuple[int, float, float] = (0, 0.0, 0.0)
          ) -> list[ServingRequest]:
    """``n`` random requests over ``span`` s, plus ``burst`` = (count, from s, to s) more: prompts 5..600
    tokens, outputs 1..300."""
    rng = np.random.default_rng(seed)
    k, lo, hi = burst
    t = np.sort(np.concatenate([rng.uniform(0, span, n), rng.uniform(lo, hi, k)]))
    return [ServingRequest(float(a), int(p), int(o)) for a, p, o in
            zip(t, rng.integers(5, 600, n + k), rng.integers(1, 300, n + k))]


# ---------------------------------------------------------------------------------- the plug-in tables
def test_the_tables_list_their_entries_with_options_and_help():
    from hpctwin.twin.serving.policies import AUTOSCALERS, PD_POLICIES
    from hpctwin.twin.serving.routers import ROUTERS
    assert list(ROUTERS) == ["round_robin", "least_outstanding", "least_loaded", "kv_aware", "slo_aware",
                             "capacity_weighted"]
    assert list(AUTOSCALERS) == ["fixed", "utilization", "decode_tps"]
    assert list(PD_POLICIES) == ["fixed", "ratio", "per_pool", "capacity"]
    assert AUTOSCALERS.entry("decode_tps").options == ("tps_per_instance", "window_s")
    assert PD_POLICIES.entry("ratio").options == ("decode_policy", "ratio")
    lines = ROUTERS.help().splitlines()
    assert len(lines) == 6 and lines[2].startswith("least_loaded (no options): vLLM's DP balancer")


def test_a_table_builds_its_entries_and_refuses_unknown_names_and_options():
    from hpctwin.twin.serving.policies import AUTOSCALERS, PD_POLICIES, PoolView
    v = PoolView(now=0.0, interval_s=15.0, active=2, starting=0, busy_fraction=0.5, decode_tps=1000.0, waiting=0)
    assert AUTOSCALERS.make("decode_tps", tps_per_instance=300.0).desired(v) == 4      # ceil(1000 / 300)
    assert AUTOSCALERS.make("utilization", target=0.25).desired(v) == 4                # ceil(2 x 0.5 / 0.25)
    ratio = PD_POLICIES.make("ratio", decode_policy=AUTOSCALERS.make("fixed", instances=3), ratio=0.5)
    assert ratio.desired_pd(v, v) == (2, 3)                                            # ceil(3 x 0.5), 3
    with pytest.raises(ValueError, match=r"unknown autoscaler 'decode_tsp'; known: fixed, utilization, "
                                         r"decode_tps \(did you mean 'decode_tps'\?\)"):
        AUTOSCALERS.make("decode_tsp")
    with pytest.raises(ValueError, match=r"autoscaler 'fixed': unknown option 'target'; it takes: instances"):
        AUTOSCALERS.make("fixed", target=0.5)
    with pytest.raises(ValueError, match="'fixed' is already registered"):
        AUTOSCALERS.register("fixed", lambda: None)


def test_unknown_routers_are_refused_by_every_mode_with_a_suggestion():
    from hpctwin.twin.serving.batch import ServingBatchConfig
    from hpctwin.twin.serving.cluster import simulate
    from hpctwin.twin.serving.pd import simulate_pd
    with pytest.raises(ValueError, match=r"unknown router 'least_load'; known: .* \(did you mean 'least_loaded'"):
        simulate(trace(3, 0), [const(0)], router="least_load")
    with pytest.raises(ValueError, match=r"unknown router 'rr'"):
        simulate_pd(trace(3, 0), [const(0)], [const(1)], decode_router="rr")
    with pytest.raises(ValueError, match=r"serving.router = 'rr': known routers: round_robin"):
        ServingBatchConfig.from_options({"trace": "x", "router": "rr"})
    from hpctwin.twin.serving.autoscale import FixedPolicy, simulate_autoscaled
    with pytest.raises(ValueError, match=r"unknown router 'fastest'; known: round_robin"):
        simulate_autoscaled(trace(3, 0), const, FixedPolicy(1), 1, 1, cold_start=0.0, router="fastest")


def test_serving_policy_maps_to_the_pd_table():
    from hpctwin.twin.serving.batch import PD_FORM, POLICIES
    from hpctwin.twin.serving.policies import PD_POLICIES
    assert POLICIES == ("fixed", "utilization", "decode_tps")
    assert set(PD_FORM) == set(POLICIES) and set(PD_FORM.values()) == set(PD_POLICIES) - {"capacity"}


# ---------------------------------------------------------------------------------- the event loop by hand
def _engine(reqs, pd=False, **kw):
    from hpctwin.twin.serving.engine import KVLink, ServingEngine, make_requests
    return ServingEngine(make_requests(reqs), "least_loaded", pd=pd, kv=KVLink(1.0, 0.0), **kw)


def test_an_activation_precedes_an_arrival_at_the_same_instant():
    from hpctwin.twin.serving.engine import Member
    eng = _engine([ServingRequest(5.0, 10, 2)])
    k = eng.add(Member(const(0), "both", ready=5.0))
    eng.activate_at(k, 5.0)
    eng.advance(5.0)
    r = eng.reqs[0]
    assert eng.waiting == [] and r.instance == 0 and r.queued == 5.0
    eng.advance(math.inf)
    assert r.first == pytest.approx(5.0 + DT) and r.last == pytest.approx(5.0 + 2 * DT)


def test_a_request_before_any_instance_waits_at_the_router_until_one_serves():
    from hpctwin.twin.serving.engine import Member
    eng = _engine([ServingRequest(1.0, 10, 3)])
    k = eng.add(Member(const(0), "both", ready=4.0))
    eng.activate_at(k, 4.0)
    eng.advance(2.0)
    assert eng.waiting == [eng.reqs[0]]
    eng.advance(math.inf)
    r = eng.reqs[0]
    assert r.arrival == 1.0 and r.queued == 4.0 and r.first == pytest.approx(4.0 + DT)
    assert eng.members[k].routed == [r]


def test_a_controller_tick_comes_after_activations_and_before_arrivals_at_its_instant():
    from hpctwin.twin.serving.engine import Member
    eng = _engine([ServingRequest(15.0, 10, 2)])
    k = eng.add(Member(const(0), "both", ready=15.0))
    eng.activate_at(k, 15.0)
    seen = []
    eng.on_timer = lambda t: seen.append((t, eng.members[k].state, eng.ai))
    eng.timer_t = 15.0
    eng.advance(15.0)
    assert seen == [(15.0, "active", 0)] and eng.ai == 1 and eng.timer_t == math.inf


def test_pd_hand_off_ttft_then_transfer_then_decode():
    # 10-token prompt on the prefill instance [0, 0.01] (first token); 10 MB at 1 GB/s: [0.01, 0.02];
    # the decode instance admits it at 0.02: tokens at 0.03 and 0.04
    from hpctwin.twin.serving.engine import Member
    eng = _engine([ServingRequest(0.0, 10, 3)], pd=True)
    p = eng.add(Member(const(0), "prefill", state="active"))
    d = eng.add(Member(const(1), "decode", state="active"))
    eng.members[p].x.role, eng.members[d].x.role = "prefill", "decode"
    eng.advance(math.inf)
    r = eng.reqs[0]
    assert r.first == pytest.approx(0.01) and r.last == pytest.approx(0.04)
    assert (r.prefill_instance, r.instance) == (0, 1)
    st = eng.kv_stats
    assert st["transfers"] == 1 and st["bytes"] == 10_000_000 and st["transfer_s"] == [pytest.approx(0.01)]
    assert eng.members[d].routed == [r] and not eng.kv_busy()


def test_a_prompt_waits_for_a_decode_instance_and_its_transfer_starts_when_one_serves():
    from hpctwin.twin.serving.engine import Member
    eng = _engine([ServingRequest(0.0, 10, 3)], pd=True)
    p = eng.add(Member(const(0), "prefill", state="active"))
    d = eng.add(Member(const(1), "decode", ready=1.0))
    eng.members[p].x.role, eng.members[d].x.role = "prefill", "decode"
    eng.activate_at(d, 1.0)
    eng.advance(0.5)
    assert [w[0].uid for w in eng.waiting_d] == [0]
    eng.advance(math.inf)
    r = eng.reqs[0]
    assert r.first == pytest.approx(0.01) and r.last == pytest.approx(1.03)      # lands 1.01: 1.02, 1.03
    assert eng.kv_stats["waited_for_decode"] == 1 and eng.kv_stats["decode_wait_s"] == [pytest.approx(0.99)]


def test_a_restart_voids_the_queued_transfer_of_the_old_attempt():
    from hpctwin.twin.serving.engine import Member
    eng = _engine([ServingRequest(0.0, 10, 3)], pd=True)
    p = eng.add(Member(const(0), "prefill", state="active"))
    eng.members[p].x.role = "prefill"
    eng.advance(0.005)                      # the prompt runs [0, 0.01]: its hand-off is due at 0.01
    eng.collect()
    assert [e[1:3] for e in eng.kv_starts] == [(0, 0)]
    r = eng.reqs[0]
    eng.restart(r)
    assert eng.retries[0] == 1 and r.generated == 0 and r.prefill_instance == -1
    d = eng.add(Member(const(1), "decode", state="active"))
    eng.members[d].x.role = "decode"
    eng.advance(0.02)                        # the old start is skipped: nothing sent
    assert eng.kv_stats["transfers"] == 0 and eng.waiting_d == []


# ---------------------------------------------------------------------------------- same results as before
def _digest(res, extra=None) -> str:
    blob = outcome_bytes(res) + json.dumps(extra, sort_keys=True, default=repr).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _colocated(router: str):
    from hpctwin.twin.serving.cluster import simulate
    tr = trace(300, 1, 10.0)
    res = simulate(tr, [linear(k, 150) for k in range(3)], router=router)
    check_serving_result(res, trace=tr)
    return _digest(res, res.extra)


def _pd(flows: bool):
    from hpctwin.twin.serving.pd import simulate_pd
    tr = trace(200, 2, 10.0)
    pre, dec = [linear(0), linear(1)], [linear(2, 300), linear(3, 300)]
    net = None
    if flows:
        from hpctwin.topology.fattree import leaf_spine_graph
        from hpctwin.topology.routing import make_router
        from hpctwin.twin.serving.kvflow import KVNetwork
        G = leaf_spine_graph(4, hosts_per_leaf=2, spines=1, terminal_bandwidth=2e9, global_bandwidth=1e9,
                             terminal_latency=1e-4, global_latency=2e-4)
        net = KVNetwork(make_router(G), G, [(0, 1, 0), (1, 1, 1), (2, 1, 2), (3, 1, 1)], 1, 5e9, 1e-5, name="ls")
    res = simulate_pd(tr, pre, dec, link_GBps=2.0, latency_s=1e-4, kv_network=net)
    check_serving_result(res, trace=tr)
    return _digest(res, res.extra)


def _autoscaled(kind: str):
    from hpctwin.twin.serving.autoscale import DecodeTPSPolicy, RatioPolicy, UtilizationPolicy, simulate_autoscaled
    tr = trace(300, 3, 300.0, burst=(600, 100.0, 160.0))
    if kind == "pd":
        res, log = simulate_autoscaled(tr, linear, RatioPolicy(DecodeTPSPolicy(400.0, window_s=60.0), 0.5), 2, 6,
                                       cold_start=7.0, interval_s=10.0, make_decode=lambda i: linear(i, 800),
                                       link_GBps=2.0)
    else:
        pol = (UtilizationPolicy(0.5, window_s=60.0, metric="kv") if kind == "kv"
               else DecodeTPSPolicy(300.0, window_s=30.0))
        res, log = simulate_autoscaled(tr, linear, pol, 1, 5, cold_start=7.0, interval_s=10.0, initial=2)
    check_serving_result(res, trace=tr)
    return _digest(res, [log.times, log.active, log.starting, log.gpu_seconds, log.busy_gpu_seconds])


class Steps:
    """desired = ``counts[k]`` from time ``times[k]`` on (P/D: the same count for both pools)."""

    def __init__(self, times, counts):
        self.times, self.counts = times, counts

    def desired(self, v) -> int:
        return self.counts[max(int(np.searchsorted(self.times, v.now, side="right")) - 1, 0)]

    def desired_pd(self, vp, vd):
        return self.desired(vp), self.desired(vd)


def _batch(pd: bool, flows: bool = False):
    import pandas as pd_
    from hpctwin.schedulers.registry import make_scheduler
    from hpctwin.twin.contract import ModelContext
    from hpctwin.twin.failures import FailureConfig, FailureModel
    from hpctwin.twin.run import job_table, prepare
    from hpctwin.twin.serving.batch import ServingBatchConfig, ServingBatchModel
    from hpctwin.twin.serving.held import attach_held, trim_held
    from hpctwin.twin.simulation import Simulation
    from hpctwin.twin.workload import Workload, job_states
    rng = np.random.default_rng(7)
    rows = np.array([(float(t), int(rng.integers(1, 4)), float(rng.uniform(20, 300)), 300.0)
                     for t in np.sort(rng.uniform(0, 900, 25))])
    n = len(rows)
    ints = lambda v: np.full(n, v, dtype=np.int64)  # noqa: E731
    wl = Workload(name="t", job_id=np.arange(1, n + 1), submit=rows[:, 0], runtime=rows[:, 2],
                  requested_time=rows[:, 3], procs=rows[:, 1].astype(np.int64), user=ints(1), group=ints(-1),
                  queue=ints(-1), partition=ints(-1), status=ints(-1))
    reqs = trace(200, 8, 600.0, burst=(300, 200.0, 300.0))
    c = dict(trace="test", start_s=10.0, interval_s=15.0, startup_s=5.0, policy="fixed", instances=1,
             min_instances=1, max_instances=3, slots=60, lease_s=400.0, renew_s=100.0, kv_link_GBps=2.0,
             kv_latency_s=1e-4)
    pol = Steps([0, 200, 400, 600], [1, 3, 2, 3])
    if pd:
        c.update(mode="pd", prefill_max_instances=3, decode_max_instances=3)
    net = None
    if flows:
        from hpctwin.topology.fattree import leaf_spine_graph
        from hpctwin.topology.routing import make_router
        from hpctwin.twin.serving.batch_pd import DynamicKVNetwork
        G = leaf_spine_graph(8, hosts_per_leaf=2, spines=1, terminal_bandwidth=1e9, global_bandwidth=0.5e9,
                             terminal_latency=1e-3, global_latency=2e-3)
        net = DynamicKVNetwork(make_router(G), G, gpus_per_node=1, d2d_Bps=1e12, name="ls")
    if pd:
        from hpctwin.twin.serving.batch_pd import ServingBatchPDModel
        m = ServingBatchPDModel(ServingBatchConfig(**c), reqs, linear, lambda i: linear(i, 800), policy=pol,
                                kv_network=net)
    else:
        m = ServingBatchModel(ServingBatchConfig(**c), reqs, linear, policy=pol)
    fails = [(100.0, 0), (150.0, 1), (250.0, 2), (420.0, 3), (500.0, 4), (700.0, 5), (800.0, 6)]   # (s, node)
    fm = FailureModel(FailureConfig(events=fails, repair_s=40.0))
    prep = prepare(wl, 8, "test")
    prep, jobs, k = attach_held(prep, job_table(prep), [m])
    ctx = ModelContext(n_nodes=8, jobs=jobs, runtime=prep.workload.runtime, seed=1)
    res = Simulation(jobs, prep.workload.runtime, prep.kill_limit, make_scheduler("easy"), 8,
                     models=[fm, m], context=ctx, held_jobs=k).run()
    w = prep.workload
    df = pd_.DataFrame({"job_id": w.job_id, "submit": w.submit, "start": res.start, "end": res.end,
                        "state": job_states(res.failed, res.killed, res.start, res.cancelled), **m.job_columns()})
    df = trim_held(df, {}, w.submit, k)
    assert all(r.generated == r.output for r in m.reqs)       # (restarted ones may also finish on a lost one)
    tables = {name: t.to_csv(index=False) for name, t in m.tables().items()}
    return _digest(m, [df.to_csv(index=False), tables, m.summary()])


#: outcome digests of the drivers before the unification (commit 6f70bcb); a change means a changed result.
#: The three batch digests were renewed at 17ddd2d, whose only change to them is two keys added to the
#: serving summary (log_jobs, node_requests: the summary is part of the digest); every other byte is equal.
GOLDEN = {
    "colocated least_loaded": "3408c4ec1f01f3db",
    "colocated kv_aware": "0c70c6e4f0a96bf8",
    "colocated round_robin": "54a6d55f4182b6fb",
    "pd formula": "085edb22e3468a82",
    "pd flows": "04c187e00f2891f3",
    "autoscaled kv": "2eb1c4d8634a6c29",
    "autoscaled decode_tps": "6ad26199a941e58c",
    "autoscaled pd": "d5714a22832471db",
    "batch colocated": "f8a113e2676d97a8",
    "batch pd": "b255f658b5561e4b",
    "batch pd flows": "7242d92517a202ea",
}
CASES = {
    "colocated least_loaded": lambda: _colocated("least_loaded"),
    "colocated kv_aware": lambda: _colocated("kv_aware"),
    "colocated round_robin": lambda: _colocated("round_robin"),
    "pd formula": lambda: _pd(False),
    "pd flows": lambda: _pd(True),
    "autoscaled kv": lambda: _autoscaled("kv"),
    "autoscaled decode_tps": lambda: _autoscaled("tps"),
    "autoscaled pd": lambda: _autoscaled("pd"),
    "batch colocated": lambda: _batch(False),
    "batch pd": lambda: _batch(True),
    "batch pd flows": lambda: _batch(True, flows=True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_mode_gives_the_results_of_its_former_driver(case):
    assert CASES[case]() == GOLDEN[case]


# ---------------------------------------------------------------------------------- module structure
def _imports(name: str) -> set[str]:
    """Modules ``twin/serving/<name>.py`` imports (relative ones as ``.x``), function-level imports included."""
    out = set()
    for n in ast.walk(ast.parse((SERVING / f"{name}.py").read_text())):
        if isinstance(n, ast.ImportFrom):
            out.add("." * n.level + (n.module or ""))
        elif isinstance(n, ast.Import):
            out.update(a.name for a in n.names)
    return out


def test_the_batch_coupled_modules_import_each_other_one_way():
    assert ".batch" in _imports("batch_pd")
    assert not any("batch_pd" in m for m in _imports("batch"))


def test_the_engine_imports_no_driver_and_no_topology_code():
    imp = _imports("engine")
    assert not imp & {".cluster", ".pd", ".autoscale", ".batch", ".batch_pd", ".kvflow"}
    assert not any(m.startswith(("hpctwin.topology", "hpctwin.twin.")) for m in imp)


def test_the_table_kit_imports_only_the_foundation_schema_kit():
    # the serving tables sit on the general plug-in kit (issue 24 item 1), which imports only the foundation
    assert [m for m in _imports("plugins") if m.startswith((".", "hpctwin"))] == ["hpctwin.twin.plugins"]
