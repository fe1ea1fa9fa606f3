r"""Result tables for experiment scripts and sweeps: ``results.csv``, Markdown and LaTeX, with 95 % CIs.

Every table carries a caption that states its conventions (machine, log, policy, estimate model,
metric definitions), because a number without its conventions cannot be defended.

* `write_results_csv(df, path)`: the raw rows, written with a fixed float format (``%.10g``) and a
  fixed column order so the same rows give the same bytes.
* `aggregate(df, by, metrics, over="seed")`: one row per group of ``by`` columns with, for every
  metric, its mean, the number of samples ``n`` and the half-width of the 95 % confidence interval
  of the mean over the ``over`` replicas: ``t(0.975, n-1) * s / sqrt(n)`` (Student's t, ``s`` the
  sample standard deviation); NaN when n < 2.
* `markdown_table` / `latex_table`: ``mean ± ci`` cells (just the mean when n < 2), 4 significant
  digits, caption above the table.
* `write_tables(df, out, by, metrics, caption)`: all of the above into ``out`` (replicas aggregated);
  `write_table_files(df, out, caption)`: ``<stem>.csv``, ``<stem>.md`` and ``<stem>.tex`` of a table
  with one row per configuration.  Every experiment script writes its tables through these two.
* `staged_output(prog, out, force)`: the output folder of an experiment script's ``main``, through the
  one output contract of `hpctwin.twin.runfolder` (checked before any work, written into a hidden
  partial folder, published by one atomic rename), with one-line errors (exit 2) and Ctrl-C (exit 130).

The LaTeX uses the booktabs rules (``\toprule``, ``\midrule``, ``\bottomrule``): the file's first
line says so (``% needs \usepackage{booktabs}``) and the caption sits above the tabular, as
journals ask.  No jinja2 or other optional dependency is needed (``DataFrame.to_latex`` needs it).
"""
from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

FLOAT_FORMAT = "%.10g"
#: help of every experiment script's ``--force``
FORCE_HELP = "replace an existing output folder written by hpctwin (never any other folder)"
#: how the experiment scripts describe ``--out`` (after what the folder holds)
OUT_RULE = "must not exist, be empty, or be a folder hpctwin wrote (replaced only with --force)"


class InputReadError(ValueError):
    """An input file (log, trace, data set) could not be read while an output folder was being filled."""


def _input_error(e: OSError, folder: Path) -> InputReadError | None:
    """The `InputReadError` for an ``OSError`` raised while filling ``folder``, or None when it is an
    error writing ``folder`` itself: a file named outside ``folder`` is an input that cannot be read;
    an error with no errno (raised by code with a message, e.g. a missing data set) is an input error
    too; an OS error on no named file (a ``write`` on a full disk) or on files inside is the folder's."""
    for name in (e.filename, e.filename2):
        if name is None:
            continue
        p = Path(os.path.abspath(os.fsdecode(name)))
        if p != folder and folder not in p.parents:
            return InputReadError(f"cannot read {os.fsdecode(name)}: {e.strerror or e}")
    if e.errno is None and e.filename is None:
        msg = str(e)
        if isinstance(e, FileNotFoundError) and msg and not any(c.isspace() for c in msg):
            msg = f"cannot read {msg}: no such file"          # pyarrow's FileNotFoundError(path)
        return InputReadError(msg)
    return None


@contextmanager
def staged_output(prog: str, out: str | os.PathLike, force: bool = False) -> Iterator[Path]:
    """The output folder of an experiment script: ``with staged_output(PROG, a.out, a.force) as tmp:``.

    ``out`` is checked on entry, before any work (`hpctwin.twin.runfolder.staged_folder`: a folder
    hpctwin did not write, a file, the working directory... are refused; an earlier folder written by
    hpctwin only with ``force``). The block writes every file into ``tmp`` (a hidden partial folder
    beside ``out``); when it ends normally ``tmp`` is published as ``out`` by one atomic rename, and on
    an error or a kill ``out`` keeps its old content. Errors end the script the command-line way:

    * a ``ValueError`` (a refused ``--out``, bad input, `InputReadError`) prints one line
      ``PROG: error: ...`` on stderr and raises ``SystemExit(2)``;
    * an ``OSError`` on a file outside ``tmp`` (an input that cannot be read), or one raised with a
      message only (a missing data set), becomes such a line too, naming that file; one on files inside
      ``tmp`` or on no file (disk full, read-only...) names ``out`` (`RunFolderError`);
    * Ctrl-C (``KeyboardInterrupt``) prints that nothing was written and raises ``SystemExit(130)``.
    """
    from hpctwin.twin.runfolder import staged_folder  # noqa: PLC0415
    try:
        with staged_folder(out, force=force) as tmp:
            try:
                yield tmp
            except OSError as e:
                err = _input_error(e, tmp)
                if err is None:
                    raise                                       # writing the folder: a RunFolderError
                raise err from None
    except ValueError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; nothing was written to {out} (an earlier folder there is unchanged)",
              file=sys.stderr)
        raise SystemExit(130) from None


