"""What-if: placement of LLM training jobs on a DGX-H100 fat-tree and on Frontier, with node failures
injected into the event simulation and two recovery regimes.

For each machine (default ``dgx-h100``: 128 nodes x 8 H100, leaf/spine InfiniBand; ``frontier``: 9,408
nodes x 4 MI250X, Slingshot Dragonfly) a synthetic LLM-cluster workload (`datasets.llm_synthetic`,
AcmeTrace-calibrated, scaled to the machine's GPUs, whole-node allocation) is replayed with EASY
backfilling under each placement policy:

* ``first-fit``, ``group-packed``, ``spread`` (`topology.placement`), EASY picks the jobs;
* ``llm``: `schedulers.llm.LLMScheduler` over EASY with `topology.llm_placement.LLMPlacer`;
* ``llm-maxgroups``: the same with every training job limited to the fewest groups it can span
  (``max_groups = "min"``: 1 for a job that fits in a group) and a 30-minute maximum extra wait
  (Slurm ``--switches=N@30:00``).

`topology.llm_iteration.LLMIterationModel` stretches every training job by its placement's
iteration slowdown (the workload's runtime is the runtime at the ideal placement). Jobs are not
killed at their requested time here (the stretch and the recovery overheads would otherwise turn
into kills).

**Failures are injected into the engine** (`twin.failures.FailureModel`): every node fails as a
seeded Poisson process with per-node MTBF M (default: the Llama 3 anchor, 419 interruptions in 54
days on 2,048 8-GPU nodes = 263.9 days per node, and a 10x harsher 26.4 days; the same per-node
MTBF is assumed for a Frontier node), is down for a 4 h repair (`twin.failures.DEFAULT_REPAIR_S`,
an assumption) and interrupts the jobs on it. The failure times depend only on the seed and M
(not on the policy or regime), so every policy and regime of one (machine, M) faces the same node
failures (common random numbers), counted up to the end of each run (its last job's end, so the
counts differ a little between runs). The regime of the training classes (``llm_pretrain``,
``llm_finetune``, via ``FailureConfig.regimes``) is one of

* ``checkpoint_restart``: checkpoint 120 s, restart 600 s (`twin.failures` defaults, assumptions:
  synchronous checkpoint of a large model to a parallel file system, and re-queue + reload),
  interval = Daly's optimum for the job's MTBF M / nodes; the work since the last checkpoint is
  lost and the job goes back to the queue's front (``--requeue back`` for the back; the option
  also places the requeued non-training jobs, as ``FailureConfig.requeue`` covers both);
* ``fast_recovery``: checkpoint-free, the job loses at most one iteration (its ideal iteration
  time from `topology.llm_iteration`, workload column ``iteration_s``) and pays 150 s
  (FlashRecovery's figure on 4,800 devices), restarting at once when spare nodes are free.

Other classes keep `twin.failures.DEFAULT_REGIMES`: ``llm_infer_service`` uses fast recovery (a
replica restarts elsewhere), ``debug`` and ``llm_eval`` are requeued from scratch (at most 5 times,
Slurm's ``MaxBatchRequeue``; then they end as failed). A baseline without failures (regime
``none``) is run for each policy.

Analytic cross-check: for the same training jobs, ``model_goodput``/``model_mean_ettr`` are the
expected values of Daly's renewal model (`twin.resilience`; Daly 2006 eq. 20 applied segment by
segment, which is exact for the engine's dynamics: no checkpoint after the last segment, no restart
before the first run, a failure during a restart restarts it, exponential failures at the job's
rate nodes / M, all times stretched by the job's placement rate). The engine's goodput is one
sample of a random process, so it scatters around the model (a handful of failures hit a 128-node
machine in two weeks at the Llama 3 MTBF); with many failures they agree within their sampling
error. Compare goodputs: ``model_mean_ettr`` is the mean of W / E[T], below the engine's mean of
W / T by Jensen's inequality.

Metrics per (machine, policy, regime, M): mean wait (first start - submit, s) and mean bounded
slowdown (tau = 10 s; run = last end - first start, so requeue waits count in the slowdown), mean
iteration slowdown and groups spanned (training jobs, last placement), node failures, job
interruptions (all jobs / training jobs), goodput = sum(GPUs x held x ETTR) / sum(GPUs x held) over
the training jobs (GPUs held = nodes x GPUs per node, whole-node allocation; ETTR = useful / engine
work, `twin.run.failure_columns`), mean training ETTR, lost GPU-hours (all jobs: GPUs held x held
time x (1 - ETTR)), the energy of lost work (all jobs: the job's node energy from the power model x
(1 - ETTR), `power.model.PowerModel`, when ``--power on``; else GPU-only: lost GPU-hours x GPU
maximum power x the class's ``gpu_util``), requeue waits (queue time after interruptions, total
hours and mean per interruption), jobs ended as failed, deferrals and relaxed jobs of
``llm-maxgroups``, and the engine's wall time. ``goodput_vs_size.png``: goodput per job-size bin
(GPUs held, [g, 2g)) of the engine's training jobs (``llm`` policy, one panel per machine) for each
regime and M (markers), and the model's expected goodput of the same jobs (lines).

Default scale: ``dgx-h100`` 14 days (about 22,000 jobs), ``frontier`` 0.5 day (about 30,000 jobs)
(``--days`` sets both); both machines at full size, with the power model (node power and losses,
no cooling plant) on both; each run lasts until its last job ends (the longest jobs run for days
after the submission window). The runs go to ``--workers`` processes (default 2): 50 runs in about
2 minutes on a 2-core machine. The synthetic workload (a Seren-like arrival rate per GPU, jobs of
at most 1,024 GPUs) loads Frontier lightly: no queue forms there (waits 0, bsld 1), so on Frontier
the policies differ in iteration slowdown and groups spanned and the regimes in goodput, while
waits and requeue waits are informative on ``dgx-h100``.

Usage: ``python -m hpctwin.experiments.llm_placement [--system dgx-h100 --system frontier] [--days D] [--out DIR]``
(options: the vocabulary of ``docs/experiments.md``; ``--systems`` is a deprecated alias of ``--system``)
(``--out`` is checked before the first run and written atomically: it must not exist, be empty, or be a
folder hpctwin wrote, replaced only with ``--force``).
"""
from __future__ import annotations

