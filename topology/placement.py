"""Placers: which free nodes a starting job gets (separate from *when* it starts).

Every placer is called once per job start with the machine's boolean ``free_mask`` and returns
``procs`` sorted int64 node ids, all free, or raises ValueError when fewer than ``procs`` nodes
are free. Each call is O(nodes) numpy work with a small constant (no Python loop over nodes).

Policies (`make_placer` names):

* ``first-fit``: the lowest free node ids.
* ``contiguous``: the shortest run of consecutive free node ids that holds the job (best fit; ties
  to the lowest id); when no run is long enough, the longest runs first (fewest fragments), each
  taken from its start, the last one best-fit.
* ``group-packed``: fewest topology groups (Dragonfly groups, fat-tree pods), then least
  fragmentation: if one group has room, the group with the fewest free nodes that fits (best fit);
  otherwise the groups with the most free nodes, taken whole, plus the best-fitting group for the
  remainder. Inside a group the lowest free ids. Without a group map it is ``contiguous``.
* ``spread``: a uniformly random set of free nodes (seeded from the run's random stream).
* ``recorded``: the node ids the replayed log recorded (``jobs.columns["recorded_nodes"]``, an
  object array of int arrays, `twin.workload.HostRequest` per-host requests, or None) when they
  are exactly ``procs`` free nodes; otherwise first-fit, counted in ``fallbacks`` (``warning()``
  says how many, and the run prints it).
"""
from __future__ import annotations

import numpy as np

from hpctwin.twin.ranges import compact_ranges as _compact_ranges
from hpctwin.twin.plugins import Entry, Table
from hpctwin.twin.ranges import parse_ranges as _parse_ranges

PLACERS = ("first-fit", "contiguous", "group-packed", "spread", "recorded")


