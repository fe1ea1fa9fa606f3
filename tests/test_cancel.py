"""Withdrawing a waiting job (`EngineControl.cancel`, the scheduler hook ``on_cancel``; issue 16).

Hand-checked on a 4-node machine: A (4 nodes, 0-100 s), B (2 nodes, 50 s) at 1 s, C (2 nodes, 30 s) at
2 s, a held node request H (2 nodes, 1,000 s) submitted by a model at 5 s, D (2 nodes, 10 s) at 10 s.
Under FCFS with H kept: B and C start at 100, H at 130 (C ends), D at 150 (B ends). With H withdrawn at
20 s: B, C at 100, D at 130; H never starts (CANCELLED, no start or end, 15 s queued).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from hpctwin.schedulers import checks
from hpctwin.schedulers.backfill import QueueScheduler
from hpctwin.schedulers.registry import make_scheduler
from hpctwin.twin.contract import ModelContext, RunModel, Scheduler, resolve_hooks
from hpctwin.twin.guards import SimulationError
from hpctwin.twin.simulation import Simulation
from hpctwin.twin.workload import JOB_STATES, Workload, job_states


class Requester(RunModel):
    """Submits held job ``held`` at ``t_submit`` and cancels ``cancel`` at ``t_cancel`` (None: never)."""

    name = "requester"

    def __init__(self, held: int, t_submit: float, cancel: int | None, t_cancel: float | None):
        self.held, self.t_submit, self.cancel, self.t_cancel = held, t_submit, cancel, t_cancel
        self.states: list[tuple[float, str]] = []
        self.todo = sorted([(t_submit, "submit")] + ([(t_cancel, "cancel")] if t_cancel is not None else []))

    def next_event(self, now):
        return self.todo[0][0] if self.todo else None

    def on_event(self, now, control):
        _, what = self.todo.pop(0)
        if what == "submit":
            control.submit(self.held)
        else:
            self.states.append((now, control.state(self.cancel)))
            control.cancel(self.cancel)
        return None


class Recording(QueueScheduler):
    """FCFS (no backfill), recording the ``on_cancel`` calls and each pass's queue."""

    def __init__(self, backfill: str = "none"):
        super().__init__("fcfs", backfill)
        self.cancels: list[tuple[float, int]] = []
        self.queues: list[tuple[float, list]] = []
        self.resv: list[tuple[float, list]] = []     # conservative: reservations after each pass

    def schedule(self, now, queue, cluster):
        self.queues.append((now, queue.tolist()))
        out = super().schedule(now, queue, cluster)
        if self._plan is not None:
            self.resv.append((now, self._plan.resv.tolist()))
        return out

    def on_cancel(self, now, job):
        self.cancels.append((now, job))
        super().on_cancel(now, job)


def case(sched, cancel_at: float | None = 20.0, cancel_job: int = 4):
    """(result, scheduler, model): jobs A, B, C, D (indices 0-3) and held H (index 4)."""
    submit = np.array([0.0, 1.0, 2.0, 10.0, math.inf])
    runtime = np.array([100.0, 50.0, 30.0, 10.0, 1000.0])
    procs = np.array([4, 2, 2, 2, 2])
    wl = Workload.from_arrays("t", submit=submit, runtime=runtime, procs=procs, requested_time=runtime.copy())
    from hpctwin.twin.run import job_table, prepare
    prep = prepare(wl, 4, "test")
    order = np.argsort(prep.workload.submit, kind="stable")
    assert order.tolist() == [0, 1, 2, 3, 4]
    jobs = job_table(prep)
    m = Requester(4, 5.0, cancel_job, cancel_at)
    ctx = ModelContext(n_nodes=4, jobs=jobs, runtime=prep.workload.runtime, seed=1)
    sim = Simulation(jobs, prep.workload.runtime, prep.kill_limit, sched, 4, models=[m], context=ctx, held_jobs=1)
    return sim.run(), sched, m


@pytest.mark.parametrize("backfill", ["none", "easy", "conservative"])
def test_cancelled_request_never_starts_and_the_rest_moves_up(backfill):
    res, sched, m = case(Recording(backfill))
    assert res.start.tolist()[:4] == [0.0, 100.0, 100.0, 130.0]
    assert res.end.tolist()[:4] == [100.0, 150.0, 130.0, 140.0]
    assert math.isnan(res.start[4]) and math.isnan(res.end[4])
    assert res.cancelled.tolist() == [False, False, False, False, True]
    assert res.queued[4] == 15.0                      # submitted at 5, withdrawn at 20
    assert m.states == [(20.0, "waiting")]
    assert sched.cancels == [(20.0, 4)]
    # the pass at the cancel sees the queue without H; D behind it is unaffected otherwise
    assert (20.0, [1, 2, 3]) in sched.queues and all(4 not in q for t, q in sched.queues if t >= 20.0)
    assert job_states(res.failed, res.killed, res.start, res.cancelled).tolist() == \
        ["COMPLETED"] * 4 + ["CANCELLED"]


