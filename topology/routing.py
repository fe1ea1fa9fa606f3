"""Routing and link loads: bytes per *directed* link for a job's `Traffic`.

`make_router(graph)` returns a `Router` for a graph built by this package (the kind is read from
``graph.graph["topology"]``). Routers never search paths: routes follow from the structure of the
topology, and link loads are computed per switch pair (or per line of a torus) with numpy, so a
1,000-node all-to-all on Frontier takes milliseconds.
Dragonfly minimal routing has a compiled kernel (`_dragonfly_minimal`) that builds the same pieces in
the same order, so its sums equal the numpy path's bit for bit; ``link_loads(..., cache=True)`` keeps
the switch-to-switch part per switch-level traffic. `Router.footprint` (used by the contention model)
gives a built-in pattern's link loads, largest bytes sent per host and global bytes together; on a
Dragonfly with minimal routing one compiled pass (`_dragonfly_footprint`) computes them with the numpy
path's operations in its order (numpy's pairwise sums included, `_pairwise_sum`), equal bit for bit.

Directed links: every undirected edge ``e`` (in ``graph.edges`` order) gives link ``2e`` (``u -> v``
as stored) and ``2e + 1`` (``v -> u``); the torus router numbers its links arithmetically (see
`TorusRouter`). ``Router.bandwidth[l]`` is the capacity of link ``l`` in bytes/s,
``Router.link_kind[l]`` its kind code (`KIND_CODES`).

Routing (ECMP = equal split of a flow over its equal-cost paths; loads are expected values, so they
are deterministic):

* **Dragonfly, minimal**: local hop to a switch owning a global cable to the destination group,
  the global cable, local hop to the destination switch (Kim et al. 2008); ECMP over all cables
  between the two groups. Inside a group: the direct local link.
* **Dragonfly, valiant**: traffic between groups goes minimally to an intermediate group chosen
  uniformly among the groups other than the source and destination groups, then minimally to the
  destination (Valiant; Kim et al. 2008). Loads are the expectation over the intermediate group
  (what many packets converge to). Traffic inside a group stays minimal. With fewer than 3 groups
  Valiant equals minimal.
* **Dragonfly+**: the same with leaf -> spine (ECMP over the spines owning cables to the
  destination group), global cable, spine -> leaf; inside a group leaf -> any spine -> leaf (ECMP
  over all spines); in an intermediate group spine -> any leaf -> spine.
* **Fat-tree (3-level) / leaf-spine**: up to any aggregation switch (ECMP), up to any of its cores
  when leaving the pod (ECMP), down the unique path (Al-Fares et al. 2008). Valiant is not defined.
* **Torus**: dimension-order routing along the shorter way round each ring; a tie (distance exactly
  half a ring) is split evenly over both directions. Valiant is not defined. Explicit flows are
  routed flow by flow; a uniform all-to-all is summed analytically per dimension from host counts
  per line (`TorusRouter._alltoall_pieces`, O(D * H)), so the all-to-all of all 158,976 Fugaku
  nodes takes ~0.2 s instead of routing 2.5e10 flows.

Global-traffic accounting: `Router.global_bytes` = bytes sent between hosts of different groups
(Dragonfly groups, fat-tree pods, leaf switches of a leaf-spine, torus blocks), each byte counted
once whatever the routing.
"""
from __future__ import annotations

from typing import NamedTuple

import networkx as nx
import numpy as np
from numba import njit

from hpctwin.topology.dragonfly import TopologyError
from hpctwin.topology.torus import block_of, torus_shape
from hpctwin.topology.traffic import Traffic
from hpctwin.topology.traffic import pattern as tr_pattern

KIND_CODES = {"terminal": 0, "local": 1, "global": 2}
ROUTINGS = ("minimal", "valiant")


class LinkLoads(NamedTuple):
    """Sparse link loads: sorted unique directed link ids and bytes on each."""

    ids: np.ndarray
    nbytes: np.ndarray


class Footprint(NamedTuple):
    """One round of a job's `traffic.pattern` on the network (`Router.footprint`).

    ``smax``: the most bytes sent by one host (> 0); ``loads``: bytes on every directed link used
    (`Router.link_loads`); ``global_bytes``: bytes sent between hosts of different groups
    (`Router.global_bytes`).
    """

    smax: float
    loads: LinkLoads
    global_bytes: float


