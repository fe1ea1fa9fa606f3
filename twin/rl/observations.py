"""Observation presets of the scheduling environment (`twin.rl.env`) and the ``rl:PATH`` scheduler.

``rlscheduler`` (RLScheduler's ``build_observation``, HPCSimPickJobs.py, commit cd433e3): ``window``
slots (its MAX_QUEUE_SIZE, 128) of 8 features, flat (``window * 8`` values in [0, 1]):

====  ==========================================================================================
0     wait: ``min((now - submit) / 43,200 s, 1 - 1e-5)``
1     requested time: ``min(request / max_exec_time, 1 - 1e-5)``; harness rules: ``max_exec_time``
      is the largest raw run time of the log (the original's normaliser); engine rules: the
      largest estimate of the workload (what a scheduler may know)
2     processors: ``min(procs / MaxProcs, 1 - 1e-5)`` (engine rules: units / machine units)
3-6   requested memory, user, group, executable: ``v / max(v)`` over the log, clipped; 1.0 when
      the log has -1 (engine rules: user and group from the job table, memory and executable 1.0)
7     can start now: ``1 - 1e-5`` if the job fits the free nodes, else ``1e-5``
====  ==========================================================================================

An empty slot is ``[0, 1, 1, 1, 1, 1, 1, 0]``, as in the original (its agents mask such slots).

``default`` (engine rules only): ``window`` slots of `JOB_FEATURES` features, then `GLOBAL_FEATURES`
machine-wide features. Times are log-scaled, ``log(1 + t / 1 s) / log(1 + 7 days)``, clipped to 1,
so one policy applies to logs of any time scale; sizes are fractions of the machine.
"""
from __future__ import annotations

import math
import struct

import numpy as np

from .harness import CLIP, EMPTY_SLOT, MAX_WAIT_TIME_S, RLS_FEATURES

PRESETS = ("default", "rlscheduler")
#: per-slot features of the default preset (name, meaning)
JOB_FEATURES = (
    ("valid", "1 for a waiting job, 0 for an empty slot"),
    ("wait", "log-scaled wait so far (now - submit, s)"),
    ("estimate", "log-scaled estimate (requested time, s)"),
    ("size", "units / machine units"),
    ("fits", "1 if the job fits the free units now"),
    ("delay", "log-scaled earliest start - now (s) by the running jobs' expected ends (0 if it fits)"),
    ("bsld", "log10 of the bounded slowdown if it started at that earliest start (estimate as run time) / 4"),
    ("area", "estimate x units / (7 days x machine units), clipped"),
    ("power", "full-speed power the job adds (W) / the machine's full-speed dynamic power (0 without the power model)"),
)
#: machine-wide features of the default preset
GLOBAL_FEATURES = (
    ("free", "free units / machine units (after this pass's picks)"),
    ("queue", "waiting jobs / window, clipped to 1"),
    ("hidden", "fraction of the waiting jobs outside the window"),
    ("running", "running jobs / machine units"),
    ("next_end", "log-scaled time to the next expected end (1 if nothing runs)"),
    ("oldest", "log-scaled wait of the longest-waiting job (in the window or not)"),
    ("power", "machine electrical power now (this pass's picks not yet in) / its all-busy full-speed power "
              "(0 without the power model)"),
    ("cap_headroom", "(cap - power) / cap, clipped to [0, 1]; 1 without a cap"),
)
WEEK_S = 7 * 24 * 3600.0
_LOG_WEEK = math.log1p(WEEK_S)


def log_time(t: np.ndarray | float) -> np.ndarray | float:
    """``log(1 + t / 1 s) / log(1 + 7 days)`` clipped to [0, 1] (t in seconds)."""
    return np.clip(np.log1p(np.maximum(t, 0.0)) / _LOG_WEEK, 0.0, 1.0)


def check_preset(obs: str) -> str:
    if obs not in PRESETS:
        raise ValueError(f"obs = {obs!r}: known observation presets: {', '.join(PRESETS)}")
    return obs


def preset_size(obs: str, window: int) -> int:
    """Length of the flat observation vector."""
    if obs == "rlscheduler":
        return window * RLS_FEATURES
    return window * len(JOB_FEATURES) + len(GLOBAL_FEATURES)


# ---------------------------------------------------------------------- rlscheduler preset
def rls_template(window: int) -> np.ndarray:
    """A (window, 8) float64 array of empty slots."""
    return np.tile(np.asarray(EMPTY_SLOT, dtype=np.float64), (window, 1))


