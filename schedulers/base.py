"""The scheduler contract: what a policy sees and what it returns.

Defined in `hpctwin.twin.contract` (one module for schedulers, gates and physics models) and
re-exported here. A scheduler is consulted by the engine; it never mutates simulation state.

* ``bind(ctx)`` is called once before the run with a `BindContext`: the read-only `JobTable`
  (what a real scheduler knows of each job: submit time, size, *estimate*, user... but not the
  actual runtime), the `ClusterView`, a seeded RNG (``ctx.rng(name)``), node groups and read-only
  views of the physics models the policy lists in ``needs_models``. Policies written against the
  older ``bind(jobs, cluster)`` signature still work (detected once, by signature).
* ``schedule(now, queue, cluster)`` is called once per scheduling pass (after all finishes and
  submissions at ``now`` have been applied) and returns the jobs to start *now*, as job
  indices (ints) or `Start` records when the policy also chooses the units.
* Optional hooks, resolved once at bind time (`resolve_hooks`): ``on_submit(now, job)``,
  ``on_start(now, job)``, ``on_finish(now, job)``, ``on_interrupt(now, job)`` (a node failure took a
  running job off the machine; defaults to ``on_finish``), ``on_requeue(now, job)`` (the interrupted
  job waits again), ``on_refused(now, job, reason)`` (a gate refused a start the policy returned),
  ``on_units_down(now, units, until)`` / ``on_units_up(now, units)`` (node outages) and
  ``next_wakeup(now) -> float | None`` for periodic policies (a timer event makes the engine run a
  pass at that time even when nothing else happens).

Times are seconds (float) on the log's clock; sizes are allocation units.
"""
from __future__ import annotations

from hpctwin.twin.contract import (SCHEDULER_HOOKS, BindContext, ClusterView, ForwardsFailureHooks, Gate, Hooks,
                                   JobTable, PluginScheduler, Refusal, Scheduler, Start, as_scheduler, bind_policy,
                                   resolve_hooks)

__all__ = ["SCHEDULER_HOOKS", "BindContext", "ClusterView", "ForwardsFailureHooks", "Gate", "Hooks", "JobTable",
           "PluginScheduler", "Refusal", "Scheduler", "Start", "as_scheduler", "bind_policy", "resolve_hooks"]
