r"""Result tables for experiment scripts and sweeps: ``results.csv``, Markdown and LaTeX, in one style.

Every table carries a caption that states its conventions (machine, log, policy, estimate model,
metric definitions), because a number without its conventions cannot be defended. The CSV is the raw,
machine-readable record (raw column names and units, byte-stable); the Markdown and LaTeX tables paste
unedited into a page or a paper (``docs/experiments.md``, "Tables: one style"):

* `COLUMNS`: the column registry, metric key -> `Column` (label with unit, kind, decimals, scale,
  thousands separators, lower/upper bound). Headers are the labels; every cell of a column has the
  column's one format; a 0-1 share the command line prints in % is shown in %; run-time columns are never
  shown. An unregistered column is an error when `STRICT` (the tests), else it gets a generic label and
  one format chosen from its values (a sweep's own metrics). `register_columns` adds columns a script
  builds at run time.
* A missing, NaN, None or infinite value is a dash (``—`` Markdown, ``--`` LaTeX) and the caption says
  what it means; absolute paths in captions and cells are reduced to file names (`strip_paths`).
* `write_results_csv(df, path)`: the raw rows, written with a fixed float format (``%.10g``) and a
  fixed column order so the same rows give the same bytes.
* `aggregate(df, by, metrics, over="seed")`: one row per group of ``by`` columns with, for every
  metric, its mean, the number of samples ``n`` and the half-width of the 95 % confidence interval
  of the mean over the ``over`` replicas: ``t(0.975, n-1) * s / sqrt(n)`` (Student's t, ``s`` the
  sample standard deviation); NaN when n < 2. Tables show ``mean [lo, hi]``: that interval clipped to
  the metric's range (`interval`; bounded slowdown >= 1, shares within 0-100 %), the method stated in
  the caption (`CI_METHOD`).
* `markdown_table` / `latex_table`: one table each, caption above; `write_md_tex`: several tables into
  ``<stem>.md`` and ``<stem>.tex``.
* `write_tables(df, out, by, metrics, caption)`: all of the above into ``out`` (replicas aggregated);
  `write_table_files(df, out, caption)`: ``<stem>.csv``, ``<stem>.md`` and ``<stem>.tex`` of a table
  with one row per configuration.  Every experiment script writes its tables through these.
* `staged_output(prog, out, force)`: the output folder of an experiment script's ``main``, through the
  one output contract of `hpctwin.twin.runfolder` (checked before any work, written into a hidden
  partial folder, published by one atomic rename), with one-line errors (exit 2) and Ctrl-C (exit 130).

The LaTeX uses the booktabs rules (``\toprule``, ``\midrule``, ``\bottomrule``) inside a ``\resizebox``
that scales a table wider than the line down to ``\linewidth`` (graphicx): the file's first two lines say
so, the caption sits above the tabular, as journals ask, and the file is ASCII. No jinja2 or other
optional dependency is needed (``DataFrame.to_latex`` needs it).
"""
from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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


# ============================================================================ the column registry
#: kinds of column: how a value reads (the format is the Column's own)
KINDS = ("text", "name", "flag", "count", "seconds", "hours", "days", "percentage", "percent", "fraction",
         "ratio", "energy", "power", "bytes", "money", "number", "timing")
#: what a missing, undefined or infinite cell shows (Markdown, LaTeX)
MISSING_MD, MISSING_TEX = "\u2014", "--"
#: the caption's footnote when a table has such cells (``{dash}`` is the format's dash)
MISSING_NOTE = "{dash}: not applicable to this row (empty or inf in the CSV)."
#: set True (the tests do) to make an unregistered column an error instead of a generic label
STRICT = os.environ.get("HPCTWIN_STRICT_TABLES", "") not in ("", "0")


@dataclass(frozen=True)
class Column:
    """How one column of a result table reads in Markdown and LaTeX (the CSV keeps the raw value).

    ``label``: the header, a human name with its unit (``"Mean wait (s)"``); ``kind``: one of `KINDS`
    (``text``/``name`` are labels, ``name`` reduced to a file name; ``flag`` reads yes/no; ``timing``
    is never shown in a table); ``decimals``: digits after the point, the same in every row;
    ``scale``: shown = raw x scale (``percentage``: a 0-1 fraction shown x 100); ``group``: thousands
    separators (``,`` in Markdown, ``{,}`` in LaTeX) on every value of the column; ``lower``/``upper``:
    the raw value's range (a bounded slowdown >= 1, a fraction in [0, 1]); an interval is clipped to it.
    """

    label: str
    kind: str = "number"
    decimals: int = 0
    scale: float = 1.0
    group: bool = False
    lower: float | None = None
    upper: float | None = None

    @property
    def numeric(self) -> bool:
        return self.kind not in ("text", "name", "flag")


