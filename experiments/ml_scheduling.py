"""What-if: EASY with user estimates vs system-generated predictions vs exact runtimes, on real logs.

For each log (default: KTH-SP2 and SDSC-SP2 from the Parallel Workloads Archive, whole logs, their own
machine sizes) this runs:

* ``easy``: EASY (FCFS head, EASY backfilling) with the users' requested times;
* ``easy-pred``: EASY planning with the average runtime of the user's last two finished jobs
  (Tsafrir, Etsion and Feitelson, IEEE TPDS 2007), Tsafrir correction of under-predictions;
* ``easy++``: the same plus shortest-job-backfilled-first;
* ``easy-pred-gbm`` (with ``--gbm``, needs scikit-learn): an online gradient-boosted predictor;
* ``easy-exact``: EASY with the exact runtimes (clairvoyant bound).

The kill time is always the user's request. Table columns: mean wait (s), mean bounded slowdown
(tau = 10 s), prediction accuracy (mean over jobs of min(p, r) / max(p, r), p the estimate or the
prediction made at submit, r the run length) and under-estimate rate (fraction with p < r).
Writes ``results.csv``, ``results_summary.csv``, ``results.md``, ``results.tex`` and
``mean_bsld.png`` into ``--out`` (checked before the first run, written atomically: it must not exist,
be empty, or be a folder hpctwin wrote, replaced only with ``--force``).

Usage: ``python -m hpctwin.experiments.ml_scheduling [-w KTH-SP2 -w SDSC-SP2] [--max-jobs N] [--gbm] [--out DIR]``
(options: the vocabulary of ``docs/experiments.md``; ``--logs`` is a deprecated alias of ``-w``).
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from hpctwin.twin.run import RunConfig, run

from . import cli
from .tables import bar_plot, display_name, staged_output, write_tables

POLICIES = [("easy", "easy", "requested"), ("easy-pred", "hpctwin.schedulers.predictive:EasyPred", "requested"),
            ("easy++", "hpctwin.schedulers.predictive:EasyPlusPlus", "requested"),
            ("easy-exact", "easy", "exact")]


def estimate_accuracy(jobs: pd.DataFrame) -> tuple[float, float]:
    """(accuracy, under-estimate rate) of the ``estimate`` column against the run length."""
    ran = jobs[np.isfinite(jobs["start"])]
    p, r = ran["estimate"].to_numpy(float), ran["elapsed"].to_numpy(float)
    acc = np.where(np.maximum(p, r) > 0, np.minimum(p, r) / np.maximum(p, r), 1.0)
    return float(acc.mean()), float(np.mean(p < r))


def one(log: str, label: str, sched: str, estimate: str, data_dir: str | None, max_jobs: int | None = None,
        skip_jobs: int | None = None) -> dict:
    """One (log, policy) run's results row (``wall_s``: its run time, kept out of the tables)."""
    t = time.perf_counter()
    r = run(RunConfig(workload=log, scheduler=sched, estimate=estimate, data_dir=data_dir, max_jobs=max_jobs,
                      skip_jobs=skip_jobs))
    s = r.summary
    sp = s.get("scheduler_params", {})
    if "prediction_accuracy" in sp:
        acc, under = sp["prediction_accuracy"], sp["underestimate_rate"]
    else:
        acc, under = estimate_accuracy(r.jobs)
    return {"log": s["workload"], "policy": label, "seed": 0, "mean_wait_s": s["mean_wait_s"],
            "mean_bsld": s["mean_bsld"], "prediction_accuracy": acc, "underestimate_rate": under,
            "utilisation": s["utilisation"], "jobs": s["jobs_simulated"], "machine_units": s["machine_units"],
            "wall_s": round(time.perf_counter() - t, 1)}


def main(argv=None) -> pd.DataFrame:
    ap = cli.parser("ml_scheduling", __doc__)
    cli.add_workload(ap, ["KTH-SP2", "SDSC-SP2"])
    cli.add_job_window(ap)
    ap.add_argument("--gbm", action="store_true", help="also run the gradient-boosted predictor (scikit-learn)")
    cli.add_data_dir(ap)
    cli.add_out(ap, "results/ml_scheduling")
    a = ap.parse_args(argv)
    pol = list(POLICIES)
    if a.gbm:
        pol.insert(3, ("easy-pred-gbm", "hpctwin.schedulers.predictive:EasyPredGBM", "requested"))
    with staged_output("python -m hpctwin.experiments.ml_scheduling", a.out, a.force) as out:
        df = _run_and_write(a, pol, out)
    print(df.to_string())
    return df


def _run_and_write(a, pol: list[tuple[str, str, str]], out) -> pd.DataFrame:
    """Every (log, policy) run, then the tables and the plot into the folder ``out``."""
    rows = []
    for log in a.workload:
        for label, sched, est in pol:
            row = one(log, label, sched, est, a.data_dir, a.max_jobs, a.skip_jobs)
            rows.append(row)
            print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
    df = pd.DataFrame(rows)
    window = cli.window_text(a.max_jobs, a.skip_jobs) or "whole logs"
    cap = (f"EASY backfilling on {', '.join(display_name(w) for w in a.workload)} ({window}, machine sizes from the "
           "log headers), one run "
           "each (the schedules are deterministic). Estimates: the users' requested times (easy), predictions "
           "from the user's last two finished jobs with Tsafrir correction (easy-pred; easy++ adds shortest-"
           "job-backfilled-first), an online gradient-boosted model (easy-pred-gbm), exact runtimes (easy-exact); "
           "jobs are killed at their requested time in every case. wait = start - submit; bsld = max(1, (wait + "
           "run) / max(run, 10 s)); accuracy = mean min(p, r) / max(p, r); under-estimate rate = fraction p < r.")
    metrics = ["mean_wait_s", "mean_bsld", "prediction_accuracy", "underestimate_rate"]
    agg = write_tables(df, out, ["log", "policy"], metrics, cap)
    bar_plot(agg, ["log", "policy"], "mean_bsld", out / "mean_bsld.png", "mean bounded slowdown (tau = 10 s)")
    return df


if __name__ == "__main__":
    main()
