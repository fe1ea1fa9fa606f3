"""Replay speed of whole real logs: jobs, wall seconds, jobs/second and peak memory.

Each (log, scheduler) case runs in a fresh process (``python benchmarks/replay_speed.py --case LOG
SCHED``) so timings and the peak resident memory (``ru_maxrss``) are its own. Wall time is split into
loading the log (parse + sort) and the replay (simulation + metrics); no output files are written.

Targets (issue "The twin's core"), one core of the 2-core reference machine: EASY on CTC-SP2 <= 5 s,
conservative on CTC-SP2 <= 30 s, HPC2N with EASY <= 15 s, peak memory < 1 GB.

Every case also prints its CPU seconds as ratios measured in the same process: to the calibration
unit (``benchmarks/calibration.py``, a fixed heapq/dict/float/numpy mix of about 1 s) and to the
minimal plain-Python EASY replay of the same log (``benchmarks/plain_easy.py``, identical schedule
to ``--scheduler easy``), so the figures compare across machines and background loads.

Usage: python benchmarks/replay_speed.py [--logs KTH-SP2,CTC-SP2,...] [--schedulers fcfs,easy,conservative]
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import calibration  # noqa: E402
import plain_easy  # noqa: E402

LOGS = ["KTH-SP2", "CTC-SP2", "SDSC-SP2", "HPC2N", "SDSC-BLUE"]
SCHEDULERS = ["fcfs", "easy", "conservative"]
TARGETS = {("CTC-SP2", "easy"): 5.0, ("CTC-SP2", "conservative"): 30.0, ("HPC2N", "easy"): 15.0}


def plain_cpu(log: str) -> float:
    """CPU seconds of the plain-Python EASY replay of ``log`` (read + replay), in this process."""
    c0 = time.process_time()
    rows, total = plain_easy.read_swf(next((plain_easy.DATA / log).glob("*.swf*")))
    plain_easy.replay(plain_easy.prepare(rows, total), total)
    return time.process_time() - c0


def run_case(log: str, sched: str) -> dict:
    unit = calibration.unit_seconds(repeat=1)
    plain = plain_cpu(log)
    c0 = time.process_time()
    t0 = time.perf_counter()
    from hpctwin.twin.run import RunConfig, load_workload, run  # noqa: PLC0415
    wl = load_workload(log)
    t1 = time.perf_counter()
    res = run(RunConfig(workload=log, scheduler=sched, out=None), workload=wl)
    t2 = time.perf_counter()
    cpu = time.process_time() - c0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    s = res.summary
    return {"log": log, "scheduler": sched, "jobs": s["jobs_simulated"], "load_s": round(t1 - t0, 2),
            "replay_s": round(t2 - t1, 2), "simulation_s": s["simulation_seconds"],
            "total_s": round(t2 - t0, 2), "jobs_per_s": round(s["jobs_simulated"] / (t2 - t0)),
            "peak_mb": round(peak_mb), "mean_wait_s": round(s["mean_wait_s"], 1),
            "mean_bsld": round(s["mean_bsld"], 3), "utilisation": round(s["utilisation"], 4),
            "cpu_s": round(cpu, 2), "units": round(cpu / unit, 2), "x_plain": round(cpu / plain, 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logs", default=",".join(LOGS))
    ap.add_argument("--schedulers", default=",".join(SCHEDULERS))
    ap.add_argument("--case", nargs=2, metavar=("LOG", "SCHED"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.case:
        print(json.dumps(run_case(*a.case)))
        return 0
    # compile the numba kernels once so no case pays for it
    subprocess.run([sys.executable, "-c", "import hpctwin.schedulers.profile as p; p.AvailabilityProfile(0, 4).compress(0, [1], [1.0], [5.0])"],
                   check=True)
    rows = []
    hdr = f"{'log':<10} {'sched':<13} {'jobs':>7} {'load s':>7} {'replay s':>8} {'total s':>8} {'jobs/s':>8} {'peak MB':>8} {'units':>6} {'x plain':>7} {'target':>8}"
    print(hdr)
    for log in a.logs.split(","):
        for sched in a.schedulers.split(","):
            out = subprocess.run([sys.executable, __file__, "--case", log, sched], capture_output=True, text=True)
            if out.returncode != 0:
                print(f"{log:<10} {sched:<13} FAILED: {out.stderr.strip().splitlines()[-1]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(r)
            tgt = TARGETS.get((log, sched))
            verdict = "" if tgt is None else f"{'OK' if r['total_s'] <= tgt else 'MISS'} <={tgt:g}"
            print(f"{log:<10} {sched:<13} {r['jobs']:>7} {r['load_s']:>7.2f} {r['replay_s']:>8.2f} "
                  f"{r['total_s']:>8.2f} {r['jobs_per_s']:>8} {r['peak_mb']:>8} {r['units']:>6.2f} {r['x_plain']:>7.2f} {verdict:>8}", flush=True)
    print(f"\npeak memory over all cases: {max(r['peak_mb'] for r in rows)} MB (target < 1024 MB)")
    print("units = CPU s of the case / CPU s of the calibration unit; x plain = CPU s of the case / CPU s of\n"
          "the plain-Python EASY replay of the same log (both measured in the case's own process)")
    print("reference point: a 2007 Python simulator did 2,457 jobs/s on a 550 MHz CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
