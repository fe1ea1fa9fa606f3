"""Every experiment script writes ``--out`` through the one output contract (`twin.runfolder`).

For four scripts (their heavy work replaced by a fast stand-in, or, for ``bine_traffic``, on a tiny
real input): ``--out`` is checked before any work (a user's folder, ``.``, a file and, without
``--force``, an earlier output folder are refused, untouched, with one ``error:`` line and exit 2);
``--force`` replaces a folder the script wrote; an error or Ctrl-C during the work leaves the old
folder as it was and no partial sibling; a SIGKILL at any moment leaves the old or the new complete
folder, never a mixture; tables and printed lines never name the hidden partial folder.
"""
from __future__ import annotations

import importlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpctwin.experiments.tables import FORCE_HELP, InputReadError, staged_output
from hpctwin.twin.runfolder import MARKER, RunFolderError


# ------------------------------------------------------------------------------ fast stand-ins
def _fake_compare_point(args: tuple) -> dict:
    log, order, backfill, seed, _data_dir, estimate = args
    bsld = 1.5 + seed + (order == "sjf")
    return {"log": log, "policy": f"{order}+{backfill}", "order": order, "backfill": backfill,
            "machine_units": 8, "jobs": 10, "jobs_skipped": 0, "estimate": estimate, "tau_s": 10.0,
            "mean_wait_s": 100.0 + seed, "median_wait_s": 50.0, "mean_bsld": bsld, "utilisation": 0.5,
            "makespan_s": 1000.0}


def _fake_placement_grid(log, systems, jobs, seed=0, scheduler="easy"):
    from hpctwin.experiments.placement_whatif import POLICIES
    rows, spans = [], {}
    for system in systems:
        for k, pol in enumerate(POLICIES):
            spans[(system, pol)] = np.array([1, 1, 2 + (k + seed) % 2])
            rows.append({"machine": system, "topology": "dragonfly", "log": log, "jobs": 3, "scheduler": scheduler,
                         "placement": pol, "mean_wait_s": 10.0 * k + seed, "mean_bsld": 1.0 + k,
                         "mean_groups_spanned": 1.5, "global_bytes": 1e6 * (seed + 1),
                         "mean_contention_stretch": 1.0, "utilisation": 0.4})
    return pd.DataFrame(rows), spans


def _fake_slurm_run(args: tuple) -> dict:
    _log, max_jobs, param, value, _data_dir = args
    k = len(str(value)) if param else 0
    return {"parameter": param or "baseline", "value": value if param else "",
            "mean_wait_s": 100.0 + max_jobs + k, "mean_bsld": 1.0 + k, "utilisation": 0.5,
            "user_wait_spread_s": 5.0 + k, "user_wait_jain": 0.9, "jobs": max_jobs, "machine_nodes": 8,
            "wall_s": 0.0}


def _bine_inputs(root: Path) -> list[str]:
    run = root / "inputs" / "run1"
    run.mkdir(parents=True, exist_ok=True)
    (run / "jobs.csv").write_text('job,nodes\n1,0-7\n2,"0,2,4,6"\n')
    (root / "inputs" / "groups.txt").write_text("".join(f"{n} {n // 4}\n" for n in range(8)))
    return ["--jobs-csv", str(run / "jobs.csv"), "--group-map", str(root / "inputs" / "groups.txt"), "--no-linkload"]


#: script -> (work function replaced, stand-in or None (the real one is fast), argv(root, variant))
SCRIPTS = {
    "compare_schedulers": ("run_point", _fake_compare_point,
                           lambda root, v: ["-w", "toy", "--policies", "fcfs+none,sjf+easy", "--seed", str(v)]),
    "placement_whatif": ("run_grid", _fake_placement_grid,
                         lambda root, v: ["-w", "toy", "--system", "adastra", "--seed", str(v)]),
    "slurm_tuning": ("one_run", _fake_slurm_run, lambda root, v: ["-w", "toy", "--max-jobs", str(10 + v)]),
    "bine_traffic": ("traffic_by_job", None, lambda root, v: _bine_inputs(root) + ["--max-p", str(4 * 2 ** v)]),
}


