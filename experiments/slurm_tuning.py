"""What-if: how Slurm's backfill and fair-share knobs change waits on a real log.

One-at-a-time sweep around a baseline (Slurm 22.05's defaults plus a typical multifactor setup with
slurmdbd accounting: PriorityWeightFairshare=10000, PriorityWeightAge=1000, Fair Tree, equal shares
per SWF group
(account) and user): ``bf_interval`` (s), ``bf_max_job_test``, ``bf_window`` (minutes) and
``PriorityDecayHalfLife`` (days). For each run: mean wait (s), mean bounded slowdown (tau = 10 s),
utilisation, and per-user wait fairness: the spread (standard deviation, s) of the users' mean
waits and Jain's index of those means (1 = all users wait the same).

Writes ``results.csv``, ``results.md`` (Markdown table), ``results.tex`` (LaTeX, booktabs) through
:mod:`hpctwin.experiments.tables`, and ``slurm_tuning.png`` to ``--out``; run times go to
``timings.csv`` so the tables are the same bytes for the same options. ``--out`` is checked before the
first run and written atomically: it must not exist, be empty, or be a folder hpctwin wrote, replaced
only with ``--force``. Usage::

    python -m hpctwin.experiments.slurm_tuning -w KTH-SP2 --max-jobs 10000 --out runs/slurm_tuning
    python -m hpctwin.experiments.slurm_tuning -w synthetic:jobs=300,nodes=64 --out /tmp/st   # a tiny check

Options: the vocabulary of ``docs/experiments.md`` (``--log`` is a deprecated alias of ``-w``).

Conventions (printed with every table): wait = start - submit; bsld = max(1, (wait + run) /
max(run, 10 s)); utilisation = used node-seconds / (nodes x span); no warm-up excluded; estimates =
requested times (kill at the limit); one SWF processor = one node (whole-node allocation).
"""
from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd

from hpctwin.experiments import cli
from hpctwin.experiments.tables import display_name, staged_output, write_table_files

# fair-share and age apply only with slurmdbd accounting (priority_multifactor.c), and the Slurm
# 22.05 default PriorityType is priority/basic: both are set explicitly
BASELINE = {"PriorityType": "priority/multifactor",
            "AccountingStorageType": "accounting_storage/slurmdbd",
            "PriorityWeightFairshare": 10000, "PriorityWeightAge": 1000}
SWEEP = {
    "bf_interval": [10, 30, 120, 600],
    "bf_max_job_test": [10, 100, 500, 5000],
    "bf_window": [60, 360, 1440, 10080],
    "PriorityDecayHalfLife": ["0-6", "1-0", "7-0", "28-0"],
}
DEFAULTS = {"bf_interval": 30, "bf_max_job_test": 500, "bf_window": 1440, "PriorityDecayHalfLife": "7-0"}


def user_fairness(df: pd.DataFrame) -> tuple[float, float]:
    """(std of per-user mean waits in s, Jain's index of those means)."""
    per_user = df.groupby("user")["wait"].mean().to_numpy(dtype=float)
    if len(per_user) == 0:
        return float("nan"), float("nan")
    spread = float(per_user.std())
    s2 = float((per_user ** 2).sum())
    jain = float(per_user.sum() ** 2 / (len(per_user) * s2)) if s2 > 0 else 1.0
    return spread, jain


def one_run(args: tuple) -> dict:
    """One run: ``(log, max_jobs, param, value, data_dir[, skip_jobs])`` -> its results row (``wall_s``:
    its run time, written to timings.csv, never to a table)."""
    log, max_jobs, param, value, data_dir, *rest = args
    from hpctwin.twin.run import RunConfig, job_window, load_workload, run  # noqa: PLC0415 - worker process

    wl = job_window(load_workload(log, data_dir=data_dir), max_jobs or None, rest[0] if rest else None)
    opts = dict(BASELINE)
    if param is not None:
        opts[param] = value
    t0 = time.perf_counter()
    r = run(RunConfig(workload=log, scheduler="slurm", data_dir=data_dir,
                      options={"scheduler": opts}), workload=wl)
    spread, jain = user_fairness(r.jobs)
    s = r.summary
    return {"parameter": param or "baseline", "value": value if param else "",
            "mean_wait_s": s["mean_wait_s"], "mean_bsld": s["mean_bsld"],
            "utilisation": s["utilisation"], "user_wait_spread_s": spread, "user_wait_jain": jain,
            "jobs": s["jobs_simulated"], "machine_nodes": s["machine_units"],
            "wall_s": round(time.perf_counter() - t0, 1)}


