"""Topology performance figures (issue 4). Prints figures; asserts nothing.

* build time of Frontier's full graph (target < 2 s) and of a 1,024-host k = 16 fat-tree;
* link loads of a 1,000-node job on Frontier (target < 50 ms), compact and spread placement;
* placement + link loads per started job on Frontier (group-packed placer, job sizes 2..1024);
* a whole real log with ``--network on`` vs off on a Dragonfly machine (target: at most 3x).

Usage: ``python benchmarks/topology_speed.py [--log CTC-SP2] [--system adastra] [--jobs N]``
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def _t(f, repeat=3):
    best = np.inf
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    from hpctwin.topology import traffic as T
    from hpctwin.topology.fattree import fat_tree_graph
    from hpctwin.topology.placement import make_placer
    from hpctwin.topology.presets import build_preset, network_node_group
    from hpctwin.topology.routing import make_router

    ap = argparse.ArgumentParser()
    ap.add_argument("--log", default="CTC-SP2")
    ap.add_argument("--system", default="adastra")
    ap.add_argument("--jobs", type=int, default=None, help="first N jobs of the log only")
    ap.add_argument("--skip-log", action="store_true")
    a = ap.parse_args()

    dt, G = _t(lambda: build_preset("frontier"))
    print(f"build Frontier graph (9,408 hosts, {G.number_of_edges():,} edges): {dt:.3f} s  (target < 2 s)")
    dt, _ = _t(lambda: fat_tree_graph(16))
    print(f"build 1,024-host fat-tree (k = 16):              {dt:.3f} s")
    dt, R = _t(lambda: make_router(G), repeat=1)
    print(f"Frontier router tables (once per run):           {dt:.3f} s")

    for label, hosts in (("compact (0..999)", np.arange(1000)), ("spread (every 9th node)", np.arange(1000) * 9)):
        for kind in ("alltoall", "allreduce", "ring"):
            for routing in ("minimal", "valiant"):
                tr = T.pattern(kind, hosts, 1e6)
                dt, _ = _t(lambda: R.link_loads(tr, routing))
                print(f"1,000-node {kind:<9} {routing:<7} {label:<24}: {dt * 1e3:7.2f} ms  (target < 50 ms)")

    rng = np.random.default_rng(0)
    ng = network_node_group(G)
    placer = make_placer("group-packed")
    placer.bind(9408, ng, rng)
    free = np.ones(9408, bool)
    busy = rng.random(9408) < 0.5
    free &= ~busy
    sizes = 2 ** rng.integers(1, 11, 300)
    t = time.perf_counter()
    for s in sizes:
        nodes = placer.place(0, int(s), free)
        R.link_loads(T.alltoall(nodes, 1e6))
    per = (time.perf_counter() - t) / len(sizes)
    print(f"group-packed placement + all-to-all link loads per started job on Frontier "
          f"(sizes 2..1024, half the machine busy): {per * 1e3:.2f} ms")

    if a.skip_log:
        return
    from hpctwin.twin.run import RunConfig, load_workload, run
    wl = load_workload(a.log)
    if a.jobs:
        wl = wl.take(np.arange(min(a.jobs, len(wl))))
    res = {False: (float("inf"), None), True: (float("inf"), None)}
    for _ in range(3):          # interleaved, best of 3 each: this VM's speed drifts during a run
        for net in (False, True):
            t = time.perf_counter()
            r = run(RunConfig(workload=a.log, system=a.system, network=net, placement="group-packed", seed=0),
                    workload=wl)
            res[net] = (min(res[net][0], time.perf_counter() - t), r.summary)
    off, on = res[False][0], res[True][0]
    s = res[True][1]
    print(f"{a.log} ({len(wl):,} jobs) on {a.system}, group-packed: network off {off:.1f} s, on {on:.1f} s "
          f"= {on / off:.2f}x  (target <= 3x; best of 3 interleaved runs each); mean stretch {s['network_mean_stretch']:.4f}, "
          f"{s['network_recomputations']:,} max-min recomputations")


if __name__ == "__main__":
    main()
