"""Attacks on every serving input (issue 23 items 4, 5, 8): each bad value class on each input gets a located
one-line error (file, line or key path, field), never a traceback and never silent acceptance; options
that would make a run endless are refused up front with the figure that would be needed; and every
serving mode keeps the invariants of `tests/serving_invariants.py` on a small trace.

Inputs: Mooncake JSONL, LLMServingSim JSONL, Azure CSV (`datasets.serving_traces`), a bundle's config.json
and vllm/meta.json (`twin.serving.bundle`), profile CSVs (`twin.serving.profiles`), ``hpctwin serve`` flags
(`twin.serving.cli`) and ``--set serving.KEY`` options (`twin.options`, `twin.serving.batch`).
"""
from __future__ import annotations

import copy
import gzip
import json
import math
import random
import re
from pathlib import Path

import pytest

from hpctwin.datasets.serving_traces import (ServingRequest, ServingTraceError, read_azure, read_llmservingsim,
                                             read_mooncake, read_serving_trace)
from hpctwin.twin.serving import BlockManager, Instance, IterationModel, simulate
from hpctwin.twin.serving.bundle import BundleError, load_bundle
from hpctwin.twin.serving.profiles import LayerProfile, ProfileError

from .serving_invariants import check_deterministic, check_serving_result, outcome_bytes
from .test_serving import TINY, write_profile

MODEL = "meta-llama/Llama-3.1-8B"


def refused(fn, pattern: str, exc: type[Exception] = ValueError) -> str:
    """Call ``fn``; assert it raises ``exc`` with a one-line message matching ``pattern``; return the message."""
    with pytest.raises(exc) as e:
        fn()
    msg = str(e.value)
    assert "\n" not in msg, msg
    assert re.search(pattern, msg), f"{pattern!r} not in {msg!r}"
    return msg


# ====================================================================== traces
def jsonl(rows: list[str]) -> str:
    return "".join(r + "\n" for r in rows)


MOONCAKE_OK = '{"timestamp": 0, "input_length": 10, "output_length": 3, "hash_ids": [7]}'


def mooncake_line(field: str, value: str) -> str:
    d = {"timestamp": "0", "input_length": "10", "output_length": "3", "hash_ids": "[7]"}
    d[field] = value
    return "{" + ", ".join(f'"{k}": {v}' for k, v in d.items()) + "}"


MOONCAKE_BAD = [
    # (field, JSON value, message)
    ("timestamp", "NaN", r"field 'timestamp': NaN is not a time; give a finite number of milliseconds >= 0"),
    ("timestamp", "Infinity", r"field 'timestamp': Infinity is not a time"),
    ("timestamp", "-Infinity", r"field 'timestamp': -Infinity is not a time"),
    ("timestamp", "null", r"field 'timestamp': null is not a time"),
    ("timestamp", "-5", r"field 'timestamp': -5 is negative; give a finite number of milliseconds >= 0"),
    ("timestamp", "1e300", r"field 'timestamp': 1e\+300 milliseconds is .* years after the trace's zero, beyond "
                           r"the 10-year limit"),
    ("timestamp", '"12"', r"field 'timestamp': '12' is not a time"),
    ("timestamp", "true", r"field 'timestamp': true is not a time"),
    ("timestamp", "[0]", r"field 'timestamp': \[0\] is not a time"),
    ("input_length", "NaN", r"field 'input_length': NaN is not a whole number"),
    ("input_length", "null", r"field 'input_length': null is not a whole number"),
    ("input_length", "10.7", r"field 'input_length': 10.7 is not a whole number; give an integer number of tokens"),
    ("input_length", "10.0", r"field 'input_length': 10.0 is not a whole number"),
    ("input_length", "true", r"field 'input_length': true is not a whole number"),
    ("input_length", '"12"', r"field 'input_length': '12' is not a whole number"),
    ("input_length", "0", r"field 'input_length': 0 is below 1"),
    ("input_length", "-3", r"field 'input_length': -3 is below 1"),
    ("input_length", "1000000000000", r"field 'input_length': 1,000,000,000,000 tokens is more than any model's "
                                      r"context"),
    ("input_length", "{}", r"field 'input_length': \{\} is not a whole number"),
    ("output_length", "-1", r"field 'output_length': -1 is below 0"),
    ("output_length", "Infinity", r"field 'output_length': Infinity is not a whole number"),
    ("hash_ids", '{"a": 1}', r"field 'hash_ids': dict .*expected a list of integers"),
    ("hash_ids", "[1.5]", r"field 'hash_ids\[0\]': 1.5 is not an integer id"),
    ("hash_ids", "[1, 2, 3]", r"field 'hash_ids': 3 ids for at most 1"),
]


@pytest.mark.parametrize("field, value, msg", MOONCAKE_BAD, ids=[f"{f}={v}" for f, v, _ in MOONCAKE_BAD])
def test_mooncake_bad_values(tmp_path, field, value, msg):
    p = tmp_path / "conversation_trace.jsonl"
    p.write_text(jsonl([MOONCAKE_OK, mooncake_line(field, value)]))
    refused(lambda: read_serving_trace(p), r"conversation_trace\.jsonl:2: " + msg, ServingTraceError)


LLMSS_OK = '{"input_toks": 3, "output_toks": 2, "arrival_time_ns": 0, "input_tok_ids": [1, 2, 3]}'
LLMSS_BAD = [
    ("arrival_time_ns", "NaN", r"field 'arrival_time_ns': NaN is not a time; give an integer number of nanoseconds"),
    ("arrival_time_ns", "Infinity", r"field 'arrival_time_ns': Infinity is not a time"),
    ("arrival_time_ns", "-Infinity", r"field 'arrival_time_ns': -Infinity is not a time"),
    ("arrival_time_ns", "null", r"field 'arrival_time_ns': null is not a time"),
    ("arrival_time_ns", "1.5", r"field 'arrival_time_ns': 1.5 is not a time; give an integer number of nanoseconds"),
    ("arrival_time_ns", "-1", r"field 'arrival_time_ns': -1 is negative"),
    ("arrival_time_ns", '"0"', r"field 'arrival_time_ns': '0' is not a time"),
    ("arrival_time_ns", "true", r"field 'arrival_time_ns': true is not a time"),
    ("arrival_time_ns", "10000000000000000000", r"field 'arrival_time_ns': 1e\+19 nanoseconds is 317 years"),
    ("input_toks", "0", r"field 'input_toks': 0 is below 1"),
    ("input_toks", "3.5", r"field 'input_toks': 3.5 is not a whole number"),
    ("input_toks", "false", r"field 'input_toks': false is not a whole number"),
    ("output_toks", "0", r"field 'output_toks': 0 is below 1"),
    ("output_toks", '"2"', r"field 'output_toks': '2' is not a whole number"),
    ("output_toks", "NaN", r"field 'output_toks': NaN is not a whole number"),
    ("input_tok_ids", "[1, 2]", r"field 'input_tok_ids': 2 ids for exactly 3"),
    ("input_tok_ids", '[1, "a", 3]', r"field 'input_tok_ids\[1\]': 'a' is not an integer id"),
    ("input_tok_ids", '"abc"', r"field 'input_tok_ids': str .*expected a list of integers"),
]


@pytest.mark.parametrize("field, value, msg", LLMSS_BAD, ids=[f"{f}={v}" for f, v, _ in LLMSS_BAD])
def test_llmservingsim_bad_values(tmp_path, field, value, msg):
    d = {"input_toks": "3", "output_toks": "2", "arrival_time_ns": "0", "input_tok_ids": "[1, 2, 3]"}
    d[field] = value
    p = tmp_path / "sharegpt-w.jsonl"
    p.write_text(jsonl([LLMSS_OK, "{" + ", ".join(f'"{k}": {v}' for k, v in d.items()) + "}"]))
    refused(lambda: read_serving_trace(p), r"sharegpt-w\.jsonl:2: " + msg, ServingTraceError)


