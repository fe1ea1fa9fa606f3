"""Node failures injected into the engine: interruptions, recovery regimes, outages, requeue order.

Every expected time below is derived by hand in the comments.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from hpctwin.twin.failures import FailureConfig, FailureConfigError, FailureModel
from hpctwin.twin.resilience import replay_failures
from hpctwin.twin.run import RunConfig, run

from .helpers import simulate, starts_by_id, workload


def fm(**kw) -> FailureModel:
    return FailureModel(FailureConfig(**kw))


def by_id(res, prep, arr):
    return {int(j): float(v) for j, v in zip(prep.workload.job_id, arr)}


def test_checkpoint_restart_loses_exactly_the_work_since_the_last_checkpoint():
    # one job, 4 of 8 nodes, 1000 s of work, checkpoint every 300 s of work (50 s each), restart 100 s.
    # engine work = 1000 + (ceil(1000/300) - 1) x 50 = 1150. Node 2 fails at t = 500: one checkpoint
    # done (at 350), 300 s committed, 500 - 350 = 150 s lost. Next run: 100 + 700 + 2 x 50 = 900 s,
    # restarted at once on spare nodes (front of the queue): ends at 1400.
    model = fm(regimes={"default": "checkpoint_restart"}, interval=300.0, checkpoint_s=50.0, restart_s=100.0,
               repair_s=200.0, events=[[500.0, 2]])
    res, prep, _ = simulate([(1, 0, 1000, 4, None)], 8, scheduler="fcfs", kill=False, models=[model])
    assert res.start[0] == 0.0 and res.end[0] == 1400.0
    assert res.end[0] == replay_failures(1000.0, np.array([500.0]), 300.0, 50.0, 100.0)[0]
    assert res.interruptions[0] == 1 and not res.failed[0]
    assert res.segments == [(0, 0.0, 500.0, "0-3")]
    assert res.nodes[0] == "0-1,3-4"                  # node 2 is down until 700
    assert res.held[0] == 1400.0 and res.work_done[0] == 1400.0
    assert model.lost_total[0] == 150.0 and model.restart_total[0] == 100.0 and model.committed[0] == 300.0
    assert res.change_down is not None and res.change_down.max() == 1


def test_failure_interrupts_exactly_the_jobs_on_that_node():
    # three 2-node jobs on 6 nodes (first-fit: A 0-1, B 2-3, C 4-5); node 3 fails at t = 50
    model = fm(regimes={"default": "requeue"}, repair_s=1000.0, events=[[50.0, 3]])
    rows = [(1, 0, 100, 2, None), (2, 0, 100, 2, None), (3, 0, 100, 2, None)]
    res, prep, _ = simulate(rows, 6, scheduler="fcfs", kill=False, models=[model])
    assert res.interruptions.tolist() == [0, 1, 0]
    assert res.end[0] == 100.0 and res.end[2] == 100.0
    # B reruns from scratch: node 3 is down until 1050, nodes 0,1,2,4,5 minus... at t = 50 only
    # nodes 2 is free besides the down node 3 -> B waits until A and C end at 100, restarts, ends 200
    assert res.start[1] == 0.0 and res.end[1] == 200.0
    assert res.queued[1] == 50.0                     # waited 50..100 after the interruption
    assert res.held[1] == 150.0                      # 0..50 and 100..200
    assert model.lost_total[1] == 50.0


def test_failure_of_an_idle_node_takes_it_out_of_service_until_repaired():
    # node 3 of 4 fails at t = 5 (idle), down until 105; a 4-node job submitted at 10 starts at 105
    model = fm(repair_s=100.0, events=[[5.0, 3]])
    res, prep, _ = simulate([(1, 10, 50, 4, None)], 4, scheduler="fcfs", kill=False, models=[model])
    assert res.start[0] == 105.0 and res.end[0] == 155.0
    assert res.interruptions[0] == 0
    assert model.node_failures == 1


def test_easy_plans_around_a_down_node():
    # node 3 down 5..105. H (4 nodes) waits with shadow time 105 and no extra node. T (1 node, 50 s,
    # ends 80 <= 105) backfills at 30; S (1 node, 200 s, ends 220 > 105) may not and starts after H.
    model = fm(repair_s=100.0, events=[[5.0, 3]])
    rows = [(1, 10, 50, 4, 50), (2, 20, 200, 1, 200), (3, 30, 50, 1, 50)]
    res, prep, _ = simulate(rows, 4, scheduler="easy", models=[model])
    assert starts_by_id(res, prep) == {1: 105.0, 2: 155.0, 3: 30.0}


def test_conservative_plans_around_a_down_node():
    model = fm(repair_s=100.0, events=[[5.0, 3]])
    rows = [(1, 10, 50, 4, 50), (2, 20, 200, 1, 200), (3, 30, 50, 1, 50)]
    res, prep, _ = simulate(rows, 4, scheduler="conservative", models=[model])
    assert starts_by_id(res, prep) == {1: 105.0, 2: 155.0, 3: 30.0}


@pytest.mark.parametrize("where,expect", [("front", {1: 0.0, 2: 180.0}), ("back", {1: 0.0, 2: 80.0})])
def test_requeue_front_or_back(where, expect):
    # 2 nodes. A (2 nodes, 100 s) starts at 0; B (2 nodes, 100 s) arrives at 10. Node 0 fails at 50,
    # down until 80. front: A is ahead of B -> A reruns 80..180, B 180..280. back: B 80..180, A 180..280.
    model = fm(regimes={"default": "requeue"}, requeue=where, repair_s=30.0, events=[[50.0, 0]])
    res, prep, _ = simulate([(1, 0, 100, 2, None), (2, 10, 100, 2, None)], 2, scheduler="fcfs",
                            kill=False, models=[model])
    assert starts_by_id(res, prep) == expect     # first starts
    ends = by_id(res, prep, res.end)
    if where == "front":
        assert ends == {1: 180.0, 2: 280.0}
    else:
        assert ends == {1: 280.0, 2: 180.0}


def test_fast_recovery_loses_one_step_and_pays_the_recovery_time():
    # 1000 s of work in steps of 10 s; failure at 333: progress kept at 330, next run = 150 + 670 = 820 s,
    # restarted at once on a spare node: ends at 333 + 820 = 1153.
    model = fm(regimes={"default": "fast_recovery"}, step_s=10.0, fast_recovery_s=150.0, repair_s=500.0,
               events=[[333.0, 0]])
    res, prep, _ = simulate([(1, 0, 1000, 2, None)], 3, scheduler="fcfs", kill=False, models=[model])
    assert res.end[0] == pytest.approx(1153.0)
    assert model.lost_total[0] == pytest.approx(3.0)
    assert res.nodes[0] == "1-2"


def test_fail_regime_ends_the_job_as_failed():
    model = fm(regimes={"default": "fail"}, events=[[40.0, 1]])
    res, prep, _ = simulate([(1, 0, 100, 2, None), (2, 0, 100, 1, None)], 4, scheduler="fcfs",
                            kill=False, models=[model])
    assert res.failed.tolist() == [True, False]
    assert res.end[0] == 40.0 and res.end[1] == 100.0


@pytest.mark.parametrize("seed", range(8))
def test_engine_matches_the_renewal_replay(seed):
    # a job alone on node 0 (repair 0: the node never leaves service, so every failure hits the job);
    # the engine's end must equal twin.resilience.replay_failures for the same failure times,
    # including failures during a restart
    rng = np.random.default_rng(seed)
    fails = np.sort(rng.uniform(0, 6000, size=rng.integers(1, 8)))
    fails = np.unique(np.round(fails))
    model = fm(regimes={"default": "checkpoint_restart"}, interval=400.0, checkpoint_s=30.0, restart_s=120.0,
               repair_s=0.0, events=[[float(t), 0] for t in fails])
    res, prep, _ = simulate([(1, 0, 3000, 1, None)], 1, scheduler="fcfs", kill=False, models=[model])
    wall, hit = replay_failures(3000.0, fails, 400.0, 30.0, 120.0)
    assert res.end[0] == pytest.approx(wall, abs=1e-6)
    assert res.interruptions[0] == hit


def test_generated_failures_are_seeded_and_follow_the_mtbf():
    # 200 one-node jobs of 10 days each on 200 nodes; MTBF 50 days, repair 0: expected failures
    # 200 x 10 / 50 = 40 (Poisson), so the count is within 40 +- 5 sqrt(40)
    rows = [(i + 1, 0, 10 * 86400, 1, None) for i in range(200)]
    cfg = dict(node_mtbf_s=50 * 86400.0, repair_s=0.0, regimes={"default": "fast_recovery"},
               fast_recovery_s=0.0, step_s=1.0)
    r1, _, _ = simulate(rows, 200, scheduler="fcfs", kill=False, models=[fm(**cfg)])
    r2, _, _ = simulate(rows, 200, scheduler="fcfs", kill=False, models=[fm(**cfg)])
    hits = int(r1.interruptions.sum())
    assert abs(hits - 40) <= 5 * math.sqrt(40)
    assert np.array_equal(r1.end, r2.end) and np.array_equal(r1.interruptions, r2.interruptions)


def test_down_units_are_not_counted_busy():
    model = fm(repair_s=100.0, events=[[5.0, 3]])
    res, prep, _ = simulate([(1, 10, 50, 2, None)], 4, scheduler="fcfs", kill=False, models=[model])
    i = int(np.searchsorted(res.change_t, 10.0))
    assert res.change_busy[i] == 2 and res.change_down[i] == 1


def test_config_errors_are_clear():
    with pytest.raises(FailureConfigError, match="unknown key"):
        FailureConfig.from_options({"mtbf": 3})
    with pytest.raises(FailureConfigError, match="regimes.llm_pretrain"):
        FailureConfig.from_options({"regimes": {"llm_pretrain": "pray"}})
    with pytest.raises(FailureConfigError, match="node_mtbf_s must be > 0"):
        FailureConfig.from_options({"node_mtbf_s": 0})
    with pytest.raises(FailureConfigError, match="node 9 does not exist"):
        simulate([(1, 0, 10, 1, None)], 4, scheduler="fcfs", models=[fm(events=[[1.0, 9]])])


def test_run_with_failures_writes_recovery_columns(tmp_path):
    cfg = RunConfig(workload="synthetic:jobs=300,nodes=64,seed=3", nodes=64, scheduler="easy", seed=1,
                    options={"failures": {"enabled": True, "node_mtbf_days": 2.0, "repair_s": 3600.0}}, out=str(tmp_path / "r"))
    r = run(cfg)
    df = r.jobs
    f = r.summary["failures"]
    assert f["node_failures"] > 0 and f["job_interruptions"] == int(df["failures"].sum())
    assert (df["held_s"] >= df["elapsed"].where(df["failures"] == 0, 0) - 1e-6).all()
    done = df[df["state"] == "COMPLETED"]
    assert np.allclose(done["ettr"], done["useful_work_s"] / done["work_done_s"])
    assert 0 < f["goodput"] <= 1
    assert (tmp_path / "r" / "summary.json").exists()
    cfg2 = RunConfig(workload="synthetic:jobs=300,nodes=64,seed=3", nodes=64, scheduler="easy", seed=1,
                     options={"failures": {"enabled": True, "node_mtbf_days": 2.0, "repair_s": 3600.0}})
    assert run(cfg2).jobs["end"].equals(df["end"])


def test_slurm_treats_a_failed_node_as_down():
    # Slurm-like policy (bf every 30 s by default; the event pass starts what fits). 4 nodes; node 3
    # fails at 5 (repair 100 s). H (4 nodes) at 10 cannot start until 105; T (1 node, 50 s) at 30
    # starts at once in the event pass (Slurm plans no reservation on a DOWN node: it does not know
    # when the node returns). A running job on the failed node is requeued and restarts later.
    from hpctwin.schedulers.registry import make_scheduler
    model = fm(repair_s=100.0, events=[[5.0, 3], [200.0, 0]], regimes={"default": "requeue"})
    rows = [(1, 10, 50, 4, 60), (2, 30, 50, 1, 60), (3, 150, 100, 2, 200)]
    sched = make_scheduler("slurm", None, None, {"bf_interval": 30})
    res, prep, _ = simulate(rows, 4, sched_obj=sched, models=[model])
    st = starts_by_id(res, prep)
    assert st[2] == 30.0
    assert st[1] == 105.0
    # job 3 (2 nodes) starts at 155 on nodes 0-1, node 0 fails at 200 -> requeued, node 0 down until
    # 300; it restarts on nodes 1-2 at once (front of the queue, nodes free) and ends at 300
    assert res.interruptions.tolist() == [0, 0, 1]
    assert by_id(res, prep, res.end)[3] == 300.0


def test_gpu_allocation_failure_takes_the_whole_node_down():
    # 2 nodes x 4 GPUs; jobs of 2, 2 and 4 GPUs at t = 0 (best-fit: A, B share node 0; C takes node 1).
    # Node 0 fails at t = 10 (repair 100 s): A and B are interrupted and rerun from scratch after the
    # repair (node 1 is busy until 50, then C is done: A and B restart at 50 on node 1), 100 s each.
    from hpctwin.twin.workload import Workload
    wl = Workload.from_arrays("g", submit=[0, 0, 0], runtime=[100, 100, 50], procs=[1, 1, 1],
                              requested_time=[1000, 1000, 1000], columns={"gpus": np.array([2.0, 2.0, 4.0])})
    cfg = RunConfig(workload="g", nodes=2, gpus_per_node=4, allocation="gpu", scheduler="fcfs",
                    options={"failures": {"enabled": True, "events": [[10.0, 0]], "repair_s": 100.0,
                                          "regimes": {"default": "requeue"}}})
    r = run(cfg, workload=wl)
    df = r.jobs.set_index("job_id")
    assert df["failures"].tolist() == [1, 1, 0]
    assert df.loc[1, "end"] == 150.0 and df.loc[2, "end"] == 150.0 and df.loc[3, "end"] == 50.0
    assert set(df.loc[[1, 2], "nodes"]) == {"4-5", "6-7"}
    assert r.summary["failures"]["node_failures"] == 1
    # free GPUs: 0 until 110 (node 0 down 10..110, node 1 busy), then 4 until 150 -> 4 x 40 / 150
    assert r.summary["gpu_fragmentation"]["mean_free_gpus"] == pytest.approx(160 / 150)
    assert df.loc[1, "queued_s"] == 40.0 and df.loc[1, "held_s"] == 110.0       # waited 10..50
    assert df.loc[1, "ettr"] == pytest.approx(100 / 110)                        # 10 s of lost work


def _intervals(res, prep, model):
    """(unit, start, end, owner) for every run segment and every outage."""
    from hpctwin.twin.ranges import parse_ranges
    rows = []
    for j, s0, e0, txt in res.segments:
        rows += [(int(u), s0, e0, j) for u in parse_ranges(txt)]
    for j in range(len(res.start)):
        if res.failed[j] or np.isnan(res.start[j]):
            continue
        rows += [(int(u), float(res.last_start[j]), float(res.end[j]), j) for u in parse_ranges(res.nodes[j])]
    for node, t0, t1 in model.outages:
        rows.append((node, t0, t1, -1 - node))
    return rows


@pytest.mark.parametrize("sched", ["fcfs", "easy", "conservative", "sjf", "slurm"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_invariants_under_random_failures(sched, seed):
    rng = np.random.default_rng(seed)
    n, total = 120, 16
    rows = [(i + 1, float(t), float(r), int(p), float(r * q)) for i, (t, r, p, q) in enumerate(zip(
        np.sort(rng.uniform(0, 20000, n)).round(), rng.integers(10, 3000, n), rng.integers(1, 9, n),
        rng.uniform(1.0, 3.0, n)))]
    regimes = {"default": ["requeue", "checkpoint_restart", "fast_recovery", "fail"][seed % 4]}
    model = fm(node_mtbf_s=40000.0, repair_s=500.0, regimes=regimes, checkpoint_s=20.0, restart_s=30.0,
               interval=300.0)
    res, prep, _ = simulate(rows, total, scheduler=sched, kill=True, models=[model])
    submit = prep.workload.submit
    assert np.isfinite(res.end).all()
    assert (res.start >= submit).all()
    # no unit held by two owners at once (jobs' runs and outages)
    by_unit: dict[int, list] = {}
    for u, a, b, who in _intervals(res, prep, model):
        by_unit.setdefault(u, []).append((a, b, who))
    for u, iv in by_unit.items():
        iv.sort()
        for (a1, b1, w1), (a2, b2, w2) in zip(iv, iv[1:]):
            assert a2 >= b1 - 1e-9, f"unit {u}: {w1} [{a1}, {b1}) overlaps {w2} [{a2}, {b2})"
    # wall time held = sum of run lengths; queue time + held = end - submit for completed jobs
    seg_len = np.zeros(n)
    for j, a, b, _ in res.segments:
        seg_len[j] += b - a
    last = np.where(res.failed, 0.0, res.end - res.last_start)
    assert np.allclose(res.held, seg_len + last)
    assert np.allclose(res.queued + res.held, res.end - submit)
    assert model.node_failures > 0


@pytest.mark.parametrize("dist,shape", [("poisson", 1.0), ("weibull", 0.7), ("weibull", 2.0)])
def test_uptime_distributions_have_the_configured_mean(dist, shape):
    from hpctwin.twin.model_api import ModelContext
    from hpctwin.twin.run import job_table, prepare
    prep = prepare(workload([(1, 0, 10, 1, None)]), 4, "test")
    m = fm(node_mtbf_s=1000.0, dist=dist, shape=shape)
    m.bind(ModelContext(n_nodes=4, jobs=job_table(prep), runtime=prep.workload.runtime, seed=5))
    x = m._uptimes(200_000)
    assert x.mean() == pytest.approx(1000.0, rel=0.02)
    if dist == "weibull":      # coefficient of variation of a Weibull: sqrt(G(1+2/k) / G(1+1/k)^2 - 1)
        cv = math.sqrt(math.gamma(1 + 2 / shape) / math.gamma(1 + 1 / shape) ** 2 - 1)
        assert x.std() / x.mean() == pytest.approx(cv, rel=0.03)


def test_predictive_easy_survives_failures_and_does_not_learn_from_cut_runs():
    from hpctwin.schedulers.registry import make_scheduler
    from hpctwin.twin.model_api import ModelContext
    from hpctwin.twin.run import job_table, prepare
    from hpctwin.twin.simulation import Simulation
    from hpctwin.twin.workload import Workload
    rng = np.random.default_rng(4)
    n = 150
    wl = Workload.from_arrays("p", submit=np.sort(rng.uniform(0, 20000, n)).round(),
                              runtime=rng.integers(10, 3000, n).astype(float), procs=rng.integers(1, 9, n),
                              requested_time=np.full(n, 9000.0), user=rng.integers(0, 5, n), machine_size=None)
    prep = prepare(wl, 16, "test")
    jt = job_table(prep)
    sched = make_scheduler("easy-pred", None, None)
    model = fm(node_mtbf_s=40000.0, repair_s=500.0, regimes={"default": "requeue"})
    res = Simulation(jt, prep.workload.runtime, prep.kill_limit, sched, 16, models=[model],
                     context=ModelContext(n_nodes=16, jobs=jt, runtime=prep.workload.runtime)).run()
    assert np.isfinite(res.end).all() and res.interruptions.sum() > 0
    # the history holds only completed runs: every observed runtime is a job's full runtime
    done = np.flatnonzero(~np.isnan(sched.observed))
    assert np.allclose(sched.observed[done], np.minimum(prep.workload.runtime[done], prep.kill_limit[done]))
