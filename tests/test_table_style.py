"""Every experiment's tables follow the one table style and paste into a paper unedited.

Each experiment script runs on its tiny configuration (the ones of tests/test_experiments.py where they
exist; those over 10 s are marked slow) with `tables.STRICT` on, so a column without a registered label
is an error; then every ``.md`` and ``.tex`` file it wrote is checked:

* headers are registered labels (human names with units), never a raw key or a run-time column;
* one number format per column: the registered decimals in every row, thousands separators on every
  value >= 1,000 or on none; numbers inside the metric's range; an interval ``mean [lo, hi]`` never
  below the metric's floor (a bounded slowdown >= 1);
* no ``nan``/``None``/``inf``/``n/a`` cell (a dash, explained in the caption); no absolute path;
* the LaTeX file is ASCII, one booktabs table per Markdown table with the same cells (escaped), balanced
  braces, no unescaped special character; ``pdflatex`` compiles all of them when it is installed (slow).

The option vocabulary (``docs/experiments.md``): every option of every script has help text and shows its
default; the old spellings are hidden aliases that print one deprecation line.
"""
from __future__ import annotations

import importlib
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from hpctwin.experiments import cli, tables
from hpctwin.experiments.tables import (BOOKTABS_NOTE, COLUMNS, MISSING_MD, MISSING_TEX, RESIZE_NOTE, RESIZE_OPEN,
                                        Column,
                                        latex_escape, latex_table, markdown_table, write_tables)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "datasets"
KTH = DATA / "KTH-SP2" / "KTH-SP2-1996-2.1-cln.swf.gz"
#: experiment modules not checked here (sweep: tests/test_sweep.py; megatron_calibration,
#: llm_training_placement, llm_offload and llm_recovery: the training model's owner, tests/test_training_*.py)
NOT_SCRIPTS = {"__init__", "tables", "cli", "sweep", "megatron_calibration", "llm_training_placement", "llm_offload",
               "llm_recovery"}


def labels() -> dict[str, Column]:
    """Registered label -> column (read when checking: scripts register columns when imported)."""
    return {c.label: c for c in COLUMNS.values() if c.kind != "timing"}


TIMING_LABELS = {c.label for c in COLUMNS.values() if c.kind == "timing"}


@pytest.fixture(autouse=True)
def strict_columns(monkeypatch):
    monkeypatch.setattr(tables, "STRICT", True)


# tiny_log (tests/conftest.py): the header and first 250 jobs of the real KTH-SP2 log


def _bine_inputs(tmp: Path) -> list[str]:
    (tmp / "in" / "run1").mkdir(parents=True)
    (tmp / "in" / "run1" / "jobs.csv").write_text('job,nodes\n1,0-7\n2,"0,2,4,6"\n')
    (tmp / "in" / "groups.txt").write_text("".join(f"{n} {n // 4}\n" for n in range(8)))
    return ["--jobs-csv", str(tmp / "in" / "run1" / "jobs.csv"), "--group-map", str(tmp / "in" / "groups.txt"),
            "--max-p", "8"]


def _needs(path: str):
    return pytest.mark.skipif(not (DATA / path).exists(), reason=f"{path} data not present")


