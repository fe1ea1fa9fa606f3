"""Published training runs used to calibrate and check the model.

`MEGATRON_TABLE1`: Narayanan et al., SC'21, "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM", Table 1 (weak scaling, GPT models, A100 80 GB on Selene, fp16 mixed
precision, sequence 2,048, vocabulary 51,200, full activation recomputation): parameters
(billion), heads, hidden, layers, TP, PP, GPUs, batch size, achieved teraFLOP/s per GPU,
percentage of theoretical peak, aggregate petaFLOP/s. The micro-batch size, the DDP
implementation (``torch`` = overlapped bucketed all-reduce, ``local`` = all-reduce after the
backward) and the interleaving (layers per virtual stage) are those of the paper's artifact,
NVIDIA/Megatron-LM ``examples/academic_paper_scripts/sc21/run_table_1.sh`` (formerly
``examples/sc21``), which the README names as the script that reproduces Table 1.

`LLAMA3_TABLE4`: Meta, "The Llama 3 Herd of Models" (2024), Table 4 (Llama 3 405B pre-training on
H100: GPUs, TP, CP, PP, DP, sequence length, batch size per DP group, tokens per batch, TFLOPs/GPU,
BF16 MFU). Used as a check of the H100 path in docs/training.md, not fitted.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MegatronRow:
    """One row of Narayanan et al. Table 1 plus its run_table_1.sh settings."""

    model: str                 # `models.MODELS` key
    params_b: float            # Table 1: number of parameters (billion)
    heads: int
    hidden: int
    layers: int
    tp: int
    pp: int
    gpus: int
    batch: int                 # sequences per iteration
    tflops_per_gpu: float      # Table 1: achieved teraFLOP/s per GPU
    peak_pct: float            # Table 1: percentage of theoretical peak FLOP/s
    aggregate_pflops: float    # Table 1: achieved aggregate petaFLOP/s
    micro_batch: int           # run_table_1.sh MBS
    ddp: str                   # run_table_1.sh DDP ("torch" or "local")
    layers_per_virtual: int    # run_table_1.sh --num-layers-per-virtual-pipeline-stage (0: not interleaved)

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp)

    @property
    def vpp(self) -> int:
        """Virtual stages per GPU (1 without interleaving)."""
        if not self.layers_per_virtual:
            return 1
        return self.layers // self.pp // self.layers_per_virtual


MEGATRON_TABLE1: tuple[MegatronRow, ...] = (
    MegatronRow("megatron-1.7b", 1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 44, 4.4, 16, "torch", 0),
    MegatronRow("megatron-3.6b", 3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 44, 8.8, 16, "torch", 0),
    MegatronRow("megatron-7.5b", 7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 46, 18.2, 16, "torch", 0),
    MegatronRow("megatron-18b", 18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 43, 34.6, 8, "torch", 0),
    MegatronRow("megatron-39b", 39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 44, 70.8, 4, "local", 0),
    MegatronRow("megatron-76b", 76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 45, 143.8, 2, "local", 5),
    MegatronRow("megatron-145b", 145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 47, 227.1, 2, "local", 5),
    MegatronRow("megatron-310b", 310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155, 50, 297.4, 1, "local", 3),
    MegatronRow("megatron-530b", 529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163, 52, 410.2, 1, "local", 1),
    MegatronRow("megatron-1t", 1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 52, 502.0, 1, "local", 0),
)


@dataclass(frozen=True)
class Llama3Row:
    """One row of the Llama 3 paper's Table 4 (405B on H100)."""

    gpus: int
    tp: int
    cp: int
    pp: int
    dp: int
    seq_len: int
    batch_per_dp: int
    tokens_m: float
    tflops_per_gpu: float
    mfu_pct: float


LLAMA3_TABLE4: tuple[Llama3Row, ...] = (
    Llama3Row(8192, 8, 1, 16, 64, 8192, 32, 16, 430, 43),
    Llama3Row(16384, 8, 1, 16, 128, 8192, 16, 16, 400, 41),
    # DP of this row derived as GPUs / (TP x CP x PP) = 8 (not re-read from the paper here)
    Llama3Row(16384, 8, 16, 16, 8, 131072, 16, 16, 380, 38),
)
