"""Issue 27: select/cons_tres shares nodes by cores, GPUs and memory (schedulers/slurm_tres.py).

Every case is small and hand-checked: the start times, the engine units (CPU ids: node offset +
core) and the GPUs the policy's ledger gives each job, following Slurm 22.05's ``_eval_nodes``
(consecutive sets, best fit), ``_verify_node_state`` / ``can_job_run_on_node`` (free cores, GPUs,
memory) and ``_will_run_test``.
"""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.schedulers.slurm import make_slurm_scheduler
from hpctwin.schedulers.slurm_conf import SlurmConfError, parse_slurm_conf_text
from hpctwin.schedulers.slurm_tres import (Ledger, TresJobs, TresMachine, check_ledger, eval_nodes,
                                           will_run)
from hpctwin.twin.run import RunConfig, run
from hpctwin.twin.workload import Workload

pytestmark = pytest.mark.filterwarnings("ignore:.*read but not modelled")

BASE = """SelectType=select/cons_tres
SelectTypeParameters={params}
SchedulerParameters=bf_resolution=1
{extra}"""


def conf(tmp_path, nodes: str, params: str = "CR_Core", extra: str = "") -> str:
    f = tmp_path / "slurm.conf"
    f.write_text(BASE.format(params=params, extra=extra) + "\n" + nodes + "\n")
    return str(f)


def simulate(tmp_path, nodes_conf: str, jobs: list[dict], units: int, params: str = "CR_Core",
             extra: str = "", header: dict | None = None, **opts):
    """jobs: dicts of submit, run, req (limit), n (req_nodes), c (CPUs per node), g (GPUs per
    node), mem (MB per node), excl, part (partition name). Returns ({job id: start}, {job id:
    engine units}, the scheduler, the result)."""
    n = len(jobs)
    cols = {"req_nodes": np.array([j.get("n", 1) for j in jobs]),
            "cpus_per_node": np.array([j["c"] for j in jobs]),
            "gpus_per_node": np.array([float(j.get("g", 0)) for j in jobs]),
            "mem_per_node": np.array([float(j.get("mem", 0)) for j in jobs]),
            "exclusive": np.array([bool(j.get("excl", False)) for j in jobs])}
    if any("part" in j for j in jobs):
        cols["partition_name"] = np.array([j.get("part", "") for j in jobs], dtype=object)
    wl = Workload.from_arrays(
        "t", submit=[j["submit"] for j in jobs], runtime=[j["run"] for j in jobs],
        procs=[j.get("n", 1) * j["c"] for j in jobs], requested_time=[j.get("req", j["run"]) for j in jobs],
        user=[0] * n, group=[0] * n, job_id=np.arange(1, n + 1), columns=cols)
    wl.header.update(header or {})
    s = make_slurm_scheduler(conf(tmp_path, nodes_conf, params, extra), dict(opts))
    r = run(RunConfig(workload="t", scheduler=s, nodes=units), workload=wl)
    st = dict(zip(r.jobs.job_id.tolist(), r.jobs.start.tolist()))
    un = dict(zip(r.jobs.job_id.tolist(), r.jobs.nodes.tolist()))
    end_by_id = dict(zip(r.jobs.job_id.tolist(), r.jobs.end.tolist()))
    end = {j: float(end_by_id[int(s.job_id[j])]) for j in s.led.record}
    check_ledger(s.led.record, end, s.tm)
    return st, un, s, r


def gpus_of(s, job_id: int) -> list[tuple[int, list[int]]]:
    """(node, GPU indices) of a job from the ledger's record."""
    j = int(np.flatnonzero(s.job_id == job_id)[0])
    return [(n, g) for n, _c, g, _m in s.led.record[j][1]]


def test_two_one_gpu_jobs_share_a_four_gpu_node(tmp_path):
    """2 nodes x 8 cores x 4 GPUs; two jobs of 2 cores + 1 GPU at t=0: the first takes node 0
    (both nodes equal: the first), the second the best fit, node 0 (6 free cores < 8)."""
    st, un, s, r = simulate(tmp_path, "NodeName=g[0-1] CPUs=8 Gres=gpu:4",
                            [dict(submit=0, run=100, c=2, g=1), dict(submit=0, run=100, c=2, g=1)], 16)
    assert st == {1: 0.0, 2: 0.0}
    assert un == {1: "0-1", 2: "2-3"}
    assert gpus_of(s, 1) == [(0, [0])] and gpus_of(s, 2) == [(0, [1])]
    assert "share nodes" in r.summary["scheduler_params"]["select"]


def test_fifth_gpu_job_goes_to_the_other_node(tmp_path):
    """Four 1-GPU jobs fill node 0's GPUs; the fifth lands on node 1 (cores 8-9)."""
    jobs = [dict(submit=0, run=100, c=1, g=1)] * 4 + [dict(submit=0, run=100, c=2, g=1)]
    st, un, s, _ = simulate(tmp_path, "NodeName=g[0-1] CPUs=8 Gres=gpu:4", jobs, 16)
    assert set(st.values()) == {0.0}
    assert [un[i] for i in range(1, 6)] == ["0", "1", "2", "3", "8-9"]
    assert gpus_of(s, 4) == [(0, [3])] and gpus_of(s, 5) == [(1, [0])]


def test_job_wanting_all_cores_waits_and_a_small_one_backfills(tmp_path):
    """One node of 8 cores. A (4 cores, 0-100) runs; B (8 cores) waits for A's end (100); C (4
    cores, limit 50, submitted at 10) starts at the backfill cycle of t=30 on cores 4-7: it ends
    before B's reservation at 100."""
    jobs = [dict(submit=0, run=100, c=4), dict(submit=5, run=50, c=8),
            dict(submit=10, run=40, req=50, c=4)]
    st, un, s, _ = simulate(tmp_path, "NodeName=n0 CPUs=8", jobs, 8)
    assert st == {1: 0.0, 2: 100.0, 3: 30.0}
    assert un == {1: "0-3", 2: "0-7", 3: "4-7"}
    assert s.stats["backfill_starts"] == 1


