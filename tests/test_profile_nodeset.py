"""The node-set form of the availability profile (Slurm's backfill ``node_space`` map):
`schedulers.profile_nodeset.NodeSpaceMap` (Python ints) and its compiled form
`schedulers.profile_nodeset_kernels` (uint64 words), hand-derived cases, agreement of the two
forms, and agreement with the count form (`AvailabilityProfile`)."""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.schedulers import profile_nodeset_kernels as K
from hpctwin.schedulers.profile import AvailabilityProfile, NodeSpaceMap


def _hand_map() -> NodeSpaceMap:
    """8 nodes, map [0, 100) s, 10 s resolution, three reservations (see the test below)."""
    m = NodeSpaceMap(0.0, 100.0, 10.0, 0xFF)
    m.add_reservation(20.0, 50.0, 0b0011)
    m.add_reservation(5.0, 8.0, 0b0100)        # shorter than a slot: lasts 10 s, to 15
    m.add_reservation(90.0, 130.0, 0x80)       # clipped to the window end (100)
    m.add_reservation(100.0, 120.0, 0x01)      # starts at the window end: no change
    return m


def test_add_reservation_hand_derived():
    m = _hand_map()
    assert m.begins == [0.0, 5.0, 15.0, 20.0, 50.0, 90.0]
    assert m.avail == [0xFF, 0xFB, 0xFF, 0xFC, 0xFF, 0x7F]
    assert m.end_of(5) == 100.0 and m.end_of(0) == 5.0
    assert m.avail_at(0.0) == 0xFF and m.avail_at(14.9) == 0xFB and m.avail_at(20.0) == 0xFC
    # a reservation starting before the origin counts from the origin
    m.add_reservation(-30.0, 3.0, 0x10)        # [0, 10): one slot from the origin
    assert m.begins[:4] == [0.0, 5.0, 10.0, 15.0]
    assert m.avail[:4] == [0xEF, 0xEB, 0xFB, 0xFF]


def test_walk_hand_derived():
    m = _hand_map()
    # records overlapping [0, 25]: [0,5) ff, [5,15) fb, [15,20) ff, [20,50) fc -> f8; the first
    # record after which nodes of the set come back is the one at 15 (node 2)
    assert m.walk(0xFF, 0.0, 25.0) == (0xF8, 3, 15.0)
    # stop at that record when it begins before the bound
    assert m.walk(0xFF, 0.0, 25.0, stop_below=20.0) == (0xFB, 1, 15.0)
    # inclusive end: a record beginning exactly at the end overlaps
    assert m.walk(0x0F, 15.0, 20.0) == (0x0C, 3, 50.0)
    # a set the map never takes from: no later candidate
    assert m.walk(0x60, 0.0, 99.0) == (0x60, 5, 0.0)


def test_fits_and_first_reserved_hand_derived():
    m = _hand_map()
    assert not m.fits(20.0, 50.0, 0x03)
    assert m.fits(50.0, 90.0, 0x03)
    assert m.fits(15.0, 20.0, 0x04)
    assert not m.fits(14.0, 20.0, 0x04)        # [5, 15) overlaps [14, 20)
    assert m.first_reserved(0x0F) == ([5.0, 20.0], [1, 2])
    assert m.first_reserved(0x60) == ([], [])


def test_bad_resolution_and_split_before_origin():
    with pytest.raises(ValueError, match="resolution must be > 0 s, got 0"):
        NodeSpaceMap(0.0, 10.0, 0.0, 1)
    m = NodeSpaceMap(10.0, 100.0, 1.0, 1)
    with pytest.raises(ValueError, match="before its origin 10.0 s at 5.0 s"):
        m.split(5.0)


# ---------------------------------------------------------------------------- compiled form
def _words(x: int, W: int) -> np.ndarray:
    return np.array([(x >> (64 * w)) & ((1 << 64) - 1) for w in range(W)], dtype=np.uint64)


