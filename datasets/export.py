"""``hpctwin export``: write a loaded workload as SWF, or a simulated schedule as a sacct dump or as
Batsim's jobs output.

* ``hpctwin export swf --workload W --out FILE [--data-dir D]``: any workload the run command
  accepts (SWF path, registry name, ``synthetic:...``, ``sacct:FILE``) written as SWF v2.2.
* ``hpctwin export sacct RUN_DIR [--out FILE] [--epoch UNIX_TIME]`` (default ``RUN_DIR/sacct.psv``):
  the run's ``jobs.csv`` as a ``sacct -P`` dump (pipe-separated, header line), so results can be
  compared with other tools.
  The epoch defaults to the workload's ``UnixStartTime`` recorded in the run's summary, else 0.
* ``hpctwin export batsim RUN_DIR [--out FILE]`` (also ``hpctwin export --format batsim RUN_DIR``):
  the run's jobs as Batsim's ``out_jobs.csv`` (default ``RUN_DIR/out_jobs.csv``), which evalys's
  ``JobSet.from_csv`` reads (Gantt charts, utilisation, fragmentation).

Batsim jobs output:

Columns, in Batsim's order (``JobsTracer`` of batsim/src/export.cpp): ``job_id, workload_name,
profile, submission_time, requested_number_of_resources, requested_time, success, final_state,
starting_time, execution_time, finish_time, waiting_time, turnaround_time, stretch,
allocated_resources, consumed_energy, metadata``. Times in seconds of the log clock; evalys's
``JobSet.from_csv`` reads ``allocated_resources`` with ``procset.ProcSet.from_str``, i.e. Batsim's
interval-set text: space-separated closed intervals ``"0-3 8"`` (hpctwin writes ``"0-3,8"``).

Mapping from hpctwin's columns:

* ``final_state`` from the run's ``state``: ``COMPLETED`` -> ``COMPLETED_SUCCESSFULLY`` (``success``
  1); ``TIMEOUT`` (killed at the time limit) -> ``COMPLETED_WALLTIME_REACHED``; ``NODE_FAIL`` (node
  failure, not recovered) -> ``COMPLETED_KILLED``; ``PENDING`` (never started) -> ``REJECTED``
  (times, allocation empty); ``requested_time`` is the run's ``timelimit``;
  ``success`` is 0 for all but the first.
* ``starting_time`` = first start, ``finish_time`` = end, ``execution_time`` = end - start (for a
  requeued job this includes the time between its runs), ``waiting_time`` = start - submit,
  ``turnaround_time`` = end - submit, ``stretch`` = turnaround / execution time (Batsim's stretch,
  not the bounded slowdown).
* ``consumed_energy``: the job's energy in joules when the power model was on, else -1 (Batsim's
  value without energy).  ``profile`` is ``delay`` (a fixed-duration job, as Batsim's SWF
  conversion makes them); ``metadata`` is empty.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["main", "BATSIM_COLUMNS", "batsim_jobs", "write_batsim_jobs", "interval_set_text"]


BATSIM_COLUMNS = ["job_id", "workload_name", "profile", "submission_time", "requested_number_of_resources",
                  "requested_time", "success", "final_state", "starting_time", "execution_time", "finish_time",
                  "waiting_time", "turnaround_time", "stretch", "allocated_resources", "consumed_energy", "metadata"]
_STATES = {"COMPLETED": "COMPLETED_SUCCESSFULLY", "TIMEOUT": "COMPLETED_WALLTIME_REACHED",
           "NODE_FAIL": "COMPLETED_KILLED", "PENDING": "REJECTED"}
_NEEDED = ("job_id", "submit", "start", "end", "procs", "timelimit", "state", "nodes")


def interval_set_text(ranges: str) -> str:
    """hpctwin's ``"0-3,8,10-11"`` as Batsim's interval set ``"0-3 8 10-11"``."""
    return " ".join(p.strip() for p in str(ranges).split(",") if p.strip())


def batsim_jobs(jobs: pd.DataFrame, workload_name: str = "w0", source: str = "jobs.csv") -> pd.DataFrame:
    """The Batsim jobs table of an hpctwin ``jobs`` frame (see the module docstring for the mapping)."""
    missing = [c for c in _NEEDED if c not in jobs.columns]
    if missing:
        raise ValueError(f"{source}: no column(s) {', '.join(missing)}; a run's jobs.csv has them "
                         "(re-run with a current hpctwin)")
    bad = sorted(set(jobs["state"].astype(str)) - set(_STATES))
    if bad:
        raise ValueError(f"{source}: field 'state': unknown value(s) {bad}; expected one of {sorted(_STATES)}")
    st, en = jobs["start"].to_numpy(float), jobs["end"].to_numpy(float)
    sub = jobs["submit"].to_numpy(float)
    ran = np.isfinite(st)
    execution = np.where(ran, en - st, np.nan)
    turnaround = np.where(ran, en - sub, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        stretch = np.where(ran & (execution > 0), turnaround / execution, np.nan)
    state = jobs["state"].astype(str).map(_STATES).where(ran, "REJECTED")
    energy = jobs["energy_j"].to_numpy(float) if "energy_j" in jobs.columns else np.full(len(jobs), -1.0)
    out = pd.DataFrame({
        "job_id": jobs["job_id"].to_numpy(),
        "workload_name": workload_name,
        "profile": "delay",
        "submission_time": sub,
        "requested_number_of_resources": jobs["procs"].to_numpy(),
        "requested_time": jobs["timelimit"].to_numpy(float),
        "success": (state == "COMPLETED_SUCCESSFULLY").astype(int).to_numpy(),
        "final_state": state.to_numpy(),
        "starting_time": np.where(ran, st, np.nan),
        "execution_time": execution,
        "finish_time": np.where(ran, en, np.nan),
        "waiting_time": np.where(ran, st - sub, np.nan),
        "turnaround_time": turnaround,
        "stretch": stretch,
        "allocated_resources": [interval_set_text(x) if r else ""
                                for x, r in zip(jobs["nodes"].fillna("").astype(str), ran)],
        "consumed_energy": np.where(np.isfinite(energy), energy, -1.0),
        "metadata": "",
    })
    return out[BATSIM_COLUMNS]


def write_batsim_jobs(run_dir: str | Path, out: str | Path | None = None) -> tuple[Path, int]:
    """Write ``run_dir``'s jobs as Batsim's ``out_jobs.csv`` (default: ``RUN_DIR/out_jobs.csv``).

    Returns (path, rows). The workload name is the run's workload (from summary.json), with
    characters CSV or Batsim ids do not take (``,`` ``!`` spaces) replaced by ``_``."""
    run_dir = Path(run_dir)
    jobs_csv = run_dir / "jobs.csv"
    summary, df = _read_run(run_dir, _NEEDED)
    name = str(summary.get("workload") or "w0")
    name = "".join("_" if ch in ",! \t\"'" else ch for ch in name)
    table = batsim_jobs(df, name, source=str(jobs_csv))
    path = Path(out) if out is not None else run_dir / "out_jobs.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=False, float_format="%.6f", lineterminator="\n")
    return path, len(table)


def _read_run(run_dir: Path, columns: tuple[str, ...]) -> tuple[dict, pd.DataFrame]:
    """(summary, jobs) of a run folder, checked (`twin.runread`): a missing, truncated or corrupt
    folder is a `RunReadError` naming the file."""
    from hpctwin.twin.runread import check_run_folder, read_jobs, read_summary  # noqa: PLC0415
    check_run_folder(run_dir)
    summary = read_summary(run_dir, required=False)
    return summary, read_jobs(run_dir, columns, summary, keep_default_na=False, na_values=[""])


def _epoch(run_dir: Path, summary: dict) -> float:
    """The Unix time (s) of the log's time 0, from the summary's ``unix_start_time`` (0 without one)."""
    import math  # noqa: PLC0415
    from hpctwin.twin.runread import RunReadError, rerun_hint  # noqa: PLC0415
    v = summary.get("unix_start_time")
    if v is None:
        return 0.0
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise RunReadError(f"{run_dir / 'summary.json'}: field 'unix_start_time': {v!r} is not a Unix time; "
                           f"{rerun_hint(run_dir)} (or give --epoch)")
    return float(v)


def run_name_tables(run_dir: str | os.PathLike) -> dict[str, list[str]]:
    """The name tables (``Users``, ``Accounts``, ``Partitions``, ``QOSs``) of the sacct dump a run
    replayed, read back through the run's ``config.toml`` so `export_sacct` writes names, not ids.

    Empty when the run's workload is not a sacct dump (SWF logs have numeric ids only) or when the
    dump is no longer where the run read it.
    """
    if sys.version_info >= (3, 11):
        import tomllib  # noqa: PLC0415
    else:  # pragma: no cover
        import tomli as tomllib  # noqa: PLC0415
    cfg_file = Path(run_dir) / "config.toml"
    if not cfg_file.exists():
        return {}
    try:
        doc = tomllib.loads(cfg_file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError):
        return {}
    spec = str(doc.get("run", {}).get("workload", ""))
    path = spec[len("sacct:"):] if spec.startswith("sacct:") else spec
    if not spec.startswith("sacct:"):
        from .loader import detect_format  # noqa: PLC0415
        try:
            if detect_format(path) != "sacct":
                return {}
        except (ValueError, OSError):
            return {}
    opts = doc.get("options", {}).get("workload", {})
    try:
        from .sacct import read_sacct  # noqa: PLC0415
        wl = read_sacct(path, unit=opts.get("unit", "nodes"), duplicate_ids=opts.get("duplicate_ids", "error"))
    except (ValueError, OSError):
        return {}
    return {k: wl.header[k].split(",") if wl.header.get(k) else [] for k in ("Users", "Accounts", "Partitions", "QOSs")}


def _format_to_subcommand(argv: list[str] | None) -> list[str] | None:
    """``--format batsim RUN`` / ``--format=batsim RUN`` -> ``batsim RUN`` (both spellings work)."""
    if not argv:
        return argv
    argv = list(argv)
    if argv[0] == "--format" and len(argv) > 1:
        return [argv[1], *argv[2:]]
    if argv[0].startswith("--format="):
        return [argv[0].split("=", 1)[1], *argv[1:]]
    return argv


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hpctwin export", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    p_swf = sub.add_parser("swf", help="write a workload as SWF")
    p_swf.add_argument("--workload", "-w", required=True)
    p_swf.add_argument("--force", action="store_true",
                       help="replace an existing --out file (never a folder, a link or the input)")
    p_swf.add_argument("--out", "-o", required=True)
    p_swf.add_argument("--data-dir", default=None)
    p_swf.add_argument("--seed", type=int, default=0)
    p_sacct = sub.add_parser("sacct", help="write a run's schedule as a sacct -P dump")
    p_sacct.add_argument("run_dir")
    p_sacct.add_argument("--force", action="store_true",
                         help="replace an existing --out file (never a folder, a link or the input)")
    p_sacct.add_argument("--out", "-o", default=None,
                         help="file to write (default: RUN_DIR/sacct.psv, regenerated in place like batsim's)")
    p_sacct.add_argument("--epoch", type=float, default=None, help="Unix time of the log's time 0")
    p_bat = sub.add_parser("batsim", help="write a run's jobs as Batsim's out_jobs.csv (read by evalys)")
    p_bat.add_argument("run_dir")
    p_bat.add_argument("--force", action="store_true",
                       help="replace an existing --out file (never a folder, a link or the input)")
    p_bat.add_argument("--out", "-o", default=None, help="CSV file (default: RUN_DIR/out_jobs.csv)")
    a = ap.parse_args(_format_to_subcommand(argv))
    from hpctwin.twin.runread import RunReadError  # noqa: PLC0415
    try:
        return _export(a)
    except RunReadError as e:                 # a damaged run folder: one line, as argparse's own errors
        print(f"hpctwin export: error: {e}", file=sys.stderr)
        return 2


def _export(a: argparse.Namespace) -> int:
    """The subcommand ``a.what`` of `main`."""
    from hpctwin.twin.runfolder import staged_file  # noqa: PLC0415
    if a.what == "batsim":
        from hpctwin.twin.runread import check_run_folder  # noqa: PLC0415
        check_run_folder(Path(a.run_dir))     # before anything is created next to or inside it
        target = Path(a.out) if a.out is not None else Path(a.run_dir) / "out_jobs.csv"
        # the default target is a file derived from the run folder's own jobs.csv, inside it: exporting
        # again regenerates it, so it is replaced without --force (any other existing --out needs it)
        force = a.force or a.out is None
        with staged_file(target, force=force, inputs=(Path(a.run_dir) / "jobs.csv",)) as tmp:
            _, n = write_batsim_jobs(a.run_dir, tmp)
        print(f"wrote {n} jobs to {target} (Batsim jobs output; evalys: JobSet.from_csv)")
        return 0
    if a.what == "swf":
        from hpctwin.twin.run import load_workload  # noqa: PLC0415
        from .swf import write_swf  # noqa: PLC0415
        src = Path(a.workload)
        with staged_file(a.out, force=a.force, inputs=(src,) if src.is_file() else ()) as tmp:
            wl = load_workload(a.workload, data_dir=a.data_dir, seed=a.seed)
            write_swf(wl, tmp)
        print(f"wrote {len(wl)} jobs to {a.out}")
        return 0
    from .sacct import export_sacct  # noqa: PLC0415
    run_dir = Path(a.run_dir)
    jobs_csv = run_dir / "jobs.csv"
    summary, df = _read_run(run_dir, ("job_id", "submit", "start", "end", "procs"))
    epoch = a.epoch if a.epoch is not None else _epoch(run_dir, summary)
    target = Path(a.out) if a.out is not None else run_dir / "sacct.psv"
    with staged_file(target, force=a.force or a.out is None, inputs=(jobs_csv,)) as tmp:
        n = export_sacct(df, tmp, epoch=epoch, names=run_name_tables(run_dir))   # user/account names, not ids
    print(f"wrote {n} jobs to {target}")
    return 0
