"""One validation layer for every configuration source: CLI flags, ``--set``, system TOML, sweep TOML.

Every error is a `ConfigError` (a ValueError) whose text reads ``file:line: key: message (did you
mean ...?)``: ``file`` is the TOML file (or ``--set`` / the flag for the command line), ``line``
the line of the key when the source has lines. No option is silently ignored: a key no part of
the run reads is an error, and so is an option that does not apply to the chosen scheduler or model.

The building blocks are small: `did_you_mean` (difflib), `Key` (type, range, choices of one
value), `check_table` (known keys and values of one table), `toml_line` (the line of a key in a
TOML text). The run-level checks are `validate_run_config` (before a run loads anything) and
`check_sample_grid` (once the workload's time span is known, before any series is allocated).
Known ``--set`` keys are derived from the code that reads them: scheduler constructors' signatures
(through `hpctwin.schedulers.registry`), `twin.failures.KNOWN_KEYS`, `power.model.PowerModel`'s
keyword arguments; the other sections are listed in `SECTIONS`.
"""
from __future__ import annotations

import difflib
import inspect
import math
import re
from dataclasses import dataclass, fields
from typing import Any, Iterable

import numpy as np

from .workload import MAX_UNITS

#: most samples a time series may hold (float32/int32 arrays: 400 MB each at this bound)
MAX_SAMPLES = 100_000_000
#: largest seed (seeds feed numpy's SeedSequence, which takes non-negative integers)
MAX_SEED = 2 ** 63 - 1


class ConfigError(ValueError):
    """A configuration value, key or table that cannot be used; the text names where and which."""