def test_memory_is_consumable(tmp_path):
    """CR_Core_Memory, 2 nodes x 8 cores x 1000 MB. A 600 MB -> node 0; B 600 MB -> node 1 (node 0
    has 400 free); C 300 MB -> node 0 (best fit: both have 7 free cores, the first); D 500 MB
    waits for A's end (50: node 0 then has 700 free); E asks no memory, so it takes all of a
    node's memory (no DefMemPerCPU): it waits for an empty node, node 1 when B ends (100)."""
    jobs = [dict(submit=0, run=50, c=1, mem=600), dict(submit=0, run=100, c=1, mem=600),
            dict(submit=0, run=200, c=1, mem=300), dict(submit=1, run=10, c=1, mem=500),
            dict(submit=2, run=10, c=1)]
    st, un, s, _ = simulate(tmp_path, "NodeName=n[0-1] CPUs=8 RealMemory=1000", jobs, 16,
                            params="CR_Core_Memory")
    assert st == {1: 0.0, 2: 0.0, 3: 0.0, 4: 50.0, 5: 100.0}
    assert un == {1: "0", 2: "8", 3: "1", 4: "0", 5: "8"}
    mem = {int(s.job_id[j]): [m for *_x, m in rec[1]] for j, rec in s.led.record.items()}
    assert mem == {1: [600.0], 2: [600.0], 3: [300.0], 4: [500.0], 5: [1000.0]}


def test_def_mem_per_cpu_lets_jobs_share(tmp_path):
    """With DefMemPerCPU=100, jobs without --mem take 100 MB per CPU: eight 1-CPU jobs share the
    8-core 1000 MB node, the ninth waits for a core."""
    jobs = [dict(submit=0, run=10, c=1)] * 9
    st, _, s, _ = simulate(tmp_path, "NodeName=n0 CPUs=8 RealMemory=1000", jobs, 8,
                           params="CR_Core_Memory", extra="DefMemPerCPU=100")
    assert [st[i] for i in range(1, 10)] == [0.0] * 8 + [10.0]


def test_exclusive_job_takes_whole_nodes(tmp_path):
    """2 nodes x 4 cores. A (1 core) on node 0; B --exclusive (1 core) takes idle node 1 whole;
    C (1 core) goes to node 0 although node 1 has 3 idle cores; D --exclusive waits until node 0
    is empty (A and C end at 100)."""
    jobs = [dict(submit=0, run=100, c=1), dict(submit=0, run=300, c=1, excl=True),
            dict(submit=0, run=100, c=1), dict(submit=1, run=10, c=1, excl=True)]
    st, un, s, _ = simulate(tmp_path, "NodeName=n[0-1] CPUs=4", jobs, 8)
    assert st == {1: 0.0, 2: 0.0, 3: 0.0, 4: 100.0}
    assert un == {1: "0", 2: "4", 3: "1", 4: "0"}
    j2 = int(np.flatnonzero(s.job_id == 2)[0])
    assert s.led.record[j2][1][0][1] == [0, 1, 2, 3]       # the ledger holds all 4 cores


def test_partition_oversubscribe_exclusive(tmp_path):
    """OverSubscribe=EXCLUSIVE: every job of the partition holds whole nodes."""
    nodes = ("NodeName=n[0-1] CPUs=4\nPartitionName=ex Nodes=n0 OverSubscribe=EXCLUSIVE\n"
             "PartitionName=sh Nodes=n1 Default=YES")
    jobs = [dict(submit=0, run=100, c=1, part="ex"), dict(submit=0, run=100, c=1, part="ex"),
            dict(submit=0, run=100, c=1, part="sh"), dict(submit=0, run=100, c=1, part="sh")]
    st, un, _, _ = simulate(tmp_path, nodes, jobs, 8)
    assert st == {1: 0.0, 2: 100.0, 3: 0.0, 4: 0.0}


def test_heterogeneous_nodes(tmp_path):
    """a[0-1] have 4 CPUs, b0 16 CPUs and 2 GPUs: 24 units (a0 0-3, a1 4-7, b0 8-23). An 8-core
    job can only use b0; a 4-core job takes the best fit a0 (4 free); a GPU job goes to b0."""
    nodes = "NodeName=a[0-1] CPUs=4\nNodeName=b0 CPUs=16 Gres=gpu:2"
    jobs = [dict(submit=0, run=10, c=8), dict(submit=0, run=10, c=4), dict(submit=0, run=10, c=2, g=2)]
    st, un, s, r = simulate(tmp_path, nodes, jobs, 24)
    assert st == {1: 0.0, 2: 0.0, 3: 0.0}
    assert un == {1: "8-15", 2: "0-3", 3: "16-17"}
    assert gpus_of(s, 3) == [(2, [0, 1])]
    assert r.summary["scheduler_params"]["units"] == "cpu (NodeName CPUs of each node)"


def test_heterogeneous_machine_size_errors(tmp_path):
    nodes = "NodeName=a[0-1] CPUs=4\nNodeName=b0 CPUs=16"
    with pytest.raises(SlurmConfError, match=r"3 nodes with 24 CPUs in all .* run with --nodes 3 "
                                             r"\(nodes\) or --nodes 24"):
        simulate(tmp_path, nodes, [dict(submit=0, run=10, c=1)], 20)


def test_backfill_reservation_by_node_resources(tmp_path):
    """2 nodes x 4 cores. A (4 cores, 0-100) on node 0, B (2 cores, 0-200) on node 1. C (2 nodes x
    4 cores) can start when A and B have ended: 200 (the will-run test removes A, then B), with a
    reservation of nodes 0-1 over [200, 300]. D (2 cores, limit 50) backfills at t=30 on node 1's
    free cores 6-7; E (2 cores, limit 500) would overlap C's reservation: it starts after C."""
    jobs = [dict(submit=0, run=100, c=4), dict(submit=0, run=200, c=2),
            dict(submit=5, run=100, n=2, c=4), dict(submit=5, run=40, req=50, c=2),
            dict(submit=5, run=100, req=500, c=2)]
    st, un, s, _ = simulate(tmp_path, "NodeName=n[0-1] CPUs=4", jobs, 8)
    assert st == {1: 0.0, 2: 0.0, 3: 200.0, 4: 30.0, 5: 300.0}
    assert un == {1: "0-3", 2: "4-5", 3: "0-7", 4: "6-7", 5: "0-1"}


