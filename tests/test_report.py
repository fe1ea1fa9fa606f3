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


@pytest.fixture(scope="module")
def report_text(run_dir):
    """The report of the fixture run, written once (``hpctwin report RUN --window 0:86400``)."""
    assert main([str(run_dir), "--window", "0:86400"]) == 0
    return (run_dir / "report.html").read_text()


def test_report_is_self_contained(report_text):
    text = report_text
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


def test_summary_table_reads_with_units_and_no_absolute_paths():
    from hpctwin.twin.report import summary_table
    s = {"workload": "KTH-SP2", "workload_source": "/work/shared/datasets/KTH-SP2/KTH-SP2-1996-2.1-cln.swf.gz",
         "system": "/tmp/x/y/frontier-no-network.toml", "mean_wait_s": 5719.6, "utilisation": 0.51659,
         "mean_bsld": 215.8189, "energy_facility_kwh": 2301.77, "kill_at_walltime": True,
         "jobs_skipped": {"runtime<=0": 3}, "failures": {"goodput": 0.75, "lost_unit_hours": 12.5},
         "conventions": "wait = start - submit", "notes": ["read /work/shared/datasets/a.swf"], "odd_w": 3.0}
    rows = summary_table(s)
    d = {(sec, k): v for sec, k, v in rows}
    assert d[("Run", "workload source")] == "KTH-SP2-1996-2.1-cln.swf.gz"
    assert d[("Run", "system")] == "frontier-no-network.toml"
    assert d[("Scheduling metrics", "mean wait")] == "5,720 s"
    assert d[("Scheduling metrics", "utilisation")] == "51.66 %"
    assert d[("Scheduling metrics", "mean bounded slowdown")] == "215.8"
    assert d[("Energy and power", "facility energy")] == "2,302 kWh"
    assert d[("Run", "kill at walltime")] == "yes" and d[("Run", "jobs skipped")] == "runtime<=0: 3"
    assert d[("failures", "goodput")] == "0.75" and d[("failures", "lost_unit_hours")] == "12.5"
    assert d[("Other", "odd_w")] == "3 W"
    assert not any("/" in v for _, _, v in rows)
    assert "conventions" not in {k for _, k, _ in rows}         # stated in the conventions box instead


def test_report_has_no_absolute_paths_and_a_stepped_series(run_dir, report_text):
    text = report_text
    assert str(run_dir.parent) not in text
    assert "every sample drawn as a step" in text or "samples in 700 bins" in text
    assert "<th colspan='2' class='sec'>Scheduling metrics</th>" in text


def test_long_series_is_aggregated_not_drawn_point_by_point():
    from hpctwin.twin.report import fig_util_queue
    t = np.arange(1_950_000) * 15.0
    u = (np.arange(1_950_000) % 97) / 97.0
    img, how = fig_util_queue({"time": (t, "s"), "utilisation": (u, ""), "queue_length": (u * 10, "")})
    assert img.startswith("data:image/png;base64,")
    assert how.startswith("1,950,000 samples in 700 bins of") and "min..max" in how
