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
logs it at start-up: weights, activation peak and CUDA context already subtracted), else its
``kv_cache.kv_cache_memory_bytes`` (bytes per GPU, which overrides gpu_memory_utilization in vLLM) over the
bytes of one block, else LLMServingSim's rule
``floor((mem_size * mem_util - weights per rank) / (KV bytes per token per rank * block_size))``.

Checks (`load_bundle`): every field read has its type, unit and range checked (`limits`; a fraction refuses a
percentage, a GiB size refuses MiB or bytes, a bandwidth must be > 0 and in GB/s); errors name the file and
the key path (``config.json: nodes[0].instances[1].npu_mem.mem_util: 90: a fraction in (0, 1] is expected;
did you mean 0.90?``). config.json refuses keys it does not know (`CONFIG_KEYS`), with the closest known one;
meta.json is the measured run's record, so only the keys read are checked. A hardware/model/TP without a
timing profile is refused listing the profiles the data directory has.
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
from .limits import (MAX_BATCHED_TOKENS, MAX_BLOCK_SIZE, MAX_GBPS, MAX_GPU_MEM_GIB, MAX_INSTANCES, MAX_KV_BLOCKS,
                     MAX_LATENCY_NS, MAX_NUM_SEQS, MAX_TP, check_bool, check_bytes, check_fraction, check_int,
                     check_number, check_str)
from .models import ModelShape, model_shape
from .plugins import did_you_mean
from .profiles import IterationModel, LayerProfile, find_profile, skew_alpha_from_meta

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
    #: vLLM's kv_cache_memory_bytes (KV cache per GPU, bytes) when the run set it (overrides mem_util)
    kv_cache_memory_bytes: int | None = None

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
        if self.kv_cache_memory_bytes:
            return self.kv_cache_memory_bytes // per_block
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
            d = find_profile(self.serving_root / "perf", spec.hardware, spec.model.name, spec.tp)
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


#: keys of LLMServingSim's cluster config this twin reads or knowingly leaves aside (descriptive ones:
#: num_*, cpu_mem, mem_latency); any other key is refused, with the closest known key: a misspelt key or
#: an LLMServingSim feature this twin does not model (pipeline parallelism, per-instance engine settings,
#: CXL/PIM memory, power) must not be silently ignored
CONFIG_KEYS = {
    "": ("num_nodes", "link_bw", "link_latency", "nodes"),
    "node": ("num_instances", "cpu_mem", "instances"),
    "cpu_mem": ("mem_size", "mem_bw", "mem_latency"),
    "instance": ("model_name", "hardware", "npu_mem", "num_npus", "tp_size", "ep_size", "dp_group", "pd_type"),
    "npu_mem": ("mem_size", "mem_bw", "mem_latency", "mem_util"),
}


def _load_json(path: Path) -> dict:
    """A JSON object file; errors name the file (and the line of a syntax error)."""
    if not path.exists():
        raise BundleError(f"{path}: file not found (a bundle has config.json and vllm/meta.json, laid out like "
                          "LLMServingSim/bench/<hw>/<model>/)")
    if not path.is_file():
        raise BundleError(f"{path}: not a regular file")
    raw = path.read_bytes()
    if not raw.strip():
        raise BundleError(f"{path}: empty file (expected a JSON object)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise BundleError(f"{path}:{line}: byte 0x{raw[e.start]:02x} is not UTF-8 text; a bundle's JSON files "
                          "are UTF-8") from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise BundleError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from None
    except ValueError as e:                # an integer of more than 4300 digits
        raise BundleError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(d, dict):
        raise BundleError(f"{path}: expected a JSON object, got {type(d).__name__}")
    return d


def _need(d: dict, key: str, where: str):
    if key not in d or d[key] is None:
        raise BundleError(f"{where}: missing field {key!r}")
    return d[key]


