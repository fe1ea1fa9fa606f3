"""Experiment (b) of issue 28: autoscaling disaggregated (P/D) pools from measured capacity over a diurnal day.

Qwen3-32B on RTX PRO 6000, TP ``--tp`` (default 1: one GPU per instance; LLMServingSim's per-layer
profile), at most ``--max`` instances in all. Workload: `datasets.serving_traces.diurnal_trace` (Poisson
arrivals at a cosine day shape of mean ``--rate`` req/s and peak/trough ``--peak-to-trough``, lengths drawn
from the Azure 2023 conversation trace, prompts that do not fit one instance left out), the 24 h day
**compressed** ``--compress`` times in time (default 24: the day's shape in 1 h, at the stated request
rates) to keep the run under two minutes; cold starts, controller ticks (15 s) and the scale-down window
(300 s) are not compressed, so the ramps are ``--compress`` times steeper than a real day's (harder for
an autoscaler, not easier). SLO: TTFT <= ``--ttft-slo`` and TPOT <= ``--tpot-slo``; target: ``--target``
attainment.

First the instance's capacity is measured with the engine (`twin.serving.capacity.measure_capacity`,
the ``hpctwin serve profile`` of one class: knees of the colocated, prefill and decode roles at
``--target`` attainment, 300 s runs, seed ``--seed``). Then, each a row:

* ``fixed peak, colocated`` / ``fixed peak, P/D``: pools held all day at the peak rate's need by the
  measured knees (``ceil(peak / knee)``; P/D: prefill by its knee rate, decode by its knee decode tokens/s);
* ``today: P/D ratio, guessed 500 tok/s``: `RatioPolicy(DecodeTPSPolicy(500 tokens/s), 0.5)` (a guessed
  per-instance capacity and P/D ratio, as before this experiment);
* ``today: HPA per pool``: Kubernetes HPA on each pool's GPU busy fraction (target 0.7);
* ``capacity P/D (HeteroScale)``: `autoscale.CapacityPDPolicy` from the measured knees (decode TPS signal,
  P/D ratio of the curves, scale-in with drain after the 300 s window), cold start as the others;
* ``capacity P/D + d2d + role switch``: the same with fast scaling: weights device to device from a
  running instance (`weights.d2d_path`) and prefill<->decode role switching (`roles.RoleSwitch`).

Cold start of every other row: 30 s start-up + weights per GPU from NVMe at 7 GB/s (`autoscale.cold_start_s`).

**Heterogeneous GPU types** (rows ``Llama-3.1-8B ...``): Llama-3.1-8B is the one model with timing profiles
on two GPU types (RTX 4090, 24 GB, and RTX PRO 6000, 96 GB; LLMServingSim's ``perf/``), so these rows
serve it, over the same day shape at ``--het-rate`` req/s compressed ``--het-compress`` times. The
capacity of each type is measured with the engine (`measure_capacity`, ``hpctwin serve profile``'s code
path: prefill and decode knees of each type, 150 s runs; written to ``capacity_llama8b_<type>/``), and the
capacity-driven policy sizes each pool at its own type's knees: all RTX PRO 6000 (and its fixed peak
pools, the block's reference), all RTX 4090, prefill on one type and decode on the other, and mixed
pools (the starting instances on RTX PRO 6000, every scale-up on RTX 4090, the ``capacity_weighted``
router sending requests by outstanding requests per measured request/s). Cost weighs each type's
GPU-hours by its price (`GPU_PRICE_USD`, list prices, an assumption: the same lifetime and hosting for
both), in RTX PRO 6000 GPU-hours.

Reported: GPU-hours of the (compressed) run, billed from each scale-up decision; their cost; SLO attainment;
TTFT and TPOT P99; most instances; instances started; role switches; whether the row meets the target.

    python -m hpctwin.experiments.serving_autoscale [--rate 6] [--compress 24] [--het-rate 16]
        [--het-compress 72] [--out runs/serving_autoscale]

About 1.9 CPU minutes with the defaults (one without the heterogeneous rows, ``--no-hetero``). ``--out``
(``results.csv``, ``results.md``, ``results.tex``, ``capacity.json``, ``capacity.csv``,
``capacity_llama8b_RTX4090/``, ``capacity_llama8b_RTXPRO6000/``, ``instances.png``, ``instances_llama8b.png``)
is checked before the runs and written atomically: it must not exist, be empty, or be a folder hpctwin
wrote, replaced only with ``--force``.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from hpctwin.datasets.serving_traces import ServingRequest, diurnal_trace, read_azure
from hpctwin.experiments import cli
from hpctwin.experiments.tables import Column, register_columns, staged_output, write_table_files
from hpctwin.twin.serving.autoscale import (CapacityPDPolicy, DecodeTPSPolicy, FixedPolicy, RatioPolicy,
                                            UtilizationPolicy, cold_start_s, instance_capacity, simulate_autoscaled,
                                            with_capacity)
from hpctwin.twin.serving.bundle import find_data_dir
from hpctwin.twin.serving.capacity import fitting_lengths, measure_capacity, write_capacity
from hpctwin.twin.serving.deployment import PoolSpec, instance_factory
from hpctwin.twin.serving.metrics import latencies, slo_attainment, statistics
from hpctwin.twin.serving.policies import FixedPD, PerPoolPD
from hpctwin.twin.serving.roles import RoleSwitch
from hpctwin.twin.serving.slo import SLOClass
from hpctwin.twin.serving.weights import ScaleUp, d2d_path

register_columns({
    "meets_target": Column("Meets SLO target", "flag"),
    "gpu_hours_vs_fixed_pd": Column("GPU time vs fixed peak P/D (x)", "ratio", 2, 1.0, False, 0.0, None),
    "role_switches": Column("Role switches", "count", 0, 1.0, True, 0.0, None),
    "cost_pro6000_gpu_h": Column("Cost (RTX PRO 6000 GPU-h)", "hours", 2, 1.0, False, 0.0, None),
})
COLUMNS = ["policy", "requests", "gpu_hours", "gpu_hours_vs_fixed_pd", "cost_pro6000_gpu_h", "slo_attainment",
           "meets_target", "ttft_p99_s", "tpot_p99_s", "max_instances", "instances_started", "role_switches"]
#: purchase price per GPU (US$), the cost weight of a GPU-hour (an assumption: the same lifetime, hosting and
#: power cost for both types): RTX 4090, NVIDIA's launch price (Oct 2022); RTX PRO 6000 Blackwell, its
#: reported list price at launch (2025; NVIDIA publishes no list price for it)
GPU_PRICE_USD = {"RTXPRO6000": 8565.0, "RTX4090": 1599.0}
#: the heterogeneous block's model: the one profiled on both GPU types
HET_MODEL = "meta-llama/Llama-3.1-8B"
HET_TYPES = ("RTXPRO6000", "RTX4090")
#: window of each capacity run of the heterogeneous block (s; shorter than the main block's 300 s to keep
#: the experiment near two CPU minutes: Llama-3.1-8B's knees are at 7-18 req/s, thousands of requests a run)
HET_PROFILE_S = 150.0
HET_NAMES = {"RTXPRO6000": "RTX PRO 6000", "RTX4090": "RTX 4090"}
CAPTION = ("P/D autoscaling from measured capacity: {model} on {hw} TP {tp}, at most {mx} instances; a {hours:g} h "
           "diurnal day (mean {rate:g} req/s, peak/trough {ptt:g}, Azure conversation lengths, seed {seed}) compressed "
           "{compress:g}x in time ({n:,} requests in {span:.2f} h; cold starts, 15 s controller ticks and the 300 s "
           "scale-down window not compressed). Measured knees at >= {tgt:g} % attainment of TTFT <= {ttft:g} s and "
           "TPOT <= {tpot_ms:g} ms: colocated {kc:.2f} req/s, prefill {kp:.2f} req/s, decode {kd:.0f} tokens/s (P/D "
           "ratio {ratio:.2f}). Cold start {cold:.1f} s (30 s start-up + weights from NVMe at 7 GB/s); d2d: weights "
           "from a running instance at {d2d:g} GB/s, role switch {sw:g} s after the drain. GPU time of the compressed "
           "run, billed from each scale-up decision. Rows 'Llama-3.1-8B': heterogeneous GPU types, Llama-3.1-8B (the "
           "one model profiled on both types) over the same day shape at mean {hrate:g} req/s compressed {hcomp:g}x "
           "({hn:,} requests); knees per type: {hknees}; cold start {hcold:.1f} s; 'vs fixed P/D' against the block's "
           "fixed peak RTX PRO 6000 pools. Cost: GPU-hours weighted by list price ({prices}), in RTX PRO 6000 "
           "GPU-hours (an assumption).")


def compressed_day(lengths: list[ServingRequest], hours: float, rate: float, ptt: float, compress: float,
                   seed: int) -> list[ServingRequest]:
    """`diurnal_trace` of ``hours`` at ``rate / compress`` req/s, its arrival times divided by ``compress``:
    the day's shape in ``hours / compress`` h at ``rate`` req/s."""
    base = diurnal_trace(lengths, hours, rate / compress, ptt, seed=seed)
    return [ServingRequest(r.arrival_s / compress, r.input_tokens, r.output_tokens) for r in base]


