"""Compiled range text of every job's units (see `schedulers.backfill_replay._range_texts`): the texts of
`twin.ranges.ranges_of_sorted` (``"0-3,8,10-11"``) written as ASCII into one byte buffer, one line
per job, so Python makes all the strings with a single ``bytes.split``."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _digits(v):
    d = 1
    while v >= 10:
        v //= 10
        d += 1
    return d


@njit(cache=True)
def _put(buf, pos, v):
    """Write the decimal digits of v >= 0 at buf[pos:]; returns the position after them."""
    d = _digits(v)
    k = pos + d - 1
    while True:
        buf[k] = 48 + v % 10
        v //= 10
        if v == 0:
            break
        k -= 1
    return pos + d


@njit(cache=True)
def range_text_bytes(units, procs):
    """Job j's sorted units are units[off_j:off_j + procs[j]] (off_j = sum of earlier procs; a job
    that never ran has -1 there). Returns the ASCII lines: per job its runs of consecutive units as
    ``lo-hi`` (``lo`` for a single unit) joined by commas, then a newline (an empty line for a job
    that never ran). Two passes (size, then fill), so the buffer is exactly as long as the text."""
    n = len(procs)
    size = 0
    off = 0
    for j in range(n):
        p = procs[j]
        if p > 0 and units[off] >= 0:
            lo = units[off]
            for k in range(off + 1, off + p + 1):
                if k == off + p or units[k] != units[k - 1] + 1:
                    hi = units[k - 1]
                    size += _digits(lo)
                    if hi != lo:
                        size += 1 + _digits(hi)
                    if k < off + p:
                        size += 1           # ','
                        lo = units[k]
        size += 1
        off += p
    buf = np.empty(size, dtype=np.uint8)
    pos = 0
    off = 0
    for j in range(n):
        p = procs[j]
        if p > 0 and units[off] >= 0:
            lo = units[off]
            for k in range(off + 1, off + p + 1):
                if k == off + p or units[k] != units[k - 1] + 1:
                    hi = units[k - 1]
                    pos = _put(buf, pos, lo)
                    if hi != lo:
                        buf[pos] = 45       # '-'
                        pos = _put(buf, pos + 1, hi)
                    if k < off + p:
                        buf[pos] = 44       # ','
                        pos += 1
                        lo = units[k]
        buf[pos] = 10                       # '\n'
        pos += 1
        off += p
    return buf
