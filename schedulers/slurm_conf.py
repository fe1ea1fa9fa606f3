"""A ``slurm.conf``-style configuration for the Slurm-like scheduler: parser and defaults.

Only the keys that shape scheduling are modelled (names and defaults from the slurm.conf man page,
https://slurm.schedmd.com/slurm.conf.html, and sched/backfill's ``backfill.c``):

* ``SchedulerType``: ``sched/backfill`` (default) or ``sched/builtin`` (no backfill pass).
* ``SchedulerParameters`` (comma list): ``bf_interval`` (s, default 30), ``bf_resolution`` (s, 60),
  ``bf_window`` (*minutes*, 1440), ``bf_max_job_test`` (500), ``bf_continue``,
  ``bf_job_part_count_reserve`` (0 = reserve for every tested job), ``bf_max_job_start`` (0 = no
  limit), ``bf_max_job_part`` / ``bf_max_job_user`` (0), ``bf_min_age_reserve`` (s, 0),
  ``bf_min_prio_reserve`` (0), ``default_queue_depth`` (100), ``partition_job_depth`` (0),
  ``sched_interval`` (s, 60). Limits as in backfill.c (e.g. bf_interval 1..10800, bf_resolution
  1..3600, bf_window up to 30 days).
* ``PriorityType`` (``priority/multifactor``, current default, or ``priority/basic``),
  ``PriorityWeight{Age,FairShare,JobSize,Partition,QOS}`` (0), ``PriorityMaxAge`` (7-0),
  ``PriorityDecayHalfLife`` (7-0), ``PriorityCalcPeriod`` (*minutes*, 5), ``PriorityFavorSmall`` (NO),
  ``PriorityFlags`` (``FAIR_TREE`` is the default algorithm since Slurm 19.05; ``NO_FAIR_TREE``
  selects the classic formula; ``SMALL_RELATIVE_TO_TIME``), ``FairShareDampeningFactor`` (1),
  ``PriorityUsageResetPeriod`` (only ``NONE`` is modelled).
* ``NodeName`` lines (names as hostlists, ``CPUs``; ``NodeName=DEFAULT`` sets defaults): the node
  count and the CPUs per node. ``PartitionName`` lines: ``Nodes`` (hostlist or ``ALL``),
  ``MaxTime`` (minutes or a Slurm time; ``UNLIMITED``), ``PriorityTier``, ``PriorityJobFactor``
  (``Priority`` sets both, as in old Slurm), ``Default``, ``State``.

Any other key (or node/partition attribute) is collected in ``SlurmConfig.ignored`` and reported
once with a warning, never silently. A malformed value is a `SlurmConfError` naming the file, the
line and the key.
"""
from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from hpctwin.datasets.sacct import parse_slurm_duration
from hpctwin.twin.errors import RunConfigError

from .slurm_keys import (CONF_KEYS, NODE_ATTRS, PARTITION_ATTRS, SCHED_PARAMS, WALL_CLOCK_PARAMS,
                         suggest)


class SlurmConfError(RunConfigError):
    """A malformed slurm.conf entry or option (the message names file, line and key)."""


# ----------------------------------------------------------------------------- value parsing
def parse_time(text: str, default_unit: float = 60.0) -> float:
    """A slurm.conf time value -> seconds (inf for UNLIMITED/INFINITE).

    A bare number is in ``default_unit`` seconds (minutes for MaxTime/PriorityCalcPeriod); otherwise
    Slurm's forms ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``, parsed by the same function
    as sacct's time fields.
    """
    s = text.strip()
    if s.upper() in ("UNLIMITED", "INFINITE"):
        return math.inf
    if re.fullmatch(r"\d+", s):
        return int(s) * default_unit
    v = parse_slurm_duration(s)
    if math.isnan(v):
        raise ValueError(f"bad time {text!r}")
    return v


def _bool(text: str) -> bool:
    s = text.strip().upper()
    if s in ("YES", "TRUE", "1", "Y"):
        return True
    if s in ("NO", "FALSE", "0", "N"):
        return False
    raise ValueError(f"expected YES or NO, got {text!r}")


def expand_hostlist(text: str) -> list[str]:
    """Slurm hostlist -> names: ``n[0-2,5],gpu01`` -> ``n0 n1 n2 n5 gpu01``; zero padding kept
    (``tux[008-010]``); several bracket groups expand as a product (``r[0-1]n[0-1]``)."""
    out: list[str] = []
    depth = 0
    cur = ""
    items = []
    for ch in text.strip():
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in hostlist {text!r}")
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    if depth != 0:
        raise ValueError(f"unbalanced '[' in hostlist {text!r}")
    items.append(cur)
    for item in items:
        item = item.strip()
        if not item:
            raise ValueError(f"empty name in hostlist {text!r}")
        names = [""]
        for m in re.finditer(r"([^\[]+)|\[([^\]]*)\]", item):
            if m.group(1) is not None:
                names = [n + m.group(1) for n in names]
                continue
            choices = []
            for rng in m.group(2).split(","):
                if "-" in rng:
                    a, b = rng.split("-", 1)
                    if not (a.isdigit() and b.isdigit()) or int(b) < int(a):
                        raise ValueError(f"bad range {rng!r} in hostlist {text!r}")
                    w = len(a)
                    choices += [str(i).zfill(w) for i in range(int(a), int(b) + 1)]
                elif rng.isdigit():
                    choices.append(rng)
                else:
                    raise ValueError(f"bad range {rng!r} in hostlist {text!r}")
            names = [n + c for n in names for c in choices]
        out.extend(names)
    return out


