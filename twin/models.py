"""The physics-model registry: which models a run can have, what each provides and requires, and
how the composition root builds the run's models from its configuration.

Each entry is a `ModelEntry`: a name, the configuration switch that turns it on (``enabled``), the
system tables and other models it ``requires``, what it ``provides`` (for policies and gates that
declare ``needs_models``; e.g. ``"power"`` gives ``projected_facility_power_w``) and a factory
``build(setup) -> RunModel``. Entries are kept in run order: rate factors of several models multiply
in that order, and models are told of each start and finish in that order.

Third-party models register through the ``hpctwin.models`` entry-point group: the entry point
loads a `ModelEntry` (or a zero-argument callable returning one). Adding a model therefore touches
at most two files: the model's module, and this table (or the plug-in's ``pyproject.toml``).

The composition never refers to model classes by name and never changes a model after it is built:
what differs between runs (the machine's units per node in GPU allocation, the seed...) reaches the
model through its `twin.contract.ModelContext` at bind time.
"""
from __future__ import annotations

import functools

from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Callable


class ModelConfigError(ValueError):
    """A model that the configuration asks for cannot be built (missing system table, bad option)."""


@dataclass(frozen=True)
class ModelSetup:
    """What a model factory may read: the run configuration, the system (or None) and the
    allocation mode (``gpu``: units are GPUs, ``units_per_node`` GPUs a node)."""

    cfg: Any
    system: Any
    gpu: bool = False
    units_per_node: int = 1

    def options(self, table: str) -> dict:
        return dict(self.cfg.options.get(table, {}) or {})


@dataclass(frozen=True)
class ModelEntry:
    """One registered physics model (see the module docstring).

    ``requires``: ``"system.power"`` / ``"system.network"`` (the system file needs that table).
    ``gpu``: whether the model supports GPU allocation (units = GPUs).
    ``interrupts``: the model takes units down and interrupts jobs (policies must support failures).
    """

    name: str
    enabled: Callable[[Any], bool]
    build: Callable[[ModelSetup], Any]
    provides: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    flag: str = ""
    gpu: bool = True
    interrupts: bool = False
    doc: str = field(default="", compare=False)
    #: models of the run this one drives through their public operations when they are on (e.g.
    #: serving sets its jobs' node power in ``power``): given to ``model.use_models({name: model})``
    #: after every model is built, before binding
    uses: tuple[str, ...] = ()


# ---------------------------------------------------------------------- built-in models
def _power(s: ModelSetup):
    from hpctwin.power.model import PowerModel  # noqa: PLC0415
    return PowerModel.from_system(s.system, s.cfg.options, facility_cap_w=s.cfg.power_cap)


def _llm_iteration(s: ModelSetup):
    from hpctwin.topology.llm_iteration import LLMIterationModel  # noqa: PLC0415
    return LLMIterationModel(gpu=s.options("llm").get("gpu"))


def _network(s: ModelSetup):
    from hpctwin.topology.contention import NetworkContentionModel  # noqa: PLC0415
    return NetworkContentionModel.from_system(s.system, s.cfg.options)


def _failures(s: ModelSetup):
    from .failures import FailureConfig, FailureConfigError, FailureModel  # noqa: PLC0415
    opts = {k: v for k, v in s.options("failures").items() if k != "enabled"}
    if s.gpu:
        opts["units_per_node"] = s.units_per_node     # a node failure takes all its GPUs down
    try:
        return FailureModel(FailureConfig.from_options(opts, "option failures"))
    except (FailureConfigError, TypeError) as e:
        raise ModelConfigError(str(e)) from None


def _serving(s: ModelSetup):
    from .serving.batch import build  # noqa: PLC0415
    try:
        return build(s)
    except (ValueError, KeyError, OSError) as e:
        raise ModelConfigError(str(e)) from None


