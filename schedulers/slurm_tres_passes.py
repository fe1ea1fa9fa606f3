"""The Slurm-like policy's passes when jobs share nodes (``select/cons_tres`` / ``cons_res`` on a
machine counted in CPUs): bind-time requests, the main/event pass and the backfill cycle over
`schedulers.slurm_tres` (per-node cores, GPUs, memory). A mixin of
`schedulers.slurm.SlurmScheduler`; the whole-node passes stay in ``slurm.py`` unchanged.

Requests (workload columns, per job; names as in the sacct reader and the slurm-lab traces):

* ``req_nodes`` (or ``nodes``, or sacct's ``nnodes``): ``-N``. Without it the job gives only a CPU
  count (SWF ``procs``, ``sbatch -n``): any node count, as cons_tres spreads ``-n`` tasks.
* ``cpus_per_node`` (or ``cores_per_node``, ``ntasks_per_node`` x ``cpus_per_task``): CPUs per
  node; default ``procs / req_nodes``. ``procs`` (the engine units) must be ``req_nodes x
  cpus_per_node``: a mismatch is an error naming the job.
* ``gpus_per_node`` (sacct: ReqTRES ``gres/gpu`` / NNodes, so ``--gpus`` totals count per node;
  the ``gpus`` column is the GPU allocation's, not read here).
* ``mem_per_node`` (or ``mem_mb``; MB), ``mem_per_cpu`` (MB); otherwise the partition's, then
  slurm.conf's ``DefMemPerCPU`` / ``DefMemPerNode``; otherwise all of a node's ``RealMemory``
  (only read with ``CR_Core_Memory`` / ``CR_CPU_Memory``).
* ``exclusive`` (true/false, 1/0): ``--exclusive`` whole nodes; a partition with
  ``OverSubscribe=EXCLUSIVE`` makes all its jobs whole-node.
"""
from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from .base import Start
from .slurm_conf import SlurmConfError
from .slurm_power import tres_weights
from .slurm_tres import WILL_RUN_WINDOW, Ledger, TresJobs, TresMachine, eval_nodes, will_run

_INF = math.inf


def _col(cols: dict, *names: str):
    """The first of the columns ``names`` present in ``cols`` (or None)."""
    for nm in names:
        if nm in cols and cols[nm] is not None:
            return cols[nm]
    return None


def _num(x, n: int, default: float = 0.0) -> np.ndarray:
    """A numeric column as float64 (NaN and negatives -> ``default``)."""
    if x is None:
        return np.full(n, default, dtype=np.float64)
    a = np.asarray(x, dtype=np.float64)
    return np.where(np.isfinite(a) & (a >= 0), a, default)


def _bools(x, n: int) -> np.ndarray:
    """A true/false column (bool, 0/1, yes/no) as bool."""
    if x is None:
        return np.zeros(n, dtype=bool)
    out = np.zeros(n, dtype=bool)
    for i, v in enumerate(x):
        if isinstance(v, str):
            out[i] = v.strip().lower() in ("1", "true", "yes", "y", "exclusive")
        else:
            out[i] = bool(v) and not (isinstance(v, float) and math.isnan(v))
    return out