# ----------------------------------------------------------------------------- config records
@dataclass
class SchedParams:
    """SchedulerParameters (times in seconds; ``bf_window`` converted from the file's minutes)."""

    backfill: bool = True                 # SchedulerType=sched/backfill
    bf_interval: float = 30.0             # backfill.c BACKFILL_INTERVAL
    bf_resolution: float = 60.0           # backfill.c BACKFILL_RESOLUTION
    bf_window: float = 86400.0            # backfill.c BACKFILL_WINDOW (24 * 60 * 60)
    bf_max_job_test: int = 500            # backfill.c DEF_BF_MAX_JOB_TEST
    bf_continue: bool = False
    bf_busy_nodes: bool = False           # cons_tres will-run: busy nodes first (_eval_nodes_busy)
    bf_job_part_count_reserve: int = 0
    bf_max_job_start: int = 0
    bf_max_job_part: int = 0
    bf_max_job_user: int = 0
    bf_min_age_reserve: float = 0.0
    bf_min_prio_reserve: int = 0
    default_queue_depth: int = 100        # slurm.conf: default 100
    partition_job_depth: int = 0
    sched_interval: float = 60.0          # slurm.conf: default 60 s


@dataclass
class PriorityParams:
    """Priority plugin settings (times in seconds)."""

    type: str = "priority/basic"          # 22.05 read_config.h DEFAULT_PRIORITY_TYPE
    weight_age: int = 0
    weight_fairshare: int = 0
    weight_jobsize: int = 0
    weight_partition: int = 0
    weight_qos: int = 0
    max_age: float = 7 * 86400.0          # PriorityMaxAge default 7-0
    decay_half_life: float = 7 * 86400.0  # PriorityDecayHalfLife default 7-0
    calc_period: float = 300.0            # PriorityCalcPeriod default 5 minutes
    favor_small: bool = False
    fair_tree: bool = True                # default algorithm since 19.05 (NO_FAIR_TREE disables)
    small_relative_to_time: bool = False
    dampening: float = 1.0                # FairShareDampeningFactor default 1


@dataclass
class PartitionDef:
    """One ``PartitionName`` line. ``nodes`` None = ALL; ``max_time`` in seconds (inf = none);
    ``min_nodes``/``max_nodes``: the job node-count limits (MinNodes, MaxNodes; inf = none)."""

    name: str
    nodes: list[str] | None = None
    max_time: float = math.inf
    min_nodes: int = 0
    max_nodes: float = math.inf
    priority_tier: int = 1
    priority_job_factor: int = 1
    default: bool = False
    state: str = "UP"
    line: int = 0
    #: ``OverSubscribe``: ``NO`` (default: cores are not shared, nodes are), ``EXCLUSIVE`` (whole
    #: nodes), ``YES`` (as NO here: jobs do not ask ``--oversubscribe``)
    oversubscribe: str = "NO"
    def_mem_per_cpu: float | None = None      # DefMemPerCPU (MB) of the partition
    def_mem_per_node: float | None = None     # DefMemPerNode (MB) of the partition
    #: ``PreemptMode`` of the partition as written (None: not given), read by `schedulers.slurm_preempt`
    preempt_mode: str | None = None


