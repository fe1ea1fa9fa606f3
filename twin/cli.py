"""The ``hpctwin`` command line.

``hpctwin run`` replays a workload against a scheduler and writes a run folder; ``hpctwin datasets``
lists and fetches known public logs; ``hpctwin systems`` lists built-in machines; further commands
(``topology``, ``collectives``, ``export``, ``sweep``) are provided by the packages that own them.
Errors in the input (a malformed log line, an unknown system or scheduler, a missing file) print one
line naming the file, line and field, and exit with status 2.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__
from .argtypes import key_value as _kv, on_off as _on_off, whole_number as _window_int  # noqa: F401


def _parse_value(v: str):
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    return v


class _LazyHelp(str):
    """A help text made when argparse formats it (``--help``), not when the parser is built: the
    scheduler list scans the installed packages' entry points (~20 ms), which a run does not need."""

    def __new__(cls, make):
        self = super().__new__(cls, "(listed by --help)")
        self._make = make
        return self

    def __mod__(self, params):               # argparse expands a help text with ``help % params``
        return self._make() % params


def _scheduler_help() -> str:
    from .config import _scheduler_help as make  # noqa: PLC0415
    return make()


def _data_dir_help() -> str:
    from hpctwin.datasets.registry import DATA_DIR_HELP  # noqa: PLC0415
    return DATA_DIR_HELP


class SuggestingParser(argparse.ArgumentParser):
    """An ArgumentParser whose 'unrecognized arguments' error names the closest known option."""

    def error(self, message: str):  # noqa: D401 - argparse's hook
        if message.startswith("unrecognized arguments:"):
            import difflib  # noqa: PLC0415
            parsers = [self] + [sp for a in self._actions if isinstance(a, argparse._SubParsersAction)
                                for sp in a.choices.values()]
            known = sorted({s for q in parsers for a in q._actions for s in a.option_strings if s.startswith("--")})
            hints = []
            for word in message.split(":", 1)[1].split():
                if word.startswith("--"):
                    close = difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.75)
                    if close:
                        hints.append(f"{word.split('=', 1)[0]} -> {close[0]}")
            if hints:
                message += f" (did you mean: {', '.join(hints)}?)"
        super().error(message)


def _compat_names() -> list[str]:
    from .plan import COMPAT  # noqa: PLC0415
    return COMPAT.names()


#: flags of ``hpctwin run`` that are not `RunConfig` fields: what they mean is said where they are read
#: (`_config_from_file`, `config_from_args`, `cmd_run`)
EXTRA_RUN_FLAGS: dict[str, tuple[tuple[str, ...], dict]] = {
    "config": (("--config",), dict(default=None, metavar="RUN/config.toml",
               help="re-run a run from its config.toml (or its folder): same config, same jobs.csv bytes; "
                    "options given explicitly override the file's")),
    "allow_exec": (("--allow-exec",), dict(action="store_true",
                   help="with --config: run code the file names (an exec:CMD or module:Class scheduler, a system "
                        "whose cooling model is an FMU); without it such a file is refused. A --scheduler given "
                        "on the command line needs no flag")),
    "allow_changed_inputs": (("--allow-changed-inputs",), dict(action="store_true",
                             help="with --config: run even when an input file (workload, system, slurm.conf, "
                                  "serving trace) differs from the SHA-256 recorded in the file's [inputs]; the "
                                  "rerun will not reproduce the recorded results")),
    "failures": (("--failures",), dict(type=_on_off, default=False, metavar="on|off",
                 help="inject node failures (twin.failures; options with --set failures.KEY=VALUE, e.g. "
                      "failures.node_mtbf_days=100)")),
    "slurm_conf": (("--slurm-conf",), dict(default=None, help="slurm.conf-style file for --scheduler slurm")),
    "compat": (("--compat",), dict(choices=_compat_names, default=None,
               help="replay a published harness's conventions instead (docs/conventions.md)")),
}
#: ``hpctwin run --help`` order: `RunConfig` fields (declared in `twin.config`) and `EXTRA_RUN_FLAGS` by name;
#: a field not listed here follows, in declaration order
RUN_FLAG_ORDER = ("workload", "scheduler", "order", "backfill", "out", "config", "allow_exec", "allow_changed_inputs",
                  "force", "system", "nodes", "seed", "max_jobs", "skip_jobs", "quiet", "data_dir",
                  "kill_at_walltime", "estimate", "size_field", "allocation", "gpus_per_node", "placement", "network",
                  "power", "failures", "power_cap", "sample_dt", "slurm_conf", "allow_empty", "compat", "options")


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """The ``hpctwin run`` flags: one a `RunConfig` field with a flag (its declaration in `twin.config`:
    flags, type, default, help), plus `EXTRA_RUN_FLAGS`."""
    from .config import add_field_argument, cli_fields  # noqa: PLC0415
    by_name = {f.name: f for f in cli_fields()}
    for name in [*RUN_FLAG_ORDER, *(n for n in by_name if n not in RUN_FLAG_ORDER)]:
        if name in by_name:
            add_field_argument(p, by_name[name], _LazyHelp)
        elif name in EXTRA_RUN_FLAGS:
            flags, kw = EXTRA_RUN_FLAGS[name]
            kw = {k: v() if k == "choices" and callable(v) else v for k, v in kw.items()}
            p.add_argument(*flags, **kw)


