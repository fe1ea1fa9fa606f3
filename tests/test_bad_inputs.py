"""Bad-input suite (issue 14): a table of malformed or edge-case inputs -> the error text, run through
the CLI (exit status 2, one line ``hpctwin: error: file:line: field: message``, no traceback), and a
hypothesis fuzz over the SWF and sacct readers ("a located error or a valid workload, never another
exception"). Valid edge cases (BOM, CRLF, hostlists) are checked to run.

Each case names the class of problem it stands for; the classes follow the issue's list.
"""
from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpctwin.datasets.hostlist import HostlistError, expand_hostlist, node_ids
from hpctwin.datasets.sacct import SacctError, read_sacct
from hpctwin.datasets.swf import SWFError, read_swf
from hpctwin.twin.cli import main

HDR = "; MaxProcs: 16\n"
J1 = "1 0 5 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1"
J2 = "2 10 0 50 2 1.5 -1 -1 60 -1 1 2 1 -1 1 -1 -1 -1"
HELIOS_HDR = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
HELIOS_T = "2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-10 04:55:09,36848,0"
SH = "JobID|JobIDRaw|Submit|Start|End|Elapsed|Timelimit|NNodes|NCPUS|NodeList|State"
S1 = "1|1|2024-01-01T00:00:00|2024-01-01T00:01:00|2024-01-01T00:11:00|00:10:00|01:00:00|4|16|n[001-004]|COMPLETED"
S2 = "2|2|2024-01-01T00:02:00|2024-01-01T00:20:00|2024-01-01T00:30:00|00:10:00|01:00:00|2|8|n[005-006]|COMPLETED"


def swf_line(**over) -> str:
    """J1 with some fields replaced (by SWF field number)."""
    t = J1.split()
    for k, v in over.items():
        t[int(k[1:]) - 1] = v
    return " ".join(t)


def sacct_row(**over) -> str:
    cols = SH.split("|")
    vals = S1.split("|")
    for k, v in over.items():
        vals[cols.index(k)] = v
    return "|".join(vals)


