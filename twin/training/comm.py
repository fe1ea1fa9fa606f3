"""Communication of a training job on its nodes: rank layout, fabric step times, collective times.

**Rank layout** (Megatron-LM's default order ``tp-cp-ep-dp-pp``): rank ``r = tp + T (cp + C (dp +
D pp))``, TP fastest; rank r runs on the job's node ``r // gpus_per_node`` (job nodes sorted). The
data-parallel gradient group is the DP x CP ranks of one (pipeline stage, TP index).

**A step** is a set of simultaneous messages (rank -> rank, bytes), all concurrent groups of a
collective at once (e.g. the DP all-reduces of every TP x PP position). Its time is ``alpha`` (the
intra- or inter-node latency) plus the largest of

* intra-node: the most bytes one GPU sends or receives to/from GPUs of its node / ``intra_bw``;
* inter-node, **graph** (`GraphFabric`, used when the job's nodes are given): the bytes on every
  directed link from `topology.routing` (the project's routers: minimal routing with ECMP on fat
  trees and Dragonflies; Valiant on a Dragonfly on request) over the system's topology graph,
  divided by the link bandwidth left by ``background``; the busiest link sets the time;
* inter-node, **analytic** (`AnalyticFabric`, no graph: any N in microseconds): the same minimal
  routing summed per level with numpy: node injection (terminal link); leaf-spine: bytes leaving /
  entering a leaf over its ``spines`` up-links; fat-tree: bytes leaving an edge switch over its k/2
  up-links and leaving a pod over its (k/2)^2 core links; Dragonfly: bytes between two switches of a
  group over their one local link, bytes between two groups over their ``links_per_pair`` global
  cables (the local hops to and from the gateway switches are not counted: spread by ECMP);
  Dragonfly+: bytes leaving a leaf over its spine links, bytes between two groups over their
  cables. With contiguous placement this equals the graph path's busiest link on fat trees and
  leaf-spine fabrics and Dragonflies (tested).

Dragonfly local links: Slingshot routes adaptively inside a group, which the topology package's
routers (minimal, single local hop) do not model; both paths therefore pool the local links of a
switch: a switch's bytes to / from the other switches of its group share its ``a - 1`` local links
(graph path: the router's local-link loads summed per switch over the switch's local capacity).
Without this a ring between two switches would squeeze onto one 200 Gb/s cable.

Every bandwidth is multiplied by ``comm_eff`` (achieved share of the line rate, `constants`).
``background``: None; a share f in [0, 1) of the bandwidth of every *global* link (Dragonfly
inter-group cables, fat-tree core links, leaf-spine up-links: where other jobs' traffic meets a
job's) taken by other jobs; or (graph path) an array of per-directed-link background bytes/s
(``router.n_links`` long).

**Collectives** use the schedules of `topology.collectives` (`build_schedule`; ring by default):
each step's messages are replicated over the concurrent groups and costed as above; steps with the
same message pattern are costed once.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from hpctwin.topology.collectives import build_schedule


def rank_grid(tp: int, cp: int, dp: int, pp: int) -> np.ndarray:
    """Global rank ids shaped (pp, dp, cp, tp) in Megatron order (TP fastest)."""
    return np.arange(tp * cp * dp * pp, dtype=np.int64).reshape(pp, dp, cp, tp)


def tp_groups(R: np.ndarray) -> np.ndarray:
    """(groups, tp) rank ids of the tensor-parallel groups."""
    return R.reshape(-1, R.shape[3])


def cp_groups(R: np.ndarray) -> np.ndarray:
    """(groups, cp) rank ids of the context-parallel groups."""
    return R.transpose(0, 1, 3, 2).reshape(-1, R.shape[2])


def dp_groups(R: np.ndarray) -> np.ndarray:
    """(groups, dp x cp) rank ids of the gradient-reduction groups (one per stage and TP index)."""
    return R.transpose(0, 3, 1, 2).reshape(-1, R.shape[1] * R.shape[2])


def ep_groups(R: np.ndarray, ep: int) -> np.ndarray:
    """(groups, ep) rank ids of the expert-parallel groups (``ep`` consecutive DP ranks)."""
    pp, dp, cp, tp = R.shape
    return R.reshape(pp, dp // ep, ep, cp, tp).transpose(0, 1, 3, 4, 2).reshape(-1, ep)


@lru_cache(maxsize=256)
def schedule(collective: str, algorithm: str, p: int):
    """Cached `topology.collectives.build_schedule`."""
    return build_schedule(collective, algorithm, p)


class Fabric:
    """Step costing common to both paths; ``rank_node``: node (machine id) of every rank."""

    def __init__(self, machine, rank_node: np.ndarray, comm_eff: float, background=None):
        self.machine = machine
        self.rank_node = np.asarray(rank_node, dtype=np.int64)
        self.eff = float(comm_eff)
        gpu = machine.gpu
        self.intra_bw = gpu.intra_bw * self.eff
        self.intra_alpha = gpu.intra_alpha
        self.net_alpha = machine.preset.net_alpha
        self.bg = 0.0 if background is None or not np.isscalar(background) else float(background)

    def step_time(self, src: np.ndarray, dst: np.ndarray, nbytes) -> float:
        """Seconds of one step of messages ``src[k] -> dst[k]`` (rank ids) of ``nbytes`` bytes."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        w = np.broadcast_to(np.asarray(nbytes, dtype=np.float64), src.shape)
        sn, dn = self.rank_node[src], self.rank_node[dst]
        intra = sn == dn
        t = 0.0
        if intra.any():
            n = len(self.rank_node)
            out = np.bincount(src[intra], w[intra], minlength=n).max()
            inn = np.bincount(dst[intra], w[intra], minlength=n).max()
            t = max(out, inn) / self.intra_bw
        if (~intra).any():
            x = ~intra
            return self.net_alpha + max(t, self._network_time(sn[x], dn[x], w[x]))
        return self.intra_alpha + t if intra.any() else 0.0

    def _network_time(self, sn, dn, w) -> float:
        raise NotImplementedError


