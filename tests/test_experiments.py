"""Every experiment script runs on a tiny input and writes its tables through experiments.tables.

For each script in ``experiments/`` (except ``sweep.py`` and ``serving_*``, tested with their owners'
modules) ``main`` is called with small arguments into a temporary folder, then every table it writes
is checked: the CSV, Markdown and LaTeX files exist together, hold the same columns and rows, the
caption states the conventions, and the LaTeX is a well-formed booktabs table (one rule of each
kind, as many cells per row as the column specification, balanced braces, special characters
escaped).  No jinja2 (``DataFrame.to_latex``) is needed anywhere.
"""
from __future__ import annotations

import gzip
import importlib
import re
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from hpctwin.experiments.tables import BOOKTABS_NOTE, latex_table, markdown_table, write_table_files

DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets"
KTH = DATA / "KTH-SP2" / "KTH-SP2-1996-2.1-cln.swf.gz"
needs_kth = pytest.mark.skipif(not KTH.is_file(), reason="KTH-SP2 log not present")


@pytest.fixture(scope="module")
def tiny_log(tmp_path_factory) -> str:
    """The header and first 250 jobs of the real KTH-SP2 log (100 processors, real users), as a file."""
    out = tmp_path_factory.mktemp("log") / "kth-head.swf"
    lines, jobs = [], 0
    with gzip.open(KTH, "rt") as fh:
        for line in fh:
            if not line.startswith(";"):
                jobs += 1
                if jobs > 250:
                    break
            lines.append(line)
    out.write_text("".join(lines))
    return str(out)


# ------------------------------------------------------------------------------- table checks
def _cells(line: str) -> list[str]:
    """Cells of one LaTeX row (``a & b \\\\``), splitting on unescaped ``&``."""
    body = line.rstrip()
    assert body.endswith(r"\\"), f"row does not end with \\\\: {line!r}"
    return re.split(r"(?<!\\)&", body[:-2])


def check_latex(tex: str) -> tuple[list[str], int]:
    """Assert ``tex`` is one booktabs table; return its header cells and number of body rows."""
    lines = tex.rstrip("\n").split("\n")
    assert lines[0] == BOOKTABS_NOTE
    assert lines[1].startswith(r"\begin{table}") and lines[-1] == r"\end{table}"
    cap = [i for i, x in enumerate(lines) if x.startswith(r"\caption{")]
    tab = [i for i, x in enumerate(lines) if x.startswith(r"\begin{tabular}{")]
    assert len(cap) == 1 and len(tab) == 1 and cap[0] < tab[0], "one caption, above the tabular"
    spec = re.fullmatch(r"\\begin\{tabular\}\{([lrc]+)\}", lines[tab[0]]).group(1)
    top, mid, bot = (lines.index(r) for r in (r"\toprule", r"\midrule", r"\bottomrule"))
    assert tab[0] + 1 == top < mid < bot and lines[bot + 1] == r"\end{tabular}"
    for rule in (r"\toprule", r"\midrule", r"\bottomrule", r"\hline"):
        assert sum(x == rule for x in lines) == (0 if rule == r"\hline" else 1)
    header = _cells(lines[top + 1])
    assert mid == top + 2, "one header row"
    rows = lines[mid + 1:bot]
    for r in [lines[top + 1], *rows]:
        assert len(_cells(r)) == len(spec), f"{len(_cells(r))} cells for {len(spec)} columns: {r!r}"
    for x in lines[1:]:
        unesc = re.sub(r"\\.", "", x)                      # drop escaped characters (\_ \% \{ ...)
        assert unesc.count("{") == unesc.count("}"), f"unbalanced braces: {x!r}"
        plain = x.replace(r"$\pm$", "")
        assert not re.search(r"(?<!\\)[_%#]", plain), f"unescaped special character: {x!r}"
        assert "$" not in re.sub(r"\\\$", "", plain), f"unescaped $: {x!r}"
    return [h.strip() for h in header], len(rows)


