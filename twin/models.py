"""The physics-model registry: which models a run can have, what each provides and requires, and
how the composition root builds the run's models from its configuration.

Each entry is a `ModelEntry`: a name, the configuration switch that turns it on (``enabled``), the
system tables and other models it ``requires``, what it ``provides`` (for policies and gates that
declare ``needs_models``; e.g. ``"power"`` gives ``projected_facility_power_w``), a factory
``build(setup) -> RunModel`` and its ``options``: the ``--set SECTION.KEY`` section it reads and the
options dataclass (`twin.plugins.option` fields) its schema is derived from. Entries are kept in run
order: rate factors of several models multiply in that order, and models are told of each start and
finish in that order. `MODELS` is the table (`twin.plugins.Table`) over the built-in entries and the
entry points.

Third-party models register through the ``hpctwin.models`` entry-point group: the entry point
loads a `ModelEntry` (or a zero-argument callable returning one). An entry with an options dataclass
is switched on and configured from the command line with no other edit: ``--set NAME.enabled=true
--set NAME.KEY=VALUE`` (``enabled=None`` makes the section's ``enabled`` key the switch; the factory
reads its typed options with `ModelSetup.typed_options`). Adding a model therefore touches at most two
files: the model's module, and this table (or the plug-in's ``pyproject.toml``).

The composition never refers to model classes by name and never changes a model after it is built:
what differs between runs (the machine's units per node in GPU allocation, the seed...) reaches the
model through its `twin.contract.ModelContext` at bind time.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping

from .errors import RunConfigError
from .plugins import Table, schema_of


class ModelConfigError(RunConfigError):
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

    def typed_options(self, entry: "ModelEntry") -> Any:
        """The entry's options dataclass filled from its ``--set`` section (defaults for keys not given;
        the section's on-switch ``enabled`` included when the dataclass declares it)."""
        known = {f.name for f in fields(entry.options)}
        return entry.options(**{k: v for k, v in self.options(entry.section_name).items() if k in known})


@dataclass(frozen=True)
class ModelEntry:
    """One registered physics model (see the module docstring).

    ``requires``: ``"system.power"`` / ``"system.network"`` (the system file needs that table).
    ``gpu``: whether the model supports GPU allocation (units = GPUs).
    ``interrupts``: the model takes units down and interrupts jobs (policies must support failures).
    ``enabled``: None switches the model on by its section's ``enabled`` key (``--set NAME.enabled=true``).
    ``options``: what `twin.plugins.schema_of` reads (an options dataclass, a schema function, or
    ``"module:attr"`` of one); ``section``: its ``--set`` section (default: the name, when it has
    options). ``switch``: the `RunConfig` fields that turn it on (a policy that needs what it provides
    is run with them by the conformance suite). ``off_refused``: options given while the model is off
    are an error naming ``flag`` (``noun``: how the message calls them).
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
    options: Any = None
    section: str | None = None
    switch: Mapping[str, Any] = field(default_factory=dict, compare=False)
    off_refused: bool = True
    noun: str = ""

    def __post_init__(self) -> None:
        if self.enabled is None:                      # switched by --set SECTION.enabled=true
            object.__setattr__(self, "enabled", _by_option(self.section_name))
            if not self.flag:
                object.__setattr__(self, "flag", f"--set {self.section_name}.enabled=true")
            if not self.switch:
                object.__setattr__(self, "switch", {"options": {self.section_name: {"enabled": True}}})

    @property
    def section_name(self) -> str:
        """The ``--set`` section of the model's options ("" when it has none)."""
        if self.section is not None:
            return self.section
        return self.name if self.options is not None else ""

    def option_schema(self):
        """The section's `twin.options.Key` schema ({}: no key, None: any key)."""
        return schema_of(self.options)


def _by_option(section: str) -> Callable[[Any], bool]:
    """``cfg -> bool``: the model runs when ``options.SECTION.enabled`` is true."""
    def enabled(cfg) -> bool:
        return (cfg.options.get(section) or {}).get("enabled", False) is True
    return enabled


# ---------------------------------------------------------------------- built-in models
def _power(s: ModelSetup):
    from hpctwin.power.model import PowerModel  # noqa: PLC0415
    return PowerModel.from_system(s.system, s.cfg.options, facility_cap_w=s.cfg.power_cap)


def _power_saving(s: ModelSetup):
    from hpctwin.power.suspend import build  # noqa: PLC0415
    return build(s)


def _llm_iteration(s: ModelSetup):
    from hpctwin.topology.llm_iteration import LLMIterationModel  # noqa: PLC0415
    return LLMIterationModel(gpu=s.options("llm").get("gpu"))


def _training(s: ModelSetup):
    from hpctwin.twin.training.run_model import build  # noqa: PLC0415
    return build(s)


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


