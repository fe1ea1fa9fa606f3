"""Young/Daly intervals, Daly's wall-time model, fast recovery, and the Monte-Carlo checks."""
from __future__ import annotations

import math

import numpy as np
import pytest

from hpctwin.twin import resilience as rs


def test_young_interval_known_values():
    assert rs.young_interval(50.0, 10_000.0) == 1000.0                     # sqrt(2 * 50 * 1e4)
    assert rs.young_interval(60.0, 86_400.0) == pytest.approx(3219.938, abs=1e-3)


def test_daly_interval_known_values():
    # sqrt(2*50*1e4) * (1 + sqrt(0.0025)/3 + 0.0025/9) - 50 = 1000 * 1.0169444 - 50
    assert rs.daly_interval(50.0, 10_000.0) == pytest.approx(966.94444, abs=1e-4)
    assert rs.daly_interval(300.0, 100.0) == 100.0                          # delta >= 2M -> M
    assert rs.daly_interval(1.0, 1e9) < rs.young_interval(1.0, 1e9)


def test_llama3_anchor():
    # 54 days x 2,048 nodes / 419 interruptions
    assert rs.LLAMA3_NODE_MTBF_S / rs.DAY == pytest.approx(263.9427, abs=1e-4)
    assert rs.node_mtbf_from_anchor(419, 54, 16384, 8) == rs.LLAMA3_NODE_MTBF_S
    assert rs.job_mtbf(rs.LLAMA3_NODE_MTBF_S, 2048) / 3600 == pytest.approx(54 * 24 / 419)


def test_expected_wall_time_exact_cases():
    assert rs.expected_wall_time(1.0, 1.0, 1.0) == pytest.approx(math.e - 1)
    # no failures in the limit: W (tau + delta) / tau
    assert rs.expected_wall_time(3600.0, 1e15, 600.0, 60.0, 300.0) == pytest.approx(3960.0, rel=1e-9)
    # restart multiplies by exp(R / M)
    assert rs.expected_wall_time(10.0, 5.0, 2.0, 0.0, 5.0) / rs.expected_wall_time(10.0, 5.0, 2.0) == pytest.approx(math.e)


def test_regimes_first_order():
    w, n, m = 30 * rs.DAY, 128, rs.LLAMA3_NODE_MTBF_S
    fr = rs.fast_recovery(w, n, m, step=10.0, recovery=150.0)
    mj = m / n
    assert fr.ettr == pytest.approx(1 - 5.0 / mj - 150.0 / mj, rel=1e-4)   # 1 - s/2M - R/M
    cr = rs.checkpoint_restart(w, n, m, checkpoint_cost=300.0, restart=600.0)
    assert cr.interval == pytest.approx(rs.daly_interval(300.0, mj))
    assert cr.ettr < fr.ettr < 1.0
    assert cr.lost == pytest.approx(cr.wall - w)
    assert cr.lost_gpu_hours(1024) == pytest.approx(cr.lost * 1024 / 3600)
    young = rs.checkpoint_restart(w, n, m, 300.0, 600.0, rule="young")
    assert abs(young.ettr - cr.ettr) < 1e-3


def test_replay_loses_exactly_work_since_last_checkpoint():
    # 10 s segments + 1 s checkpoints; a failure at t = 25 s falls 3 s into the third segment: the
    # 20 s committed by the checkpoints at 11 s and 22 s survive, the 3 s are lost, restart 5 s.
    wall, hits = rs.replay_failures(100.0, np.array([25.0]), 10.0, 1.0, 5.0)
    assert hits == 1
    assert wall == pytest.approx(25.0 + 5.0 + 80.0 + 7 * 1.0)             # 117 s
    no_fail, _ = rs.replay_failures(100.0, np.array([]), 10.0, 1.0, 5.0)
    assert no_fail == pytest.approx(109.0)
    assert wall - no_fail == pytest.approx(3.0 + 5.0)                       # lost work + restart
    # a second failure during the restart restarts the restart
    wall2, hits2 = rs.replay_failures(100.0, np.array([25.0, 27.0]), 10.0, 1.0, 5.0)
    assert (wall2, hits2) == (pytest.approx(119.0), 2)


def test_monte_carlo_matches_analytic_poisson():
    w, n, m = 20 * rs.DAY, 256, rs.LLAMA3_NODE_MTBF_S
    an = rs.checkpoint_restart(w, n, m, 300.0, 600.0)
    mc = rs.simulate(w, n, m, checkpoint_cost=300.0, restart=600.0, trials=200, seed=3)
    assert abs(mc.wall_mean - an.wall) < 4 * mc.wall_sem
    fa = rs.fast_recovery(w, n, m, step=15.0)
    fm = rs.simulate(w, n, m, regime="fast_recovery", step=15.0, trials=200, seed=3)
    assert abs(fm.wall_mean - fa.wall) < 4 * fm.wall_sem
    again = rs.simulate(w, n, m, checkpoint_cost=300.0, restart=600.0, trials=200, seed=3)
    assert again == mc                                                      # seeded


def test_failure_processes():
    rng = np.random.default_rng(0)
    f = rs.failure_times(rng, 100, 1000.0, 50_000.0)
    assert np.all(np.diff(f) >= 0) and f.max() < 50_000.0
    assert abs(len(f) - 5000) < 4 * math.sqrt(5000)
    g = rs.failure_times(np.random.default_rng(1), 100, 1000.0, 50_000.0, dist="weibull", shape=1.0)
    assert abs(len(g) - 5000) < 4 * math.sqrt(5000)                      # shape 1 = exponential
    h = rs.failure_times(np.random.default_rng(1), 100, 1000.0, 50_000.0, dist="weibull", shape=0.7)
    assert np.all(np.diff(h) >= 0)


def test_errors():
    with pytest.raises(rs.ResilienceError, match="checkpoint_cost must be > 0"):
        rs.young_interval(0.0, 100.0)
    with pytest.raises(rs.ResilienceError, match="nodes must be > 0"):
        rs.job_mtbf(100.0, 0)
    with pytest.raises(rs.ResilienceError, match="unknown failure distribution 'gamma'"):
        rs.failure_times(np.random.default_rng(0), 1, 1.0, 1.0, dist="gamma")
    with pytest.raises(rs.ResilienceError, match="unknown regime"):
        rs.simulate(1.0, 1, 1.0, regime="pray")
