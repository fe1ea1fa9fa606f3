"""Issue 27 loose ends of the Slurm-like policy: (1) with the power_saving model it prefers awake idle
nodes to powered-down ones, as Slurm 22.05's ``_build_node_list`` (node_scheduler.c) gives powered-down
nodes the weight INFINITE - 1 (`schedulers/slurm_power.py`), under select/linear and select/cons_tres;
(2) node-sharing runs record each job's GPUs and memory in ``jobs.csv`` (``gpus_alloc``,
``mem_alloc_mb``, through the policy's ``job_columns`` hook) and the conformance check
`assert_tres_exclusive` reads them.

Power-saving timeline (SuspendTime 100 s, SuspendTimeout 30 s, ResumeTimeout 60 s = the boot): a node
idle since t powers down at t + 101, is out of service until t + 132 and powered down after that; a job
given a powered-down node starts 60 s later (``boot_delay_s``).
"""
from __future__ import annotations

import numpy as np
import pytest

import hpctwin.schedulers.slurm as slurm_mod
from hpctwin.schedulers.checks import ConformanceError, assert_tres_exclusive
from hpctwin.schedulers.slurm import make_slurm_scheduler
from hpctwin.schedulers.slurm_power import POWERED_DOWN_WEIGHT, awake_first
from hpctwin.schedulers.slurm_tres import (Ledger, TresJobs, TresMachine, alloc_columns, eval_nodes,
                                           parse_alloc)
from hpctwin.twin.run import RunConfig, run
from hpctwin.twin.workload import Workload

pytestmark = pytest.mark.filterwarnings("ignore:.*read but not modelled")


def _run(tmp_path, submit, runtime, procs, nodes, conf=None, cols=None, power_saving=True, aware=True):
    """The Slurm-like policy on ``nodes`` units; ``aware`` False hides the model from the policy
    (the node choice of 22.05 without its powered-down weight), not from the run."""
    wl = Workload.from_arrays("t", submit=submit, runtime=runtime, procs=procs, requested_time=runtime,
                              job_id=np.arange(1, len(submit) + 1), columns=cols or {})
    opts = {"scheduler": {}}
    if conf:
        f = tmp_path / "slurm.conf"
        f.write_text(conf)
        opts["scheduler"]["slurm_conf"] = str(f)
    if power_saving:
        opts["power_saving"] = {"enabled": True, "suspend_time": 100}
    orig = slurm_mod.power_view
    if not aware:
        slurm_mod.power_view = lambda ctx: None
    try:
        r = run(RunConfig(workload="t", nodes=nodes, scheduler="slurm", options=opts), workload=wl)
    finally:
        slurm_mod.power_view = orig
    return r.jobs


# ---------------------------------------------------------------- power saving: select/linear
def test_linear_main_pass_takes_an_awake_node(tmp_path):
    """Job 1 on nodes 0-1 until 100, job 2 on nodes 2-3 until 500: nodes 0-1 are powered down from 232,
    2-3 idle and awake from 500. Job 3 (1 node) at 520: _job_test on the four idle nodes would take
    node 0 (one consecutive run, its low end) and wait 60 s for the boot; 22.05 tries the awake set
    first: node 2, at once."""
    args = ([0, 0, 520], [100, 500, 50], [2, 2, 1], 4)
    aware = _run(tmp_path, *args)
    assert aware.nodes.tolist() == ["0-1", "2-3", "2"] and aware.start.tolist() == [0.0, 0.0, 520.0]
    assert aware.boot_delay_s.tolist() == [0.0, 0.0, 0.0]
    blind = _run(tmp_path, *args, aware=False)
    assert blind.nodes.tolist()[2] == "0" and blind.start.tolist()[2] == 580.0
    assert blind.boot_delay_s.tolist()[2] == 60.0
    without = _run(tmp_path, *args, power_saving=False)      # no model: the node choice of before
    assert without.nodes.tolist()[2] == "0" and without.start.tolist()[2] == 520.0
    assert "boot_delay_s" not in without.columns


