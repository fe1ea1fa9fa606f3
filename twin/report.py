"""``hpctwin report RUN_DIR``: one self-contained HTML page about a run (PNG figures embedded).

Sections: the summary table with every convention stated; utilisation and queue length over time;
wait and bounded-slowdown distributions per job-size class; a Gantt-style view of a chosen window
(each job a bar over its units and its [start, end)); power and PUE over time when the run had
``--power on``. Figures are matplotlib PNGs embedded as base64 ``data:`` URIs, so the page is one
file with no external reference.

Usage: ``hpctwin report RUN_DIR [--out FILE] [--window START:END] [--max-gantt-jobs N]``
(``--window`` in seconds of the log clock; default: one day starting at the median submit time,
clipped to the run).
"""
from __future__ import annotations

import argparse
import base64
import html
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from . import plot as P

#: job-size classes (allocation units), upper bounds inclusive
SIZE_EDGES = (1, 4, 16, 64, 256, 1024, 4096)


class ReportError(ValueError):
    """A folder that is not a finished run, or a bad option."""


def _png(fig) -> str:
    """The figure as a ``data:`` URI (200 dpi: 700 px for a 3.5 in column figure)."""
    return "data:image/png;base64," + base64.b64encode(P.save_png(fig, dpi=200)).decode("ascii")


def load(run_dir: Path) -> tuple[pd.DataFrame, dict, dict, str]:
    """(jobs, time series {name: (values, units)}, summary, config text) of a run folder, checked
    (`twin.runread`: a missing, truncated or corrupt file is a `RunReadError` naming it)."""
    from .runread import check_run_folder, read_config_text, read_jobs, read_summary, read_timeseries  # noqa: PLC0415
    check_run_folder(run_dir)
    summary = read_summary(run_dir)
    jobs = read_jobs(run_dir, ("job_id", "submit", "start", "end", "procs", "wait", "bsld"), summary,
                     keep_default_na=True)
    ts = read_timeseries(run_dir)
    return jobs, ts, summary, read_config_text(run_dir)


def size_class(procs: np.ndarray) -> np.ndarray:
    """Label of each job's size class (``1``, ``2-4``, ``5-16``, ...)."""
    edges = np.asarray(SIZE_EDGES)
    i = np.searchsorted(edges, procs, side="left")
    labels = []
    for k in range(len(edges) + 1):
        lo = 1 if k == 0 else edges[k - 1] + 1
        labels.append(str(lo) if k == 0 else (f">{edges[-1]}" if k == len(edges) else f"{lo}-{edges[k]}"))
    return np.array(labels, dtype=object)[i]


def _series_end(ts: dict) -> float | None:
    t = ts["time"][0]
    return float(t[-1] + (t[-1] - t[-2])) if len(t) > 1 else None


def fig_util_queue(ts: dict) -> tuple[str, str] | None:
    """Utilisation (%) and queue length (jobs) over time; (PNG URI, how the series was drawn)."""
    if "time" not in ts or "utilisation" not in ts:
        return None
    t = ts["time"][0]
    div, unit = P.time_axis(float(t[-1] - t[0]) if len(t) else 0.0)
    fig, ax = P.figure(2, 1, height_in=3.0, sharex=True)
    how = P.step_series(ax[0][0], t, ts["utilisation"][0], scale=100.0, t_div=div, end=_series_end(ts))
    ax[0][0].set_ylabel("utilisation (%)")
    ax[0][0].set_ylim(0, 105)
    if "queue_length" in ts:
        P.step_series(ax[1][0], t, ts["queue_length"][0], t_div=div, color="C3", end=_series_end(ts))
    ax[1][0].set_ylabel("queue length (jobs)")
    ax[1][0].set_ylim(bottom=0)
    ax[1][0].set_xlabel(f"time ({unit}, log clock)")
    fig.align_ylabels()
    return _png(fig), how


