"""Offload of optimizer state and parameters to host DRAM, node-local NVMe and the parallel file system.

Two styles, chosen by how many tiers are named (``--offload``):

* **one tier** (``cpu``, ``nvme`` or ``pfs``): ZeRO-Offload (Ren et al., USENIX ATC'21: optimizer state
  in host memory, the Adam step on the CPU) and ZeRO-Infinity (Rajbhandari et al., SC'21: the same
  state, and optionally the parameters, on NVMe) style. Every byte of offloaded state lives on that
  tier; with ``nvme`` or ``pfs`` host DRAM holds staging buffers only.
* **several tiers** (e.g. ``cpu+nvme+pfs``): MLP-Offload style (Maurya, Rafique, Cappello, Nicolae,
  "MLP-Offload: Multi-Level, Multi-Path Offloading for LLM Pre-training to Break the GPU Memory Wall",
  SC'25, arXiv:2509.02480, doi:10.1145/3712285.3759864): host DRAM, when named, keeps as much state
  as fits (it needs no I/O: a cache); the rest is split over the I/O tiers in proportion to their
  round-trip bandwidth ``1 / (1/read + 1/write)`` within their capacities (water-filling), so that
  all paths finish together and the PFS path, otherwise idle, adds its bandwidth.

**What moves** (``--offload-what``): ``optimizer`` (ZeRO 1-3): the rank's ZeRO shard of the fp32 master
weights and Adam moments (12 B/parameter) plus its fp32 gradient partition (4 B), 16 B/parameter off
the GPU; ``params`` (ZeRO 3): the rank's shard of the bf16 weights (2 B/parameter; two layers stay
on the GPU in flight); ``both``.

**Time per iteration** (seconds; per node, all nodes alike; ``m`` micro-batches; backward of one
micro-batch ``t_bwd = 2/3 x`` its compute (GEMM + memory-bound time of the slowest stage), the
backward being twice the forward):

* *gradient copy* GPU -> host, bf16 (2 B per shard parameter) every micro-batch over the GPU's host
  link (PCIe / Infinity Fabric at ``comm_eff``), hidden behind that micro-batch's backward (the
  copies overlap the backward, DeepSpeed ``overlap_comm``): exposed ``m x max(0, t_copy - t_bwd)``;
* *gradient flush*: the fp32 gradient partition (4 B) written to the I/O tiers during the last
  backward: exposed ``max(0, t_flush - t_bwd)``;
* *update*: read 16 B (master weight, m, v, gradient) and write 12 B per parameter held on the I/O
  tiers (tiers in parallel, reads and writes of one tier in sequence: ``max_i (r_i / R_i + w_i /
  W_i)``), pipelined with the CPU Adam step (``36 B`` of DRAM traffic per parameter,
  ``optimizer_bytes_per_param``, at ``STREAM_EFFICIENCY`` of the node's DRAM peak): ``max(I/O, CPU)``.
  **Overlap** (``--offload-overlap``, an explicit assumption, default 0): the share of the last
  backward left after the flush that hides update reads (MLP-Offload overlaps its I/O with the
  backward pass);
* *parameter copy* host -> GPU of the updated bf16 weights (2 B), exposed (before the next forward);
* *parameter fetch* (params offloaded): 2 x 2 B per shard parameter per micro-batch (forward and
  backward) from the tiers and over the host link, prefetched behind the micro-batch's compute
  (ZeRO-Infinity's overlap-centric design; assumption: full overlap up to the compute time): exposed
  ``m x max(0, t_fetch - t_mb)``; with the optimizer on the GPU the updated weights go back (2 B).

The GPU optimizer step of the iteration model is dropped when the optimizer is offloaded (it runs on
the CPU). The same pipelining is granted to both styles, so their difference is the tiers alone.

**Memory**: the offloaded bytes leave the GPU (optimizer 12 B shard; weights but two layers); the
tiers must hold them: host DRAM up to `storage.HOST_USABLE_FRACTION` of a node's, NVMe its capacity.

Not modelled: contention between the GPUs of a node writing the same NVMe beyond the bandwidth split
(MLP-Offload's concurrency control), the CPU time of the I/O stack, compression.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .config import TrainingConfigError
from .constants import CONSTANTS, Constants
from .memory import layer_params_per_gpu, stage_params
from .storage import (
    STORAGE,
    STREAM_EFFICIENCY,
    NodeStorage,
    pfs_job_bandwidth,
    storage_for,
)

TIERS = ("cpu", "nvme", "pfs")
WHAT = ("optimizer", "params", "both")
#: bytes per parameter of offloaded optimizer state: fp32 master weight, Adam m and v (12) + fp32 gradient (4)
OPT_STATE_BYTES = 16.0
#: bytes per parameter of offloaded weights (bf16)
PARAM_BYTES = 2.0
OFFLOAD_HELP = ("none, or tiers among cpu, nvme, pfs joined by + "
                "(one tier: ZeRO-Offload/Infinity style; several: MLP-Offload style)")


@dataclass(frozen=True)
class OffloadSpec:
    """``tiers`` (a tuple of `TIERS`, order irrelevant), ``what`` in `WHAT`, ``overlap`` share in [0, 1]
    (see the module docstring), ``other_io_nodes`` nodes of other jobs using the PFS at the same time."""

    tiers: tuple[str, ...]
    what: str = "optimizer"
    overlap: float = 0.0
    other_io_nodes: int = 0

    @property
    def text(self) -> str:
        return "+".join(self.tiers)

    @property
    def style(self) -> str:
        """``"zero"`` (one tier) or ``"multipath"`` (several)."""
        return "zero" if len(self.tiers) == 1 else "multipath"

    @property
    def optimizer(self) -> bool:
        return self.what in ("optimizer", "both")

    @property
    def params(self) -> bool:
        return self.what in ("params", "both")


def parse_offload(text, what: str = "optimizer", overlap: float = 0.0, other_io_nodes: int = 0) -> OffloadSpec | None:
    """The `OffloadSpec` of ``--offload TEXT`` (None for ``none``); `TrainingConfigError` naming the option."""
    if not isinstance(text, str) or not text.strip():
        raise TrainingConfigError(f"--offload {text!r}: expected {OFFLOAD_HELP}")
    t = text.strip().lower()
    if t == "none":
        return None
    parts = [p.strip() for p in t.split("+")]
    for p in parts:
        if p not in TIERS:
            import difflib  # noqa: PLC0415
            near = difflib.get_close_matches(p, TIERS + ("none",), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise TrainingConfigError(f"--offload {text!r}: unknown tier {p!r}{hint}; expected {OFFLOAD_HELP}")
    if len(set(parts)) != len(parts):
        raise TrainingConfigError(f"--offload {text!r}: a tier is named twice")
    if what not in WHAT:
        raise TrainingConfigError(f"--offload-what {what!r}: expected one of {', '.join(WHAT)}")
    if isinstance(overlap, bool) or not isinstance(overlap, (int, float)) or not 0.0 <= float(overlap) <= 1.0:
        raise TrainingConfigError(f"--offload-overlap {overlap!r}: expected a share in [0, 1]")
    if isinstance(other_io_nodes, bool) or not isinstance(other_io_nodes, int) or other_io_nodes < 0:
        raise TrainingConfigError(f"--other-io-nodes {other_io_nodes!r}: expected an integer >= 0")
    return OffloadSpec(tuple(sorted(parts, key=TIERS.index)), what, float(overlap), int(other_io_nodes))


@dataclass(frozen=True)
class TierPath:
    """One tier as the offload engine sees it from a node: ``capacity`` bytes, ``read`` / ``write`` bytes/s."""

    name: str
    capacity: float
    read: float
    write: float

    @property
    def round_trip(self) -> float:
        """Bytes/s of reading and then writing the same bytes: ``1 / (1/read + 1/write)``."""
        return 1.0 / (1.0 / self.read + 1.0 / self.write)


def tier_paths(st: NodeStorage, job_nodes: int, machine_gpus: int, other_io_nodes: int = 0) -> dict[str, TierPath]:
    """The three tiers per node: host DRAM (usable share, DRAM bandwidth at `STREAM_EFFICIENCY`),
    NVMe (per node), PFS (the job's share per node, `storage.pfs_job_bandwidth`)."""
    dram = st.host_mem_bw * STREAM_EFFICIENCY
    pr = pfs_job_bandwidth(st, job_nodes, machine_gpus, "read", other_io_nodes) / job_nodes
    pw = pfs_job_bandwidth(st, job_nodes, machine_gpus, "write", other_io_nodes) / job_nodes
    return {"cpu": TierPath("cpu", st.host_usable, dram, dram),
            "nvme": TierPath("nvme", st.nvme.capacity, st.nvme.read_bw, st.nvme.write_bw),
            "pfs": TierPath("pfs", st.pfs.capacity / job_nodes, pr, pw)}


def allocate(nbytes: float, tiers: tuple[str, ...], paths: dict[str, TierPath],
             used: dict[str, float]) -> dict[str, float]:
    """Bytes per tier for ``nbytes`` of state (one node), given bytes already ``used`` per tier.

    One tier: all of it there. Several: host DRAM (``cpu``) first, up to its free capacity; the rest
    over the I/O tiers in proportion to their round-trip bandwidth, capped by capacity (water-filling).
    Bytes that fit nowhere are returned under ``"unplaced"``."""
    out = {t: 0.0 for t in tiers}
    free = {t: max(0.0, paths[t].capacity - used.get(t, 0.0)) for t in tiers}
    rest = float(nbytes)
    if len(tiers) == 1:
        t = tiers[0]
        out[t] = min(rest, free[t])
        out["unplaced"] = rest - out[t]
        return out
    if "cpu" in tiers:
        out["cpu"] = min(rest, free["cpu"])
        rest -= out["cpu"]
    active = [t for t in tiers if t != "cpu"]
    while rest > 0 and active:
        bw = sum(paths[t].round_trip for t in active)
        share = {t: rest * paths[t].round_trip / bw for t in active}
        over = [t for t in active if share[t] > free[t] - out[t]]
        if not over:
            for t in active:
                out[t] += share[t]
            rest = 0.0
            break
        for t in over:
            take = free[t] - out[t]
            out[t] += take
            rest -= take
            active.remove(t)
    out["unplaced"] = max(rest, 0.0)
    return out


@dataclass(frozen=True)
class OffloadResult:
    """One iteration with offload: ``iteration_s``; ``terms`` exposed seconds by part (``grad_copy``,
    ``grad_flush``, ``update``, ``param_copy``, ``param_fetch``, ``param_writeback``) and the GPU
    optimizer step removed (``gpu_optimizer_removed``); ``update_io_s`` / ``cpu_adam_s`` before
    pipelining; ``placement`` bytes per node on each tier (optimizer and params together);
    ``memory_per_gpu`` bytes after offload and ``memory`` its parts (weights, gradients, optimizer,
    activations, buffers); ``fits_gpu``, ``fits_tiers``, ``fits``; ``why`` (the reason it does not fit,
    or "")."""

    spec: OffloadSpec
    iteration_s: float
    terms: dict
    update_io_s: float
    cpu_adam_s: float
    placement: dict
    memory_per_gpu: float
    memory: dict
    fits_gpu: bool
    fits_tiers: bool
    fits: bool
    why: str

    def as_dict(self) -> dict:
        """JSON-ready dict."""
        return {"tiers": self.spec.text, "what": self.spec.what, "style": self.spec.style,
                "overlap": self.spec.overlap, "other_io_nodes": self.spec.other_io_nodes,
                "iteration_s": self.iteration_s, "terms_s": dict(self.terms), "update_io_s": self.update_io_s,
                "cpu_adam_s": self.cpu_adam_s, "bytes_per_node": dict(self.placement),
                "memory_per_gpu_bytes": self.memory_per_gpu, "fits_gpu": self.fits_gpu,
                "fits_tiers": self.fits_tiers, "fits": self.fits, "why": self.why}


def check_zero(spec: OffloadSpec, zero: int) -> None:
    """`TrainingConfigError` unless the ZeRO stage allows ``spec`` (optimizer: 1-3; params: 3)."""
    if spec.params and zero != 3:
        raise TrainingConfigError(f"--offload-what {spec.what} needs --zero 3 (parameters are offloaded as ZeRO-3 "
                                  f"shards, ZeRO-Infinity); got --zero {zero}")
    if spec.optimizer and zero < 1:
        raise TrainingConfigError("--offload needs --zero 1, 2 or 3 (each rank offloads its ZeRO shard of the "
                                  "optimizer state, as DeepSpeed does); got --zero 0")


def _gb(x: float) -> str:
    return f"{x / 1e9:,.0f} GB"


def offload_iteration(model, hw, par, batch, bd, mem, spec: OffloadSpec, k: Constants = CONSTANTS,
                      machine_gpus: int | None = None) -> OffloadResult:
    """`OffloadResult` of ``spec`` for the job whose iteration `Breakdown` is ``bd`` and whose
    `memory.MemoryBreakdown` is ``mem`` (``model`` a `TransformerModel`, ``hw`` a `SystemPreset`).
    ``machine_gpus``: GPUs of the machine sharing the PFS (default: the preset sized for the job)."""
    check_zero(spec, par.zero)
    try:
        st = storage_for(hw.name)
    except KeyError as e:
        raise TrainingConfigError(f"--offload: {e.args[0]}") from None
    G = hw.gpus_per_node
    gpus = par.gpus
    job_nodes = math.ceil(gpus / G)
    per_node = min(G, gpus)
    if machine_gpus is None:
        from .hardware import machine_for  # noqa: PLC0415
        machine_gpus = machine_for(hw, job_nodes).nodes * G
    paths = tier_paths(st, job_nodes, machine_gpus, spec.other_io_nodes)
    shard = par.dp * par.cp
    n_stage = max(stage_params(model, par.tp, par.pp, par.ep, s) for s in ("first", "last"))
    n_gpu = n_stage / shard                       # parameters of the rank's ZeRO shard
    n_node = n_gpu * per_node
    link = st.host_link_bw * k.comm_eff
    m = bd.microbatches
    t_mb = (bd.compute + bd.memory_bound) / m
    t_bwd = 2.0 / 3.0 * t_mb
    used: dict[str, float] = {}
    opt_at = allocate(OPT_STATE_BYTES * n_node, spec.tiers, paths, used) if spec.optimizer else {}
    for t, v in opt_at.items():
        used[t] = used.get(t, 0.0) + v
    par_at = allocate(PARAM_BYTES * n_node, spec.tiers, paths, used) if spec.params else {}
    io = [t for t in spec.tiers if t != "cpu"]        # tiers that need I/O (host DRAM needs none)
    terms = {"grad_copy": 0.0, "grad_flush": 0.0, "update": 0.0, "param_copy": 0.0, "param_fetch": 0.0,
             "param_writeback": 0.0, "gpu_optimizer_removed": 0.0}
    update_io = cpu = 0.0
    if spec.optimizer:
        frac = {t: opt_at.get(t, 0.0) / (OPT_STATE_BYTES * n_node) for t in spec.tiers}
        copy = 2.0 * n_gpu / link
        terms["grad_copy"] = m * max(0.0, copy - t_bwd)
        flush = max((4.0 * n_node * frac[t] / paths[t].write for t in io), default=0.0)
        terms["grad_flush"] = max(0.0, flush - t_bwd)
        writeback = {t: par_at.get(t, 0.0) for t in io}       # updated weights rewritten where they live
        update_io = max((16.0 * n_node * frac[t] / paths[t].read
                         + (12.0 * n_node * frac[t] + writeback[t]) / paths[t].write for t in io), default=0.0)
        cpu = k.optimizer_bytes_per_param * n_node / (st.host_mem_bw * STREAM_EFFICIENCY)
        hidden = spec.overlap * max(0.0, t_bwd - flush)
        terms["update"] = max(max(0.0, update_io - hidden), cpu)
        if not spec.params:
            terms["param_copy"] = 2.0 * n_gpu / link
        terms["gpu_optimizer_removed"] = -bd.optimizer
    if spec.params:
        pfrac = {t: par_at.get(t, 0.0) / (PARAM_BYTES * n_node) for t in spec.tiers}
        fetch_tier = max((2.0 * PARAM_BYTES * n_node * pfrac[t] / paths[t].read for t in spec.tiers), default=0.0)
        fetch = max(fetch_tier, 2.0 * PARAM_BYTES * n_gpu / link)
        terms["param_fetch"] = m * max(0.0, fetch - t_mb)
        if not spec.optimizer:                    # updated weights go back to their tier after the GPU step
            wb = max((PARAM_BYTES * n_node * pfrac[t] / paths[t].write for t in io), default=0.0)
            terms["param_writeback"] = max(wb, PARAM_BYTES * n_gpu / link)
    total = bd.total + sum(terms.values())
    parts, mem_total = memory_after(model, par, mem, spec, k)
    fits_gpu = mem_total <= mem.usable
    unplaced = opt_at.get("unplaced", 0.0) + par_at.get("unplaced", 0.0)
    fits_tiers = unplaced <= 0.0
    why = ""
    if not fits_tiers:
        need = (OPT_STATE_BYTES if spec.optimizer else 0.0) * n_node + (PARAM_BYTES if spec.params else 0.0) * n_node
        have = sum(paths[t].capacity for t in spec.tiers)
        why = (f"the offloaded state ({_gb(need)} per node) exceeds {spec.text}'s usable capacity "
               f"({_gb(have)} per node)")
    elif not fits_gpu:
        why = f"{mem_total / 2 ** 30:.1f} GiB per GPU remain after offload, {mem.usable / 2 ** 30:.1f} GiB usable"
    placement = {t: opt_at.get(t, 0.0) + par_at.get(t, 0.0) for t in spec.tiers}
    return OffloadResult(spec, float(total), terms, float(update_io), float(cpu), placement, float(mem_total), parts,
                         bool(fits_gpu), bool(fits_tiers), bool(fits_gpu and fits_tiers), why)


def memory_after(model, par, mem, spec: OffloadSpec, k: Constants = CONSTANTS) -> tuple[dict, float]:
    """(parts, total bytes) per GPU once ``spec`` moved its state off the GPU: no optimizer state when
    the optimizer is offloaded, two layers' weights in flight when the parameters are; buffers
    ``frag_fraction`` of the rest (`memory`)."""
    w = 2 * 2.0 * layer_params_per_gpu(model, par.tp, par.ep) if spec.params else mem.weights
    o = 0.0 if spec.optimizer else mem.optimizer
    counted = w + mem.gradients + o + mem.activations
    total = counted * (1.0 + k.frag_fraction)
    return ({"weights": w, "gradients": mem.gradients, "optimizer": o, "activations": mem.activations,
             "buffers": total - counted}, total)


#: tier combinations `fit_with_offload` tries
CANDIDATE_TIERS = ("cpu", "nvme", "pfs", "cpu+nvme", "nvme+pfs", "cpu+nvme+pfs")


def fit_with_offload(model, hw, par, batch, k: Constants = CONSTANTS, known: dict | None = None,
                     allow_tp_across_nodes: bool = False) -> dict | None:
    """The fastest configuration that fits among: the job's ZeRO stage (1 when it is 0) and ZeRO 3,
    each without offload (when the stage differs) and with every `CANDIDATE_TIERS` x what-to-offload
    allowed at that stage. ``known``: ``{zero: (Breakdown, MemoryBreakdown)}`` already computed.
    Returns ``{"zero", "offload", "offload_what", "iteration_s", "memory_per_gpu_bytes", "args"}``
    or None when nothing fits."""
    from dataclasses import replace  # noqa: PLC0415

    from .iteration import iteration_time  # noqa: PLC0415
    from .memory import memory_per_gpu  # noqa: PLC0415
    known = dict(known or {})
    best = None
    for zero in sorted({max(par.zero, 1), 3}):
        p = replace(par, zero=zero)
        whats = ("optimizer",) + (("params", "both") if zero == 3 else ()) if hw.name in STORAGE else ()
        if zero in known:
            bd, mem = known[zero]
        else:
            mem = memory_per_gpu(model, p, batch, hw.gpu.memory_bytes, k)
            # the iteration model only when something at this stage can fit in GPU memory
            if not (zero != par.zero and mem.fits) and not any(
                    memory_after(model, p, mem, parse_offload("cpu", w), k)[1] <= mem.usable for w in whats):
                continue
            bd = iteration_time(model, hw, p, batch, allow_tp_across_nodes=allow_tp_across_nodes, k=k)
        cands = []
        if zero != par.zero and mem.fits:
            cands.append(("none", "optimizer", bd.total, mem.total))
        for what in whats:
            for tiers in CANDIDATE_TIERS:
                r = offload_iteration(model, hw, p, batch, bd, mem, parse_offload(tiers, what), k)
                if r.fits:
                    cands.append((tiers, what, r.iteration_s, r.memory_per_gpu))
        for tiers, what, it, mt in cands:
            key = (it, tiers.count("+"))
            if best is None or key < best[0]:
                best = (key, zero, tiers, what, it, mt)
    if best is None:
        return None
    _, zero, tiers, what, it, mt = best
    args = f"--zero {zero}" + (f" --offload {tiers} --offload-what {what}" if tiers != "none" else "")
    return {"zero": zero, "offload": tiers, "offload_what": what, "iteration_s": float(it),
            "memory_per_gpu_bytes": float(mt), "args": args}
