"""Re-running a run from its ``config.toml`` (``hpctwin run --config RUN/config.toml``).

A run folder's ``config.toml`` holds the fully resolved configuration: the ``[run]`` table (every
`RunConfig` field that is not None, plus facts about the run written for the reader: machine units and
where they came from, code, Python and numpy versions), ``[options]`` (the ``--set`` options) and
``[system]`` (the machine's name, file and size). Reading it back gives the same `RunConfig`, so the
re-run writes the same ``jobs.csv`` bytes (same code version; a different version is reported).
"""
from __future__ import annotations

import difflib
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: keys of ``[run]`` that describe a finished run rather than configure one
RUN_FACTS = ("machine_units", "machine_size_source", "code_version", "python", "numpy")


class ConfigFileError(ValueError):
    """A config file that cannot be turned into a run configuration."""


def run_config_fields() -> dict[str, Any]:
    from .run import RunConfig  # noqa: PLC0415
    return {f.name: f for f in fields(RunConfig)}


def config_dict_from_toml(path: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(run keyword arguments, facts)`` read from a run folder's ``config.toml`` (or the folder).

    Unknown keys are errors naming the file and key, with the closest known key suggested.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "config.toml"
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigFileError(f"{p}: no such file (give a run folder or its config.toml)") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigFileError(f"{p}: not valid TOML: {e}") from None
    unknown_tables = sorted(set(data) - {"run", "options", "system"})
    if unknown_tables:
        raise ConfigFileError(f"{p}: unknown table [{unknown_tables[0]}]; a run's config.toml has "
                              "[run], [options] and [system]")
    if "run" not in data:
        raise ConfigFileError(f"{p}: no [run] table; is this a run folder's config.toml?")
    known = run_config_fields()
    kwargs: dict[str, Any] = {}
    facts: dict[str, Any] = {}
    for key, value in data["run"].items():
        if key in RUN_FACTS:
            facts[key] = value
        elif key in known and key not in ("out", "quiet", "force", "options"):
            kwargs[key] = value
        else:
            close = difflib.get_close_matches(key, list(known) + list(RUN_FACTS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigFileError(f"{p}: [run] {key}: unknown key{hint}")
    if data.get("options"):
        kwargs["options"] = data["options"]
    return kwargs, facts


def load_run_config(path: str | Path, **overrides: Any):
    """A `RunConfig` equal to the one that wrote ``path`` (a run folder or its ``config.toml``)."""
    from . import __version__  # noqa: PLC0415
    from .run import RunConfig  # noqa: PLC0415
    kwargs, facts = config_dict_from_toml(path)
    kwargs.update(overrides)
    cfg = RunConfig(**kwargs)
    version = facts.get("code_version")
    if version is not None and version != __version__:
        print(f"hpctwin: warning: {path} was written by hpctwin {version}; this is {__version__}: "
              "results may differ", file=sys.stderr)
    return cfg
