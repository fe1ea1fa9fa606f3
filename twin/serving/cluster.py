"""A pool of serving instances fed by a router: the event loop of a serving run.

Arrivals are processed in time order. Before a request is routed at its arrival time ``a``, every
instance runs the iterations that start before ``a`` (so the router sees each instance's state at
``a``); the request then joins the chosen instance's waiting queue and is scheduled at that instance's
next iteration boundary. After the last arrival all instances drain.

Routers (``ROUTERS``): ``round_robin``; ``least_outstanding`` (fewest routed-but-unfinished requests,
ties to the lowest id); ``least_loaded`` (vLLM's DP balancer and LLMServingSim's default ``LOAD``:
(4 waiting + running) / max_num_seqs from a rotating start); ``kv_aware`` (most free KV blocks after
counting the prompt tokens already queued there).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from hpctwin.datasets.serving_traces import ServingRequest

from .instance import Instance, Req


def _round_robin():
    state = {"i": -1}

    def pick(instances: Sequence[Instance], r: Req) -> Instance:
        state["i"] = (state["i"] + 1) % len(instances)
        return instances[state["i"]]
    return pick


def _least_outstanding():
    def pick(instances: Sequence[Instance], r: Req) -> Instance:
        return min(instances, key=lambda x: (x.outstanding, x.iid))
    return pick


def _least_loaded():
    """vLLM's DP load balancing as LLMServingSim's ``LOAD`` router: score (4 waiting + running) /
    max_num_seqs, scanned from a rotating start, the first strictly lowest wins."""
    state = {"start": 0}

    def pick(instances: Sequence[Instance], r: Req) -> Instance:
        n = len(instances)
        best, best_score = state["start"] % n, float("inf")
        for off in range(n):
            idx = (state["start"] + off) % n
            x = instances[idx]
            score = (4 * len(x.waiting) + len(x.running)) / max(1, x.max_num_seqs)
            if score < best_score:
                best, best_score = idx, score
        state["start"] = (best + 1) % n
        return instances[best]
    return pick


def _kv_aware():
    def pick(instances: Sequence[Instance], r: Req) -> Instance:
        def free_after_queue(x: Instance) -> int:
            queued = sum(q.num_tokens for q in x.waiting)
            return x.kv.free - -(-queued // x.kv.block_size)
        return max(instances, key=lambda x: (free_after_queue(x), -x.outstanding, -x.iid))
    return pick


ROUTERS: dict[str, Callable] = {"round_robin": _round_robin, "least_outstanding": _least_outstanding,
                                "least_loaded": _least_loaded, "kv_aware": _kv_aware}


@dataclass
class ServingResult:
    """Per-request outcome (workload order) plus per-instance counters."""
    requests: list[Req]
    instances: list[Instance]
    makespan_s: float = 0.0
    extra: dict = field(default_factory=dict)


def make_requests(trace: Sequence[ServingRequest]) -> list[Req]:
    return [Req(i, s.arrival_s, s.input_tokens, s.output_tokens, s.token_ids, s.block_hashes, s.klass)
            for i, s in enumerate(trace)]


def simulate(trace: Sequence[ServingRequest], instances: Sequence[Instance], router: str = "least_outstanding",
             units: Sequence | None = None) -> ServingResult:
    """Serve ``trace`` on ``instances`` (stable-sorted by arrival; results keep the trace order).

    ``units`` are what advance in time (default: each instance alone; a `DPGroup` advances its members
    together); the router always picks among ``instances``.
    """
    if not instances:
        raise ValueError("a serving run needs at least one instance")
    if router not in ROUTERS:
        raise ValueError(f"unknown router {router!r}; known: {', '.join(ROUTERS)}")
    pick = ROUTERS[router]()
    reqs = make_requests(trace)
    order = sorted(range(len(reqs)), key=lambda i: (reqs[i].arrival, i))
    units = list(units) if units is not None else list(instances)
    for i in order:
        r = reqs[i]
        for u in units:
            u.advance_until(r.arrival)
        pick(instances, r).add(r, r.arrival)
    for u in units:
        u.drain()
    for r in reqs:
        if r.generated != r.output:
            raise RuntimeError(f"request {r.uid} generated {r.generated} of {r.output} tokens")
    end = max((inst.t for inst in instances), default=0.0)
    return ServingResult(reqs, list(instances), end)
