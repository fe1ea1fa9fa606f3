"""FLOPs of a transformer: per-GPU GEMM shapes per layer, model FLOPs, and the papers' counts.

One multiply-add = 2 FLOPs. Per layer and forward pass over ``b`` sequences of ``s`` tokens
(h hidden, kv the K/V width with GQA, f the MLP width, a heads):

* QKV projections ``2 b s h (h + 2 kv)``; output projection ``2 b s h^2``;
* attention scores ``Q K^T`` and the softmax-weighted sum ``P V``: ``2 x 2 b s^2 h``, counted over
  the full s x s matrix (**no causal halving** in any counted FLOPs, as Narayanan et al. and PaLM
  count). The *time* model skips the masked half only for flash attention with a causal mask
  (`ParallelConfig.attention == "flash"`), which really skips those blocks; unfused attention
  (Megatron-LM 2021) computes the whole matrix;
* MLP ``2 b s h f x 2`` (GeLU: up, down) or ``x 3`` (SwiGLU: gate, up, down); MoE: the top-k
  experts' MLPs per token plus the router ``2 b s h E``;
* logits ``2 b s h V`` once per model (last pipeline stage).

Backward = 2 x forward (weight and input gradients of every GEMM). Activation recomputation adds
a forward (full) or the attention core (selective: scores, softmax, weighted sum).

Counted FLOPs (`narayanan_flops`, `palm_flops_per_token`):

* Narayanan et al. SC'21 eq. (3), with full recomputation (4 passes): ``F = 96 B s l h^2 (1 +
  s/(6h) + V/(16 l h))`` per iteration of B sequences, a GPT with f = 4h; their "achieved
  teraFLOP/s per GPU" is F / (time x GPUs). `hardware_flops` generalises it: (3 passes + the
  recomputed part) x forward FLOPs, for any model.
* PaLM MFU (Chowdhery et al. 2022, appendix B): ``6 N + 12 l h s`` FLOPs per token (N the
  parameters used in matmuls, `models.matmul_params`; attention without causal halving), no
  recomputation: MFU = tokens/s x that / (GPUs x peak).
"""
from __future__ import annotations

from dataclasses import dataclass

from .models import TransformerModel, matmul_params


@dataclass(frozen=True)
class Gemm:
    """A GEMM on one GPU: ``count`` products of (m x k) by (k x n); ``part`` in {"dense", "attn",
    "moe", "logits"}. FLOPs ``2 m n k count``."""

    name: str
    m: float
    n: float
    k: float
    count: float = 1.0
    part: str = "dense"

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.count

    @property
    def min_dim(self) -> float:
        """Smallest dimension (elements), the argument of the GEMM-efficiency curve."""
        return min(self.m, self.n, self.k)


def layer_gemms(m: TransformerModel, b: int, s: int, tp: int = 1, cp: int = 1, ep: int = 1) -> list[Gemm]:
    """Forward GEMMs of one layer on one GPU: ``b`` sequences of ``s`` tokens, tensor parallel
    ``tp`` (heads and MLP columns split; with more TP ranks than K/V heads each rank computes one
    K/V head, replicated), context parallel ``cp`` (tokens split; each GPU attends
    its s/cp queries to all s keys), expert parallel ``ep`` (experts split, tokens exchanged)."""
    h, d = m.hidden, m.head_dim
    tok = b * s / cp
    heads = m.heads / tp
    kv = max(m.kv_dim / tp, d)                                  # tp > kv heads: each rank keeps one K/V head
    g = [Gemm("qkv", tok, h / tp + 2 * kv, h),
         Gemm("scores", s / cp, s, d, b * heads, "attn"),
         Gemm("attn_v", s / cp, d, s, b * heads, "attn"),
         Gemm("proj", tok, h, h / tp)]
    if m.is_moe:
        per_expert = tok * m.top_k * ep / m.experts          # tokens one expert sees (balanced routing)
        n_local = m.experts / ep
        up = (m.mlp_matrices - 1) * m.ffn / tp
        g += [Gemm("router", tok, m.experts, h),
              Gemm("expert_up", per_expert, up, h, n_local, "moe"),
              Gemm("expert_down", per_expert, h, m.ffn / tp, n_local, "moe")]
    else:
        g += [Gemm("mlp_up", tok, (m.mlp_matrices - 1) * m.ffn / tp, h),
              Gemm("mlp_down", tok, h, m.ffn / tp)]
    return g


def logits_gemm(m: TransformerModel, b: int, s: int, tp: int = 1, cp: int = 1) -> Gemm:
    """The output-layer GEMM (vocabulary split over TP) on one GPU, forward."""
    return Gemm("logits", b * s / cp, m.vocab / tp, m.hidden, 1.0, "logits")


def forward_flops(m: TransformerModel, b: int, s: int) -> float:
    """Model FLOPs of one forward pass over ``b`` sequences (all layers + logits; no parallelism)."""
    per_layer = sum(x.flops for x in layer_gemms(m, b, s))
    return m.layers * per_layer + logits_gemm(m, b, s).flops


def attention_core_flops(m: TransformerModel, b: int, s: int) -> float:
    """Forward FLOPs of the attention core (scores + weighted sum) of all layers: ``4 b s^2 h l``."""
    return m.layers * sum(x.flops for x in layer_gemms(m, b, s) if x.part == "attn")


def model_flops(m: TransformerModel, b: int, s: int) -> float:
    """Training FLOPs without recomputation: 3 x forward (forward + backward)."""
    return 3.0 * forward_flops(m, b, s)


def hardware_flops(m: TransformerModel, b: int, s: int, recompute: str) -> float:
    """Training FLOPs the GPUs execute with ``recompute`` in {"none", "selective", "full"}: what
    Narayanan et al. count in "achieved teraFLOP/s" (eq. 3 for "full")."""
    extra = {"none": 0.0, "selective": attention_core_flops(m, b, s),
             "full": forward_flops(m, b, s) - logits_gemm(m, b, s).flops}[recompute]
    return model_flops(m, b, s) + extra


def narayanan_flops(batch: int, s: int, layers: int, h: int, vocab: int) -> float:
    """Narayanan et al. SC'21 eq. (3): FLOPs per iteration of ``batch`` sequences, full recompute."""
    return 96.0 * batch * s * layers * h * h * (1.0 + s / (6.0 * h) + vocab / (16.0 * layers * h))


def palm_flops_per_token(m: TransformerModel, s: int) -> float:
    """PaLM (Chowdhery et al. 2022, app. B) training FLOPs per token: ``6 N + 12 l h s``."""
    return 6.0 * matmul_params(m) + 12.0 * m.layers * m.hidden * s
