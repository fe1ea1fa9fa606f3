"""Issue 27 leftovers: preemption by the partition a job runs in, and preemption in backfill (Slurm 22.05,
tag slurm-22-05-8-1; schedulers/slurm_preempt.py).

* preempt_partition_prio.c ``preempt_p_preemptable`` / ``_job_preempt_mode`` / ``_gen_job_prio`` read the
  running job's ``part_ptr``: the partition of the queue record it started from (job_scheduler.c
  ``_schedule`` and backfill.c ``_attempt_backfill`` set ``job_ptr->part_ptr = part_ptr`` per record), so a
  job of ``-p lo,mid`` started from its ``mid`` record is a ``mid`` job for every later preemptor.
* backfill.c ``_try_sched`` hands ``slurm_find_preemptable_jobs`` to the select plugin's will-run test,
  which removes every candidate first (select_linear.c / cons_common ``_will_run_test``: "Test with all
  preemptable jobs gone", start = now "for backfill scheduler to initiate preemption"); ``_start_job`` ->
  ``select_nodes`` -> ``_pick_best_nodes`` -> ``_run_now`` picks the minimum set and ``_preempt_jobs``
  preempts it. No ``bf_*`` option turns this off in 22.05.

Times in s; requested times as given; ``AuthInfo=cred_expire=5`` (a requeued job is eligible 6 s later).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hpctwin.schedulers.slurm import make_slurm_scheduler
from hpctwin.twin.contract import RunModel
from hpctwin.twin.run import RunConfig, run, simulate
from hpctwin.twin.workload import Workload

pytestmark = pytest.mark.filterwarnings("ignore:.*read but not modelled")

HEAD = "PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE\nAuthInfo=cred_expire=5\n"


def _wl(submit, runtime, req, procs, cols) -> Workload:
    n = len(submit)
    return Workload.from_arrays("t", submit=submit, runtime=runtime, procs=procs, requested_time=req,
                                user=[0] * n, group=[0] * n, job_id=np.arange(1, n + 1), columns=cols)


def _run(tmp_path: Path, conf: str, wl: Workload, units: int):
    f = tmp_path / "slurm.conf"
    f.write_text(conf)
    s = make_slurm_scheduler(str(f), {})
    r = run(RunConfig(workload="t", scheduler=s, nodes=units), workload=wl)
    return r.jobs.set_index("job_id"), r.summary


# ---------------------------------------------------------------------- the partition a job runs in
MULTI = """SelectType=select/cons_tres
SelectTypeParameters=CR_Core
NodeName=n[1-2] CPUs=2
PartitionName=lo Nodes=n[1-2] PriorityTier=1 Default=YES
PartitionName=mid Nodes=n[1-2] PriorityTier=5 {mid}
PartitionName=hi Nodes=n[1-2] PriorityTier=3 PreemptMode=OFF
PartitionName=top Nodes=n[1-2] PriorityTier=10 PreemptMode=OFF
"""


def _multi(tmp_path, mid: str, part: str):
    """X (``-p lo,mid``, 2 nodes x 2 cores, 1000 s) starts at 0 from its ``mid`` record (tier 5 sorts
    first); P (``part``, 1 node x 2 cores, 50 s, limit 160) arrives at 100."""
    cols = {"req_nodes": np.array([2, 1]), "cpus_per_node": np.array([2, 2]),
            "partition_name": np.array(["lo,mid", part], dtype=object)}
    return _run(tmp_path, HEAD + MULTI.format(mid=mid), _wl([0, 100], [1000, 50], [2060, 160], [4, 2], cols), 4)


def test_a_job_of_two_partitions_is_judged_by_the_one_it_runs_in(tmp_path):
    """P in ``hi`` (tier 3) may not preempt X: X runs in ``mid`` (tier 5), not in ``lo`` (tier 1, its
    first listed partition, which the twin used before). P starts when X ends, at 1000."""
    df, summ = _multi(tmp_path, "", "hi")
    assert df.loc[1, "start"] == 0.0 and df.loc[1, "end"] == 1000.0
    assert df.loc[2, "start"] == 1000.0 and "preemptions" not in summ


def test_a_higher_tier_still_preempts_it(tmp_path):
    """P in ``top`` (tier 10 > 5): X is requeued at 100 (eligible 106), P runs 100-150 on n1's cores,
    X restarts at P's end, 150, and ends at 1150."""
    df, _ = _multi(tmp_path, "", "top")
    assert df.loc[2, "start"] == 100.0 and df.loc[2, "nodes"] == "0-1"
    assert df.loc[1, "preemptions"] == 1 and df.loc[1, "end"] == 1150.0


def test_the_mode_is_the_running_partitions(tmp_path):
    """``mid`` has PreemptMode=OFF: X (running in mid) is never preempted, even by tier 10
    (``preempt_p_preemptable``: the preemptee partition's mode OFF); P waits for X's end."""
    df, summ = _multi(tmp_path, "PreemptMode=OFF", "top")
    assert df.loc[2, "start"] == 1000.0 and "preemptions" not in summ


# ---------------------------------------------------------------------- backfill preempts (whole nodes)
WHOLE = """NodeName=n[1-3] CPUs=1
PartitionName=gpu Nodes=n[1-2] PriorityTier=1 Default=YES
PartitionName=svc Nodes=n3 PriorityTier=1 PreemptMode=OFF
PartitionName=urgent Nodes=n[1-3] PriorityTier=10 PreemptMode=OFF
"""


