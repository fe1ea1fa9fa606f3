"""GPU fragmentation of a GPU-granular run, computed post hoc from its per-job outputs.

Machine: ``total_gpus`` GPUs on nodes of ``G = gpus_per_node`` each, GPU unit ``u`` on node
``u // G`` (the engine's GPU mode, `topology.gpu_placement`). Input per job: submit, start, end
(s on the log's clock; start NaN = never started, end NaN = still running at the end), the GPU
units it held (arrays of unit ids, or the engine's compact range strings ``"0-3,8"``, see
`twin.ranges`), and its GPU count ``g``.

Definitions, at a time ``t`` (the state *after* every event at ``t``, as the engine records it: a
job ending at ``t`` has released its GPUs, a job starting at ``t`` holds them and is not waiting):

* ``free(t)``: free GPUs of the machine.
* waiting set ``W(t)``: jobs with ``submit <= t < start`` (never-started jobs wait from submit on).
* a free GPU of node ``n`` (``f_n`` GPUs free) is *usable* if some waiting job could use it under
  the packing rules: a job with ``g <= G`` needs ``g`` free GPUs on one node (``f_n >= g``); a job
  with ``g > G`` takes whole nodes (``f_n = G``). The remainder of a multi-node job
  (``g mod G`` GPUs on one more node) is not counted as a use: conservative, such GPUs count as
  fragmented. Usability is per node: it does not ask whether the job could get *all* its GPUs.
* ``fragmented(t)``: free GPUs that are not usable, i.e. free but unusable by every waiting job;
  0 when no job waits (nothing is being refused). This is the "GPUs free but unusable for the
  waiting jobs" measure of Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads
  with Fragmentation Gradient Descent", USENIX ATC 2023 (their F_n(m) with the waiting jobs as the
  target workload), at whole-GPU granularity.

Reduction (why two numbers describe ``W(t)``): node ``n`` is usable iff some waiting job has
``g <= min(G, f_n)`` or (``g > G`` and ``f_n = G``). The first holds iff ``g_min(t) <= f_n``
where ``g_min(t)`` is the smallest single-node request (``g <= G``) waiting; the second iff any
multi-node job waits (``multi(t)``). So usability depends only on a node's free count ``f``, and
``fragmented(t) = sum_f f * h_t(f) * [not (f >= g_min(t) or (multi(t) and f == G))]`` with
``h_t(f)`` the number of nodes with ``f`` free GPUs.

Computation (vectorised; memory O(events + T x G), never T x nodes): per (job, node) the GPUs held;
sorted per node by time (releases before starts at the same instant), a grouped cumulative sum gives
each node's free count after every event, hence the histogram changes ``h(f_before) -= 1,
h(f_after) += 1`` at the event's grid slot; a cumulative sum over the grid gives ``h_t``. ``g_min``
and ``multi`` come from per-size counts of waiting jobs (``searchsorted`` on sorted submit and
start times). A node whose free count would leave ``[0, G]`` (a GPU held twice) raises ValueError.

Time grid: the given ``times`` (sorted), or by default every distinct submit/start/end time (the
state is then piecewise constant between consecutive points and the averages are exact). An event
between two grid points counts from the next grid point on (sample at the grid time, state after
events at that time). Time averages are time-weighted over the grid intervals: the value at
``t_i`` holds on ``[t_i, t_{i+1})``, so ``mean = sum_i v_i (t_{i+1} - t_i) / (t_last - t_0)``; the
last point has no interval (weight 0); a one-point grid averages to its value.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .ranges import parse_ranges


@dataclass
class FragmentationSeries:
    """Fragmentation on a time grid. Arrays share the grid ``t`` (s).

    ``free``: free GPUs; ``fragmented``: free GPUs unusable by every waiting job (0 if none waits);
    ``waiting``: jobs waiting; ``free_hist``: (T, G+1) nodes with f free GPUs, f = 0..G.
    Time averages (time-weighted, see module doc): ``mean_free``, ``mean_fragmented`` (GPUs),
    ``fragmented_share_of_free`` (= mean_fragmented / mean_free, NaN if nothing is ever free),
    ``fragmented_share_of_machine`` (= mean_fragmented / total_gpus).
    """

    t: np.ndarray
    free: np.ndarray
    fragmented: np.ndarray
    waiting: np.ndarray
    free_hist: np.ndarray
    total_gpus: int
    gpus_per_node: int
    mean_free: float
    mean_fragmented: float
    fragmented_share_of_free: float
    fragmented_share_of_machine: float

    def summary(self) -> dict:
        """Scalars for a run's summary (GPUs, shares as fractions)."""
        return {"gpus": self.total_gpus, "gpus_per_node": self.gpus_per_node,
                "window_s": [float(self.t[0]), float(self.t[-1])] if len(self.t) else None,
                "mean_free_gpus": self.mean_free, "mean_fragmented_gpus": self.mean_fragmented,
                "fragmented_share_of_free": self.fragmented_share_of_free,
                "fragmented_share_of_machine": self.fragmented_share_of_machine,
                "convention": "fragmented = free GPUs no waiting job could use (g <= G: node with >= g "
                              "free; g > G: whole free node); 0 when nothing waits; time-weighted "
                              "over the grid intervals"}


