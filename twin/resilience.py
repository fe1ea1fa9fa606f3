"""Failures and recovery of large training jobs: checkpoint intervals, goodput, Monte-Carlo checks.

Analytic models for a job of ``nodes`` nodes whose nodes fail independently with a per-node mean
time between failures ``node_mtbf`` (s). The job fails whenever any of its nodes fails, so its MTBF
is ``M = node_mtbf / nodes`` (exponential failures; a failed node is replaced by a spare, so the
job's node count stays constant).

Regimes
-------
* **Checkpoint/restart**: the job computes for ``tau`` s, writes a checkpoint for ``delta`` s, and so
  on; a failure loses the work since the last *completed* checkpoint and costs a restart of ``R`` s
  (re-queue, re-load the checkpoint) before computing resumes; a failure during a restart starts the
  restart again. Optimal ``tau``: Young (1974) ``sqrt(2 delta M)``; Daly (2006) higher-order
  ``sqrt(2 delta M) [1 + (1/3) sqrt(delta / 2M) + (1/9) (delta / 2M)] - delta`` for ``delta < 2M``,
  else ``M``. Expected wall time for ``W`` s of work (Daly, FGCS 22(3) 2006, eq. 20, exact for
  exponential failures and ``W`` a multiple of ``tau``):
  ``T = M exp(R / M) (exp((tau + delta) / M) - 1) W / tau``.
* **Checkpoint-free fast recovery** (in-memory redundancy, e.g. FlashRecovery): the job keeps its
  place, a failure loses at most the current training step (``step`` s) and costs a recovery time
  ``R_f`` nearly independent of scale. It is the same renewal process with ``tau = step``,
  ``delta = 0``, ``R = R_f``: ``T = M exp(R_f / M) (exp(step / M) - 1) W / step``
  (about ``W (1 + step / 2M + R_f / M)`` when step, R_f << M).

Effective training time ratio ``ETTR = W / T`` (useful time / wall time, the "goodput" fraction);
lost time ``T - W`` (checkpoint writes, lost work, restarts); lost GPU-hours = ``(T - W) x GPUs /
3600``.

Public anchors
--------------
* Llama 3 (Dubey et al., "The Llama 3 Herd of Models", arXiv:2407.21783, 2024, section 3.3.4):
  419 unexpected interruptions in a 54-day snapshot of pre-training on 16,384 H100 GPUs, i.e. 2,048
  8-GPU nodes -> per-node MTBF = 54 d x 2,048 / 419 = 263.9 days (`LLAMA3_NODE_MTBF_S`).
* FlashRecovery (arXiv 2025, "FlashRecovery: Fast and Low-Cost Recovery from Failures for
  Large-Scale Training of LLMs"): recovery within 150 s on a 4,800-device training cluster
  (`FLASHRECOVERY_RECOVERY_S`), nearly independent of scale.

Monte-Carlo (`simulate`): failure times from a seeded Poisson process (exponential inter-arrival
times at rate ``nodes / node_mtbf``) or a per-node Weibull renewal process (shape ``k``, scale set
so the per-node mean is ``node_mtbf``; every node starts fresh at time 0), and the exact renewal
dynamics above, one Python iteration per failure (no time stepping).

Units: seconds throughout; GPU-hours where named.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

DAY = 86400.0

#: Llama 3 pre-training: 419 unexpected interruptions in 54 days on 16,384 H100 GPUs (Dubey et al. 2024).
LLAMA3_INTERRUPTIONS = 419
LLAMA3_DAYS = 54.0
LLAMA3_GPUS = 16384
LLAMA3_GPUS_PER_NODE = 8      # Meta's Grand Teton H100 servers: 8 GPUs each (Dubey et al. 2024, sec. 3.3.1)
#: Per-node MTBF implied by the Llama 3 anchor (s): 54 d x 2,048 nodes / 419 = 263.9 d.
LLAMA3_NODE_MTBF_S = LLAMA3_DAYS * DAY * (LLAMA3_GPUS / LLAMA3_GPUS_PER_NODE) / LLAMA3_INTERRUPTIONS
#: FlashRecovery: recovery within 150 s on 4,800 devices (FlashRecovery, arXiv 2025).
FLASHRECOVERY_RECOVERY_S = 150.0
FLASHRECOVERY_DEVICES = 4800


class ResilienceError(ValueError):
    """Invalid parameters of a resilience model."""


def _pos(name: str, v: float, allow_zero: bool = False) -> float:
    v = float(v)
    if not (v >= 0 if allow_zero else v > 0) or not math.isfinite(v):
        raise ResilienceError(f"{name} must be {'>= 0' if allow_zero else '> 0'} and finite, got {v}")
    return v


def node_mtbf_from_anchor(interruptions: float, days: float, devices: int, devices_per_node: int) -> float:
    """Per-node MTBF (s) from an observed interruption count on ``devices`` over ``days``."""
    nodes = _pos("devices", devices) / _pos("devices_per_node", devices_per_node)
    return _pos("days", days) * DAY * nodes / _pos("interruptions", interruptions)


def job_mtbf(node_mtbf: float, nodes: int) -> float:
    """MTBF (s) of a job on ``nodes`` nodes whose nodes fail independently (exponential)."""
    return _pos("node_mtbf", node_mtbf) / _pos("nodes", nodes)


def young_interval(checkpoint_cost: float, mtbf: float) -> float:
    """Young's (1974) optimal compute time between checkpoints, ``sqrt(2 delta M)`` (s)."""
    return math.sqrt(2.0 * _pos("checkpoint_cost", checkpoint_cost) * _pos("mtbf", mtbf))


