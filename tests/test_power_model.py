"""PowerModel: hand-checked power figures, exact energy accounting, caps, traces, time series."""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.power.chain import Chain
from hpctwin.power.config import parse_power
from hpctwin.power.model import PowerModel
from hpctwin.power.replay import context, replay
from hpctwin.twin.system import SystemSpec, load_system


# ------------------------------------------------------------------ a tiny hand-checkable machine
def tiny_spec(**power) -> SystemSpec:
    """4 nodes, 2 per chassis, 1 CPU + 1 GPU per node; round numbers."""
    p = dict(cpu_idle_w=10.0, cpu_max_w=110.0, gpu_idle_w=20.0, gpu_max_w=220.0, mem_w=5.0, nic_w=2.5,
             nics_per_node=2, nvme_w=0.0, dcdc_loss_w=2.0, dcdc_efficiency=0.5, nodes_per_chassis=2,
             chassis_per_rack=1, racks_per_cdu=1, cdus=2, rectifiers_per_chassis=2, rectifier_loss_w=1.0,
             rectifier_efficiency=0.8, switches_per_chassis=1, switch_w=4.0, cdu_pump_w=100.0)
    p.update(power)
    return SystemSpec(name="tiny", nodes=4, cpus_per_node=1, gpus_per_node=1, path="tiny.toml", power=p)


def tiny_ctx(spec, submit, procs, runtime, columns):
    return context(spec.nodes, submit, procs, runtime, system=spec, columns=columns)


def test_tiny_breakdown_by_hand():
    spec = tiny_spec()
    cfg = parse_power(spec.power, nodes=4, cpus_per_node=1, gpus_per_node=1, path="tiny.toml")
    # idle node: 10 + 20 + 5 + 2*2.5 = 40 W; max node: 110 + 220 + 10 = 340 W
    assert cfg.node_idle_w == 40.0 and cfg.node_max_w == 340.0
    ch = Chain(cfg)
    b = ch.breakdown(np.array([40.0, 340.0, 40.0, 40.0]))
    # node inputs (P+2)/0.5: 84, 684, 84, 84; chassis out (+4 W switch): 772, 172
    # rectifiers (2 per chassis, equal): (P + 2*1)/0.8 -> 967.5, 217.5
    assert b["it_w"] == pytest.approx(460.0 + 8.0)
    assert b["rack_input_w"] == pytest.approx(967.5 + 217.5)
    assert b["dcdc_loss_w"] == pytest.approx(936.0 - 460.0)
    assert b["rectifier_loss_w"] == pytest.approx(1185.0 - 944.0)
    assert b["facility_w"] == pytest.approx(1185.0 + 200.0)


def test_staged_rectifiers_by_hand():
    spec = tiny_spec(rectifier_sharing="staged", rectifier_peak_w=500.0)
    cfg = parse_power(spec.power, nodes=4, cpus_per_node=1, gpus_per_node=1)
    ch = Chain(cfg)
    b = ch.breakdown(np.array([40.0, 340.0, 40.0, 40.0]))
    # chassis 0 carries 772 W -> ceil(772/500) = 2 rectifiers; chassis 1 carries 172 W -> 1 rectifier
    assert b["rack_input_w"] == pytest.approx((772 + 2) / 0.8 + (172 + 1) / 0.8)


def test_job_energy_and_identity_exact():
    spec = tiny_spec()
    cols = {"cpu_util": np.array([1.0, 0.5]), "gpu_util": np.array([1.0, 0.0]), "compute_bound": np.array([1.0, 1.0])}
    m = PowerModel(spec, cooling=False)
    m.bind(tiny_ctx(spec, [0.0, 0.0], [2, 1], [100.0, 50.0], cols))
    replay(m, [10.0, 30.0], [100.0, 50.0], [np.array([0, 1]), np.array([2])], end=200.0)
    e = m.job_columns()["energy_j"]
    # job 0: 2 nodes x 340 W x 100 s; job 1: (60 + 20 + 10) W x 50 s
    assert e[0] == pytest.approx(68000.0)
    assert e[1] == pytest.approx(4500.0)
    assert m.job_columns()["avg_power_w"][1] == pytest.approx(90.0)
    br = m.energy_breakdown_j()
    assert br["jobs"] == pytest.approx(e.sum(), rel=1e-12)
    # facility energy by hand: idle facility (4 idle nodes) for 200 s + job deltas through the chain
    k = 1 / (0.5 * 0.8)
    idle_fac = Chain(m.cfg).uniform_breakdown(0, 0)["facility_w"]
    fac = idle_fac * 200 + k * (2 * 300 * 100 + 50 * 50)
    assert br["facility"] == pytest.approx(fac, rel=1e-12)
    assert br["jobs"] + br["idle"] + br["loss"] + br["cooling"] == pytest.approx(br["facility"], rel=1e-12)


