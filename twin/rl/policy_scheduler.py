"""``--scheduler rl:PATH``: a trained policy as an ordinary hpctwin scheduler.

`RLPolicyScheduler(path=...)` replays any log (any ``hpctwin run`` option: power, failures, caps...)
with the decisions of the environment's engine rules (`twin.rl.engine.AgentPolicy`: the policy's
pick is the pass's first pick and is committed; the base policy, ``none`` / ``easy`` /
``conservative``, fills the rest of the pass) and the observation preset the policy was trained
with (`twin.rl.observations.EngineObserver`). At each decision the policy's deterministic action is
taken: the filled slot of highest score (ties to the earlier slot), so runs are reproducible.

``path``: a policy file (``.npz``, `twin.rl.kernel`; numpy only), or a stable-baselines3 model
(``.zip``, trained with `twin.rl.sb3.KernelPolicy`; needs the ``[rl]`` extra), whose meta then comes
from ``preset``/``window`` options. ``base`` overrides the base policy the file names.
Normalisers are the replayed log's own (the ``rlscheduler`` preset's largest estimate; machine
units), as RLScheduler does when it tests on another trace.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from hpctwin.twin.contract import BindContext, ClusterView

from .engine import AgentPolicy
from .kernel import KernelNet, PolicyFileError, make_meta
from .observations import EngineObserver


def load_policy(path: str | Path, preset: str | None = None, window: int | None = None) -> KernelNet:
    """A `KernelNet` from a ``.npz`` policy file or a stable-baselines3 ``.zip`` (module doc)."""
    path = Path(path)
    if path.suffix == ".zip":
        if not path.is_file():
            raise PolicyFileError(f"{path}: no such policy file")
        try:
            from stable_baselines3 import PPO  # noqa: PLC0415
        except ImportError:
            raise PolicyFileError(f"{path}: a stable-baselines3 model needs the [rl] extra (pip install "
                                  "'hpctwin[rl]'); or export it to .npz with "
                                  "hpctwin.twin.rl.kernel.export_sb3") from None
        model = PPO.load(str(path), device="cpu")
        kw = getattr(model.policy, "preset", None), getattr(model.policy, "window", None)
        if kw[0] is None:
            raise PolicyFileError(f"{path}: not trained with hpctwin.twin.rl.sb3.KernelPolicy")
        net = model.policy.mlp_extractor.score_net
        lin = [m for m in net if hasattr(m, "weight")]
        weights = [(m.weight.detach().numpy().T, m.bias.detach().numpy()) for m in lin]
        return KernelNet(weights, make_meta(preset or kw[0], window or kw[1], "none"))
    return KernelNet.load(path)


class RLPolicyScheduler(AgentPolicy):
    """A trained kernel policy as a scheduler (module doc). Times s, sizes units."""

    name = "rl"

    def __init__(self, path: str = "", base: str | None = None, name: str | None = None):
        if not path:
            raise PolicyFileError("rl:PATH: no policy file given (e.g. --scheduler rl:runs/ppo/policy.npz)")
        self.path = str(path)
        self.net = load_policy(path)
        super().__init__(base or self.net.meta.get("base", "none"), name=name or f"rl:{Path(path).name}")
        self.preset, self.window = self.net.preset, self.net.window

    def describe(self) -> dict:
        return {"name": self.name, "path": self.path, "preset": self.preset, "window": self.window,
                "base": self.base_policy}

    def bind(self, ctx: BindContext, cluster: ClusterView | None = None) -> None:
        super().bind(ctx, cluster)
        power = (self.ctx.models or {}).get("power")     # the power features, when the run has the model
        self.observer = EngineObserver(self.preset, self.window, self.jobs, self.total, power=power)
        self.decisions = 0

    def schedule(self, now: float, queue: np.ndarray, cluster: ClusterView) -> list[int]:
        self.begin_pass(now, queue, cluster)
        while self.deciding():
            obs, vis = self.observer.observe(self, cluster, now)
            self.commit(int(vis[self.net.act(obs)]))
            self.decisions += 1
        return super().schedule(now, queue, cluster)
