"""Facility power caps: the cap in time (`PowerCap`) and the electrical limit that keeps the
*facility* power under it, cooling plant included (`electrical_limit_w`).

Where the cap is defined
------------------------
A power cap (``--power-cap W``, ``[power] facility_cap_w``) is a limit on the **facility** meter:
rack input (node components, switches, DC-DC and rectifier losses) + CDU pumps + cooling plant
(tower fans, primary and tower pumps, trim chiller), the quantity ``power_facility_w`` of the time
series and the numerator of PUE. Conversion losses and cooling are therefore part of what the cap
limits.

How a limit on the machine's electrical power keeps the facility power under the cap
-------------------------------------------------------------------------------------
The engine controls the machine's electrical power ``E = rack input + CDU pumps`` exactly at every
event (start refusals and throttling, `power.model.PowerModel`). The cooling plant is integrated on
the sampling grid after the run (`power.cooling`): its power at a sample is a function
``plant(Q_t, T_wb)`` of the heat reaching the towers and of the wet bulb, both increasing
(fans ~ s^3 with s growing with load and wet bulb, pumps ~ phi^3 with phi growing with load, the
trim chiller's share growing with both). ``Q_t`` is rack heat passed through first-order lags
started at the first sample, i.e. a weighted average of past rack heat. So if the rack input never
exceeds ``R``, then at every sample ``Q_t <= R`` and

    facility = rack mean + CDU pumps + plant(Q_t, T_wb) <= R + CDU pumps + plant(R, T_wb_max)

where ``T_wb_max`` is the highest wet bulb of the run (the constant ``wet_bulb_c``, or the maximum
of the ``wet_bulb_csv`` series). `electrical_limit_w` finds the largest ``R`` with ``R + CDU pumps
+ plant(R, T_wb_max) <= cap`` (bisection; ``plant`` is increasing) and returns ``R + CDU pumps``:
holding ``E`` under that limit at all times holds the facility power under the cap at every
sample. The bound is tight in steady state (a rack input held at ``R`` long enough brings the plant
to ``plant(R)``). With the FMU cooling back-end the plant is not known in closed form: the limit
is then on the electrical power alone and the run says so (``power_cap.level``).

A cap that *falls* (a series) holds for the electrical power at once, but the cooling plant follows
its lags (time constants ``tau_s``, ``tau_f`` of `power.cooling`), so facility samples just after
a decrease may exceed the new cap until the plant settles; the report counts them.

Assumptions that can break the guarantee (the run reports the sampled maximum and the samples
above the cap whatever happens): utilisation *traces* change a job's power between events (the
throttle acts at events only, with each trace's mean); the ``staged`` rectifier sharing is not
affine (projections use the affine equal-sharing factor); and no throttle can go below idle power.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np


class PowerCap:
    """A facility power cap (W) that is constant or piecewise constant in time.

    ``cap``: a number (W, > 0; ``inf`` = none) or ``[(t0, w0), (t1, w1), ...]`` meaning ``w_i`` from
    ``t_i`` until ``t_{i+1}`` (before ``t0``: no cap), times in s on the log's clock.
    """

    def __init__(self, cap: float | Sequence[tuple[float, float]]):
        if isinstance(cap, PowerCap):
            self.times, self.values = cap.times.copy(), cap.values.copy()
            return
        if isinstance(cap, (int, float, np.integer, np.floating)):
            if not (cap > 0):
                raise ValueError(f"power cap must be > 0 W, got {cap!r}")
            self.times = np.array([-math.inf])
            self.values = np.array([float(cap)])
            return
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

    @property
    def finite(self) -> bool:
        """True when some cap value is finite."""
        return bool(np.isfinite(self.values).any())

    @property
    def constant(self) -> bool:
        return len(self.times) == 1

    def index(self, now: float) -> int:
        """Index of the cap value in force at ``now``."""
        return int(np.searchsorted(self.times, now, side="right") - 1)

    def at(self, now: float) -> float:
        """Cap (W) in force at ``now``."""
        return float(self.values[self.index(now)])

    def on_grid(self, grid: np.ndarray) -> np.ndarray:
        """Cap (W) in force at each time of ``grid`` (the start of each sampling interval)."""
        return self.values[np.searchsorted(self.times, np.asarray(grid, dtype=float), side="right") - 1]

    def mean_on_grid(self, grid: np.ndarray, dt: float) -> np.ndarray:
        """Time-average of the cap (W) over each interval ``[grid[k], grid[k] + dt)`` of a grid spaced
        by ``dt`` (inf where the interval touches a period without cap): what an interval-mean power
        sample is compared with."""
        from hpctwin.power.stepseries import interval_means  # noqa: PLC0415
        g = np.asarray(grid, dtype=float)
        if self.constant:
            return np.full(len(g), float(self.values[0]))
        finite = np.isfinite(self.values)
        vals = np.where(finite, self.values, 0.0)
        edges = np.concatenate((g, [g[-1] + dt])) if len(g) else np.zeros(1)
        means, uncapped = interval_means(self.times[1:], [np.diff(vals), np.diff((~finite).astype(float))],
                                         [vals[0], float(not finite[0])], edges)
        return np.where(uncapped > 0, np.inf, means)

    def next_change(self, now: float) -> float | None:
        """Next time (> now) at which the cap changes, or None."""
        k = np.searchsorted(self.times, now, side="right")
        return float(self.times[k]) if k < len(self.times) else None

    def describe(self) -> dict:
        if self.constant:
            return {"cap_w": float(self.values[0])}
        return {"cap_series": [(float(t), float(w)) for t, w in zip(self.times[1:], self.values[1:])]}


def steady_plant_w(cool_cfg, rack_w: float, wet_bulb_c: float) -> float:
    """Cooling-plant power (W) of `power.cooling.simulate_cooling` at a rack heat held at ``rack_w``
    (W) long enough for its lags to settle, at wet bulb ``wet_bulb_c`` (C)."""
    from hpctwin.power.cooling import simulate_cooling  # noqa: PLC0415
    out = simulate_cooling(cool_cfg, np.array([float(rack_w)]), 1.0, np.array([float(wet_bulb_c)]))
    return float(out["plant_w"][0])


def worst_wet_bulb_c(cool_cfg) -> float:
    """Highest wet bulb (C) a run can see: the constant, or the maximum of the CSV series."""
    if cool_cfg.wet_bulb_csv:
        from hpctwin.power.config import load_wet_bulb_csv  # noqa: PLC0415
        return float(np.max(load_wet_bulb_csv(cool_cfg.wet_bulb_csv)[1]))
    return float(cool_cfg.wet_bulb_c)


def electrical_limit_w(cap_w: float, cdu_pumps_w: float, cool_cfg=None) -> tuple[float, str]:
    """Limit (W) on the machine's electrical power (rack input + CDU pumps) that keeps the facility
    power under ``cap_w`` at every sample (see the module docstring), and the level it holds at.

    ``cool_cfg``: the run's `power.config.CoolingConfig`, or None when the run has no cooling plant.
    Returns (limit, level) where level is ``"facility"`` (plant bounded) or ``"electrical"``
    (FMU back-end: plant not bounded). The limit may be below the machine's idle power: the caller
    then reports that the cap cannot be held.
    """
    if not math.isfinite(cap_w):
        return math.inf, "facility"
    if cool_cfg is None:
        return float(cap_w) * (1.0 - 1e-9), "facility"
    if cool_cfg.backend != "builtin":
        return float(cap_w) * (1.0 - 1e-9), "electrical"
    wb = worst_wet_bulb_c(cool_cfg)
    cap_w = float(cap_w) * (1.0 - 1e-9)       # rounding head-room: sampled means are sums of many terms
    lo, hi = 0.0, max(float(cap_w) - cdu_pumps_w, 0.0)
    if hi <= 0.0 or steady_plant_w(cool_cfg, 0.0, wb) + cdu_pumps_w > cap_w:
        return float(cap_w) - steady_plant_w(cool_cfg, 0.0, wb), "facility"     # unattainable: < CDU pumps
    if hi + cdu_pumps_w + steady_plant_w(cool_cfg, hi, wb) <= cap_w:
        return hi + cdu_pumps_w, "facility"
    for _ in range(60):                      # 2^-60 of the cap: below a micro-watt for any machine
        mid = 0.5 * (lo + hi)
        if mid + cdu_pumps_w + steady_plant_w(cool_cfg, mid, wb) <= cap_w:
            lo = mid
        else:
            hi = mid
    return lo + cdu_pumps_w, "facility"


def sampled_facility_w(model) -> tuple[np.ndarray, np.ndarray]:
    """(grid, facility W per sampling interval) of a finalized `power.model.PowerModel` on its
    ``t0 + k * sample_dt`` grid: the interval means the time series reports."""
    if model._fac_samples is not None:
        return model._fac_samples
    end, t0, dt = model.end, model.t0, model.sample_dt
    if not end > t0:
        return np.zeros(0), np.zeros(0)
    grid = t0 + dt * np.arange(int(math.ceil((end - t0) / dt)))
    edges = np.concatenate((grid, [grid[-1] + dt]))
    return grid, model._rack_means(edges) + model.chain.cdu_pumps_w


def idle_floor_facility_w(model) -> float:
    """Facility power (W) of the machine with every node idle, its cooling plant in steady state
    at the worst wet bulb: no throttle can go below it."""
    idle = model.chain.uniform_breakdown(0.0, 0.0)
    plant = 0.0
    if model.cool_cfg is not None and model.cool_cfg.backend == "builtin":
        plant = steady_plant_w(model.cool_cfg, idle["rack_input_w"], worst_wet_bulb_c(model.cool_cfg))
    return float(idle["facility_w"] + plant)


def check_feasible(model) -> None:
    """Raise `PowerConfigError` when a cap value is below the machine's idle floor
    (`idle_floor_facility_w`): no schedule and no throttle can hold it (throttling every job to idle
    power would stall the jobs, not meet the cap)."""
    from hpctwin.power.config import PowerConfigError  # noqa: PLC0415
    floor = idle_floor_facility_w(model)
    for t, w in zip(model.cap.times, model.cap.values):
        if math.isfinite(w) and w < floor:
            when = "" if not math.isfinite(t) else f" (from t = {t:g} s)"
            raise PowerConfigError(
                f"power cap {w:,.0f} W{when} is below the idle power of the machine, {floor:,.0f} W at the "
                f"facility (idle nodes and switches, conversion losses, CDU pumps and the cooling plant), by "
                f"{floor - w:,.0f} W: no schedule can hold it; give a cap of at least {math.ceil(floor):,d} W "
                f"or fewer nodes")


def cap_report(model) -> dict:
    """The summary's ``power_cap`` table of a finalized capped `power.model.PowerModel`: where the
    cap is defined, the electrical limit that holds it, whether it held at every sample and, when
    not, by how much and why."""
    grid, fac = sampled_facility_w(model)
    caps = model.cap.mean_on_grid(grid, model.sample_dt) if len(grid) else np.zeros(0)
    over = fac > caps * (1.0 + 1e-9)
    excess = np.where(over, fac - caps, 0.0)
    held = not over.any()
    out = {
        **model.cap.describe(),
        "level": ("facility: rack input (IT + conversion losses) + CDU pumps + cooling plant"
                  if model.cap_level == "facility" else
                  "electrical: rack input + CDU pumps (the FMU cooling plant is not bounded)"),
        "electrical_limit_w": [float(w) for w in model._elec_limits] if not model.cap.constant
        else float(model._elec_limits[0]),
        "held": bool(held),
        "max_sampled_facility_w": float(fac.max()) if len(fac) else None,
        "samples_over_cap": int(over.sum()),
        "fraction_samples_over_cap": float(over.mean()) if len(fac) else 0.0,
        "max_excess_w": float(excess.max()) if len(fac) else 0.0,
        "min_throttle": float(model.min_theta),
        "throttled_s": float(model.throttled_s),
        "model": ("starts refused above the limit at full speed; running jobs throttled by one common "
                  "factor on their dynamic power (P_dyn ~ f^alpha, alpha = cap_power_exponent "
                  f"{model.cfg.cap_power_exponent:g}; progress by the Hsu-Feng beta model, power.profiles)"),
    }
    if not held:
        out["why"] = _why_not_held(model, caps)
    return out


def _why_not_held(model, caps: np.ndarray) -> str:
    floor = idle_floor_facility_w(model)
    low = float(np.nanmin(caps)) if len(caps) else math.inf
    if floor > low:                      # refused at bind (check_feasible); kept for duck-typed models
        return (f"idle power alone ({floor:,.0f} W at the facility, cooling included) exceeds the cap "
                f"({low:,.0f} W) by {floor - low:,.0f} W: no throttle can hold it")
    if model.cap_level != "facility":
        return "the FMU cooling back-end's plant power is not bounded by the electrical limit"
    if model.traces:
        return "utilisation traces change job power between events, where the throttle does not act"
    if model.chain.staged:
        return "staged rectifier sharing is not affine; the throttle uses the equal-sharing factor"
    if model.min_theta <= 0.0:
        return "running jobs throttled to idle power still exceed the cap (static power of busy nodes)"
    return "unexplained: please report (the throttle should have held it)"


def cap_summary_line(report: dict) -> str:
    """One line for the printed run summary from a ``power_cap`` table (`cap_report`)."""
    cap = f"{report['cap_w']:,.0f} W" if "cap_w" in report else "series"
    where = report["level"].split(":")[0]
    if report["held"]:
        return (f"{cap} at the {where}: held at every sample (max {report['max_sampled_facility_w']:,.0f} W; "
                f"throttled {report['throttled_s']:,.0f} s, lowest throttle {report['min_throttle']:.2f})")
    return (f"{cap} at the {where}: NOT HELD: {report['samples_over_cap']} samples "
            f"({100 * report['fraction_samples_over_cap']:.1f} %) above it, by up to {report['max_excess_w']:,.0f} W; "
            f"why: {report['why']}")
