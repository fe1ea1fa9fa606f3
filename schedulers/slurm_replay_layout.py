"""Index layout of the Slurm-like whole-run replay's state and parameter vectors (numba has no
objects): ``fs`` floats, ``st`` ints, ``cnt`` the policy's counters, ``fp``/``ip`` parameters.
A plain module (no numba) so `schedulers.slurm_replay` can fill the parameters without importing
the JIT kernels. The compiled replay (`schedulers.slurm_replay_kernels`) reads these as constants:
after editing this file, touch that one so numba's JIT cache recompiles (the ahead-of-time build of
`twin.aot` hashes this file itself)."""
from __future__ import annotations

# fs: float state
F_BF_LAST, F_BF_CHANGE, F_WAKE = 0, 1, 2
# st: int state
S_IDLE, S_PENDING, S_EVENT, S_MAIN_DIRTY, S_BF_DIRTY, S_BF_LEFT, S_NFREE, S_NEW, S_RUN = range(9)
# cnt: SlurmScheduler.stats, in this order (STAT_NAMES in schedulers.slurm_replay)
C_EVENT, C_MAIN, C_BF, C_SKIP, C_BF_STARTS, C_MAIN_STARTS, C_RESV, C_MISSED = range(8)
# fp: float parameters; ip: int parameters
P_IV, P_POLL, P_SCHED_IV, P_RES, P_WINDOW, P_MIN_AGE = range(6)
Q_BF_ON, Q_DEPTH, Q_PART_DEPTH, Q_MAX_TEST, Q_JPCR, Q_MAX_START, Q_MIN_PRIO, Q_NN, Q_CPN, \
    Q_NPARTS, Q_QUIET = range(11)
