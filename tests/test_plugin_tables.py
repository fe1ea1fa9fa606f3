"""The plug-in tables (issue 24 item 1): the table kit, options declared once, the scheduler, model,
placement and allocation tables, and the two-file proofs (a scheduler, a physics model)."""
from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpctwin.schedulers import registry
from hpctwin.schedulers.registry import SCHEDULERS, UnknownSchedulerError, make_scheduler
from hpctwin.twin import models as M
from hpctwin.twin.cli import main
from hpctwin.twin.contract import RunModel
from hpctwin.twin.errors import RunConfigError
from hpctwin.twin.options import ConfigError, Key
from hpctwin.twin.plugins import ANY_OPTIONS, Entry, Signature, Table, UnknownNameError, option, option_help, \
    option_keys, schema_of
from hpctwin.twin.run import RunConfig, run

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------- the kit
@dataclass(frozen=True)
class Opts:
    rate: float = option(0.5, minimum=0.0, maximum=1.0, exclusive_min=True, unit="fraction", help="speed")
    mode: str = option("a", choices=("a", "b"), help="which")
    count: int = option(3, minimum=1)
    flag: bool = option(False)
    label: str | None = option(None)


def test_option_keys_are_derived_from_the_dataclass():
    keys = option_keys(Opts)
    assert keys == {"rate": Key(float, 0.0, 1.0, None, False, True), "mode": Key(str, choices=("a", "b")),
                    "count": Key(int, 1), "flag": Key(bool), "label": Key(str, nullable=True)}
    with pytest.raises(ConfigError, match=r"x: 0.0 must be > 0"):
        keys["rate"].check(0.0, "x")
    with pytest.raises(ConfigError, match=r"x: 'c' is not one of a, b"):
        keys["mode"].check("c", "x")
    assert keys["count"].check(np.int64(4), "x") == 4            # numpy integers from Python callers
    assert option_help(Opts)[0] == "rate = 0.5 (fraction; > 0 and <= 1): speed"
    assert option_help(Opts)[1] == "mode = 'a' (one of a, b): which"


def test_schema_of_each_form():
    assert schema_of(None) == {} and schema_of(ANY_OPTIONS) is None and schema_of(Opts) == option_keys(Opts)

    class C:
        def __init__(self, x: float = 1.0, on: bool = True, name="n", inner=None):
            pass
    assert schema_of(Signature(C, ("inner",))) == {"x": Key(float), "on": Key(bool), "name": Key("any")}
    assert schema_of(lambda: {"k": Key(int)}) == {"k": Key(int)}


def test_table_register_lookup_prefix_and_errors():
    t = Table("widget", hint=", or a path")
    t.register(Entry("alpha", factory=dict))
    t.register(Entry("beta", factory="collections:OrderedDict"))
    t.register(Entry("pre:", factory=str, prefix=True))
    assert t.names() == ["alpha", "beta"] and [e.name for e in t] == ["alpha", "beta", "pre:"]
    assert t.lookup("beta").load().__name__ == "OrderedDict" and t.get("pre:xyz").name == "pre:"
    with pytest.raises(UnknownNameError, match=r"unknown widget 'alpah' \(did you mean 'alpha'\?\); "
                                               r"known: alpha, beta, or a path$"):
        t.lookup("alpah")
    assert isinstance(UnknownNameError("x"), RunConfigError) and isinstance(UnknownNameError("x"), ValueError)
    with pytest.raises(ValueError, match="widget 'alpha' is registered twice"):
        t.register(Entry("alpha"))
    assert t.unregister("beta").name == "beta" and t.get("beta") is None


