"""The compiled / cached routing paths give the generic numpy path's link loads bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from topology import traffic as T
from topology.presets import build_preset
from topology.routing import Router, make_router


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
    from topology.routing import _pairwise_sum
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
