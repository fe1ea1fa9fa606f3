"""KV-cache transfers of disaggregated serving as flows on the twin's interconnect (issue 16 item 2).

A prefill instance hands a finished prompt's KV cache (``2 x layers x KV heads x head_dim x bytes per
element x prompt tokens``, `ModelShape.kv_bytes_per_token`) to a decode instance. Here that transfer is
a network flow between the nodes the two instances occupy on a system's topology (`topology.presets`
builds the graph of the system file's ``[network]`` table, `topology.routing` routes):

* **Placement** (`place_instances`): an instance of TP ``t`` holds ``t`` GPUs of one node (never split
  across nodes), filled in GPU order: ``"pools"`` (default) puts the prefill pool on the first nodes and
  starts the decode pool on the next empty node (every transfer crosses the network); ``"packed"`` fills
  GPU slots in order, prefill then decode, so a node may hold both; or an explicit node id per
  instance (prefill instances first, then decode).
* **Links of a flow**: the router's directed links between the two nodes with their ECMP weights
  (`Router.link_loads` of a one-byte flow: a link on ``k`` equal-cost paths carries ``1/k``), plus two
  links of each instance: its NICs (``t / gpus_per_node`` of its node's terminal bandwidth: one NIC
  rail per GPU, as a DGX's 8 ConnectX-7 for 8 H100) and its device-to-device links. A transfer between
  two instances of one node uses only their device-to-device links (NVLink; `D2D`), each of capacity
  ``t x`` the per-GPU bandwidth, so its rate is ``min(t_p, t_d) x`` that bandwidth, as the
  rank-pair rule of `pd.kv_transfer_s`.
* **Sharing**: the flows in flight share every link max-min fairly (weighted progressive filling,
  `topology.contention.max_min_fair`, the same solver the batch twin's network contention model uses);
  rates are recomputed whenever a flow starts or ends (a fluid model: between two such events every
  flow keeps its rate).
* **Latency**: a flow's bytes are on the wire from its start until its transmission completes; the KV
  is usable at the decode instance one path latency later (the expected sum of the link latencies over
  its ECMP paths; the device link's latency for an intra-node transfer).

Units: bytes, seconds, bytes/s (1 GB/s = 1e9 B/s).
"""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from typing import Sequence

import numpy as np

from hpctwin.topology.contention import max_min_fair
from hpctwin.topology.routing import Router, make_router
from hpctwin.topology.traffic import Traffic

from .limits import MAX_GBPS, check_number

#: device-to-device bandwidth per GPU and direction (GB/s) and latency (s) of an intra-node transfer
D2D: dict[str, tuple[float, float]] = {
    # NVIDIA H100 Tensor Core GPU datasheet (SXM5): NVLink 900 GB/s total, i.e. 450 GB/s per direction;
    # latency: assumption, a few microseconds for a peer-to-peer copy over NVSwitch (order of magnitude)
    "h100-80gb": (450.0, 2e-6),
    # NVIDIA A100 Tensor Core GPU datasheet (SXM4): NVLink 600 GB/s total, 300 GB/s per direction;
    # latency: the same assumption
    "a100-80gb": (300.0, 2e-6),
    # no NVLink on the RTX cards: LLMServingSim's bench configs give their GPU-to-GPU link as
    # link_bw 16 GB/s with link_latency 1000 ns (RTX 4090) / 20000 ns (RTX PRO 6000), the figures the TP
    # all-reduce of profiles.py uses (deployment.GPUS)
    "RTX4090": (16.0, 1000e-9),
    "RTXPRO6000": (16.0, 20000e-9),
}
D2D["H100"], D2D["A100"] = D2D["h100-80gb"], D2D["a100-80gb"]

PLACEMENTS = ("pools", "packed")


class KVNetworkError(ValueError):
    """A KV network that cannot be built (no GPUs, too few nodes, bad placement, unknown device link)."""