class BackfillMap:
    """backfill.c's ``node_space`` map as 22.05 keeps it, for the cons_tres cycle: a linked list of
    records [begin, end) (s) with the nodes still available in each (bitsets), record 0 first.

    `reserve` is ``_add_reservation`` (a record split at the start and at the end, the nodes taken
    from every record between, then *one* pair of neighbouring records with the same nodes merged,
    scanning from the record before the start's to the record after the end's: "Drop records with
    identical bitmaps (up to one record)"; a reservation starting at the map's origin leaves an empty
    record 0 in front), `scan` the map loop of ``_attempt_backfill`` (the nodes free over a job's
    window and ``later_start``), `overlap` ``_test_resv_overlap``. The whole-node passes keep
    `schedulers.profile_nodeset.NodeSpaceMap` (no merge; their ``later_start`` rule is their own)."""

    __slots__ = ("begin", "end", "avail", "nxt", "res")

    def __init__(self, begin0: float, window_end: float, res: float, full: int):
        self.begin = [float(begin0)]
        self.end = [float(window_end)]
        self.avail = [int(full)]
        self.nxt = [0]
        self.res = float(res)

    def __len__(self) -> int:
        """Records ever made (``node_space_recs``; merged ones included)."""
        return len(self.begin)

    def _split(self, j: int, t: float) -> int:
        """Insert a record [t, end of j) after record j (same nodes); j ends at t. Returns it."""
        i = len(self.begin)
        self.begin.append(t)
        self.end.append(self.end[j])
        self.avail.append(self.avail[j])
        self.nxt.append(self.nxt[j])
        self.end[j] = t
        self.nxt[j] = i
        return i

    def reserve(self, start: float, end_reserve: float, nodes: int) -> None:
        """``_add_reservation``: ``nodes`` (bitset) leave every record over [start, end_reserve) (s;
        start at least the map's origin, at least one ``bf_resolution`` slot long)."""
        b, e, av, nx = self.begin, self.end, self.avail, self.nxt
        start = max(float(start), b[0])
        end_reserve = max(float(end_reserve), start + self.res)
        placed, one_before, one_after = False, 0, -1
        j = 0
        while True:
            if e[j] > start:                # insert start entry record
                self._split(j, start)
                placed = True
                break
            if e[j] == start:               # no need to insert a start entry record
                placed = True
                break
            one_before = j
            j = nx[j]
            if j == 0:
                break
        while placed:
            j = nx[j]
            if j == 0:
                break
            if end_reserve < e[j]:          # insert end entry record
                self._split(j, end_reserve)
            av[j] &= ~nodes
            if end_reserve == e[j]:
                if nx[j]:
                    one_after = nx[j]
                break
        i = one_before                      # drop records with identical bitmaps (up to one record)
        while i != one_after:
            j = nx[i]
            if j == 0:
                break
            if av[i] != av[j]:
                i = j
                continue
            e[i] = e[j]
            nx[i] = nx[j]
            break

    def scan(self, part: int, start_res: float, end_time: float) -> tuple[int, float]:
        """``_attempt_backfill``'s map loop for a job over [start_res, end_time] (s) on the nodes
        ``part`` (``tmp_bitmap``): (the nodes free in every record with ``end > start_res`` and
        ``begin <= end_time``, ``later_start``). ``later_start`` (0.0: none) is the end of the first
        record (``end > start_res``) whose successor holds a node of ``part`` that the nodes so far
        and the record lack (``!bit_super_set(next_bitmap, current_bitmap)``); the test comes before
        the loop's ``begin_time <= end_time`` break, so the first record past the window takes it too."""
        b, e, av, nx = self.begin, self.end, self.avail, self.nxt
        avail = part
        later = 0.0
        j = 0
        while True:
            if e[j] > start_res and nx[j] and not later:
                if part & av[nx[j]] & ~(avail & av[j]):
                    later = e[j]
            if e[j] <= start_res:
                pass
            elif b[j] <= end_time:
                avail &= av[j]
            else:
                break
            j = nx[j]
            if j == 0:
                break
        return avail, later

    def overlap(self, nodes: int, start: float, end_reserve: float) -> bool:
        """``_test_resv_overlap``: does a record over (start, end_reserve) (``end > start`` and
        ``begin < end_reserve``) lack one of ``nodes``?"""
        b, e, av, nx = self.begin, self.end, self.avail, self.nxt
        j = 0
        while True:
            if e[j] > start and b[j] < end_reserve and nodes & ~av[j]:
                return True
            j = nx[j]
            if j == 0:
                return False

    def records(self) -> list[tuple[float, float, int]]:
        """(begin, end, nodes) of every record in list order (for tests and debugging)."""
        out, j = [], 0
        while True:
            out.append((self.begin[j], self.end[j], self.avail[j]))
            j = self.nxt[j]
            if j == 0:
                return out


