"""Building pools of serving instances outside a bench bundle (Azure/Mooncake traces, what-ifs).

A `PoolSpec` names the GPU type (a folder of ``LLM-serving/LLMServingSim/perf/``), the model, the TP
degree and the number of instances, with vLLM's engine settings; `build_pool` loads the per-layer
profile once and makes the instances.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .bundle import GIB, VLLM_DEFAULTS, find_data_dir
from .instance import Instance
from .kvcache import BlockManager
from .models import model_shape
from .profiles import IterationModel, LayerProfile, skew_alpha_from_meta

#: GPU memory (GiB as LLMServingSim's configs give it) and the host-link figures of its bench configs
GPUS: dict[str, dict[str, float]] = {
    # LLMServingSim bench/examples/RTX4090/*/config.json: 24 GB, link_bw 16 GB/s, link_latency 1000 ns
    "RTX4090": {"mem_gib": 24.0, "link_bw_GBps": 16.0, "link_latency_ns": 1000.0},
    # LLMServingSim bench/examples/RTXPRO6000/*/config.json: 96 GB, link_bw 16 GB/s, link_latency 20000 ns
    "RTXPRO6000": {"mem_gib": 96.0, "link_bw_GBps": 16.0, "link_latency_ns": 20000.0},
}


@dataclass
class PoolSpec:
    """``count`` identical vLLM instances of ``model`` on ``tp`` GPUs of type ``hardware`` each."""
    hardware: str
    model: str
    tp: int = 1
    count: int = 1
    mem_util: float = VLLM_DEFAULTS["gpu_memory_utilization"]
    max_num_seqs: int = VLLM_DEFAULTS["max_num_seqs"]
    max_num_batched_tokens: int = VLLM_DEFAULTS["max_num_batched_tokens"]
    block_size: int = VLLM_DEFAULTS["block_size"]
    prefix_caching: bool = False
    async_scheduling: bool = VLLM_DEFAULTS["async_scheduling"]


def instance_factory(spec: PoolSpec, data_dir: str | Path | None = None) -> Callable[[int], Instance]:
    """A function ``make(iid) -> Instance`` building fresh instances of ``spec`` (the per-layer profile
    of ``perf/<hardware>/<model>/bf16/tp<tp>/`` is loaded once, here; ``spec.count`` is not used)."""
    if spec.hardware not in GPUS:
        raise ValueError(f"unknown GPU type {spec.hardware!r}; known: {', '.join(GPUS)}")
    g = GPUS[spec.hardware]
    shape = model_shape(spec.model)
    folder = find_data_dir(data_dir) / "LLM-serving" / "LLMServingSim" / "perf" / spec.hardware / shape.name / \
        "bf16" / f"tp{spec.tp}"
    prof = LayerProfile.load(folder)
    alpha = skew_alpha_from_meta(folder.parent / "meta.yaml", spec.tp)
    free = int(g["mem_gib"] * GIB * spec.mem_util) - shape.weight_bytes_per_rank(spec.tp)
    blocks = free // (shape.kv_bytes_per_token(spec.tp) * spec.block_size)

    def make(iid: int) -> Instance:
        model = IterationModel(shape, prof, tp=spec.tp, link_bw_GBps=g["link_bw_GBps"],
                               link_latency_ns=g["link_latency_ns"], skew_alpha=alpha)
        return Instance(iid, model, BlockManager(blocks, spec.block_size, spec.prefix_caching),
                        spec.max_num_seqs, spec.max_num_batched_tokens, async_scheduling=spec.async_scheduling)
    return make


def build_pool(spec: PoolSpec, data_dir: str | Path | None = None, first_id: int = 0) -> list[Instance]:
    """The instances of a pool, timed from ``perf/<hardware>/<model>/bf16/tp<tp>/``."""
    make = instance_factory(spec, data_dir)
    return [make(first_id + k) for k in range(spec.count)]