# ---------------------------------------------------------------------------- the scheduler table
def test_every_scheduler_name_is_an_entry_with_its_needs():
    names = registry.known_schedulers()
    assert names[:8] == ["fcfs", "sjf", "ljf", "saf", "wfp3", "unicep", "easy", "conservative"] and "lxf" in names
    assert "exec:" not in names                         # a prefix, not a name
    e = {n: SCHEDULERS.lookup(n) for n in names}
    assert e["easy"].queue == ("fcfs", "easy") and e["easy"].guarantees == {"easy_head"}
    assert e["gpu-pack"].needs.allocation == "gpu" and e["gpu-pack"].packs_gpus
    assert e["price-aware"].needs.models == ("power",) and e["price-aware"].takes == ("backfill",)
    assert e["llm"].from_run == ("system", "placement") and e["llm"].needs.jobs is not None
    assert e["slurm"].takes == ("slurm_conf",) and e["slurm"].option_schema() is None
    assert e["easy"].option_schema() == {} and e["rls-f1"].option_schema() == {}
    assert set(SCHEDULERS.get("exec:x").option_schema()) == {"timeout_s", "cwd"}
    assert all(x.supports_failures for x in e.values())


def test_unknown_scheduler_is_a_run_config_error_with_a_suggestion():
    with pytest.raises(UnknownSchedulerError, match=r"unknown scheduler 'eassy' \(did you mean 'easy'"):
        make_scheduler("eassy")
    with pytest.raises(RunConfigError, match=r"unknown scheduler 'eassy' \(did you mean 'easy'"):
        run(RunConfig(workload="synthetic:jobs=20", scheduler="eassy"))
    assert issubclass(UnknownSchedulerError, RunConfigError) and issubclass(UnknownSchedulerError, ValueError)


def test_plugin_classes_and_instances_build_through_the_table():
    from tests.plugin_sched import LargestFirst
    assert registry.scheduler_entry("tests.plugin_sched:LargestFirst").code
    assert registry.scheduler_entry(LargestFirst).name == "tests.plugin_sched:LargestFirst"
    inst = LargestFirst()
    assert make_scheduler(inst).name == "largest-first"
    with pytest.raises(UnknownSchedulerError, match="an instance takes no options"):
        make_scheduler(inst, options={"x": 1})


def test_no_scheduler_name_is_compared_as_a_string_outside_the_table():
    pattern = re.compile(r'(==|!=) *"(slurm|llm|gpu-pack|price-aware|exec:)"|startswith\("exec:"\)|'
                         r'in \("llm", "gpu-pack"\)|":" (not )?in (name|cfg\.scheduler)|'
                         r'(name|scheduler) (not )?in (registry\.)?(BUILTIN|_predictive\(\)|_rlscheduler\(\))')
    for rel in ("twin/run.py", "twin/options.py", "twin/plan.py", "twin/allocation.py", "schedulers/checks.py"):
        src = (ROOT / rel).read_text()
        assert not pattern.findall(src), rel
        assert "isinstance(sched, GPUPackingScheduler)" not in src and "power_model" not in src, rel
    assert "serving" not in "".join(ln for ln in (ROOT / "twin/run.py").read_text().splitlines()
                                    if ln.lstrip().startswith(("import", "from")))


# ---------------------------------------------------------------------------- LXF, the two-file proof
def test_lxf_order_hand_example():
    from hpctwin.schedulers.base import JobTable
    from hpctwin.schedulers.lxf import order_lxf
    n = 4
    jobs = JobTable(job_id=np.arange(n), submit=np.array([0.0, 50.0, 90.0, 95.0]), procs=np.ones(n, int),
                    estimate=np.array([1000.0, 10.0, 100.0, 5.0]), requested_time=np.full(n, 100.0),
                    user=np.zeros(n, int), group=np.zeros(n, int), queue=np.zeros(n, int),
                    partition=np.zeros(n, int), columns={})
    # at t = 100 s: (100 + 1000) / 1000 = 1.1, (50 + 10) / 10 = 6, (10 + 100) / 100 = 1.1, (5 + 5) / 5 = 2
    assert order_lxf(100.0, np.arange(n), jobs).tolist() == [1, 3, 0, 2]      # the 1.1 tie by arrival


