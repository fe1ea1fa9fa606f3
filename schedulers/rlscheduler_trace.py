"""The RLScheduler harness's SWF loader and sequence sampling (``--compat rlscheduler``).

RLScheduler (Zhang et al., SC'20; github.com/DIR-LAB/deep-batch-scheduler, commit cd433e3) reads a
log with its own loader (``job.py``) and evaluates heuristics on random windows of it
(``compare-make-table.py``, driven by ``make_table_script.py``). This module reimplements both,
field for field, so that the compat replay (`schedulers.rlscheduler_compat`) sees the same jobs in
the same order as the harness. The conventions, each different from hpctwin's default reader
(`datasets.swf`):

* every non-comment line is a job; it needs the 18 SWF fields, each an integer except field 6
  (average CPU time); a line that breaks this is an error (the harness would crash on it too);
* processors ``= max(allocated, requested)`` (fields 5 and 8);
* requested time (field 9) ``-1`` is replaced by the *raw* run time (field 4, read before the next
  rule);
* a negative run time becomes 10 s; only jobs with run time > 0 are kept (a run time of 0 drops the
  job, a run time of -1 keeps it as a 10 s job);
* jobs are sorted by job number (stable);
* machine: ``; MaxNodes:`` nodes of ``MaxProcs / MaxNodes`` processors each (``MaxProcs = MaxNodes``
  when the header has none); a job takes ``ceil(procs / (MaxProcs / MaxNodes))`` nodes.

Sequence sampling (``HPCEnv.seed`` and ``reset_for_test``): the generator is gym's
``seeding.np_random(seed)`` of 2019-2020 -- a ``numpy.random.RandomState`` seeded with the first
8 bytes of ``sha512(str(seed))`` read as little-endian 32-bit words -- and sequence ``i`` starts at
the ``i``-th draw of ``randint(length, limit - length - 1)``, ``limit`` the number of jobs kept, or
the ``batch_job_slice`` when it is not 0 (the published table uses 10,000 for SDSC-SP2 and HPC2N,
0 for the Lublin traces). Times are seconds on the log's clock.
"""
from __future__ import annotations

import gzip
import hashlib
import math
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: SWF fields the harness parses as integers (1-based numbers; field 6 is parsed as a float, field 16
#: falls back to 0 when it is not an integer)
_INT_FIELDS = (1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17, 18)


class HarnessTraceError(ValueError):
    """A log line the RLScheduler loader cannot read (the message names file, line and field)."""


@dataclass
class HarnessTrace:
    """A log as the harness sees it: one entry per kept job, sorted by job number.

    ``procs`` processors, ``nodes`` nodes, ``request`` and ``run`` seconds, ``submit`` seconds on the
    log's clock. ``max_nodes`` x ``procs_per_node`` is the machine.
    """

    path: str
    job_id: np.ndarray
    submit: np.ndarray
    run: np.ndarray
    request: np.ndarray
    procs: np.ndarray
    nodes: np.ndarray
    max_nodes: int
    max_procs: int
    procs_per_node: float
    lines_read: int

    def __len__(self) -> int:
        return len(self.job_id)


def _open(path: Path):
    return gzip.open(path, "rt") if path.suffix == ".gz" else open(path)


def _parse_line(text: str, where: str) -> tuple[int, int, int, int, int]:
    s = text.split()
    if len(s) < 18:
        raise HarnessTraceError(f"{where}: {len(s)} fields, the RLScheduler loader needs the 18 SWF fields")
    for k in _INT_FIELDS:
        try:
            int(s[k - 1])
        except ValueError:
            raise HarnessTraceError(f"{where}: field {k} = {s[k - 1]!r} is not an integer "
                                    "(the RLScheduler loader reads it with int())") from None
    try:
        float(s[5])
    except ValueError:
        raise HarnessTraceError(f"{where}: field 6 = {s[5]!r} is not a number") from None
    job, submit, run, alloc, req_procs, req_time = (int(s[0]), int(s[1]), int(s[3]), int(s[4]), int(s[7]),
                                                    int(s[8]))
    procs = max(alloc, req_procs)
    if req_time == -1:
        req_time = run                     # the raw run time, before the negative-run rule below
    return job, submit, run, procs, req_time


def load_harness_trace(path: str | Path) -> HarnessTrace:
    """Read an SWF file (plain or ``.gz``) with the RLScheduler loader's conventions (module doc)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such SWF file")
    rows: list[tuple[int, int, int, int, int]] = []
    max_nodes = max_procs = 0
    n = 0
    with _open(path) as fp:
        for n, line in enumerate(fp, 1):
            if line.startswith(";"):
                if line.startswith("; MaxNodes:"):
                    max_nodes = int(line.split(":")[1].strip())
                if line.startswith("; MaxProcs:"):
                    max_procs = int(line.split(":")[1].strip())
                continue
            job, submit, run, procs, req = _parse_line(line, f"{path}:{n}")
            if run < 0:
                run = 10
            if run > 0:
                rows.append((job, submit, run, procs, req))
    if max_procs == 0:
        max_procs = max_nodes
    if max_nodes <= 0:
        raise HarnessTraceError(f"{path}: no '; MaxNodes:' header line; the RLScheduler harness sizes "
                                "the machine from it")
    rows.sort(key=lambda r: r[0])          # stable, by job number, as Workloads does
    a = np.array(rows, dtype=np.int64).reshape(-1, 5)
    ppn = max_procs / max_nodes
    nodes = np.array([int(math.ceil(float(p) / ppn)) for p in a[:, 3]], dtype=np.int64)
    return HarnessTrace(str(path), a[:, 0], a[:, 1], a[:, 2], a[:, 4], a[:, 3], nodes, max_nodes, max_procs,
                        ppn, n)


def _int_from_le_words(data: bytes) -> int:
    """Little-endian 32-bit words (zero-padded, always one word more when already aligned, as gym
    did) to one integer."""
    data = data + b"\0" * (4 - len(data) % 4)
    words = struct.unpack(f"<{len(data) // 4}I", data)
    return sum(w << (32 * i) for i, w in enumerate(words))


def gym_np_random(seed: int) -> np.random.RandomState:
    """The generator gym's ``seeding.np_random(seed)`` returned (gym 0.1x, 2019-2020)."""
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed {seed!r}: the harness's seeding takes a non-negative integer")
    seed = int(seed) % 2 ** 64
    big = _int_from_le_words(hashlib.sha512(str(seed).encode("utf8")).digest()[:8])
    words = []
    while big > 0:
        big, low = divmod(big, 2 ** 32)
        words.append(low)
    rng = np.random.RandomState()
    rng.seed(words or [0])
    return rng


def sample_starts(n_jobs: int, length: int = 1024, count: int = 10, seed: int = 1,
                  batch_job_slice: int = 0) -> list[int]:
    """The first-job indices of the harness's ``count`` test sequences of ``length`` jobs."""
    limit = n_jobs if batch_job_slice == 0 else batch_job_slice
    if batch_job_slice and batch_job_slice < length:
        raise ValueError(f"batch_job_slice {batch_job_slice} < sequence length {length}")
    if limit - length - 1 <= length:
        raise ValueError(f"{n_jobs} jobs (slice {batch_job_slice}): too few for sequences of {length} jobs "
                         f"(the harness draws starts in [{length}, {limit - length - 1}))")
    if batch_job_slice > n_jobs:
        raise ValueError(f"batch_job_slice {batch_job_slice} > {n_jobs} jobs in the log")
    rng = gym_np_random(seed)
    return [int(rng.randint(length, limit - length - 1)) for _ in range(count)]
