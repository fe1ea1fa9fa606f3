"""What-if: GPU packing policies on the Alibaba GPU 2023 trace, at GPU-milli granularity.

A standalone event-driven packing simulation (Kubernetes-style, not the node-level engine): pods of
the Alibaba ``openb`` trace (Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads
with Fragmentation Gradient Descent", USENIX ATC'23) arrive at their creation time, hold CPU
(milli-cores), memory (MiB) and GPUs (whole GPUs, or a share of one GPU in 1/1000) on one node of
the trace's real node list for ``deletion - scheduled`` seconds, and leave.

Policies choose the node (and, for a GPU-sharing pod, the GPU):

* ``first-fit``: the lowest node id that fits; lowest GPU ids.
* ``best-fit``: the node left with the least free GPU capacity (then least free CPU); for a shared
  pod the GPU with the least free share that fits.
* ``worst-fit``: the node left with the most free GPU capacity (then most CPU); the GPU with the
  most free share (spreads load).
* ``fgd``: fragmentation gradient descent (Weng et al. ATC'23): the (node, GPU) that least
  increases the node's expected fragmentation ``F_n(M) = sum_m p_m F_n(m)`` over the workload's
  typical pod types ``m`` with popularity ``p_m`` (the `TYPICAL_TYPES` most frequent (CPU, memory,
  GPUs, GPU share) combinations of the trace, renormalised). ``F_n(m)``: all free GPU capacity of
  node n if a pod of type m cannot run on n at all (CPU, memory, GPU model or GPU count); otherwise
  the free capacity of the GPUs that cannot serve m (free share below m's share, or not a whole free
  GPU for a whole-GPU type); 0 for a CPU-only type that fits.

Queue: pods that do not fit wait and are retried at every departure in arrival order (no
head-of-line blocking: pods of a type that did not fit are skipped for the rest of that pass);
a pod that has waited ``patience`` seconds (default 3,600 s; an assumption standing for a user or
controller giving up) leaves unplaced.

Metrics (printed beside the table):

* ``alloc_success``: share of GPU pods placed (within ``patience``);
* ``mean_wait_s`` / ``p95_wait_s``: wait of placed GPU pods;
* ``gpu_alloc_ratio``: time-average of allocated GPU capacity / total GPUs;
* ``frag_waiting_gpus``: time-average (over the whole replay, 0 while nothing waits) of the GPUs
  free but unusable by every waiting GPU pod (a free share on node n, GPU g is usable if some waiting
  pod fits node n's CPU, memory and model and could use GPU g: whole free GPU for whole-GPU pods,
  enough free share for shared pods);
* ``frag_expected_gpus``: time-average of the FGD metric ``sum_n F_n(M)`` (GPUs).

Two modes:

* ``replay`` (event-driven, with departures): at the trace's own pace the cluster is almost empty
  (the pods' GPU-seconds over 149 days fill 0.2 % of the 6,212 GPUs, and all 7,255 scheduled pods
  together ask for 5,485 GPUs, less than the cluster), so the replay draws a seeded Poisson stream
  of pods with replacement from the trace's scheduled pods (Pending pods never ran: no duration;
  excluded and counted), with durations ``deletion - scheduled`` capped at ``--max-duration``
  (default 1 day: a few service pods live for months and would otherwise pin GPUs for the whole
  run), at the rate offering ``--target-load`` x the GPUs (default 1.0) over ``--horizon-days``
  (default 2); the first ``--warmup`` s (default 12 h) are excluded from the metrics. To keep the
  event count moderate (short pods on 6,212 GPUs mean several arrivals a second), the replay runs
  on a seeded ``--node-fraction`` of the nodes (default 0.1). GPU model constraints (``gpu_spec``)
  are honoured. Pods that fit no node of the (sampled) empty cluster are excluded and counted
  (``excluded_pods``): they could never run and would only pad the waiting-pod metric.
* ``fill`` (the methodology of Weng et al. ATC'23, section 6): pods are drawn from the trace with
  replacement (seeded) and placed one after another with no departures until the arrived GPU
  demand reaches ``--fill`` x the cluster's GPUs (default 1.0); a pod that does not fit is not
  placed (``alloc_success`` = placed GPU demand / arrived GPU demand); the fragmentation metrics
  are read at the end (``frag_waiting_gpus`` against the pods that did not fit) and their
  trajectory vs arrived demand is plotted.

Usage: ``python -m hpctwin.experiments.gpu_fragmentation [--mode fill|replay|both] [--out DIR]``; writes
``results.csv``, ``results.md``, ``results.tex`` and ``fragmentation.png`` into ``--out`` (checked before
the trace is read, written atomically: it must not exist, be empty, or be a folder hpctwin wrote,
replaced only with ``--force``).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hpctwin.experiments import cli
from hpctwin.experiments.tables import staged_output, write_table_files

POLICIES = ("first-fit", "best-fit", "worst-fit", "fgd")
#: number of typical pod types FGD weighs (the most frequent combinations; assumption of ours,
#: Weng et al. use the workload's type distribution; 20 types cover most pods of the trace)
TYPICAL_TYPES = 20
FULL = 1000   # one GPU in milli


@dataclass
class PodSet:
    """Pods as arrays: ``arrival``, ``duration`` (s), ``cpu`` (milli), ``mem`` (MiB), ``k`` (GPUs),
    ``share`` (milli per GPU: 1000 whole, < 1000 shared, 0 CPU-only), ``spec`` (allowed models as
    a tuple of str, empty = any)."""

    arrival: np.ndarray
    duration: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray
    k: np.ndarray
    share: np.ndarray
    spec: list

    def __len__(self) -> int:
        return len(self.arrival)


@dataclass
class PackingState:
    """Free resources per node: ``cpu`` (milli), ``mem`` (MiB), ``gpu`` (N x Gmax milli; -1 where the
    node has no such GPU), ``model`` (str per node)."""

    cpu: np.ndarray
    mem: np.ndarray
    gpu: np.ndarray
    model: np.ndarray
    total_gpus: int = 0

    @classmethod
    def from_nodes(cls, cpu, mem, gpus, model) -> "PackingState":
        gpus = np.asarray(gpus, dtype=np.int64)
        gmax = max(1, int(gpus.max()) if len(gpus) else 1)
        g = np.where(np.arange(gmax)[None, :] < gpus[:, None], FULL, -1).astype(np.int64)
        return cls(np.asarray(cpu, np.int64).copy(), np.asarray(mem, np.int64).copy(), g,
                   np.asarray(model, dtype=object), int(gpus.sum()))


def _model_ok(state: PackingState, spec) -> np.ndarray:
    if not spec:
        return np.ones(len(state.cpu), dtype=bool)
    return np.isin(state.model, list(spec))


def fits(state: PackingState, cpu: int, mem: int, k: int, share: int, spec=()) -> np.ndarray:
    """Bool per node: a pod (cpu milli, mem MiB, k GPUs of ``share`` milli) fits there now."""
    ok = (state.cpu >= cpu) & (state.mem >= mem)
    if k > 0:
        ok &= _model_ok(state, spec)
        if share >= FULL:
            ok &= (state.gpu == FULL).sum(axis=1) >= k
        else:
            ok &= (state.gpu >= share).any(axis=1)
    return ok


def waiting_fragmentation(state: PackingState, waiting: list[tuple]) -> float:
    """GPUs free but unusable by every waiting GPU pod (see module docstring).

    ``waiting``: (cpu, mem, k, share, spec) of the waiting pods (CPU-only pods are ignored). Returns 0
    when no GPU pod waits.
    """
    free = np.where(state.gpu > 0, state.gpu, 0)
    gp = [w for w in waiting if w[2] > 0]
    if not gp:
        return 0.0
    usable = np.zeros(state.gpu.shape, dtype=bool)
    nfull = (state.gpu == FULL).sum(axis=1)
    for cpu, mem, k, share, spec in set((c, m, k, s, tuple(sp)) for c, m, k, s, sp in gp):
        node = (state.cpu >= cpu) & (state.mem >= mem) & _model_ok(state, spec)
        if share >= FULL:
            usable |= (node & (nfull >= k))[:, None] & (state.gpu == FULL)
        else:
            usable |= node[:, None] & (state.gpu >= share)
    return float(free[~usable].sum()) / FULL


def typical_types(pods: PodSet, n: int = TYPICAL_TYPES) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` most frequent (cpu, mem, k, share) pod types (array n x 4) and their popularity."""
    t = np.stack([pods.cpu, pods.mem, pods.k, pods.share], axis=1)
    uniq, counts = np.unique(t, axis=0, return_counts=True)
    order = np.argsort(-counts, kind="stable")[:n]
    return uniq[order], counts[order] / counts[order].sum()


