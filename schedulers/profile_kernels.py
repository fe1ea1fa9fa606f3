"""Compiled kernels of the availability profile (see `schedulers.profile`).

Small loops over the profile's S segments compiled with numba: conservative backfilling re-plans
every waiting job's reservation at most job ends, millions of slot searches over a year-long log,
and a compiled loop does each in well under a microsecond where a sequence of numpy calls costs
tens of microseconds of call overhead. This module is imported only when a profile is built, so
policies that never build one (FCFS, EASY) do not pay numba's start-up.

Conservative compression (`_compress_queue`, the hot loop of a long overloaded log), measured on the
first 100k RICC jobs (82 M move tests, 9.3 M moves, ~1,300 waiting jobs and ~300 segments on
average): a job's test is a cached per-shape earliest slot plus one look at the segment before its
reservation (`_shape_start`, `_run_start`), not a scan of the profile; a move edits only the
segments whose free units change (`_move`); and the pass works on borrowed array views
(`_borrow`), because numba's atomic reference counting of array arguments was ~40 % of the time.
"""
from __future__ import annotations

import numpy as np
from numba import njit
from numba.core import cgutils
from numba.extending import intrinsic

INF = float("inf")


@intrinsic
def _borrow(typingctx, arr):
    """The same array without its memory-info pointer, so that passing it to other compiled functions
    costs no reference counting (two atomic operations per array per call, which dominated the
    conservative pass). Only for arrays that outlive every use of the view."""
    def codegen(context, builder, signature, args):
        view = context.make_array(arr)(context, builder, value=args[0])
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        return view._getvalue()
    return arr(arr), codegen


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
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
def _delta(x, s, sd, old, e, p):
    """Change of free units at time x when a reservation of p units moves from [old, e) to [s, sd)."""
    v = 0
    if s <= x < sd:
        v -= p
    if old <= x < e:
        v += p
    return v


@njit(cache=True, inline="always")
def _delta_before(x, s, sd, old, e, p):
    """Change of free units just before time x (on (x - eps, x)) for the move of `_delta`."""
    v = 0
    if s < x <= sd:
        v -= p
    if old < x <= e:
        v += p
    return v


@njit(cache=True)
def _move_edits(t, f, n, s, sd, old, e, p, wk):
    """The breakpoint edits of a move (see `_move`), on the profile before it: at each of its edit
    times (s, min(sd, old), max(sd, old), e) a breakpoint is inserted when the free units change
    there and it is missing, and deleted when it is there and they no longer change (never the
    origin). ``wk[k] = (kind: +1 insert / -1 delete, original position, free units after)``,
    ``wk[k, 3]`` the time's index in ``(s, x1, x2, e)``. Returns the number of edits (<= 4)."""
    x1 = sd if sd < old else old
    x2 = old if sd < old else sd
    na = 0
    last = -INF
    c = -1
    for x in (s, x1, x2, e):
        c += 1
        if x == last or x == INF:
            continue
        last = x
        i = _seg_index(t, n, x)
        present = t[i] == x
        if present and i == 0:
            continue
        v = f[i] + _delta(x, s, sd, old, e, p)
        vb = f[i - 1 if present else i] + _delta_before(x, s, sd, old, e, p)
        if present and v == vb:
            wk[na, 0] = -1
            wk[na, 1] = i
        elif not present and v != vb:
            wk[na, 0] = 1
            wk[na, 1] = i + 1
            wk[na, 2] = v
        else:
            continue
        wk[na, 3] = c
        na += 1
    return na


@njit(cache=True)
def _blocks_range(f, n, bm, i0, i1):
    """Rebuild the block summaries of the blocks holding segments i0..i1 (clipped to n)."""
    if i0 < 0:
        i0 = 0
    b = i0 // BLOCK
    while b * BLOCK < n and b * BLOCK <= i1:
        lo = b * BLOCK
        hi = lo + BLOCK if lo + BLOCK < n else n
        mx = f[lo]
        mn = f[lo]
        for k in range(lo + 1, hi):
            mx = max(mx, f[k])
            mn = min(mn, f[k])
        bm[2 * b] = mx
        bm[2 * b + 1] = mn
        b += 1


