"""Costing a :class:`Schedule`: alpha-beta-gamma model, global-link bytes, link loads on a topology.

Units: seconds, bytes, bytes/s.  ``nbytes`` is always the collective's reference buffer (see
:mod:`topology.collectives.schedule`), so a message of ``c`` blocks carries ``c * nbytes /
schedule.unit_blocks`` bytes.

Alpha-beta-gamma (Hockney with a reduction term).  A step costs
``alpha * k + beta * b + gamma * g`` where ``k`` is the largest number of messages any rank sends or
receives in the step, ``b`` the largest number of bytes any rank sends or receives (full-duplex
ports), ``g`` the largest number of bytes any rank reduces; the schedule costs the sum over steps.
Local copies (block reordering, the Bine block remap) are free in this model.

Link loads.  Every message follows one minimal (fewest hops) path of the networkx topology (hosts
are ints with a ``group`` attribute, edges carry ``bandwidth`` in bytes/s; the convention of
``topology.presets``).  Links are full duplex: each direction of an edge is its own link.  A step
costs ``alpha + max over links (bytes on the link / bandwidth)``.  Paths are breadth-first from the
source switch only (no all-pairs search), cached per switch pair; ties go to networkx's adjacency
order, so the routing is deterministic but single-path (no ECMP splitting, no adaptive routing).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpctwin.topology.traffic import Traffic

from .schedule import Schedule

__all__ = ["AlphaBetaGamma", "global_bytes", "global_bytes_per_step", "rank_groups",
           "ShortestPathRouter", "link_loads", "LinkLoadResult"]


@dataclass(frozen=True)
class AlphaBetaGamma:
    """alpha: latency per message (s); beta: time per byte (s/B); gamma: reduction time per byte (s/B)."""

    alpha: float
    beta: float
    gamma: float = 0.0

    def step_times(self, sched: Schedule, nbytes: float) -> np.ndarray:
        """Per-step time (s) for a reference buffer of ``nbytes`` bytes."""
        bb = sched.block_bytes(nbytes)
        p = sched.p
        out = np.empty(sched.nsteps)
        for k, st in enumerate(sched.steps):
            if st.nmsg == 0:
                out[k] = 0.0
                continue
            cnt = np.asarray(st.count, dtype=np.float64)
            sent = np.bincount(st.src, weights=cnt, minlength=p)
            recv = np.bincount(st.dst, weights=cnt, minlength=p)
            nmax = max(np.bincount(st.src, minlength=p).max(), np.bincount(st.dst, minlength=p).max())
            b = max(sent.max(), recv.max()) * bb
            g = recv.max() * bb if st.reduce else 0.0
            out[k] = self.alpha * nmax + self.beta * b + self.gamma * g
        return out

    def time(self, sched: Schedule, nbytes: float) -> float:
        """Total modelled time (s) of the schedule."""
        return float(self.step_times(sched, nbytes).sum())


def rank_groups(rank_host: np.ndarray, host_group: np.ndarray) -> np.ndarray:
    """Group of every rank: ``host_group[rank_host[r]]``; ValueError on unknown hosts."""
    rank_host = np.asarray(rank_host, dtype=np.int64)
    host_group = np.asarray(host_group)
    if rank_host.size and (rank_host.min() < 0 or rank_host.max() >= host_group.size):
        raise ValueError(f"rank -> host mapping refers to hosts outside 0..{host_group.size - 1}")
    return host_group[rank_host]


def _check_groups(sched: Schedule, rank_group: np.ndarray) -> np.ndarray:
    g = np.asarray(rank_group)
    if g.shape != (sched.p,):
        raise ValueError(f"rank_group must have one entry per rank ({sched.p}), got shape {g.shape}")
    return g


def global_bytes(sched: Schedule, rank_group: np.ndarray, nbytes: float = 1.0) -> float:
    """Bytes crossing group boundaries (global links), summed over all messages.

    With ``nbytes=1`` the result is in units of the reference buffer (as in the Bine paper's counts).
    """
    return float(global_bytes_per_step(sched, rank_group, nbytes).sum())


_FLAT_LIMIT = 2_000_000  # messages; above this, count step by step (no giant concatenation)


def global_bytes_per_step(sched: Schedule, rank_group: np.ndarray, nbytes: float = 1.0) -> np.ndarray:
    """Global bytes of each step (array of length ``nsteps``)."""
    g = _check_groups(sched, rank_group)
    bb = sched.block_bytes(nbytes)
    if sched.nmessages <= _FLAT_LIMIT:
        idx, src, dst, cnt = sched.flat()
        cross = g[src] != g[dst]
        return np.bincount(idx[cross], weights=cnt[cross].astype(np.float64), minlength=sched.nsteps) * bb
    out = np.zeros(sched.nsteps)
    cache: dict = {}
    for k, st in enumerate(sched.steps):
        key = (id(st.src), id(st.dst))
        cross = cache.get(key)
        if cross is None:
            cross = g[st.src] != g[st.dst]
            cache[key] = cross
        out[k] = st.count[cross].sum() if st.count.strides[0] else st.count[0] * np.count_nonzero(cross)
    return out * bb


class ShortestPathRouter:
    """Minimal-hop single-path routing on a networkx host/switch graph (see module docstring).

    ``links`` lists the directed links (u, v); ``bandwidth[i]`` is link i's bandwidth in bytes/s.
    A host attached to several switches uses its first neighbour in adjacency order.
    """

    def __init__(self, graph) -> None:
        import networkx as nx  # noqa: PLC0415 - only the link-load path needs it

        self._nx = nx
        self.graph = graph
        links, bw = [], []
        for u, v, data in graph.edges(data=True):
            if "bandwidth" not in data:
                raise ValueError(f"edge ({u!r}, {v!r}) has no 'bandwidth' attribute (bytes/s)")
            b = float(data["bandwidth"])
            if not b > 0:
                raise ValueError(f"edge ({u!r}, {v!r}) has bandwidth {b}; must be > 0 bytes/s")
            links += [(u, v), (v, u)]
            bw += [b, b]
        self.links = links
        self.link_index = {e: i for i, e in enumerate(links)}
        self.bandwidth = np.asarray(bw, dtype=np.float64)
        self._hosts = sorted(n for n in graph.nodes if isinstance(n, (int, np.integer)))
        self._switch_of: dict = {}
        self._paths: dict = {}
        self._sw_graph = graph.subgraph([n for n in graph.nodes if not isinstance(n, (int, np.integer))])

    def switch_of(self, h: int):
        """The switch host ``h`` is attached to (first neighbour)."""
        sw = self._switch_of.get(h)
        if sw is None:
            if h not in self.graph:
                raise ValueError(f"host {h} is not a node of the topology graph")
            nbrs = list(self.graph.neighbors(h))
            if not nbrs:
                raise ValueError(f"host {h} has no link in the topology graph")
            sw = nbrs[0]
            self._switch_of[h] = sw
        return sw

    def _switch_path(self, a, b) -> np.ndarray:
        key = (a, b)
        path = self._paths.get(key)
        if path is None:
            tree = self._nx.single_source_shortest_path(self._sw_graph, a)
            for t, nodes in tree.items():
                self._paths[(a, t)] = np.array([self.link_index[(x, y)] for x, y in zip(nodes[:-1], nodes[1:])],
                                                dtype=np.int64)
            path = self._paths.get(key)
            if path is None:
                raise ValueError(f"no path between switches {a!r} and {b!r}")
        return path

    def host_path(self, h1: int, h2: int) -> np.ndarray:
        """Directed link ids from host h1 to host h2 (empty if h1 == h2)."""
        if h1 == h2:
            return np.zeros(0, dtype=np.int64)
        s1, s2 = self.switch_of(h1), self.switch_of(h2)
        if s1 == h2 or s2 == h1:  # host-to-host direct cable (unusual)
            return np.array([self.link_index[(h1, h2)]], dtype=np.int64)
        mid = self._switch_path(s1, s2)
        return np.concatenate([[self.link_index[(h1, s1)]], mid, [self.link_index[(s2, h2)]]]).astype(np.int64)

    def incidence(self, src_hosts: np.ndarray, dst_hosts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(message index, link id) pairs of every message's path, vectorised over unique host pairs."""
        pairs = np.stack([np.asarray(src_hosts, np.int64), np.asarray(dst_hosts, np.int64)], axis=1)
        uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
        inv = inv.ravel()
        upaths = [self.host_path(int(a), int(b)) for a, b in uniq]
        lens = np.array([len(x) for x in upaths], dtype=np.int64)
        flat = np.concatenate(upaths) if upaths else np.zeros(0, np.int64)
        offs = np.concatenate([[0], np.cumsum(lens)])
        mlen = lens[inv]
        msg = np.repeat(np.arange(len(inv), dtype=np.int64), mlen)
        pos = np.repeat(offs[inv], mlen) + (np.arange(mlen.sum()) - np.repeat(np.cumsum(mlen) - mlen, mlen))
        return msg, flat[pos]


@dataclass
class LinkLoadResult:
    """Per-step link-load figures: ``step_time`` (s), ``max_link_bytes`` (bytes on the busiest link),
    ``bottleneck`` (link id of the busiest link in time), and the total bytes per link over the whole
    collective (``link_bytes``, aligned with ``router.links``)."""

    step_time: np.ndarray
    max_link_bytes: np.ndarray
    bottleneck: np.ndarray
    link_bytes: np.ndarray

    @property
    def time(self) -> float:
        """Total time (s)."""
        return float(self.step_time.sum())


def link_loads(sched: Schedule, graph_or_router, rank_host: np.ndarray, nbytes: float,
               alpha: float = 0.0, routing: str = "minimal") -> LinkLoadResult:
    """Route every message of ``sched`` on the topology and load the links step by step.

    ``graph_or_router``: a networkx graph (routed here by :class:`ShortestPathRouter`), a
    :class:`ShortestPathRouter`, or a ``topology.routing.Router`` (anything with ``dense_loads(traffic,
    routing)`` and ``bandwidth``: structural minimal/Valiant routing with ECMP, used via
    ``topology.traffic.Traffic``).  ``rank_host[r]`` is the host (graph node int) of rank r;
    ``alpha`` (s) is added once per step.  Step time = alpha + max over links of bytes / bandwidth.
    """
    rank_host = np.asarray(rank_host, dtype=np.int64)
    if rank_host.shape != (sched.p,):
        raise ValueError(f"rank_host must have one host per rank ({sched.p}), got shape {rank_host.shape}")
    if np.unique(rank_host).size != rank_host.size:
        raise ValueError("rank_host maps two ranks to the same host; one rank per host is assumed")
    bb = sched.block_bytes(nbytes)
    structural = hasattr(graph_or_router, "dense_loads")
    if structural:
        router = graph_or_router
        hosts = np.unique(rank_host)
    else:
        router = (graph_or_router if isinstance(graph_or_router, ShortestPathRouter)
                  else ShortestPathRouter(graph_or_router))
    bandwidth = np.asarray(router.bandwidth, dtype=np.float64)
    nl = bandwidth.size
    total = np.zeros(nl)
    st_time = np.zeros(sched.nsteps)
    st_max = np.zeros(sched.nsteps)
    st_bot = np.full(sched.nsteps, -1, dtype=np.int64)
    cache: dict = {}
    for k, st in enumerate(sched.steps):
        if st.nmsg == 0:
            continue
        w_msg = np.asarray(st.count, dtype=np.float64) * bb
        if structural:
            tr = Traffic(hosts, rank_host[st.src], rank_host[st.dst], np.ascontiguousarray(w_msg))
            load = router.dense_loads(tr, routing)
        else:
            key = (id(st.src), id(st.dst))
            inc = cache.get(key)
            if inc is None:
                inc = router.incidence(rank_host[st.src], rank_host[st.dst])
                cache[key] = inc
            msg, link = inc
            load = np.bincount(link, weights=w_msg[msg], minlength=nl)
        total += load
        t = load / bandwidth
        i = int(np.argmax(t))
        st_time[k] = alpha + t[i]
        st_max[k] = load.max()
        st_bot[k] = i
    return LinkLoadResult(st_time, st_max, st_bot, total)
