"""Compact node-range strings: ``[0, 1, 2, 3, 8, 10, 11]`` <-> ``"0-3,8,10-11"``."""
from __future__ import annotations

import numpy as np


def compact_ranges(ids) -> str:
    """Sorted unique ids as comma-separated ranges (``""`` for none)."""
    a = np.asarray(ids, dtype=np.int64)
    n = len(a)
    if n == 0:
        return ""
    if n == 1:
        return str(int(a[0]))
    if np.any(a[1:] <= a[:-1]):
        a = np.unique(a)
        n = len(a)
    lo, hi = int(a[0]), int(a[-1])
    if hi - lo + 1 == n:
        return f"{lo}-{hi}"
    breaks = np.flatnonzero(np.diff(a) != 1)
    starts = np.concatenate(([0], breaks + 1)).tolist()
    ends = np.concatenate((breaks, [n - 1])).tolist()
    al = a.tolist()
    return ",".join(str(al[s]) if s == e else f"{al[s]}-{al[e]}" for s, e in zip(starts, ends))


def ranges_of_sorted(a: np.ndarray) -> str:
    """`compact_ranges` for ids already sorted and unique (the cluster stores allocations so)."""
    n = len(a)
    if n == 0:
        return ""
    lo, hi = int(a[0]), int(a[-1])
    if hi - lo + 1 == n:
        return f"{lo}-{hi}" if n > 1 else str(lo)
    breaks = np.flatnonzero(np.diff(a) != 1).tolist()
    al = a.tolist()
    parts = []
    s = 0
    for b in breaks + [n - 1]:
        parts.append(str(al[s]) if s == b else f"{al[s]}-{al[b]}")
        s = b + 1
    return ",".join(parts)


def parse_ranges(text: str) -> np.ndarray:
    """Inverse of `compact_ranges`; raises ValueError naming the bad part."""
    out: list[int] = []
    text = text.strip()
    if not text:
        return np.empty(0, dtype=np.int64)
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                lo, hi = part.split("-", 1)
                lo_i, hi_i = int(lo), int(hi)
                if hi_i < lo_i:
                    raise ValueError
                out.extend(range(lo_i, hi_i + 1))
            else:
                out.append(int(part))
        except ValueError:
            raise ValueError(f"bad node range {part!r} in {text!r}") from None
    return np.asarray(out, dtype=np.int64)
