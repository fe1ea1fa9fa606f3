"""The one contract between the engine and its plug-ins: schedulers, gates and physics models.

Everything a plug-in author needs is defined here; ``hpctwin.schedulers.base`` and
``hpctwin.twin.model_api`` re-export it.

* **Schedulers** (`Scheduler`): ``schedule(now, queue, view) -> [job index | Start]`` once per pass.
  Optional hooks (``on_submit``, ``on_start``, ``on_finish``, ``on_interrupt``, ``on_requeue``,
  ``on_refused``, ``on_units_down``, ``on_units_up``, ``next_wakeup``, ``on_cancel``) are looked up
  **once**, when the engine binds the policy (`resolve_hooks`): a hook that is missing or is the
  base class's no-op costs nothing per event. ``bind(ctx)`` receives a `BindContext` (the job table, the machine view,
  a seeded RNG, node groups, read-only views of the physics models the policy names in
  ``needs_models``). A policy written against the older ``bind(jobs, cluster)`` signature is detected
  by its signature, once, and called that way (`bind_policy`).
* **Gates** (`Gate`): engine plug-ins consulted for every start a policy returns, after its units
  are chosen and before the start is applied (power caps, LLM group limits). A gate answers `None`
  (admit) or a `Refusal`; the engine then does not start the job, tells the policy
  (``on_refused(now, job, reason)``) and counts it: a refusal is never a silent drop.
* **Physics models** (`RunModel`): told of every start and finish, may answer progress-rate factors,
  own timed events through the engine's timer heap, and record series and columns.

Times are seconds on the log's clock; sizes are allocation units; power in watts.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple, Protocol, Sequence, runtime_checkable

import numpy as np


# ====================================================================== what schedulers see
class Start(NamedTuple):
    """A decision to start ``job`` (a job index) now, optionally on the given unit ids.

    Examples
    --------
    A policy that starts jobs in queue order on the lowest free units, chosen by itself:

    >>> import numpy as np
    >>> import hpctwin
    >>> hpctwin.Start(3)
    Start(job=3, nodes=None)
    >>> class LowestUnits(hpctwin.Scheduler):
    ...     name = "lowest-units"
    ...     def schedule(self, now, queue, cluster):
    ...         starts, free = [], np.flatnonzero(cluster.free_mask)     # free unit ids, lowest first
    ...         for j in queue:
    ...             size = int(self.jobs.procs[j])
    ...             if size > len(free):
    ...                 break
    ...             starts.append(hpctwin.Start(int(j), free[:size]))
    ...             free = free[size:]
    ...         return starts
    >>> wl = hpctwin.Workload.from_arrays("tiny", submit=[0, 10, 20], runtime=[100, 50, 30],
    ...                                   procs=[4, 2, 8], requested_time=[120, 60, 60])
    >>> res = hpctwin.run(hpctwin.RunConfig(workload="tiny", nodes=8, scheduler=LowestUnits), workload=wl)
    >>> res.jobs["nodes"].tolist(), res.jobs["start"].tolist()
    (['0-3', '4-5', '0-7'], [0.0, 10.0, 100.0])
    """

    job: int
    nodes: np.ndarray | None = None


class JobTable:
    """What schedulers may read about jobs (no actual runtimes).

    Attributes (numpy arrays indexed by job index):
    ``job_id``; ``submit`` (s); ``procs`` (allocation units); ``estimate`` (s, the requested time
    or the estimate model's value, always finite and > 0); ``requested_time`` (s, the user's
    request as in the log, the kill limit); ``user``, ``group``, ``queue``, ``partition`` (ints,
    -1 unknown); ``columns`` (extra per-job arrays such as ``gpus_per_node`` or ``job_class``).

    Examples
    --------
    >>> import hpctwin
    >>> wl = hpctwin.Workload.from_arrays("tiny", submit=[0, 10, 20], runtime=[100, 50, 30],
    ...                                   procs=[4, 2, 8], requested_time=[120, 60, 60])
    >>> jobs = hpctwin.JobTable.of(wl, estimate=wl.requested_time)
    >>> len(jobs), jobs.procs.tolist(), jobs.estimate.tolist()
    (3, [4, 2, 8], [120.0, 60.0, 60.0])
    >>> hasattr(jobs, "runtime")          # a scheduler never sees actual runtimes
    False
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

    @classmethod
    def of(cls, workload: Any, estimate: np.ndarray) -> "JobTable":
        """The table of a workload (`twin.workload.Workload`) with the run's estimates (s)."""
        wl = workload
        return cls(job_id=wl.job_id, submit=wl.submit, procs=wl.procs, estimate=estimate,
                   requested_time=wl.requested_time, user=wl.user, group=wl.group, queue=wl.queue,
                   partition=wl.partition, columns=wl.columns)


