"""Readers for GPU-cluster traces: Alibaba GPU 2023 (openb) and 2025 (DLRM), AcmeTrace, Helios, Philly.

Every reader returns a `twin.workload.Workload` (times in seconds relative to the trace's time 0 or
the earliest submit, as said per reader) with GPU-specific per-job ``columns``. Column conventions
shared by all readers:

* ``gpus`` (float): GPUs requested by the job in total; fractional for GPU-sharing pods
  (Alibaba: ``num_gpu * gpu_milli / 1000``).
* ``job_class`` (str): one of `twin.job_classes.JOB_CLASSES`, or ``""`` when the trace does not
  say (then no class default is applied).
* ``recorded_start`` (s, same clock as ``submit``): when the job started in the real system (NaN if
  it never started).
* ``procs``: the allocation units the engine schedules, stated per reader (GPU devices for the
  Kubernetes traces, nodes for the Slurm-like job logs).

Bad input raises `GPUTraceError` (a ValueError) naming the file, the line (CSV: 1-based, the
header is line 1; JSON: the job's index) and the field.

Readers
-------
* `read_alibaba_gpu2023` / `read_alibaba_gpu2023_nodes`: ``openb_pod_list_*.csv`` and
  ``openb_node_list_all_node.csv`` of alibaba/clusterdata ``cluster-trace-gpu-v2023`` (Weng et al.,
  "Beware of Fragmentation", USENIX ATC'23). Schema (README of the trace): pods ``name, cpu_milli,
  memory_mib, num_gpu (0-8), gpu_milli (per-GPU share of a GPU-sharing pod, 0-1000), gpu_spec
  (allowed GPU models, '|'-separated, empty = any), qos, pod_phase (Succeeded/Running/Pending/
  Failed), creation_time, deletion_time, scheduled_time`` (s from the trace start); nodes ``sn,
  cpu_milli, memory_mib, gpu, model``.
* `read_alibaba_dlrm2025`: ``disaggregated_DLRM_trace.csv`` of ``cluster-trace-gpu-v2025`` (Yang
  et al., NSDI'25). Schema (README): ``instance_sn, role (CN/HN), app_name, cpu_request (vCPU),
  cpu_limit, gpu_request (GPUs), gpu_limit, rdma_request (% of a RNIC), rdma_limit,
  memory_request (GiB), memory_limit, disk_request (GiB), disk_limit, max_instance_per_node (-1 =
  no limit), creation_time, scheduled_time, deletion_time`` (s from the trace start; empty creation/
  scheduled = existed before the trace start, empty deletion = still alive at the trace end).
* `read_acme`: AcmeTrace ``trace_seren.csv`` / ``trace_kalos.csv`` (InternLM/AcmeTrace README; Hu
  et al., NSDI'24): ``job_id, user, node_num, gpu_num, cpu_num, [mem_per_pod_GB,
  shared_mem_per_pod,] type, state, submit_time, start_time, end_time, [fail_time, stop_time,]
  duration, queue, gpu_time``; times ``YYYY-MM-DD HH:MM:SS+HH:MM``.
* `read_helios`: Helios ``cluster_log.csv`` (S-Lab-System-Group/HeliosData README; Hu et al.,
  SC'21): ``job_id, user, vc, gpu_num, cpu_num, node_num, state, submit_time, start_time, end_time,
  duration, queue``; times ``YYYY-MM-DD HH:MM:SS`` (read as UTC; only differences matter).
* `read_philly`: Philly ``cluster_job_log`` (msr-fiddle/philly-traces; Jeon et al., ATC'19): a JSON
  list of jobs ``{"jobid", "user", "vc", "status" (Pass/Killed/Failed), "submitted_time",
  "attempts": [{"start_time", "end_time", "detail": [{"ip", "gpus": [...]}]}]}``; times
  ``YYYY-MM-DD HH:MM:SS``, ``None`` when unknown.

The AcmeTrace, Helios and Philly job files are public but not in the shared data folder; the
readers are tested on small hand-written files of the same schema (``tests/data/gpu_*``).
"""
from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hpctwin.twin.job_classes import UNKNOWN_CLASS
from hpctwin.twin.workload import Workload

#: largest accepted time (s from the trace start), as for SWF and sacct logs (about 3,170 years)
MAX_SECONDS = 1e11
ALIBABA_2023_DIR = "Alibaba-GPU-2023-openb"
ALIBABA_2023_PODS = "openb_pod_list_default.csv"
from .names import ALIBABA_2023_NODES  # noqa: E402 - the file name, shared with run set-up (twin.inputs)
ALIBABA_2025_DIR = "Alibaba-GPU-2025-DLRM"
ALIBABA_2025_FILE = "disaggregated_DLRM_trace.csv.gz"

