"""The compiled backfill cycle (`schedulers.slurm_kernels`) makes exactly the decisions of the
Python cycle (`SlurmScheduler._backfill`): same start times and same nodes, job by job."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from hpctwin.twin.run import RunConfig, load_workload, run
from hpctwin.twin.workload import Workload

DATA = Path(__file__).parent / "data"


def _both(wl, nodes=None, **opts):
    out = []
    for compiled in (True, False):
        r = run(RunConfig(workload="t", scheduler="slurm", nodes=nodes,
                          options={"scheduler": {**opts, "compiled": compiled}}), workload=wl)
        out.append(r)
    return out


def _synthetic(n=400, nodes=16, seed=3):
    rng = np.random.default_rng(seed)
    submit = np.cumsum(rng.exponential(40.0, n)).round()
    procs = rng.choice([1, 1, 2, 3, 4, 5, 8, 12, 16], n)
    req = rng.choice([60, 300, 900, 3600, 7200], n).astype(float)
    runtime = np.maximum(1.0, (req * rng.uniform(0.05, 1.0, n)).round())
    return Workload.from_arrays("t", submit=submit, runtime=runtime, procs=procs,
                                requested_time=req, user=rng.integers(0, 5, n),
                                job_id=np.arange(1, n + 1))


@pytest.mark.parametrize("opts", [
    {"bf_resolution": 1},
    {"bf_resolution": 60, "bf_interval": 7, "bf_window": 30, "bf_max_job_test": 5},
    {"bf_job_part_count_reserve": 1, "bf_max_job_start": 2},
    {"PriorityType": "priority/multifactor", "AccountingStorageType": "accounting_storage/slurmdbd",
     "PriorityWeightAge": 1000, "PriorityWeightJobSize": 500, "PriorityWeightFairshare": 2000,
     "bf_min_prio_reserve": 300, "bf_min_age_reserve": 600},
])
def test_compiled_cycle_equals_python_cycle(opts):
    a, b = _both(_synthetic(), nodes=16, **opts)
    assert a.jobs.start.tolist() == b.jobs.start.tolist()
    assert a.jobs.nodes.tolist() == b.jobs.nodes.tolist()
    sa, sb = a.summary["scheduler_params"]["stats"], b.summary["scheduler_params"]["stats"]
    assert sa == sb and sa["backfill_starts"] > 20 and sa["reservations"] > 100


def test_compiled_cycle_with_partitions():
    """slurm_cluster.conf: 4 nodes in partitions with their own node sets."""
    wl = _synthetic(n=300, nodes=4, seed=5)
    wl = Workload.from_arrays("t", submit=wl.submit, runtime=wl.runtime,
                              procs=np.minimum(wl.procs, 2), requested_time=wl.requested_time,
                              job_id=wl.job_id)
    a, b = _both(wl, nodes=4, slurm_conf=str(DATA / "slurm_cluster.conf"), bf_resolution=1)
    assert a.jobs.start.tolist() == b.jobs.start.tolist()
    assert a.jobs.nodes.tolist() == b.jobs.nodes.tolist()


def _ctc() -> Path | None:
    root = Path(os.environ.get("HPCTWIN_DATA", "/work/shared/datasets"))
    p = root / "CTC-SP2" / "CTC-SP2-1996-3.1-cln.swf.gz"
    return p if p.exists() else None


@pytest.mark.slow
@pytest.mark.skipif(_ctc() is None, reason="CTC-SP2 log not available")
def test_compiled_cycle_equals_python_cycle_on_ctc():
    wl = load_workload(str(_ctc())).sorted()
    wl = wl.take(np.arange(4000))
    a, b = _both(wl)
    assert a.jobs.start.tolist() == b.jobs.start.tolist()
    assert a.jobs.nodes.tolist() == b.jobs.nodes.tolist()
