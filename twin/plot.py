"""Figures of a run, sized for a paper column, and ``hpctwin plot gantt RUN``.

Every figure is drawn at one column width (3.5 in, the IEEE/ACM two-column width) with 7-8 pt
text, units in every axis label, and saved at 300 dpi (files) or 200 dpi (the HTML report).

Time series (``timeseries.h5``) are piecewise constant: the value at ``t`` holds on
``[t, t + sample_dt)``. They are drawn as step plots. A whole-log series has far more samples than
a figure has pixels (KTH-SP2: 1.9 M samples of 15 s), so when there are more samples than
``max_bins`` the series is aggregated into equal-width time bins and each bin is drawn honestly:
a shaded band from the minimum to the maximum of the samples in the bin and a line at their mean
(the time average, since the samples have equal length). No sample is dropped and no peak is hidden.

The Gantt chart draws each job that ran in a window as a bar over the units it held (from its
``nodes`` range text) and over ``[start, end)`` clipped to the window. Usage::

    hpctwin plot gantt RUN_DIR [--out FILE.png] [--window START:END] [--max-jobs N]

``--window`` in seconds of the log clock; default: the whole run if it has at most ``--max-jobs``
jobs, else one day from the median submit time.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from .ranges import parse_ranges

__all__ = ["COLUMN_WIDTH_IN", "figure", "metric_label", "save_png", "envelope", "step_series", "time_axis",
           "draw_gantt", "gantt_window", "main"]

#: one column of a two-column IEEE/ACM paper (inches)
COLUMN_WIDTH_IN = 3.5
#: matplotlib settings of every figure: small, legible text at column width
STYLE = {"font.size": 7.5, "axes.titlesize": 8, "axes.labelsize": 7.5, "xtick.labelsize": 7, "ytick.labelsize": 7,
         "legend.fontsize": 6.5, "lines.linewidth": 0.8, "axes.linewidth": 0.6, "figure.dpi": 100}


def _plt():
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    return plt


def figure(nrows: int = 1, ncols: int = 1, height_in: float = 2.2, width_in: float = COLUMN_WIDTH_IN, **kw):
    """A (fig, axes) pair at column width with :data:`STYLE` applied."""
    plt = _plt()
    plt.rcParams.update(STYLE)
    kw.setdefault("layout", "constrained")      # labels and titles never overlap or get cut
    return plt.subplots(nrows, ncols, figsize=(width_in, height_in), squeeze=False, **kw)


def save_png(fig, path: str | Path | None = None, dpi: int = 300) -> bytes:
    """PNG bytes of ``fig`` (also written to ``path`` if given); the figure is closed."""
    import io  # noqa: PLC0415
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", pad_inches=0.02, metadata={"Software": None})
    _plt().close(fig)
    data = buf.getvalue()
    if path is not None:
        Path(path).write_bytes(data)
    return data


def envelope(t: np.ndarray, v: np.ndarray, n_bins: int, end: float | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Aggregate samples ``v`` at times ``t`` (each holding until the next) into ``n_bins`` equal bins.

    Returns ``(edges, lo, hi, mean)``: ``n_bins + 1`` bin edges (s) and per bin the minimum, maximum
    and mean of the samples whose interval starts in the bin (NaN for a bin without samples). The
    mean is the time average when samples are equally spaced (the run's ``sample_dt`` grid).
    """
    t = np.asarray(t, dtype=float)
    v = np.asarray(v, dtype=float)
    if len(t) == 0:
        raise ValueError("envelope: empty series")
    t_end = float(end if end is not None else (t[-1] + (t[-1] - t[-2] if len(t) > 1 else 1.0)))
    edges = np.linspace(float(t[0]), t_end, n_bins + 1)
    k = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, n_bins - 1)
    ok = np.isfinite(v)
    k, w = k[ok], v[ok]
    lo = np.full(n_bins, np.inf)
    hi = np.full(n_bins, -np.inf)
    np.minimum.at(lo, k, w)
    np.maximum.at(hi, k, w)
    cnt = np.bincount(k, minlength=n_bins).astype(float)
    tot = np.bincount(k, weights=w, minlength=n_bins)
    empty = cnt == 0
    mean = np.where(empty, np.nan, tot / np.where(empty, 1.0, cnt))
    lo[empty] = np.nan
    hi[empty] = np.nan
    return edges, lo, hi, mean


