"""Request routers across the serving instances of a pool (the ``ROUTERS`` plug-in table).

A router factory takes no argument and returns ``pick(instances, request) -> instance``, keeping its own
state (a rotating start) between calls; each pool of a deployment has its own router.

* ``round_robin``: the next instance in turn;
* ``least_outstanding``: fewest routed-but-unfinished requests, ties to the lowest id;
* ``least_loaded``: vLLM's DP balancer and LLMServingSim's default ``LOAD``: (4 waiting + running) /
  max_num_seqs, scanned from a rotating start, the first strictly lowest wins;
* ``kv_aware``: most free KV blocks after counting the prompt tokens already queued there.
"""
from __future__ import annotations

from typing import Sequence

from .instance import Instance, Req
from .plugins import PluginTable


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


#: name -> router factory (a `plugins.PluginTable`; ``ROUTERS[name]()`` is a fresh ``pick``)
ROUTERS = PluginTable("router")
ROUTERS.register("round_robin", _round_robin, help="the next instance in turn")
ROUTERS.register("least_outstanding", _least_outstanding,
                 help="fewest routed-but-unfinished requests, ties to the lowest id")
ROUTERS.register("least_loaded", _least_loaded,
                 help="vLLM's DP balancer (LLMServingSim's LOAD): (4 waiting + running) / max_num_seqs, rotating start")
ROUTERS.register("kv_aware", _kv_aware, help="most free KV blocks after the prompts already queued there")
