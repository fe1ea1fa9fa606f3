"""A minimal plain-Python EASY replay of an SWF log: the speed reference of issue 17.

It produces the IDENTICAL schedule to ``hpctwin run --scheduler easy`` (FCFS order, EASY
backfilling) with nothing but the standard library: a heap of finish events and a sorted list of the
running jobs' expected ends. It follows the project's conventions (``twin/run.py:prepare``,
``schedulers/backfill.py``, DESIGN.md sections 5-6):

* job size: requested processors (SWF field 8) when > 0, else allocated (field 5); machine size:
  header ``MaxProcs``, else ``MaxNodes`` (leading integer);
* skipped jobs: unknown submit (< 0), runtime <= 0, size < 1, size > machine;
* jobs in (submit, job id) order (stable for equal pairs);
* estimate = requested time (field 9) when > 0, else the runtime; the job is killed at start +
  requested time (never killed without one);
* at one instant: all finishes, then all submissions, then one pass;
* a pass starts jobs in order while they fit; the first that does not (the head) gets its shadow
  time from the running jobs' expected ends (start + estimate, never before now) including this
  pass's in-order starts; a later job starts if it fits now and ends by its estimate no later than
  the shadow time, or needs no more than the extra units (which it consumes).

    python benchmarks/plain_easy.py CTC-SP2                      # replay, print CPU seconds
    python benchmarks/plain_easy.py CTC-SP2 --check run/jobs.csv # and compare start/end per job

``--check`` compares with a jobs.csv written by ``hpctwin run --scheduler easy`` and exits 1 on any
difference. The log is read from the data directory (``$HPCTWIN_DATA``, else ``../shared/datasets``)
or given as a path.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import heapq
import math
import os
import re
import sys
import time
from bisect import bisect_left, insort
from pathlib import Path

DATA = Path(os.environ.get("HPCTWIN_DATA", Path(__file__).resolve().parents[2] / "shared" / "datasets"))


def read_swf(path: Path) -> tuple[list[tuple], int]:
    """Jobs as (submit, job_id, runtime, procs, requested_time or nan) and the machine size."""
    opener = gzip.open if path.suffix == ".gz" else open
    header: dict[str, str] = {}
    rows = []
    with opener(path, "rt", encoding="latin-1") as f:
        for line in f:
            s = line.strip()
            if not s:
                continue
            if s.startswith(";"):
                k, _, v = s[1:].partition(":")
                header.setdefault(k.strip(), v.strip())
                continue
            x = s.split()
            req_p, alloc_p = int(float(x[7])), int(float(x[4]))
            req_t = float(x[8])
            rows.append((float(x[1]), int(x[0]), float(x[3]), req_p if req_p > 0 else alloc_p,
                         req_t if req_t >= 0 else math.nan))
    size = None
    for key in ("MaxProcs", "MaxNodes"):
        m = re.match(r"\s*(\d+)", header.get(key, ""))
        if m:
            size = int(m.group(1))
            break
    if size is None:
        raise SystemExit(f"{path}: no MaxProcs/MaxNodes header")
    return rows, size


def prepare(rows: list[tuple], total: int) -> list[tuple]:
    """Runnable jobs in (submit, job id) order as (submit, job_id, runtime, procs, estimate, kill)."""
    out = []
    for sub, jid, run, p, req in sorted(rows, key=lambda r: (r[0], r[1])):
        if not sub >= 0 or not run > 0 or p < 1 or p > total:
            continue
        has_req = req == req and req > 0
        out.append((sub, jid, run, p, req if has_req else run, req if has_req else math.inf))
    return out


def shadow(now: float, free: int, need: int, running: list) -> tuple[float, int]:
    """Shadow time and extra units of a head needing ``need`` units (running: sorted (end, j, p))."""
    avail, t = free, None
    for e, _, p in running:
        e = e if e > now else now
        if t is not None and e != t:
            break
        avail += p
        if t is None and avail >= need:
            t = e
    return (math.inf, 0) if t is None else (t, avail - need)


def replay(jobs: list[tuple], total: int) -> tuple[list[float], list[float]]:
    """EASY replay; returns start and end times (s) per job (in ``jobs`` order)."""
    n = len(jobs)
    start, end = [math.nan] * n, [math.nan] * n
    heap: list = []          # (end, job_id, j)
    running: list = []       # sorted (expected end, j, procs)
    queue: list[int] = []
    free, ptr = total, 0
    while ptr < n or heap:
        now = min(heap[0][0] if heap else math.inf, jobs[ptr][0] if ptr < n else math.inf)
        while heap and heap[0][0] <= now:
            _, _, j = heapq.heappop(heap)
            end[j] = now
            p = jobs[j][3]
            free += p
            del running[bisect_left(running, (start[j] + jobs[j][4], j, p))]
        while ptr < n and jobs[ptr][0] <= now:
            queue.append(ptr)
            ptr += 1
        if queue and free > 0:
            free, queue = _pass(now, free, queue, jobs, running, start, heap)
    return start, end


def _start(j: int, now: float, jobs: list, running: list, start: list, heap: list) -> None:
    _, jid, run, p, est, kill = jobs[j]
    start[j] = now
    insort(running, (now + est, j, p))
    heapq.heappush(heap, (min(now + run, now + kill), jid, j))


def _pass(now: float, free: int, queue: list, jobs: list, running: list, start: list, heap: list):
    k = 0
    while k < len(queue) and jobs[queue[k]][3] <= free:
        _start(queue[k], now, jobs, running, start, heap)
        free -= jobs[queue[k]][3]
        k += 1
    if k == len(queue) or free <= 0:
        return free, queue[k:]
    head, rest, kept = queue[k], queue[k + 1:], [queue[k]]
    if not any(jobs[j][3] <= free for j in rest):
        return free, queue[k:]
    shadow_t, extra = shadow(now, free, jobs[head][3], running)
    for i, j in enumerate(rest):
        p = jobs[j][3]
        if free > 0 and p <= free:
            before = now + jobs[j][4] <= shadow_t
            if before or p <= extra:
                _start(j, now, jobs, running, start, heap)
                free -= p
                if not before:
                    extra -= p
                continue
        kept.append(j)
    return free, kept


def check(jobs: list[tuple], start: list, end: list, csv_path: Path) -> int:
    """Compare with a jobs.csv; returns the number of jobs whose start or end differ."""
    with open(csv_path, newline="") as f:
        ref = {int(r["job_id"]): (float(r["start"] or "nan"), float(r["end"] or "nan")) for r in csv.DictReader(f)}
    bad = 0
    if len(ref) != len(jobs):
        print(f"{csv_path}: {len(ref)} jobs, the replay has {len(jobs)}")
        return max(1, abs(len(ref) - len(jobs)))
    for j, job in enumerate(jobs):
        s, e = ref.get(job[1], (None, None))
        if s != start[j] or e != end[j]:
            if bad < 5:
                print(f"job {job[1]}: hpctwin start {s} end {e}, plain replay start {start[j]} end {end[j]}")
            bad += 1
    return bad


def run_cli(argv: list[str] | None, doc: str, replay_fn, policy: str, flags: dict | None = None) -> int:
    """The command line of a plain replay: read the log, replay it with ``replay_fn(jobs, total,
    **options)`` (``flags``: extra ``--name`` switches -> keyword, help), print CPU seconds, and with
    ``--check`` compare with the jobs.csv of ``hpctwin run --scheduler <policy>`` (exit 1 on any
    difference)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("log", help="registry name (e.g. CTC-SP2) or path of an SWF file")
    ap.add_argument("--check", type=Path, help=f"jobs.csv of `hpctwin run --scheduler {policy}` to compare with")
    for name, (key, help_) in (flags or {}).items():
        ap.add_argument(name, dest=key, action="store_true", help=help_)
    a = ap.parse_args(argv)
    path = Path(a.log)
    if not path.exists():
        path = next((DATA / a.log).glob("*.swf*"))
    c0 = time.process_time()
    rows, total = read_swf(path)
    jobs = prepare(rows, total)
    c1 = time.process_time()
    start, end = replay_fn(jobs, total, **{key: getattr(a, key) for key, _ in (flags or {}).values()})
    c2 = time.process_time()
    print(f"{path.name}: {len(jobs)} jobs on {total} units; CPU s: read {c1 - c0:.2f}, replay {c2 - c1:.2f}, "
          f"total {c2 - c0:.2f}")
    if a.check:
        bad = check(jobs, start, end, a.check)
        print(f"identical to {a.check}: {bad == 0}" + ("" if bad == 0 else f" ({bad} jobs differ)"))
        return 1 if bad else 0
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_cli(argv, __doc__, replay, "easy")


if __name__ == "__main__":
    sys.exit(main())
