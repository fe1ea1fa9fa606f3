"""Seeded job traces for the real-Slurm ground-truth cases of issue 27 (tests/data/slurm_truth/).

Each trace is a CSV in the format of /work/shared/slurm-lab/replay.py (trace seconds):

    job_id, submit_s, nodes, runtime_s, walltime_s, user, partition, qos, gpus_per_node,
    cores_per_node, dependency, reservation, mem_mb

made for the slurm-lab GPU cluster (conf/gpu.conf.in: 12 nodes of 8 cores, n001-n008 with 4 GPUs;
partitions gpu = n[001-008], cpu = n[005-012] (default), short = all nodes with MaxTime=2 real
minutes; QOS normal / high; users daemon, bin, sys (account acct_a), games, man (acct_b)).

Grid: the replay runs at ``--scale 60`` (60 trace s per real s). Submit times and runtimes are whole
trace minutes (= whole real seconds, Slurm's timestamp resolution); time limits are whole trace hours
(= whole real minutes, Slurm's time-limit unit), at most 2 h in partition ``short``; a runtime ends at
least 2 trace minutes before its limit (no TIMEOUT).

Cases (``--case``):
  gpu_share      80 jobs mixing 1-4 GPUs and 1-8 cores per node on 1-3 nodes, partitions gpu / cpu /
                 short, QOS normal / high; offered load above capacity for the first hours, so jobs
                 queue (replayed without --exclusive: select/cons_tres shares nodes)
  gpu_exclusive  the same trace (replayed with --exclusive: whole nodes)
  gpu_mem        the gpu_share jobs with a memory request per node (mem_mb, for CR_Core_Memory)
  deps_resv      40 jobs, 10 of them with afterok/afterany dependencies on earlier jobs; replayed
                 with a maintenance reservation on n[001-004] (see RESV below)
  preempt        60 jobs of gpu_share's mix with partition short renamed urgent, for the lab's
                 conf/prio.conf.in (urgent: PriorityTier 10, preempts gpu / cpu jobs by REQUEUE)

    python benchmarks/slurm_truth_traces.py --case gpu_share --out /tmp/gpu_share.csv
"""
from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path

#: trace seconds per real second of the replays
SCALE = 60
MINUTE = 60                  # trace seconds in one real second
HOUR = 60 * MINUTE           # trace seconds in one real minute (Slurm's time-limit unit)
USERS = ("daemon", "bin", "sys", "games", "man")
FIELDS = ("job_id", "submit_s", "nodes", "runtime_s", "walltime_s", "user", "partition", "qos",
          "gpus_per_node", "cores_per_node", "dependency", "reservation", "mem_mb")
#: the maintenance reservation of case deps_resv: replay.py --resv NAME:START:DURATION:NODES:FLAGS
RESV = "maint:7200:7200:n[001-004]:MAINT"
SEEDS = {"gpu_share": 27001, "deps_resv": 27004, "preempt": 27005}


def _runtime(rng: random.Random, walltime_s: int) -> int:
    """A runtime (trace s, whole minutes) between 30 % of the limit and 2 minutes before it."""
    lo = max(1, int(0.3 * walltime_s) // MINUTE)
    hi = walltime_s // MINUTE - 2
    return rng.randint(lo, hi) * MINUTE


def _job(rng: random.Random) -> dict:
    """One job's request: partition, nodes, GPUs and cores per node, limit and runtime (trace s)."""
    part = rng.choices(("gpu", "cpu", "short"), weights=(45, 35, 20))[0]
    nodes = rng.choices((1, 2, 3), weights=(60, 30, 10))[0]
    cores = rng.randint(1, 8)
    if part == "gpu":
        gpn = rng.choices((1, 2, 3, 4), weights=(35, 30, 10, 25))[0]
        wall = rng.choice((1, 2, 3)) * HOUR
    elif part == "cpu":
        gpn = 0
        wall = rng.choice((1, 2, 3)) * HOUR
    else:
        gpn = rng.choices((0, 1, 2), weights=(50, 30, 20))[0]
        nodes = min(nodes, 2)
        wall = rng.choice((1, 2)) * HOUR
    return {"partition": part, "nodes": nodes, "cores_per_node": cores, "gpus_per_node": gpn,
            "walltime_s": wall, "runtime_s": _runtime(rng, wall)}


def gpu_share(seed: int = SEEDS["gpu_share"], n: int = 80) -> list[dict]:
    """The 80-job GPU sharing trace: arrivals every 1-7 trace minutes (mean 4), first at 0."""
    rng = random.Random(seed)
    jobs, t = [], 0
    for i in range(1, n + 1):
        j = _job(rng)
        j.update(job_id=i, submit_s=t, user=rng.choice(USERS),
                 qos=rng.choices(("normal", "high"), weights=(80, 20))[0],
                 dependency="", reservation="", mem_mb="")
        jobs.append(j)
        t += rng.randint(1, 7) * MINUTE
    return jobs


def gpu_mem(seed: int = SEEDS["gpu_share"]) -> list[dict]:
    """gpu_share's jobs with a memory request per node (MiB; nodes have RealMemory=1000)."""
    rng = random.Random(seed + 1)
    jobs = gpu_share(seed)
    for j in jobs:
        j["mem_mb"] = rng.choice((100, 200, 250, 400, 500, 750))
    return jobs


def deps_resv(seed: int = SEEDS["deps_resv"], n: int = 40) -> list[dict]:
    """40 jobs (gpu_share's mix), 10 with an afterok/afterany dependency on an earlier job."""
    rng = random.Random(seed)
    jobs = gpu_share(seed, n)
    for j in rng.sample(jobs[5:], 10):
        parent = rng.randint(max(1, j["job_id"] - 8), j["job_id"] - 1)
        j["dependency"] = f"{rng.choice(('afterok', 'afterany'))}:{parent}"
    return jobs


def preempt(seed: int = SEEDS["preempt"], n: int = 60) -> list[dict]:
    """60 jobs of gpu_share's mix; partition short is urgent (prio.conf.in's preempting partition)."""
    jobs = gpu_share(seed, n)
    for j in jobs:
        if j["partition"] == "short":
            j["partition"] = "urgent"
    return jobs


CASES = {"gpu_share": gpu_share, "gpu_exclusive": gpu_share, "gpu_mem": gpu_mem,
         "deps_resv": deps_resv, "preempt": preempt}


def write_trace(jobs: list[dict], path: str | Path) -> None:
    """Write jobs as a replay.py trace CSV (FIELDS order)."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for j in jobs:
            w.writerow({k: j[k] for k in FIELDS})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    ap.add_argument("--out", required=True, help="trace CSV to write")
    a = ap.parse_args(argv)
    jobs = CASES[a.case]()
    write_trace(jobs, a.out)
    print(f"{a.out}: {len(jobs)} jobs, last submit at {jobs[-1]['submit_s']} trace s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
