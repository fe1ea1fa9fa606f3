"""Compiled backends of the Python reference policies: one declared table, one eligibility rule.

The model is networkx's backend dispatch: the Python policy run by the general engine
(`twin.simulation`) is the *reference*; a *backend* is compiled code that makes the same decisions
faster and is held to the reference byte for byte by its identity tests. Each backend lives beside
its reference (``schedulers/X.py`` -> ``schedulers/X_replay.py`` + ``X_replay_kernels.py``) and is
declared here, as data, in `BACKENDS`:

* what it implements: the reference class (``"module:Class"``, compared by name, so this module
  imports no policy), exactly or with its subclasses (a subclass may override a decision the
  compiled code hard-codes, so the built-in replays take the exact class only);
* the run conditions it supports (`RUN_CONDITIONS`: no physics model - power, failures, network,
  power caps are models -, no gate, no placer, no held jobs), a minimum number of jobs and the
  policy's own ``auto``/``on``/``off`` switch when it has one;
* the policy options it supports (`Require`: an attribute of the policy and a test), checked
  before the run, and those known only once the policy is bound (checked after the backend's
  ``prepare``, which binds it as the engine would);
* its kernel set (`twin.aot.KernelSet`: ahead-of-time build, JIT fallback, JIT cache guard) and
  the test files that compare it with the reference.

One rule decides every run (`decide_before_bind`, then the bound conditions): the first failing
condition is the refusal reason. The engine's fast-path seam is `engine_fast_path` (passed to
`twin.simulation.Simulation` by `twin.run`); it leaves every decision on the simulation as
``sim.backend_decision`` (a `Decision`: backend, used or not, the reason) and, for a backend that
declares ``record``, sets that policy attribute to whether the compiled path ran: the Slurm-like
policy's ``replayed``, which its ``describe()`` turns into the summary's ``engine`` (``compiled
whole-run replay (schedulers.slurm_replay)`` / ``general engine``), the one place the choice
reaches a run's outputs (unchanged by this table).

A backend of kind ``"cycle"`` is a compiled pass inside the reference's own loop (the Slurm-like
policy's backfill cycle, `schedulers.slurm_kernels`); the policy asks `allows` after bind.

Layers: this module sits with the engine (it imports no policy and no kernel module; it loads a
backend's module by its declared name only when a run is eligible), so the engine, the run
composition and the policies may all ask it.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

#: the run conditions a backend may require (checked on the `Simulation`); name -> what it refuses
RUN_CONDITIONS = {
    "no_models": "physics models (power, failures, network, power cap...) run at every event",
    "no_gates": "gates (external decisions, group limits...) are asked at every start",
    "no_placer": "a placer chooses the units (the compiled replay places first-fit)",
    "no_held_jobs": "held jobs are submitted by a model during the run",
}
#: the values a policy's replay switch (`Backend.mode`) may take
MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class Require:
    """One condition on the policy: the attribute at dotted ``path`` (``"cfg.sched.bf_max_job_user"``)
    passes ``test``: ``"true"``/``"false"`` (truth value), ``"none"`` (is None), ``"in"`` (one of
    ``arg``) or ``"len_le"`` (at most ``arg`` items)."""

    path: str
    test: str
    arg: Any = None

    def __post_init__(self) -> None:
        if self.test not in ("true", "false", "none", "in", "len_le"):
            raise ValueError(f"Require({self.path!r}): unknown test {self.test!r}; "
                             "known: true, false, none, in, len_le")

    def refusal(self, obj: Any) -> str | None:
        """None when ``obj`` passes, else the reason (``"linear = False (needs true)"``)."""
        try:
            v = _attr(obj, self.path)
        except AttributeError:
            return f"{self.path} is missing"
        ok = {"true": lambda: bool(v), "false": lambda: not v, "none": lambda: v is None,
              "in": lambda: v in self.arg, "len_le": lambda: len(v) <= self.arg}[self.test]()
        if ok:
            return None
        if type(v).__module__ == "numpy" and hasattr(v, "item") and not hasattr(v, "__len__"):
            v = v.item()                     # a numpy scalar shown as Python's (False, not np.False_)
        if self.test == "in":
            return f"{self.path} = {v!r} (needs one of {', '.join(map(str, self.arg))})"
        if self.test == "len_le":
            return f"{self.path} has {len(v)} items (needs at most {self.arg})"
        return f"{self.path} = {v!r} (needs {'None' if self.test == 'none' else self.test})"


@dataclass(frozen=True)
class Backend:
    """A compiled backend of a Python reference policy (see the module docstring).

    name: the backend's name (the key in `BACKENDS`).
    implements: the reference class, ``"hpctwin.schedulers.backfill:QueueScheduler"``.
    module: the backend's module (beside the reference); it defines ``engine_run(sim)`` (a
        ``"replay"``) and, when ``prepare`` is set, that function (binds the policy).
    kernels: its `twin.aot.KernelSet`, ``"module:ATTRIBUTE"``.
    identity_tests: test files (under ``tests/``) that compare it with the reference.
    kind: ``"replay"`` (the whole run, asked by the engine's seam) or ``"cycle"`` (one pass inside
        the reference's loop, asked by the policy).
    exact_class: the reference class only (True) or its subclasses too.
    run: names from `RUN_CONDITIONS`.
    min_jobs: below this many jobs the general engine runs (loading compiled code costs more).
    mode: the policy's attribute holding its switch (`MODES`): ``off`` refuses, ``on`` ignores
        ``min_jobs``, ``auto`` applies it; None: no switch.
    options: conditions on the policy before bind; bound: after ``prepare`` (or, for a cycle, after
        the policy's own bind).
    record: the policy attribute set to whether the compiled path ran (None: none).
    """

    name: str
    implements: str
    module: str
    kernels: str
    identity_tests: tuple[str, ...]
    kind: str = "replay"
    exact_class: bool = True
    run: tuple[str, ...] = ()
    min_jobs: int = 0
    mode: str | None = None
    options: tuple[Require, ...] = ()
    bound: tuple[Require, ...] = ()
    prepare: str | None = None
    record: str | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.run) - set(RUN_CONDITIONS))
        if unknown:
            raise ValueError(f"backend {self.name}: unknown run conditions {unknown}; "
                             f"known: {', '.join(RUN_CONDITIONS)}")
        if self.kind not in ("replay", "cycle"):
            raise ValueError(f"backend {self.name}: kind must be 'replay' or 'cycle', got {self.kind!r}")

    def implemented_by(self, policy: Any) -> bool:
        """True when ``policy``'s class is the reference (or a subclass, if allowed)."""
        classes = type(policy).__mro__ if not self.exact_class else (type(policy),)
        return any(class_id(c) == self.implements for c in classes)


@dataclass(frozen=True)
class Decision:
    """What the rule decided for one run: the backend asked (None: no backend implements the
    policy), whether its compiled code ran, and why not (empty when it ran)."""

    backend: str | None
    used: bool
    reason: str = ""


#: the order x backfill pairs the EASY/conservative replay implements (its kernel's codes,
#: `schedulers.backfill_replay.ORDER_CODES` / ``BACKFILL_CODES``; tests/test_backends.py holds them equal)
_ORDERS = ("fcfs", "sjf", "ljf", "saf", "wfp3", "unicep")
_BACKFILLS = ("none", "easy", "conservative")
_SLURM = "hpctwin.schedulers.slurm:SlurmScheduler"
_SLURM_KERNELS = "hpctwin.schedulers.slurm_replay:KERNELS"
#: the Slurm-like policy's compiled backfill cycle: select/linear without per-user QOS limits,
#: bf_max_job_part or bf_max_job_user (the Python cycle does the rest)
_SLURM_CYCLE = (Require("compiled", "true"), Require("linear", "true"), Require("has_qos_limits", "false"),
                Require("cfg.sched.bf_max_job_part", "false"), Require("cfg.sched.bf_max_job_user", "false"))

#: every compiled backend, by name (tests/test_backends.py: every kernel set of the project is here)
BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend("backfill_replay", implements="hpctwin.schedulers.backfill:QueueScheduler",
            module="hpctwin.schedulers.backfill_replay", kernels="hpctwin.schedulers.backfill_replay:KERNELS",
            identity_tests=("test_fastpath.py", "test_conservative_reference.py", "test_aot.py"),
            run=("no_models", "no_gates", "no_placer", "no_held_jobs"), min_jobs=20_000,
            options=(Require("order_name", "in", _ORDERS), Require("backfill", "in", _BACKFILLS),
                     Require("first_reservation", "none"))),
    Backend("slurm_replay", implements=_SLURM, module="hpctwin.schedulers.slurm_replay", kernels=_SLURM_KERNELS,
            identity_tests=("test_slurm_replay.py", "test_aot.py"),
            run=("no_models", "no_gates", "no_held_jobs"), min_jobs=20_000, mode="replay",
            options=(Require("compiled", "true"), Require("linear", "true"), Require("cfg.partitions", "len_le", 1),
                     Require("cfg.sched.bf_max_job_part", "false"), Require("cfg.sched.bf_max_job_user", "false")),
            prepare="engine_prepare",
            bound=(Require("use_kernel", "true"), Require("static_order", "true"), Require("time_varying", "false"),
                   Require("fs", "none"), Require("has_qos_limits", "false")),
            record="replayed"),
    Backend("slurm_cycle", implements=_SLURM, module="hpctwin.schedulers.slurm_kernels", kernels=_SLURM_KERNELS,
            identity_tests=("test_slurm_compiled.py",), kind="cycle", bound=_SLURM_CYCLE),
)}


