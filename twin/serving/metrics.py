"""Request latency statistics with LLMServingSim's definitions (``bench/core/validate.py``).

* TTFT = first_token - arrival (queueing included), s
* TPOT = (last_token - first_token) / max(1, output_tokens - 1), s
* E2E  = last_token - arrival, s

Each at mean, median, P90, P95, P99 (numpy's default linear percentile): the 15 statistics.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

STATS = ("mean", "median", "p90", "p95", "p99")
METRICS = ("ttft", "tpot", "e2e")


def latencies(arrival: Sequence[float], first: Sequence[float], last: Sequence[float],
              output_tokens: Sequence[int]) -> dict[str, np.ndarray]:
    """TTFT, TPOT and E2E arrays (s) from per-request times (s) and output token counts."""
    a, f, l_ = (np.asarray(x, float) for x in (arrival, first, last))
    n = np.maximum(1, np.asarray(output_tokens, float) - 1)
    return {"ttft": f - a, "tpot": (l_ - f) / n, "e2e": l_ - a}


def statistics(values: np.ndarray) -> dict[str, float]:
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {s: float("nan") for s in STATS}
    return {"mean": float(v.mean()), "median": float(np.median(v)), "p90": float(np.percentile(v, 90)),
            "p95": float(np.percentile(v, 95)), "p99": float(np.percentile(v, 99))}


def fifteen(lat: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """``{"ttft": {"mean": ..., ...}, "tpot": {...}, "e2e": {...}}`` in seconds."""
    return {m: statistics(lat[m]) for m in METRICS}


def slo_attainment(lat: dict[str, np.ndarray], ttft_slo_s: float, tpot_slo_s: float) -> float:
    """Fraction of requests meeting both the TTFT and the TPOT objective (DistServe's attainment)."""
    ok = (lat["ttft"] <= ttft_slo_s) & (lat["tpot"] <= tpot_slo_s)
    return float(ok.mean()) if ok.size else float("nan")
