"""Issue 27 item 7: recorded real Slurm 22.05 runs of GPU cases (tests/data/slurm_truth/<case>/, made
by benchmarks/slurm_truth_record.py; daemons not needed here).

1. The recordings are self-consistent: every trace job was submitted on its target second with the
   requested nodes, cores, GPUs, partition, QOS and user, started and COMPLETED with its runtime; no
   node's cores or GPUs were ever over-committed per the recorded NodeList/AllocTRES; partitions'
   node sets and QOS MaxJobsPerUser held; the shared case shared nodes, the exclusive case did not.
2. The twin's current agreement with them (benchmarks/slurm_truth.py) is pinned as a floor, so a change
   that makes fidelity worse fails; the real-vs-real figures are pinned exactly (they are data).
"""
from __future__ import annotations

import csv
import importlib.util
import json
import math
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from hpctwin.datasets.hostlist import expand_hostlist
from hpctwin.datasets.sacct import parse_slurm_duration, parse_tres, read_sacct

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data" / "slurm_truth"
#: recorded replays per case (replayed twice: real-vs-real agreement)
RECORDED = {"gpu_share": (1, 2), "gpu_exclusive": (1, 2), "deps_resv": (1, 2), "gpu_mem": (1,)}
CASES = tuple(RECORDED)
RUNS = [(c, k) for c, ks in RECORDED.items() for k in ks]
#: the slurm-lab GPU cluster: node -> (cores, GPUs); partition -> nodes; QOS -> MaxJobsPerUser
NODES = {f"n{i:03d}": (8, 4 if i <= 8 else 0) for i in range(1, 13)}
PARTITIONS = {"gpu": {f"n{i:03d}" for i in range(1, 9)}, "cpu": {f"n{i:03d}" for i in range(5, 13)},
              "short": set(NODES)}
QOS_MAX_JOBS = {"normal": 5, "high": 2}


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _sacct(path: Path) -> list[dict]:
    lines = path.read_text().splitlines()
    head = lines[0].split("|")
    return [dict(zip(head, ln.split("|"))) for ln in lines[1:] if ln.strip()]


def _epoch(s: str) -> float:
    return datetime.fromisoformat(s).timestamp()


def _meta(case: str, k: int) -> dict:
    return json.loads((DATA / case / f"real-{k}.meta.json").read_text())


@pytest.fixture(scope="module")
def trace():
    return {case: {r["job_id"]: r for r in _csv(DATA / case / "trace.csv")} for case in RECORDED}


# ---------------------------------------------------------------- files
@pytest.mark.parametrize("case", CASES)
def test_case_files_present_and_small(case):
    folder = DATA / case
    need = ["README.md", "slurm.conf", "gres.conf", "sacctmgr.txt", "accounts.toml", "trace.csv"]
    need += [f"real-{k}{s}" for k in RECORDED[case] for s in (".csv", ".sacct.txt", ".meta.json")]
    assert [f for f in need if not (folder / f).exists()] == []
    assert sum(p.stat().st_size for p in folder.iterdir()) < 200_000
    conf = (folder / "slurm.conf").read_text()
    assert "/tmp/" not in conf and "/RUN/" in conf        # run directory neutralised


