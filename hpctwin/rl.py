"""Gymnasium entry point: ``gymnasium.make("hpctwin.rl:Scheduling-v0", workload=..., ...)``.

Importing this module registers ``Scheduling-v0`` (implementation: `hpctwin.twin.rl.env.SchedulingEnv`;
``docs/rl.md``). Needs the ``[rl]`` extra (``pip install 'hpctwin[rl]'``).
"""
from __future__ import annotations

try:
    from gymnasium.envs.registration import register, registry
except ImportError as e:  # pragma: no cover - depends on the installation
    raise ImportError("hpctwin.rl needs gymnasium: pip install 'hpctwin[rl]' (or pip install gymnasium)") from e

from hpctwin.twin.rl.env import EnvConfigError, SchedulingEnv  # noqa: E402

ENV_ID = "Scheduling-v0"
if ENV_ID not in registry:
    register(id=ENV_ID, entry_point="hpctwin.twin.rl.env:SchedulingEnv")

__all__ = ["ENV_ID", "EnvConfigError", "SchedulingEnv"]
