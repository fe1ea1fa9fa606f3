"""Experiment (c) of issue 28: time to absorb a burst with each weight-loading path and with role switching.

Qwen3-32B on RTX PRO 6000, TP 1, disaggregated pools autoscaled by the capacity-driven policy
(`autoscale.CapacityPDPolicy` on the instance's knees measured with the engine, TTFT <= ``--ttft-slo``
and TPOT <= ``--tpot-slo`` at ``--target`` attainment; prefill also sized by the arriving prompt
tokens/s), at most ``--max`` instances, starting at the base load's need. Two scenarios of
``--minutes`` minutes, the burst in the middle third:

* ``rate burst``: Azure conversation lengths at ``--rate`` req/s, ``--burst`` times that rate during the
  burst (more of both prefill and decode work);
* ``mix shift``: during the burst the conversation requests fall to a third of ``--rate`` and requests
  from the Azure *code* trace (prompts ~2k tokens, outputs ~28) arrive at ``--burst`` x ``--rate``:
  prefill work up, decode work down (the case role switching is for).

Each scale-up's cold start is 30 s of start-up (process, CUDA context, graph capture: an assumption) or
0 s (``warm``: a pre-initialised engine process waiting without weights, an assumption) plus the model's
weights per GPU over one path (`twin.serving.weights`): NVMe (7 GB/s), PFS (one 25 GB/s client per node
shared by the GPUs loading at once), host DRAM over PCIe 5.0 x16 (63 GB/s), device to device from a
running instance (RTX PRO 6000: 16 GB/s, LLMServingSim's bench link; and an NVLink what-if at 450 GB/s,
H100's per direction); and role switching (`roles.RoleSwitch`: drain, then 5 s, an assumption) with NVMe
for the remaining scale-ups. Two rows add the decode pool's **KV floor** (`CapacityPDPolicy(kv_headroom=
0.25)`, `capacity.kv_floor`: never fewer decode instances than hold the KV in use, queued and arriving
from prefill with 25 % headroom, whatever the decode TPS says; the floor also bounds role switching):
``NVMe + KV floor`` and ``role switch + KV floor (+ NVMe)``. The knees are profiled on conversation
lengths; under the mix shift the code prompts hold about twice the KV per request at the same decode TPS,
which the knees do not see and the floor does.

Reported per scenario and path: the weight transfer of a scale-up (s, mean), the cold start (s, mean),
the time to absorb the burst (from the burst's start to the end of the last 30 s window of arrivals whose
SLO attainment is below the target; 0 when none), the attainment over the burst and the run, GPU-hours,
scale-ups and role switches.

    python -m hpctwin.experiments.serving_fast_scaling [--out runs/serving_fast_scaling] [--minutes 15]

``--out`` (``results.csv``, ``results.md``, ``results.tex``, ``absorb.png``) is checked before the runs and
written atomically: it must not exist, be empty, or be a folder hpctwin wrote, replaced only with ``--force``.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from hpctwin.datasets.serving_traces import ServingRequest, read_azure
from hpctwin.experiments import cli
from hpctwin.experiments.tables import Column, register_columns, staged_output, write_table_files
from hpctwin.twin.serving.autoscale import (DEFAULT_KV_HEADROOM, CapacityPDPolicy, instance_capacity,
                                            simulate_autoscaled, with_capacity)
from hpctwin.twin.serving.bundle import find_data_dir
from hpctwin.twin.serving.capacity import fitting_lengths, measure_capacity
from hpctwin.twin.serving.deployment import PoolSpec, instance_factory
from hpctwin.twin.serving.roles import RoleSwitch
from hpctwin.twin.serving.slo import SLOClass
from hpctwin.twin.serving.weights import ScaleUp, WeightPath, d2d_path, host_path, nvme_path, pfs_path

register_columns({
    "scenario": Column("Scenario", "text"), "path": Column("Weights from", "text"),
    "weights_s": Column("Weight transfer (s)", "seconds", 2, 1.0, True, 0.0, None),
    "cold_start_mean_s": Column("Cold start (s)", "seconds", 1, 1.0, True, 0.0, None),
    "absorb_s": Column("Time to absorb (s)", "seconds", 0, 1.0, True, 0.0, None),
    "burst_attainment": Column("SLO attainment in burst (%)", "percentage", 1, 100.0, False, 0.0, 1.0),
    "scale_ups": Column("Scale-ups", "count", 0, 1.0, True, 0.0, None),
    "role_switches": Column("Role switches", "count", 0, 1.0, True, 0.0, None),
    "switch_mean_s": Column("Role switch, drain + switch (s)", "seconds", 1, 1.0, True, 0.0, None),
})
COLUMNS = ["scenario", "path", "weights_s", "cold_start_mean_s", "absorb_s", "burst_attainment", "slo_attainment",
           "gpu_hours", "scale_ups", "role_switches", "switch_mean_s"]
CAPTION = ("Absorbing a burst with each weight path: {model} on {hw} TP 1 ({wgb:.1f} GB of weights per GPU), P/D pools "
           "autoscaled from measured knees (prefill {kp:.2f} req/s, decode {kd:.0f} tokens/s at >= {tgt:g} % of TTFT "
           "<= {ttft:g} s and TPOT <= {tpot_ms:g} ms), at most {mx} instances; {minutes:g} min at {rate:g} req/s "
           "(Azure conversation lengths, seed {seed}), the middle third a burst: rate burst = {burst:g}x the rate; mix "
           "shift = conversations at a third of the rate plus Azure code requests at {burst:g}x the rate. Cold start = "
           "start-up (30 s, or 0 s for a warm process: "
           "assumptions) + weights per GPU over the path; role switch = drain + 5 s (assumption). Time to absorb: "
           "from the burst's start to the end of the last 30 s window of arrivals below {tgt:g} % attainment. KV "
           "floor: the decode pool holds the KV in use, queued and arriving with {kvh:g} % headroom (assumption).")


def burst_trace(conv: list[ServingRequest], code: list[ServingRequest], minutes: float, rate: float, burst: float,
                scenario: str, seed: int) -> tuple[list[ServingRequest], float, float]:
    """The scenario's requests (Poisson arrivals, lengths drawn with replacement, one seeded generator) and
    the burst's start and end (s)."""
    rng = np.random.default_rng(seed)
    span = minutes * 60.0
    b0, b1 = span / 3, 2 * span / 3

    def poisson(t0: float, t1: float, lam: float, pool: list[ServingRequest]) -> list[ServingRequest]:
        n = rng.poisson(lam * (t1 - t0))
        ts = np.sort(rng.uniform(t0, t1, n))
        idx = rng.integers(0, len(pool), n)
        return [ServingRequest(float(t), pool[int(i)].input_tokens, pool[int(i)].output_tokens)
                for t, i in zip(ts, idx)]
    if scenario == "rate burst":
        reqs = poisson(0.0, span, rate, conv) + poisson(b0, b1, rate * (burst - 1), conv)
    else:
        reqs = (poisson(0.0, b0, rate, conv) + poisson(b0, b1, rate / 3, conv) + poisson(b1, span, rate, conv)
                + poisson(b0, b1, rate * burst, code))
    reqs.sort(key=lambda r: r.arrival_s)
    return reqs, b0, b1


