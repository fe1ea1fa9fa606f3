"""The P/D hand-off: a prompt's KV cache leaves its prefill instance for a decode instance.

**KV blocks for a transfer in flight** (`reserve_kv`, `land_kv`): when the transfer starts, the decode
instance sets aside the blocks of the prompt's KV, as vLLM's disaggregated connector does (NIXL: the
decode side allocates blocks, then reads the KV into them), and the request counts as outstanding there
(`Instance.expect_transfer`). When the KV lands the request joins the waiting queue and is admitted by
the instance's own rule (the set-aside blocks become its blocks then: they are given back and allocated
at admission, so a landed request waits for room like any other and cannot block the queue with blocks
it holds). While its free blocks are set aside, an instance that cannot schedule anything idles until
the next landing. If the free blocks do not cover the prompt (or prefix caching is on there) nothing is
set aside (counted: ``kv_reservations_deferred``).

**Fixed formula** (`kv_transfer_s`): ``2 x layers x KV heads x head_dim x bytes x tokens`` bytes, each of
the ``min(tp_prefill, tp_decode)`` rank pairs sending its shard over its own link, plus one link
latency; sent after the prompt completes (no layer-wise overlap: an upper bound on the visible
transfer). Default link: 25 GB/s per GPU, one 200 Gb/s HDR InfiniBand NIC per A100 as in the DGX A100
machines Splitwise evaluates (Patel et al., ISCA 2024; H100 machines have 400 Gb/s NDR: 50 GB/s).
(`kvflow` sends the same bytes as flows on a system's topology instead.)
"""
from __future__ import annotations

from .instance import Instance
from .models import ModelShape

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
    KV bytes; whether blocks were set aside). The one rule of every P/D mode (`engine.ServingEngine`)."""
    d.expect_transfer()
    reserved = reserve_kv(d, r)
    nbytes = x.model.shape.kv_bytes_per_token(1) * r.computed
    dt = kv_transfer_s(x.model.shape, r.computed, x.model.tp, d.model.tp, link_GBps, latency_s)
    return dt, nbytes, reserved
