"""What a run's result depends on besides its configuration: its input files and the code that ran.

* `input_files` lists every file a `twin.run.RunConfig` reads: the workload log (a file, or a
  registry dataset resolved in the data directory, plus the Alibaba GPU 2023 node list read beside
  it), the system when it is a ``.toml`` file (and, with the power model's cooling, its wet-bulb
  CSV and FMU), ``options.scheduler.slurm_conf``, ``options.serving.trace`` and the serving
  profiles of the data directory. Synthetic workloads and built-in systems have no file (built-in
  systems are package data, covered by the code identity).
* `fingerprint` is a file's (or a folder's) SHA-256 and size in bytes, streamed, cached per file
  identity (path, size, mtime, inode) within the process.
* `code_identity` names the code: ``files-<hash>`` of the package's source files and package data,
  names and contents (the same in a checkout and an installed copy of the same code; an edit of any
  code file changes it, a commit that changes no code does not). About 20 ms once per process; no git
  subprocess on a run's path.
* `code_in_config` lists the parts of a configuration that name code to run (an ``exec:``
  scheduler, a ``module:Class`` scheduler, a system file whose cooling model is an FMU): a config
  file or a sweep file may name them only when the command line says ``--allow-exec``.

A run folder's ``config.toml`` records the inputs' fingerprints in its ``[inputs]`` table and the
code identity in ``[run] code_identity``; a sweep point's hash includes both.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

#: fingerprints already computed in this process: (path, size, mtime_ns, inode, ctime_ns) -> fingerprint
_FP_CACHE: dict[tuple, dict[str, Any]] = {}
_CODE_IDENTITY: str | None = None
#: the installed packages (``hpctwin`` and the folders mapped under it by pyproject's package-dir)
PACKAGES = ("hpctwin", "hpctwin.twin", "hpctwin.schedulers", "hpctwin.datasets", "hpctwin.topology",
            "hpctwin.power", "hpctwin.experiments")
#: package data that changes results (built-in systems, the dataset registry), beside the .py files
_DATA_GLOBS = ("twin/systems/*.toml", "datasets/*.toml")


class CodeInFileError(ValueError):
    """A config or sweep file names code to run (``exec:``, ``module:Class``, an FMU) without ``--allow-exec``."""


class InputChangedError(ValueError):
    """An input file of a recorded run is missing or differs from the recorded fingerprint."""


# ------------------------------------------------------------------------------ code named in a file
def _get(cfg: Any, key: str, default: Any = None) -> Any:
    """A field of a `RunConfig` or of a dict of its fields."""
    if isinstance(cfg, dict):
        return cfg.get(key, default)
    return getattr(cfg, key, default)


def scheduler_code(name: Any) -> str | None:
    """What running scheduler ``name`` would execute, or None when it is a built-in or an installed
    plug-in (entry point): ``exec:CMD`` starts a program, ``module:Class`` imports Python code."""
    if not isinstance(name, str):
        return None
    if name.startswith("exec:"):
        return "would start a program"
    if ":" not in name:
        return None
    from hpctwin.schedulers.registry import known_schedulers  # noqa: PLC0415
    if name in known_schedulers():
        return None
    module = name.partition(":")[0]
    return f"would import and run Python code (module {module!r})"


def scheduler_is_code(name: Any) -> bool:
    """True when scheduler ``name`` names code (``exec:CMD`` or ``module:Class``, not a known name)."""
    return scheduler_code(name) is not None


def _system_file(system: Any) -> Path | None:
    """The system's file when ``system`` names one (as `twin.system.load_system` decides), else None."""
    if not isinstance(system, str) or not system.strip():
        return None
    p = Path(system)
    if p.suffix == ".toml" or p.exists():
        return p
    return None


def _cooling_files(cfg: Any) -> dict[str, str]:
    """``{"wet_bulb_csv": path, "fmu": path}`` the power model's cooling reads from a system file
    (only with the power model on and cooling not turned off by ``options.power.cooling``)."""
    sys_file = _system_file(_get(cfg, "system"))
    if sys_file is None or not _get(cfg, "power", False) or not sys_file.is_file():
        return {}
    try:
        raw = tomllib.loads(sys_file.read_bytes().decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}                          # the run reports the broken system file itself
    cooling = raw.get("cooling")
    power_opts = (_get(cfg, "options") or {}).get("power") or {}
    want = bool(cooling) if power_opts.get("cooling") is None else bool(power_opts.get("cooling"))
    if not isinstance(cooling, dict) or not want:
        return {}
    out = {}
    for key, name in (("wet_bulb_csv", "wet_bulb_csv"), ("fmu_path", "fmu")):
        v = cooling.get(key)
        if key == "fmu_path" and cooling.get("backend") != "fmu":
            continue
        if isinstance(v, str) and v:
            q = Path(v)
            out[name] = str(q if q.is_absolute() else sys_file.parent / q)   # as power.config resolves it
    return out


