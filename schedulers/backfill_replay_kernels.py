"""Compiled kernels of the EASY/conservative whole-run replay (see `schedulers.backfill_replay`, the
compiled backend of `schedulers.backfill.QueueScheduler`): the whole event loop of a built-in
order x backfill policy over arrays, with numba (``cache=True``: compiled once per machine).
Imported only when a run uses the JIT fallback of the replay, so other runs never load numba.

numba's on-disk cache (the JIT path, ``HPCTWIN_AOT=0``) is keyed on the contents of this file only;
the replay inlines the conservative plan of `schedulers.profile_kernels`, so before the JIT kernels
load, `twin.jit_cache` drops this set's cached code when any of its sources changed (the sources of
``schedulers.backfill_replay.KERNELS``); the ahead-of-time build (`twin.aot`) keys on them too."""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .profile_kernels import _add, _compact, _plan_pass, _seg_index, _units_due

INF = math.inf


# ---------------------------------------------------------------------------- compiled pieces
@njit(cache=True)
def _heap_push(ht, hj, size, t, j):
    i = size
    ht[i] = t
    hj[i] = j
    while i > 0:
        par = (i - 1) >> 1
        if ht[par] < ht[i] or (ht[par] == ht[i] and hj[par] <= hj[i]):
            break
        ht[par], ht[i] = ht[i], ht[par]
        hj[par], hj[i] = hj[i], hj[par]
        i = par
    return size + 1


@njit(cache=True)
def _heap_pop(ht, hj, size):
    size -= 1
    ht[0] = ht[size]
    hj[0] = hj[size]
    i = 0
    while True:
        a = 2 * i + 1
        if a >= size:
            break
        b = a + 1
        c = a
        if b < size and (ht[b] < ht[a] or (ht[b] == ht[a] and hj[b] < hj[a])):
            c = b
        if ht[i] < ht[c] or (ht[i] == ht[c] and hj[i] <= hj[c]):
            break
        ht[c], ht[i] = ht[i], ht[c]
        hj[c], hj[i] = hj[i], hj[c]
        i = c
    return size


@njit(cache=True)
def _run_insert(re_, rp, rj, m, e, p, j):
    """Insert (expected end e, units p, job j) into the running list sorted by end."""
    lo, hi = 0, m
    while lo < hi:
        mid = (lo + hi) >> 1
        if re_[mid] <= e:
            lo = mid + 1
        else:
            hi = mid
    for k in range(m, lo, -1):
        re_[k] = re_[k - 1]
        rp[k] = rp[k - 1]
        rj[k] = rj[k - 1]
    re_[lo] = e
    rp[lo] = p
    rj[lo] = j
    return m + 1


@njit(cache=True)
def _run_remove(re_, rp, rj, m, e, j):
    lo, hi = 0, m
    while lo < hi:
        mid = (lo + hi) >> 1
        if re_[mid] < e:
            lo = mid + 1
        else:
            hi = mid
    while rj[lo] != j:
        lo += 1
    for k in range(lo, m - 1):
        re_[k] = re_[k + 1]
        rp[k] = rp[k + 1]
        rj[k] = rj[k + 1]
    return m - 1


@njit(cache=True)
def _shadow(now, free, need, re_, rp, m):
    """EASY's shadow time and extra units (as `schedulers.profile.shadow_from_sorted`)."""
    if free >= need:
        return now, free - need
    avail = free
    t = -1.0
    found = False
    for i in range(m):
        e = re_[i]
        if e < now:
            e = now
        if found and e != t:
            break
        avail += rp[i]
        if not found and avail >= need:
            t = e
            found = True
    if not found:
        return INF, 0
    return t, avail - need


@njit(cache=True)
def _first_fit(free_mask, bfree, p, units, off):
    """The p lowest-numbered free units into units[off:off+p]; marks them busy. ``bfree[b]`` counts
    the free units of block b (units 64b..64b+63), so full blocks are skipped."""
    k = 0
    b = 0
    while k < p:
        if bfree[b] == 0:
            b += 1
            continue
        u = b << 6
        hi = min(u + 64, len(free_mask))
        while u < hi and k < p:
            if free_mask[u]:
                free_mask[u] = False
                bfree[b] -= 1
                units[off + k] = u
                k += 1
            u += 1
        b += 1


@njit(cache=True)
def _priority(ocode, now, queue, qn, submit, procs, est, out):
    """The waiting jobs queue[:qn] (sorted by rank) in priority order, into out[:qn], for the
    time-dependent orders (wfp3, unicep; the static ones use the rank-sorted queue itself)."""
    key = np.empty(qn, dtype=np.float64)
    for k in range(qn):
        j = queue[k]
        wait = now - submit[j]
        if ocode == 4:
            key[k] = -(np.power(wait / est[j], 3.0) * procs[j])
        else:
            key[k] = -(wait / (np.log2(max(procs[j], 2) * 1.0) * est[j]))
    idx = np.argsort(key, kind="mergesort")
    for k in range(qn):
        out[k] = queue[idx[k]]


