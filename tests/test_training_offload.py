"""Training model: storage tiers and offload (ZeRO-Offload/Infinity one tier, MLP-Offload several tiers)."""
from __future__ import annotations

import json

import pytest
from hpctwin.twin.training import (
    BatchConfig,
    ParallelConfig,
    TrainingConfigError,
    iteration_time,
)
from hpctwin.twin.training.cli import main
from hpctwin.twin.training.constants import CONSTANTS
from hpctwin.twin.training.estimate import estimate
from hpctwin.twin.training.hardware import system_preset
from hpctwin.twin.training.memory import memory_per_gpu, stage_params
from hpctwin.twin.training.models import MODELS
from hpctwin.twin.training.offload import (
    TierPath,
    allocate,
    fit_with_offload,
    offload_iteration,
    parse_offload,
    tier_paths,
)
from hpctwin.twin.training.storage import (
    PFS_CLIENT_CAP,
    STREAM_EFFICIENCY,
    pfs_job_bandwidth,
    storage_for,
)

M70 = MODELS["llama3-70b"]
FRONTIER = system_preset("frontier")
PAR = ParallelConfig(tp=1, pp=1, dp=8, zero=3, recompute="full")
BATCH = BatchConfig(4096, 16, 1)


@pytest.fixture(scope="module")
def base():
    bd = iteration_time(M70, FRONTIER, PAR, BATCH)
    mem = memory_per_gpu(M70, PAR, BATCH, FRONTIER.gpu.memory_bytes)
    return bd, mem


# ---------------------------------------------------------------------------------------- storage
def test_frontier_storage_figures_from_their_sources():
    st = storage_for("frontier")
    assert st.host_link_bw == 36e9 and st.host.capacity == 512e9          # OLCF user guide
    assert st.nvme.capacity == pytest.approx(3.84e12)
    assert st.nvme.read_bw == pytest.approx(75e12 / 9408) and st.nvme.write_bw == pytest.approx(35e12 / 9408)
    assert (st.pfs.read_bw, st.pfs.write_bw) == (5.5e12, 4.6e12)            # Orion capacity tier
    assert st.host_usable == pytest.approx(0.8 * 512e9)


def test_pfs_bandwidth_is_shared_with_other_writers_and_capped_per_node():
    st = storage_for("frontier")
    assert pfs_job_bandwidth(st, 4, 75264, "write") == 4 * PFS_CLIENT_CAP          # client-bound when alone
    # a 1,000-node job alone gets the whole aggregate; with 1,000 other writers half of it
    assert pfs_job_bandwidth(st, 1000, 75264, "write") == pytest.approx(4.6e12)
    assert pfs_job_bandwidth(st, 1000, 75264, "write", 1000) == pytest.approx(2.3e12)
    assert pfs_job_bandwidth(st, 1000, 75264, "read", 1000) == pytest.approx(2.75e12)
    # the DGX file system is a per-GPU share of Tectonic (2 TB/s for 24,576 GPUs)
    dgx = storage_for("dgx-h100")
    assert dgx.pfs_aggregate(24576) == (2e12, 2e12)
    assert dgx.pfs_aggregate(1024) == pytest.approx((2e12 / 24, 2e12 / 24))
    with pytest.raises(ValueError, match="job_nodes = 0"):
        pfs_job_bandwidth(st, 0, 8, "write")


# ---------------------------------------------------------------------------------------- parsing
@pytest.mark.parametrize("text,msg", [
    ("ssd", "unknown tier 'ssd'"),
    ("nvem", "did you mean 'nvme'?"),
    ("cpu+cpu", "a tier is named twice"),
    ("", "expected none, or tiers among cpu, nvme, pfs"),
])
def test_bad_offload_text(text, msg):
    with pytest.raises(TrainingConfigError, match=msg.replace("?", r"\?")):
        parse_offload(text)


