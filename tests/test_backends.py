"""The compiled backends' one rule (`twin.backends`): the table is complete (every compiled kernel set
of the project belongs to a declared backend, each backend lives beside its Python reference and has
identity tests that compare the two), and the refusal reasons, exact, for every kind of condition."""
from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path

import numpy as np
import pytest

from hpctwin.schedulers import backfill_replay, slurm_replay
from hpctwin.schedulers.backfill import BACKFILLS, QueueScheduler
from hpctwin.schedulers.ordering import STATIC_ORDERS
from hpctwin.schedulers.registry import make_scheduler
from hpctwin.schedulers.slurm import make_slurm_scheduler
from hpctwin.twin import backends
from hpctwin.twin.aot import KernelSet
from hpctwin.twin.run import job_table, prepare
from hpctwin.twin.simulation import Simulation
from hpctwin.twin.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
TOPS = ("twin", "schedulers", "datasets", "topology", "power", "experiments")


def _module_of(path: Path) -> str:
    return "hpctwin." + ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _kernel_set_modules() -> set[str]:
    """Modules that build a `KernelSet` at module level (found in the source, then imported)."""
    out = set()
    for top in TOPS:
        for p in (ROOT / top).rglob("*.py"):
            tree = ast.parse(p.read_text(encoding="utf-8"))
            for node in tree.body:
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                        getattr(node.value.func, "id", None) == "KernelSet":
                    out.add(_module_of(p))
    return out


# ---------------------------------------------------------------------------- the table is complete
@pytest.mark.slow
def test_every_kernel_set_belongs_to_a_declared_backend():
    declared = {b.kernels for b in backends.BACKENDS.values()}
    found = set()
    for mod in _kernel_set_modules():
        m = importlib.import_module(mod)
        found |= {f"{mod}:{k}" for k, v in vars(m).items() if isinstance(v, KernelSet)}
    assert found == declared
    assert [ks.name for ks in backends.kernel_sets()] == ["hpctwin_fastpath", "hpctwin_slurm_replay"]


def test_every_kernel_module_is_compiled_into_a_declared_kernel_set():
    """Every ``*_kernels.py`` (numba code) is a source of a declared kernel set, so the JIT cache guard
    and the ahead-of-time key cover it."""
    sources = {p.resolve() for ks in backends.kernel_sets() for p in ks.sources}
    kernels = {p.resolve() for top in TOPS for p in (ROOT / top).rglob("*_kernels.py")}
    assert kernels and kernels <= sources, sorted(str(p) for p in kernels - sources)


def test_every_replay_module_is_declared():
    """A ``schedulers/<reference>_replay.py`` glue module is a declared backend (C's as-run
    ``schedulers/replay.py`` is a policy, not a backend: no reference prefix)."""
    glue = {_module_of(p) for p in (ROOT / "schedulers").glob("*_replay.py")}
    assert glue == {b.module for b in backends.BACKENDS.values() if b.kind == "replay"}


@pytest.mark.parametrize("name", sorted(backends.BACKENDS))
@pytest.mark.slow
def test_each_backend_lives_beside_its_reference_and_resolves(name):
    b = backends.BACKENDS[name]
    ref_mod, _, cls_name = b.implements.partition(":")
    cls = getattr(importlib.import_module(ref_mod), cls_name)
    assert backends.class_id(cls) == b.implements
    mod = importlib.import_module(b.module)
    # beside the reference: same package, file named after the reference's module
    assert b.module.rpartition(".")[0] == ref_mod.rpartition(".")[0]
    assert b.module.rpartition(".")[2].startswith(ref_mod.rpartition(".")[2] + "_")
    where, _, attr = b.kernels.partition(":")
    assert isinstance(getattr(importlib.import_module(where), attr), KernelSet)
    if b.kind == "replay":
        assert callable(mod.engine_run)
        assert b.prepare is None or callable(getattr(mod, b.prepare))
    for req in b.options + b.bound:
        assert req.path.split(".")[0] in _attribute_names(cls), f"{name}: {req.path} is not set by {cls_name}"


