"""Autoscaling a serving pool, with cold starts: a controller and pool lifecycle around the instance engine.

A controller runs every ``interval_s`` (Kubernetes HPA's default sync period, 15 s) and sets the desired
number of instances, clamped to ``[min_instances, max_instances]`` (``max_instances`` = what the
cluster can hold). A new instance serves after its cold start: by default a fixed ``startup_s`` plus its
weights per GPU over ``load_GBps`` (`cold_start_s`, one constant); with a `weights.ScaleUp` the cost
follows the weight-loading path (NVMe, parallel file system, host memory over PCIe, device to device
from a running instance, each with its sourced bandwidth). A `roles.RoleSwitch` lets a P/D controller
move a running instance between the prefill and decode pools (drain, then a switch cost) instead of
starting one. Scaling down first cancels instances still starting, then
drains the most recently started active ones (no new requests; they stop when empty). GPU time is
billed from the scale-up decision to the stop.

Policies are the `policies` tables (re-exported here): `FixedPolicy`, `UtilizationPolicy` (HPA),
`DecodeTPSPolicy` (HeteroScale); with ``make_decode=`` the deployment is disaggregated and a P/D policy
(``desired_pd``, e.g. `RatioPolicy`: the decode pool follows decode TPS, the prefill pool is held at
``ceil(decode x ratio)``; `CapacityPDPolicy`: both pools sized from the capacity curves that
``hpctwin serve profile`` measured, `capacity`) sizes both pools; a single-pool policy given to P/D
pools takes its P/D form (`policies.as_pd_policy`).

The serving itself is the instance engine's (`engine.ServingEngine`, ``lazy_drain``: draining instances
are advanced until idle): arrivals, activations, controller ticks and, for disaggregated pools, the
P/D hand-off of `pd.simulate_pd` (the decode instance is chosen among the active ones when the prompt
completes, sets the prompt's KV blocks aside while it crosses, `handoff.kv_transfer_s` with both
instances' TP, and queues the request when it lands; a prompt finding no active decode instance waits
until one serves, and its transfer starts then). A draining decode instance stops only once no KV is on
its way to it. Events at one instant: activation, controller tick, arrival.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from hpctwin.datasets.serving_traces import ServingRequest

from .engine import INF, KVLink, Member, ServingEngine, ServingResult, check_served, make_requests
from .handoff import DEFAULT_KV_LINK_GBPS
from .instance import Instance
from .limits import MAX_COLD_START_S, MAX_GBPS, MAX_INSTANCES, check_int, check_number, check_ticks
from .policies import (HPA_DOWNSCALE_WINDOW_S, HPA_SYNC_S, HPA_TOLERANCE, DecodeTPSPolicy, FixedPolicy, PoolView,
                       RatioPolicy, UtilizationPolicy, as_pd_policy, as_pool_policy)
from .capacity import (DEFAULT_KV_HEADROOM, CapacityPDPolicy, InstanceCapacity, capacity_pd_policy, instance_capacity,
                       kv_floor, kv_tokens, with_capacity)
from .roles import RoleSwitch
from .weights import ScaleUp

__all__ = ["HPA_SYNC_S", "HPA_TOLERANCE", "HPA_DOWNSCALE_WINDOW_S", "DEFAULT_LOAD_GBPS", "DEFAULT_STARTUP_S",
           "cold_start_s", "PoolView", "FixedPolicy", "UtilizationPolicy", "DecodeTPSPolicy", "RatioPolicy",
           "ScaleLog", "ScaledPool", "simulate_autoscaled", "ScaleUp", "RoleSwitch", "InstanceCapacity",
           "instance_capacity", "with_capacity", "CapacityPDPolicy", "capacity_pd_policy", "DEFAULT_KV_HEADROOM",
           "kv_floor"]

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
class ScaleLog:
    """Instance-count time series and the billed GPU time of an autoscaled run."""
    times: list[float] = field(default_factory=list)
    active: list[int] = field(default_factory=list)
    starting: list[int] = field(default_factory=list)
    gpu_seconds: float = 0.0
    busy_gpu_seconds: float = 0.0
    #: (decision s, ready s, weight path) of every scale-up under a `weights.ScaleUp` cold start
    scale_ups: list = field(default_factory=list)
    #: (drain start s, drained s, serving again s, from pool, to pool) of every role switch (`roles`)
    switches: list = field(default_factory=list)
    #: billed GPU seconds by the instances' ``gpu_type`` (`capacity.with_capacity`; "" when unset)
    gpu_seconds_by_type: dict = field(default_factory=dict)


class ScaledPool:
    """One resizable pool of the engine's members (``role``: ``both``, ``prefill`` or ``decode``): scale
    up (a member starting, active after its cold start), scale down (cancel starting ones, drain active
    ones), its controller view and GPU billing."""

    def __init__(self, engine: ServingEngine, make: Callable[[int], Instance], role: str, log: ScaleLog) -> None:
        self.engine, self.make, self.role, self.log = engine, make, role, log
        self.prev = {"t": 0.0, "busy": 0.0, "tok": 0}
        self.incoming: list[Member] = []      # members of the other pool draining to switch into this one
        self._kv_new: int | None = None

    def new_kv_tokens(self) -> int:
        """KV tokens (`capacity.kv_tokens`) of an instance this pool would start: the factory's
        ``kv_tokens`` attribute when it has one (a factory of mixed types), else one instance it builds
        (id -1, never served), once."""
        if self._kv_new is None:
            given = getattr(self.make, "kv_tokens", None)
            self._kv_new = int(given) if given is not None else kv_tokens(self.make(-1))
        return self._kv_new

    def count(self) -> int:
        """Instances the controller counts: active, starting and switching in."""
        return len(self.of("active", "starting")) + len(self.incoming)

    def of(self, *states: str) -> list[Member]:
        """Its members in ``states`` (all when none is given), in creation order."""
        return self.engine.in_pool(self.role, *states)

    def start(self, now: float, ready_at: float, iid: int) -> None:
        """Scale up at ``now``: a new instance serving from ``ready_at`` (s); billed from ``now``."""
        x = self.make(iid)
        x.role = self.role
        x.t = ready_at
        k = self.engine.add(Member(x, self.role, t0=now, ready=ready_at))
        self.engine.activate_at(k, ready_at)

    def start_scaled(self, now: float, iid: int, scale: ScaleUp, new: int) -> None:
        """Scale up at ``now`` with cold start model ``scale`` (`weights.ScaleUp`), one of ``new`` instances
        started at once; d2d sources: the serving instances of the same model in any pool."""
        x = self.make(iid)
        x.role = self.role
        name = x.model.shape.name
        sources = sum(1 for m in self.engine.members if m.state in ("active", "draining")
                      and m.x.model.shape.name == name)
        cold, kind = scale.cold_start_s(x.model.shape.weight_bytes_per_rank(x.model.tp), x.model.tp, new, sources)
        x.t = now + cold
        k = self.engine.add(Member(x, self.role, t0=now, ready=now + cold))
        self.engine.activate_at(k, now + cold)
        self.log.scale_ups.append((now, now + cold, kind))

    def stop(self, m: Member, now: float) -> None:
        m.state, m.t_end = "stopped", now
        self.log.gpu_seconds += m.x.model.tp * max(0.0, now - m.billed_from)
        kind = getattr(m.x, "gpu_type", "")
        by = self.log.gpu_seconds_by_type
        by[kind] = by.get(kind, 0.0) + m.x.model.tp * max(0.0, now - m.billed_from)
        self.log.busy_gpu_seconds += m.x.model.tp * m.x.busy_s

    def view(self, t: float, interval_s: float) -> PoolView:
        mine = self.of()
        act = [m for m in mine if m.state == "active"]
        busy = sum(m.x.busy_s for m in mine)
        tok = sum(m.x.tokens_decoded for m in mine)
        span = max(1e-9, t - self.prev["t"])
        v = PoolView(t, interval_s, len(act), sum(1 for m in mine if m.state == "starting"),
                     min(1.0, (busy - self.prev["busy"]) / (span * max(1, len(act)))), (tok - self.prev["tok"]) / span,
                     sum(len(m.x.waiting) for m in act),
                     sum(m.x.kv.used / m.x.kv.num_blocks for m in act) / max(1, len(act)))
        self.prev.update(t=t, busy=busy, tok=tok)
        return v

    def resize(self, want: int, t: float, cold_start: "float | ScaleUp", next_id: Callable[[], int]) -> None:
        act, starting = self.of("active"), self.of("starting")
        have = len(act) + len(starting) + len(self.incoming)
        if isinstance(cold_start, ScaleUp):
            for _ in range(max(0, want - have)):
                self.start_scaled(t, next_id(), cold_start, want - have)
        else:
            for _ in range(max(0, want - have)):
                self.start(t, t + cold_start, next_id())
        extra = max(0, have - want)
        for m in reversed(starting):
            if extra == 0:
                break
            self.stop(m, t)
            extra -= 1
        for m in reversed(act):
            if extra == 0:
                break
            m.state = "draining"
            if m.x.idle() and not m.x.inbound:
                self.stop(m, t)
            extra -= 1

    def busy(self) -> bool:
        """Requests wait for this pool, or one of its serving instances has work."""
        waiting = self.engine.waiting_d if self.role == "decode" else self.engine.waiting
        return bool(waiting) or any(not m.x.idle() for m in self.of("active", "draining"))

    def finish(self) -> float:
        """Drain its serving instances; the latest end (s)."""
        end = 0.0
        for m in self.of("active", "draining"):
            m.x.drain()
            end = max(end, m.x.t)
        return end


def _start_initial(P, D, n0: "int | tuple[int, int]", next_id) -> None:
    """The pool at t = 0: ``n0`` instances (split prefill/decode, each at least one, when ``D``; a pair
    (prefill, decode) gives the split)."""
    if isinstance(n0, tuple):
        for _ in range(n0[0]):
            P.start(0.0, 0.0, next_id())
        for _ in range(n0[1]):
            D.start(0.0, 0.0, next_id())
        return
    if D is None:
        for _ in range(n0):
            P.start(0.0, 0.0, next_id())
        return
    for _ in range(max(1, n0 // 2)):
        P.start(0.0, 0.0, next_id())
    for _ in range(max(1, n0 - max(1, n0 // 2))):
        D.start(0.0, 0.0, next_id())


def _rescale(P, D, policy, t: float, interval_s: float, bounds: tuple[int, int], cold_start, next_id,
             switch: "_Switcher | None" = None) -> None:
    """One autoscaler decision at ``t``, clamped to ``bounds`` = (min, max) instances in all (each pool
    of a disaggregated deployment keeps at least one). A P/D policy with ``desired_pools(prefill view,
    decode view, P, D)`` sees the pools themselves (per-instance capacity); with ``switch``, instances
    move between the pools before any is started or stopped (`roles`)."""
    lo, hi = bounds
    if D is None:
        P.resize(max(lo, min(hi, int(policy.desired(P.view(t, interval_s))))), t, cold_start, next_id)
        return
    if hasattr(policy, "desired_pools"):
        vp = P.view(t, interval_s)
        wp, wd = policy.desired_pools(vp, D.view(t, interval_s), P, D)
    else:
        wp, wd = policy.desired_pd(P.view(t, interval_s), D.view(t, interval_s))
    wp, wd = max(1, wp), max(1, wd)
    tot = max(lo, min(hi, wp + wd))
    wp = max(1, min(wp, tot - 1))
    wd = tot - wp
    if switch is not None:
        wp, wd = switch.rebalance(P, D, wp, wd, t, policy)
    D.resize(wd, t, cold_start, next_id)
    P.resize(wp, t, cold_start, next_id)


class _Switcher:
    """Role switching of a disaggregated autoscaled deployment (`roles.RoleSwitch`): marks instances to
    switch, and moves a drained one into the other pool."""

    def __init__(self, rs: RoleSwitch, eng: ServingEngine, pools: dict) -> None:
        self.rs, self.eng, self.pools = rs, eng, pools
        self.pending: dict[int, tuple[Member, str, float]] = {}     # id(member) -> (member, to pool, drain start)

    def rebalance(self, P: ScaledPool, D: ScaledPool, want_p: int, want_d: int, t: float,
                  policy=None) -> tuple[int, int]:
        """Switch instances from the pool above its want to the pool below it (each keeps one active);
        returns the (prefill, decode) wants left for `ScaledPool.resize`. A policy exposing ``raw`` (its
        (prefill, decode) recommendation before the scale-in window) lets a switch take from a pool the
        window still holds up, and is told of it (``note_switch(pool, count, t)``) so it does not start
        a replacement."""
        want = {"prefill": want_p, "decode": want_d}
        raw = getattr(policy, "raw", None)
        for src, dst in ((D, P), (P, D)):
            act = src.of("active")
            need = want[dst.role] - dst.count()
            keep = want[src.role] if raw is None else min(want[src.role], raw[0 if src is P else 1])
            if src is D and self.rs.kv_headroom is not None:
                keep = max(keep, kv_floor(D, self.rs.kv_headroom))   # the decode pool's KV floor (`roles`)
            k = min(need, src.count() - keep, len(act) - 1)
            if need <= 0 or k <= 0:
                continue
            for m in self.rs.pick(act, k):
                m.state = "draining"
                self.pending[id(m)] = (m, dst.role, t)
                dst.incoming.append(m)
                if m.x.idle() and not m.x.inbound:
                    self.switch(m, t)
            want[src.role] = min(want[src.role], src.count())
            if hasattr(policy, "note_switch"):
                policy.note_switch(src.role, src.count(), t)
        return want["prefill"], want["decode"]

    def drained(self, m: Member, t: float) -> None:
        """``m`` is idle with no KV inbound at ``t``: it switches if marked, else it stops."""
        if id(m) in self.pending:
            self.switch(m, t)
        else:
            self.pools[m.pool].stop(m, t)

    def switch(self, m: Member, t: float) -> None:
        """Move drained member ``m`` to its new pool: serving there ``switch_s`` after ``t``."""
        _, to, t0 = self.pending.pop(id(m))
        if m.pool == "prefill":
            self.eng.collect()                        # its finished prompts' hand-offs leave first
        dst = self.pools[to]
        dst.incoming.remove(m)
        ready = t + self.rs.switch_s
        self.pools[m.pool].log.switches.append((t0, t, ready, m.pool, to))
        m.pool, m.x.role, m.state, m.ready = to, to, "starting", ready
        m.x.t = max(m.x.t, ready)
        self.eng.activate_at(self.eng.members.index(m), ready)


def _check(trace, min_instances: int, max_instances: int, cold_start: float, interval_s: float,
           initial: int | None, link_GBps: float | None) -> None:
    """The options of `simulate_autoscaled` (type, range, unit; bounded work)."""
    check_int(min_instances, "min_instances", lo=1, hi=MAX_INSTANCES, what="instances")
    check_int(max_instances, "max_instances", lo=1, hi=MAX_INSTANCES, what="instances")
    if isinstance(initial, tuple):
        if len(initial) != 2:
            raise ValueError(f"initial: a pair (prefill, decode) of instance counts, got {initial!r}")
        for k, v in zip(("prefill", "decode"), initial):
            check_int(v, f"initial {k}", lo=1, hi=MAX_INSTANCES, what="instances")
    elif initial is not None:
        check_int(initial, "initial", lo=0, hi=MAX_INSTANCES, what="instances")
    if not 1 <= min_instances <= max_instances:
        raise ValueError(f"need 1 <= min_instances <= max_instances, got {min_instances}, {max_instances}")
    check_number(interval_s, "interval_s", lo_open=True, unit="s")
    if isinstance(cold_start, ScaleUp):
        cold_start = cold_start.startup_s            # the ticks' bound below: the weights come on top
    else:
        check_number(cold_start, "cold_start", hi=MAX_COLD_START_S, unit="s",
                     hint="a cold start is at most a day")
    if link_GBps is not None:
        check_number(link_GBps, "link_GBps", lo_open=True, hi=MAX_GBPS, unit="GB/s")
    span = max((s.arrival_s for s in trace), default=0.0)
    check_ticks(span + cold_start, interval_s, "interval_s", what=f"the trace's {span:,.6g} s plus a "
                                                                  f"{cold_start:,.6g} s cold start")


def simulate_autoscaled(trace: Sequence[ServingRequest], make_instance: Callable[[int], Instance], policy,
                        min_instances: int, max_instances: int, cold_start: "float | ScaleUp",
                        interval_s: float = HPA_SYNC_S, initial: "int | tuple[int, int] | None" = None,
                        router: str = "least_loaded",
                        make_decode: Callable[[int], Instance] | None = None, link_GBps: float | None = None,
                        role_switch: RoleSwitch | None = None) -> tuple[ServingResult, ScaleLog]:
    """Serve ``trace`` on a pool resized by ``policy`` (see the module docstring).

    With ``make_decode``, the deployment is disaggregated: ``make_instance`` builds prefill instances,
    ``make_decode`` decode ones, ``policy.desired_pd(prefill_view, decode_view)`` (or ``desired_pools``,
    `CapacityPDPolicy`) sizes both (e.g. `RatioPolicy`), and the bounds apply to the two pools together
    (each keeps at least one).

    ``cold_start``: seconds (one constant, the historical path) or a `weights.ScaleUp` (start-up plus the
    weights over a storage, host or device-to-device path, per scale-up); ``role_switch``: a
    `roles.RoleSwitch` (disaggregated only) moves running instances between the pools."""
    _check(trace, min_instances, max_instances, cold_start, interval_s, initial, link_GBps)
    pd = make_decode is not None
    if pd and max_instances < 2:
        raise ValueError("a disaggregated pool needs max_instances >= 2")
    if role_switch is not None and not pd:
        raise ValueError("role_switch moves instances between prefill and decode pools: give make_decode too")
    policy = as_pd_policy(policy) if pd else as_pool_policy(policy)   # FixedPolicy on P/D pools: its P/D form
    reqs = make_requests(trace)
    log = ScaleLog()
    pools: dict[str, ScaledPool] = {}
    sw: list = []
    eng = ServingEngine(reqs, router, router if pd else None, pd=pd,
                        kv=KVLink(link_GBps or DEFAULT_KV_LINK_GBPS) if pd else None, lazy_drain=True,
                        on_drained=(lambda m, t: pools[m.pool].stop(m, t)) if role_switch is None
                        else (lambda m, t: sw[0].drained(m, t)))
    P = pools["prefill" if pd else "both"] = ScaledPool(eng, make_instance, "prefill" if pd else "both", log)
    D = pools["decode"] = ScaledPool(eng, make_decode, "decode", log) if pd else None
    if role_switch is not None:
        sw.append(_Switcher(role_switch, eng, pools))
    counter = {"iid": 0}

    def next_id() -> int:
        counter["iid"] += 1
        return counter["iid"] - 1

    if isinstance(initial, tuple):
        if not pd or sum(initial) > max_instances:
            raise ValueError(f"initial {initial!r}: a (prefill, decode) pair needs make_decode and at most "
                             f"max_instances = {max_instances} in all")
        _start_initial(P, D, initial, next_id)
    else:
        _start_initial(P, D, max(min_instances, min(max_instances, initial if initial is not None else min_instances)),
                       next_id)
    last_arrival = max((r.arrival for r in reqs), default=0.0)
    qs = [P] + ([D] if D else [])

    def tick(t: float) -> None:
        """The controller at ``t``: resize, log, and the next tick while work remains."""
        _rescale(P, D, policy, t, interval_s, (min_instances, max_instances), cold_start, next_id,
                 sw[0] if sw else None)
        log.times.append(t)
        log.active.append(sum(len(q.of("active")) for q in qs))
        log.starting.append(sum(len(q.of("starting")) for q in qs))
        if t < last_arrival or any(q.busy() for q in qs) or (pd and eng.kv_busy()):
            eng.timer_t = t + interval_s

    eng.on_timer = tick
    eng.timer_t = interval_s
    while (t := eng.next_scheduled()) < INF:
        eng.advance(t)
    end = P.finish()
    if D is not None:
        eng.advance(INF)
        end = max(end, D.finish())
    for q in qs:
        for m in q.of("active", "draining"):
            q.stop(m, end)
    check_served(reqs)
    insts = [m.x for m in P.of()] + ([m.x for m in D.of()] if D else [])
    return ServingResult(reqs, insts, end), log
