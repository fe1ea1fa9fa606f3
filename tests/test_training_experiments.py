"""The training what-if experiments on tiny inputs: llm_training_placement, llm_offload, llm_recovery.

Each writes results.csv/.md/.tex and a PNG through the output contract, with registered columns
(`tables.STRICT` on), deterministic for a seed, and refuses bad options with one line (exit 2)."""
from __future__ import annotations

import importlib

import pandas as pd
import pytest
from hpctwin.experiments import tables

try:                                       # the table-style checker of tests/test_table_style.py
    from tests.test_table_style import check_folder
except ImportError:                        # pragma: no cover - that module is someone else's
    check_folder = None


@pytest.fixture(autouse=True)
def strict_columns(monkeypatch):
    monkeypatch.setattr(tables, "STRICT", True)


def _run(module: str, argv: list[str]) -> int:
    return importlib.import_module(f"hpctwin.experiments.{module}").main(argv)


def _common_checks(out, png: str) -> pd.DataFrame:
    for name in ("results.csv", "results.md", "results.tex", png):
        assert (out / name).is_file(), name
    for name in ("results.md", "results.tex"):
        text = (out / name).read_text()
        assert "/tmp" not in text and str(out) not in text
        assert "nan" not in text.replace("Nan", "")
    if check_folder is not None:
        check_folder(out)
    return pd.read_csv(out / "results.csv")


PLACEMENT = ["--system", "dgx-h100", "--model", "llama3-8b", "--gpus", "32", "--tp", "8", "--pp", "2",
             "--sequences", "16", "--policies", "first-fit,group-packed,spread", "--background", "0,0.5",
             "--busy", "0.3"]


def test_placement_tiny(tmp_path):
    out = tmp_path / "out"
    assert _run("llm_training_placement", PLACEMENT + ["--out", str(out)]) == 0
    df = _common_checks(out, "iteration_slowdown.png")
    assert len(df) == 1 * 2 * 3
    assert set(df["policy"]) == {"first-fit", "group-packed", "spread"} and set(df["background_share"]) == {0.0, 0.5}
    # a job inside one scalable unit sends nothing over the up-links; spread nodes do
    one = df[df["groups_spanned"] == 1]
    assert len(one) and (one["global_bytes"] == 0).all()
    spread = df[df["policy"] == "spread"]
    assert (spread["groups_spanned"] > 1).all() and (spread["global_bytes"] > 0).all()
    assert (df["iteration_slowdown"] >= 1.0 - 1e-12).all() and (df["nodes"] == 4).all()
    # deterministic for a seed
    out2 = tmp_path / "out2"
    assert _run("llm_training_placement", PLACEMENT + ["--out", str(out2)]) == 0
    assert (out / "results.csv").read_bytes() == (out2 / "results.csv").read_bytes()


def test_placement_on_frontier_pays_for_spanning_groups_under_load(tmp_path):
    """Frontier's Dragonfly: a job spread over groups slows down when other jobs load the global
    links; the same job kept in one group does not."""
    out = tmp_path / "out"
    argv = ["--system", "frontier", "--model", "llama3-8b", "--gpus", "64", "--tp", "8", "--pp", "2",
            "--sequences", "16", "--policies", "group-packed,spread", "--background", "0,0.9", "--out", str(out)]
    assert _run("llm_training_placement", argv) == 0
    df = pd.read_csv(out / "results.csv").set_index(["policy", "background_share"])
    assert df.loc[("group-packed", 0.9), "groups_spanned"] == 1
    assert df.loc[("group-packed", 0.9), "iteration_s"] == pytest.approx(df.loc[("group-packed", 0.0), "iteration_s"])
    assert df.loc[("spread", 0.9), "iteration_s"] > 1.05 * df.loc[("spread", 0.0), "iteration_s"]


