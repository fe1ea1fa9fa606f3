"""sacct -P reader and writer: every odd case of tests/data/sacct_mixed.txt, checked by hand."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpctwin.datasets.sacct import (SacctError, export_sacct, format_hostlist, format_slurm_duration,
                            parse_slurm_duration, read_sacct)

DATA = Path(__file__).parent / "data"
T0 = 1709287200  # 2024-03-01T10:00:00 UTC


@pytest.fixture(scope="module")
def wl():
    return read_sacct(DATA / "sacct_mixed.txt")


def test_steps_skipped_and_unfinished_dropped(wl):
    # 21 rows: 3 steps of job 100, 107 PENDING, 108 RUNNING, 109 cancelled while pending,
    # 200_[3-5] pending array remainder -> 13 jobs
    assert len(wl) == 13
    assert 107 not in wl.job_id and 108 not in wl.job_id and 109 not in wl.job_id
    assert "3 job steps skipped" in wl.notes[0]
    assert "3 jobs never started and 1 still running dropped" in wl.notes[0]


def test_ids_arrays_and_het(wl):
    assert wl.job_id.tolist() == [100, 101, 102, 103, 104, 105, 106, 201, 202, 300, 301, 110, 111]
    i = wl.job_id.tolist().index(201)
    assert wl.columns["array_job_id"][i] == 200 and wl.columns["array_task_id"][i] == 1
    assert wl.columns["array_task_id"][wl.job_id.tolist().index(202)] == 2
    assert wl.columns["array_job_id"][0] == -1
    assert any("heterogeneous" in n for n in wl.notes)


def test_times_relative_to_first_submit(wl):
    assert wl.header["UnixStartTime"] == str(T0)
    assert wl.submit.tolist() == [0, 300, 360, 420, 480, 540, 600, 900, 900, 1200, 1200, 1800, 1860]
    assert wl.columns["recorded_start"][:3].tolist() == [10, 330, 600]
    # runtime = Elapsed
    assert wl.runtime.tolist() == [3600, 60, 600, 1800, 600, 30, 1800, 600, 300, 600, 600, 7200, 600]


def test_time_limits(wl):
    req = wl.requested_time
    # 02:00:00, 00:30:00, 01:00:00, 00:30:00, "10" (minutes), "05:00" (MM:SS), 1-00:00:00
    assert req[:7].tolist() == [7200, 1800, 3600, 1800, 600, 300, 86400]
    assert math.isnan(req[-2]) and math.isnan(req[-1])  # UNLIMITED, Partition_Limit


def test_states_to_status(wl):
    assert wl.status.tolist() == [1, 0, 5, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]
    assert wl.columns["state"][2] == "CANCELLED by 1001"
    assert wl.columns["state"][:7].tolist() == ["COMPLETED", "FAILED", "CANCELLED by 1001",
                                                "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"]


def test_names_sizes_gpus_energy(wl):
    assert wl.header["Users"] == "alice,bob,carol"
    assert wl.header["Accounts"] == "physics,chem"
    assert wl.header["Partitions"] == "gpu,batch"
    assert wl.header["QOSs"] == "normal,high"
    assert wl.user[:4].tolist() == [0, 1, 0, 2]
    assert wl.group[:4].tolist() == [0, 1, 0, 1]
    assert wl.partition[:2].tolist() == [0, 1]
    assert wl.columns["qos"][2] == 1
    assert wl.procs.tolist() == [2, 1, 4, 1, 1, 1, 2, 1, 1, 1, 2, 1, 1]
    assert wl.columns["ncpus"][0] == 64
    g = wl.columns["gpus_per_node"]
    # job 100: ReqTRES names no GPU while job 300's does, so this dump's ReqTRES carries GPU requests and
    # the gres/gpu=8 of job 100's AllocTRES came with whole nodes: no GPU asked
    assert g[0] == 0.0 and wl.columns["gpus"][0] == 0.0
    assert g[10] == 2.0         # gres/gpu:a100=4 on 2 nodes
    assert g[1] == 0.0
    e = wl.columns["consumed_energy_j"]
    assert e[0] == 3.6e6 and math.isnan(e[1])
    assert wl.columns["recorded_priority"][0] == 1234


def test_unit_cpus():
    w = read_sacct(DATA / "sacct_mixed.txt", unit="cpus")
    assert w.procs[:3].tolist() == [64, 32, 128]


def test_errors_name_file_line_field():
    with pytest.raises(SacctError, match=r"sacct_bad_time.txt:3: field Start: '2024-13-01"):
        read_sacct(DATA / "sacct_bad_time.txt")
    with pytest.raises(SacctError, match=r"sacct_bad_fields.txt:3: 8 fields, the header has 9"):
        read_sacct(DATA / "sacct_bad_fields.txt")
    with pytest.raises(SacctError, match=r"sacct_bad_limit.txt:3: field Timelimit: bad time '1h'"):
        read_sacct(DATA / "sacct_bad_limit.txt")
    with pytest.raises(SacctError, match="file not found"):
        read_sacct(DATA / "nope.txt")


def test_missing_header_field(tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("JobID|Start|End|NNodes|State\n1|2024-01-01T00:00:00|2024-01-01T00:01:00|1|COMPLETED\n")
    with pytest.raises(SacctError, match=r"x.txt:1: header has no 'submit' field"):
        read_sacct(f)


def test_unknown_state(tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("JobID|Submit|Start|End|NNodes|State\n"
                 "1|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:01:00|1|EXPLODED\n")
    with pytest.raises(SacctError, match=r"x.txt:2: field State: unknown state 'EXPLODED'"):
        read_sacct(f)


def test_epoch_times_parsable2_and_gzip(tmp_path):
    import gzip
    f = tmp_path / "e.txt.gz"
    f.write_bytes(gzip.compress(b"JobID|Submit|Start|End|NNodes|State|\n"
                                b"7|1000|1010|1070|3|COMPLETED|\n8|1005|1070|1080|1|TIMEOUT|\n"))
    w = read_sacct(f)
    assert w.submit.tolist() == [0, 5] and w.runtime.tolist() == [60, 10]
    assert w.header["UnixStartTime"] == "1000"
    assert w.columns["recorded_start"].tolist() == [10, 70]


def test_duration_helpers():
    assert parse_slurm_duration("1-02:03:04") == 93784
    assert parse_slurm_duration("2-3") == 2 * 86400 + 3 * 3600
    assert parse_slurm_duration("45") == 2700
    assert parse_slurm_duration("1:30") == 90
    assert math.isnan(parse_slurm_duration("UNLIMITED"))
    assert format_slurm_duration(93784) == "1-02:03:04"
    assert format_slurm_duration(float("nan")) == "UNLIMITED"
    assert format_hostlist([0, 1, 2, 5, 7, 8]) == "n[0-2,5,7-8]"
    assert format_hostlist([4]) == "n4"


def test_export_roundtrip(tmp_path, wl):
    df = pd.DataFrame({
        "job_id": wl.job_id, "submit": wl.submit, "start": wl.submit + 7,
        "end": wl.submit + 7 + wl.runtime, "procs": wl.procs, "requested_time": wl.requested_time,
        "status": wl.status, "nodes": [f"0-{p - 1}" if p > 1 else "0" for p in wl.procs], "user": wl.user, "group": wl.group,
        "partition": wl.partition,
    })
    df.loc[3, "start"] = np.nan  # a job the simulation never started
    df.loc[3, "end"] = np.nan
    out = tmp_path / "sim.txt"
    names = {k: wl.header[k].split(",") for k in ("Users", "Accounts", "Partitions")}
    assert export_sacct(df, out, epoch=T0, names=names) == len(wl)
    lines = out.read_text().splitlines()
    assert lines[0] == ("JobID|JobIDRaw|Submit|Eligible|Start|End|Elapsed|Timelimit|NNodes|NCPUS|"
                        "NodeList|User|Account|Partition|State")
    assert lines[1] == ("100|100|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:00:07|"
                        "2024-03-01T11:00:07|01:00:00|02:00:00|2|2|n[0-1]|alice|physics|gpu|COMPLETED")
    assert lines[4].endswith("|Unknown|Unknown|00:00:00|00:30:00|1|1|None assigned|carol|chem|batch|PENDING")
    back = read_sacct(out)
    keep = np.ones(len(wl), dtype=bool)
    keep[3] = False
    assert back.job_id.tolist() == wl.job_id[keep].tolist()
    assert np.array_equal(back.submit, wl.submit[keep])
    assert np.array_equal(back.runtime, wl.runtime[keep])
    assert np.array_equal(back.columns["recorded_start"], wl.submit[keep] + 7)
    assert back.status.tolist() == wl.status[keep].tolist()


def test_replay_with_slurm_and_export(tmp_path):
    """sacct dump -> Slurm-like replay on 20 nodes (partitions/QOS names reach the scheduler
    through the name columns) -> export -> read back: same jobs and simulated starts."""
    from hpctwin.twin.run import RunConfig, run
    wl = read_sacct(DATA / "sacct_mixed.txt")
    conf = tmp_path / "slurm.conf"      # the dump's GPU jobs need GPUs on the nodes (GRES)
    conf.write_text("NodeName=n[0-19] CPUs=1 Gres=gpu:8\nPartitionName=batch Nodes=n[0-19] Default=YES\n"
                    "PartitionName=gpu Nodes=n[0-19]\n")
    r = run(RunConfig(workload="sacct", scheduler="slurm", nodes=20, options={"scheduler": {"slurm_conf": str(conf)}}),
            workload=wl)
    out = tmp_path / "sim.txt"
    export_sacct(r.jobs, out, epoch=float(wl.header["UnixStartTime"]),
                 names={"Users": wl.header["Users"].split(",")})
    back = read_sacct(out)
    assert sorted(back.job_id.tolist()) == sorted(r.jobs.job_id.tolist())
    sim = r.jobs.set_index("job_id")
    b = dict(zip(back.job_id.tolist(), back.columns["recorded_start"].tolist()))
    for jid, s in b.items():
        assert s == sim.start[jid] - sim.submit.min()
    states = dict(zip(back.job_id.tolist(), back.columns["state"].tolist()))
    killed = sim.index[sim.state == "TIMEOUT"].tolist()
    assert all(states[j] == "TIMEOUT" for j in killed)
    # no job of this dump overruns its limit; the log's outcome is kept (SWF code -> State)
    assert states[101] == "FAILED" and states[102] == "CANCELLED" and states[100] == "COMPLETED"


def test_export_round_trips_user_account_partition_names(tmp_path):
    """hpctwin run on a sacct dump, then hpctwin export sacct: names come back as text, not ids."""
    from hpctwin.twin.cli import main  # noqa: PLC0415
    dump = tmp_path / "names.sacct"
    dump.write_text(
        "JobID|JobIDRaw|Submit|Start|End|Elapsed|Timelimit|NNodes|NCPUS|NodeList|User|Account|Partition|State\n"
        "1|1|2024-01-01T00:00:00|2024-01-01T00:01:00|2024-01-01T00:11:00|00:10:00|01:00:00|4|16|n[001-004]|alice|physics|batch|COMPLETED\n"
        "2|2|2024-01-01T00:02:00|2024-01-01T00:20:00|2024-01-01T00:30:00|00:10:00|01:00:00|2|8|n[005-006]|bob|chem|gpu|COMPLETED\n")
    run = tmp_path / "run"
    assert main(["run", "-w", f"sacct:{dump}", "--nodes", "16", "-o", str(run), "-q"]) == 0
    out = tmp_path / "back.sacct"
    assert main(["export", "sacct", str(run), "-o", str(out)]) == 0
    back = read_sacct(out)
    assert back.columns["user_name"].tolist() == ["alice", "bob"]
    assert back.columns["account_name"].tolist() == ["physics", "chem"]
    assert back.columns["partition_name"].tolist() == ["batch", "gpu"]
    # the simulated nodes read back as the same node ids (export writes n[0-3], n[4-5])
    assert [r.tolist() for r in back.columns["recorded_nodes"]] == [[0, 1, 2, 3], [4, 5]]


@pytest.mark.parametrize("cancel_time", [42.0, None])
def test_export_writes_a_job_withdrawn_while_waiting_as_cancelled(tmp_path, cancel_time):
    """A run's CANCELLED job (EngineControl.cancel: never started) is written as sacct shows a job
    cancelled while pending: Start None (time_start 0 in the database, NO_VAL), End the cancel time
    (``cancel_time``; Unknown in a table without the column), Elapsed 00:00:00, no nodes, State
    CANCELLED; a job never started and not cancelled stays PENDING with Start/End Unknown; read back,
    both are dropped as jobs that never ran."""
    df = pd.DataFrame({"job_id": [1, 2, 3], "submit": [0.0, 10.0, 20.0], "start": [5.0, np.nan, np.nan],
                       "end": [65.0, np.nan, np.nan], "procs": [2, 1, 4], "requested_time": [120.0, 60.0, 60.0],
                       "state": ["COMPLETED", "CANCELLED", "PENDING"], "log_status": [1, 1, 1],
                       "nodes": ["0-1", "", ""]})
    if cancel_time is not None:
        df["cancel_time"] = [np.nan, cancel_time, np.nan]
    out = tmp_path / "sim.txt"
    assert export_sacct(df, out, epoch=T0) == 3
    lines = out.read_text().splitlines()
    assert lines[1] == ("1|1|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:00:05|2024-03-01T10:01:05|"
                        "00:01:00|00:02:00|2|2|n[0-1]|COMPLETED")
    end = "2024-03-01T10:00:42" if cancel_time is not None else "Unknown"
    assert lines[2] == (f"2|2|2024-03-01T10:00:10|2024-03-01T10:00:10|None|{end}|00:00:00|00:01:00|1|1|"
                        "None assigned|CANCELLED")
    assert lines[3].endswith("|Unknown|Unknown|00:00:00|00:01:00|4|4|None assigned|PENDING")
    back = read_sacct(out)
    assert back.job_id.tolist() == [1] and back.dropped == {"never_started": 2}


def test_reader_drops_both_forms_of_a_job_cancelled_while_pending(tmp_path):
    """sacct shows a job cancelled while pending as Start None, End the cancel (the usual case), or, when
    its start record reached the database only at the cancel, Start = End = the cancel with Elapsed
    00:00:00 and no nodes (slurmctld's job_signal() sets start_time = end_time = now); a job cancelled
    after it started keeps its runtime."""
    dump = tmp_path / "c.sacct"
    dump.write_text(
        "JobID|JobIDRaw|Submit|Start|End|Elapsed|NNodes|NCPUS|NodeList|State\n"
        "1|1|2024-01-01T00:00:00|None|2024-01-01T00:05:00|00:00:00|2|2|None assigned|CANCELLED by 1000\n"
        "2|2|2024-01-01T00:00:10|2024-01-01T00:05:00|2024-01-01T00:05:00|00:00:00|1|1|None assigned|CANCELLED by 0\n"
        "3|3|2024-01-01T00:00:20|2024-01-01T00:01:00|2024-01-01T00:04:00|00:03:00|1|1|n1|CANCELLED by 1000\n")
    wl = read_sacct(dump)
    assert wl.job_id.tolist() == [3] and wl.runtime.tolist() == [180.0] and wl.status.tolist() == [5]
    assert wl.dropped == {"never_started": 2}


def test_requeued_runs_of_sacct_duplicates_are_one_job(tmp_path):
    """``sacct -D`` lists each run of a requeued job (Slurm 22.05: the run ends PREEMPTED, REQUEUED or
    NODE_FAIL; Submit and Eligible are reset at each requeue). Job 2 ran twice before its last run: one
    job, submitted at its first Submit (1000 -> t 0), eligible at its first Eligible, run = the last row's
    Elapsed (139 s), state COMPLETED. Job 3 was preempted with PreemptMode=CANCEL (one row): a job ending
    PREEMPTED. Job 4 is requeued and pending again: its earlier run is a segment, the job is dropped as
    never finished. Two COMPLETED rows of one id stay an error."""
    f = tmp_path / "d.txt"
    f.write_text("JobID|JobIDRaw|Submit|Eligible|Start|End|Elapsed|NNodes|State\n"
                 "2|2|1000|1000|1000|1023|00:00:23|1|PREEMPTED\n"
                 "3|3|1001|1001|1001|1050|00:00:49|1|PREEMPTED\n"
                 "2|2|1023|1029|1101|1162|00:01:01|1|REQUEUED\n"
                 "4|4|1002|1002|1002|1040|00:00:38|1|NODE_FAIL\n"
                 "4|4|1040|1046|Unknown|Unknown|00:00:00|1|PENDING\n"
                 "2|2|1162|1168|1305|1444|00:02:19|1|COMPLETED\n")
    w = read_sacct(f)
    assert w.job_id.tolist() == [2, 3]
    assert w.submit.tolist() == [0.0, 1.0] and w.runtime.tolist() == [139.0, 49.0]
    assert w.columns["eligible"].tolist() == [0.0, 1.0]
    assert w.columns["recorded_start"].tolist() == [305.0, 1.0]
    assert list(w.columns["state"]) == ["COMPLETED", "PREEMPTED"]
    assert any(n.startswith("3 earlier runs (sacct -D rows ended PREEMPTED, REQUEUED or NODE_FAIL) of 2 "
                            "requeued jobs") for n in w.notes)
    f.write_text("JobID|Submit|Start|End|NNodes|State\n"
                 "5|1000|1000|1010|1|COMPLETED\n5|1000|1010|1020|1|COMPLETED\n")
    with pytest.raises(SacctError, match=r"d.txt:3: field JobID: job id 5 repeats line 2"):
        read_sacct(f)