import math
import os
import time
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from hpctwin.experiments import cli
from hpctwin.experiments.tables import staged_output, write_table_files
from hpctwin.twin.failures import (
    DEFAULT_CHECKPOINT_S,
    DEFAULT_REGIMES,
    DEFAULT_RESTART_S,
    FailureConfig,
)
from hpctwin.twin.resilience import DAY, FLASHRECOVERY_RECOVERY_S, LLAMA3_NODE_MTBF_S

POLICIES = ("first-fit", "group-packed", "spread", "llm", "llm-maxgroups")
REGIMES = ("checkpoint_restart", "fast_recovery")
#: checkpoint write and restart costs (s) of the checkpoint/restart regime (twin.failures defaults:
#: assumptions, see its docstring)
CHECKPOINT_COST_S = DEFAULT_CHECKPOINT_S
RESTART_S = DEFAULT_RESTART_S
TRAINING = ("llm_pretrain", "llm_finetune")
#: default days of workload per machine (sized for a few minutes on 2 cores; see the docstring)
DEFAULT_DAYS = {"dgx-h100": 14.0, "frontier": 0.5}
#: default per-node MTBFs (days): the Llama 3 anchor and a 10x harsher value
DEFAULT_MTBF_DAYS = (LLAMA3_NODE_MTBF_S / DAY, LLAMA3_NODE_MTBF_S / DAY / 10.0)
#: fast-recovery step when a training job has no iteration time (s; twin.failures.DEFAULT_STEP_S)
FALLBACK_STEP_S = 10.0


# ---------------------------------------------------------------------------------- workload
@lru_cache(maxsize=4)
def machine_workload(system: str, days: float, seed: int):
    """(workload with an ``iteration_s`` column, SystemSpec, node -> group map) for ``system``.

    ``iteration_s``: the ideal iteration time (s) of each training job (its shape on the first
    nodes of an empty machine, `topology.llm_iteration.ideal_nodes`), the step fast recovery loses;
    NaN for the other classes. Cached per process (the workers of a grid rebuild it once).
    """
    from hpctwin.datasets.llm_synthetic import llm_workload  # noqa: PLC0415
    from hpctwin.topology.llm_iteration import (  # noqa: PLC0415
        SYSTEM_GPU,
        ideal_nodes,
        iteration_time,
        network_costs,
        shape_of,
    )
    from hpctwin.topology.presets import node_groups  # noqa: PLC0415
    from hpctwin.twin.system import load_system  # noqa: PLC0415

    spec = load_system(system)
    gpn = spec.gpus_per_node or 8
    wl = llm_workload(days, spec.nodes * gpn, seed=seed, gpus_per_node=gpn)
    groups = node_groups(spec.network, spec.nodes, source=f"system {system} [network]")
    costs = network_costs(spec.network, spec.nodes, gpn, SYSTEM_GPU.get(spec.name, "H100"))
    it = np.full(len(wl), np.nan)
    cache: dict = {}
    for j in np.flatnonzero(np.isin(wl.columns["job_class"], TRAINING)):
        shape = shape_of(wl.columns, int(j))
        if shape is None:
            continue
        key = (shape, int(wl.procs[j]))
        if key not in cache:
            cache[key] = iteration_time(shape, ideal_nodes(int(wl.procs[j])), groups, costs).total
        it[j] = cache[key]
    wl.columns["iteration_s"] = it
    return wl, spec, groups


