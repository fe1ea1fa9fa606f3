"""The ``engine`` rules: hpctwin's event loop, stepped externally one decision at a time.

`SteppedSimulation` drives the engine's one loop, the generator `twin.simulation.Simulation.steps`: the same loop
(same-instant order: finishes, model events, submissions, wake-ups, then one scheduling pass), the
same private steps of the engine (`_finishes`, `_model_events`, `_pass`...), with one addition: before
the pass, while the policy (`AgentPolicy`) needs a decision, the generator yields the time and
receives the agent's pick. The pass itself is unchanged: one call of the policy's ``schedule``,
whose starts the engine checks and applies. No thread, no re-simulation. A test checks that the
stepped loop with a fixed policy gives the same `SimResult` as ``Simulation.run``.

`AgentPolicy` holds the semantics of a decision (the same in the Gymnasium environment and in the
``rl:PATH`` scheduler, `twin.rl.policy_scheduler`):

* the agent's pick is the pass's first pick and is **committed** (RLScheduler's rule): it is not
  re-decided while it waits;
* if it fits now it is started (in this pass) and the agent picks again, at the same time, with the
  machine as it will be after that start; the pass goes on until a pick does not fit or the queue
  is empty;
* the pick that does not fit waits as the head; the **base** policy fills the rest of the pass and
  later passes until the head starts: ``none`` (nothing starts before the head), ``easy`` (hpctwin's
  EASY backfilling, `schedulers.backfill`, with the head's reservation), ``conservative`` (hpctwin's
  conservative backfilling with the priority order: this pass's picks, the head, then the queue in
  arrival order; the plan is rebuilt when that order stops being the arrival order or changes,
  since the priorities changed; an agent that picks in arrival order never rebuilds it). The
  agent's pick starts whenever enough units are free, even on units the plan held for a later
  job's reservation (that job is re-planned): the agent decides, the base plans around it; so an
  arrival-order agent equals ``--scheduler fcfs`` and ``easy`` with those bases, but not
  ``conservative``, which would keep such a pick waiting.

The base policy is `schedulers.backfill.QueueScheduler` itself with that priority order, so the
backfilling rules are the engine's own. Times are seconds on the log's clock; sizes are units.
"""
from __future__ import annotations

import numpy as np

from hpctwin.schedulers.backfill import BACKFILLS, QueueScheduler
from hpctwin.twin.contract import BindContext, ClusterView, Scheduler, bind_policy
from hpctwin.twin.simulation import Simulation


class DecisionError(ValueError):
    """An agent's pick that is not a waiting job of the current decision."""