def fig_distributions(jobs: pd.DataFrame) -> str | None:
    """Wait (s) and bounded slowdown per job-size class: boxes = quartiles, whiskers = 5th-95th pct."""
    ran = jobs[np.isfinite(jobs["start"])]
    if ran.empty:
        return None
    cls = size_class(ran["procs"].to_numpy())
    order = [c for c in dict.fromkeys(size_class(np.array(sorted(set(ran["procs"].tolist())))))]
    fig, axes = P.figure(2, 1, height_in=3.6, sharex=True)
    for a, col, label in ((axes[0][0], "wait", "wait (s)"), (axes[1][0], "bsld", "bounded slowdown")):
        data = [np.maximum(ran[col].to_numpy()[cls == c], 1e-1 if col == "wait" else 1.0) for c in order]
        a.boxplot(data, whis=(5, 95), showfliers=False, widths=0.6,
                  medianprops={"color": "C3", "linewidth": 0.8}, boxprops={"linewidth": 0.6},
                  whiskerprops={"linewidth": 0.6}, capprops={"linewidth": 0.6})
        a.set_yscale("log")
        a.set_ylabel(label + (" (0 as 0.1 s)" if col == "wait" else ", tau = 10 s"))
    axes[1][0].set_xticks(range(1, len(order) + 1))
    axes[1][0].set_xticklabels([f"{c}\n({int((cls == c).sum())})" for c in order], fontsize=6)
    axes[1][0].set_xlabel("job size (units); (number of jobs)")
    fig.align_ylabels()
    return _png(fig)


def default_window(jobs: pd.DataFrame) -> tuple[float, float]:
    s = jobs["submit"].to_numpy()
    t0 = float(np.median(s)) if len(s) else 0.0
    return t0, t0 + 86400.0


def fig_gantt(jobs: pd.DataFrame, total: int, window: tuple[float, float], max_jobs: int) -> tuple[str | None, int]:
    if "nodes" not in jobs.columns:
        return None, 0
    fig, ax = P.figure(height_in=2.6)
    shown, _, _ = P.draw_gantt(ax[0][0], jobs, total, window, max_jobs)
    if shown == 0:
        P.save_png(fig)
        return None, 0
    return _png(fig), shown


def fig_power(ts: dict) -> str | None:
    """Facility and IT power (kW) and PUE over time."""
    if "power_facility_w" not in ts:
        return None
    t = ts["time"][0]
    div, unit = P.time_axis(float(t[-1] - t[0]) if len(t) else 0.0)
    fig, ax = P.figure(2, 1, height_in=3.0, sharex=True)
    P.step_series(ax[0][0], t, ts["power_facility_w"][0], scale=1e-3, t_div=div, label="facility", end=_series_end(ts))
    if "power_it_w" in ts:
        P.step_series(ax[0][0], t, ts["power_it_w"][0], scale=1e-3, t_div=div, color="C1", label="IT",
                      end=_series_end(ts))
    ax[0][0].set_ylabel("power (kW)")
    ax[0][0].set_ylim(bottom=0)
    ax[0][0].legend(loc="lower right", ncol=2)
    if "pue" in ts:
        P.step_series(ax[1][0], t, ts["pue"][0], t_div=div, color="C2", end=_series_end(ts))
    ax[1][0].set_ylabel("PUE (facility / IT input)")
    ax[1][0].set_xlabel(f"time ({unit}, log clock)")
    fig.align_ylabels()
    return _png(fig)


_ABS_PATH = re.compile(r"(?<![\w.~])/(?:[^\s/,;'\"()\[\]]+/)+([^\s/,;'\"()\[\]]+)")


def short_paths(text: str) -> str:
    """Absolute paths in ``text`` replaced by their file names (a report is shared; home folders are not)."""
    return _ABS_PATH.sub(r"\1", text)


def _fmt(v, unit: str = "") -> str:
    if isinstance(v, bool) or v is None:
        return "n/a" if v is None else ("yes" if v else "no")
    if isinstance(v, float):
        if not math.isfinite(v):
            return "n/a"
        txt = f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"
    elif isinstance(v, int):
        txt = f"{v:,}"
    elif isinstance(v, dict):
        txt = ", ".join(f"{k}: {x}" for k, x in v.items()) or "none"
    elif isinstance(v, list):
        txt = ", ".join(short_paths(str(x)) for x in v)
    else:
        txt = short_paths(str(v))
    return f"{txt} {unit}".rstrip() if txt not in ("n/a", "none") else txt


