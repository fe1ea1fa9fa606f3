"""A sweep killed midway (driver and workers, SIGKILL) resumes where it stopped, and an MPI sweep
(mpiexec -n 3, mpi4py.futures) gives the same results.csv bytes as a serial one."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpctwin.experiments import sweep as sw

SWEEP = """
[sweep]
name = "resume"
[base]
workload = "synthetic:jobs=2500,nodes=64"
nodes = 64
[grid]
scheduler = ["easy", "conservative", "fcfs"]
seed = [0, 1, 2, 3]
"""
REPO = Path(__file__).resolve().parents[1]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.mark.slow
def test_killed_sweep_resumes(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text(SWEEP)
    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "hpctwin.experiments.sweep", str(p), "--out", str(out), "--workers", "2",
                             "-q"], cwd=REPO, env=_env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pts = out / "points"
    deadline = time.time() + 60
    try:
        while time.time() < deadline:
            done = [d for d in pts.iterdir() if sw.is_finished(d)] if pts.exists() else []
            if len(done) >= 2:
                break
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)          # the driver and its workers, mid-sweep
        proc.wait()
    finished = {d.name: d.stat().st_mtime_ns for d in pts.iterdir() if sw.is_finished(d)}
    assert 2 <= len(finished) < 12, "the sweep was not interrupted midway"
    r = subprocess.run([sys.executable, "-m", "hpctwin.experiments.sweep", str(p), "--out", str(out)], cwd=REPO,
                       env=_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"12 points, {len(finished)} already finished, {12 - len(finished)} to run" in r.stderr
    for name, mt in finished.items():                # never rerun
        assert (pts / name).stat().st_mtime_ns == mt
    assert not [d for d in pts.iterdir() if d.name.startswith(".")]
    ref = tmp_path / "ref"
    assert sw.main([str(p), "--out", str(ref), "-q"]) == 0
    assert (out / "results.csv").read_bytes() == (ref / "results.csv").read_bytes()


@pytest.mark.mpi
def test_mpi_sweep_matches_serial(tmp_path):
    if shutil.which("mpiexec") is None:
        pytest.skip("mpiexec not on PATH")
    p = tmp_path / "s.toml"
    p.write_text(SWEEP.replace("jobs=2500", "jobs=300").replace("seed = [0, 1, 2, 3]", "seed = [0, 1]"))
    r = subprocess.run(["mpiexec", "-n", "3", sys.executable, "-m", "mpi4py.futures", "-m", "hpctwin.experiments.sweep",
                        str(p), "--out", str(tmp_path / "mpi")], cwd=REPO, env=_env(), capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert "MPI pool (2 workers)" in r.stderr
    assert sw.main([str(p), "--out", str(tmp_path / "serial"), "-q"]) == 0
    assert (tmp_path / "mpi" / "results.csv").read_bytes() == (tmp_path / "serial" / "results.csv").read_bytes()
