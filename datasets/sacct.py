"""Slurm accounting dumps (``sacct -P``): reader to a `Workload`, and writer of simulated schedules.

Input: the output of ``sacct -P --format=...`` (pipe-separated, one header line naming the fields,
``--parsable2`` also accepted: no trailing ``|``). Fields used when present (names as sacct prints
them; case-insensitive): JobID, JobIDRaw, Submit, Eligible, Start, End, Elapsed, Timelimit, NNodes,
NCPUS, ReqTRES, AllocTRES, User, Account, Partition, QOS, State, Priority, ConsumedEnergyRaw,
NodeList, JobName, Dependency, Reservation.
Required: JobID, Submit, State, one of NNodes/NCPUS, and Elapsed or Start+End.
Field meanings follow the sacct man page (https://slurm.schedmd.com/sacct.html).

Conventions of this reader (also written to ``Workload.notes``):

* **Job steps** (``123.batch``, ``123.extern``, ``123.0``) are skipped: a step runs inside its job's
  allocation and is not scheduled by slurmctld.
* **Array tasks** (``123_4``) are kept as jobs of their own (that is how Slurm schedules them); the
  job id is JobIDRaw (unique integer), with ``columns["array_job_id"]`` / ``["array_task_id"]``.
  Rows for the not-yet-started remainder of an array (``123_[5-10]``) are pending jobs: see below.
  Heterogeneous job components (``123+0``) are kept as separate jobs (JobIDRaw ids).
* **Requeued jobs** in a ``sacct -D`` dump (one row per run; every run but the last ended PREEMPTED,
  REQUEUED or NODE_FAIL): one job, its last row, submitted and eligible when its first run was (Slurm
  resets Submit and Eligible at each requeue); the earlier runs are counted in the notes.
* **Jobs that never ran** (State PENDING; Start ``Unknown``/``None``: a job cancelled while pending
  shows Start ``None`` and End the cancel time; or CANCELLED with zero Elapsed and NodeList ``None
  assigned`` / empty AllocTRES: the same job when its start record reached the database only at the
  cancel, Start = End = the cancel time) and jobs **still running** at dump time (End ``Unknown``)
  have no runtime: they are dropped and counted in the notes.
* **Times**: ``YYYY-MM-DDTHH:MM:SS`` (sacct's default, local time without a zone: read as UTC unless
  ``tz`` is given; only differences matter for replay) or integer epochs (``SLURM_TIME_FORMAT=%s``).
  Workload times are seconds relative to the earliest kept submit; the absolute epoch of time 0 is
  ``header["UnixStartTime"]``.
* **Runtime**: Elapsed when present, else End - Start (s).
* **Requested time**: Timelimit (``[D-]HH:MM:SS``, ``MM:SS``, ``M``...) in seconds; ``UNLIMITED``,
  ``Partition_Limit``, empty -> NaN (the run then uses the estimate model's fallback).
* **Size**: ``unit="nodes"`` (default; Slurm allocates whole nodes) -> ``procs`` = NNodes; ``"cpus"``
  -> NCPUS. Both are kept in ``columns["nnodes"]`` / ``["ncpus"]`` when present.
* **TRES** (ReqTRES, AllocTRES: ``name=count`` items, comma-separated, job totals) are parsed
  strictly (`parse_tres`): ``cpu``, ``node``, ``billing`` and ``gres/gpu[:TYPE]`` counts are non-negative
  integers, ``mem`` a size with an optional K/M/G/T/P suffix (binary multiples; no suffix = MiB,
  Slurm's unit), any other item a non-negative number with an optional suffix; a malformed item is a
  `SacctError` naming file:line and field. AllocTRES ``node``/``cpu`` must agree with NNodes/NCPUS.
* **GPUs**: the job's GPU count is ReqTRES's (what the job asked for) when ReqTRES names GPUs, else
  AllocTRES's (an ``--exclusive`` job's AllocTRES lists every GPU of its nodes: the request wins when
  both are there). In one TRES string the untyped ``gres/gpu=N`` is the total (Slurm writes it beside
  the typed ``gres/gpu:a100=N`` for the same GPUs); without it the typed ``gres/gpu:TYPE=N`` are
  summed. -> ``columns["gpus"]`` (per job, what ``--allocation gpu`` schedules) and
  ``columns["gpus_per_node"]`` (divided by NNodes).
* **Requested CPUs**: ReqTRES ``cpu`` (what the job asked for; an ``--exclusive`` job's NCPUS counts its
  whole nodes) -> ``columns["req_cpus"]`` (float; NaN where a line's ReqTRES is empty or names no
  ``cpu``), whenever the dump has a ReqTRES field (read by the Slurm-like policy's job-size factor).
* **Memory**: ReqTRES ``mem`` (a job total) divided by NNodes -> ``columns["mem_per_node"]`` (MB), when
  some line's ReqTRES names it (read by the Slurm-like policy under ``CR_*_Memory``).
* **Names**: User -> ``user``, Account -> ``group`` (Slurm's account plays the SWF group role),
  Partition -> ``partition``, QOS -> ``columns["qos"]``, each an int id in order of first
  appearance; the name tables are in ``header["Users"]``, ``["Accounts"]``, ``["Partitions"]``,
  ``["QOSs"]`` (comma-separated, index = id; Slurm names cannot contain commas), and per job in
  ``columns["user_name"]``, ``["account_name"]``, ``["partition_name"]``, ``["qos_name"]`` (what the
  Slurm-like scheduler matches against slurm.conf partitions and the accounts file).
* **State** -> SWF ``status``: COMPLETED 1; CANCELLED (any "by N") 5; FAILED, TIMEOUT, NODE_FAIL,
  OUT_OF_MEMORY, PREEMPTED, BOOT_FAIL, DEADLINE 0. The original string is in ``columns["state"]``.
* **Dependencies and arrays** (`twin.dependencies`, ``docs/workloads.md``): a Dependency field (Slurm's
  ``--dependency`` text, as ``squeue -o %E`` shows it; the ``(unfulfilled)`` suffixes are accepted)
  -> ``columns["dependency"]`` (normalised; a malformed one is a `SacctError` naming file:line and
  field); JobName -> ``["job_name"]`` (what ``singleton`` compares); an array's ``%k`` throttle, read
  from the JobID of its pending remainder (``123_[5-9%2]``) -> ``["array_throttle"]`` of every task of
  array 123; Reservation -> ``["reservation"]`` (read, not modelled).
* ``columns["recorded_start"]`` (s, relative), ``["eligible"]`` (s, relative),
  ``["recorded_priority"]``, ``["consumed_energy_j"]`` (J; NaN where empty) where the fields exist.
"""
from __future__ import annotations

