"""What a physics model may do at its own events, and how the engine applies it.

`EngineControl` is handed to ``RunModel.on_event``: read the machine and the running jobs' progress,
interrupt jobs, take units out of service and give them back, submit *held* jobs (rows the engine
keeps out of the log's submission stream, `twin.simulation.Simulation` ``held_jobs``), release
running jobs (end them now, completed: a serving deployment giving back its nodes) and cancel
waiting ones (withdraw a queued request: it never starts, state CANCELLED, its cancel time recorded, as
Slurm's ``scancel``), and lets a policy preempt running jobs (`EngineControl.preempt`, applied at
once). The operations a model asks for are
applied by the engine, in order, right after its ``on_event`` returns (so the state read within one
``on_event`` is the state before them).
"""
from __future__ import annotations

import math
from array import array

import numpy as np

from .cluster import Cluster
from .guards import SimulationError

REQUEUE = ("front", "back", "none")


class EngineControl:
    """A model's handle on the engine during ``on_event`` (see the module docstring)."""

    def __init__(self, sim):
        self._sim = sim
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
        return self._sim._prog.done_in_segment(job, self._now)

    def rate(self, job: int) -> float:
        return self._sim._prog.rate[job]

    def interrupt(self, job: int, new_work: float, requeue: str) -> None:
        """End ``job``'s current segment now and free its units. ``requeue``: "front" or "back"
        puts it back in the queue with ``new_work`` nominal seconds of engine work to do when it
        starts again (restart cost plus the work left); "none" ends it as failed."""
        if requeue not in REQUEUE:
            raise SimulationError(f"unknown requeue position {requeue!r}; use 'front', 'back' or 'none'")
        if not new_work >= 0:
            raise SimulationError(f"job {job}: new engine work must be >= 0 s, got {new_work}")
        self._ops.append(("interrupt", int(job), float(new_work), requeue))

    def state(self, job: int) -> str:
        """``"running"``, ``"waiting"``, ``"held"`` (a held job not submitted yet), ``"future"`` (a
        log job not submitted yet), ``"cancelled"`` (withdrawn while waiting, `cancel`) or ``"done"``
        (completed, killed, failed or released)."""
        sim = self._sim
        if sim.cluster.is_running(job):
            return "running"
        if sim._queue.waiting[job]:
            return "waiting"
        if sim._cancelled is not None and sim._cancelled[job]:
            return "cancelled"
        if job >= sim.n - sim.held_jobs:
            return "held" if sim._submit[job] == math.inf else "done"
        return "done" if job < sim._ptr else "future"

    def submit(self, job: int) -> None:
        """Submit held job ``job`` now: it joins the queue after every job submitted so far (arrival
        order) and the policy sees it like any other (``on_submit``; its ``jobs.submit`` becomes now)."""
        self._ops.append(("submit", int(job)))

    def release(self, job: int) -> None:
        """End running job ``job`` now, completed (its units are freed; policies see ``on_finish``)."""
        self._ops.append(("release", int(job)))

    def cancel(self, job: int) -> None:
        """Withdraw waiting job ``job`` now (Slurm's ``scancel`` of a pending job): it leaves the queue,
        never starts and the policy is told (``on_cancel``). Cancelling a job that is not waiting is
        an error.

        The engine records the cancel's time (s, the ``now`` of the event whose ``on_event`` asked
        for it; ``SimResult.cancel_time``). What Slurm does, and how the twin maps it:

        * slurmctld, ``src/slurmctld/job_mgr.c`` ``job_signal()`` (reached from ``job_str_signal()``
          for ``scancel``), branch ``IS_JOB_PENDING(job_ptr) && (signal == SIGKILL)``: state
          ``JOB_CANCELLED``, ``start_time = end_time = now``, then ``job_completion_logger()``.
        * accounting, ``src/plugins/accounting_storage/mysql/as_mysql_job.c``
          ``as_mysql_job_complete()``: writes only ``time_end`` (= ``end_time``) and the state; the
          row's ``time_start`` stays what ``as_mysql_job_start()`` stored at submission, 0 for a
          pending job (only when no start record reached the database is it inserted then, with
          ``time_start`` = the cancel time).
        * sacct, ``as_mysql_jobacct_process.c`` ``_cluster_get_jobs()``: ``time_start`` 0 gives
          ``elapsed`` 0 and, with an end and the start record received, ``start = NO_VAL``;
          ``src/common/parse_time.c`` ``_make_time_str_internal()`` prints NO_VAL as ``None``
          (0 as ``Unknown``); ``src/sacct/print.c`` (``PRINT_START``/``PRINT_END``/
          ``PRINT_ELAPSED``). So sacct shows Start ``None``, End = the cancel time, Elapsed
          ``00:00:00``, State ``CANCELLED by <uid>``.

        In ``jobs.csv`` the job is ``state`` CANCELLED with ``start``, ``end``, ``wait``, ``elapsed``
        and ``bsld`` empty (it never held units, so no metric counts it as run) and ``cancel_time``
        the cancel's time (a column present only in runs where some job was cancelled);
        `hpctwin.datasets.sacct.export_sacct` writes it as sacct does (End = ``cancel_time``). A job
        that ran, was interrupted and requeued, and is cancelled while waiting again keeps its first
        ``start`` and gets ``end`` = the end of its last segment (the last time it held units), so the
        metrics count the units it held and no NaN end reaches them."""
        self._ops.append(("cancel", int(job)))

    def preempt(self, job: int, cancel: bool = False) -> None:
        """Preempt running ``job`` now, **applied at once** (not queued like the other operations): for
        a policy that holds this control (given by the engine to a policy with an ``engine_control``
        method, asked once at bind) and preempts from inside its ``schedule``, so the units are free for
        the starts it returns in the same pass. The job's segment ends now (its work is lost, as Slurm's
        ``PreemptMode=REQUEUE`` restarts a batch job from the beginning) and the policy is told
        (``on_interrupt``). ``cancel`` False: the job is requeued at the back of the queue with its whole
        engine work to do again (``on_requeue``); True: it ends now, state ``PREEMPTED`` (Slurm's
        ``PreemptMode=CANCEL``). Counted per job in ``SimResult.preemptions`` (and ``preempted``: ended by
        a preemption); runs where no job is preempted keep both None."""
        sim = self._sim
        j = int(job)
        if sim._preemptions is None:
            sim._preemptions = array("q", bytes(8 * sim.n))
            sim._preempted = bytearray(sim.n)
        self._interrupt(sim.cluster.now, j, float(sim._work0[j]), "none" if cancel else "back")
        sim._preemptions[j] += 1
        if cancel:
            sim._preempted[j] = 1

    def kill_at(self, job: int, t: float) -> None:
        """End running ``job``'s current segment at ``t`` (s, >= now) in state ``TIMEOUT`` unless it
        ends sooner, **applied at once**: a limit its policy enforces besides the requested time (the
        Slurm-like policy: a job of a reservation is killed at the reservation's end + ``ResvOverRun``,
        job_mgr.c ``job_time_limit`` -> ``_job_timed_out``). Lowers the segment's kill time only (a later
        ``t`` than the current one changes nothing); a requeued job's next segment has its requested
        limit again."""
        sim = self._sim
        prog, j = sim._prog, int(job)
        if not sim.cluster.is_running(j):
            raise SimulationError(f"kill_at of job {sim._job_id[j]}, which is not running")
        if not t >= sim.cluster.now:
            raise SimulationError(f"kill_at of job {sim._job_id[j]} at t={t} before now (t={sim.cluster.now})")
        limit = float(t) - prog.start_seg[j]
        if limit < prog.kill_limit[j]:
            prog.kill_limit[j] = limit
            prog.push_finish(j, prog.last_t[j])

    def take_down(self, units, until: float) -> None:
        """Take ``units`` (free, or freed by an `interrupt` asked for before) out of service until
        ``until`` (s): schedulers see them held, with ``until`` as the expected end."""
        self._ops.append(("down", np.asarray(units, dtype=np.int64), float(until)))

    def bring_up(self, units) -> None:
        """Return down ``units`` (as taken down together) to service."""
        self._ops.append(("up", np.asarray(units, dtype=np.int64)))

    # ------------------------------------------------------------------ engine side
    def apply(self, now: float) -> None:
        """Apply the operations asked for, in order."""
        ops, self._ops = self._ops, []
        sim = self._sim
        hooks = sim._hooks
        for op in ops:
            if op[0] == "interrupt":
                self._interrupt(now, *op[1:])
            elif op[0] == "submit":
                self._submit(now, op[1])
            elif op[0] == "release":
                self._release(now, op[1])
            elif op[0] == "cancel":
                self._cancel(now, op[1])
            elif op[0] == "down":
                sim.cluster.take_down(op[1], now, op[2])
                sim._rec.outage()
                if hooks.on_units_down is not None:
                    hooks.on_units_down(now, op[1], op[2])
            else:
                sim.cluster.bring_up(op[1])
                if hooks.on_units_up is not None:
                    hooks.on_units_up(now, op[1])

    def _submit(self, now: float, j: int) -> None:
        sim = self._sim
        if not sim.n - sim.held_jobs <= j < sim.n or sim._submit[j] != math.inf:
            raise SimulationError(f"submit of job index {j}, which is not a held job never submitted")
        sim._submit[j] = sim._ledger.enqueued[j] = now
        sim.jobs.submit[j] = now
        sim._queue.requeue(j, "back", sim._ptr)        # keyed after every job submitted so far
        sim._expected += 1
        if sim._hooks.on_submit is not None:
            sim._hooks.on_submit(now, j)

    def _release(self, now: float, j: int) -> None:
        sim = self._sim
        prog, led = sim._prog, sim._ledger
        if not sim.cluster.is_running(j):
            raise SimulationError(f"release of job {sim._job_id[j]}, which is not running")
        if now < prog.start_seg[j]:
            raise SimulationError(f"release of job {sim._job_id[j]} at t={now} before its run begins at "
                                  f"t={prog.start_seg[j]} (a model's start_delay); not supported")
        prog.stop(j, now)
        seg_start = prog.start_seg[j]
        led.close(j, seg_start, now, prog.seg_work[j] - prog.work_left[j], sim.cluster.release(j), now, False)
        if sim._hooks.on_finish is not None:
            sim._hooks.on_finish(now, j)
        if sim._left_hooks:
            sim._left_units(now, j)
        if sim._done is not None:
            sim._done()
        sim._finished += 1

    def _cancel(self, now: float, j: int) -> None:
        sim = self._sim
        queue, led = sim._queue, sim._ledger
        if not 0 <= j < sim.n or not queue.waiting[j]:
            raise SimulationError(f"cancel of job index {j}, which is not waiting")
        queue.remove({j})
        if sim._cancelled is None:
            sim._cancelled = bytearray(sim.n)
            sim._cancel_time = array("d", [math.nan]) * sim.n
        sim._cancelled[j] = 1
        sim._cancel_time[j] = now                       # Slurm's end_time of a pending job's scancel
        led.queued[j] += now - led.enqueued[j]          # its time in the queue, up to the cancel
        led.enqueued[j] = math.nan
        if led.start[j] == led.start[j]:                # it ran before a requeue: its row ends where its
            led.end[j] = next(e for k, _, e, _ in reversed(led.segments) if k == j)   # last segment did
        sim._expected -= 1                              # it will never end
        if sim._hooks.on_cancel is not None:
            sim._hooks.on_cancel(now, j)
        if sim._done is not None:
            sim._done()

    def _interrupt(self, now: float, j: int, new_work: float, where: str) -> None:
        sim = self._sim
        prog, led, hooks = sim._prog, sim._ledger, sim._hooks
        if not sim.cluster.is_running(j):
            raise SimulationError(f"interrupt of job {sim._job_id[j]}, which is not running")
        if now < prog.start_seg[j]:
            raise SimulationError(f"interrupt of job {sim._job_id[j]} at t={now} before its run begins at "
                                  f"t={prog.start_seg[j]} (a model's start_delay); not supported")
        prog.stop(j, now)
        units = sim.cluster.release(j)
        seg_start = prog.start_seg[j]
        led.close(j, seg_start, now, prog.seg_work[j] - prog.work_left[j], units)
        led.interrupted(j, seg_start, now, units)
        if hooks.on_interrupt is not None:
            hooks.on_interrupt(now, j)
        sim._left_units(now, j)
        if where == "none":                       # the job ends here, failed
            led.fail(j, now)
            sim._finished += 1
            sim._rec.job_done()
            return
        prog.work_left[j] = prog.seg_work[j] = float(new_work)
        prog.kill_limit[j] = float(sim.kill_limit[j])   # the next segment's limit (`kill_at` lowers one segment's)
        sim._queue.requeue(j, where, sim._ptr)
        led.requeued(j, now)
        if hooks.on_requeue is not None:
            hooks.on_requeue(now, j)
