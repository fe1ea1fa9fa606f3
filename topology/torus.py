"""n-D torus builder (and Fugaku's TofuD as a 6-D shape via the presets).

Graph conventions (shared with the other builders of the package):

* host ``i`` (int) sits at coordinates ``np.unravel_index(i, dims)`` (C order, last dimension
  fastest) and hangs off its own router ``("rt", i)`` through a ``terminal`` edge (the router is on
  the node in Tofu/BlueGene-like machines; keeping it a separate switch node lets every topology be
  routed the same way);
* routers are linked to their neighbours along each dimension; a dimension of size 2 has one link
  between the two routers (not two), a dimension of size 1 none; ``periodic[d] = False`` makes
  dimension ``d`` a mesh (no wrap-around link);
* ``group``: the index of the host's *block*, a sub-box of shape ``block`` (default: the whole
  machine is one block); router-router edges inside a block are ``local``, those crossing a block
  boundary are ``global``;
* ``bandwidth`` bytes/s per direction, ``latency`` s; ``graph.graph["topology"]`` holds the kind and
  parameters.

Only the shape matters for routing (`topology.routing` computes torus link loads arithmetically), so
the graph is not needed for link loads on very large tori.
"""
from __future__ import annotations

import networkx as nx
import numpy as np

from hpctwin.topology.dragonfly import TopologyError, _nonneg_float, _positive_float, _positive_int


def _check_dims(dims, name: str = "dims") -> tuple[int, ...]:
    try:
        t = tuple(dims)
    except TypeError:
        raise TopologyError(f"{name} must be a sequence of positive integers, got {dims!r}") from None
    if not t:
        raise TopologyError(f"{name} must have at least one dimension")
    for d, v in enumerate(t):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or int(v) < 1:
            raise TopologyError(f"{name}[{d}] must be an integer >= 1, got {v!r} "
                                "(a torus dimension of 0 is impossible)")
    return tuple(int(v) for v in t)


def torus_shape(dims, block=None, periodic=None) -> tuple[tuple[int, ...], tuple[int, ...], tuple[bool, ...]]:
    """Validated ``(dims, block, periodic)``; raises `TopologyError` on bad values."""
    dims = _check_dims(dims)
    block = dims if block is None else _check_dims(block, "block")
    if len(block) != len(dims):
        raise TopologyError(f"block {block} must have as many dimensions as dims {dims}")
    for d, (n, b) in enumerate(zip(dims, block)):
        if n % b:
            raise TopologyError(f"block[{d}] = {b} does not divide dims[{d}] = {n}")
    if periodic is None:
        periodic = (True,) * len(dims)
    periodic = tuple(bool(x) for x in periodic)
    if len(periodic) != len(dims):
        raise TopologyError(f"periodic {periodic} must have as many entries as dims {dims}")
    return dims, block, periodic


def block_of(coords: np.ndarray, dims, block) -> np.ndarray:
    """Block index of each row of ``coords`` (shape (n, D)); blocks numbered in C order."""
    nb = np.asarray(dims) // np.asarray(block)
    bc = np.asarray(coords) // np.asarray(block)
    return np.ravel_multi_index(tuple(bc.T), tuple(nb))


def torus_graph(dims, *, block=None, periodic=None, nodes: int | None = None,
                bandwidth: float = 6.8e9, latency: float = 1e-7,
                terminal_bandwidth: float | None = None, terminal_latency: float = 0.0) -> nx.Graph:
    """An n-D torus of ``prod(dims)`` routers, one host each (see the module docstring).

    ``bandwidth`` (bytes/s per direction per link; default 6.8 GB/s, a TofuD link) and ``latency``
    (s per hop) apply to router-router links; the terminal link defaults to ``2 * D * bandwidth``
    (a node can inject on all its links at once). ``nodes`` must equal ``prod(dims)`` if given.
    Raises `TopologyError` for a dimension < 1, a block that does not tile the torus, or a node count
    that differs from the shape.
    """
    dims, block, periodic = torus_shape(dims, block, periodic)
    H = int(np.prod(dims))
    if nodes is not None and _positive_int("nodes", nodes) != H:
        raise TopologyError(f"a torus of shape {'x'.join(map(str, dims))} has {H} nodes, but nodes = {nodes}")
    bw = _positive_float("bandwidth", bandwidth)
    lat = _nonneg_float("latency", latency)
    bw_t = (2 * len(dims) * bw if terminal_bandwidth is None
            else _positive_float("terminal_bandwidth", terminal_bandwidth))
    lat_t = _nonneg_float("terminal_latency", terminal_latency)
    coords = np.stack(np.unravel_index(np.arange(H), dims), axis=1)
    grp = block_of(coords, dims, block)
    G = nx.Graph()
    G.graph["topology"] = {"kind": "torus", "dims": list(dims), "block": list(block), "periodic": list(periodic),
                           "hosts": H, "switches": H, "bandwidth": bw, "terminal_bandwidth": bw_t}
    cl = coords.tolist()
    gl = grp.tolist()
    G.add_nodes_from((i, {"kind": "host", "group": gl[i], "switch": ("rt", i), "coords": tuple(cl[i])})
                     for i in range(H))
    G.add_nodes_from((("rt", i), {"kind": "switch", "role": "router", "group": gl[i], "coords": tuple(cl[i])})
                     for i in range(H))
    G.add_edges_from((i, ("rt", i), {"kind": "terminal", "bandwidth": bw_t, "latency": lat_t, "links": 1})
                     for i in range(H))
    idx = np.arange(H).reshape(dims)
    for d, n in enumerate(dims):
        if n == 1:
            continue
        nb = np.roll(idx, -1, axis=d)
        src, dst = idx, nb
        if not periodic[d] or n == 2:
            sl = [slice(None)] * len(dims)
            sl[d] = slice(0, n - 1)
            src, dst = idx[tuple(sl)], nb[tuple(sl)]
        s = src.ravel()
        t = dst.ravel()
        kinds = np.where(grp[s] == grp[t], "local", "global").tolist()
        G.add_edges_from((("rt", u), ("rt", v), {"kind": kd, "bandwidth": bw, "latency": lat, "links": 1})
                         for u, v, kd in zip(s.tolist(), t.tolist(), kinds))
    return G