def failure_config(regime: str, node_mtbf_s: float, *, requeue: str = "front", events=None) -> FailureConfig:
    """The `FailureConfig` of one grid point: ``regime`` for the training classes, the defaults of
    `twin.failures.DEFAULT_REGIMES` for every other class."""
    if regime not in REGIMES:
        raise ValueError(f"unknown regime {regime!r}; known: {', '.join(REGIMES)}")
    regimes = dict(DEFAULT_REGIMES)
    regimes.update({c: regime for c in TRAINING})
    cfg = FailureConfig(node_mtbf_s=float(node_mtbf_s), regimes=regimes, requeue=requeue,
                        checkpoint_s=CHECKPOINT_COST_S, restart_s=RESTART_S,
                        fast_recovery_s=FLASHRECOVERY_RECOVERY_S, step_s=FALLBACK_STEP_S, events=events)
    cfg.check("experiments.llm_placement failure_config")
    return cfg


# ---------------------------------------------------------------------------------- one run
def simulate_point(system: str, policy: str, wl, *, regime: str | None = None, node_mtbf_s: float | None = None,
                   seed: int = 0, power: bool = True, failures: FailureConfig | None = None,
                   spec=None, groups=None) -> tuple[pd.DataFrame, dict]:
    """One engine run of ``wl`` on ``system`` with ``policy``; failures injected unless ``regime`` is
    None (or give ``failures`` explicitly). Returns a per-job frame and run facts.

    Frame columns: ``job_id submit start end nodes gpus job_class gpu_util iter_time_s iter_slowdown
    groups_spanned wait run bsld`` and, with failures, ``failures held_s queued_s work_done_s
    useful_work_s ettr lost_unit_hours restart_work_s lost_work_s`` (`twin.run.failure_columns`),
    ``energy_j``/``lost_energy_j`` with the power model. Times in s, energy in J.
    """
    from hpctwin.power.model import PowerModel  # noqa: PLC0415
    from hpctwin.schedulers.llm import LLMScheduler  # noqa: PLC0415
    from hpctwin.schedulers.registry import make_scheduler  # noqa: PLC0415
    from hpctwin.topology.llm_iteration import LLMIterationModel  # noqa: PLC0415
    from hpctwin.topology.placement import make_placer  # noqa: PLC0415
    from hpctwin.topology.presets import node_groups  # noqa: PLC0415
    from hpctwin.twin.failures import FailureModel  # noqa: PLC0415
    from hpctwin.twin.metrics import bounded_slowdown  # noqa: PLC0415
    from hpctwin.twin.model_api import ModelContext, seeded_rng  # noqa: PLC0415
    from hpctwin.twin.run import failure_columns, job_table, prepare  # noqa: PLC0415
    from hpctwin.twin.simulation import Simulation  # noqa: PLC0415
    from hpctwin.twin.system import load_system  # noqa: PLC0415

    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")
    spec = spec or load_system(system)
    total = spec.nodes
    gpn = spec.gpus_per_node or 8
    if groups is None:
        groups = node_groups(spec.network, total, source=f"system {system} [network]")
    prep = prepare(wl, total, f"system {system}", kill_at_walltime=False)
    jt = job_table(prep)
    placer = None
    if policy.startswith("llm"):
        sched = LLMScheduler(inner="easy", node_group=groups,
                             max_groups="min" if policy == "llm-maxgroups" else None, max_group_wait=1800.0)
    else:
        sched = make_scheduler("easy")
        placer = make_placer(policy)
        placer.bind(total, groups, seeded_rng(seed, "placement"), jt)
    itm = LLMIterationModel(node_group=groups)
    models: list = [itm]
    pm = None
    if power and spec.power:
        pm = PowerModel(spec, cooling=False)
        models.append(pm)
    fm = None
    if failures is None and regime is not None:
        if node_mtbf_s is None:
            raise ValueError("simulate_point: give node_mtbf_s with regime")
        failures = failure_config(regime, node_mtbf_s)
    if failures is not None:
        fm = FailureModel(failures)
        models.append(fm)
    ctx = ModelContext(n_nodes=total, jobs=jt, runtime=prep.workload.runtime, system=spec, seed=seed)
    t0 = time.perf_counter()
    res = Simulation(jt, prep.workload.runtime, prep.kill_limit, sched, total, placer=placer, models=models,
                     context=ctx).run()
    wall = time.perf_counter() - t0
    w = prep.workload
    cols = itm.job_columns()
    df = pd.DataFrame({"job_id": w.job_id, "submit": w.submit, "start": res.start, "end": res.end,
                       "nodes": w.procs, "gpus": w.columns["gpus"], "job_class": w.columns["job_class"],
                       "gpu_util": w.columns["gpu_util"], "runtime": w.runtime,
                       "iteration_s": w.columns.get("iteration_s", np.nan),
                       "iter_time_s": cols["iter_time_s"], "iter_slowdown": cols["iter_slowdown"],
                       "groups_spanned": cols["llm_groups_spanned"]})
    df["wait"] = df["start"] - df["submit"]
    df["elapsed"] = df["end"] - df["start"]
    df["bsld"] = bounded_slowdown(df["wait"].to_numpy(), df["elapsed"].to_numpy(), 10.0)
    if pm is not None:
        for k, v in pm.job_columns().items():
            df[k] = v
    facts = {"sim_seconds": wall, "jobs": len(w), "gpu_max_w": float(spec.power.get("gpu_max_w", np.nan)),
             "gpus_per_node": gpn, "nodes": total, "events": res.events,
             "deferred": getattr(sched, "deferred", 0), "relaxed": getattr(sched, "relaxed", 0)}
    if fm is not None:
        for k, v in fm.job_columns().items():
            df[k] = v
        facts.update(failure_columns(df, res, w.runtime, w.procs))
        facts["node_failures"] = fm.node_failures
        facts["interruptions_model"] = fm.failures_hitting_jobs
        facts["checkpoint_s"], facts["restart_s"] = fm.cfg.checkpoint_s, fm.cfg.restart_s
        facts["fast_recovery_s"], facts["node_mtbf_s"] = fm.cfg.fast_recovery_s, fm.cfg.node_mtbf_s
        facts["interval"] = fm.cfg.interval
        df["interruptions"] = res.interruptions
        df["failed"] = res.failed
    return df, facts


