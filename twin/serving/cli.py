"""``hpctwin serve``: simulate a vLLM deployment on a workload and write per-request times and a summary.

    hpctwin serve --bundle DIR --out OUT [--data-dir D] [--router least_loaded]
    hpctwin serve --trace TRACE --out OUT [--hardware RTXPRO6000 --model M --tp K]
                  [--instances N | --prefill P --decode D [--system NAME [--kv-placement pools]]]
    hpctwin serve profile --hardware H --model M --tp K --out DIR   (an instance's capacity curves: capacity.py)

``DIR`` is laid out like ``LLMServingSim/bench/<hw>/<model>/`` (see `hpctwin.twin.serving.bundle`).
Writes ``OUT/requests.csv`` (one row per workload request, in workload order: ``request_id`` = 0-based
line index, ``arrival_s``, ``first_token_s``, ``last_token_s``, ``input_tokens``, ``output_tokens``; seconds
on one clock starting at the workload's zero), ``OUT/requests_detail.csv`` (also the workload arrival,
instance and preemptions) and ``OUT/summary.json`` (TTFT/TPOT/E2E mean, median, P90, P95, P99 in seconds
with LLMServingSim's definitions, plus run counters).

``arrival_s`` is the time the engine receives the request, the simulated counterpart of vLLM's
``queued_ts`` that the measured runs use as their arrival: vLLM's engine core reads its input queue
between steps, so a request reaching a busy engine is received when the step in flight ends (an idle
engine receives it at once). ``requests_detail.csv`` keeps the workload's own arrival time.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from dataclasses import replace
from pathlib import Path

from .bundle import Bundle, BundleError, load_bundle
from .cluster import ROUTERS, ServingResult, simulate
from .limits import (MAX_BATCHED_TOKENS, MAX_GBPS, MAX_INSTANCES, MAX_NUM_SEQS, MAX_TP, arg_dir, arg_int,
                     arg_number)
from .metrics import fifteen, latencies
from .plugins import add_option_arguments, options_from_arguments
from .scheduling import SCHEDULING, SLOSetup, class_rows


def run_bundle(bundle: str | Path | Bundle, data_dir: str | None = None, router: str = "least_loaded",
               series: bool = False, kv: dict | None = None, slo: "SLOSetup | None" = None,
               decode_router: str | None = None) -> tuple[Bundle, ServingResult]:
    """Simulate a bundle's workload on its deployment (``kv``: KV transfers on a topology, `kv_network`;
    ``slo``: multi-SLO serving, `scheduling.SLOSetup`; ``decode_router``: the decode pool's router of a
    disaggregated deployment, default ``router``)."""
    b = bundle if isinstance(bundle, Bundle) else load_bundle(bundle, data_dir)
    insts = b.build_instances()
    if series:
        for x in insts:
            x.series = []
    slo = slo or SLOSetup()
    slo.configure(insts)
    workload = slo.classify(b.workload())
    roles = [spec.pd_type for spec in b.instances]
    if any(roles):
        from .pd import simulate_pd  # noqa: PLC0415
        pre = [x for x, r in zip(insts, roles) if r == "prefill"]
        dec = [x for x, r in zip(insts, roles) if r == "decode"]
        if len(pre) + len(dec) != len(insts):
            raise BundleError(f"{b.path / 'config.json'}: mixing colocated and prefill/decode instances is not "
                              "supported (give every instance a pd_type, or none)")
        # the KV crosses the cluster's link (config.json link_bw, GB/s, and link_latency, ns), or flows
        # on a system's topology
        net = kv_network(kv, pre, dec, b.instances[0].hardware)
        return b, simulate_pd(workload, pre, dec, router, decode_router or router, link_GBps=b.link_bw_GBps,
                              latency_s=b.link_latency_ns * 1e-9, kv_network=net)
    if kv and kv.get("system"):
        raise ValueError("--system places the KV transfers of a disaggregated deployment; this bundle is colocated")
    if decode_router:
        raise ValueError("--decode-router routes the KV hand-offs of a disaggregated deployment; this bundle is "
                         "colocated (give --router only)")
    return b, simulate(workload, insts, router=router, units=b.units(insts))


def parse_placement(text: str) -> str | list[int]:
    """``--kv-placement``: ``pools``, ``packed`` or comma-separated node ids (one per instance)."""
    if text in ("pools", "packed"):
        return text
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"--kv-placement {text!r}: give pools, packed or comma-separated node ids "
                         "(one per instance, prefill first)") from None


def kv_network(kv: dict | None, prefill: list, decode: list, hardware: str):
    """The `kvflow.KVNetwork` of ``kv`` (``system``, ``placement``, ``routing``, ``d2d_GBps``), or None
    when no system is given (the fixed-bandwidth formula of `pd.kv_transfer_s`)."""
    if not kv or not kv.get("system"):
        return None
    from .kvflow import KVNetwork  # noqa: PLC0415
    return KVNetwork.from_system(kv["system"], prefill, decode, hardware, parse_placement(kv.get("placement", "pools")),
                                 kv.get("d2d_GBps"), routing=kv.get("routing", "minimal"))


def summary(engine: dict, res: ServingResult, arrival: str = "engine") -> dict:
    """summary.json's content: the 15 statistics (s), token and run counters, the engine settings."""
    reqs = res.requests
    lat = latencies([r.queued if arrival == "engine" else r.arrival for r in reqs], [r.first for r in reqs],
                    [r.last for r in reqs], [r.output for r in reqs])
    span = res.makespan_s - min((r.arrival for r in reqs), default=0.0)
    return {
        "units": "seconds",
        "definitions": {"ttft": "first_token - arrival",
                        "tpot": "(last_token - first_token) / max(1, output_tokens - 1)",
                        "e2e": "last_token - arrival",
                        "arrival": ("when the engine receives the request (vLLM's queued_ts: the engine core "
                                    "reads its input queue between steps); the workload's own arrival is in "
                                    "requests_detail.csv") if arrival == "engine" else "the workload's arrival"},
        **fifteen(lat),
        "requests": len(reqs),
        "input_tokens": sum(r.prompt for r in reqs),
        "output_tokens": sum(r.generated for r in reqs),
        "makespan_s": res.makespan_s,
        "throughput_tokens_per_s": sum(r.generated for r in reqs) / span if span > 0 else float("nan"),
        "preemptions": sum(i.preemptions for i in res.instances),
        "iterations": sum(i.iterations for i in res.instances),
        "instances": [{"id": i.iid, "role": i.role, "kv_blocks": i.kv.num_blocks, "busy_s": i.busy_s,
                       "prefill_busy_s": i.prefill_busy_s, "iterations": i.iterations, "preemptions": i.preemptions,
                       "prefix_hit_tokens": getattr(i.kv, "hits_tokens", 0)} for i in res.instances],
        **engine, **res.extra,
    }


