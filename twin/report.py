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
import io
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from .ranges import parse_ranges

#: job-size classes (allocation units), upper bounds inclusive
SIZE_EDGES = (1, 4, 16, 64, 256, 1024, 4096)


class ReportError(ValueError):
    """A folder that is not a finished run, or a bad option."""


def _plt():
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    return plt


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    _plt().close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def load(run_dir: Path) -> tuple[pd.DataFrame, dict, dict, str]:
    """(jobs, time series {name: (values, units)}, summary, config text) of a run folder."""
    for f in ("jobs.csv", "summary.json"):
        if not (run_dir / f).exists():
            raise ReportError(f"{run_dir}: not a finished run folder (no {f})")
    jobs = pd.read_csv(run_dir / "jobs.csv", keep_default_na=True)
    summary = json.loads((run_dir / "summary.json").read_text())
    ts: dict = {}
    if (run_dir / "timeseries.h5").exists():
        import h5py  # noqa: PLC0415
        with h5py.File(run_dir / "timeseries.h5", "r") as h5:
            for k in h5:
                ts[k] = (h5[k][()], str(h5[k].attrs.get("units", "")))
    cfg = (run_dir / "config.toml").read_text() if (run_dir / "config.toml").exists() else ""
    return jobs, ts, summary, cfg


def size_class(procs: np.ndarray) -> np.ndarray:
    """Label of each job's size class (``1``, ``2-4``, ``5-16``, ...)."""
    edges = np.asarray(SIZE_EDGES)
    i = np.searchsorted(edges, procs, side="left")
    labels = []
    for k in range(len(edges) + 1):
        lo = 1 if k == 0 else edges[k - 1] + 1
        labels.append(str(lo) if k == 0 else (f">{edges[-1]}" if k == len(edges) else f"{lo}-{edges[k]}"))
    return np.array(labels, dtype=object)[i]


def fig_util_queue(ts: dict) -> str | None:
    if "time" not in ts or "utilisation" not in ts:
        return None
    plt = _plt()
    t = ts["time"][0] / 86400.0
    fig, ax = plt.subplots(2, 1, figsize=(10, 5), sharex=True)
    ax[0].plot(t, 100 * ts["utilisation"][0], lw=0.6)
    ax[0].set_ylabel("utilisation (%)")
    ax[0].set_ylim(0, 105)
    if "queue_length" in ts:
        ax[1].plot(t, ts["queue_length"][0], lw=0.6, color="#c44e52")
    ax[1].set_ylabel("queue length (jobs)")
    ax[1].set_xlabel("time (days, log clock)")
    fig.tight_layout()
    return _png(fig)


def fig_distributions(jobs: pd.DataFrame) -> str | None:
    ran = jobs[np.isfinite(jobs["start"])]
    if ran.empty:
        return None
    plt = _plt()
    cls = size_class(ran["procs"].to_numpy())
    order = [c for c in dict.fromkeys(size_class(np.array(sorted(set(ran["procs"].tolist())))))]
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for a, col, label in ((ax[0], "wait", "wait (s)"), (ax[1], "bsld", "bounded slowdown")):
        data = [np.maximum(ran[col].to_numpy()[cls == c], 1e-1 if col == "wait" else 1.0) for c in order]
        a.boxplot(data, whis=(5, 95), showfliers=False)
        a.set_xticks(range(1, len(order) + 1))
        a.set_xticklabels([f"{c}\n({int((cls == c).sum())})" for c in order], fontsize=8)
        a.set_yscale("log")
        a.set_ylabel(label + (" (0 shown as 0.1)" if col == "wait" else ""))
        a.set_xlabel("job size (units), (jobs)")
    fig.suptitle("boxes: quartiles; whiskers: 5th-95th percentile", fontsize=9)
    fig.tight_layout()
    return _png(fig)


def default_window(jobs: pd.DataFrame) -> tuple[float, float]:
    s = jobs["submit"].to_numpy()
    t0 = float(np.median(s)) if len(s) else 0.0
    return t0, t0 + 86400.0


def fig_gantt(jobs: pd.DataFrame, total: int, window: tuple[float, float], max_jobs: int) -> tuple[str | None, int]:
    t0, t1 = window
    st, en = jobs["start"].to_numpy(float), jobs["end"].to_numpy(float)
    sel = np.flatnonzero(np.isfinite(st) & (st < t1) & (en > t0))
    shown = sel[:max_jobs]
    if "nodes" not in jobs.columns or len(shown) == 0:
        return None, 0
    plt = _plt()
    fig, ax = plt.subplots(figsize=(11, 5))
    cmap = plt.get_cmap("tab20")
    nodes = jobs["nodes"].fillna("").astype(str).to_numpy()
    for k, j in enumerate(shown.tolist()):
        ids = parse_ranges(nodes[j])
        if len(ids) == 0:
            continue
        br = np.flatnonzero(np.diff(ids) != 1)
        lo = np.concatenate(([ids[0]], ids[br + 1]))
        hi = np.concatenate((ids[br], [ids[-1]]))
        a, b = max(st[j], t0), min(en[j], t1)
        for l, h in zip(lo.tolist(), hi.tolist()):
            ax.broken_barh([((a - t0) / 3600.0, (b - a) / 3600.0)], (l, h - l + 1), facecolors=cmap(k % 20),
                           edgecolor="k", linewidth=0.2)
    ax.set_xlim(0, (t1 - t0) / 3600.0)
    ax.set_ylim(0, total)
    ax.set_xlabel(f"hours after t = {t0:.0f} s (log clock)")
    ax.set_ylabel("unit id")
    fig.tight_layout()
    return _png(fig), len(shown)


