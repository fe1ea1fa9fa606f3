"""The typed run plan (issue 24 item 2): `plan(cfg)` validates as the command line does and resolves
every name to its table entry; `run` = `execute(plan(cfg))`; GPU allocation is a strategy; held
node-request jobs are a model hook."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import hpctwin
from hpctwin import Scheduler
from hpctwin.twin.cli import main
from hpctwin.twin.contract import RunModel
from hpctwin.twin.errors import RunConfigError
from hpctwin.twin.plan import Plan, plan
from hpctwin.twin.run import RunConfig, execute, run, simulate
from hpctwin.twin.workload import Workload


class FirstFits(Scheduler):
    """Starts the first waiting job when it fits (FCFS without backfilling), written as a plug-in."""

    name = "first-fits"

    def schedule(self, now, queue, cluster):
        return [j for j in queue.tolist()[:1] if self.jobs.procs[j] <= cluster.free]


def test_plan_is_frozen_and_resolved():
    p = plan(RunConfig(workload="synthetic:jobs=10", scheduler="price-aware", power=True, system="generic"))
    assert isinstance(p, Plan) and p.scheduler.entry.name == "price-aware" and p.model_names() == ["power"]
    assert p.allocation.name == "node" and p.placement.name == "first-fit" and p.system.name == "generic"
    assert p.system_explicit and p.out is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.models = ()
    q = plan(RunConfig(workload="synthetic:jobs=10"))
    assert q.system_name == "generic" and not q.system_explicit          # the default synthetic machine


BAD = [
    (dict(scheduler="eassy"), "unknown scheduler 'eassy' (did you mean 'easy'"),
    (dict(scheduler="slurm", order="sjf"), "does not apply to --scheduler slurm"),
    (dict(gpus_per_node=8), "applies to --allocation gpu only"),
    (dict(options={"power": {"cooling": False}}), "power.cooling: power options need --power on"),
    (dict(options={"scheduler": {"nosuch": 1}}, scheduler="llm"), "scheduler.nosuch: unknown key of scheduler 'llm'"),
    (dict(placement="recorde"), "unknown placement 'recorde' (did you mean 'recorded'?)"),
    (dict(scheduler="gpu-pack"), "gpu-pack needs --allocation gpu (units must be GPUs)"),
    (dict(allocation="cpu"), "unknown allocation 'cpu'"),
]


@pytest.mark.parametrize("bad, msg", BAD, ids=[b[1][:30] for b in BAD])
def test_python_api_and_command_line_refuse_alike(bad, msg, tmp_path, capsys):
    """The same check, the same text after the source (``RunConfig: field`` / ``--flag``), nothing loaded."""
    cfg = RunConfig(workload=str(tmp_path / "missing.swf"), **bad)
    with pytest.raises(RunConfigError) as api:
        run(cfg)
    assert msg in str(api.value) and "missing.swf" not in str(api.value)
    argv = ["run", "-w", cfg.workload, "-o", str(tmp_path / "o"), "-q"]
    for k, v in bad.items():
        if k == "options":
            argv += [f"--set={s}.{key}={val}" for s, t in v.items() for key, val in t.items()]
        else:
            argv += [f"--{k.replace('_', '-')}", str(v)]
    if "allocation" in bad:                    # argparse refuses it first (--allocation has choices)
        with pytest.raises(SystemExit):
            main(argv)
        assert "invalid choice: 'cpu'" in capsys.readouterr().err
        return
    assert main(argv) == 2
    assert msg in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_scheduler_given_as_class_or_instance(tmp_path):
    r = run(RunConfig(workload="synthetic:jobs=40", nodes=64, scheduler=FirstFits, out=str(tmp_path / "c")))
    assert r.summary["scheduler"] == "first-fits" and r.summary["jobs_simulated"] == 40
    text = (tmp_path / "c" / "config.toml").read_text()
    assert 'scheduler = "tests.test_plan:FirstFits"' in text
    r2 = run(RunConfig(workload="synthetic:jobs=40", nodes=64, scheduler=FirstFits(), out=str(tmp_path / "i")))
    assert (tmp_path / "i" / "jobs.csv").read_bytes() == (tmp_path / "c" / "jobs.csv").read_bytes()
    assert r2.summary["scheduler"] == "first-fits"
    r3 = run(RunConfig(workload="synthetic:jobs=40", nodes=64, scheduler="tests.test_plan:FirstFits"))
    assert np.array_equal(r3.jobs.start.to_numpy(), r.jobs.start.to_numpy())
    with pytest.raises(RunConfigError, match="not a scheduler"):
        run(RunConfig(workload="synthetic:jobs=40", scheduler=object()))


def test_run_is_execute_of_plan_and_paths_are_accepted(tmp_path):
    cfg = RunConfig(workload="synthetic:jobs=200", scheduler="conservative", seed=3)
    a = run(dataclasses.replace(cfg, out=str(tmp_path / "a")))
    b = execute(plan(dataclasses.replace(cfg, out=tmp_path / "b")))             # a Path is accepted
    assert (tmp_path / "a" / "jobs.csv").read_bytes() == (tmp_path / "b" / "jobs.csv").read_bytes()
    ta = (tmp_path / "a" / "config.toml").read_text().splitlines()
    tb = (tmp_path / "b" / "config.toml").read_text().splitlines()
    assert [x for x in ta if "code_identity" not in x] == [x for x in tb if "code_identity" not in x]
    assert a.plan.scheduler.entry.name == b.plan.scheduler.entry.name == "conservative"
    assert hpctwin.plan is plan and hpctwin.execute is execute


def test_gpu_allocation_strategy_is_checked_before_loading(tmp_path):
    missing = str(tmp_path / "nope.csv")
    with pytest.raises(RunConfigError, match="needs the GPUs per node"):
        plan(RunConfig(workload=missing, allocation="gpu", nodes=2))
    with pytest.raises(RunConfigError, match=r"does not support --placement spread"):
        plan(RunConfig(workload=missing, allocation="gpu", nodes=2, gpus_per_node=4, placement="spread"))
    p = plan(RunConfig(workload=missing, allocation="gpu", nodes=2, gpus_per_node=4, scheduler="gpu-pack"))
    assert p.allocation.name == "gpu" and p.allocation.per_node == 4 and p.scheduler.entry.packs_gpus


def _gpu_wl() -> Workload:
    return Workload.from_arrays("g", submit=[0.0, 0.0, 5.0], runtime=[100.0, 50.0, 10.0], procs=[1, 1, 1],
                                requested_time=[100.0, 100.0, 100.0], columns={"gpus": np.array([3.0, 2.0, 4.0])})


def test_gpu_allocation_wraps_any_policy_and_not_a_packer():
    a = run(RunConfig(workload="g", scheduler="easy", nodes=2, gpus_per_node=4, allocation="gpu"), workload=_gpu_wl())
    b = run(RunConfig(workload="g", scheduler="gpu-pack", nodes=2, gpus_per_node=4, allocation="gpu"),
            workload=_gpu_wl())
    c = run(RunConfig(workload="g", scheduler="hpctwin.schedulers.gpu_packing:GPUPackingScheduler", nodes=2,
                      gpus_per_node=4, allocation="gpu", options={"scheduler": {"gpus_per_node": 4}}),
            workload=_gpu_wl())
    assert a.summary["scheduler"] == b.summary["scheduler"] == c.summary["scheduler"] == "gpu-pack(easy,best-fit)"
    assert a.jobs.nodes.tolist() == b.jobs.nodes.tolist() == c.jobs.nodes.tolist()
    assert a.summary["allocation"] == {"units": "gpu", "gpus_per_node": 4, "nodes": 2}
    assert list(a.jobs.columns[-1:]) == ["gpu_nodes"] and "free_gpus" in a.timeseries


class Holder(RunModel):
    """Holds one node-request row and submits it at 50 s (the held-jobs hook, no serving involved)."""

    name = "holder"
    drives_run = True                          # its event comes after the log's last job has ended

    def held_jobs(self, workload):
        return Workload.from_arrays("held", submit=[np.inf, np.inf], runtime=[30.0, 30.0], procs=[2, 2],
                                    requested_time=[30.0, 30.0], job_id=[900, 901])

    def bind(self, ctx):
        self.index = len(ctx.jobs) - 2

    def next_event(self, now):
        return 50.0 if now < 50.0 else None

    def on_event(self, now, control):
        control.submit(self.index)


def test_held_jobs_are_a_model_hook():
    wl = Workload.from_arrays("w", submit=[0.0], runtime=[10.0], procs=[1], requested_time=[10.0])
    r = simulate(RunConfig(workload="w", nodes=4), wl, extra_models=[Holder()])
    df = r.jobs.set_index("job_id")
    assert list(df.index) == [1, 900]                  # the request never submitted is not a job of the run
    assert (df.loc[900, "submit"], df.loc[900, "start"], df.loc[900, "end"]) == (50.0, 50.0, 80.0)
    assert r.summary["accounting"]["node_requests_of_models"] == 1 and r.summary["jobs_simulated"] == 2


def test_compat_preset_goes_through_the_plan_checks(capsys):
    assert main(["run", "--compat", "rlscheduler", "--seed", "-1", "-q"]) == 2
    assert "--seed: -1 must be >= 0" in capsys.readouterr().err
    from hpctwin.twin.plan import COMPAT
    assert COMPAT.names() == ["rlscheduler"]


def test_rl_env_compat_entry_points_still_work():
    from hpctwin.twin import run as run_mod
    r = run_mod._Run(RunConfig(workload="synthetic:jobs=30", nodes=16), None, 0.0)
    run_mod._setup(r)
    assert r.total == 16 and len(r.prep.workload) == 30 and r.jobs is not None
    assert [m.name for m in run_mod._build_models(RunConfig(power=True), hpctwin.load_system("generic"))] == ["power"]


def test_unknown_system_is_a_run_config_error_and_still_a_system_error():
    from hpctwin.twin.system import SystemError_
    with pytest.raises(SystemError_) as e:
        plan(RunConfig(system="fronteir"))
    assert isinstance(e.value, RunConfigError) and "did you mean 'frontier'" in str(e.value)


def test_paths_of_the_python_api(tmp_path):
    p = plan(RunConfig(workload="synthetic:jobs=5", out=Path(tmp_path) / "x"))
    assert p.config.out == str(tmp_path / "x") and p.out == tmp_path / "x"