def test_request_mismatch_is_an_error(tmp_path):
    wl = Workload.from_arrays("t", submit=[0], runtime=[10], procs=[5], requested_time=[10],
                              columns={"req_nodes": np.array([2]), "cpus_per_node": np.array([2])})
    s = make_slurm_scheduler(conf(tmp_path, "NodeName=n[0-1] CPUs=4"), {})
    with pytest.raises(SlurmConfError, match=r"req_nodes x cpus_per_node .* 2 x 2 != 5 units"):
        run(RunConfig(workload="t", scheduler=s, nodes=8), workload=wl)


def test_job_that_never_fits_is_an_error(tmp_path):
    with pytest.raises(SlurmConfError, match=r"1 jobs can never start .* 1 nodes x 2 CPUs, 3 GPUs"):
        simulate(tmp_path, "NodeName=g[0-1] CPUs=8 Gres=gpu:2", [dict(submit=0, run=10, c=2, g=3)], 16)


def test_conf_reads_cons_tres_keys():
    c = parse_slurm_conf_text("SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU_Memory,CR_LLN\n"
                              "DefMemPerCPU=250\nNodeName=DEFAULT CPUs=8 RealMemory=4000\n"
                              "NodeName=a[0-1] Weight=10\nNodeName=b0 CPUs=16 Gres=gpu:a100:2,gpu:v100:1\n"
                              "PartitionName=p Nodes=ALL OverSubscribe=EXCLUSIVE DefMemPerNode=1000\n")
    assert c.select_params == "CR_CPU_Memory" and c.memory_tracked
    assert c.node_cpus == [8, 8, 16] and c.cpus_per_node is None and c.heterogeneous
    assert c.node_mem == [4000.0] * 3 and c.node_weight == [10, 10, 1] and c.node_gpus == [0, 0, 3]
    assert c.def_mem_per_cpu == 250.0
    p = c.partitions[0]
    assert p.oversubscribe == "EXCLUSIVE" and p.def_mem_per_node == 1000.0
    assert any("CR_LLN" in x for x in c.ignored)
    # 22.05's default resource type of cons_tres: CR_Core_Memory (cons_common.c select_p_node_init)
    assert parse_slurm_conf_text("SelectType=select/cons_tres\n").select_params == "CR_Core_Memory"


@pytest.mark.parametrize("text, msg", [
    ("SelectTypeParameters=CR_Socket", "only CR_Core, CR_CPU, CR_Core_Memory and CR_CPU_Memory"),
    ("SelectTypeParameters=CR_LLN", "names no resource type"),
    ("PartitionName=p OverSubscribe=FORCE:4", "FORCE .* is not modelled"),
    ("PartitionName=p OverSubscribe=MAYBE", "unknown value 'MAYBE'"),
])
def test_conf_errors(text, msg):
    with pytest.raises(SlurmConfError, match=r"<string>:1: .*" + msg):
        parse_slurm_conf_text(text + "\n")


# ---------------------------------------------------------------- the pieces, directly
def _ledger(cores, gpus=None, mem=None, weight=None, tracked=False, **job):
    N = len(cores)
    m = TresMachine.build(cores, gpus or [0] * N, mem or [1000.0] * N, weight or [1] * N, tracked)
    one = lambda k, d: np.array([job.get(k, d)])  # noqa: E731
    tj = TresJobs(nodes=one("nodes", 1), cpn=one("cpn", 1), cpus=one("cpus", 1), gpn=one("gpn", 0),
                  mem=one("mem", 0.0), mem_cpu=one("mem_cpu", 0.0), excl=one("excl", False))
    return Ledger(m, tj)


def test_eval_nodes_prefers_lower_weight_then_tightest_set():
    """Nodes 0-1 (weight 5), 2 (weight 1, 8 free), 3-4 (weight 1, 3 free each, a set of 6 CPUs):
    a 1-node 3-CPU job takes the lowest weight, then the set whose CPUs suffice most tightly (3-4:
    6 < 8), then the best fit node in it (3)."""
    led = _ledger([8, 8, 8, 8, 8], weight=[5, 5, 1, 1, 1], cpn=3, cpus=3)
    led.core_free[3] = led.core_free[4] = 0b111
    led.ncore[3] = led.ncore[4] = 3
    # node 2 and 3 are consecutive with the same weight: one set (2, 3, 4) of 14 CPUs
    assert eval_nodes(led, 0, 0b11111) == [(3, 3)]
    # without node 2 the sets are {3, 4}: best fit node 3
    assert eval_nodes(led, 0, 0b11011) == [(3, 3)]
    # only the heavy nodes
    assert eval_nodes(led, 0, 0b00011) == [(0, 3)]


def test_eval_nodes_cpu_count_job_spreads():
    """An SWF-style job of 10 CPUs (no node count) on nodes of 8 free: the best set holds 16, no
    single node suffices, so it takes 8 on node 0 and 2 on node 1."""
    led = _ledger([8, 8], nodes=0, cpn=1, cpus=10)
    assert eval_nodes(led, 0, 0b11) == [(0, 8), (1, 2)]


def test_will_run_groups_ends_in_doubling_windows():
    """Running jobs end at 100 (node 0), 140 and 400 (node 1). A 2-node x 8-core job: the first
    group starts with the job ending at 100 (barrier 120, window 30) and takes the one ending at
    140 (<= 150); node 1 still has 4 busy cores; the window doubles (60, 120, 240, 480) and the
    next group removes the job ending at 400: the start is 400."""
    led = _ledger([8, 8], nodes=2, cpn=8, cpus=16)
    # three running jobs in the ledger's own bookkeeping
    led.alloc = {10: [(0, 0xFF, 0, 0.0)], 11: [(1, 0x0F, 0, 0.0)], 12: [(1, 0xF0, 0, 0.0)]}
    led.core_free = [0, 0]
    led.ncore = [0, 0]
    running = [(100.0, 1, 10), (140.0, 2, 11), (400.0, 3, 12)]
    start, plan = will_run(led, 0, 0b11, running, now=0.0)
    assert start == 400.0 and plan == [(0, 8), (1, 8)]
    # a 1-node job: after the first group (jobs ending 100 and 140) node 0 is free: start 140
    led1 = _ledger([8, 8], nodes=1, cpn=8, cpus=8)
    led1.alloc, led1.core_free, led1.ncore = dict(led.alloc), [0, 0], [0, 0]
    start, plan = will_run(led1, 0, 0b11, running, now=0.0)
    assert start == 140.0 and plan == [(0, 8)]


