"""The compiled backend of `QueueScheduler` (`schedulers.backfill_replay`, declared in `twin.backends`)
gives the general engine's schedule with the Python reference exactly: same start, end, killed flag,
units held and recorded busy/queue series, for every built-in order x backfill pair, on the
hand-checked golden cases, synthetic logs and whole real logs (slow)."""
from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

import tests.helpers as helpers
import tests.test_golden_schedules as golden
from hpctwin.schedulers.backfill import QueueScheduler
from hpctwin.schedulers.registry import make_scheduler
from hpctwin.schedulers import backfill_replay
from hpctwin.twin import backends
from hpctwin.twin.run import job_table, load_workload, prepare
from hpctwin.twin.simulation import Simulation

ORDERS = list(backfill_replay.ORDER_CODES)
BACKFILLS = list(backfill_replay.BACKFILL_CODES)


def assert_same(res, fast, label: str) -> None:
    np.testing.assert_array_equal(res.start, fast.start, err_msg=f"{label}: start")
    np.testing.assert_array_equal(res.end, fast.end, err_msg=f"{label}: end")
    np.testing.assert_array_equal(res.killed, fast.killed, err_msg=f"{label}: killed")
    assert list(res.nodes) == list(fast.nodes), f"{label}: units held"
    np.testing.assert_array_equal(res.change_t, fast.change_t, err_msg=f"{label}: change times")
    np.testing.assert_array_equal(res.change_busy, fast.change_busy, err_msg=f"{label}: busy series")
    np.testing.assert_array_equal(res.change_queue, fast.change_queue, err_msg=f"{label}: queue series")
    assert (res.passes, res.events) == (fast.passes, fast.events), f"{label}: passes/events"
    for name in ("work_done", "held", "queued", "last_start", "failed", "interruptions"):
        np.testing.assert_array_equal(getattr(res, name), getattr(fast, name), err_msg=f"{label}: {name}")


def both(prep, total: int, order: str, backfill: str):
    jobs = job_table(prep)
    sched = make_scheduler("fcfs", order, backfill)
    res = Simulation(jobs, prep.workload.runtime, prep.kill_limit, sched, total).run()
    fast = backfill_replay.replay(jobs.submit, jobs.procs, jobs.estimate, prep.workload.runtime, prep.kill_limit,
                           total, order, backfill)
    return res, fast


# ---------------------------------------------------------------------------- golden cases
def _checking_simulate(rows, total, scheduler="easy", order=None, backfill=None, kill=True, sched_obj=None,
                       models=(), placer=None):
    """`tests.helpers.simulate`, and the fast path on the same input when it applies (asserted equal)."""
    res, prep, sched = helpers.simulate(rows, total, scheduler, order, backfill, kill, sched_obj, models, placer)
    if _eligible(sched, placer, models):
        jobs = job_table(prep)
        fast = backfill_replay.replay(jobs.submit, jobs.procs, jobs.estimate, prep.workload.runtime, prep.kill_limit,
                               total, sched.order_name, sched.backfill)
        assert_same(res, fast, f"golden {scheduler} {order} {backfill}")
        _checking_simulate.compared += 1
    return res, prep, sched


def _eligible(sched, placer=None, models=()) -> bool:
    """The table's rule (`twin.backends`) for a run of any size with this policy, placer and models."""
    class Sim:
        n, gates, held_jobs = 10**9, [], 0
    Sim.placer, Sim.models = placer, list(models)
    b = backends.BACKENDS["backfill_replay"]
    return backends.replay_backend_for(sched) is b and backends.decide_before_bind(b, sched, Sim) is None


def _golden_cases() -> list:
    """Every golden test function with its parametrisation expanded (one single-argument mark at most)."""
    out = []
    for name, f in inspect.getmembers(golden, inspect.isfunction):
        if not name.startswith("test_"):
            continue
        marks = [m for m in getattr(f, "pytestmark", []) if m.name == "parametrize"]
        if marks:
            argname, values = marks[0].args[0], marks[0].args[1]
            out += [pytest.param(f, {argname: v}, id=f"{name}[{v}]") for v in values]
        else:
            out.append(pytest.param(f, {}, id=name))
    return out


@pytest.mark.parametrize("case,kwargs", _golden_cases())
def test_golden_cases_through_both_paths(case, kwargs, monkeypatch):
    monkeypatch.setattr(golden, "simulate", _checking_simulate)
    _checking_simulate.compared = 0
    case(**kwargs)
    assert _checking_simulate.compared > 0