@pytest.fixture(params=sorted(SCRIPTS))
def script(request, monkeypatch):
    """(module, argv(root, variant), calls): the work function counts its calls in ``calls``."""
    name = request.param
    mod = importlib.import_module(f"hpctwin.experiments.{name}")
    attr, fake, argv = SCRIPTS[name]
    real = fake or getattr(mod, attr)
    calls = []

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)
    monkeypatch.setattr(mod, attr, counted)
    return mod, argv, calls


def _prog(mod) -> str:
    return f"python -m {mod.__name__}"


def _run(mod, args: list[str]) -> int:
    """``main(args)`` as the command line sees it: its exit code (0 when it returns normally)."""
    try:
        mod.main(args)
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _siblings(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def _assert_complete(out: Path) -> None:
    """The marker is there and lists exactly the other files present."""
    listed = json.loads((out / MARKER).read_text())["files"]
    assert sorted(listed) == sorted(p.name for p in out.iterdir() if p.name != MARKER)


def _one_error_line(err: str, prog: str, *phrases: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), err
    for ph in phrases:
        assert ph in lines[0], lines[0]
    return lines[0]


# ------------------------------------------------------------------------------ refusals
def test_user_folder_is_refused_even_with_force_and_untouched(script, tmp_path, capsys):
    mod, argv, calls = script
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("precious")
    for extra in ([], ["--force"]):
        assert _run(mod, argv(tmp_path, 0) + ["--out", str(user), *extra]) == 2
        _one_error_line(capsys.readouterr().err, _prog(mod), "is not an hpctwin run folder (it holds notes.txt)",
                        "never deletes it, even with --force")
    assert _snapshot(user) == {"notes.txt": b"precious"} and calls == [] and _siblings(user) == []


@pytest.mark.parametrize("name", [".", ".."])
def test_working_directory_and_parent_are_refused(script, tmp_path, monkeypatch, capsys, name):
    mod, argv, calls = script
    work = tmp_path / "work"
    work.mkdir()
    (work / "keep.txt").write_text("x")
    monkeypatch.chdir(work)
    args = argv(tmp_path, 0)
    assert _run(mod, args + ["--out", name, "--force"]) == 2
    _one_error_line(capsys.readouterr().err, _prog(mod), "is the working directory or one of its parents")
    assert calls == [] and (work / "keep.txt").read_text() == "x"
    assert sorted(p.name for p in work.iterdir()) == ["keep.txt"]


def test_a_file_as_out_is_refused(script, tmp_path, capsys):
    mod, argv, calls = script
    f = tmp_path / "results.csv"
    f.write_text("a,b\n1,2\n")
    assert _run(mod, argv(tmp_path, 0) + ["--out", str(f), "--force"]) == 2
    _one_error_line(capsys.readouterr().err, _prog(mod), "exists and is not a folder")
    assert f.read_text() == "a,b\n1,2\n" and calls == []


def test_work_is_not_called_when_out_is_refused(script, tmp_path, monkeypatch, capsys):
    mod, argv, _ = script
    attr = SCRIPTS[mod.__name__.rsplit(".", 1)[1]][0]

    def never(*a, **k):
        raise AssertionError("the work ran although --out was refused")
    monkeypatch.setattr(mod, attr, never)
    out = tmp_path / "earlier"
    out.mkdir()
    (out / MARKER).write_text(json.dumps({"hpctwin_run": 1, "files": ["results.csv"]}) + "\n")
    (out / "results.csv").write_text("x\n1\n")
    assert _run(mod, argv(tmp_path, 0) + ["--out", str(out)]) == 2        # no --force
    _one_error_line(capsys.readouterr().err, _prog(mod), "a run folder is already there; pass --force")
    assert (out / "results.csv").read_text() == "x\n1\n"


# ------------------------------------------------------------------------------ writing and replacing
def test_output_folder_is_published_then_replaced_only_with_force(script, tmp_path, capsys):
    mod, argv, calls = script
    out = tmp_path / "res"
    assert _run(mod, argv(tmp_path, 0) + ["--out", str(out)]) == 0
    _assert_complete(out)
    old = _snapshot(out)
    printed = capsys.readouterr().out
    assert ".partial-" not in printed and _siblings(out) == []
    for name, data in old.items():                     # captions name no temporary or absolute output path
        if name.endswith((".md", ".tex", ".csv")):
            text = data.decode()
            assert ".partial-" not in text and str(out) not in text, name
    n_calls = len(calls)

    assert _run(mod, argv(tmp_path, 1) + ["--out", str(out)]) == 2    # refused without --force
    _one_error_line(capsys.readouterr().err, _prog(mod), "pass --force to replace it")
    assert _snapshot(out) == old and len(calls) == n_calls

    assert _run(mod, argv(tmp_path, 1) + ["--out", str(out), "--force"]) == 0
    _assert_complete(out)
    new = _snapshot(out)
    assert new.keys() == old.keys() and new != old and _siblings(out) == []


def test_force_flag_is_documented(script, capsys):
    mod, _, _ = script
    assert _run(mod, ["--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--force" in help_text and FORCE_HELP in help_text


@pytest.mark.parametrize("exc, code, phrase", [(ValueError("bad row 7"), 2, "error: bad row 7"),
                                               (KeyboardInterrupt(), 130, "nothing was written to"),
                                               (RuntimeError("a bug"), None, None)])
def test_error_during_the_work_keeps_the_old_folder(script, tmp_path, monkeypatch, capsys, exc, code, phrase):
    mod, argv, _ = script
    out = tmp_path / "res"
    assert _run(mod, argv(tmp_path, 0) + ["--out", str(out)]) == 0
    old = _snapshot(out)
    capsys.readouterr()
    attr = SCRIPTS[mod.__name__.rsplit(".", 1)[1]][0]

    def boom(*a, **k):
        raise exc
    monkeypatch.setattr(mod, attr, boom)
    args = argv(tmp_path, 1) + ["--out", str(out), "--force"]
    if code is None:                                   # not an input error: the traceback is the report
        with pytest.raises(RuntimeError, match="a bug"):
            mod.main(args)
    else:
        assert _run(mod, args) == code
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and phrase in err and err.startswith(_prog(mod))
    assert _snapshot(out) == old and _siblings(out) == []


# ------------------------------------------------------------------------------ the helper itself
def test_staged_output_names_an_unreadable_input_not_the_folder(tmp_path, capsys):
    out = tmp_path / "res"
    with pytest.raises(SystemExit) as ei:
        with staged_output("prog", out) as tmp:
            (tmp / "a.csv").write_text("1\n")
            open(tmp_path / "no-such-log.swf")         # noqa: SIM115 - an input that is not there
    assert ei.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == f"prog: error: cannot read {tmp_path / 'no-such-log.swf'}: No such file or directory"
    assert not out.exists() and _siblings(out) == []
    assert issubclass(InputReadError, ValueError)


def test_staged_output_reports_a_message_only_os_error_as_it_is(tmp_path, capsys):
    """e.g. serving_validation's FileNotFoundError("no bundle with vllm/requests.jsonl ..."): not the folder's."""
    out = tmp_path / "res"
    with pytest.raises(SystemExit) as ei:
        with staged_output("prog", out):
            raise FileNotFoundError("no bundle with vllm/requests.jsonl under the data directory")
    assert ei.value.code == 2
    assert capsys.readouterr().err == "prog: error: no bundle with vllm/requests.jsonl under the data directory\n"
    assert not out.exists() and _siblings(out) == []
    with pytest.raises(SystemExit):
        with staged_output("prog", out):
            raise FileNotFoundError(str(tmp_path / "tasks.parquet"))      # as pyarrow reports a missing file
    assert capsys.readouterr().err == f"prog: error: cannot read {tmp_path / 'tasks.parquet'}: no such file\n"


@pytest.mark.parametrize("where", ["file", "no-file"])
def test_staged_output_reports_a_write_error_against_out(tmp_path, capsys, where):
    out = tmp_path / "res"
    with pytest.raises(SystemExit) as ei:
        with staged_output("prog", out) as tmp:
            if where == "file":
                open(tmp / "sub" / "x.csv", "w")       # noqa: SIM115 - a write inside the folder fails
            raise OSError(28, "No space left on device")   # as a full disk's write() does: no file named
    assert ei.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"prog: error: --out {out}: cannot write the folder") and ".partial-" not in err
    assert not out.exists() and _siblings(out) == [] and issubclass(RunFolderError, ValueError)


def test_bine_traffic_missing_input_is_one_line(tmp_path, capsys):
    from hpctwin.experiments import bine_traffic as bt
    out = tmp_path / "res"
    args = ["--out", str(out), "--jobs-csv", str(tmp_path / "nope.csv"), "--group-map", str(tmp_path / "g.txt")]
    assert _run(bt, args) == 2
    _one_error_line(capsys.readouterr().err, _prog(bt), "nope.csv")
    assert not out.exists() and _siblings(out) == []


# ------------------------------------------------------------------------------ kill -9 at any moment
@pytest.mark.slow                                      # five subprocesses: about 8-18 s on 2 cores
def test_sigkill_leaves_the_old_or_the_new_folder_never_a_mixture(tmp_path):
    """bine_traffic on a tiny input, an earlier output folder (``--max-p 4``) replaced with ``--force``
    by a run with ``--max-p 8``, SIGKILLed after 0.2, 1 and 2 s, as soon as its partial folder holds a
    file and 0.3 s later: each time ``--out`` is the complete old folder or the complete new one."""
    from hpctwin.experiments import bine_traffic as bt
    inputs = _bine_inputs(tmp_path)
    out, ref = tmp_path / "res", tmp_path / "ref"
    assert bt.main(inputs + ["--max-p", "4", "--out", str(out)]) == 0
    assert bt.main(inputs + ["--max-p", "8", "--out", str(ref)]) == 0
    old, new = _snapshot(out), _snapshot(ref)
    assert old["alpha_beta.csv"] != new["alpha_beta.csv"]       # a mixture would be visible
    cmd = [sys.executable, "-m", "hpctwin.experiments.bine_traffic", *inputs, "--max-p", "8", "--out", str(out),
           "--force"]
    outcomes = []
    for when in (0.2, 1.0, 2.0, "partial", "partial+0.3"):
        if outcomes and outcomes[-1] == "new":         # published already: start again from the old folder
            assert bt.main(inputs + ["--max-p", "4", "--out", str(out), "--force"]) == 0
            assert _snapshot(out) == old
        proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        partial = tmp_path / f".res.partial-{proc.pid}"
        try:
            if isinstance(when, str):                  # once the run is writing its files (+ 0.3 s)
                deadline = time.monotonic() + 30.0
                while proc.poll() is None and time.monotonic() < deadline:
                    if partial.is_dir() and any(partial.iterdir()):
                        break
                    time.sleep(0.002)
                time.sleep(0.3 if when.endswith("0.3") else 0.0)
            else:
                time.sleep(when)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
        if when == "partial":                          # killed while writing: its files were only in the partial
            assert proc.returncode == -signal.SIGKILL and any(partial.iterdir())
        _assert_complete(out)
        now = _snapshot(out)
        assert now in (old, new), f"killed at {when}: a mixture of the old and the new folder"
        outcomes.append("new" if now == new else "old")
    assert outcomes[3] == "old"
    # the next run cleans the dead runs' partial folders and publishes the new folder
    assert bt.main(inputs + ["--max-p", "8", "--out", str(out), "--force"]) == 0
    assert _snapshot(out) == new and _siblings(out) == []