def check_table(folder: Path, stem: str, must_say: list[str], columns: list[str]) -> pd.DataFrame:
    """The three files of table ``stem`` agree; the caption says each of ``must_say``; ``columns`` shown."""
    csv, md, tex = (folder / f"{stem}.{e}" for e in ("csv", "md", "tex"))
    for f in (csv, md, tex):
        assert f.is_file(), f"{f.name} missing (have {sorted(p.name for p in folder.iterdir())})"
    df = pd.read_csv(csv)
    md_lines = md.read_text().rstrip("\n").split("\n")
    caption = md_lines[0]
    for phrase in must_say:
        assert phrase in caption, f"{stem}.md caption does not say {phrase!r}: {caption[:300]}"
    head_i = next(i for i, x in enumerate(md_lines) if x.startswith("| "))
    md_head = [c.strip() for c in md_lines[head_i].strip("|").split("|")]
    assert md_lines[head_i + 1] == "|" + "---|" * len(md_head)
    n_md_rows = len(md_lines) - head_i - 2
    tex_head, n_tex_rows = check_latex(tex.read_text())
    assert [h.replace(r"\_", "_") for h in tex_head] == md_head
    assert n_md_rows == n_tex_rows == len(df) > 0
    assert set(md_head) <= set(df.columns)
    for c in columns:
        assert c in md_head, f"{stem}: column {c!r} not in the table ({md_head})"
    tex_caption = next(x for x in tex.read_text().split("\n") if x.startswith(r"\caption{"))
    assert must_say[0].replace("_", r"\_") in tex_caption
    return df


WAIT = "wait = start - submit"


# ------------------------------------------------------------------------------- the writer
def test_writer_formats_hand_checked_table(tmp_path):
    df = pd.DataFrame({"policy": ["fcfs+none", "easy_bf"], "mean_wait_s": [12345.678, 0.5], "jobs": [10, 20]})
    paths = write_table_files(df, tmp_path, "Caption: 100 % of jobs; wait = start - submit.", label="tab:x")
    assert [p.name for p in paths] == ["results.csv", "results.md", "results.tex"]
    assert (tmp_path / "results.csv").read_text() == "policy,mean_wait_s,jobs\nfcfs+none,12345.678,10\neasy_bf,0.5,20\n"
    assert (tmp_path / "results.md").read_text() == (
        "Caption: 100 % of jobs; wait = start - submit.\n\n| policy | mean_wait_s | jobs |\n|---|---|---|\n"
        "| fcfs+none | 12,346 | 10 |\n| easy_bf | 0.5 | 20 |\n")
    tex = (tmp_path / "results.tex").read_text()
    assert r"\caption{Caption: 100 \% of jobs; wait = start - submit.}" in tex
    assert r"easy\_bf & 0.5 & 20 \\" in tex and r"\begin{tabular}{lrr}" in tex
    assert check_latex(tex) == (["policy", r"mean\_wait\_s", "jobs"], 2)


def test_writer_refuses_unknown_columns(tmp_path):
    with pytest.raises(ValueError, match=r"columns \['nope'\] are not in the table"):
        write_table_files(pd.DataFrame({"a": [1]}), tmp_path, "c", by=["nope"])


def test_latex_cells_escape_and_pm():
    agg = pd.DataFrame({"log": ["a&b"], "m": [1.0], "m_ci95": [0.25]})
    tex = latex_table(agg, ["log"], ["m"], "x_y")
    assert r"a\&b & 1 $\pm$ 0.25 \\" in tex
    assert check_latex(tex)[1] == 1
    assert "| a&b | 1 ± 0.25 |" in markdown_table(agg, ["log"], ["m"])


# ------------------------------------------------------------------------------- every script
def _main(module: str, argv: list[str]):
    return importlib.import_module(f"hpctwin.experiments.{module}").main(argv)


@needs_kth
def test_slurm_tuning_tiny(tmp_path, tiny_log):
    """Crashed after all its runs (DataFrame.to_latex needs jinja2)."""
    _main("slurm_tuning", ["--log", tiny_log, "--max-jobs", "100", "--out", str(tmp_path)])
    df = check_table(tmp_path, "results", ["Slurm-like", WAIT, "Jain"],
                     ["parameter", "value", "mean_wait_s", "mean_bsld", "user_wait_jain"])
    assert list(df.parameter.unique()) == ["baseline", "bf_interval", "bf_max_job_test", "bf_window",
                                           "PriorityDecayHalfLife"]
    assert len(df) == 1 + 16 and (tmp_path / "slurm_tuning.png").is_file()
    assert "wall_s" not in df.columns and "wall_s" in pd.read_csv(tmp_path / "timings.csv").columns


