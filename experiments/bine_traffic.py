"""What-if: does Bine cut global-link traffic on real job allocations?

The Bine paper (De Sensi et al., SC'25, arXiv:2508.17311) claims Bine trees cut global-link traffic
(up to 33%) because job allocations are not aligned to Dragonfly groups.  This script measures it on
real allocations: 2,215 Leonardo jobs and 8,157 LUMI jobs (HLC-Lab/pico ``tracer/sinfo``, read in
place from ``Bine-allocations/`` of the shared data sets), one rank per node in the allocation's node
order.  For every job and collective it counts the bytes each Bine algorithm and its classic
counterpart (same structure, see ``topology.collectives.PAIRS``) send between different groups, in
units of the collective's reference buffer n (see ``topology.collectives.schedule``).

Conventions printed with every table:
* groups: Leonardo = Dragonfly+ cell of the node (``leonardo-node-map.txt.gz``); LUMI = cabinet
  (Dragonfly group) from the nid ranges of HLC-Lab/pico ``tracer/trace_communications.py``
  ``lumi_node_to_cell``;
* jobs with fewer than 2 nodes, or with non-compute host names (``viz*``), are skipped;
* algorithms that need a power of two use the first 2^floor(log2 N) nodes (column ``ranks``);
  allreduce algorithms fold the extra ranks and use all N nodes;
* reduction = 100 * (classic - Bine) / classic global bytes, over jobs whose classic algorithm sends
  global traffic (single-group jobs send none with either algorithm); size buckets are powers of two
  of the node count N (bucket b holds b <= N < 2b).

Outputs in ``--out``: ``results.csv`` / ``results.md`` / ``results.tex`` (median and mean reduction
and the share of jobs where Bine sends more, by system, collective pair and size bucket),
``traffic_per_job.csv``, ``reduction_boxplot.png``, ``alpha_beta.csv``/``.md`` (modelled times for
p = 2 ... 4,096) and, if ``topology.presets`` is available, ``link_load.csv``/``.md``. ``--out`` is checked
before the data are read and written atomically: it must not exist, be empty, or be a folder hpctwin
wrote, replaced only with ``--force``.

Other allocations: ``--jobs-csv RUN_DIR/jobs.csv --group-map FILE`` reads a twin run's ``nodes``
column (compact ranges such as ``0-3,8,10-11``) and a node -> group file (``node group`` per line, or
a CSV with columns ``node,group``); :func:`traffic_by_job` takes (list of node-id arrays, node ->
group array) directly.
"""
from __future__ import annotations

import gzip
import os
import re
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from hpctwin.topology.collectives import PAIRS, AlphaBetaGamma, build_schedule, global_bytes, link_loads, supports
from hpctwin.topology.collectives.algorithms import ALGORITHMS

from . import cli
from .tables import staged_output, write_table_files

__all__ = ["traffic_by_job", "summarize", "default_data_dir", "load_leonardo", "load_lumi", "parse_compact_ranges",
           "load_group_map", "load_jobs_csv", "alpha_beta_table", "main"]

# LUMI nid -> cabinet (Dragonfly group) ranges: HLC-Lab/pico tracer/trace_communications.py
# (lumi_node_to_cell, commit 133f2e8): LUMI-C cabinets 1000-1007 hold 256 nids each from nid001000;
# LUMI-G cabinets 1100-1105, 1200-1205, 1300-1305, 1400-1405 hold 124 nids each (123 in the first,
# 126 in the last) from nid005001.
_LUMI_RANGES: list[tuple[int, int, int]] = (
    [(1000 + 256 * i, 1255 + 256 * i, 1000 + i) for i in range(8)]
    + [(5001, 5123, 1100)]
    + [(5124 + 124 * i, 5247 + 124 * i, c)
       for i, c in enumerate([1101, 1102, 1103, 1104, 1105, 1200, 1201, 1202, 1203, 1204, 1205,
                              1300, 1301, 1302, 1303, 1304, 1305, 1400, 1401, 1402, 1403, 1404])]
    + [(7852, 7977, 1405)]
)

