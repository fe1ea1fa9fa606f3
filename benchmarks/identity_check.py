"""Byte-identity and speed check of ``jobs.csv`` against an earlier commit.

Runs the same CLI cases in two source trees (this checkout and a ``git worktree`` of a reference
commit), each case in its own process, and prints per case the sha256 of ``jobs.csv`` in both trees,
whether they are identical, and the CPU seconds (user + system of the child) of both with their ratio.
The cases are the whole logs KTH-SP2, SDSC-SP2, CTC-SP2 and HPC2N with fcfs/easy/conservative/slurm,
plus one run each with power, network and failures on.

    python benchmarks/identity_check.py --ref bc453a2            # all cases
    python benchmarks/identity_check.py --ref bc453a2 --quick    # KTH-SP2 and the model runs only

The reference tree is created with ``git worktree add`` under the system temp folder (reused when
present); its results are cached there (``--fresh-ref`` re-runs them, e.g. for a same-sitting speed ratio). Trees older than the ``hpctwin`` namespace are run as ``python -m hpctwin.twin.cli``. Real logs are
read from the data directory (``--data-dir``, ``$HPCTWIN_DATA``, else ``../shared/datasets``).
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOGS = ["KTH-SP2", "SDSC-SP2", "CTC-SP2", "HPC2N"]
POLICIES = [["--scheduler", "fcfs"], ["--scheduler", "easy"], ["--scheduler", "conservative"],
            ["--scheduler", "slurm"]]


def _subset(data_dir: Path, log: str, n: int, dest: Path) -> Path:
    """The first ``n`` job lines of a registry log (header kept), written as a plain SWF file."""
    src = next((data_dir / log).glob("*.swf.gz"))
    dest.parent.mkdir(parents=True, exist_ok=True)
    kept = 0
    with gzip.open(src, "rt", encoding="latin-1") as f, open(dest, "w", encoding="latin-1") as g:
        for line in f:
            if line.lstrip().startswith(";"):
                g.write(line)
            elif line.strip():
                g.write(line)
                kept += 1
                if kept >= n:
                    break
    return dest


def cases(data_dir: Path, work: Path, quick: bool) -> list[tuple[str, list[str]]]:
    out = []
    for log in (LOGS[:1] if quick else LOGS):
        for pol in POLICIES:
            out.append((f"{log}-{pol[1]}", ["--workload", log, *pol]))
    kth2000 = _subset(data_dir, "KTH-SP2", 2000, work / "kth2000.swf")
    out.append(("KTH2000-power", ["--workload", str(kth2000), "--system", "frontier", "--nodes", "100",
                                  "--power", "on", "--scheduler", "easy"]))
    out.append(("CTC-network", ["--workload", "CTC-SP2", "--system", "adastra", "--network", "on",
                                "--scheduler", "easy"]))
    out.append(("KTH-failures", ["--workload", "KTH-SP2", "--failures", "on", "--scheduler", "easy"]))
    return out


def cli_module(tree: Path) -> str:
    """The CLI module of a source tree: ``hpctwin.twin.cli`` since the namespace change, ``twin.cli``
    before it (a tree without the ``hpctwin`` package must run its own top-level ``twin``; naming
    ``hpctwin`` there would import the installed checkout instead of the reference)."""
    return "hpctwin.twin.cli" if (tree / "hpctwin" / "__init__.py").exists() else "twin.cli"


_OLD_NAMES = {"elapsed": "run", "timelimit": "requested_time", "state": "status"}
_OLD_STATES = {"COMPLETED": "completed", "TIMEOUT": "killed", "NODE_FAIL": "failed", "PENDING": "not_started"}


def jobs_csv_digest(path: Path) -> str:
    """sha256 of a jobs.csv in the column names and state values of the reference commits (before
    they followed Slurm's: ``run``, ``requested_time``, ``status`` = completed/killed/failed/
    not_started), so that a table that differs only by those names hashes equal. The columns up to
    ``state`` hold no commas (numbers and state names), so a row is split on its first commas only."""
    data = path.read_bytes()
    head, sep, body = data.partition(b"\n")
    names = head.decode().split(",")
    if "state" not in names:
        return hashlib.sha256(data).hexdigest()
    k = names.index("state")
    rows = []
    for line in body.decode().split("\n"):
        if line:
            parts = line.split(",", k + 1)
            parts[k] = _OLD_STATES.get(parts[k], parts[k])
            line = ",".join(parts)
        rows.append(line)
    head = ",".join(_OLD_NAMES.get(n, n) for n in names)
    return hashlib.sha256((head + sep.decode() + "\n".join(rows)).encode()).hexdigest()


def run_case(tree: Path, args: list[str], out: Path, data_dir: Path) -> tuple[str, float]:
    """sha256 of jobs.csv and the child's CPU seconds."""
    env = dict(os.environ, PYTHONPATH=str(tree), HPCTWIN_DATA=str(data_dir))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [sys.executable, "-m", cli_module(tree), "run", *args, "--out", str(out), "--quiet"]
    r = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode != 0:
        return f"FAILED: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}", cpu
    return jobs_csv_digest(out / "jobs.csv"), cpu