def test_lxf_runs_by_name_with_hand_checked_starts(tmp_path):
    from hpctwin.twin.workload import Workload
    # 2 units; job 0 holds both until 100 s; then LXF picks among 1 (long, early) and 2 (short, late)
    wl = Workload.from_arrays("w", submit=[0.0, 10.0, 60.0], runtime=[100.0, 500.0, 20.0], procs=[2, 2, 2],
                              requested_time=[100.0, 500.0, 20.0])
    r = run(RunConfig(workload="w", scheduler="lxf", nodes=2), workload=wl)
    starts = dict(zip(r.jobs.job_id, r.jobs.start))
    # at 100 s: job 1 (90 + 500) / 500 = 1.18, job 2 (40 + 20) / 20 = 3: job 2 first
    assert (starts[1], starts[2], starts[3]) == (0.0, 120.0, 100.0)
    assert r.summary["scheduler"] == "lxf" and r.summary["scheduler_params"]["order"] == "lxf"
    r = run(RunConfig(workload="w", scheduler="lxf", backfill="easy", nodes=2), workload=wl)
    assert r.summary["scheduler"] == "lxf+easy"
    with pytest.raises(RunConfigError, match="--order: does not apply to --scheduler lxf"):
        from hpctwin.twin.plan import plan
        plan(RunConfig(scheduler="lxf", order="sjf"), source="command line")


# ---------------------------------------------------------------------------- a model: one entry, no other edit
@dataclass(frozen=True)
class SlowOptions:
    enabled: bool = option(False, help="turn the model on")
    factor: float = option(0.5, minimum=0.0, maximum=1.0, exclusive_min=True, help="speed of every job")


class Slow(RunModel):
    """Every job at ``factor`` of full speed."""

    name = "slow"

    def __init__(self, factor: float):
        self.factor = factor

    def on_start(self, now, job, nodes):
        return {job: self.factor}

    def summary(self):
        return {"slow": {"factor": self.factor}}


SLOW = M.ModelEntry("slow", None, lambda s: Slow(s.typed_options(SLOW).factor), provides=("slow",),
                    options=SlowOptions, doc="a test model")


@pytest.fixture
def slow_model():
    M.MODELS.register(SLOW)
    try:
        yield SLOW
    finally:
        M.MODELS.unregister("slow")


def _elapsed(out: Path) -> pd.Series:
    return pd.read_csv(out / "jobs.csv").set_index("job_id")["elapsed"]


def test_a_model_entry_with_options_is_switched_on_and_configured_from_the_cli(tmp_path, slow_model, capsys):
    base = ["run", "-w", "synthetic:jobs=30", "--nodes", "64", "--kill-at-walltime", "off", "-q"]
    assert main(base + ["-o", str(tmp_path / "plain")]) == 0
    assert main(base + ["--set", "slow.enabled=true", "--set", "slow.factor=0.25", "-o", str(tmp_path / "s")]) == 0
    assert np.allclose(_elapsed(tmp_path / "s"), 4 * _elapsed(tmp_path / "plain"), rtol=1e-12)
    assert '"factor": 0.25' in (tmp_path / "s" / "summary.json").read_text()
    assert "[options.slow]" in (tmp_path / "s" / "config.toml").read_text()
    for args, msg in ((["--set", "slow.enabled=true", "--set", "slow.factor=2"], "slow.factor: 2.0 must be <= 1"),
                      (["--set", "slow.enabled=true", "--set", "slow.factr=0.3"],
                       "slow.factr: unknown key (did you mean 'factor'?); known: enabled, factor"),
                      (["--set", "slow.factor=0.3"],
                       "slow.factor: slow options need --set slow.enabled=true (they would otherwise be ignored)")):
        capsys.readouterr()
        assert main(base + args + ["-o", str(tmp_path / "bad")]) == 2
        assert msg in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_a_model_from_an_entry_point_gets_its_section(monkeypatch, tmp_path):
    class EP:
        name = "slow"

        def load(self):
            return SLOW
    from hpctwin.twin import plugins
    monkeypatch.setattr(plugins, "_entry_points", lambda group: {"slow": EP()} if group == "hpctwin.models" else {})
    monkeypatch.setattr(M.MODELS, "_loaded", {})
    r = run(RunConfig(workload="synthetic:jobs=20", nodes=64, kill_at_walltime=False,
                      options={"slow": {"enabled": True, "factor": 0.5}}))
    assert r.summary["slow"] == {"factor": 0.5} and "slow" in M.sections()
    with pytest.raises(RunConfigError, match=r"slow.factor: 0.0 must be > 0"):
        run(RunConfig(workload="synthetic:jobs=20", nodes=64, options={"slow": {"enabled": True, "factor": 0.0}}))


