"""The conformance suite's Slurm preemption and reservation variants (issue 27) and the checks they add:
``preemption`` (`checks.assert_runs`: every run of a requeued job) and ``reservations``
(`checks.assert_reservations`: nobody else on a reservation's nodes inside its window). The variants
themselves run with every other target in tests/test_conformance.py; here: that they are listed with
those checks, and that the checks catch what they are for (hand-made results)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from hpctwin.schedulers import checks

VARIANTS = checks.slurm_resv_preempt_variants()


def test_variants_are_targets_with_their_checks():
    by = {t.label: t for t in checks.targets()}
    want = {"slurm[partition_prio REQUEUE]": "preemption", "slurm[partition_prio CANCEL, cons_tres shared]":
            "preemption", "slurm[qos REQUEUE, PreemptExemptTime]": "preemption",
            "slurm[MAINT reservation]": "reservations", "slurm[user reservation DAILY, select/cons_tres]":
            "reservations"}
    assert set(want) == set(VARIANTS)
    for label, check in want.items():
        t = by[label]
        assert t.error is None and t.workload_suffix == "+slurm" and "_workloads" not in t.options
        assert check in [n for n, _ in checks.check_scheduler(t)]
        assert t.wl("mixed") == "mixed+slurm" and t.wl("mixed@2#4") == "mixed@2+slurm#4"


def test_slurm_columns_of_the_generated_workloads():
    wl = checks._workloads()["exact+slurm"]
    cols = wl.columns
    assert list(cols["partition_name"][:4]) == ["low", "low", "low", "high"]
    assert list(cols["qos_name"][:4]) == ["normal", "high", "normal", "normal"]
    proj = np.flatnonzero(cols["reservation"] == "proj")
    assert len(proj) and (proj % 5 == 2).all() and (np.asarray(wl.procs)[proj] <= 4).all()
    assert len(wl) == len(checks._workloads()["exact"])
    with pytest.raises(KeyError, match="unknown suffix \\+pbs"):
        checks._workloads()["exact+pbs"]


def _res(segments, start, end, last_start, nodes, held, queued, pre, preempted=None, killed=None):
    n = len(start)
    return SimpleNamespace(segments=segments, start=np.array(start, float), end=np.array(end, float),
                           last_start=np.array(last_start, float), nodes=nodes, held=np.array(held, float),
                           queued=np.array(queued, float), preemptions=np.array(pre),
                           preempted=np.array(preempted if preempted is not None else [False] * n),
                           killed=np.array(killed if killed is not None else [False] * n))


def test_assert_runs_accepts_a_requeued_job():
    """Job 1 (submitted at 0) runs [0, 100) on unit 0 and is preempted; job 2 takes unit 0 over [100,
    150); job 1 runs again [200, 700), its whole 500 s runtime, on unit 0: held 600 s, queued 100 s."""
    res = _res([(0, 0.0, 100.0, "0")], [0, 100], [700, 150], [200, 100], ["0", "0"], [600, 50], [100, 0], [1, 0])
    checks.assert_runs(res, np.array([1, 2]), np.array([0.0, 100.0]), np.array([1000.0, 60.0]),
                       np.array([500.0, 50.0]))


@pytest.mark.parametrize("change, msg", [
    (dict(last_start=[90, 100], nodes=["1", "0"]), "job 1 runs again at 90 s before its run \\[0, 100\\) s ended"),
    (dict(last_start=[120, 100]), "a unit is used twice: 0: job 2 holds \\[100, 150\\) s and job 1 holds \\[120, 700\\)"),
    (dict(queued=[50, 0]), "job 1: queued 50 s \\+ held 600 s \\(runs: 600 s\\) != response 700 s"),
    (dict(pre=[2, 0]), "job 1 preempted 2 times but 1 of its runs were interrupted"),
    (dict(end=[690, 150], last_start=[200, 100], held=[590, 50], queued=[100, 0]),
     "job 1, requeued by preemption, ran 490 s in its last run"),
])
def test_assert_runs_catches(change, msg):
    base = dict(segments=[(0, 0.0, 100.0, "0")], start=[0, 100], end=[700, 150], last_start=[200, 100],
                nodes=["0", "0"], held=[600, 50], queued=[100, 0], pre=[1, 0])
    base.update(change)
    with pytest.raises(checks.ConformanceError, match=msg):
        checks.assert_runs(_res(**base), np.array([1, 2]), np.array([0.0, 100.0]), np.array([1000.0, 60.0]),
                           np.array([500.0, 50.0]))


RESV = [{"name": "proj", "start": 600.0, "end": 1200.0, "period": None, "nodes": ["n3", "n4"], "flags": []}]
IDX = {"n1": 0, "n2": 1, "n3": 2, "n4": 3}


def _jobs(rows):
    return pd.DataFrame(rows, columns=["job_id", "start", "end", "nodes"])


def test_assert_reservations_accepts_jobs_that_keep_out():
    """Job 1 on n3 ends exactly at the window's start (half-open); job 2 of proj on n3-n4 is killed at
    1230 (end 1200 + 0 < the periodic check at 1230); job 3 uses n1-n2 throughout."""
    df = _jobs([(1, 0.0, 600.0, "2"), (2, 600.0, 1230.0, "2-3"), (3, 0.0, 5000.0, "0-1")])
    checks.assert_reservations(df, RESV, IDX, {2: "proj"}, 5000.0)


@pytest.mark.parametrize("rows, jr, msg", [
    ([(1, 0.0, 601.0, "2")], {}, "job 1 \\(not in reservation proj\\) holds node\\(s\\) \\[2\\] over \\[0, 601\\) s"),
    ([(2, 600.0, 700.0, "1-2")], {2: "proj"}, "job 2 of reservation proj runs on nodes \\[1\\] outside it"),
    ([(2, 500.0, 700.0, "2")], {2: "proj"}, "job 2 of reservation proj starts at 500 s outside"),
    ([(2, 700.0, 1231.0, "2")], {2: "proj"}, "ends at 1231 s, after the window's end 1200 s"),
])
def test_assert_reservations_catches(rows, jr, msg):
    with pytest.raises(checks.ConformanceError, match=msg):
        checks.assert_reservations(_jobs(rows), RESV, IDX, jr, 5000.0)


def test_recurring_windows_are_all_checked():
    """A DAILY reservation's second window [87000, 87600) holds the nodes too."""
    daily = [dict(RESV[0], period=86400.0)]
    with pytest.raises(checks.ConformanceError, match="inside the window \\[87000, 87600\\) s"):
        checks.assert_reservations(_jobs([(1, 86500.0, 87100.0, "3")]), daily, IDX, {}, 90000.0)
    checks.assert_reservations(_jobs([(1, 1300.0, 86900.0, "3")]), daily, IDX, {}, 90000.0)
