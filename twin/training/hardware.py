"""GPU and system (node + fabric) presets with their sources, scaled to a job's GPU count.

Units: FLOP/s, bytes, bytes/s (per direction), seconds. A *GPU* here is one training rank: an
NVIDIA GPU, or one Graphics Compute Die (GCD) of an AMD MI250X (each GCD is its own device to
ROCm/RCCL; a Frontier node has 4 MI250X = 8 GCDs).

Fabrics are ``[network]`` tables of `topology.presets` (``{"preset": name}`` or ``{"kind": ...}``),
so the graph, the routing and the node -> group map are the topology package's. Presets with a
system file in ``twin/systems`` name it in ``system_file``; their network table is that file's
(``frontier.toml``: ``preset = "frontier"``, ``dgx-h100.toml``: ``preset = "dgx-h100"``).

Scaling (`machine_for`): a job of N GPUs needs ``ceil(N / gpus_per_node)`` nodes. A preset with a
machine size (Frontier: 9,408 nodes; the 128-node dgx-h100 cluster) keeps that size when the job
fits and places it on nodes 0..n-1 (the contiguous, fewest-groups placement); a larger job grows
the fabric with the same building blocks (more Dragonfly groups, more leaves), keeping the node and
fabric type.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

GBIT = 1e9 / 8          # bytes/s per Gb/s
GIB = 1024 ** 3


@dataclass(frozen=True)
class GPU:
    """One training rank: ``peak_flops`` dense BF16/FP16 tensor FLOP/s, ``memory_bytes`` HBM
    capacity, ``hbm_bw`` HBM bandwidth (bytes/s), ``intra_bw`` bytes/s per direction to another
    GPU of its node, ``intra_alpha`` s per intra-node message."""

    name: str
    peak_flops: float
    memory_bytes: float
    hbm_bw: float
    intra_bw: float
    intra_alpha: float
    source: str = ""


GPUS: dict[str, GPU] = {g.name: g for g in (
    # NVIDIA A100 datasheet: 312 TFLOP/s dense BF16/FP16 tensor; 40 GB HBM2 at 1,555 GB/s, 80 GB
    # HBM2e at 2,039 GB/s; NVLink 3: 600 GB/s total = 300 GB/s per direction (12 links x 25 GB/s)
    # through NVSwitch. Capacity: the 40,960 / 81,920 MiB the device reports (40 / 80 GiB).
    # intra_alpha 3 us: assumption (NCCL NVLink latency is a few us).
    GPU("a100-40gb", 312e12, 40 * GIB, 1.555e12, 300e9, 3e-6, "NVIDIA A100 datasheet"),
    GPU("a100-80gb", 312e12, 80 * GIB, 2.039e12, 300e9, 3e-6, "NVIDIA A100 datasheet"),
    # NVIDIA H100 SXM5 datasheet: 989 TFLOP/s dense BF16 (1,979 with sparsity), 80 GB HBM3 at
    # 3.35 TB/s, NVLink 4: 900 GB/s total = 450 GB/s per direction (18 links).
    GPU("h100-sxm", 989e12, 80 * GIB, 3.35e12, 450e9, 3e-6, "NVIDIA H100 datasheet"),
    # AMD Instinct MI250X datasheet: 383 TFLOP/s peak BF16/FP16 dense per module of 2 GCDs ->
    # 191.5 per GCD; 128 GB HBM2e at 3.2768 TB/s per module -> 64 GiB and 1.6384 TB/s per GCD.
    # GCD-GCD Infinity Fabric across modules 50 GB/s per direction per link, 2 links between most
    # pairs -> 100 GB/s (the assumption of topology.llm_iteration's MI250X). alpha 5 us: assumption.
    GPU("mi250x-gcd", 191.5e12, 64 * GIB, 1.6384e12, 100e9, 5e-6, "AMD MI250X datasheet; OLCF Frontier guide"),
)}


@dataclass(frozen=True)
class SystemPreset:
    """A machine: ``gpus_per_node`` ranks of ``gpu`` per node, ``network`` (a `topology.presets`
    ``[network]`` table), ``machine_nodes`` (None: sized to the job), ``net_alpha`` s per
    inter-node message, ``system_file`` (the twin/systems TOML it mirrors, or None)."""

    name: str
    gpu: GPU
    gpus_per_node: int
    network: dict = field(default_factory=dict)
    machine_nodes: int | None = None
    net_alpha: float = 5e-6
    system_file: str | None = None
    description: str = ""


# DGX A100 SuperPOD fabric (Selene): 8 x 200 Gb/s HDR InfiniBand compute HCAs per node, three-level
# non-blocking fat-tree (Narayanan et al. SC'21 section 5: "eight NVIDIA Mellanox 200Gbps HDR
# Infiniband HCAs ... three-level (leaf, spine, core) fat-tree topology with 850 switches").
# Modelled as topology.presets does for dgx-h100: the 8 rail leaves of a 20-node scalable unit
# (DGX SuperPOD A100 reference architecture) merged into one leaf of 8 x bandwidth, 20 spines of
# 8 x 200 Gb/s (non-blocking); assumption: 130 ns per hop (QM8700 datasheet port-to-port latency).
_DGX_A100_NET = {"kind": "leaf_spine", "hosts_per_leaf": 20, "spines": 20,
                 "terminal_bandwidth": 8 * 200 * GBIT, "global_bandwidth": 8 * 200 * GBIT,
                 "terminal_latency": 130e-9, "global_latency": 130e-9}

SYSTEMS: dict[str, SystemPreset] = {s.name: s for s in (
    SystemPreset("dgx-a100-40gb", GPUS["a100-40gb"], 8, _DGX_A100_NET,
                 description="DGX A100 (8 x A100 40GB), 8 x HDR 200 Gb/s, non-blocking fat-tree"),
    SystemPreset("dgx-a100-80gb", GPUS["a100-80gb"], 8, _DGX_A100_NET,
                 description="DGX A100 (8 x A100 80GB), 8 x HDR 200 Gb/s, non-blocking fat-tree (Selene)"),
    SystemPreset("dgx-h100", GPUS["h100-sxm"], 8, {"preset": "dgx-h100"}, machine_nodes=128, system_file="dgx-h100",
                 description="DGX H100 (8 x H100 SXM), 8 x NDR 400 Gb/s, rail-optimised 3-tier Clos "
                             "(twin/systems/dgx-h100.toml)"),
    SystemPreset("frontier", GPUS["mi250x-gcd"], 8, {"preset": "frontier"}, machine_nodes=9408, system_file="frontier",
                 description="OLCF Frontier: 4 MI250X = 8 GCDs per node, 4 x Slingshot 200 Gb/s, Dragonfly "
                             "(twin/systems/frontier.toml)"),
)}
ALIASES = {"selene": "dgx-a100-80gb", "dgx-a100": "dgx-a100-80gb", "h100-cluster": "dgx-h100"}


def system_preset(name: str) -> SystemPreset:
    """The preset ``name`` (or an alias); KeyError naming the known ones."""
    key = ALIASES.get(name, name)
    if key not in SYSTEMS:
        raise KeyError(f"unknown system {name!r}; known: {', '.join(sorted(SYSTEMS) + sorted(ALIASES))}")
    return SYSTEMS[key]


@dataclass(frozen=True)
class Machine:
    """A preset sized for a job: ``nodes`` of the machine, its resolved ``params`` (builder
    parameters of `topology.presets.network_params`), and the ``table`` that reproduces them."""

    preset: SystemPreset
    nodes: int
    table: dict
    params: dict

    @property
    def gpus_per_node(self) -> int:
        return self.preset.gpus_per_node

    @property
    def gpu(self) -> GPU:
        return self.preset.gpu


def _grow(table: dict, params: dict, nodes: int) -> dict:
    """``table`` with the group count raised so that ``nodes`` fit (dragonfly / dragonfly+ / fat-tree)."""
    kind = params["kind"]
    if kind == "dragonfly":
        return {**table, "g": max(2, math.ceil(nodes / (params["a"] * params["p"])))}
    if kind == "dragonfly_plus":
        return {**table, "groups": max(2, math.ceil(nodes / (params["leaves"] * params["hosts_per_leaf"])))}
    if kind == "fat_tree":
        per_pod = (params.get("hosts_per_edge") or params["k"] // 2) * (params["k"] // 2)
        return {**table, "pods": math.ceil(nodes / per_pod)}
    return table


def _preset_kind(table: dict) -> str | None:
    from hpctwin.topology.presets import PRESETS  # noqa: PLC0415
    return PRESETS.get(table.get("preset"), {}).get("kind")


def machine_for(preset: SystemPreset, job_nodes: int) -> Machine:
    """The machine of ``preset`` that holds a job of ``job_nodes`` nodes (see the module docstring)."""
    from hpctwin.topology.presets import network_params  # noqa: PLC0415
    nodes = max(int(job_nodes), preset.machine_nodes or 0)
    table = dict(preset.network)
    if preset.machine_nodes is None or job_nodes > preset.machine_nodes:
        kind = table.get("kind") or _preset_kind(table)
        if kind in ("dragonfly", "dragonfly_plus", "fat_tree"):
            table = _grow(table, network_params(table, None), nodes)
    return Machine(preset, nodes, table, network_params(table, nodes))


def with_gpu(preset: SystemPreset, gpu: GPU) -> SystemPreset:
    """``preset`` with another GPU (same node and fabric)."""
    return replace(preset, gpu=gpu)