def test_linear_takes_powered_down_nodes_when_the_awake_ones_are_too_few(tmp_path):
    """Job 3 needs 3 nodes at 520: only nodes 2-3 are awake, so the powered-down set is added and
    _job_test takes nodes 0-2 of the four (boot: starts at 580)."""
    jobs = _run(tmp_path, [0, 0, 520], [100, 500, 50], [2, 2, 3], 4)
    assert jobs.nodes.tolist()[2] == "0-2" and jobs.start.tolist()[2] == 580.0


def test_linear_backfill_start_takes_an_awake_node(tmp_path):
    """6 nodes: job 1 on 0-1 until 2000, job 2 on 2-3 until 100 (powered down from 232), job 3 on 4-5
    until 500. Job 4 (6 nodes, at 520) waits for 2000; job 5 (1 node, 50 s, at 521) is started by the
    backfill cycle at 530 (_start_job -> _pick_best_nodes): node 4, awake, not node 2."""
    args = ([0, 0, 0, 520, 521], [2000, 100, 500, 10, 50], [2, 2, 2, 6, 1], 6)
    aware = _run(tmp_path, *args)
    assert aware.nodes.tolist()[4] == "4" and aware.start.tolist()[4] == 530.0
    blind = _run(tmp_path, *args, aware=False)
    assert blind.nodes.tolist()[4] == "2" and blind.start.tolist()[4] == 590.0


# ---------------------------------------------------------------- power saving: select/cons_tres
CONS = "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nNodeName=g[0-3] CPUs=2\n"
COLS = {"req_nodes": np.array([2, 2, 1]), "cpus_per_node": np.array([2, 2, 1])}


def test_cons_tres_sets_of_powered_down_nodes_come_last(tmp_path):
    """The same timeline on 4 nodes x 2 CPUs: job 3 (1 CPU) at 520. _eval_nodes sees one set g0-g3 and
    takes the best fit, g0 (all tie), powered down; with the powered-down weight g0-g1 form a set of
    their own, tried last: g2 (CPU unit 4), at once."""
    aware = _run(tmp_path, [0, 0, 520], [100, 500, 50], [4, 4, 1], 8, conf=CONS, cols=COLS)
    assert aware.nodes.tolist() == ["0-3", "4-7", "4"] and aware.start.tolist()[2] == 520.0
    blind = _run(tmp_path, [0, 0, 520], [100, 500, 50], [4, 4, 1], 8, conf=CONS, cols=COLS, aware=False)
    assert blind.nodes.tolist()[2] == "0" and blind.start.tolist()[2] == 580.0


def test_eval_nodes_weight_override():
    m = TresMachine.build([2, 2, 2], [0, 0, 0], [1.0] * 3, [1, 1, 1], False)
    jb = TresJobs(nodes=np.array([1]), cpn=np.array([1]), cpus=np.array([1]), gpn=np.array([0]),
                  mem=np.array([0.0]), mem_cpu=np.array([0.0]), excl=np.array([False]))
    led = Ledger(m, jb)
    assert eval_nodes(led, 0, 0b111) == [(0, 1)]
    assert eval_nodes(led, 0, 0b111, [POWERED_DOWN_WEIGHT, 1, 1]) == [(1, 1)]
    assert awake_first(0b1111, 2, 0b0011) == 0b1100 and awake_first(0b1111, 3, 0b0011) == 0b1111


# ---------------------------------------------------------------- GPUs and memory per job
GPU_CONF = ("SelectType=select/cons_tres\nSelectTypeParameters=CR_Core_Memory\n"
            "NodeName=g[0-1] CPUs=8 Gres=gpu:4 RealMemory=16000\n")


