"""Ahead-of-time kernel builds (`twin.aot`): same results as numba's JIT, keyed on every source,
fallback to the JIT with a warning, and no numba import when the built module runs."""
from __future__ import annotations

import dis
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

from hpctwin.schedulers import backfill_replay
from hpctwin.twin import aot
from hpctwin.twin.ranges import ranges_of_sorted


def _workload(seed: int, n: int = 400, total: int = 32):
    rng = np.random.default_rng(seed)
    submit = np.sort(np.round(rng.exponential(40.0, n).cumsum()))
    procs = rng.integers(1, total + 1, n).astype(np.int64)
    est = np.round(rng.uniform(10, 3000, n))
    runtime = np.round(est * rng.uniform(0.05, 1.2, n))      # some hit the limit
    kill = np.where(rng.random(n) < 0.8, est, np.inf)
    return submit, procs, est, runtime, kill, total


@pytest.mark.parametrize("order", sorted(backfill_replay.ORDER_CODES))
@pytest.mark.parametrize("backfill", sorted(backfill_replay.BACKFILL_CODES))
def test_built_module_gives_the_jit_results(order, backfill):
    built = backfill_replay.KERNELS.load()
    if built is None:
        pytest.skip(f"no ahead-of-time build here: {backfill_replay.KERNELS.unavailable}")
    backfill_replay.KERNELS.guard_jit_cache()                     # compare with fresh JIT code, never stale
    from hpctwin.schedulers import backfill_replay_kernels as K  # noqa: PLC0415
    submit, procs, est, runtime, kill, total = _workload(7 + len(order) + len(backfill))
    oc, bc = backfill_replay.ORDER_CODES[order], backfill_replay.BACKFILL_CODES[backfill]
    rank = backfill_replay._static_rank(oc, est, procs)
    a = built.replay(submit, procs, est, runtime, kill, total, oc, bc, rank)
    b = K._replay(submit, procs, est, runtime, kill, total, oc, bc, rank)
    assert len(a) == len(b) and a[7] == b[7]
    nch = a[7]                                             # the change series' used length
    for k, (x, y) in enumerate(zip(a, b)):
        if k in (4, 5, 6):
            x, y = x[:nch], y[:nch]
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True)
        else:
            assert x == y
    assert a[10] == 0 and np.isfinite(a[0]).all()        # status ok, every job ran


def test_range_texts_are_ranges_of_sorted():
    rng = np.random.default_rng(3)
    procs, units = [], []
    for j in range(600):
        if j % 10 == 0:                                   # never ran: -1 in its slots
            procs.append(3)
            units += [-1, -1, -1]
            continue
        pool = 50 if j % 3 else 300_000
        u = np.sort(rng.choice(pool, int(rng.integers(1, 30)), replace=False))
        procs.append(len(u))
        units += u.tolist()
    procs_a, units_a = np.array(procs, dtype=np.int64), np.array(units, dtype=np.int32)
    got = backfill_replay._range_texts(units_a, procs_a, np.zeros(len(procs)))
    off = np.concatenate(([0], np.cumsum(procs_a)))
    want = [None if units_a[off[j]] < 0 else ranges_of_sorted(units_a[off[j]:off[j + 1]]) for j in range(len(procs))]
    assert got == want
    assert got[1] is not None and got[0] is None


def _njit_files(func, seen=None) -> set[str]:
    """Source files of every njit function reachable by name from ``func``'s code."""
    from numba.core.registry import CPUDispatcher  # noqa: PLC0415
    seen = set() if seen is None else seen
    py = func.py_func
    if py in seen:
        return set()
    seen.add(py)
    files = {py.__code__.co_filename}
    codes = [py.__code__]
    while codes:
        code = codes.pop()
        codes += [c for c in code.co_consts if hasattr(c, "co_names")]
        for ins in dis.get_instructions(code):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                obj = py.__globals__.get(ins.argval)
                if isinstance(obj, CPUDispatcher):
                    files |= _njit_files(obj, seen)
    return files


def _kernel_sets():
    from hpctwin.schedulers import slurm_replay  # noqa: PLC0415
    return [backfill_replay.KERNELS, slurm_replay.KERNELS]


