"""A small TOML writer for run configurations (tables of scalars, lists and nested tables).

Only what `config.toml` needs: str, int, float, bool, None (written as a comment-free empty string
is avoided: None values are omitted), lists of scalars, and nested dicts as tables. Keys are
written in insertion order, so the same config gives the same bytes.
"""
from __future__ import annotations

import math
from typing import Any


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_scalar(x) for x in v) + "]"
    s = str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{s}"'


def _key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else _scalar(k)


def dumps(data: dict[str, Any]) -> str:
    """Serialise a dict to TOML text."""
    lines: list[str] = []

    def table(d: dict[str, Any], prefix: str) -> None:
        scalars = [(k, v) for k, v in d.items() if not isinstance(v, dict) and v is not None]
        subs = [(k, v) for k, v in d.items() if isinstance(v, dict)]
        if prefix and (scalars or not subs):
            lines.append(f"[{prefix}]")
        for k, v in scalars:
            lines.append(f"{_key(k)} = {_scalar(v)}")
        if scalars:
            lines.append("")
        for k, v in subs:
            table(v, f"{prefix}.{_key(k)}" if prefix else _key(k))

    table(data, "")
    return "\n".join(lines).rstrip() + "\n"
