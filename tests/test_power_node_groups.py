"""Machines of several node types (``[[node_groups]]`` in a system file): the schema's errors
(file:line: field), hand-checked per-type node power and energies, power saving per type, and the
built-in LUMI file.

The test machine: 2 CPU nodes (2 CPUs of 90/280 W, memory 74.26 W, one 20 W NIC, 30 W NVMe: idle
304.26 W, full 684.26 W) then 2 GPU nodes (1 CPU, 4 GPUs of 88/560 W, 4 NICs: idle 626.26 W, full
2704.26 W); one chassis, no switches, efficiencies 1 (node power = rack power).
"""
from __future__ import annotations

import numpy as np
import pytest

import hpctwin
from hpctwin.twin.system import SystemError_, load_system

MIXED = """\
[system]
name = "mixed"
nodes = 4
cpus_per_node = 2

[power]
cpu_idle_w = 90.0
cpu_max_w = 280.0
mem_w = 74.26
nic_w = 20.0
nvme_w = 30.0
nodes_per_chassis = 4

[[node_groups]]
name = "cpu"
nodes = 2

[[node_groups]]
name = "gpu"
nodes = 2
cpus_per_node = 1
gpus_per_node = 4
gpu_idle_w = 88.0
gpu_max_w = 560.0
nics_per_node = 4
"""
CPU_IDLE, CPU_FULL = 2 * 90 + 74.26 + 20 + 30, 2 * 280 + 74.26 + 20 + 30
GPU_IDLE, GPU_FULL = 90 + 4 * 88 + 74.26 + 4 * 20 + 30, 280 + 4 * 560 + 74.26 + 4 * 20 + 30


def _system(tmp_path, text=MIXED):
    p = tmp_path / "mixed.toml"
    p.write_text(text)
    return p


def test_groups_are_read_in_node_order(tmp_path):
    s = load_system(str(_system(tmp_path)))
    assert [(g["name"], g["nodes"], g["cpus_per_node"], g["gpus_per_node"]) for g in s.node_groups] == [
        ("cpu", 2, 2, 0), ("gpu", 2, 1, 4)]
    assert s.node_groups[1]["power"] == {"gpu_idle_w": 88.0, "gpu_max_w": 560.0, "nics_per_node": 4}
    assert s.node_groups[1]["line"] == 18


@pytest.mark.parametrize("edit, message", [
    (("nodes = 2\ncpus_per_node = 1", "nodes = 3\ncpus_per_node = 1"),
     r"mixed.toml:14: node_groups: the groups have 5 nodes \(2 \+ 3\) but \[system\] nodes = 4; make them add up"),
    (("gpu_max_w = 560.0", "gpu_maxw = 560.0"),
     r"mixed.toml:24: node_groups\[1\].gpu_maxw: unknown key \(did you mean 'gpu_max_w' or 'cpu_max_w'\?\)"),
    (("gpu_max_w = 560.0", "gpu_max_w = 50.0"),
     r"mixed.toml:24: node_groups\[1\] \(gpu\): \[power\] key 'gpu_max_w' \(50\) is below gpu_idle_w \(88\)"),
    (('name = "gpu"', 'name = "cpu"'), r"mixed.toml:19: node_groups\[1\].name: 'cpu' is used by an earlier group"),
    (('name = "gpu"\n', ''), r"mixed.toml:18: node_groups\[1\].name: missing"),
    (("nics_per_node = 4", 'nics_per_node = "four"'), r"mixed.toml:25: node_groups\[1\].nics_per_node: expected an "
                                                      r"integer, got 'four'"),
    (("gpu_idle_w = 88.0\n", ""), r"mixed.toml:18: node_groups\[1\] \(gpu\): \[power\] key 'gpu_idle_w' is missing"),
])
def test_bad_groups_name_file_line_and_field(tmp_path, edit, message):
    with pytest.raises(SystemError_, match=message):
        load_system(str(_system(tmp_path, MIXED.replace(*edit))))


def _run(tmp_path, submit, runtime, procs, nodes=4, **ps):
    wl = hpctwin.Workload.from_arrays("t", submit=submit, runtime=runtime, procs=procs,
                                      requested_time=[10_000] * len(submit),
                                      columns={"cpu_util": np.ones(len(submit)), "gpu_util": np.ones(len(submit))})
    options = {"power_saving": {"enabled": True, **ps}} if ps else {}
    cfg = hpctwin.RunConfig(workload="t", nodes=nodes, scheduler="fcfs", power=True, system=str(_system(tmp_path)),
                            options=options)
    return hpctwin.run(cfg, workload=wl)


