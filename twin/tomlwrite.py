"""TOML text of run configurations, written by tomli-w (the TOML writer that pairs with tomllib).

`dumps` first turns the configuration into what TOML can hold: None values are omitted (TOML has no
null), tuples become lists, numpy scalars Python booleans and numbers, and anything else (paths, names) its ``str``.
tomli-w does the rest (escaping of every control character, quoted keys, table headers), and keys keep
their insertion order, so the same configuration gives the same bytes.
"""
from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import tomli_w


def _plain(v: Any) -> Any:
    """``v`` as TOML values: dicts without None values, lists, bool, int, float, str."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items() if x is not None}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v if x is not None]
    if isinstance(v, (bool, str)):
        return v
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return float(v)
    return str(v)


def dumps(data: dict[str, Any]) -> str:
    """Serialise a configuration dict to TOML text (see the module docstring for the conversions)."""
    return tomli_w.dumps(_plain(data))