# ---------------------------------------------------------------------------------- analytic model
def expected_engine_ettr(work: float, nodes: int, node_mtbf_s: float, regime: str, *, rate: float = 1.0,
                         step: float = FALLBACK_STEP_S, checkpoint_s: float = CHECKPOINT_COST_S,
                         restart_s: float = RESTART_S, recovery_s: float = FLASHRECOVERY_RECOVERY_S,
                         interval: float | None = None) -> float:
    """Expected ETTR (useful / engine time) of one job under the engine's recovery dynamics.

    Daly's renewal model: a segment of ``s`` s (wall) after which progress is safe takes
    ``M exp(R / M) (exp(s / M) - 1)`` s in expectation (failures at rate 1/M during work and
    restarts, restart ``R`` after each failure, none before the first run); Daly's eq. 20 is the sum
    over ``W / tau`` equal segments. Here the segments are the engine's: ``ceil(W / tau)`` segments,
    ``tau + delta`` each and the last (the remainder) without a checkpoint (checkpoint_restart,
    ``tau`` = Daly's interval for M = node MTBF / nodes unless ``interval``), or steps of ``step`` s
    with delta = 0 and R = ``recovery_s`` (fast_recovery). ``work`` is nominal s; every engine
    quantity is stretched by 1 / ``rate`` in wall time (the job's placement rate).
    """
    from hpctwin.twin.resilience import daly_interval  # noqa: PLC0415
    if not (work > 0 and nodes >= 1 and node_mtbf_s > 0 and rate > 0):
        raise ValueError(f"expected_engine_ettr: need work > 0, nodes >= 1, node_mtbf_s > 0, rate > 0 "
                         f"(got {work}, {nodes}, {node_mtbf_s}, {rate})")
    m = node_mtbf_s / nodes
    if regime == "checkpoint_restart":
        tau = float(interval) if interval is not None else daly_interval(checkpoint_s, m)
        d, r = checkpoint_s, restart_s
    elif regime == "fast_recovery":
        tau, d, r = float(step), 0.0, recovery_s
    else:
        raise ValueError(f"unknown regime {regime!r}; known: {', '.join(REGIMES)}")
    nseg = max(1, math.ceil(work / tau - 1e-12))
    last = work - (nseg - 1) * tau
    mw = m * rate                       # the MTBF in nominal (engine-work) seconds
    expected = mw * math.exp(r / mw) * ((nseg - 1) * math.expm1((tau + d) / mw) + math.expm1(last / mw))
    return work / expected


