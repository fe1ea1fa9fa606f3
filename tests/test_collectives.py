"""Pure-schedule tests of topology.collectives (no MPI)."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from hpctwin.topology.collectives import (
    ALGORITHMS, AlphaBetaGamma, ScheduleError, ScheduleExecutionError, Step, bine_partners, block_numbering,
    build_schedule, check_schedule, global_bytes, global_bytes_per_step, link_loads, pi, rho, run_schedule,
    supports, xor_partners,
)
from hpctwin.topology.collectives.bine import from_negabinary, to_negabinary
from hpctwin.topology.collectives.mpi_exec import split_count

POW2 = [2 ** k for k in range(1, 13)]          # 2 .. 4096
SMALL_P = [2, 3, 4, 5, 6, 7, 8, 12, 16, 32]


# ----------------------------------------------------------------------------- Bine arithmetic
def test_rho_golden_values():
    assert [rho(k) for k in range(8)] == [1, -1, 3, -5, 11, -21, 43, -85]


def test_negabinary_roundtrip_and_rho_digits():
    for v in range(-100, 101):
        assert from_negabinary(to_negabinary(v)) == v
    # rho(k) is k+1 ones in negabinary
    for k in range(10):
        assert to_negabinary(rho(k)) == "1" * (k + 1)


@pytest.mark.parametrize("p", [2, 4, 6, 8, 10, 16, 1024, 4096])
def test_pi_is_an_involution_pairing_even_with_odd(p):
    r = np.arange(p)
    for k in range(max(1, int(np.log2(p)))):
        q = pi(r, k, p)
        assert np.array_equal(pi(q, k, p), r)
        assert np.all((r + q) % 2 == 1)


def test_p8_butterfly_step1_pairs():
    # step numbering: steps count from 0 and step k of the distance-doubling butterfly uses pi(., k)
    sched = build_schedule("allreduce", "bine_latency", 8)
    st = sched.steps[1]
    pairs = {tuple(sorted(x)) for x in zip(st.src.tolist(), st.dst.tolist())}
    assert pairs == {(0, 7), (1, 2), (3, 4), (5, 6)}
    assert {tuple(sorted((r, pi(r, 1, 8)))) for r in range(8)} == pairs


def test_pi_rejects_odd_p():
    with pytest.raises(ValueError, match="even"):
        pi(0, 0, 7)


# ----------------------------------------------------------------------------- butterflies count once
def _contributions_exactly_once(sched) -> bool:
    p = sched.p
    C = np.eye(p, dtype=bool)
    for st in sched.steps:
        snap = C[st.src]
        if np.any(C[st.dst] & snap):
            return False
        C[st.dst] |= snap
    return bool(C.all())


@pytest.mark.parametrize("alg", ["bine_latency", "bine_latency_halving", "recursive_doubling"])
@pytest.mark.parametrize("p", POW2)
def test_latency_butterflies_count_every_contribution_once(alg, p):
    assert _contributions_exactly_once(build_schedule("allreduce", alg, p))


@pytest.mark.parametrize("alg", ["bine_bandwidth", "rabenseifner"])
@pytest.mark.parametrize("p", [2, 4, 8, 16, 64, 256])
def test_bandwidth_butterflies_count_every_contribution_once(alg, p):
    sched = build_schedule("allreduce", alg, p)
    ones = [np.ones((sched.n_in, 1), dtype=np.int64) for _ in range(p)]
    out = run_schedule(sched, ones)
    assert all(np.all(o == p) for o in out)


@pytest.mark.parametrize("p", [4096])
def test_bandwidth_butterfly_blocks_partition_at_4096(p):
    # every reduce-scatter step halves the window; the windows of a pair are disjoint halves
    sched = build_schedule("allreduce", "bine_bandwidth", p)
    nu = sched.meta["block_numbering"]
    s = 12
    for j, st in enumerate(sched.steps[:s]):
        w = p >> (j + 1)
        assert np.all(st.count == w)
        mine = (nu[st.src] >> (s - 1 - j)) << (s - 1 - j)
        assert np.all(mine != st.start)                       # sends the partner's half
        assert np.all((mine ^ st.start) == w)                 # ...the sibling of its own half


# ----------------------------------------------------------------------------- trees
@pytest.mark.parametrize("alg", ["binomial_halving", "binomial_doubling", "bine_halving", "bine_doubling"])
@pytest.mark.parametrize("p", POW2 + [3, 5, 6, 7, 12, 100, 1000])
def test_every_tree_reaches_every_rank_exactly_once(alg, p):
    if not supports("bcast", alg, p):
        pytest.skip("power of two only")
    for root in {0, p - 1, p // 3}:
        sched = build_schedule("bcast", alg, p, root)
        has = np.zeros(p, dtype=bool)
        has[root] = True
        for st in sched.steps:
            assert has[st.src].all()
            assert not has[st.dst].any()
            assert np.unique(st.dst).size == st.dst.size
            has[st.dst] = True
        assert has.all()
        assert sched.nsteps == int(np.ceil(np.log2(p)))


# ----------------------------------------------------------------------------- block numbering
@pytest.mark.parametrize("p", POW2)
def test_block_numbering_is_a_permutation(p):
    for P in (bine_partners(p), xor_partners(p), xor_partners(p, halving=True)):
        nu = block_numbering(P)
        assert np.array_equal(np.sort(nu), np.arange(p))


def test_block_numbering_golden():
    # HLC-Lab/pico libbine/libbine_utils_bitmaps.c perm_8 and perm_16
    assert block_numbering(bine_partners(8)).tolist() == [0, 4, 6, 1, 2, 7, 5, 3]
    assert block_numbering(bine_partners(16)).tolist() == [0, 8, 12, 2, 4, 14, 9, 6, 3, 10, 15, 1, 7, 13, 11, 5]
    assert block_numbering(xor_partners(16, halving=True)).tolist() == list(range(16))
    # XOR distance-doubling reduce-scatter leaves rank r with the bit-reversed block
    assert block_numbering(xor_partners(8)).tolist() == [0, 4, 2, 6, 1, 5, 3, 7]


def test_block_numbering_rejects_non_butterflies():
    with pytest.raises(ValueError, match="not a butterfly"):
        block_numbering(bine_partners(8, halving=True))


# ----------------------------------------------------------------------------- semantics (simulated)
def _cases():
    for coll, algs in ALGORITHMS.items():
        for alg in algs:
            for p in SMALL_P:
                if supports(coll, alg, p):
                    yield coll, alg, p


@pytest.mark.parametrize("coll,alg,p", list(_cases()))
def test_simulated_executor_computes_the_collective(coll, alg, p):
    roots = [0, p - 1, 1] if coll in ("bcast", "reduce", "gather", "scatter") else [0]
    for root in roots:
        sched = build_schedule(coll, alg, p, root)
        check_schedule(sched, m=2, dtype=np.int64, seed=p + root)
        check_schedule(sched, m=1, dtype=np.float64, seed=7)


def test_every_algorithm_is_tested_somewhere():
    covered = {(c, a) for c, a, _ in _cases()}
    unsupported_everywhere = {("allgather", "bine_doubling"), ("reduce_scatter", "bine_halving")}
    assert covered | unsupported_everywhere == {(c, a) for c, algs in ALGORITHMS.items() for a in algs}


def test_executor_detects_a_broken_schedule():
    sched = build_schedule("allreduce", "ring", 4)
    st = sched.steps[0]
    sched.steps[0] = Step(st.src[:-1], st.dst[:-1], 1, st.reduce, start=st.start[:-1], phase="broken")
    with pytest.raises(ScheduleExecutionError):
        check_schedule(sched)
    sched = build_schedule("allgather", "bruck", 5)
    sched.steps.pop()
    with pytest.raises(ScheduleExecutionError, match="never received"):
        check_schedule(sched)


# ----------------------------------------------------------------------------- bad input
def test_errors_name_what_is_supported():
    with pytest.raises(ScheduleError, match="unknown collective 'allsum'.*allreduce"):
        build_schedule("allsum", "ring", 8)
    with pytest.raises(ScheduleError, match="unknown algorithm 'swing' for allreduce; supported: .*bine_bandwidth"):
        build_schedule("allreduce", "swing", 8)
    with pytest.raises(ScheduleError, match="power-of-two.*p=6.*binomial_halving"):
        build_schedule("bcast", "bine_halving", 6)
    with pytest.raises(ScheduleError, match="power-of-two.*p=12.*pairwise, bruck"):
        build_schedule("alltoall", "bine", 12)
    with pytest.raises(ScheduleError, match="p must be an integer >= 2"):
        build_schedule("allreduce", "ring", 1)
    with pytest.raises(ScheduleError, match="root must be in 0..7"):
        build_schedule("gather", "binomial", 8, root=8)
    with pytest.raises(ScheduleError, match="use reduce_scatter/bine"):
        build_schedule("reduce_scatter", "bine_halving", 8)
    with pytest.raises(ValueError):       # ScheduleError is a ValueError
        build_schedule("allreduce", "ring", 0)


def test_indivisible_count_is_rejected():
    sched = build_schedule("allreduce", "rabenseifner", 8)
    assert split_count(sched, 64, "input") == 8
    with pytest.raises(ScheduleError, match="63 elements must be a positive multiple of 8 blocks"):
        split_count(sched, 63, "input")


def test_aliases():
    assert build_schedule("reduce_scatter", "recursive_halving", 8).algorithm == "distance_halving"
    assert build_schedule("allgather", "recursive_doubling", 8).algorithm == "distance_doubling"
    assert build_schedule("bcast", "bine", 8).algorithm == "bine_halving"


# ----------------------------------------------------------------------------- alpha-beta-gamma
def test_alpha_beta_gamma_hand_checked():
    a, b, g, n = 2e-6, 1e-9, 5e-10, 1_000_000.0
    m = AlphaBetaGamma(a, b, g)
    # recursive doubling p=8: 3 steps, whole vector sent and reduced each step
    assert m.time(build_schedule("allreduce", "recursive_doubling", 8), n) == pytest.approx(3 * (a + n * b + n * g))
    # Rabenseifner p=8: 2*3 steps; reduce-scatter n/2+n/4+n/8 sent and reduced, allgather the same sent
    assert m.time(build_schedule("allreduce", "rabenseifner", 8), n) == pytest.approx(6 * a + 2 * 7 / 8 * n * b + 7 / 8 * n * g)
    # ring p=4: 2*(p-1) steps of n/4, reductions in the first p-1
    assert m.time(build_schedule("allreduce", "ring", 4), n) == pytest.approx(6 * a + 6 * n / 4 * b + 3 * n / 4 * g)
    # recursive doubling p=6 (fold 2 ranks): fold + 2 steps + unfold, whole vector
    assert m.time(build_schedule("allreduce", "recursive_doubling", 6), n) == pytest.approx(4 * (a + n * b) + 3 * n * g)
    # binomial bcast p=5: 3 steps, whole vector, no reduction
    assert m.time(build_schedule("bcast", "binomial", 5), n) == pytest.approx(3 * (a + n * b))
    # Bruck alltoall p=8: 3 steps of n/2
    assert m.time(build_schedule("alltoall", "bruck", 8), n) == pytest.approx(3 * (a + n / 2 * b))


# ----------------------------------------------------------------------------- global bytes
def test_global_bytes_hand_checked():
    g = np.array([0, 0, 1, 1])
    # recursive doubling: step 1 pairs (0,2) (1,3) cross, 4 messages of n
    assert global_bytes(build_schedule("allreduce", "recursive_doubling", 4), g, 10.0) == 40.0
    # Bine p=4: step 1 pairs (0,3) (1,2): all 4 messages cross too
    assert global_bytes(build_schedule("allreduce", "bine_latency", 4), g) == 4.0
    # ring allgather: 1->2 and 3->0 cross in each of 3 steps, n/4 each
    assert global_bytes(build_schedule("allgather", "ring", 4), g, 8.0) == 2 * 3 * 2.0
    # groups {0,1,2,7} and {3,4,5,6} (an allocation not aligned to groups):
    # Bine: step 0 (2,3) (6,7) cross -> 4; step 1 (0,7) (1,2) (3,4) (5,6) local -> 0; step 2 all cross -> 8
    # recursive doubling: step 0 -> 4; step 1 (1,3) (5,7) -> 4; step 2 (0,4) (1,5) (2,6) (3,7) -> 8
    g8 = np.array([0, 0, 0, 1, 1, 1, 1, 0])
    assert global_bytes(build_schedule("allreduce", "bine_latency", 8), g8) == 12.0
    assert global_bytes(build_schedule("allreduce", "recursive_doubling", 8), g8) == 16.0


def test_global_bytes_per_step_sums_and_checks_shape():
    g = np.repeat(np.arange(4), 16)
    sched = build_schedule("allreduce", "bine_bandwidth", 64)
    per = global_bytes_per_step(sched, g, 3.0)
    assert per.shape == (sched.nsteps,)
    assert per.sum() == pytest.approx(global_bytes(sched, g, 3.0))
    with pytest.raises(ValueError, match="one entry per rank"):
        global_bytes(sched, g[:10])


def test_global_bytes_step_by_step_path_matches_flat(monkeypatch):
    import hpctwin.topology.collectives.cost as cost
    g = np.random.default_rng(0).integers(0, 5, 40)
    for coll, alg in [("allreduce", "ring"), ("alltoall", "pairwise"), ("allgather", "bruck")]:
        sched = build_schedule(coll, alg, 40)
        flat = global_bytes(sched, g)
        monkeypatch.setattr(cost, "_FLAT_LIMIT", 0)
        assert global_bytes(sched, g) == pytest.approx(flat)
        monkeypatch.setattr(cost, "_FLAT_LIMIT", 2_000_000)


# ----------------------------------------------------------------------------- link loads
def _two_switch_graph(bt=100.0, bg=50.0):
    G = nx.Graph()
    for h, sw in [(0, "A"), (1, "A"), (2, "B"), (3, "B")]:
        G.add_node(h, kind="host", group=0 if sw == "A" else 1)
        G.add_edge(h, sw, bandwidth=bt, kind="terminal")
    G.add_node("A", kind="switch")
    G.add_node("B", kind="switch")
    G.add_edge("A", "B", bandwidth=bg, kind="global")
    return G


def test_link_loads_hand_checked():
    G = _two_switch_graph(bt=100.0, bg=50.0)
    sched = build_schedule("allreduce", "recursive_doubling", 4)
    n, alpha = 1000.0, 1e-3
    res = link_loads(sched, G, np.arange(4), n, alpha=alpha)
    # step 0: (0<->1) (2<->3): each terminal link carries n in each direction
    assert res.step_time[0] == pytest.approx(alpha + n / 100.0)
    # step 1: (0<->2) (1<->3): A->B and B->A carry 2n each over 50 B/s
    assert res.step_time[1] == pytest.approx(alpha + 2 * n / 50.0)
    assert res.max_link_bytes.tolist() == [n, 2 * n]
    # placement matters: ranks 0,2 on switch A and 1,3 on B -> step 0 crosses (2n on A->B), step 1 is local
    res2 = link_loads(sched, G, np.array([0, 2, 1, 3]), n)
    assert res2.step_time[0] == pytest.approx(2 * n / 50.0)
    assert res2.step_time[1] == pytest.approx(n / 100.0)


def test_link_loads_bad_input():
    G = _two_switch_graph()
    sched = build_schedule("allreduce", "ring", 4)
    with pytest.raises(ValueError, match="same host"):
        link_loads(sched, G, np.array([0, 0, 1, 2]), 1.0)
    with pytest.raises(ValueError, match="one host per rank"):
        link_loads(sched, G, np.array([0, 1, 2]), 1.0)
    G.remove_edge("A", "B")
    G.add_edge("A", "B")
    with pytest.raises(ValueError, match="no 'bandwidth'"):
        link_loads(sched, G, np.arange(4), 1.0)
