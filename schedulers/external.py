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

Errors: a process that exits, prints a line that is not JSON (or not UTF-8, or longer than
`MAX_LINE_BYTES`), sends an unknown event type or an invalid decision (a job that is not waiting,
units that are not free, beyond the machine or not the job's count, a call-me-later in the past, a
time that is not a finite number), writes more than one line for a message, does not read its
input within ``timeout_s`` or does not answer within ``timeout_s``, stops the run with an `ExternalProtocolError`
naming the command, the message
number and the offending line (and the last lines the process wrote to its standard error). It is a
`SimulationError`, so the engine passes it on unchanged and the command line prints it on one line.
A bad set-up (empty command, a program that is not found or not executable, a bad ``timeout_s``, an
unknown option) is an `ExternalSchedulerConfigError`, a `ValueError`, raised when the scheduler is
made. Both are `ExternalSchedulerError`.

The process runs in its own process group (its own session). After an error, and at the end of the
run once the process has had ``min(timeout_s, 5 s)`` to exit, the whole group is ended (SIGTERM,
then SIGKILL after `GRACE_S`), so nothing it started outlives the run; an `atexit` hook does the same
if the run stops for another reason. Its standard error goes to an unlinked temporary file (it can
never block on it); only the last `STDERR_TAIL_BYTES` are read back for error messages.

``REJECT_JOB`` is parsed and validated, then refused with a clear error: the engine has no job
rejection yet (a job stays queued until it runs), so a rejection cannot be honoured truthfully.

Times are seconds on the log's clock; job ids are the log's job ids; units are allocation-unit
indices written as ranges (``"0-3,8"``).
"""
from __future__ import annotations

import atexit
import difflib
import json
import math
import numbers
import os
import re
import selectors
import shlex
import shutil
import signal
import subprocess
import tempfile
import time

import numpy as np
from hpctwin.twin.guards import SimulationError
from hpctwin.twin.ranges import ranges_of_sorted

from .base import BindContext, ClusterView, Scheduler, Start

#: protocol version sent in SIMULATION_BEGINS; bumped on incompatible changes
PROTOCOL_VERSION = 1
#: decision types a client may send
DECISIONS = ("EXECUTE_JOB", "REJECT_JOB", "CALL_ME_LATER")
#: longest reply line accepted (bytes, without its newline): 64 MiB
MAX_LINE_BYTES = 64 * 2**20
#: bytes of the process's standard error read back for an error message (its end)
STDERR_TAIL_BYTES = 64 * 1024
#: seconds between SIGTERM and SIGKILL when the process group is ended
GRACE_S = 1.0
#: longest wait (s) for the process to exit after SIMULATION_ENDS (also at most ``timeout_s``)
CLOSE_WAIT_S = 5.0
#: options of `ExternalScheduler` (``--set scheduler.KEY=VALUE``)
OPTIONS = ("timeout_s", "cwd", "name")
_MAX_WAIT_S = 3600.0          # one selector wait (s); longer timeouts loop (a huge timeout overflows poll)


class ExternalSchedulerError(RuntimeError):
    """The external scheduler could not be set up or broke the protocol (see the module docstring)."""


class ExternalSchedulerConfigError(ExternalSchedulerError, ValueError):
    """A bad ``exec:`` set-up (empty command, program not found or not executable, bad option). A
    `ValueError`: the command line reports it as ``hpctwin: error: ...`` (exit status 2)."""


class ExternalProtocolError(ExternalSchedulerError, SimulationError):
    """The process misbehaved during the run. A `SimulationError`: the engine passes it on unchanged
    and the command line reports it on one line (``hpctwin: simulation error: ...``, exit status 3)."""


class _LineTooLong(Exception):
    """A reply line longer than the bound (``args[0]``: bytes read without a newline)."""


def _printable(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters (then "...") with control characters escaped: one line."""
    s = text if len(text) <= limit else text[:limit] + "..."
    return s if s.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)


