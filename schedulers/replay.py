"""``--scheduler replay``: the as-run schedule of a log, for power, network and failure what-ifs.

Every job starts at its **recorded start**, on its **recorded nodes** when the log has them:

* recorded start (s, the run's clock): ``columns["recorded_start"]`` (sacct Start; GPU traces), else
  submit + ``columns["wait_recorded"]`` (SWF field 3, when >= 0);
* recorded units: ``columns["recorded_nodes"]`` (sacct NodeList through `datasets.hostlist`: node ids;
  Alea logs: `twin.workload.HostRequest`) when they name as many units as the job's size (a sacct dump
  read with ``unit=cpus`` names nodes, not CPUs: those jobs take the run's placer), else the units the
  run's placer (``--placement``; first fit by default) chooses.

So ``hpctwin run -w LOG --scheduler replay`` reproduces the log's waits (wait = start - submit) and the
models (power, network, failures) run on the real history. A recorded start before the job's submit
(a clock glitch of the log) is taken at the submit (counted: ``started_at_submit``).

**Infeasible history.** A node index beyond the configured machine is refused before the run (job
id, node, ``--nodes`` to give). When a recorded start cannot be kept because its units are held, the
answer depends on why (``on_conflict``):

* ``"auto"`` (default): in a run where nothing can move a job (no physics model, no gate refusal)
  the recorded schedule itself does not fit the machine: a `ReplayError` names the job, the time,
  the units and the job holding them, and suggests ``--nodes``; in a run with models (failures,
  power caps, network contention) or refused starts a job may be late: it starts as soon as it can;
* ``"error"``: always the error; ``"delay"``: always start late.

Late jobs start in recorded-start order (ties: queue order), each as soon as its units are free; a
late job does not hold back later jobs that fit. ``describe()`` (summary.json ``scheduler_params``)
counts jobs started on time, late (and the largest delay, s), at their submit, and without a record.

**Jobs without a recorded start** (SWF wait -1): ``unrecorded = "fcfs"`` starts them in queue order as
soon as they fit, after the recorded jobs due at the same pass (the first that does not fit holds the
later ones). A workload with no recorded start at all is refused unless ``unrecorded = "fcfs"`` is
given (the policy is then plain FCFS; the conformance suite checks it that way). Jobs that never
started in the log are not in the run: the sacct reader drops them (``dropped.never_started``) and
the run skips SWF jobs with no runtime (``runtime_le_0``), both counted in summary.json's accounting.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from hpctwin.twin.contract import BindContext, ClusterView, Scheduler, Start
from hpctwin.twin.errors import RunConfigError
from hpctwin.twin.guards import SimulationError

CONFLICTS = ("auto", "error", "delay")
UNRECORDED = ("fcfs",)


class ReplayConfigError(RunConfigError):
    """Before the run: nothing to replay, or a recorded unit beyond the configured machine."""


class ReplayError(SimulationError):
    """During the run: the recorded schedule does not fit the configured machine (job, time, units)."""


class ReplayScheduler(Scheduler):
    """Starts every job at its recorded start on its recorded units (see the module docstring).

    Parameters
    ----------
    on_conflict: ``"auto"``, ``"error"`` or ``"delay"``: what a recorded start that cannot be kept
        does (an error naming the job and ``--nodes``, or a late start).
    unrecorded: None (default; a workload without any recorded start is refused) or ``"fcfs"``: jobs
        without a recorded start start in queue order as soon as they fit.
    """

    name = "replay"

    def __init__(self, on_conflict: str = "auto", unrecorded: str | None = None):
        if on_conflict not in CONFLICTS:
            raise RunConfigError(f"scheduler replay: on_conflict must be one of {', '.join(CONFLICTS)}, "
                                 f"got {on_conflict!r}")
        if unrecorded is not None and unrecorded not in UNRECORDED:
            raise RunConfigError(f"scheduler replay: unrecorded must be fcfs (or unset), got {unrecorded!r}")
        self.on_conflict = on_conflict
        self.unrecorded = unrecorded

    # ------------------------------------------------------------------ set-up
    def bind(self, ctx: BindContext, cluster: ClusterView | None = None) -> None:
        super().bind(ctx, cluster)
        jobs, n = self.jobs, len(self.jobs)
        self.target = recorded_starts(jobs)
        if self.target is None:
            if self.unrecorded != "fcfs":
                raise ReplayConfigError("scheduler replay: the workload has no recorded start times (sacct Start, SWF "
                                  "wait field 3, a recorded_start column): there is nothing to replay; "
                                  "--set scheduler.unrecorded=fcfs starts every job first come, first served")
            self.target = np.full(n, np.nan)
        elif self.unrecorded != "fcfs" and np.isnan(self.target).all():
            raise ReplayConfigError("scheduler replay: no job of the workload has a recorded start (every SWF wait is "
                              "-1?); --set scheduler.unrecorded=fcfs starts them first come, first served")
        self.early = int((self.target < np.asarray(jobs.submit)).sum())
        self.units = self._recorded_units(jobs, int(self.total))
        self.exact = not ctx.models             # nothing in the run can move a job (auto mode)
        self.refused = False
        self.missing = int(np.isnan(self.target).sum())
        if self.missing and self.unrecorded != "fcfs":
            j = int(np.flatnonzero(np.isnan(self.target))[0])
            raise ReplayConfigError(f"scheduler replay: {self.missing} jobs have no recorded start (first: job "
                              f"{int(jobs.job_id[j])}); --set scheduler.unrecorded=fcfs starts them first come, "
                              "first served")
        order = np.argsort(np.where(np.isnan(self.target), np.inf, self.target), kind="stable")
        self.order_t = self.target[order]
        self.on_time = self.late = self.placed = 0
        self.max_delay = 0.0
        self.started_flag = np.zeros(n, dtype=bool)

    def _recorded_units(self, jobs, total: int) -> list:
        """Per job: its recorded unit ids (int64 array), a HostRequest, or None; out-of-range ids refused."""
        rec = (getattr(jobs, "columns", None) or {}).get("recorded_nodes")
        n = len(jobs)
        out: list = [None] * n
        if rec is None:
            return out
        procs = np.asarray(jobs.procs)
        worst = None
        for j in range(n):
            r = rec[j]
            if r is None:
                continue
            if hasattr(r, "pick"):                       # HostRequest: counts per host
                if len(r) == procs[j]:
                    out[j] = r
                    top = max((int(p[-1]) for p in r.pools if len(p)), default=-1)
                    if top >= total and (worst is None or top > worst[1]):
                        worst = (j, top)
                continue
            ids = np.asarray(r, dtype=np.int64)
            if len(ids) != procs[j]:
                continue                                  # nodes of a CPU-sized job: the placer's units
            if len(ids) and (ids.min() < 0 or ids.max() >= total) and (worst is None or ids.max() > worst[1]):
                worst = (j, int(ids.max()))
            out[j] = ids
        if worst is not None:
            j, top = worst
            raise ReplayConfigError(f"scheduler replay: job {int(jobs.job_id[j])} was recorded on unit {top} "
                              f"(recorded_nodes, e.g. sacct NodeList), beyond the configured machine's {total} "
                              f"units (0-{total - 1}); give the log's machine size: --nodes {top + 1} or more")
        return out

    # ------------------------------------------------------------------ hooks
    def on_refused(self, now: float, job: int, reason: str) -> None:
        self.refused = True                               # a gate moved a start: lateness is not the log's

    def next_wakeup(self, now: float) -> float | None:
        """The next recorded start after ``now`` (s), or None."""
        k = int(np.searchsorted(self.order_t, now, side="right"))
        return float(self.order_t[k]) if k < len(self.order_t) and math.isfinite(self.order_t[k]) else None

    def describe(self) -> dict:
        return {"name": self.name, "on_conflict": self.on_conflict, "unrecorded": self.unrecorded,
                "started_on_time": int(getattr(self, "on_time", 0)), "started_late": int(getattr(self, "late", 0)),
                "max_delay_s": float(getattr(self, "max_delay", 0.0)),
                "started_at_submit": int(getattr(self, "early", 0)),
                "jobs_without_recorded_start": int(getattr(self, "missing", 0))}

    # ------------------------------------------------------------------ the pass
    def schedule(self, now: float, queue: np.ndarray, cluster: ClusterView) -> list:
        if not len(queue):
            return []
        t = self.target[queue]
        due = queue[t <= now]
        out: list = []
        free = cluster.free_mask.copy()
        n_free = int(cluster.free)
        if len(due):
            for j in due[np.argsort(self.target[due], kind="stable")].tolist():
                units, n_free = self._try(j, now, free, n_free, cluster)
                if units is False:
                    continue
                out.append(Start(j, units) if units is not None else j)
        if self.missing:
            for j in queue[np.isnan(t)].tolist():         # no recorded start: FCFS among themselves
                p = int(self.jobs.procs[j])
                if p > n_free:
                    break
                units = np.flatnonzero(free)[:p] if self._placer_free_differs(free, cluster) else None
                if units is not None:
                    free[units] = False
                n_free -= p
                out.append(Start(j, units) if units is not None else j)
                self.placed += 1
        return out

    @staticmethod
    def _placer_free_differs(free: np.ndarray, cluster: ClusterView) -> bool:
        """Units were taken earlier in this pass: the engine's placer does not know, so units are given."""
        return int(free.sum()) != int(cluster.free)

    def _try(self, j: int, now: float, free: np.ndarray, n_free: int, cluster: ClusterView) -> tuple[Any, int]:
        """(units or None for the placer, free count left) when job ``j`` starts now; (False, n_free)
        when it cannot (late, or the error of an infeasible recorded schedule)."""
        p = int(self.jobs.procs[j])
        rec = self.units[j]
        if rec is None:
            ok = p <= n_free
            units = None
            if ok and self._placer_free_differs(free, cluster):
                units = np.flatnonzero(free)[:p]
        elif hasattr(rec, "pick"):
            units = rec.pick(free)
            ok = units is not None
        else:
            units = rec
            ok = bool(free[rec].all())
        if not ok:
            self._conflict(j, now, rec, free, cluster)
            return False, n_free
        if units is not None:
            free[units] = False
        target = max(float(self.target[j]), float(self.jobs.submit[j]))
        delay = now - target
        if delay > 0:
            self.late += 1
            self.max_delay = max(self.max_delay, delay)
        else:
            self.on_time += 1
        return units, n_free - p

    def _conflict(self, j: int, now: float, rec, free: np.ndarray, cluster: ClusterView) -> None:
        """A due job cannot start: late (delay) or the located error (see the module docstring)."""
        if self.on_conflict == "delay" or (self.on_conflict == "auto" and (not self.exact or self.refused)):
            return
        target = max(float(self.target[j]), float(self.jobs.submit[j]))
        if now > target:
            return                                        # already late: its first conflict was reported
        jid, p = int(self.jobs.job_id[j]), int(self.jobs.procs[j])
        hint = ("; --set scheduler.on_conflict=delay starts such jobs late instead")
        if rec is not None and not hasattr(rec, "pick"):
            busy = [int(u) for u in rec if not free[u]]
            holder = _holder(cluster, busy[0]) if busy else None
            who = (f"job {int(self.jobs.job_id[holder])} (recorded start {_t(float(self.target[holder]))} s)"
                   if holder is not None and 0 <= holder < len(self.jobs) else "a job started earlier in this pass")
            raise ReplayError(f"scheduler replay: job {jid} was recorded to start at t={_t(target)} s on units "
                              f"{_ranges(rec)}, but unit {busy[0] if busy else '?'} is held by {who}: the recorded "
                              "schedule uses a node twice at once on this machine (is the NodeList numbering this "
                              f"machine's? are the nodes fewer than the log's? check --nodes){hint}")
        need = cluster.total - int(free.sum()) + p
        raise ReplayError(f"scheduler replay: job {jid} was recorded to start at t={_t(target)} s on {p} units, but "
                          f"only {int(free.sum())} of the machine's {cluster.total} are free then: the recorded "
                          f"schedule needs a larger machine (--nodes {need} at least; an SWF log's allocated "
                          "sizes: --size-field allocated)" + hint)


