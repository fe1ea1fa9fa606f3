"""Readers for LLM serving request traces: one `ServingRequest` per request, in trace order.

Formats (all read in place from ``../shared/datasets/LLM-serving/``, gzip accepted everywhere):

* LLMServingSim workloads (``workloads/sharegpt-*.jsonl[.gz]``): one JSON object a line with
  ``input_toks``, ``output_toks``, ``arrival_time_ns`` (ns from the start of the run) and
  ``input_tok_ids`` (the prompt's token ids, used for prefix-cache block hashes).
* Azure LLM inference 2023 (``AzureLLMInferenceTrace_{code,conv}.csv``): ``TIMESTAMP`` (wall clock,
  ``YYYY-MM-DD HH:MM:SS.fffffff``), ``ContextTokens``, ``GeneratedTokens``; arrivals are made
  relative to the first request.
* Mooncake (``conversation_trace.jsonl.gz`` ...): ``timestamp`` (ms), ``input_length``,
  ``output_length``, ``hash_ids`` (one id per 512-token prompt block; kept as ``block_hashes``).

Times are seconds. A malformed line raises `ServingTraceError` naming the file, line and field. Every
field read is checked: token counts are whole numbers (``10.7``, ``true`` and ``"12"`` are refused) within
`MAX_TOKENS`; times are finite, non-negative and at most `MAX_SPAN_S` (10 years) after the trace's zero;
the text is UTF-8 (gzip accepted); a trace without a request is refused unless the reader is called with
``allow_empty=True``. Keys or columns the reader does not use are ignored.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import math
import zlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from hpctwin.twin.schema import shown_value

from .textio import check_input_path


class ServingTraceError(ValueError):
    """A serving trace is missing or malformed (the message names the file, line and field)."""


#: arrivals may lie at most this far after the trace's zero (10 years, s): beyond it a timestamp is in the
#: wrong unit (us or ns for ms) or garbage, and float seconds lose the sub-millisecond resolution of the
#: latencies [the data's traces span about 1 h; experiments stretch them to a few days]
MAX_SPAN_S = 10 * 365.25 * 86400.0
#: tokens of one request's prompt or output: no model's context holds more [191,378: Mooncake synthetic]
MAX_TOKENS = 100_000_000
#: Mooncake's prompt block (tokens per ``hash_ids`` entry)
MOONCAKE_BLOCK = 512


@dataclass(slots=True)
class ServingRequest:
    """One inference request: arrival (s), prompt and output lengths (tokens)."""
    arrival_s: float
    input_tokens: int
    output_tokens: int
    #: prompt token ids when the trace has them (prefix caching hashes them per block)
    token_ids: tuple[int, ...] | None = None
    #: precomputed prompt block ids (Mooncake: one per 512 tokens) when the trace has them
    block_hashes: tuple[int, ...] | None = None
    #: request class (multi-SLO runs); 0 when the trace has none
    klass: int = 0


def _bad(path: Path, line: int, field: str, why: str) -> ServingTraceError:
    return ServingTraceError(f"{path}:{line}: field {field!r}: {why}")


def _count(v: object, path: Path, line: int, field: str, minimum: int = 0) -> int:
    """A token count: a JSON integer (not 10.7, true or "12") in ``[minimum, MAX_TOKENS]``."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise _bad(path, line, field, f"{shown_value(v)} is not a whole number; give an integer number of tokens "
                                      f">= {minimum}")
    if v < minimum:
        raise _bad(path, line, field, f"{v} is below {minimum}; give an integer number of tokens >= {minimum}")
    if v > MAX_TOKENS:
        raise _bad(path, line, field, f"{v:,} tokens is more than any model's context (limit {MAX_TOKENS:,})")
    return v


def _csv_count(text: str, path: Path, line: int, field: str, minimum: int = 0) -> int:
    """A token count of a CSV cell: decimal digits only (``10.7``, ``true``, ``1e3`` are refused)."""
    t = text.strip()
    if not t.isascii() or not t.isdigit():
        raise _bad(path, line, field, f"{text!r} is not a whole number; give an integer number of tokens >= {minimum}")
    return _count(int(t), path, line, field, minimum)


