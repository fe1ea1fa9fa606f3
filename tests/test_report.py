"""`hpctwin report RUN_DIR` (twin/report.py): a self-contained HTML page with embedded figures."""
from __future__ import annotations

import re

import numpy as np
import pytest

from hpctwin.twin.report import main, size_class
from hpctwin.twin.run import RunConfig, run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from hpctwin.experiments.incentives_whatif import power_only_system
    d = tmp_path_factory.mktemp("r") / "run"
    system = power_only_system("frontier", d.parent)
    run(RunConfig(workload="synthetic:jobs=300,nodes=16", system=system, nodes=16, power=True,
                  out=str(d), options={"power": {"cooling": False}}))
    return d


def test_report_is_self_contained(run_dir):
    assert main([str(run_dir), "--window", "0:86400"]) == 0
    text = (run_dir / "report.html").read_text()
    imgs = re.findall(r"src='data:image/png;base64,", text)
    assert len(imgs) == 4                       # utilisation/queue, distributions, gantt, power/PUE
    assert not re.search(r"(src|href)=['\"]?(http|file|/)", text)      # no external reference
    assert "bsld = max(1, (wait + run) / max(run, tau))" in text
    assert "facility = IT" in text              # power conventions stated
    assert "Gantt view of [0, 86400] s" in text


def test_report_errors(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert "not a finished run folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(tmp_path), "--window", "5:1"])


def test_size_classes():
    assert size_class(np.array([1, 2, 4, 5, 16, 17, 5000])).tolist() == ["1", "2-4", "2-4", "5-16", "5-16",
                                                                        "17-64", ">4096"]


def test_summary_rows_flatten_nested_tables():
    from hpctwin.twin.report import _summary_rows
    rows = dict(_summary_rows({"mean_wait_s": 12.5, "failures": {"goodput": 0.75, "regimes": {"default": "requeue"}},
                               "notes": ["a"]}))
    assert rows["mean_wait_s"] == "12.5" and rows["failures.goodput"] == "0.75"
    assert rows["failures.regimes"] == '{"default": "requeue"}' and rows["notes"] == '["a"]'