@dataclass
class SlurmConfig:
    """Everything the Slurm-like scheduler reads from slurm.conf (and the run's options)."""

    sched: SchedParams = field(default_factory=SchedParams)
    priority: PriorityParams = field(default_factory=PriorityParams)
    node_names: list[str] = field(default_factory=list)
    cpus_per_node: int | None = None
    partitions: list[PartitionDef] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    #: wall-clock time-budget keys read (`slurm_keys.WALL_CLOCK_PARAMS`): no effect here
    no_effect: list[str] = field(default_factory=list)
    path: str = ""
    node_gpus: list[int] = field(default_factory=list)    # NodeName Gres=gpu:N per node
    select_type: str = "select/linear"                    # 22.05 DEFAULT_SELECT_TYPE (non-Cray)
    #: SelectTypeParameters of select/cons_tres and cons_res: ``CR_Core``, ``CR_CPU``,
    #: ``CR_Core_Memory`` (22.05's default, cons_common.c ``select_p_node_init``), ``CR_CPU_Memory``
    select_params: str = "CR_Core_Memory"
    node_cpus: list[int] = field(default_factory=list)    # NodeName CPUs per node
    node_mem: list[float] = field(default_factory=list)   # NodeName RealMemory per node (MB; default 1)
    node_weight: list[int] = field(default_factory=list)  # NodeName Weight per node (default 1)
    def_mem_per_cpu: float | None = None                  # DefMemPerCPU (MB)
    def_mem_per_node: float | None = None                 # DefMemPerNode (MB)
    accounting_storage_type: str = "accounting_storage/none"  # DEFAULT_ACCOUNTING_STORAGE_TYPE
    #: preemption keys as written, lower-case key -> (value, line): PreemptType, PreemptMode,
    #: PreemptExemptTime, JobRequeue, AuthInfo and the preempt_* SchedulerParameters (validated and
    #: modelled by `schedulers.slurm_preempt`)
    preempt: dict = field(default_factory=dict)
    #: ``ResvOverRun`` as written, (value, line) or None (validated and modelled by `schedulers.slurm_resv`)
    resv_over_run: tuple | None = None

    @property
    def memory_tracked(self) -> bool:
        """Whether memory is a consumable resource (``SelectTypeParameters=CR_*_Memory``)."""
        return self.select_params.endswith("_Memory")

    @property
    def heterogeneous(self) -> bool:
        """Whether NodeName lines give nodes different CPU counts."""
        return len(set(self.node_cpus)) > 1

    @property
    def with_slurmdbd(self) -> bool:
        """``slurm_with_slurmdbd()``: age and fair-share factors need slurmdbd accounting."""
        return self.accounting_storage_type == "accounting_storage/slurmdbd"

    def describe(self) -> dict:
        d: dict[str, Any] = {"slurm_conf": self.path or None}
        d.update({f"sched.{f.name}": getattr(self.sched, f.name) for f in fields(self.sched)})
        d.update({f"priority.{f.name}": getattr(self.priority, f.name) for f in fields(self.priority)})
        d["select_type"] = self.select_type
        if self.select_type != "select/linear":
            d["select_type_parameters"] = self.select_params
        d["accounting_storage_type"] = self.accounting_storage_type
        d["nodes"] = len(self.node_names) or None
        d["cpus_per_node"] = self.cpus_per_node
        d["partitions"] = [p.name for p in self.partitions]
        if self.ignored:
            d["ignored"] = list(self.ignored)
        if self.no_effect:
            d["no_effect"] = list(self.no_effect)
        return d


# SchedulerParameters: name -> (field, kind, lo, hi). kind: int / sec / min / flag
_SCHED_KEYS: dict[str, tuple[str, str, float, float]] = {
    "bf_interval": ("bf_interval", "sec", 1, 10800),
    "bf_resolution": ("bf_resolution", "sec", 1, 3600),
    "bf_window": ("bf_window", "min", 1, 43200),
    "bf_max_job_test": ("bf_max_job_test", "int", 1, 1_000_000),
    "bf_continue": ("bf_continue", "flag", 0, 0),
    "bf_busy_nodes": ("bf_busy_nodes", "flag", 0, 0),
    "bf_job_part_count_reserve": ("bf_job_part_count_reserve", "int", 0, 100000),
    "bf_max_job_start": ("bf_max_job_start", "int", 0, 10000),
    "bf_max_job_part": ("bf_max_job_part", "int", 0, 1_000_000),
    "bf_max_job_user": ("bf_max_job_user", "int", 0, 1_000_000),
    "bf_min_age_reserve": ("bf_min_age_reserve", "sec", 0, 30 * 86400),
    "bf_min_prio_reserve": ("bf_min_prio_reserve", "int", 0, 2**32 - 1),
    "default_queue_depth": ("default_queue_depth", "int", 1, 1_000_000),
    "partition_job_depth": ("partition_job_depth", "int", 0, 1_000_000),
    "sched_interval": ("sched_interval", "sec", 1, 10**9),
}

# Scalar slurm.conf keys (lower-case) -> handler name
_PRIORITY_WEIGHTS = {
    "priorityweightage": "weight_age",
    "priorityweightfairshare": "weight_fairshare",
    "priorityweightjobsize": "weight_jobsize",
    "priorityweightpartition": "weight_partition",
    "priorityweightqos": "weight_qos",
}
#: SelectType values modelled (select/linear exactly; cons_tres/cons_res approximated)
SELECT_TYPES = ("select/linear", "select/cons_tres", "select/cons_res")
ACCOUNTING_TYPES = ("accounting_storage/none", "accounting_storage/slurmdbd")
_CONF_KEYS_LOWER = {k.lower() for k in CONF_KEYS}
_SCHED_PARAMS_LOWER = {k.lower() for k in SCHED_PARAMS}
_NODE_ATTRS_LOWER = {k.lower() for k in NODE_ATTRS}
_PART_ATTRS_LOWER = {k.lower() for k in PARTITION_ATTRS}


