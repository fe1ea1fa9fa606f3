"""Fast scaling (`twin.serving.weights`, `twin.serving.roles`): hand-checked weight-loading costs (bytes /
bandwidth), the old one-constant cold start kept byte for byte, role switching's drain semantics, and
heterogeneous pools (mixed instance types, `capacity_weighted` router) conserving tokens
(tests/serving_invariants.py).

A constant-time engine (every iteration ``DT`` seconds, per instance type) with a real model shape (for
the weight bytes).
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from hpctwin.datasets.serving_traces import ServingRequest
from hpctwin.twin.serving.autoscale import (CapacityPDPolicy, FixedPolicy, InstanceCapacity, RatioPolicy, cold_start_s,
                                            simulate_autoscaled, with_capacity)
from hpctwin.twin.serving.instance import Instance
from hpctwin.twin.serving.kvcache import BlockManager
from hpctwin.twin.serving.models import model_shape
from hpctwin.twin.serving.pd import simulate_pd
from hpctwin.twin.serving.roles import RoleSwitch
from hpctwin.twin.serving.weights import (PCIE_GBPS, ScaleUp, WeightPath, WeightPathError, d2d_path, host_path,
                                          nvme_path, pfs_path, weight_load_s)

from .serving_invariants import check_deterministic, check_serving_result, outcome_bytes

SHAPE = model_shape("meta-llama/Llama-3.1-8B")
GB = 1e9


class Const:
    """Every iteration takes ``dt`` seconds; the Llama-3.1-8B shape (weights), TP ``tp``."""
    shape = SHAPE

    def __init__(self, dt: float = 0.01, tp: int = 1) -> None:
        self.dt, self.tp = dt, tp

    def iteration_s(self, *shape) -> float:
        return self.dt

    def decode_run(self, *a):
        return None

    def decode_run_s(self, nd, kvd0, steps, kvmax0=0):
        return np.full(steps, self.dt)


def inst(iid: int, dt: float = 0.01, tp: int = 1) -> Instance:
    return Instance(iid, Const(dt, tp), BlockManager(20_000, 16), max_num_seqs=32, max_num_batched_tokens=512)


def trace(n: int = 300, rate: float = 20.0, seed: int = 5) -> list[ServingRequest]:
    rng = random.Random(seed)
    out, t = [], 0.0
    for _ in range(n):
        t += rng.expovariate(rate)
        out.append(ServingRequest(t, rng.randint(5, 400), rng.randint(1, 60)))
    return out


# ============================================================================ weight paths, by hand
def test_weight_costs_are_bytes_over_bandwidth():
    b = 16.0 * GB
    assert weight_load_s(b, nvme_path()) == pytest.approx(16.0 / 7.0, rel=1e-12)
    assert PCIE_GBPS[4] == pytest.approx(31.5077, rel=1e-5) and PCIE_GBPS[5] == pytest.approx(63.0154, rel=1e-5)
    assert weight_load_s(b, host_path("RTX4090")) == pytest.approx(16.0 / PCIE_GBPS[4], rel=1e-12)
    assert weight_load_s(b, host_path("RTXPRO6000")) == pytest.approx(16.0 / PCIE_GBPS[5], rel=1e-12)
    # H100 NVLink: 450 GB/s per direction (kvflow.D2D); shared by the GPUs loading from one source GPU
    assert weight_load_s(b, d2d_path("h100-80gb")) == pytest.approx(16.0 / 450.0, rel=1e-12)
    assert weight_load_s(b, d2d_path("h100-80gb"), concurrent=3) == pytest.approx(3 * 16.0 / 450.0, rel=1e-12)
    assert weight_load_s(b, d2d_path("h100-80gb", intra_node=False)) == pytest.approx(16.0 / 25.0, rel=1e-12)
    # a PFS client of 25 GB/s shared by 8 GPUs: 3.125 GB/s each; the aggregate caps it further
    assert weight_load_s(b, pfs_path(), concurrent=8) == pytest.approx(16.0 / 3.125, rel=1e-12)
    assert weight_load_s(b, pfs_path(25.0, 10.0), concurrent=1) == pytest.approx(16.0 / 10.0, rel=1e-12)


def test_scale_up_cold_start_by_hand():
    b = 16.0 * GB
    su = ScaleUp(pfs_path(), startup_s=30.0)
    # 2 instances of TP 4 at once: 8 GPUs share the client
    assert su.cold_start_s(b, tp=4, new_instances=2) == (pytest.approx(30.0 + 16.0 / (25.0 / 8)), "storage")
    d = ScaleUp(d2d_path("h100-80gb"), startup_s=0.0)
    assert d.cold_start_s(b, tp=2, new_instances=4, sources=2) == (pytest.approx(2 * 16.0 / 450.0), "d2d")
    # no running source (scale from zero): NVMe
    assert d.cold_start_s(b, tp=2, new_instances=1, sources=0) == (pytest.approx(16.0 / 7.0), "storage")
    # the NVMe path is the historical constant's formula
    assert ScaleUp(nvme_path()).cold_start_s(b)[0] == cold_start_s(b)


def test_weight_path_errors():
    with pytest.raises(WeightPathError, match=r"unknown kind 'tape'; known: storage, host, d2d"):
        WeightPath("tape", 1.0)
    with pytest.raises(WeightPathError, match=r"storage path GBps: 0 must be > 0 GB/s"):
        WeightPath("storage", 0.0)
    with pytest.raises(WeightPathError, match=r"no PCIe generation known for GPU type 'TPU'; known: RTX4090"):
        host_path("TPU")
    with pytest.raises(WeightPathError, match=r"concurrent loads must be a whole number >= 1, got 0"):
        weight_load_s(1.0, nvme_path(), 0)
    with pytest.raises(ValueError, match=r"switch_s: -1 must be >= 0 s"):
        RoleSwitch(-1.0)


# ============================================================================ in the autoscaler
def make(iid: int) -> Instance:
    return inst(iid)


def test_constant_cold_start_path_unchanged():
    # the NVMe ScaleUp computes the same cold start as the constant: the same run, byte for byte
    tr = trace(400, 40.0)
    b = SHAPE.weight_bytes_per_rank(1)
    kw = dict(policy=None, min_instances=1, max_instances=4, interval_s=5.0)

    def run(cs):
        from hpctwin.twin.serving.autoscale import DecodeTPSPolicy
        return simulate_autoscaled(tr, make, DecodeTPSPolicy(200.0, window_s=30.0), kw["min_instances"],
                                   kw["max_instances"], cold_start=cs, interval_s=kw["interval_s"])
    old, log_old = run(cold_start_s(b))
    new, log_new = run(ScaleUp(nvme_path()))
    assert outcome_bytes(old) == outcome_bytes(new)
    assert log_old.gpu_seconds == log_new.gpu_seconds and len(log_new.scale_ups) >= 1
    for t0, ready, kind in log_new.scale_ups:
        assert ready - t0 == pytest.approx(30.0 + b / 7e9, rel=1e-12) and kind == "storage"


class Script:
    """(prefill, decode) = ``before`` until ``t_switch``, then ``after``."""

    def __init__(self, t_switch: float, before, after) -> None:
        self.t, self.before, self.after = t_switch, before, after

    def desired_pd(self, vp, vd):
        return self.after if vp.now >= self.t else self.before


def test_role_switch_drains_then_serves_the_other_pool():
    tr = trace(400, 30.0, seed=2)
    res, log = simulate_autoscaled(tr, make, Script(5.0, (1, 2), (2, 1)), 3, 3, cold_start=100.0, interval_s=1.0,
                                   initial=(1, 2), make_decode=make, role_switch=RoleSwitch(2.0))
    check_serving_result(res, trace=tr)
    assert len(res.instances) == 3 and log.scale_ups == []          # no instance started: one switched
    assert len(log.switches) == 1
    t0, drained, ready, src, dst = log.switches[0]
    assert (src, dst) == ("decode", "prefill") and t0 == 5.0 and ready == pytest.approx(drained + 2.0)
    iid = next(x.iid for x in res.instances if x.role == "prefill" and x.iid != 0)
    decoded = [r for r in res.requests if r.instance == iid and r.prefill_instance not in (-1, iid)]   # its decodes
    prefilled = [r for r in res.requests if r.prefill_instance == iid]
    assert decoded and prefilled
    assert max(r.last for r in decoded) <= drained + 1e-12          # its decodes finished before the switch
    assert min(r.first for r in prefilled) >= ready                  # prompts only once it serves again
    assert all(r.arrival >= t0 for r in prefilled)                   # none routed to it while draining


def test_role_switch_needs_pd_and_keeps_one_active():
    with pytest.raises(ValueError, match=r"role_switch moves instances between prefill and decode pools"):
        simulate_autoscaled(trace(5), make, FixedPolicy(1), 1, 2, cold_start=0.0, role_switch=RoleSwitch())
    # asked to move both decode instances: one stays (each pool keeps an active instance)
    tr = trace(200, 30.0)
    res, log = simulate_autoscaled(tr, make, Script(3.0, (1, 2), (3, 0)), 3, 3, cold_start=100.0, interval_s=1.0,
                                   initial=(1, 2), make_decode=make, role_switch=RoleSwitch(1.0))
    check_serving_result(res, trace=tr)
    assert len(log.switches) == 1


# ============================================================================ heterogeneous pools
FAST, SLOW = InstanceCapacity(4.0, 400.0, 20.0), InstanceCapacity(1.0, 100.0, 20.0)


def mixed(iid: int) -> Instance:
    """Even ids: a fast type (10 ms iterations, TP 1); odd ids: a slow type (40 ms, TP 2)."""
    x = inst(iid, 0.01, 1) if iid % 2 == 0 else inst(iid, 0.04, 2)
    x.capacity = FAST if iid % 2 == 0 else SLOW
    return x


def test_mixed_types_conserve_tokens_pd():
    tr = trace(400, 30.0, seed=9)
    pre = [mixed(0), mixed(1)]
    dec = [mixed(2), mixed(3), mixed(5)]
    res = simulate_pd(tr, pre, dec, "capacity_weighted", "capacity_weighted")
    check_serving_result(res, trace=tr)
    # the router weighs by capacity: the fast prefill instance takes the larger share of prompts
    n0 = sum(r.prefill_instance == 0 for r in res.requests)
    assert n0 > sum(r.prefill_instance == 1 for r in res.requests)


def test_mixed_types_autoscaled_with_capacity_policy_conserve_tokens_and_are_deterministic():
    tr = trace(600, 40.0, seed=11)
    fast = with_capacity(lambda iid: inst(iid, 0.01, 1), FAST)

    def run():
        res, log = simulate_autoscaled(tr, mixed, CapacityPDPolicy(FAST, SLOW, window_s=20.0), 2, 8,
                                       cold_start=ScaleUp(d2d_path("RTX4090"), startup_s=1.0), interval_s=2.0,
                                       make_decode=fast, router="capacity_weighted", role_switch=RoleSwitch(0.5))
        check_serving_result(res, trace=tr)
        return res
    check_deterministic(run)
    assert fast.capacity is FAST


def test_capacity_policy_counts_mixed_members_at_their_own_capacity():
    # a decode pool holding a fast (400 tokens/s) and a slow (100) member covers 500 tokens/s with 2;
    # 700 tokens/s needs 2 more of the factory's type (100 each)
    from hpctwin.twin.serving.autoscale import ScaledPool, ScaleLog
    from hpctwin.twin.serving.engine import Member, ServingEngine
    eng = ServingEngine([], pd=True)
    pool = ScaledPool(eng, with_capacity(lambda iid: inst(iid), SLOW), "decode", ScaleLog())
    for k, cap in enumerate((FAST, SLOW)):
        x = inst(k)
        x.capacity = cap
        eng.add(Member(x, "decode", state="active"))
    count = CapacityPDPolicy._count
    assert count(pool, 500.0, lambda c: c.decode_tps, SLOW) == 2
    assert count(pool, 350.0, lambda c: c.decode_tps, SLOW) == 1
    assert count(pool, 700.0, lambda c: c.decode_tps, SLOW) == 4


# ============================================================================ the KV floor of role switching
def small_kv(iid: int) -> Instance:
    """10 ms iterations and 200 KV blocks of 16 tokens: 3,200 tokens of KV."""
    return Instance(iid, Const(0.01, 1), BlockManager(200, 16), max_num_seqs=32, max_num_batched_tokens=512)


class Spy(Script):
    """`Script`, recording the decode pool's KV demand and floor (25 % headroom) at each tick."""

    def __init__(self, *a) -> None:
        super().__init__(*a)
        self.seen: dict[float, tuple[int, int]] = {}

    def desired_pools(self, vp, vd, P, D):
        from hpctwin.twin.serving.capacity import decode_kv_demand, kv_floor
        self.seen[vp.now] = (decode_kv_demand(D), kv_floor(D, 0.25))
        return self.desired_pd(vp, vd)