def time_axis(span_s: float) -> tuple[float, str]:
    """(divisor, unit) for a time axis of ``span_s`` seconds: hours up to 3 days, else days."""
    return (3600.0, "h") if span_s <= 3 * 86400 else (86400.0, "days")


def step_series(ax, t: np.ndarray, v: np.ndarray, *, scale: float = 1.0, t_div: float = 1.0,
                color: str = "C0", label: str | None = None, max_bins: int = 700, end: float | None = None) -> str:
    """Draw a piecewise-constant series on ``ax`` (x = t / t_div, y = v x scale).

    At most ``max_bins`` samples: a step plot of every sample. More: the min/max band and mean line
    of :func:`envelope`. Returns a sentence saying which, for captions.
    """
    t = np.asarray(t, dtype=float)
    v = np.asarray(v, dtype=float) * scale
    if len(t) <= max_bins:
        t_end = end if end is not None else (t[-1] + (t[-1] - t[-2] if len(t) > 1 else 1.0))
        x = np.append(t, t_end) / t_div
        ax.step(x, np.append(v, v[-1] if len(v) else np.nan), where="post", color=color, label=label)
        return f"every sample drawn as a step ({len(t)} samples)"
    edges, lo, hi, mean = envelope(t, v, max_bins, end)
    x = edges / t_div
    ax.fill_between(x[:-1], lo, hi, step="post", color=color, alpha=0.3, linewidth=0)
    ax.step(np.append(x[:-1], x[-1]), np.append(mean, mean[-1]), where="post", color=color, label=label,
            linewidth=0.6)
    width = (edges[1] - edges[0])
    return (f"{len(t):,} samples in {max_bins} bins of {width / 3600:.3g} h: band = min..max of the samples in a bin, "
            "line = their mean")


#: metric-name suffix -> unit shown in an axis label
_UNITS = (("_kwh", "kWh"), ("_mwh", "MWh"), ("_kw", "kW"), ("_w", "W"), ("_pct", "%"), ("_s", "s"), ("_h", "h"),
          ("_j", "J"), ("_bytes", "bytes"))


def metric_label(name: str) -> str:
    """Axis label of a metric column: ``mean_wait_s`` -> ``mean wait (s)``; bounded slowdowns say tau."""
    for suf, unit in _UNITS:
        if name.endswith(suf):
            return f"{name[: -len(suf)].replace('_', ' ')} ({unit})"
    if "bsld" in name:
        return name.replace("_", " ").replace("bsld", "bounded slowdown") + " (tau = 10 s)"
    if name == "utilisation":
        return "utilisation (fraction of units)"
    return name.replace("_", " ")


# ------------------------------------------------------------------------------------- Gantt chart
def gantt_window(jobs: pd.DataFrame, max_jobs: int) -> tuple[float, float]:
    """Default window (s): the whole run if it has at most ``max_jobs`` jobs that ran, else one day
    from the median submit time."""
    st, en = jobs["start"].to_numpy(float), jobs["end"].to_numpy(float)
    ran = np.isfinite(st)
    if not ran.any():
        raise ValueError("no job of the run started: nothing to draw")
    if ran.sum() <= max_jobs:
        return float(np.nanmin(st)), float(np.nanmax(en))
    t0 = float(np.median(jobs["submit"].to_numpy(float)))
    return t0, t0 + 86400.0


#: distinct bar colours for the busiest users (tab20 without its greys); other users are drawn grey
USER_COLOURS = 18
OTHER_GREY = "#b0b0b0"