@pytest.mark.parametrize("case", CASES)
def test_trace_is_the_seeded_script_output(case, tmp_path):
    T = _module("slurm_truth_traces")
    T.write_trace(T.CASES[case](), tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_bytes() == (DATA / case / "trace.csv").read_bytes()


@pytest.mark.parametrize("case,k", RUNS)
def test_replay_settings(case, k):
    m = _meta(case, k)
    njobs = len(_csv(DATA / case / "trace.csv"))
    assert (m["slurm"], m["scale"], m["jobs"], m["nodes"], m["not_completed"]) == ("slurm-wlm 22.05.8", 60.0, njobs, 12, 0)
    assert m["exclusive"] is (case == "gpu_exclusive")
    assert m["SelectType"] == "select/cons_tres"
    assert m["SelectTypeParameters"] == ("CR_CORE_MEMORY" if case == "gpu_mem" else "CR_CORE")
    assert m["PriorityType"] == "priority/multifactor"
    assert m["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert m["submit_lag_max_s"] < 0.2


# ---------------------------------------------------------------- every job as asked
@pytest.mark.parametrize("case,k", RUNS)
def test_every_job_submitted_on_time_and_completed_as_asked(case, k, trace):
    tr = trace[case]
    scale = _meta(case, k)["scale"]
    t0 = _meta(case, k)["t0_epoch"]
    rows = _csv(DATA / case / f"real-{k}.csv")
    sa = {r["JobIDRaw"]: r for r in _sacct(DATA / case / f"real-{k}.sacct.txt")}
    assert sorted(r["job_id"] for r in rows) == sorted(tr)
    assert len(sa) == len(tr)
    for r in rows:
        j, s = tr[r["job_id"]], sa[r["slurm_job_id"]]
        nodes, cores, gpn = int(j["nodes"]), int(j["cores_per_node"]), int(j["gpus_per_node"])
        assert (r["state"], s["State"], s["JobName"]) == ("COMPLETED", "COMPLETED", j["job_id"])
        assert (s["User"], s["Partition"], s["QOS"]) == (j["user"], j["partition"], j["qos"])
        assert int(s["NNodes"]) == nodes and len(expand_hostlist(s["NodeList"])) == nodes
        # Slurm's Submit second is the target second; times in the CSV are Slurm's seconds x scale
        assert _epoch(s["Submit"]) - t0 == float(j["submit_s"]) / scale == float(r["real_submit"])
        assert float(r["submit"]) == float(j["submit_s"])
        assert _epoch(s["Start"]) >= _epoch(s["Submit"])
        assert float(r["start"]) == (_epoch(s["Start"]) - t0) * scale
        # anchored sleeps: Elapsed is the runtime to the second, the limit the trace's
        assert parse_slurm_duration(s["Elapsed"]) == float(j["runtime_s"]) / scale
        assert parse_slurm_duration(s["Timelimit"]) == float(j["walltime_s"]) / scale
        req = parse_tres(s["ReqTRES"])
        assert req.get("gres/gpu", 0) == nodes * gpn
        if not _meta(case, k)["exclusive"]:
            assert req["cpu"] == nodes * cores == int(s["NCPUS"])
        else:
            assert int(s["NCPUS"]) == sum(NODES[h][0] for h in expand_hostlist(s["NodeList"]))


def _allocations(case: str, k: int) -> list[tuple[float, float, str, dict[str, tuple[int, int]], str, str]]:
    """(start, end, job, {node: (cores, GPUs)}, user, qos) per job, from NodeList and AllocTRES."""
    out = []
    exclusive = _meta(case, k)["exclusive"]
    for s in _sacct(DATA / case / f"real-{k}.sacct.txt"):
        hosts = expand_hostlist(s["NodeList"])
        alloc = parse_tres(s["AllocTRES"])
        cpu, gpu = int(alloc["cpu"]), int(alloc.get("gres/gpu", 0))
        if exclusive:         # --exclusive: every core and GPU of its nodes
            per = {h: NODES[h] for h in hosts}
            assert (cpu, gpu) == tuple(sum(x) for x in zip(*per.values()))
        else:                 # --ntasks-per-node / --gpus-per-node: the same on every node
            assert cpu % len(hosts) == 0 and gpu % len(hosts) == 0
            per = {h: (cpu // len(hosts), gpu // len(hosts)) for h in hosts}
        out.append((_epoch(s["Start"]), _epoch(s["End"]), s["JobIDRaw"], per, s["User"], s["QOS"]))
    return out


@pytest.mark.parametrize("case,k", RUNS)
def test_no_core_or_gpu_overcommitted(case, k):
    _assert_no_overcommit(_allocations(case, k))


def _assert_no_overcommit(allocs) -> None:
    """Sweep starts and ends (ends first at the same second): no node over its cores or GPUs."""
    events = sorted([(a[0], 1, i) for i, a in enumerate(allocs)] + [(a[1], 0, i) for i, a in enumerate(allocs)])
    used = defaultdict(lambda: [0, 0])
    for _, kind, i in events:
        for h, (c, g) in allocs[i][3].items():
            sign = 1 if kind else -1
            used[h][0] += sign * c
            used[h][1] += sign * g
            assert 0 <= used[h][0] <= NODES[h][0], f"job {allocs[i][2]}: node {h} cores {used[h][0]}"
            assert 0 <= used[h][1] <= NODES[h][1], f"job {allocs[i][2]}: node {h} GPUs {used[h][1]}"


@pytest.mark.parametrize("case,k", RUNS)
def test_partition_nodes_and_qos_job_limits_held(case, k):
    rows = _sacct(DATA / case / f"real-{k}.sacct.txt")
    for s in rows:
        assert set(expand_hostlist(s["NodeList"])) <= PARTITIONS[s["Partition"]]
    allocs = _allocations(case, k)
    times = sorted({a[0] for a in allocs})
    for t in times:
        running = defaultdict(int)
        for st, en, _, _, user, qos in allocs:
            if st <= t < en:
                running[user, qos] += 1
        assert all(n <= QOS_MAX_JOBS[q] for (_, q), n in running.items()), (t, dict(running))


def _sharing(case: str, k: int) -> tuple[int, int]:
    """(jobs that shared a node with another job at some time, most jobs on one node at once)."""
    allocs = _allocations(case, k)
    shared = set()
    most = 0
    for t in sorted({a[0] for a in allocs}):
        on = defaultdict(list)
        for st, en, job, per, *_ in allocs:
            if st <= t < en:
                for h in per:
                    on[h].append(job)
        for jobs in on.values():
            most = max(most, len(jobs))
            if len(jobs) > 1:
                shared.update(jobs)
    return len(shared), most


#: (jobs sharing a node, most jobs on one node at once) per recorded replay
SHARING = {("gpu_share", 1): (44, 4), ("gpu_share", 2): (48, 4), ("gpu_exclusive", 1): (0, 1),
           ("gpu_exclusive", 2): (0, 1), ("deps_resv", 1): (21, 3), ("deps_resv", 2): (19, 4),
           ("gpu_mem", 1): (48, 3)}


@pytest.mark.parametrize("case,k", RUNS)
def test_nodes_shared_only_without_exclusive(case, k):
    assert _sharing(case, k) == SHARING[case, k]


@pytest.mark.parametrize("case,k", RUNS)
def test_sacct_reader_takes_the_dumps(case, k, trace):
    wl = read_sacct(DATA / case / f"real-{k}.sacct.txt")
    tr = trace[case]
    assert len(wl) == len(tr)
    by_slurm = {r["slurm_job_id"]: tr[r["job_id"]] for r in _csv(DATA / case / f"real-{k}.csv")}
    assert list(wl.procs) == [int(by_slurm[str(i)]["nodes"]) for i in wl.job_id]
    assert list(wl.columns["partition_name"]) == [by_slurm[str(i)]["partition"] for i in wl.job_id]
    assert list(wl.columns["qos_name"]) == [by_slurm[str(i)]["qos"] for i in wl.job_id]
    # the GPUs asked (ReqTRES), not an --exclusive job's whole nodes (AllocTRES): a CPU-only job on a
    # GPU node asked for none (14 of gpu_exclusive's jobs; fixed in the reader by 3c374f3)
    gpn = [float(by_slurm[str(i)]["gpus_per_node"]) for i in wl.job_id]
    assert list(wl.columns["gpus_per_node"]) == gpn


# ---------------------------------------------------------------- fidelity figures
#: real-1 vs real-2 (exact: recorded data) and the twin's current figures as floors:
#: (pairwise >=, |mean wait difference| <= (%), within 60 trace s >=)
REAL_VS_REAL = {"gpu_share": (95.76, -3.27, 61.25), "gpu_exclusive": (93.23, -3.5, 21.25),
                "deps_resv": (90.64, 3.08, 32.5)}
TWICE = [c for c, ks in RECORDED.items() if len(ks) > 1]
#: (pairwise % floor, |mean wait| % ceiling, within-60 % floor), pinned at the figures measured with the
#: will-run windows on Slurm's Unix clock (``log_start``) and its orig_map of all partition nodes;
#: gpu_exclusive re-pinned with the job-size factor on requested CPUs until the first select test
#: (its mean wait moved away from Slurm's: -3.7 -> -9.3 %, +4.1 -> -8.6 %; see test_slurm_job_size.py);
#: all re-pinned with cons_tres ``_eval_nodes_busy``'s extra idle node (22.05: the busy pass's success
#: does not end the idle_test loop; backfill reserves that node too)
TWIN_FLOOR = {("gpu_share", 1): (99.8, 0.2, 99.9), ("gpu_share", 2): (99.9, 0.2, 99.9),
              ("gpu_exclusive", 1): (94.7, 0.8, 36.1), ("gpu_exclusive", 2): (94.7, 1.6, 43.6),
              ("gpu_exclusive", 3): (94.5, 0.3, 36.1),
              ("deps_resv", 1): (90.5, 3.2, 32.4), ("deps_resv", 2): (99.9, 0.1, 99.9),
              ("gpu_mem", 1): (99.7, 0.3, 99.9), ("gpu_mem", 2): (93.3, 9.6, 47.4),
              ("preempt", 1): (99.7, 0.2, 98.2), ("preempt", 2): (99.7, 0.2, 99.9)}


@pytest.fixture(scope="module")
def figures():
    bench = _module("slurm_truth")
    return {case: bench.evaluate_case(DATA / case) for case in sorted({c for c, _ in TWIN_FLOOR})}


@pytest.mark.parametrize("case", TWICE)
def test_real_vs_real_figures(case, figures):
    m = figures[case]["real-1_vs_real-2"]
    got = (round(100 * m["pairwise"], 2), round(m["dwait_pct"], 2), round(100 * m["within"], 2))
    assert got == REAL_VS_REAL[case]


@pytest.mark.parametrize("case,k", sorted(TWIN_FLOOR))
def test_twin_fidelity_floor(case, k, figures):
    m = figures[case][f"twin_vs_real-{k}"]
    pair, dwait, within = TWIN_FLOOR[case, k]
    assert m["jobs"] == len(_csv(DATA / case / "trace.csv"))
    assert 100 * m["pairwise"] >= pair
    assert abs(m["dwait_pct"]) <= dwait
    assert 100 * m["within"] >= within
    assert math.isfinite(m["wait_a_s"]) and m["wait_a_s"] > 0


def test_pairwise_agreement_counts_ties():
    bench = _module("slurm_truth")
    assert bench.pairwise_agreement(np.array([0, 0, 5]), np.array([1, 1, 9])) == 1.0
    # pairs (0,1): tie vs order -> disagree; (0,2), (1,2) agree
    assert bench.pairwise_agreement(np.array([0, 0, 5]), np.array([1, 2, 9])) == pytest.approx(2 / 3)
    m = bench.compare(np.array([0, 0]), np.array([10, 20]), np.array([10, 50]), scale=60)
    assert (m["wait_a_s"], m["wait_b_s"], m["dwait_pct"], m["within"]) == (900.0, 1800.0, 100.0, 0.5)


# ---------------------------------------------------------------- dependencies and a reservation
@pytest.mark.parametrize("k", RECORDED["deps_resv"])
def test_deps_resv_dependencies_and_reservation_held(k):
    case = "deps_resv"
    t0 = _meta(case, k)["t0_epoch"]
    rows = {r["job_id"]: r for r in _csv(DATA / case / f"real-{k}.csv")}
    sa = {r["JobIDRaw"]: r for r in _sacct(DATA / case / f"real-{k}.sacct.txt")}
    deps = {j: r["dependency"] for j, r in rows.items() if r["dependency"]}
    assert len(deps) == 10
    for j, dep in deps.items():
        kind, parent = dep.split(":")
        p, c = sa[rows[parent]["slurm_job_id"]], sa[rows[j]["slurm_job_id"]]
        assert rows[j]["dependency_slurm"] == f"{kind}:{p['JobIDRaw']}"
        # the child became eligible and started only after its parent ended
        assert _epoch(c["Eligible"]) >= _epoch(p["End"]) and _epoch(c["Start"]) >= _epoch(c["Eligible"])
        assert _epoch(c["Submit"]) < _epoch(p["End"])          # it really waited on the parent
    # the MAINT reservation on n[001-004]: no job ran there during it
    text = (DATA / case / f"real-{k}.resv.txt").read_text()
    a, b = (float(x) for x in text.split("real: epoch ")[1].split(" ")[0].split("-"))
    assert (a - t0, b - t0) == (7200 / 60, 14400 / 60)
    for s in sa.values():
        if set(expand_hostlist(s["NodeList"])) & {"n001", "n002", "n003", "n004"}:
            assert _epoch(s["End"]) <= a or _epoch(s["Start"]) >= b, s["JobIDRaw"]


# ---------------------------------------------------------------- memory (CR_Core_Memory)
def test_gpu_mem_memory_asked_and_never_over_realmemory(trace):
    case = "gpu_mem"
    assert "SelectTypeParameters=CR_Core_Memory" in (DATA / case / "slurm.conf").read_text()
    by_slurm = {r["slurm_job_id"]: trace[case][r["job_id"]] for r in _csv(DATA / case / "real-1.csv")}
    rows = _sacct(DATA / case / "real-1.sacct.txt")
    events = []
    for s in rows:
        j = by_slurm[s["JobIDRaw"]]
        hosts = expand_hostlist(s["NodeList"])
        mem = parse_tres(s["AllocTRES"])["mem"]          # bytes, the job's total
        assert mem == parse_tres(s["ReqTRES"])["mem"] == len(hosts) * int(j["mem_mb"]) * 2 ** 20
        for h in hosts:
            events += [(_epoch(s["Start"]), 1, h, int(j["mem_mb"])), (_epoch(s["End"]), 0, h, int(j["mem_mb"]))]
    used = defaultdict(int)
    for _, kind, h, mb in sorted(events):
        used[h] += mb if kind else -mb
        assert 0 <= used[h] <= 1000, (h, used[h])          # RealMemory=1000 (MiB)


# ---------------------------------------------------------------- preemption (prio.conf.in, REQUEUE)
def test_preempt_segments_requeues_and_no_overcommit(trace):
    case = "preempt"
    conf = (DATA / case / "slurm.conf").read_text()
    assert "PreemptType=preempt/partition_prio" in conf and "PreemptMode=REQUEUE" in conf
    tr = {r["job_id"]: r for r in _csv(DATA / case / "trace.csv")}
    rows = _csv(DATA / case / "real-1.csv")
    assert sorted(r["job_id"] for r in rows) == sorted(tr) and len(rows) == 60
    seg = defaultdict(list)
    for s in _sacct(DATA / case / "real-1.sacct.txt"):
        seg[s["JobIDRaw"]].append(s)
    requeues = 0
    for r in rows:
        parts = seg[r["slurm_job_id"]]
        assert len(parts) == int(r["n_segments"])
        assert [s["State"] for s in parts] == ["PREEMPTED"] * (len(parts) - 1) + ["COMPLETED"]
        assert parse_slurm_duration(parts[-1]["Elapsed"]) == float(tr[r["job_id"]]["runtime_s"]) / 60
        for a, b in zip(parts, parts[1:]):          # requeued at the preemption, eligible 6 s later
            assert a["Partition"] in ("gpu", "cpu")
            assert b["Submit"] == a["End"]
            assert _epoch(b["Eligible"]) - _epoch(b["Submit"]) == 6        # cred_expire=5 + 1
            assert _epoch(b["Start"]) >= _epoch(b["Eligible"])
            requeues += 1
    log = [ln for ln in (DATA / case / "real-1.preempt.txt").read_text().splitlines() if "has been requeued" in ln]
    assert requeues == len(log) == 6
    urgent = {r["slurm_job_id"] for r in rows if r["partition"] == "urgent"}
    assert all(ln.split("for JobId=")[1].strip() in urgent for ln in log)
    allocs = []
    for parts in seg.values():
        for s in parts:
            hosts = expand_hostlist(s["NodeList"])
            al = parse_tres(s["AllocTRES"])
            per = {h: (int(al["cpu"]) // len(hosts), int(al.get("gres/gpu", 0)) // len(hosts)) for h in hosts}
            assert set(hosts) <= PARTITIONS.get(s["Partition"], set(NODES))
            allocs.append((_epoch(s["Start"]), _epoch(s["End"]), s["JobIDRaw"], per))
    _assert_no_overcommit(allocs)


# ---------------------------------------------------------------- more replays of preempt, gpu_mem, gpu_exclusive
#: replays recorded after the tables above were written, checked with the same invariants
SECOND_REPLAYS = (("gpu_mem", 2), ("preempt", 2), ("gpu_exclusive", 3))
#: requeues (preemptions) per preempt replay, as recorded
PREEMPT_REQUEUES = {1: 6, 2: 5}


@pytest.mark.parametrize("case,k", SECOND_REPLAYS)
def test_second_replays_settings_and_jobs_as_asked(case, k):
    m = _meta(case, k)
    tr = {r["job_id"]: r for r in _csv(DATA / case / "trace.csv")}
    assert (m["slurm"], m["scale"], m["jobs"], m["nodes"], m["not_completed"]) == ("slurm-wlm 22.05.8", 60.0, len(tr), 12, 0)
    assert m["exclusive"] is (case == "gpu_exclusive") and m["submit_lag_max_s"] < 0.2
    assert m["SelectTypeParameters"] == ("CR_CORE_MEMORY" if case == "gpu_mem" else "CR_CORE")
    t0, scale = m["t0_epoch"], m["scale"]
    rows = _csv(DATA / case / f"real-{k}.csv")
    assert sorted(r["job_id"] for r in rows) == sorted(tr)
    last = {}
    for s in _sacct(DATA / case / f"real-{k}.sacct.txt"):
        last.setdefault(s["JobIDRaw"], []).append(s)
    for r in rows:
        j, parts = tr[r["job_id"]], last[r["slurm_job_id"]]
        first, s = parts[0], parts[-1]
        assert (r["state"], s["State"], s["JobName"]) == ("COMPLETED", "COMPLETED", j["job_id"])
        assert (s["User"], s["Partition"], s["QOS"]) == (j["user"], j["partition"], j["qos"])
        assert _epoch(first["Submit"]) - t0 == float(j["submit_s"]) / scale == float(r["real_submit"])
        assert parse_slurm_duration(s["Elapsed"]) == float(j["runtime_s"]) / scale
        assert parse_tres(s["ReqTRES"]).get("gres/gpu", 0) == int(j["nodes"]) * int(j["gpus_per_node"])


@pytest.mark.parametrize("case,k", SECOND_REPLAYS)
def test_second_replays_never_overcommit(case, k):
    mem = []
    tr = {r["slurm_job_id"]: r["job_id"] for r in _csv(DATA / case / f"real-{k}.csv")}
    jobs = {r["job_id"]: r for r in _csv(DATA / case / "trace.csv")}
    allocs = _allocations(case, k)           # one per sacct row (a requeued job's every segment)
    for s in _sacct(DATA / case / f"real-{k}.sacct.txt"):
        hosts = expand_hostlist(s["NodeList"])
        al = parse_tres(s["AllocTRES"])
        assert set(hosts) <= PARTITIONS.get(s["Partition"], set(NODES))          # urgent: every node
        if case == "gpu_mem":
            mb = int(jobs[tr[s["JobIDRaw"]]]["mem_mb"])
            assert al["mem"] == len(hosts) * mb * 2 ** 20
            mem += [(_epoch(s["Start"]), 1, h, mb) for h in hosts] + [(_epoch(s["End"]), 0, h, mb) for h in hosts]
    _assert_no_overcommit(allocs)
    used = defaultdict(int)
    for _, kind, h, mb in sorted(mem):
        used[h] += mb if kind else -mb
        assert 0 <= used[h] <= 1000, (h, used[h])          # RealMemory=1000 (MiB)


@pytest.mark.parametrize("k", sorted(PREEMPT_REQUEUES))
def test_preempt_requeue_counts_per_replay(k):
    case = "preempt"
    rows = _csv(DATA / case / f"real-{k}.csv")
    seg = defaultdict(list)
    for s in _sacct(DATA / case / f"real-{k}.sacct.txt"):
        seg[s["JobIDRaw"]].append(s)
    for r in rows:
        assert [s["State"] for s in seg[r["slurm_job_id"]]] == ["PREEMPTED"] * (int(r["n_segments"]) - 1) + ["COMPLETED"]
    log = [ln for ln in (DATA / case / f"real-{k}.preempt.txt").read_text().splitlines() if "has been requeued" in ln]
    assert sum(int(r["n_segments"]) - 1 for r in rows) == len(log) == PREEMPT_REQUEUES[k]


# ---------------------------------------------------------------- resv_end: jobs at a reservation's end
RESV_END_RUNS = (1, 2)
RESV_NODES = {"n001", "n002", "n003", "n004"}
#: per replay, as recorded: (second the jobs still running in the reservation were killed, real s
#: after t0; their trace ids). The reservation ended at t0 + 130 s; slurmctld ended the jobs at its
#: next periodic time-limit check ("Reservation ended for JobId=..."), 20 s later in both replays
RESV_END_KILLS = {1: (150, ("1", "4", "29")), 2: (150, ("1", "4", "29"))}


def _resv_window(k: int) -> tuple[float, float]:
    """(start, end) of resv_end's reservation in real s after t0, from real-<k>.resv.txt."""
    text = (DATA / "resv_end" / f"real-{k}.resv.txt").read_text()
    a, b = (float(x) for x in text.split("real: epoch ")[1].split(" ")[0].split("-"))
    t0 = _meta("resv_end", k)["t0_epoch"]
    return a - t0, b - t0


def test_resv_end_case_files_and_trace():
    folder = DATA / "resv_end"
    need = ["README.md", "slurm.conf", "gres.conf", "sacctmgr.txt", "accounts.toml", "trace.csv"]
    need += [f"real-{k}{s}" for k in RESV_END_RUNS
             for s in (".csv", ".sacct.txt", ".meta.json", ".resv.txt", ".resvlog.txt")]
    assert [f for f in need if not (folder / f).exists()] == []
    assert sum(p.stat().st_size for p in folder.iterdir()) < 200_000
    conf = (folder / "slurm.conf").read_text()
    assert "/tmp/" not in conf and "/RUN/" in conf and "ResvOverRun" not in conf
    T = _module("slurm_truth_traces")
    assert T.CASES["resv_end"]() == T.resv_end()
    rows = _csv(folder / "trace.csv")
    assert len(rows) == 30 and [r["job_id"] for r in rows] == [str(i) for i in range(1, 31)]
    inside = [r for r in rows if r["reservation"]]
    assert {r["reservation"] for r in inside} == {"userres"} and len(inside) == 6
    assert {r["user"] for r in inside} == {"daemon", "bin"} and {r["partition"] for r in inside} == {"gpu"}
    assert {r["user"] for r in rows if not r["reservation"]} <= {"sys", "games", "man"}


@pytest.mark.parametrize("k", RESV_END_RUNS)
def test_resv_end_settings_and_reservation_created_for_its_users(k):
    m = _meta("resv_end", k)
    assert (m["slurm"], m["scale"], m["jobs"], m["nodes"], m["exclusive"]) == ("slurm-wlm 22.05.8", 60.0, 30, 12, False)
    assert (m["SelectTypeParameters"], m["ResvOverRun"], m["resv_users"]) == ("CR_CORE", "0 min", "daemon,bin")
    assert m["resv"] == ["userres:600:7200:n[001-004]:"] and m["submit_lag_max_s"] < 0.2
    assert m["not_completed"] == len(RESV_END_KILLS[k][1])
    text = (DATA / "resv_end" / f"real-{k}.resv.txt").read_text()
    assert "# scontrol create reservation ReservationName=userres " in text
    assert "Nodes=n[001-004] Users=daemon,bin\n" in text and "Flags=" not in text.split("# rc")[0]
    assert "Users=daemon,bin Groups=(null)" in text and "State=INACTIVE" in text
    created = float(text.split("created at t0")[1].split(" ")[0])
    assert created < 0                                   # before the first submission (t0 + 0)
    assert _resv_window(k) == (600 / 60, 7800 / 60)


@pytest.mark.parametrize("k", RESV_END_RUNS)
def test_resv_end_jobs_killed_at_first_check_after_the_end(k):
    """Jobs in the reservation still running at its end: TIMEOUT at one second K (end <= K < end + 30
    real s, the log's 'Reservation ended for JobId=' lines); the others COMPLETED with their runtime,
    also one that ran past the end and finished before K (job 12). All started at or after the
    reservation's start on its nodes; Slurm started them although their limits reached its end (all
    but job 3's past it)."""
    case = "resv_end"
    m = _meta(case, k)
    t0, scale = m["t0_epoch"], m["scale"]
    a, b = _resv_window(k)
    kill, killed = RESV_END_KILLS[k]
    assert b <= kill < b + 30
    tr = {r["job_id"]: r for r in _csv(DATA / case / "trace.csv")}
    sa = {s["JobIDRaw"]: s for s in _sacct(DATA / case / f"real-{k}.sacct.txt")}
    rows = _csv(DATA / case / f"real-{k}.csv")
    assert sorted(r["job_id"] for r in rows) == sorted(tr) and len(sa) == len(tr)
    ran_past_end = []
    for r in rows:
        j, s = tr[r["job_id"]], sa[r["slurm_job_id"]]
        assert (s["JobName"], s["User"], s["Partition"], s["QOS"]) == (j["job_id"], j["user"], j["partition"], j["qos"])
        assert _epoch(s["Submit"]) - t0 == float(j["submit_s"]) / scale == float(r["real_submit"])
        assert parse_slurm_duration(s["Timelimit"]) == float(j["walltime_s"]) / scale
        assert r["reservation"] == j["reservation"]
        start, end = _epoch(s["Start"]) - t0, _epoch(s["End"]) - t0
        runtime = float(j["runtime_s"]) / scale
        assert (float(r["start"]), float(r["end"])) == (start * scale, end * scale)
        if r["job_id"] in killed:
            assert j["reservation"] == "userres"
            assert (r["state"], s["State"], end) == ("TIMEOUT", "TIMEOUT", kill)
            assert start + runtime > kill and parse_slurm_duration(s["Elapsed"]) == kill - start
            assert start + parse_slurm_duration(s["Timelimit"]) > kill
        else:
            assert (r["state"], s["State"]) == ("COMPLETED", "COMPLETED")
            assert parse_slurm_duration(s["Elapsed"]) == runtime
            assert end < kill or not j["reservation"]
        if j["reservation"]:
            assert set(expand_hostlist(s["NodeList"])) <= RESV_NODES and a <= start < b
            assert start + parse_slurm_duration(s["Timelimit"]) >= b    # every limit reached the end
            if r["state"] == "COMPLETED" and end > b:
                ran_past_end.append(r["job_id"])
    log = [ln for ln in (DATA / case / f"real-{k}.resvlog.txt").read_text().splitlines()
           if "Reservation ended for JobId=" in ln]
    ids = {ln.split("JobId=")[1].strip() for ln in log}
    assert ids == {r["slurm_job_id"] for r in rows if r["job_id"] in killed}
    assert {_epoch(ln.split("[")[1].split("]")[0]) // 1 - t0 for ln in log} == {kill}
    assert ran_past_end == ["12"]


@pytest.mark.parametrize("k", RESV_END_RUNS)
def test_resv_end_outside_jobs_only_after_it_and_nothing_overcommitted(k):
    """No job outside the reservation ran on its nodes before the killed jobs ended (the first ones
    started there at the kill second); cores, GPUs, partitions and QOS job limits held."""
    case = "resv_end"
    t0 = _meta(case, k)["t0_epoch"]
    kill, _ = RESV_END_KILLS[k]
    rows = {r["slurm_job_id"]: r for r in _csv(DATA / case / f"real-{k}.csv")}
    sacct = _sacct(DATA / case / f"real-{k}.sacct.txt")
    first_outside = min(_epoch(s["Start"]) - t0 for s in sacct
                        if not rows[s["JobIDRaw"]]["reservation"] and set(expand_hostlist(s["NodeList"])) & RESV_NODES)
    assert first_outside == kill
    for s in sacct:
        assert set(expand_hostlist(s["NodeList"])) <= PARTITIONS[s["Partition"]]
    allocs = _allocations(case, k)
    _assert_no_overcommit(allocs)
    for t in sorted({x[0] for x in allocs}):
        running = defaultdict(int)
        for st, en, _, _, user, qos in allocs:
            if st <= t < en:
                running[user, qos] += 1
        assert all(n <= QOS_MAX_JOBS[q] for (_, q), n in running.items()), (t, dict(running))


@pytest.mark.parametrize("k", RESV_END_RUNS)
def test_resv_end_sacct_reservation_field_only_for_jobs_submitted_while_active(k):
    """sacct's Reservation is empty for the reservation's jobs submitted before it started (1, 3, 4)
    and ``userres`` for those submitted while it was active: a reader of the dump alone loses the
    former's reservation (real-<k>.csv's ``reservation`` column has the trace's)."""
    case = "resv_end"
    a, _ = _resv_window(k)
    rows = _csv(DATA / case / f"real-{k}.csv")
    sa = {s["JobIDRaw"]: s for s in _sacct(DATA / case / f"real-{k}.sacct.txt")}
    got = {r["job_id"]: sa[r["slurm_job_id"]]["Reservation"] for r in rows if r["reservation"]}
    assert got == {j: ("userres" if float(r["real_submit"]) >= a else "")
                   for j, r in ((r["job_id"], r) for r in rows if r["reservation"])}
    assert sorted(j for j, v in got.items() if not v) == ["1", "3", "4"]
    assert all(sa[r["slurm_job_id"]]["Reservation"] == "" for r in rows if not r["reservation"])
    wl = read_sacct(DATA / case / f"real-{k}.sacct.txt")
    assert len(wl) == 30 and sorted(set(wl.columns["state"])) == ["COMPLETED", "TIMEOUT"]


def test_resv_end_replays_agree():
    bench = _module("slurm_truth")
    m = bench.evaluate_real_pair(DATA / "resv_end")
    assert (m["jobs"], m["pairwise"], m["within"], m["dwait_pct"]) == (30, 1.0, 1.0, 0.0)
