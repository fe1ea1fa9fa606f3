"""User response calibrated to the published anchors (power/response.py) and the price-aware
scheduler of Yang et al. (schedulers/price_aware.py): presets, calibration, emulated hardware at its
own speed and power, cap requests, exact behaviour, errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

from hpctwin.power.accounting import (
    EnergyCharge,
    FlatPrice,
    NodeHours,
    PricingError,
    RunData,
    TimeOfUse,
    facility_cost,
)
from hpctwin.power.response import (
    KAMATAR2025_EFFICIENT_USERS,
    KAMATAR_GPU_ALTERNATIVES,
    UserResponse,
    calibrate,
    emulation_scale,
    load_power_config,
    materialize_profiles,
    predicted_job_energy_j,
)
from hpctwin.schedulers.price_aware import (
    YANG2013,
    PriceAwareError,
    PriceAwareScheduler,
    knapsack_max_nodes,
    tou_periods,
)
from hpctwin.twin.model_api import seeded_rng
from hpctwin.twin.workload import Workload

H = 3600.0
FLAT = EnergyCharge(FlatPrice(0.1))
# Frontier node (twin/systems/frontier.toml): idle = 90 + 4 x 88 + 74.26 + 4 x 20 + 30 = 626.26 W
IDLE = 626.26
STATIC = 74.26 + 80.0 + 30.0


def node_w(uc: float, ug: float, gcap: float = math.inf) -> float:
    """Frontier node power by hand: CPU 90..280 W, 4 GPUs 88..560 W (capped), memory, NICs, NVMe."""
    return 90 + uc * 190 + 4 * min(88 + ug * 472, max(gcap, 88)) + STATIC


def one_job(util=0.5, beta=0.5, n=1, runtime=1000.0, req=2000.0, procs=2):
    return Workload.from_arrays("one", submit=np.arange(n) * 10.0, runtime=np.full(n, runtime),
                                procs=np.full(n, procs), requested_time=np.full(n, req), user=np.arange(n) % 3,
                                columns={"cpu_util": np.full(n, util), "gpu_util": np.full(n, util),
                                         "compute_bound": np.full(n, beta)})


def synthetic(n=400, seed=3):
    rng = np.random.default_rng(seed)
    return Workload.from_arrays("syn", submit=np.sort(rng.uniform(0, 5 * 86400, n)).round(),
                                runtime=rng.integers(60, 20000, n).astype(float), procs=rng.integers(1, 9, n),
                                requested_time=np.full(n, 40000.0), user=rng.integers(0, 25, n))


# ---------------------------------------------------------------- presets
def test_kamatar_preset_parameters_come_from_the_artifact():
    k = UserResponse.preset("kamatar2025")
    assert k.efficient_users == KAMATAR2025_EFFICIENT_USERS == 0.8636
    # artifact gpu_experiments/results.csv: A100 1405.0 s x 1494.667 W, V100 1494.0 s x 881.396 W,
    # P100 2321.485 s x 382.606 W -> V100: 1.3168 MJ / 2.1000 MJ = 0.6270, 1494 / 1405 = 1.0633;
    # P100: 0.8882 MJ / 2.1000 MJ = 0.4230, 2321.485 / 1405 = 1.6523
    (e1, t1), (e2, t2) = k.alternatives
    assert (e1, t1) == pytest.approx((0.62705, 1.06335), abs=5e-5)
    assert (e2, t2) == pytest.approx((0.42296, 1.65230), abs=5e-5)
    assert k.choice_cap_fractions == (0.85, 0.7, 0.55, 0.4) and k.max_slowdown == 2.0
    h = UserResponse.preset("kamatar2025-homogeneous")
    assert h.efficient_users == 1.0 and h.alternatives == () and h.choice_cap_fractions == k.choice_cap_fractions
    ill = UserResponse.preset("illustrative")
    assert (ill.shift_users, ill.cap_elasticity, ill.cap_gpu_w, ill.shrink_users) == (0.5, 0.3, 400.0, 0.2)
    with pytest.raises(PricingError, match="scheduler.*price_aware"):
        UserResponse.preset("yang2013")
    with pytest.raises(PricingError, match="unknown user response preset 'nope'"):
        UserResponse.preset("nope")
    assert YANG2013["power_spread"] == 2.0 and YANG2013["periods"] == tou_periods(3.0)


# ---------------------------------------------------------------- calibration
def test_calibration_hits_the_target_and_matches_the_twin(tmp_path):
    from hpctwin.experiments.incentives_whatif import power_only_system
    from hpctwin.twin.run import RunConfig, run
    wl = synthetic()
    resp, got = calibrate(wl, "frontier", 0.30, seed=1, nodes=16)
    assert got == pytest.approx(0.30, abs=0.005)
    assert 0 < resp.efficient_users < 1
    base = materialize_profiles(wl, 1)
    new, _ = resp.apply(base, FLAT, 1, system="frontier")
    e0 = predicted_job_energy_j(base, "frontier", 16).sum()
    assert 1 - predicted_job_energy_j(new, "frontier", 16).sum() / e0 == pytest.approx(got, abs=1e-12)
    # more responding jobs, more saving (the bisection's premise)
    lo = UserResponse(**{**resp.__dict__, "efficient_users": 0.2}).apply(base, FLAT, 1, system="frontier")[0]
    assert predicted_job_energy_j(lo, "frontier", 16).sum() > predicted_job_energy_j(new, "frontier", 16).sum()
    # the prediction is what the power model integrates in a real run
    sysf = power_only_system("frontier", tmp_path)
    meas = []
    for w in (base, new):
        r = run(RunConfig(workload="syn", system=sysf, nodes=16, power=True, seed=1,
                          options={"power": {"cooling": False}}), w)
        meas.append(float(r.jobs["energy_j"].sum()))
    assert 1 - meas[1] / meas[0] == pytest.approx(got, abs=1e-9)
    assert meas[0] == pytest.approx(e0, rel=1e-9)


def test_calibration_out_of_reach_and_bad_targets():
    wl = synthetic(120)
    with pytest.raises(PricingError, match="out of reach.*every user"):
        calibrate(wl, "frontier", 0.6, base=UserResponse.preset("kamatar2025-homogeneous"), nodes=16)
    with pytest.raises(PricingError, match=r"target must be a fraction in \(0, 1\)"):
        calibrate(wl, "frontier", 1.2)
    with pytest.raises(PricingError, match="gives no energy incentive"):
        calibrate(wl, "frontier", 0.3, rule=NodeHours())


# ---------------------------------------------------------------- exact behaviour
def test_shift_goes_to_the_exact_start_of_the_cheapest_period():
    tou = EnergyCharge(TimeOfUse([[0, 6, 0.3], [6, 10, 0.1], [10, 24, 0.3]]))
    wl = Workload.from_arrays("s", submit=np.array([2 * H, 7 * H, 12 * H]), runtime=np.full(3, 60.0),
                              procs=np.ones(3, dtype=int), requested_time=np.full(3, 120.0), user=np.array([0, 1, 2]))
    six_h = UserResponse(shift_users=1.0, shift_elasticity=10.0, tolerance_h=6.0)
    new, info = six_h.apply(wl, tou, seed=0)
    # 02:00 -> 06:00; 07:00 is already cheapest; 12:00 sees no cheaper price before 18:00
    assert sorted(new.submit.tolist()) == [6 * H, 7 * H, 12 * H]
    assert info["shifted"] == 1 and info["mean_shift_h"] == pytest.approx(4.0)
    day, _ = UserResponse(shift_users=1.0, shift_elasticity=10.0, tolerance_h=24.0).apply(wl, tou, seed=0)
    assert sorted(day.submit.tolist()) == [6 * H, 7 * H, 30 * H]      # 12:00 -> next day's 06:00


def test_caps_go_to_exactly_the_drawn_users():
    n, users = 30, np.arange(30) % 6
    wl = Workload.from_arrays("c", submit=np.arange(n) * 100.0, runtime=np.full(n, 600.0), procs=np.full(n, 2),
                              requested_time=np.full(n, 900.0), user=users)
    new, info = UserResponse(cap_elasticity=0.5, cap_gpu_w=300.0).apply(wl, FLAT, seed=7, system="frontier")
    rng = seeded_rng(7, "user-response")          # documented draw order: shift, cap, shrink (per user)...
    rng.random(6)
    u_cap = rng.random(6)
    chosen_users = set(np.flatnonzero(u_cap < 0.5).tolist())
    assert 0 < len(chosen_users) < 6
    capped_users = set(new.user[np.asarray(new.columns["capped"], bool)].tolist())
    assert capped_users == chosen_users
    g = np.asarray(new.columns["gpu_cap_w"], float)
    assert np.all(g[np.isin(new.user, list(chosen_users))] == 300.0)
    assert np.all(np.isnan(g[~np.isin(new.user, list(chosen_users))]))
    assert info["capped"] == int(np.isin(users, list(chosen_users)).sum())
    # capped jobs' requests grow by their stretch (profiles drawn by materialize_profiles, seed 7)
    prof = materialize_profiles(wl, 7)
    gpu, beta = prof.columns["gpu_util"][np.argsort(new.job_id)], prof.columns["compute_bound"]
    dyn = gpu * 472.0
    f = np.sqrt(np.minimum(dyn, 300.0 - 88.0) / dyn)
    st = np.where(np.isin(users, list(chosen_users)), beta * (1 / f - 1) + 1, 1.0)
    order = np.argsort(new.job_id)
    assert new.requested_time[order].tolist() == np.ceil(900.0 * st).tolist()
    assert info["cap_requests_extended"] == int(np.sum(st > 1))


def test_accepted_cap_extends_the_request_so_the_job_is_not_killed(tmp_path):
    """GPU cap 280 W on a job at utilisation 0.5, beta 0.5: dynamic GPU power 236 -> 192 W, clock
    (192/236)^(1/2) = 0.90198, stretch 0.5 (1/0.90198 - 1) + 1 = 1.05433; a job whose request equals its
    runtime (1000 s) gets ceil(1054.33) = 1055 s and completes at 1054.33 s."""
    from hpctwin.experiments.incentives_whatif import power_only_system
    from hpctwin.twin.run import RunConfig, run
    wl = one_job(util=0.5, beta=0.5, runtime=1000.0, req=1000.0)
    cap = UserResponse(cap_elasticity=1.0, cap_gpu_w=280.0)
    new, info = cap.apply(wl, FLAT, 0, system="frontier")
    st = 0.5 * (1 / math.sqrt(192 / 236) - 1) + 1
    assert st == pytest.approx(1.05433, abs=1e-5)
    assert new.requested_time[0] == 1055.0 and new.runtime[0] == 1000.0
    assert info["capped"] == 1 and info["cap_requests_extended"] == 1
    sysf = power_only_system("frontier", tmp_path)
    done = run(RunConfig(workload="cap", system=sysf, nodes=2, power=True, options={"power": {"cooling": False}}),
               new).jobs
    assert done["state"].tolist() == ["COMPLETED"] and done["end"].tolist() == pytest.approx([1000.0 * st])
    # the old behaviour (cap, request unchanged) is killed at 1000 s
    old = new.take(np.arange(1))
    old.requested_time = np.array([1000.0])
    killed = run(RunConfig(workload="cap", system=sysf, nodes=2, power=True,
                           options={"power": {"cooling": False}}), old).jobs
    assert killed["state"].tolist() == ["TIMEOUT"]
    # a cap on a job already capped lower changes nothing, so its request stays
    again, info2 = UserResponse(cap_elasticity=1.0, cap_gpu_w=400.0).apply(new, FLAT, 0, system="frontier")
    assert again.columns["gpu_cap_w"][0] == 280.0 and again.requested_time[0] == 1055.0
    assert info2["cap_requests_extended"] == 0
    with pytest.raises(PricingError, match="accepting a cap.*needs the machine"):
        cap.apply(wl, FLAT, 0)
    with pytest.raises(PricingError, match=r"cap_gpu_w = 88 W is not above the GPU idle power \(88 W\)"):
        UserResponse(cap_elasticity=1.0, cap_gpu_w=88.0).apply(wl, FLAT, 0, system="frontier")


def test_response_imports_accounting_never_the_reverse():
    import subprocess
    import sys

    import hpctwin.power.accounting as acc
    for name in ("UserResponse", "calibrate", "PRESETS"):
        assert not hasattr(acc, name)          # one home: hpctwin.power.response (no import cycle)
    # either module may be imported first
    code = ("import hpctwin.power.response, hpctwin.power.accounting; "
            "from hpctwin.power.response import UserResponse; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_efficient_choice_alternative_hand_checked():
    wl = one_job(util=0.5)
    p0 = node_w(0.5, 0.5)
    assert p0 == pytest.approx(1665.26)
    r = UserResponse(efficient_users=1.0, alternatives=((0.5, 1.2),))
    new, info = r.apply(wl, FLAT, 0, system="frontier")
    # emulated hardware at its own speed: 1.2 x the runtime, node power 0.5 / 1.2 x p0 (half the energy)
    k = (0.5 / 1.2 * p0 - IDLE) / (p0 - IDLE)
    assert new.columns["cpu_util"][0] == pytest.approx(0.5 * k) and new.columns["gpu_util"][0] == pytest.approx(0.5 * k)
    assert new.runtime[0] == pytest.approx(1200.0) and new.requested_time[0] == 2400.0
    assert predicted_job_energy_j(new, "frontier")[0] == pytest.approx(0.5 * 2 * p0 * 1000.0)
    assert info["efficient_choice"] == {"alt(E x0.5, T x1.2)": 1}
    assert info["emulation"] == {"below_idle": 0, "above_max": 0}
    # an alternative below idle power: 0.2 / 1.2 x 1665.26 = 277.5 W < 626.26 W, so the node idles for
    # 1.2 x the runtime (0.451 x the energy, not 0.2 x)
    low, info_l = UserResponse(efficient_users=1.0, alternatives=((0.2, 1.2),)).apply(wl, FLAT, 0, system="frontier")
    assert low.columns["gpu_util"][0] == 0.0 and low.runtime[0] == pytest.approx(1200.0)
    assert predicted_job_energy_j(low, "frontier")[0] == pytest.approx(2 * IDLE * 1200.0)
    assert info_l["emulation"] == {"below_idle": 1, "above_max": 0}
    # faster, hungrier hardware (E x0.9, T x0.5) needs 1.8 x p0 = 2997 W > the node's 2704.26 W maximum:
    # utilisations clipped at 1, energy 2704.26 x 500 s per node (0.812 x), counted above_max
    fast, info_f = UserResponse(efficient_users=1.0, alternatives=((0.9, 0.5),)).apply(wl, FLAT, 0, system="frontier")
    assert fast.columns["gpu_util"][0] == pytest.approx(1.0) and fast.columns["cpu_util"][0] == pytest.approx(1.0)
    assert fast.runtime[0] == pytest.approx(500.0) and fast.requested_time[0] == 1000.0   # request x 0.5 too
    assert predicted_job_energy_j(fast, "frontier")[0] == pytest.approx(2 * 2704.26 * 500.0)
    assert info_f["emulation"] == {"below_idle": 0, "above_max": 1}
    # too slow for the user: not taken
    slow, info2 = UserResponse(efficient_users=1.0, alternatives=((0.5, 2.5),), max_slowdown=2.0).apply(
        wl, FLAT, 0, system="frontier")
    assert info2["efficient_choice"] == {"alt(E x0.5, T x2.5)": 0} and slow.columns["efficient_choice"][0] == -1
    assert slow.runtime[0] == 1000.0
    # node-hour charging gives no incentive
    same, info3 = r.apply(wl, NodeHours(), 0, system="frontier")
    assert "efficient_choice" not in info3 and same.columns["gpu_util"][0] == 0.5


V100, P100 = KAMATAR_GPU_ALTERNATIVES
#: artifact powers (W): A100 1494.667, V100 881.396, P100 382.606 (power.response.KAMATAR_GPU_RUNS)
V100_POWER_RATIO = 881.3959731543624 / 1494.6666666666667       # = energy ratio / runtime ratio = 0.58970


def test_v100_choice_runs_1063x_longer_at_0627x_energy_in_the_twin(tmp_path):
    """A job choosing V100-class hardware runs 1494 / 1405 = 1.0633 x longer at the node power giving
    0.6270 x the energy, and the twin's schedule (ends, the next job's wait) sees the longer runtime."""
    from hpctwin.experiments.incentives_whatif import power_only_system
    from hpctwin.twin.run import RunConfig, run
    assert V100[1] == pytest.approx(1494.0 / 1405.0) and V100[0] / V100[1] == pytest.approx(V100_POWER_RATIO)
    # two 2-node jobs on a 2-node machine, the second submitted 10 s after the first; both pick the V100
    wl = one_job(util=0.5, n=2, runtime=1000.0, req=1000.0)
    new, info = UserResponse(efficient_users=1.0, alternatives=(V100,)).apply(wl, FLAT, 0, system="frontier")
    assert info["efficient_choice"] == {"alt(E x0.627, T x1.06)": 2}
    t_v = 1000.0 * 1494.0 / 1405.0                                 # 1063.345 s
    p_v = 1665.26 * V100_POWER_RATIO                               # 981.99 W per node, above idle
    assert p_v == pytest.approx(981.99, abs=0.01)
    assert new.runtime.tolist() == pytest.approx([t_v, t_v]) and new.requested_time.tolist() == [1064.0, 1064.0]
    k = (p_v - IDLE) / (1665.26 - IDLE)
    assert new.columns["gpu_util"] == pytest.approx([0.5 * k] * 2)
    sysf = power_only_system("frontier", tmp_path)
    res = []
    for w in (wl, new):
        res.append(run(RunConfig(workload="v100", system=sysf, nodes=2, power=True,
                                 options={"power": {"cooling": False}}), w).jobs.sort_values("job_id"))
    base, v = res
    assert base["end"].tolist() == pytest.approx([1000.0, 2000.0])
    assert v["start"].tolist() == pytest.approx([0.0, t_v]) and v["end"].tolist() == pytest.approx([t_v, 2 * t_v])
    assert (v["state"] == "COMPLETED").all()
    # the second job waits 1063.345 - 10 s instead of 990 s
    assert (v["start"] - v["submit"]).tolist() == pytest.approx([0.0, t_v - 10.0])
    assert v["energy_j"].tolist() == pytest.approx([2 * p_v * t_v] * 2, rel=1e-9)
    assert (v["energy_j"] / base["energy_j"]).tolist() == pytest.approx([0.62705] * 2, abs=5e-5)
    assert v["avg_power_w"].tolist() == pytest.approx([2 * p_v] * 2, rel=1e-9)


def test_p100_below_idle_is_floored_and_counted():
    """P100: e / t = 382.606 / 1494.667 = 0.2560 x the node power; for a 1665.26 W job that is 426.3 W,
    under Frontier's 626.26 W idle: the job idles 1.6523 x as long, 0.62139 x its energy (not 0.423 x),
    which still beats the V100's 0.6270 x: the user picks the floored P100."""
    wl = one_job(util=0.5)
    cfg = load_power_config("frontier")
    k, below, above = emulation_scale(cfg, np.array([0.5]), np.array([0.5]), *P100)
    assert k.tolist() == [0.0] and below.tolist() == [True] and above.tolist() == [False]
    # the floor binds for every node power under 626.26 / 0.25598 = 2446.5 W
    assert IDLE / (P100[0] / P100[1]) == pytest.approx(2446.5, abs=0.1)
    new, info = UserResponse(efficient_users=1.0, alternatives=(V100, P100)).apply(wl, FLAT, 0, system="frontier")
    assert info["efficient_choice"] == {"alt(E x0.627, T x1.06)": 0, "alt(E x0.423, T x1.65)": 1}
    assert info["emulation"] == {"below_idle": 1, "above_max": 0}
    t_p = 2321.485266 / 1405.0
    assert new.runtime[0] == pytest.approx(1000.0 * t_p) and new.requested_time[0] == math.ceil(2000.0 * t_p)
    e = predicted_job_energy_j(new, "frontier")[0]
    assert e == pytest.approx(2 * IDLE * 1000.0 * t_p)
    assert e / (2 * 1665.26 * 1000.0) == pytest.approx(0.62139, abs=1e-5)
    # a full-power job (2704.26 W) is above the floor: the P100 gives its measured 0.423 x
    full = one_job(util=1.0)
    newf, infof = UserResponse(efficient_users=1.0, alternatives=(P100,)).apply(full, FLAT, 0, system="frontier")
    assert infof["emulation"]["below_idle"] == 0
    assert predicted_job_energy_j(newf, "frontier")[0] == pytest.approx(P100[0] * 2 * 2704.26 * 1000.0)


