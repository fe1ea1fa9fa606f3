"""Issue 27: the inputs of a real-Slurm GPU case (tests/data/slurm_gpu_cluster.conf, from
/work/shared/slurm-lab/conf/gpu.conf.in: 12 nodes of 8 CPUs, n001-n008 with 4 GPUs, partitions
gpu / cpu / short): machine size in nodes, CPUs or GPUs; SWF partition numbers; QOS TRES limits."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hpctwin.schedulers.slurm import SlurmScheduler, _partition_map
from hpctwin.schedulers.slurm_conf import SlurmConfError, load_slurm_conf
from hpctwin.schedulers.slurm_priority import AccountsError, load_accounts, parse_tres
from hpctwin.twin.run import RunConfig, run
from hpctwin.twin.workload import Workload

DATA = Path(__file__).parent / "data"
CONF = str(DATA / "slurm_gpu_cluster.conf")

pytestmark = pytest.mark.filterwarnings("ignore:.*read but not modelled")


def workload(jobs: list[dict], gpus: bool = False) -> Workload:
    """jobs: dicts of submit, procs, run, [req, user, part (SWF partition number), gpn]."""
    n = len(jobs)
    cols = {}
    if gpus:
        cols["gpus"] = np.array([float(j["procs"]) for j in jobs])
    if any("gpn" in j for j in jobs):
        cols["gpus_per_node"] = np.array([float(j.get("gpn", 0)) for j in jobs])
    if any("excl" in j for j in jobs):
        cols["exclusive"] = np.array([bool(j.get("excl", False)) for j in jobs])
    return Workload.from_arrays(
        "t", submit=[j["submit"] for j in jobs], runtime=[j["run"] for j in jobs],
        procs=[j["procs"] for j in jobs], requested_time=[j.get("req", j["run"]) for j in jobs],
        user=[j.get("user", 0) for j in jobs], group=[0] * n,
        partition=[j.get("part", -1) for j in jobs], job_id=np.arange(1, n + 1), columns=cols)


def simulate(jobs, nodes, accounts=None, allocation="node", **opts):
    """Run the Slurm-like policy on CONF; ({job id: start}, the scheduler's description)."""
    options = {"slurm_conf": CONF, **opts}
    if accounts:
        options["accounts"] = accounts
    extra = {"allocation": "gpu", "gpus_per_node": 4} if allocation == "gpu" else {}
    r = run(RunConfig(workload="t", scheduler="slurm", nodes=nodes, options={"scheduler": options},
                      **extra), workload=workload(jobs, gpus=allocation == "gpu"))
    sp = r.summary["scheduler_params"]
    return dict(zip(r.jobs.job_id.tolist(), r.jobs.start.tolist())), sp.get("inner", sp)


def accounts(tmp_path, text: str) -> str:
    f = tmp_path / "acc.toml"
    f.write_text(text)
    return str(f)


# ---------------------------------------------------------------- 1. machine size
def test_nodes_counted_as_nodes():
    st, d = simulate([dict(submit=0, procs=12, run=10, part=1 + 2)], nodes=12)
    assert st == {1: 0.0}
    assert d["units"] == "node (1 per node)"
    assert d["notes"][0].startswith("units are nodes: the machine has 12 units = the 12 NodeName nodes")
    assert "--nodes 96" in d["notes"][0]


def test_nodes_counted_as_cpus():
    # 96 units = 12 nodes x 8 CPUs: --exclusive 9-CPU jobs take 2 whole nodes of 'short' each
    st, d = simulate([dict(submit=0, procs=9, run=10, part=3, excl=True)] * 6
                     + [dict(submit=0, procs=1, run=10, part=3, excl=True)], nodes=96)
    assert "units" not in d
    assert st == {1: 0.0, 2: 0.0, 3: 0.0, 4: 0.0, 5: 0.0, 6: 0.0, 7: 10.0}
    # shared (select/cons_tres, CR_Core): 6 x 9 + 1 CPUs fit the 96 cores at once
    st, d = simulate([dict(submit=0, procs=9, run=10, part=3)] * 6
                     + [dict(submit=0, procs=1, run=10, part=3)], nodes=96)
    assert set(st.values()) == {0.0}
    assert "share nodes" in d["select"]


def test_units_are_gpus_under_gpu_allocation():
    st, d = simulate([dict(submit=0, procs=4, run=10, part=1)] * 9, nodes=12, allocation="gpu")
    assert d["units"] == "gpu (4 per node)"
    # 8 GPU nodes: the ninth 4-GPU job waits (nodes n009-n012 have no GPU)
    assert sorted(st.values()) == [0.0] * 8 + [10.0]


def test_contradicting_size_is_one_clear_error():
    with pytest.raises(SlurmConfError) as e:
        simulate([dict(submit=0, procs=1, run=10)], nodes=50)
    msg = str(e.value)
    assert msg == (f"{CONF}: NodeName lines define 12 nodes x 8 CPUs = 96 units but the machine has 50 "
                   "units; run with --nodes 12 (nodes) or --nodes 96 (8 CPUs per node) or "
                   "--allocation gpu --gpus-per-node 4 --nodes 12, or fix the NodeName lines")


def test_units_required_is_the_cpu_count():
    assert SlurmScheduler(load_slurm_conf(CONF)).units_required == 96


# ---------------------------------------------------------------- 2. SWF partition numbers
def test_partition_numbers_follow_partitionname_lines():
    # part 3 = short (PriorityTier 2) goes first; part 2 = cpu (n005-n012, 8 nodes)
    st, d = simulate([dict(submit=0, procs=8, run=100, part=2),
                      dict(submit=0, procs=12, run=10, part=3)], nodes=12)
    assert st == {1: 10.0, 2: 0.0}
    assert "SWF partition numbers -> slurm.conf partitions (the n-th PartitionName line is number n): " \
           "2=cpu, 3=short" in d["notes"]


def test_partition_number_routes_to_its_nodes():
    # a 9-node job in partition 2 (cpu: 8 nodes) can never start: the number was mapped
    with pytest.raises(SlurmConfError, match=r"partition cpu\): it needs more nodes than its partition has"):
        simulate([dict(submit=0, procs=9, run=10, part=2)], nodes=12)


def test_unknown_partition_number_is_an_error():
    with pytest.raises(SlurmConfError) as e:
        simulate([dict(submit=0, procs=1, run=10, part=4)] * 2, nodes=12)
    assert str(e.value) == (
        f"{CONF}: 2 jobs are in SWF partition 4, which no slurm.conf partition matches (the n-th "
        "PartitionName line is number n: 1=gpu, 2=cpu, 3=short); give --set "
        "scheduler.partition_map=\"4=NAME,...\" or filter the workload")


def test_no_partition_goes_to_default():
    st, d = simulate([dict(submit=0, procs=8, run=10), dict(submit=0, procs=8, run=10, part=-1)], nodes=12)
    assert st == {1: 0.0, 2: 10.0}        # the default partition 'cpu' has 8 nodes


def test_explicit_partition_map():
    # sacct-derived SWF numbers partitions 0-based in order of first appearance
    st, d = simulate([dict(submit=0, procs=12, run=10, part=0)], nodes=12, partition_map="0=short,1=gpu")
    assert st == {1: 0.0}
    assert "(partition_map): 0=short" in d["notes"][1]
    with pytest.raises(SlurmConfError, match="partition_map: partition 'debug' is not a PartitionName"):
        simulate([dict(submit=0, procs=1, run=10, part=0)], nodes=12, partition_map="0=debug")


def test_partition_map_option_errors():
    assert _partition_map("1=gpu, 2=cpu") == {1: "gpu", 2: "cpu"}
    assert _partition_map(None) is None
    with pytest.raises(SlurmConfError, match=r"partition_map item x='gpu': expected NUMBER=NAME"):
        _partition_map("x=gpu")
    with pytest.raises(SlurmConfError, match="number 1 given twice"):
        _partition_map("1=gpu,1=cpu")


# ---------------------------------------------------------------- 3. QOS TRES limits
def test_accounts_read_tres_limits(tmp_path):
    spec = load_accounts(accounts(tmp_path, '[qos.normal]\nPriority = 10\nMaxJobsPerUser = 5\n'
                                            'MaxTRESPerUser = "gres/gpu=4,cpu=16"\nGrpTRES = "gpu=8"\n'))
    q = spec.qos["normal"]
    assert (q.priority, q.max_jobs_per_user) == (10, 5)
    assert q.max_tres_per_user == {"gres/gpu": 4, "cpu": 16}
    assert q.grp_tres == {"gres/gpu": 8}


def test_tres_string_errors():
    with pytest.raises(AccountsError, match=r"^f: TRES 'mem' is not modelled \(limits read: cpu, node, gres/gpu\)"):
        parse_tres("mem=100", "f")
    with pytest.raises(AccountsError, match=r"^f: 'gres/gpu' is not NAME=COUNT"):
        parse_tres("gres/gpu", "f")
    with pytest.raises(AccountsError, match="^f: TRES gres/gpu given twice"):
        parse_tres("gpu=1,gres/gpu=2", "f")
    with pytest.raises(AccountsError, match="expected a TRES string"):
        parse_tres(4, "f")


def test_unknown_qos_key_names_the_expected(tmp_path):
    with pytest.raises(AccountsError, match=r"qos.normal: unknown key\(s\) UsageFactor"):
        load_accounts(accounts(tmp_path, "[qos.normal]\nUsageFactor = 5\n"))


def test_gpu_limit_per_user_under_gpu_allocation(tmp_path):
    acc = accounts(tmp_path, '[qos.normal]\nmax_tres_per_user = "gres/gpu=4"\n')
    jobs = [dict(submit=0, procs=2, run=100, part=1, user=1)] * 3 + [dict(submit=0, procs=2, run=100, part=1, user=2)]
    st, d = simulate(jobs, nodes=12, accounts=acc, allocation="gpu")
    assert st == {1: 0.0, 2: 0.0, 3: 100.0, 4: 0.0}
    assert d["pending_reasons"] == {"QOSMaxGRESPerUser": 1}


def test_gpu_limit_per_user_from_gres_column(tmp_path):
    # node units: 2 nodes x gpus_per_node 2 = 4 GPUs per job; limit 6 GPUs per user
    acc = accounts(tmp_path, '[qos.normal]\nmax_tres_per_user = "gres/gpu=6"\n')
    jobs = [dict(submit=0, procs=2, run=100, part=1, user=1, gpn=2)] * 2
    st, d = simulate(jobs, nodes=12, accounts=acc)
    assert st == {1: 0.0, 2: 100.0}
    assert d["pending_reasons"] == {"QOSMaxGRESPerUser": 1}


def test_cpu_limit_per_user(tmp_path):
    acc = accounts(tmp_path, '[qos.normal]\nMaxTRESPerUser = "cpu=16"\n')
    jobs = [dict(submit=0, procs=8, run=100, part=2, user=1)] * 3 + [dict(submit=0, procs=8, run=50, part=2, user=2)]
    st, d = simulate(jobs, nodes=96, accounts=acc)
    assert st == {1: 0.0, 2: 0.0, 3: 100.0, 4: 0.0}
    assert d["pending_reasons"] == {"QOSMaxCpuPerUserLimit": 1}


def test_grp_tres_over_all_users(tmp_path):
    acc = accounts(tmp_path, '[qos.normal]\nGrpTRES = "gres/gpu=8"\n')
    jobs = [dict(submit=0, procs=4, run=100, part=1, user=u) for u in (1, 2, 3)]
    st, d = simulate(jobs, nodes=12, accounts=acc, allocation="gpu")
    assert st == {1: 0.0, 2: 0.0, 3: 100.0}
    assert d["pending_reasons"] == {"QOSGrpGRES": 1}


def test_job_over_its_limit_alone_is_refused(tmp_path):
    acc = accounts(tmp_path, '[qos.normal]\nMaxTRESPerUser = "gres/gpu=2"\n')
    with pytest.raises(SlurmConfError) as e:
        simulate([dict(submit=0, procs=4, run=10, part=1, user=1)], nodes=12, accounts=acc, allocation="gpu")
    assert str(e.value) == (f"{acc}: 1 jobs can never start (first: job 1, 4 gres/gpu in QOS normal, whose "
                            "MaxTRESPerUser allows gres/gpu=2); Slurm would keep it pending forever: raise "
                            "the limit or filter the workload")