def did_you_mean(name: object, choices: Iterable[str], n: int = 3) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices`` (case-insensitive), else ``""``."""
    choices = [str(c) for c in choices]
    low = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(str(name).lower(), list(low), n=n, cutoff=0.6)
    if not hits:
        return ""
    return " (did you mean " + " or ".join(repr(low[h]) for h in hits) + "?)"


def _num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) >= 1000 else f"{x:g}"


def where(source: str, line: int | None = None) -> str:
    """``file:line`` (or ``file`` when the line is unknown)."""
    return f"{source}:{line}" if line else source


@dataclass(frozen=True)
class Key:
    """The schema of one value: its type, an inclusive range, or a set of choices.

    ``kind`` is ``int``, ``float`` (an int is accepted), ``bool``, ``str`` or ``"any"``;
    ``nullable`` accepts None (TOML has no null, so only Python callers pass it).
    """

    kind: Any
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple | None = None
    nullable: bool = False
    exclusive_min: bool = False

    def check(self, value: Any, label: str) -> Any:
        """``value`` (an int widened to float for float keys), or ConfigError naming ``label``."""
        if value is None and self.nullable:
            return None
        k = self.kind
        if k == "any":
            return value
        if k is bool:
            if not isinstance(value, bool):
                raise ConfigError(f"{label}: expected true or false, got {value!r}")
            return value
        if k is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{label}: expected an integer, got {value!r}")
        elif k is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{label}: expected a number, got {value!r}")
            if not math.isfinite(value):
                raise ConfigError(f"{label}: expected a finite number, got {value!r}")
            value = float(value)
        elif k is str:
            if not isinstance(value, str):
                raise ConfigError(f"{label}: expected a string, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise ConfigError(f"{label}: {value!r} is not one of {', '.join(map(str, self.choices))}"
                              f"{did_you_mean(value, map(str, self.choices))}")
        if self.minimum is not None and (value < self.minimum or (self.exclusive_min and value == self.minimum)):
            raise ConfigError(f"{label}: {value!r} must be {'>' if self.exclusive_min else '>='} {_num(self.minimum)}")
        if self.maximum is not None and value > self.maximum:
            raise ConfigError(f"{label}: {value!r} must be <= {_num(self.maximum)}")
        return value


def toml_line(text: str | None, table: str, key: str | None = None) -> int | None:
    """1-based line of ``[table]`` (``key`` None) or of ``key = ...`` inside it, in a TOML text.

    ``table`` "" is the top level; dotted tables (``[a.b]``) are matched by their full name.
    A best-effort scan (no TOML re-parse): None when not found.
    """
    if not text:
        return None
    current = ""
    for i, raw in enumerate(text.split("\n"), start=1):
        s = raw.strip()
        m = re.match(r"^\[\[?\s*([^\]]+?)\s*\]\]?", s)
        if m:
            current = m.group(1).replace('"', "").replace("'", "").replace(" ", "")
            if key is None and current == table:
                return i
            continue
        if key is not None and current == table:
            km = re.match(r"""^["']?([A-Za-z0-9_.\-]+)["']?\s*=""", s)
            if km and km.group(1) == key:
                return i
    return None


def check_table(table: dict, schema: dict[str, Key], source: str, *, section: str = "",
                text: str | None = None, context: str = "") -> dict:
    """Check a table's keys against ``schema``: unknown keys (with suggestions) and each value.

    Returns a new dict with checked (widened) values. ``section`` prefixes key names in the
    messages (``power.sample_dt``); ``text`` (the file's TOML text) gives line numbers;
    ``context`` is appended to the unknown-key message (e.g. "of scheduler llm").
    """
    if not isinstance(table, dict):
        raise ConfigError(f"{where(source, toml_line(text, section))}: {section or 'table'}: expected a table, "
                          f"got {table!r}")
    out = {}
    for k, v in table.items():
        label = f"{section}.{k}" if section else str(k)
        line = toml_line(text, section, k)
        if k not in schema:
            known = ", ".join(sorted(schema)) or "(none)"
            raise ConfigError(f"{where(source, line)}: {label}: unknown key{(' ' + context) if context else ''}"
                              f"{did_you_mean(k, schema)}; known: {known}")
        out[k] = schema[k].check(v, f"{where(source, line)}: {label}")
    return out


# ------------------------------------------------------------------------------ --set sections
def _signature_keys(obj, exclude: Iterable[str] = ()) -> dict[str, Key] | None:
    """Keyword parameters of a constructor (walking the MRO through ``**kw`` pass-throughs) as a
    schema typed by their defaults; None when it takes any keyword."""
    classes = list(obj.__mro__) if inspect.isclass(obj) else [obj]
    keys: dict[str, Key] = {}
    for c in classes:
        fn = c.__init__ if inspect.isclass(c) else c
        if inspect.isclass(c) and "__init__" not in vars(c):
            continue
        if fn is object.__init__:
            break
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            return None
        var_kw = False
        for name, prm in params.items():
            if name == "self" or prm.kind in (prm.VAR_POSITIONAL,):
                continue
            if prm.kind == prm.VAR_KEYWORD:
                var_kw = True
                continue
            if name in exclude or name in keys:
                continue
            d = prm.default
            if isinstance(d, bool):
                keys[name] = Key(bool)
            elif isinstance(d, float):
                keys[name] = Key(float)
            elif isinstance(d, str):
                keys[name] = Key("any")          # several take a str or a number ("daly" or 3600)
            else:
                keys[name] = Key("any")
        if not var_kw:
            return keys
    return None if not keys else keys


def scheduler_keys(name: str) -> dict[str, Key] | None:
    """Known ``--set scheduler.KEY`` options of scheduler ``name`` (None: any key; the Slurm-like
    policy validates its slurm.conf keys itself)."""
    from hpctwin.schedulers import registry  # noqa: PLC0415
    if name in registry.BUILTIN:
        return {}
    if name in registry._predictive():
        return _signature_keys(registry._predictive()[name])
    if name == "slurm":
        return None
    if name == "llm":
        from hpctwin.schedulers.llm import LLMScheduler  # noqa: PLC0415
        return _signature_keys(LLMScheduler, ("inner", "order", "backfill", "node_group", "placer"))
    if name == "gpu-pack":
        from hpctwin.schedulers.gpu_packing import GPUPackingScheduler  # noqa: PLC0415
        return _signature_keys(GPUPackingScheduler, ("order", "backfill", "node_group"))
    if name == "price-aware":
        from hpctwin.schedulers.price_aware import PriceAwareScheduler  # noqa: PLC0415
        return _signature_keys(PriceAwareScheduler, ("backfill",))
    if name.startswith("exec:"):                 # never resolved as module:Class (a module named exec)
        from hpctwin.schedulers.external import ExternalScheduler  # noqa: PLC0415
        return _signature_keys(ExternalScheduler, ("command", "name"))
    if ":" in name:
        try:
            return _signature_keys(registry._load_class(name))
        except registry.UnknownSchedulerError:
            return None                          # make_scheduler reports the import error itself
    return None


def _failure_keys() -> dict[str, Key]:
    from .failures import KNOWN_KEYS  # noqa: PLC0415
    return {k: Key("any") for k in KNOWN_KEYS}


def _power_keys() -> dict[str, Key]:
    from hpctwin.power.model import PowerModel  # noqa: PLC0415
    keys = _signature_keys(PowerModel.__init__, ("system",)) or {}
    keys["cooling_overhead"] = Key(float, 0.0, 10.0)   # read by the --power-cap wrapper (twin.run)
    return keys


def _serving_keys() -> dict[str, Key]:
    """The ``serving`` table (`twin.serving.batch.ServingBatchConfig`: a serving deployment on the cluster).

    Types and the bounds of one value (`twin.serving.limits`); what needs the trace or another key (a
    fraction's percentage hint, the controller ticks over the trace span, the cold start against a day and
    the lease) is checked by `ServingBatchConfig.check` and `check_work`."""
    from .serving import limits as L  # noqa: PLC0415
    pos, cnt = dict(minimum=0.0, exclusive_min=True), dict(minimum=0)
    inst = dict(minimum=1, maximum=L.MAX_INSTANCES)
    clock = dict(maximum=L.MAX_CLOCK_S)
    gbps = dict(maximum=L.MAX_GBPS)
    return {"trace": Key(str), "hardware": Key(str), "model": Key(str), "tp": Key(int, minimum=1, maximum=L.MAX_TP),
            "gpus_per_node": Key(int, **cnt, maximum=4096),
            "policy": Key(str, choices=("fixed", "utilization", "decode_tps")),
            "instances": Key(int, **inst), "min_instances": Key(int, **inst),
            "max_instances": Key(int, **inst), "interval_s": Key(float, **pos, **clock), "target": Key(float, **pos),
            "metric": Key(str, choices=("busy", "kv")), "tps_per_instance": Key(float, minimum=0.0),
            "window_s": Key(float, minimum=0.0, **clock), "lease_s": Key(float, **pos, **clock),
            "renew_s": Key(float, minimum=0.0, **clock), "slots": Key(int, **cnt, maximum=L.MAX_SLOTS),
            "router": Key(str), "start_s": Key(float, minimum=-L.MAX_CLOCK_S, **clock), "time_scale": Key(float, **pos),
            "max_requests": Key(int, **cnt), "ttft_slo_s": Key(float, **pos, **clock),
            "tpot_slo_s": Key(float, **pos, **clock),
            "load_GBps": Key(float, **pos, **gbps), "startup_s": Key(float, minimum=0.0),
            "max_num_seqs": Key(int, minimum=1, maximum=L.MAX_NUM_SEQS),
            "max_num_batched_tokens": Key(int, minimum=1, maximum=L.MAX_BATCHED_TOKENS),
            "user": Key(int, minimum=-1, maximum=2 ** 62), "warm_start": Key(bool),
            # disaggregated prefill/decode pools (serving.mode = "pd", twin.serving.batch_pd)
            "mode": Key(str, choices=("colocated", "pd")), "prefill_hardware": Key(str),
            "decode_hardware": Key(str), "prefill_tp": Key(int, **cnt, maximum=L.MAX_TP),
            "decode_tp": Key(int, **cnt, maximum=L.MAX_TP),
            "prefill_instances": Key(int, **inst), "decode_instances": Key(int, **inst),
            "prefill_min_instances": Key(int, **inst), "prefill_max_instances": Key(int, **inst),
            "decode_min_instances": Key(int, **inst), "decode_max_instances": Key(int, **inst),
            "pd_ratio": Key(float, minimum=0.0, maximum=L.MAX_INSTANCES), "kv_link_GBps": Key(float, **pos, **gbps),
            "kv_latency_s": Key(float, minimum=0.0, maximum=1.0), "kv_network": Key(str, choices=("auto", "on", "off")),
            "kv_routing": Key(str), "kv_d2d_GBps": Key(float, minimum=0.0, **gbps)}


#: ``--set`` sections with fixed keys (the others derive theirs from the code, see `set_schema`)
SECTIONS: dict[str, dict[str, Key]] = {
    "network": {"routing": Key(str, choices=("minimal", "valiant"))},
    "llm": {"iteration": Key(bool), "gpu": Key(str)},
    "gpu": {"policy": Key(str), "on_unpackable": Key(str)},
    "serving": _serving_keys(),
    "workload": {"duplicate_ids": Key(str, choices=("error", "renumber")), "header_check": Key(bool),
                 "unit": Key(str, choices=("nodes", "cpus")), "strict": Key(bool)},
}
SECTION_NAMES = ("scheduler", "failures", "power", *SECTIONS)


def set_schema(section: str, scheduler: str) -> dict[str, Key] | None:
    if section == "scheduler":
        keys = scheduler_keys(scheduler)
        if keys is not None:
            keys = dict(keys, slurm_conf=Key(str)) if scheduler == "slurm" else keys
        return keys
    if section == "failures":
        return _failure_keys()
    if section == "power":
        return _power_keys()
    return SECTIONS.get(section)


def check_set_options(options: dict, scheduler: str, *, failures: bool, power: bool, network: bool,
                      source: str = "--set", allocation: str = "node") -> None:
    """Check the run's ``options`` tables (from ``--set`` or a config file's ``[options]``)."""
    for section, table in options.items():
        if section not in SECTION_NAMES:
            raise ConfigError(f"{source}: {section}: unknown section{did_you_mean(section, SECTION_NAMES)}; "
                              f"known: {', '.join(SECTION_NAMES)} (give SECTION.KEY=VALUE)")
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: {section}={table!r}: {section} is a section, not a value; give "
                              f"{section}.KEY=VALUE")
        if section == "failures" and not failures and any(k != "enabled" for k in table):
            how = "--failures on" if source == "--set" else "options.failures.enabled = true"
            raise ConfigError(f"{source}: failures.{next(k for k in table if k != 'enabled')}: failure options "
                              f"need {how} (they would otherwise be ignored)")
        if section == "power" and not power and table:
            raise ConfigError(f"{source}: power.{next(iter(table))}: power options need --power on")
        if section == "network" and not network and table:
            raise ConfigError(f"{source}: network.{next(iter(table))}: network options need --network on")
        if section == "gpu" and allocation != "gpu" and table:
            raise ConfigError(f"{source}: gpu.{next(iter(table))}: GPU packing options need --allocation gpu")
        schema = set_schema(section, scheduler)
        if schema is None:
            continue
        if section == "scheduler" and not schema and table:
            k = next(iter(table))
            raise ConfigError(f"{source}: scheduler.{k}: scheduler {scheduler!r} takes no options "
                              "(order and backfill are --order and --backfill)")
        if section == "failures":
            table = {k: v for k, v in table.items() if k != "enabled"}
        check_table(table, schema, source, section=section,
                    context=f"of scheduler {scheduler!r}" if section == "scheduler" else "")


