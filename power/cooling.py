"""Time-stepped thermal model of a warm-water liquid-cooled machine, and its power and PUE.

The model runs on the ``sample_dt`` grid *after* the run (cooling does not feed back into
scheduling), vectorised (block-wise exact first-order filters), so a year at 15 s (2.1 M steps) takes about a
second. Inputs: the heat the racks release (W; the electrical input of the racks, since all of it
ends up as heat) per grid interval, and the outdoor wet-bulb temperature (C).

Equations (one lumped loop of each kind; c_p = 4186 J/(kg K), water)
--------------------------------------------------------------------
Secondary (CDU/rack) loop, constant design flow ``m_s = Q_design / (c_p dT_s)``; its water and
hardware hold ``C_s`` J/K. With the supply held at the set-point ``T_s`` the return temperature
follows the first-order ODE ``C_s dT_r/dt = f_liq Q_it - m_s c_p (T_r - T_s)``; the heat handed to
the facility loop is ``Q_hx = m_s c_p (T_r - T_s)``, i.e. ``Q_it`` through a first-order lag of time
constant ``tau_s = C_s / (m_s c_p)`` (exact zero-order-hold discretisation:
``y[k] = a y[k-1] + (1 - a) x[k]``, ``a = exp(-dt / tau)``). The share ``1 - f_liq`` of the heat
that goes to room air reaches the plant without that lag.

Facility (primary) loop and towers: a second lag ``tau_f = C_f / (m_f c_p)`` gives the heat
``Q_t`` reaching the cooling towers. To hold the secondary supply at ``T_s`` the towers must return
water at ``T_cw = T_s - hx_approach``. A counter-flow tower's approach (leaving water minus wet
bulb) grows with load and falls with air flow; with ``UA ~ s^n`` (fan speed ``s``, ``n`` =
``tower_ua_exponent``, 0.8 typical of forced-draught fills) we use
``approach = approach_design * (Q_t / Q_design) / s^n``. The fan speed needed is
``s = ((Q_t / Q_design) * approach_design / (T_cw - T_wb)) ** (1/n)``, clipped to
``[tower_fan_min_speed, 1]``. If even full speed is not enough, a trim chiller (coefficient of
performance ``chiller_cop``) removes the share of the heat that the towers cannot:
``Q_ch = Q_t * clip((T_wb + approach(s=1) - T_cw) / dT_f, 0, 1)``.

Power: tower fans ``P_fan = P_fan_design * s^3`` and the primary and tower pumps
``P_pump = P_design * phi^3`` (affinity laws), with flow fraction ``phi = clip(Q_t / Q_design,
pump_min_flow, 1)`` (variable-speed pumps holding the design temperature difference); chiller
``Q_ch / COP``. The CDU (secondary) pumps are the constant ``cdu_pump_w`` of the ``[power]`` table
(as in ORNL's RAPS) and are added by the power model, not here.

PUE = (rack input + CDU pumps + plant) / rack input, where the rack input includes the in-rack
conversion losses (The Green Grid's PUE: IT equipment energy metered at the rack feed).
"""
from __future__ import annotations

import math

import numpy as np

from hpctwin.power.config import CoolingConfig, PowerConfigError, load_wet_bulb_csv

CP_WATER = 4186.0  # J/(kg K), specific heat of water near 30 C


