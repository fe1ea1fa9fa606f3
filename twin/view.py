"""``hpctwin view RUN``: an interactive view of a run, one self-contained HTML file.

What a static page cannot answer: zoom into any part of a whole-log Gantt chart (77,073 jobs for
CTC-SP2), read one job's details by hovering it, and see utilisation, queue length and power over
exactly the same time span (the panels share the time axis: zooming one zooms all). The static
report (``hpctwin report``) stays: it is the figure set for a paper; this is for exploring.

Usage::

    hpctwin view RUN [--out FILE.html] [--max-jobs N] [--force]

Default output ``RUN/view.html`` (a file hpctwin writes into run folders, so ``hpctwin run --force``
still replaces such a folder). An existing output file is replaced only with ``--force``.

Why bokeh (and not plotly): both are maintained and write one offline HTML file, but a Gantt chart
of a whole log is hundreds of thousands of rectangles (CTC-SP2: 77,073 jobs in 189,944 contiguous unit
ranges). Bokeh draws rectangles natively with WebGL (the ``quad`` glyph, its "LRTB" GL glyph), hit-tests
them (hover anywhere on a job, not only near one point of it), shares one x range between figures,
and writes numpy columns as gzip-compressed base64 arrays: the CTC-SP2 view is about 4 MB and opens
in seconds. Plotly has no WebGL rectangle: filled ``scattergl`` polygons go through a loop that
re-concatenates the whole coordinate array once per polygon (quadratic; a 20,000-job Gantt had not
finished loading after 60 s in headless Chromium), and its page is larger (plotly.js alone is 4.8 MB,
arrays uncompressed). ``bokeh.embed.file_html`` with ``bokeh.resources.INLINE`` embeds BokehJS, so
the file needs no network to open.

What is drawn:

* Gantt: each job that started is a rectangle over ``[start, end)`` and over the allocation units it
  held (the ``nodes`` range text of jobs.csv, unit ``i`` drawn as ``[i, i + 1)``; one rectangle per
  contiguous range). A run without placements (no ``nodes`` column) draws one row per job in start
  order. Jobs that never started (``PENDING``, ``CANCELLED``) are not drawn; the header says how many.
  Hovering a job shows job id, user, submit/start/end and wait (s of the log clock), procs
  (units) and state. Colour: by user (the most frequent users each get a colour of a palette without
  repeats, the rest are grey and the legend says how many users and jobs that is), by state or by job
  size, chosen in a menu above the chart (the page regroups the same rectangles; nothing is recomputed).
  Click a legend entry to hide that group.
* Panels over the same time axis: utilisation (%), queue length (jobs) and, when the run had
  ``--power on``, facility and IT power (kW). Series are piecewise constant on the run's sample grid
  (drawn as steps); a series with more than :data:`MAX_SERIES_POINTS` samples is aggregated into that
  many equal bins, drawn as a band from the bin minimum to maximum with a line at the bin mean (no
  peak is hidden), and the page says so.
* Time axis: dates (UTC) when summary.json has the workload's ``unix_start_time``, else hours of the
  log clock.
"""
from __future__ import annotations

import argparse
import html
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["ViewError", "unit_ranges", "read_run", "TimeAxis", "Gantt", "gantt_of", "colour_modes", "build_layout",
           "build_html", "main"]

#: Kelly's colours of maximum contrast (Kelly 1965) without white, black and grey: 19 colours, none repeated
PALETTE = ("#F3C300", "#875692", "#F38400", "#A1CAF1", "#BE0032", "#C2B280", "#008856", "#E68FAC", "#0067A5",
           "#F99379", "#604E97", "#F6A600", "#B3446C", "#DCD300", "#882D17", "#8DB600", "#654522", "#E25822",
           "#2B3D26")
#: colour of the users beyond the palette ("other users" in the legend)
OTHER_GREY = "#BDBDBD"
#: job states of jobs.csv (docs/conventions.md) and their colours; other values take palette colours
STATE_COLOURS = {"COMPLETED": "#0067A5", "TIMEOUT": "#F38400", "NODE_FAIL": "#BE0032"}
#: job-size classes (allocation units), upper bounds inclusive, as in ``hpctwin report``
SIZE_EDGES = (1, 4, 16, 64, 256, 1024, 4096)
#: viridis, one colour a size class (small jobs dark, large bright)
SIZE_COLOURS = ("#440154", "#46327E", "#365C8D", "#277F8E", "#1FA187", "#4AC16D", "#A0DA39", "#FDE725")
#: a time series with more samples than this is drawn as per-bin min..max bands and means
MAX_SERIES_POINTS = 4000
#: height of the page's figure (px): the Gantt takes most, each panel a strip
GANTT_PX, PANEL_PX = 560, 150


