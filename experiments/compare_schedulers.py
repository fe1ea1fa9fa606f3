"""Compare queue orders x backfilling rules on one or more logs.

Writes ``results.csv`` (one row per log x policy), ``results.md`` and ``results.tex`` (tables whose
caption states machine size, log, estimate policy, tau and the warm-up exclusion) and
``mean_bsld.png`` (mean bounded slowdown per policy and log).

Example::

    python -m hpctwin.experiments.compare_schedulers -w KTH-SP2 -w CTC-SP2 \
        --policies fcfs+none,fcfs+easy,fcfs+conservative,sjf+easy --out results/compare

Options: the vocabulary of ``docs/experiments.md`` (``--workload/-w`` several, ``--max-jobs``/``--skip-jobs``,
``--out``, ``--seed``, ``--workers``, ``--data-dir``; ``--logs`` is a deprecated alias).

``--out`` is checked before the first run and written atomically (``hpctwin.twin.runfolder``): it must
not exist, be empty, or be a folder hpctwin wrote, replaced only with ``--force``.

Runs are independent; ``--workers N`` runs them in N processes (results are identical and in the
same order whatever N is).
"""
from __future__ import annotations

import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd

from hpctwin.experiments import cli
from hpctwin.experiments.tables import display_name, staged_output, write_table_files

DEFAULT_POLICIES = "fcfs+none,fcfs+easy,fcfs+conservative,sjf+none,sjf+easy,wfp3+easy,unicep+easy"
METRICS = ["mean_wait_s", "median_wait_s", "mean_bsld", "utilisation", "makespan_s"]


def run_point(args: tuple) -> dict:
    """One (log, order, backfill) run: ``(log, order, backfill, seed, data_dir, estimate[, max_jobs,
    skip_jobs])`` -> its results row."""
    log, order, backfill, seed, data_dir, estimate, *window = args
    max_jobs, skip_jobs = (window + [None, None])[:2]
    from hpctwin.twin.run import RunConfig, run  # noqa: PLC0415
    res = run(RunConfig(workload=log, scheduler="fcfs", order=order, backfill=backfill, seed=seed,
                        data_dir=data_dir, estimate=estimate, out=None, max_jobs=max_jobs, skip_jobs=skip_jobs))
    s = res.summary
    row = {"log": s["workload"], "policy": f"{order}+{backfill}", "order": order, "backfill": backfill,
           "machine_units": s["machine_units"], "jobs": s["jobs_simulated"],
           "jobs_skipped": sum(s["jobs_skipped"].values()), "estimate": estimate, "tau_s": s["tau_s"]}
    row.update({k: s[k] for k in METRICS})
    return row


def caption(df: pd.DataFrame, window: str = "") -> str:
    logs = "; ".join(f"{display_name(log)} ({int(g.machine_units.iloc[0])} units, {int(g.jobs.iloc[0])} jobs)"
                     for log, g in df.groupby("log", sort=False))
    est = df.estimate.iloc[0]
    est_txt = "users' requested times" if est == "requested" else f"estimate model '{est}'"
    win = f" ({window})" if window else ""
    return (f"Scheduling policies on {logs}{win}. Estimates: {est_txt}; jobs killed at their requested time; "
            f"bounded slowdown with tau = {df.tau_s.iloc[0]:g} s; utilisation over first submit to last end; "
            "no warm-up or cool-down excluded. Jobs with runtime <= 0, no submit time or larger than the "
            "machine skipped (counted in results.csv).")


def plot(df: pd.DataFrame, path: Path) -> None:
    """Mean bounded slowdown per policy and log, at column width.

    Bars on a linear axis from 1 (the smallest bounded slowdown) when the values span less than 30x;
    otherwise one marker per log on a log axis (a bar on a log axis starts at an arbitrary floor,
    so its length means nothing)."""
    import numpy as np  # noqa: PLC0415

    from hpctwin.twin.plot import figure, save_png  # noqa: PLC0415
    pivot = df.pivot(index="policy", columns="log", values="mean_bsld").reindex(df.policy.unique())
    vals = pivot.to_numpy(dtype=float)
    fin = vals[np.isfinite(vals)]
    wide = len(pivot) * max(1, len(pivot.columns)) > 12
    fig, ax = figure(height_in=2.6, width_in=7.16 if wide else 3.5)
    ax = ax[0][0]
    x = np.arange(len(pivot))
    logscale = len(fin) > 0 and fin.max() / max(fin.min(), 1.0) > 30
    width = 0.8 / max(1, len(pivot.columns))
    for k, log in enumerate(pivot.columns):
        off = (k - (len(pivot.columns) - 1) / 2) * width
        name = display_name(log)
        label = name if len(name) <= 30 else "..." + name[-27:]
        if logscale:
            ax.plot(x + off, pivot[log].to_numpy(float), "o", ms=3.5, label=label)
        else:
            ax.bar(x + off, pivot[log].to_numpy(float) - 1.0, width, bottom=1.0, label=label)
    if logscale:
        ax.set_yscale("log")
        ax.grid(axis="y", which="major", lw=0.3, alpha=0.5)
        ax.set_ylabel("mean bounded slowdown\n(tau = 10 s; log scale)")
    else:
        ax.set_ylim(bottom=1.0)
        ax.set_ylabel("mean bounded slowdown (tau = 10 s)")
    ax.set_xticks(x)
    ax.set_xticklabels(list(pivot.index), rotation=45, ha="right", fontsize=6)
    ax.set_xlabel("queue order + backfilling")
    ax.legend(title="log", fontsize=6, title_fontsize=6)
    save_png(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = cli.parser("compare_schedulers", __doc__)
    cli.add_workload(ap, ["KTH-SP2"])
    ap.add_argument("--policies", default=DEFAULT_POLICIES, help="comma-separated order+backfill pairs")
    cli.add_job_window(ap)
    cli.add_out(ap, "results/compare_schedulers")
    cli.add_data_dir(ap)
    ap.add_argument("--estimate", default="requested",
                    help="runtime estimate the scheduler sees: requested, exact, or a model of datasets.estimates")
    cli.add_seed(ap)
    cli.add_workers(ap)
    a = ap.parse_args(argv)
    points = []
    window = (a.max_jobs, a.skip_jobs) if (a.max_jobs or a.skip_jobs) else ()
    for log in a.workload:
        for pol in a.policies.split(","):
            order, _, backfill = pol.partition("+")
            points.append((log.strip(), order.strip(), (backfill or "none").strip(), a.seed, a.data_dir, a.estimate,
                           *window))
    with staged_output("python -m hpctwin.experiments.compare_schedulers", a.out, a.force) as out:
        if a.workers > 1:
            with ProcessPoolExecutor(a.workers) as ex:
                rows = list(ex.map(run_point, points))
        else:
            rows = []
            for p in points:
                rows.append(run_point(p))
                print(f"{display_name(p[0])} {p[1]}+{p[2]}: mean bsld {rows[-1]['mean_bsld']:.2f}", file=sys.stderr)
        df = pd.DataFrame(rows)
        write_table_files(df, out, caption(df, cli.window_text(a.max_jobs, a.skip_jobs)), by=["log", "policy"],
                          metrics=METRICS,
                          label="tab:compare-schedulers")
        plot(df, out / "mean_bsld.png")
        table = (out / "results.md").read_text()
    print(table)
    print(f"wrote {a.out}/results.csv, results.md, results.tex, mean_bsld.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