AZ_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens"
AZ_OK = "2023-11-16 18:15:46.6805900,374,44"
AZ_BAD = [
    ("2023-11-16 18:15:47.0,nan,5", r"field 'ContextTokens': 'nan' is not a whole number"),
    ("2023-11-16 18:15:47.0,inf,5", r"field 'ContextTokens': 'inf' is not a whole number"),
    ("2023-11-16 18:15:47.0,5,-inf", r"field 'GeneratedTokens': '-inf' is not a whole number"),
    ("2023-11-16 18:15:47.0,null,5", r"field 'ContextTokens': 'null' is not a whole number"),
    ("2023-11-16 18:15:47.0,-1,5", r"field 'ContextTokens': '-1' is not a whole number"),
    ("2023-11-16 18:15:47.0,0,5", r"field 'ContextTokens': 0 is below 1"),
    ("2023-11-16 18:15:47.0,10.7,5", r"field 'ContextTokens': '10.7' is not a whole number"),
    ("2023-11-16 18:15:47.0,true,5", r"field 'ContextTokens': 'true' is not a whole number"),
    ("2023-11-16 18:15:47.0,1e3,5", r"field 'ContextTokens': '1e3' is not a whole number"),
    ("2023-11-16 18:15:47.0,,5", r"field 'ContextTokens': '' is not a whole number"),
    ("2023-11-16 18:15:47.0,1000000000000,5", r"field 'ContextTokens': 1,000,000,000,000 tokens is more than"),
    ("2023-11-16 18:15:47.0,374", r"field 'GeneratedTokens': missing \(the row has 2 column\(s\)"),
    ("2023-11-16 18:15:47.0", r"field 'ContextTokens': missing \(the row has 1 column\(s\)"),
    ("nan,374,5", r"field 'TIMESTAMP': cannot parse 'nan'"),
    (",374,5", r"field 'TIMESTAMP': cannot parse ''"),
    ("2023-11-16 18:15:47.5e3,374,5", r"field 'TIMESTAMP': cannot parse '2023-11-16 18:15:47.5e3'"),
    ("2023-11-16 18:15:40.0,374,5", r"field 'TIMESTAMP': '2023-11-16 18:15:40.0' is 6.68059 s before the first "
                                    r"request \(line 2\)"),
    ("2040-01-01 00:00:00,374,5", r"field 'TIMESTAMP': '2040-01-01 00:00:00' is 16.1 years after the first request"),
]


@pytest.mark.parametrize("row, msg", AZ_BAD, ids=[r for r, _ in AZ_BAD])
def test_azure_bad_values(tmp_path, row, msg):
    p = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    p.write_text(f"{AZ_HEAD}\n{AZ_OK}\n{row}\n")
    refused(lambda: read_serving_trace(p), r"AzureLLMInferenceTrace_conv\.csv:3: " + msg, ServingTraceError)


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


FILE_ATTACKS = [
    # (file name, bytes, message); the same classes for each format
    ("conversation_trace.jsonl", b"", r"conversation_trace\.jsonl: holds no request"),
    ("conversation_trace.jsonl", b"\n\n  \n", r"conversation_trace\.jsonl: holds no request"),
    ("conversation_trace.jsonl", (MOONCAKE_OK + "\n\xff\xfe\n").encode("latin-1"),
     r"conversation_trace\.jsonl:2: byte 0xff is not UTF-8 text"),
    ("conversation_trace.jsonl.gz", _gz((MOONCAKE_OK + "\n").encode() * 50)[:-12],
     r"conversation_trace\.jsonl\.gz: truncated or corrupt gzip data"),
    ("conversation_trace.jsonl", (MOONCAKE_OK + '\n{"timestamp": 0,\n').encode(),
     r"conversation_trace\.jsonl:2: not valid JSON: .*\(column \d+\)"),
    ("conversation_trace.jsonl", (MOONCAKE_OK + "\n[1, 2]\n").encode(),
     r"conversation_trace\.jsonl:2: expected a JSON object, got list"),
    ("conversation_trace.jsonl", (MOONCAKE_OK + '\n{"timestamp": 0, "output_length": 3}\n').encode(),
     r"conversation_trace\.jsonl:2: missing field 'input_length' \(a Mooncake trace line has"),
    ("conversation_trace.jsonl", ('{"timestamp": ' + "1" * 5000 + ', "input_length": 1, "output_length": 1}\n'
                                  ).encode(), r"conversation_trace\.jsonl:1: not valid JSON"),
    ("w.jsonl", b"", r"w\.jsonl: holds no request"),
    ("w.jsonl", (LLMSS_OK + "\n").encode() + b"\x80\n", r"w\.jsonl:2: byte 0x80 is not UTF-8"),
    ("w.jsonl.gz", _gz((LLMSS_OK + "\n").encode() * 50)[:-12], r"w\.jsonl\.gz: truncated or corrupt gzip data"),
    ("w.jsonl", (LLMSS_OK + '\n{"input_toks": 3}\n').encode(), r"w\.jsonl:2: missing field 'output_toks'"),
    ("w.jsonl", (LLMSS_OK + '\n"text"\n').encode(), r"w\.jsonl:2: expected a JSON object, got str"),
    ("Azure_conv.csv", f"{AZ_HEAD}\n".encode(), r"Azure_conv\.csv: holds no request"),
    ("Azure_conv.csv", b"", r"Azure_conv\.csv:1: expected header TIMESTAMP,ContextTokens,GeneratedTokens"),
    ("Azure_conv.csv", b"time,in,out\n1,2,3\n", r"Azure_conv\.csv:1: expected header"),
    ("Azure_conv.csv", f"{AZ_HEAD}\n{AZ_OK}\n".encode() + b"2023-11-16 18:15:47.0,\xe9,5\n",
     r"Azure_conv\.csv:3: byte 0xe9 is not UTF-8"),
    ("Azure_conv.csv.gz", _gz(f"{AZ_HEAD}\n{AZ_OK}\n".encode() * 40)[:-12],
     r"Azure_conv\.csv\.gz: truncated or corrupt gzip data"),
    ("Azure_conv.csv", f"{AZ_HEAD}\n{AZ_OK}\n".encode() + b"2023-11-16 18:15:47.0,\x00,5\n",
     r"Azure_conv\.csv:3: (not valid CSV|field 'ContextTokens')"),
]


@pytest.mark.parametrize("name, data, msg", FILE_ATTACKS, ids=[f"{n}:{m[:30]}" for n, _, m in FILE_ATTACKS])
def test_trace_file_attacks(tmp_path, name, data, msg):
    p = tmp_path / name
    p.write_bytes(data)
    refused(lambda: read_serving_trace(p), msg, ServingTraceError)


