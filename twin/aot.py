"""Ahead-of-time builds of the compiled kernels: a whole-run replay without importing numba.

Why: the compiled backends (`twin.backends`: the EASY/conservative replay `schedulers.backfill_replay`,
the Slurm-like policy's `schedulers.slurm_replay`) take 0.1-0.2 CPU s on a log like CTC-SP2
(77,205 jobs), but loading them through numba's JIT cache costs about 0.8-1.1 CPU s per fresh
process before the first call (measured 2026-12-03, see benchmarks/README.md "AOT decision"):
importing numba imports ``scipy.linalg`` (its BLAS check) and the first cached load initialises
numba's typing and lowering registries. numba's ahead-of-time compiler (``numba.pycc``) compiles
the **same Python kernel functions** with the same LLVM into a CPython extension module; that
module imports in under a millisecond and needs neither numba nor llvmlite when it runs (the same
first call: 0.0-0.07 CPU s). The replay's results are the JIT's, bit for bit (``tests/test_aot.py``
compares both on every order x backfill code and on Slurm runs).

Decision (issue 24 item 5): ``numba.pycc`` is pending deprecation (numba 0.57) and still ships in
0.68; its replacement is not released. We keep this build while numba ships pycc, with the JIT
cache (and its guard, `twin.jit_cache`) as the tested fallback, because nothing else removes the
per-process cost: building numba's JIT cache at install time only saves the one-time compile, not
the ~0.9 CPU s of importing numba and loading the cache in every run. On a numba without pycc,
`load` sees it on disk (`_pycc_missing`, no numba import, no doomed child build) and the runs use
the JIT kernels after one warning; ``hpctwin doctor --build-kernels`` then compiles nothing ahead,
the first run fills numba's cache.

How (`KernelSet.load`):

* the module is built once per machine and kernel source: its file name carries a key, the SHA-256
  of the kernel source files, the export signatures, numba's and Python's versions and the
  platform tag, so an edited kernel, a new numba or another interpreter never loads a stale build;
* it is built for the host CPU (as numba's JIT does; the generic target ran the conservative replay
  ~20 % slower), and the key includes the CPU's model and instruction-set flags, so nodes of a
  cluster that share a cache folder but differ in CPU each build and load their own module;
* the build (30-100 s per set, a one-time cost like numba's own first compile) runs in a
  child process whose numba JIT cache is an empty temporary folder: numba keys its own cache on a
  function's file only, so a cached caller could otherwise carry an edited callee's old code into
  the build. It runs under a file lock (concurrent sweep processes build it once), in a temporary
  folder renamed into place;
* the cache folder is ``HPCTWIN_CACHE_DIR`` if set, else the kernel package's ``__pycache__`` when
  writable (as numba's cache), else the user cache folder (``platformdirs``);
* ``HPCTWIN_AOT=0`` turns it off. When the build is off or fails (no C compiler, a numba without
  ``pycc``), `load` returns None with the reason in `KernelSet.unavailable`, and the caller uses
  the numba JIT kernels (same results, the fixed cost above) after one `RuntimeWarning`. Before
  it imports them it calls `KernelSet.guard_jit_cache` (`twin.jit_cache`): numba's own cache is
  keyed on a function's file only, so the set's cached code is deleted when any of its `sources`
  changed since it was cached (the "cached caller, edited callee" hazard above).
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import sys
import sysconfig
import tempfile
import warnings
from pathlib import Path
from types import ModuleType

#: bump to invalidate every build (a change of this module's build procedure; 2: built in a child
#: process with an empty numba cache; 3: host CPU target)
BUILD_VERSION = 3
#: bump to invalidate every JIT cache of the kernel sets (`KernelSet.guard_jit_cache`)
JIT_STAMP_VERSION = 1
#: typical one-time build time of a kernel set on one core of a 2020s x86 server (s), for the notice
#: printed before a build (measured: fast path 40-60 s, Slurm replay 60-100 s on a loaded 2-core VM)
TYPICAL_BUILD_S = {"hpctwin_fastpath": "40-100", "hpctwin_slurm_replay": "60-110"}
_build_seconds = 0.0


def build_seconds() -> float:
    """Seconds this process has spent building kernel sets (runs subtract it from their own timing)."""
    return _build_seconds


class KernelSet:
    """A set of njit kernels exported as one extension module.

    Parameters
    ----------
    name: the module's base name (a valid identifier), e.g. ``"hpctwin_fastpath"``.
    kernel_module: dotted name of the module holding the njit functions (imported only to build).
    exports: ``{exported name: (function, numba signature string)}``; the function is a name in
        ``kernel_module`` or ``"other.module:name"``.
    sources: every source file whose code is compiled into the exports (the kernel module and the
        modules it imports njit functions or constants from); they key the build and the JIT
        cache's stamp. ``tests/test_aot.py`` checks that no njit function from another file is
        reachable from the exports and that every project module they import is listed.
    """

    def __init__(self, name: str, kernel_module: str, exports: dict[str, tuple[str, str]],
                 sources: list[Path]):
        self.name = name
        self.kernel_module = kernel_module
        self.exports = dict(exports)
        self.sources = [Path(s) for s in sources]
        self.unavailable: str | None = None
        self._failed = False
        self._module: ModuleType | None = None
        self._warned = False
        self._jit_guarded = False

    # -- where the build lives -------------------------------------------------------------------
    def key(self) -> str:
        """Hex key of the build: sources, signatures, numba and Python versions, platform."""
        h = hashlib.sha256()
        h.update(f"{BUILD_VERSION}|{_numba_version()}|{sys.version}|{sysconfig.get_platform()}|{_cpu_id()}".encode())
        for name in sorted(self.exports):
            h.update(f"|{name}={self.exports[name][0]}:{self.exports[name][1]}".encode())
        self._hash_sources(h)
        return h.hexdigest()[:20]

    def jit_key(self) -> str:
        """Hex key of the sources alone (no CPU, versions or signatures: numba's own index keys
        those), the stamp `guard_jit_cache` compares with numba's JIT cache of the set."""
        h = hashlib.sha256(f"jit-cache-{JIT_STAMP_VERSION}".encode())
        self._hash_sources(h)
        return h.hexdigest()[:20]

    def _hash_sources(self, h) -> None:
        for src in self.sources:
            h.update(b"|" + src.read_bytes())

    def guard_jit_cache(self) -> None:
        """Before the JIT fallback imports the set's kernels (once per process): delete numba's
        cached code of the set's modules if any of `sources` changed since it was cached
        (`twin.jit_cache`: numba keys a cache on the function's own file only, so a caller
        compiled with an edited callee's old code would load). Imports numba."""
        if self._jit_guarded:
            return
        from .jit_cache import guard  # noqa: PLC0415
        guard(self.name, self.sources, self.jit_key())
        self._jit_guarded = True

    def module_name(self) -> str:
        return f"{self.name}_{self.key()}"

    def cache_dir(self) -> Path:
        env = os.environ.get("HPCTWIN_CACHE_DIR")
        if env:
            return Path(env) / "aot"
        local = self.sources[0].parent / "__pycache__"
        try:
            local.mkdir(exist_ok=True)
            if os.access(local, os.W_OK):
                return local
        except OSError:
            pass
        from platformdirs import user_cache_dir  # noqa: PLC0415
        return Path(user_cache_dir("hpctwin")) / "aot"

    def path(self) -> Path:
        suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
        return self.cache_dir() / f"{self.module_name()}{suffix}"

    def built(self) -> bool:
        """True when the build for the current sources exists (no numba import, no build)."""
        return _enabled() and self.path().is_file()

    # -- load ------------------------------------------------------------------------------------
    def load(self, build: bool = True) -> ModuleType | None:
        """The extension module (built first when missing and ``build``), or None when the
        ahead-of-time build is off or failed (reason in `unavailable`; one RuntimeWarning)."""
        if self._module is not None:
            return self._module
        if not _enabled():
            self.unavailable = "HPCTWIN_AOT=0"
            return None
        if self._failed:
            return None
        self.unavailable = None
        path = self.path()
        try:
            if not path.is_file():
                if not build:
                    return None
                missing = _pycc_missing()
                if missing:
                    raise RuntimeError(missing)
                self._build(path)
            self._module = _import_extension(self.module_name(), path)
        except Exception as exc:  # noqa: BLE001  (any build failure falls back to the JIT kernels)
            self.unavailable = f"{type(exc).__name__}: {exc}"
            self._failed = True
            if not self._warned:
                self._warned = True
                warnings.warn(f"hpctwin: ahead-of-time build of {self.name} failed ({self.unavailable}); "
                              "using numba's JIT kernels (same results, ~0.5 s more per run)",
                              RuntimeWarning, stacklevel=2)
            return None
        return self._module

    def _build(self, path: Path) -> None:
        global _build_seconds
        import time  # noqa: PLC0415

        from filelock import FileLock  # noqa: PLC0415 - only when a build is needed
        path.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        with FileLock(path.parent / f"{self.name}.lock"):
            if path.is_file():          # another process built it while we waited
                _build_seconds += time.perf_counter() - t0
                return
            print(f"hpctwin: building the compiled kernels {self.name} for this machine and code version "
                  f"(once; typically {TYPICAL_BUILD_S.get(self.name, '30-100')} s; cached in {path.parent}; "
                  "HPCTWIN_AOT=0 skips it and uses numba's JIT) ...", file=sys.stderr, flush=True)
            with tempfile.TemporaryDirectory(dir=path.parent, prefix=f".{self.name}-build-") as tmp:
                built = _build_in_child(self.module_name(), self.kernel_module, self.exports, Path(tmp))
                os.replace(built, path)
            _remove_stale(path, self.name)
        took = time.perf_counter() - t0
        _build_seconds += took
        print(f"hpctwin: built {self.name} in {took:.0f} s (not counted in the run's timing)",
              file=sys.stderr, flush=True)


