"""experiments.llm_placement with failures injected into the engine: end-to-end on tiny workloads,
exact agreement with `twin.resilience.replay_failures` for a lone job, and the analytic model."""
from __future__ import annotations

import math

import numpy as np
import pytest

from hpctwin.experiments.llm_placement import (
    CHECKPOINT_COST_S,
    RESTART_S,
    expected_engine_ettr,
    failure_config,
    goodput_by_size,
    machine_workload,
    model_recovery,
    point_metrics,
    simulate_point,
)
from hpctwin.twin import resilience as rs
from hpctwin.twin.workload import Workload


def _training(runtimes, nodes, submit=None, job_class="llm_pretrain") -> Workload:
    """Training jobs without a TP/PP/DP shape (the iteration model leaves them at rate 1)."""
    n = len(runtimes)
    nodes = np.broadcast_to(np.asarray(nodes), (n,))
    return Workload.from_arrays(
        "tiny", submit=np.zeros(n) if submit is None else submit, runtime=runtimes, procs=nodes,
        requested_time=np.asarray(runtimes, float) * 2,
        columns={"gpus": nodes * 8.0, "job_class": np.array([job_class] * n, dtype=object),
                 "gpu_util": np.full(n, 0.9), "iteration_s": np.full(n, np.nan)})


def test_failures_hit_training_jobs_end_to_end():
    # 0.25 day of the synthetic workload on dgx-h100 (128 nodes), node MTBF 2 days: about 128 x
    # (span) / 2 d node failures, some on training jobs
    wl, spec, groups = machine_workload("dgx-h100", 0.25, 3)
    fc = failure_config("checkpoint_restart", 2 * 86400.0)
    df, facts = simulate_point("dgx-h100", "llm", wl, failures=fc, spec=spec, groups=groups, power=True)
    row = point_metrics(df, facts, "checkpoint_restart", 2 * 86400.0)
    tr = df["job_class"].isin(("llm_pretrain", "llm_finetune"))
    assert row["training_interruptions"] > 0 and row["node_failures"] >= row["interruptions"] > 0
    assert int(df.loc[tr, "interruptions"].sum()) == row["training_interruptions"]
    assert 0 < row["goodput"] < 1 and 0 < row["model_goodput"] < 1
    assert row["lost_gpu_hours"] > 0 and row["lost_energy_kwh"] > 0
    # training jobs are checkpoint/restart, inference fast recovery, the rest requeue (defaults kept)
    reg = dict(zip(df["job_class"], df["recovery_regime"]))
    assert reg["llm_pretrain"] == reg["llm_finetune"] == "checkpoint_restart"
    assert reg["llm_infer_service"] == "fast_recovery" and reg["debug"] == "requeue"
    # accounting of every completed checkpoint/restart job: engine work = runtime + restarts + lost
    # work + a whole number of 120 s checkpoint writes
    done = df[tr & ~df["failed"]]
    extra = done["work_done_s"] - done["restart_work_s"] - done["lost_work_s"] - done["runtime"]
    k = extra / CHECKPOINT_COST_S
    assert np.allclose(k, np.round(k), atol=1e-6) and (k > -1e-9).all()
    assert np.allclose(done["ettr"], done["runtime"] / done["work_done_s"])
    # restarts: 600 s per interruption of a checkpoint/restart job (no failure during a restart here)
    hit = done[done["interruptions"] > 0]
    assert (hit["restart_work_s"] <= RESTART_S * hit["interruptions"] + 1e-6).all()
    # per-size goodputs weight back to the total
    s = goodput_by_size(df, facts, "checkpoint_restart", 2 * 86400.0)
    assert s["jobs"].sum() == int((tr & df["start"].notna()).sum())
    assert ((s["goodput"] > 0) & (s["goodput"] <= 1)).all()


