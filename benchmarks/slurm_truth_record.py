"""Record one real-Slurm 22.05 replay of a ground-truth case into tests/data/slurm_truth/<case>/.

Needs root, Debian's Slurm 22.05 with slurmdbd (``slurm_ctl.sh install --dbd``) and the slurm-lab kit
(default /work/shared/slurm-lab). For one case and replay number it:

1. writes the case's trace (benchmarks/slurm_truth_traces.py) to <case>/trace.csv (or checks that the
   stored one is the same),
2. starts a fresh emulated cluster under ``nice -n -10`` (``slurm_ctl.sh start`` with the case's
   template, gres.conf and sacctmgr script, slurmdbd, multifactor priority: see START_OPTS),
3. runs the lab's replay.py under ``nice -n -10`` at ``--scale`` (default 60), with trace time 0
   aligned to a priority recalculation tick, through a thin wrapper that
   * drops ``--exclusive`` from the sbatch commands unless the case is exclusive (replay.py of the
     lab appends it to every job although its help says sharing happens without it), and
   * adds ``--mem=<mem_mb>`` where the trace has a ``mem_mb`` column (case gpu_mem),
   * creates the case's reservation for its users (slurm_truth_traces.RESVS; replay.py writes
     ``Users=root``), and for cases with a reservation adds ResvOverRun, KillWait and OverTimeLimit
     to real-<N>.meta.json and writes real-<N>.resvlog.txt (slurmctld log lines on reservations,
     time limits and job ends, with their trace time),
4. checks that Slurm's recorded submit second of every job is its target second, that the
   submit lag was below 0.2 s (fails otherwise: use a gentler --scale) and that every job
   COMPLETED, except in case resv_end a job of the reservation that was still running at its end
   (state TIMEOUT, CANCELLED or DEADLINE, ended at or after the reservation's end),
5. copies into the case folder: real-<N>.csv, real-<N>.sacct.txt, real-<N>.meta.json (+ .resv.txt,
   .resvlog.txt),
   slurm.conf and gres.conf (the run directory replaced by /RUN), sacctmgr.txt,
6. stops the daemons (``slurm_ctl.sh stop``), also on failure.

    sudo python benchmarks/slurm_truth_record.py gpu_share --rep 1 [--scale 60]
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = REPO / "tests" / "data" / "slurm_truth"
LAB = Path(os.environ.get("SLURM_LAB", "/work/shared/slurm-lab"))
RUN_DIR = Path(os.environ.get("REPLAY_RUN_DIR", "/tmp/slurm_truth_run"))
NEUTRAL_RUN = "/RUN"
#: slurm_ctl.sh start options of every case (multifactor priority with age, job size, partition and
#: QOS weights; slurmdbd so that age counts and QOS limits are enforced; Slurm's default
#: conservative backfill: a reservation for every pending job)
START_OPTS = ["--nodes", "12", "--select", "cons_tres", "--mode", "conservative",
              "--priority", "multifactor", "--accounting", "dbd",
              "--prio", "PriorityWeightAge=1000", "--prio", "PriorityMaxAge=10",
              "--prio", "PriorityWeightJobSize=200", "--prio", "PriorityWeightPartition=1000",
              "--prio", "PriorityWeightQOS=1000", "--prio", "PriorityCalcPeriod=1"]
#: a priority recalculation tick in slurmctld's log (DebugFlags=Priority, Fair Tree): trace time 0 is
#: put on that 60 s grid, as the twin's PriorityCalcPeriod grid starts at the first submit
ALIGN = ["--align-log-regex", r"_ft_debug: +root \(root\)", "--align-period", "60"]
#: per case: slurm.conf template edits (sed-like (old, new) pairs on gpu.conf.in), exclusive, extra args
CASES = {
    "gpu_share": {"exclusive": False},
    "gpu_exclusive": {"exclusive": True, "trace_case": "gpu_share"},
    "gpu_mem": {"exclusive": False,
                "template_edits": [("SelectTypeParameters=CR_Core\n", "SelectTypeParameters=CR_Core_Memory\n")]},
    "deps_resv": {"exclusive": False, "resv": True,
                  "template_edits": [("MinJobAge=2\n", "MinJobAge=900\n")]},
    "preempt": {"exclusive": False, "template": "prio.conf.in", "sacctmgr": "prio.sacctmgr"},
    # jobs killed at the reservation's end are expected here (not_completed > 0); a job still pending
    # in the reservation at its end would never start: give up 15 real minutes after the last submit
    "resv_end": {"exclusive": False, "resv": True, "killed_at_resv_end": True, "timeout": 900},
}
MAX_LAG_S = 0.2
#: the states a job of the reservation may end in when it still ran at the reservation's end
RESV_END_STATES = ("TIMEOUT", "CANCELLED", "DEADLINE")


def _sh(cmd: list[str], env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run a command (output shown), raising SystemExit with its name when it fails and check is set."""
    r = subprocess.run(cmd, env=env)
    if check and r.returncode != 0:
        raise SystemExit(f"failed (rc {r.returncode}): {' '.join(cmd)}")
    return r


