"""``hpctwin export ... --out FILE``: never replaces a file without --force, never a folder, a link or
the file it reads; written under a temporary name and renamed, so a failure leaves the old file."""
from __future__ import annotations

import pytest

from hpctwin.twin.cli import main as cli_main
from hpctwin.twin.run import RunConfig, run
from tests.helpers import workload


@pytest.fixture()
def tiny_run(tmp_path):
    d = tmp_path / "run"
    wl = workload([(1, 0, 100, 2, 200), (2, 10, 50, 4, 60)])
    run(RunConfig(workload="tiny", scheduler="fcfs", nodes=4, out=str(d), quiet=True), workload=wl)
    return d


@pytest.mark.parametrize("fmt", ["sacct", "batsim"])
def test_existing_file_needs_force(tiny_run, tmp_path, fmt, capsys):
    out = tmp_path / "mine.csv"
    out.write_text("precious\n")
    assert cli_main(["export", fmt, str(tiny_run), "--out", str(out)]) == 2
    assert out.read_text() == "precious\n"
    assert "exists; pass --force to replace it" in capsys.readouterr().err
    assert cli_main(["export", fmt, str(tiny_run), "--out", str(out), "--force"]) == 0
    assert out.read_text() != "precious\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".mine")] == []


@pytest.mark.parametrize("fmt", ["sacct", "batsim"])
def test_folder_link_and_input_are_refused_even_with_force(tiny_run, tmp_path, fmt, capsys):
    (tmp_path / "dir").mkdir()
    link = tmp_path / "link.csv"
    link.symlink_to(tiny_run / "jobs.csv")
    before = (tiny_run / "jobs.csv").read_bytes()
    for target in (tmp_path / "dir", link, tiny_run / "jobs.csv"):
        assert cli_main(["export", fmt, str(tiny_run), "--out", str(target), "--force"]) == 2
    assert (tiny_run / "jobs.csv").read_bytes() == before
    err = capsys.readouterr().err
    assert "is a folder" in err and "is a symbolic link" in err and "is the file this command reads" in err


def test_swf_export_refuses_its_own_input(tmp_path, capsys):
    swf = tmp_path / "tiny.swf"
    swf.write_text("; MaxProcs: 4\n1 0 0 10 2 -1 -1 2 20 -1 1 1 1 -1 1 -1 -1 -1\n")
    assert cli_main(["export", "swf", "-w", str(swf), "--out", str(swf), "--force"]) == 2
    assert swf.read_text().startswith("; MaxProcs: 4\n1 0 0 10")
    assert "is the file this command reads" in capsys.readouterr().err


def test_failure_while_writing_keeps_old_file(tiny_run, tmp_path, monkeypatch, capsys):
    out = tmp_path / "s.psv"
    assert cli_main(["export", "sacct", str(tiny_run), "--out", str(out)]) == 0
    old = out.read_bytes()
    import hpctwin.datasets.sacct as sacct

    def boom(df, path, **kw):
        with open(path, "w") as fh:
            fh.write("half")
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(sacct, "export_sacct", boom)
    assert cli_main(["export", "sacct", str(tiny_run), "--out", str(out), "--force"]) == 2
    assert out.read_bytes() == old
    assert "no space left on device" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".s.psv")] == []


def test_default_batsim_target_inside_the_run_is_regenerated(tiny_run):
    assert cli_main(["export", "batsim", str(tiny_run)]) == 0
    first = (tiny_run / "out_jobs.csv").read_bytes()
    assert cli_main(["export", "batsim", str(tiny_run)]) == 0
    assert (tiny_run / "out_jobs.csv").read_bytes() == first
    # the run folder stays one hpctwin may replace with --force
    assert cli_main(["run", "-w", "synthetic:jobs=10,nodes=4", "--out", str(tiny_run), "--force", "--quiet"]) == 0


def test_sacct_export_defaults_into_the_run_folder_like_batsim(tiny_run):
    assert cli_main(["export", "sacct", str(tiny_run)]) == 0
    first = (tiny_run / "sacct.psv").read_bytes()
    assert first.startswith(b"JobID|") or b"|" in first.split(b"\n")[0]
    assert cli_main(["export", "sacct", str(tiny_run)]) == 0          # regenerated in place, no --force
    assert (tiny_run / "sacct.psv").read_bytes() == first
    assert cli_main(["run", "-w", "synthetic:jobs=10,nodes=4", "--out", str(tiny_run), "--force", "--quiet"]) == 0
