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
import itertools
import math
import os
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hpctwin.twin.workload import Workload

from .textio import read_text

if TYPE_CHECKING:
    import pandas as pd

FIELDS = ("job", "submit", "wait", "run", "alloc_procs", "avg_cpu", "used_mem", "req_procs",
          "req_time", "req_mem", "status", "user", "group", "exe", "queue", "partition",
          "prec_job", "think")
#: fields whose value may be fractional (all others must be integers)
_FLOAT_OK = {"avg_cpu"}
#: fields in seconds: their magnitude is bounded by `MAX_SECONDS`
_TIME_FIELDS = {"submit", "wait", "run", "avg_cpu", "req_time", "think"}
#: fields whose only negative value is -1 ("unknown"); another negative value skips the line (counted in
#: ``Workload.dropped["negative_value"]``; ``strict`` refuses it). Not here: submit (a negative submit
#: other than -1 is an error), run (a run time <= 0 is the run's ``runtime_le_0`` skip), status (some logs,
#: Sandia-Ross, hold exit codes there)
_NONNEGATIVE = ("job", "wait", "alloc_procs", "avg_cpu", "used_mem", "req_procs", "req_time", "req_mem",
                "user", "group", "exe", "queue", "partition", "prec_job", "think")
#: largest accepted time (s): about 3,170 years; float64 keeps 1e-5 s resolution up to there.
MAX_SECONDS = 1e11
#: integer fields are held as int64
_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1
#: a job line of 18 numbers is a few hundred characters; longer lines go to the exact line parser
_LONG_LINE = 4096
_NUM_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")   # ASCII digits only
_DIGITS_RE = re.compile(r"[+-]?[0-9]+\Z")
#: a header value's leading integer, followed by its end, a space or "(" ("338 (batch partition)");
#: "128abc" or "1\xff28" are not integers (a leading "1" must not be read out of a damaged value)
_INT_RE = re.compile(r"\s*([+-]?[0-9]+)(?=\s|\(|\Z)")
_HOSTS_RE = re.compile(r"\{([0-9]+(?:,[0-9]+)*)?\}\Z")


class SWFError(ValueError):
    """A malformed SWF file: the message names the file, line and field."""


def _open_text(path: Path) -> str:
    return read_text(path, SWFError)


def parse_header(lines: list[str]) -> dict[str, str]:
    """``; Key: value`` comment lines -> dict (repeated keys such as ``Queue`` are joined with
    ``|``). Linear in the line length (no backtracking pattern)."""
    header: dict[str, str] = {}
    for ln in lines:
        k, v = _header_item(ln)
        if k is not None:
            header[k] = f"{header[k]}|{v}" if k in header else v
    return header


def _header_item(line: str) -> tuple[str | None, str]:
    body = line.lstrip()
    if not body.startswith(";"):
        return None, ""
    key, sep, value = body[1:].partition(":")
    key = key.strip()
    if not sep or not key or not key[0].isalpha() or not all(c.isalnum() or c in "_ " for c in key):
        return None, ""
    return key, value.strip()


def header_int(header: dict[str, str], key: str, path: Path | str = "",
               line: int | None = None) -> int | None:
    """Leading integer of a header value (``"338 (batch partition; 512 total)"`` -> 338)."""
    if key not in header:
        return None
    where = f"{path}:{line}" if line else f"{path}"
    m = _INT_RE.match(header[key])
    if not m:
        raise SWFError(f"{where}: header field {key}: {header[key][:80]!r} is not an integer")
    if len(m.group(1).lstrip("+-")) > 18:
        raise SWFError(f"{where}: header field {key}: {m.group(1)[:40]!r} is out of range")
    return int(m.group(1))


