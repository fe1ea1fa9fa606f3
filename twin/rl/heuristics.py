"""Heuristic agents: pick, among the window's jobs, what an RLScheduler heuristic would pick.

`heuristic_action(env, name)` returns the slot of the first window job with the lowest score of
`schedulers.rlscheduler_compat.SCORES` (``fcfs``, ``sjf``, ``wfp3``, ``unicep``, ``f1``,
``smallest``; WFP3 and UNICEP with the harness's ``wait = -1 - submit``), ties to the earlier slot
(the first job of a stable sort). Under harness rules such an agent reproduces the
``--compat rlscheduler`` table when the window holds the whole queue.
"""
from __future__ import annotations


def heuristic_action(env, name: str) -> int:
    """The slot the heuristic ``name`` picks in ``env``'s current window (``env``: the environment or
    a wrapper of it)."""
    base = getattr(env, "unwrapped", env)
    keys = base.heuristic_keys(name)
    jobs = base.window_jobs()
    if not jobs:
        raise RuntimeError("no decision is pending (the episode is over); call reset()")
    best, best_key = 0, keys[jobs[0]]
    for slot in range(1, len(jobs)):
        k = keys[jobs[slot]]
        if k < best_key:
            best, best_key = slot, k
    return best
