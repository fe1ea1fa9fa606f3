"""Shared by the hostile test clients: record this process's pid (and its role) in a file, so that
tests/test_external_hostile.py can check that the twin ended every process of the client's group; and
the FCFS answer loop the well-behaved part of each client runs."""
import json
import os
import sys
import time


def record(path: str, role: str = "client") -> None:
    """Append ``role pid`` to ``path`` (one line, flushed at once)."""
    with open(path, "a") as f:
        f.write(f"{role} {os.getpid()}\n")


def serve_fcfs(delay: float = 0.0, stop_at: int | None = None, status: int = 0) -> None:
    """Answer each message on stdin with FCFS starts (no backfilling), after ``delay`` seconds; with
    ``stop_at``, exit with ``status`` instead of answering message ``stop_at + 1`` (0-based ``stop_at``)."""
    size = {}
    for k, line in enumerate(sys.stdin):
        if stop_at is not None and k == stop_at:
            sys.stderr.write(f"early_exit: leaving at message {k + 1}\n")
            sys.exit(status)
        msg = json.loads(line)
        if any(e["type"] == "SIMULATION_ENDS" for e in msg["events"]):
            break
        for e in msg["events"]:
            if e["type"] == "JOB_SUBMITTED":
                size[e["data"]["job_id"]] = e["data"]["job"]["res"]
        free, out = msg["state"]["nb_free"], []
        for j in msg["state"]["queue"]:
            if size[j] > free:
                break
            free -= size[j]
            out.append({"type": "EXECUTE_JOB", "data": {"job_id": j}})
        if delay:
            time.sleep(delay)
        print(json.dumps({"now": msg["now"], "events": out}), flush=True)
