"""The JIT cache guard (`twin.jit_cache`, `twin.aot.KernelSet.guard_jit_cache`): numba's cache keys
a function on its own file, so a cached caller keeps an edited callee's old code; the guard drops
the set's cached code when any of its sources changed, and only then."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hpctwin.schedulers import backfill_replay
from hpctwin.twin import aot, jit_cache

CALLER = textwrap.dedent("""
    from numba import njit

    from hzd_callee import g, h


    @njit(cache=True)
    def f(x):
        return g(x) + h(x)
""")
#: v1: f(3) = (3 + 10) + 2 x 3 = 19; v2 (same lines): (3 + 20) + 3 x 3 = 32
CALLEE = textwrap.dedent("""
    from numba import njit

    K = {k}


    @njit(inline="always", cache=True)
    def g(x):
        return x + K


    @njit(cache=True)
    def h(x):
        return {m} * x
""")
V1, V2 = {"k": 10, "m": 2}, {"k": 20, "m": 3}


def _tree(tmp_path: Path) -> Path:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "hzd_caller.py").write_text(CALLER)
    (pkg / "hzd_callee.py").write_text(CALLEE.format(**V1))
    return pkg


def _script(pkg: Path, guarded: bool) -> str:
    guard = (f"aot.KernelSet('hpctwin_tiny', 'hzd_caller', {{}}, "
             f"[Path({str(pkg / 'hzd_caller.py')!r}), Path({str(pkg / 'hzd_callee.py')!r})]).guard_jit_cache()\n"
             if guarded else "")
    return (f"import sys\nfrom pathlib import Path\nsys.path.insert(0, {str(pkg)!r})\n"
            f"from hpctwin.twin import aot\n{guard}import hzd_caller\nprint(hzd_caller.f(3))\n")


def _env(cache_dir: Path | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = str(cache_dir)
    return env


def _run(pkg: Path, guarded: bool, cache_dir: Path | None) -> int:
    r = subprocess.run([sys.executable, "-c", _script(pkg, guarded)], env=_env(cache_dir),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return int(r.stdout.strip().splitlines()[-1])


def _where(pkg: Path, cache_dir: Path | None) -> Path:
    """numba's cache folder for the tiny package (in-tree or under NUMBA_CACHE_DIR)."""
    if cache_dir is None:
        return pkg / "__pycache__"
    (found,) = [p for p in cache_dir.iterdir() if p.name.startswith("pkg_")]
    return found


def _stat(files):
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in files}


@pytest.mark.slow                       # child processes compiling with numba: ~6 s each
@pytest.mark.parametrize("locator", ["in-tree", "NUMBA_CACHE_DIR"])
def test_guard_drops_a_caller_cached_with_an_old_callee(tmp_path, locator):
    pkg = _tree(tmp_path)
    cache_dir = tmp_path / "numba-cache" if locator == "NUMBA_CACHE_DIR" else None
    assert _run(pkg, True, cache_dir) == 19
    where = _where(pkg, cache_dir)
    caller = jit_cache.cache_files(where, "hzd_caller")
    assert [p.suffix for p in caller].count(".nbi") == 1 and jit_cache.cache_files(where, "hzd_callee")
    before = _stat(caller)
    # unchanged tree: the stamp matches, the cache loads (no compile: the index is not rewritten)
    assert _run(pkg, True, cache_dir) == 19
    assert _stat(jit_cache.cache_files(where, "hzd_caller")) == before
    # change only the callee: without the guard numba loads the caller's stale code (the hazard)
    (pkg / "hzd_callee.py").write_text(CALLEE.format(**V2))
    assert _run(pkg, False, cache_dir) == 19
    # with the guard the caller is compiled again with the new callee, and cached again
    assert _run(pkg, True, cache_dir) == 32
    assert _run(pkg, False, cache_dir) == 32
    stamp = jit_cache.read_stamp(where, "hpctwin_tiny")
    ks = aot.KernelSet("hpctwin_tiny", "hzd_caller", {}, [pkg / "hzd_caller.py", pkg / "hzd_callee.py"])
    assert stamp == ks.jit_key() and len(stamp) == 20


