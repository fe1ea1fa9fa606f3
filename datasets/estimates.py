"""Runtime-estimate models for what-if runs: what the scheduler believes a job will take.

`estimate_model(name, workload, seed)` is called by `twin.run.prepare` for every ``--estimate`` name
other than ``requested`` (the log's requested time) and ``exact`` (the runtime itself). It returns one
estimate per job in seconds, every value finite and > 0, in the workload's row order. The kill limit
of a job stays the user's requested time: these models only change what schedulers plan with.

Models (names as given to ``--estimate``):

* ``f-badness:F`` (e.g. ``f-badness:3``): the estimate is uniform in ``[r, (F+1) r]`` where ``r`` is
  the run length the job will have (its runtime, cut at its requested time when it has one, because
  the engine kills it there). Mu'alem and Feitelson, "Utilization, predictability, workloads, and
  user runtime estimates in scheduling the IBM SP2 with backfilling", IEEE TPDS 12(6), 2001 (the
  "f-model"); F = 0 is exact.
* ``tsafrir``: Tsafrir's modal model of user estimates (D. Tsafrir, Y. Etsion, D. G. Feitelson,
  "Modeling user runtime estimates", JSSPP 2005): a handful of popular round values hold most jobs,
  every estimate >= the runtime. Implemented by `datasets.synthetic.tsafrir_estimates`; the maximal
  estimate is the log's largest requested time (the site limit) rounded up to a whole hour, at
  least 2 h and at least the longest run length.
* ``user-average``: the static form of Tsafrir, Etsion and Feitelson's predictor (IEEE TPDS 18(6),
  2007, "Backfilling using system-generated predictions rather than user runtime estimates"): the
  average runtime of the same user's last two jobs that had *finished in the original log* when
  this job was submitted (finish = submit + recorded wait + runtime, from the SWF ``wait`` field);
  capped by the job's requested time; the requested time (or the runtime when there is none) when
  the user has fewer than two finished jobs. It needs user ids and recorded waits: a log without
  them raises `EstimateError` before any run starts. For the *online* predictor, which learns from
  the jobs that finish in the simulated schedule, use ``--scheduler easy-pred`` (see
  `schedulers.predictive`).

Randomness: every model that draws is seeded from the run seed through a named stream
(`twin.model_api.seeded_rng(seed, "estimate.<model>")`), so the same config gives the same bytes.
"""
from __future__ import annotations

import math

import numpy as np

from hpctwin.twin.model_api import seeded_rng
from hpctwin.twin.workload import Workload

#: names this module answers to (``requested`` and ``exact`` are handled by `twin.run.prepare`)
MODELS = ("f-badness:F", "tsafrir", "user-average")


class EstimateError(ValueError):
    """An unknown estimate model, a bad parameter, or a workload the model cannot serve."""


def run_length(workload: Workload) -> np.ndarray:
    """The length (s) each job will run: its runtime, cut at its requested time when it has one."""
    req = workload.requested_time
    has_req = np.isfinite(req) & (req > 0)
    return np.where(has_req, np.minimum(workload.runtime, np.where(has_req, req, 0.0)), workload.runtime)


def f_badness(workload: Workload, f: float, rng: np.random.Generator) -> np.ndarray:
    """Estimates uniform in ``[r, (f+1) r]`` (s), ``r`` = `run_length`."""
    if not (math.isfinite(f) and f >= 0):
        raise EstimateError(f"estimate model f-badness: F must be a finite number >= 0, got {f!r}")
    r = run_length(workload)
    return r * (1.0 + f * rng.random(len(r)))