#: Slurm-style end states (AcmeTrace, Helios) -> SWF status (1 completed, 0 failed, 5 cancelled).
#: The READMEs of both traces say TIMEOUT and NODE_FAIL "are regarded as failed".
SLURM_STATUS = {"COMPLETED": 1, "CANCELLED": 5, "FAILED": 0, "TIMEOUT": 0, "NODE_FAIL": 0,
                "OUT_OF_MEMORY": 0, "PREEMPTED": 0}
#: Slurm states of jobs that had not ended when the trace was taken (status -1; without a start and
#: an end such a job is dropped, counted)
UNFINISHED_STATES = ("PENDING", "RUNNING", "REQUEUED", "SUSPENDED", "COMPLETING", "CONFIGURING")
#: other Slurm end states, known but not mapped to an SWF status (status -1, as before this list existed)
OTHER_END_STATES = ("BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT")
#: Philly job status -> SWF status.
PHILLY_STATUS = {"Pass": 1, "Killed": 5, "Failed": 0}
#: Alibaba 2023 pod phase -> SWF status (Running/Pending: -1, the pod had not ended or never ran).
POD_PHASE_STATUS = {"Succeeded": 1, "Failed": 0, "Running": -1, "Pending": -1}
#: AcmeTrace ``type`` -> job class (the trace's workload types, Hu et al. NSDI'24); others -> "".
ACME_TYPE_CLASS = {"Pretrain": "llm_pretrain", "SFT": "llm_finetune", "Evaluation": "llm_eval",
                   "Debug": "debug"}


class GPUTraceError(ValueError):
    """A malformed GPU trace file: the message names the file, the line (or job) and the field."""


# ---------------------------------------------------------------------------------- helpers
def _data_file(path, data_dir, subdir: str, name: str) -> Path:
    if path is not None:
        return Path(path)
    from hpctwin.datasets.registry import default_data_dir  # noqa: PLC0415
    d = default_data_dir(data_dir)
    if d is None:
        raise GPUTraceError(f"{subdir}/{name}: no data directory (give the path, data_dir, or set HPCTWIN_DATA)")
    return d / subdir / name


def _check_csv_shape(path: Path) -> None:
    """Refuse, naming the line, what pandas would read silently or with an unlocated message: an empty
    file, text that is not UTF-8, a header naming a field twice (pandas renames it ``x.1``), and a
    line with fewer or more fields than the header (pandas pads a short line with empty fields, which
    a reader would take for "unknown")."""
    import csv  # noqa: PLC0415
    import io  # noqa: PLC0415
    import zlib  # noqa: PLC0415
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:
        raise GPUTraceError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise GPUTraceError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[e.start]:02x}); "
                            "a CSV trace is UTF-8") from None
    if not text.strip():
        raise GPUTraceError(f"{path}: empty file (expected a CSV header line)")
    if '"' in text:                        # quoted fields may hold commas and line ends: the csv module counts
        reader = csv.reader(io.StringIO(text))
        rows = ((reader.line_num, r) for r in reader)
    else:
        rows = ((i, ln.split(",")) for i, ln in enumerate(text.splitlines(), start=1))
    want = None
    try:
        for lineno, fields in rows:
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue                   # blank lines are skipped, as pandas does
            if want is None:
                names = [f.strip() for f in fields]
                rep = next((x for x in names if names.count(x) > 1), None)
                if rep is not None:
                    raise GPUTraceError(f"{path}:{lineno}: header names field {rep!r} twice")
                want = len(fields)
            elif len(fields) != want:
                raise GPUTraceError(f"{path}:{lineno}: {len(fields)} fields, the header has {want} "
                                    f"({'a truncated line?' if len(fields) < want else 'a comma inside a field?'})")
    except csv.Error as e:
        raise GPUTraceError(f"{path}: not a readable CSV file: {e}") from None


def _read_csv(path: Path, required: tuple[str, ...]) -> pd.DataFrame:
    from .textio import check_input_path  # noqa: PLC0415
    check_input_path(path, GPUTraceError)     # missing, a directory, a FIFO or device: one error line
    _check_csv_shape(path)
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True,
                         compression="gzip" if path.suffix == ".gz" else None)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, EOFError, OSError) as e:
        raise GPUTraceError(f"{path}: not a readable CSV file: {e}") from None
    df.columns = [c.strip() for c in df.columns]
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise GPUTraceError(f"{path}:1: header lacks field(s) {', '.join(map(repr, missing))}; "
                            f"found {', '.join(map(repr, df.columns))}")
    return df


def _bad(path: Path, df: pd.DataFrame, mask: np.ndarray, col: str, why: str) -> None:
    if mask.any():
        i = int(np.flatnonzero(mask)[0])
        raise GPUTraceError(f"{path}:{i + 2}: field {col!r}: {why} (value {df[col].iloc[i]!r}); "
                            f"{int(mask.sum())} such line(s)")


