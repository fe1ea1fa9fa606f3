"""Issue 27 item 4: advance reservations in the Slurm-like policy (schedulers/slurm_resv.py).

Each run is small and hand-checked against Slurm 22.05's ``job_test_resv`` (reservation.c), the
main pass's ``failed_resv``/``NOT_USABLE`` handling (job_scheduler.c ``_schedule``) and backfill's
``job_test_resv(move_time)`` + ``find_resv_end`` (backfill.c). Default timing: the event pass at a
submit or an end, the main pass on the 60 s grid (``sched_interval``), backfill every 30 s
(``bf_interval``). A reservation boundary marks both passes dirty; the next main pass (grid) or
backfill cycle acts on it.
"""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.schedulers.slurm import make_slurm_scheduler
from hpctwin.schedulers.slurm_conf import SlurmConfError
from hpctwin.schedulers.slurm_resv import (ResvSet, load_reservations, parse_resv_time,
                                           parse_scontrol_line)
from hpctwin.twin.guards import SimulationError
from hpctwin.twin.run import RunConfig, run
from hpctwin.twin.workload import Workload

pytestmark = pytest.mark.filterwarnings("ignore:.*read but not modelled")

LINEAR = "NodeName=n[1-4] CPUs=1\n"
MAINT = [dict(name="maint", start=1000, duration=10, nodes="n[1-4]", flags="MAINT,IGNORE_JOBS",
              users="root")]


def simulate(tmp_path, conf: str, jobs: list[dict], units: int, header: dict | None = None, **opts):
    """jobs: dicts of submit, run, n (units), req (limit, s), resv, user. Returns ({job id: start},
    {job id: engine units}, the scheduler, the result)."""
    n = len(jobs)
    cols = {}
    if any("resv" in j or "user" in j for j in jobs):
        cols["reservation"] = np.array([j.get("resv", "") for j in jobs], dtype=object)
        cols["user_name"] = np.array([j.get("user", "root") for j in jobs], dtype=object)
    wl = Workload.from_arrays("t", submit=[j["submit"] for j in jobs], runtime=[j["run"] for j in jobs],
                              procs=[j["n"] for j in jobs], requested_time=[j["req"] for j in jobs],
                              user=[0] * n, group=[0] * n, job_id=np.arange(1, n + 1), columns=cols)
    wl.header.update(header or {})
    f = tmp_path / "slurm.conf"
    f.write_text(conf)
    s = make_slurm_scheduler(str(f), dict(opts))
    r = run(RunConfig(workload="t", scheduler=s, nodes=units), workload=wl)
    ids = r.jobs.job_id.tolist()
    return dict(zip(ids, r.jobs.start.tolist())), dict(zip(ids, r.jobs.nodes.tolist())), s, r


# ---------------------------------------------------------------------- maintenance
def test_maintenance_delays_a_job_that_would_overlap_it_and_a_short_job_backfills(tmp_path):
    """MAINT on all 4 nodes over [1000, 1600). Job 1 (4 nodes, limit 2000) would overlap it: the
    reservation holds the whole partition, so job_test_resv moves it to 1600 (backfill) and the
    main pass starts it at the next grid point, 1620. Job 2 (2 nodes, limit 900) ends before the
    window: backfill starts it at its first cycle, 30."""
    st, un, s, r = simulate(tmp_path, LINEAR, [dict(submit=0, run=500, n=4, req=2000),
                                               dict(submit=0, run=100, n=2, req=900)], 4,
                            reservations=MAINT)
    assert st == {1: 1620.0, 2: 30.0}
    assert un == {1: "0-3", 2: "0-1"}
    d = r.summary["scheduler_params"]
    assert d["reservations"][0]["nodes"] == ["n1", "n2", "n3", "n4"]
    assert (d["reservations"][0]["start"], d["reservations"][0]["end"]) == (1000.0, 1600.0)


def test_the_whole_time_limit_counts_not_the_runtime(tmp_path):
    """Job 2 asks 1000 s (runs 100): [30, 1030) reaches the window, so it waits; after job 1
    (1620-2120) it starts at job 1's end, 2120 (event pass)."""
    st, _, _, _ = simulate(tmp_path, LINEAR, [dict(submit=0, run=500, n=4, req=2000),
                                              dict(submit=0, run=100, n=2, req=1000)], 4,
                           reservations=MAINT)
    assert st == {1: 1620.0, 2: 2120.0}