def test_lone_job_matches_replay_failures():
    # one 4-node training job of 20,000 s on dgx-h100 (first-fit: nodes 0-3), node MTBF 4e5 s ->
    # job MTBF 1e5 s, Daly interval for 120 s checkpoints. Node 0 fails at 7,000 (the job restarts at
    # once on 1-4: node 0 is down for 4 h), node 1 at 7,300 (during the 600 s restart: restarted
    # again, now on 2-5), node 2 at 15,000. Alone on the machine, the engine's wall time and ETTR must
    # be those of the renewal replay.
    mtbf = 4e5
    W = 20000.0
    fails = np.array([7000.0, 7300.0, 15000.0])
    fc = failure_config("checkpoint_restart", mtbf, events=[[7000.0, 0], [7300.0, 1], [15000.0, 2]])
    df, facts = simulate_point("dgx-h100", "first-fit", _training([W], 4), failures=fc, power=False)
    tau = rs.daly_interval(CHECKPOINT_COST_S, mtbf / 4)
    wall, hit = rs.replay_failures(W, fails, tau, CHECKPOINT_COST_S, RESTART_S)
    assert hit == 3 and df["interruptions"][0] == 3
    assert df["end"][0] == pytest.approx(wall, abs=1e-6)
    assert df["work_done_s"][0] == pytest.approx(wall, abs=1e-6)
    assert df["ettr"][0] == pytest.approx(W / wall, rel=1e-12)
    assert df["checkpoint_interval_s"][0] == pytest.approx(tau)
    assert facts["goodput"] == pytest.approx(W / wall, rel=1e-12)


def test_model_equals_daly_for_whole_segments():
    # fast recovery: W a multiple of the step -> exactly twin.resilience.fast_recovery (Daly eq. 20
    # with delta = 0, R = 150 s)
    for nodes, mtbf in ((1, 5e4), (16, 263.9 * 86400), (512, 26.4 * 86400)):
        e = expected_engine_ettr(36000.0, nodes, mtbf, "fast_recovery", step=12.0)
        assert e == pytest.approx(rs.fast_recovery(36000.0, nodes, mtbf, step=12.0).ettr, rel=1e-12)
    # checkpoint/restart with delta = 0 and W = 5 tau: Daly eq. 20
    e = expected_engine_ettr(5000.0, 2, 1e5, "checkpoint_restart", checkpoint_s=0.0, interval=1000.0)
    assert e == pytest.approx(rs.checkpoint_restart(5000.0, 2, 1e5, 0.0, RESTART_S, interval=1000.0).ettr, rel=1e-12)
    # delta > 0: W = 3 tau has 2 checkpoints, not 3: E[T] = M e^{R/M} (2 (e^{(tau+d)/M} - 1) + e^{tau/M} - 1)
    m, tau, d, r = 1e4, 1000.0, 100.0, 600.0
    want = 3000.0 / (m * math.exp(r / m) * (2 * math.expm1((tau + d) / m) + math.expm1(tau / m)))
    assert expected_engine_ettr(3000.0, 1, m, "checkpoint_restart", interval=tau, checkpoint_s=d,
                                restart_s=r) == pytest.approx(want, rel=1e-12)
    # a job at half speed sees the MTBF as half as long in engine work
    assert expected_engine_ettr(3000.0, 1, m, "checkpoint_restart", interval=tau, checkpoint_s=d, restart_s=r,
                                rate=0.5) == pytest.approx(expected_engine_ettr(3000.0, 1, m / 2, "checkpoint_restart",
                                                                                interval=tau, checkpoint_s=d,
                                                                                restart_s=r), rel=1e-12)
    with pytest.raises(ValueError, match="unknown regime 'pray'"):
        expected_engine_ettr(1.0, 1, 1.0, "pray")
    with pytest.raises(ValueError, match="unknown regime"):
        failure_config("requeue", 1e5)


def test_engine_goodput_agrees_with_the_model():
    # 64 one-node training jobs of one day on dgx-h100 (128 nodes: spare nodes for every restart),
    # node MTBF half a day (about 2 failures per job). The engine's total engine time must be the
    # model's expectation within 4 standard errors (estimated from the per-job spread of T / E[T]).
    n, W, mtbf = 64, 86400.0, 43200.0
    fc = failure_config("checkpoint_restart", mtbf)
    df, facts = simulate_point("dgx-h100", "first-fit", _training(np.full(n, W), 1), failures=fc, power=False,
                               seed=11)
    assert df["interruptions"].sum() > n
    e = expected_engine_ettr(W, 1, mtbf, "checkpoint_restart")
    ratio = df["work_done_s"].to_numpy() / (W / e)
    se = ratio.std(ddof=1) / math.sqrt(n)
    assert abs(ratio.mean() - 1.0) < 4 * se
    m = model_recovery(df, "checkpoint_restart", mtbf, 8)
    assert m["model_goodput"] == pytest.approx(e, rel=1e-12)
    assert abs(facts["goodput"] - m["model_goodput"]) < 4 * se
