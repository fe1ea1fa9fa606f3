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

Times are seconds. A malformed line raises `ServingTraceError` naming the file, line and field.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .textio import read_text


class ServingTraceError(ValueError):
    """A serving trace is missing or malformed (the message names the file, line and field)."""


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


def _positive_int(v, path: Path, line: int, field: str, minimum: int = 0) -> int:
    try:
        iv = int(v)
    except (TypeError, ValueError):
        raise ServingTraceError(f"{path}:{line}: field {field!r}: expected an integer, got {v!r}") from None
    if iv < minimum:
        raise ServingTraceError(f"{path}:{line}: field {field!r}: must be >= {minimum}, got {iv}")
    return iv


def _json_lines(path: Path, required: tuple[str, ...], hint: str = ""):
    """``(line number, object)`` for each non-blank JSON line of ``path``, each holding ``required``."""
    for i, line in enumerate(read_text(path, ServingTraceError).splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise ServingTraceError(f"{path}:{i}: not valid JSON: {e.msg}") from None
        if not isinstance(d, dict):
            raise ServingTraceError(f"{path}:{i}: expected a JSON object, got {type(d).__name__}")
        for f in required:
            if f not in d:
                raise ServingTraceError(f"{path}:{i}: missing field {f!r}{hint}")
        yield i, d


def read_llmservingsim(path: str | Path, keep_token_ids: bool = True) -> list[ServingRequest]:
    """An LLMServingSim ``.jsonl[.gz]`` workload (``arrival_time_ns`` is converted to seconds)."""
    path = Path(path)
    out: list[ServingRequest] = []
    for i, d in _json_lines(path, ("input_toks", "output_toks", "arrival_time_ns"),
                            " (an LLMServingSim workload line has input_toks, output_toks, arrival_time_ns)"):
        ids = d.get("input_tok_ids")
        out.append(ServingRequest(
            arrival_s=_positive_int(d["arrival_time_ns"], path, i, "arrival_time_ns") / 1e9,
            input_tokens=_positive_int(d["input_toks"], path, i, "input_toks", 1),
            output_tokens=_positive_int(d["output_toks"], path, i, "output_toks", 1),
            token_ids=tuple(ids) if (keep_token_ids and ids) else None))
    return out


def read_azure(path: str | Path) -> list[ServingRequest]:
    """An Azure LLM inference 2023 CSV; arrivals in seconds after the first request."""
    path = Path(path)
    rows = csv.reader(io.StringIO(read_text(path, ServingTraceError)))
    header = next(rows, None)
    want = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"]
    if header is None or [h.strip() for h in header[:3]] != want:
        raise ServingTraceError(f"{path}:1: expected header {','.join(want)}, got {header!r}")
    out: list[ServingRequest] = []
    t0 = None
    for i, row in enumerate(rows, 2):
        if not row:
            continue
        ts = row[0].strip()
        try:
            # 7 fractional digits: datetime takes at most 6
            base, _, frac = ts.partition(".")
            t = datetime.fromisoformat(base).timestamp() + (float("0." + frac) if frac else 0.0)
        except ValueError:
            raise ServingTraceError(f"{path}:{i}: field 'TIMESTAMP': cannot parse {ts!r}") from None
        t0 = t if t0 is None else t0
        # GeneratedTokens may be 0 in the trace; a request produces at least its first token
        out.append(ServingRequest(arrival_s=t - t0,
                                  input_tokens=_positive_int(row[1], path, i, "ContextTokens", 1),
                                  output_tokens=max(1, _positive_int(row[2], path, i, "GeneratedTokens"))))
    return out


def read_mooncake(path: str | Path) -> list[ServingRequest]:
    """A Mooncake trace (``timestamp`` in ms, ``hash_ids`` per 512-token block)."""
    path = Path(path)
    out: list[ServingRequest] = []
    for i, d in _json_lines(path, ("timestamp", "input_length", "output_length")):
        out.append(ServingRequest(arrival_s=float(d["timestamp"]) / 1e3,
                                  input_tokens=_positive_int(d["input_length"], path, i, "input_length", 1),
                                  output_tokens=max(1, _positive_int(d["output_length"], path, i, "output_length")),
                                  block_hashes=tuple(d.get("hash_ids") or ()) or None))
    return out


def read_serving_trace(path: str | Path) -> list[ServingRequest]:
    """Any of the three formats, chosen by the file name (``Azure*.csv``, ``*mooncake*``/``*trace.jsonl*``
    from Mooncake, else an LLMServingSim workload)."""
    path = Path(path)
    name = path.name.lower()
    if name.endswith(".csv") or name.endswith(".csv.gz"):
        return read_azure(path)
    if "mooncake" in str(path).lower() or name.startswith(("conversation_trace", "synthetic_trace", "toolagent")):
        return read_mooncake(path)
    return read_llmservingsim(path)


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
    if peak_to_trough < 1:
        raise ServingTraceError(f"diurnal_trace: peak_to_trough must be >= 1, got {peak_to_trough}")
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