def _blocked_urgent(tmp_path, extra: str = ""):
    """A, B (gpu, n1 and n2) and C (svc, n3, not preemptable) run from 0 for 1000 s (limit 2060). At 100
    U1 (urgent, 3 nodes, 50 s, limit 100) and U2 (urgent, 1 node, 50 s, limit 500) arrive. The event pass
    at 100 cannot start U1 even by preempting A and B (C holds n3): ``urgent`` fails, and with it U2."""
    cols = {"partition_name": np.array(["gpu", "gpu", "svc", "urgent", "urgent"], dtype=object)}
    wl = _wl([0, 0, 0, 100, 100], [1000, 1000, 1000, 50, 50], [2060, 2060, 2060, 100, 500], [1, 1, 1, 3, 1],
             cols)
    return _run(tmp_path, HEAD + extra + WHOLE, wl, 3)


def test_backfill_preempts_for_a_job_the_main_pass_skipped(tmp_path):
    """The backfill cycle at 100 (U1, U2's submit): U1's will-run without its candidates A, B waits for
    C (1000): a reservation [1000, 1100); U2's will-run without them starts now, [100, 600) ends before
    that reservation: ``_run_now``'s minimum set is A (equal ``_gen_job_prio``, job order): A is requeued
    and U2 starts at 100 on n1. U2 ends at 150; the event pass then fails ``urgent`` again (U1) and the
    failed partition's nodes leave the pass, so A (eligible 106) waits; B and C end at 1000: U1 starts
    (1000-1050) and A restarts at 1050, ending at 2050."""
    df, summ = _blocked_urgent(tmp_path)
    assert (df.loc[5, "start"], df.loc[5, "nodes"]) == (100.0, "0")
    assert df.loc[1, "preemptions"] == 1 and df.loc[1, "segments"] == 2 and df.loc[1, "end"] == 2050.0
    assert (df.loc[4, "start"], df.loc[4, "nodes"]) == (1000.0, "0-2")
    assert df.loc[2, "preemptions"] == 0 and df.loc[3, "end"] == 1000.0
    st = summ["scheduler_params"]["stats"]
    assert st["backfill_starts"] == 1 and st["preemptions"] == 1


def test_without_backfill_the_job_waits(tmp_path):
    """sched/builtin: no backfill cycle, so nothing preempts for U2; at 1000 U1 (nodes free: n2, n3;
    A on n1 preempted) starts, U2 follows at U1's end, 1050, A restarts on another node then."""
    df, _ = _blocked_urgent(tmp_path, "SchedulerType=sched/builtin\n")
    assert df.loc[5, "start"] == 1050.0 and df.loc[4, "start"] == 1000.0


# ---------------------------------------------------------------------- backfill's preemption, shared nodes
SHARED = """SelectType=select/cons_tres
SelectTypeParameters=CR_Core
NodeName=n[1-2] CPUs=2
PartitionName=gpu Nodes=n[1-2] PriorityTier=1 Default=YES
PartitionName=svc Nodes=n2 PriorityTier=1 PreemptMode=OFF
PartitionName=urgent Nodes=n[1-2] PriorityTier=10 PreemptMode=OFF
"""


class _Probe(RunModel):
    """A run model calling the policy's `_preempt_tres_backfill` at t=101 (where backfill.c's
    ``_try_sched`` would), for U1 (index 2) and U2 (index 3) of partition ``urgent`` (index 2)."""

    name = "probe"

    def __init__(self, sched):
        self.s, self.out = sched, {}

    def bind(self, ctx):
        self.done = False

    def next_event(self, now):
        return None if self.done else 101.0

    def on_event(self, now, control):
        self.done = True
        s = self.s
        self.out["U1"] = s._preempt_tres_backfill(now, 2, 2, 0b11, s._tres_running(), None, now)
        self.out["U2"] = s._preempt_tres_backfill(now, 3, 2, 0b11, s._tres_running(), None, now)


def test_shared_backfill_preemption(tmp_path):
    """cons_tres, 2 nodes x 2 cores. A (gpu, n1) and C (svc, n2, not preemptable) run from 0 (limit
    2060); U1 (urgent, 2 nodes x 2 cores) and U2 (urgent, 1 node x 2 cores, limit 500) pend from 100
    (``urgent`` fails at U1 in every main pass: C holds n2). The backfill cycle at 100 (``_try_sched``
    with preemptee candidates): U1's will-run without A still needs n2, start 2060 (C's planned end),
    nothing preempted; U2's is now: A is preempted (REQUEUE) and U2 starts at 100 on n1's two cores.
    At 101 the function finds no candidate left for U1 (U2 is in its own tier): it returns the cycle's
    running list (U2 to 600, C to 2060) and the will-run it was given, unchanged."""
    f = tmp_path / "slurm.conf"
    f.write_text(HEAD + SHARED)
    s = make_slurm_scheduler(str(f), {})
    probe = _Probe(s)
    cols = {"req_nodes": np.array([1, 1, 2, 1]), "cpus_per_node": np.array([2, 2, 2, 2]),
            "partition_name": np.array(["gpu", "svc", "urgent", "urgent"], dtype=object)}
    wl = _wl([0, 0, 100, 100], [1000, 1000, 50, 50], [2060, 2060, 100, 500], [2, 2, 4, 2], cols)
    r = simulate(RunConfig(workload="t", scheduler=s, nodes=4), wl, extra_models=[probe])
    assert probe.out["U1"] == ([(600.0, 4, 3), (2060.0, 2, 1)], None)
    df = r.jobs.set_index("job_id")
    assert df.loc[1, "preemptions"] == 1 and df.loc[4, "start"] == 100.0 and df.loc[4, "nodes"] == "0-1"
    assert df.loc[3, "start"] == 1000.0 and df.loc[2, "preemptions"] == 0
