"""Slurm power saving (`hpctwin.power.suspend`, ``--set power_saving.*``): hand-checked suspends,
boots, rates, exclusions, energies, the slurm.conf keys and the errors.

The machine is the built-in ``generic`` system resized to 4 nodes: a node's idle component power is
2 x 90 (CPUs) + 74.26 (memory) + 20 (NIC) + 30 (NVMe) = 304.26 W; its two switches draw 500 W.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import hpctwin
from hpctwin.twin.errors import RunConfigError

IDLE_W = 2 * 90.0 + 74.26 + 20.0 + 30.0
SWITCH_W = 2 * 250.0


def _run(submit, runtime, procs, req=None, nodes=4, scheduler="fcfs", power=True, **ps):
    wl = hpctwin.Workload.from_arrays("t", submit=submit, runtime=runtime, procs=procs,
                                      requested_time=req if req is not None else [10_000] * len(submit))
    options = {"power_saving": {"enabled": True, **ps}}
    if power:
        options["power"] = {"cooling": False}
    cfg = hpctwin.RunConfig(workload="t", nodes=nodes, scheduler=scheduler, power=power,
                            system="generic" if power else None, options=options)
    return hpctwin.run(cfg, workload=wl)


def test_idle_nodes_power_down_and_a_job_waits_for_the_boot():
    # job 1 on nodes 0-1 over [0, 100); nodes 2-3 idle from 0, nodes 0-1 from 100. SuspendTime 100:
    # powering down at 101 (2-3) and 201 (0-1) (Slurm: last_busy < now - SuspendTime on whole seconds),
    # out of service SuspendTimeout + 1 = 31 s, shut down after 30 s (shutdown_s = SuspendTimeout),
    # powered down from 131 / 231. Job 2 at 500 on all four: ResumeTimeout 60 s boots, starts at 560.
    res = _run([0, 500], [100, 100], [2, 4], suspend_time=100, off_w=10.0)
    j = res.jobs
    assert j["start"].tolist() == [0.0, 560.0] and j["end"].tolist() == [100.0, 660.0]
    assert j["wait"].tolist() == [0.0, 60.0] and j["boot_delay_s"].tolist() == [0.0, 60.0]
    ps = res.summary["power_saving"]
    assert (ps["suspends"], ps["resumes"], ps["jobs_delayed"]) == (4, 4, 1)
    assert ps["node_hours_powering_down"] == pytest.approx(4 * 31 / 3600, rel=1e-12)
    assert ps["node_hours_powered_down"] == pytest.approx((2 * (500 - 132) + 2 * (500 - 232)) / 3600, rel=1e-12)
    assert ps["node_hours_powering_up"] == pytest.approx(4 * 60 / 3600, rel=1e-12)
    # saved: off (10 W instead of idle) from 131 and 231 to 500; shutdown and boot draw idle power
    saved = (2 * 369 + 2 * 269) * (IDLE_W - 10.0)
    assert ps["energy_saved_node_kwh"] == pytest.approx(saved / 3.6e6, rel=1e-12)
    # the idle category over [0, 660]: each node 191 s at idle power outside its jobs (idle, shutdown,
    # boot), then off at 10 W; plus the switches
    idle = 4 * 191 * IDLE_W + 2 * 369 * 10.0 + 2 * 269 * 10.0 + SWITCH_W * 660
    assert res.summary["energy_idle_kwh"] == pytest.approx(idle / 3.6e6, rel=1e-12)
    # a job's energy counts from the start of its run (after the boot)
    assert j["energy_j"][1] == pytest.approx(j["avg_power_w"][1] * 100.0, rel=1e-12)
    s = res.summary
    total = s["energy_jobs_kwh"] + s["energy_idle_kwh"] + s["energy_loss_kwh"] + s["energy_cooling_kwh"]
    assert total == pytest.approx(s["energy_facility_kwh"], rel=1e-12)


def test_series_count_the_nodes_in_each_state():
    res = _run([0, 500], [100, 100], [2, 4], suspend_time=100, off_w=10.0)
    t = res.timeseries["time"][0]
    dt = t[1] - t[0]
    for name, hours in (("nodes_powered_down", "node_hours_powered_down"),
                        ("nodes_powering_up", "node_hours_powering_up")):
        v = res.timeseries[name][0]
        assert float(np.sum(v * dt)) / 3600 == pytest.approx(res.summary["power_saving"][hours], rel=1e-9)
    saved = res.timeseries["power_saved_w"][0]
    assert float(np.sum(saved * dt)) / 3.6e6 == pytest.approx(res.summary["power_saving"]["energy_saved_node_kwh"],
                                                             rel=1e-9)


def test_excluded_nodes_never_power_down():
    res = _run([0, 500], [100, 100], [2, 4], suspend_time=100, off_w=10.0, suspend_exc_nodes="2-3")
    ps = res.summary["power_saving"]
    assert ps["excluded_nodes"] == 2 and ps["suspends"] == 2 and ps["resumes"] == 2
    assert ps["node_hours_powered_down"] == pytest.approx(2 * (500 - 232) / 3600, rel=1e-12)
    assert res.jobs["start"].tolist() == [0.0, 560.0]       # nodes 0-1 still boot


def test_suspend_and_resume_rates():
    # job 1: node 0 over [0, 10). SuspendTime 100, SuspendRate 1/min: at 101 nodes 1, 2, 3 are due, node 1
    # goes; node 0 (due 111) goes at 161, node 2 at 221, node 3 at 281 (lowest first each minute).
    # Powered down 31 s later. Job 2 at 1000 on all four, ResumeRate 2/min: nodes 0-1 resume at 1000,
    # nodes 2-3 at 1060, up at 1120: the run starts at 1120.
    res = _run([0, 1000], [10, 50], [1, 4], suspend_time=100, off_w=0.0, suspend_rate=1, resume_rate=2)
    ps = res.summary["power_saving"]
    assert ps["suspends"] == 4 and ps["suspends_deferred_by_rate"] == 5 and ps["resumes_deferred_by_rate"] == 2
    off = (1000 - 132) + (1000 - 192) + (1060 - 252) + (1060 - 312)     # powered down until resumed
    assert ps["node_hours_powered_down"] == pytest.approx(off / 3600, rel=1e-12)
    assert ps["node_hours_powering_up"] == pytest.approx(4 * 60 / 3600, rel=1e-12)
    assert res.jobs["start"].tolist() == [0.0, 1120.0] and res.jobs["boot_delay_s"].tolist() == [0.0, 120.0]


def test_the_time_limit_counts_from_the_boot_and_the_policy_sees_the_nodes_taken():
    # job 2 (limit 50 s, runtime 100 s) is killed 50 s after its run starts (Slurm resets end_time =
    # start + limit in job_config_fini); job 3 arrives during the boot and waits for the nodes job 2 holds
    res = _run([0, 500, 530], [100, 100, 10], [2, 4, 1], req=[200, 50, 100], suspend_time=100, off_w=10.0)
    j = res.jobs
    assert j["start"].tolist() == [0.0, 560.0, 610.0] and j["end"].tolist() == [100.0, 610.0, 620.0]
    assert j["state"].tolist() == ["COMPLETED", "TIMEOUT", "COMPLETED"] and j["boot_delay_s"].tolist() == [0, 60, 0]


def test_boot_and_shutdown_durations_and_watts():
    # a 20 s boot at 400 W and a 10 s shutdown at 50 W; off at 5 W
    res = _run([0, 500], [100, 100], [2, 4], suspend_time=100, off_w=5.0, boot_s=20, boot_w=400.0,
               shutdown_s=10, shutdown_w=50.0)
    assert res.jobs["start"].tolist() == [0.0, 520.0]
    ps = res.summary["power_saving"]
    # off from 111 / 211 (shutdown 10 s), out of service until 132 / 232 as before
    saved = (2 * (500 - 111) + 2 * (500 - 211)) * (IDLE_W - 5.0) + 4 * 10 * (IDLE_W - 50.0) - 4 * 20 * (400.0 - IDLE_W)
    assert ps["energy_saved_node_kwh"] == pytest.approx(saved / 3.6e6, rel=1e-12)
    assert ps["sources"]["boot_s"] == "option power_saving.boot_s"


def test_a_suspend_time_never_reached_changes_nothing():
    wl = hpctwin.Workload.from_arrays("t", submit=[0, 10, 20, 400], runtime=[100, 50, 30, 20],
                                      procs=[4, 2, 8, 3], requested_time=[120, 60, 60, 60])
    for sched in ("fcfs", "easy", "slurm"):
        base = hpctwin.run(hpctwin.RunConfig(workload="t", nodes=8, scheduler=sched), workload=wl)
        ps = hpctwin.run(hpctwin.RunConfig(workload="t", nodes=8, scheduler=sched,
                                           options={"power_saving": {"enabled": True, "suspend_time": 10 ** 6}}),
                         workload=wl)
        for col in ("start", "end", "nodes"):
            assert ps.jobs[col].tolist() == base.jobs[col].tolist(), (sched, col)
        assert ps.summary["power_saving"]["suspends"] == 0


def test_without_the_power_model_only_the_timing_changes():
    res = _run([0, 500], [100, 100], [2, 4], power=False, suspend_time=100)
    assert res.jobs["start"].tolist() == [0.0, 560.0]
    assert "power_saved_w" not in res.timeseries and "watts" not in res.summary["power_saving"]


# ---------------------------------------------------------------------------- slurm.conf
CONF = """\
ClusterName=t
NodeName=n[0-3] CPUs=1
PartitionName=a Nodes=n[0-1] Default=YES
PartitionName=b Nodes=n[2-3] ResumeTimeout=90
SuspendTime=100
SuspendProgram=/usr/local/sbin/suspend
ResumeProgram=/usr/local/sbin/resume
SuspendExcParts=b
"""


def _conf_run(tmp_path, text, **ps):
    path = tmp_path / "slurm.conf"
    path.write_text(text)
    wl = hpctwin.Workload.from_arrays("t", submit=[0, 500], runtime=[100, 100], procs=[2, 2],
                                      requested_time=[200, 200])
    cfg = hpctwin.RunConfig(workload="t", nodes=4, scheduler="slurm",
                            options={"scheduler": {"slurm_conf": str(path)},
                                     "power_saving": {"enabled": True, **ps}})
    return hpctwin.run(cfg, workload=wl), path


def test_slurm_conf_keys_are_read_with_their_lines(tmp_path):
    res, path = _conf_run(tmp_path, CONF)
    ps = res.summary["power_saving"]
    assert ps["suspend_time_s"] == 100.0 and ps["sources"]["suspend_time"] == f"{path}:5 SuspendTime"
    assert ps["excluded_nodes"] == 2 and ps["sources"]["excluded"] == f"{path}:8: SuspendExcParts"
    assert ps["resume_timeout_s"] == [60.0, 60.0, 90.0, 90.0]
    assert ps["suspends"] == 2 and res.jobs["boot_delay_s"].tolist() == [0.0, 60.0]
    res2, _ = _conf_run(tmp_path, CONF, suspend_time=300, suspend_exc_parts="")   # options win
    ps2 = res2.summary["power_saving"]
    assert ps2["sources"]["suspend_time"] == "option power_saving.suspend_time" and ps2["suspend_time_s"] == 300.0
    assert ps2["excluded_nodes"] == 0 and ps2["suspends"] == 4


@pytest.mark.parametrize("edit, message", [
    (("SuspendTime=100", "SuspendTime=soon"), r"slurm.conf:5: SuspendTime: expected whole seconds >= 0 or "
                                              r"NONE/INFINITE/-1 \(off\), got 'soon'"),
    (("SuspendExcParts=b", "SuspendExcParts=bb"), r"slurm.conf:8: SuspendExcParts: unknown partition 'bb' "
                                                  r"\(did you mean 'b'\?\); partitions: a, b"),
    (("ResumeProgram=/usr/local/sbin/resume\n", ""), r"SuspendTime is set but ResumeProgram not: Slurm 22.05 then "
                                                     r"disables power saving"),
    (("ResumeTimeout=90", "ResumeTimeout=ninety"), r"slurm.conf:4: PartitionName=b ResumeTimeout: expected seconds"),
    (("SuspendExcParts=b", "SuspendExcNodes=n[0-1]:1"), r"SuspendExcNodes with a node count \('n\[0-1\]:1'\) is "
                                                        r"not modelled"),
    (("SuspendExcParts=b", "SuspendExcNodes=n9"), r"slurm.conf:8: SuspendExcNodes: node 'n9' is not defined by a "
                                                  r"NodeName line"),
])
def test_bad_slurm_conf_keys_name_file_line_and_key(tmp_path, edit, message):
    with pytest.raises(RunConfigError, match=message):
        _conf_run(tmp_path, CONF.replace(*edit))


# ---------------------------------------------------------------------------- errors
@pytest.mark.parametrize("ps, power, message", [
    ({}, False, r"power_saving is on but no node can power down: SuspendTime is off \(NONE\) \(Slurm 22.05 default"),
    ({"suspend_time": 100}, True, r"power_saving: the power of a powered-down node is not known: give --set "
                                  r"power_saving.off_w=WATTS"),
    ({"suspend_time": 100, "boot_s": 90}, False, r"power_saving.boot_s \(90 s\) is longer than the ResumeTimeout of "
                                                 r"node 0 \(60 s"),
    ({"suspend_time": 100, "shutdown_s": 40}, False, r"power_saving.shutdown_s \(40 s\) is longer than the "
                                                     r"SuspendTimeout"),
    ({"suspend_time": 100, "suspend_exc_nodes": "2-7"}, False, r"node index 7 is outside the machine's nodes 0-3"),
    ({"suspend_time": -0.5}, False, r"power_saving.suspend_time: -1 \(off\) or seconds >= 0, got -0.5"),
    ({"suspend_time": 100, "suspend_exc_parts": "gpu"}, False, r"SuspendExcParts names partitions, but the run has "
                                                               r"no slurm.conf"),
])
def test_bad_options_are_refused(ps, power, message):
    with pytest.raises(RunConfigError, match=message):
        _run([0, 500], [100, 100], [2, 4], power=power, **ps)


def test_option_ranges_and_combinations_are_checked():
    with pytest.raises(RunConfigError, match=r"power_saving.suspend_rate"):
        _run([0], [10], [1], power=False, suspend_time=10, suspend_rate=-1)
    with pytest.raises(RunConfigError, match=r"power_saving with --failures on is not supported yet"):
        wl = hpctwin.Workload.from_arrays("t", submit=[0], runtime=[10], procs=[1], requested_time=[20])
        hpctwin.run(hpctwin.RunConfig(workload="t", nodes=4, scheduler="easy",
                                      options={"failures": {"enabled": True},
                                               "power_saving": {"enabled": True, "suspend_time": 10}}), workload=wl)
    with pytest.raises(RunConfigError, match=r"power_saving with a facility power cap"):
        hpctwin.run(hpctwin.RunConfig(workload="t", nodes=4, scheduler="easy", power=True, system="generic",
                                      power_cap=1e6, options={"power": {"cooling": False}, "power_saving": {
                                          "enabled": True, "suspend_time": 10, "off_w": 1.0}}), workload=wl)


def test_policies_read_the_power_states_through_the_model_view():
    seen = []

    class Peek(hpctwin.Scheduler):
        name = "peek"
        needs_models = ("power_saving",)

        def schedule(self, now, queue, cluster):
            seen.append((now, self.ctx.model("power_saving").powered_down().tolist()))
            return [int(j) for j in queue if self.jobs.procs[j] <= cluster.free][:1]

    wl = hpctwin.Workload.from_arrays("t", submit=[0, 500], runtime=[100, 100], procs=[2, 4],
                                      requested_time=[200, 200])
    hpctwin.run(hpctwin.RunConfig(workload="t", nodes=4, scheduler=Peek, options={
        "power_saving": {"enabled": True, "suspend_time": 100}}), workload=wl)
    assert seen == [(0.0, [False] * 4), (500.0, [True] * 4)]
    assert math.isfinite(IDLE_W)
