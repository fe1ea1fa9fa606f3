"""Controller policies of an autoscaled serving deployment (the ``AUTOSCALERS`` and ``PD_POLICIES`` tables).

Each table entry names its factory and its options dataclass (`twin.plugins.option` fields: default,
unit, range, help), from which the checks, defaults and texts of its options are derived (`plugins`).

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

Any object with the same method works in their place (tests pass scripted controllers). A single-pool
autoscaler given to disaggregated pools is turned into its P/D form (`as_pd_policy`: ``fixed`` holds
each pool at its count, ``decode_tps`` keeps a P/D ratio, others run per pool), so passing `FixedPolicy`
to a P/D deployment works.
"""
from __future__ import annotations

import math
import copy
from collections import deque
from dataclasses import dataclass
from typing import Any

from hpctwin.twin.plugins import option

from .limits import MAX_INSTANCES, check_fraction, check_number
from .plugins import ServingTable

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
    """A constant count ``n``."""
    pd_form = "fixed"

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
    pd_form = "per_pool"

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
    pd_form = "ratio"

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


# ---------------------------------------------------------------------- disaggregated pools from any policy
def as_pd_policy(policy: Any, ratio: float = 1.0) -> Any:
    """A controller of disaggregated pools (``desired_pd(prefill view, decode view) -> (p, d)``) from
    ``policy``: a P/D policy as it is; a single-pool autoscaler (``desired(view) -> int``) in its table
    form (its ``pd_form``: ``fixed`` holds each pool at its count, `FixedPD`; ``ratio`` sizes the decode
    pool by it and holds prefill at ``ceil(decode x ratio)``, `RatioPolicy`; ``per_pool``, the default
    of an object without ``pd_form``: an independent copy on each pool's own signal, `PerPoolPD`). Else
    a ValueError naming what a controller must have."""
    if hasattr(policy, "desired_pd"):
        return policy
    if not hasattr(policy, "desired"):
        raise ValueError(f"P/D policy: a {type(policy).__name__} has neither desired_pd(prefill view, decode "
                         f"view) nor desired(view); give a P/D policy ({', '.join(PD_POLICIES)}) or an autoscaler "
                         f"({', '.join(AUTOSCALERS)})")
    form = getattr(policy, "pd_form", "per_pool")
    if form == "fixed" and isinstance(policy, FixedPolicy):
        return FixedPD(policy.n, policy.n)
    if form == "ratio":
        return RatioPolicy(policy, ratio)
    return PerPoolPD(policy, copy.deepcopy(policy))


def as_pool_policy(policy: Any) -> Any:
    """``policy`` when it sizes one pool (``desired(view) -> int``); a ValueError when it is a P/D policy
    (it sizes two pools) or has no ``desired``."""
    if hasattr(policy, "desired"):
        return policy
    if hasattr(policy, "desired_pd"):
        raise ValueError(f"autoscaler: a {type(policy).__name__} sizes prefill and decode pools (desired_pd); a "
                         "colocated pool needs a single-pool autoscaler (desired(view)): "
                         f"{', '.join(AUTOSCALERS)}, or give the deployment decode instances")
    raise ValueError(f"autoscaler: a {type(policy).__name__} has no desired(view) method; known autoscalers: "
                     f"{', '.join(AUTOSCALERS)}")


# ---------------------------------------------------------------------- the tables (options declared once)
@dataclass(frozen=True)
class FixedOptions:
    """``fixed``: a constant count."""
    instances: int = option(help="the count (fixed-at-peak provisioning)", unit="instances", minimum=1,
                            maximum=MAX_INSTANCES)


@dataclass(frozen=True)
class UtilizationOptions:
    """``utilization``: Kubernetes HPA on a utilisation metric."""
    target: float = option(0.7, help="target of the metric", unit="fraction", minimum=0.0, maximum=1.0,
                           exclusive_min=True)
    window_s: float = option(HPA_DOWNSCALE_WINDOW_S, help="scale-down stabilisation window", unit="s", minimum=0.0)
    metric: str = option("busy", choices=("busy", "kv"), help="busy fraction of the GPUs, or KV-cache use")


@dataclass(frozen=True)
class DecodeTPSOptions:
    """``decode_tps``: HeteroScale's decode tokens/s signal."""
    tps_per_instance: float = option(help="decode tokens/s one instance sustains", unit="tokens/s", minimum=0.0,
                                     exclusive_min=True)
    window_s: float = option(HPA_DOWNSCALE_WINDOW_S, help="scale-down stabilisation window", unit="s", minimum=0.0)