def fig_power(ts: dict) -> str | None:
    if "power_facility_w" not in ts:
        return None
    plt = _plt()
    t = ts["time"][0] / 86400.0
    fig, ax = plt.subplots(2, 1, figsize=(10, 5), sharex=True)
    ax[0].plot(t, ts["power_facility_w"][0] / 1e3, lw=0.6, label="facility")
    if "power_it_w" in ts:
        ax[0].plot(t, ts["power_it_w"][0] / 1e3, lw=0.6, label="IT")
    ax[0].set_ylabel("power (kW)")
    ax[0].legend(fontsize=8)
    if "pue" in ts:
        ax[1].plot(t, ts["pue"][0], lw=0.6, color="#55a868")
    ax[1].set_ylabel("PUE (facility / rack)")
    ax[1].set_xlabel("time (days, log clock)")
    fig.tight_layout()
    return _png(fig)


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
        rows.append((prefix + k, str(v)))
    return rows


def build_html(run_dir: Path, window: tuple[float, float] | None = None, max_gantt_jobs: int = 400) -> str:
    jobs, ts, s, cfg = load(run_dir)
    total = int(s.get("machine_units") or (jobs["procs"].max() if len(jobs) else 1))
    window = window or default_window(jobs)
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>hpctwin report: {html.escape(str(run_dir.name))}"
             "</title><style>body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse;"
             "font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}img{max-width:100%}"
             ".conv{background:#f4f4f4;padding:6px}</style></head><body>"]
    parts.append(f"<h1>Run report: {html.escape(str(s.get('workload')))} / {html.escape(str(s.get('scheduler')))}</h1>")
    parts.append(f"<p>Folder <code>{html.escape(str(run_dir))}</code>; machine {s.get('machine_units')} units "
                 f"({html.escape(str(s.get('machine_size_source')))}); system {html.escape(str(s.get('system')))}; "
                 f"estimate model {html.escape(str(s.get('estimate_model')))}; jobs simulated {s.get('jobs_simulated')} "
                 f"of {s.get('jobs_in_log')}.</p>")
    conv = [f"<b>Scheduling metrics:</b> {html.escape(str(s.get('conventions')))}."]
    if s.get("power_conventions"):
        conv.append(f"<b>Power:</b> {html.escape(s['power_conventions'])}.")
    conv.append("<b>Time series:</b> interval averages over [t, t + sample_dt) on the run's grid (utilisation, "
                "power), queue length sampled at t. Times on the log clock (s after the log's time 0).")
    conv.append("<b>Distributions:</b> per size class of allocation units; boxes are quartiles, whiskers the "
                "5th and 95th percentiles; only jobs that ran.")
    parts.append("<div class='conv'>" + "<br>".join(conv) + "</div>")
    parts.append("<h2>Summary</h2><table><tr><th>key</th><th>value</th></tr>" + "".join(
        f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in _summary_rows(s)) + "</table>")
    for title, img in (("Utilisation and queue length", fig_util_queue(ts)),
                       ("Wait and bounded slowdown by job size", fig_distributions(jobs))):
        if img:
            parts.append(f"<h2>{title}</h2><img src='{img}' alt='{title}'>")
    g, n = fig_gantt(jobs, total, window, max_gantt_jobs)
    if g:
        parts.append(f"<h2>Gantt view of [{window[0]:.0f}, {window[1]:.0f}] s</h2><p>{n} jobs shown "
                     f"(at most {max_gantt_jobs}, in submit order); one colour a job, bars over the units it held.</p>"
                     f"<img src='{g}' alt='gantt'>")
    p = fig_power(ts)
    if p:
        parts.append(f"<h2>Power and PUE</h2><img src='{p}' alt='power'>")
    if cfg:
        parts.append(f"<h2>Resolved configuration</h2><pre>{html.escape(cfg)}</pre>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _window(text: str) -> tuple[float, float]:
    try:
        a, b = (float(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--window expects START:END in seconds, got {text!r}") from None
    if not b > a:
        raise argparse.ArgumentTypeError(f"--window {text!r}: END must be after START")
    return a, b


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hpctwin report", description="Write a self-contained HTML report of a run.")
    ap.add_argument("run_dir")
    ap.add_argument("--out", default=None, help="HTML file (default: RUN_DIR/report.html)")
    ap.add_argument("--window", type=_window, default=None, help="Gantt window START:END (s, log clock)")
    ap.add_argument("--max-gantt-jobs", type=int, default=400)
    a = ap.parse_args(argv)
    run_dir = Path(a.run_dir)
    try:
        text = build_html(run_dir, a.window, a.max_gantt_jobs)
    except (ReportError, FileNotFoundError) as e:
        print(f"hpctwin report: error: {e}", file=sys.stderr)
        return 2
    out = Path(a.out) if a.out else run_dir / "report.html"
    out.write_text(text)
    print(f"report: {out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
