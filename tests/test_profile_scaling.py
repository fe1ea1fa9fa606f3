"""The conservative plan's block-summary profile search (`schedulers.profile_kernels`): hand-derived
queries, and randomised equality of compression and planning against the simple algorithm (remove
each reservation, search the whole profile segment by segment, re-make it), kept here as the reference."""
from __future__ import annotations

import math

import numpy as np
import pytest

from hpctwin.schedulers import profile_kernels as K
from hpctwin.schedulers.profile import AvailabilityProfile

INF = math.inf


def _arrays(times, free, spare=64):
    """Profile arrays (with spare capacity) and fresh block summaries."""
    n = len(times)
    t = np.empty(n + spare, dtype=np.float64)
    f = np.empty(n + spare, dtype=np.int64)
    t[:n] = times
    f[:n] = free
    bm = np.empty(n + spare, dtype=np.int64)
    K._blocks_from(f, n, bm, 0)
    return t, f, n, bm


# ---------------------------------------------------------------------------- hand-derived queries
def test_block_summaries_are_max_and_min_of_each_block():
    free = list(range(70))            # blocks of 32: [0..31], [32..63], [64..69]
    t, f, n, bm = _arrays([float(i) for i in range(70)], free)
    assert K.BLOCK == 32
    assert bm[:6].tolist() == [31, 0, 63, 32, 69, 64]
    f[40] = 100                       # change inside block 1, rebuild from index 40 on
    K._blocks_from(f, n, bm, 40)
    assert bm[:6].tolist() == [31, 0, 100, 32, 69, 64]


def test_next_ge_and_next_lt_skip_whole_blocks():
    # 100 segments, all with 0 free except 77 (5 free) and 78 (9 free)
    free = [0] * 100
    free[77], free[78] = 5, 9
    t, f, n, bm = _arrays([float(i) for i in range(100)], free)
    assert K._next_ge(f, n, bm, 0, 5) == 77
    assert K._next_ge(f, n, bm, 0, 6) == 78
    assert K._next_ge(f, n, bm, 79, 1) == 100          # none: n
    assert K._next_lt(f, n, bm, 77, 5) == 79
    assert K._next_lt(f, n, bm, 77, 6) == 77


def test_find_run_hand_profile():
    # free units: [0,10) 4, [10,20) 8, [20,25) 2, [25,40) 8, [40,inf) 16
    t, f, n, bm = _arrays([0.0, 10.0, 20.0, 25.0, 40.0], [4, 8, 2, 8, 16])
    assert K._find_run(t, f, n, bm, 4, 20.0, 0.0, INF) == 0.0      # 4 units free over [0, 20)
    assert K._find_run(t, f, n, bm, 8, 10.0, 0.0, INF) == 10.0     # [10, 20) lasts exactly 10 s
    assert K._find_run(t, f, n, bm, 8, 11.0, 0.0, INF) == 25.0     # [25, inf)
    assert K._find_run(t, f, n, bm, 9, 1.0, 0.0, INF) == 40.0
    assert K._find_run(t, f, n, bm, 17, 1.0, 0.0, INF) == INF      # more than the machine
    assert K._find_run(t, f, n, bm, 8, 11.0, 0.0, 25.0) == INF     # no run starting before 25 s
    assert K._find_run(t, f, n, bm, 8, 5.0, 12.0, INF) == 12.0     # clamped to `after`
    for p, d, after in [(4, 20.0, 0.0), (8, 10.0, 0.0), (8, 11.0, 0.0), (9, 1.0, 0.0), (8, 5.0, 12.0)]:
        assert K._find_run(t, f, n, bm, p, d, after, INF) == K._earliest(t, f, n, p, d, after)