def model_job_ettr(tr: pd.DataFrame, regime: str, node_mtbf_s: float, checkpoint_s: float = CHECKPOINT_COST_S,
                   restart_s: float = RESTART_S,
                   recovery_s: float = FLASHRECOVERY_RECOVERY_S) -> tuple[np.ndarray, np.ndarray]:
    """(expected ETTR, placement rate) of every row of ``tr`` (`expected_engine_ettr` with the job's
    runtime, nodes, last placement rate = 1 / iteration slowdown, and ideal iteration time)."""
    ettr = np.empty(len(tr))
    rates = np.empty(len(tr))
    for k, row in enumerate(tr.itertuples(index=False)):
        sl = float(row.iter_slowdown)
        rate = 1.0 / sl if math.isfinite(sl) and sl > 0 else 1.0
        step = float(row.iteration_s) if math.isfinite(row.iteration_s) and row.iteration_s > 0 else FALLBACK_STEP_S
        ettr[k] = expected_engine_ettr(float(row.runtime), int(row.nodes), node_mtbf_s, regime, rate=rate, step=step,
                                       checkpoint_s=checkpoint_s, restart_s=restart_s, recovery_s=recovery_s)
        rates[k] = rate
    return ettr, rates


def model_recovery(df: pd.DataFrame, regime: str, node_mtbf_s: float, gpus_per_node: int,
                   checkpoint_s: float = CHECKPOINT_COST_S, restart_s: float = RESTART_S,
                   recovery_s: float = FLASHRECOVERY_RECOVERY_S) -> dict:
    """Analytic expected goodput and mean ETTR of the training jobs of ``df`` (`model_job_ettr`),
    weighted like the engine's goodput: GPUs held x expected wall time, so goodput = sum(GPUs x
    useful wall time) / sum(GPUs x expected wall time). The mean ETTR is the mean of W / E[T] per
    job, which is at most the engine's mean of W / T (Jensen): compare goodputs, not mean ETTRs."""
    tr = df[df["job_class"].isin(TRAINING) & df["start"].notna()]
    if not len(tr):
        return {"model_goodput": np.nan, "model_mean_ettr": np.nan}
    ettr, rate = model_job_ettr(tr, regime, node_mtbf_s, checkpoint_s, restart_s, recovery_s)
    useful = tr["nodes"].to_numpy() * gpus_per_node * tr["runtime"].to_numpy() / rate
    return {"model_goodput": float(useful.sum() / (useful / ettr).sum()), "model_mean_ettr": float(ettr.mean())}


# ---------------------------------------------------------------------------------- metrics
def point_metrics(df: pd.DataFrame, facts: dict, regime: str | None, node_mtbf_s: float | None) -> dict:
    """One results row (see the module docstring for the definitions)."""
    ran = df["start"].notna()
    tr = ran & df["job_class"].isin(TRAINING)
    gpn = facts["gpus_per_node"]
    row = {"jobs": int(ran.sum()), "training_jobs": int(tr.sum()),
           "mean_wait_s": float(df.loc[ran, "wait"].mean()), "mean_bsld": float(df.loc[ran, "bsld"].mean()),
           "mean_iter_slowdown": float(df.loc[tr, "iter_slowdown"].mean()),
           "mean_groups_spanned": float(df.loc[tr, "groups_spanned"].mean())}
    keys = ("node_failures", "interruptions", "training_interruptions", "goodput", "model_goodput",
            "mean_ettr", "model_mean_ettr", "lost_gpu_hours", "lost_energy_kwh", "requeue_wait_h",
            "mean_requeue_wait_s", "jobs_failed")
    if regime is None:
        row.update({k: np.nan for k in keys})
        row.update({"node_failures": 0, "interruptions": 0, "training_interruptions": 0, "goodput": 1.0,
                    "model_goodput": 1.0, "mean_ettr": 1.0, "model_mean_ettr": 1.0, "lost_gpu_hours": 0.0,
                    "lost_energy_kwh": 0.0, "requeue_wait_h": 0.0, "jobs_failed": 0})
    else:
        held_g = df["held_s"].to_numpy() * df["nodes"].to_numpy() * gpn
        ettr = df["ettr"].fillna(0.0).to_numpy()
        t = tr.to_numpy()
        lost_gh = float(df["lost_unit_hours"].sum() * gpn)
        if "lost_energy_j" in df.columns:
            lost_kwh = float(df["lost_energy_j"].sum() / 3.6e6)
        else:                                   # GPU-only estimate (no power model)
            util = df["gpu_util"].fillna(1.0).to_numpy()
            lost_kwh = float(np.sum(df["lost_unit_hours"].to_numpy() * gpn * util) * facts["gpu_max_w"] / 1000.0)
        requeue_wait = np.where(ran, df["queued_s"].to_numpy() - df["wait"].fillna(0.0).to_numpy(), 0.0)
        n_int = int(df["interruptions"].sum())
        row.update({"node_failures": int(facts["node_failures"]), "interruptions": n_int,
                    "training_interruptions": int(df.loc[tr, "interruptions"].sum()),
                    "goodput": float(np.sum(held_g[t] * ettr[t]) / np.sum(held_g[t])) if t.any() else np.nan,
                    "mean_ettr": float(df.loc[tr, "ettr"].mean()),
                    "lost_gpu_hours": lost_gh, "lost_energy_kwh": lost_kwh,
                    "requeue_wait_h": float(requeue_wait.sum() / 3600.0),
                    "mean_requeue_wait_s": float(requeue_wait.sum() / n_int) if n_int else np.nan,
                    "jobs_failed": int(df["failed"].sum())})
        row.update(model_recovery(df, regime, node_mtbf_s, gpn, facts["checkpoint_s"], facts["restart_s"],
                                  facts["fast_recovery_s"]))
    row.update({"deferrals": facts["deferred"], "relaxed_jobs": facts["relaxed"],
                "sim_seconds": round(facts["sim_seconds"], 2)})
    return row