def test_role_switch_keeps_the_decode_pools_kv_floor():
    # at t = 5 s the script moves a decode instance to prefill; the two decode instances (3,200 tokens of KV
    # each) hold more than 3,200 / 1.25 tokens then: the floor is 2, so none switches (the script's own
    # scale-in still drains one and a prefill instance is started: 4 instances, not 3)
    tr = trace(400, 30.0, seed=2)
    runs = {}
    for h in (None, 0.25):
        spy = Spy(5.0, (1, 2), (2, 1))
        res, log = simulate_autoscaled(tr, make, spy, 3, 3, cold_start=100.0, interval_s=1.0, initial=(1, 2),
                                       make_decode=small_kv, role_switch=RoleSwitch(2.0, kv_headroom=h))
        check_serving_result(res, trace=tr)
        runs[h] = (res, log, spy)
    demand, floor = runs[0.25][2].seen[5.0]
    assert demand * 1.25 > 3200 and floor == 2
    assert runs[0.25][2].seen[5.0] == runs[None][2].seen[5.0]          # the same state up to the decision
    assert len(runs[None][1].switches) == 1 and len(runs[None][0].instances) == 3
    assert runs[0.25][1].switches == [] and len(runs[0.25][0].instances) == 4


def test_capacity_policy_with_kv_floor_and_role_switch_conserves_and_bills_by_type():
    tr = trace(600, 40.0, seed=11)
    fast = with_capacity(small_kv, FAST, gpu_type="fast")

    def typed(iid: int) -> Instance:
        x = mixed(iid)
        x.gpu_type = "fast" if iid % 2 == 0 else "slow"
        return x

    def run():
        res, log = simulate_autoscaled(tr, typed, CapacityPDPolicy(FAST, SLOW, window_s=20.0, kv_headroom=0.25), 2, 8,
                                       cold_start=ScaleUp(d2d_path("RTX4090"), startup_s=1.0), interval_s=2.0,
                                       make_decode=fast, router="capacity_weighted", role_switch=RoleSwitch(0.5))
        check_serving_result(res, trace=tr)
        run.log = log
        return res
    check_deterministic(run)
    by = run.log.gpu_seconds_by_type
    assert set(by) <= {"fast", "slow"} and by["fast"] > 0
    assert sum(by.values()) == pytest.approx(run.log.gpu_seconds, rel=1e-12)


