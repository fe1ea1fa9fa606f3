"""Iteration times from published measurement tables instead of per-layer profiles.

* `SplitwiseIterationModel`: Splitwise's measured prefill ("prompt") and decode ("token") times of
  Llama2-70B and BLOOM-176B on A100-80GB / H100-80GB by TP (``splitwise/perf_model.csv``, ms), used as
  splitwise-sim does (``performance_model.DatabasePerformanceModel``): ``batch_tokens`` = the prompt
  tokens plus one per decode; the median time per ``prompt_size x batch_size`` is linearly interpolated
  (extrapolated outside the grid) over batch tokens; an all-prompt batch costs the prompt curve, an
  all-decode batch the token curve, a mixed batch 1.1 x the prompt curve.
* `DistServeIterationModel`: DistServe's fitted latency coefficients for OPT-13B/66B on A100-80GB
  (``DistServe/simdistserve/estimators/profile_data/profiler-a100-80g.{vllm,distserve}.json``, ms), as
  its ``time_estimator``: prefill ``a + b S + c S2`` (S = prompt tokens, S2 = sum of squared prompt
  lengths, here one chunk: pc^2), decode ``a + b K + c B`` (K = total context of the B decodes, the small-
  or large-batch coefficients either side of ``decoding_large_small_bs_threshold``); a mixed batch costs
  the sum.

Both expose the interface of `IterationModel` that `Instance` uses (``iteration_s``, ``decode_run``,
``decode_run_s``, ``padded_iteration_s``, ``tp``, ``shape``).
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from .models import ModelShape, model_shape
from .profiles import ProfileError, _interp1, linear_run


class _TableModel:
    shape: ModelShape
    tp: int

    def decode_s(self, nd: int, kv_total: int) -> float:
        raise NotImplementedError

    def decode_run(self, t0: float, t_limit: float, nd: int, kvd0: int, steps: int, kvmax0: int):
        """Closed-form decode run: the decode time is linear in the total context (which grows by ``nd``
        a step)."""
        a = self.decode_s(nd, nd * kvd0)
        b = self.decode_s(nd, nd * (kvd0 + 1)) - a
        return linear_run(t0, t_limit, steps, a, b)

    def decode_run_s(self, nd: int, kvd0: int, steps: int, kvmax0: int = 0) -> np.ndarray:
        return np.array([self.decode_s(nd, nd * (kvd0 + j)) for j in range(steps)])

    def padded_iteration_s(self, shape: tuple, padded_tokens: int) -> float:
        return self.iteration_s(*shape)


class SplitwiseIterationModel(_TableModel):
    """Splitwise's measured prompt/token times for one (model, hardware, TP)."""

    def __init__(self, perf_csv: str | Path, model: str, hardware: str, tp: int) -> None:
        perf_csv = Path(perf_csv)
        if not perf_csv.exists():
            raise ProfileError(f"{perf_csv}: file not found (splitwise/perf_model.csv of the data directory)")
        by_x: dict[str, dict[float, list[float]]] = {"prompt_time": {}, "token_time": {}}
        with open(perf_csv, newline="") as fh:
            for i, r in enumerate(csv.DictReader(fh), 2):
                if r["model"] != model or r["hardware"] != hardware or int(r["tensor_parallel"]) != tp:
                    continue
                try:
                    x = float(r["prompt_size"]) * float(r["batch_size"])
                    for k in by_x:
                        by_x[k].setdefault(x, []).append(float(r[k]) / 1e3)
                except (KeyError, ValueError):
                    raise ProfileError(f"{perf_csv}:{i}: bad row {r!r}") from None
        if not by_x["prompt_time"]:
            raise ProfileError(f"{perf_csv}: no rows for model={model!r} hardware={hardware!r} tensor_parallel={tp}")
        self.curves = {k: (sorted(v), [float(np.median(v[x])) for x in sorted(v)]) for k, v in by_x.items()}
        self.shape, self.tp = model_shape(model), tp

    def _curve(self, name: str, x: float) -> float:
        keys, vals = self.curves[name]
        if x <= keys[0] and len(keys) > 1:  # scipy interp1d(fill_value="extrapolate") below the grid too
            return max(1e-6, vals[0] + (x - keys[0]) * (vals[1] - vals[0]) / (keys[1] - keys[0]))
        return max(1e-6, _interp1(keys, vals, x))

    def decode_s(self, nd: int, kv_total: int) -> float:
        return self._curve("token_time", nd)

    def iteration_s(self, tokens: int, seqs: int, pc: int, kvp: int, nd: int, kvd: int, kvd_max: int = 0,
                    kvd_min: int = 0) -> float:
        if pc and nd:
            return 1.1 * self._curve("prompt_time", pc + nd)
        if pc:
            return self._curve("prompt_time", pc)
        return self._curve("token_time", nd)


class DistServeIterationModel(_TableModel):
    """DistServe's fitted prefill/decode coefficients for one (model, TP)."""

    def __init__(self, profile_json: str | Path, model: str, tp: int) -> None:
        profile_json = Path(profile_json)
        if not profile_json.exists():
            raise ProfileError(f"{profile_json}: file not found")
        d = json.loads(profile_json.read_text())
        try:
            self.p = d[model][str(tp)]
        except KeyError:
            raise ProfileError(f"{profile_json}: no coefficients for {model!r} at TP {tp} "
                               f"(has {', '.join(f'{m} TP {list(v)}' for m, v in d.items())})") from None
        self.shape, self.tp = model_shape(model.split("/")[-1]), tp

    def prefill_s(self, tokens: int) -> float:
        a, b, c = self.p["prefill"]
        return (a + b * tokens + c * tokens * tokens) / 1e3

    def decode_s(self, nd: int, kv_total: int) -> float:
        a, b, c = self.p["decoding_smallbs" if nd < self.p["decoding_large_small_bs_threshold"] else "decoding_largebs"]
        return (a + b * kv_total + c * nd) / 1e3

    def iteration_s(self, tokens: int, seqs: int, pc: int, kvp: int, nd: int, kvd: int, kvd_max: int = 0,
                    kvd_min: int = 0) -> float:
        return (self.prefill_s(pc) if pc else 0.0) + (self.decode_s(nd, nd * kvd) if nd else 0.0)
