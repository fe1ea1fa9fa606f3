"""Multi-SLO serving in every mode (issue 28 items 1, 2, 5, 7; issue 24's serving tables): the scheduling
policy, SLO classes, admission control and the ``slo_aware`` router wired into P/D, autoscaled and
batch-coupled deployments; per-class figures in summaries and printouts; the serving plug-in tables on
the general kit (`twin.plugins.OptionTable`); a single-pool autoscaler on P/D pools; and the serving
conformance checks for every policy in every mode.

Hand-checked cases use stub latency models (a fixed time per token) so every figure can be worked out.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from hpctwin.datasets.serving_traces import ServingRequest
from hpctwin.twin.plugins import OptionTable, RunConfigError
from hpctwin.twin.serving import BlockManager, Instance
from hpctwin.twin.serving.autoscale import simulate_autoscaled
from hpctwin.twin.serving.cluster import simulate
from hpctwin.twin.serving.models import ModelShape
from hpctwin.twin.serving.pd import simulate_pd
from hpctwin.twin.serving.policies import (AUTOSCALERS, PD_POLICIES, FixedPD, FixedPolicy, PerPoolPD, PoolView,
                                           RatioPolicy, UtilizationPolicy, as_pd_policy, as_pool_policy)
from hpctwin.twin.serving.routers import ROUTERS
from hpctwin.twin.serving.scheduling import SCHEDULING, SLOSetup, class_rows
from hpctwin.twin.serving.slo import (DEFAULT_CLASSES, SLOClass, assign_classes, attainment_by_class, class_report,
                                      parse_classes, predicted_tpot)

from .serving_invariants import check_deterministic, check_serving_result, outcome_bytes

#: 2 (K, V) x 1 KV head x 500 head_dim x 1 layer x 2 bytes = 2,000 B of KV per token (a transfer is ~free)
SMALL = ModelShape("small", "llama", num_layers=1, hidden=64, num_heads=1, num_kv_heads=1, head_dim=500,
                   intermediate=64, vocab=100)


class PerToken:
    """A stub latency model: an iteration takes ``per_token`` seconds per token (default 0.1 ms)."""
    tp = 1
    shape = SMALL

    def __init__(self, per_token: float = 1e-4) -> None:
        self.k = per_token

    def iteration_s(self, tokens, seqs, pc, kvp, nd, kvd, kvd_max=0, kvd_min=0):
        return self.k * tokens

    def decode_run(self, t0, t_limit, nd, kvd0, steps, kvmax0):
        return None

    def decode_run_s(self, nd, kvd0, steps, kvmax0=0):
        return np.full(steps, self.k * nd)


def make(iid: int, blocks: int = 2000, per_token: float = 1e-4, seqs: int = 256) -> Instance:
    return Instance(iid, PerToken(per_token), BlockManager(blocks, 16), max_num_seqs=seqs, max_num_batched_tokens=2048)


def random_trace(n=120, seed=3, gap=0.01, most_out=120):
    rng = np.random.default_rng(seed)
    reqs = [ServingRequest(float(t), int(p), int(o)) for t, p, o in
            zip(np.cumsum(rng.exponential(gap, n)), rng.integers(20, 1500, n), rng.integers(2, most_out, n))]
    return assign_classes(reqs, seed=seed)


# ---------------------------------------------------------------------------------- the tables on the kit
def test_every_serving_table_is_a_kit_table_with_options_from_its_dataclass():
    for table in (ROUTERS, AUTOSCALERS, PD_POLICIES, SCHEDULING):
        assert isinstance(table, OptionTable)
    assert list(SCHEDULING) == ["fcfs", "priority", "slack"]
    assert SCHEDULING.entry("slack").options == ("admission", "min_chunk")
    assert SCHEDULING.option_help("slack")[1] == ("min_chunk = 512 (tokens; >= 1 and <= 100000): fewest prompt "
                                                  "tokens an iteration carries past its decodes when decodes are due")
    assert AUTOSCALERS.option_help("decode_tps")[0].endswith("(tokens/s; > 0): decode tokens/s one instance sustains")
    assert {e.name: e.tag("pd_form") for e in AUTOSCALERS.entries()} == {"fixed": "fixed", "decode_tps": "ratio",
                                                                         "utilization": "per_pool"}
    assert ROUTERS.entry("slo_aware").tag("classes") and not ROUTERS.entry("least_loaded").tag("classes")
    # text forms (command line, --set, TOML) typed by the dataclass, defaults filled in
    assert SCHEDULING.from_text("slack:admission=shed", "x") == ("slack", {"admission": "shed", "min_chunk": 512})
    assert AUTOSCALERS.from_text("utilization:target=0.5", "x")[1] == {"target": 0.5, "window_s": 300.0,
                                                                        "metric": "busy"}
    for text, msg in (("slak", r"x: unknown scheduling policy 'slak'; known: fcfs, priority, slack \(did you mean "
                               r"'slack'\?\)"),
                      ("slack:admision=shed", r"x: scheduling policy 'slack': unknown option 'admision' \(did you "
                                              r"mean 'admission'\?\); it takes: admission, min_chunk"),
                      ("slack:admission=drop", r"x: slack.admission: 'drop' is not one of none, defer, shed"),
                      ("slack:min_chunk=1.5", r"x: slack.min_chunk: expected an integer, got '1.5'"),
                      ("slack:admission", r"x: 'admission' in 'slack:admission' is not KEY=VALUE"),
                      ("fcfs:admission=none", r"x: scheduling policy 'fcfs': unknown option 'admission'; it takes: "
                                              r"no options")):
        with pytest.raises(RunConfigError, match=msg):
            SCHEDULING.from_text(text, "x")
    with pytest.raises(ValueError, match=r"autoscaler 'utilization': target: 1.5 must be <= 1"):
        AUTOSCALERS.make("utilization", target=1.5)
    with pytest.raises(ValueError, match=r"autoscaler 'decode_tps': option 'tps_per_instance' is needed"):
        AUTOSCALERS.make("decode_tps")


def test_a_new_router_is_one_entry_and_every_mode_takes_it():
    calls = []

    def _last():
        def pick(instances, r):
            calls.append(r.uid)
            return instances[-1]
        return pick
    ROUTERS.register("last", _last, help="the last instance (a test router)")
    try:
        trace = [ServingRequest(0.1 * i, 50, 3) for i in range(4)]
        res = simulate(trace, [make(0), make(1)], router="last")
        assert {r.instance for r in res.requests} == {1} and calls == [0, 1, 2, 3]
        res = simulate_pd(trace, [make(0), make(1)], [make(2), make(3)], "last", "last")
        assert {r.prefill_instance for r in res.requests} == {1} and {r.instance for r in res.requests} == {3}
        assert "last (no options): the last instance" in ROUTERS.help()
    finally:
        ROUTERS.unregister("last")
    assert "last" not in ROUTERS


# ---------------------------------------------------------------------------------- item 4: any policy on P/D
def test_a_single_pool_autoscaler_on_pd_pools_takes_its_pd_form():
    v = PoolView(now=0.0, interval_s=15.0, active=2, starting=0, busy_fraction=0.5, decode_tps=1000.0, waiting=0)
    assert isinstance(as_pd_policy(FixedPolicy(3)), FixedPD) and as_pd_policy(FixedPolicy(3)).desired_pd(v, v) == (3, 3)
    r = as_pd_policy(AUTOSCALERS.make("decode_tps", tps_per_instance=300.0))
    assert isinstance(r, RatioPolicy) and r.desired_pd(v, v) == (4, 4)          # ceil(1000 / 300), ratio 1
    u = as_pd_policy(UtilizationPolicy(0.25))
    assert isinstance(u, PerPoolPD) and u.p is not u.d                           # independent state per pool
    fixed_pd = FixedPD(1, 2)
    assert as_pd_policy(fixed_pd) is fixed_pd
    with pytest.raises(ValueError, match=r"P/D policy: a object has neither desired_pd\(prefill view, decode view\) "
                                         r"nor desired\(view\); give a P/D policy \(fixed, ratio, per_pool, capacity\)"):
        as_pd_policy(object())
    with pytest.raises(ValueError, match=r"autoscaler: a FixedPD sizes prefill and decode pools \(desired_pd\); a "
                                         r"colocated pool needs a single-pool autoscaler"):
        as_pool_policy(fixed_pd)


def test_fixed_policy_drives_the_pd_autoscaler():
    """Issue 28: passing FixedPolicy to the P/D autoscaler raised AttributeError. Now 2 prefill + 2 decode."""
    trace = [ServingRequest(0.5 * i, 200, 20) for i in range(40)]
    res, log = simulate_autoscaled(trace, make, FixedPolicy(2), 2, 8, cold_start=0.0, interval_s=5.0,
                                   initial=2, make_decode=make)
    check_serving_result(res, trace=trace)
    assert [x.role for x in res.instances] == ["prefill", "prefill", "decode", "decode"]
    assert max(log.active) == 4
    with pytest.raises(ValueError, match="a colocated pool needs a single-pool autoscaler"):
        simulate_autoscaled(trace, make, FixedPD(1, 1), 1, 4, cold_start=0.0)


# ---------------------------------------------------------------------------------- P/D: slack beats fcfs
def burst_trace():
    """20 relaxed 2000-token prompts at t = 0 (4 s of prefill at 0.1 ms a token), then 5 tight 100-token
    prompts at 0.5-0.9 s: FCFS serves the tight ones after the burst (TTFT ~3.6 s > 1 s)."""
    relaxed = [ServingRequest(0.001 * i, 2000, 8, klass=2) for i in range(20)]
    tight = [ServingRequest(0.5 + 0.1 * i, 100, 8, klass=0) for i in range(5)]
    return relaxed + tight


def run_pd(trace, scheduling, router="least_loaded", **kw):
    slo = SLOSetup.from_text(scheduling, "default").with_router(router)
    return simulate_pd(trace, [make(0)], [make(1)], router, router, slo=slo, **kw)


def test_slack_beats_fcfs_on_the_tight_class_in_pd_mode_at_equal_gpus():
    trace = burst_trace()
    got = {}
    for sched in ("fcfs", "slack"):
        res = run_pd(trace, sched)
        check_serving_result(res, trace=trace)
        got[sched] = res.extra["slo_classes"]["classes"]
    assert got["fcfs"]["tight"]["attainment"] == 0.0 and got["fcfs"]["tight"]["ttft"]["median"] > 3.0
    assert got["slack"]["tight"]["attainment"] == 1.0 and got["slack"]["tight"]["ttft"]["p99"] < 1.0
    assert got["slack"]["relaxed"]["attainment"] == got["fcfs"]["relaxed"]["attainment"] == 1.0
    assert got["slack"]["relaxed"]["met"] + got["slack"]["tight"]["met"] >= \
        got["fcfs"]["relaxed"]["met"] + got["fcfs"]["tight"]["met"]                      # goodput not lower
    assert res.extra["slo_classes"]["scheduling"] == "slack"


def test_decode_pool_orders_by_tpot_slack():
    """One decode instance with 2 sequence slots: 2 relaxed requests decode 200 tokens each; 2 tight and 2
    relaxed requests land meanwhile. FCFS admits the waiting ones in order of landing; slack admits the
    tight ones first (their next-token deadline is first + 80 ms, the relaxed ones' first + 300 ms)."""
    long = [ServingRequest(0.0, 16, 200, klass=2), ServingRequest(0.0, 16, 200, klass=2)]
    late = [ServingRequest(0.01, 16, 20, klass=2), ServingRequest(0.011, 16, 20, klass=2),
            ServingRequest(0.012, 16, 20, klass=0), ServingRequest(0.013, 16, 20, klass=0)]
    trace = long + late
    order = {}
    for sched in ("fcfs", "slack"):
        slo = SLOSetup.from_text(sched, "default")
        res = simulate_pd(trace, [make(0, per_token=1e-3)], [make(1, per_token=1e-3, seqs=2)], slo=slo)
        check_serving_result(res, trace=trace)
        order[sched] = sorted(range(2, 6), key=lambda i: res.requests[i].last)
    assert order["fcfs"] == [2, 3, 4, 5]
    assert order["slack"][:2] == [4, 5]


def test_slo_aware_router_in_the_decode_pool_predicts_tpot():
    busy, idle = make(0, per_token=1e-3), make(1, per_token=1e-3)
    busy.role = idle.role = "decode"
    from hpctwin.twin.serving.instance import Req
    for k in range(3):
        q = Req(10 + k, 0.0, 32, 100)
        q.computed, q.num_tokens, q.generated, q.first = 33, 33, 1, 0.0
        busy.running.append(q)
        busy.kv.allocate(q.uid, 33)
    r = Req(0, 0.0, 32, 11)
    r.computed, r.num_tokens, r.generated, r.first = 32, 33, 1, 0.0
    # one decode iteration of 3 + 1 sequences at 1 ms a token: 4 ms; an idle instance: 1 ms
    assert predicted_tpot(busy, r) == pytest.approx(0.004)
    assert predicted_tpot(idle, r) == pytest.approx(0.001)
    assert ROUTERS["slo_aware"]()([busy, idle], r) is idle
    # no KV room on `busy` (3 x 3 blocks held of 9): wait for its shortest remaining decode (99 tokens at 3 ms)
    small = Instance(2, PerToken(1e-3), BlockManager(9, 16))
    small.role = "decode"
    small.running.extend(busy.running)
    for q in busy.running:
        small.kv.allocate(q.uid, 33)
    assert predicted_tpot(small, r) == pytest.approx(0.004 + 99 * 0.003 / 10)


# ---------------------------------------------------------------------------------- per-class figures
def test_per_class_figures_sum_to_the_totals_and_match_attainment_by_class():
    trace = random_trace(150)
    xs = [make(k, blocks=300, per_token=1e-3) for k in range(2)]        # overloaded: some are shed
    slo = SLOSetup.from_text("slack:admission=shed", "default")
    slo.configure(xs)
    res = simulate(slo.classify(trace), xs, router="slo_aware")
    rep = class_report(res.requests, DEFAULT_CLASSES, window_s=10.0)
    ok = attainment_by_class(res.requests, DEFAULT_CLASSES)
    assert list(rep) == ["tight", "standard", "relaxed"]
    assert sum(c["requests"] for c in rep.values()) == len(trace)
    assert sum(c["shed"] for c in rep.values()) == sum(r.shed for r in res.requests) > 0
    assert [c["met"] for c in rep.values()] == [int(ok[k].sum()) for k in range(3)]
    assert [c["attainment"] for c in rep.values()] == pytest.approx([float(ok[k].mean()) for k in range(3)])
    assert [c["goodput_rps"] for c in rep.values()] == pytest.approx([c["met"] / 10.0 for c in rep.values()])
    served = [r for r in res.requests if r.klass == 0 and not r.shed]
    assert rep["tight"]["ttft"]["p99"] == pytest.approx(float(np.percentile([r.first - r.arrival for r in served], 99)))
    rows = class_rows(slo.report(res.requests)["slo_classes"])
    assert rows[0] == ("SLO classes", "scheduling slack: admission=shed, min_chunk=512")
    assert rows[1][0] == "  tight" and f"{rep['tight']['requests']:,} requests, attainment " in rows[1][1]


def test_classes_from_text_and_when_they_are_on():
    assert parse_classes("default") == DEFAULT_CLASSES
    assert parse_classes("a:0.5:0.05:0.25,b:5:0.5:0.75") == (SLOClass("a", 0.5, 0.05, 0.25), SLOClass("b", 5, 0.5, 0.75))
    with pytest.raises(ValueError, match=r"--slo-classes: class 1 'b:5': expected NAME:TTFT_S:TPOT_S:SHARE"):
        parse_classes("a:1:0.1:1,b:5")
    with pytest.raises(ValueError, match=r"--slo-classes: SLO class 0 \('a'\): tpot_s must be a positive number"):
        parse_classes("a:1:0:1")
    assert SLOSetup().default and SLOSetup().report([]) == {}
    assert SLOSetup.from_text("fcfs").classes is None                       # nothing reads classes
    assert SLOSetup.from_text("priority").classes == DEFAULT_CLASSES        # the policy reads them
    assert SLOSetup.from_text("fcfs").with_router("slo_aware").classes == DEFAULT_CLASSES
    assert SLOSetup.from_text("fcfs", "a:1:0.1:1").classes == (SLOClass("a", 1, 0.1, 1.0),)


def test_the_default_setup_leaves_instances_and_trace_alone():
    trace = random_trace(60)
    plain = [ServingRequest(r.arrival_s, r.input_tokens, r.output_tokens) for r in trace]
    a = simulate_pd(plain, [make(0)], [make(1)])
    b = simulate_pd(plain, [make(0)], [make(1)], slo=SLOSetup())
    assert outcome_bytes(a) == outcome_bytes(b) and "slo_classes" not in b.extra
    # fcfs with classes only reports: same schedule, per-class figures added
    c = simulate_pd(trace, [make(0)], [make(1)], slo=SLOSetup.from_text("fcfs", "default"))
    assert outcome_bytes(a) == outcome_bytes(c) and set(c.extra["slo_classes"]["classes"]) == {"tight", "standard",
                                                                                                 "relaxed"}


# ---------------------------------------------------------------------------------- conformance, every mode
def check_finished_or_reported(res, trace) -> None:
    """The serving invariants, with requests shed by admission control reported instead of served: each
    request either finished on exactly one instance (and keeps every invariant of `check_serving_result`)
    or is shed (no token, listed by exactly one instance); tokens conserved; KV within capacity."""
    if hasattr(res, "requests"):
        reqs, insts = list(res.requests), list(res.instances)
    else:
        reqs, insts = list(res.reqs), [i.x for i in res.insts]
    if not any(r.shed for r in reqs):
        check_serving_result(res, trace=trace)
        return
    assert [r.uid for r in reqs] == list(range(len(trace)))
    done = sorted(r.uid for x in insts for r in x.finished)
    shed = sorted(r.uid for x in insts for r in x.shed)
    assert sorted(done + shed) == list(range(len(trace))), "a request neither finished nor reported"
    for r, s in zip(reqs, trace):
        assert r.prompt == s.input_tokens and r.output == s.output_tokens
        if r.shed:
            assert r.generated == 0 and math.isnan(r.first)
        else:
            assert r.generated == r.output and r.arrival <= r.queued <= r.first <= r.last
    for x in insts:
        assert 0 <= x.kv.used <= x.kv.num_blocks


POLICIES = ["fcfs", "priority", "slack", "slack:admission=defer", "slack:admission=shed"]
ROUTER_OF = {"fcfs": "least_loaded", "priority": "round_robin", "slack": "slo_aware",
             "slack:admission=defer": "slo_aware", "slack:admission=shed": "kv_aware"}


def _colocated(sched, trace):
    slo = SLOSetup.from_text(sched, "default")
    xs = [make(k, blocks=200) for k in range(2)]
    slo.configure(xs)
    return simulate(slo.classify(trace), xs, router=ROUTER_OF[sched])


def _pd(sched, trace):
    slo = SLOSetup.from_text(sched, "default")
    return simulate_pd(trace, [make(0, blocks=200)], [make(1, blocks=200), make(2, blocks=200)],
                       ROUTER_OF[sched], "slo_aware", slo=slo)


def _autoscaled(sched, trace, pd=False):
    slo = SLOSetup.from_text(sched, "default")
    f = slo.factory(lambda iid: make(iid, blocks=200))
    res, _ = simulate_autoscaled(slo.classify(trace), f, UtilizationPolicy(0.5, window_s=5.0), 2 if pd else 1, 4,
                                 cold_start=0.5, interval_s=0.5, router=ROUTER_OF[sched],
                                 make_decode=f if pd else None)
    return res


def _batch(sched, trace, pd=False):
    from .test_serving_batch import run_case
    from .test_serving_batch_pd import run_pd as run_batch_pd
    reqs = [(r.arrival_s, r.input_tokens, r.output_tokens, None, None, r.klass) for r in trace]
    kw = dict(scheduling=sched, slo_classes="default", router=ROUTER_OF[sched])
    if pd:
        _, _, m = run_batch_pd([(0, 2, 50, 50)], reqs, decode_router="slo_aware", **kw)
    else:
        _, _, m = run_case([(0, 2, 50, 50)], reqs, policy=None, instances=2, **kw)
    return m


MODES = {"colocated": _colocated, "pd": _pd, "autoscaled": _autoscaled,
         "autoscaled_pd": lambda s, t: _autoscaled(s, t, pd=True), "batch": _batch,
         "batch_pd": lambda s, t: _batch(s, t, pd=True)}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("sched", POLICIES)
def test_every_policy_keeps_the_serving_invariants_in_every_mode(mode, sched):
    trace = random_trace(80, seed=5, gap=0.004, most_out=60)
    run = MODES[mode]
    res = run(sched, trace)
    check_finished_or_reported(res, [s for s in SLOSetup.from_text(sched, "default").classify(trace)])
    if sched != "fcfs":
        assert any(x.slack is not None or x.priority for x in (res.instances if hasattr(res, "instances")
                                                                 else [i.x for i in res.insts]))
    check_deterministic(lambda: outcome_bytes(run(sched, trace)))


# ---------------------------------------------------------------------------------- batch machine summaries
def test_batch_summary_and_printout_have_per_class_figures_for_both_forms():
    from hpctwin.twin.cli import _serving_rows

    from .test_serving_batch import run_case
    from .test_serving_batch_pd import run_pd as run_batch_pd
    trace = random_trace(40, seed=7, gap=0.05, most_out=30)
    reqs = [(r.arrival_s, r.input_tokens, r.output_tokens, None, None, r.klass) for r in trace]
    two = [(r.arrival_s, r.input_tokens, r.output_tokens) for r in trace]      # classes drawn with the shares
    for m in (run_case([], reqs, scheduling="slack:admission=defer", slo_classes="default")[2],
              run_batch_pd([], two, scheduling="slack", slo_classes="tight:2:0.5:0.5,loose:20:1:0.5")[2]):
        sv = m.summary()["serving"]
        block = sv["slo_classes"]
        assert sum(c["requests"] for c in block["classes"].values()) == sv["requests"] == 40
        assert all(0 <= c["attainment"] <= 1 for c in block["classes"].values())
        labels = [k for k, _ in _serving_rows(sv, lambda v, u="": f"{v}{u}")]
        assert "  SLO classes" in labels and "    " + next(iter(block["classes"])) in labels
    assert list(block["classes"]) == ["tight", "loose"] and block["scheduling"] == "slack"
    # the default deployment's summary has no per-class block (its bytes are unchanged)
    assert "slo_classes" not in run_case([], reqs)[2].summary()["serving"]


def test_batch_options_are_checked_with_the_key_named():
    from hpctwin.twin.serving.batch import ServingBatchConfig
    for opts, msg in (({"scheduling": "edf"}, r"option serving: serving.scheduling = 'edf': unknown scheduling "
                                               r"policy 'edf'; known: fcfs, priority, slack"),
                      ({"scheduling": "slack:admission=drop"}, r"serving.scheduling = 'slack:admission=drop': "
                                                               r"slack.admission: 'drop' is not one of"),
                      ({"slo_classes": "a:1:0.1:0.5"}, r"serving.slo_classes = 'a:1:0.1:0.5': SLO classes: shares "
                                                       r"sum to 0.5"),
                      ({"decode_router": "slo_awre"}, r"serving.decode_router = 'slo_awre': known routers: .* \(did "
                                                      r"you mean 'slo_aware'"),
                      ({"decode_router": "slo_aware"}, r"serving.decode_router = 'slo_aware': routes the KV hand-offs "
                                                       r"of serving.mode = pd")):
        with pytest.raises(ValueError, match=msg):
            ServingBatchConfig.from_options({"trace": "x", **opts})


def test_batch_pd_takes_a_single_pool_policy_object():
    from .test_serving_batch_pd import run_pd as run_batch_pd
    # the first tick (log 10 s) requests the initial 1 + 1; the next (25 s) the policy's 2 + 2
    _, df, m = run_batch_pd([], [(3.0 * i, 50, 5) for i in range(20)], controller=FixedPolicy(2),
                            prefill_max_instances=2, decode_max_instances=2, total=8)
    assert isinstance(m.policy, FixedPD)
    assert sorted(i.pool for i in m.insts) == ["decode", "decode", "prefill", "prefill"]
    assert all(r.generated == r.output for r in m.reqs)


# ---------------------------------------------------------------------------------- hpctwin serve
def _profile_or_skip():
    from hpctwin.twin.serving.bundle import find_data_dir
    try:
        perf = find_data_dir(None) / "LLM-serving" / "LLMServingSim" / "perf" / "RTXPRO6000"
    except Exception:  # noqa: BLE001
        pytest.skip("no data directory")
    if not perf.is_dir():
        pytest.skip("no RTXPRO6000 profile in the data directory")


def _azure(path, n=60):
    rng = np.random.default_rng(0)
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for k in range(n):
        lines.append(f"2023-11-16 18:15:{k // 2:02d}.{(k % 2) * 5}000000,{int(rng.integers(50, 3000))},"
                     f"{int(rng.integers(5, 80))}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_serve_prints_and_writes_per_class_figures(tmp_path, capsys):
    _profile_or_skip()
    from hpctwin.twin.serving.cli import main
    trace = _azure(tmp_path / "t.csv")
    assert main(["--trace", str(trace), "--out", str(tmp_path / "plain"), "--no-timeseries"]) == 0
    assert "slo_classes" not in json.loads((tmp_path / "plain" / "summary.json").read_text())
    assert "SLO classes" not in capsys.readouterr().out
    assert main(["--trace", str(trace), "--out", str(tmp_path / "pd"), "--prefill", "1", "--decode", "1",
                 "--scheduling", "slack", "--admission", "defer", "--router", "slo_aware",
                 "--decode-router", "least_loaded", "--no-timeseries"]) == 0
    out = capsys.readouterr().out
    s = json.loads((tmp_path / "pd" / "summary.json").read_text())
    block = s["slo_classes"]
    assert block["scheduling"] == "slack" and block["options"] == {"admission": "defer", "min_chunk": 512}
    assert sum(c["requests"] for c in block["classes"].values()) == s["requests"] == 60
    assert s["deployment"]["decode_router"] == "least_loaded"
    assert "  SLO classes: scheduling slack: admission=defer, min_chunk=512" in out
    assert f"    tight: {block['classes']['tight']['requests']:,} requests, attainment " in out


@pytest.mark.parametrize("args, msg", [
    (["--admission", "defer"], "--admission: an option of --scheduling slack; --scheduling fcfs takes no options"),
    (["--scheduling", "slack:admission=defer", "--admission", "shed"], "--admission: admission is given twice"),
    (["--scheduling", "edf"], "--scheduling: unknown scheduling policy 'edf'; known: fcfs, priority, slack"),
    (["--slo-classes", "a:1:0.1"], "--slo-classes: class 0 'a:1:0.1': expected NAME:TTFT_S:TPOT_S:SHARE"),
    (["--decode-router", "slo_aware"], "--decode-router routes the KV hand-offs of a disaggregated deployment"),
])
def test_serve_refuses_bad_slo_options_in_one_line(tmp_path, capsys, args, msg):
    _profile_or_skip()
    from hpctwin.twin.serving.cli import main
    trace = _azure(tmp_path / "t.csv", 4)
    assert main(["--trace", str(trace), "--out", str(tmp_path / "o")] + args) == 2
    err = capsys.readouterr().err
    assert err.startswith("hpctwin serve: error: ") and msg in err and len(err.strip().splitlines()) == 1
