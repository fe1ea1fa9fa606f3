"""The contract between the engine and the physics models it steps (power, network, failures...).

Defined in `hpctwin.twin.contract` (one module for schedulers, gates and models) and re-exported
here: `RunModel`, `ModelContext`, `seeded_rng`, `model_hooks`.
"""
from __future__ import annotations

from .contract import MODEL_HOOKS, ModelContext, ModelView, RunModel, model_hooks, seeded_rng

__all__ = ["MODEL_HOOKS", "ModelContext", "ModelView", "RunModel", "model_hooks", "seeded_rng"]
