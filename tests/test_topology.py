"""Topology builders, presets and routing/link loads (hand-checked cases and invariants)."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from hpctwin.topology import traffic as T
from hpctwin.topology.dragonfly import TopologyError, dragonfly_graph, dragonfly_plus_graph
from hpctwin.topology.fattree import fat_tree_graph, leaf_spine_graph
from hpctwin.topology.presets import PRESETS, build_network, network_node_group, node_groups
from hpctwin.topology.routing import TorusRouter, make_router
from hpctwin.topology.torus import torus_graph


def _switch_graph(G):
    return G.subgraph([n for n, d in G.nodes(data=True) if d["kind"] == "switch"])


# ---------------------------------------------------------------------- builders
@pytest.mark.parametrize("arrangement", ["absolute", "relative", "circulant"])
def test_balanced_dragonfly(arrangement):
    p, a, h = 2, 4, 2
    g = a * h + 1
    G = dragonfly_graph(p, a, h, g, arrangement=arrangement)
    S = _switch_graph(G)
    glob = [(u, v) for u, v, d in G.edges(data=True) if d["kind"] == "global"]
    per_router = {s: 0 for s in S}
    pairs = {}
    for u, v in glob:
        per_router[u] += 1
        per_router[v] += 1
        key = tuple(sorted((u[1], v[1])))
        pairs[key] = pairs.get(key, 0) + 1
    assert set(per_router.values()) == {h}
    assert len(pairs) == g * (g - 1) // 2 and set(pairs.values()) == {1}
    assert nx.diameter(S) == 3
    assert G.number_of_nodes() == g * a * (p + 1)
    assert all(G.nodes[i]["kind"] == "host" and G.nodes[i]["group"] == i // (p * a) for i in range(g * a * p))


def test_arrangements_differ():
    ends = {}
    for arr in ("absolute", "relative", "circulant"):
        G = dragonfly_graph(1, 2, 2, 5, arrangement=arr)
        ends[arr] = sorted(tuple(sorted((u, v))) for u, v, d in G.edges(data=True) if d["kind"] == "global")
    assert ends["absolute"] != ends["relative"] != ends["circulant"]


def test_frontier_preset_shape():
    G = build_network({"preset": "frontier"}, 9408)
    t = G.graph["topology"]
    assert (t["hosts"], t["switches"]) == (9408, 2368)
    kinds = {}
    for u, v, d in G.edges(data=True):
        kinds[d["kind"]] = kinds.get(d["kind"], 0) + d["links"]
    assert kinds == {"terminal": 9408, "local": 74 * 32 * 31 // 2, "global": 74 * 73 // 2 * 4}
    pair = {}
    per_sw = {}
    for u, v, d in G.edges(data=True):
        if d["kind"] == "global":
            k = tuple(sorted((u[1], v[1])))
            pair[k] = pair.get(k, 0) + d["links"]
            per_sw[u] = per_sw.get(u, 0) + d["links"]
            per_sw[v] = per_sw.get(v, 0) + d["links"]
    assert set(pair.values()) == {4} and len(pair) == 74 * 73 // 2
    assert max(per_sw.values()) <= 17
    ng = network_node_group(G)
    assert ng[0] == 0 and ng[127] == 0 and ng[128] == 1 and ng[-1] == 73
    assert np.bincount(ng)[-1] == 9408 - 73 * 128  # the last group is half full (64 nodes)
    assert G.edges[0, ("sw", 0, 0)]["bandwidth"] == 100e9


def test_dragonfly_plus_and_fat_tree_shapes():
    G = dragonfly_plus_graph(3, 2, 2, 3, 1)
    assert G.graph["topology"]["hosts"] == 18
    assert sum(1 for *_, d in G.edges(data=True) if d["kind"] == "local") == 3 * 2 * 2
    assert sum(d["links"] for *_, d in G.edges(data=True) if d["kind"] == "global") == 3
    F = fat_tree_graph(4)
    assert F.graph["topology"]["hosts"] == 16 and F.graph["topology"]["switches"] == 20
    assert sum(1 for *_, d in F.edges(data=True) if d["kind"] == "global") == 16
    assert nx.diameter(_switch_graph(F)) == 4
    Ft = fat_tree_graph(4, hosts_per_edge=4)
    assert Ft.graph["topology"]["hosts"] == 32 and Ft.graph["topology"]["taper"] == 2.0
    L = leaf_spine_graph(70, hosts_per_leaf=32)
    assert L.graph["topology"]["leaves"] == 3 and L.graph["topology"]["hosts"] == 70


def test_torus_shape():
    G = torus_graph([4, 3, 2], block=[2, 3, 1])
    kinds = {}
    for *_, d in G.edges(data=True):
        kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
    # ring of 4: 24 links, ring of 3: 24, size 2: 12; terminal: 24
    assert kinds["terminal"] == 24 and kinds["local"] + kinds["global"] == 24 + 24 + 12
    assert G.nodes[0]["coords"] == (0, 0, 0) and G.nodes[23]["coords"] == (3, 2, 1)
    assert network_node_group(G).tolist() == node_groups({"kind": "torus", "dims": [4, 3, 2], "block": [2, 3, 1]}, 24).tolist()
    assert len(np.unique(network_node_group(G))) == 4


@pytest.mark.slow
def test_fugaku_builds():
    G = build_network({"preset": "fugaku"}, 158976)
    assert G.graph["topology"]["hosts"] == 158976
    assert G.number_of_nodes() == 2 * 158976


def test_bad_parameters():
    with pytest.raises(TopologyError, match="at most 9 groups fit"):
        dragonfly_graph(1, 4, 2, 10)
    with pytest.raises(TopologyError, match="cable"):
        dragonfly_graph(1, 4, 2, 9, links_per_pair=2)
    with pytest.raises(TopologyError, match="even k"):
        fat_tree_graph(5)
    with pytest.raises(TopologyError, match="dimension of 0"):
        torus_graph([4, 0, 2])
    with pytest.raises(TopologyError, match="arrangement"):
        dragonfly_graph(1, 2, 2, 5, arrangement="zigzag")
    with pytest.raises(TopologyError, match=r"myfile.toml \[network\]: nodes = 9000 disagrees.*set g = 71"):
        build_network({"preset": "frontier"}, 9000, source="myfile.toml [network]")
    with pytest.raises(TopologyError, match="unknown key 'groups'"):
        build_network({"preset": "frontier", "groups": 3}, 9408)
    with pytest.raises(TopologyError, match="unknown preset"):
        build_network({"preset": "summit"}, 10)
    with pytest.raises(TopologyError, match="torus shape"):
        build_network({"preset": "fugaku"}, 1000)
    with pytest.raises(TopologyError, match="fewer than nodes"):
        fat_tree_graph(4, pods=2, nodes=9)


def test_every_system_file_builds():
    from hpctwin.twin.system import builtin_systems, load_system
    for name in builtin_systems():
        s = load_system(name)
        if not s.network or s.network.get("preset") == "fugaku":
            continue
        G = build_network(s.network, s.nodes, source=s.path)
        assert G.graph["topology"]["hosts"] == s.nodes
        assert (network_node_group(G) == node_groups(s.network, s.nodes)).all()


def test_presets_are_complete():
    from hpctwin.topology.presets import KIND_PARAMS
    for name, p in PRESETS.items():
        assert p["description"]
        extra = set(p) - set(KIND_PARAMS[p["kind"]]) - {"kind", "description", "nodes"}
        assert not extra, (name, extra)


# ---------------------------------------------------------------------- routing: hand-checked
def _loads_by_label(R, G, traffic, routing="minimal"):
    ll = R.link_loads(traffic, routing)
    return {R.links.endpoints(int(i)): float(b) for i, b in zip(ll.ids, ll.nbytes)}


def test_dragonfly_minimal_and_valiant_hand_case():
    # p=1, a=2, h=1, g=3, absolute: cables (g0,r0)-(g1,r0), (g0,r1)-(g2,r0), (g1,r1)-(g2,r1)
    G = dragonfly_graph(1, 2, 1, 3)
    R = make_router(G)
    tr = T.from_schedule(np.arange(6), [([1], [2], [1.0])])   # host 1 = (g0,r1) -> host 2 = (g1,r0)
    got = _loads_by_label(R, G, tr)
    assert got == {(1, ("sw", 0, 1)): 1.0, (("sw", 0, 1), ("sw", 0, 0)): 1.0,
                   (("sw", 0, 0), ("sw", 1, 0)): 1.0, (("sw", 1, 0), 2): 1.0}
    got = _loads_by_label(R, G, tr, "valiant")
    assert got == {(1, ("sw", 0, 1)): 1.0, (("sw", 0, 1), ("sw", 2, 0)): 1.0, (("sw", 2, 0), ("sw", 2, 1)): 1.0,
                   (("sw", 2, 1), ("sw", 1, 1)): 1.0, (("sw", 1, 1), ("sw", 1, 0)): 1.0, (("sw", 1, 0), 2): 1.0}


def test_fat_tree_ecmp_hand_case():
    G = fat_tree_graph(4)
    R = make_router(G)
    tr = T.from_schedule(np.arange(16), [([0], [4], [1.0])])  # pod 0 edge 0 -> pod 1 edge 0
    got = _loads_by_label(R, G, tr)
    for j in range(2):
        assert got[(("edge", 0, 0), ("agg", 0, j))] == 0.5
        assert got[(("agg", 1, j), ("edge", 1, 0))] == 0.5
        for c in range(2):
            assert got[(("agg", 0, j), ("core", j, c))] == 0.25
            assert got[(("core", j, c), ("agg", 1, j))] == 0.25
    assert len(got) == 2 + 2 + 4 + 4 + 2
    # same edge switch: terminal links only
    assert len(R.link_loads(T.from_schedule(np.arange(16), [([0], [1], [1.0])])).ids) == 2


def test_torus_dor_hand_cases():
    R = TorusRouter([4])
    ll = R.dense_loads(T.from_schedule(np.arange(4), [([0], [2], [1.0])]))
    plus = ll[0:8:2]
    minus = ll[1:8:2]
    assert plus.tolist() == [0.5, 0.5, 0.0, 0.0] and minus.tolist() == [0.5, 0.0, 0.0, 0.5]
    R = TorusRouter([3, 3])
    ll = R.link_loads(T.from_schedule(np.arange(9), [([0], [4], [1.0])]))   # (0,0) -> (1,1)
    net = [(R.endpoints(i), b) for i, b in zip(ll.ids, ll.nbytes) if i < 2 * 9 * 2]
    assert net == [((("rt", 0), ("rt", 3)), 1.0), ((("rt", 3), ("rt", 4)), 1.0)]   # dim 0 first, then dim 1
    R = TorusRouter([4, 2], periodic=[False, True])
    ll = R.link_loads(T.from_schedule(np.arange(8), [([6], [0], [1.0])]))   # (3,0) -> (0,0) on a mesh: 3 hops back
    assert sorted(R.endpoints(i) for i in ll.ids if i < 32) == [(("rt", 2), ("rt", 0)), (("rt", 4), ("rt", 2)), (("rt", 6), ("rt", 4))]


# ---------------------------------------------------------------------- routing: invariants
def _explicit_alltoall(hosts, b):
    n = len(hosts)
    I, J = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    m = I != J
    return T.from_schedule(hosts, [(I[m], J[m], np.full(m.sum(), b))])


GRAPHS = {
    "dragonfly": lambda: dragonfly_graph(2, 4, 2, 9),
    "dragonfly_multi": lambda: dragonfly_graph(2, 4, 3, 5, links_per_pair=3, arrangement="circulant"),
    "dragonfly_plus": lambda: dragonfly_plus_graph(5, 3, 2, 2, 2),
    "fat_tree": lambda: fat_tree_graph(4, hosts_per_edge=3),
    "leaf_spine": lambda: leaf_spine_graph(20, hosts_per_leaf=4, spines=3),
    "torus": lambda: torus_graph([4, 3, 2], block=[2, 3, 2]),
}


@pytest.mark.parametrize("name", list(GRAPHS))
def test_alltoall_analytic_equals_explicit_flows(name):
    G = GRAPHS[name]()
    R = make_router(G)
    rng = np.random.default_rng(1)
    hosts = np.sort(rng.choice(R.n_hosts, size=min(R.n_hosts, 13), replace=False))
    routings = ["minimal"] + (["valiant"] if "valiant" in R.routings else [])
    for routing in routings:
        a = R.dense_loads(T.alltoall(hosts, 12.0), routing)
        b = R.dense_loads(_explicit_alltoall(hosts, 1.0), routing)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(GRAPHS))
def test_flow_conservation(name):
    """Every host's terminal link carries what it sends; global-link bytes = hops x global bytes."""
    G = GRAPHS[name]()
    R = make_router(G)
    hosts = np.arange(0, R.n_hosts, 2)
    for kind in ("ring", "allreduce", "alltoall"):
        tr = T.pattern(kind, hosts, 1000.0)
        d = R.dense_loads(tr)
        np.testing.assert_allclose(d[R.term_up[hosts]], tr.sent_per_host())
        np.testing.assert_allclose(d[R.term_down[hosts]], tr.received_per_host())
        assert d.min() >= 0 and not np.any(d[R.bandwidth == 0])
        if R.kind in ("dragonfly", "dragonfly_plus"):
            np.testing.assert_allclose(d[R.link_kind == 2].sum(), R.global_bytes(tr))
            dv = R.dense_loads(tr, "valiant")
            np.testing.assert_allclose(dv[R.link_kind == 2].sum(), 2 * R.global_bytes(tr))
        if R.kind == "fat_tree":   # up and down through the core
            np.testing.assert_allclose(d[R.link_kind == 2].sum(), 2 * R.global_bytes(tr))


