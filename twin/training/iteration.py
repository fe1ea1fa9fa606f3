"""Iteration time of a TP x CP x PP x DP (x EP) training job, term by term (seconds).

Per micro-batch, the slowest pipeline stage (its ``layers / pp`` layers; the last stage also runs
the output layer and loss) takes ``t_mb`` = compute (`compute.layer_times`) + exposed
communication of its layers:

* **TP**: per layer 2 collectives forward, 2 backward, 2 more in a full recomputation; all-reduces
  of the ``b s h`` bf16 activations, or with sequence parallelism a reduce-scatter + all-gather pair
  of the same reference size (Korthikanti et al. 2022); ring schedules of `topology.collectives`
  among the TP ranks, costed by `comm.Fabric` (NVLink inside a node); ``tp_overlap`` hides a share;
* **CP** (ring attention): per layer ``cp - 1`` exchanges of the local K and V blocks forward (2 x
  the bytes backward: K, V and their gradients; once more for full recomputation), each overlapped
  with the attention GEMMs: only the excess over the attention time is exposed (assumption);
* **EP** (MoE): per layer 2 all-to-alls forward (dispatch, combine) of the local tokens' top-k
  copies, 2 backward, 2 more with full recomputation; not overlapped.

Pipeline (Narayanan et al. SC'21 section 2.2): ``T_pipe = (m + (p - 1)/v) t_mb`` for ``m``
micro-batches per replica and ``v`` virtual stages; the term ``(p - 1)/v t_mb`` is the **bubble**.
**PP p2p**: ``b s h / t`` bytes (scatter/gather over the TP ranks, SC'21 section 4.1) from every
rank of a stage to the next, slowest boundary, ``2 (v m + p - 1)`` times on the critical path (not
overlapped; assumption).

**DP** gradients (``2 B`` per parameter of the largest stage) over the DP x CP group, after the
pipeline: all-reduce (ZeRO 0) or reduce-scatter + all-gather of the bf16 weights (ZeRO 1-2);
ZeRO 3 reduce-scatters the gradients and all-gathers the weights twice per micro-batch (forward
and backward), hidden behind the compute up to ``dp_overlap``. The gradient collectives hide behind ``dp_overlap``
x the last
micro-batch's backward; at least the last bucket (``bucket_bytes``) stays exposed when overlapped.
**Optimizer** step: ``optimizer_bytes_per_param`` x the GPU's (ZeRO-sharded) parameters at the HBM
bandwidth.

Collectives are costed on the job's **nodes** over the system's topology graph when nodes are given
(`comm.GraphFabric`), else on the contiguous placement with per-level bandwidths (`comm.AnalyticFabric`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

import hpctwin.twin.training.comm as comm
from .compute import layer_times, logits_seconds
from .config import BatchConfig, ParallelConfig, TrainingConfigError, validate
from .constants import CONSTANTS, Constants
from .flops import hardware_flops, model_flops
from .hardware import Machine, SystemPreset, machine_for, system_preset
from .memory import stage_params
from .models import MODELS, TransformerModel


@dataclass(frozen=True)
class Breakdown:
    """One iteration. Seconds: ``compute`` (GEMMs incl. recomputation), ``memory_bound``, ``tp``,
    ``cp``, ``ep`` (exposed, all m micro-batches of the slowest stage), ``bubble``, ``pp`` (p2p),
    ``dp`` (exposed), ``optimizer``, ``total`` (their sum); ``dp_total`` (before overlap).
    FLOPs per iteration: ``model_flops`` (no recomputation), ``hardware_flops`` (with it, as
    Narayanan et al. count). ``tflops_per_gpu`` = hardware_flops / (total x GPUs) / 1e12 (the
    papers' "achieved teraFLOP/s per GPU"), ``model_tflops_per_gpu`` likewise without
    recomputation, ``mfu`` = model_flops / (total x GPUs x peak) (PaLM). ``microbatches`` per
    replica, ``gpus``, ``path`` ("graph" or "analytic")."""

    compute: float
    memory_bound: float
    tp: float
    cp: float
    ep: float
    bubble: float
    pp: float
    dp: float
    optimizer: float
    total: float
    dp_total: float
    model_flops: float
    hardware_flops: float
    tflops_per_gpu: float
    model_tflops_per_gpu: float
    mfu: float
    tokens_per_s: float
    microbatches: int
    gpus: int
    path: str


def _resolve(model, hw) -> tuple[TransformerModel, SystemPreset]:
    if isinstance(model, str):
        if model not in MODELS:
            raise TrainingConfigError(f"unknown model {model!r}; known: {', '.join(MODELS)}")
        model = MODELS[model]
    if isinstance(hw, str):
        try:
            hw = system_preset(hw)
        except KeyError as e:
            raise TrainingConfigError(str(e.args[0])) from None
    return model, hw


def _machine(hw: SystemPreset, job_nodes: int, system) -> Machine:
    """The machine the job's node ids refer to: ``system`` (a Machine, or a twin/systems name or
    path whose [network] and node count are used) or the preset sized for the job."""
    if system is None:
        return machine_for(hw, job_nodes)
    if isinstance(system, Machine):
        return system
    from hpctwin.topology.presets import network_params  # noqa: PLC0415
    from hpctwin.twin.system import load_system  # noqa: PLC0415
    try:
        spec = load_system(system)
        if not spec.network:
            raise TrainingConfigError(f"system {system!r} has no [network] table")
        return Machine(hw, spec.nodes, dict(spec.network), network_params(spec.network, spec.nodes))
    except (ValueError, FileNotFoundError) as e:
        raise TrainingConfigError(f"system {system!r}: {e}") from None


def build_fabric(hw: SystemPreset, par: ParallelConfig, nodes=None, system=None, background=None,
                 routing: str = "minimal", allow_tp_across_nodes: bool = False, k: Constants = CONSTANTS):
    """(`comm.Fabric`, rank grid) for the job: graph path on ``nodes`` if given, else analytic."""
    G = hw.gpus_per_node
    need = math.ceil(par.gpus / G)
    machine = _machine(hw, need, system)
    if background is not None and np.isscalar(background) and not 0.0 <= float(background) < 1.0:
        raise TrainingConfigError(f"background = {background}: expected a share in [0, 1) of link bandwidth")
    if nodes is None:
        node_ids = np.arange(need, dtype=np.int64)
    else:
        node_ids = np.unique(np.asarray(nodes, dtype=np.int64))
        if len(node_ids) != need or len(node_ids) != len(np.asarray(nodes).ravel()):
            raise TrainingConfigError(f"nodes: {par.gpus} GPUs need {need} distinct nodes of {G} GPUs, "
                                      f"got {len(np.asarray(nodes).ravel())}")
        if node_ids[0] < 0 or node_ids[-1] >= machine.nodes:
            raise TrainingConfigError(f"nodes: ids must lie in 0..{machine.nodes - 1} ({machine.preset.name})")
    R = comm.rank_grid(par.tp, par.cp, par.dp, par.pp)
    rank_node = node_ids[np.arange(par.gpus) // G]
    if not allow_tp_across_nodes and par.tp > 1:
        tpn = rank_node[comm.tp_groups(R)]
        if (tpn != tpn[:, :1]).any():
            raise TrainingConfigError(f"tp = {par.tp} spans nodes of {G} GPUs; choose tp dividing {G} "
                                      "or pass allow_tp_across_nodes (--allow-tp-across-nodes)")
    if nodes is None:
        if background is not None and not np.isscalar(background):
            raise TrainingConfigError("background: a per-link array needs the job's nodes (graph path)")
        return comm.AnalyticFabric(machine, rank_node, k.comm_eff, background), R
    try:
        return comm.GraphFabric(machine, rank_node, k.comm_eff, background, routing), R
    except ValueError as e:          # per-link background of the wrong shape or beyond a link's bandwidth
        raise TrainingConfigError(str(e)) from None


def stage_layers(model, par) -> int:
    """Layers of the slowest pipeline stage, ``ceil(l / pp)``: an uneven split gives the extra layers
    to some stages (or virtual chunks) and the fullest GPU paces the pipeline."""
    return math.ceil(model.layers / par.pp)


def _tp_collective(fab, groups, nbytes: float, sp: bool) -> float:
    if groups.shape[1] < 2:
        return 0.0
    if sp:
        return (comm.collective_time(fab, "reduce_scatter", groups, nbytes)
                + comm.collective_time(fab, "allgather", groups, nbytes))
    return comm.collective_time(fab, "allreduce", groups, nbytes)


def _cp_exchange(fab, R, nbytes: float) -> float:
    """Seconds of one ring step of every CP group (each rank sends ``nbytes`` to its successor)."""
    g = comm.cp_groups(R)
    if g.shape[1] < 2:
        return 0.0
    return fab.step_time(g.ravel(), np.roll(g, -1, axis=1).ravel(), nbytes)


def _stage_terms(model, par, batch, hw, fab, R, k):
    """(per-micro-batch seconds of the slowest stage by term: compute / memory_bound / tp / cp / ep,
    seconds of its forward pass)."""
    b, s, gpu = batch.micro_batch, batch.seq_len, hw.gpu
    lt = layer_times(model, par, b, s, gpu, k)
    L = stage_layers(model, par)
    n_tp = 4 + (2 if par.recompute == "full" else 0)
    act = 2.0 * b * s / par.cp * model.hidden
    tp = n_tp * _tp_collective(fab, comm.tp_groups(R), act, par.sp) * (1.0 - par.tp_overlap)
    cp = 0.0
    if par.cp > 1:
        kv = 2 * 2.0 * b * s / par.cp * max(model.kv_dim / par.tp, model.head_dim)
        c_f = max(0.0, (par.cp - 1) * _cp_exchange(fab, R, kv) - lt.attn_gemm_fwd)
        c_b = max(0.0, (par.cp - 1) * _cp_exchange(fab, R, 2 * kv) - 2 * lt.attn_gemm_fwd)
        cp = c_f + c_b + (c_f if par.recompute == "full" else 0.0)
    ep = 0.0
    if par.ep > 1:
        per_rank = 2.0 * b * s / par.cp * model.top_k * model.hidden / par.tp
        a2a = comm.collective_time(fab, "alltoall", comm.ep_groups(R, par.ep), per_rank, "pairwise")
        ep = (4 + (2 if par.recompute == "full" else 0)) * a2a
    gl, ml = logits_seconds(model, par, b, s, gpu, k)      # the last stage is the slowest: it adds the output layer
    extra_g, extra_m = {"none": (0.0, 0.0), "selective": (lt.attn_gemm_fwd, lt.attn_mem_fwd),
                        "full": (lt.gemm_fwd, lt.mem_fwd)}[par.recompute]
    terms = {"compute": L * (lt.gemm + extra_g) + gl, "memory_bound": L * (lt.mem + extra_m) + ml,
             "tp": L * tp, "cp": L * cp, "ep": L * ep}
    fwd = L * (lt.gemm_fwd + lt.mem_fwd) + (gl + ml) / 3.0 + L * (tp + cp + ep) * 2.0 / n_tp
    return terms, fwd


def _dp_terms(model, par, batch, fab, R, t_bwd_last: float, t_pipe: float, k) -> tuple[float, float]:
    """(exposed, total) seconds of the data-parallel / ZeRO collectives."""
    groups = comm.dp_groups(R)
    if groups.shape[1] < 2:
        return 0.0, 0.0
    n = max(stage_params(model, par.tp, par.pp, par.ep, st) for st in ("first", "last"))
    grad = 2.0 * n
    alg = par.dp_algorithm
    if par.zero == 0:
        t = comm.collective_time(fab, "allreduce", groups, grad, alg)
    else:       # ZeRO 1-2: reduce-scatter the gradients, all-gather the updated weights; ZeRO 3 keeps them sharded
        t = comm.collective_time(fab, "reduce_scatter", groups, grad, alg)
        if par.zero < 3:
            t += comm.collective_time(fab, "allgather", groups, grad, alg)
    exposed = t
    if par.dp_overlap > 0:
        exposed = max(t - par.dp_overlap * t_bwd_last, t * min(1.0, k.bucket_bytes / grad))
    total = t
    if par.zero >= 3:
        gathers = 2 * batch.microbatches(par.dp) * comm.collective_time(fab, "allgather", groups, grad, alg)
        total += gathers
        exposed += max(0.0, gathers - par.dp_overlap * t_pipe)
    return exposed, total


def iteration_time(model, hw, parallel: ParallelConfig, batch: BatchConfig, nodes=None, system=None,
                   background=None, *, routing: str = "minimal", allow_tp_across_nodes: bool = False,
                   k: Constants = CONSTANTS) -> Breakdown:
    """`Breakdown` of one iteration of ``model`` (`TransformerModel` or preset name) on ``hw``
    (`SystemPreset` or name) with ``parallel`` and ``batch``; ``nodes``: the job's node ids on
    ``system`` (default: the preset machine) to cost collectives on the topology graph;
    ``background``: see `comm`. Raises `TrainingConfigError` for a configuration that cannot run."""
    model, hw = _resolve(model, hw)
    validate(model, parallel, batch)
    par = parallel
    fab, R = build_fabric(hw, par, nodes, system, background, routing, allow_tp_across_nodes, k)
    m = batch.microbatches(par.dp)
    per, t_fwd = _stage_terms(model, par, batch, hw, fab, R, k)
    t_mb = sum(per.values())
    t_pp = 0.0
    if par.pp > 1:
        nbytes = 2.0 * batch.micro_batch * batch.seq_len / par.cp * model.hidden / par.tp
        worst = max(fab.step_time(R[st].ravel(), R[st + 1].ravel(), nbytes) for st in range(par.pp - 1))
        t_pp = 2.0 * (par.vpp * m + par.pp - 1) * worst
    bubble = (par.pp - 1) / par.vpp * t_mb
    dp, dp_total = _dp_terms(model, par, batch, fab, R, t_mb - t_fwd, m * t_mb, k)
    n_local = max(stage_params(model, par.tp, par.pp, par.ep, st) for st in ("first", "last"))
    shard = par.dp * par.cp if par.zero >= 1 else 1
    opt = k.optimizer_bytes_per_param * n_local / shard / hw.gpu.hbm_bw
    terms = {key: m * v for key, v in per.items()}
    total = sum(terms.values()) + bubble + t_pp + dp + opt
    mf = model_flops(model, batch.global_batch, batch.seq_len)
    hf = hardware_flops(model, batch.global_batch, batch.seq_len, par.recompute)
    G = par.gpus
    return Breakdown(terms["compute"], terms["memory_bound"], terms["tp"], terms["cp"], terms["ep"], bubble, t_pp,
                     dp, opt, total, dp_total, mf, hf, hf / (total * G) / 1e12, mf / (total * G) / 1e12,
                     mf / (total * G * hw.gpu.peak_flops), batch.tokens / total, m, G,
                     "analytic" if isinstance(fab, comm.AnalyticFabric) else "graph")
