"""Fidelity of the Slurm-like policy against recorded real Slurm 22.05 runs (issue 27 item 7).

For every case folder of tests/data/slurm_truth/ (see its README.md: a GPU cluster with
select/cons_tres, partitions, QOS limits, multifactor priority; each trace replayed twice on real
Slurm) this runs ``--scheduler slurm`` on each recorded input (``real-<k>.sacct.txt`` read by the
sacct reader, with the case's ``slurm.conf`` and ``accounts.toml``) and prints, per case:

* twin vs real-<k>: the twin run on real-<k>'s dump against real-<k>'s recorded starts;
* real-1 vs real-2: the two real replays of the same trace against each other (what "as close as
  real Slurm is to itself" means).

Metrics (jobs matched by id; waits = start - submit):

* ``pairwise``: fraction of job pairs whose start order agrees (a pair agrees when the sign of the
  start difference is the same in both schedules; a tie agrees only with a tie);
* ``wait A`` / ``wait B`` (trace s) and ``dwait``: mean wait of B relative to A, in %;
* ``within``: fraction of jobs whose starts differ by at most 60 trace s (one real second, Slurm's
  tick, at the recording scale 60).

A job requeued by preemption (case preempt) counts with its first start, in both schedules.

The recorded dumps are in real seconds (the replays ran at 60 trace s per real s); the twin runs on
them as recorded (its slurm.conf is the real one: bf_interval=1 s, PriorityCalcPeriod=1 min); the
policy takes Slurm's clock from the dump's UnixStartTime as any run does (`BindContext.log_start`:
cons_tres's will-run windows align on Unix time), and its times are multiplied by the scale for the table.

    python benchmarks/slurm_truth.py [--cases gpu_share,gpu_exclusive] [--json] [--units nodes]
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import sys
import warnings
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "slurm_truth"
#: starts this close (trace s) count as "within"
WITHIN_S = 60.0


def pairwise_agreement(a: np.ndarray, b: np.ndarray) -> float:
    """Fraction of pairs i < j with sign(a_i - a_j) == sign(b_i - b_j) (ties agree only with ties).

    a, b: start times of the same jobs in the same order (any unit). Returns 1.0 for fewer than 2 jobs.
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    n = len(a)
    if n < 2:
        return 1.0
    iu = np.triu_indices(n, 1)
    sa = np.sign(np.round(a[:, None] - a[None, :], 6))[iu]
    sb = np.sign(np.round(b[:, None] - b[None, :], 6))[iu]
    return float(np.mean(sa == sb))


def compare(submit: np.ndarray, start_a: np.ndarray, start_b: np.ndarray,
            scale: float = 1.0) -> dict:
    """Metrics of schedule B against schedule A of the same jobs (times in s, multiplied by scale
    to trace s): pairwise, mean waits (trace s), dwait_pct = (wait B / wait A - 1) x 100, within
    (fraction of |start B - start A| <= WITHIN_S trace s)."""
    submit, start_a, start_b = (np.asarray(x, dtype=float) * scale for x in (submit, start_a, start_b))
    wa = float(np.mean(start_a - submit))
    wb = float(np.mean(start_b - submit))
    return {"jobs": int(len(submit)),
            "pairwise": pairwise_agreement(start_a, start_b),
            "wait_a_s": wa, "wait_b_s": wb,
            "dwait_pct": (wb / wa - 1.0) * 100.0 if wa > 0 else math.nan,
            "within": float(np.mean(np.abs(start_b - start_a) <= WITHIN_S + 1e-6))}


def read_real_csv(path: Path) -> dict[str, tuple[float, float]]:
    """replay.py's output CSV -> {trace job id: (submit, start)} in trace s (a requeued job's first
    start)."""
    out = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            requeued = r.get("n_segments") and int(r["n_segments"]) > 1
            out[r["job_id"]] = (float(r["submit"]), float(r["first_start"] if requeued else r["start"]))
    return out


def case_scale(folder: Path, k: int) -> float:
    """Trace s per real s of replay k (real-<k>.meta.json ``scale``)."""
    return float(json.loads((folder / f"real-{k}.meta.json").read_text())["scale"])


def conf_nodes(conf: Path) -> tuple[int, int]:
    """(nodes, CPUs per node) of a slurm.conf's NodeName lines (CPUs from the DEFAULT line or the
    node's own; equal on every node in these cases)."""
    from hpctwin.datasets.hostlist import expand_hostlist  # noqa: PLC0415
    names: list[str] = []
    cpus = {}
    default_cpus = 1
    for line in conf.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line.lower().startswith("nodename="):
            continue
        kv = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
        kv = {k.lower(): v for k, v in kv.items()}
        if kv["nodename"] == "DEFAULT":
            default_cpus = int(kv.get("cpus", default_cpus))
            continue
        for h in expand_hostlist(kv["nodename"]):
            names.append(h)
            cpus[h] = int(kv.get("cpus", default_cpus))
    return len(names), max(cpus.values())


