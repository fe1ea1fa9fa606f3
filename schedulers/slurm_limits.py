"""QOS and association limits of the Slurm-like policy beyond ``MaxJobsPerUser``/``MaxTRESPerUser``/
``GrpTRES`` (those stay in `schedulers.slurm`): what slurmctld enforces with
``AccountingStorageEnforce=limits``, read from the accounts TOML file.

Sources (SchedMD/slurm, tag ``slurm-22-05-9-1``, ``src/slurmctld/acct_policy.c``):

* **At submission** (``_job_create`` -> ``acct_policy_validate`` -> ``_acct_policy_validate`` ->
  ``_qos_policy_validate``): ``GrpSubmitJobs`` (reason ``QOSGrpSubmitJobsLimit``) and
  ``MaxSubmitJobsPerUser`` (``QOSMaxSubmitJobPerUserLimit``) compare the jobs of the QOS (of the
  user) submitted and not yet ended (``acct_policy_add_job_submit`` at creation,
  ``acct_policy_remove_job_submit`` in ``job_completion_logger``) plus this one with the limit; over
  it, sbatch fails ("Job violates accounting/QOS policy") and the job never exists. The association's
  ``MaxSubmitJobs`` (``AssocMaxSubmitJobLimit``) is the same per (account, user) when the QOS sets no
  ``MaxSubmitJobsPerUser``. ``MaxWall`` (``QOSMaxWallDurationPerJobLimit``), ``MaxTRESPerJob``
  (``QOSMaxCpuPerJobLimit``, ``QOSMaxNodePerJobLimit``, ``QOSMaxGRESPerJob``) and ``MaxTRESPerNode``
  (``QOSMaxCpuPerNode``, ``QOSMaxGRESPerNode``) reject a job over them only with
  ``strict_checking``, i.e. the QOS flag ``DenyOnLimit``.
* **Before a start** (``acct_policy_job_runnable_pre_select``, ``_qos_job_runnable_pre_select``):
  QOS ``GrpJobs`` (running jobs of the QOS, ``QOSGrpJobsLimit``), QOS ``MaxJobsPerUser``, QOS
  ``MaxWall`` (a job over it stays pending for good with ``QOSMaxWallDurationPerJobLimit``); then the
  association chain: the job's (account, user) association ``GrpJobs`` (``AssocGrpJobsLimit``) and
  ``MaxJobs`` (``AssocMaxJobsLimit``, only when the QOS has no ``MaxJobsPerUser``; an account's
  ``MaxJobs``/``MaxSubmitJobs`` are inherited by the users under it, "pre-propagated"), then every
  parent account's ``GrpJobs`` over the jobs of its subtree. An association ``GrpJobs`` applies only
  when the QOS has no ``GrpJobs``. ``acct_policy_job_runnable_post_select``: the QOS TRES limits
  (`schedulers.slurm`), then the association ``GrpTRES`` of the user association and of each account
  up the tree (``AssocGrpCpuLimit``, ``AssocGrpNodeLimit``, ``AssocGrpGRES``), a TRES only when the
  QOS sets no ``GrpTRES`` for it. ``MaxTRESPerJob``/``MaxTRESPerNode`` over the job's own request
  (``_qos_job_runnable_post_select``) keep it pending for good.

What the twin does: a job rejected at submission never enters the queue (`on_submit` answers its
reason; the engine keeps it out: it never starts, ``state`` PENDING in ``jobs.csv`` with
``limit_rejected`` true); a job that could never start (over ``MaxWall``, ``MaxTRESPerJob`` or
``MaxTRESPerNode`` without ``DenyOnLimit``) is kept out the same way but counts as submitted (it
stays pending in Slurm, holding a ``MaxSubmitJobsPerUser`` slot); a job held by a running-job or TRES
limit waits. ``jobs.csv`` gets ``limit_reason`` (the first limit reason the job was held or refused
with) and ``limit_rejected``; the summary counts per reason (``scheduler_params.pending_reasons``,
``rejected_at_submit``, ``never_runnable``).

Accounts file keys (TOML; sacctmgr spellings or snake_case)::

    [qos.normal]
    MaxSubmitJobsPerUser = 10        # max_submit_jobs_per_user
    GrpSubmitJobs = 100              # grp_submit_jobs
    GrpJobs = 20                     # grp_jobs
    MaxWall = "1-00:00:00"           # max_wall: minutes (integer) or [days-]hours:minutes:seconds
    MaxTRESPerJob = "gres/gpu=8"     # max_tres_per_job (cpu, node, gres/gpu)
    MaxTRESPerNode = "gres/gpu=4"    # max_tres_per_node (cpu, gres/gpu)
    Flags = "DenyOnLimit"            # flags: only DenyOnLimit is modelled
    [accounts]
    physics = { shares = 40, GrpJobs = 8, GrpTRES = "gres/gpu=16", MaxJobs = 4, MaxSubmitJobs = 20 }
    [users]
    alice = { shares = 2, MaxJobs = 2, GrpTRES = "cpu=64" }

Errors name the file, the line and the field (``acc.toml:7: qos.normal.MaxWall: ...``).
"""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .slurm_priority import ASSOC_KEYS, QOS_KEYS, TRES_NAMES, AccountsError, parse_tres
from .slurm_sacctmgr import read_accounts_data
from .slurm_priority import ASSOC_LIMITS as _ASSOC
from .slurm_priority import QOS_LIMITS as _QOS

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - python < 3.11
    import tomli as tomllib  # type: ignore

