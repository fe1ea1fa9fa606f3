"""The event loop: exact, event-driven replay of a workload against a scheduler.

Time is the log's clock in seconds (float). Events are job finishes (and kills at the time limit),
physics models' own events (node failures, repairs), job submissions and the policy's wake-ups.
**Same-instant order** (DESIGN.md section 5), at every event time ``now``:

1. finishes, ties by job id (the finish heap orders ``(time, job id)``);
2. model events, in model order (each model's operations applied right after its ``on_event``);
3. submissions, ties by job id (the workload is sorted by submit time, then id);
4. timers: the policy's (scheduler's and gates') wake-up;
5. **one** scheduling pass, if anything above happened and jobs wait; its starts are checked
   (`twin.guards`), placed, offered to the gates and applied in the order returned.

The pieces, one job each: `twin.rates` (progress rates and the finish heap), `twin.waitqueue` (the
waiting queue, front/back requeue keys), `twin.ledger` (every job's segments: always on, one result
path), `twin.recorder` (the piecewise-constant series and the progress bar), `twin.timers` (one heap
for model events and wake-ups), `twin.guards` (decision checks, located errors, progress guards),
`twin.dependencies` (only for a workload with job dependencies or array throttles: the gate whose
``visible(now)`` is the queue handed to the policy),
`twin.contract` (the scheduler, gate and model contract; hooks resolved once at bind time).

Running jobs progress at a *rate* (1.0 = nominal). Models (power caps, network contention) change
rates at events; a job's remaining work is then re-integrated exactly and its finish event moved.
A job is killed at ``segment start + requested_time`` (wall clock) when ``kill_at_walltime`` is on.
At their own events models act through `EngineControl` (interrupt a job and requeue it at the
queue's front or back, take units out of service until a time, give them back). A down unit is held
by a pseudo-job (index ``n + unit``) with its repair time as expected end, so backfilling policies
plan around it; ``busy`` in the recorded series excludes down units (``change_down`` holds them).
*Held* jobs (``held_jobs``: the table's last rows) are outside the submission stream: a model submits
them (`EngineControl.submit`) and may release running jobs (`EngineControl.release`); a model with
``drives_run`` keeps the run going with its events once every job has ended (a serving deployment).

Cost grows with the number of events, never with simulated time: there is no per-second loop, and
nothing is done per event in proportion to the queue or the machine (the policy aside).
"""
from __future__ import annotations

import math
from array import array
from heapq import heappop
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .cluster import CapacityError, Cluster
from .contract import (BindContext, JobTable, ModelContext, ModelView, RunModel, Scheduler,
                       bind_policy, gate_hooks, model_hooks, resolve_hooks)
from .control import EngineControl
from .dependencies import dependency_gate
from .guards import QUIET_EVENTS, SimulationError, check_units, decode, located, stuck_message
from .ledger import Ledger
from .rates import Progress, RateError
from .recorder import Recorder
from .timers import Timers
from .waitqueue import QueueError, WaitQueue

__all__ = ["EngineControl", "SimResult", "Simulation", "SimulationError"]
INF = math.inf