@runtime_checkable
class ClusterView(Protocol):
    """Read-only view of the machine that schedulers get.

    ``total``: allocation units of the machine; ``free``: units free now; ``free_mask``: bool
    array, one entry a unit/node, True where free; ``running_jobs``, ``running_procs``,
    ``running_start``, ``running_expected_end``: arrays over running jobs (expected end = start +
    estimate, wall clock, the scheduler's belief; never earlier than ``now``). Units out of service
    (a failed node under repair) appear as a running entry with an index >= the number of jobs
    and the repair's end as expected end.

    Examples
    --------
    A policy that records what it sees at each pass (time, units, free units, queue) and starts
    nothing until the queue holds every job:

    >>> import hpctwin
    >>> class Peek(hpctwin.Scheduler):
    ...     name = "peek"
    ...     def bind(self, ctx, cluster=None):
    ...         super().bind(ctx, cluster)
    ...         self.seen = []
    ...     def schedule(self, now, queue, cluster):
    ...         assert isinstance(cluster, hpctwin.ClusterView)
    ...         self.seen.append((now, cluster.total, cluster.free, queue.tolist()))
    ...         return [int(j) for j in queue] if len(queue) == 2 else []
    >>> wl = hpctwin.Workload.from_arrays("two", submit=[0, 10], runtime=[100, 50], procs=[4, 2],
    ...                                   requested_time=[120, 60])
    >>> peek = Peek()
    >>> res = hpctwin.run(hpctwin.RunConfig(workload="two", nodes=8, scheduler=peek), workload=wl)
    >>> peek.seen
    [(0.0, 8, 8, [0]), (10.0, 8, 8, [0, 1])]
    >>> res.jobs["start"].tolist()
    [10.0, 10.0]
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


def seeded_rng(seed: int, name: str) -> np.random.Generator:
    """A numpy Generator derived deterministically from the run seed and a stream name."""
    key = [int(seed) & 0xFFFFFFFF] + [ord(c) for c in name]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(key)))


class LazyGenerator:
    """`seeded_rng` ``(seed, name)``, built on first use: importing ``numpy.random`` costs ~7 ms, and a
    stream handed to a plug-in that never draws (the engine's first-fit placement) need not pay it.

    Every attribute (``choice``, ``integers``, ``bit_generator``...) is the real Generator's, so the
    draws are those of ``seeded_rng(seed, name)``; ``isinstance(x, numpy.random.Generator)`` holds,
    and copying or pickling it gives a real Generator in the same state."""

    __slots__ = ("_seed", "_name", "_rng")

    def __init__(self, seed: int, name: str):
        object.__setattr__(self, "_seed", seed)
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_rng", None)

    def _generator(self) -> np.random.Generator:
        """The real Generator (built now if not yet)."""
        if self._rng is None:
            object.__setattr__(self, "_rng", seeded_rng(self._seed, self._name))
        return self._rng

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._generator(), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        setattr(self._generator(), attr, value)

    @property  # type: ignore[misc]
    def __class__(self) -> type:          # isinstance(x, numpy.random.Generator) is True
        return type(self._generator())

    def __repr__(self) -> str:
        return repr(self._generator())

    def __reduce_ex__(self, protocol: Any) -> Any:     # copy, deepcopy and pickle: the real Generator
        return self._generator().__reduce_ex__(protocol)


def lazy_seeded_rng(seed: int, name: str) -> np.random.Generator:
    """`seeded_rng` ``(seed, name)`` built on first attribute access (a `LazyGenerator`): the same
    draws, without importing ``numpy.random`` for a stream nobody draws from."""
    return LazyGenerator(seed, name)  # type: ignore[return-value]


class ModelView:
    """Read-only view of a physics model for policies and gates: reads public attributes and calls
    public query methods; the model's engine hooks (``bind``, ``on_*``, ``finalize``) and attribute
    assignment are refused. A model may offer a narrower view by defining ``view()``."""

    _HIDDEN = ("bind", "on_start", "on_finish", "on_event", "on_rate_change", "finalize", "engine_work",
               "start_delay")

    __slots__ = ("_model",)

    def __init__(self, model: Any):
        object.__setattr__(self, "_model", model)

    def __getattr__(self, name: str):
        if name.startswith("_") or name in ModelView._HIDDEN:
            raise AttributeError(f"read-only view of model {getattr(self._model, 'name', '?')!r}: "
                                 f"{name!r} is not readable by policies")
        return getattr(self._model, name)

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError(f"read-only view of model {getattr(self._model, 'name', '?')!r}: "
                             f"cannot set {name!r}")


@dataclass
class BindContext:
    """What a policy or a gate gets at bind time (before the first event).

    ``jobs``: the `JobTable`; ``cluster``: the `ClusterView` (live, read-only); ``total``: units of
    the machine; ``seed``: the run seed (`rng` derives named streams from it: same config, same
    draws); ``node_group``: node -> group map (Dragonfly group / fat-tree pod) or None;
    ``models``: read-only views (`ModelView`) of the physics models of the run, by name (only those
    the policy lists in its ``needs_models`` attribute when it has one); ``system``: the
    `SystemSpec` or None; ``options``: the run's option tables; ``eligible``: in a run that gates jobs
    on dependencies or array throttles (`twin.dependencies`), each job's eligible time (s, Slurm's
    EligibleTime; NaN while not yet eligible), a live array the gate fills in; None otherwise;
    ``log_start``: the Unix time (s) of the log's time 0 (its header's ``UnixStartTime``: SWF, sacct
    dumps) or None when the log does not say (policies that follow a real scheduler's clock use it).
    """

    jobs: JobTable
    cluster: Any
    total: int
    seed: int = 0
    node_group: np.ndarray | None = None
    models: Mapping[str, Any] = field(default_factory=dict)
    system: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)
    eligible: np.ndarray | None = None
    log_start: float | None = None

    def rng(self, name: str) -> np.random.Generator:
        """The named random stream of this run (seeded from the run config)."""
        return seeded_rng(self.seed, name)

    def model(self, name: str):
        """The read-only view of model ``name``; a clear error when the run does not have it."""
        try:
            return self.models[name]
        except KeyError:
            have = ", ".join(sorted(self.models)) or "none"
            raise LookupError(f"the run has no {name!r} model (models: {have}); "
                              f"turn it on (e.g. --{name} on)") from None

    def for_policy(self, policy: Any) -> "BindContext":
        """This context with ``models`` narrowed to what ``policy`` declares in ``needs_models``."""
        needs = getattr(policy, "needs_models", None)
        if needs is None:
            return self
        missing = [m for m in needs if m not in self.models]
        if missing:
            raise LookupError(f"{getattr(policy, 'name', type(policy).__name__)} needs the "
                              f"{', '.join(missing)} model(s): turn them on (e.g. --{missing[0]} on)")
        return BindContext(self.jobs, self.cluster, self.total, self.seed, self.node_group,
                           {m: self.models[m] for m in needs}, self.system, self.options, self.eligible,
                           self.log_start)

    @classmethod
    def coerce(cls, ctx_or_jobs: Any, cluster: Any = None) -> "BindContext":
        """A `BindContext` from either a context or the legacy ``(jobs, cluster)`` pair (seed 0)."""
        if isinstance(ctx_or_jobs, BindContext):
            return ctx_or_jobs
        return cls(ctx_or_jobs, cluster, int(cluster.total))


# ====================================================================== schedulers
SCHEDULER_HOOKS = ("on_submit", "on_start", "on_finish", "on_interrupt", "on_requeue", "on_refused",
                   "on_units_down", "on_units_up", "next_wakeup", "on_cancel")


class Scheduler:
    """Base class for policies; subclasses implement `schedule` and override the hooks they need.

    ``name`` is the label used in results. Hooks left as these no-ops are never called by the engine.

    Examples
    --------
    First come, first served without backfilling, in a few lines (``self.jobs`` is the `JobTable`
    set by `bind`); given as a class or as an instance, it schedules as the built-in ``fcfs``:

    >>> import hpctwin
    >>> class MyFcfs(hpctwin.Scheduler):
    ...     name = "my-fcfs"
    ...     def schedule(self, now, queue, cluster):
    ...         starts, free = [], cluster.free
    ...         for j in queue:
    ...             if self.jobs.procs[j] > free:
    ...                 break
    ...             starts.append(int(j))
    ...             free -= int(self.jobs.procs[j])
    ...         return starts
    >>> workload = "synthetic:jobs=100,nodes=16"
    >>> builtin = hpctwin.run(hpctwin.RunConfig(workload=workload, scheduler="fcfs"))
    >>> for policy in (MyFcfs, MyFcfs()):
    ...     res = hpctwin.run(hpctwin.RunConfig(workload=workload, scheduler=policy))
    ...     print(res.summary["scheduler"], res.jobs["start"].equals(builtin.jobs["start"]))
    my-fcfs True
    my-fcfs True
    """

    name = "base"
    #: names of the physics models whose read-only views the policy needs (None: no declaration)
    needs_models: Sequence[str] | None = None

    def bind(self, ctx: BindContext, cluster: Any = None) -> None:
        """Called once before the run starts with a `BindContext` (the legacy ``(jobs, cluster)``
        pair is accepted too). Sets ``self.ctx``, ``self.jobs`` and ``self.total``."""
        ctx = BindContext.coerce(ctx, cluster)
        self.ctx = ctx
        self.jobs = ctx.jobs
        self.total = ctx.total

    def schedule(self, now: float, queue: np.ndarray, cluster: ClusterView) -> Sequence[int | Start]:
        """Jobs to start now. ``queue``: waiting job indices in queue order (arrival order unless a
        failure requeued a job at the front)."""
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

    def on_refused(self, now: float, job: int, reason: str) -> None:  # pragma: no cover - no-op
        """A gate refused the start of ``job`` that this policy returned; the job is still waiting."""

    def on_units_down(self, now: float, units: np.ndarray, until: float) -> None:  # pragma: no cover
        """``units`` left service (a node failure) until ``until`` (s, the repair's expected end).
        Policies that read the `ClusterView` need nothing: the units show as held until then."""

    def on_units_up(self, now: float, units: np.ndarray) -> None:  # pragma: no cover - default no-op
        """``units`` are back in service."""

    def on_cancel(self, now: float, job: int) -> None:  # pragma: no cover - default no-op
        """Waiting ``job`` was withdrawn (`twin.control.EngineControl.cancel`): it left the queue and
        will never start. Policies that only read the queue they are given need nothing; a policy
        that keeps per-job queue state (reservations, counters) drops the job's share here."""

    def next_wakeup(self, now: float) -> float | None:
        """Next time (> now) at which this policy wants a pass with no other event, or None."""
        return None

    def describe(self) -> dict:
        """Parameters of this policy, for the run's config and result tables."""
        return {"name": self.name}

    # Optional, asked once at bind time:
    # ``engine_placer() -> placer | None``: the engine chooses the units of this policy's starts that
    #     carry none with ``placer.place(job, procs, free_mask)``, at the moment each start is applied
    #     (so the free mask includes the starts applied before it in the pass, not the refused ones);
    # ``engine_gates() -> list[Gate]``: gates the policy brings (e.g. the LLM group limit).


class PluginScheduler(Scheduler):
    """A third-party policy written against the documented contract without this base class, seen
    through the base class: the plug-in object itself is never modified. Its hooks are the plug-in's
    own methods where it has them (the base no-ops otherwise); other attributes read through."""

    def __init__(self, plugin: Any, name: str):
        self.plugin = plugin
        self.name = getattr(plugin, "name", name)
        self.schedule = plugin.schedule
        for hook in SCHEDULER_HOOKS + ("describe", "engine_placer", "engine_gates"):
            fn = getattr(plugin, hook, None)
            if callable(fn):
                setattr(self, hook, fn)

    def bind(self, ctx: BindContext, cluster: Any = None) -> None:
        ctx = BindContext.coerce(ctx, cluster)
        super().bind(ctx)
        bind_policy(self.plugin, ctx)

    def __getattr__(self, name: str):
        if name == "plugin":
            raise AttributeError(name)
        return getattr(self.plugin, name)


def as_scheduler(obj: Any, name: str = "plugin") -> Scheduler:
    """``obj`` if it derives from `Scheduler`, else a `PluginScheduler` around it."""
    return obj if isinstance(obj, Scheduler) else PluginScheduler(obj, name)


def _is_override(obj: Any, name: str, base: type) -> bool:
    fn = getattr(obj, name, None)
    if fn is None or not callable(fn):
        return False
    inst = getattr(obj, "__dict__", None)
    if inst is not None and name in inst:
        return True                                   # set on the instance
    return getattr(type(obj), name, None) is not getattr(base, name, None)


@dataclass(frozen=True)
class Hooks:
    """The optional hooks of one plug-in, resolved once: each is a bound method or None."""

    on_submit: Any = None
    on_start: Any = None
    on_finish: Any = None
    on_interrupt: Any = None
    on_requeue: Any = None
    on_refused: Any = None
    on_units_down: Any = None
    on_units_up: Any = None
    next_wakeup: Any = None
    on_cancel: Any = None


def resolve_hooks(sched: Any) -> Hooks:
    """The optional hooks ``sched`` really implements (the `Scheduler` no-ops count as absent).
    ``on_interrupt`` falls back to ``on_finish`` (the base class's default) when not overridden."""
    found = {name: getattr(sched, name) if _is_override(sched, name, Scheduler) else None
             for name in SCHEDULER_HOOKS}
    if found["on_interrupt"] is None:
        found["on_interrupt"] = found["on_finish"]
    return Hooks(**found)


def _bind_arity(fn: Any) -> int:
    """Positional parameters ``fn`` requires (self excluded for bound methods)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):      # builtins, C extensions: assume the current signature
        return 1
    return sum(1 for p in sig.parameters.values()
               if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)


def bind_policy(obj: Any, ctx: BindContext) -> None:
    """Bind a policy or gate: ``bind(ctx)``, or ``bind(jobs, cluster)`` for plug-ins written against
    the older signature (detected once, from the signature). No ``bind`` at all is fine."""
    fn = getattr(obj, "bind", None)
    if fn is None:
        return
    if _bind_arity(fn) >= 2:
        fn(ctx.jobs, ctx.cluster)
    else:
        fn(ctx.for_policy(obj))


class ForwardsFailureHooks:
    """Mixin for wrappers (``self.inner`` is the wrapped policy): node-failure and refusal hooks go
    to the inner policy, ``on_interrupt`` falling back to its ``on_finish`` as the engine does."""

    inner: object

    def on_interrupt(self, now: float, job: int) -> None:
        fn = getattr(self.inner, "on_interrupt", None) or getattr(self.inner, "on_finish", None)
        if fn is not None:
            fn(now, job)

    def on_requeue(self, now: float, job: int) -> None:
        fn = getattr(self.inner, "on_requeue", None)
        if fn is not None:
            fn(now, job)

    def on_refused(self, now: float, job: int, reason: str) -> None:
        fn = getattr(self.inner, "on_refused", None)
        if fn is not None:
            fn(now, job, reason)

    def on_units_down(self, now: float, units, until: float) -> None:
        fn = getattr(self.inner, "on_units_down", None)
        if fn is not None:
            fn(now, units, until)

    def on_units_up(self, now: float, units) -> None:
        fn = getattr(self.inner, "on_units_up", None)
        if fn is not None:
            fn(now, units)

    def on_cancel(self, now: float, job: int) -> None:
        fn = getattr(self.inner, "on_cancel", None)
        if fn is not None:
            fn(now, job)

    def engine_placer(self):
        fn = getattr(self.inner, "engine_placer", None)
        return fn() if fn is not None else None

    def engine_gates(self) -> list:
        fn = getattr(self.inner, "engine_gates", None)
        return list(fn()) if fn is not None else []


# ====================================================================== physics models
@dataclass
class ModelContext:
    """What a model gets at bind time.

    ``n_nodes``: allocation units/nodes of the machine; ``jobs``: the schedulers' `JobTable` (its
    ``columns`` hold the workload's extra per-job arrays); ``runtime``: actual runtimes (s) from the
    log; ``system``: the `SystemSpec` or None; ``seed``: the run seed; ``options``: free-form run
    options; ``units_per_node``: allocation units a node (the GPUs of a node in GPU allocation; None:
    the model's own default, 1 unit a node); ``log_start``: the Unix time (s) of the log's time 0 (the
    header's ``UnixStartTime``) or None.
    """

    n_nodes: int
    jobs: Any
    runtime: np.ndarray
    system: Any = None
    seed: int = 0
    options: dict = field(default_factory=dict)
    units_per_node: int | None = None
    log_start: float | None = None

    def rng(self, name: str) -> np.random.Generator:
        """A Generator for the named random stream of this run."""
        return seeded_rng(self.seed, name)


class RunModel:
    """Base class of the physics models the engine steps (power, network, failures...). Every hook
    is optional; hooks left as these no-ops are never called.

    A model is told about every job start and finish in the engine's exact event order and may
    answer with *progress-rate factors* for running jobs (1.0 = full speed, 0.8 = the job's
    remaining work takes 25 % longer). The engine multiplies the factors of all models, recomputes
    each affected job's finish event exactly and tells every model through `on_rate_change`.
    A model with timed events of its own (failures, repairs) returns their time from `next_event`:
    the engine keeps it in its one timer heap, asking again after `bind` and after each `on_event`
    of that model (so a model's next event may only change in its own `on_event`), and, when the
    model sets ``events_follow_jobs = True``, also after each of its `start_delay`, `on_start` and
    `on_finish` (a model whose events are set by jobs: a node idle since a finish powers down later).
    A model may delay the start of a job's run after the job took its units (`start_delay`).
    """

    name = "model"
    #: True: the engine asks `next_event` again after this model's `start_delay`, `on_start` and
    #: `on_finish` (not only after its `on_event`)
    events_follow_jobs = False

    def bind(self, ctx: ModelContext) -> None:
        self.ctx = ctx

    def on_start(self, now: float, job: int, nodes: np.ndarray) -> dict[int, float] | None:
        return None

    def on_finish(self, now: float, job: int) -> dict[int, float] | None:
        return None

    def on_rate_change(self, now: float, job: int, rate: float) -> None:
        pass

    def start_delay(self, now: float, job: int, units: np.ndarray) -> float | None:
        """Seconds (>= 0) the run of ``job`` waits after it takes ``units`` at ``now``, or None (0).

        Asked for every start admitted by the gates, before it is applied. With a delay ``d`` (the
        largest any model answers) the job holds its units from ``now`` (the policy's ``on_start`` and
        the machine view see it running, with expected end ``now + d + estimate``) but its run begins
        at ``now + d``: its work, its wall-clock kill limit and the ledger's ``start`` (so ``wait``)
        count from there, as Slurm resets a job's start time when the nodes it was allocated have
        resumed from power saving (``job_config_fini`` in ``src/slurmctld/job_mgr.c``). Models are
        told of the start (``on_start``) at ``now``; rate factors given before ``now + d`` apply from
        then on. A job cannot be interrupted or released before its run begins."""
        return None

    def engine_work(self, runtime: np.ndarray) -> np.ndarray | None:
        """Engine work per job (nominal s) when it differs from the runtime (e.g. checkpoint
        writes added), or None. Asked once, after `bind`."""
        return None

    def next_event(self, now: float) -> float | None:
        """Time (s) of this model's next own event (a failure, a repair...), or None. The engine
        calls `on_event` at that time, after the finishes and before the submissions."""
        return None

    def on_event(self, now: float, control) -> dict[int, float] | None:
        """Handle every own event due at ``now``, acting through ``control``
        (`twin.simulation.EngineControl`); may return rate factors like `on_start`."""
        return None

    def finalize(self, end: float) -> None:
        pass

    def job_columns(self) -> dict[str, np.ndarray]:
        return {}

    def timeseries(self, grid: np.ndarray, dt: float) -> dict[str, tuple[np.ndarray, str]]:
        return {}

    def summary(self) -> dict:
        return {}


MODEL_HOOKS = ("on_start", "on_finish", "on_rate_change", "engine_work", "next_event", "on_event", "start_delay")


def model_hooks(model: Any) -> dict[str, Any]:
    """The engine hooks ``model`` really implements, resolved once (name -> bound method or None)."""
    return {name: getattr(model, name) if _is_override(model, name, RunModel) else None
            for name in MODEL_HOOKS}


# ====================================================================== gates
@dataclass(frozen=True)
class Refusal:
    """A gate's answer refusing a start. ``reason``: one line for the policy and the run summary.
    ``rest_of_pass``: also refuse every later start of the same pass (a policy's starts are ranked:
    a power cap refusing the queue head must not let jobs ranked after it take its power)."""

    reason: str
    rest_of_pass: bool = False


class Gate:
    """Base class of engine gates (Gate protocol). Consulted for every start a policy returns.

    Order within a pass: for each decision in the policy's order the engine checks it (waiting job,
    free units), chooses its units (the decision's own, else the placer's, else first-fit), then
    asks every gate in turn ``admit(now, job, units, view)``; the first `Refusal` wins. Admitted
    starts are applied at once (so the next decision sees them in ``view``, and the physics models
    have seen their ``on_start``). A refused job stays queued; the engine calls the policy's
    ``on_refused(now, job, reason)`` and counts the refusal per gate (``SimResult.refusals``).

    Hooks: ``bind(ctx)`` once (a `BindContext`: models views for projections, node groups...);
    ``begin_pass(now, view)`` before the first decision of each pass that has decisions;
    ``admit`` (required); ``on_start(now, job, units)`` after an admitted start is applied;
    ``on_finish(now, job)`` when a job leaves its units (finish, kill or interruption);
    ``next_wakeup(now)``: a time (> now) at which a refused job may be admitted without any other
    event (a cap that rises, a wait window that ends), or None. Hooks left as these no-ops cost
    nothing per event. Gates never mutate engine state.
    """

    name = "gate"
    needs_models: Sequence[str] | None = None

    def bind(self, ctx: BindContext) -> None:
        self.ctx = ctx

    def begin_pass(self, now: float, view: ClusterView) -> None:  # pragma: no cover - no-op
        pass

    def admit(self, now: float, job: int, units: np.ndarray, view: ClusterView) -> Refusal | None:
        raise NotImplementedError

    def on_start(self, now: float, job: int, units: np.ndarray) -> None:  # pragma: no cover
        pass

    def on_finish(self, now: float, job: int) -> None:  # pragma: no cover - default no-op
        pass

    def next_wakeup(self, now: float) -> float | None:
        return None

    def describe(self) -> dict:
        return {"name": self.name}


GATE_HOOKS = ("begin_pass", "on_start", "on_finish", "next_wakeup")


def gate_hooks(gate: Any) -> dict[str, Any]:
    """The optional hooks ``gate`` really implements, resolved once (name -> bound method or None)."""
    return {name: getattr(gate, name) if _is_override(gate, name, Gate) else None for name in GATE_HOOKS}