__all__ = ["QOS_KEYS", "ASSOC_KEYS", "LimitsSpec", "load_limits", "Limits", "parse_wall"]

# the QOS and association key tables (sacctmgr spelling -> snake_case) live with the accounts-file reader
# (`schedulers.slurm_priority`), which lets these keys through for this module

# slurmctld's reason names (src/common/slurm_protocol_defs.c job_reason_string), TRES_NAMES order
_PER_JOB = ("QOSMaxCpuPerJobLimit", "QOSMaxNodePerJobLimit", "QOSMaxGRESPerJob")
_PER_NODE = ("QOSMaxCpuPerNode", None, "QOSMaxGRESPerNode")
_ASSOC_GRP = ("AssocGrpCpuLimit", "AssocGrpNodeLimit", "AssocGrpGRES")
MAX_WALL = "QOSMaxWallDurationPerJobLimit"


@dataclass
class QOSLimits:
    """The limits of one QOS read here (None / {}: not set); ``max_wall`` in minutes."""

    max_submit_jobs_per_user: int | None = None
    grp_submit_jobs: int | None = None
    grp_jobs: int | None = None
    max_wall: int | None = None
    max_tres_per_job: dict[str, int] = field(default_factory=dict)
    max_tres_per_node: dict[str, int] = field(default_factory=dict)
    deny_on_limit: bool = False


@dataclass
class AssocLimits:
    """The limits of an account or user association (None / {}: not set)."""

    max_jobs: int | None = None
    grp_jobs: int | None = None
    grp_tres: dict[str, int] = field(default_factory=dict)
    max_submit_jobs: int | None = None


@dataclass
class LimitsSpec:
    """The limits of an accounts file read by this module, by QOS, account and user name."""

    qos: dict[str, QOSLimits] = field(default_factory=dict)
    accounts: dict[str, AssocLimits] = field(default_factory=dict)
    users: dict[str, AssocLimits] = field(default_factory=dict)
    parent: dict[str, str] = field(default_factory=dict)
    path: str = ""

    @property
    def empty(self) -> bool:
        return not (self.qos or self.accounts or self.users)


