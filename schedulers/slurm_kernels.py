"""Compiled backfill cycle of the Slurm-like policy under ``select/linear`` (issue 17 item 3).

One call of `bf_cycle_linear` is one ``_attempt_backfill`` cycle exactly as the Python cycle in
`schedulers.slurm.SlurmScheduler._backfill` computes it (same decisions, tested on whole-log
segments), with node sets as rows of ``uint64`` words (bit i of word w = node 64 w + i) instead
of Python ints, and ``_job_test`` / ``_will_run_test`` of `schedulers.slurm_select` ported to
loops over those words. Compiled with numba (``cache=True``: only the first run on a machine pays
the compilation, a few seconds).

Not in the kernel (the Python cycle runs instead): QOS per-user limits, ``bf_max_job_part``,
``bf_max_job_user``, and the cons_tres/cons_res node choice.
"""
from __future__ import annotations

import numpy as np
from numba import njit

INF = np.inf
_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)


@njit(cache=True, inline="always")
def _pc64(x):
    x = x - ((x >> np.uint64(1)) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return (x * _H01) >> np.uint64(56)


@njit(cache=True, inline="always")
def _ctz(x):
    """Trailing zeros of a non-zero uint64."""
    return np.int64(_pc64((x & (~x + np.uint64(1))) - np.uint64(1)))


@njit(cache=True)
def _count_and(a, b):
    n = 0
    for w in range(a.shape[0]):
        n += _pc64(a[w] & b[w])
    return n


@njit(cache=True)
def _count(a):
    n = 0
    for w in range(a.shape[0]):
        n += _pc64(a[w])
    return n


@njit(cache=True)
def _any_and(a, b):
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
def job_test(cand, need, nn, out, rs, rl):
    """``_job_test`` (select_linear.c) on the node set ``cand``: writes the chosen nodes to
    ``out``; ``rs``/``rl`` are scratch arrays (run starts and lengths, size >= nn)."""
    W = out.shape[0]
    for w in range(W):
        out[w] = np.uint64(0)
    # runs of consecutive set bits, word by word (a run may continue into the next word)
    nr = 0
    prev_end = -2
    one = np.uint64(1)
    for w in range(W):
        x = cand[w]
        while x:
            b = _ctz(x)
            y = x >> np.uint64(b)
            ny = ~y
            ln = 64 if ny == 0 else _ctz(ny)
            start = w * 64 + b
            if start == prev_end:
                rl[nr - 1] += ln
            else:
                rs[nr] = start
                rl[nr] = ln
                nr += 1
            prev_end = start + ln
            if ln == 64:
                x = np.uint64(0)
            else:
                x &= ~(((one << np.uint64(ln)) - one) << np.uint64(b))
    rem = need
    while rem > 0:
        best = -1
        best_len = 0
        best_suff = False
        for k in range(nr):
            ln = rl[k]
            if ln == 0:
                continue
            suff = ln >= rem
            if (best < 0 or (suff and not best_suff) or (suff and ln < best_len)
                    or ((not suff) and ln > best_len)):
                best = k
                best_len = ln
                best_suff = suff
        if best < 0:
            return False
        take = min(rl[best], rem)
        _set_range(out, rs[best], rs[best] + take)
        rem -= take
        rl[best] = 0
    return True


@njit(cache=True)
def _first(avail, need, free, R):
    """First removal index after which ``need`` nodes of ``avail`` are free (R if none)."""
    lo, hi = 0, R
    while lo < hi:
        mid = (lo + hi) // 2
        if _count_and(avail, free[mid]) >= need:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True)
def _bisect_right(a, n, x):
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
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _add_resv(st, en, nodes, ns_b, ns_av, nb, begin0, res, window_end):
    """Backfill map reservation of ``nodes`` over [st, en) (``_add_reservation``); returns nb."""
    if st < begin0:
        st = begin0
    if en < st + res:
        en = st + res
    if st >= window_end:
        return nb
    if en > window_end:
        en = window_end
    W = nodes.shape[0]
    for t in (st, en):
        if t >= window_end:
            continue
        i = _bisect_left(ns_b, nb, t)
        if i < nb and ns_b[i] == t:
            continue
        for q in range(nb, i, -1):
            ns_b[q] = ns_b[q - 1]
            for w in range(W):
                ns_av[q, w] = ns_av[q - 1, w]
        ns_b[i] = t
        for w in range(W):
            ns_av[i, w] = ns_av[i - 1, w]
        nb += 1
    i0 = _bisect_left(ns_b, nb, st)
    i1 = _bisect_left(ns_b, nb, en)
    for i in range(i0, i1):
        for w in range(W):
            ns_av[i, w] &= ~nodes[w]
    return nb