def cost_gpu_hours(log, default_type: str = "RTXPRO6000") -> float:
    """GPU-hours of ``log`` (`autoscale.ScaleLog`) weighted by `GPU_PRICE_USD` per type, in RTX PRO 6000
    GPU-hours (instances without a ``gpu_type`` count as ``default_type``)."""
    ref = GPU_PRICE_USD["RTXPRO6000"]
    return sum(sec * GPU_PRICE_USD[kind or default_type] / ref for kind, sec in log.gpu_seconds_by_type.items()) / 3600


def _row(name: str, res, log, ttft: float, tpot: float, target: float) -> dict:
    R = res.requests
    lat = latencies([r.arrival for r in R], [r.first for r in R], [r.last for r in R], [r.output for r in R])
    att = slo_attainment(lat, ttft, tpot)
    return {"policy": name, "requests": len(R), "gpu_hours": log.gpu_seconds / 3600,
            "cost_pro6000_gpu_h": cost_gpu_hours(log), "slo_attainment": att,
            "meets_target": bool(att >= target), "ttft_p99_s": statistics(lat["ttft"])["p99"],
            "tpot_p99_s": statistics(lat["tpot"])["p99"], "max_instances": max(log.active, default=0),
            "instances_started": len(res.instances), "role_switches": len(log.switches)}


