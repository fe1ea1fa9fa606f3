"""The run folder, the CLI contract, determinism, error messages and interruption."""
from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import h5py
import numpy as np
import pandas as pd
import pytest

from hpctwin.twin.cli import main
from hpctwin.twin.metrics import bounded_slowdown, interval_average, sample_at, summarise
from hpctwin.twin.model_api import RunModel
from tests.helpers import simulate

SWF = """; Version: 2.2
; MaxJobs: 4
; MaxRecords: 4
; MaxProcs: 8
1 0 -1 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1
2 10 -1 50 8 -1 -1 8 60 -1 1 2 1 -1 1 -1 -1 -1
3 20 -1 30 2 -1 -1 2 40 -1 1 1 1 -1 1 -1 -1 -1
4 25 -1 0 2 -1 -1 2 40 -1 1 1 1 -1 1 -1 -1 -1
"""


@pytest.fixture
def swf(tmp_path):
    p = tmp_path / "tiny.swf"
    p.write_text(SWF)
    return p


def test_run_folder_contents(tmp_path, swf):
    out = tmp_path / "run"
    assert main(["run", "--workload", str(swf), "--scheduler", "easy", "--out", str(out), "--quiet"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [".hpctwin-run", "config.toml", "jobs.csv", "summary.json",
                                                    "timeseries.h5"]
    jobs = pd.read_csv(out / "jobs.csv")
    assert list(jobs.columns[:17]) == ["job_id", "submit", "start", "end", "wait", "elapsed", "procs", "timelimit",
                                   "estimate", "bsld", "state", "log_status", "user", "group", "queue",
                                   "partition", "nodes"]   # Slurm sacct names where one exists
    # job 4 has runtime 0: skipped and counted
    assert jobs.job_id.tolist() == [1, 2, 3]
    # EASY by hand: J1 [0,100) 4u; J2 (8u) head, shadow 100 (est 200 -> 200!), see below
    # J1 estimate 200: shadow = 200; J3 (2u, est 40) ends 60 <= 200: backfilled at 20.
    # J1 ends at 100 (early): J2 starts at 100.
    assert jobs.set_index("job_id").start.to_dict() == {1: 0, 2: 100, 3: 20}
    assert jobs.nodes.tolist() == ["0-3", "0-7", "4-5"]
    s = json.loads((out / "summary.json").read_text())
    assert s["jobs_skipped"] == {"runtime_le_0": 1}
    assert s["machine_units"] == 8 and s["machine_size_source"] == "workload header MaxProcs"
    assert s["jobs_simulated"] == 3 and s["jobs_in_log"] == 4
    assert s["mean_wait_s"] == pytest.approx((0 + 90 + 0) / 3)
    assert s["utilisation"] == pytest.approx((4 * 100 + 8 * 50 + 2 * 30) / (8 * 150))
    cfg = tomllib.loads((out / "config.toml").read_text())
    assert cfg["run"]["scheduler"] == "easy" and cfg["run"]["seed"] == 0 and "code_version" in cfg["run"]
    with h5py.File(out / "timeseries.h5") as h5:
        assert h5["utilisation"].attrs["units"].startswith("fraction")
        util = h5["utilisation"][:]
        t = h5["time"][:]
        assert t[0] == 0 and t[1] == 15
        # [0,15): only J1 (4u) -> 0.5 ; [15,30): J1 all the time, J3 from 20 -> (4*15 + 2*10)/(8*15)
        assert util[0] == pytest.approx(0.5)
        assert util[1] == pytest.approx((4 * 15 + 2 * 10) / 120)
        assert h5["queue_length"][0] == 0 and h5["queue_length"][1] == 1


def test_nodes_override_and_header(tmp_path, swf):
    out = tmp_path / "run"
    main(["run", "-w", str(swf), "-s", "fcfs", "--nodes", "16", "-o", str(out), "-q"])
    s = json.loads((out / "summary.json").read_text())
    assert s["machine_units"] == 16 and s["machine_size_source"] == "--nodes option"


def test_order_and_backfill_are_orthogonal(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    main(["run", "-w", "synthetic:jobs=300,nodes=32,seed=4,load=1.3", "-s", "easy", "--order", "sjf", "-o", str(a), "-q"])
    main(["run", "-w", "synthetic:jobs=300,nodes=32,seed=4,load=1.3", "-s", "sjf", "--backfill", "easy", "-o", str(b), "-q"])
    ja, jb = pd.read_csv(a / "jobs.csv"), pd.read_csv(b / "jobs.csv")
    assert ja.start.equals(jb.start)
    c = tmp_path / "c"
    main(["run", "-w", "synthetic:jobs=300,nodes=32,seed=4,load=1.3", "-s", "easy", "-o", str(c), "-q"])
    assert not pd.read_csv(c / "jobs.csv").start.equals(ja.start)


def test_same_command_twice_gives_identical_jobs_csv(tmp_path):
    outs = []
    for k in range(2):
        out = tmp_path / f"r{k}"
        main(["run", "-w", "synthetic:jobs=2000,nodes=64", "--seed", "7", "-s", "conservative", "-o", str(out), "-q"])
        outs.append((out / "jobs.csv").read_bytes())
    assert outs[0] == outs[1]
    other = tmp_path / "other"
    main(["run", "-w", "synthetic:jobs=2000,nodes=64", "--seed", "8", "-s", "conservative", "-o", str(other), "-q"])
    assert (other / "jobs.csv").read_bytes() != outs[0]


def test_third_party_scheduler_module_class(tmp_path, swf):
    out = tmp_path / "run"
    assert main(["run", "-w", str(swf), "-s", "tests.plugin_sched:LargestFirst", "-o", str(out), "-q"]) == 0
    jobs = pd.read_csv(out / "jobs.csv").set_index("job_id")
    # largest first: J1 at 0; J2 (8u) waits for J1 (ends 100); J3 arrives at 20, 2u fits but
    # J2 is larger and blocks (no backfill): J2 at 100, J3 at 150
    assert jobs.start.to_dict() == {1: 0, 2: 100, 3: 150}
    assert json.loads((out / "summary.json").read_text())["scheduler"] == "largest-first"


@pytest.mark.parametrize("args, message", [
    (["-s", "nosuch"], "unknown scheduler 'nosuch'"),
    (["-s", "nosuchmod:X"], "cannot import module 'nosuchmod'"),
    (["--system", "atlantis"], "unknown system 'atlantis'"),
    (["-w", "NOPE-LOG"], "unknown dataset 'NOPE-LOG'"),
    (["-w", "/nonexistent/x.swf"], "/nonexistent/x.swf: file not found"),
    (["-w", "synthetic:jobs=abc"], "jobs"),
    (["--sample-dt", "0"], "--sample-dt: 0.0 must be > 0"),
])
def test_bad_input_errors(tmp_path, capsys, args, message):
    rc = main(["run", "-o", str(tmp_path / "x"), "-q"] + args)
    assert rc == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_malformed_log_line_via_cli(tmp_path, capsys):
    p = tmp_path / "bad.swf"
    p.write_text(SWF.replace("3 20 -1 30 2", "3 20 -1 3O 2"))
    assert main(["run", "-w", str(p), "-o", str(tmp_path / "x"), "-q"]) == 2
    err = capsys.readouterr().err
    assert f"{p}:7: field 4 (run): '3O' is not a number" in err


def test_interrupted_run_leaves_no_folder(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["run", "-w", "synthetic:jobs=500,nodes=16", "-s", "tests.plugin_sched:Interrupting", "-o", str(out), "-q"])
    assert rc == 130
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir()]


def test_cli_help_documents_every_option():
    r = subprocess.run([sys.executable, "-m", "hpctwin.twin.cli", "run", "--help"], capture_output=True, text=True)
    for opt in ("--workload", "--scheduler", "--out", "--system", "--nodes", "--seed", "--quiet", "--order",
                "--backfill", "--kill-at-walltime", "--data-dir", "--placement", "--network", "--power"):
        assert opt in r.stdout


def test_metrics_by_hand():
    wait = np.array([0.0, 90.0, 5.0])
    run = np.array([100.0, 50.0, 2.0])
    # (0+100)/100 = 1; (90+50)/50 = 2.8; (5+2)/max(2, tau=10) = 0.7 -> bounded below by 1
    assert bounded_slowdown(wait, run).tolist() == [1.0, 2.8, 1.0]
    s = summarise(np.array([0.0, 10.0]), np.array([0.0, 20.0]), np.array([10.0, 30.0]), np.array([2, 1]), 4)
    assert s["mean_wait_s"] == 5.0 and s["makespan_s"] == 30.0
    assert s["utilisation"] == pytest.approx((2 * 10 + 1 * 10) / (4 * 30))
    # piecewise-constant signal 0 on [0,5), 4 on [5,20), 1 from 20 on
    ct, v = np.array([0.0, 5.0, 20.0]), np.array([0.0, 4.0, 1.0])
    np.testing.assert_allclose(interval_average(ct, v, np.array([0.0, 10.0, 20.0]), 10.0), [2.0, 4.0, 1.0])
    np.testing.assert_array_equal(sample_at(ct, v, np.array([0.0, 5.0, 19.0, 25.0])), [0, 4, 4, 1])


class HalfSpeedWhileOthersRun(RunModel):
    """Test model: job index 0 runs at half speed while any other job runs."""

    name = "half"

    def bind(self, ctx):
        self.running = set()

    def on_start(self, now, job, nodes):
        self.running.add(job)
        if job != 0 and 0 in self.running:
            return {0: 0.5}

    def on_finish(self, now, job):
        self.running.discard(job)
        if job != 0 and 0 in self.running and len(self.running) == 1:
            return {0: 1.0}


def test_progress_rate_moves_finish_exactly():
    """J1 (10 s of work, 2 of 4 units) at 0; J2 (2 s) at 4 slows J1 to half speed until 6.
    Work done by J1: 4 by t=4, +1 by t=6, remaining 5 at full speed: ends at 11."""
    rows = [(1, 0, 10, 2, 100), (2, 4, 2, 2, 100)]
    res, prep, _ = simulate(rows, 4, "fcfs", models=[HalfSpeedWhileOthersRun()])
    assert res.end.tolist() == [11.0, 6.0]
    # the kill limit is wall clock: a 9 s request kills J1 at 9 despite the slowdown
    rows = [(1, 0, 10, 2, 9), (2, 4, 2, 2, 100)]
    res, prep, _ = simulate(rows, 4, "fcfs", models=[HalfSpeedWhileOthersRun()])
    assert res.end.tolist() == [9.0, 6.0] and res.killed.tolist() == [True, False]


def test_scheduler_that_overcommits_is_rejected():
    from hpctwin.twin.simulation import SimulationError

    class Greedy:
        name = "greedy"

        def bind(self, jobs, cluster):
            pass

        def schedule(self, now, queue, cluster):
            return queue.tolist()

    from hpctwin.schedulers.registry import make_scheduler  # noqa: F401
    with pytest.raises(SimulationError, match=r"started job 2 \(3 units\) at t=0.0 with only 1 free"):
        simulate([(1, 0, 5, 3, 5), (2, 0, 5, 3, 5)], 4, sched_obj=Greedy())


@pytest.mark.parametrize("cmd, text", [("sweep", "sweep_file"), ("export", "{swf,sacct,batsim}"), ("topology", "show")])
def test_delegated_commands_take_their_own_help(capsys, cmd, text):
    with pytest.raises(SystemExit) as e:
        main([cmd, "--help"])
    assert e.value.code == 0
    assert text in capsys.readouterr().out


def test_export_swf_round_trip_through_cli(tmp_path, swf):
    out = tmp_path / "out.swf"
    assert main(["export", "swf", "-w", str(swf), "-o", str(out)]) == 0
    from hpctwin.datasets.swf import read_swf
    a, b = read_swf(swf), read_swf(out)
    assert a.job_id.tolist() == b.job_id.tolist() and a.runtime.tolist() == b.runtime.tolist()


def test_failures_flag_and_options(tmp_path, capsys):
    # --failures on: the summary and config carry the failure model and its options (here every
    # interrupted job fails, so failed rows = the summary's count); bad options are refused before running
    out = tmp_path / "f"
    assert main(["run", "-w", "synthetic:jobs=200,nodes=16,seed=2", "--nodes", "16", "--failures", "on",
                 "--set", "failures.node_mtbf_days=2", "--set", "failures.regimes.default=fail",
                 "-o", str(out), "-q"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["failures"]["node_mtbf_s"] == 2 * 86400.0 and s["failures"]["regimes"]["default"] == "fail"
    jobs = pd.read_csv(out / "jobs.csv")
    assert (jobs["state"] == "NODE_FAIL").sum() == s["failures"]["jobs_failed"] > 0
    assert "failures" in (out / "config.toml").read_text()
    assert main(["run", "-w", "synthetic:jobs=20,nodes=16", "--nodes", "16", "--failures", "on",
                 "--set", "failures.mtbf=3", "-o", str(tmp_path / "g"), "-q"]) == 2
    assert "failures.mtbf: unknown key" in capsys.readouterr().err and not (tmp_path / "g").exists()
