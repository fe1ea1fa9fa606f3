"""Slurm 22.05's ``select/cons_tres`` (and ``cons_res``) for the Slurm-like policy: jobs share
nodes by cores, GPUs and memory.

Sources (SchedMD/slurm, tag ``slurm-22-05-9-1``):

* ``src/plugins/select/cons_common/job_test.c``: ``_verify_node_state`` (a node is usable when
  its free memory covers the job's, a whole-node job finds it idle, no whole-node job holds it,
  its free GPUs cover the request: `Ledger.avail`), ``_job_test`` "test 1" (the job is placed on
  the *idle cores*; with ``OverSubscribe=NO`` there is no second row, so no other test), and
  ``_will_run_test`` (running jobs removed in expected-end order, in groups whose window starts at
  30 s, aligned to a 30 s barrier of the Unix clock (``end_time % time_window``; the policy's
  ``log_start``), and doubles after every group; the start is the end of the last job removed,
  ``now + 1`` for a job already past its end; ``orig_map`` is backfill's ``avail_bitmap``, all of
  the partition's nodes the map leaves, GPU or not: `will_run`).
* ``src/plugins/select/cons_tres/job_test.c``: ``can_job_run_on_node`` (the CPUs usable on a
  node: its free cores, at least ``ntasks_per_node x cpus_per_task``; with ``CR_*_Memory`` and
  memory per CPU, fewer cores when memory is short), ``choose_nodes`` and ``_eval_nodes``
  (`eval_nodes`): usable nodes form *sets of consecutive node indices with the same scheduling
  weight* (``Weight << 8 | 0xff``; for a GPU job the low byte is ``0xff - near_gpu_cnt`` where
  ``near_gpu_cnt = min(free GPUs, gpus_per_node)``: the same on every usable node, so only the
  configured Weight separates sets); the chosen set is the lowest weight, then the first
  *sufficient* one (enough CPUs and nodes), then the *tightest* sufficient one (fewest CPUs), or,
  when none is sufficient, the one with most CPUs; a job still needing one node takes the *best
  fit* node of that set (fewest usable CPUs that suffice, the lowest index on ties); otherwise the
  set's nodes are taken from its low end. The job's CPUs on each node are its
  ``ntasks_per_node x cpus_per_task`` (``_cpus_to_use``); a job given only a CPU count (an SWF
  ``procs``) takes min(free, still needed) CPUs per node. A GPU job with a per-node task count
  counts exactly those CPUs on every usable node (``_select_cores`` ->
  ``gres_select_filter_sock_core`` clears the other free cores), so among nodes it is first fit
  in the tightest consecutive run, not best fit by free cores.
* cores and GPUs within a node: the lowest free indices (``dist_tasks.c`` block distribution with
  no task binding; ``gres_select_filter_select_and_set`` takes the first free GPUs); memory: the
  job's ``--mem`` per node, else ``DefMemPerCPU`` x CPUs, else ``DefMemPerNode``, else *all* of the
  node's ``RealMemory`` (``_job_test``'s "Allocate all node memory": such a job needs a node with
  no memory allocated).
* ``src/plugins/sched/backfill/backfill.c``: the ``node_space`` map stays a map of *node* sets
  (`schedulers.slurm_tres_passes.BackfillMap`, record for record): a pending job's reservation removes the nodes the
  will-run test chose for its [start, end]; a job started by backfill enters the map only when it
  holds whole nodes (``_bf_reserve_running``: ``whole_node == WHOLE_NODE_REQUIRED``); shared
  jobs' cores and GPUs are seen by the will-run test through the select plugin's node usage.

What a run records: the engine's units are CPUs (unit id = first unit of the node + core index;
heterogeneous NodeName lines give each node its own offset), so the engine's "no unit held twice"
check guards cores; GPUs and memory are held in `Ledger`, which refuses (``RuntimeError``) to
give a GPU twice or memory beyond ``RealMemory``, and keeps every job's allocation
(`Ledger.record`: nodes, cores, GPU indices, MB) for the checks of `check_ledger`.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .slurm_select import bits as _bit_list
from .slurm_select import low_bits as _low_bits

__all__ = ["TresMachine", "TresJobs", "Ledger", "eval_nodes", "will_run", "check_ledger",
           "WILL_RUN_WINDOW"]

#: cons_common ``_will_run_test``: first window (s) for grouping running-job ends
WILL_RUN_WINDOW = 30.0


@dataclass
class TresMachine:
    """Per-node resources: ``cores`` (CPUs), ``gpus``, ``mem`` (MB, RealMemory), ``weight``
    (NodeName Weight), ``off`` (first engine unit of each node, length N + 1),
    ``mem_tracked`` (``CR_*_Memory``)."""

    cores: list[int]
    gpus: list[int]
    mem: list[float]
    weight: list[int]
    off: np.ndarray
    mem_tracked: bool

    @classmethod
    def build(cls, cores: list[int], gpus: list[int], mem: list[float], weight: list[int],
              mem_tracked: bool) -> "TresMachine":
        """From per-node lists (the same length)."""
        off = np.zeros(len(cores) + 1, dtype=np.int64)
        off[1:] = np.cumsum(cores)
        return cls(list(map(int, cores)), list(map(int, gpus)), list(map(float, mem)),
                   list(map(int, weight)), off, bool(mem_tracked))

    @property
    def n(self) -> int:
        return len(self.cores)

    def node_of(self, units: np.ndarray) -> np.ndarray:
        """Node index of each engine unit id."""
        return np.searchsorted(self.off, np.asarray(units, dtype=np.int64), side="right") - 1


@dataclass
class TresJobs:
    """Each job's request (arrays indexed by job): ``nodes`` (``-N``; 0: only a CPU count is
    known, any node count), ``cpn`` (CPUs per node: ``ntasks_per_node x cpus_per_task``; 1 for a
    CPU-count job), ``cpus`` (total CPUs = the engine units of the job), ``gpn`` (GPUs per node),
    ``mem`` (MB per node, 0: none asked), ``mem_cpu`` (MB per CPU, 0: none), ``excl``
    (whole nodes: ``--exclusive`` or ``OverSubscribe=EXCLUSIVE``)."""

    nodes: np.ndarray
    cpn: np.ndarray
    cpus: np.ndarray
    gpn: np.ndarray
    mem: np.ndarray
    mem_cpu: np.ndarray
    excl: np.ndarray

    def min_nodes(self, j: int) -> int:
        """The node count a job needs at least (1 for a CPU-count job)."""
        return int(self.nodes[j]) or 1


class Ledger:
    """Free cores (bitsets), free GPUs (bitsets) and allocated memory (MB) of every node, and the
    allocation of every running job. ``avail`` is ``_verify_node_state`` +
    ``can_job_run_on_node``; `take`/`release` change the state; `copy` gives the will-run test
    its ``future_usage``."""

    __slots__ = ("m", "jobs", "core_free", "ncore", "gpu_free", "ngpu", "mem_used", "whole",
                 "alloc", "down", "record")

    def __init__(self, m: TresMachine, jobs: TresJobs):
        self.m = m
        self.jobs = jobs
        self.core_free = [(1 << c) - 1 for c in m.cores]
        self.ncore = list(m.cores)
        self.gpu_free = [(1 << g) - 1 for g in m.gpus]
        self.ngpu = list(m.gpus)
        self.mem_used = [0.0] * m.n
        self.whole = [False] * m.n          # held by a whole-node job
        self.down = [0] * m.n               # units out of service (node failures) per node
        #: running job -> [(node, core bitset, GPU bitset, MB)]
        self.alloc: dict[int, list[tuple[int, int, int, float]]] = {}
        #: every allocation ever made, job -> (start s, [(node, cores, GPUs, MB)]); None: not kept
        self.record: dict[int, tuple[float, list]] | None = None

    def copy(self) -> "Ledger":
        """A copy of the state (the allocations are shared, read only)."""
        c = Ledger.__new__(Ledger)
        c.m, c.jobs = self.m, self.jobs
        c.core_free, c.ncore = list(self.core_free), list(self.ncore)
        c.gpu_free, c.ngpu = list(self.gpu_free), list(self.ngpu)
        c.mem_used, c.whole, c.down = list(self.mem_used), list(self.whole), list(self.down)
        c.alloc = dict(self.alloc)
        c.record = None
        return c

    def idle(self, n: int) -> bool:
        """No job holds anything on node ``n``."""
        return (self.ncore[n] == self.m.cores[n] and self.ngpu[n] == self.m.gpus[n]
                and self.mem_used[n] == 0 and not self.whole[n])

    def avail(self, n: int, j: int) -> int:
        """CPUs job ``j`` may use on node ``n`` now (0: the node is not usable for it)."""
        if self.down[n] or self.whole[n]:
            return 0
        jb, m = self.jobs, self.m
        if jb.excl[j]:      # a whole idle node that has the job's CPUs per node and GPUs
            ok = self.idle(n) and m.cores[n] >= jb.cpn[j] and m.gpus[n] >= jb.gpn[j]
            return m.cores[n] if ok else 0
        c = self.ncore[n]
        need = int(jb.cpn[j])
        if c < need or self.ngpu[n] < jb.gpn[j]:
            return 0
        if m.mem_tracked:
            free = m.mem[n] - self.mem_used[n]
            if jb.mem[j] > 0:
                if free < jb.mem[j]:
                    return 0
            elif jb.mem_cpu[j] > 0:
                c = min(c, int(free // jb.mem_cpu[j]))    # can_job_run_on_node: fewer cores
                if c < need:
                    return 0
            elif self.mem_used[n] > 0:      # all of the node's memory
                return 0
        return c

    def mem_of(self, n: int, j: int, cpus: int) -> float:
        """MB job ``j`` holds on node ``n`` with ``cpus`` CPUs (0 when memory is not tracked)."""
        if not self.m.mem_tracked:
            return 0.0
        jb = self.jobs
        if jb.mem[j] > 0:
            return float(jb.mem[j])
        if jb.mem_cpu[j] > 0:
            return float(jb.mem_cpu[j] * cpus)
        return self.m.mem[n]

    def take(self, j: int, plan: list[tuple[int, int]], now: float = 0.0) -> np.ndarray:
        """Allocate ``plan`` ([(node, CPUs)]) to job ``j``: the lowest free cores and GPUs; returns
        the engine units (sorted). A GPU given twice or memory over RealMemory is a RuntimeError."""
        jb, m = self.jobs, self.m
        excl = bool(jb.excl[j])
        g = int(jb.gpn[j])
        out = []
        units = []
        for n, c in plan:
            free = self.core_free[n]
            cores = _low_bits(free, c)
            if cores.bit_count() != c:
                raise RuntimeError(f"slurm cons_tres: job index {j} needs {c} cores on node {n}, "
                                   f"{free.bit_count()} free")
            gfree = self.gpu_free[n]
            gpus = gfree if excl else _low_bits(gfree, g)
            if gpus.bit_count() < g:
                raise RuntimeError(f"slurm cons_tres: GPU over-allocation on node {n} (job index {j} "
                                   f"needs {g}, {gfree.bit_count()} free)")
            mem = self.mem_of(n, j, c)
            if m.mem_tracked and self.mem_used[n] + mem > m.mem[n]:
                raise RuntimeError(f"slurm cons_tres: memory over-allocation on node {n} "
                                   f"({self.mem_used[n] + mem:g} MB > RealMemory {m.mem[n]:g})")
            held = free if excl else cores
            self.core_free[n] = free & ~held
            self.ncore[n] -= held.bit_count()
            self.gpu_free[n] = gfree & ~gpus
            self.ngpu[n] -= gpus.bit_count()
            self.mem_used[n] += mem
            if excl:
                self.whole[n] = True
            out.append((n, held, gpus, mem))
            base = int(m.off[n])
            units.extend(base + b for b in _bit_list(cores))
        self.alloc[j] = out
        if self.record is not None:
            self.record[j] = (now, [(n, _bit_list(cb), _bit_list(gb), mb) for n, cb, gb, mb in out])
        return np.asarray(sorted(units), dtype=np.int64)

    def release(self, j: int) -> None:
        """Job ``j`` ends: its cores, GPUs and memory are free again."""
        for n, cores, gpus, mem in self.alloc.pop(j, ()):
            self.core_free[n] |= cores
            self.ncore[n] += cores.bit_count()
            self.gpu_free[n] |= gpus
            self.ngpu[n] += gpus.bit_count()
            self.mem_used[n] -= mem
            if self.mem_used[n] < 1e-9:
                self.mem_used[n] = 0.0
            self.whole[n] = False

    def nodes_of(self, j: int) -> int:
        """Node bitset of running job ``j``."""
        out = 0
        for n, *_ in self.alloc.get(j, ()):
            out |= 1 << n
        return out


def eval_nodes_busy(led: Ledger, j: int, cand: int, idle_now: int) -> list[tuple[int, int]] | None:
    """cons_tres ``_eval_nodes_busy`` (``SchedulerParameters=bf_busy_nodes``, the will-run test's
    future states): by increasing node weight, first the usable nodes that are busy now (not in
    ``idle_now``, slurmctld's idle node bitmap), then the idle ones, each in index order, until
    the job has its nodes and CPUs (no best fit).

    As 22.05 loops: a success (or ``max_nodes`` reaching 0) ends only the inner node loop
    (``all_done = true; break``); the ``idle_test`` loop is not left, so when the busy nodes
    satisfied the job, the idle pass of the same weight still adds the first usable idle node
    (checked again right after it: success) and the plan holds one node more than the job asks.
    backfill.c reserves every node of the plan (``_add_reservation`` on ``avail_bitmap``), and
    cons_common ``_job_test`` counts them all in ``total_cpus``. (Seen in slurmctld's
    ``_dump_job_sched`` lines of the recorded gpu_exclusive replay: every multi-node job planned
    on busy nodes had one idle node more, e.g. job 19, -N 2, at n[003-005].)"""
    jb, m = led.jobs, led.m
    fixed = int(jb.nodes[j])
    rem_cpus = int(jb.cpus[j])
    rem_nodes = fixed or 1
    max_nodes = fixed if fixed else rem_cpus
    cpn = int(jb.cpn[j])
    avail = {}
    x = cand
    while x:
        low = x & -x
        n = low.bit_length() - 1
        x ^= low
        a = led.avail(n, j)
        if a > 0:
            avail[n] = a
    plan: list[tuple[int, int]] = []
    done = ok = False
    for w in sorted({m.weight[n] for n in avail}):
        if done:                            # while (!all_done && (nwt = list_next(iter)))
            break
        for idle_test in (0, 1):            # no all_done test between the two passes (22.05)
            for n in sorted(avail):
                if m.weight[n] != w or bool(idle_now >> n & 1) != bool(idle_test):
                    continue
                if n in (p for p, _c in plan):
                    continue                # "already selected"
                if fixed:
                    use = cpn
                elif rem_cpus > 0:
                    use = min(m.cores[n], rem_cpus) if jb.excl[j] else min(avail[n], rem_cpus)
                else:                       # _cpus_to_use: whole node, else pn_min_cpus (1 CPU)
                    use = m.cores[n] if jb.excl[j] else 1
                plan.append((n, use))
                rem_cpus -= use
                rem_nodes -= 1
                max_nodes -= 1
                if rem_nodes <= 0 and rem_cpus <= 0:
                    done = ok = True
                    break
                if max_nodes == 0:
                    done = True
                    break
    if ok or (rem_cpus <= 0 and rem_nodes <= 0):
        return plan
    return None


def eval_nodes(led: Ledger, j: int, cand: int, weight: list[int] | None = None
               ) -> list[tuple[int, int]] | None:
    """cons_tres ``_select_nodes`` -> ``choose_nodes`` -> ``_eval_nodes`` for job ``j`` on the
    candidate nodes ``cand`` (bitset) in the ledger's state: [(node, CPUs)] or None (see the
    module docstring for the rule). ``weight``: node weights to use instead of the configured ones
    (powered-down nodes last, `schedulers.slurm_power.tres_weights`)."""
    jb, m = led.jobs, led.m
    fixed = int(jb.nodes[j])
    rem_cpus = int(jb.cpus[j])
    rem_nodes = fixed or 1
    max_nodes = fixed if fixed else rem_cpus
    cpn = int(jb.cpn[j])
    # a GPU job with a task count per node: _select_cores -> gres_select_filter_sock_core clears
    # the free cores beyond ntasks_per_node x cpus_per_task ("Clear extra avail_core bits"), so
    # every usable node offers exactly cpn CPUs to the set and best-fit comparisons
    gres_fixed = bool(fixed and jb.gpn[j] > 0)
    # usable nodes and their CPUs; consecutive sets of the same weight
    sets: list[list] = []          # [weight, cpus, nodes list]
    last = -2
    x = cand
    avail: dict[int, int] = {}
    while x:
        low = x & -x
        n = low.bit_length() - 1
        x ^= low
        a = led.avail(n, j)
        if a <= 0:
            continue
        if gres_fixed:
            a = cpn         # gres_select_filter_sock_core: avail_cpus cut to the tasks' CPUs
        avail[n] = a
        w = m.weight[n] if weight is None else weight[n]
        if n == last + 1 and sets and sets[-1][0] == w:
            s = sets[-1]
            s[1] += a
            s[2].append(n)
        else:
            sets.append([w, a, [n]])
        last = n
    if len(avail) < rem_nodes:
        return None
    plan: list[tuple[int, int]] = []
    while sets and max_nodes > 0:
        best = None
        best_suff = False
        for s in sets:
            if not s[2]:
                continue
            suff = s[1] >= rem_cpus and len(s[2]) >= rem_nodes
            if best is None or s[0] < best[0]:
                new = True
            else:
                new = s[0] == best[0] and ((suff and not best_suff) or (suff and s[1] < best[1])
                                           or (not suff and s[1] > best[1]))
            if new:
                best, best_suff = s, suff
        if best is None:
            break
        nodes = best[2]
        if rem_nodes <= 1:
            bf, size = -1, 0
            for n in nodes:
                a = avail[n]
                if a < rem_cpus:
                    continue
                if bf < 0 or a < size:
                    bf, size = n, a
                    if size == rem_cpus:
                        break
            if bf >= 0:
                nodes = [bf]
        for n in nodes:
            if max_nodes == 0 or (rem_nodes <= 0 and rem_cpus <= 0):
                break
            a = avail[n]
            if max_nodes == 1 and a < rem_cpus:
                continue
            use = cpn if fixed else min(a, rem_cpus)
            if jb.excl[j] and not fixed:
                use = min(m.cores[n], rem_cpus)
            plan.append((n, use))
            rem_cpus -= use
            rem_nodes -= 1
            max_nodes -= 1
        if rem_nodes <= 0 and rem_cpus <= 0:
            return plan
        best[1] = 0
        best[2] = []
    if rem_nodes <= 0 and rem_cpus <= 0:
        return plan
    return None


def will_run(led: Ledger, j: int, cand: int, running: list[tuple[float, int, int]], now: float,
             window: float = WILL_RUN_WINDOW, busy_nodes: bool = False, epoch: float = 0.0
             ) -> tuple[float, list[tuple[int, int]]] | None:
    """cons_common ``_will_run_test`` for job ``j`` on the nodes ``cand``: (start s, plan) or
    None. ``cand`` is the backfill's ``avail_bitmap`` (``orig_map``: the partition's nodes the
    map leaves, *not* narrowed to nodes with GPUs: a job on a CPU-only node of the partition is
    removed like any other). ``running``: (expected end s, job id, job index) of every running
    job, in ``_cr_job_list_sort`` order (end, then job id). Jobs without a node in ``cand`` are
    skipped; the others are removed in groups: the first window ends at the first removed job's
    end rounded up to the next multiple of ``window`` (s) *on Slurm's clock* (``delta =
    end_time % time_window`` of a Unix ``time_t``: ``epoch`` is the Unix time (s) of the log's
    time 0, option ``log_start``; 0 aligns on the log's own clock); a group takes jobs while the
    next job's end is within that barrier + the window; after each group the window doubles (at
    least once) until it reaches the next job. The start is the last removed job's end (``now +
    1`` when that is already past)."""
    plan = eval_nodes(led, j, cand)
    if plan is not None:
        return now, plan
    fut = None
    end0 = None
    win = window
    i = 0
    R = len(running)
    while i < R:
        last = None
        nxt = None
        while i < R:
            e, _, q = running[i]
            i += 1
            if not (led.nodes_of(q) & cand):
                continue                    # "job has no usable nodes": skipped
            if end0 is None:                # the 30 s barrier of the first job removed,
                # aligned on the Unix clock: delta = end_time % time_window (_will_run_test)
                end0 = e + (window - math.fmod(e + epoch, window))
            if fut is None:
                fut = led.copy()
            fut.release(q)
            last = e
            nxt = running[i][0] if i < R else None      # list_peek_next: any job
            if nxt is None or nxt > end0 + win:
                break
        if last is None:
            break
        win *= 2                            # do { time_window *= 2 } while (...)
        while nxt is not None and nxt > end0 + win:
            win *= 2
        if busy_nodes:
            idle_now = 0
            for n in range(led.m.n):
                if led.idle(n):
                    idle_now |= 1 << n
            plan = eval_nodes_busy(fut, j, cand, idle_now)
        else:
            plan = eval_nodes(fut, j, cand)
        if plan is not None:
            return (last if last > now else now + 1.0), plan
    return None


def check_ledger(record: dict, end: dict, machine: TresMachine) -> None:
    """Conformance check of a run's allocations: ``record`` job -> (start s, [(node, cores, GPU
    indices, MB)]) (`Ledger.record`), ``end`` job -> end (s). Raises AssertionError naming the
    node and the jobs when a core or a GPU is held by two jobs at once, or the memory held on a
    node exceeds its RealMemory."""
    ev: dict[int, list] = {}
    for j, (st, alloc) in record.items():
        en = end[j]
        for n, cores, gpus, mb in alloc:
            ev.setdefault(n, []).append((st, en, j, set(cores), set(gpus), mb))
    for n, rows in ev.items():
        rows.sort(key=lambda r: r[0])
        for a in range(len(rows)):
            sa, ea, ja, ca, ga, ma = rows[a]
            mem = ma
            for b in range(a + 1, len(rows)):
                sb, eb, jb, cb, gb, mb = rows[b]
                if sb >= ea:
                    break
                if ca & cb:
                    raise AssertionError(f"node {n}: core {min(ca & cb)} held by job indices {ja} and {jb} "
                                         f"at t={sb:g}")
                if ga & gb:
                    raise AssertionError(f"node {n}: GPU {min(ga & gb)} held by job indices {ja} and {jb} "
                                         f"at t={sb:g}")
            # memory at sa: every job running then
            mem = sum(r[5] for r in rows if r[0] <= sa < r[1])
            if machine.mem_tracked and mem > machine.mem[n] + 1e-6:
                raise AssertionError(f"node {n}: {mem:g} MB held at t={sa:g}, RealMemory {machine.mem[n]:g}")
            if len(ga) > machine.gpus[n] or len(ca) > machine.cores[n]:
                raise AssertionError(f"node {n}: job index {ja} holds more than the node has")


# ---------------------------------------------------------------------------- jobs.csv columns
def _ranges(xs: list[int]) -> str:
    """Sorted indices as Slurm index ranges: [0, 1, 3] -> "0-1,3"."""
    out, i = [], 0
    xs = sorted(xs)
    while i < len(xs):
        k = i
        while k + 1 < len(xs) and xs[k + 1] == xs[k] + 1:
            k += 1
        out.append(str(xs[i]) if k == i else f"{xs[i]}-{xs[k]}")
        i = k + 1
    return ",".join(out)


def _mb(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def alloc_columns(record: dict, n: int, names: list[str] | None, mem_tracked: bool) -> dict[str, np.ndarray]:
    """``jobs.csv`` columns of a run where jobs share nodes, from `Ledger.record` (job -> (start,
    [(node, cores, GPU indices, MB)]); a requeued job: its last allocation): ``gpus_alloc``, the GPUs
    of each node as ``NODE:IDX`` joined by ``;`` (NODE the slurm.conf NodeName, else the node index;
    IDX the GPU indices within the node as ranges, as ``scontrol show job -d`` prints
    ``GRES=gpu:2(IDX:0-1)``), e.g. ``g01:0-1;g02:0,2``; ``mem_alloc_mb``, the memory of each node
    the same way (MB), e.g. ``g01:4096;g02:4096``. Empty for a job that never started, got no GPU,
    or when memory is not consumable (``CR_Core``/``CR_CPU``)."""
    gp = np.full(n, "", dtype=object)
    mem = np.full(n, "", dtype=object)
    for j, (_st, alloc) in record.items():
        nm = [names[a[0]] if names else str(a[0]) for a in alloc]
        gp[j] = ";".join(f"{x}:{_ranges(g)}" for x, (_n, _c, g, _m) in zip(nm, alloc) if g)
        if mem_tracked:
            mem[j] = ";".join(f"{x}:{_mb(m)}" for x, (_n, _c, _g, m) in zip(nm, alloc))
    return {"gpus_alloc": gp, "mem_alloc_mb": mem}


def parse_alloc(text: str) -> list[tuple[str, str]]:
    """``"g01:0-1;g02:4"`` -> [("g01", "0-1"), ("g02", "4")] (the form of `alloc_columns`)."""
    out = []
    if not isinstance(text, str):           # "" read back from a CSV is NaN
        return out
    for item in filter(None, text.split(";")):
        node, sep, val = item.rpartition(":")
        if not sep:
            raise ValueError(f"allocation {item!r} is not NODE:VALUE")
        out.append((node, val))
    return out


def slurm_conf_machine(options) -> tuple[int, str] | None:
    """The machine a Slurm run's ``slurm_conf`` describes: (its NodeName nodes, where from), or None
    without a slurm.conf or NodeName lines (the Slurm entry's ``machine`` hook: asked only when neither
    ``--nodes``, ``--system`` nor the workload sizes the machine; a node-unit machine, which
    `cons_tres_units` then counts in CPUs under select/cons_tres)."""
    from .slurm_conf import load_slurm_conf  # noqa: PLC0415 - only for Slurm runs
    path = options.get("slurm_conf")
    if not path:
        return None
    names = load_slurm_conf(path).node_names
    if not names:
        return None
    return len(names), f"from slurm.conf {path}: {len(names)} NodeName nodes"


def cons_tres_units(cfg, units, options):
    """The machine in CPUs when the run counts nodes but select/cons_tres would share them (the Slurm
    entry's ``units`` hook, asked before the jobs are prepared).

    A sacct dump read in node units (the reader's default: a job's size is its NNodes) on a machine of
    ``--nodes N`` = the N NodeName nodes would give every job whole nodes. Under select/cons_tres or
    cons_res Slurm shares nodes by cores, so when the dump says each job's CPUs (column ``ncpus``) the
    machine is re-counted in CPUs (the NodeName lines' CPUs) and a job's size becomes its NCPUS on its
    NNodes nodes (`schedulers.slurm_tres` then allocates cores, GPUs and memory per node). Said in the
    run's notes. Anything else (select/linear, no slurm.conf, a machine already in CPUs or GPUs, no
    per-job CPU counts, ``cpus_per_node`` given) keeps ``units``.
    """
    from .slurm_conf import apply_options, load_slurm_conf  # noqa: PLC0415 - only for Slurm runs
    path = options.get("slurm_conf")
    if not path or options.get("cpus_per_node") is not None:
        return units
    sc = apply_options(load_slurm_conf(path), {k: v for k, v in options.items() if k != "slurm_conf"})
    names = sc.node_names
    if sc.select_type not in ("select/cons_tres", "select/cons_res") or not names or units.total != len(names):
        return units
    wl = units.workload
    ncpus, nnodes = wl.columns.get("ncpus"), wl.columns.get("nnodes")
    if ncpus is None or nnodes is None or len(wl.procs) != len(ncpus):
        return units
    nn, cpus = np.asarray(nnodes, dtype=np.int64), np.asarray(ncpus, dtype=np.int64)
    if not np.array_equal(np.asarray(wl.procs, dtype=np.int64), nn) or (cpus < np.maximum(nn, 1)).any():
        return units                       # not a node-unit dump, or CPUs the nodes cannot hold
    node_cpus = list(sc.node_cpus or [])
    total = int(sum(node_cpus)) if len(node_cpus) == len(names) else len(names) * int(sc.cpus_per_node or 1)
    if total <= len(names):
        return units
    note = (f"select/cons_tres: the machine counted in CPUs ({total} = the NodeName lines' CPUs of the "
            f"{len(names)} nodes) and a job's size is its NCPUS on its NNodes nodes, so jobs share nodes as "
            f"in Slurm (--nodes {len(names)} counted nodes; --set workload.unit=cpus --nodes {total} says it "
            "directly)")
    wl = dataclasses.replace(wl, procs=cpus, notes=[*wl.notes, note], machine_size=None)
    return dataclasses.replace(units, workload=wl, total=total,
                               source=f"{units.source}, counted as {total} CPUs (select/cons_tres)")