def test_a_job_ending_exactly_at_the_start_may_use_the_nodes(tmp_path):
    """[0, 1000) does not overlap [1000, 1600) (job_test_resv: start >= job end skips it)."""
    st, _, _, _ = simulate(tmp_path, LINEAR, [dict(submit=0, run=100, n=4, req=1000)], 4,
                           reservations=MAINT)
    assert st == {1: 0.0}


# ---------------------------------------------------------------------- user reservations
PROJ = [dict(name="proj", start=1000, duration=60, nodes="n[3-4]", users="alice")]


def test_a_job_with_reservation_runs_inside_it_on_its_nodes(tmp_path):
    """proj = n3-n4 over [1000, 4600), alice. Job 1 (alice, --reservation=proj, 2 nodes) sorts
    first; at t=0 the reservation is not usable, so the event pass takes n3-n4 out of the pass
    (NOT_USABLE) and job 2 (bob, 4 nodes) fails its partition; backfill defers job 1 and starts job
    2 at 30 (its [30, 530) misses the window). Job 3 (bob, 2 nodes, [900, 1500) overlaps proj)
    may not use n3-n4: n1-n2 at 900. Job 1 starts at the first main pass after 1000: 1020, on
    n3-n4."""
    st, un, s, r = simulate(tmp_path, LINEAR, [
        dict(submit=0, run=300, n=2, req=600, resv="proj", user="alice"),
        dict(submit=0, run=100, n=4, req=500, user="bob"),
        dict(submit=900, run=50, n=2, req=600, user="bob")], 4, reservations=PROJ)
    assert st == {1: 1020.0, 2: 30.0, 3: 900.0}
    assert un == {1: "2-3", 2: "0-3", 3: "0-1"}
    assert r.summary["scheduler_params"]["reservations"][0]["jobs"] == 1
    assert r.summary["scheduler_params"]["reservations_overrun"] == 0


def test_node_count_reservation_takes_the_lowest_free_nodes(tmp_path):
    """NodeCnt=2: Slurm's pick (bit_pick_cnt / _sequential_pick) is the lowest-index nodes of the
    default partition, n1-n2; job 1 runs there, job 3 gets n3-n4."""
    cnt = [dict(PROJ[0], nodes=2)]
    st, un, s, r = simulate(tmp_path, LINEAR, [
        dict(submit=0, run=300, n=2, req=600, resv="proj", user="alice"),
        dict(submit=0, run=100, n=4, req=500, user="bob"),
        dict(submit=900, run=50, n=2, req=600, user="bob")], 4, reservations=cnt)
    assert st == {1: 1020.0, 2: 30.0, 3: 900.0}
    assert un == {1: "0-1", 2: "0-3", 3: "2-3"}
    assert r.summary["scheduler_params"]["reservations"][0]["nodes"] == ["n1", "n2"]


def test_node_count_skips_nodes_of_a_reservation_at_the_same_time():
    """_filter_resv: a reservation overlapping in time removes its nodes before the pick."""
    specs = load_reservations([
        "ReservationName=a StartTime=0 Duration=60 Nodes=n1 Users=root",
        "ReservationName=b StartTime=1800 Duration=60 NodeCnt=2 Users=root",
        "ReservationName=c StartTime=7200 Duration=60 NodeCnt=2 Users=root"], None)
    rs = ResvSet(specs, ["n1", "n2", "n3", "n4"], 4, [0b1111], ["default"], 0, [""], ["x"], ["y"],
                 np.array([1]))
    assert [d["nodes"] for d in rs.describe()] == [["n1"], ["n2", "n3"], ["n1", "n2"]]


