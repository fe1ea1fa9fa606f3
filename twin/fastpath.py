"""Compiled fast path: the whole replay of a built-in order x backfill policy in one numba function.

When no hook, placer or model needs Python at every event (the plain `QueueScheduler` of
`schedulers.backfill`: orders fcfs/sjf/ljf/saf/wfp3/unicep x backfill none/easy/conservative,
first-fit placement, no power/network/failure/iteration model, no wrapper), the general engine
(`twin.simulation`) spends nearly all its time on Python overhead per event. This module replays
the same semantics over arrays and gives the same schedule, byte for byte (tested against the
general engine in ``tests/test_fastpath.py``):

* events at one instant: all finishes, then all submissions, then timers, then one pass
  (DESIGN.md section 5); a job ends at ``min(start + runtime, start + kill_limit)`` and is
  killed when it hits the limit with work left (more than 1e-9 x max(1 s, runtime));
* queue orders as `schedulers.ordering` (ties by arrival); EASY and conservative backfilling as
  `schedulers.backfill` (conservative reuses the compiled plan of `schedulers.profile_kernels`:
  same reservations, same compression, same re-plan when the profile disagrees with the machine);
* first-fit placement (the lowest-numbered free units), as `twin.cluster.Cluster.first_free`.

Compilation is cached on disk (``cache=True``): only the first run on a machine pays it (about
10-20 s on the reference machine for all kernels; later imports load in well under a second).

Entry point: `replay` (prepared arrays in, result arrays out); `eligible` says when a run may use it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from hpctwin.schedulers.profile_kernels import _add, _compact, _plan_pass, _seg_index, _units_due

ORDER_CODES = {"fcfs": 0, "sjf": 1, "ljf": 2, "saf": 3, "wfp3": 4, "unicep": 5}
BACKFILL_CODES = {"none": 0, "easy": 1, "conservative": 2}
INF = math.inf


class FastPathError(RuntimeError):
    """The compiled replay cannot go on (a deadlock: jobs wait on an idle machine)."""


@dataclass
class FastResult:
    """Outcome of a compiled replay, with the fields of the general engine's result that a run
    without models uses (per-job arrays indexed like the input, seconds; NaN for jobs never run)."""

    start: np.ndarray
    end: np.ndarray
    killed: np.ndarray
    nodes: list
    change_t: np.ndarray
    change_busy: np.ndarray
    change_queue: np.ndarray
    passes: int = 0
    events: int = 0
    models: list = field(default_factory=list)
    failed: np.ndarray | None = None
    interruptions: np.ndarray | None = None
    work_done: np.ndarray | None = None
    held: np.ndarray | None = None
    queued: np.ndarray | None = None
    segments: list = field(default_factory=list)
    last_start: np.ndarray | None = None
    change_down: np.ndarray | None = None


def eligible(scheduler, placer=None, models=()) -> bool:
    """True when `replay` gives the general engine's schedule for this run: the scheduler is exactly
    a built-in `QueueScheduler` (not a subclass or wrapper), with no placer and no model."""
    from hpctwin.schedulers.backfill import QueueScheduler  # noqa: PLC0415
    return (type(scheduler) is QueueScheduler and placer is None and not list(models)
            and scheduler.order_name in ORDER_CODES and scheduler.backfill in BACKFILL_CODES
            and getattr(scheduler, "first_reservation", None) is None)


def replay(submit: np.ndarray, procs: np.ndarray, estimate: np.ndarray, runtime: np.ndarray,
           kill_limit: np.ndarray, total: int, order: str = "fcfs", backfill: str = "easy") -> FastResult:
    """Replay jobs sorted by (submit, job id) on ``total`` units with a built-in policy.

    ``submit``/``estimate``/``runtime``/``kill_limit`` in seconds (kill limit inf = never killed),
    ``procs`` in units (1 <= procs <= total). Returns start/end (s), killed, the units each job held
    as range text (``"0-3,8"``) and the piecewise-constant busy-units and queue-length series.
    """
    n = len(submit)
    submit = np.ascontiguousarray(submit, dtype=np.float64)
    procs = np.ascontiguousarray(procs, dtype=np.int64)
    est = np.ascontiguousarray(estimate, dtype=np.float64)
    runtime = np.ascontiguousarray(runtime, dtype=np.float64)
    kill = np.ascontiguousarray(kill_limit, dtype=np.float64)
    if n and np.any(np.diff(submit) < 0):
        raise ValueError("jobs must be sorted by submit time")
    if n and (procs.min() < 1 or procs.max() > total):
        bad = int(np.flatnonzero((procs < 1) | (procs > total))[0])
        raise ValueError(f"job index {bad} needs {int(procs[bad])} units; the machine has {total}")
    try:
        ocode, bcode = ORDER_CODES[order], BACKFILL_CODES[backfill]
    except KeyError:
        raise ValueError(f"no compiled path for order {order!r} x backfill {backfill!r}") from None
    rank = _static_rank(ocode, est, procs)
    out = _replay(submit, procs, est, runtime, kill, int(total), ocode, bcode, rank)
    start, end, killed, units, ch_t, ch_busy, ch_q, n_ch, passes, events, status = out
    if status == 1:
        raise FastPathError("deadlock: jobs wait on an idle machine and no event is pending")
    if status == 2:
        raise FastPathError(f"the {order}+{backfill} plan started a job on units still held by a job "
                            "past its estimate (the general engine refuses the same start)")
    nodes = _range_texts(units, procs, start)
    ran = ~np.isnan(start)
    return FastResult(start=start, end=end, killed=killed, nodes=nodes, change_t=ch_t[:n_ch].copy(),
                      change_busy=ch_busy[:n_ch].copy(), change_queue=ch_q[:n_ch].copy(),
                      passes=int(passes), events=int(events), failed=np.zeros(n, dtype=bool),
                      interruptions=np.zeros(n, dtype=np.int64), held=np.where(ran, end - start, 0.0),
                      work_done=np.where(ran, np.minimum(runtime, end - start), 0.0),
                      queued=np.where(ran, start - submit, np.nan), last_start=start)


def _static_rank(ocode: int, est: np.ndarray, procs: np.ndarray) -> np.ndarray:
    """Priority rank of every job for the orders that do not depend on time (ties by index, as
    `schedulers.ordering._by_key`); the index itself for fcfs and the time-dependent orders."""
    n = len(est)
    idx = np.arange(n, dtype=np.int64)
    if ocode in (0, 4, 5):
        return idx
    key = {1: est, 2: -est, 3: est * procs}[ocode]
    rank = np.empty(n, dtype=np.int64)
    rank[np.lexsort((idx, key))] = idx
    return rank


def _range_texts(units: np.ndarray, procs: np.ndarray, start: np.ndarray) -> list:
    """Range text of each job's units (as `twin.ranges.ranges_of_sorted`; "" for jobs never run)."""
    lo, hi, first = _runs(units, procs)
    lo_l, hi_l, first_l = lo.tolist(), hi.tolist(), first.tolist()
    ran = (~np.isnan(start)).tolist()
    out = []
    for j in range(len(procs)):
        if not ran[j]:
            out.append("")
            continue
        a, b = first_l[j], first_l[j + 1]
        if b - a == 1:
            x, y = lo_l[a], hi_l[a]
            out.append(str(x) if x == y else f"{x}-{y}")
        else:
            out.append(",".join(str(lo_l[k]) if lo_l[k] == hi_l[k] else f"{lo_l[k]}-{hi_l[k]}" for k in range(a, b)))
    return out