def test_efficient_choice_cap_hand_checked():
    wl = one_job(util=0.5, beta=0.5)
    new, _ = UserResponse(efficient_users=1.0, choice_cap_fractions=(0.5,)).apply(wl, FLAT, 0, system="frontier")
    # GPU cap 0.5 x 560 = 280 W: dynamic 236 -> 192 W, clock (192/236)^(1/2), stretch 0.5 (1/f - 1) + 1
    f = (192 / 236) ** 0.5
    st = 0.5 * (1 / f - 1) + 1
    assert new.columns["gpu_cap_w"][0] == 280.0 and np.isnan(new.columns["cpu_cap_w"][0])
    assert new.runtime[0] == 1000.0 and new.requested_time[0] == math.ceil(2000.0 * st)
    assert predicted_job_energy_j(new, "frontier")[0] == pytest.approx(2 * node_w(0.5, 0.5, 280.0) * 1000.0 * st)
    assert node_w(0.5, 0.5, 280.0) * st / node_w(0.5, 0.5) == pytest.approx(0.94290, abs=1e-5)
    # a compute-bound job (beta = 1) at 168 W: stretch 1 / (80/236)^(1/2) = 1.718, power 1041.26 W:
    # 1.074 x the energy, so no change
    cb, info2 = UserResponse(efficient_users=1.0, choice_cap_fractions=(0.3,)).apply(one_job(beta=1.0), FLAT, 0,
                                                                                   system="frontier")
    assert node_w(0.5, 0.5, 168.0) / (80 / 236) ** 0.5 / node_w(0.5, 0.5) == pytest.approx(1.0740, abs=1e-4)
    assert info2["efficient_choice"] == {"cap 0.3 x max": 0} and "gpu_cap_w" not in cb.columns
    # at 112 W it would take 3.1 x the time: beyond max_slowdown, not an option even if cheaper
    _, info3 = UserResponse(efficient_users=1.0, choice_cap_fractions=(0.2,)).apply(one_job(beta=1.0), FLAT, 0,
                                                                                  system="frontier")
    assert info3["efficient_choice"] == {"cap 0.2 x max": 0}


