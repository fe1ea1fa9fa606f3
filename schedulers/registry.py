"""The scheduler table: every policy a run can name, what it takes and what it needs.

Built-in names (queue order x backfilling, see `schedulers.backfill`):

=================  ==========  ============
name               order       backfill
=================  ==========  ============
``fcfs``           fcfs        none
``sjf``            sjf         none
``ljf``            ljf         none
``saf``            saf         none
``wfp3``           wfp3        none
``unicep``         unicep      none
``easy``           fcfs        easy
``conservative``   fcfs        conservative
=================  ==========  ============

``order`` and ``backfill`` arguments override either component (``easy`` with order ``sjf`` is
SJF-ordered EASY backfilling).

Other names: ``slurm`` (`schedulers.slurm`), ``llm`` (`schedulers.llm`, LLM-aware placement),
``gpu-pack`` (`schedulers.gpu_packing`, GPU-granular packing; needs ``allocation = "gpu"``),
``price-aware`` (`schedulers.price_aware`, Yang et al. SC'13 time-of-use dispatch; needs the power
model), the predictive EASY variants of `schedulers.predictive`, ``rls-NAME[-bf]``, the RLScheduler
harness's rules on the engine (`schedulers.rlscheduler_policy`; its exact table: ``--compat rlscheduler``),
and ``lxf`` (`schedulers.lxf`, largest expansion factor first).

``exec:CMD`` starts ``CMD`` as an external scheduler process speaking the JSON-lines protocol
(`schedulers.external`, ``docs/protocol.md``).

``module:Class`` (and an entry point of the ``hpctwin.schedulers`` group) is resolved and checked
**before anything is called**: it must be a class that subclasses `Scheduler` or defines a
``schedule`` method (the documented plug-in contract), or a function marked as a scheduler factory
with `scheduler_factory`. Anything else (``os:system``, ``subprocess:Popen``) is refused without being
called (the trust model is in ``docs/protocol.md``). A `Scheduler` class or instance may also be given
directly (``RunConfig(scheduler=MyScheduler)``).

Every name is one `SchedulerEntry` of `SCHEDULERS` (the table kit of `twin.plugins`). An entry's
factory is called as ``factory(**options)``, plus ``order=`` / ``backfill=`` when the entry ``takes``
them and they are given (a prefix entry such as ``exec:`` first gets the rest of the name). What the
run needs is read from the entry, never from the name: ``requires`` (`Needs`: GPU allocation, models
by what they provide, LLM jobs), ``supports_failures``, ``guarantees`` (checked by the conformance
suite, `schedulers.checks`), ``from_run`` (options that default to the run's values), ``packs_gpus``.
Adding a policy touches its module and one ``SCHEDULERS.register(...)`` line here.
"""
from __future__ import annotations

import functools
import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from hpctwin.twin.errors import RunConfigError
from hpctwin.twin.plugins import ANY_OPTIONS, Entry, Signature, Table, resolve

from .backfill import BACKFILLS, QueueScheduler
from .base import Scheduler, as_scheduler
from .ordering import ORDERS

BUILTIN = {name: (name, "none") for name in ORDERS}
BUILTIN.update({"easy": ("fcfs", "easy"), "conservative": ("fcfs", "conservative")})


class UnknownSchedulerError(RunConfigError):
    """A scheduler name, class or option set that cannot build a scheduler."""


@dataclass(frozen=True)
class Needs:
    """What a scheduler needs from its run.

    ``allocation``: ``"gpu"`` when the run's units must be GPUs; ``models``: what the run's models
    must provide (a `twin.models.ModelEntry`'s ``provides``; the run names the switch of the model
    that provides it); ``jobs(workload) -> str | None``: why the workload cannot serve the policy
    (None: it can), checked once the workload is loaded.
    """

    allocation: str | None = None
    models: tuple[str, ...] = ()
    jobs: Callable[[Any], str | None] | None = None


