"""A serving deployment as node-request jobs of the batch scheduler (twin.serving.batch, issue 16 item 4).

Hand-checked cases run on a constant-time engine (every iteration 10 ms, no profile needed); the end-to-end
cases use the LLMServingSim RTX PRO 6000 profile and the Azure conversation trace of the data directory.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hpctwin.datasets.serving_traces import ServingRequest
from hpctwin.schedulers.registry import make_scheduler
from hpctwin.twin.contract import ModelContext
from hpctwin.twin.guards import SimulationError
from hpctwin.twin.run import RunConfig, job_table, prepare, simulate
from hpctwin.twin.serving.batch import ServingBatchConfig, ServingBatchModel
from hpctwin.twin.serving.held import attach_held, trim_held
from hpctwin.twin.serving.instance import Instance
from hpctwin.twin.serving.kvcache import BlockManager
from hpctwin.twin.simulation import Simulation
from hpctwin.twin.workload import Workload, job_states
from .serving_invariants import CONST_DT, ConstModel

DT = CONST_DT     # s, every iteration of the constant engine



def make_const(iid: int) -> Instance:
    return Instance(iid, ConstModel(), BlockManager(10_000, 16), max_num_seqs=256, max_num_batched_tokens=2048)


class Steps:
    """desired = ``counts[k]`` from time ``times[k]`` on (a scripted controller)."""

    def __init__(self, times, counts):
        self.times, self.counts = times, counts

    def desired(self, v) -> int:
        k = int(np.searchsorted(self.times, v.now, side="right")) - 1
        return self.counts[max(k, 0)]


def workload(rows) -> Workload:
    """rows: (submit s, nodes, runtime s, requested s)."""
    a = np.array(rows, dtype=float).reshape(-1, 4)
    n = len(a)
    ints = lambda v: np.full(n, v, dtype=np.int64)  # noqa: E731
    return Workload(name="t", job_id=np.arange(1, n + 1), submit=a[:, 0], runtime=a[:, 2], requested_time=a[:, 3],
                    procs=a[:, 1].astype(np.int64), user=ints(1), group=ints(-1), queue=ints(-1),
                    partition=ints(-1), status=ints(-1))


def run_case(rows, reqs, total=4, scheduler="easy", policy=None, models_before=(), **cfg):
    """(result, jobs frame, model) of a run of ``rows`` with a serving model on ``total`` nodes."""
    import pandas as pd
    c = dict(trace="test", start_s=10.0, interval_s=15.0, startup_s=5.0, policy="fixed", instances=1,
             min_instances=1, max_instances=4, slots=8)
    c.update(cfg)
    m = ServingBatchModel(ServingBatchConfig(**c), [ServingRequest(*r) for r in reqs], make_const, policy=policy)
    prep = prepare(workload(rows), total, "test")
    prep, jobs, k = attach_held(prep, job_table(prep), [m])
    models = list(models_before) + [m]
    ctx = ModelContext(n_nodes=total, jobs=jobs, runtime=prep.workload.runtime, seed=1)
    sim = Simulation(jobs, prep.workload.runtime, prep.kill_limit, make_scheduler(scheduler), total,
                     models=models, context=ctx, held_jobs=k)
    res = sim.run()
    wl = prep.workload
    df = pd.DataFrame({"job_id": wl.job_id, "submit": wl.submit, "start": res.start, "end": res.end,
                       "procs": wl.procs, "state": job_states(res.failed, res.killed, res.start, res.cancelled),
                       "nodes": res.nodes, **m.job_columns()})
    return res, trim_held(df, {}, wl.submit, k), m


def test_scale_up_waits_behind_a_batch_job_and_serves_at_start_plus_cold_start():
    # a 4-node job runs 0-100; the node request submitted at 10 starts at 100, the instance serves from 105
    res, df, m = run_case([(0, 4, 100, 100)], [(0.0, 10, 3)])
    s = df[df.kind == "serving"]
    assert len(s) == 1
    assert s.submit.iloc[0] == 10.0 and s.start.iloc[0] == 100.0
    r = m.reqs[0]
    assert m.cold_s == 5.0
    assert r.first == pytest.approx(105.0 + DT) and r.last == pytest.approx(105.0 + 3 * DT)
    # released at the first tick once everything is served: ticks at 10 + 15 k -> 115
    assert s.end.iloc[0] == 115.0 and s.serving_end.iloc[0] == "end"
    assert m.summary()["serving"]["scale_up_wait_s"]["max"] == 90.0


def test_scale_down_releases_a_node_and_a_waiting_batch_job_starts_at_that_instant():
    # two instances wanted until t = 50, then one; a 3-node batch job submitted at 30 waits for a node
    pol = Steps([0.0, 50.0], [2, 1])
    res, df, m = run_case([(30, 3, 50, 60)], [(0.0, 10, 2), (60.0, 10, 2)], policy=pol, instances=2)
    serving = df[df.kind == "serving"].sort_values("job_id")
    batch = df[df.kind == "batch"]
    assert list(serving.start) == [10.0, 10.0]
    # the tick at 55 drains the most recent instance (idle): released at 55, the batch job starts at 55
    assert serving.end.iloc[1] == 55.0 and serving.serving_end.iloc[1] == "drained"
    assert batch.start.iloc[0] == 55.0
    # the request at trace 60 s (log 70) is served by the remaining instance (ready since 15)
    assert m.reqs[1].first == pytest.approx(70.0 + DT)


def test_drain_releases_at_the_last_token_of_the_instance():
    # a long request on the second instance keeps it busy past the scale-down tick at 55
    pol = Steps([0.0, 50.0], [2, 1])
    # one request per instance at log time 20 (least_loaded: first to instance 0, then 1); 5000 tokens = 50 s
    res, df, m = run_case([], [(10.0, 10, 5000), (10.0, 10, 5000)], policy=pol, instances=2)
    serving = df[df.kind == "serving"].sort_values("job_id")
    r1 = m.reqs[1]
    assert r1.instance == 1
    assert serving.end.iloc[1] == pytest.approx(r1.last) and r1.last > 55.0
    assert serving.serving_end.iloc[1] == "drained"


def test_conservation_and_bounds_on_a_busy_mix():
    rng = np.random.default_rng(3)
    rows = [(float(t), int(rng.integers(1, 5)), float(rng.uniform(20, 400)), 400.0) for t in np.sort(rng.uniform(0, 2000, 40))]
    reqs = [(float(t), int(rng.integers(5, 200)), int(rng.integers(1, 300))) for t in np.sort(rng.uniform(0, 1500, 300))]
    pol = Steps([0, 300, 600, 900, 1200], [1, 3, 2, 4, 1])
    res, df, m = run_case(rows, reqs, total=6, policy=pol, min_instances=1, max_instances=3, slots=40)
    assert all(r.generated == r.output for r in m.reqs)
    assert sum(r.generated for r in m.reqs) == sum(q[2] for q in reqs)
    s = df[df.kind == "serving"]
    node_s = float(((s.end - s.start) * s.procs).sum())
    life = sum((i.t_end - i.t0) * m.nodes_per_instance for i in m.insts)
    assert node_s == pytest.approx(life, rel=1e-12)
    # the controller's counts stay within [min, max]; instances never exceed the jobs granted
    for a, st, p in zip(m.log_active, m.log_starting, m.log_pending):
        assert a + st <= 3 and a + st + p >= 1
    # capacity: at no time do jobs hold more than 6 nodes
    ran = df[np.isfinite(df.start)]                  # withdrawn requests (CANCELLED) never held nodes
    ev = sorted([(t, p) for t, p in zip(ran.start, ran.procs)] + [(t, -p) for t, p in zip(ran.end, ran.procs)],
                key=lambda e: (e[0], e[1]))
    used = np.cumsum([p for _, p in ev])
    assert used.max() <= 6


def test_a_node_failure_kills_the_instance_and_its_requests_still_finish():
    from hpctwin.twin.failures import FailureConfig, FailureModel
    # one instance on node 0 from 10 (ready 15); a 3000-token request from log 20 runs until ~50;
    # node 0 fails at 30: the request starts over on the requeued job's new instance
    fm = FailureModel(FailureConfig(events=[(30.0, 0)], repair_s=5.0))
    res, df, m = run_case([], [(10.0, 10, 3000)], total=2, models_before=[fm])
    r = m.reqs[0]
    assert r.generated == 3000 and m.retries[0] == 1
    assert m.counts["instances_lost_failure"] == 1
    assert len(m.insts) == 2
    # the job was requeued at the front (fast_recovery) and restarted at once on node 1
    assert m.insts[1].t0 == 30.0 and m.insts[1].ready == 35.0
    assert r.first == pytest.approx(35.0 + DT)


class _Bad:
    """A model that asks the engine for an impossible held-job operation at t = 5."""
    name = "bad"

    def __init__(self, op, job):
        self.op, self.job = op, job

    def bind(self, ctx):
        pass

    def next_event(self, now):
        return 5.0 if now < 5.0 else None

    def on_event(self, now, control):
        getattr(control, self.op)(self.job)


@pytest.mark.parametrize("op, job, msg", [("submit", 0, "not a held job never submitted"),
                                          ("release", 1, "which is not running")])
def test_engine_control_refuses_bad_held_operations(op, job, msg):
    wl = workload([(0, 1, 10, 10), (20, 1, 10, 10)])
    prep = prepare(wl, 2, "test")
    jobs = job_table(prep)
    sim = Simulation(jobs, wl.runtime, prep.kill_limit, make_scheduler("fcfs"), 2, models=[_Bad(op, job)])
    with pytest.raises(SimulationError, match=msg):
        sim.run()
    with pytest.raises(SimulationError, match="held_jobs = 3"):
        Simulation(jobs, wl.runtime, prep.kill_limit, make_scheduler("fcfs"), 2, held_jobs=3)


# ---------------------------------------------------------------------- end to end (profiles, Azure trace)
def _data():
    from hpctwin.datasets.registry import default_data_dir
    d = default_data_dir(None)
    trace = Path(d) / "LLM-serving" / "Azure-LLM-2023" / "AzureLLMInferenceTrace_conv.csv" if d else None
    if trace is None or not trace.exists():
        pytest.skip("no Azure trace in the data directory")
    return str(trace)


def _cfg(trace, out=None, **serving):
    s = dict(trace=trace, max_requests=300, time_scale=2.0, max_instances=4, policy="utilization", metric="kv",
             target=0.5)
    s.update(serving)
    return RunConfig(workload="synthetic:jobs=60", nodes=16, scheduler="easy", seed=2, out=out,
                     options={"serving": s})


def test_same_config_same_bytes(tmp_path):
    trace = _data()
    outs = []
    for k in range(2):
        from hpctwin.twin.run import run
        run(_cfg(trace, str(tmp_path / f"r{k}")))
        outs.append([(tmp_path / f"r{k}" / f).read_bytes() for f in ("jobs.csv", "serving_requests.csv",
                                                                     "serving_instances.csv")])
    assert outs[0] == outs[1]
    import pandas as pd
    jobs = pd.read_csv(tmp_path / "r0" / "jobs.csv")
    req = pd.read_csv(tmp_path / "r0" / "serving_requests.csv")
    assert len(req) == 300 and (req.output_tokens > 0).all()
    assert set(jobs.kind) == {"batch", "serving"}
    assert np.isfinite(jobs.submit).all()        # node requests never made are not rows


def test_serving_summary_and_series():
    res = simulate(_cfg(_data()))
    s = res.summary["serving"]
    assert s["requests"] == 300 and 0 <= s["slo"]["attainment"] <= 1
    assert s["scale_up_requests"] == (res.jobs.kind == "serving").sum()
    assert res.summary["accounting"]["balanced"]
    p = res.timeseries["serving_power_w"][0]
    assert (p >= 0).all() and p.max() > 0
    # energy on the grid = the summary's energy
    assert float(p.sum() * 15.0) == pytest.approx(s["energy_j"], rel=1e-6)


def test_run_without_serving_has_no_serving_outputs():
    res = simulate(RunConfig(workload="synthetic:jobs=50", nodes=16, scheduler="easy"))
    assert "kind" not in res.jobs.columns and "serving" not in res.summary and res.tables == {}


def test_bad_serving_option_is_a_clear_error():
    from hpctwin.twin.run import RunConfigError
    with pytest.raises(RunConfigError, match="serving.policy"):
        simulate(_cfg(_data(), policy="nope"))
    with pytest.raises(RunConfigError, match="tps_per_instance"):
        simulate(_cfg(_data(), policy="decode_tps"))


@pytest.mark.slow
def test_serving_cluster_experiment_tiny(tmp_path):
    _data()
    from hpctwin.experiments.serving_cluster import run
    df = run(tmp_path, day0=204.0, days=0.25, offset_h=2.0, max_requests=200, schedulers=("easy", "slurm"))
    assert list(df.config) == ["no serving"] * 2 + ["dedicated", "shared-fixed", "shared-auto", "shared-auto"]
    assert {p.name for p in tmp_path.iterdir()} >= {"results.csv", "results.md", "results.tex"}
    # a dedicated partition holds its nodes for the whole window: 4 nodes x 6 h
    assert df.set_index("config").loc["dedicated", "serving_node_hours"] == pytest.approx(24.0)
    assert (df.slo_attainment.dropna().between(0, 1)).all()


def test_a_lease_is_renewed_before_it_ends_and_no_request_restarts():
    # lease 100 s, renewal 40 s before its end: instance 0 (job start 10) retires at the tick at 70 (110 - 70
    # <= 40); its replacement is requested then, starts at once on the free node and serves from 75; at the
    # tick at 85 the counted instances reach the desired one: instance 0 drains and is released at 85
    reqs = [(float(t), 10, 5) for t in range(0, 200, 7)]
    res, df, m = run_case([], reqs, total=2, lease_s=100.0, renew_s=40.0)
    i0, i1 = m.insts[0], m.insts[1]
    assert (i0.t0, i1.t0, i1.ready) == (10.0, 70.0, 75.0)
    assert i0.t_end == 85.0 and i0.reason == "drained"
    assert m.counts["renewals"] >= 2 and m.counts["instances_lost_lease"] == 0
    assert (m.retries == 0).all() and all(r.generated == r.output for r in m.reqs)
    s = df[df.kind == "serving"]
    assert (s.end - s.start <= 100.0).all()