# ---------------------------------------------------------------------------- synthetic logs
@pytest.mark.parametrize("backfill", BACKFILLS)
@pytest.mark.parametrize("order", ORDERS)
def test_synthetic_log_every_policy(order, backfill):
    wl = load_workload("synthetic:jobs=1500,nodes=64,load=1.1,seed=3")
    prep = prepare(wl, 64, "test")
    res, fast = both(prep, 64, order, backfill)
    assert np.isfinite(fast.start).all()
    assert_same(res, fast, f"synthetic {order}+{backfill}")


def test_estimates_shorter_than_runtimes_like_the_engine():
    """Estimates cut to half the requested time: jobs run past their estimate (their expected end
    counts as now). Every policy gives the engine's schedule; conservative re-plans from the machine
    and a job whose due reservation relies on an overdue job's units waits until it fits."""
    wl = load_workload("synthetic:jobs=800,nodes=32,load=1.0,seed=5")
    prep = prepare(wl, 32, "test")
    prep.estimate = prep.estimate * 0.5
    for backfill in BACKFILLS:
        res, fast = both(prep, 32, "fcfs", backfill)
        assert np.isfinite(res.start).all()
        assert_same(res, fast, f"short estimates {backfill}")


def test_eligible_only_for_plain_queue_schedulers():
    sched = make_scheduler("easy")
    assert _eligible(sched)
    assert not _eligible(sched, placer=object())
    assert not _eligible(sched, models=[object()])
    sched.first_reservation = {}
    assert not _eligible(sched)

    class Custom(QueueScheduler):
        pass

    assert not _eligible(Custom("fcfs", "easy"))
    assert not _eligible(make_scheduler("slurm"))


def test_engine_seam(monkeypatch):
    """`twin.backends.engine_fast_path` plugged into the engine returns the backend's SimResult for an
    eligible run (here with the table's size threshold lowered) and None (the general loop runs)
    below the threshold, with the refusal reason left on the simulation."""
    wl = load_workload("synthetic:jobs=600,nodes=32,seed=8")
    prep = prepare(wl, 32, "test")
    jobs = job_table(prep)
    res = Simulation(jobs, prep.workload.runtime, prep.kill_limit, make_scheduler("conservative"), 32).run()
    sim = Simulation(jobs, prep.workload.runtime, prep.kill_limit, make_scheduler("conservative"), 32,
                     fast_path=backends.engine_fast_path)
    assert backends.engine_fast_path(sim) is None            # 600 jobs < MIN_JOBS
    assert sim.backend_decision == backends.Decision("backfill_replay", False, "600 jobs, fewer than 20000")
    entry = backends.BACKENDS["backfill_replay"]
    monkeypatch.setitem(backends.BACKENDS, "backfill_replay", dataclasses.replace(entry, min_jobs=0))
    fast = backends.engine_fast_path(sim)
    assert sim.backend_decision == backends.Decision("backfill_replay", True)
    assert type(fast) is type(res)
    assert_same(res, fast, "seam")
    assert_same(res, sim.run(), "seam through Simulation.run")


def test_bad_input_is_refused_with_the_job_named():
    with pytest.raises(ValueError, match="job index 1 needs 9 units; the machine has 4"):
        backfill_replay.replay(np.array([0.0, 1.0]), np.array([1, 9]), np.ones(2), np.ones(2), np.ones(2), 4)
    with pytest.raises(ValueError, match="no compiled path for order 'xyz'"):
        backfill_replay.replay(np.array([0.0]), np.array([1]), np.ones(1), np.ones(1), np.ones(1), 4, "xyz")


def test_compiled_kernels_have_no_function_of_100_lines():
    """Issue 12: the replay loop and the plan kernels are split into functions under 100 lines."""
    import ast  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415
    import hpctwin.schedulers.profile_kernels as pk  # noqa: PLC0415
    import hpctwin.schedulers.backfill_replay_kernels as fk  # noqa: PLC0415
    long = []
    for mod in (fk, pk):
        src = Path(mod.__file__).read_text()
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno + 1 >= 100:
                long.append(f"{Path(mod.__file__).name}:{node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert long == []


# ---------------------------------------------------------------------------- whole real logs
WHOLE = [("KTH-SP2", o, b) for o in ORDERS for b in BACKFILLS] + \
        [(log, o, b) for log in ("CTC-SP2", "SDSC-SP2") for o, b in
         (("fcfs", "none"), ("fcfs", "easy"), ("fcfs", "conservative"), ("sjf", "easy"), ("wfp3", "conservative"))]


@pytest.mark.slow
@pytest.mark.parametrize("log,order,backfill", WHOLE)
def test_whole_logs(log, order, backfill):
    try:
        wl = load_workload(log)
    except Exception as e:  # pragma: no cover - data not present on this machine
        pytest.skip(f"{log}: {e}")
    prep = prepare(wl, wl.machine_size, "workload")
    res, fast = both(prep, wl.machine_size, order, backfill)
    assert_same(res, fast, f"{log} {order}+{backfill}")