def write_results_csv(df: pd.DataFrame, path: str | Path) -> Path:
    """Write ``df`` as CSV with a stable float format (same rows, same bytes)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    df.to_csv(tmp, index=False, float_format=FLOAT_FORMAT, lineterminator="\n")
    tmp.replace(path)
    return path


def ci95_halfwidth(values: np.ndarray) -> float:
    """Half-width of the 95 % CI of the mean (Student's t); NaN for fewer than 2 finite values."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    n = len(v)
    if n < 2:
        return float("nan")
    return float(stats.t.ppf(0.975, n - 1) * v.std(ddof=1) / math.sqrt(n))


def aggregate(df: pd.DataFrame, by: Sequence[str], metrics: Sequence[str], over: str = "seed") -> pd.DataFrame:
    """Mean, n and 95 % CI half-width of each metric per group of ``by`` (replicas: ``over``).

    Groups keep the order of their first appearance in ``df``. Columns: the ``by`` columns, ``n``,
    then ``<metric>`` (mean) and ``<metric>_ci95`` for each metric.
    """
    by = [c for c in by if c != over]
    missing = [m for m in list(by) + list(metrics) if m not in df.columns]
    if missing:
        raise ValueError(f"aggregate: columns {missing} are not in the results (have {list(df.columns)})")
    rows = []
    if by:
        keys = df[by].astype(str).agg("\x1f".join, axis=1)
        groups = [df[keys == k] for k in dict.fromkeys(keys)]
    else:
        groups = [df]
    for g in groups:
        row = {c: g[c].iloc[0] for c in by}
        row["n"] = len(g)
        for m in metrics:
            v = pd.to_numeric(g[m], errors="coerce").to_numpy(dtype=float)
            fin = v[np.isfinite(v)]
            row[m] = float(fin.mean()) if len(fin) else float("nan")
            row[f"{m}_ci95"] = ci95_halfwidth(v)
        rows.append(row)
    return pd.DataFrame(rows)


def _fmt(v) -> str:
    if isinstance(v, (float, np.floating)):
        if not math.isfinite(v):
            return "n/a" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        if 1e4 <= abs(v) < 1e9:        # seconds, jobs, watts: whole numbers read better than 1.394e+04
            return f"{v:,.0f}"
        return f"{v:.4g}"
    return str(v)


def _cells(agg: pd.DataFrame, by: Sequence[str], metrics: Sequence[str], pm: str) -> list[list[str]]:
    out = []
    for _, r in agg.iterrows():
        cells = [_fmt(r[c]) for c in by]
        for m in metrics:
            ci = r.get(f"{m}_ci95", float("nan"))
            cell = _fmt(r[m])
            if isinstance(ci, float) and math.isfinite(ci):
                cell += f" {pm} {_fmt(ci)}"
            cells.append(cell)
        out.append(cells)
    return out


def markdown_table(agg: pd.DataFrame, by: Sequence[str], metrics: Sequence[str], caption: str = "") -> str:
    """GitHub Markdown: caption paragraph, then a table of ``mean ± ci95`` cells."""
    head = list(by) + list(metrics)
    lines = []
    if caption:
        lines += [caption, ""]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    lines += ["| " + " | ".join(c) + " |" for c in _cells(agg, by, metrics, "±")]
    return "\n".join(lines) + "\n"


_LATEX_ESC = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
              "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def latex_escape(s: str) -> str:
    return "".join(_LATEX_ESC.get(ch, ch) for ch in str(s))


#: first line of every LaTeX table file: the package the rules come from
BOOKTABS_NOTE = r"% booktabs table: needs \usepackage{booktabs} in the preamble"


def latex_table(agg: pd.DataFrame, by: Sequence[str], metrics: Sequence[str], caption: str = "",
                label: str = "") -> str:
    """A LaTeX ``table`` with booktabs rules, caption above, ``mean $\\pm$ ci95`` cells."""
    head = [latex_escape(c) for c in list(by) + list(metrics)]
    body = [[latex_escape(x).replace("±", r"$\pm$") for x in row] for row in _cells(agg, by, metrics, "±")]
    lines = [BOOKTABS_NOTE, r"\begin{table}[t]", r"\centering"]
    if caption:
        lines.append(r"\caption{" + latex_escape(caption) + "}")
    if label:
        lines.append(r"\label{" + label + "}")
    lines.append(r"\begin{tabular}{" + "l" * len(by) + "r" * len(metrics) + "}")
    lines += [r"\toprule", " & ".join(head) + r" \\", r"\midrule"]
    lines += [" & ".join(r) + r" \\" for r in body]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def write_table_files(df: pd.DataFrame, out: str | Path, caption: str, *, by: Sequence[str] | None = None,
                      metrics: Sequence[str] | None = None, label: str = "tab:results",
                      stem: str = "results", csv: bool = True) -> list[Path]:
    """Write ``<stem>.csv`` (every column of ``df``, stable float format), ``<stem>.md`` and
    ``<stem>.tex`` for a table with one row per configuration (no replicas to aggregate).

    ``by``: the label columns (default: the non-numeric ones); ``metrics``: the value columns
    (default: all others). The caption states the conventions in both the Markdown and the LaTeX
    file. ``csv=False`` when the caller writes ``<stem>.csv`` itself (e.g. a different row set).
    Returns the paths written.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if by is None:
        by = [c for c in df.columns if not pd.api.types.is_numeric_dtype(df[c]) or df[c].dtype == bool]
    if metrics is None:
        metrics = [c for c in df.columns if c not in by]
    missing = [c for c in list(by) + list(metrics) if c not in df.columns]
    if missing:
        raise ValueError(f"write_table_files: columns {missing} are not in the table (have {list(df.columns)})")
    paths = []
    if csv:
        paths.append(write_results_csv(df, out / f"{stem}.csv"))
    for ext, text in (("md", markdown_table(df, by, metrics, caption)),
                      ("tex", latex_table(df, by, metrics, caption, label=label))):
        (out / f"{stem}.{ext}").write_text(text)
        paths.append(out / f"{stem}.{ext}")
    return paths


def write_tables(df: pd.DataFrame, out: str | Path, by: Sequence[str], metrics: Sequence[str],
                 caption: str, over: str = "seed", stem: str = "results") -> pd.DataFrame:
    """Write ``<stem>.csv`` (raw rows), ``<stem>_summary.csv`` (aggregated), ``<stem>.md`` and
    ``<stem>.tex`` into ``out``. Returns the aggregated frame."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_results_csv(df, out / f"{stem}.csv")
    agg = aggregate(df, by, metrics, over=over)
    by2 = [c for c in by if c != over]
    write_results_csv(agg, out / f"{stem}_summary.csv")
    n_max = int(agg["n"].max()) if len(agg) else 0
    cap = caption + (f" Cells: mean ± half-width of the 95 % confidence interval of the mean over {over}s "
                     f"(Student's t, up to n = {n_max})." if n_max > 1 else f" One {over} per cell: no interval.")
    (out / f"{stem}.md").write_text(markdown_table(agg, by2, metrics, cap))
    (out / f"{stem}.tex").write_text(latex_table(agg, by2, metrics, cap, label=f"tab:{stem}"))
    return agg


def bar_plot(agg: pd.DataFrame, by: Sequence[str], metric: str, path: str | Path, title: str = "",
             lower_bound: float | None = None) -> Path:
    """PNG bar chart of ``metric`` per group with its 95 % CI, at column width (3.5 in; 7.16 in, two
    columns, for more than 8 bars), on a linear axis from 0.

    The interval is drawn as it is, except that it is clipped at the metric's physical lower bound
    (``lower_bound``; default 1 for bounded slowdowns, 0 for a metric whose values are all >= 0,
    e.g. waits in s): a mean of 50 s +- 80 s is drawn from 0 to 130 s, never below 0 s. The y label
    carries the unit (from the metric's name suffix); a long title is wrapped, never cut.
    """
    import textwrap  # noqa: PLC0415

    from hpctwin.twin.plot import figure, metric_label, save_png  # noqa: PLC0415
    labels = [" / ".join(str(r[c]) for c in by) for _, r in agg.iterrows()] if by else ["all"]
    y = agg[metric].to_numpy(dtype=float)
    ci = agg.get(f"{metric}_ci95")
    ci = np.zeros_like(y) if ci is None else np.nan_to_num(ci.to_numpy(dtype=float), nan=0.0)
    if lower_bound is None:
        lower_bound = 1.0 if "bsld" in metric else (0.0 if np.all(y[np.isfinite(y)] >= 0) else None)
    lo = ci if lower_bound is None else np.minimum(ci, np.maximum(y - lower_bound, 0.0))
    wide = len(y) > 8
    fig, ax = figure(height_in=2.6, width_in=7.16 if wide else 3.5)
    ax = ax[0][0]
    x = np.arange(len(y))
    ax.bar(x, y, color="#4c72b0", width=0.7)
    ax.errorbar(x, y, yerr=np.vstack([lo, ci]), fmt="none", ecolor="k", elinewidth=0.7, capsize=2)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=45 if len(y) > 3 else 0, ha="right" if len(y) > 3 else "center",
                       fontsize=6)
    ax.set_ylabel(metric_label(metric))
    ax.set_ylim(bottom=0)
    if title:
        ax.set_title("\n".join(textwrap.wrap(title, 90 if wide else 45)))
    path = Path(path)
    save_png(fig, path)
    return path
