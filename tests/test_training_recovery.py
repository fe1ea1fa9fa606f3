"""Training model: failure rates from the Llama 3 report, checkpoint / restart costs, goodput of
checkpoint/restart and of checkpoint-free fast recovery."""
from __future__ import annotations

import math

import pytest
from hpctwin.twin import resilience as rs
from hpctwin.twin.training import TrainingConfigError
from hpctwin.twin.training.failure_rates import (
    LLAMA3_TABLE5,
    SOURCES,
    check_consistency,
    failure_source,
    failures_per_day,
    job_mtbf_s,
)
from hpctwin.twin.training.models import MODELS, total_params
from hpctwin.twin.training.recovery import (
    CHECKPOINT_BYTES_PER_PARAM,
    RestartModel,
    checkpoint_bytes,
    checkpoint_restart_goodput,
    fast_recovery_goodput,
    recovery_costs,
)
from hpctwin.twin.training.storage import PFS_CLIENT_CAP

DAY = 86400.0


# ---------------------------------------------------------------------------------------- failure rates
def test_llama3_table5_adds_up_to_419_unexpected_interruptions():
    check_consistency()
    assert sum(LLAMA3_TABLE5.values()) == 419 and len(LLAMA3_TABLE5) == 18
    assert (SOURCES["llama3"].events, SOURCES["llama3-hardware"].events, SOURCES["llama3-gpu"].events) == (419, 356, 268)


def test_per_gpu_rate_gives_the_run_s_mtbf_and_matches_the_per_node_anchor():
    src = failure_source("llama3")
    assert job_mtbf_s("llama3", 16384) == pytest.approx(54 * DAY / 419, rel=1e-12)      # about 3.1 h
    assert failures_per_day(src, 16384) == pytest.approx(419 / 54, rel=1e-12)
    # the per-GPU rate times 8 GPUs is the per-node MTBF twin.resilience derives from the same anchor
    assert job_mtbf_s(src, 8) == pytest.approx(rs.LLAMA3_NODE_MTBF_S, rel=1e-12)
    assert src.gpu_mtbf_days == pytest.approx(16384 * 54 / 419)
    assert job_mtbf_s("llama3-gpu", 1024) > job_mtbf_s("llama3", 1024)


def test_bad_failure_inputs():
    with pytest.raises(KeyError, match="unknown failure source 'meta'; known: llama3, llama3-hardware, llama3-gpu"):
        failure_source("meta")
    with pytest.raises(ValueError, match="gpus = 0: expected an integer >= 1"):
        job_mtbf_s("llama3", 0)


# ---------------------------------------------------------------------------------------- costs
def test_checkpoint_bytes_are_14_bytes_per_parameter():
    assert CHECKPOINT_BYTES_PER_PARAM == 14.0
    assert checkpoint_bytes("llama3-405b") == 14.0 * total_params(MODELS["llama3-405b"])
    assert 5.6e12 < checkpoint_bytes("llama3-405b") < 5.8e12


def test_write_time_from_the_shared_file_system():
    nbytes = checkpoint_bytes("llama3-405b")
    agg = 2e12 * 16384 / 24576                       # Tectonic's per-GPU share on a 16,384-GPU machine
    small = recovery_costs("llama3-405b", "dgx-h100", 256, machine_gpus=16384)          # 32 nodes, client-bound
    assert small.write_bw == 32 * PFS_CLIENT_CAP
    assert small.checkpoint_s == pytest.approx(nbytes / (32 * PFS_CLIENT_CAP), rel=1e-12)
    big = recovery_costs("llama3-405b", "dgx-h100", 16384, machine_gpus=16384)          # aggregate-bound
    assert big.checkpoint_s == pytest.approx(nbytes / agg, rel=1e-12)
    # a job checkpointing while the rest of the machine does is slower: its share is nodes / all nodes
    shared = recovery_costs("llama3-405b", "dgx-h100", 256, machine_gpus=16384, other_writer_nodes=2048 - 32)
    assert shared.checkpoint_s == pytest.approx(nbytes / (agg * 32 / 2048), rel=1e-12)
    assert shared.checkpoint_s > 30 * small.checkpoint_s


