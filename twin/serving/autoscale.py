"""Autoscaling a colocated serving pool, with cold starts.

A controller runs every ``interval_s`` (Kubernetes HPA's default sync period, 15 s) and sets the desired
number of instances, clamped to ``[min_instances, max_instances]`` (``max_instances`` = what the
cluster can hold). A new instance serves after its cold start: a fixed ``startup_s`` plus its weights
per GPU over ``load_GBps`` (`cold_start_s`). Scaling down first cancels instances still starting, then
drains the most recently started active ones (no new requests; they stop when empty). GPU time is
billed from the scale-up decision to the stop.

Policies (``desired(now, pool)`` -> int):

* `FixedPolicy`: a constant count (fixed-at-peak provisioning);
* `UtilizationPolicy`: HPA's rule ``ceil(current x metric / target)`` on the mean busy fraction of the
  active instances over the last interval, with HPA's 10 % tolerance and its 300 s scale-down
  stabilisation window (the highest recommendation of the window wins);
* `DecodeTPSPolicy`: HeteroScale's signal, decode tokens per second over the interval, divided by a
  per-instance capacity (``ceil(tps / tps_per_instance)``), optionally with the same stabilisation.
"""
from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Sequence

from hpctwin.datasets.serving_traces import ServingRequest

from .cluster import ROUTERS, ServingResult, make_requests
from .instance import Instance

#: HPA defaults (kube-controller-manager): sync period 15 s, tolerance 0.1, downscale stabilisation 300 s
HPA_SYNC_S, HPA_TOLERANCE, HPA_DOWNSCALE_WINDOW_S = 15.0, 0.1, 300.0
#: one PCIe Gen4 NVMe SSD's sequential read (Samsung 990 PRO data sheet: 7.45 GB/s), 1 GB = 1e9 B
DEFAULT_LOAD_GBPS = 7.0
#: process start, CUDA context and graph capture before weights load (s): an assumption to state, not a measurement
DEFAULT_STARTUP_S = 30.0


def cold_start_s(weight_bytes_per_gpu: float, load_GBps: float = DEFAULT_LOAD_GBPS,
                 startup_s: float = DEFAULT_STARTUP_S) -> float:
    """Seconds from a scale-up decision until the instance serves (its GPUs load in parallel)."""
    return startup_s + weight_bytes_per_gpu / (load_GBps * 1e9)


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
        if not 0 < target <= 1:
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
        if tps_per_instance <= 0:
            raise ValueError("tps_per_instance must be positive")
        self.tps_per_instance = tps_per_instance

    def desired(self, v: PoolView) -> int:
        return self._stabilise(v.now, max(1, math.ceil(v.decode_tps / self.tps_per_instance)))


@dataclass
class ScaleLog:
    """Instance-count time series and the billed GPU time of an autoscaled run."""
    times: list[float] = field(default_factory=list)
    active: list[int] = field(default_factory=list)
    starting: list[int] = field(default_factory=list)
    gpu_seconds: float = 0.0
    busy_gpu_seconds: float = 0.0