#: default alpha-beta-gamma constants (overridable on the command line)
ALPHA_S = 2.0e-6        # s per message: inter-node MPI latency ~2 us on Slingshot-11 / IB HDR
                        # (De Sensi et al., "An In-Depth Analysis of the Slingshot Interconnect", SC'20)
BETA_S_PER_B = 1 / 25e9  # s per byte: 200 Gb/s = 25 GB/s links (Slingshot-11 on LUMI, HDR on Leonardo)
GAMMA_S_PER_B = 1 / 10e9  # s per byte reduced: ASSUMED ~10 GB/s single-core memory-bound sum; not measured

SIZE_BUCKETS = [2 ** k for k in range(1, 12)]        # 2, 4, ..., 2048 (2048 = ">= 2048")


# ------------------------------------------------------------------------------------------ data
def default_data_dir() -> Path:
    """``$HPCTWIN_DATA/Bine-allocations`` or ``../shared/datasets/Bine-allocations`` next to the repo."""
    env = os.environ.get("HPCTWIN_DATA")
    base = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "datasets"
    return base / "Bine-allocations"


def _read_tar_lists(path: Path, pattern: str) -> tuple[list[str], list[np.ndarray], int]:
    """(job ids, node-id arrays, skipped jobs) from a tar.gz of one-hostname-per-line files."""
    rx = re.compile(pattern)
    ids, allocs, skipped = [], [], 0
    with tarfile.open(path, "r:gz") as tar:
        members = []
        for mem in tar:                      # archive order: one sequential pass over the gzip stream
            if mem.isfile():
                members.append((mem.name, tar.extractfile(mem).read()))
        for name, raw in sorted(members):
            text = raw.decode("ascii", errors="replace")
            names = [ln.strip() for ln in text.splitlines() if ln.strip()]
            nodes = []
            ok = True
            for ln in names:
                mm = rx.fullmatch(ln)
                if mm is None:
                    ok = False            # e.g. viz nodes: not compute nodes of the map
                    break
                nodes.append(int(mm.group(1)))
            if not ok:
                skipped += 1
                continue
            ids.append(Path(name).stem)
            allocs.append(np.asarray(nodes, dtype=np.int64))
    return ids, allocs, skipped


def load_leonardo(data_dir: Path) -> tuple[list[str], list[np.ndarray], np.ndarray, int]:
    """Leonardo jobs: (job ids, node-id arrays, node -> cell array (-1 unknown), skipped jobs)."""
    map_path = data_dir / "leonardo-node-map.txt.gz"
    node_cell: dict[int, int] = {}
    with gzip.open(map_path, "rt") as fh:
        for lineno, line in enumerate(fh, 1):
            parts = line.split()
            if not parts:
                continue
            try:
                node_cell[int(parts[parts.index("NODE") + 1])] = int(parts[parts.index("CELL") + 1])
            except (ValueError, IndexError) as exc:
                raise ValueError(f"{map_path}:{lineno}: expected 'NODE n ... CELL c ...', "
                                 f"got {line.strip()!r}") from exc
    groups = np.full(max(node_cell) + 1, -1, dtype=np.int64)
    groups[list(node_cell)] = list(node_cell.values())
    ids, allocs, skipped = _read_tar_lists(data_dir / "leonardo-allocations.tar.gz", r"lrdn(\d+)")
    return ids, allocs, groups, skipped


def load_lumi(data_dir: Path) -> tuple[list[str], list[np.ndarray], np.ndarray, int]:
    """LUMI jobs: (job ids, nid arrays, nid -> cabinet array (-1 unknown), skipped jobs)."""
    groups = np.full(_LUMI_RANGES[-1][1] + 1, -1, dtype=np.int64)
    for lo, hi, cab in _LUMI_RANGES:
        groups[lo:hi + 1] = cab
    ids, allocs, skipped = _read_tar_lists(data_dir / "lumi-allocations.tar.gz", r"nid(\d+)")
    return ids, allocs, groups, skipped


