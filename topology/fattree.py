"""Fat-tree builders: the 3-level k-ary fat-tree of Al-Fares et al. (SIGCOMM 2008) with an optional
oversubscription taper at the edge, and a 2-level leaf/spine fat-tree for any node count.

Graph conventions (shared with the other builders of the package):

* hosts are the ints ``0..H-1``: ``kind="host"``, ``group`` (= ``pod`` for the 3-level tree, the
  leaf switch for the 2-level tree), ``pod``, ``switch`` (label of the edge/leaf switch), ``coords``;
* switches: ``("edge", pod, i)``, ``("agg", pod, j)``, ``("core", j, c)`` (3-level),
  ``("leaf", i)``, ``("spine", j)`` (2-level); ``kind="switch"``, ``role``, ``group`` (the pod; -1
  for core and spine switches, which belong to no pod);
* edge kinds: ``terminal`` (host - edge/leaf switch), ``local`` (edge - aggregation, inside a pod)
  and ``global`` (aggregation - core: the links a byte uses to leave its pod). In the 2-level tree
  the group is the leaf switch, so the leaf - spine links are ``global``.
* ``bandwidth`` in bytes/s per direction, ``latency`` in s; ``graph.graph["topology"]`` holds the kind
  and the parameters.

Al-Fares' k-ary tree: ``k`` pods; a pod has ``k/2`` edge and ``k/2`` aggregation switches, each edge
switch linked to every aggregation switch of its pod; ``(k/2)^2`` core switches, aggregation switch
``j`` of every pod linked to cores ``(j, 0..k/2-1)``. ``hosts_per_edge`` (default ``k/2``) sets the
taper: ``hosts_per_edge / (k/2)`` : 1 oversubscription at the edge. Hosts fill the edge switches in
order: host ``i`` is on global edge switch ``i // hosts_per_edge``, pod ``i // (hosts_per_edge*k/2)``.
``pods`` (default: as many as the hosts need, at most ``k``) builds a partial tree; every pod built
is complete (its empty host ports stay empty) and all ``(k/2)^2`` cores are always built.
"""
from __future__ import annotations

import networkx as nx
import numpy as np

from hpctwin.topology.dragonfly import (TopologyError, _nonneg_float, _positive_float, _positive_int)