def expected_fragmentation(cpu: np.ndarray, mem: np.ndarray, gpu: np.ndarray, types: np.ndarray,
                           probs: np.ndarray) -> np.ndarray:
    """FGD's ``F_n(M)`` (milli-GPUs) of each row (node state): ``cpu``/``mem`` (R,), ``gpu`` (R x G)."""
    free = np.where(gpu > 0, gpu, 0)                                   # (R, G)
    total = free.sum(axis=1)                                           # (R,)
    nfull = (gpu == FULL).sum(axis=1)
    tc, tm, tk, ts = (types[:, i][None, :] for i in range(4))         # (1, T)
    base_ok = (cpu[:, None] >= tc) & (mem[:, None] >= tm)              # (R, T)
    whole = ts >= FULL
    shared = (ts > 0) & (ts < FULL)
    fit = base_ok & np.where(whole, nfull[:, None] >= tk, True) & \
        np.where(shared, (free[:, :, None] >= ts[:, None, :]).any(axis=1), True)
    # fragment per type when it fits: free capacity of GPUs that cannot serve it
    partial = np.where((free > 0) & (free < FULL), free, 0).sum(axis=1)[:, None]           # whole types
    below = (free[:, :, None] * (free[:, :, None] < ts[:, None, :])).sum(axis=1)             # shared types
    frag_fit = np.where(whole, partial, np.where(shared, below, 0))
    f = np.where(fit, frag_fit, total[:, None])
    return (f * probs[None, :]).sum(axis=1)


