"""`PowerAwareScheduler`: wrap any policy and refuse starts that would exceed a facility power cap.

The cap is on the **facility** power: rack input (IT + conversion losses) + CDU pumps + cooling
plant (`power.cap` explains the electrical limit that holds it at every sample). The wrapper asks
the inner policy for its starts, then walks them **in the inner policy's order**, adding each
job's full-speed electrical draw (``power_model.projected_full_speed_w``) to the projection. It
keeps the longest prefix of starts whose projection stays under the electrical limit of the cap in
force at ``now`` (``power_model.electrical_limit_for``) and refuses the first start that would cross
it *and every start after it* in that pass. Every refused start is reported to the inner policy
(``on_refused(now, job, reason)``, when it has the hook) and counted (``refused_starts``: the first
refusal of a pass; ``refused_after``: the later starts of the pass cut with it): a refusal is never
a silent drop.

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
when nothing else runs (counted in ``over_cap_starts``); the power model's throttle then holds the
cap (the run's ``--power-cap`` is also the model's ``facility_cap_w``).

The engine-level equivalent is the gate `power.capgate.PowerCapGate` (Gate protocol): same
decisions, consulted by the engine itself.

The power model: pass the same `power.model.PowerModel` instance that the simulation steps. When the
wrapper is built by name (``--scheduler schedulers.power_aware:PowerAwareScheduler`` with options
``inner``, ``cap``, ``cooling_overhead``, or with ``hpctwin run --power on --power-cap W``),
`twin.run.run` hands it the run's model after building the models. ``cooling_overhead`` (a
fraction, default 0) adds head-room on top of the limit, which already counts the cooling plant.
A duck-typed model with only ``projected_facility_power_w(extra_nodes, job=...)`` is compared with
the cap itself (no cooling bound).

The cap: a constant (W) or a piecewise-constant series ``[(t0, w0), (t1, w1), ...]`` meaning
``w_i`` from ``t_i`` until ``t_{i+1}`` (before ``t0``: no cap). ``inf`` = no cap. Useful for a
demand-response window: ``[(0, inf), (3600*17, 20e6), (3600*20, inf)]``.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from hpctwin.power.cap import PowerCap
from hpctwin.schedulers.base import (BindContext, ClusterView, ForwardsFailureHooks, Scheduler, Start,
                                     bind_policy)

__all__ = ["PowerAwareScheduler", "PowerCap"]     # PowerCap lives in power.cap; importable from here


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
        self._explicit_model = power_model is not None
        self.cap = PowerCap(cap)
        self.cooling_overhead = float(cooling_overhead)
        self.name = f"power-aware({getattr(inner, 'name', type(inner).__name__)})"
        self.refused = 0            # first refused start of a pass (one per pass)
        self.refused_after = 0      # later starts of the same pass cut with it
        self.over_cap_starts = 0    # jobs started on an idle machine although they exceed the cap
        self._limits: dict[float, float] = {}
        #: allocation units per node (GPU allocation: a job's share of a node's power)
        self.units_per_node = 1

    @property
    def needs_models(self) -> tuple[str, ...]:
        """The run's power model (read-only view), unless one was given to the constructor."""
        return () if self._explicit_model else ("power",)

    def bind(self, ctx: BindContext, cluster: ClusterView | None = None) -> None:
        super().bind(ctx, cluster)
        bind_policy(self.inner, self.ctx)
        if not self._explicit_model:
            self.power_model = self.ctx.models.get("power")
        self.units_per_node = int(getattr(self.power_model, "units_per_node", 1) or 1)

    def _model(self):
        if self.power_model is None:
            raise RuntimeError("PowerAwareScheduler has no power model: pass power_model=..., or run with "
                               "--power on (twin.run gives the wrapper the run's PowerModel)")
        return self.power_model

    def _limit(self, model, cap_w: float) -> float:
        if not hasattr(model, "electrical_limit_for"):
            return cap_w                                  # a duck-typed model: the cap itself
        if cap_w not in self._limits:
            self._limits[cap_w] = float(model.electrical_limit_for(cap_w))
        return self._limits[cap_w]

    def schedule(self, now: float, queue: np.ndarray, cluster: ClusterView) -> list[int | Start]:
        starts = list(self.inner.schedule(now, queue, cluster))
        cap = self.cap.at(now)
        if not starts or not math.isfinite(cap):
            return starts
        model = self._model()
        limit = self._limit(model, cap)
        full = hasattr(model, "projected_full_speed_w")
        base = model.full_speed_electrical_w() if full else model.projected_facility_power_w(0)
        extra = 0.0
        for k, s in enumerate(starts):
            j = int(s.job) if isinstance(s, Start) else int(s)
            n = len(s.nodes) if isinstance(s, Start) and s.nodes is not None else int(self.jobs.procs[j])
            n = n / self.units_per_node
            if full:
                extra += model.projected_full_speed_w(j, n) - base
            else:
                extra += model.projected_facility_power_w(n, job=j) - base
            proj = (base + extra) * (1.0 + self.cooling_overhead)
            if proj > limit * (1.0 + 1e-12):
                if k == 0 and len(cluster.running_jobs) == 0:
                    # nothing runs: this job can never fit under the cap; start it rather than wait
                    # forever (the power model's throttle then holds the cap)
                    self.over_cap_starts += 1
                    continue
                self._refuse(now, starts[k:], proj, limit)
                return starts[:k]
        return starts

    def _refuse(self, now: float, cut: list, proj: float, limit: float) -> None:
        """Report the refused start and the later starts cut with it to the inner policy."""
        self.refused += 1
        self.refused_after += len(cut) - 1
        fn = getattr(self.inner, "on_refused", None)
        first = int(getattr(cut[0], "job", cut[0]))
        for s in cut:
            j = int(getattr(s, "job", s))
            reason = (f"power cap: projected {proj:,.0f} W at full speed > limit {limit:,.0f} W" if j == first
                      else f"power cap: a start ranked before it (job index {first}) was refused")
            if fn is not None:
                fn(now, j, reason)

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
             "refused_starts": self.refused, "refused_after": self.refused_after,
             "over_cap_starts": self.over_cap_starts}
        d.update(self.cap.describe())
        return d
