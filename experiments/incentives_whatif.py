"""What-if: how charging rules, users' response and a price-aware scheduler change energy, cost and waits.

A real log (default KTH-SP2, 28,476 jobs, 100 nodes) is replayed with EASY on a machine of Frontier
nodes (``--system frontier``, HPE EX235a constants from ORNL RAPS) with the power model on. Every job
gets one utilisation profile (`power.accounting.materialize_profiles`, seeded) shared by all runs,
so runs differ only by what users or the scheduler do.

Part 1, charging rules and users (`power.accounting`): node-hours (1 per node-hour), energy at a flat
price and energy at a time-of-use price. Pricing alone does not change the schedule, so the run
without response is priced three times. With response, users react as `UserResponse` models them:

* ``kamatar2025`` (energy charging): each job's user, with the calibrated probability, runs it in
  the cheapest configuration of a menu: older GPUs with the energy and runtime ratios Kamatar et al.
  measured (V100, P100 against A100) or GPU power caps, within 2x the runtime. The older GPUs are a
  separate machine; the twin emulates each on nodes of its own partition at their speed and power
  (`power.response`, "Emulated hardware"): the job runs runtime_ratio x longer (its requested time
  grows with it) at the node power that gives energy_ratio x its energy, floored at the node's idle
  power (those jobs are counted). So this row's waits and slowdowns include the slower hardware.
  Anchor: about 40 % less energy than under node-hour charging (Kamatar et al., SC'25 user study).
  **Partitions**: a user who "selects a more efficient machine" sends the job to that machine's
  queue, so this row runs the twin once per machine (`UserResponse.apply_partitioned`): the
  jobs that stay on ``--nodes`` Frontier nodes, and each older-GPU option that was chosen on its
  own partition of ``--alt-nodes`` nodes (default: ``--nodes``, i.e. the facility keeps an older
  machine of the same size per option; jobs larger than a partition do not choose it), each with
  its own EASY queue. The older partitions use the Frontier node power model (the emulation
  above): a job's node power is floored at Frontier's idle power, and the partition's idle nodes
  draw it too (we have no measured idle power of V100/P100 nodes; the artifact's P100 node drew
  383 W under load, so for P100 partitions this is an upper bound). `combine_partitions` sums
  facility energy (each machine powered over the common window, at its idle facility power
  outside its own run), costs (each partition priced on its own run) and the facility power
  series (on one grid); waits and bounded slowdowns are over all jobs; ``partitions`` gives the
  jobs per partition. Keeping two more machines powered raises the facility energy even though
  the jobs' energy falls.
  The reduction is measured on the jobs' energy (what users are charged for); the facility's energy
  (with idle nodes and cooling) is shown beside it.
* ``kamatar2025-homogeneous``: the same incentive when the only choice is the machine's own cap
  levels, every job responding: what a homogeneous Frontier-class machine alone allows.
* ``illustrative`` (time-of-use energy charging): the earlier, unfitted inputs (shift, cap, fewer nodes).

Part 2, a price-aware scheduler (`schedulers.price_aware.PriceAwareScheduler`, Yang et al., SC'13):
in Yang et al.'s setting as far as it is known (`schedulers.price_aware.YANG2013`: job power spread
2x, on-peak 08:00-20:00 at 3x the off-peak price, window of 10 jobs) EASY, the greedy policy, the
knapsack policy at its default budget (0.8) and the knapsack with its on-peak budget fitted by
bisection to the 23 % anchor over [0.2, 1] (labelled "closest fit, anchor out of reach" when no
budget there gets within 1 point; ``--budget B`` sets it instead). Measured: the jobs' electricity
bill (job power x time-of-use price, Yang et al.'s quantity as we read it) and the facility's bill
(facility power incl. idle nodes and cooling), against EASY on the same workload; ``yang_ratios.md``
repeats this at price ratios 2, 3 and 5.

Tables (``results.md``/``.tex``/``.csv``): energy (MWh, facility), jobs' energy (MWh), peak facility
power (kW, over 15 s averages), total cost, Gini coefficient of the per-user cost, mean wait (s), mean
bounded slowdown (tau = 10 s), jobs killed at their requested time, jobs whose emulated hardware ran
at the node's idle-power floor, and for anchored rows the measured reduction beside the anchor.
Figure ``facility_power_week.png``: facility power over one week under each scenario. ``--out`` (which
also keeps the system file the runs used, ``<system>-no-network.toml``) is checked before the first
run and written atomically: it must not exist, be empty, or be a folder hpctwin wrote, replaced only
with ``--force``.

Usage: ``python -m hpctwin.experiments.incentives_whatif [-w KTH-SP2] [--nodes 100] [--alt-nodes N] [--out DIR]
[--calibrate]`` (options: the vocabulary of ``docs/experiments.md``; ``--log`` is a deprecated alias of ``-w``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hpctwin.power.accounting import (
    EnergyCharge,
    FlatPrice,
    NodeHours,
    TimeOfUse,
    facility_cost,
    from_result,
    ledger,
    spread,
)
from hpctwin.power.response import (
    HOME_PARTITION,
    UserResponse,
    calibrate,
    materialize_profiles,
    predicted_job_energy_j,
)
from hpctwin.schedulers.price_aware import YANG2013, tou_periods
from hpctwin.twin.metrics import summarise
from hpctwin.twin.run import RunConfig, load_workload, run

from . import cli
from .tables import display_name, staged_output, write_tables

#: illustrative prices (currency units per kWh); time-of-use: cheap night 23:00-07:00 (log clock + t0_hour)
FLAT = 0.12
TOU = [[0, 7, 0.08], [7, 23, 0.20], [23, 24, 0.08]]
#: published anchors (fractions): Kamatar et al. SC'25 user study; Yang et al. SC'13 ("as much as 23%")
KAMATAR_ANCHOR = 0.40
YANG_ANCHOR = 0.23
#: the price-aware scheduler's class, for ``--scheduler`` (module:Class)
PRICE_AWARE = "hpctwin.schedulers.price_aware:PriceAwareScheduler"


def power_only_system(name: str, out_dir: str | Path) -> str:
    """Write a copy of a built-in system file without its [network] table and return its path.

    Pricing does not need the interconnect, and a machine resized to a log's size (e.g. 100 Frontier
    nodes) may not fit the system's network preset; dropping the table keeps the power and cooling
    models exactly as they are.
    """
    from hpctwin.twin.system import load_system  # noqa: PLC0415
    src = Path(load_system(name).path)
    keep, skip = [], False
    for line in src.read_text().splitlines():
        head = line.strip()
        if head.startswith("[") and not head.startswith("[["):
            skip = head == "[network]" or head.startswith("[network.")
        if not skip:
            keep.append(line)
    out = Path(out_dir) / f"{src.stem}-no-network.toml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(keep) + "\n")
    return str(out)


def rules() -> dict:
    return {"node-hours": NodeHours(rate=1.0), "energy-flat": EnergyCharge(FlatPrice(FLAT)),
            "energy-tou": EnergyCharge(TimeOfUse(TOU))}


def yang_profiles(wl, spread_ratio: float, seed: int, system: str):
    """A copy of ``wl`` whose jobs draw per-node power uniformly in [P_top / spread_ratio, P_top]
    (P_top = 96 % of the node's maximum, i.e. 2,600 W on Frontier), with equal CPU and GPU utilisation:
    Yang et al.'s observation that job power differs by up to ``spread_ratio`` (2x)."""
    from hpctwin.power.response import load_power_config  # noqa: PLC0415
    from hpctwin.twin.model_api import seeded_rng  # noqa: PLC0415
    cfg = load_power_config(system)
    idle, top = cfg.node_idle_w, 0.96 * float(cfg.node_power_w(1.0, 1.0))
    lo = top / spread_ratio
    if lo < idle:
        raise ValueError(f"power spread {spread_ratio:g}x does not fit between idle {idle:g} W and {top:g} W")
    p = seeded_rng(seed, "yang2013.power").uniform(lo, top, len(wl))
    u = (p - idle) / (float(cfg.node_power_w(1.0, 1.0)) - idle)
    out = wl.take(np.arange(len(wl)))
    out.columns.update({"cpu_util": u, "gpu_util": u.copy()})
    return out


def simulate(wl, args, scheduler: str = "easy", sched_options: dict | None = None, nodes: int | None = None):
    opts = {"power": {"cooling": not args.no_cooling}}
    if sched_options:
        opts["scheduler"] = dict(sched_options)
    cfg = RunConfig(workload=args.workload, system=args.system, nodes=nodes or args.nodes, power=True, seed=args.seed,
                    data_dir=args.data_dir, scheduler=scheduler, options=opts, quiet=True)
    r = run(cfg, wl)
    if "capped" in wl.columns:            # for cap rebates: which jobs ran capped, by job id
        capped = dict(zip(wl.job_id.tolist(), np.asarray(wl.columns["capped"], dtype=bool).tolist()))
        r.jobs["capped"] = r.jobs["job_id"].map(capped).fillna(False).astype(bool)
    return r


@dataclass
class PartitionedRun:
    """Several partitions' runs seen as one (duck-types the parts of `twin.run.RunResult` used here).

    ``jobs``: the partitions' job tables concatenated, with a ``hw_partition`` column; ``summary``:
    ``energy_facility_kwh`` (sum over partitions, each padded to the common window), ``mean_wait_s``,
    ``mean_bsld`` (over all jobs, `twin.metrics.summarise`), ``partition_jobs``, ``partition_nodes``,
    ``padding_h`` (hours each partition was padded at idle); ``timeseries``: ``time`` and
    ``power_facility_w`` (sum of the partitions' series on the common grid); ``parts``: the runs.
    """

    jobs: pd.DataFrame
    summary: dict
    timeseries: dict
    parts: dict = field(default_factory=dict)


def idle_facility_w(r) -> float:
    """Facility power (W) of a run's machine with every node idle, cooling plant included.

    ``summary['idle_facility_power_w']`` (idle nodes, switches, losses, CDU pumps) times the run's mean
    PUE (facility / rack energy) for the cooling plant; this counts the CDU pumps' power x (PUE - 1)
    twice, a few watts on a 100-node partition (an approximation for the padding only).
    """
    s = r.summary
    rack = s["energy_facility_kwh"] - s["energy_cooling_kwh"]
    pue = s["energy_facility_kwh"] / rack if rack > 0 else 1.0
    return float(s["idle_facility_power_w"]) * pue


def combine_partitions(parts: dict, dt: float | None = None) -> PartitionedRun:
    """One `PartitionedRun` from ``{label: RunResult}``, the runs of each partition of one scenario.

    Every partition's machine is powered over the common window [T0, T1] (T0: the earliest start of
    the partitions' sampling grids, T1: the last job end over all partitions). A run covers only
    [its grid start, its last job end], so each partition is padded outside its own span at its idle
    facility power (`idle_facility_w`): in its facility energy and in the summed facility power
    series (its series placed on the common grid T0 + k dt, the idle value elsewhere). Jobs' energy
    and per-job figures are the partitions' own, concatenated.
    """
    if not parts:
        raise ValueError("combine_partitions: no partition runs")
    dts = {float(r.config.sample_dt) for r in parts.values()}
    if len(dts) != 1:
        raise ValueError(f"combine_partitions: partitions sampled at different steps {sorted(dts)} s")
    dt = dts.pop() if dt is None else float(dt)
    starts = {k: float(r.timeseries["time"][0][0]) for k, r in parts.items()}
    ends = {k: float(np.nanmax(r.jobs["end"].to_numpy(float))) for k, r in parts.items()}
    t0, t1 = min(starts.values()), max(ends.values())
    n = max(1, math.ceil((t1 - t0) / dt - 1e-9))
    grid = t0 + dt * np.arange(n)
    total = np.zeros(n)
    e_fac, pad_h, jobs = 0.0, {}, []
    for k, r in parts.items():
        p_idle = idle_facility_w(r)
        p = np.asarray(r.timeseries["power_facility_w"][0], dtype=float)
        off = round((starts[k] - t0) / dt)
        if abs(off * dt - (starts[k] - t0)) > 1e-6 * dt:
            raise ValueError(f"combine_partitions: partition {k!r} grid starts off the common {dt:g} s grid")
        series = np.full(n, p_idle)
        m = min(len(p), n - off)
        series[off:off + m] = p[:m]
        total += series
        pad_s = (starts[k] - t0) + (t1 - ends[k])
        pad_h[k] = pad_s / 3600.0
        e_fac += r.summary["energy_facility_kwh"] + p_idle * pad_s / 3.6e6
        jobs.append(r.jobs.assign(hw_partition=k))
    jt = pd.concat(jobs, ignore_index=True)
    nodes = {k: int(r.summary["machine_units"]) for k, r in parts.items()}
    sm = summarise(jt["submit"].to_numpy(float), jt["start"].to_numpy(float), jt["end"].to_numpy(float),
                   jt["procs"].to_numpy(float), sum(nodes.values()), next(iter(parts.values())).config.tau)
    sm.update({"energy_facility_kwh": e_fac, "partition_jobs": {k: len(r.jobs) for k, r in parts.items()},
               "partition_nodes": nodes, "padding_h": pad_h, "window_s": [t0, t1]})
    ts = {"time": (grid, "s (start of each interval, log clock)"),
          "power_facility_w": (total, "W, sum over partitions (idle-padded outside each run)")}
    return PartitionedRun(jt, sm, ts, dict(parts))


def partitioned_ledger(run: PartitionedRun, rule) -> pd.DataFrame:
    """Per-user ledger under ``rule``, each partition priced on its own run (its own PUE share), summed."""
    leds = [ledger(from_result(r), rule) for r in run.parts.values()]
    return pd.concat(leds, ignore_index=True).groupby("user", sort=True).sum().reset_index()


def job_energy_mwh(r) -> float:
    return float(np.nansum(r.jobs["energy_j"].to_numpy(float))) / 3.6e9


def row(name: str, response: str, r, rule, scheduler: str = "easy") -> dict:
    led = partitioned_ledger(r, rule) if isinstance(r, PartitionedRun) else ledger(from_result(r), rule)
    s = r.summary
    pj = s.get("partition_jobs")
    return {"rule": name, "response": response, "scheduler": scheduler, "seed": 0,
            "partitions": " + ".join(f"{k}: {v}" for k, v in pj.items()) if pj else "",
            "energy_mwh": s["energy_facility_kwh"] / 1e3, "job_energy_mwh": job_energy_mwh(r),
            "peak_facility_kw": float(np.nanmax(r.timeseries["power_facility_w"][0])) / 1e3,
            "total_cost": float(led["cost"].sum()), "cost_gini_user": spread(led["cost"].to_numpy())["gini"],
            "mean_wait_s": s["mean_wait_s"], "mean_bsld": s["mean_bsld"], "killed_jobs": _killed(r),
            "below_idle_jobs": np.nan, "measured_pct": np.nan, "facility_pct": np.nan, "anchor_pct": np.nan,
            "anchor": ""}


def _killed(r) -> int:
    """Jobs the run ended at their requested time (walltime kills)."""
    return int((r.jobs["state"] == "TIMEOUT").sum()) if "state" in r.jobs.columns else 0


def bills(r, ratio: float) -> tuple[float, float]:
    """(jobs' bill, facility bill) of a run under the two-level tariff at ``ratio`` (off-peak price 1)."""
    tou = TimeOfUse(tou_periods(ratio))
    d = from_result(r)
    return float(EnergyCharge(tou, pue_share=False).charge(d).sum()), facility_cost(d, tou)


def fit_budget(wl, args, target: float, ratio: float, base_bill: float, lo: float = 0.2, hi: float = 1.0,
               iters: int = 9) -> tuple[float, float, object]:
    """Bisection on the knapsack's on-peak budget fraction so the jobs' bill falls by ``target`` at
    ``ratio`` against ``base_bill``; the saving shrinks as the budget grows. Returns (budget, saving,
    run) of the evaluated budget closest to the target (``lo`` when even ``lo`` falls short)."""
    best = None
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        r = simulate(wl, args, PRICE_AWARE, {"policy": "knapsack", "window": YANG2013["window"],
                                             "periods": tou_periods(ratio), "budget_fraction": mid})
        sav = 1.0 - bills(r, ratio)[0] / base_bill
        print(f"  knapsack budget {mid:.4f}: jobs' bill -{sav:.2%}", flush=True)
        if best is None or abs(sav - target) < abs(best[1] - target):
            best = (mid, sav, r)
        if sav > target:
            lo = mid
        else:
            hi = mid
    return best


def main(argv=None) -> pd.DataFrame:
    ap = cli.parser("incentives_whatif", __doc__)
    cli.add_workload(ap, "KTH-SP2", several=False, aliases=("--log",))
    cli.add_system(ap, "frontier", several=False, aliases=(),
                   help_text="machine whose node power model the runs use (a built-in name or a .toml file)")
    ap.add_argument("--nodes", type=cli.positive_int, default=100, help="machine size (nodes)")
    cli.add_job_window(ap)
    cli.add_seed(ap, "seed of the utilisation profiles, the users' responses and the runs")
    cli.add_data_dir(ap)
    ap.add_argument("--no-cooling", action="store_true", help="skip the cooling plant model (faster)")
    ap.add_argument("--calibrate", action="store_true",
                    help="refit the kamatar2025 elasticity on this log instead of using the preset's value")
    ap.add_argument("--no-yang", action="store_true", help="skip part 2 (the price-aware scheduler)")
    ap.add_argument("--budget", type=float, default=None,
                    help="knapsack on-peak budget of the last Yang row instead of fitting it to the anchor "
                         "(default: fitted)")
    ap.add_argument("--week-start-day", type=float, default=None,
                    help="first day of the plotted week (default: the median submit time)")
    ap.add_argument("--alt-nodes", type=int, default=None,
                    help="nodes of each older-hardware partition of the kamatar2025 row (default: --nodes, "
                         "i.e. the facility keeps an older machine of the same size per option)")
    cli.add_out(ap, "results/incentives_whatif")
    a = ap.parse_args(argv)
    if a.alt_nodes is None:
        a.alt_nodes = a.nodes
    if a.alt_nodes < 1:
        ap.error(f"--alt-nodes must be >= 1, got {a.alt_nodes}")
    with staged_output("python -m hpctwin.experiments.incentives_whatif", a.out, a.force) as out:
        df, ratio_rows = _run_and_write(a, out)
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        print(df.drop(columns=["seed", "anchor"]).to_string())
        if ratio_rows:
            print(pd.DataFrame(ratio_rows).to_string())
    return df


def _run_and_write(a, out: Path) -> tuple[pd.DataFrame, list[dict]]:
    """Both parts' runs, then the tables, the system file the runs used and the plot into ``out``.
    Returns the table's rows and the price-ratio rows."""
    system_name = a.system
    from hpctwin.twin.run import job_window  # noqa: PLC0415
    wl = materialize_profiles(job_window(load_workload(a.workload, data_dir=a.data_dir, seed=a.seed), a.max_jobs,
                                         a.skip_jobs), a.seed)
    a.system = power_only_system(a.system, out)
    R = rules()
    rows, series = [], {}

    # ---------------------------------------------------------------- part 1: charging rules and users
    base = simulate(wl, a)
    for name, rule in R.items():
        rows.append(row(name, "none", base, rule))
    series["baseline (EASY, no response)"] = base
    e_base, f_base = job_energy_mwh(base), base.summary["energy_facility_kwh"] / 1e3
    kam = UserResponse.preset("kamatar2025")
    if a.calibrate:
        kam, got = calibrate(wl, system_name, KAMATAR_ANCHOR, seed=a.seed, nodes=a.nodes,
                             partition_nodes=a.alt_nodes)
        print(f"kamatar2025 refit on {display_name(a.workload)}: efficient_users = {kam.efficient_users:.5f} "
              f"(predicted jobs' energy -{got:.2%})", flush=True)
    e_pred0 = float(predicted_job_energy_j(wl, system_name, a.nodes).sum())
    for label, resp, rule_name in (("kamatar2025", kam, "energy-flat"),
                                   ("kamatar2025-homogeneous", UserResponse.preset("kamatar2025-homogeneous"),
                                    "energy-flat"),
                                   ("illustrative", UserResponse.preset("illustrative"), "energy-tou")):
        if label == "kamatar2025":       # older hardware on its own partitions, one run each
            parts, info = resp.apply_partitioned(wl, R[rule_name], a.seed, system=system_name,
                                                 partition_nodes=a.alt_nodes)
            runs = {k: simulate(v, a, nodes=a.nodes if k == HOME_PARTITION else a.alt_nodes)
                    for k, v in parts.items() if len(v)}
            r = combine_partitions(runs)
            e_pred_new = sum(float(predicted_job_energy_j(v, system_name, a.nodes if k == HOME_PARTITION
                                                          else a.alt_nodes).sum()) for k, v in parts.items())
            print(f"{label}: partitions {info['partitions']} (nodes: home {a.nodes}, others {a.alt_nodes} each); "
                  f"idle padding h {r.summary['padding_h']}", flush=True)
            # the same facility without the response: the older machines exist but sit idle over the
            # baseline's window, so the facility comparison is between equal facilities
            base_span_s = float(base.jobs["end"].max() - base.jobs["submit"].min())
            f_base_kam = f_base + sum(idle_facility_w(x) for k, x in runs.items()
                                      if k != HOME_PARTITION) * base_span_s / 3.6e9
        else:
            wl2, info = resp.apply(wl, R[rule_name], a.seed, system=system_name)
            r = simulate(wl2, a)
            e_pred_new = float(predicted_job_energy_j(wl2, system_name, a.nodes).sum())
        rw = row(rule_name, label, r, R[rule_name])
        if label.startswith("kamatar"):
            pred = 1.0 - e_pred_new / e_pred0
            rw.update(below_idle_jobs=info["emulation"]["below_idle"] if "emulation" in info else np.nan,
                      measured_pct=100 * (1 - job_energy_mwh(r) / e_base),
                      facility_pct=100 * (1 - rw["energy_mwh"] / (f_base_kam if label == "kamatar2025" else f_base)),
                      anchor_pct=100 * KAMATAR_ANCHOR,
                      anchor="Kamatar 2025: energy -40 % (user study)")
            print(f"{label}: jobs' energy {-rw['measured_pct']:+.2f} % (predicted {-100 * pred:+.2f} %), "
                  f"facility energy {-rw['facility_pct']:+.2f} %; mean wait {rw['mean_wait_s']:.0f} s, bsld "
                  f"{rw['mean_bsld']:.2f}; choices {info.get('efficient_choice')}; emulated hardware clipped "
                  f"{info.get('emulation')}", flush=True)
        else:
            print(f"{label} under {rule_name}: {info}", flush=True)
        rows.append(rw)
        series[f"{rule_name} + {label}"] = r
    rows.insert(1, dict(rows[0], response="(no incentive)"))   # node-hours: no incentive, same schedule

    # ---------------------------------------------------------------- part 2: price-aware scheduler
    ratio_rows = []
    yang_series = {}
    budget = a.budget
    if not a.no_yang:
        ratio = YANG2013["price_ratios"][1]
        per = tou_periods(ratio)
        wly = yang_profiles(wl, YANG2013["power_spread"], a.seed, system_name)
        tou_rule = EnergyCharge(TimeOfUse(per), pue_share=False)
        rname = f"tou 1:{ratio:g} (Yang setting)"
        yb = simulate(wly, a)
        b_jobs, b_fac = bills(yb, ratio)
        runs = {"easy": yb}
        for pol in ("greedy", "knapsack"):
            runs[f"price-aware {pol}"] = simulate(wly, a, PRICE_AWARE, {"policy": pol, "window": YANG2013["window"],
                                                                      "periods": per})
        if budget is None:
            print(f"fitting the knapsack budget to the {YANG_ANCHOR:.0%} anchor:", flush=True)
            budget, sav, rfit = fit_budget(wly, a, YANG_ANCHOR, ratio, b_jobs)
            how = "fitted" if abs(sav - YANG_ANCHOR) <= 0.01 else "closest fit, anchor out of reach"
        else:
            rfit = simulate(wly, a, PRICE_AWARE, {"policy": "knapsack", "window": YANG2013["window"],
                                                  "periods": per, "budget_fraction": budget})
            how = "given"
        runs[f"price-aware knapsack, budget {budget:.3f} ({how})"] = rfit
        for sname, r in runs.items():
            rw = row(rname, "none", r, tou_rule, scheduler=sname)
            jb, fb = bills(r, ratio)
            if sname != "easy":
                rw.update(measured_pct=100 * (1 - jb / b_jobs), facility_pct=100 * (1 - fb / b_fac),
                          anchor_pct=100 * YANG_ANCHOR, anchor="Yang 2013: bill up to -23 %")
            rows.append(rw)
            yang_series[sname] = r
            for k in YANG2013["price_ratios"]:
                j0, f0 = bills(yb, k)
                jk, fk = bills(r, k)
                ratio_rows.append({"scheduler": sname, "price_ratio": k, "seed": a.seed,
                                   "jobs_bill_red_pct": 100 * (1 - jk / j0),
                                   "facility_bill_red_pct": 100 * (1 - fk / f0),
                                   "mean_wait_s": r.summary["mean_wait_s"]})
    df = pd.DataFrame(rows)
    sysname = Path(a.system).stem.removesuffix('-no-network')
    window = cli.window_text(a.max_jobs, a.skip_jobs)
    log_text = display_name(a.workload) + (f" ({window})" if window else "")
    cap = (f"Log {log_text} on {a.nodes} {sysname} nodes, power model on (facility energy and power: IT + conversion "
           "losses + cooling; peak over 15 s averages; jobs' energy: node components of the jobs' nodes). "
           f"Rules: node-hours at 1/node-h; energy with PUE share at a flat {FLAT}/kWh; energy at time-of-use "
           f"{TOU} per kWh (hours of the log clock). Responses: power.response.UserResponse presets "
           f"(kamatar2025: efficient_users {kam.efficient_users:.4f}, calibrated; kamatar2025-homogeneous: caps "
           "only, all jobs; illustrative: not fitted). kamatar2025: the jobs that choose older GPUs run on their "
           f"own partition per option ({a.alt_nodes} nodes each, an assumption: the facility keeps an older machine "
           f"of that size per option; the jobs that stay run on the {a.nodes} Frontier nodes), each partition its own "
           "EASY queue; 'Partitions (jobs)' lists the jobs per partition (home: Frontier). The older partitions "
           "are modelled "
           "with the Frontier node power model: a job runs at its hardware's speed (runtime and requested time x "
           "the runtime ratio) and energy (x the energy ratio, floored at the node idle power, 626 W on Frontier; "
           "'Jobs at the idle-power floor': jobs run at that floor), and the partition's idle nodes draw that idle "
           "power too. "
           "Energy, facility energy and cost are summed over partitions (each machine powered over the common "
           "window first submit .. last end, idle outside its own run; cost per partition with its own PUE "
           "share); waits and bsld over all jobs; peak facility power of the summed series. 'Measured reduction': "
           "reduction of the "
           "jobs' energy against node-hours with no response (Kamatar rows), of the jobs' electricity bill "
           "against EASY on the same workload (Yang rows); 'Facility reduction': the same for facility energy / "
           "facility "
           "bill (kamatar2025 row: against the baseline facility including the same older machines, idle over "
           "the baseline's window, so both sides have the same machines). Yang rows: job "
           f"power spread {YANG2013['power_spread']:g}x, tariff {tou_periods(YANG2013['price_ratios'][1])} "
           f"(price units), window {YANG2013['window']}, EASY backfilling. Cost Gini over users. "
           "wait = start - submit; bsld = max(1, (wait + run) / max(run, 10 s)).")
    write_tables(df, out, ["rule", "response", "scheduler", "partitions"],
                 ["energy_mwh", "job_energy_mwh", "peak_facility_kw", "total_cost", "cost_gini_user", "mean_wait_s",
                  "mean_bsld", "killed_jobs", "below_idle_jobs", "measured_pct", "facility_pct", "anchor_pct"], cap,
                 missing_note="{dash}: not applicable (a single machine, no emulated hardware, "
                              "or no anchor for the row).")
    if ratio_rows:
        write_tables(pd.DataFrame(ratio_rows), out, ["scheduler", "price_ratio"],
                     ["jobs_bill_red_pct", "facility_bill_red_pct", "mean_wait_s"],
                     f"Price-aware scheduling (Yang et al. SC'13 setting, {log_text} on {a.nodes} {sysname} nodes): "
                     "reduction of the jobs' and the facility's electricity bill against EASY on the same workload, "
                     "for on-peak (08:00-20:00) to off-peak price ratios 2, 3, 5. Anchor: up to 23 %.",
                     stem="yang_ratios")
    _plot(a, series, yang_series, out)
    return df, ratio_rows


def _plot(a, series: dict, yang_series: dict, out: str | Path | None = None) -> None:
    """``facility_power_week.png`` into ``out`` (default ``a.out``)."""
    from hpctwin.twin.plot import figure, save_png  # noqa: PLC0415
    first = next(iter(series.values()))
    t = first.timeseries["time"][0]
    d0 = (a.week_start_day * 86400.0) if a.week_start_day is not None else float(np.median(t))
    panels = [("charging rules and users", series)] + ([("price-aware scheduling (Yang setting)", yang_series)]
                                                        if yang_series else [])
    fig, axes = figure(len(panels), 1, height_in=2.4 * len(panels) + 0.3, sharex=True)
    for ax, (title, ser) in zip(axes[:, 0], panels):
        for label, r in ser.items():
            tt, p = r.timeseries["time"][0], r.timeseries["power_facility_w"][0]
            m = (tt >= d0) & (tt < d0 + 7 * 86400)
            ax.step((tt[m] - d0) / 86400.0, p[m] / 1e3, where="post", lw=0.5, label=label)
        ax.set_ylabel("facility power (kW)")
        ax.set_title(title)
        ax.legend(fontsize=5)
    axes[-1, 0].set_xlabel(f"days after day {d0 / 86400:.1f} of the log")
    save_png(fig, Path(a.out if out is None else out) / "facility_power_week.png")


if __name__ == "__main__":
    main()
