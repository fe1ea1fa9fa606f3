"""Serving power per phase: prefill near the GPU's maximum, decode lower, idle at the floor.

Per GPU (W), Splitwise's constant power model (``splitwise/configs/power_model/constant.yaml`` of the
data directory, from their measurements: Patel et al., ISCA 2024): A100-80GB idle 63, prompt 400, token
250; H100-80GB idle 75, prompt 700, token 380. Splitwise measured the prompt phase near the GPU's TDP
(compute-bound) and the token phase well below it (memory-bound); its table, like splitwise-sim's
``ConstantPowerModel`` (one power per ``PromptTask`` / ``TokenTask``), has no figure for a mixed batch.

Power of an iteration (per GPU, W): prefill power for one of prompt tokens only, decode power for one
without prompt tokens, and for a mixed iteration (chunked prefill runs prompt chunks and decodes in one
forward) the blend `blend_w` = ``s P_prefill + (1 - s) P_decode`` over its whole duration, ``s`` its
prompt share (`instance.prompt_share`: the part of its modelled time due to its prompt tokens, by the
latency model's own decomposition, t(batch) vs t(its decodes alone)). The blend is an assumption: the
prompt part of the step is taken to draw prompt power and the decode part token power, as if the two ran
back to back (the GPU runs them as one kernel sequence per layer; no per-step power was measured).
Each instance accumulates ``prompt_busy_s`` = sum of share x duration, so an instance's GPU energy is
``tp (P_prefill prompt_busy_s + P_decode (busy_s - prompt_busy_s) + P_idle idle_s)`` (`instance_energy`,
``serving.energy_j`` of a batch run); the facility feed (`twin.serving.power_feed`) gets the same share
per iteration from ``Instance.busy_hook``. Before 2026-12-02 a mixed iteration counted entirely at
prefill power.

The RTX cards of the LLMServingSim profiles have no published per-phase figures: their board power
(NVIDIA: RTX 4090 450 W, RTX PRO 6000 Blackwell Workstation 600 W) is taken as the prefill power and
Splitwise's H100 ratios (decode 380/700, idle 75/700) scale it, an assumption stated here.

In a batch run with ``--power on`` these per-GPU figures also drive the serving jobs' node power in the
facility power model (`twin.serving.power_feed`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from .instance import Instance


@dataclass(frozen=True)
class PhasePower:
    """Per-GPU power (W) while idle, running prefill iterations, running decode iterations."""
    idle_w: float
    prefill_w: float
    decode_w: float


#: splitwise configs/power_model/constant.yaml (idle_power / prompt_power / token_power per GPU)
SPLITWISE_POWER = {"a100-80gb": PhasePower(63.0, 400.0, 250.0), "h100-80gb": PhasePower(75.0, 700.0, 380.0)}
_H100 = SPLITWISE_POWER["h100-80gb"]
#: board power (NVIDIA product pages), scaled by Splitwise's H100 decode and idle ratios (assumption)
RTX_POWER = {name: PhasePower(tdp * _H100.idle_w / _H100.prefill_w, tdp, tdp * _H100.decode_w / _H100.prefill_w)
             for name, tdp in (("RTX4090", 450.0), ("RTXPRO6000", 600.0))}


def read_splitwise_power(path: str | Path) -> dict[str, PhasePower]:
    """The ``idle_power``/``prompt_power``/``token_power`` maps of Splitwise's constant.yaml."""
    path = Path(path)
    cur, tables = None, {"idle_power": {}, "prompt_power": {}, "token_power": {}}
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):
            key = line.split(":", 1)[0].strip()
            cur = key if key in tables else None
        elif cur is not None:
            k, _, v = line.strip().partition(":")
            try:
                tables[cur][k.strip()] = float(v)
            except ValueError:
                raise ValueError(f"{path}:{i}: {cur}.{k.strip()}: not a number: {v.strip()!r}") from None
    gpus = set(tables["idle_power"]) & set(tables["prompt_power"]) & set(tables["token_power"])
    return {g: PhasePower(tables["idle_power"][g], tables["prompt_power"][g], tables["token_power"][g]) for g in gpus}


def power_for(gpu: str) -> PhasePower:
    if gpu in SPLITWISE_POWER:
        return SPLITWISE_POWER[gpu]
    if gpu in RTX_POWER:
        return RTX_POWER[gpu]
    raise KeyError(f"no phase power for GPU {gpu!r}; known: {', '.join(list(SPLITWISE_POWER) + list(RTX_POWER))}")


def blend_w(power: PhasePower, share: float) -> float:
    """Per-GPU power (W) of an iteration of prompt share ``share`` in [0, 1] (module docstring)."""
    if share == 1.0:
        return power.prefill_w
    if share == 0.0:
        return power.decode_w
    return share * power.prefill_w + (1.0 - share) * power.decode_w


def instance_energy(inst: Instance, span_s: float, power: PhasePower) -> dict[str, float]:
    """Seconds in each phase over ``span_s`` and the energy (J) of the instance's ``tp`` GPUs.
    ``prefill_s``: busy seconds at prefill power (each iteration's duration x its prompt share,
    ``Instance.prompt_busy_s``), ``decode_s`` the rest of the busy time, ``idle_s`` the rest of the span."""
    prefill = inst.prompt_busy_s
    decode = max(0.0, inst.busy_s - prefill)
    idle = max(0.0, span_s - inst.busy_s)
    gpus = inst.model.tp
    e = gpus * (power.prefill_w * prefill + power.decode_w * decode + power.idle_w * idle)
    return {"prefill_s": prefill, "decode_s": decode, "idle_s": idle, "energy_j": e,
            "mean_power_w": e / span_s if span_s > 0 else float("nan")}


def fleet_energy(instances: Sequence[Instance], span_s: float, power: PhasePower) -> dict[str, float]:
    """Sums of `instance_energy` over a pool."""
    rows = [instance_energy(x, span_s, power) for x in instances]
    out = {k: sum(r[k] for r in rows) for k in ("prefill_s", "decode_s", "idle_s", "energy_j")}
    out["mean_power_w"] = out["energy_j"] / span_s if span_s > 0 else float("nan")
    return out