def _template(case: str, spec: dict) -> Path:
    """The slurm.conf template of a case: gpu.conf.in with the case's edits, in the run dir's parent."""
    text = (LAB / "conf" / spec.get("template", "gpu.conf.in")).read_text()
    for old, new in spec.get("template_edits", []):
        if old not in text:
            raise SystemExit(f"{spec.get('template', 'gpu.conf.in')} has no {old.strip()!r} to replace "
                             f"for case {case}")
        text = text.replace(old, new)
    path = RUN_DIR.parent / f"slurm_truth_{case}.conf.in"
    path.write_text(text)
    return path


def _trace(case: str, spec: dict, folder: Path) -> Path:
    """Write (or check) the case's trace.csv; returns its path."""
    sys.path.insert(0, str(HERE))
    import slurm_truth_traces as T  # noqa: PLC0415
    jobs = T.CASES[spec.get("trace_case", case)]()
    tmp = RUN_DIR.parent / f"slurm_truth_{case}.trace.csv"
    T.write_trace(jobs, tmp)
    dest = folder / "trace.csv"
    if dest.exists() and dest.read_bytes() != tmp.read_bytes():
        raise SystemExit(f"{dest} differs from what slurm_truth_traces.py generates now; remove the "
                         "case folder to re-record it from scratch")
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tmp, dest)
    return dest


def replay_wrapper(argv: list[str]) -> int:
    """Run the lab's replay.py main() with sbatch commands adjusted (see the module docstring).

    argv: ``EXCLUSIVE(0|1) RESV_USERS TRACE REPLAY_ARGS...`` (RESV_USERS: the ``Users=`` of the
    reservations replay.py creates, e.g. ``daemon,bin``; ``root`` keeps replay.py's).
    """
    exclusive = argv[0] == "1"
    resv_users = argv[1]
    argv = [argv[0], *argv[2:]]
    trace = argv[1]
    with open(trace, newline="") as f:
        mem = {r["job_id"].strip(): (r.get("mem_mb") or "").strip() for r in csv.DictReader(f)}
    sys.path.insert(0, str(LAB))
    import replay  # noqa: PLC0415
    orig = replay.run

    def run(cmd, **kw):
        if cmd[:3] == ["scontrol", "create", "reservation"] and "Users=root" in cmd:
            # in place: replay.py logs (and writes to .resv.txt) the list it built
            cmd[cmd.index("Users=root")] = f"Users={resv_users}"
        if "sbatch" in cmd:
            cmd = [c for c in cmd if exclusive or c != "--exclusive"]
            name = cmd[cmd.index("-J") + 1]
            if mem.get(name):
                cmd.insert(cmd.index("-J"), f"--mem={mem[name]}")
        return orig(cmd, **kw)
    replay.run = run
    rc = replay.main([trace, *argv[2:]])
    out = Path(argv[argv.index("--out") + 1])
    meta_path = out.with_suffix(".meta.json")
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        meta["exclusive"] = exclusive
        meta["mem_per_node"] = any(mem.values())
        if meta.get("resv"):
            cfg = replay.scontrol_config()
            for k in ("ResvOverRun", "KillWait", "OverTimeLimit"):
                meta[k] = cfg.get(k)
            meta["resv_users"] = resv_users
            write_resv_log(Path(cfg["SlurmctldLogFile"]), out.with_suffix(".resvlog.txt"),
                           meta["t0_epoch"], meta["scale"])
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    return rc


