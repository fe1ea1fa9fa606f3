"""What-if: recovery at scale. Checkpoint/restart vs checkpoint-free fast recovery for one training job
from 256 to 16,384 GPUs, with failure rates from published interruption statistics.

The job (default Llama 3 405B on DGX H100 nodes: TP 8 x PP 16 x DP = GPUs / 128, 4 virtual stages,
sequence 8,192, 16 sequences per DP replica, ZeRO 1, full recomputation; its iteration time from
`twin.training.estimate`) runs on a machine of ``--machine-gpus`` GPUs (default 16,384, the size of
the Llama 3 run) whose file system gives each GPU Meta's Tectonic share (2 TB/s sustained for 24K
GPUs, `twin.training.storage`). Failures: `twin.training.failure_rates` (default ``llama3``: 419
unexpected interruptions in 54 days on 16,384 H100). Regimes (`twin.training.recovery`):

* ``checkpoint_restart``: synchronous checkpoints of 14 B per parameter at Daly's interval, the job
  alone on the file system; a failure loses the work since the last checkpoint and pays a restart
  (detection 60 s + relaunch 120 s + 0.1 s per node + reload; assumptions);
* ``checkpoint_restart_shared``: the same while every other node of the machine checkpoints at the
  same time (the file system's aggregate shared in proportion to nodes);
* ``fast_recovery``: checkpoint-free, FlashRecovery-like: a failure loses at most the current
  iteration and costs 150 s whatever the scale (FlashRecovery's figure on 4,800 devices).

Columns: checkpoint size and write time, restart, job MTBF, Daly's interval (or the step), goodput
(ETTR from Daly's renewal formula), a Monte-Carlo check of the goodput over ``--trials`` seeded
trials of one day of work (`twin.resilience.simulate`, mean and 95 % interval), expected failures
per day and lost GPU-hours per day. ``goodput.png``: goodput and lost GPU-hours against GPUs.

Usage: ``python -m hpctwin.experiments.llm_recovery [--gpus 256,...,16384] [--source llama3] [--trials 200]
[--seed 0] [--out DIR] [--force]``
"""
from __future__ import annotations

import pandas as pd
from hpctwin.experiments.cli import add_out, add_seed, parser
from hpctwin.experiments.tables import staged_output, write_table_files

PROG = "python -m hpctwin.experiments.llm_recovery"
DEFAULT_GPUS = (256, 512, 1024, 2048, 4096, 8192, 16384)
REGIMES = ("checkpoint_restart", "checkpoint_restart_shared", "fast_recovery")


def _ints(text: str) -> list[int]:
    import argparse  # noqa: PLC0415
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}") from None
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers >= 1, got {text!r}")
    return out