import math
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

import numpy as np

from hpctwin.twin.workload import Workload

from hpctwin.twin.dependencies import format_dependency, parse_dependency

from .hostlist import HostlistError, expand_hostlist, node_ids
from .textio import read_text

if TYPE_CHECKING:   # pandas is imported only by export_sacct (the Slurm-like policy's config reads durations)
    import pandas as pd


class SacctError(ValueError):
    """A malformed sacct dump: the message names the file, line and field."""


#: sacct State (first word) -> SWF status code (1 completed, 0 failed, 5 cancelled).
STATE_TO_STATUS = {
    "COMPLETED": 1,
    "CANCELLED": 5,
    "FAILED": 0,
    "TIMEOUT": 0,
    "NODE_FAIL": 0,
    "OUT_OF_MEMORY": 0,
    "PREEMPTED": 0,
    "BOOT_FAIL": 0,
    "DEADLINE": 0,
}
#: States of jobs that have not finished (never started or still running): not replayable.
UNFINISHED_STATES = {"PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED", "REVOKED",
                     "CONFIGURING", "COMPLETING", "SIGNALING", "STAGE_OUT", "STOPPED",
                     "REQUEUE_HOLD", "REQUEUE_FED", "SPECIAL_EXIT", "RESV_DEL_HOLD"}
_NO_VALUE = {"", "unknown", "none", "n/a"}
_UNLIMITED = {"unlimited", "partition_limit", "infinite"}
_JOBID_RE = re.compile(r"^([0-9]{1,19})(?:_([0-9]{1,19}|\[[^\]]*\]))?(?:\+([0-9]{1,9}))?(?:\.(.+))?$")
_TRES_COUNT_RE = re.compile(r"[0-9]{1,18}\Z")
_TRES_SIZE_RE = re.compile(r"([0-9]{1,18})(?:\.([0-9]{1,9}))?([KMGTPkmgtp]?)\Z")
#: TRES items whose value is a count (non-negative integer); ``gres/gpu[:TYPE]`` are counts too
_TRES_COUNTS = {"cpu", "node", "billing"}
#: binary multiples of a TRES size suffix; Slurm's ``mem`` without a suffix is in MiB
_TRES_MULT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
_INT_RE = re.compile(r"([0-9]{1,18})(?:\.([0-9]+))?([KMGTkmgt]?)\Z")
_FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_DUR_NUM_RE = re.compile(r"[0-9]{1,12}\Z")
_SEC_RE = re.compile(r"[0-9]{1,12}(?:\.[0-9]*)?\Z")
_INT64_MAX = 2 ** 63 - 1
#: longest TRES list read (characters): a node's TRES list is a few hundred characters
_MAX_TRES = 1 << 16
#: largest GPU count of one job (the engine's unit limit, 2**26)
_MAX_GPUS = 1 << 26
#: largest accepted time or duration (s), as for SWF logs (about 3,170 years)
MAX_SECONDS = 1e11


# ---------------------------------------------------------------------------------------- parsing
def parse_slurm_duration(text: str) -> float:
    """Slurm time string -> seconds (float); NaN for UNLIMITED / Partition_Limit / empty.

    Accepted forms (sacct/sbatch): ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``, with
    optional fractional seconds (``00:00:01.5``). Raises ValueError on anything else.
    """
    s = text.strip()
    if s.lower() in _UNLIMITED or s.lower() in _NO_VALUE:
        return math.nan
    days = 0
    if "-" in s:
        d, s = s.split("-", 1)
        if not _DUR_NUM_RE.match(d):
            raise ValueError(f"bad day count {d!r}")
        days = int(d)
        parts = s.split(":")
        if len(parts) == 1:
            h, m, sec = parts[0], "0", "0"
        elif len(parts) == 2:
            h, m, sec = parts[0], parts[1], "0"
        elif len(parts) == 3:
            h, m, sec = parts
        else:
            raise ValueError(f"bad time {text!r}")
    else:
        parts = s.split(":")
        if len(parts) == 1:
            h, m, sec = "0", parts[0], "0"
        elif len(parts) == 2:
            h, m, sec = "0", parts[0], parts[1]
        elif len(parts) == 3:
            h, m, sec = parts
        else:
            raise ValueError(f"bad time {text!r}")
    if not (_DUR_NUM_RE.match(h) and _DUR_NUM_RE.match(m) and _SEC_RE.match(sec)):
        raise ValueError(f"bad time {text[:40]!r} (expected [D-]HH:MM:SS, MM:SS or M)")
    hh, mm, ss = int(h), int(m), float(sec)
    total = days * 86400.0 + hh * 3600.0 + mm * 60.0 + ss
    if total > MAX_SECONDS:
        raise ValueError(f"time {text[:40]!r} is beyond {MAX_SECONDS:g} s")
    return total


def format_slurm_duration(seconds: float) -> str:
    """Seconds -> sacct's ``[D-]HH:MM:SS`` (NaN/inf -> ``UNLIMITED``); rounded to whole seconds."""
    if seconds is None or not math.isfinite(seconds):
        return "UNLIMITED"
    s = int(round(seconds))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


