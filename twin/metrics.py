"""Scheduling metrics, with the conventions of DESIGN.md section 7.

* wait = start - submit (s); turnaround = end - submit (s); run = end - start (s)
* bounded slowdown = max(1, (wait + run) / max(run, tau)), tau = 10 s by default
* utilisation = used unit-seconds / (units x span), span = last end - first submit (the whole run;
  no warm-up or cool-down window is excluded unless ``window`` is given)
* makespan = last end - first submit (s)
"""
from __future__ import annotations

import numpy as np

TAU = 10.0

CONVENTIONS = ("wait = start - submit; bsld = max(1, (wait + run) / max(run, tau)) with tau = {tau:g} s; "
               "utilisation = used unit-seconds / (units x span), span = first submit .. last end{window}")


def bounded_slowdown(wait: np.ndarray, run: np.ndarray, tau: float = TAU) -> np.ndarray:
    """Per-job bounded slowdown (dimensionless)."""
    return np.maximum(1.0, (wait + run) / np.maximum(run, tau))


def median(x: np.ndarray) -> float | np.floating:
    """``np.median(x)`` of a 1-D array, bit for bit, without importing ``numpy.ma`` (~9 ms, which
    ``np.median``'s NaN check does): the middle value (odd length) or the `np.mean` of the two middle
    values (even length) of a partitioned copy, in the unit of ``x``; NaN when ``x`` holds a NaN (the
    NaN itself, as ``np.median`` gives it) or is empty."""
    a = np.asarray(x)
    n = a.size
    if n == 0:
        return float("nan")
    half = n // 2
    kth = [half] if n % 2 else [half - 1, half]
    nans = np.issubdtype(a.dtype, np.inexact) or a.dtype.kind in "Mm"
    if nans:
        kth.append(-1)                   # NaNs sort last: the last value says whether there is one
    part = np.partition(a.ravel(), kth)
    mid = np.mean(part[half:half + 1] if n % 2 else part[half - 1:half + 1], axis=0)
    if nans and np.isnan(part[-1]):
        return part[-1]
    return mid


def percentile(x: np.ndarray, q: float) -> float | np.floating:
    """``np.percentile(x, q)`` (its default linear method) of a 1-D array, bit for bit: for float64 data
    and a scalar ``q`` in [0, 100] the same partition and interpolation without ``np.unique`` (which
    imports ``numpy.ma``, ~9 ms); otherwise ``np.percentile`` itself. In the unit of ``x``; NaN when
    ``x`` holds a NaN (the NaN itself, as ``np.percentile`` gives it)."""
    a = np.asarray(x)
    if a.dtype != np.float64 or a.size == 0 or type(q) not in (int, float) or not 0 <= q <= 100:
        return np.percentile(a, q)
    n = a.size
    at = (n - 1) * np.true_divide(q, 100)           # the virtual index
    lo = int(np.floor(at))
    hi = lo + 1
    if at >= n - 1:
        lo = hi = -1
    part = np.partition(a.ravel(), sorted({0, -1, lo, hi}))     # np.unique's kth array
    if np.isnan(part[-1]):
        return part[-1]
    below, above = part[lo], part[hi]
    t = float(at - lo)
    diff = above - below
    out = np.add(below, diff * t)                   # numpy's _lerp: both forms, the second from t = 0.5 on
    if t >= 0.5:
        out = np.subtract(above, diff * (1 - t))
    return out


def utilisation_window(start: np.ndarray, end: np.ndarray, procs: np.ndarray, total: int,
                       t0: float, t1: float) -> float:
    """Fraction of ``total x (t1 - t0)`` unit-seconds used by jobs, clipped to the window."""
    if t1 <= t0:
        return float("nan")
    s = np.clip(start, t0, t1)
    e = np.clip(end, t0, t1)
    return float(np.sum(procs * (e - s)) / (total * (t1 - t0)))


def summarise(submit: np.ndarray, start: np.ndarray, end: np.ndarray, procs: np.ndarray,
              total: int, tau: float = TAU, window: tuple[float, float] | None = None) -> dict:
    """Summary figures over jobs that ran. ``window`` (s, s) restricts the jobs counted (by submit
    time) and the utilisation span to a measured window (warm-up/cool-down exclusion)."""
    ran = ~np.isnan(start)
    submit, start, end, procs = submit[ran], start[ran], end[ran], procs[ran]
    if len(submit) == 0:
        return {"jobs": 0}
    wait = start - submit
    run = end - start
    bsld = bounded_slowdown(wait, run, tau)
    t_first, t_last = float(submit.min()), float(end.max())
    if window is not None:
        t0, t1 = window
        sel = (submit >= t0) & (submit < t1)
    else:
        t0, t1 = t_first, t_last
        sel = np.ones(len(submit), dtype=bool)
    w, b = wait[sel], bsld[sel]
    return {
        "jobs": int(sel.sum()),
        "mean_wait_s": float(w.mean()) if len(w) else float("nan"),
        "median_wait_s": float(median(w)) if len(w) else float("nan"),
        "p95_wait_s": float(percentile(w, 95)) if len(w) else float("nan"),
        "max_wait_s": float(w.max()) if len(w) else float("nan"),
        "mean_bsld": float(b.mean()) if len(b) else float("nan"),
        "median_bsld": float(median(b)) if len(b) else float("nan"),
        "max_bsld": float(b.max()) if len(b) else float("nan"),
        "mean_turnaround_s": float((w + run[sel]).mean()) if len(w) else float("nan"),
        "utilisation": utilisation_window(start, end, procs, total, t0, t1),
        "makespan_s": t_last - t_first,
        "tau_s": tau,
        "window_s": [t0, t1],
    }