def parse_compact_ranges(text: str) -> np.ndarray:
    """'0-3,8,10-11' -> array([0,1,2,3,8,10,11]) (order kept); ValueError naming the bad token."""
    out: list[int] = []
    for tok in str(text).replace(" ", "").split(","):
        if not tok:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", tok)
        if m is None:
            raise ValueError(f"bad node range {tok!r} in {text!r}; expected N or N-M")
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) is not None else a
        if b < a:
            raise ValueError(f"bad node range {tok!r} in {text!r}: end before start")
        out.extend(range(a, b + 1))
    return np.asarray(out, dtype=np.int64)


def load_group_map(path: Path) -> np.ndarray:
    """node -> group array from a file of 'node group' lines (or CSV with columns node,group)."""
    pairs: list[tuple[int, int]] = []
    with open(path) as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.split("#", 1)[0].strip()
            if not line or line.lower().replace(" ", "") in ("node,group", "nodegroup"):
                continue
            parts = re.split(r"[,\s]+", line)
            if len(parts) != 2:
                raise ValueError(f"{path}:{lineno}: expected 'node group', got {line!r}")
            try:
                pairs.append((int(parts[0]), int(parts[1])))
            except ValueError as exc:
                raise ValueError(f"{path}:{lineno}: node and group must be integers, got {line!r}") from exc
    if not pairs:
        raise ValueError(f"{path}: no 'node group' lines")
    arr = np.full(max(n for n, _ in pairs) + 1, -1, dtype=np.int64)
    for n, g in pairs:
        arr[n] = g
    return arr


def load_jobs_csv(path: Path) -> tuple[list[str], list[np.ndarray]]:
    """Job ids and node arrays from a twin run's jobs.csv (``nodes`` column of compact ranges)."""
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    if "nodes" not in df.columns:
        raise ValueError(f"{path}: no 'nodes' column (columns: {', '.join(df.columns)})")
    idcol = "job" if "job" in df.columns else ("id" if "id" in df.columns else None)
    ids, allocs = [], []
    for i, row in df.iterrows():
        try:
            nodes = parse_compact_ranges(row["nodes"])
        except ValueError as exc:
            raise ValueError(f"{path}: row {i + 2}, field 'nodes': {exc}") from exc
        ids.append(row[idcol] if idcol else str(i))
        allocs.append(nodes)
    return ids, allocs


# ------------------------------------------------------------------------------------------ core
def _largest_pow2(n: int) -> int:
    return 1 << (int(n).bit_length() - 1)


def _bucket(n: int) -> int:
    return min(_largest_pow2(n), SIZE_BUCKETS[-1])


