"""mpi4py executor: run a :class:`Schedule` for real on numpy buffers.

Each rank keeps a working buffer of ``nslots`` blocks; at every step it posts one ``Irecv`` per
incoming message and one ``Isend`` per outgoing message (payloads packed from the state at the start
of the step), waits for all of them, then reduces (sum) or copies what it received.  Only MPI_SUM is
modelled (the reduce flag of a message means "add").  mpi4py is imported lazily so that the rest of
the package never needs MPI.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np

from .algorithms import build_schedule
from .schedule import Schedule, ScheduleError

__all__ = ["run_schedule_mpi", "mpi_collective", "split_count", "find_mpiexec"]

_TAG_BASE = 7100   # arbitrary; keeps schedule traffic apart from small tags user code may use


def find_mpiexec() -> str | None:
    """Path of ``mpiexec``: the one installed next to the running Python (the mpich wheel puts it in
    the venv's ``bin/``, which need not be on PATH), else the first on ``PATH``, else None."""
    here = Path(sys.executable).parent
    for name in ("mpiexec", "mpiexec.exe", "mpiexec.hydra"):
        cand = here / name
        if cand.is_file():
            return str(cand)
    return shutil.which("mpiexec")


def split_count(sched: Schedule, count: int, what: str) -> int:
    """Elements per block for a ``what`` buffer of ``count`` elements; ScheduleError if indivisible."""
    nblk = sched.n_in if what == "input" else sched.n_out
    if count <= 0 or count % nblk:
        raise ScheduleError(
            f"{sched.collective}/{sched.algorithm} with p={sched.p}: the {what} buffer of {count} elements must be a "
            f"positive multiple of {nblk} blocks")
    return count // nblk


def run_schedule_mpi(sched: Schedule, comm, local_input: np.ndarray | None, m: int, dtype) -> np.ndarray | None:
    """Execute ``sched`` on communicator ``comm``; ``local_input`` has shape (n_in, m) (None on non-roots
    of bcast/scatter).  Returns this rank's output (n_out, m) or None if it has none."""
    from mpi4py import MPI  # noqa: PLC0415 - mpi4py only under mpiexec

    rank = comm.Get_rank()
    if comm.Get_size() != sched.p:
        raise ScheduleError(f"schedule is for p={sched.p} ranks, communicator has {comm.Get_size()}")
    W = np.zeros((sched.nslots, m), dtype=dtype)
    lay = sched.init_layout(rank)
    sl = np.flatnonzero(lay >= 0)
    if sl.size:
        if local_input is None:
            raise ScheduleError(f"rank {rank} needs input data for {sched.collective}")
        W[sl] = np.asarray(local_input, dtype=dtype).reshape(sched.n_in, m)[lay[sl]]
    for k, st in enumerate(sched.steps):
        outgoing = np.flatnonzero(st.src == rank)
        incoming = np.flatnonzero(st.dst == rank)
        if outgoing.size == 0 and incoming.size == 0:
            continue
        tag = _TAG_BASE + (k % 20000)
        reqs, recv_bufs, send_bufs = [], [], []
        for i in incoming:
            _, rs = st.slots(int(i))
            buf = np.empty((rs.size, m), dtype=dtype)
            recv_bufs.append((rs, buf))
            reqs.append(comm.Irecv(buf, source=int(st.src[i]), tag=tag))
        for i in outgoing:
            ss, _ = st.slots(int(i))
            buf = np.ascontiguousarray(W[ss])
            send_bufs.append(buf)
            reqs.append(comm.Isend(buf, dest=int(st.dst[i]), tag=tag))
        MPI.Request.Waitall(reqs)
        for rs, buf in recv_bufs:
            if st.reduce:
                np.add.at(W, rs, buf)
            else:
                W[rs] = buf
    fin = sched.final_layout(rank)
    sl = np.flatnonzero(fin >= 0)
    if sl.size == 0:
        return None
    out = np.zeros((sched.n_out, m), dtype=dtype)
    out[fin[sl]] = W[sl]
    return out


def mpi_collective(comm, collective: str, algorithm: str, sendbuf: np.ndarray | None, root: int = 0,
                   count: int | None = None, dtype=None) -> np.ndarray | None:
    """Run ``collective`` by ``algorithm`` on ``comm`` with a flat numpy ``sendbuf``.

    Buffer sizes follow MPI: allreduce/reduce/bcast ``count`` elements; reduce_scatter ``p * n``
    in, ``n`` out (Reduce_scatter_block); allgather/gather ``n`` in, ``p * n`` out; scatter ``p * n``
    at the root, ``n`` out; alltoall ``p * n`` in and out.  For bcast/scatter, non-roots pass
    ``sendbuf=None`` and must give ``count`` (elements of the root buffer) and ``dtype``.
    Returns the flat result (None on ranks without output).
    """
    sched = build_schedule(collective, algorithm, comm.Get_size(), root)
    if sendbuf is not None:
        sendbuf = np.ascontiguousarray(sendbuf).ravel()
        count = sendbuf.size if count is None else count
        dtype = sendbuf.dtype if dtype is None else dtype
    if count is None or dtype is None:
        raise ScheduleError(f"{collective}: ranks without a send buffer must give count and dtype")
    m = split_count(sched, count, "input")
    inp = None if sendbuf is None else sendbuf.reshape(sched.n_in, m)
    out = run_schedule_mpi(sched, comm, inp, m, np.dtype(dtype))
    return None if out is None else out.ravel()