def test_efficient_choice_goes_to_exactly_the_drawn_jobs():
    n = 40
    wl = one_job(n=n)
    new, info = UserResponse(efficient_users=0.5, alternatives=((0.5, 1.0),)).apply(wl, FLAT, 11, system="frontier")
    rng = seeded_rng(11, "user-response")        # per user: shift, cap, shrink; per job: shift, then choice
    for size in (3, 3, 3, n):
        rng.random(size)
    drawn = rng.random(n) < 0.5
    order = np.argsort(new.job_id)
    assert np.array_equal(np.asarray(new.columns["efficient_choice"])[order] == 0, drawn)
    assert info["efficient_choice"]["alt(E x0.5, T x1)"] == int(drawn.sum())


def test_materialize_profiles_is_seeded_and_keeps_known_values():
    wl = synthetic(50)
    wl.columns["gpu_util"] = np.full(50, 0.25)
    a, b = materialize_profiles(wl, 4), materialize_profiles(wl, 4)
    assert "cpu_util" not in wl.columns                    # input untouched
    assert np.array_equal(a.columns["cpu_util"], b.columns["cpu_util"])
    assert np.all(a.columns["gpu_util"] == 0.25)
    assert not np.array_equal(a.columns["cpu_util"], materialize_profiles(wl, 5).columns["cpu_util"])


