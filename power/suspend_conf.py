"""Slurm 22.05's power-saving keys of a ``slurm.conf``, read for the ``power_saving`` model.

The Slurm-like scheduler's parser (`schedulers.slurm_conf`) reads the scheduling keys; this module
reads the power-saving ones from the same file, with their lines: ``SuspendTime``,
``SuspendTimeout``, ``ResumeTimeout``, ``SuspendRate``, ``ResumeRate``, ``SuspendExcNodes``,
``SuspendExcParts``, ``SuspendProgram``/``ResumeProgram`` (only whether they are set) and the
``PartitionName`` attributes ``SuspendTime``, ``SuspendTimeout``, ``ResumeTimeout``. Node names and
partition node lists come from `schedulers.slurm_conf.load_slurm_conf` (one reading of them).

Values as Slurm 22.05 reads them (``src/common/read_config.c``): ``SuspendTime`` is a string,
``NONE``/``INFINITE``/``-1`` = off, else whole seconds; the timeouts and rates are ``uint16``
(0..65535; seconds, nodes per minute). A malformed value is a `SuspendConfError` naming
``file:line: key``.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from hpctwin.twin.errors import RunConfigError

#: the global keys read here (slurm.conf spelling)
GLOBAL_KEYS = ("SuspendTime", "SuspendTimeout", "ResumeTimeout", "SuspendRate", "ResumeRate",
               "SuspendExcNodes", "SuspendExcParts", "SuspendProgram", "ResumeProgram")
#: the PartitionName attributes read here (22.05 ``slurm_conf_partition_options``)
PART_KEYS = ("SuspendTime", "SuspendTimeout", "ResumeTimeout")


class SuspendConfError(RunConfigError):
    """A power-saving key of a slurm.conf (or option) that cannot be used; names file, line and key."""


@dataclass
class SuspendConf:
    """The power-saving keys of one slurm.conf: ``values[key] = (value, line)`` (raw text, parsed by
    `parse_value`); ``partitions[name] = {key: (value, line)}`` for the partition attributes and
    ``part_nodes[name]`` its node names (None = ALL); ``node_names`` in NodeName order."""

    path: str
    values: dict[str, tuple[str, int]] = field(default_factory=dict)
    partitions: dict[str, dict[str, tuple[str, int]]] = field(default_factory=dict)
    part_nodes: dict[str, list[str] | None] = field(default_factory=dict)
    part_lines: dict[str, int] = field(default_factory=dict)
    node_names: list[str] = field(default_factory=list)

    def where(self, line: int, key: str) -> str:
        return f"{self.path}:{line}: {key}"


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """slurm.conf logical lines (``#`` comments dropped, ``\\`` continuations joined), with their first line."""
    out, buf, start = [], "", 0
    for i, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].rstrip()
        if not buf:
            start = i
        if line.endswith("\\"):
            buf += line[:-1]
            continue
        buf += line
        if buf.strip():
            out.append((start, buf.strip()))
        buf = ""
    if buf.strip():
        out.append((start, buf.strip()))
    return out


_PAIR = re.compile(r'(\S+?)=("([^"]*)"|\S*)')


def read_suspend_conf(path: str | Path) -> SuspendConf:
    """The power-saving keys of slurm.conf ``path`` (see the module docstring)."""
    from hpctwin.schedulers.slurm_conf import load_slurm_conf  # noqa: PLC0415 - the scheduler package, on demand
    p = Path(path)
    cfg = load_slurm_conf(p)                   # validates the file; names, partitions
    out = SuspendConf(path=str(p), node_names=list(cfg.node_names))
    lower = {k.lower(): k for k in GLOBAL_KEYS}
    part_lower = {k.lower(): k for k in PART_KEYS}
    default: dict[str, tuple[str, int]] = {}
    for ln, line in _logical_lines(p.read_text()):
        key, _, rest = line.partition("=")
        k = key.strip().lower()
        if k in lower:
            v = rest.strip()
            if len(v) >= 2 and v[0] == v[-1] == '"':
                v = v[1:-1]
            out.values[lower[k]] = (v.strip(), ln)
        elif k == "partitionname":
            pairs = [(m.group(1), m.group(3) if m.group(3) is not None else m.group(2)) for m in _PAIR.finditer(line)]
            name = pairs[0][1]
            attrs = {part_lower[a.lower()]: (v, ln) for a, v in pairs[1:] if a.lower() in part_lower}
            if name.upper() == "DEFAULT":
                default.update(attrs)
                continue
            out.partitions[name] = {**default, **attrs}
            out.part_lines[name] = ln
    for pd in cfg.partitions:
        out.part_nodes[pd.name] = None if pd.nodes is None else list(pd.nodes)
    return out


def parse_suspend_time(text: str, where: str) -> float:
    """``SuspendTime``: seconds (>= 0), or inf for ``NONE``/``INFINITE``/``-1`` (off)."""
    s = str(text).strip()
    if s.upper() in ("NONE", "INFINITE", "-1"):
        return math.inf
    if not re.fullmatch(r"\d+", s) or int(s) > 2 ** 32 - 2:
        raise SuspendConfError(f"{where}: expected whole seconds >= 0 or NONE/INFINITE/-1 (off), got {text!r}")
    return float(int(s))


def parse_uint16(text: str, where: str, what: str) -> int:
    """A ``uint16`` key (0..65535) as Slurm reads it (``s_p_get_uint16``)."""
    s = str(text).strip()
    if not re.fullmatch(r"\d+", s) or int(s) > 65535:
        raise SuspendConfError(f"{where}: expected {what}, a whole number 0..65535, got {text!r}")
    return int(s)
