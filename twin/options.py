"""One validation layer for every configuration source: CLI flags, ``--set``, system TOML, sweep TOML.

Every error is a `ConfigError` (a ValueError) whose text reads ``file:line: key: message (did you
mean ...?)``: ``file`` is the TOML file (or ``--set`` / the flag for the command line), ``line``
the line of the key when the source has lines. No option is silently ignored: a key no part of
the run reads is an error, and so is an option that does not apply to the chosen scheduler or model.

The building blocks are small: `did_you_mean` (difflib), `Key` (type, range, choices of one
value), `check_table` (known keys and values of one table), `toml_line` (the line of a key in a
TOML text). The run-level checks are `validate_run_config` (before a run loads anything) and
`check_sample_grid` (once the workload's time span is known, before any series is allocated).
Known ``--set`` sections and keys are derived from the plug-in tables (`twin.plugins`): the scheduler
section from the chosen entry of `schedulers.registry.SCHEDULERS` (its options), each physics model's
section from its `twin.models.ModelEntry` (built-in and entry-point models alike), the ``gpu`` section
from the GPU allocation strategy (`twin.allocation`) and ``workload`` from `WorkloadOptions`. What a
scheduler takes and needs (``--order``, ``--backfill``, ``--slurm-conf``, GPU allocation, LLM jobs) is
read from its entry, never from its name. `run_field_schema` is derived from `twin.config.RunConfig`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from .errors import RunConfigError
from .workload import MAX_UNITS

# the schema kit is foundation (`twin.schema`): re-exported, so ``from twin.options import Key`` keeps working
from .schema import (MAX_SAMPLES, MAX_SEED, ConfigError, Key, check_known_keys, check_table,  # noqa: F401
                     did_you_mean, toml_line, where)


# ------------------------------------------------------------------------------ --set sections
@dataclass(frozen=True)
class WorkloadOptions:
    """``--set workload.KEY``: how the workload readers (`datasets.loader`) read a file."""

    duplicate_ids: str = "error"
    header_check: bool = True
    unit: str = "nodes"
    strict: bool = False


_WORKLOAD_CHOICES = {"duplicate_ids": ("error", "renumber"), "unit": ("nodes", "cpus")}


def _workload_keys() -> dict[str, Key]:
    out = {}
    for f in fields(WorkloadOptions):
        out[f.name] = Key(bool if isinstance(f.default, bool) else str, choices=_WORKLOAD_CHOICES.get(f.name))
    return out


def scheduler_keys(name: Any) -> dict[str, Key] | None:
    """Known ``--set scheduler.KEY`` options of scheduler ``name``, from its entry's options ({}: it takes
    none; None: any key, e.g. the Slurm-like policy validates its slurm.conf keys itself, or a
    ``module:Class`` that cannot be imported: the run reports that itself)."""
    from hpctwin.schedulers.registry import scheduler_entry  # noqa: PLC0415
    try:
        return scheduler_entry(name).option_schema()
    except RunConfigError:
        return None


@dataclass(frozen=True)
class Section:
    """One ``--set`` section: its name, its schema (a callable: {} no key, None any key), whether the
    run reads it, and the error text when it does not (``off``: "<noun> options need <switch>")."""

    name: str
    schema: Any
    active: bool = True
    off: str = ""
    switch_keys: frozenset = frozenset()


def sections(cfg) -> dict[str, Section]:
    """Every ``--set`` section a run may have, for ``cfg``: ``scheduler`` (the scheduler entry's
    options), one a physics model (`twin.models.sections`, entry points included), the allocation
    strategies' (``gpu``) and ``workload``."""
    from .allocation import ALLOCATIONS  # noqa: PLC0415
    from .models import ModelConfigError, sections as model_sections  # noqa: PLC0415
    out = {"scheduler": Section("scheduler", lambda: scheduler_keys(cfg.scheduler))}
    for name, e in model_sections().items():
        try:
            on = bool(e.enabled(cfg))
        except ModelConfigError:              # failure options without the switch: reported as "off" here
            on = False
        how = e.flag or f"--set {name}.enabled=true"
        switch = (e.switch.get("options") or {}).get(name) or {}
        out[name] = Section(name, e.option_schema, on or not e.off_refused, f"{e.noun or name} options need {how}",
                            frozenset(switch))
    for a in ALLOCATIONS:
        name = a.tag("section")
        if name:
            out[name] = Section(name, a.option_schema, cfg.allocation == a.name,
                                f"{a.tag('noun', a.name)} options need --allocation {a.name}")
    out["workload"] = Section("workload", _workload_keys)
    return out