class Router:
    """Base class. Subclasses fill the arrays below and implement `_network_pieces`.

    ``n_hosts``; ``n_links``; ``bandwidth`` (n_links,) bytes/s; ``link_kind`` (n_links,) int8;
    ``host_group`` (n_hosts,) int64; ``term_up`` / ``term_down`` (n_hosts,) ids of each host's
    link to / from its switch.
    """

    kind = "base"
    routings = ("minimal",)

    n_hosts: int
    n_links: int
    bandwidth: np.ndarray
    link_kind: np.ndarray
    host_group: np.ndarray
    term_up: np.ndarray
    term_down: np.ndarray

    #: network-part results kept by ``link_loads(..., cache=True)`` (most recently used first out)
    CACHE_SIZE = 4096
    #: True when `_network_pieces` depends on the traffic only through access-switch-level data
    #: (the key of `_switch_key`), so its result can be cached across host sets
    _switch_level = False

    # ------------------------------------------------------------------ construction (subclasses)
    def _bind_links(self, G: nx.Graph) -> dict:
        """Index the graph's links (``n_links``, ``bandwidth``, ``link_kind``); returns the edge -> id map."""
        self.links = _GraphLinks(G)
        self.n_links, self.bandwidth, self.link_kind = self.links.n_links, self.links.bandwidth, self.links.kind
        return self.links.eid

    def _bind_terminals(self, eid: dict, switch_of) -> None:
        """``term_up`` / ``term_down``: each host's link to / from ``switch_of(its access switch index)``."""
        self.term_up = np.array([eid[(i, switch_of(int(s)))] for i, s in enumerate(self.host_acc)], dtype=np.int64)
        self.term_down = self.term_up ^ 1

    # ------------------------------------------------------------------ public
    def link_loads(self, traffic: Traffic, routing: str = "minimal", cache: bool = False,
                   sent: np.ndarray | None = None) -> LinkLoads:
        """Bytes on every directed link used by ``traffic`` (one round), as a sparse `LinkLoads`.

        The terminal links carry each host's bytes sent / received; the switch-to-switch part
        (`_network_pieces`, summed per link) is kept per switch-level traffic when ``cache`` is
        true (same result: the key holds everything that part depends on; see `_switch_key`).
        ``sent``: ``traffic.sent_per_host()`` when the caller already has it.
        """
        if routing not in ROUTINGS:
            raise ValueError(f"unknown routing {routing!r}; choose one of {', '.join(ROUTINGS)}")
        if routing not in self.routings:
            raise TopologyError(f"{routing} routing is not defined for a {self.kind} topology "
                                f"(available: {', '.join(self.routings)})")
        h = traffic.hosts
        if len(h) and (h[0] < 0 or h[-1] >= self.n_hosts):
            raise ValueError(f"traffic uses node ids outside 0..{self.n_hosts - 1}")
        key = self._switch_key(traffic, routing) if cache and self._switch_level else None
        if key is None:
            net = self._network_loads(traffic, routing)
        else:
            store = self.__dict__.setdefault("_net_cache", {})
            net = store.pop(key, None)
            if net is None:
                net = self._network_loads(traffic, routing)
                if len(store) >= self.CACHE_SIZE:
                    del store[next(iter(store))]
            store[key] = net
        # terminal links are disjoint from switch-to-switch links: merging = sorting the union
        ids = np.concatenate([self.term_up[h], self.term_down[h], net.ids])
        if sent is None:
            sent = traffic.sent_per_host()
        w = np.concatenate([sent, traffic.received_per_host(), net.nbytes])
        keep = w > 0
        ids, w = ids[keep], w[keep]
        order = np.argsort(ids, kind="stable")
        return LinkLoads(ids[order], w[order])

    def _network_loads(self, traffic: Traffic, routing: str) -> LinkLoads:
        """Bytes on the switch-to-switch links: `_network_pieces` summed per link, in order."""
        ids, w = [np.zeros(0, dtype=np.int64)], [np.zeros(0)]
        for i, x in self._network_pieces(traffic, routing):
            ids.append(np.asarray(i, dtype=np.int64).ravel())
            w.append(np.asarray(x, dtype=np.float64).ravel())
        ids = np.concatenate(ids)
        w = np.concatenate(w)
        keep = w > 0
        ids, w = ids[keep], w[keep]
        if self.n_links <= 4_000_000 and 16 * len(ids) >= self.n_links:
            # many pieces: a dense sum over all links (same per-link summation order as below)
            dense = np.bincount(ids, w, minlength=self.n_links)
            nz = np.flatnonzero(dense)
            return LinkLoads(nz, dense[nz])
        u, inv = np.unique(ids, return_inverse=True)
        return LinkLoads(u, np.bincount(inv, w))

    def _switch_key(self, traffic: Traffic, routing: str):
        """Everything `_network_pieces` of a switch-level router reads: the flows between distinct
        access switches (in flow order) and, for an all-to-all, the hosts per access switch."""
        acc = self.host_acc
        parts = [routing, float(traffic.pair_bytes)]
        if len(traffic.src):
            a, b = acc[traffic.src], acc[traffic.dst]
            m = a != b
            parts += [a[m].tobytes(), b[m].tobytes(), traffic.nbytes[m].tobytes()]
        else:
            parts += [b"", b"", b""]
        if traffic.pair_bytes:
            u, c = np.unique(acc[traffic.hosts], return_counts=True)
            parts += [u.tobytes(), c.tobytes()]
        return tuple(parts)

    def footprint(self, kind: str, hosts: np.ndarray, routing: str = "minimal",
                  cache: bool = True) -> Footprint | None:
        """`Footprint` of ``traffic.pattern(kind, hosts, 1.0)`` (1 byte per rank), or None when the
        pattern sends nothing; ``cache`` as in `link_loads`. Subclasses may compute it in one
        compiled pass (`DragonflyRouter`); the figures are the same bit for bit.
        """
        traffic = tr_pattern(kind, hosts, 1.0)
        sent = traffic.sent_per_host()
        smax = float(sent.max()) if len(sent) else 0.0
        if smax <= 0:
            return None
        return Footprint(smax, self.link_loads(traffic, routing, cache=cache, sent=sent),
                         self.global_bytes(traffic))

    def dense_loads(self, traffic: Traffic, routing: str = "minimal") -> np.ndarray:
        """`link_loads` as a dense (n_links,) array."""
        ll = self.link_loads(traffic, routing)
        out = np.zeros(self.n_links)
        out[ll.ids] = ll.nbytes
        return out

    def global_bytes(self, traffic: Traffic) -> float:
        """Bytes sent between hosts of different groups in one round (each byte counted once)."""
        g = self.host_group
        total = 0.0
        if len(traffic.src):
            m = g[traffic.src] != g[traffic.dst]
            total += float(traffic.nbytes[m].sum())
        if traffic.pair_bytes:
            n = traffic.n
            c = np.unique(g[traffic.hosts], return_counts=True)[1].astype(np.float64)
            total += traffic.pair_bytes * (n * n - float((c * c).sum()))
        return total

    def groups_spanned(self, hosts) -> int:
        """Number of distinct groups among ``hosts`` (compiled `_n_distinct_groups`)."""
        h = np.asarray(hosts, dtype=np.int64).ravel()
        seen = self.__dict__.get("_group_seen")
        if seen is None:
            seen = self._group_seen = np.zeros(self._n_host_groups(), dtype=np.bool_)
        n = _n_distinct_groups(self.host_group, h, seen)
        if n < 0:
            raise IndexError(f"groups_spanned: node ids outside 0..{self.n_hosts - 1}")
        return int(n)

    def _n_host_groups(self) -> int:
        n = self.__dict__.get("_ngroups")
        if n is None:
            n = self._ngroups = int(self.host_group.max()) + 1 if len(self.host_group) else 0
        return n

    # ------------------------------------------------------------------ helpers for subclasses
    def _network_pieces(self, traffic: Traffic, routing: str):
        raise NotImplementedError

    @staticmethod
    def _switch_pairs(traffic: Traffic, acc: np.ndarray):
        """(s_src, s_dst, bytes) between distinct access switches (duplicates allowed)."""
        ss, sd, v = [], [], []
        if len(traffic.src):
            a, b = acc[traffic.src], acc[traffic.dst]
            m = a != b
            ss.append(a[m]); sd.append(b[m]); v.append(traffic.nbytes[m])
        if traffic.pair_bytes and traffic.n > 1:
            u, c = np.unique(acc[traffic.hosts], return_counts=True)
            if len(u) > 1:
                I, J = np.meshgrid(np.arange(len(u)), np.arange(len(u)), indexing="ij")
                m = I != J
                ss.append(u[I[m]]); sd.append(u[J[m]])
                v.append(traffic.pair_bytes * (c[I[m]] * c[J[m]]).astype(np.float64))
        if not ss:
            z = np.zeros(0, dtype=np.int64)
            return z, z, np.zeros(0)
        return np.concatenate(ss), np.concatenate(sd), np.concatenate(v)


@njit(cache=True)
def _n_distinct_groups(host_group, hosts, seen):
    """Number of distinct ``host_group[h]`` over ``hosts`` (-1 if a host id is out of range);
    ``seen``: False per group, left as found."""
    n_h = len(host_group)
    for h in hosts:
        if h < 0 or h >= n_h:
            return -1
    c = 0
    for h in hosts:
        g = host_group[h]
        if not seen[g]:
            seen[g] = True
            c += 1
    for h in hosts:
        seen[host_group[h]] = False
    return c


