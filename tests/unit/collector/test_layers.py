"""The collector's imports point down its layers and never run in a circle (docs/architecture.md).

Imports are read with ``ast`` from the source, every one of them: at module level, inside
functions and under ``TYPE_CHECKING`` alike, since each is a dependency a reader has to follow.
A module may import anything inside its own package and anything in a lower layer; two packages of
one layer know nothing of each other. Run ``pytest tests/unit/collector/test_layers.py``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
COLLECTOR = ROOT / "collector" / "latencylens_collector"
SDK = ROOT / "instrumentation" / "latencylens"
PACKAGE = "latencylens_collector"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("__main__",),  # python -m latencylens_collector
    ("cli",),  # the command line: parses, asks, prints
    ("demo",),  # the demo workload: returns data, the command line prints it
    ("api",),  # the HTTP service: app, lifespan wiring, routes, dependencies
    ("ui",),  # the web UI's routes and static files (the app mounts them)
    ("intake", "slo", "traffic"),  # OTLP receivers; SLOs (measured with queries); replaying recorded traffic
    ("pipeline", "queries"),  # queue, writer, spool, ingest; the read side of request rows
    ("storage", "auth"),  # ClickHouse store, migrations, DDL, rollup; projects and API keys
    ("metadata",),  # the SQL metadata database (keys, SLOs) and its one Alembic history
    ("analysis",),  # pure: span records, conventions, attribution, explanations (no I/O)
    ("runtime", "settings", ""),  # process-wide: metrics registry, scheduler, clock; settings; version
)
"""Layers of ``latencylens_collector``, top to bottom; ``""`` is the package's own ``__init__``."""

LAYER_OF: dict[str, int] = {package: depth for depth, layer in enumerate(LAYERS) for package in layer}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path) -> dict[str, Path]:
    return {module_name(path, root): path for path in sorted(root.rglob("*.py"))}


def imported(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """Every module ``name`` (at ``path``) imports, relative imports resolved; ``from a import b``
    names ``a.b`` when that is a module, else ``a``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                yield submodule if submodule in known else source


def graph(root: Path) -> dict[str, set[str]]:
    """Module → the modules of the same tree it imports."""
    known = modules(root)
    return {
        name: {target for target in imported(name, path, known) if target in known and target != name}
        for name, path in known.items()
    }


def package_of(module: str) -> str:
    """``latencylens_collector.api.routes.otlp`` → ``api``; the root ``__init__`` → ``""``."""
    return module.split(".")[1] if "." in module else ""


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


COLLECTOR_GRAPH = graph(COLLECTOR)


def test_every_package_has_a_layer() -> None:
    """A new package gets its place in LAYERS (and in docs/architecture.md) before it is used."""
    packages = {package_of(module) for module in COLLECTOR_GRAPH}
    assert packages - set(LAYER_OF) == set(), "add the package to LAYERS"


def test_imports_point_down() -> None:
    upward = sorted(
        f"{source} -> {target}"
        for source, targets in COLLECTOR_GRAPH.items()
        for target in targets
        if package_of(source) != package_of(target)
        and LAYER_OF[package_of(source)] >= LAYER_OF[package_of(target)]
    )
    assert upward == [], "imports that run up or sideways:\n" + "\n".join(upward)


def test_no_import_circles() -> None:
    found = circles(COLLECTOR_GRAPH)
    assert found == [], "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_sdk_does_not_import_the_collector() -> None:
    """Apps install the SDK alone; the collector depends on it, never the other way round."""
    known = modules(SDK)
    offending = sorted(
        f"{name} -> {target}"
        for name, path in known.items()
        for target in imported(name, path, known)
        if target == PACKAGE or target.startswith(f"{PACKAGE}.")
    )
    assert offending == [], "\n".join(offending)


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": set()}, []),
        ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
    ],
)
def test_circles_are_found(edges: dict[str, set[str]], expected: list[list[str]]) -> None:
    """The check itself: a circle of any length is reported, a chain is not."""
    assert sorted(circles(edges)) == expected


def test_imports_are_read_from_every_place(tmp_path: Path) -> None:
    """Relative, function-level and TYPE_CHECKING imports all count; ``from a import b`` is a.b."""
    root = tmp_path / PACKAGE
    (root / "low").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "low" / "__init__.py").write_text("")
    (root / "low" / "thing.py").write_text("X = 1\n")
    (root / "low" / "other.py").write_text("Y = 1\n")
    (root / "top.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from .low import thing\n"
        "if TYPE_CHECKING:\n    from latencylens_collector.low.other import Y\n"
        "def f():\n    import latencylens_collector.low\n"
    )
    assert graph(root)[f"{PACKAGE}.top"] == {
        f"{PACKAGE}.low.thing",
        f"{PACKAGE}.low.other",
        f"{PACKAGE}.low",
    }
