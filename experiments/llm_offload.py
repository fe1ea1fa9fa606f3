"""What-if: training a model larger than GPU memory with no offload, one offload tier (ZeRO-Offload /
ZeRO-Infinity style) or several tiers at once (MLP-Offload style), from `twin.training.offload`.

Each case (``--case SYSTEM:MODEL:GPUS:SEQ_LEN:SEQUENCES``) runs ZeRO 3 with full recomputation, data
parallelism only (TP = PP = 1, as the offload papers' single-node and few-node runs), one sequence
per micro-batch, and offloads the optimizer state (fp32 master weights, Adam moments and the fp32
gradient partition, 16 B per parameter) to: ``none``, ``cpu`` (ZeRO-Offload), ``nvme`` or ``pfs``
(ZeRO-Infinity, host DRAM as staging only), ``cpu+nvme``, ``nvme+pfs``, ``cpu+nvme+pfs`` (MLP-Offload
style: host DRAM keeps what fits, the rest split over the I/O paths in proportion to their bandwidth),
and ``cpu+nvme+pfs`` with the update's reads overlapped with the last backward (``overlap 1``).

Two loads of the parallel file system: ``alone`` (the job's nodes are the only ones doing I/O: each
node reaches `storage.PFS_CLIENT_CAP` or its share of the aggregate) and ``busy`` (every other node
of the machine does I/O at the same time: each node gets aggregate / machine nodes).

Default cases: Frontier, Llama 3 70B on one node (8 GCDs; 1.1 TB of optimizer state for 410 GB of
usable DRAM); Frontier, Megatron 145B on 4 nodes; DGX H100, Llama 3 405B on 4 nodes (state 1% larger
than usable DRAM); DGX H100, Megatron 310B on 4 nodes (state fits in DRAM). ``speedup_vs_nvme`` is the
ZeRO-Infinity NVMe iteration time over the row's. MLP-Offload (Maurya et al., SC'25) reports 2.5x
faster iterations than the state of the art for models up to 280B; docs/training.md compares.

Usage: ``python -m hpctwin.experiments.llm_offload [--case frontier:llama3-70b:8:4096:16 ...] [--out DIR]``
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from hpctwin.experiments.cli import add_out, add_seed, parser
from hpctwin.experiments.tables import staged_output, write_table_files

PROG = "python -m hpctwin.experiments.llm_offload"
DEFAULT_CASES = ("frontier:llama3-70b:8:4096:16", "frontier:megatron-145b:32:2048:64",
                 "dgx-h100:llama3-405b:32:2048:64", "dgx-h100:megatron-310b:32:2048:64")
#: (label, --offload, overlap)
OFFLOADS = (("none", "none", 0.0), ("cpu", "cpu", 0.0), ("nvme", "nvme", 0.0), ("pfs", "pfs", 0.0),
            ("cpu+nvme", "cpu+nvme", 0.0), ("nvme+pfs", "nvme+pfs", 0.0), ("cpu+nvme+pfs", "cpu+nvme+pfs", 0.0),
            ("cpu+nvme+pfs, overlap 1", "cpu+nvme+pfs", 1.0))


def parse_case(text: str) -> tuple[str, str, int, int, int]:
    """``SYSTEM:MODEL:GPUS:SEQ_LEN:SEQUENCES`` -> a tuple; ValueError naming the field."""
    parts = text.split(":")
    if len(parts) != 5:
        raise ValueError(f"--case {text!r}: expected SYSTEM:MODEL:GPUS:SEQ_LEN:SEQUENCES, e.g. "
                         f"{DEFAULT_CASES[0]}")
    out = []
    for name, v in zip(("GPUS", "SEQ_LEN", "SEQUENCES"), parts[2:]):
        try:
            n = int(v)
        except ValueError:
            raise ValueError(f"--case {text!r}: {name} = {v!r} is not a whole number") from None
        if n < 1:
            raise ValueError(f"--case {text!r}: {name} = {n}: expected >= 1")
        out.append(n)
    return (parts[0], parts[1], *out)


def run_cases(cases, loads=("alone", "busy")) -> pd.DataFrame:
    """One row per (case, PFS load, offload); see the module docstring."""
    from hpctwin.twin.training.estimate import estimate  # noqa: PLC0415
    from hpctwin.twin.training.hardware import machine_for, system_preset  # noqa: PLC0415
    nan = float("nan")
    rows = []
    for system, model, gpus, seq, seqs in cases:
        try:
            hw = system_preset(system)
        except KeyError as e:
            raise ValueError(f"--case: {e.args[0]}") from None
        nodes = math.ceil(gpus / hw.gpus_per_node)
        machine_nodes = machine_for(hw, nodes).nodes
        for load in loads:
            other = 0 if load == "alone" else machine_nodes - nodes
            base_nvme = None
            for label, off, ov in OFFLOADS:
                r = estimate(model, system, gpus, 1, 1, gpus, seq_len=seq, global_batch_tokens=seq * seqs, zero=3,
                             recompute="full", offload=off, offload_overlap=ov, other_io_nodes=other)
                o = r.get("offload") or {}
                at = o.get("bytes_per_node", {})
                t = o.get("terms_s", {})
                row = {"system": system, "model": model, "gpus": gpus, "nodes": nodes, "pfs_load": load,
                       "offload": label, "style": o.get("style", "none"), "fits": bool(r["fits"]),
                       "iteration_s": r["iteration_s"], "update_s": t.get("update", nan),
                       "update_io_s": o.get("update_io_s", nan), "cpu_adam_s": o.get("cpu_adam_s", nan),
                       "host_bytes": at.get("cpu", 0.0), "nvme_bytes": at.get("nvme", 0.0),
                       "pfs_bytes": at.get("pfs", 0.0), "memory_per_gpu_bytes": r["memory_per_gpu_bytes"],
                       "mfu": r["mfu"]}
                if label == "nvme":
                    base_nvme = r["iteration_s"]
                rows.append(row)
            for row in rows[-len(OFFLOADS):]:
                row["speedup_vs_nvme"] = base_nvme / row["iteration_s"] if row["offload"] != "none" and row["fits"] \
                    else nan
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame, path) -> None:
    """Iteration time per offload (log scale), one panel per case; hatched bars do not fit."""
    from hpctwin.twin.plot import figure, save_png  # noqa: PLC0415
    keys = list(dict.fromkeys(zip(df["system"], df["model"], df["gpus"])))
    fig, axes = figure(len(keys), 1, height_in=1.8 * len(keys) + 0.3, width_in=7.16)
    for ax, (system, model, gpus) in zip(axes[:, 0], keys):
        d = df[(df["system"] == system) & (df["model"] == model) & (df["gpus"] == gpus)]
        labels = list(dict.fromkeys(d["offload"]))
        loads = list(dict.fromkeys(d["pfs_load"]))
        x = np.arange(len(labels))
        w = 0.8 / len(loads)
        for i, load in enumerate(loads):
            dd = d[d["pfs_load"] == load].set_index("offload").loc[labels]
            bars = ax.bar(x + (i - len(loads) / 2 + 0.5) * w, dd["iteration_s"], w, label=f"PFS {load}")
            for b, ok in zip(bars, dd["fits"]):
                if not ok:
                    b.set_hatch("///")
                    b.set_alpha(0.4)
        ax.set_yscale("log")
        ax.set_xticks(x)
        ax.set_xticklabels(labels, fontsize=6, rotation=20, ha="right")
        ax.set_ylabel("iteration (s)")
        ax.set_title(f"{model} on {gpus} GPUs of {system} (hatched: does not fit)")
        ax.legend(fontsize=6)
    save_png(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = parser("llm_offload", __doc__)
    ap.add_argument("--case", action="append", default=None, metavar="SYSTEM:MODEL:GPUS:SEQ_LEN:SEQUENCES",
                    help=f"a case (repeatable; default: {' '.join(DEFAULT_CASES)})")
    add_seed(ap, "unused: the offload model is deterministic (kept for the common options)")
    add_out(ap, "whatif-llm-offload")
    a = ap.parse_args(argv)
    caption = ("Iteration time of models larger than GPU memory: ZeRO 3, full recomputation, data parallelism only, "
               "one sequence per micro-batch; offload of the optimizer state (16 B per parameter: fp32 master weights, "
               "Adam moments, fp32 gradient partition). One tier: ZeRO-Offload (cpu) / ZeRO-Infinity (nvme, pfs) "
               "style; several: MLP-Offload style (host DRAM keeps what fits, the rest split over the I/O paths in "
               "proportion to their bandwidth). Both styles pipeline the update's I/O with the CPU Adam step "
               "(36 B of DRAM traffic per parameter at 75 % of the DRAM peak); overlap 1: the update's reads also hide "
               "behind the last backward. PFS alone: the job's nodes are the only ones doing I/O (each up to 20 GB/s); "
               "busy: every node of the machine does I/O at once. Speed-up: the nvme row's iteration time / the row's, "
               "for rows that fit. Rows that do not fit (GPU memory or tier capacity) show the time the configuration "
               "would take. "
               "Bandwidths and capacities: docs/training.md (Frontier: OLCF/ORNL figures; DGX: datasheets, drive "
               "speeds assumed, PFS the per-GPU share of Meta's Tectonic).")
    with staged_output(PROG, a.out, a.force) as out:
        cases = [parse_case(c) for c in (a.case or DEFAULT_CASES)]
        df = run_cases(cases)
        write_table_files(df, out, caption, by=["system", "model", "gpus", "pfs_load", "offload"],
                          metrics=["fits", "iteration_s", "speedup_vs_nvme", "update_io_s", "cpu_adam_s", "host_bytes",
                                   "nvme_bytes", "pfs_bytes", "memory_per_gpu_bytes"], label="tab:llm-offload")
        plot(df, out / "offload_iteration.png")
    print(df[["system", "model", "gpus", "pfs_load", "offload", "fits", "iteration_s", "speedup_vs_nvme"]]
          .to_string(index=False))
    print(f"wrote {a.out}/results.csv, results.md, results.tex, offload_iteration.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
