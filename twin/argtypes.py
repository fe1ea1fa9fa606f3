"""argparse value types of the command line (no heavy import: the parser is built by every command).

`on_off` (``--power on``), `key_value` (``--set KEY=VALUE``) and `whole_number` (``--max-jobs N``).
"""
from __future__ import annotations

import argparse
from typing import Callable


def on_off(v: str) -> bool:
    """``on``/``off`` (also yes/no, true/false, 1/0) as a bool, for argparse."""
    if v.lower() in ("on", "yes", "true", "1"):
        return True
    if v.lower() in ("off", "no", "false", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected on or off, got {v!r}")


def key_value(v: str) -> tuple[str, str]:
    """``KEY=VALUE`` as a (key, value) pair of stripped strings, for argparse."""
    if "=" not in v:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {v!r}")
    k, val = v.split("=", 1)
    return k.strip(), val.strip()


def whole_number(low: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= ``low`` (--max-jobs >= 1, --skip-jobs >= 0)."""
    def parse(v: str) -> int:
        try:
            n = int(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {low}, got {v!r}") from None
        if n < low:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {low}, got {n}")
        return n
    return parse