_PACK = struct.Struct("f").pack
_CLIP32, _LOW32 = _PACK(CLIP), _PACK(1e-5)
#: up to this many visible jobs, the harness observation is assembled as bytes (faster for few rows)
_BYTES_ROWS = 12


def static_bytes(static32: np.ndarray) -> list[bytes]:
    """Columns 1-6 of each job's static row, as 24 bytes of float32 (`rls_observation_fast`)."""
    return [struct.pack("6f", *row[1:7]) for row in static32.tolist()]


def rls_observation_fast(template32: np.ndarray, static32: np.ndarray, rows6: list[bytes], idx: list[int],
                         now: int, submit: list[int], nodes: list[int], free: int, submit_np: np.ndarray,
                         nodes_np: np.ndarray) -> np.ndarray:
    """`rls_observation` under harness rules, the same values (the wait divided in float64, then
    rounded to float32 as the original's vector is cast): ``template32`` (window, 8) float32 empty
    slots, ``static32`` the static rows as float32 and ``rows6`` their bytes (`static_bytes`),
    ``idx`` the visible jobs, ``submit``/``nodes`` per job as lists and as arrays, ``free`` nodes."""
    k = len(idx)
    if k <= _BYTES_ROWS:
        buf = b"".join([_PACK(min((now - submit[j]) / MAX_WAIT_TIME_S, CLIP)) + rows6[j]
                        + (_CLIP32 if nodes[j] <= free else _LOW32) for j in idx])
        return np.frombuffer(bytearray(buf + template32.data.cast("B")[32 * k:]), dtype=np.float32)
    out = template32.copy()
    rows = out[:k]
    ix = np.array(idx, dtype=np.int64)
    rows[:] = static32[ix]
    rows[:, 0] = np.minimum((now - submit_np[ix]) / float(MAX_WAIT_TIME_S), CLIP)
    rows[:, 7] = np.where(nodes_np[ix] <= free, np.float32(CLIP), np.float32(1e-5))
    return out.reshape(-1)


def rls_observation(template: np.ndarray, static: np.ndarray, idx: np.ndarray, wait_s: np.ndarray,
                    fits: np.ndarray) -> np.ndarray:
    """RLScheduler's vector: ``static`` rows of the visible jobs ``idx`` with the wait (s) and the
    can-start flag filled in, empty slots after them; float32 (the original's Box dtype)."""
    out = template.copy()
    k = len(idx)
    if k:
        rows = static[idx]
        rows[:, 0] = np.minimum(wait_s / float(MAX_WAIT_TIME_S), CLIP)
        rows[:, 7] = np.where(fits, CLIP, 1e-5)
        out[:k] = rows
    return out.reshape(-1).astype(np.float32)


def rls_static_from_table(jobs, total: int) -> np.ndarray:
    """The static columns of the ``rlscheduler`` preset under engine rules (module doc)."""
    est = np.asarray(jobs.estimate, dtype=np.float64)
    st = np.zeros((len(est), RLS_FEATURES), dtype=np.float64)
    top = float(est.max()) if len(est) else 1.0
    st[:, 1] = np.minimum(est / top, CLIP)
    st[:, 2] = np.minimum(np.asarray(jobs.procs, dtype=np.float64) / float(total), CLIP)
    st[:, 3] = st[:, 6] = 1.0
    for c, col in ((4, jobs.user), (5, jobs.group)):
        v = np.asarray(col, dtype=np.float64)
        m = float(v.max()) if len(v) else 0.0
        st[:, c] = np.where(v == -1, 1.0, np.minimum(v / m, CLIP) if m > 0 else 1.0)
    return st


