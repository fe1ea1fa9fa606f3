"""Sweeps (experiments/sweep.py): parsing errors, hashing, executors, resume, failures, pricing."""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest

from hpctwin.experiments import sweep as sw
from hpctwin.experiments.incentives_whatif import power_only_system
from hpctwin.experiments.tables import aggregate, ci95_halfwidth

SMALL = """
[sweep]
name = "small"
[base]
workload = "synthetic:jobs=300,nodes=32"
nodes = 32
[grid]
scheduler = ["easy", "fcfs"]
seed = [0, 1]
"""


def write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("text,msg", [
    (SMALL + "\n[bogus]\nx = 1\n", "unknown top-level key"),
    (SMALL.replace("nodes = 32\n", "nodes = 32\nspeed = 3\n"), r"s.toml:7: \[base\] speed: unknown key \(did you mean 'seed'\?\)"),
    ("[base]\nnodes = 4\n[grid]\n", r"\[grid\] is empty"),
    ("[base]\nnodes = 4\n[grid]\nseed = []\n", "seed is an empty list"),
    ("[base]\nnodes = 4\n", "nothing to sweep"),
    ("[base]\nnodes = 4\n[grid]\npricing = ['x']\n", r"pricing names \['x'\] have no \[pricing.NAME\]"),
    ("[sweep]\nnme = 1\n[grid]\nseed=[0]\n", r"s.toml:2: \[sweep\] nme: unknown key \(did you mean 'name'\?\)"),
])
def test_bad_sweep_files(tmp_path, text, msg):
    with pytest.raises(sw.SweepError, match=msg):
        sw.load_sweep(write(tmp_path, text))


def test_preflight_lists_all_errors_before_running(tmp_path, capsys):
    text = SMALL.replace('scheduler = ["easy", "fcfs"]', 'scheduler = ["easy", "nosuch"]\nestimate = ["bogus"]')
    p = write(tmp_path, text)
    assert sw.main([str(p), "-q"]) == 2
    err = capsys.readouterr().err
    assert "unknown scheduler 'nosuch'" in err and "unknown estimate model 'bogus'" in err
    assert not (tmp_path / "s.out" / "points").exists()      # nothing ran


def test_points_hash_and_dedup(tmp_path):
    s = sw.load_sweep(write(tmp_path, SMALL + '\n[[points]]\nplacement = "first-fit"\n[[points]]\nplacement = "first-fit"\n'))
    assert len(s.points) == 4                               # the duplicate explicit point is merged
    hashes = [p.hash for p in s.points]
    assert len(set(hashes)) == 4 and all(len(h) == 16 for h in hashes)
    again = sw.load_sweep(write(tmp_path, SMALL, "t.toml"))
    assert [p.hash for p in again.points] == hashes          # the hash is the configuration's, not the file's
    assert s.points[0].config["options"] == {}
    alias = sw.load_sweep(write(tmp_path, "[base]\nnodes=4\n[grid]\npower_cap_w = [5.0]\n", "a.toml"))
    assert alias.points[0].config["options"] == {"power": {"facility_cap_w": 5.0}}


@pytest.mark.slow
def test_serial_and_processes_give_the_same_bytes_and_resume(tmp_path, capsys):
    p = write(tmp_path, SMALL)
    assert sw.main([str(p), "-q", "--out", str(tmp_path / "serial")]) == 0
    assert sw.main([str(p), "-q", "--out", str(tmp_path / "procs"), "--workers", "2"]) == 0
    a = (tmp_path / "serial" / "results.csv").read_bytes()
    assert a == (tmp_path / "procs" / "results.csv").read_bytes()
    df = pd.read_csv(tmp_path / "serial" / "results.csv")
    assert list(df["scheduler"]) == ["easy", "easy", "fcfs", "fcfs"] and list(df["seed"]) == [0, 1, 0, 1]
    assert "wall_seconds" not in df.columns
    for f in ("results.md", "results.tex", "results_summary.csv", "plot_mean_wait_s.png"):
        assert (tmp_path / "serial" / f).exists()
    md = (tmp_path / "serial" / "results.md").read_text()
    assert "bsld = max(1, (wait + run) / max(run, tau))" in md and "95 % confidence interval" in md
    # resume: finished points are recognised and not rerun; a half-written folder is not finished
    pts = tmp_path / "serial" / "points"
    folders = sorted(pts.iterdir())
    mtimes = {f.name: f.stat().st_mtime_ns for f in folders}
    half = folders[0]
    (half / "point.json").unlink()                          # looks like an interrupted publish
    stale = pts / f".staging-{folders[1].name}-999999"
    stale.mkdir()
    time.sleep(0.01)
    capsys.readouterr()

    assert not sw.is_finished(half)
    assert sw.main([str(p), "--out", str(tmp_path / "serial")]) == 0
    err = capsys.readouterr().err
    assert "4 points, 3 already finished, 1 to run" in err
    assert not stale.exists()
    for f in sorted(pts.iterdir()):
        if f.name != half.name:
            assert f.stat().st_mtime_ns == mtimes[f.name]
    assert (tmp_path / "serial" / "results.csv").read_bytes() == a


