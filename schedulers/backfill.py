"""Queue-order x backfilling policies: FCFS, SJF, ..., with no, EASY or conservative backfilling.

Reference semantics (DESIGN.md section 6):

* ``none``: jobs start in priority order while they fit; the first job that does not fit blocks
  every job behind it.
* ``easy`` (Mu'alem and Feitelson, IEEE TPDS 12(6), 2001): jobs start in priority order while they
  fit. The first job that does not fit (the *head*) gets a reservation at its *shadow time*, the
  earliest time enough units will be free by the running jobs' estimated ends. The *extra* units
  are those free at the shadow time beyond the head's need. A later job (in priority order) starts
  now if it fits now and either (a) ends, by its estimate, no later than the shadow time, or (b)
  needs no more than the extra units (which it then consumes). Only the head is protected.
* ``conservative`` (same paper): every waiting job holds a reservation, made in priority order when
  it arrives, at the earliest time it fits in the availability profile without disturbing earlier
  reservations. After every job end the schedule is *compressed*: in priority order, each waiting
  job's reservation is removed and re-made at the earliest slot, which can only be earlier, so no
  reservation is ever delayed (a job not yet reserved is reserved in its place in the order). A
  job starts when its reservation reaches now. Every end, not only early ones, as pyss's
  ConservativeScheduler (``_reschedule_jobs`` on every termination) and batsched's
  ``conservative_bf`` (compression whenever a job ended) do: one compression pass is not a
  fixpoint (a job that moves can open a hole for a job earlier in the order), so an on-time end
  can still move reservations (tests/test_golden_schedules.py has a case). Several ends at one
  instant give one compression, in the pass after them (DESIGN.md section 5; batsched likewise
  compresses once per decision; pyss once per termination event). Checked job by job
  against the independent plain-list replay `benchmarks/plain_conservative.py` on KTH-SP2,
  SDSC-SP2, CTC-SP2 and HPC2N.
  A job that runs past its estimate (possible with estimate models or without the walltime kill)
  counts as ending now when the plan is rebuilt; a job whose due reservation relies on its units
  does not start: it gives the reservation back and is planned again at the next pass.

Estimates are the `JobTable.estimate` values (seconds); running jobs are expected to end at start +
estimate (wall clock, the scheduler's belief).
"""
from __future__ import annotations

import numpy as np

from .base import BindContext, ClusterView, Scheduler
from .ordering import STATIC_ORDERS, get_order
from .profile import ReservationPlan, shadow_from_sorted, shadow_time

BACKFILLS = ("none", "easy", "conservative")


