"""Speed of the scheduling environment (``hpctwin.rl:Scheduling-v0``): environment steps per CPU second,
next to RLScheduler's original environment on the same windows.

Both environments run in this process, one after the other, on the same Lublin-256 windows
(RLScheduler's sampling: ``env.seed(s)`` / ``reset(seed=s)``, one window start drawn per reset) with
the same agent (always slot 0, the first waiting job in submit order); the episodes' rewards are
checked equal. The original is ``HPCEnv`` of a checkout of DIR-LAB/deep-batch-scheduler (commit
cd433e3) named by ``--original DIR`` or ``$HPCTWIN_RLSCHEDULER_SRC`` (`hpctwin.twin.rl.reference`);
without one only hpctwin's figures are printed. Two figures for the original: its ``reset()`` as
training uses it (which also schedules the window with SJF and F1 for its baselines) and
``reset_for_test()`` with ``step_for_test()`` (no baselines, as its evaluation script). The goal of issue 29 is a ratio >= 10
for the ``rlscheduler`` preset.

    python benchmarks/rl_env_speed.py --original /path/to/deep-batch-scheduler [--episodes 40]
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def ours(episodes: int, seed: int, **kw) -> tuple[float, int, list[float], list[int]]:
    """(CPU s, steps, episode rewards, window starts) of hpctwin's environment."""
    import gymnasium as gym

    import hpctwin.rl  # noqa: F401
    env = gym.make("hpctwin.rl:Scheduling-v0", workload="Lublin-256", **kw)
    env.reset(seed=seed)                     # load and warm up outside the timing
    steps, rewards, starts = 0, [], []
    t0 = time.process_time()
    for k in range(episodes):
        env.reset(seed=seed) if k == 0 else env.reset()
        starts.append(env.unwrapped.start)
        done, total = False, 0.0
        while not done:
            _, r, done, _, _ = env.step(0)
            total += r
            steps += 1
        rewards.append(total)
    return time.process_time() - t0, steps, rewards, starts


def original(src: str, episodes: int, seed: int, test_reset: bool) -> tuple[float, int, list[float], list[int]]:
    """The same for RLScheduler's ``HPCEnv`` (``reset()`` or ``reset_for_test()``)."""
    from hpctwin.schedulers.rlscheduler_run import resolve_trace_path
    from hpctwin.twin.rl.reference import load_original_env
    env, _ = load_original_env(resolve_trace_path("Lublin-256"), src, seed=seed)
    steps, rewards, starts = 0, [], []
    t0 = time.process_time()
    for _ in range(episodes):
        if test_reset:
            env.reset_for_test(256, 0)
            env.build_observation()
        else:
            env.reset()
        starts.append(env.start)
        step = env.step_for_test if test_reset else env.step
        while True:
            out = step(0)
            steps += 1
            if out[2]:
                rewards.append(out[1])
                break
    return time.process_time() - t0, steps, rewards, starts


def best_of(fn, repeats: int):
    """The run of ``fn()`` with the highest steps per CPU second among ``repeats`` (noise on a shared
    machine only slows a run down), and its (CPU s, steps, rewards, starts)."""
    runs = [fn() for _ in range(repeats)]
    return max(runs, key=lambda r: r[1] / r[0])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--original", default=None, help="checkout of DIR-LAB/deep-batch-scheduler")
    p.add_argument("--episodes", type=int, default=40)
    p.add_argument("--repeats", type=int, default=3, help="runs of each case; the fastest counts")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    cpu, steps, rew, starts = best_of(lambda: ours(a.episodes, a.seed, obs="rlscheduler"), a.repeats)
    label = "hpctwin rlscheduler preset (harness rules)"
    print(f"{label:55s} {steps / cpu:10.0f} steps/CPU s ({steps} steps, {cpu:.2f} s)")
    for label, kw in (("hpctwin default preset (engine rules)", {"obs": "default"}),
                      ("hpctwin default preset, EASY base", {"obs": "default", "base": "easy"})):
        c, s, _, _ = best_of(lambda: ours(max(4, a.episodes // 4), a.seed, **kw), a.repeats)
        print(f"{label:55s} {s / c:10.0f} steps/CPU s ({s} steps, {c:.2f} s)")
    from hpctwin.twin.rl.reference import ReferenceUnavailable, reference_dir
    try:
        src = str(reference_dir(a.original))
    except ReferenceUnavailable as e:
        print(f"original: not run ({e})")
        return 0
    for test_reset, label in ((False, "RLScheduler HPCEnv, reset() (with its SJF/F1 baselines)"),
                              (True, "RLScheduler HPCEnv, reset_for_test() (no baselines)")):
        # step_for_test's final reward is the value (+mean bsld); step's is its negative
        c, s, r, st = best_of(lambda: original(src, a.episodes, a.seed, test_reset), a.repeats)
        same = st == starts and np.array_equal(np.abs(r), np.abs(rew))
        print(f"{label:55s} {s / c:10.0f} steps/CPU s ({s} steps, {c:.2f} s); same windows and rewards: {same}")
        print(f"  ratio hpctwin / original: {steps / cpu / (s / c):.1f}x")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