def _config_from_file(a: argparse.Namespace):
    """``--config RUN/config.toml``: the run's own configuration; options given explicitly override it.

    Code the file names is refused unless ``--allow-exec``; an input file that changed since the run is
    refused unless ``--allow-changed-inputs`` (`twin.rerun.load_run_config`)."""
    from .rerun import load_run_config, run_config_fields  # noqa: PLC0415
    p = argparse.ArgumentParser(add_help=False)
    add_run_arguments(p)
    defaults = vars(p.parse_args([]))
    if a.options or a.slurm_conf:
        raise ValueError("--config: --set and --slurm-conf cannot be combined with --config; edit a copy of "
                         "the config file instead")
    from .config import meta  # noqa: PLC0415
    fields = run_config_fields()
    overrides = {k: v for k, v in vars(a).items()
                 if k in fields and k in defaults and meta(fields[k])["record"] and v != defaults[k]}
    cfg = load_run_config(a.config, allow_exec=getattr(a, "allow_exec", False),
                          allow_changed_inputs=getattr(a, "allow_changed_inputs", False), **overrides)
    if a.failures:
        cfg.options.setdefault("failures", {})["enabled"] = True
    cfg.quiet, cfg.force = a.quiet, a.force
    src = Path(a.config)
    folder = src if src.is_dir() else src.parent
    cfg.out = a.out if a.out is not None else str(Path("runs") / f"{Path(folder).resolve().name}-rerun")
    return cfg


def config_from_args(a: argparse.Namespace):
    """The `RunConfig` of parsed ``hpctwin run`` arguments: every field with a flag from its flag (a
    namespace without it gives the field's default), ``options`` from ``--set``, ``--slurm-conf`` and
    ``--failures``, and ``out`` from the default run name when not given."""
    from .config import RunConfig, cli_dest, cli_fields  # noqa: PLC0415
    if getattr(a, "config", None):
        return _config_from_file(a)
    from .options import nest_set_options  # noqa: PLC0415
    options: dict = nest_set_options([(k, _parse_value(v)) for k, v in a.options])
    if a.slurm_conf is not None:              # an empty path is refused by twin.options, not ignored
        options.setdefault("scheduler", {})["slurm_conf"] = a.slurm_conf
    if getattr(a, "failures", False):
        options.setdefault("failures", {}).setdefault("enabled", True)
    kwargs = {f.name: getattr(a, cli_dest(f)) for f in cli_fields() if f.name != "options" and hasattr(a, cli_dest(f))}
    kwargs["options"] = options
    kwargs["out"] = a.out if a.out is not None else str(Path("runs") / default_run_name(a, options))
    return RunConfig(**kwargs)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._+" else "_" for c in text).strip("_") or "x"


