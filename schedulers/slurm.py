"""A Slurm-like scheduler: strict-priority main passes, Slurm's periodic backfill, multifactor
priority with fair-share, partitions and QOS limits. Selectable as ``--scheduler slurm``.

Specification: slurm.conf(5), https://slurm.schedmd.com/sched_config.html,
priority_multifactor.html, fair_tree.html, and Slurm's ``src/plugins/sched/backfill/backfill.c``
(``_attempt_backfill``, ``_add_reservation``, ``_bf_reserve_running``, ``backfill_agent``) and
``src/slurmctld/job_scheduler.c`` (``_schedule``). Configuration: `schedulers.slurm_conf`.

What is modelled
----------------
**Passes.** (1) An *event pass* after job submissions/ends: pending jobs in priority order
(partition ``PriorityTier`` desc, priority desc, submit time, job id), at most
``default_queue_depth`` jobs considered; a job that fits (whole nodes, its partition's nodes) starts;
a job that does not fit marks its partition failed and removes the partition's nodes from the
pass (``failed_parts`` in ``_schedule``): no lower-priority job of that partition (or on its
nodes) starts in this pass. A job over its QOS ``max_jobs_per_user`` is skipped without blocking.
``partition_job_depth`` limits jobs considered per partition. (2) The *main pass* every
``sched_interval`` (grid k * sched_interval on the log clock): the same with no depth limit.
(3) The *backfill pass* (``_attempt_backfill``): jobs in priority order until ``bf_max_job_test``
have been tested; the backfill map (``node_space``) starts at now floored to ``bf_resolution`` and
ends at (now + ``bf_window``) floored; running jobs are not in the map (default
``bf_running_job_reserve`` off) but their expected ends (start + estimate) give each node's free
time, as in select/cons_tres's will-run test; a job's usable nodes are its partition's nodes
minus those reserved in any map record that overlaps [start_res, start_res + limit] (overlap
test ``begin <= end``, inclusive, as in backfill.c); its earliest start is when enough of them are
free. If it can start now it starts (on nodes no reservation needs) and, being a whole-node job,
its nodes are added to the map until its end floored to ``bf_resolution`` (22.05's
``_bf_reserve_running``; at least one slot). Otherwise it gets a
reservation on the chosen nodes from its start *floored* to ``bf_resolution`` to its end
(start + limit) also *floored* (22.05's ``end_reserve``), unless the start lies beyond now + ``bf_window``
(no reservation), the job is "test now only" (``bf_job_part_count_reserve`` reservations already
made in its partition, ``bf_min_prio_reserve``, ``bf_min_age_reserve``), or ``bf_max_job_start``
was reached. ``later_start`` retries (TRY_LATER) at the end of map records that free nodes, and the
overlap re-test with ``bf_resolution`` bump, follow backfill.c.
**Timing.** The backfill thread (``backfill_agent``) sleeps ``bf_interval`` after a cycle, then
polls every ``bf_poll`` s (Slurm: 1 s) until there is work; Slurm updates job start-time estimates
in every cycle, so while jobs are pending there is always work and cycles come every
``bf_interval``. Cycles whose inputs did not change since the last real cycle (no submit, start,
end or priority recalculation) are not computed (their outcome would be the same) but keep the
phase. Event and backfill passes at the same instant run in that order in one engine pass.
**Priority** (`schedulers.slurm_priority`): basic (22.05's default) or multifactor; with
slurmdbd accounting recalculated at every ``PriorityCalcPeriod`` tick (grid k * period), without
it age and fair-share are dropped and priorities never change (priority_multifactor.c); usage accrues at the ticks
and at job ends with
Slurm's decay; a new job gets its priority from the last tick's fair-share values at submit.
**Partitions and QOS.** Node sets, ``MaxTime`` (the planning limit is min(limit, MaxTime)),
``PriorityTier``, ``PriorityJobFactor``; SWF partition numbers are slurm.conf partitions by
``PartitionName`` line (1-based) or the ``partition_map`` option (`_partition_labels`). QOS
priority, ``max_jobs_per_user`` and the ``MaxTRESPerUser``/``GrpTRES`` limits on ``cpu``, ``node``
and ``gres/gpu`` from the accounts file (a job over a limit stays pending with slurmctld's reason,
e.g. ``QOSMaxGRESPerUser``; `_tres_blocked`); QOS ``GrpJobs``, ``MaxSubmitJobsPerUser``,
``GrpSubmitJobs``, ``MaxWall``, ``MaxTRESPerJob``/``PerNode`` and association ``MaxJobs``,
``GrpJobs``, ``GrpTRES``, ``MaxSubmitJobs`` in `schedulers.slurm_limits` (a rejected submission never
enters the queue: ``on_submit`` answers its reason). With the ``power_saving`` model the starts take
awake idle nodes first (`schedulers.slurm_power`). **Whole nodes**: a unit of the machine is a node
unless ``cpus_per_node`` > 1 (option or slurm.conf ``NodeName ... CPUs=``); then a job takes
ceil(procs / cpus_per_node) whole nodes and its ``procs`` units lie on them; the remaining units of
those nodes stay unused (Slurm's exclusive node allocation). A machine of exactly the NodeName
node count is read in nodes, one of nodes x ``Gres=gpu:G`` in GPUs (``--allocation gpu``)
(`_resolve_units`). Walltime kills are the engine's (``kill_at_walltime``).

Simplifications (each also listed in ``describe()``)
-----------------------------------------------------
* Scheduler passes take no time: the wall-clock keys (``bf_continue``, ``bf_max_time``,
  ``bf_yield_interval``, ``bf_yield_sleep``, ``max_rpc_cnt``, ``max_sched_time``,
  ``build_queue_timeout``: `slurm_keys.WALL_CLOCK_PARAMS`) cannot change a decision (a cycle never
  yields its locks, never reaches a time budget, and no event is applied during it, so
  ``bf_continue`` acts on nothing); the summary's warning line says so.
* Whole-run speed: eligible runs (static priority order, select/linear, no model or gate) are
  replayed by one compiled function, `schedulers.slurm_replay`, with the same decisions (option
  ``replay``: ``auto``/``on``/``off``).
* The planning limit of a job is its estimate (the requested time by default, as in Slurm), in
  seconds (Slurm's limits are whole minutes).
* select/cons_tres's will-run groups running jobs ending within a 30 s window (doubling) before
  testing; we compute the exact earliest time enough nodes are free.
* Node choice follows ``SelectType``: select/linear (default, Slurm 22.05's) exactly as
  ``_job_test``/``_will_run_test`` (`schedulers.slurm_select`, compiled in
  `schedulers.slurm_kernels`); gres/gpu requests restrict a job to nodes with enough GPUs.
  Under select/cons_tres and cons_res on a machine counted in CPUs, jobs share nodes by cores, GPUs
  and memory as 22.05's cons_tres does (`schedulers.slurm_tres`, passes in
  `schedulers.slurm_tres_passes`: ``_eval_nodes``, ``_will_run_test``, node-set backfill map,
  queue records per partition for ``-p a,b``). Otherwise (machine in nodes, every job whole-node)
  cons_tres/cons_res give whole nodes (approximated) by ``node_order``: ``"time-fit"`` (default) starts jobs now on
  the free nodes whose
  next reservation comes soonest and reserves, for a future start, the nodes that become free
  latest (so the nodes left for backfill are as many as EASY's "extra" nodes); ``"index"`` takes
  the lowest node ids (Slurm's choice on a flat machine without node weights is the select
  plugin's best fit, close to this). No topology, no node weights, no features, no GRES but
  gres/gpu. Model card: ``docs/slurm.md``.
* The main scheduler does not see backfill reservations (as in Slurm) but is strict per partition.
* Jobs that can never run (over their partition's MaxTime or node count, partition not UP) are
  rejected at bind with an error (Slurm rejects them at submit with EnforcePartLimits, or leaves
  them pending forever).
* Advance reservations: `schedulers.slurm_resv` (``job_test_resv``; a job of a reservation ends
  TIMEOUT at its end + ``ResvOverRun`` + 1 s, job_mgr.c ``job_time_limit``).
* Preemption: `schedulers.slurm_preempt` (main, event and backfill passes; REQUEUE, CANCEL).
* No licenses, arrays-as-one-record, nice, TRES or association factors, job ``--time-min``,
  heterogeneous jobs (dependencies: the engine's gate, `twin.dependencies`).
"""
from __future__ import annotations

import math
import sys
from dataclasses import replace
from collections import defaultdict

import numpy as np

from .base import BindContext, ClusterView, Scheduler, Start
from .profile import NodeSpaceMap
from .slurm_conf import (SlurmConfError, SlurmConfig, apply_options, load_slurm_conf,
                         not_modelled_line, report_ignored)
from .slurm_priority import TRES_NAMES, AccountsSpec, FairShare, MultifactorPriority, QOSDef, load_accounts
from .slurm_replay import REPLAY_MODES
from .slurm_resv import ResvOptions, ResvSet, job_labels, parse_log_start, resv_options, resv_over_run
from .slurm_select import GroupedRunning, RunningSet, bits as _bits, job_test, low_bits, to_mask as _to_mask
from .slurm_tres import WILL_RUN_WINDOW
from .slurm_tres_passes import TresPasses
from .slurm_limits import Limits, bind_limits
from .slurm_power import asleep_nodes, awake_first, power_view
from .slurm_preempt import PreemptPasses, preempt_spec

NODE_ORDERS = ("time-fit", "index")
#: slurmctld's pending reasons for a QOS TRES limit, in `slurm_priority.TRES_NAMES` order
_USER_REASONS = ("QOSMaxCpuPerUserLimit", "QOSMaxNodePerUserLimit", "QOSMaxGRESPerUser")
_GRP_REASONS = ("QOSGrpCpuLimit", "QOSGrpNodeLimit", "QOSGrpGRES")
_INF = math.inf


def _grid_next(t: float, period: float) -> float:
    """Smallest multiple of ``period`` strictly greater than ``t``."""
    return (math.floor(t / period) + 1) * period


