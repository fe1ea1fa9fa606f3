"""The compiled / cached routing paths give the generic numpy path's link loads bit for bit; the
analytic torus all-to-all gives the flow-by-flow expansion's loads (to rounding)."""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.topology import traffic as T
from hpctwin.topology.presets import build_preset
from hpctwin.topology.routing import Router, TorusRouter, make_router


def _random_traffic(rng, n_hosts):
    n = int(rng.integers(2, 120))
    if rng.random() < 0.5:
        h = rng.choice(n_hosts, n, replace=False)
    else:
        s0 = int(rng.integers(0, n_hosts - n))
        h = np.arange(s0, s0 + n)
    kind = rng.choice(["ring", "allreduce", "alltoall", "mixed"])
    if kind == "mixed":  # explicit flows and an all-to-all together
        t = T.pattern("ring", h, 1.3)
        t.pair_bytes = 0.7
        return t
    return T.pattern(kind, h, float(rng.uniform(0.5, 3.0)))


@pytest.mark.parametrize("preset", ["adastra", "lumi"])
def test_compiled_dragonfly_minimal_equals_generic_path(preset):
    R = make_router(build_preset(preset))
    assert R.kind == "dragonfly"
    rng = np.random.default_rng(7)
    for _ in range(150):
        t = _random_traffic(rng, R.n_hosts)
        a = Router._network_loads(R, t, "minimal")     # the generic numpy pieces
        b = R._network_loads(t, "minimal")             # the compiled kernel
        assert np.array_equal(a.ids, b.ids) and np.array_equal(a.nbytes, b.nbytes)


@pytest.mark.parametrize("preset", ["adastra", "leonardo"])
def test_cached_link_loads_equal_uncached(preset):
    R = make_router(build_preset(preset))
    rng = np.random.default_rng(8)
    for routing in ("minimal", "valiant"):
        for _ in range(40):
            t = _random_traffic(rng, R.n_hosts)
            ref = R.link_loads(t, routing)
            for _rep in range(2):     # a miss, then a hit
                got = R.link_loads(t, routing, cache=True)
                assert np.array_equal(ref.ids, got.ids) and np.array_equal(ref.nbytes, got.nbytes)


def test_link_loads_equal_single_bincount_of_all_pieces():
    """Terminal and switch-to-switch loads are merged, not summed: same as one bincount."""
    R = make_router(build_preset("adastra"))
    rng = np.random.default_rng(9)
    for _ in range(30):
        t = _random_traffic(rng, R.n_hosts)
        ids = [R.term_up[t.hosts], R.term_down[t.hosts]]
        w = [t.sent_per_host(), t.received_per_host()]
        for i, x in R._network_pieces(t, "minimal"):
            ids.append(np.asarray(i, dtype=np.int64).ravel())
            w.append(np.asarray(x, dtype=np.float64).ravel())
        ids, w = np.concatenate(ids), np.concatenate(w)
        dense = np.bincount(ids[w > 0], w[w > 0], minlength=R.n_links)
        ll = R.link_loads(t)
        assert np.array_equal(ll.ids, np.flatnonzero(dense)) and np.array_equal(ll.nbytes, dense[ll.ids])


def test_groups_spanned():
    R = make_router(build_preset("adastra"))
    assert R.groups_spanned([0, 1, 2]) == 1
    assert R.groups_spanned([0, 383]) == 2
    assert R.groups_spanned(np.arange(384)) == 3
    assert R.groups_spanned([]) == 0
    with pytest.raises(IndexError, match="outside 0..383"):
        R.groups_spanned([0, 384])


def test_pairwise_sum_equals_numpy_sum():
    """The compiled copy of numpy's pairwise summation gives np.sum's result bit for bit, across
    the 8-value, 128-value-block and split boundaries."""
    from hpctwin.topology.routing import _pairwise_sum
    rng = np.random.default_rng(11)
    for n in list(range(0, 300)) + [511, 512, 1000, 1029, 4097, 20001]:
        a = rng.standard_normal(n) * 10.0 ** rng.uniform(-8, 8, n)
        assert 0.0 + _pairwise_sum(a, 0, n) == float(a.sum())
        if n > 5:
            assert 0.0 + _pairwise_sum(a, 5, n - 5) == float(a[5:].copy().sum())
    assert _pairwise_sum(np.array([1.0, 2.0, 3.0]), 1, 2) == 5.0