def simulate_autoscaled(trace: Sequence[ServingRequest], make_instance: Callable[[int], Instance], policy,
                        min_instances: int, max_instances: int, cold_start: float, interval_s: float = HPA_SYNC_S,
                        initial: int | None = None, router: str = "least_loaded") -> tuple[ServingResult, ScaleLog]:
    """Serve ``trace`` on a pool resized by ``policy`` (see the module docstring)."""
    if not 1 <= min_instances <= max_instances:
        raise ValueError(f"need 1 <= min_instances <= max_instances, got {min_instances}, {max_instances}")
    pick = ROUTERS[router]()
    reqs = make_requests(trace)
    insts: list[Instance] = []
    state: dict[int, str] = {}             # iid -> starting | active | draining | stopped
    billed_from: dict[int, float] = {}
    log = ScaleLog()
    pending: deque = deque()               # requests that arrived while nothing was active
    ev: list[tuple[float, int, int, object]] = []  # (time, kind 0 ready / 1 tick / 2 arrival, seq, payload)
    seq = 0

    def push(t: float, kind: int, payload) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(ev, (t, kind, seq, payload))

    def start(now: float, ready_at: float) -> None:
        x = make_instance(len(insts))
        insts.append(x)
        state[x.iid] = "starting"
        billed_from[x.iid] = now
        x.t = ready_at
        push(ready_at, 0, x)

    def stop(x: Instance, now: float) -> None:
        state[x.iid] = "stopped"
        log.gpu_seconds += x.model.tp * max(0.0, now - billed_from[x.iid])
        log.busy_gpu_seconds += x.model.tp * x.busy_s

    def live() -> list[Instance]:
        return [x for x in insts if state[x.iid] in ("active", "draining")]

    def active() -> list[Instance]:
        return [x for x in insts if state[x.iid] == "active"]

    n0 = max(min_instances, min(max_instances, initial if initial is not None else min_instances))
    for _ in range(n0):
        start(0.0, 0.0)
    for i in sorted(range(len(reqs)), key=lambda i: (reqs[i].arrival, i)):
        push(reqs[i].arrival, 2, reqs[i])
    last_arrival = max((r.arrival for r in reqs), default=0.0)
    push(interval_s, 1, None)
    prev = {"t": 0.0, "busy": 0.0, "tok": 0}

    while ev:
        t, kind, _, payload = heapq.heappop(ev)
        for x in live():
            x.advance_until(t)
            if state[x.iid] == "draining" and x.idle():
                stop(x, max(x.t, t))
        if kind == 0:
            x = payload
            if state.get(x.iid) != "starting":
                continue
            state[x.iid] = "active"
            x.t = t
            while pending:
                r = pending.popleft()
                pick(active(), r).add(r, t)
        elif kind == 2:
            r = payload
            act = active()
            if act:
                pick(act, r).add(r, t)
            else:
                pending.append(r)
        else:
            act, starting = active(), [x for x in insts if state[x.iid] == "starting"]
            busy = sum(x.busy_s for x in insts)
            tok = sum(x.tokens_decoded for x in insts)
            span = max(1e-9, t - prev["t"])
            view = PoolView(t, interval_s, len(act), len(starting),
                            min(1.0, (busy - prev["busy"]) / (span * max(1, len(act)))),
                            (tok - prev["tok"]) / span, sum(len(x.waiting) for x in act),
                            sum(x.kv.used / x.kv.num_blocks for x in act) / max(1, len(act)))
            prev.update(t=t, busy=busy, tok=tok)
            want = max(min_instances, min(max_instances, int(policy.desired(view))))
            have = len(act) + len(starting)
            if want > have:
                for _ in range(want - have):
                    start(t, t + cold_start)
            elif want < have:
                extra = have - want
                for x in reversed(starting):
                    if extra == 0:
                        break
                    stop(x, t)
                    extra -= 1
                for x in reversed(act):
                    if extra == 0:
                        break
                    state[x.iid] = "draining"
                    if x.idle():
                        stop(x, t)
                    extra -= 1
            log.times.append(t)
            log.active.append(len(active()))
            log.starting.append(sum(1 for x in insts if state[x.iid] == "starting"))
            if t < last_arrival or any(not x.idle() for x in live()) or pending:
                push(t + interval_s, 1, None)
    end = 0.0
    for x in insts:
        if state[x.iid] in ("active", "draining"):
            x.drain()
            end = max(end, x.t)
    for x in insts:
        if state[x.iid] in ("active", "draining"):
            stop(x, end)
    for r in reqs:
        if r.generated != r.output:
            raise RuntimeError(f"request {r.uid} generated {r.generated} of {r.output} tokens")
    return ServingResult(reqs, insts, end), log