@njit(cache=True)
def _move(t, f, n, bm, s, sd, old, e, p, wk):
    """Move a reservation of p units from [old, e) to [s, sd) (s < old, so sd < e): the same free
    units as removing it and re-making it with `_add`, on the same breakpoints except those left
    with equal free units on both sides at the four edit times, which are dropped (an equal step
    function; `_move_edits`). Work: the segments whose free units change, [s, min(sd, old)) and
    [max(sd, old), e), plus the segments between two edits that shift by one position, plus the
    whole suffix only when the breakpoint count changes. ``wk``: (4, 4) int64 scratch. Capacity for
    4 more breakpoints. Returns new n (block summaries brought up to date)."""
    x1 = sd if sd < old else old
    x2 = old if sd < old else sd
    na = _move_edits(t, f, n, s, sd, old, e, p, wk)
    # free units, in place on the original positions (inserted breakpoints carry theirs in wk)
    k = _seg_index(t, n, s)
    if t[k] < s:
        k += 1
    while k < n and t[k] < x1:
        f[k] -= p
        k += 1
    k = _seg_index(t, n, x2)
    if t[k] < x2:
        k += 1
    while k < n and t[k] < e:
        f[k] += p
        k += 1
    # shift the runs of positions between edits: right-moving runs from the right, left-moving
    # runs from the left (targets are disjoint and ordered, so no run overwrites one not yet moved)
    dmid = 0
    d_last = 0
    for a in range(na):
        d_last += wk[a, 0]
        if wk[a, 3] <= 1:
            dmid = d_last
    d = d_last
    for a in range(na - 1, -1, -1):
        lo = wk[a, 1] + (1 if wk[a, 0] < 0 else 0)
        hi = wk[a + 1, 1] if a + 1 < na else n
        if d > 0:
            for j in range(hi - 1, lo - 1, -1):
                t[j + d] = t[j]
                f[j + d] = f[j]
        d -= wk[a, 0]
    d = 0
    for a in range(na):
        d += wk[a, 0]
        lo = wk[a, 1] + (1 if wk[a, 0] < 0 else 0)
        hi = wk[a + 1, 1] if a + 1 < na else n
        if d < 0:
            for j in range(lo, hi):
                t[j + d] = t[j]
                f[j + d] = f[j]
    d = 0
    for a in range(na):
        if wk[a, 0] > 0:
            j = wk[a, 1] + d
            t[j] = (s, x1, x2, e)[wk[a, 3]]
            f[j] = wk[a, 2]
        d += wk[a, 0]
    n += d_last
    # block summaries of what changed
    i0 = _seg_index(t, n, s)
    i3 = _seg_index(t, n, e) + 1 if e < INF else n
    if d_last != 0:
        _blocks_from(f, n, bm, i0 if dmid != 0 else _seg_index(t, n, x2))
        if dmid == 0:
            _blocks_range(f, n, bm, i0, _seg_index(t, n, x1) + 1)
    elif dmid != 0:
        _blocks_range(f, n, bm, i0, i3)
    else:
        _blocks_range(f, n, bm, i0, _seg_index(t, n, x1) + 1)
        _blocks_range(f, n, bm, _seg_index(t, n, x2), i3)
    return n


@njit(cache=True)
def _reserve_at(t, f, n, bm, s, p, d, total):
    """Take p units over [s, s + d) and bring the block summaries up to date. Returns new n."""
    n, ok = _add(t, f, n, s, s + d, -p, total)
    _blocks_from(f, n, bm, _seg_index(t, n, s))
    return n


# ------------------------------------------------------------------ per-pass cache of shape slots
# Within one pass the waiting jobs share few shapes (units, duration): on RICC 46 shapes for 3,667
# waiting jobs, one (1 unit, 3 days) for half of them. The earliest slot of a shape on the current
# profile (`_find_run` from now) is kept per shape and revised after each change of the profile from
# a log of the net changes: a loss (units taken over [a, b)) leaves a cached slot E exact unless it
# overlaps [E, E + d); a gain (units given back over [a, b)) leaves it exact when a >= E + d, else
# the new earliest slot is at least a - d (a slot that did not exist before must use the gain, and
# the part of its run before a existed already, so it is shorter than d), and the search restarts
# there. Bounds carry a margin of 1e-9 x the times involved (float rounding), which can only make a
# revision search more, never change a result. A search that finds nothing before the job's own
# reservation leaves that time as the bound, so the next job of the shape resumes from it.

#: cache columns: ``ci[c] = (units, state, log position)``, ``cf[c] = (duration s, slot or bound s)``
EXACT, BOUND = 0, 1


@njit(cache=True)
def _cache_new(qn):
    """Empty shape cache for a pass over qn waiting jobs: (hash table, ci, cf, log, gain flags, meta);
    ``meta = [shapes, log entries]``."""
    h = 16
    while h < 2 * qn + 2:
        h *= 2
    return (np.zeros(h, dtype=np.int64), np.empty((qn + 1, 3), dtype=np.int64),
            np.empty((qn + 1, 2), dtype=np.float64), np.empty((2 * qn + 8, 2), dtype=np.float64),
            np.empty(2 * qn + 8, dtype=np.bool_), np.zeros(2, dtype=np.int64))