def test_compression_counts_the_jobs_own_units():
    # a 6-unit job of 10 s reserved at 20 s: free [0,15) 0, [15,20) 6, [20,30) 0, [30,inf) 6.
    # The run [15, 20) reaches its reservation (`_run_start`): without it, 6 units are free over
    # [15, 30), so it moves to 15 s although no 10-s slot exists on the profile that holds it.
    t, f, n, bm = _arrays([0.0, 15.0, 20.0, 30.0], [0, 6, 0, 6])
    assert K._run_start(t, f, bm, 1, 6, 0.0) == 15.0
    assert K._find_run(t, f, n, bm, 6, 10.0, 0.0, INF) == 30.0
    procs, dur = np.array([6]), np.array([10.0])
    resv = np.array([20.0])
    n2, m, nxt = K._plan_pass(t, f, n, bm, 0.0, np.array([0]), procs, dur, resv, 12, True, np.empty(1, np.int64))
    assert resv.tolist() == [15.0] and nxt == 15.0
    # [0,25) 0, [25,inf) 6: the breakpoints at 15, 20 and 30 s now separate equal units and are dropped
    assert t[:n2].tolist() == [0.0, 25.0] and f[:n2].tolist() == [0, 6]
    assert bm[:2].tolist() == [6, 0]
    # reserved at 30 s instead (the segment before 30 s has 0 free): [15, 20) lasts 5 s < 10 s, stays
    t, f, n, bm = _arrays([0.0, 15.0, 20.0, 40.0], [0, 6, 0, 6])
    resv = np.array([30.0])
    K._plan_pass(t, f, n, bm, 0.0, np.array([0]), procs, dur, resv, 12, True, np.empty(1, np.int64))
    assert resv.tolist() == [30.0]


def test_move_matches_two_adds():
    # 8 units; a reservation of 3 units over [50, 80) moves to [10, 40)
    t, f, n, bm = _arrays([0.0, 20.0, 50.0, 80.0], [8, 5, 2, 8])
    n2 = K._move(t, f, n, bm, 10.0, 40.0, 50.0, 80.0, 3, np.empty((4, 4), dtype=np.int64))
    # [0,10) 8, [10,20) 5, [20,40) 2, [40,80) 5 (the breakpoint at 50 s now separates equal units), [80,) 8
    assert t[:n2].tolist() == [0.0, 10.0, 20.0, 40.0, 80.0]
    assert f[:n2].tolist() == [8, 5, 2, 5, 8]
    # overlapping move: [50, 80) -> [40, 70) on a fresh profile
    t, f, n, bm = _arrays([0.0, 20.0, 50.0, 80.0], [8, 5, 2, 8])
    n2 = K._move(t, f, n, bm, 40.0, 70.0, 50.0, 80.0, 3, np.empty((4, 4), dtype=np.int64))
    assert t[:n2].tolist() == [0.0, 20.0, 40.0, 70.0, 80.0]
    assert f[:n2].tolist() == [8, 5, 2, 5, 8]
    assert bm[:2].tolist() == [8, 2]


# ---------------------------------------------------------------------------- randomised equality
def _ref_may_move(prof: AvailabilityProfile, p, d, now, old) -> bool:
    """Segment by segment: some run of segments with p units free starts before ``old`` and lasts d
    seconds or reaches ``old`` (where the job's own units are free)."""
    t, f = prof.times, prof.free
    run_start = None
    for i in range(len(t)):
        if t[i] >= old:
            break
        if f[i] >= p:
            if run_start is None:
                run_start = max(t[i], now)
            seg_end = t[i + 1] if i + 1 < len(t) else INF
            if seg_end >= old or seg_end - run_start >= d:
                return True
        else:
            run_start = None
    return False


def _ref_compress(prof: AvailabilityProfile, now, order, procs, dur, resv):
    """The simple compression: in order, each future reservation that can move (`_ref_may_move`) is
    removed, searched for over the whole profile segment by segment (`_earliest`) and re-made."""
    for q in order:
        old, p, d = resv[q], int(procs[q]), float(dur[q])
        if not old > now or not _ref_may_move(prof, p, d, now, old):
            continue
        prof.release(old, old + d, p)
        s = prof.earliest_start(p, d, now)
        prof.reserve(s, d, p)
        resv[q] = s


def _ref_plan(prof, now, order, procs, dur, resv, dirty):
    if dirty:
        _ref_compress(prof, now, order, procs, dur, resv)
    for q in order:
        if resv[q] != resv[q]:
            s = prof.earliest_start(int(procs[q]), float(dur[q]), now)
            prof.reserve(s, float(dur[q]), int(procs[q]))
            resv[q] = s
    due = [int(q) for q in order if resv[q] <= now]
    for q in due:
        resv[q] = np.nan
    return due