def _text(label: str, kind: str = "text") -> Column:
    return Column(label, kind)


def _n(label: str, decimals: int = 0, kind: str = "number", *, scale: float = 1.0, group: bool = True,
       lower: float | None = 0.0, upper: float | None = None) -> Column:
    return Column(label, kind, decimals, scale, group, lower, upper)


def _share(label: str, decimals: int = 1) -> Column:
    """A 0-1 fraction shown in % (as the command line prints utilisation)."""
    return Column(label, "percentage", decimals, 100.0, False, 0.0, 1.0)


def _secs(label: str, decimals: int = 0) -> Column:
    return Column(label, "seconds", decimals, 1.0, True, 0.0, None)


def _count(label: str) -> Column:
    return Column(label, "count", 0, 1.0, True, 0.0, None)


def _bsld(label: str = "Mean bounded slowdown") -> Column:
    return Column(label, "ratio", 2, 1.0, True, 1.0, None)


_TIMING = Column("Wall time (s)", "timing")

#: metric key -> how it reads. Every column an experiment's table shows is registered here (the tests
#: check it); a sweep's own metrics that are not fall back to a generic label and format.
COLUMNS: dict[str, Column] = {
    # labels (by columns)
    "log": _text("Log", "name"), "workload": _text("Workload", "name"), "policy": _text("Policy"),
    "order": _text("Queue order"), "backfill": _text("Backfilling"), "machine": _text("Machine"),
    "system": _text("System"), "topology": _text("Topology"), "scheduler": _text("Scheduler"),
    "placement": _text("Placement"), "mode": _text("Mode"), "rule": _text("Charging rule"),
    "response": _text("User response"), "partitions": _text("Partitions (jobs)"), "parameter": _text("Parameter"),
    "value": _text("Value"), "regime": _text("Recovery regime"), "collective": _text("Collective"),
    "bine": _text("Bine algorithm"), "classic": _text("Classic algorithm"), "bucket": _text("Size bucket (nodes)"),
    "algorithm": _text("Algorithm"), "preset": _text("Topology preset"), "trace": _text("Trace"),
    "heuristic": _text("Heuristic"), "config": _text("Configuration"), "bundle": _text("Bundle"),
    "metric": _text("Metric"), "statistic": _text("Statistic"), "dataset": _text("Data set"),
    "estimate": _text("Runtime estimate"), "pricing": _text("Pricing"), "anchor": _text("Anchor"),
    "seed": Column("Seed", "count"), "nodes": _count("Nodes"),
    # scheduling
    "jobs": _count("Jobs"), "training_jobs": _count("Training jobs"), "hpc_jobs": _count("HPC jobs"),
    "hpc_jobs_skipped": _count("HPC jobs skipped"), "jobs_skipped": _count("Jobs skipped"),
    "machine_units": _count("Machine units"), "machine_nodes": _count("Machine nodes"),
    "mean_wait_s": _secs("Mean wait (s)"), "median_wait_s": _secs("Median wait (s)"),
    "p95_wait_s": _secs("95th percentile wait (s)"), "max_wait_s": _secs("Maximum wait (s)"),
    "hpc_mean_wait_s": _secs("HPC mean wait (s)"), "hpc_p95_wait_s": _secs("HPC 95th percentile wait (s)"),
    "mean_turnaround_s": _secs("Mean turnaround (s)"), "makespan_s": _secs("Makespan (s)"),
    "mean_bsld": _bsld(), "median_bsld": _bsld("Median bounded slowdown"),
    "hpc_mean_bsld": _bsld("HPC mean bounded slowdown"), "utilisation": _share("Utilisation (%)"),
    "tau_s": _n("Bounded-slowdown tau (s)", 0, "seconds"),
    "prediction_accuracy": _share("Prediction accuracy (%)"), "underestimate_rate": _share("Under-estimates (%)"),
    "user_wait_spread_s": _secs("Std. of users' mean waits (s)"),
    "user_wait_jain": Column("Jain index of users' mean waits", "ratio", 3, 1.0, False, 0.0, 1.0),
    "killed_jobs": _count("Jobs killed at their requested time"),
    # topology and placement
    "mean_groups_spanned": _n("Mean groups spanned", 2, "ratio"),
    "global_bytes": _n("Global-link traffic (TB)", 2, "bytes", scale=1e-12),
    "mean_contention_stretch": _n("Mean contention stretch", 3, "ratio", lower=1.0),
    # LLM placement and failures
    "days": _n("Workload (days)", 2, "days"), "node_mtbf_days": _n("Node MTBF (days)", 1, "days"),
    "mean_iter_slowdown": _n("Mean iteration slowdown", 3, "ratio", lower=1.0),
    "node_failures": _count("Node failures"), "interruptions": _count("Job interruptions"),
    "training_interruptions": _count("Training-job interruptions"),
    "goodput": Column("Goodput", "fraction", 4, 1.0, False, 0.0, 1.0),
    "model_goodput": Column("Model goodput", "fraction", 4, 1.0, False, 0.0, 1.0),
    "mean_ettr": Column("Mean ETTR", "fraction", 4, 1.0, False, 0.0, 1.0),
    "model_mean_ettr": Column("Model mean ETTR", "fraction", 4, 1.0, False, 0.0, 1.0),
    "lost_gpu_hours": _n("Lost GPU time (GPU-h)", 1, "hours"),
    "lost_energy_kwh": _n("Energy of lost work (kWh)", 1, "energy"),
    "requeue_wait_h": _n("Requeue waits (h)", 2, "hours"), "mean_requeue_wait_s": _secs("Mean requeue wait (s)"),
    "jobs_failed": _count("Jobs failed"), "deferrals": _count("Deferrals"), "relaxed_jobs": _count("Relaxed jobs"),
    # power and energy
    "cap_w": _n("Facility cap (kW)", 1, "power", scale=1e-3),
    "cap_fraction_of_peak": _share("Cap (% of peak)", 0),
    "energy_mwh": _n("Facility energy (MWh)", 3, "energy"), "job_energy_mwh": _n("Jobs' energy (MWh)", 3, "energy"),
    "energy_facility_kwh": _n("Facility energy (kWh)", 1, "energy"),
    "peak_facility_w": _n("Peak facility power (kW)", 1, "power", scale=1e-3),
    "peak_facility_power_w": _n("Peak facility power (kW)", 1, "power", scale=1e-3),
    "mean_facility_w": _n("Mean facility power (kW)", 1, "power", scale=1e-3),
    "peak_facility_kw": _n("Peak facility power (kW)", 1, "power"),
    "mean_pue": _n("Mean PUE", 3, "ratio", lower=1.0), "cap_held": _text("Cap held", "flag"),
    "max_over_cap_w": _n("Largest excess over the cap (W)", 0, "power"),
    "total_cost": _n("Total cost (price units)", 2, "money"),
    "cost_gini_user": Column("Gini index of users' cost", "ratio", 3, 1.0, False, 0.0, 1.0),
    "below_idle_jobs": _count("Jobs at the idle-power floor"),
    "measured_pct": _n("Measured reduction (%)", 1, "percent", lower=None, upper=100.0),
    "facility_pct": _n("Facility reduction (%)", 1, "percent", lower=None, upper=100.0),
    "anchor_pct": _n("Published anchor (%)", 0, "percent", lower=None, upper=100.0),
    "price_ratio": _n("On-peak / off-peak price", 1, "ratio"),
    "jobs_bill_red_pct": _n("Jobs' bill reduction (%)", 1, "percent", lower=None, upper=100.0),
    "facility_bill_red_pct": _n("Facility bill reduction (%)", 1, "percent", lower=None, upper=100.0),
    "calibration_days": _n("Calibration window (days)", 2, "days"),
    "w_host_idle_w": _n("Idle power per active host (W)", 1, "power"),
    "w_core_dynamic_w": _n("Dynamic power per busy core (W)", 2, "power"),
    "mape_calibration_pct": _n("MAPE, calibration (%)", 2, "percent"),
    "mape_prediction_pct": _n("MAPE, prediction (%)", 2, "percent"),
    "corr_prediction": Column("Pearson r, prediction", "ratio", 3, 1.0, False, -1.0, 1.0),
    "samples_prediction": _count("Prediction samples"),
    # GPU packing
    "offered_load": _n("Offered GPU load", 2, "ratio"), "gpu_pods": _count("GPU pods"),
    "excluded_pods": _count("Excluded pods"), "alloc_success": _share("Allocation success (%)"),
    "gpu_alloc_ratio": _share("GPU allocation (%)"),
    "frag_waiting_gpus": _n("Free GPUs unusable by waiting pods (GPUs)", 2),
    "frag_expected_gpus": _n("Expected fragmentation (GPUs)", 1),
    # collectives
    "jobs_global": _count("Jobs with global traffic"),
    "median_reduction_pct": _n("Median reduction (%)", 1, "percent", lower=None, upper=100.0),
    "mean_reduction_pct": _n("Mean reduction (%)", 1, "percent", lower=None, upper=100.0),
    "share_bine_more_pct": _n("Jobs where Bine sends more (%)", 1, "percent", upper=100.0),
    "p": _count("Ranks"), "bytes": _n("Buffer (bytes)", 0, "bytes"), "steps": _count("Steps"),
    "time_s": _n("Time (\u00b5s)", 2, "seconds", scale=1e6),
    "max_link_bytes": _n("Largest link load (bytes)", 0, "bytes"),
    # the RLScheduler table
    "replay": _bsld("Replay: mean bounded slowdown"), "harness": _bsld("Harness: mean bounded slowdown"),
    "replay_minus_harness": _n("Replay - harness", 4, lower=None),
    "published": _bsld("Published: mean bounded slowdown"),
    "replay_minus_published": _n("Replay - published", 4, lower=None),
    # serving
    "requests": _count("Requests"), "gpu_hours": _n("GPU time (GPU-h)", 2, "hours"),
    "gpu_busy_fraction": _share("GPU busy (%)"), "throughput_utilisation": _n(
        "Throughput utilisation (%)", 1, "percentage", scale=100.0, group=False),
    "slo_attainment": _share("SLO attainment (%)"), "attainment": _share("SLO attainment (%)"),
    "ttft_p50_s": _n("TTFT P50 (s)", 3, "seconds"), "ttft_p99_s": _n("TTFT P99 (s)", 3, "seconds"),
    "ttft_mean_s": _n("TTFT mean (s)", 3, "seconds"),
    "tpot_p50_s": _n("TPOT P50 (ms)", 1, "seconds", scale=1e3),
    "tpot_p99_s": _n("TPOT P99 (ms)", 1, "seconds", scale=1e3),
    "max_instances": _count("Most instances"), "instances_started": _count("Instances started"),
    "scale_up_requests": _count("Scale-up requests"),
    "scale_up_wait_mean_s": _n("Scale-up wait, mean (s)", 1, "seconds"),
    "scale_up_wait_max_s": _n("Scale-up wait, max. (s)", 1, "seconds"),
    "serving_node_hours": _n("Serving node time (node-h)", 2, "hours"),
    "serving_gpu_energy_kwh": _n("Serving GPU energy (kWh)", 2, "energy"), "instances_lost": _count("Instances lost"),
    "rate_multiplier": _n("Rate multiplier", 1, "ratio"), "rate_req_s": _n("Request rate (req/s)", 2, "ratio"),
    "energy_wh_per_request": _n("Energy per request (Wh)", 3, "energy"),
    "kv_transfer_p50_s": _n("KV transfer P50 (ms)", 2, "seconds", scale=1e3),
    "kv_transfer_p99_s": _n("KV transfer P99 (ms)", 2, "seconds", scale=1e3),
    "goodput_req_s": _n("Goodput (req/s)", 2, "ratio"),
    "goodput_req_s_per_gpu": _n("Goodput per GPU (req/s)", 3, "ratio"),
    "vs_colocated": _n("Goodput vs colocated (x)", 2, "ratio"),
    "measured_s": _n("Measured (s)", 4, "seconds"), "simulated_s": _n("Simulated (s)", 4, "seconds"),
    "error_pct": _n("Error (%)", 2, "percent", lower=None),
    "mean_abs_error_pct": _n("Mean absolute error (%)", 2, "percent"),
    "max_abs_error_pct": _n("Largest absolute error (%)", 2, "percent"),
    # LLM training: placement, offload and recovery what-ifs (experiments/llm_training_placement.py,
    # llm_offload.py, llm_recovery.py)
    "model": _text("Model"), "gpus": _count("GPUs"), "source": _text("Failure source"),
    "offload": _text("Offload tiers"), "pfs_load": _text("PFS load"), "fits": _text("Fits", "flag"),
    "background_share": _share("Global links busy (%)", 0), "groups_spanned": _count("Groups spanned"),
    "iteration_s": _n("Iteration (s)", 2, "seconds"),
    "iteration_slowdown": _n("Iteration slowdown", 3, "ratio", lower=1.0),
    "dp_s": _n("Exposed DP (s)", 3, "seconds"), "pp_s": _n("Exposed PP (s)", 3, "seconds"),
    "mfu": _share("MFU (%)"), "speedup_vs_nvme": _n("Speed-up vs NVMe", 2, "ratio"),
    "update_io_s": _n("Update I/O (s)", 1, "seconds"), "cpu_adam_s": _n("CPU Adam (s)", 1, "seconds"),
    "host_bytes": _n("Host DRAM (GB/node)", 0, "bytes", scale=1e-9),
    "nvme_bytes": _n("NVMe (GB/node)", 0, "bytes", scale=1e-9),
    "pfs_bytes": _n("PFS (GB/node)", 0, "bytes", scale=1e-9),
    "memory_per_gpu_bytes": _n("GPU memory (GiB)", 1, "bytes", scale=2.0 ** -30),
    "checkpoint_s": _n("Checkpoint write (s)", 1, "seconds"), "restart_s": _n("Restart or recovery (s)", 0, "seconds"),
    "mtbf_h": _n("Job MTBF (h)", 2, "hours"), "interval_s": _n("Checkpoint interval or step (s)", 1, "seconds"),
    "goodput_mc": Column("Goodput, Monte Carlo", "fraction", 4, 1.0, False, 0.0, 1.0),
    "failures_per_day": _n("Failures per day", 2), "lost_gpu_hours_per_day": _n("Lost GPU-h per day", 0, "hours"),
    # multi-SLO serving (experiments/serving_slo.py)
    "load": _n("Load (x)", 2, "ratio"), "slo_class": _text("SLO class"),
    "goodput_rps": _n("Goodput (req/s)", 2, "ratio"),
    # run times: kept in CSVs, never in a table
    "wall_s": _TIMING, "sim_seconds": _TIMING, "wall_seconds": _TIMING, "simulation_seconds": _TIMING,
    "jobs_per_second": _TIMING,
}


