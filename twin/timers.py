"""One timer heap for the engine: the physics models' own events and the policy's wake-ups.

Each owner (model ``k`` = 0..m-1; the policy side = m: scheduler and gates together) has at most
one live entry, its next time; setting a new time invalidates the old entry (lazy deletion by
version; setting the same time again is free). Nothing is polled per event: a model's next event
is asked after bind and after each of its ``on_event``; the policy's wake-up after each event (the
``next_wakeup`` contract).
"""
from __future__ import annotations

import heapq
import math

INF = math.inf


class Timers:
    """Timer heap of ``n_models`` models plus the policy side (owner ``n_models``).

    ``wake``: the policy's live wake-up time (s) or None."""

    __slots__ = ("heap", "ver", "policy", "wake")

    def __init__(self, n_models: int):
        self.heap: list[tuple[float, int, int]] = []    # (time s, owner, version)
        self.ver = [0] * (n_models + 1)
        self.policy = n_models
        self.wake: float | None = None

    def set(self, owner: int, t: float | None) -> None:
        """Owner's next time is ``t`` (None: no timer)."""
        if owner == self.policy:
            if t == self.wake:
                return
            self.wake = t
        v = self.ver[owner] = self.ver[owner] + 1
        if t is not None:
            heapq.heappush(self.heap, (t, owner, v))

    def next_time(self, models_count: bool) -> float:
        """Earliest live timer (s; inf if none). ``models_count`` False: model events do not set the
        time of an event (every job is done), only the policy's wake-up does."""
        heap, ver = self.heap, self.ver
        while heap and heap[0][2] != ver[heap[0][1]]:
            heapq.heappop(heap)
        if not models_count:
            return INF if self.wake is None else self.wake
        return heap[0][0] if heap else INF

    def models_due(self, now: float) -> list[int]:
        """Models whose event is due at or before ``now``, in model order; their entries are consumed."""
        heap, ver, p = self.heap, self.ver, self.policy
        due: list[int] = []
        keep = None
        while heap and heap[0][0] <= now:
            t, o, v = heapq.heappop(heap)
            if v != ver[o]:
                continue
            if o == p:
                keep = (t, o, v)        # the policy's wake-up: consumed by `policy_due`
            else:
                ver[o] += 1
                due.append(o)
        if keep is not None:
            heapq.heappush(heap, keep)
        due.sort()
        return due

    def policy_due(self, now: float) -> bool:
        """True (and the wake-up consumed) if the policy's wake-up is due at or before ``now``."""
        if self.wake is not None and self.wake <= now:
            self.set(self.policy, None)
            return True
        return False