@dataclass
class ReplayResult:
    policy: str
    start: np.ndarray
    placed: np.ndarray
    t: np.ndarray
    alloc_gpus: np.ndarray
    frag_wait: np.ndarray
    frag_exp: np.ndarray
    excluded: int = 0
    notes: list = field(default_factory=list)


def _choose(policy: str, state: PackingState, cand: np.ndarray, cpu: int, mem: int, k: int, share: int,
            types, probs, fcache: np.ndarray) -> tuple[int, np.ndarray]:
    """(node, GPU indices) for a pod among candidate nodes ``cand`` (non-empty)."""
    gpu = state.gpu
    if k == 0:
        if policy == "first-fit":
            return int(cand[0]), np.zeros(0, np.int64)
        if policy in ("best-fit", "worst-fit"):
            rem = state.cpu[cand] - cpu
            i = np.argmin(rem) if policy == "best-fit" else np.argmax(rem)
            return int(cand[i]), np.zeros(0, np.int64)
        after = expected_fragmentation(state.cpu[cand] - cpu, state.mem[cand] - mem, gpu[cand], types, probs)
        return int(cand[np.argmin(after - fcache[cand])]), np.zeros(0, np.int64)
    if share >= FULL:
        def whole(n):
            return np.flatnonzero(gpu[n] == FULL)[:k]
        if policy == "first-fit":
            return int(cand[0]), whole(int(cand[0]))
        if policy in ("best-fit", "worst-fit"):
            free = np.where(gpu[cand] > 0, gpu[cand], 0).sum(axis=1) - k * FULL
            key = np.lexsort((state.cpu[cand], free)) if policy == "best-fit" else np.lexsort((-state.cpu[cand], -free))
            n = int(cand[key[0]])
            return n, whole(n)
        g_after = gpu[cand].copy()
        for r, n in enumerate(cand):
            g_after[r, whole(int(n))] = 0
        after = expected_fragmentation(state.cpu[cand] - cpu, state.mem[cand] - mem, g_after, types, probs)
        n = int(cand[np.argmin(after - fcache[cand])])
        return n, whole(n)
    # shared GPU: candidates are (node, gpu) pairs with enough free share
    ok = gpu[cand] >= share                                            # (C, G)
    rows, cols = np.nonzero(ok)
    nodes = cand[rows]
    if policy == "first-fit":
        return int(nodes[0]), np.array([cols[0]])
    if policy in ("best-fit", "worst-fit"):
        fg = gpu[nodes, cols]
        tot = np.where(gpu[nodes] > 0, gpu[nodes], 0).sum(axis=1)
        key = np.lexsort((tot, fg)) if policy == "best-fit" else np.lexsort((-tot, -fg))
        return int(nodes[key[0]]), np.array([cols[key[0]]])
    g_after = gpu[nodes].copy()
    g_after[np.arange(len(nodes)), cols] -= share
    after = expected_fragmentation(state.cpu[nodes] - cpu, state.mem[nodes] - mem, g_after, types, probs)
    i = int(np.argmin(after - fcache[nodes]))
    return int(nodes[i]), np.array([cols[i]])