def default_run_name(a: argparse.Namespace, options: dict) -> str:
    """``<workload>-<scheduler>[-<each option that changes results>]-seed<K>``.

    Two runs whose options differ get different names (options given with ``--set`` and a
    ``--slurm-conf`` are summarised by a short hash of their values).
    """
    import hashlib  # noqa: PLC0415
    import json  # noqa: PLC0415
    w = a.workload
    wname = Path(w.split(":", 1)[1] if ":" in w and not w.startswith("synthetic") else w).name
    wname = _slug(wname.split(".swf")[0].split(".csv")[0] if ("/" in w or "." in wname) else wname)
    parts = [wname, _slug(a.scheduler)]
    defaults = {"order": None, "backfill": None, "system": None, "nodes": None, "placement": "first-fit",
                "estimate": "requested", "size_field": "auto", "allocation": "node", "gpus_per_node": None,
                "power_cap": None, "max_jobs": None, "skip_jobs": None}
    for key, default in defaults.items():
        v = getattr(a, key, default)
        if v != default:
            v = Path(v).stem if key == "system" and str(v).endswith(".toml") else v
            parts.append(f"{key.replace('_', '')}{_slug(str(v))}" if key not in ("order", "backfill", "system")
                         else (f"bf{v}" if key == "backfill" else _slug(str(v))))
    for flag in ("power", "network", "failures"):
        if getattr(a, flag, False):
            parts.append(flag)
    if not getattr(a, "kill_at_walltime", True):
        parts.append("nokill")
    if getattr(a, "sample_dt", None) is not None:   # a given step, 15 s too: the default may be wider
        parts.append(f"dt{_slug(str(a.sample_dt))}")
    if options:
        blob = json.dumps(options, sort_keys=True, default=str).encode()
        parts.append("set" + hashlib.sha256(blob).hexdigest()[:8])
    return "-".join(parts) + f"-seed{a.seed}"


def format_summary(s: dict) -> str:
    """A human-readable summary table of a run."""
    def f(v, unit=""):
        if v is None:
            return "n/a"
        if isinstance(v, float):
            return f"{v:,.2f}{unit}"
        return f"{v}{unit}"
    rows = [
        ("workload", s.get("workload")), ("scheduler", s.get("scheduler")),
        ("machine", f"{s.get('machine_units')} units ({s.get('machine_size_source')})"),
        ("jobs simulated", _jobs_line(s)),
        *([("dropped by the reader", ", ".join(f"{k}: {v}" for k, v in s["accounting"]["dropped_by_reader"].items()))]
          if (s.get("accounting") or {}).get("dropped_by_reader") else []),
        ("killed at walltime", s.get("jobs_killed_at_walltime")),
        ("mean wait", f(s.get("mean_wait_s"), " s")), ("median wait", f(s.get("median_wait_s"), " s")),
        ("mean bsld", f(s.get("mean_bsld"))),
        ("utilisation", f(100 * s["utilisation"], " %") if s.get("utilisation") is not None else "n/a"),
        ("makespan", f(s.get("makespan_s"), " s")),
    ]
    for key, label, unit in (("energy_facility_kwh", "facility energy", " kWh"),
                             ("avg_facility_power_w", "mean facility power", " W"),
                             ("peak_facility_power_w", "peak facility power", " W"), ("mean_pue", "mean PUE", "")):
        if key in s:
            rows.append((label, f(s[key], unit)))
    if s.get("power_cap"):
        from hpctwin.power.cap import cap_summary_line  # noqa: PLC0415
        rows.append(("power cap", cap_summary_line(s["power_cap"])))
    fl = s.get("failures")
    if fl:
        rows.append(("node failures", f"{fl.get('node_failures')} ({fl.get('interruptions')} job interruptions, "
                                      f"{fl.get('jobs_failed')} jobs failed)"))
        rows.append(("goodput", f(fl.get("goodput"))))
        rows.append(("lost unit-hours", f(fl.get("lost_unit_hours"))))
    if isinstance(s.get("serving"), dict):
        rows.extend(_serving_rows(s["serving"], f))
    rows.append(("wall time", f"{s.get('wall_seconds')} s ({s.get('jobs_per_second')} jobs/s)"))
    w = max(len(r[0]) for r in rows)
    lines = [f"{k:<{w}}  {v}" for k, v in rows]
    lines.append(f"conventions: {s.get('conventions')}")
    for n in s.get("notes", []):
        lines.append(f"note: {n}")
    return "\n".join(lines)