_OPT = "hpctwin.twin.model_options:"
BUILTIN: list[ModelEntry] = [
    ModelEntry("power", lambda c: bool(c.power), _power, provides=("power",), requires=("system.power",),
               flag="--power on", doc="node power, conversion losses, cooling and PUE (power.model)",
               options=_OPT + "power_keys", switch={"power": True}),
    ModelEntry("power_saving", None, _power_saving, provides=("power_saving",), gpu=False, uses=("power",),
               doc="Slurm power saving: idle nodes power down, jobs wait for their nodes to boot; node sleep "
                   "states feed the power model (power.suspend)",
               options="hpctwin.power.suspend:PowerSavingOptions"),
    ModelEntry("llm_iteration", lambda c: bool((c.options.get("llm") or {}).get("iteration")), _llm_iteration,
               provides=("llm_iteration",), requires=("system.network",), flag="llm.iteration",
               doc="LLM training iteration times from the job's placement (topology.llm_iteration)",
               options=_OPT + "LLMIterationOptions", section="llm", off_refused=False,
               switch={"options": {"llm": {"iteration": True}}}),
    ModelEntry("training", None, _training, provides=("training",), requires=("system.network",), gpu=False,
               uses=("network",), doc="first-principles LLM training iteration time, FLOP/s and memory of "
               "training jobs on their placement (twin.training.run_model)",
               options="hpctwin.twin.training.run_model:TrainingOptions"),
    ModelEntry("network", lambda c: bool(c.network), _network, provides=("network",),
               requires=("system.network",), flag="--network on", gpu=False,
               doc="link contention slowing communicating jobs (topology.contention)",
               options=_OPT + "NetworkOptions", switch={"network": True}),
    ModelEntry("failures", failures_enabled, _failures, provides=("failures",), flag="--failures on",
               interrupts=True, doc="node failures, repairs and job recovery (twin.failures)",
               options=_OPT + "failure_keys", noun="failure", switch={"options": {"failures": {"enabled": True}}}),
    ModelEntry("serving", lambda c: bool((c.options.get("serving") or {}).get("trace")), _serving,
               provides=("serving",), flag="serving.trace", gpu=False, uses=("power",),
               doc="an LLM serving deployment whose instances are node-request jobs (twin.serving.batch)",
               options=_OPT + "serving_keys", off_refused=False),
]


def _from_entry_point(name: str, ep) -> ModelEntry:
    obj = ep.load()
    entry = obj if isinstance(obj, ModelEntry) else obj()
    if not isinstance(entry, ModelEntry):
        raise ModelConfigError(f"entry point hpctwin.models:{name} gave {entry!r}, not a ModelEntry")
    return entry


#: the model table: the built-in entries (run order), then the ``hpctwin.models`` entry points
MODELS = Table("model", group="hpctwin.models", from_plugin=_from_entry_point, error=ModelConfigError)
for _e in BUILTIN:
    MODELS.register(_e)


def registered() -> list[ModelEntry]:
    """The table's entries (the built-in ones first) plus those of the ``hpctwin.models`` entry-point
    group, in that order."""
    return list(MODELS) + MODELS.plugins()


def sections() -> dict[str, ModelEntry]:
    """``--set`` section -> the model entry that reads it (built-in and entry-point models)."""
    return {e.section_name: e for e in registered() if e.section_name}


def providers(need: str, entries: list[ModelEntry] | None = None) -> list[ModelEntry]:
    """The entries whose ``provides`` holds ``need`` (what a policy's ``needs_models`` names)."""
    return [e for e in (entries if entries is not None else registered()) if need in e.provides]


def check_requirements(e: ModelEntry, system: Any, gpu: bool) -> None:
    """The system tables ``e`` requires are there, and it supports GPU allocation when ``gpu``."""
    for req in e.requires:
        table = req.split(".", 1)[1]
        if system is None or not getattr(system, table, None):
            raise ModelConfigError(f"{e.flag or e.name} needs a --system with a [{table}] table")
    if gpu and not e.gpu:
        raise ModelConfigError(f"--allocation gpu does not support {e.flag or e.name} yet (the model works on "
                               "whole nodes)")


def enabled_entries(cfg: Any, entries: list[ModelEntry] | None = None) -> list[ModelEntry]:
    """The entries ``cfg`` turns on, in registry order."""
    return [e for e in (entries if entries is not None else registered()) if e.enabled(cfg)]


def build_models(setup: ModelSetup, entries: list[ModelEntry] | None = None) -> list:
    """The run's models, in registry order: every entry the configuration turns on, its
    requirements checked first (a clear error names the switch and what is missing)."""
    out, used = [], []
    for e in entries if entries is not None else registered():
        if not e.enabled(setup.cfg):
            continue
        check_requirements(e, setup.system, setup.gpu)
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
