"""The options of the built-in physics models: one declaration a ``--set`` section.

Each `twin.models.ModelEntry` names its options here (``options="hpctwin.twin.model_options:NAME"``,
imported only when the section is checked). Where a model's own code already spells its options
once, the schema is derived from it: the power model's keyword arguments (`twin.plugins.signature_keys`),
the failure model's `twin.failures.KNOWN_KEYS`, the serving model's `ServingBatchConfig` fields (their
types; the bounds of one value are in `SERVING_BOUNDS`). The others are options dataclasses
(`twin.plugins.option` fields: unit, range, choices, help).
"""
from __future__ import annotations

from dataclasses import dataclass

from .schema import Key
from .plugins import option, signature_keys


@dataclass(frozen=True)
class NetworkOptions:
    """``--set network.KEY``: the network contention model (`topology.contention`)."""

    routing: str = option("minimal", choices=("minimal", "valiant"),
                          help="routing of the flows (valiant: through a random intermediate group)")


@dataclass(frozen=True)
class LLMIterationOptions:
    """``--set llm.KEY``: LLM training iteration times from placement (`topology.llm_iteration`)."""

    iteration: bool = option(False, help="turn the iteration-time model on")
    gpu: str | None = option(None, help="GPU type of the iteration model (default: the model's)")


def power_keys() -> dict[str, Key]:
    """``--set power.KEY``: `power.model.PowerModel`'s keyword arguments, plus ``cooling_overhead``
    (a fraction in [0, 10], read by the ``--power-cap`` gate)."""
    from hpctwin.power.model import PowerModel  # noqa: PLC0415
    keys = signature_keys(PowerModel.__init__, ("system",)) or {}
    keys["cooling_overhead"] = Key(float, 0.0, 10.0)
    return keys


def failure_keys() -> dict[str, Key]:
    """``--set failures.KEY``: `twin.failures.KNOWN_KEYS` (the failure model checks their values)."""
    from .failures import KNOWN_KEYS  # noqa: PLC0415
    return {k: Key("any") for k in KNOWN_KEYS}


def _serving_bounds() -> dict[str, dict]:
    """The bounds of one value of each bounded ``serving`` key (`twin.serving.limits`)."""
    from .serving import limits as L  # noqa: PLC0415
    pos, cnt = dict(minimum=0.0, exclusive_min=True), dict(minimum=0)
    inst = dict(minimum=1, maximum=L.MAX_INSTANCES)
    clock = dict(maximum=L.MAX_CLOCK_S)
    gbps = dict(maximum=L.MAX_GBPS)
    return {"tp": dict(minimum=1, maximum=L.MAX_TP), "gpus_per_node": dict(**cnt, maximum=4096),
            "policy": dict(choices=("fixed", "utilization", "decode_tps")),
            "instances": inst, "min_instances": inst, "max_instances": inst, "interval_s": dict(**pos, **clock),
            "target": pos, "metric": dict(choices=("busy", "kv")), "tps_per_instance": dict(minimum=0.0),
            "window_s": dict(minimum=0.0, **clock), "lease_s": dict(**pos, **clock),
            "renew_s": dict(minimum=0.0, **clock), "slots": dict(**cnt, maximum=L.MAX_SLOTS),
            "start_s": dict(minimum=-L.MAX_CLOCK_S, **clock), "time_scale": pos, "max_requests": cnt,
            "ttft_slo_s": dict(**pos, **clock), "tpot_slo_s": dict(**pos, **clock),
            "load_GBps": dict(**pos, **gbps), "startup_s": dict(minimum=0.0),
            "max_num_seqs": dict(minimum=1, maximum=L.MAX_NUM_SEQS),
            "max_num_batched_tokens": dict(minimum=1, maximum=L.MAX_BATCHED_TOKENS),
            "user": dict(minimum=-1, maximum=2 ** 62), "mode": dict(choices=("colocated", "pd")),
            "prefill_tp": dict(**cnt, maximum=L.MAX_TP), "decode_tp": dict(**cnt, maximum=L.MAX_TP),
            "prefill_instances": inst, "decode_instances": inst, "prefill_min_instances": inst,
            "prefill_max_instances": inst, "decode_min_instances": inst, "decode_max_instances": inst,
            "pd_ratio": dict(minimum=0.0, maximum=L.MAX_INSTANCES), "kv_link_GBps": dict(**pos, **gbps),
            "kv_latency_s": dict(minimum=0.0, maximum=1.0), "kv_network": dict(choices=("auto", "on", "off")),
            "kv_d2d_GBps": dict(minimum=0.0, **gbps)}


_TYPES = {"int": int, "float": float, "str": str, "bool": bool}


def serving_keys() -> dict[str, Key]:
    """``--set serving.KEY``: one key a field of `twin.serving.batch.ServingBatchConfig` (typed by its
    annotation), bounded as `_serving_bounds` says. What needs the trace or another key (a fraction's
    percentage hint, the controller ticks over the trace span, the cold start against a day and the
    lease) is checked by `ServingBatchConfig.check` and `check_work`."""
    from dataclasses import fields  # noqa: PLC0415

    from .serving.batch import ServingBatchConfig  # noqa: PLC0415
    bounds = _serving_bounds()
    out = {}
    for f in fields(ServingBatchConfig):
        kind = f.type if isinstance(f.type, type) else _TYPES.get(str(f.type), "any")
        out[f.name] = Key(kind, **bounds.get(f.name, {}))
    return out