def run(out: str | Path, hours: float = 24.0, rate: float = 6.0, ptt: float = 3.0, compress: float = 24.0,
        max_instances: int = 16, ttft: float = 2.0, tpot: float = 0.15, target: float = 0.9, seed: int = 0,
        data_dir: str | None = None, hardware: str = "RTXPRO6000", model: str = "Qwen/Qwen3-32B",
        tp: int = 1, het_rate: float = 16.0, het_compress: float = 72.0, hetero: bool = True) -> pd.DataFrame:
    """Profile, then every policy over the compressed day (and, with ``hetero``, the heterogeneous block:
    module docstring); writes the tables, the capacity files and the plot."""
    ddir = find_data_dir(data_dir)
    spec = PoolSpec(hardware, model, tp=tp)
    make = instance_factory(spec, ddir)
    conv = ddir / "LLM-serving" / "Azure-LLM-2023" / "AzureLLMInferenceTrace_conv.csv"
    lengths, _ = fitting_lengths(read_azure(conv), make(0))
    cls = SLOClass("slo", ttft, tpot, 1.0)
    cap = measure_capacity(make, lengths, classes=(cls,), target=target, duration_s=300.0, seed=seed,
                           profile={"hardware": hardware, "model": model, "tp": tp}, source=conv.name)
    ic = instance_capacity(cap)
    trace = compressed_day(lengths, hours, rate, ptt, compress, seed)
    a = (ptt - 1) / (ptt + 1)
    peak = rate * (1 + a)
    mdt = cap.workload["mean_decode_tokens"]
    n_col = min(max_instances, max(1, math.ceil(peak / cap.knee_rps("colocated") - 1e-9)))
    n_p = max(1, math.ceil(peak / ic.prefill_rps - 1e-9))
    n_d = max(1, math.ceil(peak * mdt / ic.decode_tps - 1e-9))
    cold = cold_start_s(make(0).model.shape.weight_bytes_per_rank(tp))
    capmake = with_capacity(make, ic)
    fast = ScaleUp(d2d_path(hardware))
    sw = RoleSwitch()
    lo = 2
    runs = {
        "fixed peak, colocated": dict(make_instance=make, policy=FixedPolicy(n_col), min_instances=1,
                                      initial=n_col),
        "fixed peak, P/D": dict(make_instance=make, make_decode=make, policy=FixedPD(n_p, n_d), min_instances=lo,
                                initial=(n_p, n_d)),
        "today: P/D ratio, guessed 500 tok/s": dict(make_instance=make, make_decode=make,
                                                    policy=RatioPolicy(DecodeTPSPolicy(500.0), 0.5), min_instances=lo),
        "today: HPA per pool": dict(make_instance=make, make_decode=make, min_instances=lo,
                                    policy=PerPoolPD(UtilizationPolicy(0.7), UtilizationPolicy(0.7))),
        "capacity P/D (HeteroScale)": dict(make_instance=capmake, make_decode=capmake, policy=CapacityPDPolicy(ic),
                                           min_instances=lo),
        "capacity P/D + d2d + role switch": dict(make_instance=capmake, make_decode=capmake,
                                                 policy=CapacityPDPolicy(ic), min_instances=lo, cold_start=fast,
                                                 role_switch=sw),
    }
    rows, series = [], {}
    for name, kw in runs.items():
        kw = dict(kw)
        cs = kw.pop("cold_start", cold)
        n0 = kw.pop("initial", None)
        if n0 is None:   # autoscalers start at the trough's need
            n0 = lo
        res, log = simulate_autoscaled(trace, kw.pop("make_instance"), kw.pop("policy"), kw.pop("min_instances"),
                                       max_instances, cold_start=cs, initial=n0, **kw)
        rows.append(_row(name, res, log, ttft, tpot, target))
        series[name] = (np.array(log.times), np.array(log.active))
    df = pd.DataFrame(rows)
    ref = float(df.loc[df["policy"] == "fixed peak, P/D", "gpu_hours"].iloc[0])
    df["gpu_hours_vs_fixed_pd"] = df["gpu_hours"] / ref
    out = Path(out)
    het = {"hrate": het_rate, "hcomp": het_compress, "hn": 0, "hknees": "not run", "hcold": math.nan,
           "prices": ", ".join(f"{HET_NAMES[k]} ${v:,.0f}" for k, v in GPU_PRICE_USD.items())}
    if hetero:
        hdf, info = hetero_rows(out, ddir, hours, het_rate, ptt, het_compress, max_instances, ttft, tpot, target,
                                seed, cls)
        df = pd.concat([df, hdf], ignore_index=True)
        het.update(info)
    df = df[COLUMNS]
    span = max((r.arrival_s for r in trace), default=0.0) / 3600
    cap_text = CAPTION.format(model=model, hw=hardware, tp=tp, mx=max_instances, hours=hours, rate=rate, ptt=ptt,
                              seed=seed, compress=compress, n=len(trace), span=span, tgt=100 * target, ttft=ttft,
                              tpot_ms=1e3 * tpot, kc=cap.knee_rps("colocated"), kp=ic.prefill_rps, kd=ic.decode_tps,
                              ratio=cap.pd_ratio(), cold=cold, d2d=fast.path.GBps, sw=sw.switch_s, **het)
    write_table_files(df, out, cap_text, by=["policy"], metrics=[c for c in COLUMNS if c != "policy"],
                      label="tab:serving-autoscale")
    write_capacity(cap, out)
    _plot(series, trace, out / "instances.png")
    return df


