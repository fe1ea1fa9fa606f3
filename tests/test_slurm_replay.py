"""The compiled whole-run replay of the Slurm-like policy (`schedulers.slurm_replay`) gives the
general engine's run exactly: same starts, ends, nodes, kills, time series and pass counters, on
synthetic logs under many option sets; ineligible runs fall back to the general engine."""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.schedulers.slurm import SlurmScheduler, make_slurm_scheduler
from hpctwin.schedulers.slurm_conf import SlurmConfError
from hpctwin.schedulers.slurm_replay import eligible, pre_eligible
from hpctwin.schedulers.base import JobTable
from hpctwin.twin.cluster import Cluster
from hpctwin.twin.contract import BindContext, _bind_arity
from hpctwin.twin.run import RunConfig, run
from hpctwin.twin.workload import Workload

TIMING = ("wall_seconds", "simulation_seconds", "jobs_per_second")


def _wl(n=1500, nodes=16, seed=3, overrun=0.0):
    """Synthetic log; ``overrun``: share of jobs running past their requested time (killed)."""
    rng = np.random.default_rng(seed)
    submit = np.cumsum(rng.exponential(40.0, n)).round()
    procs = rng.choice([1, 1, 2, 3, 4, 5, 8, 12, nodes], n)
    req = rng.choice([60, 300, 900, 3600, 7200], n).astype(float)
    runtime = np.maximum(1.0, (req * rng.uniform(0.05, 1.0, n)).round())
    runtime = np.where(rng.uniform(size=n) < overrun, req * 2, runtime)
    return Workload.from_arrays("t", submit=submit, runtime=runtime, procs=procs,
                                requested_time=req, user=rng.integers(0, 5, n),
                                job_id=rng.permutation(n) + 1)


def _run(wl, nodes, **opts):
    return run(RunConfig(workload="t", scheduler="slurm", nodes=nodes,
                         options={"scheduler": opts}), workload=wl)


def _same(a, b):
    for col in ("start", "end", "state", "nodes"):
        assert a.jobs[col].tolist() == b.jobs[col].tolist(), col
    sa = {k: v for k, v in a.summary.items() if k not in TIMING}
    sb = {k: v for k, v in b.summary.items() if k not in TIMING}
    pa, pb = sa.pop("scheduler_params"), sb.pop("scheduler_params")
    assert sa == sb
    assert pa.pop("engine").startswith("compiled whole-run replay")
    assert pb.pop("engine") == "general engine"
    assert pa == pb
    for k, (arr, _) in a.timeseries.items():
        assert np.array_equal(arr, b.timeseries[k][0]), k


@pytest.mark.parametrize("opts", [
    {},
    {"bf_resolution": 1},
    {"bf_resolution": 60, "bf_interval": 7, "bf_window": 30, "bf_max_job_test": 5},
    {"bf_job_part_count_reserve": 1, "bf_max_job_start": 2, "bf_poll": 7},
    {"bf_min_prio_reserve": 2, "bf_min_age_reserve": 600},
    {"sched_interval": 45, "default_queue_depth": 3, "partition_job_depth": 2},
    {"SchedulerType": "sched/builtin"},
    {"time_limit_minutes": True, "bf_interval": 300},
])
def test_replay_equals_general_engine(opts):
    wl = _wl(overrun=0.05)
    a, b = _run(wl, 16, replay="on", **opts), _run(wl, 16, replay="off", **opts)
    _same(a, b)
    st = a.summary["scheduler_params"]["stats"]
    if opts.get("SchedulerType") != "sched/builtin":
        assert st["backfill_starts"] > 20 and st["backfill_passes"] > 100
    assert (a.jobs.state == "TIMEOUT").sum() > 20


@pytest.mark.slow
def test_replay_equals_python_cycle_whole_nodes():
    """cpus_per_node=2: jobs take whole 2-unit nodes; the replay against the Python cycle."""
    wl = _wl(n=800, nodes=32, seed=7)
    a = _run(wl, 32, replay="on", cpus_per_node=2)
    b = _run(wl, 32, replay="off", compiled=False, cpus_per_node=2)
    _same(a, b)
    # a 3-unit job holds 2 whole nodes: units 2n, 2n+1 of the first, 2m of the second
    j = int(np.flatnonzero(wl.procs == 3)[0])
    assert len(a.jobs.nodes[j].replace("-", ",").split(",")) >= 2


def _bound(opts, n=50, nodes=16):
    sched = make_slurm_scheduler(None, {"replay": "on", **opts})
    wl = _wl(n=n, nodes=nodes)

    class Sim:                       # the attributes pre_eligible reads
        models, gates = [], []
    Sim.n = n
    return sched, wl, Sim


