"""Disaggregated prefill/decode serving (Splitwise, DistServe): a prefill pool and a decode pool.

A request is routed to a prefill instance (role ``prefill``), which runs its prompt and produces the
first token there (its TTFT); the prompt's KV cache is then sent to a decode instance chosen at that
moment by the decode router, and the request joins that instance's queue when the transfer ends, with
its prompt already computed (a preemption there recomputes it locally, as vLLM would).

**KV blocks for a transfer in flight** (`reserve_kv`, `land_kv`): when the transfer starts, the decode
instance sets aside the blocks of the prompt's KV, as vLLM's disaggregated connector does (NIXL: the
decode side allocates blocks, then reads the KV into them), and the request counts as outstanding there
(`Instance.expect_transfer`). When the KV lands the request joins the waiting queue and is admitted by
the instance's own rule (the set-aside blocks become its blocks then: they are given back and allocated
at admission, so a landed request waits for room like any other and cannot block the queue with blocks
it holds). While its free blocks are set aside, an instance that cannot schedule anything idles until
the next landing. If the free blocks do not cover the prompt (or prefix caching is on there) nothing is
set aside (counted: ``kv_reservations_deferred``).

KV transfer (`kv_transfer_s`): ``2 x layers x KV heads x head_dim x bytes x tokens`` bytes, each of the
``min(tp_prefill, tp_decode)`` rank pairs sending its shard over its own link, plus one link latency;
sent after the prompt completes (no layer-wise overlap: an upper bound on the visible transfer).
Default link: 25 GB/s per GPU, one 200 Gb/s HDR InfiniBand NIC per A100 as in the DGX A100 machines
Splitwise evaluates (Patel et al., ISCA 2024; H100 machines have 400 Gb/s NDR: 50 GB/s).

With ``kv_network`` (a `kvflow.KVNetwork`: the instances placed on a system's topology) the transfer is
a flow instead: the decode instance is chosen when the prompt completes (the flow needs its node), the
KV crosses the routed links sharing them max-min fairly with the other transfers in flight (or the
device links when both instances share a node), and the request joins the decode instance's queue
when its KV has arrived (transmission end + path latency). Without it the fixed formula above is used
(the default, unchanged).
"""
from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Sequence

from hpctwin.datasets.serving_traces import ServingRequest

from .cluster import ROUTERS, ServingResult, make_requests
from .instance import Instance
from .models import ModelShape

if TYPE_CHECKING:
    from .kvflow import KVNetwork

#: per-GPU link for KV transfers (GB/s, 1 GB = 1e9 B): 200 Gb/s HDR InfiniBand per A100 (DGX A100)
DEFAULT_KV_LINK_GBPS = 25.0
#: one link latency (s): a few microseconds for an RDMA write over one switch hop (order of magnitude)
DEFAULT_KV_LINK_LATENCY_S = 5e-6


def kv_transfer_s(shape: ModelShape, tokens: int, tp_prefill: int = 1, tp_decode: int = 1,
                  link_GBps: float = DEFAULT_KV_LINK_GBPS, latency_s: float = DEFAULT_KV_LINK_LATENCY_S) -> float:
    """Seconds to move the KV cache of ``tokens`` tokens from a prefill to a decode instance."""
    nbytes = shape.kv_bytes_per_token(1) * tokens
    return latency_s + nbytes / max(1, min(tp_prefill, tp_decode)) / (link_GBps * 1e9)


def reserve_kv(d: Instance, r) -> bool:
    """Decode instance ``d`` allocates the KV blocks of ``r``'s prompt (``r.computed`` tokens) as its
    transfer starts (module docstring); False, with nothing reserved, when its free blocks do not cover
    them or prefix caching is on there (blocks are then allocated at admission)."""
    if d.kv.caching:
        return False
    return d.kv.allocate(r.uid, r.computed)


def land_kv(d: Instance, r, t: float) -> None:
    """``r``'s KV has arrived at decode instance ``d`` at ``t``: the set-aside blocks are given back and
    the request joins the waiting queue (admission allocates its blocks)."""
    d.kv.release(r.uid)
    d.add_transferred(r, t, expected=True)


