"""Readers stay linear in their input (issue 14): a single SWF line of 1 MB vs 10 MB, a comment line of
1 MB vs 10 MB, 100,000 vs 1,000,000 job lines, and a sacct NodeList of 10,000 vs 100,000 hosts.

Prints each time and the 10x/1x ratio measured in the same run (a linear reader gives about 10;
a quadratic one about 100). Also reads every SWF log of the data directory and prints jobs/s.
Run: ``python -m benchmarks.reader_speed [--data-dir D] [--no-logs]``.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from hpctwin.datasets.registry import default_data_dir, load_registry
from hpctwin.datasets.sacct import SacctError, read_sacct
from hpctwin.datasets.swf import SWFError, read_swf

JOB = "1 0 5 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1"


def _time(fn) -> float:
    best = float("inf")
    for _ in range(2):
        t = time.perf_counter()
        try:
            fn()
        except (SWFError, SacctError):
            pass                                  # the long-line cases are errors by design
        best = min(best, time.perf_counter() - t)
    return best


def _cases(d: Path, scale: int) -> dict[str, Path]:
    out = {}
    p = d / f"line{scale}.swf"
    p.write_text("; MaxProcs: 4\n" + "1 " * (500_000 * scale) + "\n")
    out["single SWF job line (MB)"] = p
    p = d / f"comment{scale}.swf"
    p.write_text(";" + " a" * (500_000 * scale) + "\n; MaxProcs: 16\n" + JOB + "\n")
    out["single SWF comment line (MB)"] = p
    p = d / f"jobs{scale}.swf"
    p.write_text("; MaxProcs: 16\n" + "".join(f"{i} {i} 5 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n"
                                             for i in range(1, 100_000 * scale + 1)))
    out["SWF job lines (x100,000)"] = p
    p = d / f"hosts{scale}.sacct"
    p.write_text("JobID|Submit|Start|End|NNodes|NodeList|State\n"
                 f"1|0|10|20|{10_000 * scale}|n[0-{10_000 * scale - 1}]|COMPLETED\n")
    out["sacct NodeList hosts (x10,000)"] = p
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--no-logs", action="store_true")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        small, large = _cases(d, 1), _cases(d, 10)
        print(f"{'case':<34} {'1x s':>8} {'10x s':>8} {'ratio':>6}")
        for name in small:
            reader = read_sacct if small[name].suffix == ".sacct" else read_swf
            t1 = _time(lambda: reader(small[name]))
            t10 = _time(lambda: reader(large[name]))
            print(f"{name:<34} {t1:8.3f} {t10:8.3f} {t10 / t1:6.1f}")
    if not a.no_logs:
        ddir = default_data_dir(a.data_dir)
        total_jobs, total_s = 0, 0.0
        for e in load_registry().values():
            p = e.path(ddir)
            if e.format != "swf" or not p.exists():
                continue
            t = time.perf_counter()
            n = len(read_swf(p))
            dt = time.perf_counter() - t
            total_jobs, total_s = total_jobs + n, total_s + dt
            print(f"{e.name:<24} {n:>8} jobs {dt:6.2f} s")
        if total_s:
            print(f"all SWF logs: {total_jobs:,} jobs in {total_s:.1f} s ({total_jobs / total_s:,.0f} jobs/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
