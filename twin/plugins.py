"""The plug-in table kit: one declarative table per plug-in kind, options spelled once.

An `Entry` names one plug-in: its ``factory`` (a callable, or a lazy ``"module:attr"`` string imported
only when the entry is used), its ``options`` (see below), what it ``requires`` and its ``tags`` (a
kind's own vocabulary, documented where the kind's table is). A `Table` holds the entries of one
kind: `Table.register`, `Table.lookup` (an unknown name is a `RunConfigError` with a did-you-mean
suggestion and the known names), iteration, and entry-point plug-ins (an ``importlib.metadata``
group) read once and loaded on first use.

Options are declared once, as a dataclass whose fields carry `option` metadata (unit, minimum,
maximum, choices, help). Everything else is derived from it: `option_keys` gives the schema the
``--set SECTION.KEY`` checks and the ``[options.SECTION]`` checks of config and sweep files use
(`twin.options.Key`), `option_help` the help lines. Where a plug-in's constructor already is the one
spelling of its options (the schedulers' keyword arguments), `Signature` derives the schema from it
instead of repeating it in a dataclass.

The tables (docs/architecture.md section 7): ``schedulers.registry.SCHEDULERS``, ``twin.models.MODELS``,
``topology.placement.PLACEMENTS``, ``twin.allocation.ALLOCATIONS``.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import types
import typing
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping

from .errors import RunConfigError
from .schema import Key, did_you_mean


class UnknownNameError(RunConfigError):
    """A name no entry of a table answers to (the message lists the known names)."""


# ---------------------------------------------------------------------- options declared once
def option(default: Any = MISSING, *, default_factory: Any = MISSING, help: str = "", unit: str = "",
           minimum: float | None = None, maximum: float | None = None, exclusive_min: bool = False,
           choices: Iterable | None = None, kind: Any = None) -> Any:
    """A dataclass field of an options dataclass: its default and how a value is checked.

    ``unit`` (``"s"``, ``"W"``, ``"bytes"``...) and ``help`` are shown by `option_help`; ``minimum``,
    ``maximum`` (inclusive, ``exclusive_min`` makes the minimum strict) and ``choices`` are checked by
    `option_keys`' schema; ``kind`` overrides the type read from the annotation (``"any"``: unchecked).
    """
    meta = {"help": help, "unit": unit, "minimum": minimum, "maximum": maximum, "exclusive_min": exclusive_min,
            "choices": None if choices is None else tuple(choices), "kind": kind}
    return field(default=default, default_factory=default_factory, metadata={"option": meta})


_SCALARS = (bool, int, float, str)


def _kind(tp: Any) -> tuple[Any, bool]:
    """(Key kind, nullable) of a type annotation: bool/int/float/str, ``X | None``, else ``"any"``."""
    if tp in _SCALARS:
        return tp, False
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1 and rest[0] in _SCALARS:
            return rest[0], True
        return "any", True
    return "any", False


def option_keys(options_type: type) -> dict[str, Key]:
    """The schema of an options dataclass: one `Key` a field (type from the annotation, range and
    choices from its `option` metadata)."""
    hints = typing.get_type_hints(options_type)
    out = {}
    for f in fields(options_type):
        meta = f.metadata.get("option", {})
        kind, nullable = _kind(hints.get(f.name))
        out[f.name] = Key(meta.get("kind") or kind, meta.get("minimum"), meta.get("maximum"), meta.get("choices"),
                          nullable or f.default is None, bool(meta.get("exclusive_min")))
    return out


def option_help(options_type: type) -> list[str]:
    """One line an option: ``name = default (unit; range or choices): help``."""
    lines = []
    for f in fields(options_type):
        meta = f.metadata.get("option", {})
        default = f.default if f.default is not MISSING else "(computed)"
        facts = [x for x in (meta.get("unit"), _range_text(meta)) if x]
        lines.append(f"{f.name} = {default!r}" + (f" ({'; '.join(facts)})" if facts else "")
                     + (f": {meta['help']}" if meta.get("help") else ""))
    return lines


def _range_text(meta: Mapping) -> str:
    if meta.get("choices"):
        return "one of " + ", ".join(map(str, meta["choices"]))
    lo, hi = meta.get("minimum"), meta.get("maximum")
    if lo is None and hi is None:
        return ""
    op = ">" if meta.get("exclusive_min") else ">="
    parts = (f"{op} {lo:g}" if lo is not None else "", f"<= {hi:g}" if hi is not None else "")
    return " and ".join(x for x in parts if x)


def signature_keys(obj: Any, exclude: Iterable[str] = ()) -> dict[str, Key] | None:
    """Keyword parameters of a constructor (walking the MRO through ``**kw`` pass-throughs) as a
    schema typed by their defaults (bool, float; others unchecked); None when it takes any keyword."""
    exclude = set(exclude)
    classes = list(obj.__mro__) if inspect.isclass(obj) else [obj]
    keys: dict[str, Key] = {}
    for c in classes:
        if inspect.isclass(c) and "__init__" not in vars(c):
            continue
        fn = c.__init__ if inspect.isclass(c) else c
        if fn is object.__init__:
            break
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            return None
        var_kw = False
        for name, prm in params.items():
            if name == "self" or prm.kind == prm.VAR_POSITIONAL:
                continue
            if prm.kind == prm.VAR_KEYWORD:
                var_kw = True
                continue
            if name in exclude or name in keys:
                continue
            d = prm.default
            # a str default is unchecked too: several options take a str or a number ("daly" or 3600)
            keys[name] = Key(bool) if isinstance(d, bool) else Key(float) if isinstance(d, float) else Key("any")
        if not var_kw:
            return keys
    return None if not keys else keys


@dataclass(frozen=True)
class Signature:
    """Options read from a constructor's keyword parameters (`signature_keys`), for plug-ins whose
    constructor is the one spelling of their options. ``target``: the callable or ``"module:attr"``."""

    target: Any
    exclude: tuple[str, ...] = ()

    def keys(self) -> dict[str, Key] | None:
        return signature_keys(resolve(self.target), self.exclude)


#: ``Entry.options`` value of a plug-in that validates its own options (any key is passed on)
ANY_OPTIONS = "any"


def schema_of(options: Any) -> dict[str, Key] | None:
    """The `Key` schema of an entry's ``options``: None (takes none) -> {}; `ANY_OPTIONS` -> None
    (any key); an options dataclass -> `option_keys`; a `Signature` -> its keys; a callable -> its
    result (a lazy schema)."""
    if options is None:
        return {}
    if options == ANY_OPTIONS:
        return None
    if isinstance(options, str):
        options = resolve(options)
    if is_dataclass(options) and isinstance(options, type):
        return option_keys(options)
    if isinstance(options, Signature):
        return options.keys()
    return options()


# ---------------------------------------------------------------------- entries and tables
def resolve(spec: Any) -> Any:
    """``spec`` itself, or the object a trusted ``"module:attr"`` string names (imported now)."""
    if not isinstance(spec, str):
        return spec
    mod_name, _, attr = spec.partition(":")
    obj = importlib.import_module(mod_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Entry:
    """One plug-in of a table (see the module docstring). ``prefix``: the name is a prefix
    (``exec:`` answers for ``exec:CMD``)."""

    name: str
    factory: Any = None
    options: Any = None
    requires: Any = ()
    tags: Mapping[str, Any] = field(default_factory=dict, compare=False)
    doc: str = field(default="", compare=False)
    prefix: bool = False

    def load(self) -> Any:
        """The factory (imported on first use when given as ``"module:attr"``)."""
        return resolve(self.factory)

    def option_schema(self) -> dict[str, Key] | None:
        """The options' `Key` schema (`schema_of`): {} takes none, None takes any key."""
        return schema_of(self.options)

    def tag(self, key: str, default: Any = None) -> Any:
        return self.tags.get(key, default)