def test_parse_offload_values():
    assert parse_offload("none") is None and parse_offload(" NONE ") is None
    s = parse_offload("pfs+cpu+nvme", "both", 0.5, 3)
    assert s.tiers == ("cpu", "nvme", "pfs") and s.style == "multipath" and s.text == "cpu+nvme+pfs"
    assert s.optimizer and s.params and s.overlap == 0.5 and s.other_io_nodes == 3
    assert parse_offload("nvme").style == "zero"
    with pytest.raises(TrainingConfigError, match="--offload-overlap 1.5: expected a share in"):
        parse_offload("cpu", overlap=1.5)
    with pytest.raises(TrainingConfigError, match="--offload-what 'grads'"):
        parse_offload("cpu", "grads")
    with pytest.raises(TrainingConfigError, match="--other-io-nodes -1"):
        parse_offload("pfs", other_io_nodes=-1)


# ---------------------------------------------------------------------------------------- allocation
PATHS = {"cpu": TierPath("cpu", 100.0, 1e3, 1e3), "nvme": TierPath("nvme", 1000.0, 3.0, 1.5),
         "pfs": TierPath("pfs", 1e9, 2.0, 2.0)}


def test_one_tier_holds_everything_or_reports_what_does_not_fit():
    assert allocate(50.0, ("nvme",), PATHS, {}) == {"nvme": 50.0, "unplaced": 0.0}
    assert allocate(150.0, ("cpu",), PATHS, {}) == {"cpu": 100.0, "unplaced": 50.0}


def test_several_tiers_dram_first_then_in_proportion_to_round_trip_bandwidth():
    # round trips: nvme 1/(1/3 + 1/1.5) = 1, pfs 1/(1/2 + 1/2) = 1 -> equal split of what DRAM cannot hold
    out = allocate(300.0, ("cpu", "nvme", "pfs"), PATHS, {})
    assert out == {"cpu": 100.0, "nvme": 100.0, "pfs": 100.0, "unplaced": 0.0}
    # a full tier passes its share on (water-filling)
    out = allocate(3000.0, ("nvme", "pfs"), PATHS, {})
    assert out["nvme"] == 1000.0 and out["pfs"] == 2000.0 and out["unplaced"] == 0.0
    # bytes already used count against the capacity
    assert allocate(30.0, ("cpu", "nvme"), PATHS, {"cpu": 90.0}) == {"cpu": 10.0, "nvme": 20.0, "unplaced": 0.0}


# ---------------------------------------------------------------------------------------- iteration
def test_nvme_offload_terms_match_the_formulas(base):
    bd, mem = base
    st = storage_for("frontier")
    r = offload_iteration(M70, FRONTIER, PAR, BATCH, bd, mem, parse_offload("nvme"))
    n = stage_params(M70, 1, 1, 1, "first") / 8 * 8                  # the node's 8 shards
    io = 16 * n / st.nvme.read_bw + 12 * n / st.nvme.write_bw
    cpu = CONSTANTS.optimizer_bytes_per_param * n / (st.host_mem_bw * STREAM_EFFICIENCY)
    assert r.update_io_s == pytest.approx(io, rel=1e-12) and r.cpu_adam_s == pytest.approx(cpu, rel=1e-12)
    assert r.terms["update"] == pytest.approx(max(io, cpu), rel=1e-12)
    t_bwd = 2 / 3 * (bd.compute + bd.memory_bound) / bd.microbatches
    assert r.terms["grad_flush"] == pytest.approx(max(0.0, 4 * n / st.nvme.write_bw - t_bwd), rel=1e-12)
    assert r.terms["param_copy"] == pytest.approx(2 * n / 8 / (36e9 * CONSTANTS.comm_eff), rel=1e-12)
    assert r.iteration_s == pytest.approx(bd.total - bd.optimizer + sum(v for k, v in r.terms.items()
                                                                          if k != "gpu_optimizer_removed"), rel=1e-12)
    assert r.placement == {"nvme": pytest.approx(16 * n)}


def test_optimizer_offload_frees_gpu_memory_and_needs_room_on_the_tier(base):
    bd, mem = base
    assert not mem.fits                                              # 70B on 8 GCDs: 157 GiB per GCD
    cpu = offload_iteration(M70, FRONTIER, PAR, BATCH, bd, mem, parse_offload("cpu"))
    assert cpu.memory["optimizer"] == 0.0 and cpu.fits_gpu
    assert not cpu.fits_tiers and "exceeds cpu's usable capacity (410 GB per node)" in cpu.why   # 1,129 GB of state
    nvme = offload_iteration(M70, FRONTIER, PAR, BATCH, bd, mem, parse_offload("nvme"))
    assert nvme.fits and nvme.memory_per_gpu == pytest.approx(cpu.memory_per_gpu)


