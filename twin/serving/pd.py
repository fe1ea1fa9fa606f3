"""Disaggregated prefill/decode serving (Splitwise, DistServe): a prefill pool and a decode pool.

A configuration of the instance engine (`engine.ServingEngine` with ``pd=True``, every instance serving
from the start). A request is routed to a prefill instance (role ``prefill``), which runs its prompt and
produces the first token there (its TTFT); the prompt's KV cache is then sent to a decode instance
chosen at that moment by the decode router, and the request joins that instance's queue when the
transfer ends, with its prompt already computed (a preemption there recomputes it locally, as vLLM
would). The hand-off (`handoff`): the decode instance sets the prompt's KV blocks aside while it crosses
(`reserve_kv`, `land_kv`); the transfer takes `kv_transfer_s` (``2 x layers x KV heads x head_dim x
bytes x tokens`` over ``min(tp_prefill, tp_decode)`` links of 25 GB/s per GPU, plus one link latency).

With ``kv_network`` (a `kvflow.KVNetwork`: the instances placed on a system's topology) the transfer is
a flow instead: the decode instance is chosen when the prompt completes (the flow needs its node), the
KV crosses the routed links sharing them max-min fairly with the other transfers in flight (or the
device links when both instances share a node), and the request joins the decode instance's queue
when its KV has arrived (transmission end + path latency). Without it the fixed formula is used (the
default, unchanged).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from hpctwin.datasets.serving_traces import ServingRequest

from .engine import INF, KVLink, ServingEngine, ServingResult, check_served, make_requests
from .handoff import (DEFAULT_KV_LINK_GBPS, DEFAULT_KV_LINK_LATENCY_S, kv_transfer_s, land_kv, reserve_kv,
                      start_kv_transfer)
from .instance import Instance
from .routers import ROUTERS

if TYPE_CHECKING:
    from .kvflow import KVNetwork
    from .scheduling import SLOSetup

__all__ = ["DEFAULT_KV_LINK_GBPS", "DEFAULT_KV_LINK_LATENCY_S", "kv_transfer_s", "land_kv", "reserve_kv",
           "start_kv_transfer", "simulate_pd"]


def simulate_pd(trace: Sequence[ServingRequest], prefill: Sequence[Instance], decode: Sequence[Instance],
                prefill_router: str = "least_loaded", decode_router: str = "least_loaded",
                link_GBps: float = DEFAULT_KV_LINK_GBPS, latency_s: float = DEFAULT_KV_LINK_LATENCY_S,
                kv_network: "KVNetwork | None" = None, slo: "SLOSetup | None" = None) -> ServingResult:
    """Serve ``trace`` on a prefill pool and a decode pool (results in trace order).

    ``kv_network``: KV transfers as flows on a topology (module docstring) instead of the ``link_GBps``
    formula. ``slo``: multi-SLO serving (`scheduling.SLOSetup`): the trace's requests get their classes,
    both pools the scheduling policy (prefill ordered by TTFT slack, decode by TPOT slack under
    ``slack``), and ``extra`` the per-class figures (``slo_classes``)."""
    if not prefill or not decode:
        raise ValueError("a disaggregated deployment needs at least one prefill and one decode instance")
    for name in (prefill_router, decode_router):
        if name not in ROUTERS:
            raise ValueError(ROUTERS.unknown(name))
    for x in prefill:
        x.role = "prefill"
    for x in decode:
        x.role = "decode"
    if slo is not None:
        trace = slo.classify(trace)
        slo.configure(list(prefill) + list(decode))
    reqs = make_requests(trace)
    insts = list(prefill) + list(decode)
    if kv_network is not None:
        missing = [x.iid for x in insts if x.iid not in kv_network.node_of]
        if missing:
            raise ValueError(f"KV network: instances {missing} have no node (place the same pools)")
    kv = KVLink(link_GBps, latency_s, advance_on_flow_end=False)
    if kv_network is not None:
        from .kvflow import FlowSet, TransferLog  # noqa: PLC0415
        kv.flows, kv.log = FlowSet(kv_network), TransferLog([], [], [], [], [])
    eng = ServingEngine(reqs, prefill_router, decode_router, pd=True, kv=kv)
    eng.add_static(prefill, "prefill")
    eng.add_static(decode, "decode")
    eng.freeze()
    eng.advance(INF)
    check_served(reqs)
    st = eng.kv_stats
    if kv_network is None:
        extra = {"kv_transferred_bytes": st["bytes"], "kv_reservations_deferred": st["reservations_deferred"]}
    else:
        net = kv_network
        extra = {"kv_transferred_bytes": int(sum(eng.log.nbytes)),
                 "kv_reservations_deferred": st["reservations_deferred"],
                 "kv_network": {"system": net.name, "routing": net.routing,
                                "nodes": {str(x.iid): net.node_of[x.iid] for x in insts},
                                "max_concurrent_transfers": eng.flows.max_concurrent, **eng.log.summary()}}
    if slo is not None:
        extra.update(slo.report(reqs))
    return ServingResult(reqs, insts, max(x.t for x in insts), extra)
