"""Serving power fed into the facility power model (twin.serving.power_feed, issue 16 item 2).

Hand-checked on a 2-node machine (1 CPU + 1 GPU a node, the round numbers of test_power_model's tiny
machine) with one serving instance of the constant-time engine (every iteration 10 ms) on H100 phase
power (Splitwise: idle 75, prompt 700, token 380 W per GPU).
"""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.datasets.serving_traces import ServingRequest
from hpctwin.power.model import PowerModel
from hpctwin.power.replay import context
from hpctwin.schedulers.registry import make_scheduler
from hpctwin.twin.contract import ModelContext
from hpctwin.twin.models import BUILTIN, ModelSetup, build_models
from hpctwin.twin.run import RunConfig, job_table, prepare
from hpctwin.twin.serving.batch import ServingBatchConfig, ServingBatchModel
from hpctwin.twin.serving.held import attach_held
from hpctwin.twin.simulation import Simulation
from hpctwin.twin.system import SystemSpec

from .test_serving_batch import DT, make_const, workload

K = 1.0 / (0.5 * 0.8)        # facility W per node W above idle (DC-DC 0.5, rectifiers 0.8)
IDLE_FAC = 317.5             # W: 2 idle nodes (40 W -> (40+2)/0.5 = 84 W in) + 4 W switch -> 172 W
                             # chassis; 2 rectifiers (172 + 2)/0.8 = 217.5 W; + 100 W CDU pump


def spec2(**power) -> SystemSpec:
    p = dict(cpu_idle_w=10.0, cpu_max_w=110.0, gpu_idle_w=20.0, gpu_max_w=220.0, mem_w=5.0, nic_w=2.5,
             nics_per_node=2, nvme_w=0.0, dcdc_loss_w=2.0, dcdc_efficiency=0.5, nodes_per_chassis=2,
             chassis_per_rack=1, racks_per_cdu=1, cdus=1, rectifiers_per_chassis=2, rectifier_loss_w=1.0,
             rectifier_efficiency=0.8, switches_per_chassis=1, switch_w=4.0, cdu_pump_w=100.0, cap_power_exponent=1.0)
    p.update(power)
    return SystemSpec(name="tiny2", nodes=2, cpus_per_node=1, gpus_per_node=1, path="tiny2.toml", power=p)


def run(rows, reqs, power=True, spec=None, make=make_const, **cfg):
    """(serving model, power model or None, result) on the 2-node machine; every job's CPU at idle
    except batch jobs (CPU and GPU at full, compute-bound). ``make``: the instance factory."""
    c = dict(trace="test", start_s=10.0, interval_s=15.0, startup_s=5.0, policy="fixed", instances=1,
             min_instances=1, max_instances=1, slots=4, hardware="h100-80gb")
    c.update(cfg)
    m = ServingBatchModel(ServingBatchConfig(**c), [ServingRequest(*r) for r in reqs], make)
    pm, res = run_model(m, rows, power, spec)
    return m, pm, res


def run_model(m, rows, power=True, spec=None):
    """(power model or None, result) of serving model ``m`` beside the batch ``rows`` on the 2-node
    machine (``spec2()`` unless ``spec``), FCFS; batch jobs' CPU and GPU at full (compute-bound), every
    serving job's CPU at idle."""
    spec = spec or spec2()
    pm = PowerModel(spec, cooling=False) if power else None
    prep = prepare(workload(rows), 2, "test")
    prep, jobs, k = attach_held(prep, job_table(prep), [m])
    n, nb = len(jobs), len(rows)
    full = np.zeros(n)
    full[:nb] = 1.0
    jobs.columns.update(cpu_util=full.copy(), gpu_util=full.copy(), compute_bound=np.ones(n))
    if pm is not None:
        m.use_models({"power": pm})
    ctx = ModelContext(n_nodes=2, jobs=jobs, runtime=prep.workload.runtime, seed=1, system=spec)
    sim = Simulation(jobs, prep.workload.runtime, prep.kill_limit, make_scheduler("fcfs"), 2,
                     models=[pm, m] if pm is not None else [m], context=ctx, held_jobs=k)
    return pm, sim.run()


