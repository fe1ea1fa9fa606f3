"""Exact integrals and interval averages of piecewise-constant series given as step changes.

A series is described by its value ``v0`` before the first change and a list of changes
``(t_i, d_i)``: the value jumps by ``d_i`` at time ``t_i``. The integral from ``t0`` to ``x`` is
``v0 * (x - t0) + sum_i d_i * max(0, x - t_i)`` (for ``t_i >= t0``), which numpy evaluates for all
grid points at once with cumulative sums and `searchsorted`. No per-second loop.

`interval_means` is the one interval average of the package: one series, several series changing
at the same times, or one series per column (the per-CDU heat) through ``col``.
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


def interval_means(t: np.ndarray, d, v0, edges: np.ndarray, col: np.ndarray | None = None):
    """Average value over each interval ``[edges[k], edges[k+1])`` of step series.

    ``t``: change times (s; any order); ``d``: the jumps at ``t`` (an array), or a list of jump arrays
    of several series that change at the same times; ``v0``: the value(s) before the first change
    (a float per series; with ``col``, an array with one value per column); ``col``: optional
    column of each change, for one series per column.

    Returns an array of ``len(edges) - 1`` averages (a list of them for a list of series), or with
    ``col`` an array of shape ``(len(edges) - 1, len(v0))``. Each jump is binned into the interval
    holding it: it adds ``d * (edges[k+1] - t)`` to that interval and ``d * width`` to every later
    one (a cumulative sum), so memory is O(grid x columns + changes). Jumps at or after the last
    edge do not count; jumps before the first edge count from the first interval.
    """
    many = isinstance(d, (list, tuple))
    ds = list(d) if many else [d]
    v0s = list(v0) if many else [v0]
    e = np.asarray(edges, dtype=float)
    t = np.asarray(t, dtype=float)
    nint = len(e) - 1
    w = np.diff(e)
    ncol = 1 if col is None else len(np.atleast_1d(v0s[0]))
    c = np.zeros(len(t), dtype=np.int64) if col is None else np.asarray(col, dtype=np.int64)
    k = np.searchsorted(e, t, side="right") - 1          # interval holding t (-1: before the grid)
    keep = k < nint
    inside = keep & (k >= 0)
    full_bin = (np.maximum(k, -1)[keep] + 1) * ncol + c[keep]
    part_bin = k[inside] * ncol + c[inside]
    tail = e[np.minimum(k[inside] + 1, nint)] - t[inside]
    w_safe = np.where(w > 0, w, np.nan)[:, None]
    out = []
    for dj, v in zip(ds, v0s):
        dj = np.asarray(dj, dtype=float)
        acc = np.bincount(full_bin, weights=dj[keep], minlength=(nint + 1) * ncol).reshape(nint + 1, ncol)
        part = np.bincount(part_bin, weights=dj[inside] * tail, minlength=nint * ncol).reshape(nint, ncol)
        base = np.atleast_1d(np.asarray(v, dtype=float))[None, :]
        integ = (np.cumsum(acc[:nint], axis=0) + base) * w[:, None] + part
        with np.errstate(invalid="ignore", divide="ignore"):
            m = integ / w_safe
        out.append(m if col is not None else m[:, 0])
    return out if many else out[0]


def integral(t: np.ndarray, d: np.ndarray, v0: float, t0: float, t1: float) -> float:
    """Exact integral of the step series over ``[t0, t1]``."""
    return float(v0 * (t1 - t0) + ramp_integral(t, d, np.array([t1]))[0])


def levels(t: np.ndarray, d: np.ndarray, v0: float) -> np.ndarray:
    """Value just after each change (same length as ``t``)."""
    return v0 + np.cumsum(d)
