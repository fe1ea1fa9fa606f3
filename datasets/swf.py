"""Standard Workload Format (SWF) reader and writer (Parallel Workloads Archive, version 2.2).

An SWF file has header comment lines (``; Key: value``) and one line per job with 18
whitespace-separated fields (Feitelson's definition, https://www.cs.huji.ac.il/labs/parallel/workload/swf.html):

 1 job number, 2 submit time (s), 3 wait time (s), 4 run time (s), 5 allocated processors,
 6 average CPU time used (s), 7 used memory (KB), 8 requested processors, 9 requested time (s),
 10 requested memory (KB), 11 status (1 completed, 0 failed, 5 cancelled), 12 user id, 13 group id,
 14 executable id, 15 queue id, 16 partition id, 17 preceding job, 18 think time (s).
-1 means "unknown".

Conventions of this reader (stated in every run summary through ``Workload.notes``):

* Job size: the requested processors (field 8) when known, else the allocated processors (field 5)
  (``size_field="auto"``); ``"requested"`` or ``"allocated"`` force one field.
* Requested time (field 9) is the user's estimate and the kill limit; -1 becomes NaN.
* Machine size: header ``MaxProcs``, else ``MaxNodes`` (the leading integer of the value).
* Times stay relative to the log's time 0, as in the file; ``UnixStartTime`` is kept in the header.
"""
from __future__ import annotations

import gzip
import io
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from hpctwin.twin.workload import Workload

from .textio import read_text

FIELDS = ("job", "submit", "wait", "run", "alloc_procs", "avg_cpu", "used_mem", "req_procs",
          "req_time", "req_mem", "status", "user", "group", "exe", "queue", "partition",
          "prec_job", "think")
#: fields whose value must be an integer (all but average CPU time)
_FLOAT_OK = {"avg_cpu"}
_HEADER_RE = re.compile(r"^;\s*([A-Za-z][A-Za-z0-9_ ]*?)\s*:\s*(.*?)\s*$")
_INT_RE = re.compile(r"^\s*(-?\d+)")


class SWFError(ValueError):
    """A malformed SWF file: the message names the file, line and field."""


def _open_text(path: Path) -> str:
    return read_text(path, SWFError)


def parse_header(lines: list[str]) -> dict[str, str]:
    """``; Key: value`` comment lines -> dict (first occurrence wins; repeated keys such as
    ``Queue`` are joined with ``|``)."""
    header: dict[str, str] = {}
    for ln in lines:
        m = _HEADER_RE.match(ln)
        if m:
            k, v = m.group(1).strip(), m.group(2)
            header[k] = f"{header[k]}|{v}" if k in header else v
    return header


def header_int(header: dict[str, str], key: str, path: Path | str = "") -> int | None:
    """Leading integer of a header value (``"338 (batch partition; 512 total)"`` -> 338)."""
    if key not in header:
        return None
    m = _INT_RE.match(header[key])
    if not m:
        raise SWFError(f"{path}: header field {key}: {header[key]!r} is not an integer")
    return int(m.group(1))


def _locate_bad_line(path: Path, text: str) -> None:
    """Slow path: find the first malformed job line and raise an SWFError naming it."""
    for lineno, ln in enumerate(text.splitlines(), start=1):
        s = ln.strip()
        if not s or s.startswith(";"):
            continue
        toks = s.split()
        if len(toks) != len(FIELDS):
            raise SWFError(f"{path}: line {lineno}: expected {len(FIELDS)} fields, found {len(toks)}: {s[:80]!r}")
        for k, (name, tok) in enumerate(zip(FIELDS, toks), start=1):
            try:
                v = float(tok)
            except ValueError:
                raise SWFError(f"{path}: line {lineno}: field {k} ({name}): {tok!r} is not a number") from None
            if not np.isfinite(v):
                raise SWFError(f"{path}: line {lineno}: field {k} ({name}): {tok!r} is not finite")
            if name not in _FLOAT_OK and v != int(v):
                raise SWFError(f"{path}: line {lineno}: field {k} ({name}): {tok!r} is not an integer")
    raise SWFError(f"{path}: could not parse job lines")  # pragma: no cover - defensive


