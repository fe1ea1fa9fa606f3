"""Engine-only speed A/B and peak memory of a large run (issue 12 trunk, issue 14 item 5).

Speed: the event loop of this checkout against the loop of a reference commit, in one process and
one sitting, on the same prepared jobs and the same (current) scheduler code, alternating runs and
keeping the best of ``--reps`` (timings on a shared VM drift; ratios in one sitting do not). The
reference engine is ``twin/simulation.py``, ``twin/cluster.py`` and ``twin/ranges.py`` of ``--ref``
(``git show``), imported under private names. Both engines must give the same starts, ends, nodes
and series (checked; printed as ``identical``).

Memory: ``--memory N`` runs ``hpctwin run`` on a synthetic workload of N jobs (1,024 nodes, EASY) in a
child process and prints its peak resident memory (``ru_maxrss``).

    python benchmarks/engine_ab.py --ref bc453a2                      # KTH-SP2 5,000 jobs, fcfs and easy
    python benchmarks/engine_ab.py --ref bc453a2 --log CTC-SP2 --jobs 0 --policies easy
    python benchmarks/engine_ab.py --memory 1000000
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def reference_engine(ref: str):
    """The reference commit's Simulation class, imported from a temporary folder."""
    tmp = Path(tempfile.mkdtemp(prefix="hpctwin-engine-ref-"))
    for name in ("simulation", "cluster", "ranges"):
        src = subprocess.run(["git", "show", f"{ref}:twin/{name}.py"], cwd=REPO, check=True,
                             capture_output=True, text=True).stdout
        for mod in ("cluster", "ranges"):
            src = src.replace(f"from .{mod} import", f"from _ref_{mod} import")
        src = src.replace("from .model_api import", "from hpctwin.twin.model_api import")
        src = src.replace("from schedulers.base import", "from hpctwin.schedulers.base import")   # pre-namespace trees
        (tmp / f"_ref_{name}.py").write_text(src)
    sys.path.insert(0, str(tmp))
    import _ref_simulation  # noqa: PLC0415
    return _ref_simulation.Simulation


def ab(ref: str, log: str, jobs: int, policies: list[str], reps: int, data_dir: str) -> None:
    from hpctwin.schedulers.registry import make_scheduler  # noqa: PLC0415
    from hpctwin.twin.run import job_table, load_workload, prepare  # noqa: PLC0415
    from hpctwin.twin.simulation import Simulation as New  # noqa: PLC0415
    Old = reference_engine(ref)
    wl = load_workload(log, data_dir=data_dir)
    if jobs:
        wl = wl.take(np.arange(min(jobs, len(wl))))
    prep = prepare(wl, wl.machine_size, "workload")
    jt = job_table(prep)
    print(f"{log}, {len(prep.workload):,} jobs, {prep.total} units; engine CPU s, best of {reps} (alternating)")
    for pol in policies:
        best, outs = {"ref": np.inf, "new": np.inf}, {}
        for rep in range(reps):
            for name, cls in ((("ref", Old), ("new", New)) if rep % 2 == 0 else (("new", New), ("ref", Old))):
                sim = cls(jt, prep.workload.runtime, prep.kill_limit, make_scheduler(pol), prep.total)
                t = time.process_time()
                outs[name] = sim.run()
                best[name] = min(best[name], time.process_time() - t)
        a, b = outs["ref"], outs["new"]
        same = (np.array_equal(a.start, b.start, equal_nan=True) and np.array_equal(a.end, b.end, equal_nan=True)
                and list(a.nodes) == list(b.nodes) and np.array_equal(a.change_t, b.change_t)
                and np.array_equal(a.change_busy, b.change_busy) and np.array_equal(a.change_queue, b.change_queue))
        print(f"  {pol:14s} ref {best['ref']:.3f}  new {best['new']:.3f}  new/ref {best['new'] / best['ref']:.2f}"
              f"  identical={same}")


def memory(n: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        cmd = [sys.executable, "-m", "hpctwin.twin.cli", "run", "--workload", f"synthetic:jobs={n},nodes=1024",
               "--nodes", "1024", "--scheduler", "easy", "--out", str(Path(d) / "run"), "--quiet"]
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r.returncode:
            print(r.stderr)
        print(f"{n:,} synthetic jobs, 1,024 nodes, EASY: peak RSS {ru.ru_maxrss / 1024:,.0f} MB, "
              f"CPU {ru.ru_utime + ru.ru_stime:.0f} s, wall {wall:.0f} s (target: < 2,048 MB)")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ref", default="bc453a2", help="reference commit (default bc453a2)")
    p.add_argument("--log", default="KTH-SP2")
    p.add_argument("--jobs", type=int, default=5000, help="first N jobs of the log (0: all)")
    p.add_argument("--policies", default="fcfs,easy")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--data-dir", default=os.environ.get("HPCTWIN_DATA", str(REPO.parent / "shared" / "datasets")))
    p.add_argument("--memory", type=int, default=0, metavar="N", help="peak memory of an N-job synthetic run instead")
    a = p.parse_args(argv)
    if a.memory:
        memory(a.memory)
    else:
        ab(a.ref, a.log, a.jobs, a.policies.split(","), a.reps, a.data_dir)


if __name__ == "__main__":
    main()