def test_empty_trace_allowed_on_request_and_extra_fields_accepted(tmp_path):
    m = tmp_path / "conversation_trace.jsonl"
    m.write_text("")
    assert read_mooncake(m, allow_empty=True) == [] and read_serving_trace(m, allow_empty=True) == []
    a = tmp_path / "Azure.csv"
    a.write_text(AZ_HEAD + ",note\n")
    assert read_azure(a, allow_empty=True) == []
    # extra keys and columns are accepted and ignored (even a NaN in an unused key)
    m.write_text(jsonl([MOONCAKE_OK[:-1] + ', "session": NaN, "note": "x"}']))
    assert [(r.arrival_s, r.input_tokens, r.output_tokens, r.block_hashes) for r in read_mooncake(m)] == \
        [(0.0, 10, 3, (7,))]
    a.write_text(f"{AZ_HEAD},note\n{AZ_OK},hello\n2023-11-16 18:15:50.9951690,\"396\",0,\n")
    # CSV quoting is not a type: a quoted "396" is the cell text 396, a valid count
    assert [(round(r.arrival_s, 6), r.input_tokens, r.output_tokens) for r in read_azure(a)] == \
        [(0.0, 374, 44), (4.314579, 396, 1)]
    w = tmp_path / "w.jsonl"
    w.write_text(jsonl([LLMSS_OK[:-1] + ', "output_tok_ids": [9, 9]}']))
    assert read_llmservingsim(w)[0].token_ids == (1, 2, 3)
    assert read_llmservingsim(w, keep_token_ids=False)[0].token_ids is None


def test_trace_time_limits_are_not_hit_by_valid_traces(tmp_path):
    """A span just under 10 years, an hour in ms, in ns: accepted with exact conversions."""
    m = tmp_path / "conversation_trace.jsonl"
    ten_years_ms = 10 * 365.25 * 86400 * 1000
    m.write_text(jsonl([MOONCAKE_OK, mooncake_line("timestamp", repr(ten_years_ms - 1))]))
    assert read_mooncake(m)[1].arrival_s == (ten_years_ms - 1) / 1e3
    w = tmp_path / "w.jsonl"
    w.write_text(jsonl(['{"input_toks": 1, "output_toks": 1, "arrival_time_ns": 3600000000000}']))
    assert read_llmservingsim(w)[0].arrival_s == 3600.0


def test_real_traces_read_strictly():
    """The data directory's traces pass the strict readers (the same requests as before the checks)."""
    from hpctwin.datasets.registry import default_data_dir
    d = Path(default_data_dir(None)) / "LLM-serving"
    files = [d / "Azure-LLM-2023" / "AzureLLMInferenceTrace_code.csv", d / "Mooncake" / "synthetic_trace.jsonl.gz",
             d / "LLMServingSim" / "workloads" / "sharegpt-llama-3.1-8b-300-sps10.jsonl.gz"]
    if not all(f.exists() for f in files):
        pytest.skip("no serving traces in the data directory")
    az, mc, ls = (read_serving_trace(f) for f in files)
    assert (len(az), len(mc), len(ls)) == (8819, 3993, 300)
    assert az[0].arrival_s == 0.0 and max(r.input_tokens for r in mc) == 191378
    assert all(r.token_ids is not None and len(r.token_ids) == r.input_tokens for r in ls)


# ====================================================================== bundles
def make_data(tmp_path: Path, hw: str = "HW") -> Path:
    """A data directory with a constant-time profile of Llama-3.1-8B TP 1 on ``hw`` and a 4-request workload."""
    data = tmp_path / "data"
    root = data / "LLM-serving" / "LLMServingSim"
    write_profile(root / "perf" / hw / "meta-llama" / "Llama-3.1-8B" / "bf16" / "tp1")
    (root / "workloads").mkdir(parents=True, exist_ok=True)
    (root / "workloads" / "w.jsonl").write_text(
        "".join(f'{{"input_toks": {5 + k}, "output_toks": {2 + k}, "arrival_time_ns": {k * 10 ** 8}}}\n'
                for k in range(4)))
    return data


CONFIG = {"num_nodes": 1, "link_bw": 16, "link_latency": 1000, "nodes": [{
    "num_instances": 1, "cpu_mem": {"mem_size": 64, "mem_bw": 50, "mem_latency": 0},
    "instances": [{"model_name": MODEL, "hardware": "HW",
                   "npu_mem": {"mem_size": 24, "mem_bw": 1008, "mem_latency": 0, "mem_util": 0.9},
                   "num_npus": 1, "tp_size": 1, "pd_type": None}]}]}
META = {"engine_kwargs": {"max_num_seqs": 4, "max_num_batched_tokens": 16}, "dataset_path": "workloads/w.jsonl",
        "kv_cache": {"block_size": 16, "enable_prefix_caching": False},
        "resolved_config": {"scheduler_config": {"long_prefill_token_threshold": 0}}}


def write_bundle(tmp_path: Path, config=None, meta=None, raw_config: bytes | None = None,
                 raw_meta: bytes | None = None) -> Path:
    b = tmp_path / "bundle"
    (b / "vllm").mkdir(parents=True, exist_ok=True)
    (b / "config.json").write_bytes(raw_config if raw_config is not None else
                                    json.dumps(CONFIG if config is None else config).encode())
    (b / "vllm" / "meta.json").write_bytes(raw_meta if raw_meta is not None else
                                           json.dumps(META if meta is None else meta).encode())
    return b


def _set(d: dict, path: str, value) -> dict:
    """A deep copy of ``d`` with ``path`` (dotted keys, ``[i]`` indices) set to ``value`` (``DELETE``: removed)."""
    d = copy.deepcopy(d)
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    cur = d
    for p in parts[:-1]:
        cur = cur[int(p[1:-1])] if p.startswith("[") else cur[p]
    last = parts[-1]
    if value is DELETE:
        del cur[last]
    elif last.startswith("["):
        cur[int(last[1:-1])] = value
    else:
        cur[last] = value
    return d


