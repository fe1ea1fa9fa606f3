"""Benchmark: the one-hour Azure LLM conversation trace (19,366 requests) on 16 serving instances.

Issue 16's target: the whole run in < 30 s. Each instance is vLLM 0.19 serving Llama-3.1-8B on one
RTX PRO 6000 (LLMServingSim's per-layer profile; max_num_seqs 256, max_num_batched_tokens 2048, no
prefix caching: the trace has no token ids), behind vLLM's least-loaded router. Prints the trace
load time, the simulation time (CPU seconds), requests/s, and the ratio of the simulation's CPU time
to the machine-speed unit of `benchmarks/calibration.py` measured in the same process.

Usage: ``python -m benchmarks.serving_speed [--instances 16] [--trace conv|code] [--data-dir D]``
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

#: the issue's target for the whole run (s)
TARGET_S = 30.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", type=int, default=16)
    ap.add_argument("--trace", choices=["conv", "code"], default="conv")
    ap.add_argument("--hardware", default="RTXPRO6000")
    ap.add_argument("--model", default="meta-llama/Llama-3.1-8B")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--no-calibration", action="store_true")
    a = ap.parse_args(argv)

    from hpctwin.datasets.serving_traces import read_azure  # noqa: PLC0415
    from hpctwin.twin.serving import simulate  # noqa: PLC0415
    from hpctwin.twin.serving.bundle import find_data_dir  # noqa: PLC0415
    from hpctwin.twin.serving.deployment import PoolSpec, build_pool  # noqa: PLC0415
    from hpctwin.twin.serving.metrics import fifteen, latencies  # noqa: PLC0415

    path = find_data_dir(a.data_dir) / "LLM-serving" / "Azure-LLM-2023" / f"AzureLLMInferenceTrace_{a.trace}.csv"
    t0 = time.perf_counter()
    trace = read_azure(path)
    t_load = time.perf_counter() - t0
    insts = build_pool(PoolSpec(a.hardware, a.model, tp=1, count=a.instances), a.data_dir)
    w0, c0 = time.perf_counter(), time.process_time()
    res = simulate(trace, insts, router="least_loaded")
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    R = res.requests
    st = fifteen(latencies([r.queued for r in R], [r.first for r in R], [r.last for r in R], [r.output for r in R]))
    iters = sum(i.iterations for i in insts)
    print(f"trace {path.name}: {len(trace)} requests over {trace[-1].arrival_s:.0f} s, loaded in {t_load:.2f} s")
    print(f"{a.instances} x {a.model} on {a.hardware}: simulated {res.makespan_s:.0f} s, {iters} iterations, "
          f"{sum(i.preemptions for i in insts)} preemptions")
    print(f"simulation: {wall:.2f} s wall, {cpu:.2f} s CPU, {len(trace) / wall:,.0f} requests/s, "
          f"{iters / wall:,.0f} iterations/s; load + simulation {t_load + wall:.2f} s "
          f"(target < {TARGET_S:.0f} s: {'met' if t_load + wall < TARGET_S else 'NOT met'})")
    print(f"TTFT mean {st['ttft']['mean']:.3f} s p99 {st['ttft']['p99']:.3f} s; TPOT mean "
          f"{1e3 * st['tpot']['mean']:.1f} ms p99 {1e3 * st['tpot']['p99']:.1f} ms")
    if not a.no_calibration:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from calibration import unit_seconds  # noqa: PLC0415
        unit = unit_seconds()
        print(f"calibration unit {unit:.2f} s CPU: simulation = {cpu / unit:.2f} units")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
