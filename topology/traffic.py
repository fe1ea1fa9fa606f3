"""Job traffic patterns turned into bytes between hosts.

A `Traffic` is what a job sends during one *round* of its communication pattern: either explicit
flows (``src[k] -> dst[k]``, ``nbytes[k]`` bytes; host ids, i.e. node ids of the machine) or a
uniform all-to-all (``pair_bytes`` bytes for every ordered pair of distinct hosts of the job), or
both. The all-to-all is kept implicit so that routing can aggregate it analytically per switch
instead of materialising ``n^2`` flows.

Ranks are the job's hosts in increasing node id order (rank ``r`` = ``hosts[r]``), as a
block-placement MPI launcher would number them.

Patterns (``comm_kind`` values of the workload):

* ``alltoall``: every rank sends ``nbytes / (n-1)`` to every other rank (``nbytes`` per rank);
* ``ring``: nearest-neighbour ring, rank ``r`` sends ``nbytes`` to rank ``r+1 mod n`` (for ``n > 2``
  also to ``r-1``: a 1-D halo exchange with both neighbours, ``nbytes/2`` each way);
* ``allreduce``: a bandwidth-optimal allreduce of a ``nbytes`` vector: the ring algorithm
  (Patarasuk & Yuan 2009), rank ``r`` sends ``2 (n-1)/n * nbytes`` to rank ``r+1``; or
  ``algorithm="rabenseifner"`` (recursive halving/doubling, Thakur et al. 2005) with the usual
  fold of the ranks above the largest power of two;
* ``none``: no traffic;
* `from_schedule`: any list of ``(src_rank, dst_rank, bytes)`` steps, e.g. a collective schedule
  from ``topology.collectives``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

COMM_KINDS = ("allreduce", "alltoall", "ring", "none")


@dataclass
class Traffic:
    """Bytes a job sends in one round: explicit flows plus an optional uniform all-to-all.

    ``hosts``: sorted unique int64 node ids of the job; ``src``, ``dst``: int64 node ids;
    ``nbytes``: float64 bytes per flow; ``pair_bytes``: bytes per ordered pair of distinct hosts.
    """

    hosts: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    pair_bytes: float = 0.0

    @property
    def n(self) -> int:
        return len(self.hosts)

    def sent_per_host(self) -> np.ndarray:
        """Bytes each host (in ``hosts`` order) sends to other hosts in one round."""
        out = np.full(self.n, self.pair_bytes * max(self.n - 1, 0))
        if len(self.src):
            m = self.src != self.dst
            out += np.bincount(np.searchsorted(self.hosts, self.src[m]), self.nbytes[m], minlength=self.n)
        return out

    def received_per_host(self) -> np.ndarray:
        """Bytes each host (in ``hosts`` order) receives from other hosts in one round."""
        out = np.full(self.n, self.pair_bytes * max(self.n - 1, 0))
        if len(self.src):
            m = self.src != self.dst
            out += np.bincount(np.searchsorted(self.hosts, self.dst[m]), self.nbytes[m], minlength=self.n)
        return out

    def total_bytes(self) -> float:
        """All bytes sent between distinct hosts in one round."""
        n = self.n
        m = self.src != self.dst
        return float(self.pair_bytes * n * (n - 1) + self.nbytes[m].sum())

    def scaled(self, factor: float) -> "Traffic":
        """The same pattern with every byte count multiplied by ``factor``."""
        return Traffic(self.hosts, self.src, self.dst, self.nbytes * factor, self.pair_bytes * factor)


def _hosts(hosts) -> np.ndarray:
    h = np.asarray(hosts, dtype=np.int64).ravel()
    if len(h) > 1 and not (h[1:] > h[:-1]).all():   # placers return sorted ids: skip the sort
        u = np.unique(h)
        if len(u) != len(h):
            raise ValueError("traffic: a job's host list has duplicate node ids")
        return u
    return h.copy()


def _empty(h: np.ndarray) -> Traffic:
    z = np.zeros(0, dtype=np.int64)
    return Traffic(h, z, z, np.zeros(0))


def alltoall(hosts, nbytes: float) -> Traffic:
    """Every rank sends ``nbytes`` in total, split evenly over the other ranks."""
    h = _hosts(hosts)
    t = _empty(h)
    if len(h) > 1:
        t.pair_bytes = float(nbytes) / (len(h) - 1)
    return t


def ring(hosts, nbytes: float) -> Traffic:
    """Nearest-neighbour exchange on a ring of the ranks: ``nbytes`` sent per rank per round,
    half to each neighbour (all to the single neighbour when ``n = 2``)."""
    h = _hosts(hosts)
    n = len(h)
    if n < 2:
        return _empty(h)
    if n == 2:
        return Traffic(h, h.copy(), h[::-1].copy(), np.full(2, float(nbytes)))
    src = np.concatenate([h, h])
    dst = np.concatenate([h[1:], h[:1], h[-1:], h[:-1]])   # rank r + 1, then rank r - 1 (mod n)
    return Traffic(h, src, dst, np.full(2 * n, float(nbytes) / 2))


def allreduce(hosts, nbytes: float, algorithm: str = "ring") -> Traffic:
    """An allreduce of a ``nbytes`` vector on the job's ranks (see the module docstring)."""
    h = _hosts(hosts)
    n = len(h)
    if n < 2:
        return _empty(h)
    if algorithm == "ring":
        return Traffic(h, h.copy(), np.concatenate([h[1:], h[:1]]), np.full(n, 2.0 * (n - 1) / n * float(nbytes)))
    if algorithm != "rabenseifner":
        raise ValueError(f"unknown allreduce algorithm {algorithm!r}; choose 'ring' or 'rabenseifner'")
    p2 = 1 << (n.bit_length() - 1)
    src, dst, b = [], [], []
    r = np.arange(n)
    extra = r[p2:]
    if len(extra):  # fold: the extra ranks send their vector to rank r - p2 and get the result back
        src += [extra, extra - p2]
        dst += [extra - p2, extra]
        b += [np.full(len(extra), float(nbytes))] * 2
    core = r[:p2]
    steps = p2.bit_length() - 1
    for s in range(steps):  # reduce-scatter by recursive halving, then allgather by doubling
        partner = core ^ (1 << s)
        size = float(nbytes) / (2 ** (s + 1))
        src += [core, core]
        dst += [partner, partner]
        b += [np.full(p2, size), np.full(p2, size)]
    src_r = np.concatenate(src)
    dst_r = np.concatenate(dst)
    return Traffic(h, h[src_r], h[dst_r], np.concatenate(b))


