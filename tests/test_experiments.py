"""Every experiment script runs on a tiny input and writes its tables through experiments.tables.

For each script in ``experiments/`` (except ``sweep.py`` and ``serving_*``, tested with their owners'
modules) ``main`` is called with small arguments into a temporary folder, then every table it writes
is checked: the CSV, Markdown and LaTeX files exist together, hold the same rows, the caption states the
conventions, and the tables follow the one table style (`tests.test_table_style.check_folder`: registered
labels, one format per column, booktabs LaTeX with the same cells).  No jinja2 (``DataFrame.to_latex``)
is needed anywhere.
"""
from __future__ import annotations

import importlib
from pathlib import Path

import pandas as pd
import pytest

from hpctwin.experiments.tables import COLUMNS, latex_escape, latex_table, markdown_table, write_table_files

from .test_table_style import check_folder, latex_tables, markdown_tables

DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets"
KTH = DATA / "KTH-SP2" / "KTH-SP2-1996-2.1-cln.swf.gz"
needs_kth = pytest.mark.skipif(not KTH.is_file(), reason="KTH-SP2 log not present")


# tiny_log (tests/conftest.py): the header and first 250 jobs of the real KTH-SP2 log


# ------------------------------------------------------------------------------- table checks
def check_latex(tex: str) -> tuple[list[str], int]:
    """Assert ``tex`` is one booktabs table (`tests.test_table_style.latex_tables`); return its header
    cells and number of body rows."""
    tabs = latex_tables(tex)
    assert len(tabs) == 1
    return tabs[0]["head"], len(tabs[0]["rows"])


def check_table(folder: Path, stem: str, must_say: list[str], columns: list[str]) -> pd.DataFrame:
    """The three files of table ``stem`` agree and follow the table style (`check_folder`); the caption
    says each of ``must_say``; the raw ``columns`` are shown under their registered labels."""
    csv, md, tex = (folder / f"{stem}.{e}" for e in ("csv", "md", "tex"))
    for f in (csv, md, tex):
        assert f.is_file(), f"{f.name} missing (have {sorted(p.name for p in folder.iterdir())})"
    assert stem in check_folder(folder)
    df = pd.read_csv(csv)
    (m,) = markdown_tables(md.read_text())
    for phrase in must_say:
        assert phrase in m["caption"], f"{stem}.md caption does not say {phrase!r}: {m['caption'][:300]}"
    assert len(m["rows"]) == len(df) > 0
    for c in columns:
        assert c in df.columns and COLUMNS[c].label in m["head"], f"{stem}: column {c!r} not in the table ({m['head']})"
    tex_caption = next(x for x in tex.read_text().split("\n") if x.startswith(r"\caption{"))
    assert latex_escape(must_say[0]) in tex_caption
    return df


WAIT = "wait = start - submit"


# ------------------------------------------------------------------------------- the writer
def test_writer_formats_hand_checked_table(tmp_path):
    df = pd.DataFrame({"policy": ["fcfs+none", "easy_bf"], "mean_wait_s": [12345.678, 0.5], "jobs": [10, 20]})
    paths = write_table_files(df, tmp_path, "Caption: 100 % of jobs; wait = start - submit.", label="tab:x")
    assert [p.name for p in paths] == ["results.csv", "results.md", "results.tex"]
    assert (tmp_path / "results.csv").read_text() == "policy,mean_wait_s,jobs\nfcfs+none,12345.678,10\neasy_bf,0.5,20\n"
    assert (tmp_path / "results.md").read_text() == (
        "Caption: 100 % of jobs; wait = start - submit.\n\n| Policy | Mean wait (s) | Jobs |\n|:---|---:|---:|\n"
        "| fcfs+none | 12,346 | 10 |\n| easy_bf | 0 | 20 |\n")
    tex = (tmp_path / "results.tex").read_text()
    assert r"\caption{Caption: 100 \% of jobs; wait = start - submit.}" in tex
    assert r"easy\_bf & 0 & 20 \\" in tex and r"\begin{tabular}{lrr}" in tex
    assert check_latex(tex) == (["Policy", "Mean wait (s)", "Jobs"], 2)


def test_writer_refuses_unknown_columns(tmp_path):
    with pytest.raises(ValueError, match=r"columns \['nope'\] are not in the table"):
        write_table_files(pd.DataFrame({"a": [1]}), tmp_path, "c", by=["nope"])


def test_latex_cells_escape_and_interval():
    agg = pd.DataFrame({"log": ["a&b"], "mean_bsld": [1.5], "mean_bsld_ci95": [0.75]})
    tex = latex_table(agg, ["log"], ["mean_bsld"], "x_y")
    assert r"a\&b & 1.50 [1.00, 2.25] \\" in tex                       # clipped at bsld >= 1
    assert check_latex(tex)[1] == 1
    assert "| a&b | 1.50 [1.00, 2.25] |" in markdown_table(agg, ["log"], ["mean_bsld"])


