"""The import contract (issue 24): zero import cycles and imports that point down the layers only.

The layers are declared once, in ``pyproject.toml`` (``[[tool.hpctwin.layers]]``, top to bottom):
application (CLI, experiments, reports), composition (run plan, options, model table), models
(schedulers, power, topology, datasets, serving, training), engine (the event loop and its state),
foundation (records, contract, schema kit, plug-in table kit). A module belongs to the layer of its
longest matching prefix; it may import its own layer and the layers below. Imports inside functions
count (a lazy import is still a dependency); ``if TYPE_CHECKING:`` blocks do not.
"""
from __future__ import annotations

import pytest

import ast
import functools
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
#: the repository's top-level folders installed under the hpctwin namespace
TOPS = ("twin", "schedulers", "datasets", "topology", "power", "experiments", "hpctwin")


def _modules() -> dict[str, Path]:
    mods = {}
    for top in TOPS:
        for p in (ROOT / top).rglob("*.py"):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            rest = parts[1:] if parts[0] == "hpctwin" else parts
            mods[".".join(["hpctwin", *rest])] = p
    return mods


def _targets(node: ast.AST, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            b = package
            for _ in range(node.level - 1):
                b = b.rpartition(".")[0]
            base = b + ("." + base if base else "")
        return [f"{base}.{a.name}" for a in node.names] + [base]
    return []


@functools.lru_cache(maxsize=1)
def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (the first project target of each import statement)."""
    mods = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = {id(s) for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
                for b in n.body for s in ast.walk(b)}
        package = m if path.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            for t in _targets(node, package):
                r = resolve(t) if t.startswith("hpctwin") else None
                # importing a submodule through its package names the package only as a path
                if r and r != m and not (r == "hpctwin" and m != "hpctwin"):
                    graph[m].add(r)
                    break
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def layers() -> list[tuple[str, list[str]]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [(entry["name"], list(entry["modules"])) for entry in data["tool"]["hpctwin"]["layers"]]


def layer_of(module: str, declared: list[tuple[str, list[str]]]) -> int | None:
    best, depth = None, -1
    for i, (_, prefixes) in enumerate(declared):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and p.count(".") > depth:
                best, depth = i, p.count(".")
    return best


@pytest.mark.slow
def test_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles (imports inside functions counted): " + "; ".join(" ".join(c) for c in found)


def test_every_module_has_a_layer():
    declared = layers()
    missing = sorted(m for m in import_graph() if layer_of(m, declared) is None)
    assert not missing, f"modules in no layer of pyproject.toml [[tool.hpctwin.layers]]: {missing}"


def test_imports_point_down_the_layers():
    declared = layers()
    graph = import_graph()
    up = sorted(f"{a} ({declared[layer_of(a, declared)][0]}) imports {b} ({declared[layer_of(b, declared)][0]})"
                for a, deps in graph.items() for b in deps if layer_of(b, declared) < layer_of(a, declared))
    assert not up, "imports that point up the layers:\n" + "\n".join(up)


def test_the_checker_sees_a_cycle_and_an_upward_import():
    graph = {"hpctwin.twin.contract": {"hpctwin.twin.run"}, "hpctwin.twin.run": {"hpctwin.twin.contract"},
             "hpctwin.twin.cli": set()}
    assert cycles(graph) == [["hpctwin.twin.contract", "hpctwin.twin.run"]]
    declared = layers()
    assert layer_of("hpctwin.twin.run", declared) < layer_of("hpctwin.twin.contract", declared)
    assert layer_of("hpctwin.twin.serving.cli", declared) < layer_of("hpctwin.twin.serving.batch", declared)
    # the tree itself is large enough that a silent parse failure would show
    assert len(import_graph()) > 150