def fat_tree_graph(k: int, *, hosts_per_edge: int | None = None, pods: int | None = None,
                   nodes: int | None = None, terminal_bandwidth: float = 12.5e9,
                   local_bandwidth: float = 12.5e9, global_bandwidth: float = 12.5e9,
                   terminal_latency: float = 1e-7, local_latency: float = 1e-7,
                   global_latency: float = 1e-7) -> nx.Graph:
    """A 3-level k-ary fat-tree (see the module docstring).

    ``nodes`` defaults to the capacity of the pods built. Bandwidths in bytes/s per direction
    (default 12.5 GB/s = 100 Gb/s, a placeholder for hand-built graphs), latencies in s per hop.
    Raises `TopologyError` for odd or too small ``k``, more pods than ``k``, or too many nodes.
    """
    k = _positive_int("k (switch radix)", k, minimum=2)
    if k % 2:
        raise TopologyError(f"a k-ary fat-tree needs an even k, got k = {k}")
    half = k // 2
    hpe = half if hosts_per_edge is None else _positive_int("hosts_per_edge", hosts_per_edge)
    pod_hosts = hpe * half
    if pods is None:
        if nodes is None:
            P = k
        else:
            P = -(-_positive_int("nodes", nodes) // pod_hosts)
    else:
        P = _positive_int("pods", pods)
    if P > k:
        raise TopologyError(f"a k-ary fat-tree with k = {k} has at most {k} pods ({k * pod_hosts} hosts "
                            f"at {hpe} hosts per edge switch), but {P} pods are needed")
    H = P * pod_hosts if nodes is None else _positive_int("nodes", nodes)
    if H > P * pod_hosts:
        raise TopologyError(f"a fat-tree of {P} pods x {half} edge switches x {hpe} hosts has {P * pod_hosts} "
                            f"host ports, fewer than nodes = {H}")
    bw_t = _positive_float("terminal_bandwidth", terminal_bandwidth)
    bw_l = _positive_float("local_bandwidth", local_bandwidth)
    bw_g = _positive_float("global_bandwidth", global_bandwidth)
    lt, ll, lg = (_nonneg_float("terminal_latency", terminal_latency), _nonneg_float("local_latency", local_latency),
                  _nonneg_float("global_latency", global_latency))

    G = nx.Graph()
    G.graph["topology"] = {"kind": "fat_tree", "k": k, "hosts_per_edge": hpe, "pods": P, "hosts": H,
                           "taper": hpe / half, "switches": P * k + half * half,
                           "terminal_bandwidth": bw_t, "local_bandwidth": bw_l, "global_bandwidth": bw_g}
    edge = np.arange(H) // hpe
    G.add_nodes_from((i, {"kind": "host", "group": int(e // half), "pod": int(e // half),
                          "switch": ("edge", int(e // half), int(e % half)),
                          "coords": (int(e // half), int(e % half), int(i % hpe))})
                     for i, e in enumerate(edge.tolist()))
    for role in ("edge", "agg"):
        G.add_nodes_from(((role, p, i), {"kind": "switch", "role": role, "group": p, "pod": p, "index": i})
                         for p in range(P) for i in range(half))
    G.add_nodes_from((("core", j, c), {"kind": "switch", "role": "core", "group": -1, "pod": -1, "index": j * half + c})
                     for j in range(half) for c in range(half))
    G.add_edges_from((i, ("edge", int(e // half), int(e % half)),
                      {"kind": "terminal", "bandwidth": bw_t, "latency": lt, "links": 1})
                     for i, e in enumerate(edge.tolist()))
    G.add_edges_from((("edge", p, i), ("agg", p, j), {"kind": "local", "bandwidth": bw_l, "latency": ll, "links": 1})
                     for p in range(P) for i in range(half) for j in range(half))
    G.add_edges_from((("agg", p, j), ("core", j, c), {"kind": "global", "bandwidth": bw_g, "latency": lg, "links": 1})
                     for p in range(P) for j in range(half) for c in range(half))
    return G


def leaf_spine_graph(nodes: int, *, hosts_per_leaf: int = 32, spines: int | None = None,
                     terminal_bandwidth: float = 12.5e9, global_bandwidth: float | None = None,
                     terminal_latency: float = 1e-7, global_latency: float = 1e-7) -> nx.Graph:
    """A 2-level fat-tree for any node count: ``ceil(nodes / hosts_per_leaf)`` leaves, each linked
    to every one of ``spines`` spines (default ``hosts_per_leaf``, i.e. as many up-links as host
    ports: non-blocking when ``global_bandwidth`` equals ``terminal_bandwidth``, its default).

    Host ``i`` sits on leaf ``i // hosts_per_leaf``; its ``group``/``pod`` is that leaf.
    Raises `TopologyError` for non-positive sizes or bandwidths.
    """
    H = _positive_int("nodes", nodes)
    p = _positive_int("hosts_per_leaf", hosts_per_leaf)
    S = p if spines is None else _positive_int("spines", spines)
    bw_t = _positive_float("terminal_bandwidth", terminal_bandwidth)
    bw_g = bw_t if global_bandwidth is None else _positive_float("global_bandwidth", global_bandwidth)
    lt, lg = _nonneg_float("terminal_latency", terminal_latency), _nonneg_float("global_latency", global_latency)
    nl = -(-H // p)
    G = nx.Graph()
    G.graph["topology"] = {"kind": "leaf_spine", "hosts_per_leaf": p, "leaves": nl, "spines": S, "hosts": H,
                           "taper": p * bw_t / (S * bw_g), "switches": nl + S,
                           "terminal_bandwidth": bw_t, "global_bandwidth": bw_g}
    leaf = np.arange(H) // p
    G.add_nodes_from((i, {"kind": "host", "group": int(l), "pod": int(l), "switch": ("leaf", int(l)),
                          "coords": (int(l), int(i % p))}) for i, l in enumerate(leaf.tolist()))
    G.add_nodes_from((("leaf", l), {"kind": "switch", "role": "leaf", "group": l, "pod": l, "index": l})
                     for l in range(nl))
    G.add_nodes_from((("spine", s), {"kind": "switch", "role": "spine", "group": -1, "pod": -1, "index": s})
                     for s in range(S))
    G.add_edges_from((i, ("leaf", int(l)), {"kind": "terminal", "bandwidth": bw_t, "latency": lt, "links": 1})
                     for i, l in enumerate(leaf.tolist()))
    G.add_edges_from((("leaf", l), ("spine", s), {"kind": "global", "bandwidth": bw_g, "latency": lg, "links": 1})
                     for l in range(nl) for s in range(S))
    return G
