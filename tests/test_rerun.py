"""``hpctwin run --config RUN/config.toml`` reproduces the run: same jobs.csv bytes."""
from __future__ import annotations

import pytest

from hpctwin.twin.cli import main
from hpctwin.twin.rerun import ConfigFileError, config_dict_from_toml

CASES = [
    ["--workload", "synthetic:jobs=300,nodes=32", "--order", "sjf", "--backfill", "conservative"],
    ["--workload", "synthetic:jobs=200,nodes=64", "--scheduler", "fcfs", "--seed", "3", "--estimate", "exact"],
    ["--workload", "synthetic:jobs=200", "--failures", "on", "--set", "failures.node_mtbf_days=30"],
    ["--workload", "synthetic:jobs=150", "--system", "frontier", "--nodes", "64", "--power", "on"],
]


@pytest.mark.parametrize("args", CASES, ids=["sjf-cons", "fcfs-exact", "failures", "power"])
def test_rerun_from_config_is_byte_identical(tmp_path, args):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["run", *args, "--out", str(a), "--quiet"]) == 0
    assert main(["run", "--config", str(a / "config.toml"), "--out", str(b), "--quiet"]) == 0
    assert (a / "jobs.csv").read_bytes() == (b / "jobs.csv").read_bytes()
    assert (a / "config.toml").read_text() == (b / "config.toml").read_text()


def test_rerun_accepts_the_folder_and_explicit_overrides(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["run", "--workload", "synthetic:jobs=100,nodes=16", "--out", str(a), "--quiet"]) == 0
    assert main(["run", "--config", str(a), "--scheduler", "fcfs", "--out", str(b), "--quiet"]) == 0
    kwargs, facts = config_dict_from_toml(b)
    assert kwargs["scheduler"] == "fcfs" and kwargs["workload"] == "synthetic:jobs=100,nodes=16"
    assert facts["machine_units"] == 16


def test_unknown_key_in_config_is_located_with_suggestion(tmp_path, capsys):
    a = tmp_path / "a"
    assert main(["run", "--workload", "synthetic:jobs=50,nodes=8", "--out", str(a), "--quiet"]) == 0
    text = (a / "config.toml").read_text().replace("scheduler = ", "schedular = ")
    (tmp_path / "bad.toml").write_text(text)
    with pytest.raises(ConfigFileError, match=r"bad.toml: \[run\] schedular: unknown key \(did you mean 'scheduler'\?\)"):
        config_dict_from_toml(tmp_path / "bad.toml")
    assert main(["run", "--config", str(tmp_path / "bad.toml"), "--out", str(tmp_path / "c"), "--quiet"]) == 2
    assert "did you mean 'scheduler'" in capsys.readouterr().err


@pytest.mark.parametrize("line, message", [
    ('sample_dt = "x"', "expected a number, got 'x'"),
    ("sample_dt = 0.0", "0.0 must be > 0"),
    ("seed = -1", "-1 must be >= 0"),
    ('power = "yes"', "power"),
])
def test_a_wrong_value_in_a_config_file_names_its_line_not_a_flag(tmp_path, capsys, line, message):
    p = tmp_path / "c.toml"
    p.write_text(f'[run]\nworkload = "synthetic:jobs=50,nodes=8"\n{line}\n')
    assert main(["run", "--config", str(p), "--out", str(tmp_path / "r"), "--quiet"]) == 2
    err = capsys.readouterr().err
    key = line.split(" ")[0]
    assert f"{p}:3: [run] {key}: " in err and message in err and "--" not in err.split("[run]")[1], err