# (case id / class, files {name: text or bytes}, extra CLI args, expected text in the one error line)
RUN_CASES = [
    # ---------------------------------------------------------------- SWF: shape of a line
    ("swf-19-fields-first-line", {"w.swf": HDR + J1 + " 7\n" + J2 + "\n"}, [],
     "w.swf:2: expected 18 fields, found 19"),
    ("swf-19-fields-later-line", {"w.swf": HDR + J1 + "\n" + J2 + " 7\n"}, [], "w.swf:3: expected 18 fields, found 19"),
    ("swf-17-fields", {"w.swf": HDR + J1 + "\n2 10 0 50\n"}, [], "w.swf:3: expected 18 fields, found 4"),
    ("swf-10MB-single-line", {"w.swf": HDR + "1 " * 5_000_000 + "\n"}, [], "w.swf:2: expected 18 fields, found 5000000"),
    # ---------------------------------------------------------------- SWF: numbers
    ("swf-inf", {"w.swf": HDR + swf_line(f4="inf") + "\n"}, [], "w.swf:2: field 4 (run): 'inf' is not a number"),
    ("swf-1e400", {"w.swf": HDR + swf_line(f2="1e400") + "\n"}, [], "w.swf:2: field 2 (submit): '1e400' is not finite"),
    ("swf-nan", {"w.swf": HDR + swf_line(f9="nan") + "\n"}, [], "w.swf:2: field 9 (req_time): 'nan' is not a number"),
    ("swf-job-id-beyond-int64", {"w.swf": HDR + swf_line(f1="99999999999999999999") + "\n"}, [],
     "w.swf:2: field 1 (job): '99999999999999999999' is out of range for a 64-bit integer"),
    ("swf-procs-1e20", {"w.swf": HDR + swf_line(f8="1e20") + "\n"}, [],
     "w.swf:2: field 8 (req_procs): '1e20' is out of range for a 64-bit integer"),
    ("swf-fractional-integer", {"w.swf": HDR + swf_line(f5="1.5") + "\n"}, [],
     "w.swf:2: field 5 (alloc_procs): '1.5' is not an integer"),
    ("swf-unicode-digits", {"w.swf": HDR + swf_line(f4="\u0661\u0662") + "\n"}, [], "w.swf:2: field 4 (run):"),
    ("swf-underscore-number", {"w.swf": HDR + swf_line(f4="1_000") + "\n"}, [], "field 4 (run): '1_000' is not a number"),
    ("swf-time-beyond-range", {"w.swf": HDR + swf_line(f2="1e300") + "\n"}, [], "field 2 (submit): '1e300' s is beyond"),
    ("swf-negative-submit", {"w.swf": HDR + swf_line(f2="-30") + "\n"}, [], "w.swf:2: field 2 (submit): negative submit time"),
    # ---------------------------------------------------------------- SWF: ids and header
    ("swf-duplicate-id", {"w.swf": HDR + J1 + "\n" + J1 + "\n"}, [], "w.swf:3: field 1 (job): job id 1 repeats line 2"),
    ("swf-header-contradicts-data", {"w.swf": "; MaxProcs: 2\n" + J1 + "\n"}, ["--set", "workload.strict=true"],
     "w.swf:2: field 5 (alloc_procs): the job ran on 4 processors but the header's MaxProcs (line 1) says the "
     "machine has 2: the header contradicts the data"),
    ("swf-maxrecords-too-small", {"w.swf": "; MaxRecords: 1\n" + HDR + J1 + "\n" + J2 + "\n"}, [],
     "w.swf:4: header field MaxRecords (line 1) says 1 job lines but this is job line 2"),
    ("swf-maxprocs-not-int", {"w.swf": "; MaxProcs: many\n" + J1 + "\n"}, [], "w.swf:1: header field MaxProcs: 'many' is not an integer"),
    ("swf-maxprocs-huge", {"w.swf": "; MaxProcs: 99999999999999999999999\n" + J1 + "\n"}, [],
     "w.swf:1: header field MaxProcs: '99999999999999999999999' is out of range"),
    ("swf-maxprocs-zero", {"w.swf": "; MaxProcs: 0\n" + J1 + "\n"}, [], "w.swf:1: header field MaxProcs: 0 is not a machine size"),
    # ---------------------------------------------------------------- empty workloads
    ("swf-empty-file", {"w.swf": ""}, [], "w.swf: workload 'w': no job records (an empty or header-only file)"),
    ("swf-header-only", {"w.swf": HDR}, [], "workload 'w': no job records (an empty or header-only file)"),
    ("swf-every-job-skipped", {"w.swf": HDR + swf_line(f4="0") + "\n" + swf_line(f1="2", f4="-1") + "\n"}, [],
     "workload 'w': all 2 records were dropped or skipped (runtime_le_0: 2); nothing to simulate"),
    # ---------------------------------------------------------------- files that are not logs
    ("corrupt-gzip", {"w.swf.gz": b"\x1f\x8b\x08\x00garbage"}, [], "w.swf.gz: corrupt gzip data"),
    ("binary-garbage", {"w.bin": bytes(range(256)) * 4}, [], "w.bin:"),
    ("workload-is-directory", {}, ["-w", "{d}"], "is a directory, not a workload file"),
    ("workload-is-a-device", {}, ["-w", "/dev/zero"], "/dev/zero: not a regular file"),
    ("system-is-a-device", {}, ["--system", "/dev/zero"], "system file /dev/zero: not a regular file"),
    ("workload-empty-string", {}, ["-w", ""], "--workload: empty workload"),
    ("workload-missing-file", {}, ["-w", "{d}/nope.swf"], "nope.swf: file not found"),
    ("unknown-format-prefix", {}, ["-w", "foo:{d}/x.swf"], "unknown format 'foo'"),
    ("undetectable-format", {"w.txt": "hello world\n"}, [], "w.txt:1: cannot tell the workload format"),
    ("node-list-not-jobs", {"n.csv": "sn,cpu_milli,memory_mib,gpu,model\nn0,1000,1024,8,V100\n"}, [],
     "n.csv:1: this is the node list of the Alibaba GPU 2023 trace, not jobs"),
    ("summary-not-jobs", {"s.csv": "id,job_num,complete_rate_gpu\nSeren,1,0.5\n"}, [], "this is the AcmeTrace cluster summary"),
    ("serving-trace-csv", {"a.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.97,4808,10\n"}, [],
     "a.csv:1: this is an LLM serving request trace (Azure 2023), not batch jobs: run it with `hpctwin serve`"),
    ("serving-trace-jsonl", {"m.jsonl": '{"timestamp": 0, "input_length": 6758, "output_length": 500}\n'}, [],
     "m.jsonl:1: this is an LLM serving request trace (JSON lines), not batch jobs"),
    ("unknown-dataset-did-you-mean", {}, ["-w", "KTH-SP3"], "unknown dataset 'KTH-SP3' (did you mean 'KTH-SP2'?)"),
    ("dataset-that-is-not-a-workload", {}, ["-w", "LLM-serving"], "use `hpctwin serve`".replace("use", "run them with")),
    # ---------------------------------------------------------------- sacct
    ("sacct-field-count", {"d.sacct": SH + "\n" + S1 + "\n1|1|x\n"}, ["-w", "sacct:{d}/d.sacct"],
     "d.sacct:3: 3 fields, the header has 11"),
    ("sacct-job-id-beyond-int64", {"d.sacct": SH + "\n" + sacct_row(JobID="9" * 20, JobIDRaw="9" * 20) + "\n"},
     ["-w", "sacct:{d}/d.sacct"], "d.sacct:2: field JobID: '99999999999999999999' is out of range for a 64-bit integer"),
    ("sacct-nnodes-inf", {"d.sacct": SH + "\n" + sacct_row(NNodes="inf") + "\n"}, ["-w", "sacct:{d}/d.sacct"],
     "d.sacct:2: field NNodes: 'inf' is not a non-negative integer"),
    ("sacct-elapsed-inf", {"d.sacct": SH + "\n" + sacct_row(Elapsed="00:00:inf") + "\n"}, ["-w", "sacct:{d}/d.sacct"],
     "d.sacct:2: field Elapsed: bad time '00:00:inf'"),
    ("sacct-timelimit-huge", {"d.sacct": SH + "\n" + sacct_row(Timelimit="99999999-00:00:00") + "\n"},
     ["-w", "sacct:{d}/d.sacct"], "d.sacct:2: field Timelimit: time '99999999-00:00:00' is beyond"),
    ("sacct-submit-epoch-huge", {"d.sacct": SH + "\n" + sacct_row(Submit="99999999999999") + "\n"},
     ["-w", "sacct:{d}/d.sacct"], "d.sacct:2: field Submit: '99999999999999' is not a timestamp"),
    ("sacct-submit-unknown", {"d.sacct": SH + "\n" + sacct_row(Submit="Unknown") + "\n"}, ["-w", "sacct:{d}/d.sacct"],
     "d.sacct:2: field Submit: 'Unknown': every job has a submit time"),
    ("sacct-duplicate-id", {"d.sacct": SH + "\n" + S1 + "\n" + S1 + "\n"}, ["-w", "sacct:{d}/d.sacct"],
     "d.sacct:3: field JobIDRaw: job id 1 repeats line 2"),
    ("sacct-duplicate-header-field", {"d.sacct": "JobID|JobID|Submit|State|NNodes|Elapsed\n"}, ["-w", "sacct:{d}/d.sacct"],
     "d.sacct:1: header names field 'jobid' twice"),
    ("sacct-missing-header-field", {"d.sacct": "Foo|Bar\n1|2\n"}, ["-w", "sacct:{d}/d.sacct"],
     "d.sacct:1: header has no 'jobid' field"),
    ("sacct-hostlist-unclosed", {"d.sacct": SH + "\n" + sacct_row(NodeList="n[1-") + "\n"}, ["-w", "sacct:{d}/d.sacct"],
     "d.sacct:2: field NodeList: unclosed '[' in 'n[1-'"),
    ("sacct-hostlist-explosion", {"d.sacct": SH + "\n" + sacct_row(NodeList="n[0-99999999999]") + "\n"},
     ["-w", "sacct:{d}/d.sacct"], "d.sacct:2: field NodeList: 'n[0-99999999999]' expands to more than 1,048,576 hosts"),
    ("sacct-nodelist-contradicts-nnodes", {"d.sacct": SH + "\n" + sacct_row(NNodes="5") + "\n"}, ["-w", "sacct:{d}/d.sacct"],
     "d.sacct:2: field NodeList: 4 nodes, but NNodes says 5"),
    ("sacct-energy-nan", {"d.sacct": SH + "|ConsumedEnergyRaw\n" + S1 + "|nan\n"}, ["-w", "sacct:{d}/d.sacct"],
     "field ConsumedEnergyRaw: 'nan' is not a finite number >= 0"),
    ("sacct-every-job-pending", {"d.sacct": SH + "\n" + sacct_row(Start="Unknown", End="Unknown", State="PENDING") + "\n"},
     ["-w", "sacct:{d}/d.sacct"], "all 1 records were dropped or skipped (never_started: 1)"),
    ("sacct-empty-file", {"d.sacct": ""}, ["-w", "sacct:{d}/d.sacct"], "d.sacct: empty file (expected a sacct -P header line)"),
    # ---------------------------------------------------------------- GPU / OpenDC readers
    ("alibaba-gpu-inf", {"p.csv": "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
                                  "deletion_time,scheduled_time\np0,1000,1024,inf,1000,,LS,Running,0,10,0\n"},
     ["-w", "alibaba-gpu:{d}/p.csv", "--nodes", "4"], "p.csv:2: field 'num_gpu': not a number"),
    ("helios-gpu-num-beyond-int", {"h.csv": HELIOS_HDR + "1,u,vc1,1e20,1,1,COMPLETED," + HELIOS_T + "\n"}, ["--nodes", "8"],
     "h.csv:2: field 'gpu_num': out of range for an integer (value '1e20')"),
    ("helios-duplicate-job-id", {"h.csv": HELIOS_HDR + ("1,u,vc1,1,1,1,COMPLETED," + HELIOS_T + "\n") * 2}, ["--nodes", "8"],
     "h.csv:3: field 'job_id': repeats an earlier job id (value '1')"),
    ("philly-json-too-deep", {"p.json": "[" * 100000 + "]" * 100000}, ["--nodes", "8"],
     "p.json: JSON nested too deeply to be a job list"),
    ("philly-json-broken", {"p.json": '[{"jobid": 1,'}, ["-w", "philly:{d}/p.json", "--nodes", "8"], "p.json:1: not valid JSON"),
    ("alibaba-gpu-time-beyond-range", {"p.csv": "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
                                                "creation_time,deletion_time,scheduled_time\n"
                                                "p0,1000,1024,1,1000,,LS,Running,0,1e300,0\n"},
     ["-w", "{d}/p.csv", "--nodes", "4"], "p.csv:2: field 'deletion_time': above 1e+11"),
    ("opendc-not-parquet", {"t.parquet": "not parquet"}, ["-w", "surf:{d}/t.parquet", "--nodes", "4"],
     "t.parquet: not a readable Parquet file"),
    # ---------------------------------------------------------------- --set and flags
    ("set-unknown-key-llm", {}, ["-s", "llm", "--set", "scheduler.nosuch=1"], "--set: scheduler.nosuch: unknown key of scheduler 'llm'"),
    ("set-unknown-key-easy-pred", {}, ["-s", "easy-pred", "--set", "scheduler.nosuch=1"],
     "--set: scheduler.nosuch: unknown key of scheduler 'easy-pred'"),
    ("set-key-of-scheduler-without-options", {}, ["-s", "easy", "--set", "scheduler.bf_interval=30"],
     "scheduler.bf_interval: scheduler 'easy' takes no options"),
    ("set-scheduler-value", {}, ["--set", "scheduler=5"], "--set: scheduler=5: scheduler is a section, not a value"),
    ("set-section-did-you-mean", {}, ["--set", "powr.cooling=1"], "powr: unknown section (did you mean 'power'?)"),
    ("set-failures-without-failures-on", {}, ["--set", "failures.node_mtbf_days=1"],
     "failures.node_mtbf_days: failure options need --failures on"),
    ("set-failures-with-failures-off", {}, ["--failures", "off", "--set", "failures.node_mtbf_days=1"],
     "failure options need --failures on"),
    ("set-power-without-power-on", {}, ["--set", "power.cooling=false"], "power.cooling: power options need --power on"),
    ("set-gpu-without-gpu-allocation", {}, ["--set", "gpu.policy=best-fit"], "gpu.policy: GPU packing options need --allocation gpu"),
    ("set-empty-key-part", {}, ["--set", "scheduler..x=1"], "'scheduler..x': empty key part"),
    ("set-value-and-keys", {}, ["--set", "scheduler.x=1", "--set", "scheduler=2"], "scheduler: scheduler is given a value and keys"),
    ("set-value-type", {}, ["-s", "llm", "--set", "scheduler.max_group_wait=abc"],
     "scheduler.max_group_wait: expected a number, got 'abc'"),
    ("slurm-conf-with-easy", {"s.conf": "SchedulerType=sched/backfill\n"}, ["-s", "easy", "--slurm-conf", "{d}/s.conf"],
     "--slurm-conf: a slurm.conf applies to --scheduler slurm only"),
    ("system-empty-string", {}, ["--system", ""], "--system: empty system"),
    ("slurm-conf-empty-string", {}, ["-s", "slurm", "--slurm-conf", ""], "--slurm-conf: empty path"),
    ("data-dir-empty-string", {}, ["-w", "KTH-SP2", "--data-dir", ""], "--data-dir: empty data dir"),
    ("order-with-slurm", {}, ["-s", "slurm", "--order", "sjf"], "--order: does not apply to --scheduler slurm"),
    ("backfill-with-predictive", {}, ["-s", "easy-pred", "--backfill", "conservative"],
     "--backfill: does not apply to --scheduler easy-pred"),
    ("gpus-per-node-without-gpu-allocation", {}, ["--gpus-per-node", "8"], "--gpus-per-node: applies to --allocation gpu only"),
    ("gpu-units-huge", {}, ["--allocation", "gpu", "--nodes", "60000000", "--gpus-per-node", "8"],
     "--nodes: 60,000,000 nodes x 8 GPUs is more than 67,108,864 units"),
    ("power-cap-without-power", {}, ["--power-cap", "1000"], "--power-cap: needs --power on"),
    ("size-field-on-sacct", {"d.sacct": SH + "\n" + S1 + "\n"}, ["-w", "sacct:{d}/d.sacct", "--size-field", "allocated"],
     "--size-field allocated: applies to SWF logs only"),
    ("sacct-unit-on-swf", {"w.swf": HDR + J1 + "\n"}, ["--set", "workload.unit=cpus"], "workload.unit: applies to sacct dumps only"),
    ("nodes-huge", {}, ["--nodes", str(10 ** 12)], "--nodes: 1000000000000 must be <= 67,108,864"),
    ("sample-dt-tiny", {"w.swf": HDR + J1 + "\n" + swf_line(f1="2", f2="1000000") + "\n"}, ["--sample-dt", "1e-9"],
     "--sample-dt: 1e-09 s over the workload's 1,000,100 s span"),
    ("sample-dt-nan", {}, ["--sample-dt", "nan"], "--sample-dt: expected a finite number, got nan"),
    ("power-cap-negative", {}, ["--power", "on", "--power-cap", "-5"], "--power-cap: -5.0 must be > 0"),
    ("seed-negative", {}, ["--seed", "-1"], "--seed: -1 must be >= 0"),
    ("scheduler-did-you-mean", {}, ["-s", "eassy"], "unknown scheduler 'eassy' (did you mean 'easy'"),
    ("placement-did-you-mean", {}, ["--placement", "recorde"], "unknown placement 'recorde' (did you mean 'recorded'?)"),
    ("estimate-did-you-mean", {}, ["--estimate", "tsafri"], "unknown estimate 'tsafri' (did you mean 'tsafrir'?)"),
    ("system-did-you-mean", {}, ["--system", "fronteir"], "unknown system 'fronteir' (did you mean 'frontier'?)"),
    ("synthetic-key-did-you-mean", {}, ["-w", "synthetic:jbos=10"], "unknown key 'jbos' (did you mean 'jobs'?)"),
    ("synthetic-jobs-huge", {}, ["-w", "synthetic:jobs=1000000000000"], "jobs='1000000000000' must be <= 50,000,000"),
    ("llm-scheduler-without-llm-jobs", {"w.swf": HDR + J1 + "\n"}, ["-s", "llm"],
     "--scheduler llm: workload 'w' has no LLM training jobs"),
    # ---------------------------------------------------------------- system TOML
    ("system-unknown-key", {"s.toml": "[system]\nnodes = 4\ncpus_per_nod = 2\n"}, ["--system", "{d}/s.toml"],
     "s.toml:3: system.cpus_per_nod: unknown key (did you mean 'cpus_per_node'"),
    ("system-unknown-table", {"s.toml": "[system]\nnodes = 4\n[powr]\ncpu_idle_w = 1\n"}, ["--system", "{d}/s.toml"],
     "s.toml:3: powr: unknown table (did you mean 'power'?)"),
    ("system-nodes-huge", {"s.toml": "[system]\nnodes = 1000000000000\n"}, ["--system", "{d}/s.toml"],
     "s.toml:2: system.nodes: 1000000000000 must be <= 67,108,864"),
    ("system-nodes-string", {"s.toml": "[system]\nnodes = \"ten\"\n"}, ["--system", "{d}/s.toml"],
     "s.toml:2: system.nodes: expected an integer, got 'ten'"),
    ("system-power-unknown-key", {"s.toml": "[system]\nnodes = 4\n[power]\ncpu_idl_w = 3\n"}, ["--system", "{d}/s.toml"],
     "s.toml:4: power.cpu_idl_w: [power] unknown key(s) 'cpu_idl_w'"),
    ("config-file-wrong-type", {"c.toml": '[run]\nworkload = "synthetic:jobs=10,nodes=4"\nnodes = "ten"\n'},
     ["-w", "synthetic", "--config", "{d}/c.toml"], "nodes: expected an integer, got 'ten'"),
    ("system-toml-syntax", {"s.toml": "[system\nnodes = 4\n"}, ["--system", "{d}/s.toml"], "TOML syntax error"),
]