def test_job_test_resv_masks_moves_and_later_start():
    """Direct checks of ResvSet.test: a job outside reservations loses the nodes of reservations
    overlapping its [when, when + limit); a MAINT over the partition moves it (backfill) or gives
    it no node (main pass); find_resv_end rounds up to bf_resolution and adds 1."""
    specs = load_reservations([dict(name="m", start=1000, duration=10, nodes="n[1-2]", users="root"),
                               dict(name="all", start=5000, duration=10, nodes="ALL", users="root",
                                    flags="MAINT")], None)
    rs = ResvSet(specs, ["n1", "n2", "n3", "n4"], 4, [0b1111], ["default"], 0, ["", "m"],
                 ["u", "root"], ["a", "a"], np.array([1, 2]))
    t = rs.test(0, 0, 0.0, 999.0, False, 0.0)
    assert (t.ok, t.mask, t.overlap) == (True, 0b1111, False)
    t = rs.test(0, 0, 0.0, 1001.0, False, 0.0)
    assert (t.ok, t.mask, t.overlap) == (True, 0b1100, True)
    assert rs.later(t, 0.0, 60.0, 86400.0, 0.0) == 1621.0      # 1600 rounded to 60 s, + 1
    t = rs.test(0, 0, 4000.0, 1500.0, True, 0.0)                # Nodes=ALL: wait for its end
    assert (t.ok, t.when, t.mask) == (True, 5600.0, 0b1111)
    t = rs.test(0, 0, 4000.0, 1500.0, False, 0.0)
    assert (t.ok, t.mask) == (True, 0)
    t = rs.test(1, 0, 500.0, 100.0, True, 0.0)                  # job of m, before its start
    assert (t.ok, t.when, t.cut) == (False, 1000.0, 0b0011)
    t = rs.test(1, 0, 1200.0, 100.0, True, 0.0)
    assert (t.ok, t.mask) == (True, 0b0011)


def test_daily_reservation_moves_on_by_a_day():
    """DAILY: once the window ended it is the next day's (_advance_resv_time)."""
    specs = load_reservations([dict(name="d", start=3600, duration=60, nodes="n1", users="root",
                                    flags="DAILY")], None)
    rs = ResvSet(specs, ["n1", "n2"], 2, [0b11], ["default"], 0, [""], ["u"], ["a"], np.array([1]))
    assert rs.window(rs.resv[0], 0.0) == (3600.0, 7200.0)
    assert rs.window(rs.resv[0], 7200.0) == (90000.0, 93600.0)
    assert rs.next_boundary(7200.0) == 90000.0
    assert rs.test(0, 0, 80000.0, 20000.0, False, 80000.0).mask == 0b10


# ---------------------------------------------------------------------- cons_tres
def test_cons_tres_shared_nodes_respect_a_partial_maintenance(tmp_path):
    """2 nodes x 4 cores, MAINT on g1 over [1000, 1600) (not the whole partition: g1 only is
    removed). Job 1 (4 CPUs, limit 2000) takes g0 at 0; job 2 (4 CPUs, limit 2000) has no node
    (g0 full, g1 reserved) and waits for g0 (job 1 ends at 500); job 3 (2 CPUs, limit 900) misses
    the window and backfills on g1 (units 4-5) at 30."""
    conf = "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nNodeName=g[0-1] CPUs=4\n"
    m = [dict(name="m", start=1000, duration=10, nodes="g1", flags="MAINT", users="root")]
    st, un, s, _ = simulate(tmp_path, conf, [dict(submit=0, run=500, n=4, req=2000),
                                             dict(submit=0, run=500, n=4, req=2000),
                                             dict(submit=0, run=100, n=2, req=900)], 8,
                            reservations=m)
    assert st == {1: 0.0, 2: 500.0, 3: 30.0}
    assert un == {1: "0-3", 2: "0-3", 3: "4-5"}


# ---------------------------------------------------------------------- inputs
def test_scontrol_file_form_and_times(tmp_path):
    """The file of scontrol lines gives the same reservation as the TOML table; now+Nunits,
    seconds and ISO (with log_start) map to the log clock."""
    f = tmp_path / "resv.txt"
    f.write_text("# maintenance\n\nscontrol create reservation ReservationName=maint "
                 "StartTime=now+1000seconds Duration=10 Nodes=n[1-4] Flags=MAINT,IGNORE_JOBS "
                 "Users=root\n")
    st, _, _, _ = simulate(tmp_path, LINEAR, [dict(submit=0, run=500, n=4, req=2000),
                                              dict(submit=0, run=100, n=2, req=900)], 4,
                           reservations=str(f))
    assert st == {1: 1620.0, 2: 30.0}
    assert parse_resv_time("now+2hours", None, "x", "StartTime") == 7200.0
    assert parse_resv_time("now-5minutes", None, "x", "StartTime") == -300.0
    assert parse_resv_time("3600", None, "x", "StartTime") == 3600.0
    assert parse_resv_time("2026-01-01T10:00:00", 1767225600.0, "x", "StartTime") == 36000.0
    s = parse_scontrol_line("ReservationName=r StartTime=now Duration=1:30:00 NodeCnt=2 "
                            "Accounts=physics Flags=daily", "f:1", None)
    assert (s.start, s.end, s.node_cnt, s.accounts, s.period) == (0.0, 5400.0, 2, ["physics"], 86400.0)
    # Duration seconds round up to whole minutes (time_str2mins)
    assert parse_scontrol_line("ReservationName=r Duration=0:30 Nodes=n1 Users=a", "f:1", None).end == 60.0