# ------------------------------------------------------------------------------- every script
def _main(module: str, argv: list[str]):
    return importlib.import_module(f"hpctwin.experiments.{module}").main(argv)


@needs_kth
def test_slurm_tuning_tiny(tmp_path, tiny_log):
    """Crashed after all its runs (DataFrame.to_latex needs jinja2)."""
    _main("slurm_tuning", ["-w", tiny_log, "--max-jobs", "100", "--out", str(tmp_path)])
    df = check_table(tmp_path, "results", ["Slurm-like", WAIT, "Jain"],
                     ["parameter", "value", "mean_wait_s", "mean_bsld", "user_wait_jain"])
    assert list(df.parameter.unique()) == ["baseline", "bf_interval", "bf_max_job_test", "bf_window",
                                           "PriorityDecayHalfLife"]
    assert len(df) == 1 + 16 and (tmp_path / "slurm_tuning.png").is_file()
    assert "wall_s" not in df.columns and "wall_s" in pd.read_csv(tmp_path / "timings.csv").columns


@needs_kth
def test_compare_schedulers_tiny(tmp_path, tiny_log):
    _main("compare_schedulers", ["-w", tiny_log, "--policies", "fcfs+none,fcfs+easy,sjf+conservative",
                                 "--out", str(tmp_path)])
    df = check_table(tmp_path, "results", ["Scheduling policies on", "tau = 10 s", "no warm-up"],
                     ["log", "policy", "mean_wait_s", "mean_bsld", "utilisation"])
    assert list(df.policy) == ["fcfs+none", "fcfs+easy", "sjf+conservative"]
    assert (df.mean_bsld >= 1).all()


@needs_kth
def test_ml_scheduling_tiny(tmp_path, tiny_log):
    _main("ml_scheduling", ["-w", tiny_log, "--out", str(tmp_path)])
    df = pd.read_csv(tmp_path / "results.csv")
    assert list(df.policy) == ["easy", "easy-pred", "easy++", "easy-exact"]
    md = (tmp_path / "results.md").read_text()
    assert WAIT in md and "One seed per cell" in md
    head, rows = check_latex((tmp_path / "results.tex").read_text())
    assert head[:2] == ["Log", "Policy"] and rows == 4
    ex = df[df.policy == "easy-exact"].iloc[0]
    assert ex.prediction_accuracy == pytest.approx(1.0) and ex.underestimate_rate == 0


def test_placement_whatif_tiny(tmp_path):
    _main("placement_whatif", ["-w", "synthetic:jobs=60,nodes=128,seed=1", "--system", "adastra",
                               "--out", str(tmp_path)])
    df = check_table(tmp_path, "results", ["Placement what-if", "EASY backfilling", WAIT],
                     ["machine", "placement", "mean_groups_spanned", "global_bytes"])
    assert list(df.placement) == ["first-fit", "contiguous", "group-packed", "spread"]
    assert (df.mean_groups_spanned >= 1).all()


def test_old_spellings_give_the_same_results(tmp_path, capsys):
    """--log/--systems/--jobs still work (one deprecation line each) and give the same bytes as -w/--system/--max-jobs."""
    wl = "synthetic:jobs=60,nodes=128,seed=1"
    _main("placement_whatif", ["--log", wl, "--systems", "adastra", "--jobs", "40", "--out", str(tmp_path / "old")])
    notes = [x for x in capsys.readouterr().err.splitlines() if "deprecated" in x]
    assert notes == [f"python -m hpctwin.experiments.placement_whatif: note: {o} is deprecated; use {n}"
                     for o, n in (("--log", "--workload/-w"), ("--systems", "--system"), ("--jobs", "--max-jobs"))]
    _main("placement_whatif", ["-w", wl, "--system", "adastra", "--max-jobs", "40", "--out", str(tmp_path / "new")])
    for f in ("results.csv", "results.md", "results.tex"):
        assert (tmp_path / "old" / f).read_bytes() == (tmp_path / "new" / f).read_bytes()
    assert "(jobs 1-40 in submit order)" in (tmp_path / "new" / "results.md").read_text()
    assert (pd.read_csv(tmp_path / "new" / "results.csv").jobs == 40).all()


def test_llm_placement_tiny(tmp_path):
    _main("llm_placement", ["--system", "dgx-h100", "--days", "0.3", "--mtbf-days", "20",
                            "--policies", "group-packed", "--regimes", "checkpoint_restart",
                            "--workers", "1", "--out", str(tmp_path)])
    df = check_table(tmp_path, "results", ["LLM placement", "wait = first start - submit", "goodput ="],
                     ["machine", "policy", "regime", "goodput"])
    assert set(df.regime) == {"none", "checkpoint_restart"}
    assert ((df.goodput > 0) & (df.goodput <= 1)).all()


def test_incentives_whatif_tiny(tmp_path):
    _main("incentives_whatif", ["-w", "synthetic:jobs=120,nodes=16,seed=2", "--nodes", "16", "--no-cooling",
                                "--no-yang", "--out", str(tmp_path)])
    md = (tmp_path / "results.md").read_text()
    assert "power model on" in md and "bsld = max(1" in md
    head, rows = check_latex((tmp_path / "results.tex").read_text())
    assert head[:2] == ["Charging rule", "User response"] and rows == len(pd.read_csv(tmp_path / "results_summary.csv"))


