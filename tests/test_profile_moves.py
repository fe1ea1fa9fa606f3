"""The conservative plan's local moves and per-shape slot cache (`schedulers.profile_kernels`):
random operations against the plain reference (`_add` twice, a whole-profile search), hand cases,
and the borrowed array views."""
from __future__ import annotations

import math

import numpy as np
import pytest

from hpctwin.schedulers import profile_kernels as K

INF = math.inf


def _compacted(t, f, n):
    keep = [0] + [i for i in range(1, n) if f[i] != f[i - 1]]
    return [float(t[i]) for i in keep], [int(f[i]) for i in keep]


def _fresh_blocks(f, n):
    bm = np.zeros(2 * (n // K.BLOCK + 1), dtype=np.int64)
    K._blocks_from(f, n, bm, 0)
    return bm[: 2 * ((n + K.BLOCK - 1) // K.BLOCK)].tolist()


def _random_profile(rng, total, m):
    times = np.unique(np.round(rng.random(m) * 1000.0, 1 if rng.random() < 0.5 else 3))
    times[0] = 0.0
    free = rng.integers(0, total + 1, len(times))
    return times, free


@pytest.mark.parametrize("seed", range(4))
def test_move_equals_release_and_reserve(seed):
    """A move = `_add` of +p over [old, e) then -p over [s, s + d) (the HEAD formulation), as step
    functions; the block summaries equal a rebuild from scratch; never more breakpoints than that."""
    rng = np.random.default_rng(100 + seed)
    wk = np.empty((4, 4), dtype=np.int64)
    checked = 0
    for _ in range(400):
        total = int(rng.choice([8, 64]))
        m = int(rng.integers(2, 120))        # up to 4 blocks, so suffix and block edits are exercised
        times, free = _random_profile(rng, total, m)
        free = np.maximum(free, rng.integers(0, total + 1, len(free)))   # mostly free: more valid moves
        n = len(times)
        p = int(rng.integers(1, total // 2 + 1))
        d = float(rng.choice([rng.random() * 300.0, float(rng.integers(1, 300))]))
        old = float(rng.choice(times[1:])) if rng.random() < 0.7 else float(rng.random() * 1000.0)
        s = float(rng.choice(times[times < old])) if rng.random() < 0.6 else float(rng.random() * old)
        if not s < old:
            continue
        # make room: the reservation's p units must be held over [old, old + d)
        t = np.zeros(n + 16)
        f = np.zeros(n + 16, dtype=np.int64)
        t[:n], f[:n] = times, free
        n, ok = K._add(t, f, n, old, old + d, -p, 10**9)
        if not ok:
            continue
        tr, fr = t.copy(), f.copy()
        nr, ok1 = K._add(tr, fr, n, old, old + d, p, 10**9)
        nr, ok2 = K._add(tr, fr, nr, s, s + d, -p, 10**9)
        if not ok2:                 # the new slot lacks the units: not a move the plan makes
            continue
        bm = np.zeros(n + 16, dtype=np.int64)
        K._blocks_from(f, n, bm, 0)
        n2 = K._move(t, f, n, bm, s, s + d, old, old + d, p, wk)
        assert _compacted(t, f, n2) == _compacted(tr, fr, nr)
        assert n2 <= nr
        assert bm[: len(_fresh_blocks(f, n2))].tolist() == _fresh_blocks(f, n2)
        assert (np.diff(t[:n2]) > 0).all()
        checked += 1
    assert checked > 100          # the draws give enough valid moves (about 190 per seed)


def test_move_keeps_breakpoints_that_still_separate():
    # 10 units: [0,10) 10, [10,30) 4 (a 6-unit reservation [10,30) is ours), [30,50) 7, [50,) 10
    t = np.zeros(16)
    f = np.zeros(16, dtype=np.int64)
    t[:4], f[:4] = [0.0, 10.0, 30.0, 50.0], [10, 4, 7, 10]
    bm = np.zeros(16, dtype=np.int64)
    K._blocks_from(f, 4, bm, 0)
    n = K._move(t, f, 4, bm, 0.0, 20.0, 10.0, 30.0, 6, np.empty((4, 4), dtype=np.int64))
    # now [0,10) 4, [10,20) 4 -> merged, [20,30) 10, [30,50) 7, [50,) 10
    assert t[:n].tolist() == [0.0, 20.0, 30.0, 50.0]
    assert f[:n].tolist() == [4, 10, 7, 10]
    assert bm[:2].tolist() == [10, 4]


@pytest.mark.parametrize("seed", range(3))
def test_shape_cache_equals_direct_search(seed):
    """Random losses and gains logged between lookups: `_shape_start` gives `_find_run` from now
    (capped at the limit) on the current profile, for every cached shape."""
    rng = np.random.default_rng(7 + seed)
    for _ in range(60):
        total = 16
        times, free = _random_profile(rng, total, int(rng.integers(3, 90)))
        n = len(times)
        t = np.zeros(n + 400)
        f = np.zeros(n + 400, dtype=np.int64)
        t[:n], f[:n] = times, free
        bm = np.zeros(n + 400, dtype=np.int64)
        now = 0.0
        shapes = [(int(rng.integers(1, total + 1)), float(rng.choice([5.0, 40.0, 123.4, 300.0])))
                  for _ in range(6)]
        ht, ci, cf, lg, lk, meta = K._cache_new(len(shapes) + 150)
        for step in range(150):
            K._blocks_from(f, n, bm, 0)
            for p, d in shapes:
                c = K._shape_of(ht, ci, cf, meta, p, d, now)
                limit = INF if rng.random() < 0.5 else float(rng.random() * 1100.0)
                got = K._shape_start(t, f, n, bm, now, ci, cf, lg, lk, meta, c, limit)
                want = K._find_run(t, f, n, bm, p, d, now, INF)
                assert got == (want if want < limit else INF)
            a = float(rng.random() * 900.0)
            b = a + float(rng.random() * 200.0)
            gain = bool(rng.random() < 0.5)
            delta = int(rng.integers(1, 5)) * (1 if gain else -1)
            n, ok = K._add(t, f, n, a, b, delta, total)
            if ok:
                K._log_change(lg, lk, meta, a, b, gain)


def test_borrowed_view_is_the_same_memory():
    from numba import njit

    @njit
    def write_through(a):
        v = K._borrow(a)
        v[1] = 42
        return v[0] + v[1]

    a = np.array([1, 2, 3], dtype=np.int64)
    assert write_through(a) == 43
    assert a.tolist() == [1, 42, 3]