@njit(cache=True)
def _run_start(end, jid, mask, idle, kend, kid, free, R):
    """`RunningSet.start`: a job starting now on ``mask``; returns the new R."""
    W = mask.shape[0]
    m = 0
    while m < R and (kend[m] < end or (kend[m] == end and kid[m] < jid)):
        m += 1
    for q in range(R, m, -1):
        kend[q] = kend[q - 1]
        kid[q] = kid[q - 1]
        for w in range(W):
            free[q, w] = free[q - 1, w]
    kend[m] = end
    kid[m] = jid
    for w in range(W):
        idle[w] &= ~mask[w]
    for q in range(m):
        for w in range(W):
            free[q, w] &= ~mask[w]
    for w in range(W):
        prev = free[m - 1, w] if m > 0 else idle[w]
        free[m, w] = prev | mask[w]
    return R + 1


@njit(cache=True)
def _anyone_fits(pos, nq, idle, n_idle, ns_b, ns_av, nb, rq, rtl, now, rb_t, rb_c, left):
    """Can any job after ``pos`` still start now (upper bound: idle nodes whose first
    reservation begins after the job's end)?"""
    if pos + 1 >= nq:
        return False
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
    for q in range(pos + 1, nq):
        if nr == 0:
            usable = n_idle
        else:
            k = _bisect_right(rb_t, nr, now + rtl[q])
            usable = n_idle - (rb_c[k - 1] if k > 0 else 0)
        if rq[q] <= usable:
            return True
    return False