def test_facility_cost_hand_checked():
    d = RunData(jobs=None, timeseries={"time": np.array([0.0, H]), "power_facility_w": np.array([1000.0, 2000.0])})
    # 1 kWh at 1 (00:00-01:00) + 2 kWh at 2 (01:00-02:00)
    assert facility_cost(d, TimeOfUse([[0, 1, 1.0], [1, 24, 2.0]])) == pytest.approx(5.0)


def test_user_response_bad_input():
    with pytest.raises(PricingError, match="needs a menu"):
        UserResponse(efficient_users=0.5)
    with pytest.raises(PricingError, match="max_slowdown must be a finite number >= 1"):
        UserResponse(max_slowdown=0.5)
    with pytest.raises(PricingError, match=r"alternatives\[0\] = \(-0.5, 1.0\)"):
        UserResponse(alternatives=((-0.5, 1.0),))
    with pytest.raises(PricingError, match="energy_ratio, runtime_ratio"):
        UserResponse(alternatives=(0.5,))
    with pytest.raises(PricingError, match=r"choice_cap_fractions must lie in \(0, 1\]"):
        UserResponse(choice_cap_fractions=(1.5,))
    with pytest.raises(PricingError, match="efficient_users must be >= 0"):
        UserResponse(efficient_users=-1.0)
    with pytest.raises(PricingError, match="needs the machine"):
        UserResponse.preset("kamatar2025").apply(one_job(), FLAT, 0)
    bare = Workload.from_arrays("bare", submit=np.zeros(1), runtime=np.ones(1), procs=np.ones(1, dtype=int),
                                requested_time=np.ones(1))
    with pytest.raises(PricingError, match="no cpu_util, gpu_util, compute_bound column.*materialize_profiles"):
        predicted_job_energy_j(bare, "frontier")


