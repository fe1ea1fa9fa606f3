"""Exact integrals and interval averages of piecewise-constant series given as step changes.

A series is described by its value ``v0`` before the first change and a list of changes
``(t_i, d_i)``: the value jumps by ``d_i`` at time ``t_i``. The integral from ``t0`` to ``x`` is
``v0 * (x - t0) + sum_i d_i * max(0, x - t_i)`` (for ``t_i >= t0``), which numpy evaluates for all
grid points at once with cumulative sums and `searchsorted`. No per-second loop.
"""
from __future__ import annotations

import numpy as np


def ramp_integral(t: np.ndarray, d: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``R(x) = sum_i d_i * max(0, x - t_i)`` for each ``x`` (``t`` sorted ascending)."""
    if len(t) == 0:
        return np.zeros(np.shape(x))
    cd = np.concatenate(([0.0], np.cumsum(d)))
    ctd = np.concatenate(([0.0], np.cumsum(d * t)))
    k = np.searchsorted(t, x, side="right")
    return np.asarray(x) * cd[k] - ctd[k]


def interval_means(t: np.ndarray, d: np.ndarray, v0: float, t0: float, edges: np.ndarray) -> np.ndarray:
    """Average value over each ``[edges[k], edges[k+1])`` of the step series (v0 at t0, jumps d at t).

    Before ``t0`` the series is taken as ``v0``.
    """
    e = np.asarray(edges, dtype=float)
    integ = v0 * (e - t0) + ramp_integral(t, d, e)
    w = np.diff(e)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(w > 0, np.diff(integ) / np.where(w > 0, w, 1.0), np.nan)


def interval_means_many(t: np.ndarray, ds: list[np.ndarray], v0s: list[float], t0: float,
                        edges: np.ndarray) -> list[np.ndarray]:
    """`interval_means` of several step series that change at the same times ``t``: the grid is
    located among the change times once for all of them."""
    e = np.asarray(edges, dtype=float)
    w = np.diff(e)
    k = np.searchsorted(t, e, side="right") if len(t) else None
    ok = w > 0
    w_safe = np.where(ok, w, 1.0)
    out = []
    for d, v0 in zip(ds, v0s):
        if k is None:
            ramp = np.zeros(len(e))
        else:
            cd = np.concatenate(([0.0], np.cumsum(d)))
            ctd = np.concatenate(([0.0], np.cumsum(d * t)))
            ramp = e * cd[k] - ctd[k]
        integ = v0 * (e - t0) + ramp
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append(np.where(ok, np.diff(integ) / w_safe, np.nan))
    return out


def integral(t: np.ndarray, d: np.ndarray, v0: float, t0: float, t1: float) -> float:
    """Exact integral of the step series over ``[t0, t1]``."""
    return float(v0 * (t1 - t0) + ramp_integral(t, d, np.array([t1]))[0])


def levels(t: np.ndarray, d: np.ndarray, v0: float) -> np.ndarray:
    """Value just after each change (same length as ``t``)."""
    return v0 + np.cumsum(d)


def interval_means_2d(t: np.ndarray, col: np.ndarray, d: np.ndarray, v0: np.ndarray, t0: float,
                      edges: np.ndarray) -> np.ndarray:
    """Per-column interval averages: changes ``d`` at times ``t`` in column ``col``.

    Returns an array of shape ``(len(edges) - 1, len(v0))``. Changes are binned into the grid
    intervals (``np.add.at``) so memory is O(grid x columns + changes).
    """
    e = np.asarray(edges, dtype=float)
    ncol = len(v0)
    nint = len(e) - 1
    w = np.diff(e)
    # Integral over interval k of a jump d at time t: d * (e[k+1] - max(t, e[k])) if t < e[k+1],
    # plus d * w[j] for every later interval j: handled by a cumulative sum of the jumps per bin.
    k = np.searchsorted(e, t, side="right") - 1          # interval holding t (-1: before the grid)
    before = k < 0
    after = k >= nint
    inside = ~(before | after)
    acc = np.zeros((nint + 1, ncol))                     # full-interval carry, starts in bin k+1
    part = np.zeros((nint, ncol))                        # partial contribution in bin k
    np.add.at(acc, (np.zeros(int(before.sum()), dtype=np.int64), col[before]), d[before])
    ki = k[inside]
    np.add.at(acc, (ki + 1, col[inside]), d[inside])
    np.add.at(part, (ki, col[inside]), d[inside] * (e[ki + 1] - t[inside]))
    carry = np.cumsum(acc[:nint], axis=0)               # jumps fully active over interval k
    integ = carry * w[:, None] + part + np.asarray(v0)[None, :] * w[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        return integ / np.where(w > 0, w, np.nan)[:, None]
