"""The accounts file as a ``sacctmgr`` command script: the same QOS, accounts and users a real cluster
was given, read into the tables of the accounts TOML (`schedulers.slurm_priority` module docstring).

A script is recognised by its first command line (``#`` comments and blank lines skipped; an optional
leading ``sacctmgr`` with its flags ``-i``/``--immediate``/``-Q``). Commands read (sacctmgr(1)):

* ``add|create qos NAME[,NAME...] [KEY=VALUE ...]`` and ``modify|update qos [where] name=NAME set
  KEY=VALUE ...``: ``Priority``, ``MaxJobsPerUser`` (``MaxJobsPU``), ``MaxTRESPerUser``
  (``MaxTRESPU``), ``GrpTRES``, ``GrpJobs``, ``GrpSubmitJobs``, ``MaxSubmitJobsPerUser``
  (``MaxSubmitPU``), ``MaxWall`` (``MaxWallDurationPerJob``), ``MaxTRESPerJob``, ``MaxTRESPerNode``,
  ``Preempt``, ``PreemptMode``, ``PreemptExemptTime``, ``Flags``. Slurm's QOS ``normal`` exists
  before any command, so ``modify qos where name=normal`` creates it here.
* ``add|create account NAME[,NAME...] [Parent=P] [Fairshare=N] [GrpTRES= GrpJobs= MaxJobs=
  MaxSubmitJobs=]`` and ``modify account [where] name=NAME set ...``: shares and parent of the
  fair-share tree, association limits.
* ``add|create user NAME[,NAME...] Account=A [Fairshare=N] [limits as for accounts]`` and ``modify
  user [where] name=NAME set ...``: user shares and limits (the same in each of the user's accounts:
  the accounts file's rule).

Keys are case-insensitive, as in sacctmgr. Read and inert (they change no decision the twin makes):
``Cluster``, ``Description``, ``Organization``, ``QOS``/``DefaultQOS`` of users and accounts (which
QOS a user may ask for: a job's QOS is taken from the log), ``DefaultAccount``, ``AdminLevel``,
``Partition``, ``WCKeys``. Anything else, and other commands (``delete``, ``remove``, ``archive``...),
is an `AccountsError` naming the file, line and word.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

__all__ = ["AccountsError", "is_sacctmgr_script", "read_sacctmgr", "read_accounts_data"]


class AccountsError(ValueError):
    """A malformed accounts file (names the file and the key)."""

_ENTITIES = ("qos", "account", "user")
_VERBS_ADD, _VERBS_MODIFY = ("add", "create"), ("modify", "update")
#: QOS keys, lower case -> the accounts file's spelling
_QOS_KEYS = {k.lower(): k for k in (
    "Priority", "MaxJobsPerUser", "MaxTRESPerUser", "GrpTRES", "GrpJobs", "GrpSubmitJobs",
    "MaxSubmitJobsPerUser", "MaxWall", "MaxTRESPerJob", "MaxTRESPerNode", "Preempt", "PreemptMode",
    "PreemptExemptTime", "Flags")}
_QOS_KEYS.update({"maxjobspu": "MaxJobsPerUser", "maxtrespu": "MaxTRESPerUser",
                  "maxsubmitpu": "MaxSubmitJobsPerUser", "maxsubmitjobspu": "MaxSubmitJobsPerUser",
                  "maxwalldurationperjob": "MaxWall"})
#: association keys of accounts and users, lower case -> the accounts file's spelling
_ASSOC_KEYS = {k.lower(): k for k in ("GrpTRES", "GrpJobs", "MaxJobs", "MaxSubmitJobs")}
_ASSOC_KEYS.update({"fairshare": "shares", "shares": "shares"})
#: read and inert (see the module docstring)
_INERT = frozenset(("cluster", "clusters", "description", "organization", "qos", "defaultqos",
                    "defaultaccount", "adminlevel", "partition", "wckeys", "defaultwckey"))
_FLAGS = frozenset(("-i", "--immediate", "-q", "--quiet", "-Q"))
_COMMAND = re.compile(r"^\s*(?:sacctmgr\s+(?:-\S+\s+)*)?(add|create|modify|update|delete|remove)\s+([A-Za-z]+)\b",
                      re.IGNORECASE)         # "add = [" (a TOML key) is not a command


def is_sacctmgr_script(text: str) -> bool:
    """Whether ``text``'s first command line is a sacctmgr command (``add qos ...``, ``sacctmgr -i
    modify ...``): comments (``#``) and blank lines are skipped."""
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            return bool(_COMMAND.match(line))
    return False


def _value(v: str) -> Any:
    """A sacctmgr value: an integer when it is one (``-1``: no limit), else the text."""
    return int(v) if re.fullmatch(r"-?\d+", v) else v


def _pairs(words: list[str], where: str) -> dict[str, str]:
    """KEY=VALUE words -> {lower-case key: value}; a word without ``=`` is an error."""
    out: dict[str, str] = {}
    for w in words:
        k, eq, v = w.partition("=")
        if not eq or not k:
            raise AccountsError(f"{where}: {w!r}: expected KEY=VALUE")
        out[k.lower()] = v
    return out


def _table(entity: str, pairs: dict[str, str], where: str) -> dict[str, Any]:
    """The accounts-file table of one entity's KEY=VALUE pairs (inert keys dropped)."""
    keys = _QOS_KEYS if entity == "qos" else _ASSOC_KEYS
    inert = _INERT - {"qos", "defaultqos"} if entity == "qos" else _INERT | ({"account"} if entity == "user" else set())
    out: dict[str, Any] = {}
    for k, v in pairs.items():
        if entity == "account" and k == "parent":
            out["parent"] = v
        elif k in keys:
            out[keys[k]] = _value(v)
        elif k not in inert:
            read = sorted(set(keys.values()) | ({"Parent"} if entity == "account" else set()))
            raise AccountsError(f"{where}: {k}: not a {entity} key read here (read: {', '.join(read)}; "
                                f"inert: {', '.join(sorted(inert))})")
    return out


def read_sacctmgr(text: str, path: str | Path) -> tuple[dict[str, dict], dict[tuple[str, str], int]]:
    """The script ``text`` (file ``path``) as the accounts file's tables ``{"qos": ..., "accounts":
    ..., "users": ...}`` and the line each (table, key) came from (``("qos.high", "Priority")``) for
    error messages."""
    data: dict[str, dict] = {"qos": {}, "accounts": {}, "users": {}}
    lines: dict[tuple[str, str], int] = {}
    section = {"qos": "qos", "account": "accounts", "user": "users"}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{path}:{n}"
        try:
            words = shlex.split(line)
        except ValueError as e:
            raise AccountsError(f"{where}: {e}") from None
        if words and words[0].lower() == "sacctmgr":
            words = [w for w in words[1:] if w not in _FLAGS]
        if len(words) < 2:
            raise AccountsError(f"{where}: expected a sacctmgr command (add|create|modify ENTITY ...)")
        verb, entity = words[0].lower(), words[1].lower()
        if verb not in _VERBS_ADD + _VERBS_MODIFY:
            raise AccountsError(f"{where}: {words[0]}: not read (add, create, modify and update are; "
                                "write the state the cluster ends in)")
        if entity not in _ENTITIES:
            raise AccountsError(f"{where}: {words[1]}: not read (qos, account and user are)")
        rest = words[2:]
        if verb in _VERBS_ADD:
            if not rest or "=" in rest[0]:
                raise AccountsError(f"{where}: add {entity}: give the name(s) first (add {entity} NAME ...)")
            names, pairs = rest[0].split(","), _pairs(rest[1:], where)
        else:
            if rest and rest[0].lower() == "where":
                rest = rest[1:]
            low = [w.lower() for w in rest]
            if "set" not in low:
                raise AccountsError(f"{where}: modify {entity}: expected 'where name=NAME set KEY=VALUE ...'")
            cut = low.index("set")
            cond, pairs = _pairs(rest[:cut], where), _pairs(rest[cut + 1:], where)
            named = cond.get("name") or cond.get("names")
            if set(cond) - {"name", "names", "account", "cluster", "user"} or not named:
                raise AccountsError(f"{where}: modify {entity}: select by name (where name=NAME), got "
                                    f"{' '.join(rest[:cut]) or 'nothing'}")
            names = named.split(",")
        table = _table(entity, pairs, where)
        for name in filter(None, names):
            key = section[entity]
            data[key].setdefault(name, {}).update(table)
            for k in table:
                lines[(f"{key}.{name}", k)] = n
    for tab in ("accounts", "users"):        # a bare account or user: one share (the file's default)
        for name, t in data[tab].items():
            t.setdefault("shares", 1)
    return data, lines


def read_accounts_data(path: str | Path, toml_loads) -> tuple[dict, str, dict[tuple[str, str], int] | None]:
    """The accounts file at ``path`` as tables: a sacctmgr script (`read_sacctmgr`) or the TOML
    (``toml_loads``); also its text and, for a script, the (table, key) -> line map (None: TOML,
    whose lines the caller finds)."""
    p = Path(path)
    text = p.read_text()
    if is_sacctmgr_script(text):
        data, lines = read_sacctmgr(text, p)
        return data, text, lines
    return toml_loads(text), text, None