def _jobs_line(s: dict) -> str:
    """``jobs simulated``: the log's jobs, and apart from them the serving node requests (serving on
    the batch machine adds those to the engine's jobs)."""
    skipped = f"(skipped: {s.get('jobs_skipped') or 'none'})"
    sv = s.get("serving")
    if isinstance(sv, dict) and isinstance(sv.get("node_requests"), int) and isinstance(s.get("jobs_simulated"), int):
        k = sv["node_requests"]
        return (f"{s['jobs_simulated'] - k} of {s.get('jobs_in_log')} log jobs {skipped}, "
                f"+ {k} serving node requests")
    return f"{s.get('jobs_simulated')} of {s.get('jobs_in_log')} {skipped}"


def _serving_rows(sv: dict, f) -> list[tuple[str, str]]:
    """The serving block of `format_summary` (serving on the batch machine): requests, the batch log's
    jobs and the serving node requests apart, SLO attainment, TTFT/TPOT/E2E percentiles (s),
    GPU-hours and energy (kWh) of the deployment."""
    rows = [("serving", f"{sv.get('requests')} requests on {sv.get('hardware')} / {sv.get('model')} "
                        f"(tp {sv.get('tp')}, policy {sv.get('policy')})")]
    if sv.get("node_requests") is not None:
        rows.append(("  node requests", f"{sv.get('node_requests')} serving jobs (not counted among the "
                                        f"log's {sv.get('log_jobs')} jobs)"))
    slo = sv.get("slo") or {}
    if slo.get("attainment") is not None:
        att = slo["attainment"]
        rows.append(("  SLO attainment", (f"{100 * att:.2f} %" if att == att else "n/a")
                     + f" (TTFT <= {slo.get('ttft_s')} s and TPOT <= {slo.get('tpot_s')} s)"))
    for m in ("ttft", "tpot", "e2e"):
        st = sv.get(m)
        if isinstance(st, dict):
            rows.append((f"  {m.upper()}", "  ".join(f"{k} {v:.4f} s" for k, v in st.items()
                                                    if k in ("mean", "p50", "median", "p90", "p95", "p99")
                                                    and isinstance(v, (int, float)))))
    rows.append(("  instances", f"{sv.get('instances')} ({f(sv.get('gpu_hours'), ' GPU-h')}, "
                                f"{f(sv.get('node_hours'), ' node-h')})"))
    e = sv.get("energy_j")
    rows.append(("  serving energy", f(e / 3.6e6, " kWh") if isinstance(e, (int, float)) and e == e else "n/a"))
    if isinstance(sv.get("slo_classes"), dict):      # multi-SLO serving: per-class attainment and percentiles
        from hpctwin.twin.serving.scheduling import class_rows  # noqa: PLC0415
        rows.extend((f"  {k}", v) for k, v in class_rows(sv["slo_classes"]))
    return rows


def cmd_run(a: argparse.Namespace) -> int:
    if getattr(a, "compat", None):          # a harness's own replay (twin.plan.COMPAT)
        from .plan import compat_plan  # noqa: PLC0415
        preset, cfg = compat_plan(config_from_args(a), a.compat, source="command line")
        return preset.load()(a, cfg)
    from .plan import plan  # noqa: PLC0415
    from .run import execute  # noqa: PLC0415
    cfg = config_from_args(a)
    res = execute(plan(cfg, source="command line"))   # validated (names, sizes, --set keys) before loading
    if not a.quiet:
        print(format_summary(res.summary))
        print(f"run folder: {res.out}")
    return 0


