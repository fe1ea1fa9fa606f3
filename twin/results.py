"""A run's results from the engine's: the jobs table, summary.json, the series and the models' figures.

Called by `twin.run.execute` once the engine has run, with the run's `twin.plan.Plan`, its set-up
(`twin.run.Setup`: machine units, prepared jobs) and composition (`twin.run.Composition`: policy,
models, gates, placer). The allocation strategy (`twin.allocation`) adds its own columns, figures and
series at fixed places, so the column, key and series order of a run never depends on which code
path built it.
"""
from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from . import __version__
from .metrics import CONVENTIONS, bounded_slowdown, interval_average, sample_at, summarise
from .ranges import parse_ranges
from .workload import Workload, job_states


def jobs_frame(p, s, c, res) -> tuple[dict[str, Any], Any]:
    """The jobs table's columns (one row a job), with the models' columns and the allocation's; and the
    allocation's state for `summary` and `series`."""
    cfg, prep = p.config, c.prep
    wl = prep.workload
    wait = res.start - wl.submit
    runt = res.end - res.start
    bsld = bounded_slowdown(wait, runt, cfg.tau)
    df: dict[str, Any] = {                  # the jobs table's columns (RunResult.jobs makes the DataFrame)
        "job_id": wl.job_id, "submit": wl.submit, "start": res.start, "end": res.end,
        "wait": wait, "elapsed": runt, "procs": wl.procs, "timelimit": wl.requested_time,
        "estimate": prep.estimate, "bsld": bsld,
        "state": job_states(res.failed, res.killed, res.start, res.cancelled, getattr(res, "preempted", None)),
        "log_status": wl.status, "user": wl.user, "group": wl.group, "queue": wl.queue,
        "partition": wl.partition,
        "nodes": [x if x is not None else "" for x in res.nodes],
    }
    if res.cancel_time is not None:         # only runs where a model withdrew a waiting job (same bytes otherwise)
        df["cancel_time"] = res.cancel_time  # s; Slurm's End of a job cancelled while pending (control.cancel)
    if getattr(res, "preemptions", None) is not None:    # runs where the policy preempted a job (same bytes otherwise)
        df["preemptions"] = res.preemptions              # times the job was preempted (Slurm: requeued or ended)
        df["segments"] = res.interruptions + (np.isfinite(res.end) & ~res.failed)   # runs (segments) it held units
    if getattr(res, "dependencies", None) is not None:   # only runs whose workload has dependencies or array throttles
        df["eligible"] = res.dependencies.eligible              # s; Slurm's EligibleTime (twin.dependencies)
        df["pending_reason"] = res.dependencies.pending_reason  # why a job never started ("" otherwise)
    for m in c.models:
        for k, v in m.job_columns().items():
            df[k] = v
    for k, v in policy_job_columns(c.sched).items():   # the policy's own columns (none for most policies)
        df[k] = v
    if c.node_group is not None and "groups_spanned" not in df:
        from hpctwin.topology.placement import groups_spanned  # noqa: PLC0415
        df["groups_spanned"] = [groups_spanned(parse_ranges(x), c.node_group) if x else 0 for x in df["nodes"]]
    state = p.allocation.job_columns(df, wl, res, c.models, s.units)
    return df, state


def policy_job_columns(sched) -> dict[str, Any]:
    """Per-job columns a policy adds to the jobs table: ``job_columns()`` of the policy, or of the first
    policy it wraps (``inner``) that has one ({name: array over jobs}; e.g. the Slurm-like policy's GPUs
    and memory per job under node sharing). A policy without the method adds nothing."""
    seen = 0
    while sched is not None and seen < 16:
        fn = getattr(type(sched), "job_columns", None)
        if callable(fn):
            return dict(sched.job_columns())
        sched, seen = getattr(sched, "inner", None), seen + 1
    return {}


