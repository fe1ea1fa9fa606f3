"""GPU-granular allocation: the packer (hand-checked placements), the packing wrapper in the real
engine (shared nodes, drops, hand-computed start times, no deadlock) and the fragmentation metric
(exact values on a hand-made cluster)."""
from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from hpctwin.schedulers.base import Start
from hpctwin.schedulers.gpu_packing import GPUPackingScheduler
from tests.helpers import simulate, starts_by_id, workload
from hpctwin.topology.gpu_placement import GPUPacker, GPUShapeError, node_free_counts, whole_gpu_requests
from hpctwin.twin.fragmentation import fragmentation_of_jobs, fragmentation_series, fragmented_gpus
from hpctwin.twin.ranges import parse_ranges
from hpctwin.twin.run import RunConfig, RunConfigError, job_table, prepare, run
from hpctwin.twin.simulation import Simulation, SimulationError
from hpctwin.twin.workload import Workload


def _mask(G, free_local_per_node):
    """Free mask from, per node, the free local GPU ids."""
    m = np.zeros(G * len(free_local_per_node), dtype=bool)
    for n, locs in enumerate(free_local_per_node):
        m[[n * G + i for i in locs]] = True
    return m


def _packer(policy, n_nodes, G=8, groups=None):
    p = GPUPacker(policy)
    p.bind(n_nodes * G, G, groups)
    return p


# ---------------------------------------------------------------------- packer
def test_node_free_counts_popcount_matches_sum():
    rng = np.random.default_rng(3)
    for G in (1, 2, 3, 4, 6, 8, 16):
        m = rng.random(G * 37) < 0.4
        assert node_free_counts(m, G).tolist() == m.reshape(-1, G).sum(1).tolist()


def test_single_node_policies_hand_checked():
    # 4 nodes of 8 GPUs, free per node: 8, 3 (locals 5,6,7), 5 (locals 0,2,4,6,7), 2 (locals 1,3)
    m = _mask(8, [range(8), [5, 6, 7], [0, 2, 4, 6, 7], [1, 3]])
    # 2 GPUs: best-fit = the fullest node that fits = node 3 (2 free) -> units 25, 27
    assert _packer("best-fit", 4).place(0, 2, m).tolist() == [25, 27]
    # first-fit = lowest node id (node 0); worst-fit = most free (node 0 as well)
    assert _packer("first-fit", 4).place(0, 2, m).tolist() == [0, 1]
    assert _packer("worst-fit", 4).place(0, 2, m).tolist() == [0, 1]
    # 4 GPUs: best-fit skips nodes 1 and 3 (3 and 2 free) and takes node 2 (5 free): its lowest free
    # locals 0,2,4,6 -> units 16,18,20,22; first-fit takes node 0
    assert _packer("best-fit", 4).place(0, 4, m).tolist() == [16, 18, 20, 22]
    assert _packer("first-fit", 4).place(0, 4, m).tolist() == [0, 1, 2, 3]
    # 3 GPUs: best-fit ties? node 1 has exactly 3 -> units 13,14,15; worst-fit -> node 0
    assert _packer("best-fit", 4).place(0, 3, m).tolist() == [13, 14, 15]
    assert _packer("worst-fit", 4).place(0, 3, m).tolist() == [0, 1, 2]
    # ties go to the lowest node id: two nodes with 2 free each
    m2 = _mask(8, [[], [0, 1], [], [6, 7]])
    assert _packer("best-fit", 4).place(0, 2, m2).tolist() == [8, 9]
    assert _packer("worst-fit", 4).place(0, 2, m2).tolist() == [8, 9]


def test_four_gpu_job_refused_when_every_node_has_three_free():
    m = _mask(8, [[0, 1, 2], [3, 4, 5], [1, 3, 5], [5, 6, 7]])   # 12 GPUs free in total
    for pol in ("best-fit", "first-fit", "worst-fit"):
        p = _packer(pol, 4)
        assert p.place(0, 4, m) is None
        assert not p.can_pack(4, m)
        assert p.place(0, 3, m) is not None
        assert (p.placed, p.refused) == (1, 1)      # can_pack does not count


