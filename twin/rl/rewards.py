"""Rewards of the scheduling environment: what is scored, and when it is paid.

``reward`` (the quantity; every reward is "higher is better"):

* ``bsld``: minus the window's mean bounded slowdown, ``max(1, (wait + run) / max(run, 10 s))`` per
  job (RLScheduler's ``job_score_type`` 0; the run time is known when the job starts, so each job is
  scored at its start). Per episode: ``-sum(bsld_j / L)`` summed in start order, the harness's own
  value (``--compat rlscheduler``'s sequence value, bit for bit).
* ``wait``: minus the mean wait (s), ``-sum(wait_j / L)`` (``job_score_type`` 1).
* ``utilisation``: per episode, ``sum(run_j x size_j) / ((last start - first submit) x machine size)``
  (``job_score_type`` 3: processors under harness rules, units under engine rules; 0 when the span is
  0); per step, minus the idle machine-hours since the previous decision,
  ``-(machine size x dt - busy size-seconds) / (machine size x 3600 s)``.
* ``energy`` (engine rules, power model): minus the machine's electrical energy in kWh (rack input
  and CDU pumps, `power.model.PowerModel.electrical_power_w`), until the last job of the window ends.
* ``power-cap`` (engine rules, power model, ``power_cap_w``): minus the energy drawn above the cap,
  ``-integral(max(0, P - cap) dt)`` in kWh, until the last job ends. The cap is a threshold of the
  reward only: nothing is throttled or refused.

``reward_per``: ``episode`` pays the total at the last step (0 before; RLScheduler's sparse reward),
``step`` pays each step's share (starts, idle time, energy since the previous decision). For
``bsld``, ``wait``, ``energy`` and ``power-cap`` the steps add up to the episode total.
"""
from __future__ import annotations

import numpy as np

REWARDS = ("bsld", "wait", "utilisation", "energy", "power-cap")
PER = ("episode", "step")
TAU_S = 10
J_PER_KWH = 3.6e6


def check_reward(kind: str, per: str, rules: str, has_power: bool, cap_w: float | None) -> None:
    """Refuse a reward the environment cannot compute (one line, naming the option)."""
    if kind not in REWARDS:
        raise ValueError(f"reward = {kind!r}: known: {', '.join(REWARDS)}")
    if per not in PER:
        raise ValueError(f"reward_per = {per!r}: known: {', '.join(PER)}")
    if kind in ("energy", "power-cap"):
        if rules != "engine":
            raise ValueError(f"reward = {kind!r} needs rules = 'engine' (the harness rules have no power model)")
        if not has_power:
            raise ValueError(f"reward = {kind!r} needs the power model: power = True and a system with a [power] "
                             "table (e.g. system = 'generic')")
    if kind == "power-cap" and not (cap_w and cap_w > 0):
        raise ValueError("reward = 'power-cap' needs power_cap_w > 0 (W)")


class RewardTracker:
    """Accumulates one episode's reward (module doc). ``length`` jobs in the window, ``size`` the
    machine size (processors or units), ``t0`` the first submit (s)."""

    def __init__(self, kind: str, per: str, length: int, size: int, t0: float):
        self.kind, self.per, self.length, self.size, self.t0 = kind, per, length, size, t0
        self.value = 0.0            # the episode's score so far (sum of terms in start order, or kWh)
        self.step = 0.0             # this step's share
        self.work = 0.0             # sum run x size of started jobs (size-seconds)
        self.last_start = t0
        self._t = t0                # time of the previous decision (s)
        self._starts: list[tuple[float, float, int]] = []   # (start, run, size), utilisation per step

    def started(self, start: float, submit: float, run: float, size: int) -> None:
        """A job of the window started (times s; ``run`` its actual run time, s)."""
        k = self.kind
        if k == "bsld":
            term = max(1.0, float(start - submit + run) / max(run, TAU_S)) / self.length
        elif k == "wait":
            term = float(start - submit) / self.length
        else:
            term = 0.0
        self.value += term
        self.step += term
        self.work += run * size
        self.last_start = max(self.last_start, start)
        if k == "utilisation" and self.per == "step":
            self._starts.append((start, run, size))

    def interval(self, energy_j: float, excess_j: float) -> None:
        """Energy (J) and energy above the cap (J) drawn since the previous call (engine rules)."""
        if self.kind == "energy":
            self.value += energy_j / J_PER_KWH
            self.step += energy_j / J_PER_KWH
        elif self.kind == "power-cap":
            self.value += excess_j / J_PER_KWH
            self.step += excess_j / J_PER_KWH

    def _busy(self, t: float) -> float:
        """Busy size-seconds from t0 to ``t`` of the started jobs."""
        if not self._starts:
            return 0.0
        a = np.asarray(self._starts, dtype=np.float64)
        return float(np.sum(a[:, 2] * np.clip(t - a[:, 0], 0.0, a[:, 1])))

    def utilisation(self) -> float:
        """The episode's utilisation (module doc)."""
        span = self.last_start - self.t0
        return float(self.work / (span * self.size)) if span > 0 else 0.0

    def reward(self, now: float, done: bool) -> float:
        """The reward of the step that ends at ``now`` (s) (``done``: the episode's last step)."""
        k, per = self.kind, self.per
        if k == "utilisation":
            if per == "episode":
                r = self.utilisation() if done else 0.0
            else:
                t = self.last_start if done else now
                busy_prev = getattr(self, "_busy_prev", 0.0)
                busy = self._busy(t)
                r = -(self.size * (t - self._t) - (busy - busy_prev)) / (self.size * 3600.0)
                self._busy_prev, self._t = busy, t
        elif per == "episode":
            r = -self.value if done else 0.0
        else:
            r = -self.step
        self.step = 0.0
        return float(r)
