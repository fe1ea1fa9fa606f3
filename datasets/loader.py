"""``--workload SPEC`` -> a `Workload`: generators, registry names, and files of every known format.

A spec is one of:

* ``synthetic[:k=v,...]`` (Lublin-Feitelson model, `datasets.synthetic`) or
  ``llm-synthetic[:days=D,gpus=G,seed=S,jobs=N]`` (AcmeTrace-calibrated LLM cluster,
  `datasets.llm_synthetic`);
* ``FORMAT:FILE`` with FORMAT one of `FORMATS` (``swf:``, ``sacct:``, ``alibaba-gpu:``,
  ``alibaba-dlrm:``, ``acme:``, ``helios:``, ``philly:``, ``surf:``/``opendc:``);
* a registry name (``datasets/registry.toml``; ``hpctwin datasets list``), read from the data
  directory with the format the registry gives;
* a file path, whose format is detected from its content (`detect_format`): an SWF header or
  18-number lines, a ``sacct -P`` header, the CSV headers of the GPU traces, a Parquet file
  (OpenDC tasks), a JSON list (Philly). A file that is none of these is refused with the list.

Reader options (``--set workload.KEY=VALUE``): ``duplicate_ids`` (error | renumber, SWF and sacct),
``header_check`` (SWF: check the jobs against the header's machine size, default true; a job that ran
on more processors is skipped and counted), ``strict`` (SWF: refuse, with the located error, a job line
that would otherwise be skipped and counted: a negative value other than -1, a job larger than the
header's machine; default false), ``unit`` (sacct: nodes | cpus).
"""
from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from hpctwin.twin.workload import Workload

from .registry import DatasetError
from .textio import check_input_path


@dataclass(frozen=True)
class Format:
    """A file format: its reader ``read(path, name, opts) -> Workload`` and a one-line description."""

    read: Callable[[Path, str | None, dict], Workload]
    description: str


def _swf(p, name, o):
    from .swf import read_swf  # noqa: PLC0415
    return read_swf(p, size_field=o.get("size_field", "auto"), name=name,
                    duplicate_ids=o.get("duplicate_ids", "error"), header_check=o.get("header_check", True),
                    strict=o.get("strict", False))


def _sacct(p, name, o):
    from .sacct import read_sacct  # noqa: PLC0415
    return read_sacct(p, unit=o.get("unit", "nodes"), name=name, duplicate_ids=o.get("duplicate_ids", "error"))


def _gpu(fn: str):
    def read(p, name, o):
        from . import gpu_traces  # noqa: PLC0415
        kw = {"name": name} if name else {}
        wl = getattr(gpu_traces, fn)(p, **kw)
        nodes_file = p.with_name(gpu_traces.ALIBABA_2023_NODES)
        if fn == "read_alibaba_gpu2023" and nodes_file.is_file() and wl.machine_size is None:
            nodes = gpu_traces.read_alibaba_gpu2023_nodes(nodes_file)   # the trace's own cluster
            wl.machine_size = nodes.total_gpus
            wl.machine_size_source = f"{nodes_file.name}: {nodes.total_gpus:,} GPUs on {len(nodes):,} nodes"
            wl.notes.append(f"machine: {wl.machine_size_source} (units are GPU devices; --allocation gpu packs "
                            "them per node instead)")
        return wl
    return read


def _opendc(p, name, o):
    from .opendc import read_opendc_tasks  # noqa: PLC0415
    return read_opendc_tasks(p, name=name)


FORMATS: dict[str, Format] = {
    "swf": Format(_swf, "Standard Workload Format (Parallel Workloads Archive), .swf or .swf.gz"),
    "sacct": Format(_sacct, "Slurm accounting dump (sacct -P, pipe-separated, header line)"),
    "alibaba-gpu": Format(_gpu("read_alibaba_gpu2023"), "Alibaba GPU 2023 openb pod list (openb_pod_list_*.csv)"),
    "alibaba-dlrm": Format(_gpu("read_alibaba_dlrm2025"),
                           "Alibaba GPU 2025 DLRM instances (disaggregated_DLRM_trace.csv)"),
    "acme": Format(_gpu("read_acme"), "AcmeTrace job file (trace_seren.csv, trace_kalos.csv)"),
    "helios": Format(_gpu("read_helios"), "Helios cluster_log.csv"),
    "philly": Format(_gpu("read_philly"), "Philly cluster_job_log (JSON)"),
    "surf": Format(_opendc, "OpenDC tasks.parquet (the SURF-OpenDT week)"),
}
FORMATS["opendc"] = FORMATS["surf"]
GENERATORS = ("synthetic", "llm-synthetic")