def set_schema(section: str, scheduler: Any) -> dict[str, Key] | None:
    """The schema of ``--set SECTION.KEY`` with scheduler ``scheduler`` (None: any key, or an unknown section)."""
    from .config import RunConfig  # noqa: PLC0415
    sec = sections(RunConfig(scheduler=scheduler)).get(section)
    return None if sec is None else sec.schema()


def check_set_options(options: dict, scheduler: Any, *, failures: bool, power: bool, network: bool,
                      source: str = "--set", allocation: str = "node", cfg: Any = None) -> None:
    """Check the run's ``options`` tables (from ``--set`` or a config file's ``[options]``): known
    sections (with suggestions), no options of a model or strategy the run does not have, known keys
    and valid values. ``cfg`` is the run's configuration (built from the other arguments when None)."""
    if cfg is None:
        from .config import RunConfig  # noqa: PLC0415
        cfg = RunConfig(scheduler=scheduler, power=power, network=network, allocation=allocation, options=options)
    known = sections(cfg)
    for section, table in options.items():
        if section not in known:
            raise ConfigError(f"{source}: {section}: unknown section{did_you_mean(section, known)}; "
                              f"known: {', '.join(known)} (give SECTION.KEY=VALUE)")
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: {section}={table!r}: {section} is a section, not a value; give "
                              f"{section}.KEY=VALUE")
        sec = known[section]
        given = [k for k in table if k not in sec.switch_keys]
        if not sec.active and given:
            off = sec.off
            if sec.switch_keys and source != "--set":       # a file says options.SECTION.enabled = true
                off = off.rsplit(" need ", 1)[0] + " need " + " and ".join(
                    f"options.{section}.{k} = true" for k in sorted(sec.switch_keys))
            raise ConfigError(f"{source}: {section}.{given[0]}: {off} (they would otherwise be ignored)")
        schema = sec.schema()
        if schema is None:
            continue
        if section == "scheduler" and not schema and table:
            k = next(iter(table))
            raise ConfigError(f"{source}: scheduler.{k}: scheduler {_shown(scheduler)!r} takes no options "
                              "(order and backfill are --order and --backfill)")
        check_table(table, schema, source, section=section,
                    context=f"of scheduler {_shown(scheduler)!r}" if section == "scheduler" else "")


def _shown(scheduler: Any) -> str:
    """A scheduler as messages name it: its name, or ``module:Class`` of a Python object."""
    if isinstance(scheduler, str):
        return scheduler
    from hpctwin.schedulers.registry import object_spec  # noqa: PLC0415
    return object_spec(scheduler)


# ------------------------------------------------------------------------------ the run config
def _known_names(what: str) -> list[str]:
    if what == "placement":
        from hpctwin.topology.placement import PLACEMENTS  # noqa: PLC0415
        return PLACEMENTS.names()
    if what == "scheduler":
        from hpctwin.schedulers.registry import known_schedulers  # noqa: PLC0415
        return known_schedulers()
    if what == "estimate":
        from hpctwin.datasets.estimates import MODELS  # noqa: PLC0415
        return ["requested", "exact", *MODELS]
    if what == "allocation":
        from .allocation import ALLOCATIONS  # noqa: PLC0415
        return ALLOCATIONS.names()
    raise KeyError(what)  # pragma: no cover


#: numbers checked after the names (a wrong name is the more useful first error)
_LATE = ("sample_dt", "nodes", "seed", "power_cap", "gpus_per_node")


