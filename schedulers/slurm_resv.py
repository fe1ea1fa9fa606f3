"""Advance reservations for the Slurm-like policy (``scontrol create reservation``), as Slurm 22.05.

Sources (SchedMD/slurm, tag ``slurm-22-05-9-1``):

* ``src/slurmctld/reservation.c``: ``create_resv`` (StartTime default now, EndTime or Duration in
  minutes, neither: INFINITE; Users or Accounts required; ``Nodes=ALL`` sets ``ALL_NODES``,
  ``PART_NODES`` needs ``Nodes=ALL`` and a partition; a node list overlapping a reservation at the
  same time is refused unless either is ``MAINT`` or ``OVERLAP``: ``_resv_overlap``,
  ``_resv_time_overlap`` looking one week ahead for recurring ones), ``_select_nodes`` ->
  ``_pick_nodes_ordered`` -> ``_pick_node_cnt`` -> ``select_p_resv_test`` for ``NodeCnt=N``
  (the partition's nodes, default partition if none, without the nodes of reservations that
  overlap in time, ``_filter_resv``; MAINT/OVERLAP may then take reserved nodes; the select
  plugin's pick without topology is the *lowest-index* nodes: ``bit_pick_cnt`` in select/linear,
  ``_sequential_pick`` in cons_tres; fewer nodes than asked are taken with a note, as 22.05
  "Reducing requested node count"), ``_advance_resv_time`` (HOURLY/DAILY/WEEKLY move the
  reservation one period on once it ended), ``job_test_resv`` (below), ``find_resv_end``.
* ``src/slurmctld/job_scheduler.c`` ``_schedule`` and ``sort_job_queue2``: jobs that ask for a
  reservation sort before every other job; such a job that cannot start fails its reservation
  (``failed_resv``), not its partition; one whose reservation has not started
  (``ESLURM_RESERVATION_NOT_USABLE``) takes the reservation's nodes out of the rest of the pass.
* ``src/plugins/sched/backfill/backfill.c`` ``_attempt_backfill``: ``job_test_resv(job,
  &start_res, move_time=true)`` before the map walk: a job in a reservation that has not started
  (or has ended) is deferred (no test, no backfill reservation); a job outside reservations gets
  the nodes of every reservation overlapping ``[start_res, start_res + time limit)`` removed, and
  when that happened the retry time ``later_start`` is at most ``find_resv_end(start_res,
  bf_resolution) + 1``; a MAINT reservation covering the job's whole partition (or ``Nodes=ALL``,
  or ``PART_NODES`` of its partition) moves ``start_res`` to its end (up to 10 moves).
  (``_test_resv_overlap`` is backfill's own test of a planned start against the map of pending
  jobs' backfill reservations, `schedulers.profile_nodeset.NodeSpaceMap.fits`, unchanged.)

``job_test_resv`` as modelled (`ResvSet.test`), for a job with time limit L tested at ``when``:

* a job **without** a reservation may not use the nodes of any reservation whose current window
  ``[start, end)`` overlaps ``[when, when + L)`` (strict: a job ending exactly at a reservation's
  start may use its nodes; Slurm checks the job's *whole* time limit); a reservation that is
  ``Nodes=ALL``, ``PART_NODES`` of the job's partition, or ``MAINT`` holding all the partition's
  nodes makes it wait for the reservation's end;
* a job **with** a reservation runs only on the reservation's nodes (minus those of other
  reservations overlapping it in time, unless its own is ``MAINT``, or ``OVERLAP`` and the other is
  not ``MAINT``), not before the reservation's start and not after its end; ``FLEX``: any node,
  any time.

Clock: every reservation is created at the log's time 0 (before the first job), so no job runs
at creation and ``IGNORE_JOBS`` changes nothing (read, listed as inert). Times accepted for
``StartTime``/``EndTime`` (`parse_resv_time`): ``now`` = the log's time 0, ``now+2hours``,
``now-30minutes`` (units as Slurm's ``parse_time``: seconds, minutes, hours, days, weeks; none:
seconds); a number = seconds relative to the log's time 0 (a twin form: Slurm has no bare
seconds); ISO ``YYYY-MM-DD[THH:MM[:SS]]`` read as UTC and mapped to the log clock through the
Unix time of the log's time 0: the option ``log_start``, else the log header's ``UnixStartTime``
(the sacct reader writes it; `ResvOptions.resolve` at bind), required for ISO times.
``Duration``: Slurm's minutes forms (``120``, ``2:00:00``, ``1-00:00:00``, ``UNLIMITED``), seconds
rounded up to whole minutes.

**The end of a reservation** (``ResvOverRun``, slurm.conf, minutes, default 0, ``UNLIMITED``): a job
may start in its reservation whatever its time limit (``job_test_resv`` checks only that ``when`` lies
in ``[start, end]``, not ``when + limit``; ``job_test_resv_now``: ``now > end`` refuses), so it may run
past the end. slurmctld's background loop calls ``job_time_limit`` (job_mgr.c) every
``PERIODIC_TIMEOUT`` (30 s): a running job whose reservation is not ``FLEX`` and whose
``resv_ptr->end_time + ResvOverRun * 60 < now`` is ended by ``_job_timed_out`` (state ``JOB_TIMEOUT``,
reason ``FAIL_TIMEOUT``: sacct ``TIMEOUT``); ``MAINT`` and the other flags make no difference.
``UNLIMITED`` (INFINITE16) is ``YEAR_SECONDS``. The twin ends such a job at the first of those
checks with ``end + ResvOverRun < t``, the checks at t = 0, 30, 60, ... of the log clock (`kill_time`;
the requested-time kill stays the engine's, without the tick) through
`twin.control.EngineControl.kill_at`, set when the job starts
(`ResvSet.on_start`): ``jobs.csv`` shows it ``TIMEOUT`` with ``end`` = that time and the column
``resv_kill_at`` (the kill time set, s; NaN for other jobs; only in runs where one was set).
Recurring reservations (``HOURLY``/``DAILY``/``WEEKLY``): with ``ResvOverRun=0`` the same (the tick
that kills runs ``job_time_limit`` before ``job_resv_check``); with ``ResvOverRun > 0`` the job is
never killed by its reservation, because ``job_resv_check`` -> ``_advance_resv_time`` moves the
reservation (the job's ``resv_ptr``) to its next window at the first tick after the end, before
``end + ResvOverRun`` is reached, and again at every later end. (A scheduling pass testing a pending
job of the same recurring reservation at exactly its end also advances it, ``job_test_resv``:
``end_time <= now``; that race is not modelled.) Planning is unchanged: Slurm's ``end_time`` of such a
job stays start + time limit, and so do the twin's will-run tests and backfill map. Inside a policy
wrapper that gives no engine control (the GPU packer) the job runs to its own end, counted in
``scheduler_params.reservations_overrun`` and printed once.

Not modelled: core reservations (``CoreCnt``), licenses, burst buffers, watts, features, groups,
``MAGNETIC``, ``TIME_FLOAT``, ``REPLACE``, ``WEEKDAY``/``WEEKEND`` are refused.
"""
from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from hpctwin.datasets.sacct import parse_slurm_duration
from .slurm_conf import SlurmConfError, expand_hostlist
from .slurm_keys import suggest
from .slurm_select import low_bits as _low

