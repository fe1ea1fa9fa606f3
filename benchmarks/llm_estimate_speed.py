"""Benchmark: how fast ``hpctwin llm estimate`` answers (issue 25 item 8's target: < 50 ms per estimate).

Times `twin.training.estimate.estimate` in this process on four configurations:

* ``fits``: Llama 3 70B on 512 H100 (dgx-h100), TP 8 x PP 4 x DP 16, 16M tokens (the CLI example);
* ``16k GPUs``: Llama 3 405B on 16,384 H100, TP 8 x PP 16 x DP 128, 4 virtual stages (fabric grown);
* ``does not fit``: Llama 3 70B on one Frontier node, ZeRO 3: the estimate also searches the ZeRO stage and
  offload that would fit (a second iteration model and 18 offload evaluations);
* ``offload``: the same with ``--offload cpu+nvme+pfs``.

For each: the first call (cold: lazy imports, cached collective schedules) and the mean of ``--repeat``
warm calls, in wall and CPU milliseconds, and the warm CPU time as a share of the machine-speed unit
of `benchmarks/calibration.py` measured in the same process (so the figure means something on any
machine). ``--cli`` also times whole ``hpctwin llm estimate`` processes (Python start-up included).

Usage: ``python benchmarks/llm_estimate_speed.py [--repeat 50] [--cli 3] [--no-calibration]``
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

#: the issue's target per estimate (s)
TARGET_S = 0.050

_FRONTIER_70B = {"model": "llama3-70b", "system": "frontier", "gpus": 8, "tp": 1, "pp": 1, "dp": 8, "seq_len": 4096,
                 "global_batch_tokens": 65536, "zero": 3, "recompute": "full"}
CASES = {
    "fits": {"model": "llama3-70b", "system": "dgx-h100", "gpus": 512, "tp": 8, "pp": 4, "dp": 16, "seq_len": 8192,
             "global_batch_tokens": 16777216, "zero": 1, "recompute": "selective"},
    "16k GPUs": {"model": "llama3-405b", "system": "dgx-h100", "gpus": 16384, "tp": 8, "pp": 16, "dp": 128,
                 "seq_len": 8192, "global_batch_tokens": 16777216, "zero": 1, "recompute": "full", "vpp": 4},
    "does not fit": _FRONTIER_70B,
    "offload": {**_FRONTIER_70B, "offload": "cpu+nvme+pfs"},
}
CLI_ARGS = ["estimate", "--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "512", "--tp", "8", "--pp", "4",
            "--dp", "16", "--seq-len", "8192", "--global-batch-tokens", "16777216", "--zero", "1", "--json"]


def time_case(kw: dict, repeat: int) -> tuple[float, float, float, float]:
    """(cold wall s, cold CPU s, warm wall s per call, warm CPU s per call) of `estimate` with ``kw``."""
    from hpctwin.twin.training.estimate import estimate  # noqa: PLC0415
    args = dict(kw)
    model, system, gpus = args.pop("model"), args.pop("system"), args.pop("gpus")
    tp, pp, dp = args.pop("tp"), args.pop("pp"), args.pop("dp")
    w0, c0 = time.perf_counter(), time.process_time()
    estimate(model, system, gpus, tp, pp, dp, **args)
    cold_w, cold_c = time.perf_counter() - w0, time.process_time() - c0
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(repeat):
        estimate(model, system, gpus, tp, pp, dp, **args)
    return cold_w, cold_c, (time.perf_counter() - w0) / repeat, (time.process_time() - c0) / repeat


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=50, help="warm calls per configuration")
    ap.add_argument("--cli", type=int, default=0, help="also time this many whole CLI processes")
    ap.add_argument("--no-calibration", action="store_true", help="skip the machine-speed unit")
    a = ap.parse_args(argv)
    if a.repeat < 1 or a.cli < 0:
        ap.error("--repeat must be >= 1 and --cli >= 0")
    unit = None
    if not a.no_calibration:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from calibration import unit_seconds  # noqa: PLC0415
        unit = unit_seconds()
        print(f"calibration unit: {unit:.3f} CPU s")
    print(f"{'case':14s} {'cold ms':>9s} {'cold CPU ms':>12s} {'warm ms':>9s} {'warm CPU ms':>12s} "
          f"{'CPU / unit':>11s}  target < {TARGET_S * 1e3:.0f} ms")
    worst = 0.0
    for name, kw in CASES.items():
        cw, cc, ww, wc = time_case(kw, a.repeat)
        worst = max(worst, ww)
        ratio = f"{wc / unit:.5f}" if unit else "-"
        print(f"{name:14s} {cw * 1e3:9.2f} {cc * 1e3:12.2f} {ww * 1e3:9.2f} {wc * 1e3:12.2f} {ratio:>11s}  "
              f"{'met' if ww < TARGET_S else 'NOT met'}")
    print(f"slowest warm estimate: {worst * 1e3:.2f} ms (target < {TARGET_S * 1e3:.0f} ms: "
          f"{'met' if worst < TARGET_S else 'NOT met'})")
    if a.cli:
        walls = []
        for _ in range(a.cli):
            w0 = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "hpctwin.twin.training.cli", *CLI_ARGS], capture_output=True,
                               text=True, check=False)
            walls.append(time.perf_counter() - w0)
            if r.returncode:
                print(f"CLI failed: {r.stderr.strip()}")
                return 1
        print(f"whole CLI process (Python start-up and imports included): best {min(walls) * 1e3:.0f} ms of {a.cli}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