def start_kv_transfer(x: Instance, d: Instance, r, link_GBps: float = DEFAULT_KV_LINK_GBPS,
                      latency_s: float = DEFAULT_KV_LINK_LATENCY_S) -> tuple[float, int, bool]:
    """``r``'s prompt is done on prefill instance ``x`` and its KV leaves now for decode instance ``d``
    (chosen when the prompt completes): ``d`` counts it as outstanding and sets its blocks aside
    (`reserve_kv`). Returns (transfer s by the fixed formula, `kv_transfer_s` with both instances' TP;
    KV bytes; whether blocks were set aside). The one rule of `simulate_pd`, the autoscaler
    (`autoscale.simulate_autoscaled`) and batch P/D (`batch_pd`) for the formula."""
    d.expect_transfer()
    reserved = reserve_kv(d, r)
    nbytes = x.model.shape.kv_bytes_per_token(1) * r.computed
    dt = kv_transfer_s(x.model.shape, r.computed, x.model.tp, d.model.tp, link_GBps, latency_s)
    return dt, nbytes, reserved


class KVPump:
    """Hand-offs from prefill to decode instances with the fixed formula, in time order: each finished
    prompt picks its decode instance when it completes (``choose``) and its KV lands `kv_transfer_s`
    later (`start_kv_transfer`), when it joins that instance's queue (`land_kv`). Landings come before
    transfer starts at a tie; the decode instances are advanced to each event first."""

    def __init__(self, link_GBps: float = DEFAULT_KV_LINK_GBPS, latency_s: float = DEFAULT_KV_LINK_LATENCY_S) -> None:
        self.link_GBps, self.latency_s = link_GBps, latency_s
        self.starts: list[tuple[float, int, object, Instance]] = []    # (prompt done, uid, request, prefill inst)
        self.landings: list[tuple[float, int, object, Instance]] = []  # (KV usable, uid, request, decode inst)
        self.bytes = 0
        self.deferred = 0

    def collect(self, prefill) -> None:
        """The prompts ``prefill`` instances finished since the last call: transfers due at their end."""
        for x in prefill:
            for end, r in x.handoffs:
                heapq.heappush(self.starts, (end, r.uid, r, x))
            x.handoffs.clear()

    def send(self, r, x: Instance, d: Instance, t: float) -> None:
        """``r``'s KV leaves prefill instance ``x`` for decode instance ``d`` at ``t`` (s)."""
        dt, nbytes, reserved = start_kv_transfer(x, d, r, self.link_GBps, self.latency_s)
        self.bytes += nbytes
        self.deferred += not reserved
        heapq.heappush(self.landings, (t + dt, r.uid, r, d))

    def run(self, t_limit: float, choose, advance_decode) -> None:
        """Landings and transfer starts up to ``t_limit``; ``choose(r, x, t)`` gives the decode instance
        (None: the caller keeps the prompt until one serves, then calls `send`); ``advance_decode(t)``
        runs the decode instances' iterations before ``t``."""
        inf = float("inf")
        while True:
            t_l = self.landings[0][0] if self.landings else inf
            t_s = self.starts[0][0] if self.starts else inf
            t = min(t_l, t_s)
            if t == inf or t > t_limit:
                break
            advance_decode(t)
            if t_l <= t_s:
                _, _, r, d = heapq.heappop(self.landings)
                land_kv(d, r, t)
                continue
            _, _, r, x = heapq.heappop(self.starts)
            d = choose(r, x, t)
            if d is not None:
                self.send(r, x, d, t)
        advance_decode(t_limit)

    def busy(self) -> bool:
        return bool(self.starts or self.landings)


def simulate_pd(trace: Sequence[ServingRequest], prefill: Sequence[Instance], decode: Sequence[Instance],
                prefill_router: str = "least_loaded", decode_router: str = "least_loaded",
                link_GBps: float = DEFAULT_KV_LINK_GBPS, latency_s: float = DEFAULT_KV_LINK_LATENCY_S,
                kv_network: "KVNetwork | None" = None) -> ServingResult:
    """Serve ``trace`` on a prefill pool and a decode pool (results in trace order).

    Prefill instances never wait for decode ones, so the loop advances the prefill pool to each
    arrival, then delivers the finished prompts to the decode pool in time order (`KVPump`).
    ``kv_network``: KV transfers as flows on a topology (module docstring) instead of the
    ``link_GBps`` formula."""
    if not prefill or not decode:
        raise ValueError("a disaggregated deployment needs at least one prefill and one decode instance")
    for name in (prefill_router, decode_router):
        if name not in ROUTERS:
            raise ValueError(f"unknown router {name!r}; known: {', '.join(ROUTERS)}")
    for x in prefill:
        x.role = "prefill"
    for x in decode:
        x.role = "decode"
    pick_p, pick_d = ROUTERS[prefill_router](), ROUTERS[decode_router]()
    reqs = make_requests(trace)
    if kv_network is not None:
        return _simulate_pd_flows(reqs, prefill, decode, pick_p, pick_d, kv_network)
    kv = KVPump(link_GBps, latency_s)

    def advance_decode(t: float) -> None:
        for d in decode:
            d.advance_until(t)

    def pump(t_limit: float) -> None:
        kv.collect(prefill)
        kv.run(t_limit, lambda r, x, t: pick_d(decode, r), advance_decode)

    _serve_arrivals(reqs, prefill, pick_p, pump)
    for r in reqs:
        if r.generated != r.output:
            raise RuntimeError(f"request {r.uid} generated {r.generated} of {r.output} tokens")
    insts = list(prefill) + list(decode)
    stats = {"kv_transferred_bytes": kv.bytes, "kv_reservations_deferred": kv.deferred}
    return ServingResult(reqs, insts, max(x.t for x in insts), stats)