@dataclass
class SimResult:
    """Raw outcome of a run (per-job arrays indexed like the workload passed to `Simulation`).

    ``start``/``end`` in seconds (NaN for jobs never run), ``killed`` True where the job hit its
    requested time, ``nodes`` the units each job held as compact ranges (``"0-3,8"``; None if never run).
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
    #: starts refused by each gate (gate name -> count)
    refusals: dict = field(default_factory=dict)
    #: jobs withdrawn while waiting (`EngineControl.cancel`), True per job (None if none ever was)
    cancelled: np.ndarray | None = None
    #: when each withdrawn job was cancelled (s, the engine's ``now`` of the cancel; NaN for the
    #: others; None if none ever was): Slurm's End of a job cancelled while pending
    cancel_time: np.ndarray | None = None
    #: runs whose workload has dependencies or array throttles (`twin.dependencies`): each job's
    #: ``eligible`` time (s) and ``pending_reason``, and summary figures; None otherwise
    dependencies: Any = None
    #: times each job was preempted by its policy (`EngineControl.preempt`); None if no job ever was
    preemptions: np.ndarray | None = None
    #: jobs a preemption ended (Slurm's PreemptMode=CANCEL: state PREEMPTED), True per job; None as above
    preempted: np.ndarray | None = None


class Simulation:
    """Replays ``jobs`` (sorted by submit, job id) on a machine of ``total`` units.

    Parameters
    ----------
    jobs: the `JobTable` schedulers see (estimates, sizes...).
    runtime: actual runtimes at rate 1 (s).
    kill_limit: wall-clock limit per job (s; inf = none): the job ends at segment start + kill_limit.
    scheduler: the policy (`twin.contract.Scheduler`, or any object with ``schedule``).
    total: units of the machine.
    placer: object with ``place(job, procs, free_mask) -> unit ids`` (None = first-fit).
    models: `RunModel` instances stepped at every start and finish.
    context: the models' `ModelContext` (seed, system, options); gates: `twin.contract.Gate`s.
    progress: a tqdm-like object with ``update(n)`` (or None).
    node_group: node -> group map handed to policies in their `BindContext` (or None).
    held_jobs: the last ``held_jobs`` rows of ``jobs`` are *held*: not in the submission stream; a
        model submits them at its events (`EngineControl.submit`, the submit time written into
        ``jobs.submit``) and may end them (`EngineControl.release`): node requests of a serving
        deployment (`twin.serving.batch`). Their ``jobs.submit`` is +inf until then.
    fast_path: the seam of a compiled fast path (`twin.backends.engine_fast_path`): a callable
        ``(simulation) -> SimResult | None`` asked before the loop; it returns the result when the
        whole run is eligible (no hook, placer, gate or model needing Python per event), else None.
    """

    #: events in a row with no start, finish or submission while jobs wait on a machine where
    #: nothing runs, after which the run stops (`twin.guards`)
    quiet_limit = QUIET_EVENTS

    def __init__(self, jobs: JobTable, runtime: np.ndarray, kill_limit: np.ndarray,
                 scheduler: Scheduler, total: int, placer=None, models: Sequence[RunModel] = (),
                 context: ModelContext | None = None, progress=None, gates: Sequence = (),
                 node_group: np.ndarray | None = None, fast_path=None, held_jobs: int = 0):
        self.jobs = jobs
        self.runtime = np.asarray(runtime, dtype=np.float64)
        self.kill_limit = np.asarray(kill_limit, dtype=np.float64)
        self.scheduler = scheduler
        self.cluster = Cluster(total)
        self.placer = placer
        self.models = list(models)
        self.gates = list(gates)
        # dependencies and array throttles (`twin.dependencies`): only when the workload has them; the
        # gate then hides ineligible jobs from the policy (and, being a gate, keeps fast paths off)
        self._dep_gate = dependency_gate(self, jobs)
        if self._dep_gate is not None:
            self.gates.append(self._dep_gate)
        self.context = context
        self.progress = progress
        self.node_group = node_group
        self.fast_path = fast_path
        n = self.n = len(jobs)
        if not 0 <= held_jobs <= n:
            raise SimulationError(f"held_jobs = {held_jobs}, but the job table has {n} jobs")
        #: the last ``held`` jobs are not in the log's submission stream: a model submits them at its
        #: events (`EngineControl.submit`); until then they are neither waiting nor expected to finish
        self.held_jobs = int(held_jobs)
        if n and np.any(np.diff(jobs.submit[:n - held_jobs]) < 0):
            raise SimulationError("jobs must be sorted by submit time")
        if n and (jobs.procs.max() > total or jobs.procs.min() < 1):
            bad = int(np.flatnonzero((jobs.procs > total) | (jobs.procs < 1))[0])
            raise SimulationError(f"job {int(jobs.job_id[bad])} needs {int(jobs.procs[bad])} units; "
                                  f"the machine has {total}")

    # ------------------------------------------------------------------ the loop
    #: a subclass whose policy takes external decisions (`twin.rl.engine.SteppedSimulation`) sets this:
    #: before each pass the loop yields while ``scheduler.deciding()`` and commits what it is sent
    EXTERNAL_DECISIONS = False
    #: exceptions of a subclass's own that pass through the loop unchanged (not located as model errors)
    PASS_THROUGH: tuple = ()

    def run(self) -> SimResult:
        """Run to the end and return the `SimResult` (the loop of `steps`, driven without decisions)."""
        if self.fast_path is not None and not self.held_jobs and (res := self.fast_path(self)) is not None:
            return res
        steps = self.steps()
        try:
            next(steps)                    # a plain run never yields: the whole loop runs in this call
        except StopIteration as done:
            res = done.value
        else:
            steps.close()
            raise SimulationError("the policy asked for an external decision; drive the loop with steps()")
        self._prog = self._ledger = self._queue = self._rec = self._timers = None   # per-job state: freed
        self._submit = self._job_id = self._procs = self._est = self._runtime = None
        return res

    def before_event(self, now: float) -> None:
        """Hook of subclasses, at each event time before anything of it is applied (called only when
        overridden)."""

    def after_event(self, now: float) -> None:
        """Hook of subclasses, at each event time after its pass (called only when overridden)."""

    def steps(self):
        """The event loop as a generator; returns the `SimResult`. Same-instant order: finishes, model
        events, submissions, the policy's wake-up, then one scheduling pass. With `EXTERNAL_DECISIONS`,
        before the pass it yields ``now`` (s) while the policy is ``deciding()`` and passes what it is
        sent to ``policy.commit``; otherwise it never yields."""
        self._bind()
        prog, timers, queue, cluster, rec = self._prog, self._timers, self._queue, self.cluster, self._rec
        n, submit, fin_heap, tim_heap, on_submit = (self.n - self.held_jobs, self._submit, prog.heap, timers.heap,
                                                    self._hooks.on_submit)
        has_events, rec_t, rec_busy, rec_q = bool(self._event_models), rec.t.append, rec.busy.append, rec.queue.append
        q_new, q_waiting, wakeup, driving = queue.new, queue.waiting, self._wakeup, self._driving
        decider = self.scheduler if self.EXTERNAL_DECISIONS else None
        gate = self._dep_gate
        before = self.before_event if type(self).before_event is not Simulation.before_event else None
        after = self.after_event if type(self).after_event is not Simulation.after_event else None
        now, ptr, events, version, quiet = 0.0, 0, 0, prog.version, 0
        try:
            while True:
                t_sub = submit[ptr] if ptr < n else INF
                t_fin = ((fin_heap[0][0] if fin_heap[0][3] == version[fin_heap[0][2]] else prog.next_time())
                         if fin_heap else INF)
                t_tim = timers.next_time(self._finished < self._expected or driving) if tim_heap else INF
                now = t_fin if t_fin < t_sub else t_sub
                if t_tim < now:
                    now = t_tim
                if now == INF:
                    if gate is not None:                # jobs whose dependency can never hold end here
                        gate.settle(cluster.now, final=True)
                    self._check_deadlock()
                    break
                cluster.now = now
                events += 1
                if before is not None:
                    before(now)
                finished = t_fin <= now and self._finishes(now)                 # 1. ties by job id
                acted = has_events and self._model_events(now)                  # 2. in model order
                submitted = t_sub <= now                                        # 3. ties by job id
                if submitted:
                    while ptr < n and submit[ptr] <= now:
                        q_new.append(ptr)
                        q_waiting[ptr] = 1
                        if on_submit is not None and on_submit(now, ptr):   # refused at submission
                            q_new.pop()
                            self._refuse_submit(now, ptr)
                        ptr += 1
                    self._ptr = ptr
                woke = timers.wake is not None and timers.policy_due(now)       # 4. the policy's wake-up
                if q_new:
                    queue.merge()
                started = 0
                arr = queue.arr if gate is None else gate.visible(now)          # what the policy may see
                if (finished or acted or submitted or woke) and len(arr):
                    if decider is not None:                                     # external decisions first
                        decider.begin_pass(now, arr, cluster)
                        while decider.deciding():
                            decider.commit((yield now))
                    started = self._pass(now, arr)                              # 5. one pass
                if after is not None:
                    after(now)
                down = cluster.down                                             # record the state
                rec_t(now)
                rec_busy(cluster.total - cluster._free - down)
                rec_q(len(queue.arr))
                if rec.down is not None:
                    rec.down.append(down)
                if wakeup is not None:
                    nxt = wakeup(now)
                    if nxt is not None:
                        self._set_wakeup(now, nxt)
                if finished or submitted or started:
                    quiet = 0
                elif len(queue.arr):
                    quiet = self._guard(now, acted, quiet)
            self.events = events
        except (SimulationError, KeyboardInterrupt, *self.PASS_THROUGH):
            raise
        except (RateError, QueueError) as e:
            raise SimulationError(str(e)) from None
        except Exception as e:
            raise located(e, now, self._owners) from e
        rec.close()
        for m in self.models:
            m.finalize(rec.end_time)
        return self._result()

    # ------------------------------------------------------------------ set-up
    def _bind(self) -> None:
        jobs, cluster, sched, n = self.jobs, self.cluster, self.scheduler, self.n
        # read-only per-job inputs as compact arrays (8 bytes a value; read a few times a job)
        self._submit = _f64(jobs.submit)
        self._job_id = array("q", np.ascontiguousarray(jobs.job_id, dtype=np.int64).tobytes())
        self._procs = array("q", np.ascontiguousarray(jobs.procs, dtype=np.int64).tobytes())
        self._est = _f64(jobs.estimate)
        self._runtime = _f64(self.runtime)
        ctx = self.context or ModelContext(n_nodes=cluster.total, jobs=jobs, runtime=self.runtime)
        bctx = BindContext(jobs, cluster, cluster.total, seed=ctx.seed, node_group=self.node_group,
                           models={m.name: (m.view() if hasattr(m, "view") else ModelView(m)) for m in self.models},
                           system=ctx.system, options=ctx.options,
                           eligible=self._dep_gate.eligible if self._dep_gate is not None else None,
                           log_start=ctx.log_start)
        bind_policy(sched, bctx)
        own_placer = sched.engine_placer() if callable(getattr(sched, "engine_placer", None)) else None
        self._placer = own_placer if own_placer is not None else self.placer
        if callable(getattr(sched, "engine_gates", None)):
            self.gates = self.gates + list(sched.engine_gates())
        for g in self.gates:
            bind_policy(g, bctx)
        for m in self.models:
            m.bind(ctx)
        self.sched_name = getattr(sched, "name", type(sched).__name__)
        self._owners = [(o, f"scheduler {self.sched_name}") for o in _policy_chain(sched)]
        self._owners.append((self._placer, "placer"))
        self._owners += [(g, f"gate {g.name}") for g in self.gates]
        self._owners += [(m, f"model {m.name}") for m in self.models]
        self._hooks = resolve_hooks(sched)
        mh = [model_hooks(m) for m in self.models]
        self._model_start = [(k, h["on_start"]) for k, h in enumerate(mh) if h["on_start"]]
        self._model_finish = [(k, h["on_finish"]) for k, h in enumerate(mh) if h["on_finish"]]
        self._event_models = [k for k, h in enumerate(mh) if h["next_event"]]
        self._model_delay = [(k, h["start_delay"]) for k, h in enumerate(mh) if h["start_delay"]]
        # models whose next event is asked again after their start_delay, on_start and on_finish
        self._retimed = [k for k in self._event_models
                         if getattr(self.models[k], "events_follow_jobs", False) is True]
        gh = [gate_hooks(g) for g in self.gates]
        self._gate_pass = [h["begin_pass"] for h in gh if h["begin_pass"]]
        self._gate_start = [h["on_start"] for h in gh if h["on_start"]]
        self._gate_finish = [h["on_finish"] for h in gh if h["on_finish"]]
        self._left_hooks = bool(self._gate_finish or self._model_finish)
        self._after_start = bool(self._gate_start or self._model_start)
        wakes = [f for f in [self._hooks.next_wakeup] + [h["next_wakeup"] for h in gh] if f]
        self._wakeup = wakes[0] if len(wakes) == 1 else (_earliest(wakes) if wakes else None)
        work = self._engine_work(mh)
        prog = self._prog = Progress(work.tolist(), _f64(self.kill_limit), self._job_id, len(self.models))
        prog.model_names = [m.name for m in self.models]
        prog.rate_hooks = [h["on_rate_change"] for h in mh if h["on_rate_change"]]
        prog._running = cluster.is_running
        self._work0 = work
        self._queue = WaitQueue(n)
        self._ledger = Ledger(self._submit)
        self._rec = Recorder(self.progress)
        self._done = self._rec.job_done if self.progress is not None else None
        self._timers = Timers(len(self.models))
        t0 = self._submit[0] if n else 0.0
        # models whose own events keep the run going once every job has ended (``drives_run``: a
        # serving deployment still serving): their live timers, by model index
        self._drivers = {k for k in self._event_models if getattr(self.models[k], "drives_run", False)}
        self._driving: set[int] = set()
        for k in self._event_models:
            self._set_model_timer(k, self.models[k].next_event(t0))
        cluster.pseudo_base = n
        self._control = EngineControl(self)
        self._preemptions: array | None = None         # times each job was preempted (EngineControl.preempt)
        self._preempted: bytearray | None = None        # jobs a preemption ended (PreemptMode=CANCEL)
        if callable(getattr(sched, "engine_control", None)):
            sched.engine_control(self._control)         # a policy that preempts (the Slurm-like PreemptType)
        self._ptr = self._finished = self.passes = self.events = 0
        self._cancelled: bytearray | None = None       # jobs a model withdrew while waiting (cancel)
        self._cancel_time: array | None = None         # when (s; NaN: not cancelled), with _cancelled
        self._expected = n - self.held_jobs     # jobs that will end: the log's, plus held jobs once submitted
        self._refusals = {g.name: 0 for g in self.gates}

    def _engine_work(self, mh: list) -> np.ndarray:
        """Engine work per job (nominal s): the runtime, unless a model adds to it (checkpoints...)."""
        work = self.runtime
        for m, h in zip(self.models, mh):
            w = h["engine_work"](work) if h["engine_work"] else None
            if w is not None:
                w = np.asarray(w, dtype=np.float64)
                if w.shape != work.shape or not (w >= 0).all():
                    raise SimulationError(f"model {m.name} gave an invalid engine work array")
                work = w
        return work

    # ------------------------------------------------------------------ 1. finishes
    def _finishes(self, now: float) -> bool:
        prog, cluster, led = self._prog, self.cluster, self._ledger
        heap, version, work_left, start_seg = prog.heap, prog.version, prog.work_left, prog.start_seg
        last_t, rate, kill_limit, runtime, seg_work = (prog.last_t, prog.rate, prog.kill_limit, self._runtime,
                                                       prog.seg_work)
        on_finish, left, done = self._hooks.on_finish, self._left_hooks, self._done
        count = 0
        while heap and heap[0][0] <= now:
            _, _, j, ver = heappop(heap)
            if ver != version[j]:
                continue
            work_left[j] -= (now - last_t[j]) * rate[j]
            count += 1
            killed = now == start_seg[j] + kill_limit[j] and work_left[j] > 1e-9 * max(1.0, runtime[j])
            led.close(j, start_seg[j], now, seg_work[j] - work_left[j], cluster.release(j), now, killed)
            if on_finish is not None:
                on_finish(now, j)
            if left:
                self._left_units(now, j)
            if done is not None:
                done()
        self._finished += count
        return count > 0

    def _left_units(self, now: float, j: int) -> None:
        """Job ``j`` left its units (finish, kill, interruption): gates and models are told."""
        for fn in self._gate_finish:
            fn(now, j)
        if self._model_finish:
            prog = self._prog
            prog.forget(j)
            for k, fn in self._model_finish:
                prog.apply(now, k, fn(now, j))
            for k in self._retimed:
                self._set_model_timer(k, self.models[k].next_event(now))

    # ------------------------------------------------------------------ 2. model events
    def _model_events(self, now: float) -> bool:
        if not self._event_models:
            return False
        control, prog, acted = self._control, self._prog, False
        for k in self._timers.models_due(now):
            m = self.models[k]
            control._now = now
            prog.apply(now, k, m.on_event(now, control))
            if control._ops:
                acted = True
                control.apply(now)
            self._set_model_timer(k, m.next_event(now))
        return acted

    def _set_model_timer(self, k: int, t: float | None) -> None:
        self._timers.set(k, t)
        if k in self._drivers:
            (self._driving.add if t is not None else self._driving.discard)(k)

    # ------------------------------------------------------------------ 4. wake-ups
    def _set_wakeup(self, now: float, nxt: float) -> None:
        """The policy asked for a pass at ``nxt`` (s); kept while anything may still happen."""
        if not nxt > now:
            raise SimulationError(f"scheduler {self.sched_name} asked for a wakeup at {nxt} <= now {now}")
        pending = self._ptr < self.n - self.held_jobs or len(self._queue.arr) or self._prog.heap
        self._timers.set(self._timers.policy, nxt if pending else None)

    # ------------------------------------------------------------------ 5. the pass
    def _pass(self, now: float, arr: np.ndarray | None = None) -> int:
        """One scheduling pass over ``arr`` (the waiting jobs the policy may see; None: the queue)."""
        self.passes += 1
        queue, cluster = self._queue, self.cluster
        decisions = self.scheduler.schedule(now, queue.arr if arr is None else arr, cluster)
        if not decisions:
            return 0
        for fn in self._gate_pass:
            fn(now, cluster)
        started: set[int] = set()
        waiting, n, name, stop, procs, est = queue.waiting, self.n, self.sched_name, None, self._procs, self._est
        first_fit, gates, allocate, open_segment = self._placer is None, self.gates, cluster.allocate, self._ledger.open
        prog, on_start, more, delays = self._prog, self._hooks.on_start, self._after_start, self._model_delay
        start_seg, last_t, push_finish = prog.start_seg, prog.last_t, prog.push_finish
        for d in decisions:
            j, units = (d, None) if type(d) is int else decode(name, d)
            if j in started or not (0 <= j < n) or not waiting[j]:
                raise SimulationError(f"scheduler {name} started job index {j} which is not waiting")
            if stop is not None:
                self._refuse(now, j, *stop)
                continue
            p = procs[j]
            if p > cluster._free:
                raise SimulationError(f"scheduler {name} started job {self._job_id[j]} ({p} units) "
                                      f"at t={now} with only {cluster._free} free")
            if units is None and first_fit:
                units, checked = cluster.first_free(p), True
            else:
                units, checked = self._units(j, units), False
            if gates:
                refusal = self._admit(now, j, units)
                if refusal is not None:
                    if refusal[2]:
                        stop = (refusal[0], f"{refusal[1]} (refused with an earlier start of this pass)")
                    continue
            begin = now if not delays else self._begin(now, j, units)    # the run begins (RunModel.start_delay)
            try:
                allocate(j, units, now, begin + est[j], checked)
            except CapacityError as e:
                raise SimulationError(f"scheduler {name}: {e}") from None
            open_segment(j, begin)
            start_seg[j] = last_t[j] = begin
            push_finish(j, begin)
            if on_start is not None:
                on_start(now, j)
            if more:
                self._started(now, j, units)
            started.add(j)
        if started:
            queue.remove(started)
        return len(started)

    def _begin(self, now: float, j: int, units: np.ndarray) -> float:
        """When the run of job ``j``, taking ``units`` at ``now``, begins (s): ``now`` plus the longest
        delay a model asks (`RunModel.start_delay`; nodes resuming from power saving)."""
        d = 0.0
        for k, fn in self._model_delay:
            x = fn(now, j, units)
            if x is not None:
                x = float(x)
                if not 0.0 <= x < INF:
                    raise SimulationError(f"model {self.models[k].name} gave job {self._job_id[j]} a start "
                                          f"delay of {x} s (must be finite and >= 0)")
                d = x if x > d else d
            if k in self._retimed:
                self._set_model_timer(k, self.models[k].next_event(now))
        return now + d

    def _units(self, j: int, chosen) -> np.ndarray:
        """The units of job ``j`` from the decision or the placer, checked for type and count."""
        p = self._procs[j]
        if chosen is None:
            chosen = self._placer.place(j, p, self.cluster.free_mask)
        else:
            chosen = check_units(self.sched_name, self._job_id[j], chosen)
        if len(chosen) != p:
            raise SimulationError(f"job {self._job_id[j]}: {len(chosen)} units chosen for a request of {p}")
        return chosen

    def _admit(self, now: float, j: int, units: np.ndarray):
        """None if every gate admits the start; else (gate name, reason, rest of pass) after telling the policy."""
        for g in self.gates:
            r = g.admit(now, j, units, self.cluster)
            if r is not None:
                self._refuse(now, j, g.name, r.reason)
                return g.name, r.reason, r.rest_of_pass
        return None

    def _refuse(self, now: float, j: int, gate: str, reason: str) -> None:
        self._refusals[gate] += 1
        if self._hooks.on_refused is not None:
            self._hooks.on_refused(now, j, reason)

    def _started(self, now: float, j: int, units: np.ndarray) -> None:
        """Gates and models are told of a start just applied."""
        for fn in self._gate_start:
            fn(now, j, units)
        prog = self._prog
        for k, fn in self._model_start:
            prog.apply(now, k, fn(now, j, units))
        for k in self._retimed:
            self._set_model_timer(k, self.models[k].next_event(now))

    def _refuse_submit(self, now: float, j: int) -> None:
        """The policy's ``on_submit`` answered a reason (a non-empty string) for log job ``j``: the job
        never enters the queue and never starts (Slurm's submission rejected by a QOS or association
        limit, e.g. ``MaxSubmitJobsPerUser``; ``jobs.csv`` shows it PENDING, the policy's own columns
        say why). It is not expected to end."""
        self._queue.waiting[j] = 0
        self._ledger.enqueued[j] = math.nan
        self._expected -= 1
        if self._done is not None:
            self._done()

    # ------------------------------------------------------------------ guards and the end
    def _check_deadlock(self) -> None:
        q = self._queue
        if len(q):
            j = q.first()
            raise SimulationError(
                f"deadlock: {len(q)} jobs wait (first: job {self._job_id[j]}, {self._procs[j]} units) on "
                f"an idle machine and no event is pending; scheduler {self.sched_name} never starts them")

    def _guard(self, now: float, by_models: bool, quiet: int) -> int:
        """An event with no start, finish or submission while jobs wait: the count of such events in a
        row on a machine where nothing runs; the run stops at ``quiet_limit``."""
        cluster = self.cluster
        if cluster.busy - cluster.down:
            return 0                             # jobs run: their finishes will come
        if self._dep_gate is not None and self._dep_gate.settle(now):
            return 0                             # only jobs whose dependency can never hold waited
        quiet += 1
        if quiet >= self.quiet_limit:
            j = self._queue.first()
            names = [self.models[k].name for k in self._event_models]
            raise SimulationError(stuck_message(now, self.sched_name, names, len(self._queue), self._job_id[j],
                                                self._procs[j], cluster.total - cluster.down, cluster.total,
                                                quiet, by_models))
        return quiet

    def _result(self) -> SimResult:
        led, prog, rec = self._ledger, self._prog, self._rec
        t, busy, queue, down = rec.arrays()
        return SimResult(
            start=np.array(led.start, dtype=np.float64), end=np.array(led.end, dtype=np.float64),
            killed=np.frombuffer(led.killed, dtype=np.uint8).astype(bool), nodes=led.node_text(), change_t=t,
            change_busy=busy, change_queue=queue, models=self.models, passes=self.passes, events=self.events,
            failed=np.frombuffer(led.failed, dtype=np.uint8).astype(bool),
            interruptions=np.array(led.interruptions, dtype=np.int64),
            work_done=np.array(led.work_done, dtype=np.float64), held=np.array(led.held, dtype=np.float64),
            queued=np.array(led.queued, dtype=np.float64), segments=led.segments,
            last_start=np.array(prog.start_seg, dtype=np.float64), change_down=down,
            refusals=dict(self._refusals),
            cancelled=None if self._cancelled is None else np.frombuffer(self._cancelled, dtype=np.uint8).astype(bool),
            cancel_time=None if self._cancel_time is None else np.array(self._cancel_time, dtype=np.float64),
            dependencies=None if self._dep_gate is None else self._dep_gate.report(),
            preemptions=None if self._preemptions is None else np.array(self._preemptions, dtype=np.int64),
            preempted=None if self._preempted is None else np.frombuffer(self._preempted, dtype=np.uint8).astype(bool))


def _f64(a) -> array:
    """A numpy array as a compact ``array('d')`` (8 bytes a value)."""
    return array("d", np.ascontiguousarray(a, dtype=np.float64).tobytes())


def _policy_chain(sched) -> list:
    """The policy and every object it wraps (``inner``, ``plugin``): all answer for the scheduler."""
    out, todo = [], [sched]
    while todo:
        o = todo.pop()
        if o is not None and all(o is not x for x in out):
            out.append(o)
            todo += [getattr(o, "inner", None), getattr(o, "plugin", None)]
    return out


def _earliest(fns: list):
    """One wake-up function from several: the earliest of their answers (None if all None)."""
    def wakeup(now: float) -> float | None:
        times = [t for t in (f(now) for f in fns) if t is not None]
        return min(times) if times else None
    return wakeup