def test_a_failed_point_does_not_stop_the_others(tmp_path, capsys):
    text = """
[base]
workload = "synthetic:jobs=100,nodes=8"
system = "SYSTEM"
nodes = 8
power = true
[grid]
seed = [0]
[[points]]
scheduler = "easy"
[[points]]
scheduler = "fcfs"
workload = "broken.swf"
"""
    # the second point's log exists (preflight passes) but is malformed: it fails when it runs
    (tmp_path / "broken.swf").write_text("; MaxProcs: 8\n1 0 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 bogus\n")
    p = write(tmp_path, text.replace("SYSTEM", power_only_system("frontier", tmp_path)))
    assert sw.main([str(p), "-q"]) == 1
    err = capsys.readouterr().err
    assert "1 point(s) failed" in err
    df = pd.read_csv(tmp_path / "s.out" / "results.csv")
    assert df["status"].tolist() == ["ok", "failed"]
    fails = list((tmp_path / "s.out" / "failures").iterdir())
    assert len(fails) == 1 and "broken.swf:2: field 18 (think): 'bogus' is not a number" in fails[0].read_text()


def test_pricing_axis_prices_each_run_without_rerunning(tmp_path):
    text = """
[base]
workload = "synthetic:jobs=120,nodes=8"
system = "SYSTEM"
nodes = 8
power = true
[base.options.power]
cooling = false
[grid]
seed = [0, 1]
pricing = ["nh", "flat"]
[pricing.nh]
kind = "node-hours"
rate = 2.0
[pricing.flat]
kind = "energy"
price = 0.1
"""
    p = write(tmp_path, text.replace("SYSTEM", power_only_system("frontier", tmp_path)))
    assert sw.main([str(p), "-q"]) == 0
    df = pd.read_csv(tmp_path / "s.out" / "results.csv")
    assert len(df) == 4 and df["pricing"].tolist() == ["nh", "flat", "nh", "flat"]
    assert len(list((tmp_path / "s.out" / "points").iterdir())) == 2
    flat = df[df["pricing"] == "flat"]
    # flat energy price x energy with PUE share: at most the facility energy x price
    assert (flat["total_cost"] <= flat["energy_facility_kwh"] * 0.1 + 1e-9).all()
    assert "Pricing: nh = node-hours at 2/node-h" in (tmp_path / "s.out" / "results.md").read_text()


def test_pricing_needing_energy_without_power_is_refused(tmp_path):
    text = SMALL + '\n[pricing.e]\nkind = "energy"\nprice = 0.1\n'
    text = text.replace('seed = [0, 1]', 'seed = [0, 1]\npricing = ["e"]')
    with pytest.raises(sw.SweepError, match="needs job energies"):
        sw.preflight(sw.load_sweep(write(tmp_path, text)))


def test_ci95_and_aggregate_hand_checked():
    # t(0.975, 2) = 4.302653; s = 1; n = 3 -> 4.302653 / sqrt(3)
    assert ci95_halfwidth([1.0, 2.0, 3.0]) == pytest.approx(4.302653 / 3 ** 0.5, rel=1e-6)
    df = pd.DataFrame({"s": ["a", "a", "b"], "seed": [0, 1, 0], "m": [1.0, 3.0, 5.0]})
    agg = aggregate(df, ["s", "seed"], ["m"])
    assert agg["m"].tolist() == [2.0, 5.0] and agg["n"].tolist() == [2, 1]
    assert agg["m_ci95"].isna().tolist() == [False, True]


def test_sweep_over_failure_mtbf_collects_nested_metrics(tmp_path):
    text = """
[sweep]
name = "fail"
metrics = ["mean_wait_s", "failures.goodput", "failures.node_failures"]
[base]
workload = "synthetic:jobs=200,nodes=32"
nodes = 32
options.failures.enabled = true
options.failures.repair_s = 3600.0
[grid]
"options.failures.node_mtbf_days" = [1.0, 1000.0]
"""
    p = write(tmp_path, text)
    assert sw.main([str(p), "-q", "--out", str(tmp_path / "o")]) == 0
    df = pd.read_csv(tmp_path / "o" / "results.csv")
    assert list(df["options.failures.node_mtbf_days"]) == [1.0, 1000.0]
    # a 1000x longer MTBF: fewer node failures and a goodput at least as high
    assert df["failures.node_failures"].iloc[0] > df["failures.node_failures"].iloc[1]
    assert df["failures.goodput"].iloc[0] <= df["failures.goodput"].iloc[1] <= 1.0


def test_base_accepts_a_runs_config_toml(tmp_path):
    from hpctwin.twin.cli import main
    run_dir = tmp_path / "run"
    assert main(["run", "--workload", "synthetic:jobs=200,nodes=32", "--order", "sjf", "--backfill",
                 "conservative", "--seed", "4", "--out", str(run_dir), "--quiet"]) == 0
    by_path = sw.load_sweep(write(tmp_path, '[base]\nconfig = "run/config.toml"\n[grid]\nseed = [4]\n'))
    pasted = (run_dir / "config.toml").read_text().split("[system]")[0].replace("[run]", "[base]")
    by_paste = sw.load_sweep(write(tmp_path, pasted + "\n[grid]\nseed = [4]\n", "p.toml"))
    for s in (by_path, by_paste):
        cfg = s.points[0].config
        assert (cfg["workload"], cfg["order"], cfg["backfill"], cfg["seed"]) == (
            "synthetic:jobs=200,nodes=32", "sjf", "conservative", 4)
    with pytest.raises(sw.SweepError, match=r"\[base\] config: .*no such file"):
        sw.load_sweep(write(tmp_path, '[base]\nconfig = "nope/config.toml"\n[grid]\nseed = [1]\n', "n.toml"))
