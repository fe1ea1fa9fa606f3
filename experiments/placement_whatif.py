"""What-if: node placement policies on a Dragonfly and on a fat-tree machine, with network contention.

For each (machine, placement policy) the same real log is replayed with EASY backfilling and
``--network on`` and the script tabulates: mean wait (s), mean bounded slowdown (tau = 10 s), mean
groups spanned per job (Dragonfly groups / fat-tree pods), total bytes crossing group boundaries,
mean runtime stretch from contention, and utilisation. It writes ``results.csv``, ``results.md``,
``results.tex`` and ``groups_spanned.png`` (distribution of groups spanned per policy and machine) into
``--out``, checked before the first run and written atomically (it must not exist, be empty, or be a
folder hpctwin wrote, replaced only with ``--force``).

Defaults: the CTC-SP2 log (338 nodes, one processor per node, so sizes are nodes) on ``adastra``
(Slingshot Dragonfly, 384 nodes in 3 groups) and on ``lassen`` (EDR fat-tree with a 2:1 edge taper,
792 nodes in 3 pods). Communication data are not in the log: the network model's documented default
distribution (assumption) is used, seeded from the run seed.

Usage: ``python -m hpctwin.experiments.placement_whatif [-w CTC-SP2] [--system adastra --system lassen]
[--max-jobs N] [--out DIR]`` (options: the vocabulary of ``docs/experiments.md``; ``--log``, ``--systems``
and ``--jobs`` are deprecated aliases).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hpctwin.experiments import cli
from hpctwin.experiments.tables import display_name, staged_output, write_table_files

POLICIES = ("first-fit", "contiguous", "group-packed", "spread")


def run_grid(log: str, systems: list[str], jobs: int | None, seed: int = 0, scheduler: str = "easy",
             skip_jobs: int | None = None, data_dir: str | None = None) -> tuple[pd.DataFrame, dict]:
    """Every (machine, placement) run of ``log`` (its jobs ``skip_jobs + 1 .. skip_jobs + jobs`` in submit
    order, `twin.run.job_window`): the results frame and the groups spanned per run."""
    from hpctwin.twin.run import RunConfig, job_window, load_workload, run  # noqa: PLC0415
    wl = job_window(load_workload(log, data_dir=data_dir), jobs or None, skip_jobs)
    rows, spans = [], {}
    for system in systems:
        for pol in POLICIES:
            r = run(RunConfig(workload=log, system=system, scheduler=scheduler, placement=pol, network=True,
                              seed=seed), workload=wl)
            df, s = r.jobs, r.summary
            ran = df["start"].notna()
            spans[(system, pol)] = df.loc[ran, "groups_spanned"].to_numpy()
            rows.append({
                "machine": system, "topology": s.get("network_topology"), "log": log, "jobs": int(ran.sum()),
                "scheduler": scheduler, "placement": pol,
                "mean_wait_s": float(df.loc[ran, "wait"].mean()), "mean_bsld": float(df.loc[ran, "bsld"].mean()),
                "mean_groups_spanned": float(df.loc[ran, "groups_spanned"].mean()),
                "global_bytes": float(df["global_bytes"].sum()),
                "mean_contention_stretch": float(df.loc[ran, "contention_stretch"].mean()),
                "utilisation": float(s.get("utilisation", np.nan)),
            })
    return pd.DataFrame(rows), spans


def plot_spans(spans: dict, path: Path) -> None:
    from hpctwin.twin.plot import figure, save_png  # noqa: PLC0415
    systems = sorted({k[0] for k in spans})
    fig, axes = figure(len(systems), 1, height_in=2.1 * len(systems) + 0.2)
    for ax, system in zip(axes[:, 0], systems):
        vals = [spans[(system, p)] for p in POLICIES if (system, p) in spans]
        top = int(max(v.max() for v in vals if len(v))) if vals else 1
        bins = np.arange(0.5, top + 1.5)
        width = 0.8 / len(vals)
        for i, (p, v) in enumerate(zip(POLICIES, vals)):
            h, _ = np.histogram(v, bins=bins)
            ax.bar(np.arange(1, top + 1) + (i - len(vals) / 2 + 0.5) * width, h / max(len(v), 1), width, label=p)
        ax.set_xlabel("groups spanned by a job")
        ax.set_ylabel("fraction of jobs")
        ax.set_title(f"{system}: placement policies")
        ax.legend(title="placement", title_fontsize=6)
    save_png(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = cli.parser("placement_whatif", __doc__)
    cli.add_workload(ap, "CTC-SP2", several=False, aliases=("--log",))
    cli.add_system(ap, ["adastra", "lassen"], help_text="machines with a [network] table (hpctwin systems)")
    cli.add_job_window(ap, aliases=("--jobs",))
    cli.add_data_dir(ap)
    cli.add_seed(ap, "seed of the runs (communication fractions and kinds of the network model)")
    cli.add_out(ap, "whatif-placement")
    a = ap.parse_args(argv)
    conv = ("EASY backfilling, requested times as estimates, kill at walltime; wait = start - submit; "
            "bsld = max(1, (wait + run) / max(run, 10 s)); stretch = wall time / isolated runtime from "
            "max-min link sharing; communication fractions and kinds drawn from the network model's "
            "default distribution (assumption), seed %d." % a.seed)
    with staged_output("python -m hpctwin.experiments.placement_whatif", a.out, a.force) as out:
        extra = {k: v for k, v in (("skip_jobs", a.skip_jobs), ("data_dir", a.data_dir)) if v}
        df, spans = run_grid(a.workload, a.system, a.max_jobs, a.seed, **extra)
        window = cli.window_text(a.max_jobs, a.skip_jobs)
        write_table_files(df, out, f"Placement what-if on {display_name(a.workload)}"
                          + (f" ({window})" if window else "") + ". " + conv, label="tab:placement-whatif")
        plot_spans(spans, out / "groups_spanned.png")
    print(df.to_string(index=False))
    print(conv)
    print(f"wrote {a.out}/results.csv, results.md, results.tex, groups_spanned.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
