"""hpctwin: an HPC digital twin and scheduler sandbox.

The installed packages are ``hpctwin.twin`` (jobs, machine, engine, run folders, CLI),
``hpctwin.schedulers``, ``hpctwin.datasets``, ``hpctwin.topology``, ``hpctwin.power`` and
``hpctwin.experiments``; the repository keeps them as the top-level folders ``twin/``, ``schedulers/``...
(setuptools ``package-dir`` mapping). The public API is re-exported here and imported lazily, so that
``import hpctwin`` stays cheap::

    import hpctwin
    res = hpctwin.run(hpctwin.RunConfig(workload="synthetic:jobs=2000", scheduler="easy"))
    res.jobs          # pandas DataFrame, one row per job
    res.summary       # dict (the run's summary.json)
    res.timeseries    # {name: (values on the sample_dt grid, unit)}

``hpctwin.run(cfg)`` is ``hpctwin.execute(hpctwin.plan(cfg))``: the plan validates the configuration as
the command line does (every error a ``RunConfigError`` with a did-you-mean suggestion) and resolves it
to the plug-in tables' entries. A scheduler may be given by name or as a ``hpctwin.Scheduler`` class or
instance (``RunConfig(scheduler=MyScheduler)``).
"""
from __future__ import annotations

from importlib import import_module
from pathlib import Path as _Path

__version__ = "0.1.0"

# In a source checkout (this folder beside pyproject.toml and twin/), hpctwin.twin, hpctwin.schedulers...
# are the checkout's own folders, whatever copy of hpctwin is installed: a second worktree of an older
# commit (benchmarks/identity_check.py) or an uninstalled clone runs its own code. An installed wheel
# has no such siblings and is unaffected.
_root = _Path(__file__).resolve().parent.parent
if (_root / "pyproject.toml").is_file() and (_root / "twin" / "simulation.py").is_file():
    __path__.append(str(_root))  # noqa: F821 - the package's own __path__

#: public name -> module that defines it
_API = {
    "run": "hpctwin.twin.run",
    "RunConfig": "hpctwin.twin.run",
    "RunResult": "hpctwin.twin.run",
    "RunConfigError": "hpctwin.twin.run",
    "plan": "hpctwin.twin.plan",
    "Plan": "hpctwin.twin.plan",
    "execute": "hpctwin.twin.run",
    "load_workload": "hpctwin.twin.run",
    "write_run": "hpctwin.twin.run",
    "Job": "hpctwin.twin.workload",
    "Workload": "hpctwin.twin.workload",
    "SystemSpec": "hpctwin.twin.system",
    "load_system": "hpctwin.twin.system",
    "builtin_systems": "hpctwin.twin.system",
    "Scheduler": "hpctwin.schedulers.base",
    "Start": "hpctwin.schedulers.base",
    "JobTable": "hpctwin.schedulers.base",
    "ClusterView": "hpctwin.schedulers.base",
    "make_scheduler": "hpctwin.schedulers.registry",
    "known_schedulers": "hpctwin.schedulers.registry",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    mod = _API.get(name)
    if mod is None:
        raise AttributeError(f"module 'hpctwin' has no attribute {name!r}")
    value = getattr(import_module(mod), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
