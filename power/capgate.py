"""`PowerCapGate`: the facility power cap as an engine gate (Gate protocol, `twin.contract.Gate`).

For every start a policy returns, in the policy's order, the engine asks the gate before applying
it; the gate refuses the start when the machine's full-speed electrical power with the job added
would exceed the electrical limit that holds the facility cap (cooling plant and conversion losses
counted, `power.cap`), answered by the run's `power.model.PowerModel` (``admit``). A refusal cuts
the rest of the pass (``rest_of_pass``: jobs the policy ranked after a refused job must not take
its power) and the engine reports it to the policy (``on_refused``) and counts it. The decisions
are those of the wrapper `schedulers.power_aware.PowerAwareScheduler`, without wrapping the policy.

``margin`` (the run option ``power.cooling_overhead``, default 0) refuses above ``limit / (1 +
margin)`` for extra head-room; the limit itself already counts the cooling plant.

Progress: the first start of a pass on a machine where nothing runs is always admitted (a job too
big for the cap even alone would otherwise wait forever); the model's throttle then holds the cap
(``over_cap_starts`` counts them). `next_wakeup` returns the next change of a time-varying cap, so a
refused job is reconsidered when the cap rises even if nothing else happens.
"""
from __future__ import annotations

import numpy as np

from hpctwin.twin.contract import Gate, Refusal


class PowerCapGate(Gate):
    """Refuse starts above the power cap of the run's power model (see the module docstring)."""

    name = "power-cap"
    needs_models = ("power",)

    def __init__(self, model=None, margin: float = 0.0):
        if not margin >= 0:
            raise ValueError(f"PowerCapGate: margin must be >= 0, got {margin!r}")
        self.model = model           # the run's PowerModel (else taken from the bind context)
        self.margin = float(margin)  # extra head-room: refuse above limit / (1 + margin)
        self.admitted_over_cap = 0
        self.refused = 0
        self._first = True

    def bind(self, ctx) -> None:
        self.ctx = ctx
        if self.model is None:
            self.model = ctx.model("power")      # (models are bound after gates: no cap check here)

    def begin_pass(self, now: float, view) -> None:
        self._first = True

    def admit(self, now: float, job: int, units: np.ndarray, view) -> Refusal | None:
        first, self._first = self._first, False
        m = self.model
        if not m.capped:                          # a power model without a cap: nothing to refuse
            return None
        n = len(units) / float(getattr(m, "units_per_node", 1) or 1)
        ok, proj, limit = m.admit(now, job, n)
        if ok and (self.margin == 0.0 or proj * (1.0 + self.margin) <= limit):
            return None
        if first and len(view.running_jobs) == 0:
            self.admitted_over_cap += 1
            return None
        self.refused += 1
        return Refusal(f"power cap: projected {proj:,.0f} W at full speed > limit {limit:,.0f} W "
                       f"(facility cap {m.cap.at(now):,.0f} W)", rest_of_pass=True)

    def next_wakeup(self, now: float) -> float | None:
        return self.model.cap.next_change(now) if self.model is not None else None

    def describe(self) -> dict:
        return {"name": self.name, "refused_starts": self.refused, "over_cap_starts": self.admitted_over_cap,
                "margin": self.margin}
