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
    """A machine: node count and per-node resources, plus the physics tables as dicts.

    Examples
    --------
    >>> import hpctwin
    >>> s = hpctwin.load_system("frontier")
    >>> s.name, s.nodes, s.gpus_per_node, "power" in s.raw
    ('frontier', 9408, 4, True)
    >>> hpctwin.SystemSpec(name="tiny", nodes=4).cpus_per_node
    1
    """

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
    """Names of the built-in machines (file stems in ``twin/systems``).

    Examples
    --------
    >>> import hpctwin
    >>> names = hpctwin.builtin_systems()
    >>> "frontier" in names, "generic" in names, names == sorted(names)
    (True, True, True)
    """
    return sorted(p.stem for p in SYSTEMS_DIR.glob("*.toml"))


#: tables a system file may have (the physics tables are checked by the packages that use them)
TABLES = ("system", "power", "cooling", "network")


def _system_schema():
    from .schema import Key  # noqa: PLC0415
    from .workload import MAX_UNITS  # noqa: PLC0415
    return {"name": Key(str), "description": Key(str), "nodes": Key(int, 1, MAX_UNITS),
            "cpus_per_node": Key(int, 1, 1 << 20), "gpus_per_node": Key(int, 0, 4096)}


def _check_physics(raw: dict, path: Path, text: str, nodes: int, cpn: int, gpn: int) -> None:
    """Unknown keys of [power] and [cooling] are errors at load time, not only when ``--power on``
    reads them (their values are checked then, by `power.config`)."""
    from .schema import did_you_mean, toml_line, where  # noqa: PLC0415
    try:
        from hpctwin.power.config import PowerConfigError, parse_cooling, parse_power  # noqa: PLC0415
    except ImportError:  # pragma: no cover
        return
    for table, parse in (("power", lambda t: parse_power(t, nodes=nodes, cpus_per_node=cpn, gpus_per_node=gpn,
                                                          path=str(path))),
                         ("cooling", lambda t: parse_cooling(t, path=str(path)))):
        if table not in raw:
            continue
        if not isinstance(raw[table], dict):
            raise SystemError_(f"{where(str(path), toml_line(text, '', table))}: {table}: expected a table")
        try:
            parse(dict(raw[table]))
        except PowerConfigError as e:
            msg = str(e)
            if "unknown key" not in msg:
                continue                         # bad values are reported when --power on reads them
            bad = next((k for k in raw[table] if f"'{k}'" in msg), None)
            line = toml_line(text, table, bad) if bad else toml_line(text, table)
            known = msg.split("known keys: ", 1)[1].split(", ") if "known keys: " in msg else []
            hint = did_you_mean(bad, known) if bad and known else ""
            detail = msg.split(": ", 1)[1] if msg.startswith("system file") else msg
            raise SystemError_(f"{where(str(path), line)}: {table}{'.' + bad if bad else ''}: {detail}{hint}") from None


def load_system(name_or_path: str) -> SystemSpec:
    """Load a built-in machine by name or a TOML file by path.

    Raises `SystemError_` naming ``file:line: key`` (with "did you mean" suggestions) for an
    unknown name, a missing file, a TOML syntax error, an unknown table or key, or a value of the
    wrong type or out of range (``nodes`` at most `twin.workload.MAX_UNITS`).

    Examples
    --------
    >>> import hpctwin
    >>> s = hpctwin.load_system("generic")
    >>> s.name, s.nodes
    ('generic', 256)
    >>> try:
    ...     hpctwin.load_system("fronteir")
    ... except ValueError as e:
    ...     print(e)
    unknown system 'fronteir' (did you mean 'frontier'?); built-in systems: ...; or give a path to a .toml file
    """
    from .schema import ConfigError, check_table, did_you_mean, toml_line, where  # noqa: PLC0415
    if not isinstance(name_or_path, str) or not name_or_path.strip():
        raise SystemError_("--system: empty system name")
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.exists():
        path = p
        if p.is_dir():
            raise SystemError_(f"system file {path}: is a directory")
        if not path.exists():
            raise SystemError_(f"system file {path}: not found")
        if not path.is_file():
            raise SystemError_(f"system file {path}: not a regular file")
    else:
        path = SYSTEMS_DIR / f"{name_or_path}.toml"
        if not path.exists():
            known = builtin_systems()
            raise SystemError_(f"unknown system {name_or_path!r}{did_you_mean(name_or_path, known)}; built-in "
                               f"systems: {', '.join(known) or '(none)'}; or give a path to a .toml file")
    try:
        text = path.read_bytes().decode("utf-8-sig")
        raw = tomllib.loads(text)
    except (UnicodeDecodeError, OSError) as e:
        raise SystemError_(f"system file {path}: cannot read: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise SystemError_(f"system file {path}: TOML syntax error: {e}") from None
    for table in raw:
        if table not in TABLES:
            raise SystemError_(f"{where(str(path), toml_line(text, table) or toml_line(text, '', table))}: "
                               f"{table}: unknown table{did_you_mean(table, TABLES)}; known: {', '.join(TABLES)}")
    sysd = raw.get("system")
    if not isinstance(sysd, dict):
        raise SystemError_(f"system file {path}: missing [system] table")
    try:
        sysd = check_table(sysd, _system_schema(), str(path), section="system", text=text)
    except ConfigError as e:
        raise SystemError_(str(e)) from None
    if "nodes" not in sysd:
        raise SystemError_(f"{where(str(path), toml_line(text, 'system'))}: system.nodes: missing (the node count)")
    nodes, cpn, gpn = sysd["nodes"], sysd.get("cpus_per_node", 1), sysd.get("gpus_per_node", 0)
    if gpn and nodes * gpn > (1 << 26):
        raise SystemError_(f"{where(str(path), toml_line(text, 'system', 'gpus_per_node'))}: system.gpus_per_node: "
                           f"{nodes} nodes x {gpn} GPUs is more than {1 << 26:,} units")
    _check_physics(raw, path, text, nodes, cpn, gpn)
    return SystemSpec(
        name=str(sysd.get("name", path.stem)),
        nodes=nodes,
        cpus_per_node=cpn,
        gpus_per_node=gpn,
        description=str(sysd.get("description", "")),
        path=str(path),
        power=dict(raw.get("power", {})),
        cooling=dict(raw.get("cooling", {})),
        network=dict(raw.get("network", {})),
        raw=raw,
    )
