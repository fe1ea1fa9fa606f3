"""Colocated serving: a pool of instances behind a router, every instance serving from the start.

A configuration of the instance engine (`engine.ServingEngine`): arrivals are processed in time order;
before a request is routed at its arrival time ``a``, every instance runs the iterations that start
before ``a`` (so the router sees each instance's state at ``a``); the request then joins the chosen
instance's waiting queue and is scheduled at that instance's next iteration boundary. After the last
arrival all instances drain.

Routers: the `routers.ROUTERS` table (``round_robin``, ``least_outstanding``, ``least_loaded``,
``kv_aware``).
"""
from __future__ import annotations

from typing import Sequence

from hpctwin.datasets.serving_traces import ServingRequest

from .engine import INF, ServingEngine, ServingResult, check_served, make_requests
from .instance import Instance
from .routers import ROUTERS

__all__ = ["ROUTERS", "ServingResult", "make_requests", "simulate"]


def simulate(trace: Sequence[ServingRequest], instances: Sequence[Instance], router: str = "least_outstanding",
             units: Sequence | None = None) -> ServingResult:
    """Serve ``trace`` on ``instances`` (stable-sorted by arrival; results keep the trace order).

    ``units`` are what advance in time (default: each instance alone; a `DPGroup` advances its members
    together); the router always picks among ``instances``.
    """
    if not instances:
        raise ValueError("a serving run needs at least one instance")
    if router not in ROUTERS:
        raise ValueError(ROUTERS.unknown(router))
    reqs = make_requests(trace)
    eng = ServingEngine(reqs, router)
    eng.add_static(instances, "both")
    eng.freeze(units)
    eng.advance(INF)
    check_served(reqs)
    end = max((inst.t for inst in instances), default=0.0)
    return ServingResult(reqs, list(instances), end)
