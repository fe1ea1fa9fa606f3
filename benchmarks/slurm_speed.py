"""Benchmark: the Slurm-like scheduler (default Slurm 22.05 parameters) beside the core EASY on the
same whole logs, printed as CPU-time ratios.

Target (issues 15 and 17 item 3): Slurm-like CPU time <= 3x EASY's on CTC-SP2 and on HPC2N. Each
(log, policy) runs in its own fresh process (the workload is loaded before the clock starts) and is
timed twice there: ``cold``, the first `run` of the process, which pays for loading the compiled
kernels as every ``hpctwin run`` does (both policies run compiled replays: `schedulers.backfill_replay` for
EASY, `schedulers.slurm_replay` for Slurm), and ``warm``, a second identical `run` in the same
process (the replay alone). The verdict is on the cold ratio; the warm ratio is printed beside it.
CPU times are also printed in units of `benchmarks/calibration.py` (a fixed ~1 s machine-speed mix
run in the parent process) when that module is present.

    python benchmarks/slurm_speed.py [--logs CTC-SP2,HPC2N] [--max-jobs N] [--options k=v,...]
"""
from __future__ import annotations

import argparse
import json
import subprocess
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


def _child(log: str, policy: str, max_jobs: int, options: dict, data_dir: str | None) -> dict:
    """Time one policy on ``log`` in this (fresh) process: cold and warm CPU/wall seconds."""
    from hpctwin.twin.run import RunConfig, load_workload, run  # noqa: PLC0415

    wl = load_workload(log, data_dir=data_dir)
    if max_jobs:
        wl = wl.sorted().take(np.arange(min(max_jobs, len(wl))))
    out: dict = {}
    for phase in ("cold", "warm"):
        c0, w0 = time.process_time(), time.perf_counter()
        r = run(RunConfig(workload=log, scheduler=policy, data_dir=data_dir,
                          options={"scheduler": options if policy == "slurm" else {}}), workload=wl)
        out[phase] = (time.process_time() - c0, time.perf_counter() - w0)
    s = r.summary
    out.update(jobs=s["jobs_simulated"], nodes=s["machine_units"], wait=s["mean_wait_s"],
               util=s["utilisation"], stats=s.get("scheduler_params", {}).get("stats"),
               engine=s.get("scheduler_params", {}).get("engine"))
    return out


def time_log(log: str, max_jobs: int, options: dict, data_dir: str | None) -> dict:
    """{policy: child result} for EASY and Slurm-like on ``log``, each in its own process."""
    res = {}
    for policy in ("easy", "slurm"):
        cmd = [sys.executable, __file__, "--child", policy, "--logs", log,
               "--max-jobs", str(max_jobs), "--options", json.dumps(options)]
        if data_dir:
            cmd += ["--data-dir", data_dir]
        p = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if p.returncode:
            raise RuntimeError(f"{log} {policy}: child failed:\n{p.stderr[-2000:]}")
        res[policy] = json.loads(p.stdout.strip().splitlines()[-1])
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--logs", default="CTC-SP2,HPC2N")
    ap.add_argument("--max-jobs", type=int, default=0)
    ap.add_argument("--options", default="", help="extra slurm options, k=v,k=v")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        opts = json.loads(a.options) if a.options.startswith("{") else _opts(a.options)
        print(json.dumps(_child(a.logs, a.child, a.max_jobs, opts, a.data_dir)))
        return 0
    unit = _unit()
    if unit:
        print(f"calibration unit: {unit:.3f} CPU s")
    ok = True
    for log in filter(None, a.logs.split(",")):
        res = time_log(log, a.max_jobs, _opts(a.options), a.data_dir)
        e, s = res["easy"], res["slurm"]
        print(f"\nlog {log}: {e['jobs']} jobs, {e['nodes']} nodes; each policy in its own process")
        print(f"{'policy':8s} {'cold CPU s':>10s} {'warm CPU s':>10s} {'cold wall s':>11s} "
              f"{'units':>6s} {'mean wait s':>12s} {'util':>6s}")
        for name, r in (("easy", e), ("slurm", s)):
            u = f"{r['cold'][0] / unit:6.2f}" if unit else f"{'-':>6s}"
            print(f"{name:8s} {r['cold'][0]:10.2f} {r['warm'][0]:10.2f} {r['cold'][1]:11.2f} {u} "
                  f"{r['wait']:12.0f} {r['util']:6.3f}")
        ratio = s["cold"][0] / e["cold"][0]
        warm = s["warm"][0] / e["warm"][0]
        verdict = "meets" if ratio <= TARGET_RATIO else "MISSES"
        ok &= ratio <= TARGET_RATIO
        print(f"slurm/easy CPU ratio {ratio:.2f} cold ({verdict} the <= {TARGET_RATIO:g}x target), "
              f"{warm:.2f} warm")
        print("slurm engine:", s["engine"])
        print("slurm pass counters:", s["stats"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