def from_schedule(hosts, steps) -> Traffic:
    """Traffic from a schedule: an iterable of ``(src_rank, dst_rank, bytes)`` array triples
    (ranks index the sorted ``hosts``). Raises ValueError for a rank out of range."""
    h = _hosts(hosts)
    src, dst, b = [], [], []
    for s, d, nb in steps:
        s = np.atleast_1d(np.asarray(s, dtype=np.int64))
        d = np.atleast_1d(np.asarray(d, dtype=np.int64))
        nb = np.broadcast_to(np.asarray(nb, dtype=np.float64), s.shape)
        if len(s) and (s.min() < 0 or d.min() < 0 or s.max() >= len(h) or d.max() >= len(h)):
            raise ValueError(f"traffic schedule: rank out of range 0..{len(h) - 1}")
        src.append(s)
        dst.append(d)
        b.append(nb)
    if not src:
        return _empty(h)
    s = np.concatenate(src)
    d = np.concatenate(dst)
    return Traffic(h, h[s], h[d], np.concatenate(b).astype(np.float64))


def pattern(kind: str, hosts, nbytes: float) -> Traffic:
    """Dispatch on ``kind`` in `COMM_KINDS` (``nbytes`` per rank, or the allreduce vector size)."""
    if kind == "alltoall":
        return alltoall(hosts, nbytes)
    if kind == "ring":
        return ring(hosts, nbytes)
    if kind == "allreduce":
        return allreduce(hosts, nbytes)
    if kind == "none":
        return _empty(_hosts(hosts))
    raise ValueError(f"unknown communication kind {kind!r}; choose one of {', '.join(COMM_KINDS)}")