def code_in_config(cfg: Any) -> list[tuple[str, Any, str]]:
    """``(field, value, what it would run)`` for each field of ``cfg`` (a `RunConfig` or its dict)
    that names code: the scheduler (``exec:``/``module:Class``) and a system file whose cooling model
    is an FMU (compiled code run by fmpy)."""
    out: list[tuple[str, Any, str]] = []
    what = scheduler_code(_get(cfg, "scheduler"))
    if what:
        out.append(("scheduler", _get(cfg, "scheduler"), what))
    fmu = _cooling_files(cfg).get("fmu")
    if fmu:
        out.append(("system", _get(cfg, "system"), f"names an FMU cooling model ({fmu}) whose compiled code would run"))
    return out


def refusal(where: str, label: str, value: Any, what: str, *, in_list: bool = False) -> str:
    """The one-line refusal of code named in a file: ``file:line: [table] key = "v" would ...; pass ...``
    (``label`` is ``[table] key``; ``in_list``: the value is one item of the key's list)."""
    shown = f": list item {json.dumps(value)}" if in_list else f" = {json.dumps(value)}"
    return f"{where}: {label}{shown} {what}; pass --allow-exec to run code named in a file"


# ------------------------------------------------------------------------------ input files
def _workload_file(spec: Any, data_dir: Any) -> tuple[Path, str | None] | None:
    """(file, format or None when detected) the workload spec reads, as `datasets.loader.load_workload`
    resolves it; None for generators and for names that resolve to nothing (the run reports those)."""
    if not isinstance(spec, str) or not spec.strip():
        return None
    if spec in ("synthetic", "llm-synthetic") or spec.startswith(("synthetic:", "llm-synthetic:")):
        return None
    from hpctwin.datasets.loader import FORMATS  # noqa: PLC0415
    head, sep, rest = spec.partition(":")
    if sep and head in FORMATS:
        return Path(rest), head
    p = Path(spec)
    if p.exists() or "/" in spec or p.suffix in (".swf", ".gz", ".csv", ".parquet", ".json", ".txt"):
        return p, None
    try:
        from hpctwin.datasets.registry import default_data_dir, lookup  # noqa: PLC0415
        entry = lookup(spec)
        if entry.format not in FORMATS:
            return None
        return entry.path(default_data_dir(data_dir)), entry.format
    except Exception:  # noqa: BLE001 - an unknown name or data dir: the run says so
        return None


def _alibaba_nodes(path: Path, fmt: str | None) -> Path | None:
    """The node list the Alibaba GPU 2023 reader reads beside its pod list (when present)."""
    from hpctwin.datasets.names import ALIBABA_2023_NODES  # noqa: PLC0415 - a name only, no reader
    nodes = path.with_name(ALIBABA_2023_NODES)
    if not nodes.is_file() or nodes == path:
        return None
    if fmt is None:
        try:
            from hpctwin.datasets.loader import detect_format  # noqa: PLC0415
            fmt = detect_format(path)
        except Exception:  # noqa: BLE001
            return None
    return nodes if fmt == "alibaba-gpu" else None


def _serving_profiles(cfg: Any, serving: dict) -> dict[str, Path]:
    """The data directory's per-model profile folders (``LLM-serving/LLMServingSim/perf/<hardware>/
    <model>``) the serving model reads, one per pool."""
    try:
        from hpctwin.twin.serving.bundle import find_data_dir  # noqa: PLC0415
        from hpctwin.twin.serving.models import model_shape  # noqa: PLC0415
        base = find_data_dir(_get(cfg, "data_dir")) / "LLM-serving" / "LLMServingSim" / "perf"
        model = model_shape(serving.get("model", "meta-llama/Llama-3.1-8B")).name
    except Exception:  # noqa: BLE001 - the run reports a missing data dir or unknown model
        return {}
    hw = serving.get("hardware", "RTXPRO6000")
    if serving.get("mode") == "pd":
        return {f"serving_profile_{pool}": base / (serving.get(f"{pool}_hardware") or hw) / model
                for pool in ("prefill", "decode")}
    return {"serving_profile": base / hw / model}