@pytest.mark.parametrize("line, msg", [
    ("ReservationName=r StartTim=now Nodes=n1 Users=a", "f:3: StartTim: not a reservation key (did you mean StartTime?)"),
    ("ReservationName=r Nodes=n1", "f:3: give Users= or Accounts="),
    ("ReservationName=r Nodes=n1 Users=a Flags=MAINTT", "Flags=MAINTT: not a reservation flag of Slurm 22.05 (did you mean MAINT?)"),
    ("ReservationName=r Nodes=n1 Users=a Flags=WEEKDAY", "Flags=WEEKDAY: not modelled"),
    ("ReservationName=r Nodes=n1 Users=a CoreCnt=4", "CoreCnt: core reservations (CoreCnt) are not modelled"),
    ("ReservationName=r Nodes=n1 Users=a Duration=abc", "Duration='abc': expected minutes"),
    ("ReservationName=r StartTime=2026-01-01T00:00:00 Nodes=n1 Users=a", "give the option log_start"),
    ("ReservationName=r StartTime=now+3fortnights Nodes=n1 Users=a", "unknown unit 'fortnights'"),
    ("ReservationName=r StartTime=100 EndTime=50 Nodes=n1 Users=a", "EndTime (50 s) must be after StartTime (100 s)"),
    ("StartTime=now Nodes=n1 Users=a", "ReservationName: missing"),
    ("ReservationName=r Users=a", "no nodes: give Nodes=HOSTLIST"),
])
def test_bad_reservation_lines_name_file_line_and_field(tmp_path, line, msg):
    f = tmp_path / "f"
    f.write_text("# header\n\n" + line + "\n")
    with pytest.raises(SlurmConfError) as e:
        load_reservations(str(f), None)
    assert msg in str(e.value)
    assert f"{f}:3" in str(e.value)


def test_iso_times_on_the_clock_of_the_log_header(tmp_path):
    """An scontrol file with ISO times and no option log_start: the reservation is placed on the log's
    clock from its header's UnixStartTime (2026-01-01T00:00:00 = 1767225600): 00:16:40 is t = 1000, the
    maintenance case above, same starts. The option wins over the header. A log without the header:
    one error at bind naming the file, line and field. Other errors are still found at once."""
    f = tmp_path / "resv.txt"
    f.write_text("ReservationName=maint StartTime=2026-01-01T00:16:40 Duration=10 Nodes=n[1-4] "
                 "Flags=MAINT,IGNORE_JOBS Users=root\n")
    jobs = [dict(submit=0, run=500, n=4, req=2000), dict(submit=0, run=100, n=2, req=900)]
    st, _, _, _ = simulate(tmp_path, LINEAR, jobs, 4, header={"UnixStartTime": "1767225600"}, reservations=str(f))
    assert st == {1: 1620.0, 2: 30.0}
    st, _, _, _ = simulate(tmp_path, LINEAR, jobs, 4, header={"UnixStartTime": "1"}, reservations=str(f),
                           log_start="1767225600")
    assert st == {1: 1620.0, 2: 30.0}
    with pytest.raises(SlurmConfError, match=rf"{f}:1: StartTime=2026-01-01T00:16:40 is an absolute time, and "
                                             r"the log does not say when it starts .* give the option log_start"):
        simulate(tmp_path, LINEAR, jobs, 4, reservations=str(f))
    f.write_text("ReservationName=maint StartTime=2026-01-01T00:16:40 Duration=10 Nodes=n[1-4] Flags=MAINTT "
                 "Users=root\n")
    with pytest.raises(SlurmConfError, match="Flags=MAINTT: not a reservation flag"):
        make_slurm_scheduler(None, {"reservations": str(f)})


