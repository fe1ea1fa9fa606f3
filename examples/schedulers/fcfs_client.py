#!/usr/bin/env python3
"""FCFS over hpctwin's JSON-lines scheduler protocol (docs/protocol.md): a reference client.

Standard library only; no hpctwin import. Run it through the twin with

    hpctwin run --workload KTH-SP2 --scheduler "exec:python3 examples/schedulers/fcfs_client.py"

Policy (DESIGN.md section 6): strict first-come first-served; jobs start in queue order while they
fit and the first job that does not fit blocks every job behind it. Job sizes come from the
JOB_SUBMITTED events; the queue order and the free units from each message's state snapshot.
"""
import json
import sys


def decide(msg, size):
    """EXECUTE_JOB decisions for one message (``size``: job id -> units, updated from its events)."""
    for ev in msg["events"]:
        if ev["type"] == "JOB_SUBMITTED":
            size[ev["data"]["job_id"]] = ev["data"]["job"]["res"]
    state = msg.get("state")
    if state is None:                       # SIMULATION_ENDS comes without a state
        return []
    free = state["nb_free"]
    out = []
    for job_id in state["queue"]:
        if size[job_id] > free:
            break
        free -= size[job_id]
        out.append({"timestamp": msg["now"], "type": "EXECUTE_JOB", "data": {"job_id": job_id}})
    return out


def main():
    size = {}
    for line in sys.stdin:
        msg = json.loads(line)
        if any(ev["type"] == "SIMULATION_ENDS" for ev in msg["events"]):
            return 0
        print(json.dumps({"now": msg["now"], "events": decide(msg, size)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
