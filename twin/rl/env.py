"""`SchedulingEnv`: a Gymnasium environment on hpctwin's exact engine, for learned schedulers.

``gymnasium.make("hpctwin.rl:Scheduling-v0", workload="Lublin-256", ...)``. An episode is a window
of ``length`` consecutive jobs of the workload (RLScheduler's job sequence), on an empty machine. At
each decision point the agent picks one job from a window of ``window`` slots of the waiting queue
(``Discrete(window)``; `action_masks` / ``info["action_mask"]`` mark the filled slots); the
simulation then advances, exactly and event by event, to the next decision point. See ``docs/rl.md``.

Two sets of rules (``rules``):

* ``harness`` (the ``rlscheduler`` preset's default): RLScheduler's own env loop (`twin.rl.harness`,
  the rules of ``--compat rlscheduler``): its loader, one event at a time, its greedy backfilling
  (``base = "easy"``), no kill at the request. An agent that picks what a harness heuristic picks
  reproduces the ``--compat rlscheduler`` table; the ``rlscheduler`` observation equals the
  original environment's.
* ``engine`` (the ``default`` preset's): hpctwin's event loop stepped from outside
  (`twin.rl.engine`; the semantics of ``hpctwin run``): any ``--workload`` spec and ``--system``,
  jobs killed at their request, ``base`` = hpctwin's ``none`` / ``easy`` / ``conservative``, the
  power model when the system has one.

Windows are sampled as RLScheduler does (`schedulers.rlscheduler_trace.gym_np_random`): ``reset(seed=s)``
starts the generator, each reset draws the next window start ``lo + randint(length, n - length - 1)``
within ``job_slice = (lo, hi)`` (RLScheduler's ``batch_job_slice`` is ``(0, slice)``), so
``reset(seed=1)`` and nine more resets give the harness's ten test sequences. ``starts`` (a list)
cycles through fixed window starts instead; ``reset(options={"start": k})`` takes one.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from hpctwin.schedulers.rlscheduler_compat import SCORES
from hpctwin.schedulers.rlscheduler_trace import gym_np_random

from .engine import AgentPolicy, SteppedSimulation
from .harness import HarnessEpisode, check_window, harness_keys, load_observation_trace
from .observations import (RLS_FEATURES, EngineObserver, check_preset, preset_size, rls_observation_fast,
                           rls_static_from_table, rls_template, static_bytes)
from .rewards import RewardTracker, TAU_S, check_reward

RULES = ("harness", "engine")
INVALID = ("first", "raise")


class EnvConfigError(ValueError):
    """An environment option that cannot be honoured (the message names the option)."""


# ---------------------------------------------------------------------- data, loaded once per process
@functools.lru_cache(maxsize=8)
def _harness_data(path: str, mtime: float):
    obs = load_observation_trace(path)
    obs.static32 = obs.static.astype(np.float32)
    obs.rows6 = static_bytes(obs.static32)
    return obs, harness_keys(obs.trace)


@functools.lru_cache(maxsize=8)
def _engine_data(workload: str, data_dir: str | None, system: str | None, nodes: int | None, seed: int,
                 estimate: str, kill: bool):
    from hpctwin.twin import run as run_mod  # noqa: PLC0415
    cfg = run_mod.RunConfig(workload=workload, system=system, nodes=nodes, seed=seed, data_dir=data_dir,
                            estimate=estimate, kill_at_walltime=kill)
    r = run_mod._Run(cfg, None, 0.0)
    run_mod._setup(r)
    return r.prep, r.jobs, int(r.total), r.system, cfg


def _take(jobs, lo: int, hi: int):
    """Rows ``lo .. hi - 1`` of a `JobTable`."""
    from hpctwin.twin.contract import JobTable  # noqa: PLC0415
    s = slice(lo, hi)
    return JobTable(job_id=jobs.job_id[s], submit=jobs.submit[s], procs=jobs.procs[s], estimate=jobs.estimate[s],
                    requested_time=jobs.requested_time[s], user=jobs.user[s], group=jobs.group[s],
                    queue=jobs.queue[s], partition=jobs.partition[s],
                    columns={k: v[s] for k, v in (jobs.columns or {}).items()})


def _score(fn, s, r, p):
    """A harness score; a requested time of 0 s (WFP3 and UNICEP divide by it) ranks last."""
    try:
        return fn(s, r, p)
    except ZeroDivisionError:
        return float("inf")


class _EnvSimulation(SteppedSimulation):
    """The stepped engine, integrating the power model's electrical power between events (J)."""

    power = None
    cap_w = 0.0

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.energy_j = self.excess_j = 0.0
        self._t, self._p = None, 0.0

    def before_event(self, now: float) -> None:
        if self.power is not None and self._t is not None:
            dt = now - self._t
            self.energy_j += self._p * dt
            if self.cap_w:
                self.excess_j += max(0.0, self._p - self.cap_w) * dt
        self._t = now

    def after_event(self, now: float) -> None:
        if self.power is not None:
            self._p = float(self.power.electrical_power_w())


