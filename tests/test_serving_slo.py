"""Multi-SLO serving (issue 28 items 1, 2, 6a, 7): SLO classes, deadline-slack scheduling with admission
control, the ``slo_aware`` router and the ``serving_slo`` experiment."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hpctwin.datasets.serving_traces import ServingRequest
from hpctwin.twin.serving import BlockManager, Instance
from hpctwin.twin.serving.cluster import simulate
from hpctwin.twin.serving.instance import Req
from hpctwin.twin.serving.routers import ROUTERS
from hpctwin.twin.serving.slo import (DEFAULT_CLASSES, SLOClass, assign_classes, attainment_by_class,
                                      check_classes, deadline, predicted_ttft, prefill_s)
from tests.serving_invariants import check_deterministic, check_serving_result


class LinearModel:
    """A stub latency model: an iteration takes 1 ms per token (s)."""

    def iteration_s(self, tokens, seqs, pc, kvp, nd, kvd, kvd_max=0, kvd_min=0):
        return 0.001 * tokens

    def decode_run(self, t0, t_limit, nd, kvd0, steps, kvmax0):
        return None

    def decode_run_s(self, nd, kvd0, steps, kvmax0=0):
        return np.full(steps, 0.001 * nd)


def inst(policy="slack", admission="none", blocks=1000, iid=0, caching=False):
    return Instance(iid, LinearModel(), BlockManager(blocks, 16, caching=caching), policy=policy,
                    admission=admission)


def req(uid, arrival, prompt, klass, output=4):
    return Req(uid, arrival, prompt, output, klass=klass)


def four():
    # slack at t = 0 (deadline - now - prompt ms), relative to the class's TTFT target:
    # A tight  : 1.0 - 0.5 = 0.5   / 1  = 0.5
    # B std    : 3.0 - 0.1 = 2.9   / 3  = 0.967
    # C relaxed: 0.5 - 0.2 = 0.3   / 10 = 0.03
    # D tight  : 0.0 - 0.1 = -0.1  / 1  = -0.1 (cannot meet its TTFT)
    return [req(0, 0.0, 500, 0), req(1, 0.0, 100, 1), req(2, -9.5, 200, 2), req(3, -1.0, 100, 0)]


@pytest.mark.parametrize("admission,order,shed", [("none", [3, 2, 0, 1], []), ("defer", [2, 0, 1, 3], []),
                                                  ("shed", [2, 0, 1], [3])])
def test_slack_order_hand_checked(admission, order, shed):
    x = inst(admission=admission)
    rs = four()
    x.waiting.extend(rs)
    x.outstanding = 4
    x.slack.order(0.0)
    assert [r.uid for r in x.waiting] == order
    assert [r.uid for r in x.shed] == shed and x.outstanding == 4 - len(shed)
    assert [r.shed for r in rs] == [r.uid in shed for r in rs]
    assert x.slack.slack(rs[0], 0.0) == pytest.approx(0.5)
    assert x.slack.slack(rs[3], 0.0) == pytest.approx(-0.1)


def test_deadlines_prefill_time_and_victim():
    x = inst()
    r = req(0, 2.0, 100, 1)
    assert deadline(r, DEFAULT_CLASSES[1]) == 5.0                     # arrival + 3 s
    r.generated, r.first = 3, 4.0
    assert deadline(r, DEFAULT_CLASSES[1]) == pytest.approx(4.45)    # first + 3 x 0.15 s
    assert prefill_s(x, 1) == 0.0 and prefill_s(x, 5000) == pytest.approx(5.0)   # chunks of 2048 tokens at 1 ms
    assert prefill_s(x, 5000, decodes=48) == pytest.approx(2 * 2.048 + 0.001 * (5000 - 2 * 2000 + 48))
    a, b = req(1, 0.0, 10, 0), req(2, 0.0, 10, 2)                   # tight vs relaxed, same arrival
    assert x.slack.victim([a, b], 0.0) is b


def test_budget_cut_to_the_earliest_decode_deadline():
    x = inst()
    d = req(0, 0.0, 10, 0, output=100)
    d.generated, d.first, d.computed, d.num_tokens = 1, 0.0, 10, 11   # next token due at 0.08 s
    x.running.append(d)
    x.waiting.append(req(1, 0.0, 4000, 2))
    # an iteration of 1 decode + p prompt tokens takes (1 + p) ms: p <= 79 tokens; never below 512
    assert x.slack.budget(0.0) == 1 + 512
    assert 1 + 1079 - 16 < x.slack.budget(-1.0) <= 1 + 1079          # 1.08 s: p <= 1079 (to 16 tokens)
    assert x.slack.budget(-3.0) == 2048                              # 3.08 s: the full budget fits
    x.slack.min_chunk = 16
    assert 1 + 16 <= x.slack.budget(0.0) <= 1 + 79


def test_options_are_checked():
    with pytest.raises(ValueError, match=r"fcfs or priority, or slack \(twin.serving.slo\), got 'edf'"):
        inst(policy="edf")
    with pytest.raises(ValueError, match="admission control must be none, defer or shed, got 'drop'"):
        inst(admission="drop")
    with pytest.raises(ValueError, match="admission 'shed' needs policy 'slack'"):
        inst(policy="fcfs", admission="shed")
    with pytest.raises(ValueError, match="shares sum to 0.9, expected 1"):
        check_classes([SLOClass("a", 1, 0.1, 0.4), SLOClass("b", 2, 0.1, 0.5)])
    with pytest.raises(ValueError, match=r"SLO class 0 \('a'\): ttft_s must be a positive number of seconds"):
        check_classes([SLOClass("a", 0, 0.1, 1.0)])
    x = inst()
    with pytest.raises(ValueError, match="request 7: class 5 out of range 0..2"):
        x.slack.cls(req(7, 0.0, 10, 5))
    assert "slo_aware" in ROUTERS and "slo_aware (no options)" in ROUTERS.help()


def test_assign_classes_seeded_shares_and_trace_classes():
    trace = [ServingRequest(float(i), 10, 5) for i in range(20000)]
    a, b = assign_classes(trace, seed=3), assign_classes(trace, seed=3)
    ks = np.array([r.klass for r in a])
    assert (ks == np.array([r.klass for r in b])).all()
    assert np.bincount(ks, minlength=3) / len(ks) == pytest.approx([0.2, 0.5, 0.3], abs=0.01)
    given = [ServingRequest(0.0, 10, 5, klass=2), ServingRequest(1.0, 10, 5)]
    assert [r.klass for r in assign_classes(given)] == [2, 0]                # the trace's own classes kept
    with pytest.raises(ValueError, match="request 0: class 4 out of range 0..2"):
        assign_classes([ServingRequest(0.0, 10, 5, klass=4)])


def test_slo_aware_router_predicts_queue_and_prefix_hits():
    x0, x1 = inst(iid=0, caching=True), inst(iid=1, caching=True)
    x0.waiting.append(req(9, 0.0, 3000, 2))          # relaxed, deadline 10 s: queued ahead only of a later one
    r = req(0, 0.0, 1000, 0)                         # tight, deadline 1 s
    assert predicted_ttft(x0, r, 0.0) == pytest.approx(1.0)   # slack instance: the relaxed prompt is behind it
    assert predicted_ttft(x1, r, 0.0) == pytest.approx(1.0)
    rr = req(1, 0.0, 1000, 2)                        # relaxed, deadline 10 s: behind the queued one
    assert predicted_ttft(x0, rr, 0.0) == pytest.approx(prefill_s(x0, 4000))
    pick = ROUTERS["slo_aware"]()
    assert pick([x0, x1], rr) is x1
    assert pick([x0, x1], r) is x0                    # equal prediction, equal outstanding: lowest id


def small_trace(n=60, seed=1, most_out=40):
    rng = np.random.default_rng(seed)
    reqs = [ServingRequest(float(t), int(p), int(o)) for t, p, o in
            zip(np.cumsum(rng.exponential(0.02, n)), rng.integers(50, 1500, n), rng.integers(2, most_out, n))]
    return assign_classes(reqs, seed=seed)


@pytest.mark.parametrize("admission", ["none", "defer"])
def test_slack_runs_keep_the_serving_invariants(admission):
    trace = small_trace(most_out=400)

    def run():
        xs = [inst(admission=admission, blocks=150, iid=k) for k in range(2)]
        for x in xs:
            x.series = []
        return simulate(trace, xs, router="slo_aware")
    res = run()
    check_serving_result(res, trace=trace)
    assert check_deterministic(run)
    assert sum(x.preemptions for x in res.instances) > 0            # KV was short: preemption happened
    assert [r.klass for r in res.requests] == [s.klass for s in trace]


def test_shed_requests_are_reported_not_served():
    trace = small_trace(80)
    xs = [inst(admission="shed", blocks=300, iid=k) for k in range(2)]
    res = simulate(trace, xs, router="slo_aware")
    shed = [r for r in res.requests if r.shed]
    done = sorted(r.uid for x in xs for r in x.finished)
    assert shed and sorted(r.uid for x in xs for r in x.shed) == [r.uid for r in shed]
    assert sorted(done + [r.uid for r in shed]) == list(range(len(trace)))   # every request finished or reported
    assert all(r.generated == 0 and math.isnan(r.first) for r in shed)
    assert all(r.generated == r.output and r.first <= r.last for r in res.requests if not r.shed)
    ok = attainment_by_class(res.requests, DEFAULT_CLASSES)
    assert sum(v.size for v in ok.values()) == len(trace)
    assert not any(ok[r.klass][[q.uid for q in res.requests if q.klass == r.klass].index(r.uid)] for r in shed)


def test_default_engine_unchanged_by_a_class_column():
    trace = small_trace()
    plain = [ServingRequest(r.arrival_s, r.input_tokens, r.output_tokens) for r in trace]
    a = simulate(trace, [inst("fcfs", blocks=300, iid=k) for k in range(2)], router="least_loaded")
    b = simulate(plain, [inst("fcfs", blocks=300, iid=k) for k in range(2)], router="least_loaded")
    assert [(r.first, r.last, r.instance) for r in a.requests] == [(r.first, r.last, r.instance) for r in b.requests]


EXPECTED = ["trace", "load", "policy", "slo_class", "attainment", "ttft_p99_s", "tpot_p99_s", "goodput_rps", "gpus"]


def test_experiment_tiny_run_columns(tmp_path):
    from hpctwin.experiments import serving_slo
    out = tmp_path / "slo"
    assert serving_slo.main(["--out", str(out), "--trace", "code", "--minutes", "0.5", "--loads", "1,2"]) == 0
    df = pd.read_csv(out / "results.csv")
    assert list(df.columns) == EXPECTED
    assert len(df) == 1 * 2 * 2 * 3
    assert set(df["policy"]) == {"baseline", "slo_aware"} and set(df["slo_class"]) == {"tight", "standard", "relaxed"}
    assert df["attainment"].between(0, 1).all() and (df["gpus"] == 16).all()
    md = (out / "results.md").read_text()
    assert "tight: TTFT <= 1 s, TPOT <= 80 ms, 20 %" in md
    assert (out / "attainment.png").stat().st_size > 0 and (out / "goodput.csv").exists()


def test_experiment_bad_options(capsys):
    from hpctwin.experiments import serving_slo
    for argv, msg in ([["--trace", "azure"], "unknown trace 'azure'; known: conv, code, mooncake"],
                      [["--loads", "1,x"], "--loads '1,x': expected comma-separated positive numbers"],
                      [["--loads", "0"], "--loads '0': expected comma-separated positive numbers"]):
        with pytest.raises(SystemExit):
            serving_slo.main(argv + ["--out", "/nonexistent/never"])
        assert msg in capsys.readouterr().err


def test_slo_aware_raises_tight_attainment_without_lowering_goodput():
    """Azure code trace, first 2 minutes, at loads 1 and 2 on 16 GPUs: the tight class's attainment rises and
    the total goodput does not fall."""
    from hpctwin.experiments import serving_slo as S
    from hpctwin.twin.serving.bundle import find_data_dir
    from hpctwin.twin.serving.tables import SplitwiseIterationModel
    ddir = find_data_dir(None)
    model = SplitwiseIterationModel(ddir / "LLM-serving" / "splitwise" / "perf_model.csv", "llama2-70b",
                                    "h100-80gb", 4)
    base = S.load_trace("code", 2.0, None, DEFAULT_CLASSES, 0)
    for load in (1.0, 2.0):
        trace = [ServingRequest(r.arrival_s / load, r.input_tokens, r.output_tokens, klass=r.klass) for r in base]
        got = {p: S.run_one(trace, model, 4, p, DEFAULT_CLASSES, 120.0 / load) for p in S.POLICIES}
        tight = {p: rows[0]["attainment"] for p, rows in got.items()}
        good = {p: sum(r["goodput_rps"] for r in rows) for p, rows in got.items()}
        assert tight["slo_aware"] > tight["baseline"], (load, tight)
        assert good["slo_aware"] >= good["baseline"], (load, good)