@njit(cache=True)
def bf_cycle_linear(now, res, bf_window, max_test, jpcr, max_start, min_prio, min_age,
                    nn, idle, kend, kid, free, R,
                    rq, rtl, rest, rpart, rprio, rsub, rjid, suffix_min, pmask, n_parts,
                    out_pos, out_nodes, rg, gres):
    """One backfill cycle; returns (number of starts, reservations made). Started queue
    positions go to ``out_pos`` and their nodes to ``out_nodes`` (rows of words). ``free``,
    ``kend``, ``kid`` need room for R + min(len(rq), nn) rows (a start takes at least one idle
    node); ``idle`` is updated in place."""
    W = idle.shape[0]
    nq = rq.shape[0]
    begin0 = np.floor(now / res) * res
    window_end = np.floor((now + bf_window) / res) * res
    # map records: each tested job adds at most two (a start or a reservation), and at most
    # ``max_test`` jobs are tested (a job adds records only once counted)
    cap = 2 * (min(nq, max_test) + 2) + 4
    ns_b = np.empty(cap)
    ns_av = np.empty((cap, W), dtype=np.uint64)
    ns_b[0] = begin0
    for w in range(W):
        ns_av[0, w] = ~np.uint64(0)
    nb = 1
    n_idle = _count(idle)
    part_resv = np.zeros(n_parts, dtype=np.int64)
    acc = np.empty(W, dtype=np.uint64)
    cur = np.empty(W, dtype=np.uint64)
    cand = np.empty(W, dtype=np.uint64)
    nodes = np.empty(W, dtype=np.uint64)
    scratch_s = np.empty(nn + 1, dtype=np.int64)
    scratch_l = np.empty(nn + 1, dtype=np.int64)
    rb_t = np.empty(cap)
    rb_c = np.empty(cap, dtype=np.int64)
    left = np.empty(W, dtype=np.uint64)
    pmg = np.empty(W, dtype=np.uint64)
    test_cnt = 0
    start_cnt = 0
    n_res = 0
    pos = -1
    while pos + 1 < nq:
        pos += 1
        if test_cnt >= max_test:
            break
        if n_idle < suffix_min[pos]:
            break
        k = rpart[pos]
        no_reserve = False
        if min_prio > 0 and rprio[pos] < min_prio:
            no_reserve = True
        elif min_age > 0 and now - rsub[pos] < min_age:
            no_reserve = True
        if jpcr > 0 and part_resv[k] >= jpcr:
            no_reserve = True
        tlj = rtl[pos]
        need = rq[pos]
        pm = pmask[k]
        gm = gres[rg[pos]]
        for w in range(W):
            pmg[w] = pm[w] & gm[w]
        counted = False
        later = now
        touched_idle = False
        # lower bound of every will-run start (RunningSet.earliest on the partition's nodes)
        if _count_and(pmg, idle) >= need:
            t_min = now
        else:
            m0 = _first(pmg, need, free, R)
            if m0 == R:
                t_min = INF
            else:
                t_min = kend[m0] if kend[m0] > now else now + 1.0
        n_attempts = nb + 8
        for _attempt in range(n_attempts):
            start_res = later
            later = 0.0
            if window_end < start_res:
                break
            end_time = start_res + tlj
            i = _bisect_right(ns_b, nb, start_res) - 1
            if i < 0:
                i = 0
            for w in range(W):
                acc[w] = pm[w]
            while True:
                for w in range(W):
                    cur[w] = acc[w] & ns_av[i, w]
                    acc[w] = cur[w]
                n1 = i + 1
                if n1 >= nb:
                    break
                if later == 0.0:
                    frees = False
                    for w in range(W):
                        if pm[w] & ns_av[n1, w] & ~cur[w]:
                            frees = True
                            break
                    if frees:
                        later = ns_b[n1]
                        if counted and later < t_min:
                            break
                if ns_b[n1] > end_time:
                    break
                i = n1
            if counted and later != 0.0 and later < t_min:
                continue
            if later == 0.0 and i + 3 < nb:
                later = ns_b[i + 3]
            if _count(acc) < need:
                if later != 0.0 and not no_reserve:
                    continue
                break
            if not counted:
                test_cnt += 1
                counted = True
            # will-run (RunningSet.will_run_at): idle nodes first, then removals in end order
            # (the select plugin keeps only the nodes with the job's gres/gpu: acc &= gm)
            for w in range(W):
                acc[w] &= gm[w]
                cand[w] = acc[w] & idle[w]
            if _count(cand) >= need:
                wr_t = now
            else:
                lo = _first(acc, need, free, R)
                if lo == R:             # not runnable on these nodes (only with gres/gpu)
                    if later != 0.0 and not no_reserve:
                        continue
                    break
                wr_t = kend[lo] if kend[lo] > now else now + 1.0
                for w in range(W):
                    cand[w] = acc[w] & free[lo, w]
            start = start_res if start_res > wr_t else wr_t
            if start <= now:
                job_test(cand, need, nn, nodes, scratch_s, scratch_l)
                out_pos[start_cnt] = pos
                for w in range(W):
                    out_nodes[start_cnt, w] = nodes[w]
                n_idle -= need
                R = _run_start(now + rest[pos], rjid[pos], nodes, idle, kend, kid, free, R)
                nb = _add_resv(begin0, np.floor((now + tlj) / res) * res, nodes, ns_b, ns_av,
                               nb, begin0, res, window_end)
                start_cnt += 1
                touched_idle = True
                if max_start > 0 and start_cnt >= max_start:
                    pos = nq
                break
            if no_reserve:
                break
            if later != 0.0 and start > later:
                continue
            st_slot = np.floor(start / res) * res
            en_slot = np.floor((start + tlj) / res) * res
            job_test(cand, need, nn, nodes, scratch_s, scratch_l)
            lo_s = _bisect_right(ns_b, nb, st_slot) - 1
            if lo_s < 0:
                lo_s = 0
            hi_s = _bisect_left(ns_b, nb, en_slot)
            clash = False
            for q in range(lo_s, hi_s):
                for w in range(W):
                    if (ns_av[q, w] & nodes[w]) != nodes[w]:
                        clash = True
                        break
                if clash:
                    break
            if clash:
                later = start + (res if start_res == start else 0.0)
                continue
            if start > now + bf_window:
                break
            if jpcr > 0 and part_resv[k] >= jpcr:
                break
            part_resv[k] += 1
            nb = _add_resv(st_slot, en_slot, nodes, ns_b, ns_av, nb, begin0, res, window_end)
            n_res += 1
            if _any_and(nodes, idle):
                touched_idle = True
            break
        if touched_idle and n_idle > 0 and not _anyone_fits(pos, nq, idle, n_idle, ns_b, ns_av,
                                                            nb, rq, rtl, now, rb_t, rb_c, left):
            break
    return start_cnt, n_res


@njit(cache=True)
def _indices(rows, n, nn):
    """Node indices of the first ``n`` rows of words: (flat indices, row offsets)."""
    total = 0
    for q in range(n):
        for w in range(rows.shape[1]):
            total += _pc64(rows[q, w])
    idx = np.empty(total, dtype=np.int64)
    off = np.empty(n + 1, dtype=np.int64)
    k = 0
    for q in range(n):
        off[q] = k
        for w in range(rows.shape[1]):
            x = rows[q, w]
            while x:
                b = _ctz(x)
                idx[k] = w * 64 + b
                k += 1
                x &= x - np.uint64(1)
    off[n] = k
    return idx, off