# ---------------------------------------------------------------- price-aware scheduler (Yang et al.)
def test_knapsack_hand_checked():
    procs, pw = np.array([4, 3, 2, 5]), np.array([400.0, 250.0, 100.0, 600.0])
    # 7 nodes: {4, 3} at 650 W and {5, 2} at 700 W; the lower power wins
    assert knapsack_max_nodes(procs, pw, 7, 700.0).tolist() == [0, 1]
    # 600 W: no 7-node subset fits; 6 nodes {4, 2} at 500 W
    assert knapsack_max_nodes(procs, pw, 7, 600.0).tolist() == [0, 2]
    assert knapsack_max_nodes(procs, pw, 7, 50.0).tolist() == []
    assert knapsack_max_nodes(procs, pw, 0, 1e9).tolist() == []


class _Model:
    def __init__(self, w):
        self.w = w

    def job_node_power_w(self, j):
        return self.w[j]


def test_price_aware_periods_and_greedy_order():
    s = PriceAwareScheduler(policy="greedy", window=2, periods=tou_periods(3.0),
                            power_model=_Model([300.0, 100.0, 200.0]))
    assert s.on_peak(9 * H) and not s.on_peak(21 * H) and not s.on_peak(7.99 * H)
    assert s.on_peak(86400 + 9 * H)
    assert s.next_wakeup(9 * H) == 20 * H and s.next_wakeup(21 * H) == 32 * H
    shifted = PriceAwareScheduler(periods=tou_periods(3.0), t0_hour=12.0)     # log time 0 is noon
    assert not shifted.on_peak(9 * H) and shifted.on_peak(0.0)

    class J:
        procs = np.ones(3, dtype=int)
        estimate = np.ones(3)

        def __len__(self):
            return 3
    s.jobs, s.total, s.procs, s.est, s._pw = J(), 3, J.procs, J.estimate, None
    q = np.array([0, 1, 2])
    assert s._order(9 * H, q, s.jobs).tolist() == [1, 0, 2]      # on-peak: low power first, window 2
    assert s._order(21 * H, q, s.jobs).tolist() == [0, 1, 2]     # off-peak: high power first
    s.window = 3
    assert s._order(9 * H, q, s.jobs).tolist() == [1, 2, 0]
    assert s._order(21 * H, q, s.jobs).tolist() == [0, 2, 1]


