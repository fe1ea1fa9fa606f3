"""Dragonfly (Kim et al. 2008) and Dragonfly+ (Shpiner et al. 2017) builders.

Both return an undirected ``networkx.Graph`` that follows the package's graph conventions:

* host nodes are the ints ``0..H-1`` with attributes ``kind="host"``, ``group`` (Dragonfly group),
  ``switch`` (label of the switch the host hangs off) and ``coords`` = ``(group, switch index in
  group, port)``;
* switch nodes are tuples: ``("sw", group, index)`` for Dragonfly routers, ``("leaf", group, index)``
  and ``("spine", group, index)`` for Dragonfly+; attributes ``kind="switch"``, ``group``, ``index``
  and ``role`` (``"router"``, ``"leaf"``, ``"spine"``);
* edges carry ``kind`` (``"terminal"`` host-switch, ``"local"`` inside a group, ``"global"`` between
  groups), ``bandwidth`` (bytes/s, per direction), ``latency`` (s) and ``links`` (number of parallel
  cables merged into this edge: a `networkx.Graph` has no parallel edges, so when the arrangement puts
  several global cables between the same two switches they become one edge whose bandwidth is the
  sum);
* ``graph.graph["topology"]`` is a dict naming the kind and every parameter.

Hosts fill host slots in order (group, switch, port): host ``i`` sits on switch ``i // p``
(global switch index) at port ``i % p``. A machine with fewer nodes than slots leaves the last slots
empty (their switches still exist and still carry global links).

Global link arrangements (Camarero et al., ACM TACO 2014; Hastings et al., IEEE Cluster 2015): each
group has ``L = m * (g - 1)`` global cables (``m`` = cables per group pair), numbered by a *group
port* ``t``; cable copy ``c`` towards group ``j`` from group ``i`` uses port
``t = c * (g - 1) + pos_i(j)`` where

* ``absolute``:  ``pos_i(j) = j if j < i else j - 1`` (groups in id order);
* ``relative``:  ``pos_i(j) = (j - i - 1) mod g`` (offset order, "palmtree");
* ``circulant``: offsets ``+1, -1, +2, -2, ...``: ``pos = 2(d-1)`` for offset ``d = (j-i) mod g <
  g/2``, ``2(g-d-1)+1`` for ``d > g/2`` and ``g-2`` for ``d = g/2``.

Group port ``t`` belongs to switch ``floor(t * a / L)``, which is the classic "switch ``r`` owns
ports ``r*h .. r*h+h-1``" when ``L = a*h`` (every port used) and spreads the cables evenly over the
switches when fewer are used (Frontier: 292 cables over 32 switches).
"""
from __future__ import annotations

import math

import networkx as nx
import numpy as np

from hpctwin.topology.errors import TopologyError  # noqa: F401 - defined apart, re-exported here

ARRANGEMENTS = ("absolute", "relative", "circulant")