def register_columns(columns: dict[str, Column]) -> None:
    """Add columns a script builds at run time (e.g. one per trace); a key registered differently
    before is an error (one key, one meaning)."""
    for key, col in columns.items():
        if key in COLUMNS and COLUMNS[key] != col:
            raise ValueError(f"table column {key!r} is already registered as {COLUMNS[key]}")
        if col.kind not in KINDS:
            raise ValueError(f"table column {key!r}: unknown kind {col.kind!r}; known: {', '.join(KINDS)}")
        COLUMNS[key] = col


def column(key: str, values: Sequence | None = None) -> Column:
    """The registered `Column` of ``key``. An unregistered key is an error when `STRICT` (the tests);
    otherwise it gets a generic label (``a_b_s`` -> ``a b (s)``) and one format for the whole column,
    chosen from ``values`` (4 significant digits on the largest magnitude)."""
    if key in COLUMNS:
        return COLUMNS[key]
    if STRICT:
        raise ValueError(f"table column {key!r} is not registered: add its label (with unit), number format, "
                         "kind and bounds to COLUMNS in hpctwin/experiments/tables.py")
    return _generic_column(key, values)


def _generic_column(key: str, values: Sequence | None) -> Column:
    from hpctwin.twin.plot import metric_label  # noqa: PLC0415
    label = metric_label(key)
    label = label[:1].upper() + label[1:]
    nums = pd.to_numeric(pd.Series(list(values) if values is not None else [], dtype=object), errors="coerce")
    if values is None or len(nums) == 0 or nums.isna().all() and pd.Series(list(values)).notna().any():
        return Column(label, "text")
    fin = nums[np.isfinite(nums.to_numpy(dtype=float))].abs()
    top = float(fin.max()) if len(fin) else 0.0
    decimals = 0 if top == 0 else int(min(6, max(0, 3 - math.floor(math.log10(top)))))
    if len(fin) and (fin == fin.round()).all():
        decimals = 0
    return Column(label, "number", decimals, 1.0, top >= 1e4, None, None)