def parse_tres(text: str) -> dict[str, float]:
    """A Slurm TRES string (``billing=64,cpu=64,gres/gpu=8,mem=100G,node=2``) -> {name: value}.

    Counts (``cpu``, ``node``, ``billing``, ``gres/gpu[:TYPE]``) are non-negative integers; ``mem`` is
    returned in bytes (K/M/G/T/P are binary multiples; no suffix = MiB, Slurm's unit); any other
    item (``energy``, ``fs/disk``, ``license/...``, ``gres/gpumem``) is a non-negative number with an optional
    suffix, kept as written times its multiple. Empty text -> {}. Raises ValueError saying which item
    is malformed (the caller adds file, line and field).
    """
    out: dict[str, float] = {}
    s = text.strip()
    if not s:
        return out
    if len(s) > _MAX_TRES:
        raise ValueError(f"{len(s):,} characters, longer than any TRES list")
    for item in s.split(","):
        name, eq, value = item.strip().partition("=")
        name, value = name.strip(), value.strip()
        if not eq or not name or not value or any(c.isspace() for c in name) or not name.isascii():
            raise ValueError(f"{item.strip()[:40]!r} is not a TRES item (name=count)")
        key = name.lower()
        if key in out:
            raise ValueError(f"names {name!r} twice")
        if key == "gres/gpu:":
            raise ValueError(f"{item.strip()[:40]!r}: empty GPU type")
        if key in _TRES_COUNTS or key == "gres/gpu" or key.startswith("gres/gpu:"):
            if not _TRES_COUNT_RE.match(value):
                raise ValueError(f"{name}={value[:40]!r}: the count is not a non-negative integer")
            out[key] = float(int(value))
            continue
        m = _TRES_SIZE_RE.match(value)
        if not m:
            raise ValueError(f"{name}={value[:40]!r}: not a non-negative number (with an optional K/M/G/T/P suffix)")
        mult = _TRES_MULT[m.group(3).lower()]
        if key == "mem" and not m.group(3):
            mult = _TRES_MULT["m"]
        out[key] = (int(m.group(1)) + (float("0." + m.group(2)) if m.group(2) else 0.0)) * mult
    return out


def tres_gpus(tres: dict[str, float]) -> float | None:
    """GPUs in a parsed TRES dict: the untyped ``gres/gpu`` total when present, else the sum of the
    typed ``gres/gpu:TYPE`` counts; None when the string names no GPU. Raises ValueError when the
    typed counts add up to more than the untyped total (the string contradicts itself)."""
    typed = [v for k, v in tres.items() if k.startswith("gres/gpu:")]
    total = tres.get("gres/gpu")
    if total is None:
        return sum(typed) if typed else None
    if sum(typed) > total:
        raise ValueError(f"gres/gpu={total:.0f} but its typed counts (gres/gpu:TYPE) add up to {sum(typed):.0f}")
    return total


def _parse_time(text: str, tz) -> float:
    """sacct timestamp -> epoch seconds; NaN for Unknown/None/empty."""
    s = text.strip()
    if s.lower() in _NO_VALUE:
        return math.nan
    if s.isascii() and s.isdigit():
        if len(s) > 12 or float(s) > MAX_SECONDS:
            raise ValueError(f"epoch {s[:40]!r} is beyond {MAX_SECONDS:g} s")
        return float(s)
    if not s.isascii() or len(s) > 40:
        raise ValueError(s)
    dt = datetime.fromisoformat(s)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=tz)
    return dt.timestamp()


def _open_text(path: Path) -> str:
    return read_text(path, SacctError)


class _Names:
    """Name -> int id in order of first appearance (empty -> -1)."""

    def __init__(self):
        self.ids: dict[str, int] = {}

    def get(self, name: str) -> int:
        name = name.strip()
        if name == "" or name.lower() in _NO_VALUE:
            return -1
        i = self.ids.get(name)
        if i is None:
            i = self.ids[name] = len(self.ids)
        return i

    def table(self) -> str:
        return ",".join(self.ids)


#: states a run ends in when Slurm requeues the job (a ``sacct -D`` dump lists each run as a row)
REQUEUE_STATES = ("PREEMPTED", "REQUEUED", "NODE_FAIL")


def _requeue_chains(lines: list[str], hl: int, col: dict[str, int], trailing: bool, ncol: int
                    ) -> tuple[set[int], dict[int, tuple[str, str]]]:
    """The runs of requeued jobs in a ``sacct -D`` dump: rows (not steps) of one job id (JobIDRaw,
    else JobID) where every row but the last ended in a `REQUEUE_STATES` state. Returns the line
    numbers of those earlier rows (skipped) and, for each such job's last row, the (Submit, Eligible)
    texts of its first row: Slurm resets both at each requeue, and the job as submitted is the first.
    Rows that do not parse are left to the reader's checks."""
    runs: dict[int, list[tuple[int, str, str, str]]] = {}
    ids, state_i = col.get("jobidraw"), col["state"]
    sub_i, elig_i = col.get("submit"), col.get("eligible")
    for ln in range(hl + 1, len(lines)):
        line = lines[ln]
        if not line.strip():
            continue
        values = line.split("|")
        if trailing and values and values[-1] == "":
            values = values[:-1]
        if len(values) != ncol:
            continue
        m = _JOBID_RE.match(values[col["jobid"]].strip())
        if not m or m.group(4) is not None:
            continue
        raw = values[ids].strip() if ids is not None else ""
        rm = _JOBID_RE.match(raw) if raw else m
        if rm is None or (not raw and m.group(2) is not None):
            continue
        jid = int(rm.group(1)) + (int(rm.group(3)) if rm.group(3) is not None else 0)
        state = (values[state_i].split() or [""])[0].upper()
        runs.setdefault(jid, []).append((ln + 1, state, values[sub_i] if sub_i is not None else "",
                                         values[elig_i] if elig_i is not None else ""))
    segments: set[int] = set()
    first_of: dict[int, tuple[str, str]] = {}
    for rows in runs.values():
        if len(rows) > 1 and all(r[1] in REQUEUE_STATES for r in rows[:-1]):
            segments.update(r[0] for r in rows[:-1])
            first_of[rows[-1][0]] = (rows[0][2], rows[0][3])
    return segments, first_of


