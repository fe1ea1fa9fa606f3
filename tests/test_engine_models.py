"""The model registry and declarative composition (issue 12 item 3): models built from the config
through one table, requirements checked, nothing chosen or changed by class name."""
from __future__ import annotations

import inspect

import pytest

from hpctwin.twin import run as run_mod
from hpctwin.twin.contract import RunModel
from hpctwin.twin.models import BUILTIN, ModelConfigError, ModelEntry, ModelSetup, build_models, entry_of
from hpctwin.twin.run import RunConfig, RunConfigError, run


def test_no_class_name_strings_in_the_composition_root():
    src = inspect.getsource(run_mod)
    assert "__name__ ==" not in src and "__name__ in" not in src


def test_builtin_table_names_provides_and_requires():
    names = [e.name for e in BUILTIN]
    # run order of the models named here (a new built-in model may sit anywhere; it needs no edit here):
    known = ["power", "llm_iteration", "training", "network", "failures", "serving"]
    assert [n for n in names if n in known] == known  # factors multiply so
    by = {e.name: e for e in BUILTIN}
    assert by["power"].requires == ("system.power",) and by["power"].provides == ("power",)
    assert by["network"].requires == ("system.network",) and not by["network"].gpu
    assert by["failures"].interrupts and not by["power"].interrupts


def test_failure_options_without_failures_on_are_refused():
    cfg = RunConfig(workload="synthetic:jobs=50", nodes=16, options={"failures": {"node_mtbf_days": 1}})
    # run() validates as the command line does (twin.plan): the option check names the key and the switch
    with pytest.raises(RunConfigError, match=r"failures.node_mtbf_days: failure options need "
                                             r"options.failures.enabled = true \(they would otherwise be ignored\)"):
        run(cfg)
    off = RunConfig(workload="synthetic:jobs=50", nodes=16, options={"failures": {"enabled": False, "repair_s": 5}})
    with pytest.raises(RunConfigError, match="failures.repair_s: failure options need options.failures.enabled"):
        run(off)
    # the model's own check stays for callers that build models directly
    with pytest.raises(ModelConfigError, match=r"failures options failures.node_mtbf_days given without "
                                               r"--failures on \(option failures.enabled = true\)"):
        build_models(ModelSetup(cfg, None))


def test_requirements_are_checked_with_the_switch_named():
    with pytest.raises(RunConfigError, match=r"--network on needs a --system with a \[network\] table"):
        run(RunConfig(workload="synthetic:jobs=20", nodes=16, network=True))


class Slow(RunModel):
    """Every job at half speed: a model added through a table entry only."""

    name = "slow"

    def on_start(self, now, job, nodes):
        return {job: 0.5}


def test_a_new_model_is_one_table_entry():
    entry = ModelEntry("slow", lambda c: bool(c.options.get("slow")), lambda s: Slow(), provides=("slow",))
    cfg = RunConfig(workload="synthetic:jobs=5", nodes=16, options={"slow": True})
    models = build_models(ModelSetup(cfg, None), entries=[*BUILTIN, entry])
    assert [m.name for m in models] == ["slow"] and entry_of(models[0], [*BUILTIN, entry]) is entry
    assert build_models(ModelSetup(RunConfig(nodes=16), None), entries=[entry]) == []


def test_gpu_allocation_reaches_models_through_their_context_not_by_mutation():
    from hpctwin.twin.failures import FailureConfig
    cfg = RunConfig(allocation="gpu", options={"failures": {"enabled": True, "node_mtbf_days": 10}})
    (fm,) = build_models(ModelSetup(cfg, None, gpu=True, units_per_node=8))
    assert fm.cfg.units_per_node == 8 and FailureConfig().units_per_node == 1
    with pytest.raises(ModelConfigError, match="--allocation gpu does not support --network on"):
        build_models(ModelSetup(RunConfig(network=True), type("S", (), {"network": {"x": 1}})(), gpu=True))
