"""The RLScheduler (Zhang et al., SC'20) table of heuristics, under ``--compat rlscheduler``.

Rows: FCFS, WFP3, UNICEP, SJF, F1; columns: Lublin-1, SDSC-SP2, HPC2N, Lublin-2, each without and
with the harness's backfilling. A cell is the mean over 10 sequences of 1,024 jobs (seed 1) of the
sequence's mean bounded slowdown (tau 10 s), computed by the compat replay
(`schedulers.rlscheduler_compat`) with the settings of the harness's ``make_table_script.py``
(starts of SDSC-SP2 and HPC2N sequences drawn within the first 10,000 jobs).

Writes into ``--out`` (default ``results/rlscheduler_table``; checked before the replay and written
atomically: it must not exist, be empty, or be a folder hpctwin wrote, replaced only with ``--force``):

* ``table.csv/.md/.tex``: the wide table of the replay's cells;
* ``cells.csv/.md/.tex``: one row per cell with the replay, the harness reference (``HARNESS``:
  the harness's own code, DIR-LAB/deep-batch-scheduler commit cd433e3, run on the same files with a
  stub for its unused TensorFlow/gym imports) and their difference, and the paper's value where
  `PUBLISHED` holds one.

`PUBLISHED` is the paper's Table V (average bounded slowdown) as its authors print it in their
repository's README; every one of the 40 replayed cells rounds to the published value (2 decimals),
and the replay equals the harness's own output bit for bit (``tests/test_rlscheduler_compat.py``).
Traces: Lublin-1 = ``lublin_256.swf`` and Lublin-2 =
``lublin_256_new2`` (the harness's files, same git blobs), HPC2N-2002-2.2-cln (same blob), and
SDSC-SP2-1998-4.2-cln from the PWA copy in the datasets folder, whose blob differs from the harness's
copy (which was too large to retrieve); its cells still match the harness run on this copy.

Example::

    python -m hpctwin.experiments.rlscheduler_table --out results/rlscheduler_table

Options: the vocabulary of ``docs/experiments.md`` (``-w Lublin-1`` replays one column; ``--traces`` is a
deprecated alias).
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import pandas as pd

from hpctwin.experiments import cli
from hpctwin.experiments.tables import Column, register_columns, staged_output, write_table_files

#: table column -> (registry name, batch_job_slice) as in make_table_script.py
TRACES = {"Lublin-1": ("Lublin-256", 0), "SDSC-SP2": ("SDSC-SP2", 10000), "HPC2N": ("HPC2N", 10000),
          "Lublin-2": ("lublin_256_new2", 0)}
#: table row -> harness score function
HEURISTICS = {"FCFS": "fcfs", "WFP3": "wfp3", "UNICEP": "unicep", "SJF": "sjf", "F1": "f1"}
SEED, LENGTH, SEQUENCES = 1, 1024, 10

#: the harness's own output, (no backfill, backfill) per heuristic and trace: mean bsld over the
#: 10 sequences, printed by its run_policy() on these files (Python 3.11, numpy 2.4)
HARNESS = {
    "fcfs": {"Lublin-1": (7273.771360487951, 235.81730496477076), "SDSC-SP2": (1727.5443421998195, 1595.1172830013281),
             "HPC2N": (297.17848386208937, 127.38231096962882), "Lublin-2": (7842.470887037476, 247.60674076121413)},
    "wfp3": {"Lublin-1": (19753.527528405517, 133.87376119919824), "SDSC-SP2": (3000.8807306899553, 1083.117497398023),
             "HPC2N": (426.9932676838733, 97.38828870318247), "Lublin-2": (9523.175072612506, 318.35308056899095)},
    "unicep": {"Lublin-1": (22274.744675634207, 307.2328582650004), "SDSC-SP2": (1848.4460246947215, 548.0053941673658),
               "HPC2N": (609.7688870527269, 175.12140194185693), "Lublin-2": (11265.311476644934, 379.59239855806436)},
    "sjf": {"Lublin-1": (277.3483407229257, 73.30649683910795), "SDSC-SP2": (2680.5528892615043, 2167.8393293505096),
            "HPC2N": (157.70646366948853, 122.03758305014063), "Lublin-2": (787.8873799017558, 91.99335983820848)},
    "f1": {"Lublin-1": (258.3663723914013, 75.06815059960638), "SDSC-SP2": (1232.0574034336491, 1098.2156526044698),
           "HPC2N": (118.01499969448537, 71.94540237227571), "Lublin-2": (698.336790550251, 148.2493850588919)},
}
#: the published values, same layout as HARNESS: (without, with backfilling), printed to 2 decimals.
#: Source: Zhang et al., SC'20, Table V ("scheduling towards average bounded slowdown"), as the
#: authors reproduce it in their repository's README.md, section "Reproduce Results in Paper"
#: (DIR-LAB/deep-batch-scheduler, commit cd433e3; `make_table_script.py --score_type bsld`).
PUBLISHED: dict[str, dict[str, tuple[float, float]]] = {
    "fcfs": {"Lublin-1": (7273.77, 235.82), "SDSC-SP2": (1727.54, 1595.12), "HPC2N": (297.18, 127.38),
             "Lublin-2": (7842.47, 247.61)},
    "wfp3": {"Lublin-1": (19753.53, 133.87), "SDSC-SP2": (3000.88, 1083.12), "HPC2N": (426.99, 97.39),
             "Lublin-2": (9523.18, 318.35)},
    "unicep": {"Lublin-1": (22274.74, 307.23), "SDSC-SP2": (1848.45, 548.01), "HPC2N": (609.77, 175.12),
               "Lublin-2": (11265.31, 379.59)},
    "sjf": {"Lublin-1": (277.35, 73.31), "SDSC-SP2": (2680.55, 2167.84), "HPC2N": (157.71, 122.04),
            "Lublin-2": (787.89, 91.99)},
    "f1": {"Lublin-1": (258.37, 75.07), "SDSC-SP2": (1232.06, 1098.22), "HPC2N": (118.01, 71.95),
           "Lublin-2": (698.34, 148.25)},
}

# the wide table's columns: one per trace and backfilling rule
register_columns({f"{col} {tag}": Column(f"{col}, {text}", "ratio", 2, 1.0, True, 1.0, None)
                  for col in TRACES for tag, text in (("no bf", "no backfilling"), ("bf", "backfilling"))})

CAPTION = ("RLScheduler (SC'20) heuristics under hpctwin --compat rlscheduler: mean over 10 sequences of "
           "1,024 jobs (gym seed 1; SDSC-SP2/HPC2N starts within the first 10,000 jobs) of the sequence's "
           "mean bounded slowdown, tau 10 s; queue sorted at each decision with the head committed, WFP3/UNICEP "
           "wait = -1 - submit, backfilling = the harness's greedy rule (one shadow per head, strict <); jobs "
           "run their actual run time; machine = the log header's MaxNodes.")


def compute_cells(data_dir: str | None = None, traces: list[str] | None = None) -> pd.DataFrame:
    """One row per (trace, backfill, heuristic): replay, harness reference, difference, published
    (``traces``: a subset of the table's columns, default all)."""
    from hpctwin.schedulers.rlscheduler_compat import harness_cell  # noqa: PLC0415
    from hpctwin.schedulers.rlscheduler_run import resolve_trace_path  # noqa: PLC0415
    from hpctwin.schedulers.rlscheduler_trace import load_harness_trace, sample_starts  # noqa: PLC0415
    rows = []
    for col in traces or list(TRACES):
        if col not in TRACES:
            raise ValueError(f"--workload: unknown trace {col!r}; known: {', '.join(TRACES)}")
        name, slice_ = TRACES[col]
        tr = load_harness_trace(resolve_trace_path(name, data_dir))
        starts = sample_starts(len(tr), LENGTH, SEQUENCES, SEED, slice_)
        for bf in (False, True):
            for label, h in HEURISTICS.items():
                value = harness_cell(tr, starts, LENGTH, h, bf)
                ref = HARNESS[h][col][int(bf)]
                pub = PUBLISHED.get(h, {}).get(col, (math.nan, math.nan))[int(bf)]
                rows.append({"trace": col, "backfill": "yes" if bf else "no", "heuristic": label,
                             "replay": value, "harness": ref, "replay_minus_harness": value - ref,
                             "published": pub, "replay_minus_published": value - pub})
    return pd.DataFrame(rows)


def wide_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Rows = heuristics, columns = ``<trace> no bf`` / ``<trace> bf``."""
    out = pd.DataFrame({"heuristic": list(HEURISTICS)})
    for col in dict.fromkeys(cells.trace):
        for bf, tag in (("no", "no bf"), ("yes", "bf")):
            sub = cells[(cells.trace == col) & (cells.backfill == bf)].set_index("heuristic")["replay"]
            out[f"{col} {tag}"] = [float(sub[h]) for h in HEURISTICS]
    return out


def main(argv: list[str] | None = None) -> int:
    p = cli.parser("rlscheduler_table", __doc__)
    cli.add_out(p, "results/rlscheduler_table")
    cli.add_data_dir(p)
    cli.add_workload(p, list(TRACES), aliases=("--traces",),
                     help_text=f"table columns to replay ({', '.join(TRACES)})")
    a = p.parse_args(argv)
    t0 = time.process_time()
    with staged_output("python -m hpctwin.experiments.rlscheduler_table", a.out, a.force) as out:
        cells = compute_cells(a.data_dir, list(a.workload))
        write_table_files(wide_table(cells), out, CAPTION, by=["heuristic"], stem="table", label="tab:rlscheduler")
        write_table_files(cells, out, CAPTION + " harness = the harness's own code on the same files.",
                          by=["trace", "backfill", "heuristic"], stem="cells", label="tab:rlscheduler-cells")
    worst = float(cells["replay_minus_harness"].abs().max())
    pub = cells["replay_minus_published"].abs()
    print(wide_table(cells).to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print(f"cells equal to the published table at its 2 decimals: {int((pub <= 0.005 + 1e-9).sum())} of "
          f"{int(pub.notna().sum())} (largest difference {float(pub.max()):.4f})")
    print(f"largest |replay - harness| over {len(cells)} cells: {worst:.3g}; "
          f"{time.process_time() - t0:.1f} s CPU; tables in {Path(a.out)}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
