"""hpctwin.twin.rl: reinforcement-learning schedulers on the exact engine (issue 29; ``docs/rl.md``).

* `env.SchedulingEnv` (Gymnasium; registered as ``hpctwin.rl:Scheduling-v0`` by `hpctwin.rl`): pick
  one job of a window of the waiting queue at each decision point;
* `engine` (hpctwin's event loop stepped from outside, the committed-head `AgentPolicy`),
  `harness` (RLScheduler's env loop), `observations`, `rewards`;
* `heuristics` (agents that pick what FCFS, SJF, WFP3, UNICEP, F1 would pick);
* `policy_scheduler.RLPolicyScheduler` (``--scheduler rl:PATH``: a trained policy as an ordinary
  scheduler) and `kernel` (the numpy policy network it runs; `kernel.export_sb3` writes one from a
  stable-baselines3 model).

Only `env` needs gymnasium (the ``[rl]`` extra); the scheduler adapter needs numpy alone.
"""
from __future__ import annotations

__all__ = ["SchedulingEnv", "RLPolicyScheduler"]


def __getattr__(name: str):
    if name == "SchedulingEnv":
        from .env import SchedulingEnv  # noqa: PLC0415 - needs gymnasium
        return SchedulingEnv
    if name == "RLPolicyScheduler":
        from .policy_scheduler import RLPolicyScheduler  # noqa: PLC0415
        return RLPolicyScheduler
    raise AttributeError(f"module 'hpctwin.twin.rl' has no attribute {name!r}")