def _int(words) -> int:
    return sum(int(v) << (64 * w) for w, v in enumerate(words))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_compiled_form_agrees_with_python_form(seed):
    rng = np.random.default_rng(seed)
    nn, W = 130, 3                             # three words, the last one partial
    full = (1 << nn) - 1
    res, begin0, window_end = 60.0, 600.0, 6000.0
    m = NodeSpaceMap(begin0, window_end, res, full)
    cap = 2 * 40 + 2
    ns_b = np.empty(cap)
    ns_av = np.empty((cap, W), dtype=np.uint64)
    nb = K.ns_init(ns_b, ns_av, begin0)
    for _ in range(40):
        st = float(np.floor(rng.uniform(0, 7000) / res) * res)
        en = float(np.floor((st + rng.uniform(0, 2000)) / res) * res)
        nodes = int(sum(1 << int(i) for i in rng.choice(nn, rng.integers(1, 20), replace=False)))
        m.add_reservation(st, en, nodes)
        nb = K.ns_add_resv(st, en, _words(nodes, W), ns_b, ns_av, nb, begin0, res, window_end)
        assert list(ns_b[:nb]) == m.begins
        assert [_int(ns_av[r] & _words(full, W)) for r in range(nb)] == m.avail
    acc = np.empty(W, dtype=np.uint64)
    for _ in range(60):
        pm = int(sum(1 << int(i) for i in rng.choice(nn, rng.integers(1, nn), replace=False)))
        st = float(rng.uniform(begin0, window_end))
        en = st + float(rng.uniform(0, 3000))
        stop = float(rng.choice([-np.inf, st + 500.0]))
        r, later = K.ns_walk(ns_b, ns_av, nb, _words(pm, W), st, en, stop, acc)
        assert (_int(acc), r, later) == m.walk(pm, st, en, stop)
        assert K.ns_fits(ns_b, ns_av, nb, st, en, _words(pm, W)) == m.fits(st, en, pm)
        rb_t = np.empty(cap)
        rb_c = np.empty(cap, dtype=np.int64)
        k = K.ns_first_reserved(ns_b, ns_av, nb, _words(pm, W), rb_t, rb_c,
                                np.empty(W, dtype=np.uint64))
        t_py, c_py = m.first_reserved(pm)
        assert list(rb_t[:k]) == t_py and list(rb_c[:k]) == np.cumsum(c_py).tolist()


def test_slurm_kernels_use_the_profile_kernels():
    """One free-capacity module: the Slurm kernels call the profile's node-set kernels."""
    from hpctwin.schedulers import slurm_kernels
    for name in ("ns_init", "ns_add_resv", "ns_walk", "ns_fits", "ns_first_reserved", "_pc64"):
        assert getattr(slurm_kernels, name) is getattr(K, name)


# ---------------------------------------------------------------------------- the count form
@pytest.mark.parametrize("seed", [0, 7])
def test_popcount_is_the_count_profile(seed):
    """At 1 s resolution with integer times inside the window, the node-set form's popcount is
    the count form of the same reservations."""
    rng = np.random.default_rng(seed)
    nn = 70
    m = NodeSpaceMap(0.0, 1e9, 1.0, (1 << nn) - 1)
    prof = AvailabilityProfile(0.0, nn)
    for _ in range(60):
        st = float(rng.integers(0, 5000))
        d = float(rng.integers(1, 1500))
        free_nodes = [i for i in range(nn) if all((m.avail[r] >> i) & 1 for r in range(len(m))
                                                   if m.begins[r] < st + d and m.end_of(r) > st)]
        if not free_nodes:
            continue
        k = int(rng.integers(1, len(free_nodes) + 1))
        nodes = int(sum(1 << int(i) for i in rng.choice(free_nodes, k, replace=False)))
        assert m.fits(st, st + d, nodes) and prof.fits(st, d, k)
        m.add_reservation(st, st + d, nodes)
        prof.reserve(st, d, k)
    for t in sorted(set(m.begins) | set(prof.times.tolist())):
        assert m.avail_at(t).bit_count() == prof.free_at(t), t
