"""`PowerAwareScheduler`: wrap any policy and refuse starts that would exceed a facility power cap.

The wrapper asks the inner policy for its starts, then walks them **in the inner policy's order**,
adding each job's projected power (``power_model.projected_facility_power_w``) to the running
projection. It keeps the longest prefix of starts that stays under the cap at ``now`` and drops the
first start that would cross it *and every start after it* in that pass.

Guarantee (why a prefix): a backfilling policy such as EASY decides later starts assuming the
earlier ones (notably the queue head) start now. If the head is refused for power, starting jobs
that the policy placed after it would take power (and nodes) the head is waiting for and could delay
it indefinitely. Cutting at the first refusal means no job starts ahead of a job the inner policy
ranked before it in the same pass; the refused jobs stay queued and are reconsidered at the next
pass (every job finish, every submission, and every time the cap changes: `next_wakeup` returns
the next change of a time-varying cap). The wrapper never starts a job the inner policy did not
choose, so node reservations of the inner policy remain valid. What it cannot guarantee: that the
head starts at the inner policy's reservation time, since power, not nodes, may then be the
binding resource. Progress: a job that exceeds the cap even on an otherwise idle machine is started
when nothing else runs (counted in ``over_cap_starts``); combine with the power model's
``facility_cap_w`` to have it throttled instead of exceeding the cap.

The power model: pass the same `power.model.PowerModel` instance that the simulation steps. When the
wrapper is built by name (``--scheduler schedulers.power_aware:PowerAwareScheduler`` with options
``inner``, ``cap``, ``cooling_overhead``, or with ``hpctwin run --power on --power-cap W``),
`twin.run.run` hands it the run's model after building the models. Its
projection uses the machine's exact
electrical power now (rack input + CDU pumps) plus each new job's full, unthrottled draw. The
cooling plant, computed after the run, is not part of the projection; pass
``cooling_overhead`` (a fraction, e.g. 0.03) to reserve head-room for it.

The cap: a constant (W) or a piecewise-constant series ``[(t0, w0), (t1, w1), ...]`` meaning
``w_i`` from ``t_i`` until ``t_{i+1}`` (before ``t0``: no cap). ``inf`` = no cap. Useful for a
demand-response window: ``[(0, inf), (3600*17, 20e6), (3600*20, inf)]``.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from hpctwin.schedulers.base import ClusterView, ForwardsFailureHooks, JobTable, Scheduler, Start


class PowerCap:
    """A facility power cap (W) that is constant or piecewise constant in time."""

    def __init__(self, cap: float | Sequence[tuple[float, float]]):
        if isinstance(cap, (int, float)):
            if not (cap > 0):
                raise ValueError(f"power cap must be > 0 W, got {cap!r}")
            self.times = np.array([-math.inf])
            self.values = np.array([float(cap)])
        else:
            pts = [(float(t), float(w)) for t, w in cap]
            if not pts:
                raise ValueError("power cap series is empty")
            t = np.array([p[0] for p in pts])
            w = np.array([p[1] for p in pts])
            if np.any(np.diff(t) <= 0):
                raise ValueError("power cap series: times must be strictly increasing")
            if np.any(~(w > 0)):
                raise ValueError("power cap series: every cap must be > 0 W (use inf for no cap)")
            self.times = np.concatenate(([-math.inf], t))
            self.values = np.concatenate(([math.inf], w))

    def at(self, now: float) -> float:
        """Cap (W) in force at ``now``."""
        return float(self.values[np.searchsorted(self.times, now, side="right") - 1])

    def next_change(self, now: float) -> float | None:
        """Next time (> now) at which the cap changes, or None."""
        k = np.searchsorted(self.times, now, side="right")
        return float(self.times[k]) if k < len(self.times) else None


class PowerAwareScheduler(ForwardsFailureHooks, Scheduler):
    """Wrap ``inner``; start its jobs only while projected facility power stays under ``cap``.

    Parameters
    ----------
    inner: any `schedulers.base.Scheduler`.
    power_model: the run's `power.model.PowerModel` (or any object with
        ``projected_facility_power_w(extra_nodes, job=...)``), bound before the first pass.
    cap: W, or a ``[(time_s, watts), ...]`` series (see `PowerCap`).
    cooling_overhead: fraction added to the projection for the cooling plant (default 0).
    """

    def __init__(self, inner: Scheduler | str = "easy", power_model=None,
                 cap: float | Sequence[tuple[float, float]] = math.inf, cooling_overhead: float = 0.0):
        if cooling_overhead < 0:
            raise ValueError(f"cooling_overhead must be >= 0, got {cooling_overhead}")
        if isinstance(inner, str):
            from hpctwin.schedulers.registry import make_scheduler  # noqa: PLC0415
            inner = make_scheduler(inner)
        self.inner = inner
        self.power_model = power_model
        self.cap = PowerCap(cap)
        self.cooling_overhead = float(cooling_overhead)
        self.name = f"power-aware({getattr(inner, 'name', type(inner).__name__)})"
        self.refused = 0            # starts refused for power (counted per pass and job)
        self.over_cap_starts = 0    # jobs started on an idle machine although they exceed the cap

    def bind(self, jobs: JobTable, cluster: ClusterView) -> None:
        super().bind(jobs, cluster)
        self.inner.bind(jobs, cluster)

    def _model(self):
        if self.power_model is None:
            raise RuntimeError("PowerAwareScheduler has no power model: pass power_model=..., or run with "
                               "--power on (twin.run gives the wrapper the run's PowerModel)")
        return self.power_model

    def schedule(self, now: float, queue: np.ndarray, cluster: ClusterView) -> list[int | Start]:
        starts = list(self.inner.schedule(now, queue, cluster))
        cap = self.cap.at(now)
        if not starts or not math.isfinite(cap):
            return starts
        kept: list[int | Start] = []
        extra = 0.0
        model = self._model()
        base = model.projected_facility_power_w(0)
        for s in starts:
            j = int(s.job) if isinstance(s, Start) else int(s)
            n = len(s.nodes) if isinstance(s, Start) and s.nodes is not None else int(self.jobs.procs[j])
            extra += model.projected_facility_power_w(n, job=j) - base
            if (base + extra) * (1.0 + self.cooling_overhead) > cap:
                if not kept and len(cluster.running_jobs) == 0:
                    # nothing runs: this job can never fit under the cap; start it rather than wait
                    # forever (a facility_cap_w in the power model then throttles it)
                    self.over_cap_starts += 1
                    kept.append(s)
                    continue
                self.refused += 1
                break
            kept.append(s)
        return kept

    def on_submit(self, now: float, job: int) -> None:
        self.inner.on_submit(now, job)

    def on_start(self, now: float, job: int) -> None:
        self.inner.on_start(now, job)

    def on_finish(self, now: float, job: int) -> None:
        self.inner.on_finish(now, job)

    def next_wakeup(self, now: float) -> float | None:
        times = [t for t in (self.inner.next_wakeup(now), self.cap.next_change(now)) if t is not None]
        return min(times) if times else None

    def describe(self) -> dict:
        d = {"name": self.name, "inner": self.inner.describe(), "cooling_overhead": self.cooling_overhead,
             "refused_starts": self.refused, "over_cap_starts": self.over_cap_starts}
        if len(self.cap.times) == 1:
            d["cap_w"] = float(self.cap.values[0])
        else:
            d["cap_series"] = [(float(t), float(w)) for t, w in zip(self.cap.times[1:], self.cap.values[1:])]
        return d
