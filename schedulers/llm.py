"""`LLMScheduler`: wraps any scheduler with LLM-aware placement and a per-job topology constraint.

The wrapper lets the *inner* scheduler (any order x backfill, Slurm-like, third party) decide which
jobs start; it then places every proposed start with `topology.llm_placement.LLMPlacer` on a working
copy of the free mask and returns ``Start(job, nodes)`` records, so the engine uses exactly those
nodes.

Topology constraint (like Slurm's ``--switches=N@maxwait``): a job with ``max_groups = N > 0``
(workload column ``max_groups``, else the wrapper's ``max_groups`` for training classes; the value
0 or ``"min"`` means "the fewest groups any placement of the job can span", `LLMPlacer.min_groups`,
so a job larger than a group is not held back for a limit it can never meet) whose
placement would span more than N groups (Dragonfly groups / fat-tree pods) is *deferred*: its
start is dropped from this pass and the job stays queued. The first deferral at time t0 opens its
extra-wait window; once ``now >= t0 + max_group_wait`` (column ``max_group_wait``, else the
wrapper's value, seconds) the constraint is relaxed and the job starts on the placer's fewest-groups
nodes. The wrapper asks the engine for a pass at every window's end (``next_wakeup``), so the
relaxation happens on time even when nothing else happens. Counters: ``deferred`` (dropped starts),
``relaxed`` (jobs started after their window), ``met`` (constrained jobs started within their
limit).

Interaction with the inner policy: a deferred start leaves its nodes free, so later starts the
inner policy proposed in the same pass still fit; with EASY, a deferred queue head loses the
protection of its reservation in that pass (the inner policy believed it started) and may be
overtaken by backfilled jobs until its window ends: the price of waiting for a better placement,
as with Slurm's switch constraint.

Usage: ``LLMScheduler(inner="easy", system="dgx-h100")`` or from the command line
``--scheduler schedulers.llm:LLMScheduler`` with scheduler options ``inner``, ``system``,
``max_groups``, ``max_group_wait``. The node -> group map comes from ``node_group`` or from the
``[network]`` table of ``system`` (`topology.presets.node_groups`).
"""
from __future__ import annotations

import numpy as np

from hpctwin.topology.llm_placement import LLMPlacer
from hpctwin.topology.placement import groups_spanned

from .base import ClusterView, ForwardsFailureHooks, JobTable, Scheduler, Start

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
    """

    def __init__(self, inner: Scheduler | str = "easy", system: str | None = None,
                 node_group: np.ndarray | None = None, max_groups: int | str | None = None,
                 max_group_wait: float = 3600.0, placer: LLMPlacer | None = None,
                 order: str | None = None, backfill: str | None = None):
        if isinstance(inner, str):
            from .registry import make_scheduler  # noqa: PLC0415
            inner = make_scheduler(inner, order, backfill)
        self.inner = inner
        self.system = system
        self._node_group = None if node_group is None else np.asarray(node_group, dtype=np.int64)
        if max_groups == "min":
            max_groups = 0
        self.default_max_groups = -1 if max_groups is None else int(max_groups)
        self.default_wait = float(max_group_wait)
        if self.default_wait < 0:
            raise ValueError(f"max_group_wait must be >= 0 s, got {max_group_wait}")
        self.placer = placer or LLMPlacer()
        self.name = f"llm({getattr(inner, 'name', type(inner).__name__)})"
        self.deferred = 0
        self.relaxed = 0
        self.met = 0
        self.first_deferral: dict[int, float] = {}

    def describe(self) -> dict:
        inner = self.inner.describe() if hasattr(self.inner, "describe") else {"name": self.inner.name}
        return {"name": self.name, "inner": inner, "system": self.system,
                "max_groups_default": self.default_max_groups, "max_group_wait_default_s": self.default_wait,
                "deferred_starts": self.deferred, "relaxed_jobs": self.relaxed, "constraint_met_jobs": self.met}

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

    def bind(self, jobs: JobTable, cluster: ClusterView) -> None:
        super().bind(jobs, cluster)
        self.inner.bind(jobs, cluster)
        self.node_group = self._groups_for(cluster.total)
        from hpctwin.twin.model_api import seeded_rng  # noqa: PLC0415
        self.placer.bind(cluster.total, self.node_group, seeded_rng(0, "llm-placement"), jobs)
        n = len(jobs)
        cols = jobs.columns or {}
        mg = cols.get("max_groups")
        wait = cols.get("max_group_wait")
        jc = cols.get("job_class")
        training = np.isin(np.asarray(jc, dtype=object), TRAINING) if jc is not None else np.zeros(n, bool)
        if mg is not None:
            mg = np.asarray(mg, dtype=np.int64)
            self.max_groups = np.where(mg >= 0, mg, np.where(training, self.default_max_groups, -1))
        else:
            self.max_groups = np.where(training, self.default_max_groups, -1).astype(np.int64)
        zero = np.flatnonzero(self.max_groups == 0)           # "the fewest possible" for the job
        self.max_groups[zero] = [self.placer.min_groups(int(jobs.procs[j])) for j in zero]
        if wait is not None:
            w = np.asarray(wait, dtype=np.float64)
            self.max_wait = np.where(np.isfinite(w) & (w >= 0), w, self.default_wait)
        else:
            self.max_wait = np.full(n, self.default_wait)
        self.procs = jobs.procs

    # ------------------------------------------------------------------ hooks
    def on_submit(self, now: float, job: int) -> None:
        self.inner.on_submit(now, job)

    def on_start(self, now: float, job: int) -> None:
        self.first_deferral.pop(job, None)
        self.inner.on_start(now, job)

    def on_finish(self, now: float, job: int) -> None:
        self.inner.on_finish(now, job)

    def next_wakeup(self, now: float) -> float | None:
        nxt = self.inner.next_wakeup(now)
        for j, t0 in self.first_deferral.items():
            t = t0 + self.max_wait[j]
            if t > now and (nxt is None or t < nxt):
                nxt = t
        return nxt

    # ------------------------------------------------------------------ decisions
    def schedule(self, now: float, queue: np.ndarray, cluster: ClusterView):
        decisions = self.inner.schedule(now, queue, cluster)
        if not decisions:
            return []
        mask = cluster.free_mask.copy()
        out = []
        for d in decisions:
            if isinstance(d, Start):
                j, nodes = int(d.job), d.nodes
            else:
                j, nodes = int(d), None
            if nodes is None:
                nodes = self.placer.place(j, int(self.procs[j]), mask)
            limit = int(self.max_groups[j])
            if limit > 0 and self.node_group is not None:
                if groups_spanned(nodes, self.node_group) > limit:
                    t0 = self.first_deferral.setdefault(j, now)
                    if now < t0 + self.max_wait[j]:
                        self.deferred += 1
                        continue
                    self.relaxed += 1
                else:
                    self.met += 1
            mask[np.asarray(nodes, dtype=np.int64)] = False
            out.append(Start(j, np.asarray(nodes, dtype=np.int64)))
        return out