def _linear_recurrence(c: np.ndarray, g: float, y0: float, block: int = 64) -> np.ndarray:
    """``y[k] = c[k] + g * y[k-1]`` with ``y[-1] = y0`` (0 <= g < 1), exactly, without a Python loop
    over the samples: inside blocks of ``block`` samples one matrix product with the kernel
    ``g^(k-i)``; the values at the block ends obey the same recurrence with ``g^block``, solved
    the same way (recursively). Only non-negative powers of ``g`` appear, so nothing overflows."""
    n = len(c)
    if n <= block:
        y = np.empty(n)
        prev = y0
        for k in range(n):
            prev = c[k] + g * prev
            y[k] = prev
        return y
    L = block
    idx = np.arange(L)
    diff = idx[:, None] - idx[None, :]
    kern = np.where(diff >= 0, g ** np.maximum(diff, 0), 0.0)      # kern[k, i] = g^(k-i), i <= k
    decay = g ** (idx + 1.0)                                         # g^(k+1)
    nb = -(-n // L)
    cp = np.zeros(nb * L)
    cp[:n] = c
    contrib = cp.reshape(nb, L) @ kern.T                             # each block from a zero start
    ends = _linear_recurrence(contrib[:, -1], float(decay[-1]), y0, block)
    prev = np.concatenate(([y0], ends[:-1]))
    y = contrib + decay[None, :] * prev[:, None]
    return y.reshape(-1)[:n]


def first_order_lag(x: np.ndarray, dt: float, tau: float, y0: float | None = None) -> np.ndarray:
    """Exact ZOH response of ``tau dy/dt = x - y`` sampled every ``dt`` s (starts at ``y0``, default x[0]).

    The recurrence ``y[k] = a*y[k-1] + (1-a)*x[k]`` (``a = exp(-dt/tau)``) is solved block-wise by
    `_linear_recurrence`; the result equals the sequential recurrence to rounding. (This replaces
    ``scipy.signal.lfilter``, whose import alone costs about 0.7 s.)
    """
    x = np.asarray(x, dtype=float)
    if len(x) == 0:
        return x.copy()
    a = math.exp(-dt / tau) if tau > 0 else 0.0
    y_prev = float(x[0]) if y0 is None else float(y0)
    if a == 0.0:
        return x.copy()
    return _linear_recurrence((1.0 - a) * x, a, y_prev)


def wet_bulb_series(cfg: CoolingConfig, times: np.ndarray) -> np.ndarray:
    """Wet-bulb temperature (C) at ``times`` (s): the constant, or the CSV series linearly interpolated.

    Raises `PowerConfigError` if the CSV does not cover the times asked for.
    """
    times = np.asarray(times, dtype=float)
    if not cfg.wet_bulb_csv:
        return np.full(times.shape, cfg.wet_bulb_c)
    t, w = load_wet_bulb_csv(cfg.wet_bulb_csv)
    if len(times) and (times.min() < t[0] or times.max() > t[-1]):
        raise PowerConfigError(f"wet-bulb file {cfg.wet_bulb_csv} (key [cooling] wet_bulb_csv) covers "
                               f"{t[0]:g}..{t[-1]:g} s but the run needs {times.min():g}..{times.max():g} s")
    return np.interp(times, t, w)


def simulate_cooling(cfg: CoolingConfig, heat_w: np.ndarray, dt: float, wet_bulb_c: np.ndarray,
                     ) -> dict[str, np.ndarray]:
    """Run the built-in model on a uniform grid.

    ``heat_w``: rack heat (W) per interval of ``dt`` s; ``wet_bulb_c``: wet bulb per interval.
    Returns arrays (one value per interval): ``plant_w`` (fans + pumps + chiller), ``fan_w``,
    ``pump_w``, ``chiller_w``, ``secondary_supply_c``, ``secondary_return_c``,
    ``facility_supply_c``, ``facility_return_c``, ``tower_heat_w``, ``fan_speed``.
    """
    q = np.clip(np.asarray(heat_w, dtype=float), 0.0, None)
    wb = np.asarray(wet_bulb_c, dtype=float)
    qd = cfg.design_heat_w
    m_s = qd / (CP_WATER * cfg.secondary_delta_t_design_c)
    m_f = qd / (CP_WATER * cfg.facility_delta_t_design_c)
    tau_s = cfg.secondary_heat_capacity_j_per_k / (m_s * CP_WATER)
    tau_f = cfg.facility_heat_capacity_j_per_k / (m_f * CP_WATER)
    # (year-long runs have ~2 M samples: the steps below reuse buffers to limit memory traffic)
    q_hx = first_order_lag(cfg.liquid_fraction * q, dt, tau_s)
    q *= (1.0 - cfg.liquid_fraction)
    q += q_hx
    q_t = first_order_lag(q, dt, tau_f)
    t_sup = np.full(q_t.shape, cfg.supply_setpoint_c)
    t_ret = q_hx / (m_s * CP_WATER)
    t_ret += t_sup
    t_cw = cfg.supply_setpoint_c - cfg.hx_approach_c
    load = q_t / qd
    margin = t_cw - wb
    n = cfg.tower_ua_exponent
    with np.errstate(divide="ignore", invalid="ignore"):
        s_need = np.where(margin > 0, (load * cfg.tower_approach_design_c / margin) ** (1.0 / n), np.inf)
    s = np.clip(s_need, cfg.tower_fan_min_speed, 1.0)
    short = cfg.tower_approach_design_c * load                    # approach at s = 1
    short += wb
    short -= t_cw
    short /= cfg.facility_delta_t_design_c
    np.clip(short, 0.0, 1.0, out=short)
    short[~(s_need > 1.0)] = 0.0
    chiller = q_t * short
    chiller /= cfg.chiller_cop
    fan = s * s
    fan *= s
    fan *= cfg.tower_fan_design_w
    phi = np.clip(load, cfg.pump_min_flow, 1.0)
    pump = phi * phi
    pump *= phi
    pump *= (cfg.primary_pump_design_w + cfg.tower_pump_design_w)
    with np.errstate(divide="ignore", invalid="ignore"):
        approach = np.where(s > 0, cfg.tower_approach_design_c * load / s ** n, 0.0)
    approach += wb
    t_fs = np.minimum(approach, t_cw, out=approach)               # tower water (chiller trims the rest)
    t_fr = phi * (m_f * CP_WATER)
    np.divide(q_t, t_fr, out=t_fr)
    t_fr += t_fs
    return {
        "plant_w": fan + pump + chiller, "fan_w": fan, "pump_w": pump, "chiller_w": chiller,
        "secondary_supply_c": t_sup, "secondary_return_c": t_ret,
        "facility_supply_c": t_fs, "facility_return_c": t_fr, "tower_heat_w": q_t, "fan_speed": s,
    }


def run_cooling(cfg: CoolingConfig, heat_w: np.ndarray, grid: np.ndarray, dt: float) -> dict[str, np.ndarray]:
    """Cooling on a run's grid (``grid[k]`` = start of interval k) with the configured back-end."""
    wb = wet_bulb_series(cfg, np.asarray(grid, dtype=float) + dt / 2.0)
    if cfg.backend == "fmu":
        from hpctwin.power.fmu import run_fmu  # noqa: PLC0415 - optional FMU back-end
        out = run_fmu(cfg, heat_w, grid, dt, wb)
    else:
        out = simulate_cooling(cfg, heat_w, dt, wb)
    out["wet_bulb_c"] = wb
    return out