#: script -> (argv(tmp, log), marks): the tiny configuration of every script with tables
TINY = {
    "compare_schedulers": (lambda t, log: ["-w", log, "--policies", "fcfs+none,fcfs+easy,sjf+conservative"], []),
    "ml_scheduling": (lambda t, log: ["-w", log], []),
    "slurm_tuning": (lambda t, log: ["-w", log, "--max-jobs", "100"], []),
    "placement_whatif": (lambda t, log: ["-w", "synthetic:jobs=60,nodes=128,seed=1", "--system", "adastra"], []),
    "llm_placement": (lambda t, log: ["--system", "dgx-h100", "--days", "0.3", "--mtbf-days", "20", "--policies",
                                      "group-packed", "--regimes", "checkpoint_restart", "--workers", "1"], []),
    "incentives_whatif": (lambda t, log: ["-w", "synthetic:jobs=120,nodes=16,seed=2", "--nodes", "16",
                                          "--no-cooling"], []),
    "power_cap_whatif": (lambda t, log: ["-w", "synthetic:jobs=80,nodes=32,seed=4", "--nodes", "32"], []),
    "bine_traffic": (lambda t, log: _bine_inputs(t), []),
    "rlscheduler_table": (lambda t, log: ["-w", "Lublin-1"], [_needs("Lublin-256")]),
    "serving_cluster": (lambda t, log: ["--day0", "204", "--days", "0.25", "--offset-h", "2", "--max-requests", "200"],
                        [_needs("LLM-serving"), _needs("KTH-SP2")]),
    "serving_pd": (lambda t, log: ["--minutes", "1", "--gpus", "8", "--rates", "1,4"], [_needs("LLM-serving")]),
    "serving_slo": (lambda t, log: ["--trace", "code", "--minutes", "0.5", "--loads", "1"], [_needs("LLM-serving")]),
    "serving_autoscale": (lambda t, log: ["--hours", "0.25", "--rate", "1"], [_needs("LLM-serving"), pytest.mark.slow]),
    "serving_fast_scaling": (lambda t, log: ["--minutes", "1.5", "--rate", "2"],
                             [_needs("LLM-serving"), pytest.mark.slow]),
    "serving_validation": (lambda t, log: [], [_needs("LLM-serving"), pytest.mark.slow]),
    "validate_power": (lambda t, log: ["--calib-days", "0.25", "--max-days", "0.5"],
                       [_needs("SURF-OpenDT"), pytest.mark.slow]),
    "gpu_fragmentation": (lambda t, log: ["--mode", "both", "--fill", "0.3", "--horizon-days", "0.05", "--warmup",
                                          "600", "--node-fraction", "0.02", "--policies", "best-fit", "fgd"],
                          [_needs("Alibaba-GPU-2023-openb"), pytest.mark.slow]),
}
NEEDS_LOG = {"compare_schedulers", "ml_scheduling", "slurm_tuning"}


# ================================================================================ parsing
def _md_cells(line: str) -> list[str]:
    assert line.startswith("| ") and line.endswith(" |"), f"not a table row: {line!r}"
    return [c.strip() for c in re.split(r"(?<!\\)\|", line[1:-1])]


def markdown_tables(text: str) -> list[dict]:
    """The tables of a Markdown file: caption (the paragraph above), header, alignment, rows."""
    blocks = [b for b in text.split("\n\n") if b.strip()]
    out, caption = [], ""
    for b in blocks:
        lines = b.strip("\n").split("\n")
        if not lines[0].startswith("| "):
            caption = b.strip()
            continue
        align = lines[1]
        assert re.fullmatch(r"\|(?::---\||---:\|)+", align), f"alignment row {align!r}"
        kinds = ["num" if a == "---:" else "text" for a in align.strip("|").split("|")]
        head = _md_cells(lines[0])
        rows = [_md_cells(x) for x in lines[2:]]
        assert len(kinds) == len(head) and all(len(r) == len(head) for r in rows), f"ragged table under {caption[:60]!r}"
        out.append({"caption": caption, "head": head, "kinds": kinds, "rows": rows})
        caption = ""
    return out


def _tex_cells(line: str) -> list[str]:
    body = line.rstrip()
    assert body.endswith(r"\\"), f"row does not end with \\\\: {line!r}"
    body = body[:-2]
    if body.startswith("{}"):
        body = body[2:]
    return [c.strip() for c in re.split(r"(?<!\\)&", body)]


