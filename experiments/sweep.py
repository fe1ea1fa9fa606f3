"""Sweeps: many runs from one file, on one core, local processes or an MPI job, resumable.

Usage::

    hpctwin sweep SWEEP.toml [--out DIR] [--workers N] [--executor auto|serial|processes|mpi] [--allow-exec]
    mpiexec -n 64 python -m mpi4py.futures -m experiments.sweep SWEEP.toml     # or under srun

The sweep file (TOML)::

    [sweep]                       # all optional
    name = "kth-policies"
    out = "sweeps/kth"            # relative to the sweep file; default: <file stem>.out next to it
    metrics = ["mean_wait_s", "mean_bsld"]    # columns of the tables and plots
    [base]                        # a run configuration: any `twin.run.RunConfig` field but out/quiet;
                                  # config = "RUN/config.toml" starts from a run's own config (a
                                  # pasted [run] table of a config.toml works too)
    workload = "KTH-SP2"
    system = "frontier"
    power = true
    [base.options.power]          # free-form run options (--set), as nested tables
    cooling = false
    [grid]                        # every combination of these lists is one point
    workload = ["KTH-SP2", "SDSC-SP2"]
    scheduler = ["easy", "conservative"]
    power_cap_w = [1e30, 2.0e5]   # alias of options.power.facility_cap_w
    "options.scheduler.bf_interval" = [30, 60]
    pricing = ["node-hours", "tou"]   # names of [pricing.NAME] rules: priced after the run, no extra runs
    seed = [0, 1, 2]
    [[points]]                    # and/or an explicit list of overrides (crossed with [grid])
    scheduler = "easy"
    [pricing.tou]                 # pricing rules, see `power.accounting.make_rules`
    kind = "energy"
    price = { kind = "time-of-use", periods = [[0, 7, 0.08], [7, 23, 0.2], [23, 24, 0.08]] }

Semantics:

* Every point is one `twin.run.run(RunConfig(...))` writing one run folder
  ``<out>/points/<hash>``, where ``<hash>`` is the SHA-256 (first 16 hex digits) of the point's
  resolved configuration (canonical JSON of every RunConfig field but out/quiet), the SHA-256 and
  size of every input file it reads (workload log, system file, slurm.conf, serving trace...;
  `twin.inputs.input_files`) and the code identity (`twin.inputs.code_identity`: a hash of the package's code files
  and package data). A point whose folder exists is finished
  and never rerun: the folder is written under a staging name (by `twin.run.write_run`, itself
  atomic) and renamed only when complete, so a killed worker, a Ctrl-C or a lost node leaves no
  folder that looks finished. Rerunning the same command resumes: a point whose input file or code
  changed has a new hash and runs again, the others are reused; stale staging folders are removed
  at start.
* Code the file names (an ``exec:`` or ``module:Class`` scheduler, a system whose cooling model is
  an FMU) is refused, naming the file and line, unless the command line says ``--allow-exec``.
* The output folder is created with a marker file (``.hpctwin-sweep``); the working directory, a
  file, a symbolic link or a non-empty folder without the marker is refused. The result files are
  written under temporary names and renamed into place.
* Before any run starts, every point is checked (unknown keys, empty grid, unknown scheduler,
  estimate model, system, workload, pricing rules and price series, a history-based predictor on
  a log without user ids); all errors are listed at once.
* A failed point is reported with its error (progress line and ``failures.txt``) and does not
  stop the others; it is retried on the next invocation.
* Results are assembled from the folders on disk, in point order, after all points ran:
  ``results.csv`` (one row a point x pricing rule, fixed float format), so the same sweep file gives
  the same bytes with any executor and worker count (timing fields are left out). Then
  ``results_summary.csv``, ``results.md`` and ``results.tex`` (mean and 95 % CI over seeds, with the
  conventions in the caption), and one PNG bar plot per table metric.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import copy
from concurrent.futures.process import BrokenProcessPool
import hashlib
import itertools
import json
import os
import shutil
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from hpctwin.twin import __version__
from hpctwin.twin.inputs import code_identity, code_in_config, input_fingerprints, refusal
from hpctwin.twin.rerun import RUN_FACTS
from hpctwin.twin.run import RunConfig

from .tables import bar_plot, write_results_csv, write_tables

RUN_FIELDS = [f.name for f in fields(RunConfig) if f.name not in ("out", "quiet")]
TOP_KEYS = {"sweep", "base", "grid", "points", "pricing"}
SWEEP_KEYS = {"name", "out", "metrics"}
ALIASES = {"power_cap_w": "options.power.facility_cap_w"}
#: summary keys that depend on the machine the sweep ran on, not on the configuration
TIMING_KEYS = {"wall_seconds", "simulation_seconds", "jobs_per_second"}
#: marker file of a sweep output folder (written when hpctwin creates the folder)
SWEEP_MARKER = ".hpctwin-sweep"
#: what a sweep writes into its output folder (a folder holding only these is an older sweep's)
SWEEP_ENTRIES = ("points", "failures", "results.csv", "results_summary.csv", "results.md", "results.tex")
DEFAULT_METRICS = ["mean_wait_s", "mean_bsld", "utilisation", "energy_facility_kwh", "peak_facility_power_w",
                   "total_cost"]


class SweepError(ValueError):
    """A sweep file that cannot run; the message names the file and key."""


# ====================================================================== the sweep file
@dataclass
class Point:
    index: int
    overrides: dict            # axis -> value, in axis order (pricing excluded)
    config: dict               # resolved RunConfig fields (no out/quiet)
    hash: str
    inputs: dict = field(default_factory=dict)   # input name -> {path, sha256, bytes} (twin.inputs)

    @property
    def folder_name(self) -> str:
        return self.hash


@dataclass
class Sweep:
    path: Path
    name: str
    out: Path
    points: list[Point]
    axes: list[str]
    pricing_names: list[str]
    pricing_tables: dict
    metrics: list[str] | None
    base: dict = field(default_factory=dict)


def _set_dotted(d: dict, key: str, value: Any) -> None:
    parts = key.split(".")
    for p in parts[:-1]:
        nxt = d.setdefault(p, {})
        if not isinstance(nxt, dict):
            raise SweepError(f"option {key!r}: {p!r} is not a table")
        d = nxt
    d[parts[-1]] = value


def point_inputs(config: dict) -> dict:
    """``{name: {path, sha256, bytes}}`` of the files a point reads (`twin.inputs.input_fingerprints`;
    a missing file has sha256 None: preflight reports it)."""
    return input_fingerprints(config, missing_ok=True)


def config_hash(config: dict, inputs: dict | None = None) -> str:
    """SHA-256 (16 hex digits) of a resolved configuration, the digests and sizes of its input files
    (``inputs``, computed from ``config`` when None) and the code identity (`twin.inputs.code_identity`):
    a point whose input file or code changed gets a new hash, so a resumed sweep reruns it."""
    if inputs is None:
        inputs = point_inputs(config)
    digests = {k: [v.get("sha256"), v.get("bytes")] for k, v in inputs.items()}
    blob = json.dumps({"config": config, "inputs": digests, "code": code_identity()}, sort_keys=True,
                      default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _resolve_path(value: Any, base_dir: Path) -> Any:
    """Relative file paths in a sweep file are relative to the sweep file."""
    if not isinstance(value, str) or value.startswith(("synthetic", "sacct:")):
        if isinstance(value, str) and value.startswith("sacct:") and not os.path.isabs(value[6:]):
            return "sacct:" + str((base_dir / value[6:]).resolve())
        return value
    looks_like_file = os.sep in value or value.endswith((".swf", ".gz", ".toml", ".csv"))
    if looks_like_file and not os.path.isabs(value):
        return str((base_dir / value).resolve())
    return value


def _apply(cfg: dict, key: str, value: Any, where: str, base_dir: Path) -> None:
    """Set ``key`` (a RunConfig field, an alias or ``options.PATH``) in ``cfg``, type- and
    range-checked (`twin.options.run_field_schema`); ``where`` is ``file:line: [table]``."""
    from hpctwin.twin.options import ConfigError, did_you_mean, run_field_schema  # noqa: PLC0415
    key = ALIASES.get(key, key)
    if key.startswith("options."):
        _set_dotted(cfg.setdefault("options", {}), key[len("options."):], value)
    elif key in RUN_FIELDS:
        if key == "options":
            if not isinstance(value, dict):
                raise SweepError(f"{where} options: must be a table")
            cfg["options"] = _deep_merge(cfg.get("options", {}), value)
        else:
            try:
                value = run_field_schema()[key].check(value, f"{where} {key}")
            except ConfigError as e:
                raise SweepError(str(e)) from None
            cfg[key] = _resolve_path(value, base_dir) if key in ("workload", "system", "data_dir") else value
    else:
        raise SweepError(f"{where} {key}: unknown key{did_you_mean(key, RUN_FIELDS + list(ALIASES))}; known: "
                         f"{', '.join(RUN_FIELDS)}, {', '.join(ALIASES)}, options.<path>, pricing")


def _deep_merge(a: dict, b: dict) -> dict:
    out = copy.deepcopy(a)
    for k, v in b.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def load_sweep(path: str | Path, out: str | Path | None = None, *, allow_exec: bool = False) -> Sweep:
    """Parse and validate a sweep file (syntax and keys; see `preflight` for the deeper checks).

    Code the file names (an ``exec:``/``module:Class`` scheduler, a system with an FMU cooling model;
    `twin.inputs.code_in_config`) raises `SweepError` naming the file, line and value unless
    ``allow_exec`` (``--allow-exec``): nothing the file names is imported or started before that.
    """
    from hpctwin.twin.options import did_you_mean, toml_line, where  # noqa: PLC0415
    path = Path(path)
    if path.is_dir():
        raise SweepError(f"sweep file {path}: is a directory")
    if path.exists() and not path.is_file():
        raise SweepError(f"sweep file {path}: not a regular file")
    try:
        text = path.read_bytes().decode("utf-8-sig")
        doc = tomllib.loads(text)
    except FileNotFoundError:
        raise SweepError(f"sweep file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SweepError(f"sweep file {path}: cannot read: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise SweepError(f"{path}: not valid TOML: {e}") from None
    base_dir = path.parent.resolve()

    def at(table: str, key: str | None = None) -> str:
        return where(str(path), toml_line(text, table, key) or toml_line(text, table))

    bad = sorted(set(doc) - TOP_KEYS)
    if bad:
        raise SweepError(f"{at(bad[0]) if toml_line(text, bad[0]) else at('', bad[0])}: {bad[0]}: unknown "
                         f"top-level key{did_you_mean(bad[0], TOP_KEYS)}; known: {', '.join(sorted(TOP_KEYS))}")
    for table in ("sweep", "base", "grid", "pricing"):
        if table in doc and not isinstance(doc[table], dict):
            raise SweepError(f"{at('', table)}: {table}: expected a table, got {doc[table]!r}")
    meta = doc.get("sweep", {})
    for key, kind in (("name", str), ("out", str)):
        if key in meta and (not isinstance(meta[key], kind) or not meta[key].strip()):
            raise SweepError(f"{at('sweep', key)}: [sweep] {key}: expected a non-empty string, got {meta[key]!r}")
    bad = sorted(set(meta) - SWEEP_KEYS)
    if bad:
        raise SweepError(f"{at('sweep', bad[0])}: [sweep] {bad[0]}: unknown key{did_you_mean(bad[0], SWEEP_KEYS)}; "
                         f"known: {', '.join(sorted(SWEEP_KEYS))}")
    # ---- base
    base_cfg: dict = {"options": {}}
    base_doc = dict(doc.get("base", {}))
    origin: dict[str, tuple[str, str]] = {}   # RunConfig field -> (file:line, "[table] key") it was set at
    if "config" in base_doc:              # a run's config.toml as the base; [base] keys override it
        from hpctwin.twin.rerun import ConfigFileError, config_dict_from_toml  # noqa: PLC0415
        ref = base_doc.pop("config")
        if not isinstance(ref, str) or not ref:
            raise SweepError(f"{at('base', 'config')}: [base] config: must be the path of a run's config.toml")
        try:
            run_kwargs, _facts = config_dict_from_toml(base_dir / ref)
        except ConfigFileError as e:
            raise SweepError(f"{at('base', 'config')}: [base] config: {e}") from None
        ref_path = base_dir / ref
        ref_path = ref_path / "config.toml" if ref_path.is_dir() else ref_path
        ref_text = ref_path.read_text(encoding="utf-8", errors="replace")
        for k, v in run_kwargs.items():
            base_cfg[k] = v if k != "options" else _deep_merge(base_cfg.get("options", {}), v)
            origin[k] = (where(str(ref_path), toml_line(ref_text, "run", k)), f"[run] {k}")
    for k, v in base_doc.items():
        if k in ("out", "quiet"):
            raise SweepError(f"{at('base', k)}: [base] {k}: set by the sweep, not the file")
        if k in RUN_FACTS:                # a pasted [run] table of a config.toml: facts of that run
            continue
        _apply(base_cfg, k, v, f"{at('base', k)}: [base]", base_dir)
        origin[k] = (at("base", k), f"[base] {k}")
    # ---- grid
    grid = doc.get("grid")
    points_list = doc.get("points")
    if grid is None and points_list is None:
        raise SweepError(f"{path}: nothing to sweep: give a [grid] table and/or [[points]]")
    axes: list[str] = []
    grid_items: list[tuple[str, list]] = []
    if grid is not None:
        if not isinstance(grid, dict) or not grid:
            raise SweepError(f"{path}: [grid] is empty")
        for k, v in grid.items():
            if not isinstance(v, list):
                raise SweepError(f"{path}: [grid] {k} must be a list of values, got {v!r}")
            if not v:
                raise SweepError(f"{path}: [grid] {k} is an empty list: the grid has no points")
            grid_items.append((k, v))
    explicit: list[dict] = [{}]
    if points_list is not None:
        if not isinstance(points_list, list) or not points_list:
            raise SweepError(f"{path}: [[points]] is empty")
        if not all(isinstance(p, dict) for p in points_list):
            raise SweepError(f"{at('', 'points')}: points: every [[points]] entry must be a table")
        explicit = [dict(p) for p in points_list]
    # axes in order: explicit point keys, then grid keys
    for p in explicit:
        for k in p:
            if k not in axes:
                axes.append(k)
    for k, _ in grid_items:
        if k in axes:
            raise SweepError(f"{path}: key {k!r} is both in [grid] and in [[points]]")
        axes.append(k)
    # ---- pricing
    pricing_tables = doc.get("pricing", {})
    pricing_names: list[str] = []
    if "pricing" in axes:
        for k, v in grid_items:
            if k == "pricing":
                pricing_names = [str(x) for x in v]
        for p in explicit:
            if "pricing" in p:
                raise SweepError(f"{path}: 'pricing' belongs in [grid], not in [[points]]")
        unknown = [x for x in pricing_names if x not in pricing_tables]
        if unknown:
            raise SweepError(f"{path}: [grid] pricing names {unknown} have no [pricing.NAME] table "
                             f"(have {sorted(pricing_tables)})")
    run_axes = [a for a in axes if a != "pricing"]
    # ---- points
    points: list[Point] = []
    seen: dict[str, int] = {}
    run_grid = [(k, v) for k, v in grid_items if k != "pricing"]
    for i_e, ex in enumerate(explicit):
        for combo in itertools.product(*[v for _, v in run_grid]) if run_grid else [()]:
            ov = dict(ex)
            ov.update({k: c for (k, _), c in zip(run_grid, combo)})
            cfg = copy.deepcopy(base_cfg)
            for k, v in ov.items():
                _apply(cfg, k, v, (f"{at('points', k)}: [[points]] #{i_e + 1}" if k in ex
                                   else f"{at('grid', k)}: [grid]"), base_dir)
            full = asdict(RunConfig(**cfg))
            for k in ("out", "quiet"):
                full.pop(k)
            if not allow_exec:
                _refuse_code(full, ov, ex, i_e, origin, at, path, text)
            inputs = point_inputs(full)
            h = config_hash(full, inputs)
            if h in seen:
                continue                        # the same run reached twice: computed once
            seen[h] = len(points)
            points.append(Point(len(points), {a: ov.get(a) for a in run_axes}, full, h, inputs))
    metrics = meta.get("metrics")
    if metrics is not None and (not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics)):
        raise SweepError(f"{path}: [sweep] metrics must be a list of names")
    out_dir = Path(out) if out else (base_dir / meta["out"] if "out" in meta else base_dir / f"{path.stem}.out")
    return Sweep(path, str(meta.get("name", path.stem)), out_dir, points, run_axes, pricing_names,
                 pricing_tables, metrics, base_cfg)


def _points_line(text: str, index: int, key: str) -> int | None:
    """1-based line of ``key = ...`` in the ``index``-th (0-based) ``[[points]]`` entry of a TOML text."""
    import re  # noqa: PLC0415
    n, inside = -1, False
    for i, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if line.startswith("["):
            inside = line.replace(" ", "").startswith("[[points]]")
            n += 1 if inside else 0
            continue
        m = re.match(r"""^["']?([A-Za-z0-9_.\-]+)["']?\s*=""", line)
        if inside and n == index and m and m.group(1) == key:
            return i
    return None


def _refuse_code(config: dict, ov: dict, ex: dict, i_e: int, origin: dict, at, path: Path, text: str) -> None:
    """`SweepError` for the first code a point's configuration names (see `load_sweep`), located at
    the [grid] list, the [[points]] entry, the [base] key or the base config.toml line that set it."""
    from hpctwin.twin.options import where  # noqa: PLC0415
    for key, value, what in code_in_config(config):
        if key in ex:
            line = _points_line(text, i_e, key)
            raise SweepError(refusal(where(str(path), line), f"[[points]] #{i_e + 1} {key}", value, what))
        if key in ov:
            raise SweepError(refusal(at("grid", key), f"[grid] {key}", value, what, in_list=True))
        if key in origin:
            raise SweepError(refusal(origin[key][0], origin[key][1], value, what))


# ====================================================================== preflight
_NEEDS_USERS = ("easy-pred", "easy++", "easy-pred-gbm", "easy++-gbm")


def preflight(sw: Sweep) -> None:
    """Check every point before any run starts; raise `SweepError` listing all problems."""
    from hpctwin.datasets.estimates import EstimateError, parse_name  # noqa: PLC0415
    from hpctwin.schedulers.registry import make_scheduler  # noqa: PLC0415
    from hpctwin.twin.run import load_workload  # noqa: PLC0415
    from hpctwin.twin.system import load_system  # noqa: PLC0415

    from hpctwin.twin.options import validate_run_config  # noqa: PLC0415
    errors: list[str] = []
    checked: set = set()
    need_users: dict[str, str] = {}
    for p in sw.points:
        c = p.config
        where = f"point {p.index} ({_label(p)})"
        try:                    # names, numbers and options keys, as the command line checks them
            validate_run_config(RunConfig(**c), source=f"{sw.path}: {where}")
        except ValueError as e:
            errors.append(str(e))
        key = ("sched", c["scheduler"], c["order"], c["backfill"],
               json.dumps(c["options"].get("scheduler", {}), sort_keys=True, default=str))
        if key not in checked:
            checked.add(key)
            try:
                s = make_scheduler(c["scheduler"], c["order"], c["backfill"], dict(c["options"].get("scheduler", {})))
                if getattr(s, "predictor", None) in ("user-average", "gbm"):
                    need_users.setdefault(c["workload"], f"scheduler {c['scheduler']}")
            except Exception as e:  # noqa: BLE001 - every construction error is reported
                errors.append(f"{where}: scheduler: {e}")
        if c["estimate"] not in ("requested", "exact") and ("est", c["estimate"]) not in checked:
            checked.add(("est", c["estimate"]))
            try:
                parse_name(c["estimate"])
            except EstimateError as e:
                errors.append(f"{where}: {e}")
        if c["estimate"] == "user-average":
            need_users.setdefault(c["workload"], "estimate user-average")
        if c["system"] and ("sys", c["system"]) not in checked:
            checked.add(("sys", c["system"]))
            try:
                load_system(c["system"])
            except Exception as e:  # noqa: BLE001
                errors.append(f"{where}: system: {e}")
        if ("wl", c["workload"]) not in checked:
            checked.add(("wl", c["workload"]))
            errors += _check_workload(c, where)
        if c["sample_dt"] is not None and c["sample_dt"] <= 0:
            errors.append(f"{where}: sample_dt must be > 0 s, got {c['sample_dt']}")
    for wl_name, why in need_users.items():
        try:
            wl = load_workload(wl_name, data_dir=sw.base.get("data_dir"), seed=0)
            if len(wl) and np.all(wl.user < 0):
                errors.append(f"workload {wl_name!r}: {why} predicts from user history, but the log has no "
                              "user ids (every user is -1)")
        except Exception as e:  # noqa: BLE001
            errors.append(f"workload {wl_name!r}: {e}")
    if sw.pricing_tables:
        from hpctwin.power.accounting import PricingError, make_rules  # noqa: PLC0415
        try:
            rules = make_rules(sw.pricing_tables, f"{sw.path}: [pricing]")
            for name in sw.pricing_names:
                if rules[name].needs_energy and not all(p.config["power"] for p in sw.points):
                    errors.append(f"{sw.path}: pricing rule {name!r} needs job energies: set power = true "
                                  "(and a system with a [power] table) for every point")
        except PricingError as e:
            errors.append(str(e))
    if errors:
        raise SweepError(f"{sw.path}: {len(errors)} problem(s), nothing was run:\n  " + "\n  ".join(errors))


def _check_workload(c: dict, where: str) -> list[str]:
    spec = c["workload"]
    if spec == "synthetic" or spec.startswith("synthetic:"):
        try:
            from hpctwin.datasets.synthetic import parse_synthetic_spec  # noqa: PLC0415
            parse_synthetic_spec(spec)
        except Exception as e:  # noqa: BLE001
            return [f"{where}: workload: {e}"]
        return []
    if spec.startswith("sacct:"):
        return [] if Path(spec[6:]).exists() else [f"{where}: workload file {spec[6:]} does not exist"]
    p = Path(spec)
    if os.sep in spec or p.suffix in (".swf", ".gz"):
        return [] if p.exists() else [f"{where}: workload file {spec} does not exist"]
    try:
        from hpctwin.datasets.registry import resolve  # noqa: PLC0415
        if not resolve(spec, c.get("data_dir")).exists():
            return [f"{where}: workload {spec!r}: file not found in the data directory"]
    except Exception as e:  # noqa: BLE001
        return [f"{where}: workload: {e}"]
    return []


def _label(p: Point) -> str:
    return ", ".join(f"{k}={_cell(v)}" for k, v in p.overrides.items())


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, (list, dict)):
        return json.dumps(v, sort_keys=True)
    return v


