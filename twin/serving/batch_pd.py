"""A disaggregated prefill/decode (P/D) serving deployment as jobs of the batch scheduler (issue 16).

``serving.mode = "pd"`` is a configuration of `twin.serving.batch.ServingBatchModel`: two pools of node
requests (``prefill_*`` and ``decode_*`` keys: GPU type, TP, bounds, initial counts) with KV transfers
between them, by the formula or as flows on the system's topology (`kvflow.DynamicKVNetwork`); see
that module's docstring. `ServingBatchPDModel` is its constructor under the name and signature callers
used before the two forms were one model.
"""
from __future__ import annotations

from .batch import Pool, ServingBatchConfig, ServingBatchModel
from .kvflow import DynamicKVNetwork

__all__ = ["POOLS", "Pool", "DynamicKVNetwork", "ServingBatchPDModel"]

POOLS = ("prefill", "decode")


class ServingBatchPDModel(ServingBatchModel):
    """The P/D form of `ServingBatchModel`. ``make_prefill`` / ``make_decode``: ``iid -> Instance`` of each
    pool; ``weight_bytes``: weights per GPU of (prefill, decode) instances (bytes, for the cold starts);
    ``policy``: an object with ``desired_pd(prefill view, decode view) -> (prefill, decode)``;
    ``kv_network``: a `DynamicKVNetwork` (None: the fixed formula)."""

    def __init__(self, cfg: ServingBatchConfig, trace: list, make_prefill, make_decode, gpus_per_node: int = 1,
                 weight_bytes: tuple[float, float] = (0.0, 0.0), policy=None,
                 kv_network: DynamicKVNetwork | None = None) -> None:
        super().__init__(cfg, trace, make_prefill, gpus_per_node, weight_bytes[0], policy=policy,
                         make_decode=make_decode, decode_weight_bytes=weight_bytes[1], kv_network=kv_network)
