"""The JSON-lines scheduler protocol (`hpctwin.schedulers.external`, docs/protocol.md): reference
clients give the built-in schedules, every event type reaches the client, and every protocol error
is located (command, message number, offending line)."""
from __future__ import annotations

import json
import shutil
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from hpctwin.schedulers.external import ExternalSchedulerError
from hpctwin.schedulers.registry import make_scheduler
from hpctwin.twin.run import RunConfig, simulate
from hpctwin.twin.workload import Workload
from hpctwin.schedulers import checks

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = ROOT / "examples" / "schedulers"
NODE = shutil.which("node")


def raised(fn, match: str) -> str:
    """The text of the error ``fn`` raises, which must match ``match``: the protocol error itself, or
    the engine's error that locates it (the engine may wrap a policy's exception with its time)."""
    import re
    with pytest.raises(Exception) as e:
        fn()
    text = str(e.value)
    assert isinstance(e.value, ExternalSchedulerError) or "ExternalSchedulerError" in text, text
    assert re.search(match, text), text
    return text


def small() -> Workload:
    return Workload.from_arrays("w", submit=[0.0, 0.0, 10.0, 20.0], runtime=[100.0, 50.0, 30.0, 10.0],
                                procs=[3, 2, 4, 1], requested_time=[200.0, 60.0, 40.0, 20.0])


def run_with(scheduler: str, wl: Workload | None = None, **kw):
    return simulate(RunConfig(workload="w", scheduler=scheduler, nodes=4, **kw), wl or small())


def client(tmp_path: Path, body: str, name: str = "client.py") -> str:
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return f"exec:{sys.executable} {p}"


@pytest.mark.parametrize("builtin,cmd", [
    ("fcfs", f"exec:{sys.executable} {CLIENTS / 'fcfs_client.py'}"),
    ("easy", f"exec:{sys.executable} {CLIENTS / 'easy_client.py'}"),
    pytest.param("fcfs", f"exec:{NODE} {CLIENTS / 'fcfs_client.js'}",
                 marks=pytest.mark.skipif(NODE is None, reason="node not installed")),
])
@pytest.mark.parametrize("workload", ["mixed", "burst", "exact"])
def test_reference_clients_give_the_builtin_schedules(builtin, cmd, workload):
    wl = checks._workloads()[workload]
    a = simulate(RunConfig(workload="w", scheduler=builtin, nodes=16), wl)
    b = simulate(RunConfig(workload="w", scheduler=cmd, nodes=16), wl)
    assert a.jobs.start.tolist() == b.jobs.start.tolist()
    assert a.jobs.nodes.tolist() == b.jobs.nodes.tolist()
    assert b.summary["scheduler_params"]["messages"] == b.summary["scheduling_passes"]   # one round trip a pass


def test_small_fcfs_schedule_by_hand():
    # 4 units: jobs 1 (3 units) and 2 (2 units) at t=0: 1 starts, 2 waits for it (ends 100);
    # job 3 (4 units) at 10 waits behind 2, starts at 150 when 2 ends; job 4 (1 unit) at 20 starts at 100
    # with job 2? no: FCFS blocks it behind job 3 -> 180
    r = run_with(f"exec:{sys.executable} {CLIENTS / 'fcfs_client.py'}")
    assert r.jobs.start.tolist() == [0.0, 100.0, 150.0, 180.0]


def test_events_reach_the_client_with_a_snapshot(tmp_path):
    log = tmp_path / "log.jsonl"
    cmd = client(tmp_path, f"""
        import json, sys
        log = open({str(log)!r}, "w")
        size = {{}}
        for line in sys.stdin:
            msg = json.loads(line)
            log.write(line)
            log.flush()
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
                out.append({{"type": "EXECUTE_JOB", "data": {{"job_id": j, "alloc": None}}}})
            print(json.dumps({{"now": msg["now"], "events": out}}), flush=True)
        """)
    wl = Workload.from_arrays("w", submit=[0.0, 5.0], runtime=[100.0, 50.0], procs=[2, 2], requested_time=[60.0, 100.0])
    r = run_with(cmd, wl)
    msgs = [json.loads(x) for x in log.read_text().splitlines()]
    kinds = [e["type"] for m in msgs for e in m["events"]]
    assert kinds[0] == "SIMULATION_BEGINS" and kinds[-1] == "SIMULATION_ENDS"
    assert msgs[0]["events"][0]["data"]["nb_resources"] == 4
    assert kinds.count("JOB_SUBMITTED") == 2 and kinds.count("JOB_COMPLETED") == 2
    done = {e["data"]["job_id"]: e["data"]["job_state"] for m in msgs for e in m["events"] if e["type"] == "JOB_COMPLETED"}
    assert done == {1: "COMPLETED_WALLTIME_REACHED", 2: "COMPLETED_SUCCESSFULLY"}    # job 1 killed at 60 s
    second = msgs[1]
    assert second["now"] == 5.0 and second["state"]["queue"] == [2]
    assert second["state"]["running"] == [{"job_id": 1, "res": 2, "expected_end": 60.0}]
    assert second["state"]["free"] == "2-3" and second["state"]["nb_free"] == 2
    job = msgs[0]["events"][1]["data"]["job"]
    assert job == {"id": 1, "subtime": 0.0, "res": 2, "walltime": 60.0, "estimate": 60.0, "user": -1, "group": -1,
                   "queue": -1, "partition": -1}
    assert r.jobs.state.tolist() == ["TIMEOUT", "COMPLETED"]


