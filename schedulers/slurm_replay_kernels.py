"""Compiled whole-run replay of the Slurm-like policy (issue 15): the engine's event loop
(`twin.simulation.Simulation.run`) and the policy's hooks and passes
(`schedulers.slurm.SlurmScheduler`: ``on_submit``, ``on_finish``, ``schedule``,
``next_wakeup``, the backfill thread's clock ``_bf_next``/``_bf_catch_up``) in one numba function,
calling the same compiled passes (`schedulers.slurm_kernels.main_pass`, ``bf_cycle``; the backfill
map is the availability profile's node-set form, `schedulers.profile_nodeset_kernels`). Every line
mirrors a line of those two files: same events, same order of hooks, same float operations, so
the same schedule byte for byte (tested in ``tests/test_slurm_replay.py``; the glue and the
eligibility rules are in `schedulers.slurm_replay`).

State vectors (numba has no objects): ``fs`` floats, ``st`` ints, ``cnt`` the policy's counters,
indexed by the constants below. NaN stands for Python's None in ``fs``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .slurm_kernels import bf_cycle_live, main_pass

from .slurm_replay_layout import (C_BF, C_BF_STARTS, C_EVENT, C_MAIN, C_MAIN_STARTS, C_MISSED,  # noqa: F401
                                  C_RESV, C_SKIP, F_BF_CHANGE, F_BF_LAST, F_WAKE, P_IV, P_MIN_AGE,
                                  P_POLL, P_RES, P_SCHED_IV, P_WINDOW, Q_BF_ON, Q_CPN, Q_DEPTH,
                                  Q_JPCR, Q_MAX_START, Q_MAX_TEST, Q_MIN_PRIO, Q_NN, Q_NPARTS,
                                  Q_PART_DEPTH, Q_QUIET, S_BF_DIRTY, S_BF_LEFT, S_EVENT, S_IDLE,
                                  S_MAIN_DIRTY, S_NEW, S_NFREE, S_PENDING, S_RUN)

INF = np.inf


@njit(cache=True)
def _bf_next(fs, st, fp, ip):
    """`SlurmScheduler._bf_next` (NaN: no cycle scheduled)."""
    if ip[Q_BF_ON] == 0:
        return np.nan
    base = fs[F_BF_LAST] + fp[P_IV]
    if st[S_BF_LEFT] != 0:
        return base
    ch = fs[F_BF_CHANGE]
    if ch == ch:
        t = base if base > ch else ch
        if t > base:
            t = base + np.ceil((t - base) / fp[P_POLL] - 1e-9) * fp[P_POLL]
        return t
    return np.nan


@njit(cache=True)
def _bf_catch_up(now, fs, st, cnt, fp, ip):
    """`SlurmScheduler._bf_catch_up`: the backfill cycles strictly before ``now``."""
    iv = fp[P_IV]
    while True:
        t = _bf_next(fs, st, fp, ip)
        if t != t or t >= now:
            return
        if st[S_BF_DIRTY] != 0 and st[S_PENDING] != 0:
            if st[S_IDLE] == 0:
                cnt[C_BF] += 1
                st[S_BF_DIRTY] = 0
            else:
                cnt[C_MISSED] += 1
                cnt[C_SKIP] += 1
        else:
            cnt[C_SKIP] += 1
        fs[F_BF_LAST] = t
        fs[F_BF_CHANGE] = np.nan
        st[S_BF_LEFT] = 1 if st[S_PENDING] > 0 else 0
        if st[S_BF_LEFT] != 0 and st[S_BF_DIRTY] == 0:
            k = np.floor((now - fs[F_BF_LAST]) / iv)
            if fs[F_BF_LAST] + k * iv >= now:
                k -= 1
            if k > 0:
                cnt[C_SKIP] += np.int64(k)
                fs[F_BF_LAST] += k * iv


@njit(cache=True)
def _touch(now, fs, st):
    """`SlurmScheduler._touch`."""
    st[S_BF_DIRTY] = 1
    st[S_MAIN_DIRTY] = 1
    if fs[F_BF_CHANGE] != fs[F_BF_CHANGE]:
        fs[F_BF_CHANGE] = now


@njit(cache=True)
def _next_wakeup(now, fs, st, fp, ip):
    """`SlurmScheduler.next_wakeup` for a static priority order (NaN: None)."""
    if st[S_PENDING] == 0:
        return np.nan
    best = INF
    if ip[Q_BF_ON] != 0 and st[S_BF_DIRTY] != 0 and st[S_IDLE] > 0:
        t = _bf_next(fs, st, fp, ip)
        if t == t:
            if t <= now:
                t = now + fp[P_IV]
            best = t
    if st[S_MAIN_DIRTY]:
        g = (np.floor(now / fp[P_SCHED_IV]) + 1) * fp[P_SCHED_IV]
        if g < best:
            best = g
    return best if best < INF else np.nan


@njit(cache=True)
def _run_insert(RUN, st, end, jid, slot, words):
    """A job starts: clear its nodes in the idle words and insert it in the running list, kept
    in (expected end, job id, slot) order (`bf_cycle`'s removal order)."""
    idle_w, r_end, r_id, r_slot, r_words = RUN
    W = idle_w.shape[0]
    for w in range(W):
        idle_w[w] &= ~words[w]
    R = st[S_RUN]
    m = R
    while m > 0 and (r_end[m - 1] > end or (r_end[m - 1] == end and (
            r_id[m - 1] > jid or (r_id[m - 1] == jid and r_slot[m - 1] > slot)))):
        r_end[m] = r_end[m - 1]
        r_id[m] = r_id[m - 1]
        r_slot[m] = r_slot[m - 1]
        for w in range(W):
            r_words[m, w] = r_words[m - 1, w]
        m -= 1
    r_end[m] = end
    r_id[m] = jid
    r_slot[m] = slot
    for w in range(W):
        r_words[m, w] = words[w]
    st[S_RUN] = R + 1


@njit(cache=True)
def _run_remove(RUN, st, slot):
    """The job in ``slot`` ends: its nodes become idle and it leaves the running list."""
    idle_w, r_end, r_id, r_slot, r_words = RUN
    W = idle_w.shape[0]
    R = st[S_RUN]
    m = 0
    while r_slot[m] != slot:
        m += 1
    for w in range(W):
        idle_w[w] |= r_words[m, w]
    for q in range(m, R - 1):
        r_end[q] = r_end[q + 1]
        r_id[q] = r_id[q + 1]
        r_slot[q] = r_slot[q + 1]
        for w in range(W):
            r_words[q, w] = r_words[q + 1, w]
    st[S_RUN] = R - 1


@njit(cache=True)
def _apply_starts(now, queue, pos, words, idx, off, started, fs, st, node_end, est, job_id,
                  req, procs, slot_used, slot_end, slot_id, slot_words, free_slots, job_slot,
                  jnodes, noff, units, uoff, start, newj, ip, RUN):
    """`SlurmScheduler._starts_of` / ``_apply_start``: the passes' starts on their nodes (units of
    a node n: n * cpn .. n * cpn + cpn - 1, the first ``procs`` of them)."""
    cpn = ip[Q_CPN]
    W = slot_words.shape[1]
    for q in range(pos.shape[0]):
        j = queue[pos[q]]
        end = now + est[j]
        a, b = off[q], off[q + 1]
        for k in range(a, b):
            node_end[idx[k]] = end
            jnodes[noff[j] + k - a] = idx[k]
        st[S_IDLE] -= b - a
        st[S_NFREE] -= 1
        slot = free_slots[st[S_NFREE]]
        job_slot[j] = slot
        slot_used[slot] = True
        slot_end[slot] = end
        slot_id[slot] = job_id[j]
        for w in range(W):
            slot_words[slot, w] = words[q, w]
        _run_insert(RUN, st, end, job_id[j], slot, words[q])
        st[S_PENDING] -= 1
        u = uoff[j]
        left = procs[j]
        for k in range(a, b):
            for c in range(cpn):
                if left > 0:
                    units[u] = idx[k] * cpn + c
                    u += 1
                    left -= 1
        start[j] = now
        started[j] = True
        newj[st[S_NEW]] = j
        st[S_NEW] += 1


@njit(cache=True)
def _compact(queue, qn, started, QC):
    """Drop the started jobs from the queue and its columns (order kept); returns the length."""
    q_req, q_tl, q_est, q_part, q_sub, q_jid, q_g = QC
    w = 0
    for k in range(qn):
        j = queue[k]
        if not started[j]:
            queue[w] = j
            q_req[w], q_tl[w], q_est[w], q_part[w] = q_req[k], q_tl[k], q_est[k], q_part[k]
            q_sub[w], q_jid[w], q_g[w] = q_sub[k], q_jid[k], q_g[k]
            w += 1
    return w


@njit(cache=True)
def _enqueue(queue, qn, j, QC, J):
    """Append job ``j`` to the queue and its columns; returns the length."""
    submit, req, est, tl, jpart, jgres, job_id, procs, ones = J
    q_req, q_tl, q_est, q_part, q_sub, q_jid, q_g = QC
    queue[qn] = j
    q_req[qn], q_tl[qn], q_est[qn], q_part[qn] = req[j], tl[j], est[j], jpart[j]
    q_sub[qn], q_jid[qn], q_g[qn] = submit[j], job_id[j], jgres[j]
    return qn + 1


@njit(cache=True)
def _schedule(now, queue, qn, J, M, RUN, QC, pm_words, gres_words, fs, st, cnt, fp, ip):
    """`SlurmScheduler.schedule` for a static priority order (the queue's own order: arrival,
    i.e. index order): the main or event pass, then the backfill cycle if due. Starts go to
    ``M`` (``newj[:st[S_NEW]]``); returns the queue length left."""
    submit, req, est, tl, jpart, jgres, job_id, procs, ones = J
    (node_end, slot_used, slot_end, slot_id, slot_words, free_slots, job_slot, jnodes, noff,
     units, uoff, start, newj, started) = M
    _bf_catch_up(now, fs, st, cnt, fp, ip)
    nn = ip[Q_NN]
    full_due = st[S_MAIN_DIRTY] != 0 and (now % fp[P_SCHED_IV] == 0)
    if full_due or st[S_EVENT] != 0:
        depth = -1 if full_due else ip[Q_DEPTH]
        complete = True
        n_st = 0
        if not (st[S_IDLE] == 0 or (ip[Q_NPARTS] == 1 and req[queue[0]] > st[S_IDLE])):
            pos, words, complete, idx, off = main_pass(
                nn, node_end, queue[:qn], depth, ip[Q_PART_DEPTH], req, jpart, pm_words,
                ip[Q_NPARTS], jgres, gres_words)
            n_st = pos.shape[0]
            _apply_starts(now, queue, pos, words, idx, off, started, fs, st, node_end, est,
                          job_id, req, procs, slot_used, slot_end, slot_id, slot_words,
                          free_slots, job_slot, jnodes, noff, units, uoff, start, newj, ip, RUN)
        cnt[C_MAIN if full_due else C_EVENT] += 1
        cnt[C_MAIN_STARTS] += n_st
        if complete:
            st[S_MAIN_DIRTY] = 0
        st[S_EVENT] = 0
        if n_st > 0:
            st[S_BF_DIRTY] = 1
            if fs[F_BF_CHANGE] != fs[F_BF_CHANGE]:
                fs[F_BF_CHANGE] = now
            qn = _compact(queue, qn, started, QC)
    if ip[Q_BF_ON] != 0:
        t = _bf_next(fs, st, fp, ip)
        if t == t and t <= now:
            if st[S_BF_DIRTY] != 0 and st[S_PENDING] != 0:
                n_st = 0
                q_req, q_tl, q_est, q_part, q_sub, q_jid, q_g = QC
                rmin = q_req[0]
                for k in range(1, qn):
                    if q_req[k] < rmin:
                        rmin = q_req[k]
                if not (st[S_IDLE] == 0 or st[S_IDLE] < rmin):
                    prio = ones[:qn] if ip[Q_MIN_PRIO] != 0 else ones[:0]
                    idle_w, r_end, r_id, r_slot, r_words = RUN
                    pos, words, n_res, idx, off = bf_cycle_live(
                        now, fp[P_RES], fp[P_WINDOW], ip[Q_MAX_TEST], ip[Q_JPCR],
                        ip[Q_MAX_START], ip[Q_MIN_PRIO], fp[P_MIN_AGE], nn, idle_w, st[S_RUN],
                        r_end, r_id, r_words, q_req[:qn], q_tl[:qn], q_est[:qn], q_part[:qn],
                        prio, q_sub[:qn], q_jid[:qn], q_g[:qn], pm_words, ip[Q_NPARTS],
                        gres_words)
                    cnt[C_RESV] += n_res
                    n_st = pos.shape[0]
                    _apply_starts(now, queue, pos, words, idx, off, started, fs, st, node_end,
                                  est, job_id, req, procs, slot_used, slot_end, slot_id,
                                  slot_words, free_slots, job_slot, jnodes, noff, units, uoff,
                                  start, newj, ip, RUN)
                    if n_st > 0:
                        qn = _compact(queue, qn, started, QC)
                cnt[C_BF] += 1
                cnt[C_BF_STARTS] += n_st
                st[S_BF_DIRTY] = 1 if n_st else 0
            else:
                cnt[C_SKIP] += 1
            fs[F_BF_LAST] = now
            fs[F_BF_CHANGE] = now if st[S_BF_DIRTY] != 0 else np.nan
            st[S_BF_LEFT] = 1 if st[S_PENDING] > 0 else 0
    return qn


@njit(cache=True, inline="always")
def _lt(t1, k1, j1, t2, k2, j2):
    """(t1, k1, j1) < (t2, k2, j2), as Python compares the engine's heap tuples."""
    if t1 != t2:
        return t1 < t2
    if k1 != k2:
        return k1 < k2
    return j1 < j2


@njit(cache=True)
def _heap_push(ht, hk, hj, size, t, key, j):
    """Push (t, key, j) on the min-heap of ``size`` entries; returns the new size."""
    i = size
    ht[i] = t
    hk[i] = key
    hj[i] = j
    while i > 0:
        p = (i - 1) >> 1
        if not _lt(ht[i], hk[i], hj[i], ht[p], hk[p], hj[p]):
            break
        ht[p], ht[i] = ht[i], ht[p]
        hk[p], hk[i] = hk[i], hk[p]
        hj[p], hj[i] = hj[i], hj[p]
        i = p
    return size + 1


@njit(cache=True)
def _heap_pop(ht, hk, hj, size):
    """Drop the top entry; returns the new size."""
    size -= 1
    ht[0], hk[0], hj[0] = ht[size], hk[size], hj[size]
    i = 0
    while True:
        a = 2 * i + 1
        if a >= size:
            break
        b = a + 1
        c = a
        if b < size and _lt(ht[b], hk[b], hj[b], ht[a], hk[a], hj[a]):
            c = b
        if not _lt(ht[c], hk[c], hj[c], ht[i], hk[i], hj[i]):
            break
        ht[c], ht[i] = ht[i], ht[c]
        hk[c], hk[i] = hk[i], hk[c]
        hj[c], hj[i] = hj[i], hj[c]
        i = c
    return size


@njit(cache=True)
def replay(submit, runtime, kill, procs, req, est, tl, jpart, jgres, job_id, pm_words,
           gres_words, total, fp, ip):
    """The whole run (see the module docstring). Returns (start, end, killed, units, unit
    offsets, change times, busy units, queue lengths, number of changes, passes, events, the
    policy's counters, status: 0 done, 1 deadlock, 2 stuck (quiet events), 3 bad wake-up)."""
    n = submit.shape[0]
    nn = ip[Q_NN]
    W = pm_words.shape[1]
    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    killed = np.zeros(n, dtype=np.bool_)
    uoff = np.zeros(n + 1, dtype=np.int64)
    noff = np.zeros(n + 1, dtype=np.int64)
    for j in range(n):
        uoff[j + 1] = uoff[j] + procs[j]
        noff[j + 1] = noff[j] + req[j]
    units = np.full(uoff[n], -1, dtype=np.int32)
    jnodes = np.empty(noff[n], dtype=np.int64)
    node_end = np.full(nn, -INF)
    slot_used = np.zeros(nn, dtype=np.bool_)
    slot_end = np.zeros(nn)
    slot_id = np.zeros(nn, dtype=np.int64)
    slot_words = np.zeros((nn, W), dtype=np.uint64)
    free_slots = np.empty(nn, dtype=np.int64)
    for s in range(nn):                 # Python: list(range(NN - 1, -1, -1)), popped at the end
        free_slots[s] = nn - 1 - s
    job_slot = np.full(n, -1, dtype=np.int64)
    newj = np.empty(nn + 1, dtype=np.int64)
    started = np.zeros(n, dtype=np.bool_)
    ones = np.ones(n)
    queue = np.empty(n + 1, dtype=np.int64)
    qn = 0
    J = (submit, req, est, tl, jpart, jgres, job_id, procs, ones)
    M = (node_end, slot_used, slot_end, slot_id, slot_words, free_slots, job_slot, jnodes, noff,
         units, uoff, start, newj, started)
    # idle nodes as words and the running jobs in removal order (bf_cycle_live's inputs)
    idle_w = np.zeros(W, dtype=np.uint64)
    for i in range(nn):
        idle_w[i >> 6] |= np.uint64(1) << np.uint64(i & 63)
    RUN = (idle_w, np.empty(nn + 1), np.empty(nn + 1, dtype=np.int64),
           np.empty(nn + 1, dtype=np.int64), np.zeros((nn + 1, W), dtype=np.uint64))
    # the queue's columns, in queue order
    QC = (np.empty(n + 1, dtype=np.int64), np.empty(n + 1), np.empty(n + 1),
          np.empty(n + 1, dtype=np.int64), np.empty(n + 1), np.empty(n + 1, dtype=np.int64),
          np.empty(n + 1, dtype=np.int64))
    fs = np.array([0.0, np.nan, np.nan])
    st = np.zeros(9, dtype=np.int64)
    st[S_IDLE] = nn
    st[S_NFREE] = nn
    cnt = np.zeros(8, dtype=np.int64)
    ht = np.empty(n + 1)
    hk = np.empty(n + 1, dtype=np.int64)
    hj = np.empty(n + 1, dtype=np.int64)
    hn = 0
    cap = 2 * n + 16
    ch_t = np.empty(cap)
    ch_b = np.empty(cap, dtype=np.int64)
    ch_q = np.empty(cap, dtype=np.int64)
    nch = 0
    busy = 0
    ptr = 0
    passes = 0
    events = 0
    quiet = 0
    status = 0
    while True:
        t_sub = submit[ptr] if ptr < n else INF
        t_fin = ht[0] if hn > 0 else INF
        wake = fs[F_WAKE]
        t_tim = wake if wake == wake else INF
        now = t_fin if t_fin < t_sub else t_sub
        if t_tim < now:
            now = t_tim
        if now == INF:
            if qn > 0:
                status = 1
            break
        events += 1
        finished = False
        while hn > 0 and ht[0] <= now:                  # 1. finishes (ties by job id)
            j = hj[0]
            hn = _heap_pop(ht, hk, hj, hn)
            end[j] = now
            if now == start[j] + kill[j] and \
                    runtime[j] - (now - start[j]) * 1.0 > 1e-9 * max(1.0, runtime[j]):
                killed[j] = True
            busy -= procs[j]
            finished = True
            # SlurmScheduler.on_finish
            _bf_catch_up(now, fs, st, cnt, fp, ip)
            for k in range(noff[j], noff[j + 1]):
                node_end[jnodes[k]] = -INF
            st[S_IDLE] += req[j]
            slot = job_slot[j]
            _run_remove(RUN, st, slot)
            slot_used[slot] = False
            free_slots[st[S_NFREE]] = slot
            st[S_NFREE] += 1
            st[S_EVENT] = 1
            _touch(now, fs, st)
        submitted = False
        while ptr < n and submit[ptr] <= now:       # 3. submissions (index order)
            qn = _enqueue(queue, qn, ptr, QC, J)
            # SlurmScheduler.on_submit
            _bf_catch_up(now, fs, st, cnt, fp, ip)
            st[S_PENDING] += 1
            st[S_EVENT] = 1
            _touch(now, fs, st)
            ptr += 1
            submitted = True
        woke = False
        if wake == wake and wake <= now:            # 4. the policy's wake-up
            fs[F_WAKE] = np.nan
            woke = True
        n_new = 0
        if (finished or submitted or woke) and qn > 0:  # 5. one pass
            passes += 1
            st[S_NEW] = 0
            qn = _schedule(now, queue, qn, J, M, RUN, QC, pm_words, gres_words, fs, st, cnt, fp,
                           ip)
            n_new = st[S_NEW]
            for q in range(n_new):
                j = newj[q]
                busy += procs[j]
                t_work = now + runtime[j] / 1.0
                t_kill = now + kill[j]
                hn = _heap_push(ht, hk, hj, hn, t_kill if t_kill < t_work else t_work,
                                job_id[j], j)
        if nch == ch_t.shape[0]:
            ch_t = np.concatenate((ch_t, np.empty(nch)))
            ch_b = np.concatenate((ch_b, np.empty(nch, dtype=np.int64)))
            ch_q = np.concatenate((ch_q, np.empty(nch, dtype=np.int64)))
        ch_t[nch] = now
        ch_b[nch] = busy
        ch_q[nch] = qn
        nch += 1
        nxt = _next_wakeup(now, fs, st, fp, ip)
        if nxt == nxt:
            if not nxt > now:
                status = 3
                break
            fs[F_WAKE] = nxt if (ptr < n or qn > 0 or hn > 0) else np.nan
        if finished or submitted or n_new > 0:
            quiet = 0
        elif qn > 0:
            if busy > 0:
                quiet = 0
            else:
                quiet += 1
                if quiet >= ip[Q_QUIET]:
                    status = 2
                    break
    return (start, end, killed, units, uoff, ch_t, ch_b, ch_q, nch, passes, events, cnt,
            status)