@njit(cache=True)
def _advance(t, f, n, now):
    """Move a profile's origin to ``now`` (as `AvailabilityProfile.advance`). Returns new n."""
    if now <= t[0]:
        return n
    i = _seg_index(t, n, now)
    if i > 0:
        for k in range(i, n):
            t[k - i] = t[k]
            f[k - i] = f[k]
        n -= i
    t[0] = now
    if n > 64:
        n = _compact(t, f, n)
    return n


@njit(cache=True)
def _from_running(t, f, now, total, re_, rp, m):
    """Profile of the running jobs (sorted expected ends, clamped to now), as
    `AvailabilityProfile.from_running`. Returns the segment count."""
    busy = 0
    for i in range(m):
        busy += rp[i]
    cur = total - busy
    t[0] = now
    f[0] = cur
    ns = 1
    for i in range(m):
        e = re_[i] if re_[i] > now else now
        cur += rp[i]
        if e == t[ns - 1]:
            f[ns - 1] = cur
        else:
            t[ns] = e
            f[ns] = cur
            ns += 1
    return ns


@njit(cache=True)
def _grow_f(a, need):
    b = np.empty(max(need, 2 * len(a)), dtype=a.dtype)
    b[: len(a)] = a
    return b


@njit(cache=True)
def _start(j, now, st, procs, est, runtime, kill, start, exp_end, units, off, free_mask, bfree, ht, hj, re_, rp, rj):
    """Start job j now: first-fit units, running list, finish event. ``st`` = [free, heap size, running]."""
    p = procs[j]
    _first_fit(free_mask, bfree, p, units, off[j])
    st[0] -= p
    start[j] = now
    e = now + est[j]
    exp_end[j] = e
    st[2] = _run_insert(re_, rp, rj, st[2], e, p, j)
    t_work = now + runtime[j]
    t_kill = now + kill[j]
    st[1] = _heap_push(ht, hj, st[1], t_kill if t_kill < t_work else t_work, j)


@njit(cache=True)
def _finish(j, now, st, procs, runtime, kill, start, end, killed, exp_end, units, off, free_mask, bfree, re_, rp, rj):
    """Job j's finish event at ``now``: end time, killed flag (hit its kill limit with work left,
    more than 1e-9 x max(1 s, runtime)), its units freed, off the running list."""
    end[j] = now
    if now == start[j] + kill[j] and runtime[j] - (now - start[j]) > 1e-9 * max(1.0, runtime[j]):
        killed[j] = True
    st[0] += procs[j]
    for k in range(off[j], off[j + 1]):
        free_mask[units[k]] = True
        bfree[units[k] >> 6] += 1
    st[2] = _run_remove(re_, rp, rj, st[2], exp_end[j], j)


@njit(cache=True)
def _release_early(now, e, p, pt, pf, nseg, total):
    """Conservative: a job expected to hold p units until ``e`` ended at ``now`` (< e): give the
    units back in the plan's profile. Returns (pt, pf, new segment count)."""
    nseg = _advance(pt, pf, nseg, now)
    if nseg + 2 > len(pt):
        pt = _grow_f(pt, nseg + 2)
        pf = _grow_f(pf, nseg + 2)
    nseg, ok = _add(pt, pf, nseg, now, e, p, total)
    return pt, pf, nseg


@njit(cache=True)
def _submit(j, queue, qn, rank):
    """Insert job j into the waiting jobs queue[:qn] (sorted by rank). Returns the new length."""
    r = rank[j]
    lo, hi = 0, qn
    while lo < hi:
        mid = (lo + hi) >> 1
        if rank[queue[mid]] < r:
            lo = mid + 1
        else:
            hi = mid
    for k in range(qn, lo, -1):
        queue[k] = queue[k - 1]
    queue[lo] = j
    return qn + 1


@njit(cache=True)
def _drop_started(queue, qn, started):
    """Remove the started jobs from queue[:qn] (order kept). Returns the new length."""
    w = 0
    for k in range(qn):
        j = queue[k]
        if not started[j]:
            queue[w] = j
            w += 1
    return w


