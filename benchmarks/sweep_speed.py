"""Benchmark: a 48-point sweep (4 logs x 4 schedulers x 3 seeds), serial vs ``--workers 2``.

Target (issue 8): with 2 workers on a 2-core machine the sweep takes at most 0.6x the serial time.
Both runs use the same sweep file in fresh output folders; the script checks that the two
``results.csv`` files are byte-identical and prints both wall times and their ratio.

Logs: by default four Lublin-Feitelson synthetic logs (``synthetic:jobs=N,nodes=M``, M = 64, 128,
256, 512; the seed of the run is the generator's seed, so seeds give different logs); ``--real``
uses four Parallel Workloads Archive logs instead (NASA-iPSC, KTH-SP2, SDSC-Par96, SDSC-SP2, whole
logs: minutes). Schedulers: fcfs, sjf, easy, easy-sjbf (EASY with shortest-job-backfilled-first).

Usage: ``python benchmarks/sweep_speed.py [--jobs 8000] [--real] [--keep DIR]``
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from hpctwin.experiments import sweep as sw

SCHEDULERS = ["fcfs", "sjf", "easy", "hpctwin.schedulers.predictive:EasySJBF"]


def sweep_text(jobs: int, real: bool) -> str:
    if real:
        logs = ["NASA-iPSC", "KTH-SP2", "SDSC-Par96", "SDSC-SP2"]
    else:
        logs = [f"synthetic:jobs={jobs},nodes={m}" for m in (64, 128, 256, 512)]
    q = lambda xs: "[" + ", ".join(f'"{x}"' for x in xs) + "]"  # noqa: E731
    return (f'[sweep]\nname = "bench48"\n[base]\nscheduler = "easy"\n[grid]\nworkload = {q(logs)}\n'
            f"scheduler = {q(SCHEDULERS)}\nseed = [0, 1, 2]\n")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=8000, help="jobs per synthetic log (default 8000)")
    ap.add_argument("--real", action="store_true", help="four real PWA logs instead of synthetic ones")
    ap.add_argument("--keep", default=None, help="keep the sweep folders here")
    a = ap.parse_args(argv)
    root = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="sweep_bench_"))
    root.mkdir(parents=True, exist_ok=True)
    f = root / "bench48.toml"
    f.write_text(sweep_text(a.jobs, a.real))
    n = len(sw.load_sweep(f).points)
    times = {}
    for label, args in (("serial", ["--executor", "serial"]), ("workers2", ["--workers", "2"])):
        out = root / label
        shutil.rmtree(out, ignore_errors=True)
        t = time.perf_counter()
        rc = sw.main([str(f), "--out", str(out), "-q", *args])
        times[label] = time.perf_counter() - t
        if rc != 0:
            raise SystemExit(f"sweep {label} failed (exit {rc})")
    same = (root / "serial" / "results.csv").read_bytes() == (root / "workers2" / "results.csv").read_bytes()
    ratio = times["workers2"] / times["serial"]
    print(f"points: {n} ({'real logs' if a.real else f'synthetic logs of {a.jobs} jobs'})")
    print(f"serial:     {times['serial']:.1f} s")
    print(f"--workers 2: {times['workers2']:.1f} s")
    print(f"ratio: {ratio:.2f} (target <= 0.60: {'met' if ratio <= 0.6 else 'NOT met'})")
    print(f"results.csv identical: {same}")
    if not a.keep:
        shutil.rmtree(root, ignore_errors=True)
    return {"serial_s": times["serial"], "workers2_s": times["workers2"], "ratio": ratio, "identical": same}


if __name__ == "__main__":
    main()
