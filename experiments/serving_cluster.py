"""Experiment: an LLM serving deployment sharing a real HPC machine with its batch log (issue 16 item 4).

A window of a real log (default: two days of KTH-SP2 from day 204, one of its busiest: the machine is 98 %
busy with a queue of ~25 jobs under EASY; 100 nodes) shares the machine with a
serving deployment driven by the Azure LLM inference 2023 conversation trace (19,366 requests in one hour,
stretched ``--time-scale`` times), Qwen3-32B on two RTX PRO 6000 GPUs per instance (LLMServingSim's
per-layer profile), the machine's nodes read as ``--gpus-per-node`` GPU nodes (a what-if: KTH's SP2 nodes
had no GPUs). The trace starts ``--offset-h`` hours into the window, once the log fills the machine.

Configurations (``no serving``: the log alone on the whole machine under each policy, for reference):

* ``dedicated``: a static partition of ``--static`` instances (their nodes carved out for the whole
  window): the log runs on the other nodes (jobs wider than that are skipped, and counted), the
  deployment on its own nodes, loaded when the trace starts;
* ``shared-fixed``: the same ``--static`` instances, as node requests through the shared queue (EASY);
* ``shared-pd`` (EASY): the same GPUs as disaggregated pools (``serving.mode = "pd"``, `twin.serving.batch_pd`),
  ``--pd`` = P:D fixed prefill and decode instances of the same type and TP as node requests in the shared
  queue; the KV crosses the fixed formula's 25 GB/s per-GPU link (`pd.kv_transfer_s`; the log's system has
  no network table). ``--pd ""`` leaves it out (`run` adds it only when given ``pd_split``);
* ``shared-auto`` (EASY, conservative, slurm): HeteroScale's decode-TPS autoscaler (per-instance
  capacity ``--tps`` decode tokens/s), 1..``--max`` instances, each scale-up one node request in the
  shared queue with a requested time of ``--lease-h`` hours; an instance serves from its job's start
  plus its cold start (30 s + weights at 7 GB/s).

Reported: HPC jobs of the log (wait, bounded slowdown with tau = 10 s, P95 wait, jobs skipped), serving
(SLO attainment with TTFT <= ``--ttft-slo`` and TPOT <= ``--tpot-slo``, TTFT P99, scale-up queue wait mean
and max), node-hours held by the deployment (a dedicated partition holds its nodes for the whole window),
serving GPU energy (per-phase power, `twin.serving.energy`; a partition's GPUs idle when no instance runs).

    python -m hpctwin.experiments.serving_cluster [-w KTH-SP2] [--days 2] [--out runs/serving_cluster]

(options: the vocabulary of ``docs/experiments.md``; ``--log`` is a deprecated alias of ``-w``)

``--out`` (``results.csv``, ``results.md``, ``results.tex``) is checked before the runs and written
atomically: it must not exist, be empty, or be a folder hpctwin wrote, replaced only with ``--force``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hpctwin.experiments import cli
from hpctwin.experiments.tables import display_name, staged_output, write_table_files
from hpctwin.twin.run import RunConfig, load_workload, simulate
from hpctwin.twin.serving.bundle import find_data_dir
from hpctwin.twin.serving.energy import power_for
from hpctwin.twin.workload import Workload

CAPTION = ("{log} days {d0:g}-{d1:g} ({jobs} jobs, {nodes} nodes read as {gpn}-GPU nodes) sharing the machine with "
           "an LLM deployment ({model}, TP {tp}, {npi} node(s) an instance) serving the Azure 2023 conversation trace "
           "({reqs} requests, arrivals x {ts:g}) from hour {off:g}; dedicated = {static} instances on a static "
           "partition "
           "(the log on the other nodes); shared = node requests in the batch queue (lease {lease:g} h), fixed "
           "{static} or the decode-TPS autoscaler (capacity {tps:g} tok/s an instance, 1..{mx} instances, {iv:g} s "
           "period); cold start {cold:.1f} s. HPC: log jobs only, wait = start - submit, bsld = max(1, (wait + run) / "
           "max(run, 10 s)); SLO: TTFT <= {ttft:g} s and TPOT <= {tpot:g} s; serving node-hours: nodes held by the "
           "deployment (the whole window for a partition); energy: GPUs of the serving instances, per-phase power.")


def window(log: str, day0: float, days: float, data_dir: str | None) -> Workload:
    """The jobs of ``log`` submitted in [day0, day0 + days) (log clock, s; times kept)."""
    wl = load_workload(log, data_dir=data_dir).sorted()
    t0, t1 = day0 * 86400.0, (day0 + days) * 86400.0
    return wl.take(np.flatnonzero((wl.submit >= t0) & (wl.submit < t1)))


def _empty(wl: Workload) -> Workload:
    return wl.take(np.zeros(0, dtype=np.int64))


def _hpc(jobs: pd.DataFrame) -> dict:
    b = jobs[(jobs["kind"] == "batch") if "kind" in jobs else np.ones(len(jobs), dtype=bool)]
    ran = b[b.start.notna()]
    return {"hpc_jobs": len(ran), "hpc_mean_wait_s": float(ran.wait.mean()), "hpc_p95_wait_s":
            float(np.percentile(ran.wait, 95)), "hpc_mean_bsld": float(ran.bsld.mean())}


def _serving(s: dict, node_hours: float) -> dict:
    w = s["scale_up_wait_s"]
    return {"slo_attainment": s["slo"]["attainment"], "ttft_p99_s": s["ttft"]["p99"], "ttft_mean_s": s["ttft"]["mean"],
            "scale_up_requests": s["scale_up_requests"], "scale_up_wait_mean_s": w["mean"],
            "scale_up_wait_max_s": w["max"], "serving_node_hours": node_hours, "serving_gpu_energy_kwh":
            s["energy_j"] / 3.6e6, "instances_lost": s["instances_lost_failure"] + s["instances_lost_lease"]}


def run(out: str | Path, log: str = "KTH-SP2", day0: float = 204.0, days: float = 2.0, offset_h: float = 24.0,
        time_scale: float = 3.0, max_requests: int = 0, static: int = 4, max_instances: int = 6,
        tps: float = 350.0, lease_h: float = 6.0, gpus_per_node: int = 2, tp: int = 2,
        model: str = "Qwen/Qwen3-32B", hardware: str = "RTXPRO6000", ttft: float = 2.0, tpot: float = 0.1,
        interval_s: float = 15.0, schedulers: tuple[str, ...] = ("easy", "conservative", "slurm"),
        pd_split: tuple[int, int] | None = None, data_dir: str | None = None) -> pd.DataFrame:
    ddir = find_data_dir(data_dir)
    trace = str(ddir / "LLM-serving" / "Azure-LLM-2023" / "AzureLLMInferenceTrace_conv.csv")
    wl = window(log, day0, days, data_dir)
    nodes = int(wl.machine_size or load_workload(log, data_dir=data_dir).machine_size)
    t_start = day0 * 86400.0 + offset_h * 3600.0
    span = days * 86400.0
    base = dict(trace=trace, hardware=hardware, model=model, tp=tp, gpus_per_node=gpus_per_node,
                start_s=t_start, time_scale=time_scale, max_requests=max_requests, ttft_slo_s=ttft,
                tpot_slo_s=tpot, lease_s=lease_h * 3600.0, interval_s=interval_s)
    fixed = dict(base, policy="fixed", instances=static, min_instances=static, max_instances=static)
    auto = dict(base, policy="decode_tps", tps_per_instance=tps, instances=1, min_instances=1,
                max_instances=max_instances)
    rows = []
    for sched in dict.fromkeys(("easy",) + tuple(schedulers)):      # the log alone, per policy
        base_run = simulate(RunConfig(workload=log, scheduler=sched, nodes=nodes), wl)
        rows.append({"config": "no serving", "scheduler": sched, **_hpc(base_run.jobs),
                     "hpc_jobs_skipped": sum(base_run.summary["jobs_skipped"].values())})
    # (a) a dedicated partition: the log on the other nodes, the deployment alone on its own (loaded at start)
    hpc = simulate(RunConfig(workload=log, scheduler="easy", nodes=nodes - static * -(-tp // gpus_per_node)), wl)
    srv = simulate(RunConfig(workload=log, scheduler="easy", nodes=static * -(-tp // gpus_per_node),
                             allow_empty=True, options={"serving": dict(fixed, warm_start=True)}), _empty(wl))
    npi = srv.summary["serving"]["nodes_per_instance"]
    row = {"config": "dedicated", "scheduler": "easy", **_hpc(hpc.jobs),
           "hpc_jobs_skipped": sum(hpc.summary["jobs_skipped"].values()),
           **_serving(srv.summary["serving"], static * npi * span / 3600.0)}
    # the partition's GPUs idle for the rest of the window
    life = float((srv.tables["serving_instances.csv"].eval("end_s - start_s")).sum())
    row["serving_gpu_energy_kwh"] += power_for(hardware).idle_w * tp * (static * span - life) / 3.6e6
    rows.append(row)
    runs = [("shared-fixed", "easy", fixed)]
    if pd_split:
        npf, ndc = pd_split
        runs.append((f"shared-pd {npf}:{ndc}", "easy",
                     dict(base, mode="pd", policy="fixed", prefill_instances=npf, decode_instances=ndc,
                          prefill_min_instances=npf, prefill_max_instances=npf, decode_min_instances=ndc,
                          decode_max_instances=ndc)))
    runs += [("shared-auto", s, auto) for s in schedulers]
    for name, sched, opts in runs:
        r = simulate(RunConfig(workload=log, scheduler=sched, nodes=nodes, options={"serving": opts}), wl)
        s = r.summary["serving"]
        rows.append({"config": name, "scheduler": sched, **_hpc(r.jobs),
                     "hpc_jobs_skipped": sum(r.summary["jobs_skipped"].values()), **_serving(s, s["node_hours"])})
    df = pd.DataFrame(rows)
    cap = CAPTION.format(log=display_name(log), d0=day0, d1=day0 + days, jobs=len(wl), nodes=nodes, gpn=gpus_per_node,
                         model=model, tp=tp, npi=npi, reqs=srv.summary["serving"]["requests"], ts=time_scale,
                         off=offset_h, static=static, lease=lease_h, tps=tps, mx=max_instances, iv=interval_s,
                         cold=srv.summary["serving"]["cold_start_s"], ttft=ttft, tpot=tpot)
    write_table_files(df, out, cap, by=["config", "scheduler"], label="tab:serving-cluster")
    return df


def main(argv: list[str] | None = None) -> int:
    p = cli.parser("serving_cluster", __doc__)
    cli.add_workload(p, "KTH-SP2", several=False, aliases=("--log",), help_text="the batch log sharing the machine")
    p.add_argument("--day0", type=float, default=204.0, help="first day of the log window")
    p.add_argument("--days", type=float, default=2.0, help="length of the log window (days)")
    p.add_argument("--offset-h", type=float, default=24.0, help="hours into the window when the trace starts")
    p.add_argument("--time-scale", type=float, default=3.0, help="the trace's arrival times multiplied by this")
    p.add_argument("--max-requests", type=int, default=0, help="first N requests of the trace (0: all)")
    p.add_argument("--static", type=int, default=4, help="instances of the dedicated and shared-fixed deployments")
    p.add_argument("--max", type=int, default=6, help="most instances of the autoscaler")
    p.add_argument("--tps", type=float, default=350.0, help="decode tokens/s one instance sustains (autoscaler)")
    p.add_argument("--lease-h", type=float, default=6.0, help="requested time of each node request (h)")
    p.add_argument("--gpus-per-node", type=int, default=2, help="GPUs per node of the machine (a what-if)")
    p.add_argument("--ttft-slo", type=float, default=2.0, help="SLO on the time to first token (s)")
    p.add_argument("--tpot-slo", type=float, default=0.1, help="SLO on the time per output token (s)")
    p.add_argument("--pd", default="2:2", help="P:D fixed prefill:decode instances of the shared-pd row (\"\": none)")
    cli.add_data_dir(p)
    cli.add_out(p, "runs/serving_cluster")
    a = p.parse_args(argv)
    split = None
    if a.pd:
        try:
            split = tuple(int(x) for x in a.pd.split(":"))
        except ValueError:
            split = ()
        if len(split) != 2 or min(split) < 1:
            p.error(f"--pd {a.pd!r}: expected P:D, two positive instance counts (e.g. 2:2)")
    with staged_output("python -m hpctwin.experiments.serving_cluster", a.out, a.force) as out:
        run(out, a.workload, a.day0, a.days, a.offset_h, a.time_scale, a.max_requests, a.static, a.max, a.tps,
            a.lease_h, a.gpus_per_node, ttft=a.ttft_slo, tpot=a.tpot_slo, pd_split=split, data_dir=a.data_dir)
        table = (out / "results.md").read_text()
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
