"""The node-set form of the availability profile: Slurm's backfill ``node_space`` map.

The same step function of future time as `schedulers.profile.AvailabilityProfile`, but each
segment holds *which* nodes are available (a node bitset), not how many: records with begin
times ``begins[r]`` (seconds, strictly increasing; record r lasts until ``begins[r + 1]``, the
last one until ``window_end``) and available nodes ``avail[r]`` (Python ints, bit i = node i).
It is ``node_space_map_t`` of Slurm's ``src/plugins/sched/backfill/backfill.c`` (``begin_time``,
``end_time``, ``avail_bitmap``; ``_add_reservation``), used by the Slurm-like policy's backfill
cycle (`schedulers.slurm.SlurmScheduler._backfill`). The compiled form over ``uint64`` words,
used by the compiled cycle and the whole-run replay, is `schedulers.profile_nodeset_kernels`
(same operations, same names with an ``ns_`` prefix; tested to agree).

Conventions (Slurm's): the map starts at ``begin0`` = now floored to ``bf_resolution`` and ends
at ``window_end`` = (now + ``bf_window``) floored; it starts with every node available (running
jobs are not in it: their ends come from the select plugin's will-run test); a reservation lasts
at least one ``res`` slot and is clipped to the window. With ``res`` = 1 s, integer times and a
window past every reservation, the popcount of ``avail`` over time is the count profile of the
same reservations (``tests/test_profile_nodeset.py``).

Python ints are the representation here because for the few hundred to few thousand nodes of the
replayed machines an ``&``/``|``/``bit_count`` on a Python int is one C loop over 64-bit words,
cheaper than any numpy call on arrays that small.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right

__all__ = ["NodeSpaceMap"]


class NodeSpaceMap:
    """Available node sets over [begin0, window_end) (s), with reservations.

    Parameters
    ----------
    begin0: the map's origin (s; Slurm: now floored to ``bf_resolution``).
    window_end: the map's end (s; Slurm: (now + ``bf_window``) floored to ``bf_resolution``).
    res: the minimum reservation length (s; Slurm's ``bf_resolution``).
    full: the node set available before any reservation (bitset; all nodes).
    """

    __slots__ = ("begins", "avail", "begin0", "window_end", "res")

    def __init__(self, begin0: float, window_end: float, res: float, full: int):
        if res <= 0:
            raise ValueError(f"node-space map resolution must be > 0 s, got {res}")
        self.begin0 = float(begin0)
        self.window_end = float(window_end)
        self.res = float(res)
        #: record begin times (s), a list; do not modify
        self.begins: list[float] = [self.begin0]
        #: available nodes of each record (bitsets), a list; do not modify
        self.avail: list[int] = [int(full)]

    def __len__(self) -> int:
        return len(self.begins)

    def end_of(self, r: int) -> float:
        """End (s) of record ``r``."""
        return self.begins[r + 1] if r + 1 < len(self.begins) else self.window_end

    def avail_at(self, t: float) -> int:
        """Nodes available at time ``t`` (s, >= ``begin0``)."""
        return self.avail[max(bisect_right(self.begins, t) - 1, 0)]

    # ------------------------------------------------------------------ updates
    def split(self, t: float) -> None:
        """A record boundary at ``t`` (s, > ``begin0``); both halves keep the record's nodes."""
        b = self.begins
        i = bisect_left(b, t)
        if i < len(b) and b[i] == t:
            return
        if i == 0:
            raise ValueError(f"cannot split the node-space map before its origin {self.begin0} s "
                             f"at {t} s")
        b.insert(i, t)
        self.avail.insert(i, self.avail[i - 1])

    def add_reservation(self, start: float, end: float, nodes: int) -> None:
        """``_add_reservation``: ``nodes`` leave every record over [start, end) (s), the interval
        clipped to the map and at least one ``res`` slot long; a start at or after the window end
        changes nothing."""
        st = max(start, self.begin0)
        en = end
        if en < st + self.res:
            en = st + self.res
        we = self.window_end
        if st >= we:
            return
        en = min(en, we)
        for t in (st, en):
            if t < we:
                self.split(t)
        b, av = self.begins, self.avail
        keep = ~nodes
        for i in range(bisect_left(b, st), bisect_left(b, en)):
            av[i] &= keep

    # ------------------------------------------------------------------ queries
    def walk(self, pm: int, start: float, end: float,
             stop_below: float = float("-inf")) -> tuple[int, int, float]:
        """Nodes of ``pm`` available in every record overlapping [start, end] (s; a record
        overlaps when it begins <= ``end``, inclusive, as backfill.c's test).

        Returns (nodes, r, later): r the last record walked, later the begin of the first record
        after which the map makes nodes of ``pm`` available that ``nodes`` lacks so far (0.0 if
        none; Slurm's ``later_start`` candidate). The walk stops at that record when
        ``later < stop_below``."""
        b, av = self.begins, self.avail
        nb = len(b)
        i = bisect_right(b, start) - 1
        if i < 0:
            i = 0
        acc = pm & av[i]
        later = 0.0
        while True:
            n1 = i + 1
            if n1 >= nb:
                break
            if not later and (pm & av[n1] & ~acc):
                later = b[n1]
                if later < stop_below:
                    break
            if b[n1] > end:
                break
            i = n1
            acc &= av[i]
        return acc, i, later

    def fits(self, start: float, end: float, nodes: int) -> bool:
        """Are all of ``nodes`` available in every record overlapping [start, end) (s)?"""
        b, av = self.begins, self.avail
        for q in range(max(bisect_right(b, start) - 1, 0), bisect_left(b, end)):
            if (av[q] & nodes) != nodes:
                return False
        return True

    def first_reserved(self, idle: int) -> tuple[list[float], list[int]]:
        """For the nodes of ``idle``: the begins (s) of the records that lack some of them for
        the first time, and how many idle nodes each takes away (not cumulative)."""
        left = idle
        rb_t: list[float] = []
        rb_c: list[int] = []
        for t, a in zip(self.begins, self.avail):
            hit = left & ~a
            if hit:
                rb_t.append(t)
                rb_c.append(hit.bit_count())
                left &= ~hit
                if not left:
                    break
        return rb_t, rb_c

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        recs = ", ".join(f"{t:g}:{a:#x}" for t, a in zip(self.begins, self.avail))
        return f"NodeSpaceMap(window_end={self.window_end:g}, [{recs}])"