def latex_tables(tex: str) -> list[dict]:
    """The booktabs tables of a LaTeX file, each checked for structure: caption above the tabular, one
    rule of each kind, one header row, as many cells per row as columns, balanced braces, no unescaped
    special character, ASCII only."""
    assert tex.isascii(), f"non-ASCII character in LaTeX: {sorted({c for c in tex if ord(c) > 127})}"
    chunks = tex.split(BOOKTABS_NOTE + "\n")
    assert chunks[0].strip() == "", "a LaTeX table file starts with the booktabs note"
    out = []
    for chunk in chunks[1:]:
        lines = chunk.rstrip("\n").split("\n")
        assert lines[0] == RESIZE_NOTE and lines.count(RESIZE_OPEN) == 1
        lines = lines[1:]
        assert lines[0] == r"\begin{table}[t]" and lines[-1] == r"\end{table}"
        cap = [x for x in lines if x.startswith(r"\caption{")]
        tab = [i for i, x in enumerate(lines) if x.startswith(r"\begin{tabular}{")]
        assert len(cap) <= 1 and len(tab) == 1
        spec = re.fullmatch(r"\\begin\{tabular\}\{([lr]+)\}", lines[tab[0]]).group(1)
        top, mid, bot = (lines.index(r) for r in (r"\toprule", r"\midrule", r"\bottomrule"))
        assert lines[tab[0] - 1] == RESIZE_OPEN and lines[bot + 2] == "}"
        assert tab[0] + 1 == top and mid == top + 2 and mid < bot and lines[bot + 1] == r"\end{tabular}"
        for rule in (r"\toprule", r"\midrule", r"\bottomrule"):
            assert lines.count(rule) == 1
        assert not any(r"\hline" in x for x in lines)
        rows = [_tex_cells(x) for x in lines[mid + 1:bot]]
        head = _tex_cells(lines[top + 1])
        for r in [head, *rows]:
            assert len(r) == len(spec), f"{len(r)} cells for {len(spec)} columns: {r}"
        unesc = re.sub(r"\\.", "", "\n".join(lines))
        assert unesc.count("{") == unesc.count("}"), "unbalanced braces"
        for x in lines:
            if x == RESIZE_OPEN:
                continue
            unesc = re.sub(r"\\.", "", x)
            assert unesc.count("{") == unesc.count("}") or x == "}", f"unbalanced braces: {x!r}"
            plain = re.sub(r"\$(\\pm|-|\\times|\\leq|\\geq|\\rightarrow)\$", "", x)
            assert not re.search(r"(?<!\\)[_%#&^~]", plain.replace(" & ", " ").replace("{,}", "")
                                 .replace(r"\\", "")) or x.startswith("%"), f"unescaped special character: {x!r}"
            assert "$" not in re.sub(r"\\\$", "", plain), f"unescaped $: {x!r}"
        out.append({"caption": cap[0] if cap else "", "head": head, "spec": spec, "rows": rows})
    return out


# ================================================================================ the style
_NUM = r"-?\d{1,3}(?:,\d{3})*(?:\.\d+)?|-?\d+(?:\.\d+)?"
_CELL = re.compile(rf"^(?P<v>{_NUM})(?: \[(?P<lo>{_NUM}), (?P<hi>{_NUM})\])?$")
#: how Python, numpy and pandas print a missing or infinite value (a text label such as "none" is fine)
_BAD = re.compile(r"None|nan|NaN|-?inf|n/a|NaT|<NA>|null")
_ABS = re.compile(r"(?:^|[\s(=,'\"])(?:[A-Za-z]:)?/(?:tmp|home|root|work|Users|var|private|mnt|data|opt)/")


def _value(text: str) -> float:
    return float(text.replace(",", ""))


def _check_number(cell: str, col: Column, where: str) -> None:
    m = _CELL.match(cell)
    assert m, f"{where}: {cell!r} is not a number in the column's format"
    for part in ("v", "lo", "hi"):
        s = m.group(part)
        if s is None:
            continue
        frac = s.split(".")[1] if "." in s else ""
        assert len(frac) == col.decimals, f"{where}: {cell!r} has {len(frac)} decimals, the column {col.decimals}"
        whole = s.lstrip("-").split(".")[0]
        if col.group:
            assert int(whole.replace(",", "")) < 1000 or "," in whole, f"{where}: {cell!r} lacks thousands separators"
        else:
            assert "," not in whole, f"{where}: {cell!r} has a thousands separator the column does not use"
    half = 0.5 * 10 ** -col.decimals + 1e-9
    for part in ("v", "lo", "hi"):
        if m.group(part) is None:
            continue
        x = _value(m.group(part))
        if col.lower is not None:
            assert x >= col.lower * col.scale - half, f"{where}: {cell!r} below the metric's floor {col.lower}"
        if col.upper is not None:
            assert x <= col.upper * col.scale + half, f"{where}: {cell!r} above the metric's ceiling {col.upper}"
    if m.group("lo") is not None:
        assert _value(m.group("lo")) <= _value(m.group("v")) <= _value(m.group("hi")), f"{where}: {cell!r}"


