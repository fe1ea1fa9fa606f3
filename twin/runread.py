"""Reading a run folder back (``hpctwin report``, ``hpctwin plot``, ``hpctwin export``), checked.

A run folder (`twin.runfolder`) holds ``config.toml``, ``jobs.csv``, ``timeseries.h5``, ``summary.json``
and, written last, the marker ``.hpctwin-run`` listing them. A folder that is missing, empty, not a
run folder, or whose files are truncated or corrupt (a half-copied ``timeseries.h5``, a ``jobs.csv``
cut in the middle of a line, ``summary.json`` that is not JSON) is refused with one line naming the
file and, where it helps, the line and field, and saying how to make the folder again: `RunReadError`.

Checks of ``jobs.csv``: it ends with a line end (a cut file does not), it parses as CSV, it has the
columns the command needs, its numeric columns hold numbers (``job_id``, ``submit``, ``procs`` on
every row; ``start``/``end`` empty for a job never started), and its row count is the summary's
``jobs_simulated``. Checks of ``timeseries.h5``: it opens as HDF5, every dataset reads, and the series
the report draws have as many samples as ``time``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .runfolder import MARKER, is_run_folder

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RunReadError", "JOB_COLUMNS", "check_run_folder", "rerun_hint", "read_summary", "read_jobs",
           "read_timeseries", "read_config_text", "machine_units"]

#: columns every reader of jobs.csv needs (times in s of the log clock, procs in allocation units)
JOB_COLUMNS = ("job_id", "submit", "start", "end", "procs")
#: numeric jobs.csv columns a run writes, and which of them must be set on every row
_NUMERIC = ("job_id", "submit", "start", "end", "wait", "elapsed", "procs", "timelimit", "estimate", "bsld")
_ALWAYS_SET = ("job_id", "submit", "procs")
#: time series drawn on the ``time`` grid by the report
_ON_TIME_GRID = ("utilisation", "queue_length", "power_facility_w", "power_it_w", "pue")


class RunReadError(ValueError):
    """A run folder that cannot be read back: the message names the file (and line and field)."""


def rerun_hint(run_dir: Path) -> str:
    """How to make the run folder again: from its own config.toml when that reads as TOML; into the same
    folder with --force when hpctwin would replace it (`runfolder.is_run_folder`), else into a new one."""
    if sys.version_info >= (3, 11):
        import tomllib  # noqa: PLC0415
    else:  # pragma: no cover
        import tomli as tomllib  # noqa: PLC0415
    cfg = run_dir / "config.toml"
    try:
        tomllib.loads(cfg.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        what = "its config.toml is damaged too" if cfg.is_file() else "it has no config.toml"
        return f"rerun the run that made it (hpctwin run ... --out FOLDER; {what})"
    try:
        replaceable = is_run_folder(run_dir)
    except (TypeError, AttributeError):     # a marker whose "files" is not a list of names
        replaceable = False
    if replaceable:
        return f"rerun it: hpctwin run --config {cfg} --out {run_dir} --force"
    return f"rerun it into a new folder: hpctwin run --config {cfg} --out NEW_FOLDER"


def check_run_folder(run_dir: Path) -> list[str]:
    """Check that ``run_dir`` is a finished run folder with a ``jobs.csv``; returns the files its marker
    lists. Raises `RunReadError` for a missing path, a file, an empty folder, a folder without the
    marker (the run did not finish, or hpctwin did not write it), a corrupt marker, or a listed file
    that is gone."""
    if not run_dir.exists():
        raise RunReadError(f"{run_dir}: no such folder ({run_dir / 'jobs.csv'}: not found); give the --out "
                           "folder of an hpctwin run")
    if not run_dir.is_dir():
        raise RunReadError(f"{run_dir}: not a folder; give the --out folder of an hpctwin run")
    try:
        names = sorted(p.name for p in run_dir.iterdir())
    except OSError as e:
        raise RunReadError(f"{run_dir}: cannot list the folder: {e.strerror or e}") from None
    if not names:
        raise RunReadError(f"{run_dir}: not a finished run folder (the folder is empty); give the --out folder "
                           "of an hpctwin run")
    marker = run_dir / MARKER
    if not marker.is_file():
        held = ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")
        raise RunReadError(f"{run_dir}: not a finished run folder (no {MARKER}, which hpctwin run writes last: the "
                           f"run did not finish or hpctwin did not write this folder; it holds {held}); "
                           f"{rerun_hint(run_dir)}")
    try:
        doc = json.loads(marker.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError):       # UnicodeDecodeError and JSONDecodeError are ValueErrors
        doc = None
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, str) and f and "/" not in f for f in files):
        raise RunReadError(f"{marker}: corrupt run-folder marker (expected JSON {{\"files\": [names]}}); "
                           f"{rerun_hint(run_dir)}")
    gone = [f for f in files if not (run_dir / f).is_file()]
    if gone:
        raise RunReadError(f"{run_dir / gone[0]}: missing (the folder's {MARKER} lists it); {rerun_hint(run_dir)}")
    if "jobs.csv" not in files and not (run_dir / "jobs.csv").is_file():
        raise RunReadError(f"{run_dir}: a run folder without jobs.csv (it holds {', '.join(files) or 'nothing'}): "
                           "this command reads the folders of `hpctwin run`")
    return files


def read_summary(run_dir: Path, *, required: bool = True) -> dict[str, Any]:
    """``summary.json`` as a dict ({} when absent and not ``required``)."""
    path = run_dir / "summary.json"
    if not path.is_file():
        if required:
            raise RunReadError(f"{path}: not found; {rerun_hint(run_dir)}")
        return {}
    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        raise RunReadError(f"{path}: not UTF-8 text (corrupt); {rerun_hint(run_dir)}") from None
    except json.JSONDecodeError as e:
        raise RunReadError(f"{path}:{e.lineno}: not valid JSON ({e.msg}): truncated or corrupt; "
                           f"{rerun_hint(run_dir)}") from None
    except (OSError, RecursionError) as e:
        raise RunReadError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}; {rerun_hint(run_dir)}") from None
    if not isinstance(doc, dict):
        raise RunReadError(f"{path}: expected a JSON object of run figures, got {type(doc).__name__}; "
                           f"{rerun_hint(run_dir)}")
    return doc


def _last_byte(path: Path) -> bytes:
    with path.open("rb") as f:
        f.seek(0, 2)
        if f.tell() == 0:
            return b""
        f.seek(-1, 2)
        return f.read(1)


def read_jobs(run_dir: Path, columns: tuple[str, ...] = JOB_COLUMNS, summary: dict | None = None,
              **read_csv: Any) -> pd.DataFrame:
    """``jobs.csv`` of a run folder (old column names upgraded), checked (see the module docstring).

    ``columns``: those the caller needs; ``summary``: the run's summary, for the row count check;
    ``read_csv``: keyword arguments of ``pandas.read_csv`` (the caller's NA conventions)."""
    import pandas as pd  # noqa: PLC0415

    from .workload import upgrade_jobs_table  # noqa: PLC0415
    path = run_dir / "jobs.csv"
    hint = rerun_hint(run_dir)
    if not path.is_file():
        raise RunReadError(f"{path}: not found; {hint}")
    try:
        last = _last_byte(path)
    except OSError as e:
        raise RunReadError(f"{path}: cannot read: {e.strerror or e}; {hint}") from None
    if last == b"":
        raise RunReadError(f"{path}: empty file (a run's jobs.csv has at least its header line); {hint}")
    if last != b"\n":
        raise RunReadError(f"{path}: truncated (the last line has no line end); {hint}")
    try:
        df = pd.read_csv(path, **read_csv)
    except UnicodeDecodeError:
        raise RunReadError(f"{path}: not UTF-8 text: corrupt; {hint}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError, OSError) as e:
        msg = " ".join(str(e).split())[:160]
        raise RunReadError(f"{path}: not a readable jobs table ({msg}); {hint}") from None
    df = upgrade_jobs_table(df)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise RunReadError(f"{path}:1: no column(s) {', '.join(missing)} (a run's jobs.csv has them); {hint}")
    for c in _NUMERIC:
        if c not in df.columns:
            continue
        col = df[c]
        if pd.api.types.is_bool_dtype(col) and len(col):
            raise RunReadError(f"{path}:2: field {c!r}: {str(col.iloc[0])!r} is not a number; {hint}")
        if not pd.api.types.is_numeric_dtype(col):
            num = pd.to_numeric(col, errors="coerce")
            text = col.astype(str).str.strip()
            bad = num.isna().to_numpy() & col.notna().to_numpy() & (text != "").to_numpy()
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise RunReadError(f"{path}:{i + 2}: field {c!r}: {str(col.iloc[i])[:40]!r} is not a number "
                                   f"({int(bad.sum())} such rows); {hint}")
            df[c] = num
        if c in _ALWAYS_SET:
            unset = ~np.isfinite(df[c].to_numpy(dtype=float))
            if unset.any():
                i = int(np.flatnonzero(unset)[0])
                raise RunReadError(f"{path}:{i + 2}: field {c!r}: empty or not finite (every job has one); {hint}")
    if summary:
        want = summary.get("jobs_simulated")
        if isinstance(want, int) and not isinstance(want, bool) and want != len(df):
            raise RunReadError(f"{path}: {len(df)} job rows, but summary.json says jobs_simulated = {want}: the "
                               f"file is truncated or was changed; {hint}")
    return df


def read_timeseries(run_dir: Path) -> dict[str, tuple[np.ndarray, str]]:
    """``timeseries.h5`` as {name: (values, units)} ({} when the folder has none)."""
    path = run_dir / "timeseries.h5"
    if not path.is_file():
        return {}
    hint = rerun_hint(run_dir)
    import h5py  # noqa: PLC0415
    ts: dict[str, tuple[np.ndarray, str]] = {}
    try:
        with h5py.File(path, "r") as h5:
            for k in h5:
                obj = h5[k]
                if not isinstance(obj, h5py.Dataset):
                    continue
                ts[k] = (obj[()], str(obj.attrs.get("units", "")))
    except (OSError, KeyError, ValueError, RuntimeError, TypeError) as e:
        reason = " ".join(str(e).split())[:160]
        raise RunReadError(f"{path}: not a readable HDF5 file ({reason}): truncated or corrupt; {hint}") from None
    if "time" in ts:
        t = np.asarray(ts["time"][0])
        if t.ndim != 1:
            raise RunReadError(f"{path}: dataset 'time' is not a 1-D series (shape {t.shape}): corrupt; {hint}")
        for k in _ON_TIME_GRID:
            if k in ts and np.shape(ts[k][0]) != t.shape:
                raise RunReadError(f"{path}: dataset {k!r} has {np.size(ts[k][0])} samples but 'time' has {len(t)}: "
                                   f"corrupt; {hint}")
    return ts


def read_config_text(run_dir: Path) -> str:
    """``config.toml``'s text ("" when absent)."""
    path = run_dir / "config.toml"
    if not path.is_file():
        return ""
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise RunReadError(f"{path}: not UTF-8 text (byte {e.start}): corrupt; {rerun_hint(run_dir)}") from None
    except OSError as e:
        raise RunReadError(f"{path}: cannot read: {e.strerror or e}; {rerun_hint(run_dir)}") from None


def machine_units(run_dir: Path, summary: dict, jobs: pd.DataFrame) -> int:
    """The run's machine size (allocation units): the summary's ``machine_units``, else the largest job
    (at least 1). A value that is not a positive integer is a `RunReadError` naming summary.json."""
    v = summary.get("machine_units")
    if v is None:
        return int(max(1, np.nanmax(jobs["procs"].to_numpy(dtype=float), initial=1.0)))
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise RunReadError(f"{run_dir / 'summary.json'}: field 'machine_units': {v!r} is not a machine size (a "
                           f"positive integer); {rerun_hint(run_dir)}")
    return v
