"""`LLMScheduler`: wraps any scheduler with LLM-aware placement and a per-job topology constraint.

The wrapper lets the *inner* scheduler (any order x backfill, Slurm-like, third party) decide which
jobs start. It gives the engine its placer (`engine_placer`: `topology.llm_placement.LLMPlacer`,
seeded from the run config's stream ``"llm-placement"``), so every start the inner policy returns
without units is placed at the moment it is applied, and its gate (`engine_gates`:
`GroupLimitGate`), so the topology constraint is an engine-level refusal the policy is told of
(``on_refused``), not a dropped decision.

Topology constraint (like Slurm's ``--switches=N@maxwait``): a job with ``max_groups = N > 0``
(workload column ``max_groups``, else the wrapper's ``max_groups`` for training classes; the value
0 or ``"min"`` means "the fewest groups any placement of the job can span", `LLMPlacer.min_groups`,
so a job larger than a group is not held back for a limit it can never meet) whose
placement would span more than N groups (Dragonfly groups / fat-tree pods) is *deferred*: the gate
refuses its start in this pass and the job stays queued. The first deferral at time t0 opens its
extra-wait window; once ``now >= t0 + max_group_wait`` (column ``max_group_wait``, else the
wrapper's value, seconds) the constraint is relaxed and the job starts on the placer's fewest-groups
nodes. The gate asks the engine for a pass at every window's end (``next_wakeup``), so the
relaxation happens on time even when nothing else happens. Counters: ``deferred`` (refused starts),
``relaxed`` (jobs started after their window), ``met`` (constrained jobs started within their
limit).

Interaction with the inner policy: a deferred start leaves its nodes free, so later starts the
inner policy proposed in the same pass still fit; the inner policy is told of the refusal
(``on_refused(now, job, reason)``) when it implements the hook. With EASY, a deferred queue head may
be overtaken by backfilled jobs until its window ends: the price of waiting for a better placement,
as with Slurm's switch constraint.

Placement: the wrapper's own `LLMPlacer` by default. ``placement`` (the run's ``--placement``, given
by the run as the option's default) names another entry of `topology.placement.PLACEMENTS`
(``contiguous``, ``spread``, ``group-packed``...): that placer, seeded from the run's stream
``"placement"`` like the run's own, places the starts and the group limit still applies. ``first-fit``
(the run's default placement) and ``llm`` mean the wrapper's LLM placer; an unknown name is refused
with the known ones.

Usage: ``LLMScheduler(inner="easy", system="dgx-h100")`` or from the command line
``--scheduler schedulers.llm:LLMScheduler`` with scheduler options ``inner``, ``system``,
``max_groups``, ``max_group_wait``. The node -> group map comes from ``node_group``, else the run's
node groups (bind context), else the ``[network]`` table of ``system`` (`topology.presets.node_groups`).
"""
from __future__ import annotations

import numpy as np

from hpctwin.topology.llm_placement import LLMPlacer
from hpctwin.topology.placement import groups_spanned

from .base import BindContext, ClusterView, ForwardsFailureHooks, Gate, Refusal, Scheduler, bind_policy, resolve_hooks

TRAINING = ("llm_pretrain", "llm_finetune")


