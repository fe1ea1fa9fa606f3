"""Incentive structures: ledgers, pricing rules, user response, and an energy fair-share priority.

How it fits (our choice): **post-processing** of a finished run's jobs table (``jobs.csv``: start,
end, procs, user and, with ``--power on``, ``energy_j``/``avg_power_w``) and power time series
(``timeseries.h5``: ``power_facility_w`` on the ``sample_dt`` grid) plus its ``summary.json``.
Pricing never changes a schedule, so one run can be priced under any number of rules (a sweep's
``pricing`` axis costs no extra runs). What *does* change the schedule is how users react to prices:
`power.response.UserResponse.apply` transforms the workload *before* the run (shifted submissions,
other hardware, accepted power caps, fewer nodes); and `EnergyFairShare` is a scheduler whose
priority comes from an energy ledger.

Units: time s, power W, energy J internally (kWh in ledgers), money in the config's ``currency``
(a label; default "EUR"), carbon kg CO2. Job power between start and end is taken as constant at its
``avg_power_w`` (exact for constant-utilisation jobs, the default profile; for trace profiles the
time-varying price is applied to the average).

Ledger columns (`ledger`, per user or per account): jobs, node_hours (units x hours / units_per_node),
energy_kwh (the jobs' node-component energy), energy_pue_kwh (energy_kwh x the run's facility/IT
ratio: each job carries its share of conversion losses and cooling; idle-node energy is facility
overhead billed to no one, reported by `unattributed_energy_kwh`), cost (the rule's charge),
carbon_kg (energy_pue x carbon intensity at the time the energy was used).

Pricing rules (``kind`` in a ``[pricing.NAME]`` table; `make_rules`):

* ``node-hours``: ``rate`` per node-hour, times an optional weight per node type (``weights``, keyed
  by the value of the jobs-table column ``weight_by``, default ``partition``).
* ``energy``: energy_pue (or plain energy with ``pue_share = false``) times a price: ``{kind="flat",
  per_kwh}``, ``{kind="time-of-use", periods=[[h0, h1, per_kwh], ...], t0_hour}`` (the periods must
  tile [0, 24) h exactly) or ``{kind="series", times=[...], per_kwh=[...], step_s}`` / ``{kind="series",
  file="prices.csv", step_s}`` (a real-time series on a regular step, no gaps, covering the run).
* ``osaka-points``: points = node_hours x consumption coefficient x seasonal coefficient x fuel
  coefficient, times ``rate`` per point. Consumption coefficient = the job's average node power /
  ``reference_node_w`` (default: the run's energy-weighted mean node power); seasonal coefficient by
  calendar month of the job's start (``season`` = 12 values; month from ``t0_epoch``, the Unix time of
  the log's time 0); ``fuel`` a scalar (the utility's fuel-cost adjustment). This follows the structure
  of Osaka University's point-based charging as described in the issue; the coefficients are inputs,
  no site table is built in.
* ``cap-rebate``: the ``base`` rule's charge times (1 - ``rebate``) for jobs that ran power-capped
  (jobs-table column ``capped`` true, or a finite ``cpu_cap_w``/``gpu_cap_w``).
* ``demand``: the facility's peak power in each billing period (``period_days``, default 30.4375,
  from the start of the log clock) times ``price_per_kw``, allocated to jobs by their share of the
  jobs' energy in that period.
* ``fugaku-points``: the ``base`` rule's charge minus ``reward_per_kwh`` x max(0, E_ref - E), where
  E_ref = the job's node-hours x the mean energy per node-hour over all jobs of the run (the "average
  user"): a reward for using less energy than average. Charges may go below zero.
* ``sum``: the sum of ``rules`` (e.g. time-of-use energy plus a demand charge).

Carbon intensity: ``carbon_g_per_kwh`` (flat) or a series like a price; default 388 g/kWh, the
US electricity average of 2022 (EIA, "How much carbon dioxide is produced per kilowatthour of U.S.
electricity generation?", 0.855 lb/kWh = 388 g/kWh).

User response lives in `power.response` (import it from there; it imports the pricing rules from
this module, never the reverse): `UserResponse` (shift, efficient choice of hardware or
caps, accepted caps, fewer nodes), its presets and `calibrate` (fit to Kamatar et al. SC'25's 40 %),
`materialize_profiles` and `predicted_job_energy_j`. The published anchors, what their papers
measured and how each is represented are in `power.response`'s module docstring; Yang et al. SC'13's
price-aware scheduler is `schedulers.price_aware`. `facility_cost` (here) bills the facility's power;
the per-job `EnergyCharge` (``pue_share=False``) bills the jobs' power.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hpctwin.schedulers.backfill import QueueScheduler
from hpctwin.schedulers.base import BindContext, ClusterView, JobTable

#: US average CO2 intensity of electricity in 2022: 0.855 lb/kWh = 388 g/kWh (EIA FAQ 74).
DEFAULT_CARBON_G_PER_KWH = 388.0
#: Average Gregorian month (s): 365.25 / 12 days.
MONTH_S = 30.4375 * 86400.0


class PricingError(ValueError):
    """A bad pricing table, price series or a run that lacks what a rule needs."""


# ====================================================================== run data
@dataclass
class RunData:
    """What pricing reads from a run: its jobs table, time series and summary."""

    jobs: pd.DataFrame
    timeseries: dict[str, np.ndarray] = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    source: str = ""

    @property
    def ran(self) -> np.ndarray:
        return np.isfinite(self.jobs["start"].to_numpy(float)) & np.isfinite(self.jobs["end"].to_numpy(float))

    def require_energy(self, what: str) -> None:
        if "energy_j" not in self.jobs.columns:
            raise PricingError(f"{what} needs job energies: run {self.source or '(in memory)'} was made without "
                               "--power on (no energy_j column in jobs.csv)")

    @property
    def it_to_facility(self) -> float:
        """Facility energy / IT energy of the run (the PUE share multiplier); 1 without power data."""
        s = self.summary
        if s.get("energy_it_kwh"):
            return float(s["energy_facility_kwh"]) / float(s["energy_it_kwh"])
        return 1.0


def load_run(run_dir: str | Path) -> RunData:
    """Read a run folder (jobs.csv, timeseries.h5, summary.json)."""
    d = Path(run_dir)
    if not (d / "jobs.csv").exists():
        raise FileNotFoundError(f"{d}: not a finished run folder (no jobs.csv)")
    jobs = pd.read_csv(d / "jobs.csv")
    ts: dict[str, np.ndarray] = {}
    if (d / "timeseries.h5").exists():
        import h5py  # noqa: PLC0415
        with h5py.File(d / "timeseries.h5", "r") as h5:
            for k in h5:
                if h5[k].ndim == 1:
                    ts[k] = h5[k][()]
    summary = json.loads((d / "summary.json").read_text()) if (d / "summary.json").exists() else {}
    return RunData(jobs, ts, summary, str(d))


def from_result(result) -> RunData:
    """`RunData` from an in-memory `twin.run.RunResult`."""
    return RunData(result.jobs, {k: v[0] for k, v in result.timeseries.items()}, result.summary, "(in memory)")


# ====================================================================== price / intensity series
class Tariff:
    """A piecewise-constant function of time (price per kWh, or g CO2 per kWh).

    ``breakpoints(t0, t1)`` gives (times, values) with ``values[i]`` holding from ``times[i]`` to
    ``times[i+1]`` over the window; ``integral(a, b)`` (vectorised) is the integral over [a, b] in
    value x seconds.
    """

    kind = "tariff"

    def breakpoints(self, t0: float, t1: float) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def at(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        if t.size == 0:
            return np.zeros(0)
        bt, bv = self.breakpoints(float(t.min()), float(t.max()) + 1.0)
        return bv[np.clip(np.searchsorted(bt, t, side="right") - 1, 0, len(bv) - 1)]

    def integral(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a = np.asarray(a, dtype=float)
        b = np.asarray(b, dtype=float)
        if a.size == 0:
            return np.zeros(0)
        bt, bv = self.breakpoints(float(np.min(a)), float(np.max(b)))
        cum = np.concatenate(([0.0], np.cumsum(bv[:-1] * np.diff(bt))))

        def F(x):
            i = np.clip(np.searchsorted(bt, x, side="right") - 1, 0, len(bt) - 1)
            return cum[i] + bv[i] * (x - bt[i])

        return F(b) - F(a)


class FlatPrice(Tariff):
    kind = "flat"

    def __init__(self, value: float):
        self.value = float(value)

    def breakpoints(self, t0, t1):
        return np.array([t0]), np.array([self.value])

    def describe(self) -> str:
        return f"flat {self.value:g}"


class TimeOfUse(Tariff):
    """Daily periods ``[[h0, h1, value], ...]`` tiling [0, 24) h; ``t0_hour``: hour of day at log time 0."""

    kind = "time-of-use"

    def __init__(self, periods: list, t0_hour: float = 0.0, where: str = "time-of-use price"):
        try:
            p = sorted((float(a), float(b), float(v)) for a, b, v in periods)
        except (TypeError, ValueError):
            raise PricingError(f"{where}: periods must be [[start_hour, end_hour, value], ...]") from None
        if not p:
            raise PricingError(f"{where}: no periods")
        edge = 0.0
        for a, b, _ in p:
            if a != edge:
                raise PricingError(f"{where}: periods leave a gap or overlap at hour {edge:g} "
                                   f"(next period starts at {a:g}); they must tile [0, 24) exactly")
            if not b > a:
                raise PricingError(f"{where}: period [{a:g}, {b:g}) is empty")
            edge = b
        if edge != 24.0:
            raise PricingError(f"{where}: periods end at hour {edge:g}, not 24: gap until midnight")
        self.periods = p
        self.t0_hour = float(t0_hour)
        self._h = np.array([a for a, _, _ in p])
        self._v = np.array([v for _, _, v in p])

    def breakpoints(self, t0, t1):
        off = self.t0_hour * 3600.0
        d0 = math.floor((t0 + off) / 86400.0)
        d1 = math.floor((t1 + off) / 86400.0)
        days = np.arange(d0, d1 + 1)
        times = (days[:, None] * 86400.0 + self._h[None, :] * 3600.0 - off).ravel()
        vals = np.tile(self._v, len(days))
        return times, vals

    def describe(self) -> str:
        return "time-of-use " + ", ".join(f"{a:g}-{b:g}h {v:g}" for a, b, v in self.periods)


class PriceSeries(Tariff):
    """A real-time series on a regular step: ``values[i]`` holds over [times[i], times[i] + step_s)."""

    kind = "series"

    def __init__(self, times, values, step_s: float, where: str = "price series"):
        t = np.asarray(times, dtype=float)
        v = np.asarray(values, dtype=float)
        if len(t) != len(v) or len(t) == 0:
            raise PricingError(f"{where}: {len(t)} times and {len(v)} values (need the same number, >= 1)")
        if not step_s > 0:
            raise PricingError(f"{where}: step_s must be > 0, got {step_s!r}")
        bad = np.flatnonzero(~np.isfinite(v))
        if len(bad):
            raise PricingError(f"{where}: row {int(bad[0]) + 1}: value {v[bad[0]]!r} is not a number")
        d = np.diff(t)
        gap = np.flatnonzero(d != step_s)
        if len(gap):
            i = int(gap[0])
            kind = "gap" if d[i] > step_s else "overlap or disorder"
            raise PricingError(f"{where}: {kind} between row {i + 1} (t={t[i]:g} s) and row {i + 2} "
                               f"(t={t[i + 1]:g} s); the series must have one value every {step_s:g} s")
        self.times, self.values, self.step_s, self.where = t, v, float(step_s), where

    @classmethod
    def from_csv(cls, path: str | Path, step_s: float) -> "PriceSeries":
        """A two-column CSV (time_s, value); a header line is allowed."""
        p = Path(path)
        times, vals = [], []
        for ln, line in enumerate(p.read_text().splitlines(), 1):
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            parts = [x.strip() for x in s.split(",")]
            try:
                a, b = float(parts[0]), float(parts[1])
            except (ValueError, IndexError):
                if not times and ln == 1:
                    continue        # header
                raise PricingError(f"{p}, line {ln}: expected 'time_s,value', got {s!r}") from None
            times.append(a)
            vals.append(b)
        return cls(times, vals, step_s, where=str(p))

    def breakpoints(self, t0, t1):
        end = self.times[-1] + self.step_s
        if t0 < self.times[0] - 1e-9 or t1 > end + 1e-9:
            raise PricingError(f"{self.where}: covers [{self.times[0]:g}, {end:g}] s but the run needs "
                               f"[{t0:g}, {t1:g}] s: the series has a gap at the run's "
                               f"{'start' if t0 < self.times[0] else 'end'}")
        return self.times, self.values

    def describe(self) -> str:
        return f"real-time series ({len(self.times)} values every {self.step_s:g} s)"


def make_tariff(d: Any, where: str) -> Tariff:
    """A tariff from a number (flat) or a table ``{kind = flat|time-of-use|series, ...}``."""
    if isinstance(d, (int, float)) and not isinstance(d, bool):
        return FlatPrice(float(d))
    if not isinstance(d, dict):
        raise PricingError(f"{where}: expected a number or a table, got {d!r}")
    kind = d.get("kind", "flat")
    val_key = "per_kwh" if "per_kwh" in d else ("g_per_kwh" if "g_per_kwh" in d else "value")
    if kind == "flat":
        _check_keys(d, {"kind", val_key}, where)
        return FlatPrice(float(d[val_key]))
    if kind == "time-of-use":
        _check_keys(d, {"kind", "periods", "t0_hour"}, where)
        return TimeOfUse(d.get("periods", []), float(d.get("t0_hour", 0.0)), where)
    if kind == "series":
        _check_keys(d, {"kind", "times", val_key, "step_s", "file"}, where)
        if "step_s" not in d:
            raise PricingError(f"{where}: a series needs step_s (its regular time step in s)")
        if "file" in d:
            return PriceSeries.from_csv(d["file"], float(d["step_s"]))
        return PriceSeries(d.get("times", []), d.get(val_key, []), float(d["step_s"]), where)
    raise PricingError(f"{where}: unknown price kind {kind!r}; known: flat, time-of-use, series")


def _check_keys(d: dict, known: set, where: str) -> None:
    bad = sorted(set(d) - known)
    if bad:
        raise PricingError(f"{where}: unknown key(s) {', '.join(map(repr, bad))}; known: {', '.join(sorted(known))}")


# ====================================================================== pricing rules
def _node_hours(data: RunData, units_per_node: float) -> np.ndarray:
    j = data.jobs
    run = np.nan_to_num(j["end"].to_numpy(float) - j["start"].to_numpy(float))
    return j["procs"].to_numpy(float) * run / 3600.0 / units_per_node


def _job_energy_j(data: RunData) -> np.ndarray:
    return np.nan_to_num(data.jobs["energy_j"].to_numpy(float))


class Rule:
    """A pricing rule: ``charge(data) -> per-job charge`` (currency)."""

    kind = "rule"
    name = "rule"
    needs_energy = False
    #: True when the price depends on when energy is used (users may shift submissions)
    time_varying = False

    def charge(self, data: RunData) -> np.ndarray:
        raise NotImplementedError

    def describe(self) -> str:
        return self.kind


class NodeHours(Rule):
    kind = "node-hours"

    def __init__(self, rate: float = 1.0, weights: dict | None = None, weight_by: str = "partition",
                 units_per_node: float = 1.0):
        self.rate, self.weights, self.weight_by, self.units_per_node = (float(rate), dict(weights or {}), weight_by,
                                                                        float(units_per_node))

    def charge(self, data):
        nh = _node_hours(data, self.units_per_node)
        w = np.ones(len(nh))
        if self.weights:
            if self.weight_by not in data.jobs.columns:
                raise PricingError(f"node-hours weights by {self.weight_by!r}: the jobs table has no such column")
            col = data.jobs[self.weight_by].astype(str).to_numpy()
            w = np.array([float(self.weights.get(c, 1.0)) for c in col])
        return self.rate * nh * w

    def describe(self):
        return f"node-hours at {self.rate:g}/node-h" + (f", weights by {self.weight_by}" if self.weights else "")


class EnergyCharge(Rule):
    kind = "energy"
    needs_energy = True

    def __init__(self, price: Tariff, pue_share: bool = True):
        self.price, self.pue_share = price, bool(pue_share)
        self.time_varying = not isinstance(price, FlatPrice)

    def charge(self, data):
        data.require_energy("energy pricing")
        j = data.jobs
        p = np.nan_to_num(j["avg_power_w"].to_numpy(float))
        s, e = j["start"].to_numpy(float), j["end"].to_numpy(float)
        ok = np.isfinite(s) & np.isfinite(e)
        out = np.zeros(len(j))
        if ok.any():
            out[ok] = p[ok] * self.price.integral(s[ok], e[ok]) / 3.6e6
        return out * (data.it_to_facility if self.pue_share else 1.0)

    def describe(self):
        return f"energy{' (with PUE share)' if self.pue_share else ''}, {self.price.describe()} per kWh"


class OsakaPoints(Rule):
    kind = "osaka-points"
    needs_energy = True

    def __init__(self, rate: float = 1.0, reference_node_w: float | None = None, season: list | None = None,
                 fuel: float = 1.0, t0_epoch: float = 0.0, units_per_node: float = 1.0):
        if season is not None and len(season) != 12:
            raise PricingError(f"osaka-points: season needs 12 monthly coefficients, got {len(season)}")
        self.rate, self.ref, self.fuel = float(rate), reference_node_w, float(fuel)
        self.season = np.asarray(season if season is not None else [1.0] * 12, dtype=float)
        self.t0_epoch, self.units_per_node = float(t0_epoch), float(units_per_node)

    def charge(self, data):
        data.require_energy("osaka-points")
        nh = _node_hours(data, self.units_per_node)
        e = _job_energy_j(data)
        node_w = np.where(nh > 0, e / np.where(nh > 0, nh * 3600.0, 1.0), 0.0)
        ref = self.ref if self.ref else (e.sum() / (nh.sum() * 3600.0) if nh.sum() > 0 else 1.0)
        start = np.nan_to_num(data.jobs["start"].to_numpy(float))
        month = pd.to_datetime(self.t0_epoch + start, unit="s", utc=True).month.to_numpy() - 1
        return self.rate * nh * (node_w / ref) * self.season[month] * self.fuel

    def describe(self):
        return f"Osaka-style points at {self.rate:g}/point (fuel {self.fuel:g})"


def _capped(data: RunData) -> np.ndarray:
    j = data.jobs
    if "capped" in j.columns:
        return j["capped"].astype(bool).to_numpy()
    m = np.zeros(len(j), dtype=bool)
    for c in ("cpu_cap_w", "gpu_cap_w"):
        if c in j.columns:
            m |= np.isfinite(pd.to_numeric(j[c], errors="coerce").to_numpy(float))
    return m


class CapRebate(Rule):
    kind = "cap-rebate"

    def __init__(self, base: Rule, rebate: float):
        if not 0 <= rebate <= 1:
            raise PricingError(f"cap-rebate: rebate must be in [0, 1], got {rebate!r}")
        self.base, self.rebate = base, float(rebate)
        self.needs_energy, self.time_varying = base.needs_energy, base.time_varying

    def charge(self, data):
        return self.base.charge(data) * np.where(_capped(data), 1.0 - self.rebate, 1.0)

    def describe(self):
        return f"{self.base.describe()}, {self.rebate:.0%} rebate for power-capped jobs"


class DemandCharge(Rule):
    kind = "demand"
    needs_energy = True

    def __init__(self, price_per_kw: float, period_days: float = 30.4375):
        self.price_per_kw, self.period_s = float(price_per_kw), float(period_days) * 86400.0

    def facility_charges(self, data: RunData) -> tuple[np.ndarray, np.ndarray]:
        """(peak W, charge) per billing period, from ``power_facility_w``."""
        ts = data.timeseries
        if "power_facility_w" not in ts:
            raise PricingError(f"demand charge needs the facility power series: run {data.source} has no "
                               "power_facility_w (run with --power on)")
        t, w = np.asarray(ts["time"], float), np.asarray(ts["power_facility_w"], float)
        per = np.floor(t / self.period_s).astype(np.int64)
        per -= per.min() if len(per) else 0
        peaks = np.zeros(int(per.max()) + 1 if len(per) else 0)
        np.maximum.at(peaks, per, np.nan_to_num(w))
        return peaks, peaks / 1e3 * self.price_per_kw

    def charge(self, data):
        data.require_energy("demand charge")
        peaks, ch = self.facility_charges(data)
        t0 = math.floor(float(np.min(data.timeseries["time"])) / self.period_s) * self.period_s
        j = data.jobs
        s, e = j["start"].to_numpy(float), j["end"].to_numpy(float)
        p = np.nan_to_num(j["avg_power_w"].to_numpy(float))
        out = np.zeros(len(j))
        ok = np.isfinite(s) & np.isfinite(e)
        for k in range(len(peaks)):
            a, b = t0 + k * self.period_s, t0 + (k + 1) * self.period_s
            ov = np.where(ok, np.clip(np.minimum(e, b) - np.maximum(s, a), 0, None), 0.0)
            en = p * ov
            tot = en.sum()
            if tot > 0:
                out += ch[k] * en / tot
        return out

    def describe(self):
        return f"demand charge {self.price_per_kw:g}/kW of each {self.period_s / 86400:g}-day period's facility peak"


class FugakuPoints(Rule):
    kind = "fugaku-points"
    needs_energy = True

    def __init__(self, base: Rule, reward_per_kwh: float, units_per_node: float = 1.0):
        self.base, self.reward, self.units_per_node = base, float(reward_per_kwh), float(units_per_node)
        self.time_varying = base.time_varying

    def rewards(self, data: RunData) -> np.ndarray:
        data.require_energy("fugaku-points")
        nh = _node_hours(data, self.units_per_node)
        e = _job_energy_j(data)
        per_nh = e.sum() / nh.sum() if nh.sum() > 0 else 0.0
        return self.reward * np.maximum(0.0, nh * per_nh - e) / 3.6e6

    def charge(self, data):
        return self.base.charge(data) - self.rewards(data)

    def describe(self):
        return f"{self.base.describe()}, minus {self.reward:g}/kWh saved against the average user"


class SumRule(Rule):
    kind = "sum"

    def __init__(self, rules: list[Rule]):
        self.rules = rules
        self.needs_energy = any(r.needs_energy for r in rules)
        self.time_varying = any(r.time_varying for r in rules)

    def charge(self, data):
        return sum(r.charge(data) for r in self.rules)

    def describe(self):
        return " + ".join(r.describe() for r in self.rules)


_RULE_KEYS = {
    "node-hours": {"rate", "weights", "weight_by", "units_per_node"},
    "energy": {"price", "pue_share"},
    "osaka-points": {"rate", "reference_node_w", "season", "fuel", "t0_epoch", "units_per_node"},
    "cap-rebate": {"base", "rebate"},
    "demand": {"price_per_kw", "period_days"},
    "fugaku-points": {"base", "reward_per_kwh", "units_per_node"},
    "sum": {"rules"},
}


def make_rules(tables: dict, where: str = "[pricing]") -> dict[str, Rule]:
    """Rules from ``{name: table}`` (a sweep's or script's ``[pricing.NAME]`` tables). Rules may name
    other rules (``base``, ``rules``); unknown kinds or keys raise `PricingError` naming the table."""
    if not isinstance(tables, dict):
        raise PricingError(f"{where}: expected tables of pricing rules")
    built: dict[str, Rule] = {}

    def build(name: str, stack: tuple = ()) -> Rule:
        if name in built:
            return built[name]
        if name in stack:
            raise PricingError(f"{where}: rules refer to each other in a cycle: {' -> '.join(stack + (name,))}")
        if name not in tables:
            raise PricingError(f"{where}.{stack[-1] if stack else name}: refers to unknown rule {name!r}")
        d = tables[name]
        w = f"{where}.{name}"
        if not isinstance(d, dict) or "kind" not in d:
            raise PricingError(f"{w}: a rule is a table with a 'kind' ({', '.join(_RULE_KEYS)})")
        kind = d["kind"]
        if kind not in _RULE_KEYS:
            raise PricingError(f"{w}: unknown kind {kind!r}; known: {', '.join(_RULE_KEYS)}")
        _check_keys(d, _RULE_KEYS[kind] | {"kind", "currency"}, w)
        kw = {k: v for k, v in d.items() if k not in ("kind", "currency")}
        try:
            if kind == "node-hours":
                r: Rule = NodeHours(**kw)
            elif kind == "energy":
                if "price" not in kw:
                    raise PricingError(f"{w}: energy pricing needs a price")
                r = EnergyCharge(make_tariff(kw["price"], f"{w}.price"), kw.get("pue_share", True))
            elif kind == "osaka-points":
                r = OsakaPoints(**kw)
            elif kind == "cap-rebate":
                r = CapRebate(build(str(kw["base"]), stack + (name,)), float(kw.get("rebate", 0.0)))
            elif kind == "demand":
                r = DemandCharge(**kw)
            elif kind == "fugaku-points":
                r = FugakuPoints(build(str(kw["base"]), stack + (name,)), float(kw["reward_per_kwh"]),
                                 float(kw.get("units_per_node", 1.0)))
            else:
                r = SumRule([build(str(x), stack + (name,)) for x in kw["rules"]])
        except KeyError as e:
            raise PricingError(f"{w}: missing key {e.args[0]!r}") from None
        except TypeError as e:
            raise PricingError(f"{w}: {e}") from None
        r.name = name
        built[name] = r
        return r

    for n in tables:
        build(n)
    return built


# ====================================================================== ledgers
def job_carbon_kg(data: RunData, intensity: Tariff | None = None) -> np.ndarray:
    """Per-job kg CO2 of its energy with PUE share, at the intensity when it was used."""
    data.require_energy("carbon accounting")
    intensity = intensity or FlatPrice(DEFAULT_CARBON_G_PER_KWH)
    j = data.jobs
    s, e = j["start"].to_numpy(float), j["end"].to_numpy(float)
    p = np.nan_to_num(j["avg_power_w"].to_numpy(float))
    ok = np.isfinite(s) & np.isfinite(e)
    out = np.zeros(len(j))
    if ok.any():
        out[ok] = p[ok] * intensity.integral(s[ok], e[ok]) / 3.6e6 / 1e3
    return out * data.it_to_facility


def ledger(data: RunData, rule: Rule | None = None, by: str = "user", intensity: Tariff | None = None,
           units_per_node: float = 1.0) -> pd.DataFrame:
    """Per-``by`` (``user`` or an account column such as ``group``) totals: jobs, node_hours,
    energy_kwh, energy_pue_kwh, cost (under ``rule``), carbon_kg. Sorted by ``by``."""
    j = data.jobs
    if by not in j.columns:
        raise PricingError(f"ledger by {by!r}: the jobs table has no such column (have {', '.join(j.columns)})")
    ran = data.ran
    df = pd.DataFrame({by: j[by].to_numpy(), "jobs": ran.astype(int),
                       "node_hours": _node_hours(data, units_per_node)})
    if "energy_j" in j.columns:
        e = _job_energy_j(data) / 3.6e6
        df["energy_kwh"] = e
        df["energy_pue_kwh"] = e * data.it_to_facility
        df["carbon_kg"] = job_carbon_kg(data, intensity)
    if rule is not None:
        df["cost"] = rule.charge(data)
    return df.groupby(by, sort=True).sum().reset_index()


def unattributed_energy_kwh(data: RunData) -> float:
    """Facility energy not carried by any job (idle nodes, switches and their share of losses/cooling)."""
    s = data.summary
    if "energy_facility_kwh" not in s or "energy_j" not in data.jobs.columns:
        return float("nan")
    return float(s["energy_facility_kwh"]) - float((_job_energy_j(data) / 3.6e6).sum() * data.it_to_facility)


def spread(values: np.ndarray) -> dict[str, float]:
    """Spread of per-user costs: Gini coefficient and the p90/p10 ratio."""
    v = np.sort(np.asarray(values, dtype=float))
    v = v[np.isfinite(v)]
    if len(v) == 0 or v.sum() == 0:
        return {"gini": float("nan"), "p90_p10": float("nan")}
    n = len(v)
    gini = float((2 * np.arange(1, n + 1) - n - 1) @ v / (n * v.sum()))
    p10, p90 = np.percentile(v, [10, 90])
    return {"gini": gini, "p90_p10": float(p90 / p10) if p10 > 0 else float("inf")}


def price_run(data: RunData, rules: dict[str, Rule], by: str = "user") -> pd.DataFrame:
    """One row per rule: total cost, mean and spread of per-``by`` cost."""
    rows = []
    for name, r in rules.items():
        led = ledger(data, r, by=by)
        sp = spread(led["cost"].to_numpy())
        rows.append({"pricing": name, "total_cost": float(led["cost"].sum()),
                     f"mean_cost_per_{by}": float(led["cost"].mean()), f"cost_gini_{by}": sp["gini"],
                     f"cost_p90_p10_{by}": sp["p90_p10"], "pricing_rule": r.describe()})
    return pd.DataFrame(rows)


def facility_cost(data: RunData, price: Tariff) -> float:
    """The facility's electricity bill (currency): facility power x price integrated over the run.

    Uses ``power_facility_w`` (interval means on the sampling grid, W) and ``time`` (interval starts,
    s; the step is the grid's spacing). This bills idle nodes, losses and cooling too, unlike the
    per-job rules.
    """
    ts = data.timeseries
    if "power_facility_w" not in ts or "time" not in ts:
        raise PricingError(f"facility cost needs the facility power series: run {data.source or '(in memory)'} "
                           "has no power_facility_w (run with --power on)")
    t = np.asarray(ts["time"], dtype=float)
    w = np.nan_to_num(np.asarray(ts["power_facility_w"], dtype=float))
    if len(t) == 0:
        return 0.0
    dt = float(np.median(np.diff(t))) if len(t) > 1 else float(data.summary.get("sample_dt", 15.0))
    return float(np.sum(w * price.integral(t, t + dt)) / 3.6e6)


# ====================================================================== energy fair-share priority
class EnergyFairShare(QueueScheduler):
    """Fair-share priority from an energy ledger instead of CPU-seconds, with EASY backfilling.

    Each user's usage is the energy (J) of their finished jobs, decayed with half-life
    ``half_life_s`` (Slurm's ``PriorityDecayHalfLife``, default 7 days). The fair-share factor is
    Slurm's classic F = 2^(-U/S) with U the user's share of all decayed usage and S = 1 / (users seen
    so far) (equal shares). The queue is ordered by F (highest first), ties by arrival; backfilling
    is `QueueScheduler`'s (EASY by default). Job energies come from the run's power model
    (a read-only view of the run's `power.model.PowerModel`, declared in ``needs_models``; the run
    needs ``--power on``); they are read at the first pass after a job finishes, when the model has closed
    its account.
    Use: ``--scheduler power.accounting:EnergyFairShare --power on``.
    """

    needs_models = ("power",)

    def __init__(self, half_life_s: float = 7 * 86400.0, backfill: str = "easy", name: str = "energy-fairshare"):
        if not half_life_s > 0:
            raise PricingError(f"EnergyFairShare: half_life_s must be > 0, got {half_life_s!r}")
        super().__init__("fcfs", backfill, name=name)
        self.half_life_s = float(half_life_s)
        self.order_name = "energy-fairshare"
        self.order = self._order
        self._static_order = False
        self.power_model = None           # the run's power model (a read-only view), set at bind

    def describe(self) -> dict:
        return {"name": self.name, "order": "energy fair-share", "backfill": self.backfill,
                "half_life_s": self.half_life_s}

    def bind(self, ctx: BindContext, cluster: ClusterView | None = None) -> None:
        super().bind(ctx, cluster)
        jobs = self.jobs
        self.power_model = self.ctx.models.get("power")
        self._users, self._uidx = np.unique(np.asarray(jobs.user), return_inverse=True)
        self._usage = np.zeros(len(self._users))
        self._seen = np.zeros(len(self._users), dtype=bool)
        self._t = None
        self._done: list[int] = []

    def on_submit(self, now: float, job: int) -> None:
        self._seen[self._uidx[job]] = True

    def on_finish(self, now: float, job: int) -> None:
        super().on_finish(now, job)
        self._done.append(job)

    def _update(self, now: float) -> None:
        if self._t is not None and now > self._t:
            self._usage *= 2.0 ** (-(now - self._t) / self.half_life_s)
        self._t = now
        if self._done:
            if self.power_model is None:
                raise PricingError("EnergyFairShare needs the power model: run with --power on")
            e = self.power_model.energy
            for j in self._done:
                self._usage[self._uidx[j]] += float(e[j])
            self._done.clear()

    def factors(self) -> np.ndarray:
        """Fair-share factor per user (index of ``np.unique(user)``), in (0, 1]."""
        tot = self._usage.sum()
        n_seen = max(int(self._seen.sum()), 1)
        u = self._usage / tot if tot > 0 else np.zeros_like(self._usage)
        return 2.0 ** (-u * n_seen)

    def _order(self, now: float, queue: np.ndarray, jobs: JobTable) -> np.ndarray:
        self._update(now)
        f = self.factors()[self._uidx[queue]]
        return queue[np.lexsort((queue, -f))]