def _num(path: Path, df: pd.DataFrame, col: str, *, allow_empty: bool = False, integer: bool = False,
         minimum: float | None = None, maximum: float | None = None) -> np.ndarray:
    """Column ``col`` as float64 (NaN where empty and ``allow_empty``), validated."""
    raw = df[col].astype(str).str.strip()
    empty = (raw == "") | (raw.str.lower() == "nan")
    v = pd.to_numeric(raw.where(~empty, None), errors="coerce").to_numpy(dtype=np.float64)
    _bad(path, df, (np.isnan(v) & ~empty.to_numpy()) | ~np.isfinite(np.where(np.isnan(v), 0, v)),
         col, "not a number")
    if not allow_empty:
        _bad(path, df, empty.to_numpy(), col, "empty")
    ok = ~np.isnan(v)
    if integer:
        _bad(path, df, ok & (v != np.round(v)), col, "not an integer")
        _bad(path, df, ok & (np.abs(np.where(ok, v, 0.0)) > 2.0 ** 53), col, "out of range for an integer")
    if minimum is not None:
        _bad(path, df, ok & (v < minimum), col, f"below {minimum:g}")
    if maximum is not None:
        _bad(path, df, ok & (v > maximum), col, f"above {maximum:g}")
    return v


def _times(path: Path, df: pd.DataFrame, col: str, allow_empty: bool) -> np.ndarray:
    """Column ``col`` of date-times as epoch seconds (float64, NaN where empty/None)."""
    raw = df[col].astype(str).str.strip()
    empty = raw.isin(["", "None", "nan", "NaT", "NULL"]).to_numpy()
    t = pd.to_datetime(raw.where(~empty, None), errors="coerce", utc=True, format="ISO8601")
    vals = np.full(len(df), np.nan)
    ok = t.notna().to_numpy()
    if ok.any():
        vals[ok] = (t[ok] - pd.Timestamp("1970-01-01", tz="UTC")).dt.total_seconds().to_numpy()
    _bad(path, df, ~ok & ~empty, col, "not a date-time (expected YYYY-MM-DD HH:MM:SS[+HH:MM])")
    if not allow_empty:
        _bad(path, df, empty, col, "empty")
    return vals


def _ids(values) -> tuple[np.ndarray, list[str]]:
    """Integer ids in order of first appearance, and the name table."""
    codes, uniques = pd.factorize(pd.Series(values, dtype=object).fillna(""), sort=False)
    return codes.astype(np.int64), [str(u) for u in uniques]


# ---------------------------------------------------------------------------------- Alibaba 2023
@dataclass
class GPUNodeList:
    """Nodes of a GPU cluster: ``name`` (str), ``cpu_milli`` (1/1000 vCPU), ``memory_mib`` (MiB),
    ``gpus`` (devices per node), ``model`` (GPU model, "" for CPU-only nodes), all arrays."""

    name: np.ndarray
    cpu_milli: np.ndarray
    memory_mib: np.ndarray
    gpus: np.ndarray
    model: np.ndarray
    source: str = ""
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.name)

    @property
    def total_gpus(self) -> int:
        return int(self.gpus.sum())


def read_alibaba_gpu2023_nodes(path: str | os.PathLike | None = None, *,
                               data_dir: str | os.PathLike | None = None) -> GPUNodeList:
    """The node list of the Alibaba GPU 2023 (openb) trace (1,523 nodes, 6,212 GPUs)."""
    p = _data_file(path, data_dir, ALIBABA_2023_DIR, ALIBABA_2023_NODES)
    df = _read_csv(p, ("sn", "cpu_milli", "memory_mib", "gpu", "model"))
    cpu = _num(p, df, "cpu_milli", integer=True, minimum=1)
    mem = _num(p, df, "memory_mib", integer=True, minimum=1)
    gpu = _num(p, df, "gpu", integer=True, minimum=0)
    model = df["model"].astype(str).str.strip().replace({"nan": ""}).to_numpy(dtype=object)
    _bad(p, df, (gpu > 0) & (model == ""), "model", "empty for a node with GPUs")
    return GPUNodeList(name=df["sn"].to_numpy(dtype=object), cpu_milli=cpu.astype(np.int64),
                       memory_mib=mem.astype(np.int64), gpus=gpu.astype(np.int64), model=model, source=str(p))


#: workload header keys of a GPU trace's own machine (strings, as every header field): the node count
#: and the GPUs per node of the homogeneous machine `twin.allocation.GPUAllocation` uses by default
HEADER_GPU_NODES = "GPUNodes"
HEADER_GPUS_PER_NODE = "GPUsPerNode"
HEADER_GPU_MACHINE = "GPUMachine"


