"""`ExternalScheduler`: a scheduler in another process, in any language, over JSON lines.

``--scheduler exec:CMD`` (or ``ExternalScheduler("CMD")``) starts ``CMD`` (split like a shell
would, no shell) and talks to it over its standard input and output, one JSON object per line, in
the spirit of Batsim's protocol (Dutot et al., "Batsim: a realistic language-independent resources
and jobs management systems simulator", JSSPP 2016): the twin sends the events of the simulation
(simulation begins, job submitted, job completed, job killed, requested call, resources down/up,
simulation ends) with a read-only snapshot of the machine, and reads back decisions (execute job
[on units], reject job, call me later). The message schemas, with examples, are in
``docs/protocol.md``; reference clients are in ``examples/schedulers/``.

One request/response round trip per scheduling pass: the events since the last message are
batched into the pass's message, as Batsim batches the events of one instant. Events that happen
when the engine runs no pass (a job completing with an empty queue) travel with the next message.

Errors: a process that exits, prints a line that is not JSON, sends an unknown event type or an
invalid decision (a job that is not waiting, units that are not free or not the job's count, a
call-me-later in the past), or does not answer within ``timeout_s``, stops the run with an
`ExternalSchedulerError` naming the command, the message number and the offending line (and the
last lines the process wrote to its standard error).

``REJECT_JOB`` is parsed and validated, then refused with a clear error: the engine has no job
rejection yet (a job stays queued until it runs), so a rejection cannot be honoured truthfully.

Times are seconds on the log's clock; job ids are the log's job ids; units are allocation-unit
indices written as ranges (``"0-3,8"``).
"""
from __future__ import annotations

import atexit
import json
import math
import os
import select
import shlex
import subprocess
import tempfile
import time

import numpy as np

from hpctwin.twin.ranges import parse_ranges, ranges_of_sorted

from .base import BindContext, ClusterView, Scheduler, Start

#: protocol version sent in SIMULATION_BEGINS; bumped on incompatible changes
PROTOCOL_VERSION = 1
#: decision types a client may send
DECISIONS = ("EXECUTE_JOB", "REJECT_JOB", "CALL_ME_LATER")


class ExternalSchedulerError(RuntimeError):
    """The external scheduler process broke the protocol (see the module docstring)."""


