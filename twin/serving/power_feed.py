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
idle between iterations and during the cold start, prefill for iterations of prompt tokens only,
decode for iterations without prompt tokens, and for a mixed iteration (prompt chunks and decodes in one
forward, chunked prefill) the blend ``s P_prefill + (1 - s) P_decode`` of its prompt share ``s``
(`energy.blend_w`, `instance.prompt_share`: the part of its modelled time due to its prompt tokens).
The serving GPUs replace the table's GPUs of the node (a CPU-only system's nodes read as GPU nodes,
as ``serving.gpus_per_node`` says).

Disaggregated P/D (``serving.mode = "pd"``, `twin.serving.batch_pd`): each node request's node power
uses its own pool's GPU type (phase table), TP and nodes per instance (`slot_specs`). The phase of an
iteration is its own, as in ``serving.energy_j``: prompt share 1, 0 or the mixed blend. A prefill
instance runs only prompt iterations (its requests leave it at their first token; a one-token remainder
of a prompt is prompt work), so it is at prefill power whenever it is busy; a decode instance runs
decode iterations, except the recomputation of a prompt after a preemption there, a prompt chunk that
may share its iteration with decodes (then blended like a colocated one). Not modelled: power of the KV
transfer itself (NICs and copy engines are in the node's constant part; the GPUs of both ends count as
idle while only a transfer runs).

Time resolution (the choice and its error bound). An instance runs millions of iterations a day
and alternates prefill and decode iterations, so one power change per iteration is out of the
question. The feed subscribes to each instance's busy time (`Instance.busy_hook`: every iteration,
or vectorised run of decode iterations, with its start, end and prompt share) and aggregates it on the
power model's sample grid (``t0 + k x sample_dt``): the level it pushes for grid interval k is the
exact mean ``tp x (P_idle + sum over busy pieces in k of (P_piece - P_idle) x overlap / length)``
over the part of k the instance lives in. Hence:

* **energy is exact** (the serving jobs' GPU energy in the power model equals ``serving.energy_j``,
  except that an instance killed while iterating counts its busy time only up to the kill), and so
  is every interval mean on the sample grid: the power series, the cooling plant (integrated on that
  grid), PUE and the cap's sample check see exactly the phases' energy per interval;
* what is lost is power *within* a sample interval (its mean replaces the phases), as for every
  series of the run; the machine's exact peak (``peak_electrical_power_w``) is then a peak of
  interval means for the serving part;
* event count: at most one change per live instance and grid interval (none when the level repeats,
  e.g. while idle), independent of the number of iterations;
