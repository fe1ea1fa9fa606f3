"""The ``harness`` rules: RLScheduler's own environment loop, stepped one decision at a time.

RLScheduler's ``HPCEnv`` (``HPCSimPickJobs.py``, DIR-LAB/deep-batch-scheduler commit cd433e3) lets
the agent pick a job, then ``schedule(job)``: if the job does not fit, time moves one event at a
time (with the harness's greedy backfilling when it is on) until it does; the job starts; if the
queue is then empty, time moves to the next arrival (``moveforward_for_job``). The episode ends when
the last job of the sequence has started. `HarnessEpisode` is that loop on the compat replay's state
(`schedulers.rlscheduler_compat._Loop`, the rules of ``--compat rlscheduler``), with the agent's pick
in place of the heuristic's sort. `HarnessEpisode.visible` is ``build_observation``'s choice of the
jobs the agent sees (the queue sorted by submit time; above ``window`` jobs, RLScheduler's SJF /
smallest interleaving), including its side effect on the queue's order (ties are broken by that
order later, exactly as in the original).

`ObservationTrace` adds the per-job fields RLScheduler's observation reads (requested memory, user,
group and executable numbers, SWF fields 10, 12, 13, 14) and the normalisers its ``Workloads``
computes over **every** line of the log (also the lines it then drops): ``max_exec_time`` is the
largest raw run time, not a request. Times are seconds on the log's clock.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hpctwin.schedulers.rlscheduler_compat import SCORES, _Loop
from hpctwin.schedulers.rlscheduler_trace import HarnessTrace, HarnessTraceError, _open, load_harness_trace

#: RLScheduler's observation constants: wait-time scale (s), the value clip, empty-slot features
MAX_WAIT_TIME_S = 12 * 60 * 60
CLIP = 1.0 - 1e-5
EMPTY_SLOT = (0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0)
#: RLScheduler's window (MAX_QUEUE_SIZE) and features per job (JOB_FEATURES)
RLS_WINDOW = 128
RLS_FEATURES = 8
#: (SWF field number, name) of the per-job fields normalised by their maximum over the log
_EXTRA = ((10, "requested memory"), (12, "user id"), (13, "group id"), (14, "executable number"))


@dataclass
class ObservationTrace:
    """A `HarnessTrace` with the static part of RLScheduler's observation of every kept job.

    ``static``: float64 array (jobs x 8): column 0 unused (the wait, set per step), 1 = requested
    time / max_exec_time, 2 = processors / MaxProcs, 3-6 = memory, user, group, executable
    (-1 in the log gives 1.0), column 7 unused (can start now, set per step); each clipped to
    1 - 1e-5 as the original does.
    """

    trace: HarnessTrace
    static: np.ndarray
    max_exec_time: int
    _lists: tuple | None = None

    def __len__(self) -> int:
        return len(self.trace)

    def lists(self) -> tuple[list, list, list, list, list]:
        """submit, run, request, processors and nodes per job as lists (made once; never modified)."""
        if self._lists is None:
            tr = self.trace
            self._lists = (tr.submit.tolist(), tr.run.tolist(), tr.request.tolist(), tr.procs.tolist(),
                           tr.nodes.tolist())
        return self._lists


def _normalised(values: list[int], top: int, field: int, name: str, path: str, lines: list[int]) -> np.ndarray:
    """RLScheduler's ``1 if v == -1 else min(v / max, 1 - 1e-5)`` for one SWF field."""
    out = np.empty(len(values), dtype=np.float64)
    for k, v in enumerate(values):
        if v == -1:
            out[k] = 1.0
        elif top == 0:
            raise HarnessTraceError(f"{path}:{lines[k]}: field {field} ({name}) = {v} while its largest value "
                                    "in the log is 0: RLScheduler's observation divides by that maximum "
                                    "(the original fails with ZeroDivisionError); use --obs default")
        else:
            out[k] = min(float(v) / float(top), CLIP)
    return out


def load_observation_trace(path: str | Path) -> ObservationTrace:
    """Read an SWF log as the harness does (`load_harness_trace`) plus the observation's fields."""
    tr = load_harness_trace(path)
    path = Path(path)
    rows: list[tuple[int, int, int, int, int, int]] = []
    top = {f: 0 for f, _ in _EXTRA}
    max_exec = 0
    with _open(path) as fp:
        for n, line in enumerate(fp, 1):
            if line.startswith(";"):
                continue
            s = line.split()                 # already validated by load_harness_trace
            run = int(s[3])
            max_exec = max(max_exec, run)
            vals = [int(s[f - 1]) for f, _ in _EXTRA]
            for (f, _), v in zip(_EXTRA, vals):
                top[f] = max(top[f], v)
            if run < 0:
                run = 10
            if run > 0:
                rows.append((int(s[0]), n, *vals))
    rows.sort(key=lambda r: r[0])            # stable, by job number, as load_harness_trace
    if len(rows) != len(tr):                 # pragma: no cover - both read the same lines
        raise HarnessTraceError(f"{path}: {len(rows)} jobs kept for the observation, {len(tr)} for the loop")
    if max_exec <= 0:
        raise HarnessTraceError(f"{path}: no positive run time (field 4); RLScheduler's observation divides "
                                "requested times by the largest one")
    lines = [r[1] for r in rows]
    static = np.zeros((len(tr), RLS_FEATURES), dtype=np.float64)
    static[:, 1] = np.minimum(tr.request.astype(np.float64) / float(max_exec), CLIP)
    static[:, 2] = np.minimum(tr.procs.astype(np.float64) / float(tr.max_procs), CLIP)
    for c, (f, name) in enumerate(_EXTRA):
        static[:, 3 + c] = _normalised([r[2 + c] for r in rows], top[f], f, name, str(path), lines)
    return ObservationTrace(tr, static, max_exec)