class _Parser:
    def __init__(self, path: str):
        self.path = path
        self.cfg = SlurmConfig(path=path)
        self.node_default_cpus: int | None = None
        self.node_cpus: list[int] = []
        self.node_default_gpus = 0
        self.node_default_mem = 1.0        # RealMemory default: 1 MB (slurm.conf(5))
        self.node_default_weight = 1       # Weight default: 1
        #: keys modelled by select/cons_tres only: listed as not modelled under select/linear
        self.cons_only: list[tuple[str, int]] = []
        self.part_default: dict[str, str] = {}
        self._ignored_seen: set[str] = set()

    # ------------------------------------------------------------------ helpers
    def err(self, line: int, key: str, msg: str) -> SlurmConfError:
        where = f"{self.path}:{line}" if line else (self.path or "options")
        return SlurmConfError(f"{where}: {key}: {msg}")

    def ignore(self, what: str, line: int) -> None:
        k = what.lower()
        if k not in self._ignored_seen:
            self._ignored_seen.add(k)
            self.cfg.ignored.append(f"{what} (line {line})" if line else what)

    def no_effect_key(self, k: str, line: int) -> None:
        """A wall-clock time-budget key (`slurm_keys.WALL_CLOCK_PARAMS`) was read."""
        if k not in self._ignored_seen:
            self._ignored_seen.add(k)
            self.cfg.no_effect.append(f"{k} (line {line})" if line else k)

    def number(self, line: int, key: str, value: str, lo: float, hi: float, kind: str = "int"):
        try:
            v = int(value.strip()) if kind == "int" else float(value.strip())
        except ValueError:
            raise self.err(line, key, f"{value!r} is not a number") from None
        if not lo <= v <= hi:
            raise self.err(line, key, f"{v} outside [{lo:g}, {hi:g}]")
        return v

    # ------------------------------------------------------------------ SchedulerParameters
    def sched_param(self, line: int, item: str) -> None:
        item = item.strip()
        if not item:
            return
        k, eq, v = item.partition("=")
        k = k.strip().lower()
        spec = _SCHED_KEYS.get(k)
        if k in _PREEMPT_SCHED:                 # schedulers.slurm_preempt validates and models them
            self.cfg.preempt[k] = (v.strip() if eq else "", line)
            return
        if spec is None:
            if k not in _SCHED_PARAMS_LOWER:
                raise self.err(line, "SchedulerParameters",
                               f"unknown option {k!r}{suggest(k, SCHED_PARAMS)}")
            if k in WALL_CLOCK_PARAMS:
                self.no_effect_key(k, line)
            else:
                self.ignore(f"SchedulerParameters {k}", line)
            return
        name, kind, lo, hi = spec
        key = f"SchedulerParameters {k}"
        if k in WALL_CLOCK_PARAMS:
            self.no_effect_key(k, line)
        if kind == "flag":
            if eq and v.strip().upper() not in ("", "YES", "1", "TRUE"):
                raise self.err(line, key, f"is a flag, got value {v!r}")
            setattr(self.cfg.sched, name, True)
            return
        if not eq:
            raise self.err(line, key, "needs a value (key=value)")
        if kind == "int":
            setattr(self.cfg.sched, name, self.number(line, key, v, lo, hi))
        elif kind == "sec":
            setattr(self.cfg.sched, name, float(self.number(line, key, v, lo, hi)))
        elif kind == "min":
            setattr(self.cfg.sched, name, 60.0 * self.number(line, key, v, lo, hi))

    # ------------------------------------------------------------------ scalar keys
    def scalar(self, line: int, key: str, value: str) -> None:
        k = key.lower()
        pr = self.cfg.priority
        try:
            if k == "schedulertype":
                v = value.strip().lower()
                if v not in ("sched/backfill", "sched/builtin"):
                    raise self.err(line, key, f"{value!r}: only sched/backfill and sched/builtin "
                                              "are modelled")
                self.cfg.sched.backfill = v == "sched/backfill"
            elif k == "schedulerparameters":
                for item in value.split(","):
                    self.sched_param(line, item)
            elif k == "prioritytype":
                v = value.strip().lower()
                if v not in ("priority/multifactor", "priority/basic"):
                    raise self.err(line, key, f"{value!r}: only priority/multifactor and "
                                              "priority/basic are modelled")
                pr.type = v
            elif k in _PRIORITY_WEIGHTS:
                setattr(pr, _PRIORITY_WEIGHTS[k], self.number(line, key, value, 0, 2**32 - 1))
            elif k == "prioritymaxage":
                pr.max_age = parse_time(value, 60.0)
                if not 0 < pr.max_age < math.inf:
                    raise ValueError("must be a positive finite time")
            elif k == "prioritydecayhalflife":
                pr.decay_half_life = parse_time(value, 60.0)
                if pr.decay_half_life < 0:
                    raise ValueError("must be >= 0 (0 = no decay)")
            elif k == "prioritycalcperiod":
                pr.calc_period = parse_time(value, 60.0)
                if not 0 < pr.calc_period < math.inf:
                    raise ValueError("must be a positive finite time")
            elif k == "priorityfavorsmall":
                pr.favor_small = _bool(value)
            elif k == "priorityflags":
                for flag in value.split(","):
                    f = flag.strip().upper()
                    if not f:
                        continue
                    if f == "FAIR_TREE":
                        pr.fair_tree = True
                    elif f == "NO_FAIR_TREE":
                        pr.fair_tree = False
                    elif f == "SMALL_RELATIVE_TO_TIME":
                        pr.small_relative_to_time = True
                    else:
                        self.ignore(f"PriorityFlags {f}", line)
            elif k == "fairsharedampeningfactor":
                pr.dampening = float(self.number(line, key, value, 1, 2**16 - 1))
            elif k == "priorityusageresetperiod":
                if value.strip().upper() != "NONE":
                    raise self.err(line, key, f"{value!r}: only NONE is modelled (usage is never "
                                              "reset; it decays with PriorityDecayHalfLife)")
            elif k == "selecttype":
                v = value.strip().lower()
                if v not in SELECT_TYPES:
                    raise self.err(line, key, f"{value!r}: only {', '.join(SELECT_TYPES)} are "
                                              "modelled")
                self.cfg.select_type = v
            elif k == "selecttypeparameters":
                self.cfg.select_params = self.select_params(line, key, value)
                self.cons_only.append((key, line))
            elif k in ("defmempercpu", "defmempernode"):
                mb = self.mem_mb(line, key, value)
                self.cons_only.append((key, line))
                setattr(self.cfg, "def_mem_per_cpu" if k == "defmempercpu" else "def_mem_per_node", mb)
            elif k == "accountingstoragetype":
                v = value.strip().lower()
                if v not in ACCOUNTING_TYPES:
                    raise self.err(line, key, f"{value!r}: expected one of "
                                              f"{', '.join(ACCOUNTING_TYPES)}")
                self.cfg.accounting_storage_type = v
            elif k in ("priorityweighttres", "priorityweightassoc", "priorityparameters",
                       "prioritysitefactorplugin", "prioritysitefactorparameters"):
                self.ignore(f"{key} (TRES, association and site factors are not modelled)", line)
            elif k in _PREEMPT_KEYS:            # schedulers.slurm_preempt validates and models them
                self.cfg.preempt[k] = (value.strip(), line)
            elif k == "resvoverrun":            # schedulers.slurm_resv validates and models it
                self.cfg.resv_over_run = (value.strip(), line)
            elif k in _POWER_SAVE_KEYS:
                self.ignore(f"{key} (modelled by the power_saving model when it is on: --set "
                            "power_saving.enabled=true, docs/power.md)", line)
            elif k in _CONF_KEYS_LOWER:
                self.ignore(key, line)
            else:
                known = CONF_KEYS
                if not line:        # a run option may also be a SchedulerParameters name
                    known = CONF_KEYS | SCHED_PARAMS | frozenset(SCHEDULER_OPTION_KEYS)
                raise self.err(line, key, f"not a slurm.conf key of Slurm 22.05"
                                          f"{suggest(key, known)}")
        except SlurmConfError:
            raise
        except ValueError as e:
            raise self.err(line, key, str(e)) from None

    def select_params(self, line: int, key: str, value: str) -> str:
        """``SelectTypeParameters``: one of ``CR_Core``, ``CR_CPU``, ``CR_Core_Memory``,
        ``CR_CPU_Memory`` (case-insensitive) plus flags read but not modelled (``CR_LLN``,
        ``CR_Pack_Nodes``, ...: listed as ignored); ``CR_Socket*``/``CR_Memory`` alone are refused."""
        base = None
        for item in filter(None, (x.strip() for x in value.split(","))):
            u = item.upper()
            if u in ("CR_CORE", "CR_CPU", "CR_CORE_MEMORY", "CR_CPU_MEMORY"):
                if base is not None:
                    raise self.err(line, key, f"two resource types ({base}, {item})")
                base = {"CR_CORE": "CR_Core", "CR_CPU": "CR_CPU", "CR_CORE_MEMORY": "CR_Core_Memory",
                        "CR_CPU_MEMORY": "CR_CPU_Memory"}[u]
            elif u.startswith("CR_SOCKET") or u == "CR_MEMORY":
                raise self.err(line, key, f"{item!r}: only CR_Core, CR_CPU, CR_Core_Memory and "
                                          "CR_CPU_Memory are modelled")
            else:
                self.ignore(f"SelectTypeParameters {item}", line)
        if base is None:
            raise self.err(line, key, f"{value!r} names no resource type (CR_Core, CR_CPU, "
                                      "CR_Core_Memory or CR_CPU_Memory)")
        return base

    def mem_mb(self, line: int, key: str, value: str) -> float | None:
        """A memory size in MB (``DefMemPerCPU``, ``RealMemory``...; ``UNLIMITED``/0: None)."""
        v = value.strip()
        if v.upper() in ("UNLIMITED", "INFINITE"):
            return None
        mb = float(self.number(line, key, v, 0, 2**63 - 1))
        return mb or None

    # ------------------------------------------------------------------ NodeName / PartitionName
    def node_line(self, line: int, pairs: list[tuple[str, str]]) -> None:
        names_v = pairs[0][1]
        cpus = None
        gpus = None
        mem = None
        weight = None
        for k, v in pairs[1:]:
            if k.lower() == "cpus":
                cpus = self.number(line, k, v, 1, 10**6)
            elif k.lower() == "gres":
                gpus = self.gres_gpus(line, k, v)
            elif k.lower() == "realmemory":
                mem = float(self.number(line, k, v, 1, 2**63 - 1))
                self.cons_only.append((f"NodeName attribute {k}", line))
            elif k.lower() == "weight":
                weight = self.number(line, k, v, 0, 2**32 - 2)
                self.cons_only.append((f"NodeName attribute {k}", line))
            elif k.lower() in _NODE_ATTRS_LOWER:
                self.ignore(f"NodeName attribute {k}", line)
            else:
                raise self.err(line, f"NodeName {k}",
                               f"not a NodeName attribute{suggest(k, NODE_ATTRS)}")
        if names_v.upper() == "DEFAULT":
            if cpus is not None:
                self.node_default_cpus = cpus
            if gpus is not None:
                self.node_default_gpus = gpus
            if mem is not None:
                self.node_default_mem = mem
            if weight is not None:
                self.node_default_weight = weight
            return
        try:
            names = expand_hostlist(names_v)
        except ValueError as e:
            raise self.err(line, "NodeName", str(e)) from None
        c = cpus if cpus is not None else (self.node_default_cpus or 1)
        dup = set(names) & set(self.cfg.node_names)
        if dup:
            raise self.err(line, "NodeName", f"node {sorted(dup)[0]} defined twice")
        self.cfg.node_names.extend(names)
        self.node_cpus.extend([c] * len(names))
        g = gpus if gpus is not None else self.node_default_gpus
        self.cfg.node_gpus.extend([g] * len(names))
        m = mem if mem is not None else self.node_default_mem
        self.cfg.node_mem.extend([m] * len(names))
        w = weight if weight is not None else self.node_default_weight
        self.cfg.node_weight.extend([w] * len(names))

    def gres_gpus(self, line: int, key: str, value: str) -> int:
        """GPUs of a ``Gres=`` value (``gpu:4``, ``gpu:a100:4``, comma lists summed); other GRES
        names are read but not modelled."""
        n = 0
        for item in filter(None, (x.strip() for x in value.split(","))):
            parts = item.split(":")
            if parts[0].lower() != "gpu":
                self.ignore(f"NodeName Gres {parts[0]}", line)
                continue
            count = parts[-1].split("(")[0] if len(parts) > 1 else "1"
            n += self.number(line, key, count, 0, 10**6)
        return n

    def part_line(self, line: int, pairs: list[tuple[str, str]]) -> None:
        name = pairs[0][1]
        attrs = dict(self.part_default) if name.upper() != "DEFAULT" else {}
        for k, v in pairs[1:]:
            attrs[k.lower()] = (v, k)
        if name.upper() == "DEFAULT":
            self.part_default.update(attrs)
            return
        if any(p.name == name for p in self.cfg.partitions):
            raise self.err(line, "PartitionName", f"partition {name!r} defined twice")
        p = PartitionDef(name=name, line=line)
        for k, (v, orig) in attrs.items():
            try:
                if k == "nodes":
                    p.nodes = None if v.strip().upper() == "ALL" else expand_hostlist(v)
                elif k == "maxtime":
                    p.max_time = parse_time(v, 60.0)
                elif k == "maxnodes":
                    p.max_nodes = (math.inf if v.strip().upper() in ("UNLIMITED", "INFINITE")
                                   else self.number(line, orig, v, 0, 2**32 - 1))
                elif k == "minnodes":
                    p.min_nodes = self.number(line, orig, v, 0, 2**32 - 1)
                elif k == "prioritytier":
                    p.priority_tier = self.number(line, orig, v, 0, 65533)
                elif k == "priorityjobfactor":
                    p.priority_job_factor = self.number(line, orig, v, 0, 65533)
                elif k == "priority":
                    p.priority_tier = p.priority_job_factor = self.number(line, orig, v, 0, 65533)
                elif k == "default":
                    p.default = _bool(v)
                elif k in ("oversubscribe", "shared"):
                    o = v.strip().upper().split(":")[0]
                    if o not in ("NO", "EXCLUSIVE", "YES", "FORCE"):
                        raise ValueError(f"unknown value {v!r} (NO, EXCLUSIVE, YES or FORCE)")
                    if o == "FORCE":
                        raise ValueError("FORCE (cores shared by several jobs) is not modelled: "
                                         "use NO, YES or EXCLUSIVE")
                    p.oversubscribe = o
                    self.cons_only.append((f"PartitionName attribute {orig}", line))
                elif k in ("defmempercpu", "defmempernode"):
                    mb = self.mem_mb(line, orig, v)
                    self.cons_only.append((f"PartitionName attribute {orig}", line))
                    if k == "defmempercpu":
                        p.def_mem_per_cpu = mb
                    else:
                        p.def_mem_per_node = mb
                elif k == "preemptmode":        # schedulers.slurm_preempt validates it
                    p.preempt_mode = v.strip()
                elif k == "state":
                    s = v.strip().upper()
                    if s not in ("UP", "DOWN", "DRAIN", "INACTIVE"):
                        raise ValueError(f"unknown state {v!r}")
                    p.state = s
                elif k in _PART_POWER_SAVE_KEYS:
                    self.ignore(f"PartitionName attribute {orig} (modelled by the power_saving model when it "
                                "is on: --set power_saving.enabled=true)", line)
                elif k in _PART_ATTRS_LOWER:
                    self.ignore(f"PartitionName attribute {orig}", line)
                else:
                    raise self.err(line, f"PartitionName {orig}",
                                   f"not a PartitionName attribute{suggest(orig, PARTITION_ATTRS)}")
            except SlurmConfError:
                raise
            except ValueError as e:
                raise self.err(line, orig, str(e)) from None
        self.cfg.partitions.append(p)

    # ------------------------------------------------------------------ finish
    def finish(self) -> SlurmConfig:
        cfg = self.cfg
        if self.node_cpus:
            cfg.node_cpus = list(self.node_cpus)
            # one CPU count: the whole-node policies' units per node; different counts
            # (heterogeneous NodeName lines) are modelled by select/cons_tres's per-node
            # resources (`schedulers.slurm_tres`), or in node units
            cfg.cpus_per_node = self.node_cpus[0] if len(set(self.node_cpus)) == 1 else None
        if cfg.select_type == "select/linear":
            for what, line in self.cons_only:      # whole nodes: cores, memory, weights unused
                self.ignore(what, line)
        known = set(cfg.node_names)
        for p in cfg.partitions:
            if p.nodes is not None:
                if not known:
                    raise self.err(p.line, f"PartitionName={p.name} Nodes",
                                   "names nodes but no NodeName line defines any")
                bad = [n for n in p.nodes if n not in known]
                if bad:
                    raise self.err(p.line, f"PartitionName={p.name} Nodes",
                                   f"node {bad[0]!r} is not defined by a NodeName line")
        if sum(p.default for p in cfg.partitions) > 1:
            raise self.err(0, "PartitionName", "more than one partition has Default=YES")
        return cfg