def test_facility_energy_by_hand_idle_prefill_decode():
    # batch job: node 0, 0-5 s at 340 W. Serving job: submitted at the tick at 10, starts at 10 on node 1,
    # ready at 15; the request (log 10, 10 prompt tokens, 3 output) runs one prefill and two decode
    # iterations on [15, 15.03]; released at the tick at 25 (everything served)
    m, pm, res = run([(0, 1, 5, 5)], [(0.0, 10, 3)])
    i = m.insts[0]
    assert (i.t0, i.ready, i.t_end) == (10.0, 15.0, 25.0)
    gpu = 75.0 * (15.0 - 3 * DT) + 700.0 * DT + 380.0 * 2 * DT       # J: idle, prefill, decode
    node = gpu + (10.0 + 5.0 + 5.0) * 15.0                          # + CPU idle, memory, NICs for 15 s
    e = pm.job_columns()["energy_j"]
    assert e[0] == pytest.approx(340.0 * 5.0, rel=1e-12)
    assert e[1 + 0] == pytest.approx(node, rel=1e-12)               # the first node-request row
    assert gpu == pytest.approx(m.summary()["serving"]["energy_j"], rel=1e-12)
    br = pm.energy_breakdown_j()
    assert pm.end == 25.0 and pm.t0 == 0.0
    fac = IDLE_FAC * 25.0 + K * ((340.0 - 40.0) * 5.0 + (node - 40.0 * 15.0))
    assert br["facility"] == pytest.approx(fac, rel=1e-12)
    assert br["jobs"] == pytest.approx(e[0] + e[1], rel=1e-12)
    assert br["jobs"] + br["idle"] + br["loss"] + br["cooling"] == pytest.approx(br["facility"], rel=1e-12)
    # the series integrate back to the energies; the serving interval [15, 30) holds the phases
    grid = np.array([0.0, 15.0])
    ts = pm.timeseries(grid, 15.0)
    assert ts["power_facility_w"][0].sum() * 15.0 == pytest.approx(br["facility"] + IDLE_FAC * 5.0, rel=1e-12)
    assert ts["power_jobs_w"][0][1] * 15.0 == pytest.approx(node - 95.0 * 5.0, rel=1e-12)
    s = pm.summary()
    assert s["power_driven"]["owners"] == ["serving"] and s["power_driven"]["jobs"] == 1
    assert s["power_driven"]["energy_jobs_kwh"] == pytest.approx(node / 3.6e6)
    assert "fed into the facility power" in m.summary()["serving"]["power_note"]


def test_serving_without_power_and_power_without_serving_are_unchanged():
    m, pm, res = run([(0, 1, 5, 5)], [(0.0, 10, 3)], power=False)
    assert m.power_feed is None
    assert "not fed into the facility power model" in m.summary()["serving"]["power_note"]
    # the registry wires the feed only when both models are on
    cfg = RunConfig(workload="x", options={"serving": {"trace": "t"}})
    assert next(e for e in BUILTIN if e.name == "serving").uses == ("power",)
    calls = []

    class Peer:
        name = "peer"

        def use_models(self, peers):
            calls.append(peers)
    from hpctwin.twin.models import ModelEntry
    entries = [ModelEntry("peer", lambda c: True, lambda s: Peer(), uses=("power",))]
    build_models(ModelSetup(cfg, None), entries)
    assert calls == [{}]


def test_busy_instance_energy_matches_serving_energy_and_changes_are_bounded():
    # 300 requests over 600 s on one instance: far more iterations than power changes
    rng = np.random.default_rng(0)
    reqs = [(float(t), int(rng.integers(5, 3000)), int(rng.integers(1, 200))) for t in np.sort(rng.uniform(0, 600, 300))]
    m, pm, res = run([(0, 1, 700, 800)], reqs)
    e = pm.job_columns()["energy_j"]
    serving_rows = [j for j in range(len(e)) if j >= 1 and not np.isnan(e[j])]
    gpu_j = m.summary()["serving"]["energy_j"]
    other = 20.0 * sum(i.t_end - i.t0 for i in m.insts)
    assert sum(e[j] for j in serving_rows) == pytest.approx(gpu_j + other, rel=1e-9)
    iters = sum(i.x.iterations for i in m.insts)
    # at most one change per instance and 15 s grid interval it lives in
    assert pm.driven_changes <= sum(int(np.ceil((i.t_end - i.t0) / 15.0)) + 1 for i in m.insts) < iters / 100
    br = pm.energy_breakdown_j()
    assert br["jobs"] + br["idle"] + br["loss"] + br["cooling"] == pytest.approx(br["facility"], rel=1e-12)
    assert np.nansum(e) == pytest.approx(br["jobs"], rel=1e-12)