# ------------------------------------------------------------------------------ the run config
def _known_names(what: str) -> list[str]:
    if what == "placement":
        from hpctwin.topology.placement import PLACERS  # noqa: PLC0415
        return [*PLACERS, "llm"]
    if what == "scheduler":
        from hpctwin.schedulers.registry import known_schedulers  # noqa: PLC0415
        return known_schedulers()
    if what == "estimate":
        from hpctwin.datasets.estimates import MODELS  # noqa: PLC0415
        return ["requested", "exact", *MODELS]
    raise KeyError(what)  # pragma: no cover


def validate_run_config(cfg, source: str = "command line") -> None:
    """Check a `twin.run.RunConfig` before anything is loaded: names (with suggestions), sizes
    (machine at most `twin.workload.MAX_UNITS` units), numbers (finite, in range) and options
    that apply to the chosen scheduler and models. Raises `ConfigError`."""
    def flag(name: str) -> str:
        return f"{source}: --{name.replace('_', '-')}" if source == "command line" else f"{source}: {name}"

    schema = run_field_schema()
    for f in fields(cfg):                    # types first: a config file can hold anything
        if f.name in schema and f.name not in ("sample_dt", "nodes", "seed", "power_cap", "gpus_per_node"):
            schema[f.name].check(getattr(cfg, f.name), flag(f.name))
    if not isinstance(cfg.workload, str) or not cfg.workload.strip():
        raise ConfigError(f"{flag('workload')}: empty workload (a file, a registry name, or synthetic)")
    if not isinstance(cfg.scheduler, str) or not cfg.scheduler.strip():
        raise ConfigError(f"{flag('scheduler')}: empty scheduler name")
    for name in ("system", "data_dir"):     # an empty value must not mean "the default"
        v = getattr(cfg, name)
        if v is not None and not str(v).strip():
            raise ConfigError(f"{flag(name)}: empty {name.replace('_', ' ')}")
    if ":" not in cfg.scheduler:
        known = _known_names("scheduler")
        if cfg.scheduler not in known:
            raise ConfigError(f"{flag('scheduler')}: unknown scheduler {cfg.scheduler!r}"
                              f"{did_you_mean(cfg.scheduler, known)}; known: {', '.join(known)}, or module:Class")
    for name in ("placement", "estimate"):
        v = getattr(cfg, name)
        known = _known_names(name)
        if name == "estimate" and isinstance(v, str) and v.startswith("f-badness:"):
            continue                             # f-badness:F, F checked by datasets.estimates
        if v not in known:
            raise ConfigError(f"{flag(name)}: unknown {name} {v!r}{did_you_mean(v, known)}; known: {', '.join(known)}")
    Key(int, 1, MAX_UNITS, nullable=True).check(cfg.nodes, flag("nodes"))
    Key(int, 1, 4096, nullable=True).check(cfg.gpus_per_node, flag("gpus_per_node"))
    Key(int, 0, MAX_SEED).check(cfg.seed, flag("seed"))
    Key(float, 0.0, exclusive_min=True).check(cfg.sample_dt, flag("sample_dt"))
    Key(float, 0.0, exclusive_min=True, nullable=True).check(cfg.power_cap, flag("power_cap"))
    Key(bool).check(cfg.kill_at_walltime, flag("kill_at_walltime"))
    for name in ("network", "power"):
        Key(bool).check(getattr(cfg, name), flag(name))
    _check_applicable(cfg, flag)
    options = cfg.options or {}
    sched_opts = options.get("scheduler", {}) if isinstance(options.get("scheduler", {}), dict) else {}
    if "slurm_conf" in sched_opts and not str(sched_opts["slurm_conf"]).strip():
        raise ConfigError(f"{flag('slurm_conf')}: empty path")
    if "slurm_conf" in sched_opts and cfg.scheduler != "slurm":
        raise ConfigError(f"{flag('slurm_conf')}: a slurm.conf applies to --scheduler slurm only, not "
                          f"{cfg.scheduler!r}")
    fl = options.get("failures")
    # --failures on sets failures.enabled; a config file or a sweep says options.failures.enabled = true
    # (twin.run refuses failure options without it, as here)
    failures_on = isinstance(fl, dict) and bool(fl.get("enabled", False))
    check_set_options(options, cfg.scheduler, failures=failures_on, power=bool(cfg.power),
                      network=bool(cfg.network), source="--set" if source == "command line" else source,
                      allocation=cfg.allocation)


