"""Job records: the columnar `Workload` table and the per-job `Job` view.

A workload is stored column-wise (one numpy array per field) because real logs hold
hundreds of thousands of jobs and the engine and the schedulers read them by index.
Row ``i`` of every array is the same job.

Units: times in seconds (float64), relative to the log's time 0 (as in SWF files);
sizes in allocation units (``procs``: processors for SWF logs, nodes for node-based
machines). Unknown integer fields are -1; an unknown requested time is NaN.
"""
from __future__ import annotations

from collections import Counter

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Integer columns every workload carries (-1 = unknown).
INT_FIELDS = ("job_id", "procs", "user", "group", "queue", "partition", "status")
#: Float columns every workload carries (seconds).
FLOAT_FIELDS = ("submit", "runtime", "requested_time")
#: Largest machine, in allocation units, that a run accepts (2**26 = 67,108,864): the engine keeps
#: a few per-unit arrays, so this bounds memory at a few hundred MB. For scale: Frontier has 9,408
#: nodes (37,632 GPUs), CEA-Curie 93,312 cores (the largest SWF log here).
MAX_UNITS = 2 ** 26


@dataclass(frozen=True)
class HostRequest:
    """A recorded placement known per host, not per unit (Alea logs list hosts, not CPUs):
    ``counts[k]`` units among ``pools[k]`` (int64 unit ids of host k). Read by the ``recorded``
    placer through ``columns["recorded_nodes"]``, beside plain int arrays of exact unit ids."""

    pools: tuple
    counts: tuple

    def pick(self, free_mask: np.ndarray) -> np.ndarray | None:
        """The lowest free units of each host, ``counts[k]`` of host k (sorted), or None when a
        host has too few free units or a unit id is outside the machine."""
        out = []
        n = len(free_mask)
        for pool, c in zip(self.pools, self.counts):
            if len(pool) and (pool[0] < 0 or pool[-1] >= n):
                return None
            free = pool[free_mask[pool]]
            if len(free) < c:
                return None
            out.append(free[:c])
        return np.sort(np.concatenate(out)) if out else None

    def __len__(self) -> int:
        return int(sum(self.counts))

    def __repr__(self) -> str:
        return f"HostRequest({len(self.pools)} hosts, {len(self)} units)"