def _f2(s: int, r: int, p: int) -> float:
    """RLScheduler's ``f2_score`` (only used to order the queue before its SJF sort)."""
    with np.errstate(divide="ignore", invalid="ignore"):     # log10(0) = -inf, sqrt(r < 0) = nan, as there
        return float(np.sqrt(r) * p + 25600 * np.log10(s))


class HarnessEpisode(_Loop):
    """One sequence ``first .. first + length - 1`` of ``obs.trace`` under RLScheduler's env loop.

    `pick` is ``HPCEnv.schedule(job)``: wait (backfilling greedily when ``backfill``) until the job
    fits, start it, refill the queue; it returns the jobs started (backfilled ones first) and True
    when the last job of the sequence has started.
    """

    def __init__(self, obs: ObservationTrace, first: int, length: int, backfill: bool, window: int,
                 keys: dict):
        tr = obs.trace
        if first < 0 or length < 1 or first + length > len(tr):
            raise ValueError(f"sequence [{first}, {first + length}) is outside the trace's {len(tr)} jobs")
        super().__init__(tr, first, length, [], backfill, lists=obs.lists())   # lists converted once per trace
        self.window = int(window)
        self.keys = keys                      # name -> per-job sort key (lists indexed by job)
        self.first, self.length = first, length
        self.done = False
        self.queue_key: list | None = None    # `SchedulingEnv` option queue_sort

    # ------------------------------------------------------------------ the observation's job choice
    def visible(self) -> list[int]:
        """``build_observation``'s visible jobs, in slot order (sorts ``self.queue`` as it does)."""
        q, w, k = self.queue, self.window, self.keys
        q.sort(key=self.submit.__getitem__)
        if len(q) <= w:
            return list(q)
        q.sort(key=k["f1"].__getitem__)
        q.sort(key=k["f2"].__getitem__)
        q.sort(key=k["sjf"].__getitem__)
        sjf = q[:w]
        q.sort(key=k["smallest"].__getitem__)
        small = q[:w]
        out: list[int] = []
        seen: set[int] = set()
        i = 0
        while len(out) < w:                   # sjf, smallest, then the "random" pick (= sjf again)
            for j in (sjf[i], small[i]):
                if j not in seen and len(out) < w:
                    out.append(j)
                    seen.add(j)
            i += 1
        return out

    # ------------------------------------------------------------------ one decision
    def pick(self, j: int) -> tuple[list[int], bool]:
        """Schedule waiting job ``j`` (trace index); returns (jobs started, in order; episode done)."""
        if self.done:
            raise RuntimeError("the episode is over; call reset()")
        n0 = len(self.order)
        if self.queue_key is not None:       # the harness's heuristic loop keeps the list sorted by score
            self.queue.sort(key=self.queue_key.__getitem__)
        if self.nodes[j] > self.free:
            self._wait_for(j)
        self._start(j)
        self.done = not self._refill()
        return self.order[n0:], self.done


def harness_keys(tr: HarnessTrace) -> dict:
    """The sort keys `HarnessEpisode.visible` needs, per job (computed once per trace)."""
    s, r, p = tr.submit.tolist(), tr.request.tolist(), tr.procs.tolist()
    return {"f1": [SCORES["f1"](a, b, c) for a, b, c in zip(s, r, p)],
            "f2": [_f2(a, b, c) for a, b, c in zip(s, r, p)],
            "sjf": list(zip(r, s)), "smallest": list(zip(p, s))}


def check_window(window: int) -> int:
    """A window size: a positive integer (slots the agent chooses from)."""
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
        raise ValueError(f"window = {window!r}: a positive integer number of job slots is needed "
                         f"(RLScheduler: {RLS_WINDOW})")
    return int(window)


__all__ = ["CLIP", "EMPTY_SLOT", "MAX_WAIT_TIME_S", "RLS_FEATURES", "RLS_WINDOW", "HarnessEpisode",
           "ObservationTrace", "check_window", "harness_keys", "load_observation_trace"]