def test_timeseries_exact_interval_means():
    spec = tiny_spec()
    cols = {"cpu_util": np.array([1.0]), "gpu_util": np.array([1.0]), "compute_bound": np.array([0.0])}
    m = PowerModel(spec, cooling=False)
    m.bind(tiny_ctx(spec, [0.0], [1], [20.0], cols))
    replay(m, [5.0], [20.0], [np.array([3])], end=30.0)
    ts = m.timeseries(np.array([0.0, 15.0]), 15.0)
    jobs, unit = ts["power_jobs_w"]
    assert unit == "W"
    # job draws 340 W on [5, 25): interval 0 holds 10 s, interval 1 holds 10 s
    assert jobs == pytest.approx([340 * 10 / 15, 340 * 10 / 15])
    it = ts["power_it_w"][0]
    assert it == pytest.approx(4 * 40 + 8 + (340 - 40) * 10 / 15)
    # integral of the facility series equals the summary energy
    fac = ts["power_facility_w"][0]
    assert fac.sum() * 15.0 == pytest.approx(m.energy_breakdown_j()["facility"], rel=1e-12)
    cdu = ts["cdu_heat_w"][0]
    assert cdu.shape == (2, 2)
    assert cdu.sum(axis=1) == pytest.approx(ts["power_rack_w"][0])


def test_per_job_gpu_cap_stretches_runtime():
    spec = tiny_spec(job_gpu_cap_w=70.0, cap_power_exponent=1.0)
    cols = {"cpu_util": np.array([0.0]), "gpu_util": np.array([1.0]), "compute_bound": np.array([0.5])}
    m = PowerModel(spec, cooling=False)
    m.bind(tiny_ctx(spec, [0.0], [1], [100.0], cols))
    out = replay(m, [0.0], [100.0], [np.array([0])])
    # GPU dynamic 200 W capped to 50 W -> clock ratio 0.25 (alpha = 1); beta = 0.5:
    # stretch = 0.5 * (1/0.25 - 1) + 1 = 2.5 -> finishes at 250 s
    assert out["end"][0] == pytest.approx(250.0)
    # node draws 10 + 70 + 10 = 90 W for 250 s
    assert m.job_columns()["energy_j"][0] == pytest.approx(90.0 * 250.0)


def test_memory_bound_job_not_slowed_by_cap():
    spec = tiny_spec(job_gpu_cap_w=70.0)
    cols = {"cpu_util": np.array([0.0]), "gpu_util": np.array([1.0]), "compute_bound": np.array([0.0])}
    m = PowerModel(spec, cooling=False)
    m.bind(tiny_ctx(spec, [0.0], [1], [100.0], cols))
    out = replay(m, [0.0], [100.0], [np.array([0])])
    assert out["end"][0] == pytest.approx(100.0)


def test_facility_cap_throttles_and_holds():
    spec = tiny_spec(cap_power_exponent=1.0)
    cfg = parse_power(spec.power, nodes=4, cpus_per_node=1, gpus_per_node=1)
    ch = Chain(cfg)
    idle = ch.uniform_breakdown(0, 0)["facility_w"]
    full = ch.uniform_breakdown(1, 1)["facility_w"]
    cap = idle + 0.5 * (full - idle)
    spec.power["facility_cap_w"] = cap
    cols = {"cpu_util": np.ones(2), "gpu_util": np.ones(2), "compute_bound": np.ones(2)}
    m = PowerModel(spec, cooling=False)
    m.bind(tiny_ctx(spec, [0.0, 0.0], [2, 2], [100.0, 100.0], cols))
    out = replay(m, [0.0, 0.0], [100.0, 100.0], [np.array([0, 1]), np.array([2, 3])])
    # every node at full draw would be the machine peak; the cap allows half of the dynamic power:
    # theta = 0.5, clock ratio 0.5 (alpha = 1), beta = 1 -> both jobs take 200 s
    assert out["end"] == pytest.approx([200.0, 200.0])
    assert m.peak_electrical_w <= cap * (1 + 1e-12)
    assert m.summary()["peak_electrical_power_w"] == pytest.approx(cap)


