"""Transformer model presets (decoder-only) with their sources, and the parameter count.

A `TransformerModel` holds what the FLOP, memory and time models need: layers, hidden size ``h``,
attention heads ``a`` and key/value heads (GQA: ``kv_heads < heads``), MLP width ``ffn`` and kind
(``"gelu"``: 2 matrices h x ffn; ``"swiglu"``: 3 matrices), vocabulary ``V``, norms, biases,
dropout, learned position embeddings, tied input/output embeddings, and for mixture-of-experts
models ``experts`` (E), ``top_k`` (k) and the per-expert MLP width (``ffn``).

Sources (each preset names its own): GPT-3 sizes, Brown et al. 2020, "Language Models are Few-Shot
Learners", Table 2.1 (vocabulary 50,257 BPE tokens, context 2,048; GPT-2 architecture: LayerNorm
with bias, GeLU MLP of 4h, learned positions, tied embeddings, dropout). Megatron-LM GPT models:
Narayanan et al., SC'21, "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", Table 1 (vocabulary 51,200, sequence 2,048; layers/hidden/heads also in
NVIDIA/Megatron-LM ``examples/academic_paper_scripts/sc21/run_table_1.sh``). Llama 3: Meta, "The
Llama 3 Herd of Models", 2024, Table 3 (layers, model dimension, FFN dimension, heads, 8 key/value
heads, SwiGLU, RMSNorm, RoPE, no biases) and the Hugging Face ``config.json`` (vocab_size 128,256,
untied embeddings; the same values as `twin.serving.models` for 8B and 70B). Mixtral 8x7B: Jiang et
al. 2024, "Mixtral of Experts", Table 1 (dim 4096, 32 layers, head_dim 128, 32 heads, 8 kv heads,
hidden_dim 14336, vocab 32000, 8 experts, top-2) and its ``config.json`` (untied embeddings).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TransformerModel:
    """A decoder-only transformer (counts; see the module docstring for the fields)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    mlp: str = "gelu"               # "gelu" (2 matrices) or "swiglu" (3 matrices)
    norm: str = "layernorm"         # "layernorm" (weight + bias) or "rmsnorm" (weight)
    biases: bool = True             # linear layers carry biases
    dropout: bool = True            # dropout after attention probabilities and both blocks
    learned_positions: int = 0      # rows of a learned position embedding (0: RoPE / none)
    tied_embeddings: bool = True    # output layer shares the input embedding matrix
    experts: int = 0                # MoE: experts per layer (0: dense)
    top_k: int = 0                  # MoE: experts per token
    source: str = ""

    @property
    def head_dim(self) -> int:
        """Dimension of one attention head (hidden / heads)."""
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        """Width of the K (or V) projection: kv_heads x head_dim."""
        return self.kv_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices of one MLP (expert): 2 (GeLU) or 3 (SwiGLU gate, up, down)."""
        return 3 if self.mlp == "swiglu" else 2


def attention_params(m: TransformerModel) -> int:
    """Parameters of one attention block: Q, K, V and output projections (+ biases)."""
    h = m.hidden
    w = h * (h + 2 * m.kv_dim) + h * h
    return w + ((h + 2 * m.kv_dim) + h if m.biases else 0)


def mlp_params(m: TransformerModel) -> int:
    """Parameters of one MLP (one expert for MoE), biases included."""
    h, f = m.hidden, m.ffn
    w = m.mlp_matrices * h * f
    return w + ((m.mlp_matrices - 1) * f + h if m.biases else 0)


def norm_params(m: TransformerModel) -> int:
    """Parameters of one normalisation layer (2h LayerNorm, h RMSNorm)."""
    return (2 if m.norm == "layernorm" else 1) * m.hidden


def layer_params(m: TransformerModel, active: bool = False) -> int:
    """Parameters of one transformer layer; ``active``: count only the top-k experts of an MoE."""
    mlp = mlp_params(m)
    if m.is_moe:
        mlp = mlp * (m.top_k if active else m.experts) + m.hidden * m.experts   # + router
    return attention_params(m) + mlp + 2 * norm_params(m)


def embedding_params(m: TransformerModel) -> int:
    """Input embedding (+ learned positions) parameters."""
    return m.vocab * m.hidden + m.learned_positions * m.hidden


def output_params(m: TransformerModel) -> int:
    """Final norm plus the output (logits) matrix when not tied to the input embedding."""
    return norm_params(m) + (0 if m.tied_embeddings else m.vocab * m.hidden)


def total_params(m: TransformerModel, active: bool = False) -> int:
    """All parameters (``active``: top-k experts only)."""
    return m.layers * layer_params(m, active) + embedding_params(m) + output_params(m)


def matmul_params(m: TransformerModel) -> int:
    """Weights used in matrix multiplies per token (active experts and the router; the input
    embedding lookup, learned positions, biases and norms excluded, the logits matrix included
    once): the ``N`` of PaLM's 6N."""
    h = m.hidden
    router = h * m.experts if m.is_moe else 0
    per_layer = h * (h + 2 * m.kv_dim) + h * h + m.mlp_matrices * h * m.ffn * (m.top_k if m.is_moe else 1) + router
    return m.layers * per_layer + m.vocab * h