@pytest.mark.parametrize("backfill", ["none", "easy", "conservative"])
def test_without_the_cancel_the_request_runs_in_fcfs_order(backfill):
    res, _, _ = case(Recording(backfill), cancel_at=None)
    assert res.start.tolist() == [0.0, 100.0, 100.0, 150.0, 130.0]
    assert res.cancelled is None


def test_cancelling_a_job_that_does_not_wait_is_an_error():
    with pytest.raises(SimulationError, match="cancel of job index 0, which is not waiting"):
        case(Recording(), cancel_at=120.0, cancel_job=0)      # A runs 0-100: done by then
    with pytest.raises(SimulationError, match="cancel of job index 1, which is not waiting"):
        case(Recording(), cancel_at=120.0, cancel_job=1)      # B runs from 100


def test_state_reads_cancelled_after_the_cancel():
    class Probe(Requester):
        def __init__(self, *a):
            super().__init__(*a)
            self.todo.append((30.0, "probe"))

        def on_event(self, now, control):
            if self.todo[0][1] == "probe":
                self.todo.pop(0)
                self.states.append((now, control.state(self.cancel)))
                return None
            return super().on_event(now, control)
    from hpctwin.twin.run import job_table, prepare
    wl = Workload.from_arrays("t", submit=np.array([0.0, math.inf]), runtime=np.array([100.0, 50.0]),
                              procs=np.array([4, 2]), requested_time=np.array([100.0, 50.0]))
    prep = prepare(wl, 4, "test")
    m = Probe(1, 5.0, 1, 20.0)
    ctx = ModelContext(n_nodes=4, jobs=job_table(prep), runtime=prep.workload.runtime, seed=1)
    res = Simulation(job_table(prep), prep.workload.runtime, prep.kill_limit, make_scheduler("easy"), 4,
                     models=[m], context=ctx, held_jobs=1).run()
    assert m.states == [(20.0, "waiting"), (30.0, "cancelled")]
    assert "CANCELLED" in JOB_STATES and res.cancelled.tolist() == [False, True]


def test_on_cancel_is_a_resolved_hook_and_the_default_is_absent():
    assert resolve_hooks(Scheduler()).on_cancel is None
    assert resolve_hooks(make_scheduler("easy")).on_cancel is not None
    assert resolve_hooks(make_scheduler("slurm")).on_cancel is not None


def test_conservative_gives_the_reservation_back_at_once():
    """Conservative reserves B at [100, 150), C at [100, 130), H at [130, 1130) and D (2 nodes, 10 s) at
    [150, 160) (B and H hold the machine over [130, 150)). H withdrawn at 20: its units go back and
    the cancel's pass compresses D to [130, 140), when C ends."""
    sched = Recording("conservative")
    sched.first_reservation = {}
    res, _, _ = case(sched)
    assert sched.first_reservation == {0: 0.0, 1: 100.0, 2: 100.0, 4: 130.0, 3: 150.0}
    after = dict(sched.resv)[20.0]
    assert after[3] == 130.0 and math.isnan(after[4])   # at the cancel's own pass
    assert res.start[3] == 130.0
    assert sched._plan.resv[4] != sched._plan.resv[4]    # H holds no reservation


def test_policy_without_on_cancel_state_is_caught_by_the_probe(monkeypatch):
    """The conformance check ``cancel_frees`` fails a conservative policy that keeps a withdrawn job's
    reservation (its hook removed), and passes the real one."""
    t = checks.target_for("conservative", "fcfs", backfill="conservative")
    checks.check_cancel_frees(t)
    monkeypatch.delattr(QueueScheduler, "on_cancel")
    with pytest.raises(checks.ConformanceError, match="C starts at 1100 s"):
        checks.check_cancel_frees(t)


def test_cancelled_rows_in_the_run_tables():
    """Through `twin.run.simulate`: jobs.csv's state is CANCELLED with empty start/end, the job
    accounting balances, and every other job ran."""
    t = checks.target_for("easy", "easy")
    cc = checks.Canceller(plan=[(10.0, 1)])
    out = checks.run_with_canceller(t, "cancel-probe", cc, checks.cancel_probe())
    df = out.jobs
    assert df.state.tolist() == ["COMPLETED", "CANCELLED", "COMPLETED"]
    assert df.start.isna().tolist() == [False, True, False] and df.end.isna().tolist() == [False, True, False]
    assert df.start.tolist()[2] == 50.0
    acc = out.summary["accounting"]
    assert acc["simulated"] == {"CANCELLED": 1, "COMPLETED": 2} and acc["balanced"]
