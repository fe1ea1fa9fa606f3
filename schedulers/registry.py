"""Scheduler lookup by name: built-in policies, ``module:Class`` and the ``hpctwin.schedulers``
entry-point group.

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
model), the predictive EASY variants of `schedulers.predictive`, and ``rls-NAME[-bf]``, the RLScheduler
harness's rules on the engine (`schedulers.rlscheduler_policy`; its exact table: ``--compat rlscheduler``).

``exec:CMD`` starts ``CMD`` as an external scheduler process speaking the JSON-lines protocol
(`schedulers.external`, ``docs/protocol.md``).

``module:Class`` (and an entry point) is resolved and checked **before anything is called**: it must be
a class that subclasses `Scheduler` or defines a ``schedule`` method (the documented plug-in contract),
or a function marked as a scheduler factory with `scheduler_factory`. Anything else (``os:system``,
``subprocess:Popen``) is refused without being called (the trust model is in ``docs/protocol.md``).
"""
from __future__ import annotations

import importlib
import inspect
from importlib import metadata

from .backfill import BACKFILLS, QueueScheduler
from .base import Scheduler, as_scheduler
from .ordering import ORDERS

BUILTIN = {name: (name, "none") for name in ORDERS}
BUILTIN.update({"easy": ("fcfs", "easy"), "conservative": ("fcfs", "conservative")})
#: names handled by packages that build their scheduler from more options
SPECIAL = ("slurm", "llm", "gpu-pack", "price-aware")


class UnknownSchedulerError(ValueError):
    pass


def _predictive() -> dict:
    from .predictive import PREDICTIVE  # noqa: PLC0415
    return PREDICTIVE


def _rlscheduler() -> dict:
    from .rlscheduler_policy import POLICY_NAMES  # noqa: PLC0415
    return POLICY_NAMES


def known_schedulers() -> list[str]:
    names = list(BUILTIN) + list(SPECIAL) + list(_predictive()) + list(_rlscheduler())
    try:
        names += [ep.name for ep in metadata.entry_points(group="hpctwin.schedulers")]
    except Exception:  # pragma: no cover - broken environment metadata
        pass
    return names


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


def make_scheduler(name: str, order: str | None = None, backfill: str | None = None,
                   options: dict | None = None) -> Scheduler:
    """Build a scheduler from its name (see module docstring) and options."""
    options = dict(options or {})
    if backfill is not None and backfill not in BACKFILLS:
        raise UnknownSchedulerError(f"unknown backfill {backfill!r}; known: {', '.join(BACKFILLS)}")
    if order is not None and order not in ORDERS:
        raise UnknownSchedulerError(f"unknown order {order!r}; known: {', '.join(ORDERS)}")
    if name in BUILTIN:
        o, b = BUILTIN[name]
        o, b = order or o, backfill or b
        label = name if (o, b) == BUILTIN[name] else f"{o}+{b}"
        return QueueScheduler(o, b, name=label)
    if name in _predictive():
        return _predictive()[name](**options)
    if name in _rlscheduler():             # the RLScheduler harness's rules (schedulers.rlscheduler_policy)
        from .rlscheduler_policy import RLSchedulerPolicy  # noqa: PLC0415
        return RLSchedulerPolicy(*_rlscheduler()[name], name=name, **options)
    if name == "llm":
        from .llm import LLMScheduler  # noqa: PLC0415
        return LLMScheduler(inner="easy", order=order, backfill=backfill, **options)
    if name == "gpu-pack":
        from .gpu_packing import GPUPackingScheduler  # noqa: PLC0415
        try:
            return GPUPackingScheduler(order=order, backfill=backfill, **options)
        except TypeError as e:
            raise UnknownSchedulerError(f"scheduler 'gpu-pack': bad options {options}: {e}") from None
    if name == "price-aware":
        from .price_aware import PriceAwareScheduler  # noqa: PLC0415
        try:
            return PriceAwareScheduler(backfill=backfill or "easy", **options)
        except TypeError as e:
            raise UnknownSchedulerError(f"scheduler 'price-aware': bad options {options}: {e}") from None
    if name == "slurm":
        from .slurm import make_slurm_scheduler  # noqa: PLC0415 - optional module
        return make_slurm_scheduler(options.pop("slurm_conf", None), options)
    if name.startswith("exec:"):            # a process speaking the JSON-lines protocol (docs/protocol.md)
        from .external import ExternalScheduler  # noqa: PLC0415
        return ExternalScheduler(name[len("exec:"):], **options)
    if ":" in name:
        cls = _load_class(name)
    else:
        eps = {}
        try:
            eps = {ep.name: ep for ep in metadata.entry_points(group="hpctwin.schedulers")}
        except Exception:  # pragma: no cover
            pass
        if name not in eps:
            raise UnknownSchedulerError(f"unknown scheduler {name!r}; known: {', '.join(known_schedulers())}, "
                                        "or module:Class for a third-party scheduler")
        try:
            cls = check_plugin(eps[name].load(), name)
        except UnknownSchedulerError:
            raise
        except Exception as e:  # noqa: BLE001 - a broken plug-in package: one line, no traceback
            raise UnknownSchedulerError(f"scheduler {name!r}: loading its entry point failed: "
                                        f"{type(e).__name__}: {e}") from None
    try:
        sched = cls(**options) if options else cls()
    except TypeError as e:
        raise UnknownSchedulerError(f"scheduler {name!r}: cannot construct with options {options}: {e}") from None
    except Exception as e:  # noqa: BLE001 - the plug-in's own constructor failed: one line, no traceback
        raise UnknownSchedulerError(f"scheduler {name!r}: its constructor raised {type(e).__name__}: {e}") from None
    if not callable(getattr(sched, "schedule", None)):
        raise UnknownSchedulerError(f"scheduler {name!r}: {cls!r} has no schedule(now, queue, cluster) method")
    return as_scheduler(sched, name)      # the plug-in object itself is never patched