#: CSV header fields that identify a format (all must be present), and files that are not workloads
_CSV_SIGNATURES = (
    ({"name", "num_gpu", "gpu_milli", "pod_phase"}, "alibaba-gpu"),
    ({"instance_sn", "role", "gpu_request"}, "alibaba-dlrm"),
    ({"job_id", "vc", "gpu_num", "node_num", "state"}, "helios"),
    ({"job_id", "type", "gpu_num", "node_num", "state"}, "acme"),
)
_NOT_WORKLOADS = (
    ({"sn", "gpu", "model"}, "the node list of the Alibaba GPU 2023 trace, not jobs (the jobs are "
                             "openb_pod_list_*.csv: --workload alibaba-gpu:FILE)"),
    ({"job_num", "complete_rate_gpu"}, "the AcmeTrace cluster summary (totals per cluster, no job records); "
                                       "--workload llm-synthetic is calibrated to it"),
    ({"date", "total"}, "the Helios Venus daily GPU count per virtual cluster (configuration, no job records)"),
    ({"timestamp", "contexttokens", "generatedtokens"}, "an LLM serving request trace (Azure 2023), not batch jobs: "
                                                        "run it with `hpctwin serve`"),
)
#: keys of a JSON-lines record of an LLM serving request trace (Mooncake, LLMServingSim/ShareGPT)
_SERVING_KEYS = ({"input_length", "output_length"}, {"input_toks", "output_toks"})


def known_formats() -> str:
    return "; ".join(f"{k}: {f.description}" for k, f in FORMATS.items() if k != "opendc")


def _head(p: Path, n: int = 65536) -> bytes:
    with p.open("rb") as f:
        raw = f.read(n)
    if raw[:2] == b"\x1f\x8b":
        try:
            with gzip.open(p, "rb") as f:
                raw = f.read(n)
        except (OSError, EOFError, zlib.error) as e:
            raise DatasetError(f"{p}: corrupt gzip data: {e}") from None
    return raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw


def detect_format(path: str | Path) -> str:
    """The format name of a workload file, from its content (see the module docstring).

    Raises `DatasetError` for a file that is not a workload (a node list, a summary), or whose
    format cannot be told, naming the known formats.
    """
    p = check_input_path(path, DatasetError)
    raw = _head(p)
    if raw[:4] == b"PAR1":
        return "surf"
    text = raw.decode("utf-8", errors="replace")
    lines = [ln.strip() for ln in text.replace("\r", "\n").split("\n")]
    first = next((ln for ln in lines if ln), "")
    if not first:
        return "swf"           # empty: the SWF reader says so (no job lines)
    if first.startswith(";"):
        return "swf"
    if first[0] == "{":
        import json  # noqa: PLC0415
        try:
            keys = set(json.loads(first))
        except (ValueError, TypeError, RecursionError):
            keys = set()
        if any(k <= keys for k in _SERVING_KEYS):
            raise DatasetError(f"{p}:1: this is an LLM serving request trace (JSON lines), not batch jobs: run it "
                               "with `hpctwin serve`")
    if first[0] in "[{":
        return "philly"
    if "|" in first and "jobid" in [c.strip().lower() for c in first.split("|")]:
        return "sacct"
    if "," in first:
        cols = {c.strip().strip('"').lower() for c in first.split(",")}
        for need, fmt in _CSV_SIGNATURES:
            if need <= cols:
                return fmt
        for need, what in _NOT_WORKLOADS:
            if need <= cols:
                raise DatasetError(f"{p}:1: this is {what}")
    toks = first.split()
    if len(toks) >= 18 and all(t.lstrip("+-").replace(".", "", 1).isdigit() for t in toks[:18]):
        return "swf"
    raise DatasetError(f"{p}:1: cannot tell the workload format from {first[:60]!r}; name it as FORMAT:FILE "
                       f"with FORMAT one of: {known_formats()}")


