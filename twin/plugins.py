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
``topology.placement.PLACEMENTS``, ``twin.allocation.ALLOCATIONS``; and, as `OptionTable` (entries with
an options dataclass, read as a mapping ``name -> factory``, options also given as ``NAME:KEY=VALUE``
texts and derived command-line switches), the serving model's routers, autoscalers, P/D policies and
instance scheduling policies (`twin.serving.plugins`).
"""
from __future__ import annotations

import functools
import importlib
import importlib.machinery
import inspect
import os
import re
import sys
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
    """The group's entry points by name, read once per process (scanning metadata costs ~20 ms).

    `_group_declared` first reads the installed distributions' ``entry_points.txt`` files directly:
    when none of them has a ``[group]`` section the answer is {} without importing
    ``importlib.metadata`` (~12 ms); otherwise (or when it cannot tell) the metadata scan answers."""
    if _group_declared(group) is False:
        return {}
    from importlib import metadata  # noqa: PLC0415 - ~12 ms of imports, only when a group is declared
    try:
        return {ep.name: ep for ep in metadata.entry_points(group=group)}
    except Exception:  # noqa: BLE001  # pragma: no cover - broken environment metadata
        return {}


_INFO_SUFFIXES = (".dist-info", ".egg-info")
#: a header name as the ``email`` parser reads one (printable ASCII but ``:``; no space)
_HEADER_NAME = re.compile(r"[\x21-\x39\x3b-\x7e]+")


class _Unsure(Exception):
    """The cheap scan of installed metadata cannot answer exactly: ``importlib.metadata`` answers."""


def _metadata_dirs() -> Iterator[str]:
    """The ``*.dist-info`` / ``*.egg-info`` entries of the ``sys.path`` folders (full paths), in the
    order ``importlib.metadata``'s default finder sees them; `_Unsure` when that finder is not the only
    one or a ``sys.path`` entry is not a plain folder (a zip, an ``.egg``), holds an ``.egg-link``, or
    cannot be read (an absent folder is skipped, as the finder does)."""
    for finder in sys.meta_path:
        if hasattr(finder, "find_distributions") and finder is not importlib.machinery.PathFinder:
            raise _Unsure
    for root in sys.path:
        if not isinstance(root, str) or root.lower().endswith(".egg"):
            raise _Unsure
        try:
            with os.scandir(root or ".") as it:
                names = [e.name for e in it]
        except FileNotFoundError:
            continue                  # the metadata finder sees nothing there either
        except OSError:
            raise _Unsure from None
        for name in names:
            low = name.lower()
            if low.endswith(".egg-link"):
                raise _Unsure
            if low.endswith(_INFO_SUFFIXES):
                yield os.path.join(root, name)


def _group_declared(group: str) -> bool | None:
    """Whether an ``entry_points.txt`` of an installed distribution (`_metadata_dirs`) has a ``[group]``
    section; None when this cheap scan cannot tell exactly (`_Unsure`, an unreadable file...): the
    caller then asks ``importlib.metadata``. Only ever more inclusive than the metadata's parser."""
    try:
        return any(_declares(os.path.join(d, "entry_points.txt"), group) for d in _metadata_dirs())
    except (_Unsure, OSError, UnicodeDecodeError):
        return None


