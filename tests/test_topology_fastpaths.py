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