def test_price_aware_holds_high_power_jobs_until_off_peak(tmp_path):
    from hpctwin.experiments.incentives_whatif import power_only_system
    from hpctwin.twin.run import RunConfig, run
    sysf = power_only_system("frontier", tmp_path)
    # two 1-node jobs submitted at 09:00: L at idle utilisation (626.26 W), H at full (2704.26 W)
    wl = Workload.from_arrays("yang", submit=np.full(2, 9 * H), runtime=np.array([20 * H, H]),
                              procs=np.ones(2, dtype=int),
                              requested_time=np.array([21 * H, 2 * H]), job_id=np.array([1, 2]),
                              columns={"cpu_util": np.array([0.0, 1.0]), "gpu_util": np.array([0.0, 1.0])})

    def go(sched, opts):
        return run(RunConfig(workload="yang", system=sysf, nodes=2, power=True, scheduler=sched,
                             options={"power": {"cooling": False}, "scheduler": opts}), wl)
    easy = go("easy", {})
    assert easy.jobs["start"].tolist() == [9 * H, 9 * H]
    # budget 0.5 x 2 nodes x mean(626.26, 2704.26) W = 1665.26 W: L fits, L + H and H alone do not
    ks = go("hpctwin.schedulers.price_aware:PriceAwareScheduler", {"policy": "knapsack", "budget_fraction": 0.5,
                                                          "periods": tou_periods(3.0)})
    assert ks.jobs["start"].tolist() == [9 * H, 20 * H]           # H waits for the off-peak period
    tou = TimeOfUse(tou_periods(3.0))
    from hpctwin.power.accounting import from_result
    bill = [EnergyCharge(tou, pue_share=False).charge(from_result(r)).sum() for r in (easy, ks)]
    assert bill[1] < bill[0]
    assert bill[0] - bill[1] == pytest.approx(2704.26 * (3.0 - 1.0) / 1000.0, rel=1e-6)   # 1 h of H moved


