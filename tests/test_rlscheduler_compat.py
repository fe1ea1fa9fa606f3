"""``--compat rlscheduler``: the RLScheduler harness's loader, sampling, loop, scores and metric.

Hand-derived tiny cases (harness start times next to hpctwin's textbook engine on the same jobs),
the score functions, the loader's conventions and errors, sampling determinism, and table cells
against the harness's own output (its code run on the same files: `experiments.rlscheduler_table`).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hpctwin.experiments import rlscheduler_table as table
from hpctwin.schedulers.rlscheduler_compat import (SCORES, HarnessLoopError, harness_cell, replay_sequence,
                                                   score_keys)
from hpctwin.schedulers.rlscheduler_run import CompatError, compat_settings
from hpctwin.schedulers.rlscheduler_trace import (HarnessTraceError, gym_np_random, load_harness_trace,
                                                  sample_starts)
from hpctwin.twin.run import RunConfig, simulate

HEADER = "; MaxNodes: 4\n; MaxProcs: 4\n"


def _swf(tmp_path: Path, rows: list[tuple], header: str = HEADER, name: str = "t.swf") -> Path:
    """rows: (job, submit, run, procs, request); the other SWF fields are -1 (status 1)."""
    lines = [f"{j} {s} -1 {r} {p} -1 -1 {p} {q} -1 1 1 1 -1 1 -1 -1 -1" for j, s, r, p, q in rows]
    path = tmp_path / name
    path.write_text(header + "\n".join(lines) + "\n")
    return path


def _engine_starts(path: Path, scheduler: str, backfill: str | None = None) -> list[float]:
    res = simulate(RunConfig(workload=str(path), scheduler=scheduler, backfill=backfill, out=None))
    return res.jobs.sort_values("job_id")["start"].tolist()


# --------------------------------------------------------------------------- hand-derived loops
def test_committed_head_vs_textbook_sjf(tmp_path):
    # 4 nodes. J1 (4 nodes, 100 s) starts at 0. J2 (2 nodes, 50 s) arrives at 10 into an empty queue and
    # is committed; J3 (4 nodes, 10 s) arrives at 20. Harness: J1 ends at 100 -> J2 starts at 100, J3
    # waits for J2's end at 150. Textbook SJF re-sorts at 100: J3 (shorter) starts at 100, J2 at 110.
    path = _swf(tmp_path, [(1, 0, 100, 4, 100), (2, 10, 50, 2, 50), (3, 20, 10, 4, 10)])
    tr = load_harness_trace(path)
    res = replay_sequence(tr, 0, 3, "sjf", backfill=False)
    assert res.start.tolist() == [0, 100, 150]
    assert res.order == [0, 1, 2]
    # bsld: J1 1, J2 (90 + 50) / 50 = 2.8, J3 (130 + 10) / 10 = 14; the value sums bsld / 3 in start order
    assert res.bsld.tolist() == [1.0, 2.8, 14.0]
    assert res.value == pytest.approx((1.0 + 2.8 + 14.0) / 3, rel=1e-15)
    assert _engine_starts(path, "sjf") == [0.0, 110.0, 100.0]


def test_greedy_backfill_vs_textbook_easy(tmp_path):
    # J1 (3 nodes, 100 s) runs; the head J2 (2 nodes) waits for the shadow time 100, when 4 nodes are
    # free, 2 more than J2 needs. J3 (1 node, 200 s): EASY backfills it at 2 on those extra nodes; the
    # harness has no extra-nodes clause and 2 + 200 >= 100, so J3 waits and starts with J2 at 100.
    path = _swf(tmp_path, [(1, 0, 100, 3, 100), (2, 1, 10, 2, 10), (3, 2, 200, 1, 200)])
    tr = load_harness_trace(path)
    assert replay_sequence(tr, 0, 3, "fcfs", backfill=True).start.tolist() == [0, 100, 100]
    assert _engine_starts(path, "easy") == [0.0, 100.0, 2.0]


def test_backfill_shadow_is_computed_once_and_strict(tmp_path):
    # J1 (4 nodes) requests 1,000 s but ends at 50: the head J2's shadow stays 1000 after J1 ends.
    # J3 (4 nodes, request 940 s) arrives at 5: 5 + 940 < 1000 but it does not fit before 50; at J1's
    # end (50) the head J2 fits first and starts at 50, J3 after J2 (60 s) at 110.
    # J4 (1 node, request 995 s at 5): 5 + 995 = 1000 is not < 1000, so never backfilled.
    path = _swf(tmp_path, [(1, 0, 50, 4, 1000), (2, 1, 60, 4, 60), (3, 5, 10, 4, 940), (4, 5, 10, 1, 995)])
    tr = load_harness_trace(path)
    res = replay_sequence(tr, 0, 4, "fcfs", backfill=True)
    assert res.start.tolist() == [0, 50, 110, 120]


def test_stale_shadow_lets_a_long_job_delay_the_head(tmp_path):
    # J1 (2 nodes, requests 1,000 s, ends at 10) and J2 (2 nodes, 500 s) start at 0; the head J3
    # (4 nodes) gets the shadow 1000 (J1's requested end) at commitment. J1 ends at 10: the harness keeps
    # 1000, so J4 (2 nodes, 600 s, submitted at 5) backfills at 10 (10 + 600 < 1000) and the head waits
    # until 610. Textbook EASY recomputes the shadow at 10 (J2's requested end, 500): J4 would delay it,
    # so J3 starts at 500 and J4 at 510.
    path = _swf(tmp_path, [(1, 0, 10, 2, 1000), (2, 0, 500, 2, 500), (3, 1, 10, 4, 10), (4, 5, 600, 2, 600)])
    res = replay_sequence(load_harness_trace(path), 0, 4, "fcfs", backfill=True)
    assert res.start.tolist() == [0, 0, 610, 10]
    assert res.order == [0, 1, 3, 2]
    assert _engine_starts(path, "easy") == [0.0, 0.0, 500.0, 510.0]


def test_empty_queue_arrival_is_committed_before_same_second_jobs(tmp_path):
    # 2 nodes, SJF. J1 (2 nodes, 100 s) at 0. At 10, J2 (2 nodes, 500 s) then J3 (1 node, 5 s) arrive in
    # the same second: the queue was empty, so J2 alone is sorted and committed; J3 waits behind it.
    hdr = "; MaxNodes: 2\n; MaxProcs: 2\n"
    path = _swf(tmp_path, [(1, 0, 100, 2, 100), (2, 10, 500, 2, 500), (3, 10, 5, 1, 5)], header=hdr)
    res = replay_sequence(load_harness_trace(path), 0, 3, "sjf", backfill=False)
    assert res.start.tolist() == [0, 100, 600]
    assert _engine_starts(path, "sjf") == [0.0, 105.0, 100.0]


def test_job_larger_than_machine_is_a_clear_error(tmp_path):
    path = _swf(tmp_path, [(1, 0, 10, 1, 10), (2, 1, 10, 8, 10)])
    with pytest.raises(HarnessLoopError, match="job 2 can never fit the 4-node machine"):
        replay_sequence(load_harness_trace(path), 0, 2, "fcfs", backfill=False)


# --------------------------------------------------------------------------- score functions
def test_score_functions_hand_values():
    assert SCORES["fcfs"](7, 10, 2) == 7
    assert SCORES["sjf"](7, 10, 2) == (10, 7)
    assert SCORES["smallest"](7, 10, 2) == (2, 7)
    # wait = -1 - submit = -10: -((-10 / 10) ** 3) * 2 = 2
    assert SCORES["wfp3"](9, 10, 2) == 2.0
    # -(wait + 1e-15) / (log2(4 + 1e-15) * 5) with wait = -1 -> (1 - 1e-15) / 10
    assert SCORES["unicep"](0, 5, 4) == pytest.approx(0.1, rel=1e-14)
    # log10(1000) * 2 + 870 * log10(100) = 6 + 1740
    assert SCORES["f1"](100, 1000, 2) == pytest.approx(1746.0, rel=1e-15)
    assert SCORES["f1"](0, 0, 1) == pytest.approx(-1.0 - 870.0, rel=1e-15)   # 0 -> 0.1 for both logs


def test_wfp3_uses_minus_one_wait_convention():
    # an earlier job has the lower (first) score, whatever the real wait: (1 + s)^3 p / r^3
    assert SCORES["wfp3"](1, 10, 1) < SCORES["wfp3"](2, 10, 1)
    assert SCORES["wfp3"](99, 100, 3) == pytest.approx(3.0, rel=1e-15)


def test_unknown_heuristic():
    tr_rows = None
    with pytest.raises(ValueError, match="unknown RLScheduler heuristic 'ljf'"):
        score_keys(tr_rows, "ljf")


# --------------------------------------------------------------------------- loader
def test_loader_conventions(tmp_path):
    hdr = "; MaxNodes: 2\n; MaxProcs: 8\n"
    text = hdr + "\n".join([
        "3 5 -1 20 2 -1 -1 5 -1 -1 1 1 1 -1 1 -1 -1 -1",     # procs max(2, 5) = 5 -> 2 nodes; request -1 -> 20
        "1 0 -1 0 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1",      # run 0: dropped
        "2 1 -1 -1 4 -1 -1 -1 -1 -1 1 1 1 -1 1 -1 -1 -1",    # run -1 -> 10 s, kept; request = raw run = -1
    ]) + "\n"
    p = tmp_path / "l.swf"
    p.write_text(text)
    tr = load_harness_trace(p)
    assert tr.max_nodes == 2 and tr.max_procs == 8 and tr.procs_per_node == 4.0
    assert tr.job_id.tolist() == [2, 3]                  # sorted by job number
    assert tr.run.tolist() == [10, 20]
    assert tr.request.tolist() == [-1, 20]
    assert tr.procs.tolist() == [4, 5]
    assert tr.nodes.tolist() == [1, 2]


def test_loader_without_maxprocs_uses_maxnodes(tmp_path):
    tr = load_harness_trace(_swf(tmp_path, [(1, 0, 10, 3, 10)], header="; MaxNodes: 16\n"))
    assert (tr.max_nodes, tr.max_procs, tr.procs_per_node) == (16, 16, 1.0)


def test_loader_errors_name_file_line_field(tmp_path):
    p = tmp_path / "bad.swf"
    p.write_text(HEADER + "1 0 -1 10 1 -1 -1 1 10.5 -1 1 1 1 -1 1 -1 -1 -1\n")
    with pytest.raises(HarnessTraceError, match=r"bad.swf:3: field 9 = '10.5' is not an integer"):
        load_harness_trace(p)
    p.write_text(HEADER + "1 0 -1 10\n")
    with pytest.raises(HarnessTraceError, match=r"bad.swf:3: 4 fields"):
        load_harness_trace(p)
    p.write_text("1 0 -1 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n")
    with pytest.raises(HarnessTraceError, match="no '; MaxNodes:' header"):
        load_harness_trace(p)


# --------------------------------------------------------------------------- sampling
def test_sampling_is_the_harness_sequence():
    # HPCEnv.seed(1) then reset_for_test(1024) ten times on a 10,000-job log (the harness's own output)
    want = [1981, 2756, 4299, 8850, 3316, 2714, 5228, 7762, 4022, 7085]
    assert sample_starts(10000, 1024, 10, 1) == want
    assert sample_starts(59715, 1024, 10, 1, batch_job_slice=10000) == want
    assert sample_starts(10000, 1024, 10, 1) == sample_starts(10000, 1024, 10, 1)
    assert sample_starts(10000, 1024, 10, 2) != want
    a, b = gym_np_random(7), gym_np_random(7)
    assert a.randint(0, 2 ** 31, 5).tolist() == b.randint(0, 2 ** 31, 5).tolist()


def test_sampling_errors():
    with pytest.raises(ValueError, match="too few for sequences of 1024 jobs"):
        sample_starts(2000, 1024, 10, 1)
    with pytest.raises(ValueError, match="non-negative integer"):
        gym_np_random(-1)


# --------------------------------------------------------------------------- preset settings
def test_compat_settings_and_refusals():
    st = compat_settings(RunConfig(workload="SDSC-SP2", scheduler="rls-wfp3", backfill="easy", seed=1))
    assert (st.heuristic, st.backfill, st.batch_job_slice, st.sequences, st.length) == ("wfp3", True, 10000, 10, 1024)
    st = compat_settings(RunConfig(workload="Lublin-256", scheduler="f1",
                                   options={"compat": {"sequences": 2, "length": 64}}))
    assert (st.batch_job_slice, st.sequences, st.length) == (0, 2, 64)
    with pytest.raises(CompatError, match="--power has no counterpart"):
        compat_settings(RunConfig(workload="x", scheduler="fcfs", power=True))
    with pytest.raises(CompatError, match="'ljf' is not a harness heuristic"):
        compat_settings(RunConfig(workload="x", scheduler="ljf"))
    with pytest.raises(CompatError, match="--backfill 'conservative'"):
        compat_settings(RunConfig(workload="x", scheduler="fcfs", backfill="conservative"))


def test_cli_compat_run_folder(tmp_path, capsys):
    from hpctwin.twin.cli import main
    path = _swf(tmp_path, [(j, 10 * j, 30, 1 + j % 4, 30) for j in range(1, 301)])
    out = tmp_path / "run"
    assert main(["run", "--compat", "rlscheduler", "-w", str(path), "-s", "sjf", "--seed", "3", "-q",
                 "--set", "compat.length=64", "--set", "compat.sequences=2", "--out", str(out)]) == 0
    s = json.loads((out / "summary.json").read_text())
    tr = load_harness_trace(path)
    starts = sample_starts(len(tr), 64, 2, 3)
    assert s["sequence_starts"] == starts
    assert s["mean_bsld"] == harness_cell(tr, starts, 64, "sjf", False)
    assert (out / "jobs.csv").read_text().splitlines()[0] == \
        "sequence,job_id,submit,start,wait,run,request,procs,nodes,bsld"
    assert main(["run", "--compat", "rlscheduler", "-w", str(path), "-s", "fcfs", "--network", "on"]) == 2
    assert "--network has no counterpart" in capsys.readouterr().err


# --------------------------------------------------------------------------- table cells
def _trace(name: str):
    from hpctwin.schedulers.rlscheduler_run import resolve_trace_path
    try:
        return load_harness_trace(resolve_trace_path(name))
    except Exception as e:  # noqa: BLE001 - data not present on this machine
        pytest.skip(f"{name} not available: {e}")


def test_lublin1_fcfs_sequences_equal_the_harness():
    tr = _trace("Lublin-256")
    starts = sample_starts(len(tr), 1024, 10, 1)
    vals = [replay_sequence(tr, s, 1024, "fcfs", False).value for s in starts]
    # the harness's run_policy() fcfs_r on lublin_256.swf, --seed 1 --len 1024 --iter 10 --backfil 0
    assert vals == [6862.263618932564, 7034.452357797289, 9090.835915451878, 5405.499234883676,
                    7847.367907047758, 6366.980795524518, 7655.811818054614, 7535.137543345729,
                    10071.418353007182, 4867.946060834311]
    assert float(np.mean(vals)) == table.HARNESS["fcfs"]["Lublin-1"][0]


@pytest.mark.slow
def test_hpc2n_wfp3_backfill_sequences_equal_the_harness():
    tr = _trace("HPC2N")
    starts = sample_starts(len(tr), 1024, 10, 1, batch_job_slice=10000)
    keys = score_keys(tr, "wfp3")
    vals = [replay_sequence(tr, s, 1024, "wfp3", True, keys).value for s in starts]
    assert vals == [22.873689564569982, 57.739404924490245, 121.8588934882256, 9.236299654932989,
                    59.62839119589402, 57.51382104488398, 172.92487741413984, 183.263901808695,
                    157.14013654296173, 131.70347139303124]
    assert float(np.mean(vals)) == table.HARNESS["wfp3"]["HPC2N"][1]      # harness_cell's mean


@pytest.mark.slow
def test_whole_table_equals_the_harness(tmp_path):
    cells = table.compute_cells()
    assert len(cells) == 40
    assert (cells["replay"] == cells["harness"]).all()
    assert (cells["replay_minus_published"].abs() <= 0.005 + 1e-9).all()     # the paper's 2 decimals
    assert table.main(["--out", str(tmp_path)]) == 0
    md = (tmp_path / "table.md").read_text()
    assert "| FCFS | 7,273.77 | 235.82 | 1,727.54 | 1,595.12 | 297.18 | 127.38 | 7,842.47 | 247.61 |" in md


def test_harness_values_round_to_the_published_table_cell_for_cell():
    """The 40 cells of the paper's Table V (printed to 2 decimals) are the harness's values rounded;
    the replay equals the harness bit for bit (the cells above and the slow whole-table test)."""
    assert set(table.PUBLISHED) == set(table.HARNESS)
    for h, cols in table.HARNESS.items():
        assert set(table.PUBLISHED[h]) == set(cols)
        for col, (no_bf, bf) in cols.items():
            assert (round(no_bf, 2), round(bf, 2)) == table.PUBLISHED[h][col], (h, col)


# --------------------------------------------------------------------------- rls-* on the event engine
HAND_CASES = [  # (rows, header, heuristic, backfill)
    ([(1, 0, 100, 4, 100), (2, 10, 50, 2, 50), (3, 20, 10, 4, 10)], HEADER, "sjf", False),
    ([(1, 0, 100, 3, 100), (2, 1, 10, 2, 10), (3, 2, 200, 1, 200)], HEADER, "fcfs", True),
    ([(1, 0, 50, 4, 1000), (2, 1, 60, 4, 60), (3, 5, 10, 4, 940), (4, 5, 10, 1, 995)], HEADER, "fcfs", True),
    ([(1, 0, 10, 2, 1000), (2, 0, 500, 2, 500), (3, 1, 10, 4, 10), (4, 5, 600, 2, 600)], HEADER, "fcfs", True),
    ([(1, 0, 100, 4, 100), (2, 10, 50, 2, 50), (3, 20, 10, 4, 10)], HEADER, "wfp3", True),
]


@pytest.mark.parametrize("rows,header,heuristic,backfill", HAND_CASES)
def test_engine_policy_equals_replay_on_hand_cases(tmp_path, rows, header, heuristic, backfill):
    path = _swf(tmp_path, rows, header=header)
    want = replay_sequence(load_harness_trace(path), 0, len(rows), heuristic, backfill).start.tolist()
    name = f"rls-{heuristic}{'-bf' if backfill else ''}"
    res = simulate(RunConfig(workload=str(path), scheduler=name, kill_at_walltime=False, out=None))
    assert res.jobs.sort_values("job_id")["start"].tolist() == [float(s) for s in want]


def test_engine_policy_names_and_errors():
    from hpctwin.schedulers.registry import known_schedulers, make_scheduler
    names = [n for n in known_schedulers() if n.startswith("rls-")]
    assert sorted(names) == sorted(f"rls-{h}{s}" for h in SCORES for s in ("", "-bf"))
    assert make_scheduler("rls-unicep-bf").describe() == {"name": "rls-unicep-bf", "heuristic": "unicep",
                                                          "backfill": "harness-greedy"}


def test_engine_policy_on_a_lublin_sequence(tmp_path):
    # the first table sequence of Lublin-1 (jobs 1981..3004), SJF without backfilling: every start equal
    tr = _trace("Lublin-256")
    first = sample_starts(len(tr), 1024, 10, 1)[0]
    r = replay_sequence(tr, first, 1024, "sjf", False)
    lines = [f"{k + 1} {tr.submit[i]} -1 {tr.run[i]} {tr.procs[i]} -1 -1 {tr.procs[i]} {tr.request[i]} "
             "-1 1 1 1 -1 1 -1 -1 -1" for k, i in enumerate(r.jobs)]
    path = tmp_path / "seq.swf"
    path.write_text("; MaxNodes: 256\n; MaxProcs: 256\n" + "\n".join(lines) + "\n")
    res = simulate(RunConfig(workload=str(path), scheduler="rls-sjf", kill_at_walltime=False, out=None))
    assert res.jobs.sort_values("job_id")["start"].to_numpy().tolist() == r.start.astype(float).tolist()


def test_zero_request_fails_wfp3_only_inside_a_sequence(tmp_path):
    path = _swf(tmp_path, [(1, 0, 10, 1, 10), (2, 1, 10, 1, 10), (3, 2, 10, 1, 0)])
    tr = load_harness_trace(path)
    keys = score_keys(tr, "wfp3")
    assert keys[2] is None
    assert replay_sequence(tr, 0, 2, "wfp3", False, keys).start.tolist() == [0, 1]
    with pytest.raises(HarnessLoopError, match="job 3 has a requested time of 0 s"):
        replay_sequence(tr, 0, 3, "wfp3", False, keys)
