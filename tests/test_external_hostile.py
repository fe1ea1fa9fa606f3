"""The JSON-lines scheduler protocol against hostile clients (`hpctwin.schedulers.external`, issue 23):
every write and read is bounded by ``timeout_s``, a reply line by 64 MiB, units are checked against
the machine before they are expanded, every failure is a one-line located error, and no process of
the client's group survives the run (error, timeout or normal end).

The clients are the small scripts in tests/data/exec_clients/; each appends ``role pid`` lines to a
pid file (its first argument) so that the test can check its processes are gone."""
from __future__ import annotations

import os
import re
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hpctwin.schedulers.external import (
    ExternalProtocolError,
    ExternalScheduler,
    ExternalSchedulerConfigError,
    ExternalSchedulerError,
    _distinct,
    alloc_ranges,
)
from hpctwin.schedulers.registry import make_scheduler
from hpctwin.twin.ranges import parse_ranges
from hpctwin.twin.run import RunConfig, simulate
from hpctwin.twin.workload import Workload

CLIENTS = Path(__file__).resolve().parent / "data" / "exec_clients"


# ------------------------------------------------------------------------------ helpers
def small() -> Workload:
    """4 jobs on a 4-unit machine (job 1 needs 3 units; built-in FCFS starts 0, 100, 150, 180)."""
    return Workload.from_arrays("w", submit=[0.0, 0.0, 10.0, 20.0], runtime=[100.0, 50.0, 30.0, 10.0],
                                procs=[3, 2, 4, 1], requested_time=[200.0, 60.0, 40.0, 20.0])


def client(tmp_path: Path, script: str, *args: object) -> tuple[str, Path]:
    """(``exec:`` spec of a test client, its pid file)."""
    pidfile = tmp_path / "pids.txt"
    argv = [sys.executable, str(CLIENTS / script), str(pidfile), *map(str, args)]
    return "exec:" + " ".join(shlex.quote(a) for a in argv), pidfile


def run(spec: str, timeout_s: float, wl: Workload | None = None, nodes: int = 4):
    return simulate(RunConfig(workload="w", scheduler=spec, nodes=nodes,
                              options={"scheduler": {"timeout_s": timeout_s}}), wl or small())


def failure(spec: str, timeout_s: float, match: str, wl: Workload | None = None, nodes: int = 4) -> str:
    """The text of the protocol error the run raises; it must match ``match``, name the command and
    be one line."""
    with pytest.raises(ExternalProtocolError) as e:
        run(spec, timeout_s, wl, nodes)
    text = str(e.value)
    assert re.search(match, text), text
    assert spec[len("exec:"):] in text or repr(spec[len("exec:"):]) in text, text
    assert "\n" not in text and "\x1b" not in text, text
    return text