def fragmented_gpus(free_per_node: Sequence[int] | np.ndarray, gpus_per_node: int,
                    waiting_sizes: Sequence[int] | np.ndarray) -> int:
    """Fragmented GPUs of one snapshot: the free GPUs (``free_per_node[n]`` on node n) that no job
    of ``waiting_sizes`` (GPU counts) could use under the packing rules; 0 if nothing waits."""
    f = np.asarray(free_per_node, dtype=np.int64)
    G = int(gpus_per_node)
    if G < 1:
        raise ValueError(f"gpus_per_node must be >= 1, got {gpus_per_node}")
    if f.size and (f.min() < 0 or f.max() > G):
        raise ValueError(f"free_per_node must lie in [0, {G}], got values {f.min()}..{f.max()}")
    w = np.asarray(waiting_sizes, dtype=np.int64)
    if w.size == 0:
        return 0
    if w.min() < 1:
        raise ValueError(f"waiting job sizes must be >= 1 GPU, got {w.min()}")
    single = w[w <= G]
    gmin = int(single.min()) if single.size else G + 1
    multi = bool((w > G).any())
    usable = (f >= gmin) | (multi & (f == G))
    return int(f[~usable].sum())


def _as_units(entry, j: int) -> np.ndarray:
    if entry is None:
        return np.empty(0, dtype=np.int64)
    if isinstance(entry, str):
        return parse_ranges(entry)
    if isinstance(entry, float) and np.isnan(entry):     # pandas reads an empty "nodes" cell as NaN
        return np.empty(0, dtype=np.int64)
    try:
        return np.asarray(entry, dtype=np.int64).ravel()
    except (TypeError, ValueError):
        raise ValueError(f"job index {j}: units must be unit ids or a range string, got {entry!r}") from None


def _time_average(t: np.ndarray, v: np.ndarray) -> float:
    if len(t) == 0:
        return float("nan")
    if len(t) == 1 or t[-1] == t[0]:
        return float(v[0])
    w = np.diff(t)
    return float((v[:-1] * w).sum() / (t[-1] - t[0]))


def fragmentation_series(submit, start, end, units: Sequence, gpus, gpus_per_node: int, total_gpus: int,
                         times: np.ndarray | None = None) -> FragmentationSeries:
    """Free and fragmented GPUs over time (definitions, computation and averaging: module doc).

    Parameters
    ----------
    submit, start, end: per-job times (s); start NaN = never started; end NaN = not finished.
    units: per job, the GPU unit ids it held (int array/list, or range string; None/"" if never run).
    gpus: per-job GPU counts (integers >= 1); a started job must list exactly that many units.
    gpus_per_node: G, must divide ``total_gpus``.
    total_gpus: GPUs of the machine.
    times: the grid (s, non-decreasing); default every distinct submit/start/end time.
    """
    submit, start, end, g, started, G, N, total = _checked_inputs(submit, start, end, units, gpus,
                                                                  gpus_per_node, total_gpus)
    t_ev, f_before, f_after = _node_events(start, end, units, g, started, G, N, total)
    grid = _grid(times, submit, start, end, started)
    hist = _free_histogram(grid, t_ev, f_before, f_after, G, N)
    fvals = np.arange(G + 1)
    free = hist @ fvals
    gmin, n_wait, multi = _waiting_set(grid, submit, start, started, g, G)
    usable = (fvals[None, :] >= gmin[:, None]) | (multi[:, None] & (fvals[None, :] == G))
    frag = (hist * fvals[None, :] * ~usable).sum(axis=1)
    frag[n_wait == 0] = 0

    mean_free = _time_average(grid, free.astype(np.float64))
    mean_frag = _time_average(grid, frag.astype(np.float64))
    return FragmentationSeries(
        t=grid, free=free, fragmented=frag, waiting=n_wait, free_hist=hist, total_gpus=total,
        gpus_per_node=G, mean_free=mean_free, mean_fragmented=mean_frag,
        fragmented_share_of_free=mean_frag / mean_free if mean_free > 0 else float("nan"),
        fragmented_share_of_machine=mean_frag / total)


