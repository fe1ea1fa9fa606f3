"""Request routers across the serving instances of a pool (the ``ROUTERS`` plug-in table).

A router factory takes no argument and returns ``pick(instances, request) -> instance``, keeping its own
state (a rotating start) between calls; each pool of a deployment has its own router.

* ``round_robin``: the next instance in turn;
* ``least_outstanding``: fewest routed-but-unfinished requests, ties to the lowest id;
* ``least_loaded``: vLLM's DP balancer and LLMServingSim's default ``LOAD``: (4 waiting + running) /
  max_num_seqs, scanned from a rotating start, the first strictly lowest wins;
* ``kv_aware``: most free KV blocks after counting the prompt tokens already queued there;
* ``slo_aware`` (`slo_aware_router`): the smallest predicted time to first token of this request, from
  each instance's own latency model: the rest of its current iteration, plus the prompt tokens it would
  compute first (its running prompts and, under a ``slack`` instance policy, the waiting prompts whose
  deadline is no later than this request's class deadline, else all waiting prompts), plus this prompt
  less its prefix-cache hit there, in token-budget chunks sharing each iteration with its running
  decodes; an instance whose free KV blocks (after its queue) cannot hold the prompt adds the time of
  its shortest remaining decode. In the decode pool of a disaggregated deployment (the KV hand-off) it
  picks the smallest predicted time per output token instead (`slo.predicted_tpot`: one decode
  iteration beside the requests there and those whose KV is on its way, plus the wait for KV room or a
  sequence slot spread over the request's remaining tokens). Ties: fewest outstanding requests, then
  the lowest id.

A new router is its factory plus one ``ROUTERS.register`` (with ``spec=`` an options dataclass when it
takes options: `plugins`).
"""
from __future__ import annotations

from typing import Sequence

from .instance import Instance, Req
from .plugins import ServingTable


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


#: name -> router factory (a `plugins.ServingTable`; ``ROUTERS[name]()`` is a fresh ``pick``); tag ``classes``:
#: the router reads the requests' SLO classes (a deployment using it reports per class)
ROUTERS = ServingTable("router")
ROUTERS.register("round_robin", _round_robin, help="the next instance in turn")
ROUTERS.register("least_outstanding", _least_outstanding,
                 help="fewest routed-but-unfinished requests, ties to the lowest id")
ROUTERS.register("least_loaded", _least_loaded,
                 help="vLLM's DP balancer (LLMServingSim's LOAD): (4 waiting + running) / max_num_seqs, rotating start")
ROUTERS.register("kv_aware", _kv_aware, help="most free KV blocks after the prompts already queued there")


def _slo_aware():
    from .slo import slo_aware_router  # noqa: PLC0415 (slo imports instance, not routers)
    return slo_aware_router()


ROUTERS.register("slo_aware", _slo_aware, tags={"classes": True},
                 help="smallest predicted TTFT (queued + own prefill by the instance's latency model, prefix-cache "
                      "hits, KV headroom, the request's class deadline); decode pool: smallest predicted TPOT")


def _capacity_weighted():
    from .capacity import capacity_weighted_router  # noqa: PLC0415 (issue 28 item 3: heterogeneous pools)
    return capacity_weighted_router()


ROUTERS.register("capacity_weighted", _capacity_weighted,
                 help="mixed instance types: fewest outstanding requests per request/s of the instance's measured "
                      "capacity (x.capacity from a capacity file, twin.serving.capacity; 1 without), ties to the "
                      "lowest id")
