"""Iteration time of a 3-D-parallel (TP x PP x DP) training job from its shape and its placement.

One training iteration (one optimizer step over ``global_batch`` sequences) costs

* **compute** ``6 N T / (GPUs x peak x MFU)`` s (N parameters, T = global_batch x seq_len tokens;
  the 6NT rule of Kaplan et al. 2020 / Narayanan et al. SC'21, attention FLOPs neglected);
* **pipeline bubble** ``(PP - 1) / m x compute`` with ``m = global_batch / (DP x micro_batch)``
  micro-batches per replica (1F1B schedule, Narayanan et al. SC'21 eq. 1);
* **TP** 4 all-reduces per layer and micro-batch (2 forward, 2 backward; Megatron-LM) of the
  activations ``micro_batch x seq_len x hidden x 2`` bytes among the TP ranks of one node, costed
  with the collectives module's `AlphaBetaGamma` on its ``ring`` all-reduce schedule with the
  intra-node (NVLink / Infinity Fabric) latency and bandwidth; ``m x layers / PP`` times per step;
* **PP** point-to-point activations/gradients ``micro_batch x seq_len x hidden x 2 / TP`` bytes per
  stage boundary (scatter-gather over the TP ranks), ``2 (m + PP - 1)`` transfers on the critical
  path, each costed at the slowest boundary: intra-node if both stages share a node, else
  ``alpha + bytes / per-GPU network bandwidth``, or the global-link share when the boundary crosses
  groups (all replicas' transfers over that boundary share the global links);
* **DP** one all-reduce of the gradients ``params / (TP x PP) x grad_bytes`` bytes among the DP
  ranks of every (TP, PP) position, all ``TP x PP`` of them at once, costed step by step with
  `AlphaBetaGamma` (per-GPU network bandwidth) and `global_bytes_per_step` (bytes crossing group
  boundaries, summed over the concurrent all-reduces): a step takes the larger of its alpha-beta
  time and its global bytes divided by the global bandwidth the job's groups offer. ``dp_overlap``
  (default 0) is the share hidden behind the backward pass.

Rank layout: `topology.llm_placement` (TP fastest, then PP stage, then DP replica, over the job's
nodes in sorted order, ``gpus_per_node`` GPUs each).

Global bandwidth of a job: every node gets a fair share of its group's global (inter-group) links,
``B_node = B_up x f / H`` (``B_up`` one group's global link bandwidth per direction, ``H`` hosts per
group, ``f`` = 1/2 on a Dragonfly, where adaptive routing sends traffic non-minimally through an
intermediate group, two global hops, and 1 on a fat-tree), so a job of n nodes has ``n x B_node``
for its inter-group traffic whatever the number of groups it spans. This is the busy-machine view
(other jobs use the rest of the global links; an assumption): spreading a job does not buy it more
global bandwidth, it only makes more of its traffic global. Within a group the network is assumed
non-blocking. Constants of the devices (`GPU_SPECS`) carry their sources.

`ideal_nodes` is the reference placement: the first ``n`` nodes of an empty machine (the fewest
groups, contiguous). `LLMIterationModel` (a `twin.model_api.RunModel`) computes, at every start of
a training job, the stretch ``T(actual) / T(ideal)`` and returns the progress rate
``min(1, T(ideal) / T(actual))``, so the engine stretches the job's runtime: the log's runtime is
taken to be the runtime at the ideal placement (assumption).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from hpctwin.topology.collectives import AlphaBetaGamma, build_schedule, global_bytes_per_step

try:
    from hpctwin.twin.model_api import RunModel
except ImportError:  # pragma: no cover
    RunModel = object  # type: ignore[misc,assignment]


@dataclass(frozen=True)
class GPUSpec:
    """A GPU: ``peak_flops`` (dense BF16 FLOP/s), ``mfu`` (model FLOPs utilisation reached by
    well-tuned training), ``intra_bw`` (bytes/s per direction between two GPUs of one node),
    ``intra_alpha`` (s per intra-node message)."""

    name: str
    peak_flops: float
    mfu: float
    intra_bw: float
    intra_alpha: float


GPU_SPECS: dict[str, GPUSpec] = {
    # NVIDIA H100 SXM5 datasheet: 989 TFLOP/s dense BF16; NVLink 4: 900 GB/s total (450 GB/s per
    # direction). MFU 0.40: Llama 3 pre-training reached 38-43 % BF16 MFU on H100 (Dubey et al.
    # 2024, Table 4). Intra-node alpha 3 us: assumption (NCCL NVLink latency is a few us).
    "H100": GPUSpec("H100", 989e12, 0.40, 450e9, 3e-6),
    # AMD Instinct MI250X datasheet: 383 TFLOP/s peak BF16 per module (2 GCDs); GCD-GCD Infinity
    # Fabric links across modules 50 GB/s per direction each (OLCF Frontier User Guide, node
    # diagram), 2 links between most module pairs -> 100 GB/s (assumption). MFU 0.30: assumption of
    # the order reported for LLM training on Frontier (Dash et al., "Optimizing Distributed Training
    # on Frontier for Large Language Models", ISC 2024, ~30 % of peak). alpha 5 us: assumption.
    "MI250X": GPUSpec("MI250X", 383e12, 0.30, 100e9, 5e-6),
}
#: GPU of each built-in system (system files name the devices in their header comments).
SYSTEM_GPU = {"dgx-h100": "H100", "frontier": "MI250X"}
#: per-message network latency of GPU collectives across nodes (s): assumption (NCCL/RCCL over
#: InfiniBand/Slingshot: a few microseconds end to end).
NET_ALPHA = 5e-6


@dataclass(frozen=True)
class NetworkCosts:
    """Network of a machine as the iteration model sees it.

    ``gpu_net_bw``: bytes/s per direction per GPU (node injection / GPUs per node);
    ``net_alpha``: s per message across nodes; ``group_uplink_bw``: bytes/s per direction of one
    group's global links; ``global_factor``: share of it usable (1/2 Dragonfly, 1 fat-tree);
    ``hosts_per_group``; ``gpus_per_node``; ``gpu``: the `GPUSpec`.
    """

    gpu_net_bw: float
    net_alpha: float
    group_uplink_bw: float
    global_factor: float
    hosts_per_group: int
    gpus_per_node: int
    gpu: GPUSpec

    @property
    def node_global_bw(self) -> float:
        """A node's fair share of its group's global bandwidth (bytes/s per direction)."""
        return self.group_uplink_bw * self.global_factor / self.hosts_per_group

    def global_bw(self, nodes: int) -> float:
        """Global bandwidth (bytes/s) available to a job of ``nodes`` nodes (busy-machine share)."""
        return nodes * self.node_global_bw


def network_costs(network_table: dict, nodes: int, gpus_per_node: int, gpu: str | GPUSpec = "H100") -> NetworkCosts:
    """`NetworkCosts` of a system's ``[network]`` table (presets of `topology.presets`)."""
    from hpctwin.topology.presets import network_params  # noqa: PLC0415
    p = network_params(network_table, nodes)
    kind = p["kind"]
    spec = gpu if isinstance(gpu, GPUSpec) else GPU_SPECS[gpu]
    term = float(p.get("terminal_bandwidth", p.get("bandwidth", 0.0)))
    if kind == "dragonfly":
        uplink = (p["g"] - 1) * p.get("links_per_pair", 1) * p["global_bandwidth"]
        factor, hosts = 0.5, p["a"] * p["p"]
    elif kind == "dragonfly_plus":
        uplink = p["spines"] * p["global_per_spine"] * p["global_bandwidth"]
        factor, hosts = 0.5, p["leaves"] * p["hosts_per_leaf"]
    elif kind == "fat_tree":
        half = p["k"] // 2
        uplink = half * half * p["global_bandwidth"]       # k/2 aggregation switches x k/2 core uplinks
        factor, hosts = 1.0, (p.get("hosts_per_edge") or half) * half
    elif kind == "leaf_spine":
        uplink = p["spines"] * p["global_bandwidth"]
        factor, hosts = 1.0, p.get("hosts_per_leaf", 32)
    else:
        raise NotImplementedError(f"iteration model: no global-bandwidth rule for a {kind} network "
                                  "(torus groups are not modelled)")
    return NetworkCosts(term / gpus_per_node, NET_ALPHA, float(uplink), factor, int(hosts), int(gpus_per_node), spec)


