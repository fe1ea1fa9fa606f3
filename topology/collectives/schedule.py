"""Collective schedules as data.

A :class:`Schedule` is what every algorithm generator returns and every back-end consumes (the
alpha-beta-gamma model, the placement-aware traffic count, the link-load model, the simulated and the
mpi4py executors).  It never imports MPI.

Data model
----------
* Every rank owns a working buffer of ``nslots`` *slots*; a slot holds one *block* (``block_bytes``
  bytes, i.e. ``nbytes / unit_blocks`` for a collective on an ``nbytes`` reference buffer, see
  :attr:`Schedule.unit_blocks`).
* A schedule is a list of :class:`Step`; the messages of a step are simultaneous (every payload is
  read from the state at the start of the step, then delivered).  A step stores its messages as
  numpy arrays: ``src``, ``dst`` (ranks), ``count`` (blocks per message), a reduce flag
  (receiver reduces into its slots, else copies), and the block range: ``start`` (first slot at the
  sender) and ``rstart`` (first slot at the receiver; defaults to ``start``).  Algorithms whose
  messages are not one contiguous range (Bruck, Bine alltoall) give a ``selector`` instead, a function
  ``i -> (send_slots, recv_slots)``, evaluated lazily by the executors only, so costing a p = 4,096
  schedule never materialises per-block lists.
* ``init_layout(r)`` says which block of rank r's input sits in each slot at the start (-1: empty),
  ``final_layout(r)`` which block of rank r's output each slot holds at the end (-1: not output).

Input/output conventions per collective (``n`` = reference buffer in bytes, ``p`` ranks):
``bcast``/``reduce``/``allreduce``: vector of ``unit_blocks`` blocks (n bytes);
``reduce_scatter``: input p blocks (n bytes), output 1 block (rank r gets block r of the sum);
``allgather``/``gather``: input 1 block, output p blocks (n bytes, block o from rank o);
``scatter``: root input p blocks, output 1 block; ``alltoall``: input p blocks (block d goes to rank
d), output p blocks (block o came from rank o), n bytes per rank.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

__all__ = ["Step", "Schedule", "COLLECTIVES", "ScheduleError"]

COLLECTIVES = ("bcast", "reduce", "gather", "scatter", "allgather", "reduce_scatter", "allreduce", "alltoall")


class ScheduleError(ValueError):
    """Bad request for a schedule (unknown algorithm, unsupported p, indivisible count...)."""


def _as_i64(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=np.int64))


@dataclass
class Step:
    """One communication step: all its messages happen at the same time.

    Attributes: ``src``, ``dst`` rank arrays; ``count`` blocks per message; ``reduce`` True if the
    receiver reduces (``+``) into its slots, False if it overwrites them; ``start``/``rstart`` first
    slot at sender/receiver of a contiguous range; ``selector`` alternative lazy block sets;
    ``phase`` a short label ("fold", "reduce-scatter", ...).
    """

    src: np.ndarray
    dst: np.ndarray
    count: np.ndarray
    reduce: bool
    start: Optional[np.ndarray] = None
    rstart: Optional[np.ndarray] = None
    selector: Optional[Callable[[int], tuple[np.ndarray, np.ndarray]]] = None
    phase: str = ""

    def __post_init__(self) -> None:
        self.src = _as_i64(self.src)
        self.dst = _as_i64(self.dst)
        n = self.src.shape[0]
        cnt = np.asarray(self.count, dtype=np.int64)
        self.count = np.broadcast_to(cnt, (n,)) if cnt.ndim == 0 else _as_i64(cnt)
        if self.dst.shape != (n,) or self.count.shape != (n,):
            raise ScheduleError("step arrays src, dst, count must have the same length")
        if self.start is not None:
            st = np.asarray(self.start, dtype=np.int64)
            self.start = np.broadcast_to(st, (n,)) if st.ndim == 0 else _as_i64(st)
        if self.rstart is not None:
            rs = np.asarray(self.rstart, dtype=np.int64)
            self.rstart = np.broadcast_to(rs, (n,)) if rs.ndim == 0 else _as_i64(rs)
        if self.start is None and self.selector is None:
            raise ScheduleError("a step needs either block ranges (start) or a selector")

    @property
    def nmsg(self) -> int:
        """Number of messages in the step."""
        return int(self.src.shape[0])

    def slots(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(send slots at the sender, receive slots at the receiver) of message ``i``."""
        if self.selector is not None:
            s, r = self.selector(i)
            return np.asarray(s, dtype=np.int64), np.asarray(r, dtype=np.int64)
        c = int(self.count[i])
        s0 = int(self.start[i])
        r0 = int(self.rstart[i]) if self.rstart is not None else s0
        return np.arange(s0, s0 + c, dtype=np.int64), np.arange(r0, r0 + c, dtype=np.int64)


@dataclass
class Schedule:
    """A collective algorithm for ``p`` ranks as data (see the module docstring).

    ``unit_blocks`` is the number of blocks in the reference buffer of ``nbytes`` bytes, so a message
    of ``c`` blocks carries ``c * nbytes / unit_blocks`` bytes.  ``meta`` holds algorithm facts
    (block numbering, folded ranks...).
    """

    collective: str
    algorithm: str
    p: int
    nslots: int
    unit_blocks: int
    steps: list[Step]
    init_layout: Callable[[int], np.ndarray]
    final_layout: Callable[[int], np.ndarray]
    n_in: int
    n_out: int
    root: int = 0
    meta: dict = field(default_factory=dict)
    _flat: Optional[tuple] = field(default=None, repr=False, compare=False)

    @property
    def nsteps(self) -> int:
        """Number of steps (latency terms)."""
        return len(self.steps)

    @property
    def nmessages(self) -> int:
        """Total number of messages."""
        return int(sum(st.nmsg for st in self.steps))

    def block_bytes(self, nbytes: float) -> float:
        """Bytes in one block when the reference buffer is ``nbytes`` bytes."""
        return float(nbytes) / self.unit_blocks

    def flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """All messages concatenated: (step index, src, dst, count in blocks); cached."""
        if self._flat is None:
            if not self.steps:
                z = np.zeros(0, dtype=np.int64)
                self._flat = (z, z, z, z)
            else:
                idx = np.repeat(np.arange(self.nsteps, dtype=np.int64), [st.nmsg for st in self.steps])
                src = np.concatenate([st.src for st in self.steps])
                dst = np.concatenate([st.dst for st in self.steps])
                cnt = np.concatenate([np.asarray(st.count) for st in self.steps])
                self._flat = (idx, src, dst, cnt)
        return self._flat

    def total_blocks(self) -> int:
        """Blocks sent over the network, summed over all messages."""
        return int(self.flat()[3].sum())

    def __repr__(self) -> str:  # compact: never print the arrays
        return (f"Schedule({self.collective}/{self.algorithm}, p={self.p}, steps={self.nsteps}, "
                f"messages={self.nmessages}, slots={self.nslots}, unit_blocks={self.unit_blocks})")