@njit(cache=True)
def _runs(units, procs):
    """Consecutive runs (lo, hi) of each job's sorted units; job j's runs are first[j]:first[j+1]."""
    n = len(procs)
    lo = np.empty(len(units), dtype=np.int64)
    hi = np.empty(len(units), dtype=np.int64)
    first = np.zeros(n + 1, dtype=np.int64)
    r = 0
    off = 0
    for j in range(n):
        first[j] = r
        p = procs[j]
        if p > 0 and units[off] >= 0:
            lo[r] = units[off]
            hi[r] = units[off]
            for k in range(off + 1, off + p):
                u = units[k]
                if u == hi[r] + 1:
                    hi[r] = u
                else:
                    r += 1
                    lo[r] = u
                    hi[r] = u
            r += 1
        off += p
    first[n] = r
    return lo[:r], hi[:r], first


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
def _first_fit(free_mask, p, units, off):
    """The p lowest-numbered free units into units[off:off+p]; marks them busy."""
    k = 0
    u = 0
    while k < p:
        if free_mask[u]:
            free_mask[u] = False
            units[off + k] = u
            k += 1
        u += 1


@njit(cache=True)
def _priority(ocode, now, queue, qn, submit, procs, est, out):
    """The waiting jobs queue[:qn] (sorted by rank) in priority order, into out[:qn]."""
    if ocode < 4:
        for k in range(qn):
            out[k] = queue[k]
        return
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
def _start(j, now, st, procs, est, runtime, kill, start, exp_end, units, off, free_mask, ht, hj, re_, rp, rj):
    """Start job j now: first-fit units, running list, finish event. ``st`` = [free, heap size, running]."""
    p = procs[j]
    _first_fit(free_mask, p, units, off[j])
    st[0] -= p
    start[j] = now
    e = now + est[j]
    exp_end[j] = e
    st[2] = _run_insert(re_, rp, rj, st[2], e, p, j)
    t_work = now + runtime[j]
    t_kill = now + kill[j]
    st[1] = _heap_push(ht, hj, st[1], t_kill if t_kill < t_work else t_work, j)


