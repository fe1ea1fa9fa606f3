"""Issue 23 item 8 (reading side): ``hpctwin report``, ``hpctwin plot gantt`` and ``hpctwin export`` on a
damaged run folder give one line ``hpctwin CMD: error: FILE...`` (exit status 2, no traceback) naming the
file, and say how to make the folder again where its config.toml is there.

Damage attacked: a truncated, empty or garbage ``timeseries.h5``; a missing, empty, cut (mid-line or at a
line end), non-UTF-8, non-numeric or column-less ``jobs.csv``; a missing, cut, non-JSON, non-object or
non-UTF-8 ``summary.json`` and bad values in it; a missing or corrupt marker; a marker listing a file
that is gone; a folder that does not exist, is a file, is empty, is somebody else's, or is a serve folder.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hpctwin.twin.cli import main
from hpctwin.twin.run import RunConfig, run
from hpctwin.twin.runfolder import MARKER, is_run_folder


@pytest.fixture(scope="module")
def good_run(tmp_path_factory) -> Path:
    """A 20-job synthetic run on 4 nodes (its config.toml reruns it)."""
    d = tmp_path_factory.mktemp("ra") / "run"
    run(RunConfig(workload="synthetic:jobs=20,nodes=4", scheduler="fcfs", nodes=4, out=str(d), quiet=True))
    return d


def _cut_jobs_mid_line(d: Path) -> None:
    data = (d / "jobs.csv").read_bytes()
    (d / "jobs.csv").write_bytes(data[: len(data) - 7])


def _cut_jobs_at_line_end(d: Path) -> None:
    lines = (d / "jobs.csv").read_text().splitlines(keepends=True)
    (d / "jobs.csv").write_text("".join(lines[:-1]))


def _jobs_cell(d: Path, col: str, value: str) -> None:
    lines = (d / "jobs.csv").read_text().splitlines()
    cols = lines[0].split(",")
    row = lines[2].split(",")
    row[cols.index(col)] = value
    lines[2] = ",".join(row)
    (d / "jobs.csv").write_text("\n".join(lines) + "\n")


def _drop_jobs_column(d: Path, col: str) -> None:
    lines = [ln.split(",") for ln in (d / "jobs.csv").read_text().splitlines()]
    k = lines[0].index(col)
    (d / "jobs.csv").write_text("\n".join(",".join(r[:k] + r[k + 1:]) for r in lines) + "\n")


def _summary_value(d: Path, key: str, value) -> None:
    s = json.loads((d / "summary.json").read_text())
    s[key] = value
    (d / "summary.json").write_text(json.dumps(s))


def _write(name: str, data: bytes):
    return lambda d: (d / name).write_bytes(data)


def _truncate(name: str, keep: int):
    return lambda d: (d / name).write_bytes((d / name).read_bytes()[:keep])


#: (case, how to damage a copy of the run folder, text in the error line (None: the command does not read
#: the damaged part and succeeds), which commands read it: report, plot, sacct, batsim)
ALL = ("report", "plot", "sacct", "batsim")
CASES = [
    ("h5-truncated", _truncate("timeseries.h5", 3000), "timeseries.h5: not a readable HDF5 file", ("report",)),
    ("h5-empty", _write("timeseries.h5", b""), "timeseries.h5: not a readable HDF5 file", ("report",)),
    ("h5-garbage", _write("timeseries.h5", b"\x89HDF\r\n" + bytes(range(256)) * 8), "timeseries.h5: not a readable HDF5 file",
     ("report",)),
    ("h5-missing", lambda d: (d / "timeseries.h5").unlink(), "timeseries.h5: missing (the folder's .hpctwin-run lists it)", ALL),
    ("jobs-missing", lambda d: (d / "jobs.csv").unlink(), "jobs.csv: missing (the folder's .hpctwin-run lists it)", ALL),
    ("jobs-empty", _write("jobs.csv", b""), "jobs.csv: empty file", ALL),
    ("jobs-cut-mid-line", _cut_jobs_mid_line, "jobs.csv: truncated (the last line has no line end)", ALL),
    ("jobs-cut-at-line-end", _cut_jobs_at_line_end, "jobs.csv: 19 job rows, but summary.json says jobs_simulated = 20",
     ALL),
    ("jobs-not-utf8", _write("jobs.csv", b"job_id,submit\n\xff\xfe,1\n"), "jobs.csv: not UTF-8 text: corrupt", ALL),
    ("jobs-text-in-submit", lambda d: _jobs_cell(d, "submit", "soon"), "jobs.csv:3: field 'submit': 'soon' is not a number",
     ALL),
    ("jobs-empty-procs", lambda d: _jobs_cell(d, "procs", ""), "jobs.csv:3: field 'procs': empty or not finite", ALL),
    ("jobs-no-procs-column", lambda d: _drop_jobs_column(d, "procs"), "jobs.csv:1: no column(s) procs", ALL),
    ("jobs-unbalanced-quote", _write("jobs.csv", b'job_id,submit,start,end,procs\n1,"0,0,1,1\n'),
     "jobs.csv: not a readable jobs table", ALL),
    ("summary-missing", lambda d: (d / "summary.json").unlink(), "summary.json: missing", ALL),
    ("summary-cut", _truncate("summary.json", 40), "summary.json:", ALL),
    ("summary-empty", _write("summary.json", b""), "summary.json:1: not valid JSON", ALL),
    ("summary-a-list", _write("summary.json", b"[1, 2]\n"), "summary.json: expected a JSON object of run figures, got list",
     ALL),
    ("summary-not-utf8", _write("summary.json", b'{"a": "\xff"}'), "summary.json: not UTF-8 text", ALL),
    ("summary-machine-units-text", lambda d: _summary_value(d, "machine_units", "many"),
     "summary.json: field 'machine_units': 'many' is not a machine size", ("report", "plot")),
    ("summary-unix-start-text", lambda d: _summary_value(d, "unix_start_time", "noon"),
     "summary.json: field 'unix_start_time': 'noon' is not a Unix time", ("sacct",)),
    ("config-not-utf8", _write("config.toml", b"[run]\nworkload = \"\xff\"\n"), "config.toml: not UTF-8 text", ("report",)),
    ("marker-missing", lambda d: (d / MARKER).unlink(), "not a finished run folder (no .hpctwin-run", ALL),
    ("marker-corrupt", _write(MARKER, b"{not json"), ".hpctwin-run: corrupt run-folder marker", ALL),
    ("marker-files-not-a-list", _write(MARKER, b'{"files": 3}'), ".hpctwin-run: corrupt run-folder marker", ALL),
    ("marker-lists-a-lost-file", _write(MARKER, json.dumps({"hpctwin_run": 1, "files": ["jobs.csv", "power.csv"]}).encode()),
     "power.csv: missing (the folder's .hpctwin-run lists it)", ALL),
]


def _argv(cmd: str, d: Path, tmp_path: Path) -> list[str]:
    return {"report": ["report", str(d), "--out", str(tmp_path / "r.html")],
            "plot": ["plot", "gantt", str(d), "--out", str(tmp_path / "g.png")],
            "sacct": ["export", "sacct", str(d), "-o", str(tmp_path / "s.sacct")],
            "batsim": ["export", "batsim", str(d), "-o", str(tmp_path / "b.csv")]}[cmd]


def _one_error_line(capsys, cmd: str) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    prefix = {"report": "hpctwin report: error: ", "plot": "hpctwin plot: error: "}.get(cmd, "hpctwin export: error: ")
    assert len(lines) == 1 and lines[0].startswith(prefix) and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("cmd", ALL)
@pytest.mark.parametrize("case, damage, want, readers", CASES, ids=[c[0] for c in CASES])
def test_damaged_run_folder(good_run, tmp_path, capsys, case, damage, want, readers, cmd):
    d = tmp_path / "run"
    shutil.copytree(good_run, d)
    damage(d)
    rc = main(_argv(cmd, d, tmp_path))
    if cmd not in readers:          # the command does not read the damaged part: it works as before
        assert rc == 0, capsys.readouterr().err
        return
    assert rc == 2
    line = _one_error_line(capsys, cmd)
    assert want in line, line
    assert str(d) in line
    if case == "config-not-utf8":
        assert "rerun the run that made it (hpctwin run ... --out FOLDER; its config.toml is damaged too)" in line
    else:
        how = f"--out {d} --force" if case != "marker-files-not-a-list" and is_run_folder(d) else "--out NEW_FOLDER"
        assert f"hpctwin run --config {d / 'config.toml'} {how}" in line, line
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "s.sacct").exists()
    assert not (tmp_path / "b.csv").exists() and not (tmp_path / "g.png").exists()


@pytest.mark.parametrize("cmd", ALL)
@pytest.mark.parametrize("case, make, want", [
    ("nonexistent", lambda d: None, "no such folder"),
    ("a-file", lambda d: d.write_text("x\n"), "not a folder; give the --out folder of an hpctwin run"),
    ("empty-folder", lambda d: d.mkdir(), "not a finished run folder (the folder is empty)"),
    ("somebody-elses-folder", lambda d: (d.mkdir(), (d / "notes.txt").write_text("x")),
     "not a finished run folder (no .hpctwin-run"),
    ("serve-folder", lambda d: (d.mkdir(), (d / "requests.csv").write_text("a\n"),
                                (d / MARKER).write_text(json.dumps({"hpctwin_run": 1, "files": ["requests.csv"]}))),
     "a run folder without jobs.csv (it holds requests.csv)"),
], ids=lambda x: x if isinstance(x, str) and " " not in x else None)
def test_not_a_run_folder(tmp_path, capsys, case, make, want, cmd):
    d = tmp_path / "run"
    make(d)
    assert main(_argv(cmd, d, tmp_path)) == 2
    line = _one_error_line(capsys, cmd)
    assert f"{d}" in line and want in line, line
    if case == "nonexistent":
        assert not d.exists()           # nothing was created where the folder should be


def test_the_suggested_rerun_repairs_the_folder(good_run, tmp_path, capsys):
    d = tmp_path / "run"
    shutil.copytree(good_run, d)
    _truncate("timeseries.h5", 3000)(d)
    assert main(["report", str(d)]) == 2
    line = _one_error_line(capsys, "report")
    rerun = line.split("rerun it: ", 1)[1].split()
    assert rerun[:2] == ["hpctwin", "run"]
    assert main(rerun[1:] + ["-q"]) == 0
    assert main(["report", str(d)]) == 0 and (d / "report.html").is_file()
    assert (d / "jobs.csv").read_bytes() == (good_run / "jobs.csv").read_bytes()