__all__ = ["ResvSpec", "ResvSet", "ResvTest", "load_reservations", "parse_resv_time",
           "parse_scontrol_line", "parse_log_start", "resv_over_run"]

#: slurmctld checks job time limits and reservation ends every PERIODIC_TIMEOUT s (slurmctld.h)
PERIODIC_TIMEOUT = 30.0
#: Slurm's YEAR_SECONDS (an UNLIMITED duration)
YEAR_SECONDS = 365 * 24 * 3600.0
#: create_resv: a start more than MAX_RESV_DELAY s before now is refused
MAX_RESV_DELAY = 600.0
#: recurrence flags -> period (s) of ``_advance_resv_time``
PERIODS = {"HOURLY": 3600.0, "DAILY": 86400.0, "WEEKLY": 7 * 86400.0}
#: flags modelled (MAINT, OVERLAP, FLEX, PART_NODES, recurrences) or read and inert (why in docs)
FLAGS_MODELLED = frozenset({"MAINT", "OVERLAP", "FLEX", "PART_NODES", *PERIODS})
FLAGS_INERT = frozenset({"IGNORE_JOBS", "STATIC_ALLOC", "NO_HOLD_JOBS_AFTER_END", "SPEC_NODES",
                         "PURGE_COMP"})
FLAGS_REFUSED = {"WEEKDAY": "needs the calendar weekday of each day", "WEEKEND": "needs the calendar "
                 "weekday of each day", "TIME_FLOAT": "a floating start is not modelled",
                 "REPLACE": "node replacement is not modelled", "REPLACE_DOWN": "node replacement "
                 "is not modelled", "MAGNETIC": "jobs are not attracted to reservations here",
                 "ANY_NODES": "reservations without nodes (licenses, burst buffers) are not modelled",
                 "FIRST_CORES": "core reservations are not modelled", "LICENSE_ONLY": "license "
                 "reservations are not modelled"}
_FLAG_ALIASES = {"IGNORE_JOB": "IGNORE_JOBS", "STATIC": "STATIC_ALLOC", "PARTNODES": "PART_NODES",
                 "MAINTENANCE": "MAINT", "PURGE_COMPLETED": "PURGE_COMP",
                 "NO_HOLD_JOBS": "NO_HOLD_JOBS_AFTER_END"}
#: reservation fields: accepted spellings (lower case) -> field
_KEYS = {"reservationname": "name", "reservation": "name", "name": "name",
         "starttime": "start", "start": "start", "endtime": "end", "end": "end",
         "duration": "duration", "nodes": "nodes", "nodelist": "nodes", "nodecnt": "node_cnt",
         "node_cnt": "node_cnt", "nodecount": "node_cnt", "users": "users", "user": "users",
         "accounts": "accounts", "account": "accounts", "flags": "flags",
         "partitionname": "partition", "partition": "partition"}
#: Slurm 22.05 reservation keys refused (not modelled), with why
_REFUSED_KEYS = {"corecnt": "core reservations (CoreCnt) are not modelled: reserve whole nodes",
                 "licenses": "license reservations are not modelled",
                 "burstbuffer": "burst buffer reservations are not modelled",
                 "watts": "power reservations are not modelled",
                 "features": "node features are not modelled: list the nodes",
                 "groups": "group membership is not known: give Users= or Accounts=",
                 "tres": "TRES reservations are not modelled: give Nodes= or NodeCnt=",
                 "maxstartdelay": "MaxStartDelay is not modelled",
                 "purgecomptime": "PurgeCompTime is not modelled", "skip": "Skip is not modelled"}
_NOW_RE = re.compile(r"now\s*(?:([+-])\s*(\d+)\s*([a-z]*))?", re.IGNORECASE)
_UNITS = {"": 1, "second": 1, "seconds": 1, "minute": 60, "minutes": 60, "hour": 3600,
          "hours": 3600, "day": 86400, "days": 86400, "week": 604800, "weeks": 604800}
_ISO_RE = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{1,2}:\d{2}(:\d{2})?)?")


class ResvError(SlurmConfError):
    """A reservation that cannot be read or created (the message names where: file:line or
    ``options: reservations[i]``, and the field)."""


class ResvNeedsClock(ResvError):
    """An absolute (ISO) reservation time on a log whose Unix start time is not known."""


#: read_config.c / parse_value.c ``s_p_handle_uint16``: INFINITE16 (``UNLIMITED``, ``INFINITE``, 65535)
INFINITE16 = 0xFFFF


