"""The contract between the simulation and the models it steps (power, network, failures...).

A `RunModel` is told about every job start and finish in the engine's exact event order and may
answer with *progress-rate factors* for running jobs (1.0 = full speed, 0.8 = the job's remaining
work takes 25 % longer). The engine multiplies the factors of all models, recomputes each affected
job's finish event exactly and tells every model through `on_rate_change`.

Times are seconds on the log's clock; rates are dimensionless.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


def seeded_rng(seed: int, name: str) -> np.random.Generator:
    """A numpy Generator derived deterministically from the run seed and a stream name."""
    key = [int(seed) & 0xFFFFFFFF] + [ord(c) for c in name]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(key)))


@dataclass
class ModelContext:
    """What a model gets at bind time.

    ``n_nodes``: allocation units/nodes of the machine; ``jobs``: the schedulers' `JobTable` (its
    ``columns`` hold the workload's extra per-job arrays); ``runtime``: actual runtimes (s) from the
    log; ``system``: the `SystemSpec` or None; ``seed``: the run seed; ``options``: free-form run
    options.
    """

    n_nodes: int
    jobs: Any
    runtime: np.ndarray
    system: Any = None
    seed: int = 0
    options: dict = field(default_factory=dict)

    def rng(self, name: str) -> np.random.Generator:
        """A Generator for the named random stream of this run."""
        return seeded_rng(self.seed, name)


class RunModel:
    """Base class of the models the simulation steps. Every hook is optional."""

    name = "model"

    def bind(self, ctx: ModelContext) -> None:
        self.ctx = ctx

    def on_start(self, now: float, job: int, nodes: np.ndarray) -> dict[int, float] | None:
        return None

    def on_finish(self, now: float, job: int) -> dict[int, float] | None:
        return None

    def on_rate_change(self, now: float, job: int, rate: float) -> None:
        pass

    def engine_work(self, runtime: np.ndarray) -> np.ndarray | None:
        """Engine work per job (nominal s) when it differs from the runtime (e.g. checkpoint
        writes added), or None. Asked once, after `bind`."""
        return None

    def next_event(self, now: float) -> float | None:
        """Time (s) of this model's next own event (a failure, a repair...), or None. The engine
        calls `on_event` at that time, after the finishes and before the submissions."""
        return None

    def on_event(self, now: float, control) -> dict[int, float] | None:
        """Handle every own event due at ``now``, acting through ``control``
        (`twin.simulation.EngineControl`); may return rate factors like `on_start`."""
        return None

    def finalize(self, end: float) -> None:
        pass

    def job_columns(self) -> dict[str, np.ndarray]:
        return {}

    def timeseries(self, grid: np.ndarray, dt: float) -> dict[str, tuple[np.ndarray, str]]:
        return {}

    def summary(self) -> dict:
        return {}