def _attribute_names(cls) -> set[str]:
    """Names a class's methods assign on ``self`` or defines (properties, class attributes)."""
    import inspect  # noqa: PLC0415
    names = set(dir(cls))
    for klass in cls.__mro__:
        try:
            tree = ast.parse(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and \
                    getattr(node.value, "id", None) == "self":
                names.add(node.attr)
    return names


@pytest.mark.parametrize("name", sorted(backends.BACKENDS))
def test_each_backend_has_identity_tests(name):
    """Each declared backend names test files that exist and exercise its module (the identity
    contract: the compiled result equals the Python reference's, byte for byte)."""
    b = backends.BACKENDS[name]
    assert b.identity_tests
    short = b.module.rpartition(".")[2]
    for t in b.identity_tests:
        text = (ROOT / "tests" / t).read_text(encoding="utf-8")
        assert short in text, f"{t} does not exercise {b.module}"


def test_declared_option_sets_match_the_kernels_codes():
    b = backends.BACKENDS["backfill_replay"]
    opts = {r.path: r for r in b.options}
    assert set(opts["order_name"].arg) == set(backfill_replay.ORDER_CODES)
    assert set(opts["backfill"].arg) == set(backfill_replay.BACKFILL_CODES) == set(BACKFILLS)
    assert set(STATIC_ORDERS) <= set(backfill_replay.ORDER_CODES)
    assert backfill_replay.MIN_JOBS == b.min_jobs == 20_000
    assert slurm_replay.MIN_JOBS == backends.BACKENDS["slurm_replay"].min_jobs == 20_000
    assert slurm_replay.REPLAY_MODES == backends.MODES == ("auto", "on", "off")


def test_a_bad_declaration_is_refused_with_its_name():
    with pytest.raises(ValueError, match=r"Require\('x'\): unknown test 'big'; known: true, false, none, in, len_le"):
        backends.Require("x", "big")
    with pytest.raises(ValueError, match=r"backend b: unknown run conditions \['no_power'\]; known: no_models"):
        backends.Backend("b", "m:C", "m", "m:K", ("t.py",), run=("no_power",))
    with pytest.raises(ValueError, match="backend b: kind must be 'replay' or 'cycle', got 'pass'"):
        backends.Backend("b", "m:C", "m", "m:K", ("t.py",), kind="pass")


# ---------------------------------------------------------------------------- refusal reasons
class _Sim:
    """The attributes the rule reads before bind."""

    def __init__(self, n=30_000, models=(), gates=(), placer=None, held_jobs=0):
        self.n, self.models, self.gates, self.placer, self.held_jobs = n, list(models), list(gates), placer, held_jobs


class _Named:
    def __init__(self, name):
        self.name = name


def _why(sched, sim, name="backfill_replay"):
    return backends.decide_before_bind(backends.BACKENDS[name], sched, sim)


def test_queue_scheduler_refusals():
    easy = make_scheduler("easy")
    assert _why(easy, _Sim()) is None
    assert _why(easy, _Sim(n=600)) == "600 jobs, fewer than 20000"
    assert _why(easy, _Sim(models=[_Named("power")])) == "models present: power"
    assert _why(easy, _Sim(gates=[_Named("llm_groups"), object()])) == "gates present: llm_groups, object"
    assert _why(easy, _Sim(placer=_Named("topology"))) == "placer topology set"
    assert _why(easy, _Sim(held_jobs=3)) == "3 held jobs"
    easy.first_reservation = {}
    assert _why(easy, _Sim()) == "first_reservation = {} (needs None)"
    odd = make_scheduler("easy")
    odd.order_name = "lxf"
    assert _why(odd, _Sim()) == "order_name = 'lxf' (needs one of fcfs, sjf, ljf, saf, wfp3, unicep)"

    class Custom(QueueScheduler):
        pass
    assert _why(Custom("fcfs", "easy"), _Sim()) == \
        f"{backends.class_id(Custom)} is not hpctwin.schedulers.backfill:QueueScheduler"
    # a declaration that admits subclasses takes it
    loose = dataclasses.replace(backends.BACKENDS["backfill_replay"], exact_class=False)
    assert backends.decide_before_bind(loose, Custom("fcfs", "easy"), _Sim()) is None


@pytest.mark.parametrize("opts,why", [
    ({}, None),
    ({"replay": "off"}, "replay = 'off'"),
    ({"replay": "auto"}, "50 jobs, fewer than 20000 (replay = 'auto')"),
    ({"SelectType": "select/cons_tres"}, "linear = False (needs true)"),
    ({"compiled": False}, "compiled = False (needs true)"),
    ({"bf_max_job_user": 3}, "cfg.sched.bf_max_job_user = 3 (needs false)"),
])
def test_slurm_refusals_before_bind(opts, why):
    sched = make_slurm_scheduler(None, {"replay": "on", **opts})
    assert _why(sched, _Sim(n=50), "slurm_replay") == why
    assert slurm_replay.pre_eligible(sched, _Sim(n=50)) is (why is None)


def test_slurm_partitions_refusal():
    sched = make_slurm_scheduler(None, {"replay": "on"})
    sched.cfg.partitions = ["a", "b"]
    assert _why(sched, _Sim(), "slurm_replay") == "cfg.partitions has 2 items (needs at most 1)"


def _workload(n=300, nodes=16, seed=3):
    rng = np.random.default_rng(seed)
    submit = np.cumsum(rng.exponential(40.0, n)).round()
    procs = rng.choice([1, 2, 3, 4, 8, nodes], n)
    req = rng.choice([60, 300, 900, 3600], n).astype(float)
    runtime = np.maximum(1.0, (req * rng.uniform(0.05, 1.0, n)).round())
    return Workload.from_arrays("t", submit=submit, runtime=runtime, procs=procs, requested_time=req,
                                user=rng.integers(0, 5, n), job_id=np.arange(1, n + 1))


def _simulation(sched, nodes=16, **kw):
    prep = prepare(_workload(nodes=nodes), nodes, "test")
    return Simulation(job_table(prep), prep.workload.runtime, prep.kill_limit, sched, nodes,
                      fast_path=backends.engine_fast_path, **kw)


def test_seam_records_each_decision_and_the_declared_flag():
    """The Slurm-like policy's ``replayed`` (its summary's ``engine``) is set from the one rule, used
    or refused, before or after bind; a policy with no backend gets a decision too."""
    sched = make_slurm_scheduler(None, {"replay": "on"})
    sim = _simulation(sched)
    res = sim.run()
    assert sim.backend_decision == backends.Decision("slurm_replay", True)
    assert sched.replayed is True and np.isfinite(res.start).all()
    assert sched.describe()["engine"] == "compiled whole-run replay (schedulers.slurm_replay)"

    aged = make_slurm_scheduler(None, {"replay": "on", "PriorityType": "priority/multifactor",
                                       "PriorityWeightJobSize": 1000})
    sim = _simulation(aged)
    sim.run()                                   # refused after bind: the general engine ran
    assert sim.backend_decision == backends.Decision("slurm_replay", False, "static_order = False (needs true)")
    assert aged.replayed is False and aged.describe()["engine"] == "general engine"

    off = make_slurm_scheduler(None, {"replay": "off"})
    sim = _simulation(off)
    sim.run()
    assert sim.backend_decision == backends.Decision("slurm_replay", False, "replay = 'off'")
    assert off.replayed is False

    lxf = make_scheduler("lxf")
    sim = _simulation(lxf)
    sim.run()
    assert sim.backend_decision == backends.Decision(
        None, False, f"no compiled backend implements {backends.class_id(type(lxf))}")
    assert not hasattr(lxf, "replayed")


@pytest.mark.parametrize("opts", [
    {}, {"compiled": False}, {"SelectType": "select/cons_tres"}, {"bf_max_job_part": 2},
    {"bf_max_job_user": 3},
])
def test_slurm_cycle_entry_agrees_with_the_policy(opts):
    """The compiled backfill cycle's declared conditions give the policy's own ``use_kernel`` after bind."""
    from hpctwin.schedulers.base import BindContext  # noqa: PLC0415
    from hpctwin.twin.cluster import Cluster  # noqa: PLC0415
    sched = make_slurm_scheduler(None, dict(opts))
    prep = prepare(_workload(n=50), 16, "test")
    sched.bind(BindContext(job_table(prep), Cluster(16), 16))
    assert backends.allows("slurm_cycle", sched) is bool(sched.use_kernel)
