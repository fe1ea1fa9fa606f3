"""Placers: exact choices on hand-made free masks, invariants on random ones, range helpers."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpctwin.topology.placement import (PLACERS, compact_ranges, free_runs, groups_spanned, make_placer,
                                parse_ranges)


class _Jobs:
    def __init__(self, recorded):
        self.columns = {"recorded_nodes": recorded}


def _placer(name, n, groups=None, seed=0, jobs=None):
    p = make_placer(name)
    p.bind(n, None if groups is None else np.asarray(groups), np.random.default_rng(seed), jobs)
    return p


MASK = np.array([1, 1, 0, 1, 1, 1, 0, 1, 0, 1, 1, 1, 1], bool)   # runs: 0-1, 3-5, 7, 9-12


def test_first_fit():
    assert _placer("first-fit", 13).place(0, 4, MASK).tolist() == [0, 1, 3, 4]


def test_contiguous_best_fit():
    p = _placer("contiguous", 13)
    assert p.place(0, 2, MASK).tolist() == [0, 1]           # the 2-run fits exactly
    assert p.place(0, 3, MASK).tolist() == [3, 4, 5]        # shortest run that fits (3 < 4)
    assert p.place(0, 4, MASK).tolist() == [9, 10, 11, 12]
    # no run of 6: longest run whole (9-12), then the best-fitting run for the remaining 2 (0-1)
    assert p.place(0, 6, MASK).tolist() == [0, 1, 9, 10, 11, 12]
    starts, lens = free_runs(MASK)
    assert starts.tolist() == [0, 3, 7, 9] and lens.tolist() == [2, 3, 1, 4]


def test_group_packed():
    groups = np.repeat([0, 1, 2, 3], 4)                     # 4 groups of 4 nodes
    free = np.ones(16, bool)
    free[[0, 1, 4]] = False                                 # free per group: 2, 3, 4, 4
    p = _placer("group-packed", 16, groups)
    assert p.place(0, 2, free).tolist() == [2, 3]           # best fit: group 0 has exactly 2
    assert p.place(0, 3, free).tolist() == [5, 6, 7]        # group 1 (3 free) beats the full groups
    assert p.place(0, 4, free).tolist() == [8, 9, 10, 11]   # a full group, lowest id among ties
    # 6 nodes: fewest groups = 2: the fullest group (2) whole, plus best fit for 2 more (group 0)
    assert p.place(0, 6, free).tolist() == [2, 3, 8, 9, 10, 11]
    assert groups_spanned(p.place(0, 11, free), groups) == 3
    # without a group map: contiguous
    q = _placer("group-packed", 13)
    assert q.place(0, 3, MASK).tolist() == [3, 4, 5]


def test_spread_is_seeded():
    a = _placer("spread", 13, seed=7).place(0, 5, MASK)
    b = _placer("spread", 13, seed=7).place(0, 5, MASK)
    c = _placer("spread", 13, seed=8).place(0, 5, MASK)
    assert a.tolist() == b.tolist() and a.tolist() != c.tolist()


def test_recorded_and_fallbacks():
    rec = np.empty(4, dtype=object)
    rec[:] = [np.array([9, 3]), np.array([2, 3]), None, np.array([10, 11, 12])]
    p = _placer("recorded", 13, jobs=_Jobs(rec))
    assert p.place(0, 2, MASK).tolist() == [3, 9]
    assert p.place(1, 2, MASK).tolist() == [0, 1]           # node 2 busy: first-fit
    assert p.place(2, 2, MASK).tolist() == [0, 1]           # nothing recorded
    assert p.place(3, 2, MASK).tolist() == [0, 1]           # recorded a different size
    assert p.fallbacks == 3 and p.used == 1
    assert p.describe() == {"name": "recorded", "recorded_used": 1, "fallbacks": 3}
    q = _placer("recorded", 13, jobs=None)
    assert q.place(0, 1, MASK).tolist() == [0] and q.fallbacks == 1


@pytest.mark.parametrize("name", PLACERS)
def test_not_enough_free(name):
    p = _placer(name, 13, np.arange(13) // 4, jobs=_Jobs(np.full(1, None, dtype=object)))
    with pytest.raises(ValueError, match="needs 11 nodes but only 10 are free"):
        p.place(0, 11, MASK)


def test_unknown_placer():
    with pytest.raises(ValueError, match="unknown placement 'best'"):
        make_placer("best")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=64), st.integers(1, 64), st.integers(1, 9),
       st.sampled_from(PLACERS))
def test_placer_invariants(mask, procs, gsize, name):
    mask = np.array(mask, bool)
    n = len(mask)
    groups = np.arange(n) // gsize
    p = _placer(name, n, groups, jobs=_Jobs(np.full(1, None, dtype=object)))
    if procs > mask.sum():
        with pytest.raises(ValueError):
            p.place(0, procs, mask)
        return
    ids = p.place(0, procs, mask)
    assert ids.dtype == np.int64 and len(ids) == procs
    assert np.all(np.diff(ids) > 0) and mask[ids].all()
    if name == "group-packed":   # fewest groups possible
        cnt = np.sort(np.bincount(groups[mask], minlength=groups.max() + 1))[::-1]
        assert groups_spanned(ids, groups) == int(np.searchsorted(np.cumsum(cnt), procs) + 1)


def test_ranges():
    assert compact_ranges([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"
    assert compact_ranges([]) == "" and compact_ranges([5]) == "5"
    assert parse_ranges("0-3,8,10-11").tolist() == [0, 1, 2, 3, 8, 10, 11]
    assert parse_ranges("").tolist() == []
    for bad in ("3-1", "a", "1,,2", "-4"):
        with pytest.raises(ValueError, match="bad node range"):
            parse_ranges(bad)
    rng = np.random.default_rng(0)
    ids = np.unique(rng.integers(0, 500, 200))
    assert parse_ranges(compact_ranges(ids)).tolist() == ids.tolist()
    assert groups_spanned([0, 5, 9], np.arange(12) // 4) == 3 and groups_spanned([1], None) == 1


def test_fewest_buckets_hand_checked():
    from hpctwin.topology.placement import fewest_buckets
    cap = np.array([5, 3, 0, 4])
    assert fewest_buckets(cap, 8).tolist() == [5, 3, 0, 0]   # the 5 whole, then 3 from the best fit (3)
    assert fewest_buckets(cap, 9).tolist() == [5, 0, 0, 4]   # the 5 whole, then 4 from the only fit (4)
    assert fewest_buckets(cap, 2).tolist() == [0, 2, 0, 0]   # no whole bucket: the smallest that holds 2
    assert fewest_buckets(cap, 12).tolist() == [5, 3, 0, 4]