def _table(v: object, where: str, kind: str | None = None, nullable: bool = True) -> dict:
    """``v`` as a JSON object (None -> {} when ``nullable``); with ``kind`` its keys must be `CONFIG_KEYS`."""
    if v is None and nullable:
        return {}
    if not isinstance(v, dict):
        raise BundleError(f"{where}: {type(v).__name__} {str(v)[:40]!r}: expected a JSON object")
    if kind is not None:
        known = CONFIG_KEYS[kind]
        for k in v:
            if k not in known:
                raise BundleError(f"{where}: unknown key {k!r}{did_you_mean(k, known)}; known: {', '.join(known)} "
                                  "(other LLMServingSim features are not modelled by hpctwin)")
    return v


def _list(v: object, where: str) -> list:
    if not isinstance(v, list):
        raise BundleError(f"{where}: {type(v).__name__} {str(v)[:40]!r}: expected a JSON list")
    return v


def _at(where: str, key: str) -> str:
    """The label of ``key`` inside ``where`` (``file: a.b`` + ``c`` -> ``file: a.b.c``; ``file:`` + ``c`` ->
    ``file: c``)."""
    return f"{where} {key}" if where.endswith(":") else f"{where}.{key}"


def _opt(d: dict, key: str, where: str, check, *args, **kw):
    """``check(d[key], label, BundleError, ...)`` when the key is there and not null, else None."""
    v = d.get(key)
    return None if v is None else check(v, _at(where, key), BundleError, *args, **kw)


def _mem_size_gib(v: object, label: str) -> float:
    """npu_mem.mem_size: GiB of one device (LLMServingSim's unit), refusing MiB or bytes given for GiB."""
    f = check_number(v, label, BundleError, lo_open=True, unit="GiB")
    if f > MAX_GPU_MEM_GIB:
        unit, scale = ("bytes", GIB) if f >= 1 << 30 else ("MiB", 1024)
        raise BundleError(f"{label}: {f:,.0f} GiB is more than any device ({MAX_GPU_MEM_GIB:,.0f} GiB); looks "
                          f"like {unit}; give GiB (e.g. {f / scale:g})")
    return f


def _gbps(v: object, label: str, lo_open: bool) -> float:
    """A bandwidth in GB/s, refusing B/s or MB/s given for GB/s."""
    return check_number(v, label, BundleError, lo_open=lo_open, hi=MAX_GBPS, unit="GB/s",
                        hint="looks like B/s or MB/s; give GB/s (e.g. 16)")


def _latency_ns(v: object, label: str) -> float:
    f = check_number(v, label, BundleError, hi=MAX_LATENCY_NS, unit="ns", hint="give nanoseconds (e.g. 1000)")
    if 0 < f < 1:
        raise BundleError(f"{label}: {f:g} ns is below a nanosecond; looks like seconds or microseconds; give "
                          "nanoseconds (e.g. 1000)")
    return f


def _check_count(d: dict, key: str, items: list, where: str) -> None:
    """LLMServingSim's descriptive counts (num_nodes, num_instances) must match the lists they count."""
    n = _opt(d, key, where, check_int, lo=0)
    if n is not None and n != len(items):
        raise BundleError(f"{_at(where, key)}: {n} but the list it counts holds {len(items)}")