def _split_pairs(text: str, path: str, line: int) -> list[tuple[str, str]]:
    """``Key=Value Key2="a b"`` -> pairs (whitespace-separated; double quotes protect spaces)."""
    pairs = []
    for m in re.finditer(r'(\S+?)=("([^"]*)"|\S*)', text):
        pairs.append((m.group(1), m.group(3) if m.group(3) is not None else m.group(2)))
    rest = re.sub(r'(\S+?)=("([^"]*)"|\S*)', "", text).strip()
    if rest:
        raise SlurmConfError(f"{path}:{line}: cannot parse {rest!r} (expected Key=Value)")
    return pairs


def parse_slurm_conf_text(text: str, path: str = "<string>") -> SlurmConfig:
    """Parse slurm.conf text (see the module docstring); ``path`` names it in messages."""
    p = _Parser(path)
    logical: list[tuple[int, str]] = []
    buf, start = "", 0
    for i, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].rstrip()
        if not buf:
            start = i
        if line.endswith("\\"):
            buf += line[:-1]          # continuation: joined as is (slurm.conf)
            continue
        buf += line
        if buf.strip():
            logical.append((start, buf.strip()))
        buf = ""
    if buf.strip():
        logical.append((start, buf.strip()))
    for ln, line in logical:
        key, eq, rest = line.partition("=")
        if not eq or not key.strip() or any(c.isspace() for c in key.strip()):
            raise SlurmConfError(f"{path}:{ln}: cannot parse {line!r} (expected Key=Value)")
        first = key.strip().lower()
        if first not in ("nodename", "partitionname"):
            value = rest.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            elif any(c.isspace() for c in value):
                raise SlurmConfError(f"{path}:{ln}: {key.strip()}: one Key=Value per line expected "
                                     f"(quote values that contain spaces)")
            if first == "include":
                p.ignore("Include (included files are not read)", ln)
            else:
                p.scalar(ln, key.strip(), value)
            continue
        pairs = _split_pairs(line, path, ln)
        if first == "nodename":
            p.node_line(ln, pairs)
        else:
            p.part_line(ln, pairs)
    return p.finish()


