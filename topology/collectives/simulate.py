"""Pure-numpy executor of a :class:`Schedule` (no MPI) and the reference semantics of every collective.

:func:`run_schedule` moves real numpy data exactly as the schedule says (all messages of a step read
the state at the start of the step), tracking which slots hold data so that a schedule that sends an
empty slot, reduces into an empty slot or leaves an output slot empty is reported as an error.
:func:`check_schedule` runs it on seeded random integers and compares with :func:`reference_result`.
"""
from __future__ import annotations

import numpy as np

from .schedule import Schedule, ScheduleError

__all__ = ["run_schedule", "reference_result", "make_inputs", "check_schedule", "ScheduleExecutionError"]


class ScheduleExecutionError(AssertionError):
    """The schedule does not compute its collective (names the step, message and slot)."""


def make_inputs(sched: Schedule, m: int, dtype=np.int64, seed: int = 0) -> list[np.ndarray]:
    """Seeded inputs: rank r gets an array (n_in, m) of small integers (exact sums in any dtype)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(-50, 50, size=(sched.n_in, m)).astype(dtype) for _ in range(sched.p)]


def reference_result(collective: str, inputs: list[np.ndarray], root: int = 0) -> list[np.ndarray | None]:
    """What each rank must hold after ``collective`` (None where the rank has no output)."""
    p = len(inputs)
    if collective == "allreduce":
        tot = np.sum(np.stack(inputs), axis=0, dtype=inputs[0].dtype)
        return [tot.copy() for _ in range(p)]
    if collective == "reduce":
        tot = np.sum(np.stack(inputs), axis=0, dtype=inputs[0].dtype)
        return [tot if r == root else None for r in range(p)]
    if collective == "bcast":
        return [inputs[root].copy() for _ in range(p)]
    if collective == "reduce_scatter":
        tot = np.sum(np.stack(inputs), axis=0, dtype=inputs[0].dtype)
        return [tot[r:r + 1].copy() for r in range(p)]
    if collective == "allgather":
        allb = np.concatenate(inputs, axis=0)
        return [allb.copy() for _ in range(p)]
    if collective == "gather":
        allb = np.concatenate(inputs, axis=0)
        return [allb if r == root else None for r in range(p)]
    if collective == "scatter":
        return [inputs[root][r:r + 1].copy() for r in range(p)]
    if collective == "alltoall":
        return [np.stack([inputs[o][r] for o in range(p)]) for r in range(p)]
    raise ScheduleError(f"unknown collective {collective!r}")


def run_schedule(sched: Schedule, inputs: list[np.ndarray]) -> list[np.ndarray | None]:
    """Execute ``sched`` on ``inputs`` (rank r: array (n_in, m)); returns per-rank outputs (n_out, m)."""
    p = sched.p
    if len(inputs) != p:
        raise ScheduleError(f"need {p} input arrays, got {len(inputs)}")
    m = inputs[0].shape[1]
    dtype = inputs[0].dtype
    W = [np.zeros((sched.nslots, m), dtype=dtype) for _ in range(p)]
    valid = [np.zeros(sched.nslots, dtype=bool) for _ in range(p)]
    for r in range(p):
        lay = sched.init_layout(r)
        if r == sched.root or sched.collective not in ("bcast", "scatter"):
            if inputs[r].shape != (sched.n_in, m):
                raise ScheduleError(f"rank {r}: input shape {inputs[r].shape}, schedule needs {(sched.n_in, m)}")
        sl = np.flatnonzero(lay >= 0)
        W[r][sl] = inputs[r][lay[sl]]
        valid[r][sl] = True
    for k, st in enumerate(sched.steps):
        payloads = []
        for i in range(st.nmsg):
            s, d = int(st.src[i]), int(st.dst[i])
            ss, rs = st.slots(i)
            if ss.size != int(st.count[i]) or rs.size != ss.size:
                raise ScheduleExecutionError(f"step {k} msg {i}: {ss.size} slots for count {int(st.count[i])}")
            if not valid[s][ss].all():
                bad = ss[~valid[s][ss]][0]
                raise ScheduleExecutionError(f"step {k} ({st.phase}) msg {i}: rank {s} sends empty slot {bad}")
            payloads.append((d, rs, W[s][ss].copy()))
        for d, rs, data in payloads:
            if st.reduce:
                if not valid[d][rs].all():
                    raise ScheduleExecutionError(f"step {k} ({st.phase}): rank {d} reduces into an empty slot")
                np.add.at(W[d], rs, data)
            else:
                W[d][rs] = data
                valid[d][rs] = True
    out: list[np.ndarray | None] = []
    for r in range(p):
        lay = sched.final_layout(r)
        sl = np.flatnonzero(lay >= 0)
        if sl.size == 0:
            out.append(None)
            continue
        if not valid[r][sl].all():
            raise ScheduleExecutionError(f"rank {r}: output slot {sl[~valid[r][sl]][0]} never received data")
        res = np.zeros((sched.n_out, m), dtype=dtype)
        res[lay[sl]] = W[r][sl]
        out.append(res)
    return out


def check_schedule(sched: Schedule, m: int = 3, dtype=np.int64, seed: int = 0) -> None:
    """Run ``sched`` on seeded data and raise :class:`ScheduleExecutionError` unless it is exact."""
    inputs = make_inputs(sched, m, dtype, seed)
    got = run_schedule(sched, inputs)
    want = reference_result(sched.collective, inputs, sched.root)
    for r in range(sched.p):
        if want[r] is None:
            continue
        if got[r] is None or got[r].shape != want[r].shape or not np.array_equal(got[r], want[r]):
            raise ScheduleExecutionError(
                f"{sched.collective}/{sched.algorithm} p={sched.p} root={sched.root}: rank {r} result differs "
                f"from the reference")