def test_several_paths_beat_one_and_a_busy_file_system_slows_the_pfs_path(base):
    bd, mem = base
    t = {x: offload_iteration(M70, FRONTIER, PAR, BATCH, bd, mem, parse_offload(x)).iteration_s
         for x in ("nvme", "pfs", "nvme+pfs", "cpu+nvme+pfs")}
    assert t["cpu+nvme+pfs"] < t["nvme+pfs"] < min(t["nvme"], t["pfs"])
    busy = offload_iteration(M70, FRONTIER, PAR, BATCH, bd, mem, parse_offload("cpu+nvme+pfs", other_io_nodes=9407))
    assert t["cpu+nvme+pfs"] < busy.iteration_s < t["nvme"]           # still better than NVMe alone
    assert busy.placement["nvme"] > busy.placement["pfs"]             # the split follows the bandwidth


def test_dram_that_holds_everything_makes_several_tiers_equal_to_cpu():
    m = MODELS["megatron-310b"]
    hw = system_preset("dgx-h100")
    par = ParallelConfig(tp=1, pp=1, dp=32, zero=3, recompute="full")
    batch = BatchConfig(2048, 64, 1)
    bd = iteration_time(m, hw, par, batch)
    mem = memory_per_gpu(m, par, batch, hw.gpu.memory_bytes)
    one = offload_iteration(m, hw, par, batch, bd, mem, parse_offload("cpu"))
    several = offload_iteration(m, hw, par, batch, bd, mem, parse_offload("cpu+nvme+pfs"))
    assert one.fits and several.iteration_s == pytest.approx(one.iteration_s, rel=1e-12)
    assert several.placement["nvme"] == several.placement["pfs"] == 0.0


def test_overlap_hides_update_reads_behind_the_last_backward(base):
    bd, mem = base
    a = offload_iteration(M70, FRONTIER, PAR, BATCH, bd, mem, parse_offload("cpu+nvme+pfs"))
    b = offload_iteration(M70, FRONTIER, PAR, BATCH, bd, mem, parse_offload("cpu+nvme+pfs", overlap=1.0))
    t_bwd = 2 / 3 * (bd.compute + bd.memory_bound) / bd.microbatches
    paths = tier_paths(storage_for("frontier"), 1, 75264)
    flush = max(a.placement[t] / 4 / paths[t].write for t in ("nvme", "pfs"))   # 4 of the 16 B: the gradient
    assert 0 < flush < t_bwd
    hidden = min(t_bwd - flush, a.update_io_s - a.cpu_adam_s)
    assert a.iteration_s - b.iteration_s == pytest.approx(hidden, rel=1e-9)


def test_parameter_offload_needs_zero3_and_keeps_two_layers(base):
    bd, mem = base
    r = offload_iteration(M70, FRONTIER, PAR, BATCH, bd, mem, parse_offload("cpu", "params"))
    from hpctwin.twin.training.memory import layer_params_per_gpu
    assert r.memory["weights"] == pytest.approx(4 * layer_params_per_gpu(M70, 1, 1))
    assert r.memory["optimizer"] == mem.optimizer and r.terms["param_writeback"] > 0
    with pytest.raises(TrainingConfigError, match="--offload-what params needs --zero 3"):
        offload_iteration(M70, FRONTIER, ParallelConfig(dp=8, zero=1), BATCH, bd, mem, parse_offload("cpu", "params"))
    with pytest.raises(TrainingConfigError, match="--offload needs --zero 1, 2 or 3"):
        offload_iteration(M70, FRONTIER, ParallelConfig(dp=8, zero=0), BATCH, bd, mem, parse_offload("cpu"))


