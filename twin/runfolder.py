"""Run folders on disk: checked before a run, written atomically, never deleting a user's files.

A run folder is what ``hpctwin run --out DIR`` writes: ``config.toml``, ``jobs.csv``, ``timeseries.h5``,
``summary.json`` and, last, the marker file ``.hpctwin-run`` listing those files. Rules:

* ``--out`` is checked **before** the simulation (:func:`prepare_out`): it may not exist, be an empty
  folder, or be a complete run folder written by hpctwin (the marker is present and every entry is a
  file hpctwin writes there) -- the last only with ``force``. Anything else (a regular file, a folder
  with other files, the working directory or one of its parents) is refused with a one-line reason,
  even with ``force``: hpctwin never deletes what it did not write.
* The folder is written under a hidden sibling ``.NAME.partial-PID`` created up front (so a read-only
  or missing parent is reported before the run, not after it), then published by renames: the old run
  folder to ``.NAME.trash-PID``, the new one to ``NAME``, then the trash is deleted. A kill at any point
  leaves either the old or the new complete folder under ``NAME``, or none, never a mixture.
* Stale ``.NAME.partial-PID`` / ``.NAME.trash-PID`` siblings of processes that no longer exist are
  removed when the next run targets the same folder.
* ``OSError`` while writing (read-only file system, disk full, permission) becomes :class:`RunFolderError`
  with one line naming the folder and the reason.

Every command that writes a folder (``run``, ``serve``, ``export``, the experiment scripts) goes through
this module: :func:`prepare_out` + :func:`fill_and_publish`, or the :func:`staged_folder` context
manager that combines them. A folder written this way is recognised by its marker whatever files it
lists, so ``--force`` replaces any folder hpctwin wrote and nothing else.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MARKER = ".hpctwin-run"
#: files hpctwin itself writes into a run folder (the run, then ``hpctwin report``/``plot``/``export``)
RUN_FILES = frozenset({"config.toml", "jobs.csv", "timeseries.h5", "summary.json", MARKER, "report.html",
                       "point.json", "gantt.png", "gantt.pdf", "batsim_jobs.csv", "batsim_workload.json",
                       "out_jobs.csv", "view.html", "sacct.psv"})
_SIBLING_KINDS = ("partial", "trash")


class RunFolderError(ValueError):
    """An output folder that cannot be used (exists with other files, not writable...)."""


def is_run_folder(path: Path) -> bool:
    """True when ``path`` is a complete run folder written by hpctwin and holds nothing else."""
    marker = path / MARKER
    if not marker.is_file():
        return False
    try:
        files = json.loads(marker.read_text()).get("files", [])
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            return False                  # a damaged marker: not a folder hpctwin may replace
        listed = set(files)
    except (OSError, ValueError, AttributeError):
        return False
    return all(p.name in RUN_FILES or p.name in listed for p in path.iterdir())


def pid_alive(pid: int) -> bool:
    """True when process ``pid`` exists (this process included; another user's counts as alive)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_siblings(out: Path) -> int:
    """Remove ``.NAME.partial-PID`` and ``.NAME.trash-PID`` folders of dead processes. Returns how many."""
    n = 0
    parent = out.parent
    if not parent.is_dir():
        return 0
    for kind in _SIBLING_KINDS:
        for d in parent.glob(f".{out.name}.{kind}-*"):
            pid_text = d.name.rsplit("-", 1)[-1]
            if not pid_text.isdigit() or pid_alive(int(pid_text)) or not d.is_dir():
                continue
            shutil.rmtree(d, ignore_errors=True)
            n += 1
    return n


def _os_error(out: Path, e: OSError, doing: str) -> RunFolderError:
    reason = {errno.EROFS: "read-only file system", errno.ENOSPC: "no space left on device",
              errno.EACCES: "permission denied", errno.EDQUOT: "disk quota exceeded"}.get(e.errno, e.strerror or str(e))
    return RunFolderError(f"--out {out}: cannot {doing}: {reason}")


def check_out(out: Path, *, force: bool = False) -> Path:
    """Refuse an ``--out`` that must not be replaced. Returns the absolute path. Touches nothing."""
    out = Path(os.path.abspath(out))
    cwd = Path(os.path.abspath(os.getcwd()))
    if out == cwd or out in cwd.parents:
        raise RunFolderError(f"--out {out}: is the working directory or one of its parents; "
                             "name a new folder, e.g. --out runs/NAME")
    if out.exists() or out.is_symlink():
        if not out.is_dir() or out.is_symlink():
            raise RunFolderError(f"--out {out}: exists and is not a folder; choose another --out")
        if any(out.iterdir()):
            if not is_run_folder(out):
                foreign = sorted(p.name for p in out.iterdir() if p.name not in RUN_FILES)[:5]
                raise RunFolderError(
                    f"--out {out}: exists and is not an hpctwin run folder "
                    f"(it holds {', '.join(foreign) or 'no marker'}"
                    f"{' ...' if len(foreign) == 5 else ''}); hpctwin never deletes it, even with --force: "
                    "choose another --out")
            if not force:
                raise RunFolderError(f"--out {out}: a run folder is already there; pass --force to replace it, "
                                     "or choose another --out")
    return out


def prepare_out(out: Path, *, force: bool = False) -> Path:
    """Check ``out``, clean stale siblings and create the partial folder. Returns the partial folder."""
    out = check_out(out, force=force)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        clean_stale_siblings(out)
        tmp = partial_path(out)
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
    except OSError as e:
        raise _os_error(out, e, "create the run folder") from None
    return tmp


def partial_path(out: Path) -> Path:
    out = Path(os.path.abspath(out))
    return out.with_name(f".{out.name}.partial-{os.getpid()}")


def discard(tmp: Path) -> None:
    """Remove a partial folder (a run that failed or was interrupted)."""
    shutil.rmtree(tmp, ignore_errors=True)


def fill_and_publish(tmp: Path, out: Path, fill, *, force: bool = False) -> Path:
    """Run ``fill(tmp)`` (it writes the run's files into the partial folder ``tmp``), then `publish`.
    An OSError while filling is a one-line `RunFolderError` naming ``out``; on any error the partial
    folder is removed, so a failed or interrupted write never leaves a half-written run folder."""
    try:
        fill(tmp)
    except OSError as e:
        discard(tmp)
        raise RunFolderError(f"--out {out}: cannot write the run folder: {e.strerror or e}") from None
    except BaseException:
        discard(tmp)
        raise
    return publish(tmp, out, force=force)


@contextmanager
def staged_folder(out: str | os.PathLike, *, force: bool = False) -> Iterator[Path]:
    """Check ``out`` now (before any work), yield the partial folder to write into, publish on success.

    ``with staged_folder(out, force=force) as tmp: ...write files into tmp...``: on an exception or a
    kill inside the block nothing is published and ``out`` keeps its old content; an ``OSError`` raised
    by the block becomes a one-line `RunFolderError` naming ``out``. Returns (via ``tmp``) nothing else:
    the published folder is ``out``.
    """
    out = Path(out)
    tmp = prepare_out(out, force=force)
    try:
        yield tmp
    except OSError as e:
        discard(tmp)
        name = os.fsdecode(e.filename) if e.filename is not None else None
        if name is not None and not os.path.abspath(name).startswith(str(tmp)):
            # an input the block read (a trace, a log): say which, not that --out failed
            raise RunFolderError(f"cannot read {name}: {e.strerror or e}") from None
        raise RunFolderError(f"--out {os.path.abspath(out)}: cannot write the folder: {e.strerror or e}") from None
    except BaseException:
        discard(tmp)
        raise
    publish(tmp, out, force=force)


def check_out_file(path: str | os.PathLike, *, force: bool = False, inputs: tuple = ()) -> Path:
    """Refuse an output FILE that must not be replaced (export's ``--out FILE``). Touches nothing.

    Refused: a folder, a symlink, one of ``inputs`` (the files the command reads), the working
    directory; an existing file without ``force``. Returns the absolute path."""
    path = Path(os.path.abspath(path))
    if path.is_symlink():
        raise RunFolderError(f"--out {path}: is a symbolic link; name a regular file")
    if path.is_dir():
        raise RunFolderError(f"--out {path}: is a folder; --out names the file to write (e.g. {path / 'out.csv'})")
    for src in inputs:
        try:
            same = path.exists() and os.path.samefile(path, src)
        except OSError:
            same = False
        if same:
            raise RunFolderError(f"--out {path}: is the file this command reads; choose another --out")
    if path.exists() and not force:
        raise RunFolderError(f"--out {path}: exists; pass --force to replace it, or choose another --out")
    return path


@contextmanager
def staged_file(path: str | os.PathLike, *, force: bool = False, inputs: tuple = ()) -> Iterator[Path]:
    """`check_out_file` now, yield a hidden temporary name beside ``path`` to write, then rename it over
    ``path`` in one step: a kill leaves the old file (or none), never a half-written one."""
    path = check_out_file(path, force=force, inputs=inputs)
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        check_out_file(path, force=force, inputs=inputs)     # re-checked: it may have appeared meanwhile
        os.replace(tmp, path)
    except OSError as e:
        raise _os_error(path, e, "write the file") from None
    finally:
        if tmp.exists():
            tmp.unlink()


def publish(tmp: Path, out: Path, *, force: bool = False) -> Path:
    """Mark ``tmp`` complete and move it to ``out``, replacing an old run folder there atomically."""
    out = Path(os.path.abspath(out))
    try:
        files = sorted(p.name for p in tmp.iterdir())
        (tmp / MARKER).write_text(json.dumps({"hpctwin_run": 1, "files": files}) + "\n")
        check_out(out, force=force)       # re-checked: the folder may have changed during the run
        trash = None
        if out.exists():
            if any(out.iterdir()):
                trash = out.with_name(f".{out.name}.trash-{os.getpid()}")
                os.replace(out, trash)
            else:
                out.rmdir()
        os.replace(tmp, out)
    except OSError as e:
        discard(tmp)
        raise _os_error(out, e, "write the run folder") from None
    except BaseException:
        discard(tmp)
        raise
    if trash is not None:
        shutil.rmtree(trash, ignore_errors=True)
    return out