@pytest.mark.slow
def test_concurrent_guards_after_a_change_both_run_the_new_code(tmp_path):
    pkg = _tree(tmp_path)
    assert _run(pkg, True, None) == 19
    (pkg / "hzd_callee.py").write_text(CALLEE.format(**V2))
    procs = [subprocess.Popen([sys.executable, "-c", _script(pkg, True)], env=_env(None),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e for _, e in outs]
    assert [int(o.strip().splitlines()[-1]) for o, _ in outs] == [32, 32]


@pytest.mark.slow
def test_an_index_whose_data_file_is_gone_is_a_miss(tmp_path):
    """The state a reader may see while a guard deletes: numba compiles again, no crash."""
    pkg = _tree(tmp_path)
    assert _run(pkg, False, None) == 19
    where = pkg / "__pycache__"
    data = [p for p in jit_cache.cache_files(where, "hzd_caller") if p.suffix == ".nbc"]
    assert data
    for p in data:
        p.unlink()
    (pkg / "hzd_callee.py").write_text(CALLEE.format(**V2))
    assert _run(pkg, False, None) == 32                  # recompiled: the fresh callee is in it


def test_cache_files_match_only_numbas_files_of_the_module(tmp_path):
    keep = ["profile_kernels._plan_pass-120.py311.nbi", "profile_kernels._plan_pass-120.py311.1.nbc",
            "profile_kernels._borrow-77.py311.12.nbc", "profile_kernels.f-3.py39d.nbi"]
    other = ["profile_nodeset_kernels._ctz-40.py311.nbi", "profile_kernels._plan_pass-120.py311.nbi.tmp.ab12",
             "profile_kernels.cpython-311.pyc", "hpctwin_fastpath_0123456789abcdef0123.so",
             "xprofile_kernels.f-3.py311.nbi", "profile_kernels.nbi", "hpctwin-jit-x.stamp"]
    for n in keep + other:
        (tmp_path / n).write_text("")
    assert [p.name for p in jit_cache.cache_files(tmp_path, "profile_kernels")] == sorted(keep)
    assert jit_cache.cache_files(tmp_path / "missing", "profile_kernels") == []


def test_guard_dir_deletes_on_a_new_key_only_and_keeps_the_old_stamp_on_failure(tmp_path):
    names = ["a.f-1.py311.nbi", "a.f-1.py311.1.nbc", "b.g-2.py311.nbi", "c.h-3.py311.nbi"]
    for n in names:
        (tmp_path / n).write_text("")
    removed = jit_cache._guard_dir(tmp_path, "s", ["a", "b"], "k1")
    assert sorted(p.name for p in removed) == sorted(names[:3])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.h-3.py311.nbi", "hpctwin-jit-s.lock",
                                                          "hpctwin-jit-s.stamp"]
    assert jit_cache.read_stamp(tmp_path, "s") == "k1"
    (tmp_path / "a.f-1.py311.nbi").write_text("")
    assert jit_cache._guard_dir(tmp_path, "s", ["a", "b"], "k1") == []      # same key: kept
    assert (tmp_path / "a.f-1.py311.nbi").exists()
    (tmp_path / "b.g-9.py311.nbi").mkdir()                                  # cannot be unlinked
    jit_cache._guard_dir(tmp_path, "s", ["a", "b"], "k2")
    assert not (tmp_path / "a.f-1.py311.nbi").exists()
    assert jit_cache.read_stamp(tmp_path, "s") == "k1"                      # the next process retries


def _jit_fallback_sets():
    from hpctwin.schedulers import slurm_replay  # noqa: PLC0415
    return [(backfill_replay.KERNELS, backfill_replay.kernels), (slurm_replay.KERNELS, slurm_replay._replay_kernel)]


@pytest.mark.parametrize("which", [0, 1])
def test_the_jit_fallback_of_the_real_sets_runs_the_guard(which, tmp_path, monkeypatch):
    """HPCTWIN_AOT=0: choosing the JIT kernels deletes a stale cache file of every module of the
    set in numba's cache folder (here NUMBA_CACHE_DIR) and stamps the set's key."""
    from numba.core import config  # noqa: PLC0415
    ks, choose = _jit_fallback_sets()[which]
    monkeypatch.setenv("HPCTWIN_AOT", "0")
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ks, "_module", None)
    monkeypatch.setattr(ks, "_jit_guarded", False)
    planted = []
    for src in ks.sources:
        where = jit_cache.numba_cache_dir(src)
        assert where.parent == tmp_path
        planted.append(where / f"{src.stem}.stale-1.py311.nbi")
        planted[-1].write_text("")
    choose()
    assert not any(p.exists() for p in planted)
    for where in {p.parent for p in planted}:
        assert jit_cache.read_stamp(where, ks.name) == ks.jit_key()
    planted[0].write_text("")
    choose()                                              # once per process: nothing more deleted
    assert planted[0].exists()


def test_the_general_slurm_cycle_runs_the_guard_before_its_first_import(monkeypatch):
    """`SlurmScheduler._kern` (the compiled cycle of the general engine) inlines
    `schedulers.profile_kernels` and `profile_nodeset_kernels` too: its first import is guarded."""
    from hpctwin.schedulers import slurm, slurm_replay  # noqa: PLC0415

    class Guarded(Exception):
        pass

    def guard(self):
        raise Guarded(self.name)

    monkeypatch.setattr(aot.KernelSet, "guard_jit_cache", guard)
    monkeypatch.delitem(sys.modules, "hpctwin.schedulers.slurm_kernels", raising=False)
    with pytest.raises(Guarded, match=slurm_replay.KERNELS.name):
        slurm.SlurmScheduler._kern.fget(None)