def test_phases_land_in_the_right_sample_intervals():
    # the request (log 20, 10 prompt tokens, 3000 output) prefills on [20, 20.01] and decodes on
    # [20.01, 50.0], across the 15 s grid edges at 30 and 45 (controller ticks at 10, 25, 40, 55:
    # not on the grid); released at the tick at 55. Jobs power per interval x 15 s, by hand:
    m, pm, res = run([(0, 1, 5, 5)], [(10.0, 10, 3000)])
    assert m.insts[0].t_end == 55.0
    gpu = [75.0 * 5, 75.0 * 5 + 700.0 * DT + 380.0 * (10.0 - DT), 380.0 * 15, 380.0 * 5 + 75.0 * 5]
    other = [20.0 * 5, 20.0 * 15, 20.0 * 15, 20.0 * 10]
    batch = [340.0 * 5, 0.0, 0.0, 0.0]
    ts = pm.timeseries(np.arange(4) * 15.0, 15.0)
    assert ts["power_jobs_w"][0] * 15.0 == pytest.approx(np.add(np.add(gpu, other), batch), rel=1e-9)
    assert pm.driven_changes == 3          # one level per interval from 15 on (idle at 10 is the start level)


def test_facility_cap_throttles_batch_not_serving_and_reports_it():
    # batch job (1 node, full power, 20 s) and the serving job both start at 10. With serving idle
    # (95 W/node) the cap holds by throttling the batch job only; the serving phases (above idle,
    # pushed after the fact) put the [15, 30) sample over the cap by their extra energy
    cap = 1000.0
    m0, _, _ = run([(10, 1, 20, 100)], [(0.0, 10, 3)], power=False)
    m, pm, res = run([(10, 1, 20, 100)], [(0.0, 10, 3)], spec=spec2(facility_cap_w=cap))
    assert [q.last for q in m.reqs] == [q.last for q in m0.reqs]          # serving not slowed
    assert res.end[0] > 30.0                                               # the batch job is
    theta = (cap - IDLE_FAC - K * (95.0 - 40.0)) / (K * 300.0)
    assert pm.min_theta == pytest.approx(theta, rel=1e-8)      # the limit keeps a 1e-9 margin
    pc = pm.summary()["power_cap"]
    assert "not throttled" in pc["driven_jobs"]
    extra = K * ((700.0 - 75.0) * DT + (380.0 - 75.0) * 2 * DT)           # J above the idle level
    assert not pc["held"] and pc["max_excess_w"] == pytest.approx(extra / 15.0, rel=1e-6)
    assert "serving" in pc["why"]


def test_set_job_power_contract_on_a_replay():
    # the power model's contract op alone: a driven job, a late (retroactive) change, a change after its end
    spec = spec2()
    pm = PowerModel(spec, cooling=False)
    pm.bind(context(2, [0.0, 0.0], [1, 1], [100.0, 100.0], system=spec,
                    columns={"cpu_util": np.zeros(2), "gpu_util": np.zeros(2)}))
    pm.drive_jobs([1], [50.0], [500.0], owner="test")
    assert pm.projected_facility_power_w(1, job=1) == pytest.approx(IDLE_FAC + K * 460.0)
    pm.on_start(0.0, 1, np.array([1]))
    pm.on_start(0.0, 0, np.array([0]))
    pm.set_job_power(1, 10.0, 100.0)
    pm.on_finish(40.0, 1)
    pm.set_job_power(1, 30.0, 200.0)          # learnt after the end: applies on [30, 40)
    pm.set_job_power(1, 45.0, 300.0)          # after the end: ignored
    with pytest.raises(ValueError, match="before its previous one"):
        pm.set_job_power(1, 20.0, 10.0)
    with pytest.raises(ValueError, match="not driven"):
        pm.set_job_power(0, 20.0, 10.0)
    pm.on_finish(100.0, 0)
    pm.finalize(100.0)
    e = pm.job_columns()["energy_j"]
    assert e[1] == pytest.approx(50.0 * 10 + 100.0 * 20 + 200.0 * 10)
    br = pm.energy_breakdown_j()
    assert br["jobs"] == pytest.approx(e[0] + e[1])
    assert br["facility"] == pytest.approx(IDLE_FAC * 100.0 + K * (e[1] - 40.0 * 40.0), rel=1e-12)
    with pytest.raises(RuntimeError, match="after finalize"):
        pm.set_job_power(1, 50.0, 1.0)


