"""Feed the per-phase power of serving instances into the facility power model (issue 16 item 2).

With ``--power on`` and a serving deployment in a batch run (`twin.serving.batch`), the power model
(`power.model.PowerModel`) no longer counts the serving jobs' nodes with its own job power model:
this feed *drives* them (`PowerModel.drive_jobs`) and sets their per-node power as the instances
run (`PowerModel.set_job_power`), so node, rack and facility power, conversion losses, cooling, PUE,
the energy categories and the facility cap all see the phases.

Node power of a serving job (W per node, for an instance of ``tp`` GPUs on ``n`` nodes of ``g``
GPUs each: ``n = ceil(tp / g)``):

    node = the [power] table's node without its GPUs (CPUs at the job's utilisation, memory,
           NICs, NVMe, other; `PowerModel.node_power_without_gpus_w`)
         + (instance GPU power + (n g - tp) x idle GPU power) / n

where the instance GPU power is ``tp x`` the per-GPU phase power of `energy.power_for` (Splitwise's
measured A100/H100 table; board power with Splitwise's ratios for the RTX cards: sources there):
idle between iterations and during the cold start, prefill for iterations with prompt tokens,
decode otherwise. The serving GPUs replace the table's GPUs of the node (a CPU-only system's
nodes read as GPU nodes, as ``serving.gpus_per_node`` says).

Time resolution (the choice and its error bound). An instance runs millions of iterations a day
and alternates prefill and decode iterations, so one power change per iteration is out of the
question. The feed observes each instance at the serving model's own instants (controller ticks,
every ``serving.interval_s``; drains; the starts and ends of its jobs) and pushes one level per
instance and observation: over the instance-clock segment since the previous observation, the
exact mean ``tp x (P_prefill x prefill s + P_decode x decode s + P_idle x idle s) / length``
(from the instance's busy and prefill-busy counters); an instance found idle gets the idle level up
to the observation. Hence:

* **energy is exact**: every segment carries exactly the energy of its phases, so the serving jobs'
  GPU energy in the power model equals ``serving.energy_j`` (the same per-phase formula, busy time
  clipped to the instance's life for an instance killed with an iteration in flight);
* power *within* a segment is its mean: segments are at most one controller interval long, except
  an iteration running past an observation and a draining instance's tail (simulated at once,
  one segment to its last token); an instantaneous peak inside a segment is smoothed, by at most
  ``tp x (P_prefill - mean)`` per instance, and a sample-interval average of the series is exact
  when segment edges fall on the sample grid, otherwise misplaces at most the energy of the two
  segments crossing its edges;
* event count: at most one change per live instance and observation (no change is logged when the
  level repeats), independent of the number of iterations.

Facility cap. Serving instances are *not* throttled (a throttled GPU runs slower iterations, which
the serving engine would have to be told of; not modelled): their power is base load for the cap's
throttle, which acts on the batch jobs around them at the power model's events; their node
requests are admitted (``--power-cap`` gate) as if at prefill power on every GPU. The summary's
``power_cap`` table says so, and counts any sample over the cap.
"""
from __future__ import annotations

import math

from .energy import PhasePower


class _Track:
    """Feed state of one instance: pushed up to instance-clock ``t``, with the cumulative busy and
    prefill-busy seconds and GPU energy (J) at ``t`` and the level (W per node) last pushed."""

    __slots__ = ("t", "busy", "pre", "e", "level")

    def __init__(self, t: float) -> None:
        self.t, self.busy, self.pre, self.e, self.level = t, 0.0, 0.0, 0.0, math.nan


