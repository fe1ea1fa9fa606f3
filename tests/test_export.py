"""``hpctwin export --format batsim RUN``: Batsim's jobs output, as evalys's JobSet.from_csv reads it."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hpctwin.datasets.export import BATSIM_COLUMNS, batsim_jobs, interval_set_text
from hpctwin.twin.cli import main as cli_main
from hpctwin.twin.run import RunConfig, run
from tests.helpers import workload


def test_interval_set_text_is_batsims():
    assert interval_set_text("0-3,8,10-11") == "0-3 8 10-11"
    assert interval_set_text("5") == "5" and interval_set_text("") == ""


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """FCFS on 4 units: job 1 (2 units, 100 s) at 0; job 2 (4 units) waits for it; job 3 (1 unit,
    runs 300 s, asks 100 s) waits behind job 2 (FCFS) and is killed at its limit."""
    d = tmp_path_factory.mktemp("b") / "run"
    wl = workload([(1, 0, 100, 2, 200), (2, 10, 50, 4, 60), (3, 20, 300, 1, 100)])
    run(RunConfig(workload="tiny", scheduler="fcfs", nodes=4, out=str(d), quiet=True), workload=wl)
    return d


def test_batsim_export_hand_checked(tiny_run, capsys):
    assert cli_main(["export", "--format", "batsim", str(tiny_run)]) == 0
    assert "wrote 3 jobs" in capsys.readouterr().out
    text = (tiny_run / "out_jobs.csv").read_text()
    assert text.split("\n")[0] == ",".join(BATSIM_COLUMNS)
    df = pd.read_csv(tiny_run / "out_jobs.csv", keep_default_na=False, dtype={"allocated_resources": str})
    assert df.job_id.tolist() == [1, 2, 3]
    assert df.starting_time.tolist() == [0, 100, 150]
    assert df.finish_time.tolist() == [100, 150, 250]
    assert df.execution_time.tolist() == [100, 50, 100]
    assert df.waiting_time.tolist() == [0, 90, 130]
    assert df.turnaround_time.tolist() == [100, 140, 230]
    assert df.stretch.tolist() == pytest.approx([1.0, 2.8, 2.3])
    assert df.allocated_resources.tolist() == ["0-1", "0-3", "0"]
    assert df.final_state.tolist() == ["COMPLETED_SUCCESSFULLY", "COMPLETED_SUCCESSFULLY", "COMPLETED_WALLTIME_REACHED"]
    assert df.success.tolist() == [1, 1, 0]
    assert df.requested_number_of_resources.tolist() == [2, 4, 1]
    assert df.requested_time.tolist() == [200, 60, 100]
    assert (df.consumed_energy == -1).all()            # power model off: Batsim's "no energy" value
    assert set(df.profile) == {"delay"} and set(df.workload_name) == {"test"}   # the workload's name


def test_subcommand_spelling_and_out(tiny_run, tmp_path):
    out = tmp_path / "x" / "jobs_batsim.csv"
    assert cli_main(["export", "--format=batsim", str(tiny_run)]) == 0
    assert cli_main(["export", "batsim", str(tiny_run), "--out", str(out)]) == 0
    assert out.read_text() == (tiny_run / "out_jobs.csv").read_text()


def test_never_started_job_is_rejected_and_energy_kept():
    jobs = pd.DataFrame({"job_id": [7, 8], "submit": [0.0, 5.0], "start": [10.0, np.nan], "end": [30.0, np.nan],
                         "procs": [3, 2], "timelimit": [60.0, 60.0], "state": ["NODE_FAIL", "PENDING"],
                         "nodes": ["2-3,9", ""], "energy_j": [1.5e6, np.nan]})
    b = batsim_jobs(jobs, "w")
    assert b.final_state.tolist() == ["COMPLETED_KILLED", "REJECTED"]
    assert b.allocated_resources.tolist() == ["2-3 9", ""]
    assert b.consumed_energy.tolist() == [1.5e6, -1.0]
    assert np.isnan(b.starting_time[1]) and b.success.tolist() == [0, 0]


def test_bad_jobs_table_names_the_field():
    with pytest.raises(ValueError, match=r"x.csv: no column\(s\) nodes"):
        batsim_jobs(pd.DataFrame({c: [] for c in ("job_id", "submit", "start", "end", "procs", "timelimit",
                                                  "state")}), source="x.csv")
    bad = pd.DataFrame({"job_id": [1], "submit": [0.0], "start": [0.0], "end": [1.0], "procs": [1],
                        "timelimit": [1.0], "state": ["done"], "nodes": ["0"]})
    with pytest.raises(ValueError, match=r"field 'state': unknown value\(s\) \['done'\]"):
        batsim_jobs(bad, source="x.csv")


def test_missing_run_folder_is_a_clear_error(tmp_path, capsys):
    assert cli_main(["export", "--format", "batsim", str(tmp_path / "nope")]) == 2
    assert "jobs.csv: not found" in capsys.readouterr().err


def test_evalys_reads_it(tiny_run):
    """evalys's own reader (optional: not a dependency) parses the intervals Batsim's way."""
    jobset = pytest.importorskip("evalys.jobset")
    cli_main(["export", "--format", "batsim", str(tiny_run)])
    js = jobset.JobSet.from_csv(str(tiny_run / "out_jobs.csv"))
    assert js.MaxProcs == 4
    assert js.df.proc_alloc.tolist() == [2, 4, 1]
