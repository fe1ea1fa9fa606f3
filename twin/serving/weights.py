"""Where a new serving instance gets its weights from (issue 28 item 4; HyperFlexis, arXiv 2508.15919).

A scale-up's cold start is ``startup_s`` (process start, CUDA context, graph capture: an assumption, 30 s
by default as in `autoscale.DEFAULT_STARTUP_S`) plus the time its GPUs take to receive the model's weights,
each GPU its shard (``weight_bytes_per_rank(tp)`` bytes) in parallel, over one of three paths
(`WeightPath`; 1 GB = 1e9 bytes):

* ``storage``: from the node's NVMe SSD (`NVME_GBPS`) or a parallel file system (`pfs_path`: the node's
  network client, shared by every GPU of the new instances loading at once, and optionally the file
  system's aggregate bandwidth shared by all loads);
* ``host``: from a copy in host memory (page cache or pinned DRAM) over the GPU's PCIe link (`PCIE_GBPS`
  by generation, `HOST_PCIE_GEN` by GPU type);
* ``d2d``: device to device from a running instance of the same model (HyperFlexis' weight transfer):
  the source GPU's NVLink within a node (`kvflow.D2D`), or its network link across nodes; one source GPU
  sends its shard to every GPU loading from it at once, so they share its link. With no running source
  (scale from zero) the load falls back to ``fallback`` (storage).

`weight_load_s`: bytes / (bandwidth per GPU x 1e9) with the bandwidth min(the path's per-GPU figure, its
shared figure / the concurrent loads). `ScaleUp` is the cold-start model a pool uses
(`autoscale.simulate_autoscaled` ``cold_start=``): a number there keeps the old one-constant path and
its outputs byte for byte. Sources of the constants are next to them; the ones marked assumption are
not measurements. What the paths do not model: the source instance's own serving is not slowed by the
copy; storage and PCIe reads are not overlapped with start-up.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .kvflow import D2D
from .limits import MAX_GBPS, check_number

#: one PCIe Gen4 NVMe SSD's sequential read (Samsung 990 PRO data sheet: 7.45 GB/s); the autoscaler's
#: historical default (`autoscale.DEFAULT_LOAD_GBPS`)
NVME_GBPS = 7.0
#: a node's parallel-file-system client: one 200 Gb/s HDR InfiniBand NIC's line rate, 25 GB/s (the link
#: `handoff.DEFAULT_KV_LINK_GBPS` uses); an upper bound, the file system's own limit comes on top
PFS_CLIENT_GBPS = 25.0
#: PCIe x16 bandwidth per direction (GB/s) by generation: 16 / 32 GT/s per lane x 16 lanes x 128/130 / 8
#: (PCI-SIG base specifications 4.0 and 5.0): 31.5 and 63.0 GB/s; line rates, not achieved copy rates
PCIE_GBPS = {4: 16 * 16 * 128 / 130 / 8, 5: 32 * 16 * 128 / 130 / 8}
#: the host link of each GPU type (NVIDIA product specifications: GeForce RTX 4090 PCIe 4.0 x16, RTX PRO
#: 6000 Blackwell PCIe 5.0 x16, H100 SXM5 PCIe 5.0 x16, A100 SXM4 PCIe 4.0 x16)
HOST_PCIE_GEN = {"RTX4090": 4, "RTXPRO6000": 5, "h100-80gb": 5, "H100": 5, "a100-80gb": 4, "A100": 4}
#: a GPU's network link across nodes (GB/s): one 200 Gb/s HDR NIC per GPU (DGX A100; `handoff`)
INTER_NODE_GBPS = 25.0
#: process start, CUDA context and graph capture before weights load (s): an assumption (`autoscale`)
DEFAULT_STARTUP_S = 30.0
PATHS = ("storage", "host", "d2d")


class WeightPathError(ValueError):
    """A weight path or its bandwidth is wrong (the message names the field)."""


@dataclass(frozen=True)
class WeightPath:
    """One way weights reach a new instance's GPUs: ``kind`` (`PATHS`), ``GBps`` per GPU (GB/s),
    ``shared_GBps`` (GB/s) divided among the concurrent loads (None: not shared), and ``source`` (what the
    figures are)."""
    kind: str
    GBps: float
    shared_GBps: float | None = None
    source: str = ""

    def __post_init__(self) -> None:
        if self.kind not in PATHS:
            raise WeightPathError(f"weight path: unknown kind {self.kind!r}; known: {', '.join(PATHS)}")
        check_number(self.GBps, f"{self.kind} path GBps", WeightPathError, lo_open=True, hi=MAX_GBPS, unit="GB/s")
        if self.shared_GBps is not None:
            check_number(self.shared_GBps, f"{self.kind} path shared_GBps", WeightPathError, lo_open=True,
                         hi=MAX_GBPS, unit="GB/s")

    def per_gpu_GBps(self, concurrent: int = 1) -> float:
        """GB/s one loading GPU gets while ``concurrent`` GPUs share the path's shared bandwidth."""
        bw = self.GBps
        if self.shared_GBps is not None:
            bw = min(bw, self.shared_GBps / max(1, concurrent))
        return bw