def _state(pid: int) -> str | None:
    """The process's state letter from /proc (None: no such process)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:].split()[0].decode()


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie has ended: it only waits to be reaped by its parent,
    which for an orphan is init; some containers' init never reaps)."""
    if os.path.isdir("/proc"):
        return _state(pid) not in (None, "Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def group_members(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that still run."""
    if not os.path.isdir("/proc"):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        return [pgid]
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            rest = stat[stat.rfind(b")") + 2:].split()
            if int(rest[2]) == pgid and rest[0] not in (b"Z", b"X"):
                out.append(int(name))
    return out


def assert_all_ended(pidfile: Path, roles: tuple[str, ...] = ("client",)) -> dict[str, int]:
    """Every process the client recorded, and every process of its group, has ended."""
    pids = {}
    for row in pidfile.read_text().splitlines():
        role, pid = row.split()
        pids[role] = int(pid)
    assert set(roles) <= set(pids), pids
    for role, pid in pids.items():
        assert not alive(pid), f"{role} {pid} still runs"
    assert group_members(pids["client"]) == []          # the client leads its own group
    assert os.getpgrp() != pids["client"]
    return pids


FCFS_STARTS = [0.0, 100.0, 150.0, 180.0]


# ------------------------------------------------------------------------------ timeouts both ways
def test_a_client_that_never_reads_is_stopped_within_the_timeout(tmp_path):
    # 6,000 jobs at t=0: the first message is over 1 MiB, far more than a pipe holds
    n = 6000
    wl = Workload.from_arrays("w", submit=[0.0] * n, runtime=[10.0] * n, procs=[1] * n, requested_time=[20.0] * n)
    spec, pids = client(tmp_path, "silent.py")
    t0 = time.monotonic()
    text = failure(spec, 1.0, r"silent\.py .*' did not read its input within 1 s: message 1 \(t=0 s\), "
                              r"[\d,]+ of [\d,]+ bytes written$", wl, nodes=64)
    assert time.monotonic() - t0 < 1.0 + 4.0
    written, total = (int(x.replace(",", "")) for x in re.search(r"([\d,]+) of ([\d,]+) bytes", text).groups())
    assert total > 2**20 and written < total
    assert_all_ended(pids)


def test_a_client_that_never_answers(tmp_path):
    spec, pids = client(tmp_path, "mute.py")
    failure(spec, 0.5, r"mute\.py .*': no reply within 0\.5 s in reply to message 1 \(t=0 s\)$")
    assert_all_ended(pids)


@pytest.mark.slow
def test_a_client_ignoring_sigterm_is_killed(tmp_path):
    spec, pids = client(tmp_path, "mute.py", "ignore-term")
    failure(spec, 0.5, r"no reply within 0\.5 s in reply to message 1 \(t=0 s\)$")
    assert_all_ended(pids)


def test_a_slow_client_within_the_timeout_gives_the_fcfs_schedule(tmp_path):
    spec, pids = client(tmp_path, "slow.py", 0.05)
    r = run(spec, 2.0)
    assert r.jobs.start.tolist() == FCFS_STARTS
    assert_all_ended(pids)


def test_a_client_slower_than_the_timeout(tmp_path):
    spec, pids = client(tmp_path, "slow.py", 5)
    failure(spec, 0.5, r"no reply within 0\.5 s in reply to message 1 \(t=0 s\)$")
    assert_all_ended(pids)


# ------------------------------------------------------------------------------ floods
def test_a_reply_line_is_bounded_to_64_mib(tmp_path):
    spec, pids = client(tmp_path, "flood_stdout.py", 64 * 2**20 + 5_000_000)
    failure(spec, 20.0, r"reply to message 1 \(t=0 s\): a line longer than 64 MiB \(67,108,864 bytes\) without a "
                        r"newline; a reply is one JSON object on one line$")
    assert_all_ended(pids)


def test_megabytes_on_stderr_do_not_block_a_valid_client(tmp_path):
    spec, pids = client(tmp_path, "flood_stderr.py", 8_000_000)
    r = run(spec, 5.0)
    assert r.jobs.start.tolist() == FCFS_STARTS
    assert_all_ended(pids)


def test_only_the_end_of_a_huge_stderr_is_shown(tmp_path):
    spec, pids = client(tmp_path, "flood_stderr.py", 8_000_000, 2)
    text = failure(spec, 5.0, r"exited with status 2 in reply to message 1 \(t=0 s\); its stderr ends with: "
                              r"chatter y+\.\.\. \| .*\| fatal: out of ideas$")
    assert len(text) < 1600                       # 5 lines of at most 200 characters, plus the context
    assert_all_ended(pids)


# ------------------------------------------------------------------------------ the process group
@pytest.mark.parametrize("mode,match", [
    # the grandchild holds the pipes: no end of file, the reply wait runs out, the exit is reported
    ("fail", (r"forker\.py .* fail' exited with status 4 in reply to message 1 \(t=0 s\) \(no reply within 1 s; "
             r"a process it started keeps its output open\); its stderr ends with: forker: giving up$")),
    ("fail-detached", (r"forker\.py .* fail-detached' exited with status 4 in reply to message 1 \(t=0 s\); "
                      r"its stderr ends with: forker: giving up$")),
])
def test_the_grandchild_of_a_failing_client_is_ended(tmp_path, mode, match):
    spec, pids = client(tmp_path, "forker.py", mode)
    failure(spec, 1.0, match)
    assert_all_ended(pids, ("client", "grandchild"))


def test_the_grandchild_of_a_valid_client_is_ended_at_the_end(tmp_path):
    spec, pids = client(tmp_path, "forker.py", "fcfs")
    r = run(spec, 5.0)
    assert r.jobs.start.tolist() == FCFS_STARTS
    assert_all_ended(pids, ("client", "grandchild"))


@pytest.mark.parametrize("answered,status,match", [
    (0, 3, (r"exited with status 3 in reply to message 1 \(t=0 s\); its stderr ends with: early_exit: leaving at "
           r"message 1$")),
    (2, 0, (r"exited with status 0 in reply to message 3 \(t=20 s\); its stderr ends with: early_exit: leaving at "
           r"message 3$")),
])
def test_a_client_that_exits_early(tmp_path, answered, status, match):
    spec, pids = client(tmp_path, "early_exit.py", answered, status)
    failure(spec, 2.0, match)
    assert_all_ended(pids)


# ------------------------------------------------------------------------------ bad replies
M1 = r"answer\.py .*', reply to message 1 \(t=0 s\): "


@pytest.mark.parametrize("kind,match", [
    ("invalid-utf8", r"not valid UTF-8 \(byte 0xe9 at offset 37\); the line was: \{\"now\": 0"),
    ("array", r'expected an object \{"now": t, "events": \[\.\.\.\]\}; the line was: \[1, 2\]$'),
    ("deep", r"not usable JSON \(nested too deeply\); the line was: \[{200}\.\.\.$"),
    ("huge-int", r"not usable JSON \(a number with too many digits\)"),
    ("escape", r"not JSON \(Expecting value at column 1\); the line was: \\x1b\[2J\\rclear screen$"),
    ("now-nan", r'"now" must be a finite number of seconds >= 0 \(or left out\), got nan;'),
    ("now-inf", r'"now" must be a finite number of seconds >= 0 \(or left out\), got inf;'),
    ("now-negative", r'"now" must be a finite number of seconds >= 0 \(or left out\), got -5\.0;'),
    ("now-string", r"\"now\" must be a finite number of seconds >= 0 \(or left out\), got 'soon';"),
    ("timestamp-nan", r'event 0: "timestamp" must be a finite number of seconds >= 0 \(or left out\), got nan;'),
    ("duplicate", r"event 1: EXECUTE_JOB of job 1, which is not waiting: event 0 of this reply already started it;"),
    ("units-huge", (r"event 0: alloc '0-9999999999' of job 1 includes units that are not free: units 0-9999999999 "
                   r"exceed the machine's 4 units \(0-3\);")),
    ("units-huge-digits", (r"event 0: alloc '0-9{70,}\.\.\. of job 1 includes units that are not free: "
                          r"units 0-9+\.\.\. exceed the machine's 4 units \(0-3\);")),
    ("units-many-ranges", (r"event 0: alloc '0,0,0.*\.\.\. is not a unit range list like '0-3,8' \(more than 4 "
                          r"ranges, the machine's unit count\);")),
    ("units-unicode-digits", r"event 0: alloc '\u0663' is not a unit range list like '0-3,8' \(bad unit range"),
    ("units-list", r"event 0: alloc of job 1 must be range text like '0-3,8', got \[0\];"),
    ("call-inf", r"event 0: CALL_ME_LATER timestamp must be a number > now \(0\), got inf;"),
    ("call-bool", r"event 0: CALL_ME_LATER timestamp must be a number > now \(0\), got True;"),
    ("event-not-object", r"event 0: expected an object \{\"type\": \.\.\., \"data\": \{\.\.\.\}\}, got 'EXECUTE_JOB';"),
    ("data-not-object", r"event 0: EXECUTE_JOB data must be an object, got \[1\];"),
])
def test_bad_replies_are_located(tmp_path, kind, match):
    spec, pids = client(tmp_path, "answer.py", kind)
    text = failure(spec, 5.0, M1 + match)
    assert len(text) < 1000
    assert_all_ended(pids)


def test_a_second_reply_line_is_refused(tmp_path):
    # two lines for message 1: the second would otherwise be taken as the reply to message 2
    spec, pids = client(tmp_path, "answer.py", "two-lines")
    failure(spec, 5.0, r"answer\.py .*two-lines' wrote to its output before message 2 \(t=10 s\) was sent \(a reply "
                       r"is exactly one line per message; diagnostics belong on stderr\): \{\"now\": 0\.0, "
                       r"\"events\": \[\{\"type\": \"EXECUTE_JOB\"")
    assert_all_ended(pids)


# ------------------------------------------------------------------------------ unit ranges
@pytest.mark.parametrize("text", ["0-3,8", "8,0-3", " 2 - 5 , 0 ", "7", "0-0", "3,1,2"])
def test_alloc_ranges_expand_like_parse_ranges(text):
    ranges = alloc_ranges(text, 16)
    units = np.concatenate([np.arange(lo, hi + 1) for lo, hi in ranges])
    assert units.tolist() == parse_ranges(text).tolist()      # same units, same order
    assert _distinct(ranges) == len(set(units.tolist()))


def test_alloc_ranges_check_bounds_before_expanding():
    assert _distinct([(0, 3), (2, 5), (9, 9), (5, 5)]) == 7
    with pytest.raises(ValueError, match=r"units 0-9999999999999 exceed the machine's 256 units \(0-255\)"):
        alloc_ranges("0-9999999999999", 256)
    with pytest.raises(ValueError, match=r"unit 256 exceeds the machine's 256 units"):
        alloc_ranges("0-3,256", 256)
    with pytest.raises(ValueError, match=r"bad unit range '5-2' \(its end is before its start\)"):
        alloc_ranges("5-2", 256)
    for bad in ("-1", "1-", "a", "1_0", "+3", "0-3,,8"):
        with pytest.raises(ValueError, match="bad unit range"):
            alloc_ranges(bad, 256)


def test_a_valid_alloc_is_used_in_the_clients_order(tmp_path):
    body = ("import json, sys\n"
            "for line in sys.stdin:\n"
            "    msg = json.loads(line)\n"
            "    if msg.get('state') is None: break\n"
            "    q, out = msg['state']['queue'], []\n"
            "    if 1 in q: out = [{'type': 'EXECUTE_JOB', 'data': {'job_id': 1, 'alloc': '3, 0-1'}}]\n"
            "    elif msg['state']['nb_free'] == 4 and q: out = [{'type': 'EXECUTE_JOB', 'data': {'job_id': q[0]}}]\n"
            "    print(json.dumps({'now': msg['now'], 'events': out}), flush=True)\n")
    p = tmp_path / "alloc_client.py"
    p.write_text(body)
    r = run(f"exec:{sys.executable} {p}", 5.0)
    assert r.jobs.start.tolist()[0] == 0.0
    assert str(r.jobs.nodes.tolist()[0]) == "0-1,3"


# ------------------------------------------------------------------------------ set-up errors
@pytest.mark.parametrize("command,options,match", [
    ("", {}, r"^exec scheduler: empty command \(use --scheduler exec:CMD, e\.g\. exec:python3 my_sched\.py\)$"),
    ("   ", {}, r"empty command"),
    ("/nonexistent/prog --x", {}, r"cannot start '/nonexistent/prog': no such file$"),
    ("hpctwin-no-such-program-xyz", {}, r"cannot start 'hpctwin-no-such-program-xyz': not found on PATH$"),
    ("/", {}, r"cannot start '/': it is a directory$"),
    ("python3 'unclosed", {}, r"cannot split the command line \(No closing quotation\)"),
    ("python3 x.py", {"timeout_s": "abc"}, r"timeout_s must be a finite number of seconds > 0 .*got 'abc'$"),
    ("python3 x.py", {"timeout_s": 0}, r"timeout_s must be .* got 0$"),
    ("python3 x.py", {"timeout_s": -1.5}, r"got -1\.5$"),
    ("python3 x.py", {"timeout_s": float("nan")}, r"got nan$"),
    ("python3 x.py", {"timeout_s": float("inf")}, r"got inf$"),
    ("python3 x.py", {"timeout_s": True}, r"got True$"),
    ("python3 x.py", {"timeout_s": None}, r"got None$"),
    ("python3 x.py", {"timeuot_s": 3}, (r"unknown option 'timeuot_s' \(did you mean 'timeout_s'\?\); known: "
                                       r"timeout_s, cwd, name")),
    ("python3 x.py", {"cwd": "/nonexistent/dir"}, r"cwd '/nonexistent/dir' is not a directory$"),
])
def test_setup_errors_are_value_errors(command, options, match):
    with pytest.raises(ExternalSchedulerConfigError) as e:
        make_scheduler("exec:" + command, options=dict(options))
    assert isinstance(e.value, ValueError) and isinstance(e.value, ExternalSchedulerError)
    assert re.search(match, str(e.value)), str(e.value)
    assert "\n" not in str(e.value)


def test_a_file_that_is_not_executable(tmp_path):
    p = tmp_path / "sched.py"
    p.write_text("print('hello')\n")
    p.chmod(0o644)
    with pytest.raises(ExternalSchedulerConfigError, match=r"cannot start '.*sched\.py': permission denied: the file "
                                                           r"is not executable \(chmod \+x it, or name its interpreter: "
                                                           r"exec:python3 .*sched\.py\)"):
        ExternalScheduler(str(p))


def test_numeric_strings_are_accepted_as_timeouts():
    assert ExternalScheduler("python3 x.py", timeout_s="2.5").timeout_s == 2.5
    assert ExternalScheduler("python3 x.py", timeout_s=np.float32(1.5)).timeout_s == 1.5


# ------------------------------------------------------------------------------ the command line
@pytest.mark.parametrize("case,status,match", [
    ("empty", 2, r"hpctwin: error: exec scheduler: empty command"),
    ("missing", 2, r"hpctwin: error: exec scheduler '/nonexistent/prog': cannot start '/nonexistent/prog'"),
    ("timeout-abc", 2, r"hpctwin: error: --set: scheduler.timeout_s: expected a number, got 'abc'"),
    ("timeout-inf", 2, r"hpctwin: error: --set: scheduler.timeout_s: expected a finite number, got inf"),
    ("unknown-option", 2, r"hpctwin: error: --set: scheduler.colour: unknown key of scheduler 'exec:.*'; known: cwd, timeout_s"),
    ("mute", 3, (r"hpctwin: simulation error: exec scheduler .*mute\.py .*: no reply within 0\.5 s in reply to "
                r"message 1 \(t=0 s\)")),
    ("exit", 3, (r"hpctwin: simulation error: exec scheduler .*early_exit\.py .* exited with status 3 in reply to "
                r"message 1")),
    ("units", 3, r"hpctwin: simulation error: .* units 0-9999999999 exceed the machine's \d+ units"),
])
def test_the_command_line_prints_one_line(tmp_path, capsys, case, status, match):
    from hpctwin.twin.cli import main
    spec, pids = {"mute": lambda: client(tmp_path, "mute.py"),
                  "exit": lambda: client(tmp_path, "early_exit.py", 0, 3),
                  "units": lambda: client(tmp_path, "answer.py", "units-huge")}.get(case, lambda: (None, None))()
    args = {"empty": ["-s", "exec:"], "missing": ["-s", "exec:/nonexistent/prog"],
            "timeout-abc": ["-s", f"exec:{sys.executable} x.py", "--set", "scheduler.timeout_s=abc"],
            "timeout-inf": ["-s", f"exec:{sys.executable} x.py", "--set", "scheduler.timeout_s=inf"],
            "unknown-option": ["-s", f"exec:{sys.executable} x.py", "--set", "scheduler.colour=blue"]}.get(
                case, ["-s", spec or "", "--set", "scheduler.timeout_s=0.5"])
    rc = main(["run", "-w", "synthetic:jobs=50", "--out", str(tmp_path / "run"), "--quiet", *args])
    err = capsys.readouterr().err
    assert rc == status, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert re.match(match, err), err
    if pids is not None:
        assert_all_ended(pids)
