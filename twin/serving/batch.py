"""An LLM serving deployment as jobs of the batch scheduler, on the shared cluster (issue 16 item 4).

`ServingBatchModel` is a `RunModel` (registry name ``serving``, on with ``--set serving.trace=FILE``)
that drives the serving instance engine (`engine.ServingEngine`) inside a batch run. A colocated pool
(``serving.mode = "colocated"``) and disaggregated prefill/decode pools (``serving.mode = "pd"``) are two
configurations of the same model: one or two pools of node requests.

* **Node requests.** Each serving instance is one batch job of ``ceil(tp / gpus_per_node)`` nodes (its
  pool's TP) and a requested time of ``lease_s``: a *held* job (`twin.serving.held`) that the model
  submits at a controller tick (`EngineControl.submit`). It waits in the same queue as the log's jobs
  and the policy (FCFS, EASY, conservative, Slurm) starts it like any other. Each pool has its own
  bounded set of held jobs (``serving.slots``, default 16 x its max + 16).
* **Instances.** When the job starts, the instance loads its weights: it serves from job start +
  cold start (`autoscale.cold_start_s`). Requests that find no serving instance wait at the router.
* **Autoscaler.** Every ``interval_s`` (a model timer event) the controller sets the desired instance
  count of each pool, clamped to its bounds: colocated, an autoscaler of `policies.AUTOSCALERS`
  (``fixed``, ``utilization`` = HPA on busy or KV use, ``decode_tps`` = HeteroScale's signal); P/D, its
  form in `policies.PD_POLICIES` (``PD_FORM``: ``fixed`` holds ``prefill_instances`` /
  ``decode_instances``; ``decode_tps`` sizes the decode pool by decode tokens/s and holds the prefill
  pool at ``ceil(decode x pd_ratio)``, ``pd_ratio`` 0: the initial counts' ratio; ``utilization`` runs
  HPA on each pool's own signal). Scale up submits node requests; scale down first withdraws requests
  still waiting in the queue (`EngineControl.cancel`: the job leaves the queue, state CANCELLED, the
  policy is told with ``on_cancel``), then releases instances still loading, then drains the most
  recent active ones: a draining instance gets no new request, so its remaining work is simulated at
  once and its job is released (ended as completed, `EngineControl.release`) at the instant its last
  request finishes (a draining decode instance: once no KV transfer to it is in flight). An instance
  within ``renew_s`` of its lease's end is *retiring*: it serves on but no longer counts, so the
  controller requests its replacement; it drains once the active instances that do count reach the
  desired number, or two controller periods before its lease ends.
* **P/D requests.** An arrival goes to a serving prefill instance (the ``router``), which computes the
  prompt and produces the first token there. The prompt's KV then goes to a decode instance chosen when
  the prompt completes (a request finding no serving decode instance waits at the decode router until
  one serves, its KV kept on the prefill side); the decode instance sets aside its KV blocks while the
  transfer is in flight (`handoff.reserve_kv`, `handoff.land_kv`), and the request joins its queue when
  the KV has arrived: TTFT = prefill done; the second token follows the transfer (`handoff.kv_transfer_s`:
  ``2 x layers x KV heads x head_dim x bytes x tokens`` over ``min(tp_p, tp_d)`` links of
  ``kv_link_GBps``, plus ``kv_latency_s``) and decode admission. **KV on the topology**
  (``serving.kv_network``: ``auto``, the default, when the run's system has a ``[network]`` table and
  GPUs; ``on``; ``off``): the transfer is a flow between the nodes the batch scheduler gave the two
  instances (`kvflow.DynamicKVNetwork`) instead of the formula; an instance must fit on one node there.
* **Failures.** A serving job that leaves its nodes without being released (a node failure of
  `twin.failures`, whose default regime for the job class ``llm_infer_service`` is ``fast_recovery``:
  requeued at the front; or its lease running out) kills the instance: every request routed to it
  that had not finished by then is recomputed from scratch on the other instances (vLLM has no
  cross-instance KV migration; its TTFT counts from its original arrival). P/D: a prefill instance lost,
  the requests whose prompt it had not finished (or whose KV had not left) start over on the prefill
  pool; a decode instance lost, the requests it held or was receiving start over from the prefill pool.
  A requeued job that starts again brings a new instance (with a cold start).
* **Power.** Per-phase GPU power (`energy.power_for`: prefill near max, decode lower, idle; each pool its
  own GPU type and TP) from each instance's busy and prefill-busy time; the series ``serving_power_w``
  (GPUs of serving nodes, W) averages the cumulative energy sampled at the model's events (controller
  ticks) over the sample grid. With ``--power on`` they drive the serving jobs' node power in the
  facility power model (`twin.serving.power_feed`; stated in the summary), else they stand alone; the
  KV transfer's own power is not modelled.

The serving world is advanced lazily: at each of the model's events and at each start or finish the
batch engine tells it about, the instance engine is advanced to that instant (`ServingEngine.advance`:
arrivals routed in time order, activations, KV hand-offs, the instances' iterations before it).
`twin.serving.batch_pd.ServingBatchPDModel` is the P/D constructor kept for callers of that name.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from hpctwin.datasets.serving_traces import MAX_SPAN_S
from hpctwin.twin.contract import RunModel
from hpctwin.twin.schema import did_you_mean

from .autoscale import DEFAULT_LOAD_GBPS, DEFAULT_STARTUP_S, cold_start_s
from .energy import power_for
from .engine import KVLink, Member, ServingEngine, make_requests
from .limits import (MAX_BATCHED_TOKENS, MAX_CLOCK_S, MAX_COLD_START_S, MAX_GBPS, MAX_INSTANCES, MAX_NUM_SEQS,
                     MAX_SLOTS, MAX_TP, check_bool, check_fraction, check_int, check_number, check_ticks)
from .metrics import fifteen, latencies, slo_attainment
from .policies import (AUTOSCALERS, HPA_DOWNSCALE_WINDOW_S, HPA_SYNC_S, PD_POLICIES, PoolView, as_pd_policy,
                       as_pool_policy)
from .routers import ROUTERS
from .scheduling import SLOSetup

#: ``serving.policy``: the autoscaler (`policies.AUTOSCALERS`) of a colocated deployment
POLICIES = tuple(AUTOSCALERS)
#: its P/D form (`policies.PD_POLICIES`), the autoscaler entry's ``pd_form`` tag: fixed counts per pool,
#: decode TPS with the P/D ratio, HPA per pool
PD_FORM = {e.name: e.tag("pd_form") for e in AUTOSCALERS.entries()}
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
    # multi-SLO serving (`twin.serving.scheduling`): instance scheduling, classes, the decode pool's router
    scheduling: str = "fcfs"          # NAME or NAME:KEY=VALUE,... of scheduling.SCHEDULING (e.g. slack:admission=defer)
    slo_classes: str = ""             # "": none (default ones when scheduling or router reads classes); default;
                                      # or NAME:TTFT_S:TPOT_S:SHARE,... tightest first
    slo_seed: int = 0                 # seed of the class draw (a trace's own classes are kept)
    decode_router: str = ""           # P/D: the decode pool's router; "": router

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
        if self.decode_router and self.decode_router not in ROUTERS:
            raise bad("decode_router",
                      f"known routers: {', '.join(ROUTERS)}{did_you_mean(self.decode_router, ROUTERS)}")
        if self.decode_router and self.mode != "pd":
            raise bad("decode_router", "routes the KV hand-offs of serving.mode = pd; a colocated deployment has "
                                       "one router (serving.router)")
        self.slo_setup(source)
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

    def slo_setup(self, source: str = "option serving") -> SLOSetup:
        """The multi-SLO set-up of ``scheduling``, ``slo_classes``, ``slo_seed`` and the routers
        (`scheduling.SLOSetup`; classes on when given, or when the policy or a router reads them)."""
        try:
            slo = SLOSetup.from_text(self.scheduling, self.slo_classes, self.slo_seed,
                                     label=f"serving.scheduling = {self.scheduling!r}",
                                     classes_label=f"serving.slo_classes = {self.slo_classes!r}")
            check_int(self.slo_seed, "serving.slo_seed", lo=0, hi=2 ** 63 - 1, what="")
        except ValueError as e:
            raise ValueError(f"{source}: {e}") from None
        for r in (self.router, self.decode_router):
            if r:
                slo = slo.with_router(r)
        return slo

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


@dataclass
class Pool:
    """One pool of node requests (``both`` colocated; ``prefill`` or ``decode``): its engine factory and
    sizes (times in s)."""

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


def _power_of(hardware: str):
    """The per-phase power table of ``hardware`` (`energy.power_for`), or None when it has none."""
    try:
        return power_for(hardware)
    except KeyError:
        return None


class ServingBatchModel(RunModel):
    """See the module docstring. ``make_instance(iid)`` builds an engine (tests pass their own);
    ``trace`` is a list of `ServingRequest` (arrivals in s from the trace's zero); ``policy``: a
    controller object (``desired(PoolView) -> int``; P/D: ``desired_pd(prefill view, decode view)``)
    instead of ``cfg.policy``'s. With ``make_decode`` the deployment is disaggregated: ``make_instance``
    builds prefill instances, ``make_decode`` decode ones; ``weight_bytes_per_gpu`` and
    ``decode_weight_bytes`` are their weights per GPU (bytes, for the cold starts); ``kv_network``: a
    `kvflow.DynamicKVNetwork` for the KV transfers (None: the formula)."""

    name = "serving"
    #: the model's events keep the run going after the log's last job (the engine's ``drives_run``)
    drives_run = True

    def __init__(self, cfg: ServingBatchConfig, trace: list, make_instance, gpus_per_node: int = 1,
                 weight_bytes_per_gpu: float = 0.0, policy=None, *, make_decode=None,
                 decode_weight_bytes: float = 0.0, kv_network=None) -> None:
        self.cfg = cfg
        self._custom_policy = policy                   # any object with desired(PoolView) -> int
        #: multi-SLO serving: classes of the requests, scheduling policy of every instance (`scheduling`)
        self.slo = cfg.slo_setup()
        make_instance = self.slo.factory(make_instance)
        if make_decode is not None:
            make_decode = self.slo.factory(make_decode)
        trace = self.slo.classify(trace[:cfg.max_requests] if cfg.max_requests else trace)
        self.trace = list(trace)
        if not self.trace:
            raise ValueError(f"serving.trace = {cfg.trace!r}: the trace has no request")
        self.make = make_instance
        self.gpn = cfg.gpus_per_node or max(1, int(gpus_per_node))
        self.nodes_per_instance = -(-cfg.tp // self.gpn)
        self.cold_s = cold_start_s(weight_bytes_per_gpu, cfg.load_GBps, cfg.startup_s)
        self.span_s = max(r.arrival_s for r in self.trace)
        cfg.check_work(self.span_s, self.cold_s)
        self.slots = cfg.slots or 16 * cfg.max_instances + 16
        self.power = _power_of(cfg.hardware)
        self.pd = make_decode is not None
        self.net = kv_network                          # P/D: KV transfers as flows on it (None: the formula)
        if not self.pd:
            self.pools = {"both": Pool("both", make_instance, cfg.tp, cfg.hardware, self.nodes_per_instance,
                                       self.cold_s, 0, self.slots, cfg.min_instances, cfg.max_instances,
                                       cfg.instances, self.power)}
            return
        self.pools = {}
        lo = 0
        for name, make, w in (("prefill", make_instance, weight_bytes_per_gpu),
                              ("decode", make_decode, decode_weight_bytes)):
            tp = getattr(cfg, f"{name}_tp") or cfg.tp
            hw = getattr(cfg, f"{name}_hardware") or cfg.hardware
            hi = getattr(cfg, f"{name}_max_instances")
            k = cfg.slots or 16 * hi + 16
            cold = cold_start_s(w, cfg.load_GBps, cfg.startup_s)
            self.pools[name] = Pool(name, make, tp, hw, -(-tp // self.gpn), cold, lo, k,
                                    getattr(cfg, f"{name}_min_instances"), hi,
                                    getattr(cfg, f"{name}_instances"), _power_of(hw))
            lo += k
        self.slots = lo
        self.nodes_per_instance = max(p.nodes for p in self.pools.values())   # bind's machine-size check
        cfg.check_work(self.span_s, max(p.cold_s for p in self.pools.values()))   # the decode pool's cold start

    # ---- power-feed hook (issue 16 item 2): with --power on, twin.serving.power_feed drives the
    # serving jobs' node power in the power model; it observes after each _advance (3 calls below)
    power_feed = None

    def use_models(self, peers: dict) -> None:
        from .power_feed import PowerFeed  # noqa: PLC0415
        self.power_feed = PowerFeed.attach(self, peers)
    # ---- end of the power-feed hook

    # ------------------------------------------------------------------ the engine's state
    @property
    def insts(self) -> list[Member]:
        """The instances, in creation order (index = instance id)."""
        return self.engine.members

    @property
    def reqs(self) -> list:
        return self.engine.reqs

    @property
    def retries(self) -> np.ndarray:
        """Restarts of each request (an instance lost under it)."""
        return self.engine.retries

    @property
    def waiting(self) -> list:
        """Requests with no serving (prefill) instance yet."""
        return self.engine.waiting

    # ------------------------------------------------------------------ before the run
    def held_jobs(self, workload):
        """The node-request rows (`twin.serving.held`): ``slots`` jobs, each of its pool's instance nodes."""
        from hpctwin.twin.workload import Workload  # noqa: PLC0415
        k, c = self.slots, self.cfg
        first_id = int(workload.job_id.max()) + 1 if len(workload.job_id) else 1
        user = c.user if c.user >= 0 else (int(workload.user.max()) + 1 if len(workload.user) else 0)
        lease = np.full(k, float(c.lease_s))
        minus = np.full(k, -1, dtype=np.int64)
        procs = np.full(k, self.nodes_per_instance, dtype=np.int64)
        for p in self.pools.values():
            procs[p.lo:p.lo + p.n_slots] = p.nodes
        cols = {"job_class": np.full(k, "llm_infer_service", dtype=object)}   # failures: fast_recovery
        return Workload(name="serving", job_id=first_id + np.arange(k, dtype=np.int64), submit=np.full(k, INF),
                        runtime=lease, requested_time=lease.copy(), procs=procs,
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
        reqs = make_requests(self.trace)
        for r in reqs:
            r.arrival = r.queued = r.ready = self.t_start + r.arrival * c.time_scale
        kv = KVLink(c.kv_link_GBps, c.kv_latency_s)
        if self.pd and self.net is not None:
            from .kvflow import FlowSet  # noqa: PLC0415
            kv.flows = FlowSet(self.net)
        self.engine = ServingEngine(reqs, c.router, (c.decode_router or c.router) if self.pd else None, pd=self.pd,
                                    kv=kv, on_drain_landing=self._landed_draining)
        if self._custom_policy is not None:            # any controller; a single-pool one gets its P/D form
            self.policy = as_pd_policy(self._custom_policy) if self.pd else as_pool_policy(self._custom_policy)
        else:
            self.policy = self._policy()
        #: per node request: free, pending (waits in the queue), running, lost[_unwanted] (left its nodes
        #: without a release: requeued or gone), cancelled (withdrawn from the queue), done
        self.slot = ["free"] * self.slots
        self.slot_pool = [""] * self.slots
        for p in self.pools.values():
            self.slot_pool[p.lo:p.lo + p.n_slots] = [p.name] * p.n_slots
        self.inst_of: dict[int, Member] = {}
        self.releases: list = []                       # (drain end s, instance index)
        self.submitted_at: dict[int, float] = {}
        self.warm: set[int] = set()                    # node requests whose instance skips the cold start
        self.request_waits: list[float] = []
        self.next_tick = self.t_start
        self.finished = False
        self.prevs = {name: {"t": self.t_start, "busy": 0.0, "tok": 0} for name in self.pools}
        self.energy_t, self.energy_j = [self.t_start], [0.0]
        self.counts = {"scale_up_requests": 0, "instances_lost_failure": 0, "instances_lost_lease": 0,
                       "released_unwanted": 0, "withdrawn": 0, "renewals": 0, "ticks": 0}
        self.log_t, self.log_active, self.log_starting, self.log_pending = [], [], [], []
        self.log_pools = {name: [] for name in self.pools}  # per tick: (active, starting, pending)

    def _policy(self):
        """The controller of ``serving.policy`` from the plug-in tables (`policies`)."""
        c = self.cfg
        # the entry's options are ``serving`` keys of the same names (instances, target, window_s, ...)
        opts = {k: getattr(c, k) for k in AUTOSCALERS.entry(c.policy).options}
        if not self.pd:
            return AUTOSCALERS.make(c.policy, **opts)
        form = PD_FORM[c.policy]
        if form == "fixed":
            return PD_POLICIES.make("fixed", prefill=c.prefill_instances, decode=c.decode_instances)
        if form == "ratio":
            ratio = c.pd_ratio or c.prefill_instances / c.decode_instances
            return PD_POLICIES.make("ratio", decode_policy=AUTOSCALERS.make(c.policy, **opts), ratio=ratio)
        return PD_POLICIES.make("per_pool", prefill=AUTOSCALERS.make(c.policy, **opts),
                                decode=AUTOSCALERS.make(c.policy, **opts))

    # ------------------------------------------------------------------ the serving world
    def _live(self, *states: str) -> list[Member]:
        return [i for i in self.insts if i.state in states]

    def _in(self, pool: str, *states: str) -> list[Member]:
        return self.engine.in_pool(pool, *states)

    def _advance(self, t: float) -> None:
        """The instance engine up to ``t``: arrivals, activations, KV hand-offs, iterations before it."""
        self.engine.advance(t)

    def _route(self, r, t: float) -> None:
        self.engine.route(r, t)

    def _lose(self, inst: Member, t: float, reason: str) -> None:
        """``inst``'s nodes are gone at ``t``: requests routed to it and not finished by ``t`` start over
        (P/D prefill: whose prompt it had not finished, or whose KV had not left it)."""
        eng = self.engine
        eng.collect()
        inst.state, inst.t_end, inst.reason = "stopped", t, reason
        if inst.pool == "prefill":
            lost = [r for r in inst.routed if eng.handed.get(r.uid, INF) > t]
            held = [r for r, _, _ in eng.waiting_d if r.prefill_instance == inst.x.iid]
            eng.waiting_d = [w for w in eng.waiting_d if w[0].prefill_instance != inst.x.iid]
            lost += held
        else:
            lost = [r for r in inst.routed if not (r.generated >= r.output and r.last <= t)]
        lost = [r for r in lost if not r.shed]         # shed by admission control: reported, never served
        gone = set(id(r) for r in lost)
        inst.routed = [r for r in inst.routed if id(r) not in gone]
        for r in lost:
            eng.restart(r)
        for r in sorted(lost, key=lambda q: (q.arrival, q.uid)):
            self._route(r, t)

    def _energy_now(self, t: float) -> float:
        """Energy (J) of the serving GPUs from the start to ``t`` (per-phase power of each instance)."""
        if not self.pd and self.power is None:
            return math.nan
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

    # ------------------------------------------------------------------ engine hooks
    def on_start(self, now: float, job: int, nodes: np.ndarray):
        s = self._request_started(now, job)
        if s is None:
            return None
        p = self.pools[self.slot_pool[s]]
        unwanted = self.slot[s] == "lost_unwanted"    # lost: requeued and restarted at once, before a tick
        cold = self._cold_s(job, p.cold_s)
        x = p.make(len(self.insts))
        if self.pd:
            x.role = p.name
            if self.net is not None:
                self.net.add_instance(x.iid, p.tp, int(nodes[0]))
        self._place(Member(x, p.name, job, now, now + cold, unwanted), s, now)
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

    def _place(self, inst: Member, s: int, now: float) -> None:
        """Add the new instance ``inst`` of slot ``s``: it serves from ``inst.ready``."""
        inst.x.t = inst.ready
        k = self.engine.add(inst)
        self.inst_of[inst.job] = inst
        self.slot[s] = "running"
        self.engine.activate_at(k, inst.ready)
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

    def _drain_done(self, i: Member, now: float) -> bool:
        """Release a draining instance at its drain end (P/D decode: only once no KV is inbound)."""
        if i.state != "draining":
            return False
        return i.pool != "decode" or (i.x.inbound == 0 and i.x.idle() and i.x.t <= now)

    def _landed_draining(self, m: Member, k: int, t: float) -> None:
        """KV landed at draining decode instance ``k`` at ``t`` (drained since): released at its new end."""
        heapq.heappush(self.releases, (max(t, m.x.t), k))

    def _release(self, job: int, now: float, reason: str, control) -> None:
        inst = self.inst_of.get(job)
        if inst is not None and inst.state != "stopped":
            inst.state, inst.t_end, inst.reason = "stopped", now, reason
        if control.state(job) == "running":
            control.release(job)

    # ------------------------------------------------------------------ the controller
    def _pool_view(self, now: float, name: str) -> PoolView:
        """What the controller sees of pool ``name`` at ``now`` (its signals since the last tick)."""
        act = self._in(name, "active")
        mine = self._in(name)
        busy = sum(i.x.busy_s for i in mine)
        tok = sum(i.x.tokens_decoded for i in mine)
        prev = self.prevs[name]
        span = max(1e-9, now - prev["t"])
        p = self.pools[name]
        pending = sum(1 for s in range(p.lo, p.lo + p.n_slots) if self.slot[s] == "pending")
        waiting = self.engine.waiting_d if name == "decode" else self.engine.waiting
        v = PoolView(now, self.cfg.interval_s, len(act), len(self._in(name, "starting")) + pending,
                     min(1.0, (busy - prev["busy"]) / (span * max(1, len(act)))), (tok - prev["tok"]) / span,
                     sum(len(i.x.waiting) for i in act) + len(waiting),
                     sum(i.x.kv.used / i.x.kv.num_blocks for i in act) / max(1, len(act)))
        prev.update(t=now, busy=busy, tok=tok)
        return v

    def _all_served(self, now: float) -> bool:
        eng = self.engine
        if eng.kv_starts or eng.kv_land or eng.waiting_d or eng.inflight:
            return False
        if eng.ai < len(eng.order) or eng.waiting:
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
        """The controller's decision at a tick: the desired count of each pool, node requests and drains."""
        c = self.cfg
        views = [self._pool_view(now, name) for name in self.pools]
        first = now == self.t_start and not self.counts["scale_up_requests"]
        if first:
            wants = [p.initial for p in self.pools.values()]
        elif self.pd:
            wants = [int(w) for w in self.policy.desired_pd(*views)]
        else:
            wants = [int(self.policy.desired(views[0]))]
        for p, want in zip(self.pools.values(), wants):
            want = max(p.lo_bound, min(p.hi_bound, want))
            starting = [i for i in self._in(p.name, "starting") if not i.unwanted]
            active = [i for i in self._in(p.name, "active") if not i.retiring]
            pending = [s for s in range(p.lo, p.lo + p.n_slots) if self.slot[s] == "pending"]
            have = len(active) + len(starting) + len(pending)
            if want > have:
                self._scale_up(p, want - have, now, control)
            elif want < have:
                self._scale_down(have - want, pending, starting, active, now, control)
            for i in self._in(p.name, "active"):       # retiring: once replaced, or near the lease's end
                if i.retiring and (len(active) >= want or i.t0 + c.lease_s - now <= 2 * c.interval_s):
                    self._drain(i, now, control)
            self.log_pools[p.name].append((len(self._in(p.name, "active")), len(self._in(p.name, "starting")),
                                           sum(1 for s in range(p.lo, p.lo + p.n_slots) if self.slot[s] == "pending")))
        if first and c.warm_start:
            self.warm = set(self.submitted_at)

    def _scale_up(self, p: Pool, k: int, now: float, control) -> None:
        for _ in range(self._reclaim(self._in(p.name, "starting"), k)):
            if p.next_slot >= p.lo + p.n_slots:
                which = f"{p.n_slots} {p.name}" if self.pd else f"{p.n_slots}"
                raise RuntimeError(f"serving: all {which} node-request jobs are used; raise serving.slots")
            p.next_slot += 1
            self._request(p.next_slot - 1, now, control)

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

    def _drain(self, i: Member, now: float, control) -> None:
        """No new request for ``i``: its work is simulated to the end, its job released at its last token
        (a decode instance: also once no KV is inbound)."""
        i.state = "draining"
        i.x.drain()
        if self._drain_done(i, now) and max(now, i.x.t) <= now:
            self._release(i.job, now, "drained", control)
        else:
            heapq.heappush(self.releases, (max(now, i.x.t), self.insts.index(i)))

    # ------------------------------------------------------------------ results
    def finalize(self, end: float) -> None:
        if self.pd:                                   # prompts done, then their KV delivered
            self._advance(end)
            for i in self.insts:
                if i.state in ("active", "draining", "starting") and i.pool == "prefill":
                    i.x.drain()
            self._advance(INF)
            for i in self.insts:
                if i.state in ("active", "draining", "starting"):
                    i.x.drain()
        self._advance(end)
        for i in self._live("active", "draining", "starting"):
            i.x.drain()
        undone = [r.uid for r in self.reqs if r.generated != r.output and not r.shed]   # shed: reported
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
        out = {"kind": kind, "serving_end": why}
        if self.pd:
            pool = np.full(n, "", dtype=object)
            pool[self.lo:] = self.slot_pool
            out["serving_pool"] = pool
        return out

    def timeseries(self, grid: np.ndarray, dt: float) -> dict:
        t = np.asarray(self.energy_t, dtype=float)
        e = np.asarray(self.energy_j, dtype=float)
        edges = np.append(grid, grid[-1] + dt) if len(grid) else grid
        cum = np.interp(edges, t, e, left=0.0, right=e[-1] if len(e) else 0.0)
        held = np.zeros(len(grid))
        for i in self.insts:
            end = i.t_end if i.t_end == i.t_end else (grid[-1] + dt if len(grid) else i.t0)
            lo, hi = np.clip(grid, i.t0, end), np.clip(grid + dt, i.t0, end)
            held += (hi - lo) / dt * self.pools[i.pool].nodes
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
        if self.pd:
            req["prefill_instance"] = [q.prefill_instance for q in r]
        inst = pd.DataFrame({"instance": range(len(self.insts)), "pool": [i.pool for i in self.insts],
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
        out = {"serving": {
            "units": "seconds, joules", "trace": c.trace, "policy": c.policy, "hardware": c.hardware,
            "model": c.model, "tp": c.tp, "gpus_per_node": self.gpn, "nodes_per_instance": self.nodes_per_instance,
            "cold_start_s": self.cold_s, "lease_s": c.lease_s, "start_s": self.t_start, "time_scale": c.time_scale,
            "requests": len(r), "output_tokens": int(sum(q.generated for q in r)),
            "log_jobs": int(self.lo), "node_requests": int(self.counts.get("scale_up_requests", 0)),
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
        if self.pd:
            self._pd_summary(out["serving"])
        out["serving"].update(self.slo.report(r))      # per-class figures (only with SLO classes)
        return out

    def _pd_summary(self, s: dict) -> None:
        """The P/D parts of the summary: per pool, and the KV transfers (s, bytes)."""
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
        kv, flows = self.engine.kv_stats, self.engine.flows
        d = np.asarray(kv["transfer_s"], dtype=float)
        w = np.asarray(kv["decode_wait_s"], dtype=float)
        s["kv_transfer"] = {"units": "seconds, bytes",
                            "model": (f"flows on the {self.net.name or 'system'} topology ({self.net.routing} "
                                      "routing, max-min fair)") if self.net is not None else "formula",
                            "max_concurrent": flows.max_concurrent if flows is not None else None,
                            "link_GBps": self.cfg.kv_link_GBps,
                            "latency_s": self.cfg.kv_latency_s, "transfers": kv["transfers"],
                            "bytes": int(kv["bytes"]), "reservations_deferred": kv["reservations_deferred"],
                            "transfer_s_mean": float(d.mean()) if len(d) else None,
                            "transfer_s_max": float(d.max()) if len(d) else None,
                            "waited_for_decode": kv["waited_for_decode"],
                            "decode_wait_s_max": float(w.max()) if len(w) else None}


def _kv_network(cfg: ServingBatchConfig, system):
    """The P/D deployment's KV network (`kvflow.DynamicKVNetwork`) per ``serving.kv_network``, or None."""
    has = system is not None and bool(getattr(system, "network", None)) and getattr(system, "gpus_per_node", 0) > 0
    if cfg.kv_network == "off" or (cfg.kv_network == "auto" and not has):
        return None
    if not has:
        raise ValueError("serving.kv_network = on needs a --system with a [network] table and gpus_per_node")
    from .kvflow import DynamicKVNetwork  # noqa: PLC0415
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
    if cfg.mode == "pd":                                  # disaggregated pools: two pools of node requests
        makes, weights = [], []
        for pool in ("prefill", "decode"):
            tp, hw = getattr(cfg, f"{pool}_tp") or cfg.tp, getattr(cfg, f"{pool}_hardware") or cfg.hardware
            makes.append(instance_factory(PoolSpec(hw, cfg.model, tp=tp, max_num_seqs=cfg.max_num_seqs,
                                                   max_num_batched_tokens=cfg.max_num_batched_tokens),
                                          getattr(setup.cfg, "data_dir", None)))
            weights.append(model_shape(cfg.model).weight_bytes_per_rank(tp))
        trace = read_serving_trace(Path(cfg.trace))
        net = _kv_network(cfg, setup.system)
        return ServingBatchModel(cfg, trace, makes[0], gpus_per_node=gpn or 1, weight_bytes_per_gpu=weights[0],
                                 make_decode=makes[1], decode_weight_bytes=weights[1], kv_network=net)
    spec = PoolSpec(cfg.hardware, cfg.model, tp=cfg.tp, max_num_seqs=cfg.max_num_seqs,
                    max_num_batched_tokens=cfg.max_num_batched_tokens)
    make = instance_factory(spec, getattr(setup.cfg, "data_dir", None))
    trace = read_serving_trace(Path(cfg.trace))
    w = model_shape(cfg.model).weight_bytes_per_rank(cfg.tp)
    return ServingBatchModel(cfg, trace, make, gpus_per_node=gpn or 1, weight_bytes_per_gpu=w)