def replay(pods: PodSet, state: PackingState, policy: str, patience: float = 3600.0,
           types=None, probs=None, track_fragmentation: bool = True) -> ReplayResult:
    """Event-driven packing of ``pods`` (sorted by arrival) on ``state`` (modified) with ``policy``."""
    if policy not in POLICIES:
        raise ValueError(f"unknown packing policy {policy!r}; choose one of {', '.join(POLICIES)}")
    if types is None:
        types, probs = typical_types(pods)
    n = len(pods)
    start = np.full(n, np.nan)
    placed = np.zeros(n, dtype=bool)
    where: dict[int, tuple[int, np.ndarray]] = {}
    fcache = (expected_fragmentation(state.cpu, state.mem, state.gpu, types, probs)
              if policy == "fgd" or track_fragmentation else np.zeros(len(state.cpu)))
    # pods that fit no node of the initial state (e.g. more CPU than any node of a node sample) can
    # never run: they are excluded (counted in ``excluded``) rather than left waiting forever
    never = np.zeros(n, dtype=bool)
    seen: dict = {}
    for i in range(n):
        key = (int(pods.cpu[i]), int(pods.mem[i]), int(pods.k[i]), int(pods.share[i]), tuple(pods.spec[i]))
        if key not in seen:
            seen[key] = bool(fits(state, *key[:4], key[4]).any())
        never[i] = not seen[key]
    heap: list = []
    waiting: list[int] = []
    ts, alloc, fw, fe = [], [], [], []
    total_cap = state.gpu.clip(min=0).sum()
    ptr = 0
    inf = float("inf")

    def refresh(nd: int) -> None:
        if policy == "fgd" or track_fragmentation:
            fcache[nd] = expected_fragmentation(state.cpu[nd:nd + 1], state.mem[nd:nd + 1], state.gpu[nd:nd + 1],
                                                types, probs)[0]

    def try_place(i: int, now: float) -> bool:
        c, m, k, s = int(pods.cpu[i]), int(pods.mem[i]), int(pods.k[i]), int(pods.share[i])
        cand = np.flatnonzero(fits(state, c, m, k, s, pods.spec[i]))
        if not len(cand):
            return False
        nd, gs = _choose(policy, state, cand, c, m, k, s, types, probs, fcache)
        state.cpu[nd] -= c
        state.mem[nd] -= m
        if k:
            state.gpu[nd, gs] -= (FULL if s >= FULL else s)
        refresh(nd)
        where[i] = (nd, gs)
        start[i] = now
        placed[i] = True
        heapq.heappush(heap, (now + float(pods.duration[i]), i))
        return True

    while ptr < n or heap:
        t_arr = pods.arrival[ptr] if ptr < n else inf
        t_dep = heap[0][0] if heap else inf
        now = float(min(t_arr, t_dep))
        while heap and heap[0][0] <= now:
            _, i = heapq.heappop(heap)
            nd, gs = where.pop(i)
            state.cpu[nd] += int(pods.cpu[i])
            state.mem[nd] += int(pods.mem[i])
            if pods.k[i]:
                state.gpu[nd, gs] += (FULL if pods.share[i] >= FULL else int(pods.share[i]))
            refresh(nd)
        while ptr < n and pods.arrival[ptr] <= now:
            if not never[ptr]:
                waiting.append(ptr)
            ptr += 1
        still, failed_types = [], set()
        for i in waiting:
            if now > pods.arrival[i] + patience:
                continue                                       # gave up
            key = (int(pods.cpu[i]), int(pods.mem[i]), int(pods.k[i]), int(pods.share[i]), tuple(pods.spec[i]))
            if key in failed_types or not try_place(i, now):
                failed_types.add(key)
                still.append(i)
        waiting = still
        if track_fragmentation:
            ts.append(now)
            alloc.append((total_cap - state.gpu.clip(min=0).sum()) / FULL)
            fw.append(waiting_fragmentation(state, [(int(pods.cpu[i]), int(pods.mem[i]), int(pods.k[i]),
                                                     int(pods.share[i]), pods.spec[i]) for i in waiting]))
            fe.append(float(fcache.sum()) / FULL)
    return ReplayResult(policy, start, placed, np.asarray(ts), np.asarray(alloc), np.asarray(fw), np.asarray(fe),
                        excluded=int(never.sum()), notes=[f"{int(never.sum())} pods fit no node of the empty "
                                                          "cluster: excluded"])


