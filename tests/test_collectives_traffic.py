"""experiments/bine_traffic.py: allocations -> global bytes of Bine vs classic, tables and plots."""
from __future__ import annotations

import gzip
import io
import tarfile

import numpy as np
import pandas as pd
import pytest

from hpctwin.experiments import bine_traffic as bt
from hpctwin.topology.collectives import build_schedule, link_loads


def test_parse_compact_ranges():
    assert bt.parse_compact_ranges("0-3,8,10-11").tolist() == [0, 1, 2, 3, 8, 10, 11]
    assert bt.parse_compact_ranges("5").tolist() == [5]
    with pytest.raises(ValueError, match="bad node range '3-1'"):
        bt.parse_compact_ranges("0,3-1")
    with pytest.raises(ValueError, match="bad node range 'x7'"):
        bt.parse_compact_ranges("x7")


def test_load_group_map(tmp_path):
    f = tmp_path / "groups.txt"
    f.write_text("# node group\n0 0\n1 0\n2,1\n3 1\n")
    assert bt.load_group_map(f).tolist() == [0, 0, 1, 1]
    bad = tmp_path / "bad.txt"
    bad.write_text("0 0\n1 zero\n")
    with pytest.raises(ValueError, match=r"bad.txt:2: node and group must be integers"):
        bt.load_group_map(bad)


def test_traffic_by_job_hand_checked():
    groups = np.array([0, 0, 0, 1, 1, 1, 1, 0, 2, 2])
    allocs = [np.arange(8), np.array([0, 1, 2, 7, 3, 4]), np.array([8, 9]), np.array([5])]
    pairs = {"allreduce": [("bine_latency", "recursive_doubling")], "bcast": [("bine_halving", "binomial_halving")]}
    df = bt.traffic_by_job(allocs, groups, ["a", "b", "c", "d"], system="toy", pairs=pairs)
    assert set(df["job"]) == {"a", "b", "c"}                     # the 1-node job is skipped
    row = df[(df.job == "a") & (df.collective == "allreduce")].iloc[0]
    # hand-checked in tests/test_collectives.py: Bine 12 n, recursive doubling 16 n
    assert (row.bine_global, row.classic_global) == (12.0, 16.0)
    assert row.reduction_pct == pytest.approx(25.0)
    assert not row.bine_more
    # a 6-node job: the allreduce folds (6 ranks), Bine trees use the first 4 nodes
    b = df[df.job == "b"].set_index("collective")
    assert b.loc["allreduce", "ranks"] == 6 and b.loc["bcast", "ranks"] == 4
    assert b.loc["bcast", "groups"] == 1                          # nodes 0,1,2,7 are all in group 0
    assert np.isnan(b.loc["bcast", "reduction_pct"])
    # two nodes of one group: no global traffic at all
    c = df[df.job == "c"]
    assert (c.classic_global == 0).all() and c.reduction_pct.isna().all()
    s = bt.summarize(df)
    alls = s[(s.bucket == "all") & (s.collective == "allreduce")].iloc[0]
    assert alls.jobs == 3 and alls.jobs_global == 2


def test_traffic_by_job_rejects_unknown_nodes():
    with pytest.raises(ValueError, match="job j1: node 3 has no group"):
        bt.traffic_by_job([np.array([0, 3])], np.array([0, 0, 1, -1]), ["j1"])
    with pytest.raises(ValueError, match="job 0: node 9 has no group"):
        bt.traffic_by_job([np.array([0, 9])], np.array([0, 0, 1]))


def _add(tar: tarfile.TarFile, name: str, text: str) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


@pytest.fixture
def fake_data(tmp_path):
    d = tmp_path / "Bine-allocations"
    d.mkdir()
    with gzip.open(d / "leonardo-node-map.txt.gz", "wt") as fh:
        for n in range(1, 41):
            fh.write(f"NODE {n:04d} RACK 1 CELL {1 + (n - 1) // 10} ROW 1 PARTITION 1  SWITCH 10100\n")
    with tarfile.open(d / "leonardo-allocations.tar.gz", "w:gz") as tar:
        _add(tar, "leonardo/1.txt", "".join(f"lrdn{n:04d}\n" for n in range(7, 15)))      # 8 nodes, 2 cells
        _add(tar, "leonardo/2.txt", "".join(f"lrdn{n:04d}\n" for n in (1, 12, 25, 38)))   # 4 nodes, 4 cells
        _add(tar, "leonardo/3.txt", "lrdn0001\nviz02\n")                                    # skipped
    with tarfile.open(d / "lumi-allocations.tar.gz", "w:gz") as tar:
        _add(tar, "lumi/10.txt", "".join(f"nid{n:06d}\n" for n in range(1250, 1266)))      # 16 nodes, 2 cabinets
    return d