def test_a_policy_needing_a_model_is_told_its_switch_and_checked_with_it(slow_model):
    from hpctwin.schedulers import checks

    class NeedsSlow(registry.QueueScheduler):
        needs_models = ("slow",)
    entry = registry.scheduler_entry(NeedsSlow)
    assert entry.needs.models == ("slow",)
    assert checks.run_requirements(entry) == {"options": {"slow": {"enabled": True}}}
    with pytest.raises(RunConfigError, match=r"needs the slow model: add --set slow.enabled=true"):
        run(RunConfig(workload="synthetic:jobs=20", nodes=16, scheduler=NeedsSlow))
    assert checks.run_requirements(SCHEDULERS.lookup("price-aware")) == {"power": True, "system": "generic"}


def test_builtin_model_sections_and_switches():
    s = M.sections()
    known = ["power", "llm", "training", "network", "failures", "serving"]   # a new model needs no edit here
    assert [n for n in s if n in known] == known
    assert s["network"].option_schema() == {"routing": Key(str, choices=("minimal", "valiant"))}
    assert "cooling_overhead" in s["power"].option_schema() and "enabled" in s["failures"].option_schema()
    from dataclasses import fields

    from hpctwin.twin.serving.batch import ServingBatchConfig
    serving = s["serving"].option_schema()                   # one key a config field: not copied by hand
    assert list(serving) == [f.name for f in fields(ServingBatchConfig)]
    assert serving["tp"] == Key(int, 1, 1024) and serving["mode"] == Key(str, choices=("colocated", "pd"))
    assert M.providers("power")[0].switch == {"power": True}


# ---------------------------------------------------------------------------- placement, allocation, RunConfig
def test_placement_and_allocation_tables():
    from hpctwin.topology.placement import PLACEMENTS, PLACERS, make_placer
    from hpctwin.twin.allocation import ALLOCATIONS
    assert PLACEMENTS.names() == [*PLACERS, "llm"] and PLACEMENTS.lookup("first-fit").tag("engine_default")
    assert type(make_placer("llm")).__name__ == "LLMPlacer"
    with pytest.raises(ValueError, match="unknown placement 'x'; choose one of first-fit, contiguous, group-packed, "
                                         "spread, recorded, llm"):
        make_placer("x")
    assert ALLOCATIONS.names() == ["node", "gpu"]
    assert ALLOCATIONS.lookup("gpu").option_schema() == {"policy": Key(str), "on_unpackable": Key(str)}


def test_run_config_fields_are_declared_once():
    import argparse

    from hpctwin.twin import config as C
    from hpctwin.twin.cli import add_run_arguments, config_from_args
    from hpctwin.twin.options import run_field_schema
    from hpctwin.twin.rerun import run_config_fields
    names = [f.name for f in C.fields(C.RunConfig)]
    assert list(run_field_schema()) == names == list(run_config_fields())
    p = argparse.ArgumentParser()
    add_run_arguments(p)
    a = p.parse_args(["-w", "KTH-SP2", "-s", "sjf", "--nodes", "8", "--power", "on", "--set", "power.cooling=false",
                      "--max-jobs", "5", "-o", "x"])
    cfg = config_from_args(a)
    assert cfg == C.RunConfig(workload="KTH-SP2", scheduler="sjf", nodes=8, power=True, max_jobs=5, out="x",
                              quiet=False, options={"power": {"cooling": False}})
    assert C.recorded_fields() == [n for n in names if n not in ("out", "quiet", "options", "force")]
    assert inspect.signature(C.RunConfig).parameters["tau"].default == 10.0
