"""Re-running a run from its ``config.toml`` (``hpctwin run --config RUN/config.toml``).

A run folder's ``config.toml`` holds the fully resolved configuration: the ``[run]`` table (every
`RunConfig` field that is not None, plus facts about the run written for the reader: machine units and
where they came from, code version and identity, Python and numpy versions), ``[options]`` (the ``--set``
options), ``[system]`` (the machine's name, file and size) and ``[inputs]`` (path, SHA-256 and size in
bytes of every input file, see `twin.inputs`). Reading it back gives the same `RunConfig`, so the
re-run writes the same ``jobs.csv`` bytes (same code version; a different version is reported).

A config file is data, not a program: code it names (an ``exec:`` or ``module:Class`` scheduler, a
system whose cooling model is an FMU) is refused unless the caller allows it (``--allow-exec``), and
an input file whose SHA-256 differs from the recorded one is refused unless allowed
(``--allow-changed-inputs``), since the rerun would not reproduce the recorded results.
"""
from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: keys of ``[run]`` that describe a finished run rather than configure one
RUN_FACTS = ("machine_units", "machine_size_source", "code_version", "code_identity", "python", "numpy")
#: tables of a run's config.toml
TABLES = ("run", "options", "system", "inputs")
#: keys of one ``[inputs.NAME]`` table
INPUT_KEYS = ("path", "sha256", "bytes")
_warned_unchecked = False


class ConfigFileError(ValueError):
    """A config file that cannot be turned into a run configuration."""


def run_config_fields() -> dict[str, Any]:
    """`twin.config.RunConfig`'s fields by name (their declarations say which ``[run]`` records)."""
    from .config import run_fields  # noqa: PLC0415
    return run_fields()


def _read(path: str | Path) -> tuple[Path, str, dict[str, Any]]:
    """(config.toml path, its text, its tables)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.toml"
    try:
        text = p.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except FileNotFoundError:
        raise ConfigFileError(f"{p}: no such file (give a run folder or its config.toml)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigFileError(f"{p}: cannot read: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigFileError(f"{p}: not valid TOML: {e}") from None
    return p, text, data


def _line(text: str, table: str, key: str | None = None) -> int | None:
    from .schema import toml_line  # noqa: PLC0415
    return toml_line(text, table, key)


def _at(p: Path, text: str, table: str, key: str | None = None) -> str:
    line = _line(text, table, key)
    return f"{p}:{line}" if line else str(p)


def _check_inputs_table(p: Path, text: str, table: Any) -> dict[str, dict]:
    """The ``[inputs]`` table, checked: one table per input with path (str), sha256 (64 hex digits)
    and bytes (an integer >= 0)."""
    if not isinstance(table, dict):
        raise ConfigFileError(f"{_at(p, text, '', 'inputs')}: inputs: must be a table of [inputs.NAME] tables")
    for name, entry in table.items():
        where = _at(p, text, f"inputs.{name}")
        if not isinstance(entry, dict):
            raise ConfigFileError(f"{where}: [inputs] {name}: must be a table with path, sha256 and bytes")
        unknown = sorted(set(entry) - set(INPUT_KEYS))
        if unknown:
            close = difflib.get_close_matches(unknown[0], INPUT_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigFileError(f"{_at(p, text, f'inputs.{name}', unknown[0])}: [inputs.{name}] {unknown[0]}: "
                                  f"unknown key{hint}; known: {', '.join(INPUT_KEYS)}")
        missing = [k for k in INPUT_KEYS if k not in entry]
        if missing:
            raise ConfigFileError(f"{where}: [inputs.{name}] {missing[0]}: missing")
        if not isinstance(entry["path"], str) or not entry["path"]:
            raise ConfigFileError(f"{_at(p, text, f'inputs.{name}', 'path')}: [inputs.{name}] path: expected a "
                                  f"non-empty string, got {entry['path']!r}")
        if not isinstance(entry["sha256"], str) or not re.fullmatch(r"[0-9a-f]{64}", entry["sha256"]):
            raise ConfigFileError(f"{_at(p, text, f'inputs.{name}', 'sha256')}: [inputs.{name}] sha256: expected "
                                  f"64 lower-case hex digits, got {entry['sha256']!r}")
        if isinstance(entry["bytes"], bool) or not isinstance(entry["bytes"], int) or entry["bytes"] < 0:
            raise ConfigFileError(f"{_at(p, text, f'inputs.{name}', 'bytes')}: [inputs.{name}] bytes: expected an "
                                  f"integer >= 0, got {entry['bytes']!r}")
    return table


def _parse(p: Path, text: str, data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    unknown_tables = sorted(set(data) - set(TABLES))
    if unknown_tables:
        raise ConfigFileError(f"{p}: unknown table [{unknown_tables[0]}]; a run's config.toml has "
                              "[run], [options], [system] and [inputs]")
    if "run" not in data:
        raise ConfigFileError(f"{p}: no [run] table; is this a run folder's config.toml?")
    from .config import recorded_fields  # noqa: PLC0415
    from .options import run_field_schema  # noqa: PLC0415
    known = run_config_fields()
    recorded = set(recorded_fields())
    schema = run_field_schema()
    kwargs: dict[str, Any] = {}
    facts: dict[str, Any] = {}
    for key, value in data["run"].items():
        if key in RUN_FACTS:
            facts[key] = value
        elif key in recorded:
            if key in schema:                  # a wrong type or range names the file's line, not a flag
                schema[key].check(value, f"{_at(p, text, 'run', key)}: [run] {key}")
            kwargs[key] = value
        else:
            close = difflib.get_close_matches(key, list(known) + list(RUN_FACTS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigFileError(f"{p}: [run] {key}: unknown key{hint}")
    if data.get("options"):
        kwargs["options"] = data["options"]
    if "inputs" in data:
        facts["inputs"] = _check_inputs_table(p, text, data["inputs"])
    return kwargs, facts


def config_dict_from_toml(path: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(run keyword arguments, facts)`` read from a run folder's ``config.toml`` (or the folder).

    Unknown keys are errors naming the file and key, with the closest known key suggested. The
    facts hold the ``[run]`` facts and, when the file has one, the checked ``[inputs]`` table as
    ``facts["inputs"]``.
    """
    return _parse(*_read(path))


