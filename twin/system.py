"""Machine descriptions (`SystemSpec`) loaded from TOML files.

Built-in machines live in ``twin/systems/<name>.toml``. A file has a ``[system]`` table (``name``,
``description``, ``nodes``, ``cpus_per_node``, ``gpus_per_node``) and optional ``[power]``,
``[cooling]`` and ``[network]`` tables, validated by the packages that use them (``power``,
``topology``). Every constant carries its source in a comment of the file.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SYSTEMS_DIR = Path(__file__).parent / "systems"


class SystemError_(ValueError):
    """A machine description that cannot be used (unknown name, bad file, bad key)."""


@dataclass
class SystemSpec:
    """A machine: node count and per-node resources, plus the physics tables as dicts."""

    name: str
    nodes: int
    cpus_per_node: int = 1
    gpus_per_node: int = 0
    description: str = ""
    path: str = ""
    power: dict[str, Any] = field(default_factory=dict)
    cooling: dict[str, Any] = field(default_factory=dict)
    network: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)


def builtin_systems() -> list[str]:
    """Names of the built-in machines (file stems in ``twin/systems``)."""
    return sorted(p.stem for p in SYSTEMS_DIR.glob("*.toml"))


def load_system(name_or_path: str) -> SystemSpec:
    """Load a built-in machine by name or a TOML file by path.

    Raises `SystemError_` naming the file and key for an unknown name, a missing file, a TOML syntax
    error, or a missing/invalid ``[system]`` key.
    """
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.exists():
        path = p
        if not path.exists():
            raise SystemError_(f"system file {path}: not found")
    else:
        path = SYSTEMS_DIR / f"{name_or_path}.toml"
        if not path.exists():
            raise SystemError_(f"unknown system {name_or_path!r}; built-in systems: "
                               f"{', '.join(builtin_systems()) or '(none)'}; or give a path to a .toml file")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise SystemError_(f"system file {path}: TOML syntax error: {e}") from None
    sysd = raw.get("system")
    if not isinstance(sysd, dict):
        raise SystemError_(f"system file {path}: missing [system] table")

    def int_key(key: str, default: int | None = None, minimum: int = 0) -> int:
        if key not in sysd:
            if default is None:
                raise SystemError_(f"system file {path}: [system] key {key!r} is missing")
            return default
        v = sysd[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise SystemError_(f"system file {path}: [system] key {key!r} must be an integer >= {minimum}, got {v!r}")
        return v

    return SystemSpec(
        name=str(sysd.get("name", path.stem)),
        nodes=int_key("nodes", minimum=1),
        cpus_per_node=int_key("cpus_per_node", 1, minimum=1),
        gpus_per_node=int_key("gpus_per_node", 0),
        description=str(sysd.get("description", "")),
        path=str(path),
        power=dict(raw.get("power", {})),
        cooling=dict(raw.get("cooling", {})),
        network=dict(raw.get("network", {})),
        raw=raw,
    )