def place_instances(tps: Sequence[int], n_prefill: int, gpus_per_node: int, n_nodes: int,
                    placement: str | Sequence[int] = "pools") -> list[int]:
    """Node id of every instance (``tps``: TP degree per instance, the ``n_prefill`` prefill ones first).

    ``placement``: ``"pools"``, ``"packed"`` (module docstring) or one node id per instance. Raises
    `KVNetworkError` when an instance needs more GPUs than a node has, a node is over-full, or the
    deployment needs more nodes than the system has."""
    if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, Integral) or gpus_per_node < 1:
        raise KVNetworkError(f"the system has no GPUs (gpus_per_node = {gpus_per_node!r}): a serving deployment "
                             "cannot be placed")
    for k, t in enumerate(tps):
        if isinstance(t, bool) or not isinstance(t, Integral) or not 1 <= t <= gpus_per_node:
            raise KVNetworkError(f"instance {k}: TP {t} does not fit on one node of {gpus_per_node} GPUs")
    if isinstance(placement, str):
        if placement not in PLACEMENTS:
            raise KVNetworkError(f"unknown placement {placement!r}; choose {', '.join(PLACEMENTS)} or give one "
                                 "node id per instance")
        nodes, node, used = [], 0, 0
        for k, t in enumerate(tps):
            if k == n_prefill and placement == "pools" and used:
                node, used = node + 1, 0
            if used + t > gpus_per_node:
                node, used = node + 1, 0
            nodes.append(node)
            used += t
    else:
        bad = [x for x in placement if isinstance(x, bool) or not isinstance(x, Integral)]
        if bad:
            raise KVNetworkError(f"placement: node id {bad[0]!r} is not a whole number (give one node id per "
                                 "instance, e.g. 0,0,1)")
        nodes = [int(x) for x in placement]
        if len(nodes) != len(tps):
            raise KVNetworkError(f"placement gives {len(nodes)} node ids for {len(tps)} instances")
        load: dict[int, int] = {}
        for k, (nd, t) in enumerate(zip(nodes, tps)):
            if nd < 0:
                raise KVNetworkError(f"placement: instance {k} on node {nd} (node ids start at 0)")
            load[nd] = load.get(nd, 0) + t
            if load[nd] > gpus_per_node:
                raise KVNetworkError(f"placement: node {nd} would hold {load[nd]} GPUs of instances, it has "
                                     f"{gpus_per_node}")
    if nodes and max(nodes) >= n_nodes:
        raise KVNetworkError(f"the deployment needs node {max(nodes)} but the system has {n_nodes} nodes "
                             f"(0..{n_nodes - 1})")
    return nodes


def d2d_of(hardware: str | None, d2d_GBps: float | None = None, d2d_latency_s: float | None = None
           ) -> tuple[float, float]:
    """(bytes/s, s) of the device-to-device link per GPU of ``hardware`` (`D2D`), or the given figures."""
    if d2d_GBps is None:
        if hardware not in D2D:
            raise KVNetworkError(f"no device-to-device bandwidth known for GPU type {hardware!r} (known: "
                                 f"{', '.join(D2D)}); give it (d2d_GBps / --kv-d2d-GBps)")
        d2d_GBps, lat = D2D[hardware]
        d2d_latency_s = lat if d2d_latency_s is None else d2d_latency_s
    check_number(d2d_GBps, "device-to-device bandwidth (d2d_GBps / --kv-d2d-GBps)", KVNetworkError, lo_open=True,
                 hi=MAX_GBPS, unit="GB/s", hint="looks like B/s or MB/s; give GB/s")
    if d2d_latency_s is not None:
        check_number(d2d_latency_s, "device-to-device latency", KVNetworkError, hi=1.0, unit="s")
    return float(d2d_GBps) * 1e9, float(d2d_latency_s or 0.0)


