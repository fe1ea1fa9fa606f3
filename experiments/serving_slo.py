"""Experiment (a) of issue 28: multi-SLO serving, SLO-aware vs baseline scheduling and routing at equal GPUs.

Llama2-70B on H100-80GB instances of TP 4 (iteration times: Splitwise's measured ``perf_model.csv``, as in
``serving_pd``), ``--gpus`` GPUs of colocated vLLM instances with prefix caching. Each request gets an SLO
class by a seeded rule (`twin.serving.slo.assign_classes`: independent draws with the classes' shares,
``--seed``): ``tight`` (TTFT <= 1 s, TPOT <= 80 ms, 20 %), ``standard`` (3 s, 150 ms, 50 %), ``relaxed``
(10 s, 300 ms, 30 %). Traces: the Azure LLM inference 2023 conversation and code traces and Mooncake's
conversation trace, the first ``--minutes`` of each, replayed at several loads (load = arrival-rate
multiplier: arrival times divided by it). Policies:

* ``baseline``: today's engine, FCFS instance scheduling and the ``least_loaded`` router;
* ``slo_aware``: deadline-slack instance scheduling with deferral of requests that can no longer meet
  their TTFT (``policy="slack"``, ``admission="defer"``) and the ``slo_aware`` router.

Per trace, load, policy and class: attainment (share of the class's requests meeting both targets),
TTFT and TPOT P99, goodput (requests meeting their SLO per second of the replayed window), GPUs.

    python -m hpctwin.experiments.serving_slo [--out runs/serving_slo] [--minutes 5] [--loads 0.5,1,2,4]
        [--trace conv,code,mooncake] [--gpus 16] [--seed 0] [--quick]

``--out`` (``results.csv``, ``results.md``, ``results.tex``, ``goodput.csv``, ``attainment.png``) is checked
before the runs and written atomically: it must not exist, be empty, or be a folder hpctwin wrote,
replaced only with ``--force``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hpctwin.datasets.serving_traces import ServingRequest, read_azure, read_mooncake
from hpctwin.experiments import cli
from hpctwin.experiments.serving_pd import H100_MEM_BYTES
from hpctwin.experiments.tables import staged_output, write_results_csv, write_table_files
from hpctwin.twin.serving import BlockManager, Instance, simulate
from hpctwin.twin.serving.bundle import find_data_dir
from hpctwin.twin.serving.metrics import latencies, statistics
from hpctwin.twin.serving.slo import DEFAULT_CLASSES, SLOClass, assign_classes, attainment_by_class
from hpctwin.twin.serving.tables import SplitwiseIterationModel

#: trace name -> (folder, file, reader)
TRACES = {"conv": ("Azure-LLM-2023", "AzureLLMInferenceTrace_conv.csv", read_azure),
          "code": ("Azure-LLM-2023", "AzureLLMInferenceTrace_code.csv", read_azure),
          "mooncake": ("Mooncake", "conversation_trace.jsonl.gz", read_mooncake)}
#: policy -> (instance scheduling policy, admission control, router)
POLICIES = {"baseline": ("fcfs", "none", "least_loaded"), "slo_aware": ("slack", "defer", "slo_aware")}
COLUMNS = ["trace", "load", "policy", "slo_class", "attainment", "ttft_p99_s", "tpot_p99_s", "goodput_rps", "gpus"]
CAPTION = ("Multi-SLO serving at equal GPUs: {model} on {hw}, TP {tp}, {gpus} GPUs ({n} colocated vLLM instances, "
           "prefix caching, Splitwise perf_model iteration times); first {minutes:g} min of each trace, arrivals "
           "divided by the load; classes drawn per request (seed {seed}): {classes}. Attainment = share of the "
           "class's requests with TTFT <= its TTFT target and TPOT <= its TPOT target; goodput = those requests "
           "per second of the replayed window. baseline = FCFS scheduling + least_loaded routing; slo_aware = "
           "deadline-slack scheduling with deferral + slo_aware routing.")


def classes_text(classes) -> str:
    """``tight: TTFT <= 1 s, TPOT <= 50 ms, 20 %; ...`` for a caption."""
    return "; ".join(f"{c.name}: TTFT <= {c.ttft_s:g} s, TPOT <= {1e3 * c.tpot_s:g} ms, {100 * c.share:g} %"
                     for c in classes)


def make_instances(n: int, model: SplitwiseIterationModel, policy: str, admission: str, classes,
                   mem_util: float = 0.9) -> list[Instance]:
    """``n`` instances of ``model`` on H100-80GB (KV blocks of 16 tokens in what the weights leave of
    ``mem_util`` of 80 GB), prefix caching, async scheduling, the given scheduling policy."""
    shape, tp = model.shape, model.tp
    blocks = int((H100_MEM_BYTES * mem_util - shape.weight_bytes_per_rank(tp)) // (shape.kv_bytes_per_token(tp) * 16))
    slo = dict(slo=classes, admission=admission) if policy == "slack" else {}
    return [Instance(k, model, BlockManager(blocks, 16, caching=True), 256, 2048, async_scheduling=True,
                     policy=policy, **slo) for k in range(n)]


def load_trace(name: str, minutes: float, data_dir: str | None, classes, seed: int,
               max_prompt: int = 32768) -> list[ServingRequest]:
    """The first ``minutes`` of trace ``name`` (prompts longer than ``max_prompt`` tokens left out), with
    SLO classes drawn by `assign_classes`."""
    folder, fname, reader = TRACES[name]
    path = find_data_dir(data_dir) / "LLM-serving" / folder / fname
    reqs = [r for r in reader(path) if r.arrival_s < minutes * 60 and r.input_tokens <= max_prompt]
    return assign_classes(reqs, classes, seed)


def run_one(trace: list[ServingRequest], model, n: int, policy: str, classes, window_s: float) -> list[dict]:
    """One serving run of ``trace`` under ``policy``: a row per class (attainment, P99s, goodput)."""
    sched, admission, router = POLICIES[policy]
    res = simulate(trace, make_instances(n, model, sched, admission, classes), router=router)
    ok = attainment_by_class(res.requests, classes)
    rows = []
    for k, c in enumerate(classes):
        mine = [r for r in res.requests if r.klass == k and not r.shed]
        lat = latencies([r.arrival for r in mine], [r.first for r in mine], [r.last for r in mine],
                        [r.output for r in mine])
        rows.append({"slo_class": c.name, "attainment": float(ok[k].mean()) if ok[k].size else float("nan"),
                     "ttft_p99_s": statistics(lat["ttft"])["p99"], "tpot_p99_s": statistics(lat["tpot"])["p99"],
                     "goodput_rps": float(ok[k].sum()) / window_s})
    return rows


def run(out: str | Path, traces: tuple[str, ...] = ("conv", "code", "mooncake"), minutes: float = 5.0,
        loads: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0), gpus: int = 16, tp: int = 4, seed: int = 0,
        classes: tuple[SLOClass, ...] = DEFAULT_CLASSES, data_dir: str | None = None,
        model_name: str = "llama2-70b", hw: str = "h100-80gb") -> pd.DataFrame:
    """Every trace x load x policy; writes results.csv/.md/.tex, goodput.csv and attainment.png into ``out``."""
    ddir = find_data_dir(data_dir)
    model = SplitwiseIterationModel(ddir / "LLM-serving" / "splitwise" / "perf_model.csv", model_name, hw, tp)
    n = gpus // tp
    if n < 1:
        raise ValueError(f"--gpus {gpus} is fewer than one instance of TP {tp}")
    rows = []
    for name in traces:
        base = load_trace(name, minutes, str(ddir), classes, seed)
        for load in loads:
            trace = [ServingRequest(r.arrival_s / load, r.input_tokens, r.output_tokens, r.token_ids,
                                    r.block_hashes, r.klass) for r in base]
            window = minutes * 60.0 / load
            for policy in POLICIES:
                for row in run_one(trace, model, n, policy, classes, window):
                    rows.append({"trace": name, "load": float(load), "policy": policy, **row, "gpus": n * tp})
    df = pd.DataFrame(rows, columns=COLUMNS)
    out = Path(out)
    cap = CAPTION.format(model=model_name, hw=hw, tp=tp, gpus=n * tp, n=n, minutes=minutes, seed=seed,
                         classes=classes_text(classes))
    write_table_files(df, out, cap, by=["trace", "load", "policy", "slo_class"],
                      metrics=["attainment", "ttft_p99_s", "tpot_p99_s", "goodput_rps", "gpus"],
                      label="tab:serving-slo")
    tot = df.groupby(["trace", "load", "policy"], sort=False, as_index=False)["goodput_rps"].sum()
    write_results_csv(tot, out / "goodput.csv")
    _plot(df, out / "attainment.png", classes[0].name)
    return df


def _plot(df: pd.DataFrame, path: Path, tight: str) -> None:
    """Attainment of the tightest class against load, one line per trace and policy."""
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    fig, ax = plt.subplots(figsize=(7, 4))
    sub = df[df["slo_class"] == tight]
    for (tr, pol), g in sub.groupby(["trace", "policy"], sort=False):
        ax.plot(g["load"], 100 * g["attainment"], marker="o", ls="-" if pol == "slo_aware" else "--",
                label=f"{tr} {pol}")
    ax.set_xlabel("load (arrival-rate multiplier)")
    ax.set_ylabel(f"{tight} class SLO attainment (%)")
    ax.set_title("SLO-aware vs baseline scheduling and routing at equal GPUs", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _floats(p, flag: str, text: str) -> tuple[float, ...]:
    try:
        v = tuple(float(x) for x in text.split(","))
    except ValueError:
        v = ()
    if not v or not all(np.isfinite(x) and x > 0 for x in v):
        p.error(f"{flag} {text!r}: expected comma-separated positive numbers (e.g. 1,2,3)")
    return v


def main(argv: list[str] | None = None) -> int:
    p = cli.parser("serving_slo", __doc__)
    p.add_argument("--trace", dest="traces", default="conv,code,mooncake",
                   help="comma-separated traces: conv, code, mooncake")
    p.add_argument("--minutes", type=float, default=5.0, help="first minutes of each trace replayed")
    p.add_argument("--loads", default="0.5,1,2,4", help="comma-separated loads (arrival-rate multipliers)")
    p.add_argument("--gpus", type=cli.positive_int, default=16, help="GPUs of every configuration")
    p.add_argument("--tp", type=cli.positive_int, default=4, help="tensor parallelism of an instance")
    p.add_argument("--quick", action="store_true", help="a tiny run for tests: 1 minute of each trace, loads 1 and 2")
    cli.add_seed(p, "seed of the SLO class draw")
    cli.add_data_dir(p)
    cli.add_out(p, "runs/serving_slo")
    a = p.parse_args(argv)
    traces = tuple(x for x in a.traces.split(",") if x)
    bad = [t for t in traces if t not in TRACES]
    if bad or not traces:
        p.error(f"--trace {a.traces!r}: unknown trace {bad[0] if bad else ''!r}; known: {', '.join(TRACES)}")
    if not (np.isfinite(a.minutes) and a.minutes > 0):
        p.error(f"--minutes {a.minutes!r}: expected a positive number of minutes")
    loads = _floats(p, "--loads", a.loads)
    minutes = a.minutes
    if a.quick:
        minutes, loads = 1.0, (1.0, 2.0)
    if a.gpus < a.tp:
        p.error(f"--gpus {a.gpus} is fewer than one instance of --tp {a.tp}")
    with staged_output("python -m hpctwin.experiments.serving_slo", a.out, a.force) as out:
        run(out, traces, minutes, loads, a.gpus, a.tp, a.seed, data_dir=a.data_dir)
        table = (out / "results.md").read_text()
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
