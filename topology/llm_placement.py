"""LLM-aware placement of training gangs (TP x PP x DP GPUs) on whole nodes.

`LLMPlacer` implements the `topology.placement.Placer` API (``bind`` once, then ``place(job, procs,
free_mask)`` returns ``procs`` sorted free node ids). It reads the job's shape from the workload
columns ``tp``, ``pp``, ``dp`` and ``gpus_per_node`` (`datasets.llm_synthetic` writes them; jobs
without a shape are placed as one replica of ``procs`` nodes).

Rank layout (the convention `topology.llm_iteration` costs): GPU rank ``r`` of a job is GPU
``r mod G`` of the job's ``r // G``-th node in sorted node order (G = GPUs per node), with ranks
ordered ``r = t + TP * (s + PP * d)`` for TP index t, pipeline stage s and DP replica d. So a TP
group is ``TP`` consecutive GPUs (inside one node when TP <= G, which `check_shape` enforces), a
DP replica (one pipeline) is ``TP x PP`` consecutive GPUs, i.e. ``R = ceil(TP x PP / G)``
consecutive nodes of the sorted list.

Policy, in order (groups = Dragonfly groups / fat-tree pods / leaves of the system's ``node_group``
map):

1. If one group has ``procs`` free nodes: the group with the fewest free nodes that fits (best fit,
   ties to the lowest group id), and inside it the shortest run of consecutive free node ids that
   holds the job (consecutive ids share a switch in every builder of `topology`), else the longest
   runs first (`topology.placement` ``contiguous``): PP stages land on nodes close together.
2. Otherwise the fewest groups such that every DP replica stays inside one group: groups are taken
   by descending number of whole replicas they can hold, the last one best-fit; inside each group
   ``k x R`` nodes, contiguous as in 1. Only DP traffic then crosses groups.
3. If the replicas cannot all be kept whole inside groups: the fewest groups at node granularity
   (most free nodes first, last best-fit), as ``group-packed``.

Without a group map the placer is ``contiguous``.

Topology constraint (``max_groups``): `LLMPlacer.groups_needed` says how many groups the placement
would span now; the placer itself never refuses a placement (``place`` must return nodes). Holding
a job back until its ``max_groups`` can be met, for at most ``max_group_wait`` seconds (Slurm's
``--switches=N@maxwait``), is the scheduler's job: `schedulers.llm.LLMScheduler` wraps any
scheduler, asks this placer for the nodes of every start the inner scheduler proposes, and drops
(defers) a start that would span more than ``max_groups`` groups until the job has been deferred for
``max_group_wait`` s; it then starts the job on the placer's (fewest-groups) nodes. A scheduler
written from scratch should do the same: call ``place`` on its working copy of the free mask,
check ``groups_spanned(nodes, placer.node_group)`` against the job's limit, and return
``Start(job, nodes)`` so the engine uses exactly the nodes checked.
"""
from __future__ import annotations

import math

import numpy as np

from hpctwin.topology.placement import Placer, _contiguous, fewest_buckets, groups_spanned


class ShapeError(ValueError):
    """A training shape that cannot be placed as documented (e.g. TP larger than a node)."""


def check_shape(tp: int, pp: int, dp: int, gpus_per_node: int, nodes: int | None = None) -> int:
    """Validate a TP x PP x DP shape; returns the nodes it needs (``ceil(tp*pp*dp / G)``)."""
    tp, pp, dp, g = int(tp), int(pp), int(dp), int(gpus_per_node)
    if min(tp, pp, dp, g) < 1:
        raise ShapeError(f"shape tp={tp} pp={pp} dp={dp} with {g} GPUs per node: all must be >= 1")
    if tp > g:
        raise ShapeError(f"TP = {tp} exceeds the {g} GPUs of one node (TP groups must stay inside a node)")
    need = math.ceil(tp * pp * dp / g)
    if nodes is not None and int(nodes) != need:
        raise ShapeError(f"shape tp={tp} x pp={pp} x dp={dp} = {tp * pp * dp} GPUs needs {need} nodes of "
                         f"{g} GPUs, but the job asks for {nodes}")
    return need


class LLMPlacer(Placer):
    """LLM-aware placer (see the module docstring). ``default_gpus_per_node`` is used when the
    workload has no ``gpus_per_node`` column."""

    name = "llm"

    def __init__(self, default_gpus_per_node: int = 8):
        self.default_gpus_per_node = int(default_gpus_per_node)

    def bind(self, n_nodes, node_group, rng, jobs=None) -> None:
        super().bind(n_nodes, node_group, rng, jobs)
        cols = getattr(jobs, "columns", None) or {}
        self._tp = cols.get("tp")
        self._pp = cols.get("pp")
        self._gpn = cols.get("gpus_per_node")

    # ------------------------------------------------------------------ shape
    def replica_nodes(self, job: int, procs: int) -> int:
        """Nodes of one DP replica (pipeline) of ``job``; ``procs`` for jobs without a shape or when
        the replicas do not tile the job's nodes exactly."""
        if self._tp is None or self._pp is None:
            return procs
        tp, pp = int(self._tp[job]), int(self._pp[job])
        if tp < 1 or pp < 1:
            return procs
        g = int(self._gpn[job]) if self._gpn is not None and self._gpn[job] > 0 else self.default_gpus_per_node
        if tp > g:
            raise ShapeError(f"job index {job}: TP = {tp} exceeds the {g} GPUs of one node")
        r = max(1, math.ceil(tp * pp / g))
        return r if procs % r == 0 else procs

    def groups_needed(self, job: int, procs: int, free_mask: np.ndarray) -> int:
        """Groups the placement of ``job`` would span now (1 without a group map)."""
        return groups_spanned(self.place(job, procs, free_mask), self.node_group)

    def min_groups(self, procs: int) -> int:
        """The fewest groups any placement of ``procs`` nodes can span (on an empty machine)."""
        if self.node_group is None:
            return 1
        sizes = np.sort(np.bincount(self.node_group))[::-1]
        return int(np.searchsorted(np.cumsum(sizes), procs) + 1)

    # ------------------------------------------------------------------ placement
    def _place(self, job, procs, free_mask):
        g = self.node_group
        if g is None:
            return _contiguous(procs, free_mask)
        free_ids = np.flatnonzero(free_mask)
        fg = g[free_ids]
        ng = int(g.max()) + 1
        cnt = np.bincount(fg, minlength=ng)
        fits = np.flatnonzero(cnt >= procs)
        if len(fits):                                           # 1. one group
            grp = int(fits[np.argmin(cnt[fits])])
            return self._in_group(grp, procs, free_mask)
        r = self.replica_nodes(job, procs)
        units = procs // r
        cap = cnt // r
        if r < procs and cap.sum() >= units:                   # 2. whole replicas per group
            take = fewest_buckets(cap, units) * r
        else:                                                   # 3. fewest groups, node granularity
            take = fewest_buckets(cnt, procs)
        parts = [self._in_group(int(grp), int(take[grp]), free_mask) for grp in np.flatnonzero(take)]
        return np.sort(np.concatenate(parts)).astype(np.int64)

    def _in_group(self, grp: int, n: int, free_mask: np.ndarray) -> np.ndarray:
        m = free_mask & (self.node_group == grp)
        return _contiguous(n, m)

    def describe(self) -> dict:
        return {"name": self.name}
