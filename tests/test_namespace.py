"""The project installs one top-level import name, ``hpctwin`` (a ``datasets`` package at top level
would shadow HuggingFace's ``datasets``), and its public API is importable from it."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
OLD_NAMES = ("twin", "schedulers", "datasets", "topology", "power", "experiments")


def _top_level(path: str) -> str:
    return path.replace("\\", "/").split("/", 1)[0]


_INSTALLED_FILES = ("import importlib.metadata as md, json; d = md.distribution('hpctwin');"
                    " print(json.dumps([[str(f), str(f.locate())] for f in d.files or []]))")


def test_installed_distribution_has_only_the_hpctwin_top_level_name(tmp_path):
    # run outside the checkout: there, the source tree's own egg-info would be found first
    r = subprocess.run([sys.executable, "-c", _INSTALLED_FILES], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    files = json.loads(r.stdout)
    tops = set()
    for f, located in files:
        top = _top_level(f)
        if top.endswith(".dist-info") or top.startswith("..") or top == "__pycache__":
            continue
        if top.startswith("__editable__"):
            # an editable install: the path finder's mapping names the importable top-level packages
            text = Path(located).read_text() if f.endswith(".py") else ""
            m = re.search(r"MAPPING\s*(?::[^=]*)?=\s*(\{.*?\})", text, re.S)
            if m:
                tops |= {k.split(".")[0] for k in eval(m.group(1))}  # noqa: S307 (our own file)
            continue
        tops.add(top.removesuffix(".py"))
    assert tops == {"hpctwin"}, tops


@pytest.mark.slow
def test_built_wheel_contains_only_hpctwin(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                        "-w", str(tmp_path), str(REPO)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    wheel = next(tmp_path.glob("hpctwin-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    tops = {_top_level(n) for n in names if not _top_level(n).endswith(".dist-info")}
    assert tops == {"hpctwin"}
    for sub in OLD_NAMES:
        assert f"hpctwin/{sub}/__init__.py" in names
    assert "hpctwin/twin/systems/frontier.toml" in names and "hpctwin/datasets/registry.toml" in names


def test_public_api_from_a_foreign_working_directory(tmp_path):
    code = ("import hpctwin, sys; r = hpctwin.run(hpctwin.RunConfig(workload='synthetic:jobs=300,nodes=32',"
            " scheduler='easy')); print(len(r.jobs), r.summary['jobs_simulated']);"
            " print(all(m not in sys.modules for m in %r))" % (OLD_NAMES,))
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["300", "300", "True"]


def test_no_source_file_imports_an_old_top_level_name():
    pat = re.compile(r"^\s*(?:from|import)\s+(" + "|".join(OLD_NAMES) + r")\b", re.M)
    bad = []
    for folder in (*OLD_NAMES, "hpctwin", "tests", "benchmarks"):
        for p in (REPO / folder).rglob("*.py"):
            for m in pat.finditer(p.read_text()):
                bad.append(f"{p.relative_to(REPO)}: {m.group(0).strip()}")
    assert not bad, bad