def gpu_machine_header(nodes: GPUNodeList) -> dict[str, str]:
    """Header fields describing a node list as one homogeneous GPU machine (for ``--allocation gpu``).

    GPUs per node = the largest node's GPU count (every pod that fitted a real node fits one node);
    nodes = the trace's GPUs divided by that, rounded up, so the machine keeps the trace's GPU count
    (within one node). ``GPUMachine`` says how the real, possibly mixed, node list was mapped.
    """
    gpus = np.asarray(nodes.gpus, dtype=np.int64)
    if not len(gpus) or int(gpus.max()) < 1:
        return {}
    gpn = int(gpus.max())
    total = int(gpus.sum())
    n = -(-total // gpn)
    sizes, counts = np.unique(gpus[gpus > 0], return_counts=True)
    mix = ", ".join(f"{int(c):,} x {int(g)}" for g, c in sorted(zip(sizes, counts), key=lambda x: -x[0]))
    src = Path(nodes.source).name or "node list"
    return {HEADER_GPU_NODES: str(n), HEADER_GPUS_PER_NODE: str(gpn),
            HEADER_GPU_MACHINE: (f"{src}: {total:,} GPUs on {int((gpus > 0).sum()):,} GPU nodes ({mix} GPUs), "
                                 f"as {n:,} nodes x {gpn} GPUs")}


def read_alibaba_gpu2023(path: str | os.PathLike | None = None, *, data_dir: str | os.PathLike | None = None,
                         name: str = "Alibaba-GPU-2023-openb", nodes: str | os.PathLike | None = "auto") -> Workload:
    """Pods of the Alibaba GPU 2023 trace as a `Workload` (one job per pod).

    * ``submit`` = creation_time; ``recorded_start`` = scheduled_time (NaN for Pending pods);
      ``runtime`` = deletion_time - scheduled_time (s), NaN for pods never scheduled (pod_phase
      Pending: the engine skips them as "runtime_le_0"; their time in the system, deletion -
      creation, is in ``columns["pending_time"]``). Times are seconds from the trace start.
    * ``procs`` = ``num_gpu`` (GPU devices the pod touches; 0 for CPU-only pods, which the engine
      skips); ``columns["gpus"] = num_gpu * gpu_milli / 1000`` (a GPU-sharing pod asks for a
      fraction of one GPU), ``gpu_milli`` (per-GPU share, 1000 = whole), ``num_gpu``, ``cpu_milli``,
      ``memory_mib``, ``gpu_spec`` (allowed models, '|'-separated, "" = any), ``qos``, ``pod_phase``.
    * ``status``: Succeeded 1, Failed 0, Running/Pending -1. ``requested_time``: NaN (Kubernetes
      pods have no time limit). ``job_class``: "" (the trace has no workload class).
    * ``nodes``: the trace's node list (``"auto"``: ``openb_node_list_all_node.csv`` beside the pod
      list, when there; None: none). Its machine goes into the header (`gpu_machine_header`:
      ``GPUNodes``, ``GPUsPerNode``, ``GPUMachine``), the defaults of ``--allocation gpu``.
    """
    p = _data_file(path, data_dir, ALIBABA_2023_DIR, ALIBABA_2023_PODS)
    df = _read_csv(p, ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos",
                       "pod_phase", "creation_time", "deletion_time", "scheduled_time"))
    cpu = _num(p, df, "cpu_milli", integer=True, minimum=0)
    mem = _num(p, df, "memory_mib", integer=True, minimum=0)
    ngpu = _num(p, df, "num_gpu", integer=True, minimum=0, maximum=64)
    gmilli = _num(p, df, "gpu_milli", integer=True, minimum=0, maximum=1000)
    _bad(p, df, (ngpu > 0) & (gmilli == 0), "gpu_milli", "0 for a pod with num_gpu > 0")
    _bad(p, df, (ngpu > 1) & (gmilli != 1000), "gpu_milli", "a multi-GPU pod must ask for whole GPUs (1000)")
    _bad(p, df, (ngpu == 0) & (gmilli != 0), "gpu_milli", "non-zero for a pod with num_gpu = 0")
    created = _num(p, df, "creation_time", minimum=0, maximum=MAX_SECONDS)
    deleted = _num(p, df, "deletion_time", minimum=0, maximum=MAX_SECONDS)
    sched = _num(p, df, "scheduled_time", allow_empty=True, minimum=0, maximum=MAX_SECONDS)
    phase = df["pod_phase"].astype(str).str.strip().to_numpy(dtype=object)
    unknown = ~np.isin(phase, list(POD_PHASE_STATUS))
    _bad(p, df, unknown, "pod_phase", f"unknown phase (known: {', '.join(POD_PHASE_STATUS)})")
    _bad(p, df, deleted < created, "deletion_time", "earlier than creation_time")
    _bad(p, df, sched < created, "scheduled_time", "earlier than creation_time")
    _bad(p, df, deleted < sched, "deletion_time", "earlier than scheduled_time")
    _bad(p, df, np.isnan(sched) & (phase != "Pending"), "scheduled_time", "empty for a pod that ran")
    runtime = deleted - sched
    n = len(df)
    status = np.array([POD_PHASE_STATUS[x] for x in phase], dtype=np.int64) if n else np.zeros(0, np.int64)
    spec = df["gpu_spec"].astype(str).str.strip().replace({"nan": ""}).to_numpy(dtype=object)
    qos = df["qos"].astype(str).str.strip().to_numpy(dtype=object)
    qos_id, qos_names = _ids(qos)
    never = np.isnan(sched)
    wl = Workload.from_arrays(
        name, job_id=np.arange(1, n + 1), submit=created, runtime=runtime, procs=ngpu.astype(np.int64),
        status=status, queue=qos_id,
        columns={"gpus": ngpu * gmilli / 1000.0, "gpu_milli": gmilli.astype(np.int64),
                 "num_gpu": ngpu.astype(np.int64), "cpu_milli": cpu.astype(np.int64),
                 "memory_mib": mem.astype(np.int64), "gpu_spec": spec, "qos": qos, "pod_phase": phase,
                 "pod_name": df["name"].to_numpy(dtype=object), "recorded_start": sched,
                 "pending_time": np.where(never, deleted - created, np.nan),
                 "job_class": np.full(n, UNKNOWN_CLASS, dtype=object)},
        source=str(p), header={"QOSs": ",".join(qos_names)}, machine_size_source="")
    node_file = p.with_name(ALIBABA_2023_NODES) if isinstance(nodes, str) and nodes == "auto" else nodes
    if node_file is not None and Path(node_file) != p and (nodes != "auto" or Path(node_file).is_file()):
        wl.header.update(gpu_machine_header(read_alibaba_gpu2023_nodes(node_file)))
    wl.notes.append(f"{int(never.sum())} pods were never scheduled (Pending): runtime NaN, skipped by a replay")
    wl.notes.append(f"{int((ngpu == 0).sum())} CPU-only pods have procs = 0 (GPU devices); the engine skips them")
    wl.notes.append("procs = GPU devices touched by the pod; columns['gpus'] has the fractional GPU request")
    return wl