def test_ratio_policy_path_unchanged_with_initial_pair():
    # initial=(p, d) starts exactly that split; a FixedPD-like ratio then keeps it
    tr = trace(100, 20.0)
    res, log = simulate_autoscaled(tr, make, RatioPolicy(FixedPolicy(2), 0.5), 3, 3, cold_start=0.0,
                                   initial=(1, 2), make_decode=make)
    check_serving_result(res, trace=tr)
    assert len(res.instances) == 3 and max(log.active) == 3
    with pytest.raises(ValueError, match=r"initial \(3, 3\): a \(prefill, decode\) pair needs make_decode and at most"):
        simulate_autoscaled(tr, make, RatioPolicy(FixedPolicy(2), 0.5), 3, 3, cold_start=0.0, initial=(3, 3),
                            make_decode=make)


# ============================================================================ experiment smoke
DATA = __import__("pathlib").Path(__file__).resolve().parents[2] / "shared" / "datasets"
needs_data = pytest.mark.skipif(not (DATA / "LLM-serving").exists(), reason="LLM-serving data not present")


@needs_data
@pytest.mark.slow
def test_serving_autoscale_experiment_smoke(tmp_path):
    import pandas as pd
    from hpctwin.experiments.serving_autoscale import COLUMNS, run
    df = run(tmp_path, hours=2.0, rate=2.0, compress=24.0, max_instances=8, het_rate=4.0, het_compress=24.0)
    assert list(df.columns) == COLUMNS
    B, S = "RTX PRO 6000", "RTX 4090"
    assert list(df["policy"]) == ["fixed peak, colocated", "fixed peak, P/D", "today: P/D ratio, guessed 500 tok/s",
                                  "today: HPA per pool", "capacity P/D (HeteroScale)", "capacity P/D + d2d + role switch",
                                  f"Llama-3.1-8B: fixed peak P/D, {B}", f"Llama-3.1-8B: capacity P/D, {B}",
                                  f"Llama-3.1-8B: capacity P/D, {S}",
                                  f"Llama-3.1-8B: capacity P/D, prefill {S} + decode {B}",
                                  f"Llama-3.1-8B: capacity P/D, prefill {B} + decode {S}",
                                  f"Llama-3.1-8B: capacity P/D, mixed pools ({B} base, {S} scale-ups)"]
    # one type: cost = GPU-hours (RTX PRO 6000) or x 1,599 / 8,565 (RTX 4090)
    qwen = df.iloc[:6]
    assert (qwen["cost_pro6000_gpu_h"] == qwen["gpu_hours"]).all()
    r4090 = df[df["policy"] == f"Llama-3.1-8B: capacity P/D, {S}"].iloc[0]
    assert r4090["cost_pro6000_gpu_h"] == pytest.approx(r4090["gpu_hours"] * 1599 / 8565, rel=1e-12)
    assert df.loc[df["policy"] == f"Llama-3.1-8B: fixed peak P/D, {B}", "gpu_hours_vs_fixed_pd"].iloc[0] == 1.0
    assert (df["gpu_hours"] > 0).all() and df["slo_attainment"].between(0, 1).all()
    for block in (df.iloc[:6], df.iloc[6:]):                    # one workload per block
        assert (block["requests"] == block["requests"].iloc[0]).all()
    assert df.loc[df["policy"] == "fixed peak, P/D", "gpu_hours_vs_fixed_pd"].iloc[0] == 1.0
    assert list(pd.read_csv(tmp_path / "results.csv").columns) == COLUMNS
    for f in ("results.md", "results.tex", "capacity.json", "capacity.csv", "instances.png", "instances_llama8b.png",
              "capacity_llama8b_RTX4090/capacity.json", "capacity_llama8b_RTXPRO6000/capacity.json"):
        assert (tmp_path / f).is_file(), f


@needs_data
@pytest.mark.slow
def test_serving_fast_scaling_experiment_smoke(tmp_path):
    from hpctwin.experiments.serving_fast_scaling import COLUMNS, run
    df = run(tmp_path, minutes=1.5, rate=2.0, max_instances=8)
    assert list(df.columns) == COLUMNS and set(df["scenario"]) == {"rate burst", "mix shift"}
    assert len(df) == 22 and df["absorb_s"].ge(0).all()
    assert {"NVMe + KV floor", "role switch + KV floor (+ NVMe)"} <= set(df["path"])
    w = df[df["path"] == "NVMe"]["weights_s"].dropna()          # bytes per GPU / 7 GB/s, when any scale-up
    assert w.to_numpy() == pytest.approx(model_shape("Qwen/Qwen3-32B").weight_bytes_per_rank(1) / 7e9, rel=1e-9)
    for f in ("results.csv", "results.md", "results.tex", "absorb.png"):
        assert (tmp_path / f).is_file(), f
