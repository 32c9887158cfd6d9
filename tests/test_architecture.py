"""The import graph of ``steadyrun``: no circle inside a package, no import against the layers.

Every import of every module under ``src/steadyrun`` counts: those at module level, those under
``if TYPE_CHECKING:`` and those inside functions (a lazy import is still a need). ``from x import
y`` is an import of the module ``x.y`` when there is one, else of ``x``; importing a package is
importing its ``__init__``, which belongs to that package.

- **Circles**: inside one package (``steadyrun.runtime``, ``steadyrun.stores``, the modules
  directly under ``steadyrun``...) no module may need, through any chain of imports inside the
  package, a module that needs it. When two modules need each other, a third holds what they
  share, or one is given what it needs (a function, a small Protocol).
- **Layers**: ``LAYERS`` lists the layers from the top; a module may import its own layer and
  the layers above it, never one below. docs/design.md lists the same layers (checked below).
- **Size**: no file under ``src/`` or ``tests/`` passes ``MAX_LINES`` (600) lines; a longer one
  is split along its seams (STYLE.md: modules of one job).

Run ``python tests/test_architecture.py`` to print the graph's problems without pytest.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

import steadyrun

SRC = Path(steadyrun.__file__).parent
DESIGN = Path(__file__).parents[1] / "docs" / "design.md"
ROOT = "steadyrun"

LAYERS: tuple[tuple[str, ...], ...] = (
    # leaves: they import nothing of steadyrun but each other
    ("_errors", "_codec", "_fast_json", "_texts", "_texts_check", "_texts_zh", "_version",
     "_sqlite_thread", "_sqlite_wal", "_lane",
     "control"),
    ("chat",),
    ("tools",),
    ("media",),
    ("models",),
    ("records",),
    ("stores",),
    ("context",),
    ("runtime",),
    ("steadyrun",),  # the curated top-level names: the runtime and what it stands on
    ("extensions",),
    ("background",),
    ("stream",),
    ("tracing",),
    ("testing",),
    ("service",),
    ("temporal",),
    # the entry points: the command line and the demo
    ("__main__", "_cli", "_cli_drive", "_cli_errors", "_cli_history", "_cli_inbox",
     "_cli_lifecycle", "_cli_runs", "_cli_tail", "_cli_target", "_demo"),
)  # fmt: skip
"""The layers, from the top. A name is a subpackage or module directly under ``steadyrun``
(``steadyrun`` itself: its ``__init__``)."""


@dataclass(frozen=True, slots=True)
class Import:
    """``source`` imports ``target`` at ``line``."""

    source: str
    target: str
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} (line {self.line})"


@dataclass(frozen=True, slots=True)
class Module:
    """A module's source, and whether it is a package's ``__init__``."""

    source: str
    package: bool = False


def read_modules(src: Path = SRC) -> dict[str, Module]:
    """Every module of the package at ``src``, by dotted name."""
    out = {}
    for path in sorted(src.rglob("*.py")):
        parts = [ROOT, *path.relative_to(src).with_suffix("").parts]
        package = parts[-1] == "__init__"
        if package:
            parts.pop()
        out[".".join(parts)] = Module(path.read_text(encoding="utf-8"), package)
    return out


def _known(name: str, modules: Mapping[str, Module]) -> str | None:
    """``name``, or the nearest enclosing module of it that is ours (``None``: not ours)."""
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in modules else None


def parse(source: str) -> ast.Module:
    """``ast.parse``, asked again when CPython 3.11 trips on its own recursion count.

    3.11 keeps the AST constructor's recursion depth in interpreter-wide state, so a parse in
    another thread at the same moment (a Temporal worker's sandbox or griffe, left running by
    an earlier test of the session) makes this one raise ``SystemError: AST constructor
    recursion depth mismatch`` (CPython gh-106905): nothing is wrong with the source.
    """
    for _ in range(4):
        try:
            return ast.parse(source)
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc):
                raise
            last = exc
    raise last


def imports_of(name: str, modules: Mapping[str, Module]) -> list[Import]:
    """What module ``name`` imports of ours, wherever in the module the import stands."""
    module = modules[name]
    found = []
    for node in ast.walk(parse(module.source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if module.package else name.split(".")[:-1]
                up = here[: len(here) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        for target in targets:
            known = _known(target, modules)
            if known is not None and known != name:
                found.append(Import(name, known, node.lineno))
    return found


def import_graph(modules: Mapping[str, Module]) -> dict[str, list[Import]]:
    """Each module's imports of our modules."""
    return {name: imports_of(name, modules) for name in modules}


def package_of(name: str, modules: Mapping[str, Module]) -> str:
    """The package a module belongs to (a package's ``__init__`` belongs to the package)."""
    return name if modules[name].package else name.rsplit(".", 1)[0]


