"""``--out`` never loses a user's files: checked before the run, replaced atomically, only run folders."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpctwin.twin import run as run_mod
from hpctwin.twin.cli import main
from hpctwin.twin.runfolder import MARKER, RunFolderError, clean_stale_siblings, is_run_folder, prepare_out

W = ["--workload", "synthetic:jobs=60,nodes=16", "--quiet"]


def _run(out, *extra) -> int:
    return main(["run", *W, "--out", str(out), *extra])


def test_existing_user_folder_is_never_deleted_even_with_force(tmp_path, capsys):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "thesis.tex").write_text("precious")
    for extra in ((), ("--force",)):
        assert _run(user, *extra) == 2
        assert (user / "thesis.tex").read_text() == "precious"
    err = capsys.readouterr().err
    assert "is not an hpctwin run folder (it holds thesis.tex)" in err and "never deletes it" in err


def test_folder_holding_the_input_log_is_refused(tmp_path, capsys):
    logdir = tmp_path / "logs"
    logdir.mkdir()
    swf = logdir / "tiny.swf"
    swf.write_text("; MaxProcs: 4\n1 0 0 10 2 -1 -1 2 20 -1 1 1 1 -1 1 -1 -1 -1\n")
    assert main(["run", "--workload", str(swf), "--out", str(logdir), "--force", "--quiet"]) == 2
    assert swf.exists() and "tiny.swf" in capsys.readouterr().err


def test_working_directory_and_its_parents_are_refused(tmp_path, monkeypatch, capsys):
    child = tmp_path / "p" / "c"
    child.mkdir(parents=True)
    (tmp_path / "p" / "keep.txt").write_text("x")
    monkeypatch.chdir(child)
    assert _run("..", "--force") == 2
    assert _run(".", "--force") == 2
    assert (tmp_path / "p" / "keep.txt").exists() and child.exists()
    assert capsys.readouterr().err.count("is the working directory or one of its parents") == 2


def test_regular_file_is_refused_before_simulating(tmp_path, monkeypatch, capsys):
    f = tmp_path / "out.txt"
    f.write_text("data")
    called = []
    monkeypatch.setattr(run_mod, "simulate", lambda *a, **k: called.append(1))
    assert _run(f, "--force") == 2
    assert not called and f.read_text() == "data"
    assert "exists and is not a folder" in capsys.readouterr().err


def test_existing_run_folder_needs_force_then_is_replaced(tmp_path, capsys):
    out = tmp_path / "run"
    assert _run(out) == 0 and is_run_folder(out)
    first = (out / "jobs.csv").read_bytes()
    assert _run(out) == 2
    assert "a run folder is already there; pass --force" in capsys.readouterr().err
    assert main(["run", "--workload", "synthetic:jobs=80,nodes=16", "--quiet", "--out", str(out), "--force"]) == 0
    assert (out / "jobs.csv").read_bytes() != first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]          # no trash or partial left


def test_run_folder_with_an_extra_user_file_is_not_replaced(tmp_path, capsys):
    out = tmp_path / "run"
    assert _run(out) == 0
    (out / "my_notes.md").write_text("mine")
    assert _run(out, "--force") == 2
    assert (out / "my_notes.md").exists() and "my_notes.md" in capsys.readouterr().err


def test_unwritable_parent_is_one_line_error_before_simulating(tmp_path, monkeypatch, capsys):
    def erofs(self, *a, **k):
        raise OSError(errno.EROFS, "Read-only file system")
    called = []
    monkeypatch.setattr(run_mod, "simulate", lambda *a, **k: called.append(1))
    monkeypatch.setattr(Path, "mkdir", erofs)
    assert _run(tmp_path / "ro" / "run") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert not called and len(err) == 1 and "read-only file system" in err[0]


def test_disk_full_while_writing_is_one_line_error_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    def enospc(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr("pandas.DataFrame.to_csv", enospc)
    monkeypatch.setattr("hpctwin.twin.run.write_csv", enospc)     # jobs.csv is written by twin.csvout
    monkeypatch.setattr("hpctwin.twin.run.write_columns_csv", enospc)   # (from the columns, without pandas)
    assert _run(tmp_path / "run") == 2
    assert "no space left on device" in capsys.readouterr().err.lower()
    assert list(tmp_path.iterdir()) == []


def test_stale_partial_folders_of_dead_processes_are_cleaned(tmp_path):
    out = tmp_path / "run"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    (tmp_path / f".run.partial-{dead}").mkdir()
    (tmp_path / f".run.trash-{dead}").mkdir()
    alive = tmp_path / f".run.partial-{os.getppid()}"
    alive.mkdir()
    assert clean_stale_siblings(out) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [alive.name]


def test_failed_run_leaves_no_partial_folder(tmp_path):
    with pytest.raises(Exception):
        run_mod.run(run_mod.RunConfig(workload="synthetic:jobs=10,nodes=8", scheduler="nosuch",
                                      out=str(tmp_path / "run")))
    assert list(tmp_path.iterdir()) == []


def test_prepare_out_marker_and_api(tmp_path):
    tmp = prepare_out(tmp_path / "x")
    assert tmp.is_dir() and tmp.name.startswith(".x.partial-")
    res = run_mod.run(run_mod.RunConfig(workload="synthetic:jobs=30,nodes=8", out=str(tmp_path / "api")))
    assert (res.out / MARKER).is_file() and is_run_folder(res.out)
    with pytest.raises(RunFolderError, match="pass --force"):
        run_mod.run(run_mod.RunConfig(workload="synthetic:jobs=30,nodes=8", out=str(tmp_path / "api")))


def test_default_names_distinguish_options(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", *W]) == 0
    assert main(["run", *W, "--order", "sjf"]) == 0
    assert main(["run", *W, "--backfill", "conservative"]) == 0
    names = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert "synthetic_jobs_60_nodes_16-easy-seed0" in names
    assert "synthetic_jobs_60_nodes_16-easy-sjf-seed0" in names
    assert "synthetic_jobs_60_nodes_16-easy-bfconservative-seed0" in names


@pytest.mark.parametrize("marker", ['{"files": 3}', '{"files": [1, 2]}', '[]', 'not json', '{"files": "jobs.csv"}'])
def test_damaged_marker_is_not_a_run_folder(tmp_path, marker, capsys):
    out = tmp_path / "r"
    out.mkdir()
    (out / MARKER).write_text(marker)
    (out / "jobs.csv").write_text("x")
    assert not is_run_folder(out)
    assert _run(out, "--force") == 2 and (out / "jobs.csv").read_text() == "x"
    assert "is not an hpctwin run folder" in capsys.readouterr().err
