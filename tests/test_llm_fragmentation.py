"""GPU-milli packing: the fragmentation metrics on a tiny hand-made cluster, policies, the replay."""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.experiments.gpu_fragmentation import (PackingState, PodSet, _choose, expected_fragmentation, fill, fits,
                                           replay, time_average, waiting_fragmentation)


def _cluster():
    # node 0: 2 GPUs, one whole free and one with 300 milli free, 10 cores; node 1: 1 GPU with 500
    # milli free but only 1 core free; node 2: CPU-only.
    st = PackingState.from_nodes([10000, 1000, 32000], [10000, 10000, 10000], [2, 1, 0], ["A", "A", ""])
    st.gpu[0, 1] = 300
    st.gpu[1, 0] = 500
    return st


def test_waiting_fragmentation_hand_checked():
    st = _cluster()
    # free GPU capacity: 1000 + 300 + 500 milli = 1.8 GPUs
    assert waiting_fragmentation(st, []) == 0.0
    # a 400-milli pod needing 2 cores: usable only on node 0 GPU 0 -> 300 + 500 milli unusable
    w = [(2000, 1000, 1, 400, ())]
    assert waiting_fragmentation(st, w) == pytest.approx(0.8)
    # a whole-GPU pod adds nothing usable beyond node 0 GPU 0
    w.append((500, 100, 1, 1000, ()))
    assert waiting_fragmentation(st, w) == pytest.approx(0.8)
    # a 250-milli pod needing half a core can use node 0 GPU 1 and node 1 GPU 0: nothing is unusable
    w.append((500, 100, 1, 250, ()))
    assert waiting_fragmentation(st, w) == pytest.approx(0.0)
    # a model constraint the nodes do not meet makes every free GPU unusable
    assert waiting_fragmentation(st, [(0, 0, 1, 100, ("B",))]) == pytest.approx(1.8)
    # CPU-only waiting pods are ignored
    assert waiting_fragmentation(st, [(500, 100, 0, 0, ())]) == 0.0


def test_expected_fragmentation_hand_checked():
    st = _cluster()
    whole = np.array([[1000, 100, 1, 1000]])
    f = expected_fragmentation(st.cpu, st.mem, st.gpu, whole, np.array([1.0]))
    # node 0 fits a whole-GPU pod: its 300-milli GPU is the fragment; node 1 cannot (no whole GPU):
    # all its 500 milli; node 2 has no GPU
    assert f.tolist() == [300.0, 500.0, 0.0]
    shared = np.array([[500, 100, 1, 400]])
    f = expected_fragmentation(st.cpu, st.mem, st.gpu, shared, np.array([1.0]))
    # node 0: its 300-milli GPU cannot serve 400; node 1 fits (1000 >= 500 cores, 500 >= 400 milli): 0
    assert f.tolist() == [300.0, 0.0, 0.0]
    mix = expected_fragmentation(st.cpu, st.mem, st.gpu, np.vstack([whole, shared]), np.array([0.5, 0.5]))
    assert mix.tolist() == [300.0, 250.0, 0.0]


def test_policies_choose_as_documented():
    st = _cluster()
    types = np.array([[1000, 100, 1, 1000]])
    probs = np.array([1.0])
    fc = expected_fragmentation(st.cpu, st.mem, st.gpu, types, probs)
    cand = np.flatnonzero(fits(st, 500, 100, 1, 300))
    assert cand.tolist() == [0, 1]
    pick = {pol: _choose(pol, st, cand, 500, 100, 1, 300, types, probs, fc) for pol in
            ("first-fit", "best-fit", "worst-fit", "fgd")}
    assert (pick["first-fit"][0], pick["first-fit"][1].tolist()) == (0, [0])
    assert (pick["best-fit"][0], pick["best-fit"][1].tolist()) == (0, [1])     # the exact 300-milli hole
    assert (pick["worst-fit"][0], pick["worst-fit"][1].tolist()) == (0, [0])   # the whole GPU
    # FGD: taking node 0's whole GPU leaves no whole GPU there (F 300 -> 1000); node 0 GPU 1 and
    # node 1 both lower F by 300; ties go to the lower node id
    assert (pick["fgd"][0], pick["fgd"][1].tolist()) == (0, [1])
    # whole-GPU pods need whole free GPUs; CPU-only pods fit on CPU nodes
    assert np.flatnonzero(fits(st, 500, 100, 1, 1000)).tolist() == [0]
    assert np.flatnonzero(fits(st, 500, 100, 2, 1000)).tolist() == []
    assert np.flatnonzero(fits(st, 20000, 100, 0, 0)).tolist() == [2]


def _pods(rows):
    a = np.array(rows, dtype=float)
    return PodSet(a[:, 0], a[:, 1], a[:, 2].astype(int), a[:, 3].astype(int), a[:, 4].astype(int),
                  a[:, 5].astype(int), [()] * len(rows))


def test_replay_waits_and_gives_up():
    st = PackingState.from_nodes([8000], [8000], [1], ["A"])
    # (arrival, duration, cpu, mem, k, share)
    pods = _pods([(0, 100, 1000, 100, 1, 1000), (10, 50, 1000, 100, 1, 500), (20, 50, 1000, 100, 1, 600)])
    r = replay(pods, st, "best-fit", patience=100.0, types=np.array([[1000, 100, 1, 1000]]), probs=np.array([1.0]))
    # pod 1 waits for pod 0 (ends at 100 < 10 + 100); pod 2 (600 milli) cannot share the GPU with
    # pod 1 and has given up (20 + 100 < 150) when pod 1 ends
    assert r.start[:2].tolist() == [0.0, 100.0]
    assert r.placed.tolist() == [True, True, False]
    assert st.gpu.tolist() == [[1000]] and st.cpu.tolist() == [8000]        # everything released
    # allocated GPUs: 1 on [0, 100), 0.5 on [100, 150)
    assert time_average(r.t, r.alloc_gpus, (0.0, 150.0)) == pytest.approx((100 * 1 + 50 * 0.5) / 150)


def test_fill_policies_order_on_a_small_cluster():
    st = PackingState.from_nodes([64000] * 4, [10**6] * 4, [4] * 4, ["A"] * 4)
    pods = _pods([(0, 1, 1000, 100, 1, 500), (0, 1, 1000, 100, 1, 1000), (0, 1, 1000, 100, 2, 1000)])
    res = {p: fill(pods, PackingState(st.cpu.copy(), st.mem.copy(), st.gpu.copy(), st.model, st.total_gpus), p,
                   target=1.5, seed=1) for p in ("best-fit", "worst-fit", "fgd")}
    for r in res.values():
        assert r.placed_demand <= 16 + 1e-9 and r.arrived_demand >= 24
    # spreading half-GPU pods over whole GPUs strands capacity: worst-fit places the least
    assert res["worst-fit"].placed_demand <= min(res["best-fit"].placed_demand, res["fgd"].placed_demand)