def resv_over_run(cfg) -> float:
    """slurm.conf ``ResvOverRun`` (``cfg.resv_over_run``: (value, line) or None) -> seconds a job may
    run past its reservation's end: minutes x 60 (default 0); ``UNLIMITED``/``INFINITE``/65535: Slurm's
    ``YEAR_SECONDS`` (job_mgr.c ``job_time_limit``). Anything but a whole number 0..65533 or those
    words is a `ResvError` naming the file and line (the man page's limit is 65533 minutes)."""
    raw = getattr(cfg, "resv_over_run", None)
    if raw is None:
        return 0.0
    value, line = raw
    where = f"{cfg.path or 'slurm options'}:{line}" if line else "options"
    v = str(value).strip()
    if v.upper() in ("UNLIMITED", "INFINITE") or v == str(INFINITE16):
        return YEAR_SECONDS
    if not v.isdigit() or int(v) > 65533:
        raise ResvError(f"{where}: ResvOverRun={v!r}: expected minutes 0..65533 or UNLIMITED "
                        "(how long a job may run past its reservation's end; default 0)")
    return int(v) * 60.0


# ====================================================================== values
def parse_log_start(value: Any) -> float | None:
    """The ``log_start`` option: the Unix time (s) of the log's time 0, as a number or an ISO
    ``YYYY-MM-DDTHH:MM:SS`` (UTC); None when not given."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    s = str(value).strip()
    if re.fullmatch(r"-?\d+(\.\d+)?", s):
        return float(s)
    if _ISO_RE.fullmatch(s):
        return _iso_epoch(s)
    raise ResvError(f"options: log_start={value!r}: expected the Unix time of the log's time 0 "
                    "(the workload header's UnixStartTime, e.g. 1767225600) or an ISO time "
                    "2026-01-01T00:00:00 (UTC)")


def _iso_epoch(s: str) -> float:
    """ISO date[THH:MM[:SS]] (UTC) -> Unix time (s)."""
    dt = datetime.fromisoformat(s if "T" in s else s + "T00:00:00")
    return dt.replace(tzinfo=timezone.utc).timestamp()


def parse_resv_time(value: Any, log_start: float | None, where: str, key: str) -> float:
    """A reservation's ``StartTime``/``EndTime`` -> seconds on the log clock (see the module
    docstring for the forms). Raises `ResvError` naming ``where`` and ``key``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ResvError(f"{where}: {key}={value!r}: not a finite time")
        return float(value)
    s = str(value).strip()
    if re.fullmatch(r"-?\d+(\.\d+)?", s):
        return float(s)
    m = _NOW_RE.fullmatch(s)
    if m:
        if not m.group(1):
            return 0.0
        unit = m.group(3).lower()
        if unit not in _UNITS:
            raise ResvError(f"{where}: {key}={s}: unknown unit {m.group(3)!r}"
                            f"{suggest(unit, frozenset(_UNITS) - {''})}; use seconds, minutes, "
                            "hours, days or weeks")
        d = int(m.group(2)) * _UNITS[unit]
        return float(d if m.group(1) == "+" else -d)
    if _ISO_RE.fullmatch(s):
        if log_start is None:
            raise ResvNeedsClock(f"{where}: {key}={s} is an absolute time, and the log does not say when "
                                 "it starts (no UnixStartTime in its header): give the option log_start "
                                 "(the Unix time of the log's time 0), or write the time as now+2hours "
                                 "or as seconds from the log's start")
        try:
            return _iso_epoch(s) - log_start
        except ValueError as e:
            raise ResvError(f"{where}: {key}={s}: {e}") from None
    raise ResvError(f"{where}: {key}={s!r}: expected YYYY-MM-DDTHH:MM:SS, now[+N{{seconds|minutes|"
                    "hours|days|weeks}}] or seconds from the log's start")