def bundle_engine(b: Bundle) -> dict:
    return {"engine": {"max_num_seqs": b.max_num_seqs, "max_num_batched_tokens": b.max_num_batched_tokens,
                       "block_size": b.block_size, "prefix_caching": b.prefix_caching,
                       "reserve_full_isl": b.reserve_full_isl, "async_scheduling": b.async_scheduling},
            "bundle": str(b.path), "dataset": str(b.dataset)}


def write_outputs(out: Path, engine: dict, res: ServingResult, arrival: str = "engine") -> dict:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "requests.csv", "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["request_id", "arrival_s", "first_token_s", "last_token_s", "input_tokens", "output_tokens"])
        for r in res.requests:
            a = r.queued if arrival == "engine" else r.arrival
            w.writerow([r.uid, f"{a:.9f}", f"{r.first:.9f}", f"{r.last:.9f}", r.prompt, r.generated])
    with open(out / "requests_detail.csv", "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["request_id", "workload_arrival_s", "queued_s", "first_token_s", "last_token_s", "input_tokens",
                    "output_tokens", "instance", "preemptions"])
        for r in res.requests:
            w.writerow([r.uid, f"{r.arrival:.9f}", f"{r.queued:.9f}", f"{r.first:.9f}", f"{r.last:.9f}", r.prompt,
                        r.generated, r.instance, r.preemptions])
    if any(x.series is not None for x in res.instances):
        with open(out / "timeseries.csv", "w", newline="") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(["t_s", "instance", "running", "waiting", "kv_used_blocks", "kv_blocks", "batch_tokens"])
            rows = sorted((t, x.iid, run, wait, kv, x.kv.num_blocks, tok) for x in res.instances
                          for (t, run, wait, kv, tok) in (x.series or []))
            for t, iid, run, wait, kv, nb, tok in rows:
                w.writerow([f"{t:.9f}", iid, run, wait, kv, nb, tok])
    s = summary(engine, res, arrival)
    (out / "summary.json").write_text(json.dumps(s, indent=2) + "\n")
    return s