def case_inputs(folder: Path, k: int, units: str, extra: dict | None = None) -> tuple:
    """(workload, scheduler options) of real-<k> of a case, as every tool here gives them to the
    Slurm-like policy: the sacct dump read with ``unit=units`` (requeued runs merged by the reader),
    the dependencies and per-job reservations Slurm got (from real-<k>.csv), slurm.conf, the accounts
    file when the case has one, the advance reservations replay.py created, then ``extra``. Slurm's
    clock comes from the dump's UnixStartTime at bind, as in any run."""
    from hpctwin.datasets.sacct import read_sacct  # noqa: PLC0415
    wl = read_sacct(folder / f"real-{k}.sacct.txt", unit=units)
    options = {"slurm_conf": str(folder / "slurm.conf")}
    if (folder / "accounts.toml").exists():
        options["accounts"] = str(folder / "accounts.toml")
    _add_dependencies(wl, folder / f"real-{k}.csv")
    _add_job_reservations(wl, folder / f"real-{k}.csv")
    resv = reservations(folder / f"real-{k}.resv.txt", float(wl.header["UnixStartTime"]))
    if resv:
        options["reservations"] = resv
    options.update(extra or {})
    return wl, options


def twin_schedule(folder: Path, k: int, units: str = "nodes", extra: dict | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Run the Slurm-like policy on real-<k>.sacct.txt of a case.

    Returns (submit, recorded start, twin start) in real s relative to the earliest submit, ordered
    by Slurm job id, and the run's scheduler_params. ``units``: ``nodes`` (the machine has one unit
    per NodeName node, the sacct dump read with unit=nodes: whole-node jobs of NNodes nodes) or
    ``cpus`` (nodes x CPUs units, the dump read with unit=cpus). ``extra``: more scheduler options.
    """
    from hpctwin.twin.run import RunConfig, run  # noqa: PLC0415
    n, cpn = conf_nodes(folder / "slurm.conf")
    wl, options = case_inputs(folder, k, units, extra)
    # the policy prints what it read (units, priority) on stdout: keep stdout for the table / JSON
    with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("ignore")
        r = run(RunConfig(workload=f"sacct:{folder.name}-real-{k}", scheduler="slurm",
                          nodes=n if units == "nodes" else n * cpn, options={"scheduler": options}),
                workload=wl)
    jobs = r.jobs.set_index("job_id")
    ids = np.asarray(wl.job_id)
    order = np.argsort(ids)
    ids = ids[order]
    submit = np.asarray(wl.submit, dtype=float)[order]
    real = np.asarray(wl.columns["recorded_start"], dtype=float)[order]
    real = _first_starts(folder, k, ids, real, float(wl.header["UnixStartTime"]))
    twin = jobs.loc[ids, "start"].to_numpy(dtype=float)
    if not np.all(np.isfinite(twin)):
        raise SystemExit(f"{folder.name} real-{k}: the twin left {int(np.sum(~np.isfinite(twin)))} jobs unstarted")
    return submit, real, twin, r.summary.get("scheduler_params", {})


def _first_starts(folder: Path, k: int, ids: np.ndarray, real: np.ndarray, t0: float) -> np.ndarray:
    """Recorded starts with a requeued (preempted) job's FIRST start (replay.py's ``first_start``,
    trace s from its t0), as the twin's ``start`` is; real s from ``t0`` (the dump's first submit)."""
    meta = json.loads((folder / f"real-{k}.meta.json").read_text())
    first = {}
    with open(folder / f"real-{k}.csv", newline="") as f:
        for r in csv.DictReader(f):
            if r.get("n_segments") and int(r["n_segments"]) > 1:
                first[r["slurm_job_id"]] = meta["t0_epoch"] + float(r["first_start"]) / meta["scale"] - t0
    if not first:
        return real
    return np.array([first.get(str(int(i)), x) for i, x in zip(ids, real)])


def _add_dependencies(wl, real_csv: Path) -> None:
    """Give the workload the ``dependency`` column Slurm got (replay.py's ``dependency_slurm``, in
    Slurm job ids = the dump's ids): 22.05's sacct has no Dependency field, so the dump lacks it."""
    with open(real_csv, newline="") as f:
        dep = {r["slurm_job_id"]: r.get("dependency_slurm", "") for r in csv.DictReader(f)}
    if not any(dep.values()):
        return
    wl.columns["dependency"] = np.array([dep.get(str(int(i)), "") for i in wl.job_id], dtype=object)


def _add_job_reservations(wl, real_csv: Path) -> None:
    """Give every job the reservation it was submitted with (replay.py's ``reservation``, the trace's
    ``--reservation``): 22.05's sacct leaves Reservation empty for a job that was submitted before its
    reservation started (case resv_end: jobs 1, 3, 4 started in it at its start, their dump rows name
    none), so the dump alone would let them start outside it."""
    with open(real_csv, newline="") as f:
        asked = {r["slurm_job_id"]: r.get("reservation", "") for r in csv.DictReader(f)}
    if not any(asked.values()):
        return
    have = wl.columns.get("reservation")
    col = [str(have[k]) if have is not None and str(have[k]) else asked.get(str(int(i)), "")
           for k, i in enumerate(wl.job_id)]
    wl.columns["reservation"] = np.array(col, dtype=object)


def reservations(resv_txt: Path, t0: float) -> list[dict]:
    """The advance reservations replay.py created (``real-<k>.resv.txt``: ``# trace: NAME ... real:
    epoch A-B`` and the ``scontrol create reservation`` line) as the Slurm-like policy's
    ``reservations`` option, times in s from ``t0`` (the dump's first submit, Unix s)."""
    if not resv_txt.exists():
        return []
    out = []
    for line in resv_txt.read_text().splitlines():
        if not line.startswith("# scontrol create reservation "):
            continue
        kv = dict(tok.split("=", 1) for tok in line.split()[4:] if "=" in tok)
        a = datetime.fromisoformat(kv["StartTime"]).replace(tzinfo=timezone.utc).timestamp()
        b = datetime.fromisoformat(kv["EndTime"]).replace(tzinfo=timezone.utc).timestamp()
        r = {"name": kv["ReservationName"], "start": a - t0, "end": b - t0, "nodes": kv["Nodes"],
             "users": kv.get("Users", "root")}
        if kv.get("Flags"):
            r["flags"] = kv["Flags"]
        out.append(r)
    return out


def replays(folder: Path) -> list[int]:
    """Replay numbers k with a real-<k>.sacct.txt in the case folder."""
    return sorted(int(p.name.split("-")[1].split(".")[0]) for p in folder.glob("real-*.sacct.txt"))


def evaluate_case(folder: Path, units: str = "nodes", extra: dict | None = None) -> dict:
    """All comparisons of one case: {"twin_vs_real-<k>": metrics, "real-1_vs_real-2": metrics}."""
    out: dict = {}
    ks = replays(folder)
    for k in ks:
        submit, real, twin, sp = twin_schedule(folder, k, units, extra)
        out[f"twin_vs_real-{k}"] = compare(submit, real, twin, case_scale(folder, k))
        out[f"twin_vs_real-{k}"]["select"] = str(sp.get("select", ""))
    if len(ks) >= 2:
        out[f"real-{ks[0]}_vs_real-{ks[1]}"] = evaluate_real_pair(folder, ks[0], ks[1])
    return out


def evaluate_real_pair(folder: Path, a: int = 1, b: int = 2) -> dict:
    """Metrics of real-<b> against real-<a> of a case (their CSVs, trace s, jobs matched by trace id)."""
    ra, rb = read_real_csv(folder / f"real-{a}.csv"), read_real_csv(folder / f"real-{b}.csv")
    if set(ra) != set(rb):
        raise SystemExit(f"{folder.name}: real-{a} and real-{b} hold different jobs")
    ids = sorted(ra, key=lambda s: (len(s), s))
    if any(ra[i][0] != rb[i][0] for i in ids):
        raise SystemExit(f"{folder.name}: real-{a} and real-{b} recorded different submit times")
    return compare(np.array([ra[i][0] for i in ids]), np.array([ra[i][1] for i in ids]),
                   np.array([rb[i][1] for i in ids]))


def cases(names: str | None) -> list[Path]:
    """Case folders (those with at least one recorded replay), all or the named ones."""
    found = sorted(p for p in DATA.iterdir() if p.is_dir() and replays(p))
    if not names:
        return found
    want = [s.strip() for s in names.split(",") if s.strip()]
    by = {p.name: p for p in found}
    bad = [w for w in want if w not in by]
    if bad:
        raise SystemExit(f"no recorded case {', '.join(bad)} in {DATA} (have: {', '.join(by) or 'none'})")
    return [by[w] for w in want]


def _set(items: list[str]) -> dict:
    out = {}
    for it in items:
        k, eq, v = it.partition("=")
        if not eq:
            raise SystemExit(f"--set {it!r}: expected KEY=VALUE (a scheduler option)")
        out[k.strip()] = v.strip()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=None, help="comma list of case folders (default: all recorded)")
    ap.add_argument("--units", choices=("nodes", "cpus"), default="nodes",
                    help="machine units of the twin run (default nodes: --nodes = the NodeName nodes, the dump "
                         "read with unit=nodes; under select/cons_tres the Slurm entry's units hook then "
                         "counts CPUs so jobs share nodes, the same run as cpus)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra scheduler option for the twin runs (repeatable)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    a = ap.parse_args(argv)
    res = {p.name: evaluate_case(p, a.units, _set(a.set)) for p in cases(a.cases)}
    if a.json:
        json.dump(res, sys.stdout, indent=1)
        print()
        return 0
    print(f"{'case':<15} {'comparison':<18} {'jobs':>4} {'pairwise':>8} {'wait A':>8} {'wait B':>8} "
          f"{'dwait':>7} {'within60':>8}")
    for case, comps in res.items():
        for name, m in comps.items():
            print(f"{case:<15} {name:<18} {m['jobs']:>4} {100 * m['pairwise']:>7.1f}% {m['wait_a_s']:>8.0f} "
                  f"{m['wait_b_s']:>8.0f} {m['dwait_pct']:>+6.1f}% {100 * m['within']:>7.1f}%")
    print("A = the real run named first, B = the second (twin or real-2); waits in trace s; "
          "within60: |start B - start A| <= 60 trace s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
