"""``hpctwin llm estimate`` (twin.training.cli.main) and the estimate API: output, JSON keys, one-line errors."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hpctwin.twin.training import TrainingConfigError
from hpctwin.twin.training.cli import main
from hpctwin.twin.training.estimate import estimate

ARGS = ["estimate", "--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "512", "--tp", "8", "--pp", "4",
        "--dp", "16", "--seq-len", "8192", "--global-batch-tokens", "16777216", "--zero", "1",
        "--recompute", "selective"]


def test_json_keys_and_values_match_the_api(capsys):
    assert main(ARGS + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("iteration_s", "tflops_per_gpu", "mfu", "memory_per_gpu_bytes", "fits"):
        assert key in out
    api = estimate("llama3-70b", "dgx-h100", 512, 8, 4, 16, seq_len=8192, global_batch_tokens=16777216, zero=1,
                   recompute="selective")
    assert out["iteration_s"] == pytest.approx(api["iteration_s"], rel=1e-12)
    assert out["fits"] is True and 0 < out["mfu"] < 1
    assert out["config"]["microbatches"] == 2048 // 16 and out["config"]["sp"] is True     # sp on with tp > 1
    assert out["tflops_per_gpu"] > out["model_tflops_per_gpu"]                            # selective recompute
    assert out["breakdown_s"]["bubble"] > 0 and out["breakdown_s"]["cp"] == 0.0


def test_text_output(capsys):
    assert main(ARGS) == 0
    text = capsys.readouterr().out
    assert "512 GPUs on 64 nodes, TP 8 x PP 4 x DP 16 x CP 1" in text
    assert "MFU" in text and "memory per GPU" in text and ": fits" in text


def test_list_models_and_systems(capsys):
    assert main(["estimate", "--list-models"]) == 0
    text = capsys.readouterr().out
    for name in ("gpt3-175b", "megatron-1t", "llama3-405b", "mixtral-8x7b"):
        assert name in text
    assert main(["estimate", "--list-systems"]) == 0
    text = capsys.readouterr().out
    assert "frontier" in text and "dgx-a100-80gb" in text and "selene = dgx-a100-80gb" in text


@pytest.mark.parametrize("change,msg", [
    ({"--gpus": "256"}, "tp x pp x dp x cp = 8 x 4 x 16 x 1 = 512 GPUs, but gpus = 256"),
    ({"--model": "gpt5"}, "--model 'gpt5': unknown"),
    ({"--system": "summit"}, "--system: unknown system 'summit'"),
    ({"--gpus": "many"}, "argument --gpus: invalid int value: 'many'"),
    ({"--global-batch-tokens": "1000"}, "global_batch_tokens = 1000 is not a multiple of seq_len = 8192"),
    ({"--tp": "16", "--dp": "8"}, "tp = 16 spans nodes of 8 GPUs"),
    ({"--recompute": "most"}, "argument --recompute: invalid choice: 'most'"),
    ({"--zero": "5"}, "argument --zero: invalid choice: 5"),
])
def test_bad_values_one_line_exit_2(capsys, change, msg):
    args = list(ARGS)
    for flag, value in change.items():
        args[args.index(flag) + 1] = value
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("hpctwin llm estimate: error: ") and msg in err
    assert err.count("\n") == 1


def test_missing_arguments_and_unknown_command(capsys):
    assert main(["estimate", "--model", "llama3-8b"]) == 2
    assert "missing --system, --gpus, --seq-len, --global-batch-tokens" in capsys.readouterr().err
    assert main(["train"]) == 2
    assert "unknown command 'train'" in capsys.readouterr().err


def test_tp_across_nodes_allowed_on_request():
    r = estimate("llama3-70b", "dgx-h100", 32, tp=16, pp=1, dp=2, seq_len=4096, global_batch_tokens=4096 * 32,
                 allow_tp_across_nodes=True)
    inside = estimate("llama3-70b", "dgx-h100", 32, tp=8, pp=1, dp=4, seq_len=4096, global_batch_tokens=4096 * 32)
    assert r["breakdown_s"]["tp"] > inside["breakdown_s"]["tp"]          # TP over the network is slower


def test_api_errors_are_training_config_errors():
    with pytest.raises(TrainingConfigError, match="tp = 0: expected an integer >= 1"):
        estimate("llama3-8b", "dgx-h100", 8, tp=0, seq_len=4096, global_batch_tokens=4096 * 8)


def test_module_entry_point():
    r = subprocess.run([sys.executable, "-m", "hpctwin.twin.training.cli"] + ARGS[:-4] + ["--json"],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["config"]["model"] == "llama3-70b"
