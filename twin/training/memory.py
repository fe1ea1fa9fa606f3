"""Memory per GPU (bytes) of mixed-precision training with TP/PP/DP/CP/EP, ZeRO and recomputation.

* **Model states** (Rajbhandari et al. 2020, "ZeRO", section 3.1): 2 B bf16 weights + 2 B bf16
  gradients + 12 B fp32 master weight and Adam moments = 16 B per parameter held by the GPU. ZeRO
  stage 1 shards the 12 B over the data-parallel group (DP x CP ranks, as Megatron-LM's
  distributed optimizer), stage 2 also the gradients, stage 3 (FSDP) also the weights, which then
  gather one layer at a time (two layers' weights in flight with prefetch: added).
* **Parameters per GPU**: the layers of one pipeline stage split over TP (norms replicated), MoE
  experts split over EP and TP; the input embedding on the first stage and the output layer on
  the last (split over TP). With tied embeddings and PP > 1 the last stage keeps its own copy.
* **Activations per layer** (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
  Transformer Models", section 4): ``s b h (34 + 5 a s / h)`` bytes for a GPT layer without
  parallelism, ``s b h (10 + 24/t + 5 a s/(h t))`` with TP, ``s b h (34/t + 5 a s/(h t))`` with TP
  + sequence parallelism. `activation_bytes_per_layer` derives the same terms for any layer (GQA
  K/V of width kv, SwiGLU's three f-wide tensors, no dropout masks without dropout, MoE top-k
  copies), so it reduces to these formulas for a GPT. Flash attention and selective recomputation
  drop the ``5 a s^2 b`` score tensors; full recomputation keeps only each layer's input ``2 s b
  h`` (``/t`` with SP) plus one layer's full activations while it is recomputed. CP divides s.
* **Pipeline in flight**: 1F1B keeps ``min(m, p)`` micro-batches of activations on the first
  stage, x ``(1 + (p-1)/(p v))`` with the interleaved schedule (Korthikanti et al. eq. 5 remark);
  the last stage keeps one micro-batch plus the fp32 logits ``4 s b V / t``.
* **Buffers and fragmentation**: ``frag_fraction`` of the counted total (`constants`); ``fits`` =
  total <= GPU memory - ``reserve_bytes``.

The reported memory is the larger of the first and the last pipeline stage.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .constants import CONSTANTS, Constants
from .models import TransformerModel, attention_params, embedding_params, mlp_params, norm_params


def activation_bytes_per_layer(m: TransformerModel, b: int, s: int, tp: int = 1, sp: bool = False, cp: int = 1,
                               flash: bool = False) -> float:
    """Bytes one layer stores for backward for one micro-batch of ``b`` sequences (no recompute)."""
    sl = s / cp
    sbh = sl * b * m.hidden
    r = max(m.kv_dim, tp * m.head_dim) / m.hidden     # tp > kv heads: one K/V head per rank, replicated
    drop = 1.0 if m.dropout else 0.0
    # kept whole on every TP rank without SP: 2 norm inputs (4), QKV input (2), MLP input (2), 2 dropout masks
    replicated = 4.0 + 2.0 + 2.0 + 2.0 * drop
    attn_split = 2.0 + 4.0 * r + 2.0                 # Q, K and V (GQA width), output-projection input
    f_ratio = m.ffn / m.hidden
    mlp_split = (6.0 if m.mlp == "swiglu" else 4.0) * f_ratio   # per-f tensors: act. in/out (+ gate)
    if m.is_moe:
        mlp_split = m.top_k * (2.0 + mlp_split)      # each token's k expert copies (+ its dispatched input)
    split = attn_split + mlp_split
    total = sbh * ((replicated + split) / tp if sp else replicated + split / tp)
    if not flash:
        per_score = 5.0 if m.dropout else 2.0        # softmax out (2) + dropout mask (1) + dropout out (2)
        total += per_score * m.heads * sl * s * b / tp
    return total


def layer_input_bytes(m: TransformerModel, b: int, s: int, tp: int = 1, sp: bool = False, cp: int = 1) -> float:
    """Bytes of one layer's input (bf16), what full recomputation keeps per layer."""
    return 2.0 * s / cp * b * m.hidden / (tp if sp else 1)