def load_slurm_conf(path: str | Path) -> SlurmConfig:
    """Read and parse a slurm.conf-style file. Keys read but not modelled are collected in
    ``ignored`` (see `not_modelled_line`); unknown keys raise `SlurmConfError`."""
    p = Path(path)
    if not p.exists():
        raise SlurmConfError(f"{p}: file not found")
    return parse_slurm_conf_text(p.read_text(), str(p))


#: why the wall-clock keys cannot change a decision (printed with them)
NO_EFFECT_WHY = ("cannot change a decision here: a pass takes no simulated time and no job or node "
                 "changes during one, so a backfill cycle never yields its locks (bf_yield_interval, "
                 "bf_yield_sleep, max_rpc_cnt), never reaches a wall-clock budget (bf_max_time, "
                 "max_sched_time, build_queue_timeout) and bf_continue, which only acts after a "
                 "yield, never applies")


#: slurm.conf power-saving keys: read by `hpctwin.power.suspend_conf` for the power_saving model (the
#: Slurm-like policy itself does not use them)
_POWER_SAVE_KEYS = frozenset(k.lower() for k in (
    "SuspendTime", "SuspendTimeout", "ResumeTimeout", "SuspendRate", "ResumeRate", "SuspendExcNodes",
    "SuspendExcParts", "SuspendProgram", "ResumeProgram"))