@dataclass(frozen=True)
class FixedPDOptions:
    """P/D ``fixed``: constant counts per pool."""
    prefill: int = option(help="prefill instances", unit="instances", minimum=1, maximum=MAX_INSTANCES)
    decode: int = option(help="decode instances", unit="instances", minimum=1, maximum=MAX_INSTANCES)


@dataclass(frozen=True)
class RatioOptions:
    """P/D ``ratio``: HeteroScale's decode policy with a fixed P/D ratio."""
    decode_policy: Any = option(help="the decode pool's autoscaler (an object with desired(view))", kind="any")
    ratio: float = option(help="prefill instances per decode instance", unit="", minimum=0.0, exclusive_min=True,
                          maximum=MAX_INSTANCES)


@dataclass(frozen=True)
class PerPoolOptions:
    """P/D ``per_pool``: one autoscaler per pool."""
    prefill: Any = option(help="the prefill pool's autoscaler (an object with desired(view))", kind="any")
    decode: Any = option(help="the decode pool's autoscaler", kind="any")


#: single-pool autoscalers: name -> factory (``desired(PoolView) -> int``); tag ``pd_form``: the P/D
#: policy the autoscaler takes for disaggregated pools (`as_pd_policy`, ``serving.mode = "pd"``)
AUTOSCALERS = ServingTable("autoscaler")
AUTOSCALERS.register("fixed", lambda instances: FixedPolicy(instances), spec=FixedOptions,
                     tags={"pd_form": FixedPolicy.pd_form}, help="a constant count (fixed-at-peak provisioning)")
AUTOSCALERS.register("utilization", UtilizationPolicy, spec=UtilizationOptions,
                     tags={"pd_form": UtilizationPolicy.pd_form},
                     help="Kubernetes HPA: ceil(current x metric / target), metric busy fraction or KV use, 10 % "
                          "tolerance, scale-down stabilisation window")
AUTOSCALERS.register("decode_tps", DecodeTPSPolicy, spec=DecodeTPSOptions,
                     tags={"pd_form": DecodeTPSPolicy.pd_form},
                     help="HeteroScale: ceil(decode tokens/s / tps_per_instance), scale-down stabilisation window")

#: disaggregated (P/D) pools: name -> factory (``desired_pd(prefill view, decode view) -> (p, d)``)
PD_POLICIES = ServingTable("P/D policy")
PD_POLICIES.register("fixed", FixedPD, spec=FixedPDOptions, help="constant prefill and decode counts")
PD_POLICIES.register("ratio", RatioPolicy, spec=RatioOptions,
                     help="HeteroScale: the decode pool follows an autoscaler, prefill = ceil(decode x ratio)")
PD_POLICIES.register("per_pool", PerPoolPD, spec=PerPoolOptions, help="one autoscaler per pool, on its own signal")


@dataclass(frozen=True)
class CapacityOptions:
    """P/D ``capacity``: HeteroScale-style scaling from measured capacity (issue 28 item 3)."""
    capacity: str = option(help="capacity file of the prefill (and decode) instances: hpctwin serve profile --out DIR")
    decode_capacity: str = option("", help="capacity file of the decode instances when of another type "
                                           "(default: capacity)")
    slo_class: str = option("", help="the SLO class whose knees size the pools (default: the file's first)")
    utilization: float = option(1.0, help="share of the knee capacity to plan for", unit="fraction", minimum=0.0,
                                maximum=1.0, exclusive_min=True)
    window_s: float = option(HPA_DOWNSCALE_WINDOW_S, help="scale-down stabilisation window", unit="s", minimum=0.0)
    per_class: bool = option(False, help="weigh the decode demand by class at each class's knee")
    prefill_signal: str = option("ratio", choices=("ratio", "prompt_tps"),
                                 help="prefill pool: the P/D ratio of the curves, or also the arriving prompt tokens/s")
    kv_floor: bool = option(False, help="never shrink the decode pool below the KV it holds and receives, plus "
                                        "kv_headroom (capacity curves hold only for the mix they were measured on)")
    kv_headroom: float = option(0.25, help="headroom of the KV floor above the KV in use (an assumption)",
                                unit="fraction", minimum=0.0, maximum=10.0)


def _capacity_pd(kv_floor: bool = False, kv_headroom: float = 0.25, **options):
    from .capacity import capacity_pd_policy  # noqa: PLC0415 (issue 28 item 3)
    return capacity_pd_policy(kv_headroom=kv_headroom if kv_floor else None, **options)


PD_POLICIES.register("capacity", _capacity_pd, spec=CapacityOptions,
                     help="HeteroScale from measured capacity: decode TPS over the decode knee, prefill by the curves' "
                          "P/D ratio; per-instance capacity (mixed types), scale-in with drain")