def parse_duration(value: Any, where: str) -> float:
    """``Duration`` -> seconds: minutes as Slurm's ``time_str2mins`` (a number is minutes;
    ``M:S``, ``H:M:S``, ``D-H[:M[:S]]``; seconds rounded up to a whole minute); UNLIMITED /
    INFINITE: a year (Slurm's YEAR_SECONDS)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        secs = float(value) * 60.0
    else:
        s = str(value).strip()
        if s.upper() in ("UNLIMITED", "INFINITE", "-1"):
            return YEAR_SECONDS
        try:
            secs = parse_slurm_duration(s)
        except ValueError:
            secs = math.nan
        if math.isnan(secs):
            raise ResvError(f"{where}: Duration={s!r}: expected minutes, M:S, H:M:S or D-H:M:S "
                            "(e.g. Duration=120 or Duration=2:00:00)")
    if not math.isfinite(secs) or secs <= 0:
        raise ResvError(f"{where}: Duration={value!r}: must be > 0 minutes")
    return math.ceil(secs / 60.0 - 1e-9) * 60.0


def _names(value: Any) -> list[str]:
    """A comma list (or a TOML list) of names, stripped, empty ones dropped."""
    if isinstance(value, (list, tuple)):
        items = [str(x) for x in value]
    else:
        items = str(value).split(",")
    return [x.strip() for x in items if x.strip()]


def _flags(value: Any, where: str) -> frozenset[str]:
    """``Flags=MAINT,IGNORE_JOBS`` (case-insensitive) -> canonical flag names; refused or unknown
    flags are a `ResvError`."""
    out = set()
    known = FLAGS_MODELLED | FLAGS_INERT | frozenset(FLAGS_REFUSED)
    for f in _names(value):
        u = f.upper().split("=", 1)[0]
        u = _FLAG_ALIASES.get(u, u)
        if u in FLAGS_REFUSED:
            raise ResvError(f"{where}: Flags={f}: not modelled ({FLAGS_REFUSED[u]}); "
                            f"flags read: {', '.join(sorted(FLAGS_MODELLED | FLAGS_INERT))}")
        if u not in FLAGS_MODELLED | FLAGS_INERT:
            raise ResvError(f"{where}: Flags={f}: not a reservation flag of Slurm 22.05"
                            f"{suggest(u, known)}")
        out.add(u)
    rec = out & set(PERIODS)
    if len(rec) > 1:
        raise ResvError(f"{where}: Flags: {', '.join(sorted(rec))} together; give one recurrence")
    return frozenset(out)


# ====================================================================== specifications
@dataclass
class ResvSpec:
    """One reservation as given (times on the log clock, s; nodes not yet resolved).

    ``nodes``: hostlist text (``n[001-004]``, ``ALL``) or None; ``node_cnt``: NodeCnt or None;
    ``users``/``accounts``: names (a leading ``-`` negates the list, as Slurm); ``flags``:
    canonical names; ``where``: ``file:line`` or ``options: reservations[i]``."""

    name: str
    start: float
    end: float
    nodes: str | None
    node_cnt: int | None
    users: list[str]
    accounts: list[str]
    flags: frozenset[str]
    partition: str | None
    where: str

    @property
    def period(self) -> float:
        """Recurrence period (s; 0: none)."""
        return next((PERIODS[f] for f in self.flags if f in PERIODS), 0.0)


def _spec(fields: dict[str, Any], where: str, log_start: float | None) -> ResvSpec:
    """Canonical fields (see `_KEYS`) -> `ResvSpec`, with ``create_resv``'s checks."""
    name = str(fields.get("name", "")).strip()
    if not name:
        raise ResvError(f"{where}: ReservationName: missing; give ReservationName=NAME (jobs name "
                        "it in --reservation)")
    start = parse_resv_time(fields["start"], log_start, where, "StartTime") if "start" in fields else 0.0
    if start < -MAX_RESV_DELAY:
        raise ResvError(f"{where}: StartTime is {-start:g} s before the log's start: Slurm refuses "
                        "a start more than 600 s in the past (Invalid time specification)")
    if "end" in fields and "duration" in fields:
        end = parse_resv_time(fields["end"], log_start, where, "EndTime")
        if abs(end - (start + parse_duration(fields["duration"], where))) > 60.0:
            raise ResvError(f"{where}: EndTime and Duration disagree; give one of them")
    elif "end" in fields:
        end = parse_resv_time(fields["end"], log_start, where, "EndTime")
    elif "duration" in fields:
        end = start + parse_duration(fields["duration"], where)
    else:
        end = start + YEAR_SECONDS           # create_resv: neither -> INFINITE
    if end <= start:
        raise ResvError(f"{where}: EndTime ({end:g} s) must be after StartTime ({start:g} s)")
    nodes = node_cnt = None
    if "nodes" in fields:
        v = fields["nodes"]
        if isinstance(v, int) and not isinstance(v, bool):
            node_cnt = v                     # TOML: nodes = 4 is a count
        else:
            nodes = str(v).strip()
            if not nodes:
                raise ResvError(f"{where}: Nodes: empty; give a hostlist (n[001-004]), ALL or NodeCnt=N")
    if "node_cnt" in fields:
        if nodes is not None or node_cnt is not None and "nodes" in fields:
            raise ResvError(f"{where}: give Nodes= or NodeCnt=, not both")
        try:
            node_cnt = int(str(fields["node_cnt"]).strip())
        except ValueError:
            raise ResvError(f"{where}: NodeCnt={fields['node_cnt']!r}: expected a whole number of "
                            "nodes (several counts, NodeCnt=2,4, are not modelled)") from None
    if node_cnt is not None and node_cnt < 1:
        raise ResvError(f"{where}: NodeCnt={node_cnt}: must be >= 1")
    if nodes is None and node_cnt is None:
        raise ResvError(f"{where}: no nodes: give Nodes=HOSTLIST, Nodes=ALL or NodeCnt=N "
                        "(Reservation request lacks node specification)")
    users = _names(fields.get("users", ""))
    accounts = _names(fields.get("accounts", ""))
    if not users and not accounts:
        raise ResvError(f"{where}: give Users= or Accounts= (Slurm: Reservation request lacks "
                        "users, accounts or groups)")
    flags = _flags(fields.get("flags", ""), where)
    part = str(fields["partition"]).strip() if fields.get("partition") else None
    if "PART_NODES" in flags and (part is None or (nodes or "").upper() != "ALL"):
        raise ResvError(f"{where}: Flags=PART_NODES needs PartitionName= and Nodes=ALL")
    return ResvSpec(name, start, end, nodes, node_cnt, users, accounts, flags, part, where)


def _canonical(items: list[tuple[str, Any]], where: str) -> dict[str, Any]:
    """(key, value) pairs in any accepted spelling -> canonical fields; an unknown or refused key
    is a `ResvError` with a suggestion."""
    out: dict[str, Any] = {}
    for k, v in items:
        lk = k.strip().lower()
        if lk in _REFUSED_KEYS:
            raise ResvError(f"{where}: {k}: {_REFUSED_KEYS[lk]}")
        f = _KEYS.get(lk)
        if f is None:
            known = frozenset({"ReservationName", "StartTime", "EndTime", "Duration", "Nodes",
                               "NodeCnt", "Users", "Accounts", "Flags", "PartitionName"})
            raise ResvError(f"{where}: {k}: not a reservation key{suggest(k, known)}; keys read: "
                            "ReservationName, StartTime, EndTime, Duration, Nodes, NodeCnt, Users, "
                            "Accounts, Flags, PartitionName")
        if f in out:
            raise ResvError(f"{where}: {k}: given twice")
        out[f] = v
    return out


def parse_scontrol_line(line: str, where: str, log_start: float | None) -> ResvSpec:
    """One ``scontrol create reservation`` line (``ReservationName=maint StartTime=now+1hour
    Duration=120 Nodes=n[1-4] Flags=MAINT Users=root``; a leading ``scontrol create
    reservation`` or ``create reservation`` is accepted) -> `ResvSpec`."""
    try:
        toks = shlex.split(line, comments=False)
    except ValueError as e:
        raise ResvError(f"{where}: {e}") from None
    low = [t.lower() for t in toks]
    for lead in (["scontrol", "create", "reservation"], ["scontrol", "create", "res"],
                 ["create", "reservation"], ["create", "res"]):
        if low[:len(lead)] == lead:
            toks = toks[len(lead):]
            break
    items = []
    for t in toks:
        if "=" not in t:
            raise ResvError(f"{where}: {t!r}: expected KEY=VALUE (e.g. ReservationName=maint)")
        k, v = t.split("=", 1)
        items.append((k, v))
    return _spec(_canonical(items, where), where, log_start)


