"""The event loop: exact, event-driven replay of a workload against a scheduler.

Time is the log's clock in seconds (float). Events are job finishes, job submissions and timers
(a scheduler's or a model's ``next_wakeup``). Events at the same instant are processed in a fixed
order (DESIGN.md section 5): all finishes (ties by job id), then all submissions (ties by job id),
then timers, then **one** scheduling pass whose starts are applied in the order returned.

Running jobs progress at a *rate* (1.0 = nominal). Models (power caps, network contention) change
rates at events; a job's remaining work is then re-integrated exactly and its finish event moved.
A job is killed at ``start + requested_time`` (wall clock) when ``kill_at_walltime`` is on.

Cost grows with the number of events, never with simulated time: there is no per-second loop.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from schedulers.base import JobTable, Scheduler, Start

from .cluster import CapacityError, Cluster
from .ranges import ranges_of_sorted
from .model_api import ModelContext, RunModel


class SimulationError(RuntimeError):
    """The run cannot go on: a scheduler decision that breaks the rules, or a deadlock."""


@dataclass
class SimResult:
    """Raw outcome of a run (per-job arrays indexed like the workload passed to `Simulation`).

    ``start``/``end`` in seconds (NaN for jobs never run), ``killed`` True where the job hit its
    requested time, ``nodes`` the units each job held as compact ranges (``"0-3,8"``; "" if never run).
    ``change_t``/``change_busy``/``change_queue``: the piecewise-constant busy units and queue
    length, each value holding from its time to the next.
    """

    start: np.ndarray
    end: np.ndarray
    killed: np.ndarray
    nodes: list
    change_t: np.ndarray
    change_busy: np.ndarray
    change_queue: np.ndarray
    models: list = field(default_factory=list)
    passes: int = 0
    events: int = 0


class Simulation:
    """Replays ``workload`` (sorted by submit, job id) on a machine of ``total`` units.

    Parameters
    ----------
    jobs: the `JobTable` schedulers see (estimates, sizes...).
    runtime: actual runtimes at rate 1 (s).
    kill_limit: wall-clock limit per job (s; inf = none): the job ends at start + kill_limit.
    scheduler: the policy.
    total: units of the machine.
    placer: object with ``place(job, procs, free_mask) -> node ids`` (None = first-fit).
    models: `RunModel` instances stepped at every start and finish.
    progress: a tqdm-like object with ``update(n)`` (or None).
    """

    def __init__(self, jobs: JobTable, runtime: np.ndarray, kill_limit: np.ndarray,
                 scheduler: Scheduler, total: int, placer=None, models: Sequence[RunModel] = (),
                 context: ModelContext | None = None, progress=None):
        self.jobs = jobs
        self.runtime = np.asarray(runtime, dtype=np.float64)
        self.kill_limit = np.asarray(kill_limit, dtype=np.float64)
        self.scheduler = scheduler
        self.cluster = Cluster(total)
        self.placer = placer
        self.models = list(models)
        self.context = context
        self.progress = progress
        n = len(jobs)
        self.n = n
        if n and np.any(np.diff(jobs.submit) < 0):
            raise SimulationError("jobs must be sorted by submit time")
        if n and (jobs.procs.max() > total or jobs.procs.min() < 1):
            bad = int(np.flatnonzero((jobs.procs > total) | (jobs.procs < 1))[0])
            raise SimulationError(f"job {int(jobs.job_id[bad])} needs {int(jobs.procs[bad])} units; "
                                  f"the machine has {total}")

    # ------------------------------------------------------------------ run
    def run(self) -> SimResult:
        jobs, cluster, sched = self.jobs, self.cluster, self.scheduler
        n = self.n
        submit = jobs.submit
        job_id = jobs.job_id
        procs = jobs.procs
        est = jobs.estimate
        runtime_arr = self.runtime
        # Per-job state as Python lists: the loop reads and writes single elements at every event,
        # which lists do several times faster than numpy arrays; converted to arrays at the end.
        NAN = math.nan
        submit = submit.tolist()
        job_id = job_id.tolist()
        procs = procs.tolist()
        est = est.tolist()
        runtime = runtime_arr.tolist()
        kill_limit = self.kill_limit.tolist()
        start = [NAN] * n
        end = [NAN] * n
        killed = [False] * n
        nodes_of: list = [None] * n
        # progress-rate state of running jobs
        rate = [1.0] * n
        work_left = list(runtime)
        last_t = [0.0] * n
        version = [0] * n
        model_factors: list[dict[int, float]] = [dict() for _ in self.models]

        if hasattr(sched, "bind"):
            sched.bind(jobs, cluster)
        ctx = self.context or ModelContext(n_nodes=cluster.total, jobs=jobs, runtime=runtime_arr)
        for m in self.models:
            m.bind(ctx)

        heap: list = []
        # waiting jobs in arrival order (= index order): a numpy array plus the submissions not yet
        # merged into it, so long queues cost vectorised copies, not Python loops
        queue_arr = np.empty(0, dtype=np.int64)
        new_subs: list[int] = []
        ptr = 0
        finished = 0
        passes = 0
        events = 0
        ch_t: list[float] = []
        ch_busy: list[int] = []
        ch_q: list[int] = []
        wake = None
        has_models = bool(self.models)
        def hook(name):
            fn = getattr(sched, name, None)
            return fn is not None and getattr(type(sched), name, None) is not getattr(Scheduler, name)
        has_hooks = hook("on_submit")
        has_start_hook = hook("on_start")
        has_finish_hook = hook("on_finish")
        next_wakeup = getattr(sched, "next_wakeup", None) or (lambda now: None)
        progress = self.progress
        prog_pending = 0
        INF = math.inf

        def push_finish(j: int, now: float) -> None:
            t_work = now + work_left[j] / rate[j]
            t_kill = start[j] + kill_limit[j]
            if t_kill < t_work:
                t = t_kill
            else:
                t = t_work
            version[j] += 1
            heapq.heappush(heap, (t, job_id[j], j, version[j]))

        def apply_rates(now: float, k: int, factors: dict[int, float] | None) -> None:
            if not factors:
                return
            mf = model_factors[k]
            for j, f in factors.items():
                if not cluster.is_running(j):
                    continue
                if f <= 0:
                    raise SimulationError(f"model {self.models[k].name} gave job {int(job_id[j])} rate {f}")
                mf[j] = f
                new_rate = 1.0
                for other in model_factors:
                    new_rate *= other.get(j, 1.0)
                if new_rate != rate[j]:
                    work_left[j] -= (now - last_t[j]) * rate[j]
                    last_t[j] = now
                    rate[j] = new_rate
                    push_finish(j, now)
                    for m in self.models:
                        m.on_rate_change(now, j, new_rate)

        while True:
            # ---- next event time
            while heap and heap[0][3] != version[heap[0][2]]:
                heapq.heappop(heap)
            t_fin = heap[0][0] if heap else INF
            t_sub = submit[ptr] if ptr < n else INF
            t_wake = wake if wake is not None else INF
            now = min(t_fin, t_sub, t_wake)
            if now == INF:
                if len(queue_arr) or new_subs:
                    j = int(queue_arr[0]) if len(queue_arr) else new_subs[0]
                    n_wait = len(queue_arr) + len(new_subs)
                    raise SimulationError(
                        f"deadlock: {n_wait} jobs wait (first: job {int(job_id[j])}, "
                        f"{int(procs[j])} units) on an idle machine and no event is pending; "
                        f"scheduler {sched.name} never starts them")
                break
            now = float(now)
            cluster.now = now
            events += 1
            changed = False
            # ---- finishes (ties by job id: the heap orders (time, job_id))
            while heap and heap[0][0] <= now:
                t, _, j, ver = heapq.heappop(heap)
                if ver != version[j]:
                    continue
                work_left[j] -= (now - last_t[j]) * rate[j]
                end[j] = now
                if now == start[j] + kill_limit[j] and work_left[j] > 1e-9 * max(1.0, runtime[j]):
                    killed[j] = True
                nodes_of[j] = ranges_of_sorted(cluster.release(j))   # kept as text: small for 10^5+ jobs
                finished += 1
                changed = True
                if has_finish_hook:
                    sched.on_finish(now, j)
                if has_models:
                    for mf in model_factors:
                        mf.pop(j, None)
                    for k, m in enumerate(self.models):
                        apply_rates(now, k, m.on_finish(now, j))
                if progress is not None:
                    prog_pending += 1
                    if prog_pending >= 2000:
                        progress.update(prog_pending)
                        prog_pending = 0
            # ---- submissions
            while ptr < n and submit[ptr] <= now:
                new_subs.append(ptr)
                if has_hooks:
                    sched.on_submit(now, ptr)
                ptr += 1
                changed = True
            # ---- timers
            if wake is not None and wake <= now:
                wake = None
                changed = True
            # ---- one scheduling pass
            if new_subs:
                queue_arr = np.concatenate((queue_arr, np.asarray(new_subs, dtype=np.int64)))
                new_subs = []
            if changed and len(queue_arr):
                passes += 1
                decisions = sched.schedule(now, queue_arr, cluster)
                if decisions:
                    started = set()
                    for d in decisions:
                        if isinstance(d, Start):
                            j, chosen = int(d.job), d.nodes
                        else:
                            j, chosen = int(d), None
                        if j in started or not (0 <= j < n) or j >= ptr or start[j] == start[j]:
                            raise SimulationError(f"scheduler {sched.name} started job index {j} "
                                                  "which is not waiting")
                        p = procs[j]
                        if p > cluster.free:
                            raise SimulationError(
                                f"scheduler {sched.name} started job {int(job_id[j])} ({p} units) "
                                f"at t={now} with only {cluster.free} free")
                        checked = False
                        if chosen is None:
                            if self.placer is not None:
                                chosen = self.placer.place(j, p, cluster.free_mask)
                            else:
                                chosen, checked = cluster.first_free(p), True
                        if len(chosen) != p:
                            raise SimulationError(f"job {int(job_id[j])}: {len(chosen)} units chosen for "
                                                  f"a request of {p}")
                        try:
                            cluster.allocate(j, chosen, now, now + est[j], checked)
                        except CapacityError as e:
                            raise SimulationError(str(e)) from None
                        started.add(j)
                        start[j] = now
                        last_t[j] = now
                        push_finish(j, now)
                        if has_start_hook:
                            sched.on_start(now, j)
                        if has_models:
                            for k, m in enumerate(self.models):
                                apply_rates(now, k, m.on_start(now, j, chosen))
                    # the queue is sorted (arrival = index order): delete by position
                    if len(started) == 1:
                        i = int(np.searchsorted(queue_arr, next(iter(started))))
                        queue_arr = np.concatenate((queue_arr[:i], queue_arr[i + 1:]))
                    else:
                        queue_arr = np.delete(queue_arr, np.searchsorted(queue_arr, sorted(started)))
            # ---- record the piecewise-constant state
            ch_t.append(now)
            ch_busy.append(cluster.busy)
            ch_q.append(len(queue_arr))
            nxt = next_wakeup(now)
            if nxt is not None:
                if nxt <= now:
                    raise SimulationError(f"scheduler {sched.name} asked for a wakeup at {nxt} <= now {now}")
                wake = nxt if (ptr < n or len(queue_arr) or heap) else None

        if progress is not None and prog_pending:
            progress.update(prog_pending)
        end_time = ch_t[-1] if ch_t else 0.0
        for m in self.models:
            m.finalize(end_time)
        return SimResult(start=np.array(start, dtype=np.float64), end=np.array(end, dtype=np.float64),
                         killed=np.array(killed, dtype=bool), nodes=nodes_of,
                         change_t=np.asarray(ch_t), change_busy=np.asarray(ch_busy, dtype=np.int64),
                         change_queue=np.asarray(ch_q, dtype=np.int64), models=self.models,
                         passes=passes, events=events)
