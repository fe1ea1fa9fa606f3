"""Code named in a file runs only when the command line says so (issue 23 item 2): a run folder's
config.toml (``hpctwin run --config``) or a sweep file naming an ``exec:`` or ``module:Class``
scheduler, or a system whose cooling model is an FMU, is refused with file, line and the fix unless
``--allow-exec``; a name typed on the command line and Python callers stay allowed. Also the sweep
output folder's refusals and its atomic result files."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from hpctwin.experiments import sweep as sw
from hpctwin.twin.cli import main
from hpctwin.twin.inputs import CodeInFileError, code_in_config, scheduler_code
from hpctwin.twin.rerun import load_run_config
from hpctwin.twin.run import RunConfig, run

ROOT = Path(__file__).resolve().parents[1]
CLIENT = f"exec:{sys.executable} {ROOT / 'examples' / 'schedulers' / 'fcfs_client.py'}"
PLUGIN = "tests.plugin_sched:LargestFirst"
WL = "synthetic:jobs=60,nodes=8"
FIX = "; pass --allow-exec to run code named in a file"


def _run_folder(tmp_path: Path, name: str = "a") -> Path:
    out = tmp_path / name
    assert main(["run", "-w", WL, "--out", str(out), "-q"]) == 0
    return out


def _with_scheduler(folder: Path, scheduler: str) -> tuple[Path, int]:
    """config.toml of ``folder`` with its scheduler replaced; (path, line of the scheduler key)."""
    text = (folder / "config.toml").read_text()
    assert 'scheduler = "easy"' in text
    text = text.replace('scheduler = "easy"', f"scheduler = {json.dumps(scheduler)}")
    (folder / "config.toml").write_text(text)
    line = text.split("\n").index(f"scheduler = {json.dumps(scheduler)}") + 1
    return folder / "config.toml", line


# ------------------------------------------------------------------------------ the predicate
@pytest.mark.parametrize("name,what", [
    ("exec:./sched.sh", "would start a program"),
    ("mypkg.sched:Policy", "would import and run Python code (module 'mypkg.sched')"),
    ("easy", None), ("conservative", None), ("slurm", None), ("easy-pred", None), ("", None), (None, None),
])
def test_scheduler_code_predicate(name, what):
    assert scheduler_code(name) == what


# ------------------------------------------------------------------------------ hpctwin run --config
@pytest.mark.parametrize("scheduler,what", [
    ("exec:./sched.sh", "would start a program"),
    (PLUGIN, "would import and run Python code (module 'tests.plugin_sched')"),
])
def test_config_naming_code_is_refused_with_file_line_and_fix(tmp_path, capsys, scheduler, what):
    cfg_path, line = _with_scheduler(_run_folder(tmp_path), scheduler)
    capsys.readouterr()
    assert main(["run", "--config", str(cfg_path), "--out", str(tmp_path / "b"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err == f"hpctwin: error: {cfg_path}:{line}: [run] scheduler = {json.dumps(scheduler)} {what}{FIX}\n"
    assert not (tmp_path / "b").exists()
    with pytest.raises(CodeInFileError):                    # the Python loader refuses too, by default
        load_run_config(cfg_path)


def test_plugin_module_is_not_imported_before_the_refusal(tmp_path, capsys):
    mod = "hpctwin_trust_probe_mod"
    (tmp_path / f"{mod}.py").write_text("raise SystemExit('imported!')\n")
    cfg_path, _ = _with_scheduler(_run_folder(tmp_path), f"{mod}:Policy")
    sys.path.insert(0, str(tmp_path))
    try:
        assert main(["run", "--config", str(cfg_path), "--out", str(tmp_path / "b"), "-q"]) == 2
    finally:
        sys.path.remove(str(tmp_path))
    assert mod not in sys.modules
    assert "pass --allow-exec" in capsys.readouterr().err


@pytest.mark.parametrize("scheduler", [CLIENT, PLUGIN], ids=["exec-client", "module-class"])
def test_allow_exec_runs_the_named_code(tmp_path, scheduler):
    ref = tmp_path / "ref"
    assert main(["run", "-w", WL, "--scheduler", scheduler, "--out", str(ref), "-q"]) == 0   # typed: allowed
    cfg_path, _ = _with_scheduler(_run_folder(tmp_path), scheduler)
    out = tmp_path / "b"
    assert main(["run", "--config", str(cfg_path), "--allow-exec", "--out", str(out), "-q"]) == 0
    assert (out / "jobs.csv").read_bytes() == (ref / "jobs.csv").read_bytes()
    assert load_run_config(cfg_path, allow_exec=True).scheduler == scheduler


def test_scheduler_typed_on_the_command_line_needs_no_flag(tmp_path):
    a = _run_folder(tmp_path)
    b = tmp_path / "b"
    assert main(["run", "--config", str(a), "--scheduler", CLIENT, "--out", str(b), "-q"]) == 0
    assert f"scheduler = {json.dumps(CLIENT)}" in (b / "config.toml").read_text()
    # and a file's code name replaced on the command line by a built-in is not refused either
    cfg_path, _ = _with_scheduler(_run_folder(tmp_path, "c"), "exec:./nope.sh")
    assert main(["run", "--config", str(cfg_path), "--scheduler", "fcfs", "--out", str(tmp_path / "d"), "-q"]) == 0


def test_python_callers_are_trusted(tmp_path):
    res = run(RunConfig(workload=WL, scheduler=PLUGIN, out=str(tmp_path / "r")))
    assert res.summary["scheduler"] == "largest-first"


def _fmu_system(tmp_path: Path) -> Path:
    p = tmp_path / "fmusys.toml"
    p.write_text('[system]\nname = "f"\nnodes = 8\n[power]\nnode_idle_w = 100.0\n'
                 '[cooling]\nbackend = "fmu"\nfmu_path = "models/plant.fmu"\n')
    return p


def test_fmu_cooling_named_by_a_config_file_is_refused(tmp_path, capsys):
    system = _fmu_system(tmp_path)
    cfg_path = tmp_path / "config.toml"
    cfg_path.write_text(f'[run]\nworkload = "{WL}"\nsystem = "{system}"\npower = true\n')
    assert main(["run", "--config", str(cfg_path), "--out", str(tmp_path / "b"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err == (f"hpctwin: error: {cfg_path}:3: [run] system = \"{system}\" names an FMU cooling model "
                   f"({tmp_path / 'models' / 'plant.fmu'}) whose compiled code would run{FIX}\n")
    # without the power model (or with cooling off) the FMU is never loaded: nothing to refuse
    assert code_in_config(RunConfig(workload=WL, system=str(system))) == []
    assert code_in_config(RunConfig(workload=WL, system=str(system), power=True,
                                    options={"power": {"cooling": False}})) == []


# ------------------------------------------------------------------------------ hpctwin sweep FILE
BASE = f'[base]\nworkload = "{WL}"\n'


def _sweep(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("text,where", [
    (BASE + 'scheduler = "exec:./sched.sh"\n[grid]\nseed = [0, 1]\n',
     ':3: [base] scheduler = "exec:./sched.sh" would start a program'),
    (BASE + '[grid]\nseed = [0]\nscheduler = [\n  "easy",\n  "exec:./sched.sh",\n]\n',
     ':5: [grid] scheduler: list item "exec:./sched.sh" would start a program'),
    (BASE + '[grid]\nseed = [0]\n[[points]]\nscheduler = "fcfs"\n[[points]]\nscheduler = "exec:./sched.sh"\n',
     ':8: [[points]] #2 scheduler = "exec:./sched.sh" would start a program'),
    (BASE + f'[grid]\nscheduler = ["{PLUGIN}"]\n',
     f':4: [grid] scheduler: list item "{PLUGIN}" would import and run Python code (module \'tests.plugin_sched\')'),
])
def test_sweep_file_naming_code_is_refused_before_anything_runs(tmp_path, capsys, text, where):
    p = _sweep(tmp_path, text)
    with pytest.raises(sw.SweepError) as e:
        sw.load_sweep(p)
    assert str(e.value) == f"{p}{where}{FIX}"
    assert sw.main([str(p), "-q"]) == 2
    assert capsys.readouterr().err == f"hpctwin sweep: error: {p}{where}{FIX}\n"
    assert not (tmp_path / "s.out").exists()


def test_sweep_base_config_naming_code_is_located_in_that_config(tmp_path):
    cfg_path, line = _with_scheduler(_run_folder(tmp_path, "run"), "exec:./sched.sh")
    p = _sweep(tmp_path, '[base]\nconfig = "run/config.toml"\n[grid]\nseed = [1]\n')
    with pytest.raises(sw.SweepError) as e:
        sw.load_sweep(p)
    assert str(e.value) == f'{cfg_path}:{line}: [run] scheduler = "exec:./sched.sh" would start a program{FIX}'


def test_sweep_with_allow_exec_runs_the_plugin(tmp_path):
    p = _sweep(tmp_path, BASE + f'[grid]\nscheduler = ["easy", "{PLUGIN}"]\n')
    assert sw.main([str(p), "-q", "--allow-exec"]) == 0
    import pandas as pd
    df = pd.read_csv(tmp_path / "s.out" / "results.csv")
    assert df["status"].tolist() == ["ok", "ok"]
    assert df["scheduler_name"].tolist() == ["easy", "largest-first"]


# ------------------------------------------------------------------------------ the sweep output folder
SMALL = BASE + "nodes = 8\n[grid]\nseed = [0]\n"


def test_sweep_folder_refusals(tmp_path, monkeypatch, capsys):
    p = _sweep(tmp_path, SMALL)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    real = tmp_path / "real"
    real.mkdir()
    (real / "keep").write_text("k")
    os.symlink(real, tmp_path / "link")
    cases = {
        ".": f"sweep output folder {tmp_path}: is the working directory or one of its parents",
        "..": f"sweep output folder {tmp_path.parent}: is the working directory or one of its parents",
        "afile": f"--out {tmp_path / 'afile'}: exists and is not a folder",
        "link": f"--out {tmp_path / 'link'}: exists and is not a folder",
        "foreign": (f"sweep output folder {foreign}: exists and is not an hpctwin sweep folder (it holds notes.txt; "
                    "no .hpctwin-sweep marker); hpctwin never writes into it: choose another --out"),
    }
    for out, msg in cases.items():
        assert sw.main([str(p), "-q", "--out", out]) == 2, out
        err = capsys.readouterr().err
        assert err.startswith(f"hpctwin sweep: error: {msg}"), err
    assert sorted(q.name for q in foreign.iterdir()) == ["notes.txt"]
    assert sorted(q.name for q in real.iterdir()) == ["keep"]
    assert (tmp_path / "afile").read_text() == "x"


def test_sweep_folder_marker_resume_and_atomic_results(tmp_path, capsys):
    p = _sweep(tmp_path, SMALL)
    out = tmp_path / "s.out"
    assert sw.main([str(p), "-q"]) == 0
    assert json.loads((out / ".hpctwin-sweep").read_text()) == {"hpctwin_sweep": 1}
    names = sorted(q.name for q in out.iterdir())
    assert names == [".hpctwin-sweep", "plot_mean_bsld.png", "plot_mean_wait_s.png", "plot_utilisation.png",
                     "points", "results.csv", "results.md", "results.tex", "results_summary.csv"]
    first = (out / "results.csv").read_bytes()
    stale = out / ".results-tmp-999999999"                  # a killed sweep's temporary results
    stale.mkdir()
    (stale / "results.csv").write_text("half")
    assert sw.main([str(p), "-q"]) == 0                     # the marked folder is resumed
    assert not stale.exists()
    assert (out / "results.csv").read_bytes() == first
    # a folder written by a sweep before the marker existed (only sweep outputs) is accepted and marked
    (out / ".hpctwin-sweep").unlink()
    assert sw.main([str(p), "-q"]) == 0
    assert (out / ".hpctwin-sweep").is_file()
    # the same folder with a file hpctwin did not write, and no marker: refused
    (out / ".hpctwin-sweep").unlink()
    (out / "mine.txt").write_text("x")
    capsys.readouterr()
    assert sw.main([str(p), "-q"]) == 2
    assert "is not an hpctwin sweep folder" in capsys.readouterr().err
