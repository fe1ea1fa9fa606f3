"""LLM serving on the twin: a request-level, iteration-level vLLM instance engine.

* `models`: model shapes (layers, heads, dims), weight and KV bytes;
* `profiles`: LLMServingSim per-layer vLLM timing profiles and the iteration time composed from them;
* `kvcache`: paged KV blocks with optional prefix caching (vLLM V1 block pool);
* `instance`: one engine's continuous batching (token budget, max_num_seqs, chunked prefill, preemption);
* `cluster`: a pool of instances behind a router;
* `bundle`: LLMServingSim bench bundles -> instances; `cli`: ``hpctwin serve``.

See ``docs/serving.md``.
"""
from .cluster import ROUTERS, ServingResult, simulate
from .instance import Instance, Req
from .kvcache import BlockManager
from .models import KNOWN_MODELS, ModelShape, model_shape
from .profiles import IterationModel, LayerProfile

__all__ = ["ROUTERS", "ServingResult", "simulate", "Instance", "Req", "BlockManager", "KNOWN_MODELS",
           "ModelShape", "model_shape", "IterationModel", "LayerProfile"]
