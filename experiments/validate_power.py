"""Validate the power model against one week of measured cluster power (SURF, Oct 2022).

Data: ``SURF-OpenDT`` (see the datasets MANIFEST): 7,850 tasks with submission time, duration and
core count; a 30 s CPU-usage profile per task (``fragments``); the measured cluster power every
30 s with the list of active hosts (``consumption``).

Replay mode: every task runs from its submission for its recorded duration with its recorded CPU
usage (the scheduler is not involved; `power.replay` feeds the starts and finishes to
`power.model.PowerModel` in event order). The machine is modelled per core: a task on ``c`` cores
at usage fraction ``u(t)`` (usage MHz / capacity MHz) draws ``c * u(t) * w_core`` watts above idle;
the idle draw is ``n_active(t) * w_host`` with ``n_active`` the active hosts listed in the
consumption file. The two constants (``w_host``: idle power per active host; ``w_core``: dynamic
power of a fully used core, i.e. (max - idle) / cores) are calibrated by least squares on the first
two days and the remaining five are predicted. Reported: MAPE and Pearson correlation of simulated
vs measured power on the prediction window, the calibrated constants, and a PNG of both curves.
Writes ``results.csv`` (the time series), ``summary.json``, the table ``validation.csv/.md/.tex``
(through :mod:`hpctwin.experiments.tables`) and ``power_validation.png``.

Usage: ``python -m hpctwin.experiments.validate_power [--data DIR] [--out DIR] [--calib-days 2]
[--max-days D]`` (``--max-days`` keeps the first D days only, e.g. ``--calib-days 0.25 --max-days 0.5``
for a quick check; the published figure uses the whole week). ``--out`` is checked before the data
are read and written atomically: it must not exist, be empty, or be a folder hpctwin wrote, replaced
only with ``--force``.
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd

from hpctwin.power.model import PowerModel
from hpctwin.power.replay import context, replay
from hpctwin.twin.system import SystemSpec

from . import cli
from .tables import staged_output, write_table_files

STEP = 30.0  # s, the consumption and fragment sampling period


def data_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    base = os.environ.get("HPCTWIN_DATA") or str(Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets")
    return Path(base) / "SURF-OpenDT"


def load(d: Path):
    tasks = pd.read_parquet(d / "tasks.parquet")
    frags = pd.read_parquet(d / "fragments.parquet")
    cons = pd.read_parquet(d / "consumption.parquet")
    return tasks, frags, cons


def simulate_core_load(tasks: pd.DataFrame, frags: pd.DataFrame, edges: np.ndarray) -> np.ndarray:
    """Busy core-equivalents (sum of cores x usage fraction) averaged over each interval, from a
    PowerModel replay with 1 W per fully used core and 0 W idle (so power in W = core-equivalents)."""
    t0 = tasks["submission_time"].min()
    submit = (tasks["submission_time"] - t0).dt.total_seconds().to_numpy()
    dur = tasks["duration"].to_numpy() / 1000.0
    cores = tasks["cpu_count"].to_numpy().astype(np.int64)
    cap = tasks["cpu_capacity"].to_numpy()
    # per-task usage trace (fractions), in the order the fragments are stored
    g = frags.groupby("id", sort=False)["cpu_usage"].apply(np.asarray)
    n = len(tasks)
    trace = np.empty(n, dtype=object)
    for i, (tid, c) in enumerate(zip(tasks["id"].to_numpy(), cap)):
        u = g.get(tid)
        trace[i] = None if u is None else np.clip(u / c, 0.0, 1.0)
    has = np.array([t is not None for t in trace])
    const = np.full(n, np.nan)
    const[~has] = 0.0                   # no profile recorded: count the task as idle
    n_nodes = int(cores.max())
    spec = SystemSpec(name="surf-cores", nodes=n_nodes, cpus_per_node=1, gpus_per_node=0, path="<surf>",
                      power={"cpu_idle_w": 0.0, "cpu_max_w": 1.0, "mem_w": 0.0})
    cols = {"cpu_util_trace": trace, "cpu_util": const, "gpu_util": np.zeros(n), "compute_bound": np.zeros(n),
            "util_trace_dt": np.full(n, STEP)}
    model = PowerModel(spec, cooling=False, sample_dt=STEP)
    model.bind(context(n_nodes, submit, cores, dur, system=spec, columns=cols, options={"t0": 0.0}))
    nodes = [np.arange(c) for c in cores]     # overlapping ids are fine: idle power is 0 per core
    replay(model, submit, dur, nodes, end=float(edges[-1]))
    grid = edges[:-1]
    return model.timeseries(grid, STEP)["power_jobs_w"][0]


def count_hosts(s: str) -> int:
    return len(re.findall(r"r\d+n\d+", s))


def main(argv=None) -> dict:
    ap = cli.parser("validate_power", __doc__)
    ap.add_argument("--data", default=None, metavar="DIR",
                    help="the SURF-OpenDT folder (default: SURF-OpenDT in $HPCTWIN_DATA or ../shared/datasets)")
    cli.add_out(ap, "results/validate_power")
    ap.add_argument("--calib-days", type=float, default=2.0, help="days of the calibration window")
    ap.add_argument("--max-days", type=float, default=None,
                    help="keep only the first D days of the trace (default: all 7)")
    args = ap.parse_args(argv)
    if args.max_days is not None and args.max_days <= args.calib_days:
        ap.error(f"--max-days {args.max_days:g} must exceed --calib-days {args.calib_days:g} (nothing left to predict)")
    with staged_output("python -m hpctwin.experiments.validate_power", args.out, args.force) as out:
        res = _run_and_write(args, out)
    print(json.dumps(res, indent=2))
    return res


def _run_and_write(args, out: Path) -> dict:
    """Calibrate, predict, and write results.csv, summary.json, the table and the plot into ``out``."""
    w0 = time.perf_counter()
    tasks, frags, cons = load(data_dir(args.data))
    if args.max_days is not None:
        cons = cons[cons["timestamp"] <= args.max_days * 86400e3].reset_index(drop=True)
        offset = (tasks["submission_time"] - tasks["submission_time"].min()).dt.total_seconds()
        tasks = tasks[offset < args.max_days * 86400.0].reset_index(drop=True)
        frags = frags[frags["id"].isin(tasks["id"])]
    # consumption sample k (timestamp ms) is the average over the 30 s before it
    t_end = cons["timestamp"].to_numpy() / 1000.0
    edges = np.concatenate(([t_end[0] - STEP], t_end))
    if np.any(np.abs(np.diff(edges) - STEP) > 1e-6):
        raise ValueError("consumption samples are not on a regular 30 s grid")
    measured = cons["power_draw"].to_numpy().astype(float)
    hosts = cons["host"].map(count_hosts).to_numpy().astype(float)
    load_cores = simulate_core_load(tasks, frags, edges)
    calib = t_end <= args.calib_days * 86400.0
    pred = ~calib
    X = np.column_stack([hosts, load_cores])
    coef, *_ = np.linalg.lstsq(X[calib], measured[calib], rcond=None)
    w_host, w_core = (float(c) for c in coef)
    sim = X @ coef
    mape = float(np.mean(np.abs(sim[pred] - measured[pred]) / measured[pred]) * 100)
    corr = float(np.corrcoef(sim[pred], measured[pred])[0, 1])
    mape_cal = float(np.mean(np.abs(sim[calib] - measured[calib]) / measured[calib]) * 100)
    days = "7 days" if args.max_days is None else f"first {args.max_days:g} days"
    res = {"dataset": f"SURF-OpenDT (Oct 2022, {days}, 30 s)", "calibration_days": args.calib_days,
           "w_host_idle_w": w_host, "w_core_dynamic_w": w_core,
           "mape_prediction_pct": mape, "corr_prediction": corr, "mape_calibration_pct": mape_cal,
           "samples_prediction": int(pred.sum()), "target_mape_pct": 5.0,
           "wall_seconds": round(time.perf_counter() - w0, 2)}
    pd.DataFrame({"time_s": t_end, "measured_w": measured, "simulated_w": sim, "active_hosts": hosts,
                  "busy_core_equiv": load_cores, "calibration": calib}).to_csv(out / "results.csv", index=False)
    (out / "summary.json").write_text(json.dumps(res, indent=2))
    table = pd.DataFrame([{"dataset": "SURF-OpenDT", "calibration_days": args.calib_days,
                           "w_host_idle_w": w_host, "w_core_dynamic_w": w_core, "mape_calibration_pct": mape_cal,
                           "mape_prediction_pct": mape, "corr_prediction": corr,
                           "samples_prediction": int(pred.sum())}])
    write_table_files(table, out, (
        f"Power model against the measured power of the SURF cluster (OpenDT trace, Oct 2022, {days}, 30 s "
        f"samples). Replay of the recorded tasks (no scheduler); P(t) = w_host x active hosts + w_core x busy "
        f"core-equivalents (w_host: idle power per active host, w_core: dynamic power per busy core), both "
        f"constants (W) fitted by least squares on the first {args.calib_days:g} days; "
        "MAPE = mean |simulated - measured| / measured (%) and Pearson r over the remaining samples."),
        by=["dataset"], label="tab:power-validation", stem="validation")
    from hpctwin.twin.plot import figure, save_png, step_series  # noqa: PLC0415
    fig, ax = figure(height_in=2.3)
    ax = ax[0][0]
    t0 = t_end - STEP                      # each sample averages the 30 s before its timestamp
    step_series(ax, t0, measured, scale=1e-3, t_div=3600.0, label="measured", end=float(t_end[-1]))
    step_series(ax, t0, sim, scale=1e-3, t_div=3600.0, color="C1", label="simulated", end=float(t_end[-1]))
    ax.axvline(args.calib_days * 24, color="k", ls="--", lw=0.6)
    ax.set_xlabel("time since 2022-10-06 22:00 UTC (h)")
    ax.set_ylabel("cluster power (kW)")
    ax.set_title(f"SURF: fit on {args.calib_days:g} d (left of dashes); MAPE {mape:.2f} %, r = {corr:.3f}")
    ax.legend(loc="lower right")
    save_png(fig, out / "power_validation.png")
    return res


if __name__ == "__main__":
    main()