def test_facility_cap_below_idle_rejected_with_the_floor():
    # idle machine: 4 x 40 W nodes -> node inputs (40 + 2) / 0.5 = 84 W; two chassis of 2 x 84 + 4 W
    # switch = 172 W, rectifiers (172 + 2 x 1) / 0.8 = 217.5 W each: 435 W rack input + 2 CDU pumps of 100 W
    spec = tiny_spec(facility_cap_w=10.0)
    m = PowerModel(spec, cooling=False)
    with pytest.raises(ValueError, match=r"power cap 10 W is below the idle power of the machine, 635 W at the "
                                         r"facility .* by 625 W: no schedule can hold it; give a cap of at least 635 W"):
        m.bind(tiny_ctx(spec, [0.0], [1], [10.0], {}))


def test_trace_profile_energy_and_rate_change():
    spec = tiny_spec()
    tr = np.empty(1, dtype=object)
    tr[0] = np.array([0.0, 1.0, 0.5])
    cols = {"cpu_util_trace": tr, "gpu_util": np.zeros(1), "util_trace_dt": np.array([10.0])}
    m = PowerModel(spec, cooling=False)
    m.bind(tiny_ctx(spec, [0.0], [1], [30.0], cols))
    m.on_start(0.0, 0, np.array([1]))
    m.on_rate_change(5.0, 0, 0.5)           # from t=5 the trace advances at half speed
    m.on_finish(55.0, 0)
    m.finalize(60.0)
    # CPU 10 + u*100 W, rest 30 W: sample 0 (30 W... 40 W total) on [0, 15) (5 s at rate 1 + 10 s at 0.5),
    # sample 1 (140 W) on [15, 35), sample 2 (90 W) on [35, 55)
    assert m.job_columns()["energy_j"][0] == pytest.approx(40 * 15 + 140 * 20 + 90 * 20)
    br = m.energy_breakdown_j()
    assert br["jobs"] == pytest.approx(40 * 15 + 140 * 20 + 90 * 20)
    ts = m.timeseries(np.arange(0.0, 60.0, 5.0), 5.0)
    assert ts["power_jobs_w"][0][3:7] == pytest.approx([140.0] * 4)


def test_default_profiles_are_seeded_and_documented_range():
    spec = tiny_spec()
    a, b = PowerModel(spec, cooling=False), PowerModel(spec, cooling=False)
    a.bind(tiny_ctx(spec, np.zeros(50), np.ones(50), np.full(50, 10.0), {}))
    b.bind(tiny_ctx(spec, np.zeros(50), np.ones(50), np.full(50, 10.0), {}))
    assert np.array_equal(a.cpu_util, b.cpu_util) and np.array_equal(a.gpu_util, b.gpu_util)
    assert np.all((a.cpu_util >= 0) & (a.cpu_util <= 1))
    assert 0.5 < a.cpu_util.mean() < 0.8      # Beta(4, 2) has mean 2/3


def test_projection_matches_actual_start():
    spec = tiny_spec()
    cols = {"cpu_util": np.array([0.7]), "gpu_util": np.array([0.3]), "compute_bound": np.array([0.5])}
    m = PowerModel(spec, cooling=False)
    m.bind(tiny_ctx(spec, [0.0], [3], [10.0], cols))
    proj = m.projected_facility_power_w(3, job=0)
    m.on_start(0.0, 0, np.array([0, 1, 2]))
    assert m.electrical_power_w() == pytest.approx(proj)


# ------------------------------------------------------------------ Frontier figures (RAPS)
def raps_peak_formula(node_w: float) -> float:
    """RAPS PowerManager.get_peak_power, by hand: 74 racks x 8 chassis of 16 nodes + 25 CDUs."""
    node_in = (node_w + 13) / 0.98
    chassis_out = 16 * node_in + 4 * 250
    chassis_in = 4 * ((chassis_out / 4 + 17) / 0.96)
    return 74 * 8 * chassis_in + 25 * 8473.47


def test_frontier_raps_layout_idle_and_peak():
    spec = load_system("frontier")
    cfg = parse_power(spec.power, nodes=9472, cpus_per_node=1, gpus_per_node=4, path=spec.path)
    ch = Chain(cfg)
    idle = ch.uniform_breakdown(0, 0)["facility_w"]
    peak = ch.uniform_breakdown(1, 1)["facility_w"]
    assert idle == pytest.approx(raps_peak_formula(90 + 4 * 88 + 74.26 + 80 + 30), rel=1e-12)
    assert peak == pytest.approx(raps_peak_formula(280 + 4 * 560 + 74.26 + 80 + 30), rel=1e-12)
    assert idle / 1e6 == pytest.approx(7.3065, abs=5e-4)      # "idles near 7.3 MW"
    assert peak / 1e6 == pytest.approx(28.228, abs=5e-4)      # "tops out near 28.2 MW"


