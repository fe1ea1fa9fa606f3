"""Job classes of GPU/LLM clusters and their default power and communication profiles.

A workload may carry a per-job ``job_class`` column (strings, one of `JOB_CLASSES`). Readers and
generators fill the per-job columns the physics models already read from these defaults when the
log itself has no measurement:

* ``gpu_util`` / ``cpu_util`` (fractions in [0, 1]) are read by the power model
  (`power.profiles.job_profiles`): the GPU draws ``idle + util * (max - idle)``;
* ``comm_kind`` / ``comm_fraction`` are read by the network contention model
  (`topology.contention`);
* ``tp`` / ``pp`` / ``dp`` (the training gang's tensor-, pipeline- and data-parallel degrees) are
  read by `topology.llm_placement` and `topology.llm_iteration`.

Sources of the power fractions (fraction of the GPU's maximum board power):

* training 0.8-0.95: the range stated in hpctwin issue 7 ("training near 0.8-0.95 of max power").
  We take 0.90 for pre-training and 0.85 for fine-tuning (smaller, shorter gangs with more time in
  data loading and evaluation hooks); both points inside the range are our choice.
* inference: prefill is compute-bound and decode memory-bandwidth-bound, so decode draws less
  power than prefill (Patel et al., "Splitwise", ISCA'24, who power-cap the decode machines for
  that reason). Values 0.75 (prefill) and 0.45 (decode) are assumptions in that order; a
  service's ``gpu_util`` is the pool-weighted mean with the prefill share `INFER_PREFILL_SHARE`.
* evaluation 0.60 and debug 0.30: assumptions (short jobs dominated by start-up, loading and
  idle time).
* ``hpc_batch``: no default (NaN): the power model's documented generic draw is used.

Communication profiles (``comm_fraction`` = share of the isolated runtime spent in network
phases; all assumptions, in the range of the Megatron-LM scaling reports of Narayanan et al., SC'21,
where well-placed 3-D-parallel training reaches ~52 % of peak and most of the remainder is
communication and pipeline bubble): pre-training 0.25 (DP gradient all-reduce across nodes plus
PP point-to-point), fine-tuning 0.20, evaluation 0.02, inference service 0.05 (KV-cache and
request traffic between prefill and decode pools), debug 0.0.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The known job classes.
JOB_CLASSES = ("llm_pretrain", "llm_finetune", "llm_eval", "llm_infer_service", "dl_infer_service",
               "hpc_batch", "debug")
#: The "unknown class" value of a ``job_class`` column (traces that do not say): no defaults applied.
UNKNOWN_CLASS = ""
#: Classes that are gangs of TP x PP x DP GPUs.
TRAINING_CLASSES = ("llm_pretrain", "llm_finetune")

#: Share of an inference service's GPUs in the prefill pool (assumption; Splitwise, ISCA'24, sizes
#: prefill and decode pools separately; we take an even split).
INFER_PREFILL_SHARE = 0.5
#: Prefill / decode GPU power fractions (see the module docstring; assumptions in the documented order).
INFER_PREFILL_POWER = 0.75
INFER_DECODE_POWER = 0.45


@dataclass(frozen=True)
class ClassProfile:
    """Defaults of one class. ``gpu_util``/``cpu_util``: fractions of max power above idle (NaN =
    use the power model's default); ``comm_kind``: a `topology.traffic` pattern or ``"none"``;
    ``comm_fraction``: share of the isolated runtime spent communicating (0..1)."""

    name: str
    gpu_util: float
    cpu_util: float
    comm_kind: str
    comm_fraction: float
    description: str


PROFILES: dict[str, ClassProfile] = {
    "llm_pretrain": ClassProfile("llm_pretrain", 0.90, 0.30, "allreduce", 0.25,
                                 "LLM pre-training gang (TP x PP x DP GPUs), days to weeks"),
    "llm_finetune": ClassProfile("llm_finetune", 0.85, 0.30, "allreduce", 0.20,
                                 "LLM fine-tuning (SFT/RLHF) gang, hours"),
    "llm_eval": ClassProfile("llm_eval", 0.60, 0.40, "none", 0.02,
                             "benchmark evaluation of a checkpoint, one node or less, minutes"),
    "llm_infer_service": ClassProfile(
        "llm_infer_service",
        INFER_PREFILL_SHARE * INFER_PREFILL_POWER + (1 - INFER_PREFILL_SHARE) * INFER_DECODE_POWER,
        0.30, "alltoall", 0.05, "long-running inference service with prefill and decode pools"),
    # a non-LLM deep-learning inference instance (e.g. the DLRM services of the Alibaba 2025 trace);
    # 0.50 is an assumption between the decode and prefill values above
    "dl_infer_service": ClassProfile("dl_infer_service", 0.50, 0.50, "none", 0.0,
                                     "deep-learning inference instance (recommendation model), long-running"),
    "hpc_batch": ClassProfile("hpc_batch", float("nan"), float("nan"), "", float("nan"),
                              "rigid HPC batch job (the default; power/network model defaults apply)"),
    "debug": ClassProfile("debug", 0.30, 0.30, "none", 0.0, "interactive/debug session, minutes"),
}


def profile(name: str) -> ClassProfile:
    """The profile of class ``name``; ValueError naming the known classes otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown job class {name!r}; known: {', '.join(JOB_CLASSES)}") from None


def class_columns(job_class: np.ndarray) -> dict[str, np.ndarray]:
    """Per-job ``gpu_util``, ``cpu_util``, ``comm_kind`` and ``comm_fraction`` arrays from a
    ``job_class`` array (str), using the class defaults; `UNKNOWN_CLASS` ("") rows get NaN / "" (the
    models' own defaults). ValueError on any other unknown class."""
    jc = np.asarray(job_class, dtype=object)
    out = {"gpu_util": np.full(len(jc), np.nan), "cpu_util": np.full(len(jc), np.nan),
           "comm_kind": np.full(len(jc), "", dtype=object), "comm_fraction": np.full(len(jc), np.nan)}
    for name in np.unique(jc.astype(str)) if len(jc) else []:
        if name == UNKNOWN_CLASS:
            continue
        p = profile(str(name))
        m = jc == name
        out["gpu_util"][m] = p.gpu_util
        out["cpu_util"][m] = p.cpu_util
        out["comm_kind"][m] = p.comm_kind
        out["comm_fraction"][m] = p.comm_fraction
    return out