def _read_alea(path: Path, lines: list[str], data_lineno: np.ndarray) -> pd.DataFrame:
    """The Alea simulator's extended SWF: the 18 fields, then the assigned node ids in braces
    (one per CPU), the queue name and the node-property request (21 columns, no header)."""
    rows, hosts, queues = [], [], []
    for ln_no in data_lineno.tolist():
        toks = lines[ln_no - 1].split()
        if len(toks) != len(FIELDS) + 3:
            raise SWFError(f"{path}: line {ln_no}: expected {len(FIELDS) + 3} fields (Alea extended SWF), "
                           f"found {len(toks)}")
        try:
            rows.append([float(x) for x in toks[: len(FIELDS)]])
        except ValueError:
            _locate_bad_line(path, "\n".join(" ".join(lines[i - 1].split()[: len(FIELDS)]) if i == ln_no else ""
                                             for i in range(1, ln_no + 1)))
        hosts.append(toks[len(FIELDS)].strip("{}"))
        queues.append(toks[len(FIELDS) + 1])
    df = pd.DataFrame(rows, columns=list(FIELDS), dtype=np.float64)
    df.attrs["alea_hosts"] = hosts
    df.attrs["alea_queues"] = queues
    return df


def read_swf_table(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, str], np.ndarray]:
    """Parse an SWF (or .swf.gz) file into a DataFrame of the 18 fields (float64), the header,
    and the 1-based file line number of each job row. Raises `SWFError` naming file/line/field."""
    path = Path(path)
    text = _open_text(path)
    lines = text.splitlines()
    is_comment = [ln.lstrip().startswith(";") for ln in lines]
    header = parse_header([ln for ln, c in zip(lines, is_comment) if c])
    data_lineno = np.array([i + 1 for i, (ln, c) in enumerate(zip(lines, is_comment))
                            if not c and ln.strip()], dtype=np.int64)
    if len(data_lineno) == 0:
        return pd.DataFrame({f: np.empty(0) for f in FIELDS}), header, data_lineno
    first = lines[int(data_lineno[0]) - 1].split()
    if len(first) == len(FIELDS) + 3 and first[len(FIELDS)].startswith("{"):
        return _read_alea(path, lines, data_lineno), header, data_lineno
    try:
        df = pd.read_csv(io.StringIO(text), sep=r"\s+", comment=";", header=None, names=FIELDS,
                         dtype=np.float64, engine="c", skip_blank_lines=True)
    except (ValueError, pd.errors.ParserError):
        _locate_bad_line(path, text)
        raise  # pragma: no cover
    arr = df.to_numpy()
    if len(df) != len(data_lineno) or np.isnan(arr).any():
        _locate_bad_line(path, text)
    ints = np.delete(arr, FIELDS.index("avg_cpu"), axis=1)
    if not np.array_equal(ints, np.round(ints)):
        _locate_bad_line(path, text)
    return df, header, data_lineno


