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
  per-instance capacity (``ceil(tps / tps_per_instance)``), optionally with the same stabilisation;
* `RatioPolicy` (disaggregated pools, ``make_decode=``): the decode pool follows a policy (HeteroScale:
  decode TPS) and the prefill pool is held at ``ceil(decode x ratio)``, HeteroScale's fixed P/D ratio.

Disaggregated pools hand a finished prompt to the decode pool by `pd.simulate_pd`'s rule (`pd.KVPump`):
the decode instance is chosen among the active ones when the prompt completes, sets the prompt's KV
blocks aside while it crosses (`pd.kv_transfer_s` with both instances' TP) and queues the request when
it lands; a prompt finding no active decode instance waits until one serves, and its transfer starts
then. A draining decode instance stops only once no KV is on its way to it.
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
from .limits import (MAX_COLD_START_S, MAX_GBPS, MAX_INSTANCES, check_fraction, check_int, check_number,
                     check_ticks)

#: HPA defaults (kube-controller-manager): sync period 15 s, tolerance 0.1, downscale stabilisation 300 s
HPA_SYNC_S, HPA_TOLERANCE, HPA_DOWNSCALE_WINDOW_S = 15.0, 0.1, 300.0
#: one PCIe Gen4 NVMe SSD's sequential read (Samsung 990 PRO data sheet: 7.45 GB/s), 1 GB = 1e9 B
DEFAULT_LOAD_GBPS = 7.0
#: process start, CUDA context and graph capture before weights load (s): an assumption to state, not a measurement
DEFAULT_STARTUP_S = 30.0


def cold_start_s(weight_bytes_per_gpu: float, load_GBps: float = DEFAULT_LOAD_GBPS,
                 startup_s: float = DEFAULT_STARTUP_S) -> float:
    """Seconds from a scale-up decision until the instance serves (its GPUs load in parallel): ``startup_s``
    (s) plus the weights per GPU (bytes) at ``load_GBps`` (GB/s, 1 GB = 1e9 B)."""
    check_number(weight_bytes_per_gpu, "weight bytes per GPU", unit="bytes")
    check_number(load_GBps, "load_GBps", lo_open=True, unit="GB/s")
    check_number(startup_s, "startup_s", unit="s")
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


@dataclass
class ScaleLog:
    """Instance-count time series and the billed GPU time of an autoscaled run."""
    times: list[float] = field(default_factory=list)
    active: list[int] = field(default_factory=list)
    starting: list[int] = field(default_factory=list)
    gpu_seconds: float = 0.0
    busy_gpu_seconds: float = 0.0


class ScaledPool:
    """One resizable pool: its instances' states (starting, active, draining, stopped), routing to the
    active ones (requests wait at the router while none is active), scale up/down and GPU billing."""

    def __init__(self, make: Callable[[int], Instance], router: str, log: ScaleLog, on_start: Callable,
                 role: str = "both") -> None:
        self.make, self.pick, self.log, self.on_start, self.role = make, ROUTERS[router](), log, on_start, role
        self.insts: list[Instance] = []
        self.state: dict[int, str] = {}
        self.billed_from: dict[int, float] = {}
        self.pending: deque = deque()
        self.prev = {"t": 0.0, "busy": 0.0, "tok": 0}
        #: what an activation does with each waiting item (default: route it); P/D decode: start its KV
        self.dispatch: Callable = self.route

    def of(self, *states: str) -> list[Instance]:
        return [x for x in self.insts if self.state[id(x)] in states]

    def start(self, now: float, ready_at: float, iid: int) -> None:
        x = self.make(iid)
        x.role = self.role
        self.insts.append(x)
        self.state[id(x)] = "starting"
        self.billed_from[id(x)] = now
        x.t = ready_at
        self.on_start(ready_at, self, x)

    def stop(self, x: Instance, now: float) -> None:
        self.state[id(x)] = "stopped"
        self.log.gpu_seconds += x.model.tp * max(0.0, now - self.billed_from[id(x)])
        self.log.busy_gpu_seconds += x.model.tp * x.busy_s

    def advance(self, t: float) -> None:
        for x in self.of("active", "draining"):
            x.advance_until(t)
            if self.state[id(x)] == "draining" and x.idle() and not x.inbound:
                self.stop(x, max(x.t, t))

    def activate(self, x: Instance, t: float) -> None:
        if self.state.get(id(x)) != "starting":
            return
        self.state[id(x)] = "active"
        x.t = t
        while self.pending:
            self.dispatch(*self.pending.popleft(), t)

    def route(self, r, transferred: bool, t: float) -> None:
        act = self.of("active")
        if not act:
            self.pending.append((r, transferred))
            return
        x = self.pick(act, r)
        if transferred:
            x.add_transferred(r, t)
        else:
            x.add(r, t)

    def view(self, t: float, interval_s: float) -> PoolView:
        act = self.of("active")
        busy = sum(x.busy_s for x in self.insts)
        tok = sum(x.tokens_decoded for x in self.insts)
        span = max(1e-9, t - self.prev["t"])
        v = PoolView(t, interval_s, len(act), len(self.of("starting")),
                     min(1.0, (busy - self.prev["busy"]) / (span * max(1, len(act)))), (tok - self.prev["tok"]) / span,
                     sum(len(x.waiting) for x in act), sum(x.kv.used / x.kv.num_blocks for x in act) / max(1, len(act)))
        self.prev.update(t=t, busy=busy, tok=tok)
        return v

    def resize(self, want: int, t: float, cold_start: float, next_id: Callable[[], int]) -> None:
        act, starting = self.of("active"), self.of("starting")
        have = len(act) + len(starting)
        for _ in range(max(0, want - have)):
            self.start(t, t + cold_start, next_id())
        extra = max(0, have - want)
        for x in reversed(starting):
            if extra == 0:
                break
            self.stop(x, t)
            extra -= 1
        for x in reversed(act):
            if extra == 0:
                break
            self.state[id(x)] = "draining"
            if x.idle() and not x.inbound:
                self.stop(x, t)
            extra -= 1

    def busy(self) -> bool:
        return bool(self.pending) or any(not x.idle() for x in self.of("active", "draining"))

    def finish(self) -> float:
        end = 0.0
        for x in self.of("active", "draining"):
            x.drain()
            end = max(end, x.t)
        return end


class RatioPolicy:
    """HeteroScale for P/D pools: the decode pool follows ``decode_policy`` and the prefill pool holds
    ``ceil(decode x ratio)`` instances (the P/D ratio)."""

    def __init__(self, decode_policy, ratio: float) -> None:
        check_number(ratio, "the P/D ratio", lo_open=True, hi=MAX_INSTANCES, unit="")
        self.decode_policy, self.ratio = decode_policy, ratio

    def desired_pd(self, vp: PoolView, vd: PoolView) -> tuple[int, int]:
        nd = int(self.decode_policy.desired(vd))
        return max(1, math.ceil(nd * self.ratio)), nd


def _start_initial(P, D, n0: int, next_id) -> None:
    """The pool at t = 0: ``n0`` instances (split prefill/decode, each at least one, when ``D``)."""
    if D is None:
        for _ in range(n0):
            P.start(0.0, 0.0, next_id())
        return
    for _ in range(max(1, n0 // 2)):
        P.start(0.0, 0.0, next_id())
    for _ in range(max(1, n0 - max(1, n0 // 2))):
        D.start(0.0, 0.0, next_id())


def _rescale(P, D, policy, t: float, interval_s: float, bounds: tuple[int, int], cold_start: float,
             next_id) -> None:
    """One autoscaler decision at ``t``, clamped to ``bounds`` = (min, max) instances in all (each pool
    of a disaggregated deployment keeps at least one)."""
    lo, hi = bounds
    if D is None:
        P.resize(max(lo, min(hi, int(policy.desired(P.view(t, interval_s))))), t, cold_start, next_id)
        return
    wp, wd = policy.desired_pd(P.view(t, interval_s), D.view(t, interval_s))
    wp, wd = max(1, wp), max(1, wd)
    tot = max(lo, min(hi, wp + wd))
    wp = max(1, min(wp, tot - 1))
    D.resize(tot - wp, t, cold_start, next_id)
    P.resize(wp, t, cold_start, next_id)


def simulate_autoscaled(trace: Sequence[ServingRequest], make_instance: Callable[[int], Instance], policy,
                        min_instances: int, max_instances: int, cold_start: float, interval_s: float = HPA_SYNC_S,
                        initial: int | None = None, router: str = "least_loaded",
                        make_decode: Callable[[int], Instance] | None = None, link_GBps: float | None = None
                        ) -> tuple[ServingResult, ScaleLog]:
    """Serve ``trace`` on a pool resized by ``policy`` (see the module docstring).

    With ``make_decode``, the deployment is disaggregated: ``make_instance`` builds prefill instances,
    ``make_decode`` decode ones, ``policy.desired_pd(prefill_view, decode_view)`` sizes both (e.g.
    `RatioPolicy`), and the bounds apply to the two pools together (each keeps at least one)."""
    from .pd import DEFAULT_KV_LINK_GBPS, KVPump  # noqa: PLC0415
    check_int(min_instances, "min_instances", lo=1, hi=MAX_INSTANCES, what="instances")
    check_int(max_instances, "max_instances", lo=1, hi=MAX_INSTANCES, what="instances")
    if initial is not None:
        check_int(initial, "initial", lo=0, hi=MAX_INSTANCES, what="instances")
    if not 1 <= min_instances <= max_instances:
        raise ValueError(f"need 1 <= min_instances <= max_instances, got {min_instances}, {max_instances}")
    check_number(interval_s, "interval_s", lo_open=True, unit="s")
    check_number(cold_start, "cold_start", hi=MAX_COLD_START_S, unit="s",
                 hint="a cold start is at most a day")
    if link_GBps is not None:
        check_number(link_GBps, "link_GBps", lo_open=True, hi=MAX_GBPS, unit="GB/s")
    span = max((s.arrival_s for s in trace), default=0.0)
    check_ticks(span + cold_start, interval_s, "interval_s", what=f"the trace's {span:,.6g} s plus a "
                                                                  f"{cold_start:,.6g} s cold start")
    pd = make_decode is not None
    if pd and max_instances < 2:
        raise ValueError("a disaggregated pool needs max_instances >= 2")
    reqs = make_requests(trace)
    log = ScaleLog()
    ev: list = []
    counter = {"seq": 0, "iid": 0}

    def push(t: float, kind: int, payload) -> None:
        counter["seq"] += 1
        heapq.heappush(ev, (t, kind, counter["seq"], payload))

    def next_id() -> int:
        counter["iid"] += 1
        return counter["iid"] - 1

    P = ScaledPool(make_instance, router, log, lambda t, pool, x: push(t, 0, (pool, x)), "prefill" if pd else "both")
    D = ScaledPool(make_decode, router, log, lambda t, pool, x: push(t, 0, (pool, x)), "decode") if pd else None
    kv = KVPump(link_GBps or DEFAULT_KV_LINK_GBPS) if pd else None

    def choose(r, x: Instance, t: float) -> Instance | None:
        """The decode instance of a prompt done at ``t`` (None: kept until one is active)."""
        act = D.of("active")
        if not act:
            D.pending.append((r, x))
            return None
        return D.pick(act, r)

    if pd:
        D.dispatch = lambda r, x, t: kv.send(r, x, D.pick(D.of("active"), r), t)

    def advance(t: float) -> None:
        P.advance(t)
        if D is None:
            return
        kv.collect(P.insts)
        kv.run(t, choose, D.advance)

    _start_initial(P, D, max(min_instances, min(max_instances, initial if initial is not None else min_instances)),
                   next_id)
    for i in sorted(range(len(reqs)), key=lambda i: (reqs[i].arrival, i)):
        push(reqs[i].arrival, 2, reqs[i])
    last_arrival = max((r.arrival for r in reqs), default=0.0)
    push(interval_s, 1, None)

    while ev:
        t, kind, _, payload = heapq.heappop(ev)
        advance(t)
        if kind == 0:
            pool, x = payload
            pool.activate(x, t)
        elif kind == 2:
            P.route(payload, False, t)
        else:
            _rescale(P, D, policy, t, interval_s, (min_instances, max_instances), cold_start, next_id)
            pools = [P] + ([D] if D else [])
            log.times.append(t)
            log.active.append(sum(len(q.of("active")) for q in pools))
            log.starting.append(sum(len(q.of("starting")) for q in pools))
            if t < last_arrival or any(q.busy() for q in pools) or (kv is not None and kv.busy()):
                push(t + interval_s, 1, None)
    end = P.finish()
    if D is not None:
        advance(float("inf"))
        end = max(end, D.finish())
    for q in [P] + ([D] if D else []):
        for x in q.of("active", "draining"):
            q.stop(x, end)
    for r in reqs:
        if r.generated != r.output:
            raise RuntimeError(f"request {r.uid} generated {r.generated} of {r.output} tokens")
    insts = P.insts + (D.insts if D else [])
    return ServingResult(reqs, insts, end), log
