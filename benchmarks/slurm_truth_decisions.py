"""Decision-level check of the Slurm-like policy against a recorded real Slurm run (issue 27).

The engine is made to follow real Slurm exactly: every job starts at its recorded second on its
recorded nodes (``real-<k>.sacct.txt`` NodeList, ``cores_per_node`` CPUs per node), so the policy's
ledger holds Slurm's state at every instant. A job requeued by preemption (``sacct -D`` rows per
run) is forced run by run: each run starts at its recorded second and nodes, and a run that ended
PREEMPTED is preempted (requeued by the policy's own `_pre_apply`) at its recorded end, before that
second's starts. The run has the dependencies and advance reservations Slurm had (as
``slurm_truth.py`` gives them). At each second where real Slurm started or preempted something, the
policy is asked on a copy of that state what its passes would start (the main pass over the whole
queue, then one backfill cycle; preemptions the copy decides are only recorded); nothing it decides
is applied. Printed:

* Slurm's starts the twin's passes also make at that second, and of those how many on Slurm's nodes;
* eager: jobs the twin would start at t that real Slurm did not start at t (first such t per job,
  the pass that would start it, and how much later real Slurm started it: +1 s is a backfill tick);
* lazy: jobs real Slurm started at t that the twin's passes would not start on that state;
* starts on other nodes (node indices: n001 = 0), preemptions only the twin would make.

Times are real seconds from the first submit (the dump's clock).

    python benchmarks/slurm_truth_decisions.py [--case gpu_share] [--rep 1] [--set KEY=VALUE ...]
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import io
import sys
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "slurm_truth"


def segments(dump: Path, ids: np.ndarray, last_start: np.ndarray) -> list[list[tuple[float, float, str, str]]]:
    """Each job's runs in a ``sacct -D`` dump (a job requeued by preemption has a row per run): per job
    of ``ids`` (Slurm job ids, the workload's order) [(start s, end s, NodeList, State)] in run order, on
    the dump's clock: a run's times are placed by their offset from the job's last run, whose start is
    ``last_start`` (the reader's ``recorded_start``), so the sacct time strings need no time zone."""
    from datetime import datetime  # noqa: PLC0415
    lines = [ln for ln in dump.read_text().splitlines() if ln.strip()]
    col = {c: i for i, c in enumerate(lines[0].split("|"))}
    rows: dict[str, list[list[str]]] = defaultdict(list)
    for ln in lines[1:]:
        r = ln.split("|")
        rows[r[col["JobIDRaw"]]].append(r)
    out = []
    for jid, st in zip(ids.tolist(), last_start.tolist()):
        runs = rows[str(int(jid))]
        t_last = datetime.fromisoformat(runs[-1][col["Start"]])
        segs = []
        for r in runs:
            a = st + (datetime.fromisoformat(r[col["Start"]]) - t_last).total_seconds()
            b = st + (datetime.fromisoformat(r[col["End"]]) - t_last).total_seconds()
            segs.append((a, b, r[col["NodeList"]], r[col["State"]].split()[0]))
        out.append(segs)
    return out


def forced_inputs(folder: Path, k: int, extra: dict | None = None) -> tuple:
    """What a forced replay of real-<k> needs: (workload, job ids, each job's recorded runs
    (`segments`), the policy (Python passes), {t:
    [(job index, Slurm's node indices)]} of the recorded run starts, {t: [job index]} of the recorded
    preemptions). The workload and options are `slurm_truth.case_inputs`' (CPU units); a run that
    ended other than PREEMPTED/REQUEUED before a later run of its job is refused."""
    from hpctwin.datasets.hostlist import expand_hostlist  # noqa: PLC0415
    from hpctwin.schedulers.slurm import make_slurm_scheduler  # noqa: PLC0415
    from slurm_truth import case_inputs  # noqa: PLC0415  (this folder)
    wl, opts = case_inputs(folder, k, "cpus", {"compiled": "false", **(extra or {})})
    dump = folder / f"real-{k}.sacct.txt"
    ids = np.asarray(wl.job_id)
    segs = segments(dump, ids, np.asarray(wl.columns["recorded_start"], dtype=float))
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        pol = make_slurm_scheduler(opts["slurm_conf"], opts)
    starts_at: dict[float, list[tuple[int, list[int]]]] = defaultdict(list)
    preempt_at: dict[float, list[int]] = defaultdict(list)
    for j, runs in enumerate(segs):
        for q, (a, b, nodes, state) in enumerate(runs):
            starts_at[float(a)].append((j, [int(h[1:]) - 1 for h in expand_hostlist(nodes)]))
            if q + 1 < len(runs):
                if state not in ("PREEMPTED", "REQUEUED"):
                    raise SystemExit(f"{dump}: job {int(ids[j])} run {q + 1} ended {state}, not PREEMPTED "
                                     "or REQUEUED; only preemption requeues are replayed")
                preempt_at[float(b)].append(j)
    return wl, ids, segs, pol, starts_at, preempt_at


class _CopyControl:
    """The engine control of the policy's copy: a preemption the copy decides is only recorded and
    told to the copy (``on_finish`` as the engine's ``on_interrupt`` default, then ``on_requeue``)."""

    def __init__(self, pol):
        self.pol = pol
        self.victims: list[int] = []

    def preempt(self, job: int, cancel: bool = False) -> None:
        now = self.pol._now_for_copy
        self.victims.append(int(job))
        self.pol.on_finish(now, int(job))
        if not cancel:
            self.pol.on_requeue(now, int(job))


def forced_next_wakeup(pol, now: float, times: list[float]) -> float | None:
    """A forced policy's next wake-up: Slurm's own (`SlurmScheduler.next_wakeup`) or the next second in
    ``times`` (sorted) where real Slurm did something, whichever comes first."""
    from hpctwin.schedulers.slurm import SlurmScheduler  # noqa: PLC0415
    t = SlurmScheduler.next_wakeup(pol, now)
    nxt = next((x for x in times if x > now), None)
    cands = [x for x in (t, nxt) if x is not None]
    return min(cands) if cands else None


def keep_select_tests(pol, cp) -> None:
    """Carry the job-size factor's select tests of this second from the planning copy ``cp`` to ``pol``."""
    if cp.prio_calc.size_tested is not None:
        pol.prio_calc.size_tested = cp.prio_calc.size_tested
        pol.prio_calc.size_total = cp.prio_calc.size_total


def force_slurm_second(pol, now: float, victims: list[int], starts: list[tuple[int, list[int]]], ids: np.ndarray,
                       on_start=None) -> list:
    """Apply real Slurm's preemptions of second ``now``, then its starts (job index, node indices), in job
    id order; ``on_start(j, nodes)`` is called before each. Returns the policy's start decisions."""
    if victims:
        pol._pre_apply(now, victims)
    out = []
    for j, nodes in sorted(starts, key=lambda x: int(ids[x[0]])):
        if on_start is not None:
            on_start(j, nodes)
        out.append(pol._tres_start(now, j, [(n, int(pol.tj.cpn[j])) for n in nodes]))
    if out or victims:
        pol._touch(now)
        pol.event_flag = True
    return out


def run_forced(pol, folder: Path, k: int, wl):
    """Run the forced policy ``pol`` over replay ``k``'s workload ``wl`` on slurm.conf's machine, quietly."""
    from hpctwin.twin.run import RunConfig, run  # noqa: PLC0415
    from slurm_truth import conf_nodes  # noqa: PLC0415  (benchmarks/slurm_truth.py, this folder)
    n, cpn = conf_nodes(folder / "slurm.conf")
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        return run(RunConfig(workload=f"sacct:{folder.name}-real-{k}", scheduler=pol, nodes=n * cpn,
                             options={}), workload=wl)


def decisions(folder: Path, k: int, extra: dict | None = None) -> dict:
    """Run the forced replay of real-<k> of a case; returns {"followed": job runs whose engine start
    equals the recorded one, "runs": run count, "jobs": job count, "eager": {t: [(job id, pass)]},
    "lazy": {t: [job id]}, "preempt": {t: [job id]} (victims the twin would preempt that Slurm did not
    at t), "start": {job id: [recorded run starts s]}, "partition": {job id: name}}.

    A job requeued by preemption (case preempt) is forced run by run: each run starts at its recorded
    second on its recorded nodes and a run that ended PREEMPTED is preempted (requeued, the policy's
    own `_pre_apply`) at its recorded end, before that second's starts."""

    with open(folder / f"real-{k}.csv", newline="") as f:
        real = {r["slurm_job_id"]: r for r in csv.DictReader(f)}
    wl, ids, segs, pol, starts_at, preempt_at = forced_inputs(folder, k, extra)
    times = sorted(set(starts_at) | set(preempt_at))
    eager: dict[float, list] = defaultdict(list)
    lazy: dict[float, list] = defaultdict(list)
    extra_victims: dict[float, list] = defaultdict(list)
    forced = {"runs": 0}
    twin_nodes: dict[tuple[float, int], list[int]] = {}
    #: Slurm's starts the twin also makes: (t, job id, same nodes, twin's nodes, Slurm's nodes)
    same_nodes: list[tuple[float, int, bool, list[int], list[int]]] = []

    class Forced(type(pol)):
        """The policy, made to start what real Slurm started (and asked what it would start)."""

        def next_wakeup(self, now: float) -> float | None:
            return forced_next_wakeup(self, now, times)

        def schedule(self, now, queue, cluster):
            self._catch_up(now)
            queue = np.asarray(queue)
            want = [j for j, _ in starts_at.get(float(now), [])]
            victims = [j for j in preempt_at.get(float(now), []) if j in self.run_end]
            if len(queue):
                cp = copy.deepcopy(self)
                ctl = cp._pre_control = _CopyControl(cp) if self.pre_on else None
                cp._now_for_copy = now
                q = cp._preempt_visible(now, queue) if cp.pre_on else queue
                got, bf = set(), set()
                if len(q):
                    order, prio = cp._order(now, q)
                    main, _ = cp._main_pass(now, order, None)
                    got = {s.job for s in main}
                    keep = np.array([j not in got for j in order.tolist()], dtype=bool)
                    bst = cp._backfill(now, order[keep], prio[keep]) if cp.bf_on else []
                    bf = {s.job for s in bst}
                    for st in [*main, *bst]:
                        twin_nodes[(now, st.job)] = sorted(set(self.tm.node_of(st.nodes).tolist()))
                for j in (got | bf) - set(want):
                    eager[now].append((int(ids[j]), "main" if j in got else "bf"))
                for j in set(want) - (got | bf):
                    lazy[now].append(int(ids[j]))
                keep_select_tests(self, cp)
                if ctl is not None:
                    for v in set(ctl.victims) - set(victims):
                        extra_victims[now].append(int(ids[v]))

            def count(j, nodes):
                forced["runs"] += 1
                if (now, j) in twin_nodes:
                    tn = twin_nodes[(now, j)]
                    same_nodes.append((now, int(ids[j]), tn == sorted(nodes), tn, sorted(nodes)))
            return force_slurm_second(self, now, victims, starts_at.get(float(now), []), ids, count)

    pol.__class__ = Forced
    res = run_forced(pol, folder, k, wl)
    jobs = res.jobs.set_index("job_id")
    # a job's engine start (a requeued job's first run's, as the engine reports it) against the recorded one
    followed = int(sum(abs(float(jobs.loc[i, "start"]) - sg[0][0]) < 1e-6 for i, sg in zip(ids, segs)))
    return {"followed": followed, "jobs": len(ids), "runs": sum(map(len, segs)), "forced": forced["runs"],
            "eager": dict(eager), "lazy": dict(lazy), "preempt": dict(extra_victims),
            "same_nodes": same_nodes,
            "start": {int(i): [a for a, *_ in sg] for i, sg in zip(ids, segs)},
            "partition": {int(i): real[str(int(i))]["partition"] for i in ids}}


def _next_start(starts: list[float], t: float) -> float:
    """The first recorded run start at or after ``t`` (the last one if none)."""
    return next((x for x in starts if x >= t), starts[-1])


def summary(d: dict, case: str, rep: int) -> list[str]:
    """The printed report of `decisions` (see the module docstring)."""
    n_start = d["forced"]
    n_lazy = sum(map(len, d["lazy"].values()))
    same = d["same_nodes"]
    first: dict[int, tuple[float, str]] = {}
    for t in sorted(d["eager"]):
        for jid, how in d["eager"][t]:
            first.setdefault(jid, (t, how))
    tick = sum(1 for jid, (t, _h) in first.items() if _next_start(d["start"][jid], t) - t <= 1.0)
    out = [f"{case} real-{rep}: {d['jobs']} jobs, {d['runs']} runs forced at their recorded second and "
           f"nodes; engine starts as recorded: {d['followed']}/{d['jobs']} jobs",
           f"Slurm's starts the twin's passes also make at that second: {n_start - n_lazy}/{n_start} "
           f"(on Slurm's nodes: {sum(1 for x in same if x[2])}/{len(same)})",
           f"eager decisions {sum(map(len, d['eager'].values()))} ({len(first)} jobs first eager; "
           f"{tick} of them one second before Slurm's start), lazy {n_lazy}",
           "job  first-eager-t  pass  partition  real start - t (s)"]
    for jid, (t, how) in sorted(first.items(), key=lambda x: x[1][0]):
        out.append(f"{jid:>4} {t:>13.0f}  {how:<4}  {d['partition'][jid]:<9}  "
                   f"{_next_start(d['start'][jid], t) - t:>+6.0f}")
    out.append("lazy: " + str({f"{t:g}": v for t, v in sorted(d["lazy"].items())}))
    if d["preempt"]:
        out.append("twin-only preemptions: " + str({f"{t:g}": v for t, v in sorted(d["preempt"].items())}))
    out.append("starts on other nodes than Slurm's (t, job, twin's nodes, Slurm's; node indices): "
               + str([(f"{t:g}", jid, tn, sn) for t, jid, ok, tn, sn in same if not ok]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="gpu_share")
    ap.add_argument("--rep", type=int, default=1)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    a = ap.parse_args(argv)
    folder = DATA / a.case
    if not (folder / f"real-{a.rep}.sacct.txt").exists():
        raise SystemExit(f"{folder}/real-{a.rep}.sacct.txt: no such recorded replay (see {DATA}/*/README.md)")
    extra = {}
    for it in a.set:
        key, eq, v = it.partition("=")
        if not eq:
            raise SystemExit(f"--set {it!r}: expected KEY=VALUE (a scheduler option)")
        extra[key.strip()] = v.strip()
    d = decisions(folder, a.rep, extra)
    for line in summary(d, a.case, a.rep):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