def _pair_max(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> float:
    """Largest byte sum over ordered pairs (a, b) with a != b (0 if none)."""
    m = a != b
    if not m.any():
        return 0.0
    key = a[m] * (int(max(a.max(), b.max())) + 1) + b[m]
    return float(np.bincount(np.unique(key, return_inverse=True)[1].ravel(), w[m]).max())


def _side_max(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> float:
    """Largest bytes leaving or entering one unit (bytes with a != b, by a and by b)."""
    m = a != b
    if not m.any():
        return 0.0
    return float(max(np.bincount(a[m], w[m]).max(), np.bincount(b[m], w[m]).max()))


class AnalyticFabric(Fabric):
    """Per-level minimal-routing loads from the fabric parameters (see the module docstring)."""

    def _network_time(self, sn, dn, w) -> float:
        p = self.machine.params
        kind = p["kind"]
        eff, free = self.eff, 1.0 - self.bg
        t = _side_max(sn, dn, w) / (p["terminal_bandwidth"] * eff)
        if kind == "leaf_spine":
            hl = int(p.get("hosts_per_leaf", 32))
            up = p.get("spines") or hl
            t = max(t, _side_max(sn // hl, dn // hl, w) / (up * p.get("global_bandwidth", p["terminal_bandwidth"])
                                                             * eff * free))
        elif kind == "fat_tree":
            half = int(p["k"]) // 2
            hpe = int(p.get("hosts_per_edge") or half)
            e_s, e_d = sn // hpe, dn // hpe
            t = max(t, _side_max(e_s, e_d, w) / (half * p["local_bandwidth"] * eff),
                    _side_max(e_s // half, e_d // half, w) / (half * half * p["global_bandwidth"] * eff * free))
        elif kind == "dragonfly":
            a, hp = int(p["a"]), int(p["p"])
            s_s, s_d = sn // hp, dn // hp
            g_s, g_d = s_s // a, s_d // a
            same = g_s == g_d
            lp = p.get("links_per_pair") or 1
            t = max(t, _side_max(s_s[same], s_d[same], w[same]) / ((a - 1) * p["local_bandwidth"] * eff),
                    _pair_max(g_s, g_d, w) / (lp * p["global_bandwidth"] * eff * free))
        elif kind == "dragonfly_plus":
            hl, nl = int(p["hosts_per_leaf"]), int(p["leaves"])
            l_s, l_d = sn // hl, dn // hl
            lp = p.get("links_per_pair") or 1
            t = max(t, _side_max(l_s, l_d, w) / (p["spines"] * p["local_bandwidth"] * eff),
                    _pair_max(l_s // nl, l_d // nl, w) / (lp * p["global_bandwidth"] * eff * free))
        else:
            raise ValueError(f"the training model has no fabric rule for a {kind} network")
        return t


class GraphFabric(Fabric):
    """Link loads from `topology.routing` on the system's topology graph."""

    def __init__(self, machine, rank_node, comm_eff, background=None, routing: str = "minimal"):
        super().__init__(machine, rank_node, comm_eff, background)
        self.router = router_for(machine)
        if routing not in self.router.routings:
            raise ValueError(f"routing = {routing!r}: a {machine.params['kind']} network offers "
                             f"{', '.join(self.router.routings)}")
        self.routing = routing
        cap = np.asarray(self.router.bandwidth, dtype=np.float64) * self.eff
        if background is not None and not np.isscalar(background):
            bg = np.asarray(background, dtype=np.float64)
            if bg.shape != cap.shape:
                raise ValueError(f"background: expected {cap.size} per-link values (bytes/s), got shape {bg.shape}")
            cap = np.asarray(self.router.bandwidth, dtype=np.float64) * self.eff - bg * self.eff
            if (cap <= 0).any():
                raise ValueError("background: some links are loaded to or beyond their bandwidth")
        elif self.bg:
            cap = np.where(self.router.link_kind == 2, cap * (1.0 - self.bg), cap)
        self.capacity = cap
        self.pool = _local_pools(self.router) if machine.params["kind"] == "dragonfly" else None

    def _network_time(self, sn, dn, w) -> float:
        from hpctwin.topology.traffic import Traffic  # noqa: PLC0415
        hosts = np.unique(np.concatenate([sn, dn]))
        loads = self.router.link_loads(Traffic(hosts, sn, dn, np.ascontiguousarray(w)), self.routing)
        ids, nb = loads.ids, loads.nbytes
        if self.pool is None:
            return float((nb / self.capacity[ids]).max())
        src_sw, dst_sw, nsw = self.pool
        local = src_sw[ids] >= 0
        t = float((nb[~local] / self.capacity[ids[~local]]).max()) if (~local).any() else 0.0
        if local.any():
            li, lb = ids[local], nb[local]
            cap_out = np.bincount(src_sw[src_sw >= 0], self.capacity[src_sw >= 0], minlength=nsw)
            out = np.bincount(src_sw[li], lb, minlength=nsw)
            inn = np.bincount(dst_sw[li], lb, minlength=nsw)
            t = max(t, float(np.max(np.maximum(out, inn) / np.where(cap_out > 0, cap_out, np.inf))))
        return t


_POOLS: dict = {}


def _local_pools(router) -> tuple[np.ndarray, np.ndarray, int]:
    """(source switch index, destination switch index) of every directed local link (-1 for other
    links) and the number of switches, for pooling a Dragonfly switch's local links."""
    got = _POOLS.get(id(router))
    if got is None:
        kind = np.asarray(router.link_kind)
        src = np.full(router.n_links, -1, dtype=np.int64)
        dst = np.full(router.n_links, -1, dtype=np.int64)
        index: dict = {}
        for l in np.flatnonzero(kind == 1):
            u, v = router.links.endpoints(int(l))
            src[l] = index.setdefault(u, len(index))
            dst[l] = index.setdefault(v, len(index))
        got = _POOLS[id(router)] = (src, dst, len(index))
    return got


_ROUTERS: dict = {}


def router_for(machine):
    """The `topology.routing` router of ``machine``'s graph (built once per fabric and size)."""
    key = (repr(sorted(machine.table.items())), machine.nodes)
    r = _ROUTERS.get(key)
    if r is None:
        from hpctwin.topology.presets import build_network  # noqa: PLC0415
        from hpctwin.topology.routing import make_router  # noqa: PLC0415
        r = make_router(build_network(machine.table, machine.nodes, source=f"system {machine.preset.name!r}"))
        _ROUTERS[key] = r
    return r


def collective_time(fabric: Fabric, collective: str, groups: np.ndarray, nbytes: float,
                    algorithm: str = "ring") -> float:
    """Seconds of ``collective`` on every group (row of ``groups``, rank ids) at once, reference
    buffer ``nbytes`` bytes per group (`topology.collectives.schedule` conventions)."""
    groups = np.asarray(groups, dtype=np.int64)
    p = groups.shape[1]
    if p < 2 or nbytes <= 0:
        return 0.0
    sched = schedule(collective, algorithm, p)
    bb = sched.block_bytes(nbytes)
    seen: dict = {}
    total = 0.0
    for st in sched.steps:
        if st.nmsg == 0:
            continue
        key = (st.src.tobytes(), st.dst.tobytes(), np.asarray(st.count).tobytes())
        t = seen.get(key)
        if t is None:
            src = groups[:, st.src].ravel()
            dst = groups[:, st.dst].ravel()
            w = np.tile(np.asarray(st.count, dtype=np.float64) * bb, groups.shape[0])
            t = seen[key] = fabric.step_time(src, dst, w)
        total += t
    return total
