"""``hpctwin collectives validate``: mpiexec lookup, one help text, skipped algorithms, no stray files.

The tests that launch ``mpiexec`` are marked ``mpi``; the others run the launcher's parsing in-process.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpctwin.topology.collectives import ALGORITHMS, supports
from hpctwin.topology.collectives.algorithms import unsupported_reason
from hpctwin.topology.collectives.mpi_exec import find_mpiexec
from hpctwin.topology.collectives.validate import _drop_np, launch, skipped_algorithms
from hpctwin.twin.cli import main as cli_main


def test_unsupported_reason_matches_supports_everywhere():
    for p in (1, 2, 3, 6, 8, 12, 16):
        for c, algs in ALGORITHMS.items():
            for a in algs:
                assert (unsupported_reason(c, a, p) is None) == supports(c, a, p), (c, a, p)


def test_skipped_algorithms_at_six_ranks_name_power_of_two():
    skipped = skipped_algorithms(list(ALGORITHMS), 6)
    names = {(c, a) for c, a, _ in skipped}
    assert ("alltoall", "bine") in names
    assert ("allgather", "bine_doubling") in names
    # every skipped one is exactly what supports() refuses; ring and binomial serve any p
    want = {(c, a) for c, algs in ALGORITHMS.items() for a in algs if not supports(c, a, 6)}
    assert names == want
    assert ("allreduce", "ring") not in names
    reasons = dict(((c, a), r) for c, a, r in skipped)
    assert reasons[("alltoall", "bine")] == "needs a power-of-two number of ranks (p=6)"
    assert reasons[("allgather", "bine_doubling")].startswith("not defined for allgather")
    at8 = skipped_algorithms(list(ALGORITHMS), 8)          # a power of two: only the undefined pairs
    assert sorted((c, a) for c, a, _ in at8) == [("allgather", "bine_doubling"), ("reduce_scatter", "bine_halving")]


def test_find_mpiexec_prefers_the_one_next_to_python(monkeypatch):
    exe = find_mpiexec()
    here = Path(sys.executable).parent / "mpiexec"
    if here.is_file():
        monkeypatch.setenv("PATH", "/nonexistent")
        assert find_mpiexec() == str(here)
    else:  # pragma: no cover - an environment without the mpich wheel next to Python
        assert exe is None or Path(exe).name.startswith("mpiexec")


def test_help_prints_once_and_documents_n(capsys):
    assert cli_main(["collectives", "validate", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.count("usage: hpctwin collectives validate") == 1
    assert "-n N, --np N" in out and "MPI ranks" in out
    assert "runs/collectives_validate-p<N>.csv" in out


def test_bad_option_is_refused_before_launching(capsys):
    assert launch(["--bogus"]) == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err
    assert launch(["-n", "1"]) == 2
    assert "needs at least 2 MPI ranks" in capsys.readouterr().err


def test_drop_np_keeps_every_other_option():
    assert _drop_np(["-n", "6", "--reps", "1", "--np=4", "-n8", "--out", "x.csv"]) == ["--reps", "1", "--out", "x.csv"]


@pytest.mark.mpi
def test_validate_six_ranks_without_venv_on_path_says_what_it_skips(tmp_path):
    if find_mpiexec() is None:
        pytest.skip("no mpiexec (install the mpich wheel)")
    env = dict(os.environ, PATH="/usr/bin:/bin")          # the venv's bin/ is not on PATH
    proc = subprocess.run([sys.executable, "-m", "hpctwin.twin.cli", "collectives", "validate", "-n", "6",
                           "--reps", "1", "--block-elems", "3", "--dtypes", "int32",
                           "--collectives", "alltoall,allreduce"],
                          capture_output=True, text=True, timeout=240, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "validate: p=6: skipping" in proc.stderr
    assert "alltoall/bine (needs a power-of-two number of ranks (p=6))" in proc.stderr
    assert proc.stderr.count("skipping") == 1                # rank 0 only
    # the CSV goes under runs/, never into the working directory's root
    assert (tmp_path / "runs" / "collectives_validate-p6.csv").is_file()
    assert not (tmp_path / "collectives_validate.csv").exists()


@pytest.mark.mpi
def test_validator_help_under_mpiexec_prints_once(tmp_path):
    exe = find_mpiexec()
    if exe is None:
        pytest.skip("no mpiexec (install the mpich wheel)")
    proc = subprocess.run([exe, "-n", "3", sys.executable, "-m", "hpctwin.topology.collectives.validate", "--help"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("usage:") == 1
