"""Serving power of a disaggregated P/D deployment fed into the facility power model
(`twin.serving.power_feed` on `twin.serving.batch_pd`, issue 16 item 2).

Hand-checked on test_serving_power's 2-node machine (1 CPU + 1 GPU a node; facility = idle + K x node W
above idle) with one prefill instance on H100 phase power (Splitwise: idle 75, prompt 700, token 380 W per
GPU) and one decode instance on A100 phase power (idle 63, prompt 400, token 250 W), both TP 1 and of the
constant-time engine of test_serving_batch_pd (every iteration 10 ms, 1 MB of KV per token over a
1 GB/s link: a 10-token prompt's KV crosses in 10 ms).
"""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.datasets.serving_traces import ServingRequest
from hpctwin.twin.serving.batch import ServingBatchConfig
from hpctwin.twin.serving.batch_pd import ServingBatchPDModel

from .test_serving_batch_pd import DT, make_const
from .test_serving_power import IDLE_FAC, K, run_model

OTHER = 20.0                 # W per node without its GPU: CPU idle 10 + memory 5 + 2 NICs x 2.5


def run_pd_power(rows, reqs, power=True, spec=None, make=make_const, **cfg):
    """(P/D serving model, power model or None) on the 2-node machine; batch jobs' CPU and GPU at full.
    ``make``: the instance factory of both pools."""
    c = dict(trace="test", start_s=10.0, interval_s=15.0, startup_s=5.0, policy="fixed", mode="pd",
             prefill_instances=1, decode_instances=1, prefill_max_instances=1, decode_max_instances=1,
             kv_link_GBps=1.0, kv_latency_s=0.0, slots=4, prefill_hardware="h100-80gb",
             decode_hardware="a100-80gb")
    c.update(cfg)
    m = ServingBatchPDModel(ServingBatchConfig(**c), [ServingRequest(*r) for r in reqs], make, make)
    pm, _ = run_model(m, rows, power, spec)
    return m, pm


def test_pd_facility_energy_by_hand_per_pool_gpu_and_phase():
    # batch job: node 0, 0-5 s at 340 W. The tick at 10 submits the prefill (slot 0) and decode (slot 4)
    # requests; both start at 10, ready at 15. The request (log 10, 10 prompt tokens, 3 output) prefills
    # on [15, 15.01] (H100, prompt power), its KV crosses [15.01, 15.02] (both GPUs idle), it decodes on
    # [15.02, 15.04] (A100, token power); both released at the tick at 25
    m, pm = run_pd_power([(0, 1, 5, 5)], [(0.0, 10, 3)])
    p, d = m.insts
    assert (p.pool, d.pool) == ("prefill", "decode")
    assert (p.t0, p.ready, p.t_end) == (d.t0, d.ready, d.t_end) == (10.0, 15.0, 25.0)
    gpu_p = 75.0 * (15.0 - DT) + 700.0 * DT                       # J: idle, prefill
    gpu_d = 63.0 * (15.0 - 2 * DT) + 250.0 * 2 * DT               # J: idle, decode
    assert gpu_p + gpu_d == pytest.approx(m.summary()["serving"]["energy_j"], rel=1e-12)
    node_p, node_d = gpu_p + OTHER * 15.0, gpu_d + OTHER * 15.0
    e = pm.job_columns()["energy_j"]
    assert e[0] == pytest.approx(340.0 * 5.0, rel=1e-12)
    assert e[p.job] == pytest.approx(node_p, rel=1e-12) and p.job == 1
    assert e[d.job] == pytest.approx(node_d, rel=1e-12) and d.job == 1 + 4
    br = pm.energy_breakdown_j()
    assert pm.t0 == 0.0 and pm.end == 25.0
    fac = IDLE_FAC * 25.0 + K * ((340.0 - 40.0) * 5.0 + (node_p - 40.0 * 15.0) + (node_d - 40.0 * 15.0))
    assert br["facility"] == pytest.approx(fac, rel=1e-12)
    assert br["jobs"] == pytest.approx(e[0] + node_p + node_d, rel=1e-12)
    assert br["jobs"] + br["idle"] + br["loss"] + br["cooling"] == pytest.approx(br["facility"], rel=1e-12)
    s = pm.summary()["power_driven"]
    assert s["owners"] == ["serving"] and s["jobs"] == 2
    assert s["energy_jobs_kwh"] == pytest.approx((node_p + node_d) / 3.6e6)
    assert "fed into the facility power" in m.summary()["serving"]["power_note"]