def parse_swf_token(tok: str, k: int, where: str) -> float | int:
    """One SWF field: an int for the integer fields (int64 range), a float for ``avg_cpu``;
    times finite and within `MAX_SECONDS`. Raises `SWFError` naming ``where`` (``file:line``)."""
    name = FIELDS[k]
    label = f"{where}: field {k + 1} ({name})"
    if not _NUM_RE.match(tok):
        raise SWFError(f"{label}: {tok[:40]!r} is not a number")
    exact = name not in _FLOAT_OK and _DIGITS_RE.match(tok) is not None
    if exact and len(tok.lstrip("+-")) > 19:
        v: float | int = math.inf if name in _TIME_FIELDS else 0
        if name not in _TIME_FIELDS:
            raise SWFError(f"{label}: {tok[:40]!r} is out of range for a 64-bit integer")
    else:
        v = int(tok) if exact else float(tok)
    if not exact and not math.isfinite(v):
        raise SWFError(f"{label}: {tok[:40]!r} is not finite")
    if name in _TIME_FIELDS and abs(v) > MAX_SECONDS:
        raise SWFError(f"{label}: {tok[:40]!r} s is beyond {MAX_SECONDS:g} s (about 3,170 years)")
    if name in _FLOAT_OK:
        return v
    if v != int(v):
        raise SWFError(f"{label}: {tok[:40]!r} is not an integer")
    if not (_INT64_MIN <= int(v) <= _INT64_MAX):
        raise SWFError(f"{label}: {tok[:40]!r} is out of range for a 64-bit integer")
    return int(v)


def _parse_lines(path: Path, lines: list[str], data_lineno: np.ndarray, extra: int = 0
                 ) -> tuple[dict[str, np.ndarray], list[list[str]]]:
    """Exact line-by-line parser (linear in the input size): the 18 fields of every job line
    (ints as int64, times as float64) and the ``extra`` trailing tokens of each line."""
    n = len(data_lineno)
    want = len(FIELDS) + extra
    vals: list[list] = []
    tails: list[list[str]] = []
    for ln_no in data_lineno.tolist():
        body = lines[ln_no - 1].split(";", 1)[0]
        toks = body.split()
        if len(toks) != want:
            kind = " (Alea extended SWF: 18 fields, hosts, queue, properties)" if extra else ""
            raise SWFError(f"{path}:{ln_no}: expected {want} fields{kind}, found {len(toks)}: {body.strip()[:80]!r}")
        where = f"{path}:{ln_no}"
        vals.append([parse_swf_token(t, k, where) for k, t in enumerate(toks[: len(FIELDS)])])
        if extra:
            tails.append(toks[len(FIELDS):])
    cols: dict[str, np.ndarray] = {}
    for k, name in enumerate(FIELDS):
        kind = np.float64 if (name in _TIME_FIELDS or name in _FLOAT_OK) else np.int64
        cols[name] = np.fromiter((row[k] for row in vals), dtype=kind, count=n)
    return cols, tails


def _loadtxt_integers(text: str, lines: list[str] | None = None) -> np.ndarray | None:
    """The table as float64 when every token is a decimal integer below 2**53 in magnitude, parsed as
    int64 (numpy's integer parser is ~4x faster than its float parser; every such integer converts to
    float64 exactly, so the values are those the float parse gives); None when a token is not an
    integer, or when the text holds ``-0`` (the float parse keeps the sign of a ``-0`` time). ``lines``:
    the text's lines, parsed instead of a copy of it (`_parse_fast`)."""
    if "-0" in text:
        return None
    try:
        ints = np.loadtxt(io.StringIO(text) if lines is None else lines, dtype=np.int64, comments=";", ndmin=2,
                          quotechar=None)
    except (ValueError, OverflowError):
        return None
    if ints.size and (ints.max() >= 2 ** 53 or ints.min() <= -2 ** 53):   # float64 would round it
        return None
    return ints.astype(np.float64)


def _parse_fast(text: str, n: int, lines: list[str] | None = None) -> dict[str, np.ndarray] | None:
    """numpy's C text parser (``np.loadtxt``: whitespace-separated, ``;`` comments, blank lines
    skipped; as fast as pandas' and without importing it); None when any line needs the exact
    parser (wrong field count, a token that is not a finite number, a fractional integer, an integer
    beyond 2**53, a huge time). ``lines``: ``text.split("\n")`` when the caller has it (numpy then parses
    the lines, without the 4-byte-a-character copy a StringIO of the text makes)."""
    arr = _loadtxt_integers(text, lines)
    if arr is None:
        try:
            arr = np.loadtxt(io.StringIO(text) if lines is None else lines, dtype=np.float64, comments=";",
                             ndmin=2, quotechar=None)
        except ValueError:
            return None
    if arr.shape != (n, len(FIELDS)) or not np.isfinite(arr).all():
        return None
    cols: dict[str, np.ndarray] = {}
    for k, name in enumerate(FIELDS):
        a = arr[:, k]
        if name in _TIME_FIELDS and np.abs(a).max(initial=0.0) > MAX_SECONDS:
            return None
        if name in _FLOAT_OK or name in _TIME_FIELDS:
            if name not in _FLOAT_OK and not np.array_equal(a, np.round(a)):
                return None
            cols[name] = a.copy()
        else:
            if np.abs(a).max(initial=0.0) >= 2.0 ** 53 or not np.array_equal(a, np.round(a)):
                return None
            cols[name] = a.astype(np.int64)
    return cols