* timing: a level is pushed once the interval is complete (the instance's clock or, idle, the
  engine's time past its end) and the engine is at or past its start, at the serving model's own
  instants (controller ticks, drains, its jobs' starts and ends); until then the power model's
  running totals (what its cap throttle and start projections read) hold the previous level.

Facility cap. Serving instances are *not* throttled (a throttled GPU runs slower iterations, which
the serving engine would have to be told of; not modelled): their power is base load for the cap's
throttle, which acts on the batch jobs around them at the power model's events; their node
requests are admitted (``--power-cap`` gate) as if at prefill power on every GPU. The summary's
``power_cap`` table says so, and counts any sample over the cap.
"""
from __future__ import annotations

import math
from collections import deque

from .energy import PhasePower, blend_w


class _Track:
    """Feed state of one instance: grid intervals before ``k`` are pushed; ``busy``: its busy pieces
    not yet binned, ``[start s, end s, extra W]`` (W above the idle power of its GPUs), in time order."""

    __slots__ = ("k", "busy", "level")

    def __init__(self, k: int) -> None:
        self.k, self.busy, self.level = k, deque(), math.nan


class PowerFeed:
    """Drives the serving jobs' node power in the power model (see the module docstring).

    ``serving``: the `ServingBatchModel`; ``power``: the `PowerModel` of the run.
    """

    note = ("per-phase GPU power of the serving instances (twin.serving.energy) is fed into the facility power "
            "model (twin.serving.power_feed): node, rack and facility power, losses, cooling, PUE, energy "
            "categories and the facility cap include it; serving_power_w is the GPU part of it")

    def __init__(self, serving, power) -> None:
        self.specs = slot_specs(serving)               # per node-request slot: (tp, nodes, PhasePower)
        self.serving = serving
        self.pm = power
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
        self.lo = lo
        self.t0, self.dt = float(pm.t0), float(pm.sample_dt)     # the power model's sample grid
        # per slot: GPU slots of the instance's nodes it does not use, the rest of its nodes' power
        self.spare = [n * s.gpn - tp for tp, n, _ in self.specs]
        self.other = [pm.node_power_without_gpus_w(j) for j in range(lo, n_jobs)]
        idle = [self.node_w(j, tp * p.idle_w) for j, (tp, _, p) in zip(range(lo, n_jobs), self.specs)]
        peak = [self.node_w(j, tp * p.prefill_w) for j, (tp, _, p) in zip(range(lo, n_jobs), self.specs)]
        pm.drive_jobs(range(lo, n_jobs), idle, peak, owner="serving")

    def node_w(self, job: int, gpu_w: float) -> float:
        """Per-node component power (W) of serving job ``job`` whose instance GPUs draw ``gpu_w`` W."""
        s = job - self.lo
        _, n, p = self.specs[s]
        return self.other[s] + (gpu_w + self.spare[s] * p.idle_w) / n

    # ------------------------------------------------------------------ observations
    def observe(self, now: float) -> None:
        """Push every instance's level changes known at ``now`` (s), after the serving world has
        been advanced to ``now``."""
        insts = self.serving.insts
        for k in range(self.seen, len(insts)):       # new instances: no iteration has run yet
            i = insts[k]
            tr = self.tracks[k] = _Track(self._bin(i.t0))
            i.x.busy_hook = self._hook(tr.busy, i.x.model.tp, self.specs[i.job - self.lo][2])
        self.seen = len(insts)
        for k in list(self.tracks):
            i = insts[k]
            if i.state == "stopped":                 # flush up to its end; busy time after it is dropped
                self._push(k, i, i.t_end, i.t_end, final=True)
                i.x.busy_hook = None
                del self.tracks[k]
            else:                                    # known up to its clock (or now, if idle since)
                known = max(i.x.t, now) if i.x.idle() else i.x.t
                self._push(k, i, known, now)

    @staticmethod
    def _hook(busy: deque, tp: int, p: PhasePower):
        """The instance's busy hook: a piece at ``tp x (blend_w(share) - idle)`` W above idle
        (`energy.blend_w`; precomputed for the pure phases, where it is the phase power)."""
        pre, dec = tp * (p.prefill_w - p.idle_w), tp * (p.decode_w - p.idle_w)

        def hook(start: float, end: float, share: float) -> None:
            if end > start:
                busy.append((start, end, pre if share == 1.0 else (
                    dec if share == 0.0 else tp * (blend_w(p, share) - p.idle_w))))
        return hook

    def _bin(self, t: float) -> int:
        """Index of the grid interval holding ``t`` (never one starting after ``t``)."""
        k = int(math.floor((t - self.t0) / self.dt))
        while self.t0 + k * self.dt > t:
            k -= 1
        return k

    def _push(self, k: int, i, known: float, now: float, final: bool = False) -> None:
        """Push the levels of the grid intervals of instance ``k`` that end by ``known`` and start by
        ``now`` (with ``final``: every interval up to ``known`` = its end, the last one partial)."""
        tr, t0, dt = self.tracks[k], self.t0, self.dt
        idle_w = i.x.model.tp * self.specs[i.job - self.lo][2].idle_w
        while True:
            lo = t0 + tr.k * dt
            hi = lo + dt
            if lo >= known or lo > now or (hi > known and not final):
                return
            a, b = max(lo, i.t0), min(hi, known)
            busy = tr.busy
            if b <= a:
                tr.k += 1
                continue
            if not busy or busy[0][0] >= b:            # idle through this interval (and maybe more)
                level = self.node_w(i.job, idle_w)
                nxt = self._bin(busy[0][0]) if busy else self._bin(min(known, now))
                step = max(1, nxt - tr.k)
            else:
                e = 0.0
                while busy and busy[0][0] < b:
                    s0, s1, w = busy[0]
                    e += w * (min(s1, b) - max(s0, a))
                    if s1 <= b:
                        busy.popleft()
                    else:
                        break
                level = self.node_w(i.job, idle_w + e / (b - a))
                step = 1
            if level != tr.level:
                self.pm.set_job_power(i.job, a, level)
                tr.level = level
                self.changes += 1
            tr.k += step


def slot_specs(serving) -> list[tuple[int, int, PhasePower]]:
    """``(tp, nodes, phase power)`` of each node-request slot of ``serving``: one colocated pool
    (``serving.tp``, ``hardware``; a model whose ``pd`` is false), or the P/D model's pools
    (``serving.pools``: each slot its pool's GPU type and TP). A GPU type without a phase-power table is
    an error naming its key."""
    pools = getattr(serving, "pools", None) if getattr(serving, "pd", True) else None
    if not pools:
        if serving.power is None:
            raise ValueError(f"serving.hardware = {serving.cfg.hardware!r} has no per-phase power table "
                             "(twin.serving.energy.power_for), so --power on cannot be fed the serving power")
        return [(serving.cfg.tp, serving.nodes_per_instance, serving.power)] * serving.slots
    out = [None] * serving.slots
    for p in pools.values():
        if p.power is None:
            raise ValueError(f"serving.{p.name}_hardware = {p.hardware!r} has no per-phase power table "
                             "(twin.serving.energy.power_for), so --power on cannot be fed the serving power")
        out[p.lo:p.lo + p.n_slots] = [(p.tp, p.nodes, p.power)] * p.n_slots
    return out
