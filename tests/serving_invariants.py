"""Invariants every serving run must keep, whatever the deployment (colocated, P/D, autoscaled, on the
batch machine, P/D on the batch machine): `check_serving_result` asserts them on a result, and
`check_deterministic` runs a simulation twice and compares the bytes of its outcome.

A result is a `twin.serving.cluster.ServingResult` (``simulate``, ``simulate_pd``, ``simulate_autoscaled``'s
first item) or a batch-machine model (`twin.serving.batch.ServingBatchModel` and its P/D form) after its
run: its ``reqs`` and its instances' engines (``insts[k].x``). Times are seconds.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np


def _parts(res) -> tuple[list, list, float | None]:
    """(requests, instance engines, makespan s or None) of a result of any serving mode."""
    if hasattr(res, "requests") and hasattr(res, "instances"):
        return list(res.requests), list(res.instances), res.makespan_s
    if hasattr(res, "reqs") and hasattr(res, "insts"):
        return list(res.reqs), [i.x for i in res.insts], None
    raise TypeError(f"not a serving result: {type(res).__name__}")


def check_serving_result(res, *, trace: Sequence | None = None, kv_capacity: bool = True) -> None:
    """Assert the invariants of a finished serving run ``res``.

    * **Count in == count out**: one request per workload request, ``uid`` 0..n-1 in workload order (and
      ``len(trace)`` of them when the trace is given); each one finished on exactly one instance (it is in
      one engine's ``finished`` list).
    * **Tokens conserved**: a request generated exactly its output tokens; with ``trace``, its prompt equals
      the trace's input tokens and its output the trace's output tokens.
    * **Time order**: arrival <= engine receipt (``queued``) <= first token <= last token (TTFT <= E2E),
      every time finite (no NaN, no infinity), every token before the run's end (``makespan_s``).
    * **KV capacity** (``kv_capacity``): no instance's KV blocks in use ever exceed its capacity: at every
      point of its timeseries when kept (``series``) and at the end; never negative.
    """
    reqs, insts, makespan = _parts(res)
    n = len(reqs)
    assert [r.uid for r in reqs] == list(range(n)), "request ids are not 0..n-1 in workload order"
    if trace is not None:
        assert n == len(trace), f"{len(trace)} requests in, {n} out"
        for r, s in zip(reqs, trace):
            assert r.prompt == s.input_tokens, f"request {r.uid}: prompt {r.prompt} != input {s.input_tokens}"
            assert r.output == s.output_tokens, f"request {r.uid}: output {r.output} != {s.output_tokens}"
            assert r.arrival >= 0 and math.isfinite(r.arrival)
    for r in reqs:
        assert r.generated == r.output, f"request {r.uid}: generated {r.generated} of {r.output} tokens"
        for name in ("arrival", "queued", "first", "last"):
            v = getattr(r, name)
            assert isinstance(v, float) and math.isfinite(v), f"request {r.uid}: {name} = {v!r}"
        assert r.arrival <= r.queued <= r.first <= r.last, \
            f"request {r.uid}: arrival {r.arrival} <= queued {r.queued} <= first {r.first} <= last {r.last} fails"
        assert r.first - r.arrival <= r.last - r.arrival       # TTFT <= E2E
        if makespan is not None:
            assert r.last <= makespan + 1e-9, f"request {r.uid}: last token {r.last} after the end {makespan}"
    done = [r.uid for x in insts for r in x.finished]
    assert sorted(done) == list(range(n)), "a request finished on no instance, or on more than one"
    if makespan is not None:
        assert math.isfinite(makespan) and makespan >= 0
    if kv_capacity:
        for x in insts:
            cap = x.kv.num_blocks
            assert 0 <= x.kv.used <= cap, f"instance {x.iid}: {x.kv.used} KV blocks used of {cap}"
            for t, _run, _wait, kv, _tok in (x.series or []):
                assert math.isfinite(t), f"instance {x.iid}: timeseries time {t!r}"
                assert 0 <= kv <= cap, f"instance {x.iid}: {kv} KV blocks used of {cap} at t = {t}"


def outcome_bytes(res) -> bytes:
    """The per-request outcome of a run as bytes (times with 17 significant digits): equal bytes, equal runs."""
    reqs, insts, makespan = _parts(res)
    rows = [f"{r.uid},{r.arrival!r},{r.queued!r},{r.first!r},{r.last!r},{r.prompt},{r.generated},{r.instance},"
            f"{r.preemptions}" for r in reqs]
    rows.append(f"makespan,{makespan!r}")
    rows += [f"instance,{x.iid},{x.busy_s!r},{x.iterations}" for x in insts]
    return "\n".join(rows).encode()


def check_deterministic(run: Callable[[], object]) -> bytes:
    """Run ``run()`` (a fresh simulation returning a result) twice; assert the outcomes have the same bytes
    (`outcome_bytes`, or the bytes ``run`` returns itself); return them."""
    a, b = run(), run()
    ba = a if isinstance(a, bytes) else outcome_bytes(a)
    bb = b if isinstance(b, bytes) else outcome_bytes(b)
    assert ba == bb, "two runs of the same simulation differ"
    return ba


#: s, every iteration of `ConstModel`
CONST_DT = 0.01


class ConstModel:
    """An iteration model whose every iteration takes ``CONST_DT`` seconds: engine times checkable by hand."""
    tp = 1
    shape = None

    def iteration_s(self, *shape) -> float:
        return CONST_DT

    def decode_run(self, *a):
        return None

    def decode_run_s(self, nd, kvd0, steps, kvmax0=0):
        return np.full(steps, CONST_DT)
