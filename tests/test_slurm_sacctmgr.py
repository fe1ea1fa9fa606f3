"""The accounts file as a sacctmgr command script (`schedulers.slurm_sacctmgr`): the same tables as the
accounts TOML, errors naming file, line and word."""
from __future__ import annotations

from pathlib import Path

import pytest

from hpctwin.schedulers.slurm_limits import load_limits
from hpctwin.schedulers.slurm_priority import AccountsError, load_accounts
from hpctwin.schedulers.slurm_sacctmgr import is_sacctmgr_script, read_sacctmgr

TRUTH = Path(__file__).parent / "data" / "slurm_truth"

SCRIPT = """# QOS and associations of the GPU cluster
sacctmgr -i modify qos where name=normal set Priority=10 MaxJobsPU=5
sacctmgr -i add qos high Priority=100 maxjobsperuser=2 MaxTRESPU=gres/gpu=8 Preempt=normal
add account physics,chem cluster=c1 Fairshare=40 Description="two groups"
add account theory Parent=physics Fairshare=10 GrpTRES=gres/gpu=16
add user alice,bob account=physics qos=normal,high defaultqos=normal Fairshare=2
modify user where name=bob set MaxJobs=3
"""


def test_script_gives_the_toml_tables(tmp_path):
    f = tmp_path / "acct.sacctmgr"
    f.write_text(SCRIPT)
    data, lines = read_sacctmgr(SCRIPT, f)
    assert data["qos"] == {"normal": {"Priority": 10, "MaxJobsPerUser": 5},
                           "high": {"Priority": 100, "MaxJobsPerUser": 2, "MaxTRESPerUser": "gres/gpu=8",
                                    "Preempt": "normal"}}
    assert data["accounts"] == {"physics": {"shares": 40}, "chem": {"shares": 40},
                                "theory": {"parent": "physics", "shares": 10, "GrpTRES": "gres/gpu=16"}}
    assert data["users"] == {"alice": {"shares": 2}, "bob": {"shares": 2, "MaxJobs": 3}}
    assert lines[("qos.high", "MaxTRESPerUser")] == 3 and lines[("users.bob", "MaxJobs")] == 7
    a = load_accounts(f)
    assert (a.qos["high"].priority, a.qos["high"].max_jobs_per_user, a.qos["high"].max_tres_per_user) == \
        (100, 2, {"gres/gpu": 8})
    assert a.account_parent == {"theory": "physics"} and a.account_shares["theory"] == 10.0
    assert a.user_shares == {"alice": 2.0, "bob": 2.0}
    lim = load_limits(f, a.account_parent)
    assert lim.users["bob"].max_jobs == 3


def test_the_recorded_cases_scripts_equal_their_toml():
    """The sacctmgr.txt Slurm was given and the hand translation accounts.toml: the same QOS and shares."""
    for case in ("gpu_share", "preempt"):
        s, t = load_accounts(TRUTH / case / "sacctmgr.txt"), load_accounts(TRUTH / case / "accounts.toml")
        assert s.qos == t.qos, case
        assert {k: v for k, v in s.account_shares.items() if v != 1.0} == \
            {k: v for k, v in t.account_shares.items() if v != 1.0}
        assert all(v == 1.0 for v in s.user_shares.values())


@pytest.mark.parametrize("line, msg", [
    ("delete qos high", "delete: not read (add, create, modify and update are"),
    ("add qos high Priorty=5", "priorty: not a qos key read here"),
    ("add cluster c1", "cluster: not read (qos, account and user are)"),
    ("add qos Priority=5", "add qos: give the name(s) first"),
    ("modify qos where name=normal Priority=5", "modify qos: expected 'where name=NAME set KEY=VALUE ...'"),
    ("modify qos where flags=x set Priority=5", "modify qos: select by name"),
    ("add user alice account=a Parent=x", "parent: not a user key read here"),
    ("add qos high Priority", "'Priority': expected KEY=VALUE"),
    ("add qos high Priority=abc", "qos.high.priority: expected an integer >= 0"),
])
def test_bad_lines_name_file_line_and_word(tmp_path, line, msg):
    f = tmp_path / "a.txt"
    f.write_text("# header\n\n" + line + "\n")
    with pytest.raises(AccountsError) as e:
        load_accounts(f)
    assert msg in str(e.value)
    # a value the accounts loader checks is named by file and key; everything else by file:line
    assert str(e.value).startswith(f"{f}: qos.high.priority" if "qos.high.priority" in msg else f"{f}:3: ")


def test_detection_and_toml_still_read(tmp_path):
    assert is_sacctmgr_script("# c\n\nsacctmgr -i add qos x\n")
    assert not is_sacctmgr_script("[qos.high]\npriority = 1\n")
    f = tmp_path / "a.toml"
    f.write_text("[qos.high]\npriority = 7\n")
    assert load_accounts(f).qos["high"].priority == 7
    f.write_text("add = [\n")
    with pytest.raises(AccountsError, match="expected the accounts TOML or a sacctmgr command script"):
        load_accounts(f)