VALID_CASES = [
    ("swf-bom-crlf", {"w.swf": b"\xef\xbb\xbf; MaxProcs: 16\r\n" + (J1 + "\r\n" + J2 + "\r\n").encode()}, [], 2),
    ("swf-long-comment-line", {"w.swf": ";" + " a" * 2_000_000 + "\n" + HDR + J1 + "\n"}, [], 1),
    ("sacct-bom-crlf", {"d.sacct": b"\xef\xbb\xbf" + (SH + "\r\n" + S1 + "\r\n" + S2 + "\r\n").encode()},
     ["-w", "sacct:{d}/d.sacct", "--nodes", "16"], 2),
    ("swf-header-check-off", {"w.swf": "; MaxProcs: 2\n" + J1 + "\n" + swf_line(f1="2", f5="1", f8="1") + "\n"},
     ["--set", "workload.header_check=false"], 1),
    ("swf-renumbered-duplicates", {"w.swf": HDR + J1 + "\n" + J1 + "\n"}, ["--set", "workload.duplicate_ids=renumber"], 2),
]


def _materialise(tmp_path: Path, files: dict, args: list[str]) -> list[str]:
    for name, content in files.items():
        p = tmp_path / name
        (p.write_bytes if isinstance(content, bytes) else p.write_text)(content)
    argv = [a.replace("{d}", str(tmp_path)) for a in args]
    if "-w" not in argv and files:
        argv = ["-w", str(tmp_path / next(iter(files)))] + argv
    elif "-w" not in argv:
        argv = ["-w", "synthetic:jobs=20,nodes=8"] + argv
    return argv


