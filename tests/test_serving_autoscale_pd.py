"""The standalone autoscaler's P/D hand-off (`autoscale.simulate_autoscaled` with ``make_decode``) follows
`pd.simulate_pd`'s rule through the shared `pd.KVPump`: the decode instance is chosen when the prompt
completes and the fixed formula uses both instances' TP.

Constant-time engine (every iteration 10 ms) with exactly 1 MB of KV per token (test_serving_batch_pd's
shape) over 1 GB/s links and the default 5 us link latency.
"""
from __future__ import annotations

import random

import pytest

from hpctwin.datasets.serving_traces import ServingRequest
from hpctwin.twin.serving.autoscale import FixedPolicy, RatioPolicy, simulate_autoscaled
from hpctwin.twin.serving.instance import Instance
from hpctwin.twin.serving.kvcache import BlockManager
from hpctwin.twin.serving.pd import DEFAULT_KV_LINK_LATENCY_S, simulate_pd

from .test_serving_batch_pd import DT, ConstModel


class TP2(ConstModel):
    tp = 2


class TP4(ConstModel):
    tp = 4


def make_p(iid: int) -> Instance:
    return Instance(iid, TP2(), BlockManager(2_000, 16), max_num_seqs=64, max_num_batched_tokens=512)


def make_d(iid: int) -> Instance:
    return Instance(iid, TP4(), BlockManager(2_000, 16), max_num_seqs=64, max_num_batched_tokens=512)


def fixed_pd(trace, n_p: int = 1, n_d: int = 1):
    """Autoscaled P/D pools held at n_p + n_d instances from t = 0 (no scaling, no cold start)."""
    return simulate_autoscaled(trace, make_p, RatioPolicy(FixedPolicy(n_d), n_p / n_d), n_p + n_d, n_p + n_d,
                               cold_start=0.0, initial=n_p + n_d, make_decode=make_d, link_GBps=1.0)


def test_kv_transfer_uses_the_decode_tp_by_hand():
    # prompt of 10 tokens on the TP-2 prefill instance: [0, 0.01] (first token); 10 MB over min(2, 4) = 2
    # links of 1 GB/s = 5 ms + 5 us latency; the TP-4 decode instance then runs 2 tokens (20 ms)
    res, _ = fixed_pd([ServingRequest(0.0, 10, 3)])
    r = res.requests[0]
    land = DT + 0.005 + DEFAULT_KV_LINK_LATENCY_S
    assert r.first == pytest.approx(DT, abs=1e-12)
    assert r.last == pytest.approx(land + 2 * DT, abs=1e-12)          # with TP 1 at the decode end: 10 ms
    assert r.prefill_instance == 0 and r.instance == 1


def test_fixed_autoscaled_pd_equals_simulate_pd():
    # the same pools (1 prefill, 2 decode), never resized: every request's tokens at the same times and on
    # the same decode instance as simulate_pd's (choice when the prompt completes, TP of both ends)
    rng = random.Random(4)
    trace, t = [], 0.0
    for _ in range(150):
        t += rng.expovariate(20.0)
        trace.append(ServingRequest(t, rng.randint(5, 400), rng.randint(1, 60)))
    res, log = fixed_pd(trace, 1, 2)
    ref = simulate_pd(trace, [make_p(0)], [make_d(1), make_d(2)], link_GBps=1.0)
    assert max(log.active) == 3 and len(res.instances) == 3
    assert [r.instance for r in res.requests] == [r.instance for r in ref.requests]
    assert [r.prefill_instance for r in res.requests] == [r.prefill_instance for r in ref.requests]
    assert [r.first for r in res.requests] == pytest.approx([r.first for r in ref.requests], rel=1e-12)
    assert [r.last for r in res.requests] == pytest.approx([r.last for r in ref.requests], rel=1e-12)