def class_id(cls: type) -> str:
    """``"module:QualifiedName"`` of a class, the form `Backend.implements` uses."""
    return f"{cls.__module__}:{cls.__qualname__}"


def _attr(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def replay_backend_for(policy: Any) -> Backend | None:
    """The whole-run backend that implements ``policy``'s class, or None."""
    for b in BACKENDS.values():
        if b.kind == "replay" and b.implemented_by(policy):
            return b
    return None


def decide_before_bind(backend: Backend, policy: Any, sim: Any) -> str | None:
    """None when ``backend`` may replay run ``sim`` of ``policy`` as far as can be told before bind,
    else the first reason it may not (class, switch, size, run conditions, options, in this order).
    ``sim`` needs ``n``, ``models``, ``gates``, ``placer`` and ``held_jobs`` (missing ones count as empty)."""
    if not backend.implemented_by(policy):
        sub = "" if backend.exact_class else " or a subclass"
        return f"{class_id(type(policy))} is not {backend.implements}{sub}"
    mode = getattr(policy, backend.mode) if backend.mode else "auto"
    if mode == "off":
        return f"{backend.mode} = 'off'"
    n = int(getattr(sim, "n", 0))
    if mode == "auto" and n < backend.min_jobs:
        return f"{n} jobs, fewer than {backend.min_jobs}" + (f" ({backend.mode} = 'auto')" if backend.mode else "")
    for cond in backend.run:
        why = _run_refusal(cond, sim)
        if why:
            return why
    return first_refusal(backend.options, policy)


def _run_refusal(cond: str, sim: Any) -> str | None:
    if cond == "no_models":
        models = list(getattr(sim, "models", ()) or ())
        return f"models present: {', '.join(_label(m) for m in models)}" if models else None
    if cond == "no_gates":
        gates = list(getattr(sim, "gates", ()) or ())
        return f"gates present: {', '.join(_label(g) for g in gates)}" if gates else None
    if cond == "no_placer":
        return None if getattr(sim, "placer", None) is None else f"placer {_label(sim.placer)} set"
    held = int(getattr(sim, "held_jobs", 0) or 0)           # no_held_jobs
    return f"{held} held jobs" if held else None


def _label(obj: Any) -> str:
    name = getattr(obj, "name", None)
    return name if isinstance(name, str) else type(obj).__name__


def first_refusal(conds: tuple[Require, ...], policy: Any) -> str | None:
    """The first failing condition's reason, or None when all pass."""
    for c in conds:
        why = c.refusal(policy)
        if why:
            return why
    return None


def allows(name: str, policy: Any) -> bool:
    """True when backend ``name`` applies to the bound ``policy`` (its class and its ``options`` and
    ``bound`` conditions; run conditions are the seam's): what a ``"cycle"`` backend's policy asks."""
    b = BACKENDS[name]
    return b.implemented_by(policy) and first_refusal(b.options + b.bound, policy) is None


def dispatch(sim: Any):
    """The compiled result of run ``sim`` (a `twin.simulation.Simulation`) by the backend that
    implements its policy, or None (the general loop runs); and the `Decision`. A backend with a
    ``prepare`` step binds the policy first (the engine binds it again if the run is refused after)."""
    policy = sim.scheduler
    b = replay_backend_for(policy)
    if b is None:
        return None, Decision(None, False, f"no compiled backend implements {class_id(type(policy))}")
    why = decide_before_bind(b, policy, sim)
    if why is None:
        mod = importlib.import_module(b.module)
        if b.prepare:
            getattr(mod, b.prepare)(sim)
            why = first_refusal(b.bound, policy)
        if why is None:
            res = mod.engine_run(sim)
            if res is not None:
                return res, Decision(b.name, True)
            why = "the replay stopped on an error (the general engine reruns the run and reports it)"
    return None, Decision(b.name, False, why)


def engine_fast_path(sim: Any):
    """The `twin.simulation.Simulation` fast-path seam: `dispatch`, with the decision left on the
    simulation (``sim.backend_decision``) and on the policy's declared ``record`` attribute, and
    the progress bar moved to the end when the compiled path ran."""
    res, decision = dispatch(sim)
    sim.backend_decision = decision
    b = BACKENDS.get(decision.backend) if decision.backend else None
    if b is not None and b.record:
        setattr(sim.scheduler, b.record, decision.used)
    if res is not None and getattr(sim, "progress", None) is not None:
        sim.progress.update(sim.n)
    return res


def kernel_sets() -> list:
    """The distinct `twin.aot.KernelSet` objects of the declared backends (importing their modules
    imports no numba): what ``hpctwin doctor --build-kernels`` builds."""
    out, seen = [], set()
    for b in BACKENDS.values():
        where, _, attr = b.kernels.partition(":")
        ks = getattr(importlib.import_module(where), attr)
        if ks.name not in seen:
            seen.add(ks.name)
            out.append(ks)
    return out


__all__ = ["BACKENDS", "Backend", "Decision", "MODES", "RUN_CONDITIONS", "Require", "allows", "class_id",
           "decide_before_bind", "dispatch", "engine_fast_path", "first_refusal", "kernel_sets",
           "replay_backend_for"]