def nvme_path(GBps: float = NVME_GBPS) -> WeightPath:
    """Storage: the node's NVMe SSD (default one Gen4 drive, 7 GB/s), read by each GPU at that rate (the
    historical cold start's assumption: every GPU of the instance loads in parallel)."""
    return WeightPath("storage", GBps, None, f"NVMe {GBps:g} GB/s per GPU")


def pfs_path(client_GBps: float = PFS_CLIENT_GBPS, aggregate_GBps: float | None = None) -> WeightPath:
    """Storage: a parallel file system read through the node's client (``client_GBps``, shared by the
    GPUs loading at once) and, when given, the file system's ``aggregate_GBps`` (shared by all loads)."""
    shared = client_GBps if aggregate_GBps is None else min(client_GBps, aggregate_GBps)
    return WeightPath("storage", client_GBps, shared, f"PFS client {client_GBps:g} GB/s"
                      + (f", aggregate {aggregate_GBps:g} GB/s" if aggregate_GBps is not None else ""))


def host_path(hardware: str) -> WeightPath:
    """Host memory over ``hardware``'s PCIe link (`HOST_PCIE_GEN`, `PCIE_GBPS`), each GPU its own link."""
    if hardware not in HOST_PCIE_GEN:
        raise WeightPathError(f"host path: no PCIe generation known for GPU type {hardware!r}; known: "
                              f"{', '.join(HOST_PCIE_GEN)} (or give WeightPath('host', GBps))")
    gen = HOST_PCIE_GEN[hardware]
    return WeightPath("host", PCIE_GBPS[gen], None, f"host DRAM over PCIe {gen}.0 x16, {PCIE_GBPS[gen]:.1f} GB/s")


def d2d_path(hardware: str, intra_node: bool = True, inter_node_GBps: float = INTER_NODE_GBPS) -> WeightPath:
    """Device to device from a running instance: the source GPU's NVLink (`kvflow.D2D`) within a node,
    else its network link (``inter_node_GBps``); shared by the GPUs loading from it at once."""
    if intra_node:
        if hardware not in D2D:
            raise WeightPathError(f"d2d path: no device-to-device figure for GPU type {hardware!r}; known: "
                                  f"{', '.join(D2D)} (or give WeightPath('d2d', GBps, shared_GBps))")
        bw = D2D[hardware][0]
        return WeightPath("d2d", bw, bw, f"device to device within a node, {bw:g} GB/s per GPU")
    return WeightPath("d2d", inter_node_GBps, inter_node_GBps,
                      f"device to device across nodes, {inter_node_GBps:g} GB/s")


def weight_load_s(weight_bytes_per_gpu: float, path: WeightPath, concurrent: int = 1) -> float:
    """Seconds for one GPU to receive ``weight_bytes_per_gpu`` bytes over ``path`` while ``concurrent``
    GPUs share its shared bandwidth: bytes / (`WeightPath.per_gpu_GBps` x 1e9)."""
    check_number(weight_bytes_per_gpu, "weight bytes per GPU", WeightPathError, unit="bytes")
    if isinstance(concurrent, bool) or not isinstance(concurrent, int) or concurrent < 1:
        raise WeightPathError(f"concurrent loads must be a whole number >= 1, got {concurrent!r}")
    return weight_bytes_per_gpu / (path.per_gpu_GBps(concurrent) * 1e9)


@dataclass(frozen=True)
class ScaleUp:
    """The cold start of a pool's new instances: ``startup_s`` (s) plus its weights over ``path``; a
    ``d2d`` path without a running source uses ``fallback`` (default NVMe)."""
    path: WeightPath
    startup_s: float = DEFAULT_STARTUP_S
    fallback: WeightPath | None = None

    def __post_init__(self) -> None:
        check_number(self.startup_s, "startup_s", WeightPathError, unit="s", hi=86_400.0,
                     hint="a start-up is at most a day")

    def cold_start_s(self, weight_bytes_per_gpu: float, tp: int = 1, new_instances: int = 1,
                     sources: int = 0) -> tuple[float, str]:
        """(seconds from the scale-up decision until the instance serves, the path used) for one of
        ``new_instances`` instances of ``tp`` GPUs started at once, with ``sources`` running instances of
        the same model. Concurrent GPUs on the path: storage and host, the GPUs of the new instances
        (``new_instances x tp``: a node's PFS client is shared; per-GPU paths are not); d2d, the loads
        per source GPU (``ceil(new_instances / sources)``)."""
        path = self.path
        if path.kind == "d2d" and sources < 1:
            path = self.fallback or nvme_path()
        if path.kind == "d2d":
            conc = math.ceil(new_instances / sources)
        else:
            conc = max(1, new_instances) * max(1, tp)
        return self.startup_s + weight_load_s(weight_bytes_per_gpu, path, conc), path.kind
