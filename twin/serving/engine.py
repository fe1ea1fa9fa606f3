"""The serving instance engine: the one instance-level event loop every serving mode drives.

`ServingEngine` holds a deployment's instances (each a `Member`: its `instance.Instance` engine, its pool
and its lifecycle state ``starting`` -> ``active`` -> ``draining`` -> ``stopped``) and advances them
through the events of a serving run, in time order:

* **request arrivals** (the trace, stable-sorted by arrival): routed to an active instance of the front
  pool (``both`` colocated, ``prefill`` disaggregated) by its router (`routers.ROUTERS`), or kept at the
  router while none is active;
* **activations**: a starting instance (cold start over) serves from its ready time; it takes the
  requests (decode pool: the finished prompts) that waited for an instance;
* **KV hand-offs** (disaggregated pools): a prompt finished on a prefill instance picks its decode
  instance by the decode router when it completes (none active: it waits for one), which sets the KV
  blocks aside (`handoff.start_kv_transfer`); the KV lands after the fixed formula's time
  (`handoff.kv_transfer_s`) or, on a topology (`kvflow`), when its flow's transmission ends plus the
  path latency; the request then joins the decode instance's queue (`handoff.land_kv`);
* **controller ticks** of a driver that owns its timer (the standalone autoscaler).

``advance(t)`` processes every event up to ``t`` (inclusive); before an event at ``te`` every instance
of the front pool runs the iterations that start before ``te`` (so routers see each instance's state at
``te``), then, for the decode pool, likewise. Events at the same instant go in one order for every
mode: KV landing, flow transmission end, KV transfer start, activation, controller tick, arrival.

The drivers are configurations around it: `cluster.simulate` (colocated, all instances active from the
start), `pd.simulate_pd` (prefill and decode pools), `autoscale.simulate_autoscaled` (pools resized by a
controller, draining instances advanced until idle: ``lazy_drain``) and `batch.ServingBatchModel` (the
instances are node-request jobs of the batch scheduler; it calls ``advance`` at each of its events and
drains an instance's remaining work at once when it stops routing to it). Times are seconds.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from hpctwin.datasets.serving_traces import ServingRequest

from .handoff import DEFAULT_KV_LINK_GBPS, DEFAULT_KV_LINK_LATENCY_S, land_kv, start_kv_transfer
from .instance import Instance, Req
from .routers import ROUTERS

INF = math.inf
#: the order of events at one instant (`ServingEngine.advance`)
LAND, FLOW, START, ACTIVATE, TICK, ARRIVE = range(6)


class Member:
    """One instance of a deployment: its engine ``x``, its pool (``both``, ``prefill`` or ``decode``), its
    node-request job (-1 outside a batch run), its life (s), its state and the requests routed to it."""

    __slots__ = ("x", "pool", "job", "state", "t0", "ready", "t_end", "reason", "routed", "unwanted",
                 "retiring", "billed_from")

    def __init__(self, x: Instance, pool: str = "both", job: int = -1, t0: float = 0.0, ready: float = 0.0,
                 unwanted: bool = False, state: str = "starting") -> None:
        self.x, self.pool, self.job, self.t0, self.ready, self.unwanted = x, pool, job, t0, ready, unwanted
        self.state = state
        self.t_end = math.nan
        self.reason = ""
        self.routed: list = []
        self.retiring = False          # batch: its lease ends soon; a replacement is requested, then it drains
        self.billed_from = t0          # autoscaler: GPU time is billed from the scale-up decision


@dataclass
class ServingResult:
    """Per-request outcome (workload order) plus per-instance counters."""
    requests: list[Req]
    instances: list[Instance]
    makespan_s: float = 0.0
    extra: dict = field(default_factory=dict)


def make_requests(trace: Sequence[ServingRequest]) -> list[Req]:
    """The serving state of each trace request (``uid`` = its index in the trace)."""
    return [Req(i, s.arrival_s, s.input_tokens, s.output_tokens, s.token_ids, s.block_hashes, s.klass)
            for i, s in enumerate(trace)]


def check_served(reqs: Sequence[Req]) -> None:
    """Every request generated all its output tokens, or was shed by admission control (``r.shed``; else a
    RuntimeError naming the first that did not)."""
    for r in reqs:
        if r.generated != r.output and not r.shed:
            raise RuntimeError(f"request {r.uid} generated {r.generated} of {r.output} tokens")


@dataclass
class KVLink:
    """How a prompt's KV reaches its decode instance: the fixed formula (``link_GBps`` per GPU, GB/s;
    ``latency_s``, s) or, with ``flows`` (a `kvflow.FlowSet` on a `kvflow.KVNetwork`), flows on its
    topology, each transfer recorded in ``log`` (a `kvflow.TransferLog`) when given.
    ``advance_on_flow_end``: the decode pool is advanced to a flow's transmission end before it is
    handled (the batch-coupled model does; the standalone one advances it at landings and starts only)."""
    link_GBps: float = DEFAULT_KV_LINK_GBPS
    latency_s: float = DEFAULT_KV_LINK_LATENCY_S
    flows: object = None
    log: object = None
    advance_on_flow_end: bool = True


class ServingEngine:
    """The event loop of one deployment (module docstring).

    ``reqs``: the requests (arrival times on the run's clock); ``router``/``decode_router``: names in
    `routers.ROUTERS` (one router state per pool); ``pd``: prefill and decode pools; ``kv``: the KV link
    (disaggregated pools); ``lazy_drain``: draining instances are advanced with the active ones and
    ``on_drained(member, t)`` is called once one is idle with no KV inbound (else a driver drains them
    itself, and ``on_drain_landing(member, index, t)`` is called after a KV landing on a draining
    decode instance has been drained)."""

    def __init__(self, reqs: list[Req], router: str = "least_loaded", decode_router: str | None = None, *,
                 pd: bool = False, kv: KVLink | None = None, lazy_drain: bool = False,
                 on_drained: Callable | None = None, on_drain_landing: Callable | None = None) -> None:
        self.reqs = reqs
        self.order = sorted(range(len(reqs)), key=lambda i: (reqs[i].arrival, i))
        self.ai = 0                                    # next arrival (index into order)
        self.pd = pd
        self.front = "prefill" if pd else "both"       # the pool new requests go to
        self.pick = ROUTERS.entry(router).factory()    # an unknown name: a ValueError naming the known ones
        self.pick_d = ROUTERS.entry(decode_router or router).factory() if pd else None
        self.kv = kv if kv is not None else KVLink()
        self.lazy_drain = lazy_drain
        self.advance_states = ("active", "draining") if lazy_drain else ("active",)
        self.on_drained, self.on_drain_landing = on_drained, on_drain_landing
        self.members: list[Member] = []
        self._index: dict[int, int] = {}               # id(instance) -> member index
        self._frozen: dict | None = None               # static deployments: units, instances per pool
        self.activations: list = []                    # (ready s, member index)
        self.waiting: list = []                        # requests with no active front instance yet
        self.waiting_d: list = []                      # (request, prompt done s, prefill member): no decode yet
        self.retries = np.zeros(len(reqs), dtype=np.int64)   # restarts of each request (its attempt)
        self.handed: dict[int, float] = {}             # uid -> prompt done (s), this attempt
        self.kv_starts: list = []                      # (prompt done s, uid, attempt, request, prefill member)
        self.kv_land: list = []                        # (KV usable s, uid, attempt, request, decode member)
        self.inflight: dict[tuple, tuple] = {}         # (uid, attempt) -> (request, decode member, start s, log)
        self.kv_stats = {"transfers": 0, "bytes": 0, "reservations_deferred": 0, "waited_for_decode": 0,
                         "transfer_s": [], "decode_wait_s": []}
        self.flows = self.kv.flows if pd else None     # KV transfers as flows (None: the formula)
        self.log = self.kv.log if pd else None
        self.timer_t = INF                             # the driver's next controller tick (s)
        self.on_timer: Callable | None = None

    # ------------------------------------------------------------------ instances
    def add(self, m: Member) -> int:
        """Add member ``m``; returns its index (its position in ``members``)."""
        self.members.append(m)
        self._index[id(m.x)] = len(self.members) - 1
        return len(self.members) - 1

    def activate_at(self, k: int, t: float) -> None:
        """Member ``k`` (starting) serves from ``t`` (s)."""
        heapq.heappush(self.activations, (t, k))

    def add_static(self, instances: Sequence[Instance], pool: str) -> None:
        """Instances serving from the start (a static deployment), in pool ``pool``."""
        for x in instances:
            self.add(Member(x, pool, state="active"))

    def freeze(self, units: Sequence | None = None) -> None:
        """The members never change state (a static deployment): their lists are computed once.
        ``units``: what advances in time in the front pool (default: each instance; a `DPGroup`
        advances its members together); routers still pick among the instances."""
        xs = {role: [m.x for m in self.members if m.pool == role] for role in ("both", "prefill", "decode")}
        un = dict(xs)
        if units is not None:
            un[self.front] = list(units)
        self._frozen = {"units": un, "xs": xs,
                        "prefill": [(k, m.x) for k, m in enumerate(self.members) if m.pool == "prefill"]}

    def in_pool(self, pool: str, *states: str) -> list[Member]:
        """Members of ``pool`` in one of ``states`` (all states when none is given), in creation order."""
        if not states:
            return [m for m in self.members if m.pool == pool]
        return [m for m in self.members if m.pool == pool and m.state in states]

    # ------------------------------------------------------------------ the event loop
    def next_scheduled(self) -> float:
        """Time (s) of the next arrival, activation or controller tick (inf when none is left)."""
        ta = self.reqs[self.order[self.ai]].arrival if self.ai < len(self.order) else INF
        tr = self.activations[0][0] if self.activations else INF
        return min(ta, tr, self.timer_t)

    def kv_busy(self) -> bool:
        """KV hand-offs are due or in flight."""
        return bool(self.kv_starts or self.kv_land)

    def advance(self, t: float) -> None:
        """Process every event up to ``t`` (s, inclusive; ``inf``: until none is left and every instance
        has drained), in time order (module docstring)."""
        reqs, order, act = self.reqs, self.order, self.activations
        n = len(order)
        pd = self.pd
        while True:
            ta = reqs[order[self.ai]].arrival if self.ai < n else INF
            tr = act[0][0] if act else INF
            tk = self.timer_t
            self._advance_pool(self.front, min(ta, tr, tk, t))
            if pd:
                self.collect()
                ts = self.kv_starts[0][0] if self.kv_starts else INF
                tl = self.kv_land[0][0] if self.kv_land else INF
                tf = self.flows.next_done() if self.flows is not None else INF
                te = min(ta, tr, tk, ts, tl, tf)
            else:
                ts = tl = tf = INF
                te = min(ta, tr, tk)
            if te > t or te == INF:
                break
            kind = (LAND if tl == te else FLOW if tf == te else START if ts == te else ACTIVATE if tr == te
                    else TICK if tk == te else ARRIVE)
            if pd and (kind != FLOW or self.kv.advance_on_flow_end):
                self._advance_pool("decode", te)
            if kind == LAND:
                self._land(te, *heapq.heappop(self.kv_land)[1:])
            elif kind == FLOW:
                self._flows_done(te)
            elif kind == START:
                _, uid, att, r, k = heapq.heappop(self.kv_starts)
                if att == self.retries[uid]:
                    self._transfer(r, te, k)
            elif kind == ACTIVATE:
                _, k = heapq.heappop(act)
                self._activate(k, tr)
            elif kind == TICK:
                self.timer_t = INF
                self.on_timer(te)
            else:
                self.route(reqs[order[self.ai]], ta)
                self.ai += 1
        if pd:
            self._advance_pool("decode", t)

    def _advance_pool(self, role: str, t: float) -> None:
        """Run the iterations of ``role``'s instances that start before ``t``."""
        if self._frozen is not None:
            for u in self._frozen["units"][role]:
                u.advance_until(t)
            return
        for m in [m for m in self.members if m.pool == role and m.state in self.advance_states]:
            m.x.advance_until(t)
            if self.lazy_drain and m.state == "draining" and m.x.idle() and not m.x.inbound:
                self.on_drained(m, max(m.x.t, t))

    # ------------------------------------------------------------------ routing and activation
    def route(self, r: Req, t: float) -> None:
        """Request ``r`` reaches the router of the front pool at ``t``."""
        if self._frozen is not None:
            x = self.pick(self._frozen["xs"][self.front], r)
        else:
            act = [m for m in self.members if m.pool == self.front and m.state == "active"]
            if not act:
                self.waiting.append(r)
                return
            x = self.pick([m.x for m in act], r)
        x.add(r, t)
        self.members[self._index[id(x)]].routed.append(r)

    def _activate(self, k: int, t: float) -> None:
        """Member ``k`` serves from ``t``: it takes what waited for an instance of its pool."""
        m = self.members[k]
        if m.state != "starting":
            return
        m.state = "active"
        m.x.t = max(m.x.t, t)
        if m.pool == "decode":
            todo, self.waiting_d = self.waiting_d, []
            for r, t0, src in todo:
                self.kv_stats["waited_for_decode"] += 1
                self.kv_stats["decode_wait_s"].append(t - t0)
                self._transfer(r, t, src)
            return
        todo, self.waiting = self.waiting, []
        for r in todo:
            self.route(r, t)

    # ------------------------------------------------------------------ KV hand-offs
    def collect(self) -> None:
        """Prompts the prefill instances finished: their KV transfers are due at the prompt's end."""
        pre = (self._frozen["prefill"] if self._frozen is not None else
               [(k, m.x) for k, m in enumerate(self.members) if m.pool == "prefill"])
        for k, x in pre:
            if x.handoffs:
                for end, r in x.handoffs:
                    self.handed[r.uid] = end
                    heapq.heappush(self.kv_starts, (end, r.uid, int(self.retries[r.uid]), r, k))
                x.handoffs.clear()

    def _transfer(self, r: Req, t: float, src: int) -> None:
        """``r``'s prompt is done on member ``src`` (or a decode instance now serves): its KV leaves for a
        decode instance chosen now; kept until one is active."""
        if self._frozen is not None:
            x = self.pick_d(self._frozen["xs"]["decode"], r)
        else:
            act = [m for m in self.members if m.pool == "decode" and m.state == "active"]
            if not act:
                self.waiting_d.append((r, t, src))
                return
            x = self.pick_d([m.x for m in act], r)
        k = self._index[id(x)]
        sx = self.members[src].x
        dt, nbytes, reserved = start_kv_transfer(sx, x, r, self.kv.link_GBps, self.kv.latency_s)
        st = self.kv_stats
        st["reservations_deferred"] += not reserved
        st["transfers"] += 1
        st["bytes"] += nbytes
        self.members[k].routed.append(r)
        att = int(self.retries[r.uid])
        if self.flows is not None:                     # a flow on the topology: lands when sent + latency
            key = (r.uid, att)                         # a restarted request's old flow keeps its own key
            log = self.log
            self.inflight[key] = (r, k, t, len(log.start) if log is not None else -1)
            if log is not None:
                node_of = self.flows.net.node_of
                log.start.append(t)
                log.end.append(INF)
                log.arrival.append(INF)
                log.nbytes.append(nbytes)
                log.intra.append(node_of[sx.iid] == node_of[x.iid])
            self.flows.add(t, key, sx.iid, x.iid, nbytes)
            return
        st["transfer_s"].append(dt)
        heapq.heappush(self.kv_land, (t + dt, r.uid, att, r, k))

    def _flows_done(self, t: float) -> None:
        """Flows whose transmission ended at ``t``: their KV is usable one path latency later."""
        for key, lat in self.flows.pop_done(t):
            r, k, _, li = self.inflight[key]
            if self.log is not None:
                self.log.end[li], self.log.arrival[li] = t, t + lat
            heapq.heappush(self.kv_land, (t + lat, key[0], key[1], r, k))

    def _land(self, t: float, uid: int, att: int, r: Req, k: int) -> None:
        """``r``'s KV arrived at member ``k`` at ``t``: it joins the queue (void if restarted since)."""
        m = self.members[k]
        if self.flows is not None:
            self.kv_stats["transfer_s"].append(t - self.inflight.pop((uid, att))[2])
        if att != self.retries[uid] or m.state not in ("active", "draining"):
            return                                     # restarted since (an instance was lost)
        land_kv(m.x, r, t)
        if m.state == "draining" and not self.lazy_drain:  # its drain goes on with this request
            m.x.drain()
            if self.on_drain_landing is not None:
                self.on_drain_landing(m, k, t)

    # ------------------------------------------------------------------ restarts
    def restart(self, r: Req) -> None:
        """Request ``r`` lost its instance: it starts over (prompt recomputed, no tokens kept) as a new
        attempt (its queued KV hand-offs are void)."""
        r.num_tokens, r.computed, r.generated, r.transferred = r.prompt, 0, 0, 0
        r.first = r.last = math.nan
        r.hashes = []
        r.instance = -1
        self.retries[r.uid] += 1
        r.prefill_instance = -1
        self.handed.pop(r.uid, None)
