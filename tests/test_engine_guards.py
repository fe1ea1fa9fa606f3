"""Engine guards (issue 14 item 3): decisions checked for type and range, plug-in exceptions as
located errors, progress guards for livelocks and failure rates that cannot terminate."""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.schedulers.base import Scheduler, Start
from hpctwin.twin.failures import FailureConfig, FailureModel
from hpctwin.twin.run import job_table, prepare
from hpctwin.twin.simulation import Simulation, SimulationError

from .helpers import simulate, workload


class Returns(Scheduler):
    """Starts the queue head with a decision built by ``make(head)`` when it fits."""

    name = "returns"

    def __init__(self, make):
        self.make = make

    def schedule(self, now, queue, cluster):
        j = int(queue[0])
        return [self.make(j)] if self.jobs.procs[j] <= cluster.free else []


@pytest.mark.parametrize("make, text", [
    (lambda j: float(j), r"scheduler returns returned 0.0 \(float\) as a job index"),
    (lambda j: str(j), r"scheduler returns returned '0' \(str\) as a job index"),
    (lambda j: True, r"scheduler returns returned True \(bool\) as a job index"),
    (lambda j: Start(float(j)), r"scheduler returns returned 0.0 \(float\) as a job index"),
    (lambda j: Start(j, np.array([0.0, 1.0])), r"scheduler returns chose units \[0.0, 1.0\] \(float64\) for job 1"),
    (lambda j: Start(j, np.array([0, 9])), r"scheduler returns: job index 0: unit ids must be in \[0, 4\)"),
    (lambda j: Start(j, np.array([1, 1])), r"scheduler returns: job index 0: a unit is listed twice"),
    (lambda j: Start(j, np.array([0])), r"job 1: 1 units chosen for a request of 2"),
    (lambda j: j + 5, r"scheduler returns started job index 5 which is not waiting"),
])
def test_bad_decisions_are_errors_naming_the_scheduler(make, text):
    with pytest.raises(SimulationError, match=text):
        simulate([(1, 0, 10, 2, None)], 4, sched_obj=Returns(make))


def test_numpy_integer_decisions_are_accepted():
    res, _, _ = simulate([(1, 0, 10, 2, None), (2, 0, 10, 2, None)], 4, sched_obj=Returns(np.int64))
    assert res.start.tolist() == [0.0, 10.0]      # one start per pass: the second waits for a finish


def test_units_in_use_are_refused():
    class Twice(Scheduler):
        name = "twice"

        def schedule(self, now, queue, cluster):
            return [Start(int(j), np.array([0])) for j in queue]

    with pytest.raises(SimulationError, match=r"scheduler twice: job index 1: units \[0\] are already in use"):
        simulate([(1, 0, 10, 1, None), (2, 0, 10, 1, None)], 4, sched_obj=Twice())


def test_scheduler_exception_is_a_located_error_with_its_traceback_tail():
    class Raises(Scheduler):
        name = "raises"

        def schedule(self, now, queue, cluster):
            if now >= 5:
                return self._helper(now)
            return []

        def _helper(self, now):
            return 1 / 0

    with pytest.raises(SimulationError) as e:
        simulate([(1, 0, 10, 1, None), (2, 5, 10, 1, None)], 4, sched_obj=Raises())
    msg = str(e.value)
    assert msg.startswith("scheduler raises raised at t=5.0: ")
    assert "in _helper" in msg and "return 1 / 0" in msg and msg.endswith("ZeroDivisionError: division by zero")
    assert "twin/simulation.py" not in msg            # the plug-in's own frames, not the engine's


def test_hook_exception_names_the_scheduler():
    class BadHook(Scheduler):
        name = "badhook"

        def schedule(self, now, queue, cluster):
            return [int(queue[0])]

        def on_finish(self, now, job):
            raise KeyError("oops")

    with pytest.raises(SimulationError, match=r"^scheduler badhook raised at t=10.0: (.|\n)*KeyError: 'oops'$"):
        simulate([(1, 0, 10, 1, None)], 4, sched_obj=BadHook())


def _sim(rows, total, sched, models=(), quiet_limit=None):
    prep = prepare(workload(rows), total, "test")
    sim = Simulation(job_table(prep), prep.workload.runtime, prep.kill_limit, sched, total, models=models)
    if quiet_limit is not None:
        sim.quiet_limit = quiet_limit
    return sim


def test_livelock_plugin_that_only_asks_for_wakeups_is_stopped():
    class Sleeper(Scheduler):
        name = "sleeper"

        def schedule(self, now, queue, cluster):
            return []

        def next_wakeup(self, now):
            return now + 1.0

    sim = _sim([(1, 0, 10, 1, None)], 4, Sleeper(), quiet_limit=500)
    with pytest.raises(SimulationError, match=r"^no progress at t=500.0: 500 events with no start, finish or "
                                              r"submission while 1 jobs wait (.|\n)*scheduler sleeper keeps asking"):
        sim.run()


def test_wakeups_while_jobs_run_are_not_a_livelock():
    # a policy waking every second while a long job runs: 10^4 quiet events, never stopped (the limit is 50)
    class Ticker(Scheduler):
        name = "ticker"

        def schedule(self, now, queue, cluster):
            return [int(j) for j in queue[:1]] if cluster.free >= 4 else []

        def next_wakeup(self, now):
            return now + 1.0

    res = _sim([(1, 0, 10_000, 4, None), (2, 1, 10, 4, None)], 4, Ticker(), quiet_limit=50).run()
    assert res.start.tolist() == [0.0, 10_000.0]


def test_failures_too_frequent_for_a_wide_job_stop_with_cannot_make_progress():
    # 8 nodes, per-node MTBF 1 h, repairs 10 h: a node is up 1/11 of the time, all 8 together ~5e-9
    # of the time; the 8-node job never starts and only failure/repair events happen
    model = FailureModel(FailureConfig(node_mtbf_s=3600.0, repair_s=36000.0))
    sched = __import__("hpctwin.schedulers.registry", fromlist=["make_scheduler"]).make_scheduler("easy")
    sim = _sim([(1, 100_000, 100, 8, None)], 8, sched, models=[model], quiet_limit=2000)
    with pytest.raises(SimulationError, match=r"^cannot make progress at t=(.|\n)*2000 events with no start, "
                                              r"finish or submission(.|\n)*job 1, 8 units(.|\n)*only failures events"
                                              r"(.|\n)*raise failures.node_mtbf_s"):
        sim.run()


def test_deadlock_still_reported():
    class Never(Scheduler):
        name = "never"

        def schedule(self, now, queue, cluster):
            return []

    with pytest.raises(SimulationError, match=r"deadlock: 1 jobs wait \(first: job 1, 1 units\)"):
        simulate([(1, 0, 10, 1, None)], 4, sched_obj=Never())


def test_failure_parameters_that_cannot_terminate_are_refused_before_running():
    from hpctwin.twin.failures import FailureConfigError
    # 64 nodes, MTBF 1 h, repairs 10 h: a node is up 1/11 of the time, 64 together ~1e-67 of it
    model = FailureModel(FailureConfig(node_mtbf_s=3600.0, repair_s=36000.0))
    sched = __import__("hpctwin.schedulers.registry", fromlist=["make_scheduler"]).make_scheduler("easy")
    with pytest.raises(FailureConfigError, match=r"cannot make progress: job 7 needs 64 nodes up together, "
                                                 r"but with node_mtbf_s = 3600 and repair_s = 36000 a node is up "
                                                 r"0.0909 of the time and 64 nodes together about 10\^-67"):
        _sim([(7, 0, 100, 64, None)], 64, sched, models=[model]).run()
