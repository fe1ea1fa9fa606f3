"""Compiled node-set form of the availability profile (Slurm's backfill ``node_space`` map).

The map is the profile's step function of future time with node *sets* as values: records
``r = 0..nb-1`` with begin times ``ns_b[r]`` (seconds, strictly increasing; record r lasts until
``ns_b[r + 1]``, the last one until the map's window end) and the nodes still available in each,
``ns_av[r, :]``, a row of ``uint64`` words (bit i of word w = node 64 w + i). It is
``node_space_map_t`` of Slurm's ``src/plugins/sched/backfill/backfill.c`` (``begin_time``,
``end_time``, ``avail_bitmap``), kept as two arrays with spare rows instead of a linked list.
The Python form over Python-int bitsets is `schedulers.profile_nodeset.NodeSpaceMap`; the two are
tested to agree (``tests/test_profile_nodeset.py``).

Operations (all O(nb x W) or better, W = words a node set):

* `ns_init`: one record from ``begin0``, every node available.
* `ns_split`: a record boundary at ``t`` (the record holding ``t`` is split in two equal halves).
* `ns_add_resv`: ``_add_reservation``: remove ``nodes`` over [start, end), with Slurm's
  ``bf_resolution`` rules (at least one slot, clipped to the window).
* `ns_walk`: the nodes of a set available in every record overlapping [start, end] (begin <= end,
  inclusive, as backfill.c's overlap test), with the first later record that frees nodes (Slurm's
  ``later_start`` candidate).
* `ns_fits`: are ``nodes`` available in every record overlapping [start, end)?
* `ns_first_reserved`: for the idle nodes, the begin of the first record that lacks each (how many
  idle nodes stop being available at each record), the bound behind "can a later job still start".

Bit primitives (`_pc64`, `_ctz`, `_count`, `_count_and`, `_any_and`, `_set_range`) and the sorted
searches (`_bisect_left`, `_bisect_right`) are shared with the Slurm kernels
(`schedulers.slurm_kernels`), which import them from here. `ns_walk`, `ns_fits` and `ns_split`,
called once or twice per backfill attempt, are inlined into their callers (``inline="always"``),
as the loops they replaced were. Compiled with numba (``cache=True``; a kernel file importing
these must be touched after an edit here, since numba's cache keys only on the caller's own file).
"""
from __future__ import annotations

import numpy as np
from numba import njit

_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)