def stage_activation_bytes(m: TransformerModel, b: int, s: int, layers: int, tp: int, sp: bool, cp: int, flash: bool,
                           recompute: str) -> tuple[float, float]:
    """(bytes ``layers`` layers keep per micro-batch in flight, working bytes held once: one layer's
    full activations while it is recomputed under full recomputation, else 0)."""
    full = activation_bytes_per_layer(m, b, s, tp, sp, cp, flash)
    if recompute == "full":
        return layers * layer_input_bytes(m, b, s, tp, sp, cp), full
    if recompute == "selective":
        return layers * activation_bytes_per_layer(m, b, s, tp, sp, cp, True), 0.0
    return layers * full, 0.0


def layer_params_per_gpu(m: TransformerModel, tp: int, ep: int) -> float:
    """Parameters of one layer on one GPU (norms replicated over TP, experts split over EP x TP)."""
    mlp = mlp_params(m) / tp
    if m.is_moe:
        mlp = mlp * m.experts / ep + m.hidden * m.experts
    return attention_params(m) / tp + mlp + 2 * norm_params(m)


def stage_params(m: TransformerModel, tp: int, pp: int, ep: int, stage: str) -> float:
    """Parameters held by one GPU of the ``stage`` ("first" or "last") pipeline stage (``ceil(l /
    pp)`` layers: with an uneven split the fuller stages count)."""
    p = layer_params_per_gpu(m, tp, ep) * math.ceil(m.layers / pp)
    first = embedding_params(m) / tp
    last = norm_params(m) + m.vocab * m.hidden / tp
    if pp == 1:
        return p + first + (last if not m.tied_embeddings else norm_params(m))
    return p + (first if stage == "first" else last)


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per GPU: ``weights``, ``gradients``, ``optimizer``, ``activations``, ``buffers``,
    ``total``; ``capacity`` (GPU memory), ``usable`` (capacity - reserve), ``fits``, ``stage``
    (the pipeline stage that needs the most) and ``params`` held (before ZeRO-3 sharding)."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    buffers: float
    total: float
    capacity: float
    usable: float
    fits: bool
    stage: str
    params: float


def memory_per_gpu(m: TransformerModel, par, batch, capacity: float, k: Constants = CONSTANTS) -> MemoryBreakdown:
    """`MemoryBreakdown` of the larger stage for `iteration.ParallelConfig` ``par`` and
    `iteration.BatchConfig` ``batch`` on a GPU of ``capacity`` bytes."""
    shard = par.dp * par.cp
    flash = par.attention == "flash"
    mb = batch.micro_batch
    micro = batch.microbatches(par.dp)
    best = None
    for stage in ("first", "last") if par.pp > 1 else ("first",):
        n = stage_params(m, par.tp, par.pp, par.ep, stage)
        w = 2.0 * n / (shard if par.zero >= 3 else 1)
        if par.zero >= 3:
            w += 2 * 2.0 * layer_params_per_gpu(m, par.tp, par.ep)
        g = 2.0 * n / (shard if par.zero >= 2 else 1)
        o = 12.0 * n / (shard if par.zero >= 1 else 1)
        per_mb, working = stage_activation_bytes(m, mb, batch.seq_len, math.ceil(m.layers / par.pp), par.tp, par.sp,
                                                 par.cp, flash, par.recompute)
        if stage == "first":
            inflight = min(micro, par.pp)
            if par.vpp > 1 and par.pp > 1:
                inflight *= 1.0 + (par.pp - 1) / (par.pp * par.vpp)
            act = inflight * per_mb + working
        else:
            act = per_mb + working
        if stage == "last" or par.pp == 1:
            act += 4.0 * mb * batch.seq_len / par.cp * m.vocab / par.tp
        counted = w + g + o + act
        buf = k.frag_fraction * counted
        cand = (counted + buf, stage, w, g, o, act, buf, n)
        if best is None or cand[0] > best[0]:
            best = cand
    total, stage, w, g, o, act, buf, n = best
    usable = capacity - k.reserve_bytes
    return MemoryBreakdown(w, g, o, act, buf, total, capacity, usable, total <= usable, stage, n)