@pytest.mark.parametrize("which", [0, 1])
def test_declared_sources_cover_every_compiled_function(which):
    """The build key hashes `KernelSet.sources`: an njit function from an undeclared file would let
    an edit there load a stale build."""
    import importlib  # noqa: PLC0415
    ks = _kernel_sets()[which]
    declared = {str(p.resolve()) for p in ks.sources}
    for func, _sig in ks.exports.values():
        where, _, name = func.rpartition(":")
        f = getattr(importlib.import_module(where or ks.kernel_module), name)
        reached = {str(Path(p).resolve()) for p in _njit_files(f)}
        assert reached <= declared, f"{func}: undeclared kernel sources {sorted(reached - declared)}"


def _project_imports(path: Path) -> set[str]:
    """Files of the ``hpctwin`` modules that the module at ``path`` imports anywhere (statically;
    ``from X import name`` counts X, and X.name when that is a module)."""
    import ast  # noqa: PLC0415
    import importlib.util  # noqa: PLC0415
    root = Path(aot.__file__).resolve().parent.parent       # hpctwin.twin is <root>/twin
    pkg = "hpctwin." + ".".join(path.resolve().relative_to(root).with_suffix("").parts[:-1])
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), pkg) \
                if node.level else node.module
            names += [base] + [f"{base}.{a.name}" for a in node.names]
    files = set()
    for name in names:
        if not name.startswith("hpctwin."):
            continue
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            spec = None
        if spec is not None and spec.origin and spec.origin.endswith(".py"):
            files.add(str(Path(spec.origin).resolve()))
    return files


@pytest.mark.parametrize("which", [0, 1])
def test_declared_sources_cover_every_imported_project_module(which):
    """numba freezes global constants at compile time (`schedulers.slurm_replay_layout`'s), so the
    key (AOT build and JIT cache stamp) must hash every project module a source imports."""
    ks = _kernel_sets()[which]
    declared = {str(p.resolve()) for p in ks.sources}
    for src in ks.sources:
        missing = _project_imports(src) - declared
        assert not missing, f"{src.name} imports undeclared project modules {sorted(missing)}"
    assert any(p.name == "slurm_replay_layout.py" for p in ks.sources) == (which == 1)


def test_key_follows_sources_and_signatures(tmp_path):
    src = tmp_path / "k.py"
    src.write_text("x = 1\n")
    ks = aot.KernelSet("hpctwin_t", "m", {"f": ("f", "i8(i8)")}, [src])
    k1 = ks.key()
    src.write_text("x = 2\n")
    assert ks.key() != k1
    ks2 = aot.KernelSet("hpctwin_t", "m", {"f": ("f", "f8(f8)")}, [src])
    assert ks2.key() != ks.key()
    assert ks.module_name().startswith("hpctwin_t_") and ks.path().name.startswith(ks.module_name())
    # the JIT cache's stamp: sources only (numba's own index keys the signature and the CPU)
    assert ks2.jit_key() == ks.jit_key() and len(ks.jit_key()) == 20
    j = ks.jit_key()
    src.write_text("x = 3\n")
    assert ks.jit_key() != j and ks.jit_key() == ks2.jit_key()


def test_off_switch_and_failed_build_fall_back_to_jit(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCTWIN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("HPCTWIN_AOT", "0")
    ks = aot.KernelSet("hpctwin_off", "hpctwin.twin.range_kernels",
                       {"f": ("range_text_bytes", "u1[::1](i4[::1], i8[::1])")}, [Path(aot.__file__)])
    assert ks.load() is None and ks.unavailable == "HPCTWIN_AOT=0" and not ks.built()
    monkeypatch.setenv("HPCTWIN_AOT", "1")
    bad = aot.KernelSet("hpctwin_bad", "hpctwin.twin.range_kernels",
                        {"f": ("no_such_function", "i8(i8)")}, [Path(aot.__file__)])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert bad.load() is None
        assert bad.load() is None                          # one warning, not one per call
    assert "no_such_function" in bad.unavailable
    assert [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)][0].startswith(
        "hpctwin: ahead-of-time build of hpctwin_bad failed")
    assert len([x for x in w if issubclass(x.category, RuntimeWarning)]) == 1
    assert not list(tmp_path.rglob("*.so"))               # nothing half-built left behind