# ---------------------------------------------------------------------------------- Alibaba 2025
def read_alibaba_dlrm2025(path: str | os.PathLike | None = None, *, data_dir: str | os.PathLike | None = None,
                          name: str = "Alibaba-GPU-2025-DLRM") -> Workload:
    """Instances of the Alibaba 2025 disaggregated-DLRM inference trace as a `Workload`.

    * Instances that existed before the trace start (empty creation/scheduled time) get ``submit`` =
      ``recorded_start`` = 0 and ``columns["before_start"] = True``; instances alive at the trace
      end (empty deletion_time) end at the trace end (the largest time in the file) and get
      ``columns["censored"] = True`` (their runtime is a lower bound).
    * ``runtime`` = deletion - scheduled (s). ``procs`` = gpu_request (GPUs; 0 for CN instances,
      which the engine skips). ``columns``: ``gpus``, ``cpus`` (vCPU), ``cpu_milli``, ``memory_mib``
      (memory_request GiB x 1024), ``disk_gib``, ``rdma_pct``, ``role`` (CN/HN), ``app_name``,
      ``max_instance_per_node`` (-1 = none), ``job_class`` = "dl_infer_service". ``group`` = the
      application (int id in order of first appearance; names in ``header["Apps"]``).
    """
    p = _data_file(path, data_dir, ALIBABA_2025_DIR, ALIBABA_2025_FILE)
    df = _read_csv(p, ("instance_sn", "role", "app_name", "cpu_request", "gpu_request", "rdma_request",
                       "memory_request", "disk_request", "max_instance_per_node", "creation_time",
                       "scheduled_time", "deletion_time"))
    role = df["role"].astype(str).str.strip().to_numpy(dtype=object)
    _bad(p, df, ~np.isin(role, ["CN", "HN"]), "role", "unknown role (known: CN, HN)")
    cpu = _num(p, df, "cpu_request", minimum=0)
    gpu = _num(p, df, "gpu_request", minimum=0)
    rdma = _num(p, df, "rdma_request", minimum=0, maximum=100)
    mem = _num(p, df, "memory_request", minimum=0)
    disk = _num(p, df, "disk_request", minimum=0)
    maxi = _num(p, df, "max_instance_per_node", integer=True, minimum=-1)
    created = _num(p, df, "creation_time", allow_empty=True, minimum=0, maximum=MAX_SECONDS)
    sched = _num(p, df, "scheduled_time", allow_empty=True, minimum=0, maximum=MAX_SECONDS)
    deleted = _num(p, df, "deletion_time", allow_empty=True, minimum=0, maximum=MAX_SECONDS)
    _bad(p, df, np.isnan(created) != np.isnan(sched), "scheduled_time",
         "empty and non-empty creation/scheduled times mixed on one line")
    _bad(p, df, sched < created, "scheduled_time", "earlier than creation_time")
    _bad(p, df, deleted < sched, "deletion_time", "earlier than scheduled_time")
    before = np.isnan(created)
    censored = np.isnan(deleted)
    t_end = float(np.nanmax(np.concatenate([created, sched, deleted]))) if len(df) else 0.0
    submit = np.where(before, 0.0, created)
    start = np.where(before, 0.0, sched)
    end = np.where(censored, t_end, deleted)
    n = len(df)
    app_id, apps = _ids(df["app_name"].to_numpy(dtype=object))
    wl = Workload.from_arrays(
        name, job_id=np.arange(1, n + 1), submit=submit, runtime=end - start, procs=gpu.astype(np.int64),
        group=app_id,
        columns={"gpus": gpu, "cpus": cpu, "cpu_milli": np.round(cpu * 1000).astype(np.int64),
                 "memory_mib": np.round(mem * 1024).astype(np.int64), "disk_gib": disk, "rdma_pct": rdma,
                 "role": role, "app_name": df["app_name"].to_numpy(dtype=object),
                 "max_instance_per_node": maxi.astype(np.int64), "recorded_start": start,
                 "before_start": before, "censored": censored,
                 "instance_sn": df["instance_sn"].to_numpy(dtype=object),
                 "job_class": np.full(n, "dl_infer_service", dtype=object)},
        source=str(p), header={"Apps": ",".join(apps), "TraceEnd": f"{t_end:g}"})
    wl.notes.append(f"{int(before.sum())} instances existed before the trace start: submit = start = 0")
    wl.notes.append(f"{int(censored.sum())} instances were alive at the trace end ({t_end:g} s): runtime "
                    "censored there (lower bound)")
    wl.notes.append(f"{int((gpu == 0).sum())} CPU-node (CN) instances have procs = 0 GPUs; the engine skips them")
    return wl