def cmd_datasets(a: argparse.Namespace) -> int:
    from hpctwin.datasets import registry  # noqa: PLC0415
    if a.action == "list":
        rows = registry.status(a.data_dir)
        ddir = registry.default_data_dir(a.data_dir)
        print(f"data directory: {ddir if ddir else '(none: give --data-dir or set HPCTWIN_DATA)'}")
        print(f"{'name':<24} {'jobs':>8}  {'present':<8} {'checksum':<9} {'format':<13} machine")
        for r in rows:
            ck = "-" if r["checksum_ok"] is None else ("OK" if r["checksum_ok"] else "MISMATCH")
            print(f"{r['name']:<24} {r['jobs']:>8}  {'yes' if r['present'] else 'no':<8} {ck:<9} "
                  f"{r.get('format', 'swf'):<13} {r['machine']}")
        return 0
    if a.action == "fetch":
        if not a.names:
            print("hpctwin datasets fetch: name at least one dataset", file=sys.stderr)
            return 2
        for name in a.names:
            p = registry.fetch(name, a.data_dir)
            print(f"{name}: {p} (sha256 verified)")
        return 0
    return 2  # pragma: no cover


def cmd_systems(a: argparse.Namespace) -> int:
    from .system import builtin_systems, load_system  # noqa: PLC0415
    print(f"{'name':<14} {'nodes':>8} {'cpus/node':>9} {'gpus/node':>9}  power  network  description")
    for name in builtin_systems():
        s = load_system(name)
        print(f"{name:<14} {s.nodes:>8} {s.cpus_per_node:>9} {s.gpus_per_node:>9}  "
              f"{'yes' if s.power else 'no':<5}  "
              f"{s.network.get('preset', '-') if s.network else '-':<7}  {s.description}")
    return 0


def _delegate(module: str, func: str = "main"):
    def handler(a: argparse.Namespace) -> int:
        import importlib  # noqa: PLC0415
        mod = importlib.import_module(module)
        return int(getattr(mod, func)(a.rest) or 0)
    return handler


def cmd_collectives(a: argparse.Namespace) -> int:
    """``hpctwin collectives validate [-n N] [OPTIONS]``: run the schedule validator on N ranks (default
    4) under the mpich wheel's ``mpiexec`` (found next to the running Python first, then on PATH)."""
    rest = list(a.rest)
    if not rest or rest[0] != "validate":
        print("usage: hpctwin collectives validate [-n N] [validator options, see "
              "hpctwin collectives validate --help]", file=sys.stderr)
        return 2
    from hpctwin.topology.collectives.validate import launch  # noqa: PLC0415
    return launch(rest[1:])


