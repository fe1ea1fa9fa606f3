"""Slurm's multifactor priority and fair-share (classic and Fair Tree), as numpy arrays.

Specification: https://slurm.schedmd.com/priority_multifactor.html, https://slurm.schedmd.com/fair_tree.html
and ``src/plugins/priority/multifactor/priority_multifactor.c``.

**Priority** of a pending job (recomputed every ``PriorityCalcPeriod``; a new job gets its value at
submit)::

    P = W_age * min(age, MaxAge)/MaxAge + W_fs * F + W_js * J + W_part * part + W_qos * qos

truncated to an integer and at least 1 (0 is reserved for held jobs), as ``_get_priority_internal``
does. ``age`` = now - the job's eligible time (Slurm's ``begin_time``): its submit time, or in a run
with dependencies the time its dependency held (``MultifactorPriority.begin``, from `twin.dependencies`).
Job size ``J`` (``PriorityFavorSmall=NO``) = (nodes/N + cpus/C)/2 with N, C the cluster's nodes and
CPUs (allocation units); favour-small uses (N - nodes)/N and (C - cpus)/C; with
``SMALL_RELATIVE_TO_TIME``: J = max(nodes*C/N, cpus) / time_limit_minutes / C (1 - that when
favouring small). ``cpus`` is the job's allocation; with `MultifactorPriority.use_requested_size`
(cons_tres runs whose workload gives ``req_cpus``) it is the requested CPUs until the job's first
select test and ``total_cpus`` from the next recalculation on (``_get_priority_internal``).
``part`` = partition PriorityJobFactor / max over partitions; ``qos`` = QOS priority / max QOS
priority. Nice, TRES, association and site factors are not modelled.

**Usage** (``_apply_new_usage`` and the decay thread): with ``d = 1 - 0.693/half_life`` (Slurm's
first-order approximation of 2^(-1/half_life), per second), at every calc tick T (previous tick L)
all raw usage is multiplied by d^(T-L), then each running job adds ``units * D * d^D`` with
D = T - max(start, L); a job that ends at E between ticks adds ``units * D * d^D`` with
D = E - max(start, L) at its end (and nothing after). Usage is added to the job's user association
and every ancestor (account(s), root). ``units`` = allocation units the job holds (Slurm's default
billing weight is the allocated CPUs). Half-life 0 = no decay.

**Fair-share factor** (per user association, recomputed at each tick):

* classic (``PriorityFlags=NO_FAIR_TREE``): F = 2^(-UE / S / damp) with S the normalised shares
  (product down the tree of shares / siblings' shares), usage_norm = raw / root raw, and effective
  usage UE = usage_norm for children of root, else UE = UN + (UE_parent - UN) * shares_raw /
  siblings' shares_raw (priority_multifactor.html, "classic fairshare").
* Fair Tree (the default): Level FS = S_level / U_level with S_level = shares / siblings' shares and
  U_level = raw usage / parent's raw usage (infinite when U_level = 0, 0 when S_level = 0).
  Depth-first traversal, children in descending Level FS; each user gets rank/user_count, the first
  user visited the highest rank (= user_count, factor 1.0). Ties: tied users share a rank (the next
  rank drops by the tie size); tied accounts' children are merged and sorted together; in a tie
  of users and accounts the users come first (our reading of fair_tree.html).

**Accounts file** (TOML; every section optional)::

    [accounts]                 # account -> shares (number) or {shares = N, parent = "acct"}
    physics = 40
    theory = { shares = 10, parent = "physics" }
    [users]                    # user -> shares (same in each of the user's accounts); default 1
    alice = 2
    [qos.normal]               # QOS priority and per-user limit of running jobs
    priority = 0
    [qos.high]
    priority = 100
    max_jobs_per_user = 4                 # the sacctmgr spellings (MaxJobsPerUser, ...) work too
    max_tres_per_user = "gres/gpu=8,cpu=64"   # MaxTRESPerUser (Slurm's TRES string)
    grp_tres = "gres/gpu=16"              # GrpTRES: all running jobs of the QOS together

TRES names read: ``cpu`` (allocation units that are CPUs; a node-unit job counts its nodes x
CPUs per node), ``node``, ``gres/gpu`` (``gpu`` accepted). Other TRES (``mem``, ``license/...``,
``billing``, typed ``gres/gpu:TYPE``) are refused with the file and key named (not modelled).

Accounts not listed get 1 share under root; a job's account is its ``group`` (sacct: Account).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - python < 3.11
    import tomli as tomllib  # type: ignore


from .slurm_sacctmgr import AccountsError, read_accounts_data  # noqa: E402 - the accounts file's reader


@dataclass
class QOSDef:
    """A QOS: its priority and per-user limit on running jobs (None = no limit)."""

    name: str
    priority: int = 0
    max_jobs_per_user: int | None = None
    #: MaxTRESPerUser: TRES name (``cpu``, ``node``, ``gres/gpu``) -> limit per user (units)
    max_tres_per_user: dict[str, int] = field(default_factory=dict)
    #: GrpTRES: TRES name -> limit over every running job of the QOS
    grp_tres: dict[str, int] = field(default_factory=dict)
    #: preemption keys as written (``preempt``: QOS names it may preempt, ``preempt_mode``,
    #: ``preempt_exempt_time``), validated and modelled by `schedulers.slurm_preempt`
    preempt: dict = field(default_factory=dict)


@dataclass
class AccountsSpec:
    """Shares and QOS definitions (see the module docstring for the file format)."""

    account_shares: dict[str, float] = field(default_factory=dict)
    account_parent: dict[str, str] = field(default_factory=dict)
    user_shares: dict[str, float] = field(default_factory=dict)
    qos: dict[str, QOSDef] = field(default_factory=dict)
    path: str = ""


#: QOS limit keys read by `schedulers.slurm_limits`: sacctmgr spelling -> snake_case
QOS_LIMITS = {"MaxSubmitJobsPerUser": "max_submit_jobs_per_user", "MaxSubmitJobs": "max_submit_jobs_per_user",
        "GrpSubmitJobs": "grp_submit_jobs", "GrpJobs": "grp_jobs", "MaxWall": "max_wall",
        "MaxWallDurationPerJob": "max_wall", "MaxTRESPerJob": "max_tres_per_job",
        "MaxTRESPerNode": "max_tres_per_node", "Flags": "flags"}
#: association keys (accounts and users tables): sacctmgr spelling -> snake_case
ASSOC_LIMITS = {"MaxJobs": "max_jobs", "GrpJobs": "grp_jobs", "GrpTRES": "grp_tres", "MaxSubmitJobs": "max_submit_jobs"}
#: every spelling of the limit keys `schedulers.slurm_limits` reads (`load_accounts` lets them through)
QOS_KEYS = frozenset(QOS_LIMITS) | frozenset(QOS_LIMITS.values())
ASSOC_KEYS = frozenset(ASSOC_LIMITS) | frozenset(ASSOC_LIMITS.values())


def load_accounts(path: str | Path) -> AccountsSpec:
    """Read an accounts file (TOML, or a sacctmgr command script: `schedulers.slurm_sacctmgr`) into an
    `AccountsSpec`."""
    p = Path(path)
    if not p.exists():
        raise AccountsError(f"{p}: file not found")
    try:
        data, _, _ = read_accounts_data(p, tomllib.loads)     # the TOML, or a sacctmgr command script
    except tomllib.TOMLDecodeError as e:
        raise AccountsError(f"{p}: {e} (expected the accounts TOML or a sacctmgr command script)") from None
    spec = AccountsSpec(path=str(p))
    unknown = set(data) - {"accounts", "users", "qos"}
    if unknown:
        raise AccountsError(f"{p}: unknown section(s) {', '.join(sorted(unknown))} "
                            "(expected accounts, users, qos)")

    def shares(where: str, v) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise AccountsError(f"{p}: {where}: shares must be a number >= 0, got {v!r}")
        return float(v)

    for name, v in data.get("accounts", {}).items():
        if isinstance(v, dict):
            bad = set(v) - {"shares", "parent"} - ASSOC_KEYS
            if bad:
                raise AccountsError(f"{p}: accounts.{name}: unknown key(s) {', '.join(sorted(bad))}")
            spec.account_shares[name] = shares(f"accounts.{name}.shares", v.get("shares", 1))
            if "parent" in v:
                spec.account_parent[name] = str(v["parent"])
        else:
            spec.account_shares[name] = shares(f"accounts.{name}", v)
    for name, v in data.get("users", {}).items():
        if isinstance(v, dict):         # {shares = N, MaxJobs = ...}: limits read by schedulers.slurm_limits
            bad = set(v) - {"shares"} - ASSOC_KEYS
            if bad:
                raise AccountsError(f"{p}: users.{name}: unknown key(s) {', '.join(sorted(bad))}")
            spec.user_shares[name] = shares(f"users.{name}.shares", v.get("shares", 1))
        else:
            spec.user_shares[name] = shares(f"users.{name}", v)
    for name, v in data.get("qos", {}).items():
        if not isinstance(v, dict):
            raise AccountsError(f"{p}: qos.{name}: expected a table")
        v = {_QOS_ALIASES.get(k, k): x for k, x in v.items()}
        bad = set(v) - {"priority", "max_jobs_per_user", "max_tres_per_user", "grp_tres"} - _QOS_PREEMPT - QOS_KEYS
        if bad:
            raise AccountsError(f"{p}: qos.{name}: unknown key(s) {', '.join(sorted(bad))} (expected "
                                "priority, max_jobs_per_user, max_tres_per_user, grp_tres, preempt, preempt_mode, "
                                "preempt_exempt_time, max_submit_jobs_per_user, grp_submit_jobs, grp_jobs, "
                                "max_wall, max_tres_per_job, max_tres_per_node, flags)")
        prio = v.get("priority", 0)
        mj = v.get("max_jobs_per_user")
        if not isinstance(prio, int) or prio < 0:
            raise AccountsError(f"{p}: qos.{name}.priority: expected an integer >= 0, got {prio!r}")
        if mj is not None and (not isinstance(mj, int) or mj < 0):
            raise AccountsError(f"{p}: qos.{name}.max_jobs_per_user: expected an integer >= 0, "
                                f"got {mj!r}")
        spec.qos[name] = QOSDef(name, prio, mj,
                                parse_tres(v.get("max_tres_per_user", ""), f"{p}: qos.{name}.max_tres_per_user"),
                                parse_tres(v.get("grp_tres", ""), f"{p}: qos.{name}.grp_tres"),
                                {k: x for k, x in v.items() if k in _QOS_PREEMPT})
    for a, par in spec.account_parent.items():
        seen = {a}
        while par != "root":
            if par in seen:
                raise AccountsError(f"{p}: accounts.{a}: parent cycle through {par!r}")
            if par not in spec.account_shares:
                raise AccountsError(f"{p}: accounts.{a}: parent {par!r} is not an account")
            seen.add(par)
            par = spec.account_parent.get(par, "root")
    return spec


#: Slurm's sacctmgr spellings of the QOS keys, accepted in the accounts file
_QOS_ALIASES = {"Priority": "priority", "MaxJobsPerUser": "max_jobs_per_user",
                "MaxTRESPerUser": "max_tres_per_user", "GrpTRES": "grp_tres", "Preempt": "preempt",
                "PreemptMode": "preempt_mode", "PreemptExemptTime": "preempt_exempt_time"}
#: QOS preemption keys (read by `schedulers.slurm_preempt`)
_QOS_PREEMPT = frozenset(("preempt", "preempt_mode", "preempt_exempt_time"))
#: TRES names the limits understand (``gpu`` is read as ``gres/gpu``)
TRES_NAMES = ("cpu", "node", "gres/gpu")


def parse_tres(value, where: str) -> dict[str, int]:
    """A Slurm TRES string (``"gres/gpu=4,cpu=32"``) -> {name: count}; ``where`` names the file
    and key in the `AccountsError` raised for a malformed item or a TRES that is not modelled."""
    if not isinstance(value, str):
        raise AccountsError(f"{where}: expected a TRES string such as \"gres/gpu=4,cpu=32\", got {value!r}")
    out: dict[str, int] = {}
    for item in filter(None, (x.strip() for x in value.split(","))):
        key, eq, num = item.partition("=")
        key = key.strip().lower()
        key = {"gpu": "gres/gpu", "nodes": "node", "cpus": "cpu"}.get(key, key)
        if not eq or not num.strip().isdigit():
            raise AccountsError(f"{where}: {item!r} is not NAME=COUNT (e.g. gres/gpu=4)")
        if key not in TRES_NAMES:
            raise AccountsError(f"{where}: TRES {item.partition('=')[0]!r} is not modelled (limits read: "
                                f"{', '.join(TRES_NAMES)}); remove it or give it in another QOS file")
        if key in out:
            raise AccountsError(f"{where}: TRES {key} given twice")
        out[key] = int(num)
    return out


# ----------------------------------------------------------------------------- the tree
class FairShare:
    """Association tree root -> accounts (nested) -> user associations, with Slurm's usage decay.

    Parameters
    ----------
    assoc_account, assoc_user: names of each user association (index = association id).
    spec: shares (None = every account and user 1 share).
    half_life: PriorityDecayHalfLife (s; 0 = no decay).
    fair_tree: Fair Tree ranking (True) or the classic formula.
    dampening: FairShareDampeningFactor (classic only).
    """

    def __init__(self, assoc_account: Sequence[str], assoc_user: Sequence[str],
                 spec: AccountsSpec | None = None, half_life: float = 7 * 86400.0,
                 fair_tree: bool = True, dampening: float = 1.0):
        spec = spec or AccountsSpec()
        self.fair_tree = fair_tree
        self.dampening = float(dampening)
        self.decay = 1.0 - 0.693 / half_life if half_life > 0 else 1.0
        # nodes: 0 root, then accounts, then user associations
        names = ["root"]
        parent = [-1]
        shares = [1.0]
        is_user = [False]
        acct_id: dict[str, int] = {}

        def account(a: str) -> int:
            if a in acct_id:
                return acct_id[a]
            par_name = spec.account_parent.get(a, "root")
            par = 0 if par_name == "root" else account(par_name)
            i = len(names)
            acct_id[a] = i
            names.append(a)
            parent.append(par)
            shares.append(spec.account_shares.get(a, 1.0))
            is_user.append(False)
            return i

        for a in spec.account_shares:
            account(a)
        self.assoc_node = np.empty(len(assoc_user), dtype=np.int64)
        for k, (a, u) in enumerate(zip(assoc_account, assoc_user)):
            par = account(a)
            self.assoc_node[k] = len(names)
            names.append(f"{a}/{u}")
            parent.append(par)
            shares.append(spec.user_shares.get(u, 1.0))
            is_user.append(True)
        self.names = names
        self.parent = np.asarray(parent, dtype=np.int64)
        self.shares_raw = np.asarray(shares, dtype=np.float64)
        self.is_user = np.asarray(is_user, dtype=bool)
        self.n_nodes = len(names)
        self.n_assoc = len(assoc_user)
        # ancestors matrix (node x depth) for adding usage to every ancestor
        depth_lists = []
        for i in range(self.n_nodes):
            chain = []
            j = i
            while j >= 0:
                chain.append(j)
                j = int(self.parent[j])
            depth_lists.append(chain)
        maxd = max(len(c) for c in depth_lists)
        self.anc = np.full((self.n_nodes, maxd), -1, dtype=np.int64)
        for i, c in enumerate(depth_lists):
            self.anc[i, :len(c)] = c
        self.children: list[list[int]] = [[] for _ in range(self.n_nodes)]
        for i in range(1, self.n_nodes):
            self.children[int(self.parent[i])].append(i)
        sib = np.zeros(self.n_nodes)
        np.add.at(sib, self.parent[1:], self.shares_raw[1:])
        self.level_shares = np.where(np.arange(self.n_nodes) == 0, 1.0, sib[np.maximum(self.parent, 0)])
        s_level = np.divide(self.shares_raw, self.level_shares, out=np.zeros(self.n_nodes),
                            where=self.level_shares > 0)
        s_level[0] = 1.0
        self.s_level = s_level
        norm = np.ones(self.n_nodes)
        for i in range(1, self.n_nodes):   # parents come before children
            norm[i] = norm[self.parent[i]] * s_level[i]
        self.shares_norm = norm
        self.usage_raw = np.zeros(self.n_nodes)

    # ------------------------------------------------------------------ usage
    def add_usage(self, assoc: np.ndarray, amount: np.ndarray) -> None:
        """Add ``amount`` (unit-seconds, already decayed) to associations ``assoc`` and ancestors."""
        assoc = np.atleast_1d(np.asarray(assoc, dtype=np.int64))
        amount = np.atleast_1d(np.asarray(amount, dtype=np.float64))
        if len(assoc) == 0:
            return
        anc = self.anc[self.assoc_node[assoc]]
        w = np.broadcast_to(amount[:, None], anc.shape)
        ok = anc >= 0
        np.add.at(self.usage_raw, anc[ok], w[ok])

    def decayed(self, delta: np.ndarray | float) -> np.ndarray | float:
        """``delta * d**delta``: Slurm's decayed usage of ``delta`` seconds of one unit."""
        return delta * np.power(self.decay, delta)

    def apply_decay(self, seconds: float) -> None:
        """Multiply all raw usage by d**seconds (Slurm's ``_apply_decay``)."""
        if seconds > 0 and self.decay != 1.0:
            self.usage_raw *= self.decay ** seconds

    # ------------------------------------------------------------------ factors
    def factors(self) -> np.ndarray:
        """Fair-share factor of every user association (array over association ids)."""
        if self.fair_tree:
            return self._fair_tree()
        return self._classic()

    def _classic(self) -> np.ndarray:
        u = self.usage_raw
        root = u[0]
        un = u / root if root > 0 else np.zeros_like(u)
        ue = np.zeros(self.n_nodes)
        for i in range(1, self.n_nodes):
            par = int(self.parent[i])
            if par == 0:
                ue[i] = un[i]
            else:
                ls = self.level_shares[i]
                ue[i] = un[i] + (ue[par] - un[i]) * (self.shares_raw[i] / ls if ls > 0 else 0.0)
        s = self.shares_norm
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(s > 0, np.power(2.0, -(ue / np.where(s > 0, s, 1.0)) / self.dampening), 0.0)
        return f[self.assoc_node]

    def level_fs(self) -> np.ndarray:
        """Fair Tree's Level FS of every node (inf where the node has no usage)."""
        u = self.usage_raw
        par_u = u[np.maximum(self.parent, 0)]
        with np.errstate(divide="ignore", invalid="ignore"):
            u_level = np.where(par_u > 0, u / np.where(par_u > 0, par_u, 1.0), 0.0)
            lf = np.where(u_level > 0, self.s_level / np.where(u_level > 0, u_level, 1.0), math.inf)
        lf = np.where(self.s_level > 0, lf, 0.0)
        lf[0] = math.inf
        return lf

    def _fair_tree(self) -> np.ndarray:
        lf = self.level_fs()
        count = self.n_assoc
        out = np.zeros(self.n_nodes)
        rank = count

        def visit(siblings: list[int]) -> None:
            nonlocal rank
            order = sorted(siblings, key=lambda i: -lf[i])
            k = 0
            while k < len(order):
                j = k + 1
                while j < len(order) and lf[order[j]] == lf[order[k]]:
                    j += 1
                group = order[k:j]
                users = [i for i in group if self.is_user[i]]
                accts = [i for i in group if not self.is_user[i]]
                if users:
                    rnt = rank
                    for i in users:
                        out[i] = rnt / count if count else 0.0
                        rank -= 1
                merged = [c for a in accts for c in self.children[a]]
                if merged:
                    visit(merged)
                k = j

        visit(self.children[0])
        return out[self.assoc_node]


