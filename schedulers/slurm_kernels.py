"""Compiled backfill cycle of the Slurm-like policy under ``select/linear`` (issue 17 item 3).

One call of `bf_cycle_linear` is one ``_attempt_backfill`` cycle exactly as the Python cycle in
`schedulers.slurm.SlurmScheduler._backfill` computes it (same decisions, tested on whole-log
segments), with node sets as rows of ``uint64`` words (bit i of word w = node 64 w + i) instead
of Python ints, and ``_job_test`` / ``_will_run_test`` of `schedulers.slurm_select` ported to
loops over those words. The backfill map (Slurm's ``node_space``) is the node-set form of the
availability profile and its operations (``_add_reservation``, the record walk, the fit test)
are the profile's compiled kernels, `schedulers.profile_nodeset_kernels`, imported from there
with the bit primitives. Compiled with numba (``cache=True``: only the first run on a machine pays
the compilation, a few seconds).

Not in the kernel (the Python cycle runs instead): QOS per-user limits, ``bf_max_job_part``,
``bf_max_job_user``, and the cons_tres/cons_res node choice.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .profile_kernels import _borrow
from .profile_nodeset_kernels import (_any_and, _bisect_right, _count, _count_and, _ctz, _pc64,
                                      _set_range, ns_add_resv, ns_first_reserved, ns_fits, ns_init,
                                      ns_walk)

INF = np.inf


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


@njit(cache=True, inline="always")
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
    reservation begins after the job's end, `ns_first_reserved`)?"""
    if pos + 1 >= nq:
        return False
    nr = ns_first_reserved(ns_b, ns_av, nb, idle, rb_t, rb_c, left)
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
    node); ``idle`` is updated in place. Allocates the cycle's map and scratch words, then runs
    `_bf_cycle_core` on them."""
    W = idle.shape[0]
    nq = rq.shape[0]
    # map records: each tested job adds at most two (a start or a reservation), and at most
    # ``max_test`` jobs are tested (a job adds records only once counted)
    cap = 2 * (min(nq, max_test) + 2) + 4
    return _bf_cycle_core(now, res, bf_window, max_test, jpcr, max_start, min_prio, min_age,
                          nn, idle, kend, kid, free, R, rq, rtl, rest, rpart, rprio, rsub, rjid,
                          suffix_min, pmask, out_pos, out_nodes, rg, gres,
                          np.empty(cap), np.empty((cap, W), dtype=np.uint64), np.zeros(n_parts, dtype=np.int64),
                          np.empty((6, W), dtype=np.uint64), np.empty((2, nn + 1), dtype=np.int64),
                          np.empty(cap), np.empty(cap, dtype=np.int64))


@njit(cache=True)
def _bf_cycle_core(now, res, bf_window, max_test, jpcr, max_start, min_prio, min_age,
                   nn, idle, kend, kid, free, R, rq, rtl, rest, rpart, rprio, rsub, rjid,
                   suffix_min, pmask, out_pos, out_nodes, rg, gres,
                   ns_b, ns_av, part_resv, words, scratch, rb_t, rb_c):
    """The body of `bf_cycle_linear`. Every array is this call's argument (alive until it
    returns), so it is used through a borrowed view (`profile_kernels._borrow`): the many small
    compiled calls and row views below cost no atomic reference counting (which was ~18 % of a
    CTC-SP2 replay)."""
    idle, kend, kid, free, rq, rtl, rest = (_borrow(idle), _borrow(kend), _borrow(kid), _borrow(free),
                                            _borrow(rq), _borrow(rtl), _borrow(rest))
    rpart, rprio, rsub, rjid, suffix_min, pmask = (_borrow(rpart), _borrow(rprio), _borrow(rsub),
                                                   _borrow(rjid), _borrow(suffix_min), _borrow(pmask))
    out_pos, out_nodes, rg, gres = _borrow(out_pos), _borrow(out_nodes), _borrow(rg), _borrow(gres)
    ns_b, ns_av, part_resv, words, scratch = (_borrow(ns_b), _borrow(ns_av), _borrow(part_resv),
                                              _borrow(words), _borrow(scratch))
    rb_t, rb_c = _borrow(rb_t), _borrow(rb_c)
    W = idle.shape[0]
    nq = rq.shape[0]
    begin0 = np.floor(now / res) * res
    window_end = np.floor((now + bf_window) / res) * res
    nb = ns_init(ns_b, ns_av, begin0)
    n_idle = _count(idle)
    acc, cand, nodes, left, pmg = words[0], words[1], words[2], words[3], words[4]
    scratch_s, scratch_l = scratch[0], scratch[1]
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
            if window_end < start_res:
                break
            end_time = start_res + tlj
            # the partition's nodes free in every map record overlapping the job's time
            i, later = ns_walk(ns_b, ns_av, nb, pm, start_res, end_time,
                               t_min if counted else -INF, acc)
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
                nb = ns_add_resv(begin0, np.floor((now + tlj) / res) * res, nodes, ns_b, ns_av,
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
            if not ns_fits(ns_b, ns_av, nb, st_slot, en_slot, nodes):
                later = start + (res if start_res == start else 0.0)
                continue
            if start > now + bf_window:
                break
            if jpcr > 0 and part_resv[k] >= jpcr:
                break
            part_resv[k] += 1
            nb = ns_add_resv(st_slot, en_slot, nodes, ns_b, ns_av, nb, begin0, res, window_end)
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
