"""Plug-in tables of the serving model: routers, autoscalers and P/D-ratio policies by name.

A `PluginTable` maps a name to an `Entry`: the factory that builds the plug-in, the options (keyword
arguments) the factory takes, and one line of help. It reads as a mapping ``name -> factory``, so
``ROUTERS[name]()`` and ``name in ROUTERS`` work as on a plain dict; `PluginTable.make` checks the name
and the options and builds the plug-in, `PluginTable.help` lists the entries.

The tables themselves are `routers.ROUTERS`, `policies.AUTOSCALERS` and `policies.PD_POLICIES`. This
module imports only the foundation's schema kit (`twin.schema.did_you_mean`), so it can move into the
general plug-in table kit (the schedulers' tables) as it is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Mapping

from hpctwin.twin.schema import did_you_mean


@dataclass(frozen=True)
class Entry:
    """One plug-in: ``factory(**options)`` builds it; ``options`` names the keyword arguments it takes."""
    name: str
    factory: Callable
    options: tuple[str, ...] = ()
    help: str = ""


class PluginTable(Mapping):
    """Named plug-ins of one kind (``kind`` names it in messages, e.g. ``router``), in registration order."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Entry] = {}

    def register(self, name: str, factory: Callable, options: tuple[str, ...] = (), help: str = "") -> Callable:
        """Add ``name``; returns ``factory`` (so it can decorate it). A name is registered once."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.kind} table: a plug-in name must be a non-empty string, got {name!r}")
        if name in self._entries:
            raise ValueError(f"{self.kind} table: {name!r} is already registered")
        self._entries[name] = Entry(name, factory, tuple(options), help)
        return factory

    # ---- the mapping name -> factory
    def __getitem__(self, name: str) -> Callable:
        return self._entries[name].factory

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    # ---- checked use
    def entry(self, name: str) -> Entry:
        """The entry of ``name``; a ValueError listing the known names (and the closest one) otherwise."""
        if name not in self._entries:
            raise ValueError(self.unknown(name))
        return self._entries[name]

    def unknown(self, name: object) -> str:
        """The one-line message for an unknown ``name``: the known names, and a close one if any."""
        return f"unknown {self.kind} {name!r}; known: {', '.join(self._entries)}{did_you_mean(name, self._entries)}"

    def make(self, name: str, **options):
        """Build plug-in ``name`` with ``options`` (each one of its entry's options)."""
        e = self.entry(name)
        extra = [k for k in options if k not in e.options]
        if extra:
            raise ValueError(f"{self.kind} {name!r}: unknown option {extra[0]!r}; it takes: "
                             f"{', '.join(e.options) or 'no options'}")
        return e.factory(**options)

    def help(self) -> str:
        """One line per entry: ``name (options): help``."""
        return "\n".join(f"{e.name} ({', '.join(e.options) or 'no options'}): {e.help}"
                         for e in self._entries.values())
