"""Backfill plans of real Slurm against the twin's, cycle by cycle (issue 27).

Real Slurm's side: a slurmctld log written with ``DebugFlags=Backfill`` (the lab's run directory
``log/slurmctld.log`` of a recorded replay): every ``_attempt_backfill`` cycle ("beginning") and, in
it, each job it started (``_start_job: Started JobId=J in P on NODES``) and each reservation it made
(``_dump_job_sched: JobId=J to start at S, end at E on nodes NODES in partition P``; backfill.c logs
the job's start_time and its ``end_reserve``, floored to ``bf_resolution``), in the order tested. The
main scheduler's starts (``sched: Allocate JobId=J NodeList=NODES``) are read too.

The twin's side: the engine is made to follow real Slurm (every job starts at its recorded second on
its recorded nodes, as ``slurm_truth_decisions.py`` does); at the second of every Slurm backfill cycle
the policy is copied, the main-scheduler starts Slurm made in that second before the cycle are applied
to the copy, and the copy runs one backfill cycle with its plan log on
(`schedulers.slurm_tres_passes.TresPasses.plan_log`): the start and nodes it would give each pending
job. Nothing the copy decides is applied.

Printed: per cycle, jobs Slurm planned or started and the twin did the same (same start second, same
nodes), the first divergences (cycle time, job, Slurm's start and nodes, the twin's), and a count by
kind. Times are real seconds from the dump's first submit; nodes are NodeName names.

    python benchmarks/slurm_truth_plans.py --case gpu_exclusive --rep 3 --log /tmp/a4_logs/slurmctld.log
        [--first 20] [--at T] [--set KEY=VALUE ...]
"""
from __future__ import annotations

import argparse
import copy
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "slurm_truth"

_TS = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)\] (.*)$")
_BEGIN = re.compile(r"sched/backfill: _attempt_backfill: beginning")
_PLAN = re.compile(r"_dump_job_sched: JobId=(\d+) to start at (\S+), end at (\S+) on nodes (\S+) "
                   r"in partition (\S+)")
_BSTART = re.compile(r"sched/backfill: _start_job: Started JobId=(\d+) in (\S+) on (\S+)")
_MSTART = re.compile(r"sched: Allocate JobId=(\d+) NodeList=(\S+) #CPUs=\d+ Partition=(\S+)")


@dataclass
class Cycle:
    """One backfill cycle of the log: ``t`` (s from the dump's first submit, the log second),
    ``at`` (the exact log time, s), ``plans`` job id -> (start s, end_reserve s, node names,
    partition), ``started`` job id -> (node names, partition), ``order`` job ids as logged."""

    t: float
    at: float
    plans: dict = field(default_factory=dict)
    started: dict = field(default_factory=dict)
    order: list = field(default_factory=list)


def _secs(stamp: str, t0: datetime) -> float:
    """A log/sacct time string (local, no zone) -> seconds from ``t0``."""
    return (datetime.fromisoformat(stamp) - t0).total_seconds()


def parse_log(path: Path, t0: datetime) -> tuple[list[Cycle], list[tuple[float, int, list[str], str]]]:
    """The backfill cycles of a slurmctld log (``DebugFlags=Backfill``) and the main scheduler's
    starts [(log time s, job id, node names, partition)], times in s from ``t0`` (the dump's first
    Submit). A line that is not a log line is an error naming the file and line."""
    from hpctwin.datasets.hostlist import expand_hostlist  # noqa: PLC0415
    cycles: list[Cycle] = []
    main: list[tuple[float, int, list[str], str]] = []
    cur: Cycle | None = None
    with open(path, errors="replace") as f:
        for ln, line in enumerate(f, 1):
            m = _TS.match(line.rstrip("\n"))
            if not m:
                if line.strip():
                    raise SystemExit(f"{path}:{ln}: not a slurmctld log line (expected '[YYYY-MM-DDTHH:MM:SS.mmm] ...')")
                continue
            at = _secs(m.group(1), t0)
            msg = m.group(2)
            if _BEGIN.search(msg):
                cur = Cycle(t=float(np.floor(at)), at=at)
                cycles.append(cur)
                continue
            p = _PLAN.search(msg)
            if p and cur is not None:
                jid = int(p.group(1))
                cur.plans[jid] = (_secs(p.group(2), t0), _secs(p.group(3), t0),
                                  expand_hostlist(p.group(4)), p.group(5))
                cur.order.append(jid)
                continue
            s = _BSTART.search(msg)
            if s and cur is not None:
                jid = int(s.group(1))
                cur.started[jid] = (expand_hostlist(s.group(3)), s.group(2))
                cur.order.append(jid)
                continue
            a = _MSTART.search(msg)
            if a:
                main.append((at, int(a.group(1)), expand_hostlist(a.group(2)), a.group(3)))
    return cycles, main