DELETE = object()
I0 = "nodes[0].instances[0]"
CONFIG_BAD = [
    (f"{I0}.npu_mem.mem_util", 90, r"npu_mem\.mem_util: 90: a fraction in \(0, 1\] is expected; did you mean 0\.90\?"),
    (f"{I0}.npu_mem.mem_util", math.nan, r"npu_mem\.mem_util: NaN is not a fraction"),
    (f"{I0}.npu_mem.mem_util", math.inf, r"npu_mem\.mem_util: Infinity is not a fraction"),
    (f"{I0}.npu_mem.mem_util", 0, r"npu_mem\.mem_util: 0: a fraction in \(0, 1\] is expected"),
    (f"{I0}.npu_mem.mem_util", -0.5, r"npu_mem\.mem_util: -0\.5: a fraction"),
    (f"{I0}.npu_mem.mem_util", "0.9", r"npu_mem\.mem_util: '0\.9' is not a fraction"),
    (f"{I0}.npu_mem.mem_util", True, r"npu_mem\.mem_util: true is not a fraction"),
    (f"{I0}.npu_mem.mem_size", 24576, r"npu_mem\.mem_size: 24,576 GiB is more than any device .* looks like MiB; "
                                      r"give GiB \(e\.g\. 24\)"),
    (f"{I0}.npu_mem.mem_size", 25769803776, r"npu_mem\.mem_size: .* looks like bytes; give GiB \(e\.g\. 24\)"),
    (f"{I0}.npu_mem.mem_size", 0, r"npu_mem\.mem_size: 0 must be > 0 GiB"),
    (f"{I0}.npu_mem.mem_size", -24, r"npu_mem\.mem_size: -24 must be > 0 GiB"),
    (f"{I0}.npu_mem.mem_size", -math.inf, r"npu_mem\.mem_size: -Infinity is not a finite number"),
    (f"{I0}.npu_mem.mem_size", None, r"npu_mem: missing field 'mem_size'"),
    (f"{I0}.npu_mem.mem_size", DELETE, r"npu_mem: missing field 'mem_size'"),
    (f"{I0}.npu_mem.mem_bw", 1.008e12, r"npu_mem\.mem_bw: .* GB/s is more than the plausible limit .* looks like "
                                       r"B/s or MB/s; give GB/s"),
    (f"{I0}.npu_mem.mem_bw", -1, r"npu_mem\.mem_bw: -1 must be >= 0 GB/s"),
    ("link_bw", -16, r"config\.json: link_bw: -16 must be > 0 GB/s"),
    ("link_bw", 0, r"config\.json: link_bw: 0 must be > 0 GB/s"),
    ("link_bw", 16e9, r"config\.json: link_bw: .* looks like B/s or MB/s; give GB/s"),
    ("link_bw", math.nan, r"config\.json: link_bw: NaN is not a finite number"),
    ("link_bw", "16", r"config\.json: link_bw: '16' is not a number"),
    ("link_latency", -1, r"config\.json: link_latency: -1 must be >= 0 ns"),
    ("link_latency", 1e-6, r"config\.json: link_latency: 1e-06 ns is below a nanosecond; looks like seconds"),
    (f"{I0}.tp_size", 0, r"instances\[0\]\.tp_size: 0 is below 1"),
    (f"{I0}.tp_size", 1.5, r"instances\[0\]\.tp_size: 1\.5 is not a whole number"),
    (f"{I0}.tp_size", True, r"instances\[0\]\.tp_size: true is not a whole number"),
    (f"{I0}.tp_size", "2", r"instances\[0\]\.tp_size: '2' is not a whole number"),
    (f"{I0}.tp_size", 10 ** 6, r"instances\[0\]\.tp_size: 1,000,000 is more than the limit of 1,024"),
    (f"{I0}.ep_size", 0, r"instances\[0\]\.ep_size: 0 is below 1"),
    (f"{I0}.num_npus", -1, r"instances\[0\]\.num_npus: -1 is below 1"),
    (f"{I0}.pd_type", "both", r"instances\[0\]: field 'pd_type': expected null, prefill or decode"),
    (f"{I0}.dp_group", [1], r"instances\[0\]\.dp_group: \[1\]: expected a group name"),
    (f"{I0}.model_name", "foo/bar", r"instances\[0\]: field 'model_name': unknown model 'foo/bar'; known:"),
    (f"{I0}.model_name", None, r"instances\[0\]: missing field 'model_name'"),
    (f"{I0}.hardware", 5, r"instances\[0\]\.hardware: 5 is not a non-empty string"),
    (f"{I0}.npu_mem.mem_utl", 0.9, r"npu_mem: unknown key 'mem_utl' \(did you mean 'mem_util'.*; known: mem_size"),
    (f"{I0}.pp_size", 2, r"instances\[0\]: unknown key 'pp_size'.*known: model_name"),
    ("link_bandwidth", 16, r"config\.json: unknown key 'link_bandwidth'"),
    ("nodes[0].num_instances", 3, r"nodes\[0\]\.num_instances: 3 but the list it counts holds 1"),
    ("num_nodes", 2.0, r"config\.json: num_nodes: 2\.0 is not a whole number"),
    ("nodes", {}, r"config\.json: nodes: dict .*expected a JSON list"),
    ("nodes", [], r"config\.json: num_nodes: 1 but the list it counts holds 0"),
    ("nodes[0].instances", [], r"nodes\[0\]\.num_instances: 1 but the list it counts holds 0"),
    (f"{I0}.npu_mem", [], r"npu_mem: list .*expected a JSON object"),
    ("nodes[0].cpu_mem.mem_size", math.nan, r"cpu_mem\.mem_size: NaN is not a finite number"),
]


@pytest.mark.parametrize("path, value, msg", CONFIG_BAD, ids=[f"{p}={v!r}" for p, v, _ in CONFIG_BAD])
def test_bundle_config_bad_values(tmp_path, path, value, msg):
    data = make_data(tmp_path)
    b = write_bundle(tmp_path, config=_set(CONFIG, path, value))
    refused(lambda: load_bundle(b, data), r"config\.json: .*" + msg if not msg.startswith("config") else msg,
            BundleError)


META_BAD = [
    ("engine_kwargs.max_num_seqs", 0, r"engine_kwargs\.max_num_seqs: 0 is below 1"),
    ("engine_kwargs.max_num_seqs", 10.7, r"engine_kwargs\.max_num_seqs: 10\.7 is not a whole number"),
    ("engine_kwargs.max_num_seqs", "256", r"engine_kwargs\.max_num_seqs: '256' is not a whole number"),
    ("engine_kwargs.max_num_seqs", True, r"engine_kwargs\.max_num_seqs: true is not a whole number"),
    ("engine_kwargs.max_num_batched_tokens", -1, r"engine_kwargs\.max_num_batched_tokens: -1 is below 1"),
    ("engine_kwargs.data_parallel_size", 0, r"engine_kwargs\.data_parallel_size: 0 is below 1"),
    ("kv_cache.block_size", 0, r"kv_cache\.block_size: 0 is below 1"),
    ("kv_cache.block_size", math.nan, r"kv_cache\.block_size: NaN is not a whole number"),
    ("kv_cache.num_gpu_blocks", 10 ** 12, r"kv_cache\.num_gpu_blocks: 1,000,000,000,000 is more than the limit "
                                          r"of 10,000,000 blocks"),
    ("kv_cache.num_gpu_blocks", 0, r"kv_cache\.num_gpu_blocks: 0 is below 1"),
    ("kv_cache.enable_prefix_caching", "false", r"kv_cache\.enable_prefix_caching: 'false' is not true or false"),
    ("kv_cache.enable_prefix_caching", 1, r"kv_cache\.enable_prefix_caching: 1 is not true or false"),
    ("kv_cache.kv_cache_memory_bytes", 24576, r"kv_cache\.kv_cache_memory_bytes: 24,576 bytes is below 1,048,576 "
                                              r"bytes \(1 MiB\); looks like MiB; give bytes"),
    ("kv_cache.kv_cache_memory_bytes", 24, r"kv_cache_memory_bytes: 24 bytes .* looks like GiB; give bytes"),
    ("kv_cache.kv_cache_memory_bytes", 2.5e9, r"kv_cache_memory_bytes: 2500000000\.0 is not a whole number of bytes"),
    ("resolved_config.scheduler_config.long_prefill_token_threshold", -1,
     r"scheduler_config\.long_prefill_token_threshold: -1 is below 0"),
    ("resolved_config.scheduler_config.scheduler_reserve_full_isl", "yes",
     r"scheduler_reserve_full_isl: 'yes' is not true or false"),
    ("engine_kwargs", [], r"meta\.json: engine_kwargs: list .*expected a JSON object"),
    ("dataset_path", 5, r"meta\.json: dataset_path: 5 is not a non-empty string"),
    ("dataset_path", DELETE, r"meta\.json: missing field 'dataset_path'"),
]


@pytest.mark.parametrize("path, value, msg", META_BAD, ids=[f"{p}={v!r}" for p, v, _ in META_BAD])
def test_bundle_meta_bad_values(tmp_path, path, value, msg):
    data = make_data(tmp_path)
    b = write_bundle(tmp_path, meta=_set(META, path, value))
    refused(lambda: load_bundle(b, data), r"meta\.json: .*" + msg if not msg.startswith("meta") else msg, BundleError)


def test_meta_gpu_memory_utilization_percent_when_config_has_none(tmp_path):
    data = make_data(tmp_path)
    b = write_bundle(tmp_path, config=_set(CONFIG, f"{I0}.npu_mem.mem_util", DELETE),
                     meta=_set(META, "kv_cache.gpu_memory_utilization", 90))
    refused(lambda: load_bundle(b, data), r"vllm/meta\.json: kv_cache\.gpu_memory_utilization: 90: a fraction in "
                                          r"\(0, 1\] is expected; did you mean 0\.90\?", BundleError)


