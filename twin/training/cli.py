"""``hpctwin llm estimate``: iteration time, FLOP/s per GPU, MFU and memory of a training configuration.

    hpctwin llm estimate --model llama3-70b --system dgx-h100 --gpus 512 --tp 8 --pp 4 --dp 16 \\
        --seq-len 8192 --global-batch-tokens 16777216 [--cp 1] [--micro-batch 1] [--zero 1] \\
        [--recompute selective] [--offload cpu+nvme+pfs --offload-what optimizer] [--json]
    hpctwin llm estimate --list-models | --list-systems

Bad values print one line ``hpctwin llm estimate: error: ...`` on stderr and exit with status 2.
Also ``python -m hpctwin.twin.training.cli estimate ...``.
"""
from __future__ import annotations

import argparse
import json
import sys

PROG = "hpctwin llm estimate"


class _Usage(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (raised, printed by `main`)."""

    def error(self, message):  # noqa: D401 - argparse hook
        raise _Usage(message)


def _parser() -> _Parser:
    p = _Parser(prog=PROG, description="Estimate one LLM training configuration (docs/training.md).")
    p.add_argument("--model", help="model preset (--list-models)")
    p.add_argument("--system", help="system preset (--list-systems)")
    p.add_argument("--gpus", type=int, help="GPUs of the job (= tp x pp x dp x cp)")
    for name, h in (("tp", "tensor"), ("pp", "pipeline"), ("dp", "data"), ("cp", "context"), ("ep", "expert")):
        p.add_argument(f"--{name}", type=int, default=1, help=f"{h}-parallel degree (default 1)")
    p.add_argument("--vpp", type=int, default=1, help="virtual pipeline stages per GPU, interleaved 1F1B (default 1)")
    p.add_argument("--micro-batch", type=int, default=1, help="sequences per micro-batch (default 1)")
    p.add_argument("--seq-len", type=int, help="tokens per sequence")
    p.add_argument("--global-batch-tokens", type=int, help="tokens per iteration (a multiple of --seq-len)")
    p.add_argument("--zero", type=int, default=0, choices=range(4), metavar="0..3", help="ZeRO stage (3 = FSDP)")
    p.add_argument("--recompute", default="none", choices=("none", "selective", "full"))
    p.add_argument("--attention", default="flash", choices=("flash", "unfused"))
    p.add_argument("--sp", dest="sp", action="store_true", default=None,
                   help="sequence parallelism (default: on if tp > 1)")
    p.add_argument("--no-sp", dest="sp", action="store_false")
    p.add_argument("--dp-overlap", type=float, default=1.0,
                   help="share of the last backward that hides gradient reduction (default 1; 0 = not overlapped)")
    p.add_argument("--tp-overlap", type=float, default=0.0,
                   help="share of TP communication hidden behind GEMMs (default 0)")
    p.add_argument("--allow-tp-across-nodes", action="store_true", help="let TP groups span nodes")
    p.add_argument("--offload", default="none", metavar="TIERS",
                   help="none (default), or offload tiers among cpu, nvme, pfs joined by + (one tier: ZeRO-Offload/"
                        "Infinity style; several, e.g. cpu+nvme+pfs: MLP-Offload style; docs/training.md)")
    p.add_argument("--offload-what", default="optimizer", choices=("optimizer", "params", "both"),
                   help="what to offload (default optimizer; params and both need --zero 3)")
    p.add_argument("--offload-overlap", type=float, default=0.0,
                   help="share of the last backward that hides offload reads (assumption; default 0)")
    p.add_argument("--other-io-nodes", type=int, default=0,
                   help="nodes of other jobs using the parallel file system at the same time (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--list-models", action="store_true", help="list model presets and exit")
    p.add_argument("--list-systems", action="store_true", help="list system presets and exit")
    return p


def _list_models() -> str:
    from .models import MODELS, total_params  # noqa: PLC0415
    rows = [f"{'name':16s} {'params':>9s} {'layers':>6s} {'hidden':>6s} {'heads':>5s} {'kv':>3s} {'ffn':>6s} "
            f"{'vocab':>6s}  source"]
    for m in MODELS.values():
        moe = f" MoE {m.experts}x top-{m.top_k}" if m.is_moe else ""
        rows.append(f"{m.name:16s} {total_params(m) / 1e9:8.2f}B {m.layers:6d} {m.hidden:6d} {m.heads:5d} "
                    f"{m.kv_heads:3d} {m.ffn:6d} {m.vocab:6d}  {m.source}{moe}")
    return "\n".join(rows)


def _list_systems() -> str:
    from .hardware import ALIASES, SYSTEMS  # noqa: PLC0415
    rows = [f"{s.name:14s} {s.gpus_per_node} x {s.gpu.name:10s} {s.description}" for s in SYSTEMS.values()]
    rows.append("aliases: " + ", ".join(f"{a} = {t}" for a, t in sorted(ALIASES.items())))
    return "\n".join(rows)


def _gib(b: float) -> str:
    return f"{b / 2 ** 30:.1f} GiB"


def format_text(r: dict) -> str:
    """Human-readable lines of an `estimate.estimate` result."""
    c, b, mb = r["config"], r["breakdown_s"], r["memory_bytes"]
    terms = ", ".join(f"{k} {b[k]:.4g}" for k in ("compute", "memory_bound", "tp", "cp", "ep", "bubble", "pp", "dp",
                                                   "optimizer"))
    if r.get("offload") is not None:
        terms += f", offload {sum(v for key, v in b.items() if key.startswith('offload_')):.4g}"
    return "\n".join([
        f"{c['model']} on {c['system']} ({c['gpu']}): {c['gpus']} GPUs on {c['nodes']} nodes, "
        f"TP {c['tp']} x PP {c['pp']}"
        f" x DP {c['dp']} x CP {c['cp']}, {c['microbatches']} micro-batches of "
        f"{c['micro_batch']} x {c['seq_len']} tokens"
        f" per replica, recompute {c['recompute']}, ZeRO {c['zero']}",
        f"iteration time          {r['iteration_s']:.4g} s  ({terms}; s)",
        f"achieved TFLOP/s / GPU  {r['tflops_per_gpu']:.1f}  (Narayanan et al. count, recomputation included)",
        f"model TFLOP/s / GPU     {r['model_tflops_per_gpu']:.1f}  (no recomputation)",
        f"MFU                     {100 * r['mfu']:.1f} %  (PaLM definition)",
        f"tokens/s                {r['tokens_per_s']:.4g}",
        f"memory per GPU          {_gib(r['memory_per_gpu_bytes'])} of {_gib(mb['capacity'])} "
        f"(usable {_gib(mb['usable'])}, "
        f"{r['memory_stage']} stage): {'fits' if r['fits'] else 'does NOT fit'}  (weights {_gib(mb['weights'])}, "
        f"gradients {_gib(mb['gradients'])}, optimizer {_gib(mb['optimizer'])}, activations {_gib(mb['activations'])}, "
        f"buffers {_gib(mb['buffers'])})",
    ] + _offload_lines(r))


def _offload_lines(r: dict) -> list[str]:
    """The offload line of an offloaded estimate, or the hint of a job that does not fit."""
    o = r.get("offload")
    if o is not None:
        t = o["terms_s"]
        where = ", ".join(f"{k} {v / 1e9:,.0f} GB" for k, v in o["bytes_per_node"].items())
        line = (f"offload                 {o['what']} to {o['tiers']} ({o['style']}): per node {where}; update "
                f"{t['update']:.4g} s (I/O {o['update_io_s']:.4g} s, CPU Adam {o['cpu_adam_s']:.4g} s), gradient "
                f"copy {t['grad_copy']:.4g} s, flush {t['grad_flush']:.4g} s, parameter copy {t['param_copy']:.4g} s, "
                f"fetch {t['param_fetch']:.4g} s")
        return [line] + ([f"offload does not fit     {o['why']}"] if o["why"] else [])
    if "fit_with_offload" in r:
        s = r["fit_with_offload"]
        if s is None:
            return ["to fit                  no ZeRO stage or offload of the tiers cpu, nvme, pfs makes it fit"]
        return [(f"to fit                  {s['args']}: {_gib(s['memory_per_gpu_bytes'])} per GPU, iteration "
                 f"{s['iteration_s']:.4g} s")]
    return []


def _run_estimate(argv: list[str]) -> int:
    a = _parser().parse_args(argv)
    if a.list_models or a.list_systems:
        print(_list_models() if a.list_models else _list_systems())
        return 0
    missing = [f"--{n.replace('_', '-')}" for n in ("model", "system", "gpus", "seq_len", "global_batch_tokens")
               if getattr(a, n) is None]
    if missing:
        raise _Usage(f"missing {', '.join(missing)} (see --help)")
    from .estimate import estimate  # noqa: PLC0415
    r = estimate(a.model, a.system, a.gpus, a.tp, a.pp, a.dp, a.cp, seq_len=a.seq_len,
                 global_batch_tokens=a.global_batch_tokens, micro_batch=a.micro_batch, zero=a.zero,
                 recompute=a.recompute, ep=a.ep, vpp=a.vpp, sp=a.sp, attention=a.attention, dp_overlap=a.dp_overlap,
                 tp_overlap=a.tp_overlap,                  allow_tp_across_nodes=a.allow_tp_across_nodes,
                 offload=a.offload, offload_what=a.offload_what, offload_overlap=a.offload_overlap,
                 other_io_nodes=a.other_io_nodes)
    print(json.dumps(r, sort_keys=True) if a.json else format_text(r))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``main(["estimate", ...])``; returns the exit status (0 ok, 2 bad input)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    from .config import TrainingConfigError  # noqa: PLC0415
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: hpctwin llm estimate [options]   (hpctwin llm estimate --help)")
        return 0 if argv else 2
    if argv[0] != "estimate":
        print(f"hpctwin llm: error: unknown command {argv[0]!r}; the command is 'estimate'", file=sys.stderr)
        return 2
    try:
        return _run_estimate(argv[1:])
    except (_Usage, TrainingConfigError) as e:
        print(f"{PROG}: error: {e}".replace("\n", " "), file=sys.stderr)
        return 2
    except SystemExit as e:          # argparse --help
        return int(e.code or 0)
    except BrokenPipeError:          # output piped into a closed reader (e.g. | head)
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
