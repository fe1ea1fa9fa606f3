"""Failure rates of large training jobs from published interruption statistics, per GPU.

A job fails whenever one of its GPUs (or the node, NIC, switch port... serving it) does; with
independent exponential failures a job of ``G`` GPUs has MTBF ``1 / (G x rate per GPU)``. Rates are
given per GPU (training rank) so that they carry over to nodes of other sizes; that carry-over is an
assumption (a Frontier node has 8 ranks on 4 MI250X modules).

Source: Meta, "The Llama 3 Herd of Models" (Dubey et al., arXiv:2407.21783, 2024), section 3.3.4 and
Table 5: in a 54-day snapshot of Llama 3 405B pre-training on 16,384 H100 GPUs (2,048 servers of 8),
466 job interruptions, 47 planned and **419 unexpected**. Table 5's root causes of the unexpected
ones (counts as transcribed in public copies of the table: DatacenterDynamics, July 2024; G.
Lockwood's "component reliability" notes): faulty GPU 148, GPU HBM3 memory 72, software bug 54,
network switch/cable 35, unplanned host maintenance 32, GPU SRAM memory 19, GPU system processor 17,
NIC 7, NCCL watchdog timeouts 7, silent data corruption 6, GPU thermal interface + sensor 6, SSD 3,
power supply 3, server chassis 2, IO expansion board 2, dependency 2, CPU 2, system memory 2 (sum
419). The paper's text attributes about 78 % of the unexpected interruptions to confirmed or
suspected hardware issues; the counts give 268 (64 %) for the GPU categories, 321 (77 %) with host
components and unplanned host maintenance, 328 (78.3 %) adding the NCCL watchdog timeouts, 356
(85 %) adding network switches and cables. We could not re-read the paper's sentence itself here, so
``llama3-hardware`` uses the categories a reader can check: GPU + host components + unplanned host
maintenance + network (356).

Units: failures per GPU-second (`rate_per_gpu_s`), seconds (`job_mtbf_s`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

DAY = 86400.0

#: Llama 3 Table 5: unexpected interruptions by root cause (54 days, 16,384 H100 GPUs)
LLAMA3_TABLE5: dict[str, int] = {
    "faulty GPU": 148, "GPU HBM3 memory": 72, "software bug": 54, "network switch/cable": 35,
    "unplanned host maintenance": 32, "GPU SRAM memory": 19, "GPU system processor": 17, "NIC": 7,
    "NCCL watchdog timeouts": 7, "silent data corruption": 6, "GPU thermal interface + sensor": 6, "SSD": 3,
    "power supply": 3, "server chassis": 2, "IO expansion board": 2, "dependency": 2, "CPU": 2,
    "system memory": 2,
}
_GPU = ("faulty GPU", "GPU HBM3 memory", "GPU SRAM memory", "GPU system processor", "silent data corruption",
        "GPU thermal interface + sensor")
_HOST = ("NIC", "SSD", "power supply", "server chassis", "IO expansion board", "CPU", "system memory")
LLAMA3_DAYS = 54.0
LLAMA3_GPUS = 16384


@dataclass(frozen=True)
class FailureSource:
    """``events`` job interruptions observed over ``days`` on ``gpus`` GPUs (``what`` they count)."""

    name: str
    events: int
    days: float
    gpus: int
    what: str
    source: str

    @property
    def rate_per_gpu_s(self) -> float:
        """Failures per GPU-second."""
        return self.events / (self.gpus * self.days * DAY)

    @property
    def gpu_mtbf_days(self) -> float:
        """Mean time between failures of one GPU (days)."""
        return self.gpus * self.days / self.events


_L3 = "Dubey et al. 2024 (Llama 3), sec. 3.3.4, Table 5"
SOURCES: dict[str, FailureSource] = {s.name: s for s in (
    FailureSource("llama3", sum(LLAMA3_TABLE5.values()), LLAMA3_DAYS, LLAMA3_GPUS,
                  "all 419 unexpected interruptions", _L3),
    FailureSource("llama3-hardware", sum(LLAMA3_TABLE5[k] for k in _GPU + _HOST)
                  + LLAMA3_TABLE5["unplanned host maintenance"] + LLAMA3_TABLE5["network switch/cable"],
                  LLAMA3_DAYS, LLAMA3_GPUS, "GPU, host, unplanned host maintenance and network causes (356)", _L3),
    FailureSource("llama3-gpu", sum(LLAMA3_TABLE5[k] for k in _GPU), LLAMA3_DAYS, LLAMA3_GPUS,
                  "GPU causes only (268)", _L3),
)}


def failure_source(name: str) -> FailureSource:
    """The `FailureSource` ``name``; KeyError naming the known ones."""
    if name not in SOURCES:
        raise KeyError(f"unknown failure source {name!r}; known: {', '.join(SOURCES)}")
    return SOURCES[name]


def job_mtbf_s(source: FailureSource | str, gpus: int) -> float:
    """MTBF (s) of a job of ``gpus`` GPUs: ``1 / (gpus x rate per GPU)``."""
    src = failure_source(source) if isinstance(source, str) else source
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ValueError(f"gpus = {gpus!r}: expected an integer >= 1")
    return 1.0 / (gpus * src.rate_per_gpu_s)


def failures_per_day(source: FailureSource | str, gpus: int) -> float:
    """Expected failures per day of a job of ``gpus`` GPUs."""
    return DAY / job_mtbf_s(source, gpus)


def check_consistency() -> None:
    """Raise if the table does not add up to the 419 unexpected interruptions the paper reports."""
    total = sum(LLAMA3_TABLE5.values())
    if total != 419 or not math.isclose(SOURCES["llama3"].events, 419):
        raise AssertionError(f"Llama 3 Table 5 sums to {total}, not 419")