def test_restart_grows_with_the_job_and_young_daly_come_from_the_costs():
    rm = RestartModel()
    a = recovery_costs("llama3-405b", "dgx-h100", 4096, machine_gpus=16384)
    b = recovery_costs("llama3-405b", "dgx-h100", 8192, machine_gpus=16384)
    assert a.reload_s == pytest.approx(b.reload_s)                     # both read at the aggregate's rate
    assert b.restart_s - a.restart_s == pytest.approx(rm.init_per_node_s * (1024 - 512), rel=1e-12)
    assert a.restart_s == pytest.approx(60 + 120 + 0.1 * 512 + a.reload_s, rel=1e-12)
    assert a.daly_s == pytest.approx(rs.daly_interval(a.checkpoint_s, a.mtbf_s), rel=1e-12)
    assert a.young_s == pytest.approx(math.sqrt(2 * a.checkpoint_s * a.mtbf_s), rel=1e-12)
    assert a.mtbf_s == pytest.approx(2 * b.mtbf_s, rel=1e-12)


def test_bad_recovery_inputs():
    with pytest.raises(TrainingConfigError, match="gpus = 0"):
        recovery_costs("llama3-8b", "dgx-h100", 0)
    with pytest.raises(TrainingConfigError, match="other_writer_nodes = -1"):
        recovery_costs("llama3-8b", "dgx-h100", 8, other_writer_nodes=-1)
    with pytest.raises(TrainingConfigError, match="unknown failure source 'x'"):
        recovery_costs("llama3-8b", "dgx-h100", 8, "x")
    with pytest.raises(TrainingConfigError, match="machine_gpus = 8: fewer than the job's 16 GPUs"):
        recovery_costs("llama3-8b", "dgx-h100", 16, machine_gpus=8)
    with pytest.raises(TrainingConfigError, match="unknown model 'gpt5'"):
        recovery_costs("gpt5", "dgx-h100", 8)
    c = recovery_costs("llama3-8b", "dgx-h100", 8)
    with pytest.raises(TrainingConfigError, match="step_s = 0"):
        fast_recovery_goodput(c, 0)


# ---------------------------------------------------------------------------------------- goodput
def test_goodput_is_daly_s_renewal_formula():
    c = recovery_costs("llama3-405b", "dgx-h100", 4096, machine_gpus=16384)
    g = checkpoint_restart_goodput(c)
    ref = rs.expected_wall_time(DAY, c.mtbf_s, c.daly_s, c.checkpoint_s, c.restart_s)
    assert g.ettr == pytest.approx(DAY / ref, rel=1e-12) and g.interval_s == c.daly_s
    assert g.lost_gpu_hours_per_day == pytest.approx(4096 * 24 * (1 - g.ettr), rel=1e-12)
    f = fast_recovery_goodput(c, 8.5)
    assert f.ettr == pytest.approx(DAY / rs.expected_wall_time(DAY, c.mtbf_s, 8.5, 0.0, 150.0), rel=1e-12)
    assert f.per_failure_s == rs.FLASHRECOVERY_RECOVERY_S == 150.0


def test_flashrecovery_s_qualitative_result_fast_recovery_degrades_far_less_with_scale():
    """Checkpoint/restart loses more and more as the job grows (shorter MTBF, longer restarts); the
    checkpoint-free, scale-independent recovery keeps goodput high: lost GPU-hours several times lower."""
    cr, fr = [], []
    for gpus in (256, 1024, 4096, 16384):
        c = recovery_costs("llama3-405b", "dgx-h100", gpus, machine_gpus=16384)
        cr.append(checkpoint_restart_goodput(c))
        fr.append(fast_recovery_goodput(c, 8.5))
    assert [g.ettr for g in cr] == sorted((g.ettr for g in cr), reverse=True)
    assert all(f.ettr > g.ettr for f, g in zip(fr, cr))
    assert cr[-1].ettr < 0.95 and fr[-1].ettr > 0.98                 # at 16k GPUs: ~0.94 vs ~0.99
    assert cr[-1].lost_gpu_hours_per_day > 4 * fr[-1].lost_gpu_hours_per_day
    assert cr[0].ettr - cr[-1].ettr > 3 * (fr[0].ettr - fr[-1].ettr)      # 5.6 vs 1.4 points
