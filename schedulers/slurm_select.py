"""Slurm 22.05's ``select/linear`` node choice on Python-int node bitsets (bit i = node i).

Source: ``src/plugins/select/linear/select_linear.c`` of Slurm 22.05 (tag ``slurm-22-05-9-1``):

* `job_test` is ``_job_test()`` for a job of whole, identical nodes without required nodes,
  contiguity or topology (the case the twin models): the available nodes split into runs of
  *consecutive* node indices (``consec_start``/``consec_end``); while nodes are still needed it
  picks, among the runs not used yet, the *tightest sufficient* run (the smallest run with at least
  the remaining node count; ties go to the first, lowest-index run because the comparison is
  strict, ``consec_cpus[i] < best_fit_cpus``) or, when no run is sufficient, the *largest* run
  (ties: the first), and takes its nodes from the low end (``consec_start`` upwards) until enough
  are taken. So a job takes the low end of the smallest hole it fits in, else fills the biggest
  holes first.
* `will_run` is ``_will_run_test()``: first ``_job_test()`` on the currently idle nodes; if the
  job does not fit, the running jobs are removed *one at a time* in expected-end order
  (``_cr_job_list_sort`` on ``end_time``; ties by job id here, the order of slurmctld's job list)
  and ``_job_test()`` runs again after each removal. The first success gives the start time (the
  removed job's ``end_time``, or ``now + 1`` if that end is already past) and *the nodes*: the
  reservation can include nodes that are idle now, and only the jobs up to that one are freed.
  ``_job_count_bitmap`` makes a node usable only when no job runs on it (select/linear allocates
  whole nodes, ``exclusive_cnt``).

Node sets are Python ints: for the few hundred to few thousand nodes of the replayed machines an
``&``/``|``/``bit_count`` on a Python int is one C loop over 64-bit words, cheaper than any numpy
call on arrays that small.
"""
from __future__ import annotations

from bisect import bisect_left
from typing import Iterable


def runs(avail: int) -> list[tuple[int, int]]:
    """Runs of consecutive set bits of ``avail`` as ``(first index, length)``, lowest first."""
    out = []
    x = avail
    while x:
        low = x & -x
        rest = (x + low) & x           # x without its lowest run of ones
        run = x ^ rest
        out.append((low.bit_length() - 1, run.bit_count()))
        x = rest
    return out


def job_test(avail: int, need: int) -> int | None:
    """``_job_test()``: the ``need`` nodes select/linear picks among ``avail`` (a bitset), or None
    if ``avail`` has fewer than ``need`` nodes. See the module docstring for the rule."""
    if need <= 0:
        return 0
    if avail.bit_count() < need:
        return None
    rs = runs(avail)
    chosen = 0
    rem = need
    while rem > 0:
        best = -1
        best_len = 0
        best_suff = False
        for k, (_, ln) in enumerate(rs):
            if ln == 0:
                continue
            suff = ln >= rem
            if (best < 0 or (suff and not best_suff) or (suff and ln < best_len)
                    or (not suff and ln > best_len)):
                best, best_len, best_suff = k, ln, suff
        start, ln = rs[best]
        take = min(ln, rem)
        chosen |= ((1 << take) - 1) << start
        rem -= take
        rs[best] = (start, 0)
    return chosen


def low_bits(x: int, r: int) -> int:
    """The ``r`` lowest set bits of ``x`` (as a bitset); ``x`` itself if it has <= r; 0 for r <= 0."""
    if r <= 0:
        return 0
    if x.bit_count() <= r:
        return x
    lo, hi = 1, x.bit_length()
    while lo < hi:                      # smallest p with popcount(x mod 2^p) >= r
        mid = (lo + hi) // 2
        if (x & ((1 << mid) - 1)).bit_count() >= r:
            hi = mid
        else:
            lo = mid + 1
    return x & ((1 << lo) - 1)


def bits(x: int) -> list[int]:
    """Indices of the set bits of ``x``, lowest first."""
    out = []
    while x:
        low = x & -x
        out.append(low.bit_length() - 1)
        x ^= low
    return out


def to_mask(nodes: Iterable[int]) -> int:
    """Node indices -> bitset."""
    m = 0
    for x in nodes:
        m |= 1 << int(x)
    return m