class KVNetwork:
    """The interconnect as KV transfers see it: a `Router`, link latencies and the instances' places.

    ``instances``: ``(iid, tp, node)`` per instance; ``graph``: the topology graph (its edges'
    ``latency`` attributes, seconds); ``d2d_Bps`` / ``d2d_latency_s``: per-GPU device link."""

    def __init__(self, router: Router, graph, instances: Sequence[tuple[int, int, int]], gpus_per_node: int,
                 d2d_Bps: float, d2d_latency_s: float = 0.0, routing: str = "minimal", name: str = "") -> None:
        self.router, self.graph, self.routing, self.name = router, graph, routing, name
        if routing not in router.routings:
            raise KVNetworkError(f"{routing} routing is not defined for a {router.kind} topology (available: "
                                 f"{', '.join(router.routings)})")
        self.gpus_per_node = int(gpus_per_node)
        self.d2d_Bps, self.d2d_latency_s = float(d2d_Bps), float(d2d_latency_s)
        L = router.n_links
        self.node_of: dict[int, int] = {}
        self._vlink: dict[int, int] = {}      # iid -> first of its 4 links: NIC out, NIC in, d2d out, d2d in
        cap = [np.asarray(router.bandwidth, dtype=np.float64)]
        for k, (iid, tp, node) in enumerate(instances):
            if not 0 <= node < router.n_hosts:
                raise KVNetworkError(f"instance {iid}: node {node} is not a host of the topology "
                                     f"(0..{router.n_hosts - 1})")
            self.node_of[iid] = int(node)
            self._vlink[iid] = L + 4 * k
            nic = float(router.bandwidth[router.term_up[node]]) * tp / self.gpus_per_node
            cap.append(np.array([nic, nic, tp * self.d2d_Bps, tp * self.d2d_Bps]))
        self.capacity = np.concatenate(cap)
        bad = np.flatnonzero(~(np.isfinite(self.capacity) & (self.capacity > 0)))
        if len(bad):
            k = int(bad[0])
            what = f"link {k} of the topology" if k < L else f"instance link {k - L} (NIC share or device link)"
            raise KVNetworkError(f"{name or 'KV network'}: {what} has a bandwidth of {self.capacity[k]!r} B/s; every "
                                 "link needs a finite bandwidth > 0 (check the system's [network] bandwidths)")
        self._paths: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, float]] = {}

    @classmethod
    def from_system(cls, system, prefill: Sequence, decode: Sequence, hardware: str | None = None,
                    placement: str | Sequence[int] = "pools", d2d_GBps: float | None = None,
                    d2d_latency_s: float | None = None, routing: str = "minimal") -> "KVNetwork":
        """The network of a `SystemSpec` (or a built-in name / TOML path) with the two pools placed on it."""
        from hpctwin.topology.presets import build_network  # noqa: PLC0415
        from hpctwin.twin.system import load_system  # noqa: PLC0415
        spec = load_system(system) if isinstance(system, str) else system
        insts = list(prefill) + list(decode)
        tps = [x.model.tp for x in insts]
        nodes = place_instances(tps, len(prefill), spec.gpus_per_node, spec.nodes, placement)
        table = dict(spec.network or {"preset": "generic"})
        G = build_network(table, spec.nodes, f"system file {spec.path} [network]")
        bps, lat = d2d_of(hardware, d2d_GBps, d2d_latency_s)
        return cls(make_router(G), G, [(x.iid, t, n) for x, t, n in zip(insts, tps, nodes)], spec.gpus_per_node,
                   bps, lat, routing, spec.name)

    def _link_latency(self, link: int) -> float:
        R = self.router
        u, v = R.links.endpoints(link) if hasattr(R, "links") else R.endpoints(link)
        return float(self.graph.edges[u, v].get("latency", 0.0))

    def route(self, src_iid: int, dst_iid: int) -> tuple[np.ndarray, np.ndarray, float]:
        """(link ids into `capacity`, bytes per byte sent on each, latency s) of a transfer."""
        a, b = self.node_of[src_iid], self.node_of[dst_iid]
        vs, vd = self._vlink[src_iid], self._vlink[dst_iid]
        if a == b:
            return np.array([vs + 2, vd + 3]), np.ones(2), self.d2d_latency_s
        key = (a, b)
        if key not in self._paths:
            lo, hi = min(a, b), max(a, b)
            t = Traffic(np.array([lo, hi]), np.array([a]), np.array([b]), np.array([1.0]))
            ll = self.router.link_loads(t, self.routing)
            lat = float(sum(w * self._link_latency(int(l)) for l, w in zip(ll.ids, ll.nbytes)))
            self._paths[key] = (ll.ids.astype(np.int64), ll.nbytes.astype(np.float64), lat)
        ids, w, lat = self._paths[key]
        return np.concatenate([[vs, vd + 1], ids]), np.concatenate([[1.0, 1.0], w]), lat



class DynamicKVNetwork(KVNetwork):
    """A `KVNetwork` whose instances join as their node-request jobs start (`add_instance`), on the nodes
    the batch scheduler chose (the batch-coupled P/D deployment, `batch.ServingBatchModel`)."""

    def __init__(self, router, graph, gpus_per_node: int, d2d_Bps: float, d2d_latency_s: float = 0.0,
                 routing: str = "minimal", name: str = "") -> None:
        super().__init__(router, graph, [], gpus_per_node, d2d_Bps, d2d_latency_s, routing, name)

    @classmethod
    def from_system(cls, spec, hardware: str, gpus_per_node: int, d2d_GBps: float | None = None,
                    routing: str = "minimal") -> "DynamicKVNetwork":
        """The network of a `SystemSpec`'s ``[network]`` table, no instance placed yet."""
        from hpctwin.topology.presets import build_network  # noqa: PLC0415
        G = build_network(dict(spec.network), spec.nodes, f"system file {spec.path} [network]")
        bps, lat = d2d_of(hardware, d2d_GBps or None)
        return cls(make_router(G), G, gpus_per_node, bps, lat, routing, spec.name)

    def add_instance(self, iid: int, tp: int, node: int) -> None:
        """Instance ``iid`` (TP ``tp``) now runs on ``node``: its NIC share and device links join."""
        R = self.router
        if not 0 <= node < R.n_hosts:
            raise KVNetworkError(f"instance {iid}: node {node} is not a host of the topology (0..{R.n_hosts - 1})")
        if not 1 <= tp <= self.gpus_per_node:
            raise KVNetworkError(f"instance {iid}: TP {tp} does not fit on one node of {self.gpus_per_node} GPUs; "
                                 "KV flows need one node per instance (serving.kv_network = off)")
        self.node_of[iid] = int(node)
        self._vlink[iid] = len(self.capacity)
        nic = float(R.bandwidth[R.term_up[node]]) * tp / self.gpus_per_node
        self.capacity = np.concatenate((self.capacity, [nic, nic, tp * self.d2d_Bps, tp * self.d2d_Bps]))