def test_ledger_refuses_double_gpu():
    led = _ledger([8], gpus=[2], gpn=2, cpn=1)
    led.take(0, [(0, 1)])
    with pytest.raises(RuntimeError, match="GPU over-allocation on node 0"):
        led.take(0, [(0, 1)])


def test_check_ledger_finds_overlaps():
    m = TresMachine.build([8], [4], [1000.0], [1], True)
    rec = {0: (0.0, [(0, [0, 1], [0], 600.0)]), 1: (50.0, [(0, [2], [0], 100.0)])}
    with pytest.raises(AssertionError, match="node 0: GPU 0 held by job indices 0 and 1 at t=50"):
        check_ledger(rec, {0: 100.0, 1: 120.0}, m)
    rec = {0: (0.0, [(0, [0, 1], [0], 600.0)]), 1: (50.0, [(0, [2], [1], 500.0)])}
    with pytest.raises(AssertionError, match="1100 MB held at t=50, RealMemory 1000"):
        check_ledger(rec, {0: 100.0, 1: 120.0}, m)
    check_ledger(rec, {0: 50.0, 1: 120.0}, m)      # back to back: fine


def test_random_gpu_workloads_keep_every_limit(tmp_path):
    """Random jobs (1-2 nodes, 1-8 cores, 0-4 GPUs, 0-700 MB) on 4 nodes with GPUs and 1 without,
    CR_Core_Memory, every backfill mode: the engine's unit check (cores), the ledger's GPU and
    memory checks, every job starts after submission and ends at start + min(runtime, limit)."""
    rng = np.random.default_rng(3)
    nodes = "NodeName=g[0-3] CPUs=8 Gres=gpu:4 RealMemory=2000\nNodeName=c0 CPUs=8 RealMemory=2000"
    for reserve in (0, 1):
        jobs = []
        for _ in range(60):
            n = int(rng.integers(1, 3))
            jobs.append(dict(submit=float(rng.integers(0, 3000)), run=float(rng.integers(10, 900)),
                             req=float(rng.integers(300, 1200)), n=n, c=int(rng.integers(1, 9)),
                             g=int(rng.choice([0, 0, 1, 2, 4])), mem=float(rng.choice([0, 200, 700])),
                             excl=bool(rng.random() < 0.1)))
        st, un, s, r = simulate(tmp_path, nodes, jobs, 40, params="CR_Core_Memory",
                                bf_job_part_count_reserve=reserve)
        df = r.jobs
        runtime = np.array([jobs[i - 1]["run"] for i in df.job_id])
        assert (df.start >= df.submit).all()
        assert np.allclose(df.end, df.start + np.minimum(runtime, df.timelimit))
        assert s.stats["backfill_starts"] > 0
        gpu_jobs = [i + 1 for i, j in enumerate(jobs) if j["g"]]
        for jid in gpu_jobs:
            assert all(n < 4 for n, _ in gpus_of(s, jid))      # never on the CPU-only node


# ---------------------------------------------------------------- several partitions (-p a,b)
PARTS = ("NodeName=n[0-1] CPUs=4\nPartitionName=a Nodes=n0 Default=YES\n"
         "PartitionName=b Nodes=n1 MaxTime=1")


def test_job_in_two_partitions_starts_in_the_one_with_room(tmp_path):
    """A fills partition a (n0); B (-p a,b) cannot start in a, its record in b starts it on n1
    at its submission; C (partition a only) waits for A."""
    jobs = [dict(submit=0, run=100, c=4, part="a"), dict(submit=1, run=50, c=4, part="a,b"),
            dict(submit=2, run=10, c=1, part="a")]
    st, un, s, r = simulate(tmp_path, PARTS, jobs, 8)
    assert st == {1: 0.0, 2: 1.0, 3: 100.0}
    assert un == {1: "0-3", 2: "4-7", 3: "0"}
    assert any("several partitions" in x for x in r.summary["scheduler_params"]["notes"])


def test_partition_refusing_the_job_is_dropped(tmp_path):
    """B (-p b,a) asks 120 s, over b's MaxTime of 1 minute: it queues in a only and waits for A."""
    jobs = [dict(submit=0, run=100, c=4, part="a"), dict(submit=1, run=50, req=120, c=4, part="b,a")]
    st, un, s, _ = simulate(tmp_path, PARTS, jobs, 8)
    assert st == {1: 0.0, 2: 100.0}
    assert s.jpart[1] == 0 and s.jparts == {}


def test_higher_tier_record_first(tmp_path):
    """Partition b has PriorityTier=2: the record of B (-p a,b) in b comes first, so B starts on n1
    though n0 is idle too."""
    parts = ("NodeName=n[0-1] CPUs=4\nPartitionName=a Nodes=n0 Default=YES\n"
             "PartitionName=b Nodes=n1 PriorityTier=2")
    st, un, _, _ = simulate(tmp_path, parts, [dict(submit=0, run=10, c=2, part="a,b")], 8)
    assert st == {1: 0.0} and un == {1: "4-5"}


def test_gpu_job_counts_only_its_cpus_per_node():
    """The real GPU case (job 8 of tests/data/slurm_truth/gpu_share): nodes 0-1 have 2 free cores,
    node 3 has 8, nodes 6-7 have 5 (all 4 GPUs free). A 2-node job of 2 cores and 4 GPUs per node
    counts 2 CPUs on every usable node, so the first sufficient set {0, 1} stays the tightest:
    it runs on nodes 0-1 as Slurm did. Without GPUs the free cores count: the single node 3 (8
    CPUs, too few nodes) outbids {0, 1}, then {6, 7} wins (_eval_nodes' comparisons)."""
    cores, free = [8] * 8, [2, 2, 0, 8, 1, 0, 5, 5]

    def led_with(gpn):
        led = _ledger(cores, gpus=[4] * 8, nodes=2, cpn=2, cpus=4, gpn=gpn)
        led.core_free = [((1 << f) - 1) << (8 - f) for f in free]
        led.ncore = list(free)
        return led
    assert eval_nodes(led_with(4), 0, 0xFF) == [(0, 2), (1, 2)]
    assert eval_nodes(led_with(0), 0, 0xFF) == [(6, 2), (7, 2)]


