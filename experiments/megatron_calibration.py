"""Calibration of the training model against Megatron-LM's published scaling table.

Every row of Narayanan et al., SC'21, Table 1 (GPT 1.7B ... 1T on 32 ... 3,072 A100 80 GB GPUs of
Selene; `twin.training.published.MEGATRON_TABLE1`) is run through `twin.training.iteration_time`
with the row's TP / PP / DP / batch, the micro-batch size, DDP implementation and interleaving of
the paper's artifact (``run_table_1.sh``), fp16 on the ``dgx-a100-80gb`` preset, full activation
recomputation, unfused attention (2021 Megatron-LM), no sequence parallelism, ZeRO 0, contiguous
placement (analytic fabric). Our achieved teraFLOP/s per GPU is counted as the paper counts it
(eq. 3, recomputation included): error = ours / theirs - 1.

    python -m hpctwin.experiments.megatron_calibration --out runs/megatron_calibration [--fit]

Writes ``results.csv`` (one row per Table 1 row: configuration, published and modelled teraFLOP/s
per GPU, error, MFU, iteration time and its terms, memory per GPU) and ``table.md``. ``--fit``
re-fits the two fitted constants (``gemm_eff_max``, ``mem_traffic``; ``gemm_x_half`` fixed, see
docs/training.md) by Nelder-Mead on the largest |log(ours / theirs)| over the rows from several
starts, prints them and writes ``fit.json``; the tables always use `twin.training.CONSTANTS`.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from hpctwin.experiments.tables import write_results_csv
from hpctwin.twin.training import CONSTANTS, BatchConfig, Constants, ParallelConfig, iteration_time
from hpctwin.twin.training.hardware import system_preset
from hpctwin.twin.training.memory import memory_per_gpu
from hpctwin.twin.training.models import MODELS
from hpctwin.twin.training.published import MEGATRON_TABLE1, MegatronRow

SYSTEM = "dgx-a100-80gb"
SEQ_LEN = 2048
CAPTION = ("Megatron-LM calibration: Narayanan et al. SC'21 Table 1 (GPT, A100 80 GB, fp16, s = 2048, V = 51200, "
           "full recomputation) vs hpctwin's training model (dgx-a100-80gb preset, contiguous placement). "
           "teraFLOP/s per GPU counted as the paper's eq. 3 (recomputation included); error = ours / theirs - 1; "
           "MFU = PaLM definition (no recomputation, peak 312 TFLOP/s).")


def row_config(r: MegatronRow) -> tuple[ParallelConfig, BatchConfig]:
    """The parallel and batch configuration of a Table 1 row (run_table_1.sh settings)."""
    par = ParallelConfig(tp=r.tp, pp=r.pp, dp=r.dp, vpp=r.vpp, sp=False, recompute="full", attention="unfused",
                         zero=0, dp_overlap=1.0 if r.ddp == "torch" else 0.0)
    return par, BatchConfig(SEQ_LEN, r.batch, r.micro_batch)


def calibration_rows(k: Constants = CONSTANTS) -> pd.DataFrame:
    """One row per Table 1 row: configuration, published vs modelled figures, breakdown (s), memory (GiB)."""
    hw = system_preset(SYSTEM)
    out = []
    for r in MEGATRON_TABLE1:
        par, batch = row_config(r)
        bd = iteration_time(r.model, hw, par, batch, k=k)
        mem = memory_per_gpu(MODELS[r.model], par, batch, hw.gpu.memory_bytes, k)
        out.append({"model": r.model, "params_b": r.params_b, "gpus": r.gpus, "tp": r.tp, "pp": r.pp, "dp": r.dp,
                    "batch": r.batch, "micro_batch": r.micro_batch, "vpp": r.vpp, "ddp": r.ddp,
                    "paper_tflops_per_gpu": r.tflops_per_gpu, "model_tflops_per_gpu": bd.tflops_per_gpu,
                    "error_pct": 100.0 * (bd.tflops_per_gpu / r.tflops_per_gpu - 1.0),
                    "paper_peak_pct": r.peak_pct,
                    "model_peak_pct": 100.0 * bd.tflops_per_gpu * 1e12 / hw.gpu.peak_flops,
                    "mfu": bd.mfu, "iteration_s": bd.total, "compute_s": bd.compute, "memory_bound_s": bd.memory_bound,
                    "tp_s": bd.tp, "bubble_s": bd.bubble, "pp_s": bd.pp, "dp_s": bd.dp, "optimizer_s": bd.optimizer,
                    "memory_per_gpu_gib": mem.total / 2 ** 30, "fits": bool(mem.fits)})
    return pd.DataFrame(out)


def max_log_error(k: Constants) -> float:
    """Largest |log(ours / theirs)| over the Table 1 rows."""
    df = calibration_rows(k)
    return float(np.max(np.abs(np.log(df["model_tflops_per_gpu"] / df["paper_tflops_per_gpu"]))))


def fit(base: Constants = CONSTANTS, starts=((0.7, 1.0), (0.8, 2.5), (0.9, 0.3))) -> Constants:
    """Re-fit ``gemm_eff_max`` and ``mem_traffic`` (minimax of the log error, Nelder-Mead)."""
    from scipy.optimize import minimize  # noqa: PLC0415

    def obj(x):
        if x[0] <= 0 or x[1] < 0:
            return 10.0
        return max_log_error(replace(base, gemm_eff_max=float(x[0]), mem_traffic=float(x[1])))

    best = min((minimize(obj, x0, method="Nelder-Mead", options={"xatol": 1e-5, "fatol": 1e-7, "maxiter": 2000})
                for x0 in starts), key=lambda r: r.fun)
    return replace(base, gemm_eff_max=float(best.x[0]), mem_traffic=float(best.x[1]))


def markdown(df: pd.DataFrame) -> str:
    """The calibration table in GitHub Markdown, caption first."""
    head = ["model", "GPUs", "TP", "PP", "DP", "batch", "mb", "v", "paper TF/s", "ours TF/s", "error %",
            "MFU %", "iteration s", "memory GiB"]
    lines = [CAPTION, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, r in df.iterrows():
        cells = [r.model, r.gpus, r.tp, r.pp, r.dp, r.batch, r.micro_batch, r.vpp, f"{r.paper_tflops_per_gpu:.0f}",
                 f"{r.model_tflops_per_gpu:.1f}", f"{r.error_pct:+.1f}", f"{100 * r.mfu:.1f}", f"{r.iteration_s:.2f}",
                 f"{r.memory_per_gpu_gib:.1f}"]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    err = df["error_pct"].abs()
    lines += ["", f"Largest |error| {err.max():.1f} %, mean |error| {err.mean():.1f} % over {len(df)} rows."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="megatron_calibration", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output folder (results.csv, table.md)")
    ap.add_argument("--fit", action="store_true", help="re-fit gemm_eff_max and mem_traffic and write fit.json")
    a = ap.parse_args(argv)
    out = Path(a.out)
    if out.exists() and not out.is_dir():
        print(f"megatron_calibration: error: --out {out}: exists and is not a folder", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    df = calibration_rows()
    write_results_csv(df, out / "results.csv")
    (out / "table.md").write_text(markdown(df))
    print(markdown(df))
    if a.fit:
        k = fit()
        res = {"gemm_eff_max": k.gemm_eff_max, "mem_traffic": k.mem_traffic, "gemm_x_half": k.gemm_x_half,
               "max_abs_log_error": max_log_error(k), "max_abs_error_pct": 100 * (math.exp(max_log_error(k)) - 1)}
        (out / "fit.json").write_text(json.dumps(res, indent=2) + "\n")
        print("fit:", json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
