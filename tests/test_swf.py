"""SWF reader and writer: error paths, round trip, and every real log in the shared datasets."""
from __future__ import annotations

import gzip
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpctwin.datasets import swf
from hpctwin.datasets.registry import default_data_dir, load_registry
from hpctwin.datasets.swf import SWFError, read_swf, write_swf

HEADER = """; Version: 2.2
; Computer: test machine
; MaxJobs: 3
; MaxRecords: 3
; MaxNodes: 16 (batch partition; 32 total)
; MaxProcs: 16
; UnixStartTime: 1000000000
"""
GOOD = [
    "1 0 5 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1",
    "2 10 0 50 2 1.5 -1 -1 60 -1 1 2 1 -1 1 -1 -1 -1",
    "3 20 3 -1 1 -1 -1 1 -1 -1 5 1 1 -1 1 -1 -1 -1",
]


def write(tmp_path: Path, lines, header=HEADER, name="log.swf") -> Path:
    p = tmp_path / name
    p.write_text(header + "\n".join(lines) + "\n")
    return p


def test_reads_fields_and_header(tmp_path):
    wl = read_swf(write(tmp_path, GOOD))
    assert len(wl) == 3
    assert wl.machine_size == 16 and wl.machine_size_source == "header MaxProcs"
    assert wl.job_id.tolist() == [1, 2, 3]
    assert wl.submit.tolist() == [0, 10, 20]
    assert wl.runtime.tolist() == [100, 50, -1]
    # size: requested when known (job 1: 4; job 3: 1), else allocated (job 2: req -1 -> alloc 2)
    assert wl.procs.tolist() == [4, 2, 1]
    assert wl.requested_time[:2].tolist() == [200, 60] and np.isnan(wl.requested_time[2])
    assert wl.status.tolist() == [1, 1, 5]
    assert wl.header["UnixStartTime"] == "1000000000"
    assert wl.columns["line"].tolist() == [8, 9, 10]


def test_machine_size_falls_back_to_maxnodes(tmp_path):
    hdr = HEADER.replace("; MaxProcs: 16\n", "")
    wl = read_swf(write(tmp_path, GOOD, hdr))
    assert wl.machine_size == 16 and wl.machine_size_source == "header MaxNodes"


@pytest.mark.parametrize("line, message", [
    ("4 30 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1", r"log.swf:11: expected 18 fields, found 17"),
    ("4 30 0 1x0 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1", r"log.swf:11: field 4 \(run\): '1x0' is not a number"),
    ("4 30 0 10 1.5 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1", r"log.swf:11: field 5 \(alloc_procs\): '1.5' is not an integer"),
    ("4 -30 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1", r"log.swf:11: field 2 \(submit\): negative submit time"),
])
def test_malformed_lines_name_file_line_and_field(tmp_path, line, message):
    hdr = HEADER.replace("MaxJobs: 3", "MaxJobs: 9").replace("MaxRecords: 3", "MaxRecords: 9")
    p = write(tmp_path, GOOD + [line], hdr)
    with pytest.raises(SWFError, match=message) as e:
        read_swf(p)
    assert str(p) in str(e.value)


def test_header_contradicting_data(tmp_path):
    p = write(tmp_path, GOOD + ["4 30 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1"])
    with pytest.raises(SWFError, match=r"log.swf:11: header field MaxRecords \(line 4\) says 3 job lines but this is job line 4"):
        read_swf(p)
    bad = HEADER.replace("; MaxProcs: 16", "; MaxProcs: many")
    with pytest.raises(SWFError, match=r"b.swf:6: header field MaxProcs: 'many' is not an integer"):
        read_swf(write(tmp_path, GOOD, bad, "b.swf"))
    zero = HEADER.replace("; MaxProcs: 16", "; MaxProcs: 0")
    with pytest.raises(SWFError, match=r"c.swf:6: header field MaxProcs: 0 is not a machine size"):
        read_swf(write(tmp_path, GOOD, zero, "c.swf"))


def test_missing_and_corrupt_files(tmp_path):
    with pytest.raises(SWFError, match=r"nope.swf: file not found"):
        read_swf(tmp_path / "nope.swf")
    bad = tmp_path / "bad.swf.gz"
    bad.write_bytes(b"\x1f\x8b" + b"garbage")
    with pytest.raises(SWFError, match=r"corrupt gzip"):
        read_swf(bad)


def test_round_trip_plain_and_gzip(tmp_path):
    wl = read_swf(write(tmp_path, GOOD))
    for name in ("out.swf", "out.swf.gz"):
        out = tmp_path / name
        write_swf(wl, out)
        back = read_swf(out)
        for f in ("job_id", "submit", "runtime", "procs", "user", "group", "queue", "partition", "status"):
            assert getattr(back, f).tolist() == getattr(wl, f).tolist(), f
        np.testing.assert_array_equal(back.requested_time, wl.requested_time)
        assert back.machine_size == 16
    assert gzip.decompress((tmp_path / "out.swf.gz").read_bytes()).startswith(b"; ")
    assert not list(tmp_path.glob("*.tmp"))


