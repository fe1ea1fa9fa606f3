"""Collective algorithms as data: Bine trees/butterflies and the classic baselines.

One definition, several back-ends:

* :func:`build_schedule` (``collective``, ``algorithm``, ``p``, ``root``) -> :class:`Schedule`
  (pure Python + numpy, no MPI);
* :class:`AlphaBetaGamma` latency/bandwidth/reduction cost model;
* :func:`global_bytes` (bytes crossing group boundaries for a rank -> group map) and
  :func:`link_loads` (bytes per directed link per step on a networkx topology);
* :func:`run_schedule` / :func:`check_schedule` (pure-numpy executor) and
  :mod:`topology.collectives.mpi_exec` (mpi4py executor); ``python -m hpctwin.topology.collectives.validate``
  checks every schedule against the MPI library under ``mpiexec``.

Step convention: steps count from 0; the Bine distance-doubling butterfly uses pi(r, k) at step k,
so for p = 8 step 1 pairs (0,7) (1,2) (3,4) (5,6).  See :mod:`topology.collectives.bine`.
"""
from .algorithms import ALGORITHMS, ALIASES, PAIRS, algorithms_for, build_schedule, canonical, supports
from .bine import bine_partners, block_numbering, pi, rho, xor_partners
from .cost import (AlphaBetaGamma, LinkLoadResult, ShortestPathRouter, global_bytes, global_bytes_per_step, link_loads,
                   rank_groups)
from .schedule import COLLECTIVES, Schedule, ScheduleError, Step
from .simulate import ScheduleExecutionError, check_schedule, reference_result, run_schedule

__all__ = [
    "ALGORITHMS", "ALIASES", "PAIRS", "COLLECTIVES", "algorithms_for", "build_schedule", "canonical", "supports",
    "bine_partners", "block_numbering", "pi", "rho", "xor_partners",
    "AlphaBetaGamma", "LinkLoadResult", "ShortestPathRouter", "global_bytes", "global_bytes_per_step",
    "link_loads", "rank_groups",
    "Schedule", "ScheduleError", "Step", "ScheduleExecutionError", "check_schedule", "reference_result",
    "run_schedule",
]