def _mixed_factory(base, spill, n_base: int):
    """Instances ``0 .. n_base - 1`` from ``base`` (the pools' starting instances), every later one (the
    scale-ups) from ``spill``; the factory's ``capacity`` and ``kv_tokens`` are ``spill``'s (new ones)."""
    def make(iid: int):
        return base(iid) if 0 <= iid < n_base else spill(iid)
    make.capacity = spill.capacity
    x = spill(-1)
    make.kv_tokens = x.kv.num_blocks * x.kv.block_size
    return make


def hetero_rows(out: Path, ddir: Path, hours: float, rate: float, ptt: float, compress: float, max_instances: int,
                ttft: float, tpot: float, target: float, seed: int, cls: SLOClass) -> tuple[pd.DataFrame, dict]:
    """The heterogeneous block (module docstring): per type, its capacity measured with the engine
    (prefill and decode, `HET_PROFILE_S` runs) and written to ``out/capacity_llama8b_<type>/``; then each pool
    layout over the compressed day (active instances: ``out/instances_llama8b.png``). Returns its rows
    and the caption's figures."""
    makes, caps, ics = {}, {}, {}
    for hw in HET_TYPES:
        makes[hw] = instance_factory(PoolSpec(hw, HET_MODEL, tp=1), ddir)
    conv = ddir / "LLM-serving" / "Azure-LLM-2023" / "AzureLLMInferenceTrace_conv.csv"
    lengths = read_azure(conv)
    for hw in HET_TYPES:                       # lengths that fit every type (the smaller KV decides)
        lengths, _ = fitting_lengths(lengths, makes[hw](0))
    for hw in HET_TYPES:
        caps[hw] = measure_capacity(makes[hw], lengths, roles=("prefill", "decode"), classes=(cls,), target=target,
                                    duration_s=HET_PROFILE_S, seed=seed, source=conv.name,
                                    profile={"hardware": hw, "model": HET_MODEL, "tp": 1})
        ics[hw] = instance_capacity(caps[hw])
        write_capacity(caps[hw], out / f"capacity_llama8b_{hw}")
    cm = {hw: with_capacity(makes[hw], ics[hw], gpu_type=hw) for hw in HET_TYPES}
    trace = compressed_day(lengths, hours, rate, ptt, compress, seed)
    peak = rate * (1 + (ptt - 1) / (ptt + 1))
    big, small = HET_TYPES
    n_p = max(1, math.ceil(peak / ics[big].prefill_rps - 1e-9))
    n_d = max(1, math.ceil(peak * ics[big].mean_decode_tokens / ics[big].decode_tps - 1e-9))
    cold = cold_start_s(makes[big](0).model.shape.weight_bytes_per_rank(1))
    B, S = HET_NAMES[big], HET_NAMES[small]
    lo = 2
    mixed = _mixed_factory(cm[big], cm[small], lo)
    layouts = {
        f"Llama-3.1-8B: fixed peak P/D, {B}": (cm[big], cm[big], FixedPD(n_p, n_d), (n_p, n_d), "least_loaded"),
        f"Llama-3.1-8B: capacity P/D, {B}": (cm[big], cm[big], CapacityPDPolicy(ics[big]), lo, "least_loaded"),
        f"Llama-3.1-8B: capacity P/D, {S}": (cm[small], cm[small], CapacityPDPolicy(ics[small]), lo, "least_loaded"),
        f"Llama-3.1-8B: capacity P/D, prefill {S} + decode {B}": (cm[small], cm[big],
                                                                  CapacityPDPolicy(ics[small], ics[big]), lo,
                                                                  "least_loaded"),
        f"Llama-3.1-8B: capacity P/D, prefill {B} + decode {S}": (cm[big], cm[small],
                                                                  CapacityPDPolicy(ics[big], ics[small]), lo,
                                                                  "least_loaded"),
        f"Llama-3.1-8B: capacity P/D, mixed pools ({B} base, {S} scale-ups)": (
            mixed, mixed, CapacityPDPolicy(ics[big]), lo, "capacity_weighted"),
    }
    rows, series = [], {}
    for name, (mp, md, pol, n0, router) in layouts.items():
        res, log = simulate_autoscaled(trace, mp, pol, lo, max_instances, cold_start=cold, initial=n0,
                                       make_decode=md, router=router)
        rows.append(_row(name, res, log, ttft, tpot, target))
        series[name] = (np.array(log.times), np.array(log.active))
    _plot(series, trace, out / "instances_llama8b.png")
    df = pd.DataFrame(rows)
    ref = float(df["gpu_hours"].iloc[0])
    df["gpu_hours_vs_fixed_pd"] = df["gpu_hours"] / ref
    knees = "; ".join(f"{HET_NAMES[hw]} prefill {ics[hw].prefill_rps:.2f} req/s, decode {ics[hw].decode_tps:.0f} "
                      f"tokens/s" for hw in HET_TYPES)
    return df, {"hn": len(trace), "hknees": knees, "hcold": cold}


