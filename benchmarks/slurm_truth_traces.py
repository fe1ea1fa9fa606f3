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
  resv_end       a user reservation (RESV_END: users daemon and bin, n[001-004], trace 600-7800 s)
                 with 6 jobs submitted into it (4 of them still running at its end: their runtimes
                 and limits run past it) and 24 seeded jobs outside it (users sys, games, man,
                 partitions gpu / short, 2-4 GPUs per node) competing for the GPU nodes; the one
                 case whose jobs may end before their runtime (what Slurm does at a reservation's end)

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
#: the user reservation of case resv_end (NAME:START:DURATION:NODES:FLAGS, trace s: 600-7800 s, no
#: flags) and its users (replay.py creates reservations for Users=root; the recorder substitutes these)
RESV_END = "userres:600:7200:n[001-004]:"
RESV_END_USERS = "daemon,bin"
#: the reservation (replay.py --resv) and its users per case; other cases have none
RESVS = {"deps_resv": (RESV, "root"), "resv_end": (RESV_END, RESV_END_USERS)}
SEEDS = {"gpu_share": 27001, "deps_resv": 27004, "preempt": 27005, "resv_end": 27006}


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


#: the jobs submitted into resv_end's reservation (trace s): (submit, nodes, cores and GPUs per node,
#: limit, runtime, user); from the reservation's start at 600 s: job 1 runs 600-9600 (killed at the
#: end, 7800?), 2 completes at 3000 (limit exactly to the end), 3 runs past the end, 4 starts at 2400
#: and runs past the end, 5 completes at 7200 although its limit reaches 9000, 6 starts at 6600 and
#: runs past the end. At most 4 of the 4-core jobs share the two nodes job 1 leaves, so every job
#: can start before the end (a job still pending then would wait for a deleted reservation).
RESV_END_JOBS = ((0, 2, 8, 4, 3 * HOUR, 150 * MINUTE, "daemon"),
                 (60, 1, 4, 2, 2 * HOUR, 40 * MINUTE, "bin"),
                 (120, 1, 4, 2, 3 * HOUR, 170 * MINUTE, "daemon"),
                 (2400, 1, 4, 2, 2 * HOUR, 100 * MINUTE, "bin"),
                 (5400, 1, 4, 2, 1 * HOUR, 30 * MINUTE, "daemon"),
                 (6600, 1, 4, 1, 1 * HOUR, 50 * MINUTE, "bin"))


def resv_end(seed: int = SEEDS["resv_end"], n_outside: int = 24) -> list[dict]:
    """RESV_END_JOBS in the reservation (partition gpu, QOS normal) and n_outside seeded jobs
    outside it (users sys / games / man, partition gpu or short, 1-2 nodes, 2-4 GPUs and 2-8 cores
    per node, limits 1-3 h (short: 1-2 h), arrivals every 2-8 trace minutes from 0), ordered by
    submit time (reservation jobs first at equal times) and numbered from 1."""
    rng = random.Random(seed)
    jobs = []
    for sub, nodes, cores, gpn, wall, rt, user in RESV_END_JOBS:
        jobs.append({"submit_s": sub, "nodes": nodes, "cores_per_node": cores, "gpus_per_node": gpn,
                     "walltime_s": wall, "runtime_s": rt, "user": user, "partition": "gpu",
                     "qos": "normal", "reservation": RESV_END.split(":")[0]})
    t = 0
    for _ in range(n_outside):
        part = rng.choices(("gpu", "short"), weights=(75, 25))[0]
        wall = rng.choice((1, 2, 3) if part == "gpu" else (1, 2)) * HOUR
        jobs.append({"submit_s": t, "nodes": rng.choices((1, 2), weights=(70, 30))[0],
                     "cores_per_node": rng.randint(2, 8), "gpus_per_node": rng.choice((2, 3, 4)),
                     "walltime_s": wall, "runtime_s": _runtime(rng, wall),
                     "user": rng.choice(("sys", "games", "man")), "partition": part,
                     "qos": rng.choices(("normal", "high"), weights=(80, 20))[0], "reservation": ""})
        t += rng.randint(2, 8) * MINUTE
    jobs.sort(key=lambda j: (j["submit_s"], j["reservation"] == ""))
    for i, j in enumerate(jobs, 1):
        j.update(job_id=i, dependency="", mem_mb="")
    return jobs


CASES = {"gpu_share": gpu_share, "gpu_exclusive": gpu_share, "gpu_mem": gpu_mem,
         "deps_resv": deps_resv, "preempt": preempt, "resv_end": resv_end}


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