def test_busy_nodes_first_in_future_tests():
    """bf_busy_nodes: _eval_nodes_busy takes the nodes busy now first (index order), then the idle
    ones. When the busy nodes already hold the job, 22.05's idle pass still adds the first idle
    node (its success ends only the node loop, not the idle_test loop): 3 nodes for a 2-node job."""
    from hpctwin.schedulers.slurm_tres import eval_nodes_busy
    led = _ledger([8, 8, 8], nodes=2, cpn=4, cpus=8)
    assert eval_nodes_busy(led, 0, 0b111, idle_now=0b001) == [(1, 4), (2, 4), (0, 4)]
    assert eval_nodes_busy(led, 0, 0b111, idle_now=0b110) == [(0, 4), (1, 4)]
    assert eval_nodes_busy(led, 0, 0b111, idle_now=0b000) == [(0, 4), (1, 4)]   # no idle node
    assert eval_nodes(led, 0, 0b111) == [(0, 4), (1, 4)]


def test_busy_nodes_extra_idle_node_rules():
    """The extra node of _eval_nodes_busy: only one (the success test runs again right after it),
    the lowest idle index, from the same weight only (the weight loop stops at all_done); a 1-node
    job gets one too (in backfill its future tests see no idle usable node: it would start now);
    a CPU-count job's extra node counts 1 CPU (_cpus_to_use: pn_min_cpus), an --exclusive one's
    the whole node."""
    from hpctwin.schedulers.slurm_tres import eval_nodes_busy
    led = _ledger([8] * 5, nodes=2, cpn=4, cpus=8)
    assert eval_nodes_busy(led, 0, 0b11111, idle_now=0b11000) == [(0, 4), (1, 4), (3, 4)]
    led.m.weight[3] = 2                                 # node 3 in a heavier set: node 4 is taken
    assert eval_nodes_busy(led, 0, 0b11111, idle_now=0b11000) == [(0, 4), (1, 4), (4, 4)]
    led.m.weight[4] = 2                                 # no idle node of weight 1: no extra node
    assert eval_nodes_busy(led, 0, 0b11111, idle_now=0b11000) == [(0, 4), (1, 4)]
    one = _ledger([8, 8], nodes=1, cpn=8, cpus=8)
    assert eval_nodes_busy(one, 0, 0b11, idle_now=0b10) == [(0, 8), (1, 8)]
    cpu = _ledger([8, 8], nodes=0, cpn=1, cpus=8)
    assert eval_nodes_busy(cpu, 0, 0b11, idle_now=0b10) == [(0, 8), (1, 1)]
    cpu.jobs.excl[0] = True
    assert eval_nodes_busy(cpu, 0, 0b11, idle_now=0b10) == [(0, 8), (1, 8)]


def test_busy_nodes_extra_node_is_reserved_by_backfill(tmp_path):
    """Hand-checked run (bf_busy_nodes, CR_Core, 3 nodes x 4 cores, bf_interval 30 s): A and B
    (1 node each, 0-100, limit 100) on nodes 0 and 1; node 2 idle. At t=1 C (2 nodes, limit 100)
    fails the event pass, which fails the partition for D (1 node, run and limit 150). The
    backfill cycle at t=30 plans C at 100 on the busy nodes 0-1 *and* the idle node 2 (22.05's
    extra node), so its reservation holds node 2 over [100, 200) and D's window [30, 180]
    overlaps it: D is not backfilled on node 2. At 100 A and B end and the main pass starts C on
    nodes 0-1 (units 0-7) and D on node 2 (units 8-11). Without the extra node D would start at 30."""
    jobs = [dict(submit=0, run=100, c=4), dict(submit=0, run=100, c=4),
            dict(submit=1, run=100, n=2, c=4), dict(submit=1, run=150, c=4)]
    extra = "SchedulerParameters=bf_resolution=1,bf_busy_nodes"
    st, un, s, _ = simulate(tmp_path, "NodeName=n[0-2] CPUs=4", jobs, 12, extra=extra)
    assert st == {1: 0.0, 2: 0.0, 3: 100.0, 4: 100.0}
    assert un[3] == "0-7" and un[4] == "8-11"
    st, _, _, _ = simulate(tmp_path, "NodeName=n[0-2] CPUs=4", jobs, 12)   # no bf_busy_nodes
    assert st[4] == 30.0


def test_sacct_dump_in_node_units_shares_nodes(tmp_path, capsys):
    """A sacct dump read in node units (the reader's default) with --nodes = the NodeName nodes: under
    select/cons_tres the machine is counted in CPUs (the entry's units hook) so two 1-node, 2-CPU, 1-GPU
    jobs share the one 8-CPU, 4-GPU node and both start at 0 (whole nodes would start the second at 100).
    Under select/linear the same run keeps node units: the second job waits. (CR_Core: under 22.05's
    default CR_Core_Memory a job without --mem takes all of a node's memory and nothing shares.)"""
    dump = tmp_path / "d.sacct"
    head = "JobID|Submit|Start|End|Elapsed|Timelimit|NNodes|NCPUS|ReqTRES|State|Partition"
    rows = [f"{i}|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:01:40|00:01:40|00:05:00|1|2|"
            "billing=2,cpu=2,gres/gpu=1,node=1|COMPLETED|p" for i in (1, 2)]
    dump.write_text(head + "\n" + "\n".join(rows) + "\n")
    nodes = "NodeName=n1 CPUs=8 Gres=gpu:4\nPartitionName=p Nodes=ALL Default=YES"
    for select, second in (("select/cons_tres", 0.0), ("select/linear", 100.0)):
        f = tmp_path / f"{select[7:]}.conf"
        params = "SelectTypeParameters=CR_Core\n" if select == "select/cons_tres" else ""
        f.write_text(f"SelectType={select}\n{params}SchedulerParameters=bf_resolution=1\n{nodes}\n")
        r = run(RunConfig(workload=f"sacct:{dump}", scheduler="slurm", nodes=1,
                          options={"scheduler": {"slurm_conf": str(f)}}))
        assert r.jobs.start.tolist() == [0.0, second], select
        assert r.summary["machine_units"] == (8 if select == "select/cons_tres" else 1)
        if select == "select/cons_tres":
            assert any(n.startswith("select/cons_tres: the machine counted in CPUs (8 = the NodeName lines' CPUs")
                       for n in r.summary["notes"])


