"""Schedule generators: Bine trees/butterflies and the classic algorithms (pure Python + numpy).

Every generator returns a :class:`~topology.collectives.schedule.Schedule`; use
:func:`build_schedule` (``collective``, ``algorithm``, ``p``, ``root``) or look at :data:`ALGORITHMS`.

Conventions (see also :mod:`topology.collectives.bine`):

* Steps are numbered from 0.  "Doubling" = the partner distance grows with the step, "halving" =
  it shrinks.  Bine doubling step k pairs r with pi(r, k); classic doubling step k pairs r with
  r XOR 2^k.
* Rooted collectives work on the virtual rank v = (r - root) mod p.
* Non-powers of two: recursive doubling, Rabenseifner and both Bine allreduces fold the extra ranks
  (MPICH style: the first 2*(p - p') ranks pair up, even rank sends its whole vector to rank+1 and
  sits out; virtual rank v maps to 2v+1 if v < p - p', else v + p - p'; the result is sent back at
  the end).  Binomial trees, ring and Bruck serve any p.  Bine trees, the vector-halving
  butterflies (reduce-scatter/allgather) and Bine alltoall need a power of two and raise a
  :class:`ScheduleError` otherwise.
* Bine vector-halving butterflies: the reduce-scatter runs pi(., 0..s-1) (distance doubling, the
  variant of HLC-Lab/pico ``allreduce_bine_bdw_static``), the allgather runs pi(., s-1..0).  The other
  orders do not form a block-halving butterfly with plain pi (groups G_j are not closed), so they are
  not offered.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Callable

import numpy as np

from .bine import bine_partners, block_numbering, is_power_of_two, log2_exact, xor_partners
from .schedule import COLLECTIVES, Schedule, ScheduleError, Step

__all__ = ["ALGORITHMS", "ALIASES", "build_schedule", "algorithms_for", "supports", "PAIRS"]


# --------------------------------------------------------------------------------------- helpers
def _identity_layout(n: int) -> Callable[[int], np.ndarray]:
    arr = np.arange(n, dtype=np.int64)
    return lambda r: arr


def _fold_map(p: int) -> tuple[int, int, np.ndarray]:
    """(p', extra, virtual -> real rank array) for the MPICH fold of p ranks onto p' = 2^floor(log2 p)."""
    p2 = 1 << (p.bit_length() - 1)
    extra = p - p2
    v = np.arange(p2, dtype=np.int64)
    real = np.where(v < extra, 2 * v + 1, v + extra)
    return p2, extra, real


def _fold_steps(p: int, nblocks: int) -> tuple[list[Step], list[Step], int, np.ndarray]:
    """Fold/unfold steps (whole vector of ``nblocks``) and the virtual->real map."""
    p2, extra, real = _fold_map(p)
    pre, post = [], []
    if extra:
        ev = np.arange(0, 2 * extra, 2, dtype=np.int64)
        pre.append(Step(ev, ev + 1, nblocks, True, start=0, phase="fold"))
        post.append(Step(ev + 1, ev, nblocks, False, start=0, phase="unfold"))
    return pre, post, p2, real


def _need_pof2(p: int, collective: str, algorithm: str) -> int:
    if not is_power_of_two(p):
        raise ScheduleError(
            f"{collective}/{algorithm} needs a power-of-two number of ranks, got p={p}; "
            f"algorithms serving any p for {collective}: {', '.join(_any_p_algorithms(collective)) or 'none'}")
    return log2_exact(p)


def _check_p(p: int) -> None:
    if not isinstance(p, (int, np.integer)) or p < 2:
        raise ScheduleError(f"number of ranks p must be an integer >= 2, got {p!r}")


# --------------------------------------------------------------------------------------- trees
def _binomial_tree(p: int, halving: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """Classic binomial tree on virtual ranks 0..p-1 (root 0), any p: list of (parents, children)."""
    s = max(1, (p - 1).bit_length())
    v = np.arange(p, dtype=np.int64)
    steps = []
    masks = [1 << (s - 1 - j) for j in range(s)] if halving else [1 << k for k in range(s)]
    for m in masks:
        if halving:
            par = v[(v % (2 * m) == 0) & (v + m < p)]     # MPICH bcast: v receives from v - lowbit(v)
        else:
            par = v[(v < m) & (v + m < p)]                 # holders {v < m} send to v + m
        if par.size:
            steps.append((par, par + m))
    return steps


def _butterfly_tree(partners: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Tree grown along a butterfly from virtual root 0: at step j every holder sends to partners[j]."""
    s, p = partners.shape
    has = np.zeros(p, dtype=bool)
    has[0] = True
    steps = []
    for j in range(s):
        par = np.flatnonzero(has)
        ch = partners[j][par]
        if has[ch].any():  # cannot happen for a valid butterfly; guard the invariant
            raise ScheduleError("internal error: tree step reaches a rank twice")
        has[ch] = True
        steps.append((par.astype(np.int64), ch.astype(np.int64)))
    return steps


def _preorder(p: int, tree: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """DFS preorder index and subtree size of every virtual rank (children visited last-sent first).

    Every subtree is then the contiguous slot range [pre[v], pre[v] + size[v]).
    """
    children: list[list[int]] = [[] for _ in range(p)]
    for par, ch in tree:
        for a, b in zip(par.tolist(), ch.tolist()):
            children[a].append(b)
    pre = np.empty(p, dtype=np.int64)
    size = np.ones(p, dtype=np.int64)
    order: list[int] = []
    stack = [0]
    while stack:
        v = stack.pop()
        pre[v] = len(order)
        order.append(v)
        stack.extend(children[v])          # last-sent child popped first
    for v in reversed(order):
        for c in children[v]:
            size[v] += size[c]
    if len(order) != p:
        raise ScheduleError("internal error: tree does not span all ranks")
    return pre, size


def _tree_schedule(collective: str, algorithm: str, p: int, root: int,
                   tree: list[tuple[np.ndarray, np.ndarray]]) -> Schedule:
    if not 0 <= root < p:
        raise ScheduleError(f"root must be in 0..{p - 1}, got {root}")
    to_real = lambda v: (v + root) % p                              # noqa: E731
    to_virt = lambda r: (r - root) % p                              # noqa: E731
    steps: list[Step] = []
    if collective in ("bcast", "reduce"):
        for par, ch in tree:
            steps.append(Step(to_real(par), to_real(ch), 1, False, start=0, phase="tree"))
        if collective == "reduce":
            steps = [Step(st.dst, st.src, 1, True, start=0, phase="tree") for st in reversed(steps)]
        lay = _identity_layout(1)
        if collective == "bcast":
            init = lambda r: np.array([0 if r == root else -1], dtype=np.int64)   # noqa: E731
            final = lay
        else:
            init = lay
            final = lambda r: np.array([0 if r == root else -1], dtype=np.int64)  # noqa: E731
        return Schedule(collective, algorithm, p, 1, 1, steps, init, final, 1, 1, root=root)
    pre, size = _preorder(p, tree)
    order = np.empty(p, dtype=np.int64)
    order[pre] = np.arange(p)                       # slot j holds the block of virtual rank order[j]
    real_of_slot = to_real(order)
    for par, ch in tree:
        steps.append(Step(to_real(par), to_real(ch), size[ch], False, start=pre[ch], phase="tree"))
    if collective == "gather":
        steps = [Step(st.dst, st.src, st.count, False, start=st.start, phase="tree") for st in reversed(steps)]

    def one_slot(r: int) -> np.ndarray:
        out = np.full(p, -1, dtype=np.int64)
        out[pre[to_virt(r)]] = 0
        return out

    def all_slots(r: int) -> np.ndarray:
        return real_of_slot.copy() if r == root else np.full(p, -1, dtype=np.int64)

    init, final = (all_slots, one_slot) if collective == "scatter" else (one_slot, all_slots)
    n_in, n_out = (p, 1) if collective == "scatter" else (1, p)
    return Schedule(collective, algorithm, p, p, p, steps, init, final, n_in, n_out, root=root,
                    meta={"slot_rank": real_of_slot})


def _make_tree(collective: str, kind: str, halving: bool):
    def gen(p: int, root: int = 0) -> Schedule:
        _check_p(p)
        name = f"{kind}_{'halving' if halving else 'doubling'}"
        if kind == "binomial":
            tree = _binomial_tree(p, halving)
        else:
            _need_pof2(p, collective, name)
            tree = _butterfly_tree(bine_partners(p, halving=halving))
        return _tree_schedule(collective, name, p, root, tree)
    return gen


# --------------------------------------------------------------------------------------- butterflies
def _full_butterfly(partners_virtual: np.ndarray, real: np.ndarray) -> list[Step]:
    """Latency-optimal butterfly: exchange and reduce the whole (1-block) vector at every step."""
    s, p2 = partners_virtual.shape
    return [Step(real, real[partners_virtual[j]], 1, True, start=0, phase="butterfly") for j in range(s)]


def _rs_steps(P: np.ndarray, nu: np.ndarray, real: np.ndarray) -> list[Step]:
    """Reduce-scatter by recursive vector halving over partner table P (block numbering nu)."""
    s, p2 = P.shape
    out = []
    for j in range(s):
        w = 1 << (s - 1 - j)
        dst_v = P[j]
        start = (nu[dst_v] >> (s - 1 - j)) << (s - 1 - j)
        out.append(Step(real, real[dst_v], w, True, start=start, phase="reduce-scatter"))
    return out


def _ag_steps(P: np.ndarray, nu: np.ndarray, real: np.ndarray) -> list[Step]:
    """Allgather by recursive vector doubling: the reduce-scatter over P run backwards."""
    s, p2 = P.shape
    v = np.arange(p2, dtype=np.int64)
    out = []
    for j in range(s - 1, -1, -1):
        w = 1 << (s - 1 - j)
        start = (nu[v] >> (s - 1 - j)) << (s - 1 - j)
        out.append(Step(real, real[P[j]], w, False, start=start, phase="allgather"))
    return out


def _allreduce_latency(kind: str, halving: bool, name: str):
    def gen(p: int, root: int = 0) -> Schedule:
        _check_p(p)
        pre, post, p2, real = _fold_steps(p, 1)
        P = ((bine_partners if kind == "bine" else xor_partners)(p2, halving=halving) if p2 > 1
             else np.zeros((0, 1), np.int64))
        steps = pre + _full_butterfly(P, real) + post
        lay = _identity_layout(1)
        return Schedule("allreduce", name, p, 1, 1, steps, lay, lay, 1, 1, meta={"folded": p - p2})
    return gen


def _allreduce_bandwidth(kind: str, name: str):
    def gen(p: int, root: int = 0) -> Schedule:
        _check_p(p)
        p2 = 1 << (p.bit_length() - 1)
        pre, post, p2, real = _fold_steps(p, p2)
        if p2 == 1:
            steps = pre + post
            nu = np.zeros(1, np.int64)
        else:
            P = (bine_partners if kind == "bine" else xor_partners)(p2, halving=False)
            nu = block_numbering(P)
            steps = pre + _rs_steps(P, nu, real) + _ag_steps(P, nu, real) + post
        lay = _identity_layout(p2)
        return Schedule("allreduce", name, p, p2, p2, steps, lay, lay, p2, p2,
                        meta={"folded": p - p2, "block_numbering": nu})
    return gen


def _rs_partners(kind: str, p: int, halving: bool, collective: str, name: str) -> np.ndarray:
    if kind == "bine":
        if halving:
            raise ScheduleError(
                f"{collective}/{name}: a Bine vector-halving butterfly exists only with pi(., 0..s-1) "
                f"in the reduce-scatter direction; use {collective}/bine (= "
                f"{'bine_doubling' if collective == 'reduce_scatter' else 'bine_halving'})")
        return bine_partners(p, halving=False)
    return xor_partners(p, halving=halving)


def _own_block(p: int, nu: np.ndarray):
    """Layout of rank r holding one block, its own ``nu[r]``, in slot ``nu[r]`` (-1 elsewhere)."""
    def layout(r: int) -> np.ndarray:
        out = np.full(p, -1, dtype=np.int64)
        out[nu[r]] = 0
        return out
    return layout


def _reduce_scatter(kind: str, halving: bool, name: str):
    def gen(p: int, root: int = 0) -> Schedule:
        _check_p(p)
        _need_pof2(p, "reduce_scatter", name)
        P = _rs_partners(kind, p, halving, "reduce_scatter", name)
        nu = block_numbering(P)
        inv = np.argsort(nu)
        steps = _rs_steps(P, nu, np.arange(p, dtype=np.int64))
        return Schedule("reduce_scatter", name, p, p, p, steps, lambda r: inv, _own_block(p, nu), p, 1,
                        meta={"block_numbering": nu})
    return gen


def _allgather_butterfly(kind: str, halving: bool, name: str):
    def gen(p: int, root: int = 0) -> Schedule:
        _check_p(p)
        _need_pof2(p, "allgather", name)
        # the allgather running distance-halving is the reverse of a distance-doubling reduce-scatter
        P = _rs_partners(kind, p, not halving, "allgather", name)
        nu = block_numbering(P)
        inv = np.argsort(nu)
        steps = _ag_steps(P, nu, np.arange(p, dtype=np.int64))
        return Schedule("allgather", name, p, p, p, steps, _own_block(p, nu), lambda r: inv, 1, p,
                        meta={"block_numbering": nu})
    return gen


# --------------------------------------------------------------------------------------- ring
def _ring_rs_steps(p: int) -> list[Step]:
    r = np.arange(p, dtype=np.int64)
    nxt = (r + 1) % p
    return [Step(r, nxt, 1, True, start=(r - i - 1) % p, phase="reduce-scatter") for i in range(p - 1)]


def _ring_ag_steps(p: int, offset: int = 0) -> list[Step]:
    r = np.arange(p, dtype=np.int64)
    nxt = (r + 1) % p
    return [Step(r, nxt, 1, False, start=(r - i + offset) % p, phase="allgather") for i in range(p - 1)]


def _ring(collective: str):
    def gen(p: int, root: int = 0) -> Schedule:
        _check_p(p)
        ident = _identity_layout(p)
        if collective == "allgather":
            def init(r: int) -> np.ndarray:
                out = np.full(p, -1, dtype=np.int64)
                out[r] = 0
                return out
            return Schedule("allgather", "ring", p, p, p, _ring_ag_steps(p), init, ident, 1, p)
        if collective == "reduce_scatter":
            def final(r: int) -> np.ndarray:
                out = np.full(p, -1, dtype=np.int64)
                out[r] = 0
                return out
            return Schedule("reduce_scatter", "ring", p, p, p, _ring_rs_steps(p), ident, final, p, 1)
        steps = _ring_rs_steps(p) + _ring_ag_steps(p)
        return Schedule("allreduce", "ring", p, p, p, steps, ident, ident, p, p)
    return gen


# --------------------------------------------------------------------------------------- Bruck, pairwise
def _bruck_allgather(p: int, root: int = 0) -> Schedule:
    _check_p(p)
    r = np.arange(p, dtype=np.int64)
    steps = []
    k = 1
    while k < p:
        cnt = min(k, p - k)
        steps.append(Step(r, (r - k) % p, cnt, False, start=0, rstart=k, phase="bruck"))
        k <<= 1

    def init(rank: int) -> np.ndarray:
        out = np.full(p, -1, dtype=np.int64)
        out[0] = 0
        return out
    return Schedule("allgather", "bruck", p, p, p, steps, init, lambda rank: (rank + r) % p, 1, p)


def _bruck_alltoall(p: int, root: int = 0) -> Schedule:
    _check_p(p)
    r = np.arange(p, dtype=np.int64)
    steps = []
    k = 1
    while k < p:
        sl = np.flatnonzero(r & k).astype(np.int64)
        steps.append(Step(r, (r + k) % p, sl.size, False, selector=(lambda i, sl=sl: (sl, sl)), phase="bruck"))
        k <<= 1
    return Schedule("alltoall", "bruck", p, p, p, steps, lambda rank: (rank + r) % p,
                    lambda rank: (rank - r) % p, p, p)


def _pairwise_alltoall(p: int, root: int = 0) -> Schedule:
    _check_p(p)
    r = np.arange(p, dtype=np.int64)
    steps = [Step(r, (r + i) % p, 1, False, start=(r + i) % p, rstart=p + r, phase="pairwise") for i in range(1, p)]

    def init(rank: int) -> np.ndarray:
        out = np.concatenate([r, np.full(p, -1, dtype=np.int64)])
        out[p + rank] = rank                        # own block: local copy, no message
        return out

    def final(rank: int) -> np.ndarray:
        return np.concatenate([np.full(p, -1, dtype=np.int64), r])
    return Schedule("alltoall", "pairwise", p, 2 * p, p, steps, init, final, p, p)


def _bine_alltoall(p: int, root: int = 0) -> Schedule:
    """Bine alltoall (HLC-Lab/pico ``alltoall_bine``): distance-doubling Bine butterfly, p/2 blocks a step.

    At step k rank r forwards every block it holds whose destination lies in G_{k+1}(pi(r, k)).
    Slots (executors only): item (origin o, destination d) lives in slot o*p + nu[d], so the
    executors use p*p slots per rank; cost and traffic never touch them.
    """
    _check_p(p)
    s = _need_pof2(p, "alltoall", "bine")
    P = bine_partners(p)
    nu = block_numbering(P)
    r = np.arange(p, dtype=np.int64)

    @lru_cache(maxsize=None)
    def origins(k: int) -> np.ndarray:              # bool (p, p): origins[r, o] = o's items are at r before step k
        C = np.eye(p, dtype=bool)
        for j in range(k):
            C = C | C[P[j]]
        return C

    steps = []
    for k in range(s):
        w = 1 << (s - 1 - k)

        def sel(i: int, k=k, w=w) -> tuple[np.ndarray, np.ndarray]:
            q = P[k][i]
            d0 = (nu[q] >> (s - 1 - k)) << (s - 1 - k)
            o = np.flatnonzero(origins(k)[i])
            sl = (o[:, None] * p + d0 + np.arange(w)[None, :]).ravel()
            return sl, sl
        steps.append(Step(r, P[k], p // 2, False, selector=sel, phase="bine-butterfly"))

    def init(rank: int) -> np.ndarray:
        out = np.full(p * p, -1, dtype=np.int64)
        out[rank * p + nu] = r
        return out

    def final(rank: int) -> np.ndarray:
        out = np.full(p * p, -1, dtype=np.int64)
        out[r * p + nu[rank]] = r
        return out
    return Schedule("alltoall", "bine", p, p * p, p, steps, init, final, p, p, meta={"block_numbering": nu})


# --------------------------------------------------------------------------------------- registry
ALGORITHMS: dict[str, dict[str, Callable[..., Schedule]]] = {
    "bcast": {
        "binomial_halving": _make_tree("bcast", "binomial", True),
        "binomial_doubling": _make_tree("bcast", "binomial", False),
        "bine_halving": _make_tree("bcast", "bine", True),
        "bine_doubling": _make_tree("bcast", "bine", False),
    },
    "reduce": {
        "binomial_halving": _make_tree("reduce", "binomial", True),
        "binomial_doubling": _make_tree("reduce", "binomial", False),
        "bine_halving": _make_tree("reduce", "bine", True),
        "bine_doubling": _make_tree("reduce", "bine", False),
    },
    "gather": {
        "binomial_halving": _make_tree("gather", "binomial", True),
        "binomial_doubling": _make_tree("gather", "binomial", False),
        "bine_halving": _make_tree("gather", "bine", True),
        "bine_doubling": _make_tree("gather", "bine", False),
    },
    "scatter": {
        "binomial_halving": _make_tree("scatter", "binomial", True),
        "binomial_doubling": _make_tree("scatter", "binomial", False),
        "bine_halving": _make_tree("scatter", "bine", True),
        "bine_doubling": _make_tree("scatter", "bine", False),
    },
    "allgather": {
        "ring": _ring("allgather"),
        "bruck": _bruck_allgather,
        "distance_doubling": _allgather_butterfly("xor", False, "distance_doubling"),
        "distance_halving": _allgather_butterfly("xor", True, "distance_halving"),
        "bine_halving": _allgather_butterfly("bine", True, "bine_halving"),
        "bine_doubling": _allgather_butterfly("bine", False, "bine_doubling"),
    },
    "reduce_scatter": {
        "ring": _ring("reduce_scatter"),
        "distance_halving": _reduce_scatter("xor", True, "distance_halving"),
        "distance_doubling": _reduce_scatter("xor", False, "distance_doubling"),
        "bine_doubling": _reduce_scatter("bine", False, "bine_doubling"),
        "bine_halving": _reduce_scatter("bine", True, "bine_halving"),
    },
    "allreduce": {
        "recursive_doubling": _allreduce_latency("xor", False, "recursive_doubling"),
        "rabenseifner": _allreduce_bandwidth("xor", "rabenseifner"),
        "ring": _ring("allreduce"),
        "bine_latency": _allreduce_latency("bine", False, "bine_latency"),
        "bine_latency_halving": _allreduce_latency("bine", True, "bine_latency_halving"),
        "bine_bandwidth": _allreduce_bandwidth("bine", "bine_bandwidth"),
    },
    "alltoall": {
        "pairwise": _pairwise_alltoall,
        "bruck": _bruck_alltoall,
        "bine": _bine_alltoall,
    },
}

#: accepted synonyms -> canonical algorithm names, per collective
ALIASES: dict[str, dict[str, str]] = {
    "bcast": {"binomial": "binomial_halving", "bine": "bine_halving"},
    "reduce": {"binomial": "binomial_halving", "bine": "bine_halving"},
    "gather": {"binomial": "binomial_halving", "bine": "bine_halving"},
    "scatter": {"binomial": "binomial_halving", "bine": "bine_halving"},
    "allgather": {"recursive_doubling": "distance_doubling", "bine": "bine_halving"},
    "reduce_scatter": {"recursive_halving": "distance_halving", "bine": "bine_doubling"},
    "allreduce": {"bine": "bine_bandwidth"},
    "alltoall": {},
}

#: Bine algorithm -> its classic counterpart with the same structure, per collective (what-if pairs)
PAIRS: dict[str, list[tuple[str, str]]] = {
    "bcast": [("bine_halving", "binomial_halving"), ("bine_doubling", "binomial_doubling")],
    "reduce": [("bine_halving", "binomial_halving"), ("bine_doubling", "binomial_doubling")],
    "gather": [("bine_halving", "binomial_halving"), ("bine_doubling", "binomial_doubling")],
    "scatter": [("bine_halving", "binomial_halving"), ("bine_doubling", "binomial_doubling")],
    "allgather": [("bine_halving", "distance_halving")],
    "reduce_scatter": [("bine_doubling", "distance_doubling")],
    "allreduce": [("bine_latency", "recursive_doubling"), ("bine_bandwidth", "rabenseifner")],
    "alltoall": [("bine", "bruck")],
}


def _any_p_algorithms(collective: str) -> list[str]:
    return [a for a in ALGORITHMS.get(collective, {}) if _serves_any_p(collective, a)]


def _serves_any_p(collective: str, algorithm: str) -> bool:
    if algorithm.startswith("binomial") or algorithm in ("ring", "bruck", "pairwise", "recursive_doubling",
                                                          "rabenseifner"):
        return True
    return collective == "allreduce" and algorithm.startswith("bine")


def algorithms_for(collective: str) -> list[str]:
    """Canonical algorithm names available for ``collective``."""
    if collective not in ALGORITHMS:
        raise ScheduleError(f"unknown collective {collective!r}; supported: {', '.join(COLLECTIVES)}")
    return list(ALGORITHMS[collective])


def canonical(collective: str, algorithm: str) -> str:
    """Resolve aliases; ScheduleError listing the supported names for unknown ones."""
    algs = algorithms_for(collective)
    name = ALIASES.get(collective, {}).get(algorithm, algorithm)
    if name not in ALGORITHMS[collective]:
        aliases = ALIASES.get(collective, {})
        extra = f" (aliases: {', '.join(f'{k}->{v}' for k, v in aliases.items())})" if aliases else ""
        raise ScheduleError(f"unknown algorithm {algorithm!r} for {collective}; supported: {', '.join(algs)}{extra}")
    return name


def unsupported_reason(collective: str, algorithm: str, p: int) -> str | None:
    """Why ``build_schedule(collective, algorithm, p)`` cannot serve ``p`` ranks, or None if it can."""
    name = canonical(collective, algorithm)
    if p < 2:
        return "needs at least 2 ranks"
    if name == "bine_halving" and collective == "reduce_scatter":
        return "not defined for reduce_scatter (use bine_doubling)"
    if name == "bine_doubling" and collective == "allgather":
        return "not defined for allgather (use bine_halving)"
    if not _serves_any_p(collective, name) and not is_power_of_two(p):
        return f"needs a power-of-two number of ranks (p={p})"
    return None


def supports(collective: str, algorithm: str, p: int) -> bool:
    """True if ``build_schedule(collective, algorithm, p)`` would succeed."""
    return unsupported_reason(collective, algorithm, p) is None


def build_schedule(collective: str, algorithm: str, p: int, root: int = 0) -> Schedule:
    """Schedule of ``collective`` by ``algorithm`` for ``p`` ranks (``root`` for rooted collectives).

    Raises :class:`ScheduleError` (a ValueError) naming the supported collectives/algorithms or
    the reason a given ``p`` cannot be served.
    """
    name = canonical(collective, algorithm)
    return ALGORITHMS[collective][name](int(p), root=int(root))