@pytest.mark.parametrize("which, data, msg", [
    ("config", b"", r"config\.json: empty file"),
    ("config", b'{"nodes": [\n  1,\n', r"config\.json:3: not valid JSON"),
    ("config", b"[1, 2]", r"config\.json: expected a JSON object, got list"),
    ("config", b'{"link_bw": "\xff"}', r"config\.json:1: byte 0xff is not UTF-8"),
    ("config", b'{"link_bw": ' + b"9" * 5000 + b"}", r"config\.json: not valid JSON"),
    ("meta", b"   \n", r"meta\.json: empty file"),
    ("meta", b"null", r"meta\.json: expected a JSON object, got NoneType"),
])
def test_bundle_file_attacks(tmp_path, which, data, msg):
    d = make_data(tmp_path)
    b = write_bundle(tmp_path, **{f"raw_{which}": data})
    refused(lambda: load_bundle(b, d), msg, BundleError)


def test_bundle_hardware_without_profile_lists_the_profiles(tmp_path):
    from hpctwin.twin.serving.cli import run_bundle
    data = make_data(tmp_path)
    b = write_bundle(tmp_path, config=_set(CONFIG, f"{I0}.hardware", "NOPE"))
    refused(lambda: run_bundle(b, data), r"perf/NOPE/meta-llama/Llama-3\.1-8B/bf16/tp1: no timing profile for model "
                                         r"meta-llama/Llama-3\.1-8B on hardware NOPE at TP 1; available \(hardware "
                                         r"model tp\): HW meta-llama/Llama-3\.1-8B tp1$")
    refused(lambda: load_bundle(b, tmp_path / "nowhere"), r"--data-dir .*nowhere: no such directory", BundleError)


def test_bundle_kv_cache_memory_bytes_sizes_the_cache(tmp_path):
    """vLLM's kv_cache_memory_bytes (bytes per GPU) sets the blocks when num_gpu_blocks is absent:
    1 GiB / (128 KiB of Llama-3.1-8B KV per token x 16 tokens) = 512 blocks."""
    data = make_data(tmp_path)
    b = write_bundle(tmp_path, meta=_set(META, "kv_cache.kv_cache_memory_bytes", 1 << 30))
    bundle = load_bundle(b, data)
    assert bundle.kv_blocks(bundle.instances[0]) == 512
    assert bundle.build_instances()[0].kv.num_blocks == 512


# ====================================================================== profiles
def _profile(tmp_path: Path) -> Path:
    return write_profile(tmp_path / "prof" / "tp1")


PROFILE_BAD = [
    # (file, line 2 replaced by, message)
    ("dense.csv", "embedding,1,nan", r"dense\.csv:2: field 'time_us': NaN is not a time; give a finite number of "
                                     r"microseconds >= 0"),
    ("dense.csv", "embedding,1,inf", r"dense\.csv:2: field 'time_us': inf is not a time"),
    ("dense.csv", "embedding,1,-inf", r"dense\.csv:2: field 'time_us': -inf is not a time"),
    ("dense.csv", "embedding,1,-5", r"dense\.csv:2: field 'time_us': -5 is negative"),
    ("dense.csv", "embedding,1,", r"dense\.csv:2: field 'time_us': '' is not a number"),
    ("dense.csv", "embedding,1,null", r"dense\.csv:2: field 'time_us': 'null' is not a number"),
    ("dense.csv", "embedding,1,1e12", r"dense\.csv:2: field 'time_us': 1e\+12 us is 1e\+06 s for one layer's "
                                      r"kernel.*nanoseconds given for microseconds"),
    ("dense.csv", "embedding,1", r"dense\.csv:2: field 'time_us': missing"),
    ("dense.csv", "embedding,10.7,1000", r"dense\.csv:2: field 'tokens': '10\.7' is not a whole number"),
    ("dense.csv", "embedding,true,1000", r"dense\.csv:2: field 'tokens': 'true' is not a whole number"),
    ("dense.csv", "embedding,0,1000", r"dense\.csv:2: field 'tokens': 0 is outside \[1, 1,000,000,000\]"),
    ("dense.csv", "embedding,99999999999,1000", r"dense\.csv:2: field 'tokens': 99,999,999,999 is outside"),
    ("dense.csv", ",1,1000", r"dense\.csv:2: field 'layer': empty layer name"),
    ("dense.csv", "embedding,4096,1000", r"dense\.csv:3: duplicate row for layer=embedding, tokens=4096 \(first at "
                                         r"line 2\)"),
    ("per_sequence.csv", "lm_head,-1,1000", r"per_sequence\.csv:2: field 'sequences': '-1' is not a whole number"),
    ("attention.csv", "0,0,NaN,0,1000", r"attention\.csv:2: field 'n_decode': 'NaN' is not a whole number"),
    ("attention.csv", "0,0,256,0,-1", r"attention\.csv:2: field 'time_us': -1 is negative"),
]


@pytest.mark.parametrize("name, row, msg", PROFILE_BAD, ids=[f"{n}:{r}" for n, r, _ in PROFILE_BAD])
def test_profile_bad_values(tmp_path, name, row, msg):
    folder = _profile(tmp_path)
    lines = (folder / name).read_text().splitlines()
    lines[1] = row
    (folder / name).write_text("\n".join(lines) + "\n")
    refused(lambda: LayerProfile.load(folder), msg, ProfileError)


@pytest.mark.parametrize("data, msg", [
    (b"", r"dense\.csv: empty file"),
    (b"layer,tokens,time_us\n", r"dense\.csv: holds no row"),
    (b"layer,tokens\nembedding,1\n", r"dense\.csv:1: missing column\(s\) time_us"),
    (b"layer,tokens,time_us\nembedding,1,\xff\n", r"dense\.csv:2: byte 0xff is not UTF-8"),
    (_gz(b"layer,tokens,time_us\nembedding,1,1\n"), r"dense\.csv:1: byte 0x8b is not UTF-8 text.*gzip data"),
])
def test_profile_file_attacks(tmp_path, data, msg):
    folder = _profile(tmp_path)
    (folder / "dense.csv").write_bytes(data)
    refused(lambda: LayerProfile.load(folder), msg, ProfileError)


def test_profile_extra_columns_accepted_and_limits(tmp_path, monkeypatch):
    from hpctwin.twin.serving import profiles
    folder = _profile(tmp_path)
    text = (folder / "dense.csv").read_text().splitlines()
    (folder / "dense.csv").write_text("\n".join([text[0] + ",std_us"] + [t + ",3" for t in text[1:]]) + "\n")
    ref = IterationModel(TINY, LayerProfile.load(write_profile(tmp_path / "ref"))).iteration_s(8, 2, 4, 0, 4, 10)
    assert IterationModel(TINY, LayerProfile.load(folder)).iteration_s(8, 2, 4, 0, 4, 10) == ref
    monkeypatch.setattr(profiles, "MAX_PROFILE_ROWS", 5)
    refused(lambda: LayerProfile.load(folder), r"dense\.csv:7: more than 5 rows", ProfileError)
    monkeypatch.setattr(profiles, "MAX_PROFILE_ROWS", 2_000_000)
    monkeypatch.setattr(profiles, "MAX_TABLE_POINTS", 1)
    refused(lambda: LayerProfile.load(folder), r"dense\.csv: layer \w+: 2 grid points, more than the limit of 1",
            ProfileError)
    monkeypatch.setattr(profiles, "MAX_TABLE_POINTS", 20_000)
    monkeypatch.setattr(profiles, "MAX_ATTENTION_SLICES", 2)
    refused(lambda: LayerProfile.load(folder), r"attention\.csv: 3 \(prefill_chunk, n_decode\) slices, more than "
                                               r"the limit of 2", ProfileError)