def goodput_by_size(df: pd.DataFrame, facts: dict, regime: str, node_mtbf_s: float) -> pd.DataFrame:
    """Goodput of the training jobs per size bin (GPUs held, bins [g, 2g) with g a power of two):
    columns ``gpus`` (bin's lower edge), ``jobs``, ``goodput`` (engine) and ``model_goodput`` (the
    analytic expectation for the same jobs, `model_recovery`)."""
    gpn = facts["gpus_per_node"]
    tr = df[df["job_class"].isin(TRAINING) & df["start"].notna()]
    g = tr["nodes"].to_numpy() * gpn
    b = 2.0 ** np.floor(np.log2(g))
    held = tr["held_s"].to_numpy() * g
    e = tr["ettr"].fillna(0.0).to_numpy()
    me, rate = model_job_ettr(tr, regime, node_mtbf_s, facts["checkpoint_s"], facts["restart_s"],
                              facts["fast_recovery_s"])
    useful = g * tr["runtime"].to_numpy() / rate
    out = []
    for v in np.unique(b):
        m = b == v
        out.append({"gpus": float(v), "jobs": int(m.sum()), "goodput": float(np.sum(held[m] * e[m]) / np.sum(held[m])),
                    "model_goodput": float(useful[m].sum() / (useful[m] / me[m]).sum())})
    return pd.DataFrame(out, columns=["gpus", "jobs", "goodput", "model_goodput"])


# ---------------------------------------------------------------------------------- the grid
def _run_point(args: tuple) -> tuple[dict, pd.DataFrame | None]:
    system, days, seed, policy, regime, mtbf_days, power, requeue, keep_sizes = args
    wl, spec, groups = machine_workload(system, days, seed)
    fc = failure_config(regime, mtbf_days * DAY, requeue=requeue) if regime is not None else None
    df, facts = simulate_point(system, policy, wl, seed=seed, power=power, failures=fc, spec=spec, groups=groups)
    row = {"machine": system, "days": days, "policy": policy, "regime": regime or "none",
           "node_mtbf_days": mtbf_days if regime is not None else np.nan,
           **point_metrics(df, facts, regime, mtbf_days * DAY if regime is not None else None)}
    sizes = goodput_by_size(df, facts, regime, mtbf_days * DAY) if (keep_sizes and regime is not None) else None
    return row, sizes


