"""Issue 27 item 4: preemption in the Slurm-like policy (schedulers/slurm_preempt.py).

Hand-checked cases on tiny machines (times in s). The common shape: two 1-node ``gpu`` jobs A, B run
from t=0 for 1000 s on a 2-node machine; an ``urgent`` job U (PriorityTier 10) of 1 node, 3 s,
arrives at t=100. Candidates of equal ``_gen_job_prio`` (tier << 16 + nodes) keep job order, so A
is the victim. REQUEUE: U starts at 100 on A's node; A pends again with EligibleTime = 100 +
cred_expire (5) + 1 = 106 and submit time 100; U ends at 103 (its event pass sees no eligible job);
the next pass that sees A is the periodic one at 120 (sched_interval 60; backfill's next cycle is
at 130), so A restarts at 120 from scratch and ends at 1120.
"""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.schedulers.slurm import make_slurm_scheduler
from hpctwin.schedulers.slurm_conf import SlurmConfError
from hpctwin.schedulers.slurm_tres import check_ledger
from hpctwin.twin.run import RunConfig, run
from hpctwin.twin.workload import Workload

pytestmark = pytest.mark.filterwarnings("ignore:.*read but not modelled")

PARTS = """NodeName=n[1-2] CPUs=1
PartitionName=gpu Nodes=n[1-2] PriorityTier=1 PreemptMode={mode} Default=YES
PartitionName=urgent Nodes=n[1-2] PriorityTier=10 PreemptMode=OFF
"""


def _run(tmp_path, conf: str, submit, runtime, procs, cols: dict, units: int, accounts: str | None = None,
         **opts):
    f = tmp_path / "slurm.conf"
    f.write_text(conf)
    if accounts is not None:
        a = tmp_path / "accounts.toml"
        a.write_text(accounts)
        opts["accounts"] = str(a)
    n = len(submit)
    wl = Workload.from_arrays("t", submit=submit, runtime=runtime, procs=procs,
                              requested_time=[2 * r + 60 for r in runtime], user=[0] * n, group=[0] * n,
                              job_id=np.arange(1, n + 1), columns=cols)
    s = make_slurm_scheduler(str(f), opts)
    r = run(RunConfig(workload="t", scheduler=s, nodes=units), workload=wl)
    return r.jobs.set_index("job_id"), r.summary, s


def _prio_case(tmp_path, mode="REQUEUE", head="PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE\n",
               extra=""):
    conf = head + "AuthInfo=cred_expire=5\n" + extra + PARTS.format(mode=mode)
    cols = {"partition_name": np.array(["gpu", "gpu", "urgent"], dtype=object)}
    return _run(tmp_path, conf, [0, 0, 100], [1000, 1000, 3], [1, 1, 1], cols, 2)


def test_urgent_job_requeues_a_gpu_job(tmp_path):
    df, summ, s = _prio_case(tmp_path)
    assert df.loc[3, "start"] == 100.0 and df.loc[3, "nodes"] == "0"      # on A's node, at its submit
    assert df.loc[1, "end"] == 1120.0                    # restarted at 120 (EligibleTime 106, next pass)
    assert df.loc[1, "state"] == "COMPLETED" and df.loc[1, "preemptions"] == 1 and df.loc[1, "segments"] == 2
    assert df.loc[2, "end"] == 1000.0 and df.loc[2, "preemptions"] == 0 and df.loc[2, "segments"] == 1
    assert summ["preemptions"] == {"preemptions": 1, "jobs_preempted": 1, "jobs_ended_by_preemption": 0}
    st = summ["scheduler_params"]["stats"]
    assert st["preempt_requeued"] == 1 and st["preempt_cancelled"] == 0
    assert summ["scheduler_params"]["preemption"]["cred_expire_s"] == 5
    assert df.loc[1, "submit"] == 0.0                    # the log's submit time is kept in the table


def test_cancel_ends_the_victim_preempted(tmp_path):
    df, summ, _ = _prio_case(tmp_path, "CANCEL", "PreemptType=preempt/partition_prio\nPreemptMode=CANCEL\n")
    assert df.loc[1, "state"] == "PREEMPTED" and df.loc[1, "end"] == 100.0 and df.loc[1, "segments"] == 1
    assert df.loc[3, "start"] == 100.0 and df.loc[2, "state"] == "COMPLETED"
    assert summ["preemptions"]["jobs_ended_by_preemption"] == 1
    assert summ["accounting"]["simulated"] == {"COMPLETED": 2, "PREEMPTED": 1}


def test_job_requeue_0_kills_instead(tmp_path):
    df, _, _ = _prio_case(tmp_path, extra="JobRequeue=0\n")
    assert df.loc[1, "state"] == "PREEMPTED" and df.loc[1, "end"] == 100.0


def test_off_partition_is_never_preempted(tmp_path):
    df, summ, _ = _prio_case(tmp_path, "OFF")
    assert df.loc[3, "start"] == 1000.0                   # waits for a gpu job to end
    assert "preemptions" not in df.columns and "preemptions" not in summ


def test_preempt_none_never_preempts(tmp_path):
    df, summ, _ = _prio_case(tmp_path, "REQUEUE", "PreemptType=preempt/none\n")
    assert df.loc[3, "start"] == 1000.0 and "preemptions" not in summ