def load_reservations(value: Any, log_start: float | None) -> list[ResvSpec]:
    """The ``reservations`` option: a TOML list whose items are tables (keys ``name``, ``start``,
    ``end`` or ``duration``, ``nodes`` (hostlist, ``ALL`` or a count), ``node_cnt``, ``users``,
    ``accounts``, ``flags``, ``partition``; or the scontrol spellings) or scontrol lines; or the
    path of a file of ``scontrol create reservation`` lines (``#`` comments, blank lines)."""
    if value is None or value == "" or value == []:
        return []
    if isinstance(value, (str, Path)):
        p = Path(value)
        if not p.is_file():
            raise ResvError(f"options: reservations={str(value)!r}: no such file (give a file of "
                            "'scontrol create reservation' lines, or a list of tables in the TOML)")
        out = []
        for i, raw in enumerate(p.read_text(errors="replace").splitlines(), 1):
            s = raw.split("#", 1)[0].strip()
            if s:
                out.append(parse_scontrol_line(s, f"{p}:{i}", log_start))
        return _unique(out)
    if not isinstance(value, (list, tuple)):
        raise ResvError(f"options: reservations: expected a list of tables or a file path, got "
                        f"{type(value).__name__}")
    out = []
    for i, item in enumerate(value):
        where = f"options: reservations[{i}]"
        if isinstance(item, str):
            out.append(parse_scontrol_line(item, where, log_start))
        elif isinstance(item, dict):
            out.append(_spec(_canonical(list(item.items()), where), where, log_start))
        else:
            raise ResvError(f"{where}: expected a table or an scontrol line, got {type(item).__name__}")
    return _unique(out)


def _unique(specs: list[ResvSpec]) -> list[ResvSpec]:
    seen: dict[str, str] = {}
    for s in specs:
        if s.name in seen:
            raise ResvError(f"{s.where}: ReservationName={s.name} already defined at {seen[s.name]} "
                            "(Duplicate reservation name)")
        seen[s.name] = s.where
    return specs


# ====================================================================== the reservations of a run
@dataclass
class ResvTest:
    """``job_test_resv``'s answer: ``ok`` False = the job may not be tried (its reservation is not
    usable at ``when``: not started, ended, or a move limit reached); ``when``: the (moved) start
    (s); ``mask``: the nodes it may use (bitset); ``cut``: nodes the main pass removes for the rest
    of the pass (``ESLURM_RESERVATION_NOT_USABLE``); ``overlap``: some reservation took nodes
    (``resv_overlap``)."""

    ok: bool
    when: float
    mask: int
    cut: int = 0
    overlap: bool = False


@dataclass
class _Resv:
    spec: ResvSpec
    nodes: int                      # bitset
    flags: frozenset[str]
    part: int                       # partition index (PART_NODES), -1 none
    all_nodes: bool

    @property
    def name(self) -> str:
        return self.spec.name