def dump_t0(dump: Path) -> datetime:
    """The earliest Submit of a sacct dump (the dump clock's time 0), as a naive datetime."""
    lines = [ln for ln in dump.read_text().splitlines() if ln.strip()]
    col = {c: i for i, c in enumerate(lines[0].split("|"))}
    if "Submit" not in col:
        raise SystemExit(f"{dump}: line 1: no Submit field (a sacct -P dump with Submit is needed)")
    return min(datetime.fromisoformat(ln.split("|")[col["Submit"]]) for ln in lines[1:])


def twin_plans(folder: Path, k: int, cycles: list[Cycle], main: list, extra: dict | None = None
               ) -> dict[float, dict[int, tuple]]:
    """The twin's backfill plan at the second of every cycle: {t: {job id: ("start"|"resv", start
    s, end_reserve s, node names)}} on Slurm's state (see the module docstring)."""
    from slurm_truth_decisions import (  # noqa: PLC0415
        force_slurm_second, forced_inputs, forced_next_wakeup, keep_select_tests, run_forced)

    wl, ids, _segs, pol, starts_at, preempt_at = forced_inputs(folder, k, extra)
    idx_of = {int(i): q for q, i in enumerate(ids.tolist())}
    cyc_at = {c.t: c.at for c in cycles}
    main_before: dict[float, list[int]] = defaultdict(list)   # main-scheduler starts before the cycle
    for at, jid, _nodes, _p in main:
        t = float(np.floor(at))
        if t in cyc_at and at < cyc_at[t] and jid in idx_of:
            main_before[t].append(idx_of[jid])
    times = sorted(set(starts_at) | set(preempt_at) | set(cyc_at))
    out: dict[float, dict[int, tuple]] = {}

    class Forced(type(pol)):
        """The policy, made to start what real Slurm started; at each cycle second a copy plans."""

        def next_wakeup(self, now: float) -> float | None:
            return forced_next_wakeup(self, now, times)

        def schedule(self, now, queue, cluster):
            self._catch_up(now)
            queue = np.asarray(queue)
            victims = [j for j in preempt_at.get(float(now), []) if j in self.run_end]
            if float(now) in cyc_at and len(queue):
                cp = copy.deepcopy(self)
                if cp.pre_on:
                    cp._pre_control = None
                pre = [j for j in main_before.get(float(now), []) if j in set(queue.tolist())]
                nodes_of = dict(starts_at.get(float(now), []))
                for j in pre:           # Slurm's main-scheduler starts of this second, before the cycle
                    cp._tres_start(now, j, [(n, int(cp.tj.cpn[j])) for n in nodes_of[j]])
                q = np.array([j for j in queue.tolist() if j not in set(pre)], dtype=np.int64)
                if cp.pre_on:
                    q = cp._preempt_visible(now, q)
                plan = {}
                if len(q):
                    cp.plan_log = []
                    order, prio = cp._order(now, q)
                    cp._backfill(now, order, prio)
                    for j, kind, st, en, nodes in cp.plan_log:
                        names = [f"n{n + 1:03d}" for n in range(cp.tm.n) if nodes >> n & 1]
                        plan[int(ids[j])] = (kind, float(st), float(en), names)
                out[float(now)] = plan
                keep_select_tests(self, cp)
            return force_slurm_second(self, now, victims, starts_at.get(float(now), []), ids)

    pol.__class__ = Forced
    run_forced(pol, folder, k, wl)
    return out


