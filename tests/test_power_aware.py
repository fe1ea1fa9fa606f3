"""PowerAwareScheduler: keeps a prefix of the inner policy's starts under the cap; cap series."""
from __future__ import annotations

import math

import numpy as np
import pytest

from hpctwin.schedulers.base import Scheduler, Start
from hpctwin.schedulers.power_aware import PowerAwareScheduler, PowerCap
from hpctwin.power.replay import job_table


class FakeModel:
    """Electrical power = base + 100 W per node started (per-node draw by job: 100 W)."""

    def __init__(self, base=1000.0):
        self.base = base

    def projected_facility_power_w(self, extra_nodes=0, job=None, **kw):
        return self.base + 100.0 * extra_nodes


class Fixed(Scheduler):
    name = "fixed"

    def __init__(self, starts):
        self.starts = starts

    def schedule(self, now, queue, cluster):
        return list(self.starts)


class View:
    total = 100
    running_jobs = np.array([7])


def make(starts, cap, procs):
    s = PowerAwareScheduler(Fixed(starts), FakeModel(), cap)
    s.bind(job_table(np.zeros(len(procs)), procs), View())
    return s


def test_keeps_prefix_under_cap_and_cuts_at_first_refusal():
    # jobs of 3, 5, 1 nodes: 1000 + 300 = 1300, + 500 = 1800 > 1500 -> stop; job 2 (1 node) would fit
    # but comes after the refused job, so it must not start (it could delay the refused job)
    s = make([0, 1, 2], 1500.0, [3, 5, 1])
    assert s.schedule(0.0, np.array([0, 1, 2]), View()) == [0]
    assert s.refused == 1


def test_start_records_use_their_node_count():
    s = make([Start(0, np.arange(2)), Start(1, np.arange(2, 4))], 1400.0, [9, 9])
    out = s.schedule(0.0, np.array([0, 1]), View())
    assert [x.job for x in out] == [0, 1]


def test_no_cap_passes_everything():
    s = make([0, 1], math.inf, [50, 50])
    assert s.schedule(0.0, np.array([0, 1]), View()) == [0, 1]


def test_cap_series_and_wakeups():
    cap = PowerCap([(100.0, 2e6), (200.0, math.inf)])
    assert cap.at(0.0) == math.inf and cap.at(100.0) == 2e6 and cap.at(150.0) == 2e6 and cap.at(250.0) == math.inf
    assert cap.next_change(0.0) == 100.0 and cap.next_change(100.0) == 200.0 and cap.next_change(300.0) is None
    s = PowerAwareScheduler(Fixed([]), FakeModel(), [(100.0, 2e6), (200.0, math.inf)])
    assert s.next_wakeup(50.0) == 100.0
    with pytest.raises(ValueError, match="strictly increasing"):
        PowerCap([(5.0, 1.0), (5.0, 2.0)])
    with pytest.raises(ValueError, match="> 0"):
        PowerCap(-1.0)


def test_end_to_end_run_respects_cap():
    """Through the engine, with the model's throttle as a backstop for jobs too big for the cap."""
    from hpctwin.power.chain import Chain
    from hpctwin.power.config import parse_power
    from hpctwin.twin.run import RunConfig, run
    from hpctwin.twin.system import load_system

    spec = load_system("generic")
    ch = Chain(parse_power(spec.power, nodes=256, cpus_per_node=2, gpus_per_node=0))
    idle = ch.uniform_breakdown(0, 0)["facility_w"]
    peak = ch.uniform_breakdown(1, 1)["facility_w"]
    cap = idle + 0.4 * (peak - idle)
    common = dict(workload="synthetic:jobs=300", system="generic", power=True, seed=3,
                  options={"power": {"cooling": False, "facility_cap_w": cap}})
    free = run(RunConfig(scheduler="easy", **common))
    capped = run(RunConfig(scheduler="hpctwin.schedulers.power_aware:PowerAwareScheduler",
                           **{**common, "options": {**common["options"],
                                                    "scheduler": {"inner": "easy", "cap": cap}}}))
    # with the throttle alone (plain EASY) and with the wrapper, the cap holds
    assert free.summary["peak_electrical_power_w"] <= cap * (1 + 1e-9)
    assert capped.summary["peak_electrical_power_w"] <= cap * (1 + 1e-9)
    params = capped.summary["scheduler_params"]
    assert params["refused_starts"] > 0
    # the wrapper waits instead of throttling: jobs run at full speed, so runs are shorter and waits longer
    assert capped.jobs["elapsed"].sum() < free.jobs["elapsed"].sum()
    assert capped.jobs["wait"].mean() > free.jobs["wait"].mean()


def test_oversized_job_starts_on_idle_machine():
    class Idle(View):
        running_jobs = np.array([], dtype=int)
    s = make([0, 1], 1200.0, [50, 1])
    assert s.schedule(0.0, np.array([0, 1]), Idle()) == [0]
    assert s.over_cap_starts == 1 and s.refused == 1
