"""A sacct dump with no machine size runs on the machine its slurm.conf describes (the Slurm entry's
``machine`` hook, `schedulers.slurm_tres.slurm_conf_machine`), counted in CPUs under cons_tres."""
from __future__ import annotations

import pytest

from hpctwin.twin.errors import RunConfigError
from hpctwin.twin.run import RunConfig, run

pytestmark = pytest.mark.filterwarnings("ignore:.*read but not modelled")

DUMP = ("JobID|JobIDRaw|User|Partition|Submit|Start|End|Elapsed|Timelimit|NNodes|NCPUS|State\n"
        "1|1|a|p|1000|1000|1100|00:01:40|00:05:00|1|2|COMPLETED\n"
        "2|2|a|p|1000|1000|1100|00:01:40|00:05:00|1|2|COMPLETED\n"
        "3|3|a|p|1001|1001|1101|00:01:40|00:05:00|1|4|COMPLETED\n")


def _run(tmp_path, select: str, **extra):
    dump, conf = tmp_path / "d.txt", tmp_path / "slurm.conf"
    dump.write_text(DUMP)
    conf.write_text(f"SelectType={select}\nSelectTypeParameters=CR_Core\nNodeName=n[1-2] CPUs=4\n"
                    "PartitionName=p Nodes=n[1-2] Default=YES\n")
    opts = {"scheduler": {"slurm_conf": str(conf)}} if select else {}
    return run(RunConfig(workload=str(dump), scheduler="slurm", options=opts, **extra))


def test_cons_tres_machine_from_slurm_conf(tmp_path):
    """2 nodes x 4 CPUs, no --nodes: 8 CPUs; jobs 1 and 2 (2 CPUs each) share n1 at 0, job 3 (4 CPUs)
    takes n2 at 1."""
    r = _run(tmp_path, "select/cons_tres")
    assert r.summary["machine_units"] == 8
    assert "from slurm.conf" in r.summary["machine_size_source"]
    assert r.jobs.start.tolist() == [0.0, 0.0, 1.0]
    assert r.jobs.nodes.tolist() == ["0-1", "2-3", "4-7"]


def test_linear_machine_is_its_nodes(tmp_path):
    """select/linear: whole nodes, 2 units; job 3 waits for a node until 100."""
    r = _run(tmp_path, "select/linear")
    assert r.summary["machine_units"] == 2
    assert r.jobs.start.tolist() == [0.0, 0.0, 100.0]


def test_nodes_option_still_wins_and_no_conf_is_an_error(tmp_path):
    r = _run(tmp_path, "select/linear", nodes=2)
    assert r.summary["machine_size_source"] == "--nodes option" and r.jobs.start.tolist() == [0.0, 0.0, 100.0]
    with pytest.raises(RunConfigError, match="machine size unknown"):
        _run(tmp_path, "")
