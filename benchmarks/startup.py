"""Start-up and end-to-end cost of ``hpctwin run`` (issue 17 item 4), as ratios to the calibration unit.

Prints, each measured in child processes of this one (CPU = user + system of the child, from
``os.wait4``; best of ``--repeat``):

* the interpreter alone (``python -c pass``): the floor of any command;
* the imports of a 1,000-job run (``-X importtime``: the sum of every module's own time) and which of
  pandas, scipy, networkx, numba, matplotlib, pyarrow, importlib.metadata, numpy.random, numpy.ma it
  imported (none is expected);
* ``hpctwin run`` end to end on the first 1,000 jobs of KTH-SP2 (synthetic:jobs=1000 without the
  data): wall and CPU seconds, run folder written (target: < 0.6 s wall);
* with ``--ctc``: CTC-SP2 EASY end to end against ``plain_easy.py`` (a minimal plain-Python replay
  of the same log), CPU ratio (target: <= 1.5x);
* with ``--ricc``: RICC peak resident memory per scheduler (``--schedulers``; target < 700 MB).

and the calibration unit (`calibration.py`) measured in this process, so every figure is also given in
units. Children run without ``PYTHONDONTWRITEBYTECODE`` (as a user's shell has it): with it set every
project module is compiled from source on each start (~0.1-0.3 s).

    python benchmarks/startup.py                 # 1,000-job run, imports, interpreter
    python benchmarks/startup.py --ctc --ricc    # and CTC-SP2 / plain replay, RICC memory
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibration import unit_seconds  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "scipy", "networkx", "numba", "matplotlib", "pyarrow")
#: modules a plain run no longer imports (issue 24 item 6): reported like the heavy packages
AVOIDED = ("importlib.metadata", "numpy.random", "numpy.ma")


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.setdefault("HPCTWIN_DATA", str(REPO.parent / "shared" / "datasets"))
    return env


def child(cmd: list[str], timeout: float | None = None) -> tuple[float, float, int, int, str]:
    """Run ``cmd``: (wall s, CPU s, peak RSS bytes, exit status, stderr)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = None if timeout is None else t0 + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if deadline is not None and time.perf_counter() > deadline:
            p.kill()
            pid, status, ru = os.wait4(p.pid, 0)
            break
        time.sleep(0.005)
    wall = time.perf_counter() - t0
    err = p.stderr.read() if p.stderr else ""
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, p.returncode, err


def best(cmd: list[str], repeat: int) -> tuple[float, float, int]:
    runs = []
    for _ in range(repeat):
        wall, cpu, rss, rc, err = child(cmd)
        if rc != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({rc}): {err.strip()[-500:]}")
        runs.append((wall, cpu, rss))
    return min(r[0] for r in runs), min(r[1] for r in runs), max(r[2] for r in runs)


def small_log(tmp: Path) -> str:
    """The first 1,000 jobs of KTH-SP2 as an SWF file, else the synthetic model's 1,000 jobs."""
    from identity_check import _subset  # noqa: PLC0415
    data = Path(_env()["HPCTWIN_DATA"])
    try:
        return str(_subset(data, "KTH-SP2", 1000, tmp / "kth1000.swf"))
    except (StopIteration, OSError):
        return "synthetic:jobs=1000"


def import_profile(workload: str, out: Path) -> tuple[float, list[str]]:
    """Sum of the modules' own import times (s) of one run, and the heavy packages it imported."""
    cmd = [sys.executable, "-X", "importtime", "-m", "hpctwin.twin.cli", "run", "-w", workload, "-q",
           "--out", str(out), "--force"]
    err = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, check=True).stderr
    total, heavy = 0, set()
    for line in err.splitlines():
        if line.startswith("import time:") and "|" in line:
            parts = line.split("|")
            try:
                total += int(parts[0].split(":")[1])
            except ValueError:
                continue                         # the header line
            name = parts[2].strip()
            if name.split(".")[0] in HEAVY:
                heavy.add(name.split(".")[0])
            elif name in AVOIDED:
                heavy.add(name)
    return total / 1e6, sorted(heavy)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs of each case; the best is printed (default 5)")
    ap.add_argument("--ctc", action="store_true", help="CTC-SP2 EASY end to end against plain_easy.py")
    ap.add_argument("--ricc", action="store_true", help="RICC peak memory per scheduler")
    ap.add_argument("--schedulers", default="easy,fcfs", help="schedulers of --ricc (default easy,fcfs)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per RICC run (default 600)")
    a = ap.parse_args(argv)
    py = sys.executable
    unit = unit_seconds()
    print(f"calibration unit: {unit:.3f} CPU s")
    with tempfile.TemporaryDirectory(prefix="hpctwin-startup-") as d:
        tmp = Path(d)
        wall, cpu, _ = best([py, "-c", "pass"], a.repeat)
        print(f"interpreter alone: {wall:.3f} s wall, {cpu:.3f} CPU s ({cpu / unit:.3f} units)")
        wl = small_log(tmp)
        best([py, "-m", "hpctwin.twin.cli", "run", "-w", wl, "-q", "--out", str(tmp / "warm"), "--force"], 1)
        imp, heavy = import_profile(wl, tmp / "imp")
        print(f"imports of a 1,000-job run (-X importtime, sum of own times): {imp:.3f} s; heavy packages "
              f"imported: {', '.join(heavy) or 'none'}")
        cmd = [py, "-m", "hpctwin.twin.cli", "run", "-w", wl, "-q", "--out", str(tmp / "r1000"), "--force"]
        wall, cpu, rss = best(cmd, a.repeat)
        name = "KTH-SP2 first 1,000 jobs" if not wl.startswith("synthetic") else wl
        print(f"hpctwin run, {name}: {wall:.3f} s wall, {cpu:.3f} CPU s ({cpu / unit:.3f} units), "
              f"peak {rss / 2**20:.0f} MB (target < 0.6 s wall)")
        if a.ctc:
            cli = [py, "-m", "hpctwin.twin.cli", "run", "-w", "CTC-SP2", "-s", "easy", "-q", "--out",
                   str(tmp / "ctc"), "--force"]
            plain = [py, str(REPO / "benchmarks" / "plain_easy.py"), "CTC-SP2"]
            best(cli, 1)                             # the compiled kernels' cache, the page cache
            rep = max(1, a.repeat // 2)
            cw, cc, crss = best(cli, rep)
            pw, pc, _ = best(plain, rep)
            print(f"CTC-SP2 EASY end to end: {cw:.2f} s wall, {cc:.2f} CPU s ({cc / unit:.2f} units), peak "
                  f"{crss / 2**20:.0f} MB; plain_easy.py {pw:.2f} s wall, {pc:.2f} CPU s; CLI / plain = "
                  f"{cc / pc:.2f}x CPU (target <= 1.5x)")
        if a.ricc:
            for s in a.schedulers.split(","):
                cmd = [py, "-m", "hpctwin.twin.cli", "run", "-w", "RICC", "-s", s, "-q", "--out",
                       str(tmp / f"ricc-{s}"), "--force"]
                wall, cpu, rss, rc, err = child(cmd, timeout=a.timeout)
                what = "ok" if rc == 0 else (f"stopped after {a.timeout:.0f} s" if rc < 0 else f"exit {rc}")
                print(f"RICC {s}: {wall:.1f} s wall, {cpu:.1f} CPU s ({cpu / unit:.1f} units), peak "
                      f"{rss / 2**20:.0f} MB ({what}; target < 700 MB)")
    print(f"calibration unit again: {unit_seconds():.3f} CPU s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