def code_refusal(p: Path, text: str, kwargs: dict[str, Any], cfg: Any, overridden: set[str]) -> str | None:
    """The refusal of the first code ``cfg`` runs that is named in the file (not overridden on the
    command line), or None. ``kwargs`` are the file's own fields."""
    from .inputs import code_in_config, refusal  # noqa: PLC0415
    for field, value, what in code_in_config(cfg):
        if field in overridden or field not in kwargs:
            continue
        return refusal(_at(p, text, "run", field), f"[run] {field}", value, what)
    return None


def load_run_config(path: str | Path, *, allow_exec: bool = False, allow_changed_inputs: bool = False,
                    **overrides: Any):
    """A `RunConfig` equal to the one that wrote ``path`` (a run folder or its ``config.toml``).

    ``overrides`` are RunConfig fields given explicitly (the command line's): they replace the file's
    and are trusted. Code named by the file (``exec:``/``module:Class`` scheduler, an FMU cooling model)
    raises `twin.inputs.CodeInFileError` unless ``allow_exec``. An input file that is missing or whose
    SHA-256 differs from the file's ``[inputs]`` raises `twin.inputs.InputChangedError` (a changed one
    is a warning with ``allow_changed_inputs``); a file without ``[inputs]`` (written before inputs were
    recorded) warns once that its inputs cannot be checked.
    """
    global _warned_unchecked
    from . import __version__  # noqa: PLC0415
    from .inputs import CodeInFileError, check_recorded_inputs, input_files, warn  # noqa: PLC0415
    from .config import RunConfig  # noqa: PLC0415
    p, text, data = _read(path)
    kwargs, facts = _parse(p, text, data)
    file_kwargs = dict(kwargs)
    kwargs.update(overrides)
    cfg = RunConfig(**kwargs)
    overridden = set(overrides)
    if not allow_exec:
        msg = code_refusal(p, text, file_kwargs, cfg, overridden)
        if msg:
            raise CodeInFileError(msg)
    if "inputs" in facts:
        for line in check_recorded_inputs(cfg, facts["inputs"], str(p), overridden=overridden,
                                          allow_changed=allow_changed_inputs,
                                          line_of=lambda name: _line(text, f"inputs.{name}")):
            warn(line)
    elif input_files(cfg) and not _warned_unchecked:
        _warned_unchecked = True
        warn(f"{p} has no [inputs] table (written before hpctwin recorded its input files): the inputs cannot "
             "be checked against the recorded run")
    version = facts.get("code_version")
    if version is not None and version != __version__:
        print(f"hpctwin: warning: {path} was written by hpctwin {version}; this is {__version__}: "
              "results may differ", file=sys.stderr)
    elif facts.get("code_identity") is not None:
        from .inputs import code_identity  # noqa: PLC0415
        if facts["code_identity"] != code_identity():
            warn(f"{path} was written by code {facts['code_identity']}; this is {code_identity()}: results "
                 "may differ")
    return cfg