def read_swf(path: str | os.PathLike, size_field: str = "auto", name: str | None = None) -> Workload:
    """Read an SWF log into a `Workload` (times in seconds relative to the log's time 0).

    Checks that the header agrees with the data: more job lines than ``MaxRecords`` (or
    ``MaxJobs``), a negative submit time, or submit times out of order by more than the file's own
    sorting are errors naming the line and field. Jobs are *not* filtered here: the run decides what
    to skip (runtime <= 0, too large) and counts it.
    """
    path = Path(path)
    if size_field not in ("auto", "requested", "allocated"):
        raise ValueError(f"size_field must be auto, requested or allocated, got {size_field!r}")
    df, header, lineno = read_swf_table(path)
    n = len(df)
    for key in ("MaxRecords", "MaxJobs"):
        limit = header_int(header, key, path)
        if limit is not None and n > limit:
            raise SWFError(f"{path}: header field {key} says {limit} but the file has {n} job lines "
                           f"(line {int(lineno[limit])} is job line {limit + 1})")
    max_procs = header_int(header, "MaxProcs", path)
    max_nodes = header_int(header, "MaxNodes", path)
    if "UnixStartTime" in header:
        header_int(header, "UnixStartTime", path)
    for key, v in (("MaxProcs", max_procs), ("MaxNodes", max_nodes)):
        if v is not None and v <= 0:
            raise SWFError(f"{path}: header field {key}: {v} is not a positive machine size")

    col = {f: df[f].to_numpy() for f in FIELDS}
    submit = col["submit"]
    if n and submit.min() < -1:      # -1 is SWF's "unknown"; the run skips and counts those jobs
        i = int(np.argmin(submit))
        raise SWFError(f"{path}: line {int(lineno[i])}: field 2 (submit): negative submit time {submit[i]:g}")
    req_p = col["req_procs"].astype(np.int64)
    alloc_p = col["alloc_procs"].astype(np.int64)
    if size_field == "requested":
        procs = req_p
    elif size_field == "allocated":
        procs = alloc_p
    else:
        procs = np.where(req_p > 0, req_p, alloc_p)
    req_time = col["req_time"].copy()
    req_time[req_time < 0] = np.nan

    machines = path.with_name((path.name[:-3] if path.name.endswith(".gz") else path.name) + ".machines")
    if max_procs is None and max_nodes is None and machines.exists():
        try:
            cpus = [int(r.split()[2]) * int(r.split()[3]) for r in machines.read_text().splitlines() if r.strip()]
        except (ValueError, IndexError):
            raise SWFError(f"{machines}: expected 'id name nodes cpus_per_node speed ram' per line") from None
        max_procs = sum(cpus)
        header["MaxProcs"] = str(max_procs)
        header["MachinesFile"] = str(machines)
    if max_procs is not None:
        size, src = max_procs, ("header MaxProcs" if "MachinesFile" not in header else "Alea .machines file")
    elif max_nodes is not None:
        size, src = max_nodes, "header MaxNodes"
    else:
        size, src = None, ""
    notes = [f"job size: {'requested processors (field 8), else allocated (field 5)' if size_field == 'auto' else size_field + ' processors'}",
             "requested time (field 9) is the estimate and the kill limit"]
    stem = path.name
    for suf in (".gz", ".swf"):
        if stem.endswith(suf):
            stem = stem[: -len(suf)]
    wl = Workload.from_arrays(
        name or stem,
        job_id=col["job"].astype(np.int64), submit=submit, runtime=col["run"],
        requested_time=req_time, procs=procs,
        user=col["user"].astype(np.int64), group=col["group"].astype(np.int64),
        queue=col["queue"].astype(np.int64), partition=col["partition"].astype(np.int64),
        status=col["status"].astype(np.int64),
        columns={"wait_recorded": col["wait"], "alloc_procs": alloc_p, "req_procs": req_p,
                 "avg_cpu": col["avg_cpu"], "used_mem": col["used_mem"], "req_mem": col["req_mem"],
                 "executable": col["exe"].astype(np.int64), "line": lineno,
                 **({"recorded_hosts": np.array(df.attrs["alea_hosts"], dtype=object),
                     "queue_name": np.array(df.attrs["alea_queues"], dtype=object)}
                    if "alea_hosts" in df.attrs else {})},
        machine_size=size, machine_size_source=src, header=header, notes=notes, source=str(path),
    )
    return wl


def write_swf(workload: Workload, path: str | os.PathLike, header: dict[str, str] | None = None,
              start: np.ndarray | None = None) -> None:
    """Write a workload as SWF v2.2. ``start`` (s, optional) fills the wait field with start - submit.

    The file is written to a temporary name and renamed, so an interrupted write never leaves a file
    that looks complete.
    """
    path = Path(path)
    n = len(workload)
    c = workload.columns

    def colv(name, default=-1):
        return c[name] if name in c else np.full(n, default)

    wait = (np.where(np.isnan(start), -1, start - workload.submit) if start is not None
            else colv("wait_recorded"))
    req_time = np.where(np.isnan(workload.requested_time), -1, workload.requested_time)
    fields = [workload.job_id, workload.submit, wait, workload.runtime,
              colv("alloc_procs", None) if "alloc_procs" in c else workload.procs,
              colv("avg_cpu"), colv("used_mem"), workload.procs, req_time, colv("req_mem"),
              workload.status, workload.user, workload.group, colv("executable"), workload.queue,
              workload.partition, np.full(n, -1), np.full(n, -1)]
    mat = np.column_stack([np.asarray(f, dtype=np.float64) for f in fields])
    hdr = dict(workload.header)
    hdr.update(header or {})
    hdr.setdefault("Version", "2.2")
    if workload.machine_size:
        hdr.setdefault("MaxProcs", str(workload.machine_size))
    hdr["MaxJobs"] = str(n)
    hdr["MaxRecords"] = str(n)
    out = io.StringIO()
    for k, v in hdr.items():
        for part in str(v).split("|"):
            out.write(f"; {k}: {part}\n")

    def fmt(x: float) -> str:
        return str(int(x)) if x == int(x) else f"{x:.2f}"

    for row in mat:
        out.write(" ".join(fmt(x) for x in row))
        out.write("\n")
    data = out.getvalue().encode()
    tmp = path.with_name(path.name + ".tmp")
    if path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    tmp.write_bytes(data)
    os.replace(tmp, path)