class Placer:
    """Base class; subclasses implement `_place` (``free_mask`` already checked to hold enough)."""

    name = "base"

    def bind(self, n_nodes: int, node_group: np.ndarray | None, rng: np.random.Generator, jobs=None) -> None:
        """Called once before the run: machine size, host -> group map (or None), seeded RNG, JobTable."""
        self.n_nodes = int(n_nodes)
        if node_group is not None:
            node_group = np.asarray(node_group, dtype=np.int64)
            if len(node_group) != self.n_nodes:
                raise ValueError(f"placer {self.name}: node_group has {len(node_group)} entries for {n_nodes} nodes")
        self.node_group = node_group
        self.rng = rng
        self.jobs = jobs

    def place(self, job: int, procs: int, free_mask: np.ndarray) -> np.ndarray:
        """``procs`` sorted free node ids for ``job``; ValueError if fewer are free."""
        procs = int(procs)
        nfree = int(np.count_nonzero(free_mask))
        if procs < 1:
            raise ValueError(f"placer {self.name}: job {job} asks for {procs} nodes")
        if procs > nfree:
            raise ValueError(f"placer {self.name}: job {job} needs {procs} nodes but only {nfree} are free")
        return self._place(job, procs, free_mask)

    def _place(self, job: int, procs: int, free_mask: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def describe(self) -> dict:
        return {"name": self.name}


class FirstFit(Placer):
    name = "first-fit"

    def _place(self, job, procs, free_mask):
        return np.flatnonzero(free_mask)[:procs].astype(np.int64)


def free_runs(free_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and lengths of the runs of consecutive True entries of ``free_mask``."""
    m = np.concatenate(([False], np.asarray(free_mask, bool), [False]))
    d = np.diff(m.view(np.int8))
    starts = np.flatnonzero(d == 1)
    ends = np.flatnonzero(d == -1)
    return starts, ends - starts


class Contiguous(Placer):
    name = "contiguous"

    def _place(self, job, procs, free_mask):
        return _contiguous(procs, free_mask)


def fewest_buckets(cap: np.ndarray, need: int) -> np.ndarray:
    """How much to take from each bucket (a free run, a group) so that ``need`` units come from the
    fewest buckets: the largest buckets whole (descending capacity, ties by lower index), then the
    remainder from the smallest remaining bucket that holds it (best fit). Returns an int64 array
    of amounts per bucket; the caller ensures ``cap.sum() >= need``."""
    order = np.argsort(-cap, kind="stable")
    cum = np.cumsum(cap[order])
    k = int(np.searchsorted(cum, need))         # buckets order[:k] whole, then part of one more
    take = np.zeros(len(cap), dtype=np.int64)
    take[order[:k]] = cap[order[:k]]
    rest = need - (int(cum[k - 1]) if k else 0)
    if rest:
        cand = order[k:]
        cand = cand[cap[cand] >= rest]
        take[cand[np.argmin(cap[cand])]] = rest
    return take


def _contiguous(procs: int, free_mask: np.ndarray) -> np.ndarray:
    starts, lens = free_runs(free_mask)
    fit = np.flatnonzero(lens >= procs)
    if len(fit):
        best = fit[np.argmin(lens[fit])]  # argmin returns the first (lowest id) among ties
        s = starts[best]
        return np.arange(s, s + procs, dtype=np.int64)
    take_run = fewest_buckets(lens, procs)      # nodes to take from the start of each run
    free_ids = np.flatnonzero(free_mask)
    run = np.searchsorted(starts, free_ids, side="right") - 1
    return free_ids[(free_ids - starts[run]) < take_run[run]].astype(np.int64)


class GroupPacked(Placer):
    name = "group-packed"

    def _place(self, job, procs, free_mask):
        g = self.node_group
        if g is None:
            return _contiguous(procs, free_mask)
        free_ids = np.flatnonzero(free_mask)
        fg = g[free_ids]
        ng = int(g.max()) + 1 if len(g) else 0
        cnt = np.bincount(fg, minlength=ng)
        fits = np.flatnonzero(cnt >= procs)
        if len(fits):
            grp = fits[np.argmin(cnt[fits])]
            return free_ids[fg == grp][:procs].astype(np.int64)
        take = fewest_buckets(cnt, procs)       # whole groups, then the lowest free ids of one more
        full = (take == cnt) & (take > 0)
        sel = full[fg]
        for grp in np.flatnonzero((take > 0) & ~full).tolist():
            sel[np.flatnonzero(fg == grp)[:take[grp]]] = True
        return free_ids[sel].astype(np.int64)


class Spread(Placer):
    name = "spread"

    def _place(self, job, procs, free_mask):
        free_ids = np.flatnonzero(free_mask)
        return np.sort(self.rng.choice(free_ids, size=procs, replace=False)).astype(np.int64)


class Recorded(Placer):
    name = "recorded"

    def bind(self, n_nodes, node_group, rng, jobs=None):
        super().bind(n_nodes, node_group, rng, jobs)
        cols = getattr(jobs, "columns", None) or {}
        self.recorded = cols.get("recorded_nodes")
        self.fallbacks = 0
        self.used = 0

    def _place(self, job, procs, free_mask):
        rec = None if self.recorded is None else self.recorded[job]
        if hasattr(rec, "pick"):                 # twin.workload.HostRequest: hosts, not units
            ids = rec.pick(free_mask)
            if ids is not None and len(ids) == procs:
                self.used += 1
                return ids
            rec = None
        if rec is not None:
            ids = np.unique(np.asarray(rec, dtype=np.int64))
            if (len(ids) == procs and len(np.asarray(rec).ravel()) == procs and ids[0] >= 0
                    and ids[-1] < len(free_mask) and free_mask[ids].all()):
                self.used += 1
                return ids
        self.fallbacks += 1
        return np.flatnonzero(free_mask)[:procs].astype(np.int64)

    def describe(self) -> dict:
        return {"name": self.name, "recorded_used": getattr(self, "used", 0),
                "fallbacks": getattr(self, "fallbacks", 0)}

    def warning(self) -> str | None:
        """How many starts could use their recorded nodes (None when all could)."""
        used, fb = getattr(self, "used", 0), getattr(self, "fallbacks", 0)
        if not fb:
            return None
        have = 0 if self.recorded is None else int(sum(r is not None for r in self.recorded))
        return (f"placement recorded: {used} of {used + fb} starts used their recorded nodes ({have} jobs "
                "had a recorded placement); the others fell back to first-fit")


#: the placement table (`twin.plugins`): one entry a ``--placement`` name, factory = the placer class.
#: Tag ``engine_default``: the engine's own first fit (the run builds no placer and needs no group map).
PLACEMENTS = Table("placement")
for _cls in (FirstFit, Contiguous, GroupPacked, Spread, Recorded):
    PLACEMENTS.register(Entry(_cls.name, _cls, tags={"engine_default": _cls is FirstFit}))
PLACEMENTS.register(Entry("llm", "hpctwin.topology.llm_placement:LLMPlacer", doc="LLM-aware (topology.llm_placement)"))


def make_placer(name: str) -> Placer:
    """A new placer by name (an entry of `PLACEMENTS`: one of `PLACERS`, or ``llm`` for
    `topology.llm_placement.LLMPlacer`); ValueError for an unknown name."""
    entry = PLACEMENTS.get(name) if isinstance(name, str) else None
    if entry is None:
        raise ValueError(f"unknown placement {name!r}; choose one of {', '.join(PLACEMENTS.names())}")
    return entry.load()()


# compact node-range text is shared with the engine's jobs.csv writer
compact_ranges = _compact_ranges
parse_ranges = _parse_ranges


def groups_spanned(ids, node_group: np.ndarray | None) -> int:
    """Number of distinct groups among node ``ids`` (1 for a non-empty job without a group map)."""
    ids = np.asarray(ids, dtype=np.int64)
    if not len(ids):
        return 0
    if node_group is None:
        return 1
    return int(len(np.unique(np.asarray(node_group)[ids])))
