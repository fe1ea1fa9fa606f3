"""Network contention: max-min fair sharing of links between running jobs, turned into progress rates.

Model (`NetworkContentionModel`, enabled by ``--network on``):

* A communicating job (more than one node, ``comm_kind`` not ``"none"``, ``comm_fraction > 0``)
  spends a fraction ``f`` of its isolated runtime in communication phases. During them every node
  injects at ``comm_bandwidth`` bytes/s (default: the node's terminal link bandwidth, i.e. the
  phases are bandwidth-bound; an assumption) following its ``comm_kind`` pattern
  (`topology.traffic`); routing (`topology.routing`) turns that into a demand in bytes/s on each
  directed link, computed once per job at its start.
* Isolated rate ``x_iso = min(1, min_l capacity_l / demand_l)``: the share of its demand the job
  gets alone. The log's runtime is taken to be the isolated runtime (an assumption: we do not know
  what the job shared when it ran).
* At every start and finish that touches an overloaded link (one whose load exceeds its capacity
  when every job runs at ``x_iso``), the rates ``x_j`` of all jobs using overloaded links are
  recomputed by weighted max-min fairness (progressive filling, Bertsekas &
  Gallager, *Data Networks*, 6.5.2): each job's rate scales its whole demand vector, links are
  shared max-min fairly, and no job exceeds ``x_iso``.
* Communication slowdown ``s = x_iso / x``; runtime stretch ``(1 - f) + f * s``; the progress-rate
  factor handed to the engine is ``1 / stretch``.

Defaults when the workload has no communication data (documented assumptions, not fitted to any
measurement): ``comm_fraction ~ Beta(2, 6)`` (mean 0.25), ``comm_kind`` drawn with probabilities
allreduce 0.5, ring 0.3, alltoall 0.2; both from the seeded random stream ``"network"``.
Workload columns ``comm_fraction`` (in [0, 1]; NaN = draw), ``comm_kind`` (str; "" = draw) and
``comm_bandwidth`` (bytes/s per node; NaN = terminal bandwidth) override them.

Outputs: job columns ``groups_spanned``, ``global_bytes`` (bytes sent between hosts of different
groups over the job's run, exact for the work done, including jobs killed at their limit),
``contention_stretch`` (wall time / the time the same progress takes at this model's factor 1, i.e.
``(end - start) / runtime`` when no other model changes rates); time series
``network_global_bytes_rate`` (B/s) and ``network_contended_jobs``; summary entries ``network_*``.
"""
from __future__ import annotations

import numpy as np

from topology import traffic as tr
from topology.routing import Router, make_router

try:  # the engine's base class (twin/model_api.py)
    from twin.model_api import RunModel
except ImportError:  # pragma: no cover - the package always ships twin.model_api
    RunModel = object  # type: ignore[misc,assignment]

#: Default distribution of communication kinds (assumption, see the module docstring).
DEFAULT_KIND_PROBS = {"allreduce": 0.5, "ring": 0.3, "alltoall": 0.2}
#: Default comm_fraction ~ Beta(a, b) (assumption, mean a / (a + b) = 0.25).
DEFAULT_COMM_BETA = (2.0, 6.0)