@pytest.mark.parametrize("case, files, args, expected", RUN_CASES, ids=[c[0] for c in RUN_CASES])
def test_bad_input_is_one_located_error_line(tmp_path, capsys, case, files, args, expected):
    argv = _materialise(tmp_path, files, args)
    t = time.perf_counter()
    rc = main(["run", *argv, "-o", str(tmp_path / "out"), "-q"])
    elapsed = time.perf_counter() - t
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("hpctwin: error: ") and "Traceback" not in err
    assert expected in lines[0], lines[0]
    assert not (tmp_path / "out").exists()
    assert elapsed < 30, f"{case} took {elapsed:.1f} s"      # no hang (the 10 MB line is linear)


@pytest.mark.parametrize("case, files, args, jobs", VALID_CASES, ids=[c[0] for c in VALID_CASES])
def test_valid_edge_cases_run(tmp_path, capsys, case, files, args, jobs):
    argv = _materialise(tmp_path, files, args)
    assert main(["run", *argv, "-o", str(tmp_path / "out"), "-q"]) == 0, capsys.readouterr().err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["jobs_simulated"] == jobs
    acc = summary["accounting"]
    assert acc["balanced"] and sum(acc["simulated"].values()) == jobs
    assert acc["records"] == jobs + sum(acc["skipped_by_run"].values()) + sum(acc["dropped_by_reader"].values())


