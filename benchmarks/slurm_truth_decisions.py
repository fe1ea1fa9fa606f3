"""Decision-level check of the Slurm-like policy against a recorded real Slurm run (issue 27).

The engine is made to follow real Slurm exactly: every job starts at its recorded second on its
recorded nodes (``real-<k>.csv`` node_list, ``cores_per_node`` CPUs per node), so the policy's
ledger holds Slurm's state at every instant. At each second where real Slurm started something,
the policy is asked on a copy of that state what its passes would start (the main pass over the
whole queue, then one backfill cycle); nothing it decides is applied. Printed:

* eager: jobs the twin would start at t that real Slurm did not start at t (first such t per job,
  the pass that would start it, and how much later real Slurm started it);
* lazy: jobs real Slurm started at t that the twin's passes would not start on that state.

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


def decisions(folder: Path, k: int, extra: dict | None = None) -> dict:
    """Run the forced replay of real-<k> of a case; returns {"followed": jobs whose engine start
    equals the recorded one, "jobs": job count, "eager": {t: [(job id, pass)]}, "lazy": {t: [job
    id]}, "start": {job id: recorded start s}, "partition": {job id: name}}."""
    from hpctwin.datasets.hostlist import expand_hostlist  # noqa: PLC0415
    from hpctwin.datasets.sacct import read_sacct  # noqa: PLC0415
    from hpctwin.schedulers.slurm import SlurmScheduler, make_slurm_scheduler  # noqa: PLC0415
    from hpctwin.twin.run import RunConfig, run  # noqa: PLC0415

    wl = read_sacct(folder / f"real-{k}.sacct.txt", unit="cpus")
    with open(folder / f"real-{k}.csv", newline="") as f:
        real = {r["slurm_job_id"]: r for r in csv.DictReader(f)}
    ids = np.asarray(wl.job_id)
    rstart = np.asarray(wl.columns["recorded_start"], dtype=float)
    opts = {"slurm_conf": str(folder / "slurm.conf"), "compiled": "false",
            "log_start": float(wl.header["UnixStartTime"])}     # Slurm's Unix clock
    if (folder / "accounts.toml").exists():
        opts["accounts"] = str(folder / "accounts.toml")
    opts.update(extra or {})
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        pol = make_slurm_scheduler(opts["slurm_conf"], opts)
    starts_at: dict[float, list[int]] = defaultdict(list)
    for j in range(len(ids)):
        starts_at[float(rstart[j])].append(j)
    times = sorted(starts_at)
    eager: dict[float, list] = defaultdict(list)
    lazy: dict[float, list] = defaultdict(list)

    class Forced(type(pol)):
        """The policy, made to start what real Slurm started (and asked what it would start)."""

        def next_wakeup(self, now: float) -> float | None:
            t = SlurmScheduler.next_wakeup(self, now)
            nxt = next((x for x in times if x > now), None)
            cands = [x for x in (t, nxt) if x is not None]
            return min(cands) if cands else None

        def schedule(self, now, queue, cluster):
            self._catch_up(now)
            queue = np.asarray(queue)
            want = starts_at.get(float(now), [])
            if len(queue):
                cp = copy.deepcopy(self)
                order, prio = cp._order(now, queue)
                main, _ = cp._main_pass(now, order, None)
                got = {s.job for s in main}
                keep = np.array([j not in got for j in order.tolist()], dtype=bool)
                bf = {s.job for s in cp._backfill(now, order[keep], prio[keep])} if cp.bf_on else set()
                for j in (got | bf) - set(want):
                    eager[now].append((int(ids[j]), "main" if j in got else "bf"))
                for j in set(want) - (got | bf):
                    lazy[now].append(int(ids[j]))
            out = []
            for j in sorted(want, key=lambda j: int(ids[j])):
                r = real[str(int(ids[j]))]
                nodes = [int(h[1:]) - 1 for h in expand_hostlist(r["node_list"])]
                out.append(self._tres_start(now, j, [(n, int(self.tj.cpn[j])) for n in nodes]))
            if out:
                self._touch(now)
                self.event_flag = True
            return out

    pol.__class__ = Forced
    from slurm_truth import conf_nodes  # noqa: PLC0415  (benchmarks/slurm_truth.py, this folder)
    n, cpn = conf_nodes(folder / "slurm.conf")
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        res = run(RunConfig(workload=f"sacct:{folder.name}-real-{k}", scheduler=pol, nodes=n * cpn,
                            options={}), workload=wl)
    jobs = res.jobs.set_index("job_id")
    followed = int(sum(abs(float(jobs.loc[i, "start"]) - s) < 1e-6 for i, s in zip(ids, rstart)))
    return {"followed": followed, "jobs": len(ids), "eager": dict(eager), "lazy": dict(lazy),
            "start": {int(i): float(s) for i, s in zip(ids, rstart)},
            "partition": {int(i): real[str(int(i))]["partition"] for i in ids}}


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
    print(f"{a.case} real-{a.rep}: engine followed the recorded starts of {d['followed']}/{d['jobs']} jobs")
    print(f"eager decisions {sum(map(len, d['eager'].values()))}, "
          f"lazy {sum(map(len, d['lazy'].values()))}")
    first: dict[int, tuple[float, str]] = {}
    for t in sorted(d["eager"]):
        for jid, how in d["eager"][t]:
            first.setdefault(jid, (t, how))
    print("job  first-eager-t  pass  partition  real start - t (s)")
    for jid, (t, how) in sorted(first.items(), key=lambda x: x[1][0]):
        print(f"{jid:>4} {t:>13.0f}  {how:<4}  {d['partition'][jid]:<9}  {d['start'][jid] - t:>+6.0f}")
    print("lazy:", {f"{t:g}": v for t, v in sorted(d["lazy"].items())})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
