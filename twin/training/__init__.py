"""LLM training iteration-time and memory model from first principles (``hpctwin llm estimate``).

Modules: `models` (model presets), `hardware` (GPU and system presets), `flops` (per-layer GEMMs and
the papers' FLOP counts), `memory` (bytes per GPU), `compute` (per-layer compute time), `comm`
(collectives on the job's nodes), `iteration` (`iteration_time` -> `Breakdown`), `estimate`
(the ``estimate`` API), `cli` (``hpctwin llm estimate``), `published` (calibration data),
`constants` (fitted constants and assumptions). See docs/training.md.
"""
from __future__ import annotations

from .config import BatchConfig, ParallelConfig, TrainingConfigError
from .constants import CONSTANTS, Constants
from .iteration import Breakdown, iteration_time

__all__ = ["BatchConfig", "ParallelConfig", "TrainingConfigError", "CONSTANTS", "Constants", "Breakdown",
           "iteration_time"]