@njit(cache=True)
def _record(ch_t, ch_b, ch_q, nch, now, busy, qn):
    """Append (time, busy units, queue length) to the piecewise-constant series (grown as needed).
    Returns (ch_t, ch_b, ch_q, new length)."""
    if nch == len(ch_t):
        ch_t = _grow_f(ch_t, nch + 1)
        ch_b = _grow_f(ch_b, nch + 1)
        ch_q = _grow_f(ch_q, nch + 1)
    ch_t[nch] = now
    ch_b[nch] = busy
    ch_q[nch] = qn
    return ch_t, ch_b, ch_q, nch + 1


@njit(cache=True)
def _replay(submit, procs, est, runtime, kill, total, ocode, bcode, rank):
    """The event loop (see `schedulers.backfill_replay.replay`): at each instant all finishes, then all
    submissions, then timers, then one pass. Returns the result arrays and a status (1 = deadlock)."""
    n = len(submit)
    nan = np.nan
    start = np.full(n, nan)
    end = np.full(n, nan)
    killed = np.zeros(n, dtype=np.bool_)
    exp_end = np.full(n, nan)           # start + estimate (the running list's key)
    off = np.zeros(n + 1, dtype=np.int64)
    for j in range(n):
        off[j + 1] = off[j] + procs[j]
    units = np.full(off[n], -1, dtype=np.int32)   # unit ids held, by job (4 B each)
    free_mask = np.ones(total, dtype=np.bool_)
    bfree = np.zeros((total + 63) >> 6, dtype=np.int64)
    for u in range(total):
        bfree[u >> 6] += 1
    st = np.zeros(3, dtype=np.int64)    # free units, heap size, running jobs
    st[0] = total
    ht = np.empty(n + 1, dtype=np.float64)
    hj = np.empty(n + 1, dtype=np.int64)
    re_ = np.empty(n + 1, dtype=np.float64)
    rp = np.empty(n + 1, dtype=np.int64)
    rj = np.empty(n + 1, dtype=np.int64)
    queue = np.empty(n + 1, dtype=np.int64)     # waiting jobs sorted by rank
    order = np.empty(n + 1, dtype=np.int64)
    starts = np.empty(n + 1, dtype=np.int64)
    started = np.zeros(n, dtype=np.bool_)
    ch_t = np.empty(2 * n + 16, dtype=np.float64)
    ch_b = np.empty(2 * n + 16, dtype=np.int64)
    ch_q = np.empty(2 * n + 16, dtype=np.int64)
    # conservative plan (as schedulers.profile.ReservationPlan)
    pt = np.empty(64, dtype=np.float64)
    pf = np.empty(64, dtype=np.int64)
    pm = np.empty(64, dtype=np.int64)
    resv = np.full(n, nan)
    run_end = np.full(n, nan)
    nseg = qn = nch = ptr = passes = events = 0
    have_plan = dirty = False
    next_start = wake = INF
    idle_len = -1       # queue length after a pass that started nothing (fcfs + EASY shortcut)
    while True:
        now = min(ht[0] if st[1] else INF, submit[ptr] if ptr < n else INF, wake)
        if now == INF:
            if qn:
                return start, end, killed, units, ch_t, ch_b, ch_q, nch, passes, events, 1
            break
        events += 1
        changed = False
        while st[1] and ht[0] <= now:                   # finishes
            j = hj[0]
            st[1] = _heap_pop(ht, hj, st[1])
            _finish(j, now, st, procs, runtime, kill, start, end, killed, exp_end, units, off, free_mask, bfree,
                    re_, rp, rj)
            changed = True
            idle_len = -1
            if bcode == 2:
                e = run_end[j]
                run_end[j] = nan
                if e == e and have_plan:
                    if e > now:
                        pt, pf, nseg = _release_early(now, e, procs[j], pt, pf, nseg, total)
                    dirty = True                        # any end compresses (as pyss and batsched)
        while ptr < n and submit[ptr] <= now:           # submissions
            qn = _submit(ptr, queue, qn, rank)
            ptr += 1
            changed = True
        if wake <= now:                                 # timers
            wake = INF
            changed = True
        if changed and qn:                              # one pass
            passes += 1
            if ocode < 4:                               # static orders: the queue is kept in rank order
                prio = queue
            else:
                _priority(ocode, now, queue, qn, submit, procs, est, order)
                prio = order
            if bcode == 2:
                nseg, pt, pf, pm, have_plan, next_start, ns, dirty = _conservative(
                    now, st, total, prio[:qn], procs, est, runtime, kill, start, exp_end, units, off, free_mask,
                    bfree, ht, hj, re_, rp, rj, pt, pf, pm, nseg, have_plan, dirty, resv, run_end, starts, started)
            else:
                skip = -1
                if ocode == 0 and bcode == 1 and idle_len >= 0 and (st[2] == 0 or re_[0] >= now):
                    skip = idle_len
                ns = 0
                if skip != qn:
                    ns = _queue_pass(now, st, bcode, prio, qn, procs, est, runtime, kill, start, exp_end, units,
                                     off, free_mask, bfree, ht, hj, re_, rp, rj, started, skip)
                idle_len = qn if ns == 0 else -1
            if ns:
                qn = _drop_started(queue, qn, started)
        ch_t, ch_b, ch_q, nch = _record(ch_t, ch_b, ch_q, nch, now, total - st[0], qn)
        if bcode == 2 and have_plan and now < next_start < INF:
            wake = next_start if (ptr < n or qn or st[1]) else INF
    return start, end, killed, units, ch_t, ch_b, ch_q, nch, passes, events, 0


