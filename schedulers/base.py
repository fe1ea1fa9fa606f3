"""The scheduler contract: what a policy sees and what it returns.

A scheduler is consulted by the simulation; it never mutates simulation state.

* ``bind(jobs, cluster)`` is called once before the run with the read-only `JobTable`
  (what a real scheduler knows of each job: submit time, size, *estimate*, user... but not
  the actual runtime) and the `ClusterView`.
* ``schedule(now, queue, cluster)`` is called once per scheduling pass (after all finishes and
  submissions at ``now`` have been applied) and returns the jobs to start *now*, as job
  indices (ints) or `Start` records when the policy also chooses the nodes.
* Optional hooks: ``on_submit(now, job)``, ``on_start(now, job)``, ``on_finish(now, job)``,
  ``on_interrupt(now, job)`` (a node failure took a running job off the machine; defaults to
  ``on_finish``), ``on_requeue(now, job)`` (the interrupted job waits again),
  ``on_units_down(now, units, until)`` / ``on_units_up(now, units)`` (node outages) and
  ``next_wakeup(now) -> float | None`` for periodic policies (a timer event makes the engine run a
  pass at that time even when nothing else happens).

Times are seconds (float) on the log's clock; sizes are allocation units.
"""
from __future__ import annotations

from typing import NamedTuple, Protocol, Sequence, runtime_checkable

import numpy as np


class Start(NamedTuple):
    """A decision to start ``job`` now, optionally on the given node ids."""

    job: int
    nodes: np.ndarray | None = None


class JobTable:
    """What schedulers may read about jobs (no actual runtimes).

    Attributes (numpy arrays indexed by job index):
    ``job_id``; ``submit`` (s); ``procs`` (allocation units); ``estimate`` (s, the requested time
    or the estimate model's value, always finite and > 0); ``requested_time`` (s, the user's
    request as in the log, the kill limit); ``user``, ``group``, ``queue``, ``partition`` (ints,
    -1 unknown); ``columns`` (extra per-job arrays such as ``gpus_per_node`` or ``job_class``).
    """

    __slots__ = ("job_id", "submit", "procs", "estimate", "requested_time", "user", "group",
                 "queue", "partition", "columns")

    def __init__(self, *, job_id, submit, procs, estimate, requested_time, user, group, queue,
                 partition, columns=None):
        self.job_id = job_id
        self.submit = submit
        self.procs = procs
        self.estimate = estimate
        self.requested_time = requested_time
        self.user = user
        self.group = group
        self.queue = queue
        self.partition = partition
        self.columns = columns or {}

    def __len__(self) -> int:
        return len(self.submit)


@runtime_checkable
class ClusterView(Protocol):
    """Read-only view of the machine that schedulers get.

    ``total``: allocation units of the machine; ``free``: units free now; ``free_mask``: bool
    array, one entry a unit/node, True where free; ``running_jobs``, ``running_procs``,
    ``running_start``, ``running_expected_end``: arrays over running jobs (expected end = start +
    estimate, wall clock, the scheduler's belief; never earlier than ``now``). Units out of service
    (a failed node under repair) appear as a running entry with an index >= the number of jobs
    and the repair's end as expected end.
    """

    total: int

    @property
    def free(self) -> int: ...

    @property
    def free_mask(self) -> np.ndarray: ...

    @property
    def running_jobs(self) -> np.ndarray: ...

    @property
    def running_procs(self) -> np.ndarray: ...

    @property
    def running_expected_end(self) -> np.ndarray: ...


class Scheduler:
    """Base class for policies; subclasses implement `schedule`.

    Subclasses may override the optional hooks. ``name`` is the label used in results.
    """

    name = "base"

    def bind(self, jobs: JobTable, cluster: ClusterView) -> None:
        """Called once before the run starts."""
        self.jobs = jobs
        self.total = cluster.total

    def schedule(self, now: float, queue: np.ndarray, cluster: ClusterView) -> Sequence[int | Start]:
        """Jobs to start now. ``queue``: waiting job indices in arrival order (submit, id)."""
        raise NotImplementedError

    def on_submit(self, now: float, job: int) -> None:  # pragma: no cover - default no-op
        pass

    def on_start(self, now: float, job: int) -> None:  # pragma: no cover - default no-op
        pass

    def on_finish(self, now: float, job: int) -> None:  # pragma: no cover - default no-op
        pass

    def on_interrupt(self, now: float, job: int) -> None:
        """A running job was interrupted (a node failure) and left its units; by default the same
        bookkeeping as a finish. It may be requeued next (`on_requeue`)."""
        self.on_finish(now, job)

    def on_requeue(self, now: float, job: int) -> None:  # pragma: no cover - default no-op
        """An interrupted job is waiting again (it will be in the next pass's queue)."""
        pass

    def on_units_down(self, now: float, units: np.ndarray, until: float) -> None:  # pragma: no cover
        """``units`` left service (a node failure) until ``until`` (s, the repair's expected end).
        Policies that read the `ClusterView` need nothing: the units show as held until then."""
        pass

    def on_units_up(self, now: float, units: np.ndarray) -> None:  # pragma: no cover - default no-op
        """``units`` are back in service."""
        pass

    def next_wakeup(self, now: float) -> float | None:
        """Next time (> now) at which this policy wants a pass with no other event, or None."""
        return None

    def describe(self) -> dict:
        """Parameters of this policy, for the run's config and result tables."""
        return {"name": self.name}


class ForwardsFailureHooks:
    """Mixin for wrappers (``self.inner`` is the wrapped policy): node-failure hooks go to the inner
    policy, ``on_interrupt`` falling back to its ``on_finish`` as the engine does."""

    inner: object

    def on_interrupt(self, now: float, job: int) -> None:
        fn = getattr(self.inner, "on_interrupt", None) or getattr(self.inner, "on_finish", None)
        if fn is not None:
            fn(now, job)

    def on_requeue(self, now: float, job: int) -> None:
        fn = getattr(self.inner, "on_requeue", None)
        if fn is not None:
            fn(now, job)

    def on_units_down(self, now: float, units, until: float) -> None:
        fn = getattr(self.inner, "on_units_down", None)
        if fn is not None:
            fn(now, units, until)

    def on_units_up(self, now: float, units) -> None:
        fn = getattr(self.inner, "on_units_up", None)
        if fn is not None:
            fn(now, units)