class QueueScheduler(Scheduler):
    """A queue order combined with a backfilling rule.

    Parameters
    ----------
    order: ``fcfs``, ``sjf``, ``ljf``, ``saf``, ``wfp3`` or ``unicep`` (see `schedulers.ordering`).
    backfill: ``none``, ``easy`` or ``conservative``.
    """

    def __init__(self, order: str = "fcfs", backfill: str = "easy", name: str | None = None):
        if backfill not in BACKFILLS:
            raise ValueError(f"unknown backfill {backfill!r}; known: {', '.join(BACKFILLS)}")
        self.order_name = order
        self.order = get_order(order)
        self.backfill = backfill
        self.name = name or f"{order}+{backfill}"
        self._static_order = order in STATIC_ORDERS
        #: set to a dict to record each job's first reservation (EASY: the head's shadow time;
        #: conservative: every job's first reserved start), for tests and diagnostics
        self.first_reservation: dict[int, float] | None = None

    @property
    def guarantees(self) -> frozenset:
        """Reservation guarantees checked by `schedulers.checks`: EASY with FCFS order protects its
        head ("easy_head"); conservative never delays a first reservation ("conservative")."""
        if self.backfill == "easy" and self.order_name == "fcfs":
            return frozenset({"easy_head"})
        return frozenset({"conservative"}) if self.backfill == "conservative" else frozenset()

    def describe(self) -> dict:
        return {"name": self.name, "order": self.order_name, "backfill": self.backfill}

    def bind(self, ctx: BindContext, cluster: ClusterView | None = None) -> None:
        super().bind(ctx, cluster)
        jobs = self.jobs
        self.procs = jobs.procs
        self.est = jobs.estimate
        # conservative state
        self._plan: ReservationPlan | None = None
        self._run_end: dict[int, float] = {}   # running job -> expected end (s)
        self._stale: dict[int, float] = {}     # reserved jobs someone else started -> their reservation (s)
        self._dirty = False
        self._shadow_cache = None
        self._easy_idle = None      # (cluster version, queue length, head) after a pass that started nothing

    # ------------------------------------------------------------------ hooks
    def on_finish(self, now: float, job: int) -> None:
        if self.backfill != "conservative":
            return
        end = self._run_end.pop(job, None)
        if end is not None and self._plan is not None and self._plan.profile is not None:
            if end > now:
                self._plan.release(now, end, int(self.procs[job]))
            self._dirty = True      # any end compresses, on time too (module docstring)

    # ------------------------------------------------------------------ pass
    def schedule(self, now: float, queue: np.ndarray, cluster: ClusterView) -> list[int]:
        if len(queue) == 0:
            return []
        if self.backfill == "conservative":
            return self._conservative(now, queue, cluster)
        free = cluster.free
        if free <= 0:
            return []
        incremental = self.backfill == "easy" and self.order_name == "fcfs"
        if incremental:
            idle = self._easy_idle
            version = getattr(cluster, "version", None)
            by_end = getattr(cluster, "running_by_end", None)
            if (idle is not None and version is not None and idle[0] == version
                    and len(queue) >= idle[1] and int(queue[0]) == idle[2]
                    and by_end is not None and (not by_end or by_end[0][0] >= now)):
                # Nothing started or ended since the last pass, which started nothing: the head and
                # the reservation are the same, and every job already examined failed on rules that
                # only get stricter as time passes. Only the jobs that arrived since can start.
                # (Not when a running job is past its expected end: that end counts as now, so the
                # shadow time and the extra units move with time.)
                if len(queue) == idle[1]:
                    return []
                starts = self._easy(now, int(queue[0]), queue[idle[1]:], free, [], cluster)
                self._easy_idle = None if starts else (version, len(queue), int(queue[0]))
                return starts
        order = queue if self.order_name == "fcfs" else self.order(now, queue, self.jobs)
        # in-order starts: the longest prefix whose cumulative size fits (usually a few jobs, so
        # walk the head in Python and never touch the rest of a long queue)
        procs = self.procs
        k = 0
        head = order[:32].tolist()
        for j in head:
            p = int(procs[j])
            if p > free:
                break
            free -= p
            k += 1
        if k == len(head) and k < len(order):
            cs = np.cumsum(procs[order[k:]])
            m = int(np.searchsorted(cs, free, side="right"))
            if m:
                free -= int(cs[m - 1])
            k += m
        starts = order[:k].tolist()
        if k == len(order) or self.backfill == "none" or free <= 0:
            return starts
        starts = self._easy(now, int(order[k]), order[k + 1:], free, starts, cluster)
        if incremental:
            self._easy_idle = None if starts else (getattr(cluster, "version", None), len(queue), int(queue[0]))
        return starts

    def _easy(self, now: float, head: int, rest: np.ndarray, free: int, starts: list[int],
              cluster: ClusterView) -> list[int]:
        """EASY's backfilling behind ``head`` (which does not fit) among ``rest`` (in priority order),
        with ``free`` units free after this pass's in-order ``starts``."""
        small = len(rest) <= 32
        if small:
            # short queues (the common case): scalar checks beat numpy's per-call overhead
            rest_l = rest.tolist()
            procs_l = self.procs[rest].tolist()
            if not any(p <= free for p in procs_l):
                return starts      # nothing behind the head fits now: no reservation needed
        else:
            r_procs = self.procs[rest]
            if not (r_procs <= free).any():
                return starts
        shadow, extra = self._shadow(now, head, free, starts, cluster)
        if self.first_reservation is not None:
            self.first_reservation.setdefault(head, shadow)
        est = self.est
        if small:
            for j, p in zip(rest_l, procs_l):
                if p > free:
                    continue
                before = now + float(est[j]) <= shadow
                if before or p <= extra:
                    starts.append(j)
                    free -= p
                    if not before:
                        extra -= p
                    if free <= 0:
                        break
            return starts
        r_end = now + est[rest]
        ends_before = r_end <= shadow
        pos = 0
        while free > 0:
            ok = (r_procs[pos:] <= free) & (ends_before[pos:] | (r_procs[pos:] <= extra))
            hit = np.flatnonzero(ok)
            if len(hit) == 0:
                break
            i = pos + int(hit[0])
            p = int(r_procs[i])
            starts.append(int(rest[i]))
            free -= p
            if not ends_before[i]:
                extra -= p
            pos = i + 1
            if pos >= len(rest):
                break
        return starts

    def _shadow(self, now: float, head: int, free: int, starts: list[int], cluster: ClusterView) -> tuple[float, int]:
        """The head's reservation (shadow time, extra units) given this pass's in-order starts.

        It depends only on the running jobs and the head, so it is reused while the machine state
        (``cluster.version``) is unchanged and no expected end has passed. With the engine's
        cluster, the running jobs sorted by expected end are walked until enough units are free
        (a few steps), the same computation as `schedulers.profile.shadow_time`."""
        est = self.est
        need = int(self.procs[head])
        version = getattr(cluster, "version", None)
        key = (head, version, free)
        cached = self._shadow_cache
        if not starts and version is not None and cached is not None and cached[0] == key and cached[2] >= now:
            return cached[1]
        by_end = getattr(cluster, "running_by_end", None)
        if by_end is not None:
            res = shadow_from_sorted(now, free, need, by_end,
                               sorted((now + float(est[j]), int(self.procs[j])) for j in starts))
            if not starts:
                self._shadow_cache = (key, res, by_end[0][0] if by_end else np.inf)
            return res
        ends = cluster.running_expected_end
        procs_run = cluster.running_procs
        if starts:
            st = np.asarray(starts)
            ends = np.concatenate((ends, now + est[st]))
            procs_run = np.concatenate((procs_run, self.procs[st]))
        res = shadow_time(now, free, ends, procs_run, need)
        if not starts:
            self._shadow_cache = (key, res, float(ends.min()) if len(ends) else np.inf)
        return res

    # ------------------------------------------------------------------ conservative
    def _conservative(self, now: float, queue: np.ndarray, cluster: ClusterView) -> list[int]:
        """Conservative pass: keep the reservations (`schedulers.profile.ReservationPlan`) and re-plan
        from scratch only when the profile disagrees with the machine (a job ran past its estimate,
        units went down, or a wrapper refused one of our starts)."""
        order = queue if self._static_order and self.order_name == "fcfs" else self.order(now, queue, self.jobs)
        order = np.ascontiguousarray(order, dtype=np.int64)
        plan = self._plan
        if plan is None:
            plan = self._plan = ReservationPlan(len(self.procs), self.total, self.procs, self.est)
        prof = plan.profile
        rebuild = prof is None
        if not rebuild:
            prof.advance(now)
            due = plan.units_due(now, order) + sum(int(self.procs[j]) for j, t in self._stale.items() if t <= now)
            rebuild = prof.free_at(now) + due != cluster.free
        if rebuild:
            run = cluster.running_jobs
            ends = cluster.running_expected_end
            self._run_end = {int(j): float(e) for j, e in zip(run.tolist(), ends.tolist())}
            self._stale = {}
            plan.rebuild(now, ends, cluster.running_procs)
        fresh = None
        if self.first_reservation is not None:
            fresh = order[np.isnan(plan.resv[order])].tolist()
        starts = plan.plan(now, order, compress=self._dirty and not rebuild)
        self._dirty = False
        if fresh:
            for j in fresh:
                t = plan.resv[j]
                self.first_reservation.setdefault(j, float(t) if t == t else float(now))
        est, procs = self.est, self.procs
        free = cluster.free
        out = []
        for j in starts:
            p = int(procs[j])
            if p > free:
                # A running job outlived its estimate: the plan (rebuilt from expected ends, where an
                # overdue end counts as now) has its units free now, the machine does not. The job gives
                # its reservation back (due reservations start now) and is planned again next pass.
                plan.release(now, now + float(est[j]), p)
                self._dirty = True
                continue
            free -= p
            out.append(j)
            self._run_end[j] = now + float(est[j])
        return out

    def next_wakeup(self, now: float) -> float | None:
        """Conservative: the earliest future reservation start. A reservation can sit at a time
        where no job ends any more (the job whose end it waited for moved earlier after it was
        compressed), so the policy asks for a pass there to honour it."""
        if self.backfill != "conservative" or self._plan is None:
            return None
        t = self._plan.next_start
        if self._stale:
            t = min(t, min(self._stale.values()))
        return t if now < t < np.inf else None

    def on_start(self, now: float, job: int) -> None:
        if self.backfill == "conservative" and job not in self._run_end:
            # started by someone else's decision (e.g. a wrapper): track it for consistency
            self._run_end[job] = now + float(self.est[job])
            if self._plan is not None and self._plan.resv[job] == self._plan.resv[job]:
                self._stale[job] = float(self._plan.resv[job])
                self._plan.resv[job] = np.nan

    def on_requeue(self, now: float, job: int) -> None:
        """An interrupted job waits again: a reservation it still held (started by someone else)
        is its reservation again."""
        if job in self._stale:
            self._plan.resv[job] = self._stale.pop(job)

    def on_cancel(self, now: float, job: int) -> None:
        """A waiting job was withdrawn. EASY: the idle-pass and shadow caches (keyed by queue length
        and head) are dropped. Conservative: its reservation's units go back to the profile and the
        next pass compresses, as after an early end (no other reservation is delayed)."""
        self._easy_idle = None
        self._shadow_cache = None
        plan = self._plan
        if plan is None or plan.profile is None:
            return
        t = float(plan.resv[job])
        if t == t:
            plan.resv[job] = np.nan
            plan.profile.advance(now)
            start, end = max(t, plan.profile.now), t + float(plan.dur[job])
            if end > start:
                plan.profile.release(start, end, int(plan.procs[job]))
            self._dirty = True