@dataclass(frozen=True)
class LLMShape:
    """A training job: parallel degrees, model (``params``, ``hidden``, ``layers``), batch
    (``global_batch`` sequences of ``seq_len`` tokens per iteration, ``micro_batch`` per micro-batch),
    ``grad_bytes`` per gradient element, ``dp_overlap`` share of DP time hidden."""

    tp: int
    pp: int
    dp: int
    params: float
    hidden: int
    layers: int
    seq_len: int = 4096
    global_batch: int = 1024
    micro_batch: int = 1
    grad_bytes: int = 2
    dp_overlap: float = 0.0

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def microbatches(self) -> float:
        return max(1.0, self.global_batch / (self.dp * self.micro_batch))


@dataclass
class IterationBreakdown:
    """Seconds per iteration: compute, bubble, tp, pp, dp (exposed part), total; ``groups``."""

    compute: float
    bubble: float
    tp: float
    pp: float
    dp: float
    groups: int
    total: float = field(init=False)

    def __post_init__(self):
        self.total = self.compute + self.bubble + self.tp + self.pp + self.dp


@lru_cache(maxsize=256)
def _schedule(p: int):
    return build_schedule("allreduce", "ring", p)


def gpu_nodes(nodes: np.ndarray, shape: LLMShape, gpus_per_node: int) -> np.ndarray:
    """Node id of every rank (layout of `topology.llm_placement`), indexed [dp, pp, tp]."""
    nodes = np.sort(np.asarray(nodes, dtype=np.int64))
    need = math.ceil(shape.gpus / gpus_per_node)
    if len(nodes) != need:
        raise ValueError(f"shape {shape.tp}x{shape.pp}x{shape.dp} needs {need} nodes of {gpus_per_node} GPUs, "
                         f"got {len(nodes)}")
    if shape.tp > gpus_per_node:
        raise ValueError(f"TP = {shape.tp} exceeds the {gpus_per_node} GPUs of a node")
    r = np.arange(shape.gpus, dtype=np.int64)
    return nodes[r // gpus_per_node].reshape(shape.dp, shape.pp, shape.tp)


def iteration_time(shape: LLMShape, nodes: np.ndarray, node_group: np.ndarray | None,
                   costs: NetworkCosts) -> IterationBreakdown:
    """Seconds per iteration of ``shape`` on ``nodes`` (see the module docstring)."""
    g = costs.gpu
    G = costs.gpus_per_node
    rank_node = gpu_nodes(nodes, shape, G)
    rank_group = (np.asarray(node_group)[rank_node] if node_group is not None else np.zeros_like(rank_node))
    groups = int(len(np.unique(rank_group)))
    gbw = costs.global_bw(len(np.unique(rank_node)))
    m = shape.microbatches
    tokens = shape.global_batch * shape.seq_len
    compute = 6.0 * shape.params * tokens / (shape.gpus * g.peak_flops * g.mfu)
    bubble = (shape.pp - 1) / m * compute
    act = shape.micro_batch * shape.seq_len * shape.hidden * 2.0      # bytes (BF16)
    # --- TP: intra-node ring all-reduce
    t_tp = 0.0
    if shape.tp > 1:
        abg = AlphaBetaGamma(g.intra_alpha, 1.0 / g.intra_bw)
        t_tp = m * (shape.layers / shape.pp) * 4 * abg.time(_schedule(shape.tp), act)
    # --- PP: point-to-point between consecutive stages, slowest boundary
    t_pp = 0.0
    if shape.pp > 1:
        b = act / shape.tp
        worst = 0.0
        for s in range(shape.pp - 1):
            a_node, b_node = rank_node[:, s, :], rank_node[:, s + 1, :]
            a_grp, b_grp = rank_group[:, s, :], rank_group[:, s + 1, :]
            same_node = a_node == b_node
            if same_node.all():
                t = g.intra_alpha + b / g.intra_bw
            else:
                t = costs.net_alpha + b / costs.gpu_net_bw
                cross = int(np.count_nonzero(a_grp != b_grp))
                if cross:
                    t = max(t, costs.net_alpha + cross * b / gbw)
            worst = max(worst, t)
        t_pp = 2.0 * (m + shape.pp - 1) * worst
    # --- DP: gradient all-reduce of every (pp, tp) position at once
    t_dp = 0.0
    if shape.dp > 1:
        nbytes = shape.params / (shape.tp * shape.pp) * shape.grad_bytes
        sched = _schedule(shape.dp)
        abg = AlphaBetaGamma(costs.net_alpha, 1.0 / costs.gpu_net_bw)
        local = abg.step_times(sched, nbytes)
        glob = np.zeros(sched.nsteps)
        if groups > 1:
            for s in range(shape.pp):
                # every TP index of stage s has the same node -> group map when TP <= G (same nodes)
                per = global_bytes_per_step(sched, rank_group[:, s, 0], nbytes)
                same = (rank_group[:, s, :] == rank_group[:, s, :1]).all()
                glob += per * shape.tp if same else sum(
                    global_bytes_per_step(sched, rank_group[:, s, t], nbytes) for t in range(shape.tp))
        step = np.maximum(local, glob / gbw) if groups > 1 else local
        t_dp = float(step.sum()) * (1.0 - shape.dp_overlap)
    return IterationBreakdown(compute, bubble, t_tp, t_pp, t_dp, groups)


def ideal_nodes(n: int) -> np.ndarray:
    """The reference placement of ``n`` nodes: ids 0..n-1 (fewest groups, contiguous)."""
    return np.arange(int(n), dtype=np.int64)


def stretch(shape: LLMShape, nodes: np.ndarray, node_group: np.ndarray | None, costs: NetworkCosts
            ) -> tuple[float, IterationBreakdown, IterationBreakdown]:
    """(T_actual / T_ideal, actual breakdown, ideal breakdown)."""
    act = iteration_time(shape, nodes, node_group, costs)
    ref = iteration_time(shape, ideal_nodes(len(nodes)), node_group, costs)
    return act.total / ref.total, act, ref


def shape_of(columns: dict, j: int) -> LLMShape | None:
    """The `LLMShape` of job ``j`` from workload columns (`datasets.llm_synthetic` names), or None."""
    need = ("tp", "pp", "dp", "llm_params", "llm_hidden", "llm_layers")
    if any(k not in columns for k in need):
        return None
    tp, pp, dp = int(columns["tp"][j]), int(columns["pp"][j]), int(columns["dp"][j])
    params = float(columns["llm_params"][j])
    if min(tp, pp, dp) < 1 or not params > 0:
        return None

    def opt(k, default):
        v = columns.get(k)
        return default if v is None or not v[j] > 0 else v[j]

    return LLMShape(tp, pp, dp, params, int(columns["llm_hidden"][j]), int(columns["llm_layers"][j]),
                    seq_len=int(opt("seq_len", 4096)), global_batch=int(opt("global_batch", 1024)),
                    micro_batch=int(opt("micro_batch", 1)))


class LLMIterationModel(RunModel):
    """Stretches training jobs by their placement's iteration slowdown (see module docstring).

    Parameters: ``node_group`` and ``costs`` explicitly, or taken at bind time from the run's
    system (``[network]`` and ``gpus_per_node``; the GPU from `SYSTEM_GPU`, option ``gpu``).
    Job columns: ``iter_time_s``, ``iter_time_ideal_s``, ``iter_slowdown`` (NaN for jobs without a
    shape), ``llm_groups_spanned``.
    """

    name = "llm_iteration"
    #: allocation units per node (G in GPU allocation, set by ``twin.run``): a job's units are mapped to
    #: the nodes they sit on before its placement is costed
    units_per_node: int = 1

    def __init__(self, node_group: np.ndarray | None = None, costs: NetworkCosts | None = None, gpu: str | None = None):
        self._node_group = node_group
        self._costs = costs
        self._gpu = gpu

    def bind(self, ctx) -> None:
        super().bind(ctx)
        self.units_per_node = getattr(ctx, "units_per_node", None) or self.units_per_node   # GPU allocation: G
        n = len(ctx.jobs)
        sysm = ctx.system
        n_nodes = int(ctx.n_nodes) // int(self.units_per_node)
        if self._costs is None:
            if sysm is None or not sysm.network:
                raise ValueError("LLMIterationModel needs a system with a [network] table or explicit costs")
            gpu = self._gpu or ctx.options.get("gpu") or SYSTEM_GPU.get(sysm.name, "H100")
            self._costs = network_costs(sysm.network, n_nodes, sysm.gpus_per_node or 8, gpu)
        if self._node_group is None and sysm is not None and sysm.network:
            from hpctwin.topology.presets import node_groups  # noqa: PLC0415
            self._node_group = node_groups(sysm.network, n_nodes)
        self.costs = self._costs
        self.node_group = self._node_group
        self.cols = ctx.jobs.columns or {}
        self.iter_time = np.full(n, np.nan)
        self.iter_ideal = np.full(n, np.nan)
        self.groups = np.full(n, -1, dtype=np.int64)
        self._cache: dict = {}
        if self.units_per_node == 1:
            self._check_shapes(ctx.jobs)

    def _check_shapes(self, jobs) -> None:
        """Every training job's shape fits its node count and TP a node (whole-node allocation), else a
        one-line `twin.errors.RunConfigError` naming the job and the fix (before the first event)."""
        from hpctwin.twin.errors import RunConfigError  # noqa: PLC0415
        G = self.costs.gpus_per_node
        for j in range(len(jobs)):
            shape = shape_of(self.cols, j)
            if shape is None:
                continue
            need, what = math.ceil(shape.gpus / G), f"llm.iteration: job {int(jobs.job_id[j])} (tp {shape.tp} x " \
                f"pp {shape.pp} x dp {shape.dp})"
            if shape.tp > G:
                raise RunConfigError(f"{what}: TP = {shape.tp} exceeds the {G} GPUs of a node; generate the workload "
                                     f"for this machine (llm-synthetic:...,gpus_per_node={G})")
            if int(jobs.procs[j]) != need:
                raise RunConfigError(f"{what}: {shape.gpus} GPUs need {need} nodes of {G} GPUs but the job asks for "
                                     f"{int(jobs.procs[j])}; generate the workload for this machine "
                                     f"(llm-synthetic:...,gpus_per_node={G})")

    def on_start(self, now, job, nodes):
        if self.units_per_node > 1:
            nodes = np.unique(np.asarray(nodes, dtype=np.int64) // self.units_per_node)
        shape = shape_of(self.cols, job)
        if self.node_group is not None:
            self.groups[job] = int(len(np.unique(self.node_group[np.asarray(nodes)])))
        if shape is None:
            return None
        ref_key = (shape, len(nodes))
        ref = self._cache.get(ref_key)
        if ref is None:
            ref = iteration_time(shape, ideal_nodes(len(nodes)), self.node_group, self.costs).total
            self._cache[ref_key] = ref
        act = iteration_time(shape, nodes, self.node_group, self.costs).total
        self.iter_time[job] = act
        self.iter_ideal[job] = ref
        rate = min(1.0, ref / act)
        return {job: rate} if rate < 1.0 else None

    def job_columns(self) -> dict[str, np.ndarray]:
        with np.errstate(invalid="ignore"):
            return {"iter_time_s": self.iter_time, "iter_time_ideal_s": self.iter_ideal,
                    "iter_slowdown": self.iter_time / self.iter_ideal, "llm_groups_spanned": self.groups}

    def summary(self) -> dict:
        sl = self.iter_time / self.iter_ideal
        ok = np.isfinite(sl)
        return {"llm_training_jobs": int(ok.sum()),
                "llm_mean_iter_slowdown": float(sl[ok].mean()) if ok.any() else None,
                "llm_max_iter_slowdown": float(sl[ok].max()) if ok.any() else None}