@dataclass(frozen=True)
class Job:
    """One job, as a plain record (a view of one row of a `Workload`).

    Attributes are in seconds (times) and allocation units (``procs``); ``extra`` holds the
    optional per-job columns of the workload (utilisation, communication kind, GPUs per node,
    recorded start and nodes for replay...).

    Examples
    --------
    >>> import hpctwin
    >>> job = hpctwin.load_workload("synthetic:jobs=100,nodes=16").job(0)
    >>> job.job_id, job.submit, job.runtime, job.requested_time, job.procs
    (1, 0.0, 143.0, 600.0, 2)
    >>> hpctwin.Job(index=0, job_id=7, submit=0.0, runtime=60.0, requested_time=120.0, procs=4).user
    -1
    """

    index: int
    job_id: int
    submit: float
    runtime: float
    requested_time: float
    procs: int
    user: int = -1
    group: int = -1
    queue: int = -1
    partition: int = -1
    status: int = -1
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Workload:
    """A table of jobs, sorted by (submit, job_id) once `sort()` has run.

    Attributes
    ----------
    name: short name of the workload (log name or generator spec).
    job_id, procs, user, group, queue, partition, status: int64 arrays (-1 = unknown).
    submit, runtime, requested_time: float64 arrays in seconds; ``requested_time`` is NaN
        where the log has none.
    columns: optional extra per-job arrays (e.g. ``cpu_util``, ``gpu_util`` in [0, 1],
        ``comm_fraction``, ``gpus_per_node``, ``recorded_start``), same length.
    machine_size: allocation units of the machine the log came from, if known.
    machine_size_source: where ``machine_size`` came from (e.g. ``"header MaxProcs"``).
    header: the log's header fields (``MaxProcs``, ``UnixStartTime``...), as strings.
    notes: human-readable notes on how the log was read (always printed in summaries).
    source: path of the file or the generator specification.
    dropped: records of the file the reader did not turn into jobs, by reason (e.g. sacct job
        steps, jobs never started); with the run's skipped jobs every record is accounted for.

    Examples
    --------
    >>> import hpctwin
    >>> wl = hpctwin.Workload.from_arrays("tiny", submit=[0, 10, 20], runtime=[100, 50, 30],
    ...                                   procs=[4, 2, 8], requested_time=[120, 60, 60])
    >>> len(wl), wl.job_id.tolist(), wl.user.tolist()
    (3, [1, 2, 3], [-1, -1, -1])
    >>> res = hpctwin.run(hpctwin.RunConfig(workload="tiny", nodes=8, scheduler="fcfs"), workload=wl)
    >>> res.jobs["wait"].tolist()
    [0.0, 0.0, 80.0]
    """

    name: str
    job_id: np.ndarray
    submit: np.ndarray
    runtime: np.ndarray
    requested_time: np.ndarray
    procs: np.ndarray
    user: np.ndarray
    group: np.ndarray
    queue: np.ndarray
    partition: np.ndarray
    status: np.ndarray
    columns: dict[str, np.ndarray] = field(default_factory=dict)
    machine_size: int | None = None
    machine_size_source: str = ""
    header: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    source: str = ""
    dropped: dict[str, int] = field(default_factory=dict)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(cls, name: str, *, submit, runtime, procs, requested_time=None,
                    job_id=None, user=None, group=None, queue=None, partition=None,
                    status=None, columns: dict[str, np.ndarray] | None = None,
                    **meta: Any) -> "Workload":
        """Build a workload from array-likes; missing integer fields become -1."""
        n = len(submit)

        def ints(a, default=-1):
            if a is None:
                return np.full(n, default, dtype=np.int64)
            return np.asarray(a, dtype=np.int64).copy()

        req = (np.full(n, np.nan) if requested_time is None
               else np.asarray(requested_time, dtype=np.float64).copy())
        wl = cls(
            name=name,
            job_id=ints(job_id) if job_id is not None else np.arange(1, n + 1, dtype=np.int64),
            submit=np.asarray(submit, dtype=np.float64).copy(),
            runtime=np.asarray(runtime, dtype=np.float64).copy(),
            requested_time=req,
            procs=ints(procs),
            user=ints(user), group=ints(group), queue=ints(queue),
            partition=ints(partition), status=ints(status),
            columns={k: np.asarray(v) for k, v in (columns or {}).items()},
            **meta,
        )
        wl.validate()
        return wl

    def validate(self) -> None:
        """Check that every column has the same length; raise ValueError otherwise."""
        n = len(self.submit)
        for name in INT_FIELDS + FLOAT_FIELDS:
            a = getattr(self, name)
            if len(a) != n:
                raise ValueError(f"workload {self.name!r}: column {name!r} has {len(a)} rows, expected {n}")
        for name, a in self.columns.items():
            if len(a) != n:
                raise ValueError(f"workload {self.name!r}: extra column {name!r} has {len(a)} rows, expected {n}")

    # ------------------------------------------------------------------ access
    def __len__(self) -> int:
        return len(self.submit)

    @property
    def unix_start(self) -> float | None:
        """The Unix time (s) of the log's time 0: the header's ``UnixStartTime`` (SWF; the sacct
        reader writes it), None when absent or not a finite number."""
        try:
            t = float(self.header.get("UnixStartTime", ""))
        except ValueError:
            return None
        return t if math.isfinite(t) else None

    def job(self, i: int) -> Job:
        """The `Job` record of row ``i``."""
        return Job(
            index=int(i), job_id=int(self.job_id[i]), submit=float(self.submit[i]),
            runtime=float(self.runtime[i]), requested_time=float(self.requested_time[i]),
            procs=int(self.procs[i]), user=int(self.user[i]), group=int(self.group[i]),
            queue=int(self.queue[i]), partition=int(self.partition[i]), status=int(self.status[i]),
            extra={k: v[i].item() if hasattr(v[i], "item") else v[i] for k, v in self.columns.items()},
        )

    def take(self, index: np.ndarray) -> "Workload":
        """A new workload holding rows ``index`` (an integer or boolean index array)."""
        idx = np.asarray(index)
        kw = {name: getattr(self, name)[idx].copy() for name in INT_FIELDS + FLOAT_FIELDS}
        return Workload(name=self.name, columns={k: v[idx].copy() for k, v in self.columns.items()},
                        machine_size=self.machine_size, machine_size_source=self.machine_size_source,
                        header=dict(self.header), notes=list(self.notes), source=self.source,
                        dropped=dict(self.dropped), **kw)

    def sorted(self) -> "Workload":
        """Rows in (submit, job_id) order: the order in which the engine submits them."""
        order = np.lexsort((self.job_id, self.submit))
        if np.all(order == np.arange(len(order))):
            return self
        return self.take(order)