class PowerFeed:
    """Drives the serving jobs' node power in the power model (see the module docstring).

    ``serving``: the `ServingBatchModel`; ``power``: the `PowerModel` of the run.
    """

    note = ("per-phase GPU power of the serving instances (twin.serving.energy) is fed into the facility power "
            "model (twin.serving.power_feed): node, rack and facility power, losses, cooling, PUE, energy "
            "categories and the facility cap include it; serving_power_w is the GPU part of it")

    def __init__(self, serving, power) -> None:
        if serving.power is None:
            raise ValueError(f"serving.hardware = {serving.cfg.hardware!r} has no per-phase power table "
                             "(twin.serving.energy.power_for), so --power on cannot be fed the serving power")
        self.serving = serving
        self.pm = power
        self.phase: PhasePower = serving.power
        self.tracks: dict[int, _Track] = {}            # instance index -> its state, while open
        self.seen = 0                                  # instances of `serving.insts` already tracked
        self.changes = 0
        power.when_bound(self._bind)

    @classmethod
    def attach(cls, serving, peers: dict) -> "PowerFeed | None":
        """The feed if the run has a power model (``peers["power"]``), else None."""
        power = peers.get("power")
        return None if power is None else cls(serving, power)

    # ------------------------------------------------------------------ levels
    def _bind(self, pm) -> None:
        """Declare the serving node-request rows (the job table's last ``slots``) as driven."""
        s = self.serving
        n_jobs = len(pm.ctx.jobs)
        lo = n_jobs - s.slots
        if lo < 0:
            raise ValueError("serving power feed: the run has no node-request jobs")
        tp, n, p = s.cfg.tp, s.nodes_per_instance, self.phase
        self.lo = lo
        self.spare = n * s.gpn - tp                    # GPU slots of the instance's nodes it does not use
        self.other = [pm.node_power_without_gpus_w(j) for j in range(lo, n_jobs)]
        idle = [self.node_w(j, tp * p.idle_w) for j in range(lo, n_jobs)]
        peak = [self.node_w(j, tp * p.prefill_w) for j in range(lo, n_jobs)]
        pm.drive_jobs(range(lo, n_jobs), idle, peak, owner="serving")

    def node_w(self, job: int, gpu_w: float) -> float:
        """Per-node component power (W) of serving job ``job`` whose instance GPUs draw ``gpu_w`` W."""
        s = self.serving
        return self.other[job - self.lo] + (gpu_w + self.spare * self.phase.idle_w) / s.nodes_per_instance

    # ------------------------------------------------------------------ observations
    def observe(self, now: float) -> None:
        """Push every instance's level changes known at ``now`` (s), after the serving world has
        been advanced to ``now``."""
        insts = self.serving.insts
        for k in range(self.seen, len(insts)):
            self.tracks[k] = _Track(insts[k].t0)
        self.seen = len(insts)
        for k in list(self.tracks):
            i = insts[k]
            if i.state == "stopped":
                self._close(k, i)
                del self.tracks[k]
            else:
                self._live(k, i, now)

    def _live(self, k: int, i, now: float) -> None:
        tr, x = self.tracks[k], i.x
        if tr.t > now:                                 # its last segment ends after now: nothing new yet
            return
        b = x.t
        if b > tr.t:
            self._segment(k, i, b)
        if x.idle() and tr.t < now:                    # idle since its clock stopped, up to now
            self._segment(k, i, now, idle=True)

    def _close(self, k: int, i) -> None:
        tr, end = self.tracks[k], i.t_end
        if tr.t >= end:
            return
        b = min(i.x.t, end)
        if b > tr.t:
            self._segment(k, i, b)
        if end > tr.t:
            self._segment(k, i, end, idle=True)

    def _segment(self, k: int, i, b: float, idle: bool = False) -> None:
        """Push the mean level of instance ``k`` over its clock ``[tr.t, b]`` (all idle if ``idle``).

        The GPU energy up to ``b`` is `ServingBatchModel._energy_now`'s formula (busy time clipped to
        the instance's life), so the pushed segments add up to the serving model's ``energy_j``."""
        tr, x, p = self.tracks[k], i.x, self.phase
        a = tr.t
        if idle:
            busy, pre = tr.busy, tr.pre
        else:
            busy = min(x.busy_s, b - i.t0)
            pre = min(x.prefill_busy_s, busy)
        e = x.model.tp * (p.prefill_w * pre + p.decode_w * (busy - pre) + p.idle_w * (b - i.t0 - busy))
        level = self.node_w(i.job, max(0.0, (e - tr.e) / (b - a)))
        if level != tr.level:
            self.pm.set_job_power(i.job, a, level)
            tr.level = level
            self.changes += 1
        tr.t, tr.busy, tr.pre, tr.e = b, busy, pre, e
