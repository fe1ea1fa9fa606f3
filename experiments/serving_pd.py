"""Experiment (b): disaggregated prefill/decode vs colocated serving at equal GPUs on an Azure trace.

Llama2-70B on H100-80GB instances of TP 4 (iteration times: Splitwise's measured ``perf_model.csv`` used
as splitwise-sim does; power per phase: Splitwise's constant model). ``--gpus`` GPUs are either all
colocated vLLM instances, or split into P prefill + D decode instances (every split); the Azure trace
(first ``--minutes``) is replayed at several rate multipliers (arrival times divided by the multiplier).
Per run: TTFT and TPOT P50/P99, SLO attainment (TTFT <= ``--ttft-slo`` and TPOT <= ``--tpot-slo``, the
DistServe definition), energy. Goodput = the highest replayed rate whose attainment is >= 90 %
(DistServe's per-GPU goodput), per GPU.

    python -m hpctwin.experiments.serving_pd [--trace conv] [--minutes 20] [--gpus 16] [--out runs/serving_pd]
        [--kv-systems dgx-h100,marconi100] [--kv-placement pools]

``--out`` (``results.csv``, ``goodput.csv``, ``table.md``, ``table.tex``, ``attainment.png``) is checked before the
runs and written atomically: it must not exist, be empty, or be a folder hpctwin wrote, replaced only with ``--force``.

KV transfer: the P/D rows without a system use the fixed 25 GB/s per GPU link (`pd.kv_transfer_s`); every
system of ``--kv-systems`` adds the P/D rows again (``P3:D1 @system``) with the transfers as flows on
that system's topology (`twin.serving.kvflow`: instances placed by pool on its nodes, links shared
max-min fairly). ``marconi100`` is a what-if: the same H100 TP 4 instances on a slower fabric (its
100 Gb/s EDR fat-tree, one node of 4 GPUs per instance), not Marconi100's own V100s.

Published results to set beside ours: Splitwise (Patel et al., ISCA 2024) reports up to 1.4x the
throughput at 20 % lower cost, or 2.35x the throughput at the same cost and power, over colocated
serving; DistServe (Zhong et al., OSDI 2024) serves up to 7.4x more requests, or meets 12.6x tighter
SLOs, than colocated vLLM with >= 90 % attainment. Both compare against their own baselines, models and
SLOs, so directions and orders of magnitude are comparable, not the exact factors.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hpctwin.datasets.serving_traces import ServingRequest, read_azure
from hpctwin.experiments import cli
from hpctwin.experiments.tables import staged_output, write_md_tex, write_results_csv
from hpctwin.twin.serving import BlockManager, Instance, simulate
from hpctwin.twin.serving.bundle import find_data_dir
from hpctwin.twin.serving.energy import fleet_energy, power_for
from hpctwin.twin.serving.kvflow import KVNetwork
from hpctwin.twin.serving.metrics import latencies, slo_attainment, statistics
from hpctwin.twin.serving.pd import DEFAULT_KV_LINK_GBPS, simulate_pd
from hpctwin.twin.serving.tables import SplitwiseIterationModel

#: H100-80GB memory (NVIDIA data sheet: 80 GB HBM3), decimal bytes
H100_MEM_BYTES = 80e9
CAPTION = ("P/D vs colocated at equal GPUs: {model} on {hw}, TP {tp}, {gpus} GPUs; Azure {trace} trace, first "
           "{minutes:g} min, arrivals divided by the rate multiplier; Splitwise perf_model iteration times; "
           "SLO: TTFT <= {ttft} s and TPOT <= {tpot} s (SLO attainment = share of requests meeting both); energy from "
           "Splitwise's per-phase GPU power; KV transfer over {link} GB/s per GPU.")


def make_instances(n: int, model: SplitwiseIterationModel, first_id: int = 0, mem_util: float = 0.9,
                   max_num_seqs: int = 256, max_num_batched_tokens: int = 2048) -> list[Instance]:
    shape, tp = model.shape, model.tp
    blocks = int((H100_MEM_BYTES * mem_util - shape.weight_bytes_per_rank(tp)) // (shape.kv_bytes_per_token(tp) * 16))
    return [Instance(first_id + k, model, BlockManager(blocks, 16), max_num_seqs, max_num_batched_tokens,
                     async_scheduling=True) for k in range(n)]


def run_config(trace: list[ServingRequest], model, gpus: int, prefill: int | None, ttft: float, tpot: float,
               hw: str, kv_system: str | None = None, kv_placement: str = "pools") -> dict:
    n = gpus // model.tp
    kv = {}
    if prefill is None:
        insts = make_instances(n, model)
        res = simulate(trace, insts)
    else:
        pre = make_instances(prefill, model)
        dec = make_instances(n - prefill, model, first_id=prefill)
        net = KVNetwork.from_system(kv_system, pre, dec, hw, kv_placement) if kv_system else None
        res = simulate_pd(trace, pre, dec, kv_network=net)
        insts = pre + dec
        if net is not None:
            k = res.extra["kv_network"]
            kv = {"kv_transfer_p50_s": k["transfer_s_p50"], "kv_transfer_p99_s": k["transfer_s_p99"],
                  "kv_max_concurrent": k["max_concurrent_transfers"]}
    R = res.requests
    lat = latencies([r.queued for r in R], [r.first for r in R], [r.last for r in R], [r.output for r in R])
    span = res.makespan_s - min(r.arrival for r in R)
    en = fleet_energy(insts, span, power_for(hw))
    tt, tp_ = statistics(lat["ttft"]), statistics(lat["tpot"])
    return {"ttft_p50_s": tt["median"], "ttft_p99_s": tt["p99"], "tpot_p50_s": tp_["median"],
            "tpot_p99_s": tp_["p99"], "attainment": slo_attainment(lat, ttft, tpot),
            "energy_kwh": en["energy_j"] / 3.6e6,
            "energy_wh_per_request": en["energy_j"] / 3600 / len(R),
            "mean_power_w": en["mean_power_w"], "makespan_s": res.makespan_s, **kv}


def run(out: str | Path, trace_name: str = "conv", minutes: float = 20.0, gpus: int = 16, tp: int = 4,
        model_name: str = "llama2-70b", hw: str = "h100-80gb", rates: tuple[float, ...] = (1, 2, 3, 4, 5, 6, 8),
        ttft: float = 2.0, tpot: float = 0.1, data_dir: str | None = None,
        kv_systems: tuple[str, ...] = (), kv_placement: str = "pools") -> pd.DataFrame:
    ddir = find_data_dir(data_dir)
    base = [r for r in read_azure(ddir / "LLM-serving" / "Azure-LLM-2023" / f"AzureLLMInferenceTrace_{trace_name}.csv")
            if r.arrival_s < minutes * 60]
    model = SplitwiseIterationModel(ddir / "LLM-serving" / "splitwise" / "perf_model.csv", model_name, hw, tp)
    n = gpus // tp
    configs = [("colocated", None, None)] + [(f"P{p}:D{n - p}", p, None) for p in range(1, n)]
    configs += [(f"P{p}:D{n - p} @{s}", p, s) for s in kv_systems for p in range(1, n)]
    rows = []
    base_rate = len(base) / (minutes * 60)
    for label, p, kv_system in configs:
        for m in rates:
            trace = [ServingRequest(r.arrival_s / m, r.input_tokens, r.output_tokens) for r in base]
            row = {"config": label, "rate_multiplier": m, "rate_req_s": base_rate * m}
            row.update(run_config(trace, model, gpus, p, ttft, tpot, hw, kv_system, kv_placement))
            rows.append(row)
    df = pd.DataFrame(rows)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_results_csv(df, out / "results.csv")
    good = []
    for label, _, _ in configs:
        sub = df[(df["config"] == label) & (df["attainment"] >= 0.9)]
        g = float(sub["rate_req_s"].max()) if len(sub) else 0.0
        good.append({"config": label, "goodput_req_s": g, "goodput_req_s_per_gpu": g / gpus})
    gdf = pd.DataFrame(good)
    colo = float(gdf.loc[gdf["config"] == "colocated", "goodput_req_s"].iloc[0])
    gdf["vs_colocated"] = gdf["goodput_req_s"] / colo if colo > 0 else np.nan
    write_results_csv(gdf, out / "goodput.csv")
    cap = CAPTION.format(model=model_name, hw=hw, tp=tp, gpus=gpus, trace=trace_name, minutes=minutes, ttft=ttft,
                         tpot=tpot, link=DEFAULT_KV_LINK_GBPS)
    cols = ["rate_req_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "attainment", "energy_wh_per_request"]
    if kv_systems:
        cap += (f" Rows '@system': KV transfers as flows on that system's topology (placement {kv_placement}); "
                "KV transfer = prompt done to KV usable at the decode instance.")
        cols += ["kv_transfer_p50_s", "kv_transfer_p99_s"]
    write_md_tex(out, "table", [
        dict(agg=df, by=["config", "rate_multiplier"], metrics=cols, caption=cap, label="tab:serving-pd"),
        dict(agg=gdf, by=["config"], metrics=["goodput_req_s", "goodput_req_s_per_gpu", "vs_colocated"],
             caption="Goodput: highest replayed rate with >= 90 % SLO attainment (grid of rate multipliers, so a "
                     "lower bound).", label="tab:serving-pd-goodput")])
    _plot(df, out / "attainment.png", cap)
    return df


def _plot(df: pd.DataFrame, path: Path, title: str) -> None:
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, g in df.groupby("config", sort=False):
        ax.plot(g["rate_req_s"], 100 * g["attainment"], marker="o", label=label)
    ax.axhline(90, color="grey", ls="--", lw=0.8)
    ax.set_xlabel("request rate (req/s)")
    ax.set_ylabel("SLO attainment (%)")
    ax.set_title("P/D vs colocated at equal GPUs", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = cli.parser("serving_pd", __doc__)
    p.add_argument("--trace", choices=["conv", "code"], default="conv", help="Azure LLM inference 2023 trace")
    p.add_argument("--minutes", type=float, default=20.0, help="first minutes of the trace replayed")
    p.add_argument("--gpus", type=int, default=16, help="GPUs of every configuration")
    p.add_argument("--tp", type=int, default=4, help="tensor parallelism of an instance")
    p.add_argument("--rates", default="1,2,3,4,5,6,8", help="comma-separated rate multipliers")
    p.add_argument("--ttft-slo", type=float, default=2.0, help="SLO on the time to first token (s)")
    p.add_argument("--tpot-slo", type=float, default=0.1, help="SLO on the time per output token (s)")
    cli.add_data_dir(p)
    cli.add_out(p, "runs/serving_pd")
    p.add_argument("--kv-systems", default="",
                   help="comma-separated systems (e.g. dgx-h100,marconi100): add the P/D rows with the KV "
                        "transfers as flows on each system's topology (default: none)")
    p.add_argument("--kv-placement", default="pools", choices=["pools", "packed"],
                   help="placement of the instances on a --kv-systems machine")
    a = p.parse_args(argv)
    try:
        rates = tuple(float(x) for x in a.rates.split(","))
    except ValueError:
        p.error(f"--rates {a.rates!r}: expected comma-separated numbers (e.g. 1,2,3)")
    with staged_output("python -m hpctwin.experiments.serving_pd", a.out, a.force) as out:
        run(out, a.trace, a.minutes, a.gpus, a.tp, rates=rates, ttft=a.ttft_slo, tpot=a.tpot_slo,
            data_dir=a.data_dir, kv_systems=tuple(x for x in a.kv_systems.split(",") if x),
            kv_placement=a.kv_placement)
        table = (out / "table.md").read_text()
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
