"""Validate every collective schedule under MPI against the MPI library's own collective.

Run ``hpctwin collectives validate -n 8 [--out FILE.csv]`` (or ``mpiexec -n 8 python -m
hpctwin.topology.collectives.validate``; the CLI finds ``mpiexec`` next to the running Python first, then on
``PATH``).  For every collective,
every algorithm that serves the communicator size, several block sizes, dtypes and (for rooted
collectives) two roots, rank inputs are seeded small integers (sums are exact in every dtype, so
results are compared bit for bit).  Rank 0 writes one CSV row per case: collective, algorithm, p,
root, dtype, elements and bytes of the reference buffer, ``ok``, and the best-of-``--reps`` wall time
of the schedule and of the library call (seconds, ``MPI.Wtime`` between barriers).  Timings are only
meaningful with one rank per core; ``oversubscribed`` flags runs with more ranks than cores.
The CSV goes to ``runs/collectives_validate-p<N>.csv`` unless ``--out`` says otherwise.  Algorithms
that cannot serve the communicator size (e.g. power-of-two-only ones at ``-n 6``) are listed as
skipped, with the reason.  Exit status 0 if every case matched, 1 otherwise.  ``launch(argv)`` is
what ``hpctwin collectives validate`` calls; ``main(argv)`` is what runs on every rank.
"""
from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from .algorithms import ALGORITHMS, build_schedule, supports, unsupported_reason
from .mpi_exec import find_mpiexec, run_schedule_mpi
from .schedule import COLLECTIVES

__all__ = ["main", "launch", "library_collective", "skipped_algorithms"]

DEFAULT_RANKS = 4

_ROOTED = ("bcast", "reduce", "gather", "scatter")
_DTYPES = {"int32": np.int32, "int64": np.int64, "float32": np.float32, "float64": np.float64}


def library_collective(comm, collective: str, inp: np.ndarray | None, m: int, dtype, root: int) -> np.ndarray | None:
    """The MPI library's result for the same inputs (same shapes as the schedule executor)."""
    from mpi4py import MPI  # noqa: PLC0415 - mpi4py only under mpiexec

    p, rank = comm.Get_size(), comm.Get_rank()
    if collective == "allreduce":
        out = np.empty_like(inp)
        comm.Allreduce(inp, out, op=MPI.SUM)
        return out
    if collective == "reduce":
        out = np.empty_like(inp) if rank == root else None
        comm.Reduce(inp, out, op=MPI.SUM, root=root)
        return out
    if collective == "bcast":
        buf = inp.copy() if rank == root else np.empty((1, m), dtype=dtype)
        comm.Bcast(buf, root=root)
        return buf
    if collective == "reduce_scatter":
        out = np.empty((1, m), dtype=dtype)
        comm.Reduce_scatter_block(inp, out, op=MPI.SUM)
        return out
    if collective == "allgather":
        out = np.empty((p, m), dtype=dtype)
        comm.Allgather(inp, out)
        return out
    if collective == "gather":
        out = np.empty((p, m), dtype=dtype) if rank == root else None
        comm.Gather(inp, out, root=root)
        return out
    if collective == "scatter":
        out = np.empty((1, m), dtype=dtype)
        comm.Scatter(inp if rank == root else None, out, root=root)
        return out
    if collective == "alltoall":
        out = np.empty((p, m), dtype=dtype)
        comm.Alltoall(inp, out)
        return out
    raise ValueError(f"unknown collective {collective!r}")


def _timed(comm, fn, reps: int) -> tuple[object, float]:
    from mpi4py import MPI  # noqa: PLC0415 - mpi4py only under mpiexec

    best = float("inf")
    res = None
    for _ in range(max(1, reps)):
        comm.Barrier()
        t0 = MPI.Wtime()
        res = fn()
        t = comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX)
        best = min(best, t)
    return res, best


def build_parser(launcher: bool = False) -> argparse.ArgumentParser:
    """The validator's options; ``launcher=True`` adds ``-n`` (ranks for ``mpiexec``), as
    ``hpctwin collectives validate`` takes it."""
    prog = "hpctwin collectives validate" if launcher else "python -m hpctwin.topology.collectives.validate"
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    if launcher:
        ap.add_argument("-n", "--np", type=int, default=DEFAULT_RANKS, metavar="N",
                        help=f"MPI ranks to launch with mpiexec (default {DEFAULT_RANKS}); algorithms that "
                             "cannot serve N ranks (power-of-two-only ones for N = 6) are listed as skipped")
    ap.add_argument("--out", default=None,
                    help="CSV written by rank 0 (default runs/collectives_validate-p<N>.csv)")
    ap.add_argument("--collectives", default=",".join(COLLECTIVES), help="comma-separated subset")
    ap.add_argument("--block-elems", default="1,5,64", help="elements per block (comma-separated)")
    ap.add_argument("--dtypes", default="int32,int64,float64", help=f"subset of {','.join(_DTYPES)}")
    ap.add_argument("--reps", type=int, default=3, help="timing repetitions (best is kept)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the input data")
    return ap