class ViewError(ValueError):
    """A run folder whose content cannot be drawn (the message names the file, line and field)."""


# ------------------------------------------------------------------------------------------ reading
def unit_ranges(text: str) -> list[tuple[int, int]]:
    """Contiguous unit ranges ``[(lo, hi), ...]`` (inclusive ids) of a compact range text ``"0-3,8"``.

    Ranges are sorted and adjacent or overlapping ones merged (``"4-7,0-3"`` -> ``[(0, 7)]``).
    Raises ValueError naming the bad part (not an integer, negative, or ``hi < lo``)."""
    parts: list[tuple[int, int]] = []
    for part in str(text).split(","):
        p = part.strip()
        if not p:
            raise ValueError(f"empty part in {text!r}")
        a, sep, b = p.partition("-")
        try:
            lo = int(a)
            hi = int(b) if sep else lo
        except ValueError:
            raise ValueError(f"{p!r} is not a unit id or a range LO-HI") from None
        if lo < 0 or hi < lo:
            raise ValueError(f"{p!r} is not a range of unit ids (LO <= HI, both >= 0)")
        parts.append((lo, hi))
    parts.sort()
    merged = [parts[0]]
    for lo, hi in parts[1:]:
        if lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def read_run(run_dir: Path) -> tuple[pd.DataFrame, dict, dict, int]:
    """(jobs, time series {name: (values, units)}, summary, machine units) of a finished run folder.

    Uses the checked readers of `twin.runread`: a missing, truncated or corrupt file raises
    `RunReadError` with one line naming it."""
    from .runread import check_run_folder, machine_units, read_jobs, read_summary, read_timeseries  # noqa: PLC0415
    check_run_folder(run_dir)
    summary = read_summary(run_dir, required=False)
    jobs = read_jobs(run_dir, summary=summary)
    ts = read_timeseries(run_dir)
    return jobs, ts, summary, machine_units(run_dir, summary, jobs)


# ------------------------------------------------------------------------------------------ time axis
@dataclass(frozen=True)
class TimeAxis:
    """How seconds of the log clock become x values: hours, or dates (ms since 1970, UTC) when the
    workload's unix start time (s) is known."""

    unix_start_s: float | None = None

    @property
    def is_date(self) -> bool:
        return self.unix_start_s is not None

    def x(self, t_s: np.ndarray) -> np.ndarray:
        """x values of log-clock times ``t_s`` (s): ms since 1970 (dates) or hours."""
        t = np.asarray(t_s, dtype=np.float64)
        return (self.unix_start_s + t) * 1000.0 if self.is_date else t / 3600.0

    @property
    def title(self) -> str:
        if self.is_date:
            return f"date (UTC; the log's time 0 is unix time {self.unix_start_s:.0f} s)"
        return "time (h after the log's time 0)"

    @staticmethod
    def of(summary: dict) -> TimeAxis:
        """Dates when summary.json's ``unix_start_time`` is a finite number, else hours."""
        v = summary.get("unix_start_time")
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v < 1e11
        return TimeAxis(float(v) if ok else None)


# ------------------------------------------------------------------------------------------ Gantt
@dataclass
class Gantt:
    """The started jobs to draw, in start order, and their rectangles.

    ``rows``: row positions in ``jobs`` of the drawn jobs; ``lo``/``hi``: per rectangle the first and
    last unit (inclusive; a row number in row mode); ``owner``: per rectangle the index (into
    ``rows``) of its job; ``n_rects``: rectangles per drawn job; ``by_units``: y = unit ids (else job
    rows); ``started``: jobs that started (``len(rows)`` unless ``--max-jobs`` cut)."""

    rows: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    owner: np.ndarray
    n_rects: np.ndarray
    by_units: bool
    started: int
    never_started: int


def _line(i: int) -> int:
    """File line of data row ``i`` of jobs.csv (line 1 is the header)."""
    return int(i) + 2