@dataclass(frozen=True)
class SchedulerEntry(Entry):
    """One scheduler of `SCHEDULERS` (``requires`` is a `Needs`).

    ``takes``: which of ``order``, ``backfill``, ``slurm_conf`` apply (the others are refused, with
    ``why_not`` as the reason); ``supports_failures``: False when node outages would break the policy
    (it keeps its own node map); ``guarantees``: what the conformance suite checks for it when run
    with its own order and backfill; ``from_run``: options that default to the run's values
    (``system``: the system's name, ``gpus_per_node``, ``node_group``); ``packs_gpus``: the policy
    allocates GPUs itself (GPU allocation does not wrap it); ``check_with``: run fields the
    conformance suite runs it with; ``check_variants``: ``"module:attr"`` of a function giving
    {label: options} of the configurations the suite checks (default: the entry as it is); ``queue``:
    the (order, backfill) pair a built-in name stands for (the suite checks the whole order x backfill
    grid instead); ``code``: the name names code to import (``module:Class``); ``units``:
    ``"module:function"`` ``(cfg, units, options) -> Units`` asked once the workload and the machine are
    known, before the jobs are prepared: a policy may count the machine in other units (Slurm's
    select/cons_tres counts CPUs, so that jobs share nodes); ``machine``: ``"module:function"``
    ``(options) -> (units, source) | None``: the machine the policy's own configuration describes
    (Slurm: its slurm.conf's NodeName nodes), the workload's size when neither ``--nodes``, ``--system``
    nor the workload gives one.
    """

    takes: tuple[str, ...] = ()
    why_not: str = ""
    supports_failures: bool = True
    guarantees: frozenset = frozenset()
    from_run: tuple[str, ...] = ()
    packs_gpus: bool = False
    check_with: Mapping[str, Any] = field(default_factory=dict, compare=False)
    check_variants: Any = None
    queue: tuple[str, str] | None = None
    code: bool = False
    units: str | None = None
    machine: str | None = None

    @property
    def needs(self) -> Needs:
        return self.requires if isinstance(self.requires, Needs) else Needs()

    def build(self, name: str, order: str | None = None, backfill: str | None = None,
              options: dict | None = None) -> Scheduler:
        """A new scheduler of this entry (``name`` as given: a prefix entry reads the rest of it)."""
        kwargs = {k: v for k, v in (("order", order), ("backfill", backfill)) if k in self.takes and v is not None}
        args = (name[len(self.name):],) if self.prefix else ()
        return self.load()(*args, **kwargs, **dict(options or {}))

    def adapt_units(self, cfg, units, options: Mapping[str, Any]):
        """The machine's units as this policy counts them (``units`` unless the entry declares ``units``)."""
        return resolve(self.units)(cfg, units, options) if self.units else units

    def machine_size(self, options: Mapping[str, Any]) -> tuple[int, str] | None:
        """(units, where from) of the machine the policy's configuration describes, or None."""
        return resolve(self.machine)(options) if self.machine else None


# ---------------------------------------------------------------------- factories of the built-in names
def _queue(name: str, order: str | None = None, backfill: str | None = None) -> QueueScheduler:
    o, b = BUILTIN[name]
    o, b = order or o, backfill or b
    return QueueScheduler(o, b, name=name if (o, b) == BUILTIN[name] else f"{o}+{b}")


def _price_aware(backfill: str | None = None, **options):
    from .price_aware import PriceAwareScheduler  # noqa: PLC0415
    try:
        return PriceAwareScheduler(backfill=backfill or "easy", **options)
    except TypeError as e:
        raise UnknownSchedulerError(f"scheduler 'price-aware': bad options {options}: {e}") from None


def _slurm(slurm_conf: str | None = None, **options):
    from .slurm import make_slurm_scheduler  # noqa: PLC0415 - optional module
    return make_slurm_scheduler(slurm_conf, options)


def _exec(command: str, **options):
    from .external import ExternalScheduler  # noqa: PLC0415
    return ExternalScheduler(command, **options)