def daly_interval(checkpoint_cost: float, mtbf: float) -> float:
    """Daly's (2006) higher-order optimal compute time between checkpoints (s); ``M`` when delta >= 2M."""
    d, m = _pos("checkpoint_cost", checkpoint_cost), _pos("mtbf", mtbf)
    if d >= 2.0 * m:
        return m
    x = d / (2.0 * m)
    return math.sqrt(2.0 * d * m) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - d


def expected_wall_time(work: float, mtbf: float, interval: float, checkpoint_cost: float = 0.0,
                       restart: float = 0.0) -> float:
    """Daly's expected wall time (s) for ``work`` s of computation (see module docstring)."""
    w, m, tau = _pos("work", work, True), _pos("mtbf", mtbf), _pos("interval", interval)
    d, r = _pos("checkpoint_cost", checkpoint_cost, True), _pos("restart", restart, True)
    return m * math.exp(r / m) * math.expm1((tau + d) / m) * w / tau


@dataclass(frozen=True)
class RecoveryEstimate:
    """Outcome of a regime for one job: ``wall`` (s), ``ettr`` = work / wall, ``failures`` (expected
    count), ``lost`` (s of wall time not spent on useful work), ``interval`` (s between checkpoints
    or the step), and the inputs."""

    regime: str
    work: float
    nodes: int
    mtbf: float
    interval: float
    wall: float
    ettr: float
    failures: float
    lost: float

    def lost_gpu_hours(self, gpus: float) -> float:
        return self.lost * gpus / 3600.0


def checkpoint_restart(work: float, nodes: int, node_mtbf: float, checkpoint_cost: float, restart: float,
                       interval: float | None = None, rule: str = "daly") -> RecoveryEstimate:
    """Checkpoint/restart regime; ``interval`` defaults to the Daly (or ``rule="young"``) optimum."""
    m = job_mtbf(node_mtbf, nodes)
    if interval is None:
        if rule == "daly":
            interval = daly_interval(checkpoint_cost, m)
        elif rule == "young":
            interval = young_interval(checkpoint_cost, m)
        else:
            raise ResilienceError(f"unknown interval rule {rule!r}; use 'daly' or 'young'")
    wall = expected_wall_time(work, m, interval, checkpoint_cost, restart)
    return RecoveryEstimate("checkpoint_restart", float(work), int(nodes), m, float(interval), wall,
                            work / wall if wall > 0 else 1.0, wall / m, wall - work)


def fast_recovery(work: float, nodes: int, node_mtbf: float, step: float,
                  recovery: float = FLASHRECOVERY_RECOVERY_S) -> RecoveryEstimate:
    """Checkpoint-free fast recovery: lose the current step (``step`` s) and pay ``recovery`` s."""
    m = job_mtbf(node_mtbf, nodes)
    wall = expected_wall_time(work, m, step, 0.0, recovery)
    return RecoveryEstimate("fast_recovery", float(work), int(nodes), m, float(step), wall,
                            work / wall if wall > 0 else 1.0, wall / m, wall - work)


