"""Bine (binomial negabinary) arithmetic and butterfly block numberings.

Reference: D. De Sensi, S. Pasqualoni, L. Piarulli, T. Bonato, S. Ba, M. Turisini, J. Domke,
T. Hoefler, "Bine Trees: Enhancing Collective Operations by Optimizing Communication Locality",
SC'25, arXiv:2508.17311; reference code HLC-Lab/pico (``libbine/libbine_utils.h``: ``rhos``, ``pi``).

Conventions (used everywhere in :mod:`topology.collectives`):

* ``rho(k) = sum_{i=0..k} (-2)**i`` = 1, -1, 3, -5, 11, -21, 43, -85, ...
* ``pi(r, k) = (r + rho(k)) mod p`` for even ``r`` and ``(r - rho(k)) mod p`` for odd ``r``.
  ``rho(k)`` is odd, so ``pi`` pairs an even rank with an odd one and is an involution.
* Steps are numbered from 0.  In a *distance-doubling* Bine butterfly, step ``k`` pairs ``r`` with
  ``pi(r, k)``; so for p = 8, step 1 (rho = -1) pairs (0,7) (1,2) (3,4) (5,6).  A *distance-halving*
  butterfly runs the same partners in the reverse order (step ``j`` uses ``pi(r, s-1-j)``).
* A butterfly is given as an array ``partners`` of shape (s, p): row ``j`` is the partner of every
  rank at executed step ``j``.

Block numbering.  A reduce-scatter by recursive vector halving over a butterfly with step partners
P_0..P_{s-1} leaves rank r owning one block.  Let G_j(r) be the ranks reachable from r through steps
j..s-1 (|G_j| = 2^(s-j) for a valid butterfly).  At step j, r keeps the blocks owned by G_{j+1}(r) and
sends those owned by G_{j+1}(P_j(r)).  The block numbering ``nu`` puts every G_j group on an aligned
contiguous range: bit (s-1-j) of nu(r) is 0 when the half containing r holds the smaller minimum rank.
For the XOR distance-halving butterfly (MPICH recursive halving) ``nu`` is the identity; for the Bine
distance-doubling butterfly with p = 8 it is [0, 4, 6, 1, 2, 7, 5, 3], the ``perm_8`` table of
HLC-Lab/pico ``libbine/libbine_utils_bitmaps.c``.
"""
from __future__ import annotations

import numpy as np

__all__ = [
    "rho", "rhos", "pi", "is_power_of_two", "log2_exact",
    "bine_partners", "xor_partners", "butterfly_groups", "block_numbering",
    "to_negabinary", "from_negabinary",
]


def is_power_of_two(p: int) -> bool:
    """True if ``p`` is a positive power of two."""
    return p >= 1 and (p & (p - 1)) == 0


def log2_exact(p: int) -> int:
    """log2(p) for a power of two ``p``; ValueError otherwise."""
    if not is_power_of_two(p):
        raise ValueError(f"p={p} is not a power of two")
    return p.bit_length() - 1


def rho(k: int) -> int:
    """rho(k) = sum_{i<=k} (-2)^i (exact integer); rho(0..7) = 1, -1, 3, -5, 11, -21, 43, -85."""
    if k < 0:
        raise ValueError(f"rho(k) needs k >= 0, got {k}")
    # closed form of the geometric sum: (1 - (-2)^(k+1)) / 3
    return (1 - (-2) ** (k + 1)) // 3


def rhos(n: int) -> np.ndarray:
    """rho(0..n-1) as an int64 array."""
    return np.array([rho(k) for k in range(n)], dtype=np.int64)


def pi(r, k: int, p: int):
    """Bine partner of rank(s) ``r`` at step ``k`` among ``p`` ranks (scalar or numpy array)."""
    if p < 2 or p % 2:
        raise ValueError(f"pi needs an even number of ranks p >= 2, got p={p}")
    d = rho(k)
    r_arr = np.asarray(r, dtype=np.int64)
    out = np.where(r_arr % 2 == 0, r_arr + d, r_arr - d) % p
    return int(out) if np.ndim(out) == 0 else out


def to_negabinary(v: int) -> str:
    """Negabinary (base -2) digits of integer ``v``, most significant first ("0" for 0)."""
    if v == 0:
        return "0"
    digits = []
    while v != 0:
        v, rem = divmod(v, -2)
        if rem < 0:
            v, rem = v + 1, rem + 2
        digits.append(str(rem))
    return "".join(reversed(digits))


def from_negabinary(digits: str) -> int:
    """Integer value of a negabinary digit string (most significant digit first)."""
    val = 0
    for ch in digits:
        if ch not in "01":
            raise ValueError(f"negabinary digits must be 0/1, got {digits!r}")
        val = val * -2 + int(ch)
    return val


def bine_partners(p: int, halving: bool = False) -> np.ndarray:
    """Partner table (s, p) of the Bine butterfly: row j = pi(., j) (doubling) or pi(., s-1-j)."""
    s = log2_exact(p)
    r = np.arange(p, dtype=np.int64)
    even = (r % 2) == 0
    rows = [np.where(even, r + rho(k), r - rho(k)) % p for k in range(s)]
    if halving:
        rows = rows[::-1]
    return np.array(rows, dtype=np.int64).reshape(s, p)


def xor_partners(p: int, halving: bool = False) -> np.ndarray:
    """Partner table (s, p) of the classic XOR butterfly: row j = r ^ 2^j (doubling) or r ^ 2^(s-1-j)."""
    s = log2_exact(p)
    r = np.arange(p, dtype=np.int64)
    rows = [r ^ (1 << k) for k in range(s)]
    if halving:
        rows = rows[::-1]
    return np.array(rows, dtype=np.int64).reshape(s, p)


def butterfly_groups(partners: np.ndarray) -> np.ndarray:
    """Labels of the groups G_j(r), shape (s+1, p): ``lab[j, r]`` = min rank of G_j(r).

    G_s(r) = {r}; G_j(r) = G_{j+1}(r) U G_{j+1}(P_j(r)).  Raises ValueError if a group does not have
    exactly 2^(s-j) members (the partner table is not a butterfly).
    """
    s, p = partners.shape
    if p != 1 << s:
        raise ValueError(f"partner table has {s} steps for p={p}; need p = 2^steps")
    lab = np.empty((s + 1, p), dtype=np.int64)
    lab[s] = np.arange(p)
    for j in range(s - 1, -1, -1):
        nxt = lab[j + 1]
        lab[j] = np.minimum(nxt, nxt[partners[j]])
        sizes = np.bincount(lab[j], minlength=p)
        if np.any(sizes[lab[j]] != (1 << (s - j))):
            raise ValueError(f"partner table is not a butterfly: groups at step {j} are not of size {1 << (s - j)}")
        if np.any(nxt == nxt[partners[j]]):
            raise ValueError(f"partner table is not a butterfly: step {j} pairs ranks of the same group")
    return lab


def block_numbering(partners: np.ndarray) -> np.ndarray:
    """Block numbering ``nu`` (a permutation of 0..p-1) of a reduce-scatter over ``partners``.

    Rank r ends the reduce-scatter owning block nu[r]; every group G_j(r) covers the aligned range of
    blocks whose top j bits equal those of nu[r].  See the module docstring for the rule.
    """
    s, p = partners.shape
    lab = butterfly_groups(partners)
    nu = np.zeros(p, dtype=np.int64)
    for j in range(s):
        bit = lab[j + 1] > lab[j + 1][partners[j]]
        nu |= bit.astype(np.int64) << (s - 1 - j)
    return nu