def _check_applicable(cfg, flag) -> None:
    """Flags that the chosen scheduler or allocation would silently ignore are errors."""
    from hpctwin.schedulers import registry  # noqa: PLC0415
    name = cfg.scheduler
    takes_order = name in registry.BUILTIN or name in ("llm", "gpu-pack")
    takes_backfill = takes_order or name == "price-aware"
    why = {"slurm": "the Slurm-like policy orders by multifactor priority and backfills as its slurm.conf says "
                    "(give them in --slurm-conf or --set scheduler.KEY)",
           "price-aware": "the price-aware policy orders the queue by its own rule"}
    for attr, ok in (("order", takes_order), ("backfill", takes_backfill)):
        if getattr(cfg, attr) is not None and not ok:
            reason = why.get(name, f"scheduler {name!r} builds its own queue order and backfilling")
            raise ConfigError(f"{flag(attr)}: does not apply to --scheduler {name}: {reason}")
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
    if len(wl):
        end = float((wl.submit + wl.runtime).max())
        check_sample_grid(end - float(wl.submit.min()), float(cfg.sample_dt))
    if cfg.scheduler == "llm":
        cols = wl.columns
        training = False
        if "job_class" in cols:
            training = bool(np.isin(np.asarray(cols["job_class"], dtype=object), ("llm_pretrain", "llm_finetune")).any())
        if "max_groups" in cols:
            training = training or bool((np.asarray(cols["max_groups"]) >= 0).any())
        if not training:
            raise ConfigError(f"--scheduler llm: workload {wl.name!r} has no LLM training jobs (job_class "
                              "llm_pretrain/llm_finetune or a max_groups column), so the llm policy would only "
                              "act as its inner EASY policy; use --scheduler easy, or an LLM workload such as "
                              "--workload llm-synthetic or acme:trace_seren.csv")


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
    """The schema of every `twin.run.RunConfig` field (config files and sweeps set them by name)."""
    return {
        "workload": Key(str), "scheduler": Key(str), "order": Key(str, nullable=True),
        "backfill": Key(str, choices=("none", "easy", "conservative"), nullable=True),
        "system": Key(str, nullable=True), "nodes": Key(int, 1, MAX_UNITS, nullable=True),
        "seed": Key(int, 0, MAX_SEED), "placement": Key(str), "network": Key(bool), "power": Key(bool),
        "sample_dt": Key(float, 0.0, exclusive_min=True), "out": Key(str, nullable=True), "quiet": Key(bool),
        "kill_at_walltime": Key(bool), "data_dir": Key(str, nullable=True), "estimate": Key(str),
        "size_field": Key(str, choices=("auto", "requested", "allocated")),
        "tau": Key(float, 0.0, exclusive_min=True), "power_cap": Key(float, 0.0, exclusive_min=True, nullable=True),
        "allocation": Key(str, choices=("node", "gpu")), "gpus_per_node": Key(int, 1, 4096, nullable=True),
        "options": Key("any"), "force": Key(bool), "allow_empty": Key(bool),
    }


def check_known_keys(found: dict[str, int | None], known: Iterable[str], source: str, *,
                     what: str = "key", case_insensitive: bool = False) -> None:
    """The generic part of a key=value file check (slurm.conf, accounts files...): ``found`` maps
    each key read to its line; the first unknown one is a `ConfigError` ``file:line: key: unknown
    <what> (did you mean ...?)``. ``case_insensitive`` for formats such as slurm.conf."""
    known = list(known)
    ref = {k.lower(): k for k in known} if case_insensitive else {k: k for k in known}
    for key, line in found.items():
        if (key.lower() if case_insensitive else key) not in ref:
            raise ConfigError(f"{where(source, line)}: {key}: unknown {what}{did_you_mean(key, known)}")