def _random_case(rng, integer_times: bool):
    total = int(rng.choice([8, 64, 256]))
    n_jobs = int(rng.integers(5, 120))
    procs = rng.integers(1, total + 1, n_jobs).astype(np.int64)
    procs = np.where(rng.random(n_jobs) < 0.6, np.minimum(procs, rng.integers(1, 5, n_jobs)), procs)
    dur = rng.integers(1, 500, n_jobs).astype(np.float64)
    if not integer_times:
        dur = dur * 1.37 + rng.random(n_jobs) / 3.0
    n_run = int(rng.integers(0, 20))
    run_procs = rng.integers(1, max(2, total // 4), n_run).astype(np.int64)
    keep = np.cumsum(run_procs) <= total
    run_procs = run_procs[keep]
    ends = rng.integers(1, 800, len(run_procs)).astype(np.float64)
    if not integer_times:
        ends = ends + rng.random(len(run_procs))
    return total, procs, dur, ends, run_procs


@pytest.mark.parametrize("integer_times", [True, False])
def test_plan_pass_equals_simple_algorithm(integer_times):
    """Reserve a queue, end running jobs early one by one and compress: reservations, starts and the
    profile (breakpoints and free units) equal the simple algorithm's after every pass."""
    rng = np.random.default_rng(17 + integer_times)
    moved = 0
    for _case in range(150):
        total, procs, dur, ends, run_procs = _random_case(rng, integer_times)
        n_jobs = len(procs)
        order = rng.permutation(n_jobs).astype(np.int64)
        fast = AvailabilityProfile.from_running(0.0, total, ends, run_procs)
        ref = fast.copy()
        resv_f = np.full(n_jobs, np.nan)
        resv_r = resv_f.copy()
        now = 0.0
        running = list(zip(ends.tolist(), run_procs.tolist()))
        for step in range(len(running) + 1):
            dirty = step > 0
            fast._reserve_capacity(6 * len(order) + 8)
            bm = np.empty(len(fast._t), dtype=np.int64)
            out = np.empty(n_jobs, dtype=np.int64)
            before = resv_f.copy()
            n, m, nxt = K._plan_pass(fast._t, fast._f, fast._n, bm, now, order, procs, dur, resv_f, total,
                                     dirty, out)
            fast._n = int(n)
            due = _ref_plan(ref, now, order, procs, dur, resv_r, dirty)
            assert out[:m].tolist() == due
            np.testing.assert_array_equal(resv_f, resv_r)
            # the same step function (the plan drops breakpoints a move leaves between equal units)
            a, b = fast.copy(), ref.copy()
            a.compact()
            b.compact()
            assert a.times.tolist() == b.times.tolist()
            assert a.free.tolist() == b.free.tolist()
            moved += int(np.sum(resv_f < before))
            left = resv_f[~np.isnan(resv_f)]
            assert nxt == (left.min() if len(left) else INF)
            order = np.array([q for q in order if q not in due], dtype=np.int64)
            if step == len(running):
                break
            # the step-th running job ends early, halfway between now and its expected end
            e, p = running[step]
            t_end = max(now, e / 2.0)
            if t_end >= e:
                continue
            for prof in (fast, ref):
                prof.advance(t_end)
                prof.release(t_end, e, p)
            now = t_end
    assert moved > 500            # the cases exercise compression, not only fresh reservations


def test_reservation_plan_end_to_end_matches_reference():
    """`ReservationPlan` (the engine's entry point) on a hand case: a 4-unit machine, job A (4 units,
    100 s) running to 100 s; queue B (2 units, 50 s), C (4 units, 10 s), D (2 units, 200 s)."""
    from hpctwin.schedulers.profile import ReservationPlan
    procs = np.array([4, 2, 4, 2])
    dur = np.array([100.0, 50.0, 10.0, 200.0])
    plan = ReservationPlan(4, 4, procs, dur)
    plan.rebuild(0.0, np.array([100.0]), np.array([4]))
    order = np.array([1, 2, 3])
    assert plan.plan(0.0, order, compress=False) == []
    # B at 100 (2 units to 150); C needs all 4: at 150 (to 160); D needs 2 units for 200 s: the
    # 2 free units over [100, 150) are cut by C, so D goes to 160
    assert plan.resv[1:].tolist() == [100.0, 150.0, 160.0]
    assert plan.next_start == 100.0
    # A ends at 40 s, compression in order: B moves to 40 (to 90); C, its slot given back, fits at
    # 90 (4 units over [90, 100)); D fits at 100 (4 units free from 100 on once its own slot is back)
    plan.release(40.0, 100.0, 4)
    assert plan.plan(40.0, order, compress=True) == [1]
    assert plan.resv[1:].tolist() == [np.nan, 90.0, 100.0] or (
        np.isnan(plan.resv[1]) and plan.resv[2:].tolist() == [90.0, 100.0])
    assert plan.next_start == 90.0
