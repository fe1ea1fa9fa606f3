"""Preemption in the Slurm-like policy: ``PreemptType=preempt/partition_prio`` and ``preempt/qos``
with ``PreemptMode`` ``REQUEUE``, ``CANCEL`` and ``OFF`` (a mixin of `schedulers.slurm.SlurmScheduler`).

Sources (SchedMD/slurm, tags ``slurm-22-05-9-1``, ``slurm-22-05-8-1``):

* ``src/common/read_config.c``: ``PreemptMode`` (global; ``SUSPEND`` alone is an error, "requires
  GANG too"), ``PreemptType`` (default ``preempt/none``; ``partition_prio``/``qos`` with mode OFF and
  ``none`` with a mode other than OFF are "incompatible"), ``PreemptExemptTime`` (``time_str2secs``),
  ``JobRequeue`` (default 1), partition ``PreemptMode`` (unset: the global mode).
* ``src/common/slurm_cred.c``: ``AuthInfo=cred_expire=N`` (default 120 s, below 5 an error).
* ``src/plugins/preempt/partition_prio/preempt_partition_prio.c``: a job may preempt a running job
  whose partition has a *lower* ``PriorityTier`` and a ``PreemptMode`` other than OFF
  (``preempt_p_preemptable``); the victim's mode is its partition's, else the global one; candidate
  priority ``PriorityTier << 16 + node count`` (``_gen_job_prio``: small jobs of low tiers first).
* ``src/plugins/preempt/qos/preempt_qos.c``: a job may preempt a job whose QOS is in its QOS's
  ``Preempt`` list, or of its own QOS with ``WITHIN`` when its priority is higher; the victim's mode
  is its QOS's ``PreemptMode``, else the global one; candidate priority ``QOS priority << 16 + nodes``.
* ``src/slurmctld/preempt.c`` ``slurm_find_preemptable_jobs``: candidates are running jobs (in job
  order) that are preemptable, not exempt (``acct_policy_is_job_preempt_exempt``: now < start +
  ``PreemptExemptTime`` of the victim's QOS, else slurm.conf's) and hold a node of the preemptor's
  partition; sorted by that priority, ascending (``_sort_by_prio``), or youngest first with
  ``SchedulerParameters=preempt_youngest_first`` (``_sort_by_youngest``).
* select's ``_run_now`` with preemptee candidates (the minimum set): **select/linear**
  (``select_linear.c``) removes candidates one at a time in list order until ``_job_test`` fits the
  job; after a first success the list is re-sorted (the job that made it fit first, then by nodes
  used) and the test repeated once; the victims are the removed jobs on the chosen nodes.
  **select/cons_tres** (``cons_common/job_test.c``): the same with ``preempt_reorder_count``
  re-sorts (default 1) and ``preempt_strict_order`` (the last job moved to the front instead of
  re-sorting by nodes used).
* ``src/slurmctld/node_scheduler.c`` ``_preempt_jobs`` -> ``preempt.c`` ``slurm_job_preempt``:
  ``CANCEL`` kills the victim (state PREEMPTED); ``REQUEUE`` -> ``job_mgr.c`` ``job_requeue`` /
  ``_job_requeue_op``: the victim pends again from scratch (``restart_cnt`` + 1) with a new submit
  time = now and ``begin_time = now + cred_expire + 1`` (``batch_requeue_fini``); when the job cannot
  be requeued (``JobRequeue=0``) it is killed instead.

How the twin applies it: preemption is tried in the main and event passes (``_schedule`` ->
``select_nodes`` -> ``_pick_best_nodes`` with the candidates) for a job that does not fit: the
victims are preempted through `twin.control.EngineControl.preempt` (the failures model's
interrupt/requeue path, applied at once) and the job starts in the same pass (Slurm starts it in a
later pass once the victims' nodes are released; the twin's ends are instant, as ``KillWait``).
Backfill preempts too (``src/plugins/sched/backfill/backfill.c`` ``_try_sched`` passes
``slurm_find_preemptable_jobs`` to the select plugin's will-run test, which removes every candidate
of mode REQUEUE/CANCEL first, select_linear.c / cons_common ``_will_run_test`` "Test with all
preemptable jobs gone", and reports start now "for backfill scheduler to initiate preemption";
``_start_job`` -> ``select_nodes`` -> ``_pick_best_nodes`` -> ``_run_now`` with the candidates then
preempts the minimum set, ``_preempt_jobs``; no ``bf_*`` option of 22.05 turns it off): a job whose
plain will-run start is not now gets the will-run without its candidates (`_preempt_bf_whole`,
`_preempt_tres_backfill`); start now -> the victims are preempted and the job starts in the cycle
(as in the main pass); a later start under select/linear or cons_tres sharing nodes -> that start
and nodes are what the job reserves (the whole-node cons_tres/cons_res approximation keeps its plain
will-run for reservations). With preemption on, a backfill cycle runs even with no idle node.

The partition of a running job (``part_ptr``: partition_prio's tier, mode and candidate priority)
is the partition of the queue record it started from (`_pre_part`): ``jpart`` for a job of one
partition and in whole-node runs (a job of several partitions queues in its first there); under node
sharing the record's (`_pre_started`, called where the pass starts it; else inferred: the highest
``PriorityTier`` among its partitions holding all its nodes). ``GraceTime`` is 0.
``PreemptMode=SUSPEND`` and ``GANG`` (time slicing, shared cores) are refused. A requeued job's age
counts from its new submit time.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from .slurm_conf import SlurmConfError, parse_time
from .slurm_select import job_test, to_mask as _to_mask

__all__ = ["PreemptSpec", "PreemptPasses", "preempt_spec", "PREEMPT_TYPES"]

PREEMPT_TYPES = ("preempt/none", "preempt/partition_prio", "preempt/qos")
#: slurm_cred.c DEFAULT_EXPIRATION_WINDOW (s)
CRED_EXPIRE_DEFAULT = 120
_MODES = ("OFF", "CANCEL", "REQUEUE", "SUSPEND", "GANG", "WITHIN")


@dataclass
class PreemptSpec:
    """Preemption configuration (times in seconds). ``mode``: the global mode (``OFF``, ``CANCEL``,
    ``REQUEUE``); ``within``: the global ``WITHIN`` flag; ``part_mode``: each partition's mode (None:
    the global one); ``qos_*`` are filled at bind (`PreemptPasses._preempt_bind`)."""

    type: str = "preempt/none"
    mode: str = "OFF"
    within: bool = False
    exempt_time: float | None = None
    job_requeue: bool = True
    cred_expire: int = CRED_EXPIRE_DEFAULT
    youngest_first: bool = False
    reorder_count: int = 1
    strict_order: bool = False
    part_mode: list = field(default_factory=list)
    src: str = "slurm options"

    @property
    def enabled(self) -> bool:
        """``slurm_preemption_enabled``: a preempt plugin and a global mode other than OFF."""
        return self.type != "preempt/none" and self.mode != "OFF"


def _where(src: str, line: int) -> str:
    return f"{src}:{line}" if line else "options"


def parse_mode(text: str, where: str, key: str) -> tuple[str, bool]:
    """A ``PreemptMode`` value -> (mode, WITHIN flag). ``SUSPEND`` and ``GANG`` are refused (time
    slicing is not modelled); an unknown word is a `SlurmConfError` naming ``where`` and ``key``."""
    words = [w.strip().upper() for w in str(text).split(",") if w.strip()]
    bad = [w for w in words if w not in _MODES]
    if not words or bad:
        raise SlurmConfError(f"{where}: {key}: {text!r} is not a PreemptMode (OFF, CANCEL, REQUEUE, "
                             "SUSPEND, GANG, WITHIN)")
    if "SUSPEND" in words or "GANG" in words:
        raise SlurmConfError(
            f"{where}: {key}={text}: SUSPEND and GANG are not modelled (a suspended job keeps its cores "
            "while the preemptor shares them, which needs gang time slicing and OverSubscribe=FORCE); "
            "use REQUEUE or CANCEL")
    base = [w for w in words if w != "WITHIN"]
    if len(base) > 1:
        raise SlurmConfError(f"{where}: {key}={text}: give one of OFF, CANCEL, REQUEUE")
    return (base[0] if base else "OFF"), "WITHIN" in words


def preempt_spec(cfg) -> PreemptSpec:
    """The preemption keys of a `SlurmConfig` (``cfg.preempt``, partitions' ``preempt_mode``),
    validated as 22.05's read_config.c does: a `SlurmConfError` naming file, line and key."""
    raw = cfg.preempt
    src = cfg.path or "slurm options"
    sp = PreemptSpec(src=src)

    def get(k):
        return raw.get(k, (None, 0))
    v, ln = get("preempttype")
    if v is not None:
        t = v.strip().lower()
        if t not in PREEMPT_TYPES:
            raise SlurmConfError(f"{_where(src, ln)}: PreemptType: {v!r} is not modelled (use "
                                 f"{', '.join(PREEMPT_TYPES)})")
        sp.type = t
    v, ln = get("preemptmode")
    if v is not None:
        sp.mode, sp.within = parse_mode(v, _where(src, ln), "PreemptMode")
    if (sp.type == "preempt/none") != (sp.mode == "OFF") and (v is not None or sp.type != "preempt/none"):
        t_ln = get("preempttype")[1]
        raise SlurmConfError(
            f"{_where(src, ln or t_ln)}: PreemptType={sp.type} and PreemptMode={sp.mode} are incompatible "
            "(Slurm 22.05 refuses them: preempt/none needs PreemptMode=OFF, partition_prio and qos need "
            "REQUEUE or CANCEL)")
    v, ln = get("preemptexempttime")
    if v is not None:
        try:
            sp.exempt_time = parse_time(v, 60.0)
        except ValueError as e:
            raise SlurmConfError(f"{_where(src, ln)}: PreemptExemptTime: {e}") from None
    v, ln = get("jobrequeue")
    if v is not None:
        if not v.strip().isdigit():
            raise SlurmConfError(f"{_where(src, ln)}: JobRequeue: {v!r} is not 0 or 1")
        sp.job_requeue = int(v) >= 1          # read_config.c: values > 1 are 1
    v, ln = get("authinfo")
    if v is not None:
        for item in v.split(","):
            k, _, x = item.partition("=")
            if k.strip().lower() == "cred_expire":
                if not x.strip().isdigit() or int(x) < 5:
                    raise SlurmConfError(f"{_where(src, ln)}: AuthInfo cred_expire={x.strip()}: must be an "
                                         "integer >= 5 s (slurm_cred.c; default 120)")
                sp.cred_expire = int(x)
    for name in ("preempt_youngest_first", "preempt_strict_order"):
        if name in raw:
            setattr(sp, name[len("preempt_"):], True)
    if "preempt_reorder_count" in raw:
        x, ln = raw["preempt_reorder_count"]
        if not x.isdigit() or not 0 <= int(x) <= 5:
            raise SlurmConfError(f"{_where(src, ln)}: SchedulerParameters preempt_reorder_count={x}: "
                                 "expected an integer 0..5 (cons_common.c)")
        sp.reorder_count = int(x)
    for p in cfg.partitions:
        m = None
        if p.preempt_mode is not None:
            m, _ = parse_mode(p.preempt_mode, _where(src, p.line), f"PartitionName={p.name} PreemptMode")
        sp.part_mode.append(m)
    return sp


class PreemptPasses:
    """Preemption for `SlurmScheduler` (see the module docstring). ``pre_on`` is False in every run
    without preemption, and then none of these methods changes anything."""

    pre_on = False
    _pre_control = None

    # ------------------------------------------------------------------ engine hand-off
    def engine_control(self, control) -> None:
        """The engine's `twin.control.EngineControl` (asked once at bind): preemptions go through it."""
        self._pre_control = control

    # ------------------------------------------------------------------ bind
    def _preempt_bind(self) -> None:
        """Per-run preemption state: the QOS keys of the accounts file, each job's eligible time."""
        sp = self.pre
        qdefs = getattr(self, "qos_defs", [])
        names = [q.name for q in qdefs]
        path = self.accounts.path if self.accounts else "accounts"
        self.pre_qos_mode: list[str | None] = []
        self.pre_qos_within: list[bool] = []
        self.pre_qos_exempt: list[float | None] = []
        self.pre_qos_can: list[set[int]] = []
        for q in qdefs:
            d = q.preempt
            mode, within = None, False
            if "preempt_mode" in d:
                mode, within = parse_mode(d["preempt_mode"], f"{path}: qos.{q.name}", "PreemptMode")
            ex = None
            if "preempt_exempt_time" in d:
                try:
                    ex = parse_time(str(d["preempt_exempt_time"]), 60.0)
                except ValueError as e:
                    raise SlurmConfError(f"{path}: qos.{q.name}.PreemptExemptTime: {e}") from None
            can = set()
            lst = d.get("preempt", [])
            for nm in ([lst] if isinstance(lst, str) else list(lst)):
                for x in str(nm).split(","):
                    x = x.strip()
                    if not x:
                        continue
                    if x not in names:
                        raise SlurmConfError(f"{path}: qos.{q.name}.Preempt: QOS {x!r} is not defined "
                                             f"(QOS: {', '.join(names)})")
                    can.add(names.index(x))
            self.pre_qos_mode.append(mode)
            self.pre_qos_within.append(within)
            self.pre_qos_exempt.append(ex)
            self.pre_qos_can.append(can)
        self.pre_on = sp.enabled
        if not self.pre_on:
            return
        self.use_kernel = False             # the compiled cycle and the whole-run replay do not preempt
        self.pre_elig = np.full(self.n, -math.inf)   # EligibleTime of requeued jobs (s)
        self.pre_heap: list[float] = []     # eligible times still to come
        self.pre_waiting = 0                # requeued jobs not yet eligible
        self.pre_exempt_seen: set[float] = set()   # PreemptExemptTime ends already in the heap
        self.pre_run_part: dict[int, tuple] = {}    # running job -> (its start, partition it runs in)
        self.stats["preemptions"] = 0
        self.stats["preempt_requeued"] = 0
        self.stats["preempt_cancelled"] = 0
        self.submit = self.submit.copy()    # a requeue gives a job a new submit time (not the log's)
        self.prio_calc.submit = self.submit

    def _preempt_describe(self) -> dict | None:
        sp = getattr(self, "pre", None)
        if sp is None or (sp.type == "preempt/none" and not sp.part_mode):
            return None
        return {"type": sp.type, "mode": sp.mode, "enabled": sp.enabled, "exempt_time_s": sp.exempt_time,
                "job_requeue": sp.job_requeue, "cred_expire_s": sp.cred_expire,
                "youngest_first": sp.youngest_first, "reorder_count": sp.reorder_count,
                "strict_order": sp.strict_order,
                "partition_modes": {p.name: m for p, m in zip(self.cfg.partitions, sp.part_mode) if m},
                "in": "main, event and backfill passes"}

    # ------------------------------------------------------------------ eligibility of requeued jobs
    def _preempt_visible(self, now: float, queue: np.ndarray) -> np.ndarray:
        """The queue without requeued jobs whose EligibleTime (requeue + cred_expire + 1) is later."""
        if not self.pre_waiting:
            return queue
        keep = self.pre_elig[queue] <= now
        self.pre_waiting = int(np.count_nonzero(~keep))
        if not keep.any():
            self.event_flag = False         # the event pass ran and found no eligible job
        return queue if keep.all() else queue[keep]

    def _preempt_catch_up(self, now: float) -> None:
        """A requeued job that became eligible, or a running job whose PreemptExemptTime ended, is a
        change for both passes (Slurm's periodic and backfill passes see it from then on)."""
        h = self.pre_heap
        while h and h[0] <= now:
            t = heapq.heappop(h)
            self.main_dirty = self.bf_dirty = True
            if self.bf_change is None:
                self.bf_change = t

    def _preempt_next(self, now: float) -> float | None:
        """The next EligibleTime of a requeued job or end of an exemption after ``now`` (a wake-up)."""
        h = self.pre_heap
        return h[0] if h and h[0] > now else None

    # ------------------------------------------------------------------ who may preempt whom
    def _pre_mode(self, v: int) -> str:
        """``slurm_job_preempt_mode`` of running job ``v``: partition_prio: its partition's mode, else
        the global one; qos: its QOS's mode, else the global one."""
        sp = self.pre
        if sp.type == "preempt/qos":
            m = self.pre_qos_mode[int(self.jqos[v])] if self.pre_qos_mode else None
        else:
            m = sp.part_mode[self._pre_part(v)] if sp.part_mode else None
        return m if m is not None else sp.mode

    def _pre_started(self, j: int, k: int) -> None:
        """Job ``j`` just started from its queue record of partition ``k`` (Slurm sets ``part_ptr`` to
        the record's partition, job_scheduler.c ``_schedule`` / backfill.c ``_attempt_backfill``, and
        the running job keeps it): the partition `_pre_part` gives while this run lasts."""
        if self.pre_on:
            self.pre_run_part[j] = (self.run_start.get(j), int(k))

    def _pre_part(self, v: int) -> int:
        """The partition running job ``v`` runs in (its ``part_ptr``: partition_prio's tier, mode and
        candidate priority are that partition's). A job of one partition, or any job of a whole-node run
        (queued in its first partition only): ``jpart``. A job of several partitions under node sharing:
        the partition its pass reported (`_pre_started`), else the one its queue record order would
        start it in among those holding all its nodes (highest ``PriorityTier``, then the order given)."""
        ks = self.jparts.get(v) if self.shared and self.jparts else None
        if not ks:
            return int(self.jpart[v])
        st = self.run_start.get(v)
        rec = self.pre_run_part.get(v)
        if rec is not None and rec[0] == st:
            return rec[1]
        nodes = self._pre_nodes(v)
        fit = [k for k in ks if not nodes & ~self.pm_int_t[k]]
        k = min(fit, key=lambda x: (-int(self.part_tier[x]), ks.index(x))) if fit else int(self.jpart[v])
        self.pre_run_part[v] = (st, k)
        return k

    def _pre_preemptable(self, j: int) -> bool:
        """Whether running job ``j`` could be preempted (its mode is not OFF): backfill then keeps it
        out of the map (``_bf_reserve_running``)."""
        return self.pre_on and self._pre_mode(j) != "OFF"

    def _pre_can(self, j: int, k: int, v: int, prio: dict) -> bool:
        """``preempt_p_preemptable(v, j)`` with ``j`` queued in partition ``k``."""
        sp = self.pre
        if sp.type == "preempt/partition_prio":
            kv = self._pre_part(v)             # the partition v runs in (preempt_p_preemptable: part_ptr)
            return (int(self.part_tier[kv]) < int(self.part_tier[k])
                    and (sp.part_mode[kv] if sp.part_mode else None) != "OFF")
        qj, qv = int(self.jqos[j]), int(self.jqos[v])
        if qj == qv:
            if self.pre_qos_within[qj] or sp.within:
                return prio.get(j, 0) > prio.get(v, 0)
            return False
        return qv in self.pre_qos_can[qj]

    def _pre_exempt(self, now: float, v: int) -> float | None:
        """``acct_policy_is_job_preempt_exempt``: when now < start + PreemptExemptTime (the victim's
        QOS's, else slurm.conf's), that time (s); None when ``v`` is not exempt."""
        q = self.pre_qos_exempt[int(self.jqos[v])] if self.pre_qos_exempt else None
        ex = q if q is not None else self.pre.exempt_time
        if ex is None or not now < self.run_start[v] + ex:
            return None
        return float(self.run_start[v] + ex)

    def _pre_nodes(self, v: int) -> int:
        """Node bitset of running job ``v``."""
        if self.shared:
            return self.led.nodes_of(v)
        return _to_mask(self.job_nodes[v].tolist())

    def _pre_candidates(self, now: float, j: int, k: int) -> list[int]:
        """``slurm_find_preemptable_jobs(j)``: running jobs (job order) that ``j`` may preempt, not
        exempt, holding a node of its partition; by ``_gen_job_prio`` ascending or youngest first."""
        pm = self.pm_int_t[k] if self.shared else self._to_int(self.pmask[k])
        prio: dict = {}
        if self.pre.type == "preempt/qos" and (self.pre.within or any(self.pre_qos_within)):
            run = [j] + list(self.run_start)
            pr = self.prio_calc.compute(max(self.last_tick, 0.0), np.asarray(run, dtype=np.int64), self.fs_factor)
            prio = dict(zip(run, pr.tolist()))
        out = []
        for v in sorted(self.run_start, key=lambda x: int(self.job_id[x])):
            if v == j or not self._pre_can(j, k, v, prio):
                continue
            ex = self._pre_exempt(now, v)
            if ex is not None:
                if ex not in self.pre_exempt_seen:      # its end changes what a pass may do:
                    self.pre_exempt_seen.add(ex)        # a wake-up there, both passes dirty
                    heapq.heappush(self.pre_heap, ex)
                continue
            nodes = self._pre_nodes(v)
            if nodes & pm:
                out.append((v, nodes))
        if self.pre.youngest_first:
            out.sort(key=lambda x: -self.run_start[x[0]])
        else:
            qp = None
            if self.pre.type == "preempt/qos":
                qp = [q.priority for q in self.qos_defs]
            def key(x):
                v, nodes = x
                hi = (min(int(qp[int(self.jqos[v])]), 0xffff) if qp is not None
                      else int(self.part_tier[self._pre_part(v)]))
                return (hi << 16) + min(nodes.bit_count(), 0xffff)
            out.sort(key=key)
        return [v for v, _ in out]

    # ------------------------------------------------------------------ select's _run_now
    def _pre_select(self, cands: list[int], orig: int, test, linear: bool):
        """select's ``_run_now`` preemption loop: remove ``cands`` (REQUEUE/CANCEL mode, a node in
        ``orig``) one at a time in list order, ``test(removed)`` -> chosen node bitset or None after
        each; re-sort after a success (select/linear once; cons_tres ``preempt_reorder_count`` times,
        ``preempt_strict_order``); returns the victims (removed jobs on the chosen nodes, list order)
        or None if the job cannot run even so."""
        sp = self.pre
        cands = list(cands)
        nodes_of = {v: self._pre_nodes(v) for v in cands}
        usable = {v: 0 for v in cands}
        pass_count = 0
        while True:
            removed: list[int] = []
            chosen = None
            restart = False
            for i, v in enumerate(cands):
                if self._pre_mode(v) not in ("REQUEUE", "CANCEL") or not nodes_of[v] & orig:
                    continue                    # cannot be removed / "job has no usable nodes"
                removed.append(v)
                got, free = test(removed)
                usable[v] = (free & nodes_of[v]).bit_count() if linear else 0
                if got is None:
                    continue
                chosen = got
                if linear:                      # select_linear.c: "if (pass_count++ || cnt == 1)"
                    done = pass_count > 0 or len(cands) == 1
                else:                           # cons_common: pass_count++ > preempt_reorder_cnt
                    done = pass_count > sp.reorder_count or len(cands) <= pass_count + 1
                pass_count += 1
                if done:
                    break
                if not linear and sp.strict_order:      # the last job to the front, others kept
                    cands = [v] + cands[:i] + cands[i + 1:]
                else:                                   # re-sort by nodes used, this job first
                    if not linear:
                        for u in cands[:i]:
                            usable[u] = (chosen & nodes_of[u]).bit_count()
                    usable[v] = 99999
                    for u in cands[i + 1:]:
                        usable[u] = 0
                    cands.sort(key=lambda u: -usable[u])    # stable, as glibc's list_sort
                restart = True
                break
            if restart:
                continue
            if chosen is None:
                return None
            return [u for u in removed if nodes_of[u] & chosen]

    def _pre_apply(self, now: float, victims: list[int]) -> None:
        """Preempt ``victims`` now (`twin.control.EngineControl.preempt`): REQUEUE pends again with
        EligibleTime now + cred_expire + 1 and submit time now; CANCEL (or REQUEUE with JobRequeue=0)
        ends it, state PREEMPTED."""
        ctl = self._pre_control
        if ctl is None:
            raise SlurmConfError(f"{self.pre.src}: preemption needs the engine's control of running jobs, "
                                 "which this run does not give the Slurm-like policy (e.g. inside the GPU "
                                 "packer, --allocation gpu); run without --allocation gpu or without PreemptType")
        for v in victims:
            requeue = self._pre_mode(v) == "REQUEUE" and self.pre.job_requeue
            ctl.preempt(v, cancel=not requeue)          # the policy's on_finish/on_requeue run now
            self.stats["preemptions"] += 1
            if requeue:
                self.stats["preempt_requeued"] += 1
                t = now + self.pre.cred_expire + 1.0
                self.pre_elig[v] = t
                self.submit[v] = now                    # _job_requeue_op: a new submit time
                heapq.heappush(self.pre_heap, t)
                self.pre_waiting += 1
            else:
                self.stats["preempt_cancelled"] += 1

    # ------------------------------------------------------------------ the two node models
    def _preempt_whole(self, now: float, j: int, k: int, avail: np.ndarray) -> bool:
        """Whole nodes (select/linear, or cons_tres on whole nodes): preempt so that job ``j``
        (partition ``k``) fits on ``avail`` (nodes not removed by failed partitions). True when
        victims were preempted (their nodes are now idle)."""
        cands = self._pre_candidates(now, j, k)
        if not cands:
            return False
        orig_b = avail & self.pmask[k]
        if self.has_gres:
            orig_b = orig_b & self.gres_masks[self.jgres[j]]
        orig = self._to_int(orig_b)
        idle = self._to_int(self.node_end == -math.inf) & orig
        need = int(self.req[j])
        linear = self.linear

        def test(removed):
            free = idle
            for v in removed:
                free |= self._pre_nodes(v) & orig
            if free.bit_count() < need:
                return None, free
            if linear:
                return (job_test(free, need), free)
            return (self._low(free, need), free)
        victims = self._pre_select(cands, orig, test, linear)
        if not victims:
            return False
        self._pre_apply(now, victims)
        return True

    def _preempt_tres(self, now: float, j: int, k: int, cand: int) -> bool:
        """Shared nodes (select/cons_tres): preempt so that job ``j`` (queue record of partition
        ``k``) fits on the node bitset ``cand`` (``_run_now`` on a copy of the ledger with the
        removed jobs released). True when victims were preempted."""
        from .slurm_tres import eval_nodes  # noqa: PLC0415
        cands = self._pre_candidates(now, j, k)
        if not cands:
            return False
        led = self.led

        def test(removed):
            fut = led.copy()
            for v in removed:
                fut.release(v)
            plan = eval_nodes(fut, j, cand)
            if plan is None:
                return None, 0
            out = 0
            for n, _c in plan:
                out |= 1 << n
            return out, out
        victims = self._pre_select(cands, cand, test, False)
        if not victims:
            return False
        self._pre_apply(now, victims)
        return True

    # ------------------------------------------------------------------ backfill (backfill.c _try_sched)
    def _pre_removable(self, now: float, j: int, k: int) -> list[int]:
        """``slurm_find_preemptable_jobs(j)`` for queue record partition ``k``, kept to the jobs a
        will-run test removes whole (select_linear.c / cons_common ``_will_run_test``: mode REQUEUE or
        CANCEL, ``remove_all``)."""
        return [v for v in self._pre_candidates(now, j, k) if self._pre_mode(v) in ("REQUEUE", "CANCEL")]

    def _preempt_bf_whole(self, now: float, j: int, k: int, rs, ag: int, need: int, start_res: float, wr):
        """Backfill's preemption on whole nodes (select/linear; cons_tres/cons_res on whole nodes), for
        job ``j`` (partition ``k``, ``need`` nodes) on the map's available nodes ``ag`` (bitset) whose
        plain will-run ``wr`` (`SlurmScheduler._will_run` on the cycle's running set ``rs``) is not now.

        22.05's ``_try_sched`` passes ``slurm_find_preemptable_jobs`` to the select plugin's will-run
        test, which first removes every candidate (``_will_run_test``: "Test with all preemptable jobs
        gone"; start = now "for backfill scheduler to initiate preemption"), then the other running jobs
        in end order. Start now: ``_start_job`` -> ``select_nodes`` -> ``_pick_best_nodes`` -> ``_run_now``
        with the candidates picks the minimum set and ``_preempt_jobs`` preempts it (`_preempt_whole`;
        the twin starts the job in this cycle, as the main pass does). Returns (running set, will-run):
        after a preemption a running set rebuilt without the victims and the will-run on it (start now);
        a later start under select/linear: the will-run with the candidates gone (its nodes may be theirs);
        otherwise ``(rs, wr)`` unchanged (cons_tres/cons_res whole-node future reservations keep the plain
        will-run: an approximation of that approximated mode)."""
        from .slurm_select import GroupedRunning, RunningSet  # noqa: PLC0415
        cands = self._pre_removable(now, j, k)
        if not cands:
            return rs, wr
        gone = set(cands)
        jm, jid = self.job_mask, self.job_id
        freed = 0
        for v in cands:
            freed |= jm[v]
        rest = [(e, int(jid[v]), jm[v]) for v, e in self.run_end.items() if v not in gone]
        idle2 = rs.idle | freed
        rs2 = RunningSet(idle2, rest) if self.linear else GroupedRunning(now, idle2, rest)
        wr2 = self._will_run(rs2, ag, need, now)
        if wr2 is None:
            return rs, wr
        if max(start_res, wr2[0]) > now:
            return (rs, wr2) if self.linear else (rs, wr)
        mask = np.zeros(self.NN, dtype=bool)
        mask[self._bits(ag)] = True
        if not self._preempt_whole(now, j, k, mask):
            return rs, wr
        idle = self._to_int(self.node_end == -math.inf)
        running = [(e, int(jid[v]), jm[v]) for v, e in self.run_end.items()]
        rs = RunningSet(idle, running) if self.linear else GroupedRunning(now, idle, running)
        return rs, self._will_run(rs, ag, need, now)

    def _preempt_tres_backfill(self, now: float, j: int, k: int, avail: int, running: list, wr,
                               start_res: float, epoch: float = 0.0):
        """Backfill's preemption under node sharing (select/cons_tres), the same as `_preempt_bf_whole`
        with cons_common's ``_will_run_test``: job ``j`` (queue record of partition ``k``) on the map's
        available nodes ``avail`` (bitset), ``running`` the cycle's `_tres_running` list, ``wr`` its plain
        `schedulers.slurm_tres.will_run` (None or not now). The will-run with every removable candidate
        released from a copy of the ledger; start now: the minimum set of ``_run_now`` is preempted
        (`_preempt_tres`) and (``self._tres_running()``, the will-run now) is returned; a later start:
        (``running``, the will-run with the candidates gone); else both unchanged.

        Call site (``schedulers/slurm_tres_passes.py`` ``_tres_backfill``), right after the will-run::

            wr = will_run(led, j, avail, running, now, self.cons_window, sp.bf_busy_nodes)
            if self.pre_on and (wr is None or wr[0] > now):     # _try_sched with preemptee candidates
                running, wr = self._preempt_tres_backfill(now, j, k, avail, running, wr, start_res)
        """
        from .slurm_tres import will_run  # noqa: PLC0415
        cands = self._pre_removable(now, j, k)
        if not cands:
            return running, wr
        sp = self.cfg.sched
        gone = set(cands)
        fut = self.led.copy()
        for v in cands:
            fut.release(v)
        rest = [r for r in running if r[2] not in gone]
        wr2 = will_run(fut, j, avail, rest, now, self.cons_window, sp.bf_busy_nodes, epoch)
        if wr2 is None:
            return running, wr
        if max(start_res, wr2[0]) > now:
            return running, wr2
        if not self._preempt_tres(now, j, k, avail):
            return running, wr
        running = self._tres_running()
        return running, will_run(self.led, j, avail, running, now, self.cons_window, sp.bf_busy_nodes, epoch)
