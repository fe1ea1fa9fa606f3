"""``hpctwin export``: write a loaded workload as SWF, or a simulated schedule as a sacct dump.

* ``hpctwin export swf --workload W --out FILE [--data-dir D]``: any workload the run command
  accepts (SWF path, registry name, ``synthetic:...``, ``sacct:FILE``) written as SWF v2.2.
* ``hpctwin export sacct RUN_DIR --out FILE [--epoch UNIX_TIME]``: the run's ``jobs.csv`` as a
  ``sacct -P`` dump (pipe-separated, header line), so results can be compared with other tools.
  The epoch defaults to the workload's ``UnixStartTime`` recorded in the run's summary, else 0.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hpctwin export", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    p_swf = sub.add_parser("swf", help="write a workload as SWF")
    p_swf.add_argument("--workload", "-w", required=True)
    p_swf.add_argument("--out", "-o", required=True)
    p_swf.add_argument("--data-dir", default=None)
    p_swf.add_argument("--seed", type=int, default=0)
    p_sacct = sub.add_parser("sacct", help="write a run's schedule as a sacct -P dump")
    p_sacct.add_argument("run_dir")
    p_sacct.add_argument("--out", "-o", required=True)
    p_sacct.add_argument("--epoch", type=float, default=None, help="Unix time of the log's time 0")
    a = ap.parse_args(argv)
    if a.what == "swf":
        from hpctwin.twin.run import load_workload  # noqa: PLC0415
        from .swf import write_swf  # noqa: PLC0415
        wl = load_workload(a.workload, data_dir=a.data_dir, seed=a.seed)
        write_swf(wl, a.out)
        print(f"wrote {len(wl)} jobs to {a.out}")
        return 0
    from .sacct import export_sacct  # noqa: PLC0415
    run_dir = Path(a.run_dir)
    jobs_csv = run_dir / "jobs.csv"
    if not jobs_csv.exists():
        raise FileNotFoundError(f"{jobs_csv}: not found (is {run_dir} a finished run folder?)")
    epoch = a.epoch
    if epoch is None:
        summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else {}
        epoch = float(summary.get("unix_start_time") or 0.0)
    df = pd.read_csv(jobs_csv, keep_default_na=False, na_values=[""])
    n = export_sacct(df, a.out, epoch=epoch)
    print(f"wrote {n} jobs to {a.out}")
    return 0