def recorded_starts(jobs) -> np.ndarray | None:
    """Each job's recorded start (s; NaN: none) from ``recorded_start`` or submit + ``wait_recorded``
    (>= 0), or None when the workload has neither column."""
    cols = getattr(jobs, "columns", None) or {}
    if "recorded_start" in cols:
        return np.asarray(cols["recorded_start"], dtype=np.float64).copy()
    if "wait_recorded" in cols:
        w = np.asarray(cols["wait_recorded"], dtype=np.float64)
        return np.where(w >= 0, np.asarray(jobs.submit, dtype=np.float64) + w, np.nan)
    return None


def _t(x: float) -> str:
    """A time (s) as text: whole seconds without exponent."""
    if not math.isfinite(x):
        return str(x)
    return f"{x:.0f}" if x == int(x) else f"{x:.3f}"


def _holder(cluster: ClusterView, unit: int) -> int | None:
    """The job index holding ``unit`` in the engine's cluster (None if unknown)."""
    nj = getattr(cluster, "node_job", None)
    return int(nj[unit]) if nj is not None else None


def _ranges(ids) -> str:
    from hpctwin.twin.ranges import compact_ranges  # noqa: PLC0415
    return compact_ranges(np.asarray(ids, dtype=np.int64))


def conformance_variants() -> dict[str, dict]:
    """The configuration the conformance suite checks: its generated workloads have no recorded
    starts, so replay runs there as ``unrecorded = "fcfs"`` (the recorded path is tested with exact
    times in ``tests/test_replay_scheduler.py``)."""
    return {"replay[unrecorded=fcfs]": {"unrecorded": "fcfs"}}
