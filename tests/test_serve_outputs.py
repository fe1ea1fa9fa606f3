"""``hpctwin serve --out``: the output contract of ``hpctwin run`` (checked before simulating, published
atomically, never a user's folder), and a kill at any moment leaves the old or the new folder."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpctwin.datasets.registry import default_data_dir
from hpctwin.twin.runfolder import MARKER, is_run_folder
from hpctwin.twin.serving import cli as serve_cli

#: the default deployment of --trace mode reads its timing profiles from the data directory
PERF = Path(default_data_dir(None)) / "LLM-serving" / "LLMServingSim" / "perf" / "RTXPRO6000"
needs_profiles = pytest.mark.skipif(not PERF.is_dir(), reason="LLM-serving profiles not in the data directory")

AZURE_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
    f"2023-11-16 18:15:{10 + i:02d}.000000,{200 + 7 * i},{20 + i}\n" for i in range(30))


@pytest.fixture()
def trace(tmp_path) -> Path:
    t = tmp_path / "trace.csv"
    t.write_text(AZURE_HEAD)
    return t


def _serve(trace: Path, out: Path, *extra: str) -> int:
    return serve_cli.main(["--trace", str(trace), "--out", str(out), "--quiet", *extra])


def test_users_folder_is_refused_before_simulating_and_untouched(tmp_path, trace, monkeypatch, capsys):
    user = tmp_path / "d"
    user.mkdir()
    (user / "requests.csv").write_text("mine\n")
    called = []
    monkeypatch.setattr(serve_cli, "run_trace", lambda a: called.append(1))
    for extra in ((), ("--force",)):
        assert _serve(trace, user, *extra) == 2
    assert not called
    assert (user / "requests.csv").read_text() == "mine\n" and sorted(os.listdir(user)) == ["requests.csv"]
    err = capsys.readouterr().err
    assert "is not an hpctwin run folder (it holds requests.csv)" in err and "never deletes it" in err


def test_file_dot_and_symlink_are_refused(tmp_path, trace, monkeypatch, capsys):
    f = tmp_path / "out.txt"
    f.write_text("data")
    assert _serve(trace, f) == 2 and f.read_text() == "data"
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    assert _serve(trace, link, "--force") == 2
    monkeypatch.chdir(tmp_path)
    assert _serve(trace, Path("."), "--force") == 2
    err = capsys.readouterr().err
    assert "exists and is not a folder" in err and "working directory" in err
    assert err.count("hpctwin serve: error:") == 3


@needs_profiles
def test_existing_output_needs_force_and_a_rerun_drops_old_files(tmp_path, trace, capsys):
    out = tmp_path / "o"
    assert _serve(trace, out) == 0
    assert (out / "timeseries.csv").exists() and is_run_folder(out)
    assert _serve(trace, out, "--no-timeseries") == 2
    assert "pass --force" in capsys.readouterr().err
    assert _serve(trace, out, "--no-timeseries", "--force") == 0
    # the rerun's folder holds exactly what the rerun wrote: no stale timeseries.csv of the first run
    assert sorted(os.listdir(out)) == sorted([MARKER, "requests.csv", "requests_detail.csv", "summary.json"])
    assert json.loads((out / MARKER).read_text())["files"] == ["requests.csv", "requests_detail.csv", "summary.json"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".o.")]


@needs_profiles
def test_failed_simulation_leaves_old_folder_and_no_partial(tmp_path, trace, monkeypatch, capsys):
    out = tmp_path / "o"
    assert _serve(trace, out) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def boom(a):
        raise ValueError("model exploded")
    monkeypatch.setattr(serve_cli, "run_trace", boom)
    assert _serve(trace, out, "--force") == 2
    assert "model exploded" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".o.")]


def _complete(out: Path) -> dict[str, bytes] | None:
    """The folder's files when it is a complete serve folder (marker listing exactly what is there)."""
    if not out.exists():
        return None
    listed = json.loads((out / MARKER).read_text())["files"]
    assert sorted(listed) == sorted(p.name for p in out.iterdir() if p.name != MARKER)
    json.loads((out / "summary.json").read_text())
    return {p.name: p.read_bytes() for p in out.iterdir() if p.name != MARKER}


@pytest.mark.slow
@needs_profiles
def test_kill_at_any_moment_leaves_old_or_new_folder(tmp_path):
    t = tmp_path / "big.csv"
    t.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"2023-11-16 18:{15 + i // 600:02d}:{(i // 10) % 60:02d}.{i % 10}00000,{300 + i % 97},{40 + i % 53}\n"
        for i in range(3000)))
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "hpctwin.twin.serving.cli", "--trace", str(t), "--out", str(out), "--quiet"]
    subprocess.run(cmd + ["--no-timeseries"], check=True)
    old = _complete(out)
    assert "timeseries.csv" not in old
    seen = set()
    for delay in (0.3, 0.8, 1.5, 2.5, 4.0):
        p = subprocess.Popen(cmd + ["--force"])
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait()
        now = _complete(out)
        assert now is not None
        assert now == old or "timeseries.csv" in now, "a mixture of the old and the new folder"
        seen.add("new" if "timeseries.csv" in now else "old")
        old = now
    assert "old" in seen or "new" in seen


def test_missing_input_is_named_not_blamed_on_out(tmp_path, capsys):
    assert _serve(tmp_path / "nope.csv", tmp_path / "o") == 2
    err = capsys.readouterr().err
    assert "nope.csv" in err and "cannot write" not in err
    assert not (tmp_path / "o").exists()