@njit(cache=True)
def bf_cycle(now, res, bf_window, max_test, jpcr, max_start, min_prio, min_age,
             nn, node_end, slot_used, slot_end, slot_id, slot_words,
             order, req, tl, est, jpart, prio, submit, job_id, pmask, n_parts, jgres, gres):
    """`bf_cycle_linear` from the scheduler's own arrays: idle nodes from ``node_end`` (-inf =
    idle), the running jobs from the slot arrays (sorted here by expected end, then job id, the
    ``_will_run_test`` removal order), the queue's columns gathered in ``order``. Returns
    (started queue positions, their node words, reservations made, node indices, offsets)."""
    W = slot_words.shape[1]
    nq = order.shape[0]
    idle = np.zeros(W, dtype=np.uint64)
    for i in range(nn):
        if node_end[i] == -INF:
            idle[i >> 6] |= np.uint64(1) << np.uint64(i & 63)
    R = 0
    for s in range(slot_used.shape[0]):
        if slot_used[s]:
            R += 1
    act = np.empty(R, dtype=np.int64)
    r = 0
    for s in range(slot_used.shape[0]):
        if slot_used[s]:
            act[r] = s
            r += 1
    # (end, id) order: stable sort by end of the id-sorted slots
    by_id = act[np.argsort(slot_id[act], kind="mergesort")]
    srt = by_id[np.argsort(slot_end[by_id], kind="mergesort")]
    rows = R + min(nq, nn)          # running jobs and this cycle's starts (each takes a node)
    kend = np.empty(rows)
    kid = np.empty(rows, dtype=np.int64)
    free = np.empty((rows, W), dtype=np.uint64)
    for q in range(R):
        s = srt[q]
        kend[q] = slot_end[s]
        kid[q] = slot_id[s]
        for w in range(W):
            prev = free[q - 1, w] if q > 0 else idle[w]
            free[q, w] = prev | slot_words[s, w]
    rq = np.empty(nq, dtype=np.int64)
    rtl = np.empty(nq)
    rest = np.empty(nq)
    rpart = np.empty(nq, dtype=np.int64)
    rsub = np.empty(nq)
    rjid = np.empty(nq, dtype=np.int64)
    rg = np.empty(nq, dtype=np.int64)
    for q in range(nq):
        j = order[q]
        rg[q] = jgres[j]
        rq[q] = req[j]
        rtl[q] = tl[j]
        rest[q] = est[j]
        rpart[q] = jpart[j]
        rsub[q] = submit[j]
        rjid[q] = job_id[j]
    suffix_min = _suffix_min(rq)
    out_pos = np.empty(min(nq, nn), dtype=np.int64)       # at most one start per node
    out_nodes = np.empty((min(nq, nn), W), dtype=np.uint64)
    n_st, n_res = bf_cycle_linear(now, res, bf_window, max_test, jpcr, max_start, min_prio,
                                  min_age, nn, idle, kend, kid, free, R, rq, rtl, rest, rpart,
                                  prio, rsub, rjid, suffix_min, pmask, n_parts, out_pos,
                                  out_nodes, rg, gres)
    idx, off = _indices(out_nodes, n_st, nn)
    return out_pos[:n_st], out_nodes[:n_st], n_res, idx, off


@njit(cache=True)
def _suffix_min(rq):
    """suffix_min[q] = min(rq[q:]): the smallest node request from queue position q on (a cycle
    stops testing once no later job can fit)."""
    nq = len(rq)
    out = np.empty(nq, dtype=np.int64)
    m = 1 << 62
    for q in range(nq - 1, -1, -1):
        if rq[q] < m:
            m = rq[q]
        out[q] = m
    return out


