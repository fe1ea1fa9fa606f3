"""Machine descriptions (`SystemSpec`) loaded from TOML files.

Built-in machines live in ``twin/systems/<name>.toml``. A file has a ``[system]`` table (``name``,
``description``, ``nodes``, ``cpus_per_node``, ``gpus_per_node``) and optional ``[power]``,
``[cooling]`` and ``[network]`` tables, validated by the packages that use them (``power``,
``topology``). Every constant carries its source in a comment of the file.

A machine of several node types declares them as ``[[node_groups]]`` tables, in node order (the
first group holds nodes ``0 .. nodes-1`` and so on; their ``nodes`` add up to ``[system] nodes``):
``name`` and ``nodes`` (required), ``cpus_per_node``, ``gpus_per_node`` (default: the ``[system]``
values), ``description``, and the node figures of the ``[power]`` table that differ for the group
(`NODE_GROUP_POWER_KEYS`: device idle and maximum watts, memory, NICs, NVMe, other, the sleep-state
watts); the rest of ``[power]`` (conversion chain, layout, prices) is the machine's. The power model
then uses each group's figures for its nodes.
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
    #: ``[[node_groups]]`` in node order: dicts with ``name``, ``nodes``, ``cpus_per_node``,
    #: ``gpus_per_node``, ``description``, ``power`` (the group's [power] node figures), ``line``
    node_groups: list[dict[str, Any]] = field(default_factory=list)


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
TABLES = ("system", "power", "cooling", "network", "node_groups")

#: the ``[power]`` node figures a ``[[node_groups]]`` table may set for its nodes (W; NICs a count)
NODE_GROUP_POWER_KEYS = ("cpu_idle_w", "cpu_max_w", "gpu_idle_w", "gpu_max_w", "mem_w", "nic_w", "nics_per_node",
                         "nvme_w", "other_w", "node_off_w", "node_boot_w", "node_shutdown_w")


def _system_schema():
    from .schema import Key  # noqa: PLC0415
    from .workload import MAX_UNITS  # noqa: PLC0415
    return {"name": Key(str), "description": Key(str), "nodes": Key(int, 1, MAX_UNITS),
            "cpus_per_node": Key(int, 1, 1 << 20), "gpus_per_node": Key(int, 0, 4096)}


def _group_lines(text: str) -> list[tuple[int, dict[str, int]]]:
    """Per ``[[node_groups]]`` table of a TOML text: its header line and the line of each key in it."""
    import re  # noqa: PLC0415
    out: list[tuple[int, dict[str, int]]] = []
    inside = False
    for i, raw in enumerate(text.split("\n"), start=1):
        s = raw.strip()
        if s.startswith("["):
            inside = re.match(r"^\[\[\s*node_groups\s*\]\]", s) is not None
            if inside:
                out.append((i, {}))
            continue
        m = re.match(r"""^["']?([A-Za-z0-9_\-]+)["']?\s*=""", s)
        if inside and m:
            out[-1][1].setdefault(m.group(1), i)
    return out


def _node_groups(raw: dict, path: Path, text: str, nodes: int, cpn: int, gpn: int) -> list[dict[str, Any]]:
    """The checked ``[[node_groups]]`` tables (see the module docstring); errors name ``file:line: field``."""
    from .schema import ConfigError, Key, did_you_mean, toml_line, where  # noqa: PLC0415
    from .workload import MAX_UNITS  # noqa: PLC0415
    groups = raw.get("node_groups")
    if groups is None:
        return []
    if not isinstance(groups, list) or not groups or not all(isinstance(g, dict) for g in groups):
        raise SystemError_(f"{where(str(path), toml_line(text, 'node_groups') or toml_line(text, '', 'node_groups'))}: "
                           "node_groups: expected one or more [[node_groups]] tables")
    schema = {"name": Key(str), "description": Key(str), "nodes": Key(int, 1, MAX_UNITS),
              "cpus_per_node": Key(int, 1, 1 << 20), "gpus_per_node": Key(int, 0, 4096),
              **{k: Key(int, 0, 1 << 10) if k == "nics_per_node" else Key(float, 0.0) for k in NODE_GROUP_POWER_KEYS}}
    lines = _group_lines(text)
    out, names = [], set()
    for i, g in enumerate(groups):
        head, keys = lines[i] if i < len(lines) else (None, {})
        for k, v in g.items():
            label = f"{where(str(path), keys.get(k, head))}: node_groups[{i}].{k}"
            if k not in schema:
                raise SystemError_(f"{label}: unknown key{did_you_mean(k, schema)}; known: {', '.join(schema)}")
            try:
                g = {**g, k: schema[k].check(v, label)}
            except ConfigError as e:
                raise SystemError_(str(e)) from None
        for k in ("name", "nodes"):
            if k not in g:
                raise SystemError_(f"{where(str(path), head)}: node_groups[{i}].{k}: missing (every group needs a name "
                                   "and its node count)")
        if g["name"] in names:
            raise SystemError_(f"{where(str(path), keys.get('name', head))}: node_groups[{i}].name: {g['name']!r} "
                               "is used by an earlier group")
        names.add(g["name"])
        out.append({"name": g["name"], "nodes": g["nodes"], "cpus_per_node": g.get("cpus_per_node", cpn),
                    "gpus_per_node": g.get("gpus_per_node", gpn), "description": g.get("description", ""),
                    "power": {k: g[k] for k in NODE_GROUP_POWER_KEYS if k in g}, "line": head})
    total = sum(g["nodes"] for g in out)
    if total != nodes:
        raise SystemError_(f"{where(str(path), lines[0][0] if lines else None)}: node_groups: the groups have "
                           f"{total:,} nodes ({' + '.join(str(g['nodes']) for g in out)}) but [system] nodes = "
                           f"{nodes:,}; make them add up")
    if "power" in raw and isinstance(raw["power"], dict):
        from hpctwin.power.config import PowerConfigError, parse_power  # noqa: PLC0415
        for i, g in enumerate(out):
            try:
                parse_power({**raw["power"], **g["power"]}, nodes=g["nodes"], cpus_per_node=g["cpus_per_node"],
                            gpus_per_node=g["gpus_per_node"], path=str(path))
            except PowerConfigError as e:
                msg = str(e)
                detail = msg.split(": ", 1)[1] if msg.startswith("system file") else msg
                bad = next((k for k in g["power"] if f"'{k}'" in msg), None)
                line = lines[i][1].get(bad, g["line"]) if bad and i < len(lines) else g["line"]
                raise SystemError_(f"{where(str(path), line)}: node_groups[{i}] ({g['name']}): {detail} (the group's "
                                   "figures over the [power] table's)") from None
    return out


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
    groups = _node_groups(raw, path, text, nodes, cpn, gpn)
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
        node_groups=groups,
    )