def test_allow_empty_runs_an_empty_workload(tmp_path, capsys):
    (tmp_path / "w.swf").write_text(HDR)
    assert main(["run", "-w", str(tmp_path / "w.swf"), "--allow-empty", "-o", str(tmp_path / "o"), "-q"]) == 0
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["jobs_simulated"] == 0 and s["accounting"] == {"records": 0, "dropped_by_reader": {}, "skipped_by_run": {},
                                                            "simulated": {}, "balanced": True}


def test_every_record_is_accounted_for(tmp_path):
    """sacct steps and pending jobs dropped by the reader, a too-large job skipped by the run, the rest run."""
    rows = [S1, S1.replace("1|1|", "1.batch|1.batch|", 1), S2,
            sacct_row(JobID="3", JobIDRaw="3", Start="Unknown", End="Unknown", State="PENDING"),
            sacct_row(JobID="4", JobIDRaw="4", NNodes="64", NodeList="n[001-064]")]
    (tmp_path / "d.sacct").write_text(SH + "\n" + "\n".join(rows) + "\n")
    assert main(["run", "-w", f"sacct:{tmp_path / 'd.sacct'}", "--nodes", "16", "-o", str(tmp_path / "o"), "-q"]) == 0
    acc = json.loads((tmp_path / "o" / "summary.json").read_text())["accounting"]
    assert acc == {"records": 5, "dropped_by_reader": {"job_steps": 1, "never_started": 1},
                   "skipped_by_run": {"larger_than_machine": 1}, "simulated": {"COMPLETED": 2}, "balanced": True}