def _md_to_tex(cell: str, numeric: bool) -> str:
    """What the LaTeX cell must be for a Markdown cell."""
    if cell == MISSING_MD:
        return MISSING_TEX
    if not numeric:
        return latex_escape(cell.replace("\\|", "|"))
    return re.sub(r"(^|\[|, )-", r"\1$-$", cell.replace(",", "{,}").replace("{,} ", ", "))


def check_md_table(t: dict, where: str) -> None:
    LABELS = labels()
    for h in t["head"]:
        assert h not in TIMING_LABELS, f"{where}: timing column {h!r} in a table"
        assert h in LABELS, f"{where}: header {h!r} is not a registered label (raw column name?)"
    for j, h in enumerate(t["head"]):
        col = LABELS[h]
        assert (t["kinds"][j] == "num") == col.numeric, f"{where}: column {h!r} aligned as the wrong kind"
        for r in t["rows"]:
            cell = r[j]
            assert cell, f"{where}: empty cell in {h!r} (a dash stands for a missing value)"
            if cell == MISSING_MD or not col.numeric:
                continue
            _check_number(cell, col, f"{where} [{h}]")
    cells = [c for r in t["rows"] for c in r]
    assert all(not _BAD.fullmatch(c) for c in cells), f"{where}: a nan/None/inf cell"
    if MISSING_MD in cells:
        assert MISSING_MD in t["caption"], f"{where}: dashes in the table but the caption does not say what they mean"
    assert not _ABS.search(t["caption"]) and not any(_ABS.search(c) for c in cells), f"{where}: absolute path"
    assert t["rows"], f"{where}: a table without rows"


def check_folder(folder: Path) -> list[str]:
    """Check every Markdown and LaTeX table file of ``folder``; returns the stems checked."""
    stems = sorted({p.stem for p in folder.iterdir() if p.suffix in (".md", ".tex")})
    assert stems, f"no table in {folder}"
    for stem in stems:
        md, tex = folder / f"{stem}.md", folder / f"{stem}.tex"
        assert md.is_file() and tex.is_file(), f"{stem}: the Markdown and the LaTeX table come together"
        mds = markdown_tables(md.read_text())
        texs = latex_tables(tex.read_text())
        assert len(mds) == len(texs) >= 1, f"{stem}: {len(mds)} Markdown tables, {len(texs)} LaTeX tables"
        for k, (m, t) in enumerate(zip(mds, texs)):
            where = f"{folder.name}/{stem} table {k + 1}"
            check_md_table(m, where)
            assert t["head"] == [latex_escape(h) for h in m["head"]], where
            assert t["spec"] == "".join("r" if x == "num" else "l" for x in m["kinds"]), where
            want = [[_md_to_tex(c, x == "num") for c, x in zip(r, m["kinds"])] for r in m["rows"]]
            assert t["rows"] == want, f"{where}: LaTeX cells differ from the Markdown cells"
            assert t["caption"] == (r"\caption{" + latex_escape(m["caption"]) + "}" if m["caption"] else ""), where
    return stems


# ================================================================================ every script
def _main(module: str, argv: list[str]):
    return importlib.import_module(f"hpctwin.experiments.{module}").main(argv)


def _params():
    for name, (_, marks) in sorted(TINY.items()):
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", list(_params()))
@pytest.mark.slow
def test_every_table_follows_the_style(name, tmp_path, request):
    log = request.getfixturevalue("tiny_log") if name in NEEDS_LOG else ""
    argv_of, _ = TINY[name]
    out = tmp_path / "out"
    _main(name, argv_of(tmp_path, log) + ["--out", str(out)])
    stems = check_folder(out)
    for stem in stems:                                  # the raw CSV keeps its raw names
        if (out / f"{stem}.csv").is_file():
            head = pd.read_csv(out / f"{stem}.csv", nrows=0).columns
            assert all(" " not in c or name == "rlscheduler_table" for c in head)


