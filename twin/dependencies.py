"""Job dependencies and job-array throttles: which waiting jobs the policy may see.

A workload may carry (see ``docs/workloads.md``):

* ``columns["dependency"]``: Slurm's ``--dependency`` text per job ("" = none): ``afterok:ID[:ID...]``,
  ``afterany``, ``afternotok``, ``after:ID[+MINUTES]``, ``singleton``, a bare ``ID`` (Slurm's old
  form, = ``afterany``); items joined by ``,`` (all must hold) or ``?`` (any one), not both (sbatch
  refuses the mix). ``ID`` is a job id, ``ID_T`` one array task, ``ID_*`` (or the id of an array) the
  whole array. The display suffixes squeue/scontrol add (``(unfulfilled)``...) are accepted.
  ``aftercorr``, ``afterburstbuffer`` and ``expand`` are refused (not modelled).
* ``columns["dependency_delay"]`` (s, NaN = 0): the job becomes eligible this long after its
  dependency holds (the SWF think time, field 18, after the preceding job's end).
* ``columns["array_job_id"]``, ``["array_task_id"]``, ``["array_throttle"]`` (``%k`` of ``--array``;
  0 = none): at most ``k`` tasks of one array run at once.
* ``columns["job_name"]`` with ``user``: what ``singleton`` compares.

Semantics, from Slurm 22.05 ``src/slurmctld/job_scheduler.c``:

* ``test_job_dependency`` / ``_test_job_dependency_common``: ``after`` holds once the parent is not
  pending (started, or ended without starting) and ``+time`` has passed since its start;
  ``afterany`` once it ended (any state); ``afterok`` once it ended COMPLETED, and *fails* if it ended
  otherwise; ``afternotok`` the reverse. A parent that is not in the job list ("job is gone") lifts
  the item. A dependency on a whole array tests the array as a whole (all tasks ended / complete,
  `test_job_array_completed`...). ``,``: every item must hold, one failed item fails the job; ``?``:
  one held item is enough, the job fails when every item failed. Once the dependency holds it is
  cleared for good (a later change of the parents does not hide the job again).
* ``_find_singleton_job``: ``singleton`` holds while no other job of the same user and name is
  running, or pending with a smaller job id. A job without a name lifts it.
* A job whose dependency failed stays pending with reason ``DependencyNeverSatisfied`` (Slurm 22.05's
  default; ``SchedulerParameters=kill_invalid_depend`` would cancel it: not modelled). The twin takes
  such jobs out of the queue when their dependency fails (they can never start, and the policy must
  not plan for them: it is told ``on_cancel``) and reports them as never started (state PENDING, its
  ``pending_reason``). A job whose parents can never end (a parent itself never started) is reported
  with reason ``Dependency`` at the end of the run. Circular dependencies are refused (Slurm refuses
  them at submission, ``ESLURM_CIRCULAR_DEPENDENCY``).
* Array throttle (``job_mgr.c`` ``_job_array_task_limit``/reason ``JobArrayTaskLimit``): tasks above the
  limit stay queued with their submit time and priority; the first ones in queue order are shown.

How the engine uses it (`twin.simulation`): the gate exists only when the workload has a non-empty
``dependency`` or a positive ``array_throttle`` column, so every other run is unchanged (and keeps its
compiled fast path). Before each pass the engine hands the policy ``gate.visible(now)`` instead of the
whole queue; the gate also ``admit``s only eligible starts (a policy that kept a hidden job's index
is refused), asks for a pass when a delay ends (``next_wakeup``) and, when only jobs that can never
become eligible wait (`settle`), ends them. A job made eligible by a start (``after``) is seen from
the next pass (Slurm too tests dependencies when it builds its next queue). ``eligible`` per job is
the time (s) from which the policy saw it (the submit time for jobs without a dependency; Slurm's
EligibleTime); the wait stays start - submit.
"""
from __future__ import annotations

import heapq
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from .contract import Gate, Refusal

#: dependency types modelled (Slurm names)
KINDS = ("after", "afterany", "afterok", "afternotok", "singleton")
#: types Slurm has that the twin refuses, with why
UNSUPPORTED = {"aftercorr": "array task correspondence is not modelled",
               "afterburstbuffer": "burst buffers are not modelled",
               "expand": "job expansion is not modelled"}