def _time(v: object, path: Path, line: int, field: str, unit: str, per_s: float, integer: bool = False) -> float:
    """A time since the trace's zero in ``unit`` (``per_s`` of them a second): finite, >= 0, within
    `MAX_SPAN_S`; a JSON integer when ``integer``. Returns the value as given (not converted)."""
    kind = "an integer number" if integer else "a finite number"
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
        raise _bad(path, line, field, f"{shown_value(v)} is not a time; give {kind} of {unit} >= 0")
    if isinstance(v, float) and not math.isfinite(v):
        raise _bad(path, line, field, f"{shown_value(v)} is not a time; give a finite number of {unit} >= 0")
    if v < 0:
        raise _bad(path, line, field, f"{v} is negative; give {kind} of {unit} >= 0 (from the trace's zero)")
    if v > MAX_SPAN_S * per_s:
        try:
            shown = f"{v:g} {unit} is {v / per_s / 31557600.0:.3g} years"
        except OverflowError:
            shown = f"a {len(str(v))}-digit number of {unit} is more than 10^300 years"
        raise _bad(path, line, field, f"{shown} after the trace's zero, beyond the 10-year limit of a trace's "
                                      f"span (a time in another unit than {unit}?)")
    return v


def _ids(v: object, path: Path, line: int, field: str, most: int, exact: bool) -> tuple[int, ...] | None:
    """A list of integer ids (None or [] -> None); ``exact``: exactly ``most`` of them, else at most."""
    if v is None or (isinstance(v, list) and not v):
        return None
    if not isinstance(v, list):
        raise _bad(path, line, field, f"{type(v).__name__} {shown_value(v)[:40]}: expected a list of integers")
    for k, x in enumerate(v):
        if isinstance(x, bool) or not isinstance(x, int):
            raise _bad(path, line, f"{field}[{k}]", f"{shown_value(x)} is not an integer id")
    if (len(v) != most) if exact else (len(v) > most):
        raise _bad(path, line, field, f"{len(v)} ids for {'exactly' if exact else 'at most'} {most} "
                                      "(one per prompt token; Mooncake: one per 512-token block)")
    return tuple(v)