def table_columns(df: pd.DataFrame, keys: Sequence[str]) -> dict[str, Column]:
    """`column` of every key (values from ``df`` for an unregistered one)."""
    return {k: column(k, df[k].tolist() if k in df.columns else None) for k in keys}


def is_timing(key: str) -> bool:
    """True for a run-time column (wall_s...): kept in CSVs, never shown in a table."""
    return COLUMNS.get(key, Column(key)).kind == "timing"


# ============================================================================ cells
_ABS_PATH = re.compile(r"(?<![\w.~/-])(?:[A-Za-z]:)?/(?:[^\s/,;:()\[\]'\"`|]+/)+([^\s/,;:()\[\]'\"`|]+)")


def strip_paths(text: str) -> str:
    """``text`` with every absolute path reduced to its last component (``/tmp/x/kth.swf`` -> ``kth.swf``):
    captions and cells name inputs, never the machine's folders."""
    return _ABS_PATH.sub(r"\1", str(text))


def display_name(value) -> str:
    """A workload or file named in a table: the file name of a path, a registry name as it is."""
    s = strip_paths(str(value))
    head, sep, tail = s.rpartition(":")
    if "/" in s:
        if sep and "/" in tail:
            return f"{head}:{Path(tail).name}"
        return Path(s).name
    return s