def kv_options(a: argparse.Namespace) -> dict | None:
    """The KV-network options of the command line (None without ``--system``)."""
    if not a.system:
        return None
    return {"system": a.system, "placement": a.kv_placement, "routing": a.kv_routing, "d2d_GBps": a.kv_d2d_GBps}


#: where a serving name is looked for under the data directory, in this order (as ``run`` finds a log)
SERVING_DIRS = ("", "LLM-serving", "LLM-serving/LLMServingSim/bench")
#: files a bare ``--trace`` name may be, when searched for under ``<data>/LLM-serving``
TRACE_SUFFIXES = (".csv", ".jsonl", ".jsonl.gz", ".csv.gz")


def resolve_input(text: str, data_dir: str | None, *, folder: bool) -> Path:
    """``--trace`` (a file, ``folder`` False) or ``--bundle`` (a folder) as given, else looked up in the
    data directory: ``<data>/NAME``, ``<data>/LLM-serving/NAME``, ``<data>/LLM-serving/LLMServingSim/bench/NAME``,
    else (a bare file name) the one file of that name under ``<data>/LLM-serving``. Raises ValueError
    naming the option, the places looked in and the known names."""
    opt = "--bundle" if folder else "--trace"
    given = Path(text)
    ok = Path.is_dir if folder else Path.is_file
    if not text.strip():
        raise ValueError(f"{opt}: empty name")
    if given.exists():
        return given                              # the loaders say what is wrong with it
    from hpctwin.datasets.registry import DatasetError, default_data_dir  # noqa: PLC0415
    try:
        data = default_data_dir(data_dir)
    except DatasetError as e:
        raise ValueError(str(e)) from None
    for sub in SERVING_DIRS:
        cand = data / sub / text
        if ok(cand):
            return cand
    root = data / "LLM-serving"
    known: list[str] = []
    if root.is_dir():
        if folder:
            known = sorted(str(c.parent.relative_to(root / "LLMServingSim" / "bench"))
                           for c in (root / "LLMServingSim" / "bench").glob("*/*/config.json"))
        else:
            known = sorted(str(f.relative_to(root)) for f in root.glob("*/*")
                           if f.is_file() and f.name.endswith(TRACE_SUFFIXES) and not f.name.startswith("perf"))
            if "/" not in text:
                hits = [k for k in known if Path(k).name == text]
                if len(hits) == 1:
                    return root / hits[0]
                if len(hits) > 1:
                    raise ValueError(f"{opt} {text}: {len(hits)} files of that name under {root}: "
                                     f"{', '.join(hits)}; give one of them")
    what = "folder" if folder else "file"
    raise ValueError(f"{opt} {text}: no such {what}, nor under the data directory {data} (looked in "
                     f"{', '.join(str(data / x) if x else str(data) for x in SERVING_DIRS)})"
                     + (f"; known: {', '.join(known[:12])}{' ...' if len(known) > 12 else ''}" if known else ""))


def slo_setup(a: argparse.Namespace) -> SLOSetup:
    """The multi-SLO set-up of the command line (`scheduling.SLOSetup`): ``--scheduling`` (with its
    options, as ``NAME:KEY=VALUE`` or their own switches), ``--slo-classes``, ``--slo-seed``; classes are
    on when given, or when the scheduling policy or a router reads them. A ValueError naming the option
    otherwise."""
    name, opts = options_from_arguments(a, SCHEDULING, "--scheduling")
    slo = SLOSetup.from_text(name, a.slo_classes or "", a.slo_seed, extra=opts)
    for r in (a.router, a.decode_router):
        if r:
            slo = slo.with_router(r)
    return slo