class SlurmScheduler(TresPasses, PreemptPasses, Scheduler):
    """The Slurm-like policy (see the module docstring).

    Parameters
    ----------
    config: the `SlurmConfig` (slurm.conf + options).
    accounts: shares and QOS definitions (None: equal shares, QOS ``normal`` only).
    cpus_per_node: allocation units per node (None: slurm.conf ``CPUs``, else 1).
    node_order: ``"time-fit"`` or ``"index"``.
    bf_poll: polling period (s) of the idle backfill thread (Slurm: 1 s).
    partition_map: SWF partition number -> slurm.conf partition name (None: the n-th
        ``PartitionName`` line is number n, 1-based; see `_partition_labels`).
    """

    name = "slurm"

    def __init__(self, config: SlurmConfig | None = None, accounts: AccountsSpec | None = None,
                 cpus_per_node: int | None = None, node_order: str = "time-fit",
                 bf_poll: float = 1.0, compiled: bool = True,
                 time_limit_minutes: bool = False, replay: str = "auto",
                 partition_map: dict[int, str] | None = None,
                 cons_tres_window: float = WILL_RUN_WINDOW,
                 reservations: ResvOptions | None = None, log_start: float | None = None):
        self.cfg = config or SlurmConfig()
        #: Unix time (s) of the log's time 0: the option ``log_start``, else (at bind) the log header's
        #: UnixStartTime (`BindContext.log_start`), else 0 (the log's own clock): cons_tres's will-run
        #: windows align on Slurm's Unix clock (`schedulers.slurm_tres.will_run`)
        self.log_start_option = float(log_start) if log_start is not None else None
        self.log_start = self.log_start_option if log_start is not None else 0.0
        #: advance reservations (`schedulers.slurm_resv`); resolved on the machine at bind
        self.resv_opts = reservations or ResvOptions()
        self.rsv: ResvSet | None = None
        self.pre = preempt_spec(self.cfg)       # PreemptType, PreemptMode, ... (schedulers.slurm_preempt)
        self.resv_over_run = resv_over_run(self.cfg)    # ResvOverRun (s; schedulers.slurm_resv)
        if not cons_tres_window > 0:
            raise ValueError(f"slurm: cons_tres_window must be > 0 s, got {cons_tres_window}")
        #: cons_common ``_will_run_test``'s first window (s, Slurm: 30 on its own clock)
        self.cons_window = float(cons_tres_window)
        self.accounts = accounts
        if node_order not in NODE_ORDERS:
            raise ValueError(f"slurm: node_order must be one of {', '.join(NODE_ORDERS)}, "
                             f"got {node_order!r}")
        self.node_order = node_order
        self.linear = self.cfg.select_type == "select/linear"
        if not bf_poll > 0:
            raise ValueError(f"slurm: bf_poll must be > 0 s, got {bf_poll}")
        self.bf_poll = float(bf_poll)
        self.compiled = bool(compiled)
        if replay not in REPLAY_MODES:
            raise ValueError(f"slurm: replay must be one of {', '.join(REPLAY_MODES)}, "
                             f"got {replay!r}")
        self.replay = replay
        self.time_limit_minutes = bool(time_limit_minutes)
        cpn = cpus_per_node if cpus_per_node is not None else self.cfg.cpus_per_node
        self.cpn = int(cpn) if cpn else 1
        if self.cpn < 1:
            raise ValueError(f"slurm: cpus_per_node must be >= 1, got {cpus_per_node}")
        self.cpn_option = cpus_per_node is not None     # given as an option (not slurm.conf)
        self.cpn_conf = self.cpn                        # CPUs per node before `bind` reads the machine
        self.unit_kind = "cpu" if self.cpn > 1 else "node"
        self.partition_map = dict(partition_map or {})
        self.notes: list[str] = []
        self.stats = {"event_passes": 0, "main_passes": 0, "backfill_passes": 0,
                      "backfill_cycles_skipped": 0, "backfill_starts": 0, "main_starts": 0,
                      "reservations": 0, "priority_ticks": 0}

    # ================================================================== setup
    @property
    def shares_nodes(self) -> bool:
        """Whether jobs share nodes unit by unit (select/cons_tres on CPU units, `slurm_tres`): the
        conformance suite then checks units, not whole nodes. Before bind: a cons_tres/cons_res
        policy with more than one CPU per node."""
        shared = getattr(self, "shared", None)
        return bool(not self.linear and self.cpn > 1) if shared is None else bool(shared)

    @property
    def units_required(self) -> int | None:
        """Allocation units the slurm.conf machine has (nodes x CPUs), or None if it names none."""
        if not self.cfg.node_names:
            return None
        if self.cfg.heterogeneous:
            return int(sum(self.cfg.node_cpus))
        return len(self.cfg.node_names) * self.cpn_conf

    def _resolve_units(self, total: int, src: str) -> tuple[int, str]:
        """What one unit of the ``total``-unit machine is: (units per node, ``"cpu"``, ``"node"``
        or ``"gpu"``). With NodeName lines of N nodes x C CPUs (x G GPUs): total = N x C -> units
        are CPUs (a job of p units takes ceil(p / C) whole nodes); total = N -> units are nodes
        (``--nodes N`` counted nodes: a job's size is its node count); total = N x G -> units are
        GPUs (``--allocation gpu``). Anything else contradicts slurm.conf: `SlurmConfError`."""
        cpn = self.cpn_conf
        names = self.cfg.node_names
        if not names:
            if total % cpn:
                raise SlurmConfError(f"{src}: the machine has {total} units, not a multiple of "
                                     f"cpus_per_node={cpn}; give --nodes as a multiple of {cpn}")
            return cpn, ("cpu" if cpn > 1 else "node")
        N = len(names)
        gpus = set(self.cfg.node_gpus or [0])
        G = max(gpus)
        if self.cfg.heterogeneous and not self.cpn_option:
            cpus = int(sum(self.cfg.node_cpus))
            if total == cpus and not self.linear:
                return 0, "cpu"         # CPUs of nodes of different sizes (slurm_tres offsets)
            if total == N:
                self.notes.append(f"units are nodes: the machine has {total} units = the {N} "
                                  "NodeName nodes (their CPU counts differ)")
                return 1, "node"
            ways = [f"--nodes {N} (nodes)"]
            if not self.linear:
                ways.append(f"--nodes {cpus} (the CPUs of all nodes)")
            raise SlurmConfError(
                f"{src}: NodeName lines define {N} nodes with {cpus} CPUs in all (different CPUs "
                f"counts: {sorted(set(self.cfg.node_cpus))}) but the machine has {total} units; run "
                f"with {' or '.join(ways)}" + ("" if not self.linear else
                                               ", or SelectType=select/cons_tres for CPU units"))
        if total == N * cpn:
            return cpn, ("cpu" if cpn > 1 else "node")
        if total == N and not self.cpn_option:
            self.notes.append(
                f"units are nodes: the machine has {total} units = the {N} NodeName nodes, so a "
                f"job's size is its node count (CPUs={cpn} per node read for TRES cpu limits); to "
                f"count CPUs run with --nodes {N * cpn}")
            return 1, "node"
        if G > 0 and total == N * G:
            part = "" if len(gpus) == 1 else (f" (nodes without GPUs count {G} GPU units in the "
                                               "engine; Slurm-like GPU jobs avoid them by Gres)")
            self.notes.append(f"units are GPUs: {N} nodes x {G} GPUs (--allocation gpu){part}")
            return G, "gpu"
        ways = [f"--nodes {N} (nodes)", f"--nodes {N * cpn} ({cpn} CPUs per node)"]
        if G > 0:
            ways.append(f"--allocation gpu --gpus-per-node {G} --nodes {N}")
        raise SlurmConfError(
            f"{src}: NodeName lines define {N} nodes x {cpn} CPUs = {N * cpn} units but the "
            f"machine has {total} units; run with {' or '.join(ways)}, or fix the NodeName lines")

    @property
    def _kern(self):
        """The compiled cycle (`schedulers.slurm_kernels`, numba), imported on first use: a run
        that the whole-run replay's ahead-of-time module carries never imports numba. The first
        import runs the JIT cache guard of its kernel set (`twin.jit_cache`)."""
        mod = sys.modules.get("hpctwin.schedulers.slurm_kernels")
        if mod is None:
            from .slurm_replay import KERNELS  # noqa: PLC0415
            KERNELS.guard_jit_cache()       # numba's cache keys a file only: drop stale callers
            from . import slurm_kernels as mod  # noqa: PLC0415
        return mod

    def bind(self, ctx: BindContext, cluster: ClusterView | None = None) -> None:
        """Bind to the run (a `BindContext`; the legacy ``(jobs, cluster)`` pair is accepted)."""
        ctx = BindContext.coerce(ctx, cluster)
        super().bind(ctx)
        jobs, cluster = ctx.jobs, ctx.cluster
        if self.log_start_option is None:        # Slurm's clock: the log's own UnixStartTime when it has one
            self.log_start = float(ctx.log_start) if ctx.log_start is not None else 0.0
        self.log_start_known = self.log_start_option is not None or ctx.log_start is not None
        self.notes = []
        self.ps_view = power_view(ctx)      # power_saving model: awake nodes first (schedulers.slurm_power)
        cfg = self.cfg
        total = int(cluster.total)
        src = cfg.path or "slurm options"
        self.cpn, self.unit_kind = self._resolve_units(total, src)
        if self.notes and getattr(self, "_printed_units", None) != self.notes[0]:
            print(f"slurm: {self.notes[0]}")     # once, though a fast path binds twice
            self._printed_units = self.notes[0]
        cpn = self.cpn
        NN = total // cpn if cpn else len(cfg.node_names)
        self.NN = NN
        n = len(jobs)
        self.n = n
        procs = np.asarray(jobs.procs, dtype=np.int64)
        self.req = -(-procs // max(cpn, 1))               # whole nodes per job
        self.est = np.asarray(jobs.estimate, dtype=np.float64)
        self.submit = np.asarray(jobs.submit, dtype=np.float64)
        self.job_id = np.asarray(jobs.job_id, dtype=np.int64)
        cols = jobs.columns or {}

        # ---- partitions
        parts = list(cfg.partitions)
        node_index = {name: i for i, name in enumerate(cfg.node_names)}
        if not parts:
            from .slurm_conf import PartitionDef  # noqa: PLC0415
            parts = [PartitionDef(name="default", default=True)]
        P = len(parts)
        pmask = np.zeros((P, NN), dtype=bool)
        for k, p in enumerate(parts):
            if p.nodes is None:
                pmask[k] = True
            else:
                pmask[k, [node_index[x] for x in p.nodes]] = True
        self.parts = parts
        self.pmask = pmask
        self.part_tier = np.array([p.priority_tier for p in parts], dtype=np.int64)
        self.part_maxtime = np.array([p.max_time for p in parts], dtype=np.float64)
        maxf = max(p.priority_job_factor for p in parts)
        part_factor = np.array([p.priority_job_factor / maxf if maxf > 0 else 0.0 for p in parts])
        self.part_factor = part_factor
        default_k = next((k for k, p in enumerate(parts) if p.default), 0)
        name_to_k = {p.name: k for k, p in enumerate(parts)}
        if "partition_name" in cols:
            labels, inv = _factorize([str(x) for x in cols["partition_name"]])
        else:
            labels, inv = _int_labels(jobs.partition, "")
            if cfg.partitions:
                labels = self._partition_labels(labels, np.bincount(inv, minlength=len(labels)), src)
        k_of = np.array([name_to_k.get(nm, -1) for nm in labels], dtype=np.int64)
        # sbatch -p a,b (sacct Partition "a,b"): every listed partition of slurm.conf, in the order
        # given; the first one a job fits is its own (jpart), the others queue records (shared runs)
        multi_lab: dict[int, list[int]] = {}
        for q, nm in enumerate(labels):
            if "," in nm:
                ks = [name_to_k[x.strip()] for x in nm.split(",") if x.strip() in name_to_k]
                if ks:
                    multi_lab[q] = list(dict.fromkeys(ks))
                    k_of[q] = ks[0]
        counts = np.bincount(inv, minlength=len(labels))
        unmatched = {nm: int(counts[q]) for q, nm in enumerate(labels) if k_of[q] < 0}
        jpart = np.where(k_of < 0, default_k, k_of)[inv]
        self.jparts = self._multi_partitions(jobs, parts, multi_lab, inv, jpart)
        if unmatched and cfg.partitions:
            shown = ", ".join(f"{k or '(none)'}: {v}" for k, v in sorted(unmatched.items())[:5])
            self.notes.append(f"jobs whose partition is not in slurm.conf go to the default "
                              f"partition {parts[default_k].name} ({shown})")
        self.jpart = jpart
        self.jtier = self.part_tier[jpart]
        # select/cons_tres, cons_res on a machine in CPUs: jobs share nodes (slurm_tres) unless
        # every job holds whole nodes anyway (then the whole-node passes decide as before)
        self.shared = (not self.linear and self.unit_kind == "cpu"
                       and (cpn == 0 or not self._all_whole(cols, jpart)))
        if self.shared:
            self._tres_bind(jobs, cols, jpart, total, src)
        # planning limit: min(estimate, partition MaxTime)
        self.tl = np.minimum(self.est, self.part_maxtime[jpart])
        if self.time_limit_minutes:
            # Slurm's time_limit is whole minutes (--time rounds seconds up: time_str2mins);
            # plans use limit * 60 (the engine still kills at the log's requested seconds)
            self.tl = np.ceil(self.tl / 60.0) * 60.0
        req_t = np.asarray(jobs.requested_time, dtype=np.float64)
        over = np.isfinite(req_t) & (req_t > self.part_maxtime[jpart])
        part_nodes = pmask.sum(axis=1)
        too_big = self.req > part_nodes[jpart]
        over_max = self.req > np.array([p.max_nodes for p in parts])[jpart]
        under_min = self.req < np.array([p.min_nodes for p in parts])[jpart]
        down = np.array([parts[k].state != "UP" for k in range(P)])[jpart]
        no_gpu_nodes = self._bind_gres(cols, src)
        for mask, why in ((over, "requests more time than its partition's MaxTime"),
                          (no_gpu_nodes, "requests more nodes with its gres/gpu count than its "
                                         "partition has (NodeName Gres=gpu:N)"),
                          (too_big, "needs more nodes than its partition has"),
                          (over_max, "needs more nodes than its partition's MaxNodes"),
                          (under_min, "needs fewer nodes than its partition's MinNodes"),
                          (down, "is in a partition that is not UP")):
            if mask.any():
                i = int(np.flatnonzero(mask)[0])
                raise SlurmConfError(
                    f"{src}: {int(mask.sum())} jobs can never start (first: job "
                    f"{int(self.job_id[i])}, {int(self.req[i])} nodes, limit "
                    f"{req_t[i]:g} s, partition {parts[jpart[i]].name}): it {why}. Slurm would "
                    "reject such jobs at submit (EnforcePartLimits) or keep them pending forever; "
                    "filter the workload or change the partition")

        # ---- QOS
        spec = self.accounts or AccountsSpec()
        qdefs = dict(spec.qos)
        qdefs.setdefault("normal", QOSDef("normal"))
        if "qos_name" in cols:
            qlabels, qinv = _factorize([str(x) if str(x) else "normal" for x in cols["qos_name"]])
        elif "qos" in cols:
            qlabels, qinv = _int_labels(np.asarray(cols["qos"]).astype(np.int64), "normal")
        else:
            qlabels, qinv = ["normal"], np.zeros(n, dtype=np.int64)
        unknown_q = sorted({q for q in qlabels if q not in qdefs})
        if unknown_q:
            self.notes.append(f"QOS not in the accounts file (priority 0, no limits): "
                              f"{', '.join(unknown_q[:5])}")
            for q in unknown_q:
                qdefs[q] = QOSDef(q)
        qlist = list(qdefs)
        self.qos_defs = [qdefs[q] for q in qlist]
        qid = {q: i for i, q in enumerate(qlist)}
        self.jqos = np.array([qid[q] for q in qlabels], dtype=np.int64)[qinv]
        qprio = np.array([qdefs[q].priority for q in qlist], dtype=np.float64)
        qmax = qprio.max() if len(qprio) else 0.0
        qos_factor = (qprio / qmax if qmax > 0 else np.zeros_like(qprio))[self.jqos]
        qlim = np.array([qdefs[q].max_jobs_per_user if qdefs[q].max_jobs_per_user is not None
                         else -1 for q in qlist], dtype=np.int64)
        self.jqos_limit = qlim[self.jqos]
        self.juser = np.asarray(jobs.user, dtype=np.int64)
        self.running_uq: dict[tuple[int, int], int] = defaultdict(int)
        self._bind_tres(procs, [qdefs[q] for q in qlist], src)
        self.has_qos_limits = bool((self.jqos_limit >= 0).any()) or self.has_tres_limits

        # ---- associations (account, user) and priority
        if "account_name" in cols:
            alab, ainv = _factorize([str(x) or "default" for x in cols["account_name"]])
        else:
            alab, ainv = _int_labels(jobs.group, "default")
        if "user_name" in cols:
            ulab, uinv = _factorize([str(x) or "unknown" for x in cols["user_name"]])
        else:
            ulab, uinv = _int_labels(jobs.user, "unknown")
        # associations numbered in order of first appearance (as a dict filled job by job)
        pair, jassoc = _factorize_codes(ainv * max(len(ulab), 1) + uinv)
        aid = [(alab[c // max(len(ulab), 1)], ulab[c % max(len(ulab), 1)]) for c in pair]
        self.jassoc = jassoc
        # QOS and association limits beyond MaxJobsPerUser/MaxTRESPerUser/GrpTRES (schedulers.slurm_limits)
        self.limits: Limits | None = bind_limits(self, aid, qlist, src)
        if self.limits is not None:
            self.has_qos_limits = self.has_tres_limits = True
        prm = self._applied_priority(cfg)
        self.use_fs = prm.type == "priority/multifactor" and prm.weight_fairshare > 0
        self.fs = FairShare([a for a, _ in aid], [u for _, u in aid], spec,
                            half_life=prm.decay_half_life, fair_tree=prm.fair_tree,
                            dampening=prm.dampening) if self.use_fs else None
        self.prio_calc = MultifactorPriority(
            prm, submit=self.submit, nodes=self.req, cpus=procs, time_limit=self.tl,
            part_factor=part_factor[jpart], qos_factor=qos_factor, assoc=jassoc,
            total_nodes=NN, total_cpus=total)
        if self.shared:
            self._tres_size_bind(cols)      # job size: requested CPUs until the first select test
        # a job held by a dependency ages from when it became eligible (priority_multifactor.c's age
        # counts from details->begin_time), read live from the run's dependency gate
        self.prio_calc.begin = ctx.eligible
        # priority_multifactor.c: without slurmdbd there is no decay thread, so priorities are
        # set at submit and never recalculated (the remaining factors do not change anyway)
        self.time_varying = (prm.type == "priority/multifactor" and cfg.with_slurmdbd
                             and self.prio_calc.time_varying)
        self.fs_factor = self.fs.factors() if self.fs is not None else None
        self.last_tick = 0.0                 # time of the last PriorityCalcPeriod tick
        self.static_order = (not self.time_varying and P == 1
                             and (prm.type == "priority/basic"
                                  or np.ptp(self.prio_calc.static) == 0))

        self._bind_resv(jobs, cols, default_k, total)

        # ---- machine state (node level)
        self.node_end = np.full(NN, -_INF)   # expected end of the job on each node; -inf = idle
        self.n_idle = NN                     # nodes with node_end == -inf
        self.job_nodes: dict[int, np.ndarray] = {}
        self.job_mask: dict[int, int] = {}     # running job -> node bitset
        self.run_end: dict[int, float] = {}    # running job -> expected end (start + estimate)
        self.run_start: dict[int, float] = {}
        self.run_units: dict[int, int] = {}
        self.applied: set[int] = set()
        self.n_pending = 0
        # pass bookkeeping
        self.event_flag = False
        self.main_dirty = False
        self.last_full = 0.0
        sp = cfg.sched
        self.bf_last = 0.0                   # last backfill cycle (real or skipped); thread starts at 0
        self.bf_left_pending = False
        self.bf_change = None                # first change after bf_last (time) or None
        self.bf_dirty = False                # change since the last *computed* cycle
        self.bf_on = sp.backfill
        # the compiled cycle (schedulers.slurm_kernels) covers select/linear without per-user
        # QOS limits, bf_max_job_part and bf_max_job_user; the Python cycle does the rest
        self.use_kernel = (self.compiled and self.linear and not self.has_qos_limits
                           and not sp.bf_max_job_part and not sp.bf_max_job_user
                           and self.rsv is None and self.ps_view is None)
        if self.shared:
            self.pm_int_t = [self._to_int(r) for r in self.pmask]
            self.gm_int_t = [self._to_int(r) for r in self.gres_masks]
            self._tres_count_idle()
        self.W = (NN + 63) // 64
        self.slot_of: dict[int, int] = {}
        self._ones = np.ones(0, dtype=np.int64)
        if self.use_kernel:
            # running jobs in slots (at most one per node): used flag, expected end, job id and
            # node words, read by the compiled cycle without per-cycle Python work
            self.pm_words = np.stack([self._words(r) for r in self.pmask])
            self.gres_words = np.stack([self._words(r) for r in self.gres_masks])
            self._no_prio = np.zeros(0)
            self.slot_used = np.zeros(NN, dtype=np.bool_)
            self.slot_end = np.zeros(NN)
            self.slot_id = np.zeros(NN, dtype=np.int64)
            self.slot_words = np.zeros((NN, self.W), dtype=np.uint64)
            self.free_slots = list(range(NN - 1, -1, -1))
        self._preempt_bind()                    # preemption state; turns the compiled cycle off
        if self.pre_on:     # a requeued job ages from its EligibleTime (slurm_priority: accrue_from)
            self.prio_calc.accrue_from = self.pre_elig

    def _bind_tres(self, procs: np.ndarray, qos: list[QOSDef], src: str) -> None:
        """QOS ``MaxTRESPerUser`` / ``GrpTRES`` limits: each job's TRES (``cpu``: its CPUs, i.e.
        its units when units are CPUs, nodes x CPUs per node when units are nodes or GPUs;
        ``node``: its nodes; ``gres/gpu``: its GPUs, i.e. its units under ``--allocation gpu``,
        else ``gpus_per_node`` x nodes) as the rows of ``jtres`` (jobs x 3), the per-QOS limits
        (-1 none) in ``tres_user_lim``/``tres_grp_lim`` (QOS x 3). A job over a limit on its own
        could never start: `SlurmConfError` (Slurm would keep it pending forever)."""
        n = self.n
        cpn_conf = self.cpn_conf
        if self.unit_kind == "cpu":
            cpu = procs
        else:
            cpu = self.req * cpn_conf
        if self.unit_kind == "gpu":
            gpu = procs
        else:
            g = (self.jobs.columns or {}).get("gpus_per_node")
            gpu = (np.ceil(np.nan_to_num(np.asarray(g, dtype=np.float64))).astype(np.int64) * self.req
                   if g is not None else np.zeros(n, dtype=np.int64))
        self.jtres = np.stack([np.asarray(cpu, dtype=np.int64), np.asarray(self.req, dtype=np.int64),
                               np.asarray(gpu, dtype=np.int64)], axis=1) if n else np.zeros((0, 3), np.int64)
        self.tres_user_lim = np.array([[q.max_tres_per_user.get(t, -1) for t in TRES_NAMES] for q in qos],
                                      dtype=np.int64).reshape(len(qos), 3)
        self.tres_grp_lim = np.array([[q.grp_tres.get(t, -1) for t in TRES_NAMES] for q in qos],
                                     dtype=np.int64).reshape(len(qos), 3)
        self.has_tres_limits = bool((self.tres_user_lim >= 0).any() or (self.tres_grp_lim >= 0).any())
        self.running_ut: dict[tuple[int, int], np.ndarray] = defaultdict(lambda: np.zeros(3, np.int64))
        self.running_qt: dict[int, np.ndarray] = defaultdict(lambda: np.zeros(3, np.int64))
        self.pending_reasons: dict[str, int] = {}
        self._reason_seen: set[tuple[int, str]] = set()
        if not self.has_tres_limits or not n:
            return
        for lim, kind in ((self.tres_user_lim, "MaxTRESPerUser"), (self.tres_grp_lim, "GrpTRES")):
            jl = lim[self.jqos]
            over = (jl >= 0) & (self.jtres > jl)
            if over.any():
                i, t = (int(x[0]) for x in np.nonzero(over))
                raise SlurmConfError(
                    f"{self.accounts.path if self.accounts else src}: {int(over.any(axis=1).sum())} jobs "
                    f"can never start (first: job {int(self.job_id[i])}, {int(self.jtres[i, t])} "
                    f"{TRES_NAMES[t]} in QOS {qos[int(self.jqos[i])].name}, whose {kind} allows "
                    f"{TRES_NAMES[t]}={int(jl[i, t])}); Slurm would keep it pending forever: raise "
                    "the limit or filter the workload")

    def _bind_resv(self, jobs, cols: dict, default_k: int, total: int) -> None:
        """Advance reservations (`schedulers.slurm_resv`): created on the machine's nodes at the
        log's time 0; each job's ``reservation`` column names its reservation (``job_reservations=
        ignore``: none). No reservation given and none named: ``rsv`` stays None (nothing changes)."""
        self.rsv = None
        ro = self.resv_opts
        resv, users, accts = job_labels(jobs, cols)
        if ro.job_reservations == "ignore":
            resv = [""] * len(resv)
        if not ro.specs and not any(resv):
            return
        names = list(self.cfg.node_names) if len(self.cfg.node_names) == self.NN else []
        specs = ro.resolve(self.log_start if self.log_start_known else None)   # ISO times: the log's clock
        self.rsv = ResvSet(specs, names, self.NN, [self._to_int(r) for r in self.pmask],
                           [p.name for p in self.parts], default_k, resv, users, accts, self.job_id,
                           over_run=self.resv_over_run)
        self.notes += self.rsv.notes

    def _rsv_first(self, order: np.ndarray, prio: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``sort_job_queue2``: jobs with a reservation first (unchanged without reservations)."""
        return (order, prio) if self.rsv is None else self.rsv.resv_first(order, prio)

    def _multi_partitions(self, jobs, parts: list, multi_lab: dict[int, list[int]], inv: np.ndarray,
                          jpart: np.ndarray) -> dict[int, list[int]]:
        """Jobs submitted to several partitions: {job: [partition index, ...]} in the order given,
        without the partitions whose ``MaxTime``/``MaxNodes``/``MinNodes`` or ``State`` refuse the
        job; ``jpart`` (changed in place) becomes the first partition left (the job's own: its
        priority, MaxTime, node checks). Only runs where jobs share nodes (select/cons_tres) queue
        the other partitions (Slurm's one queue record per partition); others use ``jpart`` and
        say so in ``notes``."""
        if not multi_lab:
            return {}
        req_t = np.asarray(jobs.requested_time, dtype=np.float64)
        out: dict[int, list[int]] = {}
        for j in np.flatnonzero(np.isin(inv, list(multi_lab))).tolist():
            ks = [k for k in multi_lab[int(inv[j])]
                  if parts[k].state == "UP"
                  and not (np.isfinite(req_t[j]) and req_t[j] > parts[k].max_time)
                  and parts[k].min_nodes <= self.req[j] <= parts[k].max_nodes]
            if not ks:
                continue                # the bind checks report the first partition's refusal
            jpart[j] = ks[0]
            if len(ks) > 1:
                out[j] = ks
        if out:
            shared = not self.linear and self.unit_kind == "cpu"
            self.notes.append(f"{len(out)} jobs were submitted to several partitions (-p a,b): "
                              + ("each partition is a queue record (PriorityTier, priority), as "
                                 "slurmctld's job queue" if shared else
                                 "they queue in their first partition only (several records are "
                                 "modelled under select/cons_tres with CPU units)"))
        return out

    def _tres_blocked(self, j: int) -> str | None:
        """The slurmctld pending reason when starting job ``j`` would exceed its QOS's
        ``MaxTRESPerUser`` (``QOSMaxCpuPerUserLimit``, ``QOSMaxNodePerUserLimit``,
        ``QOSMaxGRESPerUser``) or ``GrpTRES`` (``QOSGrpCpuLimit``, ``QOSGrpNodeLimit``,
        ``QOSGrpGRES``); None if it may start."""
        q = int(self.jqos[j])
        need = self.jtres[j]
        ul = self.tres_user_lim[q]
        if (ul >= 0).any():
            used = self.running_ut.get((int(self.juser[j]), q))
            if used is not None:
                over = (ul >= 0) & (used + need > ul)
                if over.any():
                    return _USER_REASONS[int(np.flatnonzero(over)[0])]
        gl = self.tres_grp_lim[q]
        if (gl >= 0).any():
            used = self.running_qt.get(q)
            if used is not None:
                over = (gl >= 0) & (used + need > gl)
                if over.any():
                    return _GRP_REASONS[int(np.flatnonzero(over)[0])]
        return None

    def _tres_account(self, j: int, sign: int) -> None:
        """Add (sign 1, a start) or remove (sign -1, an end) job ``j``'s TRES to its user's and
        its QOS's running totals."""
        q = int(self.jqos[j])
        self.running_ut[(int(self.juser[j]), q)] += sign * self.jtres[j]
        self.running_qt[q] += sign * self.jtres[j]
        if self.limits is not None:
            self.limits.account(j, sign)
            if sign < 0:
                self.limits.left(j)         # job_completion_logger: its submit slot is free

    def _partition_labels(self, labels: list[str], counts: np.ndarray, src: str) -> list[str]:
        """SWF partition numbers (``labels``: ``str(int)``, ``""`` for -1) -> slurm.conf partition
        names. The ``partition_map`` option when given (number -> name), else the n-th
        ``PartitionName`` line is partition number n (1-based, as SWF numbers partitions from 1).
        A number with no partition is a `SlurmConfError` (naming it, its job count and the
        mapping); jobs with no partition (-1) keep the default partition."""
        parts = self.cfg.partitions
        names = {p.name for p in parts}
        if self.partition_map:
            bad = sorted(v for v in self.partition_map.values() if v not in names)
            if bad:
                raise SlurmConfError(f"partition_map: partition {bad[0]!r} is not a PartitionName of "
                                     f"{src} (partitions: {', '.join(sorted(names))})")
            mapping = dict(self.partition_map)
            how = "partition_map"
        else:
            mapping = {i + 1: p.name for i, p in enumerate(parts)}
            how = "the n-th PartitionName line is number n"
        out = []
        for q, lab in enumerate(labels):
            if lab == "":
                out.append("")
                continue
            nm = mapping.get(int(lab))
            if nm is None:
                shown = ", ".join(f"{k}={v}" for k, v in sorted(mapping.items()))
                raise SlurmConfError(
                    f"{src}: {int(counts[q])} jobs are in SWF partition {lab}, which no slurm.conf "
                    f"partition matches ({how}: {shown}); give --set scheduler.partition_map="
                    f"\"{lab}=NAME,...\" or filter the workload")
            out.append(nm)
        self.notes.append(f"SWF partition numbers -> slurm.conf partitions ({how}): "
                          + ", ".join(f"{lab}={nm}" for lab, nm in zip(labels, out) if lab))
        return out

    def _bind_gres(self, cols: dict, src: str) -> np.ndarray:
        """``gres/gpu`` requests (workload column ``gpus_per_node``, e.g. from sacct's TRES):
        a job asking g GPUs per node may use only nodes with at least g (``Gres=gpu:N``), as
        select/linear's ``_job_count_bitmap`` filters nodes with ``gres_job_test``. Sets
        ``jgres`` (each job's GPU level), ``gres_masks`` (usable nodes per level); returns the
        jobs whose partition has too few such nodes."""
        n, NN = self.n, self.NN
        g = cols.get("gpus_per_node")
        g_req = (np.ceil(np.nan_to_num(np.asarray(g, dtype=np.float64))).astype(np.int64)
                 if g is not None else np.zeros(n, dtype=np.int64))
        if g is None and self.unit_kind == "gpu":
            # units are GPUs: a job of p GPUs on ceil(p / G) nodes asks ceil(p / nodes) per node
            g_req = -(-np.asarray(self.jobs.procs, dtype=np.int64) // np.maximum(self.req, 1))
        node_gpus = np.asarray(self.cfg.node_gpus or [0] * NN, dtype=np.int64)
        if (g_req > 0).any() and not (node_gpus > 0).any():
            i = int(np.flatnonzero(g_req > 0)[0])
            raise SlurmConfError(
                f"{src}: {int((g_req > 0).sum())} jobs request GPUs (first: job "
                f"{int(self.job_id[i])}, {int(g_req[i])} per node) but no NodeName line has "
                "Gres=gpu:N; add the GPUs to slurm.conf (e.g. NodeName=g[0-3] Gres=gpu:4)")
        levels = np.unique(np.concatenate([[0], g_req]))
        self.gres_masks = np.stack([node_gpus >= lv for lv in levels])
        self.jgres = np.searchsorted(levels, g_req)
        self.has_gres = len(levels) > 1
        # usable nodes per (partition, GPU level), then per job: never a jobs x nodes matrix
        # (RICC: 447,794 jobs x 8,192 nodes would be 3.7 GB a boolean matrix)
        per_pair = (self.pmask[:, None, :] & self.gres_masks[None, :, :]).sum(axis=2)
        usable = per_pair[self.jpart, self.jgres]
        return (self.req > usable) & (self.jgres > 0)   # no GPU asked: "too_big" says it

    def _applied_priority(self, cfg: SlurmConfig):
        """The priority parameters that apply, as ``priority_p_init`` (priority_multifactor.c)
        sets them: without ``AccountingStorageType=accounting_storage/slurmdbd`` the age and
        fair-share weights are dropped ("PriorityWeightAge can only be used with SlurmDBD,
        ignoring") and no decay thread recalculates priorities. Records the outcome in
        ``self.priority_applied`` and prints it on one line."""
        prm = cfg.priority
        if prm.type != "priority/multifactor":
            self.priority_applied = f"{prm.type}: FIFO by submit time (job id on ties)"
        elif cfg.with_slurmdbd:
            self.priority_applied = (
                f"priority/multifactor with slurmdbd: age (max {prm.max_age:g} s) and fair-share "
                f"(half-life {prm.decay_half_life:g} s) recalculated every "
                f"PriorityCalcPeriod={prm.calc_period:g} s")
        else:
            dropped = [f"{name} can only be used with SlurmDBD, ignoring" for name, w in
                       (("PriorityWeightAge", prm.weight_age),
                        ("PriorityWeightFairshare", prm.weight_fairshare)) if w]
            prm = replace(prm, weight_age=0, weight_fairshare=0)
            self.priority_applied = (
                "priority/multifactor without slurmdbd (AccountingStorageType="
                f"{cfg.accounting_storage_type}): job size, partition and QOS factors set at "
                "submit, never recalculated" + (f"; {'; '.join(dropped)}" if dropped else ""))
        if getattr(self, "_printed_priority", None) != self.priority_applied:
            print(f"slurm: {self.priority_applied}")      # once, though a fast path binds twice
            self._printed_priority = self.priority_applied
        return prm

    # ================================================================== hooks
    def _touch(self, now: float) -> None:
        self.bf_dirty = True
        self.main_dirty = True
        if self.bf_change is None:
            self.bf_change = now

    def on_submit(self, now: float, job: int) -> str | None:
        self._catch_up(now)
        if self.limits is not None:
            why = self.limits.submit(job)   # rejected (MaxSubmitJobsPerUser...) or never runnable
            if why is not None:
                return why                  # the engine keeps the job out of the queue
        self.n_pending += 1
        self.event_flag = True
        self._touch(now)

    def _count_idle(self) -> None:
        """Recount the idle nodes (``n_idle``) after ``node_end`` changed outside a start."""
        self.n_idle = int(np.count_nonzero(self.node_end == -_INF))

    def on_start(self, now: float, job: int) -> None:
        if job not in self.applied:     # a start we did not decide: mirror it from nothing known
            raise RuntimeError(f"slurm: job index {job} started without a slurm decision")
        if self.rsv is not None:
            self.rsv.on_start(now, job, float(self.tl[job]), self._pre_control)   # killed at End + ResvOverRun

    def on_finish(self, now: float, job: int) -> None:
        self._catch_up(now)
        if self.shared:
            self._tres_finish(job)
        nodes = self.job_nodes.pop(job, None)
        if nodes is not None:
            self.node_end[nodes] = -_INF
            self._count_idle()
        self.run_end.pop(job, None)
        self.job_mask.pop(job, None)
        slot = self.slot_of.pop(job, None)
        if slot is not None:
            self.slot_used[slot] = False
            self.free_slots.append(slot)
        if self.has_qos_limits and job in self.run_start:
            self.running_uq[(int(self.juser[job]), int(self.jqos[job]))] -= 1
            if self.has_tres_limits:
                self._tres_account(job, -1)
        if self.fs is not None:
            st = self.run_start[job]
            d = now - max(st, self.last_tick)
            if d > 0:
                self.fs.add_usage(self.jassoc[job], self.run_units[job] * self.fs.decayed(d))
        self.run_start.pop(job, None)
        self.run_units.pop(job, None)
        self.event_flag = True
        self._touch(now)

    # ------------------------------------------------------------------ node failures (twin.failures)
    # An interrupted job is accounted like a finish (its usage so far counts for fair-share, as
    # in Slurm) and pends again on requeue, keeping its submit time. A failed node is DOWN: Slurm
    # does not know when it returns, so it is neither idle now nor free at any planned time
    # (node_end = +inf) until it is back.
    def on_requeue(self, now: float, job: int) -> None:
        self._catch_up(now)
        if self.limits is not None:
            self.limits.requeued(job)       # waiting again: it holds a submit slot again
        self.applied.discard(job)
        self.prio_calc.size_reset(job)      # batch_requeue_fini: total_cpus = 0
        self.n_pending += 1
        self.event_flag = True
        self._touch(now)

    def on_cancel(self, now: float, job: int) -> None:
        """A pending job was withdrawn (scancel): one pending job less; both passes see the change."""
        self._catch_up(now)
        if self.limits is not None:
            self.limits.left(job)
        self.n_pending -= 1
        self.event_flag = True
        self._touch(now)

    def on_units_down(self, now: float, units: np.ndarray, until: float) -> None:
        self._catch_up(now)
        if self.shared:
            self._tres_nodes_state(units, True)
            self._touch(now)
            return
        self.node_end[np.unique(np.asarray(units) // self.cpn)] = _INF
        self._count_idle()
        self._touch(now)

    def on_units_up(self, now: float, units: np.ndarray) -> None:
        self._catch_up(now)
        if self.shared:
            self._tres_nodes_state(units, False)
            self.event_flag = True
            self._touch(now)
            return
        self.node_end[np.unique(np.asarray(units) // self.cpn)] = -_INF
        self._count_idle()
        self.event_flag = True
        self._touch(now)

    # ================================================================== time keeping
    def _catch_up(self, now: float) -> None:
        """Apply PriorityCalcPeriod ticks <= now (usage decay and accrual) and skipped backfill
        cycles before now."""
        prm = self.cfg.priority
        self._bf_catch_up(now)          # cycles before now saw no change (ticks come at <= now)
        if self.rsv is not None and self.rsv.crossed(now):
            self._touch(now)            # a reservation started or ended: both passes see a change
        if self.pre_on:
            self._preempt_catch_up(now)     # requeued (preempted) jobs that became eligible
        if self.time_varying:
            period = prm.calc_period
            nxt = _grid_next(self.last_tick, period)
            if nxt <= now:
                if self.fs is not None:
                    self._usage_ticks(nxt, now, period)
                k = math.floor(now / period)
                self.last_tick = k * period
                if self.n_pending:
                    self.main_dirty = True
                    self.bf_dirty = True
                    if self.bf_change is None:
                        self.bf_change = self.last_tick

    def _usage_ticks(self, first: float, now: float, period: float) -> None:
        fs = self.fs
        runs = list(self.run_start.items())
        last = self.last_tick
        t = first
        if not runs:
            # no running job: all ticks up to now only decay
            k = math.floor(now / period)
            t_last = k * period
            fs.apply_decay(t_last - last)
            self.fs_factor = fs.factors()
            self.stats["priority_ticks"] += int(round((t_last - last) / period))
            return
        jobs = np.array([j for j, _ in runs], dtype=np.int64)
        starts = np.array([s for _, s in runs])
        units = np.array([self.run_units[j] for j in jobs], dtype=np.float64)
        assoc = self.jassoc[jobs]
        while t <= now:
            fs.apply_decay(t - last)
            d = t - np.maximum(starts, last)
            fs.add_usage(assoc, units * fs.decayed(np.maximum(d, 0.0)))
            last = t
            t += period
            self.stats["priority_ticks"] += 1
        self.fs_factor = fs.factors()

    def _bf_next(self) -> float | None:
        """Time of the next backfill cycle given the thread state (None: none scheduled)."""
        if not self.bf_on:
            return None
        base = self.bf_last + self.cfg.sched.bf_interval
        if self.bf_left_pending:
            return base
        if self.bf_change is not None:
            t = max(base, self.bf_change)
            if t > base:
                t = base + math.ceil((t - base) / self.bf_poll - 1e-9) * self.bf_poll
            return t
        return None

    def _bf_catch_up(self, now: float) -> None:
        """Account for backfill cycles strictly before ``now`` that had nothing new to compute."""
        iv = self.cfg.sched.bf_interval
        while True:
            t = self._bf_next()
            if t is None or t >= now:
                return
            if self.bf_dirty and self.n_pending:
                if self.n_idle == 0 and not self.pre_on:   # (with preemption a cycle may start jobs)
                    # next_wakeup asked for no pass: with no idle node (unchanged since the last
                    # pass) the cycle starts nothing and reserves for no job that could start
                    # now; its outcome is that of a computed cycle without starts
                    self.stats["backfill_passes"] += 1
                    self.bf_dirty = False
                else:
                    # a cycle that had work but got no engine pass (should not happen:
                    # next_wakeup asks for it); counted so tests can check it stays 0
                    self.stats["backfill_cycles_missed"] = \
                        self.stats.get("backfill_cycles_missed", 0) + 1
                    self.stats["backfill_cycles_skipped"] += 1
            else:
                self.stats["backfill_cycles_skipped"] += 1
            self.bf_last = t
            self.bf_change = None
            self.bf_left_pending = self.n_pending > 0
            if self.bf_left_pending and not self.bf_dirty:
                # jump over the whole chain of idle cycles before now
                k = math.floor((now - self.bf_last) / iv)
                if self.bf_last + k * iv >= now:
                    k -= 1
                if k > 0:
                    self.stats["backfill_cycles_skipped"] += k
                    self.bf_last += k * iv

    def next_wakeup(self, now: float) -> float | None:
        if self.n_pending == 0:
            return None
        cands = []
        if self.rsv is not None and (tb := self.rsv.next_boundary(now)) is not None:
            cands.append(tb)            # a reservation starts or ends (slurm_resv)
        if self.bf_on and self.bf_dirty and (self.n_idle > 0 or self.pre_on):
            # (no idle node: the due cycle cannot start a job; `_bf_catch_up` accounts for it
            # at the next event, which any change of the machine is)
            t = self._bf_next()
            if t is not None:
                if t <= now:
                    t = now + self.cfg.sched.bf_interval  # safety: never ask for the past
                cands.append(t)
        if self.main_dirty:
            cands.append(_grid_next(now, self.cfg.sched.sched_interval))
        if self.time_varying:
            # the next PriorityCalcPeriod tick changes priorities (and marks passes dirty)
            cands.append(_grid_next(max(now, self.last_tick), self.cfg.priority.calc_period))
        if self.pre_on and (t := self._preempt_next(now)) is not None:
            cands.append(t)                 # a preempted job's EligibleTime
        return min(cands) if cands else None

    # ================================================================== priority order
    def _order(self, now: float, queue: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pending jobs in Slurm's evaluation order and their priorities."""
        if self.static_order:
            if len(self._ones) < len(queue):
                self._ones = np.ones(2 * len(queue), dtype=np.int64)
            return self._rsv_first(queue, self._ones[:len(queue)])
        # priorities as of the last PriorityCalcPeriod tick; a job submitted since has age 0
        # (its priority was set at submit with the current fair-share values)
        prio = self.prio_calc.compute(max(self.last_tick, 0.0), queue, self.fs_factor)
        keys = (self.job_id[queue], self.submit[queue], -prio, -self.jtier[queue])
        o = np.lexsort(keys)
        return self._rsv_first(queue[o], prio[o])

    # ================================================================== node choice
    def _pick_now(self, cand: np.ndarray, k: int, resv_begin: np.ndarray | None) -> np.ndarray:
        ids = np.flatnonzero(cand)
        if self.node_order == "index" or resv_begin is None or len(ids) == k:
            return ids[:k]
        rb = resv_begin[ids]
        o = np.lexsort((ids, rb))
        return np.sort(ids[o[:k]])

    def _pick_future(self, cand: np.ndarray, k: int, free_at: np.ndarray) -> np.ndarray:
        ids = np.flatnonzero(cand)
        if self.node_order == "index" or len(ids) == k:
            return ids[:k]
        o = np.lexsort((ids, -free_at[ids]))
        return np.sort(ids[o[:k]])

    # ================================================================== start bookkeeping
    def _apply_start(self, now: float, j: int, nodes: np.ndarray,
                     words: np.ndarray | None = None) -> Start:
        self.node_end[nodes] = now + self.est[j]
        self.n_idle -= len(nodes)
        self.job_nodes[j] = nodes
        end = now + float(self.est[j])
        self.run_end[j] = end
        if self.use_kernel:         # the compiled passes read the slots, never job_mask
            slot = self.free_slots.pop()
            self.slot_of[j] = slot
            self.slot_used[slot] = True
            self.slot_end[slot] = end
            self.slot_id[slot] = self.job_id[j]
            self.slot_words[slot] = words if words is not None else self._words_of(nodes)
        else:
            self.job_mask[j] = _to_mask(nodes.tolist())
        self.applied.add(j)
        self.n_pending -= 1
        units = len(nodes) * self.cpn
        self.run_start[j] = now
        self.run_units[j] = units
        if self.has_qos_limits:
            self.running_uq[(int(self.juser[j]), int(self.jqos[j]))] += 1
            if self.has_tres_limits:
                self._tres_account(j, 1)
        p = int(self.jobs.procs[j])
        if self.cpn == 1:
            u = nodes
        else:
            u = (nodes[:, None] * self.cpn + np.arange(self.cpn)[None, :]).ravel()[:p]
        return Start(j, u.astype(np.int64))

    def _qos_blocked(self, j: int) -> bool:
        """Whether QOS limits keep job ``j`` pending now (MaxJobsPerUser, MaxTRESPerUser,
        GrpTRES; with `schedulers.slurm_limits`: QOS GrpJobs, association GrpJobs, MaxJobs, GrpTRES,
        in acct_policy.c's order); the reason is counted once per job in ``pending_reasons``
        (slurmctld's names)."""
        lim = self.jqos_limit[j]
        lims = self.limits
        if lims is not None and j in lims.refused:
            raise SlurmConfError(f"slurm: job {int(self.job_id[j])} was refused at its submission "
                                 f"({lims.reason[j]}) but is queued: a policy wrapping the Slurm-like "
                                 "one must return its on_submit answer (QOS/association submit limits)")
        why = lims.pre(j) if lims is not None else None
        if why is None and lim >= 0 and self.running_uq[(int(self.juser[j]), int(self.jqos[j]))] >= lim:
            why = "QOSMaxJobsPerUserLimit"
        if why is None and lims is not None:
            why = lims.assoc_pre(j)
        if why is None and self.has_tres_limits:
            why = self._tres_blocked(j)
        if why is None and lims is not None:
            why = lims.post(j)
        if why is not None:
            if (j, why) not in self._reason_seen:
                self._reason_seen.add((j, why))
                self.pending_reasons[why] = self.pending_reasons.get(why, 0) + 1
            if lims is not None:
                lims.held(j, why)
            return True
        return False

    # ================================================================== main / event pass
    def _main_pass(self, now: float, order: np.ndarray, depth: int | None) -> tuple[list[Start], bool]:
        """Strict priority pass; returns the starts and whether the whole queue was considered."""
        if self.shared:
            return self._tres_main_pass(now, order, depth)
        sp = self.cfg.sched
        if self.use_kernel:
            if self.n_idle == 0 or (len(self.parts) == 1
                                    and self.req[order[0]] > self.n_idle):
                # no idle node, or one partition whose first job does not fit: the pass stops
                # at its first job (n_idle == 0, or every partition failed) having seen all
                self.last_pass_pos = []
                return [], True
            pos, words, complete, idx, off = self._kern.main_pass(
                self.NN, self.node_end, np.asarray(order, dtype=np.int64),
                -1 if depth is None else int(depth), int(sp.partition_job_depth), self.req,
                self.jpart, self.pm_words, len(self.parts), self.jgres, self.gres_words)
            self.last_pass_pos = pos
            return self._starts_of(now, order, pos, words, idx, off), bool(complete)
        idle = self.node_end == -_INF
        avail = np.ones(self.NN, dtype=bool)
        failed = set()
        starts: list[Start] = []
        per_part: dict[int, int] = defaultdict(int)
        complete = True
        n_idle = int(idle.sum())
        P = len(self.parts)
        self.last_pass_pos = started_pos = []
        rsv = self.rsv
        failed_resv: set[int] = set()
        for pos, j in enumerate(order.tolist()):
            if depth is not None and pos >= depth:
                complete = False
                break
            if len(failed) == P or (n_idle == 0 and not self.pre_on):
                break
            k = int(self.jpart[j])
            if rsv is not None and rsv.jres[j] >= 0:
                if int(rsv.jres[j]) in failed_resv:
                    continue            # _schedule's failed_resv (its partition does not fail)
            elif k in failed:
                continue
            if sp.partition_job_depth:
                if per_part[k] >= sp.partition_job_depth:
                    complete = False
                    continue
                per_part[k] += 1
            if self.has_qos_limits and self._qos_blocked(j):
                continue
            cand = idle & avail & self.pmask[k]
            rmask = None
            if rsv is not None:         # job_test_resv at now (schedulers.slurm_resv)
                rt = rsv.test(j, k, now, float(self.tl[j]), False, now)
                if not rt.ok:           # ESLURM_RESERVATION_NOT_USABLE: its nodes leave the pass
                    if rt.cut:
                        avail &= ~rsv.bool_mask(rt.cut)
                    continue
                if rt.mask != rsv.full:
                    rmask = rsv.bool_mask(rt.mask)
                    cand &= rmask
            if self.has_gres:
                cand &= self.gres_masks[self.jgres[j]]
            need = int(self.req[j])
            if self.pre_on and int(cand.sum()) < need and self._preempt_whole(now, j, k, avail):
                idle = self.node_end == -_INF   # the victims' nodes are idle (on_finish)
                n_idle = int(idle.sum())
                cand = idle & avail & self.pmask[k]
                if self.has_gres:
                    cand &= self.gres_masks[self.jgres[j]]
            if rmask is not None:
                cand &= rmask
            if int(cand.sum()) >= need:
                if self.linear:         # _run_now -> _job_test (select_linear.c)
                    c_int = self._to_int(cand)
                    if self.ps_view is not None:    # powered-down nodes last (slurm_power)
                        c_int = awake_first(c_int, need, asleep_nodes(self))
                    nodes = np.asarray(_bits(job_test(c_int, need)), dtype=np.int64)
                else:
                    nodes = np.flatnonzero(cand)[:need]
                starts.append(self._apply_start(now, j, nodes))
                started_pos.append(pos)
                idle[nodes] = False
                n_idle -= need
            elif rsv is not None and rsv.jres[j] >= 0:
                failed_resv.add(int(rsv.jres[j]))
            else:
                failed.add(k)
                avail &= ~self.pmask[k]
        return starts, complete

    # ================================================================== backfill pass
    def _to_int(self, mask: np.ndarray) -> int:
        """Bool node array -> Python int bitset (bit i = node i)."""
        return int.from_bytes(np.packbits(mask, bitorder="little").tobytes(), "little")

    _low = staticmethod(low_bits)      # the r lowest set bits of a node bitset

    def _bits(self, x: int, k: int | None = None) -> list[int]:
        """Indices of the set bits of ``x`` (lowest first; at most ``k``)."""
        out = []
        while x and (k is None or len(out) < k):
            low = x & -x
            out.append(low.bit_length() - 1)
            x ^= low
        return out

    def _words(self, mask: np.ndarray) -> np.ndarray:
        """Bool node array -> uint64 words (bit i of word w = node 64 w + i)."""
        b = np.zeros(self.W * 64, dtype=bool)
        b[:len(mask)] = mask
        return np.packbits(b, bitorder="little").view("<u8").astype(np.uint64)

    def _words_of(self, nodes: np.ndarray) -> np.ndarray:
        """Node indices -> uint64 words."""
        w = np.zeros(self.W, dtype=np.uint64)
        nodes = np.asarray(nodes, dtype=np.int64)
        np.bitwise_or.at(w, nodes >> 6, np.left_shift(np.uint64(1), (nodes & 63).astype(np.uint64)))
        return w

    def _backfill_compiled(self, now: float, order: np.ndarray, prio: np.ndarray) -> list[Start]:
        """`_backfill` by the compiled cycle (`schedulers.slurm_kernels.bf_cycle`)."""
        sp = self.cfg.sched
        # no job of the queue fits the idle nodes: the cycle would stop at its first job
        # (``n_idle < suffix_min``) with no start and no reservation
        n_idle = self.n_idle
        if n_idle == 0 or n_idle < int(self.req[order].min()):
            return []
        if not sp.bf_min_prio_reserve:
            prio = self._no_prio
        pos, words, n_res, idx, off = self._kern.bf_cycle(
            float(now), float(sp.bf_resolution), float(sp.bf_window), int(sp.bf_max_job_test),
            int(sp.bf_job_part_count_reserve), int(sp.bf_max_job_start),
            int(sp.bf_min_prio_reserve), float(sp.bf_min_age_reserve), int(self.NN),
            self.node_end, self.slot_used, self.slot_end, self.slot_id, self.slot_words,
            np.asarray(order, dtype=np.int64), self.req, self.tl, self.est, self.jpart,
            np.asarray(prio, dtype=np.float64), self.submit, self.job_id, self.pm_words,
            len(self.parts), self.jgres, self.gres_words)
        self.stats["reservations"] += int(n_res)
        return self._starts_of(now, order, pos, words, idx, off)

    def _starts_of(self, now: float, order: np.ndarray, pos: np.ndarray, words: np.ndarray,
                   idx: np.ndarray, off: np.ndarray) -> list[Start]:
        """Apply a compiled pass's starts: queue positions ``pos`` on the node words ``words``
        (node indices ``idx[off[q]:off[q + 1]]``)."""
        starts: list[Start] = []
        for q in range(len(pos)):
            starts.append(self._apply_start(now, int(order[pos[q]]), idx[off[q]:off[q + 1]],
                                            words[q]))
        return starts

    def _backfill(self, now: float, order: np.ndarray, prio: np.ndarray) -> list[Start]:
        """One ``_attempt_backfill`` cycle (see the module docstring). Node sets are Python int
        bitsets; the map is the availability profile's node-set form
        (`schedulers.profile.NodeSpaceMap`)."""
        if not len(order):      # nothing left to test (jobs twin.dependencies hides still count as pending)
            return []
        if self.use_kernel:
            return self._backfill_compiled(now, order, prio)
        if self.shared:
            return self._tres_backfill(now, order, prio)
        sp = self.cfg.sched
        res = sp.bf_resolution
        begin0 = math.floor(now / res) * res
        window_end = math.floor((now + sp.bf_window) / res) * res
        # the backfill map: the node-set form of the availability profile (schedulers.profile)
        nsm = NodeSpaceMap(begin0, window_end, res, (1 << self.NN) - 1)
        # running jobs in will-run order (select/linear: one at a time, `RunningSet`;
        # cons_tres/cons_res: grouped by end time, `GroupedRunning`)
        idle = self._to_int(self.node_end == -_INF)
        jm = self.job_mask
        jid = self.job_id
        running = [(e, int(jid[j]), jm[j]) for j, e in self.run_end.items()]
        if self.linear:
            rs = RunningSet(idle, running)
        else:
            rs = GroupedRunning(now, idle, running)
        n_idle = idle.bit_count()
        pm_int = [self._to_int(r) for r in self.pmask]
        gm_int = [self._to_int(r) for r in self.gres_masks]
        req = self.req
        tl = self.tl
        rsv = self.rsv                  # advance reservations (schedulers.slurm_resv) or None
        starts: list[Start] = []
        test_cnt = 0
        start_cnt = 0
        part_resv: dict[int, int] = defaultdict(int)
        part_test: dict[int, int] = defaultdict(int)
        user_test: dict[int, int] = defaultdict(int)
        order_l = order.tolist()
        nq = len(order_l)
        rq = req[order]
        suffix_min = np.minimum.accumulate(rq[::-1])[::-1] if nq else rq
        rtl = tl[order]
        ns_b = nsm.begins            # the map's record begins (read only here)
        add_resv = nsm.add_reservation

        def anyone_fits(pos: int) -> bool:
            """Can any job after ``pos`` still start now? (exact upper bound: idle nodes whose
            first reservation begins after the job's end)."""
            if pos + 1 >= nq:
                return False
            rb_t, rb_c = nsm.first_reserved(idle)
            if not rb_t:
                return bool((rq[pos + 1:] <= n_idle).any())
            cum = np.cumsum(rb_c)
            # nodes usable by a job of length L: idle nodes with first reservation > now + L
            k = np.searchsorted(np.asarray(rb_t), now + rtl[pos + 1:], side="right")
            usable = n_idle - np.where(k > 0, cum[np.maximum(k - 1, 0)], 0)
            return bool((rq[pos + 1:] <= usable).any())

        pos = -1
        while pos + 1 < nq:
            pos += 1
            j = order_l[pos]
            if test_cnt >= sp.bf_max_job_test:
                break
            if n_idle < suffix_min[pos] and not self.pre_on:    # (a preemptor needs no idle node)
                break
            if self.has_qos_limits and self._qos_blocked(j):
                continue
            k = int(self.jpart[j])
            if sp.bf_max_job_part:
                if part_test[k] >= sp.bf_max_job_part:
                    continue
                part_test[k] += 1
            if sp.bf_max_job_user:
                u = int(self.juser[j])
                if user_test[u] >= sp.bf_max_job_user:
                    continue
                user_test[u] += 1
            no_reserve = False
            if sp.bf_min_prio_reserve and prio[pos] < sp.bf_min_prio_reserve:
                no_reserve = True
            elif sp.bf_min_age_reserve and now - self.submit[j] < sp.bf_min_age_reserve:
                no_reserve = True
            if sp.bf_job_part_count_reserve and part_resv[k] >= sp.bf_job_part_count_reserve:
                no_reserve = True
            tlj = float(tl[j])
            need = int(req[j])
            pm = pm_int[k]
            gm = gm_int[self.jgres[j]]
            counted = False
            later = now
            touched_idle = False
            # earliest time enough of the partition's nodes are free, ignoring reservations: a
            # lower bound of every will-run start of this job
            t_min = self._earliest(rs, pm & gm, need, now)
            pmj = pm
            rt = None
            for _attempt in range(len(ns_b) + 8 + (2 * len(rsv.resv) + 2 if rsv is not None else 0)):
                start_res = later
                later = 0.0
                if rsv is not None:     # job_test_resv(move_time=true): defer, move, fewer nodes
                    rt = rsv.test(j, k, start_res, tlj, True, now)
                    if not rt.ok:
                        break           # "reservation defer"
                    start_res = rt.when
                    pmj = pm & rt.mask
                if window_end < start_res:
                    break
                end_time = start_res + tlj
                # records overlapping [start_res, end_time] (begin <= end_time, inclusive as in
                # backfill.c); later_start = end of the first one after which the map frees
                # nodes of this partition (or, failing that, the end of the record after the
                # first one beyond the job's end)
                acc, i, later = nsm.walk(pmj, start_res, end_time,
                                         t_min if counted and rt is None else -_INF)
                nb = len(ns_b)
                if rt is not None:      # later_start as backfill.c: map, then find_resv_end + 1
                    if not later and i + 3 < nb:
                        later = ns_b[i + 3]
                    later = rsv.later(rt, later, res, window_end, now)
                elif counted and later and later < t_min:
                    # exact shortcut: the will-run start is >= t_min > later_start, so Slurm would
                    # retry at later_start whatever the rest of the map says
                    continue
                avail = acc
                if not later and i + 3 < nb:
                    later = ns_b[i + 3]
                if avail.bit_count() < need:
                    if later and not no_reserve:
                        continue
                    break
                if not counted:
                    test_cnt += 1
                    counted = True
                # will-run (select plugin): earliest start on the available nodes, and where
                ag = avail & gm          # nodes the select plugin keeps (gres/gpu)
                wr = self._will_run(rs, ag, need, now)
                if self.pre_on and (wr is None or wr[0] > now):    # _try_sched with preemptee candidates
                    rs, wr = self._preempt_bf_whole(now, j, k, rs, ag, need, start_res, wr)
                    idle, n_idle = rs.idle, rs.idle.bit_count()
                if wr is None:          # not runnable on these nodes (only with gres/gpu)
                    if later and not no_reserve:
                        continue
                    break
                start = max(start_res, wr[0])
                if start <= now:
                    if self.linear:     # _run_now -> _job_test on the idle available nodes
                        nodes = job_test(wr[1] if self.ps_view is None
                                         else awake_first(wr[1], need, asleep_nodes(self)), need)
                        nodes_l = _bits(nodes)
                    else:
                        nodes_l = self._choose_now(ag & rs.idle, need, nsm.avail)
                        nodes = _to_mask(nodes_l)
                    arr = np.asarray(nodes_l, dtype=np.int64)
                    starts.append(self._apply_start(now, j, arr))
                    n_idle -= need
                    rs.start(now + float(self.est[j]), int(jid[j]), nodes)
                    idle = rs.idle
                    # _bf_reserve_running: end floored to bf_resolution (22.05); not a preemptable job
                    if not (self.pre_on and self._pre_preemptable(j)):
                        add_resv(begin0, math.floor((now + tlj) / res) * res, nodes)
                    start_cnt += 1
                    touched_idle = True
                    if sp.bf_max_job_start and start_cnt >= sp.bf_max_job_start:
                        pos = nq
                    break
                if no_reserve:
                    break
                if later and start > later:
                    continue
                st_slot = math.floor(start / res) * res
                en_slot = math.floor((start + tlj) / res) * res   # end_reserve floored (22.05)
                nodes = (job_test(wr[1], need) if self.linear
                         else self._choose_future(ag, need, wr[1], rs.C, rs.G))
                if not nsm.fits(st_slot, en_slot, nodes):
                    later = start + (res if start_res == start else 0.0)
                    continue
                if start > now + sp.bf_window:
                    break
                if sp.bf_job_part_count_reserve and part_resv[k] >= sp.bf_job_part_count_reserve:
                    break
                part_resv[k] += 1
                add_resv(st_slot, en_slot, nodes)
                self.stats["reservations"] += 1
                if nodes & idle:
                    touched_idle = True
                break
            if touched_idle and n_idle and not self.pre_on and not anyone_fits(pos):
                break
        return starts

    def _earliest(self, rs, pm: int, need: int, now: float) -> float:
        """Will-run start of a ``need``-node job on the partition nodes ``pm`` ignoring the
        backfill map: a lower bound of every will-run start of the job in this cycle."""
        if self.linear:
            return rs.earliest(pm, need, now)
        m = rs.first_free(pm, need)
        return rs.T[m] if m < len(rs.T) else _INF

    def _will_run(self, rs, avail: int, need: int, now: float) -> tuple[float, int] | None:
        """The select plugin's will-run test on ``avail``: (start, the free nodes ``_job_test``
        chooses from) under select/linear (``_will_run_test``), (start, index m of the end group)
        under cons_tres; None if the job can never run on ``avail``."""
        if self.linear:
            return rs.will_run_at(avail, need, now)
        m = rs.first_free(avail, need)
        return (rs.T[m], m) if m < len(rs.T) else None

    def _choose_now(self, cand: int, need: int, ns_av: list) -> list[int]:
        """Nodes for a job starting now: ``time-fit`` takes the candidates whose next reservation
        begins soonest (keeping unreserved nodes for longer jobs; ``ns_av`` the backfill map's
        available node sets, `NodeSpaceMap.avail`), ``index`` the lowest ids."""
        if self.node_order == "index" or cand.bit_count() == need:
            return self._bits(self._low(cand, need))
        out = 0
        left = cand
        r = need
        for i in range(1, len(ns_av)):
            hit = left & ~ns_av[i]
            if hit:
                take = self._low(hit, r)
                out |= take
                left &= ~take
                r -= take.bit_count()
                if r == 0:
                    break
        if r:
            out |= self._low(left, r)
        return self._bits(out)

    def _choose_future(self, avail: int, need: int, m: int, C: list, G: list) -> int:
        """Node bitset for a reservation starting at T[m]: ``time-fit`` takes the nodes that
        become free latest (busy now first), ``index`` the lowest ids among those free by then."""
        if self.node_order == "index":
            return self._low(avail & C[m], need)
        out = 0
        left = need
        for q in range(m, -1, -1):
            grp = avail & G[q]
            if grp:
                take = self._low(grp, left)
                out |= take
                left -= take.bit_count()
                if left == 0:
                    break
        return out

    # ================================================================== the pass
    def schedule(self, now: float, queue: np.ndarray, cluster: ClusterView) -> list[Start]:
        self._catch_up(now)
        if self.rsv is not None:
            self.rsv.check_pending(now, queue, self.job_id)   # a job whose reservation ended
        if self.pre_on:
            queue = self._preempt_visible(now, queue)   # requeued jobs wait for their EligibleTime
        if len(queue) == 0:
            return []
        sp = self.cfg.sched
        out: list[Start] = []
        order = prio = None
        full_due = self.main_dirty and (now % sp.sched_interval == 0)
        if full_due or self.event_flag:
            order, prio = self._order(now, queue)
            depth = None if full_due else sp.default_queue_depth
            st, complete = self._main_pass(now, order, depth)
            self.stats["main_passes" if full_due else "event_passes"] += 1
            self.stats["main_starts"] += len(st)
            out += st
            if complete:
                self.main_dirty = False
            if full_due:
                self.last_full = now
            self.event_flag = False
            if st:
                # our own starts are job updates for the backfill thread, not for the strict
                # pass (re-running it would block at the same job)
                self.bf_dirty = True
                if self.bf_change is None:
                    self.bf_change = now
        if self.bf_on:
            t = self._bf_next()
            if t is not None and t <= now:
                if self.bf_dirty and self.n_pending:
                    if order is None:
                        order, prio = self._order(now, queue)
                    if out:             # the pass's own starts leave the queue
                        keep = np.ones(len(order), dtype=bool)
                        keep[self.last_pass_pos] = False
                        order, prio = order[keep], prio[keep]
                    bst = self._backfill(now, order, prio)
                    self.stats["backfill_passes"] += 1
                    self.stats["backfill_starts"] += len(bst)
                    out += bst
                    self.bf_dirty = bool(bst)   # own starts are job updates (Slurm)
                else:
                    self.stats["backfill_cycles_skipped"] += 1
                self.bf_last = now
                self.bf_change = now if self.bf_dirty else None
                self.bf_left_pending = self.n_pending > 0
        return out

    # ================================================================== per-job columns
    def job_columns(self) -> dict[str, np.ndarray]:
        """Extra ``jobs.csv`` columns (`twin.results.jobs_frame` asks every policy that has this
        method): under node sharing the GPUs and memory each job got (``gpus_alloc``,
        ``mem_alloc_mb``: `schedulers.slurm_tres.alloc_columns`); with `schedulers.slurm_limits`
        limits ``limit_reason`` and ``limit_rejected``. Other runs: none (their tables unchanged)."""
        out: dict[str, np.ndarray] = {}
        if getattr(self, "shared", False) and getattr(self, "led", None) is not None:
            from .slurm_tres import alloc_columns  # noqa: PLC0415
            out.update(alloc_columns(self.led.record or {}, self.n, self.cfg.node_names or None,
                                     self.tm.mem_tracked))
        if getattr(self, "limits", None) is not None:
            out.update(self.limits.job_columns())
        if getattr(self, "rsv", None) is not None and (col := self.rsv.kill_column(self.n)) is not None:
            out["resv_kill_at"] = col          # the end of its reservation ends the job then (s)
        return out

    # ================================================================== description
    def describe(self) -> dict:
        d = {"name": self.name, "node_order": self.node_order, "bf_poll": self.bf_poll,
             "cpus_per_node": self.cpn, "accounts": self.accounts.path if self.accounts else None}
        d.update(self.cfg.describe())
        d["notes"] = list(self.notes)
        if getattr(self, "unit_kind", "cpu") != ("cpu" if self.cpn_conf > 1 else "node"):
            d["units"] = (f"{self.unit_kind} ({self.cpn} per node)" if self.cpn else
                          "cpu (NodeName CPUs of each node)")
        d["priority_applied"] = getattr(self, "priority_applied", None)
        if self.linear:
            d["select"] = ("select/linear: _job_test consecutive best fit, _will_run_test removing "
                           "running jobs one at a time (as Slurm 22.05)")
        elif getattr(self, "shared", False):
            d["select"] = (f"{self.cfg.select_type} ({self.cfg.select_params}): jobs share nodes by "
                           "cores, GPUs" + (", memory" if self.cfg.memory_tracked else "")
                           + "; _eval_nodes weight/consecutive-set best fit, _will_run_test end "
                           f"groups from {self.cons_window:g} s (as Slurm 22.05)")
        else:
            d["select"] = (f"{self.cfg.select_type}: approximated (best effort): whole nodes, "
                           f"node_order={self.node_order}, exact earliest will-run time")
        line = not_modelled_line(self.cfg)
        if line:
            d["warning"] = line
        d["stats"] = dict(self.stats)
        if getattr(self, "rsv", None) is not None:
            d["reservations"] = self.rsv.describe()
            d["reservations_overrun"] = len(self.rsv.overrun)
            d["resv_over_run_s"] = self.rsv.over_run
        if (pre := self._preempt_describe()) is not None:
            d["preemption"] = pre
        if getattr(self, "pending_reasons", None):
            d["pending_reasons"] = dict(self.pending_reasons)
        if getattr(self, "limits", None) is not None:     # schedulers.slurm_limits
            d.update(self.limits.describe())
        if getattr(self, "shared", False) and self.tm.mem_tracked:   # RealMemory per node (mem_alloc_mb's)
            names = self.cfg.node_names or [str(i) for i in range(self.tm.n)]
            d["real_memory_mb"] = {nm: float(mb) for nm, mb in zip(names, self.tm.mem)}
        d["engine"] = ("compiled whole-run replay (schedulers.slurm_replay)"
                       if getattr(self, "replayed", False) else "general engine")
        d["simplifications"] = [
            "passes take no time (bf_continue, bf_max_time, bf_yield_interval, max_sched_time "
            "cannot change a decision)",
            "planning limit = estimate (requested time by default), in seconds",
            "will-run start is exact (no 30 s grouping of running-job ends)",
            ("node choice: select/linear (_job_test, _will_run_test)" if self.linear else
             f"node choice: {self.cfg.select_type} sharing nodes (_eval_nodes, _will_run_test)"
             if getattr(self, "shared", False) else
             f"node choice: {self.cfg.select_type} approximated, node_order={self.node_order}")
            + "; no topology, node weights, features; GRES: gres/gpu only",
            "no SUSPEND/GANG preemption, nice, TRES/assoc factors; advance reservations: "
            "jobs of a reservation are killed at the first 30 s job_time_limit check after its end + "
            "ResvOverRun (checks at t = 0, 30, ... of the log clock)",
        ]
        return d


def make_slurm_scheduler(conf_path: str | None, options: dict | None) -> SlurmScheduler:
    """Build the Slurm-like scheduler from a slurm.conf-style file (or None) and run options.

    Options: any slurm.conf key or SchedulerParameters name (overrides the file), plus
    ``accounts`` (path of the accounts TOML file), ``cpus_per_node``, ``node_order``
    (``time-fit``/``index``) and ``bf_poll`` (s). Unknown keys are reported once as ignored.
    """
    options = dict(options or {})
    cfg = load_slurm_conf(conf_path) if conf_path else SlurmConfig()
    cfg = apply_options(cfg, options)
    report_ignored(cfg)
    acc = options.get("accounts")
    accounts = load_accounts(acc) if acc else None
    cpn = options.get("cpus_per_node")
    return SlurmScheduler(cfg, accounts=accounts,
                          cpus_per_node=int(cpn) if cpn is not None else None,
                          node_order=str(options.get("node_order", "time-fit")),
                          bf_poll=float(options.get("bf_poll", 1.0)),
                          compiled=_flag(options.get("compiled", True)),
                          time_limit_minutes=_flag(options.get("time_limit_minutes", False)),
                          replay=_replay_mode(options.get("replay", "auto")),
                          partition_map=_partition_map(options.get("partition_map")),
                          cons_tres_window=float(options.get("cons_tres_window", WILL_RUN_WINDOW)),
                          log_start=parse_log_start(options.get("log_start")),
                          reservations=resv_options(options))


def _factorize_codes(x: np.ndarray) -> tuple[list, np.ndarray]:
    """Distinct values of the int array ``x`` in order of first appearance, and each element's
    index among them (what a dict filled element by element gives)."""
    x = np.asarray(x, dtype=np.int64)
    if len(x) == 0:
        return [], np.zeros(0, dtype=np.int64)
    u, first, inv = np.unique(x, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(u), dtype=np.int64)
    rank[order] = np.arange(len(u))
    return u[order].tolist(), rank[inv.reshape(-1)]


def _factorize(labels: list) -> tuple[list, np.ndarray]:
    """Distinct labels in order of first appearance, and each element's index among them."""
    idx: dict = {}
    codes = np.fromiter((idx.setdefault(x, len(idx)) for x in labels), dtype=np.int64,
                        count=len(labels))
    return list(idx), codes


def _int_labels(x, missing: str) -> tuple[list, np.ndarray]:
    """Labels ``str(int(v))`` of a numeric column (``missing`` for v < 0 or NaN), distinct in
    order of first appearance, and each element's index among them."""
    a = np.asarray(x)
    a = np.where(a >= 0, a, -1).astype(np.int64)
    vals, codes = _factorize_codes(a)
    return [str(v) if v >= 0 else missing for v in vals], codes


def _partition_map(v) -> dict[int, str] | None:
    """The ``partition_map`` option: ``"1=gpu,2=cpu"`` (or a {number: name} table) -> {1: "gpu", ...};
    None when not given. A malformed item is a `SlurmConfError` naming it."""
    if v is None or v == "":
        return None
    items = list(v.items()) if isinstance(v, dict) else [
        tuple(x.split("=", 1)) if "=" in x else (x, "") for x in (y.strip() for y in str(v).split(",")) if x]
    out: dict[int, str] = {}
    for k, name in items:
        ks = str(k).strip()
        name = str(name).strip()
        if not ks.lstrip("-").isdigit() or not name:
            raise SlurmConfError(f"options: partition_map item {ks}={name!r}: expected NUMBER=NAME "
                                 "(e.g. partition_map=\"1=gpu,2=cpu\")")
        if int(ks) in out:
            raise SlurmConfError(f"options: partition_map: number {ks} given twice")
        out[int(ks)] = name
    return out


def _replay_mode(v) -> str:
    """The ``replay`` option: ``auto`` (the compiled whole-run replay from
    `schedulers.slurm_replay.MIN_JOBS` jobs), ``on``/true or ``off``/false."""
    if isinstance(v, str) and v.strip().lower() == "auto":
        return "auto"
    return "on" if _flag(v) else "off"


def _flag(v) -> bool:
    """An option's true/false value (bool, 0/1, yes/no, true/false)."""
    if isinstance(v, str):
        if v.strip().lower() in ("1", "yes", "true", "on"):
            return True
        if v.strip().lower() in ("0", "no", "false", "off"):
            return False
        raise SlurmConfError(f"options: expected true/false, got {v!r}")
    return bool(v)


def _conformance_variants() -> dict[str, dict]:
    """Every SelectType x priority type x ``bf_job_part_count_reserve`` (0: every tested job
    reserves, 1: only the top job, EASY-like), plus the builtin scheduler, a tight backfill
    configuration and whole nodes of 2 CPUs."""
    prio = {
        "basic": {"PriorityType": "priority/basic"},
        "multifactor+slurmdbd": {"PriorityType": "priority/multifactor",
                                 "AccountingStorageType": "accounting_storage/slurmdbd",
                                 "PriorityWeightAge": 1000, "PriorityWeightFairshare": 10000,
                                 "PriorityWeightJobSize": 1000, "PriorityCalcPeriod": 5},
    }
    out: dict[str, dict] = {}
    for sel in ("select/linear", "select/cons_tres", "select/cons_res"):
        for pname, popts in prio.items():
            for reserve in (0, 1):
                out[f"slurm[{sel},{pname},bf_job_part_count_reserve={reserve}]"] = {
                    "SelectType": sel, **popts, "bf_job_part_count_reserve": reserve}
    out["slurm[multifactor without slurmdbd]"] = {"PriorityType": "priority/multifactor",
                                                  "PriorityWeightAge": 1000,
                                                  "PriorityWeightJobSize": 1000}
    out["slurm[sched/builtin]"] = {"SchedulerType": "sched/builtin"}
    out["slurm[tight-backfill]"] = {
        "bf_interval": 7, "bf_resolution": 60, "bf_window": 1, "bf_max_job_test": 2,
        "bf_job_part_count_reserve": 2, "default_queue_depth": 1, "SelectType": "select/cons_tres",
        "node_order": "index", "PriorityType": "priority/multifactor",
        "AccountingStorageType": "accounting_storage/slurmdbd", "PriorityWeightAge": 1000,
        "PriorityWeightJobSize": 1000, "PriorityWeightFairshare": 10000, "PriorityCalcPeriod": 5,
        "PriorityFlags": "NO_FAIR_TREE"}
    # select/cons_tres sharing nodes by cores (16 units = 8 nodes x 2 CPUs; schedulers.slurm_tres):
    # the engine's unit check guards cores, the ledger refuses a GPU or memory given twice
    for reserve in (0, 1):
        out[f"slurm[select/cons_tres shared,cpus_per_node=2,bf_job_part_count_reserve={reserve}]"] = {
            "SelectType": "select/cons_tres", "SelectTypeParameters": "CR_Core", "cpus_per_node": 2,
            "bf_job_part_count_reserve": reserve, "PriorityType": "priority/multifactor",
            "AccountingStorageType": "accounting_storage/slurmdbd", "PriorityWeightAge": 1000,
            "PriorityWeightJobSize": 1000, "PriorityCalcPeriod": 5}
    # memory consumable (CR_Core_Memory, RealMemory 1 MB a node, no --mem: a job holds all of it):
    # the tres_exclusive check reads mem_alloc_mb against RealMemory
    out["slurm[select/cons_tres shared,CR_Core_Memory,cpus_per_node=2]"] = {
        "SelectType": "select/cons_tres", "SelectTypeParameters": "CR_Core_Memory", "cpus_per_node": 2}
    out["slurm[cpus_per_node=2]"] = {"cpus_per_node": 2, "bf_job_part_count_reserve": 1,
                                     "PriorityType": "priority/multifactor",
                                     "AccountingStorageType": "accounting_storage/slurmdbd",
                                     "PriorityWeightFairshare": 10000}
    return out


#: Slurm-like configurations the conformance suite (`schedulers.checks`) runs, by label
CONFORMANCE_VARIANTS: dict[str, dict] = _conformance_variants()
#: the same configurations as a list of scheduler-option dicts
CONFORMANCE_CONFIGS: list[dict] = list(CONFORMANCE_VARIANTS.values())