def test_every_script_has_a_tiny_style_run():
    scripts = sorted(p.stem for p in (ROOT / "experiments").glob("*.py")) if (ROOT / "experiments").is_dir() else []
    for s in scripts:
        if s not in NOT_SCRIPTS:
            assert s in TINY, f"experiments/{s}.py has no tiny configuration in tests/test_table_style.py"


# ================================================================================ the writer
def test_registry_is_consistent():
    by_label: dict[str, Column] = {}
    for key, col in COLUMNS.items():
        assert col.kind in tables.KINDS, key
        assert col.label and (col.label[0].isupper() or col.label[0].isdigit()) and "_" not in col.label, f"{key}: label {col.label!r}"
        if col.kind == "percentage":
            assert col.scale == 100.0 and "(%" in col.label, key
        if col.kind != "timing" and col.label in by_label:
            o = by_label[col.label]
            shown = [(c.decimals, c.group, None if c.lower is None else c.lower * c.scale,
                      None if c.upper is None else c.upper * c.scale) for c in (o, col)]
            assert shown[0] == shown[1], f"one label, one format: {col.label}"
        by_label[col.label] = col


def test_unregistered_column_is_an_error_when_strict(tmp_path):
    with pytest.raises(ValueError, match=r"table column 'zork_s' is not registered: add its label"):
        markdown_table(pd.DataFrame({"policy": ["a"], "zork_s": [1.0]}), ["policy"], ["zork_s"])


def test_unregistered_column_gets_one_generic_format(monkeypatch):
    monkeypatch.setattr(tables, "STRICT", False)
    md = markdown_table(pd.DataFrame({"policy": ["a", "b"], "zork_s": [12345.6, 2.25]}), ["policy"], ["zork_s"])
    assert md.splitlines()[0] == "| Policy | Zork (s) |"
    assert md.splitlines()[2:] == ["| a | 12,346 |", "| b | 2 |"]


def test_hand_checked_cells_markdown_and_latex():
    df = pd.DataFrame({"log": ["/tmp/x/kth-head.swf", "a&b_c"], "mean_wait_s": [37790.4, 5802.0],
                       "utilisation": [0.4321, float("nan")], "mean_bsld": [1.0, -0.0001 + 2],
                       "cap_held": [True, None], "wall_s": [1.0, 2.0]})
    md = markdown_table(df, ["log"], ["mean_wait_s", "utilisation", "mean_bsld", "cap_held", "wall_s"],
                        "Caption on /tmp/x/kth-head.swf: 100 % of jobs.")
    assert md == ("Caption on kth-head.swf: 100 % of jobs. \u2014: not applicable to this row (empty or inf in the CSV).\n\n"
                  "| Log | Mean wait (s) | Utilisation (%) | Mean bounded slowdown | Cap held |\n"
                  "|:---|---:|---:|---:|:---|\n"
                  "| kth-head.swf | 37,790 | 43.2 | 1.00 | yes |\n"
                  "| a&b_c | 5,802 | \u2014 | 2.00 | \u2014 |\n")
    tex = latex_table(df, ["log"], ["mean_wait_s", "utilisation", "mean_bsld", "cap_held", "wall_s"], "x_y 5 %",
                      label="tab:x")
    assert r"\caption{x\_y 5 \% --: not applicable to this row (empty or inf in the CSV).}" in tex
    assert r"kth-head.swf & 37{,}790 & 43.2 & 1.00 & yes \\" in tex
    assert r"a\&b\_c & 5{,}802 & -- & 2.00 & -- \\" in tex
    assert r"\begin{tabular}{lrrrl}" in tex and "Wall time" not in tex


