"""What-if: how charging rules and users' response to them change energy, peak power, cost and waits.

A real log (default KTH-SP2, 28,476 jobs, 100 nodes) is replayed with EASY on a machine of Frontier
nodes (``--system frontier``, HPE EX235a constants from ORNL RAPS) with the power model on. Three
charging rules (`power.accounting`): node-hours (1 per node-hour), energy at a flat price, and energy
at a time-of-use price. Pricing itself is post-processing: the schedule without user response is the
same for all three rules, and is priced three times. *With* response, users react as modelled by
`power.accounting.UserResponse` (each user draws once): under time-of-use prices half of the users
shift a job to the cheapest period within 6 h with probability = relative saving; under energy-based
charging 30 % of users accept a GPU cap of 400 W per MI250X (560 W TDP) and 20 % ask for half the
nodes (runtime x 2^0.8). These elasticities are illustrative inputs, *not* fitted; the published
anchors to calibrate them against are about 40 % less energy when charging by energy instead of
node-hours (Kamatar et al. 2025) and up to 23 % lower electricity bills with price-aware scheduling
(Yang et al., SC'13). Node-hour charging gives no incentive, so its response run is the baseline.

Table (``results.md``/``.tex``/``.csv``): energy (MWh, facility), peak facility power (kW, over 15 s
averages), total cost, Gini coefficient of the per-user cost, mean wait (s), mean bounded slowdown
(tau = 10 s). Figure ``facility_power_week.png``: facility power over one week under each scenario.

Usage: ``python -m experiments.incentives_whatif [--log KTH-SP2] [--nodes 100] [--out DIR]``
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from power.accounting import (EnergyCharge, FlatPrice, NodeHours, TimeOfUse, UserResponse, from_result,
                              ledger, spread)
from twin.run import RunConfig, load_workload, run

from .tables import write_tables

#: illustrative prices (currency units per kWh); time-of-use: cheap night 23:00-07:00 (log clock + t0_hour)
FLAT = 0.12
TOU = [[0, 7, 0.08], [7, 23, 0.20], [23, 24, 0.08]]


def power_only_system(name: str, out_dir: str | Path) -> str:
    """Write a copy of a built-in system file without its [network] table and return its path.

    Pricing does not need the interconnect, and a machine resized to a log's size (e.g. 100 Frontier
    nodes) may not fit the system's network preset; dropping the table keeps the power and cooling
    models exactly as they are.
    """
    from twin.system import load_system  # noqa: PLC0415
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


RESPONSE = UserResponse(shift_users=0.5, shift_elasticity=1.0, tolerance_h=6.0, cap_elasticity=0.3,
                        cap_gpu_w=400.0, shrink_users=0.2, shrink_fraction=0.5, scaling_exponent=0.8)


def simulate(wl, args):
    cfg = RunConfig(workload=args.log, system=args.system, nodes=args.nodes, power=True, seed=args.seed,
                    data_dir=args.data_dir, options={"power": {"cooling": not args.no_cooling}})
    r = run(cfg, wl)
    if "capped" in wl.columns:            # for cap rebates: which jobs ran capped, by job id
        capped = dict(zip(wl.job_id.tolist(), np.asarray(wl.columns["capped"], dtype=bool).tolist()))
        r.jobs["capped"] = r.jobs["job_id"].map(capped).fillna(False).astype(bool)
    return r


def row(name: str, response: str, r, rule) -> dict:
    d = from_result(r)
    led = ledger(d, rule)
    s = r.summary
    return {"rule": name, "response": response, "seed": 0, "energy_mwh": s["energy_facility_kwh"] / 1e3,
            "peak_facility_kw": float(np.nanmax(r.timeseries["power_facility_w"][0])) / 1e3,
            "total_cost": float(led["cost"].sum()), "cost_gini_user": spread(led["cost"].to_numpy())["gini"],
            "mean_wait_s": s["mean_wait_s"], "mean_bsld": s["mean_bsld"]}


def main(argv=None) -> pd.DataFrame:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log", default="KTH-SP2")
    ap.add_argument("--system", default="frontier")
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--no-cooling", action="store_true", help="skip the cooling plant model (faster)")
    ap.add_argument("--week-start-day", type=float, default=None, help="first day of the plotted week")
    ap.add_argument("--out", default="results/incentives_whatif")
    a = ap.parse_args(argv)
    wl = load_workload(a.log, data_dir=a.data_dir, seed=a.seed)
    a.system = power_only_system(a.system, a.out)
    R = rules()
    base = simulate(wl, a)
    rows, series = [], {}
    for name, rule in R.items():
        rows.append(row(name, "none", base, rule))
    series["baseline (no response)"] = base
    for name in ("energy-flat", "energy-tou"):
        wl2, info = RESPONSE.apply(wl, R[name], a.seed)
        r = simulate(wl2, a)
        rows.append(row(name, "modelled", r, R[name]))
        series[f"{name} + response"] = r
        print(f"{name}: response {info}", flush=True)
    rows.insert(1, dict(rows[0], response="modelled"))        # node-hours: no incentive, same schedule
    df = pd.DataFrame(rows)
    cap = (f"Log {a.log} on {a.nodes} {Path(a.system).stem.removesuffix('-no-network')} nodes, EASY, power model on (facility energy and power: IT + "
           "conversion losses + cooling; peak over 15 s averages). Rules: node-hours at 1/node-h; energy with "
           f"PUE share at a flat {FLAT}/kWh; energy at time-of-use {TOU} per kWh (hours of the log clock). "
           "Response: power.accounting.UserResponse (shift 50 % of users, tolerance 6 h; GPU cap 400 W accepted "
           "by 30 %; half the nodes for 20 %; illustrative, not fitted). Cost Gini over users. wait = start - "
           "submit; bsld = max(1, (wait + run) / max(run, 10 s)).")
    write_tables(df, a.out, ["rule", "response"], ["energy_mwh", "peak_facility_kw", "total_cost",
                                                   "cost_gini_user", "mean_wait_s", "mean_bsld"], cap)
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    t = base.timeseries["time"][0]
    d0 = (a.week_start_day * 86400.0) if a.week_start_day is not None else float(np.median(t))
    fig, ax = plt.subplots(figsize=(11, 4))
    for label, r in series.items():
        tt, p = r.timeseries["time"][0], r.timeseries["power_facility_w"][0]
        m = (tt >= d0) & (tt < d0 + 7 * 86400)
        ax.plot((tt[m] - d0) / 86400.0, p[m] / 1e3, lw=0.6, label=label)
    ax.set_xlabel(f"days after day {d0 / 86400:.1f} of the log")
    ax.set_ylabel("facility power (kW)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{a.out}/facility_power_week.png", dpi=120)
    plt.close(fig)
    print(df.to_string())
    return df


if __name__ == "__main__":
    main()