#: (section, [(summary key, label, unit)]) of the summary table, in reading order
SUMMARY_LAYOUT = [
    ("Run", [("workload", "workload", ""), ("workload_source", "workload source", ""),
             ("scheduler", "scheduler", ""), ("system", "system", ""), ("machine_units", "machine size", "units"),
             ("machine_size_source", "machine size from", ""), ("estimate_model", "runtime estimate", ""),
             ("kill_at_walltime", "kill at walltime", ""), ("jobs_in_log", "jobs in the log", ""),
             ("jobs_simulated", "jobs simulated", ""), ("jobs_skipped", "jobs skipped", ""),
             ("jobs_killed_at_walltime", "jobs killed at walltime", "")]),
    ("Scheduling metrics", [("mean_wait_s", "mean wait", "s"), ("median_wait_s", "median wait", "s"),
                            ("p95_wait_s", "95th percentile wait", "s"), ("max_wait_s", "maximum wait", "s"),
                            ("mean_bsld", "mean bounded slowdown", ""), ("median_bsld", "median bounded slowdown", ""),
                            ("max_bsld", "maximum bounded slowdown", ""),
                            ("mean_turnaround_s", "mean turnaround", "s"), ("utilisation", "utilisation", "%"),
                            ("makespan_s", "makespan", "s"), ("tau_s", "bounded-slowdown tau", "s")]),
    ("Energy and power", [("energy_facility_kwh", "facility energy", "kWh"), ("energy_it_kwh", "IT energy", "kWh"),
                          ("energy_jobs_kwh", "jobs' energy", "kWh"), ("energy_idle_kwh", "idle energy", "kWh"),
                          ("energy_loss_kwh", "conversion losses", "kWh"),
                          ("energy_cooling_kwh", "cooling energy", "kWh"),
                          ("avg_facility_power_w", "mean facility power", "W"),
                          ("peak_facility_power_w", "peak facility power", "W"),
                          ("max_facility_power_w", "maximum facility power (sample)", "W"),
                          ("idle_facility_power_w", "idle facility power", "W"), ("mean_pue", "mean PUE", ""),
                          ("price_per_kwh", "energy price", "per kWh"), ("energy_cost", "energy cost", "")]),
    ("Simulation", [("events", "events", ""), ("scheduling_passes", "scheduling passes", ""),
                    ("wall_seconds", "wall time", "s"), ("simulation_seconds", "engine time", "s"),
                    ("jobs_per_second", "jobs per second", ""), ("code_version", "hpctwin version", "")]),
]
#: shown elsewhere in the report (the conventions box, the notes list) or duplicated by another key
_NOT_IN_TABLE = {"conventions", "power_conventions", "notes", "power_notes", "window_s", "jobs"}
_SUFFIX_UNITS = (("_kwh", "kWh"), ("_w", "W"), ("_s", "s"), ("_j", "J"), ("_pct", "%"), ("_h", "h"))


def _unit(key: str) -> str:
    return next((u for suf, u in _SUFFIX_UNITS if key.endswith(suf)), "")


def summary_table(s: dict) -> list[tuple[str, str, str]]:
    """``(section, quantity, value with unit)`` rows of a run summary, readable and path-free.

    Known keys come in :data:`SUMMARY_LAYOUT` order with their units; any other scalar key goes to
    "Other" (unit from its suffix), a nested table (failures, placement...) to its own section.
    """
    rows, seen = [], set(_NOT_IN_TABLE)
    for section, keys in SUMMARY_LAYOUT:
        for key, label, unit in keys:
            if key in s:
                seen.add(key)
                v = s[key]
                rows.append((section, label, f"{100 * v:.2f} %" if unit == "%" and isinstance(v, float)
                             else _fmt(v, unit)))
    for key, v in s.items():
        if key in seen:
            continue
        if isinstance(v, dict) and v:
            rows += [(key.replace("_", " "), k, _fmt(x, _unit(k))) for k, x in v.items()]
        else:
            rows.append(("Other", key, _fmt(v, _unit(key))))
    return rows


def _summary_rows(s: dict, prefix: str = "") -> list[tuple[str, str]]:
    """One row per summary value; a nested table (failures, gpu_fragmentation...) as ``table.key`` rows."""
    rows = []
    for k, v in s.items():
        if isinstance(v, dict) and v and prefix == "":
            rows += _summary_rows(v, f"{k}.")
            continue
        if isinstance(v, float):
            v = "n/a" if not math.isfinite(v) else f"{v:,.6g}"
        elif isinstance(v, (dict, list)):
            v = json.dumps(v)
        rows.append((prefix + k, short_paths(str(v))))
    return rows