class LLMScheduler(ForwardsFailureHooks, Scheduler):
    """Wrap ``inner`` (a `Scheduler` or a registry name) with LLM-aware placement (see module doc).

    Parameters
    ----------
    inner: scheduler object or name for `schedulers.registry.make_scheduler` (default ``"easy"``).
    system: name or path of a system file whose ``[network]`` gives the node -> group map.
    node_group: explicit int array node -> group (overrides ``system``).
    max_groups: default limit for training jobs without a ``max_groups`` column value (None/<0: none;
        0 or "min": the fewest groups possible for the job).
    max_group_wait: default extra wait (s) before the limit is relaxed.
    placer: an `LLMPlacer` (default: a new one).
    placement: a `topology.placement.PLACEMENTS` name placing the starts instead (None, ``first-fit``,
        ``llm``: the LLM placer; see the module docstring).
    """

    def __init__(self, inner: Scheduler | str = "easy", system: str | None = None,
                 node_group: np.ndarray | None = None, max_groups: int | str | None = None,
                 max_group_wait: float = 3600.0, placer: LLMPlacer | None = None,
                 order: str | None = None, backfill: str | None = None, placement: str | None = None):
        if isinstance(inner, str):
            from .registry import make_scheduler  # noqa: PLC0415
            inner = make_scheduler(inner, order, backfill)
        self.inner = inner
        self._inner_hooks = resolve_hooks(inner)          # the inner policy's hooks, looked up once
        self.system = system
        self._node_group = None if node_group is None else np.asarray(node_group, dtype=np.int64)
        if max_groups == "min":
            max_groups = 0
        self.default_max_groups = -1 if max_groups is None else int(max_groups)
        self.default_wait = float(max_group_wait)
        if self.default_wait < 0:
            raise ValueError(f"max_group_wait must be >= 0 s, got {max_group_wait}")
        self.placement = None if placement in (None, "first-fit", "llm") else str(placement)
        if self.placement is not None:
            from hpctwin.topology.placement import PLACEMENTS  # noqa: PLC0415
            placer = PLACEMENTS.lookup(self.placement).load()()    # unknown: RunConfigError listing the names
        self.placer = placer or LLMPlacer()
        self.name = f"llm({getattr(inner, 'name', type(inner).__name__)})"

    def describe(self) -> dict:
        inner = self.inner.describe() if hasattr(self.inner, "describe") else {"name": self.inner.name}
        return {"name": self.name, "inner": inner, "system": self.system,
                "max_groups_default": self.default_max_groups, "max_group_wait_default_s": self.default_wait,
                "deferred_starts": self.deferred, "relaxed_jobs": self.relaxed, "constraint_met_jobs": self.met,
                **({"placement": self.placement} if self.placement is not None else {})}

    # ------------------------------------------------------------------ binding
    def _groups_for(self, total: int) -> np.ndarray | None:
        if self._node_group is not None:
            if len(self._node_group) != total:
                raise ValueError(f"LLMScheduler: node_group has {len(self._node_group)} entries for {total} nodes")
            return self._node_group
        if self.system is None:
            return None
        from hpctwin.topology.presets import node_groups  # noqa: PLC0415
        from hpctwin.twin.system import load_system  # noqa: PLC0415
        spec = load_system(self.system)
        if not spec.network:
            raise ValueError(f"LLMScheduler: system {self.system!r} has no [network] table")
        return node_groups(spec.network, total, source=f"system {self.system} [network]")

    def bind(self, ctx: BindContext, cluster: ClusterView | None = None) -> None:
        ctx = BindContext.coerce(ctx, cluster)
        super().bind(ctx)
        bind_policy(self.inner, ctx)
        total = ctx.total
        self.node_group = (self._groups_for(total) if self._node_group is not None or ctx.node_group is None
                           else np.asarray(ctx.node_group, dtype=np.int64))
        self.placer.bind(total, self.node_group, ctx.rng("llm-placement" if self.placement is None else "placement"),
                         ctx.jobs)
        jobs = ctx.jobs
        n = len(jobs)
        cols = jobs.columns or {}
        mg = cols.get("max_groups")
        wait = cols.get("max_group_wait")
        jc = cols.get("job_class")
        training = np.isin(np.asarray(jc, dtype=object), TRAINING) if jc is not None else np.zeros(n, bool)
        if mg is not None:
            mg = np.asarray(mg, dtype=np.int64)
            max_groups = np.where(mg >= 0, mg, np.where(training, self.default_max_groups, -1))
        else:
            max_groups = np.where(training, self.default_max_groups, -1).astype(np.int64)
        zero = np.flatnonzero(max_groups == 0)           # "the fewest possible" for the job
        fewest = self.placer.min_groups if hasattr(self.placer, "min_groups") else self._min_groups
        max_groups[zero] = [fewest(int(jobs.procs[j])) for j in zero]
        if wait is not None:
            w = np.asarray(wait, dtype=np.float64)
            max_wait = np.where(np.isfinite(w) & (w >= 0), w, self.default_wait)
        else:
            max_wait = np.full(n, self.default_wait)
        self.gate = GroupLimitGate(max_groups, max_wait, self.node_group)
        self.max_groups, self.max_wait = max_groups, max_wait

    def _min_groups(self, procs: int) -> int:
        """The fewest groups ``procs`` nodes can span (groups filled largest first), for placers without
        `LLMPlacer.min_groups`."""
        if self.node_group is None:
            return 1
        sizes = np.sort(np.bincount(self.node_group))[::-1]
        return int(np.searchsorted(np.cumsum(sizes), procs) + 1)

    def engine_placer(self) -> LLMPlacer:
        return self.placer

    def engine_gates(self) -> list:
        return [self.gate, *super().engine_gates()]

    # ------------------------------------------------------------------ hooks
    def on_submit(self, now: float, job: int) -> None:
        fn = self._inner_hooks.on_submit
        if fn is not None:
            fn(now, job)

    def on_start(self, now: float, job: int) -> None:
        fn = self._inner_hooks.on_start
        if fn is not None:
            fn(now, job)

    def on_finish(self, now: float, job: int) -> None:
        fn = self._inner_hooks.on_finish
        if fn is not None:
            fn(now, job)

    def next_wakeup(self, now: float) -> float | None:
        fn = self._inner_hooks.next_wakeup
        return fn(now) if fn is not None else None

    def schedule(self, now: float, queue: np.ndarray, cluster: ClusterView):
        """The inner policy's decisions; the engine places them (`engine_placer`) and the gate checks them."""
        return self.inner.schedule(now, queue, cluster)

    # counters kept by the gate
    deferred = property(lambda self: self.gate.deferred if hasattr(self, "gate") else 0)
    relaxed = property(lambda self: self.gate.relaxed if hasattr(self, "gate") else 0)
    met = property(lambda self: self.gate.met if hasattr(self, "gate") else 0)
    first_deferral = property(lambda self: self.gate.first_deferral if hasattr(self, "gate") else {})