class Table:
    """The entries of one plug-in kind, in registration order, plus an entry-point group.

    ``from_plugin(name, loaded object) -> entry`` turns what an entry point loads into an entry;
    ``resolver(name) -> entry | None`` answers names no entry has (``module:Class``); ``error`` is
    the class raised by `lookup`, ``hint`` ends its message (", or module:Class ...").
    """

    def __init__(self, kind: str, *, group: str | None = None, from_plugin: Callable[[str, Any], Any] | None = None,
                 resolver: Callable[[str], Any] | None = None, error: type[Exception] = UnknownNameError,
                 hint: str = ""):
        self.kind, self.group, self.hint = kind, group, hint
        self._from_plugin, self._resolver, self.error = from_plugin, resolver, error
        self._entries: dict[str, Any] = {}
        self._loaded: dict[str, Any] = {}

    def register(self, entry: Any) -> Any:
        """Add ``entry`` (its name must be new); returns it."""
        if entry.name in self._entries:
            raise ValueError(f"{self.kind} {entry.name!r} is registered twice")
        self._entries[entry.name] = entry
        return entry

    def unregister(self, name: str) -> Any:
        """Remove and return the entry ``name`` (tests and interactive sessions)."""
        return self._entries.pop(name)

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._entries.values()))

    def __len__(self) -> int:
        return len(self._entries)

    def names(self, plugins: bool = True) -> list[str]:
        """Registered names (a prefix entry is not a name), then those of the entry-point group (not loaded)."""
        out = [n for n, e in self._entries.items() if not getattr(e, "prefix", False)]
        if plugins:
            out += [n for n in self.plugin_names() if n not in self._entries]
        return out

    def plugin_names(self) -> list[str]:
        return list(self._plugin_points())

    def _plugin_points(self) -> dict[str, Any]:
        return _entry_points(self.group) if self.group else {}

    def plugin(self, name: str) -> Any:
        """The entry of entry point ``name`` (loaded and converted on first use), or None."""
        if name in self._loaded:
            return self._loaded[name]
        ep = self._plugin_points().get(name)
        if ep is None:
            return None
        entry = self._from_plugin(name, ep) if self._from_plugin else ep.load()
        self._loaded[name] = entry
        return entry

    def plugins(self) -> list[Any]:
        """Every entry-point entry, loaded."""
        return [self.plugin(n) for n in self.plugin_names() if n not in self._entries]

    def get(self, name: str, resolve: bool = True) -> Any:
        """The entry answering ``name``: registered, a prefix entry, an entry point, the resolver's (only
        with ``resolve``: it may import code the name points to); else None."""
        if name in self._entries:
            return self._entries[name]
        for e in self._entries.values():
            if getattr(e, "prefix", False) and name.startswith(e.name):
                return e
        if name in self._plugin_points():
            return self.plugin(name)
        return self._resolver(name) if self._resolver and resolve else None

    def lookup(self, name: str) -> Any:
        """`get`, or ``error``: ``unknown KIND 'x' (did you mean 'y'?); known: ...``."""
        entry = self.get(name)
        if entry is None:
            known = self.names()
            raise self.error(f"unknown {self.kind} {name!r}{did_you_mean(name, known)}; known: "
                             f"{', '.join(known)}{self.hint}")
        return entry

    def cache_clear(self) -> None:
        """Forget loaded entry points (and the installed-metadata scan), e.g. after installing a plug-in."""
        self._loaded.clear()
        _entry_points.cache_clear()


@functools.lru_cache(maxsize=None)
def _entry_points(group: str) -> dict[str, Any]:
    """The group's entry points by name, read once per process (scanning metadata costs ~20 ms)."""
    from importlib import metadata  # noqa: PLC0415 - ~12 ms of imports, only when a name is not in a table
    try:
        return {ep.name: ep for ep in metadata.entry_points(group=group)}
    except Exception:  # noqa: BLE001  # pragma: no cover - broken environment metadata
        return {}