def _missing(v) -> bool:
    if v is None:
        return True
    if isinstance(v, (float, np.floating)):
        return not math.isfinite(float(v))
    if isinstance(v, str):
        return v.strip() in ("", "nan", "NaN", "None", "inf", "-inf")
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _number(x: float, col: Column, tex: bool) -> str:
    """``x`` (already scaled) with the column's decimals and grouping; LaTeX: ``{,}`` and ``$-$``."""
    s = f"{x:,.{col.decimals}f}" if col.group else f"{x:.{col.decimals}f}"
    if s.startswith("-") and not any(c in "123456789" for c in s):
        s = s[1:]                                    # -0.00 reads as 0.00
    if tex:
        s = s.replace(",", "{,}")
        if s.startswith("-"):
            s = "$-$" + s[1:]
    return s


def format_cell(v, col: Column, tex: bool = False) -> str:
    """One cell of column ``col``: the dash for a missing or infinite value, yes/no for a flag, the
    file name for a ``name``, the number in the column's one format (escaped for LaTeX when ``tex``)."""
    dash = MISSING_TEX if tex else MISSING_MD
    if _missing(v):
        return dash
    if col.kind == "flag":
        if isinstance(v, str):
            v = v.strip().lower() in ("true", "yes", "1")
        return "yes" if bool(v) else "no"
    if not col.numeric:
        s = display_name(v) if col.kind == "name" else strip_paths(str(v))
        return latex_escape(s) if tex else s.replace("|", "\\|")
    try:
        x = float(v)
    except (TypeError, ValueError):
        s = strip_paths(str(v))
        return latex_escape(s) if tex else s.replace("|", "\\|")
    return _number(x * col.scale, col, tex)