def test_price_aware_bad_input():
    with pytest.raises(PriceAwareError, match="unknown policy 'x'"):
        PriceAwareScheduler(policy="x")
    with pytest.raises(PriceAwareError, match="window must be an integer >= 1"):
        PriceAwareScheduler(window=0)
    with pytest.raises(PriceAwareError, match="gap or overlap at hour 8"):
        PriceAwareScheduler(periods=[[0, 8, 1.0], [9, 24, 2.0]])
    with pytest.raises(PriceAwareError, match="not 24"):
        PriceAwareScheduler(periods=[[0, 20, 1.0]])
    with pytest.raises(PriceAwareError, match="budget_fraction must be a finite number > 0"):
        PriceAwareScheduler(budget_fraction=0.0)
    with pytest.raises(PriceAwareError, match="backfill must be 'easy' or 'none'"):
        PriceAwareScheduler(backfill="conservative")
    with pytest.raises(PriceAwareError, match="0 < h0 < h1 < 24"):
        tou_periods(3.0, (20.0, 8.0))
    with pytest.raises(PriceAwareError, match="price ratio"):
        tou_periods(-1.0)
    s = PriceAwareScheduler()
    s.jobs = type("J", (), {"__len__": lambda self: 1})()
    s._pw = None
    with pytest.raises(RuntimeError, match="--power on"):
        s._power()


