"""Train PPO (stable-baselines3) on Lublin-256 windows and compare it with FCFS, SJF and F1 on held-out windows.

What it does (``docs/rl.md``):

1. trains `hpctwin.twin.rl.sb3.KernelPolicy` (RLScheduler's kernel network) with PPO on
   ``Scheduling-v0`` (``obs="rlscheduler"``, harness rules, ``base`` none, 256-job windows drawn in
   jobs ``[0, --train-jobs)``; per-step bounded-slowdown reward, whose episode sum is minus the
   window's mean bsld) until ``--cpu-minutes`` of CPU time (this process) or ``--steps``;
2. writes the actor as a numpy policy file (``policy.npz``, `hpctwin.twin.rl.kernel.export_sb3`) and
   the SB3 model (``model.zip``);
3. evaluates the deterministic policy and the FCFS, SJF and F1 agents on held-out windows (jobs
   ``[--train-jobs, end)``, ``--eval-windows`` windows of ``--eval-length`` jobs, RLScheduler's sampling
   with ``--eval-seed``) with the harness's metric (a window's mean bounded slowdown, tau 10 s; the
   mean over windows);
4. plots the learning curve (mean bsld of the training episodes) to ``learning_curve.png``;
5. replays the whole log with the policy as an ordinary scheduler (``--scheduler rl:PATH``, engine
   rules) and runs the conformance suite on it;
6. writes everything to ``results.json``.

    python examples/rl/train_ppo.py --out results/rl_ppo --cpu-minutes 12
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


#: jobs of Lublin-256 (lublin_256.swf) the harness keeps
N_JOBS = 10000


def make_env(kind: str, **kw):
    import gymnasium as gym  # noqa: PLC0415

    import hpctwin.rl  # noqa: F401,PLC0415 - registers Scheduling-v0
    return gym.make("hpctwin.rl:Scheduling-v0", obs="rlscheduler", **kw)


def evaluate(agent, n_windows: int, length: int, lo: int, base: str, seed: int) -> list[float]:
    """Mean bsld of each held-out window under ``agent(env, obs) -> action``."""
    env = make_env("eval", workload="Lublin-256", length=length, job_slice=(lo, N_JOBS), base=base)
    out = []
    obs, info = env.reset(seed=seed)
    for k in range(n_windows):
        if k:
            obs, info = env.reset()
        done = False
        while not done:
            obs, r, done, _, info = env.step(agent(env, obs))
        out.append(info["metrics"]["mean_bsld"])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="results/rl_ppo")
    p.add_argument("--cpu-minutes", type=float, default=12.0, help="CPU-time budget of the training (min)")
    p.add_argument("--steps", type=int, default=5_000_000, help="environment steps at most")
    p.add_argument("--train-jobs", type=int, default=7000, help="windows are drawn in jobs [0, N) for training")
    p.add_argument("--length", type=int, default=256, help="jobs per training window")
    p.add_argument("--base", default="none", choices=["none", "easy"])
    p.add_argument("--n-envs", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-windows", type=int, default=10)
    p.add_argument("--eval-length", type=int, default=1024)
    p.add_argument("--eval-seed", type=int, default=1)
    p.add_argument("--evaluate-only", action="store_true",
                   help="no training: evaluate OUT/policy.npz again "
                        "(steps 3, 5, 6; train figures from OUT/results.json)")
    a = p.parse_args(argv)
    try:
        import torch  # noqa: PLC0415
        from stable_baselines3 import PPO  # noqa: PLC0415
        from stable_baselines3.common.callbacks import BaseCallback  # noqa: PLC0415
        from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize  # noqa: PLC0415
    except ImportError:
        print("train_ppo.py needs the [rl] extra: pip install 'hpctwin[rl]'", file=sys.stderr)
        return 2
    from hpctwin.twin.rl.kernel import export_sb3  # noqa: PLC0415
    from hpctwin.twin.rl.sb3 import KernelPolicy  # noqa: PLC0415

    torch.set_num_threads(1)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.evaluate_only:
        train_info = json.loads((out / "results.json").read_text())["train"]
        return report(a, out, out / "policy.npz", train_info)
    t0 = time.process_time()
    window = 128

    def env_fn(i: int):
        return lambda: make_env("train", workload="Lublin-256", length=a.length, job_slice=(0, a.train_jobs),
                                base=a.base, reward="bsld", reward_per="step", seed=a.seed * 1000 + i)

    venv = VecNormalize(DummyVecEnv([env_fn(i) for i in range(a.n_envs)]), norm_obs=False, norm_reward=True,
                        gamma=1.0)
    curve: list[tuple[int, float, float]] = []      # (env steps, CPU s, episode mean bsld)

    class Budget(BaseCallback):
        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "metrics" in info:
                    curve.append((self.num_timesteps, time.process_time() - t0, info["metrics"]["mean_bsld"]))
            return time.process_time() - t0 < a.cpu_minutes * 60

    model = PPO(KernelPolicy, venv, policy_kwargs={"preset": "rlscheduler", "window": window}, n_steps=256,
                batch_size=512, n_epochs=4, gamma=1.0, gae_lambda=0.97, learning_rate=1e-3, ent_coef=0.0,
                clip_range=0.2, seed=a.seed, device="cpu", verbose=0)
    model.learn(total_timesteps=a.steps, callback=Budget())
    train_cpu = time.process_time() - t0
    model.save(out / "model.zip")
    policy_path = export_sb3(model, out / "policy.npz", "rlscheduler", window, a.base,
                             {"trace": "Lublin-256", "train_jobs": a.train_jobs, "steps": model.num_timesteps,
                              "cpu_s": round(train_cpu, 1)})
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    fig, ax = plt.subplots(figsize=(7, 4))
    if curve:
        c = np.asarray(curve)
        k = max(1, len(c) // 50)
        smooth = np.convolve(c[:, 2], np.ones(k) / k, mode="valid")
        ax.plot(c[:, 0], c[:, 2], ".", alpha=0.2, label="episode")
        ax.plot(c[k - 1:, 0], smooth, label=f"running mean ({k} episodes)")
    ax.set_yscale("log")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("mean bounded slowdown of a 256-job window")
    ax.set_title(f"PPO on Lublin-256 (base {a.base}), {train_cpu / 60:.1f} CPU min")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "learning_curve.png", dpi=120)
    train_info = {"cpu_s": round(train_cpu, 1), "env_steps": int(model.num_timesteps), "episodes": len(curve),
                  "windows": f"256 jobs in [0, {a.train_jobs})", "base": a.base}
    return report(a, out, policy_path, train_info)


def report(a, out: Path, policy_path: Path, train_info: dict) -> int:
    """Steps 3, 5 and 6 of the module doc: held-out evaluation, whole-log replay, conformance, results.json."""
    from hpctwin.twin.rl.heuristics import heuristic_action  # noqa: PLC0415
    from hpctwin.twin.rl.kernel import KernelNet  # noqa: PLC0415
    net = KernelNet.load(policy_path)

    agents = {"PPO": lambda env, obs: net.act(obs)}
    for h in ("fcfs", "sjf", "f1"):
        agents[h.upper()] = (lambda name: lambda env, obs: heuristic_action(env, name))(h)
    evals = {name: evaluate(fn, a.eval_windows, a.eval_length, a.train_jobs, a.base, a.eval_seed)
             for name, fn in agents.items()}
    table = {name: float(sum(v) / len(v)) for name, v in evals.items()}

    from hpctwin.schedulers import checks  # noqa: PLC0415
    from hpctwin.twin.run import RunConfig, simulate  # noqa: PLC0415
    spec = "hpctwin.twin.rl.policy_scheduler:RLPolicyScheduler"
    whole = simulate(RunConfig(workload="Lublin-256", scheduler=spec,
                               options={"scheduler": {"path": str(policy_path)}}))
    baselines = {name: simulate(RunConfig(workload="Lublin-256", scheduler=name)).summary["mean_bsld"]
                 for name in ("fcfs", "sjf", "easy")}
    conformance = checks.run_checks(checks.Target("rl", spec, options={"path": str(policy_path)}))
    result = {"train": train_info,
              "eval": {"windows": a.eval_windows, "length": a.eval_length, "first_job": a.train_jobs,
                       "seed": a.eval_seed, "mean_bsld": table, "per_window": evals},
              "whole_log": {k: whole.summary[k] for k in ("mean_bsld", "mean_wait_s", "utilisation")
                            if k in whole.summary},
              "whole_log_baselines_mean_bsld": baselines,
              "conformance": conformance}
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"trained {train_info['env_steps']} steps in {train_info['cpu_s'] / 60:.1f} CPU min "
          f"({train_info['episodes']} episodes)")
    print(f"held-out windows ({a.eval_windows} x {a.eval_length} jobs from job {a.train_jobs}, seed {a.eval_seed}), "
          "mean bounded slowdown:")
    for name, v in table.items():
        print(f"  {name:5s} {v:10.2f}   per window: {', '.join(f'{x:.1f}' for x in evals[name])}")
    print(f"PPO beats FCFS: {table['PPO'] < table['FCFS']}")
    print(f"whole log as --scheduler rl:{policy_path}: {result['whole_log']}; hpctwin fcfs, sjf, easy: "
          + ", ".join(f"{k} {v:.1f}" for k, v in baselines.items()))
    print(f"conformance: {sum(v == 'ok' for v in conformance.values())} of {len(conformance)} checks ok")
    print(f"files in {out}: policy.npz, model.zip, learning_curve.png, results.json")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
