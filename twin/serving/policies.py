"""Controller policies of an autoscaled serving deployment (the ``AUTOSCALERS`` and ``PD_POLICIES`` tables).

A controller runs every ``interval_s`` (Kubernetes HPA's default sync period, 15 s) and sees each pool
as a `PoolView`. An **autoscaler** (one pool) answers ``desired(view) -> int``:

* ``fixed`` (`FixedPolicy`): a constant count (fixed-at-peak provisioning);
* ``utilization`` (`UtilizationPolicy`): HPA's rule ``ceil(current x metric / target)`` on the mean busy
  fraction (or KV use) of the active instances over the last interval, with HPA's 10 % tolerance and
  its 300 s scale-down stabilisation window (the highest recommendation of the window wins);
* ``decode_tps`` (`DecodeTPSPolicy`): HeteroScale's signal, decode tokens per second over the interval,
  divided by a per-instance capacity (``ceil(tps / tps_per_instance)``), with the same stabilisation.

A **P/D policy** (disaggregated pools) answers ``desired_pd(prefill view, decode view) -> (prefill,
decode)``:

* ``fixed`` (`FixedPD`): constant counts per pool;
* ``ratio`` (`RatioPolicy`): the decode pool follows an autoscaler (HeteroScale: decode TPS) and the
  prefill pool is held at ``ceil(decode x ratio)``, HeteroScale's fixed P/D ratio;
* ``per_pool`` (`PerPoolPD`): one autoscaler per pool, each on its own pool's signal.

Any object with the same method works in their place (tests pass scripted controllers).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from .limits import MAX_INSTANCES, check_fraction, check_number
from .plugins import PluginTable

#: HPA defaults (kube-controller-manager): sync period 15 s, tolerance 0.1, downscale stabilisation 300 s
HPA_SYNC_S, HPA_TOLERANCE, HPA_DOWNSCALE_WINDOW_S = 15.0, 0.1, 300.0


@dataclass
class PoolView:
    """What a policy sees at a controller tick."""
    now: float
    interval_s: float
    active: int
    starting: int
    busy_fraction: float      # mean over active instances during the last interval
    decode_tps: float         # decode tokens per second over the last interval
    waiting: int              # requests queued on active instances
    kv_fraction: float = 0.0  # mean KV-block use of the active instances at the tick


class FixedPolicy:
    def __init__(self, n: int) -> None:
        self.n = int(n)

    def desired(self, v: PoolView) -> int:
        return self.n


class _Stabilised:
    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._recent: deque[tuple[float, int]] = deque()

    def _stabilise(self, now: float, rec: int) -> int:
        self._recent.append((now, rec))
        while self._recent and self._recent[0][0] < now - self.window_s:
            self._recent.popleft()
        return max(r for _, r in self._recent)


class UtilizationPolicy(_Stabilised):
    """HPA on a utilisation metric: desired = ceil(current x metric / target) outside the tolerance band.

    ``metric="busy"``: the fraction of time the GPUs run an iteration (what a GPU-utilisation counter
    reports; with continuous batching one decoding request keeps it near 1); ``metric="kv"``: the mean
    KV-cache use (vLLM's ``gpu_cache_usage_perc``)."""

    def __init__(self, target: float = 0.7, tolerance: float = HPA_TOLERANCE,
                 window_s: float = HPA_DOWNSCALE_WINDOW_S, metric: str = "busy") -> None:
        super().__init__(window_s)
        check_number(window_s, "window_s", unit="s")
        check_number(tolerance, "tolerance", unit="")
        if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0 < target <= 1:
            check_fraction(target, "utilisation target")
            raise ValueError(f"utilisation target must be in (0, 1], got {target}")
        if metric not in ("busy", "kv"):
            raise ValueError(f"utilisation metric must be busy or kv, got {metric!r}")
        self.target, self.tolerance, self.metric = target, tolerance, metric

    def desired(self, v: PoolView) -> int:
        cur = max(1, v.active + v.starting)
        ratio = (v.busy_fraction if self.metric == "busy" else v.kv_fraction) / self.target
        rec = cur if abs(ratio - 1) <= self.tolerance else math.ceil(max(1, v.active) * ratio)
        return self._stabilise(v.now, rec)


class DecodeTPSPolicy(_Stabilised):
    """HeteroScale's decode-TPS signal: desired = ceil(decode tokens/s / per-instance capacity)."""

    def __init__(self, tps_per_instance: float, window_s: float = HPA_DOWNSCALE_WINDOW_S) -> None:
        super().__init__(window_s)
        check_number(tps_per_instance, "tps_per_instance", lo_open=True, unit="tokens/s")
        check_number(window_s, "window_s", unit="s")
        self.tps_per_instance = tps_per_instance

    def desired(self, v: PoolView) -> int:
        return self._stabilise(v.now, max(1, math.ceil(v.decode_tps / self.tps_per_instance)))


class RatioPolicy:
    """HeteroScale for P/D pools: the decode pool follows ``decode_policy`` and the prefill pool holds
    ``ceil(decode x ratio)`` instances (the P/D ratio)."""

    def __init__(self, decode_policy, ratio: float) -> None:
        check_number(ratio, "the P/D ratio", lo_open=True, hi=MAX_INSTANCES, unit="")
        self.decode_policy, self.ratio = decode_policy, ratio

    def desired_pd(self, vp: PoolView, vd: PoolView) -> tuple[int, int]:
        nd = int(self.decode_policy.desired(vd))
        return max(1, math.ceil(nd * self.ratio)), nd


class FixedPD:
    """Constant counts: ``prefill`` and ``decode`` instances."""

    def __init__(self, prefill: int, decode: int) -> None:
        self.p, self.d = FixedPolicy(prefill), FixedPolicy(decode)

    def desired_pd(self, vp: PoolView, vd: PoolView) -> tuple[int, int]:
        return self.p.desired(vp), self.d.desired(vd)


class PerPoolPD:
    """One single-pool policy per pool (e.g. HPA on each pool's own signal)."""

    def __init__(self, prefill, decode) -> None:
        self.p, self.d = prefill, decode

    def desired_pd(self, vp: PoolView, vd: PoolView) -> tuple[int, int]:
        return self.p.desired(vp), self.d.desired(vd)


#: single-pool autoscalers: name -> factory (``desired(PoolView) -> int``)
AUTOSCALERS = PluginTable("autoscaler")
AUTOSCALERS.register("fixed", lambda instances: FixedPolicy(instances), ("instances",),
                     "a constant count (fixed-at-peak provisioning)")
AUTOSCALERS.register("utilization", lambda target=0.7, window_s=HPA_DOWNSCALE_WINDOW_S, metric="busy":
                     UtilizationPolicy(target, window_s=window_s, metric=metric), ("target", "window_s", "metric"),
                     "Kubernetes HPA: ceil(current x metric / target), metric busy fraction or KV use, 10 % "
                     "tolerance, scale-down stabilisation window")
AUTOSCALERS.register("decode_tps", lambda tps_per_instance, window_s=HPA_DOWNSCALE_WINDOW_S:
                     DecodeTPSPolicy(tps_per_instance, window_s=window_s), ("tps_per_instance", "window_s"),
                     "HeteroScale: ceil(decode tokens/s / tps_per_instance), scale-down stabilisation window")

#: disaggregated (P/D) pools: name -> factory (``desired_pd(prefill view, decode view) -> (p, d)``)
PD_POLICIES = PluginTable("P/D policy")
PD_POLICIES.register("fixed", FixedPD, ("prefill", "decode"), "constant prefill and decode counts")
PD_POLICIES.register("ratio", RatioPolicy, ("decode_policy", "ratio"),
                     "HeteroScale: the decode pool follows an autoscaler, prefill = ceil(decode x ratio)")
PD_POLICIES.register("per_pool", PerPoolPD, ("prefill", "decode"), "one autoscaler per pool, on its own signal")