class RunningSet:
    """Running jobs in ``_will_run_test()`` removal order with prefix bitsets.

    ``keys[m]`` = (expected end, job id) of the m-th job to be removed, ``free[m]`` = nodes free
    once jobs 0..m are removed (idle nodes included); ``idle`` = nodes free now. A job started
    during a backfill cycle is added with `start` (its nodes leave ``idle`` and every prefix
    before its position).
    """

    __slots__ = ("idle", "keys", "free")

    def __init__(self, idle: int, jobs: Iterable[tuple[float, int, int]]):
        """``jobs``: (expected end in s, job id, node bitset) of every running job."""
        self.idle = idle
        self.keys: list[tuple[float, int]] = []
        self.free: list[int] = []
        acc = idle
        for end, jid, mask in sorted(jobs, key=lambda r: (r[0], r[1])):
            acc |= mask
            self.keys.append((end, jid))
            self.free.append(acc)

    def start(self, end: float, jid: int, mask: int) -> None:
        """A job starts now on ``mask`` (idle nodes) and is expected to end at ``end``."""
        keep = ~mask
        self.idle &= keep
        key = (end, jid)
        m = bisect_left(self.keys, key)
        self.keys.insert(m, key)
        free = self.free
        for q in range(m):
            free[q] &= keep
        prev = free[m - 1] if m else self.idle
        free.insert(m, prev | mask)

    def earliest(self, avail: int, need: int, now: float) -> float:
        """The start time `will_run` would return (inf if never), without choosing nodes."""
        if (avail & self.idle).bit_count() >= need:
            return now
        m = self._first(avail, need)
        if m == len(self.free):
            return float("inf")
        end = self.keys[m][0]
        return end if end > now else now + 1.0

    def _first(self, avail: int, need: int) -> int:
        """First removal after which ``need`` nodes of ``avail`` are free (len if none)."""
        free = self.free
        lo, hi = 0, len(free)
        while lo < hi:
            mid = (lo + hi) // 2
            if (avail & free[mid]).bit_count() >= need:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def will_run(self, avail: int, need: int, now: float) -> tuple[float, int] | None:
        """``_will_run_test()`` of a ``need``-node job restricted to ``avail``: (start time, node
        bitset), or None if it cannot run even when every running job has ended."""
        wr = self.will_run_at(avail, need, now)
        return None if wr is None else (wr[0], job_test(wr[1], need))

    def will_run_at(self, avail: int, need: int, now: float) -> tuple[float, int] | None:
        """`will_run` without the node choice: (start time, the free nodes ``_job_test()`` then
        chooses from), so a caller pays for ``_job_test()`` only when it uses the nodes."""
        cand = avail & self.idle
        if cand.bit_count() >= need:
            return now, cand
        lo = self._first(avail, need)
        if lo == len(self.free):
            return None
        end = self.keys[lo][0]
        return (end if end > now else now + 1.0), avail & self.free[lo]


class GroupedRunning:
    """The running jobs grouped by expected end, for select/cons_tres and cons_res (an
    approximation: the twin does not model cores, memory or GRES per node, so a whole-node job's
    will-run start is the exact earliest time enough nodes are free, where cons_tres's
    ``_will_run_test`` groups ends within a 30 s window).

    ``T[m]`` distinct end times (``T[0]`` = now),
    ``G[m]`` nodes freed at ``T[m]``, ``C[m]`` = nodes free by ``T[m]``; ``T[0]`` = now holds only
    the idle nodes.
    """

    __slots__ = ("T", "G", "C", "idle")

    def __init__(self, now: float, idle: int, jobs: Iterable[tuple[float, int, int]]):
        T = [now]
        G = [idle]
        # a job already past its expected end frees its nodes at now + 1 (the will-run tests'
        # ``if (tmp_job_ptr->end_time <= now) start_time = now + 1``), never "now"
        for t, _, mask in sorted(((max(e, now + 1.0), i, mk) for e, i, mk in jobs)):
            if t == T[-1]:
                G[-1] |= mask
            else:
                T.append(t)
                G.append(mask)
        C = list(G)
        for m in range(1, len(C)):
            C[m] |= C[m - 1]
        self.T, self.G, self.C, self.idle = T, G, C, idle

    def first_free(self, avail: int, need: int) -> int:
        """Smallest m with ``need`` nodes of ``avail`` free by ``T[m]`` (len(T) if never)."""
        C = self.C
        if (avail & C[-1]).bit_count() < need:
            return len(C)
        lo, hi = 0, len(C) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if (avail & C[mid]).bit_count() >= need:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def start(self, end: float, jid: int, mask: int) -> None:
        """A job starts now on ``mask`` (idle nodes) and is expected to end at ``end``."""
        T, C, G = self.T, self.C, self.G
        keep = ~mask
        self.idle &= keep
        m = bisect_left(T, end)
        for q in range(m):
            C[q] &= keep
        G[0] &= keep
        if m < len(T) and T[m] == end:
            G[m] |= mask
        else:
            T.insert(m, end)
            C.insert(m, C[m - 1] | mask)
            G.insert(m, mask)
