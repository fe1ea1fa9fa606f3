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
from numba import njit

from hpctwin.topology import traffic as tr
from hpctwin.topology.presets import build_network, network_params
from hpctwin.topology.routing import Router, TorusRouter, make_router
from hpctwin.topology.torus import torus_shape

try:  # the engine's base class (twin/model_api.py)
    from hpctwin.twin.model_api import RunModel
except ImportError:  # pragma: no cover - the package always ships twin.model_api
    RunModel = object  # type: ignore[misc,assignment]

#: Default distribution of communication kinds (assumption, see the module docstring).
DEFAULT_KIND_PROBS = {"allreduce": 0.5, "ring": 0.3, "alltoall": 0.2}
#: Default comm_fraction ~ Beta(a, b) (assumption, mean a / (a + b) = 0.25).
DEFAULT_COMM_BETA = (2.0, 6.0)
#: a link is overloaded when its load exceeds its capacity by more than this relative margin
#: (round-off guard)
_OVERLOAD_RTOL = 1e-9
#: a job's progress-rate factor is updated only when it changes by more than this (relative)
_FACTOR_RTOL = 1e-12


def max_min_fair(capacity: np.ndarray, link: np.ndarray, flow: np.ndarray, weight: np.ndarray,
                 n_flows: int, cap: np.ndarray | None = None, rtol: float = 1e-12) -> np.ndarray:
    """Weighted max-min fair rates by progressive filling.

    Flow ``f`` at rate ``x_f`` puts ``weight[k] * x_f`` on link ``link[k]`` for every entry ``k``
    with ``flow[k] = f``; ``sum_f weight * x_f <= capacity[l]`` on every link and ``x_f <=
    cap[f]``. All unfrozen flows grow at the same speed; a flow freezes when a link it uses
    saturates or it reaches its cap. A flow with no link and no cap gets ``inf``.

    Units: rates in whatever unit makes ``weight * rate`` comparable with ``capacity`` (with unit
    weights: the capacity's unit, e.g. bytes/s). The filling itself is the compiled `_mmf_kernel`.
    """
    capacity = np.asarray(capacity, dtype=np.float64)
    link = np.asarray(link, dtype=np.int64).ravel()
    flow = np.asarray(flow, dtype=np.int64).ravel()
    weight = np.asarray(weight, dtype=np.float64).ravel()
    if np.any(weight < 0) or np.any(capacity < 0):
        raise ValueError("max_min_fair: weights and capacities must be >= 0")
    if not (len(link) == len(flow) == len(weight)):
        raise ValueError("max_min_fair: link, flow and weight must have the same length")
    L = len(capacity)
    if len(link) and (link.min() < 0 or link.max() >= L or flow.min() < 0 or flow.max() >= n_flows):
        raise ValueError("max_min_fair: link or flow index out of range")
    cap = np.full(n_flows, np.inf) if cap is None else np.asarray(cap, dtype=np.float64).ravel().copy()
    # link-major sparse rows (entries of a link in increasing flow order)
    order = np.lexsort((flow, link))
    ptr = np.zeros(L + 1, dtype=np.int64)
    np.cumsum(np.bincount(link, minlength=L), out=ptr[1:])
    return _mmf_kernel(capacity, ptr, flow[order], weight[order], cap, float(rtol))