def _rls(heuristic: str, backfill: bool, name: str, **options):
    from .rlscheduler_policy import RLSchedulerPolicy  # noqa: PLC0415
    return RLSchedulerPolicy(heuristic, backfill, name=name, **options)


def _llm_training_jobs(wl) -> str | None:
    """Why a workload cannot serve the ``llm`` policy (no LLM training job), or None."""
    import numpy as np  # noqa: PLC0415

    from hpctwin.twin.job_classes import TRAINING_CLASSES  # noqa: PLC0415
    cols = wl.columns
    training = False
    if "job_class" in cols:
        training = bool(np.isin(np.asarray(cols["job_class"], dtype=object), TRAINING_CLASSES).any())
    if "max_groups" in cols:
        training = training or bool((np.asarray(cols["max_groups"]) >= 0).any())
    if training:
        return None
    return ("has no LLM training jobs (job_class llm_pretrain/llm_finetune or a max_groups column), so the llm "
            "policy would only act as its inner EASY policy; use --scheduler easy, or an LLM workload such as "
            "--workload llm-synthetic or acme:trace_seren.csv")


# ---------------------------------------------------------------------- plug-ins: module:Class and entry points
def scheduler_factory(func):
    """Mark ``func`` as a scheduler factory, so ``--scheduler module:func`` may call it.

    A factory takes the scheduler options as keyword arguments and returns an object with a
    ``schedule(now, queue, cluster)`` method. Only marked functions are called: a name such as
    ``os:system`` resolves to a function that is not marked and is refused before it runs.
    """
    func.hpctwin_scheduler_factory = True
    return func


def check_plugin(obj, spec: str):
    """Return ``obj`` when it may be called to build a scheduler, else raise `UnknownSchedulerError`.

    Allowed: a class that subclasses `Scheduler` or defines a callable ``schedule`` (checked on the
    class, nothing is instantiated), or a function marked with `scheduler_factory`. Nothing is called.
    """
    if inspect.isclass(obj):
        if issubclass(obj, Scheduler) or callable(inspect.getattr_static(obj, "schedule", None)):
            return obj
        raise UnknownSchedulerError(
            f"scheduler {spec!r}: {obj.__module__}.{obj.__qualname__} is a class without a "
            "schedule(now, queue, cluster) method; name a subclass of hpctwin.Scheduler (or a class "
            "with that method); it was not called")
    if inspect.isfunction(obj) and getattr(obj, "hpctwin_scheduler_factory", False):
        return obj
    what = type(obj).__name__
    raise UnknownSchedulerError(
        f"scheduler {spec!r}: resolves to a {what}, not a scheduler class; it was not called. Name a "
        "subclass of hpctwin.Scheduler (or a class with a schedule(now, queue, cluster) method), or a "
        "function decorated with hpctwin.schedulers.registry.scheduler_factory")


def _load_class(spec: str):
    mod_name, _, cls_name = spec.partition(":")
    if not mod_name or not cls_name or not all(part.isidentifier() for part in mod_name.split(".")) \
            or not all(part.isidentifier() for part in cls_name.split(".")):
        raise UnknownSchedulerError(f"scheduler {spec!r}: expected module:Class (e.g. mypkg.sched:MyScheduler)")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise UnknownSchedulerError(f"scheduler {spec!r}: cannot import module {mod_name!r}: {e}") from None
    except Exception as e:  # noqa: BLE001 - the module's own code failed on import: say so, no traceback
        raise UnknownSchedulerError(f"scheduler {spec!r}: importing {mod_name!r} failed: "
                                    f"{type(e).__name__}: {e}") from None
    obj = mod
    for part in cls_name.split("."):
        try:
            obj = inspect.getattr_static(obj, part)
        except AttributeError:
            raise UnknownSchedulerError(f"scheduler {spec!r}: module {mod_name!r} has no {cls_name!r}") from None
    return check_plugin(obj, spec)


