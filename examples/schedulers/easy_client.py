#!/usr/bin/env python3
"""EASY backfilling over hpctwin's JSON-lines scheduler protocol (docs/protocol.md).

Standard library only; no hpctwin import. Run it through the twin with

    hpctwin run --workload KTH-SP2 --scheduler "exec:python3 examples/schedulers/easy_client.py"

Policy (Mu'alem and Feitelson, IEEE TPDS 12(6), 2001; DESIGN.md section 6): jobs start in FCFS
order while they fit. The first job that does not fit (the head) gets a reservation at its shadow
time, the earliest time enough units are free by the running jobs' expected ends (the snapshot's
``expected_end``, start + estimate, never earlier than now); the *extra* units are those free then
beyond the head's need. A later job starts now if it fits now and either ends (by its estimate)
no later than the shadow time or needs no more than the extra units, which it then consumes.
Units out of service appear in ``running`` with their repair time as expected end, so the
reservation plans around them. On the same input this client gives the same schedule as hpctwin's
built-in ``easy`` (tests/test_external.py checks it).
"""
import json
import sys


def shadow(now, free, need, ends):
    """(shadow time, extra units) for a head of ``need`` units; ``ends``: (expected end, units)."""
    if free >= need:
        return now, free - need
    avail = free
    t = None
    for end, units in sorted((max(e, now), u) for e, u in ends):
        if t is not None and end != t:
            break
        avail += units
        if t is None and avail >= need:
            t = end
    if t is None:
        return float("inf"), 0
    return t, avail - need


def decide(msg, jobs):
    """EXECUTE_JOB decisions for one message (``jobs``: id -> job record from JOB_SUBMITTED)."""
    for ev in msg["events"]:
        if ev["type"] == "JOB_SUBMITTED":
            jobs[ev["data"]["job_id"]] = ev["data"]["job"]
    state = msg.get("state")
    if state is None:
        return []
    now, free = msg["now"], state["nb_free"]
    ends = [(r["expected_end"], r["res"]) for r in state["running"]]
    queue = state["queue"]
    started = []
    k = 0
    while k < len(queue) and jobs[queue[k]]["res"] <= free:        # in-order starts
        job = jobs[queue[k]]
        free -= job["res"]
        ends.append((now + job["estimate"], job["res"]))
        started.append(queue[k])
        k += 1
    if k < len(queue):                                             # reservation for the head
        t_shadow, extra = shadow(now, free, jobs[queue[k]]["res"], ends)
        for job_id in queue[k + 1:]:
            job = jobs[job_id]
            if job["res"] > free:
                continue
            before = now + job["estimate"] <= t_shadow
            if before or job["res"] <= extra:
                started.append(job_id)
                free -= job["res"]
                if not before:
                    extra -= job["res"]
                if free <= 0:
                    break
    return [{"timestamp": now, "type": "EXECUTE_JOB", "data": {"job_id": j}} for j in started]


def main():
    jobs = {}
    for line in sys.stdin:
        msg = json.loads(line)
        if any(ev["type"] == "SIMULATION_ENDS" for ev in msg["events"]):
            return 0
        print(json.dumps({"now": msg["now"], "events": decide(msg, jobs)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
