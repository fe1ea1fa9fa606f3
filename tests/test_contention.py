"""Max-min fair sharing and the network contention model (hand-solved cases, engine integration)."""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.schedulers.base import JobTable
from hpctwin.topology.contention import NetworkContentionModel, max_min_fair
from hpctwin.topology.fattree import leaf_spine_graph
from hpctwin.twin.model_api import ModelContext


def test_max_min_hand_case():
    # links of 1, 0.5 and 1 GB/s; flow 0 crosses all three, flows 1..3 use one link each
    x = max_min_fair(np.array([1.0, 0.5, 1.0]) * 1e9, link=[0, 1, 2, 0, 1, 2], flow=[0, 0, 0, 1, 2, 3],
                     weight=[1.0] * 6, n_flows=4)
    np.testing.assert_allclose(x / 1e9, [0.25, 0.75, 0.25, 0.75])


def test_max_min_caps_and_weights():
    # one link of 10; flow 0 capped at 2, flow 1 free: flow 1 takes the rest
    np.testing.assert_allclose(max_min_fair([10.0], [0, 0], [0, 1], [1.0, 1.0], 2, cap=[2.0, np.inf]), [2.0, 8.0])
    # weighted: flow 0 puts 3 units per unit rate on the link, flow 1 one: equal rates 10 / 4
    np.testing.assert_allclose(max_min_fair([10.0], [0, 0], [0, 1], [3.0, 1.0], 2), [2.5, 2.5])
    # a flow without links is only bounded by its cap
    np.testing.assert_allclose(max_min_fair([1.0], [0], [0], [1.0], 2, cap=[np.inf, 4.0]), [1.0, 4.0])
    with pytest.raises(ValueError):
        max_min_fair([1.0], [0], [0], [-1.0], 1)


def _jobs(n, procs, columns):
    z = np.zeros(n)
    return JobTable(job_id=np.arange(1, n + 1), submit=z, procs=np.asarray(procs), estimate=z + 100,
                    requested_time=z + 100, user=z - 1, group=z - 1, queue=z - 1, partition=z - 1,
                    columns=columns)


def _two_job_model(frac=0.5):
    # 2 leaves x 2 hosts, one spine, 1 GB/s everywhere. Job 0 on hosts {0, 2}, job 1 on {1, 3}:
    # each ring of 2 sends 1 GB/s host-to-host across the spine; both share leaf0->spine etc.
    G = leaf_spine_graph(4, hosts_per_leaf=2, spines=1, terminal_bandwidth=1e9)
    jobs = _jobs(2, [2, 2], {"comm_fraction": np.array([frac, frac]), "comm_kind": np.array(["ring", "ring"], dtype=object)})
    m = NetworkContentionModel(graph=G)
    m.bind(ModelContext(n_nodes=4, jobs=jobs, runtime=np.array([100.0, 100.0]), seed=0))
    return m


def test_model_hand_case():
    m = _two_job_model()
    assert m.on_start(0.0, 0, np.array([0, 2])) is None          # alone: full speed
    ch = m.on_start(10.0, 1, np.array([1, 3]))
    # each gets half of the shared 1 GB/s links: slowdown 2, stretch 0.5 + 0.5 * 2 = 1.5
    assert ch == {0: pytest.approx(2 / 3), 1: pytest.approx(2 / 3)}
    for j in (0, 1):
        m.on_rate_change(10.0, j, 2 / 3)
    ch = m.on_finish(20.0, 0)
    assert ch == {1: pytest.approx(1.0)}
    m.on_rate_change(20.0, 1, 1.0)
    m.on_finish(30.0, 1)
    cols = m.job_columns()
    # job 0: 10 s at factor 1 + 10 s at 2/3 -> 16.67 s of isolated progress in 20 s
    np.testing.assert_allclose(cols["contention_stretch"], [20 / (10 + 10 * 2 / 3)] * 2)
    assert cols["groups_spanned"].tolist() == [2, 2]
    # global bytes: 2 GB/s crosses leaves during comm phases (f = 0.5) for 16.67 s of progress
    np.testing.assert_allclose(cols["global_bytes"], [0.5 * (10 + 10 * 2 / 3) * 2e9] * 2)
    s = m.summary()
    assert s["network_total_global_bytes"] == pytest.approx(2 * 0.5 * (10 + 10 * 2 / 3) * 2e9)
    assert s["network_recomputations"] == 2
    ts = m.timeseries(np.array([0.0, 10.0, 20.0]), 10.0)
    # global rate: 1 GB/s (job 0: f * 2 GB/s), then 2 x (2/3) GB/s, then 1 GB/s (job 1)
    np.testing.assert_allclose(ts["network_global_bytes_rate"][0], [1e9, 4e9 / 3, 1e9])


