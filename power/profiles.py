"""Job utilisation profiles and the runtime stretch of power-capped jobs.

Utilisation
-----------
A job's profile is read from the workload's extra columns when present:

* ``cpu_util``, ``gpu_util``: constants in [0, 1] (NaN = unknown);
* ``cpu_util_trace``, ``gpu_util_trace``: object arrays holding one 1-D array per job (or None),
  sampled every ``util_trace_dt`` seconds (a per-job column or the model option, default 30 s);
* ``compute_bound``: the fraction beta in [0, 1] of the job's time that scales with clock frequency.

SWF logs carry none of these, so missing values are drawn per job from a seeded generator
(stream ``"power.profile"``): ``cpu_util ~ Beta(4, 2)`` (mean 0.67), ``gpu_util ~ Beta(3, 2)``
(mean 0.60), ``compute_bound ~ Beta(2, 2)`` (mean 0.5). These are *assumptions* chosen to give a
busy machine a mid-range power draw; they are not fitted to data. A job whose SWF ``avg_cpu``
column is known gets ``cpu_util = avg_cpu / run`` clipped to [0, 1] instead (when the workload
reader provides ``avg_cpu``).

Caps and runtime stretch
------------------------
Under a power cap a device runs at a lower clock ``f``. We use two published models:

* dynamic power vs clock, ``P_dyn(f) / P_dyn(f_max) = (f / f_max) ** alpha`` (``alpha`` =
  ``cap_power_exponent``, default 2; CMOS dynamic power is C V^2 f with V falling with f, which gives
  1 <= alpha <= 3 over the DVFS range);
* the beta model of Hsu and Feng (SC'05, "A power-aware run-time system for high-performance
  computing"): ``T(f) / T(f_max) = beta * (f_max / f - 1) + 1``, where beta is the job's
  compute-boundedness. Memory-bound jobs (beta near 0) lose almost nothing, which matches DVFS
  studies on Frontier-class MI250X GPUs that report 8.5-13 % energy savings at no slowdown for
  memory-bound codes.

The progress rate handed to the engine is ``1 / (T(f) / T(f_max))``.
"""
from __future__ import annotations

import math

import numpy as np

#: Beta-distribution parameters of the default per-job draws (documented assumptions).
DEFAULT_CPU_UTIL_BETA = (4.0, 2.0)
DEFAULT_GPU_UTIL_BETA = (3.0, 2.0)
DEFAULT_COMPUTE_BOUND_BETA = (2.0, 2.0)


def _column(columns: dict, name: str, n: int) -> np.ndarray:
    a = columns.get(name)
    if a is None:
        return np.full(n, np.nan)
    a = np.asarray(a, dtype=float)
    if a.shape != (n,):
        raise ValueError(f"workload column {name!r} has shape {a.shape}, expected ({n},)")
    return a.copy()


def job_profiles(columns: dict, n: int, rng: np.random.Generator, runtime: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-job ``(cpu_util, gpu_util, compute_bound)`` arrays in [0, 1].

    Known values come from ``columns``; every NaN is replaced by a seeded draw (see the module
    docstring). All three arrays are drawn for every job (then overwritten where known), so one
    job's draw does not depend on which other jobs have known values.
    """
    cpu = _column(columns, "cpu_util", n)
    if "avg_cpu" in columns and runtime is not None:
        avg = np.asarray(columns["avg_cpu"], dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            u = np.where((avg >= 0) & (runtime > 0), avg / runtime, np.nan)
        cpu = np.where(np.isnan(cpu), np.clip(u, 0.0, 1.0), cpu)
    gpu = _column(columns, "gpu_util", n)
    beta = _column(columns, "compute_bound", n)
    d_cpu = rng.beta(*DEFAULT_CPU_UTIL_BETA, size=n)
    d_gpu = rng.beta(*DEFAULT_GPU_UTIL_BETA, size=n)
    d_beta = rng.beta(*DEFAULT_COMPUTE_BOUND_BETA, size=n)
    cpu = np.where(np.isnan(cpu), d_cpu, cpu)
    gpu = np.where(np.isnan(gpu), d_gpu, gpu)
    beta = np.where(np.isnan(beta), d_beta, beta)
    for name, a in (("cpu_util", cpu), ("gpu_util", gpu), ("compute_bound", beta)):
        if np.any((a < 0) | (a > 1)):
            i = int(np.flatnonzero((a < 0) | (a > 1))[0])
            raise ValueError(f"workload column {name!r}: job index {i} has {a[i]!r}, outside [0, 1]")
    return cpu, gpu, beta


def frequency_ratio(dyn_uncapped_w, dyn_capped_w, alpha: float):
    """Clock ratio ``f / f_max`` that brings dynamic power from ``dyn_uncapped_w`` to ``dyn_capped_w``."""
    u = np.asarray(dyn_uncapped_w, dtype=float)
    c = np.asarray(dyn_capped_w, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(u > 0, np.clip(c / np.where(u > 0, u, 1.0), 0.0, 1.0), 1.0)
    return r ** (1.0 / alpha)


def stretch(freq_ratio, compute_bound):
    """Hsu-Feng beta model: runtime multiplier ``beta * (1/phi - 1) + 1`` (inf when phi = 0 and beta > 0)."""
    phi = np.asarray(freq_ratio, dtype=float)
    beta = np.asarray(compute_bound, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = beta * (1.0 / phi - 1.0) + 1.0
    return np.where(beta == 0, 1.0, s)


def progress_rate(freq_ratio, compute_bound):
    """Progress rate (1 = full speed) of a job at clock ratio ``freq_ratio``; 0 when fully stalled."""
    s = stretch(freq_ratio, compute_bound)
    with np.errstate(divide="ignore"):
        return np.where(np.isinf(s), 0.0, 1.0 / s)


def device_ratio(cfg, cpu_util: float, gpu_util: float, cpu_cap_w: float, gpu_cap_w: float) -> float:
    """Clock ratio of a node under per-device caps: the slower of its loaded devices."""
    alpha = cfg.cap_power_exponent
    ratios = []
    if cfg.gpus_per_node > 0 and gpu_util > 0 and math.isfinite(gpu_cap_w):
        dyn = gpu_util * (cfg.gpu_max_w - cfg.gpu_idle_w)
        capped = min(dyn, max(gpu_cap_w - cfg.gpu_idle_w, 0.0))
        ratios.append(float(frequency_ratio(dyn, capped, alpha)))
    if cpu_util > 0 and math.isfinite(cpu_cap_w):
        dyn = cpu_util * (cfg.cpu_max_w - cfg.cpu_idle_w)
        capped = min(dyn, max(cpu_cap_w - cfg.cpu_idle_w, 0.0))
        ratios.append(float(frequency_ratio(dyn, capped, alpha)))
    return min(ratios) if ratios else 1.0
