"""The one scheduler/gate/model contract (issue 12 item 3): hooks resolved once at bind, plug-ins
never patched, bind contexts with seeded RNGs, gates refusing starts and telling the policy."""
from __future__ import annotations

import pytest

from hpctwin.schedulers.base import BindContext, Gate, PluginScheduler, Refusal, Scheduler, resolve_hooks
from hpctwin.schedulers.registry import make_scheduler
from hpctwin.twin.contract import ModelView
from hpctwin.twin.run import RunConfig, run

from .helpers import simulate


class Bare:
    """A plug-in written against the documented contract only."""

    name = "bare"

    def schedule(self, now, queue, cluster):
        return [int(j) for j in queue[:1]] if cluster.free >= 4 else []


def test_registry_does_not_patch_third_party_objects():
    s = make_scheduler("tests.test_engine_contract:Bare")
    assert isinstance(s, PluginScheduler) and type(s.plugin) is Bare
    assert set(vars(s.plugin)) == set()                      # nothing added to the plug-in
    res, _, _ = simulate([(1, 0, 10, 4, None), (2, 0, 10, 4, None)], 4, sched_obj=s)
    assert res.start.tolist() == [0.0, 10.0]
    h = resolve_hooks(s)
    assert h.on_submit is None and h.on_finish is None and h.next_wakeup is None


def test_hooks_are_looked_up_once_at_bind():
    lookups = []

    class Counting(Scheduler):
        name = "counting"

        def schedule(self, now, queue, cluster):
            return [int(j) for j in queue[:1]] if cluster.free >= 1 else []

        def on_finish(self, now, job):
            pass

        def __getattribute__(self, name):
            if name.startswith("on_") or name == "next_wakeup":
                lookups.append(name)
            return object.__getattribute__(self, name)

    simulate([(i, i, 5, 1, None) for i in range(1, 30)], 2, sched_obj=Counting())
    # one resolution per hook at bind (the engine's and the fallback for on_interrupt), none per event
    assert len(lookups) <= 12 and lookups.count("on_finish") <= 3


def test_bind_context_rng_is_seeded_from_the_run_config():
    seen = {}

    class Draws(Scheduler):
        name = "draws"

        def bind(self, ctx):
            super().bind(ctx)
            seen.setdefault(ctx.seed, []).append(float(ctx.rng("policy").random()))

        def schedule(self, now, queue, cluster):
            return [int(j) for j in queue[:1]] if cluster.free >= self.jobs.procs[int(queue[0])] else []

    import sys
    sys.modules[__name__].Draws = Draws
    for seed in (1, 1, 2):
        run(RunConfig(workload="synthetic:jobs=20", nodes=64, seed=seed, scheduler=f"{__name__}:Draws"))
    assert seen[1][0] == seen[1][1] != seen[2][0]


def test_legacy_bind_signature_still_works():
    got = []

    class Old:
        name = "old"

        def bind(self, jobs, cluster):
            got.append((len(jobs), cluster.total))

        def schedule(self, now, queue, cluster):
            return [int(j) for j in queue[:1]] if cluster.free >= 1 else []

    simulate([(1, 0, 5, 1, None)], 3, sched_obj=Old())
    assert got == [(1, 3)]


def test_model_views_are_read_only():
    class M:
        name = "m"
        value = 3

        def on_start(self, now, job, nodes):
            return None

    v = ModelView(M())
    assert v.value == 3
    with pytest.raises(AttributeError, match="cannot set 'value'"):
        v.value = 4
    with pytest.raises(AttributeError, match="'on_start' is not readable by policies"):
        v.on_start
    ctx = BindContext(jobs=[], cluster=None, total=1, models={"power": v})
    with pytest.raises(LookupError, match=r"needs the network model\(s\)"):
        ctx.for_policy(type("P", (), {"needs_models": ("network",), "name": "p"})())


class EvenOnly(Gate):
    """Refuses odd job indices before t = 50 s; the second refusal cuts the rest of its pass."""

    name = "even-only"

    def admit(self, now, job, units, view):
        if job % 2 and now < 50:
            return Refusal(f"odd job {job} before t=50", rest_of_pass=job == 3)
        return None

    def next_wakeup(self, now):
        return 50.0 if now < 50 else None


class Greedy(Scheduler):
    name = "greedy"

    def __init__(self):
        self.refused = []

    def bind(self, ctx):
        super().bind(ctx)

    def schedule(self, now, queue, cluster):
        out, free = [], cluster.free
        for j in queue.tolist():
            if self.jobs.procs[j] <= free:
                out.append(j)
                free -= int(self.jobs.procs[j])
        return out

    def on_refused(self, now, job, reason):
        self.refused.append((now, job, reason))

    def engine_gates(self):
        return [EvenOnly()]


def test_gate_refusals_are_reported_and_the_job_waits():
    rows = [(i + 1, 0, 100, 1, None) for i in range(5)]           # five 1-unit jobs at t=0 on 8 units
    res, _, sched = simulate(rows, 8, sched_obj=Greedy())
    # t=0: job index 0 starts, 1 refused, 2 starts, 3 refused with rest_of_pass -> 4 refused too;
    # at t=50 (the gate's wake-up) 1, 3 and 4 start
    assert res.start.tolist() == [0.0, 50.0, 0.0, 50.0, 50.0]
    assert [(t, j) for t, j, _ in sched.refused] == [(0.0, 1), (0.0, 3), (0.0, 4)]
    assert sched.refused[2][2] == "odd job 3 before t=50 (refused with an earlier start of this pass)"
    assert res.refusals == {"even-only": 3}
