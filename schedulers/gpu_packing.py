"""`GPUPackingScheduler`: GPU-granular allocation (several jobs per node) around any scheduler.

For the engine's GPU mode: the machine's units are GPUs (``unit = node * G + local_gpu``, ``G =
gpus_per_node`` on every node) and a job's ``procs`` is its GPU count. The *inner* scheduler (any
registry name or `Scheduler`) decides which jobs start, reasoning on GPU counts only (free GPUs,
running jobs' GPUs); the wrapper then packs every proposed start, in the inner policy's order, with
`topology.gpu_placement.GPUPacker` on a working copy of the free mask (so the starts of one pass
never share a GPU) and returns ``Start(job, units)`` records, which the engine uses as given.

A start that cannot be packed (enough GPUs free in total but not in the shape the rules require:
a job of ``g <= G`` GPUs on one node, a larger job on whole nodes plus one remainder node) is
dropped: the job stays queued and is proposed again at the next pass. That is the cost of GPU
fragmentation. Drops are counted (``unpackable_starts``, one per dropped start, and
``unpackable_jobs``, distinct jobs dropped at least once).

Two drop modes (``on_unpackable``):

* ``"skip"`` (default; as `schedulers.llm.LLMScheduler` defers a start): only the unpackable start
  is dropped; later starts of the same pass are still packed, on the GPUs the dropped job would
  have used. The inner policy believed the dropped job started, so with EASY a dropped queue head
  loses the protection of its reservation in that pass and may be overtaken by jobs the inner
  policy started or backfilled behind it (until a node frees up with enough GPUs in one place).
  Best for GPU occupancy; a large job can be overtaken repeatedly (no starvation bound beyond the
  end of the workload: an idle machine always packs it).
* ``"block"`` (as `schedulers.power_aware.PowerAwareScheduler`): the first unpackable start and
  every start after it in that pass are dropped, so no job starts ahead of a job the inner policy
  ranked before it in the same pass. With EASY, a queue head that fits by count but not by shape
  then stops the pass until finishes free a suitable node: the head is never overtaken *within a
  pass*, at the cost of idle GPUs. EASY's reservation itself stays count-based (the inner policy's
  shadow time assumes any ``g`` free GPUs will do), so it is a lower bound of the head's start.

Other inner policies: conservative backfilling detects refused starts (its profile disagrees with
the machine) and re-plans from scratch at the next pass; Slurm-like reservations are per node id and
meaningless in GPU mode (use a queue policy as inner). An inner ``Start`` with units of its own is
honoured when they are free in the working copy and the right count (else ValueError naming the
job); otherwise the packer chooses.

Liveness (no deadlock): a start is dropped only when some GPU is not free in the working mask (an
empty machine packs any ``g <= total`` GPUs on ``ceil(g / G)`` nodes): a job is running, or started
earlier in the same pass, or a node is out of service; its finish (or the node's return) is a
pending event, after which the job is proposed again. So the engine's deadlock check never fires
because of a drop (tested on random workloads with every policy and both modes).

Failures (failure injection): GPUs of a node out of service are not free in the engine's mask, so
the packer never uses them; ``on_interrupt`` and ``on_requeue`` are forwarded to the inner policy.

Usage: ``GPUPackingScheduler(inner="easy", policy="best-fit", gpus_per_node=8)``; by name
``--scheduler schedulers.gpu_packing:GPUPackingScheduler`` with scheduler options ``inner``,
``policy``, ``gpus_per_node``, ``on_unpackable``, ``order``, ``backfill``.
"""
from __future__ import annotations

import numpy as np

from hpctwin.topology.gpu_placement import GPUPacker, check_machine

from .base import BindContext, ClusterView, Scheduler, Start, bind_policy, resolve_hooks

DROP_MODES = ("skip", "block")


