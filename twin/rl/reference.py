"""RLScheduler's original environment, loaded from a local checkout, for side-by-side comparisons.

The comparison test (``tests/test_rl_env.py``) and the speed benchmark (``benchmarks/rl_env_speed.py``)
run ``HPCEnv`` of ``HPCSimPickJobs.py`` (DIR-LAB/deep-batch-scheduler, commit cd433e3) next to
`twin.rl.env.SchedulingEnv`. Nothing of that code is shipped here: the caller names a checkout
(``--original DIR`` or the ``HPCTWIN_RLSCHEDULER_SRC`` environment variable). Its module imports
TensorFlow 1 and gym 0.1x for code the environment never runs; `load_original_env` puts small
stand-ins in their place while it imports (gym's ``Env``, ``spaces`` from Gymnasium, and
``seeding.np_random``, the generator gym had then: `schedulers.rlscheduler_trace.gym_np_random`) and
removes them afterwards.
"""
from __future__ import annotations

import contextlib
import gzip
import importlib.util
import io
import os
import shutil
import sys
import tempfile
import types
from pathlib import Path

ENV_VAR = "HPCTWIN_RLSCHEDULER_SRC"


class ReferenceUnavailable(RuntimeError):
    """No usable checkout of RLScheduler's code was named (the message says what is missing)."""


def reference_dir(path: str | os.PathLike | None = None) -> Path:
    """The checkout: ``path``, else ``$HPCTWIN_RLSCHEDULER_SRC``; it must hold HPCSimPickJobs.py."""
    src = path or os.environ.get(ENV_VAR)
    if not src:
        raise ReferenceUnavailable(f"no RLScheduler checkout: pass --original DIR or set {ENV_VAR} to a "
                                   "checkout of DIR-LAB/deep-batch-scheduler (commit cd433e3)")
    d = Path(src)
    for f in ("HPCSimPickJobs.py", "job.py", "cluster.py"):
        if not (d / f).is_file():
            raise ReferenceUnavailable(f"{d}: no {f}; expected a checkout of DIR-LAB/deep-batch-scheduler")
    return d


def _stubs() -> dict[str, types.ModuleType]:
    from gymnasium import spaces  # noqa: PLC0415

    from hpctwin.schedulers.rlscheduler_trace import gym_np_random  # noqa: PLC0415
    gym = types.ModuleType("gym")
    gym.Env = type("Env", (), {})
    gym.spaces = spaces
    utils = types.ModuleType("gym.utils")
    seeding = types.ModuleType("gym.utils.seeding")
    seeding.np_random = lambda seed=None: (gym_np_random(0 if seed is None else seed), seed)
    utils.seeding = seeding
    gym.utils = utils
    return {"tensorflow": types.ModuleType("tensorflow"), "gym": gym, "gym.spaces": spaces,
            "gym.utils": utils, "gym.utils.seeding": seeding}


def load_original_module(path: str | os.PathLike | None = None) -> types.ModuleType:
    """``HPCSimPickJobs`` of the checkout (`reference_dir`), imported with the stand-ins."""
    d = reference_dir(path)
    stubs = _stubs()
    saved = {k: sys.modules.get(k) for k in list(stubs) + ["job", "cluster"]}
    sys.modules.update(stubs)
    sys.path.insert(0, str(d))
    try:
        spec = importlib.util.spec_from_file_location("rlscheduler_original_env", d / "HPCSimPickJobs.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(d))
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return mod


def plain_copy(swf: str | os.PathLike, tmpdir: str | os.PathLike | None = None) -> Path:
    """The log as a plain file (the original opens it with ``open``): ``.gz`` logs are decompressed."""
    swf = Path(swf)
    if swf.suffix != ".gz":
        return swf
    out = Path(tmpdir or tempfile.mkdtemp(prefix="rls-ref-")) / swf.stem
    if not out.exists():
        with gzip.open(swf, "rb") as fi, open(out, "wb") as fo:
            shutil.copyfileobj(fi, fo)
    return out


def load_original_env(swf: str | os.PathLike, path: str | os.PathLike | None = None, *, backfil: bool = False,
                      seed: int = 0, tmpdir: str | os.PathLike | None = None):
    """An initialised ``HPCEnv(backfil=...)`` on ``swf``, seeded with ``seed`` (its prints silenced)."""
    mod = load_original_module(path)
    with contextlib.redirect_stdout(io.StringIO()):
        env = mod.HPCEnv(backfil=backfil, job_score_type=0, batch_job_slice=0, build_sjf=False)
        env.seed(seed)
        env.my_init(workload_file=str(plain_copy(swf, tmpdir)))
    return env, mod