def _strong_components(nodes: Iterable[str], edges: Mapping[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of the graph restricted to ``nodes``."""
    members = set(nodes)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in members:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            out.append(sorted(component))

    for v in sorted(members):
        if v not in index:
            visit(v)
    return out


def _a_circle(component: list[str], graph: Mapping[str, list[Import]]) -> list[Import]:
    """One circle through the component's first module (shortest, by breadth first search)."""
    start, inside = component[0], set(component)
    came: dict[str, Import] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for edge in graph[v]:
                if edge.target not in inside or edge.target in came:
                    continue
                came[edge.target] = edge
                if edge.target == start:
                    path = [edge]
                    while path[0].source != start:
                        path.insert(0, came[path[0].source])
                    return path
                following.append(edge.target)
        frontier = following
    raise AssertionError(f"no circle through {start}")  # a component of 2+ always has one


def tangles(modules: Mapping[str, Module]) -> list[list[str]]:
    """Sets of modules of one package that all need each other (two or more)."""
    graph = import_graph(modules)
    edges = {name: {i.target for i in imports} for name, imports in graph.items()}
    packages: dict[str, list[str]] = {}
    for name in modules:
        packages.setdefault(package_of(name, modules), []).append(name)
    return [
        c for names in packages.values() for c in _strong_components(names, edges) if len(c) > 1
    ]


def circles(modules: Mapping[str, Module]) -> dict[str, list[list[Import]]]:
    """The import circles inside each package: for each tangle (modules that all need each
    other), one circle through it, as the imports that close it."""
    graph = import_graph(modules)
    out: dict[str, list[list[Import]]] = {}
    for tangle in tangles(modules):
        out.setdefault(package_of(tangle[0], modules), []).append(_a_circle(tangle, graph))
    return out


def layer_of(name: str) -> int:
    """The index in ``LAYERS`` of a module's layer."""
    parts = name.split(".")
    key = parts[1] if len(parts) > 1 else parts[0]
    for i, layer in enumerate(LAYERS):
        if key in layer:
            return i
    raise KeyError(f"{name} has no layer: add {key!r} to LAYERS (and to docs/design.md)")


def upward(modules: Mapping[str, Module]) -> list[Import]:
    """Imports of a module of a lower layer than the importer's."""
    return [
        i
        for imports in import_graph(modules).values()
        for i in imports
        if layer_of(i.target) > layer_of(i.source)
    ]


def describe_circle(path: list[Import]) -> str:
    """``a -> b (line 3) -> a (line 9)``."""
    return path[0].source + "".join(f" -> {i.target} (line {i.line})" for i in path)


def describe_tangle(path: list[Import], modules: Mapping[str, Module]) -> str:
    """A circle, and every module tangled with it (all need each other through the package)."""
    [tangle] = [c for c in tangles(modules) if path[0].source in c]
    return f"{describe_circle(path)}; tangled: {', '.join(tangle)}"


def describe_upward(i: Import) -> str:
    """Which layer reaches down to which."""
    source, target = LAYERS[layer_of(i.source)][0], LAYERS[layer_of(i.target)][0]
    return f"{i}: {source!r} may not import {target!r}, a layer below it"


# -- the package as it is ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def modules() -> dict[str, Module]:
    return read_modules()


def test_every_module_has_a_layer_and_every_layer_a_module(modules: dict[str, Module]) -> None:
    for name in modules:
        layer_of(name)  # raises, naming the module
    tops = {name.split(".")[1] if "." in name else name for name in modules}
    stale = {key for layer in LAYERS for key in layer} - tops
    assert not stale, f"LAYERS names what steadyrun does not have: {sorted(stale)}"


def test_no_import_circle_inside_a_package(modules: dict[str, Module]) -> None:
    found = circles(modules)
    assert not found, "import circles:\n" + "\n".join(
        f"  in {package}: {describe_tangle(path, modules)}"
        for package, paths in found.items()
        for path in paths
    )


def test_no_import_against_the_layer_order(modules: dict[str, Module]) -> None:
    found = upward(modules)
    assert not found, "imports against the layer order:\n" + "\n".join(
        f"  {describe_upward(i)}" for i in found
    )


def test_docs_design_lists_the_same_layers() -> None:
    text = DESIGN.read_text(encoding="utf-8")
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    items = re.split(r"^\d+\. ", section, flags=re.MULTILINE)[1:]
    listed = [tuple(re.findall(r"`([\w.]+)`", item.split(":", 1)[0])) for item in items]
    assert tuple(listed) == LAYERS, "docs/design.md (## Layers) and LAYERS differ"


# -- the checks catch what they are for (a circle or an upward import planted on purpose) ----


def _planted(modules: dict[str, Module], name: str, code: str) -> dict[str, Module]:
    out = dict(modules)
    out[name] = Module(modules[name].source + "\n" + code, modules[name].package)
    return out


def test_a_circle_through_a_function_local_import_is_found(modules: dict[str, Module]) -> None:
    planted = _planted(
        modules,
        "steadyrun.runtime._result",
        "def _late():\n    from steadyrun.runtime._runtime import Runtime\n",
    )
    assert not any("steadyrun.runtime._result" in t for t in tangles(modules))
    assert any("steadyrun.runtime._result" in t for t in tangles(planted))


def test_a_circle_through_type_checking_imports_is_found() -> None:
    both = {
        "steadyrun": Module("", package=True),
        "steadyrun.chat": Module("", package=True),
        "steadyrun.chat._a": Module("from steadyrun.chat._b import B\n"),
        "steadyrun.chat._b": Module(
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from steadyrun.chat import _a\n"
        ),
    }
    [[path]] = circles(both).values()
    assert describe_circle(path) == (
        "steadyrun.chat._a -> steadyrun.chat._b (line 1) -> steadyrun.chat._a (line 3)"
    )


def test_an_import_against_the_layers_is_found(modules: dict[str, Module]) -> None:
    planted = _planted(
        modules,
        "steadyrun.records._call",
        "if TYPE_CHECKING:\n    from steadyrun.service import App\n",
    )
    found = [describe_upward(i) for i in upward(planted) if i.source == "steadyrun.records._call"]
    assert found and "'records' may not import 'service'" in found[0], found


def test_a_leaf_importing_above_itself_is_found() -> None:
    leaf = {
        "steadyrun": Module("", package=True),
        "steadyrun._errors": Module("def f():\n    from steadyrun.chat import Message\n"),
        "steadyrun.chat": Module("", package=True),
    }
    assert [str(i) for i in upward(leaf)] == ["steadyrun._errors -> steadyrun.chat (line 2)"]


def test_relative_imports_resolve() -> None:
    mods = {
        "steadyrun": Module("", package=True),
        "steadyrun.chat": Module("from . import _a\nfrom ._b import B\n", package=True),
        "steadyrun.chat._a": Module("from .. import _errors\n"),
        "steadyrun.chat._b": Module(""),
        "steadyrun._errors": Module(""),
    }
    graph = import_graph(mods)
    assert [i.target for i in graph["steadyrun.chat"]] == ["steadyrun.chat._a", "steadyrun.chat._b"]
    assert [i.target for i in graph["steadyrun.chat._a"]] == ["steadyrun._errors"]


# -- file size ---------------------------------------------------------------------------------

MAX_LINES = 600
"""No Python file under ``src/`` or ``tests/`` may be longer (STYLE.md, house style 1)."""

REPO = Path(__file__).parents[1]


def oversized(roots: Iterable[Path], limit: int = MAX_LINES) -> list[tuple[str, int]]:
    """The Python files under ``roots`` longer than ``limit`` lines, longest first.

    Paths are given from the roots' parent (``src/steadyrun/...``, ``tests/...``).
    """
    found: list[tuple[str, int]] = []
    for root in roots:
        for path in root.rglob("*.py"):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > limit:
                found.append((path.relative_to(root.parent).as_posix(), lines))
    return sorted(found, key=lambda f: (-f[1], f[0]))


def test_no_file_in_src_or_tests_passes_600_lines() -> None:
    found = oversized([REPO / "src", REPO / "tests"])
    assert not found, (
        f"files over {MAX_LINES} lines; split each along its seams (a module of one job, "
        "a test kit for what test files share):\n"
        + "\n".join(f"  {path}: {lines} lines" for path, lines in found)
    )


def test_a_file_past_600_lines_is_found(tmp_path: Path) -> None:
    package = tmp_path / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "long.py").write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    (package / "full.py").write_text("x = 1\n" * MAX_LINES, encoding="utf-8")
    (package / "notes.txt").write_text("x\n" * (MAX_LINES + 1), encoding="utf-8")
    assert oversized([tmp_path / "src"]) == [("src/pkg/long.py", MAX_LINES + 1)]


if __name__ == "__main__":
    found_modules = read_modules()
    for package, paths in circles(found_modules).items():
        for path in paths:
            print(f"circle in {package}: {describe_tangle(path, found_modules)}")
    for i in upward(found_modules):
        print(f"upward: {describe_upward(i)}")
    for path, lines in oversized([REPO / "src", REPO / "tests"]):
        print(f"over {MAX_LINES} lines: {path} ({lines})")
