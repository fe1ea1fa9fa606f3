"""Parallel and batch configuration of a training job, validated with one-line errors."""
from __future__ import annotations

from dataclasses import dataclass

RECOMPUTE = ("none", "selective", "full")
ATTENTION = ("flash", "unfused")


class TrainingConfigError(ValueError):
    """A training configuration that cannot run (message: one line naming the field)."""


@dataclass(frozen=True)
class ParallelConfig:
    """Parallel degrees and options.

    ``tp`` tensor, ``pp`` pipeline, ``dp`` data, ``cp`` context, ``ep`` expert (within DP) parallel;
    ``vpp`` virtual stages per GPU (interleaved 1F1B, 1 = plain 1F1B); ``sp`` sequence parallelism
    with TP; ``zero`` 0-3 (ZeRO stage / FSDP = 3, sharded over DP x CP); ``recompute`` in
    `RECOMPUTE`; ``attention`` in `ATTENTION` ("flash": no s^2 tensors, causal half skipped);
    ``dp_overlap`` share of the last micro-batch's backward the gradient reduction can hide behind
    (0 = reduction after the backward, Megatron "local" DDP; 1 = bucketed, overlapped, PyTorch DDP);
    ``tp_overlap`` share of TP communication hidden behind GEMMs; ``dp_algorithm`` a
    `topology.collectives` algorithm name for the gradient collectives.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    vpp: int = 1
    sp: bool = False
    zero: int = 0
    recompute: str = "none"
    attention: str = "flash"
    dp_overlap: float = 1.0
    tp_overlap: float = 0.0
    dp_algorithm: str = "ring"

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp


@dataclass(frozen=True)
class BatchConfig:
    """``global_batch`` sequences of ``seq_len`` tokens per iteration, ``micro_batch`` sequences
    per micro-batch."""

    seq_len: int
    global_batch: int
    micro_batch: int = 1

    @property
    def tokens(self) -> int:
        return self.seq_len * self.global_batch

    def microbatches(self, dp: int) -> int:
        """Micro-batches per iteration per data-parallel replica."""
        return self.global_batch // (dp * self.micro_batch)


def _int(name: str, v, lo: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, (int,)) and not (isinstance(v, float) and v.is_integer()):
        raise TrainingConfigError(f"{name} = {v!r}: expected an integer >= {lo}")
    if int(v) < lo:
        raise TrainingConfigError(f"{name} = {v}: expected an integer >= {lo}")
    return int(v)


def validate(model, par: ParallelConfig, batch: BatchConfig) -> None:
    """Raise `TrainingConfigError` (one line, naming the field) if the job cannot be laid out."""
    for name in ("tp", "pp", "dp", "cp", "ep", "vpp"):
        _int(name, getattr(par, name))
    for name in ("seq_len", "global_batch", "micro_batch"):
        _int(name, getattr(batch, name))
    if par.zero not in (0, 1, 2, 3):
        raise TrainingConfigError(f"zero = {par.zero!r}: expected 0, 1, 2 or 3")
    if par.recompute not in RECOMPUTE:
        raise TrainingConfigError(f"recompute = {par.recompute!r}: expected one of {', '.join(RECOMPUTE)}")
    if par.attention not in ATTENTION:
        raise TrainingConfigError(f"attention = {par.attention!r}: expected one of {', '.join(ATTENTION)}")
    for name in ("dp_overlap", "tp_overlap"):
        v = getattr(par, name)
        if not 0.0 <= v <= 1.0:
            raise TrainingConfigError(f"{name} = {v}: expected a share in [0, 1]")
    if model.heads % par.tp or model.kv_heads % par.tp and par.tp % model.kv_heads:
        raise TrainingConfigError(f"tp = {par.tp}: must divide the {model.heads} attention heads of {model.name} "
                                  f"(and divide or be a multiple of its {model.kv_heads} key/value heads)")
    if model.ffn % par.tp:
        raise TrainingConfigError(f"tp = {par.tp}: must divide the MLP width {model.ffn} of {model.name}")
    if par.pp * par.vpp > model.layers:
        raise TrainingConfigError(f"pp x vpp = {par.pp} x {par.vpp}: more pipeline chunks than the {model.layers} "
                                  f"layers of {model.name}")
    if par.ep > 1 and (not model.is_moe or model.experts % par.ep or par.dp % par.ep):
        raise TrainingConfigError(f"ep = {par.ep}: needs an MoE model whose experts and dp = {par.dp} it divides")
    if par.cp > 1 and par.attention != "flash":
        raise TrainingConfigError(f"cp = {par.cp}: context parallelism (ring attention) needs attention = flash")
    if batch.seq_len % (2 * par.cp) and par.cp > 1:
        raise TrainingConfigError(f"cp = {par.cp}: seq_len {batch.seq_len} must be a multiple of 2 x cp "
                                  "(load-balanced causal ring attention)")
    per = par.dp * batch.micro_batch
    if batch.global_batch % per:
        raise TrainingConfigError(f"global batch of {batch.global_batch} sequences is not a multiple of "
                                  f"dp x micro_batch = {par.dp} x {batch.micro_batch} = {per}")
    m = batch.microbatches(par.dp)
    if par.vpp > 1 and m % par.pp:
        raise TrainingConfigError(f"vpp = {par.vpp}: the interleaved schedule needs the {m} micro-batches per "
                                  f"replica to be a multiple of pp = {par.pp}")