def input_files(cfg: Any) -> dict[str, Path]:
    """Every input file ``cfg`` (a `RunConfig` or a dict of its fields) reads, by input name
    (``workload``, ``workload_nodes``, ``system``, ``cooling_wet_bulb_csv``, ``cooling_fmu``,
    ``slurm_conf``, ``serving_trace``, ``serving_profile[_prefill|_decode]``). Paths are absolute;
    a file that does not exist is listed (a rerun names it); synthetic workloads have none."""
    out: dict[str, Path] = {}
    wl = _workload_file(_get(cfg, "workload"), _get(cfg, "data_dir"))
    if wl is not None:
        out["workload"] = wl[0]
        nodes = _alibaba_nodes(wl[0], wl[1]) if wl[0].is_file() else None
        if nodes is not None:
            out["workload_nodes"] = nodes
    sys_file = _system_file(_get(cfg, "system"))
    if sys_file is not None:
        out["system"] = sys_file
        for name, path in _cooling_files(cfg).items():
            out[f"cooling_{name}"] = Path(path)
    options = _get(cfg, "options") or {}
    sched = options.get("scheduler") if isinstance(options.get("scheduler"), dict) else {}
    if isinstance(sched.get("slurm_conf"), str) and sched["slurm_conf"].strip():
        out["slurm_conf"] = Path(sched["slurm_conf"])
    serving = options.get("serving") if isinstance(options.get("serving"), dict) else {}
    if isinstance(serving.get("trace"), str) and serving["trace"]:
        out["serving_trace"] = Path(serving["trace"])
        out.update(_serving_profiles(cfg, serving))
    return {k: Path(os.path.abspath(v)) for k, v in out.items()}


def _file_digest(path: Path, st: os.stat_result) -> dict[str, Any]:
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
    hit = _FP_CACHE.get(key)
    if hit is None:
        h = hashlib.sha256()
        n = 0
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
                n += len(chunk)
        hit = _FP_CACHE[key] = {"sha256": h.hexdigest(), "bytes": n}
    return dict(hit)


def fingerprint(path: str | os.PathLike) -> dict[str, Any]:
    """``{"sha256": hex digest, "bytes": size in bytes}`` of a file, read in 1 MiB chunks and cached
    per (path, size, mtime, inode) within the process. A folder's fingerprint is the SHA-256 of its
    files' relative names and digests (sorted, recursive) and their total size. Raises
    FileNotFoundError for a missing path."""
    p = Path(os.path.abspath(path))
    st = p.stat()
    if not p.is_dir():
        return _file_digest(p, st)
    h, total = hashlib.sha256(), 0
    for f in sorted(q for q in p.rglob("*") if q.is_file()):
        d = _file_digest(f, f.stat())
        h.update(f"{f.relative_to(p).as_posix()}\0{d['sha256']}\n".encode())
        total += d["bytes"]
    return {"sha256": h.hexdigest(), "bytes": total}


def input_fingerprints(cfg: Any, *, missing_ok: bool = False) -> dict[str, dict[str, Any]]:
    """``{name: {"path", "sha256", "bytes"}}`` of every input of ``cfg`` (see `input_files`). A
    missing file raises FileNotFoundError, or with ``missing_ok`` gets ``sha256 = None``."""
    out: dict[str, dict[str, Any]] = {}
    for name, path in input_files(cfg).items():
        try:
            out[name] = {"path": str(path), **fingerprint(path)}
        except OSError:
            if not missing_ok:
                raise FileNotFoundError(f"input {name}: {path}: not found") from None
            out[name] = {"path": str(path), "sha256": None, "bytes": None}
    return out


# ------------------------------------------------------------------------------ checking recorded inputs
#: the RunConfig fields that choose each input: an explicit override of one of them changes the input on purpose
INPUT_FIELDS = {"workload": ("workload",), "workload_nodes": ("workload",), "system": ("system",),
                "cooling_wet_bulb_csv": ("system",), "cooling_fmu": ("system",), "slurm_conf": ("options",),
                "serving_trace": ("options",)}


def governing_fields(name: str) -> tuple[str, ...]:
    """The RunConfig fields that choose input ``name``."""
    return INPUT_FIELDS.get(name, ("options", "data_dir") if name.startswith("serving_profile") else ())


def _size(n: Any) -> str:
    return f"{n:,} bytes" if isinstance(n, int) else "unknown size"