def read_file(path: str | Path, fmt: str | None = None, *, name: str | None = None,
              options: dict | None = None) -> Workload:
    """Read a workload file in format ``fmt`` (detected when None)."""
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        from hpctwin.twin.schema import did_you_mean  # noqa: PLC0415
        raise DatasetError(f"unknown workload format {fmt!r}{did_you_mean(fmt, FORMATS)}; known: {known_formats()}")
    p = check_input_path(path, DatasetError)
    opts = dict(options or {})
    if fmt != "swf" and opts.get("size_field", "auto") != "auto":
        raise DatasetError(f"--size-field {opts['size_field']}: applies to SWF logs only, not to {p.name} ({fmt})")
    for key in ("header_check", "strict"):
        if fmt != "swf" and key in opts:
            raise DatasetError(f"--set workload.{key}: applies to SWF logs only, not to {p.name} ({fmt})")
    if fmt != "sacct" and "unit" in opts:
        raise DatasetError(f"--set workload.unit: applies to sacct dumps only, not to {p.name} ({fmt})")
    if fmt not in ("swf", "sacct") and "duplicate_ids" in opts:
        raise DatasetError(f"--set workload.duplicate_ids: applies to SWF and sacct files only, "
                           f"not to {p.name} ({fmt})")
    return FORMATS[fmt].read(p, name, opts)


def _llm_synthetic(spec: str, seed: int, gpus_per_node: int | None = None) -> Workload:
    from hpctwin.twin.schema import ConfigError, did_you_mean  # noqa: PLC0415

    from .llm_synthetic import llm_workload  # noqa: PLC0415
    kinds = {"days": float, "gpus": int, "seed": int, "jobs": int, "gpus_per_node": int}
    kw: dict = {"seed": seed}
    body = spec.partition(":")[2]
    for item in filter(None, (s.strip() for s in body.split(","))):
        k, eq, v = (s.strip() for s in item.partition("="))
        if k not in kinds or not eq:
            raise ConfigError(f"--workload {spec}: {k or item}: unknown key{did_you_mean(k, kinds)}; known: "
                              f"{', '.join(kinds)} (llm-synthetic:days=30,gpus=1024)")
        try:
            val = kinds[k](v)
        except ValueError:
            raise ConfigError(f"--workload {spec}: {k}: {v!r} is not "
                              f"{'an integer' if kinds[k] is int else 'a number'}") from None
        limits = {"days": (1e-6, 36500), "gpus": (1, 2 ** 26), "seed": (0, 2 ** 63 - 1), "jobs": (1, 50_000_000),
                  "gpus_per_node": (1, 4096)}[k]
        if not limits[0] <= val <= limits[1]:
            raise ConfigError(f"--workload {spec}: {k}: {v} must be in [{limits[0]:g}, {limits[1]:g}]")
        kw[k] = val
    if gpus_per_node and gpus_per_node >= 1:      # the machine's node (--system) unless the spec names one
        kw.setdefault("gpus_per_node", int(gpus_per_node))
    return llm_workload(**kw)


def load_workload(spec: str, *, data_dir: str | None = None, seed: int = 0, nodes: int | None = None,
                  size_field: str = "auto", options: dict | None = None,
                  gpus_per_node: int | None = None) -> Workload:
    """A workload from a spec (see the module docstring); ``options`` are the reader options;
    ``gpus_per_node``: the machine's GPUs per node (``llm-synthetic`` sizes its gangs to it)."""
    if not isinstance(spec, str) or not spec.strip():
        raise DatasetError("--workload: empty workload (a file, a registry name, synthetic or FORMAT:FILE)")
    opts = dict(options or {})
    opts.setdefault("size_field", size_field)
    if spec == "synthetic" or spec.startswith("synthetic:"):
        from .synthetic import lublin_workload, parse_synthetic_spec  # noqa: PLC0415
        params = parse_synthetic_spec(spec)
        params.setdefault("seed", seed)
        if nodes is not None:
            params.setdefault("nodes", nodes)
        return lublin_workload(**params)
    if spec == "llm-synthetic" or spec.startswith("llm-synthetic:"):
        return _llm_synthetic(spec, seed, gpus_per_node)
    head, sep, rest = spec.partition(":")
    if sep and head in FORMATS:
        return read_file(rest, head, options=opts)
    p = Path(spec)
    if p.exists() or "/" in spec or p.suffix in (".swf", ".gz", ".csv", ".parquet", ".json", ".txt"):
        if sep and not p.exists() and len(head) > 1:
            from hpctwin.twin.schema import did_you_mean  # noqa: PLC0415
            raise DatasetError(f"--workload {spec}: unknown format {head!r}{did_you_mean(head, FORMATS)}; "
                               f"known: {known_formats()}")
        return read_file(p, options=opts)
    from .registry import lookup, resolve  # noqa: PLC0415
    entry = lookup(spec)
    if entry.format not in FORMATS:
        raise DatasetError(f"dataset {entry.name}: {entry.note or 'not a job workload'}")
    return read_file(resolve(entry.name, data_dir), entry.format, name=entry.name, options=opts)
