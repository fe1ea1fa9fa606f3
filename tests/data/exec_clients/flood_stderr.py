"""A client writing NBYTES of lines to its stderr before anything else, then FCFS; with a STATUS
it prints a last stderr line and exits with that status instead (args: PIDFILE NBYTES [STATUS])."""
import json
import sys

from _pids import record

record(sys.argv[1])
line = "chatter " + "y" * 1015 + "\n"
for _ in range(int(sys.argv[2]) // len(line)):
    sys.stderr.write(line)
sys.stderr.flush()
if len(sys.argv) > 3:
    sys.stderr.write("fatal: out of ideas\n")
    sys.exit(int(sys.argv[3]))
size = {}
for raw in sys.stdin:
    msg = json.loads(raw)
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
    print(json.dumps({"now": msg["now"], "events": out}), flush=True)