def test_power_cap_whatif_tiny(tmp_path):
    _main("power_cap_whatif", ["-w", "synthetic:jobs=80,nodes=32,seed=4", "--nodes", "32", "--out", str(tmp_path)])
    df = check_table(tmp_path, "results", ["EASY", WAIT, "facility"], ["mode", "cap_w", "peak_facility_w"])
    assert df["mode"].iloc[0] == "none"


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "SURF-OpenDT").is_dir(), reason="SURF-OpenDT data not present")
def test_validate_power_tiny(tmp_path):
    _main("validate_power", ["--out", str(tmp_path), "--calib-days", "0.25", "--max-days", "0.5"])
    df = check_table(tmp_path, "validation", ["SURF", "first 0.5 days", "MAPE ="],
                     ["w_host_idle_w", "w_core_dynamic_w", "mape_prediction_pct"])
    assert df.samples_prediction.iloc[0] == 720          # 0.25 day of 30 s samples
    assert df.w_host_idle_w.iloc[0] > 0 and df.w_core_dynamic_w.iloc[0] > 0


@pytest.mark.skipif(not (DATA / "Alibaba-GPU-2023-openb").is_dir(), reason="Alibaba GPU 2023 data not present")
def test_gpu_fragmentation_tiny(tmp_path):
    _main("gpu_fragmentation", ["--mode", "replay", "--horizon-days", "0.05", "--warmup", "600",
                                "--node-fraction", "0.02", "--policies", "best-fit", "fgd", "--out", str(tmp_path)])
    df = check_table(tmp_path, "results", ["GPU packing policies", "allocation success ="],
                     ["policy", "alloc_success", "gpu_alloc_ratio"])
    assert list(df.policy) == ["best-fit", "fgd"]
    assert ((df.alloc_success >= 0) & (df.alloc_success <= 1)).all()


def test_bine_traffic_tiny(tmp_path):
    files = {"run1/jobs.csv": 'job,nodes\n1,0-7\n2,"0,2,4,6"\n',          # a twin run's allocations
             "groups.txt": "".join(f"{n} {n // 4}\n" for n in range(8))}   # 2 groups of 4 nodes
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    out = tmp_path / "out"
    argv = ["--out", str(out), "--jobs-csv", str(tmp_path / "run1/jobs.csv"), "--group-map", str(tmp_path / "groups.txt")]
    assert _main("bine_traffic", argv + ["--max-p", "8", "--no-linkload"]) == 0
    df = check_table(out, "results", ["reduction = 100 (classic - Bine)"],
                     ["system", "collective", "bucket", "median_reduction_pct"])
    assert set(df.system) == {"run1"}
    ab = check_table(out, "alpha_beta", ["Alpha-beta-gamma time per collective algorithm"], ["collective", "algorithm", "p", "time_s"])
    assert set(ab.p) == {2, 4, 8} and (ab.time_s > 0).all()


def test_every_script_is_tested():
    """A new experiment script must get a tiny-input test here (or be owned elsewhere)."""
    here = Path(__file__).read_text()
    scripts = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "experiments").glob("*.py"))
    # megatron_calibration, llm_training_placement, llm_offload, llm_recovery: other owners' (tests/test_training_*.py)
    skip = {"__init__", "tables", "cli", "sweep", "megatron_calibration", "llm_training_placement", "llm_offload",
               "llm_recovery"}
    for s in scripts:
        if s in skip or s.startswith("serving_"):
            continue
        assert f'_main("{s}"' in here, f"experiments/{s}.py has no tiny-input test in tests/test_experiments.py"


def test_no_script_uses_to_latex():
    for p in (Path(__file__).resolve().parents[1] / "experiments").glob("*.py"):
        assert ".to_latex(" not in p.read_text(), f"{p.name} calls DataFrame.to_latex (needs jinja2)"


def test_rlscheduler_table_tiny(tmp_path):
    """One column (Lublin-1, about 1 s); the whole table is tests/test_rlscheduler_compat.py -m slow."""
    from hpctwin.datasets.registry import DatasetError, resolve
    try:
        resolve("Lublin-256")
    except DatasetError as e:
        pytest.skip(str(e))
    assert _main("rlscheduler_table", ["--out", str(tmp_path), "-w", "Lublin-1"]) == 0
    df = check_table(tmp_path, "cells", ["--compat rlscheduler", "tau 10 s"], ["trace", "heuristic", "replay"])
    assert len(df) == 10 and (df.replay == df.harness).all()
    wide = check_table(tmp_path, "table", ["head committed"], ["heuristic", "Lublin-1 no bf", "Lublin-1 bf"])
    assert list(wide.heuristic) == ["FCFS", "WFP3", "UNICEP", "SJF", "F1"]