def check_recorded_inputs(cfg: Any, recorded: dict[str, dict], source: str, *, overridden: set[str] = frozenset(),
                          allow_changed: bool = False, line_of=lambda name: None) -> list[str]:
    """Compare the inputs ``cfg`` reads now with those ``recorded`` in a config file's ``[inputs]``.

    Inputs chosen by an ``overridden`` field are not compared (the user changed them on purpose).
    A recorded input that is missing now raises `InputChangedError`; one whose SHA-256 differs
    raises it too unless ``allow_changed``. Returns the warnings to print (changed inputs allowed,
    inputs read now that were not recorded).
    """
    current = input_files(cfg)
    warnings: list[str] = []
    for name, rec in recorded.items():
        if any(f in overridden for f in governing_fields(name)):
            continue
        at = f"{source}:{line_of(name)}" if line_of(name) else source
        rec_sha, rec_bytes = rec.get("sha256"), rec.get("bytes")
        path = current.get(name)
        if path is None:
            raise InputChangedError(f"{at}: input {name} (recorded {rec.get('path')}): the configuration no longer "
                                    "reads it; it cannot be checked")
        try:
            now = fingerprint(path)
        except OSError:
            raise InputChangedError(f"{at}: input {name}: {path}: not found (recorded sha256 {str(rec_sha)[:12]}, "
                                    f"{_size(rec_bytes)})") from None
        if now["sha256"] == rec_sha:
            continue
        what = (f"input {name} ({path}) changed since the run: recorded sha256 {str(rec_sha)[:12]} "
                f"({_size(rec_bytes)}), now {now['sha256'][:12]} ({_size(now['bytes'])})")
        if not allow_changed:
            raise InputChangedError(f"{at}: {what}; pass --allow-changed-inputs to run anyway (the rerun will "
                                    "not reproduce the recorded results)")
        warnings.append(f"{at}: {what}: this rerun will not reproduce the recorded results")
    for name in current:
        if name not in recorded and not any(f in overridden for f in governing_fields(name)):
            warnings.append(f"{source}: input {name} ({current[name]}) was not recorded; it cannot be checked")
    return warnings


# ------------------------------------------------------------------------------ code identity
def _package_dirs() -> list[Path]:
    """The folders of the installed packages (imports only ``hpctwin`` itself)."""
    import importlib.util  # noqa: PLC0415
    dirs = []
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            dirs.append(Path(next(iter(spec.submodule_search_locations))).resolve())
    return dirs


def _files_identity(dirs: list[Path]) -> str:
    """``files-<16 hex>``: SHA-256 of the packages' .py files (and package data), names and contents.

    Per folder ``d``: every ``*.py`` below it outside ``__pycache__`` folders (`_py_files`), then for
    ``twin`` the ``systems/*.toml`` files and for ``datasets`` its ``*.toml`` files (`_matching`); each
    file adds ``"<d.name>/<path relative to d>\\0"`` and its bytes. Files are hashed in the order
    ``sorted(Path.rglob(...))`` / ``sorted(Path.glob(...))`` give (paths compared part by part)."""
    h = hashlib.sha256()
    for d in dirs:
        root = str(d)
        files = _py_files(root) if "__pycache__" not in d.parts else []
        if d.name == "twin":
            files += [("systems", n) for n in _matching(os.path.join(root, "systems"), ".toml")]
        if d.name == "datasets":
            files += [(n,) for n in _matching(root, ".toml")]
        for parts in files:
            rel = "/".join(parts)
            h.update(f"{d.name}/{rel}\0".encode())
            with open(os.path.join(root, *parts), "rb") as f:
                h.update(f.read())
    return f"files-{h.hexdigest()[:16]}"


def _py_files(root: str) -> list[tuple[str, ...]]:
    """The parts (relative to ``root``) of the entries named ``*.py`` below ``root``, sorted as
    ``sorted(Path(root).rglob("*.py"))`` sorts them, none inside a ``__pycache__`` folder: like
    ``rglob``, any entry whose name matches counts, and folders are entered unless they are symbolic
    links (a folder that cannot be read is skipped)."""
    out: list[tuple[str, ...]] = []
    todo: list[tuple[str, tuple[str, ...]]] = [(root, ())]
    while todo:
        path, rel = todo.pop()
        try:
            with os.scandir(path) as it:
                entries = list(it)
        except PermissionError:
            continue
        for e in entries:
            if e.name.endswith(".py"):
                out.append((*rel, e.name))
            try:
                is_dir = e.is_dir() and not e.is_symlink()
            except OSError:
                is_dir = False
            if is_dir and e.name != "__pycache__":
                todo.append((e.path, (*rel, e.name)))
    out.sort()
    return out


def _matching(folder: str, suffix: str) -> list[str]:
    """Sorted names of the entries of ``folder`` ending in ``suffix`` (``sorted(Path(folder).glob("*" +
    suffix))``'s names; none when ``folder`` is not a folder)."""
    if not os.path.isdir(folder):
        return []
    with os.scandir(folder) as it:
        return sorted(e.name for e in it if e.name.endswith(suffix))


def code_identity() -> str:
    """The identity of the code that runs, computed once per process: ``files-<16 hex>``, the SHA-256
    of the packages' source files and package data (`_files_identity`). Every code edit gives a new
    identity, so a resumed sweep reruns its points after any code change, and only then."""
    global _CODE_IDENTITY
    if _CODE_IDENTITY is None:
        _CODE_IDENTITY = _files_identity(_package_dirs())
    return _CODE_IDENTITY


def warn(message: str) -> None:
    """One warning line on stderr."""
    print(f"hpctwin: warning: {message}", file=sys.stderr)