class GPUPackingScheduler(Scheduler):
    """Wrap ``inner`` with GPU-granular packing (see module doc).

    Parameters
    ----------
    inner: scheduler object or name for `schedulers.registry.make_scheduler` (default ``"easy"``).
    policy: node choice of `GPUPacker`: ``best-fit`` (default), ``first-fit``, ``worst-fit``.
    gpus_per_node: GPUs on every node (must divide the machine's units).
    node_group: node -> Dragonfly group / fat-tree pod (length = nodes), or None.
    on_unpackable: ``"skip"`` (default) or ``"block"``.
    order, backfill: overrides passed to `make_scheduler` when ``inner`` is a name.
    """

    #: skip placement calls known to fail (exact, see `schedule`); False only to test that claim
    size_cache = True
    #: it allocates GPU units itself: ``--allocation gpu`` does not wrap it again (`twin.allocation`)
    packs_gpus = True

    def __init__(self, inner: Scheduler | str = "easy", policy: str = "best-fit", gpus_per_node: int = 8,
                 node_group: np.ndarray | None = None, on_unpackable: str = "skip",
                 order: str | None = None, backfill: str | None = None):
        if on_unpackable not in DROP_MODES:
            raise ValueError(f"on_unpackable must be one of {', '.join(DROP_MODES)}, got {on_unpackable!r}")
        if int(gpus_per_node) < 1:
            raise ValueError(f"gpus_per_node must be >= 1, got {gpus_per_node}")
        if isinstance(inner, str):
            from .registry import make_scheduler  # noqa: PLC0415
            inner = make_scheduler(inner, order, backfill)
        self.inner = inner
        self._inner_hooks = resolve_hooks(inner)          # re-resolved at bind
        self.packer = GPUPacker(policy)
        self.gpus_per_node = int(gpus_per_node)
        self._node_group = None if node_group is None else np.asarray(node_group, dtype=np.int64)
        self.on_unpackable = on_unpackable
        self.name = f"gpu-pack({getattr(inner, 'name', type(inner).__name__)},{policy})"
        self.unpackable_starts = 0
        self._dropped_jobs: set[int] = set()
        self._fail_cache: tuple[int | None, float] = (None, np.inf)   # (cluster version, smallest refused size)

    @property
    def unpackable_jobs(self) -> int:
        """Distinct jobs dropped at least once."""
        return len(self._dropped_jobs)

    def describe(self) -> dict:
        inner = self.inner.describe() if hasattr(self.inner, "describe") else {"name": self.inner.name}
        return {"name": self.name, "inner": inner, "policy": self.packer.policy,
                "gpus_per_node": self.gpus_per_node, "on_unpackable": self.on_unpackable,
                "node_group": self._node_group is not None,
                "unpackable_starts": self.unpackable_starts, "unpackable_jobs": self.unpackable_jobs}

    # ------------------------------------------------------------------ binding
    def bind(self, ctx: BindContext, cluster: ClusterView | None = None) -> None:
        ctx = BindContext.coerce(ctx, cluster)
        super().bind(ctx)
        jobs, cluster = ctx.jobs, ctx.cluster
        n_nodes = check_machine(cluster.total, self.gpus_per_node, f"scheduler {self.name}")
        if self._node_group is not None and len(self._node_group) != n_nodes:
            raise ValueError(f"scheduler {self.name}: node_group has {len(self._node_group)} entries for "
                             f"{n_nodes} nodes ({cluster.total} GPUs / {self.gpus_per_node} per node)")
        self.packer.bind(cluster.total, self.gpus_per_node, self._node_group)
        self._fail_cache = (None, np.inf)
        self.procs = np.asarray(jobs.procs, dtype=np.int64)
        if len(self.procs) and self.procs.max() > cluster.total:
            j = int(np.argmax(self.procs))
            raise ValueError(f"scheduler {self.name}: job {int(jobs.job_id[j])} asks for {int(self.procs[j])} "
                             f"GPUs; the machine has {cluster.total}")
        bind_policy(self.inner, ctx)
        self._inner_hooks = resolve_hooks(self.inner)        # the inner policy's hooks, looked up once

    # ------------------------------------------------------------------ hooks
    # every hook is forwarded when the inner policy has it (a bare object may lack some)
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

    def on_interrupt(self, now: float, job: int) -> None:
        """A running job lost its units (failure injection): the inner policy's ``on_interrupt``,
        else its ``on_finish`` (the engine's default)."""
        fn = self._inner_hooks.on_interrupt
        if fn is not None:
            fn(now, job)

    def on_cancel(self, now: float, job: int) -> None:
        """A waiting job was withdrawn (`twin.control.EngineControl.cancel`): forwarded."""
        fn = self._inner_hooks.on_cancel
        if fn is not None:
            fn(now, job)

    def on_requeue(self, now: float, job: int) -> None:
        """A running job was put back in the queue (failure injection): forwarded to the inner
        policy when it has the hook; the wrapper itself keeps no per-job placement state (the
        engine frees the job's GPUs, and its next start is packed afresh)."""
        fn = self._inner_hooks.on_requeue
        if fn is not None:
            fn(now, job)

    def next_wakeup(self, now: float) -> float | None:
        fn = self._inner_hooks.next_wakeup
        return fn(now) if fn is not None else None

    # ------------------------------------------------------------------ decisions
    def schedule(self, now: float, queue: np.ndarray, cluster: ClusterView) -> list[Start]:
        decisions = self.inner.schedule(now, queue, cluster)
        if not decisions:
            return []
        mask = cluster.free_mask.copy()
        version = getattr(cluster, "version", None)
        # Packability is monotone in the size on a given mask (a job of g GPUs that cannot be packed
        # means no node has g free, or too few whole free nodes: every larger job fails too), and
        # the working mask only shrinks during a pass. So the smallest size refused so far in this
        # pass refuses every larger start without a placement call; and while the machine state is
        # unchanged (same ``cluster.version``), a size refused on the untouched mask stays refused.
        fail_at = self._fail_cache[1] if (version is not None and self._fail_cache[0] == version) else np.inf
        if not self.size_cache:
            fail_at, version = np.inf, None
        untouched = True
        out: list[Start] = []
        for d in decisions:
            if isinstance(d, Start):
                j, units = int(d.job), d.nodes
            else:
                j, units = int(d), None
            g = int(self.procs[j])
            if units is not None:
                units = np.unique(np.asarray(units, dtype=np.int64))
                if (len(units) != g or units[0] < 0 or units[-1] >= len(mask) or not mask[units].all()):
                    raise ValueError(f"scheduler {self.name}: inner policy {getattr(self.inner, 'name', '?')} "
                                     f"gave job index {j} ({g} GPUs) units {units[:16].tolist()} that are not "
                                     f"{g} free GPUs")
            else:
                units = None if g >= fail_at else self.packer.place(j, g, mask)
                if units is None:
                    if g < fail_at and self.size_cache:
                        fail_at = g
                        if untouched and version is not None:
                            self._fail_cache = (version, g)
                    self.unpackable_starts += 1
                    self._dropped_jobs.add(j)
                    if self.on_unpackable == "block":
                        break
                    continue
            mask[units] = False
            untouched = False
            out.append(Start(j, units))
        return out


def make_gpu_packing(**options) -> GPUPackingScheduler:
    """The ``gpu-pack`` entry of the scheduler table; bad options are one `UnknownSchedulerError` line."""
    from .registry import UnknownSchedulerError  # noqa: PLC0415
    try:
        return GPUPackingScheduler(**options)
    except TypeError as e:
        shown = {k: v for k, v in options.items() if k not in ("order", "backfill")}
        raise UnknownSchedulerError(f"scheduler 'gpu-pack': bad options {shown}: {e}") from None