def _gpt(name: str, layers: int, hidden: int, heads: int, vocab: int, seq: int, source: str) -> TransformerModel:
    return TransformerModel(name, layers, hidden, heads, heads, 4 * hidden, vocab, learned_positions=seq,
                            source=source)


_GPT3 = "Brown et al. 2020, Table 2.1"
_MEG = "Narayanan et al. SC'21, Table 1"
_LLAMA3 = "Llama 3 Herd of Models (2024), Table 3; HF config.json"

MODELS: dict[str, TransformerModel] = {m.name: m for m in (
    # GPT-3 (Brown et al. 2020, Table 2.1): n_layers, d_model, n_heads; d_ff = 4 d_model; V = 50257
    _gpt("gpt3-125m", 12, 768, 12, 50257, 2048, _GPT3),
    _gpt("gpt3-350m", 24, 1024, 16, 50257, 2048, _GPT3),
    _gpt("gpt3-760m", 24, 1536, 16, 50257, 2048, _GPT3),
    _gpt("gpt3-1.3b", 24, 2048, 24, 50257, 2048, _GPT3),
    _gpt("gpt3-2.7b", 32, 2560, 32, 50257, 2048, _GPT3),
    _gpt("gpt3-6.7b", 32, 4096, 32, 50257, 2048, _GPT3),
    # 13B: Table 2.1 prints d_model 5140 with 40 heads of d_head 128 (= 5120); 5120 kept (divisible by TP)
    _gpt("gpt3-13b", 40, 5120, 40, 50257, 2048, _GPT3),
    _gpt("gpt3-175b", 96, 12288, 96, 50257, 2048, _GPT3),
    # Megatron-LM SC'21 Table 1 (heads, hidden, layers); V = 51,200, s = 2,048
    _gpt("megatron-1.7b", 24, 2304, 24, 51200, 2048, _MEG),
    _gpt("megatron-3.6b", 30, 3072, 32, 51200, 2048, _MEG),
    _gpt("megatron-7.5b", 36, 4096, 32, 51200, 2048, _MEG),
    _gpt("megatron-18b", 40, 6144, 48, 51200, 2048, _MEG),
    _gpt("megatron-39b", 48, 8192, 64, 51200, 2048, _MEG),
    _gpt("megatron-76b", 60, 10240, 80, 51200, 2048, _MEG),
    _gpt("megatron-145b", 80, 12288, 96, 51200, 2048, _MEG),
    _gpt("megatron-310b", 96, 16384, 128, 51200, 2048, _MEG),
    _gpt("megatron-530b", 105, 20480, 128, 51200, 2048, _MEG),
    _gpt("megatron-1t", 128, 25600, 160, 51200, 2048, _MEG),
    # Llama 3 (Table 3): layers, dim, FFN dim, heads, 8 KV heads; SwiGLU, RMSNorm, no biases, untied
    TransformerModel("llama3-8b", 32, 4096, 32, 8, 14336, 128256, mlp="swiglu", norm="rmsnorm", biases=False,
                     dropout=False, tied_embeddings=False, source=_LLAMA3),
    TransformerModel("llama3-70b", 80, 8192, 64, 8, 28672, 128256, mlp="swiglu", norm="rmsnorm", biases=False,
                     dropout=False, tied_embeddings=False, source=_LLAMA3),
    TransformerModel("llama3-405b", 126, 16384, 128, 8, 53248, 128256, mlp="swiglu", norm="rmsnorm", biases=False,
                     dropout=False, tied_embeddings=False, source=_LLAMA3),
    # Mixtral 8x7B (Jiang et al. 2024, Table 1): ffn is the per-expert hidden_dim
    TransformerModel("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, mlp="swiglu", norm="rmsnorm", biases=False,
                     dropout=False, tied_embeddings=False, experts=8, top_k=2,
                     source="Jiang et al. 2024 (Mixtral of Experts), Table 1; HF config.json"),
)}