def _construct(target, name: str, **options):
    """``target(**options)`` (a checked plug-in class or factory), its failures as one line."""
    try:
        sched = target(**options) if options else target()
    except TypeError as e:
        raise UnknownSchedulerError(f"scheduler {name!r}: cannot construct with options {options}: {e}") from None
    except Exception as e:  # noqa: BLE001 - the plug-in's own constructor failed: one line, no traceback
        raise UnknownSchedulerError(f"scheduler {name!r}: its constructor raised {type(e).__name__}: {e}") from None
    if not callable(getattr(sched, "schedule", None)):
        raise UnknownSchedulerError(f"scheduler {name!r}: {target!r} has no schedule(now, queue, cluster) method")
    return as_scheduler(sched, name)      # the plug-in object itself is never patched


def _plugin_entry(name: str, target, *, code: bool) -> SchedulerEntry:
    """The entry of a checked plug-in class or factory: its options from its signature, its tags
    from its class attributes (a property is read from the built object by the run instead)."""
    def attr(key: str, default):
        v = inspect.getattr_static(target, key, default)
        return default if isinstance(v, property) else v
    needs = attr("needs_models", ())
    return SchedulerEntry(name, functools.partial(_construct, target, name), options=Signature(target),
                          requires=Needs(models=tuple(needs) if isinstance(needs, (tuple, list)) else ()),
                          supports_failures=attr("supports_failures", True) is not False,
                          guarantees=frozenset(attr("guarantees", frozenset()) or ()), code=code,
                          packs_gpus=bool(attr("packs_gpus", False)),
                          doc=(inspect.getdoc(target) or "").split("\n")[0])


def is_plugin_spec(name: str) -> bool:
    """Whether ``name`` has the ``module:Class`` form the table resolves by importing (a name no
    entry has and without ``:`` is simply unknown)."""
    return ":" in name


def _from_module_class(name: str) -> SchedulerEntry | None:
    """``module:Class`` resolved and checked (`_load_class`), or None for a name of another form."""
    if not is_plugin_spec(name):
        return None
    return _plugin_entry(name, _load_class(name), code=True)


def _from_entry_point(name: str, ep) -> SchedulerEntry:
    try:
        obj = ep.load()
    except Exception as e:  # noqa: BLE001 - a broken plug-in package: one line, no traceback
        raise UnknownSchedulerError(f"scheduler {name!r}: loading its entry point failed: "
                                    f"{type(e).__name__}: {e}") from None
    return _plugin_entry(name, check_plugin(obj, name), code=False)


def object_spec(obj) -> str:
    """``module:Class`` of a scheduler class or instance (what config.toml records for it)."""
    cls = obj if inspect.isclass(obj) else type(obj)
    return f"{cls.__module__}:{cls.__qualname__}"


def entry_for_object(obj) -> SchedulerEntry:
    """The entry of a scheduler given as a Python object: a class (checked as a plug-in, built with
    the run's options) or an instance (used as it is; it takes no options)."""
    spec = object_spec(obj)
    if inspect.isclass(obj) or inspect.isfunction(obj):
        return _plugin_entry(spec, check_plugin(obj, spec), code=False)
    if not callable(getattr(obj, "schedule", None)):
        raise UnknownSchedulerError(f"scheduler {obj!r}: not a scheduler (no schedule(now, queue, cluster) method); "
                                    "give a name, a subclass of hpctwin.Scheduler or an instance of one")
    name = str(getattr(obj, "name", None) or spec)

    def instance(**options):
        if options:
            raise UnknownSchedulerError(f"scheduler {name!r}: an instance takes no options (got {options}); give "
                                        "its class to build it with options")
        return as_scheduler(obj, name)
    entry = _plugin_entry(spec, type(obj), code=False)
    return SchedulerEntry(spec, instance, requires=entry.requires, supports_failures=entry.supports_failures,
                          guarantees=entry.guarantees, doc=entry.doc)