@pytest.mark.parametrize("opts,pre,post", [
    ({}, True, True),
    ({"replay": "off"}, False, None),
    ({"SelectType": "select/cons_tres"}, False, None),
    ({"compiled": False}, False, None),
    ({"bf_max_job_user": 3}, False, None),
    ({"PriorityType": "priority/multifactor", "AccountingStorageType":
      "accounting_storage/slurmdbd", "PriorityWeightAge": 1000}, True, False),
    ({"PriorityType": "priority/multifactor", "PriorityWeightJobSize": 1000}, True, False),
])
def test_eligibility(opts, pre, post):
    sched, wl, sim = _bound(opts)
    assert pre_eligible(sched, sim) is pre
    if post is not None:
        jobs = JobTable(job_id=wl.job_id, submit=wl.submit, procs=wl.procs,
                        estimate=wl.requested_time, requested_time=wl.requested_time,
                        user=wl.user, group=wl.group, queue=wl.queue, partition=wl.partition,
                        columns=wl.columns)
        sched.bind(BindContext(jobs, Cluster(16), 16))
        assert bool(eligible(sched)) is post


def test_auto_needs_many_jobs():
    sched, _, sim = _bound({"replay": "auto"})
    assert not pre_eligible(sched, sim)
    sim.n = 20_000
    assert pre_eligible(sched, sim)
    sim.models = ["power"]
    assert not pre_eligible(sched, sim)


def test_replay_option_errors():
    with pytest.raises(SlurmConfError, match="expected true/false, got 'maybe'"):
        make_slurm_scheduler(None, {"replay": "maybe"})
    with pytest.raises(ValueError, match="replay must be one of auto, on, off"):
        SlurmScheduler(replay="sometimes")


def test_bind_takes_a_context():
    """Issue 12: bind(ctx) (the engine passes a BindContext), the legacy pair still accepted."""
    assert _bind_arity(SlurmScheduler().bind) == 1
    wl = _wl(n=300)
    a = _run(wl, 16, replay="off")
    b = _run(wl, 16, replay="off", compiled=False)
    assert a.jobs.start.tolist() == b.jobs.start.tolist()


def test_ineligible_after_bind_falls_back(capsys):
    """Time-varying priorities are known only after bind: the fast path binds, declines, and the
    general engine binds again from scratch (same run as replay=off; the priority line printed
    once)."""
    opts = {"PriorityType": "priority/multifactor", "AccountingStorageType":
            "accounting_storage/slurmdbd", "PriorityWeightAge": 1000, "PriorityCalcPeriod": 5}
    wl = _wl(n=400)
    a = _run(wl, 16, replay="on", **opts)
    assert capsys.readouterr().out.count("slurm: priority/multifactor with slurmdbd") == 1
    b = _run(wl, 16, replay="off", **opts)
    assert a.summary["scheduler_params"]["engine"] == "general engine"
    for col in ("start", "end", "nodes"):
        assert a.jobs[col].tolist() == b.jobs[col].tolist()
    assert a.summary["scheduler_params"]["stats"] == b.summary["scheduler_params"]["stats"]
    assert a.summary["scheduler_params"]["notes"] == b.summary["scheduler_params"]["notes"]


@pytest.mark.slow
def test_replay_with_duplicate_job_ids():
    """Job ids repeat in some logs: finishes tie by (time, job id, index) as the engine's heap, and
    running jobs by (expected end, job id, slot) as bf_cycle's two stable sorts."""
    wl = _wl(n=1200, seed=11)
    rng = np.random.default_rng(2)
    wl = Workload.from_arrays("t", submit=wl.submit, runtime=np.round(wl.runtime / 300) * 300 + 300,
                              procs=wl.procs, requested_time=np.round(wl.requested_time / 300) * 300
                              + 300, user=wl.user, job_id=rng.integers(1, 30, len(wl)))
    a, b = _run(wl, 16, replay="on"), _run(wl, 16, replay="off", compiled=False)
    _same(a, b)


def test_first_appearance_codes_by_hand():
    """bind numbers partitions, QOS and associations as a dict filled job by job would."""
    from hpctwin.schedulers.slurm import _factorize, _factorize_codes, _int_labels
    vals, codes = _factorize_codes(np.array([7, 3, 7, -1, 3, 9]))
    assert vals == [7, 3, -1, 9] and codes.tolist() == [0, 1, 0, 2, 1, 3]
    labels, codes = _int_labels(np.array([2.0, -1.0, np.nan, 2.0, 5.0, -3.0]), "default")
    assert labels == ["2", "default", "5"] and codes.tolist() == [0, 1, 1, 0, 2, 1]
    labels, codes = _factorize(["b", "a", "b"])
    assert labels == ["b", "a"] and codes.tolist() == [0, 1, 0]
    assert _factorize_codes(np.array([], dtype=np.int64))[1].tolist() == []


def test_a_subclass_is_never_replayed():
    """The replay hard-codes the class's decisions: a subclass (which may override one) runs the engine."""
    sched, _, sim = _bound({})
    assert pre_eligible(sched, sim)

    class Tweaked(type(sched)):
        pass
    sched.__class__ = Tweaked
    assert not pre_eligible(sched, sim)
