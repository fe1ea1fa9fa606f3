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
@njit(cache=True)
def _prefix_max(f, n, pm, lo):
    """pm[i] = max(f[0..i]) for i >= lo (pm[:lo] already valid)."""
    m = pm[lo - 1] if lo > 0 else -1
    for i in range(lo, n):
        if f[i] > m:
            m = f[i]
        pm[i] = m


@njit(cache=True)
def _first_at_least(pm, n, p):
    """First segment index whose prefix maximum of free units is >= p (n if none): no segment
    before it has p units free."""
    return np.searchsorted(pm[:n], p)


@njit(cache=True)
def _may_move(t, f, n, p, d, now, old, i0):
    """Necessary condition for a job of p units and d seconds reserved at ``old`` to find an earlier
    slot once its own reservation is removed: some s in [now, old) has p units free over
    [s, min(s + d, old)) (its own reservation frees p units over [old, old + d), so any slot that
    starts before ``old`` is feasible exactly when this holds). The scan starts at segment ``i0``
    (no segment before it has p units free)."""
    i = i0
    run_start = -1.0
    while i < n and t[i] < old:
        if f[i] >= p:
            if run_start < 0.0:
                run_start = t[i] if t[i] > now else now
            seg_end = t[i + 1] if i + 1 < n else INF
            if seg_end >= old or seg_end - run_start >= d:
                return True
        else:
            run_start = -1.0
        i += 1
    return False


@njit(cache=True)
def _compress_queue(t, f, n, pm, now, order, procs, dur, resv, total):
    """Conservative compression over the waiting jobs ``order`` (priority order), reservations in
    ``resv`` (indexed by job, NaN = none; updated in place). Same result as `_compress`: each job
    reserved in the future is removed and re-made at its earliest slot, in order. A job is only
    touched when it can move: some segment before its start has its units free (a prefix maximum
    of the free units, kept current after every move) and a slot fits before its start
    (`_may_move`), so a pass costs O(queue x log S) plus O(S) per job that passes both tests.
    Returns the new segment count."""
    _prefix_max(f, n, pm, 0)
    for k in range(len(order)):
        q = order[k]
        old = resv[q]
        if not old > now:            # NaN (not reserved) or due now
            continue
        p = procs[q]
        i = _seg_index(t, n, old)
        if t[i] == old:
            i -= 1
        if i < 0 or pm[i] < p:
            continue
        d = dur[q]
        i0 = _first_at_least(pm, n, p)
        if not _may_move(t, f, n, p, d, now, old, i0):
            continue
        n, ok = _add(t, f, n, old, old + d, p, total)
        s = _earliest_from(t, f, n, p, d, now, i0)
        n, ok = _add(t, f, n, s, s + d, -p, total)
        resv[q] = s
        lo = _seg_index(t, n, s)
        _prefix_max(f, n, pm, lo if lo > 0 else 0)
    return n


@njit(cache=True)
def _plan_pass(t, f, n, pm, now, order, procs, dur, resv, total, dirty, starts_out):
    """One conservative pass over the waiting jobs ``order`` (priority order): compress if a job
    ended before its estimate (``dirty``), reserve every job without a reservation at its earliest
    slot (in order), then hand out the jobs whose reservation is due (``starts_out``, in order; their
    reservation is cleared). Returns (new segment count, number of starts, earliest remaining
    reservation start or inf)."""
    if dirty:
        n = _compress_queue(t, f, n, pm, now, order, procs, dur, resv, total)
    for k in range(len(order)):
        q = order[k]
        if resv[q] != resv[q]:
            p = procs[q]
            d = dur[q]
            s = _earliest(t, f, n, p, d, now)
            n, ok = _add(t, f, n, s, s + d, -p, total)
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