def test_call_me_later_wakes_the_engine(tmp_path):
    # the client starts nothing until its requested call at t = 50
    cmd = client(tmp_path, """
        import json, sys
        asked = False
        for line in sys.stdin:
            msg = json.loads(line)
            kinds = [e["type"] for e in msg["events"]]
            if "SIMULATION_ENDS" in kinds:
                break
            out = []
            if not asked:
                out.append({"type": "CALL_ME_LATER", "data": {"timestamp": 50.0}})
                asked = True
            elif "REQUESTED_CALL" in kinds or msg["now"] >= 50.0:
                out = [{"type": "EXECUTE_JOB", "data": {"job_id": j}} for j in msg["state"]["queue"][:1]]
            print(json.dumps({"now": msg["now"], "events": out}), flush=True)
        """)
    wl = Workload.from_arrays("w", submit=[0.0], runtime=[10.0], procs=[1], requested_time=[20.0])
    r = run_with(cmd, wl)
    assert r.jobs.start.tolist() == [50.0]


def test_failures_send_killed_and_resource_events(tmp_path):
    log = tmp_path / "kinds.txt"
    fcfs = (CLIENTS / "fcfs_client.py").read_text()
    wrapped = fcfs.replace("        msg = json.loads(line)\n",
                           f"        msg = json.loads(line)\n        open({str(log)!r}, 'a').write(' '.join(e['type'] for e in msg['events']) + '\\n')\n")
    p = tmp_path / "logging_fcfs.py"
    p.write_text(wrapped)
    wl = Workload.from_arrays("w", submit=[0.0, 0.0], runtime=[1000.0, 1000.0], procs=[2, 2],
                              requested_time=[5000.0, 5000.0])
    r = run_with(f"exec:{sys.executable} {p}", wl,
                 options={"failures": {"enabled": True, "events": [[100.0, 0]], "repair_s": 50.0, "regimes": {"default": "requeue"}}})
    text = log.read_text()
    assert "JOB_KILLED" in text and "RESOURCE_STATE_CHANGED" in text
    assert r.summary["failures"]["node_failures"] == 1


@pytest.mark.parametrize("body,match", [
    ("import sys; sys.exit(3)", r"exited with status 3 in reply to message 1 \(t=0 s\)"),
    ("import sys\nsys.stdin.readline()\nprint('hello')", r"reply to message 1 \(t=0 s\): not JSON .*the line was: hello"),
    ("import sys\nsys.stdin.readline()\nprint('[1, 2]')", r"expected an object"),
    ("import sys, json\nsys.stdin.readline()\nprint(json.dumps({'events': [{'type': 'RUN', 'data': {}}]}))",
     r"event 0: unknown decision type 'RUN'; known: EXECUTE_JOB, REJECT_JOB, CALL_ME_LATER"),
    ("import sys, json\nsys.stdin.readline()\nprint(json.dumps({'events': [{'type': 'EXECUTE_JOB', 'data': {'job_id': 99}}]}))",
     r"EXECUTE_JOB names job_id 99, not a job of the workload"),
    ("import sys, json\nsys.stdin.readline()\nprint(json.dumps({'events': [{'type': 'EXECUTE_JOB', 'data': {'job_id': 1}}, "
     "{'type': 'EXECUTE_JOB', 'data': {'job_id': 1}}]}))", r"event 1: EXECUTE_JOB of job 1, which is not waiting"),
    ("import sys, json\nsys.stdin.readline()\nprint(json.dumps({'events': [{'type': 'EXECUTE_JOB', 'data': {'job_id': 1, 'alloc': '0-1'}}]}))",
     r"alloc '0-1' has 2 distinct units; job 1 needs 3"),
    ("import sys, json\nsys.stdin.readline()\nprint(json.dumps({'events': [{'type': 'EXECUTE_JOB', 'data': {'job_id': 1, 'alloc': '2-4'}}]}))",
     r"alloc '2-4' of job 1 includes units that are not free"),
    ("import sys, json\nsys.stdin.readline()\nprint(json.dumps({'events': [{'type': 'CALL_ME_LATER', 'data': {'timestamp': 0}}]}))",
     r"CALL_ME_LATER timestamp must be a number > now \(0\), got 0"),
    ("import sys, json\nsys.stdin.readline()\nprint(json.dumps({'events': [{'type': 'REJECT_JOB', 'data': {'job_id': 2}}]}))",
     r"REJECT_JOB of job 2: the engine has no job rejection yet"),
    ("import sys\nsys.stderr.write('boom: bad config\\n'); sys.exit(1)", r"status 1 .*its stderr ends with: boom: bad config"),
])
def test_protocol_errors_are_located(tmp_path, body, match):
    cmd = client(tmp_path, body)
    e = raised(lambda: run_with(cmd), match)
    assert str(tmp_path / "client.py") in e                       # names the command


def test_no_reply_in_time(tmp_path):
    cmd = client(tmp_path, "import sys, time\nsys.stdin.readline()\ntime.sleep(5)")
    raised(lambda: run_with(cmd, options={"scheduler": {"timeout_s": 0.3}}),
           r"no reply within 0.3 s in reply to message 1")


def test_a_command_that_cannot_start():
    raised(lambda: run_with("exec:/nonexistent/prog --x"), r"cannot start '/nonexistent/prog'")
    raised(lambda: run_with("exec:  "), "empty command")


def test_exec_prefix_in_the_registry():
    s = make_scheduler("exec:python3 x.py", options={"timeout_s": 5})
    assert s.command == "python3 x.py" and s.timeout_s == 5.0 and s.name == "exec:python3 x.py"
    assert np.isfinite(s.timeout_s)