def test_interval_never_below_the_floor(tmp_path):
    """The issue's bsld "386.2 +- 404.9": the t interval clipped to bsld >= 1, the method in the caption."""
    df = pd.DataFrame({"policy": ["easy"] * 3, "seed": [0, 1, 2], "mean_bsld": [1.0, 1.2, 1157.0],
                       "utilisation": [0.99, 0.999, 0.95], "mean_wait_s": [10.0, 0.0, 5000.0]})
    write_tables(df, tmp_path, ["policy", "seed"], ["mean_bsld", "utilisation", "mean_wait_s"], "Cap.")
    md = (tmp_path / "results.md").read_text()
    row = md.rstrip().splitlines()[-1]
    assert row == "| easy | 386.40 [1.00, 2,044.21] | 98.0 [91.5, 100.0] | 1,670 [0, 8,834] |"
    assert "| Policy | Mean bounded slowdown | Utilisation (%) | Mean wait (s) |" in md
    assert "95 % confidence interval" in md and "clipped to the metric's range" in md
    assert check_folder(tmp_path) == ["results"]
    summary = pd.read_csv(tmp_path / "results_summary.csv")      # the raw half-width is kept in the CSV
    assert summary["mean_bsld_ci95"].iloc[0] > summary["mean_bsld"].iloc[0]


def test_a_row_starting_with_a_bracket_is_protected_in_latex():
    tex = latex_table(pd.DataFrame({"bucket": ["[1, 2)"], "jobs": [3]}), ["bucket"], ["jobs"])
    assert r"{}[1, 2) & 3 \\" in tex


def test_absolute_paths_are_reduced_to_names():
    assert tables.strip_paths("log /tmp/a/b/kth.swf, sacct:/x/y.csv; s/B 1/node-h https://x.org/a/b") == \
        "log kth.swf, sacct:y.csv; s/B 1/node-h https://x.org/a/b"
    assert tables.display_name("/data/logs/CTC.swf") == "CTC.swf"
    assert tables.display_name("synthetic:jobs=60,nodes=128") == "synthetic:jobs=60,nodes=128"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed")
def test_latex_tables_compile(tmp_path, tiny_log):
    """Every LaTeX table of two scripts (one wide, with dashes and intervals) pasted into an article."""
    _main("compare_schedulers", ["-w", tiny_log, "--policies", "fcfs+none,fcfs+easy", "--out", str(tmp_path / "a")])
    _main("llm_placement", ["--system", "dgx-h100", "--days", "0.2", "--mtbf-days", "20", "--policies", "group-packed",
                            "--regimes", "checkpoint_restart", "--workers", "1", "--out", str(tmp_path / "b")])
    df = pd.DataFrame({"policy": ["easy"] * 2, "seed": [0, 1], "mean_bsld": [1.0, 900.0]})
    write_tables(df, tmp_path / "c", ["policy", "seed"], ["mean_bsld"], "Intervals.")
    files = sorted(p for p in tmp_path.glob("*/*.tex"))
    doc = tmp_path / "paper.tex"
    doc.write_text("\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage{graphicx}\n\\begin{document}\n"
                   + "".join(f"\\input{{{p}}}\n" for p in files) + "\\end{document}\n")
    r = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:]


