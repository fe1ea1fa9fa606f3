"""Issue 27: a job running in an advance reservation is ended at the reservation's end + ``ResvOverRun``.

Slurm 22.05 (tag slurm-22-05-8-1): job_mgr.c ``job_time_limit`` ends a running job whose reservation is
not FLEX when ``resv_ptr->end_time + ResvOverRun * 60 < now`` (``_job_timed_out``: state TIMEOUT, reason
FAIL_TIMEOUT); ``UNLIMITED`` is YEAR_SECONDS; reservation.c ``job_test_resv`` lets a job start anywhere in
``[start, end]`` whatever its time limit; ``job_resv_check`` -> ``_advance_resv_time`` moves a recurring
reservation to its next window at the first tick after its end. Both run every ``PERIODIC_TIMEOUT`` (30 s,
controller.c ``_slurmctld_background``), which the twin puts at t = 0, 30, 60, ... of the log clock: it
kills at the first such tick with ``end + ResvOverRun < t`` through `twin.control.EngineControl.kill_at`.

Common shape: 4 select/linear nodes, reservation ``proj`` on n[1-2] over [0, 600) s (Duration=10
minutes) for alice; alice's job 1 asks 2 nodes in it for 3000 s and runs 2000 s.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from hpctwin.schedulers.slurm import make_slurm_scheduler
from hpctwin.schedulers.slurm_conf import SlurmConfError
from hpctwin.schedulers.slurm_resv import YEAR_SECONDS
from hpctwin.twin.guards import SimulationError
from hpctwin.twin.contract import RunModel
from hpctwin.twin.run import RunConfig, run
from hpctwin.twin.workload import Workload

pytestmark = pytest.mark.filterwarnings("ignore:.*read but not modelled")

PROJ = dict(name="proj", start=0, duration=10, nodes="n[1-2]", users="alice")
JOB1 = dict(submit=0, run=2000, n=2, req=3000, resv="proj", user="alice")


def simulate(tmp_path, jobs: list[dict], resv: list[dict], extra_conf: str = "", units: int = 4, **opts):
    """jobs: dicts of submit, run, n (nodes), req (limit s), resv, user. Returns the jobs table by job id
    and the summary."""
    n = len(jobs)
    cols = {"reservation": np.array([j.get("resv", "") for j in jobs], dtype=object),
            "user_name": np.array([j.get("user", "bob") for j in jobs], dtype=object)}
    wl = Workload.from_arrays("t", submit=[j["submit"] for j in jobs], runtime=[j["run"] for j in jobs],
                              procs=[j["n"] for j in jobs], requested_time=[j["req"] for j in jobs],
                              user=[0] * n, group=[0] * n, job_id=np.arange(1, n + 1), columns=cols)
    f = tmp_path / "slurm.conf"
    f.write_text("NodeName=n[1-4] CPUs=1\n" + extra_conf)
    s = make_slurm_scheduler(str(f), {"reservations": resv, **opts})
    r = run(RunConfig(workload="t", scheduler=s, nodes=units), workload=wl)
    return r.jobs.set_index("job_id"), r.summary


def test_job_is_killed_at_the_first_periodic_check_after_the_reservation_end(tmp_path):
    """End 600, ResvOverRun 0: ``600 + 0 < now`` holds at the check at 630 (the one at 600 does not);
    state TIMEOUT (_job_timed_out)."""
    df, summ = simulate(tmp_path, [JOB1], [PROJ])
    assert (df.loc[1, "start"], df.loc[1, "end"], df.loc[1, "state"]) == (0.0, 630.0, "TIMEOUT")
    assert df.loc[1, "nodes"] == "0-1" and df.loc[1, "resv_kill_at"] == 630.0
    sp = summ["scheduler_params"]
    assert sp["reservations_overrun"] == 1 and sp["resv_over_run_s"] == 0.0
    assert summ["accounting"]["simulated"] == {"TIMEOUT": 1}


def test_resv_over_run_minutes(tmp_path):
    """ResvOverRun=2 (minutes): 600 + 120 = 720 < now first at the check at 750."""
    df, summ = simulate(tmp_path, [JOB1], [PROJ], "ResvOverRun=2\n")
    assert (df.loc[1, "end"], df.loc[1, "state"]) == (750.0, "TIMEOUT")
    assert summ["scheduler_params"]["resv_over_run_s"] == 120.0


def test_resv_over_run_unlimited_is_a_year(tmp_path):
    """UNLIMITED = YEAR_SECONDS: the kill time (the check after 600 + 31,536,000, a multiple of 30) is
    after the job's own end (2000)."""
    df, _ = simulate(tmp_path, [JOB1], [PROJ], "ResvOverRun=UNLIMITED\n")
    assert (df.loc[1, "end"], df.loc[1, "state"]) == (2000.0, "COMPLETED")
    assert df.loc[1, "resv_kill_at"] == 600.0 + YEAR_SECONDS + 30.0 == 31_536_630.0