@needs_kth
def test_compare_schedulers_tiny(tmp_path, tiny_log):
    _main("compare_schedulers", ["--logs", tiny_log, "--policies", "fcfs+none,fcfs+easy,sjf+conservative",
                                 "--out", str(tmp_path)])
    df = check_table(tmp_path, "results", ["Scheduling policies on", "tau = 10 s", "no warm-up"],
                     ["log", "policy", "mean_wait_s", "mean_bsld", "utilisation"])
    assert list(df.policy) == ["fcfs+none", "fcfs+easy", "sjf+conservative"]
    assert (df.mean_bsld >= 1).all()


@needs_kth
def test_ml_scheduling_tiny(tmp_path, tiny_log):
    _main("ml_scheduling", ["--logs", tiny_log, "--out", str(tmp_path)])
    df = pd.read_csv(tmp_path / "results.csv")
    assert list(df.policy) == ["easy", "easy-pred", "easy++", "easy-exact"]
    md = (tmp_path / "results.md").read_text()
    assert WAIT in md and "One seed per cell" in md
    head, rows = check_latex((tmp_path / "results.tex").read_text())
    assert head[:2] == ["log", "policy"] and rows == 4
    ex = df[df.policy == "easy-exact"].iloc[0]
    assert ex.prediction_accuracy == pytest.approx(1.0) and ex.underestimate_rate == 0


def test_placement_whatif_tiny(tmp_path):
    _main("placement_whatif", ["--log", "synthetic:jobs=60,nodes=128,seed=1", "--systems", "adastra",
                               "--out", str(tmp_path)])
    df = check_table(tmp_path, "results", ["Placement what-if", "EASY backfilling", WAIT],
                     ["machine", "placement", "mean_groups_spanned", "global_bytes"])
    assert list(df.placement) == ["first-fit", "contiguous", "group-packed", "spread"]
    assert (df.mean_groups_spanned >= 1).all()


def test_llm_placement_tiny(tmp_path):
    _main("llm_placement", ["--systems", "dgx-h100", "--days", "0.3", "--mtbf-days", "20",
                            "--policies", "group-packed", "--regimes", "checkpoint_restart",
                            "--workers", "1", "--out", str(tmp_path)])
    df = check_table(tmp_path, "results", ["LLM placement", "wait = first start - submit", "goodput ="],
                     ["machine", "policy", "regime", "goodput"])
    assert set(df.regime) == {"none", "checkpoint_restart"}
    assert ((df.goodput > 0) & (df.goodput <= 1)).all()


def test_incentives_whatif_tiny(tmp_path):
    _main("incentives_whatif", ["--log", "synthetic:jobs=120,nodes=16,seed=2", "--nodes", "16", "--no-cooling",
                                "--no-yang", "--out", str(tmp_path)])
    md = (tmp_path / "results.md").read_text()
    assert "power model on" in md and "bsld = max(1" in md
    head, rows = check_latex((tmp_path / "results.tex").read_text())
    assert head[:2] == ["rule", "response"] and rows == len(pd.read_csv(tmp_path / "results_summary.csv"))


def test_power_cap_whatif_tiny(tmp_path):
    _main("power_cap_whatif", ["--log", "synthetic:jobs=80,nodes=32,seed=4", "--nodes", "32", "--out", str(tmp_path)])
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
    df = check_table(tmp_path, "results", ["GPU packing policies", "alloc_success ="],
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
    ab = check_table(out, "alpha_beta", ["Alpha-beta-gamma time (s)"], ["collective", "algorithm", "p", "time_s"])
    assert set(ab.p) == {2, 4, 8} and (ab.time_s > 0).all()


def test_every_script_is_tested():
    """A new experiment script must get a tiny-input test here (or be owned elsewhere)."""
    here = Path(__file__).read_text()
    scripts = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "experiments").glob("*.py"))
    skip = {"__init__", "tables", "sweep", "megatron_calibration"}   # the last: tests/test_training_calibration.py
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
    assert _main("rlscheduler_table", ["--out", str(tmp_path), "--traces", "Lublin-1"]) == 0
    df = check_table(tmp_path, "cells", ["--compat rlscheduler", "tau 10 s"], ["trace", "heuristic", "replay"])
    assert len(df) == 10 and (df.replay == df.harness).all()
    wide = check_table(tmp_path, "table", ["head committed"], ["heuristic", "Lublin-1 no bf", "Lublin-1 bf"])
    assert list(wide.heuristic) == ["FCFS", "WFP3", "UNICEP", "SJF", "F1"]
