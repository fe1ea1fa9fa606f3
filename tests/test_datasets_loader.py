"""datasets.loader: every MANIFEST dataset by name or detected format; datasets.registry: data directory
and the sha256-verified fetch (tested offline with file:// URLs, never the internet)."""
from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest

from hpctwin.datasets import registry
from hpctwin.datasets.loader import FORMATS, detect_format, load_workload
from hpctwin.datasets.registry import DatasetError

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("name, fmt", [("gpu_alibaba_pods.csv", "alibaba-gpu"), ("gpu_dlrm.csv", "alibaba-dlrm"),
                                       ("gpu_acme_seren.csv", "acme"), ("gpu_helios_venus.csv", "helios"),
                                       ("gpu_philly_job_log.json", "philly"), ("sacct_mixed.txt", "sacct")])
def test_formats_are_detected_from_content(name, fmt):
    assert detect_format(DATA / name) == fmt
    wl = load_workload(str(DATA / name))
    assert len(wl) > 0
    assert len(load_workload(f"{fmt}:{DATA / name}")) == len(wl)      # named format: same jobs


def test_swf_detected_without_suffix(tmp_path):
    p = tmp_path / "log.txt"
    p.write_text("1 0 5 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n")
    assert detect_format(p) == "swf" and len(load_workload(str(p))) == 1


def test_every_registry_entry_names_a_known_format_or_says_why():
    for e in registry.load_registry().values():
        assert e.format in FORMATS or e.note, e.name


def _present(name: str) -> bool:
    e = registry.lookup(name)
    return e.path(registry.default_data_dir()).exists()


def test_alibaba_pods_next_to_their_node_list_get_the_cluster_size(tmp_path):
    import shutil  # noqa: PLC0415
    shutil.copy(DATA / "gpu_alibaba_pods.csv", tmp_path / "openb_pod_list_default.csv")
    shutil.copy(DATA / "gpu_alibaba_nodes.csv", tmp_path / "openb_node_list_all_node.csv")
    from hpctwin.datasets.gpu_traces import read_alibaba_gpu2023_nodes  # noqa: PLC0415
    total = read_alibaba_gpu2023_nodes(DATA / "gpu_alibaba_nodes.csv").total_gpus
    wl = load_workload(str(tmp_path / "openb_pod_list_default.csv"))
    assert wl.machine_size == total and "openb_node_list_all_node.csv" in wl.machine_size_source


@pytest.mark.parametrize("name, jobs, gpus", [("Alibaba-GPU-2023-openb", 8152, True), ("Alibaba-GPU-2025-DLRM", 23871, True),
                                              ("SURF-OpenDT", 7850, False)])
def test_non_swf_datasets_load_by_name(name, jobs, gpus):
    if not _present(name):
        pytest.skip(f"{name} not in the data directory")
    wl = load_workload(name)
    assert len(wl) == jobs and wl.name == name and ("gpus" in wl.columns) == gpus


@pytest.mark.parametrize("name, text", [("AcmeTrace-summary", "no job records"), ("Helios-Venus-VC", "no job records"),
                                        ("LLM-serving", "hpctwin serve"), ("Bine-allocations", "not a workload")])
def test_datasets_that_are_not_job_logs_say_what_they_are(name, text):
    with pytest.raises(DatasetError, match=text):
        load_workload(name)


