"""Conservative backfilling's scaling in queue length (issue 17): the synthetic 256-node log at load 1.2
with 12.5k / 25k / 50k jobs, on the compiled fast path and (``--engine``) on the general engine.

Prints, per job count and path, the CPU seconds of the replay alone (workload already loaded and
prepared: `time.process_time` around `schedulers.backfill_replay.replay` or `Simulation.run`), the ratio to the
smallest case (target: 50k <= 4.5 x 12.5k) and the figure in calibration units
(``benchmarks/calibration.py``, measured in this process). ``--ricc`` adds the whole RICC log on
the compiled path (target < 120 s).

    python benchmarks/conservative_scaling.py                       # compiled path, 12.5k/25k/50k
    python benchmarks/conservative_scaling.py --engine --engine-max 25000
    python benchmarks/conservative_scaling.py --jobs 12500,50000 --ricc
    python benchmarks/conservative_scaling.py --count --load 1.2,0.9,0.7

``--count`` measures the work the semantics ask for, independent of how fast we do it: on the
general engine (same schedules as the compiled path) it counts, per pass, the reservations that
really move earlier (a waiting job whose reservation after the pass is earlier than before, or
that starts now while reserved for later) and the reserved jobs that compression has to test.
Every exact implementation of Mu'alem-Feitelson compression (e.g. Batsim's conservative_bf, which
removes and re-adds every waiting job first-fit after any end) makes at least these moves, since
each one changes a reservation later jobs must respect. When the moves grow k times for 4x the
jobs, no exact algorithm scales better than k; the CPU per move shows what our code adds.

The general engine is forced by calling `Simulation.run` without the fast-path seam (its default),
so both paths run the same semantics (their schedules are identical: tests/test_fastpath.py).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import calibration  # noqa: E402

SPEC = "synthetic:jobs={n},nodes=256,load={load},seed=1"


def prepared(spec: str):
    """(job table, prepared workload, machine units) of a workload spec."""
    from hpctwin.twin.run import job_table, load_workload, prepare  # noqa: PLC0415
    wl = load_workload(spec)
    total = wl.machine_size or 256
    prep = prepare(wl, total, "benchmark")
    return job_table(prep), prep, total


def time_fast(jobs, prep, total) -> float:
    """CPU seconds of the compiled replay (fcfs + conservative)."""
    from hpctwin.schedulers import backfill_replay as fastpath  # noqa: PLC0415
    c0 = time.process_time()
    fastpath.replay(jobs.submit, jobs.procs, jobs.estimate, prep.workload.runtime, prep.kill_limit, total,
                    "fcfs", "conservative")
    return time.process_time() - c0


def time_engine(jobs, prep, total) -> float:
    """CPU seconds of the general engine (fcfs + conservative, no fast-path seam)."""
    from hpctwin.schedulers.registry import make_scheduler  # noqa: PLC0415
    from hpctwin.twin.simulation import Simulation  # noqa: PLC0415
    sched = make_scheduler("fcfs", "fcfs", "conservative")
    c0 = time.process_time()
    Simulation(jobs, prep.workload.runtime, prep.kill_limit, sched, total).run()
    return time.process_time() - c0


def count_work(jobs, prep, total) -> dict[str, float]:
    """Run the general engine (fcfs + conservative) counting, over all passes: ``moves`` (waiting
    jobs whose reservation became earlier, including those that start now while reserved for later),
    ``tests`` (jobs reserved in the future at a compressing pass), ``passes``, ``mean_queue`` (waiting
    jobs per pass) and ``cpu_s`` (CPU seconds, counting overhead included)."""
    import numpy as np  # noqa: PLC0415
    from hpctwin.schedulers.profile import ReservationPlan  # noqa: PLC0415
    from hpctwin.schedulers.registry import make_scheduler  # noqa: PLC0415
    from hpctwin.twin.simulation import Simulation  # noqa: PLC0415
    c = {"moves": 0, "tests": 0, "passes": 0, "queued": 0}
    plain = ReservationPlan.plan

    def counted(self, now, order, compress):
        order = np.ascontiguousarray(order, dtype=np.int64)
        before = self.resv[order]                  # fancy indexing: a copy
        out = plain(self, now, order, compress)
        after = self.resv[order]
        reserved = before > now
        c["moves"] += int((reserved & ~(after >= before)).sum())   # earlier, or NaN: started now
        c["tests"] += int(reserved.sum()) if compress else 0
        c["passes"] += 1
        c["queued"] += len(order)
        return out

    ReservationPlan.plan = counted
    try:
        c0 = time.process_time()
        Simulation(jobs, prep.workload.runtime, prep.kill_limit, make_scheduler("fcfs", "fcfs", "conservative"),
                   total).run()
        cpu = time.process_time() - c0
    finally:
        ReservationPlan.plan = plain
    return {"moves": c["moves"], "tests": c["tests"], "passes": c["passes"],
            "mean_queue": c["queued"] / max(c["passes"], 1), "cpu_s": cpu}


def print_counts(counts: list[int], loads: list[float]) -> None:
    """The ``--count`` table: required work per job count and load, and its growth."""
    print(f"{'load':>5} {'jobs':>7} {'mean queue':>10} {'tests':>11} {'moves':>10} {'moves/job':>9} "
          f"{'x smallest':>10}")
    for load in loads:
        first = None
        for n in counts:
            jobs, prep, total = prepared(SPEC.format(n=n, load=load))
            w = count_work(jobs, prep, total)
            first = first or w
            print(f"{load:>5} {n:>7} {w['mean_queue']:>10.0f} {w['tests']:>11,} {w['moves']:>10,} "
                  f"{w['moves'] / n:>9.1f} {w['moves'] / max(first['moves'], 1):>10.2f}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", default="12500,25000,50000", help="synthetic job counts")
    ap.add_argument("--engine", action="store_true", help="also time the general engine")
    ap.add_argument("--engine-max", type=int, default=50_000, help="largest job count for --engine")
    ap.add_argument("--ricc", action="store_true", help="also time the whole RICC log (compiled path)")
    ap.add_argument("--load", default="1.2", help="offered loads of the synthetic log (comma-separated)")
    ap.add_argument("--count", action="store_true",
                    help="count the moves and tests the semantics require (general engine; no timing)")
    a = ap.parse_args(argv)
    counts = [int(x) for x in a.jobs.split(",") if x]
    loads = [float(x) for x in a.load.split(",") if x]
    if a.count:
        print_counts(counts, loads)
        return 0
    import numpy as np  # noqa: PLC0415
    from hpctwin.schedulers import backfill_replay as fastpath  # noqa: PLC0415
    c0 = time.process_time()
    fastpath.replay(np.zeros(2), np.ones(2, dtype=np.int64), np.ones(2), np.ones(2), np.ones(2), 2, "fcfs",
                    "conservative")
    print(f"fast path import + first call (compiles on a machine's first run): {time.process_time() - c0:.2f} CPU s")
    unit = calibration.unit_seconds()
    print(f"calibration unit: {unit:.3f} CPU s (all figures measured in this process)\n")
    rows: dict[str, dict[int, float]] = {"compiled": {}, "engine": {}}
    print(f"{'path':<9} {'jobs':>7} {'CPU s':>8} {'x smallest':>10} {'units':>8}")
    for n in counts:
        jobs, prep, total = prepared(SPEC.format(n=n, load=loads[0]))
        paths = [("compiled", time_fast)] + ([("engine", time_engine)] if a.engine and n <= a.engine_max else [])
        for name, fn in paths:
            t = fn(jobs, prep, total)
            rows[name][n] = t
            base = rows[name][min(rows[name])]
            print(f"{name:<9} {n:>7} {t:>8.2f} {t / base:>10.2f} {t / unit:>8.2f}", flush=True)
    for name, r in rows.items():
        if len(r) >= 2:
            lo, hi = min(r), max(r)
            target = " (target <= 4.5x for 4x)" if hi == 4 * lo else ""
            print(f"{name}: {hi} jobs / {lo} jobs = {r[hi] / r[lo]:.2f}x for {hi / lo:.0f}x the jobs{target}")
    if a.ricc:
        jobs, prep, total = prepared("RICC")
        t = time_fast(jobs, prep, total)
        print(f"whole RICC ({len(jobs)} jobs), compiled fcfs+conservative: {t:.1f} CPU s = {t / unit:.1f} units "
              f"(target < 120 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