def test_fit_with_offload_names_the_fastest_configuration_that_fits(base):
    s = fit_with_offload(M70, FRONTIER, PAR, BATCH, known={3: base})
    assert s["args"] == "--zero 3 --offload cpu+nvme+pfs --offload-what optimizer"
    r = estimate("llama3-70b", "frontier", 8, 1, 1, 8, seq_len=4096, global_batch_tokens=65536, zero=3,
                 recompute="full", offload=s["offload"], offload_what=s["offload_what"])
    assert r["fits"] and r["iteration_s"] == pytest.approx(s["iteration_s"], rel=1e-12)


# ---------------------------------------------------------------------------------------- estimate and CLI
ARGS = ["estimate", "--model", "llama3-70b", "--system", "frontier", "--gpus", "8", "--dp", "8", "--seq-len",
        "4096", "--global-batch-tokens", "65536", "--zero", "3", "--recompute", "full"]


def test_estimate_without_offload_is_unchanged_when_the_job_fits():
    r = estimate("llama3-70b", "dgx-h100", 512, 8, 4, 16, seq_len=8192, global_batch_tokens=16777216, zero=1)
    assert r["fits"] and "offload" not in r and "fit_with_offload" not in r
    assert "offload_update" not in r["breakdown_s"]


def test_estimate_with_offload_scales_the_rates(capsys):
    base = estimate("llama3-70b", "frontier", 8, 1, 1, 8, seq_len=4096, global_batch_tokens=65536, zero=3,
                    recompute="full")
    r = estimate("llama3-70b", "frontier", 8, 1, 1, 8, seq_len=4096, global_batch_tokens=65536, zero=3,
                 recompute="full", offload="nvme")
    assert r["fits"] and not base["fits"] and r["offload"]["tiers"] == "nvme"
    assert r["mfu"] * r["iteration_s"] == pytest.approx(base["mfu"] * base["iteration_s"], rel=1e-12)
    assert r["breakdown_s"]["optimizer"] == 0.0 and r["breakdown_s"]["offload_update"] > 0
    assert r["memory_bytes"]["optimizer"] == 0.0
    assert main(ARGS + ["--offload", "nvme", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["iteration_s"] == pytest.approx(r["iteration_s"], rel=1e-12)


def test_cli_says_which_offload_would_fit(capsys):
    assert main(ARGS) == 0
    out = capsys.readouterr().out
    assert "does NOT fit" in out
    assert "to fit                  --zero 3 --offload cpu+nvme+pfs --offload-what optimizer: 48.5 GiB per GPU" in out
    assert main(ARGS + ["--offload", "cpu+nvme+pfs"]) == 0
    out = capsys.readouterr().out
    assert ": fits" in out and "offload                 optimizer to cpu+nvme+pfs (multipath)" in out


@pytest.mark.parametrize("extra,msg", [
    (["--offload", "disk"], "--offload 'disk': unknown tier 'disk'"),
    (["--offload", "cpu", "--zero", "0"], "--offload needs --zero 1, 2 or 3"),
    (["--offload", "cpu", "--offload-what", "params", "--zero", "1"], "--offload-what params needs --zero 3"),
    (["--offload-what", "grads"], "argument --offload-what: invalid choice: 'grads'"),
    (["--offload", "cpu", "--offload-overlap", "-0.1"], "--offload-overlap -0.1: expected a share in [0, 1]"),
])
def test_cli_offload_errors_are_one_line(capsys, extra, msg):
    args = list(ARGS)
    if "--zero" in extra:
        i = args.index("--zero")
        del args[i:i + 2]
    assert main(args + extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("hpctwin llm estimate: error: ") and msg in err and err.count("\n") == 1


def test_cli_says_when_nothing_fits(capsys):
    """405B on one node without recomputation: 504 GiB of activations per GPU, no offload helps."""
    assert main(["estimate", "--model", "llama3-405b", "--system", "dgx-h100", "--gpus", "8", "--dp", "8",
                 "--seq-len", "8192", "--global-batch-tokens", "65536"]) == 0
    out = capsys.readouterr().out
    assert "to fit                  no ZeRO stage or offload of the tiers cpu, nvme, pfs makes it fit" in out
    r = estimate("llama3-405b", "dgx-h100", 8, 1, 1, 8, seq_len=8192, global_batch_tokens=65536)
    assert r["fit_with_offload"] is None and not r["fits"]
