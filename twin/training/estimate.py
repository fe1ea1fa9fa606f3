"""The ``estimate`` API: one training configuration -> iteration time, FLOP/s, MFU, memory, fits.

`estimate` checks the request (``tp x pp x dp x cp == gpus``, the batch divides, names known),
sizes the system preset to the job (`hardware.machine_for`: same node and fabric type), costs one
iteration on the contiguous placement with the analytic fabric (`comm.AnalyticFabric`; no graph is
built, so any N answers in milliseconds) and the memory of the fullest pipeline stage. Every
problem raises `TrainingConfigError` with a one-line message naming the option.
"""
from __future__ import annotations

import math
from dataclasses import asdict

from .config import BatchConfig, ParallelConfig, TrainingConfigError
from .constants import CONSTANTS, Constants
from .hardware import system_preset
from .iteration import iteration_time
from .memory import memory_per_gpu
from .models import MODELS, total_params
from .offload import check_zero, fit_with_offload, offload_iteration, parse_offload


def _positive(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise TrainingConfigError(f"{name} = {v!r}: expected an integer >= 1")
    return v


def estimate(model: str, system: str, gpus: int, tp: int = 1, pp: int = 1, dp: int = 1, cp: int = 1, *,
             seq_len: int, global_batch_tokens: int, micro_batch: int = 1, zero: int = 0, recompute: str = "none",
             ep: int = 1, vpp: int = 1, sp: bool | None = None, attention: str = "flash", dp_overlap: float = 1.0,
             tp_overlap: float = 0.0,              allow_tp_across_nodes: bool = False, k: Constants = CONSTANTS,
             offload: str = "none", offload_what: str = "optimizer", offload_overlap: float = 0.0,
             other_io_nodes: int = 0) -> dict:
    """Estimate one configuration; returns a JSON-ready dict with ``iteration_s``, ``tflops_per_gpu``
    (Narayanan et al.'s count, recomputation included), ``mfu`` (PaLM), ``memory_per_gpu_bytes``,
    ``fits`` and the details (``model_tflops_per_gpu``, ``tokens_per_s``, ``breakdown_s``,
    ``memory_bytes``, ``config``). ``sp`` defaults to True when ``tp > 1``.

    ``offload`` (`offload.parse_offload`: ``none`` or tiers among cpu, nvme, pfs joined by ``+``),
    ``offload_what``, ``offload_overlap``, ``other_io_nodes``: see `offload`; with an offload the
    figures are those of the offloaded iteration and ``offload`` holds its details. A job that does
    not fit without offload gets ``fit_with_offload`` (`offload.fit_with_offload`: the fastest ZeRO
    stage / offload that fits, or None)."""
    if model not in MODELS:
        raise TrainingConfigError(f"--model {model!r}: unknown; known models: {', '.join(MODELS)} (--list-models)")
    try:
        hw = system_preset(system)
    except KeyError as e:
        raise TrainingConfigError(f"--system: {e.args[0]}") from None
    for name, v in (("gpus", gpus), ("tp", tp), ("pp", pp), ("dp", dp), ("cp", cp), ("ep", ep), ("vpp", vpp),
                    ("micro_batch", micro_batch), ("seq_len", seq_len), ("global_batch_tokens", global_batch_tokens)):
        _positive(name, v)
    if tp * pp * dp * cp != gpus:
        raise TrainingConfigError(f"tp x pp x dp x cp = {tp} x {pp} x {dp} x {cp} = {tp * pp * dp * cp} GPUs, "
                                  f"but gpus = {gpus}")
    if global_batch_tokens % seq_len:
        raise TrainingConfigError(f"global_batch_tokens = {global_batch_tokens} is not a multiple of "
                                  f"seq_len = {seq_len}")
    spec = parse_offload(offload, offload_what, offload_overlap, other_io_nodes)
    m = MODELS[model]
    par = ParallelConfig(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vpp=vpp, sp=(tp > 1) if sp is None else bool(sp),
                         zero=zero, recompute=recompute, attention=attention, dp_overlap=dp_overlap,
                         tp_overlap=tp_overlap)
    batch = BatchConfig(seq_len, global_batch_tokens // seq_len, micro_batch)
    if spec is not None:
        check_zero(spec, par.zero)
    bd = iteration_time(m, hw, par, batch, allow_tp_across_nodes=allow_tp_across_nodes, k=k)
    mem = memory_per_gpu(m, par, batch, hw.gpu.memory_bytes, k)
    nodes = math.ceil(gpus / hw.gpus_per_node)
    out = {
        "iteration_s": bd.total, "tflops_per_gpu": bd.tflops_per_gpu, "mfu": bd.mfu,
        "memory_per_gpu_bytes": mem.total, "fits": bool(mem.fits),
        "model_tflops_per_gpu": bd.model_tflops_per_gpu, "tokens_per_s": bd.tokens_per_s,
        "breakdown_s": {key: getattr(bd, key) for key in ("compute", "memory_bound", "tp", "cp", "ep", "bubble", "pp",
                                                          "dp", "optimizer", "dp_total")},
        "flops_per_iteration": {"model": bd.model_flops, "hardware": bd.hardware_flops},
        "memory_bytes": {key: getattr(mem, key) for key in ("weights", "gradients", "optimizer", "activations",
                                                            "buffers", "capacity", "usable")},
        "memory_stage": mem.stage,
        "config": {"model": model, "system": hw.name, "gpu": hw.gpu.name, "gpus": gpus, "nodes": nodes,
                   "params": total_params(m), "microbatches": bd.microbatches, "global_batch": batch.global_batch,
                   **{key: v for key, v in asdict(par).items()}, "seq_len": seq_len, "micro_batch": micro_batch,
                   "fabric": "analytic"},
    }
    if spec is not None:
        _apply_offload(out, offload_iteration(m, hw, par, batch, bd, mem, spec, k))
    elif not mem.fits:
        out["fit_with_offload"] = fit_with_offload(m, hw, par, batch, k, {par.zero: (bd, mem)}, allow_tp_across_nodes)
    return out


def _apply_offload(out: dict, r) -> None:
    """Replace the figures of ``out`` by those of the offloaded iteration ``r`` (`offload.OffloadResult`)."""
    f = out["iteration_s"] / r.iteration_s
    out["iteration_s"] = r.iteration_s
    for key in ("tflops_per_gpu", "mfu", "model_tflops_per_gpu", "tokens_per_s"):
        out[key] = out[key] * f
    out["breakdown_s"] = {**out["breakdown_s"],
                          "optimizer": 0.0 if r.spec.optimizer else out["breakdown_s"]["optimizer"],
                          **{f"offload_{key}": v for key, v in r.terms.items() if key != "gpu_optimizer_removed"}}
    out["memory_per_gpu_bytes"] = r.memory_per_gpu
    out["memory_bytes"] = {**out["memory_bytes"], **r.memory}
    out["fits"] = bool(r.fits)
    out["offload"] = r.as_dict()