def test_exempt_time_delays_preemption(tmp_path):
    # A and B started at 0 are exempt until 200: the first pass after that is the backfill cycle at 220
    # (cycles at 100 (U's submit), then every 30 s: 190 + 30; backfill.c's _try_sched preempts, 22.05)
    df, _, _ = _prio_case(tmp_path, extra="PreemptExemptTime=00:03:20\n")
    assert df.loc[3, "start"] == 220.0 and df.loc[1, "preemptions"] == 1 and df.loc[2, "preemptions"] == 0


def test_qos_preemption(tmp_path):
    conf = ("PreemptType=preempt/qos\nPreemptMode=REQUEUE\nAuthInfo=cred_expire=5\nNodeName=n[1-2] CPUs=1\n"
            "PartitionName=all Nodes=n[1-2] Default=YES\n")
    acc = '[qos.normal]\nPriority = 10\n[qos.high]\nPriority = 100\nPreempt = "normal"\n'
    cols = {"qos_name": np.array(["normal", "normal", "high"], dtype=object)}
    df, summ, _ = _run(tmp_path, conf, [0, 0, 100], [1000, 1000, 3], [1, 1, 1], cols, 2, acc)
    assert df.loc[3, "start"] == 100.0 and df.loc[1, "end"] == 1120.0 and df.loc[1, "preemptions"] == 1
    # the same without the Preempt list: high may not preempt normal
    acc2 = '[qos.normal]\nPriority = 10\n[qos.high]\nPriority = 100\nPreemptMode = "CANCEL"\n'
    df2, summ2, _ = _run(tmp_path, conf, [0, 0, 100], [1000, 1000, 3], [1, 1, 1], cols, 2, acc2)
    assert df2.loc[3, "start"] == 1000.0 and "preemptions" not in summ2


def test_cons_tres_minimum_set_after_reorder(tmp_path):
    """Two nodes of 4 cores. A (2 nodes x 2 cores), B (n1, 2 cores), C (n2, 2 cores) fill them; U asks
    1 node x 4 cores. Candidates by tier << 16 + nodes: B, C, A. cons_common ``_run_now``: removing B,
    C, A fits U on n1 -> re-sort [A, B, C]; A, B fits -> re-sort [B, A, C]; B, A fits (third success,
    preempt_reorder_count 1): victims B and A (both on n1), C keeps running. U runs on n1's cores at
    100; A and B (EligibleTime 106) restart at the periodic pass at 120 (A: n1 and n2 cores 0-1, B: n1
    cores 2-3)."""
    conf = ("SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nSchedulerParameters=bf_resolution=1\n"
            "PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE\nAuthInfo=cred_expire=5\n"
            "NodeName=n[1-2] CPUs=4\nPartitionName=gpu Nodes=n[1-2] PriorityTier=1 Default=YES\n"
            "PartitionName=urgent Nodes=n[1-2] PriorityTier=10 PreemptMode=OFF\n")
    cols = {"req_nodes": np.array([2, 1, 1, 1]), "cpus_per_node": np.array([2, 2, 2, 4]),
            "partition_name": np.array(["gpu", "gpu", "gpu", "urgent"], dtype=object)}
    df, summ, s = _run(tmp_path, conf, [0, 0, 0, 100], [1000, 1000, 1000, 3], [4, 2, 2, 4], cols, 8)
    assert df.loc[4, "start"] == 100.0 and df.loc[4, "nodes"] == "0-3"
    assert df.loc[[1, 2, 3], "preemptions"].tolist() == [1, 1, 0]
    assert df.loc[1, "end"] == 1120.0 and df.loc[2, "end"] == 1120.0 and df.loc[3, "end"] == 1000.0
    assert df.loc[1, "nodes"] == "0-1,4-5" and df.loc[2, "nodes"] == "2-3" and df.loc[3, "nodes"] == "6-7"
    ends = {j: float(df.loc[int(s.job_id[j]), "end"]) for j in s.led.record}
    check_ledger(s.led.record, ends, s.tm)       # last allocations: no core held twice


@pytest.mark.parametrize("line, msg", [
    ("PreemptType=preempt/partition_prio\nPreemptMode=SUSPEND,GANG\n", "SUSPEND and GANG are not modelled"),
    ("PreemptType=preempt/partition_prio\n", "are incompatible"),
    ("PreemptType=preempt/none\nPreemptMode=REQUEUE\n", "are incompatible"),
    ("PreemptType=preempt/job_prio\nPreemptMode=REQUEUE\n", "PreemptType: 'preempt/job_prio' is not modelled"),
    ("PreemptType=preempt/qos\nPreemptMode=REQUEUE\nAuthInfo=cred_expire=3\n", "cred_expire=3: must be an integer >= 5"),
    ("PreemptType=preempt/qos\nPreemptMode=REQUIEM\n", "'REQUIEM' is not a PreemptMode"),
])
def test_bad_preemption_keys(tmp_path, line, msg):
    f = tmp_path / "slurm.conf"
    f.write_text(line + "NodeName=n[1-2] CPUs=1\n")
    with pytest.raises(SlurmConfError, match=msg) as e:
        make_slurm_scheduler(str(f), {})
    assert str(e.value).startswith(f"{f}:")              # names the file and its line


def test_qos_preempt_names_unknown_qos(tmp_path):
    conf = "PreemptType=preempt/qos\nPreemptMode=REQUEUE\nNodeName=n[1-2] CPUs=1\n"
    acc = '[qos.high]\nPriority = 100\nPreempt = "nromal"\n'
    with pytest.raises(SlurmConfError, match="qos.high.Preempt: QOS 'nromal' is not defined"):
        _run(tmp_path, conf, [0], [10], [1], {"qos_name": np.array(["high"], dtype=object)}, 2, acc)