# ====================================================================== running one point
def _inputs_moved(expected: dict, now: dict) -> str | None:
    """Why the inputs read now are not those the point's hash was computed from, or None."""
    for name, rec in expected.items():
        cur = now.get(name, {})
        if cur.get("sha256") != rec.get("sha256"):
            return (f"input {name} ({rec.get('path')}) changed after the sweep computed its points (sha256 "
                    f"{str(rec.get('sha256'))[:12]}, now {str(cur.get('sha256'))[:12]}); run the sweep again")
    return None


def run_point(config: dict, folder: str, inputs: dict | None = None) -> dict:
    """Run one point and publish its folder atomically. Returns a status dict (never raises).

    ``inputs`` are the fingerprints the point's hash was computed from: when a file differs at run
    time, the point fails (its folder would otherwise hold results of other inputs than its hash says).
    """
    t = time.perf_counter()
    final = Path(folder)
    staging = final.with_name(f".staging-{final.name}-{os.getpid()}")
    try:
        if is_finished(final):
            return {"ok": True, "folder": str(final), "wall": 0.0, "skipped": True}
        if final.exists():                  # not published by us (e.g. a copy cut short): redo it
            shutil.rmtree(final)
        from hpctwin.twin.run import run  # noqa: PLC0415
        if staging.exists():
            shutil.rmtree(staging)
        if inputs is not None:
            moved = _inputs_moved(inputs, point_inputs(config))
            if moved:
                return {"ok": False, "folder": str(final), "error": moved, "wall": time.perf_counter() - t}
        cfg = RunConfig(**copy.deepcopy(config), out=str(staging), quiet=True)
        run(cfg)
        point = {"hash": final.name, "config": config, "code_version": __version__,
                 "code_identity": code_identity(), "inputs": inputs if inputs is not None else point_inputs(config)}
        (staging / "point.json").write_text(json.dumps(point, indent=1, sort_keys=True, default=str) + "\n")
        try:
            os.replace(staging, final)
        except OSError:
            if final.exists():              # another worker published the same point first
                shutil.rmtree(staging, ignore_errors=True)
            else:
                raise
        return {"ok": True, "folder": str(final), "wall": time.perf_counter() - t}
    except BaseException as e:  # noqa: BLE001 - reported, never fatal to the sweep
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(e, KeyboardInterrupt):
            raise
        return {"ok": False, "folder": str(final), "error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc(), "wall": time.perf_counter() - t}


def _run_point_args(args: tuple) -> dict:
    return run_point(*args)


def is_finished(folder: Path) -> bool:
    """A point folder is finished when it exists under its final name (published atomically)."""
    return (folder / "summary.json").exists() and (folder / "point.json").exists()


def clean_stale(points_dir: Path) -> int:
    """Remove staging/partial folders left by killed runs. Returns how many."""
    n = 0
    if points_dir.exists():
        for d in points_dir.iterdir():
            if d.name.startswith((".staging-", ".")) and d.is_dir():
                shutil.rmtree(d, ignore_errors=True)
                n += 1
    return n


# ====================================================================== the output folder
def _legacy_sweep_folder(out: Path) -> bool:
    """A folder written by a sweep before the marker existed: a ``points`` folder and only sweep outputs."""
    names = [q.name for q in out.iterdir()]
    return "points" in names and all(n in SWEEP_ENTRIES or (n.startswith("plot_") and n.endswith(".png"))
                                     or (n.startswith(".results") and n.endswith(".tmp")) for n in names)


def check_sweep_out(out: str | Path) -> Path:
    """Refuse a sweep output folder hpctwin must not write into; returns its absolute path, touches nothing.

    As `twin.runfolder.check_out` refuses a run's ``--out``: the working directory or one of its
    parents, a file, a symbolic link, and a non-empty folder that is not a sweep folder (one holding
    the marker `SWEEP_MARKER`, or only what an older sweep wrote there).
    """
    from hpctwin.twin.runfolder import check_out  # noqa: PLC0415
    out = Path(os.path.abspath(out))
    if not (out.is_dir() and not out.is_symlink()) or not any(out.iterdir()):
        return check_out(out)              # missing or empty: the run folder rules (cwd, file, symlink)
    cwd = Path(os.path.abspath(os.getcwd()))
    if out == cwd or out in cwd.parents:
        raise SweepError(f"sweep output folder {out}: is the working directory or one of its parents; name a new "
                         "folder, e.g. --out sweeps/NAME")
    if not (out / SWEEP_MARKER).is_file() and not _legacy_sweep_folder(out):
        held = sorted(q.name for q in out.iterdir())[:5]
        raise SweepError(f"sweep output folder {out}: exists and is not an hpctwin sweep folder (it holds "
                         f"{', '.join(held)}{' ...' if len(held) == 5 else ''}; no {SWEEP_MARKER} marker); hpctwin "
                         "never writes into it: choose another --out")
    for sub in ("points", "failures"):
        q = out / sub
        if q.is_symlink() or (q.exists() and not q.is_dir()):
            raise SweepError(f"sweep output folder {out}: {sub} is not a folder hpctwin wrote (a file or a "
                             "symbolic link); choose another --out")
    return out


def prepare_sweep_out(out: Path) -> Path:
    """Check the output folder, create it with its marker, remove stale temporary result folders."""
    from hpctwin.twin.runfolder import pid_alive  # noqa: PLC0415 - as check_out above
    out = check_sweep_out(out)
    out.mkdir(parents=True, exist_ok=True)
    marker = out / SWEEP_MARKER
    if not marker.is_file():
        _write_atomic(marker, json.dumps({"hpctwin_sweep": 1}) + "\n")
    for d in out.glob(".results-tmp-*"):
        pid = d.name.rsplit("-", 1)[-1]
        if d.is_dir() and not d.is_symlink() and pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(d, ignore_errors=True)
    return out


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary sibling, then rename it to ``path`` (a kill leaves old or new)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# ====================================================================== executors
def _under_mpi() -> bool:
    if "mpi4py" not in sys.modules:
        return any(int(os.environ.get(k, "1") or 1) > 1 for k in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE"))
    from mpi4py import MPI  # noqa: PLC0415
    return MPI.Is_initialized() and MPI.COMM_WORLD.Get_size() > 1


def _ignore_sigint() -> None:
    """Worker initializer: a Ctrl-C goes to the whole process group; only the parent handles it
    (it stops the workers), so the terminal shows one line, not a traceback per worker."""
    import signal  # noqa: PLC0415
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop_workers(ex) -> None:
    """Cancel queued points and end the running workers at once (their staging folders are never
    published and are removed by the next invocation's `clean_stale`)."""
    procs = list(getattr(ex, "_processes", {}).values()) if isinstance(getattr(ex, "_processes", None), dict) else []
    for p in procs:
        try:
            p.terminate()
        except Exception:  # noqa: BLE001 - already gone
            pass
    try:
        ex.shutdown(wait=False, cancel_futures=True)
    except Exception:  # noqa: BLE001 - a broken pool
        pass


def make_executor(kind: str, workers: int):
    """(executor or None for serial, label)."""
    if kind == "auto":
        kind = "mpi" if _under_mpi() else ("processes" if workers > 1 else "serial")
    if kind == "serial":
        return None, "serial"
    if kind == "processes":
        import multiprocessing as mp  # noqa: PLC0415
        import threading  # noqa: PLC0415
        n = max(1, workers)
        # fork when it is safe (POSIX, no other thread in this process): the workers inherit the
        # imported engine and start at once; spawn otherwise (fresh interpreters)
        method = "fork" if ("fork" in mp.get_all_start_methods() and threading.active_count() == 1) else "spawn"
        return (cf.ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context(method), initializer=_ignore_sigint),
                f"{n} local processes ({method})")
    if kind == "mpi":
        from mpi4py.futures import MPIPoolExecutor  # noqa: PLC0415
        ex = MPIPoolExecutor()
        return ex, f"MPI pool ({ex.num_workers} workers)"
    raise SweepError(f"unknown executor {kind!r}; known: auto, serial, processes, mpi")


class _Progress:
    """Points done, running and failed, with an ETA (tqdm on stderr, or plain lines)."""

    def __init__(self, total: int, done: int, quiet: bool):
        self.total, self.done, self.failed, self.running = total, done, 0, 0
        self.bar = None
        if not quiet:
            try:
                from tqdm import tqdm  # noqa: PLC0415
                self.bar = tqdm(total=total, initial=done, unit="pt", desc="sweep", file=sys.stderr,
                                dynamic_ncols=True, mininterval=0.5)
            except ImportError:  # pragma: no cover
                pass
        self.quiet = quiet
        self._show()

    def _show(self):
        if self.bar is not None:
            self.bar.set_postfix(done=self.done, running=self.running, failed=self.failed, refresh=True)

    def started(self, n: int = 1):
        self.running += n
        self._show()

    def finished(self, ok: bool, msg: str | None = None):
        self.running -= 1
        self.done += 1 if ok else 0
        self.failed += 0 if ok else 1
        if self.bar is not None:
            self.bar.update(1)
        self._show()
        if msg and not self.quiet:
            (self.bar.write if self.bar is not None else lambda s: print(s, file=sys.stderr))(msg)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def execute(sw: Sweep, executor: str = "auto", workers: int = 1, quiet: bool = False) -> dict:
    """Run every unfinished point. Returns counts and the failures {index: error}."""
    prepare_sweep_out(sw.out)
    pdir = sw.out / "points"
    pdir.mkdir(parents=True, exist_ok=True)
    clean_stale(pdir)
    todo = [p for p in sw.points if not is_finished(pdir / p.folder_name)]
    already = len(sw.points) - len(todo)
    failures: dict[int, str] = {}
    if not quiet:
        print(f"sweep {sw.name}: {len(sw.points)} points, {already} already finished, {len(todo)} to run "
              f"-> {sw.out}", file=sys.stderr)
    if not todo:
        return {"points": len(sw.points), "already": already, "ran": 0, "failures": failures}
    prog = _Progress(len(sw.points), already, quiet)
    ex, label = make_executor(executor, workers)
    if not quiet:
        print(f"executor: {label}", file=sys.stderr)

    def note(p: Point, res: dict) -> None:
        ok = res.get("ok", False)
        if not ok:
            failures[p.index] = res.get("error", "unknown error")
            (sw.out / "failures").mkdir(exist_ok=True)
            _write_atomic(sw.out / "failures" / f"{p.folder_name}.txt",
                          f"point {p.index}: {_label(p)}\n{res.get('traceback', res.get('error'))}\n")
        prog.finished(ok, None if ok else f"point {p.index} ({_label(p)}) FAILED: {res.get('error')}")

    try:
        if ex is None:
            for p in todo:
                prog.started()
                note(p, run_point(p.config, str(pdir / p.folder_name), p.inputs))
        else:
            n_slots = max(1, getattr(ex, "num_workers", None) or getattr(ex, "_max_workers", 1) or 1)
            queue = list(todo)
            inflight: dict = {}
            retries: dict[int, int] = {}
            while queue or inflight:
                while queue and len(inflight) < n_slots:
                    p = queue.pop(0)
                    inflight[ex.submit(run_point, p.config, str(pdir / p.folder_name), p.inputs)] = p
                    prog.started()
                done, _ = cf.wait(list(inflight), return_when=cf.FIRST_COMPLETED)
                for fut in done:
                    p = inflight.pop(fut)
                    try:
                        res = fut.result()
                    except BrokenProcessPool as e:
                        # a worker died (killed, out of memory): every in-flight point is lost with the
                        # pool. Start a new pool and requeue them once; a point that breaks the pool
                        # twice is reported as failed.
                        lost = [p] + list(inflight.values())
                        inflight.clear()
                        ex.shutdown(wait=False, cancel_futures=True)
                        ex, _ = make_executor("processes", workers)
                        res = None
                        for p2 in lost:
                            retries[p2.index] = retries.get(p2.index, 0) + 1
                            if retries[p2.index] <= 1:
                                queue.insert(0, p2)
                                prog.running -= 1
                            else:
                                note(p2, {"ok": False, "error": f"worker process died twice: {e}"})
                        break
                    except Exception as e:  # noqa: BLE001 - e.g. an MPI worker lost with its node
                        res = {"ok": False, "error": f"worker lost: {type(e).__name__}: {e}"}
                    note(p, res)
    except KeyboardInterrupt:
        prog.close()
        if ex is not None:
            _stop_workers(ex)
        print(f"\nsweep interrupted: {prog.done} of {len(sw.points)} points finished; run the same command "
              "again to resume", file=sys.stderr)
        raise
    prog.close()
    if ex is not None:
        ex.shutdown(wait=True)
    return {"points": len(sw.points), "already": already, "ran": len(todo), "failures": failures}


# ====================================================================== results
def _scalar_metrics(summary: dict) -> dict:
    """The summary's numbers; a nested table's numbers as ``table.key`` (e.g. ``failures.goodput``,
    ``gpu_fragmentation.mean_fragmented_gpus``)."""
    out = {}
    for k, v in summary.items():
        if k in TIMING_KEYS or isinstance(v, bool):
            continue
        if isinstance(v, (int, float)) and v is not None:
            out[k] = v
        elif isinstance(v, dict):
            for kk, vv in v.items():
                if isinstance(vv, (int, float)) and not isinstance(vv, bool):
                    out[f"{k}.{kk}"] = vv
    return out


def collect(sw: Sweep) -> pd.DataFrame:
    """Rows from the finished folders, in point order (then pricing order)."""
    from hpctwin.power.accounting import load_run, make_rules, price_run  # noqa: PLC0415
    rules = make_rules(sw.pricing_tables, f"{sw.path}: [pricing]") if sw.pricing_names else {}
    rows: list[dict] = []
    keys: list[str] = []
    for p in sw.points:
        folder = sw.out / "points" / p.folder_name
        base = {"point": p.index}
        base.update({a: _cell(v) for a, v in p.overrides.items()})
        base.setdefault("seed", p.config["seed"])
        if not is_finished(folder):
            row = dict(base, status="failed", folder=f"points/{p.folder_name}")
            rows += [dict(row, pricing=n) for n in sw.pricing_names] or [row]
            continue
        summary = json.loads((folder / "summary.json").read_text())
        m = _scalar_metrics(summary)
        for k in m:
            if k not in keys:
                keys.append(k)
        info = {"status": "ok", "folder": f"points/{p.folder_name}", "workload_name": summary.get("workload"),
                "scheduler_name": summary.get("scheduler"), "system_name": summary.get("system") or "",
                "estimate_model": summary.get("estimate_model")}
        if sw.pricing_names:
            data = load_run(folder)
            priced = price_run(data, {n: rules[n] for n in sw.pricing_names})
            for _, pr in priced.iterrows():
                extra = {k: pr[k] for k in priced.columns if k not in ("pricing", "pricing_rule")}
                for k in extra:
                    if k not in keys:
                        keys.append(k)
                rows.append(dict(base, pricing=pr["pricing"], **info, **m, **extra))
        else:
            rows.append(dict(base, **info, **m))
    df = pd.DataFrame(rows)
    lead = ["point"] + [a for a in sw.axes] + (["seed"] if "seed" not in sw.axes else []) + \
           (["pricing"] if sw.pricing_names else [])
    tail = ["status", "workload_name", "scheduler_name", "system_name", "estimate_model", "folder"]
    cols = lead + [c for c in tail if c in df.columns] + [k for k in keys if k in df.columns and k not in lead]
    return df.reindex(columns=cols)


def caption(sw: Sweep, df: pd.DataFrame) -> str:
    ok = df[df["status"] == "ok"] if "status" in df.columns else df
    parts = [f"Sweep {sw.name}: {len(sw.points)} runs."]
    for col, label in (("workload_name", "logs"), ("scheduler_name", "policies"), ("system_name", "machines"),
                       ("estimate_model", "estimate models")):
        if col in ok.columns:
            vals = [str(v) for v in dict.fromkeys(ok[col].tolist()) if str(v) not in ("", "nan")]
            if vals:
                parts.append(f"{label.capitalize()}: {', '.join(vals)}.")
    if "machine_units" in ok.columns:
        parts.append("Machine units: "
                     + ", ".join(str(int(v)) for v in dict.fromkeys(ok["machine_units"].dropna())) + ".")
    for p in sw.points:
        f = sw.out / "points" / p.folder_name / "summary.json"
        if f.exists():
            s = json.loads(f.read_text())
            parts.append(f"Conventions: {s.get('conventions')}.")
            if s.get("power_conventions"):
                parts.append(f"Power: {s['power_conventions']}.")
            break
    if sw.pricing_names:
        from hpctwin.power.accounting import make_rules  # noqa: PLC0415
        rules = make_rules(sw.pricing_tables)
        parts.append("Pricing: " + "; ".join(f"{n} = {rules[n].describe()}" for n in sw.pricing_names) + ".")
    return " ".join(parts)


def report(sw: Sweep, df: pd.DataFrame, quiet: bool = False) -> None:
    """results.csv, results_summary.csv, results.md, results.tex and the plots: written into a
    temporary folder inside the sweep folder, then each renamed into place (``os.replace``), so a kill
    never leaves a half-written table."""
    tmp = sw.out / f".results-tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        write_results_csv(df, tmp / "results.csv")
        ok = df[df["status"] == "ok"]
        metrics = sw.metrics or [m for m in DEFAULT_METRICS if m in ok.columns]
        missing = [m for m in metrics if m not in ok.columns]
        if not ok.empty and missing:
            _publish(tmp, sw.out)
            raise SweepError(f"{sw.path}: [sweep] metrics {missing} are not in the results; have "
                             f"{[c for c in ok.columns if c not in ('point', 'status', 'folder')]}")
        if not ok.empty:
            by = [a for a in sw.axes if a != "seed"] + (["pricing"] if sw.pricing_names else [])
            agg = write_tables(ok, tmp, by, metrics, caption(sw, df), over="seed", stem="results")
            # the raw rows (with failures) stay in results.csv
            write_results_csv(df, tmp / "results.csv")
            for m in metrics:
                bar_plot(agg, by, m, tmp / f"plot_{m}.png", title=f"{sw.name}: {m} (mean, 95% CI over seeds)")
        _publish(tmp, sw.out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _publish(tmp: Path, out: Path) -> None:
    """Rename every finished file of ``tmp`` into ``out`` (each rename atomic)."""
    for f in sorted(tmp.iterdir()):
        if f.is_file() and not f.name.startswith("."):
            os.replace(f, out / f.name)


# ====================================================================== entry point
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="hpctwin sweep", description="Run a sweep file (see experiments/sweep.py).")
    ap.add_argument("sweep_file")
    ap.add_argument("--out", default=None, help="output folder (default: [sweep] out, or <file stem>.out)")
    ap.add_argument("--workers", "-j", type=int, default=1, help="local worker processes (default 1 = serial)")
    ap.add_argument("--executor", default="auto", choices=["auto", "serial", "processes", "mpi"],
                    help="auto: MPI when started under mpiexec/srun with mpi4py.futures, processes when "
                         "--workers > 1, else serial")
    ap.add_argument("--dry-run", action="store_true", help="check the file and list the points; run nothing")
    ap.add_argument("--allow-exec", action="store_true",
                    help="run code the sweep file names (exec:CMD or module:Class schedulers, a system whose "
                         "cooling model is an FMU); without it such a file is refused before anything runs")
    ap.add_argument("--quiet", "-q", action="store_true")
    return ap


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:           # outside the run loop (checks, tables): one line, no traceback
        print("hpctwin sweep: interrupted", file=sys.stderr)
        return 130


def _main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    try:
        sw = load_sweep(a.sweep_file, a.out, allow_exec=a.allow_exec)
        check_sweep_out(sw.out)
        preflight(sw)
    except (SweepError, ValueError) as e:
        print(f"hpctwin sweep: error: {e}", file=sys.stderr)
        return 2
    if a.dry_run:
        for p in sw.points:
            print(f"{p.index:4d} {p.hash}  {_label(p)}")
        return 0
    try:
        st = execute(sw, a.executor, a.workers, a.quiet)
    except KeyboardInterrupt:
        return 130
    except ValueError as e:             # the output folder changed since it was checked (RunFolderError)
        print(f"hpctwin sweep: error: {e}", file=sys.stderr)
        return 2
    df = collect(sw)
    try:
        report(sw, df, a.quiet)
    except SweepError as e:
        print(f"hpctwin sweep: error: {e}", file=sys.stderr)
        return 2
    if not a.quiet:
        print(f"results: {sw.out / 'results.csv'} ({len(df)} rows); {st['ran']} run now, {st['already']} "
              f"reused, {len(st['failures'])} failed", file=sys.stderr)
    if st["failures"]:
        print(f"hpctwin sweep: {len(st['failures'])} point(s) failed; see {sw.out / 'failures'}; rerun to retry",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