# ------------------------------------------------------------------------------ sweep files
SWEEP_BASE = '[base]\nworkload = "synthetic:jobs=20,nodes=8"\nnodes = 8\n'
SWEEP_CASES = [
    ("sample-dt-string", SWEEP_BASE + "sample_dt = 'x'\n[grid]\nseed = [0]\n", "s.toml:4: [base] sample_dt: expected a number, got 'x'"),
    ("seed-list-in-base", SWEEP_BASE + "seed = ['a']\n[grid]\nscheduler = ['easy']\n", "s.toml:4: [base] seed: expected an integer"),
    ("seed-string-in-grid", SWEEP_BASE + "[grid]\nseed = ['a']\n", "s.toml:5: [grid] seed: expected an integer, got 'a'"),
    ("kill-at-walltime-off", SWEEP_BASE + "kill_at_walltime = 'off'\n[grid]\nseed = [0]\n",
     "[base] kill_at_walltime: expected true or false, got 'off'"),
    ("unknown-key", SWEEP_BASE + "speed = 3\n[grid]\nseed = [0]\n", "s.toml:4: [base] speed: unknown key (did you mean 'seed'?)"),
    ("unknown-top-level", SWEEP_BASE + "[grid]\nseed = [0]\n[sweepp]\nname = 'x'\n", "sweepp: unknown top-level key (did you mean 'sweep'?)"),
    ("option-of-scheduler-without-options", SWEEP_BASE + '[grid]\n"options.scheduler.nosuch" = [1]\n',
     "scheduler.nosuch: scheduler 'easy' takes no options"),
    ("points-not-tables", "points = [5]\n" + SWEEP_BASE, "points: every [[points]] entry must be a table"),
    ("sweep-out-not-string", "[sweep]\nout = 5\n" + SWEEP_BASE + "[grid]\nseed = [0]\n",
     "s.toml:2: [sweep] out: expected a non-empty string, got 5"),
    ("grid-not-a-list", SWEEP_BASE + "[grid]\nseed = 5\n", "[grid] seed must be a list of values"),
    ("unknown-scheduler-in-grid", SWEEP_BASE + "[grid]\nscheduler = ['eassy']\n", "unknown scheduler 'eassy' (did you mean 'easy'"),
]