def gantt_of(jobs: pd.DataFrame, total_units: int, path: Path, max_jobs: int | None = None) -> Gantt:
    """The rectangles of the started jobs (at most ``max_jobs``, first in start order).

    Raises `ViewError` naming ``path`` (jobs.csv), the line and the field for a started job whose
    ``end`` is missing or before its start, a ``nodes`` text that is not a range list, a unit outside
    the machine (``total_units``), or an empty ``nodes`` for a job that ran while others have one."""
    st, en = jobs["start"].to_numpy(float), jobs["end"].to_numpy(float)
    started = np.flatnonzero(np.isfinite(st))
    bad = started[~(np.isfinite(en[started]) & (en[started] >= st[started]))]
    if len(bad):
        i = int(bad[0])
        what = f"{en[i]:g} s, before its start" if np.isfinite(en[i]) else "empty"
        raise ViewError(f"{path}:{_line(i)}: field 'end': {what} for a job that started at {st[i]:g} s ({len(bad)} "
                        "such rows): the file was changed; rerun the run")
    order = started[np.argsort(st[started], kind="stable")]
    rows = order if max_jobs is None else order[:max_jobs]
    n = len(rows)
    texts = None
    if "nodes" in jobs.columns:
        col = jobs["nodes"]
        texts = [("" if (isinstance(v, float) and math.isnan(v)) or v is None else str(v).strip())
                 for v in col.to_numpy()]
        if not any(texts[i] for i in order):
            texts = None                       # no placement recorded at all: rows mode
    if texts is None:
        idx = np.arange(n, dtype=np.int64)
        return Gantt(rows, idx, idx, idx, np.ones(n, dtype=np.int64), False, len(order), len(jobs) - len(order))
    lo: list[int] = []
    hi: list[int] = []
    owner: list[int] = []
    n_rects = np.zeros(n, dtype=np.int64)
    cache: dict[str, list[tuple[int, int]]] = {}
    empty = [int(i) for i in order if not texts[i]]
    if empty:
        raise ViewError(f"{path}:{_line(empty[0])}: field 'nodes': empty for a job that ran ({len(empty)} such rows, "
                        "while other jobs have placements): the file was changed; rerun the run")
    for k, i in enumerate(rows.tolist()):
        text = texts[i]
        rng = cache.get(text)
        if rng is None:
            try:
                rng = unit_ranges(text)
            except ValueError as e:
                raise ViewError(f"{path}:{_line(i)}: field 'nodes': {e} (expected unit ranges like 0-3,8)") from None
            if rng[-1][1] >= total_units:
                raise ViewError(f"{path}:{_line(i)}: field 'nodes': unit {rng[-1][1]} is outside the machine of "
                                f"{total_units} units (ids 0..{total_units - 1}: summary.json's machine_units, "
                                "else the "
                                "largest job)")
            cache[text] = rng
        n_rects[k] = len(rng)
        for a, b in rng:
            lo.append(a)
            hi.append(b)
            owner.append(k)
    return Gantt(rows, np.asarray(lo, np.int64), np.asarray(hi, np.int64), np.asarray(owner, np.int64), n_rects, True,
                 len(order), len(jobs) - len(order))