def _declares(path: str, group: str) -> bool:
    """Whether the ``entry_points.txt`` at ``path`` (absent: False) has a ``[group]`` section header
    (whitespace allowed inside the brackets). OSError (other than absent) and UnicodeDecodeError propagate."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except (FileNotFoundError, NotADirectoryError):    # what importlib.metadata reads as no file
        return False
    if group.encode("utf-8") not in data:
        return False
    for line in data.decode("utf-8").splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]") and line.strip("[]").strip() == group:
            return True
    return False


def distribution_version(name: str) -> str:
    """``importlib.metadata.version(name)`` (the installed version of distribution ``name``), read
    from the first matching ``*.dist-info`` / ``*.egg-info`` folder's ``METADATA`` without importing
    ``importlib.metadata`` (~12 ms) when that file is plain (one ``Version:`` header line);
    ``importlib.metadata`` answers otherwise (and raises its ``PackageNotFoundError``)."""
    try:
        return _version_from_metadata(name)
    except (_Unsure, OSError, UnicodeDecodeError):
        from importlib import metadata  # noqa: PLC0415 - ~12 ms of imports
        return metadata.version(name)


def _normalized(name: str) -> str:
    """A distribution name as ``importlib.metadata`` matches it (``Prepared.normalize``)."""
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _version_from_metadata(name: str) -> str:
    """`distribution_version` by the cheap scan; `_Unsure` when it cannot answer exactly."""
    want = _normalized(name)
    if not name or not want:
        raise _Unsure
    for d in _metadata_dirs():
        if _normalized(os.path.basename(d).lower().rpartition(".")[0].partition("-")[0]) != want:
            continue
        with open(os.path.join(d, "METADATA"), "rb") as f:    # absent: importlib.metadata reads PKG-INFO
            head = f.read().decode("utf-8").replace("\r\n", "\n").split("\n\n", 1)[0].split("\n")
        if head[-1] == "":
            head.pop()                        # the last header line's newline
        versions = []
        for line in head:
            key, colon, value = line.partition(":")
            if not colon or "\r" in line or not _HEADER_NAME.fullmatch(key):
                raise _Unsure                 # a folded, odd or non-header line: the email parser decides
            if key.lower() == "version":
                versions.append(value.lstrip(" \t"))
        if not versions:
            raise _Unsure
        return versions[0]
    raise _Unsure


# ---------------------------------------------------------------------- options of one entry, from text or a call
def options_text(options_type: type) -> str:
    """``key=default, ...`` of an options dataclass (``no options`` when it has none), for messages."""
    if options_type is None or not fields(options_type):
        return "no options"
    return ", ".join(f.name for f in fields(options_type))


def build_options(options_type: type | None, given: Mapping[str, Any], label: str) -> Any:
    """An instance of the options dataclass ``options_type`` from ``given`` (name -> value): every value
    checked by its `option_keys` schema (type, range, choices), the defaults of the keys not given, and a
    `RunConfigError` ``LABEL: unknown option 'x' (did you mean 'y'?); it takes: ...`` or ``LABEL: option
    'x' is needed`` otherwise. ``options_type`` None takes no option (returns None)."""
    if options_type is None:
        if given:
            raise RunConfigError(f"{label}: unknown option {next(iter(given))!r}; it takes: no options")
        return None
    schema = option_keys(options_type)
    kw = {}
    for k, v in given.items():
        if k not in schema:
            raise RunConfigError(f"{label}: unknown option {k!r}{did_you_mean(k, schema)}; it takes: "
                                 f"{options_text(options_type)}")
        kw[k] = schema[k].check(v, f"{label}: {k}")
    missing = [f.name for f in fields(options_type) if f.name not in kw and f.default is MISSING
               and f.default_factory is MISSING]
    if missing:
        raise RunConfigError(f"{label}: option {missing[0]!r} is needed; it takes: {options_text(options_type)}")
    return options_type(**kw)


def text_value(text: str, key: Key, label: str) -> Any:
    """The value a command-line or spec text ``text`` gives a key of schema ``key`` (``3`` for an int
    key, ``0.5`` for a float key, ``true``/``false`` for a bool key, the text for the others), checked;
    a `RunConfigError` naming ``label`` otherwise."""
    k, t = key.kind, text.strip()
    try:
        if k is bool:
            if t.lower() not in ("true", "false"):
                raise ValueError
            v: Any = t.lower() == "true"
        elif k is int:
            v = int(t)
        elif k is float:
            v = float(t)
        else:
            v = t
    except ValueError:
        what = {bool: "true or false", int: "an integer", float: "a number"}[k]
        raise RunConfigError(f"{label}: expected {what}, got {text!r}") from None
    return key.check(v, label)


def parse_spec(text: str, label: str) -> tuple[str, dict[str, str]]:
    """``NAME`` or ``NAME:KEY=VALUE,KEY=VALUE`` (an entry and its options as text, e.g.
    ``slack:admission=defer``) -> (name, {key: value text}); a `RunConfigError` naming ``label`` for a
    malformed text."""
    if not isinstance(text, str) or not text.strip():
        raise RunConfigError(f"{label}: expected NAME or NAME:KEY=VALUE,..., got {text!r}")
    name, _, rest = text.strip().partition(":")
    opts: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        k, eq, v = part.partition("=")
        if not eq or not k.strip():
            raise RunConfigError(f"{label}: {part!r} in {text!r} is not KEY=VALUE (e.g. {name}:key=value)")
        if k.strip() in opts:
            raise RunConfigError(f"{label}: option {k.strip()!r} is given twice in {text!r}")
        opts[k.strip()] = v.strip()
    return name.strip(), opts


# ---------------------------------------------------------------------- tables of entries with options dataclasses
@dataclass(frozen=True)
class OptionEntry(Entry):
    """A plug-in of an `OptionTable`: ``factory(**options)`` builds it; ``spec``: its options dataclass
    (`option` fields; None: no options); ``help``: one line. ``options`` (derived from ``spec``, or given as
    names for a factory without a dataclass) names the keyword arguments the factory takes."""

    spec: Any = None
    help: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.spec is not None:
            object.__setattr__(self, "options", tuple(f.name for f in fields(self.spec)))
        elif self.options is None:
            object.__setattr__(self, "options", ())
        else:
            object.__setattr__(self, "options", tuple(self.options))
        if not self.doc:
            object.__setattr__(self, "doc", self.help)

    def option_schema(self) -> dict[str, Key]:
        """The `Key` schema of its options (from ``spec``; any value of each named option without one)."""
        if self.spec is not None:
            return option_keys(self.spec)
        return {k: Key("any") for k in self.options}


class OptionTable(Table):
    """A table of `OptionEntry` rows that also reads as a mapping ``name -> factory`` (``TABLE[name]()``,
    ``name in TABLE``, ``list(TABLE)`` gives the names), in registration order; ``kind`` names it in
    messages (e.g. ``router``). Everything about an entry's options is derived from its dataclass: the
    checks and defaults of `OptionTable.make`, the ``NAME:KEY=VALUE,...`` texts of a command line, ``--set``
    or TOML (`OptionTable.from_text`), command-line switches (`add_option_arguments`) and help lines
    (`OptionTable.help`). The serving model's tables are its instances (`twin.serving.plugins`)."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)

    def register(self, name: Any, factory: Callable | None = None, options: tuple[str, ...] = (), help: str = "",
                 *, spec: Any = None, tags: Mapping | None = None) -> Any:
        """Add entry ``name`` (or a ready `OptionEntry`); returns ``factory`` (so it can decorate it). A name
        is registered once."""
        if isinstance(name, Entry):
            entry = name
        else:
            if not isinstance(name, str) or not name:
                raise ValueError(f"{self.kind} table: a plug-in name must be a non-empty string, got {name!r}")
            entry = OptionEntry(name, factory, options=() if spec is not None else tuple(options),
                                 tags=dict(tags or {}), spec=spec, help=help)
        if entry.name in self._entries:
            raise ValueError(f"{self.kind} table: {entry.name!r} is already registered")
        self._entries[entry.name] = entry
        return entry.factory if not isinstance(name, Entry) else entry

    # ---- the mapping name -> factory (as before the kit)
    def __getitem__(self, name: str) -> Callable:
        return self._entries[name].load()

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def keys(self) -> list[str]:
        return list(self._entries)

    def entries(self) -> list[OptionEntry]:
        """The entries, in registration order."""
        return list(self._entries.values())

    # ---- checked use
    def entry(self, name: str) -> OptionEntry:
        """The entry of ``name``; an `UnknownNameError` (a ValueError) listing the known names (and the
        closest one) otherwise."""
        if not isinstance(name, str) or name not in self._entries:
            raise UnknownNameError(self.unknown(name))
        return self._entries[name]

    lookup = entry

    def unknown(self, name: object) -> str:
        """The one-line message for an unknown ``name``: the known names, and a close one if any."""
        return f"unknown {self.kind} {name!r}; known: {', '.join(self._entries)}{did_you_mean(name, self._entries)}"

    def options_of(self, name: str, options: Mapping[str, Any], label: str | None = None) -> dict[str, Any]:
        """``options`` of entry ``name`` checked against its options dataclass, the defaults filled in
        (`twin.plugins.build_options`); a ValueError naming the option otherwise."""
        e = self.entry(name)
        label = label or f"{self.kind} {name!r}"
        if e.spec is None:
            extra = [k for k in options if k not in e.options]
            if extra:
                raise UnknownNameError(f"{label}: unknown option {extra[0]!r}{did_you_mean(extra[0], e.options)}; "
                                       f"it takes: {', '.join(e.options) or 'no options'}")
            return dict(options)
        o = build_options(e.spec, options, label)
        return {f.name: getattr(o, f.name) for f in fields(o)}

    def make(self, name: str, **options: Any) -> Any:
        """Build plug-in ``name`` with ``options`` (each one of its entry's options, checked; the others
        at their defaults)."""
        return self.entry(name).load()(**self.options_of(name, options))

    def from_text(self, text: str, label: str) -> tuple[str, dict[str, Any]]:
        """``NAME`` or ``NAME:KEY=VALUE,...`` -> (name, checked options with defaults), every value typed by
        the entry's options dataclass (`twin.plugins.parse_spec`, `twin.plugins.text_value`); a ValueError
        naming ``label`` otherwise."""
        name, raw = parse_spec(text, label)
        if name not in self._entries:
            raise UnknownNameError(f"{label}: {self.unknown(name)}")
        schema = self.entry(name).option_schema()
        typed = {}
        for k, v in raw.items():
            if k not in schema:
                raise UnknownNameError(f"{label}: {self.kind} {name!r}: unknown option {k!r}{did_you_mean(k, schema)}; "
                                       f"it takes: {', '.join(schema) or 'no options'}")
            typed[k] = text_value(v, schema[k], f"{label}: {name}.{k}")
        return name, self.options_of(name, typed, f"{label}: {self.kind} {name!r}")

    def help(self) -> str:
        """One line per entry: ``name (options): help``."""
        return "\n".join(f"{e.name} ({', '.join(e.options) or 'no options'}): {e.help}" for e in self._entries.values())

    def option_help(self, name: str) -> list[str]:
        """The help lines of entry ``name``'s options (`twin.plugins.option_help`; none without a dataclass)."""
        e = self.entry(name)
        return option_help(e.spec) if e.spec is not None else []