@njit(cache=True)
def _replay(submit, procs, est, runtime, kill, total, ocode, bcode, rank):
    n = len(submit)
    nan = np.nan
    start = np.full(n, nan)
    end = np.full(n, nan)
    killed = np.zeros(n, dtype=np.bool_)
    exp_end = np.full(n, nan)           # start + estimate (the running list's key)
    off = np.zeros(n + 1, dtype=np.int64)
    for j in range(n):
        off[j + 1] = off[j] + procs[j]
    units = np.full(off[n], -1, dtype=np.int64)
    free_mask = np.ones(total, dtype=np.bool_)
    st = np.zeros(4, dtype=np.int64)    # free units, heap size, running jobs, refused start + 1
    st[0] = total
    ht = np.empty(n + 1, dtype=np.float64)
    hj = np.empty(n + 1, dtype=np.int64)
    re_ = np.empty(n + 1, dtype=np.float64)
    rp = np.empty(n + 1, dtype=np.int64)
    rj = np.empty(n + 1, dtype=np.int64)
    queue = np.empty(n + 1, dtype=np.int64)     # waiting jobs sorted by rank
    qn = 0
    order = np.empty(n + 1, dtype=np.int64)
    starts = np.empty(n + 1, dtype=np.int64)
    started = np.zeros(n, dtype=np.bool_)
    cap = 2 * n + 16
    ch_t = np.empty(cap, dtype=np.float64)
    ch_b = np.empty(cap, dtype=np.int64)
    ch_q = np.empty(cap, dtype=np.int64)
    nch = 0
    # conservative plan (as schedulers.profile.ReservationPlan)
    pt = np.empty(64, dtype=np.float64)
    pf = np.empty(64, dtype=np.int64)
    pm = np.empty(64, dtype=np.int64)
    nseg = 0
    have_plan = False
    dirty = False
    next_start = INF
    resv = np.full(n, nan)
    run_end = np.full(n, nan)
    ptr = 0
    passes = 0
    events = 0
    wake = INF
    while True:
        t_fin = ht[0] if st[1] else INF
        t_sub = submit[ptr] if ptr < n else INF
        now = min(t_fin, t_sub, wake)
        if now == INF:
            if qn:
                return start, end, killed, units, ch_t, ch_b, ch_q, nch, passes, events, 1
            break
        events += 1
        changed = False
        # ---- finishes
        while st[1] and ht[0] <= now:
            j = hj[0]
            st[1] = _heap_pop(ht, hj, st[1])
            end[j] = now
            if now == start[j] + kill[j] and runtime[j] - (now - start[j]) > 1e-9 * max(1.0, runtime[j]):
                killed[j] = True
            p = procs[j]
            st[0] += p
            for k in range(off[j], off[j + 1]):
                free_mask[units[k]] = True
            st[2] = _run_remove(re_, rp, rj, st[2], exp_end[j], j)
            changed = True
            if bcode == 2:
                e = run_end[j]
                run_end[j] = nan
                if e == e and e > now and have_plan:
                    nseg = _advance(pt, pf, nseg, now)
                    if nseg + 2 > len(pt):
                        pt = _grow_f(pt, nseg + 2)
                        pf = _grow_f(pf, nseg + 2)
                    nseg, ok = _add(pt, pf, nseg, now, e, p, total)
                    dirty = True
        # ---- submissions
        while ptr < n and submit[ptr] <= now:
            r = rank[ptr]
            lo, hi = 0, qn
            while lo < hi:
                mid = (lo + hi) >> 1
                if rank[queue[mid]] < r:
                    lo = mid + 1
                else:
                    hi = mid
            for k in range(qn, lo, -1):
                queue[k] = queue[k - 1]
            queue[lo] = ptr
            qn += 1
            ptr += 1
            changed = True
        # ---- timers
        if wake <= now:
            wake = INF
            changed = True
        # ---- one pass
        if changed and qn:
            passes += 1
            _priority(ocode, now, queue, qn, submit, procs, est, order)
            if bcode == 2:
                nseg, pt, pf, pm, have_plan, next_start, ns = _conservative(
                    now, st, total, order[:qn], procs, est, runtime, kill, start, exp_end, units, off, free_mask,
                    ht, hj, re_, rp, rj, pt, pf, pm, nseg, have_plan, dirty, resv, run_end, starts, started)
                dirty = False
                if st[3]:
                    return start, end, killed, units, ch_t, ch_b, ch_q, nch, passes, events, 2
            else:
                ns = _queue_pass(now, st, bcode, order, qn, procs, est, runtime, kill, start, exp_end, units, off,
                                 free_mask, ht, hj, re_, rp, rj, started)
            if ns:
                w = 0
                for k in range(qn):
                    j = queue[k]
                    if not started[j]:
                        queue[w] = j
                        w += 1
                qn = w
        # ---- record the piecewise-constant state
        if nch == len(ch_t):
            ch_t = _grow_f(ch_t, nch + 1)
            ch_b = _grow_f(ch_b, nch + 1)
            ch_q = _grow_f(ch_q, nch + 1)
        ch_t[nch] = now
        ch_b[nch] = total - st[0]
        ch_q[nch] = qn
        nch += 1
        if bcode == 2 and have_plan and now < next_start < INF:
            wake = next_start if (ptr < n or qn or st[1]) else INF
    return start, end, killed, units, ch_t, ch_b, ch_q, nch, passes, events, 0


