"""Inputs are part of a result's identity (issue 23 item 6): the files a run reads and the code
identity are recorded in config.toml ([inputs], [run] code_identity), checked by
``hpctwin run --config`` (a changed or missing input is refused unless --allow-changed-inputs), and
part of a sweep point's hash, so a resumed sweep reruns exactly the points whose inputs changed."""
from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

import pytest

from hpctwin.experiments import sweep as sw
from hpctwin.twin import inputs
from hpctwin.twin.cli import main
from hpctwin.twin.rerun import ConfigFileError, config_dict_from_toml, load_run_config
from hpctwin.twin.run import RunConfig

DATA = Path(__file__).resolve().parent / "data"
JOB = "{i} {t} 0 {r} {n} -1 -1 {n} {q} -1 1 1 1 -1 1 -1 -1 -1\n"


def swf(path: Path, jobs: list[tuple[int, int, int]], procs: int = 8) -> Path:
    """A tiny SWF log: (submit s, runtime s, processors) per job, requested time = 2 x runtime."""
    text = f"; MaxProcs: {procs}\n" + "".join(JOB.format(i=i + 1, t=t, r=r, n=n, q=2 * r)
                                              for i, (t, r, n) in enumerate(jobs))
    path.write_text(text)
    return path


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


A_JOBS = [(0, 100, 4), (10, 50, 8), (20, 30, 2), (25, 40, 6)]


# ------------------------------------------------------------------------------ which files, which digests
def test_input_files_of_each_source(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    log = swf(tmp_path / "a.swf", A_JOBS)
    assert inputs.input_files(RunConfig(workload="synthetic:jobs=10")) == {}
    assert inputs.input_files(RunConfig(workload="llm-synthetic")) == {}
    assert inputs.input_files(RunConfig(workload="a.swf")) == {"workload": log}
    assert inputs.input_files(RunConfig(workload="swf:a.swf")) == {"workload": log}
    # a registry dataset, resolved in the data directory
    reg = tmp_path / "data" / "KTH-SP2" / "KTH-SP2-1996-2.1-cln.swf.gz"
    assert inputs.input_files(RunConfig(workload="KTH-SP2", data_dir=str(tmp_path / "data"))) == {"workload": reg}
    # the Alibaba GPU 2023 reader also reads the node list beside the pod list
    shutil.copy(DATA / "gpu_alibaba_pods.csv", tmp_path / "openb_pod_list_default.csv")
    shutil.copy(DATA / "gpu_alibaba_nodes.csv", tmp_path / "openb_node_list_all_node.csv")
    assert inputs.input_files(RunConfig(workload="openb_pod_list_default.csv")) == {
        "workload": tmp_path / "openb_pod_list_default.csv",
        "workload_nodes": tmp_path / "openb_node_list_all_node.csv"}
    # system files (not built-in names), slurm.conf, a serving trace, the cooling model's CSV
    (tmp_path / "sys.toml").write_text('[system]\nname = "s"\nnodes = 8\n[cooling]\nwet_bulb_csv = "wb.csv"\n')
    got = inputs.input_files(RunConfig(workload="synthetic", system="sys.toml", scheduler="slurm",
                                       options={"scheduler": {"slurm_conf": "slurm.conf"},
                                                "serving": {"trace": "t.jsonl"}}))
    assert {k: v for k, v in got.items() if not k.startswith("serving_profile")} == {
        "system": tmp_path / "sys.toml", "slurm_conf": tmp_path / "slurm.conf", "serving_trace": tmp_path / "t.jsonl"}
    assert inputs.input_files(RunConfig(workload="synthetic", system="sys.toml", power=True))["cooling_wet_bulb_csv"] \
        == tmp_path / "wb.csv"
    assert inputs.input_files(RunConfig(workload="synthetic", system="frontier")) == {}


def test_fingerprint_values_cache_and_folders(tmp_path):
    f = tmp_path / "x.bin"
    f.write_bytes(b"hello\n")
    assert inputs.fingerprint(f) == {"sha256": hashlib.sha256(b"hello\n").hexdigest(), "bytes": 6}
    f.write_bytes(b"hello, world\n")                     # a new size: never the cached digest
    assert inputs.fingerprint(f) == {"sha256": hashlib.sha256(b"hello, world\n").hexdigest(), "bytes": 13}
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "a.csv").write_bytes(b"1")
    (tmp_path / "d" / "sub" / "b.csv").write_bytes(b"22")
    want = hashlib.sha256(f"a.csv\0{hashlib.sha256(b'1').hexdigest()}\nsub/b.csv\0"
                          f"{hashlib.sha256(b'22').hexdigest()}\n".encode()).hexdigest()
    assert inputs.fingerprint(tmp_path / "d") == {"sha256": want, "bytes": 3}
    with pytest.raises(FileNotFoundError):
        inputs.fingerprint(tmp_path / "missing")