def interval(mean: float, half: float, col: Column) -> tuple[float, float]:
    """The 95 % interval ``mean -+ half`` clipped to the column's range (raw units)."""
    lo, hi = mean - half, mean + half
    if col.lower is not None:
        lo = max(lo, col.lower)
    if col.upper is not None:
        hi = min(hi, col.upper)
    return lo, hi


def format_interval_cell(mean, half, col: Column, tex: bool = False) -> str:
    """``mean [lo, hi]`` (the interval clipped to the metric's range), or the mean alone without an interval."""
    cell = format_cell(mean, col, tex)
    if _missing(mean) or _missing(half) or not col.numeric:
        return cell
    lo, hi = interval(float(mean), float(half), col)
    return f"{cell} [{format_cell(lo, col, tex)}, {format_cell(hi, col, tex)}]"


def _rows(df: pd.DataFrame, keys: Sequence[str], cols: dict[str, Column], tex: bool,
          ci: Sequence[str] = ()) -> list[list[str]]:
    out = []
    for _, r in df.iterrows():
        row = []
        for k in keys:
            if k in ci and f"{k}_ci95" in df.columns:
                row.append(format_interval_cell(r[k], r[f"{k}_ci95"], cols[k], tex))
            else:
                row.append(format_cell(r[k], cols[k], tex))
        out.append(row)
    return out


def _shown(df: pd.DataFrame, by: Sequence[str], metrics: Sequence[str]) -> list[str]:
    """The columns a table shows: ``by`` then ``metrics``, run-time columns left out."""
    return [k for k in list(by) + list(metrics) if not is_timing(k)]