def absorb_s(reqs, b0: float, b1: float, ttft: float, tpot: float, target: float, window: float = 30.0) -> float:
    """From ``b0`` to the end of the last ``window``-s window of arrivals in [b0, b1] whose SLO attainment is
    below ``target`` (0 when none; s)."""
    last = 0.0
    for k in range(int(math.ceil((b1 - b0) / window))):
        lo, hi = b0 + k * window, min(b1, b0 + (k + 1) * window)
        w = [r for r in reqs if lo <= r.arrival < hi]
        if not w:
            continue
        ok = np.mean([(r.first - r.arrival) <= ttft and (r.last - r.first) / max(1, r.output - 1) <= tpot for r in w])
        if ok < target:
            last = hi - b0
    return last


def _attain(reqs, ttft: float, tpot: float) -> float:
    ok = [(r.first - r.arrival) <= ttft and (r.last - r.first) / max(1, r.output - 1) <= tpot for r in reqs]
    return float(np.mean(ok)) if ok else float("nan")


def run(out: str | Path, minutes: float = 15.0, rate: float = 6.0, burst: float = 3.0, max_instances: int = 16,
        ttft: float = 2.0, tpot: float = 0.15, target: float = 0.9, seed: int = 0, data_dir: str | None = None,
        hardware: str = "RTXPRO6000", model: str = "Qwen/Qwen3-32B",
        scenarios: tuple[str, ...] = ("rate burst", "mix shift")) -> pd.DataFrame:
    """Profile, then every scenario x path; writes the tables and the plot into ``out``."""
    ddir = find_data_dir(data_dir)
    make = instance_factory(PoolSpec(hardware, model, tp=1), ddir)
    x0 = make(0)
    az = ddir / "LLM-serving" / "Azure-LLM-2023"
    conv, _ = fitting_lengths(read_azure(az / "AzureLLMInferenceTrace_conv.csv"), x0)
    code, _ = fitting_lengths(read_azure(az / "AzureLLMInferenceTrace_code.csv"), x0)
    cap = measure_capacity(make, conv, roles=("prefill", "decode"), classes=(SLOClass("slo", ttft, tpot, 1.0),),
                           target=target, duration_s=300.0, seed=seed)
    ic = instance_capacity(cap)
    capmake = with_capacity(make, ic)
    wbytes = x0.model.shape.weight_bytes_per_rank(1)
    n_p = max(1, math.ceil(rate / ic.prefill_rps))
    n_d = max(1, math.ceil(rate * ic.mean_decode_tokens / ic.decode_tps))
    paths = [("NVMe", nvme_path(), 30.0), ("PFS", pfs_path(), 30.0), ("host DRAM (PCIe 5)", host_path(hardware), 30.0),
             ("d2d (16 GB/s)", d2d_path(hardware), 30.0),
             ("d2d NVLink what-if (450 GB/s)", WeightPath("d2d", 450.0, 450.0, "NVLink what-if"), 30.0),
             ("NVMe, warm process", nvme_path(), 0.0), ("host DRAM, warm process", host_path(hardware), 0.0),
             ("d2d NVLink what-if, warm process", WeightPath("d2d", 450.0, 450.0, "NVLink what-if"), 0.0)]
    rows, curves = [], {}
    for scen in scenarios:
        trace, b0, b1 = burst_trace(conv, code, minutes, rate, burst, scen, seed)
        todo = [(name, ScaleUp(p, startup), None, None) for name, p, startup in paths]
        todo.append(("role switch (+ NVMe)", ScaleUp(nvme_path()), RoleSwitch(), None))
        todo.append(("NVMe + KV floor", ScaleUp(nvme_path()), None, DEFAULT_KV_HEADROOM))
        todo.append(("role switch + KV floor (+ NVMe)", ScaleUp(nvme_path()), RoleSwitch(), DEFAULT_KV_HEADROOM))
        for name, su, rs, kvh in todo:
            pol = CapacityPDPolicy(ic, prefill_signal="prompt_tps", kv_headroom=kvh)
            res, log = simulate_autoscaled(trace, capmake, pol, 2, max_instances, cold_start=su, initial=(n_p, n_d),
                                           make_decode=capmake, role_switch=rs)
            colds = [b - a for a, b, _ in log.scale_ups]
            inb = [r for r in res.requests if b0 <= r.arrival < b1]
            w = [c - su.startup_s for c in colds]
            rows.append({"scenario": scen, "path": name, "weights_s": float(np.mean(w)) if w else float("nan"),
                         "cold_start_mean_s": float(np.mean(colds)) if colds else float("nan"),
                         "absorb_s": absorb_s(res.requests, b0, b1, ttft, tpot, target),
                         "burst_attainment": _attain(inb, ttft, tpot),
                         "slo_attainment": _attain(res.requests, ttft, tpot),
                         "gpu_hours": log.gpu_seconds / 3600, "scale_ups": len(log.scale_ups),
                         "role_switches": len(log.switches),
                         "switch_mean_s": float(np.mean([c - a for a, _, c, _, _ in log.switches]))
                         if log.switches else float("nan")})
            curves[(scen, name)] = (np.array(log.times), np.array(log.active))
    df = pd.DataFrame(rows, columns=COLUMNS)
    out = Path(out)
    cap_text = CAPTION.format(model=model, hw=hardware, wgb=wbytes / 1e9, kp=ic.prefill_rps, kd=ic.decode_tps,
                              tgt=100 * target, ttft=ttft, tpot_ms=1e3 * tpot, mx=max_instances, minutes=minutes,
                              rate=rate, seed=seed, burst=burst, kvh=100 * DEFAULT_KV_HEADROOM)
    write_table_files(df, out, cap_text, by=["scenario", "path"], metrics=COLUMNS[2:], label="tab:serving-fast-scaling",
                      missing_note="\u2014: no scale-up (weights, cold start) or no role switch in this run.")
    _plot(df, out / "absorb.png")
    return df