def test_twenty_gpus_two_whole_nodes_plus_four_fewest_groups():
    # 8 nodes of 8 GPUs in 2 groups of 4 (nodes 0-3 group 0, 4-7 group 1).
    # whole-free nodes: 0 (group 0), 5, 6 (group 1); node 2 has 5 free, node 7 has 4 (locals 4-7).
    free = [range(8), [], [0, 1, 2, 3, 4], [], [], range(8), range(8), [4, 5, 6, 7]]
    m = _mask(8, free)
    groups = np.arange(8) // 4
    nodes5_6 = list(range(40, 56))
    # fewest groups: both whole nodes in group 1 (5, 6); remainder 4 by best-fit: node 7 (4 free)
    u = _packer("best-fit", 8, groups=groups).place(0, 20, m)
    assert u.tolist() == nodes5_6 + [60, 61, 62, 63]
    assert len(np.unique(groups[u // 8])) == 1
    # without a group map: the lowest whole-free nodes (0 and 5), remainder best-fit on node 7
    u = _packer("best-fit", 8).place(0, 20, m)
    assert u.tolist() == list(range(8)) + list(range(40, 48)) + [60, 61, 62, 63]
    # first-fit remainder: lowest node id with >= 4 free among the others = node 0 (whole free)
    u = _packer("first-fit", 8, groups=groups).place(0, 20, m)
    assert u.tolist() == [0, 1, 2, 3] + nodes5_6
    # 24 GPUs = exactly 3 whole nodes: 0, 5, 6 (two groups needed: group 1 whole, then group 0)
    assert _packer("best-fit", 8, groups=groups).place(0, 24, m).tolist() == list(range(8)) + nodes5_6
    # 25 GPUs: 3 whole nodes + 1 more on another node (node 7 best-fit, 4 free)
    assert _packer("best-fit", 8, groups=groups).place(0, 25, m).tolist() == list(range(8)) + nodes5_6 + [60]
    # 32 GPUs = 4 whole nodes: only 3 exist -> None, although 35 GPUs are free
    assert _packer("best-fit", 8, groups=groups).place(0, 32, m) is None
    # 28 GPUs = 3 whole + 4: the remainder fits node 2 (5) or node 7 (4): best-fit node 7
    assert _packer("best-fit", 8).place(0, 28, m).tolist() == list(range(8)) + nodes5_6 + [60, 61, 62, 63]
    # 21 GPUs needs 2 whole + 5: node 2 (5 free) -> best-fit takes it over the whole node 0
    u = _packer("best-fit", 8, groups=groups).place(0, 21, m)
    assert u.tolist() == [16, 17, 18, 19, 20] + nodes5_6


def test_multi_node_remainder_may_take_a_third_whole_node():
    # 3 whole-free nodes, no partial node: 20 GPUs = 2 whole + 4 on the third whole node
    m = _mask(8, [range(8), range(8), range(8), []])
    assert _packer("best-fit", 4).place(0, 20, m).tolist() == list(range(16)) + [16, 17, 18, 19]
    # only 2 whole-free nodes and no partial node with 4 -> None
    m = _mask(8, [range(8), range(8), [0, 1, 2], []])
    assert _packer("best-fit", 4).place(0, 20, m) is None


def test_idle_machine_packs_every_size():
    for G, n_nodes in ((8, 4), (4, 5), (6, 3), (1, 7)):
        total = G * n_nodes
        for pol in ("best-fit", "first-fit", "worst-fit"):
            p = _packer(pol, n_nodes, G, groups=np.arange(n_nodes) % 2)
            for g in range(1, total + 1):
                u = p.place(0, g, np.ones(total, dtype=bool))
                assert u is not None and len(np.unique(u)) == g == len(u)
                assert len(np.unique(u // G)) == -(-g // G)     # ceil(g / G) nodes


def test_packer_long_sequence_never_double_books():
    # 1,024 nodes x 8 GPUs; mixed sizes; release the oldest half whenever a job does not fit
    # (speed is measured in benchmarks/llm_speed.py, not here)
    p = _packer("best-fit", 1024, groups=np.arange(1024) // 32)
    rng = np.random.default_rng(0)
    sizes = rng.choice([1, 1, 1, 2, 2, 4, 8, 16, 24], size=20000).tolist()
    mask = np.ones(8192, dtype=bool)
    held = []
    for g in sizes:
        u = p.place(0, g, mask)
        if u is None:
            for x in held[: len(held) // 2]:
                mask[x] = True
            held = held[len(held) // 2:]
            continue
        assert mask[u].all()
        mask[u] = False
        assert len(np.unique(u // 8)) == -(-len(u) // 8) or len(u) > 8
        held.append(u)
    assert p.placed > 0 and p.refused > 0


def test_packer_bad_input():
    with pytest.raises(GPUShapeError, match="gpus_per_node = 8 does not divide the 30 GPU units"):
        GPUPacker().bind(30, 8)
    with pytest.raises(GPUShapeError, match="gpus_per_node must be >= 1"):
        GPUPacker().bind(32, 0)
    with pytest.raises(GPUShapeError, match="node_group has 32 entries for 4 nodes"):
        GPUPacker().bind(32, 8, np.zeros(32, dtype=int))
    p = _packer("best-fit", 4)
    with pytest.raises(GPUShapeError, match="job index 7 asks for 33 GPUs; the machine has 32"):
        p.place(7, 33, np.ones(32, dtype=bool))
    with pytest.raises(GPUShapeError, match="asks for 0 GPUs"):
        p.place(7, 0, np.ones(32, dtype=bool))
    with pytest.raises(GPUShapeError, match="free mask has 16 entries for 32 GPUs"):
        p.place(7, 1, np.ones(16, dtype=bool))
    with pytest.raises(ValueError, match="unknown GPU packing policy 'tightest'"):
        GPUPacker("tightest")


# ---------------------------------------------------------------------- wrapper in the engine
def _units(res):
    return [parse_ranges(x) if x else np.empty(0, dtype=np.int64) for x in res.nodes]


def _assert_no_gpu_twice(res):
    """No unit is held by two jobs at overlapping times (intervals [start, end))."""
    intervals: dict[int, list] = {}
    for j, u in enumerate(_units(res)):
        for x in u.tolist():
            intervals.setdefault(x, []).append((res.start[j], res.end[j]))
    for x, iv in intervals.items():
        iv.sort()
        for (s0, e0), (s1, _) in pairwise(iv):
            assert s1 >= e0, f"GPU {x} held twice: [{s0}, {e0}) and from {s1}"


def _assert_shape(res, procs, G):
    for u, g in zip(_units(res), procs):
        nodes, cnt = np.unique(u // G, return_counts=True)
        assert len(u) == g
        if g <= G:
            assert len(nodes) == 1
        else:
            assert (cnt == G).sum() >= g // G and len(nodes) == -(-g // G)


def test_shared_nodes_and_unpackable_start_waits_for_a_node():
    # 2 nodes x 4 GPUs = 8 units; rows (id, submit, runtime, GPUs, requested)
    rows = [(1, 0, 100, 3, None),   # node 0 (both empty: best-fit tie -> lowest) units 0-2
            (2, 0, 200, 3, None),   # node 0 has 1 free -> node 1, units 4-6
            (3, 0, 50, 1, None),    # best-fit: node 0 (1 free) -> unit 3: shares node 0 with job 1
            (4, 10, 100, 2, None),  # t=10: 0 GPUs free. t=50: units 3 and 7 free (2 GPUs, 2 nodes):
                                    # EASY proposes it, unpackable, dropped; t=60 again; t=100 node 0
                                    # is free -> units 0-1
            (5, 60, 10, 1, None)]   # t=60: EASY counts job 4 as started: no GPU left; t=100: node 0
                                    # has 2 free, node 1 has 1 -> best-fit node 1, unit 7
    sched = GPUPackingScheduler("easy", "best-fit", gpus_per_node=4)
    res, prep, _ = simulate(rows, 8, sched_obj=sched)
    assert starts_by_id(res, prep) == {1: 0.0, 2: 0.0, 3: 0.0, 4: 100.0, 5: 100.0}
    assert res.nodes == ["0-2", "4-6", "3", "0-1", "7"]
    assert sched.unpackable_starts == 2 and sched.unpackable_jobs == 1      # job 4 at t=50 and t=60
    assert sched.describe()["unpackable_starts"] == 2
    _assert_no_gpu_twice(res)
    # the metric: at t=50 job 4 (2 GPUs) waits, units 3 and 7 are free on two nodes: 2 fragmented
    fs = fragmentation_series(prep.workload.submit, res.start, res.end, res.nodes, prep.workload.procs, 4, 8)
    i = int(np.searchsorted(fs.t, 50.0))
    assert (fs.t[i], fs.free[i], fs.fragmented[i], fs.waiting[i]) == (50.0, 2, 2, 1)


def test_skip_and_block_modes_hand_computed():
    # 3 nodes x 4 GPUs; three 3-GPU jobs leave 1 GPU free per node (3 free, fragmented)
    rows = [(1, 0, 100, 3, None), (2, 0, 200, 3, None), (3, 0, 300, 3, None),
            (4, 5, 50, 2, None),    # fits by count at t=5, never by shape until node 0 empties (t=100)
            (5, 5, 10, 1, None)]
    skip = GPUPackingScheduler("easy", gpus_per_node=4, on_unpackable="skip")
    res, prep, _ = simulate(rows, 12, sched_obj=skip)
    # skip: job 5 starts at t=5 on unit 3 (best-fit tie: node 0), ends at 15; job 4 waits for node 0
    assert starts_by_id(res, prep) == {1: 0.0, 2: 0.0, 3: 0.0, 4: 100.0, 5: 5.0}
    assert res.nodes[3:] == ["0-1", "3"]
    assert skip.unpackable_starts == 2      # job 4 at t=5 and t=15
    block = GPUPackingScheduler("easy", gpus_per_node=4, on_unpackable="block")
    res, prep, _ = simulate(rows, 12, sched_obj=block)
    # block: job 5 is behind job 4 in EASY's order, so it is dropped with it until t=100; then job 4
    # takes units 0-1 (node 0, 4 free) and job 5 best-fit node 1 (tie with node 2) -> unit 7
    assert starts_by_id(res, prep) == {1: 0.0, 2: 0.0, 3: 0.0, 4: 100.0, 5: 100.0}
    assert res.nodes[3:] == ["0-1", "7"]
    assert block.unpackable_starts == 1
    _assert_no_gpu_twice(res)


@pytest.mark.parametrize("mode", ["skip", "block"])
@pytest.mark.parametrize("policy", ["best-fit", "first-fit", "worst-fit"])
@pytest.mark.parametrize("inner", ["easy", "fcfs", "conservative"])
def test_random_workload_never_deadlocks_and_respects_shapes(mode, policy, inner):
    rng = np.random.default_rng(11)
    G, nodes = 4, 4
    n = 150
    sizes = rng.choice([1, 1, 2, 3, 4, 5, 8, 11, 16], size=n)
    submit = np.sort(rng.integers(0, 2000, size=n))
    run = rng.integers(1, 300, size=n)
    rows = [(i + 1, int(submit[i]), int(run[i]), int(sizes[i]), int(run[i]) * 2) for i in range(n)]
    sched = GPUPackingScheduler(inner, policy, gpus_per_node=G, node_group=np.arange(nodes) // 2,
                                on_unpackable=mode)
    res, prep, _ = simulate(rows, G * nodes, sched_obj=sched)
    assert np.isfinite(res.start).all() and np.isfinite(res.end).all()
    _assert_no_gpu_twice(res)
    _assert_shape(res, prep.workload.procs, G)


def test_size_cache_changes_no_decision():
    """Skipping placements known to fail (monotone in size, same machine state) is exact."""
    class NoCache(GPUPackingScheduler):
        size_cache = False

    rng = np.random.default_rng(8)
    n = 200
    sizes = rng.choice([1, 2, 3, 5, 8, 12], size=n)
    submit = np.sort(rng.integers(0, 1500, size=n))
    run = rng.integers(1, 200, size=n)
    rows = [(i + 1, int(submit[i]), int(run[i]), int(sizes[i]), None) for i in range(n)]
    out = []
    for cls in (GPUPackingScheduler, NoCache):
        s = cls("easy", "worst-fit", gpus_per_node=4)
        res, _, _ = simulate(rows, 16, sched_obj=s)
        out.append((res.start.tolist(), res.nodes, s.unpackable_starts, s.packer.refused))
    assert out[0][:3] == out[1][:3]
    assert out[0][2] > 0 and out[0][3] < out[1][3]      # same drops, fewer placement calls


def test_inner_units_honoured_and_checked():
    class Fixed:
        name = "fixed"

        def __init__(self, units):
            self.units = units

        def bind(self, jobs, cluster):
            pass

        def schedule(self, now, queue, cluster):
            return [Start(int(queue[0]), np.asarray(self.units))] if cluster.free == cluster.total else []

    sched = GPUPackingScheduler(Fixed([5, 6]), gpus_per_node=4)
    res, _, _ = simulate([(1, 0, 10, 2, None)], 8, sched_obj=sched)
    assert res.nodes == ["5-6"]
    sched = GPUPackingScheduler(Fixed([5]), gpus_per_node=4)
    # a policy's exception is a located engine error naming the policy, with its own message
    with pytest.raises(SimulationError, match=r"scheduler gpu-pack\(fixed,best-fit\) raised at t=0.0: (.|\n)*"
                       r"gave job index 0 \(2 GPUs\) units \[5\] that are not 2 free GPUs"):
        simulate([(1, 0, 10, 2, None)], 8, sched_obj=sched)


def test_hooks_forwarded():
    calls = []

    class Inner:
        name = "rec"

        def bind(self, jobs, cluster):
            calls.append("bind")

        def schedule(self, now, queue, cluster):
            return [int(queue[0])] if cluster.free >= 1 else []

        def on_submit(self, now, job):
            calls.append(("submit", job))

        def on_start(self, now, job):
            calls.append(("start", job))

        def on_finish(self, now, job):
            calls.append(("finish", job))

        def on_requeue(self, now, job):
            calls.append(("requeue", job))

        def next_wakeup(self, now):
            return None

    s = GPUPackingScheduler(Inner(), gpus_per_node=2)
    simulate([(1, 0, 10, 1, None)], 4, sched_obj=s)
    assert calls == ["bind", ("submit", 0), ("start", 0), ("finish", 0)]
    s.on_requeue(3.0, 0)
    assert calls[-1] == ("requeue", 0)
    s.on_interrupt(4.0, 0)                          # inner without on_interrupt: its on_finish
    assert calls[-1] == ("finish", 0)
    assert s.next_wakeup(5.0) is None
    class Bare:
        name = "bare"

        def schedule(self, now, queue, cluster):
            return []

    GPUPackingScheduler(Bare(), gpus_per_node=2).on_requeue(3.0, 0)     # inner without the hook: no-op


def test_wrapper_bad_input():
    sched = GPUPackingScheduler("easy", gpus_per_node=8)
    with pytest.raises(GPUShapeError, match="gpus_per_node = 8 does not divide the 12 GPU units"):
        simulate([(1, 0, 10, 2, None)], 12, sched_obj=sched)
    # a job bigger than the machine: the engine refuses it before any pass, naming the job ...
    prep = prepare(workload([(1, 0, 10, 17, None)]), 10**6, "test")
    with pytest.raises(SimulationError, match="job 1 needs 17 units; the machine has 16"):
        Simulation(job_table(prep), prep.workload.runtime, prep.kill_limit,
                   GPUPackingScheduler("easy", gpus_per_node=8), 16)

    # ... and so does the wrapper's own bind, for a view that does not come from the engine
    class View:
        total = 16

    with pytest.raises(ValueError, match="job 1 asks for 17 GPUs; the machine has 16"):
        GPUPackingScheduler("easy", gpus_per_node=8).bind(job_table(prep), View())
    with pytest.raises(ValueError, match="on_unpackable must be one of skip, block"):
        GPUPackingScheduler(on_unpackable="wait")
    with pytest.raises(ValueError, match="gpus_per_node must be >= 1"):
        GPUPackingScheduler(gpus_per_node=0)
    with pytest.raises(ValueError, match="node_group has 3 entries for 2 nodes"):
        simulate([(1, 0, 10, 2, None)], 16,
                 sched_obj=GPUPackingScheduler("easy", gpus_per_node=8, node_group=[0, 0, 1]))


def test_whole_gpu_requests_rounds_fractions_up():
    counts, rounded, no_gpu = whole_gpu_requests([0.5, 1, 2.0, 0, np.nan, 0.25, 3.2, -1])
    assert counts.tolist() == [1, 1, 2, 0, 0, 1, 4, 0]
    assert (rounded, no_gpu) == (3, 3)
    with pytest.raises(ValueError, match="column 'gpus': row 1 has an infinite GPU count"):
        whole_gpu_requests([1, np.inf], "column 'gpus'")


# ---------------------------------------------------------------------- fragmentation metric
def test_fragmented_gpus_snapshot_by_hand():
    free = [1, 2, 4, 0]                             # nodes of 4 GPUs
    assert fragmented_gpus(free, 4, []) == 0        # nothing waits
    assert fragmented_gpus(free, 4, [3]) == 3       # nodes with 1 and 2 free cannot take 3
    assert fragmented_gpus(free, 4, [3, 8]) == 3    # the whole node is usable anyway
    assert fragmented_gpus(free, 4, [8]) == 3       # only the whole free node serves an 8-GPU job
    assert fragmented_gpus(free, 4, [2]) == 1       # only the 1-free node is stranded
    assert fragmented_gpus(free, 4, [1, 8]) == 0
    assert fragmented_gpus(free, 4, [5]) == 3       # 5 > 4: whole nodes only (remainder not counted)
    assert fragmented_gpus([4, 4], 4, [4]) == 0
    with pytest.raises(ValueError, match=r"free_per_node must lie in \[0, 4\]"):
        fragmented_gpus([5], 4, [1])


def _hand_cluster():
    """2 nodes x 4 GPUs. A: 3 GPUs on node 0 [0,10); B: 2 on node 1 [0,20); C: submitted 2, runs
    on node 0 [10,30); D: 8 GPUs, submitted 5, never starts."""
    submit = [0, 0, 2, 5]
    start = [0, 0, 10, np.nan]
    end = [10, 20, 30, np.nan]
    units = [[0, 1, 2], "4-5", "0-2", ""]
    gpus = [3, 2, 3, 8]
    return submit, start, end, units, gpus


def test_fragmentation_series_exact_on_hand_made_cluster():
    fs = fragmentation_series(*_hand_cluster(), gpus_per_node=4, total_gpus=8)
    assert fs.t.tolist() == [0, 2, 5, 10, 20, 30]
    # t=0: free node0 1, node1 2, nothing waits -> 0; t=2: C (3) waits, neither node has 3 -> 3;
    # t=5: D (8 > 4) waits too, no whole node -> 3; t=10: A ends, C starts on node 0: same counts,
    # D waits -> 3; t=20: B ends, node 1 whole: usable by D, node 0's 1 GPU is not -> 1;
    # t=30: both nodes whole -> 0
    assert fs.free.tolist() == [3, 3, 3, 3, 5, 8]
    assert fs.fragmented.tolist() == [0, 3, 3, 3, 1, 0]
    assert fs.waiting.tolist() == [0, 1, 2, 1, 1, 1]
    assert fs.free_hist[4].tolist() == [0, 1, 0, 0, 1]          # t=20: one node 1 free, one 4 free
    # time-weighted over [0, 30]: free (3*20 + 5*10) / 30; fragmented (3*18 + 1*10) / 30
    assert fs.mean_free == pytest.approx(110 / 30)
    assert fs.mean_fragmented == pytest.approx(64 / 30)
    assert fs.fragmented_share_of_free == pytest.approx(64 / 110)
    assert fs.fragmented_share_of_machine == pytest.approx(64 / 30 / 8)
    assert fs.summary()["mean_fragmented_gpus"] == pytest.approx(64 / 30)
    # a regular grid: samples hold the state after events at each grid time
    g = fragmentation_series(*_hand_cluster(), gpus_per_node=4, total_gpus=8, times=np.arange(0, 40, 8))
    assert g.t.tolist() == [0, 8, 16, 24, 32]
    assert g.fragmented.tolist() == [0, 3, 3, 1, 0]
    assert g.free.tolist() == [3, 3, 3, 5, 8]
    assert g.mean_fragmented == pytest.approx((0 + 3 + 3 + 1) * 8 / 32)


def test_fragmentation_of_jobs_table_and_errors():
    import pandas as pd
    submit, start, end, units, gpus = _hand_cluster()
    df = pd.DataFrame({"submit": submit, "start": start, "end": end,
                       "nodes": ["0-2", "4-5", "0-2", np.nan], "procs": gpus})
    assert fragmentation_of_jobs(df, 4, 8).fragmented.tolist() == [0, 3, 3, 3, 1, 0]
    with pytest.raises(ValueError, match="jobs table lacks column"):
        fragmentation_of_jobs(df.drop(columns="nodes"), 4, 8)
    bad_units = list(units)
    bad_units[1] = "2-3"                            # B on units 2-3 during [0, 20) overlaps A's unit 2
    with pytest.raises(ValueError, match="a GPU is held by two jobs at once"):
        fragmentation_series(submit, start, end, bad_units, gpus, 4, 8)
    with pytest.raises(ValueError, match="job index 1: 3 units listed for a request of 2 GPUs"):
        fragmentation_series(submit, start, end, [units[0], "4-6", units[2], ""], gpus, 4, 8)
    with pytest.raises(ValueError, match="must be >= 1 and divide total_gpus = 10"):
        fragmentation_series(submit, start, end, units, gpus, 4, 10)
    with pytest.raises(ValueError, match=r"unit ids must lie in \[0, 8\)"):
        fragmentation_series(submit, start, end, [units[0], "8-9", units[2], ""], gpus, 4, 8)
    with pytest.raises(ValueError, match="job index 3: units listed for a job that never started"):
        fragmentation_series(submit, start, end, [units[0], units[1], units[2], "6-7"], gpus, 4, 8)
    with pytest.raises(ValueError, match="job index 2: start 1.0 before submit 2.0"):
        fragmentation_series(submit, [0, 0, 1, np.nan], end, units, gpus, 4, 8)


def test_fragmentation_vectorised_matches_snapshot_helper():
    """On a random engine run, every grid point equals `fragmented_gpus` of its snapshot."""
    rng = np.random.default_rng(5)
    G, nodes, n = 4, 6, 120
    sizes = rng.choice([1, 2, 3, 4, 6, 9], size=n)
    submit = np.sort(rng.integers(0, 1500, size=n))
    run = rng.integers(5, 200, size=n)
    rows = [(i + 1, int(submit[i]), int(run[i]), int(sizes[i]), None) for i in range(n)]
    res, prep, _ = simulate(rows, G * nodes, sched_obj=GPUPackingScheduler("easy", "worst-fit", G))
    wl = prep.workload
    fs = fragmentation_series(wl.submit, res.start, res.end, res.nodes, wl.procs, G, G * nodes)
    units = _units(res)
    assert fs.fragmented.max() > 0
    for k, t in enumerate(fs.t.tolist()):
        free = np.ones(G * nodes, dtype=bool)
        for j, u in enumerate(units):
            if res.start[j] <= t < res.end[j]:
                free[u] = False
        waiting = wl.procs[(wl.submit <= t) & ~(res.start <= t)]
        fpn = free.reshape(nodes, G).sum(1)
        assert fs.free[k] == free.sum()
        assert fs.fragmented[k] == fragmented_gpus(fpn, G, waiting)
        assert fs.waiting[k] == len(waiting)


def _gpu_wl():
    # rows: submit, runtime, gpus (procs is a node count the GPU mode ignores)
    rows = [(0, 100, 3), (0, 200, 3), (0, 50, 1), (10, 100, 2), (60, 10, 1), (70, 10, 0.5), (80, 10, 0)]
    return Workload.from_arrays("gpu-test", submit=[r[0] for r in rows], runtime=[r[1] for r in rows],
                                procs=[1] * len(rows), requested_time=[r[1] for r in rows],
                                columns={"gpus": np.array([r[2] for r in rows], dtype=float)})


def test_run_allocation_gpu_end_to_end(tmp_path):
    cfg = RunConfig(workload="gpu-test", nodes=2, gpus_per_node=4, allocation="gpu", out=str(tmp_path / "r"))
    r = run(cfg, workload=_gpu_wl())
    s = r.summary
    assert s["machine_units"] == 8 and s["allocation"] == {"units": "gpu", "gpus_per_node": 4, "nodes": 2}
    assert s["jobs_skipped"] == {"size_le_0": 1}                   # the CPU-only job
    assert any("1 fractional GPU requests rounded up" in n for n in s["notes"])
    df = r.jobs.set_index("job_id")
    assert df.loc[4, "start"] == 100.0 and df.loc[4, "nodes"] == "0-1"   # waited for node 0 (see engine test)
    assert (df["gpu_nodes"] == 1).all()
    assert s["scheduler"] == "gpu-pack(easy,best-fit)" and s["scheduler_params"]["unpackable_starts"] >= 1
    assert s["gpu_fragmentation"]["mean_fragmented_gpus"] > 0
    assert (tmp_path / "r" / "summary.json").exists()


def test_run_gpu_pack_by_name_and_errors():
    r = run(RunConfig(workload="gpu-test", scheduler="gpu-pack", nodes=2, gpus_per_node=4, allocation="gpu",
                      options={"scheduler": {"inner": "fcfs", "policy": "worst-fit"}}), workload=_gpu_wl())
    assert r.summary["scheduler"] == "gpu-pack(fcfs,worst-fit)"
    with pytest.raises(RunConfigError, match="needs --allocation gpu"):
        run(RunConfig(workload="gpu-test", scheduler="gpu-pack", nodes=8), workload=_gpu_wl())
    with pytest.raises(RunConfigError, match="needs the GPUs per node"):
        run(RunConfig(workload="gpu-test", nodes=2, allocation="gpu"), workload=_gpu_wl())
    with pytest.raises(RunConfigError, match="does not support --network on"):
        run(RunConfig(workload="gpu-test", nodes=2, gpus_per_node=4, allocation="gpu", network=True),
            workload=_gpu_wl())
    with pytest.raises(RunConfigError, match="unknown allocation 'cpu'"):
        run(RunConfig(workload="gpu-test", nodes=2, allocation="cpu"), workload=_gpu_wl())


def _power_run(gpus, runtime):
    n = len(gpus)
    wl = Workload.from_arrays("g", submit=[0] * n, runtime=runtime, procs=[1] * n, requested_time=[1000] * n,
                              columns={"gpus": np.array(gpus, float), "gpu_util": np.full(n, 0.9),
                                       "cpu_util": np.full(n, 0.5)})
    return run(RunConfig(workload="g", system="dgx-h100", nodes=2, allocation="gpu", power=True, scheduler="fcfs"),
               workload=wl)


def test_gpu_allocation_power_shares_a_node_by_gpus_held():
    # two 4-GPU jobs sharing a node draw exactly what one 8-GPU job of the same profile draws on it:
    # each takes half of the node's power above idle (and half of the node's idle as its share)
    two, one = _power_run([4, 4], [100, 100]), _power_run([8], [100])
    e2 = two.jobs["energy_j"].to_numpy()
    e1 = one.jobs["energy_j"].iloc[0]
    assert e2[0] == pytest.approx(e2[1]) and e2.sum() == pytest.approx(e1)
    assert two.summary["energy_it_kwh"] == pytest.approx(one.summary["energy_it_kwh"])
    # a 4-GPU job alone on the machine: the node draws idle + half the dynamic power
    half = _power_run([4], [100])
    assert half.jobs["energy_j"].iloc[0] == pytest.approx(e1 / 2)


def test_gpu_allocation_iteration_model_costs_the_nodes_behind_the_gpus():
    # whole-node training gangs: GPU allocation (units = GPUs) and node allocation put them on the
    # same nodes, so the iteration model gives the same iteration times and the same ends
    from hpctwin.datasets.llm_synthetic import llm_workload
    wl = llm_workload(days=2, gpus=1024, seed=1)
    tr = np.flatnonzero(np.isin(wl.columns["job_class"], ["llm_pretrain", "llm_finetune"]) & (wl.columns["gpus"] >= 16))
    sub = wl.take(tr[:4])
    common = dict(workload="x", system="dgx-h100", scheduler="fcfs", kill_at_walltime=False,
                  options={"llm": {"iteration": True}})
    a = run(RunConfig(**common), workload=sub).jobs
    b = run(RunConfig(allocation="gpu", **common), workload=sub).jobs
    assert (b["procs"] == 8 * a["procs"]).all()
    assert np.allclose(a["iter_time_s"], b["iter_time_s"]) and np.allclose(a["end"], b["end"])
