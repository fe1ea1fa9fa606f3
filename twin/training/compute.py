"""Compute time of one micro-batch on one GPU of a pipeline stage (seconds), without communication.

* **GEMMs** (`flops.layer_gemms`, `flops.logits_gemm`): each at ``peak x eff(x)``, ``eff`` the
  saturating curve of `constants.Constants.gemm_eff` in the GEMM's smallest dimension ``x``.
  Backward = 2 x forward (input and weight gradients, same shapes). Flash attention with the causal
  mask skips half of the score blocks: its attention GEMM time is halved (counted FLOPs are not).
* **Memory-bound kernels**: ``mem_traffic x`` the activation bytes the layer stores
  (`memory.activation_bytes_per_layer`) moved at the HBM bandwidth in the forward pass, 2 x that in
  the backward (assumption: each kernel's backward reads and writes about twice its forward bytes).
* **Recomputation** (added by `iteration`): full adds one forward of the layer (GEMMs + memory);
  selective adds the attention core (score GEMMs + the score tensors' traffic); none adds nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

from .constants import Constants
from .flops import layer_gemms, logits_gemm
from .memory import activation_bytes_per_layer


@dataclass(frozen=True)
class LayerTimes:
    """Seconds per layer and micro-batch, forward: ``gemm_fwd``, ``mem_fwd``, ``attn_gemm_fwd`` (the
    attention core's part of gemm_fwd), ``attn_mem_fwd`` (the score tensors' part of mem_fwd)."""

    gemm_fwd: float
    mem_fwd: float
    attn_gemm_fwd: float
    attn_mem_fwd: float

    @property
    def gemm(self) -> float:
        """GEMM seconds forward + backward (recomputation apart)."""
        return 3.0 * self.gemm_fwd

    @property
    def mem(self) -> float:
        """Memory-bound seconds forward + backward (recomputation apart)."""
        return 3.0 * self.mem_fwd


def gemm_seconds(g, peak: float, k: Constants, flash: bool) -> float:
    """Seconds of one `flops.Gemm` at ``peak x eff(min dim)``."""
    f = g.flops * (0.5 if flash and g.part == "attn" else 1.0)
    return f / (peak * k.gemm_eff(g.min_dim))


def layer_times(model, par, b: int, s: int, gpu, k: Constants) -> LayerTimes:
    """`LayerTimes` of one layer on one GPU for ``b`` sequences of ``s`` tokens."""
    flash = par.attention == "flash"
    gemms = layer_gemms(model, b, s, par.tp, par.cp, par.ep)
    g_f = sum(gemm_seconds(g, gpu.peak_flops, k, flash) for g in gemms)
    a_f = sum(gemm_seconds(g, gpu.peak_flops, k, flash) for g in gemms if g.part == "attn")
    act = activation_bytes_per_layer(model, b, s, par.tp, par.sp, par.cp, flash)
    scores = act - activation_bytes_per_layer(model, b, s, par.tp, par.sp, par.cp, True)
    m_f = k.mem_traffic * act / gpu.hbm_bw
    s_f = k.mem_traffic * scores / gpu.hbm_bw
    return LayerTimes(g_f, m_f, a_f, s_f)


def logits_seconds(model, par, b: int, s: int, gpu, k: Constants) -> tuple[float, float]:
    """(GEMM, memory-bound) seconds of the output layer and loss, forward + backward, one micro-batch:
    the logits GEMM 3 x, and ``mem_traffic x`` the fp32 logits ``4 b s V / (tp cp)`` bytes 3 x."""
    g = 3.0 * gemm_seconds(logits_gemm(model, b, s, par.tp, par.cp), gpu.peak_flops, k, False)
    mem = 3.0 * k.mem_traffic * 4.0 * b * s / par.cp * model.vocab / par.tp / gpu.hbm_bw
    return g, mem