# ============================================================================ reading
_WALL = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def parse_wall(value, where: str) -> int | None:
    """sacctmgr's ``MaxWall`` (``time_str2mins``): an integer is minutes; a string is ``M``,
    ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M`` or ``D-H:M:S`` (seconds rounded up to a minute);
    ``-1``, ``UNLIMITED``, ``INFINITE`` = no limit (None). A malformed value: `AccountsError`."""
    if isinstance(value, bool):
        raise AccountsError(f"{where}: expected minutes or [days-]hours:minutes:seconds, got {value!r}")
    if isinstance(value, int):
        if value == -1:
            return None
        if value < 0:
            raise AccountsError(f"{where}: expected minutes >= 0 (or -1: no limit), got {value}")
        return value
    if not isinstance(value, str):
        raise AccountsError(f"{where}: expected minutes or a time string such as \"2:00:00\", got {value!r}")
    s = value.strip()
    if s.upper() in ("-1", "UNLIMITED", "INFINITE"):
        return None
    m = _WALL.match(s)
    if not m:
        raise AccountsError(f"{where}: {value!r} is not a Slurm time (minutes, M:S, H:M:S, D-H, D-H:M or "
                            "D-H:M:S; e.g. \"1-00:00:00\" for a day)")
    d, a, b, c = (int(x) if x is not None else None for x in m.groups())
    if d is not None:                               # D-H[:M[:S]]
        secs = d * 86400 + a * 3600 + (b or 0) * 60 + (c or 0)
    elif c is not None:                             # H:M:S
        secs = a * 3600 + b * 60 + c
    elif b is not None:                             # M:S
        secs = a * 60 + b
    else:                                           # M
        secs = a * 60
    return (secs + 59) // 60


def _line_of(lines: list[str], table: str, key: str) -> int:
    """1-based line of ``key`` in the TOML table ``table`` (``qos.normal``; for an inline table
    ``accounts.physics`` the line of ``physics =``), else of the table's header, else 1."""
    head = re.compile(r"^\s*\[\s*" + r"\s*\.\s*".join(re.escape(p) for p in table.split(".")) + r"\s*\]")
    keyre = re.compile(r"^\s*\"?" + re.escape(key) + r"\"?\s*=")
    start = None
    for i, ln in enumerate(lines):
        if head.match(ln):
            start = i
            continue
        if start is not None:
            if ln.lstrip().startswith("["):
                break
            if keyre.match(ln):
                return i + 1
    if start is not None:
        return start + 1
    if "." in table:                                # accounts.physics = { ... } inline
        outer, inner = table.rsplit(".", 1)
        return _line_of(lines, outer, inner)
    return 1


def _count(v, where: str) -> int | None:
    """A job count (integer >= 0; -1 = no limit)."""
    if isinstance(v, bool) or not isinstance(v, int) or v < -1:
        raise AccountsError(f"{where}: expected an integer >= 0 (or -1: no limit), got {v!r}")
    return None if v == -1 else v


def load_limits(path: str | Path, account_parent: dict[str, str] | None = None) -> LimitsSpec:
    """The limits of the accounts TOML file at ``path`` (see the module docstring); errors are
    `AccountsError` naming file, line and field."""
    p = Path(path)
    data, text, script_lines = read_accounts_data(p, tomllib.loads)   # TOML or a sacctmgr script
    lines = text.splitlines()
    spec = LimitsSpec(path=str(p), parent=dict(account_parent or {}))

    def where(table: str, key: str) -> str:
        n = script_lines.get((table, key), 1) if script_lines is not None else _line_of(lines, table, key)
        return f"{p}:{n}: {table}.{key}"

    for name, v in (data.get("qos") or {}).items():
        if not isinstance(v, dict):
            continue                                # slurm_priority reports it
        q = QOSLimits()
        for key, x in v.items():
            k = _QOS.get(key, key)
            if k not in _QOS.values():
                continue
            w = where(f"qos.{name}", key)
            if k in ("max_submit_jobs_per_user", "grp_submit_jobs", "grp_jobs"):
                setattr(q, k, _count(x, w))
            elif k == "max_wall":
                q.max_wall = parse_wall(x, w)
            elif k == "max_tres_per_job":
                q.max_tres_per_job = parse_tres(x, w)
            elif k == "max_tres_per_node":
                q.max_tres_per_node = parse_tres(x, w)
                if "node" in q.max_tres_per_node:
                    raise AccountsError(f"{w}: TRES 'node' per node is not a limit (read: cpu, gres/gpu)")
            else:                                   # flags
                q.deny_on_limit = _flags(x, w)
        if q != QOSLimits():
            spec.qos[name] = q
    for section, out in (("accounts", spec.accounts), ("users", spec.users)):
        for name, v in (data.get(section) or {}).items():
            if not isinstance(v, dict):
                continue
            a = AssocLimits()
            for key, x in v.items():
                k = _ASSOC.get(key, key)
                if k not in _ASSOC.values():
                    continue
                w = where(f"{section}.{name}", key)
                if k == "grp_tres":
                    a.grp_tres = parse_tres(x, w)
                else:
                    setattr(a, k, _count(x, w))
            if a != AssocLimits():
                out[name] = a
    return spec