# ---------------------------------------------------------------------------- node-set words
@njit(cache=True, inline="always")
def _pc64(x):
    """Set bits of a uint64 (SWAR popcount)."""
    x = x - ((x >> np.uint64(1)) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return (x * _H01) >> np.uint64(56)


@njit(cache=True, inline="always")
def _ctz(x):
    """Trailing zeros of a non-zero uint64."""
    return np.int64(_pc64((x & (~x + np.uint64(1))) - np.uint64(1)))


@njit(cache=True, inline="always")
def _count_and(a, b):
    """Nodes in both sets ``a`` and ``b``."""
    n = 0
    for w in range(a.shape[0]):
        n += _pc64(a[w] & b[w])
    return n


@njit(cache=True, inline="always")
def _count(a):
    """Nodes in the set ``a``."""
    n = 0
    for w in range(a.shape[0]):
        n += _pc64(a[w])
    return n


@njit(cache=True, inline="always")
def _any_and(a, b):
    """Do the sets ``a`` and ``b`` share a node?"""
    for w in range(a.shape[0]):
        if a[w] & b[w]:
            return True
    return False


@njit(cache=True, inline="always")
def _set_range(out, a, b):
    """Set bits a..b-1 of the words ``out`` (a word at a time)."""
    one = np.uint64(1)
    full = ~np.uint64(0)
    while a < b:
        w = a >> 6
        lo = a & 63
        hi = min(b - (w << 6), 64)          # bit after the last one set in this word
        mask = full if hi - lo == 64 else ((one << np.uint64(hi - lo)) - one) << np.uint64(lo)
        out[w] |= mask
        a = (w << 6) + hi


@njit(cache=True)
def _bisect_right(a, n, x):
    """First index of ``a[:n]`` (sorted) with ``a[i] > x``."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if x < a[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True)
def _bisect_left(a, n, x):
    """First index of ``a[:n]`` (sorted) with ``a[i] >= x``."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


# ---------------------------------------------------------------------------- the map
@njit(cache=True)
def ns_init(ns_b, ns_av, begin0):
    """One record from ``begin0`` (s) with every node available; returns nb = 1."""
    ns_b[0] = begin0
    for w in range(ns_av.shape[1]):
        ns_av[0, w] = ~np.uint64(0)
    return 1


@njit(cache=True, inline="always")
def ns_split(ns_b, ns_av, nb, t):
    """A record boundary at ``t`` (s, > ``ns_b[0]``): the record holding ``t`` is split, both
    halves keeping its nodes. Nothing changes if a record already begins at ``t``. Returns nb;
    ``ns_b``/``ns_av`` need a spare row."""
    i = _bisect_left(ns_b, nb, t)
    if i < nb and ns_b[i] == t:
        return nb
    W = ns_av.shape[1]
    for q in range(nb, i, -1):
        ns_b[q] = ns_b[q - 1]
        for w in range(W):
            ns_av[q, w] = ns_av[q - 1, w]
    ns_b[i] = t
    for w in range(W):
        ns_av[i, w] = ns_av[i - 1, w]
    return nb + 1


@njit(cache=True)
def ns_add_resv(st, en, nodes, ns_b, ns_av, nb, begin0, res, window_end):
    """``_add_reservation``: ``nodes`` leave every record over [st, en) (s). The interval is
    clipped to the map (``begin0`` .. ``window_end``) and lasts at least one ``res`` slot; a
    reservation starting at or after the window end changes nothing. Returns nb (at most two
    rows added)."""
    if st < begin0:
        st = begin0
    if en < st + res:
        en = st + res
    if st >= window_end:
        return nb
    if en > window_end:
        en = window_end
    for t in (st, en):
        if t >= window_end:
            continue
        nb = ns_split(ns_b, ns_av, nb, t)
    W = nodes.shape[0]
    i0 = _bisect_left(ns_b, nb, st)
    i1 = _bisect_left(ns_b, nb, en)
    for i in range(i0, i1):
        for w in range(W):
            ns_av[i, w] &= ~nodes[w]
    return nb


@njit(cache=True, inline="always")
def ns_walk(ns_b, ns_av, nb, pm, start, end, stop_below, acc):
    """Nodes of ``pm`` available in every record overlapping [start, end] (s; a record
    overlaps when it begins <= ``end``, inclusive, as in backfill.c), written to ``acc``.

    Returns (r, later): r the last record walked, later the begin of the first record after
    which the map makes nodes of ``pm`` available that ``acc`` lacks so far (0.0 if none; Slurm's
    ``later_start`` candidate). The walk stops at that record when ``later < stop_below``
    (pass -inf to always walk to ``end``)."""
    W = pm.shape[0]
    i = _bisect_right(ns_b, nb, start) - 1
    if i < 0:
        i = 0
    later = 0.0
    for w in range(W):
        acc[w] = pm[w] & ns_av[i, w]
    while True:
        n1 = i + 1
        if n1 >= nb:
            break
        if later == 0.0:
            frees = False
            for w in range(W):
                if pm[w] & ns_av[n1, w] & ~acc[w]:
                    frees = True
                    break
            if frees:
                later = ns_b[n1]
                if later < stop_below:
                    break
        if ns_b[n1] > end:
            break
        i = n1
        for w in range(W):
            acc[w] &= ns_av[i, w]
    return i, later


@njit(cache=True, inline="always")
def ns_fits(ns_b, ns_av, nb, st, en, nodes):
    """Are all of ``nodes`` available in every record overlapping [st, en) (s)?"""
    lo = _bisect_right(ns_b, nb, st) - 1
    if lo < 0:
        lo = 0
    hi = _bisect_left(ns_b, nb, en)
    W = nodes.shape[0]
    for q in range(lo, hi):
        for w in range(W):
            if (ns_av[q, w] & nodes[w]) != nodes[w]:
                return False
    return True


@njit(cache=True)
def ns_first_reserved(ns_b, ns_av, nb, idle, rb_t, rb_c, left):
    """For the nodes of ``idle``: ``rb_t[k]`` the begin (s) of the k-th record that lacks some
    of them for the first time, ``rb_c[k]`` how many idle nodes are unavailable from then on
    (cumulative). Returns the number of such records; ``left`` (W words) is scratch and ends
    as the idle nodes never reserved."""
    W = idle.shape[0]
    for w in range(W):
        left[w] = idle[w]
    nr = 0
    for i in range(nb):
        c = 0
        for w in range(W):
            hit = left[w] & ~ns_av[i, w]
            if hit:
                c += _pc64(hit)
                left[w] &= ~hit
        if c:
            rb_t[nr] = ns_b[i]
            rb_c[nr] = c + (rb_c[nr - 1] if nr else 0)
            nr += 1
            if _count(left) == 0:
                break
    return nr