#: most job ids one dependency may name
MAX_IDS = 100_000
#: reasons of jobs that never started because of their dependency (Slurm's state_reason names)
NEVER_SATISFIED = "DependencyNeverSatisfied"
NEVER_ENDED = "Dependency"
_DISPLAY = re.compile(r"\((?:unfulfilled|fulfilled|failed)\)", re.IGNORECASE)
_ID = re.compile(r"([0-9]{1,18})(?:_([0-9]{1,18}|\*))?(?:\+([0-9]{1,9}))?\Z")
_NULL = {"", "(null)", "none", "null"}


class DependencyError(ValueError):
    """A workload's dependency or array columns that cannot be honoured (a malformed text, a job that
    depends on itself, a circular dependency...): the message names the job."""


@dataclass(frozen=True)
class Item:
    """One dependency item: ``kind`` (`KINDS`), parent ``job`` id (-1 for singleton), ``task``
    (array task id; -1: the id as given, the whole array when it is one; -2: ``ID_*``, the whole
    array), ``delay`` (s; ``after``'s ``+minutes``)."""

    kind: str
    job: int = -1
    task: int = -1
    delay: float = 0.0


@dataclass(frozen=True)
class Dependency:
    """A parsed ``--dependency``: its items and whether one is enough (``any_of``: ``?``)."""

    items: tuple
    any_of: bool = False


