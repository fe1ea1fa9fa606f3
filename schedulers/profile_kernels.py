"""Compiled kernels of the availability profile (see `schedulers.profile`).

Small loops over the profile's S segments compiled with numba: conservative backfilling re-plans
every waiting job's reservation at most job ends, millions of slot searches over a year-long log,
and a compiled loop does each in well under a microsecond where a sequence of numpy calls costs
tens of microseconds of call overhead. This module is imported only when a profile is built, so
policies that never build one (FCFS, EASY) do not pay numba's start-up.
"""
from __future__ import annotations

import numpy as np
from numba import njit

INF = float("inf")


@njit(cache=True)
def _seg_index(t, n, x):
    """Index of the segment containing time x (x >= t[0]): last i with t[i] <= x."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if t[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


@njit(cache=True)
def _earliest(t, f, n, p, d, after):
    """Earliest time >= after when p units are free for d seconds (inf if never)."""
    return _earliest_from(t, f, n, p, d, after, _seg_index(t, n, after) if after > t[0] else 0)


@njit(cache=True)
def _earliest_from(t, f, n, p, d, after, i0):
    """`_earliest` scanning from segment ``i0`` (the one holding ``after``, or a later one when no
    segment in between has p units free)."""
    i = i0
    run_start = -1.0
    while i < n:
        if f[i] >= p:
            if run_start < 0.0:
                run_start = t[i] if t[i] > after else after
            seg_end = t[i + 1] if i + 1 < n else INF
            if seg_end - run_start >= d:
                return run_start
        else:
            run_start = -1.0
        i += 1
    return INF


@njit(cache=True)
def _split(t, f, n, x):
    """Make x a breakpoint (x >= t[0], capacity for one more). Returns (index, new n)."""
    i = _seg_index(t, n, x)
    if t[i] == x:
        return i, n
    # insert after i
    for k in range(n, i + 1, -1):
        t[k] = t[k - 1]
        f[k] = f[k - 1]
    t[i + 1] = x
    f[i + 1] = f[i]
    return i + 1, n + 1


@njit(cache=True)
def _add(t, f, n, start, end, delta, total):
    """Add delta units over [start, end) (end may be inf). Returns (new n, ok) where ok is False
    if the change would make a segment negative or exceed total (nothing is changed then)."""
    if start < t[0]:
        start = t[0]
    if end <= start:
        return n, True
    i, n = _split(t, f, n, start)
    if end == INF:
        j = n
    else:
        j, n = _split(t, f, n, end)
    for k in range(i, j):
        v = f[k] + delta
        if v < 0 or v > total:
            return n, False
    for k in range(i, j):
        f[k] += delta
    return n, True


@njit(cache=True)
def _min_free(t, f, n, start, end):
    i = _seg_index(t, n, start) if start > t[0] else 0
    m = f[i]
    i += 1
    while i < n and t[i] < end:
        if f[i] < m:
            m = f[i]
        i += 1
    return m


@njit(cache=True)
def _compact(t, f, n):
    """Merge neighbours with equal free counts. Returns new n."""
    w = 1
    for k in range(1, n):
        if f[k] != f[w - 1]:
            t[w] = t[k]
            f[w] = f[k]
            w += 1
    return w


@njit(cache=True)
def _compress(t, f, n, now, procs, dur, starts, total):
    """Conservative compression: for each job (in the given priority order) whose reserved start
    is in the future, remove its reservation and re-make it at the earliest slot (never later).
    ``starts`` is updated in place. Returns new n. Capacity must allow 2 more breakpoints a job."""
    for q in range(len(procs)):
        old = starts[q]
        if old <= now:
            continue
        p = procs[q]
        d = dur[q]
        # quick test: some segment before `old` must have p units free, else it cannot move
        i = 0
        can = False
        while i < n and t[i] < old:
            if f[i] >= p:
                can = True
                break
            i += 1
        if not can:
            continue
        n, ok = _add(t, f, n, old, old + d, p, total)
        s = _earliest(t, f, n, p, d, now)
        n, ok = _add(t, f, n, s, s + d, -p, total)
        starts[q] = s
    return n




# ------------------------------------------------------------------ conservative backfilling plan
#: segments per block summary of the plan's profile (a power of two)
BLOCK = 32


@njit(cache=True)
def _blocks_from(f, n, bm, i):
    """Rebuild the block summaries from the block holding segment ``i`` on: ``bm[2b]`` / ``bm[2b+1]``
    = max / min free units of the segments ``[b * BLOCK, (b + 1) * BLOCK)`` (clipped to n).
    Segments before that block must be unchanged since the last rebuild. O(n - i)."""
    b = i // BLOCK if i > 0 else 0
    while b * BLOCK < n:
        lo = b * BLOCK
        hi = lo + BLOCK if lo + BLOCK < n else n
        mx = f[lo]
        mn = f[lo]
        for k in range(lo + 1, hi):
            v = f[k]
            if v > mx:
                mx = v
            elif v < mn:
                mn = v
        bm[2 * b] = mx
        bm[2 * b + 1] = mn
        b += 1


@njit(cache=True)
def _next_ge(f, n, bm, i, p):
    """First segment index >= i with at least p units free (n if none); whole blocks whose maximum
    is below p are skipped."""
    while i < n:
        if i & (BLOCK - 1) == 0 and bm[2 * (i // BLOCK)] < p:
            i += BLOCK
            continue
        if f[i] >= p:
            return i
        i += 1
    return n


@njit(cache=True)
def _next_lt(f, n, bm, i, p):
    """First segment index >= i with fewer than p units free (n if none); whole blocks whose
    minimum is at least p are skipped."""
    while i < n:
        if i & (BLOCK - 1) == 0 and bm[2 * (i // BLOCK) + 1] >= p:
            i += BLOCK
            continue
        if f[i] < p:
            return i
        i += 1
    return n


@njit(cache=True)
def _find_run(t, f, n, bm, p, d, after, limit):
    """Earliest time >= ``after`` at which p units are free for d seconds, as `_earliest`, by
    jumping from run to run of segments with >= p units free (block summaries ``bm`` current):
    O(runs x (n / BLOCK + BLOCK)) instead of O(n). Returns inf if no run starting before
    ``limit`` (s) is long enough."""
    i = _seg_index(t, n, after) if after > t[0] else 0
    i = _next_ge(f, n, bm, i, p)
    while i < n:
        rs = t[i] if t[i] > after else after
        if rs >= limit:
            return INF
        j = _next_lt(f, n, bm, i + 1, p)
        re = t[j] if j < n else INF
        if re - rs >= d:
            return rs
        i = _next_ge(f, n, bm, j + 1, p)
    return INF


@njit(cache=True)
def _slot_before(t, f, n, bm, p, d, now, old, lim):
    """Earliest start of a job of p units and d seconds reserved at ``old`` once its own reservation
    is removed, if it is before ``old`` (else inf), computed on the profile that still holds it: a
    run of segments with p units free starting before ``old`` fits when it lasts d seconds or
    reaches ``old`` (from there on the job's own units are free until ``old + d``). ``lim``: no run
    ends after it (s; the start of the segment before ``old`` when that one lacks p units, else
    inf), so the search stops at the first run starting less than d seconds before it (exact in
    floats: ``lim - rs`` bounds ``re - rs`` and only shrinks as ``rs`` grows)."""
    i = _next_ge(f, n, bm, 0, p)
    while i < n:
        rs = t[i] if t[i] > now else now
        if rs >= old or lim - rs < d:
            return INF
        j = _next_lt(f, n, bm, i + 1, p)
        re = t[j] if j < n else INF
        if re >= old or re - rs >= d:
            return rs
        i = _next_ge(f, n, bm, j + 1, p)
    return INF


@njit(cache=True)
def _delta(x, s, sd, old, e, p):
    """Change of free units at time x when a reservation of p units moves from [old, e) to [s, sd)."""
    v = 0
    if s <= x < sd:
        v -= p
    if old <= x < e:
        v += p
    return v


@njit(cache=True)
def _move(t, f, n, bm, s, sd, old, e, p):
    """Move a reservation of p units from [old, e) to [s, sd) (s < old, so sd < e) in one backward
    pass over the segments from s on: the same breakpoints and free units as removing it and
    re-making it with `_add`, with one O(S - i) shift instead of four. Capacity for 4 more
    breakpoints. Returns new n (block summaries rebuilt from s on)."""
    lo = _seg_index(t, n, s)
    pts = np.empty(4, dtype=np.float64)
    k = 0
    for x in (s, sd, old, e):
        if x != t[_seg_index(t, n, x)]:
            dup = False
            for c in range(k):
                if pts[c] == x:
                    dup = True
            if not dup:
                pts[k] = x
                k += 1
    # sort the (at most 4) new breakpoints
    for a in range(1, k):
        x = pts[a]
        b = a - 1
        while b >= 0 and pts[b] > x:
            pts[b + 1] = pts[b]
            b -= 1
        pts[b + 1] = x
    r = n - 1
    w = n + k - 1
    c = k - 1
    while c >= 0:
        if t[r] > pts[c]:
            t[w] = t[r]
            f[w] = f[r] + _delta(t[r], s, sd, old, e, p)
            r -= 1
        else:
            x = pts[c]
            t[w] = x
            f[w] = f[r] + _delta(x, s, sd, old, e, p)
            c -= 1
        w -= 1
    while r >= lo:
        f[r] += _delta(t[r], s, sd, old, e, p)
        r -= 1
    n += k
    _blocks_from(f, n, bm, lo)
    return n


@njit(cache=True)
def _reserve_at(t, f, n, bm, s, p, d, total):
    """Take p units over [s, s + d) and bring the block summaries up to date. Returns new n."""
    n, ok = _add(t, f, n, s, s + d, -p, total)
    _blocks_from(f, n, bm, _seg_index(t, n, s))
    return n


@njit(cache=True)
def _compress_queue(t, f, n, bm, now, order, procs, dur, resv, total):
    """Conservative compression over the waiting jobs ``order`` (priority order), reservations in
    ``resv`` (indexed by job, NaN = none; updated in place). Same result as `_compress`: each job
    reserved in the future is removed and re-made at its earliest slot, in order.

    A job reserved at ``old`` can move exactly when, without its own reservation, a slot starts
    before ``old`` (`_slot_before`, which also finds that slot, on the profile that still holds the
    reservation): a run-to-run search over block summaries that stops at ``old``, O(runs x
    (S / BLOCK + BLOCK)) instead of the O(S) segment scan. Only jobs that move change the profile
    (two `_add`, O(S) memory moves, and one suffix rebuild of the summaries). ``bm`` holds at least
    2 x ceil(S / BLOCK) entries. Returns the new segment count."""
    _blocks_from(f, n, bm, 0)
    for k in range(len(order)):
        q = order[k]
        old = resv[q]
        if not old > now:            # NaN (not reserved) or due now
            continue
        p = procs[q]
        d = dur[q]
        i = _seg_index(t, n, old)
        if t[i] == old:
            i -= 1
        if i < 0:
            continue
        s = _slot_before(t, f, n, bm, p, d, now, old, INF if f[i] >= p else t[i])
        if s == INF:
            continue
        e = old + d
        if e - s < d:
            # rounding (s < old, so never with exact arithmetic): the run reaching `old` may not
            # last d seconds in floats; the plain search on the profile without the reservation decides
            n, ok = _add(t, f, n, old, e, p, total)
            _blocks_from(f, n, bm, _seg_index(t, n, old))
            s = _find_run(t, f, n, bm, p, d, now, INF)
            n = _reserve_at(t, f, n, bm, s, p, d, total)
        else:
            n = _move(t, f, n, bm, s, s + d, old, e, p)
        resv[q] = s
    return n


@njit(cache=True)
def _plan_pass(t, f, n, bm, now, order, procs, dur, resv, total, dirty, starts_out):
    """One conservative pass over the waiting jobs ``order`` (priority order): compress if a job
    ended before its estimate (``dirty``), reserve every job without a reservation at its earliest
    slot (in order), then hand out the jobs whose reservation is due (``starts_out``, in order; their
    reservation is cleared). ``bm``: scratch for the block summaries (>= 2 x ceil(S / BLOCK)
    entries; the segment capacity is enough). Returns (new segment count, number of starts,
    earliest remaining reservation start or inf)."""
    if dirty:
        n = _compress_queue(t, f, n, bm, now, order, procs, dur, resv, total)
    else:
        _blocks_from(f, n, bm, 0)
    for k in range(len(order)):
        q = order[k]
        if resv[q] != resv[q]:
            p = procs[q]
            d = dur[q]
            s = _find_run(t, f, n, bm, p, d, now, INF)
            n = _reserve_at(t, f, n, bm, s, p, d, total)
            resv[q] = s
    m = 0
    nxt = INF
    for k in range(len(order)):
        q = order[k]
        r = resv[q]
        if r <= now:
            starts_out[m] = q
            m += 1
            resv[q] = np.nan
        elif r < nxt:
            nxt = r
    return n, m, nxt


@njit(cache=True)
def _units_due(order, procs, resv, now):
    """Units of the jobs in ``order`` whose reservation starts at or before ``now``."""
    s = 0
    for k in range(len(order)):
        q = order[k]
        if resv[q] <= now:
            s += procs[q]
    return s
