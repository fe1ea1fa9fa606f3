"""`power.stepseries.interval_means`, the package's one interval average, against a direct
piece-by-piece integration (one series, several series, one series per column; jumps before the
grid, on its edges and after it)."""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.power.stepseries import integral, interval_means


def direct(t, d, v0, edges, col=None, ncol=1):
    """Integrate each interval piece by piece (Python loops; small inputs)."""
    out = np.zeros((len(edges) - 1, ncol))
    cols = np.zeros(len(t), dtype=int) if col is None else col
    for c in range(ncol):
        sel = cols == c
        tt, dd = np.asarray(t)[sel], np.asarray(d)[sel]
        base = np.atleast_1d(v0)[c]
        for k in range(len(edges) - 1):
            a, b = edges[k], edges[k + 1]
            pts = sorted({a, b} | {x for x in tt if a < x < b})
            acc = 0.0
            for x0, x1 in zip(pts, pts[1:]):
                acc += (base + dd[tt <= x0].sum()) * (x1 - x0)
            out[k, c] = acc / (b - a)
    return out if col is not None else out[:, 0]


@pytest.mark.parametrize("seed", range(5))
def test_interval_means_equal_direct_integration(seed):
    rng = np.random.default_rng(seed)
    edges = np.arange(0.0, 100.0 + 1e-9, 10.0)
    t = np.concatenate((rng.uniform(-20, 120, 30), [0.0, 10.0, 50.0, 100.0]))   # before, on edges, after
    t.sort()
    d = rng.normal(0, 5, len(t))
    np.testing.assert_allclose(interval_means(t, d, 3.0, edges), direct(t, d, 3.0, edges), rtol=1e-12, atol=1e-12)
    d2 = rng.normal(0, 1, len(t))
    a, b = interval_means(t, [d, d2], [3.0, -1.0], edges)
    np.testing.assert_allclose(b, direct(t, d2, -1.0, edges), rtol=1e-12, atol=1e-12)
    col = rng.integers(0, 3, len(t))
    v0 = np.array([1.0, 2.0, 4.0])
    np.testing.assert_allclose(interval_means(t, d, v0, edges, col=col), direct(t, d, v0, edges, col, 3),
                               rtol=1e-12, atol=1e-12)


def test_by_hand():
    # value 2, +3 at t = 5, -1 at t = 15 on [0, 10), [10, 20): (2*5 + 5*5)/10 = 3.5; (5*5 + 4*5)/10 = 4.5
    np.testing.assert_allclose(interval_means(np.array([5.0, 15.0]), np.array([3.0, -1.0]), 2.0,
                                              np.array([0.0, 10.0, 20.0])), [3.5, 4.5])
    assert integral(np.array([5.0, 15.0]), np.array([3.0, -1.0]), 2.0, 0.0, 20.0) == pytest.approx(80.0)
    assert interval_means(np.zeros(0), np.zeros(0), 7.0, np.array([0.0, 1.0])).tolist() == [7.0]
