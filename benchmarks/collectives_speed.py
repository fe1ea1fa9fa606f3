"""Speed of schedule generation and global-byte counting (target: < 1 s per collective at p = 4,096).

Prints, for every collective/algorithm at ``--p`` ranks: generation time, global-byte count time
(ranks in groups of 180 nodes, a Leonardo cell, with one rank per node in a seeded random order),
steps and messages.  Optionally ``--traffic`` also times the whole ``experiments.bine_traffic``
job loop on the real allocations (target: the full experiment under 5 minutes).

    python benchmarks/collectives_speed.py [--p 4096] [--traffic]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from hpctwin.topology.collectives import ALGORITHMS, build_schedule, global_bytes, supports

GROUP_SIZE = 180  # nodes per Leonardo booster cell (Bine-allocations/leonardo-node-map.txt.gz)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--p", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--traffic", action="store_true", help="also time the bine_traffic job loop on the real data")
    args = ap.parse_args(argv)
    p = args.p
    rng = np.random.default_rng(args.seed)
    groups = rng.permutation(p) // GROUP_SIZE
    print(f"p = {p}, groups of {GROUP_SIZE} ranks in random order (seed {args.seed})")
    print(f"{'collective':15s} {'algorithm':22s} {'gen_s':>8s} {'global_s':>9s} {'total_s':>8s} {'steps':>6s} {'messages':>10s}")
    worst = 0.0
    for coll, algs in ALGORITHMS.items():
        for alg in algs:
            if not supports(coll, alg, p):
                continue
            t0 = time.perf_counter()
            s = build_schedule(coll, alg, p)
            t1 = time.perf_counter()
            global_bytes(s, groups)
            t2 = time.perf_counter()
            worst = max(worst, t2 - t0)
            print(f"{coll:15s} {alg:22s} {t1 - t0:8.3f} {t2 - t1:9.3f} {t2 - t0:8.3f} {s.nsteps:6d} {s.nmessages:10d}")
    print(f"worst schedule + global-byte count: {worst:.3f} s (target < 1 s)")
    if args.traffic:
        from hpctwin.experiments.bine_traffic import default_data_dir, load_leonardo, load_lumi, traffic_by_job

        for name, loader in (("leonardo", load_leonardo), ("lumi", load_lumi)):
            t0 = time.perf_counter()
            ids, allocs, grp, _ = loader(default_data_dir())
            t1 = time.perf_counter()
            df = traffic_by_job(allocs, grp, ids, system=name)
            t2 = time.perf_counter()
            print(f"bine_traffic {name}: read {len(ids)} jobs in {t1 - t0:.1f} s, {len(df)} job x pair rows in {t2 - t1:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