# ---------------------------------------------------------------------- the table
SCHEDULERS = Table("scheduler", group="hpctwin.schedulers", from_plugin=_from_entry_point,
                   resolver=_from_module_class, error=UnknownSchedulerError,
                   hint=", or module:Class for a third-party scheduler")

_QUEUE_DOC = {"fcfs": "first come, first served", "sjf": "shortest estimate first", "ljf": "longest estimate first",
              "saf": "smallest area first", "wfp3": "WFP3 utility order", "unicep": "UNICEP utility order",
              "easy": "FCFS with EASY backfilling", "conservative": "FCFS with conservative backfilling"}
for _name, (_o, _b) in BUILTIN.items():
    SCHEDULERS.register(SchedulerEntry(
        _name, functools.partial(_queue, _name), takes=("order", "backfill"), doc=_QUEUE_DOC.get(_name, ""),
        queue=(_o, _b),
        guarantees=frozenset({"easy_head"} if (_o, _b) == ("fcfs", "easy") else
                             {"conservative"} if _b == "conservative" else ())))
SCHEDULERS.register(SchedulerEntry(
    "slurm", _slurm, options=ANY_OPTIONS, takes=("slurm_conf",), doc="Slurm-like multifactor priority and backfill",
    units="hpctwin.schedulers.slurm_tres:cons_tres_units", machine="hpctwin.schedulers.slurm_tres:slurm_conf_machine",
    check_variants="hpctwin.schedulers.checks:slurm_variants",
    why_not="the Slurm-like policy orders by multifactor priority and backfills as its slurm.conf says (give them "
            "in --slurm-conf or --set scheduler.KEY)"))
SCHEDULERS.register(SchedulerEntry(
    "llm", "hpctwin.schedulers.llm:make_llm_scheduler",
    options=Signature("hpctwin.schedulers.llm:LLMScheduler", ("inner", "order", "backfill", "node_group", "placer")),
    takes=("order", "backfill"), requires=Needs(jobs=_llm_training_jobs), from_run=("system", "placement"),
    check_with={"system": "dgx-h100"}, doc="LLM-aware placement around EASY (group limits of training jobs)"))
SCHEDULERS.register(SchedulerEntry(
    "gpu-pack", "hpctwin.schedulers.gpu_packing:make_gpu_packing",
    options=Signature("hpctwin.schedulers.gpu_packing:GPUPackingScheduler", ("order", "backfill", "node_group")),
    takes=("order", "backfill"), requires=Needs(allocation="gpu"), from_run=("gpus_per_node", "node_group"),
    packs_gpus=True, doc="GPU-granular packing of several jobs a node"))
SCHEDULERS.register(SchedulerEntry(
    "price-aware", _price_aware, options=Signature("hpctwin.schedulers.price_aware:PriceAwareScheduler", ("backfill",)),
    takes=("backfill",), requires=Needs(models=("power",)),
    why_not="the price-aware policy orders the queue by its own rule", doc="time-of-use price-aware dispatch"))
SCHEDULERS.register(SchedulerEntry("exec:", _exec, options=Signature("hpctwin.schedulers.external:ExternalScheduler",
                                                                    ("command", "name")),
                                   prefix=True, code=True, doc="an external process (JSON-lines protocol)"))
SCHEDULERS.register(SchedulerEntry("rl:", "hpctwin.twin.rl.policy_scheduler:RLPolicyScheduler",
                                   options=Signature("hpctwin.twin.rl.policy_scheduler:RLPolicyScheduler",
                                                     ("path", "name")),
                                   prefix=True, code=True,
                                   doc="a trained policy file (hpctwin.rl; a .zip model is unpickled: code)"))