def test_jobs_table_records_gpus_and_memory(tmp_path):
    """Job 1 (2 cores, 1 GPU, 4000 MB) takes g0, GPU 0; job 2 (2 GPUs, 8000 MB) the best fit g0, GPUs
    1-2; job 3 (2 nodes x 1 GPU, 2000 MB each) g0's GPU 3 and g1's GPU 0; job 4 (1 core, no GPU, 1000
    MB) the best fit g0. g0 holds 15000 of its 16000 MB."""
    f = tmp_path / "slurm.conf"
    f.write_text(GPU_CONF)
    cols = {"req_nodes": np.array([1, 1, 2, 1]), "cpus_per_node": np.array([2, 2, 2, 1]),
            "gpus_per_node": np.array([1.0, 2.0, 1.0, 0.0]), "mem_per_node": np.array([4000.0, 8000.0, 2000.0, 1000.0])}
    wl = Workload.from_arrays("t", submit=[0] * 4, runtime=[100] * 4, procs=[2, 2, 4, 1], requested_time=[100] * 4,
                              job_id=[1, 2, 3, 4], columns=cols)
    r = run(RunConfig(workload="t", scheduler=make_slurm_scheduler(str(f), {}), nodes=16), workload=wl)
    j = r.jobs
    assert j.nodes.tolist() == ["0-1", "2-3", "4-5,8-9", "6"]
    assert j.gpus_alloc.tolist() == ["g0:0", "g0:1-2", "g0:3;g1:0", ""]
    assert j.mem_alloc_mb.tolist() == ["g0:4000", "g0:8000", "g0:2000;g1:2000", "g0:1000"]
    rm = r.summary["scheduler_params"]["real_memory_mb"]
    assert rm == {"g0": 16000.0, "g1": 16000.0}
    assert_tres_exclusive(j, rm)


def test_alloc_columns_and_parse():
    rec = {0: (0.0, [(0, [0, 1], [0, 2, 3], 512.0)]), 2: (5.0, [(1, [0], [], 0.5)])}
    cols = alloc_columns(rec, 3, ["a", "b"], True)
    assert cols["gpus_alloc"].tolist() == ["a:0,2-3", "", ""]
    assert cols["mem_alloc_mb"].tolist() == ["a:512", "", "b:0.5"]
    assert alloc_columns(rec, 3, None, False)["mem_alloc_mb"].tolist() == ["", "", ""]
    assert parse_alloc("a:0,2-3;b:1") == [("a", "0,2-3"), ("b", "1")] and parse_alloc(float("nan")) == []


def _table(rows):
    import pandas as pd
    return pd.DataFrame(rows, columns=["job_id", "start", "end", "gpus_alloc", "mem_alloc_mb"])


def test_tres_check_finds_a_gpu_used_twice():
    df = _table([(1, 0.0, 100.0, "g0:0-1", "g0:100"), (2, 50.0, 80.0, "g0:1", "g0:100"),
                 (3, 100.0, 200.0, "g0:0", "g0:100")])
    with pytest.raises(ConformanceError, match=r"^run: a GPU is used by two jobs at once: GPU \('g0', 1\): job 1 "
                                               r"holds \[0, 100\) s and job 2 holds \[50, 80\) s$"):
        assert_tres_exclusive(df, {"g0": 1000.0})


def test_tres_check_finds_memory_over_real_memory():
    ok = _table([(1, 0.0, 100.0, "", "g0:600"), (2, 100.0, 200.0, "", "g0:600")])
    assert_tres_exclusive(ok, {"g0": 1000.0})       # [start, end): job 1 frees its memory at 100
    bad = _table([(1, 0.0, 100.0, "", "g0:600"), (2, 99.0, 200.0, "", "g0:600")])
    with pytest.raises(ConformanceError, match=r"^run: node g0 holds 1200 MB at t=99 s \(job 2 starting\), "
                                               r"RealMemory 1000 MB$"):
        assert_tres_exclusive(bad, {"g0": 1000.0})