def _has_missing(df: pd.DataFrame, keys: Sequence[str]) -> bool:
    return any(_missing(v) for k in keys for v in df[k].tolist())


def _caption_text(caption: str, df: pd.DataFrame, keys: Sequence[str], dash: str, missing_note: str | None) -> str:
    cap = strip_paths(caption).strip()
    if _has_missing(df, keys):
        note = (missing_note or MISSING_NOTE).replace("{dash}", dash)
        cap = f"{cap} {note}".strip()
    return cap


def markdown_table(agg: pd.DataFrame, by: Sequence[str], metrics: Sequence[str], caption: str = "",
                   missing_note: str | None = None, ci: Sequence[str] | None = None) -> str:
    """GitHub Markdown: the caption paragraph, then the table: headers are the registered labels (with
    units), text columns left-aligned, numbers right-aligned in one format per column, ``—`` for a
    missing or infinite value (explained in the caption). Columns with a ``<metric>_ci95`` column in
    ``agg`` show ``mean [lo, hi]`` (``ci``: those metrics; default: every metric that has one)."""
    keys = _shown(agg, by, metrics)
    cols = table_columns(agg, keys)
    ci = [m for m in metrics if f"{m}_ci95" in agg.columns] if ci is None else list(ci)
    lines = []
    cap = _caption_text(caption, agg, keys, MISSING_MD, missing_note)
    if cap:
        lines += [cap, ""]
    lines.append("| " + " | ".join(cols[k].label.replace("|", "\\|") for k in keys) + " |")
    lines.append("|" + "".join("---:|" if cols[k].numeric else ":---|" for k in keys))
    lines += ["| " + " | ".join(c) + " |" for c in _rows(agg, keys, cols, False, ci)]
    return "\n".join(lines) + "\n"


_LATEX_ESC = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
              "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
              "\u00b1": r"$\pm$", "\u00b5": r"\textmu{}", "\u03bc": r"\textmu{}", "\u2014": "--", "\u2013": "--",
              "\u00d7": r"$\times$", "\u2264": r"$\leq$", "\u2265": r"$\geq$", "\u2212": "-", "\u2019": "'",
              "\u2018": "`", "\u201c": "``", "\u201d": "''", "\u00b0": r"\textdegree{}", "\u2026": r"\ldots{}",
              "\u2192": r"$\rightarrow$", "\u00a0": "~", "\u2009": r"\,", "<": r"\textless{}", ">": r"\textgreater{}",
              "|": r"\textbar{}"}


def latex_escape(s: str) -> str:
    """``s`` as LaTeX text: the special characters escaped, the few non-ASCII symbols a caption uses
    written as LaTeX commands, other non-ASCII letters transliterated (the file stays ASCII)."""
    out = []
    for ch in str(s):
        if ch in _LATEX_ESC:
            out.append(_LATEX_ESC[ch])
        elif ord(ch) < 128:
            out.append(ch)
        else:
            import unicodedata  # noqa: PLC0415
            out.append(unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode() or "?")
    return "".join(out)


#: first line of every LaTeX table file: the package the rules come from
BOOKTABS_NOTE = r"% booktabs table: needs \usepackage{booktabs} in the preamble"
#: second line: a table wider than the line is scaled down to it (never up)
RESIZE_NOTE = r"% scaled down to \linewidth when wider (\resizebox): needs \usepackage{graphicx}"
#: the box around every tabular: ``\width`` is the tabular's natural width
RESIZE_OPEN = r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%"


