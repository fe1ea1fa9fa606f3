"""The schema kit: how one value, one table or one key=value file is checked, with located errors.

Foundation of the configuration layer (it imports no other project module but `twin.errors` and
`twin.workload`'s bounds): `Key` (type, range, choices of one value), `check_table` (known keys and
values of one table), `check_known_keys` (a key=value file such as slurm.conf), `toml_line` (the line of
a key in a TOML text), `where` (``file:line``), `did_you_mean` (difflib) and `ConfigError`, whose text
reads ``file:line: key: message (did you mean ...?)``. The run-level checks that use the plug-in tables
are `twin.options`; readers (`datasets`), the system loader and the tables themselves import this module,
never `twin.options`.
"""
from __future__ import annotations

import difflib
import math
import numbers
import re
from dataclasses import dataclass
from typing import Any, Iterable

from .errors import RunConfigError

#: most samples a time series may hold (float32/int32 arrays: 400 MB each at this bound)
MAX_SAMPLES = 100_000_000
#: largest seed (seeds feed numpy's SeedSequence, which takes non-negative integers)
MAX_SEED = 2 ** 63 - 1


class ConfigError(RunConfigError):
    """A configuration value, key or table that cannot be used; the text names where and which."""


def did_you_mean(name: object, choices: Iterable[str], n: int = 3) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices`` (case-insensitive), else ``""``."""
    choices = [str(c) for c in choices]
    low = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(str(name).lower(), list(low), n=n, cutoff=0.6)
    if not hits:
        return ""
    return " (did you mean " + " or ".join(repr(low[h]) for h in hits) + "?)"


def _num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) >= 1000 else f"{x:g}"


def where(source: str, line: int | None = None) -> str:
    """``file:line`` (or ``file`` when the line is unknown)."""
    return f"{source}:{line}" if line else source


@dataclass(frozen=True)
class Key:
    """The schema of one value: its type, an inclusive range, or a set of choices.

    ``kind`` is ``int``, ``float`` (an int is accepted), ``bool``, ``str`` or ``"any"``;
    ``nullable`` accepts None (TOML has no null, so only Python callers pass it).
    """

    kind: Any
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple | None = None
    nullable: bool = False
    exclusive_min: bool = False

    def check(self, value: Any, label: str) -> Any:
        """``value`` (an int widened to float for float keys), or ConfigError naming ``label``."""
        if value is None and self.nullable:
            return None
        k = self.kind
        if k == "any":
            return value
        if k is bool:
            if not isinstance(value, bool):
                raise ConfigError(f"{label}: expected true or false, got {value!r}")
            return value
        if k is int:                            # a numpy integer from Python callers too
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise ConfigError(f"{label}: expected an integer, got {value!r}")
        elif k is float:
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ConfigError(f"{label}: expected a number, got {value!r}")
            if not math.isfinite(value):
                raise ConfigError(f"{label}: expected a finite number, got {value!r}")
            value = float(value)
        elif k is str:
            if not isinstance(value, str):
                raise ConfigError(f"{label}: expected a string, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise ConfigError(f"{label}: {value!r} is not one of {', '.join(map(str, self.choices))}"
                              f"{did_you_mean(value, map(str, self.choices))}")
        if self.minimum is not None and (value < self.minimum or (self.exclusive_min and value == self.minimum)):
            raise ConfigError(f"{label}: {value!r} must be {'>' if self.exclusive_min else '>='} {_num(self.minimum)}")
        if self.maximum is not None and value > self.maximum:
            raise ConfigError(f"{label}: {value!r} must be <= {_num(self.maximum)}")
        return value


def toml_line(text: str | None, table: str, key: str | None = None) -> int | None:
    """1-based line of ``[table]`` (``key`` None) or of ``key = ...`` inside it, in a TOML text.

    ``table`` "" is the top level; dotted tables (``[a.b]``) are matched by their full name.
    A best-effort scan (no TOML re-parse): None when not found.
    """
    if not text:
        return None
    current = ""
    for i, raw in enumerate(text.split("\n"), start=1):
        s = raw.strip()
        m = re.match(r"^\[\[?\s*([^\]]+?)\s*\]\]?", s)
        if m:
            current = m.group(1).replace('"', "").replace("'", "").replace(" ", "")
            if key is None and current == table:
                return i
            continue
        if key is not None and current == table:
            km = re.match(r"""^["']?([A-Za-z0-9_.\-]+)["']?\s*=""", s)
            if km and km.group(1) == key:
                return i
    return None


def check_table(table: dict, schema: dict[str, Key], source: str, *, section: str = "",
                text: str | None = None, context: str = "") -> dict:
    """Check a table's keys against ``schema``: unknown keys (with suggestions) and each value.

    Returns a new dict with checked (widened) values. ``section`` prefixes key names in the
    messages (``power.sample_dt``); ``text`` (the file's TOML text) gives line numbers;
    ``context`` is appended to the unknown-key message (e.g. "of scheduler llm").
    """
    if not isinstance(table, dict):
        raise ConfigError(f"{where(source, toml_line(text, section))}: {section or 'table'}: expected a table, "
                          f"got {table!r}")
    out = {}
    for k, v in table.items():
        label = f"{section}.{k}" if section else str(k)
        line = toml_line(text, section, k)
        if k not in schema:
            known = ", ".join(sorted(schema)) or "(none)"
            raise ConfigError(f"{where(source, line)}: {label}: unknown key{(' ' + context) if context else ''}"
                              f"{did_you_mean(k, schema)}; known: {known}")
        out[k] = schema[k].check(v, f"{where(source, line)}: {label}")
    return out



def check_known_keys(found: dict[str, int | None], known: Iterable[str], source: str, *,
                     what: str = "key", case_insensitive: bool = False) -> None:
    """The generic part of a key=value file check (slurm.conf, accounts files...): ``found`` maps
    each key read to its line; the first unknown one is a `ConfigError` ``file:line: key: unknown
    <what> (did you mean ...?)``. ``case_insensitive`` for formats such as slurm.conf."""
    known = list(known)
    ref = {k.lower(): k for k in known} if case_insensitive else {k: k for k in known}
    for key, line in found.items():
        if (key.lower() if case_insensitive else key) not in ref:
            raise ConfigError(f"{where(source, line)}: {key}: unknown {what}{did_you_mean(key, known)}")


def shown_value(v: object) -> str:
    """``v`` as the input wrote it (JSON's spelling of the special floats, booleans and null), for messages."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return repr(v)