class SchedulingEnv(gym.Env):
    """Pick one job of a window of the waiting queue at each decision point (module doc; docs/rl.md).

    Parameters (seconds, units, watts)
    ----------
    workload: a registry name or SWF file (harness rules), any ``--workload`` spec (engine rules).
    obs: ``"default"`` (machine state, reservations, power) or ``"rlscheduler"`` (RLScheduler's 8 features).
    rules: ``"harness"`` or ``"engine"`` (default: harness for ``rlscheduler``, engine for ``default``).
    window: slots the agent chooses from (default 128, RLScheduler's MAX_QUEUE_SIZE).
    length: jobs per episode (default 256, RLScheduler's JOB_SEQUENCE_SIZE).
    base: the rest of the pass: ``none``, ``easy`` (harness rules: its greedy backfilling), ``conservative``.
    reward: ``bsld``, ``wait``, ``utilisation``, ``energy``, ``power-cap`` (`twin.rl.rewards`);
    reward_per: ``episode`` or ``step``.
    job_slice: ``(lo, hi)`` job indices the windows are drawn in (an int ``hi`` means ``(0, hi)``).
    starts: fixed window starts, cycled through by successive resets (instead of sampling).
    seed: the window generator's seed when the first reset gives none.
    invalid_action: ``first`` (an empty slot means slot 0; ``info["invalid_action"]``) or ``raise``.
    system, nodes, data_dir, estimate, kill_at_walltime: as ``hpctwin run`` (engine rules).
    power: the power model (engine rules; default: on when the system has a [power] table).
    power_cap_w: the cap (W) of the ``power-cap`` reward and of the cap-headroom feature.
    queue_sort: harness rules: sort the waiting list by this heuristic's score before each pick, as
        the harness's heuristic loop does (its environment does not); only the order of same-second
        jobs in the backfill scan (and in the window) depends on it. None (default): the original
        environment's behaviour.
    """

    metadata = {"render_modes": []}

    def __init__(self, workload: str = "Lublin-256", *, obs: str = "default", rules: str | None = None,
                 window: int | None = None, length: int = 256, base: str = "none", reward: str = "bsld",
                 reward_per: str = "episode", job_slice: int | tuple[int, int] | None = None,
                 starts: list[int] | None = None, seed: int = 0, invalid_action: str = "first",
                 system: str | None = None, nodes: int | None = None, data_dir: str | None = None,
                 estimate: str = "requested", kill_at_walltime: bool = True, power: bool | None = None,
                 power_cap_w: float | None = None, queue_sort: str | None = None):
        super().__init__()
        try:
            self.preset = check_preset(obs)
            self.window = check_window(128 if window is None else window)
        except ValueError as e:
            raise EnvConfigError(str(e)) from None
        self.rules = rules or ("harness" if obs == "rlscheduler" else "engine")
        if self.rules not in RULES:
            raise EnvConfigError(f"rules = {self.rules!r}: known: {', '.join(RULES)}")
        if self.rules == "harness" and obs != "rlscheduler":
            raise EnvConfigError("obs = 'default' needs rules = 'engine' (the harness rules keep no machine state "
                                 "beyond free nodes; use obs = 'rlscheduler' with them)")
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 1:
            raise EnvConfigError(f"length = {length!r}: a positive number of jobs per episode is needed")
        self.length = int(length)
        allowed = ("none", "easy") if self.rules == "harness" else ("none", "easy", "conservative")
        if base not in allowed:
            raise EnvConfigError(f"base = {base!r} with rules = {self.rules!r}: known: {', '.join(allowed)}")
        if invalid_action not in INVALID:
            raise EnvConfigError(f"invalid_action = {invalid_action!r}: known: {', '.join(INVALID)}")
        self.base, self.invalid_action, self.seed0 = base, invalid_action, int(seed)
        self.power_cap_w = None if power_cap_w is None else float(power_cap_w)
        if self.rules == "harness":
            for name, v in (("system", system), ("nodes", nodes), ("power", power), ("power_cap_w", power_cap_w),
                            ("estimate", None if estimate == "requested" else estimate)):
                if v:
                    raise EnvConfigError(f"{name} = {v!r} has no counterpart under rules = 'harness' (the machine "
                                         "is the log header's); use rules = 'engine'")
            self._load_harness(workload, data_dir)
            if queue_sort is not None and queue_sort not in SCORES:
                raise EnvConfigError(f"queue_sort = {queue_sort!r}: known: {', '.join(SCORES)}")
            self.queue_sort = queue_sort
        else:
            if queue_sort is not None:
                raise EnvConfigError("queue_sort is a harness-rules option (the engine's queue is in arrival order)")
            self._load_engine(workload, data_dir, system, nodes, estimate, kill_at_walltime, power)
        try:
            check_reward(reward, reward_per, self.rules, self.has_power, self.power_cap_w)
        except ValueError as e:
            raise EnvConfigError(str(e)) from None
        self.reward_kind, self.reward_per = reward, reward_per
        self.lo, self.hi = self._slice(job_slice)
        self.starts = None if starts is None else [self._check_start(s, "starts") for s in starts]
        self._start_ptr = 0
        self.action_space = spaces.Discrete(self.window)
        self.observation_space = spaces.Box(0.0, 1.0, (preset_size(self.preset, self.window),), np.float32)
        self._rng = None
        self._template = rls_template(self.window) if self.preset == "rlscheduler" else None
        self._template32 = None if self._template is None else self._template.astype(np.float32)
        self._keys: dict[str, list] = {}
        self._ep = None

    # ------------------------------------------------------------------ loading
    def _load_harness(self, workload: str, data_dir: str | None) -> None:
        from hpctwin.schedulers.rlscheduler_run import resolve_trace_path  # noqa: PLC0415
        try:
            path = resolve_trace_path(workload, data_dir)
        except Exception as e:  # noqa: BLE001 - registry errors: one line
            raise EnvConfigError(f"workload {workload!r}: {e}") from None
        self.data, self.hkeys = _harness_data(str(path), Path(path).stat().st_mtime)
        tr = self.data.trace
        self.n_jobs, self.has_power = len(tr), False
        self.t_submit, self.t_run, self.t_procs = tr.submit.tolist(), tr.run.tolist(), tr.procs.tolist()
        self.t_nodes = tr.nodes.tolist()
        self._static32, self._rows6 = self.data.static32, self.data.rows6

    def _load_engine(self, workload, data_dir, system, nodes, estimate, kill, power) -> None:
        from hpctwin.twin.run import RunConfigError  # noqa: PLC0415
        try:
            prep, jobs, total, spec, cfg = _engine_data(str(workload), data_dir, system, nodes, self.seed0,
                                                        estimate, bool(kill))
        except (RunConfigError, ValueError, FileNotFoundError) as e:
            raise EnvConfigError(f"workload {workload!r}: {e}") from None
        self.prep, self.jobs, self.total, self.system_spec, self.cfg = prep, jobs, total, spec, cfg
        self.n_jobs = len(jobs)
        can_power = spec is not None and bool(spec.power)
        if power and not can_power:
            raise EnvConfigError("power = True needs a system with a [power] table (e.g. system = 'generic')")
        self.has_power = can_power if power is None else bool(power)
        self.runtime = np.asarray(prep.workload.runtime, dtype=np.float64)
        self.kill = np.asarray(prep.kill_limit, dtype=np.float64)
        self.run_eff = np.minimum(self.runtime, self.kill)
        if self.preset == "rlscheduler":
            self._static = rls_static_from_table(jobs, total)

    def _slice(self, js) -> tuple[int, int]:
        n, L = self.n_jobs, self.length
        try:
            lo, hi = (0, n) if js is None else ((0, int(js)) if isinstance(js, (int, np.integer)) else map(int, js))
        except (TypeError, ValueError):
            raise EnvConfigError(f"job_slice = {js!r}: an integer hi or a pair (lo, hi) of job indices") from None
        if not 0 <= lo < hi <= n:
            raise EnvConfigError(f"job_slice = {js!r}: needs 0 <= lo < hi <= {n} (jobs in the workload)")
        if (hi - lo) - L - 1 <= L:
            raise EnvConfigError(f"job_slice ({lo}, {hi}) holds {hi - lo} jobs: too few for windows of {L} jobs "
                                 f"(starts are drawn in [lo + {L}, hi - {L} - 1), as RLScheduler does); "
                                 "lower length or widen the slice")
        return lo, hi

    def _check_start(self, s, what: str) -> int:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not 0 <= s <= self.n_jobs - self.length:
            raise EnvConfigError(f"{what}: window start {s!r} must be an integer in [0, {self.n_jobs - self.length}] "
                                 f"({self.n_jobs} jobs, windows of {self.length})")
        return int(s)

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = set(options) - {"start"}
        if unknown:
            raise EnvConfigError(f"reset options {sorted(unknown)}: known: start")
        if seed is not None:
            self._rng = gym_np_random(int(seed))
            self._start_ptr = 0
        elif self._rng is None:
            self._rng = gym_np_random(self.seed0)
        if "start" in options:
            start = self._check_start(options["start"], "options['start']")
        elif self.starts is not None:
            start = self.starts[self._start_ptr % len(self.starts)]
            self._start_ptr += 1
        else:
            start = self.lo + int(self._rng.randint(self.length, (self.hi - self.lo) - self.length - 1))
        self.start = start
        self._steps = 0
        if self.rules == "harness":
            obs = self._reset_harness(start)
        else:
            obs = self._reset_engine(start)
        return obs, self._info()

    def step(self, action):
        if self._ep is None or self._done:
            raise RuntimeError("step() before reset() or after the episode ended; call reset()")
        a = int(action)
        invalid = not 0 <= a < len(self._visible)
        if invalid:
            if self.invalid_action == "raise":
                raise ValueError(f"action {a}: slot {a} is empty ({len(self._visible)} jobs in the window, valid "
                                 f"actions 0..{len(self._visible) - 1}); see info['action_mask']")
            a = 0
        job = self._visible[a]
        self._steps += 1
        if self.rules == "harness":
            obs, now = self._step_harness(job)
        else:
            obs, now = self._step_engine(job)
        reward = self._tracker.reward(now, self._done)
        info = self._info()
        if invalid:
            info["invalid_action"] = True
        if self._done:
            info["metrics"] = self.episode_metrics()
        return obs, reward, self._done, False, info

    def action_masks(self) -> np.ndarray:
        """True for the filled slots (sb3-contrib's MaskablePPO convention)."""
        m = np.zeros(self.window, dtype=bool)
        m[: len(self._visible)] = True
        return m

    def _info(self) -> dict:
        mask = np.zeros(self.window, dtype=np.int8)
        mask[: len(self._visible)] = 1
        return {"action_mask": mask, "time_s": float(self._now), "window_start": self.start}

    # ------------------------------------------------------------------ harness rules
    def _reset_harness(self, start: int) -> np.ndarray:
        self._ep = HarnessEpisode(self.data, start, self.length, self.base == "easy", self.window, self.hkeys)
        if self.queue_sort is not None:
            self._ep.queue_key = self.heuristic_keys(self.queue_sort)
        self._done = False
        tr = self.data.trace
        self._tracker = RewardTracker(self.reward_kind, self.reward_per, self.length, tr.max_procs,
                                      self.t_submit[start])
        return self._observe_harness()

    def _observe_harness(self) -> np.ndarray:
        ep = self._ep
        vis = self._visible = ep.visible()
        self._now = ep.now
        return rls_observation_fast(self._template32, self._static32, self._rows6, vis, ep.now, self.t_submit,
                                    self.t_nodes, ep.free, self.data.trace.submit, self.data.trace.nodes)

    def _step_harness(self, job: int):
        ep = self._ep
        started, done = ep.pick(job)
        sub, run, procs, tr = self.t_submit, self.t_run, self.t_procs, self._tracker
        for j in started:
            tr.started(ep.started[j], sub[j], run[j], procs[j])
        self._done = done
        if done:
            self._visible = []
            return self._template32.reshape(-1).copy(), ep.now
        return self._observe_harness(), ep.now

    # ------------------------------------------------------------------ engine rules
    def _reset_engine(self, start: int) -> np.ndarray:
        from hpctwin.twin.model_api import ModelContext  # noqa: PLC0415
        from hpctwin.twin.run import _build_models  # noqa: PLC0415
        lo, hi = start, start + self.length
        jobs = _take(self.jobs, lo, hi)
        self._wjobs = jobs
        policy = AgentPolicy(self.base)
        models = []
        if self.has_power:
            import dataclasses  # noqa: PLC0415
            models = _build_models(dataclasses.replace(self.cfg, power=True), self.system_spec)
        ctx = ModelContext(n_nodes=self.total, jobs=jobs, runtime=self.runtime[lo:hi], system=self.system_spec,
                           seed=0, options={})
        sim = _EnvSimulation(jobs, self.runtime[lo:hi], self.kill[lo:hi], policy, self.total, models=models,
                             context=ctx)
        if models:
            sim.power = next(m for m in models if m.name == "power")
            sim.cap_w = self.power_cap_w or 0.0
        self._sim, self._policy, self._ep = sim, policy, sim.steps()
        self._w_submit = np.asarray(jobs.submit, dtype=np.float64)
        self._w_run = self.run_eff[lo:hi]
        self._w_procs = np.asarray(jobs.procs, dtype=np.int64)
        self._logged, self._done, self.result = 0, False, None
        self._tracker = RewardTracker(self.reward_kind, self.reward_per, self.length, self.total,
                                      float(self._w_submit[0]))
        self._e_seen = self._x_seen = 0.0
        self._now = next(self._ep)                # the engine is bound now (the power model too)
        static = self._static[lo:hi] if self.preset == "rlscheduler" else None
        self._observer = EngineObserver(self.preset, self.window, jobs, self.total, static, sim.power,
                                        self.power_cap_w)
        return self._observe_engine()

    def _observe_engine(self) -> np.ndarray:
        obs, vis = self._observer.observe(self._policy, self._sim.cluster, self._now)
        self._visible = vis.tolist()
        return obs

    def _step_engine(self, job: int):
        try:
            self._now = self._ep.send(job)
        except StopIteration as stop:
            self.result, self._done = stop.value, True
            self._visible = []
        self._account()
        if self._done:
            return np.zeros(self.observation_space.shape, dtype=np.float32), self._now
        return self._observe_engine(), self._now

    def _account(self) -> None:
        """Starts and energy since the previous step, into the reward tracker."""
        log, tr = self._policy.started_log, self._tracker
        for t, j in log[self._logged:]:
            tr.started(t, float(self._w_submit[j]), float(self._w_run[j]), int(self._w_procs[j]))
        self._logged = len(log)
        sim = self._sim
        tr.interval(sim.energy_j - self._e_seen, sim.excess_j - self._x_seen)
        self._e_seen, self._x_seen = sim.energy_j, sim.excess_j

    # ------------------------------------------------------------------ agents' helpers
    def window_jobs(self) -> list[int]:
        """The job of each filled slot: trace indices (harness rules) or window indices (engine rules)."""
        return list(self._visible)

    def job_fields(self) -> tuple[list, list, list]:
        """(submit s, requested time s, size) per job, indexed like `window_jobs`."""
        if self.rules == "harness":
            tr = self.data.trace
            return self.t_submit, tr.request.tolist(), self.t_procs
        j = self._wjobs
        return (np.asarray(j.submit).tolist(), np.asarray(j.estimate).tolist(),
                np.asarray(j.procs).tolist())

    def heuristic_keys(self, name: str) -> list:
        """RLScheduler's score of every job (lower first) under heuristic ``name`` (`SCORES`)."""
        if name not in SCORES:
            raise ValueError(f"unknown heuristic {name!r}; known: {', '.join(SCORES)}")
        key = (name, self.start if self.rules == "engine" else -1)
        if key not in self._keys:
            fn = SCORES[name]
            s, r, p = self.job_fields()
            self._keys[key] = [_score(fn, a, b, c) for a, b, c in zip(s, r, p)]
            if self.rules == "engine":
                self._keys = {key: self._keys[key]}
        return self._keys[key]

    def episode_metrics(self) -> dict[str, Any]:
        """The episode's figures: mean bounded slowdown (tau 10 s; the harness's start-order sum),
        mean wait (s), utilisation (the `rewards` definition), jobs, window start; energy (kWh) under
        engine rules with the power model."""
        if self.rules == "harness":
            ep = self._ep
            items = [(ep.started[j], self.t_submit[j], self.t_run[j], self.t_procs[j]) for j in ep.order]
            size = self.data.trace.max_procs
        else:
            items = [(t, float(self._w_submit[j]), float(self._w_run[j]), int(self._w_procs[j]))
                     for t, j in self._policy.started_log]
            size = self.total
        bsld = wait = work = 0.0
        last = t0 = float(self._tracker.t0)
        for start, sub, run, p in items:
            bsld += max(1.0, float(start - sub + run) / max(run, TAU_S)) / self.length
            wait += float(start - sub) / self.length
            work += run * p
            last = max(last, start)
        out = {"mean_bsld": bsld, "mean_wait_s": wait,
               "utilisation": work / ((last - t0) * size) if last > t0 else 0.0,
               "jobs": len(items), "window_start": self.start, "decisions": self._steps}
        if self.rules == "engine" and self._sim.power is not None:
            out["energy_kwh"] = self._sim.energy_j / 3.6e6
        return out


__all__ = ["EnvConfigError", "RLS_FEATURES", "RULES", "SchedulingEnv"]