# ---------------------------------------------------------------------- default preset
class RichObserver:
    """The ``default`` preset for a bound job table (engine rules; see `JOB_FEATURES`)."""

    def __init__(self, window: int, jobs, total: int, power=None, cap_w: float | None = None):
        self.window, self.total = window, int(total)
        self.submit = np.asarray(jobs.submit, dtype=np.float64)
        self.est = np.asarray(jobs.estimate, dtype=np.float64)
        self.procs = np.asarray(jobs.procs, dtype=np.int64)
        self.power, self.cap_w = power, cap_w
        self.nf, self.ng = len(JOB_FEATURES), len(GLOBAL_FEATURES)
        self.area = np.minimum(self.est * self.procs / (WEEK_S * self.total), 1.0)
        if power is not None:
            dyn = (np.asarray(power.p_capped, dtype=np.float64)[: len(self.est)] - float(power.node_idle))
            full = max(float(np.max(dyn)) * self.total, 1e-9) if len(dyn) else 1.0
            self.job_power = np.clip(dyn * self.procs / full, 0.0, 1.0)
            self.peak_w = max(float(power.electrical_power_w()) + full * float(power.k_fac), 1e-9)
        else:
            self.job_power = np.zeros(len(self.est))
            self.peak_w = 1.0

    def observe(self, now: float, jobs: np.ndarray, n_waiting: int, free: int, run_end: np.ndarray,
                run_procs: np.ndarray, oldest_wait: float) -> np.ndarray:
        """The vector for the waiting ``jobs`` in the window (slot order), ``n_waiting`` jobs waiting
        in all, ``free`` units free, running jobs' expected ends (s) and units (this pass's picks
        included), and the longest wait (s) of any waiting job."""
        w, nf = self.window, self.nf
        out = np.zeros(w * nf + self.ng, dtype=np.float64)
        slots = out[: w * nf].reshape(w, nf)
        k = len(jobs)
        if k:
            order = np.argsort(run_end, kind="stable")
            ends = run_end[order]
            avail = free + np.cumsum(run_procs[order])
            p = self.procs[jobs]
            fits = p <= free
            pos = np.searchsorted(avail, p, side="left")
            if len(ends):
                start = np.where(fits, now, np.where(pos < len(ends), ends[np.minimum(pos, len(ends) - 1)], np.inf))
            else:
                start = np.where(fits, now, np.inf)
            delay = np.where(np.isfinite(start), start - now, WEEK_S)
            wait = now - self.submit[jobs]
            est = self.est[jobs]
            bsld = np.maximum(1.0, (wait + delay + est) / np.maximum(est, 10.0))
            slots[:k, 0] = 1.0
            slots[:k, 1] = log_time(wait)
            slots[:k, 2] = log_time(est)
            slots[:k, 3] = p / self.total
            slots[:k, 4] = fits
            slots[:k, 5] = log_time(delay)
            slots[:k, 6] = np.minimum(np.log10(bsld) / 4.0, 1.0)
            slots[:k, 7] = self.area[jobs]
            slots[:k, 8] = self.job_power[jobs]
        g = out[w * nf:]
        g[0] = free / self.total
        g[1] = min(n_waiting / w, 1.0)
        g[2] = (n_waiting - k) / n_waiting if n_waiting > k else 0.0
        g[3] = len(run_end) / self.total
        g[4] = log_time(float(run_end.min()) - now) if len(run_end) else 1.0
        g[5] = log_time(oldest_wait)
        if self.power is not None:
            pw = float(self.power.electrical_power_w())
            g[6] = min(pw / self.peak_w, 1.0)
            g[7] = float(np.clip((self.cap_w - pw) / self.cap_w, 0.0, 1.0)) if self.cap_w else 1.0
        else:
            g[7] = 1.0
        return out.astype(np.float32)


class EngineObserver:
    """Either preset under engine rules, read from a committed-head policy (`twin.rl.engine.AgentPolicy`)
    at a decision: the window is the waiting queue (without this pass's picks) in arrival order, its
    first ``window`` jobs. ``static``: the ``rlscheduler`` preset's static rows of ``jobs``
    (`rls_static_from_table`, or a slice of the whole log's); ``power``: the power model (or its
    read-only view) or None; ``cap_w``: the cap (W) of the cap-headroom feature."""

    def __init__(self, preset: str, window: int, jobs, total: int, static: np.ndarray | None = None, power=None,
                 cap_w: float | None = None):
        self.preset, self.window = check_preset(preset), int(window)
        self.submit = np.asarray(jobs.submit, dtype=np.float64)
        self.procs = np.asarray(jobs.procs, dtype=np.int64)
        if preset == "rlscheduler":
            self.static = rls_static_from_table(jobs, total) if static is None else static
            self.template = rls_template(self.window)
        else:
            self.rich = RichObserver(self.window, jobs, total, power, cap_w)

    def observe(self, policy, cluster, now: float) -> tuple[np.ndarray, np.ndarray]:
        """(flat float32 observation, the window's job indices in slot order)."""
        waiting = policy.waiting()
        vis = waiting[: self.window]
        if self.preset == "rlscheduler":
            return rls_observation(self.template, self.static, vis, now - self.submit[vis],
                                   self.procs[vis] <= policy.free), vis
        p_end, p_procs = policy.pending_expected_ends()
        run_end = np.concatenate((np.asarray(cluster.running_expected_end, dtype=np.float64), p_end))
        run_procs = np.concatenate((np.asarray(cluster.running_procs, dtype=np.int64), p_procs))
        oldest = now - float(self.submit[waiting].min()) if len(waiting) else 0.0
        return self.rich.observe(now, vis, len(waiting), policy.free, run_end, run_procs, oldest), vis