class _Flow:
    __slots__ = ("key", "size", "rem", "rate", "ids", "w", "latency")

    def __init__(self, key, size: float, ids: np.ndarray, w: np.ndarray, latency: float) -> None:
        self.key, self.size, self.rem, self.rate = key, size, size, 0.0
        self.ids, self.w, self.latency = ids, w, latency


class FlowSet:
    """Transfers in flight on a `KVNetwork`, sharing its links max-min fairly (fluid model).

    `add` starts a flow at time ``t``; `next_done` is the earliest transmission end at the current
    rates; `pop_done(t)` ends the flows done at ``t`` and returns ``(key, latency)`` for each. Times
    must not go backwards."""

    def __init__(self, net: KVNetwork) -> None:
        self.net = net
        self.t = 0.0
        self.flows: list[_Flow] = []
        self.max_concurrent = 0
        self.solves = 0

    def _progress(self, t: float) -> None:
        if t < self.t:
            raise RuntimeError(f"KV flows: time went back from {self.t:.9f} to {t:.9f} s")
        dt = t - self.t
        if dt > 0:
            for f in self.flows:
                f.rem = max(0.0, f.rem - f.rate * dt)
        self.t = t

    def _solve(self) -> None:
        fl = self.flows
        if not fl:
            return
        ids = np.concatenate([f.ids for f in fl])
        w = np.concatenate([f.w for f in fl])
        owner = np.repeat(np.arange(len(fl)), [len(f.ids) for f in fl])
        u, inv = np.unique(ids, return_inverse=True)
        rates = max_min_fair(self.net.capacity[u], inv, owner, w, len(fl))
        self.solves += 1
        for f, x in zip(fl, rates):
            if not (x > 0 and np.isfinite(x)):
                raise RuntimeError(f"KV flow {f.key}: rate {x} B/s (a link of zero capacity on its path?)")
            f.rate = float(x)

    def add(self, t: float, key, src_iid: int, dst_iid: int, nbytes: float) -> None:
        """Start sending ``nbytes`` bytes from instance ``src_iid`` to ``dst_iid`` at ``t`` (s)."""
        self._progress(t)
        ids, w, lat = self.net.route(src_iid, dst_iid)
        self.flows.append(_Flow(key, float(nbytes), ids, w, lat))
        self.max_concurrent = max(self.max_concurrent, len(self.flows))
        self._solve()

    def next_done(self) -> float:
        """Earliest transmission end (s) at the current rates (inf when nothing is in flight)."""
        return min((self.t + f.rem / f.rate for f in self.flows), default=float("inf"))

    def pop_done(self, t: float) -> list[tuple[object, float]]:
        """End the flows whose transmission is done by ``t``; ``(key, latency s)`` in start order."""
        done = [f for f in self.flows if self.t + f.rem / f.rate <= t]
        self._progress(t)
        if done:
            gone = {id(f) for f in done}
            self.flows = [f for f in self.flows if id(f) not in gone]
            self._solve()
        return [(f.key, f.latency) for f in done]


@dataclass
class TransferLog:
    """Per-transfer records of a run: start, transmission end and arrival (s), bytes, intra-node."""
    start: list
    end: list
    arrival: list
    nbytes: list
    intra: list

    def summary(self) -> dict:
        if not self.start:
            return {"transfers": 0}
        d = np.asarray(self.arrival) - np.asarray(self.start)
        return {"transfers": len(d), "intra_node_transfers": int(sum(self.intra)),
                "transfer_s_mean": float(d.mean()), "transfer_s_p50": float(np.percentile(d, 50)),
                "transfer_s_p99": float(np.percentile(d, 99)), "transfer_s_max": float(d.max())}
