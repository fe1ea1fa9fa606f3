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