@pytest.mark.parametrize("extra,msg", [
    (["--busy", "1.2"], "--busy 1.2: expected a share in [0, 1)"),
    (["--background", "0,1.5"], "expected comma-separated shares in [0, 1)"),
    (["--policies", "random"], "--policies: unknown random"),
    (["--system", "summit"], "--system: unknown machine summit"),
])
def test_placement_bad_options(tmp_path, capsys, extra, msg):
    with pytest.raises(SystemExit) as e:
        _run("llm_training_placement", PLACEMENT + extra + ["--out", str(tmp_path / "o")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert msg in err and not (tmp_path / "o").exists()


def test_placement_too_busy_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        _run("llm_training_placement", PLACEMENT + ["--busy", "0.99", "--out", str(tmp_path / "o")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "machine dgx-h100: 1 nodes are free with --busy 0.99, the job needs 4; lower --busy" in err
    assert err.count("\n") == 1 and not (tmp_path / "o").exists()


def test_offload_tiny(tmp_path):
    out = tmp_path / "out"
    assert _run("llm_offload", ["--case", "frontier:llama3-70b:8:4096:16", "--out", str(out)]) == 0
    df = _common_checks(out, "offload_iteration.png")
    assert len(df) == 2 * 8
    alone = df[df["pfs_load"] == "alone"].set_index("offload")
    busy = df[df["pfs_load"] == "busy"].set_index("offload")
    assert not alone.loc["none", "fits"] and not alone.loc["cpu", "fits"]      # 1.1 TB of state, 410 GB of DRAM
    assert alone.loc["nvme", "fits"] and alone.loc["nvme", "speedup_vs_nvme"] == 1.0
    # MLP-Offload's qualitative result: several paths at once beat ZeRO-Infinity's one NVMe path
    assert alone.loc["cpu+nvme+pfs", "speedup_vs_nvme"] > 2.5
    assert 1.2 < busy.loc["cpu+nvme+pfs", "speedup_vs_nvme"] < alone.loc["cpu+nvme+pfs", "speedup_vs_nvme"]
    assert busy.loc["pfs", "iteration_s"] > 10 * alone.loc["pfs", "iteration_s"]
    assert alone.loc["cpu+nvme+pfs", "host_bytes"] == pytest.approx(0.8 * 512e9)


def test_offload_bad_case(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        _run("llm_offload", ["--case", "frontier:llama3-70b:eight:4096:16", "--out", str(tmp_path / "o")])
    assert e.value.code == 2
    assert "--case 'frontier:llama3-70b:eight:4096:16': GPUS = 'eight' is not a whole number" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _run("llm_offload", ["--case", "summit:llama3-70b:8:4096:16", "--out", str(tmp_path / "o")])
    assert "--case: unknown system 'summit'" in capsys.readouterr().err


@pytest.mark.slow
def test_recovery_tiny(tmp_path):
    out = tmp_path / "out"
    argv = ["--gpus", "256,2048", "--trials", "5", "--seed", "3"]
    assert _run("llm_recovery", argv + ["--out", str(out)]) == 0
    df = _common_checks(out, "goodput.png")
    assert len(df) == 2 * 3
    g = df.set_index(["gpus", "regime"])
    for n in (256, 2048):
        assert g.loc[(n, "fast_recovery"), "goodput"] > g.loc[(n, "checkpoint_restart"), "goodput"] \
            > g.loc[(n, "checkpoint_restart_shared"), "goodput"]
        assert g.loc[(n, "fast_recovery"), "restart_s"] == 150.0
    assert g.loc[(2048, "checkpoint_restart"), "restart_s"] > g.loc[(256, "checkpoint_restart"), "restart_s"]
    assert g.loc[(256, "checkpoint_restart_shared"), "checkpoint_s"] > g.loc[(256, "checkpoint_restart"), "checkpoint_s"]
    out2 = tmp_path / "out2"
    assert _run("llm_recovery", argv + ["--out", str(out2)]) == 0
    assert (out / "results.csv").read_bytes() == (out2 / "results.csv").read_bytes()


def test_recovery_bad_options(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        _run("llm_recovery", ["--gpus", "256", "--source", "meta", "--trials", "2", "--out", str(tmp_path / "o")])
    assert e.value.code == 2
    assert "--source: unknown failure source 'meta'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _run("llm_recovery", ["--gpus", "100", "--trials", "2", "--out", str(tmp_path / "o")])
    assert "--gpus 100: not a multiple of tp x pp = 128" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _run("llm_recovery", ["--trials", "1", "--out", str(tmp_path / "o")])
    assert "--trials 1: expected at least 2" in capsys.readouterr().err
