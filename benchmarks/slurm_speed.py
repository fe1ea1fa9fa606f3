"""Benchmark: the Slurm-like scheduler (default parameters) replaying CTC-SP2 (77,222 jobs).

Target (issue 6): at most 60 s of simulation on one core. Prints simulation wall time and jobs/s
for the Slurm-like policy beside the core EASY on the same log, and the Slurm pass counters.

    python benchmarks/slurm_speed.py [--log CTC-SP2] [--max-jobs N] [--options k=v,...]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

TARGET_S = 60.0


def _opts(text: str) -> dict:
    out = {}
    for item in filter(None, (text or "").split(",")):
        k, _, v = item.partition("=")
        try:
            out[k] = int(v)
        except ValueError:
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = v
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log", default="CTC-SP2")
    ap.add_argument("--max-jobs", type=int, default=0)
    ap.add_argument("--options", default="", help="extra slurm options, k=v,k=v")
    ap.add_argument("--data-dir", default=None)
    a = ap.parse_args(argv)
    from hpctwin.twin.run import RunConfig, load_workload, run  # noqa: PLC0415

    wl = load_workload(a.log, data_dir=a.data_dir)
    if a.max_jobs:
        wl = wl.sorted().take(np.arange(min(a.max_jobs, len(wl))))
    rows = []
    for name, opts in (("easy", {}), ("slurm", _opts(a.options))):
        t0 = time.perf_counter()
        r = run(RunConfig(workload=a.log, scheduler=name, data_dir=a.data_dir,
                          options={"scheduler": opts}), workload=wl)
        wall = time.perf_counter() - t0
        s = r.summary
        rows.append((name, s["jobs_simulated"], s["simulation_seconds"], s["jobs_per_second"],
                     wall, s["mean_wait_s"], s["mean_bsld"], s["utilisation"]))
        if name == "slurm":
            stats = s["scheduler_params"]["stats"]
    print(f"log {a.log}: {rows[0][1]} jobs, {r.summary['machine_units']} nodes; Python "
          f"single process")
    print(f"{'policy':8s} {'sim s':>8s} {'jobs/s':>9s} {'wall s':>8s} {'mean wait s':>12s} "
          f"{'mean bsld':>10s} {'util':>6s}")
    for name, n, sim, jps, wall, w, b, u in rows:
        print(f"{name:8s} {sim:8.1f} {jps:9.0f} {wall:8.1f} {w:12.0f} {b:10.2f} {u:6.3f}")
    sim = rows[1][2]
    verdict = "meets" if sim <= TARGET_S else "MISSES"
    print(f"slurm (default parameters) {verdict} the {TARGET_S:.0f} s target: {sim:.1f} s "
          f"({rows[1][3]:.0f} jobs/s vs EASY {rows[0][3]:.0f} jobs/s)")
    print("slurm pass counters:", stats)


if __name__ == "__main__":
    main()