# ---------------------------------------------------------------- other hardware on its own partition
def test_v100_choice_runs_on_its_own_partition_and_energies_add_up(tmp_path):
    """Three 2-node jobs (submits 0, 10, 20 s; 1000 s; utilisation 0.5) and two 2-node machines. With
    efficient_users 0.5 and seed 0, jobs 1 and 2 choose the V100 option and job 3 stays on Frontier.
    Job 2 starts on the V100 partition at t_v = 1063.345 s (after job 1 there), job 3 at its submit
    time 20 s on the Frontier partition although, in the single-partition emulation, Frontier's nodes
    are busy until 2 t_v (it waits 2 t_v - 20 s there). The jobs' energies and the partitions'
    facility energies add up; the summed facility power series is the two runs' series on one grid."""
    from hpctwin.experiments.incentives_whatif import (
        combine_partitions,
        partitioned_ledger,
        power_only_system,
    )
    from hpctwin.power.accounting import from_result, ledger
    from hpctwin.power.response import HOME_PARTITION, split_by_hardware
    from hpctwin.twin.run import RunConfig, run
    wl = one_job(util=0.5, n=3, runtime=1000.0, req=1000.0)            # submits 0, 10, 20 s; users 0, 1, 2
    resp = UserResponse(efficient_users=0.5, alternatives=(V100,))
    parts, info = resp.apply_partitioned(wl, FLAT, 0, system="frontier", partition_nodes=2)
    lab = resp.menu()[0]
    assert lab == "alt(E x0.627, T x1.06)" and list(parts) == [HOME_PARTITION, lab]
    assert parts[HOME_PARTITION].job_id.tolist() == [3] and parts[lab].job_id.tolist() == [1, 2]
    assert info["partitions"] == {HOME_PARTITION: 1, lab: 2}
    sysf = power_only_system("frontier", tmp_path)

    def go(w):
        return run(RunConfig(workload="p", system=sysf, nodes=2, power=True, options={"power": {"cooling": False}}), w)
    runs = {k: go(v) for k, v in parts.items()}
    t_v = 1000.0 * 1494.0 / 1405.0
    home, v = runs[HOME_PARTITION].jobs, runs[lab].jobs
    assert home["start"].tolist() == [20.0] and home["end"].tolist() == [1020.0]
    assert v["start"].tolist() == pytest.approx([0.0, t_v]) and v["end"].tolist() == pytest.approx([t_v, 2 * t_v])
    single = go(resp.apply(wl, FLAT, 0, system="frontier")[0]).jobs.sort_values("job_id")
    assert single["start"].tolist() == pytest.approx([0.0, t_v, 2 * t_v])       # one machine: job 3 queues
    p_v = 1665.26 * V100_POWER_RATIO
    assert home["energy_j"].tolist() == pytest.approx([2 * 1665.26 * 1000.0])
    assert v["energy_j"].tolist() == pytest.approx([2 * p_v * t_v] * 2, rel=1e-9)
    c = combine_partitions(runs)
    assert c.jobs["energy_j"].sum() == pytest.approx(single["energy_j"].sum(), rel=1e-12)
    assert c.jobs.sort_values("job_id")["hw_partition"].tolist() == [lab, lab, HOME_PARTITION]
    assert c.summary["partition_jobs"] == {HOME_PARTITION: 1, lab: 2}
    # waits over all jobs: 0, t_v - 10, 0; bsld (wait + run) / run: 1, (2 t_v - 10) / t_v, 1
    assert c.summary["mean_wait_s"] == pytest.approx((t_v - 10.0) / 3)
    assert c.summary["mean_bsld"] == pytest.approx((2 + (2 * t_v - 10.0) / t_v) / 3)
    # facility energy: each run's own, plus the home machine idle from its grid start (15 s, the floor of
    # its first submit 20 s on the 15 s grid) back to 0 and from 1020 s to 2 t_v
    idle_w = runs[HOME_PARTITION].summary["idle_facility_power_w"]
    rs = runs[HOME_PARTITION].summary
    idle_w *= rs["energy_facility_kwh"] / (rs["energy_facility_kwh"] - rs["energy_cooling_kwh"])
    pad = 15.0 + (2 * t_v - 1020.0)
    assert c.summary["padding_h"] == pytest.approx({HOME_PARTITION: pad / 3600.0, lab: 0.0})
    want = sum(r.summary["energy_facility_kwh"] for r in runs.values()) + idle_w * pad / 3.6e6
    assert c.summary["energy_facility_kwh"] == pytest.approx(want, rel=1e-12)
    # the summed series: on the common grid from 0, each partition's own values where it ran
    t = c.timeseries["time"][0]
    p = c.timeseries["power_facility_w"][0]
    assert t[0] == 0.0 and np.all(np.diff(t) == 15.0) and t[-1] < 2 * t_v <= t[-1] + 15.0
    ph, pv = runs[HOME_PARTITION].timeseries["power_facility_w"][0], runs[lab].timeseries["power_facility_w"][0]
    assert p[0] == pytest.approx(idle_w + pv[0]) and p[1] == pytest.approx(ph[0] + pv[1])
    assert p[-1] == pytest.approx(idle_w + pv[-1])
    # cost: each partition priced on its own run
    led = partitioned_ledger(c, FLAT)
    each = [ledger(from_result(r), FLAT) for r in runs.values()]
    assert led["cost"].sum() == pytest.approx(sum(x["cost"].sum() for x in each))
    assert led["user"].tolist() == [0, 1, 2]
    # a partition too small for a job keeps it home; split_by_hardware of an untouched workload: all home
    p1, i1 = resp.apply_partitioned(wl, FLAT, 0, system="frontier", partition_nodes=1)
    assert list(p1) == [HOME_PARTITION] and len(p1[HOME_PARTITION]) == 3 and i1["efficient_choice"][lab] == 0
    assert list(split_by_hardware(wl, resp)) == [HOME_PARTITION]
    with pytest.raises(PricingError, match="partition_nodes must be an integer >= 1, got 0"):
        resp.apply_partitioned(wl, FLAT, 0, system="frontier", partition_nodes=0)


def test_calibration_with_partitions_of_the_same_size_is_unchanged():
    """Jobs' energy does not depend on where a job runs, so a partition as large as the machine (the
    what-if's default) gives the same fit; a smaller one keeps the large jobs home and saves less."""
    wl = synthetic(200)
    a, got_a = calibrate(wl, "frontier", 0.30, seed=1, nodes=16)
    b, got_b = calibrate(wl, "frontier", 0.30, seed=1, nodes=16, partition_nodes=16)
    assert (a.efficient_users, got_a) == (b.efficient_users, got_b)
    base = materialize_profiles(wl, 1)
    e0 = predicted_job_energy_j(base, "frontier", 16).sum()
    full = a.apply(base, FLAT, 1, system="frontier")[0]
    small = a.apply(base, FLAT, 1, system="frontier", partition_nodes=2)[0]
    assert 1 - predicted_job_energy_j(small, "frontier", 16).sum() / e0 < got_a
    big = small.procs > 2
    assert np.all((np.asarray(small.columns["efficient_choice"])[big] < 0)
                  | (np.asarray(small.columns["efficient_choice"])[big] >= len(a.alternatives)))
    assert np.any((np.asarray(full.columns["efficient_choice"])[big] >= 0)
                  & (np.asarray(full.columns["efficient_choice"])[big] < len(a.alternatives)))