@njit(cache=True)
def _queue_pass(now, st, bcode, order, qn, procs, est, runtime, kill, start, exp_end, units, off, free_mask,
                bfree, ht, hj, re_, rp, rj, started, skip):
    """One pass of order + none/EASY (as `QueueScheduler.schedule`); starts are applied at once, the
    in-order ones before the shadow time is computed (it counts them), as the engine would.
    ``skip`` >= 0: nothing started or ended since the last pass, which started nothing (fcfs order):
    only the jobs from position ``skip`` on (the new arrivals) are examined, as the policy does."""
    if st[0] <= 0:
        return 0
    ns = 0
    k = 0
    if skip < 0:
        while k < qn and procs[order[k]] <= st[0]:
            j = order[k]
            _start(j, now, st, procs, est, runtime, kill, start, exp_end, units, off, free_mask, bfree, ht, hj,
                   re_, rp, rj)
            started[j] = True
            ns += 1
            k += 1
        if k == qn or bcode == 0 or st[0] <= 0:
            return ns
    first = k + 1 if skip < 0 else skip
    free = st[0]
    any_fit = False
    for i in range(first, qn):
        if procs[order[i]] <= free:
            any_fit = True
            break
    if not any_fit:
        return ns
    shadow, extra = _shadow(now, free, procs[order[k]], re_, rp, st[2])
    for i in range(first, qn):
        j = order[i]
        p = procs[j]
        if p > st[0]:
            continue
        before = now + est[j] <= shadow
        if before or p <= extra:
            _start(j, now, st, procs, est, runtime, kill, start, exp_end, units, off, free_mask, bfree, ht, hj,
                   re_, rp, rj)
            started[j] = True
            ns += 1
            if not before:
                extra -= p
            if st[0] <= 0:
                break
    return ns


@njit(cache=True)
def _conservative(now, st, total, order, procs, est, runtime, kill, start, exp_end, units, off, free_mask,
                  bfree, ht, hj, re_, rp, rj, pt, pf, pm, nseg, have_plan, dirty, resv, run_end, starts, started):
    """One conservative pass (as `QueueScheduler._conservative` with `ReservationPlan`)."""
    qn = len(order)
    rebuild = not have_plan
    if have_plan:
        nseg = _advance(pt, pf, nseg, now)
        rebuild = pf[0] + _units_due(order, procs, resv, now) != st[0]
    if rebuild:
        m = st[2]
        if 2 * m + 64 > len(pt):
            pt = _grow_f(pt, 2 * m + 64)
            pf = _grow_f(pf, 2 * m + 64)
        nseg = _from_running(pt, pf, now, total, re_, rp, m)
        for i in range(m):
            run_end[rj[i]] = re_[i] if re_[i] > now else now
        for k in range(qn):
            resv[order[k]] = np.nan
    need = nseg + 6 * qn + 8
    if need > len(pt):
        pt = _grow_f(pt, need)
        pf = _grow_f(pf, need)
    if len(pm) < len(pt):
        pm = np.empty(len(pt), dtype=np.int64)
    nseg, ns, next_start = _plan_pass(pt, pf, nseg, pm, now, order, procs, est, resv, total,
                                      dirty and not rebuild, starts)
    m = 0
    redirty = False
    for i in range(ns):
        j = starts[i]
        if procs[j] > st[0]:
            # a job ran past its estimate: the plan counted its units free from now; this job gives
            # its reservation back and is planned again next pass (as `QueueScheduler._conservative`)
            if nseg + 2 > len(pt):
                pt = _grow_f(pt, nseg + 2)
                pf = _grow_f(pf, nseg + 2)
            nseg, ok = _add(pt, pf, nseg, now, now + est[j], procs[j], total)
            redirty = True
            continue
        _start(j, now, st, procs, est, runtime, kill, start, exp_end, units, off, free_mask, bfree, ht, hj, re_, rp, rj)
        run_end[j] = now + est[j]
        started[j] = True
        m += 1
    return nseg, pt, pf, pm, True, next_start, m, redirty