def validate_run_config(cfg, source: str = "command line") -> None:
    """Check a `twin.run.RunConfig` before anything is loaded: names (with suggestions), sizes
    (machine at most `twin.workload.MAX_UNITS` units), numbers (finite, in range) and options
    that apply to the chosen scheduler and models. Raises `ConfigError` (a `RunConfigError`)."""
    def flag(name: str) -> str:
        return f"{source}: --{name.replace('_', '-')}" if source == "command line" else f"{source}: {name}"

    schema = run_field_schema()
    by_name = not isinstance(cfg.scheduler, str)          # a Python class or instance
    for f in fields(cfg):                    # types first: a config file can hold anything
        if f.name in schema and f.name not in _LATE and not (f.name == "scheduler" and by_name):
            schema[f.name].check(getattr(cfg, f.name), flag(f.name))
    if not isinstance(cfg.workload, str) or not cfg.workload.strip():
        raise ConfigError(f"{flag('workload')}: empty workload (a file, a registry name, or synthetic)")
    if by_name:
        from hpctwin.schedulers.registry import entry_for_object  # noqa: PLC0415
        entry_for_object(cfg.scheduler)      # a scheduler class or instance, else UnknownSchedulerError
    elif not cfg.scheduler.strip():
        raise ConfigError(f"{flag('scheduler')}: empty scheduler name")
    for name in ("system", "data_dir"):     # an empty value must not mean "the default"
        v = getattr(cfg, name)
        if v is not None and not str(v).strip():
            raise ConfigError(f"{flag(name)}: empty {name.replace('_', ' ')}")
    if not by_name:                          # a module:Class is imported by the plan, not here
        from hpctwin.schedulers.registry import SCHEDULERS, is_plugin_spec  # noqa: PLC0415
        if SCHEDULERS.get(cfg.scheduler, resolve=False) is None and not is_plugin_spec(cfg.scheduler):
            known = _known_names("scheduler")
            raise ConfigError(f"{flag('scheduler')}: unknown scheduler {cfg.scheduler!r}"
                              f"{did_you_mean(cfg.scheduler, known)}; known: {', '.join(known)}, or module:Class")
    for name in ("placement", "estimate", "allocation"):
        v = getattr(cfg, name)
        known = _known_names(name)
        if name == "estimate" and isinstance(v, str) and v.startswith("f-badness:"):
            continue                             # f-badness:F, F checked by datasets.estimates
        if v not in known:
            raise ConfigError(f"{flag(name)}: unknown {name} {v!r}{did_you_mean(v, known)}; known: {', '.join(known)}")
    for name in _LATE:
        schema[name].check(getattr(cfg, name), flag(name))
    _check_applicable(cfg, flag)
    options = cfg.options or {}
    fl = options.get("failures")
    # --failures on sets failures.enabled; a config file or a sweep says options.failures.enabled = true
    # (twin.run refuses failure options without it, as here)
    failures_on = isinstance(fl, dict) and bool(fl.get("enabled", False))
    check_set_options(options, cfg.scheduler, failures=failures_on, power=bool(cfg.power),
                      network=bool(cfg.network), source="--set" if source == "command line" else source,
                      allocation=cfg.allocation, cfg=cfg)


def _entry_without_code(name: Any):
    """The scheduler entry, as far as it is known without importing code a name points to (a
    ``module:Class`` plug-in takes neither order nor backfill: a generic plug-in entry)."""
    from hpctwin.schedulers.registry import SCHEDULERS, SchedulerEntry, entry_for_object  # noqa: PLC0415
    if not isinstance(name, str):
        return entry_for_object(name)
    return SCHEDULERS.get(name, resolve=False) or SchedulerEntry(name)


def _check_applicable(cfg, flag) -> None:
    """Flags that the chosen scheduler or allocation would silently ignore are errors, and what the
    scheduler's entry needs (GPU allocation) is there."""
    from hpctwin.schedulers.registry import SCHEDULERS  # noqa: PLC0415
    entry = _entry_without_code(cfg.scheduler)
    name = _shown(cfg.scheduler)
    for attr in ("order", "backfill"):
        if getattr(cfg, attr) is not None and attr not in entry.takes:
            reason = entry.why_not or f"scheduler {name!r} builds its own queue order and backfilling"
            raise ConfigError(f"{flag(attr)}: does not apply to --scheduler {name}: {reason}")
    need = entry.needs.allocation
    if need is not None and cfg.allocation != need:
        raise ConfigError(f"{flag('scheduler')}: {name} needs --allocation {need} (units must be GPUs)")
    sched_opts = (cfg.options or {}).get("scheduler", {})
    sched_opts = sched_opts if isinstance(sched_opts, dict) else {}
    if "slurm_conf" in sched_opts and not str(sched_opts["slurm_conf"]).strip():
        raise ConfigError(f"{flag('slurm_conf')}: empty path")
    if "slurm_conf" in sched_opts and "slurm_conf" not in entry.takes:
        takers = ", ".join(e.name for e in SCHEDULERS if "slurm_conf" in getattr(e, "takes", ()))
        raise ConfigError(f"{flag('slurm_conf')}: a slurm.conf applies to --scheduler {takers} only, not {name!r}")
    if cfg.gpus_per_node is not None and cfg.allocation != "gpu":
        raise ConfigError(f"{flag('gpus_per_node')}: applies to --allocation gpu only (the default allocation "
                          "unit is a node)")
    if cfg.allocation == "gpu" and cfg.nodes is not None and cfg.gpus_per_node is not None \
            and cfg.nodes * cfg.gpus_per_node > MAX_UNITS:
        raise ConfigError(f"{flag('nodes')}: {cfg.nodes:,} nodes x {cfg.gpus_per_node} GPUs is more than "
                          f"{MAX_UNITS:,} units")
    if cfg.power_cap is not None and not cfg.power:
        raise ConfigError(f"{flag('power_cap')}: needs --power on (the cap is checked against the power model)")