def _summary_html(s: dict) -> str:
    out, last = ["<table><tr><th>quantity</th><th>value</th></tr>"], None
    for section, label, value in summary_table(s):
        if section != last:
            out.append(f"<tr><th colspan='2' class='sec'>{html.escape(section)}</th></tr>")
            last = section
        out.append(f"<tr><td>{html.escape(label)}</td><td class='num'>{html.escape(value)}</td></tr>")
    out.append("</table>")
    notes = [short_paths(str(n)) for n in list(s.get("notes") or []) + list(s.get("power_notes") or [])]
    if notes:
        out.append("<p>Notes:</p><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    return "".join(out)


def build_html(run_dir: Path, window: tuple[float, float] | None = None, max_gantt_jobs: int = 400) -> str:
    from .runread import machine_units  # noqa: PLC0415
    jobs, ts, s, cfg = load(run_dir)
    total = machine_units(run_dir, s, jobs)
    window = window or default_window(jobs)
    name = html.escape(str(run_dir.resolve().name))
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>hpctwin report: {name}"
             "</title><style>body{font-family:sans-serif;max-width:900px;margin:auto}table{border-collapse:collapse;"
             "font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}th.sec{background:#eee}"
             "td.num{font-variant-numeric:tabular-nums}img{width:700px;max-width:100%}"
             ".conv{background:#f4f4f4;padding:6px}</style></head><body>"]
    parts.append(f"<h1>Run report: {html.escape(short_paths(str(s.get('workload'))))} / "
                 f"{html.escape(str(s.get('scheduler')))}</h1>")
    parts.append(f"<p>Run folder <code>{name}</code>; machine {s.get('machine_units')} units "
                 f"({html.escape(short_paths(str(s.get('machine_size_source'))))}); system "
                 f"{html.escape(short_paths(str(s.get('system') or 'none (the log header or --nodes)')))}; "
                 "estimate model "
                 f"{html.escape(str(s.get('estimate_model')))}; jobs simulated {s.get('jobs_simulated')} "
                 f"of {s.get('jobs_in_log')}. Paths are shown as file names.</p>")
    conv = [f"<b>Scheduling metrics:</b> {html.escape(str(s.get('conventions')))}."]
    if s.get("power_conventions"):
        conv.append(f"<b>Power:</b> {html.escape(short_paths(s['power_conventions']))}.")
    conv.append("<b>Time series:</b> piecewise constant on the run's grid: utilisation and power are averages "
                "over [t, t + sample_dt), queue length is sampled at t; drawn as steps. Times on the log clock "
                "(s after the log's time 0).")
    conv.append("<b>Distributions:</b> per size class of allocation units; boxes are quartiles, whiskers the "
                "5th and 95th percentiles; only jobs that ran.")
    parts.append("<div class='conv'>" + "<br>".join(conv) + "</div>")
    parts.append("<h2>Summary</h2>" + _summary_html(s))
    uq = fig_util_queue(ts)
    if uq:
        parts.append(f"<h2>Utilisation and queue length</h2><p>{html.escape(uq[1])}.</p>"
                     f"<img src='{uq[0]}' alt='utilisation and queue length'>")
    d = fig_distributions(jobs)
    if d:
        parts.append(f"<h2>Wait and bounded slowdown by job size</h2><img src='{d}' alt='distributions'>")
    g, n = fig_gantt(jobs, total, window, max_gantt_jobs)
    if g:
        parts.append(f"<h2>Gantt view of [{window[0]:.0f}, {window[1]:.0f}] s</h2><p>{n} jobs shown "
                     f"(at most {max_gantt_jobs}, in start order); one colour a job, bars over the units it held. "
                     "The same chart as a PNG file: <code>hpctwin plot gantt RUN --window A:B</code>.</p>"
                     f"<img src='{g}' alt='gantt'>")
    p = fig_power(ts)
    if p:
        parts.append(f"<h2>Power and PUE</h2><img src='{p}' alt='power'>")
    if cfg:
        parts.append(f"<h2>Resolved configuration</h2><pre>{html.escape(short_paths(cfg))}</pre>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hpctwin report", description="Write a self-contained HTML report of a run.")
    ap.add_argument("run_dir")
    ap.add_argument("--out", default=None, help="HTML file (default: RUN_DIR/report.html)")
    ap.add_argument("--window", type=P._window, default=None, help="Gantt window START:END (s, log clock)")
    ap.add_argument("--max-gantt-jobs", type=int, default=400)
    a = ap.parse_args(argv)
    run_dir = Path(a.run_dir)
    from .runread import RunReadError  # noqa: PLC0415
    try:
        text = build_html(run_dir, a.window, a.max_gantt_jobs)
    except (ReportError, RunReadError, FileNotFoundError) as e:
        print(f"hpctwin report: error: {e}", file=sys.stderr)
        return 2
    out = Path(a.out) if a.out else run_dir / "report.html"
    out.write_text(text)
    print(f"report: {out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
