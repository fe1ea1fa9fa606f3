"""FCFS for the first N messages, then exit with STATUS without answering (args: PIDFILE N STATUS)."""
import json
import sys

from _pids import record

record(sys.argv[1])
n, status = int(sys.argv[2]), int(sys.argv[3])
size = {}
for k, line in enumerate(sys.stdin):
    if k == n:
        sys.stderr.write(f"early_exit: leaving at message {k + 1}\n")
        sys.exit(status)
    msg = json.loads(line)
    for e in msg["events"]:
        if e["type"] == "JOB_SUBMITTED":
            size[e["data"]["job_id"]] = e["data"]["job"]["res"]
    free, out = msg["state"]["nb_free"], []
    for j in msg["state"]["queue"]:
        if size[j] > free:
            break
        free -= size[j]
        out.append({"type": "EXECUTE_JOB", "data": {"job_id": j}})
    print(json.dumps({"now": msg["now"], "events": out}), flush=True)
