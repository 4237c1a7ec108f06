"""The package's structure: washout's modules import each other without a cycle and each layer
only from the layers below it (docs/design.md, "Layers"), counting every import: at the top
of a module, under TYPE_CHECKING and inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

LAYERS = [
    "errors version",
    "data",
    "stats",
    "harness",
    "sweep",
    "analysis",
    "bisection",
    "report",
    "cli",
    "__main__",
]
"""Bottom first: a module may import its own layer and those before it. The package itself
(``washout``, the public API) sits on top of them all."""


def modules(src: Path = SRC) -> dict[str, Path]:
    """Every module of washout by its dotted name (a package by its own name)."""
    found = {}
    for path in sorted((src / "washout").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The washout modules that ``name`` imports anywhere in its source (``from p import m``
    names module ``p.m`` when that is a module, else ``p``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in known:
                    found.add(full)
                elif base in known:
                    found.add(base)
    found.discard(name)
    return found


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """Module -> the washout modules it imports."""
    known = modules(src)
    return {name: imported(name, path, set(known)) for name, path in known.items()}


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def layer(module: str) -> int:
    """The layer's rank (LAYERS); the package itself is above every layer."""
    parts = module.split(".")
    if len(parts) == 1:
        return len(LAYERS)
    return next(i for i, names in enumerate(LAYERS) if parts[1] in names.split())


def test_the_import_graph_is_acyclic() -> None:
    found = cycle(import_graph())
    assert found is None, "import cycle: " + " -> ".join(found or [])


def test_each_layer_imports_only_the_layers_below() -> None:
    upward = sorted(
        f"{m} -> {t}" for m, ts in import_graph().items() for t in ts if layer(t) > layer(m)
    )
    assert not upward, "imports of a higher layer:\n" + "\n".join(upward)


def test_only_the_engine_writes_a_store() -> None:
    """The store's writer is the engine's; everything else reads (``Store``, read-only).
    The CLI that hands a store the engine made back to it names the writer's type."""
    writers = sorted(m for m, ts in import_graph().items() if "washout.data.store.writer" in ts)
    assert writers == ["washout.cli.commands_run", "washout.harness.engine"]


def test_the_checks_find_a_cycle_and_an_upward_import(tmp_path: Path) -> None:
    """The checks above can fail: a TYPE_CHECKING import that closes a cycle, and a data
    module that imports the CLI, are both found."""
    pkg = tmp_path / "washout"
    (pkg / "data").mkdir(parents=True)
    (pkg / "cli").mkdir()
    for init in (pkg, pkg / "data", pkg / "cli"):
        (init / "__init__.py").write_text("")
    (pkg / "data" / "a.py").write_text("from washout.data import b\n")
    (pkg / "data" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n"
    )
    (pkg / "data" / "c.py").write_text("def f():\n    from washout.cli import main\n")
    graph = import_graph(tmp_path)
    assert cycle(graph) == ["washout.data.a", "washout.data.b", "washout.data.a"]
    assert "washout.cli" in graph["washout.data.c"]
    assert layer("washout.cli") > layer("washout.data.c")