def _instance_spec(inst: object, where: str, ek: dict, kvm: dict) -> InstanceSpec:
    """One ``nodes[i].instances[j]`` entry of config.json, every field checked."""
    inst = _table(inst, where, "instance", nullable=False)
    mem = _table(_need(inst, "npu_mem", where), f"{where}.npu_mem", "npu_mem", nullable=False)
    name = check_str(_need(inst, "model_name", where), f"{where}.model_name", BundleError)
    try:
        shape = model_shape(name)
    except KeyError as e:
        raise BundleError(f"{where}: field 'model_name': {e.args[0]}") from None
    hw = check_str(_need(inst, "hardware", where), f"{where}.hardware", BundleError)
    tp = _opt(inst, "tp_size", where, check_int, lo=1, hi=MAX_TP, what="GPUs")
    tp = 1 if tp is None else tp
    _opt(inst, "num_npus", where, check_int, lo=1, hi=MAX_TP * MAX_INSTANCES, what="NPUs")
    ep = _opt(inst, "ep_size", where, check_int, lo=1, hi=MAX_TP * MAX_INSTANCES, what="ranks")
    dp_group = inst.get("dp_group")
    if dp_group is not None and (isinstance(dp_group, bool) or not isinstance(dp_group, (str, int))):
        raise BundleError(f"{where}.dp_group: {dp_group!r}: expected a group name (string) or null")
    pd_type = inst.get("pd_type")
    if pd_type not in (None, "prefill", "decode"):
        raise BundleError(f"{where}: field 'pd_type': expected null, prefill or decode, got {pd_type!r}")
    mem_size = _mem_size_gib(_need(mem, "mem_size", f"{where}.npu_mem"), f"{where}.npu_mem.mem_size")
    util = _opt(mem, "mem_util", f"{where}.npu_mem", check_fraction)
    if util is None:
        util = _opt(kvm, "gpu_memory_utilization", "vllm/meta.json: kv_cache", check_fraction)
    mem_bw = _opt(mem, "mem_bw", f"{where}.npu_mem", _gbps_checker(False))
    _opt(mem, "mem_latency", f"{where}.npu_mem", _latency_checker)
    return InstanceSpec(shape, hw, tp, _ep_size(dict(inst, ep_size=ep), ek, tp, shape.is_moe), mem_size,
                        util if util is not None else float(VLLM_DEFAULTS["gpu_memory_utilization"]),
                        dp_group, pd_type, mem_bw or 0.0)


def _gbps_checker(lo_open: bool):
    return lambda v, label, error: _gbps(v, label, lo_open)


def _latency_checker(v, label, error):
    return _latency_ns(v, label)


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
    """The data directory in force (``--data-dir``, ``$HPCTWIN_DATA``, ``../shared/datasets``); a given one
    must exist."""
    d = default_data_dir(data_dir)
    if d is None:
        raise BundleError("no data directory: give --data-dir, set HPCTWIN_DATA, or place the data in "
                          "../shared/datasets")
    if data_dir is not None and not Path(d).is_dir():
        raise BundleError(f"--data-dir {d}: no such directory (it should hold LLM-serving/LLMServingSim/)")
    return Path(d)


def _meta_settings(meta: dict, meta_path: Path) -> dict:
    """The engine settings vLLM's meta.json records, each checked where it is read (a record of the
    measured run: keys not read here are not checked)."""
    ek = _table(meta.get("engine_kwargs"), f"{meta_path}: engine_kwargs")
    kvm = _table(meta.get("kv_cache"), f"{meta_path}: kv_cache")
    rc = _table(meta.get("resolved_config"), f"{meta_path}: resolved_config")
    sc = _table(rc.get("scheduler_config"), f"{meta_path}: resolved_config.scheduler_config")
    cc = _table(rc.get("cache_config"), f"{meta_path}: resolved_config.cache_config")
    where = {id(ek): "engine_kwargs", id(kvm): "kv_cache", id(sc): "resolved_config.scheduler_config",
             id(cc): "resolved_config.cache_config"}

    def get(d: dict, key: str, check, *a, **kw):
        return _opt(d, key, f"{meta_path}: {where[id(d)]}", check, *a, **kw)

    def first(check, key: str, *tables, **kw):
        for d in tables:
            v = get(d, key, check, **kw)
            if v is not None:
                return v
        return None
    seqs = dict(lo=1, hi=MAX_NUM_SEQS, what="sequences")
    toks = dict(lo=1, hi=MAX_BATCHED_TOKENS, what="tokens")
    get(ek, "data_parallel_size", check_int, lo=1, hi=MAX_INSTANCES, what="ranks")
    get(ek, "enable_expert_parallel", check_bool)
    return {
        "ek": ek, "kvm": kvm,
        "max_num_seqs": first(check_int, "max_num_seqs", ek, sc, **seqs),
        "max_num_batched_tokens": first(check_int, "max_num_batched_tokens", ek, sc, **toks),
        "block_size": first(check_int, "block_size", kvm, cc, lo=1, hi=MAX_BLOCK_SIZE, what="tokens"),
        "prefix_caching": first(check_bool, "enable_prefix_caching", kvm, cc, ek),
        "num_gpu_blocks": first(check_int, "num_gpu_blocks", kvm, cc, lo=1, hi=MAX_KV_BLOCKS, what="blocks"),
        "kv_cache_memory_bytes": get(kvm, "kv_cache_memory_bytes", check_bytes),
        "reserve_full_isl": get(sc, "scheduler_reserve_full_isl", check_bool),
        "long_prefill_token_threshold": get(sc, "long_prefill_token_threshold", check_int, lo=0,
                                            hi=MAX_BATCHED_TOKENS, what="tokens"),
        "async_scheduling": first(check_bool, "async_scheduling", sc, ek),
        "chunked_prefill": first(check_bool, "enable_chunked_prefill", sc, ek),
    }


