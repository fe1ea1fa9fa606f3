"""slurm.conf-style parser: values, units, defaults, ignored keys and errors with line numbers."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from hpctwin.schedulers.slurm_conf import (SlurmConfError, SlurmConfig, apply_options, expand_hostlist,
                                   load_slurm_conf, not_modelled_line, parse_slurm_conf_text,
                                   parse_time)

DATA = Path(__file__).parent / "data"


def test_defaults_are_slurm_22_05():
    """Defaults of Slurm 22.05 (read_config.h DEFAULT_SELECT_TYPE, DEFAULT_PRIORITY_TYPE,
    DEFAULT_ACCOUNTING_STORAGE_TYPE; backfill.c BACKFILL_INTERVAL etc.)."""
    c = SlurmConfig()
    assert c.select_type == "select/linear"
    assert c.accounting_storage_type == "accounting_storage/none" and not c.with_slurmdbd
    s, p = c.sched, c.priority
    assert (s.bf_interval, s.bf_resolution, s.bf_window, s.bf_max_job_test) == (30, 60, 86400, 500)
    assert (s.default_queue_depth, s.sched_interval, s.bf_job_part_count_reserve) == (100, 60, 0)
    assert s.backfill and not s.bf_continue
    assert p.type == "priority/basic" and p.fair_tree
    assert (p.max_age, p.decay_half_life, p.calc_period) == (7 * 86400, 7 * 86400, 300)
    assert p.weight_age == p.weight_fairshare == p.weight_jobsize == 0


def test_full_file():
    c = load_slurm_conf(DATA / "slurm_test.conf")
    assert c.select_type == "select/cons_tres"
    s, p = c.sched, c.priority
    assert s.bf_interval == 45 and s.bf_resolution == 120
    assert s.bf_window == 2880 * 60          # minutes in the file
    assert s.bf_max_job_test == 50 and s.bf_continue
    assert s.bf_job_part_count_reserve == 3 and s.default_queue_depth == 20
    assert s.sched_interval == 90
    assert p.weight_age == 1000 and p.weight_fairshare == 10000 and p.weight_jobsize == 500
    assert p.weight_partition == 2000 and p.weight_qos == 3000
    assert p.max_age == 2 * 86400 and p.decay_half_life == 14 * 86400
    assert p.calc_period == 120              # PriorityCalcPeriod is in minutes
    assert p.favor_small and not p.fair_tree
    assert c.node_names == [f"n{i:02d}" for i in range(6)] + ["gpu0", "gpu1"]
    assert c.cpus_per_node == 4
    names = [x.name for x in c.partitions]
    assert names == ["batch", "gpu", "all"]
    batch, gpu, allp = c.partitions
    assert batch.default and batch.max_time == 3600 and batch.priority_tier == 1
    assert gpu.nodes == ["gpu0", "gpu1", "n05"] and gpu.max_time == 86400
    assert gpu.priority_job_factor == 4 and gpu.priority_tier == 2
    assert allp.nodes is None and allp.max_time == math.inf
    assert allp.priority_tier == allp.priority_job_factor == 3
    # every key read but not modelled is listed in one line
    msg = not_modelled_line(c)
    assert "\n" not in msg and msg.startswith(str(DATA / "slurm_test.conf"))
    for key in ("ClusterName", "SlurmctldHost", "bf_yield_interval",
                "PriorityFlags CALCULATE_RUNNING", "NodeName attribute State"):
        assert key in msg, key
    # select/cons_tres models memory and OverSubscribe (issue 27): not in the line
    for key in ("RealMemory", "OverSubscribe"):
        assert key not in msg, key
    assert "SelectType" not in msg            # modelled
    assert any("ClusterName (line 2)" in x for x in c.ignored)


def test_errors_name_line_and_key():
    with pytest.raises(SlurmConfError, match=r"slurm_bad_value.conf:2: SchedulerParameters bf_window: 'abc' is not a number"):
        load_slurm_conf(DATA / "slurm_bad_value.conf")
    with pytest.raises(SlurmConfError, match=r"slurm_bad_line.conf:3: PriorityMaxAge"):
        load_slurm_conf(DATA / "slurm_bad_line.conf")
    with pytest.raises(SlurmConfError, match=r"slurm_bad_nodes.conf:2: PartitionName=batch Nodes: node 'n4' is not defined"):
        load_slurm_conf(DATA / "slurm_bad_nodes.conf")
    with pytest.raises(SlurmConfError, match=r"x.conf:1: SchedulerParameters bf_interval: 0 outside \[1, 10800\]"):
        parse_slurm_conf_text("SchedulerParameters=bf_interval=0", "x.conf")
    with pytest.raises(SlurmConfError, match=r"x.conf:2: PriorityType: 'priority/weird'"):
        parse_slurm_conf_text("#c\nPriorityType=priority/weird", "x.conf")
    with pytest.raises(SlurmConfError, match=r"x.conf:1: cannot parse 'garbage'"):
        parse_slurm_conf_text("garbage", "x.conf")
    with pytest.raises(SlurmConfError, match=r"only NONE is modelled"):
        parse_slurm_conf_text("PriorityUsageResetPeriod=MONTHLY", "x.conf")


def test_options_overlay():
    base = parse_slurm_conf_text("SchedulerParameters=bf_interval=45", "x.conf")
    c = apply_options(base, {"bf_resolution": 1, "bf_window": 10, "PriorityWeightAge": 7,
                             "bf_continue": True, "accounts": "a.toml", "node_order": "index"})
    assert c.sched.bf_interval == 45 and c.sched.bf_resolution == 1 and c.sched.bf_window == 600
    assert c.sched.bf_continue and c.priority.weight_age == 7
    assert base.sched.bf_resolution == 60  # the original is untouched
    with pytest.raises(SlurmConfError, match="options: frobnicate: not a slurm.conf key"):
        apply_options(base, {"frobnicate": 3})
    c = apply_options(base, {"ClusterName": "x"})     # a real key, read but not modelled
    assert c.ignored == ["ClusterName"]
    with pytest.raises(SlurmConfError, match="options: SchedulerParameters bf_max_job_test"):
        apply_options(base, {"bf_max_job_test": "many"})


def test_helpers():
    assert expand_hostlist("n[0-2,5],gpu01") == ["n0", "n1", "n2", "n5", "gpu01"]
    assert expand_hostlist("tux[008-010]") == ["tux008", "tux009", "tux010"]
    assert expand_hostlist("r[0-1]n[0-1]") == ["r0n0", "r0n1", "r1n0", "r1n1"]
    with pytest.raises(ValueError):
        expand_hostlist("n[3-1]")
    assert parse_time("90") == 5400           # minutes by default
    assert parse_time("1-02:00:00") == 93600
    assert parse_time("2-12") == 2 * 86400 + 12 * 3600
    assert parse_time("10:30") == 630         # M:S
    assert parse_time("UNLIMITED") == math.inf


@pytest.mark.parametrize("text, where, hint", [
    ("SelectTyp=select/linear", "x.conf:1: SelectTyp", "did you mean SelectType?"),
    ("SchedulerParameters=bf_windw=60", "x.conf:1: SchedulerParameters", "did you mean bf_window?"),
    ("NodeName=n[0-3] CPU=4", "x.conf:1: NodeName CPU", "did you mean CPUs?"),
    ("NodeName=n0\nPartitionName=p Nodes=n0 MaxTim=60", "x.conf:2: PartitionName MaxTim",
     "did you mean MaxTime?"),
])
def test_unknown_keys_are_errors_with_a_suggestion(text, where, hint):
    with pytest.raises(SlurmConfError) as e:
        parse_slurm_conf_text(text, "x.conf")
    assert str(e.value).startswith(where) and hint in str(e.value)


def test_select_and_accounting_keys():
    c = parse_slurm_conf_text("SelectType=select/cons_res\n"
                              "AccountingStorageType=accounting_storage/slurmdbd", "x.conf")
    assert c.select_type == "select/cons_res" and c.with_slurmdbd
    with pytest.raises(SlurmConfError, match="x.conf:1: SelectType: 'select/bluegene'"):
        parse_slurm_conf_text("SelectType=select/bluegene", "x.conf")
    with pytest.raises(SlurmConfError, match="x.conf:1: AccountingStorageType"):
        parse_slurm_conf_text("AccountingStorageType=accounting_storage/mysql", "x.conf")
    # documented ranges (backfill.c MAX_BACKFILL_WINDOW = 30 days, in minutes in the file)
    assert parse_slurm_conf_text("SchedulerParameters=bf_window=43200").sched.bf_window == 30 * 86400
    with pytest.raises(SlurmConfError, match=r"bf_window: 43201 outside \[1, 43200\]"):
        parse_slurm_conf_text("SchedulerParameters=bf_window=43201", "x.conf")


def test_wall_clock_keys_say_they_cannot_change_a_decision():
    """bf_continue, bf_max_time, bf_yield_*, max_sched_time...: listed apart, with the reason
    (passes take no simulated time), in the one not-modelled line; bf_continue stays a flag."""
    from hpctwin.schedulers.slurm_conf import NO_EFFECT_WHY, not_modelled_line
    cfg = parse_slurm_conf_text(
        "ClusterName=x\nSchedulerParameters=bf_continue,bf_max_time=30,bf_interval=60\n"
        "SchedulerParameters=max_sched_time=2,bf_yield_interval=1000\n", "t.conf")
    assert cfg.sched.bf_continue and cfg.sched.bf_interval == 60
    assert cfg.ignored == ["ClusterName (line 1)"]
    assert cfg.no_effect == ["bf_continue (line 2)", "bf_max_time (line 2)",
                             "max_sched_time (line 3)", "bf_yield_interval (line 3)"]
    line = not_modelled_line(cfg)
    assert line == ("t.conf: read but not modelled: ClusterName (line 1); SchedulerParameters "
                    "bf_continue (line 2), bf_max_time (line 2), max_sched_time (line 3), "
                    f"bf_yield_interval (line 3) [{NO_EFFECT_WHY}]")
    assert "no simulated time" in NO_EFFECT_WHY
    c2 = apply_options(SlurmConfig(), {"bf_continue": True, "bf_max_time": 5})
    assert c2.sched.bf_continue and c2.no_effect == ["bf_continue", "bf_max_time"]
    assert SlurmConfig().describe().get("no_effect") is None


def test_bf_continue_and_budgets_change_no_decision():
    """The claim behind the warning, checked: the same schedule with and without them."""
    import numpy as np
    from hpctwin.twin.run import RunConfig, run
    from hpctwin.twin.workload import Workload
    rng = np.random.default_rng(1)
    n = 300
    req = rng.choice([300.0, 3600.0], n)
    wl = Workload.from_arrays("t", submit=np.cumsum(rng.exponential(60.0, n)).round(),
                              runtime=(req * rng.uniform(0.1, 1, n)).round() + 1,
                              procs=rng.choice([1, 2, 4, 8], n), requested_time=req,
                              job_id=np.arange(1, n + 1))
    out = []
    for opts in ({}, {"bf_continue": True, "bf_max_time": 1, "bf_yield_interval": 1,
                      "max_sched_time": 1}):
        with pytest.warns(UserWarning) if opts else _nullcontext():
            r = run(RunConfig(workload="t", scheduler="slurm", nodes=8,
                              options={"scheduler": opts}), workload=wl)
        out.append(r.jobs.start.tolist())
    assert out[0] == out[1]


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def test_power_saving_keys_point_at_the_power_saving_model():
    """Suspend*/Resume* keys are not 'not modelled': the warning names the model that reads them."""
    c = parse_slurm_conf_text("SuspendTime=600\nResumeTimeout=300\nNodeName=n[1-4] CPUs=4\n"
                              "PartitionName=p Nodes=ALL Default=YES SuspendTime=60\n")
    msg = not_modelled_line(c)
    assert "SuspendTime (modelled by the power_saving model when it is on: --set power_saving.enabled=true" in msg
    assert "ResumeTimeout (modelled by the power_saving model" in msg
    assert "PartitionName attribute SuspendTime (modelled by the power_saving model" in msg