def traffic_by_job(allocations: list[np.ndarray], node_group: np.ndarray, job_ids: list[str] | None = None,
                   system: str = "", pairs: dict[str, list[tuple[str, str]]] | None = None) -> pd.DataFrame:
    """Global bytes of Bine vs classic for every job and collective pair.

    ``allocations[j]``: node ids of job j in rank order (one rank per node); ``node_group[node]``:
    group id (negative = unknown).  Returns one row per (job, collective, pair) with columns system,
    job, nodes, ranks, groups, collective, bine, classic, bine_global, classic_global (units of the
    reference buffer n), reduction_pct (NaN when the classic algorithm sends no global traffic) and
    bine_more.  Jobs with < 2 nodes are skipped; a node without a group is a ValueError.
    """
    pairs = PAIRS if pairs is None else pairs
    node_group = np.asarray(node_group)
    job_ids = [str(i) for i in range(len(allocations))] if job_ids is None else job_ids
    cache: dict = {}

    def sched(c: str, a: str, p: int):
        key = (c, a, p)
        s = cache.get(key)
        if s is None:
            s = build_schedule(c, a, p)
            cache[key] = s
        return s

    rows = []
    for jid, nodes in zip(job_ids, allocations):
        nodes = np.asarray(nodes, dtype=np.int64)
        n = nodes.size
        if n < 2:
            continue
        if nodes.min() < 0 or nodes.max() >= node_group.size or np.any(node_group[nodes] < 0):
            bad = nodes[(nodes < 0) | (nodes >= node_group.size)]
            bad = bad if bad.size else nodes[node_group[nodes] < 0]
            raise ValueError(f"job {jid}: node {int(bad[0])} has no group in the node -> group map")
        grp_all = node_group[nodes]
        for coll, plist in pairs.items():
            for bine, classic in plist:
                p = n if (supports(coll, bine, n) and supports(coll, classic, n)) else _largest_pow2(n)
                g = grp_all[:p]
                bg = global_bytes(sched(coll, bine, p), g)
                cg = global_bytes(sched(coll, classic, p), g)
                rows.append((system, jid, n, p, int(np.unique(g).size), coll, bine, classic, bg, cg))
    df = pd.DataFrame(rows, columns=["system", "job", "nodes", "ranks", "groups", "collective", "bine", "classic",
                                     "bine_global", "classic_global"])
    with np.errstate(divide="ignore", invalid="ignore"):
        red = 100.0 * (df["classic_global"] - df["bine_global"]) / df["classic_global"]
    df["reduction_pct"] = red.where(df["classic_global"] > 0)
    df["bine_more"] = df["bine_global"] > df["classic_global"] * (1 + 1e-12)
    df["bucket"] = [_bucket(n) for n in df["nodes"]]
    return df


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Median/mean reduction and share of jobs where Bine sends more, by system, pair and size bucket."""
    rows = []
    keys = ["system", "collective", "bine", "classic"]
    for key, sub in df.groupby(keys, sort=False):
        for bucket, part in list(sub.groupby("bucket")) + [("all", sub)]:
            valid = part[part["classic_global"] > 0]
            rows.append(dict(zip(keys, key), bucket=(f">={bucket}" if bucket == SIZE_BUCKETS[-1] else str(bucket)),
                             jobs=len(part), jobs_global=len(valid),
                             median_reduction_pct=valid["reduction_pct"].median() if len(valid) else np.nan,
                             mean_reduction_pct=valid["reduction_pct"].mean() if len(valid) else np.nan,
                             share_bine_more_pct=100.0 * valid["bine_more"].mean() if len(valid) else np.nan))
    return pd.DataFrame(rows)


def alpha_beta_table(model: AlphaBetaGamma, sizes: list[float], ps: list[int]) -> pd.DataFrame:
    """Modelled time (s) of every collective algorithm for every p and reference size (bytes)."""
    rows = []
    for coll, algs in ALGORITHMS.items():
        for alg in algs:
            for p in ps:
                if not supports(coll, alg, p):
                    continue
                s = build_schedule(coll, alg, p)
                for n in sizes:
                    rows.append({"collective": coll, "algorithm": alg, "p": p, "bytes": int(n), "steps": s.nsteps,
                                 "time_s": model.time(s, n)})
    return pd.DataFrame(rows)


def link_load_table(preset: str, ps: list[int], nbytes: float, alpha: float, seed: int,
                    routing: str = "minimal") -> pd.DataFrame | None:
    """Link-load times on a ``topology.presets`` network at its documented size (None with a printed
    note if the topology package is unavailable).  Placements: the first p hosts and a seeded random
    sample of p hosts; routing by ``topology.routing.make_router`` (structural minimal routing, ECMP)."""
    try:
        from hpctwin.topology import presets, routing as trouting  # noqa: PLC0415 - networkx, numba: this table only
        graph = presets.build_preset(preset)
        router = trouting.make_router(graph)
    except (ImportError, AttributeError, KeyError, TypeError, ValueError) as exc:
        print(f"note: link-load table skipped (topology.presets/routing unavailable or preset {preset!r} "
              f"failed: {exc})")
        return None

    nh = int(router.n_hosts)
    hosts = np.arange(nh, dtype=np.int64)
    rng = np.random.default_rng(seed)
    rows = []
    for p in ps:
        if p > nh:
            print(f"note: link-load p={p} skipped: preset {preset!r} has {nh} hosts")
            continue
        placements = {"contiguous": hosts[:p], "random": np.sort(rng.choice(hosts, size=p, replace=False))}
        for place, rank_host in placements.items():
            for coll, plist in PAIRS.items():
                for pair in plist:
                    for alg in pair:
                        if not supports(coll, alg, p):
                            continue
                        res = link_loads(build_schedule(coll, alg, p), router, rank_host, nbytes, alpha=alpha,
                                         routing=routing)
                        rows.append({"preset": preset, "placement": place, "collective": coll, "algorithm": alg,
                                     "p": p, "bytes": int(nbytes), "time_s": res.time,
                                     "max_link_bytes": float(res.max_link_bytes.max())})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------ output
def _caption(systems: str) -> str:
    return (f"Global-link traffic of Bine vs classic collectives on real job allocations ({systems}); "
            "one rank per node in allocation order; groups = Dragonfly(+) groups (Leonardo cells, LUMI cabinets); "
            "reduction = 100 (classic - Bine) / classic global bytes over jobs with global traffic; "
            "power-of-two algorithms use the first 2^floor(log2 N) nodes; bucket b holds b <= N < 2b nodes. "
            "Data: HLC-Lab/pico tracer/sinfo (De Sensi et al., SC'25).")


def _write_tables(summary: pd.DataFrame, out: Path, caption: str) -> None:
    write_table_files(summary, out, caption, by=["system", "collective", "bine", "classic", "bucket"],
                      label="tab:bine-traffic")


def _boxplot(df: pd.DataFrame, out: Path) -> None:
    """``reduction_boxplot.png``: one column-width panel per system, one box per collective (first Bine
    vs classic pair of :data:`PAIRS`, every job with global traffic, all sizes pooled; the size
    buckets are in the table). Boxes: quartiles; whiskers: 5th-95th percentiles."""
    from hpctwin.twin.plot import figure, save_png  # noqa: PLC0415

    pairs = [(c, pl[0][0], pl[0][1]) for c, pl in PAIRS.items()]
    systems = list(dict.fromkeys(df["system"]))
    fig, axes = figure(len(systems), 1, height_in=1.9 * len(systems) + 0.5, sharex=True)
    for i, sysname in enumerate(systems):
        ax = axes[i][0]
        data, counts = [], []
        for coll, b, c in pairs:
            sub = df[(df["system"] == sysname) & (df["collective"] == coll) & (df["bine"] == b)
                     & (df["classic"] == c) & (df["classic_global"] > 0)]
            data.append(sub["reduction_pct"].to_numpy())
            counts.append(len(sub))
        ax.boxplot([d if len(d) else [np.nan] for d in data], whis=(5, 95), showfliers=False, widths=0.6,
                   medianprops={"color": "C3", "linewidth": 0.8})
        ax.axhline(0, color="grey", lw=0.6)
        ax.set_ylabel("global-byte\nreduction (%)")
        ax.set_title(f"{sysname}: Bine vs classic, {max(counts) if counts else 0} jobs with global traffic", fontsize=7)
    axes[-1][0].set_xticks(range(1, len(pairs) + 1))
    axes[-1][0].set_xticklabels([c.replace("_", "-") for c, _, _ in pairs], rotation=30, ha="right", fontsize=6.5)
    axes[-1][0].set_xlabel("collective (Bine vs classic pair as in the table; whiskers: 5th-95th pct.)")
    fig.align_ylabels()
    save_png(fig, out / "reduction_boxplot.png")


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    ap = cli.parser("bine_traffic", __doc__)
    cli.add_out(ap, "out/bine_traffic", "output directory")
    cli.add_data_dir(ap, "Bine-allocations directory (default: $HPCTWIN_DATA/Bine-allocations)")
    cli.add_system(ap, ["leonardo", "lumi"], help_text="machines whose real allocations are read (leonardo, lumi)")
    ap.add_argument("--jobs-csv", default=None, help="a twin run's jobs.csv (nodes column) instead of the real data")
    ap.add_argument("--group-map", default=None, help="node -> group file for --jobs-csv")
    ap.add_argument("--alpha", type=float, default=ALPHA_S, help="s per message")
    ap.add_argument("--beta", type=float, default=BETA_S_PER_B, help="s per byte")
    ap.add_argument("--gamma", type=float, default=GAMMA_S_PER_B, help="s per byte reduced")
    ap.add_argument("--max-p", type=int, default=4096, help="largest p of the alpha-beta and link-load tables")
    ap.add_argument("--preset", default="frontier",
                    help="topology preset for the link-load table (frontier: 9,408 hosts, p up to 4,096)")
    ap.add_argument("--linkload-bytes", type=float, default=16 * 2 ** 20,
                    help="reference buffer (bytes) for link loads")
    cli.add_seed(ap, "seed of the random placement in the link-load table")
    ap.add_argument("--no-linkload", action="store_true", help="skip the link-load table")
    args = ap.parse_args(argv)
    loaders = {"leonardo": load_leonardo, "lumi": load_lumi}
    systems = list(args.system)
    if args.jobs_csv:
        if not args.group_map:
            ap.error("--jobs-csv needs --group-map")
    else:
        for sysname in systems:
            if sysname not in loaders:
                ap.error(f"unknown system {sysname!r}; supported: {', '.join(loaders)}")
        ddir = Path(args.data_dir) if args.data_dir else default_data_dir()
        if not ddir.is_dir():
            print(f"error: data directory {ddir} not found (set --data-dir or HPCTWIN_DATA)", file=sys.stderr)
            return 2
    t0 = time.perf_counter()
    with staged_output("python -m hpctwin.experiments.bine_traffic", args.out, args.force) as out:
        frames = []
        if args.jobs_csv:
            ids, allocs = load_jobs_csv(Path(args.jobs_csv))
            groups = load_group_map(Path(args.group_map))
            name = Path(args.jobs_csv).resolve().parent.name
            frames.append(traffic_by_job(allocs, groups, ids, system=name))
            systems_text = f"twin run {name}, {len(ids)} jobs"
        else:
            parts = []
            for sysname in systems:
                ids, allocs, groups, skipped = loaders[sysname](ddir)
                print(f"{sysname}: {len(ids)} jobs read, {skipped} skipped (non-compute host names)")
                frames.append(traffic_by_job(allocs, groups, ids, system=sysname))
                parts.append(f"{sysname.capitalize()} {len(ids)} jobs")
            systems_text = ", ".join(parts)
        _write_all(args, frames, systems_text, out, t0)
    print(f"wrote {args.out} in {time.perf_counter() - t0:.1f} s")
    return 0


def _write_all(args, frames: list[pd.DataFrame], systems_text: str, out: Path, t0: float) -> None:
    """traffic_per_job.csv, the tables, the box plot, the alpha-beta and link-load tables into ``out``."""
    df = pd.concat(frames, ignore_index=True)
    df.to_csv(out / "traffic_per_job.csv", index=False, float_format="%.6g")
    summary = summarize(df)
    caption = _caption(systems_text)
    _write_tables(summary, out, caption)
    _boxplot(df, out)
    print(f"traffic: {df['job'].nunique()} jobs, {len(df)} rows in {time.perf_counter() - t0:.1f} s")
    allrows = summary[summary["bucket"] == "all"]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(allrows.to_string(index=False, float_format=lambda v: f"{v:.1f}"))

    ps = [2 ** k for k in range(1, 13) if 2 ** k <= args.max_p]
    model = AlphaBetaGamma(args.alpha, args.beta, args.gamma)
    ab = alpha_beta_table(model, [8 * 2 ** 10, 16 * 2 ** 20], ps)
    write_table_files(ab, out, f"Alpha-beta-gamma time per collective algorithm; alpha={args.alpha:g} s, "
              f"beta={args.beta:g} s/B, gamma={args.gamma:g} s/B; step = alpha*msgs + beta*max bytes in/out "
              f"of a rank + gamma*max bytes reduced.",
                      by=["collective", "algorithm"], label="tab:alpha-beta", stem="alpha_beta")
    if not args.no_linkload:
        ll = link_load_table(args.preset, ps, args.linkload_bytes, args.alpha, args.seed)
        if ll is not None:
            write_table_files(ll, out, f"Link-load time on preset {args.preset!r}, n={args.linkload_bytes:g} B, "
                      f"one rank per host, "
                      f"placements: first p hosts / seeded random (seed {args.seed}); minimal routing with ECMP "
                      f"(topology.routing); "
                      f"step = alpha + max link bytes / bandwidth.", label="tab:link-load", stem="link_load")


if __name__ == "__main__":
    sys.exit(main())