def test_link_ids_match_graph_edges():
    for name, make in GRAPHS.items():
        G = make()
        R = make_router(G)
        ll = R.link_loads(T.alltoall(np.arange(R.n_hosts), 1.0))
        for i in ll.ids:
            u, v = (R.links.endpoints(int(i)) if hasattr(R, "links") else R.endpoints(int(i)))
            assert G.has_edge(u, v), (name, u, v)
            assert R.bandwidth[i] == G.edges[u, v]["bandwidth"]


def test_valiant_rejected_off_dragonfly():
    R = make_router(fat_tree_graph(4))
    with pytest.raises(TopologyError, match="valiant routing is not defined"):
        R.link_loads(T.ring([0, 5], 1.0), "valiant")
    with pytest.raises(ValueError, match="unknown routing"):
        R.link_loads(T.ring([0, 5], 1.0), "ugal")


def test_global_bytes_counts():
    G = dragonfly_graph(2, 2, 1, 3)   # 4 hosts per group
    R = make_router(G)
    hosts = np.array([0, 1, 4, 8])    # groups 0, 0, 1, 2
    assert R.global_bytes(T.alltoall(hosts, 3.0)) == pytest.approx(1.0 * (16 - (4 + 1 + 1)))
    assert R.global_bytes(T.ring(hosts, 2.0)) == pytest.approx(6.0)   # 8 flows of 1 byte, 2 inside group 0
    assert R.groups_spanned(hosts) == 3


def test_traffic_patterns():
    h = np.array([3, 5, 9, 10])
    tr = T.allreduce(h, 8.0)
    assert tr.sent_per_host().tolist() == [12.0] * 4 and tr.dst.tolist() == [5, 9, 10, 3]
    rb = T.allreduce(np.arange(5), 8.0, "rabenseifner")
    # fold (rank 4 <-> 0: 8 + 8) + 2 steps x 4 ranks x 2 directions (4 + 2 bytes)
    assert rb.total_bytes() == pytest.approx(16 + 4 * 2 * 4 + 4 * 2 * 2)
    assert T.ring([1, 2], 5.0).sent_per_host().tolist() == [5.0, 5.0]
    assert T.alltoall([1, 2, 3], 6.0).total_bytes() == pytest.approx(18.0)
    with pytest.raises(ValueError, match="unknown communication kind"):
        T.pattern("gossip", h, 1.0)
    with pytest.raises(ValueError, match="duplicate"):
        T.ring([1, 1, 2], 1.0)
