"""EASY with runtime predictions and EASY++ (schedulers/predictive.py): hand-checked schedules."""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.schedulers.predictive import (PREDICTIVE, TSAFRIR_STEPS, EasyPlusPlus, EasyPred, EasySJBF,
                                   PredictiveEasy, PredictorError)
from hpctwin.schedulers.registry import make_scheduler
from hpctwin.twin.run import job_table, prepare
from hpctwin.twin.simulation import Simulation
from hpctwin.twin.workload import Workload


def sim(rows, total, sched):
    """rows: (job_id, submit, runtime, procs, requested, user)."""
    w = Workload.from_arrays("t", job_id=[r[0] for r in rows], submit=[r[1] for r in rows],
                             runtime=[r[2] for r in rows], procs=[r[3] for r in rows],
                             requested_time=[r[4] for r in rows], user=[r[5] for r in rows])
    prep = prepare(w, total, "test")
    res = Simulation(job_table(prep), prep.workload.runtime, prep.kill_limit, sched, total).run()
    return {int(j): float(s) for j, s in zip(prep.workload.job_id, res.start)}, sched


# machine of 10 units. Jobs 1, 2 of user 1 run 50 s; job 3 (user 1) is predicted 50 s but runs
# 100 s; job 4 needs the whole machine (the head); job 5 (4 units, request 100 s) could backfill
# only if job 3 were expected to end late; job 6 arrives when job 3 has outlived its prediction.
ROWS = [(1, 0, 50, 5, 1000, 1), (2, 0, 50, 5, 1000, 1), (3, 60, 100, 6, 1000, 1),
        (4, 61, 100, 10, 200, 2), (5, 62, 30, 4, 100, 3), (6, 120, 10, 1, 20, 4)]


def test_easy_with_requested_estimates_backfills_job5():
    starts, _ = sim(ROWS, 10, make_scheduler("easy"))
    assert starts == {1: 0, 2: 0, 3: 60, 4: 160, 5: 62, 6: 120}


def test_easy_pred_plans_with_user_average_and_corrects():
    starts, s = sim(ROWS, 10, EasyPred())
    # job 3 predicted (50 + 50) / 2 = 50 s -> shadow of job 4 at 110; job 5 would end at 162 > 110
    # with no extra units: it does not backfill. At 120 job 3 is corrected to 50 + 60 = 110 s
    # (shadow 170) and job 6 (ends 140) backfills. Job 5 starts after job 4.
    assert starts == {1: 0, 2: 0, 3: 60, 4: 160, 5: 260, 6: 120}
    assert s.pred0[2] == 50.0
    assert s.n_corr[2] == 1 and s.corrections == 1
    st = s.prediction_stats()
    assert st["predicted_jobs"] == 6
    assert st["underestimate_rate"] == pytest.approx(1 / 6)   # only job 3: 50 < 100


def test_tsafrir_correction_steps_and_cap():
    s = PredictiveEasy()
    s.user_est = np.array([1000.0])
    s.pred = np.array([50.0])
    s.pred0 = np.array([50.0])
    s.n_corr = np.zeros(1, dtype=np.int64)
    s.corrections = 0
    assert s._corrected(0, 400.0) == 50.0 + TSAFRIR_STEPS[3]        # 50+60, 50+300 <= 400, 50+900
    assert s.n_corr[0] == 3 and s.corrections == 3
    s.pred[0] = 950.0
    assert s._corrected(0, 990.0) == 1000.0                        # capped by the user's estimate
    s2 = PredictiveEasy(correction="requested")
    s2.user_est, s2.pred, s2.pred0 = np.array([800.0]), np.array([10.0]), np.array([10.0])
    s2.n_corr, s2.corrections = np.zeros(1, dtype=np.int64), 0
    assert s2._corrected(0, 11.0) == 800.0


def test_easy_plus_plus_backfills_shortest_first():
    rows = [(1, 0, 100, 8, 100, 1), (2, 1, 100, 10, 100, 2), (3, 2, 50, 2, 90, 3), (4, 2, 10, 2, 20, 4)]
    easy, _ = sim(rows, 10, make_scheduler("easy"))
    sjbf, _ = sim(rows, 10, EasySJBF())
    assert easy[3] == 2 and easy[4] > 2            # FCFS order among candidates: job 3 first
    assert sjbf[4] == 2 and sjbf[3] > 2            # shortest estimate first: job 4


def test_learning_predictor_needs_user_ids():
    rows = [(1, 0, 10, 1, 100, -1), (2, 1, 10, 1, 100, -1)]
    with pytest.raises(PredictorError, match="no user ids"):
        sim(rows, 4, EasyPlusPlus())
    starts, _ = sim(rows, 4, EasySJBF())               # the estimate predictor does not need them
    assert starts == {1: 0, 2: 1}


def test_registry_names_and_bad_options():
    assert set(PREDICTIVE) == {"easy-pred", "easy++", "easy-pred-gbm", "easy++-gbm", "easy-sjbf"}
    assert PREDICTIVE["easy++"]().describe()["sjbf"] is True
    with pytest.raises(PredictorError, match="unknown predictor"):
        PredictiveEasy(predictor="oracle")
    with pytest.raises(PredictorError, match="unknown correction"):
        PredictiveEasy(correction="triple")
    with pytest.raises(PredictorError, match="retrain_every"):
        PredictiveEasy(retrain_every=0)


def _gbm_rows(n, last_runtime):
    rng = np.random.default_rng(1)
    rows = []
    for i in range(n):
        u = int(rng.integers(0, 8))
        rt = float(np.ceil(50 * (u + 1) * rng.uniform(0.5, 1.5)))
        rows.append((i + 1, 30.0 * i, rt, int(rng.integers(1, 5)), 2000.0, u))
    j, s, _, p, r, u = rows[-1]
    rows[-1] = (j, s, last_runtime, p, r, u)
    return rows


@pytest.mark.slow
def test_gbm_never_sees_the_jobs_own_runtime():
    pytest.importorskip("sklearn")
    from hpctwin.schedulers.predictive import EasyPredGBM
    _, a = sim(_gbm_rows(120, 10.0), 8, EasyPredGBM(min_train=30, retrain_every=20))
    _, b = sim(_gbm_rows(120, 1900.0), 8, EasyPredGBM(min_train=30, retrain_every=20))
    assert a._trainings >= 2
    # the last job's features and prediction do not depend on its own runtime
    assert np.array_equal(a._feat[-1], b._feat[-1], equal_nan=True)
    assert a.pred0[-1] == b.pred0[-1]
    assert np.all(a.pred0 <= 2000.0)