@pytest.mark.parametrize("case, text, expected", SWEEP_CASES, ids=[c[0] for c in SWEEP_CASES])
def test_bad_sweep_file_is_refused_before_running(tmp_path, capsys, case, text, expected):
    (tmp_path / "s.toml").write_text(text)
    rc = main(["sweep", str(tmp_path / "s.toml"), "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert err.startswith("hpctwin sweep: error: ") and expected in err, err
    assert not (tmp_path / "s.out" / "points").exists()


# ------------------------------------------------------------------------------ hostlists
@pytest.mark.parametrize("expr, hosts", [
    ("n[001-004,010]", ["n001", "n002", "n003", "n004", "n010"]),
    ("a[1-2],b[3-4]", ["a1", "a2", "b3", "b4"]),
    ("r[1-2]n[01-02]", ["r1n01", "r1n02", "r2n01", "r2n02"]),
    ("n5,n7", ["n5", "n7"]),
    ("None assigned", []),
    ("nid[0098-0101]", ["nid0098", "nid0099", "nid0100", "nid0101"]),
])
def test_hostlist_expansion(expr, hosts):
    assert expand_hostlist(expr) == hosts


@pytest.mark.parametrize("expr, msg", [("n[1-", "unclosed"), ("n]1", "unbalanced"), ("n[[1]]", "nested"),
                                       ("n[3-1]", "goes down"), ("n[a-b]", "bad range"), ("n[1],,n2", "empty host")])
def test_hostlist_errors(expr, msg):
    with pytest.raises(HostlistError, match=msg):
        expand_hostlist(expr)


def test_node_ids_count_from_zero_or_one_and_keep_export_ids():
    assert node_ids(["n001", "n002", "n010"]) == {"n001": 0, "n002": 1, "n010": 9}
    assert node_ids(["n0", "n1", "n5"]) == {"n0": 0, "n1": 1, "n5": 5}      # export_sacct's own names
    assert node_ids(["b1", "a10", "a2"]) == {"a2": 0, "a10": 1, "b1": 2}   # several prefixes: natural order


def test_recorded_nodes_from_sacct_nodelist_are_used(tmp_path, capsys):
    (tmp_path / "d.sacct").write_text(SH + "\n" + S1 + "\n" + S2 + "\n")
    out = tmp_path / "o"
    assert main(["run", "-w", f"sacct:{tmp_path / 'd.sacct'}", "--nodes", "16", "--placement", "recorded",
                 "-o", str(out), "-q"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["placement"] == {"name": "recorded", "recorded_used": 2, "fallbacks": 0}
    import pandas as pd  # noqa: PLC0415
    assert pd.read_csv(out / "jobs.csv")["nodes"].tolist() == ["0-3", "4-5"]


# ------------------------------------------------------------------------------ fuzz
TOKENS = ["1", "0", "-1", "17", "3.5", "inf", "-inf", "nan", "1e400", "1e20", "99999999999999999999", "1_0",
          "\u0661", "x", "", "{1,2}", ";", "-0", "+4", "1e5", "0x10", "\ufeff", "9" * 30]


def _swf_text(draw_lines) -> str:
    return "\n".join(" ".join(t) for t in draw_lines)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header=st.sampled_from(["", "; MaxProcs: 16\n", "; MaxProcs: 0\n", "; MaxRecords: 1\n", "\ufeff; MaxNodes: 8\r\n"]),
       lines=st.lists(st.lists(st.one_of(st.sampled_from(TOKENS), st.integers(-5, 10 ** 6).map(str)),
                               min_size=0, max_size=22), max_size=6),
       crlf=st.booleans())
def test_fuzz_swf_reader_located_error_or_workload(tmp_path_factory, header, lines, crlf):
    p = tmp_path_factory.mktemp("fz") / "f.swf"
    text = header + "\n".join(" ".join(t) for t in lines) + "\n"
    p.write_bytes((text.replace("\n", "\r\n") if crlf else text).encode("utf-8"))
    try:
        wl = read_swf(p)
    except SWFError as e:
        assert str(e).startswith(str(p)), e
        return
    assert np.isfinite(wl.submit).all() and np.isfinite(wl.runtime).all()
    assert len(np.unique(wl.job_id)) == len(wl)


SACCT_VALUES = ["", "Unknown", "None", "1", "0", "-1", "inf", "nan", "1e400", "99999999999999999999", "x", "4K",
                "2024-01-01T00:00:00", "2024-13-01T00:00:00", "00:10:00", "1-00:00:00", "00:00:inf", "UNLIMITED",
                "COMPLETED", "CANCELLED by 5", "PENDING", "FAILED", "n[1-3]", "n[1-", "n[0-9999999999]", "a[1-2],b[1]",
                "1.batch", "2_3", "4+0", "5_[1-3]", "\ufeff", "1|2"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.lists(st.one_of(st.sampled_from(SACCT_VALUES), st.integers(-3, 10 ** 7).map(str)),
                              min_size=11, max_size=11), max_size=5),
       bom=st.booleans())
def test_fuzz_sacct_reader_located_error_or_workload(tmp_path_factory, rows, bom):
    p = tmp_path_factory.mktemp("fz") / "d.sacct"
    text = ("\ufeff" if bom else "") + SH + "\n" + "\n".join("|".join(r) for r in rows) + "\n"
    p.write_text(text, encoding="utf-8")
    try:
        wl = read_sacct(p)
    except SacctError as e:
        assert str(e).startswith(str(p)), e
        return
    assert np.isfinite(wl.submit).all() and (wl.procs >= 1).all()
    assert len(np.unique(wl.job_id)) == len(wl)


def test_gzip_bom_swf_is_read(tmp_path):
    p = tmp_path / "w.swf.gz"
    p.write_bytes(gzip.compress(b"\xef\xbb\xbf" + (HDR + J1 + "\r\n").encode()))
    assert len(read_swf(p)) == 1


def test_generic_known_keys_check_for_key_value_files():
    from hpctwin.twin.options import ConfigError, check_known_keys  # noqa: PLC0415
    check_known_keys({"SchedulerType": 1, "bf_interval": 2}, ["SchedulerType", "BF_Interval"], "s.conf",
                     case_insensitive=True)
    with pytest.raises(ConfigError, match=r"s.conf:3: SchedulerTyp: unknown slurm.conf key \(did you mean "
                                          r"'SchedulerType'\?\)"):
        check_known_keys({"SchedulerTyp": 3}, ["SchedulerType"], "s.conf", what="slurm.conf key")


SYS_KEYS = ["name", "description", "nodes", "cpus_per_node", "gpus_per_node", "cpus_per_nod", "node", "gpu"]
SYS_VALUES = st.one_of(st.integers(-3, 2 ** 40), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5),
                       st.booleans(), st.lists(st.integers(0, 3), max_size=2))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(system=st.dictionaries(st.sampled_from(SYS_KEYS), SYS_VALUES, max_size=5),
       extra=st.sampled_from(["", "[power]\ncpu_idle_w = 1.0\n", "[powr]\nx = 1\n", "[network]\npreset = 'x'\n",
                              "[cooling]\nbogus = 1\n"]))
def test_fuzz_system_toml_located_error_or_spec(tmp_path_factory, system, extra):
    from hpctwin.twin.system import SystemError_, load_system  # noqa: PLC0415
    from hpctwin.twin.tomlwrite import dumps  # noqa: PLC0415
    p = tmp_path_factory.mktemp("sys") / "s.toml"
    p.write_text(dumps({"system": system}) + extra)
    try:
        spec = load_system(str(p))
    except SystemError_ as e:
        assert str(p) in str(e), e
        return
    assert 1 <= spec.nodes <= 2 ** 26 and spec.cpus_per_node >= 1 and spec.gpus_per_node >= 0


SWEEP_KEYS = ["scheduler", "seed", "nodes", "sample_dt", "kill_at_walltime", "estimate", "placement", "order",
              "backfill", "power", "tau", "allocation", "gpus_per_node", "speed", "options.scheduler.x",
              "options.failures.node_mtbf_days", "power_cap_w", "system", "options"]
SWEEP_VALUES = st.one_of(st.integers(-2, 10 ** 13), st.floats(allow_nan=False, allow_infinity=False),
                         st.sampled_from(["easy", "fcfs", "x", "", "generic", "off", "requested", "first-fit"]),
                         st.booleans(), st.lists(st.integers(0, 2), max_size=2), st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), max_size=1))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=st.dictionaries(st.sampled_from(SWEEP_KEYS), SWEEP_VALUES, max_size=4),
       grid=st.dictionaries(st.sampled_from(SWEEP_KEYS), st.one_of(st.lists(SWEEP_VALUES, min_size=1, max_size=2), SWEEP_VALUES),
                            min_size=1, max_size=2))
def test_fuzz_sweep_file_located_error_or_points(tmp_path_factory, base, grid):
    from hpctwin.experiments import sweep as sw  # noqa: PLC0415
    d = tmp_path_factory.mktemp("sw")
    base = {**base, "workload": "synthetic:jobs=10,nodes=4"}

    def val(v) -> str:                      # a TOML value (inline tables for dicts)
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {val(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        return json.dumps(v)

    text = "[base]\n" + "".join(f'"{k}" = {val(v)}\n' for k, v in base.items())
    text += "[grid]\n" + "".join(f'"{k}" = {val(v)}\n' for k, v in grid.items())
    p = d / "s.toml"
    p.write_text(text)
    try:
        s = sw.load_sweep(p)
        sw.preflight(s)
    except ValueError as e:                 # SweepError, or a located ConfigError from the checks
        assert str(p) in str(e), e
