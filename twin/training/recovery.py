"""Checkpoint, failure and recovery costs of a training job, and its goodput under two recovery regimes.

From the job (model, system, GPUs) and a published failure rate (`failure_rates`):

* **Checkpoint bytes** = 14 B per parameter: the bf16 weights (2 B) and the fp32 master weights and
  Adam moments (12 B), what Megatron-LM and DeepSpeed checkpoints hold (gradients and activations are
  not saved). Llama 3 405B: 5.7 TB.
* **Write time** = bytes / the job's PFS write bandwidth (`storage.pfs_job_bandwidth`: every node
  writes its shards at once, each node capped by its client link, the aggregate shared with the
  ``other_writer_nodes`` nodes of other jobs writing at the same time: a job checkpointing while
  others do is slower). Synchronous: training stops while it writes.
* **Restart** = failure detection + re-initialisation growing with the job + reload of the last
  checkpoint (bytes / the job's PFS read bandwidth). `RestartModel` (assumptions, not measurements):
  60 s to detect a failure (a heartbeat or health check; PyTorch's NCCL watchdog would wait for
  its timeout, minutes), 120 s to requeue and relaunch the processes, plus 0.1 s per node for what
  grows with the job (container start, rendezvous, communication-group set-up: FlashRecovery
  (Zhang et al., arXiv:2509.03047, 2025) reports traditional restarts growing linearly with the
  cluster). 2,048 nodes: 60 + 120 + 205 s + reload.
* **MTBF** of the job = 1 / (GPUs x the rate per GPU). **Young** (1974) ``sqrt(2 delta M)`` and **Daly**
  (2006) intervals from the write time ``delta`` (`twin.resilience`).
* **Goodput** (effective training time ratio, ETTR = useful time / wall time) from Daly's exact
  renewal formula (`twin.resilience.expected_wall_time`, exponential failures, a failure during a
  restart restarts it):

  - *checkpoint/restart*: compute ``tau`` (Daly's interval), write for ``delta``, lose the work since
    the last completed checkpoint and pay the restart at each failure;
  - *fast recovery* (FlashRecovery-like, checkpoint-free): no checkpoint writes, a failure loses at
    most the current step (one iteration) and costs a recovery nearly independent of scale: 150 s,
    FlashRecovery's figure on 4,800 devices (`twin.resilience.FLASHRECOVERY_RECOVERY_S`).

* **Lost GPU-hours per day** = GPUs x 24 h x (1 - ETTR).

Units: bytes, seconds, hours where named.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from hpctwin.twin import resilience as rs

from .config import TrainingConfigError
from .failure_rates import FailureSource, failure_source
from .hardware import machine_for, system_preset
from .models import MODELS, TransformerModel, total_params
from .storage import pfs_job_bandwidth, storage_for

#: bytes saved per parameter: bf16 weights (2) + fp32 master weights, Adam m and v (12)
CHECKPOINT_BYTES_PER_PARAM = 14.0
DAY = 86400.0


@dataclass(frozen=True)
class RestartModel:
    """Restart = ``detect_s`` + ``init_base_s`` + ``init_per_node_s`` x nodes + reload (assumptions,
    see the module docstring)."""

    detect_s: float = 60.0
    init_base_s: float = 120.0
    init_per_node_s: float = 0.1

    def seconds(self, nodes: int, reload_s: float) -> float:
        """Restart seconds of a job of ``nodes`` nodes whose checkpoint reloads in ``reload_s``."""
        return self.detect_s + self.init_base_s + self.init_per_node_s * nodes + reload_s


@dataclass(frozen=True)
class RecoveryCosts:
    """Costs of one job: ``checkpoint_bytes``; ``write_bw`` / ``read_bw`` bytes/s the job gets from the
    PFS; ``checkpoint_s`` (write), ``reload_s``, ``restart_s``; ``mtbf_s`` of the job; ``young_s`` and
    ``daly_s`` compute intervals between checkpoints; ``gpus``, ``nodes``, ``source`` (failure source)."""

    gpus: int
    nodes: int
    checkpoint_bytes: float
    write_bw: float
    read_bw: float
    checkpoint_s: float
    reload_s: float
    restart_s: float
    mtbf_s: float
    young_s: float
    daly_s: float
    source: str


def checkpoint_bytes(model: TransformerModel | str) -> float:
    """Bytes of one checkpoint of ``model`` (`CHECKPOINT_BYTES_PER_PARAM` per parameter)."""
    m = MODELS[model] if isinstance(model, str) else model
    return CHECKPOINT_BYTES_PER_PARAM * total_params(m)


def recovery_costs(model, system: str, gpus: int, source: FailureSource | str = "llama3", *,
                   machine_gpus: int | None = None, other_writer_nodes: int = 0,
                   restart: RestartModel = RestartModel()) -> RecoveryCosts:
    """`RecoveryCosts` of ``model`` on ``gpus`` GPUs of ``system`` (a preset with storage figures).

    ``machine_gpus``: GPUs of the machine sharing the file system (default: the preset sized for the
    job); ``other_writer_nodes``: nodes of other jobs writing (or reading) at the same time."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise TrainingConfigError(f"gpus = {gpus!r}: expected an integer >= 1")
    if isinstance(other_writer_nodes, bool) or not isinstance(other_writer_nodes, int) or other_writer_nodes < 0:
        raise TrainingConfigError(f"other_writer_nodes = {other_writer_nodes!r}: expected an integer >= 0")
    try:
        hw = system_preset(system)
        st = storage_for(hw.name)
        src = failure_source(source) if isinstance(source, str) else source
    except KeyError as e:
        raise TrainingConfigError(str(e.args[0])) from None
    m = MODELS.get(model) if isinstance(model, str) else model
    if m is None:
        raise TrainingConfigError(f"unknown model {model!r}; known: {', '.join(MODELS)}")
    nodes = math.ceil(gpus / hw.gpus_per_node)
    if machine_gpus is None:
        machine_gpus = machine_for(hw, nodes).nodes * hw.gpus_per_node
    if machine_gpus < gpus:
        raise TrainingConfigError(f"machine_gpus = {machine_gpus}: fewer than the job's {gpus} GPUs")
    nbytes = checkpoint_bytes(m)
    wbw = pfs_job_bandwidth(st, nodes, machine_gpus, "write", other_writer_nodes)
    rbw = pfs_job_bandwidth(st, nodes, machine_gpus, "read", other_writer_nodes)
    delta = nbytes / wbw
    reload = nbytes / rbw
    mtbf = 1.0 / (gpus * src.rate_per_gpu_s)
    return RecoveryCosts(gpus, nodes, nbytes, wbw, rbw, delta, reload, restart.seconds(nodes, reload), mtbf,
                         rs.young_interval(delta, mtbf), rs.daly_interval(delta, mtbf), src.name)