@njit(cache=True)
def _mmf_kernel(capacity, ptr, e_flow, e_w, cap, rtol):
    """Progressive filling on link-major sparse rows: link ``l`` carries ``e_w[k] * x[e_flow[k]]``
    for ``k`` in ``ptr[l]:ptr[l + 1]``. Each round: all active flows grow by the largest step that
    saturates no link and passes no cap; then the flows of saturated links and the flows at their
    cap freeze (if none does, by round-off, the flows of the tightest link)."""
    L = len(capacity)
    n = len(cap)
    x = np.zeros(n)
    active = np.ones(n, dtype=np.bool_)
    n_active = n
    rem = capacity.copy()
    wsum = np.zeros(L)
    sat = np.zeros(L, dtype=np.bool_)
    frozen = np.zeros(n, dtype=np.bool_)
    sat_tol = np.empty(L)
    for l in range(L):
        sat_tol[l] = rtol * max(capacity[l], 1.0)
    cap_tol = np.empty(n)
    for f in range(n):
        c = abs(cap[f]) if np.isfinite(cap[f]) else 1.0
        cap_tol[f] = rtol * max(c, 1.0)
    while n_active > 0:
        t_link = np.inf
        for l in range(L):
            w = 0.0
            for k in range(ptr[l], ptr[l + 1]):
                if active[e_flow[k]]:
                    w += e_w[k]
            wsum[l] = w
            if w > 0.0:
                r = rem[l] / w
                if r < t_link:
                    t_link = r
        t_cap = np.inf
        for f in range(n):
            if active[f]:
                r = cap[f] - x[f]
                if r < t_cap:
                    t_cap = r
        t = min(t_link, t_cap)
        if not np.isfinite(t):
            for f in range(n):
                if active[f]:
                    x[f] = np.inf
            break
        t = max(t, 0.0)
        for f in range(n):
            if active[f]:
                x[f] += t
            frozen[f] = active[f] and x[f] >= cap[f] - cap_tol[f]
        any_frozen = False
        for f in range(n):
            if frozen[f]:
                any_frozen = True
        for l in range(L):
            rem[l] -= t * wsum[l]
            sat[l] = wsum[l] > 0.0 and rem[l] <= sat_tol[l]
            if sat[l]:
                rem[l] = 0.0
                for k in range(ptr[l], ptr[l + 1]):
                    f = e_flow[k]
                    if active[f] and e_w[k] > 0.0:
                        frozen[f] = True
                        any_frozen = True
        if not any_frozen:  # numerical safety: freeze the flows of the tightest link
            best, lt = np.inf, -1
            for l in range(L):
                if wsum[l] > 0.0:
                    r = rem[l] / wsum[l]
                    if lt < 0 or r < best:
                        best, lt = r, l
            if lt < 0:
                for f in range(n):
                    frozen[f] = active[f]
            else:
                for k in range(ptr[lt], ptr[lt + 1]):
                    f = e_flow[k]
                    if active[f] and e_w[k] > 0.0:
                        frozen[f] = True
        for f in range(n):
            if frozen[f] and active[f]:
                active[f] = False
                n_active -= 1
    return x


@njit(cache=True)
def _contended_factors(jobs, off, ln, pool_ids, pool_dem, load_full, bandwidth, x_iso, frac, lidx):
    """The max-min problem of the running communicating ``jobs`` (in start order) restricted to
    the overloaded links, solved; returns (positions in ``jobs`` of the jobs in the problem, their
    progress-rate factors ``1 / ((1 - f) + f * x_iso / x)``).

    Job ``j``'s links and demands are ``pool_ids`` / ``pool_dem`` at ``off[j]:off[j] + ln[j]``.
    ``lidx``: scratch array of ``-1`` (one per link), left as it was found.
    """
    thr = 1.0 + _OVERLOAD_RTOL
    nj = len(jobs)
    total = 0
    for i in range(nj):
        total += ln[jobs[i]]
    links = np.empty(total, dtype=np.int64)
    L = 0
    picked = np.empty(nj, dtype=np.int64)
    n_flows = 0
    n_ent = 0
    for i in range(nj):       # pass 1: jobs with an overloaded link, and those links
        j = jobs[i]
        c = 0
        for k in range(off[j], off[j] + ln[j]):
            l = pool_ids[k]
            if load_full[l] > bandwidth[l] * thr:
                c += 1
                if lidx[l] == -1:
                    lidx[l] = -2
                    links[L] = l
                    L += 1
        if c > 0:
            picked[n_flows] = i
            n_flows += 1
            n_ent += c
    picked = picked[:n_flows]
    links = np.sort(links[:L])
    cnt = np.zeros(L + 1, dtype=np.int64)
    for a in range(L):
        lidx[links[a]] = a
    for q in range(n_flows):  # pass 2: link-major rows, flows in start order inside a row
        j = jobs[picked[q]]
        for k in range(off[j], off[j] + ln[j]):
            a = lidx[pool_ids[k]]
            if a >= 0:
                cnt[a + 1] += 1
    ptr = np.cumsum(cnt)
    fill = ptr[:-1].copy()
    e_flow = np.empty(n_ent, dtype=np.int64)
    e_w = np.empty(n_ent)
    for q in range(n_flows):
        j = jobs[picked[q]]
        for k in range(off[j], off[j] + ln[j]):
            a = lidx[pool_ids[k]]
            if a >= 0:
                e_flow[fill[a]] = q
                e_w[fill[a]] = pool_dem[k]
                fill[a] += 1
    capacity = np.empty(L)
    for a in range(L):
        capacity[a] = bandwidth[links[a]]
        lidx[links[a]] = -1
    cap = np.empty(n_flows)
    f = np.empty(n_flows)
    for q in range(n_flows):
        cap[q] = x_iso[jobs[picked[q]]]
        f[q] = frac[jobs[picked[q]]]
    x = _mmf_kernel(capacity, ptr, e_flow, e_w, cap, 1e-12)
    factor = np.empty(n_flows)
    for q in range(n_flows):
        slow = cap[q] / max(x[q], 1e-300) if x[q] > 0 else np.inf
        factor[q] = 1.0 / ((1.0 - f[q]) + f[q] * slow)
    return picked, factor


