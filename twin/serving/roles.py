"""Prefill <-> decode role switching of a running instance (issue 28 item 4; HyperFlexis, arXiv 2508.15919).

When an autoscaled disaggregated deployment (`autoscale.simulate_autoscaled` with ``make_decode`` and
``role_switch=RoleSwitch(...)``) wants more instances in one pool and fewer in the other at the same
controller tick, it switches running instances instead of cancelling one and cold-starting another:

1. **drain**: the instance leaves its pool's routing at once (state ``draining``: routers and the KV
   hand-off pick active instances only); it finishes what it holds: a prefill instance its queued and
   running prompts (their KV leaves for the decode pool as usual), a decode instance its running and
   queued decodes and every KV transfer still on its way to it;
2. **switch**: once idle it takes ``switch_s`` seconds (re-capturing CUDA graphs for the other role's
   batch shapes; the weights stay: same model) and serves in the other pool from then on.

Its GPUs stay allocated and billed throughout (one member, never stopped). At most ``min(extra in one
pool, missing in the other)`` instances switch at a tick, the ones with the fewest outstanding requests
first (ties: the newest), and a pool always keeps one active instance. Times are seconds.

**KV floor** (``kv_headroom``, None by default: none): a decode instance switches to prefill only while
the decode instances left hold the KV the decode pool must hold now with that headroom
(`capacity.kv_floor`): the switch goes by the policy's decode TPS and capacity knees, which hold for the
length mix they were profiled on; a shift to long prompts (more KV per request at the same decode TPS)
would otherwise leave one decode instance KV-bound (experiment (c), mix shift).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .capacity import check_kv_headroom
from .limits import MAX_COLD_START_S, check_number

#: the switch itself (s): an assumption of the order of vLLM's logged CUDA-graph capture at start-up
#: (a few seconds) - the weights are already on the GPUs
DEFAULT_SWITCH_S = 5.0


@dataclass(frozen=True)
class RoleSwitch:
    """Switch running instances between the prefill and decode pools (module docstring): the switch takes
    ``switch_s`` seconds after the drain; ``kv_headroom`` (fraction or None): the decode pool's KV floor."""
    switch_s: float = DEFAULT_SWITCH_S
    kv_headroom: float | None = None

    def __post_init__(self) -> None:
        check_number(self.switch_s, "switch_s", unit="s", hi=MAX_COLD_START_S, hint="a switch is at most a day")
        check_kv_headroom(self.kv_headroom, "role switch")

    def pick(self, members: Sequence, k: int) -> list:
        """The ``k`` members (of the active ones given, in creation order) to switch: fewest outstanding
        requests first, ties to the newest."""
        order = sorted(range(len(members)), key=lambda i: (members[i].x.outstanding, -i))
        return [members[i] for i in order[:max(0, k)]]
