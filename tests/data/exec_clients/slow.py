"""FCFS, answering each message after DELAY seconds (args: PIDFILE DELAY)."""
import json
import sys
import time

from _pids import record

record(sys.argv[1])
delay = float(sys.argv[2])
size = {}
for line in sys.stdin:
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
    time.sleep(delay)
    print(json.dumps({"now": msg["now"], "events": out}), flush=True)