# ================================================================================ the option vocabulary
def _parser_of(name: str, capsys):
    with pytest.raises(SystemExit) as e:
        _main(name, ["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    return cli.last_parser, text


@pytest.mark.parametrize("name", sorted(TINY))
def test_every_option_has_help_and_shows_its_default(name, capsys):
    ap, text = _parser_of(name, capsys)
    assert ap.prog == f"python -m hpctwin.experiments.{name}"
    fmt = ap._get_formatter()
    for a in ap._actions:
        if a.help == "==SUPPRESS==" or not a.option_strings or a.dest == "help":
            continue
        assert a.help, f"{name}: {a.option_strings} has no help"
        shown = fmt._get_help_string(a)
        if a.default is not None and a.default is not False:
            assert "(default" in shown, f"{name}: {a.option_strings} does not show its default"
    opts = {s for a in ap._actions for s in a.option_strings if a.help != "==SUPPRESS=="}
    assert {"--out", "--force"} <= opts
    for old in ("--log", "--logs", "--systems", "--jobs", "--traces"):
        assert old not in opts, f"{name}: the old spelling {old} is shown in --help"
    assert "(default: " in " ".join(text.split())


def test_deprecated_spellings_still_work_with_one_note(capsys):
    ap = cli.parser("demo", "Demo.")
    cli.add_workload(ap, ["KTH-SP2"])
    cli.add_system(ap, "frontier", several=False, aliases=())
    cli.add_job_window(ap, aliases=("--jobs",))
    a = ap.parse_args(["--logs", "A,synthetic:jobs=5,nodes=8", "-w", "B", "--jobs", "7"])
    assert a.workload == ["A", "synthetic:jobs=5,nodes=8", "B"] and a.max_jobs == 7
    err = capsys.readouterr().err.splitlines()
    assert err == ["python -m hpctwin.experiments.demo: note: --logs is deprecated; use --workload/-w",
                   "python -m hpctwin.experiments.demo: note: --jobs is deprecated; use --max-jobs"]
    assert ap.parse_args([]).workload == ["KTH-SP2"]
    with pytest.raises(SystemExit):
        ap.parse_args(["--system", "a", "--system", "b"])
    assert "this script takes one value, got 2 (a, b); run it once per value" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ap.parse_args(["--max-jobs", "0"])
    assert "--max-jobs: expected a whole number >= 1, got 0" in capsys.readouterr().err


def test_docs_list_every_script_and_the_vocabulary():
    doc = (ROOT / "docs" / "experiments.md").read_text()
    for opt in ("--workload/-w", "--system", "--max-jobs", "--skip-jobs", "--out", "--force", "--seed", "--workers",
                "--data-dir"):
        assert f"`{opt}" in doc, opt
    for name in sorted(TINY):
        assert f"`{name}`" in doc and f"python -m hpctwin.experiments.{name}" in doc, name


def test_job_window_is_the_same_in_scripts_and_run(tiny_log):
    """``--max-jobs``/``--skip-jobs``: jobs K+1..K+N in submit order, as ``hpctwin run`` takes them."""
    from hpctwin.twin.run import RunConfig, RunConfigError, job_window, load_workload, run
    wl = load_workload(tiny_log)
    w = job_window(wl, 20, 100)
    assert len(w) == 20 and list(w.job_id) == list(wl.sorted().job_id[100:120])
    assert job_window(wl) is wl
    assert w.notes[-1] == "job window: jobs 101-120 of 250 in submit order (--skip-jobs 100) (--max-jobs 20)"
    r = run(RunConfig(workload=tiny_log, max_jobs=20, skip_jobs=100))
    assert r.summary["jobs_in_log"] == 250 and r.summary["jobs_simulated"] == 20
    assert list(r.jobs["job_id"]) == list(w.job_id)
    with pytest.raises(RunConfigError, match=r"--skip-jobs 250 leaves no job: workload 'kth-head' has 250 jobs"):
        run(RunConfig(workload=tiny_log, skip_jobs=250))
    with pytest.raises(RunConfigError, match=r"--max-jobs must be a whole number >= 1, got 0"):
        job_window(wl, 0)


def test_run_cli_job_window_round_trips_through_config_toml(tmp_path, tiny_log):
    from hpctwin.twin.cli import main as hpctwin
    assert hpctwin(["run", "-w", tiny_log, "--max-jobs", "30", "--skip-jobs", "5", "-q", "-o", str(tmp_path / "a")]) == 0
    toml = (tmp_path / "a" / "config.toml").read_text()
    assert "max_jobs = 30" in toml and "skip_jobs = 5" in toml
    assert len((tmp_path / "a" / "jobs.csv").read_text().splitlines()) == 31
    assert hpctwin(["run", "--config", str(tmp_path / "a"), "-q", "-o", str(tmp_path / "b")]) == 0
    assert (tmp_path / "a" / "jobs.csv").read_bytes() == (tmp_path / "b" / "jobs.csv").read_bytes()
    assert hpctwin(["run", "-w", tiny_log, "-q", "-o", str(tmp_path / "c")]) == 0
    assert "max_jobs" not in (tmp_path / "c" / "config.toml").read_text()      # not given: not written
    assert len((tmp_path / "c" / "jobs.csv").read_text().splitlines()) == 251