def test_main_end_to_end_on_fake_data(fake_data, tmp_path, capsys):
    out = tmp_path / "out"
    rc = bt.main(["--out", str(out), "--data-dir", str(fake_data), "--max-p", "16", "--no-linkload"])
    assert rc == 0
    for f in ("results.csv", "results.md", "results.tex", "traffic_per_job.csv", "reduction_boxplot.png",
              "alpha_beta.csv", "alpha_beta.md"):
        assert (out / f).stat().st_size > 0
    res = pd.read_csv(out / "results.csv")
    assert set(res.system) == {"leonardo", "lumi"}
    assert {"median_reduction_pct", "mean_reduction_pct", "share_bine_more_pct", "bucket"} <= set(res.columns)
    per_job = pd.read_csv(out / "traffic_per_job.csv")
    assert sorted(per_job.job.astype(str).unique()) == ["1", "10", "2"]
    assert "Leonardo 2 jobs, Lumi 1 jobs" in (out / "results.md").read_text()
    assert r"\caption{" in (out / "results.tex").read_text()
    assert "1 skipped" in capsys.readouterr().out
    ab = pd.read_csv(out / "alpha_beta.csv")
    assert ab.p.max() == 16


def test_main_with_jobs_csv(tmp_path):
    run = tmp_path / "run1"
    run.mkdir()
    (run / "jobs.csv").write_text("job,nodes\n1,0-7\n2,\"0,2,4,6\"\n")
    gm = tmp_path / "groups.txt"
    gm.write_text("".join(f"{n} {n // 4}\n" for n in range(8)))
    out = tmp_path / "out"
    assert bt.main(["--out", str(out), "--jobs-csv", str(run / "jobs.csv"), "--group-map", str(gm),
                    "--max-p", "8", "--no-linkload"]) == 0
    per_job = pd.read_csv(out / "traffic_per_job.csv")
    assert set(per_job.system) == {"run1"} and set(per_job.nodes) == {8, 4}


def test_jobs_csv_errors_name_the_row(tmp_path):
    f = tmp_path / "jobs.csv"
    f.write_text("job,nodes\n1,0-3\n2,5-x\n")
    with pytest.raises(ValueError, match=r"jobs.csv: row 3, field 'nodes'"):
        bt.load_jobs_csv(f)
    g = tmp_path / "nojobs.csv"
    g.write_text("job,size\n1,4\n")
    with pytest.raises(ValueError, match="no 'nodes' column"):
        bt.load_jobs_csv(g)


def test_real_leonardo_job_matches_the_bine_authors_count():
    """Job 14320838 (256 nodes, 8 cells): HLC-Lab/pico tracer/sinfo/
    leonardo_allreduce_rabenseifner_vs_bine_bandwidth.csv lists a reduction of 31.64%."""
    ddir = bt.default_data_dir()
    if not (ddir / "leonardo-allocations.tar.gz").exists():
        pytest.skip("shared Bine-allocations data set not available")
    ids, allocs, groups, _ = bt.load_leonardo(ddir)
    j = ids.index("14320838")
    df = bt.traffic_by_job([allocs[j]], groups, [ids[j]], pairs={"allreduce": [("bine_bandwidth", "rabenseifner")]})
    assert df.iloc[0].groups == 8
    assert df.iloc[0].reduction_pct == pytest.approx(31.6456, abs=1e-3)


def test_link_loads_with_the_topology_router():
    routing = pytest.importorskip("hpctwin.topology.routing")
    dragonfly = pytest.importorskip("hpctwin.topology.dragonfly")
    G = dragonfly.dragonfly_graph(p=2, a=4, h=2, g=9)
    R = routing.make_router(G)
    sched = build_schedule("allreduce", "recursive_doubling", 8)
    rank_host = np.arange(0, 16, 2)
    res = link_loads(sched, R, rank_host, 1000.0, alpha=1e-6)
    # every byte leaves its host on the terminal up-link: total terminal-up load = bytes sent
    assert res.link_bytes[R.term_up[rank_host]].sum() == pytest.approx(sched.total_blocks() * 1000.0)
    assert np.all(res.step_time > 1e-6)
