"""Interrupted sweeps: a Ctrl-C with workers prints one line (no traceback per worker) and exits 130;
SIGINT and SIGKILL mid-run leave no point folder that looks finished unless it is complete."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpctwin.experiments import sweep as sw

SWEEP = """
[base]
workload = "synthetic:jobs=20000,nodes=64"
nodes = 64
scheduler = "conservative"
placement = "contiguous"     # a placer keeps the run on the general engine (the compiled path ends it in ~1 s)
[grid]
seed = [0, 1, 2, 3, 4, 5]
"""
COMPLETE = {"config.toml", "jobs.csv", "summary.json", "timeseries.h5", "point.json"}


def _start(tmp_path: Path) -> subprocess.Popen:
    (tmp_path / "s.toml").write_text(SWEEP)
    # a new session, signalled as a terminal does: the whole process group gets the signal
    return subprocess.Popen([sys.executable, "-m", "hpctwin.twin.cli", "sweep", "s.toml", "--workers", "2", "-q"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_default_sigint)


def _default_sigint() -> None:
    """A terminal's foreground job takes SIGINT by default; a job started in the background of a
    non-interactive shell (as CI may run us) inherits SIGINT ignored, and Python then never raises
    KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_until_running(tmp_path: Path, p: subprocess.Popen) -> None:
    """Until a worker is writing a point (a staging folder exists), then a little longer."""
    points = tmp_path / "s.out" / "points"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None:
        if points.exists() and any(d.name.startswith(".") for d in points.iterdir()):
            break
        time.sleep(0.1)
    time.sleep(1.5)
    assert p.poll() is None, "the sweep ended before it could be interrupted"


def _check_folders(tmp_path: Path) -> None:
    points = tmp_path / "s.out" / "points"
    for d in (points.iterdir() if points.exists() else []):
        if sw.is_finished(d):
            assert COMPLETE <= {f.name for f in d.iterdir()}, d
        else:
            assert d.name.startswith("."), d      # staging folders only: hidden, never published


@pytest.mark.slow
def test_ctrl_c_of_a_sweep_with_workers_prints_one_line(tmp_path):
    p = _start(tmp_path)
    _wait_until_running(tmp_path, p)
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("sweep interrupted:"), err
    _check_folders(tmp_path)
    assert sw.clean_stale(tmp_path / "s.out" / "points") >= 0
    assert all(not d.name.startswith(".") for d in (tmp_path / "s.out" / "points").iterdir())


@pytest.mark.slow
def test_sigkill_mid_sweep_leaves_no_folder_that_looks_complete(tmp_path):
    p = _start(tmp_path)
    _wait_until_running(tmp_path, p)
    os.killpg(p.pid, signal.SIGKILL)
    p.communicate(timeout=60)
    assert p.returncode == -signal.SIGKILL
    _check_folders(tmp_path)
