"""``hpctwin doctor``: what this installation has, in one screen, and the one-time kernel builds.

    hpctwin doctor                   # versions, kernel cache, data directory, MPI, optional extras
    hpctwin doctor --build-kernels   # build the compiled kernels now instead of during a first run

Each line is ``name: value`` with a hint where something is missing. Nothing here changes the
installation except ``--build-kernels`` (which writes the kernel cache, as a first whole-log run would).
Exit code 0, or 1 when something a default run needs is broken (numpy/pandas/numba missing).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
from importlib import metadata

#: optional extras: import name -> (pip extra or package, what it enables)
OPTIONAL = {
    "sklearn": ("hpctwin[ml]", "gradient-boosted runtime predictor (easy-pred-gbm)"),
    "fmpy": ("hpctwin[fmu]", "FMU cooling models"),
    "gymnasium": ("hpctwin[rl]", "the reinforcement-learning environment (hpctwin.rl)"),
    "stable_baselines3": ("hpctwin[rl]", "the PPO training example"),
    "hypothesis": ("hpctwin[test]", "the property-based tests"),
}
REQUIRED = ("numpy", "scipy", "pandas", "networkx", "h5py", "numba", "pyarrow", "matplotlib", "tqdm")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _kernel_sets() -> list:
    """The ahead-of-time kernel sets of the declared compiled backends (`twin.backends`; importing
    their modules imports no numba)."""
    from hpctwin.twin.backends import kernel_sets  # noqa: PLC0415
    return kernel_sets()


def report() -> tuple[list[tuple[str, str]], bool]:
    """``([(name, value)], ok)``: the facts printed by ``hpctwin doctor``."""
    from hpctwin import __version__  # noqa: PLC0415
    from hpctwin.twin import aot  # noqa: PLC0415
    rows: list[tuple[str, str]] = [("hpctwin", f"{__version__} ({os.path.dirname(os.path.dirname(__file__))})"),
                                   ("python", sys.version.split()[0] + f" ({sys.executable})")]
    ok = True
    for dist in REQUIRED:
        v = _version(dist)
        ok &= v is not None
        rows.append((dist, v or "MISSING: pip install -e . installs it"))
    aot_on = aot._enabled()  # noqa: SLF001 - the switch's one reader
    for ks in _kernel_sets():
        state = ("built" if ks.built() else "not built yet (the first whole-log run builds it, "
                 "or run hpctwin doctor --build-kernels)") if aot_on else "off (HPCTWIN_AOT=0: numba's JIT)"
        rows.append((f"kernels {ks.name}", f"{state}; cache {ks.cache_dir()}"))
    try:
        from hpctwin.datasets.registry import default_data_dir, status  # noqa: PLC0415
        ddir = default_data_dir(None)
        present = [r["name"] for r in status(None) if r["present"]]
        where = ("HPCTWIN_DATA" if os.environ.get("HPCTWIN_DATA")
                 else "../shared/datasets beside the checkout or the working directory"
                 if ddir.name == "datasets" and ddir.parent.name == "shared" else "the user cache folder")
        rows.append(("data directory", f"{ddir} (from {where}; {len(present)} known logs present"
                     + ("" if present else ": hpctwin datasets fetch NAME downloads one") + ")"))
    except Exception as e:  # noqa: BLE001 - a broken data directory is a finding, not a crash
        rows.append(("data directory", f"unusable: {e}"))
    mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    rows.append(("mpi4py", _version("mpi4py") or "missing"))
    rows.append(("mpiexec", mpiexec or "not found (hpctwin collectives validate needs it: pip install mpich)"))
    for mod, (extra, what) in OPTIONAL.items():
        have = importlib.util.find_spec(mod) is not None
        rows.append((f"optional {mod}", ("yes" if have else f"no (pip install '{extra}')") + f": {what}"))
    for var in ("HPCTWIN_DATA", "HPCTWIN_CACHE_DIR", "HPCTWIN_AOT", "NUMBA_CACHE_DIR"):
        if os.environ.get(var):
            rows.append((var, os.environ[var]))
    return rows, ok


def build_kernels() -> None:
    """Build every kernel set that is missing (each announces itself and its duration on stderr)."""
    from hpctwin.twin import aot  # noqa: PLC0415
    for ks in _kernel_sets():
        if not aot._enabled():  # noqa: SLF001 - the switch's one reader
            print(f"{ks.name}: not built (HPCTWIN_AOT=0); runs use numba's JIT kernels", file=sys.stderr)
            continue
        if ks.built():
            print(f"{ks.name}: already built ({ks.path()})")
            continue
        if ks.load() is None:
            print(f"{ks.name}: not built ({ks.unavailable}); runs use numba's JIT kernels", file=sys.stderr)
        else:
            print(f"{ks.name}: built ({ks.path()})")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="hpctwin doctor", description=__doc__.split("\n\n")[0])
    p.add_argument("--build-kernels", action="store_true",
                   help="build the compiled kernels now (one-time, 1-3 minutes) instead of during a first run")
    a = p.parse_args(argv)
    if a.build_kernels:
        build_kernels()
    rows, ok = report()
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    return 0 if ok else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