def _alea_hosts(path: Path, tails: list[list[str]], data_lineno: np.ndarray) -> list[dict[int, int]]:
    """Per job, {host id: CPUs on it} from Alea's ``{h1,h1,h2,...}`` column (one id per CPU)."""
    out = []
    for toks, ln_no in zip(tails, data_lineno.tolist()):
        m = _HOSTS_RE.match(toks[0])
        if not m or (m.group(1) and any(len(x) > 18 for x in m.group(1).split(","))):
            raise SWFError(f"{path}:{ln_no}: field 19 (hosts): {toks[0][:60]!r} is not a {{id,id,...}} host list")
        out.append({int(h): c for h, c in Counter(m.group(1).split(",")).items()} if m.group(1) else {})
    return out


def read_swf_table(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, str], np.ndarray]:
    """Parse an SWF (or .swf.gz) file into a DataFrame of the 18 fields (int64 for the integer
    fields, float64 for times), the header, and the 1-based file line number of each job row.
    Raises `SWFError` naming file:line and field. Linear in the file size; a UTF-8 BOM and CRLF
    line ends are accepted. ``df.attrs`` holds ``header_lines`` (header key -> line) and, for
    Alea logs, ``alea_hosts``/``alea_queues``/``alea_props``."""
    import pandas as pd  # noqa: PLC0415
    cols, header, lineno, extra = _read_table(path)
    df = pd.DataFrame(cols)
    df.attrs.update(extra)
    return df, header, lineno


def _line_kinds(lines: list[str]) -> tuple[list[int], np.ndarray]:
    """The 0-based indices of the comment lines (first non-blank character ``;``) and the 1-based numbers
    of the data lines (not a comment, and not blank before any ``;``). Lines without ``;`` are sorted
    by C-level maps; only the few with one are looked at one by one."""
    n = len(lines)
    semi = np.flatnonzero(np.fromiter(map(str.__contains__, lines, itertools.repeat(";", n)), bool, n))
    comment_idx, semi_data = [], []
    for i in semi.tolist():
        ln = lines[i]
        if ln.lstrip().startswith(";"):
            comment_idx.append(i)
        elif ln.split(";", 1)[0].strip():
            semi_data.append(i)
    data = np.fromiter(map(len, lines), np.int64, n) > 0
    data &= ~np.fromiter(map(str.isspace, lines), bool, n)
    data[semi] = False
    data[semi_data] = True
    return comment_idx, np.flatnonzero(data).astype(np.int64) + 1