def test_non_communicating_jobs_are_untouched():
    m = _two_job_model(frac=0.0)
    assert m.on_start(0.0, 0, np.array([0, 2])) is None
    assert m.on_start(0.0, 1, np.array([1, 3])) is None
    m.on_finish(5.0, 0)
    assert m.job_columns()["contention_stretch"][0] == 1.0
    assert m.job_columns()["global_bytes"][0] == 0.0


def test_default_distribution_is_seeded_and_documented():
    G = leaf_spine_graph(8, hosts_per_leaf=2, spines=1)
    jobs = _jobs(500, np.full(500, 2), {})
    a = NetworkContentionModel(graph=G)
    a.bind(ModelContext(n_nodes=8, jobs=jobs, runtime=np.ones(500), seed=3))
    b = NetworkContentionModel(graph=G)
    b.bind(ModelContext(n_nodes=8, jobs=jobs, runtime=np.ones(500), seed=3))
    assert np.array_equal(a.frac, b.frac) and list(a.kind) == list(b.kind)
    assert 0.2 < a.frac.mean() < 0.3 and set(a.kind) <= {"allreduce", "ring", "alltoall"}
    assert "assumption" in a.summary()["network_defaults"]


def test_bad_columns():
    G = leaf_spine_graph(4, hosts_per_leaf=2, spines=1)
    for cols, msg in (({"comm_fraction": np.array([1.5])}, "comm_fraction"),
                      ({"comm_kind": np.array(["gossip"], dtype=object)}, "gossip")):
        m = NetworkContentionModel(graph=G)
        with pytest.raises(ValueError, match=msg):
            m.bind(ModelContext(n_nodes=4, jobs=_jobs(1, [2], cols), runtime=np.ones(1)))
    m = NetworkContentionModel(graph=G)
    with pytest.raises(ValueError, match="4 hosts but the machine has 8"):
        m.bind(ModelContext(n_nodes=8, jobs=_jobs(1, [2], {}), runtime=np.ones(1)))


def test_engine_integration_stretch_matches_runtimes():
    """Through the real engine on a tapered fat-tree (Lassen): (end - start) / runtime equals the
    model's contention_stretch. (A non-blocking fabric such as `generic` never contends.)"""
    from hpctwin.twin.run import RunConfig, run
    from hpctwin.twin.workload import Workload
    n = 40
    rng = np.random.default_rng(5)
    wl = Workload.from_arrays(
        "net-test", submit=np.sort(rng.uniform(0, 2000, n)), runtime=rng.uniform(100, 1000, n),
        procs=rng.integers(1, 300, n), requested_time=np.full(n, 5000.0),
        columns={"comm_fraction": np.full(n, 0.6), "comm_kind": np.array(["alltoall"] * n, dtype=object)})
    res = run(RunConfig(workload="net-test", system="lassen", network=True, placement="spread", seed=1), workload=wl)
    df = res.jobs
    ratio = (df["end"] - df["start"]) / wl.runtime
    np.testing.assert_allclose(ratio, df["contention_stretch"], rtol=1e-9)
    assert (df["contention_stretch"] > 1.0 + 1e-9).any()
    assert (df["contention_stretch"] >= 1.0 - 1e-12).all()
    assert res.summary["network_total_global_bytes"] == pytest.approx(df["global_bytes"].sum())
    assert "network_global_bytes_rate" in res.timeseries