def ref_tree(ref: str) -> Path:
    tree = Path(tempfile.gettempdir()) / f"hpctwin-ref-{ref}"
    if not (tree / ".git").exists():
        subprocess.run(["git", "worktree", "add", "-f", "--detach", str(tree), ref], cwd=REPO, check=True,
                       capture_output=True)
    return tree


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ref", required=True, help="reference commit (e.g. the commit before the change)")
    p.add_argument("--quick", action="store_true", help="KTH-SP2 and the three model runs only")
    p.add_argument("--only", default=None, help="comma-separated case names")
    p.add_argument("--data-dir", default=os.environ.get("HPCTWIN_DATA", str(REPO.parent / "shared" / "datasets")))
    p.add_argument("--fresh-ref", action="store_true",
                   help="re-run the reference cases (default: reuse their cached hashes and CPU times)")
    p.add_argument("--json", default=None, help="also write the table as JSON to this file")
    a = p.parse_args(argv)
    data_dir = Path(a.data_dir).resolve()
    work = Path(tempfile.mkdtemp(prefix="hpctwin-identity-"))
    ref = ref_tree(a.ref)
    todo = cases(data_dir, work, a.quick)
    if a.only:
        names = set(a.only.split(","))
        todo = [c for c in todo if c[0] in names]
    rows, same_all = [], True
    cache_file = ref / ".identity-cache.json"   # the reference commit's results do not change
    cache = {} if a.fresh_ref or not cache_file.exists() else json.loads(cache_file.read_text())
    print(f"{'case':<24} {'identical':>9} {'ref cpu s':>10} {'new cpu s':>10} {'new/ref':>8}")
    for name, args in todo:
        key = " ".join(args)
        if key not in cache:
            cache[key] = run_case(ref, args, work / "ref" / name, data_dir)
            cache_file.write_text(json.dumps(cache, indent=1))
        h_ref, t_ref = cache[key]
        h_new, t_new = run_case(REPO, args, work / "new" / name, data_dir)
        same = h_ref == h_new and not h_new.startswith("FAILED")
        same_all &= same
        rows.append({"case": name, "identical": same, "ref_sha256": h_ref, "new_sha256": h_new,
                     "ref_cpu_s": round(t_ref, 2), "new_cpu_s": round(t_new, 2)})
        print(f"{name:<24} {str(same):>9} {t_ref:>10.2f} {t_new:>10.2f} {t_new / max(t_ref, 1e-9):>8.2f}"
              + ("" if same else f"   ref={h_ref[:40]} new={h_new[:40]}"), flush=True)
    print(f"all identical: {same_all}  (reference {a.ref}, {time.strftime('%Y-%m-%d %H:%M')})")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if same_all else 1


if __name__ == "__main__":
    sys.exit(main())
