"""Property tests over random workloads for every built-in scheduler.

Invariants: no unit used by two jobs at once, capacity never exceeded, no job before its submit
time, every job finishes with end - start = min(runtime, request). EASY never starts the
reserved head later than its reservation, conservative never starts any job later than its first
reservation. And the engine's FCFS / EASY / conservative schedules equal those of a deliberately
naive reference implementation written from the textbook definitions below.
"""
from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpctwin.schedulers.backfill import QueueScheduler
from hpctwin.twin.ranges import parse_ranges
from tests.helpers import simulate

SCHEDULERS = [("fcfs", None, None), ("easy", None, None), ("conservative", None, None),
              ("sjf", None, None), ("easy", "sjf", None), ("easy", "wfp3", None),
              ("conservative", "unicep", None), ("ljf", None, "easy"), ("saf", None, "conservative")]


@st.composite
def workloads(draw):
    total = draw(st.integers(1, 12))
    n = draw(st.integers(1, 22))
    rows = []
    t = 0
    for i in range(n):
        t += draw(st.integers(0, 6))
        run = draw(st.integers(1, 40))
        procs = draw(st.integers(1, total))
        req = draw(st.one_of(st.none(), st.integers(1, 60)))
        rows.append((i + 1, t, run, procs, req))
    return total, rows


# ---------------------------------------------------------------------------- reference simulator
def reference(rows, total, policy):
    """Naive event simulation. Returns {job_id: start}."""
    jobs = []
    for jid, sub, run, procs, req in rows:
        est = req if req is not None else run
        actual = min(run, req) if req is not None else run
        jobs.append(dict(id=jid, submit=sub, actual=actual, procs=procs, est=est))
    jobs.sort(key=lambda j: (j["submit"], j["id"]))
    pending = list(jobs)
    queue, running, start = [], [], {}
    resv = {}                                   # conservative: id -> reserved start

    def used(t, extra_resv=None):
        """Units in use at t by running jobs (by expected end) and reservations."""
        u = sum(r["procs"] for r in running if r["start"] <= t < max(r["start"] + r["est"], now))
        for j in queue:
            if j["id"] in resv and resv[j["id"]] <= t < resv[j["id"]] + j["est"]:
                u += j["procs"]
        return u

    def fits(t0, d, p):
        pts = {t0} | {r["start"] + r["est"] for r in running} | \
              {resv[j["id"]] for j in queue if j["id"] in resv} | \
              {resv[j["id"]] + j["est"] for j in queue if j["id"] in resv}
        return all(total - used(x) >= p for x in pts if t0 <= x < t0 + d)

    def earliest(d, p):
        cands = sorted({now} | {max(r["start"] + r["est"], now) for r in running} |
                       {resv[j["id"]] + j["est"] for j in queue if j["id"] in resv})
        for c in cands:
            if c >= now and fits(c, d, p):
                return c
        raise AssertionError("no slot")

    now = 0.0
    while pending or queue or running:
        cands = [j["submit"] for j in pending[:1]] + [r["start"] + r["actual"] for r in running]
        if policy == "conservative":
            cands += [t for t in resv.values() if t > now]
        now = min(cands)
        early = False
        for r in [r for r in running if r["start"] + r["actual"] == now]:
            running.remove(r)
            early |= r["start"] + r["est"] > now
        while pending and pending[0]["submit"] == now:
            queue.append(pending.pop(0))
        free = total - sum(r["procs"] for r in running)
        if policy == "fcfs":
            while queue and queue[0]["procs"] <= free:
                j = queue.pop(0)
                j["start"] = now
                running.append(j)
                free -= j["procs"]
        elif policy == "easy":
            while queue and queue[0]["procs"] <= free:
                j = queue.pop(0)
                j["start"] = now
                running.append(j)
                free -= j["procs"]
            if queue:
                head = queue[0]
                avail = free
                shadow = None
                for r in sorted(running, key=lambda r: max(r["start"] + r["est"], now)):
                    avail += r["procs"]
                    if avail >= head["procs"]:
                        shadow = max(r["start"] + r["est"], now)
                        break
                # all jobs ending at the shadow release together
                avail = free + sum(r["procs"] for r in running if max(r["start"] + r["est"], now) <= shadow)
                extra = avail - head["procs"]
                for j in list(queue[1:]):
                    if j["procs"] <= free and (now + j["est"] <= shadow or j["procs"] <= extra):
                        queue.remove(j)
                        j["start"] = now
                        running.append(j)
                        free -= j["procs"]
                        if now + j["est"] > shadow:
                            extra -= j["procs"]
        else:  # conservative
            if early:
                for j in queue:
                    if j["id"] in resv and resv[j["id"]] > now:
                        old = resv.pop(j["id"])
                        resv[j["id"]] = earliest(j["est"], j["procs"])
                        assert resv[j["id"]] <= old
            for j in queue:
                if j["id"] not in resv:
                    resv[j["id"]] = earliest(j["est"], j["procs"])
            for j in list(queue):
                if resv[j["id"]] <= now:
                    queue.remove(j)
                    del resv[j["id"]]
                    j["start"] = now
                    running.append(j)
        for j in jobs:
            if "start" in j:
                start[j["id"]] = j["start"]
    return start


# ---------------------------------------------------------------------------- invariants
def check_invariants(res, prep, total):
    wl = prep.workload
    assert not np.isnan(res.start).any(), "every job starts"
    assert not np.isnan(res.end).any(), "every job finishes"
    assert (res.start >= wl.submit).all(), "no job before its submit time"
    expected_run = np.minimum(wl.runtime, prep.kill_limit)
    np.testing.assert_allclose(res.end - res.start, expected_run)
    # capacity and exclusive units: sweep over all start/end instants
    events = sorted(set(res.start) | set(res.end))
    for t in events:
        live = np.flatnonzero((res.start <= t) & (t < res.end))
        units = np.concatenate([parse_ranges(res.nodes[j]) for j in live]) if len(live) else np.empty(0, int)
        assert len(units) == prep.workload.procs[live].sum() <= total
        assert len(np.unique(units)) == len(units), f"a unit is used twice at t={t}"
        assert (units >= 0).all() and (units < total).all()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_invariants_every_scheduler(wl):
    total, rows = wl
    for name, order, backfill in SCHEDULERS:
        res, prep, _ = simulate(rows, total, name, order=order, backfill=backfill)
        check_invariants(res, prep, total)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_engine_matches_reference(wl):
    total, rows = wl
    for policy in ("fcfs", "easy", "conservative"):
        res, prep, _ = simulate(rows, total, policy)
        got = {int(j): float(s) for j, s in zip(prep.workload.job_id, res.start)}
        want = reference(rows, total, policy)
        assert got == want, policy


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_reservations_never_delayed(wl):
    total, rows = wl
    for backfill in ("easy", "conservative"):
        sched = QueueScheduler("fcfs", backfill)
        sched.first_reservation = {}
        res, prep, _ = simulate(rows, total, sched_obj=sched)
        for j, t in sched.first_reservation.items():
            assert res.start[j] <= t + 1e-9, (backfill, int(prep.workload.job_id[j]), res.start[j], t)
