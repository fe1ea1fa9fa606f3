"""GPU trace readers: hand-written files in each public schema, the real Alibaba files, error messages."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hpctwin.datasets.gpu_traces import (GPUTraceError, read_acme, read_alibaba_dlrm2025, read_alibaba_gpu2023,
                                 read_alibaba_gpu2023_nodes, read_helios, read_philly)
from hpctwin.datasets.registry import default_data_dir

DATA = Path(__file__).parent / "data"
SHARED = default_data_dir()


def test_acme_reader_values():
    wl = read_acme(DATA / "gpu_acme_seren.csv")
    assert len(wl) == 4                      # the 5th job never started
    assert wl.job_id.tolist() == [5778432, 5778469, 5778470, 5778471]
    assert wl.submit.tolist() == [0.0, 336.0, 398.0, 458.0]
    assert wl.runtime.tolist() == [117.0, 2693.0, 600.0, 120.0]
    assert wl.columns["recorded_start"].tolist() == [32.0, 349.0, 698.0, 458.0]
    assert wl.procs.tolist() == [1, 1, 4, 1]
    assert wl.columns["gpus"].tolist() == [8, 8, 32, 1]
    assert wl.columns["gpus_per_node"].tolist() == [8, 8, 8, 1]
    assert wl.columns["job_class"].tolist() == ["", "llm_pretrain", "llm_finetune", "llm_eval"]
    assert wl.status.tolist() == [0, 1, 5, 1]
    assert wl.user.tolist() == [0, 0, 1, 2]
    # 2023-03-01 00:18:22+08:00 = 2023-02-28 16:18:22 UTC
    assert wl.header["UnixStartTime"] == "1677601102"
    assert any("1 jobs never started" in n for n in wl.notes)


def test_helios_reader_values():
    wl = read_helios(DATA / "gpu_helios_venus.csv")
    assert len(wl) == 4
    assert wl.runtime.tolist() == [36848.0, 249.0, 675173.0, 3600.0]
    assert wl.submit.tolist() == [0.0, 26.0, 27.0, 539.0]
    assert wl.status.tolist() == [1, 0, 5, 0]           # NODE_FAIL counts as failed (README)
    assert wl.group.tolist() == [0, 1, 2, 0]
    assert wl.header["VCs"] == "vcJkd,vchbv,vcpDC"
    assert wl.procs.tolist() == [1, 1, 2, 1]
    assert wl.columns["gpus_per_node"].tolist() == [1, 4, 8, 8]
    assert set(wl.columns["job_class"]) == {""}


def test_philly_reader_values():
    wl = read_philly(DATA / "gpu_philly_job_log.json")
    assert len(wl) == 2
    assert wl.submit.tolist() == [0.0, 300.0]
    assert wl.runtime.tolist() == [3600.0, 900.0]        # sum of the attempts
    assert wl.columns["wall_runtime"].tolist() == [3600.0, 1500.0]
    assert wl.columns["attempts"].tolist() == [1, 2]
    assert wl.columns["recorded_start"].tolist() == [60.0, 900.0]
    assert wl.procs.tolist() == [2, 1]
    assert wl.columns["gpus"].tolist() == [8.0, 1.0]
    assert wl.status.tolist() == [1, 0]
    assert any("2 jobs have no complete attempt" in n for n in wl.notes)


def test_alibaba_2023_fixture():
    wl = read_alibaba_gpu2023(DATA / "gpu_alibaba_pods.csv")
    assert len(wl) == 6
    np.testing.assert_allclose(wl.columns["gpus"], [1.0, 0.46, 8.0, 1.0, 0.0, 0.0])
    assert wl.procs.tolist() == [1, 1, 8, 1, 0, 0]
    assert wl.status.tolist() == [-1, -1, 1, 0, -1, 1]
    assert np.isnan(wl.runtime[4]) and wl.columns["pending_time"][4] == 94.0
    assert wl.runtime[[0, 2, 3, 5]].tolist() == [12537496.0, 1332357.0, 1512.0, 290.0]
    assert wl.columns["gpu_spec"][3] == "V100M16|V100M32"
    nodes = read_alibaba_gpu2023_nodes(DATA / "gpu_alibaba_nodes.csv")
    assert nodes.gpus.tolist() == [0, 8, 2] and nodes.total_gpus == 10
    assert nodes.model.tolist() == ["", "V100M32", "T4"]


def test_dlrm_fixture():
    wl = read_alibaba_dlrm2025(DATA / "gpu_dlrm.csv")
    assert wl.submit.tolist() == [0.0, 1435629.0, 1000.0]
    assert wl.runtime.tolist() == [1435760.0, 131.0, 1435760.0 - 1010.0]
    assert wl.columns["before_start"].tolist() == [True, False, False]
    assert wl.columns["censored"].tolist() == [True, False, True]
    assert wl.procs.tolist() == [1, 0, 1]
    assert wl.columns["memory_mib"].tolist() == [122880, 327680, 122880]
    assert wl.group.tolist() == [0, 1, 0]
    assert set(wl.columns["job_class"]) == {"dl_infer_service"}


@pytest.mark.parametrize("reader,fname,needle", [
    (read_acme, "gpu_acme_bad_time.csv", "gpu_acme_bad_time.csv:3: field 'start_time': not a date-time"),
    (read_helios, "gpu_helios_bad_gpu.csv", "gpu_helios_bad_gpu.csv:4: field 'gpu_num': not a number"),
    (read_philly, "gpu_philly_bad_status.json", "job #1 (application_1_0002): field 'status': unknown value 'Exploded'"),
    (read_alibaba_gpu2023, "gpu_alibaba_pods_bad.csv",
     "gpu_alibaba_pods_bad.csv:3: field 'gpu_milli': a multi-GPU pod must ask for whole GPUs"),
    (read_alibaba_gpu2023, "gpu_alibaba_pods_badtime.csv",
     "gpu_alibaba_pods_badtime.csv:2: field 'deletion_time': earlier than creation_time"),
    (read_alibaba_dlrm2025, "gpu_dlrm_bad_role.csv", "gpu_dlrm_bad_role.csv:3: field 'role': unknown role"),
])
def test_reader_errors_name_file_line_field(reader, fname, needle):
    with pytest.raises(GPUTraceError) as e:
        reader(DATA / fname)
    assert needle in str(e.value)


def test_missing_header_field(tmp_path):
    p = tmp_path / "h.csv"
    p.write_text("job_id,user,node_num\n1,u,1\n")
    with pytest.raises(GPUTraceError, match=r"h.csv:1: header lacks field\(s\) 'gpu_num'"):
        read_acme(p)
    with pytest.raises(GPUTraceError, match="not valid JSON"):
        (tmp_path / "j.json").write_text("[{]")
        read_philly(tmp_path / "j.json")


@pytest.mark.skipif(SHARED is None or not (SHARED / "Alibaba-GPU-2023-openb").exists(), reason="shared data absent")
def test_real_alibaba_2023():
    wl = read_alibaba_gpu2023()
    nodes = read_alibaba_gpu2023_nodes()
    assert len(wl) == 8152 and len(nodes) == 1523 and nodes.total_gpus == 6212   # MANIFEST.md
    assert int(np.isnan(wl.runtime).sum()) == 897                                # Pending pods
    g = wl.columns["gpus"]
    assert np.all((g == wl.columns["num_gpu"]) | ((wl.columns["num_gpu"] == 1) & (g < 1)))


@pytest.mark.skipif(SHARED is None or not (SHARED / "Alibaba-GPU-2025-DLRM").exists(), reason="shared data absent")
def test_real_dlrm_2025():
    wl = read_alibaba_dlrm2025()
    assert len(wl) == 23871                                              # MANIFEST.md
    assert int(wl.columns["before_start"].sum()) == 7280
    assert int((wl.columns["role"] == "HN").sum()) == 7386
    assert np.all(wl.runtime >= 0)
