"""Slurm hostlist expressions (``n[001-004,010]``, ``a[1-2],b[3-4]``, ``r[1-2]n[01-02]``).

Grammar, as Slurm's ``hostlist_create`` accepts it (src/common/hostlist.c): a comma-separated list
of host expressions (commas inside brackets separate ranges, not hosts); an expression is text
with zero or more bracketed range lists; a range is ``A`` or ``A-B`` with ``A <= B``; when ``A``
has leading zeros every number of the range is printed with that width (``[001-010]``). Several
bracket groups in one expression give the cross product in order (``r[1-2]n[1-2]`` -> r1n1, r1n2,
r2n1, r2n2). Expansion is bounded (`MAX_HOSTS`), so a hostile ``n[0-99999999999]`` is an error,
not a hang.
"""
from __future__ import annotations

import re

#: largest host count one expression may expand to (Slurm's own limit is 64k hosts a range)
MAX_HOSTS = 1 << 20
_RANGE_RE = re.compile(r"([0-9]+)(?:-([0-9]+))?\Z")


class HostlistError(ValueError):
    """A malformed hostlist expression."""


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets; brackets must balance and not nest."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            if depth:
                raise HostlistError(f"nested '[' in {text[:80]!r}")
            depth = 1
        elif ch == "]":
            if not depth:
                raise HostlistError(f"unbalanced ']' in {text[:80]!r}")
            depth = 0
        if ch == "," and not depth:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise HostlistError(f"unclosed '[' in {text[:80]!r}")
    out.append("".join(cur))
    return out


def _ranges(body: str, expr: str) -> list[str]:
    vals: list[str] = []
    for part in body.split(","):
        m = _RANGE_RE.match(part.strip())
        if not m:
            raise HostlistError(f"bad range {part!r} in {expr[:80]!r} (expected N or N-M)")
        a, b = m.group(1), m.group(2) if m.group(2) is not None else m.group(1)
        if len(a) > 18 or len(b) > 18:
            raise HostlistError(f"range {part!r} in {expr[:80]!r} is out of range")
        lo, hi = int(a), int(b)
        if hi < lo:
            raise HostlistError(f"range {part!r} in {expr[:80]!r} goes down")
        if hi - lo + 1 + len(vals) > MAX_HOSTS:
            raise HostlistError(f"{expr[:80]!r} expands to more than {MAX_HOSTS:,} hosts")
        width = len(a) if a.startswith("0") and len(a) > 1 else 0
        vals.extend(f"{x:0{width}d}" for x in range(lo, hi + 1))
    return vals


def expand_hostlist(text: str) -> list[str]:
    """Host names of a Slurm hostlist expression, in order (duplicates kept as written).

    Raises `HostlistError` for unbalanced or nested brackets, a bad range, or more than
    `MAX_HOSTS` hosts. An empty string or ``None assigned`` gives ``[]``.
    """
    s = text.strip()
    if not s or s.lower() in ("none assigned", "none", "(null)"):
        return []
    hosts: list[str] = []
    for expr in _split_top(s):
        expr = expr.strip()
        if not expr:
            raise HostlistError(f"empty host name in {s[:80]!r}")
        pieces = re.split(r"\[([^\]]*)\]", expr)     # text, range, text, range, ..., text
        names = [""]
        for k, piece in enumerate(pieces):
            if k % 2 == 0:
                names = [x + piece for x in names]
            else:
                vals = _ranges(piece, expr)
                if len(names) * len(vals) + len(hosts) > MAX_HOSTS:
                    raise HostlistError(f"{s[:80]!r} expands to more than {MAX_HOSTS:,} hosts")
                names = [x + v for x in names for v in vals]
        hosts.extend(names)
    return hosts


_NAT_RE = re.compile(r"([0-9]+)")


def natural_key(name: str) -> tuple:
    """Sort key putting ``n2`` before ``n10`` (text parts compared as text, numbers as numbers)."""
    return tuple(int(p) if p.isdigit() else p for p in _NAT_RE.split(name))


def node_ids(names: list[str]) -> dict[str, int]:
    """Node name -> node id for every distinct name.

    When all names are one prefix followed by a number (``n0``, ``n17``, ``nid001234``), the id is
    that number, minus 1 when no name has number 0 and one has number 1 (clusters that count from
    1: ``n001`` is node 0); so a dump written by `datasets.sacct.export_sacct` reads back to the
    same ids. Otherwise the names are numbered 0, 1, ... in natural order (``a2`` < ``a10`` < ``b1``).
    """
    uniq = sorted(set(names), key=natural_key)
    m = [re.fullmatch(r"(\D*)([0-9]{1,18})", x) for x in uniq]
    if uniq and all(m) and len({x.group(1) for x in m}) == 1:
        nums = [int(mm.group(2)) for mm in m]
        base = 1 if min(nums) == 1 else 0
        return {x: v - base for x, v in zip(uniq, nums)}
    return {x: i for i, x in enumerate(uniq)}