def build_parser() -> argparse.ArgumentParser:
    parser = SuggestingParser(prog="hpctwin", description="HPC digital twin and scheduler sandbox",
                              epilog="Data directory: " + _data_dir_help() + ". `hpctwin doctor` shows the one "
                                     "in force.")
    parser.add_argument("--version", action="version", version=f"hpctwin {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=SuggestingParser)
    p_run = sub.add_parser("run", help="replay a workload against a scheduler and write a run folder",
                           description="Replay a workload against a scheduler; writes config.toml, jobs.csv, "
                                       "timeseries.h5 and summary.json into the run folder.")
    add_run_arguments(p_run)
    p_run.set_defaults(func=cmd_run)
    p_ds = sub.add_parser("datasets", help="list or download known public logs",
                          description="List the known public logs and whether each is in the data directory "
                                      "(list), or download and checksum them (fetch NAME ...).")
    p_ds.add_argument("action", choices=["list", "fetch"], help="list: the registry and what is present; "
                                                                 "fetch: download NAMES into the data directory")
    p_ds.add_argument("names", nargs="*", help="dataset names for fetch (see hpctwin datasets list)")
    p_ds.add_argument("--data-dir", default=None, help=_data_dir_help())
    p_ds.set_defaults(func=cmd_datasets)
    p_sys = sub.add_parser("systems", help="list built-in machines",
                           description="List the built-in machines (twin/systems/*.toml): nodes, CPUs and GPUs "
                                       "per node, whether a power model and a network are defined.")
    p_sys.set_defaults(func=cmd_systems)
    for name, helptext in (
            ("topology", "show a machine's interconnect (hpctwin topology show SYSTEM)"),
            ("export", "export a workload as SWF, a schedule as sacct or as Batsim's jobs output "
                       "(hpctwin export --format batsim RUN)"),
            ("plot", "figures of a run at paper column width (hpctwin plot gantt RUN [--window A:B])"),
            ("sweep", "run a sweep file (hpctwin sweep SWEEP.toml [--workers N])"),
            ("serve", "simulate an LLM serving deployment on a request trace (hpctwin serve --trace T --out DIR)"),
            ("llm", "LLM training estimates: iteration time, FLOP/s, memory (hpctwin llm estimate --model M ...)"),
            ("doctor", "what this installation has: versions, kernel cache, data directory, MPI, extras"),
            ("view", "write an interactive HTML view of a run folder (zoomable Gantt, power, queue)")):
        module = DELEGATES[name]
        p = sub.add_parser(name, help=helptext, add_help=False)
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(func=_delegate(module))
    p = sub.add_parser("collectives", help="validate collective algorithms under mpiexec "
                                            "(hpctwin collectives validate -n 8)", add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_collectives)
    p = sub.add_parser("report", help="write a self-contained HTML report of a run folder", add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=_delegate("hpctwin.twin.report"))
    return parser


#: commands whose whole argument list is handed to another module's main(argv)
DELEGATES = {"topology": "hpctwin.topology.show", "export": "hpctwin.datasets.export",
             "sweep": "hpctwin.experiments.sweep", "report": "hpctwin.twin.report", "plot": "hpctwin.twin.plot"}
DELEGATES["serve"] = "hpctwin.twin.serving.cli"  # hpctwin serve --bundle DIR --out OUT (LLM serving, issue 16)
DELEGATES["llm"] = "hpctwin.twin.training.cli"   # hpctwin llm estimate ... (LLM training, issue 25)
DELEGATES["doctor"] = "hpctwin.twin.doctor"      # hpctwin doctor [--build-kernels]
DELEGATES["view"] = "hpctwin.twin.view"          # hpctwin view RUN: interactive HTML view (issue 26)


#: the variables that set the BLAS thread pool's size (OpenBLAS reads the first two, MKL/BLIS the others)
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


def start_numpy_single_threaded() -> bool:
    """Import numpy with a one-thread OpenBLAS pool unless the environment sizes it (`BLAS_THREAD_VARIABLES`)
    or numpy is already loaded; True when it did. A command-line run does no large linear algebra, and
    OpenBLAS starts one spinning thread per core when it loads: ~0.1 CPU s a process on 2 cores, more on
    more, paid again by every process of a sweep. The variable is removed once numpy is loaded, so processes
    the run starts (``exec:`` schedulers, sweep workers, ``mpirun``) see the user's environment unchanged."""
    import os  # noqa: PLC0415
    if "numpy" in sys.modules or any(v in os.environ for v in BLAS_THREAD_VARIABLES):
        return False
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401, PLC0415
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]
    return True


def main(argv: list[str] | None = None) -> int:
    start_numpy_single_threaded()
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and (argv[0] in DELEGATES or argv[0] == "collectives"):
        # argparse's REMAINDER does not take a leading option such as --help: pass the rest on as is
        a = argparse.Namespace(rest=argv[1:], command=argv[0])
        a.func = cmd_collectives if argv[0] == "collectives" else _delegate(DELEGATES[argv[0]])
    else:
        a = parser.parse_args(argv)
    if not getattr(a, "func", None):
        parser.print_help()
        return 2
    from hpctwin.datasets.registry import DatasetError  # noqa: PLC0415
    from hpctwin.datasets.swf import SWFError  # noqa: PLC0415
    from hpctwin.schedulers.registry import UnknownSchedulerError  # noqa: PLC0415
    from .run import RunConfigError  # noqa: PLC0415
    from .simulation import SimulationError  # noqa: PLC0415
    from .system import SystemError_  # noqa: PLC0415
    try:
        return a.func(a)
    except (SWFError, DatasetError, UnknownSchedulerError, RunConfigError, SystemError_, FileNotFoundError) as e:
        print(f"hpctwin: error: {e}", file=sys.stderr)
        return 2
    except SimulationError as e:
        print(f"hpctwin: simulation error: {e}", file=sys.stderr)
        return 3
    except ValueError as e:  # bad input detected by a model or reader
        print(f"hpctwin: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hpctwin: interrupted; no run folder was written", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
