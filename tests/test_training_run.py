"""The first-principles training model in `hpctwin run` (twin.training.run_model; issue 25 item 6)."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from hpctwin.twin.cli import main
from hpctwin.twin.contract import JobTable, ModelContext
from hpctwin.twin.errors import RunConfigError
from hpctwin.twin.system import load_system
from hpctwin.twin.training.run_model import TrainingOptions, TrainingRunModel

WL = "llm-synthetic:days=1,gpus=256,seed=3"
COLS = ["job_class", "tp", "pp", "dp", "iteration_s", "tflops_per_gpu", "memory_per_gpu_bytes"]


def _run(tmp_path, name, *args):
    out = tmp_path / name
    rc = main(["run", "-w", WL, "--out", str(out), "--quiet", *args])
    return rc, out


def _rows(out):
    with open(out / "jobs.csv", newline="") as f:
        return list(csv.DictReader(f))


# ---------------------------------------------------------------------- the 2-file proof
def test_entry_found_by_name_in_the_model_table():
    from hpctwin.twin.models import MODELS, enabled_entries, sections
    entry = MODELS.lookup("training")
    assert entry.name == "training" and entry.section_name == "training"
    assert sections()["training"] is entry
    assert entry.flag == "--set training.enabled=true"
    assert {"enabled", "model", "recompute", "zero"} <= set(entry.option_schema())

    class Cfg:
        options = {"training": {"enabled": True}}
    assert entry.enabled(Cfg()) and "training" in [e.name for e in enabled_entries(Cfg(), [entry])]
    Cfg.options = {}
    assert not entry.enabled(Cfg())


# ---------------------------------------------------------------------- placement
def _one_job(system: str, n_nodes: int, tp: int, pp: int, dp: int, hidden: int, layers: int, procs: int,
             background: float = 0.0) -> TrainingRunModel:
    cols = {"tp": np.array([tp]), "pp": np.array([pp]), "dp": np.array([dp]), "job_class": np.array(["llm_pretrain"],
            dtype=object), "llm_hidden": np.array([hidden]), "llm_layers": np.array([layers]),
            "seq_len": np.array([4096]), "global_batch": np.array([32 * dp]), "micro_batch": np.array([1])}
    one = np.array([1.0])
    jobs = JobTable(job_id=np.array([7]), submit=np.zeros(1), procs=np.array([procs]), estimate=one,
                    requested_time=one, user=-np.ones(1, int), group=-np.ones(1, int), queue=-np.ones(1, int),
                    partition=-np.ones(1, int), columns=cols)
    m = TrainingRunModel(TrainingOptions(enabled=True, background=background))
    m.bind(ModelContext(n_nodes=n_nodes, jobs=jobs, runtime=one, system=load_system(system)))
    return m


def test_frontier_spread_across_groups_with_busy_global_links_is_slower():
    m = _one_job("frontier", 9408, 4, 1, 32, 5120, 40, 32, background=0.5)
    assert m.on_start(0.0, 0, np.arange(32)) is None                  # the ideal placement: full speed
    t_ideal = m.iter_s[0]
    rate = m.on_start(1.0, 0, np.arange(32) * 128)                     # one node in each of 32 groups
    assert rate is not None and 0.0 < rate[0] < 1.0
    assert m.iter_s[0] > t_ideal
    assert rate[0] == pytest.approx(t_ideal / m.iter_s[0], rel=1e-12)


def test_dgx_cluster_placement_does_not_change_iteration_time():
    m = _one_job("dgx-h100", 128, 8, 1, 16, 5120, 40, 16, background=0.5)
    assert m.on_start(0.0, 0, np.arange(16)) is None
    t_ideal = m.iter_s[0]
    assert m.on_start(1.0, 0, np.arange(16) * 8) is None               # spread over the scalable units
    assert m.iter_s[0] == pytest.approx(t_ideal, rel=1e-9)


# ---------------------------------------------------------------------- jobs.csv
def test_jobs_csv_columns_only_when_the_model_is_on(tmp_path):
    rc, off = _run(tmp_path, "off", "--system", "dgx-h100")
    assert rc == 0
    assert not set(COLS) & set(_rows(off)[0])
    rc, on = _run(tmp_path, "on", "--system", "dgx-h100", "--set", "training.enabled=true")
    assert rc == 0
    rows = _rows(on)
    assert set(COLS) <= set(rows[0])
    train = [r for r in rows if int(r["tp"]) > 0]
    assert train and all(r["job_class"] in ("llm_pretrain", "llm_finetune") for r in train)
    for r in train:
        tp, pp, dp = int(r["tp"]), int(r["pp"]), int(r["dp"])
        assert tp == 8 and tp * pp * dp == 8 * int(r["procs"])          # whole 8-GPU nodes, TP in a node
        assert float(r["iteration_s"]) > 0
        assert 100.0 < float(r["tflops_per_gpu"]) < 989.0             # below the H100's dense BF16 peak
        assert 0 < float(r["memory_per_gpu_bytes"]) < 80 * 1024 ** 3
    other = [r for r in rows if int(r["tp"]) == 0]
    assert other and all(r["iteration_s"] == "" and r["memory_per_gpu_bytes"] == "" for r in other)
    s = json.loads((on / "summary.json").read_text())
    assert s["training_jobs"] == len(train)
    # the jobs' other columns keep their bytes (the model only adds columns here: no slowdown on a DGX)
    keep = [k for k in _rows(off)[0]]
    assert [[r[k] for k in keep] for r in rows] == [[r[k] for k in keep] for r in _rows(off)]


# ---------------------------------------------------------------------- refusal
def test_a_job_that_does_not_fit_in_memory_is_refused_with_the_figure_and_the_fix(tmp_path, capsys):
    rc, _ = _run(tmp_path, "mem", "--system", "dgx-h100", "--set", "training.enabled=true",
                 "--set", "training.model=llama3-405b", "--set", "training.zero=0", "--set", "training.recompute=none")
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert err.startswith("hpctwin: error: training model: job ")
    assert "llama3-405b" in err and "GiB per GPU > 78.0 GiB usable on h100-sxm" in err
    assert "--set training.zero=3" in err


def test_tp_larger_than_a_node_is_refused(tmp_path, capsys):
    out = tmp_path / "tp"
    rc = main(["run", "-w", WL + ",gpus_per_node=8", "--system", "frontier", "--set", "training.enabled=true",
               "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "TP = 8 does not fit the 4 GPUs of a node" in err and "gpus_per_node=4" in err
    assert "training.allow_tp_across_nodes=true" in err


def test_unknown_model_option_is_refused(tmp_path, capsys):
    rc, _ = _run(tmp_path, "bad", "--system", "dgx-h100", "--set", "training.enabled=true",
                 "--set", "training.model=gpt5")
    err = capsys.readouterr().err
    assert rc == 2 and "training.model=gpt5: unknown model" in err


def test_direct_refusal_raises_run_config_error():
    with pytest.raises(RunConfigError, match=r"job 7 .*TP = 8 does not fit the 4 GPUs"):
        _one_job("frontier", 9408, 8, 1, 1, 4096, 32, 2)


# ---------------------------------------------------------------------- frontier llm-synthetic
def test_llm_synthetic_on_frontier_sizes_tp_to_its_nodes(tmp_path):
    rc, out = _run(tmp_path, "fr", "--system", "frontier", "--set", "llm.iteration=true",
                   "--set", "training.enabled=true")
    assert rc == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["llm_training_jobs"] > 0 and s["training_jobs"] == s["llm_training_jobs"]
    train = [r for r in _rows(out) if int(r["tp"]) > 0]
    assert all(int(r["tp"]) == 4 and int(r["tp"]) * int(r["pp"]) * int(r["dp"]) == 4 * int(r["procs"])
               for r in train)


def test_llm_scheduler_honours_placement(tmp_path):
    rc, own = _run(tmp_path, "own", "-s", "llm", "--system", "dgx-h100")
    rc2, spread = _run(tmp_path, "spread", "-s", "llm", "--system", "dgx-h100", "--placement", "spread")
    rc3, easy = _run(tmp_path, "easy", "-s", "easy", "--system", "dgx-h100", "--placement", "spread")
    assert rc == rc2 == rc3 == 0
    nodes = lambda out: [r["nodes"] for r in _rows(out)]  # noqa: E731
    assert nodes(spread) == nodes(easy) != nodes(own)           # the spread placer, same stream as the run's
    assert json.loads((spread / "summary.json").read_text())["scheduler_params"]["placement"] == "spread"
