"""Plug-in tables of the serving model: routers, autoscalers, P/D-ratio policies and instance scheduling
policies by name, on the general plug-in kit (`twin.plugins`).

Each table is a `twin.plugins.OptionTable` of `twin.plugins.OptionEntry` rows: the factory that builds
the plug-in, its options dataclass (``spec``: `twin.plugins.option` fields with default, unit, range,
choices and help; None: it takes none), its ``tags`` (a kind's own vocabulary: an autoscaler's
``pd_form``, how it sizes disaggregated pools; a router's or scheduling policy's ``classes``, whether
it reads the requests' SLO classes) and one line of ``help``. Everything about the options is derived
from the dataclass: the names the factory takes (``entry.options``), the checks and defaults of
``make``, the ``NAME:KEY=VALUE,...`` texts of the command line and of ``--set serving.KEY`` / TOML
(``from_text``), the command-line switches (`add_option_arguments`, e.g. ``--admission`` of ``slack``)
and the help lines. So a new router or policy is its module plus one ``register`` call naming its
factory and its options dataclass:

    ROUTERS.register("my_router", my_factory, spec=MyOptions, help="...")

A table also reads as a mapping ``name -> factory`` (``ROUTERS[name]()``, ``name in ROUTERS``,
``list(ROUTERS)`` gives the names). The tables themselves are `routers.ROUTERS`,
`policies.AUTOSCALERS`, `policies.PD_POLICIES` and `scheduling.SCHEDULING`.
"""
from __future__ import annotations

from hpctwin.twin.plugins import OptionEntry, OptionTable, add_option_arguments, did_you_mean, options_from_arguments

#: the serving tables' classes by the names they had before they joined the kit
ServingEntry = OptionEntry
ServingTable = OptionTable
PluginTable = OptionTable

__all__ = ["ServingEntry", "ServingTable", "PluginTable", "OptionEntry", "OptionTable", "add_option_arguments",
           "options_from_arguments", "did_you_mean"]