def test_a_job_ending_before_the_kill_completes(tmp_path):
    df, summ = simulate(tmp_path, [dict(JOB1, run=100)], [PROJ])
    assert (df.loc[1, "end"], df.loc[1, "state"]) == (100.0, "COMPLETED")
    assert df.loc[1, "resv_kill_at"] == 630.0                   # the time its reservation would end it
    assert summ["scheduler_params"]["reservations_overrun"] == 1   # its planned run (3000 s) reached it


def test_flex_reservation_never_kills(tmp_path):
    df, summ = simulate(tmp_path, [JOB1], [dict(PROJ, flags="FLEX")])
    assert (df.loc[1, "end"], df.loc[1, "state"]) == (2000.0, "COMPLETED")
    assert "resv_kill_at" not in df.columns and summ["scheduler_params"]["reservations_overrun"] == 0


def test_maint_reservation_kills_the_same_way(tmp_path):
    """MAINT makes no difference to job_time_limit: root's job in it ends at 630."""
    maint = dict(name="maint", start=0, duration=10, nodes="n[1-2]", users="root", flags="MAINT")
    df, _ = simulate(tmp_path, [dict(JOB1, resv="maint", user="root")], [maint])
    assert (df.loc[1, "end"], df.loc[1, "state"]) == (630.0, "TIMEOUT")


def test_a_job_may_start_late_in_its_reservation_whatever_its_limit(tmp_path):
    """job_test_resv checks only that the start lies in [start, end]: submitted at 500 with a 3000 s
    limit it starts at 500 (event pass) and is killed at 630; submitted at exactly 600 (the end: not
    ``when > end_time``) it still starts, and runs until the next check."""
    df, _ = simulate(tmp_path, [dict(JOB1, submit=500)], [PROJ])
    assert (df.loc[1, "start"], df.loc[1, "end"], df.loc[1, "state"]) == (500.0, 630.0, "TIMEOUT")
    df, _ = simulate(tmp_path, [dict(JOB1, submit=600)], [PROJ])
    assert (df.loc[1, "start"], df.loc[1, "end"], df.loc[1, "state"]) == (600.0, 630.0, "TIMEOUT")


def test_recurring_reservation(tmp_path):
    """DAILY [0, 600): with ResvOverRun=0 the tick that kills (job_time_limit) comes before
    job_resv_check advances it: killed at 630; with ResvOverRun=5 the reservation has moved to
    [86400, 87000) before 600 + 300 is reached: never killed (the job completes at 2000)."""
    daily = dict(PROJ, flags="DAILY")
    df, _ = simulate(tmp_path, [JOB1], [daily])
    assert (df.loc[1, "end"], df.loc[1, "state"]) == (630.0, "TIMEOUT")
    df, _ = simulate(tmp_path, [JOB1], [daily], "ResvOverRun=5\n")
    assert (df.loc[1, "end"], df.loc[1, "state"]) == (2000.0, "COMPLETED")
    assert "resv_kill_at" not in df.columns