def slo_report(a: argparse.Namespace, res: ServingResult, slo: SLOSetup) -> None:
    """Add the per-class figures (``slo_classes``, `scheduling.SLOSetup.report`) to ``res.extra``: TTFT
    from the same arrival as the statistics (``--arrival``)."""
    reqs = res.requests
    res.extra.update(slo.report(reqs, [r.queued if a.arrival == "engine" else r.arrival for r in reqs]))


def run_trace(a: argparse.Namespace) -> tuple[dict, ServingResult]:
    """``--trace`` mode: a serving trace on a pool built from ``--hardware/--model/--tp`` (colocated
    ``--instances``, or ``--prefill`` + ``--decode`` disaggregated pools)."""
    from hpctwin.datasets.serving_traces import read_serving_trace  # noqa: PLC0415
    from .deployment import PoolSpec, build_pool  # noqa: PLC0415
    from .pd import simulate_pd  # noqa: PLC0415
    if a.prefill or a.decode:
        if not (a.prefill and a.decode):
            raise ValueError("--prefill and --decode go together (a disaggregated deployment needs both pools)")
        if a.instances is not None:
            raise ValueError("--instances sizes a colocated pool; a disaggregated one is sized by --prefill and "
                             "--decode (give one or the other)")
    instances = 1 if a.instances is None else a.instances
    spec = PoolSpec(a.hardware, a.model, tp=a.tp, max_num_seqs=a.max_num_seqs,
                    max_num_batched_tokens=a.max_num_batched_tokens, prefix_caching=a.prefix_caching == "on")
    slo = slo_setup(a)
    trace = slo.classify(read_serving_trace(a.trace))
    if a.prefill or a.decode:
        pre = build_pool(replace(spec, count=a.prefill), a.data_dir)
        dec = build_pool(replace(spec, count=a.decode), a.data_dir, first_id=a.prefill)
        insts = pre + dec
        if not a.no_timeseries:
            for x in insts:
                x.series = []
        slo.configure(insts)
        res = simulate_pd(trace, pre, dec, a.router, a.decode_router or a.router,
                          kv_network=kv_network(kv_options(a), pre, dec, a.hardware))
    else:
        if a.system:
            raise ValueError("--system places the KV transfers of a disaggregated deployment: give --prefill and "
                             "--decode (a colocated deployment transfers no KV)")
        if a.decode_router:
            raise ValueError("--decode-router routes the KV hand-offs of a disaggregated deployment: give --prefill "
                             "and --decode, or --router only")
        insts = build_pool(replace(spec, count=instances), a.data_dir)
        if not a.no_timeseries:
            for x in insts:
                x.series = []
        slo.configure(insts)
        res = simulate(trace, insts, router=a.router)
    eng = {"engine": {"max_num_seqs": spec.max_num_seqs, "max_num_batched_tokens": spec.max_num_batched_tokens,
                      "block_size": spec.block_size, "prefix_caching": spec.prefix_caching,
                      "async_scheduling": spec.async_scheduling},
           "deployment": {"hardware": a.hardware, "model": a.model, "tp": a.tp, "instances": instances,
                          "prefill": a.prefill, "decode": a.decode, "router": a.router,
                          **({"decode_router": a.decode_router} if a.decode_router else {}),
                          **({"kv": kv_options(a)} if a.system else {})},
           "dataset": str(a.trace)}
    return eng, res


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["profile"]:     # hpctwin serve profile: an instance's capacity curves (capacity.py)
        from .capacity import profile_main  # noqa: PLC0415
        return profile_main(argv[1:], resolve=resolve_input)
    from hpctwin.datasets.registry import DATA_DIR_HELP  # noqa: PLC0415
    p = argparse.ArgumentParser(prog="hpctwin serve", description=__doc__.split("\n\n")[0],
                                epilog="Names of --bundle and --trace not found as given are looked up in the data "
                                       "directory, as hpctwin run finds a log: <data>/NAME, <data>/LLM-serving/NAME, "
                                       "<data>/LLM-serving/LLMServingSim/bench/NAME, or a trace file's bare name "
                                       "under <data>/LLM-serving (e.g. --trace AzureLLMInferenceTrace_conv.csv, "
                                       "--bundle RTXPRO6000/Llama-3.1-8B). Statistics are in seconds.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--bundle", help="folder laid out like LLMServingSim/bench/<hw>/<model>/ (a path, or a name "
                                      "in the data directory such as RTXPRO6000/Llama-3.1-8B)")
    src.add_argument("--trace", help="a serving trace instead (Azure .csv, Mooncake or LLMServingSim .jsonl[.gz]; a "
                                     "path, or a name in the data directory such as AzureLLMInferenceTrace_conv.csv) "
                                     "served by the pool --hardware/--model/--tp/--instances (or --prefill/--decode)")
    p.add_argument("--hardware", default="RTXPRO6000", help="GPU type of --trace mode (a perf/ folder)")
    p.add_argument("--model", default="meta-llama/Llama-3.1-8B", help="model of --trace mode")
    p.add_argument("--tp", type=arg_int(1, MAX_TP, "GPUs"), default=1, help="tensor-parallel GPUs per instance")
    p.add_argument("--instances", type=arg_int(1, MAX_INSTANCES, "instances"), default=None,
                   help="colocated instances (--trace mode; default 1)")
    p.add_argument("--prefill", type=arg_int(0, MAX_INSTANCES, "instances"), default=0,
                   help="prefill instances of a disaggregated pool")
    p.add_argument("--decode", type=arg_int(0, MAX_INSTANCES, "instances"), default=0,
                   help="decode instances of a disaggregated pool")
    p.add_argument("--max-num-seqs", type=arg_int(1, MAX_NUM_SEQS, "sequences"), default=256,
                   help="--trace mode: most sequences an instance batches (vLLM max_num_seqs; default 256)")
    p.add_argument("--max-num-batched-tokens", type=arg_int(1, MAX_BATCHED_TOKENS, "tokens"), default=2048,
                   help="--trace mode: most tokens in one engine step (vLLM max_num_batched_tokens, tokens; "
                        "default 2048)")
    p.add_argument("--prefix-caching", choices=["on", "off"], default="off",
                   help="--trace mode (Mooncake traces carry prefix block ids; Azure ones have none)")
    p.add_argument("--out", required=True,
                   help="output folder (requests.csv, requests_detail.csv, summary.json, timeseries.csv); "
                        "must not exist, be empty, or be a folder hpctwin wrote (replaced only with --force)")
    p.add_argument("--force", action="store_true",
                   help="replace an existing output folder written by hpctwin (never any other folder)")
    p.add_argument("--data-dir", type=arg_dir, default=None, help=DATA_DIR_HELP + " (serving: LLM-serving/)")
    p.add_argument("--router", choices=list(ROUTERS), default="least_loaded",
                   help="request router across instances (default least_loaded: vLLM's DP balancer, "
                        "LLMServingSim's LOAD)")
    p.add_argument("--decode-router", choices=list(ROUTERS), default=None,
                   help="disaggregated deployments: the decode pool's router, chosen when a prompt completes "
                        "(default: --router)")
    p.add_argument("--scheduling", default="fcfs", metavar="NAME[:KEY=VALUE,...]",
                   help="instance scheduling policy (both pools of a disaggregated deployment), with its options: "
                        + "; ".join(SCHEDULING.help().splitlines()).replace("%", "%%") + " (default fcfs)")
    add_option_arguments(p, SCHEDULING, "--scheduling")
    p.add_argument("--slo-classes", default=None, metavar="default|NAME:TTFT_S:TPOT_S:SHARE,...",
                   help="SLO classes, tightest first (default: tight:1:0.08:0.2,standard:3:0.15:0.5,"
                        "relaxed:10:0.3:0.3, on when --scheduling or a router reads classes): each request keeps "
                        "its trace's class or gets one drawn with the shares (--slo-seed); summary.json and the "
                        "printout then give per-class attainment and TTFT/TPOT/E2E statistics")
    p.add_argument("--slo-seed", type=arg_int(0, 2 ** 63 - 1, "seed"), default=0,
                   help="seed of the SLO class draw (default 0)")
    p.add_argument("--arrival", choices=["engine", "workload"], default="engine",
                   help="arrival_s and the statistics: when the engine receives the request (engine, default: "
                        "vLLM's queued_ts, the measured runs' arrival) or the workload's arrival time")
    p.add_argument("--no-timeseries", action="store_true",
                   help="do not write timeseries.csv (one row per iteration, or per run of identical "
                        "decode iterations: running, waiting, KV blocks used, batch tokens)")
    p.add_argument("--system", default=None,
                   help="disaggregated deployments: send the KV caches as flows on this system's topology (a "
                        "built-in name such as dgx-h100, or a system .toml); default: the fixed-bandwidth link")
    p.add_argument("--kv-placement", default="pools",
                   help="with --system: pools (prefill pool on the first nodes, decode pool from the next empty "
                        "node; default), packed (GPU slots in order, a node may hold both), or node ids, one "
                        "per instance, prefill first (e.g. 0,0,1)")
    p.add_argument("--kv-routing", choices=["minimal", "valiant"], default="minimal",
                   help="with --system: the topology's routing (valiant: Dragonfly only)")
    p.add_argument("--kv-d2d-GBps", type=arg_number(0.0, MAX_GBPS, "GB/s"), default=None,
                   help="with --system: device-to-device (NVLink) GB/s per GPU and direction for intra-node "
                        "transfers (default: the GPU type's figure in twin/serving/kvflow.py D2D)")
    p.add_argument("--quiet", "-q", action="store_true", help="print nothing but errors")
    a = p.parse_args(argv)
    try:
        if a.bundle:
            a.bundle = str(resolve_input(a.bundle, a.data_dir, folder=True))
        else:
            a.trace = str(resolve_input(a.trace, a.data_dir, folder=False))
    except ValueError as e:
        print(f"hpctwin serve: error: {e}", file=sys.stderr)
        return 2
    from hpctwin.twin.runfolder import staged_folder  # noqa: PLC0415
    try:
        # --out is checked before the simulation (the same refusals as hpctwin run) and published
        # atomically: a kill or an error leaves the old folder (or none), never a mixture
        with staged_folder(a.out, force=a.force) as tmp:
            slo = slo_setup(a)
            if a.bundle:
                b, res = run_bundle(a.bundle, a.data_dir, a.router, series=not a.no_timeseries, kv=kv_options(a),
                                    slo=slo, decode_router=a.decode_router)
                eng = bundle_engine(b)
            else:
                eng, res = run_trace(a)
            slo_report(a, res, slo)
            s = write_outputs(tmp, eng, res, a.arrival)
            written = sorted(f.name for f in tmp.iterdir())
    except (BundleError, ValueError, FileNotFoundError) as e:  # KVNetworkError, SystemError_, RunFolderError
        print(f"hpctwin serve: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"hpctwin serve: interrupted; {a.out} was not written (an earlier folder there is unchanged)",
              file=sys.stderr)
        return 130
    if not a.quiet:
        print(format_serve_summary(s))
        written = sorted(set(written) | {f.name for f in Path(a.out).iterdir()})   # and the run-folder marker
        print(f"wrote {Path(a.out)}/: {', '.join(written)}")
    return 0