@pytest.mark.parametrize("preset", ["adastra", "frontier"])
def test_compiled_dragonfly_footprint_equals_generic_path(preset):
    """`DragonflyRouter.footprint` (one compiled pass) = pattern + sent_per_host + link_loads +
    global_bytes of the generic `Router.footprint`, bit for bit, for every built-in pattern."""
    R = make_router(build_preset(preset))
    rng = np.random.default_rng(12)
    for _ in range(120):
        n = int(rng.integers(2, 200))
        if rng.random() < 0.5:
            h = np.sort(rng.choice(R.n_hosts, n, replace=False)).astype(np.int64)
        else:
            s0 = int(rng.integers(0, R.n_hosts - n))
            h = np.arange(s0, s0 + n, dtype=np.int64)
        for kind in ("ring", "allreduce", "alltoall"):
            ref = Router.footprint(R, kind, h)
            got = R.footprint(kind, h)
            assert got.smax == ref.smax and got.global_bytes == ref.global_bytes
            assert np.array_equal(got.loads.ids, ref.loads.ids)
            assert np.array_equal(got.loads.nbytes, ref.loads.nbytes)


def test_footprint_hand_case_and_fallbacks():
    """Adastra (4 hosts per switch, 32 switches per group): a ring allreduce on hosts 0, 1 and 4
    sends 2 (n - 1) / n = 4/3 bytes per host per round: 6 terminal links plus the two local
    links between switches 0 and 1 (4/3 each way), nothing between groups. Unsorted hosts,
    the "none" kind and Valiant routing take the generic path."""
    R = make_router(build_preset("adastra"))
    fp = R.footprint("allreduce", np.array([0, 1, 4]))
    assert fp.smax == 2.0 * 2 / 3 and fp.global_bytes == 0.0
    assert len(fp.loads.ids) == 8 and np.all(fp.loads.nbytes == 2.0 * 2 / 3)
    assert (R.link_kind[fp.loads.ids] == 0).sum() == 6 and (R.link_kind[fp.loads.ids] == 1).sum() == 2
    assert R.footprint("none", np.array([0, 1])) is None
    a = R.footprint("ring", np.array([300, 2, 7]))
    b = R.footprint("ring", np.array([2, 7, 300]))
    assert np.array_equal(a.loads.ids, b.loads.ids) and a.global_bytes == b.global_bytes == 2.0
    v = R.footprint("ring", np.array([2, 7, 300]), routing="valiant")
    assert v.global_bytes == 2.0 and len(v.loads.ids) > len(b.loads.ids)


# ---------------------------------------------------------------- torus: analytic all-to-all
TORI = [  # (dims, block, periodic): odd and even rings (ties), meshes, size-1/2 dims, blocks
    ((5,), None, None),
    ((6,), None, None),
    ((4, 3, 2), (2, 3, 1), None),
    ((5, 4), None, (False, True)),
    ((7, 6, 2, 3), (7, 3, 1, 3), (True, False, True, True)),
    ((8, 1, 5), None, None),
    ((2, 2, 2), None, None),
    ((6, 5, 4, 2, 3, 2), (1, 1, 1, 2, 3, 2), (True, True, True, False, True, False)),  # Fugaku-like
]


def _dense_reference(R, t):
    """`link_loads` with the all-to-all expanded into n (n - 1) explicit flows (the old path)."""
    out = np.zeros(R.n_links)
    out[R.term_up[t.hosts]] += t.sent_per_host()
    out[R.term_down[t.hosts]] += t.received_per_host()
    for i, x in R._flow_network_pieces(t):
        np.add.at(out, np.asarray(i).ravel(), np.asarray(x).ravel())
    return out


@pytest.mark.parametrize("dims,block,periodic", TORI)
def test_torus_alltoall_analytic_equals_flow_expansion(dims, block, periodic):
    """Analytic all-to-all = the flow-by-flow expansion within 1e-9 relative, on random host sets
    (and with explicit flows mixed in); links the expansion leaves at rounding residue only
    (< 1e-12 of the largest load) carry exactly nothing analytically."""
    R = TorusRouter(dims, block, periodic)
    R._small_alltoall = 0          # the analytic path for every size (small jobs route flows by default)
    rng = np.random.default_rng(13)
    for rep in range(12):
        n = int(rng.integers(2, min(R.n_hosts, 300) + 1))
        h = np.sort(rng.choice(R.n_hosts, n, replace=False)).astype(np.int64)
        if rep % 3 == 2:
            t = T.pattern("ring", h, 1.3)
            t.pair_bytes = 0.7
        else:
            t = T.alltoall(h, float(rng.uniform(0.5, 3.0)))
        ref = _dense_reference(R, t)
        got = R.dense_loads(t)
        scale = ref.max()
        assert np.all(np.abs(got - ref) <= 1e-9 * np.maximum(np.abs(ref), 1e-3 * scale))
        assert not np.any(got[R.bandwidth == 0]) and got.min() >= 0
        assert np.all(ref[got == 0] < 1e-12 * scale)