def test_the_kill_frees_the_nodes_planning_is_unchanged(tmp_path):
    """Bob's job 2 (4 nodes, limit 100) may not use n[1-2] inside [0, 600) nor before job 1's planned
    end (3000: Slurm plans with start + time limit, not the kill). Job 1's kill at 630 is an end: the
    event pass starts job 2 then."""
    df, _ = simulate(tmp_path, [JOB1, dict(submit=0, run=50, n=4, req=100)], [PROJ])
    assert df.loc[1, "end"] == 630.0 and df.loc[2, "start"] == 630.0 and df.loc[2, "end"] == 680.0
    assert math.isnan(df.loc[2, "resv_kill_at"])


@pytest.mark.parametrize("value, msg", [
    ("abc", "ResvOverRun='abc': expected minutes 0..65533 or UNLIMITED"),
    ("70000", "ResvOverRun='70000': expected minutes 0..65533"),
    ("-1", "ResvOverRun='-1'"),
])
def test_bad_resv_over_run(tmp_path, value, msg):
    f = tmp_path / "slurm.conf"
    f.write_text(f"NodeName=n[1-4] CPUs=1\nResvOverRun={value}\n")
    with pytest.raises(SlurmConfError, match=msg) as e:
        make_slurm_scheduler(str(f), {})
    assert str(e.value).startswith(f"{f}:2: ")


def test_resv_over_run_as_an_option(tmp_path):
    df, _ = simulate(tmp_path, [JOB1], [PROJ], ResvOverRun=1)
    assert df.loc[1, "end"] == 690.0                # 660 < now: the check at 690 (not the one at 660)


# ---------------------------------------------------------------------- the engine's kill_at
class _Killer(RunModel):
    """A run model: at t=50 sets job 0's kill time to 80 and job 1's to 80; at t=60 interrupts job 1
    and requeues it (its next segment has its requested limit again)."""

    name = "killer"

    def bind(self, ctx):
        self.ev = [50.0, 60.0]

    def next_event(self, now):
        return self.ev[0] if self.ev else None

    def on_event(self, now, control):
        t = self.ev.pop(0)
        if t == 50.0:
            control.kill_at(0, 80.0)
            control.kill_at(1, 80.0)
            control.kill_at(0, 90.0)            # later than the current kill time: no change
            with pytest.raises(SimulationError, match="before now"):
                control.kill_at(0, 40.0)
            with pytest.raises(SimulationError, match="which is not running"):
                control.kill_at(2, 100.0)
        else:
            control.interrupt(1, 100.0, "back")


def test_engine_kill_at(tmp_path):
    """Jobs 0 and 1 (1 unit each, 100 s, limit 200) start at 0; job 2 (2 units, submitted at 1) waits.
    Job 1, interrupted at 60, is requeued behind job 2 (FCFS, no backfill). Job 0 ends at its kill time
    80, TIMEOUT; job 2 runs 80-90; job 1 restarts at 90 with its whole 100 s and its limit of 200 s
    again (with the kill time kept it would end at 90 + 80 = 170): it completes at 190."""
    from hpctwin.twin.run import simulate as sim_run  # noqa: PLC0415
    wl = Workload.from_arrays("k", submit=[0.0, 0.0, 1.0], runtime=[100.0, 100.0, 10.0], procs=[1, 1, 2],
                              requested_time=[200.0, 200.0, 200.0], user=[0, 0, 0], group=[0, 0, 0],
                              job_id=np.array([1, 2, 3]))
    res = sim_run(RunConfig(workload="k", scheduler="fcfs", nodes=2), wl, extra_models=[_Killer()])
    df = res.jobs.set_index("job_id")
    assert (df.loc[1, "end"], df.loc[1, "state"]) == (80.0, "TIMEOUT")
    assert (df.loc[3, "start"], df.loc[3, "end"]) == (80.0, 90.0)
    assert (df.loc[2, "end"], df.loc[2, "state"]) == (190.0, "COMPLETED")