def _positive_int(name: str, v, minimum: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or int(v) < minimum:
        raise TopologyError(f"{name} must be an integer >= {minimum}, got {v!r}")
    return int(v)


def _positive_float(name: str, v) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise TopologyError(f"{name} must be a positive number, got {v!r}") from None
    if not (f > 0 and math.isfinite(f)):
        raise TopologyError(f"{name} must be a positive finite number, got {v!r}")
    return f


def _nonneg_float(name: str, v) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise TopologyError(f"{name} must be a number >= 0, got {v!r}") from None
    if not (f >= 0 and math.isfinite(f)):
        raise TopologyError(f"{name} must be a finite number >= 0, got {v!r}")
    return f


def arrangement_positions(g: int, arrangement: str) -> np.ndarray:
    """``pos[i, j]``: position of group ``j`` in group ``i``'s global port order (-1 on the diagonal).

    Each row is a permutation of ``0..g-2`` over the other groups. See the module docstring.
    """
    if arrangement not in ARRANGEMENTS:
        raise TopologyError(f"unknown global link arrangement {arrangement!r}; choose one of {', '.join(ARRANGEMENTS)}")
    i = np.arange(g)[:, None]
    j = np.arange(g)[None, :]
    if arrangement == "absolute":
        pos = np.where(j < i, j, j - 1)
    elif arrangement == "relative":
        pos = (j - i - 1) % g
    else:
        d = (j - i) % g
        pos = np.where(2 * d < g, 2 * (d - 1), 2 * (g - d - 1) + 1)
        pos = np.where(2 * d == g, g - 2, pos)
    pos = np.broadcast_to(pos, (g, g)).astype(np.int64).copy()
    np.fill_diagonal(pos, -1)
    return pos


def global_cables(g: int, a: int, h: int, m: int, arrangement: str) -> np.ndarray:
    """All global cables of a Dragonfly, one row ``(group_i, switch_i, group_j, switch_j, copy)``
    per cable with ``group_i < group_j``; switches are indices inside their group.

    Raises `TopologyError` if ``m * (g - 1)`` cables do not fit in the ``a * h`` global ports of a group.
    """
    if g < 2:
        return np.zeros((0, 5), dtype=np.int64)
    L = m * (g - 1)
    if L > a * h:
        raise TopologyError(
            f"a Dragonfly group has {a} switches x {h} global ports = {a * h} global ports, but "
            f"{g} groups with {m} cable(s) per group pair need {L}: at most "
            f"{a * h // m + 1} groups fit (or lower links_per_pair)")
    pos = arrangement_positions(g, arrangement)
    gi, gj = np.triu_indices(g, k=1)
    c = np.repeat(np.arange(m), len(gi))
    gi = np.tile(gi, m)
    gj = np.tile(gj, m)
    t_i = c * (g - 1) + pos[gi, gj]
    t_j = c * (g - 1) + pos[gj, gi]
    r_i = (t_i * a) // L
    r_j = (t_j * a) // L
    return np.stack([gi, r_i, gj, r_j, c], axis=1)


def _merge_edges(G: nx.Graph, us, vs, kind: str, bandwidth: float, latency: float) -> None:
    """Add cables ``us[k] - vs[k]``; parallel cables become one edge (bandwidth summed, ``links`` counted)."""
    counts: dict = {}
    for u, v in zip(us, vs):
        key = (v, u) if (v, u) in counts else (u, v)
        counts[key] = counts.get(key, 0) + 1
    G.add_edges_from((u, v, {"kind": kind, "bandwidth": bandwidth * n, "latency": latency, "links": n})
                     for (u, v), n in counts.items())


def _check_nodes(nodes, capacity: int, what: str) -> int:
    if nodes is None:
        return capacity
    n = _positive_int("nodes", nodes)
    if n > capacity:
        raise TopologyError(f"{what} has {capacity} host ports, fewer than nodes = {n}")
    return n


def _links_per_pair(kind: str, g: int, routers: int, h: int, links_per_pair: int | None, arrangement: str,
                    ports: str) -> int:
    """Cables per group pair of a Dragonfly(+) with ``routers`` global-port switches of ``h`` ports per
    group (``ports``: how the error names ``routers * h``); `TopologyError` for a bad arrangement or
    more groups than the global ports can join."""
    if arrangement not in ARRANGEMENTS:
        raise TopologyError(f"unknown global link arrangement {arrangement!r}; choose one of {', '.join(ARRANGEMENTS)}")
    if g > 1 and g - 1 > routers * h:
        raise TopologyError(f"a {kind} with {g} groups needs at least {g - 1} global ports per group, "
                            f"but a group has only {ports} = {routers * h}; at most {routers * h + 1} groups fit")
    if links_per_pair is None:
        return (routers * h) // (g - 1) if g > 1 else 0
    return _positive_int("links_per_pair", links_per_pair)


def _link_params(terminal_bandwidth: float, local_bandwidth: float, global_bandwidth: float,
                 terminal_latency: float, local_latency: float, global_latency: float
                 ) -> tuple[float, float, float, list[float]]:
    """Validated (terminal, local, global) bandwidths (bytes/s) and latencies (s) of a Dragonfly(+)."""
    bw_t = _positive_float("terminal_bandwidth", terminal_bandwidth)
    bw_l = _positive_float("local_bandwidth", local_bandwidth)
    bw_g = _positive_float("global_bandwidth", global_bandwidth)
    lat = [_nonneg_float(n, v) for n, v in (("terminal_latency", terminal_latency),
                                             ("local_latency", local_latency),
                                             ("global_latency", global_latency))]
    return bw_t, bw_l, bw_g, lat


def _add_hosts(G: nx.Graph, H: int, p: int, per_group: int, label: str) -> list[int]:
    """Hosts ``0..H-1``, ``p`` per switch ``(label, group, index)`` with ``per_group`` such switches
    a group; returns each host's global switch index (terminal edges: `_add_terminals`)."""
    sw = (np.arange(H) // p).tolist()
    G.add_nodes_from((i, {"kind": "host", "group": s // per_group, "switch": (label, s // per_group, s % per_group),
                          "coords": (s // per_group, s % per_group, i % p)})
                     for i, s in enumerate(sw))
    return sw


def _add_terminals(G: nx.Graph, sw: list[int], per_group: int, label: str, bandwidth: float, latency: float) -> None:
    G.add_edges_from((i, (label, s // per_group, s % per_group),
                      {"kind": "terminal", "bandwidth": bandwidth, "latency": latency, "links": 1})
                     for i, s in enumerate(sw))


def dragonfly_graph(p: int, a: int, h: int, g: int, *, links_per_pair: int | None = None,
                    arrangement: str = "absolute", nodes: int | None = None,
                    terminal_bandwidth: float = 25e9, local_bandwidth: float = 25e9,
                    global_bandwidth: float = 25e9, terminal_latency: float = 1e-7,
                    local_latency: float = 1e-7, global_latency: float = 1e-7) -> nx.Graph:
    """A Dragonfly: ``g`` groups of ``a`` switches, all-to-all inside a group, ``p`` hosts and ``h``
    global ports per switch, ``links_per_pair`` (``m``) cables between every pair of groups.

    ``links_per_pair`` defaults to the most that fit, ``floor(a*h / (g-1))`` (1 for the balanced
    ``g = a*h + 1``). ``nodes`` (default ``g*a*p``) hosts fill the slots in order.
    Bandwidths are bytes/s per direction per cable; latencies are seconds per hop. The defaults
    (25 GB/s = 200 Gb/s, 100 ns) are placeholders for hand-built graphs; presets set real values.

    Raises `TopologyError` for non-positive sizes, an unknown arrangement, more cables than global
    ports allow, or more nodes than host ports.
    """
    p = _positive_int("p (hosts per switch)", p)
    a = _positive_int("a (switches per group)", a)
    h = _positive_int("h (global ports per switch)", h, minimum=0 if g == 1 else 1)
    g = _positive_int("g (groups)", g)
    m = _links_per_pair("Dragonfly", g, a, h, links_per_pair, arrangement, f"a*h = {a}*{h}")
    bw_t, bw_l, bw_g, lat = _link_params(terminal_bandwidth, local_bandwidth, global_bandwidth,
                                         terminal_latency, local_latency, global_latency)
    cables = global_cables(g, a, h, m, arrangement)
    H = _check_nodes(nodes, g * a * p, f"a Dragonfly of {g} groups x {a} switches x {p} hosts")

    G = nx.Graph()
    G.graph["topology"] = {"kind": "dragonfly", "p": p, "a": a, "h": h, "g": g, "links_per_pair": m,
                           "arrangement": arrangement, "hosts": H, "switches": g * a,
                           "terminal_bandwidth": bw_t, "local_bandwidth": bw_l, "global_bandwidth": bw_g}
    sw = _add_hosts(G, H, p, a, "sw")
    G.add_nodes_from((("sw", gg, r), {"kind": "switch", "role": "router", "group": gg, "index": r})
                     for gg in range(g) for r in range(a))
    _add_terminals(G, sw, a, "sw", bw_t, lat[0])
    G.add_edges_from((("sw", gg, r1), ("sw", gg, r2),
                      {"kind": "local", "bandwidth": bw_l, "latency": lat[1], "links": 1})
                     for gg in range(g) for r1 in range(a) for r2 in range(r1 + 1, a))
    _merge_edges(G, [("sw", int(x), int(y)) for x, y in cables[:, :2]],
                 [("sw", int(x), int(y)) for x, y in cables[:, 2:4]], "global", bw_g, lat[2])
    return G


def dragonfly_plus_graph(groups: int, leaves: int, spines: int, hosts_per_leaf: int,
                         global_per_spine: int, *, links_per_pair: int | None = None,
                         arrangement: str = "absolute", nodes: int | None = None,
                         terminal_bandwidth: float = 25e9, local_bandwidth: float = 25e9,
                         global_bandwidth: float = 25e9, terminal_latency: float = 1e-7,
                         local_latency: float = 1e-7, global_latency: float = 1e-7) -> nx.Graph:
    """A Dragonfly+ (Shpiner et al., HiPINEB 2017): each group is a two-level leaf/spine fat-tree
    (every leaf linked to every spine, edge kind ``local``); hosts hang off leaves; global cables
    join spines of different groups (kind ``global``), arranged as in `dragonfly_graph` with the
    spines in the role of routers.

    Switch labels: ``("leaf", group, i)``, ``("spine", group, j)``. Host ``i`` sits on leaf
    ``i // hosts_per_leaf`` (global leaf index). Raises `TopologyError` like `dragonfly_graph`.
    """
    g = _positive_int("groups", groups)
    nl = _positive_int("leaves (per group)", leaves)
    ns = _positive_int("spines (per group)", spines)
    p = _positive_int("hosts_per_leaf", hosts_per_leaf)
    h = _positive_int("global_per_spine", global_per_spine, minimum=0 if g == 1 else 1)
    m = _links_per_pair("Dragonfly+", g, ns, h, links_per_pair, arrangement, "spines*global_per_spine")
    bw_t, bw_l, bw_g, lat = _link_params(terminal_bandwidth, local_bandwidth, global_bandwidth,
                                         terminal_latency, local_latency, global_latency)
    cables = global_cables(g, ns, h, m, arrangement)
    H = _check_nodes(nodes, g * nl * p, f"a Dragonfly+ of {g} groups x {nl} leaves x {hosts_per_leaf} hosts")

    G = nx.Graph()
    G.graph["topology"] = {"kind": "dragonfly_plus", "groups": g, "leaves": nl, "spines": ns,
                           "hosts_per_leaf": p, "global_per_spine": h, "links_per_pair": m,
                           "arrangement": arrangement, "hosts": H, "switches": g * (nl + ns),
                           "terminal_bandwidth": bw_t, "local_bandwidth": bw_l, "global_bandwidth": bw_g}
    lf = _add_hosts(G, H, p, nl, "leaf")
    G.add_nodes_from((("leaf", gg, r), {"kind": "switch", "role": "leaf", "group": gg, "index": r})
                     for gg in range(g) for r in range(nl))
    G.add_nodes_from((("spine", gg, r), {"kind": "switch", "role": "spine", "group": gg, "index": r})
                     for gg in range(g) for r in range(ns))
    _add_terminals(G, lf, nl, "leaf", bw_t, lat[0])
    G.add_edges_from((("leaf", gg, r1), ("spine", gg, r2),
                      {"kind": "local", "bandwidth": bw_l, "latency": lat[1], "links": 1})
                     for gg in range(g) for r1 in range(nl) for r2 in range(ns))
    _merge_edges(G, [("spine", int(x), int(y)) for x, y in cables[:, :2]],
                 [("spine", int(x), int(y)) for x, y in cables[:, 2:4]], "global", bw_g, lat[2])
    return G