@njit(cache=True)
def _queue_pass(now, st, bcode, order, qn, procs, est, runtime, kill, start, exp_end, units, off, free_mask,
                ht, hj, re_, rp, rj, started):
    """One pass of order + none/EASY (as `QueueScheduler.schedule`); starts are applied at once, the
    in-order ones before the shadow time is computed (it counts them), as the engine would."""
    if st[0] <= 0:
        return 0
    ns = 0
    k = 0
    while k < qn and procs[order[k]] <= st[0]:
        j = order[k]
        _start(j, now, st, procs, est, runtime, kill, start, exp_end, units, off, free_mask, ht, hj, re_, rp, rj)
        started[j] = True
        ns += 1
        k += 1
    if k == qn or bcode == 0 or st[0] <= 0:
        return ns
    free = st[0]
    any_fit = False
    for i in range(k + 1, qn):
        if procs[order[i]] <= free:
            any_fit = True
            break
    if not any_fit:
        return ns
    shadow, extra = _shadow(now, free, procs[order[k]], re_, rp, st[2])
    for i in range(k + 1, qn):
        j = order[i]
        p = procs[j]
        if p > st[0]:
            continue
        before = now + est[j] <= shadow
        if before or p <= extra:
            _start(j, now, st, procs, est, runtime, kill, start, exp_end, units, off, free_mask, ht, hj, re_, rp, rj)
            started[j] = True
            ns += 1
            if not before:
                extra -= p
            if st[0] <= 0:
                break
    return ns


@njit(cache=True)
def _conservative(now, st, total, order, procs, est, runtime, kill, start, exp_end, units, off, free_mask,
                  ht, hj, re_, rp, rj, pt, pf, pm, nseg, have_plan, dirty, resv, run_end, starts, started):
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
    for i in range(ns):
        j = starts[i]
        if procs[j] > st[0]:
            # a job ran past its estimate: the plan counted its units free from now (the general
            # engine refuses the same start)
            st[3] = j + 1
            return nseg, pt, pf, pm, True, next_start, i
        _start(j, now, st, procs, est, runtime, kill, start, exp_end, units, off, free_mask, ht, hj, re_, rp, rj)
        run_end[j] = now + est[j]
        started[j] = True
    return nseg, pt, pf, pm, True, next_start, ns
