"""Lublin & Feitelson synthetic workload model, with Tsafrir's user runtime estimates.

The model
---------
U. Lublin and D. G. Feitelson, "The workload on parallel supercomputers: modeling the
characteristics of rigid jobs", J. Parallel Distrib. Comput. 63(11):1105-1122, 2003.
The reference implementation is Lublin's C program ``m_lublin99.c`` (published with the
Parallel Workloads Archive, http://www.cs.huji.ac.il/labs/parallel/workload/m_lublin99/).
Every constant below was read from that file (the copy vendored in the public repository
``renatolfc/lublinworkload``, file ``lublinworkload/m_lublin99.c``, section "MODEL
PARAMETERS"; a second, independent copy we checked has the same numbers) and is cited by its
``#define`` name. The generator reproduces the program's logic, not its random stream:
``drand48`` and Jain's gamma sampler are replaced by ``numpy.random.Generator(PCG64(seed))``
draws of the same distributions.

* **Size** (``calc_number_of_nodes``): serial with probability ``SERIAL_PROB``; otherwise
  ``par`` is drawn from a two-stage uniform in log2 space (``[ULOW, UMED]`` with probability
  ``UPROB``, else ``[UMED, UHI]``); with probability ``POW2_PROB`` (of all jobs) ``par`` is
  rounded to an integer first; size = round(2**par).
* **Runtime** (``time_from_nodes``): log(runtime) is hyper-gamma: gamma(A1, B1) with
  probability p = PA*size + PB (clipped to [0, 1]), else gamma(A2, B2); values of
  log(runtime) above ``TOO_MUCH_TIME`` = 12 are redrawn; runtime = floor(exp(.)) >= 1 s.
* **Arrivals** (``arrive_init`` / ``calc_next_arrive``): log(inter-arrival) at rush hour is
  gamma(AARR*ARAR, BARR), values above ``TOO_MUCH_ARRIVE_TIME`` = 13 redrawn. The day has 48
  half-hour buckets; bucket weights are differences of the gamma(ANUM, BNUM) CDF at
  i +- 0.5 for i = CYCLIC_DAY_START..CYCLIC_DAY_START+47, stored cyclically, normalised to
  mean 1. An inter-arrival of x seconds buys x/1800 "points"; crossing a bucket costs its
  weight. So arrival times are W^-1(cumsum(x)/1800), where W is the piecewise-linear
  cumulative weight of elapsed time, starting at hour ``START`` = 0. We compute exactly that
  inverse with ``searchsorted`` (vectorised), which is the C loop without its per-job
  truncation to whole seconds (we floor once, at the end).
* **Job classes**: ``interactive=False`` uses the model's whole-sample ("typeless")
  parameters, as ``m_lublin99.c`` does with ``INCLUDE_JOBS_TYPE`` 0.
  ``interactive=True`` runs the batch and interactive arrival streams side by side and
  interleaves them by arrival time, each class with its own parameters, as the program
  does with ``INCLUDE_JOBS_TYPE`` 1. The class goes in ``queue``: 0 interactive, 1 batch,
  as in the program's SWF output. It is -1 in the typeless mode.

Machine size (our scaling rule)
-------------------------------
The published parameters are for a 128-node machine (``UHI`` = 7). Following the program's
own advice ("UHi is the log2 of ... system's size", "UMed = UHi - 2.5"), we set
``UHI = log2(nodes) - d_hi`` and ``UMED = UHI - d_med``. The offsets are those of the
128-node table: typeless d_hi = 0, d_med = 2.5; batch 0, 2; interactive 1.5, 2.5. (The
interactive class's biggest job is 2**5.5 = 45 nodes on a 128-node machine.) ``ULOW`` is
kept, but is capped at ``UHI``; ``UMED`` is clipped into [ULOW, UHI]. A power-of-two job
never rounds above the largest power of two <= nodes. ``PA`` stays per node, as fitted,
and is not rescaled. This is also how ``lublin_256.swf`` was produced: its sizes show
UHI = 8, UMED = 5.5. On machines much larger than 128 nodes, p = 0 for large jobs: they
all draw from the long-runtime gamma.

Our additions
-------------
* ``load``: the *offered load* is sum(procs*runtime) / (nodes * (max(submit) - min(submit))).
  We scale every rush-hour inter-arrival by one factor c, found by bisection, so the daily
  cycle keeps its 24 h period. A final linear stretch of the time axis (close to 1, and
  reported in the notes) absorbs the discreteness of the two-class interleaving. The target
  is then met up to the whole-second flooring of submit times. If that flooring alone would
  miss it by more than 1 % (a few jobs with a tiny span), we raise an error.
* Submit times are shifted so that the first job arrives at 0, and floored to whole seconds,
  like SWF logs. The offset of the first arrival from the model's midnight start is recorded
  in ``header["FirstArrivalSinceStart"]``.
* ``requested_time``: the Lublin model has no estimates. We generate them with the modal
  model of D. Tsafrir, Y. Etsion and D. G. Feitelson, "Modeling user runtime estimates",
    JSSPP 2005, LNCS 3834, pp. 1-35. We reimplement Tsafrir's reference code ``est_model.cc``
  / ``est_model.hh``, read from a public copy; ``renatolfc/lublinworkload``'s
  ``parallelworkloads/tsafrir05.pyx`` wraps the same files. See `tsafrir_estimates`. The
  maximal estimate is 48 h, the smallest whole-day limit above the model's runtime cap
  exp(12) s = 45.2 h.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hpctwin.twin.errors import RunConfigError
from hpctwin.twin.workload import Workload

__all__ = [
    "lublin_workload",
    "parse_synthetic_spec",
    "tsafrir_estimates",
    "offered_load",
    "LublinClass",
    "TYPELESS",
    "BATCH",
    "INTERACTIVE",
    "SyntheticSpecError",
]

# --------------------------------------------------------------------------- m_lublin99.c
# Program constants (m_lublin99.c, section CONSTANTS).
TOO_MUCH_TIME = 12.0          # "#define TOO_MUCH_TIME 12": cap on log(runtime [s]) (exp(12) s = 45.2 h)
TOO_MUCH_ARRIVE_TIME = 13.0   # "#define TOO_MUCH_ARRIVE_TIME 13": cap on log(inter-arrival [s])
BUCKETS = 48                  # "#define BUCKETS 48": half-hour buckets in a day
SECONDS_IN_BUCKET = 24 * 3600 // BUCKETS   # "SECONDS_IN_DAY/BUCKETS" = 1800 s
CYCLIC_DAY_START = 11         # "#define CYCLIC_DAY_START 11": first bucket index fed to the gamma CDF
START_HOUR = 0                # "#define START 0": the simulation starts at midnight
REFERENCE_UHI = 7.0           # "#define UHI 7 /* SYSTEM SIZE is 2^UHI == 128 */": machine the tables fit


@dataclass(frozen=True)
class LublinClass:
    """One parameter set of the Lublin-Feitelson model (a row of m_lublin99.c's tables).

    Sizes: ``serial_prob``, ``pow2_prob`` (probabilities over all jobs of the class), ``ulow``
    (log2 of the smallest parallel size), ``uhi_offset`` = 7 - UHI of the 128-node table and
    ``umed_offset`` = UHI - UMED of that table (see the module docstring), ``uprob``.
    Runtime: log(runtime [s]) ~ hyper-gamma(a1, b1, a2, b2, p = pa*size + pb); b are scales.
    Arrivals: log(inter-arrival [s]) ~ gamma(aarr*arar, barr); daily cycle gamma(anum, bnum)
    over half-hour buckets.
    """

    name: str
    queue: int
    serial_prob: float
    pow2_prob: float
    ulow: float
    uhi_offset: float
    umed_offset: float
    uprob: float
    a1: float
    b1: float
    a2: float
    b2: float
    pa: float
    pb: float
    aarr: float
    barr: float
    anum: float
    bnum: float
    arar: float

    @property
    def arrival_shape(self) -> float:
        """Shape of the gamma of log(inter-arrival): AARR*ARAR, as in m_lublin99.c's init()."""
        return self.aarr * self.arar


#: Whole-sample parameters (m_lublin99.c: SERIAL_PROB 0.244, POW2_PROB 0.576, ULOW 0.8,
#: UMED 4.5, UHI 7, UPROB 0.86, A1 4.2, B1 0.94, A2 312, B2 0.03, PA -0.0054, PB 0.78,
#: AARR 10.2303, BARR 0.4871, ANUM 8.1737, BNUM 3.9631, ARAR 1.0225).
TYPELESS = LublinClass(
    name="typeless", queue=-1,
    serial_prob=0.244, pow2_prob=0.576, ulow=0.8, uhi_offset=0.0, umed_offset=7 - 4.5, uprob=0.86,
    a1=4.2, b1=0.94, a2=312.0, b2=0.03, pa=-0.0054, pb=0.78,
    aarr=10.2303, barr=0.4871, anum=8.1737, bnum=3.9631, arar=1.0225,
)
#: Batch parameters (m_lublin99.c: SERIAL_PROB_BATCH 0.2927, POW2_PROB_BATCH 0.6686,
#: ULOW_BATCH 1.2, UMED_BATCH 5, UHI_BATCH 7, UPROB_BATCH 0.875, A1_BATCH 6.57, B1_BATCH 0.823,
#: A2_BATCH 639.1, B2_BATCH 0.0156, PA_BATCH -0.003, PB_BATCH 0.6986, AARR_BATCH 6.0415,
#: BARR_BATCH 0.8531, ANUM_BATCH 6.1271, BNUM_BATCH 5.2740, ARAR_BATCH 1.0519).
BATCH = LublinClass(
    name="batch", queue=1,
    serial_prob=0.2927, pow2_prob=0.6686, ulow=1.2, uhi_offset=0.0, umed_offset=7 - 5.0, uprob=0.875,
    a1=6.57, b1=0.823, a2=639.1, b2=0.0156, pa=-0.003, pb=0.6986,
    aarr=6.0415, barr=0.8531, anum=6.1271, bnum=5.2740, arar=1.0519,
)
#: Interactive parameters (m_lublin99.c: SERIAL_PROB_ACTIVE 0.1541, POW2_PROB_ACTIVE 0.625,
#: ULOW_ACTIVE 1, UMED_ACTIVE 3, UHI_ACTIVE 5.5, UPROB_ACTIVE 0.705, A1_ACTIVE 3.8351,
#: B1_ACTIVE 0.6605, A2_ACTIVE 7.073, B2_ACTIVE 0.6856, PA_ACTIVE -0.0118, PB_ACTIVE 0.9156,
#: AARR_ACTIVE 6.5510, BARR_ACTIVE 0.6621, ANUM_ACTIVE 8.9186, BNUM_ACTIVE 3.6680,
#: ARAR_ACTIVE 0.9797).
INTERACTIVE = LublinClass(
    name="interactive", queue=0,
    serial_prob=0.1541, pow2_prob=0.625, ulow=1.0, uhi_offset=7 - 5.5, umed_offset=5.5 - 3.0, uprob=0.705,
    a1=3.8351, b1=0.6605, a2=7.073, b2=0.6856, pa=-0.0118, pb=0.9156,
    aarr=6.5510, barr=0.6621, anum=8.9186, bnum=3.6680, arar=0.9797,
)

#: Maximal user estimate [s] for the Tsafrir model: 48 h, the smallest whole-day limit above
#: the Lublin runtime cap exp(TOO_MUCH_TIME) = 162,755 s (45.2 h).
LUBLIN_MAX_ESTIMATE = 48 * 3600


class SyntheticSpecError(RunConfigError):
    """A bad ``synthetic:...`` specification or generator argument."""


# --------------------------------------------------------------------------- helpers
def _cround(x):
    """C's round(): halves away from zero (Python's round() rounds halves to even)."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def size_bounds(cls: LublinClass, nodes: int) -> tuple[float, float, float]:
    """(ULOW, UMED, UHI) in log2(nodes) space for class ``cls`` on a machine of ``nodes``.

    UHI = log2(nodes) - uhi_offset (>= 0); ULOW = min(ULOW, UHI); UMED = UHI - umed_offset
    clipped into [ULOW, UHI]. See the module docstring for why.
    """
    uhi = max(math.log2(nodes) - cls.uhi_offset, 0.0)
    ulow = min(cls.ulow, uhi)
    umed = min(max(uhi - cls.umed_offset, ulow), uhi)
    return ulow, umed, uhi


def daily_weights(cls: LublinClass) -> np.ndarray:
    """The 48 half-hour bucket weights of ``arrive_init`` (mean 1), bucket 0 = 00:00-00:30.

    weights[(i-1) % 48] = F(i+0.5) - F(i-0.5) for i = CYCLIC_DAY_START..CYCLIC_DAY_START+47,
    F the gamma(ANUM, scale BNUM) CDF (the program's ``gamcdf``, Numerical Recipes'
    incomplete gamma, which is scipy's regularised ``gammainc``).
    """
    from .lublin_tables import DAILY_WEIGHTS  # noqa: PLC0415
    known = DAILY_WEIGHTS.get((cls.anum, cls.bnum))
    if known is not None:                    # the built-in classes: scipy's exact results, without importing it
        return np.array([float.fromhex(h) for h in known])
    from scipy.special import gammainc  # noqa: PLC0415
    i = np.arange(CYCLIC_DAY_START, CYCLIC_DAY_START + BUCKETS, dtype=np.float64)
    w = np.empty(BUCKETS)
    idx = (np.arange(CYCLIC_DAY_START, CYCLIC_DAY_START + BUCKETS) - 1) % BUCKETS
    w[idx] = gammainc(cls.anum, (i + 0.5) / cls.bnum) - gammainc(cls.anum, (i - 0.5) / cls.bnum)
    return w / w.mean()


def _truncated_gamma(rng: np.random.Generator, shape, scale, cap: float, n: int) -> np.ndarray:
    """``n`` gamma(shape, scale) draws, each value above ``cap`` redrawn (rejection, as the C)."""
    shape = np.broadcast_to(np.asarray(shape, dtype=np.float64), (n,))
    scale = np.broadcast_to(np.asarray(scale, dtype=np.float64), (n,))
    g = rng.gamma(shape, scale)
    bad = np.flatnonzero(g > cap)
    while bad.size:
        g[bad] = rng.gamma(shape[bad], scale[bad])
        bad = bad[g[bad] > cap]
    return g


def _arrival_points(rng: np.random.Generator, cls: LublinClass, n: int) -> np.ndarray:
    """Cumulative arrival "points" of ``n`` jobs: cumsum(exp(gamma)) / SECONDS_IN_BUCKET."""
    g = _truncated_gamma(rng, cls.arrival_shape, cls.barr, TOO_MUCH_ARRIVE_TIME, n)
    return np.cumsum(np.exp(g)) / SECONDS_IN_BUCKET


def _points_to_seconds(points: np.ndarray, weights: np.ndarray, start_bucket: int) -> np.ndarray:
    """Invert the cumulative weight function: the arrival time [s since START] of each point total.

    Within bucket b the points accrue at weights[b] per bucket-length, so the time is
    (whole buckets passed + leftover/weights[b]) * 1800 s, exactly ``calc_next_arrive``'s
    bucket-paying loop plus its "reminder" bookkeeping.
    """
    w = np.roll(weights, -start_bucket)                 # w[0] = the start bucket
    cw = np.concatenate(([0.0], np.cumsum(w)))
    per_day = cw[-1]
    day = np.floor(points / per_day)
    rest = points - day * per_day
    b = np.clip(np.searchsorted(cw, rest, side="right") - 1, 0, BUCKETS - 1)
    frac = (rest - cw[b]) / w[b]
    return (day * BUCKETS + b + frac) * SECONDS_IN_BUCKET


def _draw_sizes(rng: np.random.Generator, cls: LublinClass, nodes: int, n: int) -> np.ndarray:
    """``calc_number_of_nodes`` for ``n`` jobs (int64, in [1, nodes])."""
    ulow, umed, uhi = size_bounds(cls, nodes)
    u = rng.random(n)
    first = rng.random(n) <= cls.uprob                  # two_stage_uniform: which uniform
    lo = np.where(first, ulow, umed)
    hi = np.where(first, umed, uhi)
    par = rng.random(n) * (hi - lo) + lo
    pow2 = (u > cls.serial_prob) & (u <= cls.serial_prob + cls.pow2_prob)
    # par = (unsigned)(par + 0.5), never above the largest power of two <= nodes (our guard)
    par = np.where(pow2, np.minimum(np.floor(par + 0.5), math.floor(math.log2(nodes))), par)
    size = np.floor(np.exp2(par) + 0.5)                # (unsigned)(pow(2,par) + 0.5)
    size = np.where(u <= cls.serial_prob, 1.0, size)
    return np.clip(size, 1, nodes).astype(np.int64)


def _draw_runtimes(rng: np.random.Generator, cls: LublinClass, size: np.ndarray) -> np.ndarray:
    """``time_from_nodes`` for each size: floor(exp(hyper-gamma)), redrawn above TOO_MUCH_TIME."""
    n = len(size)
    p = np.clip(cls.pa * size + cls.pb, 0.0, 1.0)
    g = np.empty(n)
    todo = np.arange(n)
    while todo.size:                                    # the whole hyper-gamma is redrawn, as in C
        first = rng.random(todo.size) <= p[todo]
        g[todo] = rng.gamma(np.where(first, cls.a1, cls.a2), np.where(first, cls.b1, cls.b2))
        todo = todo[g[todo] > TOO_MUCH_TIME]
    return np.floor(np.exp(g))


def offered_load(submit: np.ndarray, runtime: np.ndarray, procs: np.ndarray, nodes: int) -> float:
    """sum(procs*runtime) / (nodes * (max(submit) - min(submit))); dimensionless."""
    span = float(np.max(submit) - np.min(submit))
    if span <= 0:
        raise ValueError("offered load needs at least two distinct submit times")
    return float(np.sum(np.asarray(procs, np.float64) * runtime) / (nodes * span))


# --------------------------------------------------------------------------- Tsafrir 2005
# Constants of Dan Tsafrir's est_model.cc (reference implementation of Tsafrir, Etsion &
# Feitelson, JSSPP 2005); names as in that file.
_MIN, _HOUR = 60, 3600
_TOP = 20                                      # "TOP = 20": head = the 20 most popular estimates
#: TIMRNK_TO_POPRNK[time-rank][trace]: popularity rank of the k-th shortest top-20 estimate in
#: the SDSC-SP2, CTC-SP2, KTH-SP2 and SDSC-BLUE logs (row 0 = the maximal estimate).
_TIMRNK_TO_POPRNK = np.array([
    [3, 1, 1, 1], [1, 3, 4, 6], [4, 4, 10, 5], [17, 2, 14, 3], [13, 12, 20, 7],
    [7, 9, 2, 2], [8, 8, 3, 18], [18, 18, 7, 19], [2, 6, 12, 4], [6, 7, 6, 11],
    [16, 11, 19, 20], [10, 20, 5, 9], [5, 16, 18, 10], [15, 5, 16, 14], [14, 14, 9, 13],
    [19, 13, 17, 16], [11, 10, 15, 15], [12, 15, 13, 17], [9, 17, 8, 8], [20, 19, 11, 12],
])
#: EST_JOINT: the 15 top-20 estimates common to all four logs [s], in the file's order.
_EST_JOINT = [5 * _MIN, 15 * _MIN, 10 * _MIN, 20 * _MIN, 30 * _MIN, 1 * _HOUR, 2 * _HOUR, 3 * _HOUR,
              4 * _HOUR, 5 * _HOUR, 6 * _HOUR, 8 * _HOUR, 10 * _HOUR, 12 * _HOUR, 18 * _HOUR]
#: EST_ROUND: multiples used to complete the head down from the maximum [s].
_EST_ROUND = [200 * _HOUR, 100 * _HOUR, 50 * _HOUR, 10 * _HOUR, 5 * _HOUR, 2 * _HOUR, 1 * _HOUR,
              20 * _MIN, 10 * _MIN, 5 * _MIN]
#: BINUM_LINEAR: (njobs, number of distinct estimates) points of the linear bin-number model.
_BINUM_LINEAR = [(0, 0), (20, 10), (200, 20), (1000, 35), (10000, 90), (70000, 340), (250000, 565)]
_BINSIZ_HEAD = (14.0491, -0.177531, 0.462513)  # size(rank) = a*exp(b*rank) + c  [% of jobs]
_BINSIZ_HEAD_SUM = 89.0                        # % of jobs using one of the top-20 estimates
_BINSIZ_TAIL = (795.6, -2.267)                 # size(rank) = a*rank^b, ranks >= 21
_BINTIM_P, _BINTIM_Q = 12.1039, -0.6026        # bintim_param a = 1 + p*binnum^q
_TAIL_OFFSETS = (0, 30, -30, 20, -20, 10, -10)  # collision offsets [s] of gen_tail_bintim
#: The reference Python port refuses fewer jobs than this ("determined empirically").
_TSAFRIR_MIN_JOBS = 200


def _binnum(njobs: int) -> int:
    """get_binnum(): number of distinct estimates, linear model through _BINUM_LINEAR."""
    if njobs > _BINUM_LINEAR[-1][0]:
        return _BINUM_LINEAR[-1][1]
    k = next(i for i, (nj, _) in enumerate(_BINUM_LINEAR) if njobs <= nj)
    (x0, y0), (x1, y1) = _BINUM_LINEAR[k - 1], _BINUM_LINEAR[k]
    return int(y0 + _cround((njobs - x0) * (y1 - y0) / (x1 - x0)))


def _head_times(maxest: int) -> list[int]:
    """gen_head_bintim(): [maxest] + the joint and round estimates below it, ascending after [0]."""
    v = [maxest] + [e for e in _EST_JOINT if e < maxest]
    missing = max(0, _TOP - len(v))
    for mul in _EST_ROUND:
        if missing == 0:
            break
        start = (maxest // mul) * mul
        j = 0
        while start - j * mul > 0 and missing > 0:
            est = start - j * mul
            if est not in v:
                v.append(est)
                missing -= 1
            j += 1
    return [v[0]] + sorted(v[1:])


def _head_sizes(ntop: int, maxest_pct: float | None = None) -> tuple[list[float], int]:
    """gen_head_binsiz() + gen_head_binsiz_merge(): % of jobs of popularity ranks 1..ntop.

    Without a user bin the sizes are a*exp(b*rank)+c for ranks 2..ntop and the rest of 89 %
    for rank 1, sorted descending; returns (sizes, -1). With a user-supplied share
    ``maxest_pct`` for the maximal estimate, that share replaces rank 1's and the others are
    scaled so the head still sums to 89 % (zeroed if the user share alone reaches 89 %), then
    re-sorted from index 1 as the C does; returns (sizes, index of the user size).
    """
    a, b, c = _BINSIZ_HEAD
    ranks = np.arange(2, ntop + 1, dtype=np.float64)
    rest = a * np.exp(b * ranks) + c
    if maxest_pct is None:
        return sorted([_BINSIZ_HEAD_SUM - float(rest.sum())] + rest.tolist(), reverse=True), -1
    rest *= (_BINSIZ_HEAD_SUM - maxest_pct) / rest.sum()
    res = sorted([maxest_pct] + rest.tolist(), reverse=True)
    sidx = res.index(maxest_pct)
    if maxest_pct >= _BINSIZ_HEAD_SUM:      # gen_head_binsiz_merge step 6: zero non-user sizes
        res = [v if i == sidx else 0.0 for i, v in enumerate(res)]
    for i in range(1, len(res)):            # step 7: selection sort of [1:], tracking the user size
        m = max(range(i, len(res)), key=lambda j: (res[j], -j))
        if res[m] > res[i]:
            res[i], res[m] = res[m], res[i]
            sidx = i if sidx == m else (m if sidx == i else sidx)
    return res, sidx


def _timrnk_to_poprnk(rng: np.random.Generator, maxest_rank: int | None = None) -> list[int]:
    """gen_head_timrnk_poprnk_map(): popularity rank of each top-20 time rank.

    Row 0 (the maximum) gets rank 1, or ``maxest_rank`` when the user fixed the maximal
    estimate's share (that rank is then reserved). A rank whose last appearance in the
    table has passed is forced ("bound"). Otherwise the rank is the smaller of two random
    picks from the pool of ranks seen so far (with multiplicity). The C shuffles the pool
    before picking uniformly, which gives the same distribution, so we skip the shuffle.
    """
    bound: dict[int, int] = {}
    for ttr in range(_TOP - 1, -1, -1):
        for pr in _TIMRNK_TO_POPRNK[ttr]:
            bound.setdefault(int(pr), ttr)
    reserved = set() if maxest_rank is None else {maxest_rank}
    mapping: list[int] = []
    chosen: set[int] = set()
    pool: list[int] = []
    for ttr in range(_TOP):
        pool.extend(int(pr) for pr in _TIMRNK_TO_POPRNK[ttr] if int(pr) not in chosen | reserved)
        if ttr == 0:
            pr = 1 if maxest_rank is None else maxest_rank
        else:
            pr = next((r for r in range(1, _TOP + 1)
                       if bound[r] <= ttr and r not in chosen and r not in reserved), -1)
            if pr == -1 and pool:
                picks = rng.integers(0, len(pool), size=2)
                pr = min(pool[int(picks[0])], pool[int(picks[1])])
            elif pr == -1:      # cannot happen without a reserved rank; guard instead of the C's crash
                pr = min(r for r in range(1, _TOP + 1) if r not in chosen and r not in reserved)
        mapping.append(pr)
        chosen.add(pr)
        pool = [p for p in pool if p != pr]
    return mapping


def _tail(rng: np.random.Generator, maxest: int, head: dict[int, float], nbins: int,
          a: float) -> dict[int, float]:
    """gen_tail_map(): ``nbins`` tail estimates time(x) = (a-1)x/(a-x)*maxest, sizes a*rank^b."""
    times: list[int] = []
    seen: set[int] = set()
    for i in range(1, nbins + 1):
        x = i / nbins
        sec = int(_cround(((a - 1) * x / (a - x)) * maxest / 60.0) * 60)
        for off in _TAIL_OFFSETS:
            s = sec + off
            if s not in seen and s not in head and 0 < s < maxest:
                times.append(s)
                seen.add(s)
                break
    if not times:
        return {}
    ranks = _TOP + 1 + np.arange(len(times), dtype=np.float64)
    sizes = _BINSIZ_TAIL[0] * ranks ** _BINSIZ_TAIL[1]
    sizes *= (100.0 - _BINSIZ_HEAD_SUM) / sizes.sum()
    sizes = rng.permutation(sizes)                      # the C shuffles both lists and pairs them
    return dict(zip(sorted(times), sizes.tolist()))


def _adjust_njobs(time2j: dict[int, int], njobs: int, user: frozenset = frozenset()) -> dict[int, int]:
    """adjust_njobs(): make the bin counts sum to ``njobs``, leaving the ``user`` bins alone."""
    total = sum(time2j.values())
    nonuser_total = sum(v for t, v in time2j.items() if t not in user)
    diff, sign = abs(njobs - total), (1 if njobs > total else -1)
    attempt = 0
    while diff:
        times = sorted((t for t in time2j if t not in user), key=lambda t: -time2j[t])  # by size, desc.
        f = diff / max(nonuser_total, 1)                   # the C uses the initial sum throughout
        cur = diff
        for t in times:
            nj = time2j[t]
            if nj == 0:
                continue
            adj = {0: math.ceil(f * nj), 1: 1, 2: nj - 1}.get(attempt, nj)
            if sign < 0:
                adj = min(adj, nj)
                if adj == nj and attempt < 3:
                    adj -= 1
            adj = min(adj, cur)
            time2j[t] += sign * adj
            cur -= adj
            if cur == 0:
                break
        diff = cur
        attempt += 1
        if attempt > 3 and diff:
            raise RuntimeError("Tsafrir estimate model: could not equalise bin counts")
    return time2j


def tsafrir_histogram(njobs: int, max_estimate: int, rng: np.random.Generator,
                      maxest_njobs: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """est_gen_dist(): the estimate histogram (times [s], job counts) for ``njobs`` jobs.

    ``maxest_njobs`` is the one user-supplied bin we support: the number of jobs whose
    estimate is the maximum. This is est_model.cc's documented remedy when too many runtimes
    are long. Raises ValueError if ``max_estimate`` < 2 h: below that, est_model.cc cannot
    fill its 20 head estimates.
    """
    if max_estimate < 2 * _HOUR:
        raise ValueError(f"Tsafrir estimate model: max_estimate={max_estimate} s must be >= 7200 s")
    binnum = _binnum(njobs)
    a = 1.0 + _BINTIM_P * binnum ** _BINTIM_Q
    htimes = _head_times(max_estimate)
    pct = None if maxest_njobs is None else 100.0 * maxest_njobs / njobs
    hsizes, sidx = _head_sizes(len(htimes), pct)
    mapping = _timrnk_to_poprnk(rng, None if maxest_njobs is None else sidx + 1)
    head = {t: float(hsizes[mapping[i] - 1]) for i, t in enumerate(htimes)}
    time2p = _tail(rng, max_estimate, head, binnum - len(head), a)
    time2p.update(head)
    time2j = {t: max(1, int(_cround(p * njobs / 100.0))) for t, p in sorted(time2p.items())}
    user = frozenset()
    if maxest_njobs is not None:
        time2j[max_estimate] = int(maxest_njobs)
        user = frozenset([max_estimate])
    time2j = _adjust_njobs(time2j, njobs, user)
    times = np.array(sorted(time2j), dtype=np.int64)
    counts = np.array([time2j[t] for t in times], dtype=np.int64)
    return times, counts


def _feasible(rs: np.ndarray, sests: np.ndarray) -> bool:
    """Can est_assign() succeed: is the k-th longest runtime <= the k-th largest estimate?"""
    return bool(np.all(rs <= sests[: len(rs)]))


def tsafrir_estimates(runtime: np.ndarray, rng: np.random.Generator,
                      max_estimate: int = LUBLIN_MAX_ESTIMATE, info: dict | None = None) -> np.ndarray:
    """User runtime estimates [s] for jobs of the given runtimes [s], Tsafrir et al. 2005.

    est_gen_dist() builds a modal histogram of estimates (20 popular "round" values holding
    89 % of jobs, plus a tail). est_assign() then gives them out, longest job first: each job
    draws uniformly among the unused estimates that are >= its runtime. Every estimate is
    >= its runtime. For fewer than 200 jobs, the minimum the reference port accepts, the
    histogram is built for 200 jobs and the jobs draw from it without replacement (our
    generalisation). Runtimes above ``max_estimate`` raise ValueError; the C truncates
    them instead. When the default histogram holds too few long estimates, est_model.cc stops
    and asks the user for the maximal estimate's job count. We search for the smallest count
    that works, by bisection. ``info``, if given, receives that count ("maxest_njobs", None if
    it was not needed) and the number of bins.
    """
    runtime = np.asarray(runtime, dtype=np.float64)
    n = len(runtime)
    if n == 0:
        return np.empty(0)
    if runtime.max() > max_estimate:
        raise ValueError(f"runtime {runtime.max():.0f} s exceeds max_estimate={max_estimate} s")
    nh = max(n, _TSAFRIR_MIN_JOBS)
    rs = np.sort(runtime)[::-1]
    hist_seed = int(rng.integers(0, 2**63))          # the same random draws for every attempt below

    def sorted_estimates(maxest_njobs: int | None) -> np.ndarray:
        times, counts = tsafrir_histogram(nh, max_estimate, np.random.Generator(np.random.PCG64(hist_seed)),
                                          maxest_njobs)
        return np.repeat(times, counts)[::-1].astype(np.float64)     # descending

    sests = sorted_estimates(None)
    maxest_njobs = None
    if not _feasible(rs, sests):
        # est_model.cc aborts here and tells the user to give the maximal estimate's job count
        # explicitly; we search for the smallest such count that makes the assignment possible.
        lo = int(np.sum(sests == max_estimate))   # infeasible
        hi = nh                                   # every job at the maximum: always feasible
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if _feasible(rs, sorted_estimates(mid)):
                hi = mid
            else:
                lo = mid
        maxest_njobs = hi
        sests = sorted_estimates(hi)
    if info is not None:
        info["maxest_njobs"] = maxest_njobs
        info["bins"] = _binnum(nh)
    order = np.argsort(-runtime, kind="stable")                   # jobs, longest first
    rs = runtime[order]
    # est_assign()/shuffle(): job j takes a uniform pick among positions [j, hi], hi the last
    # estimate >= its runtime; the used estimate is swapped out of the window.
    hi_of = np.searchsorted(-sests, -rs, side="right") - 1        # last index with sests >= rs
    u = rng.random(n)
    s = sests.tolist()
    his = hi_of.tolist()
    out = np.empty(n)
    for j in range(n):
        k = j + int(u[j] * (his[j] - j + 1))
        out[j] = s[k]
        s[k] = s[j]
    est = np.empty(n)
    est[order] = out
    return est


# --------------------------------------------------------------------------- generator
def _check_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise SyntheticSpecError(f"lublin_workload: {name}={value!r} must be an integer")
    if value < minimum:
        raise SyntheticSpecError(f"lublin_workload: {name}={value!r} must be >= {minimum}")
    return int(value)


def _stream(rng: np.random.Generator, cls: LublinClass, nodes: int, n: int):
    """Draw ``n`` jobs of one class: (arrival points, sizes, runtimes)."""
    points = _arrival_points(rng, cls, n)
    size = _draw_sizes(rng, cls, nodes, n)
    runtime = _draw_runtimes(rng, cls, size)
    return points, size, runtime


def lublin_workload(jobs: int = 10_000, nodes: int = 256, seed: int = 0, load: float | None = None,
                    interactive: bool = False) -> Workload:
    """A synthetic workload from the Lublin & Feitelson (2003) model (see the module docstring).

    Parameters
    ----------
    jobs: number of jobs (>= 1; >= 2 when ``load`` is given).
    nodes: machine size in nodes (allocation units), >= 1; sizes are in [1, nodes].
    seed: seed of the ``numpy.random.Generator(PCG64(seed))`` behind every draw.
    load: target offered load sum(procs*runtime)/(nodes*span), or None to keep the model's
        own arrival rate. Reached by scaling rush-hour inter-arrival times (our addition).
    interactive: False = whole-sample (typeless) parameters; True = batch and interactive
        classes interleaved (class in ``queue``: 1 batch, 0 interactive).

    Returns
    -------
    A `Workload` sorted by submit, job ids 1..n, submit [s] integer-valued from 0, runtime
    [s] integer-valued >= 1, requested_time [s] from Tsafrir's estimate model (>= runtime),
    status 1, ``machine_size=nodes``.
    """
    jobs = _check_int("jobs", jobs, 1)
    nodes = _check_int("nodes", nodes, 1)
    seed = _check_int("seed", seed, 0)
    if not isinstance(interactive, (bool, np.bool_)):
        raise SyntheticSpecError(f"lublin_workload: interactive={interactive!r} must be a bool")
    if load is not None:
        if isinstance(load, bool) or not isinstance(load, (int, float, np.floating, np.integer)) \
                or not math.isfinite(load) or load <= 0:
            raise SyntheticSpecError(f"lublin_workload: load={load!r} must be a finite number > 0")
        load = float(load)
        if jobs < 2:
            raise SyntheticSpecError("lublin_workload: load needs jobs >= 2 (the span of one job is 0)")

    rng = np.random.Generator(np.random.PCG64(seed))
    classes = (INTERACTIVE, BATCH) if interactive else (TYPELESS,)
    start_bucket = START_HOUR * BUCKETS // 24
    streams = []
    for cls in classes:   # fixed order: interactive (type 0) then batch (type 1)
        pts, size, run = _stream(rng, cls, nodes, jobs)
        streams.append((cls, pts, size, run, daily_weights(cls)))
    cls_col = np.concatenate([np.full(jobs, c.queue, dtype=np.int64) for c, *_ in streams])
    size_all = np.concatenate([s for _, _, s, _, _ in streams])
    run_all = np.concatenate([r for _, _, _, r, _ in streams])
    rank = np.concatenate([np.full(jobs, i) for i in range(len(streams))])

    def arrivals(c: float):
        """Arrival times [s since START] of the first ``jobs`` merged jobs, and their rows."""
        t = np.concatenate([_points_to_seconds(c * p, w, start_bucket) for _, p, _, _, w in streams])
        if len(streams) == 1:
            return t, np.arange(jobs)
        rows = np.lexsort((rank, t))[:jobs]   # ties: interactive first, as arrive() does
        return t[rows], rows

    def load_at(c: float) -> float:
        t, rows = arrivals(c)
        return offered_load(t, run_all[rows], size_all[rows], nodes)

    natural = load_at(1.0) if jobs >= 2 else float("nan")
    c = 1.0
    stretch = 1.0
    if load is not None:
        # load(c) falls as c grows (times ~ proportional to c): bracket, then bisect in log c.
        lo, hi = natural / load, natural / load
        while load_at(lo) < load:
            lo /= 2
        while load_at(hi) > load:
            hi *= 2
        for _ in range(60):
            mid = math.sqrt(lo * hi)
            if load_at(mid) > load:
                lo = mid
            else:
                hi = mid
            if hi / lo - 1 < 1e-7:
                break
        c = math.sqrt(lo * hi)
        stretch = load_at(c) / load       # linear correction for the interleaving's jumps
    t, rows = arrivals(c)
    t = t * stretch
    first = float(np.floor(t[0]))
    submit = np.floor(t) - first
    procs = size_all[rows]
    runtime = run_all[rows]
    queue = cls_col[rows]
    est_info: dict = {}
    requested = tsafrir_estimates(runtime, rng, LUBLIN_MAX_ESTIMATE, info=est_info)

    achieved = offered_load(submit, runtime, procs, nodes) if jobs >= 2 and submit[-1] > 0 else float("nan")
    if load is not None and not abs(achieved / load - 1) <= 0.01:   # also catches a zero span (nan)
        raise SyntheticSpecError(
            f"lublin_workload: load={load:g} cannot be met with whole-second submit times for jobs={jobs} "
            f"(the span would be {float(t[-1] - t[0]):.3g} s, achieved load {achieved:.4g}); "
            "use more jobs or a lower load")
    lstr = "None" if load is None else f"{load:g}"
    name = f"lublin(jobs={jobs},nodes={nodes},seed={seed},load={lstr}" + (",interactive=True)" if interactive else ")")
    spec = f"synthetic:jobs={jobs},nodes={nodes},seed={seed}" + ("" if load is None else f",load={load:g}") \
        + (",interactive=true" if interactive else "")
    notes = [
        "Lublin & Feitelson (JPDC 63(11), 2003) workload model, parameters of m_lublin99.c "
        + ("(batch + interactive classes interleaved, INCLUDE_JOBS_TYPE 1; class in queue: 1 batch, 0 interactive)"
           if interactive else "(whole-sample / typeless parameters, INCLUDE_JOBS_TYPE 0)")
        + f"; numpy PCG64 seed {seed}.",
    ]
    for cls in classes:
        ulow, umed, uhi = size_bounds(cls, nodes)
        notes.append(
            f"{cls.name}: SERIAL_PROB={cls.serial_prob} POW2_PROB={cls.pow2_prob} ULOW={ulow:g} UMED={umed:g} "
            f"UHI={uhi:g} (log2 {nodes} nodes) UPROB={cls.uprob}; log-runtime hyper-gamma A1={cls.a1} B1={cls.b1} "
            f"A2={cls.a2} B2={cls.b2} p=PA*size+PB, PA={cls.pa} PB={cls.pb}, cap exp({TOO_MUCH_TIME:g}) s; "
            f"log-inter-arrival gamma(AARR*ARAR={cls.aarr}*{cls.arar}, BARR={cls.barr}), "
            f"cap exp({TOO_MUCH_ARRIVE_TIME:g}) s; "
            f"daily cycle gamma(ANUM={cls.anum}, BNUM={cls.bnum}) over 48 half-hour buckets from "
            f"CYCLIC_DAY_START={CYCLIC_DAY_START}, START hour {START_HOUR}.")
    if load is None:
        notes.append(f"Offered load (model's own arrival rate): {achieved:.4f} "
                     "(sum procs*runtime / (nodes * (last submit - first submit))).")
    else:
        notes.append(f"Offered load scaled to target {load:g} (our addition): rush-hour inter-arrivals x {c:.6g}, "
                     f"time axis x {stretch:.6g}; achieved {achieved:.4f}; model's own load was {natural:.4f}.")
    notes.append(
        "requested_time: Tsafrir, Etsion & Feitelson (JSSPP 2005) modal estimate model (reimplementation of "
        f"est_model.cc, default parameters, no user bins), max estimate {LUBLIN_MAX_ESTIMATE} s (48 h), "
        f"{est_info['bins']} estimate bins; estimates >= runtimes"
        + ("." if est_info["maxest_njobs"] is None else
           f"; the default histogram could not cover the long runtimes, so the 48 h bin was given "
           f"{est_info['maxest_njobs']} jobs (est_model.cc's documented remedy, smallest feasible count)."))
    notes.append("Submit times floored to whole seconds and shifted so the first job arrives at 0.")
    header = {
        "Version": "2",
        "Acknowledge": "Uri Lublin, Hebrew University (model); generated by hpctwin",
        "MaxJobs": str(jobs), "MaxRecords": str(jobs),
        "MaxNodes": str(nodes), "MaxProcs": str(nodes),
        "MaxRuntime": str(int(math.exp(TOO_MUCH_TIME))),
        "FirstArrivalSinceStart": f"{first:.0f}",
    }
    return Workload.from_arrays(
        name, submit=submit, runtime=runtime, procs=procs, requested_time=requested,
        queue=queue, status=np.ones(jobs, dtype=np.int64),
        machine_size=nodes, machine_size_source="synthetic model", header=header, notes=notes, source=spec,
    )


# --------------------------------------------------------------------------- spec parsing
_ALLOWED = ("jobs", "nodes", "load", "seed", "interactive")
#: most jobs a synthetic spec may ask for (the generator holds about 100 bytes a job in arrays)
_MAX_JOBS = 50_000_000


def _spec_error(spec: str, msg: str) -> SyntheticSpecError:
    return SyntheticSpecError(f"synthetic spec {spec!r}: {msg}; allowed keys: {', '.join(_ALLOWED)}")


def parse_synthetic_spec(spec: str) -> dict:
    """Parse ``"synthetic"`` or ``"synthetic:jobs=5000,nodes=256,load=0.8,seed=3"``.

    Returns the keyword arguments for `lublin_workload` (only the keys given). ``jobs`` and
    ``nodes`` are integers >= 1, ``seed`` an integer >= 0, ``load`` a number > 0 (or
    ``none``), ``interactive`` one of true/false/yes/no/1/0. Raises `SyntheticSpecError`
    (a ValueError) naming the bad key or value and the allowed keys.
    """
    if not isinstance(spec, str):
        raise SyntheticSpecError(f"synthetic spec must be a string, got {type(spec).__name__}")
    head, sep, body = spec.strip().partition(":")
    if head.strip().lower() != "synthetic":
        raise _spec_error(spec, f"must start with 'synthetic', got {head.strip()!r}")
    out: dict = {}
    if not sep:
        return out
    if not body.strip():
        raise _spec_error(spec, "empty parameter list after ':'")
    for item in body.split(","):
        key, eq, raw = (s.strip() for s in item.partition("="))
        if not eq or not key:
            raise _spec_error(spec, f"item {item.strip()!r} is not key=value")
        if key not in _ALLOWED:
            from hpctwin.twin.schema import did_you_mean  # noqa: PLC0415
            raise _spec_error(spec, f"unknown key {key!r}{did_you_mean(key, _ALLOWED)}")
        if key in out:
            raise _spec_error(spec, f"key {key!r} given twice")
        if key in ("jobs", "nodes", "seed"):
            try:
                val = int(raw)
            except ValueError:
                raise _spec_error(spec, f"{key}={raw!r} is not an integer") from None
            if val < (0 if key == "seed" else 1):
                raise _spec_error(spec, f"{key}={raw!r} must be >= {0 if key == 'seed' else 1}")
            top = {"jobs": _MAX_JOBS, "nodes": 2 ** 26, "seed": 2 ** 63 - 1}[key]
            if val > top:
                raise _spec_error(spec, f"{key}={raw!r} must be <= {top:,}")
        elif key == "load":
            if raw.lower() == "none":
                val = None
            else:
                try:
                    val = float(raw)
                except ValueError:
                    raise _spec_error(spec, f"load={raw!r} is not a number") from None
                if not math.isfinite(val) or val <= 0:
                    raise _spec_error(spec, f"load={raw!r} must be a finite number > 0")
        else:
            low = raw.lower()
            if low in ("true", "yes", "1"):
                val = True
            elif low in ("false", "no", "0"):
                val = False
            else:
                raise _spec_error(spec, f"interactive={raw!r} is not a boolean (true/false)")
        out[key] = val
    return out