@njit(cache=True)
def main_pass(nn, node_end, order, depth, part_job_depth, req, jpart, pmask, n_parts, jgres,
              gres):
    """The strict-priority pass of `SlurmScheduler._main_pass` under select/linear (job_scheduler.c
    ``_schedule``: a job that does not fit fails its partition and removes the partition's nodes
    from the pass; ``_run_now`` -> ``_job_test`` chooses the nodes). ``depth`` < 0: no limit.
    Returns (started queue positions, their node words, whether the whole queue was seen, node
    indices, offsets)."""
    W = pmask.shape[1]
    nq = order.shape[0]
    idle = np.zeros(W, dtype=np.uint64)
    for i in range(nn):
        if node_end[i] == -INF:
            idle[i >> 6] |= np.uint64(1) << np.uint64(i & 63)
    avail = np.empty(W, dtype=np.uint64)
    for w in range(W):
        avail[w] = ~np.uint64(0)
    failed = np.zeros(n_parts, dtype=np.bool_)
    n_failed = 0
    per_part = np.zeros(n_parts, dtype=np.int64)
    n_idle = _count(idle)
    cand = np.empty(W, dtype=np.uint64)
    nodes = np.empty(W, dtype=np.uint64)
    scratch_s = np.empty(nn + 1, dtype=np.int64)
    scratch_l = np.empty(nn + 1, dtype=np.int64)
    out_pos = np.empty(min(nq, nn), dtype=np.int64)       # at most one start per node
    out_nodes = np.empty((min(nq, nn), W), dtype=np.uint64)
    n_st = 0
    complete = True
    for pos in range(nq):
        if depth >= 0 and pos >= depth:
            complete = False
            break
        if n_failed == n_parts or n_idle == 0:
            break
        j = order[pos]
        k = jpart[j]
        if failed[k]:
            continue
        if part_job_depth > 0:
            if per_part[k] >= part_job_depth:
                complete = False
                continue
            per_part[k] += 1
        g = jgres[j]
        for w in range(W):
            cand[w] = idle[w] & avail[w] & pmask[k, w] & gres[g, w]
        need = req[j]
        if _count(cand) >= need:
            job_test(cand, need, nn, nodes, scratch_s, scratch_l)
            out_pos[n_st] = pos
            for w in range(W):
                out_nodes[n_st, w] = nodes[w]
                idle[w] &= ~nodes[w]
            n_st += 1
            n_idle -= need
        else:
            failed[k] = True
            n_failed += 1
            for w in range(W):
                avail[w] &= ~pmask[k, w]
    idx, off = _indices(out_nodes, n_st, nn)
    return out_pos[:n_st], out_nodes[:n_st], complete, idx, off


@njit(cache=True)
def bf_cycle_live(now, res, bf_window, max_test, jpcr, max_start, min_prio, min_age, nn, idle_w,
                  R, r_end, r_id, r_words, rq, rtl, rest, rpart, rprio, rsub, rjid, rg, pmask,
                  n_parts, gres):
    """`bf_cycle` from state the caller keeps up to date between cycles (the whole-run replay,
    `schedulers.slurm_replay_kernels`), instead of rebuilding it from the slots each cycle:
    ``idle_w`` the idle nodes as words, rows ``0..R-1`` of ``r_end``/``r_id``/``r_words`` the
    running jobs already in ``_will_run_test`` removal order (expected end, job id, then slot:
    the order `bf_cycle`'s two stable sorts give), and the queue's columns (``rq`` nodes,
    ``rtl`` planning limit, ``rest`` estimate, ``rpart``, ``rprio``, ``rsub``, ``rjid``,
    ``rg``) in queue order. Same returns as `bf_cycle`; the inputs are not modified."""
    W = idle_w.shape[0]
    nq = rq.shape[0]
    idle = idle_w.copy()
    rows = R + min(nq, nn)          # running jobs and this cycle's starts (each takes a node)
    kend = np.empty(rows)
    kid = np.empty(rows, dtype=np.int64)
    free = np.empty((rows, W), dtype=np.uint64)
    for q in range(R):
        kend[q] = r_end[q]
        kid[q] = r_id[q]
        for w in range(W):
            prev = free[q - 1, w] if q > 0 else idle[w]
            free[q, w] = prev | r_words[q, w]
    suffix_min = _suffix_min(rq)
    out_pos = np.empty(min(nq, nn), dtype=np.int64)       # at most one start per node
    out_nodes = np.empty((min(nq, nn), W), dtype=np.uint64)
    n_st, n_res = bf_cycle_linear(now, res, bf_window, max_test, jpcr, max_start, min_prio,
                                  min_age, nn, idle, kend, kid, free, R, rq, rtl, rest, rpart,
                                  rprio, rsub, rjid, suffix_min, pmask, n_parts, out_pos,
                                  out_nodes, rg, gres)
    idx, off = _indices(out_nodes, n_st, nn)
    return out_pos[:n_st], out_nodes[:n_st], n_res, idx, off