def test_skew_alpha_must_be_finite(tmp_path):
    from hpctwin.twin.serving.profiles import skew_alpha_from_meta
    p = tmp_path / "meta.yaml"
    p.write_text("skew_fit:\n  enabled: true\n  per_tp:\n    1:\n      alpha_default: nan\n")
    refused(lambda: skew_alpha_from_meta(p, 1), r"meta\.yaml: skew_fit\.per_tp\.1\.alpha_default: nan must be a "
                                                r"finite number >= 0", ProfileError)


# ====================================================================== hpctwin serve
def _serve(argv: list[str], capsys) -> tuple[int, str]:
    from hpctwin.twin.serving.cli import main
    try:
        rc = main(argv)
    except SystemExit as e:                 # argparse: usage, then one error line
        rc = e.code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return rc, err.strip().splitlines()[-1] if err.strip() else ""


SERVE_BAD = [
    (["--max-num-seqs", "0"], r"argument --max-num-seqs: 0 sequences: give an integer in \[1, 1,000,000\]"),
    (["--max-num-batched-tokens", "0"], r"argument --max-num-batched-tokens: 0 tokens: give an integer"),
    (["--tp", "0"], r"argument --tp: 0 GPUs: give an integer in \[1, 1,024\]"),
    (["--tp", "-1"], r"argument --tp: -1 GPUs"),
    (["--instances", "0"], r"argument --instances: 0 instances: give an integer in \[1, 10,000\]"),
    (["--instances", "2.5"], r"argument --instances: '2\.5' is not a whole number"),
    (["--instances", "true"], r"argument --instances: 'true' is not a whole number"),
    (["--instances", "1000000"], r"argument --instances: 1000000 instances: give an integer in \[1, 10,000\]"),
    (["--prefill", "-1"], r"argument --prefill: -1 instances"),
    (["--max-num-seqs", "nan"], r"argument --max-num-seqs: 'nan' is not a whole number"),
    (["--kv-d2d-GBps", "nan"], r"argument --kv-d2d-GBps: NaN is not a finite number"),
    (["--kv-d2d-GBps", "-1"], r"argument --kv-d2d-GBps: -1 must be > 0 GB/s"),
    (["--kv-d2d-GBps", "abc"], r"argument --kv-d2d-GBps: 'abc' is not a number"),
    (["--data-dir", "/nonexistent/dir"], r"argument --data-dir: /nonexistent/dir: no such directory"),
    (["--model", "foo/bar"], r"model 'foo/bar': unknown model; profiles on RTX4090 \(model tp\): "
                             r"meta-llama/Llama-3\.1-8B tp1$"),
    (["--hardware", "H100"], r"hardware 'H100': unknown GPU type; known: RTX4090, RTXPRO6000 \(profiles under .*: "
                             r"RTX4090 meta-llama/Llama-3\.1-8B tp1\)"),
    (["--tp", "2"], r"no timing profile for model meta-llama/Llama-3\.1-8B on hardware RTX4090 at TP 2; available "
                    r"\(hardware model tp\): RTX4090 meta-llama/Llama-3\.1-8B tp1$"),
    (["--prefill", "1"], r"--prefill and --decode go together"),
    (["--prefill", "1", "--decode", "1", "--instances", "2"], r"--instances sizes a colocated pool"),
]


@pytest.mark.parametrize("extra, msg", SERVE_BAD, ids=[" ".join(a) for a, _ in SERVE_BAD])
def test_serve_bad_options(tmp_path, capsys, extra, msg):
    data = make_data(tmp_path, hw="RTX4090")
    tr = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    tr.write_text(f"{AZ_HEAD}\n{AZ_OK}\n")
    argv = ["--trace", str(tr), "--hardware", "RTX4090", "--data-dir", str(data), "--out", str(tmp_path / "o"), "-q"]
    rc, line = _serve(argv + extra, capsys)
    assert rc == 2 and line.startswith("hpctwin serve: error: ") and re.search(msg, line), line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("content, msg", [
    ('{"timestamp": NaN, "input_length": 10, "output_length": 3}\n',
     r"conversation_trace\.jsonl:1: field 'timestamp': NaN is not a time"),
    ("", r"conversation_trace\.jsonl: holds no request"),
])
def test_serve_bad_trace_is_a_located_error(tmp_path, capsys, content, msg):
    data = make_data(tmp_path, hw="RTX4090")
    tr = tmp_path / "conversation_trace.jsonl"
    tr.write_text(content)
    rc, line = _serve(["--trace", str(tr), "--hardware", "RTX4090", "--data-dir", str(data), "--out",
                       str(tmp_path / "o"), "-q"], capsys)
    assert rc == 2 and re.search(msg, line), line


def test_serve_bad_bundle_is_a_located_error(tmp_path, capsys):
    data = make_data(tmp_path)
    b = write_bundle(tmp_path, config=_set(CONFIG, f"{I0}.npu_mem.mem_util", 90))
    rc, line = _serve(["--bundle", str(b), "--data-dir", str(data), "--out", str(tmp_path / "o"), "-q"], capsys)
    assert rc == 2 and re.search(r"config\.json: nodes\[0\]\.instances\[0\]\.npu_mem\.mem_util: 90: a fraction in "
                                 r"\(0, 1\] is expected; did you mean 0\.90\?$", line), line


# ====================================================================== --set serving options
SET_BAD = [
    # (key, value, message) at the option-schema level (twin.options, before anything is loaded)
    ("tp", 2.5, r"--set: serving\.tp: expected an integer, got 2\.5"),
    ("tp", True, r"--set: serving\.tp: expected an integer, got True"),
    ("tp", "2", r"--set: serving\.tp: expected an integer, got '2'"),
    ("tp", 0, r"--set: serving\.tp: 0 must be >= 1"),
    ("interval_s", math.nan, r"--set: serving\.interval_s: expected a finite number, got nan"),
    ("interval_s", -math.inf, r"--set: serving\.interval_s: expected a finite number"),
    ("interval_s", 0.0, r"--set: serving\.interval_s: 0\.0 must be > 0"),
    ("max_instances", 10 ** 5, r"--set: serving\.max_instances: 100000 must be <= 10,000"),
    ("slots", 2_000_000, r"--set: serving\.slots: 2000000 must be <= 1,000,000"),
    ("max_num_seqs", 0, r"--set: serving\.max_num_seqs: 0 must be >= 1"),
    ("load_GBps", 7e9, r"--set: serving\.load_GBps: 7000000000\.0 must be <= 200,000"),
    ("kv_latency_s", 5.0, r"--set: serving\.kv_latency_s: 5\.0 must be <= 1"),
    ("warm_start", "yes", r"--set: serving\.warm_start: expected true or false"),
    ("interva_s", 15.0, r"--set: serving\.interva_s: unknown key \(did you mean 'interval_s'\?\)"),
]


@pytest.mark.parametrize("key, value, msg", SET_BAD, ids=[f"{k}={v!r}" for k, v, _ in SET_BAD])
def test_set_serving_options_schema(key, value, msg):
    from hpctwin.twin.options import ConfigError, check_set_options
    refused(lambda: check_set_options({"serving": {"trace": "t.csv", key: value}}, "easy", failures=False,
                                      power=False, network=False), msg, ConfigError)