def check_sample_grid(span_s: float, sample_dt: float, source: str = "--sample-dt") -> None:
    """Refuse a sampling step that would allocate more than `MAX_SAMPLES` points over ``span_s``."""
    if not (math.isfinite(sample_dt) and sample_dt > 0):
        raise ConfigError(f"{source}: {sample_dt!r} must be a finite number > 0 (s)")
    if math.isfinite(span_s) and span_s / sample_dt > MAX_SAMPLES:
        raise ConfigError(f"{source}: {sample_dt:g} s over the workload's {span_s:,.0f} s span is "
                          f"{span_s / sample_dt:.3g} samples, more than {MAX_SAMPLES:,}; use a step of at least "
                          f"{span_s / MAX_SAMPLES:.3g} s")


def _empty_error(workload, why: str) -> ConfigError:
    return ConfigError(f"{workload.source or workload.name}: workload {workload.name!r}: {why}; nothing to "
                       "simulate (--allow-empty runs it anyway)")


def check_loaded(cfg, workload) -> None:
    """Right after loading: a workload without a single job (none in the file, or every record
    dropped by the reader) is an error unless ``cfg.allow_empty`` (before the machine size is
    looked for)."""
    if len(workload) == 0 and not getattr(cfg, "allow_empty", False):
        n = sum(workload.dropped.values())
        if not n:
            raise _empty_error(workload, "no job records (an empty or header-only file)")
        raise _empty_error(workload, f"all {n} records were dropped or skipped ("
                           + ", ".join(f"{k}: {v}" for k, v in workload.dropped.items()) + ")")


def check_prepared(cfg, workload, prep) -> None:
    """Checks once the workload is loaded and filtered, before the engine allocates anything:
    a workload with nothing to simulate (unless ``cfg.allow_empty``), the sample grid's size,
    and a scheduler that needs jobs the workload does not have (``llm`` without LLM training jobs).
    """
    wl = prep.workload
    if len(wl) == 0 and not getattr(cfg, "allow_empty", False):
        records = len(workload) + sum(workload.dropped.values())
        if records == 0:
            why = "no job records (an empty or header-only file)"
        else:
            parts = {**workload.dropped, **prep.skipped}
            why = (f"all {records} records were dropped or skipped ("
                   + ", ".join(f"{k}: {v}" for k, v in parts.items()) + ")")
        raise _empty_error(workload, why)
    if len(wl) and cfg.sample_dt is not None:   # the default step keeps a series short (`results.series_step`)
        end = float((wl.submit + wl.runtime).max())
        check_sample_grid(end - float(wl.submit.min()), float(cfg.sample_dt))
    needs_jobs = _entry_without_code(cfg.scheduler).needs.jobs
    why = needs_jobs(wl) if needs_jobs is not None else None
    if why:
        raise ConfigError(f"--scheduler {_shown(cfg.scheduler)}: workload {wl.name!r} {why}")


def nest_set_options(pairs: list[tuple[str, Any]], source: str = "--set") -> dict:
    """``[("scheduler.bf_interval", 30), ...]`` -> ``{"scheduler": {"bf_interval": 30}}``.

    A key given twice, an empty key part, or a value and a table under one name are errors."""
    out: dict = {}
    for key, value in pairs:
        parts = key.split(".")
        if not key or any(not p.strip() for p in parts):
            raise ConfigError(f"{source}: {key!r}: empty key part (give SECTION.KEY=VALUE)")
        d = out
        for depth, part in enumerate(parts[:-1]):
            nxt = d.setdefault(part, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"{source}: {key}: {'.'.join(parts[:depth + 1])} is given a value and keys")
            d = nxt
        if parts[-1] in d:
            what = "a table" if isinstance(d[parts[-1]], dict) else "twice"
            raise ConfigError(f"{source}: {key}: given {what}" if what == "twice"
                              else f"{source}: {key}: {key} is given a value and keys")
        d[parts[-1]] = value
    return out


def run_field_schema() -> dict[str, Key]:
    """The schema of every `twin.config.RunConfig` field (config files and sweeps set them by name), from
    the fields' declarations."""
    from .config import meta, run_fields  # noqa: PLC0415
    return {name: meta(f)["key"] for name, f in run_fields().items()}