#: slurmctld log lines kept in real-<N>.resvlog.txt
RESV_LOG_PATTERN = r"[Rr]eserv|resv|time limit|TIMEOUT|[Tt]imelimit|_job_complete|kill|[Cc]ancel|purg"


def write_resv_log(logfile: Path, dest: Path, t0: int, scale: float) -> int:
    """Copy slurmctld log lines matching RESV_LOG_PATTERN into dest, each prefixed ``t=<trace s>``
    (its timestamp - t0, Unix s, times scale); returns the number of lines written."""
    import re  # noqa: PLC0415
    pat = re.compile(RESV_LOG_PATTERN)
    stamp = re.compile(r"\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)\]")
    from datetime import datetime  # noqa: PLC0415
    n = 0
    with open(logfile, errors="replace") as f, open(dest, "w") as g:
        g.write(f"# slurmctld log lines matching /{RESV_LOG_PATTERN}/; t = (epoch - {t0}) * {scale:g} trace s\n")
        for line in f:
            if not pat.search(line):
                continue
            m = stamp.match(line)
            tt = f"t={(datetime.fromisoformat(m.group(1)).timestamp() - t0) * scale:g} " if m else ""
            g.write(tt + line)
            n += 1
    return n


def check_submits(real_csv: Path, scale: float) -> list[str]:
    """Jobs whose recorded Slurm submit second is not their target second (trace submit / scale)."""
    bad = []
    with open(real_csv, newline="") as f:
        for r in csv.DictReader(f):
            # replay.py's trace -> real conversion: real_submit is Slurm's second minus t0
            if r["real_submit"] == "":
                bad.append(f"job {r['job_id']}: no submit record")
                continue
            want = float(r["submit"]) / scale if r["submit"] != "" else None
            if want is None or abs(float(r["real_submit"]) - round(want)) > 1e-9:
                bad.append(f"job {r['job_id']}: Slurm submit {r['real_submit']} s, target {want} s")
    return bad


def killed_at_resv_end(real_csv: Path, resv_end_s: float) -> tuple[list[str], list[str]]:
    """(jobs of the reservation that ended at or after its end, trace s, in a RESV_END_STATES state;
    every other job not COMPLETED, as ``job <id>: <why>``) of a replay's CSV."""
    killed, bad = [], []
    with open(real_csv, newline="") as f:
        for r in csv.DictReader(f):
            if r["state"] == "COMPLETED":
                continue
            ok = (r["reservation"] and r["state"] in RESV_END_STATES and r["end"] != ""
                  and float(r["end"]) >= resv_end_s)
            (killed if ok else bad).append(r["job_id"] if ok else
                                           f"job {r['job_id']}: state {r['state'] or 'none'}, end {r['end'] or 'none'}"
                                           f" (reservation {r['reservation'] or 'none'})")
    return killed, bad


