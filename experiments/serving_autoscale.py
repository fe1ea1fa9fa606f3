"""Experiment (c): autoscalers over a day-long diurnal workload built from the Azure length distributions.

Qwen3-32B on RTX PRO 6000, TP 2 per instance (LLMServingSim's per-layer profile), up to ``--max``
instances (the cluster), at least one. Workload: `datasets.serving_traces.diurnal_trace` (24 h, Poisson
arrivals at a cosine day shape, lengths drawn from the Azure conversation trace). Policies: fixed at a
peak provisioning (``--peak``), the HPA-like utilisation policy (target 0.7) on GPU busy time and on
KV use, and HeteroScale's decode-TPS policy (per-instance capacity: the decode tokens/s one instance
sustains at >= 90 % SLO attainment, found by short constant-rate runs, HeteroScale's offline profiling).
Cold start: 30 s start-up + weights per GPU at 7 GB/s (`twin.serving.autoscale`). Reported: GPU-hours
(billed from each scale-up decision), GPU busy fraction (busy / billed: near 1 whenever anything decodes),
throughput utilisation (decode tokens / (capacity x billed instance-seconds)), SLO attainment
(TTFT <= ``--ttft-slo``, TPOT <= ``--tpot-slo``), TTFT P99.

    python -m hpctwin.experiments.serving_autoscale [--hours 24] [--rate 2] [--out runs/serving_autoscale]

``--out`` (``results.csv``, ``table.md``, ``table.tex``) is checked before the runs and written atomically: it must not
exist, be empty, or be a folder hpctwin wrote, replaced only with ``--force``.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from hpctwin.datasets.serving_traces import diurnal_trace, read_azure
from hpctwin.experiments import cli
from hpctwin.experiments.tables import staged_output, write_md_tex, write_results_csv
from hpctwin.twin.serving.autoscale import (DecodeTPSPolicy, FixedPolicy, UtilizationPolicy, cold_start_s,
                                            simulate_autoscaled)
from hpctwin.twin.serving.bundle import find_data_dir
from hpctwin.twin.serving.deployment import PoolSpec, build_pool
from hpctwin.twin.serving.metrics import latencies, slo_attainment, statistics

CAPTION = ("Autoscalers over a {hours:g} h diurnal workload (mean {rate:g} req/s, peak/trough {ptt:g}, Azure conv "
           "lengths, seed {seed}): {model} on {hw} TP {tp}, 1..{mx} instances; cold start {cold:.1f} s; SLO TTFT <= "
           "{ttft} s and TPOT <= {tpot} s; GPU-hours billed from each scale-up decision; busy fraction = busy / "
           "billed GPU time; throughput utilisation = decode tokens / ({cap:.0f} tok/s per instance, the SLO "
           "capacity, x billed instance time).")


def slo_capacity_tps(make, lengths, ttft: float, tpot: float, minutes: float = 10.0, seed: int = 0,
                     rates: tuple[float, ...] = (0.5, 1, 1.5, 2, 3, 4, 5, 6, 8)) -> float:
    """HeteroScale's offline profiling: the highest decode tokens/s one instance sustains with >= 90 %
    SLO attainment, from ``minutes``-long Poisson runs at each rate with lengths drawn from ``lengths``."""
    from hpctwin.twin.serving import simulate  # noqa: PLC0415
    best = 0.0
    for k, rate in enumerate(rates):
        trace = diurnal_trace(lengths, minutes / 60, rate, 1.0, seed=seed + 1000 + k)
        x = make()
        res = simulate(trace, [x])
        R = res.requests
        lat = latencies([r.queued for r in R], [r.first for r in R], [r.last for r in R], [r.output for r in R])
        if slo_attainment(lat, ttft, tpot) < 0.9:
            break
        best = x.tokens_decoded / max(1e-9, res.makespan_s - R[0].arrival)
    if best <= 0:
        raise ValueError(f"one instance misses the SLO even at {rates[0]} req/s")
    return best


def run(out: str | Path, hours: float = 24.0, rate: float = 2.0, ptt: float = 3.0, max_instances: int = 8,
        peak: int = 6, ttft: float = 2.0, tpot: float = 0.15, seed: int = 0, data_dir: str | None = None,
        hardware: str = "RTXPRO6000", model: str = "Qwen/Qwen3-32B", tp: int = 2) -> pd.DataFrame:
    ddir = find_data_dir(data_dir)
    lengths = read_azure(ddir / "LLM-serving" / "Azure-LLM-2023" / "AzureLLMInferenceTrace_conv.csv")
    trace = diurnal_trace(lengths, hours, rate, ptt, seed=seed)
    spec = PoolSpec(hardware, model, tp=tp, count=1)
    probe = build_pool(spec, data_dir)[0]
    cold = cold_start_s(probe.model.shape.weight_bytes_per_rank(tp))
    tps_cap = slo_capacity_tps(lambda: build_pool(spec, data_dir)[0], lengths, ttft, tpot, seed=seed)

    def make(iid: int):
        x = build_pool(spec, data_dir, first_id=iid)[0]
        return x

    policies = {"fixed-at-peak": FixedPolicy(peak), "HPA on GPU busy 0.7": UtilizationPolicy(0.7),
                "HPA on KV use 0.7": UtilizationPolicy(0.7, metric="kv"),
                "decode TPS (HeteroScale)": DecodeTPSPolicy(tps_cap)}
    rows = []
    for name, pol in policies.items():
        res, log = simulate_autoscaled(trace, make, pol, 1, max_instances, cold_start=cold,
                                       initial=peak if name == "fixed-at-peak" else 1)
        R = res.requests
        lat = latencies([r.queued for r in R], [r.first for r in R], [r.last for r in R], [r.output for r in R])
        rows.append({"policy": name, "requests": len(R), "gpu_hours": log.gpu_seconds / 3600,
                     "gpu_busy_fraction": log.busy_gpu_seconds / log.gpu_seconds,
                     "throughput_utilisation": sum(x.tokens_decoded for x in res.instances)
                     / (tps_cap * log.gpu_seconds / tp),
                     "slo_attainment": slo_attainment(lat, ttft, tpot), "ttft_p99_s": statistics(lat["ttft"])["p99"],
                     "tpot_p99_s": statistics(lat["tpot"])["p99"], "max_instances": max(log.active, default=0),
                     "instances_started": len(res.instances)})
    df = pd.DataFrame(rows)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_results_csv(df, out / "results.csv")
    cap = CAPTION.format(hours=hours, rate=rate, ptt=ptt, seed=seed, model=model, hw=hardware, tp=tp,
                         mx=max_instances, cold=cold, ttft=ttft, tpot=tpot, cap=tps_cap)
    write_md_tex(out, "table", [dict(agg=df, by=["policy"], metrics=[c for c in df.columns if c != "policy"],
                                     caption=cap, label="tab:serving-autoscale")])
    return df


def main(argv: list[str] | None = None) -> int:
    p = cli.parser("serving_autoscale", __doc__)
    p.add_argument("--hours", type=float, default=24.0, help="length of the diurnal workload (h)")
    p.add_argument("--rate", type=float, default=2.0, help="mean request rate (req/s)")
    p.add_argument("--peak-to-trough", type=float, default=3.0, help="ratio of the peak to the trough request rate")
    p.add_argument("--max", type=int, default=8, help="most instances the cluster holds")
    p.add_argument("--peak", type=int, default=6, help="instances of the fixed-at-peak policy")
    p.add_argument("--ttft-slo", type=float, default=2.0, help="SLO on the time to first token (s)")
    p.add_argument("--tpot-slo", type=float, default=0.15, help="SLO on the time per output token (s)")
    cli.add_seed(p, "seed of the request arrivals and lengths")
    cli.add_data_dir(p)
    cli.add_out(p, "runs/serving_autoscale")
    a = p.parse_args(argv)
    with staged_output("python -m hpctwin.experiments.serving_autoscale", a.out, a.force) as out:
        run(out, a.hours, a.rate, a.peak_to_trough, a.max, a.peak, a.ttft_slo, a.tpot_slo, a.seed, a.data_dir)
        table = (out / "table.md").read_text()
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