def _flags(x, where: str) -> bool:
    """QOS ``Flags``: True when ``DenyOnLimit`` is among them; other flags are refused (not modelled)."""
    if not isinstance(x, str):
        raise AccountsError(f"{where}: expected a flag list such as \"DenyOnLimit\", got {x!r}")
    deny = False
    for f in filter(None, (y.strip() for y in x.split(","))):
        if f.lower() == "denyonlimit":
            deny = True
        else:
            raise AccountsError(f"{where}: flag {f!r} is not modelled (read: DenyOnLimit); remove it")
    return deny


# ============================================================================ enforcing
class Limits:
    """The limits of one bound run (built by `Limits.build`; see the module docstring).

    ``jqos`` (QOS index per job), ``qnames`` (QOS names by index), ``juser`` (user id per job),
    ``jassoc`` / ``assoc`` (association index per job; (account, user) names by index),
    ``jtres`` (jobs x (cpu, node, gres/gpu)), ``req_nodes`` (minimum nodes per job), ``req_s`` (the
    jobs' requested time, s), ``qos_max_jobs_pu`` (QOS MaxJobsPerUser, -1 none),
    ``qos_grp_tres`` (QOS x 3 GrpTRES, -1 none)."""

    def __init__(self, spec: LimitsSpec, *, jqos, qnames, juser, jassoc, assoc, jtres, req_nodes, req_s,
                 qos_max_jobs_pu, qos_grp_tres, job_id):
        n = len(jqos)
        Q = len(qnames)
        self.spec = spec
        self.jqos = np.asarray(jqos, dtype=np.int64)
        self.juser = np.asarray(juser, dtype=np.int64)
        self.jassoc = np.asarray(jassoc, dtype=np.int64)
        self.jtres = np.asarray(jtres, dtype=np.int64)
        self.job_id = job_id
        ql = [spec.qos.get(q, QOSLimits()) for q in qnames]
        none = -1

        def arr(vals):
            return np.array([none if v is None else v for v in vals], dtype=np.int64)
        self.q_grp_jobs = arr(q.grp_jobs for q in ql)
        self.q_max_sub_pu = arr(q.max_submit_jobs_per_user for q in ql)
        self.q_grp_sub = arr(q.grp_submit_jobs for q in ql)
        self.q_max_jobs_pu = np.asarray(qos_max_jobs_pu, dtype=np.int64)
        self.q_grp_tres = np.asarray(qos_grp_tres, dtype=np.int64).reshape(Q, 3)
        # ---- associations: the user association's own limits (users table, else inherited from the
        # nearest account up the tree: MaxJobs, MaxSubmitJobs), and each account's Grp limits
        self.assoc_names = list(assoc)
        self.chain: list[list[str]] = []
        A = len(assoc)
        self.a_max_jobs = np.full(A, none, dtype=np.int64)
        self.a_max_sub = np.full(A, none, dtype=np.int64)
        self.a_grp_jobs = np.full(A, none, dtype=np.int64)
        self.a_grp_tres = np.full((A, 3), none, dtype=np.int64)
        for a, (acct, user) in enumerate(assoc):
            chain = self._chain(acct)
            self.chain.append(chain)
            u = spec.users.get(user, AssocLimits())
            inherit = [spec.accounts.get(x, AssocLimits()) for x in chain]
            self.a_max_jobs[a] = _first([u.max_jobs] + [x.max_jobs for x in inherit])
            self.a_max_sub[a] = _first([u.max_submit_jobs] + [x.max_submit_jobs for x in inherit])
            self.a_grp_jobs[a] = none if u.grp_jobs is None else u.grp_jobs
            self.a_grp_tres[a] = [u.grp_tres.get(t, none) for t in TRES_NAMES]
        self.acct_grp_jobs = {x: al.grp_jobs for x, al in spec.accounts.items() if al.grp_jobs is not None}
        self.acct_grp_tres = {x: np.array([al.grp_tres.get(t, none) for t in TRES_NAMES], dtype=np.int64)
                              for x, al in spec.accounts.items() if al.grp_tres}
        # ---- per job, fixed: never runnable (MaxWall, MaxTRESPerJob, MaxTRESPerNode)
        self.never = [""] * n
        mins = np.where(np.isfinite(req_s), np.ceil(np.nan_to_num(np.asarray(req_s, dtype=np.float64),
                                                                  posinf=0.0) / 60.0), 0.0)
        per_node = -(-self.jtres // np.maximum(np.asarray(req_nodes, dtype=np.int64), 1)[:, None]) if n else self.jtres
        for qi, q in enumerate(ql):
            on = np.flatnonzero(self.jqos == qi)
            if not len(on):
                continue
            pj = np.array([q.max_tres_per_job.get(t, none) for t in TRES_NAMES], dtype=np.int64)
            pn = np.array([q.max_tres_per_node.get(t, none) for t in TRES_NAMES], dtype=np.int64)
            for j in on.tolist():
                why = ""
                if q.max_wall is not None and mins[j] > q.max_wall:
                    why = MAX_WALL
                else:
                    over = (pj >= 0) & (self.jtres[j] > pj)
                    if over.any():
                        why = _PER_JOB[int(np.flatnonzero(over)[0])]
                    else:
                        over = (pn >= 0) & (per_node[j] > pn)
                        if over.any():
                            why = _PER_NODE[int(np.flatnonzero(over)[0])]
                self.never[j] = why
        self.deny = np.array([q.deny_on_limit for q in ql], dtype=bool)
        # ---- counters
        self.run_q = np.zeros(Q, dtype=np.int64)             # running jobs per QOS
        self.sub_q = np.zeros(Q, dtype=np.int64)             # submitted, not ended, per QOS
        self.sub_uq: dict[tuple[int, int], int] = defaultdict(int)
        self.run_a = np.zeros(A, dtype=np.int64)             # running jobs per user association
        self.sub_a = np.zeros(A, dtype=np.int64)
        self.tres_a = np.zeros((A, 3), dtype=np.int64)
        self.run_acct: dict[str, int] = defaultdict(int)     # running jobs per account subtree
        self.tres_acct: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(3, np.int64))
        self.submitted = np.zeros(n, dtype=bool)             # counted in the submit totals
        # ---- per job records
        self.reason = [""] * n            # first limit reason the job was held or refused with
        self.rejected = np.zeros(n, dtype=bool)
        self.refused: set[int] = set()     # kept out of the queue (rejected or never runnable)
        self.rejected_at_submit: dict[str, int] = {}
        self.never_runnable: dict[str, int] = {}

    @classmethod
    def build(cls, spec: LimitsSpec | None, **kw) -> "Limits | None":
        """The run's limits, or None when the file sets none of the limits read here."""
        if spec is None or spec.empty:
            return None
        return cls(spec, **kw)

    def _chain(self, acct: str) -> list[str]:
        """``acct`` and its parents up to (not including) root."""
        out, seen = [], set()
        while acct and acct != "root" and acct not in seen:
            out.append(acct)
            seen.add(acct)
            acct = self.spec.parent.get(acct, "root")
        return out

    # ------------------------------------------------------------------ submission
    def submit(self, j: int) -> str | None:
        """At the submission of job ``j``: the reason it is refused (rejected, or kept out of the
        queue for good because it could never run), else None (it is counted as submitted)."""
        q = int(self.jqos[j])
        a = int(self.jassoc[j])
        uq = (int(self.juser[j]), q)
        why = None
        if self.q_grp_sub[q] >= 0 and self.sub_q[q] + 1 > self.q_grp_sub[q]:
            why = "QOSGrpSubmitJobsLimit"
        elif self.deny[q] and self.never[j]:
            why = self.never[j]                     # DenyOnLimit: strict checking at submit
        elif self.q_max_sub_pu[q] >= 0:
            if self.sub_uq[uq] + 1 > self.q_max_sub_pu[q]:
                why = "QOSMaxSubmitJobPerUserLimit"
        elif self.a_max_sub[a] >= 0 and self.sub_a[a] + 1 > self.a_max_sub[a]:
            why = "AssocMaxSubmitJobLimit"
        if why is not None:
            self.reason[j] = why
            self.rejected[j] = True
            self.refused.add(j)
            self.rejected_at_submit[why] = self.rejected_at_submit.get(why, 0) + 1
            return why
        self._submitted(j, 1)
        if self.never[j]:                           # pending for good (Slurm keeps it, reason set)
            why = self.never[j]
            self.reason[j] = why
            self.refused.add(j)
            self.never_runnable[why] = self.never_runnable.get(why, 0) + 1
            return why
        return None

    def _submitted(self, j: int, sign: int) -> None:
        q = int(self.jqos[j])
        self.sub_q[q] += sign
        self.sub_uq[(int(self.juser[j]), q)] += sign
        self.sub_a[int(self.jassoc[j])] += sign
        self.submitted[j] = sign > 0

    def left(self, j: int) -> None:
        """Job ``j`` left the system (ended, or cancelled while pending): its submit slot is free
        (``job_completion_logger`` -> ``acct_policy_remove_job_submit``)."""
        if self.submitted[j]:
            self._submitted(j, -1)

    def requeued(self, j: int) -> None:
        """An interrupted job waits again: it holds its submit slot again."""
        if not self.submitted[j]:
            self._submitted(j, 1)

    # ------------------------------------------------------------------ starts and ends
    def account(self, j: int, sign: int) -> None:
        """A start (sign 1) or an end (sign -1) of running job ``j``."""
        q = int(self.jqos[j])
        a = int(self.jassoc[j])
        t = self.jtres[j]
        self.run_q[q] += sign
        self.run_a[a] += sign
        self.tres_a[a] += sign * t
        for x in self.chain[a]:
            self.run_acct[x] += sign
            self.tres_acct[x] += sign * t

    # ------------------------------------------------------------------ holds
    def pre(self, j: int) -> str | None:
        """``_qos_job_runnable_pre_select``'s first test: the QOS GrpJobs reason, else None."""
        q = int(self.jqos[j])
        g = self.q_grp_jobs[q]
        if g >= 0 and self.run_q[q] >= g:
            return "QOSGrpJobsLimit"
        return None

    def assoc_pre(self, j: int) -> str | None:
        """The association loop of ``acct_policy_job_runnable_pre_select``: GrpJobs and MaxJobs of
        the user association, then GrpJobs of each parent account."""
        q = int(self.jqos[j])
        a = int(self.jassoc[j])
        qos_grp = self.q_grp_jobs[q] >= 0
        if not qos_grp and self.a_grp_jobs[a] >= 0 and self.run_a[a] >= self.a_grp_jobs[a]:
            return "AssocGrpJobsLimit"
        if self.q_max_jobs_pu[q] < 0 and self.a_max_jobs[a] >= 0 and self.run_a[a] >= self.a_max_jobs[a]:
            return "AssocMaxJobsLimit"
        if not qos_grp:
            for x in self.chain[a]:
                g = self.acct_grp_jobs.get(x)
                if g is not None and self.run_acct[x] >= g:
                    return "AssocGrpJobsLimit"
        return None

    def post(self, j: int) -> str | None:
        """The association GrpTRES of ``acct_policy_job_runnable_post_select`` (user association,
        then each account up the tree; a TRES the QOS's GrpTRES sets is not tested)."""
        q = int(self.jqos[j])
        a = int(self.jassoc[j])
        need = self.jtres[j]
        open_ = self.q_grp_tres[q] < 0
        lim = self.a_grp_tres[a]
        over = open_ & (lim >= 0) & (self.tres_a[a] + need > lim)
        if over.any():
            return _ASSOC_GRP[int(np.flatnonzero(over)[0])]
        for x in self.chain[a]:
            lim = self.acct_grp_tres.get(x)
            if lim is None:
                continue
            over = open_ & (lim >= 0) & (self.tres_acct[x] + need > lim)
            if over.any():
                return _ASSOC_GRP[int(np.flatnonzero(over)[0])]
        return None

    def held(self, j: int, why: str) -> None:
        """Job ``j`` is held with ``why``: the first such reason is its ``limit_reason``."""
        if not self.reason[j]:
            self.reason[j] = why

    # ------------------------------------------------------------------ results
    def job_columns(self) -> dict[str, np.ndarray]:
        """``limit_reason`` (str; "" none) and ``limit_rejected`` (bool) per job."""
        return {"limit_reason": np.array(self.reason, dtype=object), "limit_rejected": self.rejected.copy()}

    def describe(self) -> dict:
        """Counts per reason of the jobs refused at submission and of those that can never run."""
        return {"rejected_at_submit": dict(self.rejected_at_submit), "never_runnable": dict(self.never_runnable)}

    def check_bind(self, src: str) -> None:
        """A job over an association GrpTRES on its own could never start: `AccountsError`."""
        for a in range(len(self.assoc_names)):
            jobs = np.flatnonzero(self.jassoc == a)
            if not len(jobs):
                continue
            lims = [("users", self.assoc_names[a][1], self.a_grp_tres[a])] + [
                ("accounts", x, self.acct_grp_tres[x]) for x in self.chain[a] if x in self.acct_grp_tres]
            for sec, name, lim in lims:
                open_ = self.q_grp_tres[self.jqos[jobs]] < 0
                over = open_ & (lim >= 0) & (self.jtres[jobs] > lim)
                if over.any():
                    r, t = (int(x[0]) for x in np.nonzero(over))
                    j = int(jobs[r])
                    raise AccountsError(
                        f"{self.spec.path or src}: {int(over.any(axis=1).sum())} jobs can never start (first: job "
                        f"{int(self.job_id[j])}, {int(self.jtres[j, t])} {TRES_NAMES[t]}, whose association "
                        f"{sec}.{name} GrpTRES allows {TRES_NAMES[t]}={int(lim[t])}); Slurm would keep it "
                        "pending forever: raise the limit or filter the workload")


