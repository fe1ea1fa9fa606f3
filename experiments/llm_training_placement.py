"""What-if: one LLM training job placed by each placement policy on Frontier, a fat-tree and a DGX
cluster, under background load, costed by the training model (`twin.training`) on the topology graph.

For each machine the job (default: Llama 3 70B on 512 GPUs, TP 8 x PP 8 x DP 8, sequence 8,192,
64 sequences per iteration, ZeRO 1, selective recomputation, sequence parallelism) is placed on a
machine where other jobs already hold a seeded random ``--busy`` share of the nodes (a fragmented
machine), by each policy of `topology.placement` (``first-fit``, ``contiguous``, ``group-packed``,
``spread``) and `topology.llm_placement` (``llm``). Its iteration is costed with
`twin.training.iteration_time` on those nodes (graph path: the project's routers on the machine's
topology graph), with ``--background`` shares of every global link's bandwidth (Dragonfly global
cables, fat-tree core links, leaf-spine up-links) taken by the other jobs' traffic.

Machines: ``frontier`` (9,408 nodes of 8 MI250X GCDs and 4 x 200 Gb/s NICs, Slingshot Dragonfly of
74 groups of 128 nodes), ``fat-tree`` (hypothetical: Frontier's nodes on a three-level k = 32 fat-tree
instead of the Dragonfly, 2,048 nodes, 32 per edge switch with 16 up-links (2:1 taper at the edge),
4 pods of 512 nodes, links of 4 x 200 Gb/s; only the topology differs from ``frontier``) and
``dgx-h100`` (128 DGX H100 nodes with 8 x 400 Gb/s, 4 scalable units of 32 on a non-blocking
rail-optimised NDR fabric, `twin/systems/dgx-h100.toml`).

Columns: iteration time (s), slowdown = iteration time / the same job on nodes 0..n-1 of the idle
machine, groups spanned (Dragonfly groups, fat-tree pods, DGX scalable units), bytes per iteration
crossing group boundaries (`twin.training.traffic`), the exposed DP and PP seconds, MFU. The job
uses Megatron's rank order (TP fastest, then CP, DP, PP); ``llm`` keeps whole TP x PP replicas of
``topology.llm_placement``'s layout inside groups, which for this rank order still means the fewest
groups. Deterministic for a ``--seed`` (busy nodes and ``spread``).

Usage: ``python -m hpctwin.experiments.llm_training_placement [--system frontier,fat-tree,dgx-h100]
[--busy 0.3] [--background 0,0.5] [--out DIR] [--force]``
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
from hpctwin.experiments.cli import add_out, add_seed, add_system, parser
from hpctwin.experiments.tables import staged_output, write_table_files

PROG = "python -m hpctwin.experiments.llm_training_placement"
POLICIES = ("first-fit", "contiguous", "group-packed", "spread", "llm")
MACHINES = ("frontier", "fat-tree", "dgx-h100")
GBIT = 1e9 / 8
#: the hypothetical fat-tree (see the module docstring): Frontier's node injection (4 x 200 Gb/s NICs merged
#: into one terminal link, as the frontier preset) and links of 4 x 200 Gb/s (one link per NIC plane, merged);
#: k = 32, 32 hosts per edge switch and 16 up-links (2:1 taper), 4 pods of 512 nodes; Slingshot's 350 ns per
#: hop (the frontier preset's assumption)
FAT_TREE = {"kind": "fat_tree", "k": 32, "hosts_per_edge": 32, "pods": 4,
            "terminal_bandwidth": 4 * 200 * GBIT, "local_bandwidth": 4 * 200 * GBIT, "global_bandwidth": 4 * 200 * GBIT,
            "terminal_latency": 350e-9, "local_latency": 350e-9, "global_latency": 350e-9}


def machine_preset(name: str):
    """The `twin.training.hardware.SystemPreset` of a machine name of `MACHINES`."""
    from hpctwin.twin.training.hardware import GPUS, SystemPreset, system_preset  # noqa: PLC0415
    if name == "fat-tree":
        return SystemPreset("fat-tree", GPUS["mi250x-gcd"], 8, dict(FAT_TREE), machine_nodes=2048,
                            description="hypothetical: Frontier's nodes on a k=32 fat-tree, 2:1 edge taper, 4 pods")
    if name not in MACHINES:
        raise ValueError(f"--system {name!r}: unknown machine; choose among {', '.join(MACHINES)}")
    return system_preset(name)


def place(policy: str, need: int, free: np.ndarray, node_group: np.ndarray, seed: int, tp: int, pp: int,
          gpn: int) -> np.ndarray:
    """Sorted node ids ``policy`` gives a job of ``need`` nodes on the ``free`` mask."""
    from hpctwin.topology.placement import make_placer  # noqa: PLC0415
    placer = make_placer(policy)
    jobs = SimpleNamespace(columns={"tp": np.array([tp]), "pp": np.array([pp]), "gpus_per_node": np.array([gpn])})
    placer.bind(len(free), node_group, np.random.default_rng([seed, 7]), jobs)
    return placer.place(0, need, free)


def run_grid(machines, policies, model: str, gpus: int, tp: int, pp: int, seq_len: int, sequences: int,
             zero: int, recompute: str, busy: float, backgrounds, seed: int) -> pd.DataFrame:
    """One row per (machine, background share, policy); see the module docstring."""
    from hpctwin.topology.placement import groups_spanned  # noqa: PLC0415
    from hpctwin.topology.presets import node_groups  # noqa: PLC0415
    from hpctwin.twin.training import (  # noqa: PLC0415
        BatchConfig,
        ParallelConfig,
        TrainingConfigError,
        iteration_time,
    )
    from hpctwin.twin.training.hardware import machine_for  # noqa: PLC0415
    from hpctwin.twin.training.models import MODELS  # noqa: PLC0415
    from hpctwin.twin.training.traffic import global_bytes_per_iteration  # noqa: PLC0415
    if model not in MODELS:
        raise TrainingConfigError(f"--model {model!r}: unknown; known: {', '.join(MODELS)}")
    if gpus % (tp * pp):
        raise TrainingConfigError(f"--gpus {gpus} is not a multiple of tp x pp = {tp * pp}")
    par = ParallelConfig(tp=tp, pp=pp, dp=gpus // (tp * pp), sp=tp > 1, zero=zero, recompute=recompute)
    batch = BatchConfig(seq_len, sequences, 1)
    mdl = MODELS[model]
    rows = []
    for mi, name in enumerate(machines):
        hw = machine_preset(name)
        G = hw.gpus_per_node
        need = math.ceil(gpus / G)
        machine = machine_for(hw, need)
        groups = node_groups(machine.table, machine.nodes, source=f"machine {name}")
        rng = np.random.default_rng([seed, mi])
        free = np.ones(machine.nodes, dtype=bool)
        free[rng.choice(machine.nodes, round(busy * machine.nodes), replace=False)] = False
        if int(free.sum()) < need:
            raise ValueError(f"machine {name}: {int(free.sum())} nodes are free with --busy {busy}, the job needs "
                             f"{need}; lower --busy")
        ideal = iteration_time(mdl, hw, par, batch, nodes=np.arange(need), system=machine, background=0.0).total
        for f in backgrounds:
            for pol in policies:
                ids = place(pol, need, free, groups, seed, tp, pp, G)
                bd = iteration_time(mdl, hw, par, batch, nodes=ids, system=machine, background=f)
                rank_node = ids[np.arange(gpus) // G]
                gb = global_bytes_per_iteration(mdl, par, batch, rank_node, groups)
                rows.append({"machine": name, "topology": machine.params["kind"], "policy": pol,
                             "background_share": float(f), "busy_fraction": float(busy), "gpus": gpus, "nodes": need,
                             "groups_spanned": groups_spanned(ids, groups), "iteration_s": bd.total,
                             "iteration_slowdown": bd.total / ideal, "global_bytes": gb["total"],
                             "dp_s": bd.dp, "pp_s": bd.pp, "mfu": bd.mfu})
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame, path) -> None:
    """Iteration slowdown per policy, one panel per machine, one bar per background share."""
    from hpctwin.twin.plot import figure, save_png  # noqa: PLC0415
    machines = list(dict.fromkeys(df["machine"]))
    bgs = sorted(df["background_share"].unique())
    fig, axes = figure(len(machines), 1, height_in=1.7 * len(machines) + 0.3)
    for ax, mname in zip(axes[:, 0], machines):
        d = df[df["machine"] == mname]
        pols = list(dict.fromkeys(d["policy"]))
        x = np.arange(len(pols))
        w = 0.8 / len(bgs)
        for i, f in enumerate(bgs):
            y = [float(d[(d["policy"] == p) & (d["background_share"] == f)]["iteration_slowdown"].iloc[0])
                 for p in pols]
            ax.bar(x + (i - len(bgs) / 2 + 0.5) * w, y, w, label=f"{100 * f:.0f} % of global links busy")
        spans = [int(d[d["policy"] == p]["groups_spanned"].iloc[0]) for p in pols]
        ax.set_xticks(x)
        ax.set_xticklabels([f"{p}\n({s} group{'s' if s != 1 else ''})" for p, s in zip(pols, spans)], fontsize=6)
        ax.axhline(1.0, color="k", lw=0.5)
        ax.set_ylim(0.0, 1.35 * max(1.0, float(d["iteration_slowdown"].max())))
        ax.set_ylabel("iteration slowdown")
        ax.set_title(f"{mname} ({d['topology'].iloc[0]})")
        ax.legend(fontsize=6, loc="upper center", ncol=len(bgs))
    save_png(fig, path)


def _floats(text: str) -> list[float]:
    import argparse  # noqa: PLC0415
    try:
        out = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated shares in [0, 1), got {text!r}") from None
    if not out or any(not 0.0 <= x < 1.0 for x in out):
        raise argparse.ArgumentTypeError(f"expected comma-separated shares in [0, 1), got {text!r}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = parser("llm_training_placement", __doc__)
    add_system(ap, list(MACHINES), help_text="machines among " + ", ".join(MACHINES))
    ap.add_argument("--model", default="llama3-70b", help="model preset (hpctwin llm estimate --list-models)")
    ap.add_argument("--gpus", type=int, default=512, help="GPUs of the job")
    ap.add_argument("--tp", type=int, default=8, help="tensor-parallel degree")
    ap.add_argument("--pp", type=int, default=8, help="pipeline-parallel degree (DP = gpus / (tp x pp))")
    ap.add_argument("--seq-len", type=int, default=8192, help="tokens per sequence")
    ap.add_argument("--sequences", type=int, default=64, help="sequences per iteration (global batch)")
    ap.add_argument("--zero", type=int, default=1, choices=range(4), metavar="0..3", help="ZeRO stage")
    ap.add_argument("--recompute", default="selective", choices=("none", "selective", "full"))
    ap.add_argument("--busy", type=float, default=0.3, help="share of the nodes other jobs hold (seeded random)")
    ap.add_argument("--background", type=_floats, default=[0.0, 0.8],
                    help="comma-separated shares of global-link bandwidth other jobs use")
    ap.add_argument("--policies", default=",".join(POLICIES), help="comma-separated placement policies")
    add_seed(ap)
    add_out(ap, "whatif-llm-training-placement")
    a = ap.parse_args(argv)
    pols = [p.strip() for p in a.policies.split(",") if p.strip()]
    bad = [p for p in pols if p not in POLICIES]
    if bad or not pols:
        ap.error(f"--policies: unknown {', '.join(bad) or '(none given)'}; choose among {', '.join(POLICIES)}")
    bad = [s for s in a.system if s not in MACHINES]
    if bad:
        ap.error(f"--system: unknown machine {', '.join(bad)}; choose among {', '.join(MACHINES)}")
    if not 0.0 <= a.busy < 1.0:
        ap.error(f"--busy {a.busy}: expected a share in [0, 1)")
    caption = (f"One training job ({a.model}, {a.gpus} GPUs, TP {a.tp} x PP {a.pp} x "
               f"DP {a.gpus // max(a.tp * a.pp, 1)}, "
               f"sequence {a.seq_len}, {a.sequences} sequences per iteration, ZeRO {a.zero}, recompute {a.recompute}) "
               f"placed by each policy on a machine where other jobs hold {100 * a.busy:.0f} % of the nodes (seeded "
               f"random, seed {a.seed}); iteration time from hpctwin's training model on the topology graph (minimal "
               "routing, Dragonfly local links pooled per switch), with the given share of every global link's "
               "bandwidth used by other jobs. Slowdown = iteration time / the same job on nodes 0..n-1 of the idle "
               "machine. Groups: Dragonfly groups (frontier), pods (fat-tree), 32-node scalable units (dgx-h100). "
               "Global-link traffic: bytes per iteration between ranks in different groups. The fat-tree is "
               "hypothetical: Frontier's nodes (8 MI250X GCDs, 4 x 200 Gb/s) on a k = 32 fat-tree with a 2:1 edge "
               "taper, 4 pods of 512 nodes.")
    with staged_output(PROG, a.out, a.force) as out:
        df = run_grid(a.system, pols, a.model, a.gpus, a.tp, a.pp, a.seq_len, a.sequences, a.zero, a.recompute,
                      a.busy, a.background, a.seed)
        write_table_files(df, out, caption, by=["machine", "policy", "background_share"],
                          metrics=["groups_spanned", "iteration_s", "iteration_slowdown", "global_bytes", "dp_s",
                                   "pp_s", "mfu"], label="tab:llm-training-placement")
        plot(df, out / "iteration_slowdown.png")
    print(df.to_string(index=False))
    print(f"wrote {a.out}/results.csv, results.md, results.tex, iteration_slowdown.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