def _trace_text(path: Path) -> str:
    """The trace's text: gzip detected by its magic bytes, strict UTF-8 (a byte that is not UTF-8 is an error
    naming its line), BOM dropped, line ends normalised to ``\\n``."""
    path = check_input_path(path, ServingTraceError)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ServingTraceError(f"{path}: cannot read: {e.strerror or e}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise ServingTraceError(f"{path}: truncated or corrupt gzip data ({e}); check the download") from None
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ServingTraceError(f"{path}:{line}: byte 0x{raw[e.start]:02x} is not UTF-8 text; a serving trace is "
                                "UTF-8 (JSON lines or CSV), re-save it as UTF-8") from None
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _no_request(path: Path, out: list, allow_empty: bool, what: str) -> list[ServingRequest]:
    if not out and not allow_empty:
        raise ServingTraceError(f"{path}: holds no request; a serving trace needs at least one ({what})")
    return out


def _json_lines(path: Path, required: tuple[str, ...], hint: str = ""):
    """``(line number, object)`` for each non-blank JSON line of ``path``, each holding ``required``."""
    for i, line in enumerate(_trace_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise ServingTraceError(f"{path}:{i}: not valid JSON: {e.msg} (column {e.colno})") from None
        except ValueError as e:           # e.g. an integer of more than 4300 digits
            raise ServingTraceError(f"{path}:{i}: not valid JSON: {e}") from None
        if not isinstance(d, dict):
            raise ServingTraceError(f"{path}:{i}: expected a JSON object, got {type(d).__name__}")
        for f in required:
            if f not in d:
                raise ServingTraceError(f"{path}:{i}: missing field {f!r}{hint}")
        yield i, d


def read_llmservingsim(path: str | Path, keep_token_ids: bool = True, *, allow_empty: bool = False
                       ) -> list[ServingRequest]:
    """An LLMServingSim ``.jsonl[.gz]`` workload (``arrival_time_ns``, an integer of ns from the start of the
    run, is converted to seconds; ``input_tok_ids``, when given, holds exactly ``input_toks`` ids). Other
    keys (``output_tok_ids``) are ignored. A file without a request is an error unless ``allow_empty``."""
    path = Path(path)
    out: list[ServingRequest] = []
    for i, d in _json_lines(path, ("input_toks", "output_toks", "arrival_time_ns"),
                            " (an LLMServingSim workload line has input_toks, output_toks, arrival_time_ns)"):
        n_in = _count(d["input_toks"], path, i, "input_toks", 1)
        ids = _ids(d.get("input_tok_ids"), path, i, "input_tok_ids", n_in, exact=True)
        out.append(ServingRequest(
            arrival_s=_time(d["arrival_time_ns"], path, i, "arrival_time_ns", "nanoseconds", 1e9, integer=True) / 1e9,
            input_tokens=n_in,
            output_tokens=_count(d["output_toks"], path, i, "output_toks", 1),
            token_ids=ids if keep_token_ids else None))
    return _no_request(path, out, allow_empty, "one JSON object a line")


def _azure_time(ts: str, path: Path, line: int) -> float:
    """Seconds since the epoch of an Azure ``YYYY-MM-DD HH:MM:SS.fffffff`` (7 fractional digits: datetime
    takes at most 6, so the fraction is added apart)."""
    try:
        base, _, frac = ts.partition(".")
        if frac and not (frac.isascii() and frac.isdigit()):
            raise ValueError
        t = datetime.fromisoformat(base).timestamp() + (float("0." + frac) if frac else 0.0)
    except (ValueError, OverflowError, OSError):
        raise _bad(path, line, "TIMESTAMP", f"cannot parse {ts!r}; give YYYY-MM-DD HH:MM:SS.fffffff") from None
    return t


def read_azure(path: str | Path, *, allow_empty: bool = False) -> list[ServingRequest]:
    """An Azure LLM inference 2023 CSV; arrivals in seconds after the first request (no row may precede it;
    at most 10 years after it). Columns after the third are ignored. A file without a request is an
    error unless ``allow_empty``."""
    path = Path(path)
    rows = csv.reader(io.StringIO(_trace_text(path)))
    want = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"]
    try:
        header = next(rows, None)
        if header is None or [h.strip() for h in header[:3]] != want:
            raise ServingTraceError(f"{path}:1: expected header {','.join(want)}, got {header!r}")
        out: list[ServingRequest] = []
        t0 = None
        line0 = 0
        for row in rows:
            i = rows.line_num
            if not row:
                continue
            if len(row) < 3:
                raise _bad(path, i, want[len(row)], f"missing (the row has {len(row)} column(s); expected "
                                                    f"{','.join(want)})")
            t = _azure_time(row[0].strip(), path, i)
            if t0 is None:
                t0, line0 = t, i
            if t < t0:
                raise _bad(path, i, "TIMESTAMP", f"{row[0].strip()!r} is {t0 - t:.6g} s before the first request "
                                                 f"(line {line0}); arrivals count from the first row (sort the file "
                                                 "by TIMESTAMP)")
            if t - t0 > MAX_SPAN_S:
                raise _bad(path, i, "TIMESTAMP", f"{row[0].strip()!r} is {(t - t0) / 31557600.0:.3g} years after "
                                                 f"the first request (line {line0}), beyond the 10-year limit of a "
                                                 "trace's span")
            # GeneratedTokens may be 0 in the trace; a request produces at least its first token
            out.append(ServingRequest(arrival_s=t - t0,
                                      input_tokens=_csv_count(row[1], path, i, "ContextTokens", 1),
                                      output_tokens=max(1, _csv_count(row[2], path, i, "GeneratedTokens"))))
    except csv.Error as e:
        raise ServingTraceError(f"{path}:{rows.line_num}: not valid CSV: {e}") from None
    return _no_request(path, out, allow_empty, "a header line, then one row a request")


def read_mooncake(path: str | Path, *, allow_empty: bool = False) -> list[ServingRequest]:
    """A Mooncake trace (``timestamp`` in ms, a finite number >= 0; ``hash_ids``: at most one id per
    512-token prompt block). Other keys are ignored. A file without a request is an error unless
    ``allow_empty``."""
    path = Path(path)
    out: list[ServingRequest] = []
    for i, d in _json_lines(path, ("timestamp", "input_length", "output_length"),
                            " (a Mooncake trace line has timestamp, input_length, output_length)"):
        n_in = _count(d["input_length"], path, i, "input_length", 1)
        out.append(ServingRequest(arrival_s=float(_time(d["timestamp"], path, i, "timestamp",
                                                        "milliseconds", 1e3)) / 1e3,
                                  input_tokens=n_in,
                                  output_tokens=max(1, _count(d["output_length"], path, i, "output_length")),
                                  block_hashes=_ids(d.get("hash_ids"), path, i, "hash_ids",
                                                    -(-n_in // MOONCAKE_BLOCK), exact=False)))
    return _no_request(path, out, allow_empty, "one JSON object a line")


def read_serving_trace(path: str | Path, *, allow_empty: bool = False) -> list[ServingRequest]:
    """Any of the three formats, chosen by the file name (``Azure*.csv``, ``*mooncake*``/``*trace.jsonl*``
    from Mooncake, else an LLMServingSim workload). A trace without a request is an error unless
    ``allow_empty``."""
    path = Path(path)
    name = path.name.lower()
    if name.endswith(".csv") or name.endswith(".csv.gz"):
        return read_azure(path, allow_empty=allow_empty)
    if "mooncake" in str(path).lower() or name.startswith(("conversation_trace", "synthetic_trace", "toolagent")):
        return read_mooncake(path, allow_empty=allow_empty)
    return read_llmservingsim(path, allow_empty=allow_empty)


def resolve_gz(path: Path) -> Path:
    """``path`` if it exists, else ``path.gz``; raises `ServingTraceError` naming both when neither does."""
    if path.exists():
        return path
    gz = path.with_name(path.name + ".gz")
    if gz.exists():
        return gz
    raise ServingTraceError(f"{path}: file not found (nor {gz.name})")


def diurnal_trace(lengths: list[ServingRequest], hours: float = 24.0, mean_rate: float = 2.0,
                  peak_to_trough: float = 3.0, peak_hour: float = 14.0, seed: int = 0) -> list[ServingRequest]:
    """A day-shaped Poisson workload: rate ``mean_rate (1 + a cos(2 pi (t - peak) / 24 h))`` req/s with
    ``a`` set by the peak-to-trough ratio, arrivals by thinning, (input, output) lengths drawn with
    replacement from ``lengths`` (e.g. an Azure trace), all from one seeded generator."""
    import numpy as np  # noqa: PLC0415
    if not lengths:
        raise ServingTraceError("diurnal_trace: no requests to draw lengths from")
    for name, v in (("hours", hours), ("mean_rate", mean_rate), ("peak_to_trough", peak_to_trough),
                    ("peak_hour", peak_hour)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ServingTraceError(f"diurnal_trace: {name} = {shown_value(v)}: a finite number is needed")
    if peak_to_trough < 1:
        raise ServingTraceError(f"diurnal_trace: peak_to_trough must be >= 1, got {peak_to_trough}")
    if not 0 < hours * 3600.0 <= MAX_SPAN_S or not mean_rate > 0:
        raise ServingTraceError(f"diurnal_trace: hours = {hours:g} must be in (0, {MAX_SPAN_S / 3600:.0f}] and "
                                f"mean_rate = {mean_rate:g} req/s > 0")
    if mean_rate * 2 * hours * 3600.0 > 1e8:
        raise ServingTraceError(f"diurnal_trace: {mean_rate:g} req/s over {hours:g} h is about "
                                f"{mean_rate * hours * 3600:.3g} requests, more than 100,000,000")
    rng = np.random.default_rng(seed)
    a = (peak_to_trough - 1) / (peak_to_trough + 1)
    lam_max = mean_rate * (1 + a)
    span = hours * 3600.0
    n = rng.poisson(lam_max * span)
    t = np.sort(rng.uniform(0, span, n))
    keep = rng.uniform(0, 1, n) < (1 + a * np.cos(2 * np.pi * (t / 3600.0 - peak_hour) / 24.0)) / (1 + a)
    t = t[keep]
    pick = rng.integers(0, len(lengths), len(t))
    return [ServingRequest(float(ti), lengths[k].input_tokens, lengths[k].output_tokens) for ti, k in zip(t, pick)]
