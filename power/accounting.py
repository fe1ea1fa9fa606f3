"""Incentive structures: ledgers, pricing rules, user response, and an energy fair-share priority.

How it fits (our choice): **post-processing** of a finished run's jobs table (``jobs.csv``: start,
end, procs, user and, with ``--power on``, ``energy_j``/``avg_power_w``) and power time series
(``timeseries.h5``: ``power_facility_w`` on the ``sample_dt`` grid) plus its ``summary.json``.
Pricing never changes a schedule, so one run can be priced under any number of rules (a sweep's
``pricing`` axis costs no extra runs). What *does* change the schedule is how users react to prices:
`UserResponse.apply` transforms the workload *before* the run (shifted submissions, accepted power
caps, fewer nodes); and `EnergyFairShare` is a scheduler whose priority comes from an energy ledger.

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

Published anchors, what they measured, and how they are represented here
-------------------------------------------------------------------------
(Looked up with the project's search tool; sources as cited. The papers' full texts were not
retrievable: what is not in the cited abstract, blog post, news item or artifact is marked as an
assumption.)

* **Kamatar et al. 2025**: A. Kamatar, M. Gonthier, V. Hayot-Sasson, A. Bauer, M. Copik, R. Castro
  Fernandez, T. Hoefler, K. Chard, I. Foster, "Core Hours and Carbon Credits: Incentivizing
  Sustainability in HPC", SC'25, doi:10.1145/3712285.3759858, arXiv:2501.09557 (v2 abstract); the
  first author's post on the Chameleon blog (2026-01-26); artifact github.com/AK2000/core-hours-artifact.
  They surveyed 316 HPC users (73 % knew their jobs' node-hours, 27 % their energy; energy efficiency
  ranked last among reasons to pick a machine), proposed Energy-Based Accounting (EBA: charge the
  energy a job uses) and Carbon-Based Accounting, measured the same benchmarks on different hardware
  (Cholesky on four CPU systems: Cascade Lake fastest but more than twice the energy of AMD Zen3;
  P100, V100, A100 GPUs: the A100 6 % faster than the V100 but 60 % more energy), simulated 71,190
  jobs with measured energy (energy-optimising users did 28 % more work with 40 % less energy) and ran
  the user study behind the anchor: a web game of HPC resource selection, 90 participants, three
  conditions (time-based cost; time-based cost with energy shown; EBA). Showing energy alone changed
  nothing; under EBA participants used 40 % less energy on average: "They didn't avoid
  energy-intensive jobs, but consistently selected more efficient machines to run them." So the
  40 % comes from *which resource* each task runs on: not from running fewer jobs, not from shifting
  them in time, not from fewer nodes. Representation: `UserResponse`'s **efficient choice**: a job's
  user (probability ``efficient_users``) picks the least-energy option of a menu within
  ``max_slowdown``: the older GPUs of the artifact's measurements (KAMATAR_GPU_RUNS: V100 0.627 x the
  energy at 1.063 x the runtime, P100 0.423 x at 1.652 x, against A100), emulated on the twin's nodes,
  and the machine's own GPU power caps. Preset ``kamatar2025`` has ``efficient_users`` fitted by
  `calibrate` to 40 % (KAMATAR2025_EFFICIENT_USERS). The 40 % is the participants' energy, so it is
  compared with the *jobs'* energy (``energy_j``) against node-hour charging without response; the
  facility's energy (idle nodes, losses, cooling) falls by less. Assumptions: the game's own menu and
  costs are not known to us (we use the artifact's measured GPU pairs and a 2x slowdown limit);
  the twin models one machine, so the other hardware's queue is not modelled. On a homogeneous
  Frontier-class machine the same incentive, with only its GPU caps to choose from, gives at most
  ~17 % less jobs' energy on KTH-SP2 even with every user responding (preset
  ``kamatar2025-homogeneous``): the anchor needs hardware heterogeneity.
* **Yang et al. 2013**: X. Yang, Z. Zhou, S. Wallace, Z. Lan, W. Tang, S. Coghlan, M. E. Papka,
  "Integrating Dynamic Pricing of Electricity into Energy Aware Scheduling for HPC Systems", SC'13
  (abstract on the SC13 programme page; HPCwire research highlight 2013-11-16; Argonne's summary of the
  predecessor, Zhou et al., JSSPP 2013). A *scheduler*, not users: it keeps a window of jobs at the
  front of the queue and, knowing each job's power profile (they differ "as high as over two times"),
  dispatches high-power jobs in the off-peak period and low-power jobs on-peak (Greedy and 0-1
  knapsack policies; the knapsack maximises nodes allocated under a power budget); trace-based
  simulations of an IBM Blue Gene/P and a cluster, and a case study on Argonne's 48-rack Blue
  Gene/Q; the electricity bill fell by up to 23 % (the predecessor: up to 25 %, with three on-peak to
  off-peak price ratios and three job-power ranges over six months of a Blue Gene/P workload) with
  negligible impact on utilisation. Not retrieved: the price ratios, on-peak hours, window size,
  power ranges and whether idle power is billed. Representation:
  `schedulers.price_aware.PriceAwareScheduler` and its setting ``schedulers.price_aware.YANG2013``
  (assumed: 2x job power spread, on-peak 08:00-20:00 at 3x, window of 10 jobs);
  ``UserResponse.preset("yang2013")`` raises and points there. `facility_cost` bills the facility's
  power; the per-job `EnergyCharge` (``pue_share=False``) bills the jobs' power.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from schedulers.backfill import QueueScheduler
from schedulers.base import ClusterView, JobTable
from twin.workload import Workload

if TYPE_CHECKING:
    from power.config import PowerConfig

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
        self.rate, self.weights, self.weight_by, self.units_per_node = float(rate), dict(weights or {}), weight_by, float(units_per_node)

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


# ====================================================================== user response
#: Kamatar et al. (SC'25) artifact, github.com/AK2000/core-hours-artifact, file gpu_experiments/results.csv
#: (commit f7b32304): one Cholesky benchmark (N = 2880, 50 tiles, 10 iterations, 1 GPU) measured on three
#: GPU generations: runtime (s) and mean BMC power (W).
KAMATAR_GPU_RUNS = {"A100": (1405.0, 1494.6666666666667), "V100": (1494.0, 881.3959731543624),
                    "P100": (2321.485266, 382.60645161290324)}


def _alternative(old: str, new: str = "A100") -> tuple[float, float]:
    """(energy ratio, runtime ratio) of running on GPU ``old`` instead of ``new`` (KAMATAR_GPU_RUNS)."""
    (t_o, p_o), (t_n, p_n) = KAMATAR_GPU_RUNS[old], KAMATAR_GPU_RUNS[new]
    return (t_o * p_o) / (t_n * p_n), t_o / t_n


#: Older, more efficient hardware relative to the newest (fastest) GPU, from KAMATAR_GPU_RUNS:
#: V100 0.627 x the energy at 1.063 x the runtime; P100 0.423 x the energy at 1.652 x the runtime. (The
#: Chameleon blog of the paper: "the A100 ran 6% faster than the V100 but used 60% more energy".)
KAMATAR_GPU_ALTERNATIVES = (_alternative("V100"), _alternative("P100"))
#: Operating points a responsive user may pick on the machine itself: device power caps as fractions of
#: each device's maximum power (an assumption: a facility offering four DVFS/cap levels).
DEFAULT_CHOICE_CAP_FRACTIONS = (0.85, 0.7, 0.55, 0.4)
#: Largest runtime multiplier a responsive user accepts for a cheaper configuration (an assumption; it
#: admits the oldest GPU of KAMATAR_GPU_RUNS, 1.65 x slower than the newest).
DEFAULT_MAX_SLOWDOWN = 2.0
#: ``efficient_users`` of the ``kamatar2025`` preset: fitted by `calibrate` (bisection on the predicted
#: jobs' energy, target 0.40 = Kamatar et al.'s user-study reduction) on KTH-SP2 (28,476 jobs) on 100
#: Frontier nodes, seed 0, with the preset's menu: 0.71118 -> 40.00 %. At the rounded value seeds 0, 1
#: and 2 give 40.2 %, 40.7 % and 39.7 %. ``python -m experiments.incentives_whatif --calibrate`` refits it.
KAMATAR2025_EFFICIENT_USERS = 0.7112
PROFILE_COLUMNS = ("cpu_util", "gpu_util", "compute_bound")


def load_power_config(system: Any) -> PowerConfig:
    """The `power.config.PowerConfig` of a system (a name, a path or a `twin.system.SystemSpec`)."""
    from power.config import parse_power  # noqa: PLC0415
    from twin.system import SystemSpec, load_system  # noqa: PLC0415
    spec = system if isinstance(system, SystemSpec) else load_system(str(system))
    if not spec.power:
        raise PricingError(f"user response: system {spec.path or spec.name} has no [power] table; "
                           "the efficient-choice response needs the machine's power model")
    return parse_power(dict(spec.power), nodes=spec.nodes, cpus_per_node=spec.cpus_per_node,
                       gpus_per_node=spec.gpus_per_node, path=spec.path or "")


def materialize_profiles(workload: Workload, seed: int) -> Workload:
    """A copy of ``workload`` whose ``cpu_util``, ``gpu_util`` and ``compute_bound`` columns are filled.

    Missing values get the power model's default draws (`power.profiles.job_profiles`: Beta(4, 2),
    Beta(3, 2), Beta(2, 2); SWF ``avg_cpu`` when known), from stream ``seeded_rng(seed,
    "user-response.profile")``. Use it on a log *before* comparing runs with and without a response,
    so both runs give each job the same profile (the power model otherwise draws per run, by the
    index of the job among the jobs that run).
    """
    from power.profiles import job_profiles  # noqa: PLC0415
    from twin.model_api import seeded_rng  # noqa: PLC0415
    wl = workload.take(np.arange(len(workload)))
    cpu, gpu, beta = job_profiles(wl.columns, len(wl), seeded_rng(seed, "user-response.profile"),
                                  np.asarray(wl.runtime, dtype=float))
    wl.columns.update({"cpu_util": cpu, "gpu_util": gpu, "compute_bound": beta})
    return wl


def _caps(wl: Workload, name: str) -> np.ndarray:
    c = wl.columns.get(name)
    return np.full(len(wl), np.inf) if c is None else np.where(np.isnan(np.asarray(c, float)), np.inf,
                                                                  np.asarray(c, float))


def _cap_stretch(cfg, cpu, gpu, beta, cpu_cap, gpu_cap) -> np.ndarray:
    """Runtime multiplier of jobs under per-device caps (W): Hsu-Feng beta model at the slower device's
    clock (`power.profiles.device_ratio`, vectorised)."""
    from power.profiles import frequency_ratio, stretch  # noqa: PLC0415
    a = cfg.cap_power_exponent
    ratio = np.ones(len(cpu))
    for util, cap, idle, mx, count in ((gpu, gpu_cap, cfg.gpu_idle_w, cfg.gpu_max_w, cfg.gpus_per_node),
                                       (cpu, cpu_cap, cfg.cpu_idle_w, cfg.cpu_max_w, cfg.cpus_per_node)):
        if count <= 0:
            continue
        cap = np.broadcast_to(np.asarray(cap, dtype=float), ratio.shape)
        on = np.isfinite(cap) & (util > 0)
        dyn = util * (mx - idle)
        capped = np.minimum(dyn, np.maximum(np.where(on, cap, 0.0) - idle, 0.0))
        ratio = np.where(on, np.minimum(ratio, frequency_ratio(dyn, capped, a)), ratio)
    return stretch(ratio, beta)


def predicted_job_energy_j(workload: Workload, system: Any, nodes: int | None = None) -> np.ndarray:
    """Node-component energy (J) of each job as the power model will integrate it, without running.

    energy = units x P_node(cpu_util, gpu_util, caps) x min(runtime x stretch, requested_time), with
    the stretch of `power.profiles` (caps) and the walltime kill (when requested_time > 0). Exact for
    runs without a facility power cap (whose throttling depends on the schedule) and with one unit a
    node. Jobs the run would skip (runtime <= 0, size < 1 or > ``nodes``, default the system's size)
    count 0. Needs the profile columns (`materialize_profiles`).
    """
    missing = [c for c in PROFILE_COLUMNS if c not in workload.columns]
    if missing:
        raise PricingError(f"predicted_job_energy_j: workload {workload.name!r} has no {', '.join(missing)} "
                           "column(s); call materialize_profiles(workload, seed) first")
    cfg = load_power_config(system)
    nodes = int(nodes or cfg.nodes)
    cpu, gpu, beta = (np.asarray(workload.columns[c], dtype=float) for c in PROFILE_COLUMNS)
    ccap, gcap = _caps(workload, "cpu_cap_w"), _caps(workload, "gpu_cap_w")
    p = cfg.node_power_w(cpu, gpu, ccap, gcap)
    run = np.asarray(workload.runtime, dtype=float) * _cap_stretch(cfg, cpu, gpu, beta, ccap, gcap)
    req = np.asarray(workload.requested_time, dtype=float)
    run = np.where(np.isfinite(req) & (req > 0), np.minimum(run, req), run)
    procs = np.asarray(workload.procs, dtype=float)
    ok = (np.asarray(workload.runtime, dtype=float) > 0) & (procs >= 1) & (procs <= nodes) & (workload.submit >= 0)
    return np.where(ok, procs * p * run, 0.0)


@dataclass
class UserResponse:
    """An optional behavioural model of users reacting to prices (applied to the workload before a run).

    For the shift, cap and fewer-nodes responses each *user* draws once whether they respond, so
    behaviour is consistent across their jobs; the efficient choice is drawn per *job* (the study
    behind it measured choices task by task, and per-job draws keep the calibrated reduction from
    hinging on a few heavy users). All probabilities are clipped to [0, 1]; every draw comes from
    ``seeded_rng(seed, "user-response")`` (per user: shift, cap, shrink; per job: shift, then
    efficient choice), so adding a response never changes the draws of another.

    * **Shift** (time-varying energy prices only): a job of a responsive user (probability
      ``shift_users``) whose submit time is not at the cheapest price within ``tolerance_h`` hours
      is delayed to the start of that cheapest period with probability ``shift_elasticity`` x the
      relative saving (p_now - p_min) / p_now.
    * **Efficient choice** (energy-based charging; the mechanism of Kamatar et al. 2025, see the module
      docstring): with probability ``efficient_users`` (the elasticity that `calibrate` fits) a
      job's user runs it in the configuration that minimises its energy (hence its
      charge) among a menu, subject to a runtime at most ``max_slowdown`` x the original:
      ``alternatives`` = ``(energy_ratio, runtime_ratio)`` pairs for other, more efficient hardware
      (default in the presets: Kamatar et al.'s measured V100 and P100 against A100), and
      ``choice_cap_fractions`` = power caps at these fractions of the device's maximum power on every
      GPU (on every CPU of a machine without GPUs): the machine's own operating points.
      The twin has one machine, so an alternative is *emulated* on its nodes: every device's
      utilisation is scaled by one factor so that the job's energy is energy_ratio x its energy
      (never below the nodes' idle power) while its runtime on the twin is unchanged: the other
      hardware is a separate machine whose queue the twin does not model, so wait times stay those
      of this machine, and runtime_ratio only decides whether the user accepts the option. A cap
      option slows the job (the power model's Hsu-Feng stretch) and its requested time grows by the
      same factor (so it is not killed). Option energies use the machine's power physics
      (`power.config.PowerConfig.node_power_w`), so they equal what the power model will integrate.
      Jobs that already carry a cap are left alone. Needs ``system`` in `apply` and the
      profile columns (drawn by `materialize_profiles` when missing).
    * **Accept a cap** (energy-based charging or a cap rebate): a responsive user (probability
      ``cap_elasticity`` x (1 + rebate), rebate 0 without a cap-rebate rule) runs every job with the
      device caps ``cap_cpu_w`` / ``cap_gpu_w`` (W per device; the power model slows the job; the
      requested time is not changed).
    * **Fewer nodes** (energy-based charging): a responsive user (probability ``shrink_users``) asks
      for ``(1 - shrink_fraction)`` of the units of each multi-unit job; the runtime grows as
      (n / n')^``scaling_exponent`` (1 = perfect strong scaling; below 1 the smaller run is more
      efficient), and the requested time by the same factor.

    Jobs changed by the efficient choice are not also capped or shrunk. Node-hour charging gives none
    of these incentives, so the model changes nothing under it. Calibrated parameter sets:
    `UserResponse.preset` (``kamatar2025``, ``kamatar2025-homogeneous``, ``illustrative``).
    """

    shift_users: float = 0.0
    shift_elasticity: float = 1.0
    tolerance_h: float = 6.0
    cap_elasticity: float = 0.0
    cap_cpu_w: float | None = None
    cap_gpu_w: float | None = None
    shrink_users: float = 0.0
    shrink_fraction: float = 0.5
    scaling_exponent: float = 0.8
    efficient_users: float = 0.0
    max_slowdown: float = DEFAULT_MAX_SLOWDOWN
    alternatives: tuple = ()
    choice_cap_fractions: tuple = ()

    def __post_init__(self):
        for k in ("shift_users", "shift_elasticity", "cap_elasticity", "shrink_users", "tolerance_h",
                  "efficient_users"):
            if not getattr(self, k) >= 0:
                raise PricingError(f"user response: {k} must be >= 0, got {getattr(self, k)!r}")
        if not 0 <= self.shrink_fraction < 1:
            raise PricingError(f"user response: shrink_fraction must be in [0, 1), got {self.shrink_fraction!r}")
        if not 0 < self.scaling_exponent <= 1.5:
            raise PricingError(f"user response: scaling_exponent must be in (0, 1.5], got {self.scaling_exponent!r}")
        if self.cap_elasticity > 0 and self.cap_cpu_w is None and self.cap_gpu_w is None:
            raise PricingError("user response: cap_elasticity > 0 needs cap_cpu_w and/or cap_gpu_w (W per device)")
        if not (self.max_slowdown >= 1 and math.isfinite(self.max_slowdown)):
            raise PricingError(f"user response: max_slowdown must be a finite number >= 1, got {self.max_slowdown!r}")
        try:
            alts = tuple((float(e), float(t)) for e, t in self.alternatives)
        except (TypeError, ValueError):
            raise PricingError("user response: alternatives must be (energy_ratio, runtime_ratio) pairs, got "
                               f"{self.alternatives!r}") from None
        for i, (e, t) in enumerate(alts):
            if not (e > 0 and t > 0 and math.isfinite(e) and math.isfinite(t)):
                raise PricingError(f"user response: alternatives[{i}] = ({e!r}, {t!r}): both ratios must be "
                                   "finite and > 0")
        self.alternatives = alts
        fr = tuple(float(f) for f in self.choice_cap_fractions)
        for f in fr:
            if not 0 < f <= 1:
                raise PricingError(f"user response: choice_cap_fractions must lie in (0, 1], got {f!r}")
        self.choice_cap_fractions = fr
        if self.efficient_users > 0 and not alts and not fr:
            raise PricingError("user response: efficient_users > 0 needs a menu: alternatives and/or "
                               "choice_cap_fractions")

    @classmethod
    def preset(cls, name: str) -> UserResponse:
        """A documented parameter set (see PRESETS): ``kamatar2025``, ``kamatar2025-homogeneous``,
        ``illustrative``. ``yang2013`` is a scheduler, not a user response: see
        `schedulers.price_aware.PriceAwareScheduler`."""
        if name == "yang2013":
            raise PricingError("user response preset 'yang2013': Yang et al. (SC'13) is a price-aware *scheduler*, "
                               "not a user response; use schedulers.price_aware.PriceAwareScheduler and "
                               "schedulers.price_aware.YANG2013")
        if name not in PRESETS:
            raise PricingError(f"unknown user response preset {name!r}; known: {', '.join(sorted(PRESETS))}, "
                               "and yang2013 (a scheduler)")
        return cls(**PRESETS[name])

    def apply(self, workload: Workload, rule: Rule, seed: int, system: Any = None) -> tuple[Workload, dict]:
        """The workload users would submit under ``rule``, and counts of what changed.

        ``system`` (a system name, path or `twin.system.SystemSpec`) is needed by the efficient choice.
        """
        from twin.model_api import seeded_rng  # noqa: PLC0415
        rng = seeded_rng(seed, "user-response")
        wl = workload.take(np.arange(len(workload)))
        n = len(wl)
        users = np.unique(wl.user)
        uidx = np.searchsorted(users, wl.user)
        u_shift = rng.random(len(users)) < self.shift_users
        u_cap = rng.random(len(users))
        u_shrink = rng.random(len(users)) < self.shrink_users
        job_u = rng.random(n)
        job_eff = rng.random(n)
        info = {"shifted": 0, "capped": 0, "shrunk": 0, "mean_shift_h": 0.0}
        energy_based = rule.needs_energy
        rebate = _find_rebate(rule)
        changed = np.zeros(n, dtype=bool)
        # ---- shift
        if rule.time_varying and self.shift_users > 0:
            tariff = _find_tariff(rule)
            tol = self.tolerance_h * 3600.0
            s = wl.submit
            bt, bv = tariff.breakpoints(float(s.min()), float(s.max()) + tol)
            i0 = np.clip(np.searchsorted(bt, s, side="right") - 1, 0, len(bt) - 1)
            p_now = bv[i0]
            best_p, best_t = p_now.copy(), s.copy()
            k = 1
            while True:
                ii = i0 + k
                valid = (ii < len(bt))
                if not valid.any():
                    break
                iic = np.minimum(ii, len(bt) - 1)
                within = valid & (bt[iic] <= s + tol)
                if not within.any():
                    break
                better = within & (bv[iic] < best_p)
                best_p = np.where(better, bv[iic], best_p)
                best_t = np.where(better, bt[iic], best_t)
                k += 1
            with np.errstate(divide="ignore", invalid="ignore"):
                saving = np.where(p_now > 0, (p_now - best_p) / p_now, 0.0)
            move = u_shift[uidx] & (best_t > s) & (job_u < np.clip(self.shift_elasticity * saving, 0, 1))
            if move.any():
                info["mean_shift_h"] = float(np.mean(best_t[move] - s[move]) / 3600.0)
            wl.submit = np.where(move, np.floor(best_t), s)
            info["shifted"] = int(move.sum())
        # ---- efficient choice
        if energy_based and self.efficient_users > 0:
            if system is None:
                raise PricingError("user response: the efficient choice (efficient_users > 0) needs the machine: "
                                   "apply(..., system=NAME_OR_SPEC)")
            chosen, counts = self._choose(wl, job_eff < min(self.efficient_users, 1.0), system, seed)
            changed |= chosen
            info["efficient_choice"] = counts
        # ---- caps
        if (energy_based or rebate > 0) and self.cap_elasticity > 0:
            take = (u_cap[uidx] < np.clip(self.cap_elasticity * (1.0 + rebate), 0, 1)) & ~changed
            for col, w in (("cpu_cap_w", self.cap_cpu_w), ("gpu_cap_w", self.cap_gpu_w)):
                if w is not None:
                    c = np.asarray(wl.columns.get(col, np.full(n, np.nan)), dtype=float).copy()
                    c[take] = np.fmin(c[take], float(w))
                    wl.columns[col] = c
            wl.columns["capped"] = take
            info["capped"] = int(take.sum())
        # ---- fewer nodes
        if energy_based and self.shrink_users > 0:
            sh = u_shrink[uidx] & (wl.procs > 1) & ~changed
            newp = np.maximum(1, np.round(wl.procs * (1 - self.shrink_fraction))).astype(np.int64)
            factor = np.where(sh, wl.procs / np.maximum(newp, 1), 1.0) ** self.scaling_exponent
            wl.runtime = np.where(sh, np.ceil(wl.runtime * factor), wl.runtime)
            wl.requested_time = np.where(sh, np.ceil(wl.requested_time * factor), wl.requested_time)
            wl.procs = np.where(sh, newp, wl.procs)
            info["shrunk"] = int(sh.sum())
        wl.notes = list(wl.notes) + [f"user response under {rule.describe()}: {info}"]
        return wl.sorted(), info

    def menu(self) -> list[str]:
        """Labels of the efficient-choice options, in the order of ``info['efficient_choice']``."""
        return ([f"alt(E x{e:.3g}, T x{t:.3g})" for e, t in self.alternatives]
                + [f"cap {f:g} x max" for f in self.choice_cap_fractions])

    def _choose(self, wl: Workload, responsive: np.ndarray, system: Any, seed: int) -> tuple[np.ndarray, dict]:
        """Apply the efficient choice in place to the ``responsive`` jobs; returns (changed mask, counts per option)."""
        cfg = load_power_config(system)
        n = len(wl)
        if any(c not in wl.columns for c in PROFILE_COLUMNS):
            prof = materialize_profiles(wl, seed)
            for c in PROFILE_COLUMNS:
                wl.columns[c] = prof.columns[c]
        cpu, gpu, beta = (np.asarray(wl.columns[c], dtype=float) for c in PROFILE_COLUMNS)
        ccap0, gcap0 = _caps(wl, "cpu_cap_w"), _caps(wl, "gpu_cap_w")
        eligible = responsive & np.isinf(ccap0) & np.isinf(gcap0) & (wl.runtime > 0)
        idle = cfg.node_idle_w
        p0 = cfg.node_power_w(cpu, gpu)
        dyn0 = np.maximum(p0 - idle, 0.0)
        ratios, slow, scale = [], [], []
        for e, t in self.alternatives:                      # emulated hardware: utilisation x k, same runtime
            with np.errstate(divide="ignore", invalid="ignore"):
                k = np.where(dyn0 > 0, np.clip((p0 * e - idle) / np.where(dyn0 > 0, dyn0, 1.0), 0.0, 1.0), 1.0)
            ratios.append((idle + k * dyn0) / p0)
            slow.append(np.full(n, t))
            scale.append(k)
        caps = []
        for f in self.choice_cap_fractions:                 # the machine's own operating points
            if cfg.gpus_per_node > 0:                       # GPU machines: cap the GPUs (most of the power)
                cc, gc = math.inf, max(f * cfg.gpu_max_w, cfg.gpu_idle_w)
            else:                                           # CPU-only machines: cap the CPUs
                cc, gc = max(f * cfg.cpu_max_w, cfg.cpu_idle_w), math.inf
            st = _cap_stretch(cfg, cpu, gpu, beta, cc, gc)
            ratios.append(cfg.node_power_w(cpu, gpu, cc, gc) * st / p0)
            slow.append(st)
            caps.append((cc, gc))
        R = np.vstack(ratios)
        S = np.vstack(slow)
        R = np.where(S <= self.max_slowdown * (1 + 1e-12), R, np.inf)
        best = np.argmin(R, axis=0)
        gain = R[best, np.arange(n)] < 1.0 - 1e-9
        pick = np.where(eligible & gain, best, -1)
        counts = {}
        n_alt = len(self.alternatives)
        req = np.asarray(wl.requested_time, dtype=float)
        new_req = req.copy()
        for o, label in enumerate(self.menu()):
            m = pick == o
            counts[label] = int(m.sum())
            if not m.any():
                continue
            if o < n_alt:
                k = scale[o][m]
                cpu[m] = cpu[m] * k
                gpu[m] = gpu[m] * k
            else:
                cc, gc = caps[o - n_alt]
                for col, w in (("cpu_cap_w", cc), ("gpu_cap_w", gc)):
                    c = np.asarray(wl.columns.get(col, np.full(n, np.nan)), dtype=float).copy()
                    if math.isfinite(w):
                        c[m] = w
                    wl.columns[col] = c
                new_req[m] = np.ceil(req[m] * S[o, m])
        ok = np.isfinite(req) & (req > 0)
        wl.requested_time = np.where(ok, new_req, req)
        wl.columns["cpu_util"], wl.columns["gpu_util"] = cpu, gpu
        wl.columns["efficient_choice"] = pick.astype(np.int64)
        return pick >= 0, counts


def calibrate(workload: Workload, system: Any, target: float, *, rule: Rule | None = None,
              base: UserResponse | None = None, seed: int = 0, nodes: int | None = None,
              tol: float = 0.005) -> tuple[UserResponse, float]:
    """Fit ``efficient_users`` of ``base`` so the jobs' energy falls by ``target`` (a fraction).

    The reduction compares the predicted jobs' energy (`predicted_job_energy_j`) of the workload users
    submit under ``rule`` (default: energy at a flat price) with the unchanged workload (node-hour
    charging gives no incentive). Bisection over [0, 1]: the reduction grows with the parameter
    (jobs respond in the order of their uniform draw, so the responding set only grows); it is a
    step function (one step per job), so the result is the step closest to ``target``. Profiles are
    materialised first (`materialize_profiles`). Returns (the fitted response, the reduction it
    gives). Raises `PricingError` when even ``efficient_users = 1`` falls short of ``target - tol``.
    """
    if not 0 < target < 1:
        raise PricingError(f"calibrate: target must be a fraction in (0, 1), got {target!r}")
    base = base if base is not None else UserResponse.preset("kamatar2025")
    rule = rule if rule is not None else EnergyCharge(FlatPrice(1.0))
    if not rule.needs_energy:
        raise PricingError(f"calibrate: rule {rule.describe()} gives no energy incentive")
    wl = materialize_profiles(workload, seed)
    e0 = float(predicted_job_energy_j(wl, system, nodes).sum())
    if not e0 > 0:
        raise PricingError(f"calibrate: workload {workload.name!r} has no job energy on this machine")

    def reduction(a: float) -> float:
        r = _replace(base, efficient_users=a)
        w2, _ = r.apply(wl, rule, seed, system=system)
        return 1.0 - float(predicted_job_energy_j(w2, system, nodes).sum()) / e0

    top = reduction(1.0)
    if top < target - tol:
        raise PricingError(f"calibrate: target {target:.1%} is out of reach on {workload.name} with this menu "
                           f"({', '.join(base.menu())}, max_slowdown {base.max_slowdown:g}): even with every user "
                           f"responding the jobs' energy falls by {top:.1%}")
    lo, hi, r_lo, r_hi = 0.0, 1.0, 0.0, top
    while hi - lo > 1e-6:
        mid = 0.5 * (lo + hi)
        r = reduction(mid)
        if r < target:
            lo, r_lo = mid, r
        else:
            hi, r_hi = mid, r
    a, got = (lo, r_lo) if abs(r_lo - target) < abs(r_hi - target) else (hi, r_hi)
    return _replace(base, efficient_users=a), got


def _replace(r: UserResponse, **kw) -> UserResponse:
    from dataclasses import asdict  # noqa: PLC0415
    d = asdict(r)
    d.update(kw)
    return UserResponse(**d)


PRESETS: dict[str, dict] = {
    # Kamatar et al. (SC'25): users choose more efficient resources when charged for energy. The menu is
    # the measured older GPUs (emulated on the twin's nodes) plus the machine's own cap levels; the share of
    # responding jobs is fitted to the 40 % anchor (KAMATAR2025_EFFICIENT_USERS, see `calibrate`).
    "kamatar2025": {"efficient_users": KAMATAR2025_EFFICIENT_USERS, "max_slowdown": DEFAULT_MAX_SLOWDOWN,
                    "alternatives": KAMATAR_GPU_ALTERNATIVES, "choice_cap_fractions": DEFAULT_CHOICE_CAP_FRACTIONS},
    # The same incentive on a homogeneous machine: only the machine's cap levels, every job responding
    # (an upper bound of what configuration choice alone gives).
    "kamatar2025-homogeneous": {"efficient_users": 1.0, "max_slowdown": DEFAULT_MAX_SLOWDOWN,
                                "choice_cap_fractions": DEFAULT_CHOICE_CAP_FRACTIONS},
    # The earlier illustrative inputs of experiments/incentives_whatif.py (not fitted to anything).
    "illustrative": {"shift_users": 0.5, "shift_elasticity": 1.0, "tolerance_h": 6.0, "cap_elasticity": 0.3,
                     "cap_gpu_w": 400.0, "shrink_users": 0.2, "shrink_fraction": 0.5, "scaling_exponent": 0.8},
}


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


def _find_tariff(rule: Rule) -> Tariff:
    if isinstance(rule, EnergyCharge):
        return rule.price
    for sub in getattr(rule, "rules", []) + [getattr(rule, "base", None)]:
        if sub is not None and sub.time_varying:
            return _find_tariff(sub)
    raise PricingError(f"rule {rule.describe()} has no time-varying energy price")


def _find_rebate(rule: Rule) -> float:
    if isinstance(rule, CapRebate):
        return rule.rebate
    for sub in getattr(rule, "rules", []) + [getattr(rule, "base", None)]:
        if sub is not None:
            r = _find_rebate(sub)
            if r:
                return r
    return 0.0


# ====================================================================== energy fair-share priority
class EnergyFairShare(QueueScheduler):
    """Fair-share priority from an energy ledger instead of CPU-seconds, with EASY backfilling.

    Each user's usage is the energy (J) of their finished jobs, decayed with half-life
    ``half_life_s`` (Slurm's ``PriorityDecayHalfLife``, default 7 days). The fair-share factor is
    Slurm's classic F = 2^(-U/S) with U the user's share of all decayed usage and S = 1 / (users seen
    so far) (equal shares). The queue is ordered by F (highest first), ties by arrival; backfilling
    is `QueueScheduler`'s (EASY by default). Job energies come from the run's power model
    (``power_model``, which `twin.run.run` sets to the run's `power.model.PowerModel`; the run needs
    ``--power on``); they are read at the first pass after a job finishes, when the model has closed
    its account.
    Use: ``--scheduler power.accounting:EnergyFairShare --power on``.
    """

    def __init__(self, half_life_s: float = 7 * 86400.0, backfill: str = "easy", name: str = "energy-fairshare"):
        if not half_life_s > 0:
            raise PricingError(f"EnergyFairShare: half_life_s must be > 0, got {half_life_s!r}")
        super().__init__("fcfs", backfill, name=name)
        self.half_life_s = float(half_life_s)
        self.order_name = "energy-fairshare"
        self.order = self._order
        self._static_order = False
        self.power_model = None           # set by twin.run.run to the run's PowerModel

    def describe(self) -> dict:
        return {"name": self.name, "order": "energy fair-share", "backfill": self.backfill,
                "half_life_s": self.half_life_s}

    def bind(self, jobs: JobTable, cluster: ClusterView) -> None:
        super().bind(jobs, cluster)
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