def last_at_or_before(change_t: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Index of the last ``change_t`` <= each ``t`` (-1 if none): ``searchsorted(change_t, t, "right") - 1``.

    Both arrays sorted. When ``t`` is much longer than ``change_t`` (a year-long 15 s grid against a
    log's events) the changes are placed among the grid points instead (``searchsorted(t, change_t,
    "left")`` counts the grid points before each change) and a running count of changes gives each grid
    point its answer: the same integers from the same comparisons, at the cost of a pass over the grid
    instead of a binary search per grid point.
    """
    if len(t) < 4 * len(change_t) + 64:
        return np.searchsorted(change_t, t, side="right") - 1
    pos = np.searchsorted(t, change_t, side="left")      # change k lies at or before t[j] iff pos[k] <= j
    counts = np.bincount(pos, minlength=len(t) + 1)[:len(t)]
    i = np.cumsum(counts)
    i -= 1
    return i


def change_runs(change_t: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """``pos[k]``: the first grid index at or after ``change_t[k]`` (both sorted). Grid points
    ``pos[k] <= j < pos[k+1]`` have change ``k`` as their last change at or before them
    (`last_at_or_before`), those before ``pos[0]`` none; a change tied with a later one owns no point."""
    return np.searchsorted(grid, change_t, side="left")


def _repeat_runs(pos: np.ndarray, a: int, b: int) -> tuple[int, np.ndarray]:
    """For grid block ``[a, b)``: the number of points before the first change and, per change, how
    many of the block's points it owns (``np.repeat(x, counts)`` spreads a per-change ``x`` over the
    block's remaining points: the gather ``x[last_at_or_before(...)]`` without an index array)."""
    ends = np.empty(len(pos) + 1, dtype=np.int64)
    ends[:-1] = pos
    ends[-1] = b
    np.clip(ends, a, b, out=ends)
    return int(ends[0] - a), np.diff(ends)


def interval_average(change_t: np.ndarray, values: np.ndarray, grid: np.ndarray, dt: float,
                     block: int = 1 << 20, dtype=np.float64) -> np.ndarray:
    """Exact averages over ``[grid[k], grid[k] + dt)`` of a piecewise-constant signal that takes
    ``values[i]`` from ``change_t[i]`` to ``change_t[i+1]`` (0 before the first change); ``grid``
    sorted.

    Computed in float64 from the signal's cumulative integral at the interval ends, ``cum[i] +
    values[i] * (t - change_t[i])`` with ``i`` the last change at or before ``t`` (0 before the
    first change), in blocks of ``block`` grid points, and stored as ``dtype`` (float32 halves the
    memory of year-long runs at a 15 s step: the same values as computing in float64 and converting
    the whole array). The per-point terms are spread over each change's run of grid points
    (`change_runs`) rather than gathered by index: the same floating-point operations, the same bytes.
    """
    out = np.zeros(len(grid), dtype=dtype)
    if len(change_t) == 0 or len(grid) == 0:
        return out
    values = np.asarray(values, dtype=np.float64)
    cum = np.concatenate(([0.0], np.cumsum(values[:-1] * np.diff(change_t))))
    pos = change_runs(change_t, grid)

    def integral(t: np.ndarray) -> np.ndarray:          # at arbitrary sorted points (interval ends)
        i = last_at_or_before(change_t, t)
        before = i < 0
        np.maximum(i, 0, out=i)
        r = cum[i] + values[i] * (t - change_t[i])
        r[before] = 0.0
        return r

    for a in range(0, len(grid), block):
        b = min(a + block, len(grid))
        g = grid[a:b]
        lead, counts = _repeat_runs(pos, a, b)
        lo = np.zeros(len(g))                            # the integral at each grid point
        r = lo[lead:]
        np.subtract(g[lead:], np.repeat(change_t, counts), out=r)
        r *= np.repeat(values, counts)
        r += np.repeat(cum, counts)
        e = g + dt
        # an interval's end is usually the next grid point (the same float): its integral is reused,
        # and only the other ends are searched (the same values as integral(e): it works point by point)
        eq = e[:-1] == g[1:]
        hi = np.empty_like(lo)
        if eq.all():                        # the usual grid: every end is the next start
            hi[:-1] = lo[1:]
            hi[-1:] = integral(e[-1:])
        else:
            same = np.flatnonzero(eq)
            hi[same] = lo[same + 1]
            other = np.ones(len(g), dtype=bool)
            other[same] = False
            hi[other] = integral(e[other])
        hi -= lo
        hi /= dt
        out[a:b] = hi
    return out


def sample_at(change_t: np.ndarray, values: np.ndarray, grid: np.ndarray, dtype=None,
              block: int = 1 << 20) -> np.ndarray:
    """The value in force at each grid time (0 before the first change), as ``dtype`` (default: the
    values' own), computed in blocks of ``block`` grid points (small temporaries on long grids);
    ``change_t`` and ``grid`` sorted."""
    out = np.zeros(len(grid), dtype=dtype or (values.dtype if len(values) else float))
    if len(change_t) == 0 or len(grid) == 0:
        return out
    pos = change_runs(change_t, grid)
    vals = np.asarray(values).astype(out.dtype, copy=False)
    for a in range(0, len(grid), block):
        b = min(a + block, len(grid))
        lead, counts = _repeat_runs(pos, a, b)
        out[a + lead:b] = np.repeat(vals, counts)
    return out