def _read_table(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, str], np.ndarray, dict]:
    """`read_swf_table`'s work, the 18 fields as {name: array}; the extras are returned apart (pandas
    deep-copies ``attrs`` on every column access, which made per-job host arrays there quadratic-looking
    in practice)."""
    path = Path(path)
    text = _open_text(path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    comment_idx, data_lineno = _line_kinds(lines)
    header_lines: dict[str, int] = {}
    for i in comment_idx:
        k, _ = _header_item(lines[i])
        if k is not None:
            header_lines.setdefault(k, i + 1)
    header = parse_header([lines[i] for i in comment_idx])
    attrs = {"header_lines": header_lines}
    if len(data_lineno) == 0:
        return {f: np.empty(0) for f in FIELDS}, header, data_lineno, attrs
    first = lines[int(data_lineno[0]) - 1].split(";", 1)[0].split()
    cols = None
    if len(first) == len(FIELDS) + 3 and first[len(FIELDS)].startswith("{"):
        tails = []
        for i in data_lineno.tolist():
            t = lines[i - 1].split(";", 1)[0].split()
            if len(t) != len(FIELDS) + 3:
                break
            tails.append(t)
        if len(tails) == len(data_lineno):     # fast path on the 18 fields, exact parser otherwise
            cols = _parse_fast("\n".join(" ".join(t[: len(FIELDS)]) for t in tails), len(tails))
            tails = [t[len(FIELDS):] for t in tails]
        if cols is None:
            cols, tails = _parse_lines(path, lines, data_lineno, extra=3)
        attrs["alea_hosts"] = _alea_hosts(path, tails, data_lineno)
        attrs["alea_queues"] = [t[1] for t in tails]
        attrs["alea_props"] = [t[2] for t in tails]
    else:
        if max(map(len, lines)) <= _LONG_LINE or max(len(lines[i - 1]) for i in data_lineno.tolist()) <= _LONG_LINE:
            cols = _parse_fast(text, len(data_lineno), lines)
        if cols is None:
            cols, _ = _parse_lines(path, lines, data_lineno)
    return cols, header, data_lineno, attrs


def _check_duplicates(path: Path, job: np.ndarray, lineno: np.ndarray, how: str) -> tuple[np.ndarray, int]:
    """Job ids must be unique: ``how="error"`` raises naming both lines; ``"renumber"`` gives each
    repeated id a new id above the largest one (returns the ids and how many were renumbered)."""
    if len(job) < 2:
        return job, 0
    order = np.argsort(job, kind="stable")
    s = job[order]
    rep = np.flatnonzero(s[1:] == s[:-1]) + 1
    if not len(rep):
        return job, 0
    if how == "error":
        later = order[rep]
        first_dup = int(later[np.argmin(lineno[later])])
        prev = int(np.flatnonzero(job == job[first_dup])[0])
        raise SWFError(f"{path}:{int(lineno[first_dup])}: field 1 (job): job id {int(job[first_dup])} repeats "
                       f"line {int(lineno[prev])} (renumber repeated ids with --set workload.duplicate_ids=renumber)")
    job = job.copy()
    later = np.sort(order[rep])
    job[later] = int(job.max()) + 1 + np.arange(len(later))
    return job, len(later)


def _line_anomalies(path: Path, col: dict[str, np.ndarray], lineno: np.ndarray, size: int | None,
                    size_desc: str) -> list[tuple[str, np.ndarray, str, str]]:
    """Job lines that make no sense but do not stop the rest of the log from being read, by class:
    ``[(reason, mask, first line's located error, note)]`` (classes with no line are left out; a line
    is counted in the first class it falls in). ``size``: the header's machine size (None: no check);
    ``size_desc``: where it comes from (``"MaxProcs (line 3)"``)."""
    out = []
    taken = np.zeros(len(lineno), dtype=bool)
    neg = np.zeros(len(lineno), dtype=bool)
    first_field = np.full(len(lineno), -1)
    for name in _NONNEGATIVE:
        a = col[name]
        bad = (a < 0) & (a != -1) & ~neg
        first_field[bad] = FIELDS.index(name)
        neg |= bad
    if neg.any():
        i = int(np.flatnonzero(neg)[0])
        k = int(first_field[i])
        v = col[FIELDS[k]][i]
        where = f"{path}:{int(lineno[i])}: field {k + 1} ({FIELDS[k]})"
        fields = sorted({FIELDS[int(x)] for x in first_field[neg]}, key=FIELDS.index)
        out.append(("negative_value", neg.copy(),
                    f"{where}: {v:g} is negative (SWF's only negative value is -1, unknown); {int(neg.sum())} "
                    "such job lines (without strict they are skipped and counted)",
                    f"{int(neg.sum())} job lines skipped: a negative value other than -1 (SWF's unknown) in "
                    f"{', '.join(fields)} (first: {where}: {v:g}); strict=true refuses such a log"))
        taken |= neg
    if size is not None:
        alloc = col["alloc_procs"]
        ran = (col["run"] > 0) & (alloc > size) & ~taken
        if ran.any():
            i = int(np.flatnonzero(ran)[0])
            where = f"{path}:{int(lineno[i])}: field 5 (alloc_procs)"
            out.append(("larger_than_header_machine", ran,
                        f"{where}: the job ran on {int(alloc[i])} processors but the header's {size_desc} says "
                        f"the machine has {size}: the header contradicts the data ({int(ran.sum())} such jobs; fix "
                        "the header, drop strict to skip and count them, or --set workload.header_check=false "
                        "to keep them for the run to judge)",
                        f"{int(ran.sum())} job lines skipped: the job ran on more processors (field 5) than the "
                        f"header's {size_desc} says the machine has ({size}) (first: {where}: {int(alloc[i])}); "
                        "strict=true refuses such a log, header_check=false keeps the lines"))
    return out


def read_swf(path: str | os.PathLike, size_field: str = "auto", name: str | None = None, *,
             duplicate_ids: str = "error", header_check: bool = True, strict: bool = False) -> Workload:
    """Read an SWF log into a `Workload` (times in seconds relative to the log's time 0).

    Refused with an `SWFError` naming file:line and field: a malformed token or line; more job lines
    than ``MaxRecords`` (or ``MaxJobs``); a header value that is not an integer or machine size; a
    negative submit time other than -1; a repeated job id (``duplicate_ids="renumber"`` gives repeats
    new ids above the largest, said in the notes).

    Skipped and counted (``Workload.dropped`` by reason, a note naming the first line), or refused as
    above when ``strict``: a job line with a negative value other than -1 (SWF's "unknown") in a field
    that cannot be negative (``negative_value``); a job that ran (run time > 0) on more processors
    (field 5) than the machine size the header gives (``larger_than_header_machine``;
    ``header_check=False`` turns this check off and keeps such lines). Other jobs are *not* filtered
    here: the run decides what to skip (runtime <= 0, too large) and counts it.

    The Alea simulator's extended SWF (MetaCentrum) has each job's hosts: with its ``.machines``
    file they fill ``columns["recorded_nodes"]`` (see `alea_placements`).
    """
    from hpctwin.twin.workload import MAX_UNITS  # noqa: PLC0415
    path = Path(path)
    if size_field not in ("auto", "requested", "allocated"):
        raise ValueError(f"size_field must be auto, requested or allocated, got {size_field!r}")
    if duplicate_ids not in ("error", "renumber"):
        raise ValueError(f"duplicate_ids must be error or renumber, got {duplicate_ids!r}")
    col, header, lineno, extra = _read_table(path)
    hl = extra.get("header_lines", {})
    n = len(lineno)
    notes: list[str] = []
    for key in ("MaxRecords", "MaxJobs"):
        limit = header_int(header, key, path, hl.get(key))
        if limit is not None and limit < 0:
            raise SWFError(f"{path}:{hl.get(key)}: header field {key}: {limit} is not a number of jobs")
        if limit is not None and n > limit:
            raise SWFError(f"{path}:{int(lineno[limit])}: header field {key} (line {hl.get(key)}) says {limit} "
                           f"job lines but this is job line {limit + 1}")
    mr = header_int(header, "MaxRecords", path, hl.get("MaxRecords"))
    if mr is not None and 0 < n < mr:
        notes.append(f"header MaxRecords says {mr} but the file has {n} job lines (a truncated copy?)")
    max_procs = header_int(header, "MaxProcs", path, hl.get("MaxProcs"))
    max_nodes = header_int(header, "MaxNodes", path, hl.get("MaxNodes"))
    if "UnixStartTime" in header:
        header_int(header, "UnixStartTime", path, hl.get("UnixStartTime"))
    for key, v in (("MaxProcs", max_procs), ("MaxNodes", max_nodes)):
        if v is not None and not 0 < v <= MAX_UNITS:
            raise SWFError(f"{path}:{hl.get(key)}: header field {key}: {v} is not a machine size "
                           f"(1 to {MAX_UNITS:,} units)")

    submit = col["submit"]
    if n and submit.min() < -1:      # -1 is SWF's "unknown"; the run skips and counts those jobs
        i = int(np.argmin(submit))
        raise SWFError(f"{path}:{int(lineno[i])}: field 2 (submit): negative submit time {submit[i]:g}")

    machines = path.with_name((path.name[:-3] if path.name.endswith(".gz") else path.name) + ".machines")
    clusters = None
    if max_procs is None and max_nodes is None and machines.exists():
        clusters = read_machines(machines)
        max_procs = sum(c[1] * c[2] for c in clusters)
        if not 0 < max_procs <= MAX_UNITS:
            raise SWFError(f"{machines}: {max_procs} processors in total is not a machine size (1 to {MAX_UNITS:,})")
        header["MaxProcs"] = str(max_procs)
        header["MachinesFile"] = str(machines)
    if max_procs is not None:
        size, src = max_procs, ("header MaxProcs" if "MachinesFile" not in header else "Alea .machines file")
        size_key = "MaxProcs"
    elif max_nodes is not None:
        size, src, size_key = max_nodes, "header MaxNodes", "MaxNodes"
    else:
        size, src, size_key = None, "", ""
    size_desc = f"{size_key} ({f'line {hl[size_key]}' if size_key in hl else machines})"
    dropped: dict[str, int] = {}
    anomalies = _line_anomalies(path, col, lineno, size if header_check else None, size_desc) if n else []
    if anomalies and strict:
        first = min(anomalies, key=lambda a: int(np.flatnonzero(a[1])[0]))
        raise SWFError(first[2])
    if anomalies:
        skip = np.zeros(n, dtype=bool)
        for reason, mask, _, note in anomalies:
            dropped[reason] = int(mask.sum())
            notes.append(note)
            skip |= mask
        keep = np.flatnonzero(~skip)
        col = {k: v[keep] for k, v in col.items()}
        lineno = lineno[keep]
        for k in ("alea_hosts", "alea_queues", "alea_props"):
            if k in extra:
                extra[k] = [extra[k][i] for i in keep.tolist()]
        submit = col["submit"]
    job_id, renumbered = _check_duplicates(path, col["job"].astype(np.int64), lineno, duplicate_ids)
    if renumbered:
        notes.append(f"{renumbered} repeated job ids renumbered above the largest id (duplicate_ids=renumber)")
    req_p = col["req_procs"].astype(np.int64)
    alloc_p = col["alloc_procs"].astype(np.int64)
    if size_field == "requested":
        procs = req_p
    elif size_field == "allocated":
        procs = alloc_p
    else:
        procs = np.where(req_p > 0, req_p, alloc_p)
    req_time = col["req_time"].astype(np.float64)
    req_time[req_time < 0] = np.nan
    size_text = ('requested processors (field 8), else allocated (field 5)' if size_field == 'auto'
                 else size_field + ' processors')
    notes += [f"job size: {size_text}",
              "requested time (field 9) is the estimate and the kill limit"]
    cols_extra: dict[str, np.ndarray] = {}
    if "alea_hosts" in extra:
        cols_extra["recorded_hosts"] = np.array([",".join(f"{x}:{c}" for x, c in sorted(h.items()))
                                                 for h in extra["alea_hosts"]], dtype=object)
        cols_extra["queue_name"] = np.array(extra["alea_queues"], dtype=object)
        if clusters is not None:
            placements, note = alea_placements(extra["alea_hosts"], extra["alea_props"], clusters)
            cols_extra["recorded_nodes"] = placements
            notes.append(note)
        else:
            notes.append("Alea host lists present but no .machines file: recorded placements unavailable")
    cols_extra.update(_feedback(path, col, lineno, notes, alea="alea_hosts" in extra))
    stem = path.name
    for suf in (".gz", ".swf"):
        if stem.endswith(suf):
            stem = stem[: -len(suf)]
    wl = Workload.from_arrays(
        name or stem,
        job_id=job_id, submit=submit, runtime=col["run"],
        requested_time=req_time, procs=procs,
        user=col["user"].astype(np.int64), group=col["group"].astype(np.int64),
        queue=col["queue"].astype(np.int64), partition=col["partition"].astype(np.int64),
        status=col["status"].astype(np.int64),
        columns={"wait_recorded": col["wait"], "alloc_procs": alloc_p, "req_procs": req_p,
                 "avg_cpu": col["avg_cpu"], "used_mem": col["used_mem"].astype(np.float64),
                 "req_mem": col["req_mem"].astype(np.float64),
                 "executable": col["exe"].astype(np.int64), "line": lineno, **cols_extra},
        machine_size=size, machine_size_source=src, header=header, notes=notes, source=str(path),
        dropped=dropped,
    )
    return wl


def _feedback(path: Path, col: dict, lineno: np.ndarray, notes: list[str], alea: bool) -> dict[str, np.ndarray]:
    """Fields 17 (preceding job number) and 18 (think time, s) as a dependency (`twin.dependencies`):
    SWF's feedback, "the current job can only start after the termination of this preceding job", and
    is submitted the think time after that termination. The twin keeps the log's submit time (the wait
    stays start - submit) and makes the job eligible ``afterany`` its preceding job, the think time
    (``dependency_delay``; -1 = 0) after that job's end. A preceding job not in the run lifts the
    dependency (as Slurm's "job is gone"). A preceding job number that is not an earlier job (SWF: "a
    previous job in the workload") is a located error. Alea's extended logs use fields 17-18 otherwise:
    ignored there (said in the notes). {} when no job names a preceding job."""
    prec, think, job = col["prec_job"], col["think"], col["job"]
    has = prec >= 0
    if not has.any():
        return {}
    if alea:
        notes.append("fields 17-18 (preceding job, think time) of an Alea extended log are not SWF's feedback "
                     "fields here: ignored")
        return {}
    bad = has & (prec >= job)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise SWFError(f"{path}:{int(lineno[i])}: field 17 (prec_job): job {int(job[i])} names preceding job "
                       f"{int(prec[i])}, which is not an earlier job (SWF: the number of a previous job; -1 for none)")
    dep = np.array([f"afterany:{int(x)}" if x >= 0 else "" for x in prec.tolist()], dtype=object)
    delay = np.where(has & (think > 0), think, 0.0).astype(np.float64)
    notes.append(f"fields 17-18: {int(has.sum())} jobs wait for their preceding job's end plus the think time "
                 "(dependency afterany, dependency_delay)")
    return {"dependency": dep, "dependency_delay": delay}


def read_machines(path: Path) -> list[tuple[str, int, int]]:
    """An Alea ``.machines`` file: one cluster a line, ``id name nodes cpus_per_node speed ram``
    -> [(name, nodes, cpus_per_node)] in file order."""
    out = []
    for i, row in enumerate(read_text(path, SWFError).split("\n"), start=1):
        t = row.split()
        if not t:
            continue
        if len(t) < 4 or not (_DIGITS_RE.match(t[2]) and _DIGITS_RE.match(t[3])) or int(t[2]) < 1 or int(t[3]) < 1 \
                or len(t[2]) > 9 or len(t[3]) > 9:
            raise SWFError(f"{path}:{i}: expected 'id name nodes cpus_per_node speed ram' with positive "
                           f"integer nodes and CPUs, got {row.strip()[:80]!r}")
        out.append((t[1], int(t[2]), int(t[3])))
    if not out:
        raise SWFError(f"{path}: empty .machines file")
    return out


def alea_placements(hosts: list[dict[int, int]], props: list[str], clusters: list[tuple[str, int, int]]
                    ) -> tuple[np.ndarray, str]:
    """Recorded placements of an Alea log as `HostRequest` objects (units are processors).

    Alea numbers hosts globally and lists one host id per CPU of a job. Each host is given to a
    cluster of the ``.machines`` file: the cluster a ``cl_NAME`` property of a job on it names
    (the PBS/MetaCentrum convention), else the only cluster whose nodes have enough CPUs for the
    most CPUs one job used on it. Hosts of a cluster take its node slots in increasing id order;
    node slot ``s`` of cluster ``k`` holds processors ``offset_k + s * cpus_k ...``. A job whose
    host cannot be placed that way has no recorded placement (None); the note says how many.
    """
    from hpctwin.twin.workload import HostRequest  # noqa: PLC0415
    names = [c[0] for c in clusters]
    label: dict[int, set] = {}
    most: dict[int, int] = {}
    for h, pr in zip(hosts, props):
        tags = {tok.split("#")[0][3:] for tok in pr.split(":") if tok.startswith("cl_")} if "cl_" in pr else ()
        for x, c in h.items():
            most[x] = max(most.get(x, 0), c)
            if tags:
                label.setdefault(x, set()).update(t for t in tags if t in names)
    assign: dict[int, int] = {}
    for x in sorted(most):
        lab = label.get(x, set())
        if len(lab) == 1:
            assign[x] = names.index(next(iter(lab)))
        elif not lab:
            fits = [k for k, c in enumerate(clusters) if c[2] >= most[x]]
            if len(fits) == 1:
                assign[x] = fits[0]
    offsets = np.cumsum([0] + [c[1] * c[2] for c in clusters])
    units: dict[int, np.ndarray] = {}
    for k, (_, nodes, cpn) in enumerate(clusters):
        members = sorted(x for x, kk in assign.items() if kk == k)
        for s, x in enumerate(members[:nodes]):
            if most[x] <= cpn:
                units[x] = offsets[k] + s * cpn + np.arange(cpn, dtype=np.int64)
    out = np.empty(len(hosts), dtype=object)
    usable = 0
    for j, h in enumerate(hosts):
        out[j] = None
        if h and all(x in units for x in h):
            ids = sorted(h)
            out[j] = HostRequest(tuple(units[x] for x in ids), tuple(h[x] for x in ids))
            usable += 1
    note = (f"recorded placements: {usable} of {len(hosts)} jobs have Alea hosts mapped to processors "
            f"({len(units)} of {len(most)} hosts placed on the {', '.join(names)} clusters of the .machines file)")
    return out, note


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
