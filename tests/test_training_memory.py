"""Training model: memory per GPU (Korthikanti et al. activations, ZeRO model states, pipeline in flight)."""
from __future__ import annotations

import pytest

from hpctwin.twin.training import BatchConfig, Constants, ParallelConfig
from hpctwin.twin.training.memory import (activation_bytes_per_layer, layer_input_bytes, layer_params_per_gpu,
                                          memory_per_gpu, stage_activation_bytes)
from hpctwin.twin.training.models import MODELS, total_params

GPT = MODELS["megatron-18b"]          # h 6144, a 48, GeLU 4h, dropout
S, B, H, A = 2048, 2, 6144, 48
SBH = S * B * H


def test_korthikanti_no_parallelism():
    assert activation_bytes_per_layer(GPT, B, S) == pytest.approx(SBH * (34 + 5 * A * S / H), rel=1e-12)


@pytest.mark.parametrize("t", [2, 4, 8])
def test_korthikanti_tensor_parallel(t):
    assert activation_bytes_per_layer(GPT, B, S, tp=t) == pytest.approx(
        SBH * (10 + 24 / t + 5 * A * S / (H * t)), rel=1e-12)
    assert activation_bytes_per_layer(GPT, B, S, tp=t, sp=True) == pytest.approx(
        SBH * (34 / t + 5 * A * S / (H * t)), rel=1e-12)


def test_selective_and_full_recompute():
    per, work = stage_activation_bytes(GPT, B, S, 10, 8, True, 1, False, "selective")
    assert (per, work) == (pytest.approx(10 * SBH * 34 / 8, rel=1e-12), 0.0)
    per, work = stage_activation_bytes(GPT, B, S, 10, 8, True, 1, False, "full")
    assert per == pytest.approx(10 * 2 * SBH / 8, rel=1e-12)
    assert work == pytest.approx(activation_bytes_per_layer(GPT, B, S, 8, True), rel=1e-12)
    assert layer_input_bytes(GPT, B, S) == 2 * SBH


def test_flash_drops_the_score_tensors_and_cp_divides_s():
    assert activation_bytes_per_layer(GPT, B, S, flash=True) == pytest.approx(34 * SBH, rel=1e-12)
    assert activation_bytes_per_layer(GPT, B, S, cp=4, flash=True) == pytest.approx(34 * SBH / 4, rel=1e-12)


def _par(**kw):
    base = dict(tp=1, pp=1, dp=8, recompute="full", attention="unfused")
    base.update(kw)
    return ParallelConfig(**base)


K0 = Constants(gemm_eff_max=0.5, gemm_x_half=0.0, mem_traffic=0.0, frag_fraction=0.0, reserve_bytes=0.0)


@pytest.mark.parametrize("zero,states", [(0, 16.0), (1, 4 + 12 / 8), (2, 2 + 14 / 8), (3, 16 / 8)])
def test_zero_model_states(zero, states):
    """Rajbhandari et al.: 2 + 2 + 12 bytes per parameter, sharded over the 8 DP ranks by stage."""
    m = MODELS["gpt3-1.3b"]
    mem = memory_per_gpu(m, _par(zero=zero), BatchConfig(2048, 64, 1), 80e9, K0)
    n = total_params(m)
    gathered = 2 * 2 * layer_params_per_gpu(m, 1, 1) if zero == 3 else 0.0   # ZeRO-3: two layers in flight
    assert mem.params == n
    assert mem.weights + mem.gradients + mem.optimizer == pytest.approx(states * n + gathered, rel=1e-12)


def test_pipeline_first_stage_keeps_p_microbatches():
    m = MODELS["megatron-145b"]
    batch = BatchConfig(2048, 2304, 2)
    par = _par(tp=8, pp=8, dp=24, vpp=1)
    mem = memory_per_gpu(m, par, batch, 80 * 2 ** 30, K0)
    per, work = stage_activation_bytes(m, 2, 2048, 10, 8, False, 1, False, "full")
    assert mem.stage == "first"
    assert mem.activations == pytest.approx(8 * per + work, rel=1e-12)   # min(m = 48, p = 8) in flight
    inter = memory_per_gpu(m, _par(tp=8, pp=8, dp=24, vpp=2), batch, 80 * 2 ** 30, K0)
    assert inter.activations == pytest.approx(8 * per * (1 + 7 / 16) + work, rel=1e-12)


def test_fits_uses_reserve_and_fragmentation():
    m = MODELS["gpt3-1.3b"]
    batch = BatchConfig(2048, 64, 1)
    k = Constants(gemm_eff_max=0.5, gemm_x_half=0.0, mem_traffic=0.0, frag_fraction=0.1, reserve_bytes=1e9)
    mem = memory_per_gpu(m, _par(), batch, 80e9, k)
    counted = mem.weights + mem.gradients + mem.optimizer + mem.activations
    assert mem.buffers == pytest.approx(0.1 * counted)
    assert mem.total == pytest.approx(1.1 * counted)
    assert memory_per_gpu(m, _par(), batch, mem.total + 1e9, k).fits
    assert not memory_per_gpu(m, _par(), batch, mem.total + 1e9 - 1, k).fits


def test_megatron_1t_fits_on_a100_80gb_and_405b_unsharded_does_not():
    from hpctwin.twin.training.published import MEGATRON_TABLE1
    r = MEGATRON_TABLE1[-1]
    par = _par(tp=8, pp=64, dp=6)
    assert memory_per_gpu(MODELS[r.model], par, BatchConfig(2048, 3072, 1), 80 * 2 ** 30).fits
    big = ParallelConfig(tp=8, pp=1, dp=1, recompute="full")
    assert not memory_per_gpu(MODELS["llama3-405b"], big, BatchConfig(8192, 1, 1), 80 * 2 ** 30).fits