def add_option_arguments(parser: Any, table: "OptionTable", flag: str) -> list[str]:
    """One command-line switch per option of ``table``'s entries (``--admission`` for ``slack``'s
    ``admission``; underscores become dashes), typed and checked by the entry's options dataclass when
    read (`options_from_arguments`); default None (not given). Returns the destinations added. ``flag``
    is the switch choosing the entry (named in the help)."""
    seen: dict[str, list[str]] = {}
    helps: dict[str, str] = {}
    for e in table.entries():
        if e.spec is None:
            continue
        for f, line in zip(fields(e.spec), option_help(e.spec)):
            seen.setdefault(f.name, []).append(e.name)
            helps.setdefault(f.name, line)
    for name, owners in seen.items():
        parser.add_argument("--" + name.replace("_", "-"), dest=f"{flag.lstrip('-').replace('-', '_')}__{name}",
                            default=None, metavar="VALUE",
                            help=f"with {flag} {' or '.join(owners)}: {helps[name]}".replace("%", "%%"))
    return list(seen)


def options_from_arguments(a: Any, table: "OptionTable", flag: str) -> tuple[str, dict[str, Any]]:
    """The entry ``flag`` chose (its ``NAME[:KEY=VALUE,...]`` text) and its options: those of the text,
    plus the switches of `add_option_arguments` given on the command line (a switch the chosen entry does
    not take, or an option given both ways: a ValueError naming them)."""
    dest = flag.lstrip("-").replace("-", "_")
    name, opts = table.from_text(getattr(a, dest), flag)
    schema = table.entry(name).option_schema()
    given = {k.split("__", 1)[1]: v for k, v in vars(a).items() if k.startswith(dest + "__") and v is not None}
    for k, v in given.items():
        sw = "--" + k.replace("_", "-")
        if k not in schema:
            takers = [e.name for e in table.entries() if k in e.option_schema()]
            raise UnknownNameError(f"{sw}: an option of {flag} {' or '.join(takers)}; {flag} {name} takes "
                                   f"{options_text(table.entry(name).spec)}")
        if k in parse_spec(getattr(a, dest), flag)[1]:
            raise UnknownNameError(f"{sw}: {k} is given twice (also in {flag} {getattr(a, dest)!r}); give it once")
        opts[k] = text_value(v, schema[k], sw)
    return name, opts
