"""Training model: model presets (parameter counts vs the papers) and FLOP counts (formulas by hand)."""
from __future__ import annotations

import pytest

from hpctwin.twin.training.flops import (forward_flops, hardware_flops, layer_gemms, logits_gemm, model_flops,
                                         narayanan_flops, palm_flops_per_token)
from hpctwin.twin.training.models import MODELS, TransformerModel, matmul_params, total_params
from hpctwin.twin.training.published import MEGATRON_TABLE1


@pytest.mark.parametrize("row", MEGATRON_TABLE1, ids=lambda r: r.model)
def test_megatron_presets_match_table1(row):
    m = MODELS[row.model]
    assert (m.layers, m.hidden, m.heads, m.vocab) == (row.layers, row.hidden, row.heads, 51200)
    # Table 1 prints the parameter count to 0.1 B (eq. 2 of the paper: 12 l h^2 (1 + 13/12h + (V+s)/12lh))
    assert total_params(m) / 1e9 == pytest.approx(row.params_b, abs=0.051)
    l, h, s, V = m.layers, m.hidden, 2048, m.vocab
    eq2 = 12 * l * h * h + 13 * l * h + (V + s) * h      # eq. 2 expanded, exact in integers
    assert total_params(m) - eq2 == 2 * h          # + the final LayerNorm, which eq. 2 leaves out


def test_llama3_and_mixtral_sizes():
    assert total_params(MODELS["llama3-8b"]) == 8_030_261_248          # HF model card: 8.03B
    assert total_params(MODELS["llama3-70b"]) == 70_553_706_496        # 70.6B
    assert total_params(MODELS["llama3-405b"]) / 1e9 == pytest.approx(405.85, abs=0.01)
    mix = MODELS["mixtral-8x7b"]
    assert total_params(mix) / 1e9 == pytest.approx(46.70, abs=0.01)   # Mixtral paper: 47B total
    assert total_params(mix, active=True) / 1e9 == pytest.approx(12.88, abs=0.01)   # 13B active


def test_gpt_layer_flops_are_24bsh2_plus_4bs2h():
    m = MODELS["megatron-18b"]
    b, s, h = 3, 1024, m.hidden
    per_layer = sum(g.flops for g in layer_gemms(m, b, s))
    assert per_layer == pytest.approx(24 * b * s * h * h + 4 * b * s * s * h, rel=1e-12)
    assert logits_gemm(m, b, s).flops == 2 * b * s * h * m.vocab


def test_gqa_swiglu_layer_flops():
    m = MODELS["llama3-8b"]                       # h 4096, kv 1024, f 14336
    b, s = 2, 512
    expect = 2 * b * s * 4096 * (4096 + 2 * 1024) + 2 * b * s * 4096 ** 2 + 4 * b * s * s * 4096 \
        + 3 * 2 * b * s * 4096 * 14336
    assert sum(g.flops for g in layer_gemms(m, b, s)) == pytest.approx(expect, rel=1e-12)


def test_moe_layer_flops_count_topk_experts_and_router():
    m = MODELS["mixtral-8x7b"]
    dense = TransformerModel("d", 32, 4096, 32, 8, 14336, 32000, mlp="swiglu", norm="rmsnorm", biases=False)
    b, s = 1, 4096
    moe = sum(g.flops for g in layer_gemms(m, b, s))
    one = sum(g.flops for g in layer_gemms(dense, b, s))
    mlp = 3 * 2 * b * s * 4096 * 14336
    assert moe == pytest.approx(one + mlp + 2 * b * s * 4096 * 8, rel=1e-12)   # 2 experts + router


def test_tensor_parallel_splits_flops_exactly():
    m = MODELS["megatron-39b"]
    full = sum(g.flops for g in layer_gemms(m, 4, 2048))
    split = sum(g.flops for g in layer_gemms(m, 4, 2048, tp=8))
    assert split * 8 == pytest.approx(full, rel=1e-12)


def test_narayanan_eq3_equals_full_recompute_count():
    for row in MEGATRON_TABLE1:
        m = MODELS[row.model]
        assert hardware_flops(m, row.batch, 2048, "full") == pytest.approx(
            narayanan_flops(row.batch, 2048, m.layers, m.hidden, m.vocab), rel=1e-12)


def test_palm_count_equals_model_flops():
    for name in ("megatron-1t", "llama3-70b", "mixtral-8x7b"):
        m = MODELS[name]
        assert model_flops(m, 4, 4096) == pytest.approx(4 * 4096 * palm_flops_per_token(m, 4096), rel=1e-12)
        assert palm_flops_per_token(m, 4096) == 6 * matmul_params(m) + 12 * m.layers * m.hidden * 4096


def test_recompute_counts():
    m = MODELS["megatron-7.5b"]
    f = forward_flops(m, 2, 2048)
    assert model_flops(m, 2, 2048) == 3 * f
    assert hardware_flops(m, 2, 2048, "none") == 3 * f
    attn = m.layers * 4 * 2 * 2048 * 2048 * m.hidden
    assert hardware_flops(m, 2, 2048, "selective") == pytest.approx(3 * f + attn, rel=1e-12)
    assert hardware_flops(m, 2, 2048, "full") == pytest.approx(4 * f - logits_gemm(m, 2, 2048).flops, rel=1e-12)