@njit(cache=True)
def _add_job_loads(ids, nbytes, rounds, bandwidth, load_full):
    """A starting job's arithmetic: demand ``nbytes * rounds`` (bytes/s) on its links ``ids``
    (unique), isolated rate ``x_iso = min(1, min_l bandwidth / demand)``, and ``demand * x_iso``
    added to ``load_full``. Returns (demand, x_iso, whether one of its links is now overloaded).
    Same float operations as the numpy expressions it replaces (elementwise; the min is exact)."""
    n = len(ids)
    demand = np.empty(n)
    m = np.inf
    for k in range(n):
        d = nbytes[k] * rounds
        demand[k] = d
        r = bandwidth[ids[k]] / d
        if r < m:
            m = r
    x_iso = min(1.0, m)
    over = False
    for k in range(n):
        l = ids[k]
        load_full[l] += demand[k] * x_iso
        if load_full[l] > bandwidth[l] * (1.0 + _OVERLOAD_RTOL):
            over = True
    return demand, x_iso, over


@njit(cache=True)
def _remove_job_loads(ids, demand, x_iso, bandwidth, load_full):
    """A finishing job's links: returns whether one of them was overloaded before its load
    ``demand * x_iso`` is taken off ``load_full`` (``ids`` unique)."""
    was = False
    for k in range(len(ids)):
        l = ids[k]
        if load_full[l] > bandwidth[l] * (1.0 + _OVERLOAD_RTOL):
            was = True
        load_full[l] -= demand[k] * x_iso
    return was


