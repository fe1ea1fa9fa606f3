"""LLM serving on the twin: a request-level, iteration-level vLLM instance engine.

* `models`: model shapes (layers, heads, dims), weight and KV bytes;
* `profiles`: LLMServingSim per-layer vLLM timing profiles and the iteration time composed from them;
* `kvcache`: paged KV blocks with optional prefix caching (vLLM V1 block pool);
* `instance`: one engine's continuous batching (token budget, max_num_seqs, chunked prefill, preemption);
* `engine`: the one instance-level event loop (arrivals, activations, KV hand-offs, controller ticks)
  that every mode drives; `handoff`: the P/D KV hand-off; `kvflow`: KV transfers as flows;
* the modes, configurations around the engine: `cluster` (colocated), `pd` (prefill/decode pools),
  `autoscale` (pools resized by a controller), `batch` (node requests of the batch scheduler, colocated
  or P/D; `batch_pd` its P/D constructor);
* plug-in tables (`plugins`): `routers.ROUTERS`, `policies.AUTOSCALERS`, `policies.PD_POLICIES`;
* `bundle`: LLMServingSim bench bundles -> instances; `deployment`: pools from traces; `cli`: ``hpctwin serve``.

See ``docs/serving.md``.
"""
from .cluster import ROUTERS, ServingResult, simulate
from .engine import Member, ServingEngine
from .instance import Instance, Req
from .kvcache import BlockManager
from .models import KNOWN_MODELS, ModelShape, model_shape
from .profiles import IterationModel, LayerProfile

__all__ = ["ROUTERS", "ServingResult", "simulate", "ServingEngine", "Member", "Instance", "Req", "BlockManager",
           "KNOWN_MODELS", "ModelShape", "model_shape", "IterationModel", "LayerProfile"]
