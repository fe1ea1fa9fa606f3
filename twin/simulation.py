"""The event loop: exact, event-driven replay of a workload against a scheduler.

Time is the log's clock in seconds (float). Events are job finishes, job submissions and timers
(a scheduler's or a model's ``next_wakeup``). Events at the same instant are processed in a fixed
order (DESIGN.md section 5): all finishes (ties by job id), then all submissions (ties by job id),
then timers, then **one** scheduling pass whose starts are applied in the order returned.

Running jobs progress at a *rate* (1.0 = nominal). Models (power caps, network contention) change
rates at events; a job's remaining work is then re-integrated exactly and its finish event moved.
A job is killed at ``start + requested_time`` (wall clock) when ``kill_at_walltime`` is on.

Models may also own events (``next_event``/``on_event``, e.g. node failures and repairs): at such
an event they act through `EngineControl` (interrupt a job and requeue it at the queue's front or
back, take units out of service until a time, give them back). Events at one instant: finishes,
then model events, then submissions, then timers, then the pass. A down unit is held by a
pseudo-job (index ``n + unit``) with its repair time as expected end, so backfilling policies plan
around it; ``busy`` in the recorded series excludes down units (``change_down`` holds them).

Cost grows with the number of events, never with simulated time: there is no per-second loop.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from hpctwin.schedulers.base import JobTable, Scheduler, Start

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
    #: jobs ended by an interruption with no requeue (regime "fail"), True per job
    failed: np.ndarray | None = None
    #: times each job was interrupted (0 without failure models)
    interruptions: np.ndarray | None = None
    #: engine work done per job over all its segments (nominal s; = runtime without interruptions)
    work_done: np.ndarray | None = None
    #: wall time each job held its units, summed over its segments (s)
    held: np.ndarray | None = None
    #: time each job spent waiting in the queue, summed over its (re)queueings (s)
    queued: np.ndarray | None = None
    #: interrupted segments: (job index, start s, end s, units as range text), in time order
    segments: list = field(default_factory=list)
    #: start of each job's last segment (s; = ``start`` for jobs never interrupted)
    last_start: np.ndarray | None = None
    #: units out of service (down) from each change time (like ``change_busy``; None if never any)
    change_down: np.ndarray | None = None


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
        start = [NAN] * n          # first start
        start_seg = [NAN] * n      # start of the current segment (differs after a requeue)
        end = [NAN] * n
        killed = [False] * n
        nodes_of: list = [None] * n
        # progress-rate state of running jobs
        rate = [1.0] * n
        last_t = [0.0] * n
        version = [0] * n
        model_factors: list[dict[int, float]] = [dict() for _ in self.models]

        if hasattr(sched, "bind"):
            sched.bind(jobs, cluster)
        ctx = self.context or ModelContext(n_nodes=cluster.total, jobs=jobs, runtime=runtime_arr)
        for m in self.models:
            m.bind(ctx)
        # engine work per job (nominal s): the runtime, unless a model adds to it (checkpoints...)
        work0 = runtime_arr
        for m in self.models:
            w = m.engine_work(work0) if hasattr(m, "engine_work") else None
            if w is not None:
                w = np.asarray(w, dtype=np.float64)
                if w.shape != work0.shape or not (w >= 0).all():
                    raise SimulationError(f"model {m.name} gave an invalid engine work array")
                work0 = w
        work_left = work0.tolist()
        seg_work = list(work_left)       # engine work at the start of the current segment
        event_models = [m for m in self.models
                        if getattr(type(m), "next_event", RunModel.next_event) is not RunModel.next_event]

        heap: list = []
        # Waiting jobs in queue order: a numpy array plus the submissions not yet merged into it, so
        # long queues cost vectorised copies, not Python loops. Without requeues the queue order is
        # the arrival (= index) order; after the first requeue, ``qkey`` holds each entry's order key.
        queue_arr = np.empty(0, dtype=np.int64)
        qkey: np.ndarray | None = None
        new_subs: list[int] = []
        waiting = bytearray(n)
        ptr = 0
        finished = 0
        passes = 0
        events = 0
        ch_t: list[float] = []
        ch_busy: list[int] = []
        ch_q: list[int] = []
        ch_down: list[int] | None = None
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
        # failure bookkeeping (only touched when a model interrupts jobs or takes units down)
        state = _FailureState(n)

        def push_finish(j: int, now: float) -> None:
            t_work = now + work_left[j] / rate[j]
            t_kill = start_seg[j] + kill_limit[j]
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

        control = EngineControl(self, work_left, seg_work, last_t, rate)
        cluster.pseudo_base = n

        def apply_ops(now: float) -> None:
            nonlocal queue_arr, qkey, finished, prog_pending, ch_down
            if not state.active:
                state.activate(start, submit, end, seg_work, work_left)
            ops, control._ops = control._ops, []
            for op in ops:
                kind = op[0]
                if kind == "interrupt":
                    _, j, new_work, where = op
                    if not cluster.is_running(j):
                        raise SimulationError(f"interrupt of job {int(job_id[j])}, which is not running")
                    work_left[j] -= (now - last_t[j]) * rate[j]
                    units = cluster.release(j)
                    version[j] += 1          # drops its finish event
                    state.close_segment(j, start_seg[j], now, seg_work[j] - work_left[j])
                    state.segments.append((j, start_seg[j], now, ranges_of_sorted(units)))
                    state.interruptions[j] += 1
                    fn = getattr(sched, "on_interrupt", None) or getattr(sched, "on_finish", None)
                    if fn is not None:
                        fn(now, j)
                    rate[j] = 1.0                # a new run starts at full speed
                    if has_models:
                        for mf in model_factors:
                            mf.pop(j, None)
                        for k, m in enumerate(self.models):
                            apply_rates(now, k, m.on_finish(now, j))
                    if where == "none":          # the job ends here, failed
                        end[j] = now
                        nodes_of[j] = ranges_of_sorted(units)
                        state.failed[j] = True
                        finished += 1
                        if progress is not None:
                            prog_pending += 1
                        continue
                    work_left[j] = seg_work[j] = float(new_work)
                    if qkey is None:
                        qkey = queue_arr.astype(np.float64)
                    key = state.queue_key(where, ptr)
                    pos = int(np.searchsorted(qkey, key))
                    queue_arr = np.insert(queue_arr, pos, j)
                    qkey = np.insert(qkey, pos, key)
                    waiting[j] = 1
                    state.enqueued[j] = now
                    fn = getattr(sched, "on_requeue", None)
                    if fn is not None:
                        fn(now, j)
                elif kind == "down":
                    cluster.take_down(op[1], now, op[2])
                    if ch_down is None:
                        ch_down = [0] * len(ch_t)
                    fn = getattr(sched, "on_units_down", None)
                    if fn is not None:
                        fn(now, op[1], op[2])
                else:
                    cluster.bring_up(op[1])
                    fn = getattr(sched, "on_units_up", None)
                    if fn is not None:
                        fn(now, op[1])

        while True:
            # ---- next event time
            while heap and heap[0][3] != version[heap[0][2]]:
                heapq.heappop(heap)
            t_fin = heap[0][0] if heap else INF
            t_sub = submit[ptr] if ptr < n else INF
            t_wake = wake if wake is not None else INF
            now = min(t_fin, t_sub, t_wake)
            t_ev = INF
            if event_models and (now < INF or finished < n):
                for m in event_models:
                    te = m.next_event(now if now < INF else (ch_t[-1] if ch_t else 0.0))
                    if te is not None and te < t_ev:
                        t_ev = te
                # model events only matter while jobs remain: never run past the last job
                if finished < n and t_ev < INF and (now == INF or t_ev < now):
                    now = t_ev
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
                if now == start_seg[j] + kill_limit[j] and work_left[j] > 1e-9 * max(1.0, runtime[j]):
                    killed[j] = True
                units = cluster.release(j)
                nodes_of[j] = ranges_of_sorted(units)   # kept as text: small for 10^5+ jobs
                if state.active:
                    state.close_segment(j, start_seg[j], now, seg_work[j] - work_left[j])
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
            # ---- model events (failures, repairs): each model's operations are applied right after it
            if t_ev <= now:
                control._now = now
                for k, m in enumerate(self.models):
                    if m in event_models:
                        te = m.next_event(now)
                        if te is not None and te <= now:
                            apply_rates(now, k, m.on_event(now, control))
                            if control._ops:
                                changed = True
                                apply_ops(now)
            # ---- submissions
            while ptr < n and submit[ptr] <= now:
                new_subs.append(ptr)
                waiting[ptr] = 1
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
                if qkey is not None:
                    qkey = np.concatenate((qkey, np.asarray(new_subs, dtype=np.float64)))
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
                        if j in started or not (0 <= j < n) or not waiting[j]:
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
                        waiting[j] = 0
                        if state.active:
                            state.open_segment(j, now)
                        if start[j] != start[j]:
                            start[j] = now
                        start_seg[j] = now
                        last_t[j] = now
                        push_finish(j, now)
                        if has_start_hook:
                            sched.on_start(now, j)
                        if has_models:
                            for k, m in enumerate(self.models):
                                apply_rates(now, k, m.on_start(now, j, chosen))
                    if qkey is None:
                        # the queue is sorted (arrival = index order): delete by position
                        if len(started) == 1:
                            i = int(np.searchsorted(queue_arr, next(iter(started))))
                            queue_arr = np.concatenate((queue_arr[:i], queue_arr[i + 1:]))
                        else:
                            queue_arr = np.delete(queue_arr, np.searchsorted(queue_arr, sorted(started)))
                    else:
                        keep = ~np.isin(queue_arr, np.fromiter(started, dtype=np.int64, count=len(started)))
                        queue_arr = queue_arr[keep]
                        qkey = qkey[keep]
            # ---- record the piecewise-constant state
            ch_t.append(now)
            down = cluster.down
            ch_busy.append(cluster.busy - down)
            ch_q.append(len(queue_arr))
            if ch_down is not None:
                ch_down.append(down)
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
        start_a = np.array(start, dtype=np.float64)
        end_a = np.array(end, dtype=np.float64)
        out = SimResult(start=start_a, end=end_a,
                        killed=np.array(killed, dtype=bool), nodes=nodes_of,
                        change_t=np.asarray(ch_t), change_busy=np.asarray(ch_busy, dtype=np.int64),
                        change_queue=np.asarray(ch_q, dtype=np.int64), models=self.models,
                        passes=passes, events=events)
        if state.active:
            out.failed = np.array(state.failed, dtype=bool)
            out.interruptions = np.array(state.interruptions, dtype=np.int64)
            out.work_done = np.array(state.work_done, dtype=np.float64)
            out.held = np.array(state.held, dtype=np.float64)
            out.queued = np.array(state.queued, dtype=np.float64)
            out.segments = state.segments
            out.last_start = np.array(start_seg, dtype=np.float64)
        else:
            out.last_start = start_a
            ran = ~np.isnan(start_a)
            out.failed = np.zeros(n, dtype=bool)
            out.interruptions = np.zeros(n, dtype=np.int64)
            out.held = np.where(ran, end_a - start_a, 0.0)
            out.work_done = np.where(ran, work0 - np.array(work_left, dtype=np.float64), 0.0)
            out.queued = np.where(ran, start_a - self.jobs.submit, np.nan)
        if ch_down is not None:
            out.change_down = np.asarray(ch_down, dtype=np.int64)
        return out


class _FailureState:
    """Per-job bookkeeping the engine switches on at the first interruption or outage: wall time
    held, engine work done, time queued (over all segments), interruptions, failed jobs."""

    FRONT = -1.0e15

    def __init__(self, n: int):
        self.n = n
        self.active = False
        self.segments: list = []
        self._front = 0
        self._back = 0
        self._back_ptr = -1

    def activate(self, start: list, submit: list, end: list, seg_work: list, work_left: list) -> None:
        """Switch on, initialised from the state so far: jobs done have one closed segment; jobs
        running have one open segment, closed by `close_segment` at their end."""
        self.active = True
        n = self.n
        nan = math.nan
        self.failed = [False] * n
        self.interruptions = [0] * n
        self.work_done = [0.0] * n
        self.held = [0.0] * n
        self.queued = [(start[j] - submit[j]) if start[j] == start[j] else 0.0 for j in range(n)]
        self.enqueued = [nan if start[j] == start[j] else submit[j] for j in range(n)]
        for j in range(n):
            if end[j] == end[j]:
                self.held[j] = end[j] - start[j]
                self.work_done[j] = seg_work[j] - work_left[j]

    def open_segment(self, j: int, now: float) -> None:
        e = self.enqueued[j]
        if e == e:
            self.queued[j] += now - e
            self.enqueued[j] = math.nan

    def close_segment(self, j: int, seg_start: float, now: float, work: float) -> None:
        self.held[j] += now - seg_start
        self.work_done[j] += work

    def queue_key(self, where: str, ptr: int) -> float:
        """Order key of a requeued job: "front" before every waiting job (requeued jobs among
        themselves in requeue order), "back" after every job submitted so far."""
        if where == "front":
            self._front += 1
            return self.FRONT + self._front
        if ptr != self._back_ptr:
            self._back_ptr, self._back = ptr, 0
        self._back += 1
        if self._back >= 1_000_000:
            raise SimulationError("more than 10^6 back-requeues between two submissions")
        return (ptr - 1) + 0.5 + self._back * 1e-7


class EngineControl:
    """What a model may do at its own events (``RunModel.on_event``): read the machine and the
    running jobs' progress, interrupt jobs, take units out of service and give them back. The
    operations a model asks for are applied by the engine, in order, right after its ``on_event``
    returns (so the state read within one ``on_event`` is the state before them).
    """

    def __init__(self, sim: "Simulation", work_left: list, seg_work: list, last_t: list, rate: list):
        self._sim = sim
        self._work_left, self._seg_work, self._last_t, self._rate = work_left, seg_work, last_t, rate
        self._ops: list = []
        self._now = 0.0

    @property
    def cluster(self) -> Cluster:
        return self._sim.cluster

    def job_on(self, unit: int) -> int:
        """Job index running on ``unit`` (-1 if the unit is free or down)."""
        j = int(self._sim.cluster.node_job[unit])
        return j if 0 <= j < self._sim.n else -1

    def is_down(self, unit: int) -> bool:
        return int(self._sim.cluster.node_job[unit]) >= self._sim.n

    def progress(self, job: int) -> float:
        """Engine work (nominal s) ``job`` has done in its current segment, at the event's time."""
        w = self._work_left[job] - (self._now - self._last_t[job]) * self._rate[job]
        return self._seg_work[job] - w

    def rate(self, job: int) -> float:
        return self._rate[job]

    def interrupt(self, job: int, new_work: float, requeue: str) -> None:
        """End ``job``'s current segment now and free its units. ``requeue``: "front" or "back"
        puts it back in the queue with ``new_work`` nominal seconds of engine work to do when it
        starts again (restart cost plus the work left); "none" ends it as failed."""
        if requeue not in ("front", "back", "none"):
            raise SimulationError(f"unknown requeue position {requeue!r}; use 'front', 'back' or 'none'")
        if not new_work >= 0:
            raise SimulationError(f"job {job}: new engine work must be >= 0 s, got {new_work}")
        self._ops.append(("interrupt", int(job), float(new_work), requeue))

    def take_down(self, units, until: float) -> None:
        """Take ``units`` (free, or freed by an `interrupt` asked for before) out of service until
        ``until`` (s): schedulers see them held, with ``until`` as the expected end."""
        self._ops.append(("down", np.asarray(units, dtype=np.int64), float(until)))

    def bring_up(self, units) -> None:
        """Return down ``units`` (as taken down together) to service."""
        self._ops.append(("up", np.asarray(units, dtype=np.int64)))
