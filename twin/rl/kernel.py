"""The policy network of hpctwin's learned schedulers, in numpy: RLScheduler's *kernel* network.

RLScheduler scores every slot of the window with one small MLP shared by all slots (``rl_kernel``
in ``ppo-pick-jobs.py``: 32, 16, 8 ReLU units, then one score) and masks the empty slots
(``logits + (mask - 1) * 1e6``); the policy is the softmax of the scores. The score of a slot here
sees the slot's features followed by the observation's machine-wide features (none for the
``rlscheduler`` preset). The same network trains in stable-baselines3 (`twin.rl.sb3.KernelPolicy`)
and runs here without torch: `export_sb3` writes a trained model's actor as a `.npz` *policy file*
that `KernelNet.load` reads (`twin.rl.policy_scheduler` deploys it as ``--scheduler rl:PATH``).

Policy file (``numpy.savez``): ``w0, b0, w1, b1, ...`` (float64 layer weights, ``w`` of shape
(in, out)) and ``meta``, a JSON text: ``format`` (``hpctwin-rl-kernel``), ``version`` (1),
``preset``, ``window``, ``job_features``, ``global_features``, ``base`` (the base policy trained
with) and free-form ``training`` notes.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .harness import EMPTY_SLOT, RLS_FEATURES
from .observations import GLOBAL_FEATURES, JOB_FEATURES

FORMAT, VERSION = "hpctwin-rl-kernel", 1
MASK_PENALTY = 1e6


class PolicyFileError(ValueError):
    """A policy file that cannot be used (the message names the file and what is wrong)."""


def layout(preset: str, window: int) -> tuple[int, int, int]:
    """(window, features per slot, machine-wide features) of an observation preset."""
    if preset == "rlscheduler":
        return window, RLS_FEATURES, 0
    return window, len(JOB_FEATURES), len(GLOBAL_FEATURES)


def slot_mask(obs: np.ndarray, preset: str, window: int) -> np.ndarray:
    """True for the filled slots of flat observations ``obs`` (..., size), read from the vector as
    RLScheduler's agents do (``rlscheduler``: a slot equal to the empty-slot features is empty;
    ``default``: the ``valid`` feature)."""
    w, nf, _ = layout(preset, window)
    slots = obs[..., : w * nf].reshape(obs.shape[:-1] + (w, nf))
    if preset == "rlscheduler":
        return ~np.all(slots == np.asarray(EMPTY_SLOT, dtype=obs.dtype), axis=-1)
    return slots[..., 0] > 0.5


class KernelNet:
    """Numpy forward pass of the kernel network (module doc)."""

    def __init__(self, weights: list[tuple[np.ndarray, np.ndarray]], meta: dict):
        self.layers = [(np.asarray(w, dtype=np.float64), np.asarray(b, dtype=np.float64)) for w, b in weights]
        self.meta = meta
        self.preset, self.window = meta["preset"], int(meta["window"])
        self.w, self.nf, self.ng = layout(self.preset, self.window)

    def scores(self, obs: np.ndarray) -> np.ndarray:
        """Masked slot scores (logits) of one flat observation (empty slots get -1e6)."""
        obs = np.asarray(obs, dtype=np.float64)
        x = obs[: self.w * self.nf].reshape(self.w, self.nf)
        if self.ng:
            x = np.concatenate((x, np.broadcast_to(obs[self.w * self.nf:], (self.w, self.ng))), axis=1)
        for k, (w, b) in enumerate(self.layers):
            x = x @ w + b
            if k < len(self.layers) - 1:
                x = np.maximum(x, 0.0)
        mask = slot_mask(obs, self.preset, self.window)
        return x[:, 0] + (mask - 1.0) * MASK_PENALTY

    def act(self, obs: np.ndarray) -> int:
        """The deterministic action: the first slot of highest score."""
        return int(np.argmax(self.scores(obs)))

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        arrays = {}
        for k, (w, b) in enumerate(self.layers):
            arrays[f"w{k}"], arrays[f"b{k}"] = w, b
        with open(path, "wb") as fp:
            np.savez(fp, meta=np.array(json.dumps(self.meta)), **arrays)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "KernelNet":
        path = Path(path)
        if not path.is_file():
            raise PolicyFileError(f"{path}: no such policy file")
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(str(z["meta"]))
                n = sum(1 for k in z.files if k.startswith("w"))
                weights = [(z[f"w{k}"], z[f"b{k}"]) for k in range(n)]
        except (OSError, ValueError, KeyError) as e:
            raise PolicyFileError(f"{path}: not an hpctwin policy file (.npz written by export_sb3 or "
                                  f"KernelNet.save): {type(e).__name__}: {e}") from None
        if meta.get("format") != FORMAT or meta.get("version") != VERSION:
            raise PolicyFileError(f"{path}: format {meta.get('format')!r} version {meta.get('version')!r}; "
                                  f"expected {FORMAT!r} version {VERSION}")
        for key in ("preset", "window"):
            if key not in meta:
                raise PolicyFileError(f"{path}: meta has no {key!r}")
        if meta["preset"] not in ("default", "rlscheduler"):
            raise PolicyFileError(f"{path}: meta preset {meta['preset']!r} is not an observation preset")
        w, nf, ng = layout(meta["preset"], int(meta["window"]))
        dims = nf + ng
        for k, (wk, bk) in enumerate(weights):
            if wk.ndim != 2 or wk.shape[0] != dims or bk.shape != (wk.shape[1],):
                raise PolicyFileError(f"{path}: layer {k} has weights {wk.shape} and bias {bk.shape}; expected "
                                      f"({dims}, m) and (m,)")
            dims = wk.shape[1]
        if not weights or dims != 1:
            raise PolicyFileError(f"{path}: the last layer must give one score per slot (got {dims})")
        return cls(weights, meta)


def make_meta(preset: str, window: int, base: str, training: dict | None = None) -> dict:
    """The ``meta`` of a policy file."""
    w, nf, ng = layout(preset, window)
    return {"format": FORMAT, "version": VERSION, "preset": preset, "window": w, "job_features": nf,
            "global_features": ng, "base": base, "training": training or {}}


def export_sb3(model, path: str | Path, preset: str, window: int, base: str, training: dict | None = None) -> Path:
    """Write the actor of a stable-baselines3 model trained with `twin.rl.sb3.KernelPolicy` as a policy file."""
    net = model.policy.mlp_extractor.score_net
    linears = [m for m in net if hasattr(m, "weight")]
    weights = [(m.weight.detach().cpu().numpy().T.astype(np.float64), m.bias.detach().cpu().numpy().astype(np.float64))
               for m in linears]
    return KernelNet(weights, make_meta(preset, window, base, training)).save(path)
