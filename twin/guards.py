"""Engine guards: what a policy returns is checked before it is applied, a plug-in's exception
becomes a located error, and a run that can no longer make progress stops with an explanation.

* Decisions: a job index must be an integer (``int`` or a numpy integer, not ``bool``) of a waiting
  job; chosen units an integer array of distinct ids in ``[0, total)`` that are free (the cluster
  checks the last two). A float or string is an error naming the scheduler.
* Exceptions: a plug-in (scheduler, gate, model, placer) raising is reported as ``scheduler X raised
  at t=...: <the last frames of its traceback>``, a `SimulationError`.
* Progress: `QUIET_EVENTS` consecutive events with no start, no finish and no submission while jobs
  wait on a machine where nothing runs end the run (a policy that keeps asking for wake-ups but never
  starts anything; node failures so frequent that a wide job never finds its nodes up).
"""
from __future__ import annotations

import traceback

import numpy as np

from .contract import Start

#: consecutive events with no start, finish or submission, on a machine running nothing while jobs
#: wait, after which the run is declared stuck (each such event only repeats the same state)
QUIET_EVENTS = 100_000


class SimulationError(RuntimeError):
    """The run cannot go on: a decision that breaks the rules, a plug-in error, a deadlock."""


def _is_index(x) -> bool:
    return (type(x) is int) or (isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)))


def decode(name: str, d) -> tuple[int, object]:
    """(job index, chosen units or None) of one decision of scheduler ``name``."""
    if isinstance(d, Start):
        j, nodes = d.job, d.nodes
    else:
        j, nodes = d, None
    if not _is_index(j):
        raise SimulationError(f"scheduler {name} returned {j!r} ({type(j).__name__}) as a job index; "
                              "decisions must be integer job indices (positions in the queue's job "
                              "table) or Start(job, units)")
    return int(j), nodes


def check_units(name: str, job_id: int, nodes) -> np.ndarray:
    """The units scheduler ``name`` chose for job ``job_id`` as an int64 array (integers only)."""
    a = np.asarray(nodes)
    if a.ndim != 1 or (a.dtype.kind not in "iu" and not (a.size == 0 and a.dtype.kind == "f")):
        raise SimulationError(f"scheduler {name} chose units {a.ravel()[:8].tolist()} ({a.dtype}) for job "
                              f"{job_id}; unit ids must be a 1-d array of integers")
    return a.astype(np.int64, copy=False)


def located(exc: BaseException, now: float, owners: list[tuple[object, str]]) -> SimulationError:
    """A `SimulationError` naming the plug-in whose code raised ``exc`` at ``now`` (s) and the tail of
    its traceback. ``owners``: (object, label) pairs, e.g. (the scheduler, "scheduler easy")."""
    frames = list(traceback.walk_tb(exc.__traceback__))
    label, first = "the engine", 0
    for i, (frame, _) in enumerate(frames):
        me = frame.f_locals.get("self")
        hit = next((lab for obj, lab in owners if me is obj), None)
        if hit is not None:
            label, first = hit, i
            break
    summary = traceback.StackSummary.from_list(traceback.StackSummary.extract(frames[first:])[-3:])
    text = "".join(summary.format()).rstrip() + f"\n{type(exc).__name__}: {exc}"
    return SimulationError(f"{label} raised at t={now}: {text}")


def stuck_message(now: float, policy: str, model_names: list[str], waiting: int, first_id: int,
                  first_units: int, up: int, total: int, quiet: int, timed_by_models: bool) -> str:
    """The explanation of a run stopped by the progress guard."""
    head = (f"at t={now}: {quiet} events with no start, finish or submission while {waiting} jobs wait "
            f"on a machine where nothing runs (first: job {first_id}, {first_units} units; "
            f"{up} of {total} units in service now)")
    if timed_by_models:
        return (f"cannot make progress {head}; only {', '.join(model_names)} events happen. With node "
                "failures: the MTBF is too low (or repairs too long) for the job to find its units up "
                "together; raise failures.node_mtbf_s or lower failures.repair_s")
    return (f"no progress {head}; scheduler {policy} keeps asking for wake-ups but never starts a job "
            "on the idle machine")