def record(case: str, rep: int, scale: float) -> int:
    """Start a cluster, replay the case, store the results, stop the cluster (see module docstring)."""
    spec = CASES[case]
    folder = DATA / case
    trace = _trace(case, spec, folder)
    RUN_DIR.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, REPLAY_RUN_DIR=str(RUN_DIR), REPLAY_TEMPLATE=str(_template(case, spec)),
               REPLAY_GRES=str(LAB / "conf" / "gpu.gres.conf"),
               REPLAY_SACCTMGR=str(LAB / "conf" / spec.get("sacctmgr", "gpu.sacctmgr")))
    ctl = str(LAB / "slurm_ctl.sh")
    out = RUN_DIR.parent / f"slurm_truth_out_{case}" / f"real-{rep}.csv"
    if out.parent.exists():
        shutil.rmtree(out.parent)
    out.parent.mkdir(parents=True)
    _sh(["nice", "-n", "-10", ctl, "start", *START_OPTS], env=env)
    try:
        env["SLURM_CONF"] = str(RUN_DIR / "slurm.conf")
        resv, users = _resv(case)
        args = ["nice", "-n", "-10", sys.executable, __file__, "_replay", "1" if spec["exclusive"] else "0",
                users, str(trace), "--scale", f"{scale:g}", "--out", str(out), *ALIGN]
        if resv:
            args += ["--resv", resv]
        if spec.get("timeout"):
            args += ["--timeout", str(spec["timeout"])]
        _sh(args, env=env, check=False)
        sacct_cmds = (RUN_DIR / "sacctmgr-commands.txt").read_text()
        conf = (RUN_DIR / "slurm.conf").read_text().replace(str(RUN_DIR), NEUTRAL_RUN)
        gres = (RUN_DIR / "gres.conf").read_text().replace(str(RUN_DIR), NEUTRAL_RUN)
    finally:
        _sh([ctl, "stop"], env=env, check=False)
    meta = json.loads(out.with_suffix(".meta.json").read_text())
    bad = check_submits(out, scale)
    lag = meta.get("submit_lag_max_s")
    print(f"{case} rep {rep}: submit lag max {lag} s, mean {meta.get('submit_lag_mean_s')} s; "
          f"{len(bad)} jobs off their target second; {meta.get('not_completed')} not COMPLETED")
    not_completed = meta.get("not_completed")
    if spec.get("killed_at_resv_end"):
        _, st, du, *_ = _resv(case)[0].split(":")
        killed, wrong = killed_at_resv_end(out, float(st) + float(du))
        print(f"  killed at the reservation's end ({float(st) + float(du):g} trace s): jobs {', '.join(killed) or 'none'}")
        bad += wrong
        not_completed = len(wrong)
    for b in bad[:10]:
        print("  " + b)
    if bad or lag is None or lag > MAX_LAG_S or not_completed:
        print(f"NOT STORED: results kept in {out.parent}; re-run (or use a gentler --scale)")
        return 1
    stem = f"real-{rep}"
    for suffix in (".csv", ".sacct.txt", ".meta.json", ".resv.txt", ".resvlog.txt") + ((".preempt.txt",) if case == "preempt" else ()):
        src = out.with_name(stem + suffix)
        if src.exists():
            text = src.read_text().replace(str(RUN_DIR), NEUTRAL_RUN)
            (folder / (stem + suffix)).write_text(text)
    (folder / "slurm.conf").write_text(conf)
    (folder / "gres.conf").write_text(gres)
    (folder / "sacctmgr.txt").write_text(sacct_cmds)
    print(f"stored in {folder}")
    return 0


CASE_TEXT = {
    "gpu_share": "80 jobs of 5 users (1-3 nodes, 1-8 cores and 0-4 GPUs per node, partitions gpu / cpu / "
                 "short, QOS normal / high), submitted without `--exclusive`: select/cons_tres shares "
                 "nodes by cores and GPUs.",
    "gpu_exclusive": "the gpu_share trace with every job `--exclusive` (whole nodes: only partitions, "
                     "tiers, QOS limits and priority matter).",
    "gpu_mem": "the gpu_share jobs with `--mem=<mem_mb>` per node under `CR_Core_Memory` (RealMemory=1000).",
    "deps_resv": "40 jobs, 10 with afterok/afterany dependencies, and a MAINT reservation (replay.py "
                 "`--resv`) on n[001-004]; MinJobAge=900 so that parents stay known to slurmctld. "
                 "Slurm 22.05's sacct has no Dependency field: the dependencies Slurm got are in "
                 "real-<k>.csv (`dependency`: trace ids, `dependency_slurm`: Slurm ids = the dump's), the "
                 "reservation's commands and real times in real-<k>.resv.txt; benchmarks/slurm_truth.py "
                 "gives both to the twin.",
    "preempt": "60 jobs of the gpu_share mix on the lab's `conf/prio.conf.in` (PreemptType=preempt/"
               "partition_prio, PreemptMode=REQUEUE): jobs of partition urgent (PriorityTier 10) requeue "
               "gpu / cpu jobs; sacct rows per segment (`-D`).",
    "resv_end": "a user reservation `userres` (Users=daemon,bin; n[001-004]; trace 600-7800 s; no flags; "
                "ResvOverRun 0, the default; replay.py creates it for Users=root, the recorder substitutes the users) "
                "created before the first submission, 6 jobs submitted into it "
                "with `--reservation=userres` (4 of them with runtimes and limits past its end) and 24 jobs "
                "outside it on partitions gpu / short competing for the GPU nodes. What Slurm did to the jobs "
                "still running at the reservation's end is in real-<k>.csv (`state`, `end`), real-<k>.sacct.txt "
                "(State, End) and the controller's log lines in real-<k>.resvlog.txt; the recorder accepted "
                "a reservation job that was not COMPLETED only if it ended at or after the reservation's end "
                "in state TIMEOUT, CANCELLED or DEADLINE.",
}