def test_pd_phases_across_grid_edges_by_hand():
    # the request (log 20, 10 prompt tokens, 3000 output) prefills on [20, 20.01] (prefill instance), its KV
    # crosses [20.01, 20.02], it decodes on [20.02, 50.01] (2,999 tokens) across the 15 s grid edges at 30
    # and 45; released at the tick at 55. Jobs power per interval x 15 s, by hand, per pool:
    m, pm = run_pd_power([(0, 1, 5, 5)], [(10.0, 10, 3000)])
    assert [i.t_end for i in m.insts] == [55.0, 55.0]
    pre = [75.0 * 5, 75.0 * (15 - DT) + 700.0 * DT, 75.0 * 15, 75.0 * 10]
    dec = [63.0 * 5, 63.0 * (5 + 2 * DT) + 250.0 * (10 - 2 * DT), 250.0 * 15, 250.0 * (5 + DT) + 63.0 * (5 - DT)]
    other = [2 * OTHER * 5, 2 * OTHER * 15, 2 * OTHER * 15, 2 * OTHER * 10]
    batch = [340.0 * 5, 0.0, 0.0, 0.0]
    ts = pm.timeseries(np.arange(4) * 15.0, 15.0)
    want = np.add(np.add(pre, dec), np.add(other, batch))
    assert ts["power_jobs_w"][0] * 15.0 == pytest.approx(want, rel=1e-9)
    # levels pushed: prefill [15, 30) mixed then idle from 30 (2); decode [15, 30) mixed, [30, 45) token
    # power, [45, 55) mixed (3); the idle levels at 10 are the declared start levels
    assert pm.driven_changes == 5
    br = pm.energy_breakdown_j()
    assert br["jobs"] + br["idle"] + br["loss"] + br["cooling"] == pytest.approx(br["facility"], rel=1e-12)
    e = pm.job_columns()["energy_j"]
    assert np.nansum(e) == pytest.approx(br["jobs"], rel=1e-12)
    assert ts["power_facility_w"][0].sum() * 15.0 == pytest.approx(br["facility"] + IDLE_FAC * 5.0, rel=1e-9)


def test_pd_busy_pools_energy_matches_serving_energy():
    # 200 requests over 300 s, 1 prefill + 1 decode instance: the serving jobs' node energy in the power
    # model is the GPUs' per-phase energy (serving.energy_j) plus 20 W per node for their lives
    rng = np.random.default_rng(1)
    reqs = [(float(t), int(rng.integers(5, 2000)), int(rng.integers(1, 150)))
            for t in np.sort(rng.uniform(0, 300, 200))]
    m, pm = run_pd_power([(0, 1, 400, 500)], reqs)
    e = pm.job_columns()["energy_j"]
    jobs = sorted(i.job for i in m.insts)
    other = OTHER * sum(i.t_end - i.t0 for i in m.insts)
    assert sum(e[j] for j in jobs) == pytest.approx(m.summary()["serving"]["energy_j"] + other, rel=1e-9)
    assert pm.driven_changes <= sum(int(np.ceil((i.t_end - i.t0) / 15.0)) + 1 for i in m.insts)
    assert pm.driven_changes < sum(i.x.iterations for i in m.insts) / 20
    br = pm.energy_breakdown_j()
    assert br["jobs"] + br["idle"] + br["loss"] + br["cooling"] == pytest.approx(br["facility"], rel=1e-12)


def test_pd_pool_without_phase_table_is_refused_naming_its_key():
    with pytest.raises(ValueError, match="serving.decode_hardware = 'nogpu'"):
        run_pd_power([(0, 1, 5, 5)], [(0.0, 10, 3)], decode_hardware="nogpu")


def test_pd_end_to_end_run_with_power_on():
    # hpctwin run with serving.mode = pd and --power on (was refused): both pools' jobs driven, their
    # node energy in jobs.csv = the power model's driven energy, > their GPUs' (serving.energy_j)
    from hpctwin.twin.run import simulate

    from .test_serving_batch import _cfg, _data
    cfg = _cfg(_data(), mode="pd", policy="decode_tps", tps_per_instance=300.0, pd_ratio=0.5,
               prefill_max_instances=2, decode_max_instances=3, decode_instances=2)
    cfg.power, cfg.system = True, "generic"
    res = simulate(cfg)
    s = res.summary
    serving = res.jobs[res.jobs.kind == "serving"]
    assert set(serving.serving_pool) == {"prefill", "decode"}
    ran = serving[serving.start.notna()]                   # withdrawn requests never started
    assert s["power_driven"]["owners"] == ["serving"] and s["power_driven"]["jobs"] == len(ran) >= 2
    assert serving.energy_j.sum() / 3.6e6 == pytest.approx(s["power_driven"]["energy_jobs_kwh"], rel=1e-12)
    assert serving.energy_j.sum() > s["serving"]["energy_j"] > 0
    kwh = s["energy_jobs_kwh"] + s["energy_idle_kwh"] + s["energy_loss_kwh"] + s["energy_cooling_kwh"]
    assert kwh == pytest.approx(s["energy_facility_kwh"], rel=1e-12)
    assert "fed into the facility power model" in s["serving"]["power_note"]