def summary(p, s, c, res, df: dict, state, wall0: float, sim_wall: float) -> dict:
    """summary.json: metrics, provenance, the policy's and gates' figures (``wall0``: perf_counter
    at the start of the run, s; ``sim_wall``: the engine's wall time, s)."""
    cfg, prep, sched, placer = p.config, c.prep, c.sched, c.placer
    wl, total, system = prep.workload, s.units.total, p.system
    if placer is not None and hasattr(placer, "describe"):
        summary_extra = {"placement": placer.describe()}
    else:
        summary_extra = {"placement": {"name": cfg.placement}}
    out = summarise(wl.submit, res.start, res.end, wl.procs, total, cfg.tau)
    out.update({
        "workload": wl.name, "workload_source": wl.source, "scheduler": sched.name,
        "unix_start_time": _unix_start(wl),
        "scheduler_params": sched.describe() if hasattr(sched, "describe") else {"name": sched.name},
        "machine_units": total, "machine_size_source": s.total_source,
        "system": system.name if system else None,
        "jobs_in_log": s.jobs_in_log, "jobs_simulated": len(wl),
        "jobs_skipped": prep.skipped, "jobs_killed_at_walltime": int(res.killed.sum()),
        "estimate_model": cfg.estimate, "kill_at_walltime": cfg.kill_at_walltime,
        "notes": prep.notes, "conventions": CONVENTIONS.format(tau=cfg.tau, window=" (no warm-up excluded)"),
        "events": res.events, "scheduling_passes": res.passes,
        "wall_seconds": round(time.perf_counter() - wall0, 3), "simulation_seconds": round(sim_wall, 3),
        "jobs_per_second": round(len(wl) / sim_wall, 1) if sim_wall > 0 else None,
        "code_version": __version__,
    })
    out.update(summary_extra)
    if getattr(res, "preemptions", None) is not None:    # the policy preempted jobs (EngineControl.preempt)
        out["preemptions"] = {"preemptions": int(res.preemptions.sum()),
                              "jobs_preempted": int((res.preemptions > 0).sum()),
                              "jobs_ended_by_preemption": int(res.preempted.sum())}
    if getattr(res, "dependencies", None) is not None:   # dependencies and array throttles (twin.dependencies)
        out["dependencies"] = res.dependencies.summary
    if c.gates:                               # starts each gate refused (res.refusals: with the rest of the pass)
        out["gates"] = {g.name: {**g.describe(), "refusals": int(res.refusals.get(g.name, 0))} for g in c.gates}
    if placer is not None and getattr(placer, "warning", None) and placer.warning():
        prep.notes.append(placer.warning())
    from .workload import job_accounting  # noqa: PLC0415
    out["accounting"] = job_accounting(s.jobs_in_log + sum(s.dropped.values()), s.dropped,
                                       prep.skipped, np.asarray(df["state"]))
    p.allocation.summary(out, state, s.units)
    note = low_load_note(out, s.units.total, s.units.per_node)
    if note:
        prep.notes.append(note)
    if "groups_spanned" in df:
        gs = np.asarray(df["groups_spanned"])[~np.isnan(res.start)]
        out["mean_groups_spanned"] = float(gs.mean()) if len(gs) else None
    return out


#: below this utilisation (fraction of unit-seconds) with no job waiting, a run "barely loads" its machine
LOW_LOAD_UTILISATION = 0.05


