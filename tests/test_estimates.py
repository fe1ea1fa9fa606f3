"""Estimate models (datasets/estimates.py): hand-checked values, invariants and errors."""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.datasets.estimates import EstimateError, estimate_model, parse_name, run_length
from hpctwin.twin.workload import Workload


def wl(runtime, req=None, user=None, submit=None, wait=None):
    n = len(runtime)
    cols = {} if wait is None else {"wait_recorded": np.asarray(wait, dtype=float)}
    return Workload.from_arrays("t", submit=submit if submit is not None else np.arange(n, dtype=float),
                                runtime=runtime, procs=np.ones(n), requested_time=req, user=user,
                                columns=cols)


def test_f_badness_bounds_and_determinism():
    rt = np.array([10.0, 100.0, 1000.0, 50.0] * 50)
    req = np.array([20.0, 5000.0, 500.0, np.nan] * 50)    # job 3: killed at 500 s; job 4: no request
    w = wl(rt, req)
    r = run_length(w)
    assert r[:4].tolist() == [10.0, 100.0, 500.0, 50.0]
    e = estimate_model("f-badness:3", w, seed=7)
    assert np.all(e >= r) and np.all(e <= 4 * r)
    assert np.array_equal(e, estimate_model("f-badness:f=3", w, seed=7))
    assert not np.array_equal(e, estimate_model("f-badness:3", w, seed=8))
    assert np.array_equal(estimate_model("f-badness:0", w, seed=1), r)


def test_tsafrir_modal_is_modal_and_never_short():
    rng = np.random.default_rng(0)
    rt = np.ceil(rng.exponential(3000.0, 2000)) + 1
    w = wl(rt, np.full(2000, 36 * 3600.0))
    e = estimate_model("tsafrir", w, seed=3)
    assert np.all(e >= rt)
    values, counts = np.unique(e, return_counts=True)
    # modal: the 20 most popular values hold most jobs (Tsafrir et al. 2005: about 90 %)
    assert np.sort(counts)[::-1][:20].sum() / len(e) > 0.8
    assert e.max() <= 36 * 3600
    assert np.array_equal(e, estimate_model("tsafrir", w, seed=3))


def test_user_average_hand_checked():
    # user 1: jobs finish (in the log) at 0+0+10=10, 1+0+30=31, then job 2 at 40 sees both -> 20;
    # job 3 submitted at 35 sees only... finishes at 10 and 31 -> 20 as well; user 2 never has two
    submit = [0.0, 1.0, 40.0, 35.0, 2.0]
    rt = [10.0, 30.0, 99.0, 77.0, 5.0]
    req = [100.0, 100.0, 100.0, 15.0, 50.0]
    wait = [0.0, 0.0, 0.0, 0.0, 0.0]
    user = [1, 1, 1, 1, 2]
    e = estimate_model("user-average", wl(rt, req, user, np.array(submit), wait), seed=0)
    # job 3 (req 15) is capped by its request; user 2 falls back to its request
    assert e.tolist() == [100.0, 100.0, 20.0, 15.0, 50.0]


def test_user_average_needs_users_and_waits():
    with pytest.raises(EstimateError, match="no user ids"):
        estimate_model("user-average", wl([1.0, 2.0], [5.0, 5.0], [-1, -1], wait=[0, 0]), 0)
    with pytest.raises(EstimateError, match="no recorded"):
        estimate_model("user-average", wl([1.0, 2.0], [5.0, 5.0], [1, 1]), 0)


@pytest.mark.parametrize("name,msg", [("bogus", "unknown estimate model"), ("f-badness", "needs its factor"),
                                      ("f-badness:x", "not a number"), ("f-badness:-1", ">= 0")])
def test_bad_names(name, msg):
    with pytest.raises(EstimateError, match=msg):
        parse_name(name)