def _register_families() -> None:
    """The predictive EASY variants and the RLScheduler harness's rules (one entry a name)."""
    from .predictive import PREDICTIVE  # noqa: PLC0415
    from .rlscheduler_policy import POLICY_NAMES  # noqa: PLC0415
    for name, cls in PREDICTIVE.items():
        SCHEDULERS.register(SchedulerEntry(name, cls, options=Signature(cls), doc="EASY with predicted runtimes"))
    for name, (heuristic, bf) in POLICY_NAMES.items():
        SCHEDULERS.register(SchedulerEntry(
            name, functools.partial(_rls, heuristic, bf, name),
            options=Signature("hpctwin.schedulers.rlscheduler_policy:RLSchedulerPolicy",
                              ("heuristic", "backfill", "name")),
            doc="the RLScheduler harness's rule on the engine"))


_register_families()
SCHEDULERS.register(SchedulerEntry("lxf", "hpctwin.schedulers.lxf:LXFScheduler", takes=("backfill",),
                                   doc="largest expansion factor first (Maui XFactor)"))
SCHEDULERS.register(SchedulerEntry("laf", "hpctwin.schedulers.laf:LAFScheduler", takes=("backfill",),
                                   doc="largest area first (procs x estimate), the mirror of saf"))
SCHEDULERS.register(SchedulerEntry(
    "replay", "hpctwin.schedulers.replay:ReplayScheduler",
    options=Signature("hpctwin.schedulers.replay:ReplayScheduler"),
    check_variants="hpctwin.schedulers.replay:conformance_variants",
    why_not="the replay starts every job at its recorded start", doc="the log's recorded starts and nodes (as-run)"))


# ---------------------------------------------------------------------- lookups
def known_schedulers() -> list[str]:
    """Every scheduler name: the table's (a prefix such as ``exec:`` aside), then the entry points.

    Examples
    --------
    >>> import hpctwin
    >>> hpctwin.known_schedulers()[:8]
    ['fcfs', 'sjf', 'ljf', 'saf', 'wfp3', 'unicep', 'easy', 'conservative']
    >>> "slurm" in hpctwin.known_schedulers()
    True
    """
    return SCHEDULERS.names()


def scheduler_entry(name) -> SchedulerEntry:
    """The entry of a scheduler name, ``module:Class``, ``exec:CMD``, entry point, or Python class or
    instance; `UnknownSchedulerError` (a `RunConfigError`, with a did-you-mean suggestion) otherwise."""
    if not isinstance(name, str):
        return entry_for_object(name)
    return SCHEDULERS.lookup(name)


def check_order_backfill(order: str | None, backfill: str | None) -> None:
    """Known ``order`` and ``backfill`` names (None: the scheduler's own)."""
    from hpctwin.twin.schema import did_you_mean  # noqa: PLC0415
    if backfill is not None and backfill not in BACKFILLS:
        raise UnknownSchedulerError(f"unknown backfill {backfill!r}{did_you_mean(backfill, BACKFILLS)}; known: "
                                    f"{', '.join(BACKFILLS)}")
    if order is not None and order not in ORDERS:
        raise UnknownSchedulerError(f"unknown order {order!r}{did_you_mean(order, ORDERS)}; known: {', '.join(ORDERS)}")


def make_scheduler(name, order: str | None = None, backfill: str | None = None,
                   options: dict | None = None) -> Scheduler:
    """Build a scheduler from its name (see module docstring), class or instance, and options.

    Examples
    --------
    >>> import hpctwin
    >>> hpctwin.make_scheduler("easy").describe()
    {'name': 'easy', 'order': 'fcfs', 'backfill': 'easy'}
    >>> hpctwin.make_scheduler("easy", order="sjf").name
    'sjf+easy'
    >>> try:
    ...     hpctwin.make_scheduler("conservativ")
    ... except hpctwin.RunConfigError as e:
    ...     print(e)
    unknown scheduler 'conservativ' (did you mean 'conservative'?); known: fcfs, ...
    """
    check_order_backfill(order, backfill)
    entry = scheduler_entry(name)
    return entry.build(name if isinstance(name, str) else entry.name, order, backfill, options)