CFG_BAD = [
    # (key, value, message) at the config level (twin.serving.batch: a Python caller or a config file)
    ("target", 70.0, r"serving\.target: 70: a fraction in \(0, 1\] is expected; did you mean 0\.70\?"),
    ("target", math.nan, r"serving\.target: NaN is not a finite number"),
    ("tp", True, r"serving\.tp: true is not a whole number"),
    ("tp", 2.5, r"serving\.tp: 2\.5 is not a whole number"),
    ("max_num_seqs", "256", r"serving\.max_num_seqs: '256' is not a whole number"),
    ("interval_s", math.inf, r"serving\.interval_s: Infinity is not a finite number"),
    ("warm_start", 1, r"serving\.warm_start: 1 is not true or false"),
    ("start_s", 1e300, r"serving\.start_s: 1e\+300 s is more than the plausible limit"),
    ("max_instances", 10 ** 6, r"serving\.max_instances: 1,000,000 is more than the limit of 10,000 instances"),
    ("trace", 5, r"serving\.trace: 5 is not a string"),
]


@pytest.mark.parametrize("key, value, msg", CFG_BAD, ids=[f"{k}={v!r}" for k, v, _ in CFG_BAD])
def test_serving_config_checks(key, value, msg):
    from hpctwin.twin.serving.batch import ServingBatchConfig
    refused(lambda: ServingBatchConfig.from_options({"trace": "t.csv", key: value}), r"option serving: " + msg)


def _batch_model(trace, pd: bool = False, weights=(0.0, 0.0), **cfg):
    from hpctwin.twin.serving.batch import ServingBatchConfig, ServingBatchModel
    from hpctwin.twin.serving.batch_pd import ServingBatchPDModel

    from .test_serving_batch import make_const
    c = ServingBatchConfig.from_options(dict(dict(trace="t.csv", interval_s=15.0, startup_s=5.0), **cfg))
    reqs = [ServingRequest(*r) for r in trace]
    if pd:
        return ServingBatchPDModel(c, reqs, make_const, make_const, weight_bytes=weights)
    return ServingBatchModel(c, reqs, make_const, weight_bytes_per_gpu=weights[0])


HOUR = [(0.0, 10, 3), (3600.0, 10, 3)]
WORK_BAD = [
    # (trace, options, P/D, weights per GPU (bytes), message): options that would make the run endless
    (HOUR, dict(interval_s=1e-9), False, (0, 0),
     r"serving\.interval_s: 1e-09 s over 3,605 s \(the trace spans 3,600 s, plus a 5 s cold start\) is 3\.6e\+12 "
     r"controller ticks, more than 10,000,000; give an interval of at least 0\.00036 s"),
    (HOUR, dict(interval_s=1e-9, time_scale=2.0), False, (0, 0),
     r"serving\.interval_s: 1e-09 s over 7,205 s \(the trace spans 3,600 s \(x time_scale 2 = 7,200 s\), plus a 5 s "
     r"cold start\)"),
    (HOUR, dict(startup_s=1e12), False, (0, 0),
     r"serving\.startup_s = 1e\+12: an instance's cold start would take 1e\+12 s .*more than a day \(86,400 s\); "
     r"the trace spans 3,600 s"),
    (HOUR, dict(load_GBps=1e-9), False, (16e9, 0),
     r"serving\.load_GBps = 1e-09: an instance's cold start would take 1\.6e\+10 s"),
    (HOUR, dict(load_GBps=1e-9), True, (0, 16e9),
     r"serving\.load_GBps = 1e-09: an instance's cold start would take 1\.6e\+10 s"),   # the decode pool's
    (HOUR, dict(time_scale=1e300), False, (0, 0),
     r"serving\.time_scale = 1e\+300: the trace spans 3,600 s \(x time_scale 1e\+300 = .*\), more than 10 years"),
    (HOUR, dict(lease_s=24.0, renew_s=20.0), False, (0, 0),
     r"serving\.lease_s = 24 s: an instance serves from its cold start \(5 s\) until renew_s = 20 s before its "
     r"lease ends.*give lease_s > 25 s"),
]


@pytest.mark.parametrize("trace, opts, pd, weights, msg", WORK_BAD, ids=[str(o) for _, o, _, _, _ in WORK_BAD])
def test_endless_options_are_refused_up_front(trace, opts, pd, weights, msg):
    refused(lambda: _batch_model(trace, pd=pd, weights=weights, **opts), r"option serving: " + msg)


def test_large_valid_serving_runs_are_not_refused():
    """A day's trace at the HPA's 15 s, ten days at 1 s, a one-day cold start, 10,000 instances' slots:
    within the limits (built only; the limits are about 100 x beyond the repository's largest use)."""
    day = [(0.0, 10, 3), (86400.0, 10, 3)]
    _batch_model(day)
    _batch_model([(0.0, 10, 3), (864000.0, 10, 3)], interval_s=1.0)
    _batch_model(day, startup_s=86000.0, lease_s=200000.0)
    _batch_model(day, max_instances=10_000, slots=0)


def test_standalone_autoscaler_refuses_endless_options():
    from hpctwin.twin.serving.autoscale import FixedPolicy, RatioPolicy, UtilizationPolicy, simulate_autoscaled
    from .test_serving_batch import make_const
    trace = [ServingRequest(0.0, 10, 3), ServingRequest(3600.0, 10, 3)]
    refused(lambda: simulate_autoscaled(trace, make_const, FixedPolicy(1), 1, 2, cold_start=0.0, interval_s=1e-9),
            r"interval_s: 1e-09 s over the trace's 3,600 s plus a 0 s cold start is 3\.6e\+12 controller ticks")
    refused(lambda: simulate_autoscaled(trace, make_const, FixedPolicy(1), 1, 2, cold_start=math.nan),
            r"cold_start: NaN is not a finite number")
    refused(lambda: simulate_autoscaled(trace, make_const, FixedPolicy(1), 1, 2, cold_start=1e6),
            r"cold_start: 1,000,000 s is more than the plausible limit of 86,400 s; a cold start is at most a day")
    refused(lambda: simulate_autoscaled(trace, make_const, FixedPolicy(1), 0, 2, cold_start=0.0),
            r"min_instances: 0 is below 1")
    refused(lambda: UtilizationPolicy(70), r"utilisation target: 70: a fraction in \(0, 1\] is expected; did you "
                                           r"mean 0\.70\?")
    refused(lambda: RatioPolicy(FixedPolicy(1), math.nan), r"the P/D ratio: NaN is not a finite number")


def test_engine_building_blocks_refuse_bad_sizes():
    refused(lambda: BlockManager(0, 16), r"KV cache has 0 blocks; at least 1 is needed")
    refused(lambda: BlockManager(10, 0), r"KV cache: block_size = 0 tokens; give an integer in \[1, 4,096\]")
    refused(lambda: BlockManager(10.5, 16), r"KV cache: num_blocks = 10\.5 is not a whole number")
    refused(lambda: BlockManager(10 ** 9, 16), r"KV cache of 1,000,000,000 blocks: more than the limit of 10,000,000")
    from hpctwin.twin.serving.deployment import PoolSpec
    refused(lambda: PoolSpec("RTX4090", MODEL, mem_util=90), r"gpu_memory_utilization: 90: a fraction in \(0, 1\] "
                                                            r"is expected; did you mean 0\.90\?")
    refused(lambda: PoolSpec("RTX4090", MODEL, max_num_seqs=0), r"max_num_seqs: 0 is below 1")
    refused(lambda: PoolSpec("RTX4090", MODEL, block_size=0), r"block_size: 0 is below 1")
    refused(lambda: PoolSpec("RTX4090", MODEL, tp=True), r"tp: true is not a whole number")
    from hpctwin.twin.serving.kvflow import KVNetworkError, d2d_of, place_instances
    refused(lambda: d2d_of("RTX4090", math.nan), r"device-to-device bandwidth .*: NaN is not a finite number",
            KVNetworkError)
    refused(lambda: d2d_of("RTX4090", -16.0), r"must be > 0 GB/s", KVNetworkError)
    refused(lambda: place_instances([1, 1], 1, 8, 2, [0, 0.5]), r"placement: node id 0\.5 is not a whole number",
            KVNetworkError)