def run_grid(systems, days: dict, mtbf_days, seed: int = 0, policies=POLICIES, regimes=REGIMES,
             power: bool = True, requeue: str = "front", workers: int = 1, baseline: bool = True,
             size_policy: str = "llm") -> tuple[pd.DataFrame, dict]:
    """Every (system, policy, regime, MTBF) point (plus a no-failure baseline per policy).

    Returns the results frame (one row a point, in grid order) and ``{(system, regime, mtbf_days):
    goodput-by-size frame}`` of ``size_policy``. ``workers`` > 1 runs the points in processes
    (`experiments.sweep.make_executor`); the rows do not depend on it.
    """
    from hpctwin.experiments.sweep import make_executor  # noqa: PLC0415
    pts = []
    for system in systems:
        for pol in policies:
            if baseline:
                pts.append((system, days[system], seed, pol, None, np.nan, power, requeue, False))
            for regime in regimes:
                for md in mtbf_days:
                    pts.append((system, days[system], seed, pol, regime, float(md), power, requeue, pol == size_policy))
    ex, label = make_executor("processes" if workers > 1 else "serial", workers)
    print(f"{len(pts)} engine runs on {label}", flush=True)
    results = []
    if ex is None:
        results = [_run_point(p) for p in pts]
        for p, (row, _) in zip(pts, results):
            _report(row)
    else:
        with ex:
            futs = [ex.submit(_run_point, p) for p in pts]
            for f in futs:
                results.append(f.result())
                _report(results[-1][0])
    rows = [r for r, _ in results]
    sizes = {(p[0], p[4], p[5]): s for p, (_, s) in zip(pts, results) if s is not None}
    return pd.DataFrame(rows), sizes


def _report(row: dict) -> None:
    extra = "" if row["regime"] == "none" else (f", {row['node_failures']} node failures, {row['interruptions']} "
                                                f"interruptions, goodput {row['goodput']:.4f} "
                                                f"(model {row['model_goodput']:.4f})")
    print(f"{row['machine']} {row['policy']} {row['regime']} MTBF {row['node_mtbf_days']:.3g} d: "
          f"{row['jobs']} jobs in {row['sim_seconds']:.1f} s{extra}", flush=True)


# ---------------------------------------------------------------------------------- plot
def plot_goodput(sizes: dict, systems, mtbf_days, path: Path, policy: str = "llm") -> None:
    """Goodput vs job size per regime and MTBF: the engine's training jobs (markers, per size bin) and
    the analytic expectation of Daly's renewal model for the same jobs (lines)."""
    from hpctwin.twin.plot import figure, save_png  # noqa: PLC0415
    fig, axes = figure(len(systems), 1, height_in=2.8 * len(systems))
    markers = ("o", "s", "^", "v")
    for ax, system in zip(axes[:, 0], systems):
        for k, md in enumerate(mtbf_days):
            for regime, color in zip(REGIMES, ("C0", "C1")):
                s = sizes.get((system, regime, float(md)))
                if s is None or not len(s):
                    continue
                ax.plot(s["gpus"], s["model_goodput"], ("-", "--", ":", "-.")[k % 4], color=color, lw=1,
                        label=f"model {regime}, MTBF {md:.3g} d")
                ax.scatter(s["gpus"], s["goodput"], s=np.clip(s["jobs"], 6, 60), marker=markers[k % 4],
                           facecolors="none" if regime == "fast_recovery" else color, edgecolors=color,
                           label=f"engine {regime}, MTBF {md:.3g} d")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("job size (GPUs held, bins [g, 2g))")
        ax.set_ylabel("goodput (useful / wall GPU-time)")
        ax.set_title(f"{system}, {policy} policy: engine (markers) vs Daly model (lines)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:                          # below the panels: never over the data
        fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=5)
    save_png(fig, path)


# ---------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = cli.parser("llm_placement", __doc__)
    cli.add_system(ap, ["dgx-h100", "frontier"])
    ap.add_argument("--days", type=float, default=None,
                    help="days of synthetic workload for every machine (default: "
                         + ", ".join(f"{k} {v:g}" for k, v in DEFAULT_DAYS.items()) + ")")
    ap.add_argument("--mtbf-days", nargs="+", type=float, default=cli.Defaults(f"{d:.4g}" for d in DEFAULT_MTBF_DAYS),
                    help="per-node MTBFs (days); default: the Llama 3 anchor and 10x harsher")
    ap.add_argument("--policies", nargs="+", default=cli.Defaults(POLICIES), choices=POLICIES,
                    help="placement policies")
    ap.add_argument("--regimes", nargs="+", default=cli.Defaults(REGIMES), choices=REGIMES,
                    help="recovery regimes of the training jobs")
    ap.add_argument("--requeue", choices=("front", "back"), default="front",
                    help="queue position of an interrupted checkpoint/restart job (and of the requeued "
                         "non-training jobs: FailureConfig.requeue covers both)")
    ap.add_argument("--power", choices=("on", "off"), default="on",
                    help="power model (energy of lost work from node power; off: GPU-only estimate)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the no-failure runs")
    cli.add_workers(ap, min(2, os.cpu_count() or 1))
    cli.add_seed(ap, "seed of the synthetic workload, the placements and the node failures")
    cli.add_out(ap, "whatif-llm-placement")
    a = ap.parse_args(argv)
    if isinstance(a.mtbf_days, cli.Defaults):
        a.mtbf_days = list(DEFAULT_MTBF_DAYS)
    a.systems = a.system
    days = {s: (a.days if a.days is not None else DEFAULT_DAYS.get(s, 3.0)) for s in a.systems}
    with staged_output("python -m hpctwin.experiments.llm_placement", a.out, a.force) as out:
        t0 = time.perf_counter()
        df, sizes = run_grid(a.systems, days, a.mtbf_days, a.seed, a.policies, a.regimes, a.power == "on",
                             a.requeue, a.workers, not a.no_baseline)
        elapsed = time.perf_counter() - t0
        df, conv = _write(a, days, df, sizes, out)
    _print(a, df, conv, elapsed)
    return 0


