"""Every public name of ``hpctwin`` (the ``_API`` table) has an executed docstring example (issue 26).

The examples are run with doctest, each in fresh globals (so each starts with ``import hpctwin`` and can
be pasted into a notebook as it is), with ``ELLIPSIS | NORMALIZE_WHITESPACE``.
"""
from __future__ import annotations

import doctest
from pathlib import Path

import pytest

import hpctwin

NAMES = list(hpctwin._API)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _tests(name: str) -> list[doctest.DocTest]:
    """The doctests of a public name's docstring (and of its own methods' docstrings)."""
    obj = getattr(hpctwin, name)
    finder = doctest.DocTestFinder(recurse=True, exclude_empty=True)
    return [t for t in finder.find(obj, f"hpctwin.{name}", globs={}) if t.examples]


def test_every_public_name_is_in_all():
    assert set(NAMES) <= set(hpctwin.__all__)


@pytest.mark.parametrize("name", NAMES)
def test_public_name_has_an_example(name):
    tests = _tests(name)
    assert tests, f"hpctwin.{name} has no doctest example in its docstring"
    doc = getattr(hpctwin, name).__doc__ or ""
    assert "Examples\n" in doc and ">>> import hpctwin" in doc, f"hpctwin.{name}: no self-contained Examples section"


@pytest.mark.parametrize("name", NAMES)
def test_public_name_examples_pass(name):
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for t in _tests(name):
        runner.run(t)
    res = runner.summarize(verbose=False)
    assert res.attempted > 0
    assert res.failed == 0, f"hpctwin.{name}: {res.failed} of {res.attempted} doctest examples failed (output above)"


def _gen_api():
    import importlib.util
    path = Path(__file__).resolve().parents[1] / "docs" / "gen_api.py"
    spec = importlib.util.spec_from_file_location("hpctwin_docs_gen_api", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_api_reference_is_current():
    gen = _gen_api()
    committed = gen.OUT.read_text()
    assert committed == gen.render(), "docs/api.md is out of date: run python docs/gen_api.py"
    assert gen.main(["--check"]) == 0


def test_api_reference_has_every_name_with_signature_and_example():
    text = _gen_api().render()
    for name in NAMES:
        sec = text.split(f"## `hpctwin.{name}`\n", 1)[1].split("\n## ", 1)[0]
        assert "```python\n" in sec and "**Example**" in sec and ">>> import hpctwin" in sec, name
    assert "```pycon\n>>> wl = hpctwin.Workload.from_arrays(" in text
    assert "- `seed` (`int`), default `0`: seed of every random source of the run" in text


def test_gen_api_first_paragraph_and_examples_sections():
    gen = _gen_api()
    doc = "One line\ncontinued.\n\nMore.\n\nExamples\n--------\nProse here.\n\n>>> 1 + 1\n2\n"
    assert gen.first_paragraph(doc) == "One line continued."
    assert gen.examples(doc) == "Prose here.\n\n```pycon\n>>> 1 + 1\n2\n```"
    assert gen.examples("No examples.") == ""