def _first(vals) -> int:
    """The first value that is not None, else -1."""
    for v in vals:
        if v is not None:
            return int(v)
    return -1


def bind_limits(sched, aid: list[tuple[str, str]], qlist: list[str], src: str) -> Limits | None:
    """The limits of a `schedulers.slurm.SlurmScheduler` being bound (``aid``: its associations'
    (account, user) names, ``qlist``: its QOS names by index), read from its accounts file; None when
    the file sets none of the limits read here (the run is then what it was without this module)."""
    acc = getattr(sched, "accounts", None)
    if acc is None or not getattr(acc, "path", ""):
        return None
    spec = load_limits(acc.path, acc.account_parent)
    if spec.empty:
        return None
    qdef = [acc.qos.get(q) for q in qlist]
    qos_mjpu = np.array([-1 if d is None or d.max_jobs_per_user is None else d.max_jobs_per_user
                         for d in qdef], dtype=np.int64)
    lim = Limits(spec, jqos=sched.jqos, qnames=qlist, juser=sched.juser, jassoc=sched.jassoc, assoc=aid,
                 jtres=sched.jtres, req_nodes=sched.req, req_s=np.asarray(sched.jobs.requested_time, dtype=np.float64),
                 qos_max_jobs_pu=qos_mjpu, qos_grp_tres=sched.tres_grp_lim, job_id=sched.job_id)
    lim.check_bind(src)
    return lim