class _Process:
    """A child process spoken to in JSON lines, with a reply timeout and its stderr kept."""

    def __init__(self, command: str, cwd: str | None = None):
        self.command = command
        argv = shlex.split(command)
        if not argv:
            raise ExternalSchedulerError("exec scheduler: empty command (use --scheduler exec:CMD)")
        self._err = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                         cwd=cwd, bufsize=0)
        except OSError as e:
            raise ExternalSchedulerError(f"exec scheduler {command!r}: cannot start {argv[0]!r}: "
                                         f"{e.strerror or e}") from None
        self._buf = b""

    def stderr_tail(self, lines: int = 5) -> str:
        self._err.seek(0)
        tail = self._err.read().decode("utf-8", "replace").strip().splitlines()[-lines:]
        return ("; its stderr ends with: " + " | ".join(tail)) if tail else ""

    def send(self, obj: dict) -> None:
        data = (json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n").encode()
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self.dead("while the twin was writing to it") from None

    def readline(self, timeout_s: float) -> str | None:
        """The next line of the child's stdout (without the newline), or None at end of file."""
        deadline = time.monotonic() + timeout_s
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                if self._buf:
                    line, self._buf = self._buf, b""
                    return line.decode("utf-8", "replace")
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode("utf-8", "replace").rstrip("\r")

    def dead(self, when: str) -> ExternalSchedulerError:
        code = self.proc.poll()
        if code is None:
            try:
                code = self.proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                code = None
        status = f"exited with status {code}" if code is not None else "closed its output"
        return ExternalSchedulerError(f"exec scheduler {self.command!r} {status} {when}{self.stderr_tail()}")

    def close(self, timeout_s: float = 5.0) -> int | None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class ExternalScheduler(Scheduler):
    """A policy in another process speaking the JSON-lines protocol (see the module docstring).

    Parameters
    ----------
    command: the command line (``"python3 my_sched.py --flag"``), split with `shlex` (no shell).
    timeout_s: longest wait (s, wall clock) for one reply.
    cwd: working directory of the process (default: the current one).
    name: label in results (default ``exec:<command>``).
    """

    def __init__(self, command: str, timeout_s: float = 60.0, cwd: str | None = None, name: str | None = None):
        if not timeout_s > 0:
            raise ValueError(f"exec scheduler: timeout_s must be > 0, got {timeout_s!r}")
        self.command = str(command)
        self.timeout_s = float(timeout_s)
        self.cwd = cwd
        self.name = name or f"exec:{self.command}"
        self._proc: _Process | None = None
        self._events: list[dict] = []
        self._calls: list[float] = []        # requested call times (s), sorted
        self.messages = 0
        self.rejected = 0

    # ------------------------------------------------------------------ lifecycle
    def bind(self, ctx: BindContext, cluster: ClusterView | None = None) -> None:
        super().bind(ctx, cluster)
        jobs, cluster = self.jobs, self.ctx.cluster
        self._ids = np.asarray(jobs.job_id).tolist()
        self._index = {int(x): i for i, x in enumerate(self._ids)}
        self._procs = np.asarray(jobs.procs).tolist()
        self._done = 0
        self._ended = False
        self._starts: dict[int, float] = {}   # running job -> start of its current run (s)
        self._proc = _Process(self.command, self.cwd)
        atexit.register(self.close)
        self._events = [self._event(float(jobs.submit[0]) if len(jobs) else 0.0, "SIMULATION_BEGINS", {
            "protocol": PROTOCOL_VERSION, "nb_resources": int(cluster.total), "nb_jobs": len(jobs),
            "time_unit": "s", "allocation_unit": "unit"})]

    def close(self) -> None:
        """Send SIMULATION_ENDS (with the events not sent yet) and wait for the process to exit."""
        if self._proc is None or self._ended:
            return
        self._ended = True
        now = self._events[-1]["timestamp"] if self._events else 0.0
        self._events.append(self._event(now, "SIMULATION_ENDS", {}))
        try:
            self._proc.send({"now": now, "events": self._events})
        except ExternalSchedulerError:
            pass
        self._events = []
        self._proc.close()

    @staticmethod
    def _event(now: float, kind: str, data: dict) -> dict:
        return {"timestamp": float(now), "type": kind, "data": data}

    def _job(self, j: int) -> dict:
        jt = self.jobs
        req = float(jt.requested_time[j])
        return {"id": int(self._ids[j]), "subtime": float(jt.submit[j]), "res": int(self._procs[j]),
                "walltime": req if math.isfinite(req) and req > 0 else None, "estimate": float(jt.estimate[j]),
                "user": int(jt.user[j]), "group": int(jt.group[j]), "queue": int(jt.queue[j]),
                "partition": int(jt.partition[j])}

    # ------------------------------------------------------------------ hooks -> events
    def on_submit(self, now: float, job: int) -> None:
        self._events.append(self._event(now, "JOB_SUBMITTED", {"job_id": int(self._ids[job]), "job": self._job(job)}))

    def on_finish(self, now: float, job: int) -> None:
        start = self._starts.pop(job, now)
        req = float(self.jobs.requested_time[job])
        state = ("COMPLETED_WALLTIME_REACHED" if math.isfinite(req) and req > 0 and now - start >= req * (1 - 1e-12)
                 else "COMPLETED_SUCCESSFULLY")
        self._events.append(self._event(now, "JOB_COMPLETED", {"job_id": int(self._ids[job]), "job_state": state}))
        self._done += 1
        if self._done == len(self._ids):
            self.close()

    def on_interrupt(self, now: float, job: int) -> None:
        self._starts.pop(job, None)
        self._events.append(self._event(now, "JOB_KILLED", {"job_ids": [int(self._ids[job])],
                                                            "reason": "node failure"}))

    def on_cancel(self, now: float, job: int) -> None:
        self._events.append(self._event(now, "JOB_KILLED", {"job_ids": [int(self._ids[job])],
                                                            "reason": "cancelled while waiting"}))
        self._done += 1
        if self._done == len(self._ids):
            self.close()

    def on_requeue(self, now: float, job: int) -> None:
        self._events.append(self._event(now, "JOB_SUBMITTED", {"job_id": int(self._ids[job]), "job": self._job(job),
                                                               "resubmitted": True}))

    def on_refused(self, now: float, job: int, reason: str) -> None:
        self._events.append(self._event(now, "JOB_REFUSED", {"job_id": int(self._ids[job]), "reason": reason}))

    def on_units_down(self, now: float, units, until: float) -> None:
        self._events.append(self._event(now, "RESOURCE_STATE_CHANGED", {
            "resources": ranges_of_sorted(np.sort(np.asarray(units))), "state": "down", "until": float(until)}))

    def on_units_up(self, now: float, units) -> None:
        self._events.append(self._event(now, "RESOURCE_STATE_CHANGED", {
            "resources": ranges_of_sorted(np.sort(np.asarray(units))), "state": "up"}))

    def next_wakeup(self, now: float) -> float | None:
        while self._calls and self._calls[0] <= now:
            self._calls.pop(0)
        return self._calls[0] if self._calls else None

    # ------------------------------------------------------------------ one pass = one round trip
    def schedule(self, now: float, queue: np.ndarray, cluster: ClusterView) -> list[int | Start]:
        due = [t for t in self._calls if t <= now]
        for t in due:
            self._events.append(self._event(now, "REQUESTED_CALL", {"timestamp": t}))
        self._calls = [t for t in self._calls if t > now]
        msg = {"now": float(now), "events": self._events, "state": self._state(now, queue, cluster)}
        self._events = []
        self.messages += 1
        self._proc.send(msg)
        line = self._read(now)
        starts = self._decisions(now, line, queue, cluster)
        for s in starts:
            self._starts[int(getattr(s, "job", s))] = now
        return starts

    def _state(self, now: float, queue: np.ndarray, cluster: ClusterView) -> dict:
        n = len(self._ids)
        run = []
        for j, p, e in zip(np.asarray(cluster.running_jobs).tolist(), np.asarray(cluster.running_procs).tolist(),
                           np.asarray(cluster.running_expected_end).tolist()):
            if j < n:
                run.append({"job_id": int(self._ids[j]), "res": int(p), "expected_end": float(e)})
            else:
                run.append({"job_id": None, "down": True, "res": int(p), "expected_end": float(e)})
        free = np.flatnonzero(np.asarray(cluster.free_mask))
        return {"now": float(now), "nb_free": int(cluster.free), "free": ranges_of_sorted(free),
                "queue": [int(self._ids[j]) for j in np.asarray(queue).tolist()], "running": run}

    def _read(self, now: float) -> str:
        where = f"in reply to message {self.messages} (t={now:g} s)"
        try:
            line = self._proc.readline(self.timeout_s)
        except TimeoutError:
            raise ExternalSchedulerError(f"exec scheduler {self.command!r}: no reply within {self.timeout_s:g} s "
                                         f"{where}{self._proc.stderr_tail()}") from None
        if line is None:
            raise self._proc.dead(where)
        return line

    def _error(self, now: float, line: str, what: str) -> ExternalSchedulerError:
        shown = line if len(line) <= 200 else line[:200] + "..."
        return ExternalSchedulerError(f"exec scheduler {self.command!r}, reply to message {self.messages} "
                                      f"(t={now:g} s): {what}; the line was: {shown}")

    def _decisions(self, now: float, line: str, queue: np.ndarray, cluster: ClusterView) -> list[int | Start]:
        try:
            reply = json.loads(line)
        except json.JSONDecodeError as e:
            raise self._error(now, line, f"not JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(reply, dict) or not isinstance(reply.get("events", []), list):
            raise self._error(now, line, 'expected an object {"now": t, "events": [...]}')
        waiting = set(np.asarray(queue).tolist())
        free_mask = np.asarray(cluster.free_mask).copy()
        free = int(cluster.free)
        out: list[int | Start] = []
        for k, ev in enumerate(reply.get("events", [])):
            kind = ev.get("type") if isinstance(ev, dict) else None
            data = ev.get("data", {}) if isinstance(ev, dict) else {}
            if kind not in DECISIONS or not isinstance(data, dict):
                raise self._error(now, line, f"event {k}: unknown decision type {kind!r}; known: {', '.join(DECISIONS)}")
            if kind == "CALL_ME_LATER":
                t = data.get("timestamp")
                if not isinstance(t, (int, float)) or not t > now or not math.isfinite(t):
                    raise self._error(now, line, f"event {k}: CALL_ME_LATER timestamp must be a number > now ({now:g}), "
                                                 f"got {t!r}")
                self._calls = sorted(set(self._calls) | {float(t)})
                continue
            j = self._waiting_job(now, line, k, kind, data, waiting)
            if kind == "REJECT_JOB":
                raise self._error(now, line, f"event {k}: REJECT_JOB of job {data['job_id']}: the engine has no job "
                                             "rejection yet (a job stays queued until it runs); start it later instead")
            p = int(self._procs[j])
            alloc = data.get("alloc")
            if alloc is None:
                if p > free:
                    raise self._error(now, line, f"event {k}: job {data['job_id']} needs {p} units, {free} are free")
                units = np.flatnonzero(free_mask)[:p]
                out_item: int | Start = j
            else:
                units = self._units(now, line, k, data, alloc, p, free_mask)
                out_item = Start(j, units)
            free_mask[units] = False
            free -= p
            waiting.discard(j)
            out.append(out_item)
        return out

    def _waiting_job(self, now, line, k, kind, data, waiting) -> int:
        jid = data.get("job_id")
        j = self._index.get(jid) if isinstance(jid, int) and not isinstance(jid, bool) else None
        if j is None:
            raise self._error(now, line, f"event {k}: {kind} names job_id {jid!r}, not a job of the workload")
        if j not in waiting:
            raise self._error(now, line, f"event {k}: {kind} of job {jid}, which is not waiting (running, done, "
                                         "or started twice in this reply)")
        return j

    def _units(self, now, line, k, data, alloc, p, free_mask) -> np.ndarray:
        try:
            units = np.asarray(parse_ranges(str(alloc)), dtype=np.int64)
        except ValueError as e:
            raise self._error(now, line, f"event {k}: alloc {alloc!r} is not a unit range list like '0-3,8' ({e})") from None
        if len(units) != p or len(np.unique(units)) != p:
            raise self._error(now, line, f"event {k}: alloc {alloc!r} has {len(np.unique(units))} distinct units; "
                                         f"job {data['job_id']} needs {p}")
        if units.min() < 0 or units.max() >= len(free_mask) or not free_mask[units].all():
            raise self._error(now, line, f"event {k}: alloc {alloc!r} of job {data['job_id']} includes units that are "
                                         "not free")
        return units

    def describe(self) -> dict:
        return {"name": self.name, "command": self.command, "protocol": PROTOCOL_VERSION,
                "messages": self.messages}