def _mmf_dense_reference(capacity, link, flow, weight, n_flows, cap=None, rtol=1e-12):
    """The dense numpy progressive filling the compiled solver replaced (kept as a reference)."""
    capacity = np.asarray(capacity, dtype=np.float64)
    cap = np.full(n_flows, np.inf) if cap is None else np.asarray(cap, dtype=np.float64).copy()
    W = np.zeros((len(capacity), n_flows))
    np.add.at(W, (np.asarray(link), np.asarray(flow)), np.asarray(weight, dtype=np.float64))
    x = np.zeros(n_flows)
    active = np.ones(n_flows, dtype=bool)
    rem = capacity.copy()
    sat_tol = rtol * np.maximum(capacity, 1.0)
    cap_tol = rtol * np.maximum(np.where(np.isfinite(cap), np.abs(cap), 1.0), 1.0)
    while active.any():
        wsum = W @ active
        used = wsum > 0
        t = min(np.min(rem[used] / wsum[used]) if used.any() else np.inf, np.min(cap[active] - x[active]))
        if not np.isfinite(t):
            x[active] = np.inf
            break
        t = max(t, 0.0)
        x[active] += t
        rem -= t * wsum
        sat = used & (rem <= sat_tol)
        rem[sat] = 0.0
        frozen = active & (x >= cap - cap_tol)
        if sat.any():
            frozen |= active & (W[sat].sum(axis=0) > 0)
        if not frozen.any():
            l = np.flatnonzero(used)[np.argmin(rem[used] / wsum[used])]
            frozen = active & (W[l] > 0)
        active &= ~frozen
    return x


def test_max_min_matches_dense_reference_on_random_instances():
    rng = np.random.default_rng(11)
    for _ in range(500):
        L, n = int(rng.integers(1, 30)), int(rng.integers(1, 20))
        ent = [(l, f, rng.uniform(0.1, 3.0) if rng.random() > 0.05 else 0.0)
               for f in range(n) for l in rng.choice(L, int(rng.integers(1, min(L, 6) + 1)), replace=False)]
        link, flow, w = (np.array([e[i] for e in ent]) for i in range(3))
        capacity = rng.uniform(0.5, 5.0, L) * rng.choice([1.0, 1e9])
        cap = np.where(rng.random(n) < 0.3, np.inf, rng.uniform(0.1, 2.0, n))
        a = _mmf_dense_reference(capacity, link.astype(int), flow.astype(int), w, n, cap)
        b = max_min_fair(capacity, link.astype(int), flow.astype(int), w, n, cap)
        np.testing.assert_allclose(b, a, rtol=1e-12)


def test_max_min_is_separable_over_components():
    """Max-min fairness decomposes over connected components of the flow-link graph: solving
    two independent problems together gives each one's rates (up to round-off)."""
    rng = np.random.default_rng(2)
    for _ in range(100):
        parts = []
        for _k in range(2):
            L, n = int(rng.integers(1, 10)), int(rng.integers(1, 8))
            ent = [(l, f) for f in range(n) for l in rng.choice(L, int(rng.integers(1, L + 1)), replace=False)]
            parts.append((rng.uniform(1, 5, L), np.array([e[0] for e in ent]), np.array([e[1] for e in ent]),
                          rng.uniform(0.2, 2, len(ent)), n, rng.uniform(0.5, 3, n)))
        (c0, l0, f0, w0, n0, k0), (c1, l1, f1, w1, n1, k1) = parts
        joint = max_min_fair(np.concatenate([c0, c1]), np.concatenate([l0, l1 + len(c0)]),
                             np.concatenate([f0, f1 + n0]), np.concatenate([w0, w1]), n0 + n1,
                             np.concatenate([k0, k1]))
        np.testing.assert_allclose(joint, np.concatenate([max_min_fair(c0, l0, f0, w0, n0, k0),
                                                          max_min_fair(c1, l1, f1, w1, n1, k1)]), rtol=1e-12)