def _time_overlap(a: ResvSpec, b: ResvSpec) -> bool:
    """``_resv_time_overlap``: do the windows of ``a`` and ``b`` (each repeated for one week when
    recurring) intersect?"""
    def inst(s: ResvSpec) -> list[tuple[float, float]]:
        p = s.period
        n = int(7 * 86400 // p) if p else 1
        return [(s.start + k * p, s.end + k * p) for k in range(n)]
    ib = inst(b)
    return any(s1 < e2 and e1 > s2 for s1, e1 in inst(a) for s2, e2 in ib)


class ResvSet:
    """The reservations of a run, resolved on the machine's nodes, and each job's reservation.

    Parameters
    ----------
    specs: the reservations, in creation order.
    node_names: slurm.conf node names (index order), or [] (then ``NN`` unnamed nodes).
    NN: nodes of the machine.
    pmask: partition node sets (bitsets), ``part_names`` their names, ``default_k`` the default.
    job_resv: each job's requested reservation name ("" none).
    job_user, job_account: each job's user and account names (access checks).
    job_id: job ids (messages).
    """

    def __init__(self, specs: list[ResvSpec], node_names: list[str], NN: int, pmask: list[int],
                 part_names: list[str], default_k: int, job_resv: list[str], job_user: list[str],
                 job_account: list[str], job_id: np.ndarray, over_run: float = 0.0):
        self.NN = NN
        #: ResvOverRun (s): a job of a reservation is killed at the first periodic check after its
        #: end + over_run (`kill_time`)
        self.over_run = float(over_run)
        #: job index -> the kill time (s) set at its last start (`on_start`)
        self.kill_at: dict[int, float] = {}
        self.full = (1 << NN) - 1
        self.pmask = pmask
        self.notes: list[str] = []
        index = {nm: i for i, nm in enumerate(node_names)}
        self.node_names = list(node_names)
        self.resv: list[_Resv] = []
        for s in specs:
            self.resv.append(self._create(s, index, pmask, part_names, default_k))
        by_name = {r.name: q for q, r in enumerate(self.resv)}
        self.jres = np.full(len(job_resv), -1, dtype=np.int64)
        self._bind_jobs(job_resv, job_user, job_account, job_id, by_name)
        self.has_jobs = bool((self.jres >= 0).any())
        #: boundaries (s) already crossed, for wake-ups
        self.last_seen = -math.inf
        self.overrun: list[int] = []         # job indices started able to outlive their reservation
        self._warned = False

    # ------------------------------------------------------------------ creation (create_resv)
    def _create(self, s: ResvSpec, index: dict[str, int], pmask: list[int], part_names: list[str],
                default_k: int) -> _Resv:
        """Resolve one reservation's nodes as ``create_resv`` does (see the module docstring)."""
        k_of = {nm: k for k, nm in enumerate(part_names)}
        part = -1
        if s.partition is not None:
            if s.partition not in k_of:
                raise ResvError(f"{s.where}: PartitionName={s.partition}: not a partition of "
                                f"slurm.conf{suggest(s.partition, frozenset(part_names))} "
                                f"(partitions: {', '.join(part_names)})")
            part = k_of[s.partition]
        flags = s.flags
        all_nodes = False
        if s.nodes is not None:
            if s.nodes.upper() == "ALL":
                if "PART_NODES" in flags:
                    nodes = pmask[part]
                else:
                    flags = flags - {"PART_NODES"}
                    all_nodes = True
                    nodes = self.full
            else:
                nodes = self._hostlist(s, index)
            if not ({"MAINT", "OVERLAP"} & flags):
                for r in self.resv:
                    if ({"MAINT", "OVERLAP"} & r.flags) or not (r.nodes & nodes):
                        continue
                    if _time_overlap(s, r.spec):
                        raise ResvError(f"{s.where}: reservation {s.name} overlaps reservation "
                                        f"{r.name} ({r.spec.where}) on nodes and time (Slurm: "
                                        "Requested reservation overlaps with another reservation); "
                                        "add Flags=OVERLAP or MAINT, or move it")
        else:
            nodes = self._pick(s, flags, pmask[part if part >= 0 else default_k])
        return _Resv(s, nodes, flags, part, all_nodes)

    def _hostlist(self, s: ResvSpec, index: dict[str, int]) -> int:
        if not index:
            raise ResvError(f"{s.where}: Nodes={s.nodes}: slurm.conf names no nodes (no NodeName "
                            "lines); give NodeCnt=N or Nodes=ALL, or give --slurm-conf with NodeName lines")
        try:
            names = expand_hostlist(s.nodes)
        except ValueError as e:
            raise ResvError(f"{s.where}: Nodes={s.nodes}: {e}") from None
        out = 0
        for nm in names:
            if nm not in index:
                raise ResvError(f"{s.where}: Nodes={s.nodes}: node {nm} is not a NodeName of "
                                f"slurm.conf{suggest(nm, frozenset(index))} (Invalid node name specified)")
            out |= 1 << index[nm]
        return out

    def _pick(self, s: ResvSpec, flags: frozenset[str], pnodes: int) -> int:
        """``NodeCnt=N``: the lowest-index nodes of the partition free of reservations that
        overlap in time (``_filter_resv``), then, for MAINT/OVERLAP, reserved ones too
        (``_pick_nodes_ordered``'s later bitmaps); fewer than N: those, with a note."""
        n = int(s.node_cnt)
        free = pnodes
        for r in self.resv:
            if _time_overlap(s, r.spec):
                free &= ~r.nodes
        got = _low(free, n)
        if got.bit_count() < n and {"MAINT", "OVERLAP"} & flags:
            got |= _low(pnodes & ~got, n - got.bit_count())
        if not got:
            raise ResvError(f"{s.where}: NodeCnt={n}: no node of the partition is free of other "
                            "reservations at that time (Slurm: Requested nodes are busy)")
        if got.bit_count() < n:
            self.notes.append(f"reservation {s.name}: NodeCnt={n} but only {got.bit_count()} nodes "
                              "are free of other reservations: Slurm 22.05 reduces the count "
                              "(Reducing requested node count)")
        return got

    # ------------------------------------------------------------------ jobs
    def _bind_jobs(self, job_resv: list[str], job_user: list[str], job_account: list[str],
                   job_id: np.ndarray, by_name: dict[str, int]) -> None:
        """Each job's reservation index (``jres``); an unknown reservation, several names or a
        user without access is a `ResvError` naming the job (Slurm refuses them at submit)."""
        unknown: dict[str, list[int]] = {}
        for j, nm in enumerate(job_resv):
            nm = (nm or "").strip()
            if not nm:
                continue
            if "," in nm:
                raise ResvError(f"job {int(job_id[j])} names several reservations ({nm}): a job in "
                                "one of several reservations is not modelled")
            q = by_name.get(nm)
            if q is None:
                unknown.setdefault(nm, []).append(j)
                continue
            if not self._access(self.resv[q].spec, job_user[j], job_account[j]):
                s = self.resv[q].spec
                raise ResvError(
                    f"job {int(job_id[j])} (user {job_user[j]}, account {job_account[j]}) asks for "
                    f"reservation {nm}, whose Users={','.join(s.users) or '-'} Accounts="
                    f"{','.join(s.accounts) or '-'} ({s.where}) do not admit it: Slurm refuses it "
                    "at submit (Access denied to requested reservation); add the user or account")
            self.jres[j] = q
        if unknown:
            nm, js = sorted(unknown.items(), key=lambda x: -len(x[1]))[0]
            known = frozenset(r.name for r in self.resv)
            raise ResvError(
                f"{sum(len(v) for v in unknown.values())} jobs ask for reservations that are not "
                f"defined (first: {nm}, {len(js)} jobs, e.g. job {int(job_id[js[0]])})"
                f"{suggest(nm, known) if known else ''}; define them (scheduler.reservations or a "
                "file of 'scontrol create reservation' lines) or set scheduler.job_reservations="
                "ignore to schedule such jobs as if submitted without --reservation")

    @staticmethod
    def _access(s: ResvSpec, user: str, account: str) -> bool:
        """``_valid_job_access_resv``: a listed user (or any user but the listed ones with a
        leading ``-``), else a listed account (same negation)."""
        def admits(names: list[str], who: str) -> bool | None:
            if not names:
                return None
            neg = names[0].startswith("-")
            clean = {x.lstrip("-") for x in names}
            return (who not in clean) if neg else (who in clean)
        u = admits(s.users, user)
        if u is False and s.users[0].startswith("-"):
            return False                     # a user excluded by Users=-name has no access
        a = admits(s.accounts, account)
        return bool(u) or bool(a)

    # ------------------------------------------------------------------ time
    def window(self, r: _Resv, now: float) -> tuple[float, float]:
        """The current window [start, end) (s) of ``r`` at ``now``: a recurring reservation moved
        on by whole periods once it ended (``_advance_resv_time``)."""
        s, e, p = r.spec.start, r.spec.end, r.spec.period
        if p and e <= now:
            k = math.floor((now - e) / p) + 1
            return s + k * p, e + k * p
        return s, e

    def next_boundary(self, now: float) -> float | None:
        """The next reservation start or end after ``now`` (s), or None."""
        best = math.inf
        for r in self.resv:
            s, e = self.window(r, now)
            for t in (s, e):
                if now < t < best:
                    best = t
        return best if best < math.inf else None

    def crossed(self, now: float) -> bool:
        """Whether a reservation boundary lies in (last call's now, now]."""
        last, self.last_seen = self.last_seen, now
        for r in self.resv:
            s, e = self.window(r, last if last > -math.inf else now)
            if any(last < t <= now for t in (s, e)):
                return True
            if r.spec.period and last > -math.inf and self.window(r, now) != (s, e):
                return True
        return False

    def resv_end(self, start: float, res: float, now: float) -> float:
        """``find_resv_end``: the earliest end (s) of a reservation ending at or after ``start``,
        rounded up to ``res``; 0 when none."""
        best = 0.0
        for r in self.resv:
            e = self.window(r, now)[1]
            if start > e:
                continue
            if not best or e < best:
                best = e
        if best and res > 0:
            best = math.ceil(best / res - 1e-9) * res
        return best

    # ------------------------------------------------------------------ job_test_resv
    def test(self, j: int, k: int, when: float, dur: float, move: bool, now: float) -> ResvTest:
        """``job_test_resv`` for job ``j`` of partition ``k`` with limit ``dur`` (s) starting at
        ``when`` (s); ``move``: backfill's ``move_time`` (see the module docstring)."""
        q = int(self.jres[j])
        if q >= 0:
            return self._test_in(self.resv[q], when, dur, now)
        full = self.full
        mask = full
        overlap = False
        pk = self.pmask[k]
        for i in range(11):
            moved = None
            end = when + dur
            for r in self.resv:
                s, e = self.window(r, now)
                if s >= end or e <= when:
                    continue
                if (r.all_nodes or ("PART_NODES" in r.flags and r.part == k)
                        or ("MAINT" in r.flags and not (pk & ~r.nodes))):
                    moved = e                # ESLURM_RESERVATION_MAINT: wait for its end
                    break
                mask &= ~r.nodes
                if pk & r.nodes:
                    overlap = True
            if moved is None:
                return ResvTest(True, when, mask, 0, overlap)
            if move and i < 10:
                when = moved
                mask = full
                continue
            return ResvTest(not move, when, 0, 0, overlap)
        return ResvTest(not move, when, 0, 0, overlap)      # pragma: no cover

    def _test_in(self, r: _Resv, when: float, dur: float, now: float) -> ResvTest:
        """``job_test_resv`` for a job of reservation ``r``."""
        if "FLEX" in r.flags:
            mask = self.full
        else:
            s, e = self.window(r, now)
            if when < s:
                return ResvTest(False, s, 0, r.nodes)          # starts later: NOT_USABLE
            if when > e:
                return ResvTest(False, e, 0, 0)                # ended
            mask = r.nodes
        overlap = False
        if "MAINT" not in r.flags:
            end = when + dur
            for r2 in self.resv:
                if r2 is r or ("OVERLAP" in r.flags and "MAINT" not in r2.flags):
                    continue
                s2, e2 = self.window(r2, now)
                if s2 >= end or e2 <= when:
                    continue
                if mask & r2.nodes:
                    overlap = True
                    mask &= ~r2.nodes
        return ResvTest(True, when, mask, 0, overlap)

    def later(self, t: ResvTest, later: float, res: float, window_end: float, now: float) -> float:
        """Backfill's ``later_start`` after ``job_test_resv``: when a reservation took nodes, at
        most ``find_resv_end(start_res, bf_resolution) + 1``."""
        if not t.overlap:
            return later
        e = self.resv_end(t.when, res, now)
        if e and e + 1 < window_end and (not later or e + 1 < later):
            return e + 1
        return later

    # ------------------------------------------------------------------ queue and checks
    def resv_first(self, order: np.ndarray, prio: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``sort_job_queue2``: jobs with a reservation before the others (stable)."""
        if not self.has_jobs or not len(order):
            return order, prio
        has = self.jres[order] >= 0
        if not has.any() or has.all():
            return order, prio
        o = np.argsort(~has, kind="stable")
        return order[o], prio[o]

    def check_pending(self, now: float, queue: np.ndarray, job_id: np.ndarray) -> None:
        """A pending job whose (non-recurring, non-FLEX) reservation ended: Slurm holds it forever
        (``job_test_resv``: "Holding job, expired reservation"); the twin stops with a clear
        error rather than wait (the engine would report a deadlock)."""
        if not self.has_jobs or not len(queue):
            return
        q = self.jres[queue]
        for j, r in zip(queue[q >= 0].tolist(), q[q >= 0].tolist()):
            rv = self.resv[r]
            if rv.spec.period or "FLEX" in rv.flags:
                continue
            if now > rv.spec.end:
                from hpctwin.twin.guards import SimulationError  # noqa: PLC0415
                raise SimulationError(
                    f"job {int(job_id[j])} asks for reservation {rv.name}, which ended at "
                    f"t={rv.spec.end:g} s before the job could start; Slurm holds such a job "
                    "forever (priority 0, expired reservation): lengthen the reservation "
                    f"({rv.spec.where}) or drop the job's reservation")

    def kill_time(self, now: float, j: int) -> float | None:
        """When job ``j`` of a reservation, starting at ``now``, is ended by ``job_time_limit``
        (s): at the first of slurmctld's periodic checks with ``end + ResvOverRun < t``. The checks
        run every ``PERIODIC_TIMEOUT`` (30 s, slurmctld.h) from the controller's start
        (controller.c ``_slurmctld_background``: ``last_timelimit_time``); the twin puts them on the
        log's clock, t = 0, 30, 60, ... (the phase of its PriorityCalcPeriod ticks too). None for a
        job outside reservations, in a ``FLEX`` one, or in a recurring one with ``ResvOverRun > 0``
        (advanced to its next window first; see the module docstring)."""
        q = int(self.jres[j])
        if q < 0:
            return None
        r = self.resv[q]
        if "FLEX" in r.flags or (r.spec.period and self.over_run > 0):
            return None
        t = self.window(r, now)[1] + self.over_run
        return (math.floor(t / PERIODIC_TIMEOUT) + 1.0) * PERIODIC_TIMEOUT

    def on_start(self, now: float, j: int, limit: float, control=None) -> None:
        """Job ``j`` starts at ``now`` with planning limit ``limit`` (s). A job with a reservation
        kill time (`kill_time`) is ended then unless it ends sooner: ``control.kill_at`` (state
        TIMEOUT; `twin.control.EngineControl`; the time is kept for the ``resv_kill_at`` column); one
        whose planned run reaches that time is counted in ``overrun``. Without a control (a policy
        wrapper that gives none) such a job runs to its own end, printed once."""
        t = self.kill_time(now, j)
        if t is None:
            return
        if control is not None:
            control.kill_at(j, t)
            self.kill_at[j] = t
        if now + limit < t:
            return
        r = self.resv[int(self.jres[j])]
        self.overrun.append(j)
        if control is None and not self._warned:
            self._warned = True
            print(f"slurm: a job of reservation {r.name} may run past its end (t={self.window(r, now)[1]:g} s); "
                  "Slurm kills it at End + ResvOverRun, but this run gives the policy no control of running "
                  "jobs (a policy wrapper), so it runs on (counted in scheduler_params.reservations_overrun)")

    def kill_column(self, n: int) -> np.ndarray | None:
        """The ``resv_kill_at`` column of ``jobs.csv``: the time (s) the end of its reservation ends
        each job that started in one (NaN: no reservation, ``FLEX``, or never killed by it), or None
        when no job got one."""
        if not self.kill_at:
            return None
        out = np.full(n, np.nan)
        for j, t in self.kill_at.items():
            out[j] = t
        return out

    def bool_mask(self, x: int) -> np.ndarray:
        """Bitset -> bool array over the ``NN`` nodes."""
        nb = (self.NN + 7) // 8
        a = np.frombuffer(int(x).to_bytes(nb, "little"), dtype=np.uint8)
        return np.unpackbits(a, bitorder="little")[:self.NN].astype(bool)

    def describe(self) -> list[dict]:
        """The reservations as created (times on the log clock, s; nodes as names or indices)."""
        out = []
        for r in self.resv:
            idx = [i for i in range(self.NN) if r.nodes >> i & 1]
            nodes = ([self.node_names[i] for i in idx] if self.node_names else idx)
            out.append({"name": r.name, "start": r.spec.start, "end": r.spec.end,
                        "period": r.spec.period or None, "nodes": nodes, "flags": sorted(r.flags),
                        "users": r.spec.users, "accounts": r.spec.accounts, "where": r.spec.where,
                        "jobs": int((self.jres == self.resv.index(r)).sum())})
        return out


def job_labels(jobs, cols: dict) -> tuple[list[str], list[str], list[str]]:
    """Each job's reservation (sacct ``Reservation``, column ``reservation``), user and account
    names (``user_name``/``account_name`` columns, else the numeric ``user``/``group`` ids as text)."""
    n = len(jobs)
    rs = cols.get("reservation")
    resv = ["" if x is None or (isinstance(x, float) and math.isnan(x)) else str(x) for x in rs] \
        if rs is not None else [""] * n
    un = cols.get("user_name")
    users = [str(x) for x in un] if un is not None else [str(int(x)) for x in np.asarray(jobs.user)]
    an = cols.get("account_name")
    accts = [str(x) for x in an] if an is not None else [str(int(x)) for x in np.asarray(jobs.group)]
    return resv, users, accts


@dataclass
class ResvOptions:
    """The reservation options of the policy: ``specs`` and ``job_reservations`` (``use``: jobs
    naming a reservation run in it; ``ignore``: as if submitted without ``--reservation``)."""

    specs: list[ResvSpec] = field(default_factory=list)
    job_reservations: str = "use"
    #: the ``reservations`` value when it holds absolute (ISO) times and no ``log_start`` was given:
    #: checked at once on a provisional clock, resolved at bind on the log's (`resolve`)
    on_log_clock: Any = None

    def resolve(self, log_start: float | None) -> list[ResvSpec]:
        """The reservations on the log clock: ``log_start`` is the Unix time of the log's time 0 (the
        log header's ``UnixStartTime``), None when the log does not say; then absolute times are the
        error `parse_resv_time` gives."""
        if self.on_log_clock is None:
            return self.specs
        return load_reservations(self.on_log_clock, log_start)


def resv_options(options: dict) -> ResvOptions:
    """``reservations``, ``log_start`` and ``job_reservations`` from the scheduler options. Without
    ``log_start``, reservations with absolute times are checked now (on a provisional clock: every
    other error is reported at once) and placed on the log's clock at bind (`ResvOptions.resolve`)."""
    mode = str(options.get("job_reservations", "use")).strip().lower()
    if mode not in ("use", "ignore"):
        raise ResvError(f"options: job_reservations={mode!r}: expected use or ignore")
    value, log_start = options.get("reservations"), parse_log_start(options.get("log_start"))
    try:
        return ResvOptions(load_reservations(value, log_start), mode)
    except ResvNeedsClock:
        return ResvOptions(load_reservations(value, 0.0), mode, on_log_clock=value)