def _serve_arrivals(reqs: list, prefill: Sequence[Instance], pick_p, pump) -> None:
    """Route every request to the prefill pool at its arrival (the pool advanced to it first), with
    ``pump(t)`` delivering the finished prompts up to ``t``; then drain the prefill pool."""
    for i in sorted(range(len(reqs)), key=lambda i: (reqs[i].arrival, i)):
        r = reqs[i]
        for x in prefill:
            x.advance_until(r.arrival)
        pump(r.arrival)
        pick_p(prefill, r).add(r, r.arrival)
    for x in prefill:
        x.drain()
    pump(float("inf"))


def _simulate_pd_flows(reqs: list, prefill: Sequence[Instance], decode: Sequence[Instance], pick_p, pick_d,
                       net: "KVNetwork") -> ServingResult:
    """`simulate_pd` with KV transfers as flows on ``net`` (events in time order up to each arrival:
    arrivals of KV at decode instances, then transmission ends, then transfer starts)."""
    from .kvflow import FlowSet, TransferLog  # noqa: PLC0415
    missing = [x.iid for x in list(prefill) + list(decode) if x.iid not in net.node_of]
    if missing:
        raise ValueError(f"KV network: instances {missing} have no node (place the same pools)")
    flows = FlowSet(net)
    starts: list[tuple[float, int, object, Instance]] = []    # (prompt done, uid, request, prefill instance)
    landings: list[tuple[float, int, object, Instance]] = []  # (KV usable, uid, request, decode instance)
    dest: dict[int, tuple[Instance, int]] = {}                # uid -> (decode instance, log index)
    log = TransferLog([], [], [], [], [])
    inf = float("inf")
    deferred = 0

    def advance_decode(t: float) -> None:
        for d in decode:
            d.advance_until(t)

    def pump(t_limit: float) -> None:
        nonlocal deferred
        for x in prefill:
            for end, r in x.handoffs:
                heapq.heappush(starts, (end, r.uid, r, x))
            x.handoffs.clear()
        while True:
            t_l = landings[0][0] if landings else inf
            t_f = flows.next_done()
            t_s = starts[0][0] if starts else inf
            t = min(t_l, t_f, t_s)
            if t == inf or t > t_limit:
                break
            if t_l == t:
                _, _, r, d = heapq.heappop(landings)
                advance_decode(t)
                land_kv(d, r, t)
            elif t_f == t:
                for uid, lat in flows.pop_done(t):
                    d, k = dest[uid]
                    log.end[k], log.arrival[k] = t, t + lat
                    heapq.heappush(landings, (t + lat, uid, reqs_by_uid[uid], d))
            else:
                _, uid, r, x = heapq.heappop(starts)
                advance_decode(t)
                d = pick_d(decode, r)
                d.expect_transfer()
                deferred += not reserve_kv(d, r)
                nbytes = x.model.shape.kv_bytes_per_token(1) * r.computed
                dest[uid] = (d, len(log.start))
                log.start.append(t)
                log.end.append(inf)
                log.arrival.append(inf)
                log.nbytes.append(nbytes)
                log.intra.append(net.node_of[x.iid] == net.node_of[d.iid])
                flows.add(t, uid, x.iid, d.iid, nbytes)
        advance_decode(t_limit)

    reqs_by_uid = {r.uid: r for r in reqs}
    _serve_arrivals(reqs, prefill, pick_p, pump)
    for r in reqs:
        if r.generated != r.output:
            raise RuntimeError(f"request {r.uid} generated {r.generated} of {r.output} tokens")
    insts = list(prefill) + list(decode)
    extra = {"kv_transferred_bytes": int(sum(log.nbytes)), "kv_reservations_deferred": deferred,
             "kv_network": {"system": net.name, "routing": net.routing,
                            "nodes": {str(x.iid): net.node_of[x.iid] for x in insts},
                            "max_concurrent_transfers": flows.max_concurrent, **log.summary()}}
    return ServingResult(reqs, insts, max(x.t for x in insts), extra)