@dataclass(frozen=True)
class Goodput:
    """One regime: ``interval_s`` (compute between checkpoints, or the step), ``ettr`` (goodput),
    ``failures_per_day`` (expected, of the job), ``lost_gpu_hours_per_day`` (GPUs x 24 x (1 - ettr)),
    ``per_failure_s`` (restart or recovery cost)."""

    regime: str
    interval_s: float
    ettr: float
    failures_per_day: float
    lost_gpu_hours_per_day: float
    per_failure_s: float


def _goodput(regime: str, c: RecoveryCosts, tau: float, delta: float, r: float) -> Goodput:
    work = DAY
    wall = rs.expected_wall_time(work, c.mtbf_s, tau, delta, r)
    ettr = work / wall
    return Goodput(regime, tau, ettr, DAY / c.mtbf_s, c.gpus * 24.0 * (1.0 - ettr), r)


def checkpoint_restart_goodput(c: RecoveryCosts, interval: float | None = None) -> Goodput:
    """Checkpoint/restart with Daly's interval (or ``interval`` s of compute between checkpoints)."""
    return _goodput("checkpoint_restart", c, c.daly_s if interval is None else float(interval), c.checkpoint_s,
                    c.restart_s)


def fast_recovery_goodput(c: RecoveryCosts, step_s: float,
                          recovery_s: float = rs.FLASHRECOVERY_RECOVERY_S) -> Goodput:
    """Checkpoint-free fast recovery: lose at most one step of ``step_s`` and pay ``recovery_s``."""
    if not step_s > 0 or not math.isfinite(step_s):
        raise TrainingConfigError(f"step_s = {step_s}: expected a positive number of seconds")
    return _goodput("fast_recovery", c, float(step_s), 0.0, float(recovery_s))
