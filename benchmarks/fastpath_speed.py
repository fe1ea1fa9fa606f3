"""Engine speed of the compiled fast path (`schedulers/backfill_replay.py`) and of conservative backfilling.

Prints, for whole real logs and the issue-17 synthetic scaling case (256 nodes, load 1.2, 12.5k /
25k / 50k jobs), the CPU seconds of the replay alone (log already loaded and prepared), jobs per
second, and the figures as ratios measured in this process: to the calibration unit
(``benchmarks/calibration.py``) and, for conservative, the 50k / 12.5k ratio (target <= 4.5).
``--engine`` also times the general engine on the same input (slow for long logs).

    python benchmarks/fastpath_speed.py                       # CTC-SP2, RICC, synthetic scaling
    python benchmarks/fastpath_speed.py --logs CTC-SP2 --policies fcfs+easy --engine

Targets (issue 17): >= 200k jobs/s on the compiled path; conservative 50k <= 4.5x 12.5k; whole
RICC conservative < 120 s and EASY < 15 s. The first run on a machine compiles the kernels (cached
on disk): the script reports that time separately. ``benchmarks/conservative_scaling.py`` prints the
conservative scaling case alone (seed 1), on both the compiled path and the general engine.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import calibration  # noqa: E402


def prepared(spec: str):
    from hpctwin.twin.run import job_table, load_workload, prepare  # noqa: PLC0415
    wl = load_workload(spec)
    total = wl.machine_size or 256
    prep = prepare(wl, total, "benchmark")
    return job_table(prep), prep, total


def time_fast(jobs, prep, total, order, backfill) -> float:
    from hpctwin.schedulers import backfill_replay as fastpath  # noqa: PLC0415
    c0 = time.process_time()
    fastpath.replay(jobs.submit, jobs.procs, jobs.estimate, prep.workload.runtime, prep.kill_limit, total,
                    order, backfill)
    return time.process_time() - c0


def time_engine(jobs, prep, total, order, backfill) -> float:
    from hpctwin.schedulers.registry import make_scheduler  # noqa: PLC0415
    from hpctwin.twin.simulation import Simulation  # noqa: PLC0415
    c0 = time.process_time()
    Simulation(jobs, prep.workload.runtime, prep.kill_limit, make_scheduler("fcfs", order, backfill), total).run()
    return time.process_time() - c0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logs", default="CTC-SP2,RICC")
    ap.add_argument("--policies", default="fcfs+easy,fcfs+conservative")
    ap.add_argument("--scaling", default="12500,25000,50000", help="synthetic job counts ('' = skip)")
    ap.add_argument("--engine", action="store_true", help="also time the general engine")
    a = ap.parse_args(argv)
    c0 = time.process_time()
    from hpctwin.schedulers import backfill_replay as fastpath  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    fastpath.replay(np.zeros(2), np.ones(2, dtype=np.int64), np.ones(2), np.ones(2), np.ones(2), 2, "fcfs", "easy")
    print(f"fast path import + first call (compiles on the first run on a machine, else loads the cache): "
          f"{time.process_time() - c0:.2f} CPU s")
    unit = calibration.unit_seconds()
    print(f"calibration unit: {unit:.3f} CPU s (all figures measured in this process)\n")
    print(f"{'case':<34} {'jobs':>8} {'fast s':>8} {'jobs/s':>10} {'units':>7}" + (f" {'engine s':>9} {'x':>6}" if a.engine else ""))
    cases = [(log, pol) for log in filter(None, a.logs.split(",")) for pol in a.policies.split(",")]
    cases += [(f"synthetic:jobs={n},nodes=256,load=1.2", "fcfs+conservative") for n in filter(None, a.scaling.split(","))]
    scaling = {}
    for spec, pol in cases:
        order, backfill = pol.split("+")
        jobs, prep, total = prepared(spec)
        t = time_fast(jobs, prep, total, order, backfill)
        line = f"{spec[:24] + ' ' + pol:<34} {len(jobs):>8} {t:>8.2f} {len(jobs) / t:>10,.0f} {t / unit:>7.2f}"
        if spec.startswith("synthetic"):
            scaling[len(jobs)] = t
        if a.engine:
            te = time_engine(jobs, prep, total, order, backfill)
            line += f" {te:>9.2f} {te / t:>6.1f}"
        print(line, flush=True)
    if len(scaling) >= 2:
        lo, hi = min(scaling), max(scaling)
        print(f"\nconservative scaling: {hi} jobs / {lo} jobs = {scaling[hi] / scaling[lo]:.2f}x for "
              f"{hi / lo:.0f}x the jobs (target <= 4.5x for 4x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