def max_min_fair(capacity: np.ndarray, link: np.ndarray, flow: np.ndarray, weight: np.ndarray,
                 n_flows: int, cap: np.ndarray | None = None, rtol: float = 1e-12) -> np.ndarray:
    """Weighted max-min fair rates by progressive filling.

    Flow ``f`` at rate ``x_f`` puts ``weight[k] * x_f`` on link ``link[k]`` for every entry ``k``
    with ``flow[k] = f``; ``sum_f weight * x_f <= capacity[l]`` on every link and ``x_f <=
    cap[f]``. All unfrozen flows grow at the same speed; a flow freezes when a link it uses
    saturates or it reaches its cap. A flow with no link and no cap gets ``inf``.

    Units: rates in whatever unit makes ``weight * rate`` comparable with ``capacity`` (with unit
    weights: the capacity's unit, e.g. bytes/s).
    """
    capacity = np.asarray(capacity, dtype=np.float64)
    link = np.asarray(link, dtype=np.int64)
    flow = np.asarray(flow, dtype=np.int64)
    weight = np.asarray(weight, dtype=np.float64)
    if np.any(weight < 0) or np.any(capacity < 0):
        raise ValueError("max_min_fair: weights and capacities must be >= 0")
    cap = np.full(n_flows, np.inf) if cap is None else np.asarray(cap, dtype=np.float64).copy()
    L = len(capacity)
    # dense (links x flows) matrix: the problems met in a run are small (tens of links and jobs),
    # where a few BLAS-backed dense operations per round beat sparse bookkeeping
    W = np.zeros((L, n_flows))
    np.add.at(W, (link, flow), weight)
    x = np.zeros(n_flows)
    active = np.ones(n_flows, dtype=bool)
    rem = capacity.copy()
    sat_tol = rtol * np.maximum(capacity, 1.0)
    cap_tol = rtol * np.maximum(np.where(np.isfinite(cap), np.abs(cap), 1.0), 1.0)
    while active.any():
        wsum = W @ active
        used = wsum > 0
        t_link = np.min(rem[used] / wsum[used]) if used.any() else np.inf
        t_cap = np.min(cap[active] - x[active])
        t = min(t_link, t_cap)
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
        if not frozen.any():  # numerical safety: freeze the flows of the tightest link
            l = np.flatnonzero(used)[np.argmin(rem[used] / wsum[used])]
            frozen = active & (W[l] > 0)
        active &= ~frozen
    return x


class _StepSeries:
    """A piecewise-constant function of time recorded at events; averaged on a grid."""

    def __init__(self):
        self.t: list[float] = [0.0]
        self.v: list[float] = [0.0]

    def set(self, t: float, v: float) -> None:
        if t == self.t[-1]:
            self.v[-1] = v
        else:
            self.t.append(t)
            self.v.append(v)

    def average(self, grid: np.ndarray, dt: float) -> np.ndarray:
        T = np.asarray(self.t)
        V = np.asarray(self.v)
        cum = np.concatenate(([0.0], np.cumsum(V[:-1] * np.diff(T))))

        def integral(t):
            i = np.clip(np.searchsorted(T, t, side="right") - 1, 0, None)
            return np.where(t < T[0], 0.0, cum[i] + V[i] * (t - T[i]))
        g = np.asarray(grid, dtype=np.float64)
        return (integral(g + dt) - integral(g)) / dt


