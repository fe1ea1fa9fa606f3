"""Fixed start-up costs of a small CLI run (issue 24 item 6), each cut with the same results: the
entry-point scan's pre-filter (`twin.plugins._entry_points`, `distribution_version`), the parsed
dataset registry kept per process, the lazily built placement Generator (`twin.contract.lazy_seeded_rng`),
``np.median`` / ``np.percentile`` without ``numpy.ma`` (`twin.metrics.median`, `twin.metrics.percentile`)
and the code identity's file walk (`twin.inputs._files_identity`)."""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import importlib.machinery
import importlib.metadata
import os
import pickle
import subprocess
import sys
import types
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

from hpctwin.datasets import registry
from hpctwin.topology.placement import FirstFit, Spread
from hpctwin.twin import inputs, metrics, plugins
from hpctwin.twin.contract import LazyGenerator, lazy_seeded_rng, seeded_rng


def _fresh(code: str) -> str:
    """stdout of ``code`` run by a new interpreter (what a fresh ``hpctwin`` process imports)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


# ============================================================================ 1. entry points
@pytest.fixture
def clean_eps():
    plugins._entry_points.cache_clear()
    yield
    plugins._entry_points.cache_clear()


def _dist(root: Path, name: str, entry_points: str | None = None, metadata: str | None = None) -> Path:
    d = root / name
    d.mkdir(parents=True)
    if entry_points is not None:
        (d / "entry_points.txt").write_text(entry_points)
    if metadata is not None:
        (d / "METADATA").write_text(metadata)
    return d


def _recording(monkeypatch) -> list:
    """``importlib.metadata.entry_points`` replaced by one that records its calls (and finds nothing)."""
    calls: list = []
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: calls.append(kw) or [])
    return calls


def test_a_declared_group_is_found_and_loads(tmp_path, monkeypatch, clean_eps):
    _dist(tmp_path, "x-1.0.dist-info", "[console_scripts]\nx = x:main\n\n[hpctwin.models]\nfake = h1fakemod:THING\n")
    (tmp_path / "h1fakemod.py").write_text("THING = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert plugins._group_declared("hpctwin.models") is True
    eps = plugins._entry_points("hpctwin.models")
    assert list(eps) == ["fake"] and eps["fake"].value == "h1fakemod:THING" and eps["fake"].group == "hpctwin.models"
    assert eps["fake"].load() == 42
    assert plugins._entry_points("hpctwin.schedulers") == {}
    sys.modules.pop("h1fakemod", None)


def test_an_undeclared_group_never_asks_importlib_metadata(tmp_path, monkeypatch, clean_eps):
    _dist(tmp_path, "x-1.0.dist-info", "[hpctwin.schedulers]\ns = m:S\n# [hpctwin.models]\n")
    _dist(tmp_path, "y-2.0.egg-info", "[hpctwin.models.extra]\na = b:c\n")
    _dist(tmp_path, "z-3.0.dist-info")                                  # no entry_points.txt
    (tmp_path / "old-1.0.egg-info").write_text("Metadata-Version: 1.0\n")   # an egg-info file
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path / "absent"))              # a missing folder: skipped
    calls = _recording(monkeypatch)
    assert plugins._group_declared("hpctwin.models") is False
    assert plugins._entry_points("hpctwin.models") == {} and calls == []
    assert plugins._group_declared("hpctwin.schedulers") is True        # declared: importlib answers
    plugins._entry_points("hpctwin.schedulers")
    assert calls == [{"group": "hpctwin.schedulers"}]


@pytest.mark.parametrize("header,declared", [("[ hpctwin.models ]", True), ("  [hpctwin.models]\t", True),
                                             ("[[hpctwin.models]]", True), ("[hpctwin.models2]", False),
                                             ("hpctwin.models = x:y", False)])
def test_section_headers_are_matched_at_least_as_widely_as_importlib(tmp_path, monkeypatch, clean_eps, header,
                                                                     declared):
    _dist(tmp_path, "x-1.0.dist-info", f"{header}\nfake = h1fakemod:THING\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert plugins._group_declared("hpctwin.models") is declared
    want = {ep.name: ep for ep in importlib.metadata.entry_points(group="hpctwin.models")}
    assert plugins._entry_points("hpctwin.models") == want             # exact, whatever the pre-filter said


def test_a_zip_on_sys_path_falls_back_to_importlib(tmp_path, monkeypatch, clean_eps):
    z = tmp_path / "plugins.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("x-1.0.dist-info/entry_points.txt", "[hpctwin.schedulers]\ns = m:S\n")
    monkeypatch.syspath_prepend(str(z))
    assert plugins._group_declared("hpctwin.models") is None
    calls = _recording(monkeypatch)
    assert plugins._entry_points("hpctwin.models") == {} and calls == [{"group": "hpctwin.models"}]


@pytest.mark.parametrize("unusual", ["egg-link", "egg", "finder", "undecodable"])
def test_unusual_environments_fall_back_to_importlib(tmp_path, monkeypatch, clean_eps, unusual):
    if unusual == "egg-link":
        (tmp_path / "proj.egg-link").write_text("/somewhere\n.\n")
    elif unusual == "egg":
        (tmp_path / "x-1.0.egg").mkdir()
        tmp_path = tmp_path / "x-1.0.egg"
    elif unusual == "finder":
        finder = types.SimpleNamespace(find_distributions=lambda *a, **k: iter(()),
                                       find_spec=lambda *a, **k: None)
        monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, finder])
    else:
        _dist(tmp_path, "x-1.0.dist-info").joinpath("entry_points.txt").write_bytes(b"[hpctwin.models]\n\xff\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert plugins._group_declared("hpctwin.models") is None
    calls = _recording(monkeypatch)
    plugins._entry_points("hpctwin.models")
    assert calls == [{"group": "hpctwin.models"}]


def test_the_installed_groups_agree_with_importlib(clean_eps):
    assert importlib.machinery.PathFinder in sys.meta_path
    for group in ("hpctwin.models", "hpctwin.schedulers", "console_scripts"):
        want = {ep.name: ep for ep in importlib.metadata.entry_points(group=group)}
        assert plugins._entry_points(group) == want
        assert want == {} or plugins._group_declared(group) is not False    # never "absent" when declared


def test_a_fresh_process_reads_no_metadata_module_for_undeclared_groups():
    out = _fresh("import sys\nfrom hpctwin.twin import plugins\n"
                 "print(plugins._group_declared('hpctwin.models'), plugins._entry_points('hpctwin.models'),"
                 " 'importlib.metadata' in sys.modules)")
    assert out == "False {} False"


# ---------------------------------------------------------------------------- distribution_version
@pytest.mark.parametrize("name", ["numpy", "pytest", "h5py", "typing-extensions", "Typing_Extensions", "pip"])
def test_distribution_version_is_importlib_metadata_version(name):
    try:
        want = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{name} is not installed")
    assert plugins.distribution_version(name) == want


def test_distribution_version_reads_plain_metadata_and_defers_odd_files(tmp_path, monkeypatch):
    _dist(tmp_path, "Fake_Pkg-1.2.dist-info", metadata="Metadata-Version: 2.1\nName: fake-pkg\nVersion: 1.2.3 \n"
                                                       "Version: 9\n\nVersion: 7\n")
    _dist(tmp_path, "folded-1.0.dist-info", metadata="Name: folded\nSummary: a\n  b\nVersion: 1.0\n")
    _dist(tmp_path, "pkginfo-1.0.egg-info").joinpath("PKG-INFO").write_text("Name: pkginfo\nVersion: 0.5\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert plugins._version_from_metadata("fake.pkg") == "1.2.3 " == importlib.metadata.version("fake.pkg")
    for name, version in (("folded", "1.0"), ("pkginfo", "0.5")):
        with pytest.raises((plugins._Unsure, OSError)):
            plugins._version_from_metadata(name)
        assert plugins.distribution_version(name) == version == importlib.metadata.version(name)
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        plugins.distribution_version("no-such-distribution-h1")


# ============================================================================ 2. dataset registry
def test_registry_is_parsed_once_and_each_call_gets_its_own_dict(monkeypatch):
    monkeypatch.setattr(registry, "_PARSED", None)
    real = registry.tomllib.loads
    parses = []
    monkeypatch.setattr(registry, "tomllib", types.SimpleNamespace(loads=lambda t: parses.append(1) or real(t)))
    a = registry.load_registry()
    a.pop("KTH-SP2")
    b = registry.load_registry()
    assert len(parses) == 1 and b is not a and "KTH-SP2" in b and "KTH-SP2" not in a
    assert b == registry.load_registry() and registry.lookup("kth-sp2") is b["KTH-SP2"]
    assert len(parses) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        b["KTH-SP2"].jobs = 1                                           # shared entries are immutable


def test_an_edited_registry_file_is_read_again(tmp_path, monkeypatch):
    f = tmp_path / "registry.toml"
    f.write_text(registry.REGISTRY_FILE.read_text())
    monkeypatch.setattr(registry, "REGISTRY_FILE", f)
    monkeypatch.setattr(registry, "_PARSED", None)
    n = len(registry.load_registry())
    with open(f, "a") as g:
        g.write('\n[H1-TEST]\nfile = "h1.swf"\ndir = "h1"\nsha256 = ""\njobs = 3\nmachine = "m"\nurl = ""\n')
    reg = registry.load_registry()
    assert len(reg) == n + 1 and reg["H1-TEST"].jobs == 3
    text = f.read_text()
    f.write_text(text.replace("jobs = 3\n", "jobs = 4\n"))            # same size: the mtime tells
    st = os.stat(f)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert registry.load_registry()["H1-TEST"].jobs == 4


# ============================================================================ 3. lazy placement Generator
def test_lazy_generator_draws_exactly_as_seeded_rng():
    for seed, name in ((0, "placement"), (12345, "placement"), (2**40 + 7, "failures"), (-3, "x")):
        lazy, real = lazy_seeded_rng(seed, name), seeded_rng(seed, name)
        assert object.__getattribute__(lazy, "_rng") is None            # nothing built yet
        for _ in range(3):
            assert np.array_equal(lazy.choice(50, size=7, replace=False), real.choice(50, size=7, replace=False))
            assert np.array_equal(lazy.integers(0, 1000, 5), real.integers(0, 1000, 5))
            assert lazy.random() == real.random() and lazy.exponential(3.0) == real.exponential(3.0)
            assert np.array_equal(lazy.permutation(9), real.permutation(9))
        assert lazy.bit_generator.state == real.bit_generator.state


def test_lazy_generator_is_a_generator_and_copies_as_one():
    lazy = lazy_seeded_rng(5, "placement")
    assert isinstance(lazy, np.random.Generator) and isinstance(lazy, LazyGenerator)
    lazy.integers(10, size=3)
    for twin in (copy.copy(lazy), copy.deepcopy(lazy), pickle.loads(pickle.dumps(lazy))):
        assert type(twin) is np.random.Generator
        assert twin.bit_generator.state == lazy.bit_generator.state
    assert np.array_equal(twin.integers(10**6, size=4), lazy.integers(10**6, size=4))
    assert repr(lazy).startswith("Generator(PCG64)")


def test_placers_work_with_the_lazy_generator():
    free = np.ones(64, dtype=bool)
    free[[3, 9, 10, 40]] = False
    ff = FirstFit()
    lazy = lazy_seeded_rng(7, "placement")
    ff.bind(64, None, lazy)
    assert list(ff.place(0, 5, free)) == [0, 1, 2, 4, 5]
    assert object.__getattribute__(lazy, "_rng") is None               # first fit never draws
    a, b = Spread(), Spread()
    a.bind(64, None, lazy_seeded_rng(7, "placement"))
    b.bind(64, None, seeded_rng(7, "placement"))
    for job in range(20):
        assert np.array_equal(a.place(job, 1 + job % 6, free), b.place(job, 1 + job % 6, free))


def test_a_lazy_generator_imports_numpy_random_only_when_used():
    out = _fresh("import sys\nfrom hpctwin.twin.contract import lazy_seeded_rng\n"
                 "r = lazy_seeded_rng(1, 'placement')\nprint('numpy.random' in sys.modules, end=' ')\n"
                 "x = r.integers(1000)\nprint('numpy.random' in sys.modules)")
    assert out == "False True"


# ============================================================================ 4. median and percentile
def _same(got, want) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    return (got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)
            and bool(np.signbit(got)) == bool(np.signbit(want)))


def _arrays(n_arrays: int = 3000):
    rng = np.random.default_rng(20240624)
    pools = ([0.0, -0.0], [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf], [0.0, -0.0, np.nan, 2.5, -np.nan, 7.0])
    for i in range(n_arrays):
        n = int(rng.integers(0, 3)) if i % 10 == 0 else int(rng.integers(1, 60))
        kind = i % 7
        if kind == 0:
            yield rng.normal(size=n) * 1e3
        elif kind == 1:
            yield rng.integers(-50, 50, size=n)
        elif kind == 2:
            yield np.round(rng.exponential(600.0, size=n))                 # waits (s): many ties
        elif kind == 3:
            yield rng.choice(pools[i % 3], size=n)
        elif kind == 4:
            yield rng.normal(size=n).astype(np.float32)
        elif kind == 5:
            yield np.maximum(1.0, rng.exponential(5.0, size=n))             # bounded slowdowns
        else:
            yield rng.uniform(0, 1e9, size=n)


def test_median_is_np_median_bit_for_bit():
    for a in _arrays():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = np.median(a)
        got = metrics.median(a)
        if len(a) == 0:                     # what summarise gives an empty selection
            assert isinstance(got, float) and np.isnan(got) and np.isnan(want)
        else:
            assert _same(got, want), (a, got, want)


def test_percentile_is_np_percentile_bit_for_bit():
    for a in _arrays():
        for q in (95, 0, 100, 50, 99.9, 37.5, 1, 5.0):
            if len(a) == 0:                 # never asked by summarise: np.percentile's own error
                for f in (np.percentile, metrics.percentile):
                    with pytest.raises(IndexError):
                        f(a, q)
                continue
            assert _same(metrics.percentile(a, q), np.percentile(a, q)), (a, q)


def test_summarise_is_unchanged(monkeypatch):
    rng = np.random.default_rng(3)
    submit = np.sort(rng.uniform(0, 1e6, 501))
    start = submit + np.round(rng.exponential(900.0, 501))
    start[::17] = np.nan
    end = start + rng.uniform(0, 5e4, 501)
    procs = rng.integers(1, 64, 501)
    got = [metrics.summarise(submit[:k], start[:k], end[:k], procs[:k], 100) for k in (1, 2, 200, 501)]
    got.append(metrics.summarise(submit, start, end, procs, 100, window=(1e5, 9e5)))
    got.append(metrics.summarise(submit, start, end, procs, 100, window=(2e6, 3e6)))      # empty window
    monkeypatch.setattr(metrics, "median", np.median)
    monkeypatch.setattr(metrics, "percentile", np.percentile)
    want = [metrics.summarise(submit[:k], start[:k], end[:k], procs[:k], 100) for k in (1, 2, 200, 501)]
    want.append(metrics.summarise(submit, start, end, procs, 100, window=(1e5, 9e5)))
    want.append(metrics.summarise(submit, start, end, procs, 100, window=(2e6, 3e6)))
    assert repr(got) == repr(want)


def test_summarise_imports_no_numpy_ma():
    out = _fresh("import sys\nimport numpy as np\nfrom hpctwin.twin import metrics\n"
                 "x = np.arange(10.0)\ns = metrics.summarise(x, x + 3, x + 9, np.ones(10), 4)\n"
                 "print(s['median_wait_s'], s['p95_wait_s'], 'numpy.ma' in sys.modules)")
    assert out == "3.0 3.0 False"


# ============================================================================ 5. code identity
def _old_files_identity(dirs: list[Path]) -> str:
    """The implementation `inputs._files_identity` replaced (Path.rglob, sorted Paths, relative_to)."""
    h = hashlib.sha256()
    for d in dirs:
        files = sorted(p for p in d.rglob("*.py") if "__pycache__" not in p.parts)
        if d.name == "twin":
            files += sorted((d / "systems").glob("*.toml"))
        if d.name == "datasets":
            files += sorted(d.glob("*.toml"))
        for p in files:
            h.update(f"{d.name}/{p.relative_to(d).as_posix()}\0".encode())
            h.update(p.read_bytes())
    return f"files-{h.hexdigest()[:16]}"


def test_code_identity_digest_is_unchanged_on_the_real_tree():
    dirs = inputs._package_dirs()
    assert inputs._files_identity(dirs) == _old_files_identity(dirs)


def test_code_identity_digest_is_unchanged_on_tricky_names(tmp_path):
    names = ["a.py", "a/b.py", "a-b.py", "a_b/x.py", "a/a/a.py", "a.b/c.py", "A.py", "B/c.py", "é.py", "z.py",
             ".hidden.py", "a b.py", "ab.py", "a0.py", "a/__init__.py", "__pycache__/c.py", "q/__pycache__/d.py",
             "notes.txt", "x.pyc", "y.py~", "deep/er/est/m.py", "deep/er.py", "systems/b.toml", "systems/a.toml",
             "systems/s.py", "r.toml", "registry.toml"]
    dirs = []
    for pkg in ("twin", "datasets", "other"):
        root = tmp_path / pkg
        for i, n in enumerate(names):
            (root / n).parent.mkdir(parents=True, exist_ok=True)
            (root / n).write_text(f"# {pkg} {i} {n}\n")
        (root / "linked").symlink_to(root / "a", target_is_directory=True)     # not entered by rglob
        (root / "l.py").symlink_to(root / "z.py")                               # a matching link counts
        dirs.append(root)
    assert inputs._files_identity(dirs) == _old_files_identity(dirs)
    parts = inputs._py_files(str(dirs[0]))
    assert parts == [tuple(p.relative_to(dirs[0]).parts)
                     for p in sorted(q for q in dirs[0].rglob("*.py") if "__pycache__" not in q.parts)]
    assert parts.index(("a", "a", "a.py")) < parts.index(("a-b.py",)) < parts.index(("a.py",)) < parts.index(("a_b", "x.py"))
    (dirs[0] / "a" / "b.py").write_text("changed\n")
    assert inputs._files_identity(dirs) == _old_files_identity(dirs) != inputs._files_identity(dirs[1:])


def _blas_threads(env_extra: dict) -> tuple[bool, int, bool]:
    """In a fresh process: whether `start_numpy_single_threaded` acted, OpenBLAS's pool size after it, and
    whether OPENBLAS_NUM_THREADS is left in the environment."""
    import json  # noqa: PLC0415
    pytest.importorskip("threadpoolctl")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                               "MKL_NUM_THREADS", "BLIS_NUM_THREADS")}
    env.update(env_extra)
    code = ("import json, os\nfrom hpctwin.twin.cli import start_numpy_single_threaded as s\nacted = s()\n"
            "import threadpoolctl\nn = [p['num_threads'] for p in threadpoolctl.threadpool_info() "
            "if p['internal_api'] == 'openblas']\n"
            "print(json.dumps([acted, n[0] if n else -1, 'OPENBLAS_NUM_THREADS' in os.environ]))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return tuple(json.loads(out.stdout))


def test_the_command_line_starts_openblas_with_one_thread_and_leaves_the_environment_alone():
    acted, threads, left = _blas_threads({})
    assert acted is True and left is False
    assert threads in (1, -1)                 # -1: numpy built without OpenBLAS (nothing to size)


def test_a_user_sized_pool_is_respected():
    acted, threads, left = _blas_threads({"OMP_NUM_THREADS": "2"})
    assert acted is False and left is False
    assert threads in (2, -1)
