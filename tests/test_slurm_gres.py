"""gres/gpu requests under the Slurm-like policy: nodes without enough GPUs are not usable by a
GPU job (select_linear.c ``_job_count_bitmap`` -> ``gres_job_test``), CPU jobs may use any node."""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.schedulers.slurm_conf import SlurmConfError
from hpctwin.twin.run import RunConfig, run
from hpctwin.twin.workload import Workload

CONF = "NodeName=n[0-1]\nNodeName=g[0-1] Gres=gpu:4\nPartitionName=all Nodes=ALL Default=YES\n"


def _run(tmp_path, jobs, **opts):
    conf = tmp_path / "gpu.conf"
    conf.write_text(CONF)
    wl = Workload.from_arrays(
        "t", submit=[j[0] for j in jobs], procs=[j[1] for j in jobs],
        runtime=[j[2] for j in jobs], requested_time=[j[2] for j in jobs],
        job_id=np.arange(1, len(jobs) + 1),
        columns={"gpus_per_node": np.array([float(j[3]) for j in jobs])})
    r = run(RunConfig(workload="t", scheduler="slurm", nodes=4,
                      options={"scheduler": {"slurm_conf": str(conf), "bf_resolution": 1,
                                             **opts}}), workload=wl)
    return (dict(zip(r.jobs.job_id.tolist(), r.jobs.start.tolist())),
            dict(zip(r.jobs.job_id.tolist(), r.jobs.nodes.tolist())))


@pytest.mark.parametrize("compiled", [True, False])
def test_gpu_jobs_use_gpu_nodes_by_hand(tmp_path, compiled):
    """Nodes n0 n1 (no GPU), g0 g1 (4 GPUs): indices 0-3. At 0: A (1 node, 2 GPUs) may use only
    {2,3}: _job_test, one run [2-3] -> node 2. B (1 node, CPU) on the idle {0,1,3}: runs [0-1]
    and [3]; the tightest is [3] -> node 3 (select/linear is not GRES-aware for a CPU job).
    C (2 nodes, 4 GPUs each, submitted 1) needs {2,3}: waits for A (100) and B (200) -> 200;
    D (1 node, CPU, 50 s, submitted 2) starts at once on node 0 in the backfill cycle (its
    partition is blocked by C in the event pass; C's reservation holds only {2,3})."""
    jobs = [(0, 1, 100, 2), (0, 1, 200, 0), (1, 2, 100, 4), (2, 1, 50, 0)]
    st, nodes = _run(tmp_path, jobs, compiled=compiled)
    assert st == {1: 0, 2: 0, 3: 200, 4: 30}
    assert nodes == {1: "2", 2: "3", 3: "2-3", 4: "0"}


def test_gpu_requests_need_gpu_nodes(tmp_path):
    with pytest.raises(SlurmConfError, match="gres/gpu count than its partition has"):
        _run(tmp_path, [(0, 1, 10, 8)])          # 8 GPUs per node: no node has them


def test_compiled_equals_python_with_gpus(tmp_path):
    rng = np.random.default_rng(11)
    n = 300
    sub = np.cumsum(rng.exponential(30.0, n)).round()
    jobs = [(float(sub[i]), int(rng.integers(1, 3)), float(rng.choice([60, 300, 900])),
             int(rng.choice([0, 0, 1, 4]))) for i in range(n)]
    a = _run(tmp_path, jobs, compiled=True)
    b = _run(tmp_path, jobs, compiled=False)
    assert a == b


def test_bind_memory_does_not_grow_with_jobs_times_nodes():
    """The usable-node check of bind goes per (partition, GPU level), not per job x node (RICC:
    447,794 jobs x 8,192 nodes made two 3.7 GB boolean matrices)."""
    import tracemalloc

    import numpy as np

    from hpctwin.schedulers.base import JobTable
    from hpctwin.schedulers.slurm import SlurmScheduler
    from hpctwin.twin.cluster import Cluster
    from hpctwin.twin.contract import BindContext
    n, nodes = 20_000, 4096
    rng = np.random.default_rng(0)
    procs = rng.integers(1, 64, n)
    jobs = JobTable(job_id=np.arange(n), submit=np.arange(n, dtype=float), procs=procs,
                    estimate=np.full(n, 600.0), requested_time=np.full(n, 600.0),
                    user=np.zeros(n, dtype=np.int64), group=np.zeros(n, dtype=np.int64),
                    queue=np.zeros(n, dtype=np.int64), partition=np.full(n, -1), columns={})
    s = SlurmScheduler(compiled=False)
    tracemalloc.start()
    s.bind(BindContext(jobs, Cluster(nodes), nodes))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 30e6, peak            # a jobs x nodes bool matrix alone is 82 MB
    assert s.req.tolist() == procs.tolist()