def _plot(series: dict, trace: list[ServingRequest], path: Path) -> None:
    """Active instances of each policy over the run, with the request rate (per minute) on a second axis."""
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, (t, n) in series.items():
        ax.step(t / 60, n, where="post", label=name, lw=1)
    ax.set_xlabel("time (min of the compressed day)")
    ax.set_ylabel("active instances")
    ax2 = ax.twinx()
    arr = np.array([r.arrival_s for r in trace])
    if arr.size:
        edges = np.arange(0, arr.max() + 60, 60)
        h, _ = np.histogram(arr, edges)
        ax2.plot(edges[:-1] / 60, h / 60, color="grey", lw=0.8, ls=":")
    ax2.set_ylabel("request rate (req/s, dotted)")
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title("Instances over a compressed diurnal day", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = cli.parser("serving_autoscale", __doc__)
    p.add_argument("--hours", type=float, default=24.0, help="length of the diurnal workload before compression (h)")
    p.add_argument("--rate", type=float, default=6.0, help="mean request rate (req/s)")
    p.add_argument("--peak-to-trough", type=float, default=3.0, help="ratio of the peak to the trough request rate")
    p.add_argument("--compress", type=float, default=24.0, help="time compression of the day (1: a real day)")
    p.add_argument("--max", type=cli.positive_int, default=16, help="most instances the cluster holds")
    p.add_argument("--tp", type=cli.positive_int, default=1, help="tensor-parallel GPUs per instance")
    p.add_argument("--het-rate", type=float, default=16.0,
                   help="mean request rate of the heterogeneous-GPU rows (req/s; Llama-3.1-8B)")
    p.add_argument("--het-compress", type=float, default=72.0,
                   help="time compression of the heterogeneous-GPU rows' day")
    p.add_argument("--no-hetero", action="store_true", help="leave the heterogeneous-GPU rows out")
    p.add_argument("--ttft-slo", type=float, default=2.0, help="SLO on the time to first token (s)")
    p.add_argument("--tpot-slo", type=float, default=0.15, help="SLO on the time per output token (s)")
    p.add_argument("--target", type=float, default=0.9, help="SLO attainment target (0-1)")
    cli.add_seed(p, "seed of the request arrivals and lengths, and of the capacity runs")
    cli.add_data_dir(p)
    cli.add_out(p, "runs/serving_autoscale")
    a = p.parse_args(argv)
    for flag, v in (("--hours", a.hours), ("--rate", a.rate), ("--compress", a.compress), ("--ttft-slo", a.ttft_slo),
                    ("--tpot-slo", a.tpot_slo), ("--het-rate", a.het_rate), ("--het-compress", a.het_compress)):
        if not (math.isfinite(v) and v > 0):
            p.error(f"{flag} {v!r}: expected a positive number")
    if not (math.isfinite(a.peak_to_trough) and a.peak_to_trough >= 1):
        p.error(f"--peak-to-trough {a.peak_to_trough!r}: expected a number >= 1")
    if not 0 < a.target <= 1:
        p.error(f"--target {a.target!r}: expected an attainment in (0, 1]")
    if a.max < 2:
        p.error(f"--max {a.max}: disaggregated pools need at least 2 instances")
    with staged_output("python -m hpctwin.experiments.serving_autoscale", a.out, a.force) as out:
        run(out, a.hours, a.rate, a.peak_to_trough, a.compress, a.max, a.ttft_slo, a.tpot_slo, a.target, a.seed,
            a.data_dir, tp=a.tp, het_rate=a.het_rate, het_compress=a.het_compress, hetero=not a.no_hetero)
        table = (out / "results.md").read_text()
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