#: The ``state`` column of a run's jobs table: Slurm's job state names (sacct ``State``).
#: COMPLETED ran its whole runtime; TIMEOUT was killed at its time limit; NODE_FAIL ended by a node
#: failure and was not requeued (the failure model's ``fail`` regime); PENDING never started;
#: CANCELLED was withdrawn while waiting (`twin.control.EngineControl.cancel`) and never started;
#: PREEMPTED was ended by its policy's preemption (Slurm's PreemptMode=CANCEL, `EngineControl.preempt`).
JOB_STATES = ("COMPLETED", "TIMEOUT", "NODE_FAIL", "PENDING", "CANCELLED", "PREEMPTED")


def job_states(failed: np.ndarray, killed: np.ndarray, start: np.ndarray,
               cancelled: np.ndarray | None = None, preempted: np.ndarray | None = None) -> np.ndarray:
    """The ``state`` column (`JOB_STATES`) from the engine's per-job flags and first starts (NaN:
    never started); ``cancelled`` (True per job withdrawn while waiting, or None) gives CANCELLED,
    ``preempted`` (True per job a preemption ended, or None) PREEMPTED."""
    pending = np.where(np.isnan(start), "PENDING", "COMPLETED")
    if cancelled is not None:
        pending = np.where(cancelled, "CANCELLED", pending)
    out = np.where(failed, "NODE_FAIL", np.where(killed, "TIMEOUT", pending))
    return out if preempted is None else np.where(preempted, "PREEMPTED", out)


#: Columns of a run's jobs table that had other names before they followed Slurm's (old -> new),
#: and the old ``status`` values as `JOB_STATES`.
RENAMED_JOB_COLUMNS = {"run": "elapsed", "requested_time": "timelimit", "status": "state"}
OLD_STATUS_TO_STATE = {"completed": "COMPLETED", "killed": "TIMEOUT", "failed": "NODE_FAIL",
                       "not_started": "PENDING"}


def upgrade_jobs_table(df):
    """A run's jobs table (a DataFrame read from ``jobs.csv``) with the current column names: a
    table written before the names followed Slurm's (``run``, ``requested_time``, ``status``) is
    renamed and its status values mapped to `JOB_STATES`; a current table is returned as it is."""
    old = [c for c in RENAMED_JOB_COLUMNS if c in df.columns and RENAMED_JOB_COLUMNS[c] not in df.columns]
    if not old:
        return df
    df = df.rename(columns={c: RENAMED_JOB_COLUMNS[c] for c in old})
    if "status" in old:
        df["state"] = df["state"].map(lambda v: OLD_STATUS_TO_STATE.get(str(v), v))
    return df


def job_accounting(records: int, dropped: dict[str, int], skipped: dict[str, int], state) -> dict:
    """Where every record of the input went: dropped by the reader (by reason), skipped by the run
    (by reason), or simulated and then completed, killed at walltime, failed, or never started.

    ``state`` is the simulated jobs' state column (`JOB_STATES`). ``balanced`` is True when the
    parts add up to ``records``.
    """
    counts = Counter(map(str, state.tolist() if isinstance(state, np.ndarray) else state))
    outcome = {v: counts[v] for v in sorted(counts)}          # code-point order, as np.unique sorts
    total = sum(dropped.values()) + sum(skipped.values()) + sum(outcome.values())
    return {"records": int(records), "dropped_by_reader": dict(dropped), "skipped_by_run": dict(skipped),
            "simulated": outcome, "balanced": bool(total == records)}