#: what the replays of a case showed (README section "What Slurm did"), where there is more to say
CASE_FINDINGS = {
    "resv_end": "In both replays the reservation ended at t0 + 130 real s (7800 trace s), and the jobs still "
                "running in it (1, 4, 29) were not stopped then but 20 real s later, at t0 + 150 s (9000 trace "
                "s): slurmctld logged `Reservation ended for JobId=<id>` and they ended in state TIMEOUT (End "
                "= that second; ResvOverRun = 0). That is consistent with slurmctld's periodic time-limit "
                "check (every 30 real s, PERIODIC_TIMEOUT), not a timer at the reservation's end. Job 12 "
                "(in the reservation, runtime to 8400 trace s) ran past the end and COMPLETED before the "
                "check; jobs 3 and 24 COMPLETED inside it. Slurm started every job of the reservation "
                "although its time limit reached past the end (job 29: submitted 20 trace min before the "
                "end with a 1 h limit). No job outside the reservation ran on n[001-004] before the kill "
                "second; the first ones (16, 19) started there at it (replay 2's controller log, not stored, showed "
                "the backfill planning outside jobs 7 and 9 on n004 from one second after the reservation's "
                "end: it expected the reservation's jobs to end with it). sacct's "
                "`Reservation` is empty for jobs 1, 3 and 4 (submitted before the reservation started) "
                "and `userres` for 12, 24 and 29: the trace's reservation of every job is in real-<k>.csv "
                "(`reservation`). The two replays started every job at the same second.",
}