def read_sacct(path: str | os.PathLike, unit: str = "nodes", tz=None,
               name: str | None = None, *, duplicate_ids: str = "error") -> Workload:
    """Read a ``sacct -P`` dump into a `Workload` (see the module docstring for the conventions).

    Parameters
    ----------
    path: the dump (plain text or gzip).
    unit: ``"nodes"`` (procs = NNodes) or ``"cpus"`` (procs = NCPUS).
    tz: a ``datetime.tzinfo`` for timestamps without a zone (default UTC).
    name: workload name (default: the file stem).

    duplicate_ids: ``"error"`` (default) refuses a repeated job id naming both lines;
        ``"renumber"`` gives repeats new ids above the largest (said in the notes).

    NodeList (a Slurm hostlist, `datasets.hostlist`) fills ``columns["recorded_nodes"]`` (node ids
    by `datasets.hostlist.node_ids`) for the ``recorded`` placer; names in ``["node_names"]``.

    Raises `SacctError` (a ValueError) naming the file, line and field on malformed input.
    """
    p = Path(path)
    if duplicate_ids not in ("error", "renumber"):
        raise ValueError(f"duplicate_ids must be error or renumber, got {duplicate_ids!r}")
    if unit not in ("nodes", "cpus"):
        raise ValueError(f"read_sacct: unit must be 'nodes' or 'cpus', got {unit!r}")
    tz = tz or timezone.utc
    text = _open_text(p)
    lines = text.splitlines()
    # header: first non-empty line
    hl = 0
    while hl < len(lines) and not lines[hl].strip():
        hl += 1
    if hl == len(lines):
        raise SacctError(f"{p}: empty file (expected a sacct -P header line)")
    raw_cols = lines[hl].rstrip("\n").split("|")
    trailing = raw_cols and raw_cols[-1] == ""
    if trailing:
        raw_cols = raw_cols[:-1]
    cols = [c.strip().lower() for c in raw_cols]
    col = {c: i for i, c in enumerate(cols)}
    if len(col) != len(cols):
        rep = next(c for c in cols if cols.count(c) > 1)
        raise SacctError(f"{p}:{hl + 1}: header names field {rep!r} twice")
    for need in ("jobid", "submit", "state"):
        if need not in col:
            raise SacctError(f"{p}:{hl + 1}: header has no {need!r} field "
                             f"(fields: {', '.join(raw_cols)}); is this `sacct -P` output?")
    if "nnodes" not in col and "ncpus" not in col:
        raise SacctError(f"{p}:{hl + 1}: header needs NNodes or NCPUS")
    size_col = "nnodes" if unit == "nodes" else "ncpus"
    if size_col not in col:
        raise SacctError(f"{p}:{hl + 1}: unit={unit!r} needs the {size_col.upper()} field")
    if "elapsed" not in col and not ("start" in col and "end" in col):
        raise SacctError(f"{p}:{hl + 1}: header needs Elapsed, or Start and End")
    ncol = len(cols)

    users, accounts, parts, qoss = _Names(), _Names(), _Names(), _Names()
    rec: dict[str, list] = {k: [] for k in (
        "job_id", "submit", "runtime", "req", "procs", "user", "account", "partition", "qos",
        "status", "state", "start", "eligible", "nnodes", "ncpus", "gpus", "gpn", "prio", "energy",
        "array_job", "array_task", "line", "nodelist", "dependency", "job_name", "reservation", "req_mem",
        "req_cpus")}
    throttles: dict[int, int] = {}     # array job id -> its %k throttle (from a JobID like 123_[5-9%2])
    skipped_steps = 0
    dropped_unstarted = 0
    dropped_running = 0
    unlimited = 0
    het = 0
    more_gpus = 0                  # jobs allocated more GPUs than they asked for (AllocTRES > ReqTRES)
    counts = {"req_names_gpus": 0}    # jobs whose ReqTRES names GPUs
    # rows whose ReqTRES names no GPU but whose AllocTRES does. If other rows' ReqTRES name GPUs, this
    # dump's ReqTRES carries GPU requests, so these jobs asked for none: their AllocTRES GPUs came with
    # whole nodes (--exclusive; Slurm lists an exclusive job's node GRES in AllocTRES) and are read as 0.
    # Otherwise (a dump whose ReqTRES never names GPUs, older Slurm) AllocTRES's GPUs are the best record.
    fallback_rows: list[int] = []
    segments, first_of = _requeue_chains(lines, hl, col, trailing, ncol)   # sacct -D: requeued jobs' runs
    seen_ids: dict[int, int] = {}
    renumber: list[int] = []       # rows whose repeated id is replaced after the loop

    def field(values: list[str], key: str) -> str | None:
        i = col.get(key)
        return None if i is None else values[i]

    def job_gpus(values: list[str], lineno: int, nn: int, nc: int) -> tuple[float, float | None]:
        """(GPUs the job counts as: ReqTRES's when it names GPUs, else AllocTRES's, else 0; AllocTRES's
        GPUs or None), after parsing both TRES fields strictly and checking AllocTRES against
        NNodes/NCPUS (``nn``, ``nc``; -1 when unknown)."""
        found: dict[str, float | None] = {}
        for key in ("reqtres", "alloctres"):
            text = field(values, key)
            if text is None:
                continue
            name = raw_cols[col[key]]
            try:
                tres = parse_tres(text)
                found[key] = tres_gpus(tres)
            except ValueError as e:
                raise SacctError(f"{p}:{lineno}: field {name}: {e}") from None
            if found[key] is not None and found[key] > _MAX_GPUS:
                raise SacctError(f"{p}:{lineno}: field {name}: {found[key]:.0f} GPUs is out of range "
                                 f"(at most {_MAX_GPUS:,})")
            if key == "alloctres":
                for item, want, label in (("node", nn, "NNodes"), ("cpu", nc, "NCPUS")):
                    if item in tres and want >= 0 and tres[item] != want:
                        raise SacctError(f"{p}:{lineno}: field {name}: {item}={tres[item]:.0f}, but {label} says "
                                         f"{want} (the line contradicts itself)")
        req, alloc = found.get("reqtres"), found.get("alloctres")
        if req is not None:
            counts["req_names_gpus"] += 1
        if req is None and alloc and (field(values, "reqtres") or "").strip():
            fallback_rows.append(len(rec["gpus"]))   # ReqTRES is there but names no GPU: decided after the file
        return (req if req is not None else alloc if alloc is not None else 0.0), alloc

    for ln in range(hl + 1, len(lines)):
        line = lines[ln]
        if not line.strip():
            continue
        lineno = ln + 1
        values = line.split("|")
        if trailing and values and values[-1] == "":
            values = values[:-1]
        if len(values) != ncol:
            raise SacctError(f"{p}:{lineno}: {len(values)} fields, the header has {ncol} "
                             f"(a '|' inside a field, or a truncated line?)")
        jid = values[col["jobid"]].strip()
        if jid.lower() == "jobid" and [v.strip().lower() for v in values] == cols:
            raise SacctError(f"{p}:{lineno}: the header line again (line {hl + 1}): two dumps concatenated? "
                             "keep one header line")
        m = _JOBID_RE.match(jid)
        if not m:
            big = re.match(r"[0-9]{20,}", jid)
            raise SacctError(f"{p}:{lineno}: field JobID: {jid[:40]!r} is "
                             + ("out of range for a 64-bit integer" if big else "not a Slurm job id"))
        if m.group(4) is not None:
            skipped_steps += 1
            continue
        if lineno in segments:          # an earlier run of a job that was requeued and ran again
            continue
        if lineno in first_of:          # its last run, submitted (and eligible) when its first run was
            for key, text in zip(("submit", "eligible"), first_of[lineno]):
                if key in col:
                    values[col[key]] = text
        if m.group(2) is not None and "%" in m.group(2):
            throttles[int(m.group(1))] = _array_throttle(m.group(2), f"{p}:{lineno}")

        def num_time(key: str) -> float:
            v = field(values, key)
            if v is None:
                return math.nan
            try:
                return _parse_time(v, tz)
            except ValueError:
                raise SacctError(f"{p}:{lineno}: field {raw_cols[col[key]]}: {v!r} is not a "
                                 "timestamp (YYYY-MM-DDTHH:MM:SS or epoch seconds)") from None

        def dur(key: str) -> float:
            v = field(values, key)
            if v is None:
                return math.nan
            try:
                return parse_slurm_duration(v)
            except ValueError as e:
                raise SacctError(f"{p}:{lineno}: field {raw_cols[col[key]]}: {e}") from None

        def integer(key: str, default: int = -1) -> int:
            v = field(values, key)
            if v is None or v.strip().lower() in _NO_VALUE:
                return default
            mi = _INT_RE.match(v.strip())
            if not mi:
                raise SacctError(f"{p}:{lineno}: field {raw_cols[col[key]]}: {v[:40]!r} is not a "
                                 "non-negative integer")
            mult = {"": 1, "k": 1000, "m": 10 ** 6, "g": 10 ** 9, "t": 10 ** 12}[mi.group(3).lower()]
            value = int(mi.group(1)) * mult + (int(float("0." + mi.group(2)) * mult) if mi.group(2) else 0)
            if mi.group(2) and not mi.group(3):
                raise SacctError(f"{p}:{lineno}: field {raw_cols[col[key]]}: {v[:40]!r} is not an integer")
            if value > _INT64_MAX:
                raise SacctError(f"{p}:{lineno}: field {raw_cols[col[key]]}: {v[:40]!r} is out of range "
                                 "for a 64-bit integer")
            return value

        state_str = values[col["state"]].strip()
        state = state_str.split()[0].upper() if state_str else ""
        submit = num_time("submit")
        if math.isnan(submit):
            raise SacctError(f"{p}:{lineno}: field Submit: {values[col['submit']]!r}: every job "
                             "has a submit time")
        start = num_time("start")
        end = num_time("end")
        if state in UNFINISHED_STATES or math.isnan(start):
            if state == "RUNNING" or (not math.isnan(start) and math.isnan(end)):
                dropped_running += 1
            else:
                dropped_unstarted += 1
            continue
        if state not in STATE_TO_STATUS:
            raise SacctError(f"{p}:{lineno}: field State: unknown state {state_str!r} "
                             f"(known: {', '.join(sorted(STATE_TO_STATUS))} and unfinished "
                             "states, which are dropped)")
        elapsed = dur("elapsed")
        if math.isnan(elapsed):
            if math.isnan(end):
                dropped_running += 1
                continue
            elapsed = end - start
        if elapsed < 0:
            raise SacctError(f"{p}:{lineno}: field Elapsed: negative runtime {elapsed} s")
        if state == "CANCELLED" and elapsed == 0:
            # cancelled while pending: sacct usually prints Start None (dropped above), but Start = End =
            # the cancel time when the job's start record never reached the database before the cancel
            # (as_mysql_job_complete() then inserts it with slurmctld's start_time = end_time = now,
            # job_mgr.c job_signal()); no nodes were held
            nl = field(values, "nodelist")
            at = field(values, "alloctres")
            if (nl is not None and nl.strip().lower() in ("none assigned", "")) or \
                    (at is not None and not at.strip()):
                dropped_unstarted += 1
                continue
        if m.group(2) is not None and m.group(2).startswith("["):
            # a pending array remainder that nevertheless has a start: malformed
            raise SacctError(f"{p}:{lineno}: field JobID: {jid!r} is an array range but has a start")
        raw = field(values, "jobidraw")
        if raw is not None and raw.strip():
            rm = _JOBID_RE.match(raw.strip())
            if not rm:
                raise SacctError(f"{p}:{lineno}: field JobIDRaw: {raw!r} is not a job id")
            job_id = int(rm.group(1))
            if rm.group(3) is not None:   # het component in raw form: id+offset
                job_id = int(rm.group(1)) + int(rm.group(3))
            if job_id > _INT64_MAX:
                raise SacctError(f"{p}:{lineno}: field JobIDRaw: {raw.strip()[:40]!r} is out of range "
                                 "for a 64-bit integer")
        else:
            job_id = int(m.group(1))
            if m.group(3) is not None:
                job_id = int(m.group(1)) + int(m.group(3))
            if m.group(2) is not None:
                raise SacctError(f"{p}:{lineno}: array task {jid!r} needs the JobIDRaw field "
                                 "for a unique job id")
            if job_id > _INT64_MAX:
                raise SacctError(f"{p}:{lineno}: field JobID: {jid[:40]!r} is out of range for a "
                                 "64-bit integer")
        if m.group(3) is not None:
            het += 1
        if job_id in seen_ids:
            if duplicate_ids == "error":
                raise SacctError(f"{p}:{lineno}: field {'JobIDRaw' if 'jobidraw' in col else 'JobID'}: job id "
                                 f"{job_id} repeats line {seen_ids[job_id]} (renumber repeated ids with "
                                 "--set workload.duplicate_ids=renumber)")
            renumber.append(len(rec["job_id"]))
        else:
            seen_ids[job_id] = lineno
        req = dur("timelimit")
        if "timelimit" in col and math.isnan(req):
            unlimited += 1
        nn = integer("nnodes")
        nc = integer("ncpus")
        size = nn if unit == "nodes" else nc
        if size < 1:
            raise SacctError(f"{p}:{lineno}: field {size_col.upper()}: {size} (a job that ran "
                             "holds at least one)")
        g, g_alloc = job_gpus(values, lineno, nn, nc)
        rq = field(values, "reqtres")       # already checked by job_gpus; mem in bytes
        rq_tres = parse_tres(rq) if rq and rq.strip() else {}
        rec["req_mem"].append(rq_tres.get("mem", math.nan))
        rec["req_cpus"].append(float(rq_tres.get("cpu", math.nan)))
        if g_alloc is not None and g is not None and g_alloc > g:
            more_gpus += 1
        nl = field(values, "nodelist")
        try:
            hosts = expand_hostlist(nl) if nl is not None else []
        except HostlistError as e:
            raise SacctError(f"{p}:{lineno}: field NodeList: {e}") from None
        if hosts and nn >= 1 and len(set(hosts)) != nn:
            raise SacctError(f"{p}:{lineno}: field NodeList: {len(set(hosts))} nodes, but NNodes says {nn} "
                             "(the line contradicts itself)")
        rec["nodelist"].append(hosts)
        rec["job_id"].append(job_id)
        rec["submit"].append(submit)
        rec["runtime"].append(elapsed)
        rec["req"].append(req)
        rec["procs"].append(size)
        rec["user"].append(users.get(field(values, "user") or ""))
        rec["account"].append(accounts.get(field(values, "account") or ""))
        rec["partition"].append(parts.get(field(values, "partition") or ""))
        rec["qos"].append(qoss.get(field(values, "qos") or ""))
        rec["status"].append(STATE_TO_STATUS[state])
        rec["state"].append(state_str)
        rec["start"].append(start)
        rec["eligible"].append(num_time("eligible"))
        rec["nnodes"].append(nn)
        rec["ncpus"].append(nc)
        rec["gpus"].append(float(g))
        rec["gpn"].append(g / nn if nn > 0 else float(g))
        rec["prio"].append(integer("priority"))
        en = field(values, "consumedenergyraw")
        if en is None or not en.strip():
            rec["energy"].append(math.nan)
        else:
            ev = float(en) if _FLOAT_RE.match(en.strip()) else math.nan
            if not (math.isfinite(ev) and ev >= 0):
                raise SacctError(f"{p}:{lineno}: field ConsumedEnergyRaw: {en[:40]!r} is not a finite "
                                 "number >= 0 (joules)")
            rec["energy"].append(ev)
        dep = field(values, "dependency")
        try:
            dep = format_dependency(parse_dependency(dep))
        except ValueError as e:
            raise SacctError(f"{p}:{lineno}: field {raw_cols[col['dependency']]}: {e}") from None
        rec["dependency"].append(dep)
        rec["job_name"].append((field(values, "jobname") or "").strip())
        rsv = (field(values, "reservation") or "").strip()
        rec["reservation"].append("" if rsv.lower() in _NO_VALUE else rsv)
        rec["array_job"].append(int(m.group(1)) if m.group(2) is not None else -1)
        rec["array_task"].append(int(m.group(2)) if m.group(2) is not None else -1)
        rec["line"].append(lineno)

    n = len(rec["job_id"])
    if renumber:
        top = max(rec["job_id"])
        for k, i in enumerate(renumber, start=1):
            rec["job_id"][i] = top + k
    submit = np.array(rec["submit"], dtype=np.float64)
    t0 = float(submit.min()) if n else 0.0      # no finished job: an empty workload, the run says so
    columns: dict[str, np.ndarray] = {
        "recorded_start": np.array(rec["start"]) - t0,
        "state": np.array(rec["state"], dtype=object),
        "qos": np.array(rec["qos"], dtype=np.int64),
    }
    for key, tab in (("user", users), ("account", accounts), ("partition", parts), ("qos", qoss)):
        names = list(tab.ids)
        ids = rec[key]
        columns[f"{key}_name"] = np.array([names[i] if i >= 0 else "" for i in ids], dtype=object)
    if "eligible" in col:
        columns["eligible"] = np.array(rec["eligible"]) - t0
    if "nnodes" in col:
        columns["nnodes"] = np.array(rec["nnodes"], dtype=np.int64)
    if "ncpus" in col:
        columns["ncpus"] = np.array(rec["ncpus"], dtype=np.int64)
    if fallback_rows and counts["req_names_gpus"]:
        for i in fallback_rows:                 # see `fallback_rows`: no GPU asked
            rec["gpus"][i] = 0.0
            rec["gpn"][i] = 0.0
    if "alloctres" in col or "reqtres" in col:
        columns["gpus"] = np.array(rec["gpus"], dtype=np.float64)
        columns["gpus_per_node"] = np.array(rec["gpn"], dtype=np.float64)
    if "reqtres" in col and np.isfinite(rec["req_mem"]).any():
        # ReqTRES mem (a job total) per node, MB: what select/cons_tres's CR_*_Memory reads
        columns["mem_per_node"] = (np.array(rec["req_mem"], dtype=np.float64) / 2**20
                                   / np.maximum(np.array(rec["nnodes"], dtype=np.float64), 1.0))
    if "reqtres" in col:
        # ReqTRES cpu: the CPUs the job asked for (Slurm's details->min_cpus), NaN where absent
        columns["req_cpus"] = np.array(rec["req_cpus"], dtype=np.float64)
    if "priority" in col:
        columns["recorded_priority"] = np.array(rec["prio"], dtype=np.int64)
    if "consumedenergyraw" in col:
        columns["consumed_energy_j"] = np.array(rec["energy"])
    if any(rec["nodelist"]):
        ids = node_ids([h for hs in rec["nodelist"] for h in hs])
        recorded = np.empty(n, dtype=object)
        for i, hs in enumerate(rec["nodelist"]):
            recorded[i] = np.array([ids[h] for h in hs], dtype=np.int64) if hs else None
        columns["recorded_nodes"] = recorded
        columns["node_names"] = np.array([",".join(hs) for hs in rec["nodelist"]], dtype=object)
    if any(a >= 0 for a in rec["array_job"]):
        columns["array_job_id"] = np.array(rec["array_job"], dtype=np.int64)
        columns["array_task_id"] = np.array(rec["array_task"], dtype=np.int64)
    if throttles and any(a in throttles for a in rec["array_job"]):
        columns["array_throttle"] = np.array([throttles.get(a, 0) if a >= 0 else 0 for a in rec["array_job"]],
                                             dtype=np.int64)
    if any(rec["dependency"]):                  # twin.dependencies: the job is eligible once it holds
        columns["dependency"] = np.array(rec["dependency"], dtype=object)
    if "jobname" in col:
        columns["job_name"] = np.array(rec["job_name"], dtype=object)
    if any(rec["reservation"]):
        columns["reservation"] = np.array(rec["reservation"], dtype=object)
    header = {
        "UnixStartTime": str(int(t0)) if t0 == int(t0) else repr(t0),
        "Users": users.table(), "Accounts": accounts.table(),
        "Partitions": parts.table(), "QOSs": qoss.table(),
        "Format": "sacct -P",
    }
    notes = [
        f"sacct dump {p.name}: {n} jobs kept; {skipped_steps} job steps skipped; "
        f"{dropped_unstarted} jobs never started and {dropped_running} still running dropped",
        f"job size: {'NNodes (whole-node allocation units)' if unit == 'nodes' else 'NCPUS'}",
        "runtime: Elapsed (else End - Start); requested time: Timelimit"
        + (f" ({unlimited} UNLIMITED/Partition_Limit -> unknown)" if unlimited else ""),
        "times relative to the earliest submit; timestamps without zone read as "
        + ("UTC" if tz is timezone.utc else str(tz)),
        "account -> group; QOS -> columns['qos']; State -> status (1 COMPLETED, 5 CANCELLED, "
        "0 other ends)",
    ]
    if more_gpus:
        notes.append(f"{more_gpus} jobs were allocated more GPUs than they asked for (AllocTRES > ReqTRES, e.g. "
                     "--exclusive): their requested GPUs are used")
    if fallback_rows and counts["req_names_gpus"]:
        notes.append(f"{len(fallback_rows)} jobs' ReqTRES names no GPU but their AllocTRES does while other jobs' "
                     "ReqTRES name GPUs: read as asking for no GPU (whole nodes, e.g. --exclusive)")
    elif fallback_rows:
        notes.append(f"{len(fallback_rows)} jobs' ReqTRES names no GPU but their AllocTRES does (no ReqTRES in the "
                     "file names GPUs): their GPUs are AllocTRES's (an exclusive CPU job on a GPU node would be "
                     "counted with the node's GPUs)")
    if segments:
        notes.append(f"{len(segments)} earlier runs (sacct -D rows ended PREEMPTED, REQUEUED or NODE_FAIL) of "
                     f"{len(first_of)} requeued jobs: each such job is its last row, submitted (and eligible) "
                     "when its first run was")
    if het:
        notes.append(f"{het} heterogeneous-job components kept as separate jobs")
    if renumber:
        notes.append(f"{len(renumber)} repeated job ids renumbered above the largest id (duplicate_ids=renumber)")
    if "recorded_nodes" in columns:
        notes.append("NodeList -> recorded_nodes (node ids: the names' numbers, from 0; see datasets.hostlist)")
    wl = Workload.from_arrays(
        name or p.name.split(".")[0], submit=submit - t0, runtime=np.array(rec["runtime"]),
        procs=np.array(rec["procs"], dtype=np.int64), requested_time=np.array(rec["req"]),
        job_id=np.array(rec["job_id"], dtype=np.int64), user=rec["user"], group=rec["account"],
        partition=rec["partition"], status=rec["status"], columns=columns,
        header=header, notes=notes, source=str(p),
        dropped={k: v for k, v in (("job_steps", skipped_steps), ("never_started", dropped_unstarted),
                                   ("still_running", dropped_running)) if v})
    return wl.sorted()