def test_errors_at_bind(tmp_path):
    """Unknown node (with a suggestion), overlapping reservations, a job naming an undefined
    reservation, a user without access: each one line naming what and where."""
    jobs = [dict(submit=0, run=10, n=1, req=100, resv="proj", user="bob")]
    with pytest.raises(SlurmConfError, match=r"options: reservations\[0\]: Nodes=n5: node n5 is not a "
                                             r"NodeName of slurm.conf"):
        simulate(tmp_path, LINEAR, jobs, 4, reservations=[dict(PROJ[0], nodes="n5")])
    with pytest.raises(SlurmConfError, match=r"reservations\[1\]: reservation b overlaps reservation a"):
        simulate(tmp_path, LINEAR, jobs, 4, reservations=[
            dict(name="a", start=0, duration=60, nodes="n1", users="x"),
            dict(name="b", start=1800, duration=60, nodes="n[1-2]", users="x")])
    with pytest.raises(SlurmConfError, match=r"1 jobs ask for reservations that are not defined "
                                             r"\(first: proj, 1 jobs, e.g. job 1\)"):
        simulate(tmp_path, LINEAR, jobs, 4)
    with pytest.raises(SlurmConfError, match=r"job 1 \(user bob, account 0\) asks for reservation proj, "
                                             r"whose Users=alice"):
        simulate(tmp_path, LINEAR, jobs, 4, reservations=PROJ)
    # the same workload with job_reservations=ignore: scheduled as without --reservation
    st, _, _, _ = simulate(tmp_path, LINEAR, jobs, 4, job_reservations="ignore")
    assert st == {1: 0.0}


def test_overlapping_maint_is_allowed_and_overrun_is_counted(tmp_path):
    """A MAINT reservation may overlap another one (_resv_overlap skips MAINT). Job 1 of proj
    (limit 4000) starts at 1020 and could run past proj's end (4600): Slurm would kill it at the
    end + ResvOverRun, the twin counts it."""
    resv = PROJ + [dict(name="m", start=100000, duration=10, nodes="n[3-4]", users="root", flags="MAINT")]
    st, _, s, r = simulate(tmp_path, LINEAR, [dict(submit=0, run=100, n=2, req=4000, resv="proj",
                                                   user="alice")], 4, reservations=resv)
    assert st == {1: 1020.0}
    assert r.summary["scheduler_params"]["reservations_overrun"] == 1


def test_a_job_whose_reservation_ends_before_it_can_start_is_an_error(tmp_path):
    """proj holds n3-n4 over [1000, 1060); a 4-node job of proj can never fit there: Slurm holds it
    forever once the reservation ended; the twin stops with a clear error."""
    short = [dict(PROJ[0], duration=1)]
    with pytest.raises(SimulationError, match=r"job 1 asks for reservation proj, which ended at "
                                              r"t=1060 s before the job could start"):
        simulate(tmp_path, LINEAR, [dict(submit=0, run=10, n=4, req=100, resv="proj", user="alice")],
                 4, reservations=short)


def test_no_reservation_changes_nothing(tmp_path):
    """Without reservations the run is the same as before (compiled cycle allowed)."""
    st, _, s, r = simulate(tmp_path, LINEAR, [dict(submit=0, run=500, n=4, req=2000),
                                              dict(submit=0, run=100, n=2, req=900)], 4)
    assert st == {1: 0.0, 2: 500.0}
    assert s.rsv is None and "reservations" not in r.summary["scheduler_params"]


def test_run_options_as_toml_tables_and_other_schedulers_refuse_them(tmp_path):
    """``[scheduler] reservations = [...]`` reaches the policy through the run options (with
    ``slurm_conf``); a queue scheduler refuses the option (it takes none)."""
    from hpctwin.twin.errors import RunConfigError

    conf = tmp_path / "slurm.conf"
    conf.write_text(LINEAR)
    wl = Workload.from_arrays("t", submit=[0, 0], runtime=[500, 100], procs=[4, 2],
                              requested_time=[2000, 900], job_id=[1, 2])
    opts = {"scheduler": {"slurm_conf": str(conf), "reservations": MAINT}}
    r = run(RunConfig(workload="t", scheduler="slurm", nodes=4, options=opts), workload=wl)
    assert r.jobs.start.tolist() == [1620.0, 30.0]
    with pytest.raises(RunConfigError, match="takes no options"):
        run(RunConfig(workload="t", scheduler="easy", nodes=4,
                      options={"scheduler": {"reservations": MAINT}}), workload=wl)