def test_each_node_type_draws_its_own_power(tmp_path):
    # job 1 on the CPU nodes 0-1 over [0, 100), job 2 on the GPU nodes 2-3 over [0, 100), job 3 on all four
    # over [100, 150): full utilisation
    res = _run(tmp_path, [0, 0, 10], [100, 100, 50], [2, 2, 4])
    j = res.jobs
    assert j["nodes"].tolist() == ["0-1", "2-3", "0-3"] and j["start"].tolist() == [0.0, 0.0, 100.0]
    assert j["energy_j"].tolist() == pytest.approx([2 * CPU_FULL * 100, 2 * GPU_FULL * 100,
                                                    (2 * CPU_FULL + 2 * GPU_FULL) * 50], rel=1e-12)
    s = res.summary
    assert s["power_node_groups"] == [{"name": "cpu", "nodes": 2, "idle_w": pytest.approx(CPU_IDLE), "max_w":
                                       pytest.approx(CPU_FULL)}, {"name": "gpu", "nodes": 2, "idle_w":
                                       pytest.approx(GPU_IDLE), "max_w": pytest.approx(GPU_FULL)}]
    assert s["idle_facility_power_w"] == pytest.approx(2 * CPU_IDLE + 2 * GPU_IDLE, rel=1e-12)
    assert s["max_facility_power_w"] == pytest.approx(2 * CPU_FULL + 2 * GPU_FULL, rel=1e-12)
    assert s["energy_idle_kwh"] == pytest.approx(0.0, abs=1e-12)       # no node idle over [0, 150]
    assert s["peak_electrical_power_w"] == pytest.approx(2 * CPU_FULL + 2 * GPU_FULL, rel=1e-12)


def test_idle_energy_per_node_type(tmp_path):
    # one CPU node busy over [0, 100); the other three idle
    res = _run(tmp_path, [0], [100], [1])
    idle = (CPU_IDLE + 2 * GPU_IDLE) * 100
    assert res.summary["energy_idle_kwh"] == pytest.approx(idle / 3.6e6, rel=1e-12)
    assert res.jobs["energy_j"][0] == pytest.approx(CPU_FULL * 100, rel=1e-12)


def test_power_saving_uses_each_types_idle_and_off_power(tmp_path):
    text = MIXED.replace("nodes_per_chassis = 4", "nodes_per_chassis = 4\nnode_off_w = 10.0").replace(
        "nics_per_node = 4", "nics_per_node = 4\nnode_off_w = 30.0")
    (tmp_path / "mixed.toml").write_text(text)
    wl = hpctwin.Workload.from_arrays("t", submit=[0, 500], runtime=[100, 100], procs=[1, 4],
                                      requested_time=[10_000] * 2)
    res = hpctwin.run(hpctwin.RunConfig(workload="t", nodes=4, scheduler="fcfs", power=True,
                                        system=str(tmp_path / "mixed.toml"),
                                        options={"power_saving": {"enabled": True, "suspend_time": 100}}), workload=wl)
    ps = res.summary["power_saving"]
    assert ps["watts"]["off_w"] == [10.0, 10.0, 30.0, 30.0]
    # node 0 idle from 100, the others from 0: powered down (shutdown = idle power) from 231 / 131 to 500
    saved = (500 - 231) * (CPU_IDLE - 10) + (500 - 131) * (CPU_IDLE - 10) + 2 * (500 - 131) * (GPU_IDLE - 30)
    assert ps["energy_saved_node_kwh"] == pytest.approx(saved / 3.6e6, rel=1e-12)
    assert res.jobs["start"].tolist() == [0.0, 560.0]


def test_unsupported_combinations_are_refused(tmp_path):
    from hpctwin.power.config import PowerConfigError
    with pytest.raises(PowerConfigError, match=r"node_groups\]\] describe 4 nodes but the run has 8; run with --nodes 4"):
        _run(tmp_path, [0], [10], [1], nodes=8)


def test_lumi_file_has_its_two_node_types():
    s = load_system("lumi")
    assert s.nodes == 5026 and [(g["name"], g["nodes"]) for g in s.node_groups] == [("LUMI-C", 2048), ("LUMI-G", 2978)]
    res = hpctwin.run(hpctwin.RunConfig(workload="synthetic:jobs=20,nodes=5026", nodes=5026, scheduler="fcfs",
                                        power=True, system="lumi"))
    g = {x["name"]: x for x in res.summary["power_node_groups"]}
    assert g["LUMI-C"]["idle_w"] == pytest.approx(2 * 90 + 74.26 + 20)          # no local storage
    assert g["LUMI-G"]["max_w"] == pytest.approx(280 + 4 * 560 + 74.26 + 4 * 20)