def format_serve_summary(s: dict) -> str:
    """The printed summary of ``hpctwin serve``: counts, makespan (s), throughput (tokens/s) and the
    TTFT/TPOT/E2E statistics, every figure with its unit."""
    tput = s.get("throughput_tokens_per_s")
    lines = [f"{s['requests']:,} requests, {s['input_tokens']:,} input and {s['output_tokens']:,} output tokens, "
             f"makespan {s['makespan_s']:,.2f} s, "
             + (f"throughput {tput:,.1f} tokens/s, " if isinstance(tput, float) and tput == tput else "")
             + f"{s['preemptions']:,} preemptions"]
    for m in ("ttft", "tpot", "e2e"):
        lines.append(f"  {m.upper():5s} " + "  ".join(f"{k} {v:.4f} s" for k, v in s[m].items()))
    lines += class_lines(s.get("slo_classes"))
    return "\n".join(lines)


def class_lines(block: dict | None, indent: str = "  ") -> list[str]:
    """Printed lines of a ``slo_classes`` summary block (`scheduling.class_rows`): per class its requests,
    attainment (%), shed, and TTFT/TPOT P50/P99 (s); none without the block."""
    rows = class_rows(block)
    return [f"{indent}{label}: {text}" for label, text in rows]


if __name__ == "__main__":
    raise SystemExit(main())