def test_will_run_window_barrier_on_the_unix_clock():
    """cons_common ``_will_run_test`` aligns its first window on ``end_time % 30`` of a Unix time.
    Node 0 is busy until 100, node 1 until 145; a 1-node job. On the log's own clock (epoch 0) the
    barrier is 120 and the group reaches 150, so it removes both jobs and answers 145. With the log
    starting at Unix 1796285377 (= 7 mod 30: the gpu_share real-1 replay) the first end is Unix ...477
    (17 mod 30): barrier 113, the group stops before 145 (> 143) and the job starts at 100 on node 0."""
    led = _ledger([8, 8], nodes=1, cpn=8, cpus=8)
    led.alloc = {10: [(0, 0xFF, 0, 0.0)], 11: [(1, 0xFF, 0, 0.0)]}
    led.core_free, led.ncore = [0, 0], [0, 0]
    running = [(100.0, 1, 10), (145.0, 2, 11)]
    assert will_run(led, 0, 0b11, running, now=0.0) == (145.0, [(0, 8)])
    assert will_run(led, 0, 0b11, running, now=0.0, epoch=1796285377.0) == (100.0, [(0, 8)])
    assert will_run(led, 0, 0b11, running, now=0.0, epoch=15.0) == (100.0, [(0, 8)])


def test_log_start_option_reaches_the_will_run_test(tmp_path):
    """``log_start`` (the Unix time of the log's time 0: a number or an ISO UTC time) is the clock of
    the will-run windows; absent, the log's own clock (0); a bad value is one clear error."""
    c = conf(tmp_path, "NodeName=n[0-1] CPUs=4")
    assert make_slurm_scheduler(c, {}).log_start == 0.0
    assert make_slurm_scheduler(c, {"log_start": "1796285377"}).log_start == 1796285377.0
    assert make_slurm_scheduler(c, {"log_start": "2026-12-03T08:09:37"}).log_start == 1796285377.0
    with pytest.raises(Exception, match=r"log_start='soon': expected the Unix time of the log's time 0"):
        make_slurm_scheduler(c, {"log_start": "soon"})


def test_slurm_clock_comes_from_the_log_header_unless_given(tmp_path):
    """Without the option, the policy takes Slurm's clock from the log's ``UnixStartTime`` header (SWF;
    the sacct reader writes it) through `BindContext.log_start`; the option wins; no header: 0."""
    nodes, jobs = "NodeName=n[0-1] CPUs=4", [dict(submit=0, run=10, c=4)]
    *_, s, _ = simulate(tmp_path, nodes, jobs, 8, header={"UnixStartTime": "1796285377"})
    assert s.log_start == 1796285377.0
    *_, s, _ = simulate(tmp_path, nodes, jobs, 8, header={"UnixStartTime": "1796285377"}, log_start="15")
    assert s.log_start == 15.0
    *_, s, _ = simulate(tmp_path, nodes, jobs, 8)
    assert s.log_start == 0.0


def test_will_run_removes_jobs_on_cpu_only_nodes_of_the_partition(tmp_path):
    """backfill.c hands select's ``_will_run_test`` the partition's nodes (``avail_bitmap``), not only
    those with GPUs, so a job on a CPU-only node takes part in the end groups. g0 (16 cores, 4 GPUs,
    Weight 2, node 0), c1 (8 cores, Weight 1, node 1). At 0: X (8 cores, limit 100) on c1, Y (4 cores +
    4 GPUs, limit 125) and Z (4 cores, limit 155) on g0. P (1 GPU, 4 cores, limit 100) at t=1: the
    will-run test removes X first (barrier 120, group to 150: X, Y; Z at 155 stays) and finds g0 at
    125: reservation of g0 over [125, 225]. R (8 cores, limit 140) at t=2 would fit g0's 8 free cores
    until 142 >= 125, so it waits for c1 and starts when X ends (100). With only g0 given (X skipped)
    the group would start at Y (barrier 150) and take Z: P's reservation at 155, and R would start at
    2 on g0 (cores 8-15). P starts at 125 on g0's cores 0-3 when Y ends."""
    nodes = "NodeName=g0 CPUs=16 Gres=gpu:4 Weight=2\nNodeName=c1 CPUs=8 Weight=1"
    jobs = [dict(submit=0, run=100, c=8), dict(submit=0, run=125, c=4, g=4), dict(submit=0, run=155, c=4),
            dict(submit=1, run=100, c=4, g=1), dict(submit=2, run=140, c=8)]
    st, un, s, _ = simulate(tmp_path, nodes, jobs, 24, bf_interval=1)
    assert st == {1: 0.0, 2: 0.0, 3: 0.0, 4: 125.0, 5: 100.0}
    assert un == {1: "16-23", 2: "0-3", 3: "4-7", 4: "0-3", 5: "16-23"}