class AgentPolicy(Scheduler):
    """Committed head chosen by an agent; ``base`` (``none``, ``easy``, ``conservative``) fills the rest.

    The decision protocol (used by the stepped loop and by `RLPolicyScheduler.schedule`):
    `begin_pass` at each pass, then ``while deciding(): commit(job)``, then the engine's ``schedule``.
    """

    name = "rl-agent"

    def __init__(self, base: str = "easy", name: str | None = None):
        if base not in BACKFILLS:
            raise ValueError(f"base policy {base!r}: known: {', '.join(BACKFILLS)}")
        self.base_policy = base
        self.name = name or self.name
        self.base = QueueScheduler("fcfs", base, name=f"{self.name}:{base}")
        self.base.order_name = "agent"           # no FCFS shortcut: the order is ours
        self.base._static_order = False
        self.base.order = self._order

    def describe(self) -> dict:
        return {"name": self.name, "base": self.base_policy}

    def bind(self, ctx: BindContext, cluster: ClusterView | None = None) -> None:
        super().bind(ctx, cluster)
        bind_policy(self.base, ctx)
        self.procs = [int(p) for p in np.asarray(self.jobs.procs).tolist()]
        self.head: int | None = None
        self.pending: list[int] = []
        self.free = 0
        self.queue = np.empty(0, dtype=np.int64)
        self._decided = False
        self._plan_key: tuple = ()                 # the promoted jobs the conservative plan was made with
        self.started_log: list[tuple[float, int]] = []     # (time s, job) of every start, in order

    # ------------------------------------------------------------------ the decision protocol
    def begin_pass(self, now: float, queue: np.ndarray, cluster: ClusterView) -> None:
        """A pass at ``now``: the committed head starts if it fits; the agent is asked next."""
        self.now, self.queue, self.free = now, queue, int(cluster.free)
        self.pending = []
        self._decided = False
        if self.head is not None and not bool((queue == self.head).any()):
            self.head = None                      # cancelled or started elsewhere
        self._advance()

    def _advance(self) -> None:
        h = self.head
        if h is not None and self.procs[h] <= self.free:
            self.pending.append(h)
            self.free -= self.procs[h]
            self.head = None

    def deciding(self) -> bool:
        """True when the agent must pick: no head waits and jobs are left in this pass's queue."""
        return self.head is None and len(self.queue) > len(self.pending)

    def waiting(self) -> np.ndarray:
        """The jobs the agent may pick, in queue (arrival) order: the queue without this pass's picks."""
        q = self.queue
        if not self.pending:
            return q
        return q[~np.isin(q, np.asarray(self.pending, dtype=np.int64))]

    def commit(self, job: int) -> None:
        """The agent picks waiting ``job`` (job index): it starts now if it fits, else it is the head."""
        job = int(job)
        if not self.deciding():
            raise DecisionError(f"no decision is pending at t={self.now}")
        if job in self.pending or not bool((self.queue == job).any()):
            raise DecisionError(f"job index {job} is not waiting at t={self.now}")
        self._decided = True
        self.head = job
        self._advance()

    def pending_expected_ends(self) -> tuple[np.ndarray, np.ndarray]:
        """Expected ends (s) and units of this pass's picks (they start now)."""
        if not self.pending:
            return np.empty(0), np.empty(0, dtype=np.int64)
        p = np.asarray(self.pending, dtype=np.int64)
        return self.now + np.asarray(self.jobs.estimate, dtype=np.float64)[p], np.asarray(self.jobs.procs)[p]

    # ------------------------------------------------------------------ the pass
    def _order(self, now: float, queue: np.ndarray, jobs) -> np.ndarray:
        """Priority order for the base policy: this pass's picks, the head, the rest in queue order."""
        first = self.pending + ([self.head] if self.head is not None else [])
        if not first:
            return queue
        f = np.asarray(first, dtype=np.int64)
        return np.concatenate((f, queue[~np.isin(queue, f)]))

    def schedule(self, now: float, queue: np.ndarray, cluster: ClusterView) -> list[int]:
        if self.base_policy == "conservative":
            first = self.pending + ([self.head] if self.head is not None else [])
            key = tuple(first) if first != queue[:len(first)].tolist() else ()
            if key != self._plan_key and self.base._plan is not None:
                self.base._plan.profile = None    # new priorities: re-plan every reservation
            self._plan_key = key                  # () = arrival order, the plan's own
        self._decided = False
        return self.base.schedule(now, queue, cluster)

    # ------------------------------------------------------------------ hooks (to the base policy)
    def on_start(self, now: float, job: int) -> None:
        self.started_log.append((now, job))
        self.base.on_start(now, job)

    def on_finish(self, now: float, job: int) -> None:
        self.base.on_finish(now, job)

    def on_requeue(self, now: float, job: int) -> None:
        self.base.on_requeue(now, job)

    def on_cancel(self, now: float, job: int) -> None:
        if job == self.head:
            self.head = None
        self.base.on_cancel(now, job)

    def next_wakeup(self, now: float) -> float | None:
        return self.base.next_wakeup(now)


class SteppedSimulation(Simulation):
    """`Simulation` whose loop is stepped: `Simulation.steps` yields at each decision of its
    `AgentPolicy` (the engine's one loop, with `EXTERNAL_DECISIONS` on); subclasses may override the
    engine's `before_event` / `after_event` hooks (energy integration, observations)."""

    EXTERNAL_DECISIONS = True
    PASS_THROUGH = (DecisionError,)
