"""What-if: facility power caps on a real log replayed on Frontier-class nodes.

One real log (default: KTH-SP2, 28,476 jobs, 100 nodes) runs on a machine of Frontier nodes
(``--system frontier --nodes`` = the log's machine size; HPE EX235a node constants from ORNL RAPS)
with power and cooling on, under facility caps from none down to 60 % of the machine's peak
electrical power (rack input + CDU pumps, all nodes at full load). The cap limits the *facility*
power (cooling plant included, `power.cap`); ``cap_held`` and ``max_over_cap_w`` in the results say
whether it held at every 15 s sample. Two ways to honour a cap:

* ``throttle``: plain EASY; the power model scales the running jobs' dynamic power so the machine
  stays under the cap, and the jobs slow down (beta model, `power.profiles`);
* ``power-aware``: `schedulers.power_aware.PowerAwareScheduler` around EASY refuses starts that
  would cross the cap (jobs wait instead), with the throttle as a backstop for jobs that exceed
  the cap on their own.

Writes ``results.csv``, ``results.md`` (mean wait, mean bounded slowdown (tau = 10 s), energy,
peak and mean facility power, makespan) and ``facility_power.png`` (facility power under two caps).
Conventions: wait = start - submit; bsld = max(1, (wait + run) / max(run, 10 s)); energy and
power are the facility's (IT + conversion losses + cooling); peak = max over 15 s averages.

Usage: ``python -m hpctwin.experiments.power_cap_whatif [-w KTH-SP2] [--out DIR] [--max-jobs N]``
(``--max-jobs N``: the first N jobs of the log in submit order only; options: the vocabulary of
``docs/experiments.md``, ``--log`` and ``--jobs`` are deprecated aliases). ``--out`` is checked before the first run and
written atomically: it must not exist, be empty, or be a folder hpctwin wrote, replaced only with ``--force``.
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from hpctwin.experiments import cli
from hpctwin.experiments.tables import display_name, staged_output, write_table_files

from hpctwin.power.chain import Chain
from hpctwin.power.config import parse_power
from hpctwin.twin.run import RunConfig, run
from hpctwin.twin.system import load_system

CAPS = (None, 0.9, 0.8, 0.7, 0.6)


def machine_peak_w(system: str, nodes: int) -> float:
    s = load_system(system)
    table = dict(s.power)
    table.pop("slots", None)
    table.pop("cdus", None)          # as PowerModel does for a resized machine
    cfg = parse_power(table, nodes=nodes, cpus_per_node=s.cpus_per_node, gpus_per_node=s.gpus_per_node, path=s.path)
    return Chain(cfg).uniform_breakdown(1.0, 1.0)["facility_w"]


def one(log, system: str, nodes: int, mode: str, cap_w: float | None, seed: int):
    power_opts: dict = {}
    opts: dict = {"power": power_opts}
    sched = "easy"
    if cap_w is not None:
        power_opts["facility_cap_w"] = cap_w
        if mode == "power-aware":
            sched = "hpctwin.schedulers.power_aware:PowerAwareScheduler"
            opts["scheduler"] = {"inner": "easy", "cap": cap_w}
    name, wl = (log, None) if isinstance(log, str) else (log.name, log)
    r = run(RunConfig(workload=name, system=system, nodes=nodes, power=True, seed=seed, scheduler=sched,
                      options=opts), workload=wl)
    s = r.summary
    fac = r.timeseries["power_facility_w"][0]
    row = {"mode": mode if cap_w is not None else "none", "cap_w": cap_w if cap_w is not None else math.inf,
           "mean_wait_s": float(r.jobs["wait"].mean()), "mean_bsld": float(r.jobs["bsld"].mean()),
           "energy_mwh": s["energy_facility_kwh"] / 1e3, "peak_facility_w": float(np.nanmax(fac)),
           "mean_facility_w": s["avg_facility_power_w"],
           "makespan_s": float(r.jobs["end"].max() - r.jobs["submit"].min()),
           "mean_pue": s["mean_pue"],
           "cap_held": s["power_cap"]["held"] if "power_cap" in s else None,
           "max_over_cap_w": s["power_cap"]["max_excess_w"] if "power_cap" in s else 0.0}
    return row, (r.timeseries["time"][0], fac)


def main(argv=None) -> pd.DataFrame:
    ap = cli.parser("power_cap_whatif", __doc__)
    cli.add_workload(ap, "KTH-SP2", several=False, aliases=("--log",))
    cli.add_system(ap, "frontier", several=False, aliases=(),
                   help_text="machine whose node power model the runs use (a built-in name or a .toml file)")
    ap.add_argument("--nodes", type=cli.positive_int, default=100, help="machine size (units of the log)")
    cli.add_job_window(ap, aliases=("--jobs",))
    cli.add_data_dir(ap)
    cli.add_seed(ap)
    cli.add_out(ap, "results/power_cap_whatif")
    args = ap.parse_args(argv)
    with staged_output("python -m hpctwin.experiments.power_cap_whatif", args.out, args.force) as out:
        df = _run_and_write(args, out)
    print(df.to_string())
    return df


def _run_and_write(args, out: Path) -> pd.DataFrame:
    """Every (cap, mode) run, then the table and the plot into the folder ``out``."""
    log = args.workload
    if args.max_jobs is not None or args.skip_jobs is not None or args.data_dir is not None:
        from hpctwin.twin.run import job_window, load_workload  # noqa: PLC0415
        log = job_window(load_workload(args.workload, data_dir=args.data_dir), args.max_jobs, args.skip_jobs)
    peak = machine_peak_w(args.system, args.nodes)
    rows, series = [], {}
    for frac in CAPS:
        modes = ["none"] if frac is None else ["throttle", "power-aware"]
        for mode in modes:
            t = time.perf_counter()
            cap = None if frac is None else frac * peak
            row, ts = one(log, args.system, args.nodes, mode, cap, args.seed)
            row["cap_fraction_of_peak"] = frac if frac is not None else float("nan")
            row["wall_s"] = round(time.perf_counter() - t, 1)
            rows.append(row)
            series[(mode, frac)] = ts
            print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
    df = pd.DataFrame(rows)
    window = cli.window_text(args.max_jobs, args.skip_jobs)
    head = (f"Log {display_name(args.workload)}" + (f" ({window})" if window else "") + f" on {args.nodes} "
            f"{display_name(args.system)} nodes (peak electrical {peak / 1e6:.3f} MW), "
            f"EASY, seed {args.seed}. wait = start - submit; bsld tau = 10 s; energy/power = facility "
            "(IT + losses + cooling); peak over 15 s averages.")
    write_table_files(df, out, head, by=["mode"], label="tab:power-cap",
                      missing_note="{dash}: no cap (mode none).")
    import matplotlib  # noqa: PLC0415 - matplotlib only for the figure
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 - matplotlib only for the figure
    fig, ax = plt.subplots(figsize=(11, 4))
    for key in [("none", None), ("throttle", 0.7), ("power-aware", 0.7)]:
        if key in series:
            t, f = series[key]
            ax.plot(t / 86400.0, f / 1e3, lw=0.5, label=f"{key[0]}" + (f" cap {key[1]:.0%}" if key[1] else ""))
    ax.axhline(0.7 * peak / 1e3, color="k", ls="--", lw=0.8)
    ax.set_xlabel("days")
    ax.set_ylabel("facility power (kW)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "facility_power.png", dpi=130)
    return df


if __name__ == "__main__":
    main()
