"""Storage tiers of the training systems: host DRAM, node-local NVMe and the parallel file system (PFS).

Units: bytes, bytes/s (per direction), seconds. A *node* tier (host DRAM, NVMe) has its capacity and
bandwidth per node, shared by the GPUs of the node; the *PFS* has an aggregate bandwidth shared by
every node doing I/O at the same time, and each node reaches it through its own client link.

Bandwidth a job gets from the PFS (`pfs_job_bandwidth`): ``min(nodes x client_bw, aggregate x nodes /
(nodes + other_io_nodes))``: the aggregate is shared in proportion to the nodes doing I/O at the same
time (``other_io_nodes``: nodes of other jobs reading or writing then; a job checkpointing while
others do is slower), and a node cannot exceed its client link. The aggregate of a preset whose
file system is given per GPU (the DGX presets) is that per-GPU share times the machine's GPUs.

Sources (each preset's comment names its own). **Assumptions** (no measurement reproduced here):

* `HOST_USABLE_FRACTION` 0.8 of a node's DRAM is available for offloaded state (the operating system,
  page cache, pinned staging buffers and data loaders keep the rest);
* `STREAM_EFFICIENCY` 0.75: a memory-bound CPU kernel (the CPU Adam step) sustains 75 % of the DRAM
  peak (order of the STREAM triad figures of server CPUs);
* `PFS_CLIENT_CAP` 20 GB/s: one node's large sequential I/O to a parallel file system (a Lustre or
  GPFS client is limited by its CPU and RPCs in flight well below its 4 x 200 Gb/s of NICs; order of
  magnitude, not a measurement);
* `NVME_DRIVE_READ` / `NVME_DRIVE_WRITE` 6.5 / 3.5 GB/s per PCIe Gen4 U.2 data drive of a DGX (the
  datasheet class of 3.84 TB read-intensive Gen4 U.2 drives; NVIDIA does not publish the DGX drives'
  figures): a node's NVMe bandwidth is the drives' sum (RAID 0, large sequential I/O);
* a GPU <-> host link sustains ``comm_eff`` (0.8, `constants`) of its line rate, as the fabric's links.
"""
from __future__ import annotations

from dataclasses import dataclass

GB = 1e9
TB = 1e12

#: share of a node's host DRAM usable for offloaded state (assumption, see the module docstring)
HOST_USABLE_FRACTION = 0.8
#: share of the DRAM peak a memory-bound CPU kernel sustains (assumption, STREAM-triad order)
STREAM_EFFICIENCY = 0.75
#: one node's sustained large-sequential PFS throughput (assumption, order of magnitude)
PFS_CLIENT_CAP = 20 * GB
#: per-drive sequential read / write of a PCIe Gen4 U.2 3.84 TB data drive (assumption, datasheet class)
NVME_DRIVE_READ = 6.5 * GB
NVME_DRIVE_WRITE = 3.5 * GB
#: PCIe Gen4 / Gen5 x16 line rate per direction: 16 / 32 GT/s x 16 lanes x 128/130 encoding / 8 bits
PCIE4_X16 = 16e9 * 16 * 128 / 130 / 8
PCIE5_X16 = 32e9 * 16 * 128 / 130 / 8
#: one DDR channel's peak: 8 bytes x transfers/s (DDR4-3200: 25.6 GB/s, DDR5-4800: 38.4 GB/s)
DDR4_3200 = 8 * 3200e6
DDR5_4800 = 8 * 4800e6


@dataclass(frozen=True)
class Tier:
    """One storage tier: ``capacity`` bytes, ``read_bw`` / ``write_bw`` bytes/s (per node for host
    DRAM and NVMe; aggregate for the PFS), ``source``."""

    name: str
    capacity: float
    read_bw: float
    write_bw: float
    source: str = ""


@dataclass(frozen=True)
class NodeStorage:
    """Storage and host paths of a system's nodes.

    ``host_link_bw``: bytes/s per direction between one GPU and host DRAM (line rate);
    ``host_mem_bw``: a node's DRAM peak (bytes/s); ``host``, ``nvme``: per-node tiers; ``pfs``: the
    file system's aggregate (or, with ``pfs_reference_gpus``, the aggregate of a machine of that many
    GPUs, scaled to the machine in use); ``pfs_client_bw``: one node's cap to the PFS."""

    system: str
    host_link_bw: float
    host_mem_bw: float
    host: Tier
    nvme: Tier
    pfs: Tier
    pfs_client_bw: float = PFS_CLIENT_CAP
    pfs_reference_gpus: int | None = None

    def pfs_aggregate(self, machine_gpus: int) -> tuple[float, float]:
        """(read, write) aggregate PFS bytes/s of a machine of ``machine_gpus`` GPUs."""
        if self.pfs_reference_gpus is None:
            return self.pfs.read_bw, self.pfs.write_bw
        f = machine_gpus / self.pfs_reference_gpus
        return self.pfs.read_bw * f, self.pfs.write_bw * f

    @property
    def host_usable(self) -> float:
        """Bytes of host DRAM per node available for offloaded state."""
        return self.host.capacity * HOST_USABLE_FRACTION


# Meta's Tectonic for the Llama 3 RoCE cluster (Dubey et al. 2024, "The Llama 3 Herd of Models",
# sec. 3.3.1): 240 PB on 7,500 SSD servers, 2 TB/s sustained, 7 TB/s peak, for a cluster of 24K GPUs.
# The DGX presets have no published file system: we give them the same sustained per-GPU share
# (2 TB/s / 24,576 GPUs = 81 MB/s per GPU), read and write alike (assumption).
_TECTONIC = Tier("pfs", 240e15, 2 * TB, 2 * TB, "Tectonic, Llama 3 paper sec. 3.3.1 (2 TB/s sustained, 24K GPUs)")
_TECTONIC_GPUS = 24576