class NetworkContentionModel(RunModel):
    """Contention between communicating jobs on the machine's interconnect (see the module docstring).

    ``graph``: a topology graph (default: built from ``ctx.system.network`` with
    `topology.presets.build_network`, or the ``generic`` preset when the system has no ``[network]``
    table); ``routing``: ``"minimal"`` or ``"valiant"`` (Dragonfly only).
    """

    name = "network"

    def __init__(self, graph=None, routing: str = "minimal", router: Router | None = None):
        self.graph = graph
        self.routing = routing
        self.router = router

    @classmethod
    def from_system(cls, system, options: dict | None = None) -> "NetworkContentionModel":
        """The model for a `SystemSpec` (its ``[network]`` table is read at `bind`).

        ``options["network"]["routing"]`` (or ``options["routing"]``) selects the routing.
        """
        opts = dict(options or {})
        net = opts.get("network") if isinstance(opts.get("network"), dict) else {}
        routing = net.get("routing", opts.get("routing", "minimal"))
        if routing not in ("minimal", "valiant"):
            raise ValueError(f"network option routing = {routing!r}: choose 'minimal' or 'valiant'")
        return cls(routing=routing)

    # ------------------------------------------------------------------ setup
    def bind(self, ctx) -> None:
        from topology.presets import PRESETS, build_network, network_params
        self.ctx = ctx
        n = int(ctx.n_nodes)
        self.network_desc = ""
        if self.router is None:
            if self.graph is None:
                system = ctx.system
                table = dict(getattr(system, "network", None) or {})
                source = f"system file {getattr(system, 'path', '')} [network]" if system is not None else "[network]"
                if not table:
                    table = {"preset": "generic"}
                params = network_params(table, n, source)
                if params["kind"] == "torus":  # route arithmetically; the graph is not needed
                    from topology.routing import TorusRouter
                    from topology.torus import torus_shape
                    torus_shape(params["dims"], params.get("block"), params.get("periodic"))
                    bw = params.get("bandwidth", 6.8e9)
                    self.router = TorusRouter(params["dims"], params.get("block"), params.get("periodic"), bw,
                                              params.get("terminal_bandwidth"))
                else:
                    self.graph = build_network(table, n, source)
                self.network_desc = table.get("preset", params["kind"])
            if self.router is None:
                self.router = make_router(self.graph)
        R = self.router
        if R.n_hosts != n:
            raise ValueError(f"network model: the topology has {R.n_hosts} hosts but the machine has {n} nodes")
        self.network_desc = self.network_desc or R.kind
        jobs = ctx.jobs
        nj = len(jobs)
        cols = getattr(jobs, "columns", {}) or {}
        rng = ctx.rng("network")
        a, b = DEFAULT_COMM_BETA
        frac = rng.beta(a, b, size=nj)
        kinds = np.array(list(DEFAULT_KIND_PROBS))
        kind = kinds[rng.choice(len(kinds), size=nj, p=np.array(list(DEFAULT_KIND_PROBS.values())))].astype(object)
        if "comm_fraction" in cols:
            cf = np.asarray(cols["comm_fraction"], dtype=np.float64)
            if np.any(cf[np.isfinite(cf)] < 0) or np.any(cf[np.isfinite(cf)] > 1):
                raise ValueError("network model: workload column 'comm_fraction' must be in [0, 1]")
            frac = np.where(np.isfinite(cf), cf, frac)
        if "comm_kind" in cols:
            ck = np.asarray(cols["comm_kind"], dtype=object)
            given = np.array([isinstance(k, str) and k != "" for k in ck])
            bad = {k for k in ck[given] if k not in tr.COMM_KINDS}
            if bad:
                raise ValueError(f"network model: workload column 'comm_kind' has unknown values {sorted(bad)}; "
                                 f"allowed: {', '.join(tr.COMM_KINDS)}")
            kind = np.where(given, ck, kind)
        inj = np.full(nj, np.nan)
        if "comm_bandwidth" in cols:
            inj = np.asarray(cols["comm_bandwidth"], dtype=np.float64).copy()
        self.frac, self.kind, self.inj = frac, kind, inj
        # per-job state
        self.groups = np.full(nj, -1, dtype=np.int64)
        self.gbytes = np.zeros(nj)
        self.stretch_out = np.full(nj, np.nan)
        self.start_t = np.full(nj, np.nan)
        self.f_ours = np.ones(nj)
        self.rate = np.ones(nj)
        self.t_last = np.zeros(nj)
        self.stretch_acc = np.zeros(nj)
        self.work = np.zeros(nj)
        self.t_w = np.zeros(nj)
        self.is_comm = np.zeros(nj, dtype=bool)
        self.x_iso = np.ones(nj)
        self.grate = np.zeros(nj)     # global bytes/s during comm phases in isolation
        self.links: dict[int, np.ndarray] = {}
        self.demand: dict[int, np.ndarray] = {}
        self.load_full = np.zeros(R.n_links)   # bytes/s on each link if every job ran at x_iso
        self.global_series = _StepSeries()
        self.contended_series = _StepSeries()
        self.total_grate = 0.0
        self.contended: set[int] = set()
        self.recomputations = 0

    # ------------------------------------------------------------------ events
    def on_start(self, now: float, job: int, nodes: np.ndarray) -> dict[int, float] | None:
        R = self.router
        nodes = np.asarray(nodes, dtype=np.int64)
        self.groups[job] = R.groups_spanned(nodes)
        self.start_t[job] = now
        self.t_last[job] = now
        self.t_w[job] = now
        self.f_ours[job] = 1.0
        self.rate[job] = 1.0
        f = float(self.frac[job])
        if len(nodes) < 2 or self.kind[job] == "none" or f <= 0:
            return None
        traffic = tr.pattern(self.kind[job], nodes, 1.0)
        sent = traffic.sent_per_host()
        smax = float(sent.max()) if len(sent) else 0.0
        if smax <= 0:
            return None
        ll = R.link_loads(traffic, self.routing)
        inj = self.inj[job]
        if not np.isfinite(inj) or inj <= 0:
            inj = float(R.bandwidth[R.term_up[nodes]].min())
        rounds = inj / smax                          # pattern rounds per second at full demand
        demand = ll.nbytes * rounds
        bw = R.bandwidth[ll.ids]
        x_iso = min(1.0, float(np.min(bw / demand)))
        self.x_iso[job] = x_iso
        self.grate[job] = R.global_bytes(traffic) * rounds * x_iso
        self.links[job] = ll.ids
        self.is_comm[job] = True
        self.demand[job] = demand
        self.load_full[ll.ids] += demand * x_iso
        self._set_global(now, job, +1)
        if not self._overloaded(ll.ids).any():   # only its links gained load: nothing can change
            return None
        return self._recompute(now)

    def on_finish(self, now: float, job: int) -> dict[int, float] | None:
        self._close(now, job)
        if job not in self.links:
            return None
        ids = self.links.pop(job)
        demand = self.demand.pop(job)
        self._set_global(now, job, -1)
        was_bottleneck = self._overloaded(ids).any()
        self.load_full[ids] -= demand * self.x_iso[job]
        if not self.links:
            self.load_full[:] = 0.0      # no drift from repeated additions and removals
        self.contended.discard(job)
        if not was_bottleneck:
            return None
        return self._recompute(now)

    def on_rate_change(self, now: float, job: int, rate: float) -> None:
        if np.isnan(self.start_t[job]) or not np.isnan(self.stretch_out[job]):
            return
        self.work[job] += (now - self.t_w[job]) * self.rate[job]
        self.t_w[job] = now
        if job in self.links:
            self.total_grate += (rate - self.rate[job]) * self.frac[job] * self.grate[job]
            self.global_series.set(now, self.total_grate)
        self.rate[job] = rate

    # ------------------------------------------------------------------ internals
    def _set_global(self, now: float, job: int, sign: int) -> None:
        self.total_grate += sign * self.rate[job] * self.frac[job] * self.grate[job]
        self.global_series.set(now, max(self.total_grate, 0.0) if abs(self.total_grate) > 1e-6 else 0.0)

    def _close(self, now: float, job: int) -> None:
        """Account the job's last stretch and work segments at its finish."""
        if np.isnan(self.start_t[job]):
            return
        self.stretch_acc[job] += (now - self.t_last[job]) * self.f_ours[job]
        wall = now - self.start_t[job]
        self.stretch_out[job] = wall / self.stretch_acc[job] if wall > 0 else 1.0 / self.f_ours[job]
        self.work[job] += (now - self.t_w[job]) * self.rate[job]
        self.t_w[job] = now
        if job in self.links:
            self.gbytes[job] = self.frac[job] * self.work[job] * self.grate[job]

    def _overloaded(self, ids: np.ndarray) -> np.ndarray:
        bw = self.router.bandwidth[ids]
        return self.load_full[ids] > bw * (1.0 + 1e-9)

    def _recompute(self, now: float) -> dict[int, float]:
        """Max-min rates of the jobs that use an overloaded link; returns the changed factors.

        A link whose load stays within its capacity when every job runs at its isolated rate can
        never be a bottleneck (rates never exceed ``x_iso``), so only overloaded links enter the
        max-min problem; jobs using none of them run at factor 1.
        """
        self.recomputations += 1
        shared_link = self.load_full > self.router.bandwidth * (1.0 + 1e-9)
        jobs, lk, fl, wt = [], [], [], []
        for j, ids in self.links.items():
            m = shared_link[ids]
            if m.any():
                fl.append(np.full(int(m.sum()), len(jobs), dtype=np.int64))
                lk.append(ids[m])
                wt.append(self.demand[j][m])
                jobs.append(j)
        changes: dict[int, float] = {}
        new_contended = set(jobs)
        for j in self.contended - new_contended:
            if j in self.links:
                self._set_factor(now, j, 1.0, changes)
        self.contended = new_contended
        if jobs:
            lk_all = np.concatenate(lk)
            uniq, inv = np.unique(lk_all, return_inverse=True)
            cap = self.x_iso[jobs]
            x = max_min_fair(self.router.bandwidth[uniq], inv, np.concatenate(fl), np.concatenate(wt),
                             len(jobs), cap)
            slow = np.where(x > 0, cap / np.maximum(x, 1e-300), np.inf)
            f = self.frac[jobs]
            stretch = (1.0 - f) + f * slow
            for j, s in zip(jobs, stretch.tolist()):
                self._set_factor(now, j, 1.0 / s, changes)
        self.contended_series.set(now, float(len(self.contended)))
        return changes

    def _set_factor(self, now: float, job: int, factor: float, changes: dict) -> None:
        if abs(factor - self.f_ours[job]) <= 1e-12 * max(1.0, factor):
            return
        self.stretch_acc[job] += (now - self.t_last[job]) * self.f_ours[job]
        self.t_last[job] = now
        self.f_ours[job] = factor
        changes[job] = factor

    # ------------------------------------------------------------------ results
    def finalize(self, end: float) -> None:
        for j in list(self.links):  # jobs still running at the end of the run
            if np.isnan(self.stretch_out[j]):
                self._close(end, j)

    def job_columns(self) -> dict[str, np.ndarray]:
        return {"groups_spanned": self.groups.copy(), "global_bytes": self.gbytes.copy(),
                "contention_stretch": self.stretch_out.copy()}

    def timeseries(self, grid: np.ndarray, dt: float) -> dict[str, tuple[np.ndarray, str]]:
        return {"network_global_bytes_rate": (self.global_series.average(grid, dt), "B/s"),
                "network_contended_jobs": (self.contended_series.average(grid, dt), "jobs")}

    def summary(self) -> dict:
        ran = ~np.isnan(self.stretch_out)
        st = self.stretch_out[ran]
        stc = self.stretch_out[ran & self.is_comm]
        return {
            "network_topology": self.network_desc,
            "network_routing": self.routing,
            "network_mean_stretch": float(st.mean()) if len(st) else float("nan"),
            "network_mean_stretch_comm_jobs": float(stc.mean()) if len(stc) else float("nan"),
            "network_comm_jobs": int((ran & self.is_comm).sum()),
            "network_max_stretch": float(st.max()) if len(st) else float("nan"),
            "network_total_global_bytes": float(self.gbytes.sum()),
            "network_mean_groups_spanned": float(self.groups[self.groups >= 0].mean()) if (self.groups >= 0).any() else float("nan"),
            "network_recomputations": int(self.recomputations),
            "network_defaults": (f"comm_fraction~Beta{DEFAULT_COMM_BETA} and comm_kind~{DEFAULT_KIND_PROBS} "
                                 "where the workload has none (assumption)"),
        }
