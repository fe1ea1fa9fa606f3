"""Bytes a training iteration sends across topology groups (Dragonfly groups, fat-tree pods, leaves).

For a job whose ranks sit on ``rank_node`` (Megatron order, `comm.rank_grid`) and a machine whose
nodes map to groups (``node_group``, `topology.presets.node_groups`), `global_bytes_per_iteration`
counts, per kind of traffic, the bytes of one iteration whose source and destination ranks are in
different groups (the traffic that uses global links), with the same messages the time model costs
(`iteration`):

* **tp**: per layer and micro-batch 4 collectives (+2 with full recomputation) of ``2 b s h / cp``
  bytes, reduce-scatter + all-gather with sequence parallelism, all-reduce otherwise (ring);
* **cp**: per layer and micro-batch ``cp - 1`` ring exchanges of the local K and V forward, twice the
  bytes backward (+ once more with full recomputation);
* **ep**: per layer and micro-batch 4 all-to-alls (+2) of the local tokens' top-k copies (pairwise);
* **pp**: every micro-batch's activations forward and gradients backward over the ``v p - 1`` chunk
  boundaries of the (interleaved) pipeline, ``2 b s h / (cp tp)`` bytes per rank pair;
* **dp**: the gradients (2 B per parameter of the largest stage) over each DP x CP group: all-reduce
  (ZeRO 0), reduce-scatter + all-gather (ZeRO 1-2), reduce-scatter + 2 all-gathers per micro-batch
  (ZeRO 3), with ``dp_algorithm``.

Layers per stage: ``ceil(l / pp)`` for every stage (as the time model's slowest stage). Units: bytes.
"""
from __future__ import annotations

import math

import numpy as np
from hpctwin.topology.collectives import global_bytes

import hpctwin.twin.training.comm as comm
from .memory import stage_params


def _groups_bytes(collective: str, algorithm: str, groups: np.ndarray, rank_group: np.ndarray, nbytes: float) -> float:
    """Global bytes of ``collective`` on every row of ``groups`` (rank ids) with reference buffer ``nbytes``."""
    p = groups.shape[1]
    if p < 2 or nbytes <= 0:
        return 0.0
    sched = comm.schedule(collective, algorithm, p)
    g = rank_group[groups]
    crossing = g != g[:, :1]
    total = 0.0
    for row in np.flatnonzero(crossing.any(axis=1)):
        total += global_bytes(sched, g[row], nbytes)
    return total


def global_bytes_per_iteration(model, par, batch, rank_node: np.ndarray, node_group: np.ndarray) -> dict[str, float]:
    """Bytes crossing group boundaries in one iteration, by kind (``tp``, ``cp``, ``ep``, ``pp``,
    ``dp``) and ``total``; ``rank_node[r]``: node id of rank ``r``; ``node_group[n]``: group of node ``n``."""
    R = comm.rank_grid(par.tp, par.cp, par.dp, par.pp)
    rg = np.asarray(node_group, dtype=np.int64)[np.asarray(rank_node, dtype=np.int64)]
    b, s, m = batch.micro_batch, batch.seq_len, batch.microbatches(par.dp)
    L = math.ceil(model.layers / par.pp)
    full = par.recompute == "full"
    out = {}
    act = 2.0 * b * s / par.cp * model.hidden
    n_tp = 4 + (2 if full else 0)
    tg = comm.tp_groups(R)
    per = (_groups_bytes("reduce_scatter", "ring", tg, rg, act) + _groups_bytes("allgather", "ring", tg, rg, act)
           if par.sp else _groups_bytes("allreduce", "ring", tg, rg, act))
    out["tp"] = n_tp * L * m * per
    cp = 0.0
    if par.cp > 1:
        cg = comm.cp_groups(R)
        kv = 2 * 2.0 * b * s / par.cp * max(model.kv_dim / par.tp, model.head_dim)
        cross = np.count_nonzero(rg[cg] != rg[np.roll(cg, -1, axis=1)])
        cp = (par.cp - 1) * kv * (1 + 2 + (1 if full else 0)) * cross * L * m
    out["cp"] = cp
    ep = 0.0
    if par.ep > 1:
        per_rank = 2.0 * b * s / par.cp * model.top_k * model.hidden / par.tp
        ep = (4 + (2 if full else 0)) * L * m * _groups_bytes("alltoall", "pairwise", comm.ep_groups(R, par.ep), rg,
                                                              per_rank)
    out["ep"] = ep
    pp = 0.0
    if par.pp > 1:
        nbytes = 2.0 * b * s / par.cp * model.hidden / par.tp
        for st in range(par.pp):
            nxt = (st + 1) % par.pp
            mult = par.vpp if st < par.pp - 1 else par.vpp - 1     # chunk boundaries st -> st+1 (wrap: v - 1)
            if mult:
                pp += 2.0 * m * nbytes * mult * np.count_nonzero(rg[R[st]] != rg[R[nxt]])
    out["pp"] = pp
    dg = comm.dp_groups(R)
    n = max(stage_params(model, par.tp, par.pp, par.ep, st) for st in ("first", "last"))
    grad = 2.0 * n
    alg = par.dp_algorithm
    if par.zero == 0:
        dp = _groups_bytes("allreduce", alg, dg, rg, grad)
    else:
        rs = _groups_bytes("reduce_scatter", alg, dg, rg, grad)
        ag = _groups_bytes("allgather", alg, dg, rg, grad)
        dp = rs + (ag if par.zero < 3 else 2 * m * ag)
    out["dp"] = dp
    out["total"] = sum(out.values())
    return out