def test_code_identity_is_a_files_hash_and_cached():
    ident = inputs.code_identity()
    assert re.fullmatch(r"files-[0-9a-f]{16}", ident), ident
    assert inputs.code_identity() is ident
    assert re.fullmatch(r"files-[0-9a-f]{16}", inputs._files_identity(inputs._package_dirs()))


# ------------------------------------------------------------------------------ config.toml [inputs]
def test_config_toml_records_inputs_and_code_identity(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    log = swf(tmp_path / "a.swf", A_JOBS)
    assert main(["run", "-w", "a.swf", "--out", "r", "-q"]) == 0
    text = (tmp_path / "r" / "config.toml").read_text()
    run_part, _, inputs_part = text.partition("\n[inputs.workload]\n")
    assert inputs_part == f'path = "{log}"\nsha256 = "{sha(log)}"\nbytes = {log.stat().st_size}\n'
    lines = run_part.rstrip("\n").split("\n")
    assert lines[0] == "[run]" and lines[1] == 'workload = "a.swf"'
    i = lines.index('code_version = "0.1.0"')
    assert lines[i + 1] == f'code_identity = "{inputs.code_identity()}"' and lines[i + 2].startswith("python = ")
    kwargs, facts = config_dict_from_toml(tmp_path / "r")
    assert facts["inputs"] == {"workload": {"path": str(log), "sha256": sha(log), "bytes": log.stat().st_size}}
    assert facts["code_identity"] == inputs.code_identity() and kwargs["workload"] == "a.swf"
    # a synthetic run reads no file: no [inputs] table, the rest as before
    assert main(["run", "-w", "synthetic:jobs=20,nodes=8", "--out", "s", "-q"]) == 0
    assert "[inputs" not in (tmp_path / "s" / "config.toml").read_text()


def test_rerun_refuses_a_changed_input_unless_allowed(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    log = swf(tmp_path / "a.swf", A_JOBS)
    assert main(["run", "-w", "a.swf", "--out", "r", "-q"]) == 0
    old_sha, old_size = sha(log), log.stat().st_size
    assert main(["run", "--config", "r", "--out", "same", "-q"]) == 0      # unchanged: reproduced
    assert (tmp_path / "same" / "jobs.csv").read_bytes() == (tmp_path / "r" / "jobs.csv").read_bytes()
    swf(log, A_JOBS + [(30, 500, 8)])
    capsys.readouterr()
    assert main(["run", "--config", "r/config.toml", "--out", "b", "-q"]) == 2
    line = (tmp_path / "r" / "config.toml").read_text().split("\n").index("[inputs.workload]") + 1
    change = (f"input workload ({log}) changed since the run: recorded sha256 {old_sha[:12]} ({old_size:,} bytes), "
              f"now {sha(log)[:12]} ({log.stat().st_size:,} bytes)")
    assert capsys.readouterr().err == (f"hpctwin: error: r/config.toml:{line}: {change}; pass --allow-changed-inputs "
                                       "to run anyway (the rerun will not reproduce the recorded results)\n")
    assert not (tmp_path / "b").exists()
    assert main(["run", "--config", "r/config.toml", "--allow-changed-inputs", "--out", "b", "-q"]) == 0
    assert capsys.readouterr().err == (f"hpctwin: warning: r/config.toml:{line}: {change}: this rerun will not "
                                       "reproduce the recorded results\n")
    assert main(["run", "-w", "a.swf", "--out", "fresh", "-q"]) == 0
    assert (tmp_path / "b" / "jobs.csv").read_bytes() == (tmp_path / "fresh" / "jobs.csv").read_bytes()
    assert (tmp_path / "b" / "jobs.csv").read_bytes() != (tmp_path / "r" / "jobs.csv").read_bytes()
    # a workload given on the command line replaces the recorded one on purpose: not compared
    other = swf(tmp_path / "o.swf", [(0, 10, 1)])
    assert main(["run", "--config", "r", "-w", str(other), "--out", "c", "-q"]) == 0
    # a missing input is an error naming it, even with --allow-changed-inputs
    log.unlink()
    capsys.readouterr()
    assert main(["run", "--config", "r", "--allow-changed-inputs", "--out", "d", "-q"]) == 2
    assert capsys.readouterr().err == (f"hpctwin: error: r/config.toml:{line}: input workload: {log}: not found "
                                       f"(recorded sha256 {old_sha[:12]}, {old_size:,} bytes)\n")


def test_old_config_without_inputs_loads_and_warns_once(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    swf(tmp_path / "a.swf", A_JOBS)
    assert main(["run", "-w", "a.swf", "--out", "r", "-q"]) == 0
    text = (tmp_path / "r" / "config.toml").read_text()
    old = re.sub(r'code_identity = "[^"]*"\n', "", text.split("\n[inputs.workload]")[0]) + "\n"
    (tmp_path / "old.toml").write_text(old)                # as written before inputs were recorded
    monkeypatch.setattr("hpctwin.twin.rerun._warned_unchecked", False)
    capsys.readouterr()
    assert load_run_config("old.toml").workload == "a.swf"
    assert load_run_config("old.toml").workload == "a.swf"
    assert capsys.readouterr().err == ("hpctwin: warning: old.toml has no [inputs] table (written before hpctwin "
                                       "recorded its input files): the inputs cannot be checked against the "
                                       "recorded run\n")
    assert main(["run", "--config", "old.toml", "--out", "b", "-q"]) == 0
    assert (tmp_path / "b" / "jobs.csv").read_bytes() == (tmp_path / "r" / "jobs.csv").read_bytes()


@pytest.mark.parametrize("table,msg", [
    ('[inputs.workload]\npath = "x"\nsha256 = "abc"\nbytes = 1\n', r":3: \[inputs.workload\] sha256: expected 64 "),
    ('[inputs.workload]\npath = "x"\nsha256 = "' + "a" * 64 + '"\nbytes = -1\n', r":4: \[inputs.workload\] bytes"),
    ('[inputs.workload]\npath = "x"\nsha265 = "a"\nbytes = 1\n', r":3: \[inputs.workload\] sha265: unknown key "
                                                                 r"\(did you mean 'sha256'\?\)"),
    ('[inputs.workload]\npath = "x"\nbytes = 1\n', r":1: \[inputs.workload\] sha256: missing"),
])
def test_bad_inputs_table_is_located(tmp_path, table, msg):
    p = tmp_path / "c.toml"
    p.write_text(table + '[run]\nworkload = "synthetic"\n')
    with pytest.raises(ConfigFileError, match=re.escape(str(p)) + msg):
        config_dict_from_toml(p)


# ------------------------------------------------------------------------------ sweeps
def test_point_hash_includes_inputs_and_code_identity(tmp_path, monkeypatch):
    log = swf(tmp_path / "a.swf", A_JOBS)
    cfg = {k: v for k, v in RunConfig(workload=str(log)).__dict__.items() if k not in ("out", "quiet")}
    h = sw.config_hash(cfg)
    assert sw.config_hash(cfg) == h
    monkeypatch.setattr(inputs, "_CODE_IDENTITY", "0" * 40 + "-dirty-000000000000")
    assert sw.config_hash(cfg) != h                      # other code: another point
    monkeypatch.undo()
    swf(log, A_JOBS[:3])
    assert sw.config_hash(cfg) != h                      # same name, other content: another point


@pytest.mark.slow
def test_resumed_sweep_reruns_exactly_the_points_whose_input_changed(tmp_path, capsys):
    swf(tmp_path / "a.swf", A_JOBS)
    swf(tmp_path / "b.swf", [(0, 60, 2), (5, 80, 8), (6, 10, 4)])
    p = tmp_path / "s.toml"
    p.write_text('[base]\nnodes = 8\n[grid]\nworkload = ["a.swf", "b.swf"]\n')
    out = tmp_path / "s.out"
    assert sw.main([str(p), "--out", str(out), "-q"]) == 0
    pts = out / "points"
    before = {d.name: d.stat().st_mtime_ns for d in pts.iterdir()}
    first = sw.load_sweep(p, out)
    a_old, b_hash = first.points[0].hash, first.points[1].hash
    assert set(before) == {a_old, b_hash}
    swf(tmp_path / "a.swf", A_JOBS + [(40, 300, 8)])     # the same name, other jobs
    capsys.readouterr()
    assert sw.main([str(p), "--out", str(out)]) == 0
    assert "2 points, 1 already finished, 1 to run" in capsys.readouterr().err
    again = sw.load_sweep(p, out)
    assert again.points[1].hash == b_hash and again.points[0].hash != a_old
    assert (pts / b_hash).stat().st_mtime_ns == before[b_hash]          # reused, not rerun
    point = __import__("json").loads((pts / again.points[0].hash / "point.json").read_text())
    assert point["inputs"]["workload"]["sha256"] == sha(tmp_path / "a.swf")
    assert point["code_identity"] == inputs.code_identity()
    assert sw.main([str(p), "--out", str(tmp_path / "fresh"), "-q"]) == 0
    assert (out / "results.csv").read_bytes() == (tmp_path / "fresh" / "results.csv").read_bytes()


def test_a_point_whose_input_changes_after_planning_fails_instead_of_lying(tmp_path):
    log = swf(tmp_path / "a.swf", A_JOBS)
    s = sw.load_sweep(_write(tmp_path, f'[base]\nworkload = "{log}"\n[grid]\nseed = [0]\n'))
    pt = s.points[0]
    swf(log, A_JOBS[:2])
    res = sw.run_point(pt.config, str(tmp_path / "pt"), pt.inputs)
    assert res["ok"] is False and not (tmp_path / "pt").exists()
    assert res["error"] == (f"input workload ({log}) changed after the sweep computed its points (sha256 "
                            f"{pt.inputs['workload']['sha256'][:12]}, now {sha(log)[:12]}); run the sweep again")


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(text)
    return p