# ====================================================================== every serving mode keeps the invariants
def _trace(n: int = 60, seed: int = 3) -> list[ServingRequest]:
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        t += rng.expovariate(4.0)
        out.append(ServingRequest(t, rng.randint(1, 60), rng.randint(1, 40)))
    return out


@pytest.fixture
def const(tmp_path):
    return IterationModel(TINY, LayerProfile.load(write_profile(tmp_path / "p")))


def _pool(model, n: int, first: int = 0, blocks: int = 40) -> list[Instance]:
    out = [Instance(first + k, model, BlockManager(blocks, 4), 8, 32) for k in range(n)]
    for x in out:
        x.series = []
    return out


def test_colocated_keeps_invariants_and_is_deterministic(const):
    tr = _trace()
    res = simulate(tr, _pool(const, 2, blocks=26), router="least_loaded")
    check_serving_result(res, trace=tr)
    assert sum(r.preemptions for r in res.requests) > 0        # the small KV cache was under pressure
    check_deterministic(lambda: simulate(tr, _pool(const, 2, blocks=26), router="least_loaded"))


def test_pd_keeps_invariants(const):
    from hpctwin.twin.serving.pd import simulate_pd
    tr = _trace()
    res = simulate_pd(tr, _pool(const, 1), _pool(const, 2, first=1))
    check_serving_result(res, trace=tr)
    assert {r.prefill_instance for r in res.requests if r.output > 1} == {0}
    check_deterministic(lambda: simulate_pd(tr, _pool(const, 1), _pool(const, 2, first=1)))


@pytest.mark.parametrize("pd", [False, True])
def test_autoscaled_keeps_invariants(const, pd):
    from hpctwin.twin.serving.autoscale import DecodeTPSPolicy, RatioPolicy, UtilizationPolicy, simulate_autoscaled
    tr = _trace(120)

    def make(iid):
        return _pool(const, 1, first=iid, blocks=200)[0]

    def run():
        pol = RatioPolicy(DecodeTPSPolicy(50.0, window_s=30), 0.5) if pd else UtilizationPolicy(0.5, window_s=30)
        return simulate_autoscaled(tr, make, pol, 2, 6, cold_start=2.0, interval_s=5.0,
                                   make_decode=make if pd else None)[0]
    res = run()
    check_serving_result(res, trace=tr)
    check_deterministic(run)


def test_batch_machine_keeps_invariants():
    from .test_serving_batch import Steps, run_case
    tr = [(r.arrival_s, r.input_tokens, r.output_tokens) for r in _trace(80)]
    _res, _df, m = run_case([(0, 2, 20, 30), (5, 3, 10, 10)], tr, total=4, policy=Steps([0, 12], [1, 3]),
                          max_instances=3)
    check_serving_result(m, trace=[ServingRequest(*r) for r in tr])
    assert len(m.insts) >= 2
    check_deterministic(lambda: run_case([(0, 2, 20, 30), (5, 3, 10, 10)], tr, total=4,
                                         policy=Steps([0, 12], [1, 3]), max_instances=3)[2])


def test_batch_pd_keeps_invariants():
    from .test_serving_batch_pd import run_pd
    tr = [(r.arrival_s, r.input_tokens, r.output_tokens) for r in _trace(80)]
    _res, _df, m = run_pd([(0, 1, 20, 30)], tr, total=4, decode_instances=2, decode_max_instances=4)
    check_serving_result(m, trace=[ServingRequest(*r) for r in tr])
    assert {i.pool for i in m.insts} == {"prefill", "decode"}
    check_deterministic(lambda: run_pd([(0, 1, 20, 30)], tr, total=4, decode_instances=2,
                                       decode_max_instances=4)[2])


def test_serve_cli_keeps_invariants_and_same_bytes(tmp_path):
    """``hpctwin serve`` on a bundle and on a trace: the invariants hold on the result (KV from the kept
    timeseries), and a second run writes the same bytes."""
    from hpctwin.twin.serving.cli import main, run_bundle
    data = make_data(tmp_path)
    b = write_bundle(tmp_path)
    _, res = run_bundle(b, data, series=True)
    check_serving_result(res, trace=read_llmservingsim(data / "LLM-serving" / "LLMServingSim" / "workloads" /
                                                        "w.jsonl"))
    outs = []
    for k in range(2):
        out = tmp_path / f"o{k}"
        assert main(["--bundle", str(b), "--data-dir", str(data), "--out", str(out), "-q"]) == 0
        outs.append({f: (out / f).read_bytes() for f in ("requests.csv", "summary.json", "timeseries.csv")})
    assert outs[0]["requests.csv"] == outs[1]["requests.csv"] and outs[0]["timeseries.csv"] == outs[1]["timeseries.csv"]
    assert json.loads(outs[0]["summary.json"]) == json.loads(outs[1]["summary.json"])
    assert outcome_bytes(res)


@pytest.mark.slow
def test_real_bundle_keeps_invariants():
    """The RTX 4090 bench bundle of the data directory (300 ShareGPT requests, prefix caching on)."""
    from hpctwin.datasets.registry import default_data_dir
    from hpctwin.twin.serving.cli import run_bundle
    d = Path(default_data_dir(None))
    b = d / "LLM-serving" / "LLMServingSim" / "bench" / "RTX4090" / "Llama-3.1-8B"
    if not b.exists():
        pytest.skip("no LLMServingSim bundle in the data directory")
    bundle, res = run_bundle(b, d, series=True)
    check_serving_result(res, trace=bundle.workload())
    assert max(kv for x in res.instances for _, _, _, kv, _ in x.series) <= res.instances[0].kv.num_blocks == 2588


@pytest.mark.parametrize("opt, msg", [
    ("serving.interval_s=1e-9", r"option serving: serving\.interval_s: 1e-09 s over .* controller ticks, more than "
                                r"10,000,000; give an interval of at least"),
    ("serving.startup_s=1e12", r"option serving: serving\.startup_s = 1e\+12: .*more than a day \(86,400 s\); the "
                               r"trace spans 2\.5 s"),
    ("serving.target=70", r"option serving: serving\.target: 70: .*did you mean 0\.70\?"),
    ("serving.model=foo/bar", r"model 'foo/bar': unknown model; profiles on RTXPRO6000 \(model tp\): "
                              r"meta-llama/Llama-3\.1-8B tp1"),
])
def test_hpctwin_run_refuses_serving_options_up_front(tmp_path, capsys, opt, msg):
    """``hpctwin run --set serving.KEY=V``: a one-line error, exit 2, before the simulation."""
    from hpctwin.twin.cli import main
    data = make_data(tmp_path, hw="RTXPRO6000")
    tr = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    tr.write_text(f"{AZ_HEAD}\n2023-11-16 18:15:46.0,374,44\n2023-11-16 18:15:48.5,374,44\n")
    rc = main(["run", "--workload", "synthetic:jobs=5", "--nodes", "4", "--data-dir", str(data), "--out",
               str(tmp_path / "o"), "--set", f"serving.trace={tr}", "--set", opt])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and "Traceback" not in "\n".join(err) and re.search(msg, err[-1]), err