def parse_dependency(text: Any) -> Dependency | None:
    """A Slurm dependency text -> `Dependency` (None for empty / ``(null)``). Raises ValueError with
    a one-line reason (the caller adds file, line and field)."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return None
    s = _DISPLAY.sub("", str(text)).strip()
    if s.lower() in _NULL:
        return None
    if len(s) > 1 << 20:
        raise ValueError(f"{len(s):,} characters, longer than any dependency")
    if "," in s and "?" in s:
        raise ValueError(f"{s[:60]!r} mixes ',' (all) and '?' (any): Slurm accepts one separator")
    any_of = "?" in s
    items: list[Item] = []
    for part in s.split("?" if any_of else ","):
        part = part.strip()
        if not part:
            raise ValueError(f"{s[:60]!r}: empty item")
        kind, colon, rest = part.partition(":")
        kind = kind.strip().lower()
        if not colon:
            if kind == "singleton":
                items.append(Item("singleton"))
                continue
            kind, rest = "afterany", part            # Slurm's old form: a bare job id
        if kind in UNSUPPORTED:
            raise ValueError(f"{kind}: {UNSUPPORTED[kind]} (modelled: {', '.join(KINDS)})")
        if kind not in KINDS or kind == "singleton":
            from .schema import did_you_mean  # noqa: PLC0415
            raise ValueError(f"unknown dependency type {kind[:30]!r}{did_you_mean(kind, KINDS)} "
                             f"(known: {', '.join(KINDS)})")
        ids = rest.split(":")
        if len(items) + len(ids) > MAX_IDS:
            raise ValueError(f"more than {MAX_IDS:,} job ids")
        for tok in ids:
            m = _ID.match(tok.strip())
            if not m:
                raise ValueError(f"{part[:60]!r}: {tok.strip()[:30]!r} is not a job id (ID, ID_TASK, ID_* "
                                 "or, for after, ID+MINUTES)")
            if m.group(3) is not None and kind != "after":
                raise ValueError(f"{part[:60]!r}: +time is only allowed with after (Slurm's after:ID+MINUTES)")
            task = -1 if m.group(2) is None else (-2 if m.group(2) == "*" else int(m.group(2)))
            items.append(Item(kind, int(m.group(1)), task, 60.0 * int(m.group(3) or 0)))
    return Dependency(tuple(items), any_of)


def format_dependency(dep: Dependency | None) -> str:
    """The Slurm text of a parsed dependency ("" for None)."""
    if dep is None:
        return ""
    out = []
    for it in dep.items:
        if it.kind == "singleton":
            out.append("singleton")
            continue
        tid = "" if it.task == -1 else ("_*" if it.task == -2 else f"_{it.task}")
        out.append(f"{it.kind}:{it.job}{tid}" + (f"+{int(it.delay // 60)}" if it.delay else ""))
    return ("?" if dep.any_of else ",").join(out)


def needs_gate(columns: dict) -> bool:
    """Whether a workload's columns ask for the gate: a non-empty ``dependency`` or a positive
    ``array_throttle`` (with ``array_job_id``)."""
    dep = columns.get("dependency")
    if dep is not None and any(parse_dependency_cached(x) is not None for x in _texts(dep)):
        return True
    thr = columns.get("array_throttle")
    return thr is not None and "array_job_id" in columns and bool((np.asarray(thr) > 0).any())


def parse_dependency_cached(x: Any) -> Dependency | None:
    """`parse_dependency` without raising for the activation test (a malformed text activates the
    gate, whose bind then reports it with the job id)."""
    try:
        return parse_dependency(x)
    except ValueError:
        return Dependency((), False)


def _texts(col) -> list:
    return list(np.asarray(col, dtype=object))


def dependency_gate(sim, jobs) -> "DependencyGate | None":
    """The gate of a run (`twin.simulation.Simulation` and its `JobTable`), or None when the
    workload has no dependency and no array throttle (the run is then exactly as without this module)."""
    cols = getattr(jobs, "columns", None) or {}
    if not needs_gate(cols):
        return None
    return DependencyGate(sim, jobs)


# ====================================================================== the gate
_PENDING, _OK, _FAIL, _NEVER = 0, 1, 2, 3


class DependencyGate(Gate):
    """Hides jobs whose dependency does not hold yet, and array tasks above their throttle (see the
    module docstring). Engine-side: it reads the engine's queue and ledger, and `settle`/`_drop` take
    jobs that can never start out of the queue (the only state it changes, as `twin.control` does
    for a cancel)."""

    name = "dependencies"

    def __init__(self, sim, jobs):
        self.sim = sim
        n = self.n = len(jobs)
        cols = jobs.columns
        self.job_id = np.asarray(jobs.job_id, dtype=np.int64)
        self.submit = np.asarray(jobs.submit, dtype=np.float64)
        self.deps: list = [None] * n
        self.parents: list = [None] * n          # per job: per item, the parent indices (None: singleton)
        raw = _texts(cols["dependency"]) if "dependency" in cols else [None] * n
        for j, text in enumerate(raw):
            try:
                self.deps[j] = parse_dependency(text)
            except ValueError as e:
                raise DependencyError(f"job {self.job_id[j]}: column dependency: {e}") from None
        delay = cols.get("dependency_delay")
        self.delay = (np.zeros(n) if delay is None
                      else np.nan_to_num(np.asarray(delay, dtype=np.float64), nan=0.0))
        if (self.delay < 0).any():
            j = int(np.flatnonzero(self.delay < 0)[0])
            raise DependencyError(f"job {self.job_id[j]}: column dependency_delay: {self.delay[j]:g} s is negative")
        self.gated = np.array([d is not None for d in self.deps], dtype=bool)
        self.lifted = 0                         # items whose parent is not in the job table (Slurm: "gone")
        self._resolve(cols)
        self._check_cycles()
        self._throttles(cols)
        self._singletons(jobs, cols)
        # state
        self.visible_mask = ~self.gated
        self.n_hidden = int(self.gated.sum())  # gated jobs neither shown nor dropped yet
        self.eligible = np.where(self.gated, np.nan, self.submit)
        self.reason = np.full(n, "", dtype=object)
        self.started = np.full(n, np.nan)
        self.ended = np.full(n, np.nan)
        self.outcome = np.zeros(n, dtype=np.int8)       # _PENDING, _OK, _FAIL (ended not COMPLETED), _NEVER
        state = cols.get("state")
        self.log_failed = (np.zeros(n, dtype=bool) if state is None else
                           np.array([str(s).split(" ")[0].upper() not in ("COMPLETED", "", "NAN", "NONE")
                                     for s in _texts(state)], dtype=bool))
        self.dirty: set[int] = set()             # jobs to re-test at the next visible()
        self.timers: list = []                  # (time s, job index): eligible then
        self._timed_set: set[int] = set()       # the jobs in ``timers``
        self.left: list[int] = []               # jobs that left their units since the last visible()
        self.seen_ptr = 0
        self.n_visible = 0
        self.held_by_limit = np.zeros(n, dtype=bool)
        self.dropped = 0

    # ------------------------------------------------------------------ set-up
    def _resolve(self, cols: dict) -> None:
        """Each item's parent indices (an array as a whole; [] when the parent is not in the table)."""
        by_id = {int(x): i for i, x in enumerate(self.job_id.tolist())}
        arrays: dict[int, list[int]] = {}
        tasks: dict[tuple[int, int], int] = {}
        if "array_job_id" in cols and "array_task_id" in cols:
            for i, (a, t) in enumerate(zip(np.asarray(cols["array_job_id"]).tolist(),
                                           np.asarray(cols["array_task_id"]).tolist())):
                if a >= 0:
                    arrays.setdefault(int(a), []).append(i)
                    tasks[(int(a), int(t))] = i
        self.children: dict[int, list[int]] = {}
        for j, dep in enumerate(self.deps):
            if dep is None:
                continue
            per = []
            for it in dep.items:
                if it.kind == "singleton":
                    per.append(None)
                    continue
                if it.task >= 0:
                    p = tasks.get((it.job, it.task))
                    ps = [p] if p is not None else []
                elif it.job in arrays:
                    ps = list(arrays[it.job])
                elif it.task == -1 and it.job in by_id:
                    ps = [by_id[it.job]]
                else:
                    ps = []
                if j in ps:
                    raise DependencyError(f"job {self.job_id[j]}: column dependency: it depends on itself "
                                          f"({format_dependency(dep)})")
                if not ps:
                    self.lifted += 1
                for p in ps:
                    self.children.setdefault(p, []).append(j)
                per.append(ps)
            self.parents[j] = per

    def _check_cycles(self) -> None:
        """Refuse circular dependencies (iterative depth-first search over parent edges)."""
        color = np.zeros(self.n, dtype=np.int8)       # 0 new, 1 on the path, 2 done
        for root in np.flatnonzero(self.gated).tolist():
            if color[root]:
                continue
            stack = [(root, iter(self._edges(root)))]
            color[root] = 1
            while stack:
                node, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    color[node] = 2
                    stack.pop()
                elif color[nxt] == 1:
                    path = [self.job_id[x] for x, _ in stack] + [self.job_id[nxt]]
                    cyc = path[path.index(self.job_id[nxt]):]
                    raise DependencyError("circular job dependency: " + " -> ".join(str(x) for x in cyc)
                                          + " (Slurm refuses it at submission)")
                elif color[nxt] == 0:
                    color[nxt] = 1
                    stack.append((nxt, iter(self._edges(nxt))))

    def _edges(self, j: int) -> list[int]:
        per = self.parents[j]
        return [p for ps in (per or ()) if ps for p in ps]

    def _throttles(self, cols: dict) -> None:
        """Array throttle groups: ``thr_group[j]`` (-1: none), limit and running count per group."""
        self.thr_group = np.full(self.n, -1, dtype=np.int64)
        self.thr_limit = np.zeros(0, dtype=np.int64)
        thr = cols.get("array_throttle")
        if thr is None or "array_job_id" not in cols:
            return
        thr = np.asarray(thr, dtype=np.int64)
        aid = np.asarray(cols["array_job_id"], dtype=np.int64)
        groups: dict[int, int] = {}
        limits: list[int] = []
        for j in np.flatnonzero((thr > 0) & (aid >= 0)).tolist():
            g = groups.get(int(aid[j]))
            if g is None:
                g = groups[int(aid[j])] = len(limits)
                limits.append(int(thr[j]))
            elif limits[g] != int(thr[j]):
                raise DependencyError(f"job {self.job_id[j]}: column array_throttle: {int(thr[j])}, but another "
                                      f"task of array {int(aid[j])} says {limits[g]}")
            self.thr_group[j] = g
        self.thr_limit = np.array(limits, dtype=np.int64)
        self.thr_running = np.zeros(len(limits), dtype=np.int64)

    def _singletons(self, jobs, cols: dict) -> None:
        """Keys (user, name) of jobs with a ``singleton`` item, their members and running counts."""
        self.key_of = np.full(self.n, -1, dtype=np.int64)
        self.key_members: list[list[int]] = []
        self.key_jobs: list[list[int]] = []      # the members with a singleton item
        self.key_running: list[int] = []
        self.nameless_singletons = 0
        single = [j for j, d in enumerate(self.deps) if d is not None and any(i.kind == "singleton" for i in d.items)]
        if not single:
            return
        names = _texts(cols["job_name"]) if "job_name" in cols else None
        user = np.asarray(jobs.user)
        want = {}
        for j in single:
            nm = None if names is None else names[j]
            if nm is None or str(nm).strip() in ("", "nan"):
                self.nameless_singletons += 1     # Slurm: no name, the singleton item is lifted
                continue
            want.setdefault((int(user[j]), str(nm)), []).append(j)
        if not want:
            return
        index = {k: i for i, k in enumerate(want)}
        self.key_members = [[] for _ in index]
        for j in range(self.n):
            nm = None if names is None else names[j]
            k = index.get((int(user[j]), str(nm))) if nm is not None else None
            if k is not None:
                self.key_of[j] = k
                self.key_members[k].append(j)
        self.key_jobs = [want[k] for k in index]
        self.key_running = [0] * len(index)

    # ------------------------------------------------------------------ gate hooks
    def admit(self, now: float, job: int, units, view) -> Refusal | None:
        """Refuse a start the policy was not shown: dependency not held, or the array at its limit."""
        if not self.visible_mask[job]:
            return Refusal(f"job {self.job_id[job]}: its dependency does not hold yet")
        g = self.thr_group[job]
        if g >= 0 and self.thr_running[g] >= self.thr_limit[g]:
            return Refusal(f"job {self.job_id[job]}: JobArrayTaskLimit ({self.thr_limit[g]} tasks of its array run)")
        return None

    def on_start(self, now: float, job: int, units) -> None:
        if self.started[job] != self.started[job]:
            self.started[job] = now
        g = self.thr_group[job]
        if g >= 0:
            self.thr_running[g] += 1
        k = self.key_of[job]
        if k >= 0:
            self.key_running[k] += 1
        self._touch(job)

    def on_finish(self, now: float, job: int) -> None:
        """The job left its units (finish, kill, interruption): resolved at the next `visible`."""
        g = self.thr_group[job]
        if g >= 0:
            self.thr_running[g] -= 1
        k = self.key_of[job]
        if k >= 0:
            self.key_running[k] -= 1
        self.left.append((job, now))

    def next_wakeup(self, now: float) -> float | None:
        """The earliest pending eligibility time after ``now`` (s), or None."""
        if self.timers and self.timers[0][0] > now:      # the heap's top (earlier ones were shown)
            return self.timers[0][0]
        later = [t for t, _ in self.timers if t > now]
        return min(later) if later else None

    def describe(self) -> dict:
        return {"name": self.name}

    # ------------------------------------------------------------------ the engine's calls
    def visible(self, now: float) -> np.ndarray:
        """The waiting jobs the policy may see now (queue order): jobs whose dependency held, and of a
        throttled array only as many as may still start. Brings the gate's state up to ``now`` first."""
        sim = self.sim
        for j in range(self.seen_ptr, sim._ptr):          # submitted since the last call
            if self.gated[j]:
                self.dirty.add(j)
            k = self.key_of[j]
            if k >= 0:
                self._touch_key(k)
        self.seen_ptr = sim._ptr
        if self.left:
            self._resolve_left()
        if sim._cancelled is not None:
            self._cancels()
        while self.timers and self.timers[0][0] <= now:
            _, j = heapq.heappop(self.timers)
            self._show(j, now)
        while self.dirty:
            todo, self.dirty = sorted(self.dirty), set()
            for j in todo:
                self._evaluate(j, now)
        arr = sim._queue.arr
        if self.n_hidden:
            arr = arr[self.visible_mask[arr]]
        if len(self.thr_limit):
            arr = self._throttle(arr)
        self.n_visible = len(arr)
        return arr

    def settle(self, now: float, final: bool = False) -> bool:
        """When only jobs that can never become eligible wait (nothing runs, nothing more is submitted,
        no delay pending; or ``final``: the run has no event left), end them (reason ``Dependency``) and
        return True; else False."""
        sim = self.sim
        if not final and (self.n_visible or sim.cluster.busy - sim.cluster.down
                          or sim._ptr < sim.n - sim.held_jobs or self.timers):
            return False
        waiting = [int(j) for j in sim._queue.arr if not self.visible_mask[j]]
        if not waiting:
            return False
        for j in waiting:
            self._drop(j, now, NEVER_ENDED)
        return True

    def report(self) -> "DependencyReport":
        """What the run's results take from the gate."""
        summary = {
            "jobs_with_dependency": int(self.gated.sum()),
            "items_lifted_parent_not_in_run": int(self.lifted),
            "never_started_dependency_never_satisfied": int((self.reason == NEVER_SATISFIED).sum()),
            "never_started_dependency_never_held": int((self.reason == NEVER_ENDED).sum()),
            "throttled_arrays": int(len(self.thr_limit)),
            "jobs_held_by_array_limit": int(self.held_by_limit.sum()),
        }
        if self.nameless_singletons:
            summary["singleton_without_job_name_lifted"] = int(self.nameless_singletons)
        return DependencyReport(self.eligible.copy(), self.reason.copy(), summary)

    # ------------------------------------------------------------------ internals
    def _touch(self, j: int) -> None:
        """Job ``j`` changed state: its children and its singleton key are re-evaluated."""
        for c in self.children.get(j, ()):
            self.dirty.add(c)
        k = self.key_of[j]
        if k >= 0:
            self._touch_key(k)

    def _touch_key(self, k: int) -> None:
        for c in self.key_jobs[k]:
            if self.gated[c] and not self.visible_mask[c]:
                self.dirty.add(c)

    def _resolve_left(self) -> None:
        """Jobs that left their units: ended for good (outcome recorded) unless requeued."""
        sim = self.sim
        led, waiting = sim._ledger, sim._queue.waiting
        for j, t in self.left:
            if waiting[j] or sim.cluster.is_running(j):
                continue                                    # requeued: pending again
            self.ended[j] = t
            bad = led.killed[j] or led.failed[j] or self.log_failed[j]
            self.outcome[j] = _FAIL if bad else _OK
            self._touch(j)
        self.left = []

    def _cancels(self) -> None:
        """Waiting parents withdrawn by a model (`twin.control.EngineControl.cancel`): ended, not ok."""
        sim = self.sim
        cancelled, when = sim._cancelled, sim._cancel_time
        for p in list(self.children):
            if self.outcome[p] == _PENDING and cancelled[p]:
                self.ended[p] = when[p]
                self.outcome[p] = _FAIL
                self._touch(p)
        for k in range(len(self.key_jobs)):
            self._touch_key(k)

    def _parent_state(self, kind: str, ps: list[int], delay: float) -> tuple[int, float]:
        """(state, time s) of one item over its parents (an array as a whole)."""
        if not ps:
            return _OK, -math.inf                       # the parent is not in the run: lifted
        out, ended = self.outcome[ps], self.ended[ps]
        if kind == "after":
            t = np.where(np.isnan(self.started[ps]), ended, self.started[ps])
            if (out == _NEVER).any():
                return _NEVER, math.nan
            if np.isnan(t).any():
                return _PENDING, math.nan
            return _OK, float(t.max()) + delay
        if (out == _PENDING).any():
            return (_NEVER if (out == _NEVER).any() else _PENDING), math.nan
        if (out == _NEVER).any():
            return _NEVER, math.nan
        t = float(ended.max())
        all_ok = bool((out == _OK).all())
        if kind == "afterany":
            return _OK, t
        if kind == "afterok":
            return (_OK if all_ok else _FAIL), t
        return (_FAIL if all_ok else _OK), t              # afternotok

    def _singleton_ok(self, j: int) -> bool:
        k = self.key_of[j]
        if k < 0:
            return True                                  # no name: lifted
        if self.key_running[k] > 0:
            return False
        sim = self.sim
        waiting, ptr, jid = sim._queue.waiting, sim._ptr, self.job_id[j]
        for i in self.key_members[k]:
            if i >= ptr:
                break
            if i != j and waiting[i] and self.job_id[i] < jid:
                return False
        return True

    def _evaluate(self, j: int, now: float) -> None:
        """Re-test waiting job ``j``'s dependency; show it, time it, drop it or leave it hidden."""
        sim = self.sim
        if self.visible_mask[j] or j >= sim._ptr or not sim._queue.waiting[j] or j in self._timed():
            return
        dep, per = self.deps[j], self.parents[j]
        states, times = [], []
        for it, ps in zip(dep.items, per):
            if ps is None:
                ok = self._singleton_ok(j)
                states.append(_OK if ok else _PENDING)
                times.append(now)
            else:
                s, t = self._parent_state(it.kind, ps, it.delay)
                states.append(s)
                times.append(t)
        st = np.array(states)
        tt = np.array(times, dtype=np.float64)
        if dep.any_of:
            if (st == _OK).any():
                t_ok = float(tt[st == _OK].min())
            elif (st == _PENDING).any():
                return
            else:
                self._drop(j, now, NEVER_SATISFIED if (st == _FAIL).all() else NEVER_ENDED)
                return
        else:
            if (st == _FAIL).any():
                self._drop(j, now, NEVER_SATISFIED)
                return
            if (st == _NEVER).any():
                self._drop(j, now, NEVER_ENDED)
                return
            if (st == _PENDING).any():
                return
            t_ok = float(tt.max()) if len(tt) else -math.inf
        t_ok += self.delay[j]
        if t_ok > now:
            heapq.heappush(self.timers, (t_ok, j))
            self._timed_set.add(j)
        else:
            self._show(j, now)

    def _timed(self) -> set:
        return self._timed_set

    def _show(self, j: int, now: float) -> None:
        self._timed().discard(j)
        if not self.sim._queue.waiting[j]:
            return                                       # withdrawn meanwhile
        self.visible_mask[j] = True
        self.n_hidden -= 1
        self.eligible[j] = now

    def _throttle(self, arr: np.ndarray) -> np.ndarray:
        """Of each throttled array, only its first (limit - running) waiting tasks in queue order."""
        g = self.thr_group[arr]
        pos = np.flatnonzero(g >= 0)
        if not len(pos):
            return arr
        gg = g[pos]
        order = np.argsort(gg, kind="stable")
        sg = gg[order]
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order)) - np.searchsorted(sg, sg, side="left")
        over = rank >= (self.thr_limit - self.thr_running)[gg]
        if not over.any():
            return arr
        self.held_by_limit[arr[pos[over]]] = True
        keep = np.ones(len(arr), dtype=bool)
        keep[pos[over]] = False
        return arr[keep]

    def _drop(self, j: int, now: float, reason: str) -> None:
        """Job ``j`` can never start: out of the queue (never started, ``reason``), the policy told
        ``on_cancel`` so it plans without it; its children and singleton key are re-tested."""
        sim = self.sim
        queue, led = sim._queue, sim._ledger
        if not queue.waiting[j]:
            return
        queue.remove({j})
        self.n_hidden -= 1                               # only hidden jobs are dropped
        led.queued[j] += now - led.enqueued[j]
        led.enqueued[j] = math.nan
        sim._expected -= 1
        self.reason[j] = reason
        self.outcome[j] = _NEVER
        self.dropped += 1
        self._timed().discard(j)
        if sim._hooks.on_cancel is not None:
            sim._hooks.on_cancel(now, j)
        if sim._done is not None:
            sim._done()
        self._touch(j)


@dataclass(frozen=True)
class DependencyReport:
    """A gated run's per-job ``eligible`` (s; NaN: never eligible) and ``pending_reason`` ("" or
    Slurm's reason for a job that never started), and its summary figures."""

    eligible: np.ndarray
    pending_reason: np.ndarray
    summary: dict