def _parse(argv: list[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def skipped_algorithms(collectives: list[str], p: int) -> list[tuple[str, str, str]]:
    """``(collective, algorithm, reason)`` for every algorithm of ``collectives`` that cannot serve p ranks."""
    return [(c, a, r) for c in collectives for a in ALGORITHMS[c]
            if (r := unsupported_reason(c, a, p)) is not None]


def _skip_message(skipped: list[tuple[str, str, str]], p: int) -> str:
    by_reason: dict[str, list[str]] = {}
    for c, a, r in skipped:
        by_reason.setdefault(r, []).append(f"{c}/{a}")
    parts = [f"{', '.join(names)} ({reason})" for reason, names in by_reason.items()]
    return f"validate: p={p}: skipping {len(skipped)} algorithms: " + "; ".join(parts)


def launch(argv: list[str] | None = None) -> int:
    """``hpctwin collectives validate [-n N] [OPTIONS]``: parse (``--help`` prints once, here), then run
    :func:`main` on N ranks under ``mpiexec`` (the one next to ``sys.executable`` first, then PATH)."""
    ap = build_parser(launcher=True)
    try:
        a, _ = ap.parse_known_args(argv)
        ap.parse_args(argv)          # unknown options: argparse's own error, before launching anything
    except SystemExit as e:          # --help (status 0) or a bad option (status 2)
        return int(e.code or 0)
    if a.np < 2:
        print(f"hpctwin collectives validate: -n {a.np}: needs at least 2 MPI ranks (e.g. -n 8)", file=sys.stderr)
        return 2
    mpiexec = find_mpiexec()
    if mpiexec is None:
        print(f"hpctwin: error: mpiexec not found next to {sys.executable} nor on PATH (pip install mpich)",
              file=sys.stderr)
        return 2
    rest = _drop_np(list(argv or []))
    return subprocess.call([mpiexec, "-n", str(a.np), sys.executable, "-m", "hpctwin.topology.collectives.validate",
                            *rest])


def _drop_np(argv: list[str]) -> list[str]:
    out, i = [], 0
    while i < len(argv):
        x = argv[i]
        if x in ("-n", "--np"):
            i += 2
            continue
        if x.startswith("--np=") or (x.startswith("-n") and x[2:].isdigit()):
            i += 1
            continue
        out.append(x)
        i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point (also for ``hpctwin collectives validate``); returns the exit status."""
    from mpi4py import MPI  # noqa: PLC0415 - mpi4py only under mpiexec

    comm = MPI.COMM_WORLD
    p, rank = comm.Get_size(), comm.Get_rank()
    argv = sys.argv[1:] if argv is None else list(argv)
    if rank != 0 and ("-h" in argv or "--help" in argv):
        return 0                     # rank 0 prints the help, once
    args = _parse(argv)
    out = Path(args.out) if args.out else Path("runs") / f"collectives_validate-p{p}.csv"
    colls = [c.strip() for c in args.collectives.split(",") if c.strip()]
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    for what, names, known in (("collective", colls, COLLECTIVES), ("dtype", dtypes, list(_DTYPES))):
        bad = [x for x in names if x not in known]
        if bad:
            if rank == 0:
                print(f"unknown {what} {bad[0]!r}; supported: {', '.join(known)}", file=sys.stderr)
            return 2
    blocks = [int(x) for x in args.block_elems.split(",") if x.strip()]
    cores = os.cpu_count() or 1
    rows = []
    all_ok = True
    if p < 2:
        if rank == 0:
            print("validate needs at least 2 MPI ranks (mpiexec -n 8 ...)", file=sys.stderr)
        return 2
    skipped = skipped_algorithms(colls, p)
    if rank == 0 and skipped:
        print(_skip_message(skipped, p), file=sys.stderr)
    for coll in colls:
        for alg in ALGORITHMS[coll]:
            if not supports(coll, alg, p):
                continue
            for root in ([0, p - 1] if coll in _ROOTED else [0]):
                sched = build_schedule(coll, alg, p, root)
                for dname in dtypes:
                    dt = np.dtype(_DTYPES[dname])
                    for m in blocks:
                        rng = np.random.default_rng([args.seed, rank, m])
                        inp = rng.integers(-50, 50, size=(sched.n_in, m)).astype(dt)
                        has_input = coll not in ("bcast", "scatter") or rank == root
                        mine, t_s = _timed(
                            comm, lambda: run_schedule_mpi(sched, comm, inp if has_input else None, m, dt), args.reps)
                        ref, t_l = _timed(comm, lambda: library_collective(comm, coll, inp, m, dt, root), args.reps)
                        ok = ((mine is None and ref is None)
                              or (mine is not None and ref is not None and mine.shape == ref.shape
                                  and np.array_equal(mine, ref)))
                        ok = bool(comm.allreduce(int(ok), op=MPI.MIN))
                        all_ok &= ok
                        elems = sched.unit_blocks * m
                        rows.append({"collective": coll, "algorithm": alg, "p": p, "root": root, "dtype": dname,
                                     "elements": elems, "bytes": elems * dt.itemsize, "ok": ok,
                                     "time_schedule_s": f"{t_s:.6e}", "time_mpi_s": f"{t_l:.6e}",
                                     "oversubscribed": p > cores})
    if rank == 0 and not rows:
        print(f"validate: p={p}: no algorithm of {', '.join(colls)} serves {p} ranks", file=sys.stderr)
        return 2
    if rank == 0:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        nbad = sum(not r["ok"] for r in rows)
        print(f"validate: p={p}: {len(rows)} cases, {nbad} mismatches -> {out}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
