"""Withdrawing a waiting job (`EngineControl.cancel`, the scheduler hook ``on_cancel``; issue 16).

Hand-checked on a 4-node machine: A (4 nodes, 0-100 s), B (2 nodes, 50 s) at 1 s, C (2 nodes, 30 s) at
2 s, a held node request H (2 nodes, 1,000 s) submitted by a model at 5 s, D (2 nodes, 10 s) at 10 s.
Under FCFS with H kept: B and C start at 100, H at 130 (C ends), D at 150 (B ends). With H withdrawn at
20 s: B, C at 100, D at 130; H never starts (CANCELLED, no start or end, 15 s queued, cancel time 20 s:
Slurm's End of a job cancelled while pending, ``job_mgr.c`` ``job_signal()``).
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


@pytest.mark.parametrize("at", [20.0, 20.25, 99.5])
def test_the_engine_records_the_cancel_time(at):
    """``cancel_time`` is the ``now`` of the event that asked for the cancel, NaN for every other job."""
    res, sched, _ = case(Recording(), cancel_at=at)
    assert res.cancel_time[4] == at and np.isnan(res.cancel_time[:4]).all()
    assert res.queued[4] == at - 5.0                   # submitted at 5 s
    assert sched.cancels == [(at, 4)]
    assert math.isnan(res.start[4]) and math.isnan(res.end[4])   # it never held units


def test_no_cancel_time_without_a_cancel():
    res, _, _ = case(Recording(), cancel_at=None)
    assert res.cancel_time is None and res.cancelled is None


def _probe_run(monkeypatch, plan):
    """cancel-probe on 16 units under EASY with ``Canceller(plan)``: (Outcome, RunResult)."""
    from hpctwin.twin import run as run_mod
    got = {}
    real = run_mod.simulate

    def spy(*a, **k):
        got["r"] = real(*a, **k)
        return got["r"]
    monkeypatch.setattr(run_mod, "simulate", spy)
    t = checks.target_for("easy", "easy")
    out = checks.run_with_canceller(t, "cancel-probe", checks.Canceller(plan=plan), checks.cancel_probe())
    return out, got["r"]


def test_jobs_csv_rows_and_metrics_of_a_cancelled_job(monkeypatch, tmp_path):
    """cancel-probe (16 units): A 12 units 0-50 s, B 16 units at 1 s withdrawn at 10.5 s, C 8 units at
    2 s runs 50-100 s. jobs.csv: B CANCELLED, start/end/wait/elapsed/bsld empty, cancel_time 10.5; the
    metrics count A and C only: 2 jobs, mean wait (0 + 48) / 2 = 24 s, utilisation
    (12 * 50 + 8 * 50) / (16 * 100) = 0.625, makespan 100 s."""
    from hpctwin.twin.run import write_jobs_csv
    out, r = _probe_run(monkeypatch, [(10.5, 1)])
    write_jobs_csv(r, tmp_path / "jobs.csv")
    lines = (tmp_path / "jobs.csv").read_text().splitlines()
    assert lines == [
        "job_id,submit,start,end,wait,elapsed,procs,timelimit,estimate,bsld,state,log_status,user,group,"
        "queue,partition,nodes,cancel_time",
        "1,0.0,0.0,50.0,0.0,50.0,12,100.0,100.0,1.0,COMPLETED,-1,0,0,-1,-1,0-11,",
        "2,1.0,,,,,16,1000.0,1000.0,,CANCELLED,-1,0,0,-1,-1,,10.5",
        "3,2.0,50.0,100.0,48.0,50.0,8,100.0,100.0,1.96,COMPLETED,-1,0,0,-1,-1,0-7,"]
    assert (tmp_path / "jobs.csv").read_text() == r.jobs.to_csv(index=False)
    s = out.summary
    assert s["jobs"] == 2 and s["mean_wait_s"] == 24.0 and s["max_wait_s"] == 48.0
    assert s["utilisation"] == pytest.approx(0.625, abs=1e-12) and s["makespan_s"] == 100.0
    assert s["mean_turnaround_s"] == (50.0 + 98.0) / 2
    assert s["accounting"]["simulated"] == {"CANCELLED": 1, "COMPLETED": 2}


def test_a_run_without_cancels_has_no_cancel_time_column(monkeypatch):
    out, r = _probe_run(monkeypatch, [])
    assert "cancel_time" not in out.jobs.columns and "cancel_time" not in r.jobs.columns
    assert out.jobs.state.tolist() == ["COMPLETED"] * 3


def test_the_sacct_export_of_a_cancelled_job_and_its_round_trip(monkeypatch, tmp_path):
    """As sacct prints a job cancelled while pending (time_start 0 in the database -> start NO_VAL ->
    ``None``; End = slurmctld's end_time, the cancel): Start None, End submit epoch + 10.5 s rounded
    (10 s: round half to even), Elapsed 00:00:00, no nodes, State CANCELLED. Read back, B is dropped as
    a job that never ran; A and C keep their submit, start and runtime."""
    from hpctwin.datasets.sacct import export_sacct, read_sacct
    out, _ = _probe_run(monkeypatch, [(10.5, 1)])
    t0 = 1_709_287_200.0                      # 2024-03-01T10:00:00 UTC
    path = tmp_path / "sim.sacct"
    assert export_sacct(out.jobs, path, epoch=t0) == 3
    lines = path.read_text().splitlines()
    assert lines[0] == ("JobID|JobIDRaw|Submit|Eligible|Start|End|Elapsed|Timelimit|NNodes|NCPUS|NodeList|"
                        "User|Account|Partition|State")
    assert lines[1] == ("1|1|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:00:50|"
                        "00:00:50|00:01:40|12|12|n[0-11]|0|0||COMPLETED")
    assert lines[2] == ("2|2|2024-03-01T10:00:01|2024-03-01T10:00:01|None|2024-03-01T10:00:10|00:00:00|00:16:40|"
                        "16|16|None assigned|0|0||CANCELLED")
    assert lines[3] == ("3|3|2024-03-01T10:00:02|2024-03-01T10:00:02|2024-03-01T10:00:50|2024-03-01T10:01:40|"
                        "00:00:50|00:01:40|8|8|n[0-7]|0|0||COMPLETED")
    back = read_sacct(path)
    assert back.job_id.tolist() == [1, 3]
    assert back.submit.tolist() == [0.0, 2.0] and back.runtime.tolist() == [50.0, 50.0]
    assert back.columns["recorded_start"].tolist() == [0.0, 50.0]
    assert back.dropped == {"never_started": 1}
    assert "2 jobs kept; 0 job steps skipped; 1 jobs never started and 0 still running dropped" in back.notes[0]


class RequeueThenCancel(RunModel):
    """At 30 s interrupts B (2 units, running since 0) back to the queue's front and takes its units
    down until 200 s, so B waits; at 40 s cancels it; at 200 s brings the units back."""

    name = "requeue-cancel"

    def __init__(self):
        self.todo = [30.0, 40.0, 200.0]
        self.units: list[int] = []

    def next_event(self, now):
        return self.todo[0] if self.todo else None

    def on_event(self, now, control):
        t = self.todo.pop(0)
        if t == 30.0:
            self.units = [u for u in range(4) if control.job_on(u) == 1]
            control.interrupt(1, 50.0, "front")
            control.take_down(self.units, 200.0)
        elif t == 40.0:
            control.cancel(1)
        else:
            control.bring_up(self.units)
        return None


def test_a_job_cancelled_after_a_requeue_ends_where_its_last_segment_did(tmp_path):
    """A (2 units, 100 s) and B (2 units, 80 s) at 0 s, C (4 units, 60 s) at 1 s. B runs 0-30 s, is
    requeued, withdrawn at 40 s: start 0, end 30 (its last segment's end: 30 s of 2 units held), 10 s
    queued, cancel time 40; C starts when the units come back, 200-260 s. The metrics stay finite:
    utilisation (2*100 + 2*30 + 4*60) / (4 * 260) = 500 / 1040, makespan 260 s. The sacct export
    writes B as CANCELLED with its run's Start/End."""
    from hpctwin.datasets.sacct import export_sacct
    from hpctwin.twin.metrics import summarise
    from hpctwin.twin.run import job_table, prepare
    wl = Workload.from_arrays("t", submit=np.array([0.0, 0.0, 1.0]), runtime=np.array([100.0, 80.0, 60.0]),
                              procs=np.array([2, 2, 4]), requested_time=np.array([100.0, 80.0, 60.0]))
    prep = prepare(wl, 4, "test")
    jobs = job_table(prep)
    m = RequeueThenCancel()
    ctx = ModelContext(n_nodes=4, jobs=jobs, runtime=prep.workload.runtime, seed=1)
    res = Simulation(jobs, prep.workload.runtime, prep.kill_limit, make_scheduler("fcfs"), 4, models=[m],
                     context=ctx).run()
    assert res.start.tolist() == [0.0, 0.0, 200.0] and res.end.tolist() == [100.0, 30.0, 260.0]
    assert res.cancel_time[1] == 40.0 and res.queued[1] == 10.0 and res.held[1] == 30.0
    assert job_states(res.failed, res.killed, res.start, res.cancelled).tolist() == \
        ["COMPLETED", "CANCELLED", "COMPLETED"]
    s = summarise(prep.workload.submit, res.start, res.end, prep.workload.procs, 4)
    assert s["jobs"] == 3 and s["makespan_s"] == 260.0
    assert s["utilisation"] == pytest.approx(500.0 / 1040.0, abs=1e-12)
    import pandas as pd
    df = pd.DataFrame({"job_id": [1, 2, 3], "submit": [0.0, 0.0, 1.0], "start": res.start, "end": res.end,
                       "procs": [2, 2, 4], "state": ["COMPLETED", "CANCELLED", "COMPLETED"],
                       "log_status": [1, 1, 1], "nodes": list(res.nodes), "cancel_time": res.cancel_time})
    export_sacct(df, tmp_path / "s.sacct", epoch=1_709_287_200.0)
    assert res.nodes[1] == "2-3"                        # the units of its (only) segment
    assert (tmp_path / "s.sacct").read_text().splitlines()[2] == (
        "2|2|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:00:30|00:00:30|"
        "UNLIMITED|2|2|n[2-3]|CANCELLED")