def _array_throttle(text: str, where: str) -> int:
    """The ``%k`` of an array JobID's bracket (``[5-9%2]`` -> 2); a bad one is a `SacctError`."""
    body = text.strip("[]")
    _, _, k = body.rpartition("%")
    if not k.isascii() or not k.isdigit() or len(k) > 9 or int(k) < 1:
        raise SacctError(f"{where}: field JobID: {text[:40]!r}: the array throttle after '%' is not a whole "
                         "number >= 1")
    return int(k)


# ---------------------------------------------------------------------------------------- writing
def format_hostlist(nodes: Iterable[int], prefix: str = "n") -> str:
    """Node ids -> a Slurm hostlist (``[0, 1, 2, 5]`` -> ``n[0-2,5]``; one node -> ``n5``)."""
    ids = sorted({int(x) for x in nodes})
    if not ids:
        return "None assigned"
    if len(ids) == 1:
        return f"{prefix}{ids[0]}"
    ranges = []
    a = b = ids[0]
    for x in ids[1:]:
        if x == b + 1:
            b = x
            continue
        ranges.append(f"{a}-{b}" if b > a else f"{a}")
        a = b = x
    ranges.append(f"{a}-{b}" if b > a else f"{a}")
    return f"{prefix}[{','.join(ranges)}]"


