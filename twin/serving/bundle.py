"""LLMServingSim bench bundles (``bench/<hw>/<model>/``): cluster config + vLLM engine settings -> instances.

A bundle holds ``config.json`` (LLMServingSim cluster config: ``link_bw`` GB/s, ``link_latency`` ns, nodes
with instances: ``model_name``, ``hardware``, ``npu_mem`` {``mem_size`` GiB, ``mem_util``}, ``tp_size``,
``ep_size``, ``dp_group``) and ``vllm/meta.json`` (``engine_kwargs``, ``dataset_path``, optional ``kv_cache``
and ``resolved_config`` of the measured vLLM run).

Data directory: ``--data-dir``, else ``$HPCTWIN_DATA``, else ``../shared/datasets`` from the working
directory, else ``shared/datasets`` beside the repository. The workload is ``dataset_path`` under
``<data>/LLM-serving/LLMServingSim/`` (``.gz`` accepted) and the profiles are
``<data>/LLM-serving/LLMServingSim/perf/<hardware>/<model_name>/bf16/tp<k>/``.

KV capacity per instance: vLLM's resolved ``kv_cache.num_gpu_blocks`` when the meta records it (vLLM
logs it at start-up: weights, activation peak and CUDA context already subtracted), else LLMServingSim's
rule ``floor((mem_size * mem_util - weights per rank) / (KV bytes per token per rank * block_size))``.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from hpctwin.datasets.registry import default_data_dir
from hpctwin.datasets.serving_traces import ServingRequest, read_llmservingsim, resolve_gz

from .dpgroup import DPGroup
from .instance import Instance
from .kvcache import BlockManager
from .models import ModelShape, model_shape
from .profiles import IterationModel, LayerProfile, skew_alpha_from_meta

GIB = 1024 ** 3  # LLMServingSim's GB_TO_BYTE (its log prints GiB)

# vLLM V1 engine defaults used when meta.json leaves a setting out (vllm/config/scheduler.py, v0.19:
# max_num_seqs 256 and max_num_batched_tokens 2048 for the OpenAI server usage context; block size 16;
# gpu_memory_utilization 0.9; prefix caching and chunked prefill on)
VLLM_DEFAULTS = {"max_num_seqs": 256, "max_num_batched_tokens": 2048, "block_size": 16,
                 "gpu_memory_utilization": 0.9, "enable_prefix_caching": True,
                 # async scheduling: on in the resolved config of the measured vLLM 0.19 run (RTX4090 bundle)
                 "async_scheduling": True}


class BundleError(ValueError):
    """A bundle is missing a file or a field (the message names it)."""


@dataclass
class InstanceSpec:
    model: ModelShape
    hardware: str
    tp: int
    ep: int
    mem_gib: float
    mem_util: float
    dp_group: str | None = None
    pd_type: str | None = None   # LLMServingSim's "prefill" / "decode" (None: colocated)
    mem_bw_GBps: float = 0.0     # npu_mem.mem_bw (GB/s), for the MoE buffer traffic of sharded ranks


@dataclass
class Bundle:
    path: Path
    data_dir: Path
    instances: list[InstanceSpec]
    link_bw_GBps: float
    link_latency_ns: float
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    prefix_caching: bool
    num_gpu_blocks: int | None
    reserve_full_isl: bool
    long_prefill_token_threshold: int
    dataset: Path
    async_scheduling: bool = True
    chunked_prefill: bool = True
    meta: dict = field(default_factory=dict)

    @property
    def serving_root(self) -> Path:
        return self.data_dir / "LLM-serving" / "LLMServingSim"

    def workload(self) -> list[ServingRequest]:
        return read_llmservingsim(self.dataset, keep_token_ids=self.prefix_caching)

    def profile_dir(self, spec: InstanceSpec) -> Path:
        return self.serving_root / "perf" / spec.hardware / spec.model.name / "bf16" / f"tp{spec.tp}"

    def kv_blocks(self, spec: InstanceSpec) -> int:
        if self.num_gpu_blocks:
            return int(self.num_gpu_blocks)
        per_block = spec.model.kv_bytes_per_token(spec.tp) * self.block_size
        free = int(spec.mem_gib * GIB * spec.mem_util) - spec.model.weight_bytes_per_rank(spec.tp, spec.ep)
        return free // per_block

    def build_instances(self, overhead_s: float = 0.0) -> list[Instance]:
        out = []
        profiles: dict[Path, LayerProfile] = {}
        dp_size: dict[str, int] = {}
        for spec in self.instances:
            if spec.dp_group is not None:
                dp_size[spec.dp_group] = dp_size.get(spec.dp_group, 0) + 1
        for i, spec in enumerate(self.instances):
            d = self.profile_dir(spec)
            if d not in profiles:
                profiles[d] = LayerProfile.load(d)
            model = IterationModel(spec.model, profiles[d], tp=spec.tp, link_bw_GBps=self.link_bw_GBps,
                                   link_latency_ns=self.link_latency_ns, ep=spec.ep,
                                   dp=dp_size.get(spec.dp_group, 1), mem_bw_GBps=spec.mem_bw_GBps,
                                   overhead_s=overhead_s,
                                   skew_alpha=skew_alpha_from_meta(d.parent / "meta.yaml", spec.tp))
            kv = BlockManager(self.kv_blocks(spec), self.block_size, caching=self.prefix_caching)
            out.append(Instance(i, model, kv, self.max_num_seqs, self.max_num_batched_tokens,
                                reserve_full_isl=self.reserve_full_isl,
                                long_prefill_token_threshold=self.long_prefill_token_threshold,
                                async_scheduling=self.async_scheduling, chunked_prefill=self.chunked_prefill))
        return out

    def units(self, instances: list[Instance]) -> list:
        """What advances in time: each DP group (``dp_group`` in config.json) as one lockstep unit, every
        other instance alone."""
        groups: dict[str, list[Instance]] = {}
        units: list = []
        for spec, inst in zip(self.instances, instances):
            if spec.dp_group is None:
                units.append(inst)
            else:
                if spec.dp_group not in groups:
                    groups[spec.dp_group] = []
                    units.append(groups[spec.dp_group])
                groups[spec.dp_group].append(inst)
        return [DPGroup(u) if isinstance(u, list) else u for u in units]


def _load_json(path: Path) -> dict:
    if not path.exists():
        raise BundleError(f"{path}: file not found (a bundle has config.json and vllm/meta.json, laid out like "
                          "LLMServingSim/bench/<hw>/<model>/)")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise BundleError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from None


def _need(d: dict, key: str, where: str):
    if key not in d or d[key] is None:
        raise BundleError(f"{where}: missing field {key!r}")
    return d[key]


def _ep_size(inst: dict, engine_kwargs: dict, tp: int, is_moe: bool) -> int:
    """Expert-parallel degree of an instance: ``config.json``'s ``ep_size`` (LLMServingSim: the total EP
    degree across the DP group); when absent, what the measured vLLM run did: ``enable_expert_parallel``
    makes EP span the DP x TP ranks (vLLM ``FusedMoEParallelConfig.make``: ``ep_size = dp_size x tp_size``),
    without it the experts are TP-sharded (EP 1). A dense model has no experts to shard (1)."""
    if inst.get("ep_size") is not None:
        return int(inst["ep_size"])
    if not is_moe or not engine_kwargs.get("enable_expert_parallel"):
        return 1
    return tp * int(engine_kwargs.get("data_parallel_size") or 1)


def find_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    d = default_data_dir(data_dir)
    if d is None:
        raise BundleError("no data directory: give --data-dir, set HPCTWIN_DATA, or place the data in "
                          "../shared/datasets")
    return Path(d)


def load_bundle(path: str | os.PathLike, data_dir: str | os.PathLike | None = None) -> Bundle:
    """Read a bundle folder and resolve its workload and data directory."""
    path = Path(path)
    cfg_path, meta_path = path / "config.json", path / "vllm" / "meta.json"
    cfg, meta = _load_json(cfg_path), _load_json(meta_path)
    ek = meta.get("engine_kwargs") or {}
    kvm = meta.get("kv_cache") or {}
    rc = meta.get("resolved_config") or {}
    sc = rc.get("scheduler_config") or {}
    cc = rc.get("cache_config") or {}
    specs = []
    for ni, node in enumerate(_need(cfg, "nodes", str(cfg_path))):
        for ii, inst in enumerate(_need(node, "instances", f"{cfg_path}: nodes[{ni}]")):
            where = f"{cfg_path}: nodes[{ni}].instances[{ii}]"
            mem = _need(inst, "npu_mem", where)
            name = _need(inst, "model_name", where)
            try:
                shape = model_shape(name)
            except KeyError as e:
                raise BundleError(f"{where}: field 'model_name': {e.args[0]}") from None
            tp = int(inst.get("tp_size") or 1)
            specs.append(InstanceSpec(
                shape, str(_need(inst, "hardware", where)), tp,
                _ep_size(inst, ek, tp, shape.is_moe), float(_need(mem, "mem_size", f"{where}.npu_mem")),
                float(mem.get("mem_util") or kvm.get("gpu_memory_utilization")
                      or VLLM_DEFAULTS["gpu_memory_utilization"]), inst.get("dp_group"), inst.get("pd_type"),
                float(mem.get("mem_bw") or 0.0)))
            if specs[-1].pd_type not in (None, "prefill", "decode"):
                raise BundleError(f"{where}: field 'pd_type': expected null, prefill or decode, got "
                                  f"{specs[-1].pd_type!r}")
    if not specs:
        raise BundleError(f"{cfg_path}: no instances")
    ddir = find_data_dir(data_dir)
    ds = _need(meta, "dataset_path", str(meta_path))
    cand = Path(ds)
    if not cand.is_absolute():
        local = path / cand
        cand = local if (local.exists() or local.with_name(local.name + ".gz").exists()) \
            else ddir / "LLM-serving" / "LLMServingSim" / cand
    if not (cand.exists() or cand.with_name(cand.name + ".gz").exists()):
        # a path of the machine that measured the run: look for the same file under workloads/
        alt = ddir / "LLM-serving" / "LLMServingSim" / "workloads" / cand.name.removesuffix(".gz")
        cand = alt if (alt.exists() or alt.with_name(alt.name + ".gz").exists()) else cand
    try:
        dataset = resolve_gz(cand)
    except ValueError as e:
        raise BundleError(f"{meta_path}: field 'dataset_path': {e} (resolved against the data directory "
                          f"{ddir}; give --data-dir)") from None

    def pick(*vals, default):
        for v in vals:
            if v is not None:
                return v
        return default
    return Bundle(
        path=path, data_dir=ddir, instances=specs,
        link_bw_GBps=float(cfg.get("link_bw", 16)), link_latency_ns=float(cfg.get("link_latency", 1000)),
        max_num_seqs=int(pick(ek.get("max_num_seqs"), sc.get("max_num_seqs"), default=VLLM_DEFAULTS["max_num_seqs"])),
        max_num_batched_tokens=int(pick(ek.get("max_num_batched_tokens"), sc.get("max_num_batched_tokens"),
                                        default=VLLM_DEFAULTS["max_num_batched_tokens"])),
        block_size=int(pick(kvm.get("block_size"), cc.get("block_size"), default=VLLM_DEFAULTS["block_size"])),
        prefix_caching=bool(pick(kvm.get("enable_prefix_caching"), cc.get("enable_prefix_caching"),
                                 ek.get("enable_prefix_caching"), default=VLLM_DEFAULTS["enable_prefix_caching"])),
        num_gpu_blocks=pick(kvm.get("num_gpu_blocks"), cc.get("num_gpu_blocks"), default=None),
        reserve_full_isl=bool(pick(sc.get("scheduler_reserve_full_isl"), default=True)),
        long_prefill_token_threshold=int(pick(sc.get("long_prefill_token_threshold"), default=0)),
        dataset=dataset, meta=meta,
        async_scheduling=bool(pick(sc.get("async_scheduling"), ek.get("async_scheduling"),
                                   default=VLLM_DEFAULTS["async_scheduling"])),
        chunked_prefill=bool(pick(sc.get("enable_chunked_prefill"), ek.get("enable_chunked_prefill"), default=True)))