# ----------------------------------------------------------------------------- priority
class MultifactorPriority:
    """Vectorised job priorities (see the module docstring).

    Parameters (arrays over job indices): ``submit`` (s), ``nodes`` (whole nodes requested),
    ``cpus`` (allocation units requested), ``time_limit`` (s; NaN/inf -> the partition limit or
    a year), ``part_factor`` and ``qos_factor`` (already normalised to [0, 1]), ``assoc`` (user
    association id). ``total_nodes``, ``total_cpus``: cluster size. ``prm``: a
    `schedulers.slurm_conf.PriorityParams`.
    """

    def __init__(self, prm, *, submit, nodes, cpus, time_limit, part_factor, qos_factor, assoc,
                 total_nodes: int, total_cpus: int):
        self.prm = prm
        self.submit = np.asarray(submit, dtype=np.float64)
        self.assoc = np.asarray(assoc, dtype=np.int64)
        self.basic = prm.type == "priority/basic"
        self._n_nodes = np.asarray(nodes, dtype=np.float64)
        self._N, self._C = float(total_nodes), float(total_cpus)
        self._tl = time_limit
        self.job_size = self._size_factor(np.arange(len(self._n_nodes)), np.asarray(cpus, dtype=np.float64))
        self._w_part = prm.weight_partition * np.asarray(part_factor, dtype=np.float64)
        self._w_qos = prm.weight_qos * np.asarray(qos_factor, dtype=np.float64)
        # static part of the priority (does not change with time)
        self.static = (prm.weight_jobsize * self.job_size + self._w_part) + self._w_qos
        self.time_varying = (prm.weight_age > 0) or (prm.weight_fairshare > 0)
        #: the job-size CPU count's switch (`use_requested_size`): per job, the time (s) of its first
        #: select test since submit or requeue (inf: none yet), and total_cpus as that test set it
        self.size_tested: np.ndarray | None = None
        self.size_total: np.ndarray | None = None
        #: each job's eligible time (s; NaN: not yet eligible, age 0 as Slurm's unset begin_time), a live
        #: array of the run's dependency gate, or None (eligible = submit)
        self.begin: np.ndarray | None = None
        #: the time (s) each job accrues age from at the earliest (-inf: no bound), a live array, or
        #: None: a job requeued by preemption ages from its new EligibleTime (job_mgr.c
        #: ``batch_requeue_fini`` sets ``accrue_time = 0`` and ``begin_time = now + cred_expire + 1``;
        #: acct_policy.c ``_handle_add_accrue`` sets ``accrue_time = begin_time`` once that has
        #: passed, and ``_get_priority_internal``'s age is ``now - accrue_time``)
        self.accrue_from: np.ndarray | None = None

    def _size_factor(self, idx: np.ndarray, n_cpus: np.ndarray) -> np.ndarray:
        """Job-size factor J in [0, 1] (module docstring) of jobs ``idx`` counted as ``n_cpus`` CPUs
        (allocation units) each."""
        prm = self.prm
        n_nodes = self._n_nodes[idx]
        N, C = self._N, self._C
        if prm.small_relative_to_time:
            tl_min = np.asarray(self._tl, dtype=np.float64)[idx] / 60.0
            tl_min = np.where(np.isfinite(tl_min) & (tl_min > 0), tl_min, 525600.0)  # YEAR_MINUTES
            js = np.maximum(n_nodes * C / N, n_cpus) / tl_min / C
            if prm.favor_small:
                js = 1.0 - js
        elif prm.favor_small:
            js = ((N - n_nodes) / N + (C - n_cpus) / C) / 2.0
        else:
            js = (n_nodes / N + n_cpus / C) / 2.0
        return np.clip(js, 0.0, 1.0)

    def use_requested_size(self, req_cpus) -> bool:
        """Count each job's requested CPUs (``req_cpus``, allocation units; NaN or <= 0: unknown, the
        job keeps the count given at construction) in the job-size factor until its first select
        test (`size_test`), as ``_get_priority_internal`` does: it counts ``job_ptr->total_cpus``
        when set, else ``details->max_cpus`` / ``min_cpus`` ("On the initial run of this we don't
        have total_cpus so go off the requesting"). Returns whether any job's request is known
        (False: nothing changed)."""
        req = np.asarray(req_cpus, dtype=np.float64)
        known = np.isfinite(req) & (req > 0)
        if not known.any():
            return False
        n = len(self._n_nodes)
        cpus = np.where(known, req, np.nan)
        js = self._size_factor(np.arange(n), np.where(known, cpus, 0.0))
        self.job_size = np.where(known, js, self.job_size)
        self.static = np.where(known, (self.prm.weight_jobsize * self.job_size + self._w_part) + self._w_qos,
                               self.static)
        self.size_known = known
        self.size_tested = np.full(n, np.inf)
        self.size_total = np.zeros(n)
        return True

    def size_test(self, j: int, now: float, total_cpus: float) -> None:
        """Job ``j``'s select test succeeded at ``now`` (s), setting ``total_cpus`` (allocation
        units): cons_common ``_job_test`` sets ``job_ptr->total_cpus`` on every successful test in
        RUN_NOW or WILL_RUN mode (whole nodes' CPUs for ``--exclusive``, else the distributed
        CPUs); the first since submit or requeue counts from the next recalculation (`compute` at
        a tick after ``now``). No-op without `use_requested_size` or for a job without a request."""
        if self.size_tested is None or not self.size_known[j] or self.size_tested[j] < math.inf:
            return
        self.size_tested[j] = now
        self.size_total[j] = total_cpus

    def size_reset(self, j: int) -> None:
        """Job ``j`` was requeued: ``batch_requeue_fini`` zeroes ``total_cpus``, so its requested
        CPUs count again until its next select test."""
        if self.size_tested is not None:
            self.size_tested[j] = math.inf

    def age_factor(self, now: float, idx: np.ndarray) -> np.ndarray:
        """Age factor in [0, 1] of jobs ``idx`` at ``now`` (s): time since the job's eligible time
        (its submit, or its dependency's release), at least since ``accrue_from``, over MaxAge."""
        since = self.submit[idx]
        if self.begin is not None:
            b = self.begin[idx]
            since = np.where(np.isnan(b), now, b)
        if self.accrue_from is not None:
            since = np.maximum(since, self.accrue_from[idx])
        age = np.maximum(now - since, 0.0)
        return np.minimum(age, self.prm.max_age) / self.prm.max_age

    def compute(self, now: float, idx: np.ndarray, fs_factor: np.ndarray | None) -> np.ndarray:
        """Integer priorities (int64) of jobs ``idx`` at time ``now``; ``fs_factor`` per
        association (None = all 0). priority/basic returns zeros (order then falls back to
        submit time and job id, which is FIFO)."""
        idx = np.asarray(idx, dtype=np.int64)
        if self.basic:
            return np.zeros(len(idx), dtype=np.int64)
        p = self.static[idx].copy()
        if self.size_tested is not None:
            # total_cpus counts once a recalculation (tick at ``now``) came after the job's test
            m = self.size_tested[idx] < now
            if m.any():
                jm = idx[m]
                js = self._size_factor(jm, self.size_total[jm])
                p[m] = (self.prm.weight_jobsize * js + self._w_part[jm]) + self._w_qos[jm]
        if self.prm.weight_age:
            p += self.prm.weight_age * self.age_factor(now, idx)
        if self.prm.weight_fairshare and fs_factor is not None:
            p += self.prm.weight_fairshare * fs_factor[self.assoc[idx]]
        p = np.floor(p)
        return np.maximum(p, 1.0).astype(np.int64)