def _short(value: object, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters, for an error message."""
    r = repr(value)
    return r if len(r) <= limit else r[:limit] + "..."


# ------------------------------------------------------------------------------ set-up checks
def _check_timeout(value: object) -> float:
    """``timeout_s`` as seconds: a finite number > 0 (a numeric string is accepted)."""
    v = value
    if isinstance(v, str):
        try:
            v = float(v.strip())
        except ValueError:
            v = None
    ok = isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))
    if ok:
        try:
            v = float(v)
        except (OverflowError, ValueError):
            ok = False
    if not ok or not math.isfinite(v) or not v > 0:
        raise ExternalSchedulerConfigError(f"exec scheduler: timeout_s must be a finite number of seconds > 0 "
                                           f"(e.g. --set scheduler.timeout_s=10), got {_short(value)}")
    return v


def _check_options(unknown: dict) -> None:
    """Refuse options `ExternalScheduler` does not have, with a spelling suggestion."""
    if not unknown:
        return
    names = sorted(map(str, unknown))
    hint = ""
    close = difflib.get_close_matches(names[0], OPTIONS, n=1)
    if close:
        hint = f" (did you mean {close[0]!r}?)"
    raise ExternalSchedulerConfigError(f"exec scheduler: unknown option{'s' if len(names) > 1 else ''} "
                                       f"{', '.join(map(repr, names))}{hint}; known: {', '.join(OPTIONS)} "
                                       "(--set scheduler.KEY=VALUE)")


def _check_cwd(cwd: object) -> str | None:
    """The working directory of the process (None: the current one); it must be a directory."""
    if cwd is None:
        return None
    try:
        path = os.fspath(cwd)
    except TypeError:
        raise ExternalSchedulerConfigError(f"exec scheduler: cwd must be a directory path, got {_short(cwd)}") from None
    if not os.path.isdir(path):
        raise ExternalSchedulerConfigError(f"exec scheduler: cwd {path!r} is not a directory")
    return path


def _split_command(command: str) -> list[str]:
    """``command`` split like a shell would (no shell); refuses an empty or unsplittable one."""
    if "\0" in command:
        raise ExternalSchedulerConfigError(f"exec scheduler {command!r}: the command contains a NUL character")
    try:
        argv = shlex.split(command)
    except ValueError as e:
        raise ExternalSchedulerConfigError(f"exec scheduler {command!r}: cannot split the command line ({e}); "
                                           "quote it as a shell would") from None
    if not argv:
        raise ExternalSchedulerConfigError("exec scheduler: empty command (use --scheduler exec:CMD, e.g. "
                                           "exec:python3 my_sched.py)")
    return argv


def _check_program(command: str, prog: str, cwd: str | None) -> None:
    """Refuse a program that cannot be started: a path (relative to ``cwd``) that is missing, a
    directory or not executable; a bare name not found on PATH."""
    if os.sep in prog or (os.altsep and os.altsep in prog):
        path = prog if os.path.isabs(prog) else os.path.join(cwd or os.getcwd(), prog)
        if not os.path.exists(path):
            why = "no such file"
        elif os.path.isdir(path):
            why = "it is a directory"
        elif not os.access(path, os.X_OK):
            why = ("permission denied: the file is not executable (chmod +x it, or name its interpreter: "
                   f"exec:python3 {prog})")
        else:
            return
    elif shutil.which(prog) is not None:
        return
    else:
        why = "not found on PATH"
        if os.path.isfile(os.path.join(cwd or os.getcwd(), prog)):
            why += f" (a file of that name is in the working directory: write ./{prog})"
    raise ExternalSchedulerConfigError(f"exec scheduler {command!r}: cannot start {prog!r}: {why}")


# ------------------------------------------------------------------------------ the alloc text
class _UnitsBeyond(ValueError):
    """Units beyond the machine (the message says which)."""


_PART = re.compile(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?", re.ASCII)


def alloc_ranges(text: str, total: int) -> list[tuple[int, int]]:
    """The (first, last) unit ranges of range text such as ``"0-3,8"``, in the text's order, each
    checked against a machine of ``total`` units before anything is expanded (so ``"0-9999999999"``
    costs nothing). Raises `ValueError` naming the bad part (`_UnitsBeyond` for units >= ``total``);
    more than ``total`` ranges is an error too (they cannot all be distinct)."""
    text = text.strip()
    out: list[tuple[int, int]] = []
    if not text:
        return out
    digits = len(str(max(total - 1, 0)))
    pos = 0
    while True:
        comma = text.find(",", pos)
        part = text[pos:] if comma < 0 else text[pos:comma]
        m = _PART.fullmatch(part)
        if m is None:
            raise ValueError(f"bad unit range {_short(part.strip(), 40)}")
        lo_s, hi_s = m.group(1), m.group(2) or m.group(1)
        shown = _printable(part.strip(), 40)
        if len(hi_s.lstrip("0")) > digits or len(lo_s.lstrip("0")) > digits:
            raise _UnitsBeyond(f"units {shown} exceed the machine's {total} units (0-{total - 1})")
        lo, hi = int(lo_s), int(hi_s)
        if hi < lo:
            raise ValueError(f"bad unit range {shown!r} (its end is before its start)")
        if hi >= total:
            raise _UnitsBeyond(f"unit{'s' if hi > lo else ''} {shown} exceed{'' if hi > lo else 's'} the "
                               f"machine's {total} units (0-{total - 1})")
        out.append((lo, hi))
        if len(out) > total:
            raise ValueError(f"more than {total} ranges, the machine's unit count")
        if comma < 0:
            return out
        pos = comma + 1


def _distinct(ranges: list[tuple[int, int]]) -> int:
    """Distinct units covered by inclusive ranges (merged, not expanded)."""
    n, end = 0, -1
    for lo, hi in sorted(ranges):
        if hi > end:
            n += hi - max(lo, end + 1) + 1
            end = hi
    return n


# ------------------------------------------------------------------------------ the process
def _group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` has a member that is not a zombie (where ``/proc`` tells)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        names = os.listdir("/proc")
    except OSError:
        return True
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        rest = stat[stat.rfind(b")") + 2:].split()
        if len(rest) > 2 and rest[2] == str(pgid).encode() and rest[0] not in (b"Z", b"X"):
            return True
    return False


class _Process:
    """A child process in its own process group, spoken to in JSON lines. Every write and every
    read has a deadline (non-blocking pipes and a selector), a line is at most ``max_line`` bytes,
    and the child's stderr goes to an unlinked temporary file (never a pipe it could block on)."""

    def __init__(self, command: str, argv: list[str], cwd: str | None = None, max_line: int = MAX_LINE_BYTES):
        self.command = command
        self.max_line = int(max_line)
        self._err = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the process
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                         cwd=cwd, bufsize=0, start_new_session=True)
        except (OSError, ValueError) as e:
            self._err.close()
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise ExternalSchedulerConfigError(f"exec scheduler {command!r}: cannot start {argv[0]!r}: "
                                               f"{why}") from None
        self.pgid = self.proc.pid                    # a new session: the child leads its own group
        self._in, self._out = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        os.set_blocking(self._in, False)
        os.set_blocking(self._out, False)
        self._rsel = selectors.DefaultSelector()
        self._rsel.register(self._out, selectors.EVENT_READ)
        self._wsel = selectors.DefaultSelector()
        self._wsel.register(self._in, selectors.EVENT_WRITE)
        self._buf = bytearray()
        self._scan = 0                               # bytes of _buf known to hold no newline
        self.released = False

    # ---------------------------------------------------------------- I/O with deadlines
    def write(self, data: bytes, timeout_s: float) -> int:
        """Write ``data`` to the child's stdin within ``timeout_s`` (s); the bytes written (fewer
        than ``len(data)`` when time ran out). OSError (BrokenPipeError) if the child closed it."""
        view = memoryview(data)
        off, deadline = 0, time.monotonic() + timeout_s
        while off < len(view):
            try:
                off += os.write(self._in, view[off:])
            except BlockingIOError:
                pass
            if off >= len(view):
                break
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._wsel.select(min(left, _MAX_WAIT_S))
        return off

    def readline(self, timeout_s: float) -> bytes | None:
        """The next line of the child's stdout (without its newline) within ``timeout_s`` (s), or
        None at end of file. TimeoutError when time runs out; `_LineTooLong` past ``max_line`` bytes."""
        deadline = time.monotonic() + timeout_s
        buf = self._buf
        while True:
            i = buf.find(b"\n", self._scan)
            if i >= 0:
                if i > self.max_line:
                    raise _LineTooLong(i)
                line = bytes(buf[:i])
                del buf[:i + 1]
                self._scan = 0
                return line
            self._scan = len(buf)
            if len(buf) > self.max_line:
                raise _LineTooLong(len(buf))
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if not self._rsel.select(min(left, _MAX_WAIT_S)):
                continue
            try:
                chunk = os.read(self._out, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                if buf:
                    line = bytes(buf)
                    buf.clear()
                    self._scan = 0
                    return line
                return None
            buf += chunk

    def pending(self) -> bytes:
        """Output the child wrote that no read asked for yet: what is buffered, else one chunk that
        is there now (without waiting); b"" if none (or at end of file)."""
        if not self._buf and self._rsel.select(0):
            try:
                self._buf += os.read(self._out, 1 << 16)
            except BlockingIOError:
                pass
        return bytes(self._buf[:4096])

    # ---------------------------------------------------------------- diagnostics
    def stderr_tail(self, lines: int = 5) -> str:
        """"; its stderr ends with: ..." (its last non-blank lines, from at most the last
        `STDERR_TAIL_BYTES` it wrote), or "" if it wrote nothing."""
        try:
            fd = self._err.fileno()
            size = os.fstat(fd).st_size
            start = max(0, size - STDERR_TAIL_BYTES)
            data = os.pread(fd, size - start, start)      # pread: the child shares the file offset
        except (OSError, ValueError):
            return ""
        rows = data.decode("utf-8", "replace").splitlines()
        if start > 0:
            rows = rows[1:]                                # the first row read is likely cut
        tail = [_printable(r.strip(), 200) for r in rows if r.strip()][-lines:]
        return ("; its stderr ends with: " + " | ".join(tail)) if tail else ""

    def exit_status(self, wait_s: float = 0.0) -> int | None:
        """The child's exit status, waiting up to ``wait_s`` (s) for it; None while it runs."""
        code = self.proc.poll()
        if code is None and wait_s > 0:
            try:
                code = self.proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                code = None
        return code

    @staticmethod
    def describe_exit(code: int) -> str:
        if code >= 0:
            return f"exited with status {code}"
        try:
            return f"was ended by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was ended by signal {-code}"

    def dead(self, when: str, wait_s: float = 2.0) -> ExternalProtocolError:
        """The error for a child that exited or closed its pipe ``when`` (waits up to ``wait_s`` s
        for its exit status)."""
        code = self.exit_status(wait_s)
        status = self.describe_exit(code) if code is not None else "closed its output"
        return ExternalProtocolError(f"exec scheduler {self.command!r} {status} {when}{self.stderr_tail()}")

    # ---------------------------------------------------------------- ending
    def end_group(self, grace_s: float = GRACE_S) -> None:
        """End every process of the child's group: SIGTERM, then SIGKILL after ``grace_s`` (s)."""
        self.proc.poll()                                  # reap the child: a zombie keeps the group
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not _group_alive(self.pgid):
                break
            try:
                os.killpg(self.pgid, sig)
            except ProcessLookupError:
                break
            except PermissionError:
                pass
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline:
                self.proc.poll()
                if not _group_alive(self.pgid):
                    break
                time.sleep(0.01)
        self.exit_status(grace_s)

    def close_input(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def close(self, wait_s: float) -> int | None:
        """Close the child's stdin, give it ``wait_s`` (s) to exit, end its group, free the pipes;
        its exit status (None if it had to be killed)."""
        self.close_input()
        code = self.exit_status(wait_s)
        self.end_group()
        self.release()
        return code

    def kill(self) -> None:
        """End the group now (after an error) and free the pipes."""
        self.close_input()
        self.end_group()
        self.release()

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        for sel in (self._rsel, self._wsel):
            sel.close()
        for f in (self.proc.stdout, self._err):
            try:
                f.close()
            except OSError:
                pass


class ExternalScheduler(Scheduler):
    """A policy in another process speaking the JSON-lines protocol (see the module docstring).

    Parameters
    ----------
    command: the command line (``"python3 my_sched.py --flag"``), split with `shlex` (no shell).
    timeout_s: longest wait (s, wall clock) for the process to read one message, and again for
        its reply; a finite number > 0.
    cwd: working directory of the process (default: the current one).
    name: label in results (default ``exec:<command>``).

    The command, the program (found on PATH, or a path relative to ``cwd``, executable), the
    options and ``timeout_s`` are checked here: `ExternalSchedulerConfigError` (a `ValueError`).
    """

    def __init__(self, command: str, timeout_s: float = 60.0, cwd: str | None = None, name: str | None = None,
                 **unknown) -> None:
        _check_options(unknown)
        self.timeout_s = _check_timeout(timeout_s)
        self.command = str(command)
        self.cwd = _check_cwd(cwd)
        self._argv = _split_command(self.command)
        _check_program(self.command, self._argv[0], self.cwd)
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
        if self._proc is not None and not getattr(self, "_ended", True):
            self._abort()                        # bound again while a previous process still runs
        self._ended = False
        self._starts: dict[int, float] = {}   # running job -> start of its current run (s)
        self._proc = _Process(self.command, self._argv, self.cwd, max_line=MAX_LINE_BYTES)
        atexit.register(self.close)              # the safety net if the run stops without an end
        self._events = [self._event(float(jobs.submit[0]) if len(jobs) else 0.0, "SIMULATION_BEGINS", {
            "protocol": PROTOCOL_VERSION, "nb_resources": int(cluster.total), "nb_jobs": len(jobs),
            "time_unit": "s", "allocation_unit": "unit"})]

    def close(self) -> None:
        """Send SIMULATION_ENDS (with the events not sent yet; at most ``timeout_s`` for the process
        to read it), close its input, give it ``min(timeout_s, CLOSE_WAIT_S)`` seconds to exit, then
        end its process group (SIGTERM, SIGKILL after `GRACE_S`). No reply is read."""
        if self._proc is None or self._ended:
            return
        self._ended = True
        now = self._events[-1]["timestamp"] if self._events else 0.0
        self._events.append(self._event(now, "SIMULATION_ENDS", {}))
        try:
            self._send({"now": now, "events": self._events}, self.messages + 1, now)
        except ExternalSchedulerError:
            pass                                 # the run is over: a client that stopped reading is ended below
        self._events = []
        self._proc.close(min(self.timeout_s, CLOSE_WAIT_S))

    def _abort(self) -> None:
        """End the process group now, after an error (no SIMULATION_ENDS)."""
        if self._proc is None or self._ended:
            return
        self._ended = True
        self._events = []
        self._proc.kill()

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
        try:
            self._send(msg, self.messages, now)
            line = self._read(now)
            starts = self._decisions(now, line, queue, cluster)
        except BaseException:
            self._abort()                        # any failure ends the process group at once
            raise
        for s in starts:
            self._starts[int(getattr(s, "job", s))] = now
        return starts

    def _send(self, msg: dict, number: int, now: float) -> None:
        """Write message ``number`` (at ``now``, s) within ``timeout_s``, or raise a located error."""
        data = (json.dumps(msg, separators=(",", ":"), allow_nan=False) + "\n").encode()
        proc = self._proc
        where = f"message {number} (t={now:g} s)"
        extra = proc.pending() if "state" in msg else b""     # a reply is exactly one line per message
        if extra:
            raise ExternalProtocolError(f"exec scheduler {self.command!r} wrote to its output before {where} was "
                                        "sent (a reply is exactly one line per message; diagnostics belong on "
                                        f"stderr): {_printable(extra.decode('utf-8', 'replace'), 200)}")
        try:
            written = proc.write(data, self.timeout_s)
        except OSError:
            raise proc.dead(f"while the twin was writing {where} to it") from None
        if written < len(data):
            code = proc.exit_status()
            status = (f" ({proc.describe_exit(code)}; a process it started keeps its input open)"
                      if code is not None else "")
            raise ExternalProtocolError(f"exec scheduler {self.command!r} did not read its input within "
                                        f"{self.timeout_s:g} s{status}: {where}, {written:,} of {len(data):,} "
                                        f"bytes written{proc.stderr_tail()}")

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
        """The reply line to the current message, decoded (strict UTF-8), within ``timeout_s``."""
        proc = self._proc
        where = f"in reply to message {self.messages} (t={now:g} s)"
        try:
            raw = proc.readline(self.timeout_s)
        except TimeoutError:
            code = proc.exit_status()
            if code is not None:                  # exited, but something it started holds its output
                raise ExternalProtocolError(f"exec scheduler {self.command!r} {proc.describe_exit(code)} {where} "
                                            f"(no reply within {self.timeout_s:g} s; a process it started keeps "
                                            f"its output open){proc.stderr_tail()}") from None
            raise ExternalProtocolError(f"exec scheduler {self.command!r}: no reply within {self.timeout_s:g} s "
                                        f"{where}{proc.stderr_tail()}") from None
        except _LineTooLong:
            raise ExternalProtocolError(f"exec scheduler {self.command!r}, reply to message {self.messages} "
                                        f"(t={now:g} s): a line longer than {proc.max_line / 2**20:g} MiB "
                                        f"({proc.max_line:,} bytes) without a newline; a reply is one JSON "
                                        f"object on one line{proc.stderr_tail()}") from None
        if raw is None:
            raise proc.dead(where)
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self._error(now, raw.decode("utf-8", "replace"),
                              f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})") from None
        return line.removesuffix("\r")

    def _error(self, now: float, line: str, what: str) -> ExternalProtocolError:
        return ExternalProtocolError(f"exec scheduler {self.command!r}, reply to message {self.messages} "
                                     f"(t={now:g} s): {what}; the line was: {_printable(line, 200)}")

    def _check_time(self, now: float, line: str, value: object, what: str) -> None:
        """An optional time of a reply (``now``, an event's ``timestamp``): absent, null, or a finite
        number of seconds, not negative on a clock that is not."""
        if value is None:
            return
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        try:
            ok = ok and math.isfinite(float(value)) and not (float(value) < 0 <= now)
        except OverflowError:
            ok = False
        if not ok:
            raise self._error(now, line, f"{what} must be a finite number of seconds >= 0 (or left out), "
                                         f"got {_short(value, 60)}")

    def _decisions(self, now: float, line: str, queue: np.ndarray, cluster: ClusterView) -> list[int | Start]:
        try:
            reply = json.loads(line)
        except json.JSONDecodeError as e:
            raise self._error(now, line, f"not JSON ({e.msg} at column {e.colno})") from None
        except RecursionError:
            raise self._error(now, line, "not usable JSON (nested too deeply)") from None
        except ValueError as e:                  # an integer beyond Python's digit limit
            what = "a number with too many digits" if "digits" in str(e) else _printable(str(e), 120)
            raise self._error(now, line, f"not usable JSON ({what})") from None
        if not isinstance(reply, dict) or not isinstance(reply.get("events", []), list):
            raise self._error(now, line, 'expected an object {"now": t, "events": [...]}')
        self._check_time(now, line, reply.get("now"), '"now"')
        waiting = set(np.asarray(queue).tolist())
        free_mask = np.asarray(cluster.free_mask).copy()
        free = int(cluster.free)
        out: list[int | Start] = []
        started: dict[int, int] = {}             # job index -> event of this reply that started it
        calls = set(self._calls)
        for k, ev in enumerate(reply.get("events", [])):
            if not isinstance(ev, dict):
                raise self._error(now, line, f'event {k}: expected an object {{"type": ..., "data": {{...}}}}, '
                                             f"got {_short(ev, 40)}")
            kind = ev.get("type")
            data = ev.get("data", {})
            if kind not in DECISIONS:
                raise self._error(now, line, f"event {k}: unknown decision type {_short(kind, 40)}; "
                                             f"known: {', '.join(DECISIONS)}")
            if not isinstance(data, dict):
                raise self._error(now, line, f"event {k}: {kind} data must be an object, got {_short(data, 40)}")
            self._check_time(now, line, ev.get("timestamp"), f'event {k}: "timestamp"')
            if kind == "CALL_ME_LATER":
                calls.add(self._call_time(now, line, k, data.get("timestamp")))
                continue
            j = self._waiting_job(now, line, k, kind, data, waiting, started)
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
            started[j] = k
            out.append(out_item)
        self._calls = sorted(calls)
        return out

    def _call_time(self, now: float, line: str, k: int, t: object) -> float:
        """The time (s) of a CALL_ME_LATER: a finite number > now."""
        ok = isinstance(t, (int, float)) and not isinstance(t, bool)
        try:
            ok = ok and math.isfinite(float(t)) and float(t) > now
        except OverflowError:
            ok = False
        if not ok:
            raise self._error(now, line, f"event {k}: CALL_ME_LATER timestamp must be a number > now ({now:g}), "
                                         f"got {_short(t, 60)}")
        return float(t)

    def _waiting_job(self, now, line, k, kind, data, waiting, started) -> int:
        jid = data.get("job_id")
        j = self._index.get(jid) if isinstance(jid, int) and not isinstance(jid, bool) else None
        if j is None:
            raise self._error(now, line, f"event {k}: {kind} names job_id {_short(jid, 40)}, not a job of the workload")
        if j in started:
            raise self._error(now, line, f"event {k}: {kind} of job {jid}, which is not waiting: event {started[j]} "
                                         "of this reply already started it")
        if j not in waiting:
            raise self._error(now, line, f"event {k}: {kind} of job {jid}, which is not waiting (running or done)")
        return j

    def _units(self, now, line, k, data, alloc, p, free_mask) -> np.ndarray:
        """The units of an EXECUTE_JOB ``alloc`` (range text), checked against the machine before they
        are expanded, then for count, distinctness and freedom."""
        jid, total = data["job_id"], len(free_mask)
        if isinstance(alloc, bool) or not isinstance(alloc, (str, int)):
            raise self._error(now, line, f"event {k}: alloc of job {jid} must be range text like '0-3,8', "
                                         f"got {_short(alloc, 40)}")
        shown = _short(str(alloc), 80)
        try:
            ranges = alloc_ranges(str(alloc), total)
        except _UnitsBeyond as e:
            raise self._error(now, line, f"event {k}: alloc {shown} of job {jid} includes units that are not free: "
                                         f"{e}") from None
        except ValueError as e:
            raise self._error(now, line, f"event {k}: alloc {shown} is not a unit range list like '0-3,8' "
                                         f"({e})") from None
        distinct = _distinct(ranges)
        if distinct != p or sum(hi - lo + 1 for lo, hi in ranges) != p:
            raise self._error(now, line, f"event {k}: alloc {shown} has {distinct} distinct units; job {jid} needs {p}")
        units = (np.concatenate([np.arange(lo, hi + 1, dtype=np.int64) for lo, hi in ranges]) if ranges
                 else np.empty(0, dtype=np.int64))
        if not free_mask[units].all():
            raise self._error(now, line, f"event {k}: alloc {shown} of job {jid} includes units that are not free")
        return units

    def describe(self) -> dict:
        return {"name": self.name, "command": self.command, "protocol": PROTOCOL_VERSION,
                "messages": self.messages}
