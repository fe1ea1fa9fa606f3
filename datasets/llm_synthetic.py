"""Seeded synthetic workload of an LLM-development GPU cluster, calibrated to AcmeTrace statistics.

`llm_workload(days, gpus, seed=...)` draws jobs of five classes (`twin.job_classes`): ``debug``,
``llm_eval`` (one node or less, minutes), ``llm_infer_service`` (long-running, 1-8 GPUs),
``llm_finetune`` and ``llm_pretrain`` (gangs of TP x PP x DP GPUs). The aggregate statistics are
calibrated to the Seren row of AcmeTrace's ``cluster_summary.csv`` (InternLM/AcmeTrace, CC BY 4.0;
Hu et al., "Characterization of Large Language Model Development in the Datacenter", NSDI'24),
which is read at import time from the shared data folder when present (the constants below are the
same numbers, copied from that file, for machines without it):

============================  ==========  ===============================================
statistic (GPU jobs, Seren)   value       column of cluster_summary.csv
============================  ==========  ===============================================
median GPUs per job           1           ``med_gpu_num``
mean GPUs per job             5.68        ``avg_gpu_num``
largest job                   1,024 GPUs  ``max_gpu``
median runtime                122 s       ``med_run_time_gpu``
mean runtime                  1,414 s     ``avg_run_time_gpu``
longest runtime               1,209,604 s ``max_run_time_gpu``
completed / cancelled / failed 0.497 / 0.075 / 0.429  ``complete_rate_gpu`` ...
GPU jobs                      663,813     ``gpu_job_num``
============================  ==========  ===============================================

The arrival rate is Seren's GPU jobs per GPU-day: 663,813 jobs / (2,288 GPUs x 184 days) = 1.58
(2,288 A100 GPUs: Hu et al. NSDI'24, Table 1, and the AcmeTrace README's 4,704 GPUs for Seren +
Kalos; 184 days = March-August 2023, the README's trace period), scaled to the requested number of
GPUs; or give ``jobs`` to fix the count. Arrivals are a homogeneous Poisson process (assumption: no
diurnal cycle).

**Assumptions** (not in the summary; chosen so the aggregates above are met, checked by
`calibration` and the tests): the class mix `CLASS_MIX`, the per-class GPU-count distributions
`CLASS_GPUS`, log-normal runtimes per class `CLASS_RUNTIME` (median s, sigma), capped at the
longest runtime above; the end state (completed/cancelled/failed) is drawn independently of class and
runtime with Seren's rates (the runtime drawn is the job's actual run, whatever its end state);
requested time = runtime x U(1, 4) (users over-estimate; assumption), capped at 14 days.

Training gangs get a shape (`training_shape`): TP = gcd(GPUs, GPUs per node) (never more than a
node: pass ``gpus_per_node`` of the machine; ``hpctwin run --system S`` does), PP from the model
size, DP = GPUs / (TP x PP); the model size grows with the gang (`MODEL_BY_GPUS`; GPT-style
configurations of Narayanan et al., SC'21, and the Llama 2 family). Sizes for the engine are whole
nodes: ``procs = ceil(gpus / gpus_per_node)`` (whole-node allocation; sub-node jobs take one node).

Columns: ``gpus``, ``job_class``, ``tp``, ``pp``, ``dp`` (0 for non-training jobs),
``gpus_per_node``, ``llm_params`` (parameters), ``llm_hidden``, ``llm_layers``, ``seq_len``,
``global_batch`` (sequences per iteration), ``micro_batch``, ``max_groups`` (-1 = no constraint, 0 =
the fewest groups possible),
``max_group_wait`` (s), and the class defaults ``gpu_util``, ``cpu_util``, ``comm_kind``,
``comm_fraction`` (`twin.job_classes.class_columns`).
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from hpctwin.twin.job_classes import class_columns
from hpctwin.twin.workload import Workload

# ---- AcmeTrace cluster_summary.csv, row "Seren" (InternLM/AcmeTrace, data/cluster_summary.csv)
ACME_SEREN = {
    "gpu_job_num": 663813.0,          # gpu_job_num
    "avg_run_time_gpu": 1414.335,     # s, avg_run_time_gpu
    "med_run_time_gpu": 122.0,        # s, med_run_time_gpu
    "avg_gpu_num": 5.68,              # avg_gpu_num
    "med_gpu_num": 1.0,               # med_gpu_num
    "max_run_time_gpu": 1209604.0,    # s, max_run_time_gpu
    "max_gpu": 1024.0,                # max_gpu
    "complete_rate_gpu": 0.497,       # complete_rate_gpu
    "cancel_rate_gpu": 0.075,         # cancel_rate_gpu
    "fail_rate_gpu": 0.429,           # fail_rate_gpu
}
#: Seren's GPUs (Hu et al. NSDI'24 Table 1: 286 nodes x 8 A100; AcmeTrace README: 4,704 GPUs in
#: Seren + Kalos) and trace length (README: March to August 2023 -> 184 days; our reading).
SEREN_GPUS = 2288
SEREN_DAYS = 184.0
#: GPU jobs per GPU per day on Seren.
JOBS_PER_GPU_DAY = ACME_SEREN["gpu_job_num"] / (SEREN_GPUS * SEREN_DAYS)

# ---- assumptions (calibrated, see the module docstring and `calibration`)
#: probability of each class per job
CLASS_MIX = {"debug": 0.30, "llm_eval": 0.538, "llm_infer_service": 0.05, "llm_finetune": 0.10,
             "llm_pretrain": 0.012}
#: (GPU counts, probabilities) per class
CLASS_GPUS = {
    "debug": ((1, 2, 4, 8), (0.70, 0.10, 0.10, 0.10)),
    "llm_eval": ((1, 2, 4, 8), (0.78, 0.06, 0.08, 0.08)),
    "llm_infer_service": ((1, 2, 4, 8), (0.40, 0.20, 0.20, 0.20)),
    "llm_finetune": ((8, 16, 32, 64), (0.55, 0.25, 0.12, 0.08)),
    "llm_pretrain": ((32, 64, 128, 256, 512, 1024), (0.30, 0.25, 0.20, 0.13, 0.08, 0.04)),
}
#: log-normal runtime per class: (median s, sigma of log)
CLASS_RUNTIME = {
    "debug": (45.0, 1.3),
    "llm_eval": (130.0, 1.1),
    "llm_infer_service": (2.5 * 3600.0, 1.0),
    "llm_finetune": (700.0, 1.8),
    "llm_pretrain": (1500.0, 2.0),
}
#: requested time = runtime x U(1, REQUEST_FACTOR_MAX), capped at REQUEST_CAP_S (assumptions)
REQUEST_FACTOR_MAX = 4.0
REQUEST_CAP_S = 14 * 86400.0

#: Model configurations: (name, parameters, hidden size, layers, pipeline stages) by the largest
#: gang size they serve. 7B/13B/70B: Llama 2 (Touvron et al. 2023: hidden 4096/5120/8192, 32/40/80
#: layers); 175B: GPT-3 (Brown et al. 2020: hidden 12288, 96 layers). PP degrees: assumption in the
#: range Narayanan et al. (SC'21, Table 1) use (PP 1-2 below 20B, 4-8 at 70-175B with TP = 8).
MODEL_BY_GPUS = (
    (32, ("7B", 6.7e9, 4096, 32, 1)),
    (128, ("13B", 13.0e9, 5120, 40, 1)),
    (512, ("70B", 70.0e9, 8192, 80, 4)),
    (10**9, ("175B", 175.0e9, 12288, 96, 8)),
)
SEQ_LEN = 4096            # tokens per sequence (Llama 2 context; assumption for every job)
MICRO_BATCH = 1           # sequences per micro-batch (assumption)
GLOBAL_BATCH_PER_DP = 32  # sequences per iteration per DP replica (assumption; 1024 at DP = 32)


def load_acme_summary(path: str | Path | None = None, cluster: str = "Seren") -> dict[str, float]:
    """The row ``cluster`` of AcmeTrace's cluster_summary.csv as floats (the shared copy by default;
    falls back to `ACME_SEREN` for Seren when the file is absent)."""
    if path is None:
        from hpctwin.datasets.registry import default_data_dir  # noqa: PLC0415
        d = default_data_dir()
        path = d / "AcmeTrace-summary" / "cluster_summary.csv" if d else None
    if path is None or not Path(path).exists():
        if cluster == "Seren":
            return dict(ACME_SEREN)
        raise FileNotFoundError(f"AcmeTrace cluster_summary.csv not found ({path}); only Seren is built in")
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["id"] == cluster:
                return {k: float(v) for k, v in row.items() if k != "id" and v not in ("", None)}
    raise ValueError(f"{path}: no row with id {cluster!r}")


def training_shape(gpus: int, gpus_per_node: int = 8) -> tuple[int, int, int, tuple]:
    """(tp, pp, dp, model) of a training gang of ``gpus`` GPUs (see `MODEL_BY_GPUS`).

    TP = gcd(gpus, gpus_per_node) (the largest group that divides the gang and fits a node, so a TP
    group never spans nodes: min(gpus, gpus_per_node) for the powers of two of `CLASS_GPUS`); PP = the
    model's stages, reduced while it does not divide gpus / TP; DP = gpus / (TP x PP).
    """
    gpus = int(gpus)
    if gpus < 1:
        raise ValueError(f"a training gang needs >= 1 GPU, got {gpus}")
    model = next(m for limit, m in MODEL_BY_GPUS if gpus <= limit)
    if int(gpus_per_node) < 1:
        raise ValueError(f"gpus_per_node must be >= 1, got {gpus_per_node}")
    tp = math.gcd(gpus, int(gpus_per_node))
    pp = model[4]
    while pp > 1 and (gpus // tp) % pp:
        pp //= 2
    return tp, pp, gpus // (tp * pp), model


def llm_workload(days: float = 30.0, gpus: int = 1024, *, seed: int = 0, jobs: int | None = None,
                 gpus_per_node: int = 8, max_groups: int | str | None = None, max_group_wait: float = 3600.0,
                 name: str | None = None) -> Workload:
    """A synthetic LLM-cluster workload over ``days`` days for a cluster of ``gpus`` GPUs.

    ``jobs`` fixes the job count (default: Seren's rate `JOBS_PER_GPU_DAY` x gpus x days, Poisson).
    ``max_groups``/``max_group_wait`` set the training gangs' topology constraint (None = none; 0 or
    "min" = the fewest groups possible, resolved by `schedulers.llm.LLMScheduler`).
    Deterministic for a given ``seed``.
    """
    if days <= 0 or gpus < 1 or gpus_per_node < 1:
        raise ValueError(f"need days > 0, gpus >= 1, gpus_per_node >= 1 (got {days}, {gpus}, {gpus_per_node})")
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, 71, 7])))
    span = days * 86400.0
    n = int(jobs) if jobs is not None else int(rng.poisson(JOBS_PER_GPU_DAY * gpus * days))
    submit = np.sort(rng.uniform(0.0, span, size=n))
    classes = np.array(list(CLASS_MIX), dtype=object)
    cls = classes[rng.choice(len(classes), size=n, p=np.array(list(CLASS_MIX.values())))]
    g = np.zeros(n)
    runtime = np.zeros(n)
    for c in CLASS_MIX:
        m = cls == c
        k = int(m.sum())
        vals, probs = CLASS_GPUS[c]
        g[m] = np.asarray(vals, float)[rng.choice(len(vals), size=k, p=np.asarray(probs))]
        med, sig = CLASS_RUNTIME[c]
        runtime[m] = med * np.exp(sig * rng.standard_normal(k))
    max_gpus = min(int(ACME_SEREN["max_gpu"]), int(gpus))
    g = np.minimum(g, max_gpus)
    runtime = np.clip(np.round(runtime), 1.0, ACME_SEREN["max_run_time_gpu"])
    u = rng.uniform(size=n)
    c_ok, c_cancel = ACME_SEREN["complete_rate_gpu"], ACME_SEREN["cancel_rate_gpu"]
    status = np.where(u < c_ok, 1, np.where(u < c_ok + c_cancel, 5, 0)).astype(np.int64)
    req = np.minimum(np.ceil(runtime * rng.uniform(1.0, REQUEST_FACTOR_MAX, size=n) / 60.0) * 60.0, REQUEST_CAP_S)
    req = np.maximum(req, runtime)
    procs = np.maximum(1, np.ceil(g / gpus_per_node)).astype(np.int64)
    tp = np.zeros(n, np.int64)
    pp = np.zeros(n, np.int64)
    dp = np.zeros(n, np.int64)
    params = np.full(n, np.nan)
    hidden = np.zeros(n, np.int64)
    layers = np.zeros(n, np.int64)
    train = np.isin(cls, ("llm_pretrain", "llm_finetune"))
    shapes: dict[int, tuple] = {}
    for i in np.flatnonzero(train):
        gi = int(g[i])
        if gi not in shapes:
            shapes[gi] = training_shape(gi, gpus_per_node)
        t, p, d, model = shapes[gi]
        tp[i], pp[i], dp[i] = t, p, d
        params[i], hidden[i], layers[i] = model[1], model[2], model[3]
    cols = {"gpus": g, "job_class": cls, "tp": tp, "pp": pp, "dp": dp,
            "gpus_per_node": np.full(n, gpus_per_node, np.int64), "llm_params": params, "llm_hidden": hidden,
            "llm_layers": layers, "seq_len": np.where(train, SEQ_LEN, 0).astype(np.int64),
            "global_batch": np.where(train, GLOBAL_BATCH_PER_DP * dp, 0).astype(np.int64),
            "micro_batch": np.where(train, MICRO_BATCH, 0).astype(np.int64),
            "max_groups": np.where(train & (max_groups is not None),
                                   0 if max_groups in (0, "min") else (max_groups if max_groups is not None else -1),
                                   -1).astype(np.int64),
            "max_group_wait": np.where(train & (max_groups is not None), float(max_group_wait), np.nan)}
    cols.update(class_columns(cls))
    wl = Workload.from_arrays(
        name or f"llm-synthetic:days={days:g},gpus={gpus},seed={seed}", submit=submit, runtime=runtime,
        requested_time=req, procs=procs, status=status, columns=cols,
        machine_size=int(math.ceil(gpus / gpus_per_node)),
        machine_size_source=f"{gpus} GPUs / {gpus_per_node} per node",
        source=f"datasets.llm_synthetic.llm_workload(days={days}, gpus={gpus}, seed={seed}, jobs={jobs})")
    wl.notes.append("synthetic LLM-cluster workload calibrated to AcmeTrace Seren (Hu et al. NSDI'24); "
                    "class mix, sizes and runtime shapes are documented assumptions")
    wl.notes.append(f"sizes in whole {gpus_per_node}-GPU nodes (sub-node jobs take one node)")
    return wl


def calibration(wl: Workload, summary: dict[str, float] | None = None) -> dict[str, tuple[float, float]]:
    """{statistic: (generated, AcmeTrace target)} for the calibrated statistics."""
    s = summary or ACME_SEREN
    g = np.asarray(wl.columns["gpus"], float)
    r = wl.runtime
    st = wl.status
    return {
        "med_gpu_num": (float(np.median(g)), s["med_gpu_num"]),
        "avg_gpu_num": (float(g.mean()), s["avg_gpu_num"]),
        "max_gpu": (float(g.max()), s["max_gpu"]),
        "med_run_time_gpu": (float(np.median(r)), s["med_run_time_gpu"]),
        "avg_run_time_gpu": (float(r.mean()), s["avg_run_time_gpu"]),
        "complete_rate_gpu": (float(np.mean(st == 1)), s["complete_rate_gpu"]),
        "cancel_rate_gpu": (float(np.mean(st == 5)), s["cancel_rate_gpu"]),
        "fail_rate_gpu": (float(np.mean(st == 0)), s["fail_rate_gpu"]),
    }