def test_backfill_map_merges_one_identical_pair_as_add_reservation():
    """backfill.c ``_add_reservation`` splits records at the reservation's start and end, takes the
    nodes from the records between, then merges one pair of neighbours with identical nodes. Nodes
    0-1, map [0, 100): A = node 1 over [10, 20) gives [0,10) both, [10,20) node 0, [20,100) both; B =
    node 1 over [20, 30) makes [20,30) node 0 only, the same as [10,20): merged into [10,30). A
    reservation at the map's origin leaves an empty record 0 in front (node 0 over [0, 10))."""
    from hpctwin.schedulers.slurm_tres_passes import BackfillMap
    m = BackfillMap(0.0, 100.0, 1.0, 0b11)
    m.reserve(10.0, 20.0, 0b10)
    assert m.records() == [(0.0, 10.0, 0b11), (10.0, 20.0, 0b01), (20.0, 100.0, 0b11)]
    m.reserve(20.0, 30.0, 0b10)
    assert m.records() == [(0.0, 10.0, 0b11), (10.0, 30.0, 0b01), (30.0, 100.0, 0b11)]
    h = BackfillMap(0.0, 100.0, 1.0, 0b11)
    h.reserve(0.0, 10.0, 0b01)
    assert h.records() == [(0.0, 0.0, 0b11), (0.0, 10.0, 0b10), (10.0, 100.0, 0b11)]
    assert h.overlap(0b01, 0.0, 5.0) and not h.overlap(0b10, 0.0, 5.0) and not h.overlap(0b01, 10.0, 20.0)
    h.reserve(50.0, 50.0, 0b11)                     # at least one bf_resolution slot: [50, 51)
    assert h.records()[-2:] == [(50.0, 51.0, 0), (51.0, 100.0, 0b11)]


def test_backfill_map_later_start_tests_the_record_after_the_jobs_window():
    """``_attempt_backfill``'s map loop tests ``later_start`` before its ``begin_time <= end_time``
    break, so the first record past a job's window takes part: for a job over [0, 5] on nodes 0-1
    after A (node 1 reserved over [10, 20)), the record [10, 20) lies past the window and the one after
    it holds node 1 again: later_start = 20 (its end). After A and B the merged [10, 30) is followed by
    both nodes: later_start = 30. On node 0 alone nothing new follows: 0. The nodes free over the window:
    both; over [0, 15] after A: node 0 only. With the empty record 0 of an origin reservation: skipped."""
    from hpctwin.schedulers.slurm_tres_passes import BackfillMap
    m = BackfillMap(0.0, 100.0, 1.0, 0b11)
    m.reserve(10.0, 20.0, 0b10)
    assert m.scan(0b11, 0.0, 5.0) == (0b11, 20.0)
    assert m.scan(0b01, 0.0, 5.0) == (0b01, 0.0)
    assert m.scan(0b11, 0.0, 15.0) == (0b01, 20.0)
    m.reserve(20.0, 30.0, 0b10)
    assert m.scan(0b11, 0.0, 5.0) == (0b11, 30.0)
    h = BackfillMap(0.0, 100.0, 1.0, 0b11)
    h.reserve(0.0, 10.0, 0b01)
    assert h.scan(0b11, 0.0, 5.0) == (0b10, 10.0)
    assert h.scan(0b11, 10.0, 20.0) == (0b11, 0.0)


def test_requeued_job_ages_from_its_eligible_time():
    """priority_multifactor.c's age is ``now - accrue_time``; job_mgr.c ``batch_requeue_fini`` sets
    ``accrue_time = 0`` and ``begin_time = now + cred_expire + 1``, and acct_policy.c
    ``_handle_add_accrue`` then sets ``accrue_time = begin_time``. ``accrue_from`` bounds the start of
    the age: a job submitted (requeued) at 100 with EligibleTime 106, MaxAge 600 s, weight 1000: at 160
    its age is 54 s -> 90 (not 60 s -> 100); before 106 it is 0 (priority at least 1); -inf changes
    nothing (a job submitted at 50: 110 s -> 183)."""
    from hpctwin.schedulers.slurm_conf import PriorityParams
    from hpctwin.schedulers.slurm_priority import MultifactorPriority
    prm = PriorityParams(type="priority/multifactor", weight_age=1000, max_age=600.0)
    mp = MultifactorPriority(prm, submit=[100.0, 50.0], nodes=[1, 1], cpus=[1, 1], time_limit=[60.0, 60.0],
                             part_factor=[0.0, 0.0], qos_factor=[0.0, 0.0], assoc=[0, 0], total_nodes=2,
                             total_cpus=2)
    assert mp.compute(160.0, np.array([0, 1]), None).tolist() == [100, 183]
    mp.accrue_from = np.array([106.0, -np.inf])
    assert mp.compute(160.0, np.array([0, 1]), None).tolist() == [90, 183]
    assert mp.compute(104.0, np.array([0]), None).tolist() == [1]


PREEMPT = """PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
AuthInfo=cred_expire=5
PriorityType=priority/multifactor
PriorityWeightAge=1000
PriorityMaxAge=60
PriorityCalcPeriod=1
AccountingStorageType=accounting_storage/slurmdbd
NodeName=n[1-2] CPUs=1
PartitionName=gpu Nodes=n[1-2] PriorityTier=1 PreemptMode=REQUEUE Default=YES
PartitionName=urgent Nodes=n[1-2] PriorityTier=10 PreemptMode=OFF
"""


def test_requeued_job_ages_from_eligible_time_in_a_run(tmp_path):
    """Two 1-node gpu jobs A, B from 0 (A 1000 s, B 1100 s); urgent U (3000 s) at 100 requeues A
    (EligibleTime 106, submit 100); C (gpu, 50 s) arrives at 103 and waits as A does. When B ends at
    1100 one node frees: C has accrued age since 103, A only since 106 (not since its requeue at 100),
    so C is first (MaxAge 3600 s, weight 1000, ticks every 60 s: at the 1080 tick C 271, A 270; from
    its requeue A would have 272) and starts at 1100; A follows at 1150 when C ends. The age bound is
    the preemption state's live EligibleTime array."""
    f = tmp_path / "slurm.conf"
    f.write_text(PREEMPT)
    wl = Workload.from_arrays("t", submit=[0, 0, 100, 103], runtime=[1000, 1100, 3000, 50], procs=[1, 1, 1, 1],
                              requested_time=[2000, 2200, 6000, 100], user=[0] * 4, group=[0] * 4,
                              job_id=np.arange(1, 5),
                              columns={"partition_name": np.array(["gpu", "gpu", "urgent", "gpu"], dtype=object)})
    s = make_slurm_scheduler(str(f), {})
    r = run(RunConfig(workload="t", scheduler=s, nodes=2), workload=wl)
    df = r.jobs.set_index("job_id")
    assert s.prio_calc.accrue_from is s.pre_elig and s.pre_elig[0] == 106.0
    assert df.loc[3, "start"] == 100.0 and df.loc[1, "preemptions"] == 1
    assert df.loc[4, "start"] == 1100.0 and df.loc[1, "end"] == 1150.0 + 1000.0


