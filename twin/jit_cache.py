"""Guard numba's on-disk JIT cache against callees edited in another file (the JIT fallback of `twin.aot`).

The hazard: numba's cache (``cache=True``) keys a function's compiled code on its own file only
(the index ``<module>.<qualname>-<line>.pyXY.nbi`` holds a hash of that file; the entry key adds
the signature, the CPU and the function's own bytecode). A kernel compiles the njit functions it
calls into its own machine code (always so for ``inline="always"`` helpers, and numba freezes the
global constants it reads, e.g. `schedulers.slurm_replay_layout`'s, at compile time). So after an
edit or an upgrade that changes only a callee's file (`schedulers.profile_kernels`), the caller's
cached code (`schedulers.backfill_replay_kernels`) is stale and still loads: silently wrong schedules.

The guard (`guard`, called by `twin.aot.KernelSet.guard_jit_cache` before the JIT fallback
imports a kernel set): every numba cache folder that holds a module of the set carries a stamp file
``hpctwin-jit-<set>.stamp`` with the set's source key (`twin.aot.KernelSet.jit_key`: a hash of
every source file compiled into the set, the files its constants come from included). When the
stamp is missing or differs, the cache files numba wrote for the set's modules in that folder are
deleted and then the new stamp is written (atomically: temporary file + rename). The next call
compiles afresh and numba caches the result again; an unchanged tree keeps its cache (no compile).

Why deleting rather than a custom numba cache class (``_CacheImpl`` / locator subclasses, whose
stamp or index key could include the set key): the dispatchers create their cache object when the
module is imported, through numba's private classes, so a custom cache means replacing private
attributes of every dispatcher or a process-wide ``NUMBA_CACHE_LOCATOR_CLASSES`` that also
governs the user's own functions. Deleting depends only on numba's file names and on the folder
its own locator classes choose (`numba_cache_dir` asks numba: ``NUMBA_CACHE_DIR`` when set, else
the module's ``__pycache__`` when writable, else the user-wide folder).

Concurrency: the check, the deletion and the stamp write run under a file lock (`filelock`, as `twin.aot` uses)
for its builds (one lock file per set and folder), and the stamp is written only after every stale
file is gone (a failed deletion leaves the old stamp, so the next process tries again). A process
reading the cache meanwhile cannot crash: files are only unlinked, never truncated, and numba
writes its own files by rename, so a reader sees a whole index or none; an index whose data file
was removed counts as a miss (`IndexDataCacheFile.load` catches the OSError); both are tested in
``tests/test_jit_cache.py``. One case stays open: a process that imported the kernels *before* an
upgrade and first compiles them after it writes its old code under the new stamp (numba hashes the
caller's file when its module is imported, and that file did not change).
"""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

#: the stamp's file name in a numba cache folder (one per kernel set)
STAMP = "hpctwin-jit-{name}.stamp"


def guard(name: str, sources: list[Path], key: str) -> list[Path]:
    """Delete numba's cache files of the modules ``sources`` wherever the stamp of set ``name``
    differs from ``key``; returns the files deleted. Imports numba (to ask its locators)."""
    removed: list[Path] = []
    by_dir: dict[Path, list[Path]] = {}
    for src in sources:
        d = numba_cache_dir(Path(src))
        if d is not None:
            by_dir.setdefault(d, []).append(Path(src))
    for d, srcs in by_dir.items():
        removed += _guard_dir(d, name, [s.stem for s in srcs], key)
    return removed


def numba_cache_dir(py_file: Path) -> Path | None:
    """The folder numba caches the functions of ``py_file`` in, chosen by numba itself (its
    `numba.core.caching.CacheImpl` for a stand-in function of that file: ``NUMBA_CACHE_DIR``,
    ``NUMBA_CACHE_LOCATOR_CLASSES``, the writable ``__pycache__``, the user-wide folder...), or
    None when no locator accepts the file (numba then cannot cache it)."""
    import types  # noqa: PLC0415

    from numba.core import caching  # noqa: PLC0415  (the JIT path imports numba anyway)

    def probe():                 # numba's locators read only the function's file and first line
        pass

    stand_in = types.FunctionType(probe.__code__.replace(co_filename=str(py_file)), {}, "probe")
    try:
        impl = caching.CompileResultCacheImpl(stand_in)
    except RuntimeError:         # "cannot cache function ...: no locator available"
        return None
    return Path(impl.locator.get_cache_path())


def cache_files(cache_dir: Path, stem: str) -> list[Path]:
    """numba's index and data files of module ``stem`` in ``cache_dir``:
    ``<stem>.<qualname>-<lineno>.pyXY[abiflags].nbi`` and ``....<n>.nbc`` (nothing else: not
    its temporary files, not another module's, not hpctwin's builds)."""
    pat = re.compile(re.escape(stem) + r"\.[^\\/]+-\d+\.py\d+[a-z]*(\.nbi|\.\d+\.nbc)")
    try:
        names = os.listdir(cache_dir)
    except OSError:
        return []
    return sorted(cache_dir / n for n in names if pat.fullmatch(n))


def read_stamp(cache_dir: Path, name: str) -> str | None:
    """The key stamped in ``cache_dir`` for set ``name``, or None."""
    try:
        return (cache_dir / STAMP.format(name=name)).read_text(encoding="ascii").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def _guard_dir(cache_dir: Path, name: str, stems: list[str], key: str) -> list[Path]:
    if read_stamp(cache_dir, name) == key:         # the usual case: no lock, nothing written
        return []
    from filelock import FileLock  # noqa: PLC0415
    try:
        lock = FileLock(cache_dir / f"hpctwin-jit-{name}.lock")
        with lock:
            if read_stamp(cache_dir, name) == key:   # another process did it while we waited
                return []
            removed, failed = [], False
            for stem in stems:
                files = cache_files(cache_dir, stem)
                # indexes first: a reader then misses rather than finds an entry without data
                for p in sorted(files, key=lambda p: p.suffix != ".nbi"):
                    try:
                        p.unlink()
                        removed.append(p)
                    except FileNotFoundError:
                        pass
                    except OSError:
                        failed = True
            if not failed:
                _write_atomic(cache_dir / STAMP.format(name=name), key + "\n")
            return removed
    except OSError:                                # folder not writable: numba cannot cache here
        return []


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(text)
        os.chmod(tmp, 0o644)               # mkstemp's 0600 would hide it from other users
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