def test_built_replay_runs_without_importing_numba():
    if backfill_replay.KERNELS.load() is None:
        pytest.skip(f"no ahead-of-time build here: {backfill_replay.KERNELS.unavailable}")
    code = textwrap.dedent("""
        import sys
        import numpy as np
        from hpctwin.schedulers import backfill_replay
        r = backfill_replay.replay(np.array([0.0, 1.0, 2.0]), np.array([2, 2, 1]), np.array([10.0, 5.0, 1.0]),
                                   np.array([10.0, 5.0, 1.0]), np.full(3, np.inf), 3, "fcfs", "easy")
        print(r.start.tolist(), r.nodes, "numba" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # job 2 (1 unit, 1 s) backfills at 2 beside job 0; job 1 waits for job 0's end at 10
    assert out.strip() == "[0.0, 10.0, 2.0] ['0-1', '0-1', '2'] False"


@pytest.mark.parametrize("opts", [{}, {"bf_resolution": 60, "bf_interval": 7, "bf_max_job_test": 5}])
def test_slurm_replay_built_module_gives_the_jit_run(opts, monkeypatch):
    """The Slurm-like policy's whole-run replay: the same run from the built module and from the
    JIT function (jobs table, summary without timings, series)."""
    from hpctwin.schedulers import slurm_replay  # noqa: PLC0415
    if slurm_replay.KERNELS.load() is None:
        pytest.skip(f"no ahead-of-time build here: {slurm_replay.KERNELS.unavailable}")
    from .test_slurm_replay import TIMING, _run, _wl  # noqa: PLC0415
    wl = _wl(n=1200, nodes=16, seed=5, overrun=0.1)
    a = _run(wl, 16, replay="on", **opts)
    monkeypatch.setenv("HPCTWIN_AOT", "0")
    monkeypatch.setattr(slurm_replay.KERNELS, "_module", None)
    b = _run(wl, 16, replay="on", **opts)
    assert a.jobs.equals(b.jobs)
    assert {k: v for k, v in a.summary.items() if k not in TIMING} == \
        {k: v for k, v in b.summary.items() if k not in TIMING}
    for k, (arr, _) in a.timeseries.items():
        assert np.array_equal(arr, b.timeseries[k][0]), k


def test_a_new_build_removes_older_builds_of_its_set_only(tmp_path):
    sfx = ".cpython-311-x86_64-linux-gnu.so"
    names = [f"hpctwin_k_{'a' * 20}{sfx}", f"hpctwin_k_{'b' * 20}{sfx}", f"hpctwin_k_other_{'c' * 20}{sfx}",
             f"hpctwin_kx_{'d' * 20}{sfx}", "hpctwin_k.lock"]
    for n in names:
        (tmp_path / n).write_text("")
    aot._remove_stale(tmp_path / names[1], "hpctwin_k")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[1:])


def test_a_numba_without_pycc_falls_back_at_once(tmp_path, monkeypatch):
    """The AOT decision's fallback: with no ``numba.pycc`` on disk, `load` spawns no build, records
    why, warns once, and the replay runs on the JIT kernels with the same result."""
    monkeypatch.setenv("HPCTWIN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(aot, "_pycc_missing", lambda: "numba 9.9 has no numba.pycc (the ahead-of-time "
                        "compiler numba deprecates)")

    def no_build(*a, **k):
        raise AssertionError("a build was attempted")
    monkeypatch.setattr(aot, "_build_in_child", no_build)
    ks = aot.KernelSet("hpctwin_nopycc", "hpctwin.twin.range_kernels",
                       {"f": ("range_text_bytes", "u1[::1](i4[::1], i8[::1])")}, [Path(aot.__file__)])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert ks.load() is None and ks.load() is None
    assert ks.unavailable == "RuntimeError: numba 9.9 has no numba.pycc (the ahead-of-time compiler numba deprecates)"
    assert len([x for x in w if issubclass(x.category, RuntimeWarning)]) == 1
    ks_real = backfill_replay.KERNELS
    monkeypatch.setattr(ks_real, "_module", None)
    monkeypatch.setattr(ks_real, "_failed", False)
    monkeypatch.setattr(ks_real, "_warned", True)            # the warning is the test above's
    r = backfill_replay.replay(np.array([0.0, 1.0, 2.0]), np.array([2, 2, 1]), np.array([10.0, 5.0, 1.0]),
                               np.array([10.0, 5.0, 1.0]), np.full(3, np.inf), 3, "fcfs", "easy")
    assert ks_real.unavailable.endswith("has no numba.pycc (the ahead-of-time compiler numba deprecates)")
    assert r.start.tolist() == [0.0, 10.0, 2.0] and r.nodes == ["0-1", "0-1", "2"]


def test_pycc_lookup_needs_no_numba_import():
    code = "import sys\nfrom hpctwin.twin import aot\nprint(aot._pycc_missing(), 'numba' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "None False"