def _enabled() -> bool:
    return os.environ.get("HPCTWIN_AOT", "1").strip().lower() not in ("0", "off", "no", "false")


def _cpu_id() -> str:
    """The host CPU's model and instruction-set flags (Linux: /proc/cpuinfo; elsewhere the
    platform's processor name), without importing numba or llvmlite."""
    import platform  # noqa: PLC0415
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            info = {}
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "flags", "Features", "CPU part") and key not in info:
                    info[key] = value.strip()
                if not line.strip() and info:
                    break
        if info:
            return hashlib.sha256(repr(sorted(info.items())).encode()).hexdigest()[:16]
    except OSError:
        pass
    return f"{platform.machine()}-{platform.processor()}"


def _pycc_missing() -> str | None:
    """Why ``numba.pycc`` cannot build here (a numba without it: pending deprecation since numba
    0.57), or None; looked up on disk, without importing numba, so a run on such a numba spawns no
    doomed build (it falls back to the JIT kernels at once)."""
    spec = importlib.util.find_spec("numba")
    if spec is None:
        return "numba is not installed"
    where = [Path(p) for p in (spec.submodule_search_locations or [])]
    if any((d / "pycc" / "__init__.py").is_file() for d in where):
        return None
    return f"numba {_numba_version()} has no numba.pycc (the ahead-of-time compiler numba deprecates)"