class _GraphLinks:
    """Directed link numbering of a networkx graph (see the module docstring)."""

    def __init__(self, G: nx.Graph):
        edges = list(G.edges(data=True))
        self.n_links = 2 * len(edges)
        self.bandwidth = np.empty(self.n_links)
        self.kind = np.empty(self.n_links, dtype=np.int8)
        self.eid: dict = {}
        self.ends: list = []
        for e, (u, v, d) in enumerate(edges):
            self.eid[(u, v)] = 2 * e
            self.eid[(v, u)] = 2 * e + 1
            self.ends.append((u, v))
            self.bandwidth[2 * e: 2 * e + 2] = d["bandwidth"]
            self.kind[2 * e: 2 * e + 2] = KIND_CODES[d["kind"]]

    def endpoints(self, link: int):
        u, v = self.ends[link // 2]
        return (u, v) if link % 2 == 0 else (v, u)


def _link_table(eid: dict, pairs, shape) -> np.ndarray:
    out = np.full(shape, -1, dtype=np.int64)
    for idx, key in pairs:
        out[idx] = eid.get(key, -1)
    return out


class _GroupedRouter(Router):
    """Common routing of Dragonfly and Dragonfly+: access switches (routers / leaves) in groups,
    gateways (routers / spines) owning the global cables. Subclasses provide the hooks
    `_intra`, `_to_gw`, `_from_gw`, `_transit`."""

    routings = ("minimal", "valiant")
    _switch_level = True

    def _init_global(self, G: nx.Graph, ngw: int) -> None:
        """Global cable tables from the graph's ``global`` edges; ``gw_label`` = switch tag."""
        ng = self.n_groups
        per_pair: dict = {}
        for u, v, d in G.edges(data=True):
            if d["kind"] != "global":
                continue
            for x, y in ((u, v), (v, u)):
                per_pair.setdefault((x[1], y[1]), []).extend([(x[2], y[2], self.links.eid[(x, y)])]
                                                             * int(d.get("links", 1)))
        M = max((len(v) for v in per_pair.values()), default=1)
        self.gl_src = np.full((ng, ng, M), -1, dtype=np.int64)
        self.gl_dst = np.full((ng, ng, M), -1, dtype=np.int64)
        self.gl_id = np.full((ng, ng, M), -1, dtype=np.int64)
        self.gl_w = np.zeros((ng, ng, M))
        for (gs, gd), lst in per_pair.items():
            arr = np.asarray(lst, dtype=np.int64)
            k = len(arr)
            self.gl_src[gs, gd, :k] = arr[:, 0]
            self.gl_dst[gs, gd, :k] = arr[:, 1]
            self.gl_id[gs, gd, :k] = arr[:, 2]
            self.gl_w[gs, gd, :k] = 1.0 / k
        # LandW[k, b, gs]: share of group gs -> k traffic landing on gateway b of group k;
        # DepW[k, a, gd]: share of group k -> gd traffic leaving from gateway a of group k.
        self.land_w = np.zeros((ng, ngw, ng))
        self.dep_w = np.zeros((ng, ngw, ng))
        gs, k, c = np.nonzero(self.gl_w)
        np.add.at(self.land_w, (k, self.gl_dst[gs, k, c], gs), self.gl_w[gs, k, c])
        np.add.at(self.dep_w, (gs, self.gl_src[gs, k, c], k), self.gl_w[gs, k, c])
        missing = [(a, b) for a in range(ng) for b in range(ng) if a != b and (a, b) not in per_pair]
        self.disconnected = missing

    def _aggregates(self, traffic: Traffic):
        """Traffic summed per (access switch pair inside a group), (source switch, destination
        group), (source group, destination switch) and (group pair); all-to-all analytically."""
        A, ng = self.acc_per_group, self.n_groups
        intra, sg, gs_, D = [], [], [], np.zeros((ng, ng))
        if len(traffic.src):
            ss, sd = self.host_acc[traffic.src], self.host_acc[traffic.dst]
            v = traffic.nbytes
            gsrc, gdst = ss // A, sd // A
            m = (gsrc == gdst) & (ss != sd)
            intra.append((ss[m], sd[m], v[m]))
            m = gsrc != gdst
            if m.any():
                sg.append((ss[m], gdst[m], v[m]))
                gs_.append((gsrc[m], sd[m], v[m]))
                D += np.bincount(gsrc[m] * ng + gdst[m], v[m], minlength=ng * ng).reshape(ng, ng)
        if traffic.pair_bytes and traffic.n > 1:
            b = traffic.pair_bytes
            u, c = np.unique(self.host_acc[traffic.hosts], return_counts=True)
            c = c.astype(np.float64)
            gu = u // A
            Cg = np.bincount(gu, c, minlength=ng)
            J = np.flatnonzero(Cg)
            # switch pairs inside each group (u is sorted, so each group's switches are contiguous)
            first = np.searchsorted(gu, gu, side="left")
            size = np.searchsorted(gu, gu, side="right") - first
            i = np.repeat(np.arange(len(u)), size)
            offs = np.repeat(np.cumsum(size) - size, size)
            j = np.repeat(first, size) + (np.arange(len(i)) - offs)
            m = i != j
            intra.append((u[i[m]], u[j[m]], b * c[i[m]] * c[j[m]]))
            if len(J) > 1:
                I2, K2 = np.meshgrid(np.arange(len(u)), J, indexing="ij")
                m = gu[I2] != K2
                sg.append((u[I2[m]], K2[m], b * c[I2[m]] * Cg[K2[m]]))
                gs_.append((K2[m], u[I2[m]], b * Cg[K2[m]] * c[I2[m]]))
                DD = b * np.outer(Cg, Cg)
                np.fill_diagonal(DD, 0.0)
                D += DD

        def cat(parts, n):
            if not parts:
                return tuple(np.zeros(0, dtype=np.int64) for _ in range(n - 1)) + (np.zeros(0),)
            return tuple(np.concatenate([p[k] for p in parts]) for k in range(n))
        return cat(intra, 3), cat(sg, 3), cat(gs_, 3), D

    def _network_pieces(self, traffic: Traffic, routing: str):
        A, ng, nacc = self.acc_per_group, self.n_groups, self.n_acc
        (iss, isd, iv), (s_s, s_g, s_v), (g_g, g_s, g_v), D = self._aggregates(traffic)
        if len(iss):
            yield from self._intra(iss, isd, iv)
        if not D.any():
            return
        if self.disconnected:
            bad = [p for p in self.disconnected if D[p] > 0]
            if bad:
                raise TopologyError(f"no global cable between groups {bad[0]}")
        if routing == "valiant" and ng >= 3:
            yield from self._valiant(s_s, s_g, s_v, g_g, g_s, g_v, D)
            return
        # source access switch -> gateways owning cables to the destination group
        key, inv = np.unique(s_s * ng + s_g, return_inverse=True)
        vv = np.bincount(inv, s_v)
        s_u, gd_u = key // ng, key % ng
        gw = self.gl_src[s_u // A, gd_u]
        w = self.gl_w[s_u // A, gd_u] * vv[:, None]
        yield from self._to_gw(np.broadcast_to(s_u[:, None], gw.shape), gw, w)
        # the global cables
        a, b = np.nonzero(D)
        yield self.gl_id[a, b], self.gl_w[a, b] * D[a, b][:, None]
        # landing gateways -> destination access switch
        key, inv = np.unique(g_g * nacc + g_s, return_inverse=True)
        vv = np.bincount(inv, g_v)
        gs_u, d_u = key // nacc, key % nacc
        gw = self.gl_dst[gs_u, d_u // A]
        w = self.gl_w[gs_u, d_u // A] * vv[:, None]
        yield from self._from_gw(gw, np.broadcast_to(d_u[:, None], gw.shape), w)

    def _valiant(self, s_s, s_g, s_v, g_g, g_s, g_v, D):
        A, ng = self.acc_per_group, self.n_groups
        share = 1.0 / (ng - 2)
        # first leg: source access switch -> gateway to intermediate group k (k != gs, gd)
        us, inv = np.unique(s_s, return_inverse=True)
        Tg = np.bincount(inv * ng + s_g, s_v, minlength=len(us) * ng).reshape(len(us), ng)
        amount = (Tg.sum(axis=1)[:, None] - Tg) * share                        # (n_s, k)
        gsu = us // A
        w = self.gl_w[gsu] * amount[:, :, None]                                # (n_s, k, c)
        gw = self.gl_src[gsu]
        yield from self._to_gw(np.broadcast_to(us[:, None, None], gw.shape), gw, w)
        rowD, colD = D.sum(axis=1), D.sum(axis=0)
        rows, cols = np.flatnonzero(rowD), np.flatnonzero(colD)
        # first global hop gs -> k
        amt = (rowD[rows][:, None] - D[rows]) * share                          # (r, k)
        yield self.gl_id[rows], self.gl_w[rows] * amt[:, :, None]
        # transit inside the intermediate group k: landing gateway b -> departing gateway a
        Y = self.land_w[:, :, rows] @ D[np.ix_(rows, cols)]                    # (k, b, c)
        X = (Y @ self.dep_w[:, :, cols].transpose(0, 2, 1)) * share            # (k, b, a)
        yield from self._transit(X)
        # second global hop k -> gd
        amt = (colD[cols][None, :] - D[:, cols]) * share                       # (k, d)
        yield self.gl_id[:, cols], self.gl_w[:, cols] * amt[:, :, None]
        # last leg: landing gateway in gd -> destination access switch
        ud, inv = np.unique(g_s, return_inverse=True)
        Tin = np.bincount(inv * ng + g_g, g_v, minlength=len(ud) * ng).reshape(len(ud), ng)
        amount = (Tin.sum(axis=1)[:, None] - Tin) * share                      # (n_d, k)
        gdu = ud // A
        w = self.gl_w[:, gdu].transpose(1, 0, 2) * amount[:, :, None]          # (n_d, k, c)
        gw = self.gl_dst[:, gdu].transpose(1, 0, 2)
        yield from self._from_gw(gw, np.broadcast_to(ud[:, None, None], gw.shape), w)


@njit(cache=True)
def _sum_by_key(key, val):
    """Distinct ``key`` values (sorted) and the sum of ``val`` per key, added in input order."""
    uk = np.unique(key)
    vv = np.zeros(len(uk))
    for q in range(len(key)):
        vv[np.searchsorted(uk, key[q])] += val[q]
    return uk, vv


@njit(cache=True)
def _dragonfly_minimal(ss, sd, v, pb, u, c, A, ng, local_id, gl_src, gl_dst, gl_id, gl_w, acc_buf):
    """`DragonflyRouter` minimal-routing network loads of explicit flows between access switches
    ``ss -> sd`` (``v`` bytes each) plus an all-to-all of ``pb`` bytes per host pair over hosts
    counted ``c`` per access switch ``u`` (sorted; ``pb = 0``: none): the aggregates of
    `_GroupedRouter._aggregates` and the pieces of `_GroupedRouter._network_pieces` built in the
    same order with the same operations, and summed per link in that order, so the result equals
    the numpy path's bit for bit. ``acc_buf``: zeros, one per link, left as found.
    Returns (sorted link ids, bytes)."""
    nacc = ng * A
    M = gl_w.shape[2]
    n, nu = len(ss), len(u)
    # --- aggregates: intra-group switch pairs, (switch, group), (group, switch), group pairs
    ni_cap = n + nu * nu
    i_s, i_d, i_v = np.empty(ni_cap, np.int64), np.empty(ni_cap, np.int64), np.empty(ni_cap)
    nx_cap = n + nu * ng
    s_s, s_g, s_v = np.empty(nx_cap, np.int64), np.empty(nx_cap, np.int64), np.empty(nx_cap)
    g_g, g_s, g_v = np.empty(nx_cap, np.int64), np.empty(nx_cap, np.int64), np.empty(nx_cap)
    ni = 0
    nx = 0
    D = np.zeros((ng, ng))
    for k in range(n):
        gs, gd = ss[k] // A, sd[k] // A
        if gs == gd:
            if ss[k] != sd[k]:
                i_s[ni], i_d[ni], i_v[ni] = ss[k], sd[k], v[k]
                ni += 1
        else:
            s_s[nx], s_g[nx], s_v[nx] = ss[k], gd, v[k]
            g_g[nx], g_s[nx], g_v[nx] = gs, sd[k], v[k]
            nx += 1
            D[gs, gd] += v[k]
    if pb != 0.0 and nu > 0:
        Cg = np.zeros(ng)
        for i in range(nu):
            Cg[u[i] // A] += c[i]
        for i in range(nu):            # switch pairs inside each group (u sorted: blocks per group)
            for j in range(nu):
                if u[j] // A == u[i] // A and i != j:
                    i_s[ni], i_d[ni], i_v[ni] = u[i], u[j], pb * c[i] * c[j]
                    ni += 1
        nJ = 0
        for k in range(ng):
            if Cg[k] != 0.0:
                nJ += 1
        if nJ > 1:
            for i in range(nu):
                for k in range(ng):
                    if Cg[k] != 0.0 and u[i] // A != k:
                        s_s[nx], s_g[nx], s_v[nx] = u[i], k, pb * c[i] * Cg[k]
                        g_g[nx], g_s[nx], g_v[nx] = k, u[i], pb * Cg[k] * c[i]
                        nx += 1
            for a in range(ng):
                for b in range(ng):
                    if a != b:
                        D[a, b] += pb * (Cg[a] * Cg[b])
    # --- pieces, in the order of the numpy path
    cap = ni + 2 * nx * M + ng * ng * M + 1
    eid = np.empty(cap, dtype=np.int64)
    ew = np.empty(cap)
    ne = 0
    for k in range(ni):
        eid[ne] = local_id[i_s[k], i_d[k] % A]
        ew[ne] = i_v[k]
        ne += 1
    any_d = False
    for a in range(ng):
        for b in range(ng):
            if D[a, b] != 0.0:
                any_d = True
    if any_d:
        # source switch -> gateways owning cables to the destination group (keys sorted)
        uk, vv = _sum_by_key(s_s[:nx] * ng + s_g[:nx], s_v[:nx])
        for i in range(len(uk)):
            s_u, gd = uk[i] // ng, uk[i] % ng
            gs = s_u // A
            for cc in range(M):
                gw = gl_src[gs, gd, cc]
                w = gl_w[gs, gd, cc] * vv[i]
                if w > 0 and s_u % A != gw:
                    eid[ne] = local_id[s_u, gw]
                    ew[ne] = w
                    ne += 1
        # the global cables
        for a in range(ng):
            for b in range(ng):
                if D[a, b] != 0.0:
                    for cc in range(M):
                        eid[ne] = gl_id[a, b, cc]
                        ew[ne] = gl_w[a, b, cc] * D[a, b]
                        ne += 1
        # landing gateways -> destination switch
        uk, vv = _sum_by_key(g_g[:nx] * nacc + g_s[:nx], g_v[:nx])
        for i in range(len(uk)):
            gs, d_u = uk[i] // nacc, uk[i] % nacc
            gd = d_u // A
            for cc in range(M):
                gw = gl_dst[gs, gd, cc]
                w = gl_w[gs, gd, cc] * vv[i]
                if w > 0 and d_u % A != gw:
                    eid[ne] = local_id[gd * A + gw, d_u % A]
                    ew[ne] = w
                    ne += 1
    # --- sum per link in emission order (as np.bincount does)
    touched = np.empty(ne, dtype=np.int64)
    nt = 0
    for k in range(ne):
        w = ew[k]
        if w > 0:
            l = eid[k]
            if acc_buf[l] == 0.0:
                touched[nt] = l
                nt += 1
            acc_buf[l] += w
    ids = np.sort(touched[:nt])
    out = np.empty(nt)
    for i in range(nt):
        out[i] = acc_buf[ids[i]]
        acc_buf[ids[i]] = 0.0
    return ids, out


@njit(cache=True)
def _strictly_increasing(h):
    """True when ``h[i] < h[i + 1]`` everywhere (a placer's sorted, duplicate-free node ids)."""
    for i in range(len(h) - 1):
        if h[i] >= h[i + 1]:
            return False
    return True


@njit(cache=True)
def _block_sum(a, lo, n):
    """numpy's pairwise-summation leaf for ``a[lo:lo + n]``, ``n <= 128``: a plain loop below 8
    values, else 8 interleaved accumulators combined as a tree, then the rest added in order."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    stop = n - n % 8
    while i < stop:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@njit(cache=True)
def _pairwise_sum(a, lo, n):
    """``a[lo:lo + n].sum()`` as numpy computes it for a contiguous float64 array (pairwise
    summation: ranges of at most 128 values summed by `_block_sum`, larger ones split in two at a
    multiple of 8 and the halves' sums added), so that compiled code reproduces numpy's sums bit
    for bit; the caller adds the result to ``0.0`` as ``np.add.reduce`` does. The recursion is
    unrolled into an explicit stack (numba's on-disk cache does not support recursive functions)."""
    if n <= 128:
        return _block_sum(a, lo, n)
    s_lo = np.empty(64, dtype=np.int64)     # frames: range, stage (0: split, 1: left done, 2: both)
    s_n = np.empty(64, dtype=np.int64)
    s_stage = np.zeros(64, dtype=np.int64)
    s_left = np.empty(64)
    sp = 1
    s_lo[0], s_n[0], s_stage[0] = lo, n, 0
    result = 0.0
    while sp > 0:
        t = sp - 1
        if s_n[t] <= 128 or s_stage[t] == 2:
            v = _block_sum(a, s_lo[t], s_n[t]) if s_n[t] <= 128 else s_left[t] + result
            sp -= 1
            if sp == 0:
                return v
            p = sp - 1
            if s_stage[p] == 1:               # v is the parent's left half: now its right half
                s_left[p] = v
                s_stage[p] = 2
                n2 = s_n[p] // 2
                n2 -= n2 % 8
                s_lo[sp], s_n[sp], s_stage[sp] = s_lo[p] + n2, s_n[p] - n2, 0
                sp += 1
            else:                             # v is the parent's right half
                result = v
            continue
        n2 = s_n[t] // 2                      # stage 0: descend into the left half
        n2 -= n2 % 8
        s_stage[t] = 1
        s_lo[sp], s_n[sp], s_stage[sp] = s_lo[t], n2, 0
        sp += 1
    return result


#: `_pattern_flows` codes of the `traffic.COMM_KINDS` with a compiled footprint
_KIND_CODE = {"alltoall": 0, "ring": 1, "allreduce": 2}


@njit(cache=True)
def _pattern_flows(code, n):
    """Ranks and bytes of ``traffic.pattern(kind, hosts, 1.0)`` for ``n >= 2`` ranks, with the same
    float operations: (src ranks, dst ranks, bytes per flow, pair_bytes). ``code``: `_KIND_CODE`."""
    if code == 0:                      # alltoall: implicit, 1 / (n - 1) per ordered pair
        z = np.zeros(0, dtype=np.int64)
        return z, z, np.zeros(0), 1.0 / (n - 1)
    if code == 1:                      # ring: both neighbours, half each (one neighbour for n = 2)
        if n == 2:
            return np.array([0, 1]), np.array([1, 0]), np.full(2, 1.0), 0.0
        src = np.empty(2 * n, dtype=np.int64)
        dst = np.empty(2 * n, dtype=np.int64)
        for r in range(n):
            src[r] = r
            dst[r] = (r + 1) % n
            src[n + r] = r
            dst[n + r] = (r - 1) % n
        return src, dst, np.full(2 * n, 1.0 / 2), 0.0
    src = np.arange(n)                 # allreduce, ring algorithm
    dst = np.empty(n, dtype=np.int64)
    for r in range(n):
        dst[r] = (r + 1) % n
    return src, dst, np.full(n, 2.0 * (n - 1) / n * 1.0), 0.0


@njit(cache=True)
def _dragonfly_footprint(code, h, host_acc, host_group, term_up, term_down, A, ng, local_id,
                         gl_src, gl_dst, gl_id, gl_w, acc_buf):
    """`Router.footprint` of a `DragonflyRouter` with minimal routing, in one compiled pass over
    the job's strictly increasing hosts ``h`` (``len(h) >= 2``): the pattern (`_pattern_flows`),
    bytes sent / received per host (as `Traffic.sent_per_host`), the switch-to-switch loads
    (`_dragonfly_minimal`), the merge with the terminal links (as `Router.link_loads`) and the
    global bytes (as `Router.global_bytes`, numpy's pairwise sums included), each with the numpy
    path's operations in its order, so the figures are equal bit for bit.
    Returns (smax, link ids, bytes, global bytes); ``smax <= 0``: the pattern sends nothing."""
    n = len(h)
    src, dst, nb, pb = _pattern_flows(code, n)
    nf = len(src)
    base = pb * max(n - 1, 0)
    sent_b = np.zeros(n)
    recv_b = np.zeros(n)
    for k in range(nf):                # np.bincount in flow order (hosts are distinct: no self flow)
        sent_b[src[k]] += nb[k]
        recv_b[dst[k]] += nb[k]
    sent = np.empty(n)
    recv = np.empty(n)
    smax = -np.inf
    for r in range(n):
        sent[r] = base + sent_b[r] if nf else base
        recv[r] = base + recv_b[r] if nf else base
        if sent[r] > smax:
            smax = sent[r]
    if not smax > 0:
        return smax, np.zeros(0, dtype=np.int64), np.zeros(0), 0.0
    # switch-to-switch part (DragonflyRouter._network_loads)
    ss = np.empty(nf, dtype=np.int64)
    sd = np.empty(nf, dtype=np.int64)
    for k in range(nf):
        ss[k] = host_acc[h[src[k]]]
        sd[k] = host_acc[h[dst[k]]]
    nu = 0
    u = np.empty(n, dtype=np.int64)
    c = np.zeros(n)
    if pb != 0.0:                      # np.unique(host_acc[h], return_counts=True): h is sorted
        for r in range(n):
            a = host_acc[h[r]]
            if nu == 0 or u[nu - 1] != a:
                u[nu] = a
                nu += 1
            c[nu - 1] += 1.0
    net_ids, net_w = _dragonfly_minimal(ss, sd, nb, pb, u[:nu], c[:nu], A, ng, local_id,
                                        gl_src, gl_dst, gl_id, gl_w, acc_buf)
    # merge with the terminal links (disjoint ids: a sort, no sums), dropping zero loads
    m = 2 * n + len(net_ids)
    ids = np.empty(m, dtype=np.int64)
    w = np.empty(m)
    q = 0
    for r in range(n):
        if sent[r] > 0:
            ids[q] = term_up[h[r]]
            w[q] = sent[r]
            q += 1
    for r in range(n):
        if recv[r] > 0:
            ids[q] = term_down[h[r]]
            w[q] = recv[r]
            q += 1
    for k in range(len(net_ids)):
        if net_w[k] > 0:
            ids[q] = net_ids[k]
            w[q] = net_w[k]
            q += 1
    order = np.argsort(ids[:q])
    out_ids = ids[:q][order]
    out_w = w[:q][order]
    # global bytes (Router.global_bytes)
    total = 0.0
    if nf:
        xb = np.empty(nf)
        nx = 0
        for k in range(nf):
            if host_group[h[src[k]]] != host_group[h[dst[k]]]:
                xb[nx] = nb[k]
                nx += 1
        total += 0.0 + _pairwise_sum(xb, 0, nx)
    if pb != 0.0:
        cg = np.zeros(n)               # hosts per group, groups in increasing order
        ngr = 0
        last = -1
        for r in range(n):
            g = host_group[h[r]]
            if g != last:
                ngr += 1
                last = g
            cg[ngr - 1] += 1.0
        for i in range(ngr):
            cg[i] = cg[i] * cg[i]
        total += pb * (float(n * n) - (0.0 + _pairwise_sum(cg, 0, ngr)))
    return smax, out_ids, out_w, total


class DragonflyRouter(_GroupedRouter):
    """Routing on `topology.dragonfly.dragonfly_graph` graphs."""

    kind = "dragonfly"

    def __init__(self, G: nx.Graph):
        t = G.graph["topology"]
        eid = self._bind_links(G)
        p, a, ng, H = t["p"], t["a"], t["g"], t["hosts"]
        self.n_hosts, self.n_groups, self.acc_per_group, self.n_acc = H, ng, a, ng * a
        self.host_acc = np.arange(H, dtype=np.int64) // p
        self.host_group = self.host_acc // a
        self._bind_terminals(eid, lambda s: ("sw", int(s // a), int(s % a)))
        self.local_id = _link_table(eid, (((gg * a + r1, r2), (("sw", gg, r1), ("sw", gg, r2)))
                                          for gg in range(ng) for r1 in range(a) for r2 in range(a) if r1 != r2),
                                    (ng * a, a))
        self._init_global(G, a)

    def _network_loads(self, traffic: Traffic, routing: str) -> LinkLoads:
        """Minimal routing by the compiled `_dragonfly_minimal` (same sums as the generic path,
        which handles Valiant routing and machines with unconnected group pairs)."""
        if routing != "minimal" or self.disconnected:
            return super()._network_loads(traffic, routing)
        if not hasattr(self, "_acc_buf"):
            self._acc_buf = np.zeros(self.n_links)
        acc = self.host_acc
        pb = float(traffic.pair_bytes) if traffic.n > 1 else 0.0
        if pb:
            u, c = np.unique(acc[traffic.hosts], return_counts=True)
        else:
            u, c = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        ids, w = _dragonfly_minimal(acc[traffic.src], acc[traffic.dst],
                                    np.ascontiguousarray(traffic.nbytes, dtype=np.float64), pb, u,
                                    c.astype(np.float64), self.acc_per_group, self.n_groups, self.local_id,
                                    self.gl_src, self.gl_dst, self.gl_id, self.gl_w, self._acc_buf)
        return LinkLoads(ids, w)

    def footprint(self, kind: str, hosts: np.ndarray, routing: str = "minimal",
                  cache: bool = True) -> Footprint | None:
        """`Router.footprint` by the compiled `_dragonfly_footprint` for minimal routing of the
        built-in patterns on sorted hosts (the same figures; other cases take the generic path)."""
        code = _KIND_CODE.get(kind)
        h = hosts
        if (code is None or routing != "minimal" or self.disconnected or not isinstance(h, np.ndarray)
                or h.dtype != np.int64 or h.ndim != 1 or len(h) < 2 or h[0] < 0 or h[-1] >= self.n_hosts
                or not _strictly_increasing(h)):
            return super().footprint(kind, hosts, routing, cache)
        if not hasattr(self, "_acc_buf"):
            self._acc_buf = np.zeros(self.n_links)
        smax, ids, w, gbytes = _dragonfly_footprint(code, h, self.host_acc, self.host_group, self.term_up,
                                                    self.term_down, self.acc_per_group, self.n_groups,
                                                    self.local_id, self.gl_src, self.gl_dst, self.gl_id,
                                                    self.gl_w, self._acc_buf)
        if not smax > 0:
            return None
        return Footprint(float(smax), LinkLoads(ids, w), float(gbytes))

    def _intra(self, ss, sd, v):
        yield self.local_id[ss, sd % self.acc_per_group], v

    def _to_gw(self, acc, gw, w):
        A = self.acc_per_group
        m = (w > 0) & (acc % A != gw)
        yield self.local_id[acc[m], gw[m]], w[m]

    def _from_gw(self, gw, acc, w):
        A = self.acc_per_group
        m = (w > 0) & (acc % A != gw)
        yield self.local_id[(acc[m] // A) * A + gw[m], acc[m] % A], w[m]

    def _transit(self, X):
        A = self.acc_per_group
        k, b, a = np.nonzero(X)
        m = b != a
        yield self.local_id[k[m] * A + b[m], a[m]], X[k[m], b[m], a[m]]


class DragonflyPlusRouter(_GroupedRouter):
    """Routing on `topology.dragonfly.dragonfly_plus_graph` graphs."""

    kind = "dragonfly_plus"

    def __init__(self, G: nx.Graph):
        t = G.graph["topology"]
        eid = self._bind_links(G)
        p, nl, ns, ng, H = t["hosts_per_leaf"], t["leaves"], t["spines"], t["groups"], t["hosts"]
        self.n_hosts, self.n_groups, self.acc_per_group, self.n_acc, self.n_spines = H, ng, nl, ng * nl, ns
        self.host_acc = np.arange(H, dtype=np.int64) // p
        self.host_group = self.host_acc // nl
        self._bind_terminals(eid, lambda s: ("leaf", int(s // nl), int(s % nl)))
        pairs = [((gg * nl + l, s), (("leaf", gg, l), ("spine", gg, s)))
                 for gg in range(ng) for l in range(nl) for s in range(ns)]
        self.up_id = _link_table(eid, pairs, (ng * nl, ns))
        self.down_id = np.where(self.up_id >= 0, self.up_id ^ 1, -1)
        self._init_global(G, ns)

    def _intra(self, ss, sd, v):
        out = np.bincount(ss, v, minlength=self.n_acc)
        inn = np.bincount(sd, v, minlength=self.n_acc)
        a = np.flatnonzero(out)
        yield self.up_id[a], np.repeat(out[a][:, None] / self.n_spines, self.n_spines, axis=1)
        b = np.flatnonzero(inn)
        yield self.down_id[b], np.repeat(inn[b][:, None] / self.n_spines, self.n_spines, axis=1)

    def _to_gw(self, acc, gw, w):
        m = w > 0
        yield self.up_id[acc[m], gw[m]], w[m]

    def _from_gw(self, gw, acc, w):
        m = w > 0
        yield self.down_id[acc[m], gw[m]], w[m]

    def _transit(self, X):
        nl, ng = self.acc_per_group, self.n_groups
        X = X.copy()
        idx = np.arange(X.shape[1])
        X[:, idx, idx] = 0.0
        R = X.sum(axis=2) / nl          # (k, b): spine b -> every leaf of group k
        C = X.sum(axis=1) / nl          # (k, a): every leaf of group k -> spine a
        leaves = np.arange(ng * nl).reshape(ng, nl)
        # down_id[leaf, spine]: spine -> leaf link
        yield self.down_id[leaves[:, :, None], idx[None, None, :]], np.broadcast_to(R[:, None, :], (ng, nl, len(idx)))
        yield self.up_id[leaves[:, :, None], idx[None, None, :]], np.broadcast_to(C[:, None, :], (ng, nl, len(idx)))


class FatTreeRouter(Router):
    """Routing on `topology.fattree.fat_tree_graph` graphs (3-level k-ary fat-tree)."""

    kind = "fat_tree"
    _switch_level = True

    def __init__(self, G: nx.Graph):
        t = G.graph["topology"]
        eid = self._bind_links(G)
        k, hpe, P, H = t["k"], t["hosts_per_edge"], t["pods"], t["hosts"]
        half = k // 2
        self.half, self.n_pods, self.n_hosts = half, P, H
        self.host_acc = np.arange(H, dtype=np.int64) // hpe
        self.host_group = self.host_acc // half
        self._bind_terminals(eid, lambda e: ("edge", int(e // half), int(e % half)))
        self.edge_up = _link_table(eid, (((p * half + i, j), (("edge", p, i), ("agg", p, j)))
                                         for p in range(P) for i in range(half) for j in range(half)), (P * half, half))
        self.agg_up = _link_table(eid, (((p * half + j, c), (("agg", p, j), ("core", j, c)))
                                        for p in range(P) for j in range(half) for c in range(half)), (P * half, half))

    def _network_pieces(self, traffic: Traffic, routing: str):
        ss, sd, v = self._switch_pairs(traffic, self.host_acc)
        if not len(ss):
            return
        half, nE = self.half, self.n_pods * self.half
        out_e = np.bincount(ss, v, minlength=nE)
        in_e = np.bincount(sd, v, minlength=nE)
        e = np.flatnonzero(out_e)
        yield self.edge_up[e], np.repeat(out_e[e][:, None] / half, half, axis=1)
        e = np.flatnonzero(in_e)
        yield self.edge_up[e] ^ 1, np.repeat(in_e[e][:, None] / half, half, axis=1)
        ps, pd = ss // half, sd // half
        m = ps != pd
        if not m.any():
            return
        out_p = np.bincount(ps[m], v[m], minlength=self.n_pods)
        in_p = np.bincount(pd[m], v[m], minlength=self.n_pods)
        for load, flip in ((out_p, 0), (in_p, 1)):
            p = np.flatnonzero(load)
            aggs = (p[:, None] * half + np.arange(half)[None, :]).ravel()
            ids = self.agg_up[aggs] ^ flip
            yield ids, np.repeat(np.repeat(load[p] / (half * half), half), half).reshape(ids.shape)


class LeafSpineRouter(Router):
    """Routing on `topology.fattree.leaf_spine_graph` graphs."""

    kind = "leaf_spine"
    _switch_level = True

    def __init__(self, G: nx.Graph):
        t = G.graph["topology"]
        eid = self._bind_links(G)
        p, nl, S, H = t["hosts_per_leaf"], t["leaves"], t["spines"], t["hosts"]
        self.n_hosts, self.n_leaves, self.n_spines = H, nl, S
        self.host_acc = np.arange(H, dtype=np.int64) // p
        self.host_group = self.host_acc.copy()
        self._bind_terminals(eid, lambda l: ("leaf", int(l)))
        self.up_id = _link_table(eid, (((l, s), (("leaf", l), ("spine", s))) for l in range(nl) for s in range(S)),
                                 (nl, S))

    def _network_pieces(self, traffic: Traffic, routing: str):
        ss, sd, v = self._switch_pairs(traffic, self.host_acc)
        if not len(ss):
            return
        S = self.n_spines
        for load, flip in ((np.bincount(ss, v, minlength=self.n_leaves), 0),
                           (np.bincount(sd, v, minlength=self.n_leaves), 1)):
            l = np.flatnonzero(load)
            yield self.up_id[l] ^ flip, np.repeat(load[l][:, None] / S, S, axis=1)


class TorusRouter(Router):
    """Dimension-order routing on an n-D torus, computed from the shape alone (no graph needed).

    Link ids: ``((i * D) + d) * 2 + s`` is the link leaving router ``i`` along dimension ``d`` in
    the ``+`` (``s = 0``) or ``-`` (``s = 1``) direction; ids ``2*H*D + 2*i`` / ``+ 1`` are host
    ``i``'s terminal links up / down. Dimensions of size 2 and mesh dimensions have no wrap-around
    link (their unused ids have bandwidth 0 and never carry load).
    """

    kind = "torus"

    def __init__(self, dims, block=None, periodic=None, bandwidth: float = 6.8e9,
                 terminal_bandwidth: float | None = None):
        dims, block, periodic = torus_shape(dims, block, periodic)
        self.dims, self.block = dims, block
        self.wrap = tuple(p and n > 2 for p, n in zip(periodic, dims))
        D = len(dims)
        H = int(np.prod(dims))
        self.n_hosts, self.D = H, D
        self.n_links = 2 * H * D + 2 * H
        coords = np.stack(np.unravel_index(np.arange(H), dims), axis=1)
        self.coords = coords
        self.host_group = block_of(coords, dims, block).astype(np.int64)
        bw_t = 2 * D * bandwidth if terminal_bandwidth is None else terminal_bandwidth
        self.bandwidth = np.zeros(self.n_links)
        self.link_kind = np.full(self.n_links, KIND_CODES["local"], dtype=np.int8)
        self.strides = np.array([int(np.prod(dims[d + 1:])) for d in range(D)], dtype=np.int64)
        for d, n in enumerate(dims):
            x = coords[:, d]
            plus_ok = (x < n - 1) | self.wrap[d]
            minus_ok = (x > 0) | self.wrap[d]
            if n == 1:
                plus_ok = minus_ok = np.zeros(H, bool)
            base = (np.arange(H) * D + d) * 2
            self.bandwidth[base] = np.where(plus_ok, bandwidth, 0.0)
            self.bandwidth[base + 1] = np.where(minus_ok, bandwidth, 0.0)
            nb_plus = np.arange(H) + np.where(x < n - 1, 1, -(n - 1)) * self.strides[d]
            nb_minus = np.arange(H) + np.where(x > 0, -1, n - 1) * self.strides[d]
            self.link_kind[base] = np.where(self.host_group == self.host_group[nb_plus], 1, 2)
            self.link_kind[base + 1] = np.where(self.host_group == self.host_group[nb_minus], 1, 2)
        tb = 2 * H * D
        self.bandwidth[tb:] = bw_t
        self.link_kind[tb:] = KIND_CODES["terminal"]
        self.term_up = tb + 2 * np.arange(H, dtype=np.int64)
        self.term_down = self.term_up + 1

    @classmethod
    def from_graph(cls, G: nx.Graph) -> "TorusRouter":
        t = G.graph["topology"]
        return cls(t["dims"], t["block"], t["periodic"], t["bandwidth"], t["terminal_bandwidth"])

    def endpoints(self, link: int):
        """Labels ``(u, v)`` of a directed link, as in `topology.torus.torus_graph`."""
        link = int(link)
        tb = 2 * self.n_hosts * self.D
        if link >= tb:
            i, s = divmod(link - tb, 2)
            return (i, ("rt", i)) if s == 0 else (("rt", i), i)
        i, r = divmod(link, 2 * self.D)
        d, s = divmod(r, 2)
        n, x = self.dims[d], self.coords[i, d]
        step = (1 if x < n - 1 else -(n - 1)) if s == 0 else (-1 if x > 0 else n - 1)
        return ("rt", i), ("rt", i + step * int(self.strides[d]))

    def _flows(self, traffic: Traffic, chunk: int = 2_000_000):
        """Explicit flows ``(src, dst, bytes)`` of ``traffic``, the all-to-all expanded into its
        ``n (n - 1)`` pairs in chunks of about ``chunk`` flows (only `_flow_network_pieces` uses the
        expansion: the reference the analytic `_alltoall_pieces` is tested against)."""
        if len(traffic.src):
            m = traffic.src != traffic.dst
            yield traffic.src[m], traffic.dst[m], traffic.nbytes[m]
        if traffic.pair_bytes and traffic.n > 1:
            h = traffic.hosts
            n = len(h)
            rows = max(1, chunk // n)
            for r0 in range(0, n, rows):
                I, J = np.meshgrid(np.arange(r0, min(n, r0 + rows)), np.arange(n), indexing="ij")
                m = I != J
                yield h[I[m]], h[J[m]], np.full(int(m.sum()), traffic.pair_bytes)

    def _network_pieces(self, traffic: Traffic, routing: str):
        """Explicit flows routed one by one (`_route_flows`); the uniform all-to-all part
        (``pair_bytes``) computed analytically per dimension (`_alltoall_pieces`), O(D * H) work
        whatever the number of hosts of the job, except for small jobs (at most
        `small_alltoall_flows` flows), whose flows are routed one by one (cheaper).
        Both give the same loads within float rounding (tested)."""
        if len(traffic.src):
            m = traffic.src != traffic.dst
            if m.any():
                yield from self._route_flows(traffic.src[m], traffic.dst[m], traffic.nbytes[m])
        if traffic.pair_bytes and traffic.n > 1:
            k = traffic.n
            if k * (k - 1) <= self.small_alltoall_flows:
                # a small job: its k (k - 1) flows cost less than the O(D * H) analytic sweep
                h = traffic.hosts
                I, J = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
                m = I != J
                yield from self._route_flows(h[I[m]], h[J[m]], np.full(int(m.sum()), float(traffic.pair_bytes)))
            else:
                yield from self._alltoall_pieces(traffic.hosts, float(traffic.pair_bytes))

    @property
    def small_alltoall_flows(self) -> int:
        """An all-to-all of at most this many flows (4,096, or H / 4 on large tori) is routed flow by
        flow: cheaper than the analytic O(D * H) sweep. Set ``_small_alltoall`` to override."""
        v = self.__dict__.get("_small_alltoall")
        return max(4096, self.n_hosts // 4) if v is None else int(v)

    def _flow_network_pieces(self, traffic: Traffic, routing: str = "minimal"):
        """Reference path: every flow of `_flows` (the all-to-all expanded into ``n^2`` flows)
        routed by `_route_flows`. O(n^2) for an all-to-all of n hosts; kept for tests."""
        for src, dst, w in self._flows(traffic):
            yield from self._route_flows(src, dst, w)

    def _route_flows(self, src: np.ndarray, dst: np.ndarray, w: np.ndarray):
        """Pieces ``(link ids, bytes)`` of explicit flows under dimension-order routing."""
        D = self.D
        cur = self.coords[src].copy()
        tgt = self.coords[dst]
        for d, n in enumerate(self.dims):
            if n == 1:
                continue
            x0, x1 = cur[:, d], tgt[:, d]
            if self.wrap[d]:
                f = (x1 - x0) % n
                fwd_len = np.where(2 * f <= n, f, 0)
                bwd_len = np.where(2 * f >= n, n - f, 0) * (f != 0)
                half = (2 * f == n)
                wf = np.where(half, 0.5 * w, w)
            else:
                fwd_len = np.maximum(x1 - x0, 0)
                bwd_len = np.maximum(x0 - x1, 0)
                wf = w
            # line index of every flow (all coordinates but d), positions 0..n-1 along d
            line = (cur * self.strides).sum(axis=1) - x0 * self.strides[d]
            for sgn, length in ((0, fwd_len), (1, bwd_len)):
                m = length > 0
                if not m.any():
                    continue
                ln, s0, L, ww = line[m], x0[m], length[m], wf[m]
                start = s0 if sgn == 0 else s0 - L + 1
                start = start % n
                # the lines used (line number = position-0 index compacted), each an (n + 1)
                # difference array: work in the flows, not in the machine size
                used, lnum = np.unique(self._line_number(ln, d), return_inverse=True)
                lnum = lnum.ravel()
                diff = np.zeros(len(used) * (n + 1))
                end = start + L
                wrapm = end > n
                diff += np.bincount(lnum * (n + 1) + start, ww, minlength=len(diff))
                diff -= np.bincount(lnum * (n + 1) + np.minimum(end, n), ww, minlength=len(diff))
                if wrapm.any():
                    diff += np.bincount(lnum[wrapm] * (n + 1), ww[wrapm], minlength=len(diff))
                    diff -= np.bincount(lnum[wrapm] * (n + 1) + (end[wrapm] - n), ww[wrapm], minlength=len(diff))
                load = np.cumsum(diff.reshape(len(used), n + 1), axis=1)[:, :n]
                st = int(self.strides[d])
                node = ((used // st) * (n * st) + used % st)[:, None] + np.arange(n)[None, :] * st
                keep = load > 1e-300
                yield (node[keep] * D + d) * 2 + sgn, load[keep]
            cur[:, d] = x1

    def _alltoall_pieces(self, hosts: np.ndarray, pair_bytes: float):
        """Pieces ``(link ids, bytes)`` of a uniform all-to-all: ``pair_bytes`` from every host of
        ``hosts`` to every other one, without listing the ``n (n - 1)`` flows.

        Derivation. Under dimension-order routing a flow ``s -> t`` crosses dimension ``d`` on
        the line ``l`` whose coordinates are ``t``'s in the dimensions ``< d`` (already corrected)
        and ``s``'s in the dimensions ``> d`` (not yet), from position ``a = s_d`` to ``b = t_d``.
        So the bytes on the link of ``l`` leaving position ``p`` in direction ``+`` are

            load+[x, p, y] = pair_bytes * sum_{a,b} T[x, b] * S[a, y] * cross+(a, b, p)

        where ``x`` = the line's coordinates in dims ``< d`` and ``y`` those in dims ``> d``
        (flattened in C order, so ``(x, p, y)`` flattened is the router id),
        ``S[a, y]`` = number of job hosts with coordinate ``a`` in ``d`` and ``y`` in dims ``> d``
        (any coordinates in dims ``< d``), ``T[x, b]`` = number of job hosts with ``x`` in dims
        ``< d`` and ``b`` in ``d`` (any in dims ``> d``), and ``cross+(a, b, p)`` the share of the
        path ``a -> b`` that uses the link ``p -> p+1``. The pairs ``s = t`` have ``a = b`` and
        cross nothing, so the sum may run over all pairs of hosts.

        ``cross+`` is ``c(a, b) * [p on the forward arc [a, a + f) mod n]`` with ``f = (b - a) mod n``
        and the weight ``c``: on a ring (wrap-around dimension of size > 2) 1 when ``0 < 2f < n``,
        1/2 when ``2f = n`` (the tie is split evenly over both directions), else 0; on a mesh 1 when
        ``b > a``, else 0. The backward direction is the forward one in the reflected coordinate
        ``n - 1 - p`` (a backward arc ``a -> b`` over the links leaving ``a, a-1, ..., b+1`` in
        direction ``-`` maps onto the forward arc ``a' -> b'`` over the links leaving
        ``a', ..., b'-1``, with the weight of ``(a - b) mod n``), so `_dor_forward` is applied to
        ``S``, ``T`` reversed along ``d`` and its result reversed back.

        `_dor_forward` sums the arcs with a difference array over the unrolled ring (positions
        ``0 .. 2n-1``: the arc ``[a, a + f)`` never wraps there, and position ``q`` of the
        unrolled ring is link ``q mod n``):

            diff[x, q, y] = [q < n] S[q, y] * sum_f c_f T[x, (q + f) mod n]
                            - T[x, q mod n] * sum_f c_f S[q - f, y]     (S = 0 outside 0..n-1)

        and the load is ``cumsum_q(diff)[q] + cumsum_q(diff)[q + n]``. The window sums over ``f``
        are differences of prefix sums, so the whole is O(H) per dimension and direction. Host
        counts (and the 1/2 of a tie) are exact in float64 up to 2^53, so every count sum is exact
        and the only rounding is the final product by ``pair_bytes`` (the flow-by-flow path
        accumulates rounding from its sums; the two agree to ~1e-15 relative).
        """
        D = self.D
        occ = np.zeros(self.n_hosts)
        occ[hosts] = 1.0
        occ = occ.reshape(self.dims)
        for d, n in enumerate(self.dims):
            if n == 1:
                continue
            nx_ = int(np.prod(self.dims[:d]))
            ny_ = int(np.prod(self.dims[d + 1:]))
            S = occ.sum(axis=tuple(range(d))).reshape(n, ny_) if d else occ.reshape(n, ny_)
            T = occ.sum(axis=tuple(range(d + 1, D))).reshape(nx_, n) if d < D - 1 else occ.reshape(nx_, n)
            wrap = self.wrap[d]
            fwd = _dor_forward(S, T, n, wrap)
            bwd = _dor_forward(S[::-1], T[:, ::-1], n, wrap)[:, ::-1, :]
            for sgn, load in ((0, fwd), (1, bwd)):
                flat = load.ravel()
                nz = np.flatnonzero(flat > 0)
                if len(nz):
                    yield (nz * D + d) * 2 + sgn, flat[nz] * pair_bytes

    def _line_number(self, line_lin: np.ndarray, d: int) -> np.ndarray:
        """Map the linear index of a line's position 0 (coordinate d = 0) to a line number 0..H/n-1."""
        n, s = self.dims[d], int(self.strides[d])
        # indices with coordinate d = 0: i = hi * (n * s) + lo, lo < s -> line number hi * s + lo
        return (line_lin // (n * s)) * s + line_lin % s


def _dor_forward(S: np.ndarray, T: np.ndarray, n: int, wrap: bool) -> np.ndarray:
    """Pair counts on the ``+`` links of the lines of one dimension of size ``n`` (see
    `TorusRouter._alltoall_pieces`): ``out[x, p, y] = sum_{a,b} T[x, b] S[a, y] cross+(a, b, p)``.

    ``S`` (n, ny), ``T`` (nx, n) host counts (float64, integer valued); ``wrap``: the dimension
    is a ring of size > 2 (shorter way, tie split 1/2 - 1/2), else a mesh line. Returns (nx, n, ny).
    """
    if not wrap:
        # mesh: the forward pairs over link p -> p+1 are exactly a <= p < b
        s_pre = np.cumsum(S, axis=0)                                   # sum_{a <= p} S[a, y]
        t_suf = T.sum(axis=1, keepdims=True) - np.cumsum(T, axis=1)    # sum_{b > p} T[x, b]
        return t_suf[:, :, None] * s_pre[None, :, :]
    m = (n - 1) // 2                 # offsets f = 1..m have weight 1 (2f < n)
    tie = n % 2 == 0                 # f = n/2 has weight 1/2
    nx_, ny_ = T.shape[0], S.shape[1]
    # TC[x, q] = sum_f c_f T[x, (q + f) mod n]: window of the doubled row
    TT = np.concatenate([T, T], axis=1)
    PT = np.concatenate([np.zeros((nx_, 1)), np.cumsum(TT, axis=1)], axis=1)   # (nx, 2n + 1)
    q = np.arange(n)
    TC = PT[:, q + m + 1] - PT[:, q + 1]
    if tie:
        TC = TC + 0.5 * T[:, (q + n // 2) % n]
    # SC[q, y] = sum_f c_f S[q - f, y] for q = 0..2n-1, S = 0 outside 0..n-1
    Sp = np.concatenate([S, np.zeros((n, ny_))], axis=0)                        # (2n, ny)
    PS = np.concatenate([np.zeros((1, ny_)), np.cumsum(Sp, axis=0)], axis=0)    # (2n + 1, ny)
    q2 = np.arange(2 * n)
    SC = PS[q2] - PS[np.maximum(q2 - m, 0)]
    if tie:
        k = q2 - n // 2
        ok = (k >= 0) & (k < n)
        SC[ok] += 0.5 * S[k[ok]]
    diff = np.empty((nx_, 2 * n, ny_))
    diff[:, :n, :] = TC[:, :, None] * S[None, :, :]
    diff[:, n:, :] = 0.0
    diff -= T[:, q2 % n][:, :, None] * SC[None, :, :]
    c = np.cumsum(diff, axis=1)
    return c[:, :n, :] + c[:, n:, :]


def make_router(G: nx.Graph) -> Router:
    """The `Router` for a graph built by `topology.dragonfly`, `topology.fattree` or `topology.torus`."""
    t = G.graph.get("topology")
    if not isinstance(t, dict) or "kind" not in t:
        raise TopologyError("graph has no graph['topology'] description; build it with a topology.* builder")
    kind = t["kind"]
    if kind == "dragonfly":
        return DragonflyRouter(G)
    if kind == "dragonfly_plus":
        return DragonflyPlusRouter(G)
    if kind == "fat_tree":
        return FatTreeRouter(G)
    if kind == "leaf_spine":
        return LeafSpineRouter(G)
    if kind == "torus":
        return TorusRouter.from_graph(G)
    raise TopologyError(f"no router for topology kind {kind!r}")