def test_frontier_default_file_9408_nodes():
    spec = load_system("frontier")
    m = PowerModel(spec, cooling=False)
    m.bind(context(9408, [0.0], [1], [1.0], system=spec))
    assert m.layout.n_slots == 9472 and m.layout.n_cdu == 25
    assert m.idle_facility_w / 1e6 == pytest.approx(7.3065, abs=5e-4)
    # 64 unschedulable slots stay idle at peak
    assert m.peak_facility_w / 1e6 == pytest.approx(28.0865, abs=5e-4)
    # HPL-like load (TOP500: 21.1-22.8 MW) sits between idle and peak
    assert m.idle_facility_w < 21.1e6 < 22.8e6 < m.peak_facility_w
    spec.power["empty_slots"] = "off"
    m2 = PowerModel(spec, cooling=False)
    m2.bind(context(9408, [0.0], [1], [1.0], system=spec))
    assert m2.layout.n_chassis == 588
    assert m2.idle_facility_w < m.idle_facility_w


def test_energy_identity_random_run_with_cooling():
    spec = load_system("generic")
    rng = np.random.default_rng(1)
    n = 300
    submit = np.sort(rng.uniform(0, 50_000, n))
    run = rng.uniform(10, 5000, n)
    procs = rng.integers(1, 16, n)
    m = PowerModel(spec)
    m.bind(context(256, submit, procs, run, system=spec))
    # a feasible non-overlapping placement: node blocks by job index modulo 16 -> give each job its own
    # nodes by running jobs on distinct node ranges of a 256-node machine (16 slots of 16 nodes)
    nodes = [np.arange(16 * (j % 16), 16 * (j % 16) + procs[j]) for j in range(n)]
    start = submit.copy()
    free_at = np.zeros(16)
    for j in range(n):               # serialise jobs that share a slot
        s = j % 16
        start[j] = max(submit[j], free_at[s])
        free_at[s] = start[j] + run[j]
    replay(m, start, run, nodes)
    br = m.energy_breakdown_j()
    e = m.job_columns()["energy_j"]
    assert np.nansum(e) == pytest.approx(br["jobs"], rel=1e-9)
    assert br["jobs"] + br["idle"] + br["loss"] + br["cooling"] == pytest.approx(br["facility"], rel=1e-12)
    s = m.summary()
    assert s["energy_facility_kwh"] == pytest.approx(br["facility"] / 3.6e6)
    assert s["energy_cost"] == pytest.approx(s["energy_facility_kwh"] * 0.094)
    assert 1.0 < s["mean_pue"] < 1.1
    grid = np.arange(0.0, m.end, 15.0)
    ts = m.timeseries(grid, 15.0)
    for key, (v, unit) in ts.items():
        assert len(v) == len(grid) and unit
    # exact interval means integrate back to the exact energies
    assert ts["power_jobs_w"][0].sum() * 15.0 == pytest.approx(br["jobs"], rel=1e-9)


def test_cap_not_held_between_events_by_a_trace_is_reported():
    # a CPU trace 0 -> 1 every 10 s: the throttle acts at events with the trace's mean, so the samples
    # of the full-load phases exceed a cap set just above the mean draw
    spec = tiny_spec()
    tr = np.empty(1, dtype=object)
    tr[0] = np.array([0.0, 1.0] * 5)
    cols = {"cpu_util_trace": tr, "gpu_util": np.zeros(1), "util_trace_dt": np.array([10.0])}
    probe = PowerModel(spec, cooling=False)
    probe.bind(tiny_ctx(spec, [0.0], [4], [100.0], cols))
    idle_w = probe.idle_facility_w
    cap = idle_w + 4 * 0.6 * 100.0 / (0.5 * 0.8)        # above the mean (0.5 x 100 W per node), below the peak
    m = PowerModel(spec, cooling=False, facility_cap_w=cap, sample_dt=10.0)
    m.bind(tiny_ctx(spec, [0.0], [4], [100.0], cols))
    replay(m, [0.0], [100.0], [np.arange(4)])
    rep = m.summary()["power_cap"]
    assert rep["held"] is False and rep["samples_over_cap"] == 5
    assert rep["why"].startswith("utilisation traces change job power between events")
