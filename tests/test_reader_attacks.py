"""Issue 23 items 7-8: the workload readers under a generated bad-input matrix.

Every case ends in one of two ways, and the test says which: a located error (the file, the line and
the field are named in the message), or a line skipped and counted (the count is asserted, in
``Workload.dropped`` for the reader, in the run's ``skipped`` for what the run decides). Never a
traceback, never a nonsensical value accepted silently.

Classes attacked: SWF (each of the 18 fields: "nan" text, a fraction in an integer field, a 20-digit
number, 1e30, -7 where SWF allows only -1, hex, unicode digits; missing and extra fields; non-UTF-8
bytes; CRLF; header lines with bad values; an empty file; a file of only comments; a job larger than
the header's machine), sacct ``-P`` dumps (missing columns, Unknown/None times, Elapsed forms, bad TRES,
a repeated header, job steps) with the GPU counts of ReqTRES/AllocTRES, and the GPU trace readers
(Alibaba 2023 pods, Alibaba 2025 DLRM, Helios, Philly).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpctwin.datasets.gpu_traces import GPUTraceError, read_alibaba_dlrm2025, read_alibaba_gpu2023, read_helios, read_philly
from hpctwin.datasets.loader import load_workload
from hpctwin.datasets.registry import DatasetError
from hpctwin.datasets.sacct import SacctError, parse_tres, read_sacct, tres_gpus
from hpctwin.datasets.swf import FIELDS, SWFError, read_swf
from hpctwin.twin.cli import main
from hpctwin.twin.run import prepare

# ----------------------------------------------------------------------------------------------- SWF
HDR = "; MaxProcs: 16\n"
#: job 1 (attacked, line 2) and job 2 (line 3), both valid as written
J1 = "1 0 5 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1"
J2 = "2 10 0 50 2 1.5 -1 -1 60 -1 1 2 1 -1 1 -1 -1 -1"
TIME = {"submit", "wait", "run", "avg_cpu", "req_time", "think"}
#: fields whose only negative value is -1 (another negative skips the line, counted)
NONNEG = {"job", "wait", "alloc_procs", "avg_cpu", "used_mem", "req_procs", "req_time", "req_mem", "user", "group",
          "exe", "queue", "partition", "prec_job", "think"}


def swf_line(k: int, tok: str) -> str:
    """J1 with field ``k`` (1-based) replaced by ``tok``."""
    t = J1.split()
    t[k - 1] = tok
    return " ".join(t)


def write_swf(tmp_path: Path, body: str | bytes, name: str = "w.swf") -> Path:
    p = tmp_path / name
    (p.write_bytes if isinstance(body, bytes) else p.write_text)(body)
    return p


def swf_expect(k: int, tok: str) -> str | None:
    """The located error a token in field ``k`` gets, or None when the reader keeps or skips the line."""
    name = FIELDS[k - 1]
    label = f"w.swf:2: field {k} ({name}): "
    if tok in ("nan", "0x10", "1_000", "\u0661\u0662", "inf", "4e", ""):
        return label + f"{tok!r} is not a number"
    if tok == "2.5":
        return None if name == "avg_cpu" else label + "'2.5' is not an integer"
    if tok in ("99999999999999999999", "1e30"):
        return label + (f"{tok!r} s is beyond" if name in TIME else f"{tok!r} is out of range for a 64-bit integer")
    if tok == "-7" and name == "submit":
        return label + "negative submit time -7"
    return None


BAD_TOKENS = ["nan", "2.5", "99999999999999999999", "1e30", "-7", "0x10", "1_000", "\u0661\u0662", "inf"]
SWF_CELLS = [(k, tok) for k in range(1, 19) for tok in BAD_TOKENS]


@pytest.mark.parametrize("k, tok", SWF_CELLS, ids=[f"f{k}-{FIELDS[k - 1]}-{t.encode('unicode_escape').decode()}"
                                                   for k, t in SWF_CELLS])
def test_swf_field_matrix(tmp_path, k, tok):
    """Each field x each bad token: a located error, or the line kept with a stated meaning, or skipped
    and counted (by the reader: negative_value; by the run: runtime_le_0)."""
    p = write_swf(tmp_path, HDR + swf_line(k, tok) + "\n" + J2 + "\n")
    name = FIELDS[k - 1]
    want = swf_expect(k, tok)
    if want is not None:
        with pytest.raises(SWFError) as e:
            read_swf(p)
        assert str(e.value).startswith(str(p)) and want in str(e.value), str(e.value)
        return
    wl = read_swf(p)
    if tok == "-7" and name in NONNEG:             # skipped and counted by the reader; strict refuses
        assert len(wl) == 1 and wl.dropped == {"negative_value": 1} and wl.job_id.tolist() == [2]
        assert any(f"w.swf:2: field {k} ({name}): -7" in n and "1 job lines skipped" in n for n in wl.notes)
        with pytest.raises(SWFError, match=re.escape(f"w.swf:2: field {k} ({name}): -7 is negative (SWF's only "
                                                     "negative value is -1, unknown)")):
            read_swf(p, strict=True)
        return
    assert wl.dropped == {} and len(wl) == 2
    i = wl.job_id.tolist().index(1)
    if name == "run":                               # kept; the run skips it and counts it
        assert wl.runtime[i] == -7
        assert prepare(wl, 16, "test").skipped == {"runtime_le_0": 1}
    elif name == "status":                          # a free integer code (Sandia-Ross keeps exit codes there)
        assert wl.status[i] == -7
    elif name == "avg_cpu":
        assert wl.columns["avg_cpu"][i] == 2.5
    else:
        raise AssertionError(f"field {k} ({name}) {tok!r}: accepted without a stated meaning")


def test_swf_minus_one_is_unknown_in_every_field(tmp_path):
    """-1 (SWF's "unknown") in every field but the job number is read, never skipped by the reader."""
    line = "7 " + " ".join(["-1"] * 17)
    wl = read_swf(write_swf(tmp_path, HDR + line + "\n" + J2 + "\n"))
    assert len(wl) == 2 and wl.dropped == {}
    assert np.isnan(wl.requested_time[wl.job_id.tolist().index(7)])
    assert prepare(wl, 16, "test").skipped == {"submit_unknown": 1}


@pytest.mark.parametrize("body, want", [
    (HDR + " ".join(J1.split()[:17]) + "\n", "w.swf:2: expected 18 fields, found 17"),
    (HDR + J1 + " 9\n" + J2 + "\n", "w.swf:2: expected 18 fields, found 19"),
    (HDR + J2 + "\n" + J1 + " 9 9\n", "w.swf:3: expected 18 fields, found 20"),
    (HDR.encode() + swf_line(4, "1\xff0").encode("latin-1") + b"\n", "w.swf:2: field 4 (run): '1\xff0' is not a number"),
    ("; MaxProcs: 12x\n" + J1 + "\n", "w.swf:1: header field MaxProcs: '12x' is not an integer"),
    (b"; MaxProcs: 1\xff28\n" + J1.encode() + b"\n", "w.swf:1: header field MaxProcs: '1\xff28' is not an integer"),
    ("; MaxProcs: -5\n" + J1 + "\n", "w.swf:1: header field MaxProcs: -5 is not a machine size"),
    ("; MaxNodes: 0\n" + J1 + "\n", "w.swf:1: header field MaxNodes: 0 is not a machine size"),
    ("; MaxRecords: -3\n" + J1 + "\n", "w.swf:1: header field MaxRecords: -3 is not a number of jobs"),
    ("; MaxRecords: 1\n" + J1 + "\n" + J2 + "\n", "w.swf:3: header field MaxRecords (line 1) says 1 job lines but this is job line 2"),
    ("; UnixStartTime: soon\n" + J1 + "\n", "w.swf:1: header field UnixStartTime: 'soon' is not an integer"),
    ("; MaxJobs: 99999999999999999999999\n" + J1 + "\n", "w.swf:1: header field MaxJobs: '99999999999999999999999' is out of range"),
    (HDR + J1 + "\n" + J1 + "\n", "w.swf:3: field 1 (job): job id 1 repeats line 2"),
], ids=["17-fields", "19-fields", "20-fields-later", "non-utf8-in-a-field", "header-12x", "header-non-utf8-digit",
        "header-negative-size", "header-zero-nodes", "header-negative-records", "header-too-few-records",
        "header-unixstart-text", "header-huge-jobs", "duplicate-id"])
def test_swf_shape_and_header_errors_are_located(tmp_path, body, want):
    p = write_swf(tmp_path, body)
    with pytest.raises(SWFError) as e:
        read_swf(p)
    assert str(e.value).startswith(str(p)) and want in str(e.value), str(e.value)


def test_swf_crlf_bom_comments_and_blank_lines_read_as_plain(tmp_path):
    plain = read_swf(write_swf(tmp_path, HDR + J1 + "\n" + J2 + "\n", "a.swf"))
    odd = read_swf(write_swf(tmp_path, b"\xef\xbb\xbf; MaxProcs: 16\r\n; caf\xe9 \xff comment\r\n\r\n"
                             + (J1 + "\r\n\r\n" + J2 + " ; trailing comment\r\n").encode(), "b.swf"))
    for f in ("job_id", "submit", "runtime", "procs", "status", "user"):
        assert getattr(odd, f).tolist() == getattr(plain, f).tolist(), f
    assert odd.machine_size == plain.machine_size == 16
    assert odd.columns["line"].tolist() == [4, 6]


@pytest.mark.parametrize("body", ["", "; Version: 2.2\n; Computer: x\n;\n", "\n\n   \n"], ids=["empty", "only-comments", "blank"])
def test_swf_without_job_lines(tmp_path, capsys, body):
    """No job line: the reader returns no job; the run refuses with one located line."""
    p = write_swf(tmp_path, body)
    assert len(read_swf(p)) == 0
    assert main(["run", "-w", str(p), "-o", str(tmp_path / "o"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hpctwin: error: ") and f"{p}: workload 'w': no job records" in err and "Traceback" not in err


def test_swf_job_larger_than_header_machine_is_skipped_and_counted(tmp_path, capsys):
    """Item 2: one job that ran on more processors than MaxProcs no longer refuses the whole log."""
    big = swf_line(5, "64")                       # ran 100 s on 64 processors of a 16-processor machine
    p = write_swf(tmp_path, HDR + J2 + "\n" + big.replace("1 ", "3 ", 1) + "\n" + swf_line(1, "4") + "\n")
    wl = read_swf(p)
    assert wl.job_id.tolist() == [2, 4] and wl.dropped == {"larger_than_header_machine": 1}
    assert any("1 job lines skipped: the job ran on more processors (field 5) than the header's MaxProcs (line 1)"
               in n and "w.swf:3: field 5 (alloc_procs)" in n for n in wl.notes)
    with pytest.raises(SWFError, match=re.escape("w.swf:3: field 5 (alloc_procs): the job ran on 64 processors but "
                                                 "the header's MaxProcs (line 1) says the machine has 16")):
        read_swf(p, strict=True)
    assert len(read_swf(p, header_check=False)) == 3          # kept: the run judges them
    with pytest.raises(SWFError, match=r"w.swf:3: field 5 \(alloc_procs\)"):   # the loader passes strict on
        load_workload(f"swf:{p}", options={"strict": True})
    # the command line: skipped and counted in the run's accounting; --set workload.strict=true refuses
    assert main(["run", "-w", str(p), "-o", str(tmp_path / "o"), "-q"]) == 0
    acc = json.loads((tmp_path / "o" / "summary.json").read_text())["accounting"]
    assert acc["records"] == 3 and acc["dropped_by_reader"] == {"larger_than_header_machine": 1} and acc["balanced"]
    assert main(["run", "-w", str(p), "-o", str(tmp_path / "o2"), "-q", "--set", "workload.strict=true"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "w.swf:3: field 5 (alloc_procs): the job ran on 64 processors" in err


def test_strict_applies_to_swf_only(tmp_path):
    p = tmp_path / "d.sacct"
    p.write_text(SH + "\n" + S1 + "\n")
    with pytest.raises(DatasetError, match="--set workload.strict: applies to SWF logs only"):
        load_workload(f"sacct:{p}", options={"strict": True})


SWF_POOL = ["1", "0", "-1", "-7", "3", "250", "2.5", "nan", "1e30", "99999999999999999999", "x", "-0", "+4", "1e5"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.lists(st.tuples(st.integers(1, 18), st.sampled_from(SWF_POOL)), max_size=3),
                      min_size=1, max_size=5),
       header=st.sampled_from(["", HDR, "; MaxProcs: 8\n", "; MaxNodes: 300 (batch)\n"]))
def test_fuzz_swf_fields_located_error_or_counted(tmp_path_factory, edits, header):
    """Random field edits on valid lines: a located error naming the line, or a workload whose kept jobs
    hold no negative value but -1 where SWF forbids one, with every line kept or counted."""
    lines = []
    for j, row in enumerate(edits, start=1):
        t = J1.split()
        t[0] = str(j)
        for k, tok in row:
            t[k - 1] = tok
        lines.append(" ".join(t))
    p = tmp_path_factory.mktemp("fz") / "f.swf"
    p.write_text(header + "\n".join(lines) + "\n")
    try:
        wl = read_swf(p)
    except SWFError as e:
        assert re.match(re.escape(str(p)) + r":\d+: (field \d+ \(\w+\)|header field|expected 18 fields)", str(e)), e
        return
    assert len(wl) + sum(wl.dropped.values()) == len(lines)
    for col in ("alloc_procs", "req_procs", "used_mem", "req_mem", "wait_recorded", "avg_cpu"):
        v = np.asarray(wl.columns[col], dtype=float)
        assert ((v >= 0) | (v == -1)).all(), col
    for v in (wl.job_id, wl.user, wl.group, wl.queue, wl.partition):
        assert (v >= -1).all()
    assert np.isfinite(wl.submit).all() and np.isfinite(wl.runtime).all()
    if wl.machine_size:
        assert not ((wl.runtime > 0) & (wl.columns["alloc_procs"] > wl.machine_size)).any()


# --------------------------------------------------------------------------------------------- sacct
SH = "JobID|JobIDRaw|Submit|Start|End|Elapsed|Timelimit|NNodes|NCPUS|ReqTRES|AllocTRES|NodeList|State"
S1 = ("1|1|2024-01-01T00:00:00|2024-01-01T00:01:00|2024-01-01T00:11:00|00:10:00|01:00:00|2|16|"
      "billing=16,cpu=16,mem=64G,node=2|billing=16,cpu=16,mem=64G,node=2|n[1-2]|COMPLETED")


def sacct_row(base: str = S1, **over) -> str:
    cols = SH.split("|")
    vals = base.split("|")
    for k, v in over.items():
        vals[cols.index(k)] = v
    return "|".join(vals)


def write_sacct(tmp_path: Path, *rows: str, header: str = SH) -> Path:
    p = tmp_path / "d.sacct"
    p.write_text(header + "\n" + "\n".join(rows) + "\n")
    return p


@pytest.mark.parametrize("req, alloc, gpus, note", [
    ("cpu=16,gres/gpu=2,node=2", "cpu=16,gres/gpu=8,gres/gpu:a100=8,node=2", 2,   # --exclusive: the request
     "1 jobs were allocated more GPUs than they asked for (AllocTRES > ReqTRES"),
    ("", "cpu=16,gres/gpu=4,gres/gpu:a100=4,node=2", 4, None),          # untyped total wins: not 8
    ("cpu=16,node=2", "cpu=16,gres/gpu:a100=2,gres/gpu:v100=2,node=2", 4,   # no GPU asked: the allocation, said
     "1 jobs' ReqTRES names no GPU but their AllocTRES does"),
    ("gres/gpu:a100=3,gres/gpu:h100=1", "", 4, None),                   # typed counts summed
    ("gres/gpu=4,gres/gpu:a100=2", "gres/gpu=4,gres/gpu:a100=2", 4, None),   # partly typed: the total
    ("cpu=16,node=2", "cpu=16,node=2", 0, None),
    ("cpu=16,gres/gpumem=40G,node=2", "cpu=16,gres/gpumem=40G,node=2", 0, None),   # GPU memory is not a GPU count
])
def test_sacct_gpu_counts(tmp_path, req, alloc, gpus, note):
    wl = read_sacct(write_sacct(tmp_path, sacct_row(ReqTRES=req, AllocTRES=alloc)))
    assert wl.columns["gpus"].tolist() == [gpus] and wl.columns["gpus_per_node"].tolist() == [gpus / 2]
    gpu_notes = [n for n in wl.notes if "GPU" in n]
    assert gpu_notes == ([] if note is None else [next(n for n in gpu_notes if n.startswith(note))])


def test_sacct_exclusive_cpu_job_on_gpu_nodes_asks_no_gpu(tmp_path):
    """Real Slurm 22.05 (tests/data/slurm_truth/gpu_exclusive): an --exclusive CPU job on a 4-GPU node has
    ReqTRES without GPUs and AllocTRES with the node's gres/gpu=4. When other jobs' ReqTRES name GPUs the
    dump's ReqTRES carries GPU requests, so that job asked for none (it may then use CPU-only nodes)."""
    rows = [sacct_row(ReqTRES="cpu=16,gres/gpu=2,node=2", AllocTRES="cpu=16,gres/gpu=8,node=2"),
            sacct_row(JobID="2", JobIDRaw="2", ReqTRES="cpu=16,node=2", AllocTRES="cpu=16,gres/gpu=8,node=2")]
    wl = read_sacct(write_sacct(tmp_path, *rows))
    assert wl.columns["gpus"].tolist() == [2, 0]
    assert any(n.startswith("1 jobs' ReqTRES names no GPU but their AllocTRES does while other jobs' ReqTRES "
                            "name GPUs: read as asking for no GPU") for n in wl.notes)


def test_sacct_alloctres_alone_and_allocation_gpu(tmp_path, capsys):
    """The issue's case: a dump whose AllocTRES says gres/gpu=4 (no ReqTRES column) runs with --allocation gpu."""
    h = "JobID|Submit|Start|End|NNodes|NCPUS|AllocTRES|State"
    rows = ["1|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:10:00|1|8|cpu=8,gres/gpu=4,node=1|COMPLETED",
            "2|2024-01-01T00:01:00|2024-01-01T00:01:00|2024-01-01T00:11:00|2|8|cpu=8,gres/gpu=8,gres/gpu:a100=8,node=2|COMPLETED",
            "3|2024-01-01T00:02:00|2024-01-01T00:02:00|2024-01-01T00:12:00|1|8|cpu=8,node=1|COMPLETED"]
    p = write_sacct(tmp_path, *rows, header=h)
    assert read_sacct(p).columns["gpus"].tolist() == [4, 8, 0]
    out = tmp_path / "o"
    assert main(["run", "-w", f"sacct:{p}", "--allocation", "gpu", "--gpus-per-node", "4", "--nodes", "4",
                 "-o", str(out), "-q"]) == 0, capsys.readouterr().err
    s = json.loads((out / "summary.json").read_text())
    assert s["jobs_simulated"] == 2 and s["jobs_skipped"] == {"size_le_0": 1}      # job 3 asks for no GPU
    import pandas as pd  # noqa: PLC0415
    assert pd.read_csv(out / "jobs.csv")["procs"].tolist() == [4, 8]


def test_parse_tres_values_and_units():
    t = parse_tres("billing=64,cpu=64,gres/gpu=8,mem=100G,node=2,energy=1500,fs/disk=1.5T,license/matlab=2")
    assert t["billing"] == 64 and t["cpu"] == 64 and t["gres/gpu"] == 8 and t["node"] == 2
    assert t["mem"] == 100 * 2 ** 30 and t["fs/disk"] == 1.5 * 2 ** 40 and t["energy"] == 1500
    assert parse_tres("mem=4000")["mem"] == 4000 * 2 ** 20          # no suffix: MiB, Slurm's unit
    assert parse_tres("mem=512K")["mem"] == 512 * 2 ** 10 and parse_tres("  ") == {}
    assert tres_gpus(parse_tres("gres/gpu:a100=2,gres/gpu:v100=1")) == 3 and tres_gpus(parse_tres("cpu=1")) is None


@pytest.mark.parametrize("tres, why", [
    ("cpu=x", "cpu='x': the count is not a non-negative integer"),
    ("cpu=-4", "cpu='-4': the count is not a non-negative integer"),
    ("cpu=1.5", "cpu='1.5': the count is not a non-negative integer"),
    ("billing=1e3", "billing='1e3': the count is not a non-negative integer"),
    ("gres/gpu=", "'gres/gpu=' is not a TRES item (name=count)"),
    ("gres/gpu=nan", "gres/gpu='nan': the count is not a non-negative integer"),
    ("node=inf", "node='inf': the count is not a non-negative integer"),
    ("mem=10Q", "mem='10Q': not a non-negative number"),
    ("mem=-1G", "mem='-1G': not a non-negative number"),
    ("=4", "'=4' is not a TRES item (name=count)"),
    ("cpu", "'cpu' is not a TRES item (name=count)"),
    ("cpu=4,,node=1", "'' is not a TRES item (name=count)"),
    ("cpu=4,cpu=8", "names 'cpu' twice"),
    ("gres/gpu=4,gres/gpu:a100=8", "gres/gpu=4 but its typed counts (gres/gpu:TYPE) add up to 8"),
    ("gres/gpu:=2", "'gres/gpu:=2': empty GPU type"),
    ("gres/gpu=99999999999", "99999999999 GPUs is out of range"),
    ("cpu=16,gres/gpu=2,node=3", "node=3, but NNodes says 2 (the line contradicts itself)"),
    ("cpu=12,node=2", "cpu=12, but NCPUS says 16 (the line contradicts itself)"),
])
@pytest.mark.parametrize("field", ["ReqTRES", "AllocTRES"])
def test_sacct_bad_tres_is_located(tmp_path, tres, why, field):
    contradiction = "contradicts" in why
    if contradiction and field == "ReqTRES":
        wl = read_sacct(write_sacct(tmp_path, sacct_row(ReqTRES=tres)))   # a request may differ from the allocation
        assert len(wl) == 1
        return
    p = write_sacct(tmp_path, sacct_row(**{field: tres}))
    with pytest.raises(SacctError) as e:
        read_sacct(p)
    assert str(e.value).startswith(f"{p}:2: field {field}: ") and why in str(e.value), str(e.value)


@pytest.mark.parametrize("header, want", [
    ("JobIDRaw|Submit|Start|End|NNodes|State", "d.sacct:1: header has no 'jobid' field"),
    ("JobID|Start|End|NNodes|State", "d.sacct:1: header has no 'submit' field"),
    ("JobID|Submit|Start|End|NNodes", "d.sacct:1: header has no 'state' field"),
    ("JobID|Submit|Start|End|State", "d.sacct:1: header needs NNodes or NCPUS"),
    ("JobID|Submit|Start|NNodes|State", "d.sacct:1: header needs Elapsed, or Start and End"),
    ("JobID|Submit|Start|End|NNodes|State|nnodes", "d.sacct:1: header names field 'nnodes' twice"),
])
def test_sacct_missing_or_repeated_columns(tmp_path, header, want):
    p = tmp_path / "d.sacct"
    p.write_text(header + "\n" + "|".join(["1"] * len(header.split("|"))) + "\n")
    with pytest.raises(SacctError, match=re.escape(want)):
        read_sacct(p)


@pytest.mark.parametrize("over, runtime, dropped", [
    ({"Elapsed": "1-02:03:04"}, 93784, {}),
    ({"Elapsed": "02:03"}, 123, {}),                                 # MM:SS
    ({"Elapsed": "5"}, 300, {}),                                     # minutes
    ({"Elapsed": "1-2"}, 93600, {}),                                 # D-H
    ({"Elapsed": "00:00:01.5"}, 1.5, {}),
    ({"Elapsed": "Unknown"}, 600, {}),                               # End - Start
    ({"Start": "Unknown", "End": "Unknown", "State": "PENDING"}, None, {"never_started": 1}),
    ({"Start": "None", "End": "2024-01-01T00:05:00", "Elapsed": "00:00:00", "State": "CANCELLED by 1"},
     None, {"never_started": 1}),
    ({"End": "Unknown", "Elapsed": "Unknown", "State": "RUNNING"}, None, {"still_running": 1}),
    ({"End": "Unknown", "Elapsed": "None"}, None, {"still_running": 1}),
    ({"Submit": "1704067200", "Start": "1704067260", "End": "1704067860"}, 600, {}),     # epochs
])
def test_sacct_time_forms_kept_or_counted(tmp_path, over, runtime, dropped):
    wl = read_sacct(write_sacct(tmp_path, S1.replace("1|1|", "9|9|", 1), sacct_row(**over)))
    assert wl.dropped == dropped
    if runtime is not None:
        assert wl.runtime[wl.job_id.tolist().index(1)] == runtime
    else:
        assert wl.job_id.tolist() == [9]


@pytest.mark.parametrize("over, want", [
    ({"Submit": "Unknown"}, "d.sacct:2: field Submit: 'Unknown': every job has a submit time"),
    ({"Submit": "None"}, "d.sacct:2: field Submit: 'None': every job has a submit time"),
    ({"Start": "2024-02-30T00:00:00"}, "d.sacct:2: field Start: '2024-02-30T00:00:00' is not a timestamp"),
    ({"End": "yesterday"}, "d.sacct:2: field End: 'yesterday' is not a timestamp"),
    ({"Elapsed": "1:2:3:4"}, "d.sacct:2: field Elapsed: bad time '1:2:3:4'"),
    ({"Elapsed": "1-"}, "d.sacct:2: field Elapsed: bad time"),
    ({"Elapsed": "x-01:00:00"}, "d.sacct:2: field Elapsed: bad day count 'x'"),
    ({"Elapsed": "-00:10:00"}, "d.sacct:2: field Elapsed: bad day count ''"),
    ({"Timelimit": "1h"}, "d.sacct:2: field Timelimit: bad time '1h'"),
    ({"NNodes": "0"}, "d.sacct:2: field NNODES: 0 (a job that ran holds at least one)"),
    ({"NCPUS": "-3"}, "d.sacct:2: field NCPUS: '-3' is not a non-negative integer"),
    ({"State": "EXPLODED"}, "d.sacct:2: field State: unknown state 'EXPLODED'"),
    ({"JobID": "1.x.y", "JobIDRaw": "1"}, None),                    # a step: skipped (checked below)
])
def test_sacct_bad_values_are_located(tmp_path, over, want):
    p = write_sacct(tmp_path, sacct_row(**over), S1.replace("1|1|", "9|9|", 1))
    if want is None:
        assert read_sacct(p).dropped == {"job_steps": 1}
        return
    with pytest.raises(SacctError) as e:
        read_sacct(p)
    assert str(e.value).startswith(str(p)) and want in str(e.value), str(e.value)


def test_sacct_steps_counted_and_repeated_header_refused(tmp_path):
    steps = [sacct_row(JobID=f"1.{s}", JobIDRaw=f"1.{s}") for s in ("batch", "extern", "0", "1")]
    wl = read_sacct(write_sacct(tmp_path, S1, *steps))
    assert len(wl) == 1 and wl.dropped == {"job_steps": 4} and "4 job steps skipped" in wl.notes[0]
    p = write_sacct(tmp_path, S1, SH, S1.replace("1|1|", "2|2|", 1))
    with pytest.raises(SacctError, match=re.escape(f"{p}:3: the header line again (line 1): two dumps concatenated?")):
        read_sacct(p)


TRES_ITEMS = ["cpu=16", "node=2", "billing=7", "mem=64G", "mem=1.5T", "mem=x", "gres/gpu=4", "gres/gpu:a100=4",
              "gres/gpu:v100=2", "gres/gpu=-1", "gres/gpu=1e2", "cpu", "=", "energy=12", "gres/gpumem=40G", "cpu=16"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(req=st.lists(st.sampled_from(TRES_ITEMS), max_size=4), alloc=st.lists(st.sampled_from(TRES_ITEMS), max_size=4))
def test_fuzz_tres_located_error_or_sane_gpus(tmp_path_factory, req, alloc):
    p = tmp_path_factory.mktemp("tr") / "d.sacct"
    p.write_text(SH + "\n" + sacct_row(ReqTRES=",".join(req), AllocTRES=",".join(alloc)) + "\n")
    try:
        wl = read_sacct(p)
    except SacctError as e:
        assert re.match(re.escape(str(p)) + r":2: field (ReqTRES|AllocTRES): ", str(e)), e
        return
    g = wl.columns["gpus"]
    assert np.isfinite(g).all() and (g >= 0).all() and g[0] == int(g[0])


# ----------------------------------------------------------------------------------------- GPU traces
PODS_HDR = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
POD = "p0,1000,1024,1,1000,,LS,Running,0,100,10"
DLRM_HDR = ("instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,rdma_limit,"
            "memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,creation_time,scheduled_time,"
            "deletion_time")
DLRM = "i0,HN,app1,8,8,1,1,10,10,32,32,100,100,-1,5,10,500"
HELIOS_HDR = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"
HELIOS = "1,u,vc1,8,16,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:42:01,2020-06-09 19:42:01,3600,0"


def csv_row(header: str, base: str, **over) -> str:
    cols, vals = header.split(","), base.split(",")
    for k, v in over.items():
        vals[cols.index(k)] = v
    return ",".join(vals)


#: (reader, header, valid row, {column: (bad value, expected text after 'file:2: ')})
GPU_MATRIX = [
    (read_alibaba_gpu2023, PODS_HDR, POD, {
        "num_gpu": [("abc", "field 'num_gpu': not a number"), ("-1", "field 'num_gpu': below 0"),
                    ("1.5", "field 'num_gpu': not an integer"), ("65", "field 'num_gpu': above 64"),
                    ("1e20", "field 'num_gpu': out of range for an integer"), ("inf", "field 'num_gpu': not a number"),
                    ("", "field 'num_gpu': empty")],
        "gpu_milli": [("1001", "field 'gpu_milli': above 1000"), ("0", "field 'gpu_milli': 0 for a pod with num_gpu > 0")],
        "cpu_milli": [("0x10", "field 'cpu_milli': not a number"), ("-5", "field 'cpu_milli': below 0")],
        "creation_time": [("nan", "field 'creation_time': empty"), ("-1", "field 'creation_time': below 0"),
                          ("1e300", "field 'creation_time': above 1e+11")],
        "deletion_time": [("5", "field 'deletion_time': earlier than scheduled_time")],
        "scheduled_time": [("", "field 'scheduled_time': empty for a pod that ran")],
        "pod_phase": [("Exploded", "field 'pod_phase': unknown phase")],
    }),
    (read_alibaba_dlrm2025, DLRM_HDR, DLRM, {
        "role": [("XN", "field 'role': unknown role")],
        "rdma_request": [("101", "field 'rdma_request': above 100")],
        "gpu_request": [("-1", "field 'gpu_request': below 0"), ("x", "field 'gpu_request': not a number")],
        "max_instance_per_node": [("-2", "field 'max_instance_per_node': below -1")],
        "scheduled_time": [("", "field 'scheduled_time': empty and non-empty creation/scheduled times mixed")],
        "deletion_time": [("7", "field 'deletion_time': earlier than scheduled_time")],
    }),
    (read_helios, HELIOS_HDR, HELIOS, {
        "gpu_num": [("-8", "field 'gpu_num': below 0"), ("1e20", "field 'gpu_num': out of range for an integer"),
                    ("8.5", "field 'gpu_num': not an integer")],
        "state": [("EXPLODED", "field 'state': unknown state"), ("", "field 'state': empty")],
        "submit_time": [("yesterday", "field 'submit_time': not a date-time"), ("", "field 'submit_time': empty")],
        "start_time": [("2020-06-09 18:00:00", "field 'start_time': earlier than submit_time")],
        "end_time": [("2020-06-09 18:41:30", "field 'end_time': earlier than start_time")],
    }),
]
GPU_CELLS = [(r, h, b, c, v, w) for r, h, b, cols in GPU_MATRIX for c, cases in cols.items() for v, w in cases]


@pytest.mark.parametrize("reader, header, base, column, value, want", GPU_CELLS,
                         ids=[f"{r.__name__[5:]}-{c}-{v or 'empty'}" for r, _, _, c, v, _ in GPU_CELLS])
def test_gpu_trace_field_matrix(tmp_path, reader, header, base, column, value, want):
    p = tmp_path / "t.csv"
    p.write_text(header + "\n" + csv_row(header, base, **{column: value}) + "\n" + base + "\n")
    with pytest.raises(GPUTraceError) as e:
        reader(p)
    assert str(e.value).startswith(f"{p}:2: {want}"), str(e.value)


@pytest.mark.parametrize("reader, header, base", [(r, h, b) for r, h, b, _ in GPU_MATRIX],
                         ids=[r.__name__[5:] for r, _, _, _ in GPU_MATRIX])
def test_gpu_trace_file_shape(tmp_path, reader, header, base):
    """Short and long lines, a repeated header field, non-UTF-8 bytes, an empty file: located; CRLF and a
    header-only file read."""
    p = tmp_path / "t.csv"
    short = ",".join(base.split(",")[:-1])
    for body, want in [(header + "\n" + base + "\n" + short + "\n", f"{p}:3: {len(header.split(',')) - 1} fields, the "
                        f"header has {len(header.split(','))} (a truncated line?)"),
                       (header + "\n" + base + ",9\n", f"{p}:2: {len(header.split(',')) + 1} fields, the header has"),
                       (header.replace(header.split(",")[1], header.split(",")[0]) + "\n" + base + "\n",
                        f"{p}:1: header names field {header.split(',')[0]!r} twice"),
                       ("", f"{p}: empty file (expected a CSV header line)")]:
        p.write_text(body)
        with pytest.raises(GPUTraceError) as e:
            reader(p)
        assert str(e.value).startswith(want), str(e.value)
    p.write_bytes((header + "\n" + base + "\n").encode() + b"x\xff," + base.split(",", 1)[1].encode() + b"\n")
    with pytest.raises(GPUTraceError, match=re.escape(f"{p}:3: not UTF-8 text (byte 0xff)")):
        reader(p)
    p.write_text(header + "\r\n" + base + "\r\n")
    crlf = reader(p)
    p.write_text(header + "\n" + base + "\n")
    plain = reader(p)
    assert crlf.submit.tolist() == plain.submit.tolist() and crlf.procs.tolist() == plain.procs.tolist()
    p.write_text(header + "\n")
    assert len(reader(p)) == 0


def test_helios_never_started_jobs_are_counted(tmp_path):
    p = tmp_path / "h.csv"
    p.write_text(HELIOS_HDR + "\n" + HELIOS + "\n" + csv_row(HELIOS_HDR, HELIOS, job_id="2", start_time="",
                                                             end_time="", state="CANCELLED") + "\n"
                 + csv_row(HELIOS_HDR, HELIOS, job_id="3", state="cancelled by 42") + "\n")
    wl = read_helios(p)
    assert wl.job_id.tolist() == [1, 3] and wl.dropped == {"never_started_or_unfinished": 1}
    assert wl.status.tolist() == [1, 5]


PHILLY_JOB = {"jobid": "application_1", "user": "u1", "vc": "vc1", "status": "Pass",
              "submitted_time": "2017-10-03 14:00:00",
              "attempts": [{"start_time": "2017-10-03 14:01:00", "end_time": "2017-10-03 15:01:00",
                            "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]}]}


def philly_with(**over) -> list:
    job = json.loads(json.dumps(PHILLY_JOB))
    for k, v in over.items():
        if k.startswith("a_"):
            job["attempts"][0][k[2:]] = v
        else:
            job[k] = v
    return [job]


@pytest.mark.parametrize("jobs, want", [
    (philly_with(submitted_time=5), "job #0 (application_1): field 'submitted_time': not a date-time string"),
    (philly_with(submitted_time="now"), "job #0 (application_1): field 'submitted_time': not a date-time string"),
    (philly_with(submitted_time="2017-13-40 00:00:00"), "field 'submitted_time': not a date-time"),
    (philly_with(submitted_time=None), "job #0 (application_1): field 'submitted_time': empty"),
    (philly_with(status="Exploded"), "job #0 (application_1): field 'status': unknown value 'Exploded'"),
    (philly_with(status=["Pass"]), "job #0 (application_1): field 'status': unknown value"),
    (philly_with(user={"a": 1}), "job #0: field 'user': expected a string, got dict"),
    (philly_with(attempts="none"), "job #0 (application_1): field 'attempts': expected a list"),
    (philly_with(attempts=["start_time end_time detail"]), "job #0 (application_1): attempt 0: expected an object, got str"),
    (philly_with(a_detail=5), "attempt 0: field 'detail': expected a list"),
    (philly_with(a_detail=[{"ip": "m1", "gpus": 3}]), "attempt 0: field 'detail': expected a list"),
    (philly_with(a_end_time="2017-10-03 13:00:00"), "attempt 0: field 'end_time' earlier than 'start_time'"),
    ([5], "job #0: expected an object, got int"),
    ({"jobs": []}, "expected a JSON list of jobs, got dict"),
    ([], "no job with a complete attempt"),
])
def test_philly_bad_jobs_are_located(tmp_path, jobs, want):
    p = tmp_path / "p.json"
    p.write_text(json.dumps(jobs))
    with pytest.raises(GPUTraceError) as e:
        read_philly(p)
    assert str(e.value).startswith(str(p)) and want in str(e.value), str(e.value)


def test_philly_incomplete_attempts_are_counted(tmp_path):
    p = tmp_path / "p.json"
    p.write_text(json.dumps([PHILLY_JOB, *philly_with(jobid="application_2", a_end_time=None)]))
    wl = read_philly(p)
    assert len(wl) == 1 and wl.dropped == {"no_complete_attempt": 1}
    assert any("1 jobs have no complete attempt: dropped" in n for n in wl.notes)
