"""The printed summary of serving on the batch machine (a serving block; log jobs and serving node
requests counted apart), and ``hpctwin serve`` brought to ``run``'s standard: names looked up in the
data directory, units on every statistic, every written file listed (issue 26 items 4-5, 28 item 5)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hpctwin.datasets.registry import DATA_DIR_HELP, default_data_dir
from hpctwin.twin.cli import format_summary
from hpctwin.twin.serving import cli as serve_cli

AZURE_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
    f"2023-11-16 18:15:{10 + i:02d}.000000,{200 + 7 * i},{20 + i}\n" for i in range(30))
PERF = Path(default_data_dir(None)) / "LLM-serving" / "LLMServingSim" / "perf" / "RTXPRO6000"
needs_profiles = pytest.mark.skipif(not PERF.is_dir(), reason="LLM-serving profiles not in the data directory")

STATS = {"mean": 1.5, "median": 0.25, "p90": 2.0, "p95": 3.0, "p99": 4.0}
BASE = {"workload": "w", "scheduler": "easy", "machine_units": 16, "machine_size_source": "--nodes option",
        "jobs_simulated": 63, "jobs_in_log": 60, "jobs_skipped": {}, "jobs_killed_at_walltime": 0,
        "mean_wait_s": 1.0, "median_wait_s": 0.0, "mean_bsld": 1.0, "utilisation": 0.5, "makespan_s": 10.0,
        "wall_seconds": 0.1, "jobs_per_second": 10.0, "conventions": "c", "notes": []}
SERVING = {"requests": 300, "hardware": "RTXPRO6000", "model": "M", "tp": 2, "policy": "utilization",
           "log_jobs": 60, "node_requests": 3, "slo": {"ttft_s": 2.0, "tpot_s": 0.1, "attainment": 0.92},
           "ttft": STATS, "tpot": STATS, "e2e": STATS, "instances": 2, "gpu_hours": 1.5, "node_hours": 0.75,
           "energy_j": 7.2e6}


def _rows(text: str) -> dict[str, str]:
    return {ln[:20].strip(): ln[20:].strip() for ln in text.splitlines() if not ln.startswith(("note", "conv"))}


def test_serving_block_and_jobs_apart():
    rows = _rows(format_summary({**BASE, "serving": SERVING}))
    assert rows["jobs simulated"] == "60 of 60 log jobs (skipped: none), + 3 serving node requests"
    assert rows["serving"] == "300 requests on RTXPRO6000 / M (tp 2, policy utilization)"
    assert rows["node requests"] == "3 serving jobs (not counted among the log's 60 jobs)"
    assert rows["SLO attainment"] == "92.00 % (TTFT <= 2.0 s and TPOT <= 0.1 s)"
    for m in ("TTFT", "TPOT", "E2E"):
        assert rows[m] == "mean 1.5000 s  median 0.2500 s  p90 2.0000 s  p95 3.0000 s  p99 4.0000 s"
    assert rows["instances"] == "2 (1.50 GPU-h, 0.75 node-h)"
    assert rows["serving energy"] == "2.00 kWh"


def test_no_serving_no_block():
    text = format_summary({**BASE, "jobs_simulated": 60})
    assert _rows(text)["jobs simulated"] == "60 of 60 (skipped: none)"
    assert "serving" not in text and "node requests" not in text


def _data_trace() -> str:
    d = default_data_dir(None)
    t = Path(d) / "LLM-serving" / "Azure-LLM-2023" / "AzureLLMInferenceTrace_conv.csv"
    if not t.exists() or not PERF.is_dir():
        pytest.skip("no Azure trace or profiles in the data directory")
    return str(t)


def test_batch_run_counts_serving_jobs_apart():
    from hpctwin.twin.config import RunConfig
    from hpctwin.twin.run import run
    s = dict(trace=_data_trace(), max_requests=300, time_scale=2.0, max_instances=4, policy="utilization",
             metric="kv", target=0.5)
    r = run(RunConfig(workload="synthetic:jobs=60", nodes=16, scheduler="easy", seed=2, options={"serving": s}))
    sv = r.summary["serving"]
    k = int((r.jobs.kind == "serving").sum())
    assert sv["log_jobs"] == 60 and sv["node_requests"] == k == sv["scale_up_requests"] >= 1
    assert r.summary["jobs_simulated"] == 60 + k
    text = format_summary(r.summary)
    rows = _rows(text)
    assert rows["jobs simulated"] == f"60 of 60 log jobs (skipped: none), + {k} serving node requests"
    assert rows["SLO attainment"].startswith(f"{100 * sv['slo']['attainment']:.2f} % (TTFT <= ")
    assert rows["TTFT"].startswith(f"mean {sv['ttft']['mean']:.4f} s")
    assert rows["serving energy"] == f"{sv['energy_j'] / 3.6e6:,.2f} kWh"
    assert np.isfinite(sv["gpu_hours"]) and sv["gpu_hours"] > 0


# ---------------------------------------------------------------------- hpctwin serve
@pytest.fixture()
def data(tmp_path) -> Path:
    d = tmp_path / "data"
    (d / "LLM-serving" / "Azure-LLM-2023").mkdir(parents=True)
    (d / "LLM-serving" / "Azure-LLM-2023" / "conv.csv").write_text(AZURE_HEAD)
    (d / "LLM-serving" / "Other").mkdir()
    (d / "LLM-serving" / "Other" / "dup.csv").write_text(AZURE_HEAD)
    (d / "LLM-serving" / "Azure-LLM-2023" / "dup.csv").write_text(AZURE_HEAD)
    b = d / "LLM-serving" / "LLMServingSim" / "bench" / "HW" / "M"
    b.mkdir(parents=True)
    (b / "config.json").write_text("{}")
    return d


def test_names_are_looked_up_in_the_data_directory(data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    conv = data / "LLM-serving" / "Azure-LLM-2023" / "conv.csv"
    assert serve_cli.resolve_input("conv.csv", str(data), folder=False) == conv
    assert serve_cli.resolve_input("Azure-LLM-2023/conv.csv", str(data), folder=False) == conv
    assert serve_cli.resolve_input("LLM-serving/Azure-LLM-2023/conv.csv", str(data), folder=False) == conv
    assert serve_cli.resolve_input(str(conv), None, folder=False) == conv               # a path as given
    assert serve_cli.resolve_input("HW/M", str(data), folder=True) == data / "LLM-serving" / "LLMServingSim" / "bench" / "HW" / "M"
    with pytest.raises(ValueError, match=r"--trace dup.csv: 2 files of that name under .*: "
                                         r"Azure-LLM-2023/dup.csv, Other/dup.csv; give one of them"):
        serve_cli.resolve_input("dup.csv", str(data), folder=False)
    with pytest.raises(ValueError, match=r"--trace nope.csv: no such file, nor under the data directory .*; "
                                         r"known: Azure-LLM-2023/conv.csv, Azure-LLM-2023/dup.csv, Other/dup.csv$"):
        serve_cli.resolve_input("nope.csv", str(data), folder=False)
    with pytest.raises(ValueError, match=r"--bundle X/Y: no such folder, .*; known: HW/M$"):
        serve_cli.resolve_input("X/Y", str(data), folder=True)


def test_serve_error_is_one_line(data, tmp_path, capsys):
    assert serve_cli.main(["--trace", "nope.csv", "--data-dir", str(data), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hpctwin serve: error: --trace nope.csv: no such file") and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_help_names_the_data_directory(capsys):
    with pytest.raises(SystemExit):
        serve_cli.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert " ".join(DATA_DIR_HELP.split()) in out
    assert "--bundle RTXPRO6000/Llama-3.1-8B" in out and "Statistics are in seconds" in out


@needs_profiles
def test_serve_prints_units_and_every_file(tmp_path, capsys):
    small, out = tmp_path / "small.csv", tmp_path / "o"
    small.write_text(AZURE_HEAD)
    assert serve_cli.main(["--trace", str(small), "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("30 requests, ") and "makespan " in lines[0] and " tokens/s, " in lines[0]
    for ln, m in zip(lines[1:4], ("TTFT", "TPOT", "E2E")):
        assert ln.split()[0] == m and ln.count(" s") == 5          # mean, median, p90, p95, p99, each in s
    files = sorted(p.name for p in out.iterdir())
    assert lines[-1] == f"wrote {out}/: {', '.join(files)}"
    assert files == [".hpctwin-run", "requests.csv", "requests_detail.csv", "summary.json", "timeseries.csv"]
