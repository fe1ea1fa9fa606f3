"""GPU traces state their machine: ``--allocation gpu`` takes the GPUs per node and the nodes from the
workload when not given (Alibaba 2023 node list, llm-synthetic), says so, and a run that barely loads
its machine gets a note naming ``--nodes`` (issue 26 item 3)."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from hpctwin.datasets.gpu_traces import (ALIBABA_2023_NODES, ALIBABA_2023_PODS, gpu_machine_header,
                                         read_alibaba_gpu2023, read_alibaba_gpu2023_nodes)
from hpctwin.twin.allocation import gpu_machine
from hpctwin.twin.config import RunConfig
from hpctwin.twin.errors import RunConfigError
from hpctwin.twin.plan import plan
from hpctwin.twin.results import low_load_note
from hpctwin.twin.run import run

DATA = Path(__file__).parent / "data"
MACHINE = ("openb_node_list_all_node.csv: 10 GPUs on 2 GPU nodes (1 x 8, 1 x 2 GPUs), as 2 nodes x 8 GPUs")


@pytest.fixture()
def trace(tmp_path) -> Path:
    """The test pod list beside its node list (8 + 2 GPUs, one CPU-only node), as in the real trace folder."""
    d = tmp_path / "Alibaba-GPU-2023-openb"
    d.mkdir()
    shutil.copy(DATA / "gpu_alibaba_pods.csv", d / ALIBABA_2023_PODS)
    shutil.copy(DATA / "gpu_alibaba_nodes.csv", d / ALIBABA_2023_NODES)
    return d / ALIBABA_2023_PODS


def test_node_list_header():
    h = gpu_machine_header(read_alibaba_gpu2023_nodes(DATA / "gpu_alibaba_nodes.csv"))
    assert h == {"GPUNodes": "2", "GPUsPerNode": "8",
                 "GPUMachine": "gpu_alibaba_nodes.csv: 10 GPUs on 2 GPU nodes (1 x 8, 1 x 2 GPUs), as 2 nodes x 8 GPUs"}


def test_reader_reads_the_node_list_beside_it(trace):
    wl = read_alibaba_gpu2023(trace)
    assert wl.header["GPUNodes"] == "2" and wl.header["GPUsPerNode"] == "8" and wl.header["GPUMachine"] == MACHINE
    assert gpu_machine(wl) == (2, 8, MACHINE)
    alone = read_alibaba_gpu2023(DATA / "gpu_alibaba_pods.csv")          # no node list beside it
    assert "GPUNodes" not in alone.header and gpu_machine(alone) is None
    assert "GPUNodes" not in read_alibaba_gpu2023(trace, nodes=None).header
    assert np.array_equal(alone.submit, wl.submit) and np.array_equal(alone.procs, wl.procs)


def test_run_takes_the_trace_machine(trace, tmp_path):
    r = run(RunConfig(workload=str(trace), allocation="gpu", scheduler="gpu-pack", out=str(tmp_path / "a")))
    s = r.summary
    assert s["allocation"] == {"units": "gpu", "gpus_per_node": 8, "nodes": 2}
    assert s["machine_units"] == 16
    assert s["machine_size_source"] == "the workload's machine (see the notes): 2 nodes x 8 GPUs"
    assert (f"allocation gpu: --gpus-per-node and --nodes from the workload's machine ({MACHINE}); give them to "
            "model another machine") in s["notes"]
    # the same machine given on the command line: the same jobs.csv bytes, and no such note
    r2 = run(RunConfig(workload=str(trace), allocation="gpu", scheduler="gpu-pack", nodes=2, gpus_per_node=8,
                       out=str(tmp_path / "b")))
    assert (tmp_path / "a" / "jobs.csv").read_bytes() == (tmp_path / "b" / "jobs.csv").read_bytes()
    assert not any("from the workload's machine" in n for n in r2.summary["notes"])


def test_given_gpus_per_node_keeps_the_trace_gpus(trace):
    s = run(RunConfig(workload=str(trace), allocation="gpu", scheduler="gpu-pack", gpus_per_node=4)).summary
    assert s["allocation"] == {"units": "gpu", "gpus_per_node": 4, "nodes": 4}       # 16 GPUs in 4-GPU nodes
    assert any(n.startswith("allocation gpu: --nodes from the workload's machine") for n in s["notes"])
    s = run(RunConfig(workload=str(trace), allocation="gpu", scheduler="gpu-pack", nodes=3)).summary
    assert s["allocation"] == {"units": "gpu", "gpus_per_node": 8, "nodes": 3}
    assert any(n.startswith("allocation gpu: --gpus-per-node from the workload's machine") for n in s["notes"])


def test_llm_synthetic_states_its_machine():
    s = run(RunConfig(workload="llm-synthetic:days=2,gpus=64,jobs=40", allocation="gpu", scheduler="gpu-pack")).summary
    assert s["allocation"] == {"units": "gpu", "gpus_per_node": 8, "nodes": 8} and s["machine_units"] == 64


def test_no_machine_one_error_naming_both(tmp_path):
    with pytest.raises(RunConfigError, match=r"needs the GPUs per node and the nodes: --gpus-per-node G --nodes N"):
        plan(RunConfig(workload=str(tmp_path / "nope.csv"), allocation="gpu"))
    with pytest.raises(RunConfigError, match=r"needs the GPUs per node: --gpus-per-node G, or"):
        plan(RunConfig(workload=str(tmp_path / "nope.csv"), allocation="gpu", nodes=2))
    alone = tmp_path / "pods.csv"                                   # a pod list without its node list
    shutil.copy(DATA / "gpu_alibaba_pods.csv", alone)
    with pytest.raises(RunConfigError, match="needs the GPUs per node"):
        plan(RunConfig(workload=str(alone), allocation="gpu"))


def test_low_load_note():
    out = {"utilisation": 0.0017, "max_wait_s": 0.0}
    assert low_load_note(out, 6216, 8) == (
        "the run barely loads its machine: utilisation 0.17 %, no job waited, so scheduling policies cannot "
        "differ on it; a smaller machine loads it more (--nodes N, now 777 nodes)")
    assert low_load_note(out, 100).endswith("(--nodes N, now 100 units)")
    assert low_load_note({"utilisation": 0.0017, "max_wait_s": 3.0}, 100) is None     # a job waited
    assert low_load_note({"utilisation": 0.05, "max_wait_s": 0.0}, 100) is None       # 5 % is load enough
    assert low_load_note({"utilisation": float("nan"), "max_wait_s": 0.0}, 100) is None
    assert low_load_note({}, 100) is None


def test_low_load_note_in_a_run(trace):
    s = run(RunConfig(workload=str(trace), allocation="gpu", scheduler="gpu-pack", nodes=40, gpus_per_node=8)).summary
    assert s["utilisation"] < 0.05 and s["max_wait_s"] == 0
    assert any(n.startswith("the run barely loads its machine: utilisation ")
               and n.endswith("(--nodes N, now 40 nodes)") for n in s["notes"])
    busy = run(RunConfig(workload="synthetic:jobs=200", nodes=16, scheduler="fcfs", seed=1)).summary
    assert busy["max_wait_s"] > 0 and not any("barely loads" in n for n in busy["notes"])