def _numba_version() -> str:
    """numba's installed version, read from its metadata (numba itself is not imported)."""
    from .plugins import distribution_version  # noqa: PLC0415
    return distribution_version("numba")


def _build_in_child(module_name: str, kernel_module: str, exports: dict[str, tuple[str, str]],
                    out_dir: Path) -> Path:
    """`_pycc_build` in a child process with a fresh, empty numba cache (``NUMBA_CACHE_DIR``) and
    this process's import path; raises RuntimeError with the child's last error lines."""
    import json  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    code = ("import json, sys\nfrom pathlib import Path\nfrom hpctwin.twin.aot import _pycc_build\n"
            "a = json.loads(sys.argv[1])\n"
            "print(_pycc_build(a[0], a[1], {k: tuple(v) for k, v in a[2].items()}, Path(a[3])))\n")
    cache = out_dir / "numba-cache"
    cache.mkdir()
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    args = json.dumps([module_name, kernel_module, exports, str(out_dir)])
    r = subprocess.run([sys.executable, "-c", code, args], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        tail = " | ".join((r.stderr or r.stdout).strip().splitlines()[-3:])
        raise RuntimeError(f"numba.pycc build exited with {r.returncode}: {tail}")
    return Path(r.stdout.strip().splitlines()[-1])


def _pycc_build(module_name: str, kernel_module: str, exports: dict[str, tuple[str, str]],
                out_dir: Path) -> Path:
    """Compile the exports with ``numba.pycc`` into ``out_dir``; the built file's path."""
    import importlib  # noqa: PLC0415
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # pycc's pending-deprecation notice
        from numba.pycc import CC  # noqa: PLC0415
    cc = CC(module_name)
    cc.target_cpu = "host"
    cc.output_dir = str(out_dir)
    cc.verbose = False
    for exported, (func, sig) in exports.items():
        where, _, name = func.rpartition(":")
        mod = importlib.import_module(where or kernel_module)
        cc.export(exported, sig)(getattr(mod, name).py_func)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cc.compile()
    found = sorted(p for p in out_dir.iterdir() if p.name.startswith(module_name) and p.suffix in (".so", ".pyd"))
    if not found:
        raise RuntimeError(f"numba.pycc wrote no extension module in {out_dir}")
    return found[0]


def _import_extension(module_name: str, path: Path) -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader(module_name, str(path))
    spec = importlib.util.spec_from_file_location(module_name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _remove_stale(current: Path, name: str) -> None:
    """Delete older builds of the kernel set ``name`` in the folder (other keys); ignore failures."""
    suffix = current.name[len(name) + 1 + 20:]          # after "<name>_<20 hex digits>"
    for p in current.parent.glob(f"{name}_*{suffix}"):
        key = p.name[len(name) + 1:len(p.name) - len(suffix)]
        if p != current and len(key) == 20 and all(c in "0123456789abcdef" for c in key):
            try:
                p.unlink()
            except OSError:
                pass