# ---------------------------------------------------------------------------------- Slurm-like logs
def _slurm_like(p: Path, df: pd.DataFrame, name: str, *, has_type: bool, vc_col: str | None) -> Workload:
    submit = _times(p, df, "submit_time", allow_empty=False)
    start = _times(p, df, "start_time", allow_empty=True)
    end = _times(p, df, "end_time", allow_empty=True)
    gpus = _num(p, df, "gpu_num", integer=True, minimum=0)
    nodes = (_num(p, df, "node_num", integer=True, minimum=0) if "node_num" in df.columns
             else np.full(len(df), np.nan))
    cpus = (_num(p, df, "cpu_num", integer=True, minimum=0, allow_empty=True) if "cpu_num" in df.columns
            else np.full(len(df), np.nan))
    state = df["state"].astype(str).str.strip().str.upper().to_numpy(dtype=object)
    _bad(p, df, state == "", "state", "empty")
    word = np.array([x.split()[0] if x else "" for x in state], dtype=object)   # "CANCELLED BY 42" -> CANCELLED
    _bad(p, df, (word != "") & ~np.isin(word, [*SLURM_STATUS, *UNFINISHED_STATES, *OTHER_END_STATES]), "state",
         f"unknown state (known: {', '.join([*SLURM_STATUS, *OTHER_END_STATES])}, and the unfinished states "
         f"{', '.join(UNFINISHED_STATES)})")
    _bad(p, df, start < submit, "start_time", "earlier than submit_time")
    _bad(p, df, end < start, "end_time", "earlier than start_time")
    ran = ~np.isnan(start) & ~np.isnan(end)
    dropped = int((~ran).sum())
    keep = np.flatnonzero(ran)
    t0 = float(np.min(submit)) if len(submit) else 0.0
    status = np.array([SLURM_STATUS.get(s, -1) for s in word], dtype=np.int64)
    user_id, users = _ids(df["user"].to_numpy(dtype=object))
    group_id, vcs = _ids(df[vc_col].to_numpy(dtype=object)) if vc_col else (np.full(len(df), -1), [])
    if has_type:
        wtype = df["type"].astype(str).str.strip().to_numpy(dtype=object)
        jclass = np.array([ACME_TYPE_CLASS.get(t, UNKNOWN_CLASS) for t in wtype], dtype=object)
    else:
        wtype = np.full(len(df), "", dtype=object)
        jclass = np.full(len(df), UNKNOWN_CLASS, dtype=object)
    nodes_eff = np.where(np.isnan(nodes), 1.0, nodes)
    raw_id = df["job_id"].astype(str).str.strip().to_numpy(dtype=object)
    _bad(p, df, pd.Series(raw_id).duplicated().to_numpy(), "job_id", "repeats an earlier job id")
    num = pd.to_numeric(pd.Series(raw_id), errors="coerce").to_numpy()
    job_id = (num.astype(np.int64) if len(num) and np.all(np.isfinite(num)) and len(np.unique(num)) == len(num)
              else np.arange(1, len(df) + 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        gpn = np.where(nodes_eff > 0, gpus / nodes_eff, np.nan)
    cols = {"gpus": gpus, "gpus_per_node": gpn, "cpus": cpus, "state": state, "job_class": jclass,
            "workload_type": wtype, "recorded_start": start - t0, "job_name": raw_id}
    wl = Workload.from_arrays(
        name, job_id=job_id, submit=submit - t0, runtime=end - start, procs=nodes_eff.astype(np.int64),
        user=user_id, group=group_id, status=status, columns=cols, source=str(p),
        header={"UnixStartTime": f"{t0:.0f}", "Users": ",".join(users), "VCs": ",".join(vcs)})
    wl = wl.take(keep)
    if dropped:
        wl.notes.append(f"{dropped} jobs never started or have no end time: dropped")
        wl.dropped["never_started_or_unfinished"] = dropped
    wl.notes.append("procs = node_num (nodes); columns['gpus'] = gpu_num; times relative to the earliest "
                    f"submit (UnixStartTime {t0:.0f})")
    return wl


def read_acme(path: str | os.PathLike, *, name: str | None = None) -> Workload:
    """An AcmeTrace job file (``trace_seren.csv`` / ``trace_kalos.csv``) as a `Workload`.

    ``procs`` = node_num; ``columns["gpus"]`` = gpu_num; ``job_class`` from ``type`` (Pretrain ->
    llm_pretrain, SFT -> llm_finetune, Evaluation -> llm_eval, Debug -> debug, others ""; the
    original in ``workload_type``); ``status`` from ``state`` (`SLURM_STATUS`); runtime =
    end_time - start_time; jobs that never started are dropped (counted in the notes). Times are
    seconds from the earliest submit; time zones in the stamps are honoured.
    """
    p = Path(path)
    df = _read_csv(p, ("job_id", "user", "node_num", "gpu_num", "type", "state", "submit_time",
                       "start_time", "end_time"))
    return _slurm_like(p, df, name or p.stem, has_type=True, vc_col=None)


def read_helios(path: str | os.PathLike, *, name: str | None = None) -> Workload:
    """A Helios ``cluster_log.csv`` (Earth/Saturn/Uranus/Venus) as a `Workload`.

    Same conventions as `read_acme`; ``group`` = the virtual cluster (``vc``, int id, names in
    ``header["VCs"]``); ``job_class`` = "" (the log has no workload type). Stamps have no time zone:
    read as UTC.
    """
    p = Path(path)
    df = _read_csv(p, ("job_id", "user", "vc", "gpu_num", "node_num", "state", "submit_time",
                       "start_time", "end_time"))
    return _slurm_like(p, df, name or p.parent.name or p.stem, has_type=False, vc_col="vc")


def read_philly(path: str | os.PathLike, *, name: str = "Philly") -> Workload:
    """The Philly ``cluster_job_log`` (JSON list of jobs) as a `Workload`.

    Per job: ``submit`` = submitted_time; ``recorded_start`` = the first attempt's start;
    ``runtime`` = the sum of the attempts' durations (s; the time the job held GPUs; the gaps between
    attempts are requeue waits), ``columns["wall_runtime"]`` = last end - first start,
    ``["attempts"]`` = number of attempts; ``procs`` = machines of the first attempt (``detail``
    entries), ``columns["gpus"]`` = its GPU count; ``status``: Pass 1, Failed 0, Killed 5;
    ``group`` = the virtual cluster (``vc``). Jobs with no attempt or no complete start/end are
    dropped (counted in the notes). Times are seconds from the earliest submit (stamps read as UTC).
    """
    p = Path(path)
    if not p.exists():
        raise GPUTraceError(f"{p}: file not found")
    from .textio import read_text  # noqa: PLC0415 - gzip by magic bytes, BOM dropped
    try:
        data = json.loads(read_text(p, GPUTraceError))
    except json.JSONDecodeError as e:
        raise GPUTraceError(f"{p}:{e.lineno}: not valid JSON: {e.msg}") from None
    except RecursionError:
        raise GPUTraceError(f"{p}: JSON nested too deeply to be a job list") from None
    if not isinstance(data, list):
        raise GPUTraceError(f"{p}: expected a JSON list of jobs, got {type(data).__name__}")

    def ts(v, i, key):
        if v is None or v == "None" or v == "":
            return np.nan
        where = f"{p}: job #{i} ({data[i].get('jobid', '?')}): field {key!r}"
        if not isinstance(v, str) or not v.strip()[:1].isdigit():
            # pd.Timestamp(5) is 5 ns after 1970 and pd.Timestamp("now") the clock: not trace times
            raise GPUTraceError(f"{where}: not a date-time string YYYY-MM-DD HH:MM:SS (value {str(v)[:40]!r})")
        try:
            t = pd.Timestamp(v, tz="UTC").timestamp()
        except (ValueError, TypeError, OverflowError):
            raise GPUTraceError(f"{where}: not a date-time (value {v[:40]!r})") from None
        if not np.isfinite(t) or abs(t) > MAX_SECONDS:
            raise GPUTraceError(f"{where}: not a date-time within {MAX_SECONDS:g} s of 1970 (value {v[:40]!r})")
        return t

    rows = []
    dropped = 0
    for i, job in enumerate(data):
        if not isinstance(job, dict):
            raise GPUTraceError(f"{p}: job #{i}: expected an object, got {type(job).__name__}")
        for key in ("jobid", "user", "vc", "status", "submitted_time", "attempts"):
            if key not in job:
                raise GPUTraceError(f"{p}: job #{i} ({job.get('jobid', '?')}): missing field {key!r}")
        for key in ("jobid", "user", "vc"):
            if not isinstance(job[key], (str, int)) or isinstance(job[key], bool):
                raise GPUTraceError(f"{p}: job #{i}: field {key!r}: expected a string, got "
                                    f"{type(job[key]).__name__} ({str(job[key])[:40]})")
        if not isinstance(job["status"], str) or job["status"] not in PHILLY_STATUS:
            raise GPUTraceError(f"{p}: job #{i} ({job['jobid']}): field 'status': unknown value "
                                f"{job['status']!r} (known: {', '.join(PHILLY_STATUS)})")
        sub = ts(job["submitted_time"], i, "submitted_time")
        if np.isnan(sub):
            raise GPUTraceError(f"{p}: job #{i} ({job['jobid']}): field 'submitted_time': empty")
        att = job["attempts"]
        if not isinstance(att, list):
            raise GPUTraceError(f"{p}: job #{i} ({job['jobid']}): field 'attempts': expected a list")
        spans, machines, gpus = [], 0, 0
        for k, a in enumerate(att):
            if not isinstance(a, dict):
                raise GPUTraceError(f"{p}: job #{i} ({job['jobid']}): attempt {k}: expected an object, got "
                                    f"{type(a).__name__}")
            for key in ("start_time", "end_time", "detail"):
                if key not in a:
                    raise GPUTraceError(f"{p}: job #{i} ({job['jobid']}): attempt {k}: missing field {key!r}")
            s, e = ts(a["start_time"], i, f"attempts[{k}].start_time"), ts(a["end_time"], i, f"attempts[{k}].end_time")
            if not np.isnan(s) and not np.isnan(e):
                if e < s:
                    raise GPUTraceError(f"{p}: job #{i} ({job['jobid']}): attempt {k}: field 'end_time' "
                                        f"earlier than 'start_time' ({a['end_time']!r} < {a['start_time']!r})")
                spans.append((s, e))
            det = a["detail"] or []
            if not isinstance(det, list) or not all(isinstance(d, dict) and isinstance(d.get("gpus", []), list)
                                                   for d in det):
                raise GPUTraceError(f"{p}: job #{i} ({job['jobid']}): attempt {k}: field 'detail': expected a "
                                    "list of {\"ip\", \"gpus\": [...]} objects")
            if k == 0:
                machines = len(det)
                gpus = sum(len(d.get("gpus", [])) for d in det)
        if not spans or machines == 0:
            dropped += 1
            continue
        rows.append((job["jobid"], job["user"], job["vc"], PHILLY_STATUS[job["status"]], sub,
                     spans[0][0], sum(e - s for s, e in spans), spans[-1][1] - spans[0][0], len(att),
                     machines, gpus))
    if not rows:
        raise GPUTraceError(f"{p}: no job with a complete attempt")
    cols = list(zip(*rows))
    sub = np.array(cols[4], dtype=np.float64)
    t0 = float(sub.min())
    user_id, users = _ids(cols[1])
    vc_id, vcs = _ids(cols[2])
    machines = np.array(cols[9], dtype=np.int64)
    gpus = np.array(cols[10], dtype=np.float64)
    wl = Workload.from_arrays(
        name, submit=sub - t0, runtime=np.array(cols[6]), procs=machines, user=user_id, group=vc_id,
        status=np.array(cols[3], dtype=np.int64),
        columns={"gpus": gpus, "gpus_per_node": gpus / machines, "recorded_start": np.array(cols[5]) - t0,
                 "wall_runtime": np.array(cols[7]), "attempts": np.array(cols[8], dtype=np.int64),
                 "job_name": np.array(cols[0], dtype=object),
                 "job_class": np.full(len(rows), UNKNOWN_CLASS, dtype=object)},
        source=str(p), header={"UnixStartTime": f"{t0:.0f}", "Users": ",".join(users), "VCs": ",".join(vcs)})
    if dropped:
        wl.notes.append(f"{dropped} jobs have no complete attempt: dropped")
        wl.dropped["no_complete_attempt"] = dropped
    wl.notes.append("runtime = sum of attempt durations; procs = machines of the first attempt")
    return wl