def low_load_note(out: dict, total: int, per_node: int = 1) -> str | None:
    """A note when the run barely loads its machine (utilisation below `LOW_LOAD_UTILISATION` and no
    job waited): policies cannot differ on such a run. Names ``--nodes`` and the present size
    (``total``: units; ``per_node``: units per node, GPUs under ``--allocation gpu``)."""
    u, w = out.get("utilisation"), out.get("max_wait_s")
    if u is None or w is None or not (u == u and w == w) or u >= LOW_LOAD_UTILISATION or w > 0 or total < 1:
        return None
    nodes = max(1, total // max(1, per_node))
    unit = "nodes" if per_node > 1 else "units"
    return (f"the run barely loads its machine: utilisation {100 * u:.2f} %, no job waited, so scheduling "
            f"policies cannot differ on it; a smaller machine loads it more (--nodes N, now {nodes:,} {unit})")


#: the sampling step of a run that does not give one (s): RAPS' and Frontier's telemetry interval
DEFAULT_SAMPLE_DT = 15.0
#: a run without physics models whose default-step series would hold more samples than this gets a wider
#: step (`series_step`): 2**17 keeps an 11-month log at 5 min (~96 k samples, ~0.3 MB of timeseries.h5)
SERIES_MAX_SAMPLES = 131_072
#: the wider steps, in order (s): 30 s, 1, 2, 5, 10, 15, 30 min, 1, 2, 3, 6, 12 h; beyond them whole days
SERIES_STEPS = (30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10800.0, 21600.0, 43200.0)


def series_step(sample_dt: float | None, t0: float, t1: float, models: bool) -> float:
    """The step (s) of a run's time series over ``[t0, t1)`` (log clock, s). A given ``sample_dt`` is
    kept. Without one: `DEFAULT_SAMPLE_DT`, unless the run has no physics model (the series are then only
    an output: the models' series, summaries and the cooling integration stay on 15 s) and that grid would
    hold more than `SERIES_MAX_SAMPLES` samples; then the first of `SERIES_STEPS` (else whole days) that
    keeps the series at most that long."""
    if sample_dt is not None:
        return float(sample_dt)
    span = max(0.0, float(t1) - float(t0))
    if models or span <= DEFAULT_SAMPLE_DT * SERIES_MAX_SAMPLES:
        return DEFAULT_SAMPLE_DT
    for step in SERIES_STEPS:
        if span <= step * SERIES_MAX_SAMPLES:
            return step
    return 86400.0 * math.ceil(span / (86400.0 * SERIES_MAX_SAMPLES))


def series_window(wl, res) -> tuple[float, float]:
    """The series' span (log clock, s): the first submit .. the last end (both 0 without jobs)."""
    t0 = float(wl.submit.min()) if len(wl) else 0.0
    t1 = float(np.nanmax(res.end)) if np.isfinite(res.end).any() else t0
    return t0, t1


def series(p, s, c, res, state, dt: float) -> dict[str, tuple[np.ndarray, str]]:
    """Time series on the grid of step ``dt`` (s; `series_step`): {name: (values, unit)}."""
    wl, total = c.prep.workload, s.units.total
    ts: dict[str, tuple[np.ndarray, str]] = {}
    if len(res.change_t):
        t0 = math.floor(float(wl.submit.min()) / dt) * dt if len(wl) else 0.0
        t1 = float(np.nanmax(res.end)) if np.isfinite(res.end).any() else t0
        grid = np.arange(max(1, int(math.ceil((t1 - t0) / dt))), dtype=np.float64)
        grid *= dt                               # t0 + dt * k in place: the same floats, no temporaries
        grid += t0
        ts["time"] = (grid, "s (start of each interval, log clock)")
        ts["utilisation"] = (interval_average(res.change_t, res.change_busy / total, grid, dt, dtype=np.float32),
                             "fraction of units busy, average over [t, t+dt)")
        ts["queue_length"] = (sample_at(res.change_t, res.change_queue, grid, dtype=np.int32),
                              "jobs waiting at time t")
        for m in c.models:
            ts.update(m.timeseries(grid, dt))
        p.allocation.series(ts, grid, state, s.units)
    return ts


def model_results(c, res, df: dict, out: dict) -> None:
    """The models' summary tables into ``out``, and recovery metrics when a model interrupted jobs."""
    wl = c.prep.workload
    for m in c.models:
        out.update(m.summary())
    from .models import entry_of  # noqa: PLC0415
    for m in c.models:
        if (e := entry_of(m)) is not None and e.interrupts:    # recovery metrics of the interrupted jobs
            out[m.name].update(failure_columns(df, res, wl.runtime, wl.procs))


def failure_columns(df, res, runtime: np.ndarray, procs: np.ndarray) -> dict:
    """Per-job recovery metrics of a run with failures (adds columns to ``df``; returns summary figures).

    ``queued_s``: time spent waiting over all (re)queueings; ``held_s``: wall time holding units over
    all runs; ``work_done_s``: engine work over all runs (nominal s: runtime plus checkpoint writes,
    restarts and lost work); ``useful_work_s``: the runtime for completed jobs, the work done minus
    restarts and lost work for jobs killed at their requested time, 0 for failed jobs; ``ettr`` =
    useful / engine work (effective training time ratio); ``lost_unit_hours`` = held x units x (1 -
    ettr) / 3600 (exact when the job's rate was constant); ``lost_energy_j`` = the job's energy x (1 -
    ettr) when the power model ran. Goodput = sum(units x held x ettr) / sum(units x held).
    """
    work_done = res.work_done
    useful = np.where(np.isnan(res.start), 0.0, runtime)
    if "lost_work_s" in df:                    # ``df``: a DataFrame or the {name: column} table
        partial = np.maximum(work_done - np.asarray(df["restart_work_s"]) - np.asarray(df["lost_work_s"]), 0.0)
        useful = np.where(res.killed, np.minimum(partial, runtime), useful)
    useful = np.where(res.failed, 0.0, useful)
    with np.errstate(invalid="ignore", divide="ignore"):
        ettr = np.where(work_done > 0, np.minimum(useful / work_done, 1.0), np.nan)
    df["queued_s"] = res.queued
    df["held_s"] = res.held
    df["work_done_s"] = work_done
    df["useful_work_s"] = useful
    df["ettr"] = ettr
    lost_frac = np.where(np.isnan(ettr), 0.0, 1.0 - ettr)
    df["lost_unit_hours"] = res.held * procs * lost_frac / 3600.0
    out = {}
    if "energy_j" in df:
        e = np.asarray(df["energy_j"], dtype=np.float64)
        df["lost_energy_j"] = np.where(np.isnan(e), 0.0, e) * lost_frac
        out["lost_energy_kwh"] = float(np.nansum(np.asarray(df["lost_energy_j"])) / 3.6e6)
    area = res.held * procs
    out.update({
        "goodput": float(np.sum(area * np.where(np.isnan(ettr), 0.0, ettr)) / area.sum()) if area.sum() > 0 else None,
        "lost_unit_hours": float(np.nansum(np.asarray(df["lost_unit_hours"]))),
        "jobs_interrupted": int((res.interruptions > 0).sum()),
        "interruptions": int(res.interruptions.sum()),
        "jobs_failed": int(res.failed.sum()),
        "mean_queued_s": float(np.nanmean(res.queued[~np.isnan(res.start)])) if (~np.isnan(res.start)).any() else None,
    })
    return out


def _unix_start(wl: Workload) -> float | None:
    v = wl.header.get("UnixStartTime")
    try:
        return float(str(v).split()[0]) if v is not None else None
    except ValueError:
        return None