def test_staged_rectifiers_refused_clearly():
    spec = spec2(rectifier_sharing="staged", rectifier_peak_w=500.0)
    with pytest.raises(NotImplementedError, match="staged"):
        run([(0, 1, 5, 5)], [(0.0, 10, 3)], spec=spec)


def test_node_failure_kills_the_instance_and_energy_still_adds_up():
    from hpctwin.twin.failures import FailureConfig, FailureModel
    # the instance (node 0, from 10, ready 15) serves a 3000-token request (30 s) from log 20; node 0 fails
    # at 30, amid the iterations: the serving job is requeued at the front and restarts at once on node 1
    spec = spec2()
    c = dict(trace="test", start_s=10.0, interval_s=15.0, startup_s=5.0, policy="fixed", instances=1,
             min_instances=1, max_instances=1, slots=4, hardware="h100-80gb")
    m = ServingBatchModel(ServingBatchConfig(**c), [ServingRequest(10.0, 10, 3000)], make_const)
    pm = PowerModel(spec, cooling=False)
    fm = FailureModel(FailureConfig(events=[(30.0, 0)], repair_s=5.0))
    prep = prepare(workload([(0, 1, 5, 5)]), 2, "test")
    prep, jobs, k = attach_held(prep, job_table(prep), [m])
    jobs.columns.update(cpu_util=np.zeros(len(jobs)), gpu_util=np.zeros(len(jobs)))
    m.use_models({"power": pm})
    ctx = ModelContext(n_nodes=2, jobs=jobs, runtime=prep.workload.runtime, seed=1, system=spec)
    Simulation(jobs, prep.workload.runtime, prep.kill_limit, make_scheduler("fcfs"), 2, models=[pm, fm, m],
               context=ctx, held_jobs=k).run()
    assert m.counts["instances_lost_failure"] == 1 and len(m.insts) == 2
    e = pm.job_columns()["energy_j"]
    br = pm.energy_breakdown_j()
    assert np.nansum(e) == pytest.approx(br["jobs"], rel=1e-12)
    assert br["jobs"] + br["idle"] + br["loss"] + br["cooling"] == pytest.approx(br["facility"], rel=1e-12)
    # the killed instance's busy time counts up to the kill: its decode iteration in flight at 30 s runs
    # on to 30.01 in the serving engine (whose energy_j counts it as busy, clipped to the life, instead
    # of idle), so the power model has (380 - 75) W x 0.01 s less
    assert m.insts[1].t0 == 30.0 and m.insts[0].t_end == 30.0
    overrun = m.insts[0].x.t - 30.0
    assert overrun == pytest.approx(DT)
    assert sum(pm.energy[j] for j in set(i.job for i in m.insts)) == pytest.approx(
        m.summary()["serving"]["energy_j"] - (380.0 - 75.0) * overrun + 20.0 * sum(i.t_end - i.t0 for i in m.insts),
        rel=1e-12)


def test_end_to_end_run_with_power_on_feeds_the_facility_model():
    from hpctwin.twin.run import simulate
    from .test_serving_batch import _cfg, _data
    cfg = _cfg(_data())
    cfg.power, cfg.system = True, "generic"
    res = simulate(cfg)
    s = res.summary
    pd_ = s["power_driven"]
    assert pd_["owners"] == ["serving"] and pd_["jobs"] == (res.jobs.kind == "serving").sum() >= 1
    assert 0 < pd_["level_changes"] <= 2 * (s["serving"]["ticks"] + 2 * s["serving"]["instances"])
    serving = res.jobs[res.jobs.kind == "serving"]
    assert serving.energy_j.sum() / 3.6e6 == pytest.approx(pd_["energy_jobs_kwh"], rel=1e-12)
    # the serving jobs' node energy = their GPUs (serving.energy_j) + the rest of their nodes, > the GPUs
    assert serving.energy_j.sum() > s["serving"]["energy_j"] > 0
    kwh = s["energy_jobs_kwh"] + s["energy_idle_kwh"] + s["energy_loss_kwh"] + s["energy_cooling_kwh"]
    assert kwh == pytest.approx(s["energy_facility_kwh"], rel=1e-12)
    assert res.jobs.energy_j.sum() / 3.6e6 == pytest.approx(s["energy_jobs_kwh"], rel=1e-9)
    assert "fed into the facility power model" in s["serving"]["power_note"]