_PART_POWER_SAVE_KEYS = frozenset(("suspendtime", "suspendtimeout", "resumetimeout"))
#: preemption keys kept as written in ``SlurmConfig.preempt`` for `schedulers.slurm_preempt`
_PREEMPT_KEYS = frozenset(("preempttype", "preemptmode", "preemptexempttime", "jobrequeue", "authinfo"))
_PREEMPT_SCHED = frozenset(("preempt_youngest_first", "preempt_reorder_count", "preempt_strict_order"))

def not_modelled_line(cfg: SlurmConfig) -> str | None:
    """The one warning line listing every key read but not modelled (None if there is none)."""
    items = list(cfg.ignored)
    if cfg.no_effect:
        items.append("SchedulerParameters " + ", ".join(cfg.no_effect) + " [" + NO_EFFECT_WHY + "]")
    if not items:
        return None
    return f"{cfg.path or 'slurm options'}: read but not modelled: " + "; ".join(items)


def report_ignored(cfg: SlurmConfig) -> None:
    """Warn once (one line) listing every key of ``cfg`` read but not modelled."""
    line = not_modelled_line(cfg)
    if line:
        warnings.warn(line, stacklevel=3)


#: option keys (besides slurm.conf keys and SchedulerParameters names) that the scheduler itself
#: understands; `apply_options` leaves them alone.
SCHEDULER_OPTION_KEYS = {"accounts", "cpus_per_node", "node_order", "bf_poll", "slurm_conf",
                         "compiled", "time_limit_minutes", "replay", "partition_map",
                         "cons_tres_window",
                         # advance reservations (schedulers.slurm_resv)
                         "reservations", "log_start", "job_reservations"}