def _bench(name: str):
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_decision_replay_reads_each_run_of_a_requeued_job(tmp_path):
    """benchmarks/slurm_truth_decisions.py forces a requeued job run by run: ``segments`` reads a
    ``sacct -D`` dump's rows per job and places each run by its offset from the job's last run (whose
    start is the reader's ``recorded_start``): job 7 ran 10:00:05-10:00:30 (PREEMPTED) and again from
    10:01:00; with its last start at 100 s, its runs are [45, 70] and [100, 160]."""
    head = "JobID|JobIDRaw|Start|End|NodeList|State"
    rows = ["7|7|2026-12-03T10:00:05|2026-12-03T10:00:30|n001|PREEMPTED",
            "8|8|2026-12-03T09:59:25|2026-12-03T10:00:00|n[002-003]|COMPLETED",
            "7|7|2026-12-03T10:01:00|2026-12-03T10:02:00|n004|COMPLETED"]
    dump = tmp_path / "d.sacct.txt"
    dump.write_text("\n".join([head, *rows]) + "\n")
    dec = _bench("slurm_truth_decisions")
    segs = dec.segments(dump, np.array([7, 8]), np.array([100.0, 5.0]))
    assert segs == [[(45.0, 70.0, "n001", "PREEMPTED"), (100.0, 160.0, "n004", "COMPLETED")],
                    [(5.0, 40.0, "n[002-003]", "COMPLETED")]]


@pytest.mark.slow
def test_decision_replay_of_the_preempt_case_forces_every_run():
    """The recorded preempt replay (five jobs requeued once or twice): every run is forced at its
    recorded second and nodes (66 runs of 60 jobs), each job's engine start is its first recorded one,
    and the summary counts Slurm's starts the twin's passes also make."""
    dec = _bench("slurm_truth_decisions")
    d = dec.decisions(dec.DATA / "preempt", 1)
    assert (d["jobs"], d["runs"], d["forced"], d["followed"]) == (60, 66, 66, 60)
    lines = dec.summary(d, "preempt", 1)
    assert lines[0].startswith("preempt real-1: 60 jobs, 66 runs forced")
    assert "also make at that second" in lines[1]


def test_backfill_map_holds_the_same_nodes_as_the_node_set_map():
    """The merge changes only how `BackfillMap` cuts time into records: after the same reservations
    it has the same free nodes at every second as `NodeSpaceMap` (no merge), and the same answer to
    an overlap test (200 random reservations on 6 nodes, window [10, 300), resolution 5)."""
    from hpctwin.schedulers.profile_nodeset import NodeSpaceMap
    from hpctwin.schedulers.slurm_tres_passes import BackfillMap
    rng = np.random.default_rng(7)
    a, b = BackfillMap(10.0, 300.0, 5.0, 0b111111), NodeSpaceMap(10.0, 300.0, 5.0, 0b111111)
    for _ in range(200):
        st = float(rng.integers(0, 320))
        en = st + float(rng.integers(0, 60))
        nodes = int(rng.integers(1, 64))
        a.reserve(st, en, nodes)
        b.add_reservation(st, en, nodes)
        recs = a.records()
        assert all(x[1] == y[0] for x, y in zip(recs, recs[1:])) and recs[-1][1] == 300.0
        for t in range(10, 300, 5):
            got = next(av for bg, e, av in recs if bg <= t < e)
            assert got == b.avail_at(float(t))
        q = int(rng.integers(1, 64))
        s0 = float(rng.integers(10, 290))
        assert a.overlap(q, s0, s0 + 20.0) == (not b.fits(s0, s0 + 20.0, q))


def test_plan_tool_reads_backfill_cycles_from_a_slurmctld_log(tmp_path, monkeypatch):
    """benchmarks/slurm_truth_plans.py: a cycle's reservations (_dump_job_sched: start, end_reserve,
    nodes), its starts and the main scheduler's starts, in s from the dump's first Submit; a line
    that is not a log line is one error naming file and line."""
    import importlib.util
    from datetime import datetime
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "slurm_truth_plans.py"
    spec = importlib.util.spec_from_file_location("slurm_truth_plans", path)
    mod = importlib.util.module_from_spec(spec)
    import sys
    monkeypatch.setitem(sys.modules, "slurm_truth_plans", mod)      # its dataclass needs the module
    spec.loader.exec_module(mod)
    log = tmp_path / "slurmctld.log"
    log.write_text(
        "[2026-12-03T11:42:20.433] sched/backfill: _attempt_backfill: beginning\n"
        "[2026-12-03T11:42:20.433] sched/backfill: _dump_job_sched: JobId=19 to start at "
        "2026-12-03T11:44:23, end at 2026-12-03T11:45:23 on nodes n[003-005] in partition short\n"
        "[2026-12-03T11:42:20.434] sched/backfill: _start_job: Started JobId=13 in cpu on n005\n"
        "[2026-12-03T11:42:21.060] sched: Allocate JobId=20 NodeList=n[010-011] #CPUs=16 Partition=cpu\n")
    cycles, main = mod.parse_log(log, datetime.fromisoformat("2026-12-03T11:40:59"))
    assert len(cycles) == 1 and cycles[0].t == 81.0 and cycles[0].order == [19, 13]
    assert cycles[0].plans == {19: (204.0, 264.0, ["n003", "n004", "n005"], "short")}
    assert cycles[0].started == {13: (["n005"], "cpu")}
    assert main == [(pytest.approx(82.06), 20, ["n010", "n011"], "cpu")]
    log.write_text("[2026-12-03T11:42:20.433] sched/backfill: _attempt_backfill: beginning\ngarbage\n")
    with pytest.raises(SystemExit, match=r"slurmctld.log:2: not a slurmctld log line"):
        mod.parse_log(log, datetime.fromisoformat("2026-12-03T11:40:59"))