def load_bundle(path: str | os.PathLike, data_dir: str | os.PathLike | None = None) -> Bundle:
    """Read a bundle folder and resolve its workload and data directory. Every field read is checked (type,
    unit, range; `limits`): config.json refuses keys it does not know (`CONFIG_KEYS`, with the closest one);
    meta.json, a record of the measured vLLM run, has only the keys read here checked."""
    path = Path(path)
    if not path.is_dir():
        raise BundleError(f"{path}: no such bundle folder (laid out like LLMServingSim/bench/<hw>/<model>/)")
    cfg_path, meta_path = path / "config.json", path / "vllm" / "meta.json"
    cfg, meta = _load_json(cfg_path), _load_json(meta_path)
    m = _meta_settings(meta, meta_path)
    top = f"{cfg_path}: "
    _table(cfg, str(cfg_path), "")
    nodes = _list(_need(cfg, "nodes", str(cfg_path)), f"{top}nodes")
    _check_count(cfg, "num_nodes", nodes, f"{cfg_path}:")
    specs = []
    for ni, node in enumerate(nodes):
        nw = f"{top}nodes[{ni}]"
        node = _table(node, nw, "node", nullable=False)
        insts = _list(_need(node, "instances", nw), f"{nw}.instances")
        _check_count(node, "num_instances", insts, nw)
        cpu = _table(node.get("cpu_mem"), f"{nw}.cpu_mem", "cpu_mem")
        for key in ("mem_size", "mem_bw", "mem_latency"):
            _opt(cpu, key, f"{nw}.cpu_mem", check_number)
        for ii, inst in enumerate(insts):
            specs.append(_instance_spec(inst, f"{nw}.instances[{ii}]", m["ek"], m["kvm"]))
    if not specs:
        raise BundleError(f"{cfg_path}: no instances")
    link_bw = _opt(cfg, "link_bw", f"{cfg_path}:", _gbps_checker(True))
    link_lat = _opt(cfg, "link_latency", f"{cfg_path}:", _latency_checker)
    ddir = find_data_dir(data_dir)
    ds = check_str(_need(meta, "dataset_path", str(meta_path)), f"{meta_path}: dataset_path", BundleError)
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

    def pick(v, default):
        return default if v is None else v
    return Bundle(
        path=path, data_dir=ddir, instances=specs,
        link_bw_GBps=float(pick(link_bw, 16)), link_latency_ns=float(pick(link_lat, 1000)),
        max_num_seqs=pick(m["max_num_seqs"], VLLM_DEFAULTS["max_num_seqs"]),
        max_num_batched_tokens=pick(m["max_num_batched_tokens"], VLLM_DEFAULTS["max_num_batched_tokens"]),
        block_size=pick(m["block_size"], VLLM_DEFAULTS["block_size"]),
        prefix_caching=pick(m["prefix_caching"], VLLM_DEFAULTS["enable_prefix_caching"]),
        num_gpu_blocks=m["num_gpu_blocks"],
        reserve_full_isl=pick(m["reserve_full_isl"], True),
        long_prefill_token_threshold=pick(m["long_prefill_token_threshold"], 0),
        dataset=dataset, meta=meta,
        async_scheduling=pick(m["async_scheduling"], VLLM_DEFAULTS["async_scheduling"]),
        chunked_prefill=pick(m["chunked_prefill"], True),
        kv_cache_memory_bytes=m["kv_cache_memory_bytes"])
