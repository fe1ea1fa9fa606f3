"""Reader of OpenDC workload traces (``tasks.parquet``), such as the SURF cluster week (SURF-OpenDT).

Schema (OpenDC's workload format, as in atlarge-research/OpenDT ``data/SURF``): one row a task,
``id`` (text), ``submission_time`` (timestamp), ``duration`` (ms), ``cpu_count`` (cores),
``cpu_capacity`` (MHz, the task's CPU capacity), ``mem_capacity`` (MB). The trace has no user, no
requested time and no status; its machine size is not in the tasks file (the SURF week lists 277
hosts in ``consumption.parquet``), so a run needs ``--nodes`` (cores) or a ``--system``.

`read_opendc_tasks` returns a `Workload` whose allocation units are cores (``procs`` =
cpu_count), times in seconds from the earliest submission, requested time unknown (NaN), status 1.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from hpctwin.twin.workload import Workload

from .textio import check_input_path

REQUIRED = ("id", "submission_time", "duration", "cpu_count")


class OpenDCError(ValueError):
    """A malformed OpenDC tasks file: the message names the file, the row and the field."""


def _check(p: Path, bad: np.ndarray, col: str, why: str, values) -> None:
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise OpenDCError(f"{p}: row {i + 1}: field {col!r}: {why} (value {values[i]!r}); "
                          f"{int(bad.sum())} such row(s)")


def read_opendc_tasks(path: str | os.PathLike, *, name: str | None = None) -> Workload:
    """An OpenDC ``tasks.parquet`` as a `Workload` (see the module docstring)."""
    p = check_input_path(path, OpenDCError)
    try:
        df = pd.read_parquet(p)
    except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a file that is not Parquet
        raise OpenDCError(f"{p}: not a readable Parquet file: {e}") from None
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise OpenDCError(f"{p}: columns {', '.join(missing)} missing (found {', '.join(map(str, df.columns))}); "
                          "is this an OpenDC tasks.parquet?")
    sub = pd.to_datetime(df["submission_time"], errors="coerce")
    _check(p, sub.isna().to_numpy(), "submission_time", "not a timestamp", df["submission_time"].to_numpy())
    dur = pd.to_numeric(df["duration"], errors="coerce").to_numpy(dtype=np.float64)
    _check(p, ~np.isfinite(dur) | (dur < 0) | (dur > 1e14), "duration", "not a duration in ms (0 to 1e14)",
           df["duration"].to_numpy())
    cores = pd.to_numeric(df["cpu_count"], errors="coerce").to_numpy(dtype=np.float64)
    _check(p, ~np.isfinite(cores) | (cores < 1) | (cores != np.round(cores)) | (cores > 2 ** 26), "cpu_count",
           "not a core count >= 1", df["cpu_count"].to_numpy())
    n = len(df)
    t0 = sub.min() if n else pd.Timestamp(0)
    submit = ((sub - t0).dt.total_seconds()).to_numpy(dtype=np.float64)
    ids, names = pd.factorize(df["id"].astype(str), sort=False)
    if len(names) != n:
        dup = df["id"].astype(str).duplicated().to_numpy()
        _check(p, dup, "id", "repeats an earlier task id", df["id"].astype(str).to_numpy())
    cols = {"task_id": df["id"].astype(str).to_numpy(dtype=object)}
    for c, unit in (("cpu_capacity", "cpu_capacity_mhz"), ("mem_capacity", "mem_capacity_mb")):
        if c in df.columns:
            cols[unit] = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=np.float64)
    wl = Workload.from_arrays(
        name or p.parent.name or p.stem, submit=submit, runtime=dur / 1000.0, procs=cores.astype(np.int64),
        job_id=np.arange(1, n + 1), status=np.ones(n, dtype=np.int64), columns=cols, source=str(p),
        header={"UnixStartTime": str(int(t0.timestamp())) if n else "0", "Format": "OpenDC tasks"})
    wl.notes.append("OpenDC tasks: procs = cpu_count (cores); runtime = duration / 1000 s; no requested time "
                    "(the runtime is the estimate); job ids = row numbers (task ids in columns['task_id'])")
    wl.notes.append("machine size is not in the tasks file: give --nodes (cores) or --system")
    return wl