@njit(cache=True, inline="always")
def _shape_of(ht, ci, cf, meta, p, d, now):
    """Index of shape (p units, d s) in the cache, added if new (bound: now)."""
    mask = len(ht) - 1
    x = d if d < 1e15 else 1e15
    h = (p * 2654435761 + np.int64(x * 16.0) * 40503) & mask
    while ht[h] != 0:
        c = ht[h] - 1
        if ci[c, 0] == p and cf[c, 0] == d:
            return c
        h = (h + 1) & mask
    c = meta[0]
    meta[0] = c + 1
    ht[h] = c + 1
    ci[c, 0] = p
    ci[c, 1] = BOUND
    ci[c, 2] = meta[1]
    cf[c, 0] = d
    cf[c, 1] = now
    return c


@njit(cache=True, inline="always")
def _log_change(lg, lk, meta, a, b, gain):
    """Record that the profile lost (gain False) or gained units over [a, b) (s)."""
    m = meta[1]
    lg[m, 0] = a
    lg[m, 1] = b
    lk[m] = gain
    meta[1] = m + 1


@njit(cache=True, inline="always")
def _shape_start(t, f, n, bm, now, ci, cf, lg, lk, meta, c, limit):
    """Earliest slot (s, as `_find_run` from now) of cached shape c on the current profile if it
    starts before ``limit`` (s), else inf. The cache holds either the slot (EXACT) or a bound v
    (BOUND: no slot starts before v); the changes logged since it was last brought up to date are
    applied first, and a search runs only from a bound below ``limit`` (up to ``limit``; when it
    finds nothing, ``limit`` becomes the bound, so the search resumes there for the next job)."""
    st = ci[c, 1]
    d = cf[c, 0]
    e = cf[c, 1]
    for k in range(ci[c, 2], meta[1]):
        a = lg[k, 0]
        m = 1e-9 * (abs(a) + abs(lg[k, 1]) + d)
        if lk[k]:
            if a - d - m < e:
                e = a - d - m if a - d - m > now else now
                st = BOUND
        elif st == EXACT and a < e + d + m and lg[k, 1] > e - m:
            st = BOUND
    ci[c, 2] = meta[1]
    cf[c, 1] = e
    ci[c, 1] = st
    if st == EXACT:
        return e if e < limit else INF
    if e >= limit:
        return INF
    e = _find_run(t, f, n, bm, ci[c, 0], d, e, limit)
    if e < INF:
        ci[c, 1] = EXACT
        cf[c, 1] = e
    else:
        cf[c, 1] = limit
    return e


