"""Node failures injected into the event simulation, and the jobs' recovery from them.

`FailureModel` is a `twin.model_api.RunModel` that owns two kinds of events: a node *fails* (it is
taken out of service for a repair time and every job on it is interrupted) and a node is
*repaired* (it returns to service). Each interrupted job recovers by its regime:

* ``checkpoint_restart``: the job computes ``tau`` s, writes a checkpoint for ``delta`` s, and so on
  (no checkpoint after its last segment). Its engine work for ``U`` s of useful work still to do is
  ``rho + U + (ceil(U / tau) - 1) delta``, where ``rho`` is the restart cost (0 for the first run,
  ``restart_s`` after a failure). A failure at engine progress ``e`` into a run keeps the ``k =
  floor((e - rho) / (tau + delta))`` checkpoints completed (at most ``ceil(U / tau) - 1``) and loses
  everything since the last one; the job is requeued (``requeue`` = "front" or "back") with the
  useful work ``U - k tau`` left and pays ``restart_s`` when it starts again. ``tau``: Daly's
  (2006) optimum for the job's MTBF = node MTBF / nodes (``interval = "daly"``, the default),
  Young's (1974) (``"young"``), or a fixed number of seconds. This is the renewal model of
  `twin.resilience` (`replay_failures` gives the same wall time for a job alone on the machine).
* ``fast_recovery``: checkpoint-free recovery (in-memory redundancy, FlashRecovery): a failure
  loses the current training step (progress is kept at the last multiple of ``step_s``), and the
  job pays ``fast_recovery_s`` (default 150 s, FlashRecovery on 4,800 devices) before computing
  again. The job goes back to the queue's **front**: when enough units are free (spare nodes) the
  pass at the same instant restarts it, as a spare-node swap does; otherwise it waits first in line.
* ``requeue``: no checkpoint; the job runs again from the start (Slurm's ``--requeue``), at most
  ``max_requeues`` times (default 5, Slurm's ``MaxBatchRequeue`` default); the next failure ends it
  as failed. Without the limit a job much longer than its MTBF would rerun for ever.
* ``fail``: the job ends at the failure, status ``failed`` (no requeue).

``max_restarts`` (default -1: no limit) bounds the restarts of the two recovering regimes the same way.
Each run of a requeued job may last its full requested time before it is killed (the time limit
starts again with the run, as for a requeued Slurm job); a job's ``start`` stays its first start.

Regimes are chosen per job class (workload column ``job_class``; `twin.job_classes`): by default
``llm_pretrain`` and ``llm_finetune`` use ``checkpoint_restart``, ``llm_infer_service`` uses
``fast_recovery`` (a replica restarts elsewhere) and everything else ``requeue``. The step of
``fast_recovery`` is the workload column ``iteration_s`` when present, else ``step_s``.

Failure process (seeded from the run's seed, stream ``"failures"``): every node is an independent
renewal process whose up-times are exponential (``dist = "poisson"``) or Weibull (``"weibull"``,
``shape``, scale chosen so the mean is ``node_mtbf_s``); after a failure the node is down for
``repair_s`` (``repair_dist = "fixed"``) or an exponential time of that mean (``"exponential"``),
then its next up-time is drawn. The default MTBF is the Llama 3 anchor (419 interruptions in 54
days on 2,048 8-GPU nodes: 263.9 days per node; `twin.resilience.LLAMA3_NODE_MTBF_S`); the default
repair time, 4 h, is an assumption (a node swap or reboot with diagnostics). Alternatively
``events`` gives an explicit list of ``(time s, node)`` failures (a failure log, or a test);
a listed failure of a node already down is ignored and counted.

A node is ``units_per_node`` consecutive allocation units (1 in node allocation; the GPUs of a
node in GPU allocation). While down, its units are held by a pseudo-job whose expected end is the
repair's end: schedulers see it as busy until then (operators know a repair's expected length)
and EASY/conservative reservations plan around it. The power model sees a down node as idle
(assumption: it stays powered during diagnosis).

Metrics (`job_columns`, `summary`; engine totals from `twin.simulation.SimResult`): per job the
failures it suffered, its committed useful work, restart and lost work (nominal s, i.e. at rate
1), and in the run folder ``ettr`` = useful work / engine work (the effective training time
ratio: checkpoint writes, restarts and lost work are the difference), lost unit-hours and the
energy of lost work (see `twin.run`).

Units: seconds; nodes and allocation units as in the run.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from .model_api import RunModel
from .resilience import FLASHRECOVERY_RECOVERY_S, LLAMA3_NODE_MTBF_S, daly_interval, young_interval

REGIMES = ("checkpoint_restart", "fast_recovery", "requeue", "fail")
#: default regime per job class (the key "default" covers every other class)
DEFAULT_REGIMES = {"llm_pretrain": "checkpoint_restart", "llm_finetune": "checkpoint_restart",
                   "llm_infer_service": "fast_recovery", "default": "requeue"}
#: default repair time (s): an assumption (node swap or reboot with diagnostics)
DEFAULT_REPAIR_S = 4 * 3600.0
#: checkpoint write and restart costs (s): assumptions for a synchronous checkpoint of a large model
#: to a parallel file system, and a requeue + reload
DEFAULT_CHECKPOINT_S = 120.0
DEFAULT_RESTART_S = 600.0
#: training step (s) lost by fast recovery when the workload has no ``iteration_s`` column (assumption)
DEFAULT_STEP_S = 10.0

KNOWN_KEYS = {"node_mtbf_s", "node_mtbf_days", "dist", "shape", "repair_s", "repair_dist", "regimes",
              "requeue", "checkpoint_s", "restart_s", "interval", "fast_recovery_s", "step_s", "events",
              "units_per_node", "enabled", "max_requeues", "max_restarts"}


class FailureConfigError(ValueError):
    """An invalid ``[failures]`` option."""


@dataclass
class FailureConfig:
    """Options of the failure model (the run's ``[failures]`` table; see the module docstring)."""

    node_mtbf_s: float = LLAMA3_NODE_MTBF_S
    dist: str = "poisson"
    shape: float = 1.0
    repair_s: float = DEFAULT_REPAIR_S
    repair_dist: str = "fixed"
    regimes: dict = field(default_factory=lambda: dict(DEFAULT_REGIMES))
    requeue: str = "front"
    checkpoint_s: float = DEFAULT_CHECKPOINT_S
    restart_s: float = DEFAULT_RESTART_S
    interval: str | float = "daly"
    fast_recovery_s: float = FLASHRECOVERY_RECOVERY_S
    step_s: float = DEFAULT_STEP_S
    events: list | None = None
    units_per_node: int = 1
    max_requeues: int = 5          # Slurm MaxBatchRequeue default (slurm.conf(5))
    max_restarts: int = -1

    @classmethod
    def from_options(cls, opts: dict, source: str = "[failures]") -> "FailureConfig":
        unknown = set(opts) - KNOWN_KEYS
        if unknown:
            raise FailureConfigError(f"{source}: unknown key(s) {', '.join(sorted(unknown))}; "
                                     f"known: {', '.join(sorted(KNOWN_KEYS))}")
        kw = {k: v for k, v in opts.items() if k not in ("node_mtbf_days", "enabled")}
        if "node_mtbf_days" in opts:
            if "node_mtbf_s" in opts:
                raise FailureConfigError(f"{source}: give node_mtbf_s or node_mtbf_days, not both")
            kw["node_mtbf_s"] = float(opts["node_mtbf_days"]) * 86400.0
        if "regimes" in kw:
            r = dict(DEFAULT_REGIMES)
            r.update(kw["regimes"])
            kw["regimes"] = r
        cfg = cls(**kw)
        cfg.check(source)
        return cfg

    def check(self, source: str = "[failures]") -> None:
        def pos(name, v, zero=False):
            v = float(v)
            if not (math.isfinite(v) and (v >= 0 if zero else v > 0)):
                raise FailureConfigError(f"{source}: {name} must be {'>= 0' if zero else '> 0'} s and finite, "
                                         f"got {v!r}")
        pos("node_mtbf_s", self.node_mtbf_s)
        pos("repair_s", self.repair_s, True)
        pos("checkpoint_s", self.checkpoint_s, True)
        pos("restart_s", self.restart_s, True)
        pos("fast_recovery_s", self.fast_recovery_s, True)
        pos("step_s", self.step_s)
        if self.dist not in ("poisson", "weibull"):
            raise FailureConfigError(f"{source}: dist must be 'poisson' or 'weibull', got {self.dist!r}")
        if not float(self.shape) > 0:
            raise FailureConfigError(f"{source}: shape must be > 0, got {self.shape!r}")
        if self.repair_dist not in ("fixed", "exponential"):
            raise FailureConfigError(f"{source}: repair_dist must be 'fixed' or 'exponential', "
                                     f"got {self.repair_dist!r}")
        if self.requeue not in ("front", "back"):
            raise FailureConfigError(f"{source}: requeue must be 'front' or 'back', got {self.requeue!r}")
        for cls_name, reg in self.regimes.items():
            if reg not in REGIMES:
                raise FailureConfigError(f"{source}: regimes.{cls_name} = {reg!r}; known regimes: {', '.join(REGIMES)}")
        if isinstance(self.interval, str):
            if self.interval not in ("daly", "young"):
                raise FailureConfigError(f"{source}: interval must be 'daly', 'young' or seconds, "
                                         f"got {self.interval!r}")
        else:
            pos("interval", self.interval)
        if int(self.units_per_node) < 1:
            raise FailureConfigError(f"{source}: units_per_node must be >= 1, got {self.units_per_node!r}")
        if self.events is not None:
            for i, ev in enumerate(self.events):
                if len(ev) != 2 or not float(ev[0]) >= 0 or int(ev[1]) < 0:
                    raise FailureConfigError(f"{source}: events[{i}] = {ev!r}; expected [time_s >= 0, node >= 0]")


class FailureModel(RunModel):
    """Injects node failures and repairs into the run and recovers the jobs hit (module docstring)."""

    name = "failures"

    def __init__(self, config: FailureConfig | None = None):
        self.cfg = config or FailureConfig()
        self.cfg.check()

    # ------------------------------------------------------------------ set-up
    def bind(self, ctx) -> None:
        super().bind(ctx)
        cfg = self.cfg
        upn = int(cfg.units_per_node)
        total = int(ctx.n_nodes)
        if total % upn:
            raise FailureConfigError(f"[failures] units_per_node = {upn} does not divide the machine's {total} units")
        self.upn = upn
        self.n_nodes = total // upn
        jobs = ctx.jobs
        n = len(jobs)
        self.n = n
        self.work = np.asarray(ctx.runtime, dtype=np.float64)
        procs = np.asarray(jobs.procs, dtype=np.int64)
        self.nodes_of_job = -(-procs // upn)
        if cfg.events is None and n:
            self._check_can_progress(int(self.nodes_of_job.max()), int(jobs.job_id[int(np.argmax(self.nodes_of_job))]))
        cols = jobs.columns or {}
        jc = cols.get("job_class")
        classes = np.asarray(jc, dtype=object) if jc is not None else np.full(n, "hpc_batch", dtype=object)
        default = cfg.regimes.get("default", "requeue")
        code = {r: i for i, r in enumerate(REGIMES)}
        self.regime = np.array([code[cfg.regimes.get(c, default)] for c in classes.tolist()], dtype=np.int8)
        # checkpoint interval per job (checkpoint_restart jobs)
        mtbf = cfg.node_mtbf_s / np.maximum(self.nodes_of_job, 1)
        if isinstance(cfg.interval, str):
            rule = daly_interval if cfg.interval == "daly" else young_interval
            if cfg.checkpoint_s > 0:
                self.tau = np.array([rule(cfg.checkpoint_s, m) for m in mtbf.tolist()])
            else:
                self.tau = np.full(n, np.inf)      # free checkpoints: commit continuously
        else:
            self.tau = np.full(n, float(cfg.interval))
        it = cols.get("iteration_s")
        step = np.full(n, float(cfg.step_s))
        if it is not None:
            it = np.asarray(it, dtype=np.float64)
            step = np.where(np.isfinite(it) & (it > 0), it, step)
        self.step = step
        # per-job state (nominal s)
        self.committed = np.zeros(n)      # useful work safely done
        self.rho = np.zeros(n)            # restart cost at the start of the current run
        self.restart_total = np.zeros(n)
        self.lost_total = np.zeros(n)
        self.hits = np.zeros(n, dtype=np.int64)
        self._interrupting: set[int] = set()
        # failure process
        self.rng = ctx.rng("failures")
        self.heap: list = []               # (time, kind 0 = repair / 1 = failure, node)
        self.down_until = np.full(self.n_nodes, -np.inf)
        self.node_failures = 0
        self.failures_hitting_jobs = 0
        self.ignored = 0
        self.down_node_seconds = 0.0
        self.down_start = np.zeros(self.n_nodes)
        #: outages as (node, down s, up s); up = inf while still down at the end
        self.outages: list[tuple[int, float, float]] = []
        self._open_outage: dict[int, int] = {}
        if cfg.events is not None:
            for t, node in cfg.events:
                if int(node) >= self.n_nodes:
                    raise FailureConfigError(f"[failures] events: node {node} does not exist "
                                             f"(the machine has {self.n_nodes} nodes)")
                self.heap.append((float(t), 1, int(node)))
            heapq.heapify(self.heap)
            self.explicit = True
        else:
            self.explicit = False
            ups = self._uptimes(self.n_nodes)
            self.heap = [(float(t), 1, k) for k, t in enumerate(ups.tolist())]
            heapq.heapify(self.heap)

    #: below this chance that all of a job's nodes are up at once, a run cannot terminate
    MIN_ALL_UP = 1e-12

    def _check_can_progress(self, k: int, job_id: int) -> None:
        """Refuse a failure process under which the widest job (``k`` nodes) can essentially never find
        its nodes up together: each node is up a fraction ``mtbf / (mtbf + repair)`` of the time (an
        alternating renewal process), all ``k`` of them about that fraction to the power ``k``."""
        cfg = self.cfg
        up = cfg.node_mtbf_s / (cfg.node_mtbf_s + cfg.repair_s)
        if k > 0 and up < 1.0 and k * math.log10(up) < math.log10(self.MIN_ALL_UP):
            raise FailureConfigError(
                f"[failures] cannot make progress: job {job_id} needs {k} nodes up together, but with "
                f"node_mtbf_s = {cfg.node_mtbf_s:g} and repair_s = {cfg.repair_s:g} a node is up {up:.3g} of the "
                f"time and {k} nodes together about 10^{k * math.log10(up):.0f} of it; raise node_mtbf_s or "
                "lower repair_s")

    def _uptimes(self, k: int) -> np.ndarray:
        cfg = self.cfg
        if cfg.dist == "poisson":
            return self.rng.exponential(cfg.node_mtbf_s, size=k)
        scale = cfg.node_mtbf_s / math.gamma(1.0 + 1.0 / cfg.shape)
        return scale * self.rng.weibull(cfg.shape, size=k)

    def _repair(self) -> float:
        if self.cfg.repair_dist == "fixed":
            return float(self.cfg.repair_s)
        return float(self.rng.exponential(self.cfg.repair_s)) if self.cfg.repair_s > 0 else 0.0

    # ------------------------------------------------------------------ engine work
    def _run_work(self, j: int, useful_left: float, rho: float) -> float:
        """Engine work (nominal s) of a run of job ``j`` with ``useful_left`` s to do after ``rho`` s of restart."""
        if self.regime[j] == 0:                     # checkpoint_restart
            tau = self.tau[j]
            nseg = math.ceil(useful_left / tau - 1e-12) if (useful_left > 0 and math.isfinite(tau)) else 1
            return rho + useful_left + max(nseg - 1, 0) * self.cfg.checkpoint_s
        return rho + useful_left

    def engine_work(self, runtime: np.ndarray) -> np.ndarray:
        w = np.asarray(runtime, dtype=np.float64).copy()
        ck = np.flatnonzero(self.regime == 0)
        if len(ck) and self.cfg.checkpoint_s > 0:
            tau = self.tau[ck]
            nseg = np.ceil(w[ck] / tau - 1e-12)
            w[ck] += np.maximum(nseg - 1, 0) * self.cfg.checkpoint_s
        return w

    def _recover(self, j: int, e: float) -> tuple[float, str]:
        """Account a failure at engine progress ``e`` of job ``j``'s current run; returns (engine work of
        the next run, requeue position)."""
        reg = self.regime[j]
        limit = self.cfg.max_requeues if reg == 2 else self.cfg.max_restarts
        if 0 <= limit < self.hits[j]:
            reg = 3                                  # out of requeues: the job fails
        W = self.work[j]
        U = W - self.committed[j]
        rho = self.rho[j]
        done_restart = min(e, rho)
        self.restart_total[j] += done_restart
        e1 = max(e - rho, 0.0)
        if reg == 0:                                 # checkpoint_restart
            tau, d = self.tau[j], self.cfg.checkpoint_s
            if math.isfinite(tau):
                nseg = math.ceil(U / tau - 1e-12) if U > 0 else 1
                k = min(math.floor(e1 / (tau + d)), max(nseg - 1, 0))
                gain = min(U, k * tau)
                overhead = k * d
            else:                                   # free checkpoints: everything done is kept
                gain, overhead = min(U, e1), 0.0
            self.lost_total[j] += e1 - gain - overhead
            self.committed[j] += gain
            self.rho[j] = self.cfg.restart_s
            return self._run_work(j, W - self.committed[j], self.rho[j]), self.cfg.requeue
        if reg == 1:                                 # fast_recovery
            s = self.step[j]
            gain = min(U, math.floor(e1 / s) * s)
            self.lost_total[j] += e1 - gain
            self.committed[j] += gain
            self.rho[j] = self.cfg.fast_recovery_s
            return self._run_work(j, W - self.committed[j], self.rho[j]), "front"
        if reg == 2:                                 # requeue from scratch
            self.lost_total[j] += e1
            self.committed[j] = 0.0
            self.rho[j] = 0.0
            return W, self.cfg.requeue
        self.lost_total[j] += e1                     # fail
        return 0.0, "none"

    # ------------------------------------------------------------------ events
    def next_event(self, now: float) -> float | None:
        return self.heap[0][0] if self.heap else None

    def on_event(self, now: float, control) -> None:
        heap = self.heap
        upn = self.upn
        hit_now: set[int] = set()
        while heap and heap[0][0] <= now:
            t, kind, node = heapq.heappop(heap)
            units = np.arange(node * upn, (node + 1) * upn, dtype=np.int64)
            if kind == 0:                            # repair
                control.bring_up(units)
                self.down_node_seconds += now - self.down_start[node]
                k = self._open_outage.pop(node)
                self.outages[k] = (node, self.outages[k][1], now)
                if not self.explicit:
                    heapq.heappush(heap, (now + float(self._uptimes(1)[0]), 1, node))
                continue
            if self.down_until[node] > now:          # a listed failure of a node already down
                self.ignored += 1
                continue
            self.node_failures += 1
            jobs = {control.job_on(int(u)) for u in units.tolist()} - {-1}
            for j in sorted(jobs):
                if j in hit_now:
                    continue
                hit_now.add(j)
                self.hits[j] += 1
                self.failures_hitting_jobs += 1
                new_work, where = self._recover(j, control.progress(j))
                self._interrupting.add(j)
                control.interrupt(j, new_work, where)
            rep = self._repair()
            self.down_until[node] = now + rep
            self.down_start[node] = now
            if rep > 0:
                self._open_outage[node] = len(self.outages)
                self.outages.append((node, now, math.inf))
                control.take_down(units, now + rep)
                heapq.heappush(heap, (now + rep, 0, node))
            elif not self.explicit:
                heapq.heappush(heap, (now + float(self._uptimes(1)[0]), 1, node))
        return None

    def on_finish(self, now: float, job: int) -> None:
        if job in self._interrupting:        # the engine taking an interrupted job off: accounted in _recover
            self._interrupting.discard(job)
        else:                                # a run that ended normally paid its whole restart
            self.restart_total[job] += self.rho[job]
        return None

    def finalize(self, end: float) -> None:
        # nodes still down at the end count up to the end of the run
        down = (self.down_until > end) & (self.down_start <= end)
        self.down_node_seconds += float(np.sum(end - self.down_start[down]))

    # ------------------------------------------------------------------ results
    def job_columns(self) -> dict[str, np.ndarray]:
        names = np.array(REGIMES, dtype=object)
        return {"recovery_regime": names[self.regime], "failures": self.hits,
                "checkpoint_interval_s": np.where(self.regime == 0, self.tau, np.nan),
                "restart_work_s": self.restart_total, "lost_work_s": self.lost_total}

    def summary(self) -> dict:
        cfg = self.cfg
        return {"failures": {
            "node_mtbf_s": cfg.node_mtbf_s, "dist": cfg.dist, "shape": cfg.shape,
            "repair_s": cfg.repair_s, "repair_dist": cfg.repair_dist, "requeue": cfg.requeue,
            "checkpoint_s": cfg.checkpoint_s, "restart_s": cfg.restart_s, "interval": cfg.interval,
            "fast_recovery_s": cfg.fast_recovery_s, "regimes": dict(cfg.regimes),
            "node_failures": self.node_failures, "job_interruptions": self.failures_hitting_jobs,
            "failures_ignored_node_down": self.ignored,
            "node_down_hours": round(self.down_node_seconds / 3600.0, 6),
            "explicit_events": self.explicit}}
