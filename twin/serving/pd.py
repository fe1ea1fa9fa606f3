"""Disaggregated prefill/decode serving (Splitwise, DistServe): a prefill pool and a decode pool.

A request is routed to a prefill instance (role ``prefill``), which runs its prompt and produces the
first token there (its TTFT); the prompt's KV cache is then sent to a decode instance chosen at that
moment by the decode router, and the request joins that instance's queue when the transfer ends, with
its prompt already computed (a preemption there recomputes it locally, as vLLM would).

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


def simulate_pd(trace: Sequence[ServingRequest], prefill: Sequence[Instance], decode: Sequence[Instance],
                prefill_router: str = "least_loaded", decode_router: str = "least_loaded",
                link_GBps: float = DEFAULT_KV_LINK_GBPS, latency_s: float = DEFAULT_KV_LINK_LATENCY_S,
                kv_network: "KVNetwork | None" = None) -> ServingResult:
    """Serve ``trace`` on a prefill pool and a decode pool (results in trace order).

    Prefill instances never wait for decode ones, so the loop advances the prefill pool to each
    arrival, then delivers the finished prompts to the decode pool in time order. ``kv_network``:
    KV transfers as flows on a topology (module docstring) instead of the ``link_GBps`` formula."""
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
    heap: list[tuple[float, int, object]] = []
    tp_of = {x.iid: x.model.tp for x in prefill}
    transferred_bytes = 0

    def collect() -> None:
        nonlocal transferred_bytes
        for x in prefill:
            for end, r in x.handoffs:
                dt = kv_transfer_s(x.model.shape, r.computed, tp_of[x.iid], 1, link_GBps, latency_s)
                transferred_bytes += x.model.shape.kv_bytes_per_token(1) * r.computed
                heapq.heappush(heap, (end + dt, r.uid, r))
            x.handoffs.clear()

    def pump(t_limit: float) -> None:
        collect()
        while heap and heap[0][0] <= t_limit:
            t, _, r = heapq.heappop(heap)
            for d in decode:
                d.advance_until(t)
            pick_d(decode, r).add_transferred(r, t)
        for d in decode:
            d.advance_until(t_limit)

    _serve_arrivals(reqs, prefill, pick_p, pump)
    for r in reqs:
        if r.generated != r.output:
            raise RuntimeError(f"request {r.uid} generated {r.generated} of {r.output} tokens")
    insts = list(prefill) + list(decode)
    return ServingResult(reqs, insts, max(x.t for x in insts), {"kv_transferred_bytes": transferred_bytes})


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

    def advance_decode(t: float) -> None:
        for d in decode:
            d.advance_until(t)

    def pump(t_limit: float) -> None:
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
                d.add_transferred(r, t, expected=True)
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
    extra = {"kv_transferred_bytes": int(sum(log.nbytes)),
             "kv_network": {"system": net.name, "routing": net.routing,
                            "nodes": {str(x.iid): net.node_of[x.iid] for x in insts},
                            "max_concurrent_transfers": flows.max_concurrent, **log.summary()}}
    return ServingResult(reqs, insts, max(x.t for x in insts), extra)
