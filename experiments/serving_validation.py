"""Validation of the serving engine against measured vLLM 0.19 runs (LLMServingSim bench bundles).

For every bundle with measurements (``vllm/requests.jsonl``) under
``<data>/LLM-serving/LLMServingSim/bench/<hw>/<model>/``, the bundle is simulated with ``hpctwin serve``'s
code path and the 15 statistics (TTFT, TPOT, E2E at mean, median, P90, P95, P99) are compared with the
measured ones. Conventions (LLMServingSim ``bench/core/validate.py``): TTFT = first_token - arrival,
TPOT = (last_token - first_token) / max(1, output_tokens - 1), E2E = last_token - arrival; the measured
arrival is ``queued_ts`` (the engine's monotonic clock, the same as ``first_token_ts``/``last_token_ts``);
the simulated arrival is the time the engine receives the request (``requests.csv``'s ``arrival_s``, see
`hpctwin.twin.serving.cli`); percentiles are numpy's linear ones; error = (sim - measured) / measured.

    python -m hpctwin.experiments.serving_validation [--data-dir D] [--out runs/serving_validation]

Writes ``results.csv`` (one row per bundle x metric x statistic), ``table.md``, ``table.tex`` and ``errors.png`` into
``--out`` (checked before the runs and written atomically: it must not exist, be empty, or be a folder
hpctwin wrote, replaced only with ``--force``).

The bundles without per-request measurements (RTX PRO 6000 Llama-3.1-8B TP1 and Qwen3-30B-A3B DP2 x EP2)
are compared with the measured vLLM statistics that LLMServingSim documents for them (``DOCUMENTED``:
the ``vLLM`` column of ``bench/examples/<hw>/<model>/validation/summary.txt``, commit 5daddb2, printed
to 0.1 ms, so a small statistic such as TPOT carries up to ~0.2 % rounding): ``documented.csv`` and a
second part of ``table.md``; they are not in ``results.csv`` or the plot.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from hpctwin.experiments import cli
from hpctwin.experiments.tables import staged_output, write_md_tex, write_results_csv
from hpctwin.twin.serving.bundle import find_data_dir, load_bundle
from hpctwin.twin.serving.cli import run_bundle
from hpctwin.twin.serving.metrics import METRICS, STATS, fifteen, latencies

CAPTION = ("Serving validation: hpctwin serve vs measured vLLM 0.19 (LLMServingSim bench bundles, 300 ShareGPT "
           "requests at 10 req/s). TTFT = first_token - arrival; TPOT = (last - first) / max(1, out - 1); "
           "E2E = last - arrival; measured arrival = queued_ts; seconds; error = (sim - measured) / measured.")


#: Measured vLLM 0.19 statistics (ms) of the bundles without ``requests.jsonl``, from LLMServingSim's
#: ``bench/examples/RTXPRO6000/<model>/validation/summary.txt`` (commit 5daddb2, column ``vLLM``; its
#: ``Latency`` rows are E2E): metric -> (mean, median, p90, p95, p99).
DOCUMENTED: dict[str, dict[str, tuple[float, ...]]] = {
    "RTXPRO6000/Llama-3.1-8B": {
        "ttft": (7097.2, 9442.7, 16852.7, 18397.9, 19755.3),
        "tpot": (32.5, 33.4, 36.5, 36.9, 37.3),
        "e2e": (28200.7, 29615.6, 35450.7, 36617.4, 37638.8)},
    "RTXPRO6000/Qwen3-30B-A3B-Instruct-2507": {
        "ttft": (1086.0, 138.8, 5182.6, 8431.3, 9587.9),
        "tpot": (47.3, 48.9, 52.2, 52.6, 53.3),
        "e2e": (32344.6, 31462.3, 38448.2, 39648.9, 43901.1)},
}


def measured_bundles(data_dir: str | Path | None = None) -> list[Path]:
    """Bundle folders that carry measured per-request timestamps."""
    root = find_data_dir(data_dir) / "LLM-serving" / "LLMServingSim" / "bench"
    return sorted(p.parent.parent for p in root.glob("*/*/vllm/requests.jsonl"))


def measured_statistics(requests_jsonl: Path) -> dict[str, dict[str, float]]:
    """The 15 statistics of a measured run (s)."""
    rows = []
    for i, line in enumerate(Path(requests_jsonl).read_text().splitlines(), 1):
        if not line.strip():
            continue
        d = json.loads(line)
        for f in ("queued_ts", "first_token_ts", "last_token_ts", "output_toks"):
            if d.get(f) is None:
                raise ValueError(f"{requests_jsonl}:{i}: missing field {f!r}")
        rows.append(d)
    return fifteen(latencies([r["queued_ts"] for r in rows], [r["first_token_ts"] for r in rows],
                             [r["last_token_ts"] for r in rows], [r["output_toks"] for r in rows]))


def simulated_statistics(bundle: Path, data_dir: str | Path | None = None) -> dict[str, dict[str, float]]:
    """The 15 statistics of ``hpctwin serve --bundle`` on one bundle (s)."""
    _, res = run_bundle(load_bundle(bundle, data_dir))
    reqs = res.requests
    return fifteen(latencies([r.queued for r in reqs], [r.first for r in reqs], [r.last for r in reqs],
                             [r.output for r in reqs]))


def validate_bundle(bundle: str | Path, data_dir: str | Path | None = None) -> pd.DataFrame:
    """Rows (bundle, metric, statistic, measured_s, simulated_s, error) for one measured bundle."""
    bundle = Path(bundle)
    sim = simulated_statistics(bundle, data_dir)
    meas = measured_statistics(bundle / "vllm" / "requests.jsonl")
    name = f"{bundle.parent.name}/{bundle.name}"
    rows = [{"bundle": name, "metric": m, "statistic": s, "measured_s": meas[m][s], "simulated_s": sim[m][s],
             "error": (sim[m][s] - meas[m][s]) / meas[m][s]} for m in METRICS for s in STATS]
    return pd.DataFrame(rows)


def validate_documented(data_dir: str | Path | None = None) -> pd.DataFrame:
    """The same rows for the bundles of ``DOCUMENTED`` (measured = LLMServingSim's documented vLLM figure)."""
    root = find_data_dir(data_dir) / "LLM-serving" / "LLMServingSim" / "bench"
    rows = []
    for name, doc in DOCUMENTED.items():
        if not (root / name / "config.json").is_file():
            continue
        sim = simulated_statistics(root / name, data_dir)
        for m in METRICS:
            for s, ms in zip(STATS, doc[m]):
                rows.append({"bundle": name, "metric": m, "statistic": s, "measured_s": ms / 1000,
                             "simulated_s": sim[m][s], "error": (sim[m][s] - ms / 1000) / (ms / 1000)})
    return pd.DataFrame(rows)


def error_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per bundle: mean absolute relative error over the 15 statistics and the largest one."""
    g = df.assign(abs_error=df["error"].abs()).groupby("bundle", sort=False)["abs_error"]
    return pd.DataFrame({"bundle": list(g.groups), "mean_abs_error": g.mean().to_numpy(),
                         "max_abs_error": g.max().to_numpy()})


def plot(df: pd.DataFrame, path: Path) -> Path:
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    bundles = list(dict.fromkeys(df["bundle"]))
    labels = [f"{m.upper()} {s}" for m in METRICS for s in STATS]
    x = np.arange(len(labels))
    w = 0.8 / max(1, len(bundles))
    fig, ax = plt.subplots(figsize=(11, 4))
    for i, b in enumerate(bundles):
        sub = df[df["bundle"] == b]
        ax.bar(x + (i - (len(bundles) - 1) / 2) * w, 100 * sub["error"].to_numpy(), w, label=b)
    for lim in (-10, -5, 5, 10):
        ax.axhline(lim, color="grey", lw=0.6, ls=":" if abs(lim) == 10 else "--")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(x, labels, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("simulated vs measured (%)")
    ax.set_title("hpctwin serve vs measured vLLM 0.19 (15 statistics)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _abs_pct(summ: pd.DataFrame) -> pd.DataFrame:
    """An error summary with its mean and largest absolute errors in %."""
    return summ.assign(mean_abs_error_pct=100 * summ["mean_abs_error"], max_abs_error_pct=100 * summ["max_abs_error"])


def run(out: str | Path, data_dir: str | Path | None = None) -> pd.DataFrame:
    out = Path(out)
    bundles = measured_bundles(data_dir)
    if not bundles:
        raise FileNotFoundError("no bundle with vllm/requests.jsonl under the data directory's "
                                "LLM-serving/LLMServingSim/bench/")
    df = pd.concat([validate_bundle(b, data_dir) for b in bundles], ignore_index=True)
    out.mkdir(parents=True, exist_ok=True)
    write_results_csv(df, out / "results.csv")
    summ = error_summary(df)
    table = df.assign(error_pct=100 * df["error"]).drop(columns=["error"])
    per_stat = ["measured_s", "simulated_s", "error_pct"]
    tables = [dict(agg=table, by=["bundle", "metric", "statistic"], metrics=per_stat, caption=CAPTION,
                   label="tab:serving-validation"),
              dict(agg=_abs_pct(summ), by=["bundle"], metrics=["mean_abs_error_pct", "max_abs_error_pct"],
                   caption="Mean and largest absolute error over the 15 statistics (%).",
                   label="tab:serving-validation-summary")]
    doc = validate_documented(data_dir)
    if len(doc):
        write_results_csv(doc, out / "documented.csv")
        tables += [dict(agg=_abs_pct(error_summary(doc)), by=["bundle"],
                        metrics=["mean_abs_error_pct", "max_abs_error_pct"],
                        caption="Bundles without per-request measurements vs the vLLM statistics LLMServingSim "
                                "documents (summary.txt, commit 5daddb2): mean and largest absolute error over "
                                "the 15 statistics (%).", label="tab:serving-validation-documented"),
                   dict(agg=doc.assign(error_pct=100 * doc["error"]).drop(columns=["error"]),
                        by=["bundle", "metric", "statistic"], metrics=per_stat, caption="The same, per statistic (s).",
                        label="tab:serving-validation-documented-stats")]
    write_md_tex(out, "table", tables)
    plot(df, out / "errors.png")
    return df


def main(argv: list[str] | None = None) -> int:
    p = cli.parser("serving_validation", __doc__)
    cli.add_data_dir(p)
    cli.add_out(p, "runs/serving_validation")
    a = p.parse_args(argv)
    with staged_output("python -m hpctwin.experiments.serving_validation", a.out, a.force) as out:
        df = run(out, a.data_dir)
        doc = pd.read_csv(out / "documented.csv") if (out / "documented.csv").is_file() else None
    for _, r in error_summary(df).iterrows():
        print(f"{r['bundle']}: mean |error| {100 * r['mean_abs_error']:.2f} %, max {100 * r['max_abs_error']:.2f} %")
    if doc is not None:
        for _, r in error_summary(doc).iterrows():
            print(f"{r['bundle']} (vs documented vLLM figures): mean |error| {100 * r['mean_abs_error']:.2f} %, "
                  f"max {100 * r['max_abs_error']:.2f} %")
    print(f"wrote {a.out}/results.csv, documented.csv, table.md, errors.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
