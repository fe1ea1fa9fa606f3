"""A fixed machine-speed unit: every benchmark runs it in its own process and prints its figures as
ratios to it, so the figures mean something on any machine and under any background load.

The unit is a fixed, deterministic mix of the operations a scheduler replay spends its time on:
heap pushes and pops of (float, int) tuples, dict inserts/lookups/deletes keyed by int, float
arithmetic in a Python loop, and small numpy calls (the per-call overhead of ``np.searchsorted``,
``np.cumsum`` and slicing on arrays of 64 elements). It takes about 1 s of CPU time on the
reference machine (2-core Xeon VM, Python 3.11, numpy 2.4). Nothing in it depends on hpctwin, so
the unit does not change when the project does.

    python benchmarks/calibration.py            # prints the unit's CPU seconds (best of 3)

From another benchmark::

    from calibration import unit_seconds
    unit = unit_seconds()                       # CPU seconds of one unit in this process
    print(f"{cpu_s / unit:.2f} units")
"""
from __future__ import annotations

import heapq
import sys
import time

import numpy as np

#: loop sizes of the mix (fixed: changing them changes the unit)
HEAP_OPS = 400_000
DICT_OPS = 1_000_000
FLOAT_OPS = 2_000_000
NUMPY_CALLS = 60_000


def _heap_part() -> float:
    h: list = []
    x = 0.5
    acc = 0.0
    for i in range(HEAP_OPS):
        x = (x * 3.7 + 0.123) % 1.0            # a deterministic pseudo-random sequence
        heapq.heappush(h, (x, i))
        if i & 1:
            acc += heapq.heappop(h)[0]
    return acc


def _dict_part() -> float:
    d: dict[int, float] = {}
    acc = 0.0
    for i in range(DICT_OPS):
        k = (i * 7919) % 50_021
        if k in d:
            acc += d.pop(k)
        else:
            d[k] = i * 0.5
    return acc + len(d)


def _float_part() -> float:
    acc, t = 0.0, 1.0
    for i in range(FLOAT_OPS):
        t = t + 0.25 if t < 1e6 else 1.0
        acc += t * 1.0000001 - (t if t > acc else acc) * 1e-9
    return acc


def _numpy_part() -> float:
    a = np.cumsum(np.arange(64, dtype=np.float64))
    acc = 0.0
    for i in range(NUMPY_CALLS):
        k = int(np.searchsorted(a, float(i % 2000)))
        acc += float(np.cumsum(a[k // 2:])[-1]) if k < 64 else 0.0
    return acc


def run_unit() -> float:
    """Run the mix once; returns a checksum (so nothing is optimised away)."""
    return _heap_part() + _dict_part() + _float_part() + _numpy_part()


def unit_seconds(repeat: int = 3) -> float:
    """CPU seconds (user + system of this process) of one unit: the best of ``repeat`` runs."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        run_unit()
        best = min(best, time.process_time() - t0)
    return best


def main() -> int:
    print(f"calibration unit: {unit_seconds():.3f} CPU s (best of 3; about 1 s on the reference machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
