"""Ledgers, pricing rules, price series, user response (power/response.py, re-exported by
power/accounting.py) and energy fair-share (power/accounting.py)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hpctwin.power.accounting import (
    CapRebate,
    DemandCharge,
    EnergyCharge,
    EnergyFairShare,
    FlatPrice,
    FugakuPoints,
    NodeHours,
    OsakaPoints,
    PriceSeries,
    PricingError,
    RunData,
    TimeOfUse,
    ledger,
    make_rules,
    make_tariff,
    price_run,
    spread,
)
from hpctwin.power.response import UserResponse
from hpctwin.twin.workload import Workload

H = 3600.0


def data(pue=1.2):
    jobs = pd.DataFrame({
        "start": [0.0, 0.0, 2 * H], "end": [H, 2 * H, 3 * H], "procs": [4, 2, 1], "user": [1, 2, 1],
        "energy_j": [1000.0 * H, 400.0 * H, 500.0 * H], "avg_power_w": [1000.0, 200.0, 500.0],
        "capped": [False, True, False]})
    ts = {"time": np.array([0.0, H, 2 * H]), "power_facility_w": np.array([1500.0, 2000.0, 900.0])}
    summary = {"energy_facility_kwh": 1.2 * 10.0, "energy_it_kwh": 10.0}
    return RunData(jobs, ts, summary)


def test_tariff_integrals_hand_checked():
    tou = TimeOfUse([[0, 12, 1.0], [12, 24, 2.0]])
    assert tou.integral(np.array([6 * H]), np.array([18 * H]))[0] == pytest.approx(18 * H)
    assert tou.integral(np.array([23 * H]), np.array([25 * H]))[0] == pytest.approx(3 * H)  # 1 h at 2, 1 h at 1
    shifted = TimeOfUse([[0, 12, 1.0], [12, 24, 2.0]], t0_hour=12)      # log time 0 is noon
    assert shifted.at(np.array([0.0, 13 * H]))[:].tolist() == [2.0, 1.0]
    ser = PriceSeries([0, H, 2 * H], [1.0, 3.0, 2.0], step_s=H)
    assert ser.integral(np.array([0.5 * H]), np.array([2.5 * H]))[0] == pytest.approx(0.5 * H + 3 * H + 1 * H)


def test_price_series_gaps_are_errors(tmp_path):
    with pytest.raises(PricingError, match=r"gap between row 2 \(t=3600 s\) and row 3"):
        PriceSeries([0, H, 3 * H], [1, 1, 1], step_s=H)
    with pytest.raises(PricingError, match="gap or overlap at hour 7"):
        TimeOfUse([[0, 7, 1.0], [8, 24, 2.0]])
    with pytest.raises(PricingError, match="not 24"):
        TimeOfUse([[0, 20, 1.0]])
    f = tmp_path / "p.csv"
    f.write_text("time_s,price\n0,0.1\n3600,0.2\n10800,0.1\n")
    with pytest.raises(PricingError, match=r"p\.csv: gap between row 2"):
        make_tariff({"kind": "series", "file": str(f), "step_s": 3600}, "x")
    ser = PriceSeries([0, H], [1.0, 1.0], step_s=H)
    with pytest.raises(PricingError, match="gap at the run's end"):
        ser.integral(np.array([0.0]), np.array([3 * H]))


def test_rules_hand_checked():
    d = data()
    assert NodeHours(rate=1.5).charge(d).tolist() == pytest.approx([6.0, 6.0, 1.5])
    # energy: 1 kWh, 0.4 kWh, 0.5 kWh at 0.1/kWh with PUE share 1.2
    assert EnergyCharge(FlatPrice(0.1)).charge(d) == pytest.approx([0.12, 0.048, 0.06])
    assert EnergyCharge(FlatPrice(0.1), pue_share=False).charge(d) == pytest.approx([0.1, 0.04, 0.05])
    assert CapRebate(NodeHours(), 0.25).charge(d) == pytest.approx([4.0, 3.0, 1.0])
    # demand: one 30-day period, peak 2 kW x 10 = 20, shared by energy 1 : 0.4 : 0.5 (kWh)
    dem = DemandCharge(price_per_kw=10.0).charge(d)
    assert dem == pytest.approx(20 * np.array([1.0, 0.4, 0.5]) / 1.9)
    # fugaku: mean energy per node-hour = 1.9 kWh / 9 node-h; job 1 (4 node-h) used 1 kWh (reference
    # 0.844: no reward), job 2 (4 node-h) used 0.4 kWh (saves 0.444), job 3 (1 node-h) 0.5 (none)
    ref = 1.9 / 9
    assert FugakuPoints(NodeHours(rate=0.0), reward_per_kwh=2.0).charge(d) == pytest.approx(
        [0.0, -2.0 * (4 * ref - 0.4), 0.0])
    # osaka: consumption coefficient = node power (250, 100, 500 W) / mean node power (1900/9 W)
    osaka = OsakaPoints(rate=1.0, season=[2.0] * 12, fuel=1.5).charge(d)
    assert osaka == pytest.approx(np.array([4 * 250, 4 * 100, 1 * 500]) / (1900 / 9) * 3.0)


def test_ledger_and_spread():
    d = data()
    led = ledger(d, NodeHours(rate=1.0))
    assert led["user"].tolist() == [1, 2]
    assert led["node_hours"].tolist() == pytest.approx([5.0, 4.0])
    assert led["energy_kwh"].tolist() == pytest.approx([1.5, 0.4])
    assert led["energy_pue_kwh"].tolist() == pytest.approx([1.8, 0.48])
    assert led["carbon_kg"].tolist() == pytest.approx([1.8 * 0.388, 0.48 * 0.388])
    assert led["cost"].tolist() == pytest.approx([5.0, 4.0])
    assert spread(np.array([3.0, 3.0, 3.0]))["gini"] == pytest.approx(0.0)
    pr = price_run(d, {"nh": NodeHours(rate=2.0)})
    assert pr["total_cost"].iloc[0] == pytest.approx(18.0)
    with pytest.raises(PricingError, match="no such column"):
        ledger(d, by="account")


def test_energy_rules_need_a_power_run():
    d = data()
    d.jobs = d.jobs.drop(columns=["energy_j"])
    with pytest.raises(PricingError, match="--power on"):
        EnergyCharge(FlatPrice(0.1)).charge(d)


def test_make_rules_from_tables_and_errors():
    rules = make_rules({
        "nh": {"kind": "node-hours", "rate": 1.0},
        "tou": {"kind": "energy", "price": {"kind": "time-of-use", "periods": [[0, 7, 0.08], [7, 24, 0.2]]}},
        "rebate": {"kind": "cap-rebate", "base": "tou", "rebate": 0.3},
        "both": {"kind": "sum", "rules": ["tou", "nh"]}})
    assert rules["tou"].time_varying and rules["both"].needs_energy
    assert rules["rebate"].charge(data())[1] == pytest.approx(0.7 * EnergyCharge(rules["tou"].price).charge(data())[1])
    with pytest.raises(PricingError, match=r"\[pricing\]\.x: unknown kind 'free'"):
        make_rules({"x": {"kind": "free"}})
    with pytest.raises(PricingError, match=r"unknown key\(s\) 'rat'"):
        make_rules({"x": {"kind": "node-hours", "rat": 1}})
    with pytest.raises(PricingError, match="cycle"):
        make_rules({"a": {"kind": "sum", "rules": ["b"]}, "b": {"kind": "sum", "rules": ["a"]}})
    with pytest.raises(PricingError, match="unknown rule 'zz'"):
        make_rules({"a": {"kind": "cap-rebate", "base": "zz", "rebate": 0.1}})


def _workload():
    n = 40
    return Workload.from_arrays("w", submit=np.arange(n) * 1800.0, runtime=np.full(n, 600.0),
                                procs=np.full(n, 4), requested_time=np.full(n, 1200.0),
                                user=np.arange(n) % 5)


def test_user_response_shift_cap_shrink():
    wl = _workload()
    tou = EnergyCharge(TimeOfUse([[0, 8, 0.05], [8, 24, 0.25]]))
    resp = UserResponse(shift_users=1.0, shift_elasticity=10.0, tolerance_h=24)
    new, info = resp.apply(wl, tou, seed=1)
    # every job submitted at an expensive hour moves to the next 00:00 (saving 80 % x 10 -> certain)
    hour = (new.submit % 86400) / 3600
    assert info["shifted"] == int(np.sum(((wl.submit % 86400) / 3600) >= 8))
    assert np.all(hour < 8)
    nh, info2 = resp.apply(wl, NodeHours(), seed=1)
    assert info2 == {"shifted": 0, "capped": 0, "shrunk": 0, "mean_shift_h": 0.0}
    assert np.array_equal(nh.submit, wl.submit)
    shrink = UserResponse(shrink_users=1.0, shrink_fraction=0.5, scaling_exponent=0.8)
    s, info3 = shrink.apply(wl, EnergyCharge(FlatPrice(0.1)), seed=0)
    assert info3["shrunk"] == 40 and np.all(s.procs == 2)
    assert np.all(s.runtime == np.ceil(600 * 2 ** 0.8))
    cap = UserResponse(cap_elasticity=1.0, cap_gpu_w=300.0)
    c, info4 = cap.apply(wl, EnergyCharge(FlatPrice(0.1)), seed=0, system="frontier")
    assert info4["capped"] == 40 and np.all(c.columns["gpu_cap_w"] == 300.0)
    assert np.all(c.requested_time >= 1200.0) and info4["cap_requests_extended"] == int(np.sum(c.requested_time > 1200))
    with pytest.raises(PricingError, match="cap_cpu_w"):
        UserResponse(cap_elasticity=0.5)


def test_energy_fairshare_orders_light_users_first(tmp_path):
    from hpctwin.experiments.incentives_whatif import power_only_system
    from hpctwin.twin.run import RunConfig, run
    n = 60
    rng = np.random.default_rng(0)
    wl = Workload.from_arrays("fs", submit=np.sort(rng.uniform(0, 3000, n)).round(), runtime=np.full(n, 900.0),
                              procs=np.where(np.arange(n) % 3 == 0, 8, 1), requested_time=np.full(n, 1000.0),
                              user=np.arange(n) % 3)
    r = run(RunConfig(workload="x", system=power_only_system("frontier", tmp_path), nodes=8, power=True,
                      scheduler="hpctwin.power.accounting:EnergyFairShare", options={"power": {"cooling": False}}), wl)
    assert r.summary["scheduler"] == "energy-fairshare"
    assert np.isfinite(r.jobs["start"]).all()
    s = EnergyFairShare(half_life_s=100.0)
    s._usage = np.array([0.0, 3.0, 1.0])
    s._seen = np.ones(3, dtype=bool)
    f = s.factors()
    assert f[0] == 1.0 and f[1] < f[2] < 1.0
    assert f[1] == pytest.approx(2 ** (-0.75 * 3))