def _plot(df: pd.DataFrame, path: Path) -> None:
    """Time to absorb the burst per path, one group of bars per scenario."""
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    fig, ax = plt.subplots(figsize=(7, 4))
    scen = list(dict.fromkeys(df["scenario"]))
    names = list(dict.fromkeys(df["path"]))
    wd = 0.8 / max(1, len(scen))
    x = np.arange(len(names))
    for k, s in enumerate(scen):
        sub = df[df["scenario"] == s].set_index("path").reindex(names)
        ax.bar(x + k * wd, sub["absorb_s"].to_numpy(float), wd, label=s)
    ax.set_xticks(x + wd * (len(scen) - 1) / 2)
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("time to absorb the burst (s)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = cli.parser("serving_fast_scaling", __doc__)
    p.add_argument("--minutes", type=float, default=15.0, help="length of each scenario (min; the burst: middle third)")
    p.add_argument("--rate", type=float, default=6.0, help="base request rate (req/s)")
    p.add_argument("--burst", type=float, default=3.0, help="request rate during the burst, times the base rate")
    p.add_argument("--max", type=cli.positive_int, default=16, help="most instances the cluster holds")
    p.add_argument("--ttft-slo", type=float, default=2.0, help="SLO on the time to first token (s)")
    p.add_argument("--tpot-slo", type=float, default=0.15, help="SLO on the time per output token (s)")
    p.add_argument("--target", type=float, default=0.9, help="SLO attainment target (0-1)")
    cli.add_seed(p, "seed of the arrivals and lengths, and of the capacity runs")
    cli.add_data_dir(p)
    cli.add_out(p, "runs/serving_fast_scaling")
    a = p.parse_args(argv)
    for flag, v in (("--minutes", a.minutes), ("--rate", a.rate), ("--ttft-slo", a.ttft_slo),
                    ("--tpot-slo", a.tpot_slo)):
        if not (math.isfinite(v) and v > 0):
            p.error(f"{flag} {v!r}: expected a positive number")
    if not (math.isfinite(a.burst) and a.burst >= 1):
        p.error(f"--burst {a.burst!r}: expected a rate multiplier >= 1")
    if not 0 < a.target <= 1:
        p.error(f"--target {a.target!r}: expected an attainment in (0, 1]")
    if a.max < 2:
        p.error(f"--max {a.max}: disaggregated pools need at least 2 instances")
    with staged_output("python -m hpctwin.experiments.serving_fast_scaling", a.out, a.force) as out:
        run(out, a.minutes, a.rate, a.burst, a.max, a.ttft_slo, a.tpot_slo, a.target, a.seed, a.data_dir)
        table = (out / "results.md").read_text()
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
