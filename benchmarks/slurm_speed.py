"""Benchmark: the Slurm-like scheduler (default Slurm 22.05 parameters) beside the core EASY on the
same whole logs, timed in the same process, printed as ratios.

Target (issues 15 and 17 item 3): Slurm-like CPU time <= 3x EASY's on CTC-SP2 and on HPC2N. CPU
times are also printed in units of `benchmarks/calibration.py` (a fixed ~1 s machine-speed mix run
in this process) when that module is present, so figures from different machines compare.

    python benchmarks/slurm_speed.py [--logs CTC-SP2,HPC2N] [--max-jobs N] [--options k=v,...]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

TARGET_RATIO = 3.0


def _opts(text: str) -> dict:
    out: dict = {}
    for item in filter(None, (text or "").split(",")):
        k, _, v = item.partition("=")
        for cast in (int, float):
            try:
                out[k] = cast(v)
                break
            except ValueError:
                continue
        else:
            out[k] = v
    return out


def _unit() -> float | None:
    """CPU seconds of one calibration unit in this process (None without calibration.py)."""
    here = Path(__file__).resolve().parent
    if not (here / "calibration.py").exists():
        return None
    sys.path.insert(0, str(here))
    try:
        from calibration import unit_seconds  # noqa: PLC0415
    finally:
        sys.path.pop(0)
    return unit_seconds()


def time_log(log: str, max_jobs: int, options: dict, data_dir: str | None) -> list[tuple]:
    """Rows (policy, jobs, CPU s, wall s, summary) for EASY and Slurm-like on ``log``."""
    from hpctwin.twin.run import RunConfig, load_workload, run  # noqa: PLC0415

    wl = load_workload(log, data_dir=data_dir)
    if max_jobs:
        wl = wl.sorted().take(np.arange(min(max_jobs, len(wl))))
    rows = []
    for name, opts in (("easy", {}), ("slurm", options)):
        c0, w0 = time.process_time(), time.perf_counter()
        r = run(RunConfig(workload=log, scheduler=name, data_dir=data_dir,
                          options={"scheduler": opts}), workload=wl)
        rows.append((name, r.summary["jobs_simulated"], time.process_time() - c0,
                     time.perf_counter() - w0, r.summary))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--logs", default="CTC-SP2,HPC2N")
    ap.add_argument("--max-jobs", type=int, default=0)
    ap.add_argument("--options", default="", help="extra slurm options, k=v,k=v")
    ap.add_argument("--data-dir", default=None)
    a = ap.parse_args(argv)
    unit = _unit()
    if unit:
        print(f"calibration unit: {unit:.3f} CPU s")
    ok = True
    for log in filter(None, a.logs.split(",")):
        rows = time_log(log, a.max_jobs, _opts(a.options), a.data_dir)
        print(f"\nlog {log}: {rows[0][1]} jobs, {rows[0][4]['machine_units']} nodes; one process")
        print(f"{'policy':8s} {'CPU s':>8s} {'wall s':>8s} {'units':>7s} {'mean wait s':>12s} "
              f"{'util':>6s}")
        for name, _, cpu, wall, s in rows:
            u = f"{cpu / unit:7.2f}" if unit else f"{'-':>7s}"
            print(f"{name:8s} {cpu:8.2f} {wall:8.2f} {u} {s['mean_wait_s']:12.0f} "
                  f"{s['utilisation']:6.3f}")
        ratio = rows[1][2] / rows[0][2]
        verdict = "meets" if ratio <= TARGET_RATIO else "MISSES"
        ok &= ratio <= TARGET_RATIO
        print(f"slurm/easy CPU ratio {ratio:.2f} ({verdict} the <= {TARGET_RATIO:g}x target)")
        print("slurm pass counters:", rows[1][4]["scheduler_params"]["stats"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
