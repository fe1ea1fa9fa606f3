"""Power-saving awareness of the Slurm-like policy: awake idle nodes before powered-down ones.

Slurm 22.05, ``src/slurmctld/node_scheduler.c`` ``_build_node_list``: "If any nodes are powered down,
put them into a new node_set record with a higher scheduling weight. This means we avoid scheduling
jobs on powered down nodes where possible": the powered-down nodes of a node set (``power_node_bitmap``)
get ``node_weight = reboot_weight`` (``node_features_g_reboot_weight()``: ``INFINITE - 1`` without a
node_features plugin) and the flag ``NODE_SET_POWER_DN``, so ``_set_sched_weight`` gives them
``(INFINITE - 1) << 8 | 0xff | 0x20000000000`` ("Requires boot"), above every configured ``Weight``.
``_pick_best_nodes`` then tries the node sets in ``sched_weight`` order:

* **select/linear** (no single job test): node sets are accumulated in weight order and
  ``select_g_job_test`` (``_job_test``) runs once enough nodes are accumulated: the awake candidates
  alone when they are enough (`awake_first`), else all of them, powered-down ones included.
* **select/cons_tres** (``SELECT_SINGLE_JOB_TEST``): ``_sync_node_weight`` copies each set's
  ``sched_weight`` into the node records, which cons_tres's ``_eval_nodes`` groups into sets of
  consecutive nodes of the same weight, the lowest weight first: powered-down nodes form sets of
  their own, tried last (`tres_weights`, passed to `schedulers.slurm_tres.eval_nodes`).

Both apply to the starts the policy makes now (the main/event pass and backfill's ``_start_job``
path, which calls ``select_nodes`` -> ``_pick_best_nodes``). Backfill's will-run tests (future
reservations) keep the configured weights: 22.05's backfill calls ``select_g_job_test`` directly on
node records whose ``sched_weight`` is whatever the last ``_pick_best_nodes`` synced, which the twin
does not reproduce. The whole-node cons_tres approximation (``node_order``) is unchanged.

Which nodes are powered down comes from the run's ``power_saving`` model (`power.suspend`), read through
its policy view (``powered_down()``, a bool per model node) when the run has it (`power_view`: the
policy declares no ``needs_models``, so it sees every model of the run); without it nothing here runs
and the policy decides byte for byte as before. Outside ``--allocation gpu`` the model counts one
engine unit a node; a Slurm node of several units (CPUs) counts as powered down when any of its units
is (a start there may have to wait for a boot).
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["POWERED_DOWN_WEIGHT", "power_view", "asleep_nodes", "awake_first", "tres_weights"]

#: the weight (in `schedulers.slurm_tres.TresMachine.weight` units) of a powered-down node: above any
#: configured Weight (a uint32), as 22.05's reboot_weight INFINITE - 1 with the "Requires boot" flag
POWERED_DOWN_WEIGHT = 1 << 40


def power_view(ctx: Any) -> Any:
    """The run's ``power_saving`` model view from the `BindContext` (None when the run has none)."""
    models = getattr(ctx, "models", None) or {}
    return models.get("power_saving") if hasattr(models, "get") else None


def asleep_nodes(sched: Any) -> int:
    """Bitset of the policy's nodes that are powered down now (bit i = node i): a node of several
    engine units counts when any of its units is powered down."""
    pd = np.asarray(sched.ps_view.powered_down(), dtype=bool)
    NN = int(sched.NN)
    if len(pd) != NN:
        units = np.flatnonzero(pd)
        if getattr(sched, "shared", False):
            nodes = sched.tm.node_of(units)
        else:
            nodes = units // max(int(sched.cpn), 1)
        pd = np.zeros(NN, dtype=bool)
        pd[nodes[(nodes >= 0) & (nodes < NN)]] = True
    if not pd.any():
        return 0
    return int.from_bytes(np.packbits(pd, bitorder="little").tobytes(), "little")


def awake_first(cand: int, need: int, asleep: int) -> int:
    """select/linear's node sets in weight order: the awake candidates (bitset) when at least
    ``need`` of them remain, else every candidate."""
    awake = cand & ~asleep
    return awake if awake.bit_count() >= need else cand


def tres_weights(sched: Any) -> list[int] | None:
    """cons_tres node weights with the powered-down nodes at `POWERED_DOWN_WEIGHT` (None when the run
    has no power_saving model, or no node is powered down: the configured weights apply)."""
    if getattr(sched, "ps_view", None) is None:
        return None
    asleep = asleep_nodes(sched)
    if not asleep:
        return None
    w = list(sched.tm.weight)
    while asleep:
        low = asleep & -asleep
        w[low.bit_length() - 1] = POWERED_DOWN_WEIGHT
        asleep ^= low
    return w