# ------------------------------------------------------------------------------------------ colours
def size_labels(procs: np.ndarray) -> tuple[list[str], np.ndarray]:
    """(class labels, class index of each job) of job sizes in units: 1, 2-4, 5-16, ..., >4096."""
    edges = np.asarray(SIZE_EDGES)
    labels = (["1 unit"] + [f"{edges[k - 1] + 1}-{edges[k]} units" for k in range(1, len(edges))]
              + [f">{edges[-1]} units"])
    return labels, np.searchsorted(edges, np.asarray(procs, dtype=float), side="left")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def colour_modes(drawn: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Colour groupings of the drawn jobs: ``{mode: {"label", "names", "colours", "codes"}}``.

    ``codes[k]`` is the group (index into names/colours) of drawn job ``k``. Modes: ``user`` (when
    jobs.csv has users: the most frequent users, up to the palette size, each a colour; the rest one
    grey "other users" group, named with its user and job counts), ``state`` and ``size``."""
    n = len(drawn)
    modes: dict[str, dict[str, Any]] = {}
    if "user" in drawn.columns:
        users = drawn["user"].astype(str).str.strip().replace({"nan": "unknown", "-1": "unknown (-1)", "": "unknown"})
        users = users.str.replace(r"\.0$", "", regex=True)
        counts = users.value_counts(sort=False)
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        top = ranked[:len(PALETTE)]
        rest = ranked[len(PALETTE):]
        names = [f"user {u} ({_plural(c, 'job')})" for u, c in top]
        colours = list(PALETTE[:len(top)])
        index = {u: g for g, (u, _) in enumerate(top)}
        codes = np.array([index.get(u, len(top)) for u in users.to_numpy()], dtype=np.int64)
        if rest:
            names.append(f"other users, grey ({_plural(len(rest), 'user')}, {_plural(sum(c for _, c in rest), 'job')})")
            colours.append(OTHER_GREY)
        modes["user"] = {"label": "user", "names": names, "colours": colours, "codes": codes}
    states = drawn["state"].astype(str).to_numpy() if "state" in drawn.columns else np.full(n, "unknown", dtype=object)
    uniq = sorted(set(states.tolist()), key=lambda s: (s not in STATE_COLOURS, list(STATE_COLOURS).index(s)
                                                       if s in STATE_COLOURS else 0, s))
    spare = [c for c in PALETTE if c not in STATE_COLOURS.values()]
    colours = [STATE_COLOURS.get(s) or spare[k % len(spare)] for k, s in enumerate(uniq)]
    index = {s: g for g, s in enumerate(uniq)}
    codes = np.array([index[s] for s in states.tolist()], dtype=np.int64)
    counts = np.bincount(codes, minlength=len(uniq))
    modes["state"] = {"label": "state", "names": [f"{s} ({c:,})" for s, c in zip(uniq, counts.tolist())],
                      "colours": colours, "codes": codes}
    labels, cls = size_labels(drawn["procs"].to_numpy())
    present = sorted(set(cls.tolist()))
    remap = {c: g for g, c in enumerate(present)}
    codes = np.array([remap[c] for c in cls.tolist()], dtype=np.int64)
    counts = np.bincount(codes, minlength=len(present))
    modes["size"] = {"label": "job size", "names": [f"{labels[c]} ({k:,})" for c, k in zip(present, counts.tolist())],
                     "colours": [SIZE_COLOURS[c] for c in present], "codes": codes}
    return modes


def default_mode(modes: dict[str, dict[str, Any]]) -> str:
    """``user`` when at least two users are named, else ``size`` (one colour would hide the jobs' shapes)."""
    user = modes.get("user")
    if user and len([nm for nm in user["names"] if not nm.startswith("user unknown")]) >= 2:
        return "user"
    return "size"


# ------------------------------------------------------------------------------------------ figure
_TOOLTIPS = [("job", "@jk{job_id}"), ("user", "@jk{user}"), ("state", "@jk{state}"), ("procs", "@jk{procs}"),
             ("submit", "@jk{submit}"), ("start", "@jk{start}"), ("end", "@jk{end}"), ("wait", "@jk{wait}")]

#: formats one hovered job's field (``format``) from the jobs table by the rectangle's job index ``value``
_HOVER_JS = """
const J = jobs.data, k = value;
if (format === "job_id") return String(J.job_id[k]);
if (format === "user") {
  const u = J.user[k];
  if (typeof u === "number" && Number.isNaN(u)) return "unknown";
  return String(u) + (u === -1 || u === "-1" ? " (unknown)" : "");
}
if (format === "state") return states[J.state[k]];
if (format === "procs") return J.procs[k].toLocaleString("en-US") + " units";
const v = J[format][k];
let s = v.toLocaleString("en-US", {maximumFractionDigits: 3}) + " s";
if (format === "wait") return s;
if (unix_start_s === null) return s + " (" + (v / 3600).toFixed(2) + " h)";
return s + " (" + new Date((unix_start_s + v) * 1000).toISOString().slice(0, 19).replace("T", " ") + " UTC)";
"""

#: regroups every rectangle by the chosen colouring: the renderers keep their places, their data moves
_REGROUP_JS = """
const mode = cb_obj.value, M = JSON.parse(modes_json)[mode], codes = jobs.data["code_" + mode];
const cols = ["left", "right", "bottom", "top", "jk"];
let n = 0;
for (const s of sources) n += s.data.jk.length;
const all = {};
for (const c of cols) all[c] = new Float64Array(n);
let o = 0;
for (const s of sources) {
  const m = s.data.jk.length;
  for (const c of cols) all[c].set(s.data[c], o);
  o += m;
}
const G = M.names.length, count = new Int32Array(sources.length);
for (let i = 0; i < n; i++) count[codes[all.jk[i]]] += 1;
const out = [], at = new Int32Array(sources.length);
for (let g = 0; g < sources.length; g++) {
  const d = {};
  for (const c of cols) d[c] = new Float64Array(count[g]);
  out.push(d);
}
for (let i = 0; i < n; i++) {
  const g = codes[all.jk[i]], j = at[g]++;
  for (const c of cols) out[g][c][j] = all[c][i];
}
for (let g = 0; g < sources.length; g++) {
  const on = g < G;
  sources[g].data = out[g];
  renderers[g].glyph.fill_color = on ? M.colours[g] : "#000000";
  renderers[g].visible = on;
  items[g].label = {value: on ? M.names[g] : ""};
  items[g].visible = on;
}
legend.title = "colour: " + M.label;
legend.change.emit();
"""


def _int_column(values: np.ndarray) -> np.ndarray:
    """Whole numbers as the smallest signed integer type that holds them (the file stays small)."""
    top = float(np.max(np.abs(values))) if len(values) else 0.0
    for t in (np.int8, np.int16, np.int32):
        if top <= np.iinfo(t).max:
            return values.astype(t)
    return values.astype(np.int64)


def job_columns(jobs: pd.DataFrame, g: Gantt, modes: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """Columns of the drawn jobs' table (row ``k`` = drawn job ``k``) the hover and regrouping read:
    job_id, submit, start, end, wait (s), procs (units), user, state (index into the returned state
    names), and ``code_MODE``: the job's colour group in each mode."""
    rows = g.rows
    sub, st, en = (jobs[c].to_numpy(float)[rows] for c in ("submit", "start", "end"))
    wait = jobs["wait"].to_numpy(float)[rows] if "wait" in jobs.columns else st - sub
    wait = np.where(np.isfinite(wait), wait, st - sub)
    cols: dict[str, Any] = {"job_id": jobs["job_id"].to_numpy(float)[rows], "submit": sub, "start": st, "end": en,
                            "wait": wait, "procs": jobs["procs"].to_numpy(float)[rows]}
    if "user" in jobs.columns:
        u = jobs["user"].iloc[rows]
        cols["user"] = u.to_numpy(float) if pd.api.types.is_numeric_dtype(u) else u.astype(str).tolist()
    else:
        cols["user"] = ["?"] * len(rows)
    states = jobs["state"].astype(str).to_numpy()[rows] if "state" in jobs.columns else np.full(len(rows), "?")
    names = sorted(set(states.tolist()))
    index = {s: i for i, s in enumerate(names)}
    cols["state"] = _int_column(np.array([index[s] for s in states.tolist()], dtype=np.int64))
    for key, m in modes.items():
        cols[f"code_{key}"] = _int_column(m["codes"])
    return cols, names


def gantt_figure(g: Gantt, axis: TimeAxis, jobs_cols: dict[str, Any], state_names: list[str],
                 modes: dict[str, dict[str, Any]], mode: str, total_units: int):
    """The Gantt figure: one quad renderer per colour group (as many as the largest mode has groups;
    the unused ones empty), a legend whose entries hide their group, and the hover tool. Returns
    (figure, sources, renderers, legend items, legend, jobs source)."""
    from bokeh.models import ColumnDataSource, CustomJSHover, HoverTool, Legend, LegendItem, Range1d  # noqa: PLC0415
    from bokeh.plotting import figure  # noqa: PLC0415
    st, en = jobs_cols["start"], jobs_cols["end"]
    left, right = axis.x(st)[g.owner], axis.x(en)[g.owner]
    bottom = _int_column(g.lo)
    top = _int_column(g.hi + 1)
    jk = _int_column(g.owner)
    jobs_src = ColumnDataSource(jobs_cols, name="gantt-jobs")
    p = figure(height=GANTT_PX, sizing_mode="stretch_width", output_backend="webgl", min_border_left=80,
               x_axis_type="datetime" if axis.is_date else "linear", tools="xpan,xwheel_zoom,box_zoom,reset,save",
               active_drag="box_zoom", active_scroll="xwheel_zoom", name="gantt")
    if g.by_units:
        p.y_range = Range1d(0, total_units, bounds=(0, total_units))
        p.yaxis.axis_label = "allocation unit (id)"
    else:
        p.y_range = Range1d(len(g.rows), 0, bounds=(0, len(g.rows)))
        p.yaxis.axis_label = "job (row, in start order)"
    codes = modes[mode]["codes"][g.owner]
    n_groups = max(len(m["names"]) for m in modes.values())
    sources, renderers, items = [], [], []
    for gi in range(n_groups):
        sel = np.flatnonzero(codes == gi)
        on = gi < len(modes[mode]["names"])
        src = ColumnDataSource({"left": left[sel], "right": right[sel], "bottom": bottom[sel], "top": top[sel],
                                "jk": jk[sel]}, name=f"gantt-rects-{gi}")
        r = p.quad(left="left", right="right", bottom="bottom", top="top", source=src,
                   fill_color=modes[mode]["colours"][gi] if on else "#000000", line_color="white", line_width=0.4,
                   line_alpha=0.5, hover_line_color="black", hover_line_width=1.5, visible=on, name=f"gantt-{gi}")
        sources.append(src)
        renderers.append(r)
        items.append(LegendItem(label=modes[mode]["names"][gi] if on else "", renderers=[r], visible=on))
    legend = Legend(items=items, title=f"colour: {modes[mode]['label']}", click_policy="hide",
                    label_text_font_size="9pt", glyph_width=14, glyph_height=12, spacing=1, name="gantt-legend")
    p.add_layout(legend, "right")
    hover = CustomJSHover(args={"jobs": jobs_src, "states": state_names, "unix_start_s": axis.unix_start_s},
                          code=_HOVER_JS)
    p.add_tools(HoverTool(renderers=renderers, tooltips=_TOOLTIPS, formatters={"@jk": hover},
                          point_policy="follow_mouse"))
    return p, sources, renderers, items, legend, jobs_src


def _step_xy(edges_x: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Corner points of a step line: value ``v[i]`` holds on ``[edges_x[i], edges_x[i + 1])``."""
    return np.repeat(edges_x, 2)[1:-1], np.repeat(v, 2)


def series_glyphs(p, t: np.ndarray, v: np.ndarray, axis: TimeAxis, name: str, colour: str, unit: str,
                  legend: bool) -> str:
    """Draw one piecewise-constant series (values ``v`` at log-clock times ``t``, s) on figure ``p``:
    every sample as a step when there are at most :data:`MAX_SERIES_POINTS`, else bin min..max bands
    and bin means (`twin.plot.envelope`). Returns a sentence saying which."""
    from bokeh.models import HoverTool  # noqa: PLC0415

    from .plot import envelope  # noqa: PLC0415
    t = np.asarray(t, dtype=float)
    v = np.asarray(v, dtype=float)
    t_end = float(t[-1] + (t[-1] - t[-2])) if len(t) > 1 else float(t[-1]) + 1.0
    extra = {"legend_label": name} if legend else {}
    if len(t) <= MAX_SERIES_POINTS:
        x, y = _step_xy(axis.x(np.append(t, t_end)), v)
        line = p.line(x, y, color=colour, line_width=1.3, **extra)
        how = f"every sample drawn ({len(t):,})"
    else:
        edges, lo, hi, mean = envelope(t, v, MAX_SERIES_POINTS, t_end)
        x, ylo = _step_xy(axis.x(edges), lo)
        _, yhi = _step_xy(axis.x(edges), hi)
        _, ymean = _step_xy(axis.x(edges), mean)
        p.varea(x=x, y1=ylo, y2=yhi, fill_color=colour, fill_alpha=0.25)
        line = p.line(x, ymean, color=colour, line_width=1.0, **extra)
        width_h = (edges[1] - edges[0]) / 3600.0
        how = (f"{len(t):,} samples in {MAX_SERIES_POINTS:,} bins of {width_h:.3g} h (band: minimum to maximum of "
               "the samples in a bin; line: their mean)")
    when = ("@x{%F %T} UTC", {"@x": "datetime"}) if axis.is_date else ("@x{0,0.00} h", {})
    p.add_tools(HoverTool(renderers=[line], mode="vline",
                          tooltips=[(name, f"@y{{0,0.[000]}} {unit}"), ("time", when[0])],
                          formatters=when[1]))
    return how


def panels_of(ts: dict) -> list[tuple[str, list[tuple[str, np.ndarray, float, str, str]]]]:
    """The time-series panels a run has: ``[(y title, [(name, values, scale, unit, colour)])]``:
    utilisation (%), queue length (jobs), power (kW: facility and IT) when present on the time grid."""
    if "time" not in ts or len(ts["time"][0]) == 0:
        return []
    panels = []
    if "utilisation" in ts:
        panels.append(("utilisation (%)", [("utilisation", ts["utilisation"][0], 100.0, "%", "#0067A5")]))
    if "queue_length" in ts:
        panels.append(("queue (jobs)", [("queue length", ts["queue_length"][0], 1.0, "jobs", "#BE0032")]))
    power = [(label, key) for label, key in (("facility power", "power_facility_w"), ("IT power", "power_it_w"))
             if key in ts]
    if power:
        items = []
        for (label, key), colour in zip(power, ("#F38400", "#008856")):
            values, unit = ts[key]
            kw = unit.strip() in ("W", "")
            items.append((label, values, 1e-3 if kw else 1.0, "kW" if kw else unit, colour))
        panels.append((f"power ({items[0][3]})", items))
    return panels


def _short(text: str) -> str:
    """A workload given as a file path, shown by its file name (a view is shared; home folders are not)."""
    return Path(text).name if "/" in text else text


def _header(facts: dict, summary: dict, total_units: int, run_name: str) -> str:
    """The page's text above the chart (HTML, every value escaped)."""
    e = html.escape
    drawn, started = facts["drawn"], facts["started"]
    cut = (f"the first {drawn:,} of {started:,} started jobs (in start order; --max-jobs)" if drawn < started
           else f"all {drawn:,} jobs that started")
    never = f"; {facts['never_started']:,} never started (not drawn)" if facts["never_started"] else ""
    where = (f"over the allocation units they held (one rectangle per contiguous range of units, "
             f"{facts['rects']:,} in all)" if facts["by_units"] else
             "one row per job in start order (the run recorded no placements)")
    title = f"{_short(str(summary.get('workload', run_name)))} / {summary.get('scheduler', '?')}"
    return (f"<h2 style='margin:4px 0'>Run view: {e(title)}</h2>"
            f"<p style='margin:2px 0'>Run folder <code>{e(run_name)}</code>; machine {total_units:,} units; "
            f"Gantt: {cut}{never}, {where}.</p><p style='margin:2px 0'>Time axis: {e(facts['axis'].title)}. "
            "Drag a box to zoom, scroll to zoom in time, reset with the tool bar's arrows; every panel shares the "
            "time axis. Hover a job for its details (times in s of the log clock); click a legend entry to hide a "
            "group. The static figures: <code>hpctwin report RUN</code>.</p>")


def build_layout(jobs: pd.DataFrame, ts: dict, summary: dict, total_units: int, path: Path, run_name: str,
                 max_jobs: int | None = None) -> tuple[Any, dict[str, Any]]:
    """(bokeh layout of the page, facts: counts, colour modes, notes on the series)."""
    from bokeh.layouts import column  # noqa: PLC0415
    from bokeh.models import CustomJS, Div, Select  # noqa: PLC0415
    from bokeh.plotting import figure  # noqa: PLC0415
    g = gantt_of(jobs, total_units, path, max_jobs)
    axis = TimeAxis.of(summary)
    modes = colour_modes(jobs.iloc[g.rows].reset_index(drop=True))
    mode = default_mode(modes)
    jobs_cols, state_names = job_columns(jobs, g, modes)
    gantt, sources, renderers, items, legend, jobs_src = gantt_figure(g, axis, jobs_cols, state_names, modes, mode,
                                                                      total_units)
    figs, notes = [gantt], []
    for title, series in panels_of(ts):
        p = figure(height=PANEL_PX, sizing_mode="stretch_width", x_range=gantt.x_range, min_border_left=80,
                   x_axis_type="datetime" if axis.is_date else "linear", tools="xpan,xwheel_zoom,reset,save",
                   active_scroll="xwheel_zoom", name=f"panel-{len(figs)}")
        p.yaxis.axis_label = title
        p.y_range.start = 0
        for name, values, scale, unit, colour in series:
            how = series_glyphs(p, ts["time"][0], np.asarray(values, dtype=float) * scale, axis, name, colour, unit,
                                legend=len(series) > 1)
            notes.append(f"{name}: {how}")
        if len(series) > 1:
            p.legend.location = "top_left"
            p.legend.label_text_font_size = "8pt"
            p.legend.background_fill_alpha = 0.6
        figs.append(p)
    figs[-1].xaxis.axis_label = axis.title
    facts = {"drawn": len(g.rows), "started": g.started, "never_started": g.never_started, "jobs": len(jobs),
             "by_units": g.by_units, "rects": len(g.lo), "modes": modes, "mode": mode, "notes": notes, "axis": axis}
    modes_json = json.dumps({k: {"label": m["label"], "names": m["names"], "colours": m["colours"]}
                             for k, m in modes.items()})
    select = Select(title="Colour jobs by", value=mode, options=[(k, m["label"]) for k, m in modes.items()],
                    width=160, name="colour-by")
    select.js_on_change("value", CustomJS(args={"sources": sources, "renderers": renderers, "items": items,
                                                "legend": legend, "jobs": jobs_src, "modes_json": modes_json},
                                          code=_REGROUP_JS))
    header = Div(text=_header(facts, summary, total_units, run_name), sizing_mode="stretch_width")
    note_text = "".join(f"<li>{html.escape(n)}</li>" for n in notes) or "<li>none (the run has no timeseries.h5)</li>"
    footer = Div(text="<p style='margin:2px 0'>Time series are piecewise constant on the run's sample grid, drawn as "
                      f"steps:</p><ul style='margin:2px 0'>{note_text}</ul>", sizing_mode="stretch_width")
    return column(header, select, *figs, footer, sizing_mode="stretch_width"), facts


def build_html(run_dir: Path, max_jobs: int | None = None) -> tuple[str, dict]:
    """The page's HTML text (BokehJS inline: no network needed to open it) and its facts."""
    from bokeh.embed import file_html  # noqa: PLC0415
    from bokeh.resources import INLINE  # noqa: PLC0415
    jobs, ts, summary, total = read_run(run_dir)
    name = run_dir.resolve().name
    layout, facts = build_layout(jobs, ts, summary, total, run_dir / "jobs.csv", name, max_jobs)
    return file_html(layout, INLINE, title=f"hpctwin view: {name}"), facts


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive whole number of jobs, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number of jobs, got {text!r}")
    return n


def main(argv: list[str] | None = None) -> int:
    """``hpctwin view RUN [--out FILE.html] [--max-jobs N] [--force]``; returns the exit code (2: bad input)."""
    ap = argparse.ArgumentParser(prog="hpctwin view", description="Write an interactive HTML view of a run "
                                 "(zoomable Gantt of every job, utilisation, queue and power over time).")
    ap.add_argument("run_dir", help="the --out folder of an hpctwin run")
    ap.add_argument("--out", default=None, help="HTML file to write (default: RUN/view.html)")
    ap.add_argument("--max-jobs", type=_positive, default=None, metavar="N",
                    help="draw only the first N started jobs in start order (default: all)")
    ap.add_argument("--force", action="store_true", help="replace an existing output file")
    a = ap.parse_args(argv)
    run_dir = Path(a.run_dir)
    out = Path(a.out) if a.out else run_dir / "view.html"
    from .runfolder import RunFolderError, check_out_file, staged_file  # noqa: PLC0415
    from .runread import RunReadError  # noqa: PLC0415
    inputs = tuple(run_dir / f for f in ("jobs.csv", "summary.json", "timeseries.h5", "config.toml", ".hpctwin-run"))
    try:
        check_out_file(out, force=a.force, inputs=inputs)          # refused before the work, not after it
        try:
            import bokeh  # noqa: F401, PLC0415
        except ImportError:
            raise ViewError("the bokeh package is not installed: pip install bokeh (or pip install -e .)") from None
        text, facts = build_html(run_dir, a.max_jobs)
        with staged_file(out, force=a.force, inputs=inputs) as tmp:
            tmp.write_text(text, encoding="utf-8")
    except (RunReadError, RunFolderError, ViewError) as e:
        print(f"hpctwin view: error: {e}", file=sys.stderr)
        return 2
    size = out.stat().st_size
    print(f"view: {out} ({facts['drawn']:,} of {facts['jobs']:,} jobs drawn, {size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