def write_readme(case: str) -> Path:
    """(Re)write <case>/README.md from the stored meta files: how the case was made."""
    folder = DATA / case
    metas = {p.name.split(".")[0]: json.loads(p.read_text()) for p in sorted(folder.glob("real-*.meta.json"))}
    if not metas:
        raise SystemExit(f"{folder}: no real-*.meta.json; record a replay first")
    m0 = next(iter(metas.values()))
    spec = CASES[case]
    lines = [f"# Real Slurm ground truth: `{case}`", "",
             f"{CASE_TEXT[case]}", "",
             f"Recorded with {m0.get('slurm', 'Slurm')} (Debian bookworm packages) on one host: 12 emulated "
             f"nodes (slurm-lab `conf/{spec.get('template', 'gpu.conf.in')}`"
             + (" with " + ", ".join(f"`{o.strip()}` -> `{n.strip()}`" for o, n in spec["template_edits"])
                if spec.get("template_edits") else "")
             + "; n001-n008 with 4 GPUs (fake device files), 8 cores each), slurmdbd, multifactor priority.",
             "",
             "## Files", "",
             "| file | what |", "|---|---|",
             "| `trace.csv` | the job trace (trace seconds), `python benchmarks/slurm_truth_traces.py --case "
             f"{spec.get('trace_case', case)} --out trace.csv` |",
             "| `slurm.conf`, `gres.conf` | as rendered by `slurm_ctl.sh start` (the run directory written `/RUN`) |",
             "| `sacctmgr.txt` | the `sacctmgr -i` commands run before slurmctld started (QOS limits, users) |",
             "| `accounts.toml` | the same QOS limits for `--scheduler slurm` (`accounts=` option) |",
             "| `real-<k>.csv` | replay.py's output: per trace job submit/start/end (trace s), Slurm id, nodes, AllocTRES |",
             "| `real-<k>.sacct.txt` | `sacct -P -X -D -a` of the replay (real times, 1 s resolution) |",
             "| `real-<k>.meta.json` | replay settings, Slurm version, submit lag |",
             *(["| `real-<k>.resv.txt` | the `scontrol create reservation` command, its real times and "
                "`scontrol show reservation` right after |"] if case == "resv_end" else []),
             *(["| `real-<k>.resvlog.txt` | slurmctld log lines on reservations, time limits, kills and job "
                "ends (`t=` trace s) |"] if case == "resv_end" else []),
             "", "## How", "",
             "    sudo python benchmarks/slurm_truth_record.py " + case + " --rep K   # K = 1, 2",
             "",
             "which runs (see that script's docstring), with `REPLAY_RUN_DIR=/tmp/slurm_truth_run`:",
             "",
             "    nice -n -10 slurm_ctl.sh start " + " ".join(START_OPTS),
             "    nice -n -10 python3 replay.py trace.csv --scale 60 --out real-K.csv "
             + " ".join(f"'{x}'" if " " in x or "\\" in x else x for x in ALIGN)
             + (" --resv " + _resv(case)[0] if spec.get("resv") else "")
             + (f" --timeout {spec['timeout']}" if spec.get("timeout") else ""),
             "    slurm_ctl.sh stop", "",
             "Each job was submitted at t0 + submit_s / 60 (real s) as its Unix user with",
             "",
             "    runuser -u USER -- sbatch -p PART --qos QOS -N NODES --ntasks-per-node CORES "
             "[--gpus-per-node G] " + ("--exclusive " if spec["exclusive"] else "")
             + ("[--mem MB] " if case == "gpu_mem" else "")
             + ("[--dependency=KIND:SLURMID] " if case == "deps_resv" else "")
             + (f"[--reservation={_resv(case)[0].split(':')[0]}] " if case == "resv_end" else "")
             + "-t WALLTIME_S/3600 -J ID -D /tmp -o /dev/null --wrap '<sleep until Slurm's StartTime + runtime>'",
             "",
             ("Every job was `--exclusive`." if spec["exclusive"] else
              "The lab's replay.py appends `--exclusive` to every sbatch; the recording wrapper drops it "
              "(the jobs share nodes)."),
             "", "## Replays", "",
             "| replay | t0 (epoch) | scale | submit lag mean / max (s) | not completed |", "|---|---|---|---|---|"]
    for name, m in metas.items():
        lines.append(f"| {name} | {m.get('t0_epoch')} | {m.get('scale'):g} | {m.get('submit_lag_mean_s')} / "
                     f"{m.get('submit_lag_max_s')} | {m.get('not_completed')} |")
    lines += ["", "Every job's Slurm Submit second equals its target (trace submit / scale); lag below "
              f"{MAX_LAG_S} s was required. Daemons and replay ran under `nice -n -10` on a shared 2-core machine.",
              ""]
    if len(metas) >= 2:
        sys.path.insert(0, str(HERE))
        import slurm_truth as B  # noqa: PLC0415
        m = B.evaluate_real_pair(folder)
        lines += ["Real Slurm against itself (real-1 vs real-2, the same trace): "
                  f"pairwise start order {100 * m['pairwise']:.1f} %, mean wait {m['wait_a_s']:.0f} vs "
                  f"{m['wait_b_s']:.0f} trace s ({m['dwait_pct']:+.1f} %), starts within 60 trace s "
                  f"{100 * m['within']:.1f} %.", ""]
    if case in CASE_FINDINGS:
        lines += ["## What Slurm did", "", CASE_FINDINGS[case], ""]
    lines += ["Figures (twin vs real, real vs real): `python benchmarks/slurm_truth.py --cases " + case + "`.", ""]
    path = folder / "README.md"
    path.write_text("\n".join(lines))
    return path


def _resv(case: str) -> tuple[str, str]:
    """(replay.py ``--resv`` spec or "", the reservation's Users=) of a case (slurm_truth_traces.RESVS)."""
    sys.path.insert(0, str(HERE))
    import slurm_truth_traces as T  # noqa: PLC0415
    return T.RESVS.get(CASES[case].get("trace_case", case), ("", "root"))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_replay":
        return replay_wrapper(argv[1:])
    if argv and argv[0] == "readme":
        for case in argv[1:]:
            print(write_readme(case))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--rep", type=int, default=1, help="replay number: writes real-<rep>.* (default 1)")
    ap.add_argument("--scale", type=float, default=60.0, help="trace seconds per real second (default 60)")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("needs root (nice -n -10, runuser, the daemons)")
    return record(a.case, a.rep, a.scale)


if __name__ == "__main__":
    raise SystemExit(main())