def test_model_rates_match_reference_recompute():
    """The compiled recompute gives the factors of the documented rule, computed here directly:
    weighted max-min over the overloaded links with caps x_iso, factor 1 / ((1-f) + f x_iso / x)."""
    from hpctwin.topology.presets import build_preset
    G = build_preset("adastra")
    rng = np.random.default_rng(4)
    n = 60
    kinds = rng.choice(["ring", "allreduce", "alltoall"], n).astype(object)
    jobs = _jobs(n, np.full(n, 8), {"comm_fraction": rng.uniform(0.1, 0.9, n), "comm_kind": kinds})
    m = NetworkContentionModel(graph=G)
    m.bind(ModelContext(n_nodes=384, jobs=jobs, runtime=np.full(n, 100.0), seed=0))
    running = []
    for j in range(n):
        if running and rng.random() < 0.4:
            m.on_finish(float(j), running.pop(int(rng.integers(len(running)))))
        nodes = np.sort(rng.choice(384, int(rng.integers(2, 40)), replace=False))
        m.on_start(float(j), j, nodes)
        running.append(j)
        # reference: the problem built from the model's state with numpy
        bw = m.router.bandwidth
        over = m.load_full > bw * (1.0 + 1e-9)
        js = [k for k in m.links if over[m.links[k]].any()]
        if not js:
            assert all(m.f_ours[k] == 1.0 for k in m.links)
            continue
        lk = np.concatenate([m.links[k][over[m.links[k]]] for k in js])
        fl = np.concatenate([np.full(int(over[m.links[k]].sum()), i) for i, k in enumerate(js)])
        wt = np.concatenate([m.demand[k][over[m.links[k]]] for k in js])
        uniq, inv = np.unique(lk, return_inverse=True)
        cap = m.x_iso[js]
        x = _mmf_dense_reference(bw[uniq], inv, fl, wt, len(js), cap)
        f = m.frac[js]
        np.testing.assert_allclose(m.f_ours[js], 1.0 / ((1.0 - f) + f * cap / x), rtol=1e-9)
        others = [k for k in m.links if k not in js]
        assert all(m.f_ours[k] == 1.0 for k in others)


def test_job_load_kernels_hand_case():
    """A job with 1 and 2 bytes per round on links 0 and 2 at 3 rounds/s: demand 3 and 6 B/s;
    link 2 (3 B/s) limits it to x_iso = 0.5; its links then carry 1.5 and 3 B/s (link 2 exactly
    full: not overloaded). A second such job overloads link 2; removing it reports that."""
    from hpctwin.topology.contention import _add_job_loads, _remove_job_loads
    bw = np.array([6.0, 100.0, 3.0])
    load = np.zeros(3)
    ids = np.array([0, 2])
    demand, x_iso, over = _add_job_loads(ids, np.array([1.0, 2.0]), 3.0, bw, load)
    assert demand.tolist() == [3.0, 6.0] and x_iso == 0.5 and not over
    assert load.tolist() == [1.5, 0.0, 3.0]
    _, _, over = _add_job_loads(ids, np.array([1.0, 2.0]), 3.0, bw, load)
    assert over and load.tolist() == [3.0, 0.0, 6.0]
    assert _remove_job_loads(ids, demand, x_iso, bw, load)
    assert load.tolist() == [1.5, 0.0, 3.0]
    assert not _remove_job_loads(ids, demand, x_iso, bw, load)
    assert load.tolist() == [0.0, 0.0, 0.0]