@njit(cache=True)
def _apply_factors(now, jobs, factor, f_ours, stretch_acc, t_last):
    """`NetworkContentionModel._set_factor` for every ``(jobs[i], factor[i])``: a factor that
    differs from the job's current one (beyond ``_FACTOR_RTOL``) closes the job's stretch segment
    at ``now`` and replaces it. Returns a mask of the changed entries."""
    changed = np.zeros(len(jobs), dtype=np.bool_)
    for i in range(len(jobs)):
        j = jobs[i]
        fac = factor[i]
        if abs(fac - f_ours[j]) <= _FACTOR_RTOL * max(1.0, fac):
            continue
        stretch_acc[j] += (now - t_last[j]) * f_ours[j]
        t_last[j] = now
        f_ours[j] = fac
        changed[i] = True
    return changed


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
        self.links: dict[int, np.ndarray] = {}   # running communicating jobs, in start order
        self.demand: dict[int, np.ndarray] = {}
        # the same links and demands packed for the compiled recompute: job j's entries are
        # _pool_ids / _pool_dem[_off[j]:_off[j] + _len[j]] (append-only, compacted when full)
        self._off = np.zeros(nj, dtype=np.int64)
        self._len = np.zeros(nj, dtype=np.int64)
        self._pool_ids = np.zeros(4096, dtype=np.int64)
        self._pool_dem = np.zeros(4096)
        self._pool_n = 0
        self._lidx = np.full(R.n_links, -1, dtype=np.int64)   # scratch of _contended_factors
        self._fp_cache: dict = {}
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
        fp = self._footprint(self.kind[job], nodes)
        if fp is None:
            return None
        smax, ids, nbytes, gbytes, term_bw = fp
        inj = self.inj[job]
        if not np.isfinite(inj) or inj <= 0:
            inj = term_bw
        rounds = float(inj / smax)                   # pattern rounds per second at full demand
        demand, x_iso, overloaded = _add_job_loads(ids, nbytes, rounds, R.bandwidth, self.load_full)
        self.x_iso[job] = x_iso
        self.grate[job] = gbytes * rounds * x_iso
        self.links[job] = ids
        self.is_comm[job] = True
        self.demand[job] = demand
        self._pool_add(job, ids, demand)
        self._set_global(now, job, +1)
        if not overloaded:   # only its links gained load: nothing can change
            return None
        return self._recompute(now)

    #: footprints kept by `_footprint` (most recently used); a replay places many jobs on the same nodes
    FOOTPRINT_CACHE = 4096

    def _footprint(self, kind: str, nodes: np.ndarray):
        """What a job of ``kind`` on ``nodes`` does in one round of its pattern (1 byte per rank):
        ``(max bytes sent by a host, link ids, bytes on them, bytes between groups, the smallest
        terminal bandwidth of its hosts)``, or None when it sends nothing. Depends on nothing
        else, so it is cached per (kind, node set)."""
        key = (kind, nodes.tobytes())
        cache = self._fp_cache
        fp = cache.pop(key, False)
        if fp is False:
            R = self.router
            f = R.footprint(kind, nodes, self.routing, cache=True)
            if f is not None:
                fp = (f.smax, f.loads.ids, f.loads.nbytes, f.global_bytes,
                      float(R.bandwidth[R.term_up[nodes]].min()))
            else:
                fp = None
            if len(cache) >= self.FOOTPRINT_CACHE:
                del cache[next(iter(cache))]
        cache[key] = fp
        return fp

    def on_finish(self, now: float, job: int) -> dict[int, float] | None:
        self._close(now, job)
        if job not in self.links:
            return None
        ids = self.links.pop(job)
        demand = self.demand.pop(job)
        self._set_global(now, job, -1)
        was_bottleneck = _remove_job_loads(ids, demand, float(self.x_iso[job]), self.router.bandwidth,
                                           self.load_full)
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

    def _pool_add(self, job: int, ids: np.ndarray, demand: np.ndarray) -> None:
        n = len(ids)
        if self._pool_n + n > len(self._pool_ids):   # compact the live entries, grow if needed
            live = [j for j in self.links if j != job]
            size = max(4096, 2 * (int(self._len[live].sum()) + n))
            pi, pd = np.zeros(size, dtype=np.int64), np.zeros(size)
            at = 0
            for j in live:
                k = int(self._len[j])
                pi[at:at + k] = self.links[j]
                pd[at:at + k] = self.demand[j]
                self._off[j] = at
                at += k
            self._pool_ids, self._pool_dem, self._pool_n = pi, pd, at
        a = self._pool_n
        self._pool_ids[a:a + n] = ids
        self._pool_dem[a:a + n] = demand
        self._off[job], self._len[job] = a, n
        self._pool_n = a + n

    def _recompute(self, now: float) -> dict[int, float]:
        """Max-min rates of the jobs that use an overloaded link; returns the changed factors.

        A link whose load stays within its capacity when every job runs at its isolated rate can
        never be a bottleneck (rates never exceed ``x_iso``), so only overloaded links enter the
        max-min problem; jobs using none of them run at factor 1. The problem is assembled and
        solved by the compiled `_contended_factors`.
        """
        self.recomputations += 1
        running = np.fromiter(self.links, dtype=np.int64, count=len(self.links))
        picked, factor = _contended_factors(running, self._off, self._len, self._pool_ids, self._pool_dem,
                                            self.load_full, self.router.bandwidth, self.x_iso, self.frac,
                                            self._lidx)
        jobs = running[picked]
        changes: dict[int, float] = {}
        new_contended = set(jobs.tolist())
        for j in self.contended - new_contended:
            if j in self.links:
                self._set_factor(now, j, 1.0, changes)
        self.contended = new_contended
        changed = np.flatnonzero(_apply_factors(float(now), jobs, factor, self.f_ours, self.stretch_acc,
                                                self.t_last))
        changes.update(zip(jobs[changed].tolist(), factor[changed].tolist()))
        self.contended_series.set(now, float(len(self.contended)))
        return changes

    def _set_factor(self, now: float, job: int, factor: float, changes: dict) -> None:
        """Set job's factor (accounting its stretch so far) unless it is unchanged; as `_apply_factors`."""
        if abs(factor - self.f_ours[job]) <= _FACTOR_RTOL * max(1.0, factor):
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
            "network_mean_groups_spanned": (float(self.groups[self.groups >= 0].mean()) if (self.groups >= 0).any()
                                            else float("nan")),
            "network_recomputations": int(self.recomputations),
            "network_defaults": (f"comm_fraction~Beta{DEFAULT_COMM_BETA} and comm_kind~{DEFAULT_KIND_PROBS} "
                                 "where the workload has none (assumption)"),
        }
