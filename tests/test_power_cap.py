"""A facility power cap that holds at every sample (issue 13 item 1): the electrical limit that
bounds the cooling plant, start refusals (wrapper and gate) reported to the policy, throttling of
running jobs, and a loud report when the cap cannot be held."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from hpctwin.power.cap import PowerCap, electrical_limit_w, steady_plant_w, worst_wet_bulb_c
from hpctwin.power.cooling import run_cooling
from hpctwin.schedulers.base import Scheduler
from hpctwin.twin.run import RunConfig, load_workload, run
from hpctwin.twin.system import load_system

KTH = Path("/work/shared/datasets/KTH-SP2/KTH-SP2-1996-2.1-cln.swf.gz")


def frontier_cooling(nodes: int = 100):
    from hpctwin.power.model import PowerModel
    from hpctwin.power.replay import context
    spec = load_system("frontier")
    m = PowerModel(spec)
    m.bind(context(nodes, [0.0], [1], [1.0], system=spec))
    return m


def test_electrical_limit_without_cooling_is_the_cap():
    w, level = electrical_limit_w(1000.0, 50.0, None)
    assert level == "facility" and w == pytest.approx(1000.0, rel=1e-8) and w <= 1000.0
    assert electrical_limit_w(math.inf, 50.0, None)[0] == math.inf


def test_electrical_limit_leaves_room_for_the_steady_plant():
    m = frontier_cooling()
    cdu = m.chain.cdu_pumps_w
    cap = 213_560.0
    limit, level = electrical_limit_w(cap, cdu, m.cool_cfg)
    wb = worst_wet_bulb_c(m.cool_cfg)
    plant = steady_plant_w(m.cool_cfg, limit - cdu, wb)
    assert level == "facility"
    assert limit + plant <= cap and limit + plant == pytest.approx(cap, rel=1e-7)   # tight in steady state
    assert limit < cap and plant > 0


def test_fmu_backend_caps_the_electrical_power_only():
    m = frontier_cooling()
    import dataclasses
    fmu = dataclasses.replace(m.cool_cfg, backend="fmu")
    assert electrical_limit_w(2e5, 100.0, fmu)[1] == "electrical"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_any_rack_history_under_the_limit_keeps_every_facility_sample_under_the_cap(seed):
    """The bound of power.cap: rack heat <= R at all times -> rack + CDU + plant <= cap per sample,
    whatever the history (the plant's lags only average past heat)."""
    m = frontier_cooling()
    cdu = m.chain.cdu_pumps_w
    cap = 200_000.0
    limit, _ = electrical_limit_w(cap, cdu, m.cool_cfg)
    r_max = limit - cdu
    rng = np.random.default_rng(seed)
    n = 4000
    rack = np.clip(np.repeat(rng.uniform(0.3, 1.2, n // 40), 40) * r_max, 0.0, r_max)
    rack[rng.random(n) < 0.1] = r_max                           # spikes at the limit
    grid = 15.0 * np.arange(n)
    out = run_cooling(m.cool_cfg, rack, grid, 15.0)
    fac = rack + cdu + out["plant_w"]
    assert fac.max() <= cap
    assert fac.max() > 0.99 * cap                              # and the bound is not loose


def _kth(n: int):
    wl = load_workload(str(KTH))
    return wl.take(np.arange(n))


@pytest.mark.skipif(not KTH.exists(), reason="KTH-SP2 log not available")
def test_kth_frontier_cap_holds_at_every_sample(tmp_path):
    """The issue's case: 2,000 KTH-SP2 jobs on 100 Frontier nodes, --power-cap 213560: was 261,791 W
    peak with 12 % of the samples above the cap."""
    cfg = RunConfig(workload="kth2000", system="frontier", nodes=100, power=True, power_cap=213560.0,
                    out=str(tmp_path / "r"))
    r = run(cfg, workload=_kth(2000))
    fac = r.timeseries["power_facility_w"][0]
    assert np.nanmax(fac) <= 213560.0
    rep = r.summary["power_cap"]
    assert rep["held"] is True and rep["samples_over_cap"] == 0 and rep["max_sampled_facility_w"] <= 213560.0
    assert rep["level"].startswith("facility")
    assert r.summary["peak_facility_power_w"] <= 213560.0
    gate = r.summary["gates"]["power-cap"]
    assert gate["refused_starts"] > 0 and gate["over_cap_starts"] > 0         # 100-node jobs alone exceed it
    assert gate["refusals"] > gate["refused_starts"]                          # with the rest of their passes
    assert r.summary["scheduler"] == "easy"                                    # a gate, not a wrapper
    assert rep["throttled_s"] > 0 and rep["min_throttle"] < 1.0              # ... and are throttled
    written = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert written["power_cap"]["held"] is True


def test_synthetic_cap_holds_with_throttle_alone_and_with_refusals():
    spec = load_system("generic")
    common = dict(workload="synthetic:jobs=300,nodes=64", system="generic", nodes=64, power=True, seed=3)
    free = run(RunConfig(scheduler="easy", **common))
    peak = float(np.nanmax(free.timeseries["power_facility_w"][0]))
    idle = free.summary["idle_facility_power_w"]
    cap = idle + 0.5 * (peak - idle)
    for kw in ({"options": {"power": {"facility_cap_w": cap}}}, {"power_cap": cap}):
        r = run(RunConfig(scheduler="easy", **common, **kw))
        fac = r.timeseries["power_facility_w"][0]
        assert np.nanmax(fac) <= cap, kw
        assert r.summary["power_cap"]["held"] is True
    assert spec.cooling                                   # the cap counted the cooling plant


def test_cap_below_idle_is_refused_with_the_floor():
    with pytest.raises(ValueError, match=r"power cap 100 W is below the idle power of the machine, .* W at the "
                                         r"facility .*no schedule can hold it"):
        run(RunConfig(workload="synthetic:jobs=20,nodes=8", system="generic", nodes=8, power=True, seed=1,
                      power_cap=100.0))


def test_a_cap_not_held_is_said_in_the_printed_summary():
    from hpctwin.power.cap import cap_summary_line
    rep = {"cap_w": 1000.0, "level": "facility: ...", "held": False, "samples_over_cap": 3,
           "fraction_samples_over_cap": 0.25, "max_excess_w": 12.0,
           "why": "utilisation traces change job power between events, where the throttle does not act"}
    assert cap_summary_line(rep) == ("1,000 W at the facility: NOT HELD: 3 samples (25.0 %) above it, by up to 12 W; "
                                     "why: utilisation traces change job power between events, where the throttle "
                                     "does not act")


class Recorder(Scheduler):
    """Starts every waiting job that fits, in queue order; records refusals."""

    name = "recorder"

    def __init__(self):
        self.refusals = []

    def schedule(self, now, queue, cluster):
        free, out = cluster.free, []
        for j in queue.tolist():
            if self.jobs.procs[j] <= free:
                out.append(j)
                free -= int(self.jobs.procs[j])
        return out

    def on_refused(self, now, job, reason):
        self.refusals.append((now, job, reason))


def _cap_case():
    from hpctwin.twin.workload import Workload
    wl = Workload.from_arrays("w", submit=[0.0] * 6, runtime=[600.0] * 6, procs=[4] * 6, requested_time=[900.0] * 6)
    probe = run(RunConfig(workload="w", scheduler="fcfs", system="generic", nodes=16, power=True), workload=wl)
    idle = probe.summary["idle_facility_power_w"]
    return wl, idle + 0.5 * (probe.summary["max_facility_power_w"] - idle)


def _with_policy(policy, cfg, wl):
    from hpctwin.twin import run as run_mod
    real = run_mod.make_scheduler
    try:
        run_mod.make_scheduler = lambda *a, **k: policy
        return run(cfg, workload=wl)
    finally:
        run_mod.make_scheduler = real


def test_gate_reports_every_refused_start_to_the_policy():
    wl, cap = _cap_case()
    inner = Recorder()
    r = _with_policy(inner, RunConfig(workload="w", scheduler="fcfs", system="generic", nodes=16, power=True,
                                      power_cap=cap), wl)
    gate = r.summary["gates"]["power-cap"]
    assert gate["refused_starts"] > 0 and len(inner.refusals) == gate["refusals"] > gate["refused_starts"]
    later = [x for x in inner.refusals if x[2].endswith("(refused with an earlier start of this pass)")]
    assert len(inner.refusals) - len(later) == gate["refused_starts"]
    assert all(x[2].startswith("power cap: projected") for x in inner.refusals)
    assert r.summary["power_cap"]["held"] is True


def test_wrapper_reports_every_refused_start_to_the_inner_policy():
    from hpctwin.schedulers.power_aware import PowerAwareScheduler
    wl, cap = _cap_case()
    inner = Recorder()
    wrapper = PowerAwareScheduler(inner=inner, cap=cap)
    r = _with_policy(wrapper, RunConfig(workload="w", scheduler="fcfs", system="generic", nodes=16, power=True,
                                        options={"power": {"facility_cap_w": cap}}), wl)
    params = r.summary["scheduler_params"]
    assert params["name"] == "power-aware(recorder)" and params["refused_starts"] > 0
    assert len(inner.refusals) == params["refused_starts"] + params["refused_after"]
    first = [x for x in inner.refusals if x[2].startswith("power cap: projected")]
    assert len(first) == params["refused_starts"]
    assert all(x[2].startswith("power cap:") for x in inner.refusals)
    assert r.summary["power_cap"]["held"] is True


def test_gate_and_wrapper_make_the_same_decisions():
    wl = checks_workload()
    base = dict(workload="w", system="generic", nodes=16, power=True)
    probe = run(RunConfig(scheduler="easy", **base), workload=wl)
    idle = probe.summary["idle_facility_power_w"]
    cap = idle + 0.4 * (probe.summary["max_facility_power_w"] - idle)
    a = run(RunConfig(scheduler="easy", power_cap=cap, **base), workload=wl)
    b = run(RunConfig(scheduler="hpctwin.schedulers.power_aware:PowerAwareScheduler",
                      options={"scheduler": {"inner": "easy", "cap": cap}, "power": {"facility_cap_w": cap}}, **base),
            workload=wl)
    assert a.jobs.start.tolist() == b.jobs.start.tolist() and a.jobs.nodes.tolist() == b.jobs.nodes.tolist()
    assert a.summary["gates"]["power-cap"]["refused_starts"] == b.summary["scheduler_params"]["refused_starts"] > 0


def checks_workload():
    from hpctwin.schedulers.checks import workloads
    return workloads()["mixed"]


def test_cap_series_is_applied_by_the_throttle_at_its_change_time():
    """A cap that falls mid-run: the throttle acts at the change (a model event), not at the next job event."""
    from hpctwin.twin.workload import Workload
    wl = Workload.from_arrays("w", submit=[0.0], runtime=[3600.0], procs=[16], requested_time=[1e6])
    common = dict(workload="w", scheduler="fcfs", system="generic", nodes=16, power=True)
    free = run(RunConfig(**common, options={"power": {"cooling": False}}), workload=wl)
    full = free.summary["peak_electrical_power_w"]
    idle = free.summary["idle_facility_power_w"]
    low = idle + 0.3 * (full - idle)
    r = run(RunConfig(**common, options={"power": {"cooling": False, "facility_cap_w": [[0.0, 1e12], [1800.0, low]]}}),
            workload=wl)
    fac = r.timeseries["power_facility_w"][0]
    t = r.timeseries["time"][0]
    assert np.all(fac[t >= 1800.0] <= low * (1 + 1e-9))
    assert np.all(fac[t + 15.0 <= 1800.0] == pytest.approx(full))
    assert r.jobs["elapsed"].iloc[0] > 3600.0                 # slowed after the drop
    rep = r.summary["power_cap"]
    assert rep["held"] is True and rep["cap_series"] == [(0.0, 1e12), (1800.0, low)]


def test_power_cap_class_grid_means():
    c = PowerCap([(15.0, 100.0), (25.0, 50.0)])
    np.testing.assert_allclose(c.mean_on_grid(np.array([10.0, 20.0, 30.0]), 10.0), [math.inf, 75.0, 50.0])
    np.testing.assert_allclose(c.mean_on_grid(np.array([20.0, 30.0]), 10.0), [75.0, 50.0])
    assert PowerCap(5.0).describe() == {"cap_w": 5.0}


def test_gate_refuses_with_the_models_decision():
    from hpctwin.power.capgate import PowerCapGate

    class Model:
        capped = True
        units_per_node = 1
        cap = PowerCap(1000.0)

        def admit(self, now, job, n):
            return (n <= 2, 900.0 + 100.0 * n, 1000.0)

    class View:
        running_jobs = np.array([3])

    class Idle:
        running_jobs = np.array([], dtype=int)

    g = PowerCapGate(Model())
    g.bind(None)
    g.begin_pass(0.0, View())
    assert g.admit(0.0, 0, np.arange(2), View()) is None
    ref = g.admit(0.0, 1, np.arange(3), View())
    assert ref.rest_of_pass and ref.reason.startswith("power cap: projected 1,200 W at full speed > limit 1,000 W")
    g.begin_pass(1.0, Idle())
    assert g.admit(1.0, 1, np.arange(5), Idle()) is None and g.admitted_over_cap == 1   # alone: admitted
    assert g.describe() == {"name": "power-cap", "refused_starts": 1, "over_cap_starts": 1, "margin": 0.0}
