"""A client answering its first message with one canned bad reply, then reading its input until it
closes (args: PIDFILE KIND; KIND is a key of `replies`). ``j`` is the first job of the queue."""
import json
import os
import sys

from _pids import record


def execute(job_id, **data):
    return {"type": "EXECUTE_JOB", "data": {"job_id": job_id, **data}}


def line(now, events, **extra) -> bytes:
    return (json.dumps({"now": now, "events": events, **extra}) + "\n").encode()


def replies(msg: dict) -> dict:
    """Every bad reply (bytes, with the newline) to the first message ``msg``."""
    now, j = msg["now"], msg["state"]["queue"][0]
    return {
        "invalid-utf8": b'{"now": 0, "events": [], "note": "caf\xe9"}\n',
        "array": b"[1, 2]\n",
        "deep": b"[" * 200000 + b"]" * 200000 + b"\n",
        "huge-int": b'{"now": ' + b"9" * 5000 + b', "events": []}\n',
        "escape": b"\x1b[2J\rclear screen\n",
        "now-nan": line(float("nan"), [execute(j)]),
        "now-inf": line(float("inf"), [execute(j)]),
        "now-negative": line(-5.0, [execute(j)]),
        "now-string": line("soon", [execute(j)]),
        "timestamp-nan": line(now, [{"timestamp": float("nan"), **execute(j)}]),
        "duplicate": line(now, [execute(j), execute(j)]),
        "units-huge": line(now, [execute(j, alloc="0-9999999999")]),
        "units-huge-digits": line(now, [execute(j, alloc="0-" + "9" * 5000)]),
        "units-many-ranges": line(now, [execute(j, alloc=",".join(["0"] * 200000))]),
        "units-unicode-digits": line(now, [execute(j, alloc="\u0663")]),
        "units-list": line(now, [execute(j, alloc=[0])]),
        "call-inf": line(now, [{"type": "CALL_ME_LATER", "data": {"timestamp": float("inf")}}]),
        "call-bool": line(now, [{"type": "CALL_ME_LATER", "data": {"timestamp": True}}]),
        "event-not-object": line(now, ["EXECUTE_JOB"]),
        "data-not-object": line(now, [{"type": "EXECUTE_JOB", "data": [j]}]),
        "two-lines": line(now, []) + line(now, [execute(j)]),
    }


record(sys.argv[1])
first = json.loads(sys.stdin.readline())
os.write(1, replies(first)[sys.argv[2]])
for _ in sys.stdin:
    pass
