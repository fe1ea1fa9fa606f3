"""The constants of the training model: fitted ones (one set, Megatron-LM SC'21 Table 1) and
stated assumptions. docs/training.md explains each; ``experiments/megatron_calibration.py --fit``
redoes the fit.

Fitted (to the 10 rows of Narayanan et al. SC'21 Table 1, minimising the largest |log(ours /
theirs)| of the achieved teraFLOP/s per GPU over the rows, then rounded; see
`experiments.megatron_calibration`):

* ``gemm_eff_max``: sustained matmul rate = peak x eff(x), ``eff(x) = gemm_eff_max * x / (x +
  gemm_x_half)`` with ``x`` the smallest of a GEMM's three dimensions (M, N, K) on one GPU
  (elements): thin GEMMs (small hidden / TP, small head dimension, few tokens per expert) run
  further from peak;
* ``mem_traffic``: bytes the memory-bound kernels (norms, softmax, dropout, activation functions,
  residual adds, bias adds) move per byte of activation a layer stores for backward
  (Korthikanti et al. 2022's count), costed at the HBM bandwidth.

Assumptions (not fitted): ``gemm_x_half`` = 128 elements, one tensor-core tile (Table 1 does not
identify it: the refitted error stays below 10 % for any value in 0..512; docs/training.md);
``comm_eff`` achieved share of a link's bandwidth by NCCL/RCCL
collectives (nccl-tests bus bandwidths of ~80 % of the NVLink / InfiniBand line rate; order of
magnitude, not a measurement we reproduced); ``optimizer_bytes_per_param`` HBM traffic of one
mixed-precision Adam step per parameter (read fp32 weight, m, v, gradient: 16 B; write weight, m,
v: 12 B; write the bf16 copy: 2 B; gradient norm read and zeroing: 6 B); ``bucket_bytes`` gradient
bucket of overlapped data-parallel reduction (PyTorch DDP's 25 MB default); ``frag_fraction``
allocator fragmentation, communication buffers and workspaces as a share of the counted memory;
``reserve_bytes`` per-GPU memory not available to the framework (CUDA/ROCm context, NCCL, cuBLAS
workspaces).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Constants:
    """See the module docstring; units: elements (``gemm_x_half``), bytes, bytes per byte."""

    gemm_eff_max: float = 0.715
    gemm_x_half: float = 128.0
    mem_traffic: float = 2.04
    comm_eff: float = 0.8
    optimizer_bytes_per_param: float = 36.0
    bucket_bytes: float = 25e6
    frag_fraction: float = 0.10
    reserve_bytes: float = 2 * 1024 ** 3

    def gemm_eff(self, x: float) -> float:
        """Share of peak a GEMM whose smallest dimension is ``x`` elements sustains."""
        return self.gemm_eff_max * x / (x + self.gemm_x_half)


#: the one set of fitted constants (experiments/megatron_calibration.py --fit)
CONSTANTS = Constants()