def run_grid(model: str, system: str, gpus_list, sources, tp: int, pp: int, vpp: int, seq_len: int,
             per_replica: int, machine_gpus: int, trials: int, seed: int) -> pd.DataFrame:
    """One row per (source, GPUs, regime); see the module docstring."""
    from hpctwin.twin import resilience as rs  # noqa: PLC0415
    from hpctwin.twin.training.estimate import estimate  # noqa: PLC0415
    from hpctwin.twin.training.failure_rates import failure_source  # noqa: PLC0415
    from hpctwin.twin.training.hardware import system_preset  # noqa: PLC0415
    from hpctwin.twin.training.recovery import (  # noqa: PLC0415
        checkpoint_restart_goodput,
        fast_recovery_goodput,
        recovery_costs,
    )
    try:
        gpn = system_preset(system).gpus_per_node
    except KeyError as e:
        raise ValueError(f"--system: {e.args[0]}") from None
    rows = []
    for si, name in enumerate(sources):
        try:
            src = failure_source(name)
        except KeyError as e:
            raise ValueError(f"--source: {e.args[0]}") from None
        for gpus in gpus_list:
            if gpus % (tp * pp):
                raise ValueError(f"--gpus {gpus}: not a multiple of tp x pp = {tp * pp}")
            if gpus > machine_gpus:
                raise ValueError(f"--gpus {gpus}: larger than --machine-gpus {machine_gpus}")
            dp = gpus // (tp * pp)
            est = estimate(model, system, gpus, tp, pp, dp, seq_len=seq_len,
                           global_batch_tokens=seq_len * per_replica * dp, zero=1, recompute="full", vpp=vpp)
            step = est["iteration_s"]
            alone = recovery_costs(model, system, gpus, src, machine_gpus=machine_gpus)
            machine_nodes = machine_gpus // gpn
            shared = recovery_costs(model, system, gpus, src, machine_gpus=machine_gpus,
                                    other_writer_nodes=machine_nodes - alone.nodes)
            per_gpu_mtbf = 1.0 / src.rate_per_gpu_s
            for ri, regime in enumerate(REGIMES):
                c = shared if regime == "checkpoint_restart_shared" else alone
                gp = fast_recovery_goodput(c, step) if regime == "fast_recovery" else checkpoint_restart_goodput(c)
                mc = rs.simulate(86400.0, gpus, per_gpu_mtbf, regime="fast_recovery" if regime == "fast_recovery"
                                 else "checkpoint_restart", checkpoint_cost=c.checkpoint_s, restart=c.restart_s,
                                 interval=gp.interval_s if regime != "fast_recovery" else None, step=step,
                                 recovery=gp.per_failure_s, trials=trials, seed=seed + 1000 * si + 10 * ri + gpus)
                rows.append({"source": name, "gpus": gpus, "nodes": c.nodes, "regime": regime,
                             "checkpoint_bytes": c.checkpoint_bytes,
                             "checkpoint_s": c.checkpoint_s if regime != "fast_recovery" else 0.0,
                             "restart_s": gp.per_failure_s, "mtbf_h": c.mtbf_s / 3600.0,
                             "interval_s": gp.interval_s, "iteration_s": step, "goodput": gp.ettr,
                             "goodput_mc": mc.ettr_mean, "goodput_mc_ci95": 1.96 * mc.ettr_sem,
                             "failures_per_day": gp.failures_per_day,
                             "lost_gpu_hours_per_day": gp.lost_gpu_hours_per_day})
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame, path) -> None:
    """Goodput (top: Daly's formula as lines, Monte-Carlo means and 95 % intervals as markers) and lost
    GPU-hours per day (bottom) against GPUs, one colour per regime."""
    from hpctwin.twin.plot import figure, save_png  # noqa: PLC0415
    fig, axes = figure(2, 1, height_in=4.2)
    for (src, regime), d in df.groupby(["source", "regime"], sort=False):
        lab = regime if df["source"].nunique() == 1 else f"{regime} ({src})"
        line, = axes[0, 0].plot(d["gpus"], d["goodput"], lw=1, label=lab)
        axes[0, 0].errorbar(d["gpus"], d["goodput_mc"], yerr=d["goodput_mc_ci95"], fmt="o", ms=3, capsize=2,
                            color=line.get_color())
        axes[1, 0].plot(d["gpus"], d["lost_gpu_hours_per_day"], marker="o", ms=3, lw=1, label=lab)
    for ax in axes[:, 0]:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("GPUs of the job")
    axes[0, 0].set_ylabel("goodput (ETTR)")
    axes[1, 0].set_ylabel("lost GPU-hours per day")
    axes[1, 0].set_yscale("log")
    axes[0, 0].set_title("lines: Daly's formula; markers: Monte Carlo mean and 95 % interval", fontsize=7)
    axes[0, 0].legend(fontsize=6, loc="lower left")
    save_png(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = parser("llm_recovery", __doc__)
    ap.add_argument("--model", default="llama3-405b", help="model preset")
    ap.add_argument("--system", default="dgx-h100", help="system preset with storage figures (dgx-h100, frontier, "
                                                         "dgx-a100-40gb, dgx-a100-80gb)")
    ap.add_argument("--gpus", type=_ints, default=list(DEFAULT_GPUS), help="comma-separated job sizes (GPUs)")
    ap.add_argument("--source", default="llama3", help="comma-separated failure sources (llama3, llama3-hardware, "
                                                        "llama3-gpu)")
    ap.add_argument("--tp", type=int, default=8, help="tensor-parallel degree")
    ap.add_argument("--pp", type=int, default=16, help="pipeline-parallel degree (DP = gpus / (tp x pp))")
    ap.add_argument("--vpp", type=int, default=4, help="virtual pipeline stages")
    ap.add_argument("--seq-len", type=int, default=8192, help="tokens per sequence")
    ap.add_argument("--per-replica", type=int, default=16, help="sequences per DP replica per iteration")
    ap.add_argument("--machine-gpus", type=int, default=16384, help="GPUs of the machine sharing the file system")
    ap.add_argument("--trials", type=int, default=200, help="Monte-Carlo trials per point")
    add_seed(ap, "seed of the Monte-Carlo failure times")
    add_out(ap, "whatif-llm-recovery")
    a = ap.parse_args(argv)
    if a.trials < 2:
        ap.error(f"--trials {a.trials}: expected at least 2 (an interval needs 2 trials)")
    sources = [s.strip() for s in a.source.split(",") if s.strip()]
    caption = (f"Recovery at scale: {a.model} on {a.system} nodes (TP {a.tp} x PP {a.pp} x DP = GPUs / {a.tp * a.pp}, "
               f"{a.vpp} virtual stages, sequence {a.seq_len}, {a.per_replica} sequences per replica, ZeRO 1, full "
               f"recomputation), machine of {a.machine_gpus:,} GPUs whose file system gives each GPU the sustained "
               "share of "
               "Meta's Tectonic (2 TB/s for 24K GPUs), each node at most 20 GB/s. Failures: per-GPU rate of the source "
               "(llama3: 419 unexpected interruptions in 54 days on 16,384 H100; Llama 3 paper, Table 5). Checkpoint: "
               "14 B per parameter, synchronous, at Daly's interval; restart = 60 s detection + 120 s relaunch + 0.1 s "
               "per node + reload (assumptions); shared: every other node of the machine checkpoints at the same time. "
               "Fast recovery: checkpoint-free, at most one iteration lost, 150 s per failure (FlashRecovery on 4,800 "
               f"devices). Goodput: Daly's renewal formula; MC: mean and 95 % interval of {a.trials} seeded trials of "
               f"one day of work (seed {a.seed}). Lost GPU-hours per day = GPUs x 24 x (1 - goodput).")
    with staged_output(PROG, a.out, a.force) as out:
        df = run_grid(a.model, a.system, a.gpus, sources, a.tp, a.pp, a.vpp, a.seq_len, a.per_replica,
                      a.machine_gpus, a.trials, a.seed)
        write_table_files(df, out, caption, by=["source", "gpus", "regime"],
                          metrics=["checkpoint_s", "restart_s", "mtbf_h", "interval_s", "goodput", "goodput_mc",
                                   "failures_per_day", "lost_gpu_hours_per_day"], label="tab:llm-recovery")
        plot(df, out / "goodput.png")
    print(df[["source", "gpus", "regime", "checkpoint_s", "restart_s", "interval_s", "goodput", "goodput_mc",
              "lost_gpu_hours_per_day"]].to_string(index=False))
    print(f"wrote {a.out}/results.csv, results.md, results.tex, goodput.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