# ---------------------------------------------------------------------------------- Monte Carlo
def failure_times(rng: np.random.Generator, nodes: int, node_mtbf: float, horizon: float,
                  dist: str = "poisson", shape: float = 1.0) -> np.ndarray:
    """Sorted job-level failure times in [0, horizon) (s) for ``nodes`` independent nodes.

    ``dist="poisson"``: a Poisson process of rate nodes / node_mtbf. ``dist="weibull"``: each node
    is a renewal process with Weibull(shape) inter-failure times of mean ``node_mtbf``.
    """
    nodes, mtbf, horizon = int(_pos("nodes", nodes)), _pos("node_mtbf", node_mtbf), _pos("horizon", horizon)
    if dist == "poisson":
        rate = nodes / mtbf
        k = int(rate * horizon + 6.0 * math.sqrt(rate * horizon) + 16)
        t = np.cumsum(rng.exponential(1.0 / rate, size=k))
        while t[-1] < horizon:
            t = np.concatenate([t, t[-1] + np.cumsum(rng.exponential(1.0 / rate, size=k))])
        return t[t < horizon]
    if dist == "weibull":
        k_shape = _pos("shape", shape)
        scale = mtbf / math.gamma(1.0 + 1.0 / k_shape)
        per = int(horizon / mtbf * 2 + 8)
        t = np.cumsum(scale * rng.weibull(k_shape, size=(nodes, per)), axis=1)
        while np.any(t[:, -1] < horizon):
            t = np.concatenate([t, t[:, -1:] + np.cumsum(scale * rng.weibull(k_shape, size=(nodes, per)), axis=1)],
                               axis=1)
        out = t[t < horizon]
        out.sort()
        return out
    raise ResilienceError(f"unknown failure distribution {dist!r}; use 'poisson' or 'weibull'")


def replay_failures(work: float, failures: np.ndarray, interval: float, checkpoint_cost: float,
                    restart: float) -> tuple[float, int]:
    """Exact wall time (s) and failures suffered by a job doing ``work`` s of computation in segments
    of ``interval`` s each followed by a checkpoint of ``checkpoint_cost`` s (none after the last),
    losing the uncommitted segment and paying ``restart`` s at each failure (sorted ``failures``,
    s). Returns (wall, failures hit); raises if the failures run out before the job ends."""
    tau, d, r = (_pos("interval", interval), _pos("checkpoint_cost", checkpoint_cost, True),
                 _pos("restart", restart, True))
    done, t, i, hit = 0.0, 0.0, 0, 0
    n = len(failures)
    while True:
        remaining = work - done
        nseg = math.ceil(remaining / tau - 1e-12) if remaining > 0 else 0
        finish = t + remaining + max(nseg - 1, 0) * d
        while i < n and failures[i] < t:
            i += 1
        if i >= n or finish <= failures[i]:
            return finish, hit
        f = float(failures[i])
        hit += 1
        done = min(work, done + math.floor((f - t) / (tau + d)) * tau)
        t = f + r
        i += 1
        while i < n and failures[i] < t:      # failure during the restart: start the restart again
            t = float(failures[i]) + r
            hit += 1
            i += 1


@dataclass(frozen=True)
class MonteCarloResult:
    """Mean and standard error of the wall time (s) and ETTR over ``trials``, mean failures hit."""

    regime: str
    trials: int
    wall_mean: float
    wall_sem: float
    ettr_mean: float
    ettr_sem: float
    failures_mean: float


def simulate(work: float, nodes: int, node_mtbf: float, *, regime: str = "checkpoint_restart",
             checkpoint_cost: float = 0.0, restart: float = 0.0, interval: float | None = None,
             step: float = 1.0, recovery: float = FLASHRECOVERY_RECOVERY_S, trials: int = 200,
             seed: int = 0, dist: str = "poisson", shape: float = 1.0) -> MonteCarloResult:
    """Monte-Carlo wall time and ETTR of one job under ``regime`` (``checkpoint_restart`` with the
    Daly interval unless ``interval`` is given, or ``fast_recovery``), seeded with ``seed``."""
    if regime == "checkpoint_restart":
        tau = interval if interval is not None else daly_interval(checkpoint_cost, job_mtbf(node_mtbf, nodes))
        d, r = checkpoint_cost, restart
    elif regime == "fast_recovery":
        tau, d, r = step, 0.0, recovery
    else:
        raise ResilienceError(f"unknown regime {regime!r}; use 'checkpoint_restart' or 'fast_recovery'")
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, 7])))
    est = expected_wall_time(work, job_mtbf(node_mtbf, nodes), tau, d, r)
    walls, hits = np.empty(trials), np.empty(trials)
    for k in range(trials):
        horizon = 2.0 * est + 10.0 * job_mtbf(node_mtbf, nodes)
        while True:
            f = failure_times(rng, nodes, node_mtbf, horizon, dist, shape)
            try:
                w, h = replay_failures(work, f, tau, d, r)
            except IndexError:  # pragma: no cover - defensive
                w = math.inf
            if w < horizon:
                break
            horizon *= 2.0
        walls[k], hits[k] = w, h
    ettr = work / walls
    sq = math.sqrt(max(trials - 1, 1) * trials)
    return MonteCarloResult(regime, trials, float(walls.mean()), float(walls.std(ddof=0) * math.sqrt(trials) / sq),
                            float(ettr.mean()), float(ettr.std(ddof=0) * math.sqrt(trials) / sq),
                            float(hits.mean()))
