"""The engine's FCFS / EASY / conservative schedules equal, start for start, those of a
deliberately naive reference implementation written from the textbook definitions below, on random
workloads.

The invariants every scheduler must keep (no unit used twice, capacity, no start before submit,
walltime kills, EASY head and conservative reservations) are checked for every registered scheduler
by the conformance suite, `hpctwin.schedulers.checks` (tests/test_conformance.py).
"""
from __future__ import annotations

import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import simulate


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
        ended = False
        for r in [r for r in running if r["start"] + r["actual"] == now]:
            running.remove(r)
            ended = True            # conservative compresses after every end (pyss, batsched)
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
            if ended:                   # in order: re-reserve the reserved, reserve the new
                for j in queue:
                    if j["id"] not in resv:
                        resv[j["id"]] = earliest(j["est"], j["procs"])
                    elif resv[j["id"]] > now:
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


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
@pytest.mark.slow
def test_engine_matches_reference(wl):
    total, rows = wl
    for policy in ("fcfs", "easy", "conservative"):
        res, prep, _ = simulate(rows, total, policy)
        got = {int(j): float(s) for j, s in zip(prep.workload.job_id, res.start)}
        want = reference(rows, total, policy)
        assert got == want, policy
