"""A disaggregated prefill/decode (P/D) serving deployment as jobs of the batch scheduler (issue 16).

`ServingBatchPDModel` is the ``serving.mode = "pd"`` form of `twin.serving.batch.ServingBatchModel`: two
pools of instances, each instance one node-request job (``ceil(tp / gpus_per_node)`` nodes of its pool's
TP), all waiting in the same batch queue as the log's jobs. Everything the colocated model does (held
node requests, cold starts, leases and renewal, withdrawal of queued requests, drains, failures) holds per
pool; what differs:

* **Pools.** ``prefill_*`` and ``decode_*`` keys: GPU type (``*_hardware``), TP (``*_tp``), bounds
  (``*_min_instances``, ``*_max_instances``) and the first tick's (or the fixed policy's) count
  (``*_instances``). Each pool has its own bounded set of held jobs (``serving.slots`` each, default
  16 x its max + 16).
* **Requests.** An arrival goes to a serving prefill instance (the ``router``), which computes the prompt
  and produces the first token there. The prompt's KV then goes to a decode instance chosen when the
  prompt completes (`pd.simulate_pd`'s rule; a request finding no serving decode instance waits at the
  decode router until one serves, its KV kept on the prefill side); the decode instance sets aside its
  KV blocks while the transfer is in flight (`pd.reserve_kv`, `pd.land_kv`), and the request joins its
  queue when the KV has arrived: TTFT = prefill done; the second token follows the transfer
  (`pd.kv_transfer_s`: ``2 x layers x KV heads x head_dim x bytes x tokens`` over ``min(tp_p, tp_d)``
  links of ``kv_link_GBps``, plus ``kv_latency_s``) and decode admission.
* **Controller.** Every ``interval_s``: ``fixed`` holds ``prefill_instances`` / ``decode_instances``;
  ``decode_tps`` (HeteroScale) sizes the decode pool by decode tokens/s over ``tps_per_instance`` and holds
  the prefill pool at ``ceil(decode x pd_ratio)`` (`autoscale.RatioPolicy`; ``pd_ratio`` 0: the initial
  counts' ratio); ``utilization`` runs HPA on each pool's own busy (or KV) signal. Each count is clamped to
  its pool's bounds; scale-down withdraws the pool's queued requests, then releases its loading
  instances, then drains its newest active ones. A draining decode instance is released at its last
  token once no KV transfer to it is in flight.
* **Failures.** A prefill instance lost: the requests whose prompt it had not finished start over on the
  prefill pool. A decode instance lost: the requests it held or was receiving start over from the
  prefill pool (the KV is gone with the node; TTFT still counts from the original arrival).

**KV on the topology** (``serving.kv_network``: ``auto``, the default, when the run's system has a
``[network]`` table and GPUs; ``on``; ``off``): the transfer is a flow between the nodes the batch
scheduler gave the two instances (`kvflow`: the routed links and each instance's NIC share, max-min fair
with the other transfers in flight, usable one path latency after its last byte) instead of the formula.
An instance must fit on one node there (TP <= GPUs per node).

**Power** (``--power on``): `twin.serving.power_feed` drives each node request's node power from its
instance's phases with its own pool's GPU type and TP (prefill instances at prefill power while busy,
decode instances at decode power, idle otherwise); the KV transfer's own power is not modelled.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from .autoscale import DecodeTPSPolicy, FixedPolicy, PoolView, RatioPolicy, UtilizationPolicy, cold_start_s
from .batch import INF, ServingBatchConfig, ServingBatchModel, _Inst
from .cluster import ROUTERS
from .energy import power_for
from .kvflow import FlowSet, KVNetwork, KVNetworkError
from .pd import land_kv, start_kv_transfer

POOLS = ("prefill", "decode")


@dataclass
class Pool:
    """One pool of a P/D deployment: its engine factory and sizes (times in s)."""

    name: str
    make: object                    # iid -> Instance
    tp: int
    hardware: str
    nodes: int                      # nodes per instance (one node-request job)
    cold_s: float
    lo: int                         # first slot index of the pool
    n_slots: int
    lo_bound: int
    hi_bound: int
    initial: int
    power: object = None            # energy.PhasePower of its hardware, or None
    next_slot: int = 0

    def __post_init__(self) -> None:
        self.next_slot = self.lo


class _PDInst(_Inst):
    __slots__ = ("pool",)


class DynamicKVNetwork(KVNetwork):
    """A `kvflow.KVNetwork` whose instances join as their node-request jobs start (`add_instance`), on
    the nodes the batch scheduler chose."""

    def __init__(self, router, graph, gpus_per_node: int, d2d_Bps: float, d2d_latency_s: float = 0.0,
                 routing: str = "minimal", name: str = "") -> None:
        super().__init__(router, graph, [], gpus_per_node, d2d_Bps, d2d_latency_s, routing, name)

    @classmethod
    def from_system(cls, spec, hardware: str, gpus_per_node: int, d2d_GBps: float | None = None,
                    routing: str = "minimal") -> "DynamicKVNetwork":
        from hpctwin.topology.presets import build_network  # noqa: PLC0415
        from hpctwin.topology.routing import make_router  # noqa: PLC0415
        from .kvflow import d2d_of  # noqa: PLC0415
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


class ServingBatchPDModel(ServingBatchModel):
    """See the module docstring. ``make_prefill`` / ``make_decode``: ``iid -> Instance`` of each pool;
    ``weight_bytes``: weights per GPU of (prefill, decode) instances (bytes, for the cold starts);
    ``policy``: an object with ``desired_pd(prefill view, decode view) -> (prefill, decode)``."""

    def __init__(self, cfg: ServingBatchConfig, trace: list, make_prefill, make_decode, gpus_per_node: int = 1,
                 weight_bytes: tuple[float, float] = (0.0, 0.0), policy=None,
                 kv_network: DynamicKVNetwork | None = None) -> None:
        super().__init__(cfg, trace, make_prefill, gpus_per_node, weight_bytes[0], policy=None)
        self._custom_pd = policy
        self.net = kv_network                          # KV transfers as flows on it (None: the formula)
        self.pools: dict[str, Pool] = {}
        lo = 0
        for name, make, w in (("prefill", make_prefill, weight_bytes[0]), ("decode", make_decode, weight_bytes[1])):
            tp = getattr(cfg, f"{name}_tp") or cfg.tp
            hw = getattr(cfg, f"{name}_hardware") or cfg.hardware
            hi = getattr(cfg, f"{name}_max_instances")
            k = cfg.slots or 16 * hi + 16
            try:
                pw = power_for(hw)
            except KeyError:
                pw = None
            self.pools[name] = Pool(name, make, tp, hw, -(-tp // self.gpn), cold_start_s(w, cfg.load_GBps, cfg.startup_s),
                                    lo, k, getattr(cfg, f"{name}_min_instances"), hi,
                                    getattr(cfg, f"{name}_instances"), pw)
            lo += k
        self.slots = lo
        self.nodes_per_instance = max(p.nodes for p in self.pools.values())   # bind's machine-size check
        cfg.check_work(self.span_s, max(p.cold_s for p in self.pools.values()))   # the decode pool's cold start

    # ------------------------------------------------------------------ before the run
    def held_jobs(self, workload):
        wl = super().held_jobs(workload)
        for p in self.pools.values():
            wl.procs[p.lo:p.lo + p.n_slots] = p.nodes
        return wl

    def bind(self, ctx) -> None:
        super().bind(ctx)
        self.slot_pool = [""] * self.slots
        for p in self.pools.values():
            self.slot_pool[p.lo:p.lo + p.n_slots] = [p.name] * p.n_slots
        self.pick_d = ROUTERS[self.cfg.router]()
        self.kv_starts: list = []       # (prompt done s, uid, attempt, request, prefill instance index)
        self.kv_land: list = []         # (KV usable s, uid, attempt, request, decode instance index)
        self.waiting_d: list = []       # prompts done, no serving decode instance yet
        self.handed: dict[int, float] = {}     # uid -> prompt done (s), this attempt
        self.prevs = {n: {"t": self.t_start, "busy": 0.0, "tok": 0} for n in POOLS}
        self.kv = {"transfers": 0, "bytes": 0, "reservations_deferred": 0, "waited_for_decode": 0,
                   "transfer_s": [], "decode_wait_s": []}
        self.log_pools = {n: [] for n in POOLS}  # per tick: (active, starting, pending)
        self.flows = FlowSet(self.net) if self.net is not None else None
        self.inflight: dict[tuple, tuple] = {}   # (uid, attempt) -> (request, decode instance index, start s)
        c = self.cfg
        if self._custom_pd is not None:
            self.pd_policy = self._custom_pd
        elif c.policy == "fixed":
            self.pd_policy = _Fixed(c.prefill_instances, c.decode_instances)
        elif c.policy == "decode_tps":
            ratio = c.pd_ratio or c.prefill_instances / c.decode_instances
            self.pd_policy = RatioPolicy(DecodeTPSPolicy(c.tps_per_instance, window_s=c.window_s), ratio)
        else:
            self.pd_policy = _PerPool(UtilizationPolicy(c.target, window_s=c.window_s, metric=c.metric),
                                      UtilizationPolicy(c.target, window_s=c.window_s, metric=c.metric))

    # ------------------------------------------------------------------ instances
    def _in(self, pool: str, *states: str) -> list:
        return [i for i in self.insts if i.pool == pool and i.state in states]

    def on_start(self, now: float, job: int, nodes: np.ndarray):
        s = self._request_started(now, job)
        if s is None:
            return None
        p = self.pools[self.slot_pool[s]]
        cold = self._cold_s(job, p.cold_s)
        x = p.make(len(self.insts))
        x.role = p.name
        if self.net is not None:
            self.net.add_instance(x.iid, p.tp, int(nodes[0]))
        inst = _PDInst(x, job, now, now + cold, self.slot[s] == "lost_unwanted")
        inst.pool = p.name
        self._place(inst, s, now)
        return None

    # ------------------------------------------------------------------ the serving world
    def _advance(self, t: float) -> None:
        """Arrivals, activations, transfer starts and KV landings up to ``t``, in time order (landing,
        start, activation, arrival at a tie); the prefill pool first (it never waits for decode)."""
        reqs, order, act = self.reqs, self.order, self.activations
        while True:
            ta = reqs[order[self.ai]].arrival if self.ai < len(order) else INF
            tr = act[0][0] if act else INF
            t1 = min(ta, tr, t)
            for i in self._in("prefill", "active"):
                i.x.advance_until(t1)
            self._collect()
            ts = self.kv_starts[0][0] if self.kv_starts else INF
            tl = self.kv_land[0][0] if self.kv_land else INF
            tf = self.flows.next_done() if self.flows is not None else INF
            te = min(ta, tr, ts, tl, tf)
            if te > t or te == INF:
                break
            for i in self._in("decode", "active"):
                i.x.advance_until(te)
            if tl == te:
                self._land(te, *heapq.heappop(self.kv_land)[1:])
            elif tf == te:
                for key, lat in self.flows.pop_done(te):
                    r, k, _ = self.inflight[key]
                    heapq.heappush(self.kv_land, (te + lat, key[0], key[1], r, k))
            elif ts == te:
                _, uid, att, r, _ = heapq.heappop(self.kv_starts)
                if att == self.retries[uid]:
                    self._transfer(r, te)
            elif tr <= ta:
                _, k = heapq.heappop(act)
                self._activate(self.insts[k], tr)
            else:
                self._route(reqs[order[self.ai]], ta)
                self.ai += 1
        for i in self._in("decode", "active"):
            i.x.advance_until(t)

    def _collect(self) -> None:
        """Prompts the prefill instances finished: their KV transfers are due at the prompt's end."""
        for k, i in enumerate(self.insts):
            if i.pool == "prefill" and i.x.handoffs:
                for end, r in i.x.handoffs:
                    self.handed[r.uid] = end
                    heapq.heappush(self.kv_starts, (end, r.uid, int(self.retries[r.uid]), r, k))
                i.x.handoffs.clear()

    def _transfer(self, r, t: float) -> None:
        """``r``'s prompt is done (or a decode instance now serves): send its KV to a decode instance."""
        act = self._in("decode", "active")
        if not act:
            self.waiting_d.append((r, t))
            return
        x = self.pick_d([a.x for a in act], r)
        k = next(n for n, i in enumerate(self.insts) if i.x is x)
        src = self.insts[next(n for n, i in enumerate(self.insts) if i.x.iid == r.prefill_instance)].x
        dt, nbytes, reserved = start_kv_transfer(src, x, r, self.cfg.kv_link_GBps, self.cfg.kv_latency_s)
        self.kv["reservations_deferred"] += not reserved
        self.kv["transfers"] += 1
        self.kv["bytes"] += nbytes
        self.insts[k].routed.append(r)
        if self.flows is not None:                     # a flow on the topology: lands when sent + latency
            key = (r.uid, int(self.retries[r.uid]))     # a restarted request's old flow keeps its own key
            self.inflight[key] = (r, k, t)
            self.flows.add(t, key, src.iid, x.iid, nbytes)
            return
        self.kv["transfer_s"].append(dt)
        heapq.heappush(self.kv_land, (t + dt, r.uid, int(self.retries[r.uid]), r, k))

    def _land(self, t: float, uid: int, att: int, r, k: int) -> None:
        inst = self.insts[k]
        if self.flows is not None:
            self.kv["transfer_s"].append(t - self.inflight.pop((uid, att))[2])
        if att != self.retries[uid] or inst.state not in ("active", "draining"):
            return                                     # restarted since (an instance was lost)
        land_kv(inst.x, r, t)
        if inst.state == "draining":                   # its drain goes on with this request
            inst.x.drain()
            heapq.heappush(self.releases, (max(t, inst.x.t), k))

    def _routable(self) -> list:
        """New requests go to the active prefill instances."""
        return self._in("prefill", "active")

    def _serve_waiting(self, inst, t: float) -> None:
        """A prefill instance takes the waiting requests; a decode one the prompts waiting for it."""
        if inst.pool == "prefill":
            super()._serve_waiting(inst, t)
            return
        todo, self.waiting_d = self.waiting_d, []
        for r, t0 in todo:
            self.kv["waited_for_decode"] += 1
            self.kv["decode_wait_s"].append(t - t0)
            self._transfer(r, t)

    def _lose(self, inst, t: float, reason: str) -> None:
        """``inst``'s nodes are gone at ``t``: its unfinished work starts over at the prefill pool."""
        self._collect()
        inst.state, inst.t_end, inst.reason = "stopped", t, reason
        if inst.pool == "prefill":                    # prompts not finished, or finished but their KV not
            lost = [r for r in inst.routed if self.handed.get(r.uid, INF) > t]    # sent yet (no decode
            held = [r for r, _ in self.waiting_d if r.prefill_instance == inst.x.iid]   # instance served)
            self.waiting_d = [(r, t0) for r, t0 in self.waiting_d if r.prefill_instance != inst.x.iid]
            lost += held
        else:
            lost = [r for r in inst.routed if not (r.generated >= r.output and r.last <= t)]
        gone = set(id(r) for r in lost)
        inst.routed = [r for r in inst.routed if id(r) not in gone]
        for r in lost:
            self._restart(r)
        for r in sorted(lost, key=lambda q: (q.arrival, q.uid)):
            self._route(r, t)

    def _restart(self, r) -> None:
        """As `ServingBatchModel._restart`; its queued transfer or landing is void too."""
        super()._restart(r)
        r.prefill_instance = -1
        self.handed.pop(r.uid, None)

    def _drain_done(self, i, now: float) -> bool:
        if i.state != "draining":
            return False
        return i.pool == "prefill" or (i.x.inbound == 0 and i.x.idle() and i.x.t <= now)

    def _all_served(self, now: float) -> bool:
        if self.kv_starts or self.kv_land or self.waiting_d or self.inflight:
            return False
        return super()._all_served(now)

    def _energy_now(self, t: float) -> float:
        e = 0.0
        for i in self.insts:
            p = self.pools[i.pool].power
            if p is None:
                return math.nan
            end = i.t_end if i.t_end == i.t_end else t
            life = max(0.0, min(end, t) - i.t0)
            busy = min(i.x.busy_s, life)
            pre = min(i.x.prompt_busy_s, busy)          # prefill-power seconds (prompt share)
            e += i.x.model.tp * (p.prefill_w * pre + p.decode_w * (busy - pre) + p.idle_w * (life - busy))
        return e

    # ------------------------------------------------------------------ the controller
    def _pool_view(self, now: float, name: str) -> PoolView:
        act = self._in(name, "active")
        mine = [i for i in self.insts if i.pool == name]
        busy = sum(i.x.busy_s for i in mine)
        tok = sum(i.x.tokens_decoded for i in mine)
        prev = self.prevs[name]
        span = max(1e-9, now - prev["t"])
        p = self.pools[name]
        pending = sum(1 for s in range(p.lo, p.lo + p.n_slots) if self.slot[s] == "pending")
        waiting = self.waiting if name == "prefill" else self.waiting_d
        v = PoolView(now, self.cfg.interval_s, len(act), len(self._in(name, "starting")) + pending,
                     min(1.0, (busy - prev["busy"]) / (span * max(1, len(act)))), (tok - prev["tok"]) / span,
                     sum(len(i.x.waiting) for i in act) + len(waiting),
                     sum(i.x.kv.used / i.x.kv.num_blocks for i in act) / max(1, len(act)))
        prev.update(t=now, busy=busy, tok=tok)
        return v

    def _size(self, now: float, control) -> None:
        c = self.cfg
        vp, vd = self._pool_view(now, "prefill"), self._pool_view(now, "decode")
        first = now == self.t_start and not self.counts["scale_up_requests"]
        wants = ((self.pools["prefill"].initial, self.pools["decode"].initial) if first
                 else tuple(int(w) for w in self.pd_policy.desired_pd(vp, vd)))
        for name, want in zip(POOLS, wants):
            p = self.pools[name]
            want = max(p.lo_bound, min(p.hi_bound, want))
            starting = [i for i in self._in(name, "starting") if not i.unwanted]
            active = [i for i in self._in(name, "active") if not i.retiring]
            pending = [s for s in range(p.lo, p.lo + p.n_slots) if self.slot[s] == "pending"]
            have = len(active) + len(starting) + len(pending)
            if want > have:
                self._scale_up_pool(p, want - have, now, control)
            elif want < have:
                self._scale_down(have - want, pending, starting, active, now, control)
            for i in self._in(name, "active"):
                if i.retiring and (len(active) >= want or i.t0 + c.lease_s - now <= 2 * c.interval_s):
                    self._drain(i, now, control)
            self.log_pools[name].append((len(self._in(name, "active")), len(self._in(name, "starting")),
                                         sum(1 for s in range(p.lo, p.lo + p.n_slots) if self.slot[s] == "pending")))
        if first and c.warm_start:
            self.warm = set(self.submitted_at)

    def _scale_up_pool(self, p: Pool, k: int, now: float, control) -> None:
        for _ in range(self._reclaim(self._in(p.name, "starting"), k)):
            if p.next_slot >= p.lo + p.n_slots:
                raise RuntimeError(f"serving: all {p.n_slots} {p.name} node-request jobs are used; raise serving.slots")
            p.next_slot += 1
            self._request(p.next_slot - 1, now, control)

    def _drain(self, i, now: float, control) -> None:
        i.state = "draining"
        i.x.drain()
        if self._drain_done(i, now) and max(now, i.x.t) <= now:
            self._release(i.job, now, "drained", control)
        else:
            heapq.heappush(self.releases, (max(now, i.x.t), self.insts.index(i)))

    # ------------------------------------------------------------------ results
    def finalize(self, end: float) -> None:
        self._advance(end)
        for i in self.insts:
            if i.state in ("active", "draining", "starting") and i.pool == "prefill":
                i.x.drain()
        self._advance(INF)
        for i in self.insts:
            if i.state in ("active", "draining", "starting"):
                i.x.drain()
        super().finalize(end)

    def job_columns(self) -> dict:
        out = super().job_columns()
        pool = np.full(len(self.ctx.jobs), "", dtype=object)
        pool[self.lo:] = self.slot_pool
        out["serving_pool"] = pool
        return out

    def timeseries(self, grid: np.ndarray, dt: float) -> dict:
        out = super().timeseries(grid, dt)
        held = np.zeros(len(grid))
        for i in self.insts:
            end = i.t_end if i.t_end == i.t_end else (grid[-1] + dt if len(grid) else i.t0)
            lo, hi = np.clip(grid, i.t0, end), np.clip(grid + dt, i.t0, end)
            held += (hi - lo) / dt * self.pools[i.pool].nodes
        out["serving_nodes"] = (held, out["serving_nodes"][1])
        return out

    def tables(self) -> dict:
        out = super().tables()
        out["serving_requests.csv"]["prefill_instance"] = [q.prefill_instance for q in self.reqs]
        return out

    def summary(self) -> dict:
        out = super().summary()
        s = out["serving"]
        pools = {}
        for name, p in self.pools.items():
            mine = [i for i in self.insts if i.pool == name]
            life = sum(i.t_end - i.t0 for i in mine)
            pools[name] = {"hardware": p.hardware, "tp": p.tp, "nodes_per_instance": p.nodes, "cold_start_s": p.cold_s,
                           "min_instances": p.lo_bound, "max_instances": p.hi_bound, "instances": len(mine),
                           "instance_hours": life / 3600.0, "node_hours": life * p.nodes / 3600.0,
                           "gpu_hours": life * p.tp / 3600.0,
                           "peak_active": max((a for a, _, _ in self.log_pools[name]), default=0)}
        s.update(mode="pd", pools=pools, node_hours=sum(v["node_hours"] for v in pools.values()),
                 gpu_hours=sum(v["gpu_hours"] for v in pools.values()), tp=None, nodes_per_instance=None)
        d = np.asarray(self.kv["transfer_s"], dtype=float)
        w = np.asarray(self.kv["decode_wait_s"], dtype=float)
        s["kv_transfer"] = {"units": "seconds, bytes",
                            "model": (f"flows on the {self.net.name or 'system'} topology ({self.net.routing} "
                                      "routing, max-min fair)") if self.net is not None else "formula",
                            "max_concurrent": self.flows.max_concurrent if self.flows is not None else None,
                            "link_GBps": self.cfg.kv_link_GBps,
                            "latency_s": self.cfg.kv_latency_s, "transfers": self.kv["transfers"],
                            "bytes": int(self.kv["bytes"]), "reservations_deferred": self.kv["reservations_deferred"],
                            "transfer_s_mean": float(d.mean()) if len(d) else None,
                            "transfer_s_max": float(d.max()) if len(d) else None,
                            "waited_for_decode": self.kv["waited_for_decode"],
                            "decode_wait_s_max": float(w.max()) if len(w) else None}
        return out


class _Fixed:
    def __init__(self, p: int, d: int) -> None:
        self.p, self.d = FixedPolicy(p), FixedPolicy(d)

    def desired_pd(self, vp: PoolView, vd: PoolView) -> tuple[int, int]:
        return self.p.desired(vp), self.d.desired(vd)


class _PerPool:
    """One single-pool policy per pool (HPA on each pool's own signal)."""

    def __init__(self, p, d) -> None:
        self.p, self.d = p, d

    def desired_pd(self, vp: PoolView, vd: PoolView) -> tuple[int, int]:
        return self.p.desired(vp), self.d.desired(vd)