def _write(a, days: dict, df: pd.DataFrame, sizes: dict, out: Path) -> tuple[pd.DataFrame, str]:
    """timings.csv, the tables and the plot into the folder ``out``; returns the table and its conventions."""
    energy = ("energy of lost work = the job's node energy (power model, no cooling) x (1 - ETTR)"
              if a.power == "on"
              else "energy of lost work = lost GPU-hours x GPU max power x class gpu_util (GPU only)")
    conv = (f"Synthetic LLM-cluster workload (AcmeTrace Seren calibration, seed {a.seed}; days: "
            + ", ".join(f"{s} {d:g}" for s, d in days.items())
            + ") scaled to each machine's GPUs, whole-node allocation, EASY backfilling, requested times as "
            "estimates, no kill at walltime; training jobs stretched by the iteration-time model "
            "(topology.llm_iteration). Node failures INJECTED INTO THE ENGINE (twin.failures): Poisson per node "
            f"with the node MTBF of the row, repair 4 h, same failure times for every policy and regime of a machine "
            f"and MTBF; training jobs: checkpoint_restart (checkpoint {CHECKPOINT_COST_S:g} s, restart "
            f"{RESTART_S:g} s, Daly interval, requeue at the {a.requeue}) or fast_recovery (one ideal iteration "
            f"lost, {FLASHRECOVERY_RECOVERY_S:g} s); other classes: inference fast recovery, the rest requeued "
            "from scratch (<= 5 times); regime none = no failures. wait = first start - submit; bsld = "
            "max(1, (end - submit) / max(end - first start, 10 s)); iteration slowdown and groups spanned: "
            "training jobs, last placement; goodput = sum(GPUs held x held time x ETTR) / sum(GPUs held x held "
            "time) over training jobs, ETTR = useful / engine work; model goodput and model mean ETTR: Daly's "
            "renewal model for the same jobs (analytic expectation); lost GPU-hours and energy: all jobs, "
            f"{energy}; requeue waits: queue time after interruptions. MTBF anchor: Llama 3, 419 interruptions "
            "in 54 days on 16,384 GPUs = 263.9 days per 8-GPU node (also assumed per Frontier node).")
    # measured run times go to their own file, so results.csv is the same bytes for the same options
    keys = [c for c in ("machine", "policy", "regime", "node_mtbf_days") if c in df.columns]
    df[keys + ["sim_seconds"]].to_csv(out / "timings.csv", index=False)
    df = df.drop(columns="sim_seconds")
    write_table_files(df, out, "LLM placement and recovery what-if. " + conv, label="tab:llm-placement",
                      missing_note="{dash}: not applicable (no failures in regime none, or no interruption).")
    plot_goodput(sizes, a.systems, a.mtbf_days, out / "goodput_vs_size.png")
    return df, conv


def _print(a, df: pd.DataFrame, conv: str, elapsed: float) -> None:
    show = ["machine", "policy", "regime", "node_mtbf_days", "mean_wait_s", "mean_bsld", "mean_iter_slowdown",
            "mean_groups_spanned", "interruptions", "goodput", "model_goodput", "lost_gpu_hours",
            "lost_energy_kwh", "requeue_wait_h"]
    with pd.option_context("display.width", 250, "display.max_columns", 40):
        print(df[show].to_string(index=False))
    print(conv)
    print(f"{len(df)} engine runs in {elapsed:.1f} s ({a.workers} workers); "
          f"wrote {a.out}/results.csv, results.md, results.tex, goodput_vs_size.png, timings.csv")


if __name__ == "__main__":
    raise SystemExit(main())