def _checked_inputs(submit, start, end, units, gpus, gpus_per_node, total_gpus):
    """Per-job arrays as float64/int64, checked: ``(submit, start, end, g, started, G, N, total)``."""
    submit = np.asarray(submit, dtype=np.float64)
    start = np.asarray(start, dtype=np.float64)
    end = np.asarray(end, dtype=np.float64)
    G, total = int(gpus_per_node), int(total_gpus)
    if G < 1 or total < 1 or total % G:
        raise ValueError(f"gpus_per_node = {gpus_per_node} must be >= 1 and divide total_gpus = {total_gpus}")
    N = total // G
    n = len(submit)
    g_raw = np.asarray(gpus, dtype=np.float64)
    if not (len(start) == len(end) == len(g_raw) == len(units) == n):
        raise ValueError(f"per-job inputs differ in length: submit {n}, start {len(start)}, end {len(end)}, "
                         f"units {len(units)}, gpus {len(g_raw)}")
    bad = np.flatnonzero(~(g_raw >= 1) | (g_raw != np.round(g_raw)))
    if len(bad):
        raise ValueError(f"job index {int(bad[0])}: GPU count {g_raw[bad[0]]} is not an integer >= 1")
    g = g_raw.astype(np.int64)
    if not np.isfinite(submit).all():
        raise ValueError(f"job index {int(np.flatnonzero(~np.isfinite(submit))[0])}: submit time is not finite")
    started = np.isfinite(start)
    bad = np.flatnonzero(started & ~(start >= submit))
    if len(bad):
        raise ValueError(f"job index {int(bad[0])}: start {start[bad[0]]} before submit {submit[bad[0]]}")
    bad = np.flatnonzero(np.isfinite(end) & ~(end >= start))
    if len(bad):
        raise ValueError(f"job index {int(bad[0])}: end {end[bad[0]]} before start {start[bad[0]]} "
                         "(or an end without a start)")
    return submit, start, end, g, started, G, N, total


