"""`twin.metrics.last_at_or_before` is ``searchsorted(change_t, t, "right") - 1`` on both of its paths."""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.twin.metrics import interval_average, last_at_or_before, sample_at


@pytest.mark.parametrize("seed", range(40))
def test_same_integers_as_searchsorted(seed):
    """Random sorted changes with ties and grid points on the changes, short and long grids."""
    rng = np.random.default_rng(seed)
    change = np.sort(rng.integers(0, 1000, rng.integers(0, 60)).astype(float))
    step = float(rng.choice([0.5, 1.0, 3.0, 15.0]))
    grid = np.arange(int(rng.integers(-50, 0)), int(rng.integers(1, 3000))) * step
    want = np.searchsorted(change, grid, side="right") - 1
    got = last_at_or_before(change, grid)
    assert got.dtype == want.dtype
    assert np.array_equal(got, want)


def test_hand_checked_grid():
    """Changes at 0, 10, 10, 25 on a 5 s grid from -5: before 0 -> -1; at a tie the last index."""
    change = np.array([0.0, 10.0, 10.0, 25.0])
    grid = np.arange(-1, 300) * 5.0
    got = last_at_or_before(change, grid)
    assert got[:8].tolist() == [-1, 0, 0, 2, 2, 2, 3, 3]      # t = -5, 0, 5, 10, 15, 20, 25, 30
    assert got[-1] == 3


def test_series_values_by_hand():
    """busy 4 from 0 to 10, 2 from 10: averages over [0,15) = (40 + 10) / 15, queue sampled exactly."""
    change = np.array([0.0, 10.0])
    grid = np.arange(400) * 15.0
    avg = interval_average(change, np.array([4.0, 2.0]), grid, 15.0)
    assert avg[0] == pytest.approx(50.0 / 15.0) and np.all(avg[1:] == 2.0)
    q = sample_at(change, np.array([7, 3]), grid)
    assert q[0] == 7 and np.all(q[1:] == 3)


def _reference_average(change, v, grid, dt):
    """The definition, point by point: (integral(t + dt) - integral(t)) / dt with the integral
    ``cum[i] + v[i] * (t - change[i])`` at the last change i <= t (0 before the first)."""
    v = np.asarray(v, dtype=np.float64)
    cum = np.concatenate(([0.0], np.cumsum(v[:-1] * np.diff(change))))

    def integral(t):
        i = np.searchsorted(change, t, side="right") - 1
        k = np.maximum(i, 0)
        return np.where(i < 0, 0.0, cum[k] + v[k] * (t - change[k]))
    return (integral(grid + dt) - integral(grid)) / dt


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("block", [1 << 20, 7, 64])
def test_series_are_the_definition_byte_for_byte(seed, block):
    """`interval_average` and `sample_at` spread per-change terms over runs of grid points: the same
    bytes as the point-by-point definition, with ties, grids starting before the first change or ending
    before the last, grid points on changes, uneven float steps and any block size."""
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 80))
    change = np.sort(np.round(rng.uniform(0, 2000, n), int(rng.integers(0, 2))))
    v = rng.integers(0, 64, n).astype(float) / 8.0
    step = float(rng.choice([0.1, 1.0, 15.0, 7.3]))
    t0 = float(rng.choice([-100.0, 0.0, change[0], 820454400.0 * (seed % 2)]))
    grid = t0 + step * np.arange(int(rng.integers(1, 600)))
    want = _reference_average(change, v, grid, step)
    for dtype in (np.float64, np.float32):
        got = interval_average(change, v, grid, step, block=block, dtype=dtype)
        assert got.tobytes() == want.astype(dtype).tobytes()
    q = rng.integers(0, 9, n)
    i = np.searchsorted(change, grid, side="right") - 1
    want_q = np.where(i < 0, 0, q[np.maximum(i, 0)]).astype(np.int32)
    assert sample_at(change, q, grid, dtype=np.int32, block=block).tobytes() == want_q.tobytes()


def test_series_of_an_empty_log_or_grid_are_zeros():
    assert interval_average(np.array([]), np.array([]), np.arange(3.0), 1.0).tolist() == [0.0, 0.0, 0.0]
    assert sample_at(np.array([1.0]), np.array([5]), np.array([])).tolist() == []
    assert sample_at(np.array([]), np.array([], dtype=np.int64), np.arange(2.0), dtype=np.int32).tolist() == [0, 0]
