"""`PowerModel`: node power, conversion losses, caps, energy accounting and cooling of a run.

The simulation tells the model about every job start and finish (`twin.model_api.RunModel`). The
model keeps the machine's power as running scalars updated by deltas (cost O(nodes of the job) per
event) and records every change point, so that

* energies are integrated **exactly** between events (power is piecewise constant for constant
  utilisation profiles; trace profiles add their own change points at their sample boundaries);
* ``timeseries(grid, dt)`` gives exact interval averages on the sampling grid (cumulative integrals
  evaluated with numpy at the end, `power.stepseries`); ``sample_dt`` only sets their resolution;
* the cooling plant (`power.cooling`) is integrated on the sampling grid after the run.

Energy categories (J), which add up exactly (a test asserts it):
``jobs`` (node component power of nodes running jobs) + ``idle`` (idle nodes, powered empty slots
and switches) + ``loss`` (DC-DC and rectifier conversion losses) + ``cooling`` (CDU pumps and the
cooling plant) = ``facility``. A job's ``energy_j`` is the component energy of its nodes while it
runs; ``avg_power_w`` = energy / elapsed time.

Caps: a per-job CPU/GPU cap (W per device; ``[power] job_cpu_cap_w``/``job_gpu_cap_w``, the model
arguments, or the workload columns ``cpu_cap_w``/``gpu_cap_w``) limits the job's draw and slows it
down (`power.profiles` beta model) through the engine's progress-rate mechanism. A facility cap
(``facility_cap_w``: W, or a ``[(t, W), ...]`` series, `power.cap.PowerCap`; ``--power-cap``) limits
the **facility** power, cooling plant and conversion losses included (`power.cap` explains how):
the model holds the machine's electrical power (rack input + CDU pumps, known exactly at each event)
under `power.cap.electrical_limit_w`, by throttling: the dynamic power of every running job is
scaled by one common factor theta in [0, 1] (DVFS: dynamic power ~ f^alpha, ``cap_power_exponent``),
and each job's rate follows from its clock ratio (Hsu-Feng beta model, `power.profiles`).
`admit` is what the start-refusing gate (`power.capgate.PowerCapGate`) and the wrapper
`schedulers.power_aware.PowerAwareScheduler` ask before a job starts. The summary's ``power_cap``
table says whether the cap held at every sample and, if not, by how much and why.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from hpctwin.power.cap import PowerCap, cap_report, check_feasible, electrical_limit_w
from hpctwin.power.chain import Chain, Layout
from hpctwin.power.config import CoolingConfig, PowerConfig, PowerConfigError, parse_cooling, parse_power
from hpctwin.power.cooling import run_cooling
from hpctwin.power.profiles import device_ratio, frequency_ratio, job_profiles, progress_rate
import hpctwin.power.stepseries as ss
from hpctwin.twin.model_api import ModelContext, RunModel
from hpctwin.twin.system import load_system

#: The most recently bound model of this process: `schedulers.power_aware.PowerAwareScheduler` falls
#: back to it when it was built by name (``module:Class``) without a model instance.

#: Largest per-CDU series (grid intervals x CDUs) written to the time series.
MAX_CDU_SERIES_VALUES = 20_000_000


class _Running:
    """State of one running job (plain attributes; one object per running job)."""

    __slots__ = ("nodes", "n", "start", "t_last", "level", "cdu_ids", "cdu_counts", "ch_ids",
                 "ch_counts", "rate", "factor", "trace", "k", "t_ref", "p_ref", "tdt", "t_lvl", "idle")


_CDU0 = np.zeros(1, dtype=np.int64)


class PowerModel(RunModel):
    """Power, losses, caps and cooling of a run on a machine with a ``[power]`` table.

    Parameters
    ----------
    system: a `twin.system.SystemSpec` (default: the engine's ``ctx.system``).
    cooling: run the cooling model (needs a ``[cooling]`` table; default True if the system has one).
    sample_dt: grid step (s) of the summary's cooling integration (default ``ctx.options['sample_dt']``
        or 15 s). ``timeseries(grid, dt)`` uses the engine's grid.
    facility_cap_w, job_cpu_cap_w, job_gpu_cap_w, price_per_kwh: override the ``[power]`` values
        (``facility_cap_w`` may also be a ``[(time_s, watts), ...]`` series, see `power.cap.PowerCap`).
    trace_dt: sample period (s) of utilisation traces when the workload has no ``util_trace_dt``.
    """

    name = "power"

    def __init__(self, system: Any = None, *, cooling: bool | None = None, sample_dt: float | None = None,
                 facility_cap_w: float | Sequence | None = None, job_cpu_cap_w: float | None = None,
                 job_gpu_cap_w: float | None = None, price_per_kwh: float | None = None,
                 trace_dt: float = 30.0):
        self.system = system
        self._cooling_opt = cooling
        self._sample_dt = sample_dt
        self._overrides = {k: v for k, v in (("job_cpu_cap_w", job_cpu_cap_w),
                                             ("job_gpu_cap_w", job_gpu_cap_w), ("price_per_kwh", price_per_kwh))
                           if v is not None}
        self._cap_arg = None if facility_cap_w is None else PowerCap(facility_cap_w)
        self._trace_dt = float(trace_dt)
        self._finalized = False
        self._driven: dict[int, str] = {}      # job -> the model that sets its power (`drive_jobs`)
        self._on_bound: list = []              # callables f(self) run at the end of `bind`

    @classmethod
    def from_system(cls, system: Any, options: dict | None = None,
                    facility_cap_w: float | Sequence | None = None) -> "PowerModel":
        """Build from a `SystemSpec` and the run's free-form options (``facility_cap_w``: the run's
        ``--power-cap``, which overrides the options' and the ``[power]`` table's).

        Reads ``options["power"]`` (a dict) for ``cooling`` (bool), ``facility_cap_w``,
        ``job_cpu_cap_w``, ``job_gpu_cap_w``, ``price_per_kwh``, ``sample_dt`` and ``trace_dt``;
        ``options["sample_dt"]`` is used when the power dict has none.
        """
        opts = dict((options or {}).get("power", {}) or {})
        known = {"cooling", "facility_cap_w", "job_cpu_cap_w", "job_gpu_cap_w", "price_per_kwh", "sample_dt",
                 "trace_dt"}
        bad = sorted(set(opts) - known)
        if bad:
            raise PowerConfigError(f"run options: unknown [options.power] key(s) {', '.join(map(repr, bad))}; "
                                   f"known: {', '.join(sorted(known))}")
        if "sample_dt" not in opts and options and "sample_dt" in options:
            opts["sample_dt"] = options["sample_dt"]
        if facility_cap_w is not None:
            opts["facility_cap_w"] = facility_cap_w
        return cls(system, **opts)

    # ================================================================== binding
    #: allocation units per node: 1 when units are nodes; G in GPU allocation (``twin.run`` sets it),
    #: where a job holding g GPUs of a node draws g / G of the node's dynamic power (its share of the
    #: node's component power above idle; the CPUs, memory and NIC of a shared node are shared in
    #: proportion to the GPUs held; an assumption of GPU-granular accounting)
    units_per_node: int = 1

    def bind(self, ctx: ModelContext) -> None:
        self.ctx = ctx
        self.units_per_node = getattr(ctx, "units_per_node", None) or self.units_per_node   # GPU allocation: G
        spec = self.system if self.system is not None else ctx.system
        if spec is None:
            spec = load_system("generic")
        self.spec = spec
        if not spec.power:
            raise PowerConfigError(f"system file {spec.path or spec.name}: no [power] table; the power model needs one")
        table = dict(spec.power)
        table.update(self._overrides)
        upn = int(self.units_per_node)
        if upn < 1 or int(ctx.n_nodes) % upn:
            raise PowerConfigError(f"power model: {ctx.n_nodes} allocation units are not whole nodes of {upn} units")
        n_nodes = int(ctx.n_nodes) // upn
        self.notes: list[str] = []
        cooling_table = dict(spec.cooling)
        if n_nodes != spec.nodes:
            table.pop("slots", None)
            table.pop("cdus", None)
            r = n_nodes / spec.nodes
            for key in ("design_heat_w", "tower_fan_design_w", "primary_pump_design_w", "tower_pump_design_w",
                        "secondary_heat_capacity_j_per_k", "facility_heat_capacity_j_per_k"):
                if key in cooling_table:
                    cooling_table[key] = float(cooling_table[key]) * r
            self.notes.append(f"machine resized from {spec.nodes} to {n_nodes} nodes: no empty slots, CDUs as "
                              f"needed by the layout, cooling plant sizes scaled by {r:.4g}")
        self.cfg: PowerConfig = parse_power(table, nodes=n_nodes, cpus_per_node=spec.cpus_per_node,
                                            gpus_per_node=spec.gpus_per_node, path=spec.path)
        cfg = self.cfg
        self.layout = Layout(cfg)
        self.chain = Chain(cfg, self.layout)
        self.k_fac = 1.0 / (cfg.dcdc_efficiency * cfg.rectifier_efficiency)   # facility W per node W (affine)
        self._groups = self._node_groups(spec, table, n_nodes, upn)
        want_cooling = bool(spec.cooling) if self._cooling_opt is None else bool(self._cooling_opt)
        if want_cooling and not spec.cooling:
            raise PowerConfigError(f"system file {spec.path or spec.name}: cooling requested but no [cooling] table")
        if self._groups is None:
            idle_fac = self.chain.uniform_breakdown(0.0, 0.0)["facility_w"]
            peak = self.chain.uniform_breakdown(1.0, 1.0)
        else:
            idle_fac = self.chain.breakdown(self._slot_power(0.0))["facility_w"]
            peak = self.chain.breakdown(self._slot_power(1.0))
        self.cool_cfg: CoolingConfig | None = (
            parse_cooling(cooling_table, path=spec.path, default_design_heat_w=peak["rack_input_w"])
            if want_cooling else None)
        if self.cool_cfg is not None and self.cool_cfg.backend == "fmu":
            from hpctwin.power.fmu import check_fmu  # noqa: PLC0415 - optional FMU back-end
            check_fmu(self.cool_cfg)
        self.cap = self._cap_arg if self._cap_arg is not None else PowerCap(cfg.facility_cap_w)
        self.capped = self.cap.finite
        limits = [electrical_limit_w(float(v), self.chain.cdu_pumps_w, self.cool_cfg) for v in self.cap.values]
        self._elec_limits = np.array([w for w, _ in limits])
        self.cap_level = limits[0][1]
        if self.capped:
            check_feasible(self)
        self.idle_facility_w = idle_fac
        self.peak_facility_w = peak["facility_w"]
        self.sample_dt = float(self._sample_dt or ctx.options.get("sample_dt", 15.0))
        if self.sample_dt <= 0:
            raise PowerConfigError(f"sample_dt must be > 0, got {self.sample_dt}")

        # ---- per-job profiles and caps
        jobs = ctx.jobs
        nj = len(jobs)
        cols = getattr(jobs, "columns", {}) or {}
        self.cpu_util, self.gpu_util, self.compute_bound = job_profiles(
            cols, nj, ctx.rng("power.profile"), np.asarray(ctx.runtime, dtype=float))
        self.cpu_cap = np.full(nj, cfg.job_cpu_cap_w)
        self.gpu_cap = np.full(nj, cfg.job_gpu_cap_w)
        for name, arr, idle in (("cpu_cap_w", self.cpu_cap, cfg.cpu_idle_w),
                                ("gpu_cap_w", self.gpu_cap, cfg.gpu_idle_w)):
            if name in cols:
                c = np.asarray(cols[name], dtype=float)
                known = ~np.isnan(c)
                if np.any(c[known] < idle):
                    i = int(np.flatnonzero(known & (c < idle))[0])
                    raise PowerConfigError(f"workload column {name!r}: job index {i} has cap {c[i]:g} W, "
                                           f"below the device idle power {idle:g} W")
                arr[known] = c[known]
        self.p_uncapped = cfg.node_power_w(self.cpu_util, self.gpu_util)
        self.p_capped = cfg.node_power_w(self.cpu_util, self.gpu_util, self.cpu_cap, self.gpu_cap)
        self.node_idle = cfg.node_idle_w
        self.cap_ratio = np.ones(nj)
        capped = np.flatnonzero(np.isfinite(self.cpu_cap) | np.isfinite(self.gpu_cap))
        for j in capped:
            self.cap_ratio[j] = device_ratio(cfg, self.cpu_util[j], self.gpu_util[j], self.cpu_cap[j], self.gpu_cap[j])
        self.cap_rate = progress_rate(self.cap_ratio, self.compute_bound)
        if self._groups is not None:
            self._group_levels(capped)

        # ---- traces
        self.traces = {}
        tr_c = cols.get("cpu_util_trace")
        tr_g = cols.get("gpu_util_trace")
        if tr_c is not None or tr_g is not None:
            if self.chain.staged:
                raise NotImplementedError("utilisation traces with rectifier_sharing = 'staged' are not supported "
                                          "(trace steps are applied lazily with the affine equal-sharing chain)")
            tdt = cols.get("util_trace_dt")
            for j in range(nj):
                c = None if tr_c is None else tr_c[j]
                g = None if tr_g is None else tr_g[j]
                if c is None and g is None:
                    continue
                k = max(len(c) if c is not None else 0, len(g) if g is not None else 0)
                if k == 0:
                    continue
                uc = np.full(k, self.cpu_util[j]) if c is None else np.asarray(c, dtype=float)
                ug = np.full(k, self.gpu_util[j]) if g is None else np.asarray(g, dtype=float)
                if len(uc) != k or len(ug) != k:
                    raise ValueError(f"job index {j}: cpu_util_trace and gpu_util_trace have different lengths")
                lev = cfg.node_power_w(uc, ug, self.cpu_cap[j], self.gpu_cap[j])
                dtj = float(tdt[j]) if tdt is not None else self._trace_dt
                if not dtj > 0:
                    raise ValueError(f"job index {j}: util_trace_dt must be > 0, got {dtj}")
                self.traces[j] = (lev, dtj)
                self.p_capped[j] = float(lev.mean())          # projections/throttling use the trace mean
                self.p_uncapped[j] = float(cfg.node_power_w(uc, ug).mean())

        if self._groups is not None and self.traces:
            raise PowerConfigError(f"system file {spec.path or spec.name}: utilisation traces with [[node_groups]] are "
                                   "not supported yet")
        # ---- machine state
        # accounting window starts where the run's sampling grid does: the first submission rounded
        # down to a multiple of sample_dt (or the run option 't0')
        first = float(np.min(jobs.submit)) if nj else 0.0
        self.t0 = float(ctx.options.get("t0", math.floor(first / self.sample_dt) * self.sample_dt))
        n_slots = self.layout.n_slots
        self.empty_idle_w = (n_slots - cfg.nodes) * self.node_idle
        self.jobs_it = 0.0
        if self._groups is None:
            self.idle_it = n_slots * self.node_idle
            idle = self.chain.uniform_breakdown(0.0, 0.0)
            p_in_idle = self.chain.node_input_w(self.node_idle)
            ch_out = self.layout.nodes_in_chassis * p_in_idle + self.chain.switch_chassis_w
        else:                                          # per node type
            slot_idle = self._slot_power(0.0)
            self.idle_it = float(slot_idle.sum())
            idle = self.chain.breakdown(slot_idle)
            ch_out = (np.bincount(self.layout.node_chassis, weights=self.chain.node_input_w(slot_idle),
                                  minlength=self.layout.n_chassis) + self.chain.switch_chassis_w)
        self.loss = idle["loss_w"]
        self.v0 = (self.jobs_it, self.idle_it, self.loss)
        self.ch_out = ch_out.astype(float)
        self.ch_in = self.chain.chassis_input_w(self.ch_out)
        self.cdu_v0 = np.bincount(self.layout.chassis_cdu, weights=self.ch_in, minlength=self.layout.n_cdu)
        self.running: dict[int, _Running] = {}
        self.theta = 1.0
        self._run_nodes = 0.0            # nodes running jobs
        self._full_dyn = 0.0             # sum over running jobs of n * (full-speed level - idle), W
        self._cap_k = 0                  # index of the cap value in force (a cap series)
        self.min_theta = 1.0
        self.throttled_s = 0.0           # s with theta < 1
        self._t_theta = self.t0
        self.energy = np.zeros(nj)
        self.t_start = np.full(nj, np.nan)
        self.t_end = np.full(nj, np.nan)
        self.held = np.zeros(nj)        # s the job held nodes, over all its segments (requeues)
        self._t_last_event = self.t0
        # change-point logs: scalar series and per-CDU heat
        self._lt: list[float] = []
        self._ljobs: list[float] = []
        self._lidle: list[float] = []
        self._lloss: list[float] = []
        self._chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._cdu_log: list[tuple[Any, np.ndarray, np.ndarray]] = []
        # per-CDU heat is only reported for several CDUs: a single-CDU machine keeps no log
        self._log_cdu = self.layout.n_cdu > 1
        self._finalized = False
        # jobs whose per-node power another model sets (`drive_jobs`, `set_job_power`)
        self._driven = {}
        self._start_w: dict[int, float] = {}
        self._closed: dict[int, tuple[_Running, float]] = {}   # driven job -> (its last segment, end s)
        self.driven_changes = 0
        # node power states (`enable_node_states`): None until a power-saving model asks for them
        self._free_w: np.ndarray | None = None      # W drawn by each node that runs no job
        self._deferred: dict[int, Any] = {}          # job -> its nodes, run not begun yet (`defer_start`)
        for fn in self._on_bound:
            fn(self)

    # ================================================================== power of nodes
    def _level(self, j: int) -> float:
        """Per-node component power (W) of job j now (caps and facility throttle applied)."""
        base = self.p_capped[j]
        if self.theta >= 1.0:
            return float(base)
        return float(self.node_idle + self.theta * (base - self.node_idle))

    def _apply(self, now: float, r: _Running, d_node: float, d_jobs: float, d_idle: float) -> None:
        """Change the component power of every node of ``r`` by ``d_node`` W at ``now``."""
        if d_node == 0.0 and d_jobs == 0.0 and d_idle == 0.0:
            return
        n = r.n
        if self.chain.staged:
            cfg = self.cfg
            ids = r.ch_ids
            self.ch_out[ids] += r.ch_counts * (d_node / cfg.dcdc_efficiency)
            new_in = self.chain.chassis_input_w(self.ch_out[ids])
            d_in = new_in - self.ch_in[ids]
            self.ch_in[ids] = new_in
            d_rack = float(d_in.sum())
            cdu = self.layout.chassis_cdu[ids]
            self._cdu_log.append((now, cdu, d_in))
        else:
            d_rack = n * d_node * self.k_fac
            if self._log_cdu:
                self._cdu_log.append((now, r.cdu_ids, r.cdu_counts * (d_node * self.k_fac)))
        d_loss = d_rack - n * d_node
        self.jobs_it += d_jobs
        self.idle_it += d_idle
        self.loss += d_loss
        self._lt.append(now)
        self._ljobs.append(d_jobs)
        self._lidle.append(d_idle)
        self._lloss.append(d_loss)

    def _advance_trace(self, j: int, r: _Running, now: float) -> None:
        """Apply the trace samples of job j whose boundaries fall in (t_ref progress, now]."""
        lev, dt = r.trace
        p_now = r.p_ref + max(now - r.t_ref, 0.0) * r.rate
        k_now = min(int(p_now // dt), len(lev) - 1)
        if k_now <= r.k:
            r.p_ref, r.t_ref = p_now, now
            return
        ks = np.arange(r.k + 1, k_now + 1)
        times = r.t_ref + (ks * dt - r.p_ref) / r.rate
        base = lev[ks]
        new = base if self.theta >= 1.0 else self.node_idle + self.theta * (base - self.node_idle)
        prev = np.concatenate(([r.level], new[:-1]))
        d = new - prev
        # job energy: pieces [t_last, t_1), [t_1, t_2) ... up to the last boundary
        edges = np.concatenate(([r.t_last], times))
        self.energy[j] += r.n * float(np.sum(np.concatenate(([r.level], new[:-1])) * np.diff(edges)))
        r.t_last = float(times[-1])
        r.level = float(new[-1])
        r.k = int(k_now)
        r.p_ref, r.t_ref = p_now, now
        djobs = r.n * d
        dloss = r.n * d * (self.k_fac - 1.0)
        self._chunks.append((times, djobs, np.zeros_like(djobs), dloss))
        self.jobs_it += float(djobs.sum())
        self.loss += float(dloss.sum())
        self._cdu_log.append((times, r.cdu_ids, np.outer(d * self.k_fac, r.cdu_counts)))

    def _touch_energy(self, j: int, r: _Running, now: float) -> None:
        if r.trace is not None:
            self._advance_trace(j, r, now)
        self.energy[j] += r.n * r.level * (now - r.t_last)
        r.t_last = now

    # ================================================================== engine hooks
    def on_start(self, now: float, job: int, nodes: np.ndarray) -> dict[int, float] | None:
        if self._deferred and job in self._deferred:   # its nodes boot first: the run's power from `start_deferred`
            self._deferred[job] = np.array(nodes, dtype=np.int64)
            f = self._factor(job)
            return {job: f} if f != 1.0 else None
        return self._start(now, job, nodes)

    def _start(self, now: float, job: int, nodes: np.ndarray) -> dict[int, float] | None:
        """Job ``job`` starts drawing its power on ``nodes`` (units) at ``now``; its rate factors."""
        nodes = np.asarray(nodes, dtype=np.int64)
        if self._free_w is not None:                  # nodes in a sleep state: back to idle first
            self.set_free_node_power(now, nodes, self.idle_node_w(nodes))
        r = _Running()
        upn = self.units_per_node
        if upn > 1:
            # GPU allocation: ``nodes`` are GPU units; the job holds a share of each node it touches
            node_ids, held = np.unique(nodes // upn, return_counts=True)
            share = held / upn
            nodes = node_ids
            r.n = n = float(held.sum()) / upn
        else:
            share = None
            r.n = n = len(nodes)
        r.nodes = nodes
        r.start = r.t_last = r.t_ref = float(now)
        r.rate = 1.0
        r.p_ref = 0.0
        r.k = 0
        tr = self.traces.get(job)
        r.trace = tr
        r.tdt = tr[1] if tr is not None else 0.0
        if self.chain.staged:
            if share is None:
                r.ch_ids, r.ch_counts = np.unique(self.layout.node_chassis[nodes], return_counts=True)
            else:
                cnt = np.bincount(self.layout.node_chassis[nodes], weights=share)
                r.ch_ids = np.flatnonzero(cnt)
                r.ch_counts = cnt[r.ch_ids]
        else:
            if self._log_cdu:
                cnt = np.bincount(self.layout.node_cdu[nodes], weights=share, minlength=self.layout.n_cdu)
                r.cdu_ids = np.flatnonzero(cnt)
                r.cdu_counts = cnt[r.cdu_ids].astype(float)
            else:
                r.cdu_ids = _CDU0
                r.cdu_counts = np.array([float(n)])
        r.idle = self.node_idle
        if self._driven and job in self._driven:        # another model sets its power (`set_job_power`)
            r.level = self._start_w[job]
        elif tr is not None:
            base = float(tr[0][0])
            r.level = base if self.theta >= 1.0 else self.node_idle + self.theta * (base - self.node_idle)
        elif self._groups is not None:                  # node types: the mean over the job's nodes
            self._group_start(r, job, nodes)
        else:
            r.level = self._level(job)
        r.t_lvl = r.start
        r.factor = self._factor(job)
        self.running[job] = r
        if math.isnan(self.t_start[job]):     # first segment (a requeued job starts again)
            self.t_start[job] = now
        self._apply(now, r, r.level - r.idle, n * r.level, -n * r.idle)
        self._run_nodes += n
        if self._groups is None:
            self._full_dyn += n * (float(self.p_capped[job]) - self.node_idle)
        else:
            self._full_dyn += n * (r.level - r.idle)
            self._run_idle += n * r.idle
        rates = {job: r.factor} if r.factor != 1.0 else {}
        if self.capped:
            rates.update(self._rebalance(now))
        self._t_last_event = now
        return rates or None

    def on_finish(self, now: float, job: int) -> dict[int, float] | None:
        r = self.running.pop(job, None)
        if r is None:
            nodes = self._deferred.pop(job, None) if self._deferred else None
            if nodes is not None:             # its run began at this instant (`start_deferred` not called yet)
                self._start(now, job, nodes)
                return self.on_finish(now, job)
            return None
        self._touch_energy(job, r, now)
        self.t_end[job] = now
        self.held[job] += now - r.start
        self._apply(now, r, r.idle - r.level, -r.n * r.level, r.n * r.idle)
        self._run_nodes -= r.n
        if self._groups is None:
            self._full_dyn -= r.n * (float(self.p_capped[job]) - self.node_idle)
        else:
            self._full_dyn -= r.n * (r.level - r.idle)
            self._run_idle -= r.n * r.idle
        self._t_last_event = now
        if self._driven and job in self._driven:
            self._closed[job] = (r, float(now))        # a late `set_job_power` may still revise it
        if self.capped:
            return self._rebalance(now) or None
        return None

    def on_rate_change(self, now: float, job: int, rate: float) -> None:
        r = self.running.get(job)
        if r is None:
            return
        if r.trace is not None:
            self._advance_trace(job, r, now)
        r.rate = float(rate) if rate > 0 else 1e-300

    # ================================================================== node power states (power saving)
    def enable_node_states(self) -> None:
        """Keep the power of nodes that run no job per node (W, the node's components), so that a
        power-saving model (`power.suspend`) can put idle nodes in sleep states (`set_free_node_power`)
        and defer a job's power to when its nodes are up (`defer_start`). Every node starts at its idle
        power. Changes are in the ``idle`` energy category (node power not drawn by jobs)."""
        if self.capped:
            raise PowerConfigError("power saving with a facility power cap (--power-cap, [power] facility_cap_w) is "
                                   "not supported yet: the cap's throttle does not see sleeping or booting nodes")
        if self.units_per_node != 1:
            raise PowerConfigError("power saving needs whole-node allocation (units = nodes)")
        if self._free_w is None:
            self._free_w = self.idle_node_w()

    def idle_node_w(self, nodes: Any = None) -> np.ndarray:
        """Idle component power (W) of ``nodes`` (all nodes when None), per node type."""
        if self._groups is None:
            idle = np.full(self.cfg.nodes, float(self.node_idle))
        else:
            idle = self._groups[2][self._groups[1]]
        return idle if nodes is None else idle[np.asarray(nodes, dtype=np.int64)]

    # ================================================================== node types ([[node_groups]])
    def _node_groups(self, spec: Any, table: dict, n_nodes: int, upn: int):
        """None for one node type; else (per-group `PowerConfig`s, group of each node, idle W per group)."""
        groups = list(getattr(spec, "node_groups", None) or [])
        if not groups:
            return None
        where = f"system file {spec.path or spec.name}"
        if n_nodes != spec.nodes:
            raise PowerConfigError(f"{where}: its [[node_groups]] describe {spec.nodes:,} nodes but the run has "
                                   f"{n_nodes:,}; run with --nodes {spec.nodes} (node types cannot be resized)")
        if upn != 1:
            raise PowerConfigError(f"{where}: [[node_groups]] need whole-node allocation (units = nodes), not "
                                   "--allocation gpu")
        cfgs = [parse_power({**table, **g["power"]}, nodes=g["nodes"], cpus_per_node=g["cpus_per_node"],
                            gpus_per_node=g["gpus_per_node"], path=spec.path) for g in groups]
        ix = np.repeat(np.arange(len(groups)), [g["nodes"] for g in groups])
        self._group_names = [g["name"] for g in groups]
        self._run_idle = 0.0                         # sum over running jobs of n * idle W of their nodes
        return cfgs, ix, np.array([c.node_idle_w for c in cfgs])

    def _slot_power(self, util: float) -> np.ndarray:
        """Component power (W) of every node slot at CPU and GPU utilisation ``util``, per node type (empty
        slots: the [power] table's node at idle)."""
        cfgs, ix, _ = self._groups
        p = np.full(self.layout.n_slots, self.cfg.node_idle_w)
        per = np.array([float(c.node_power_w(util, util)) for c in cfgs])
        p[:len(ix)] = per[ix]
        return p

    def _group_levels(self, capped: np.ndarray) -> None:
        """Per node type, each job's per-node power (W); projections (before the nodes are known) take the
        highest over the types and the lowest idle power: an upper bound of what a start adds."""
        if self.capped or len(capped):
            raise PowerConfigError(f"system file {self.spec.path or self.spec.name}: power caps (facility or per "
                                   "job) with [[node_groups]] are not supported yet")
        cfgs, _, idle_g = self._groups
        self._pg = np.stack([np.atleast_1d(c.node_power_w(self.cpu_util, self.gpu_util)) for c in cfgs])
        self.p_uncapped = self.p_capped = self._pg.max(axis=0)
        self.node_idle = float(idle_g.min())

    def _group_start(self, r: _Running, job: int, nodes: np.ndarray) -> None:
        """``r``'s level and idle power: the means over its nodes' types; its per-CDU (per-chassis) weights
        make each CDU's share of a start or finish exact."""
        _, ix, idle_g = self._groups
        g = ix[nodes]
        lvl_node = self._pg[g, job]
        idle_node = idle_g[g]
        r.level = float(lvl_node.sum()) / r.n
        r.idle = float(idle_node.sum()) / r.n
        d_mean = r.level - r.idle
        if d_mean == 0.0:
            return
        w = (lvl_node - idle_node) / d_mean          # node weights: sum = n
        if self.chain.staged:
            cnt = np.bincount(self.layout.node_chassis[nodes], weights=w, minlength=self.layout.n_chassis)
            r.ch_ids = np.flatnonzero(cnt)
            r.ch_counts = cnt[r.ch_ids]
        elif self._log_cdu:
            cnt = np.bincount(self.layout.node_cdu[nodes], weights=w, minlength=self.layout.n_cdu)
            r.cdu_ids = np.flatnonzero(cnt)
            r.cdu_counts = cnt[r.cdu_ids]

    def set_free_node_power(self, now: float, nodes: Any, node_w: Any) -> None:
        """From ``now`` (s) on, each of ``nodes`` (running no job) draws ``node_w`` W (one value, or one
        per node) instead of what it drew: a sleep state, a boot, or its idle power again."""
        if self._free_w is None:
            raise RuntimeError("PowerModel.set_free_node_power before enable_node_states")
        nodes = np.asarray(nodes, dtype=np.int64)
        if not len(nodes):
            return
        w = np.broadcast_to(np.asarray(node_w, dtype=float), nodes.shape)
        d = w - self._free_w[nodes]
        moved = d != 0.0
        if not moved.any():
            return
        for dv in np.unique(d[moved]):
            sel = nodes[d == dv]
            self._apply(now, self._nodes_record(sel), float(dv), 0.0, len(sel) * float(dv))
        self._free_w[nodes] = w
        if now > self._t_last_event:
            self._t_last_event = now

    def _nodes_record(self, nodes: np.ndarray) -> _Running:
        """A `_Running` record of whole ``nodes`` for `_apply` (their count, chassis and CDUs)."""
        r = _Running()
        r.n = len(nodes)
        if self.chain.staged:
            r.ch_ids, r.ch_counts = np.unique(self.layout.node_chassis[nodes], return_counts=True)
        elif self._log_cdu:
            cnt = np.bincount(self.layout.node_cdu[nodes], minlength=self.layout.n_cdu)
            r.cdu_ids = np.flatnonzero(cnt)
            r.cdu_counts = cnt[r.cdu_ids].astype(float)
        else:
            r.cdu_ids = _CDU0
            r.cdu_counts = np.array([float(r.n)])
        return r

    def defer_start(self, job: int) -> None:
        """The run of ``job`` begins after its nodes boot: at its start (``on_start``) the model keeps its
        nodes and its rate factor, and its power is drawn from `start_deferred` on."""
        if job in self.running:
            raise ValueError(f"defer_start: job index {job} is already running")
        self._deferred[int(job)] = None

    def start_deferred(self, now: float, job: int) -> None:
        """The run of deferred ``job`` begins at ``now`` (s): its nodes draw its power from now on."""
        nodes = self._deferred.pop(int(job), None)
        if nodes is None:
            return
        self._start(now, int(job), nodes)     # no facility cap here, so the factor given at on_start holds

    # ================================================================== jobs driven by another model
    def when_bound(self, fn) -> None:
        """Call ``fn(self)`` at the end of `bind` (at once if already bound): a model that drives
        jobs' power (`drive_jobs`) declares them there, once this model's tables are known."""
        self._on_bound.append(fn)
        if hasattr(self, "running"):
            fn(self)

    def node_power_without_gpus_w(self, job: int) -> float:
        """Per-node component power (W) of ``job``'s nodes without their GPUs: the CPUs at the job's
        utilisation (`power.profiles`, per-job CPU cap applied) + memory, NICs, NVMe and other."""
        cfg = self.cfg
        return float(cfg.node_power_w(self.cpu_util[job], 0.0, self.cpu_cap[job], math.inf)
                     - cfg.gpus_per_node * cfg.gpu_idle_w)

    def drive_jobs(self, jobs: Sequence[int], start_node_w: Sequence[float], max_node_w: Sequence[float],
                   owner: str) -> None:
        """Hand the per-node component power of ``jobs`` to the model ``owner`` (W per node).

        A driven job draws ``start_node_w`` from each start until ``owner`` says otherwise
        (`set_job_power`); its own job power model (profiles, per-job device caps, traces) is not
        used. The facility-cap throttle does not act on it (its speed is its driver's business:
        its power counts as base load, and the summary's ``power_cap`` says so); start projections
        (`admit`, `projected_facility_power_w`) count it at ``max_node_w``.
        """
        if self.chain.staged:
            raise NotImplementedError("jobs driven by another model (serving) with rectifier_sharing = 'staged' are "
                                      "not supported (their power changes are applied out of event order, which "
                                      "needs the affine equal-sharing chain)")
        if self.units_per_node != 1:
            raise NotImplementedError("jobs driven by another model need whole-node allocation (units = nodes)")
        if self._groups is not None:
            raise NotImplementedError("jobs driven by another model (serving) on a machine with [[node_groups]] are "
                                      "not supported yet")
        jobs = [int(j) for j in jobs]
        if len(jobs) != len(start_node_w) or len(jobs) != len(max_node_w):
            raise ValueError("drive_jobs: jobs, start_node_w and max_node_w must have the same length")
        for j, w0, w1 in zip(jobs, start_node_w, max_node_w):
            if j in self.running:
                raise ValueError(f"drive_jobs: job index {j} is already running")
            if not (0.0 <= float(w0) <= float(w1)):
                raise ValueError(f"drive_jobs: job index {j}: need 0 <= start_node_w ({w0}) <= max_node_w ({w1})")
            self._driven[j] = str(owner)
            self._start_w[j] = float(w0)
            self.p_capped[j] = self.p_uncapped[j] = float(w1)
            self.cap_rate[j] = 1.0
            self.traces.pop(j, None)

    def set_job_power(self, job: int, t: float, node_w: float) -> None:
        """From time ``t`` (s) on, each node of the driven ``job`` draws ``node_w`` W (components).

        Changes of one job come in time order, each at or after the job's start. ``t`` may lie
        before this model's latest event (its driver learns of a phase after the fact): the change
        is logged at ``t`` and the job's energy corrected, so the energies and series stay exact.
        A change for a job that has already left its nodes applies up to its end (``t`` at or after
        the end is ignored). The running totals used by the cap and projections take the new
        level at once.
        """
        if self._finalized:
            raise RuntimeError("PowerModel.set_job_power after finalize")
        if job not in self._driven:
            raise ValueError(f"set_job_power: job index {job} is not driven by another model (drive_jobs)")
        t, node_w = float(t), float(node_w)
        if not node_w >= 0:
            raise ValueError(f"set_job_power: job index {job}: node power must be >= 0 W, got {node_w}")
        r = self.running.get(job)
        if r is not None and t >= r.start:
            if t < r.t_lvl:
                raise ValueError(f"set_job_power: job index {job}: change at t={t} before its previous one "
                                 f"at {r.t_lvl}")
            d = node_w - r.level
            if d != 0.0:
                if t >= r.t_last:
                    self._touch_energy(job, r, t)
                else:                                     # [t, t_last) was counted at the old level
                    self.energy[job] += r.n * d * (r.t_last - t)
                self._apply(t, r, d, r.n * d, 0.0)
                r.level = node_w
                self.driven_changes += 1
            r.t_lvl = t
            return
        closed = self._closed.get(job)
        if closed is None or t >= closed[1]:
            return
        r, end = closed
        if t < r.t_lvl:
            raise ValueError(f"set_job_power: job index {job}: change at t={t} before its previous one at {r.t_lvl}")
        d = node_w - r.level
        if d != 0.0:                                      # the level over [t, end): log it and undo it at end
            self.energy[job] += r.n * d * (end - t)
            self._apply(t, r, d, r.n * d, 0.0)
            self._apply(end, r, -d, -r.n * d, 0.0)
            r.level = node_w
            self.driven_changes += 1
        r.t_lvl = t

    def _driven_summary(self, out: dict) -> None:
        """The summary's ``power_driven`` table, and the cap report's word on driven jobs."""
        owners = sorted(set(self._driven.values()))
        js = [j for j in self._driven if not math.isnan(self.t_start[j])]
        out["power_driven"] = {
            "owners": owners, "jobs": len(js), "level_changes": int(self.driven_changes),
            "energy_jobs_kwh": float(sum(self.energy[j] for j in js)) / 3.6e6,
            "note": (f"the per-node power of these jobs is set by the {', '.join(owners)} model(s) and included in "
                     "node, rack and facility power, losses, cooling, PUE and the energy categories ('jobs'); "
                     "their own job power model is not used"),
        }
        if "power_cap" in out:
            pc = out["power_cap"]
            pc["driven_jobs"] = ("not throttled: jobs driven by " + ", ".join(owners) + " keep the power their model "
                                 "sets (throttling them would slow their work, which the power model cannot feed "
                                 "back); the cap throttles the other jobs around them, and their starts are "
                                 "projected at their maximum power")
            if not pc["held"] and str(pc.get("why", "")).startswith("unexplained"):
                pc["why"] = ("jobs driven by " + ", ".join(owners) + " are not throttled and change their power "
                             "between the power model's events")

    # ================================================================== facility cap
    def electrical_power_w(self) -> float:
        """Machine electrical power now (W): rack input (IT + losses) + CDU pumps."""
        return self.jobs_it + self.idle_it + self.chain.switches_w + self.loss + self.chain.cdu_pumps_w

    def electrical_cap_w(self, now: float) -> float:
        """Limit (W) on rack input + CDU pumps that holds the facility cap in force at ``now``
        (`power.cap.electrical_limit_w`; inf without a cap)."""
        return float(self._elec_limits[self.cap.index(now)])

    def full_speed_electrical_w(self) -> float:
        """Electrical power (W) the machine would draw now with no throttle (theta = 1)."""
        cur_dyn = self.jobs_it - (self._run_nodes * self.node_idle if self._groups is None else self._run_idle)
        return self.electrical_power_w() + (self._full_dyn - cur_dyn) * self.k_fac

    def projected_full_speed_w(self, job: int, n_nodes: float) -> float:
        """Electrical power (W) at full speed if ``job`` started now on ``n_nodes`` idle nodes
        (affine chain, exact for equal rectifier sharing)."""
        return self.full_speed_electrical_w() + n_nodes * (float(self.p_capped[job]) - self.node_idle) * self.k_fac

    def electrical_limit_for(self, cap_w: float) -> float:
        """The electrical limit (W) that holds a facility cap of ``cap_w`` W on this machine."""
        return electrical_limit_w(float(cap_w), self.chain.cdu_pumps_w, self.cool_cfg)[0]

    def admit(self, now: float, job: int, n_nodes: float) -> tuple[bool, float, float]:
        """Would starting ``job`` on ``n_nodes`` idle nodes now keep the machine under the cap at
        full speed? Returns (ok, projected electrical W at full speed, limit W)."""
        limit = self.electrical_cap_w(now)
        proj = self.projected_full_speed_w(job, n_nodes)
        return proj <= limit * (1.0 + 1e-12), proj, limit

    def next_event(self, now: float) -> float | None:
        """The next change of a time-varying cap (the throttle is recomputed then)."""
        if self.cap.constant:
            return None
        return self.cap.next_change(now)

    def on_event(self, now: float, control) -> dict[int, float] | None:
        return self._rebalance(now) or None

    def _set_theta(self, now: float, theta: float) -> None:
        if self.theta < 1.0:
            self.throttled_s += now - self._t_theta
        self._t_theta = now
        self.theta = theta
        self.min_theta = min(self.min_theta, theta)

    def _rebalance(self, now: float) -> dict[int, float]:
        """Choose the throttle theta that keeps the electrical power under the cap's electrical limit."""
        cap = self.electrical_cap_w(now)
        if not self.running:
            if self.theta != 1.0:
                self._set_theta(now, 1.0)
            return {}
        idle = self.node_idle
        cur_dyn = 0.0                                    # sum n * (level - idle) now
        full_dyn = 0.0                                   # sum n * (p_capped - idle)
        driven = self._driven
        for j, r in self.running.items():
            if driven and j in driven:                   # not throttled: part of the base load
                continue
            cur_dyn += r.n * (r.level - idle)
            full_dyn += r.n * (self.p_capped[j] - idle)
        base = self.electrical_power_w() - cur_dyn * self.k_fac
        if full_dyn <= 0:
            theta = 1.0
        else:
            theta = min(1.0, (cap - base) / (full_dyn * self.k_fac))
        if theta < 0.0:
            theta = 0.0
        if abs(theta - self.theta) < 1e-12:
            return {}
        self._set_theta(now, theta)
        changed = {}
        for j, r in self.running.items():
            if driven and j in driven:
                continue
            self._touch_energy(j, r, now)
            base_j = (float(r.trace[0][min(r.k, len(r.trace[0]) - 1)]) if r.trace is not None
                      else float(self.p_capped[j]))
            new = idle + theta * (base_j - idle) if theta < 1.0 else base_j
            self._apply(now, r, new - r.level, r.n * (new - r.level), 0.0)
            r.level = new
            f = self._factor(j)
            if f != r.factor:
                r.factor = f
                changed[j] = f
        return changed

    def _factor(self, j: int) -> float:
        """This model's progress-rate factor for job j under its cap and the current throttle."""
        if self._driven and j in self._driven:           # its rate is its driver's business
            return 1.0
        if self.theta >= 1.0:
            return float(self.cap_rate[j])
        dyn_unc = self.p_uncapped[j] - self.node_idle
        dyn_new = self.theta * (self.p_capped[j] - self.node_idle)
        phi = float(frequency_ratio(dyn_unc, dyn_new, self.cfg.cap_power_exponent))
        f = float(progress_rate(phi, self.compute_bound[j]))
        return f if f > 0 else 1e-6                       # fully throttled: crawl rather than stall forever

    # ================================================================== projections (scheduler)
    def job_node_power_w(self, job: int) -> float:
        """Per-node component power (W) job ``job`` would draw at full speed (caps applied)."""
        return float(self.p_capped[job])

    def projected_facility_power_w(self, extra_nodes: int = 0, job: int | None = None,
                                   cpu_util: float | None = None, gpu_util: float | None = None) -> float:
        """Electrical power (W) if ``extra_nodes`` idle nodes started running now.

        Their per-node draw is job ``job``'s (caps applied), or the given utilisations. Uses the
        affine chain (exact for equal rectifier sharing) and the full, unthrottled draw of the new
        nodes; the cooling plant is not included (it is computed after the run).
        """
        if job is not None:
            p = float(self.p_capped[job])
        else:
            p = float(self.cfg.node_power_w(cpu_util or 0.0, gpu_util or 0.0))
        return self.electrical_power_w() + extra_nodes * (p - self.node_idle) * self.k_fac

    # ================================================================== results
    def finalize(self, end: float) -> None:
        end = float(max(end, self._t_last_event))
        for j, r in self.running.items():
            self._touch_energy(j, r, end)
        self.end = end
        t = np.asarray(self._lt, dtype=float)
        parts = [(t, np.asarray(self._ljobs), np.asarray(self._lidle), np.asarray(self._lloss))] + self._chunks
        t = np.concatenate([p[0] for p in parts])
        order = np.argsort(t, kind="stable")
        self._t = t[order]
        self._djobs = np.concatenate([p[1] for p in parts])[order]
        self._didle = np.concatenate([p[2] for p in parts])[order]
        self._dloss = np.concatenate([p[3] for p in parts])[order]
        self._finalized = True
        t0, v = self.t0, self.v0
        self.E_jobs = ss.integral(self._t, self._djobs, v[0], t0, end)
        self.E_idle_nodes = ss.integral(self._t, self._didle, v[1], t0, end)
        self.E_switch = self.chain.switches_w * (end - t0)
        self.E_loss = ss.integral(self._t, self._dloss, v[2], t0, end)
        self.E_cdu = self.chain.cdu_pumps_w * (end - t0)
        # exact electrical peak (the level after each change point)
        elec = (ss.levels(self._t, self._djobs, v[0]) + ss.levels(self._t, self._didle, v[1])
                + ss.levels(self._t, self._dloss, v[2]) + self.chain.switches_w + self.chain.cdu_pumps_w)
        if len(elec):                                   # the state after the last change at each instant
            elec = elec[np.concatenate((self._t[1:] != self._t[:-1], [True]))]
        self.peak_electrical_w = float(max(elec.max() if len(elec) else 0.0,
                                           v[0] + v[1] + v[2] + self.chain.switches_w + self.chain.cdu_pumps_w))
        # cooling plant on the sampling grid t0 + k*dt (the engine's time-series grid, so that
        # `timeseries` reuses this result instead of integrating the plant a second time); the last
        # interval is weighted by the part of it inside [t0, end]
        self.E_plant = 0.0
        self._fac_samples = None
        if self.theta < 1.0:
            self.throttled_s += end - self._t_theta
            self._t_theta = end
        self._cool_summary = None
        self._cool_cache = None
        if self.cool_cfg is not None and end > t0:
            n = int(math.ceil((end - t0) / self.sample_dt))
            grid = t0 + self.sample_dt * np.arange(n)
            edges = np.concatenate((grid, [grid[-1] + self.sample_dt]))
            means = self._component_means(edges)
            rack = means[0] + means[1] + means[2] + self.chain.switches_w
            out = run_cooling(self.cool_cfg, rack, grid, self.sample_dt)
            self._cool_cache = (grid, means, out)
            w = np.diff(np.minimum(edges, end))
            self.E_plant = float(np.sum(out["plant_w"] * w))
            fac = rack + self.chain.cdu_pumps_w + out["plant_w"]
            self._fac_samples = (grid, fac)
            self._cool_summary = {"peak_facility_w": float(fac.max()),
                                  "mean_supply_c": float(np.average(out["secondary_supply_c"], weights=w)),
                                  "mean_return_c": float(np.average(out["secondary_return_c"], weights=w))}

    def _component_means(self, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Interval means (W) of job, idle-node and conversion-loss power over ``edges``."""
        v = self.v0
        jobs, idle, loss = ss.interval_means(self._t, [self._djobs, self._didle, self._dloss],
                                             [v[0], v[1], v[2]], edges)
        return jobs, idle, loss

    def _rack_means(self, edges: np.ndarray) -> np.ndarray:
        jobs, idle, loss = self._component_means(edges)
        return jobs + idle + loss + self.chain.switches_w

    def energy_breakdown_j(self) -> dict[str, float]:
        """Energies (J) over the run window ``[t0, end]``: the categories add up to ``facility``."""
        self._require_final()
        idle = self.E_idle_nodes + self.E_switch
        cooling = self.E_cdu + self.E_plant
        return {"jobs": self.E_jobs, "idle": idle, "loss": self.E_loss, "cooling": cooling,
                "it": self.E_jobs + idle, "rack": self.E_jobs + idle + self.E_loss,
                "facility": self.E_jobs + idle + self.E_loss + cooling}

    def job_columns(self) -> dict[str, np.ndarray]:
        self._require_final()
        with np.errstate(invalid="ignore", divide="ignore"):
            el = self.held
            avg = np.where(el > 0, self.energy / np.where(el > 0, el, 1.0), np.nan)
        e = np.where(np.isnan(self.t_start), np.nan, self.energy)
        return {"energy_j": e, "avg_power_w": avg}

    def timeseries(self, grid: np.ndarray, dt: float) -> dict[str, tuple[np.ndarray, str]]:
        self._require_final()
        grid = np.asarray(grid, dtype=float)
        if len(grid) == 0:
            return {}
        edges = np.concatenate((grid, [grid[-1] + dt]))
        cached = self._cool_cache if getattr(self, "_cool_cache", None) is not None else None
        same_grid = (cached is not None and dt == self.sample_dt and len(cached[0]) == len(grid)
                     and np.array_equal(cached[0], grid))
        jobs, idle, loss = cached[1] if same_grid else self._component_means(edges)
        idle = idle + self.chain.switches_w
        it = jobs + idle
        rack = it + loss
        out: dict[str, tuple[np.ndarray, str]] = {
            "power_jobs_w": (jobs, "W"), "power_it_w": (it, "W"), "power_loss_w": (loss, "W"),
            "power_rack_w": (rack, "W"),
        }
        cooling = np.full(len(grid), self.chain.cdu_pumps_w)
        if self.cool_cfg is not None:
            c = cached[2] if same_grid else run_cooling(self.cool_cfg, rack, grid, dt)
            cooling = cooling + c["plant_w"]
            for key, unit in (("secondary_supply_c", "degC"), ("secondary_return_c", "degC"),
                              ("facility_supply_c", "degC"), ("facility_return_c", "degC"),
                              ("wet_bulb_c", "degC")):
                out["temp_" + key.removesuffix("_c") + "_c"] = (c[key], unit)
            out["power_cooling_plant_w"] = (c["plant_w"], "W")
        out["power_cooling_w"] = (cooling, "W")
        fac = rack + cooling
        out["power_facility_w"] = (fac, "W")
        with np.errstate(invalid="ignore", divide="ignore"):
            out["pue"] = (fac / rack, "1")
        n_cdu = self.layout.n_cdu
        if len(grid) * n_cdu <= MAX_CDU_SERIES_VALUES and n_cdu > 1:
            out["cdu_heat_w"] = (self._cdu_means(edges), "W")
        return out

    def _cdu_means(self, edges: np.ndarray) -> np.ndarray:
        ts, cols, ds = [], [], []
        for t, ids, d in self._cdu_log:
            if np.ndim(t) == 0:
                ts.append(np.full(len(ids), t))
                cols.append(ids)
                ds.append(np.asarray(d, dtype=float))
            else:
                m = len(t)
                ts.append(np.repeat(t, len(ids)))
                cols.append(np.tile(ids, m))
                ds.append(np.asarray(d, dtype=float).ravel())
        if ts:
            t = np.concatenate(ts)
            c = np.concatenate(cols).astype(np.int64)
            d = np.concatenate(ds)
        else:
            t = np.zeros(0)
            c = np.zeros(0, dtype=np.int64)
            d = np.zeros(0)
        # jumps before t0 do not exist; the grid may start before t0 (idle values there)
        return ss.interval_means(t, d, self.cdu_v0, edges, col=c)

    def summary(self) -> dict:
        self._require_final()
        e = self.energy_breakdown_j()
        span = self.end - self.t0
        kwh = e["facility"] / 3.6e6
        out = {
            "power_system": self.spec.name,
            "energy_facility_kwh": kwh,
            "energy_it_kwh": e["it"] / 3.6e6,
            "energy_jobs_kwh": e["jobs"] / 3.6e6,
            "energy_idle_kwh": e["idle"] / 3.6e6,
            "energy_loss_kwh": e["loss"] / 3.6e6,
            "energy_cooling_kwh": e["cooling"] / 3.6e6,
            "avg_facility_power_w": e["facility"] / span if span > 0 else float("nan"),
            "peak_electrical_power_w": self.peak_electrical_w,
            "idle_facility_power_w": self.idle_facility_w,
            "max_facility_power_w": self.peak_facility_w,
            "mean_pue": e["facility"] / e["rack"] if e["rack"] > 0 else float("nan"),
            "price_per_kwh": self.cfg.price_per_kwh,
            "energy_cost": kwh * self.cfg.price_per_kwh,
            "power_conventions": ("facility = IT (node components + switches) + conversion losses + cooling "
                                  "(CDU pumps + plant); PUE = facility / rack input (IT + losses); energies "
                                  f"over [{self.t0:g}, {self.end:g}] s; job utilisation defaults drawn per job "
                                  "(power.profiles)"),
        }
        if self._cool_summary:
            out["peak_facility_power_w"] = self._cool_summary["peak_facility_w"]
            out["mean_supply_temp_c"] = self._cool_summary["mean_supply_c"]
            out["mean_return_temp_c"] = self._cool_summary["mean_return_c"]
        else:
            out["peak_facility_power_w"] = self.peak_electrical_w
        if self.capped:
            if self.cap.constant:
                out["facility_cap_w"] = float(self.cap.values[0])
            out["power_cap"] = cap_report(self)
        if self._driven:
            self._driven_summary(out)
        if self._groups is not None:
            cfgs, ix, idle_g = self._groups
            out["power_node_groups"] = [{"name": nm, "nodes": int(np.count_nonzero(ix == k)),
                                         "idle_w": float(idle_g[k]), "max_w": float(cfgs[k].node_max_w)}
                                        for k, nm in enumerate(self._group_names)]
        if self.notes:
            out["power_notes"] = list(self.notes)
        return out

    def _require_final(self) -> None:
        if not self._finalized:
            raise RuntimeError("PowerModel: finalize(end) must be called before reading results")