@njit(cache=True, inline="always")
def _run_start(t, f, bm, i, p, now):
    """Start (clamped to now) of the run of segments with >= p units free that holds segment i
    (``f[i] >= p``), walking back over whole blocks whose minimum is at least p."""
    j = i - 1
    while j >= 0:
        if j & (BLOCK - 1) == BLOCK - 1 and bm[2 * (j // BLOCK) + 1] >= p:
            j -= BLOCK
            continue
        if f[j] < p:
            break
        j -= 1
    x = t[j + 1]
    return x if x > now else now


@njit(cache=True, inline="always")
def _reserve_earliest(t, f, n, bm, now, ht, ci, cf, lg, lk, meta, q, p, d, resv, total):
    """Reserve job q (p units, d s) at its earliest slot from now (``resv[q]``), logging the change
    for the shape cache. Returns the new segment count."""
    s = _shape_start(t, f, n, bm, now, ci, cf, lg, lk, meta, _shape_of(ht, ci, cf, meta, p, d, now), INF)
    n = _reserve_at(t, f, n, bm, s, p, d, total)
    _log_change(lg, lk, meta, s, s + d, False)
    resv[q] = s
    return n


@njit(cache=True)
def _compress_queue(t, f, n, bm, now, order, procs, dur, resv, total, ht, ci, cf, lg, lk, meta, wk):
    """Conservative compression over the waiting jobs ``order`` (priority order), reservations in
    ``resv`` (indexed by job, NaN = none; updated in place). Same result as `_compress`: each job
    reserved in the future is removed and re-made at its earliest slot, in order; a job without a
    reservation gets one at its earliest slot, in its place in the order.

    A job of p units and d s reserved at ``old`` has, once its reservation is removed, a slot before
    ``old`` exactly when E < old or R < old, and the earliest such slot is min(E, R), both on the
    profile that still holds the reservation: E, the earliest slot of its shape (`_shape_start`,
    cached per shape), and R, the start of the run of segments with p units free that reaches
    ``old`` (`_run_start`; none when the segment before ``old`` lacks p units), from where the job's
    own units are free until ``old + d``. Only jobs that move change the profile (`_move`, O(S),
    and a suffix rebuild of the block summaries); the change is logged for the cache. ``bm`` holds
    at least 2 x ceil(S / BLOCK) entries. Returns the new segment count."""
    for k in range(len(order)):
        q = order[k]
        old = resv[q]
        p = procs[q]
        d = dur[q]
        if old != old:
            # not reserved yet (new this pass): reserved here, in its place in the order, as
            # batsched's compression loop does (with FCFS order new jobs are last, so it is the same)
            n = _reserve_earliest(t, f, n, bm, now, ht, ci, cf, lg, lk, meta, q, p, d, resv, total)
            continue
        if not old > now:            # due now
            continue
        i = _seg_index(t, n, old)
        if t[i] == old:
            i -= 1
        if i < 0:
            continue
        c = _shape_of(ht, ci, cf, meta, p, d, now)
        if f[i] >= p:
            s = _run_start(t, f, bm, i, p, now)
            e = _shape_start(t, f, n, bm, now, ci, cf, lg, lk, meta, c, s)
            if e < s:
                s = e
        else:
            s = _shape_start(t, f, n, bm, now, ci, cf, lg, lk, meta, c, old)
            if s == INF:
                continue
        e = old + d
        if e - s < d:
            # rounding (s < old, so never with exact arithmetic): the run reaching `old` may not
            # last d seconds in floats; the plain search on the profile without the reservation decides
            n, ok = _add(t, f, n, old, e, p, total)
            _blocks_from(f, n, bm, _seg_index(t, n, old))
            _log_change(lg, lk, meta, old, e, True)
            s = _find_run(t, f, n, bm, p, d, now, INF)
            n = _reserve_at(t, f, n, bm, s, p, d, total)
            _log_change(lg, lk, meta, s, s + d, False)
        else:
            n = _move(t, f, n, bm, s, s + d, old, e, p, wk)
            # net change: units taken over [s, min(s + d, old)), given back over [max(s + d, old), e)
            _log_change(lg, lk, meta, s, s + d if s + d < old else old, False)
            _log_change(lg, lk, meta, s + d if s + d > old else old, e, True)
        resv[q] = s
    return n


@njit(cache=True)
def _plan_pass(t, f, n, bm, now, order, procs, dur, resv, total, dirty, starts_out):
    """One conservative pass over the waiting jobs ``order`` (priority order): compress if a job
    ended (``dirty``), reserve every job without a reservation at its earliest
    slot (in order), then hand out the jobs whose reservation is due (``starts_out``, in order; their
    reservation is cleared). ``bm``: scratch for the block summaries (>= 2 x ceil(S / BLOCK)
    entries; the segment capacity is enough). Returns (new segment count, number of starts,
    earliest remaining reservation start or inf)."""
    ht, ci, cf, lg, lk, meta = _cache_new(len(order))
    return _plan_core(t, f, n, bm, now, order, procs, dur, resv, total, dirty, starts_out, ht, ci, cf, lg, lk,
                      meta, np.empty((4, 4), dtype=np.int64))


@njit(cache=True)
def _plan_core(t, f, n, bm, now, order, procs, dur, resv, total, dirty, starts_out, ht, ci, cf, lg, lk, meta, wk):
    """`_plan_pass` with its scratch (the shape cache of `_cache_new` and `_move`'s ``wk``). Every
    array is used through a borrowed view (`_borrow`: they are this call's arguments, alive until
    it returns), so the calls below cost no reference counting."""
    t, f, bm, order, procs, dur, resv = (_borrow(t), _borrow(f), _borrow(bm), _borrow(order), _borrow(procs),
                                         _borrow(dur), _borrow(resv))
    ht, ci, cf, lg, lk, meta, wk = (_borrow(ht), _borrow(ci), _borrow(cf), _borrow(lg), _borrow(lk),
                                    _borrow(meta), _borrow(wk))
    _blocks_from(f, n, bm, 0)
    if dirty:
        n = _compress_queue(t, f, n, bm, now, order, procs, dur, resv, total, ht, ci, cf, lg, lk, meta, wk)
    for k in range(len(order)):
        q = order[k]
        if resv[q] != resv[q]:
            n = _reserve_earliest(t, f, n, bm, now, ht, ci, cf, lg, lk, meta, q, procs[q], dur[q], resv, total)
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
