"""Building pools of serving instances outside a bench bundle (Azure/Mooncake traces, what-ifs).

A `PoolSpec` names the GPU type (a folder of ``LLM-serving/LLMServingSim/perf/``), the model, the TP
degree and the number of instances, with vLLM's engine settings; `build_pool` loads the per-layer
profile once and makes the instances. Every field of a `PoolSpec` is checked when it is made (type and
range, `limits`); a GPU type, model or TP degree without a timing profile is refused listing the profiles
the data directory has.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .bundle import GIB, VLLM_DEFAULTS, find_data_dir
from .instance import Instance
from .kvcache import BlockManager
from .limits import (MAX_BATCHED_TOKENS, MAX_BLOCK_SIZE, MAX_INSTANCES, MAX_NUM_SEQS, MAX_TP, check_bool,
                     check_fraction, check_int, check_str)
from .models import model_shape
from .profiles import IterationModel, LayerProfile, available_profiles, find_profile, skew_alpha_from_meta

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

    def __post_init__(self) -> None:
        """Every field checked (type, range; `limits`): a ValueError naming the field."""
        check_str(self.hardware, "hardware")
        check_str(self.model, "model")
        check_int(self.tp, "tp", lo=1, hi=MAX_TP, what="GPUs")
        check_int(self.count, "instances", lo=1, hi=MAX_INSTANCES, what="instances")
        check_fraction(self.mem_util, "gpu_memory_utilization")
        check_int(self.max_num_seqs, "max_num_seqs", lo=1, hi=MAX_NUM_SEQS, what="sequences")
        check_int(self.max_num_batched_tokens, "max_num_batched_tokens", lo=1, hi=MAX_BATCHED_TOKENS, what="tokens")
        check_int(self.block_size, "block_size", lo=1, hi=MAX_BLOCK_SIZE, what="tokens")
        check_bool(self.prefix_caching, "prefix_caching")
        check_bool(self.async_scheduling, "async_scheduling")


def instance_factory(spec: PoolSpec, data_dir: str | Path | None = None) -> Callable[[int], Instance]:
    """A function ``make(iid) -> Instance`` building fresh instances of ``spec`` (the per-layer profile
    of ``perf/<hardware>/<model>/bf16/tp<tp>/`` is loaded once, here; ``spec.count`` is not used)."""
    perf = find_data_dir(data_dir) / "LLM-serving" / "LLMServingSim" / "perf"
    if spec.hardware not in GPUS:
        have = available_profiles(perf)
        raise ValueError(f"hardware {spec.hardware!r}: unknown GPU type; known: {', '.join(GPUS)}"
                         + (f" (profiles under {perf}, hardware model tp: {'; '.join(have)})" if have else ""))
    g = GPUS[spec.hardware]
    try:
        shape = model_shape(spec.model)
    except KeyError:
        have = [x.split(" ", 1)[1] for x in available_profiles(perf) if x.startswith(spec.hardware + " ")]
        raise ValueError(f"model {spec.model!r}: unknown model; profiles on {spec.hardware} (model tp): "
                         f"{'; '.join(have) or f'none under {perf}'}") from None
    folder = find_profile(perf, spec.hardware, shape.name, spec.tp)
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
