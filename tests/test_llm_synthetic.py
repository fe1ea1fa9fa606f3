"""Synthetic LLM-cluster workload: calibration to AcmeTrace Seren, shapes, determinism, class defaults."""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.datasets.llm_synthetic import (ACME_SEREN, JOBS_PER_GPU_DAY, calibration, llm_workload, load_acme_summary,
                                    training_shape)
from hpctwin.twin.job_classes import PROFILES, class_columns, profile


@pytest.fixture(scope="module")
def wl():
    return llm_workload(30, 1024, seed=0)


def test_calibration_to_acme(wl):
    cal = calibration(wl)
    assert cal["med_gpu_num"][0] == 1.0
    assert cal["max_gpu"][0] == 1024.0
    assert 100 <= cal["med_run_time_gpu"][0] <= 140                   # target 122 s
    assert cal["avg_run_time_gpu"][0] == pytest.approx(1414.3, rel=0.2)
    assert cal["avg_gpu_num"][0] == pytest.approx(5.68, rel=0.2)
    for k in ("complete_rate_gpu", "cancel_rate_gpu", "fail_rate_gpu"):
        assert cal[k][0] == pytest.approx(cal[k][1], abs=0.015)
    # Seren's rate: 663,813 jobs / (2,288 GPUs x 184 days) per GPU-day
    assert JOBS_PER_GPU_DAY == pytest.approx(1.5768, abs=1e-4)
    assert abs(len(wl) - JOBS_PER_GPU_DAY * 1024 * 30) < 5 * np.sqrt(JOBS_PER_GPU_DAY * 1024 * 30)


def test_summary_file_matches_constants():
    row = load_acme_summary()
    for k, v in ACME_SEREN.items():
        assert row[k] == pytest.approx(v)


def test_shapes_and_sizes(wl):
    c = wl.columns
    train = np.isin(c["job_class"], ("llm_pretrain", "llm_finetune"))
    assert np.all(c["tp"][train] * c["pp"][train] * c["dp"][train] == c["gpus"][train])
    assert np.all(c["tp"][train] <= 8) and np.all(c["tp"][~train] == 0)
    assert np.all(wl.procs == np.maximum(1, np.ceil(c["gpus"] / 8)))
    assert np.all(wl.requested_time >= wl.runtime)
    assert training_shape(1024) == (8, 8, 16, ("175B", 175.0e9, 12288, 96, 8))
    assert training_shape(256)[:3] == (8, 4, 8)
    assert training_shape(8)[:3] == (8, 1, 1)
    assert training_shape(32, gpus_per_node=4)[:3] == (4, 1, 8)


def test_deterministic_and_jobs_override():
    a = llm_workload(2, 64, seed=5, jobs=500)
    b = llm_workload(2, 64, seed=5, jobs=500)
    c = llm_workload(2, 64, seed=6, jobs=500)
    assert len(a) == 500 and np.array_equal(a.runtime, b.runtime) and np.array_equal(a.submit, b.submit)
    assert not np.array_equal(a.runtime, c.runtime)
    assert a.columns["gpus"].max() <= 64
    m = llm_workload(2, 64, seed=5, jobs=500, max_groups=1, max_group_wait=600)
    train = np.isin(m.columns["job_class"], ("llm_pretrain", "llm_finetune"))
    assert np.all(m.columns["max_groups"][train] == 1) and np.all(m.columns["max_groups"][~train] == -1)
    assert np.all(m.columns["max_group_wait"][train] == 600)


def test_class_defaults():
    assert 0.8 <= profile("llm_pretrain").gpu_util <= 0.95 and 0.8 <= profile("llm_finetune").gpu_util <= 0.95
    # an inference service's power lies between its decode and prefill pools
    assert 0.45 < profile("llm_infer_service").gpu_util < 0.75
    cols = class_columns(np.array(["llm_eval", "", "debug"], dtype=object))
    assert cols["gpu_util"][0] == PROFILES["llm_eval"].gpu_util and np.isnan(cols["gpu_util"][1])
    assert cols["comm_kind"].tolist() == ["none", "", "none"]
    with pytest.raises(ValueError, match="unknown job class 'gpt'"):
        class_columns(np.array(["gpt"], dtype=object))
    with pytest.raises(ValueError, match="need days > 0"):
        llm_workload(0, 8)