STORAGE: dict[str, NodeStorage] = {
    # OLCF Frontier User Guide: 512 GB DDR4 per node; each GCD reaches the CPU over Infinity Fabric at
    # 36 + 36 GB/s (H2D + D2H). DRAM peak: 8 channels of DDR4-3200 on the 64-core EPYC 7A53 (assumption:
    # the Trento part's 8 channels at 3200 MT/s) = 204.8 GB/s. Node-local NVMe: 2 x 1.92 TB per node
    # (Frontier User Guide); bandwidth from the in-system storage layer's 75 TB/s read and 35 TB/s write
    # (ORNL, "OLCF Releases Storage Specs for Frontier Exascale", insideHPC, May 2021) over 9,408 nodes
    # = 7.97 / 3.72 GB/s per node. Orion (same release): performance tier 11.5 PB of NVMe at 10 TB/s,
    # capacity tier 679 PB of disk at 5.5 TB/s read and 4.6 TB/s write; with progressive file layouts
    # the data of a file beyond its first 8 MB goes to the disk tier (OLCF, GreyBeards on Storage
    # podcast 149, 2023), so the large files of checkpoints and offloaded state use the capacity tier.
    "frontier": NodeStorage(
        "frontier", 36 * GB, 8 * DDR4_3200,
        Tier("cpu", 512 * GB, 8 * DDR4_3200, 8 * DDR4_3200, "OLCF Frontier User Guide"),
        Tier("nvme", 2 * 1.92 * TB, 75 * TB / 9408, 35 * TB / 9408, "ORNL 2021: in-system storage 75/35 TB/s"),
        Tier("pfs", 679e15, 5.5 * TB, 4.6 * TB, "ORNL 2021: Orion capacity tier 5.5/4.6 TB/s"),
    ),
    # NVIDIA DGX H100 datasheet: 2 TB system memory (32 DIMMs, DDR5-4800), 2 x Xeon Platinum 8480C
    # (Intel: 8 DDR5-4800 channels each) -> 614.4 GB/s; internal storage 8 x 3.84 TB NVMe U.2 (30 TB);
    # H100 SXM on PCIe Gen5 x16 to the host (63 GB/s per direction).
    "dgx-h100": NodeStorage(
        "dgx-h100", PCIE5_X16, 16 * DDR5_4800,
        Tier("cpu", 2 * TB, 16 * DDR5_4800, 16 * DDR5_4800, "DGX H100 datasheet"),
        Tier("nvme", 8 * 3.84 * TB, 8 * NVME_DRIVE_READ, 8 * NVME_DRIVE_WRITE,
             "DGX H100 datasheet; drive speed assumed"),
        _TECTONIC, pfs_reference_gpus=_TECTONIC_GPUS,
    ),
    # NVIDIA DGX A100 datasheet: 320 GB system (8 x A100 40GB): 1 TB of memory, 15 TB of U.2 NVMe
    # (4 x 3.84 TB); 640 GB system (A100 80GB): 2 TB, 30 TB (8 x 3.84 TB). 2 x AMD EPYC 7742 (8 DDR4-3200
    # channels each) -> 409.6 GB/s; A100 on PCIe Gen4 x16 (31.5 GB/s per direction).
    "dgx-a100-40gb": NodeStorage(
        "dgx-a100-40gb", PCIE4_X16, 16 * DDR4_3200,
        Tier("cpu", 1 * TB, 16 * DDR4_3200, 16 * DDR4_3200, "DGX A100 datasheet"),
        Tier("nvme", 4 * 3.84 * TB, 4 * NVME_DRIVE_READ, 4 * NVME_DRIVE_WRITE,
             "DGX A100 datasheet; drive speed assumed"),
        _TECTONIC, pfs_reference_gpus=_TECTONIC_GPUS,
    ),
    "dgx-a100-80gb": NodeStorage(
        "dgx-a100-80gb", PCIE4_X16, 16 * DDR4_3200,
        Tier("cpu", 2 * TB, 16 * DDR4_3200, 16 * DDR4_3200, "DGX A100 datasheet"),
        Tier("nvme", 8 * 3.84 * TB, 8 * NVME_DRIVE_READ, 8 * NVME_DRIVE_WRITE,
             "DGX A100 datasheet; drive speed assumed"),
        _TECTONIC, pfs_reference_gpus=_TECTONIC_GPUS,
    ),
}


def storage_for(system: str) -> NodeStorage:
    """The `NodeStorage` of a system preset name (aliases resolved by the caller); KeyError naming the known ones."""
    if system not in STORAGE:
        raise KeyError(f"no storage figures for system {system!r}; known: {', '.join(sorted(STORAGE))}")
    return STORAGE[system]


def pfs_job_bandwidth(st: NodeStorage, job_nodes: int, machine_gpus: int, direction: str = "write",
                      other_io_nodes: int = 0) -> float:
    """Bytes/s the ``job_nodes`` nodes of a job get from the PFS together while ``other_io_nodes`` nodes
    of other jobs do I/O too: ``min(nodes x client cap, aggregate x nodes / (nodes + others))``."""
    if job_nodes < 1 or other_io_nodes < 0:
        raise ValueError(f"job_nodes = {job_nodes}, other_io_nodes = {other_io_nodes}: expected >= 1 and >= 0")
    read, write = st.pfs_aggregate(machine_gpus)
    agg = {"read": read, "write": write}[direction]
    return min(job_nodes * st.pfs_client_bw, agg * job_nodes / (job_nodes + other_io_nodes))
