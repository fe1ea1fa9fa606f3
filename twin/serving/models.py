"""Model shapes of served LLMs: layer counts and dimensions, weight bytes, KV bytes per token.

The shapes are the Hugging Face ``config.json`` values of each checkpoint, as LLMServingSim ships them
(``configs/model/<org>/<name>.json`` at casys-kaist/LLMServingSim 5daddb2). The per-layer timing profiles
are measured on a one-layer model (``hf_overrides.num_hidden_layers: 1`` in each profile's ``meta.yaml``),
so the layer count here multiplies them into an iteration time.

``SEQUENCES`` is the per-iteration layer walk of each architecture, copied from LLMServingSim's
``profiler/models/<model_type>.yaml`` (``sequence:``): it names which profiled layers one forward runs.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelShape:
    """Dimensions of a decoder-only transformer (counts; bytes per element in ``dtype_bytes``)."""
    name: str
    model_type: str
    num_layers: int
    hidden: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate: int = 0
    dtype_bytes: int = 2  # bf16

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def kv_bytes_per_token(self, tp: int = 1) -> int:
        """K and V bytes one token occupies on one of ``tp`` ranks (all layers)."""
        return 2 * self.num_kv_heads * self.head_dim * self.num_layers * self.dtype_bytes // max(tp, 1)

    def weight_bytes_per_rank(self, tp: int = 1, ep: int = 1) -> int:
        """Weight bytes one rank holds: LLMServingSim's ``MemoryModel.get_weight`` (vocab-parallel
        embedding and lm_head, column/row-parallel projections, replicated norms, experts split by EP)."""
        p, f, h = max(tp, 1), self.dtype_bytes, self.hidden
        q, kv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        emb = (self.vocab // p) * h * f
        block = 2 * h * f + h * ((q + 2 * kv) // p) * f + (q // p) * h * f
        if self.is_moe:
            e = max(ep, 1)
            block += (self.num_experts // e) * 3 * h * self.moe_intermediate * f + h * self.num_experts * f
        else:
            block += h * 2 * (self.intermediate // p) * f + (self.intermediate // p) * h * f
        return emb + block * self.num_layers + h * f + (self.vocab // p) * h * f

    def weight_bytes_total(self) -> int:
        return self.weight_bytes_per_rank(1, 1)


# Hugging Face config.json values (via LLMServingSim configs/model/, commit 5daddb2)
KNOWN_MODELS: dict[str, ModelShape] = {m.name: m for m in (
    ModelShape("meta-llama/Llama-3.1-8B", "llama", 32, 4096, 32, 8, 128, 14336, 128256),
    ModelShape("meta-llama/Llama-3.1-70B", "llama", 80, 8192, 64, 8, 128, 28672, 128256),
    ModelShape("Qwen/Qwen3-32B", "qwen3", 64, 5120, 64, 8, 128, 25600, 151936),
    ModelShape("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3_moe", 48, 2048, 32, 4, 128, 6144, 151936,
               num_experts=128, experts_per_token=8, moe_intermediate=768),
    ModelShape("mistralai/Mixtral-8x7B-v0.1", "mixtral", 32, 4096, 32, 8, 128, 14336, 32000,
               num_experts=8, experts_per_token=2, moe_intermediate=14336),
    ModelShape("microsoft/Phi-mini-MoE-instruct", "phimoe", 32, 4096, 32, 8, 128, 960, 32064,
               num_experts=16, experts_per_token=2, moe_intermediate=960),
    # Splitwise / DistServe models (HF configs of meta-llama/Llama-2-70b-hf, bigscience/bloom, facebook/opt-*)
    ModelShape("llama2-70b", "llama", 80, 8192, 64, 8, 128, 28672, 32000),
    ModelShape("bloom-176b", "bloom", 70, 14336, 112, 112, 128, 57344, 250880),
    ModelShape("opt-13b", "opt", 40, 5120, 40, 40, 128, 20480, 50272),
    ModelShape("opt-66b", "opt", 64, 9216, 72, 72, 128, 36864, 50272),
)}

#: per-iteration layer walk (LLMServingSim profiler/models/<model_type>.yaml ``sequence:``)
SEQUENCES: dict[str, dict[str, list[str]]] = {
    "llama": {"prologue": ["embedding"], "pre_attn": ["layernorm", "qkv_proj", "rotary_emb", "attention"],
              "post_attn": ["o_proj", "layernorm"], "mlp": ["gate_up_proj", "act_fn", "down_proj"],
              "head": ["final_layernorm", "lm_head", "sampler"]},
    "qwen3": {"prologue": ["embedding"], "pre_attn": ["layernorm", "qkv_proj", "qk_norm", "rotary_emb", "attention"],
              "post_attn": ["o_proj", "layernorm"], "mlp": ["gate_up_proj", "act_fn", "down_proj"],
              "head": ["final_layernorm", "lm_head", "sampler"]},
    "qwen3_moe": {"prologue": ["embedding"],
                  "pre_attn": ["layernorm", "qkv_proj", "qk_norm", "rotary_emb", "attention"],
                  "post_attn": ["o_proj", "layernorm"], "mlp": ["moe"],
                  "head": ["final_layernorm", "lm_head", "sampler"]},
}
# Mixtral and PhiMoE: the Llama walk with an MoE block (profiler/models/{mixtral,phimoe}.yaml)
for _t in ("mixtral", "phimoe"):
    SEQUENCES[_t] = {**SEQUENCES["llama"], "mlp": ["moe"]}

#: layers followed by a tensor-parallel all-reduce (LLMServingSim trace_generator._TP_ALLREDUCE_AFTER)
TP_ALLREDUCE_AFTER = ("o_proj", "down_proj")


def model_shape(name: str) -> ModelShape:
    """The shape of a known model (exact name, else its last path part, case-insensitive)."""
    if name in KNOWN_MODELS:
        return KNOWN_MODELS[name]
    low = {k.lower(): v for k, v in KNOWN_MODELS.items()}
    low.update({k.split("/")[-1].lower(): v for k, v in KNOWN_MODELS.items()})
    if name.lower() in low:
        return low[name.lower()]
    raise KeyError(f"unknown model {name!r}; known: {', '.join(KNOWN_MODELS)} "
                   "(add its Hugging Face config.json shape to hpctwin.twin.serving.models.KNOWN_MODELS)")
