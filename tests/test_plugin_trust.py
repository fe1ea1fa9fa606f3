"""``module:Class`` runs only code that is a scheduler: the name is resolved and checked before anything
is called (``os:system``, ``subprocess:Popen`` are refused without running), and a plug-in whose
constructor raises gives one line, not a traceback."""
from __future__ import annotations

import pytest

from hpctwin.schedulers.registry import UnknownSchedulerError, make_scheduler, scheduler_factory
from hpctwin.twin.cli import main


@pytest.mark.parametrize("name, what", [
    ("os:system", "resolves to a builtin_function_or_method, not a scheduler class; it was not called"),
    ("subprocess:Popen", "subprocess.Popen is a class without a schedule(now, queue, cluster) method"),
    ("os.path:join", "resolves to a function, not a scheduler class; it was not called"),
    ("builtins:exec", "not a scheduler class; it was not called"),
    ("shutil:rmtree", "resolves to a function"),
])
def test_callables_that_are_not_schedulers_are_never_called(tmp_path, name, what, monkeypatch, capsys):
    marker = tmp_path / "X"
    monkeypatch.chdir(tmp_path)
    rc = main(["run", "-w", "synthetic:jobs=20", "--scheduler", name, "--set", f"scheduler.command=touch {marker}",
               "--set", f"scheduler.args=touch {marker}", "--out", str(tmp_path / "r"), "--quiet"])
    assert rc == 2 and not marker.exists() and not (tmp_path / "r").exists()
    assert what in capsys.readouterr().err


@pytest.mark.parametrize("name", ["os:", ":Foo", "os:system;rm", "a b:C", "os:__import__('x')"])
def test_malformed_names_are_refused(name):
    with pytest.raises(UnknownSchedulerError, match="expected module:Class|not a scheduler|has no"):
        make_scheduler(name)


class Boom:
    def __init__(self, **kw):
        raise RuntimeError("cannot open the license file")

    def schedule(self, now, queue, cluster):  # pragma: no cover - never built
        return []


class Fine:
    name = "fine"

    def __init__(self, depth: int = 1):
        self.depth = depth

    def schedule(self, now, queue, cluster):
        return []


@scheduler_factory
def make_fine(depth: int = 2):
    return Fine(depth)


def not_marked(depth: int = 2):  # pragma: no cover - refused before the call
    raise AssertionError("called")


def test_constructor_failure_is_one_line(capsys):
    with pytest.raises(UnknownSchedulerError, match=r"its constructor raised RuntimeError: cannot open the license"):
        make_scheduler(f"{__name__}:Boom")


def test_classes_and_marked_factories_are_allowed():
    assert make_scheduler(f"{__name__}:Fine", options={"depth": 3}).depth == 3
    assert make_scheduler(f"{__name__}:make_fine").depth == 2
    with pytest.raises(UnknownSchedulerError, match="resolves to a function"):
        make_scheduler(f"{__name__}:not_marked")


def test_import_error_inside_the_named_module_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "badmod_hpctwin_test.py").write_text("raise ZeroDivisionError('at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UnknownSchedulerError, match="importing 'badmod_hpctwin_test' failed: ZeroDivisionError"):
        make_scheduler("badmod_hpctwin_test:X")