def apply_options(cfg: SlurmConfig, options: dict[str, Any]) -> SlurmConfig:
    """Overlay run-config options on ``cfg`` (returns a new config).

    Keys may be slurm.conf keys (``PriorityWeightAge``, ``SchedulerParameters``, case-insensitive)
    or SchedulerParameters names (``bf_interval``, ``bf_window`` in minutes, as in the file).
    Keys in `SCHEDULER_OPTION_KEYS` are left for the scheduler; a slurm.conf key read but not
    modelled is added to ``ignored``; any other key is a `SlurmConfError` with a suggestion.
    """
    p = _Parser("options")
    p.cfg = replace(cfg, sched=replace(cfg.sched), priority=replace(cfg.priority),
                    partitions=list(cfg.partitions), node_names=list(cfg.node_names),
                    node_gpus=list(cfg.node_gpus), node_cpus=list(cfg.node_cpus),
                    node_mem=list(cfg.node_mem), node_weight=list(cfg.node_weight),
                    ignored=list(cfg.ignored), no_effect=list(cfg.no_effect), preempt=dict(cfg.preempt))
    for key, value in (options or {}).items():
        k = str(key)
        if k.lower() in SCHEDULER_OPTION_KEYS:
            continue
        v = value
        if isinstance(v, bool):
            v = "YES" if v else "NO"
        if k.lower() in _SCHED_KEYS:
            kind = _SCHED_KEYS[k.lower()][1]
            if kind == "flag":
                if value in (True, 1, "1", "YES", "yes", "true", "True"):
                    p.sched_param(0, k)
                elif value in (False, 0, "0", "NO", "no", "false", "False"):
                    setattr(p.cfg.sched, _SCHED_KEYS[k.lower()][0], False)
                else:
                    raise SlurmConfError(f"options: {k}: expected true/false, got {value!r}")
            else:
                p.sched_param(0, f"{k}={v}")
        elif k.lower() in _SCHED_PARAMS_LOWER:
            # a SchedulerParameters name read but not modelled (or without effect here)
            p.sched_param(0, k if v in ("YES", "") else f"{k}={v}")
        elif k.lower() in ("nodename", "partitionname"):
            raise SlurmConfError(f"options: {k}: node and partition lines belong in the "
                                 "slurm.conf file")
        else:
            p.scalar(0, k, str(v))
    return p.cfg