def tsafrir_modal(workload: Workload, rng: np.random.Generator) -> np.ndarray:
    """Tsafrir's modal user-estimate model (s), every estimate >= the job's run length."""
    from hpctwin.datasets.synthetic import tsafrir_estimates  # noqa: PLC0415

    r = run_length(workload)
    req = workload.requested_time
    finite = req[np.isfinite(req) & (req > 0)]
    site_max = float(finite.max()) if len(finite) else 0.0
    top = max(site_max, float(r.max()) if len(r) else 0.0, 7200.0)
    max_est = int(math.ceil(top / 3600.0) * 3600)
    return tsafrir_estimates(r, rng, max_est)


def user_average(workload: Workload) -> np.ndarray:
    """Static user-average predictor (s) over the jobs finished in the original log at submit time."""
    n = len(workload)
    user = workload.user
    if n and np.all(user < 0):
        raise EstimateError(f"estimate model user-average: workload {workload.name!r} has no user ids "
                            "(SWF field 12 is -1 everywhere): no user history to predict from")
    wait = workload.columns.get("wait_recorded")
    if wait is None or (n and np.all(np.asarray(wait, dtype=float) < 0)):
        raise EstimateError(f"estimate model user-average: workload {workload.name!r} has no recorded "
                            "waits (SWF field 3), so when each job finished in the original system is "
                            "unknown; use --scheduler easy-pred, which learns online from the simulated "
                            "schedule")
    wait = np.asarray(wait, dtype=float)
    runtime = workload.runtime
    req = workload.requested_time
    has_req = np.isfinite(req) & (req > 0)
    fallback = np.where(has_req, req, runtime)
    out = fallback.astype(float).copy()
    finish = workload.submit + np.where(wait >= 0, wait, np.inf) + runtime
    for u in np.unique(user[user >= 0]):
        idx = np.flatnonzero(user == u)
        fin_order = idx[np.argsort(finish[idx], kind="stable")]
        fin_t = finish[fin_order]
        fin_r = runtime[fin_order]
        # k = number of this user's jobs finished at or before each job's submit time
        k = np.searchsorted(fin_t, workload.submit[idx], side="right")
        ok = k >= 2
        if ok.any():
            kk = k[ok]
            avg = 0.5 * (fin_r[kk - 1] + fin_r[kk - 2])
            out[idx[ok]] = avg
    out = np.where(has_req, np.minimum(out, np.where(has_req, req, np.inf)), out)
    return out


def parse_name(name: str) -> tuple[str, dict]:
    """``"f-badness:3"`` -> ("f-badness", {"f": 3.0}); raises `EstimateError` for unknown names."""
    base, _, arg = name.partition(":")
    if base == "f-badness":
        if not arg:
            raise EstimateError("estimate model f-badness needs its factor, e.g. --estimate f-badness:3")
        a = arg.removeprefix("f=")
        try:
            f = float(a)
        except ValueError:
            raise EstimateError(f"estimate model {name!r}: F={a!r} is not a number") from None
        if not (math.isfinite(f) and f >= 0):
            raise EstimateError(f"estimate model {name!r}: F must be a finite number >= 0")
        return base, {"f": f}
    if base in ("tsafrir", "user-average") and not arg:
        return base, {}
    raise EstimateError(f"unknown estimate model {name!r}; known: requested, exact, "
                        f"{', '.join(MODELS)}")


def estimate_model(name: str, workload: Workload, seed: int) -> np.ndarray:
    """Estimates (s, one per job of ``workload``, finite and > 0) of the named model.

    ``seed`` is the run seed; each model draws from its own named stream of it.
    """
    base, params = parse_name(name)
    if base == "f-badness":
        est = f_badness(workload, params["f"], seeded_rng(seed, "estimate.f-badness"))
    elif base == "tsafrir":
        est = tsafrir_modal(workload, seeded_rng(seed, "estimate.tsafrir"))
    else:
        est = user_average(workload)
    est = np.asarray(est, dtype=np.float64)
    bad = ~(np.isfinite(est) & (est > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise EstimateError(f"estimate model {name!r}: job {int(workload.job_id[i])} got estimate {est[i]!r} "
                            "(runtime <= 0 in the log?)")
    return est
