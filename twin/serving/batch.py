"""An LLM serving deployment as jobs of the batch scheduler, on the shared cluster (issue 16 item 4).

`ServingBatchModel` is a `RunModel` (registry name ``serving``, on with ``--set serving.trace=FILE``)
that runs the request-level serving simulator (`twin.serving.instance`) inside a batch run:

* **Node requests.** Each serving instance is one batch job of ``ceil(tp / gpus_per_node)`` nodes and
  a requested time of ``lease_s``: a *held* job (`twin.serving.held`) that the model submits at a
  controller tick (`EngineControl.submit`). It waits in the same queue as the log's jobs and the
  policy (FCFS, EASY, conservative, Slurm) starts it like any other.
* **Instances.** When the job starts, the instance loads its weights: it serves from job start +
  cold start (`autoscale.cold_start_s`). Requests that find no serving instance wait at the router.
* **Autoscaler.** Every ``interval_s`` (a model timer event) the controller (``fixed``,
  ``utilization`` = HPA on busy or KV use, ``decode_tps`` = HeteroScale's signal; `autoscale`) sets
  the desired instance count, clamped to ``[min_instances, max_instances]``. Scale up submits node
  requests; scale down first withdraws requests still waiting in the queue (`EngineControl.cancel`:
  the job leaves the queue, state CANCELLED, the policy is told with ``on_cancel``), then releases
  instances still loading, then drains the most recent active ones: a draining instance gets
  no new request, so its remaining work is simulated at once and its job is released (ended as
  completed, `EngineControl.release`) at the instant its last request finishes. An instance within
  ``renew_s`` of its lease's end is *retiring*: it serves on but no longer counts, so the controller
  requests its replacement; it drains once the active instances that do count reach the desired
  number, or two controller periods before its lease ends.
* **Failures.** A serving job that leaves its nodes without being released (a node failure of
  `twin.failures`, whose default regime for the job class ``llm_infer_service`` is ``fast_recovery``:
  requeued at the front; or its lease running out) kills the instance: every request routed to it
  that had not finished by then is recomputed from scratch on the other instances (vLLM has no
  cross-instance KV migration; its TTFT counts from its original arrival). A requeued job that starts
  again brings a new instance (with a cold start).
* **Power.** Per-phase GPU power (`energy.power_for`: prefill near max, decode lower, idle) from each
  instance's busy and prefill-busy time; the series ``serving_power_w`` (GPUs of serving nodes, W)
  averages the cumulative energy sampled at the model's events (controller ticks) over the sample
  grid. With ``--power on`` they drive the serving jobs' node power in the facility power model
  (`twin.serving.power_feed`; stated in the summary), else they stand alone.

* **Disaggregated P/D** (``serving.mode = "pd"``): `twin.serving.batch_pd.ServingBatchPDModel`, a prefill and
  a decode pool of node requests with KV transfers between them (its docstring).

The serving world is advanced lazily: at each of the model's events and at each start or finish the
engine tells it about, arrivals up to that instant are routed in time order and the instances run the
iterations that start before it (as `cluster.simulate` does between arrivals).
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from hpctwin.datasets.serving_traces import MAX_SPAN_S
from hpctwin.twin.contract import RunModel

from .autoscale import (DEFAULT_LOAD_GBPS, DEFAULT_STARTUP_S, HPA_DOWNSCALE_WINDOW_S, HPA_SYNC_S, DecodeTPSPolicy,
                        FixedPolicy, PoolView, UtilizationPolicy, cold_start_s)
from .cluster import ROUTERS, make_requests
from .energy import power_for
from .limits import (MAX_BATCHED_TOKENS, MAX_CLOCK_S, MAX_COLD_START_S, MAX_GBPS, MAX_INSTANCES, MAX_NUM_SEQS,
                     MAX_SLOTS, MAX_TP, check_bool, check_fraction, check_int, check_number, check_ticks)
from .metrics import fifteen, latencies, slo_attainment

POLICIES = ("fixed", "utilization", "decode_tps")
INF = math.inf


@dataclass
class ServingBatchConfig:
    """The ``serving`` option table (times in s on the log's clock unless said otherwise)."""

    trace: str = ""
    hardware: str = "RTXPRO6000"
    model: str = "meta-llama/Llama-3.1-8B"
    tp: int = 1
    gpus_per_node: int = 0            # 0: the system's gpus_per_node, else 1
    policy: str = "utilization"
    instances: int = 1                # fixed policy: the count; others: the initial request
    min_instances: int = 1
    max_instances: int = 4
    interval_s: float = HPA_SYNC_S
    target: float = 0.7               # utilization policy
    metric: str = "busy"              # utilization policy: busy or kv
    tps_per_instance: float = 0.0     # decode_tps policy (tokens/s one instance sustains)
    window_s: float = HPA_DOWNSCALE_WINDOW_S
    lease_s: float = 86400.0          # requested time of each node request
    renew_s: float = 1800.0           # an instance this close to its lease's end is replaced (0: never)
    slots: int = 0                    # held node-request jobs; 0: 16 x max_instances + 16
    router: str = "least_loaded"
    start_s: float = -1.0             # trace time 0 on the log clock; < 0: the log's first submission
    time_scale: float = 1.0           # arrival times multiplied by this (> 1 stretches the trace)
    max_requests: int = 0             # 0: the whole trace
    ttft_slo_s: float = 2.0
    tpot_slo_s: float = 0.1
    load_GBps: float = DEFAULT_LOAD_GBPS
    startup_s: float = DEFAULT_STARTUP_S
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048
    user: int = -1                    # user id of the node requests; -1: one above the log's largest
    warm_start: bool = False          # the first tick's instances serve at once (a deployment already up)
    # disaggregated prefill/decode (mode = "pd", `twin.serving.batch_pd`): two pools of node requests
    mode: str = "colocated"           # colocated or pd
    prefill_hardware: str = ""        # "": hardware
    decode_hardware: str = ""
    prefill_tp: int = 0               # 0: tp
    decode_tp: int = 0
    prefill_instances: int = 1        # fixed policy: the count; others: the first tick's request
    decode_instances: int = 1
    prefill_min_instances: int = 1
    prefill_max_instances: int = 4
    decode_min_instances: int = 1
    decode_max_instances: int = 4
    pd_ratio: float = 0.0             # decode_tps: prefill = ceil(decode x ratio); 0: prefill_ / decode_instances
    kv_link_GBps: float = 25.0        # fixed KV-transfer formula (pd.kv_transfer_s): per-GPU link, GB/s
    kv_latency_s: float = 5e-6        # and its latency, s (pd.DEFAULT_KV_LINK_*)
    kv_network: str = "auto"          # KV as flows on the system's [network]: auto (if it has one), on, off
    kv_routing: str = "minimal"       # routing of those flows (topology.routing; valiant on a Dragonfly)
    kv_d2d_GBps: float = 0.0          # device-link bandwidth per GPU for kvflow; 0: kvflow.D2D of the GPU type

    @classmethod
    def from_options(cls, opts: dict, source: str = "option serving") -> "ServingBatchConfig":
        known = {f.name: f for f in fields(cls)}
        kw = {}
        for k, v in opts.items():
            if k not in known:
                raise ValueError(f"{source}: unknown key serving.{k}; known: {', '.join(known)}")
            kw[k] = v
        c = cls(**kw)
        c.check(source)
        return c

    def check(self, source: str) -> None:
        """Every key: its type (a Python caller or a config file may pass anything), range and unit (`limits`),
        and the keys that must agree. ``source`` names where the table came from in the messages."""
        def bad(key: str, why: str) -> ValueError:
            return ValueError(f"{source}: serving.{key} = {getattr(self, key)!r}: {why}")
        self._check_types(source)
        self._check_ranges(source)
        if not self.trace:
            raise bad("trace", "a serving trace file is needed (Azure .csv, Mooncake or LLMServingSim .jsonl)")
        if self.policy not in POLICIES:
            raise bad("policy", f"known policies: {', '.join(POLICIES)}")
        if self.router not in ROUTERS:
            raise bad("router", f"known routers: {', '.join(ROUTERS)}")
        if not 1 <= self.min_instances <= self.max_instances:
            raise bad("min_instances", f"need 1 <= min_instances <= max_instances = {self.max_instances}")
        if self.policy == "fixed" and not self.min_instances <= self.instances <= self.max_instances:
            raise bad("instances", f"the fixed count must be within [{self.min_instances}, {self.max_instances}]")
        if self.policy == "decode_tps" and not self.tps_per_instance > 0:
            raise bad("tps_per_instance", "the decode_tps policy needs the tokens/s one instance sustains (> 0)")
        for key in ("interval_s", "lease_s", "time_scale", "ttft_slo_s", "tpot_slo_s", "load_GBps"):
            if not getattr(self, key) > 0:
                raise bad(key, "must be > 0")
        if not 0 <= self.renew_s < self.lease_s:
            raise bad("renew_s", f"must be in [0, lease_s = {self.lease_s:g}) s")
        if self.tp < 1 or self.gpus_per_node < 0 or self.slots < 0 or self.max_requests < 0 or self.startup_s < 0:
            raise bad("tp", "tp >= 1 and gpus_per_node, slots, max_requests, startup_s >= 0 are needed")
        if self.mode not in ("colocated", "pd"):
            raise bad("mode", "colocated or pd (disaggregated prefill/decode pools)")
        if self.mode == "pd":
            for pool in ("prefill", "decode"):
                lo, hi, n = (getattr(self, f"{pool}_{k}") for k in ("min_instances", "max_instances", "instances"))
                if not 1 <= lo <= hi:
                    raise bad(f"{pool}_min_instances", f"need 1 <= {pool}_min_instances <= {pool}_max_instances = {hi}")
                if not lo <= n <= hi:
                    raise bad(f"{pool}_instances", f"must be within [{lo}, {hi}]")
                if getattr(self, f"{pool}_tp") < 0:
                    raise bad(f"{pool}_tp", "must be >= 1 (0: serving.tp)")
            if self.pd_ratio < 0 or not self.kv_link_GBps > 0 or self.kv_latency_s < 0:
                raise bad("pd_ratio", "pd_ratio >= 0, kv_link_GBps > 0 and kv_latency_s >= 0 are needed")
            if self.kv_network not in ("auto", "on", "off"):
                raise bad("kv_network", "auto, on or off")

    def _check_types(self, source: str) -> None:
        """Each key has its default's type: a bool is not an int, an int key refuses 10.7 or "12", a float key
        takes an int but refuses NaN and infinities."""
        for f in fields(self):
            v, d, label = getattr(self, f.name), f.default, f"{source}: serving.{f.name}"
            if isinstance(d, bool):
                check_bool(v, label)
            elif isinstance(d, int):
                check_int(v, label, lo=-(2 ** 62))
            elif isinstance(d, float):
                check_number(v, label, lo=-math.inf)
            elif isinstance(d, str) and not isinstance(v, str):
                raise ValueError(f"{label}: {v!r} is not a string")

    def _check_ranges(self, source: str) -> None:
        """Ranges and units of the numeric keys (`limits`; the bounds of docs/serving.md)."""
        def lab(key: str) -> str:
            return f"{source}: serving.{key}"
        for key, lo, hi, what in (("tp", 1, MAX_TP, "GPUs"), ("gpus_per_node", 0, 4096, "GPUs"),
                                  ("prefill_tp", 0, MAX_TP, "GPUs"), ("decode_tp", 0, MAX_TP, "GPUs"),
                                  ("max_num_seqs", 1, MAX_NUM_SEQS, "sequences"),
                                  ("max_num_batched_tokens", 1, MAX_BATCHED_TOKENS, "tokens"),
                                  ("slots", 0, MAX_SLOTS, "jobs"), ("max_requests", 0, None, "requests"),
                                  ("user", -1, 2 ** 62, "")):
            check_int(getattr(self, key), lab(key), lo=lo, hi=hi, what=what)
        for key in ("instances", "min_instances", "max_instances", "prefill_instances", "decode_instances",
                    "prefill_min_instances", "prefill_max_instances", "decode_min_instances", "decode_max_instances"):
            check_int(getattr(self, key), lab(key), lo=1, hi=MAX_INSTANCES, what="instances")
        for key in ("interval_s", "lease_s", "ttft_slo_s", "tpot_slo_s"):
            check_number(getattr(self, key), lab(key), lo_open=True, hi=MAX_CLOCK_S, unit="s")
        for key in ("window_s", "renew_s"):
            check_number(getattr(self, key), lab(key), hi=MAX_CLOCK_S, unit="s")
        check_number(self.start_s, lab("start_s"), lo=-MAX_CLOCK_S, hi=MAX_CLOCK_S, unit="s")
        check_number(self.startup_s, lab("startup_s"), unit="s")
        check_number(self.kv_latency_s, lab("kv_latency_s"), hi=1.0, unit="s",
                     hint="give seconds (e.g. 5e-06 for 5 us)")
        check_number(self.time_scale, lab("time_scale"), lo_open=True, unit="x")
        for key, lo_open in (("load_GBps", True), ("kv_link_GBps", True), ("kv_d2d_GBps", False)):
            check_number(getattr(self, key), lab(key), lo_open=lo_open, hi=MAX_GBPS, unit="GB/s",
                         hint="looks like B/s or MB/s; give GB/s")
        check_number(self.tps_per_instance, lab("tps_per_instance"), unit="tokens/s")
        check_number(self.pd_ratio, lab("pd_ratio"), hi=MAX_INSTANCES, unit="")
        check_fraction(self.target, lab("target"))

    def check_work(self, span_s: float, cold_s: float, source: str = "option serving") -> None:
        """Refuse, before the run, options that would make it effectively endless: ``span_s`` (s) is the
        trace's last arrival after its zero, ``cold_s`` (s) an instance's cold start (`autoscale.cold_start_s`).
        The run spans ``span_s x time_scale`` (at most 10 years); a cold start lasts at most a day; an
        instance must serve for a while before its lease asks for a replacement (``lease_s - renew_s`` >
        the cold start); and the controller ticks at most `MAX_TICKS` times over the span plus a cold start."""
        span = span_s * self.time_scale
        trace = f"the trace spans {span_s:,.6g} s" + (f" (x time_scale {self.time_scale:g} = {span:,.6g} s)"
                                                       if self.time_scale != 1 else "")
        if span > MAX_SPAN_S:
            raise ValueError(f"{source}: serving.time_scale = {self.time_scale!r}: {trace}, more than 10 years; "
                             "give a smaller time_scale")
        if cold_s > MAX_COLD_START_S:
            key = "startup_s" if self.startup_s > MAX_COLD_START_S / 2 else "load_GBps"
            raise ValueError(f"{source}: serving.{key} = {getattr(self, key):g}: an instance's cold start would take "
                             f"{cold_s:,.6g} s (startup_s = {self.startup_s:g} s, then its weights per GPU at "
                             f"load_GBps = {self.load_GBps:g} GB/s), more than a day ({MAX_COLD_START_S:,.0f} s); "
                             f"{trace}")
        if self.lease_s - self.renew_s <= cold_s:
            raise ValueError(f"{source}: serving.lease_s = {self.lease_s:g} s: an instance serves from its cold start "
                             f"({cold_s:,.6g} s) until renew_s = {self.renew_s:g} s before its lease ends, so no "
                             f"instance would ever serve for long; give lease_s > {cold_s + self.renew_s:,.6g} s")
        check_ticks(span + cold_s, self.interval_s, f"{source}: serving.interval_s", ValueError,
                    what=f"{span + cold_s:,.6g} s ({trace}, plus a {cold_s:,.6g} s cold start)")


class _Inst:
    """One instance: its engine, its job, its life (s) and the requests routed to it."""

    __slots__ = ("x", "job", "state", "t0", "ready", "t_end", "reason", "routed", "unwanted", "retiring")

    def __init__(self, x, job: int, t0: float, ready: float, unwanted: bool) -> None:
        self.x, self.job, self.t0, self.ready, self.unwanted = x, job, t0, ready, unwanted
        self.state = "starting"
        self.t_end = math.nan
        self.reason = ""
        self.routed: list = []
        self.retiring = False          # its lease ends soon: a replacement is requested, then it drains


class ServingBatchModel(RunModel):
    """See the module docstring. ``make_instance(iid)`` builds an engine (tests pass their own);
    ``trace`` is a list of `ServingRequest` (arrivals in s from the trace's zero); ``policy``: a
    controller object (``desired(PoolView) -> int``) instead of ``cfg.policy``'s."""

    name = "serving"
    #: the model's events keep the run going after the log's last job (the engine's ``drives_run``)
    drives_run = True

    def __init__(self, cfg: ServingBatchConfig, trace: list, make_instance, gpus_per_node: int = 1,
                 weight_bytes_per_gpu: float = 0.0, policy=None) -> None:
        self.cfg = cfg
        self._custom_policy = policy                   # any object with desired(PoolView) -> int
        self.trace = trace[:cfg.max_requests] if cfg.max_requests else list(trace)
        if not self.trace:
            raise ValueError(f"serving.trace = {cfg.trace!r}: the trace has no request")
        self.make = make_instance
        self.gpn = cfg.gpus_per_node or max(1, int(gpus_per_node))
        self.nodes_per_instance = -(-cfg.tp // self.gpn)
        self.cold_s = cold_start_s(weight_bytes_per_gpu, cfg.load_GBps, cfg.startup_s)
        self.span_s = max(r.arrival_s for r in self.trace)
        cfg.check_work(self.span_s, self.cold_s)
        self.slots = cfg.slots or 16 * cfg.max_instances + 16
        try:
            self.power = power_for(cfg.hardware)
        except KeyError:
            self.power = None

    # ---- power-feed hook (issue 16 item 2): with --power on, twin.serving.power_feed drives the
    # serving jobs' node power in the power model; it observes after each _advance (3 calls below)
    power_feed = None

    def use_models(self, peers: dict) -> None:
        from .power_feed import PowerFeed  # noqa: PLC0415
        self.power_feed = PowerFeed.attach(self, peers)
    # ---- end of the power-feed hook

    # ------------------------------------------------------------------ before the run
    def held_jobs(self, workload):
        """The node-request rows (`twin.serving.held`): ``slots`` jobs of one instance's nodes."""
        from hpctwin.twin.workload import Workload  # noqa: PLC0415
        k, c = self.slots, self.cfg
        first_id = int(workload.job_id.max()) + 1 if len(workload.job_id) else 1
        user = c.user if c.user >= 0 else (int(workload.user.max()) + 1 if len(workload.user) else 0)
        lease = np.full(k, float(c.lease_s))
        minus = np.full(k, -1, dtype=np.int64)
        cols = {"job_class": np.full(k, "llm_infer_service", dtype=object)}   # failures: fast_recovery
        return Workload(name="serving", job_id=first_id + np.arange(k, dtype=np.int64), submit=np.full(k, INF),
                        runtime=lease, requested_time=lease.copy(), procs=np.full(k, self.nodes_per_instance,
                                                                                 dtype=np.int64),
                        user=np.full(k, user, dtype=np.int64), group=minus, queue=minus.copy(),
                        partition=minus.copy(), status=minus.copy(), columns=cols)

    def bind(self, ctx) -> None:
        self.ctx = ctx
        n = len(ctx.jobs)
        self.lo = n - self.slots                       # held rows are the table's last ones
        if self.lo < 0 or ctx.jobs.columns.get("job_class") is None or \
                ctx.jobs.columns["job_class"][self.lo] != "llm_infer_service":
            raise ValueError("serving: the run has no node-request jobs (compose it with twin.serving.held)")
        if self.nodes_per_instance > ctx.n_nodes:
            raise ValueError(f"serving: one instance needs {self.nodes_per_instance} nodes; the machine has "
                             f"{ctx.n_nodes}")
        c = self.cfg
        self.t_start = c.start_s if c.start_s >= 0 else (float(ctx.jobs.submit[0]) if self.lo else 0.0)
        self.reqs = make_requests(self.trace)
        for r in self.reqs:
            r.arrival = r.queued = r.ready = self.t_start + r.arrival * c.time_scale
        self.order = sorted(range(len(self.reqs)), key=lambda i: (self.reqs[i].arrival, i))
        self.ai = 0
        self.pick = ROUTERS[c.router]()
        self.policy = self._custom_policy if self._custom_policy is not None else self._policy()
        #: per node request: free, pending (waits in the queue), running, lost[_unwanted] (left its nodes
        #: without a release: requeued or gone), cancelled (withdrawn from the queue), done
        self.slot = ["free"] * self.slots
        self.next_slot = 0
        self.inst_of: dict[int, _Inst] = {}
        self.insts: list[_Inst] = []
        self.activations: list = []                    # (ready s, instance index)
        self.releases: list = []                       # (drain end s, instance index)
        self.waiting: list = []                        # requests with no serving instance yet
        self.retries = np.zeros(len(self.reqs), dtype=np.int64)
        self.submitted_at: dict[int, float] = {}
        self.warm: set[int] = set()                    # node requests whose instance skips the cold start
        self.request_waits: list[float] = []
        self.next_tick = self.t_start
        self.finished = False
        self.prev = {"t": self.t_start, "busy": 0.0, "tok": 0}
        self.energy_t, self.energy_j = [self.t_start], [0.0]
        self.counts = {"scale_up_requests": 0, "instances_lost_failure": 0, "instances_lost_lease": 0,
                       "released_unwanted": 0, "withdrawn": 0, "renewals": 0, "ticks": 0}
        self.log_t, self.log_active, self.log_starting, self.log_pending = [], [], [], []

    def _policy(self):
        c = self.cfg
        if c.policy == "fixed":
            return FixedPolicy(c.instances)
        if c.policy == "utilization":
            return UtilizationPolicy(c.target, window_s=c.window_s, metric=c.metric)
        return DecodeTPSPolicy(c.tps_per_instance, window_s=c.window_s)

    # ------------------------------------------------------------------ the serving world
    def _live(self, *states: str) -> list[_Inst]:
        return [i for i in self.insts if i.state in states]

    def _advance(self, t: float) -> None:
        """Route the arrivals and activate the instances due up to ``t``; run the iterations before it."""
        reqs, order, act = self.reqs, self.order, self.activations
        while True:
            ta = reqs[order[self.ai]].arrival if self.ai < len(order) else INF
            tr = act[0][0] if act else INF
            te = ta if ta < tr else tr
            if te > t:
                break
            for i in self._live("active"):
                i.x.advance_until(te)
            if tr <= ta:
                _, k = heapq.heappop(act)
                self._activate(self.insts[k], tr)
            else:
                self._route(reqs[order[self.ai]], ta)
                self.ai += 1
        for i in self._live("active"):
            i.x.advance_until(t)

    def _activate(self, inst: _Inst, t: float) -> None:
        if inst.state != "starting":
            return
        inst.state = "active"
        inst.x.t = max(inst.x.t, t)
        self._serve_waiting(inst, t)

    def _serve_waiting(self, inst: _Inst, t: float) -> None:
        """``inst`` became active at ``t``: the requests that found no active instance are routed."""
        todo, self.waiting = self.waiting, []
        for r in todo:
            self._route(r, t)

    def _routable(self) -> list[_Inst]:
        """The instances a new request may be routed to."""
        return self._live("active")

    def _route(self, r, t: float) -> None:
        act = self._routable()
        if not act:
            self.waiting.append(r)
            return
        x = self.pick([a.x for a in act], r)
        inst = next(i for i in act if i.x is x)
        inst.x.add(r, t)
        inst.routed.append(r)

    def _lose(self, inst: _Inst, t: float, reason: str) -> None:
        """``inst``'s nodes are gone at ``t``: requests routed to it and not finished by ``t`` start over."""
        inst.state, inst.t_end, inst.reason = "stopped", t, reason
        lost = [r for r in inst.routed if not (r.generated >= r.output and r.last <= t)]
        for r in lost:
            self._restart(r)
        inst.routed = [r for r in inst.routed if r not in set(lost)] if lost else inst.routed
        for r in sorted(lost, key=lambda q: (q.arrival, q.uid)):
            self._route(r, t)

    def _restart(self, r) -> None:
        """Request ``r`` lost its instance: it starts over (prompt recomputed, no tokens kept)."""
        r.num_tokens, r.computed, r.generated, r.transferred = r.prompt, 0, 0, 0
        r.first = r.last = math.nan
        r.hashes = []
        r.instance = -1
        self.retries[r.uid] += 1

    def _energy_now(self, t: float) -> float:
        """Energy (J) of the serving GPUs from the start to ``t`` (per-phase power of each instance)."""
        p = self.power
        if p is None:
            return math.nan
        e = 0.0
        for i in self.insts:
            end = i.t_end if i.t_end == i.t_end else t
            life = max(0.0, min(end, t) - i.t0)
            busy = min(i.x.busy_s, life)
            pre = min(i.x.prompt_busy_s, busy)          # prefill-power seconds (prompt share)
            e += i.x.model.tp * (p.prefill_w * pre + p.decode_w * (busy - pre) + p.idle_w * (life - busy))
        return e

    # ------------------------------------------------------------------ engine hooks
    def on_start(self, now: float, job: int, nodes: np.ndarray):
        s = self._request_started(now, job)
        if s is None:
            return None
        unwanted = self.slot[s] == "lost_unwanted"    # lost: requeued and restarted at once, before a tick
        cold = self._cold_s(job, self.cold_s)
        self._place(_Inst(self.make(len(self.insts)), job, now, now + cold, unwanted), s, now)
        return None

    def _request_started(self, now: float, job: int) -> int | None:
        """The engine started ``job``: None for a batch job, else (a serving node request) its slot,
        after the serving world is advanced to ``now``, its state checked and its scale-up wait kept."""
        if job < self.lo:
            return None
        self._advance(now)
        s = job - self.lo
        if job not in self.submitted_at or self.slot[s] not in ("pending", "lost", "lost_unwanted"):
            raise RuntimeError(f"serving: node request {job} started in state {self.slot[s]}")
        if self.submitted_at[job] >= 0:
            self.request_waits.append(now - self.submitted_at[job])
            self.submitted_at[job] = -1.0              # a requeued job's next start is not a scale-up wait
        return s

    def _cold_s(self, job: int, cold_s: float) -> float:
        """Cold-start time (s) of a started request: 0 for a requeued one whose weights are still loaded."""
        cold = 0.0 if job in self.warm else cold_s
        self.warm.discard(job)
        return cold

    def _place(self, inst: _Inst, s: int, now: float) -> None:
        """Add the new instance ``inst`` of slot ``s``: it serves from ``inst.ready``."""
        inst.x.t = inst.ready
        self.insts.append(inst)
        self.inst_of[inst.job] = inst
        self.slot[s] = "running"
        heapq.heappush(self.activations, (inst.ready, len(self.insts) - 1))
        if self.power_feed is not None:                # power-feed hook
            self.power_feed.observe(now)

    def on_finish(self, now: float, job: int):
        if job < self.lo:
            return None
        inst = self.inst_of.pop(job, None)
        s = job - self.lo
        if inst is None or inst.state == "stopped":   # released by the model (state set at the release)
            self.slot[s] = "done"
            return None
        self._advance(now)
        lease_end = now >= inst.t0 + self.cfg.lease_s * (1 - 1e-12)
        self.counts["instances_lost_lease" if lease_end else "instances_lost_failure"] += 1
        unwanted = inst.unwanted or inst.state == "draining"
        self._lose(inst, now, "lease" if lease_end else "failure")
        # requeued by the failure model, or gone: seen at the model's next event
        self.slot[s] = "lost_unwanted" if unwanted else "lost"
        if self.power_feed is not None:                # power-feed hook
            self.power_feed.observe(now)
        return None

    def next_event(self, now: float) -> float | None:
        if self.finished and not any(s in ("pending", "running", "lost", "lost_unwanted")
                                     for s in self.slot):
            return None
        t = self.next_tick
        if self.releases and self.releases[0][0] < t:
            t = self.releases[0][0]
        return t                                       # after bind it may precede the log's first job

    def on_event(self, now: float, control):
        self._advance(now)
        while self.releases and self.releases[0][0] <= now:
            _, k = heapq.heappop(self.releases)
            if self._drain_done(self.insts[k], now):    # not lost in between
                self._release(self.insts[k].job, now, "drained", control)
        for s, st in enumerate(self.slot):            # jobs that left without a release: requeued or gone
            if st in ("lost", "lost_unwanted"):
                if control.state(self.lo + s) != "waiting":
                    self.slot[s] = "done"
                elif st == "lost" and not self.finished:
                    self.slot[s] = "pending"
                else:                                 # requeued but not wanted any more: withdrawn
                    self._withdraw(s, control)
        if now >= self.next_tick:
            self._tick(now, control)
            self.next_tick = now + self.cfg.interval_s
        self.energy_t.append(now)
        self.energy_j.append(self._energy_now(now))
        if self.power_feed is not None:                # power-feed hook
            self.power_feed.observe(now)
        return None

    def _drain_done(self, i: _Inst, now: float) -> bool:
        """Release a draining instance at its drain end (P/D decode: only once no KV is inbound)."""
        return i.state == "draining"

    def _release(self, job: int, now: float, reason: str, control) -> None:
        inst = self.inst_of.get(job)
        if inst is not None and inst.state != "stopped":
            inst.state, inst.t_end, inst.reason = "stopped", now, reason
        if control.state(job) == "running":
            control.release(job)

    # ------------------------------------------------------------------ the controller
    def _view(self, now: float) -> PoolView:
        act = self._live("active")
        busy = sum(i.x.busy_s for i in self.insts)
        tok = sum(i.x.tokens_decoded for i in self.insts)
        span = max(1e-9, now - self.prev["t"])
        pending = sum(1 for s in self.slot if s == "pending")
        v = PoolView(now, self.cfg.interval_s, len(act), len(self._live("starting")) + pending,
                     min(1.0, (busy - self.prev["busy"]) / (span * max(1, len(act)))), (tok - self.prev["tok"]) / span,
                     sum(len(i.x.waiting) for i in act) + len(self.waiting),
                     sum(i.x.kv.used / i.x.kv.num_blocks for i in act) / max(1, len(act)))
        self.prev.update(t=now, busy=busy, tok=tok)
        return v

    def _all_served(self, now: float) -> bool:
        if self.ai < len(self.order) or self.waiting:
            return False
        return all(i.x.idle() and i.x.t <= now for i in self._live("active", "starting"))

    def _tick(self, now: float, control) -> None:
        c = self.cfg
        self.counts["ticks"] += 1
        for i in self._live("starting", "active"):     # requests that started after they were unwanted
            if i.unwanted:
                self.counts["released_unwanted"] += 1
                self._release(i.job, now, "unwanted", control)
        if self.finished or (now > self.t_start and self._all_served(now)):
            self.finished = True
            for i in self._live("starting", "active"):
                self._release(i.job, now, "end", control)
            for s, st in enumerate(self.slot):
                if st == "pending":
                    self._withdraw(s, control)
            return
        if c.renew_s > 0:                             # leases ending soon: replace, then drain
            for i in self._live("active"):
                if not i.retiring and i.t0 + c.lease_s - now <= c.renew_s:
                    i.retiring = True
                    self.counts["renewals"] += 1
        self._size(now, control)
        self.log_t.append(now)
        self.log_active.append(len(self._live("active")))
        self.log_starting.append(len(self._live("starting")))
        self.log_pending.append(sum(1 for s in self.slot if s == "pending"))

    def _size(self, now: float, control) -> None:
        """The controller's decision at a tick: the desired count, node requests and drains."""
        c = self.cfg
        view = self._view(now)
        first = now == self.t_start and not self.counts["scale_up_requests"]
        want = c.instances if first else int(self.policy.desired(view))
        want = max(c.min_instances, min(c.max_instances, want))
        starting = [i for i in self._live("starting") if not i.unwanted]
        active = [i for i in self._live("active") if not i.retiring]
        pending = [s for s, st in enumerate(self.slot) if st == "pending"]
        have = len(active) + len(starting) + len(pending)
        if want > have:
            self._scale_up(want - have, now, control)
            if first and c.warm_start:
                self.warm = set(self.submitted_at)
        elif want < have:
            self._scale_down(have - want, pending, starting, active, now, control)
        for i in self._live("active"):                # retiring: once replaced, or near the lease's end
            if i.retiring and (len(active) >= want or i.t0 + c.lease_s - now <= 2 * c.interval_s):
                self._drain(i, now, control)

    def _scale_up(self, k: int, now: float, control) -> None:
        for _ in range(self._reclaim(self._live("starting"), k)):
            if self.next_slot >= self.slots:
                raise RuntimeError(f"serving: all {self.slots} node-request jobs are used; raise serving.slots")
            self.next_slot += 1
            self._request(self.next_slot - 1, now, control)

    @staticmethod
    def _reclaim(starting: list, k: int) -> int:
        """Up to ``k`` starting instances that were unwanted are wanted again; how many are still missing."""
        for i in [i for i in starting if i.unwanted][:k]:
            i.unwanted = False
            k -= 1
        return k

    def _request(self, s: int, now: float, control) -> None:
        """Submit node request ``s`` to the batch queue now (a scale-up)."""
        self.slot[s] = "pending"
        self.submitted_at[self.lo + s] = now
        self.counts["scale_up_requests"] += 1
        control.submit(self.lo + s)

    def _scale_down(self, k: int, pending: list, starting: list, active: list, now: float, control) -> None:
        for s in reversed(pending):                   # the newest queued requests first
            if k == 0:
                return
            self._withdraw(s, control)
            k -= 1
        for i in reversed(starting):
            if k == 0:
                return
            self._release(i.job, now, "scale_down", control)
            k -= 1
        for i in reversed(active):
            if k == 0:
                return
            self._drain(i, now, control)
            k -= 1

    def _withdraw(self, s: int, control) -> None:
        """Node request ``s`` (waiting in the queue) leaves it now: cancelled, it never starts."""
        control.cancel(self.lo + s)
        self.slot[s] = "cancelled"
        self.counts["withdrawn"] += 1

    def _drain(self, i: _Inst, now: float, control) -> None:
        """No new request for ``i``: its work is simulated to the end, its job released at its last token."""
        i.state = "draining"
        i.x.drain()
        end = max(now, i.x.t)
        if end <= now:
            self._release(i.job, now, "drained", control)
        else:
            heapq.heappush(self.releases, (end, self.insts.index(i)))

    # ------------------------------------------------------------------ results
    def finalize(self, end: float) -> None:
        self._advance(end)
        for i in self._live("active", "draining", "starting"):
            i.x.drain()
        undone = [r.uid for r in self.reqs if r.generated != r.output]
        if undone:
            raise RuntimeError(f"serving: the run ended at t={end:.1f} s with {len(undone)} of {len(self.reqs)} "
                               f"requests unserved (first: {undone[0]}); every job had ended (a lease "
                               f"serving.lease_s = {self.cfg.lease_s:g} s expired with nothing left to run?)")

    def job_columns(self) -> dict[str, np.ndarray]:
        n = len(self.ctx.jobs)
        kind = np.full(n, "batch", dtype=object)
        kind[self.lo:] = "serving"
        why = np.full(n, "", dtype=object)
        for s, st in enumerate(self.slot):
            if st == "cancelled":
                why[self.lo + s] = "withdrawn"
        for i in self.insts:
            why[i.job] = i.reason
        return {"kind": kind, "serving_end": why}

    def timeseries(self, grid: np.ndarray, dt: float) -> dict:
        t = np.asarray(self.energy_t, dtype=float)
        e = np.asarray(self.energy_j, dtype=float)
        edges = np.append(grid, grid[-1] + dt) if len(grid) else grid
        cum = np.interp(edges, t, e, left=0.0, right=e[-1] if len(e) else 0.0)
        held = np.zeros(len(grid))
        for i in self.insts:
            end = i.t_end if i.t_end == i.t_end else (grid[-1] + dt if len(grid) else i.t0)
            lo, hi = np.clip(grid, i.t0, end), np.clip(grid + dt, i.t0, end)
            held += (hi - lo) / dt * self.nodes_per_instance
        return {"serving_power_w": (np.diff(cum) / dt, "W, GPUs of serving instances (per-phase power), "
                                                       "average over [t, t+dt) at controller-tick resolution"),
                "serving_nodes": (held, "nodes held by serving jobs, average over [t, t+dt)")}

    def tables(self) -> dict:
        import pandas as pd  # noqa: PLC0415
        r = self.reqs
        lat = latencies([q.arrival for q in r], [q.first for q in r], [q.last for q in r], [q.output for q in r])
        jid = self.ctx.jobs.job_id
        req = pd.DataFrame({"request_id": [q.uid for q in r], "arrival_s": [q.arrival for q in r],
                            "first_token_s": [q.first for q in r], "last_token_s": [q.last for q in r],
                            "input_tokens": [q.prompt for q in r], "output_tokens": [q.generated for q in r],
                            "ttft_s": lat["ttft"], "tpot_s": lat["tpot"], "instance": [q.instance for q in r],
                            "retries": self.retries, "preemptions": [q.preemptions for q in r]})
        inst = pd.DataFrame({"instance": range(len(self.insts)), "pool": [getattr(i, "pool", "both") for i in self.insts],
                             "job_id": [int(jid[i.job]) for i in self.insts],
                             "start_s": [i.t0 for i in self.insts], "ready_s": [i.ready for i in self.insts],
                             "end_s": [i.t_end for i in self.insts], "end": [i.reason for i in self.insts],
                             "busy_s": [i.x.busy_s for i in self.insts],
                             "prefill_busy_s": [i.x.prefill_busy_s for i in self.insts]})
        return {"serving_requests.csv": req, "serving_instances.csv": inst}

    def summary(self) -> dict:
        c, r = self.cfg, self.reqs
        lat = latencies([q.arrival for q in r], [q.first for q in r], [q.last for q in r], [q.output for q in r])
        life = sum(i.t_end - i.t0 for i in self.insts)
        waits = np.asarray(self.request_waits, dtype=float)
        e = self._energy_now(max(self.energy_t))
        return {"serving": {
            "units": "seconds, joules", "trace": c.trace, "policy": c.policy, "hardware": c.hardware,
            "model": c.model, "tp": c.tp, "gpus_per_node": self.gpn, "nodes_per_instance": self.nodes_per_instance,
            "cold_start_s": self.cold_s, "lease_s": c.lease_s, "start_s": self.t_start, "time_scale": c.time_scale,
            "requests": len(r), "output_tokens": int(sum(q.generated for q in r)),
            **fifteen(lat), "slo": {"ttft_s": c.ttft_slo_s, "tpot_s": c.tpot_slo_s,
                                    "attainment": slo_attainment(lat, c.ttft_slo_s, c.tpot_slo_s)},
            "instances": len(self.insts), "instance_hours": life / 3600.0,
            "node_hours": life * self.nodes_per_instance / 3600.0, "gpu_hours": life * c.tp / 3600.0,
            "scale_up_wait_s": {"count": len(waits), "mean": float(waits.mean()) if len(waits) else None,
                                "p50": float(np.median(waits)) if len(waits) else None,
                                "p95": float(np.percentile(waits, 95)) if len(waits) else None,
                                "max": float(waits.max()) if len(waits) else None},
            "requests_retried": int((self.retries > 0).sum()), **self.counts,
            "energy_j": e, "mean_instance_power_w": e / life if life > 0 and e == e else None,
            "power_note": self.power_feed.note if self.power_feed is not None else (   # power-feed hook
                "per-phase GPU power of serving instances (twin.serving.energy); not fed into the "
                "facility power model, which counts serving nodes with its own job power"),
        }}


def _kv_network(cfg: ServingBatchConfig, system):
    """The P/D deployment's KV network (`batch_pd.DynamicKVNetwork`) per ``serving.kv_network``, or None."""
    has = system is not None and bool(getattr(system, "network", None)) and getattr(system, "gpus_per_node", 0) > 0
    if cfg.kv_network == "off" or (cfg.kv_network == "auto" and not has):
        return None
    if not has:
        raise ValueError("serving.kv_network = on needs a --system with a [network] table and gpus_per_node")
    from .batch_pd import DynamicKVNetwork  # noqa: PLC0415
    hw = cfg.decode_hardware or cfg.hardware
    return DynamicKVNetwork.from_system(system, hw, cfg.gpus_per_node or system.gpus_per_node,
                                        cfg.kv_d2d_GBps or None, cfg.kv_routing)


def build(setup) -> ServingBatchModel:
    """The registry factory (`twin.models`): the ``serving`` option table of the run."""
    from hpctwin.datasets.serving_traces import read_serving_trace  # noqa: PLC0415
    from .deployment import PoolSpec, instance_factory  # noqa: PLC0415
    from .models import model_shape  # noqa: PLC0415
    cfg = ServingBatchConfig.from_options(setup.options("serving"))
    if setup.gpu:
        raise ValueError("serving: --allocation gpu is not supported yet (node requests are whole nodes)")
    gpn = getattr(setup.system, "gpus_per_node", 0) if setup.system is not None else 0
    if cfg.mode == "pd":                                  # disaggregated pools (twin.serving.batch_pd)
        from .batch_pd import ServingBatchPDModel  # noqa: PLC0415
        makes, weights = [], []
        for pool in ("prefill", "decode"):
            tp, hw = getattr(cfg, f"{pool}_tp") or cfg.tp, getattr(cfg, f"{pool}_hardware") or cfg.hardware
            makes.append(instance_factory(PoolSpec(hw, cfg.model, tp=tp, max_num_seqs=cfg.max_num_seqs,
                                                   max_num_batched_tokens=cfg.max_num_batched_tokens),
                                          getattr(setup.cfg, "data_dir", None)))
            weights.append(model_shape(cfg.model).weight_bytes_per_rank(tp))
        return ServingBatchPDModel(cfg, read_serving_trace(Path(cfg.trace)), *makes, gpus_per_node=gpn or 1,
                                   weight_bytes=tuple(weights), kv_network=_kv_network(cfg, setup.system))
    spec = PoolSpec(cfg.hardware, cfg.model, tp=cfg.tp, max_num_seqs=cfg.max_num_seqs,
                    max_num_batched_tokens=cfg.max_num_batched_tokens)
    make = instance_factory(spec, getattr(setup.cfg, "data_dir", None))
    trace = read_serving_trace(Path(cfg.trace))
    w = model_shape(cfg.model).weight_bytes_per_rank(cfg.tp)
    return ServingBatchModel(cfg, trace, make, gpus_per_node=gpn or 1, weight_bytes_per_gpu=w)