@dataclass
class FillResult:
    policy: str
    arrived: np.ndarray          # arrived GPU demand after each pod (GPUs)
    allocated: np.ndarray        # allocated GPUs after each pod
    frag_exp: np.ndarray         # FGD metric after each pod (GPUs)
    frag_wait: float             # GPUs unusable by the pods that did not fit, at the end
    placed_demand: float
    arrived_demand: float


def fill(pods: PodSet, state: PackingState, policy: str, target: float = 1.0, seed: int = 0,
         types=None, probs=None) -> FillResult:
    """Weng et al.'s fill experiment: draw pods with replacement, place each once, no departures,
    until the arrived GPU demand reaches ``target`` x the cluster's GPUs (see module docstring)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown packing policy {policy!r}; choose one of {', '.join(POLICIES)}")
    if types is None:
        types, probs = typical_types(pods)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, 23])))
    fcache = expected_fragmentation(state.cpu, state.mem, state.gpu, types, probs)
    demand = pods.k * np.where(pods.share >= FULL, FULL, pods.share) / FULL
    arrived = placed = 0.0
    arr, alloc, fe = [], [], []
    failed: list[tuple] = []
    limit = target * state.total_gpus
    while arrived < limit:
        i = int(rng.integers(len(pods)))
        c, m, k, sh = int(pods.cpu[i]), int(pods.mem[i]), int(pods.k[i]), int(pods.share[i])
        arrived += demand[i]
        cand = np.flatnonzero(fits(state, c, m, k, sh, pods.spec[i]))
        if len(cand):
            nd, gs = _choose(policy, state, cand, c, m, k, sh, types, probs, fcache)
            state.cpu[nd] -= c
            state.mem[nd] -= m
            if k:
                state.gpu[nd, gs] -= (FULL if sh >= FULL else sh)
            fcache[nd] = expected_fragmentation(state.cpu[nd:nd + 1], state.mem[nd:nd + 1], state.gpu[nd:nd + 1],
                                                types, probs)[0]
            placed += demand[i]
        elif k:
            failed.append((c, m, k, sh, pods.spec[i]))
        arr.append(arrived)
        alloc.append(placed)
        fe.append(float(fcache.sum()) / FULL)
    return FillResult(policy, np.asarray(arr), np.asarray(alloc), np.asarray(fe),
                      waiting_fragmentation(state, failed), placed, arrived)


def resampled_stream(pods: PodSet, gpus: int, load: float, horizon: float = 7 * 86400.0,
                     max_duration: float = 86400.0, seed: int = 0) -> PodSet:
    """A Poisson stream of pods drawn with replacement from ``pods`` over [0, horizon) s, durations
    capped at ``max_duration`` s, at the rate that offers ``load`` x ``gpus`` GPUs on average
    (rate = load x gpus / E[GPUs x duration])."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, 29])))
    demand = pods.k * np.where(pods.share >= FULL, FULL, pods.share) / FULL
    dur = np.minimum(pods.duration, max_duration)
    mean_gs = float((demand * dur).mean())
    rate = load * gpus / mean_gs
    n = int(rng.poisson(rate * horizon))
    idx = rng.integers(len(pods), size=n)
    arr = np.sort(rng.uniform(0.0, horizon, size=n))
    return PodSet(arr, dur[idx], pods.cpu[idx], pods.mem[idx], pods.k[idx], pods.share[idx],
                  [pods.spec[i] for i in idx])