TABLE_METRICS = ["mean_wait_s", "mean_bsld", "utilisation", "user_wait_spread_s", "user_wait_jain"]


def plot(df: pd.DataFrame, path: Path, title: str) -> None:
    """One row per knob (column width, 3.5 in): mean wait (h) and the spread of users' mean waits (h)."""
    from hpctwin.twin.plot import figure, save_png  # noqa: PLC0415

    params = list(SWEEP)
    units = {"bf_window": " (min)", "bf_interval": " (s)", "PriorityDecayHalfLife": " (days-hours)"}
    fig, axes = figure(len(params), 2, height_in=1.35 * len(params) + 0.4)
    for k, p in enumerate(params):
        sub = df[df.parameter == p]
        x = [str(v) for v in sub.value]
        axes[k][0].bar(x, sub.mean_wait_s / 3600.0, color="C0")
        axes[k][0].set_ylabel("mean wait (h)")
        axes[k][1].bar(x, sub.user_wait_spread_s / 3600.0, color="C1")
        axes[k][1].set_ylabel("users' spread (h)")
        for ax in axes[k]:
            ax.set_xlabel(p + units.get(p, ""), fontsize=6.5)
            ax.tick_params(axis="x", labelsize=6)
    axes[0][0].set_title("mean wait")
    axes[0][1].set_title("std of users' mean waits")
    fig.suptitle(title, fontsize=7.5)
    save_png(fig, path)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    ap = cli.parser("slurm_tuning", __doc__)
    cli.add_workload(ap, "KTH-SP2", several=False, aliases=("--log",),
                     help_text="registry name, SWF/sacct path or synthetic:...")
    cli.add_job_window(ap)
    cli.add_out(ap, "runs/slurm_tuning")
    cli.add_workers(ap)
    cli.add_data_dir(ap)
    a = ap.parse_args(argv)
    with staged_output("python -m hpctwin.experiments.slurm_tuning", a.out, a.force) as out:
        df, conv = _run_and_write(a, out)
    print(conv)
    print(df.drop(columns=["jobs", "machine_nodes"]).to_string(index=False))
    return df


def _run_and_write(a, out: Path) -> tuple[pd.DataFrame, str]:
    """The baseline and every knob's runs, then timings.csv, the table and the plot into ``out``."""
    skip = (a.skip_jobs,) if a.skip_jobs else ()
    tasks = [(a.workload, a.max_jobs or 0, None, None, a.data_dir, *skip)]
    for p, values in SWEEP.items():
        tasks += [(a.workload, a.max_jobs or 0, p, v, a.data_dir, *skip) for v in values if v != DEFAULTS[p]]
    if a.workers > 1:
        with ProcessPoolExecutor(a.workers) as ex:
            rows = list(ex.map(one_run, tasks))
    else:
        rows = [one_run(t) for t in tasks]
    df = pd.DataFrame(rows)
    # the baseline is also the default point of every sweep
    base = df[df.parameter == "baseline"].iloc[0]
    extra = []
    for p in SWEEP:
        b = base.copy()
        b["parameter"], b["value"] = p, DEFAULTS[p]
        extra.append(b)
    df = pd.concat([df, pd.DataFrame(extra)], ignore_index=True)
    order = {p: i for i, p in enumerate(["baseline", *SWEEP])}

    def sort_key(row):
        vals = SWEEP.get(row.parameter, [""])
        return (order[row.parameter], vals.index(row.value) if row.value in vals else -1)

    df = df.iloc[sorted(range(len(df)), key=lambda i: sort_key(df.iloc[i]))].reset_index(drop=True)
    window = cli.window_text(a.max_jobs, a.skip_jobs)
    size = f"{int(base.jobs)} jobs, {int(base.machine_nodes)} nodes" + (f"; {window}" if window else "")
    conv = (f"Log {display_name(a.workload)} ({size}); policy: Slurm-like "
            f"(hpctwin schedulers.slurm), baseline = Slurm defaults + {BASELINE}; estimates = "
            "requested times; wait = start - submit; bsld = max(1, (wait+run)/max(run, 10 s)); "
            "utilisation over the whole span, no warm-up excluded; user fairness = std and Jain "
            "index of per-user mean waits.")
    df["value"] = df["value"].astype(str)
    df[["parameter", "value", "wall_s"]].to_csv(out / "timings.csv", index=False)
    write_table_files(df.drop(columns=["wall_s"]), out, conv, by=["parameter", "value"], metrics=TABLE_METRICS,
                      label="tab:slurm-tuning")
    plot(df, out / "slurm_tuning.png", f"{display_name(a.workload)}: Slurm backfill and fair-share knobs")
    return df, conv


if __name__ == "__main__":
    main()