def _user_colours(users: np.ndarray, plt) -> tuple[dict, int]:
    """``({user: colour}, users drawn grey)``: the `USER_COLOURS` users with most bars get distinct
    tab20 colours (greys left out), in order of their job count; a run without user ids gets one
    colour per bar index instead (returned as an empty map)."""
    known = users[users >= 0]
    if len(known) == 0:
        return {}, 0
    ids, counts = np.unique(known, return_counts=True)
    order = ids[np.lexsort((ids, -counts))]
    palette = [c for i, c in enumerate(plt.get_cmap("tab20").colors) if i not in (14, 15)]
    return {int(u): palette[i] for i, u in enumerate(order[:USER_COLOURS].tolist())}, max(0, len(order) - USER_COLOURS)


def time_label(t0: float, unit: str, unix_start: float | None = None) -> str:
    """The x-axis label of a window starting at ``t0`` (s of the log clock): the calendar time (UTC) of
    the start when the log's Unix start time is known, else the log time in days."""
    if isinstance(unix_start, (int, float)) and not isinstance(unix_start, bool) and math.isfinite(unix_start):
        import datetime as _dt  # noqa: PLC0415 - only for a calendar label
        when = _dt.datetime.fromtimestamp(unix_start + t0, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        return f"{'hours' if unit == 'h' else unit} from {when}"
    return f"{'hours' if unit == 'h' else unit} from day {t0 / 86400:,.2f} of the log"


def draw_gantt(ax, jobs: pd.DataFrame, total_units: int, window: tuple[float, float], max_jobs: int = 2000,
               t_div: float | None = None, unix_start: float | None = None) -> tuple[int, int, str]:
    """Bars of the jobs that ran in ``window`` (s) over their units; returns (shown, in window, unit).

    Jobs are taken in start order; at most ``max_jobs`` are drawn (the caller says so). The x axis
    is time after the window start in hours (or days for windows over 3 days), labelled with the
    window's calendar start when ``unix_start`` (the log's Unix time 0) is given. Bars are coloured by
    user (the busiest `USER_COLOURS` users distinct, the others grey, said in a legend).
    """
    if "nodes" not in jobs.columns:
        raise ValueError("jobs.csv has no 'nodes' column: the run did not record placements")
    t0, t1 = window
    st, en = jobs["start"].to_numpy(float), jobs["end"].to_numpy(float)
    sel = np.flatnonzero(np.isfinite(st) & (st < t1) & (en > t0))
    sel = sel[np.argsort(st[sel], kind="stable")]
    shown = sel[:max_jobs]
    div, unit = (t_div, "h" if t_div == 3600.0 else "days") if t_div else time_axis(t1 - t0)
    plt = _plt()
    users = (jobs["user"].to_numpy() if "user" in jobs.columns else np.full(len(jobs), -1))
    users = np.where(pd.isna(users), -1, users).astype(np.int64)
    colours, greyed = _user_colours(users[shown], plt)
    cmap = plt.get_cmap("tab20")
    nodes = jobs["nodes"].fillna("").astype(str).to_numpy()
    for k, j in enumerate(shown.tolist()):
        colour = colours.get(int(users[j]), OTHER_GREY) if colours else cmap(k % 20)
        ids = parse_ranges(nodes[j])
        if len(ids) == 0:
            continue
        br = np.flatnonzero(np.diff(ids) != 1)
        lo = np.concatenate(([ids[0]], ids[br + 1]))
        hi = np.concatenate((ids[br], [ids[-1]]))
        a, b = max(st[j], t0), min(en[j], t1)
        for lo_k, hi_k in zip(lo.tolist(), hi.tolist()):      # one bar per contiguous range of units
            ax.broken_barh([((a - t0) / div, (b - a) / div)], (lo_k, hi_k - lo_k + 1), facecolors=colour,
                           edgecolor="k", linewidth=0.15)
    ax.set_xlim(0, (t1 - t0) / div)
    ax.set_ylim(0, total_units)
    ax.set_xlabel(time_label(t0, unit, unix_start))
    ax.set_ylabel("allocation unit (id)")
    if colours:
        from matplotlib.patches import Patch  # noqa: PLC0415 - matplotlib is loaded by _plt already
        handles = [Patch(facecolor=c, label=f"user {u}") for u, c in list(colours.items())[:8]]
        if len(colours) > 8 or greyed:
            more = len(colours) - 8 if len(colours) > 8 else 0
            handles.append(Patch(facecolor=OTHER_GREY, label=(f"{more} more coloured, " if more else "")
                                 + f"{greyed} other users grey"))
        ax.legend(handles=handles, fontsize=4.5, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return len(shown), len(sel), unit


def _window(text: str) -> tuple[float, float]:
    try:
        a, b = (float(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--window expects START:END in seconds, got {text!r}") from None
    if not b > a:
        raise argparse.ArgumentTypeError(f"--window {text!r}: END must be after START")
    return a, b


def gantt_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="hpctwin plot gantt", description="Gantt chart of a run (PNG, column width).")
    ap.add_argument("run_dir")
    ap.add_argument("--out", default=None, help="PNG file (default: RUN_DIR/gantt.png)")
    ap.add_argument("--window", type=_window, default=None, metavar="START:END",
                    help="time window in s of the log clock (default: whole run if <= --max-jobs jobs, else one "
                         "day from the median submit)")
    ap.add_argument("--max-jobs", type=int, default=2000, help="draw at most N jobs (in start order; default 2000)")
    a = ap.parse_args(argv)
    run_dir = Path(a.run_dir)
    from .runread import RunReadError, check_run_folder, machine_units, read_jobs, read_summary  # noqa: PLC0415
    try:                      # a missing, truncated or corrupt run folder: one line naming the file
        check_run_folder(run_dir)
        summ = read_summary(run_dir, required=False)
        jobs = read_jobs(run_dir, summary=summ)
        total = machine_units(run_dir, summ, jobs)
    except RunReadError as e:
        print(f"hpctwin plot: error: {e}", file=sys.stderr)
        return 2
    try:
        window = a.window or gantt_window(jobs, a.max_jobs)
        fig, ax = figure(height_in=2.6)
        shown, inwin, _ = draw_gantt(ax[0][0], jobs, total, window, a.max_jobs,
                                     unix_start=summ.get("unix_start_time"))
    except ValueError as e:
        print(f"hpctwin plot: error: {run_dir}: {e}", file=sys.stderr)
        return 2
    import textwrap  # noqa: PLC0415
    title = f"{summ.get('workload', run_dir.name)} / {summ.get('scheduler', '?')}"
    ax[0][0].set_title("\n".join(textwrap.wrap(title, 55)))          # wrapped, never cut
    if shown < inwin:
        ax[0][0].text(0.99, 0.98, f"first {shown} of {inwin} jobs", transform=ax[0][0].transAxes, ha="right",
                      va="top", fontsize=6)
    out = Path(a.out) if a.out else run_dir / "gantt.png"
    save_png(fig, out)
    print(f"gantt: {out} ({shown} of {inwin} jobs in [{window[0]:.0f}, {window[1]:.0f}] s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``hpctwin plot KIND RUN ...``; KIND: gantt."""
    argv = list(sys.argv[1:] if argv is None else argv)
    kinds = {"gantt": gantt_main}
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: hpctwin plot gantt RUN_DIR [--out FILE] [--window START:END] [--max-jobs N]")
        return 0 if argv else 2
    if argv[0] not in kinds:
        print(f"hpctwin plot: error: unknown plot {argv[0]!r}; available: {', '.join(kinds)}", file=sys.stderr)
        return 2
    return kinds[argv[0]](argv[1:])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