def _parse_ranges(text: str) -> list[int]:
    """``"0-3,8"`` (jobs.csv compact ranges) -> ``[0, 1, 2, 3, 8]``."""
    out: list[int] = []
    if not isinstance(text, str) or not text.strip():
        return out
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return out


def _iso(epoch: float) -> str:
    if epoch is None or not math.isfinite(epoch):
        return "Unknown"
    return datetime.fromtimestamp(round(epoch), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


_STATUS_TO_STATE = {1: "COMPLETED", 0: "FAILED", 5: "CANCELLED"}


def export_sacct(jobs_df: pd.DataFrame, path: str | os.PathLike, epoch: float = 0.0,
                 node_prefix: str = "n", names: dict[str, list[str]] | None = None) -> int:
    """Write a simulated schedule (a jobs.csv table) as a ``sacct -P`` dump; returns rows written.

    ``jobs_df`` needs ``job_id``, ``submit``, ``start``, ``end``, ``procs`` (s, relative times) and
    may have ``timelimit`` (a run's; or ``requested_time``), ``state`` (a run's Slurm states, with
    the log's SWF code in ``log_status`` for jobs that COMPLETED in the run), ``status`` (SWF codes,
    or an older run's ``"killed"``/``"completed"``), ``killed`` (bool: State TIMEOUT), ``nodes``
    (compact ranges ``"0-3,8"``: NodeList), ``user``/``group``/``partition``/``qos`` ints (mapped
    through ``names["Users"|"Accounts"|"Partitions"|"QOSs"]`` lists when given). ``epoch``: the Unix
    time of relative time 0 (``header["UnixStartTime"]``). Jobs never started are written as
    PENDING with Start/End ``Unknown``, Elapsed 0 and NodeList ``None assigned``. Eligible is the
    run's ``eligible`` (a run with dependencies, `twin.dependencies`), else the submit time. Those the run
    withdrew while waiting (``state`` CANCELLED, never started) as sacct shows a job cancelled while
    pending: Start ``None``, End the cancel time (``cancel_time``, s relative; ``Unknown`` in a table
    without it, e.g. one written before the twin recorded it), Elapsed ``00:00:00``, NodeList ``None
    assigned``, State CANCELLED (sacct's "by <uid>" is left off: the twin has no canceller uid); a
    CANCELLED job that ran before a requeue keeps the run's Start/End/NodeList (its first start to its
    last segment's end: one row, where sacct ``--duplicates`` would show a REQUEUED record and a
    cancelled pending one).
    Slurm's side: ``src/slurmctld/job_mgr.c`` ``job_signal()`` sets a pending job's
    ``start_time = end_time = now``, but ``as_mysql_job_complete()`` stores only ``time_end``, so the
    row keeps ``time_start`` 0 and ``as_mysql_jobacct_process.c`` ``_cluster_get_jobs()`` reports
    elapsed 0 and start ``NO_VAL``, printed ``None`` (``src/common/parse_time.c``; see
    `hpctwin.twin.control.EngineControl.cancel`). Times are written in UTC, rounded to whole seconds,
    so a dump read back with `read_sacct` reproduces submit/start/runtime to the second (and drops
    the never-started rows, PENDING and CANCELLED alike, as jobs that never ran).
    """
    need = ("job_id", "submit", "start", "end", "procs")
    missing = [c for c in need if c not in jobs_df.columns]
    if missing:
        raise ValueError(f"export_sacct: jobs table lacks column(s) {', '.join(missing)}")
    names = names or {}
    fields = ["JobID", "JobIDRaw", "Submit", "Eligible", "Start", "End", "Elapsed", "Timelimit",
              "NNodes", "NCPUS", "NodeList"]
    opt = [("user", "User", "Users"), ("group", "Account", "Accounts"),
           ("partition", "Partition", "Partitions"), ("qos", "QOS", "QOSs")]
    present = [(c, f, k) for c, f, k in opt if c in jobs_df.columns]
    fields += [f for _, f, _ in present] + ["State"]
    out = ["|".join(fields)]
    df = jobs_df
    n = len(df)
    limit_col = "timelimit" if "timelimit" in df else "requested_time"
    req = df[limit_col].to_numpy(dtype=float) if limit_col in df else np.full(n, np.nan)
    # a run's jobs.csv: Slurm states in `state` (older runs: "killed"/"completed" in `status`) and
    # the log's SWF code in log_status
    run_state = df["state"].astype(str).to_numpy() if "state" in df else None
    st_col = df["status"] if "status" in df else None
    import pandas as pd  # noqa: PLC0415
    text_status = st_col is not None and not pd.api.types.is_numeric_dtype(st_col)
    node_fail = run_state == "NODE_FAIL" if run_state is not None else np.zeros(n, dtype=bool)
    # withdrawn while waiting (EngineControl.cancel, Slurm's scancel of a pending job): never started
    cancelled = run_state == "CANCELLED" if run_state is not None else np.zeros(n, dtype=bool)
    if "killed" in df:
        killed = df["killed"].to_numpy(dtype=bool)
    elif run_state is not None:
        killed = run_state == "TIMEOUT"
    elif text_status:
        killed = (st_col.astype(str) == "killed").to_numpy()
    else:
        killed = np.zeros(n, dtype=bool)
    if "log_status" in df:
        status = df["log_status"].to_numpy(dtype=float)
    elif st_col is not None and not text_status:
        status = st_col.to_numpy(dtype=float)
    else:
        status = np.full(n, 1.0)
    nodes_col = df["nodes"].to_numpy() if "nodes" in df else np.full(n, "", dtype=object)
    ids = df["job_id"].to_numpy()
    sub = df["submit"].to_numpy(dtype=float)
    st = df["start"].to_numpy(dtype=float)
    en = df["end"].to_numpy(dtype=float)
    cancel_t = df["cancel_time"].to_numpy(dtype=float) if "cancel_time" in df else np.full(n, np.nan)
    # a run with dependencies has each job's eligible time (twin.dependencies): sacct's Eligible
    elig_col = df["eligible"].to_numpy(dtype=float) if "eligible" in df else np.full(n, np.nan)
    pr = df["procs"].to_numpy()
    extra = {c: df[c].to_numpy() for c, _, _ in present}
    for i in range(n):
        started = math.isfinite(st[i])
        if not started:
            state = "CANCELLED" if cancelled[i] else "PENDING"
        elif cancelled[i]:       # ran a segment, was requeued, then withdrawn while waiting again
            state = "CANCELLED"
        elif killed[i]:
            state = "TIMEOUT"
        elif node_fail[i]:
            state = "NODE_FAIL"
        else:
            state = _STATUS_TO_STATE.get(int(status[i]) if np.isfinite(status[i]) else 1, "COMPLETED")
        if started:
            times = [_iso(epoch + st[i]), _iso(epoch + en[i]) if math.isfinite(en[i]) else "Unknown",
                     format_slurm_duration(round(epoch + en[i]) - round(epoch + st[i]))
                     if math.isfinite(en[i]) else "00:00:00"]
        elif cancelled[i]:       # sacct of a job cancelled while pending: no start, End = the cancel
            times = ["None", _iso(epoch + cancel_t[i]), "00:00:00"]
        else:
            times = ["Unknown", "Unknown", "00:00:00"]
        elig = elig_col[i] if math.isfinite(elig_col[i]) else sub[i]
        row = [str(int(ids[i])), str(int(ids[i])), _iso(epoch + sub[i]), _iso(epoch + elig), *times,
               format_slurm_duration(req[i]), str(int(pr[i])), str(int(pr[i])),
               format_hostlist(_parse_ranges(nodes_col[i]), node_prefix) if started else "None assigned"]
        for c, _, k in present:
            v = extra[c][i]
            tab = names.get(k)
            iv = int(v) if v is not None and np.isfinite(v) else -1
            row.append(tab[iv] if tab and 0 <= iv < len(tab) else (str(iv) if iv >= 0 else ""))
        row.append(state)
        out.append("|".join(row))
    Path(path).write_text("\n".join(out) + "\n")
    return n