def test_data_dir_order(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCTWIN_DATA", str(tmp_path / "env"))
    assert registry.default_data_dir(tmp_path / "flag") == tmp_path / "flag"
    assert registry.default_data_dir() == tmp_path / "env"
    monkeypatch.delenv("HPCTWIN_DATA")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(registry, "PROJECT_ROOT", tmp_path / "nowhere")
    monkeypatch.setattr(registry, "user_cache_dir", lambda: tmp_path / "cache")
    assert registry.default_data_dir() == tmp_path / "cache"          # no ../shared/datasets here
    (tmp_path.parent / "shared" / "datasets").mkdir(parents=True, exist_ok=True)
    try:
        assert registry.default_data_dir() == tmp_path.parent / "shared" / "datasets"
    finally:
        (tmp_path.parent / "shared" / "datasets").rmdir()
        (tmp_path.parent / "shared").rmdir()


def test_platformdirs_cache_folder():
    assert registry.user_cache_dir().name == "datasets" and "hpctwin" in str(registry.user_cache_dir())


def test_archive_url_is_the_parallel_workloads_archive():
    e = registry.lookup("KTH-SP2")
    assert e.archive_url == "https://www.cs.huji.ac.il/labs/parallel/workload/l_kth_sp2/KTH-SP2-1996-2.1-cln.swf.gz"
    assert e.urls()[0] == e.archive_url and e.urls()[1] == e.url
    assert registry.lookup("Lublin-256").archive_url is None        # not an archive log


def test_fetch_falls_back_to_the_mirror_and_verifies_sha256(tmp_path, monkeypatch):
    payload = b"; MaxProcs: 4\n1 0 -1 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n"
    good = tmp_path / "good.swf.gz"
    good.write_bytes(payload)
    bad = tmp_path / "tampered.swf.gz"
    bad.write_bytes(b"tampered")
    entry = replace(registry.lookup("KTH-SP2"), sha256=hashlib.sha256(payload).hexdigest())
    monkeypatch.setattr(registry, "lookup", lambda name: entry)
    urls = [(tmp_path / "absent.gz").as_uri(), bad.as_uri(), good.as_uri()]
    p = registry.fetch("KTH-SP2", tmp_path / "data", urls=urls)
    assert p.read_bytes() == payload and not list(p.parent.glob("*.part"))
    with pytest.raises(DatasetError, match="no source gave the expected file.*download from .*absent.gz failed.*"
                                           "sha256 mismatch for .*tampered"):
        registry.fetch("KTH-SP2", tmp_path / "data2", urls=urls[:2])
    assert not [f for f in (tmp_path / "data2").rglob("*") if f.is_file()]


def test_fetch_command_uses_the_data_dir(tmp_path, monkeypatch, capsys):
    from hpctwin.twin.cli import main  # noqa: PLC0415
    payload = b"; MaxProcs: 4\n1 0 -1 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n"
    src = tmp_path / "src.swf.gz"
    src.write_bytes(payload)
    entry = replace(registry.lookup("KTH-SP2"), url=src.as_uri(), info="", sha256=hashlib.sha256(payload).hexdigest())
    monkeypatch.setattr(registry, "lookup", lambda name: entry)
    monkeypatch.setenv("HPCTWIN_DATA", str(tmp_path / "d"))
    assert main(["datasets", "fetch", "KTH-SP2"]) == 0
    assert (tmp_path / "d" / entry.dir / entry.file).read_bytes() == payload
    assert "sha256 verified" in capsys.readouterr().out


def test_fetch_of_a_dataset_without_a_single_file_says_so():
    with pytest.raises(DatasetError, match="no single download"):
        registry.fetch("LLM-serving")


def test_gpu_allocation_runs_a_gpu_trace_from_the_cli(tmp_path):
    """Issue 13 item 3: --allocation gpu had no workload the CLI could load."""
    import json  # noqa: PLC0415

    from hpctwin.twin.cli import main  # noqa: PLC0415
    out = tmp_path / "run"
    assert main(["run", "-w", f"alibaba-gpu:{DATA / 'gpu_alibaba_pods.csv'}", "--allocation", "gpu",
                 "--gpus-per-node", "8", "--nodes", "4", "-o", str(out), "-q"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["allocation"] == {"units": "gpu", "gpus_per_node": 8, "nodes": 4}
    assert s["accounting"]["balanced"]


def test_llm_scheduler_runs_an_llm_workload(tmp_path):
    from hpctwin.twin.cli import main  # noqa: PLC0415
    assert main(["run", "-w", "llm-synthetic:days=0.5,gpus=64,seed=3", "-s", "llm", "--system", "dgx-h100",
                 "--nodes", "8", "-o", str(tmp_path / "run"), "-q"]) == 0