def _node_events(start, end, units, g, started, G: int, N: int, total: int):
    """Free-count changes per node, sorted by (node, time; releases before starts at one instant):
    ``(t_ev, f_before, f_after)``, the node's free GPUs before and after each event."""
    idx = np.flatnonzero(started)
    lists = [_as_units(units[j], int(j)) for j in idx.tolist()]
    lens = np.fromiter((len(u) for u in lists), dtype=np.int64, count=len(lists))
    wrong = np.flatnonzero(lens != g[idx])
    if len(wrong):
        j = int(idx[wrong[0]])
        raise ValueError(f"job index {j}: {int(lens[wrong[0]])} units listed for a request of {int(g[j])} GPUs")
    for j in np.flatnonzero(~started).tolist():
        if len(_as_units(units[j], j)):
            raise ValueError(f"job index {j}: units listed for a job that never started")
    allu = np.concatenate(lists) if lists else np.empty(0, dtype=np.int64)
    if len(allu) and (allu.min() < 0 or allu.max() >= total):
        raise ValueError(f"unit ids must lie in [0, {total}); got {int(allu.min())}..{int(allu.max())}")
    owner = np.repeat(idx, lens)
    key, cnt = np.unique(owner * N + allu // G, return_counts=True)
    ev_job, ev_node = key // N, key % N

    t_ev = np.concatenate((start[ev_job], end[ev_job]))
    d_ev = np.concatenate((-cnt, cnt))
    node_ev = np.concatenate((ev_node, ev_node))
    zero = end[ev_job] == start[ev_job]               # a zero-length job never holds GPUs after events
    keep = np.isfinite(t_ev) & ~np.concatenate((zero, zero))
    t_ev, d_ev, node_ev = t_ev[keep], d_ev[keep], node_ev[keep]
    order = np.lexsort((-d_ev, t_ev, node_ev))
    t_ev, d_ev, node_ev = t_ev[order], d_ev[order], node_ev[order]
    csum = np.cumsum(d_ev)
    first = np.ones(len(node_ev), dtype=bool)
    first[1:] = node_ev[1:] != node_ev[:-1]
    seg_start = np.maximum.accumulate(np.where(first, np.arange(len(node_ev)), 0)) if len(node_ev) else first
    base = csum[seg_start] - d_ev[seg_start]          # cumulative sum before each node's first event
    f_after = G + csum - base
    f_before = f_after - d_ev
    out = np.flatnonzero((f_after < 0) | (f_after > G))
    if len(out):
        k = int(out[0])
        raise ValueError(f"node {int(node_ev[k])} would have {int(f_after[k])} free GPUs of {G} at t = {t_ev[k]}: "
                         "a GPU is held by two jobs at once (overlapping units)")
    return t_ev, f_before, f_after


def _grid(times, submit, start, end, started) -> np.ndarray:
    """The sampling grid (s): ``times`` checked, or every distinct submit/start/end time."""
    if times is None:
        return np.unique(np.concatenate((submit, start[started], end[np.isfinite(end)])))
    grid = np.asarray(times, dtype=np.float64)
    if grid.ndim != 1 or len(grid) == 0 or not np.isfinite(grid).all() or np.any(np.diff(grid) < 0):
        raise ValueError("times must be a non-empty, finite, non-decreasing 1-D array (s)")
    return grid


def _free_histogram(grid, t_ev, f_before, f_after, G: int, N: int) -> np.ndarray:
    """``hist[t, f]``: nodes with exactly f free GPUs at grid point t (an event counts from the
    first grid point at or after it)."""
    T = len(grid)
    slot = np.searchsorted(grid, t_ev, side="left")
    inside = slot < T
    hist_d = np.zeros((T + 1, G + 1), dtype=np.int64)
    np.add.at(hist_d, (slot[inside], f_before[inside]), -1)
    np.add.at(hist_d, (slot[inside], f_after[inside]), 1)
    hist = np.cumsum(hist_d[:T], axis=0)
    hist[:, G] += N                                    # every node starts with all G GPUs free
    return hist


def _waiting_set(grid, submit, start, started, g, G: int):
    """At each grid point: the smallest single-node request waiting (G+1 if none), how many jobs wait,
    and whether a multi-node job waits."""
    T = len(grid)
    wait_start = np.where(started, start, np.inf)
    gmin = np.full(T, G + 1, dtype=np.int64)
    n_wait = np.zeros(T, dtype=np.int64)
    multi = np.zeros(T, dtype=bool)
    sizes = np.minimum(g, G + 1)                       # class G+1 = every multi-node request
    for s in np.unique(sizes)[::-1].tolist():         # descending, so the smallest size wins last
        sel = sizes == s
        c = (np.searchsorted(np.sort(submit[sel]), grid, side="right")
             - np.searchsorted(np.sort(wait_start[sel]), grid, side="right"))
        n_wait += c
        if s > G:
            multi = c > 0
        else:
            gmin = np.where(c > 0, s, gmin)
    return gmin, n_wait, multi


def fragmentation_of_jobs(jobs, gpus_per_node: int, total_gpus: int, times: np.ndarray | None = None,
                          gpus_column: str = "procs") -> FragmentationSeries:
    """`fragmentation_series` from a run's jobs table (a ``jobs.csv`` DataFrame of a GPU-mode run:
    columns ``submit``, ``start``, ``end``, ``nodes`` (unit ranges) and ``gpus_column``)."""
    missing = [c for c in ("submit", "start", "end", "nodes", gpus_column) if c not in jobs.columns]
    if missing:
        raise ValueError(f"jobs table lacks column(s) {', '.join(missing)}")
    return fragmentation_series(jobs["submit"].to_numpy(), jobs["start"].to_numpy(), jobs["end"].to_numpy(),
                                list(jobs["nodes"]), jobs[gpus_column].to_numpy(), gpus_per_node, total_gpus,
                                times)
