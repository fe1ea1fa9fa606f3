"""Run every collective schedule under mpiexec (mpich wheel) and compare with the MPI library.

Marked ``mpi``: each test spawns ``mpiexec -n N python -m hpctwin.topology.collectives.validate`` with a
timeout.  The machine may have fewer cores than ranks; that is fine for correctness (timings in the
CSV are then flagged ``oversubscribed``).
"""
from __future__ import annotations

import csv
import subprocess
import sys

import pytest

from hpctwin.topology.collectives import ALGORITHMS, supports
from hpctwin.topology.collectives.mpi_exec import find_mpiexec

pytestmark = pytest.mark.mpi


def _mpiexec() -> str:
    exe = find_mpiexec()
    if exe is None:
        pytest.skip("mpiexec not found next to Python nor on PATH (install the mpich wheel)")
    return exe


@pytest.mark.parametrize("n,extra", [
    (4, ["--reps", "1"]),
    (8, ["--reps", "1", "--block-elems", "1,7", "--dtypes", "int64,float64"]),
    (6, ["--reps", "1", "--block-elems", "3", "--dtypes", "int32"]),
])
def test_validate_under_mpiexec(tmp_path, n, extra):
    out = tmp_path / f"validate_{n}.csv"
    cmd = [_mpiexec(), "-n", str(n), sys.executable, "-m", "hpctwin.topology.collectives.validate", "--out", str(out)] + extra
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = list(csv.DictReader(out.open()))
    assert rows and all(r["ok"] == "True" for r in rows)
    # every algorithm that serves this p was exercised, for both roots of the rooted collectives
    seen = {(r["collective"], r["algorithm"]) for r in rows}
    want = {(c, a) for c, algs in ALGORITHMS.items() for a in algs if supports(c, a, n)}
    assert seen == want
    roots = {r["root"] for r in rows if r["collective"] == "gather"}
    assert roots == {"0", str(n - 1)}
    assert all(int(r["p"]) == n for r in rows)
    assert all(float(r["time_schedule_s"]) > 0 for r in rows)


def test_validate_rejects_unknown_collective(tmp_path):
    cmd = [_mpiexec(), "-n", "2", sys.executable, "-m", "hpctwin.topology.collectives.validate",
           "--out", str(tmp_path / "x.csv"), "--collectives", "allsum"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "unknown collective 'allsum'" in proc.stderr
