"""Capacity curves measured with the engine (`twin.serving.capacity`, ``hpctwin serve profile``), the capacity
file, the capacity-driven P/D policy (`autoscale.CapacityPDPolicy`) and the ``capacity_weighted`` router.

A constant-time engine (every iteration ``DT`` = 10 ms) makes the figures hand-checkable.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hpctwin.datasets.serving_traces import ServingRequest
from hpctwin.twin.serving.autoscale import CapacityPDPolicy, InstanceCapacity, PoolView
from hpctwin.twin.serving.capacity import (CapacityError, _Sampler, capacity_weighted_router, load_capacity,
                                           measure_capacity, measure_point, parse_classes, write_capacity)
from hpctwin.twin.serving.instance import Instance
from hpctwin.twin.serving.kvcache import BlockManager
from hpctwin.twin.serving.routers import ROUTERS
from hpctwin.twin.serving.slo import SLOClass
from .serving_invariants import CONST_DT, ConstModel as Const

DT = CONST_DT     # s, every iteration of the constant engine
DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets"



def make(iid: int, seqs: int = 4) -> Instance:
    return Instance(iid, Const(), BlockManager(10_000, 16), max_num_seqs=seqs, max_num_batched_tokens=2048)


FIXED = [ServingRequest(0.0, 16, 11)]          # 16 prompt tokens (one iteration), 10 decode steps after the first
ONE = (SLOClass("slo", 0.05, 0.015, 1.0),)


def test_decode_role_by_hand():
    # a decode instance of 4 sequences, 10 steps of 10 ms a request: 40 req/s at most. At 5 req/s nothing
    # waits (TPOT 10 ms < 15 ms); at 80 req/s the queue grows and TPOT (from the landing) misses.
    s = _Sampler([(16, 11)], seed=3)
    lo = measure_point(make, "decode", 5.0, s, 60.0, ONE)
    hi = measure_point(make, "decode", 80.0, s, 60.0, ONE)
    assert lo.attainment["slo"] == 1.0 and hi.attainment["slo"] < 0.5
    window = 60.0 * 0.9                                  # the first 10 % are served but not judged
    assert lo.decode_tps == pytest.approx(10 * lo.requests / window, rel=1e-12)   # output - 1 per request
    assert lo.prefill_tps == pytest.approx(16 * lo.requests / window, rel=1e-12)
    assert lo.goodput_rps["slo"] == 5.0 and math.isnan(lo.ttft_p99_s)
    assert lo.tpot_p50_s == pytest.approx(DT, rel=1e-9)


def test_prefill_role_ttft_is_one_iteration_when_idle():
    s = _Sampler([(16, 11)], seed=1)
    p = measure_point(make, "prefill", 0.5, s, 120.0, ONE)
    assert p.ttft_p50_s == pytest.approx(DT, rel=1e-9) and math.isnan(p.tpot_p50_s)
    assert p.decode_tps == 0.0 and p.attainment["slo"] == 1.0


def test_rates_share_one_workload():
    # the workload at rate 2r is the one at r with arrival times halved (plus more requests): coupled curves
    s = _Sampler([(16, 11), (32, 5), (100, 2)], seed=7)
    a, b = s.trace(1.0, 50.0), s.trace(2.0, 50.0)
    assert len(b) > len(a)
    for x, y in zip(a, b):
        assert y.arrival_s == pytest.approx(x.arrival_s / 2, rel=1e-15)
        assert (x.input_tokens, x.output_tokens) == (y.input_tokens, y.output_tokens)


def test_automatic_grid_knee_and_determinism():
    cap = measure_capacity(make, FIXED, roles=("decode",), classes=ONE, duration_s=30.0, start_rps=5.0, refine=3)
    rates = [p.rate_rps for p in cap.curve("decode")]
    assert rates == sorted(rates) and {5.0, 10.0, 20.0, 40.0} <= set(rates)   # doublings, then bisections
    k = cap.knee("decode")
    assert 20.0 <= k.rate_rps <= 40.0                     # 40 req/s is the instance's hard limit
    again = measure_capacity(make, FIXED, roles=("decode",), classes=ONE, duration_s=30.0, start_rps=5.0, refine=3)
    assert [(p.rate_rps, p.attainment, p.decode_tps) for p in again.points] == \
           [(p.rate_rps, p.attainment, p.decode_tps) for p in cap.points]


def test_capacity_file_round_trip(tmp_path):
    cap = measure_capacity(make, FIXED, roles=("prefill", "decode"), classes=ONE + (SLOClass("loose", 1.0, 0.05, 0.0),),
                           duration_s=30.0, rates=(5.0, 20.0, 80.0), profile={"hardware": "const"})
    js, cs = write_capacity(cap, tmp_path)
    d = json.loads(js.read_text())
    assert d["format"] == "hpctwin-serving-capacity" and d["units"]["rate_rps"] == "requests/s"
    assert d["units"]["decode_tps"] == "tokens/s" and set(d["knees"]) == {"prefill", "decode"}
    head = cs.read_text().splitlines()[0].split(",")
    assert head[:5] == ["role", "rate_rps", "slo_class", "attainment", "goodput_rps"] and head[-1] == "knee"
    back = load_capacity(tmp_path)
    assert [(p.role, p.rate_rps, p.attainment, p.decode_tps) for p in back.points] == \
           [(p.role, p.rate_rps, p.attainment, p.decode_tps) for p in sorted(cap.points, key=lambda p: (p.role != "prefill", p.rate_rps))]
    for role in ("prefill", "decode"):
        for c in ("slo", "loose"):
            assert back.knee_rps(role, c) == cap.knee_rps(role, c)
    # P/D ratio: decode knee tokens/s over 10 decode tokens a request, over the prefill knee rate
    assert back.pd_ratio() == pytest.approx(back.decode_tps("decode") / 10 / back.knee_rps("prefill"))


@pytest.mark.parametrize("edit, msg", [
    (lambda d: d.update(format="x"), r"field 'format': expected 'hpctwin-serving-capacity'"),
    (lambda d: d.pop("points"), r"field 'points' is missing"),
    (lambda d: d["points"][0]["attainment"].update(slo=1.5), r"field 'points\[0\]\.attainment\.slo': 1\.5 is above 1"),
    (lambda d: d["points"][1].update(rate_rps="fast"), r"field 'points\[1\]\.rate_rps': 'fast' is not a number"),
    (lambda d: d["points"][0].update(role="both"), r"field 'points\[0\]\.role': 'both' is not one of"),
    (lambda d: d["classes"][0].update(tpot_s=-1), r"field 'classes\[0\]\.tpot_s': -1 is not a number >= 0"),
    (lambda d: d.update(version=9), r"field 'version': 9 is not 1"),
])
def test_bad_capacity_files_name_the_field(tmp_path, edit, msg):
    cap = measure_capacity(make, FIXED, roles=("decode",), classes=ONE, duration_s=20.0, rates=(5.0, 10.0))
    js, _ = write_capacity(cap, tmp_path)
    d = json.loads(js.read_text())
    edit(d)
    js.write_text(json.dumps(d))
    with pytest.raises(CapacityError, match=msg) as e:
        load_capacity(js)
    assert str(js) in str(e.value)


def test_capacity_errors():
    with pytest.raises(CapacityError, match=r"no such file|file not found"):
        load_capacity("/nonexistent/capacity.json")
    with pytest.raises(CapacityError, match=r"unknown role 'both'; known: colocated, prefill, decode"):
        measure_capacity(make, FIXED, roles=("both",))
    with pytest.raises(CapacityError, match=r"no request of the 1 fits the instance's KV blocks"):
        measure_capacity(make, [ServingRequest(0.0, 10**6, 2)])
    with pytest.raises(CapacityError, match=r"expected NAME:TTFT_S:TPOT_S\[:SHARE\]"):
        parse_classes("tight:1")
    assert [c.name for c in parse_classes("a:1:0.1,b:2:0.2")] == ["a", "b"]


def test_profile_cli_errors(capsys):
    from hpctwin.twin.serving.cli import main
    assert main(["profile", "--out", "/tmp/never", "--rates", "1,x", "--input-tokens", "5",
                 "--output-tokens", "5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--rates '1,x': expected comma-separated positive request rates" in err


@pytest.mark.skipif(not (DATA / "LLM-serving").exists(), reason="LLM-serving data not present")
def test_profile_cli_writes_the_file(tmp_path, capsys):
    from hpctwin.twin.serving.cli import main
    out = tmp_path / "cap"
    assert main(["profile", "--hardware", "RTX4090", "--model", "meta-llama/Llama-3.1-8B", "--roles", "decode",
                 "--input-tokens", "512", "--output-tokens", "64", "--rates", "1,4", "--duration", "60",
                 "--slo-classes", "slo:2:0.15", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "knees at >= 90 % attainment" in text and "decode    slo" in text
    cap = load_capacity(out)
    assert [p.rate_rps for p in cap.points] == [1.0, 4.0] and cap.profile["hardware"] == "RTX4090"


# ============================================================================ the policy and the router
def view(tps: float, now: float = 0.0) -> PoolView:
    return PoolView(now, 15.0, 1, 0, 0.5, tps, 0)


def test_capacity_policy_by_hand():
    ic = InstanceCapacity(prefill_rps=2.0, decode_tps=100.0, mean_decode_tokens=10.0)
    pol = CapacityPDPolicy(ic)
    # 250 tokens/s = 2.5 decode instances -> 3; 25 req/s over 2 req/s per prefill instance -> 13 (ratio 5)
    assert pol.ratio == 5.0
    assert pol.desired_pd(view(0.0), view(250.0)) == (13, 3)
    # scale-in waits for the 300 s window
    assert pol.desired_pd(view(0.0, 100.0), view(50.0, 100.0)) == (13, 3)
    assert pol.desired_pd(view(0.0, 500.0), view(50.0, 500.0)) == (3, 1)
    assert CapacityPDPolicy(ic, utilization=0.5).desired_pd(view(0.0), view(250.0)) == (25, 5)


def test_capacity_policy_per_class_by_hand():
    ic = InstanceCapacity(2.0, 100.0, 10.0, decode_tps_by_class=(100.0, 50.0))
    pol = CapacityPDPolicy(ic, per_class=True)
    pol._shares = {0: 0.5, 1: 0.5}
    # 150 tokens/s, half at 100 tokens/s per instance and half at 50: 0.75 + 1.5 = 2.25 instances -> 3
    assert pol.decode_units(150.0, None) == pytest.approx(2.25)
    assert pol.desired_pd(view(0.0), view(150.0))[1] == 3


def test_capacity_policy_errors():
    with pytest.raises(ValueError, match=r"utilization must be in \(0, 1\], got 1.5"):
        CapacityPDPolicy(InstanceCapacity(1.0, 1.0, 1.0), utilization=1.5)
    with pytest.raises(ValueError, match=r"prefill_signal must be ratio or prompt_tps"):
        CapacityPDPolicy(InstanceCapacity(1.0, 1.0, 1.0), prefill_signal="x")
    with pytest.raises(ValueError, match=r"needs the prefill knee's prompt tokens/s"):
        CapacityPDPolicy(InstanceCapacity(1.0, 1.0, 1.0), prefill_signal="prompt_tps")


def test_capacity_weighted_router_sees_per_instance_capacity():
    a, b = make(0), make(1)
    a.role = b.role = "prefill"
    a.capacity = InstanceCapacity(1.0, 1.0, 1.0)
    b.capacity = InstanceCapacity(3.0, 1.0, 1.0)
    pick = ROUTERS["capacity_weighted"]()
    assert "capacity_weighted" in ROUTERS
    got = []
    for _ in range(8):
        x = pick([a, b], None)
        x.outstanding += 1
        got.append(x.iid)
    assert got.count(1) == 6 and got.count(0) == 2          # 3:1 by capacity
    c = make(2)                                              # no capacity: weight 1
    assert capacity_weighted_router()([c], None) is c


# ============================================================================ the decode pool's KV floor
def _kv_pool(blocks: int = 100, new_blocks: int = 50):
    """A decode pool of two active members of ``blocks`` blocks of 16 tokens (1,600 tokens each), its
    factory building members of ``new_blocks`` blocks; the engine holds 8 requests (uid 0..7)."""
    from hpctwin.twin.serving.autoscale import ScaledPool, ScaleLog
    from hpctwin.twin.serving.engine import Member, ServingEngine, make_requests
    reqs = make_requests([ServingRequest(0.0, 100, 10) for _ in range(8)])
    eng = ServingEngine(reqs, pd=True)

    def mk(iid: int, n: int) -> Instance:
        return Instance(iid, Const(), BlockManager(n, 16), max_num_seqs=4, max_num_batched_tokens=2048)
    pool = ScaledPool(eng, lambda iid: mk(iid, new_blocks), "decode", ScaleLog())
    a, b = mk(0, blocks), mk(1, blocks)
    for x in (a, b):
        x.role = "decode"
        eng.add(Member(x, "decode", state="active"))
    return eng, pool, reqs, a, b


def test_kv_demand_and_floor_by_hand():
    from hpctwin.twin.serving.capacity import decode_kv_demand, kv_floor
    eng, pool, reqs, a, b = _kv_pool()
    assert decode_kv_demand(pool) == 0 and kv_floor(pool, 0.25) == 1       # at least one instance
    a.kv.allocate(0, 800)                        # running on a: 50 blocks = 800 tokens
    reqs[1].num_tokens = 400
    a.waiting.append(reqs[1])                    # landed on a, not admitted: 400 tokens
    reqs[2].computed = 320
    b.kv.allocate(2, 320)                        # a transfer to b with its 20 blocks set aside (in use already)
    eng.kv_land.append((9.0, 2, 0, reqs[2], 1))
    reqs[3].computed = 200
    eng.kv_land.append((9.0, 3, 0, reqs[3], 1))  # a transfer to b without blocks set aside: 200 tokens
    reqs[4].computed = 300
    eng.waiting_d.append((reqs[4], 1.0, 0))      # a prompt done, no active decode instance: 300 tokens
    reqs[5].computed = 40
    eng.kv_starts.append((9.0, 5, 0, reqs[5], 0))  # a prompt done, its transfer not started: 40 tokens
    reqs[6].computed = 999
    eng.kv_land.append((9.0, 6, 1, reqs[6], 1))  # an older attempt of a restarted request: not counted
    assert decode_kv_demand(pool) == 800 + 400 + 320 + 200 + 300 + 40     # 2,060 tokens
    # x 1.25 = 2,575 tokens: a (1,600) and b (1,600) hold it
    assert kv_floor(pool, 0.25) == 2
    # x 2 = 4,120: a and b hold 3,200; 920 more at the factory's 800 tokens an instance: 2 new
    assert kv_floor(pool, 1.0) == 4
    # no headroom, 2,060 > 1,600: b too
    assert kv_floor(pool, 0.0) == 2
    eng.members[1].state = "draining"            # a draining member: its KV and its inbound do not count
    assert decode_kv_demand(pool) == 800 + 400 + 300 + 40
    assert kv_floor(pool, 0.0) == 1 and pool.new_kv_tokens() == 800


def test_capacity_policy_keeps_the_kv_floor():
    from hpctwin.twin.serving.autoscale import ScaledPool, ScaleLog
    eng, D, reqs, a, b = _kv_pool()
    P = ScaledPool(eng, lambda iid: make(iid), "prefill", ScaleLog())
    a.kv.allocate(0, 1500)                       # 94 blocks = 1,504 tokens in use on a
    ic = InstanceCapacity(prefill_rps=2.0, decode_tps=100.0, mean_decode_tokens=10.0)
    # no decode TPS: the capacity alone asks for 1 decode instance; the floor (1,504 x 1.25 = 1,880 tokens)
    # keeps 2, in the recommendation before the window too (what role switching reads)
    pol = CapacityPDPolicy(ic, kv_headroom=0.25)
    assert pol.desired_pools(view(0.0), view(0.0), P, D) == (1, 2)
    assert pol.raw == (1, 2) and pol.kv_need == 2
    # without a floor (the default) the same state asks for 1
    plain = CapacityPDPolicy(ic)
    assert plain.desired_pools(view(0.0), view(0.0), P, D) == (1, 1) and plain.kv_need == 0
    # headroom 0: 1,504 tokens fit on a
    assert CapacityPDPolicy(ic, kv_headroom=0.0).desired_pools(view(0.0), view(0.0), P, D) == (1, 1)


def test_kv_headroom_errors():
    from hpctwin.twin.serving.roles import RoleSwitch
    with pytest.raises(ValueError, match=r"capacity policy: kv_headroom must be a fraction in \[0, 10\] "
                                         r"\(e\.g\. 0\.25: 25 % above the KV the decode pool holds\) or None, got -0\.1"):
        CapacityPDPolicy(InstanceCapacity(1.0, 1.0, 1.0), kv_headroom=-0.1)
    with pytest.raises(ValueError, match=r"role switch: kv_headroom must be a fraction in \[0, 10\].*got 'x'"):
        RoleSwitch(kv_headroom="x")
    with pytest.raises(ValueError, match=r"got True"):
        CapacityPDPolicy(InstanceCapacity(1.0, 1.0, 1.0), kv_headroom=True)
