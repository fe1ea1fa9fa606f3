"""EASY backfilling with system-generated runtime predictions, and EASY++ (shortest job backfilled first).

The policies here are `schedulers.backfill.QueueScheduler` (FCFS order, EASY backfilling) with one
change: where EASY plans with each job's estimate, these plan with a *prediction* made when the job
is submitted, from what is known then (D. Tsafrir, Y. Etsion and D. G. Feitelson, "Backfilling using
system-generated predictions rather than user runtime estimates", IEEE TPDS 18(6):789-803, 2007):

* the reservation of the queue head (its shadow time) uses the running jobs' *predicted* ends;
* a job may backfill if it fits now and its predicted end is before the shadow time, or it needs
  no more than the extra units (`QueueScheduler._easy`, unchanged);
* the kill time stays the user's request (the engine's kill limit is never touched): predictions
  are capped at the user's estimate (``JobTable.estimate``, the requested time by default);
* **correction**: a running job still running at its predicted end has been under-predicted; at the
  next scheduling pass its prediction is raised (``tsafrir``: the original prediction plus 1 min,
  then 5 min, 15 min, 30 min, 1 h, 2 h, 5 h, 10 h, 20 h, 50 h, 100 h, as in the 2007 paper and
  the pyss simulator's ``tsafrir`` corrector; ``requested``: straight to the user's estimate;
  ``double``: twice the elapsed time), each capped at the user's estimate, until it lies in the
  future. Corrections applied at the pass are exactly what a timer at the predicted end would give,
  because predictions are only read during passes.
* **EASY++** (``sjbf=True``): the head is still the first job in FCFS order, but the jobs behind
  it are tried for backfilling in order of increasing prediction (shortest job backfilled first;
  ties by arrival).

Predictors (``predictor=``):

* ``user-average``: the average runtime of the same user's last two jobs that *finished in this
  simulation* before the job was submitted (learned online through ``on_finish``, the observed run
  length = finish - start); the user's estimate when the user has fewer than two finished jobs.
* ``gbm``: a gradient-boosted regression tree model (scikit-learn's
  ``HistGradientBoostingRegressor``) of log(run length), retrained online every ``retrain_every``
  finishes on the last ``window`` finished jobs, with features computed *at submit time* only:
  log requested time, log size, queue, partition, hour of day and day of week (log clock), and the
  user's history then (last runtime, average of the last two, mean log runtime, number of finished
  jobs, last runtime / its request). The job's own runtime is never a feature. Until
  ``min_train`` jobs have finished it falls back to ``user-average``. scikit-learn is imported
  only when this predictor is used.
* ``estimate``: the user's estimate itself (with ``sjbf=True`` this is plain EASY-SJBF).

Both learning predictors need user ids: on a workload without any (every ``user`` is -1) `bind`
raises `PredictorError` before the first event. ``describe()`` reports, after the run, the
prediction accuracy (mean of min(p, r) / max(p, r) over finished jobs, p the prediction at submit,
r the observed run length; Tsafrir et al.'s measure), the under-prediction rate (p < r) and the
number of corrections.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .backfill import QueueScheduler
from .base import BindContext, ClusterView

#: Tsafrir et al. 2007 correction steps (s): after the k-th correction the prediction is the
#: original one plus STEPS[k] (pyss ``common_correctors.tsafrir``).
TSAFRIR_STEPS = (0.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 18000.0, 36000.0, 72000.0,
                 180000.0, 360000.0)

PREDICTORS = ("user-average", "gbm", "estimate")
CORRECTIONS = ("tsafrir", "requested", "double")


class PredictorError(ValueError):
    """A predictor that cannot work on this workload (e.g. no user ids), or a bad option."""


class _PredictedView:
    """The cluster as the predictive policy sees it: running jobs end at start + prediction.

    It has no ``version``: predictions change with time (corrections), so the base policy's caches
    keyed on the machine state stay off."""

    __slots__ = ("total", "free", "free_mask", "running_jobs", "running_procs", "running_expected_end")

    def __init__(self, cluster: ClusterView, ends: np.ndarray):
        self.total = cluster.total
        self.free = cluster.free
        self.free_mask = cluster.free_mask
        self.running_jobs = cluster.running_jobs
        self.running_procs = cluster.running_procs
        self.running_expected_end = ends


def _require_sklearn():
    try:
        from sklearn.ensemble import HistGradientBoostingRegressor  # noqa: PLC0415
    except ImportError:
        raise PredictorError("predictor 'gbm' needs scikit-learn: pip install scikit-learn") from None
    return HistGradientBoostingRegressor


class PredictiveEasy(QueueScheduler):
    """EASY (FCFS head, EASY backfilling) planning with runtime predictions; see the module docstring.

    Parameters
    ----------
    predictor: ``user-average``, ``gbm`` or ``estimate``.
    correction: ``tsafrir``, ``requested`` or ``double``.
    sjbf: try backfill candidates shortest-prediction first (EASY++ when the predictor learns).
    retrain_every, window, min_train: ``gbm`` online training schedule (finished jobs).
    gbm_params: extra keyword arguments of ``HistGradientBoostingRegressor`` (``random_state``
        defaults to 0 so runs are deterministic).
    name: label in results.
    """

    #: no reservation guarantee for `schedulers.checks`: the head's shadow time comes from predicted
    #: ends, which are corrected upwards when a job outlives its prediction
    guarantees = frozenset()

    def __init__(self, predictor: str = "user-average", correction: str = "tsafrir", sjbf: bool = False,
                 retrain_every: int = 500, window: int = 20000, min_train: int = 200,
                 gbm_params: dict | None = None, name: str | None = None):
        if predictor not in PREDICTORS:
            raise PredictorError(f"unknown predictor {predictor!r}; known: {', '.join(PREDICTORS)}")
        if correction not in CORRECTIONS:
            raise PredictorError(f"unknown correction {correction!r}; known: {', '.join(CORRECTIONS)}")
        for key, v in (("retrain_every", retrain_every), ("window", window), ("min_train", min_train)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise PredictorError(f"option {key} must be an integer >= 1, got {v!r}")
        if predictor == "gbm":
            _require_sklearn()
        default = ("easy++" if sjbf else "easy-pred") + ("" if predictor == "user-average" else f"-{predictor}")
        super().__init__("fcfs", "easy", name=name or default)
        self.predictor = predictor
        self.correction = correction
        self.sjbf = bool(sjbf)
        self.retrain_every = int(retrain_every)
        self.window = int(window)
        self.min_train = int(min_train)
        self.gbm_params = dict(gbm_params or {})

    def describe(self) -> dict:
        d = {"name": self.name, "order": "fcfs", "backfill": "easy", "predictor": self.predictor,
             "correction": self.correction, "sjbf": self.sjbf}
        if self.predictor == "gbm":
            d.update(retrain_every=self.retrain_every, window=self.window, min_train=self.min_train,
                     trainings=getattr(self, "_trainings", 0))
        d.update(self.prediction_stats())
        return d

    # ------------------------------------------------------------------ binding
    def bind(self, ctx: BindContext, cluster: ClusterView | None = None) -> None:
        super().bind(ctx, cluster)
        jobs = self.jobs
        n = len(jobs)
        if self.predictor in ("user-average", "gbm") and n and np.all(np.asarray(jobs.user) < 0):
            raise PredictorError(f"predictor {self.predictor!r} learns from each user's history, but the "
                                 "workload has no user ids (every user is -1); use --scheduler easy or "
                                 "predictor='estimate'")
        self.user_est = np.asarray(jobs.estimate, dtype=np.float64)
        self.pred = self.user_est.copy()          # what EASY plans with (s); updated at submit
        self.est = self.pred                      # QueueScheduler._easy reads self.est
        self.pred0 = np.full(n, np.nan)           # prediction at submit (s)
        self.observed = np.full(n, np.nan)        # observed run length (s)
        self.n_corr = np.zeros(n, dtype=np.int64)
        self.start_t = np.full(n, np.nan)
        self.corrections = 0
        self._hist: dict[int, list[float]] = {}   # user -> finished run lengths, finish order
        self._hist_ratio: dict[int, float] = {}   # user -> last run length / its estimate
        self._hist_logsum: dict[int, float] = {}
        self._pending: list[int] = []             # gbm: submitted, not yet predicted
        self._trainings = 0
        if self.predictor == "gbm":
            self._feat = np.full((n, 10), np.nan)
            self._finished_order: list[int] = []
            self._model = None
            self._since_train = 0

    # ------------------------------------------------------------------ hooks
    def on_submit(self, now: float, job: int) -> None:
        if self.predictor == "estimate":
            p = self.user_est[job]
        elif self.predictor == "user-average":
            p = self._user_average(job)
        else:
            self._feat[job] = self._features(job)
            self._pending.append(job)
            p = self._user_average(job)           # replaced in the same instant's pass if a model exists
        self._set_prediction(job, p)

    def _set_prediction(self, job: int, p: float) -> None:
        p = min(max(float(p), 1e-9), float(self.user_est[job]))
        self.pred[job] = p
        self.pred0[job] = p

    def _user_average(self, job: int) -> float:
        h = self._hist.get(int(self.jobs.user[job]))
        if h is None or len(h) < 2:
            return float(self.user_est[job])
        return 0.5 * (h[-1] + h[-2])

    def on_start(self, now: float, job: int) -> None:
        self.start_t[job] = now

    def on_interrupt(self, now: float, job: int) -> None:
        """A node failure cut the run short: its length says nothing of the job's runtime, so the
        history is not updated (the base class's conservative bookkeeping still runs)."""
        QueueScheduler.on_finish(self, now, job)

    def on_finish(self, now: float, job: int) -> None:
        r = now - self.start_t[job]
        self.observed[job] = r
        u = int(self.jobs.user[job])
        h = self._hist.setdefault(u, [])
        h.append(r)
        if len(h) > 2 and self.predictor != "gbm":
            del h[0]
        self._hist_ratio[u] = r / float(self.user_est[job])
        self._hist_logsum[u] = self._hist_logsum.get(u, 0.0) + math.log1p(r)
        if self.predictor == "gbm":
            self._finished_order.append(job)
            self._since_train += 1

    # ------------------------------------------------------------------ gbm
    def _features(self, job: int) -> np.ndarray:
        """Features of ``job`` from what is known at its submit time (never its runtime)."""
        jobs = self.jobs
        u = int(jobs.user[job])
        h = self._hist.get(u, [])
        nh = len(h)
        t = float(jobs.submit[job])
        return np.array([
            math.log1p(float(self.user_est[job])),
            math.log2(max(int(jobs.procs[job]), 1)),
            float(jobs.queue[job]), float(jobs.partition[job]),
            (t % 86400.0) / 3600.0, (t // 86400.0) % 7,
            math.log1p(h[-1]) if nh else np.nan,
            math.log1p(0.5 * (h[-1] + h[-2])) if nh >= 2 else np.nan,
            self._hist_logsum[u] / nh if nh else np.nan,
            self._hist_ratio.get(u, np.nan) if nh else np.nan,
        ])

    def _train(self) -> None:
        hgb = _require_sklearn()
        idx = np.asarray(self._finished_order[-self.window:], dtype=np.int64)
        params = {"random_state": 0, "max_iter": 100}
        params.update(self.gbm_params)
        model = hgb(**params)
        model.fit(self._feat[idx], np.log1p(self.observed[idx]))
        self._model = model
        self._trainings += 1
        self._since_train = 0

    def _predict_pending(self) -> None:
        if self.predictor != "gbm":
            return
        if len(self._finished_order) >= self.min_train and (
                self._model is None or self._since_train >= self.retrain_every):
            self._train()
        if self._pending and self._model is not None:
            idx = np.asarray(self._pending, dtype=np.int64)
            p = np.expm1(self._model.predict(self._feat[idx]))
            for j, v in zip(idx.tolist(), p.tolist()):
                self._set_prediction(j, max(v, 1.0))
        self._pending.clear()

    # ------------------------------------------------------------------ correction
    def _corrected(self, j: int, elapsed: float) -> float:
        cap = float(self.user_est[j])
        p = float(self.pred[j])
        while p <= elapsed and p < cap:
            if self.correction == "requested":
                p = cap
            elif self.correction == "double":
                p = min(max(2.0 * p, 2.0 * elapsed), cap) if p > 0 else cap
            else:
                k = min(int(self.n_corr[j]) + 1, len(TSAFRIR_STEPS) - 1)
                if k == int(self.n_corr[j]):          # out of steps
                    p = cap
                else:
                    self.n_corr[j] = k
                    p = min(float(self.pred0[j]) + TSAFRIR_STEPS[k], cap)
            self.corrections += 1
        return p

    def _predicted_ends(self, now: float, cluster: ClusterView) -> np.ndarray:
        run = cluster.running_jobs
        if len(run) == 0:
            return np.empty(0)
        n = len(self.pred)
        if run.max() >= n:
            # units out of service (pseudo-jobs, index >= n): their expected end is the repair's end
            real = run < n
            ends = np.asarray(cluster.running_expected_end, dtype=np.float64).copy()
            ends[real] = self._predicted_ends_of(now, run[real])
            return np.maximum(ends, now)
        return self._predicted_ends_of(now, run)

    def _predicted_ends_of(self, now: float, run: np.ndarray) -> np.ndarray:
        st = self.start_t[run]
        ends = st + self.pred[run]
        late = np.flatnonzero(ends <= now)
        for i in late.tolist():
            j = int(run[i])
            self.pred[j] = self._corrected(j, now - st[i])
            ends[i] = st[i] + self.pred[j]
        return np.maximum(ends, now)

    # ------------------------------------------------------------------ pass
    def schedule(self, now: float, queue: np.ndarray, cluster: ClusterView) -> list[int]:
        self._predict_pending()
        if len(queue) == 0:
            return []
        view = _PredictedView(cluster, self._predicted_ends(now, cluster))
        if not self.sjbf:
            return super().schedule(now, queue, view)
        free = view.free
        if free <= 0:
            return []
        procs = self.procs[queue]
        k = int(np.searchsorted(np.cumsum(procs), free, side="right"))
        starts = queue[:k].tolist()
        if k == len(queue):
            return starts
        free -= int(procs[:k].sum())
        if free <= 0:
            return starts
        rest = queue[k + 1:]
        rest = rest[np.lexsort((rest, self.pred[rest]))]      # shortest prediction first, then arrival
        return self._easy(now, int(queue[k]), rest, free, starts, view)

    # ------------------------------------------------------------------ results
    def prediction_stats(self) -> dict:
        """Accuracy of the predictions made at submit, over jobs that finished (see module doc)."""
        obs = getattr(self, "observed", None)
        if obs is None:
            return {}
        ok = np.isfinite(obs) & np.isfinite(self.pred0)
        if not ok.any():
            return {"predicted_jobs": 0}
        p, r = self.pred0[ok], obs[ok]
        with np.errstate(divide="ignore", invalid="ignore"):
            acc = np.where(np.maximum(p, r) > 0, np.minimum(p, r) / np.maximum(p, r), 1.0)
        return {"predicted_jobs": int(ok.sum()), "prediction_accuracy": float(acc.mean()),
                "underestimate_rate": float(np.mean(p < r)), "corrections": int(self.corrections)}


# ---------------------------------------------------------------------- named policies
class EasyPred(PredictiveEasy):
    """EASY with the user-average predictor and Tsafrir correction (``easy-pred``)."""

    def __init__(self, **kw):
        kw.setdefault("predictor", "user-average")
        super().__init__(**kw)


class EasyPlusPlus(PredictiveEasy):
    """EASY++: user-average predictions, Tsafrir correction, shortest job backfilled first (``easy++``)."""

    def __init__(self, **kw):
        kw.setdefault("predictor", "user-average")
        kw.setdefault("sjbf", True)
        super().__init__(**kw)


class EasyPredGBM(PredictiveEasy):
    """EASY with the online gradient-boosted predictor (``easy-pred-gbm``; needs scikit-learn)."""

    def __init__(self, **kw):
        kw.setdefault("predictor", "gbm")
        super().__init__(**kw)


class EasyPlusPlusGBM(PredictiveEasy):
    """EASY++ with the online gradient-boosted predictor (``easy++-gbm``; needs scikit-learn)."""

    def __init__(self, **kw):
        kw.setdefault("predictor", "gbm")
        kw.setdefault("sjbf", True)
        super().__init__(**kw)


class EasySJBF(PredictiveEasy):
    """EASY with the user's estimates and shortest job backfilled first (``easy-sjbf``)."""

    def __init__(self, **kw):
        kw.setdefault("predictor", "estimate")
        kw.setdefault("sjbf", True)
        kw.setdefault("name", "easy-sjbf")
        super().__init__(**kw)


#: names for `schedulers.registry`: name -> factory(**options) -> scheduler
PREDICTIVE: dict[str, Callable[..., PredictiveEasy]] = {
    "easy-pred": EasyPred,
    "easy++": EasyPlusPlus,
    "easy-pred-gbm": EasyPredGBM,
    "easy++-gbm": EasyPlusPlusGBM,
    "easy-sjbf": EasySJBF,
}