def failures_enabled(cfg) -> bool:
    """Failures run only when switched on (``--failures on`` = option ``failures.enabled = true``);
    ``failures.*`` options alone are refused, never silently applied or ignored."""
    opts = cfg.options.get("failures") or {}
    on = opts.get("enabled", False) is True
    others = sorted(k for k in opts if k != "enabled")
    if others and not on:
        raise ModelConfigError(f"failures options {', '.join('failures.' + k for k in others)} given without "
                               "--failures on (option failures.enabled = true); add --failures on or drop them")
    return on


BUILTIN: list[ModelEntry] = [
    ModelEntry("power", lambda c: bool(c.power), _power, provides=("power",), requires=("system.power",),
               flag="--power on", doc="node power, conversion losses, cooling and PUE (power.model)"),
    ModelEntry("llm_iteration", lambda c: bool((c.options.get("llm") or {}).get("iteration")), _llm_iteration,
               provides=("llm_iteration",), requires=("system.network",), flag="llm.iteration",
               doc="LLM training iteration times from the job's placement (topology.llm_iteration)"),
    ModelEntry("network", lambda c: bool(c.network), _network, provides=("network",),
               requires=("system.network",), flag="--network on", gpu=False,
               doc="link contention slowing communicating jobs (topology.contention)"),
    ModelEntry("failures", failures_enabled, _failures, provides=("failures",), flag="--failures on",
               interrupts=True, doc="node failures, repairs and job recovery (twin.failures)"),
    ModelEntry("serving", lambda c: bool((c.options.get("serving") or {}).get("trace")), _serving,
               provides=("serving",), flag="serving.trace", gpu=False, uses=("power",),
               doc="an LLM serving deployment whose instances are node-request jobs (twin.serving.batch)"),
]


def registered() -> list[ModelEntry]:
    """Built-in entries plus those of the ``hpctwin.models`` entry-point group (in that order)."""
    return list(BUILTIN) + list(_plugin_entries())


@functools.lru_cache(maxsize=1)
def _plugin_entries() -> tuple[ModelEntry, ...]:
    """The entry-point group, read once per process (scanning installed metadata costs ~25 ms)."""
    out: list[ModelEntry] = []
    try:
        eps = list(metadata.entry_points(group="hpctwin.models"))
    except Exception:  # pragma: no cover - broken environment metadata
        eps = []
    for ep in eps:
        obj = ep.load()
        entry = obj if isinstance(obj, ModelEntry) else obj()
        if not isinstance(entry, ModelEntry):
            raise ModelConfigError(f"entry point hpctwin.models:{ep.name} gave {entry!r}, not a ModelEntry")
        out.append(entry)
    return tuple(out)


def build_models(setup: ModelSetup, entries: list[ModelEntry] | None = None) -> list:
    """The run's models, in registry order: every entry the configuration turns on, its
    requirements checked first (a clear error names the switch and what is missing)."""
    out, used = [], []
    for e in entries if entries is not None else registered():
        if not e.enabled(setup.cfg):
            continue
        for req in e.requires:
            table = req.split(".", 1)[1]
            if setup.system is None or not getattr(setup.system, table, None):
                raise ModelConfigError(f"{e.flag or e.name} needs a --system with a [{table}] table")
        if setup.gpu and not e.gpu:
            raise ModelConfigError(f"--allocation gpu does not support {e.flag or e.name} yet (the model works on "
                                   "whole nodes)")
        out.append(e.build(setup))
        if e.uses:
            used.append((out[-1], e.uses))
    for m, names in used:                 # optional peers: only the models this run has
        by_name = {getattr(p, "name", None): p for p in out if p is not m}
        m.use_models({n: by_name[n] for n in names if n in by_name})
    return out


def entry_of(model: Any, entries: list[ModelEntry] | None = None) -> ModelEntry | None:
    """The registry entry a built model came from (matched by the model's ``name``)."""
    for e in entries if entries is not None else registered():
        if e.name == getattr(model, "name", None):
            return e
    return None