class TresPasses:
    """Per-node resource scheduling of `SlurmScheduler` (see the module docstring)."""

    #: when a list: every backfill start and reservation is appended as (job index, "start" or
    #: "resv", start s, end_reserve s (floored to bf_resolution), node bitset): backfill.c's
    #: ``_dump_job_sched`` lines, for `benchmarks/slurm_truth_plans.py`; None (default): nothing kept
    plan_log: list | None = None

    # ------------------------------------------------------------------ bind
    def _all_whole(self, cols: dict, jpart: np.ndarray) -> bool:
        """Whether every job holds whole nodes (``exclusive`` column, or its partition has
        ``OverSubscribe=EXCLUSIVE``): no node can be shared, the whole-node passes apply."""
        n = len(jpart)
        excl = _bools(_col(cols, "exclusive"), n)
        for k, p in enumerate(self.parts):
            if p.oversubscribe == "EXCLUSIVE":
                excl |= jpart == k
        return bool(excl.all())

    def _tres_machine(self, NN: int) -> TresMachine:
        """Nodes of the run: slurm.conf NodeName lines, or NN identical nodes of ``cpn`` CPUs."""
        cfg = self.cfg
        if cfg.node_names:
            N = len(cfg.node_names)
            cores = cfg.node_cpus or [self.cpn] * N
            gpus = cfg.node_gpus or [0] * N
            mem = cfg.node_mem or [1.0] * N
            weight = cfg.node_weight or [1] * N
        else:
            cores, gpus, mem, weight = [self.cpn] * NN, [0] * NN, [1.0] * NN, [1] * NN
        return TresMachine.build(cores, gpus, mem, weight, cfg.memory_tracked)

    def _tres_requests(self, jobs, cols: dict, jpart: np.ndarray, src: str) -> TresJobs:
        """Each job's request from the workload columns (module docstring); a contradiction is a
        `SlurmConfError` naming the job."""
        n = len(jobs)
        procs = np.asarray(jobs.procs, dtype=np.int64)
        rn = _col(cols, "req_nodes", "nodes", "nnodes")
        nodes = _num(rn, n).astype(np.int64)
        cpn_c = _col(cols, "cpus_per_node", "cores_per_node")
        if cpn_c is None and "ntasks_per_node" in cols:
            cpn_c = _num(cols["ntasks_per_node"], n) * np.maximum(_num(_col(cols, "cpus_per_task"), n, 1.0), 1.0)
        cpn = _num(cpn_c, n).astype(np.int64)
        fixed = nodes > 0
        given = fixed & (cpn > 0)
        bad = given & (nodes * cpn != procs)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise SlurmConfError(
                f"{src}: {int(bad.sum())} jobs ask req_nodes x cpus_per_node CPUs different from "
                f"their size (first: job {int(self.job_id[i])}: {int(nodes[i])} x {int(cpn[i])} != "
                f"{int(procs[i])} units); units are CPUs under select/cons_tres: give procs = "
                "nodes x CPUs per node")
        infer = fixed & (cpn <= 0)
        if infer.any():
            rest = procs[infer] % nodes[infer]
            if (rest != 0).any():
                i = int(np.flatnonzero(infer)[np.flatnonzero(rest)[0]])
                raise SlurmConfError(
                    f"{src}: job {int(self.job_id[i])}: {int(procs[i])} CPUs do not divide over its "
                    f"{int(nodes[i])} nodes; give a cpus_per_node column")
            cpn[infer] = procs[infer] // nodes[infer]
        cpn[~fixed] = 1
        gpn = np.ceil(_num(cols.get("gpus_per_node"), n)).astype(np.int64)
        mem = _num(_col(cols, "mem_per_node", "mem_mb"), n)
        mem_cpu = _num(_col(cols, "mem_per_cpu"), n)
        excl = _bools(_col(cols, "exclusive"), n)
        for k, p in enumerate(self.parts):
            on = jpart == k
            if p.oversubscribe == "EXCLUSIVE":
                excl |= on
            none = on & (mem <= 0) & (mem_cpu <= 0)
            if p.def_mem_per_cpu or p.def_mem_per_node:
                mem_cpu[none] = p.def_mem_per_cpu or 0.0
                mem[none] = 0.0 if p.def_mem_per_cpu else p.def_mem_per_node
        none = (mem <= 0) & (mem_cpu <= 0)
        if self.cfg.def_mem_per_cpu:
            mem_cpu[none] = self.cfg.def_mem_per_cpu
        elif self.cfg.def_mem_per_node:
            mem[none] = self.cfg.def_mem_per_node
        return TresJobs(nodes=nodes, cpn=cpn, cpus=procs, gpn=gpn, mem=mem, mem_cpu=mem_cpu,
                        excl=excl)

    def _tres_bind(self, jobs, cols: dict, jpart: np.ndarray, total: int, src: str) -> None:
        """Set up the per-node model: machine, requests, ledger; ``req`` becomes each job's
        minimum node count (for partition limits, priority and TRES)."""
        m = self._tres_machine(self.NN)
        if int(m.off[-1]) != total:
            raise SlurmConfError(f"{src}: the NodeName lines hold {int(m.off[-1])} CPUs but the "
                                 f"machine has {total} units; run with --nodes {int(m.off[-1])}")
        self.tm = m
        self.tj = self._tres_requests(jobs, cols, jpart, src)
        self.req = np.maximum(self.tj.nodes, 1)
        self.led = Ledger(m, self.tj)
        self.led.record = {}
        self.cons_window = float(getattr(self, "cons_window", WILL_RUN_WINDOW))
        #: Unix time (s) of the log's time 0 (option ``log_start``): Slurm's clock for the
        #: will-run test's window barriers; 0 = the log's own clock
        self.log_start = float(getattr(self, "log_start", None) or 0.0)
        self._bf_nodes_cache: dict = {}
        # jobs that no node of their partition could ever hold
        tj = self.tj
        cores = np.asarray(m.cores)
        gpus = np.asarray(m.gpus)
        memn = np.asarray(m.mem)
        never = []
        for k in range(len(self.parts)):
            on = np.flatnonzero(jpart == k)
            if not len(on):
                continue
            pk = self.pmask[k]
            for j in on.tolist():
                ok = pk & (gpus >= tj.gpn[j]) & (cores >= tj.cpn[j])
                if m.mem_tracked:
                    need = tj.mem[j] if tj.mem[j] > 0 else tj.mem_cpu[j] * tj.cpn[j]
                    ok &= memn >= need
                cnt = int(ok.sum())
                if (tj.nodes[j] > 0 and cnt < tj.nodes[j]) or cnt == 0 or (
                        tj.nodes[j] == 0 and int(cores[ok].sum()) < tj.cpus[j]):
                    never.append(j)
        if never:
            j = never[0]
            raise SlurmConfError(
                f"{src}: {len(never)} jobs can never start (first: job {int(self.job_id[j])}, "
                f"{int(tj.nodes[j]) or 'any'} nodes x {int(tj.cpn[j])} CPUs, {int(tj.gpn[j])} GPUs "
                f"per node, partition {self.parts[int(jpart[j])].name}): no set of its partition's "
                "nodes has these CPUs, GPUs and memory (NodeName CPUs, Gres, RealMemory); Slurm "
                "would keep it pending forever: filter the workload or fix slurm.conf")
        self._tres_count_idle()

    def _tres_size_bind(self, cols: dict) -> None:
        """Job-size factor (``_get_priority_internal``): the requested CPUs (sacct ReqTRES ``cpu``,
        column ``req_cpus``) count until the job's first successful select test, then
        ``total_cpus`` as that test set it (`_tres_size_test`); without the column every job counts
        its allocated CPUs (``procs``) throughout, as before."""
        req = cols.get("req_cpus")
        if req is None:
            return
        if self.prio_calc.use_requested_size(req):
            self.notes.append("job-size factor: requested CPUs (ReqTRES cpu) until the job's first "
                              "select test, then its total_cpus (whole nodes with --exclusive)")

    def _tres_size_test(self, now: float, j: int, plan: list[tuple[int, int]]) -> None:
        """A select test of job ``j`` succeeded at ``now`` (s) with ``plan`` [(node, CPUs)]:
        cons_common ``_job_test`` sets ``total_cpus`` to the nodes' CPUs for a whole-node job
        (``details->whole_node``), else to the CPUs it distributed."""
        if self.prio_calc.size_tested is None:
            return
        if self.tj.excl[j]:
            total = sum(self.tm.cores[n] for n, _c in plan)
        else:
            total = sum(c for _n, c in plan)
        self.prio_calc.size_test(j, now, float(total))

    def _tres_count_idle(self) -> None:
        """``n_idle`` = nodes with a free core (what a start could use)."""
        led = self.led
        self.n_idle = sum(1 for n in range(self.tm.n)
                          if led.ncore[n] and not led.whole[n] and not led.down[n])

    # ------------------------------------------------------------------ starts and ends
    def _tres_start(self, now: float, j: int, plan: list[tuple[int, int]]) -> Start:
        """Allocate ``plan`` to job ``j`` (ledger, QOS, fair-share bookkeeping)."""
        self._tres_size_test(now, j, plan)      # the RUN_NOW test that starts it
        units = self.led.take(j, plan, now)
        self.run_end[j] = now + float(self.est[j])
        self.applied.add(j)
        self.n_pending -= 1
        self.run_start[j] = now
        self.run_units[j] = len(units)
        if self.has_qos_limits:
            self.running_uq[(int(self.juser[j]), int(self.jqos[j]))] += 1
            if self.has_tres_limits:
                self._tres_account(j, 1)
        self._tres_count_idle()
        return Start(j, units)

    def _tres_finish(self, job: int) -> None:
        self.led.release(job)
        self._tres_count_idle()

    def _tres_nodes_state(self, units: np.ndarray, down: bool) -> None:
        """Units out of (``down``) or back in service: a node with a down unit is not usable
        (a DOWN node in Slurm); ``Ledger.down`` counts its down units."""
        nodes, cnt = np.unique(self.tm.node_of(units), return_counts=True)
        for n, c in zip(nodes.tolist(), cnt.tolist()):
            self.led.down[n] = max(0, self.led.down[n] + (c if down else -c))
        self._tres_count_idle()

    def _tres_running(self) -> list[tuple[float, int, int]]:
        """Running jobs in ``_cr_job_list_sort`` order: (expected end s, job id, job index)."""
        jid = self.job_id
        return sorted((e, int(jid[j]), j) for j, e in self.run_end.items())

    def _tres_cand(self, j: int, k: int) -> int:
        """Nodes of partition ``k`` with enough GPUs for job ``j`` (bitset)."""
        return self.pm_int_t[k] & self.gm_int_t[self.jgres[j]]

    def _tres_bf_nodes(self, j: int, k: int) -> int:
        """Backfill's ``avail_bitmap`` for job ``j`` in partition ``k`` before the map
        (backfill.c ``_attempt_backfill``: ``bit_and(avail_bitmap, part_ptr->node_bitmap)``, then
        node_scheduler.c ``job_req_node_filter``, which drops nodes whose configured CPUs are
        fewer than the job's CPUs per node or, with ``CR_*_Memory``, whose ``RealMemory`` is below
        the job's memory per node). GRES are not looked at: nodes without GPUs stay (bitset)."""
        key = (k, int(self.tj.cpn[j]), float(self.tj.mem[j]), float(self.tj.mem_cpu[j]))
        cache = self._bf_nodes_cache
        out = cache.get(key)
        if out is None:
            m, tj = self.tm, self.tj
            need_mem = (tj.mem[j] if tj.mem[j] > 0 else tj.mem_cpu[j] * tj.cpn[j]) if m.mem_tracked else 0.0
            out = 0
            x = self.pm_int_t[k]
            while x:
                low = x & -x
                n = low.bit_length() - 1
                x ^= low
                if m.cores[n] >= tj.cpn[j] and m.mem[n] >= need_mem:
                    out |= low
            cache[key] = out
        return out

    # ------------------------------------------------------------------ queue records
    def _tres_records(self, order: np.ndarray, prio: np.ndarray
                      ) -> tuple[list[int], list[int], list[float]]:
        """slurmctld's job queue: one record (job, partition, priority) per partition a job was
        submitted to (``build_job_queue``), sorted by partition PriorityTier, priority, submit
        time, job id (``sort_job_queue2``), the job's listed order last. A record's priority has
        its partition's ``PriorityJobFactor`` (the job's priority shifted by ``PriorityWeightPartition``
        x the difference of the normalised factors, floored)."""
        jobs = order.tolist()
        parts = [int(k) for k in self.jpart[order]]
        pr = [float(x) for x in prio]
        if not self.jparts:
            return jobs, parts, pr
        wp = 0.0 if self.prio_calc.basic else float(self.prio_calc.prm.weight_partition)
        pf = self.part_factor
        recs = []
        for j, k, p in zip(jobs, parts, pr):
            ks = self.jparts.get(j)
            if ks is None:
                recs.append((-int(self.part_tier[k]), -p, float(self.submit[j]), int(self.job_id[j]), 0, j, k, p))
                continue
            for r, kk in enumerate(ks):
                pk = p + math.floor(wp * (pf[kk] - pf[k])) if wp else p
                recs.append((-int(self.part_tier[kk]), -pk, float(self.submit[j]), int(self.job_id[j]), r,
                             j, kk, pk))
        recs.sort(key=lambda x: x[:5])
        if self.rsv is not None and self.rsv.has_jobs:     # sort_job_queue2: reservation jobs first
            recs.sort(key=lambda x: self.rsv.jres[x[5]] < 0)
        return [x[5] for x in recs], [x[6] for x in recs], [x[7] for x in recs]

    def _order_prio(self, order: np.ndarray) -> np.ndarray:
        """Priorities of ``order`` as `SlurmScheduler._order` computes them (last tick)."""
        return self.prio_calc.compute(max(self.last_tick, 0.0), order, self.fs_factor)

    def _tres_limit(self, j: int, k: int) -> float:
        """Planning limit (s) of job ``j`` in partition ``k``: min(estimate, MaxTime), in whole
        minutes with ``time_limit_minutes``."""
        t = min(float(self.est[j]), float(self.part_maxtime[k]))
        return math.ceil(t / 60.0) * 60.0 if self.time_limit_minutes else t

    # ------------------------------------------------------------------ main / event pass
    def _tres_main_pass(self, now: float, order: np.ndarray,
                        depth: int | None) -> tuple[list[Start], bool]:
        """``_schedule`` (job_scheduler.c) with cons_tres node selection: queue records in order
        (`_tres_records`); one that cannot start marks its partition failed and removes the
        partition's nodes for the rest of the pass."""
        sp = self.cfg.sched
        full = (1 << self.tm.n) - 1
        avail = full
        failed: set[int] = set()
        starts: list[Start] = []
        per_part: dict[int, int] = defaultdict(int)
        complete = True
        P = len(self.parts)
        self.last_pass_pos = started_pos = []
        rj, rk, _rp = self._tres_records(order, np.zeros(len(order)) if not self.jparts
                                         else self._order_prio(order))
        pos_of = {j: q for q, j in enumerate(order.tolist())} if self.jparts else None
        started: set[int] = set()
        rsv = self.rsv                  # advance reservations (schedulers.slurm_resv) or None
        failed_resv: set[int] = set()
        for pos, (j, k) in enumerate(zip(rj, rk)):
            if depth is not None and pos >= depth:
                complete = False
                break
            if len(failed) == P or (self.n_idle == 0 and not self.pre_on):
                break
            if j in started:
                continue
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
            keep = None
            if rsv is not None:         # job_test_resv at now: this record's nodes
                rt = rsv.test(j, k, now, self._tres_limit(j, k), False, now)
                if not rt.ok:           # ESLURM_RESERVATION_NOT_USABLE: its nodes leave the pass
                    avail &= ~rt.cut
                    continue
                keep, avail = avail, avail & rt.mask
            plan = eval_nodes(self.led, j, avail & self._tres_cand(j, k), tres_weights(self))
            if plan is None and self.pre_on and self._preempt_tres(now, j, k, avail & self._tres_cand(j, k)):
                plan = eval_nodes(self.led, j, avail & self._tres_cand(j, k))   # victims released
            if plan is not None:
                starts.append(self._tres_start(now, j, plan))
                self._pre_started(j, k)                     # part_ptr: the record's partition
                started_pos.append(pos if pos_of is None else pos_of[j])
                started.add(j)
            elif keep is not None and rsv.jres[j] >= 0:
                failed_resv.add(int(rsv.jres[j]))
            else:
                failed.add(k)
                avail &= ~self.pm_int_t[k]
            if keep is not None:        # the pass's nodes again, less a failed partition's
                avail = keep if plan is not None or rsv.jres[j] >= 0 else keep & ~self.pm_int_t[k]
        return starts, complete

    # ------------------------------------------------------------------ backfill
    def _tres_backfill(self, now: float, order: np.ndarray, prio: np.ndarray) -> list[Start]:
        """One ``_attempt_backfill`` cycle with cons_tres: the map holds node sets (reservations
        of whole nodes, as backfill.c's ``node_space``); the will-run test and the starts use the
        per-node cores, GPUs and memory (`schedulers.slurm_tres.will_run`)."""
        sp = self.cfg.sched
        res = sp.bf_resolution
        N = self.tm.n
        begin0 = math.floor(now / res) * res
        window_end = math.floor((now + sp.bf_window) / res) * res
        nsm = BackfillMap(begin0, window_end, res, (1 << N) - 1)
        led = self.led
        tl = self.tl
        starts: list[Start] = []
        test_cnt = start_cnt = 0
        part_resv: dict[int, int] = defaultdict(int)
        part_test: dict[int, int] = defaultdict(int)
        user_test: dict[int, int] = defaultdict(int)
        running = self._tres_running()
        rj, rk, rp = self._tres_records(order, prio)
        started: set[int] = set()
        for pos, (j, k) in enumerate(zip(rj, rk)):
            if test_cnt >= sp.bf_max_job_test:
                break
            if j in started:
                continue
            if self.has_qos_limits and self._qos_blocked(j):
                continue
            if sp.bf_max_job_part:
                if part_test[k] >= sp.bf_max_job_part:
                    continue
                part_test[k] += 1
            if sp.bf_max_job_user:
                u = int(self.juser[j])
                if user_test[u] >= sp.bf_max_job_user:
                    continue
                user_test[u] += 1
            no_reserve = bool((sp.bf_min_prio_reserve and rp[pos] < sp.bf_min_prio_reserve)
                              or (sp.bf_min_age_reserve and now - self.submit[j] < sp.bf_min_age_reserve)
                              or (sp.bf_job_part_count_reserve
                                  and part_resv[k] >= sp.bf_job_part_count_reserve))
            tlj = float(tl[j]) if k == self.jpart[j] else self._tres_limit(j, k)
            need = self.tj.min_nodes(j)
            # avail_bitmap: the partition's nodes (part_ptr->node_bitmap) less those
            # job_req_node_filter drops; not narrowed to nodes with the job's GPUs (only the
            # select plugin looks at GRES), so _will_run_test's orig_map holds them too
            pm = self._tres_bf_nodes(j, k)
            part = self.pm_int_t[k]
            counted = False
            later = now
            rsv = self.rsv              # advance reservations (schedulers.slurm_resv) or None
            for _attempt in range(len(nsm) + 8 + (2 * len(rsv.resv) + 2 if rsv is not None else 0)):
                start_res = later
                later = 0.0
                pmj, pmj_part = pm, part
                if rsv is not None:     # job_test_resv(move_time=true): defer, move, fewer nodes
                    rt = rsv.test(j, k, start_res, tlj, True, now)
                    if not rt.ok:
                        break           # "reservation defer"
                    start_res = rt.when
                    pmj, pmj_part = pm & rt.mask, part & rt.mask
                if window_end < start_res:
                    break
                # the map loop over tmp_bitmap (the partition's nodes), then job_req_node_filter
                acc, later = nsm.scan(pmj_part, start_res, start_res + tlj)
                avail = acc & pmj
                if rsv is not None:     # later_start: at most find_resv_end + 1
                    later = rsv.later(rt, later, res, window_end, now)
                if avail.bit_count() < need:
                    if later and not no_reserve:
                        continue
                    break
                if not counted:
                    test_cnt += 1
                    counted = True
                wr = will_run(led, j, avail, running, now, self.cons_window, sp.bf_busy_nodes,
                              self.log_start)
                if self.pre_on and (wr is None or wr[0] > now):     # _try_sched with preemptee candidates
                    running, wr = self._preempt_tres_backfill(now, j, k, avail, running, wr, start_res,
                                                              self.log_start)
                if wr is None:
                    if later and not no_reserve:
                        continue
                    break
                self._tres_size_test(now, j, wr[1])     # a WILL_RUN test that found a place
                start = max(start_res, wr[0])
                if start <= now:
                    # _start_job -> select_nodes on the nodes no reservation holds
                    plan = eval_nodes(led, j, avail, tres_weights(self))   # powered-down nodes last
                    if plan is None:        # cannot happen: the will-run test found it now
                        break
                    starts.append(self._tres_start(now, j, plan))
                    self._pre_started(j, k)                 # part_ptr: the record's partition
                    started.add(j)
                    running = self._tres_running()
                    if self.plan_log is not None:
                        self.plan_log.append((j, "start", now, math.floor((now + tlj) / res) * res,
                                              led.nodes_of(j)))
                    if self.tj.excl[j] and not (self.pre_on and self._pre_preemptable(j)):
                        # _bf_reserve_running: whole-node jobs only, not preemptable ones
                        nodes = led.nodes_of(j)
                        nsm.reserve(begin0, math.floor((now + tlj) / res) * res, nodes)
                    start_cnt += 1
                    if sp.bf_max_job_start and start_cnt >= sp.bf_max_job_start:
                        return starts
                    break
                if no_reserve:
                    break
                if later and start > later:
                    continue
                st_slot = math.floor(start / res) * res
                en_slot = math.floor((start + tlj) / res) * res
                nodes = 0
                for n, _c in wr[1]:
                    nodes |= 1 << n
                if nsm.overlap(nodes, st_slot, en_slot):
                    later = start + (res if start_res == start else 0.0)
                    continue
                if start > now + sp.bf_window:
                    break
                if sp.bf_job_part_count_reserve and part_resv[k] >= sp.bf_job_part_count_reserve:
                    break
                part_resv[k] += 1
                nsm.reserve(st_slot, en_slot, nodes)
                if self.plan_log is not None:
                    self.plan_log.append((j, "resv", start, en_slot, nodes))
                self.stats["reservations"] += 1
                break
        return starts
