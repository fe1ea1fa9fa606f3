"""`KernelPolicy`: RLScheduler's kernel network as a stable-baselines3 actor-critic policy (needs torch).

Actor: one MLP (32, 16, 8 ReLU units, then a score) applied to every slot (its features followed by
the machine-wide features), empty slots masked with ``-1e6`` (read from the observation, as
RLScheduler's agents do), so plain PPO never picks an empty slot and the policy is invariant to
the window size it is deployed with. Critic: an MLP (64, 32 ReLU units) over the whole observation
(RLScheduler's ``critic_mlp``). `twin.rl.kernel.export_sb3` writes the actor as a numpy policy file.

    PPO(KernelPolicy, env, policy_kwargs={"preset": "rlscheduler", "window": 128})
"""
from __future__ import annotations

import torch
from stable_baselines3.common.policies import ActorCriticPolicy
from torch import nn

from .kernel import MASK_PENALTY, layout
from .harness import EMPTY_SLOT


class KernelExtractor(nn.Module):
    """``forward_actor``: masked slot scores (the action logits); ``forward_critic``: value features."""

    def __init__(self, obs_dim: int, preset: str, window: int):
        super().__init__()
        self.preset = preset
        self.w, self.nf, self.ng = layout(preset, window)
        self.latent_dim_pi, self.latent_dim_vf = self.w, 32
        self.score_net = nn.Sequential(nn.Linear(self.nf + self.ng, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU(),
                                       nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 1))
        self.value_net = nn.Sequential(nn.Linear(obs_dim, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
        self.register_buffer("empty", torch.tensor(EMPTY_SLOT, dtype=torch.float32))

    def forward_actor(self, x: torch.Tensor) -> torch.Tensor:
        slots = x[:, : self.w * self.nf].reshape(-1, self.w, self.nf)
        if self.preset == "rlscheduler":
            mask = (~torch.all(slots == self.empty, dim=-1)).float()
            feats = slots
        else:
            mask = (slots[..., 0] > 0.5).float()
            g = x[:, self.w * self.nf:].unsqueeze(1).expand(-1, self.w, self.ng)
            feats = torch.cat((slots, g), dim=-1)
        return self.score_net(feats).squeeze(-1) + (mask - 1.0) * MASK_PENALTY

    def forward_critic(self, x: torch.Tensor) -> torch.Tensor:
        return self.value_net(x)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.forward_actor(x), self.forward_critic(x)


class KernelPolicy(ActorCriticPolicy):
    """stable-baselines3 policy with the kernel actor (module doc); ``preset`` and ``window`` as the env's."""

    def __init__(self, observation_space, action_space, lr_schedule, preset: str = "default", window: int = 128,
                 **kwargs):
        self.preset, self.window = preset, window
        kwargs.setdefault("ortho_init", False)
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = KernelExtractor(int(self.observation_space.shape[0]), self.preset, self.window)

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()            # the extractor's scores are the logits
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)
