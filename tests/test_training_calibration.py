"""Calibration: every row of Narayanan et al. SC'21 Table 1 within 10 % with the one set of constants."""
from __future__ import annotations

import pytest

from hpctwin.experiments.megatron_calibration import calibration_rows, main
from hpctwin.twin.training.constants import CONSTANTS
from hpctwin.twin.training.published import MEGATRON_TABLE1


def test_every_table1_row_within_10_percent():
    df = calibration_rows()
    assert len(df) == len(MEGATRON_TABLE1) == 10
    assert list(df["paper_tflops_per_gpu"]) == [137, 138, 142, 135, 138, 140, 148, 155, 163, 163]
    assert (df["error_pct"].abs() < 10.0).all(), df[["model", "error_pct"]]
    assert df["fits"].all()                              # every published run fits on an A100 80 GB


def test_fitted_constants_are_the_documented_ones():
    assert (CONSTANTS.gemm_eff_max, CONSTANTS.gemm_x_half, CONSTANTS.mem_traffic) == (0.715, 128.0, 2.04)


def test_writes_results_and_table(tmp_path, capsys):
    assert main(["--out", str(tmp_path)]) == 0
    csv = (tmp_path / "results.csv").read_text().splitlines()
    assert csv[0].startswith("model,params_b,gpus,tp,pp,dp,batch")
    assert len(csv) == 11
    md = (tmp_path / "table.md").read_text()
    assert "| megatron-1t | 3072 | 8 | 64 | 6 | 3072 |" in md
    assert "Largest |error|" in md


def test_bad_out_is_one_line(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["--out", str(f)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.slow
def test_refit_reproduces_constants():
    from hpctwin.experiments.megatron_calibration import fit
    k = fit()
    assert k.gemm_eff_max == pytest.approx(CONSTANTS.gemm_eff_max, abs=0.005)
    assert k.mem_traffic == pytest.approx(CONSTANTS.mem_traffic, abs=0.02)