def test_torus_alltoall_hand_values():
    """1 byte per pair, every host: ring of 4: f = 1 crosses one link, f = 2 is a tie (1/2 on
    two links each way) -> 2 bytes on each of the 8 ring links; ring of 5 (no tie): f = 1, 2 ->
    3 bytes per link; a mesh line of 3: link 0->1 carries (0,1), (0,2), link 1->2 (0,2), (1,2)."""
    R = TorusRouter([4])
    np.testing.assert_array_equal(R.dense_loads(T.alltoall(np.arange(4), 3.0))[:8], np.full(8, 2.0))
    R = TorusRouter([5])
    np.testing.assert_array_equal(R.dense_loads(T.alltoall(np.arange(5), 4.0))[:10], np.full(10, 3.0))
    R = TorusRouter([3], periodic=[False])
    d = R.dense_loads(T.alltoall(np.arange(3), 2.0))
    # link ids (i * D + d) * 2 + s: 0->1 is 0, 1->2 is 2, 1->0 is 3, 2->1 is 5
    np.testing.assert_array_equal(d[:6], [2.0, 0.0, 2.0, 2.0, 0.0, 2.0])
    # hosts 0 and 2 of a 2x2 torus (size-2 dims are single links): 0 -> (1,0) is dim 0 only
    R = TorusRouter([2, 2])
    ll = R.link_loads(T.alltoall(np.array([0, 3]), 1.0))
    net = ll.ids < 2 * R.n_hosts * R.D
    # 0=(0,0) -> 3=(1,1): dim 0 at (0,0)+, then dim 1 at (1,0)+ ; 3 -> 0: dim 0 at (1,1)-, dim 1 at (0,1)-
    assert sorted(ll.ids[net].tolist()) == sorted([(0 * 2 + 0) * 2, (2 * 2 + 1) * 2, (3 * 2 + 0) * 2 + 1,
                                                   (1 * 2 + 1) * 2 + 1])
    assert np.all(ll.nbytes[net] == 1.0)


def test_torus_alltoall_total_equals_hop_sum():
    """Bytes on the router links = pair_bytes x sum over ordered pairs of DOR hops (a tie counts
    its n/2 hops once, split over both ways), computed pair by pair from the coordinates."""
    rng = np.random.default_rng(14)
    for dims, block, periodic in TORI:
        R = TorusRouter(dims, block, periodic)
        h = np.sort(rng.choice(R.n_hosts, min(R.n_hosts, 40), replace=False))
        c = R.coords[h]
        diff = np.abs(c[:, None, :] - c[None, :, :])
        n = np.asarray(R.dims)
        hops = np.where(np.asarray(R.wrap), np.minimum(diff, n - diff), diff).sum()
        d = R.dense_loads(T.alltoall(h, 2.5 * (len(h) - 1)))
        assert d[: 2 * R.n_hosts * R.D].sum() == pytest.approx(2.5 * hops, rel=1e-12)


def test_torus_full_fugaku_alltoall_is_analytic():
    """All 158,976 Fugaku nodes (2.5e10 pairs, never listed): every + link of the X ring (24,
    even) carries H * (1 + ... + 11 + 12/2) / 24 = 3 H pairs, the total is the hop sum per
    dimension ((H/n)^2 * sum_{a,b} dist), and the a / c meshes of size 2 carry (H/2)^2 / (H/2)
    = H/2 on their one direction per line."""
    from hpctwin.topology.presets import PRESETS
    f = PRESETS["fugaku"]
    R = TorusRouter(f["dims"], f["block"], f["periodic"], f["bandwidth"], f["terminal_bandwidth"])
    H = R.n_hosts
    assert H == 158976
    fp = R.footprint("alltoall", np.arange(H, dtype=np.int64))
    d = np.zeros(R.n_links)
    d[fp.loads.ids] = fp.loads.nbytes
    per = 1.0 / (H - 1)     # footprint: 1 byte per rank = 1/(H-1) per pair
    x_plus = d[(np.arange(H) * R.D + 0) * 2]
    np.testing.assert_allclose(x_plus, 3 * H * per, rtol=1e-12)
    total = 0.0
    for n, w in zip(R.dims, R.wrap):
        a = np.arange(n)
        dist = np.abs(a[:, None] - a[None, :])
        if w:
            dist = np.minimum(dist, n - dist)
        total += (H / n) ** 2 * dist.sum()
    assert d[: 2 * H * R.D].sum() == pytest.approx(total * per, rel=1e-12)
    a_plus = d[(np.flatnonzero(R.coords[:, 3] == 0) * R.D + 3) * 2]
    np.testing.assert_allclose(a_plus, H / 2 * per, rtol=1e-12)


def test_torus_small_alltoall_takes_the_flow_path_with_the_same_loads():
    R = TorusRouter((6, 5, 4), None, (True, False, True))
    assert R.small_alltoall_flows == 4096
    h = np.array([0, 7, 33, 90, 101], dtype=np.int64)
    t = T.alltoall(h, 1.5)
    flows = R.dense_loads(t)                     # 20 flows: routed one by one
    R._small_alltoall = 0
    analytic = R.dense_loads(t)
    assert np.allclose(flows, analytic, rtol=1e-12, atol=1e-12)