def _real_logs():
    ddir = default_data_dir()
    if ddir is None:
        return []
    return [pytest.param(e, id=e.name) for e in load_registry().values() if e.format == "swf"]


@pytest.mark.slow
@pytest.mark.parametrize("entry", _real_logs())
def test_every_real_log_parses_with_its_manifest_count(entry):
    path = entry.path(default_data_dir())
    if not path.exists():
        pytest.skip(f"{path} not present")
    wl = read_swf(path)
    assert len(wl) == entry.jobs
    assert (wl.submit >= -1).all()   # -1 = unknown (LLNL-Thunder has such jobs)


def test_alea_hosts_become_recorded_placements(tmp_path):
    """Alea extended SWF: hosts -> the .machines clusters' processors; the recorded placer uses them."""
    import json  # noqa: PLC0415

    from hpctwin.twin.cli import main  # noqa: PLC0415
    from hpctwin.twin.workload import HostRequest  # noqa: PLC0415
    lines = [
        "0 0 0 100 4 1 1024 4 200 1024 1 1 1 1 -1 1 1 1 {7,7,7,7} q_1d 1:ppn=4:cl_big",
        "1 0 0 100 2 1 1024 2 200 1024 1 1 1 1 -1 1 1 1 {12,12} q_1d 1:ppn=2:cl_small",
        "2 5 0 100 5 1 1024 5 200 1024 1 1 1 1 -1 1 1 1 {7,7,7,12,12} q_1d 1:ppn=3",
    ]
    p = tmp_path / "a.swf"
    p.write_text("\n".join(lines) + "\n")
    (tmp_path / "a.swf.machines").write_text("0 big 2 8 1 1000\n1 small 2 4 1 1000\n")
    wl = read_swf(p)
    assert wl.machine_size == 2 * 8 + 2 * 4 and wl.machine_size_source == "Alea .machines file"
    rec = wl.columns["recorded_nodes"]
    assert isinstance(rec[0], HostRequest) and rec[0].counts == (4,) and rec[0].pools[0].tolist() == list(range(8))
    assert rec[1].pools[0].tolist() == [16, 17, 18, 19]          # host 12: first node of cluster "small"
    assert rec[2].counts == (3, 2)
    out = tmp_path / "run"
    assert main(["run", "-w", str(p), "--placement", "recorded", "-o", str(out), "-q"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["placement"] == {"name": "recorded", "recorded_used": 3, "fallbacks": 0}
    nodes = pd.read_csv(out / "jobs.csv")["nodes"].tolist()
    assert nodes == ["0-3", "16-17", "4-6,18-19"]     # the free CPUs of the recorded hosts


@pytest.mark.parametrize("row, integer_parse", [
    ("1 0 5 100 4 -1 -1 4 200 -1 1 3 3 -1 1 -1 -1 -1", True),
    ("1 0 5 100 4 12.5 -1 4 200 -1 1 3 3 -1 1 -1 -1 -1", False),      # a fraction: the float parser
    ("1 -0 5 100 4 -1 -1 4 200 -1 1 3 3 -1 1 -1 -1 -1", False),       # -0 stays -0.0, as the float parse keeps it
    ("1 0 5 100 4 -1 -1 4 200 -1 1 3 3 -1 1 -1 -1 9007199254740993", False),   # > 2**53: float64 rounds it
])
def test_integer_fast_parse_gives_the_float_parse_values(row, integer_parse):
    text = f"; MaxProcs: 8\n{row}\n{row.replace('1 ', '2 ', 1)}\n"
    want = np.loadtxt(io.StringIO(text), dtype=np.float64, comments=";", ndmin=2)
    ints = swf._loadtxt_integers(text)
    assert (ints is not None) == integer_parse
    if ints is not None:
        assert ints.dtype == np.float64 and np.array_equal(ints, want)
    cols = swf._parse_fast(text, 2)
    if "9007199254740993" in row:              # an integer field beyond 2**53: the exact parser decides
        assert cols is None
        return
    for k, name in enumerate(swf.FIELDS):
        got = cols[name].astype(np.float64)
        assert np.array_equal(got, want[:, k]) and np.array_equal(np.signbit(got), np.signbit(want[:, k])), name


@pytest.mark.parametrize("lines", [
    ["; a: 1", "1 2", "", "  ", "3 4 ; note", "  ; c", " ;", "\t", "5 6"],
    [], [";"], ["x;"], ["\r"],
])
def test_line_kinds(lines):
    comments, data = swf._line_kinds(lines)
    assert comments == [i for i, ln in enumerate(lines) if ln.lstrip().startswith(";")]
    assert data.tolist() == [i + 1 for i, ln in enumerate(lines)
                             if ln.split(";", 1)[0].strip() and not ln.lstrip().startswith(";")]