def time_average(t: np.ndarray, v: np.ndarray, window: tuple[float, float] | None = None) -> float:
    """Average of the piecewise-constant series ``v`` (value v[i] on [t[i], t[i+1])) over ``window``
    (default [t[0], t[-1]])."""
    if len(t) == 0:
        return 0.0
    t0, t1 = window if window is not None else (float(t[0]), float(t[-1]))
    if t1 <= t0:
        return float(v[np.searchsorted(t, t0, side="right") - 1]) if t0 >= t[0] else 0.0
    edges = np.clip(np.append(t, np.inf), t0, t1)
    dt = np.diff(edges)
    return float((v * dt).sum() / (t1 - t0))


def node_subset(state: PackingState, fraction: float, seed: int = 0) -> PackingState:
    """A seeded random ``fraction`` of the nodes (at least one), in their original order."""
    n = len(state.cpu)
    k = max(1, int(round(fraction * n)))
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, 31])))
    idx = np.sort(rng.choice(n, size=k, replace=False))
    return PackingState(state.cpu[idx].copy(), state.mem[idx].copy(), state.gpu[idx].copy(), state.model[idx],
                        int(state.gpu[idx].clip(min=0).sum() // FULL))


def load_trace(data_dir=None, arrival_scale: float = 1.0) -> tuple[PodSet, PackingState, dict]:
    """Pods (scheduled ones) and the node list of the Alibaba 2023 trace."""
    from hpctwin.datasets.gpu_traces import read_alibaba_gpu2023, read_alibaba_gpu2023_nodes  # noqa: PLC0415
    wl = read_alibaba_gpu2023(data_dir=data_dir)
    nodes = read_alibaba_gpu2023_nodes(data_dir=data_dir)
    c = wl.columns
    ran = np.isfinite(wl.runtime)
    order = np.flatnonzero(ran)[np.argsort(wl.submit[ran], kind="stable")]
    pods = PodSet(arrival=wl.submit[order] / float(arrival_scale), duration=wl.runtime[order],
                  cpu=c["cpu_milli"][order], mem=c["memory_mib"][order], k=c["num_gpu"][order],
                  share=np.where(c["num_gpu"][order] > 0, c["gpu_milli"][order], 0),
                  spec=[tuple(s.split("|")) if s else () for s in c["gpu_spec"][order]])
    state = PackingState.from_nodes(nodes.cpu_milli, nodes.memory_mib, nodes.gpus, nodes.model)
    info = {"pods_in_trace": len(wl), "pods_replayed": len(pods), "pending_excluded": int((~ran).sum()),
            "nodes": len(nodes), "gpus": nodes.total_gpus, "source": wl.source}
    return pods, state, info


def _fresh(state0: PackingState) -> PackingState:
    return PackingState(state0.cpu.copy(), state0.mem.copy(), state0.gpu.copy(), state0.model, state0.total_gpus)


def _never_mask(pods: PodSet, state: PackingState) -> np.ndarray:
    """Pods that fit no node of ``state``."""
    seen: dict = {}
    out = np.zeros(len(pods), dtype=bool)
    for i in range(len(pods)):
        key = (int(pods.cpu[i]), int(pods.mem[i]), int(pods.k[i]), int(pods.share[i]), tuple(pods.spec[i]))
        if key not in seen:
            seen[key] = not bool(fits(state, *key[:4], key[4]).any())
        out[i] = seen[key]
    return out


def run_replay(pods: PodSet, state0: PackingState, info: dict, load: float, patience: float = 3600.0,
               policies=POLICIES, warmup: float = 86400.0, types=None, probs=None) -> tuple[pd.DataFrame, dict]:
    """Event-driven replay of the stream ``pods`` under each policy; metrics over [warmup, last arrival]."""
    if types is None:
        types, probs = typical_types(pods)
    rows, series = [], {}
    gpu_pod = pods.k > 0
    for pol in policies:
        r = replay(pods, _fresh(state0), pol, patience, types, probs)
        win = (float(warmup), float(pods.arrival.max()))
        meas = gpu_pod & (pods.arrival >= warmup) & ~_never_mask(pods, state0)
        wait = (r.start - pods.arrival)[r.placed & meas]
        rows.append({"mode": "replay", "policy": pol, "offered_load": load, "gpu_pods": int(meas.sum()),
                     "excluded_pods": r.excluded,
                     "alloc_success": float(r.placed[meas].mean()),
                     "mean_wait_s": float(wait.mean()) if len(wait) else np.nan,
                     "p95_wait_s": float(np.percentile(wait, 95)) if len(wait) else np.nan,
                     "gpu_alloc_ratio": time_average(r.t, r.alloc_gpus, win) / info["gpus"],
                     "frag_waiting_gpus": time_average(r.t, r.frag_wait, win),
                     "frag_expected_gpus": time_average(r.t, r.frag_exp, win)})
        series[pol] = r
    return pd.DataFrame(rows), series


def run_fill(pods: PodSet, state0: PackingState, info: dict, target: float = 1.0, seed: int = 0,
             policies=POLICIES) -> tuple[pd.DataFrame, dict]:
    """Weng et al.'s fill experiment under each policy (same seeded pod sequence for all)."""
    types, probs = typical_types(pods)
    rows, series = [], {}
    for pol in policies:
        r = fill(pods, _fresh(state0), pol, target, seed, types, probs)
        rows.append({"mode": "fill", "policy": pol, "offered_load": target, "gpu_pods": int(len(r.arrived)),
                     "excluded_pods": 0,
                     "alloc_success": r.placed_demand / r.arrived_demand, "mean_wait_s": np.nan,
                     "p95_wait_s": np.nan, "gpu_alloc_ratio": r.placed_demand / info["gpus"],
                     "frag_waiting_gpus": r.frag_wait, "frag_expected_gpus": float(r.frag_exp[-1])})
        series[pol] = r
    return pd.DataFrame(rows), series


def plot(fill_series: dict, replay_series: dict, gpus: int, path: Path, title: str) -> None:
    from hpctwin.twin.plot import figure, save_png  # noqa: PLC0415
    panels = [p for p in (fill_series, replay_series) if p]
    fig, axes = figure(len(panels), 1, height_in=2.2 * len(panels) + 0.3)
    k = 0
    if fill_series:
        ax = axes[k][0]
        k += 1
        for pol, r in fill_series.items():
            ax.plot(100 * r.arrived / gpus, r.frag_exp, label=pol, lw=1)
        ax.set_xlabel("arrived GPU demand (% of cluster GPUs)")
        ax.set_ylabel("expected fragmentation\n(GPUs, FGD metric)")
        ax.set_title(f"{title}: fill (Weng et al. ATC'23 method)")
        ax.legend()
    if replay_series:
        ax = axes[k][0]
        for pol, r in replay_series.items():
            ax.step(r.t / 3600, r.frag_wait, where="post", label=pol, lw=0.8)
        ax.set_xlabel("time (h)")
        ax.set_ylabel("free GPUs unusable\nby waiting pods (GPUs)")
        ax.set_title(f"{title}: event-driven replay" if not fill_series else "event-driven replay")
        ax.legend()
    fig.align_ylabels()
    save_png(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = cli.parser("gpu_fragmentation", __doc__)
    ap.add_argument("--mode", choices=("fill", "replay", "both"), default="both",
                    help="fill: Weng et al.'s fill experiment; replay: event-driven replay with departures")
    ap.add_argument("--fill", type=float, default=1.0, help="fill mode: arrived GPU demand / cluster GPUs")
    ap.add_argument("--target-load", type=float, default=1.0, help="replay mode: offered GPU load")
    ap.add_argument("--horizon-days", type=float, default=2.0, help="replay mode: length of the arrival stream (days)")
    ap.add_argument("--node-fraction", type=float, default=0.1, help="replay mode: share of the nodes simulated")
    ap.add_argument("--max-duration", type=float, default=86400.0, help="replay mode: cap on pod durations (s)")
    ap.add_argument("--warmup", type=float, default=43200.0, help="replay mode: s excluded from the metrics")
    ap.add_argument("--patience", type=float, default=3600.0, help="replay mode: s a pod waits before giving up")
    ap.add_argument("--policies", nargs="+", default=cli.Defaults(POLICIES), help="packing policies")
    cli.add_seed(ap, "seed of the pod draws and of the node sample")
    cli.add_data_dir(ap)
    cli.add_out(ap, "whatif-gpu-fragmentation")
    a = ap.parse_args(argv)
    with staged_output("python -m hpctwin.experiments.gpu_fragmentation", a.out, a.force) as out:
        df, text = _run_and_write(a, out)
    print(df.to_string(index=False))
    print(text)
    print(f"wrote {a.out}/results.csv, results.md, results.tex, fragmentation.png")
    return 0


def _run_and_write(a, out: Path) -> tuple[pd.DataFrame, str]:
    """The packing runs of ``a.mode``, then the table and the plot into the folder ``out``.
    Returns the results and the conventions' text."""
    pods, state0, info = load_trace(a.data_dir)
    coverage = float(typical_types(pods, 10**9)[1][:TYPICAL_TYPES].sum())
    frames, fser, rser = [], {}, {}
    conv = [f"Alibaba GPU 2023 (openb) trace: {info['pods_replayed']} scheduled pods of {info['pods_in_trace']} "
            f"({info['pending_excluded']} Pending pods never ran: excluded) on its {info['nodes']} nodes / "
            f"{info['gpus']} GPUs; GPU model constraints honoured; FGD weighs the {TYPICAL_TYPES} most frequent "
            f"pod types ({coverage:.0%} of pods)."]
    if a.mode in ("fill", "both"):
        df, fser = run_fill(pods, state0, info, a.fill, a.seed, a.policies)
        frames.append(df)
        conv.append(f"fill: pods drawn with replacement (seed {a.seed}) until arrived GPU demand = {a.fill:g} x "
                    "GPUs, no departures; allocation success = placed / arrived GPU demand; GPU allocation = placed "
                    "GPUs / GPUs; fragmentation at the end (free GPUs unusable by the pods that did not fit).")
    if a.mode in ("replay", "both"):
        sub = node_subset(state0, a.node_fraction, a.seed)
        sinfo = dict(info, nodes=len(sub.cpu), gpus=sub.total_gpus)
        stream = resampled_stream(pods, sub.total_gpus, a.target_load, a.horizon_days * 86400.0,
                                  a.max_duration, a.seed)
        types, probs = typical_types(pods)
        df, rser = run_replay(stream, sub, sinfo, a.target_load, a.patience, a.policies, a.warmup,
                              types, probs)
        frames.append(df)
        conv.append(f"replay: a seeded {a.node_fraction:g} sample of the nodes ({len(sub.cpu)} nodes, "
                    f"{sub.total_gpus} GPUs); a Poisson stream of {len(stream)} pods drawn with replacement from "
                    f"the trace (seed {a.seed}) over {a.horizon_days:g} days, durations = deletion - scheduled "
                    f"capped at {a.max_duration:g} s, offered GPU load {a.target_load:g}; pods give up after "
                    f"{a.patience:g} s; metrics over [{a.warmup:g} s, last arrival]: allocation success = share of GPU "
                    "pods placed, wait of placed GPU pods, time averages of GPU allocation = allocated GPU "
                    "capacity / GPUs, free GPUs unusable by every waiting GPU pod (0 when "
                    "none waits), expected fragmentation = FGD metric.")
    df = pd.concat(frames, ignore_index=True)
    text = " ".join(conv)
    write_table_files(df, out, "GPU packing policies on the Alibaba GPU 2023 (openb) trace. " + text,
                      label="tab:gpu-fragmentation", missing_note="{dash}: no waits in fill mode (pods never wait).")
    plot(fser, rser, info["gpus"], out / "fragmentation.png", "Alibaba GPU 2023 (openb)")
    return df, text


if __name__ == "__main__":
    raise SystemExit(main())