def latex_table(agg: pd.DataFrame, by: Sequence[str], metrics: Sequence[str], caption: str = "",
                label: str = "", missing_note: str | None = None, ci: Sequence[str] | None = None) -> str:
    """A LaTeX ``table`` with booktabs rules, caption above, the same cells as `markdown_table`
    (``--`` for a missing value); a table wider than the line is scaled down to ``\\linewidth``
    (``\\resizebox``, graphicx), a narrower one keeps its size. ASCII only; every special character
    escaped."""
    keys = _shown(agg, by, metrics)
    cols = table_columns(agg, keys)
    ci = [m for m in metrics if f"{m}_ci95" in agg.columns] if ci is None else list(ci)
    head = [latex_escape(cols[k].label) for k in keys]
    body = _rows(agg, keys, cols, True, ci)
    lines = [BOOKTABS_NOTE, RESIZE_NOTE, r"\begin{table}[t]", r"\centering"]
    cap = _caption_text(caption, agg, keys, MISSING_TEX, missing_note)
    if cap:
        lines.append(r"\caption{" + latex_escape(cap) + "}")
    if label:
        lines.append(r"\label{" + re.sub(r"[^A-Za-z0-9:.-]", "-", label) + "}")
    lines.append(RESIZE_OPEN)
    lines.append(r"\begin{tabular}{" + "".join("r" if cols[k].numeric else "l" for k in keys) + "}")
    lines += [r"\toprule", " & ".join(head) + r" \\", r"\midrule"]
    # a row starting with '[' would be read as the optional argument of the \\ or rule before it
    lines += [("{}" if r[0].startswith("[") else "") + " & ".join(r) + r" \\" for r in body]
    lines += [r"\bottomrule", r"\end{tabular}", "}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def write_md_tex(out: str | Path, stem: str, tables: Sequence[dict]) -> list[Path]:
    """``<stem>.md`` and ``<stem>.tex`` holding several tables, in order, separated by a blank line.
    Each entry of ``tables``: keyword arguments of `markdown_table` (``agg``, ``by``, ``metrics``,
    ``caption``, optional ``missing_note``) plus an optional LaTeX ``label``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    md, tex = [], []
    for t in tables:
        t = dict(t)
        label = t.pop("label", "")
        md.append(markdown_table(**t))
        tex.append(latex_table(**t, label=label))
    (out / f"{stem}.md").write_text("\n".join(md))
    (out / f"{stem}.tex").write_text("\n".join(tex))
    return [out / f"{stem}.md", out / f"{stem}.tex"]


def write_table_files(df: pd.DataFrame, out: str | Path, caption: str, *, by: Sequence[str] | None = None,
                      metrics: Sequence[str] | None = None, label: str = "tab:results",
                      stem: str = "results", csv: bool = True, missing_note: str | None = None) -> list[Path]:
    """Write ``<stem>.csv`` (every column of ``df``, raw names and units, stable float format),
    ``<stem>.md`` and ``<stem>.tex`` for a table with one row per configuration (no replicas).

    ``by``: the label columns (default: the non-numeric ones); ``metrics``: the value columns
    (default: all others). Run-time columns (`is_timing`) are never shown in the Markdown or LaTeX
    table. The caption states the conventions in both files (absolute paths reduced to names;
    ``missing_note`` says what a dash means when a cell has none). ``csv=False`` when the caller
    writes ``<stem>.csv`` itself (e.g. a different row set). Returns the paths written.
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
    paths += write_md_tex(out, stem, [dict(agg=df, by=by, metrics=metrics, caption=caption,
                                           missing_note=missing_note, label=label)])
    return paths


#: how a table of means over replicas states its intervals (``{over}``, ``{n}``: replica name, largest n)
CI_METHOD = ("Cells: mean [lo, hi], the mean over {over}s and its 95 % confidence interval (Student's t, "
             "mean -+ t(0.975, n-1) s / sqrt(n), up to n = {n}), clipped to the metric's range (bounded slowdown "
             ">= 1, waits and times >= 0, shares within 0-100 %); a cell of one {over} shows the mean alone.")


def write_tables(df: pd.DataFrame, out: str | Path, by: Sequence[str], metrics: Sequence[str],
                 caption: str, over: str = "seed", stem: str = "results",
                 missing_note: str | None = None) -> pd.DataFrame:
    """Write ``<stem>.csv`` (raw rows), ``<stem>_summary.csv`` (aggregated: mean, n and the t interval's
    half-width ``<metric>_ci95``), ``<stem>.md`` and ``<stem>.tex`` into ``out``; the tables show
    ``mean [lo, hi]`` with the interval clipped to the metric's range (`CI_METHOD`, stated in the
    caption). Returns the aggregated frame."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_results_csv(df, out / f"{stem}.csv")
    agg = aggregate(df, by, metrics, over=over)
    by2 = [c for c in by if c != over]
    write_results_csv(agg, out / f"{stem}_summary.csv")
    n_max = int(agg["n"].max()) if len(agg) else 0
    cap = caption + (" " + CI_METHOD.format(over=over, n=n_max) if n_max > 1 else f" One {over} per cell: no interval.")
    write_md_tex(out, stem, [dict(agg=agg, by=by2, metrics=metrics, caption=cap, missing_note=missing_note,
                                  label=f"tab:{stem}")])
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