def compare(cycles: list[Cycle], twin: dict[float, dict[int, tuple]]) -> list[dict]:
    """Per cycle and job Slurm planned or started: a row {t, job, slurm: (kind, start, nodes),
    twin: (kind, start, nodes) or None, same_start, same_nodes}."""
    rows = []
    for c in cycles:
        tw = twin.get(c.t)
        if tw is None:
            continue
        for jid in c.order:
            if jid in c.started:
                s = ("start", c.t, sorted(c.started[jid][0]))
            else:
                st, _en, nodes, _p = c.plans[jid]
                s = ("resv", st, sorted(nodes))
            w = tw.get(jid)
            w = None if w is None else (w[0], w[1], sorted(w[3]))
            rows.append({"t": c.t, "job": jid, "slurm": s, "twin": w,
                         "same_start": w is not None and w[1] == s[1],
                         "same_nodes": w is not None and w[2] == s[2]})
        for jid, w in tw.items():          # the twin starts or plans a job Slurm did not
            if jid not in c.started and jid not in c.plans:
                rows.append({"t": c.t, "job": jid, "slurm": None, "twin": (w[0], w[1], sorted(w[3])),
                             "same_start": False, "same_nodes": False})
    return rows


def _fmt(x) -> str:
    if x is None:
        return "-"
    kind, st, nodes = x
    return f"{kind} {st:g} {','.join(nodes)}"


def report(rows: list[dict], first: int, at: float | None) -> list[str]:
    """The printed summary of `compare`'s rows."""
    both = [r for r in rows if r["slurm"] is not None]
    n_same = sum(1 for r in both if r["same_start"] and r["same_nodes"])
    n_start = sum(1 for r in both if r["same_start"] and not r["same_nodes"])
    n_missing = sum(1 for r in both if r["twin"] is None)
    extra = [r for r in rows if r["slurm"] is None]
    out = [f"cycles compared: {len({r['t'] for r in rows})}; job plans in Slurm's cycles: {len(both)}: "
           f"same start and nodes {n_same}, same start other nodes {n_start}, other start "
           f"{len(both) - n_same - n_start - n_missing}, not planned by the twin {n_missing}; twin-only "
           f"plans {len(extra)}"]
    if at is not None:
        sel = [r for r in rows if r["t"] == at]
        out.append(f"cycle t={at:g}: job  Slurm  |  twin")
        out += [f"  {r['job']:>4}  {_fmt(r['slurm'])}  |  {_fmt(r['twin'])}" for r in sel]
        return out
    seen: set[int] = set()
    out.append("first divergences per job (t, job, Slurm: kind start nodes | twin):")
    for r in rows:
        if r["same_start"] and r["same_nodes"] or r["job"] in seen:
            continue
        seen.add(r["job"])
        out.append(f"  t={r['t']:>5g} job {r['job']:>3}  {_fmt(r['slurm'])}  |  {_fmt(r['twin'])}")
        if len(seen) >= first:
            break
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="gpu_exclusive")
    ap.add_argument("--rep", type=int, default=3)
    ap.add_argument("--log", required=True, help="slurmctld.log of that replay (DebugFlags=Backfill)")
    ap.add_argument("--first", type=int, default=20, help="divergent jobs to list (default 20)")
    ap.add_argument("--at", type=float, default=None, help="print one cycle (t, s) in full instead")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    a = ap.parse_args(argv)
    folder = DATA / a.case
    dump = folder / f"real-{a.rep}.sacct.txt"
    if not dump.exists():
        raise SystemExit(f"{dump}: no such recorded replay (see {DATA}/*/README.md)")
    if not Path(a.log).exists():
        raise SystemExit(f"{a.log}: no such log file")
    extra = {}
    for it in a.set:
        key, eq, v = it.partition("=")
        if not eq:
            raise SystemExit(f"--set {it!r}: expected KEY=VALUE (a scheduler option)")
        extra[key.strip()] = v.strip()
    cycles, main_starts = parse_log(Path(a.log), dump_t0(dump))
    if not cycles:
        raise SystemExit(f"{a.log}: no '_attempt_backfill: beginning' line (run slurmctld with DebugFlags=Backfill)")
    twin = twin_plans(folder, a.rep, cycles, main_starts, extra)
    for line in report(compare(cycles, twin), a.first, a.at):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