class GroupLimitGate(Gate):
    """The LLM topology constraint as an engine gate (see the module docstring): refuses a start whose
    units span more groups than the job's limit, until the job's extra-wait window has passed."""

    name = "llm-group-limit"

    def __init__(self, max_groups: np.ndarray, max_wait: np.ndarray, node_group: np.ndarray | None):
        self.max_groups = max_groups
        self.max_wait = max_wait
        self.node_group = node_group
        self.deferred = 0
        self.relaxed = 0
        self.met = 0
        self.first_deferral: dict[int, float] = {}

    def admit(self, now: float, job: int, units: np.ndarray, view) -> Refusal | None:
        limit = int(self.max_groups[job])
        if limit <= 0 or self.node_group is None:
            return None
        spanned = groups_spanned(units, self.node_group)
        if spanned <= limit:
            self.met += 1
            return None
        t0 = self.first_deferral.setdefault(job, now)
        if now < t0 + self.max_wait[job]:
            self.deferred += 1
            return Refusal(f"placement spans {spanned} groups > limit {limit} until t={t0 + self.max_wait[job]}")
        self.relaxed += 1
        return None

    def on_start(self, now: float, job: int, units: np.ndarray) -> None:
        self.first_deferral.pop(job, None)

    def next_wakeup(self, now: float) -> float | None:
        nxt = None
        for j, t0 in self.first_deferral.items():
            t = t0 + self.max_wait[j]
            if t > now and (nxt is None or t < nxt):
                nxt = t
        return nxt


def make_llm_scheduler(**options) -> LLMScheduler:
    """The ``llm`` entry of the scheduler table: LLM-aware placement around EASY (``options``: the
    constructor's, ``order``/``backfill`` of the inner EASY among them)."""
    return LLMScheduler(inner="easy", **options)
