"""Public names are the ones ``__all__`` lists, and the service uses only public SDK names.

For each package of the SDK and of the collector that declares ``__all__``, the names its
``__init__`` binds (its own definitions and what it imports from the project) must be exactly the
ones listed: a new export is listed, a helper is private (``_name``). Submodules bound by an import
may be listed (``latencylens.semconv``) but need not be. Names imported only for type checking
(``if TYPE_CHECKING:``) and names from third-party or standard modules are not exports.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_ROOTS = {
    "latencylens": ROOT / "instrumentation" / "latencylens",
    "latencylens_collector": ROOT / "collector" / "latencylens_collector",
}
PRIVATE_SDK = re.compile(r"\blatencylens(\.[A-Za-z0-9]+)*\._")


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _files(top: str) -> list[Path]:
    return sorted(PACKAGE_ROOTS[top].rglob("*.py"))


def _declares_all(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(
        isinstance(node, (ast.Assign, ast.AnnAssign))
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in _targets(node))
        for node in tree.body
    )


def _targets(node: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return list(node.targets) if isinstance(node, ast.Assign) else [node.target]


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def bound_names(source: str, top: str) -> set[str]:
    """Names a package ``__init__`` binds at run time: definitions, assignments and imports from the
    project (``top`` or relative), in its body and in ``if``/``try`` blocks."""
    names: set[str] = set()

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                names.update(t.id for t in _targets(node) if isinstance(t, ast.Name))
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level or module == top or module.startswith(f"{top}."):
                    names.update(alias.asname or alias.name for alias in node.names)
            elif isinstance(node, ast.If) and not _is_type_checking(node):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)

    visit(ast.parse(source).body)
    return {name for name in names if name != "__all__" and (not name.startswith("_") or _dunder(name))}


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


PACKAGES = [
    pytest.param(_module_name(path, PACKAGE_ROOTS[top]), path, top, id=_module_name(path, PACKAGE_ROOTS[top]))
    for top in PACKAGE_ROOTS
    for path in _files(top)
    if path.name == "__init__.py" and _declares_all(path)
]
MODULES_WITH_ALL = [
    pytest.param(_module_name(path, PACKAGE_ROOTS[top]), id=_module_name(path, PACKAGE_ROOTS[top]))
    for top in PACKAGE_ROOTS
    for path in _files(top)
    if _declares_all(path)
]


def test_the_sdk_declares_its_public_names() -> None:
    assert "latencylens" in [param.values[0] for param in PACKAGES]


@pytest.mark.parametrize(("name", "path", "top"), PACKAGES)
def test_all_lists_exactly_the_public_names(name: str, path: Path, top: str) -> None:
    module = importlib.import_module(name)
    declared = set(module.__all__)
    bound = {
        attribute
        for attribute in bound_names(path.read_text(encoding="utf-8"), top)
        if not isinstance(getattr(module, attribute, None), ModuleType)
    }
    assert len(declared) == len(module.__all__), "a name is listed twice"
    assert bound - declared == set(), "public but not in __all__ (list it, or make it _private)"
    not_modules = {n for n in declared if not isinstance(getattr(module, n, None), ModuleType)}
    assert not_modules - bound == set(), "listed in __all__ but not bound by the package"


@pytest.mark.parametrize("name", MODULES_WITH_ALL)
def test_every_listed_name_exists(name: str) -> None:
    module = importlib.import_module(name)
    assert [n for n in module.__all__ if not hasattr(module, n)] == []


def test_the_collector_uses_only_public_sdk_names() -> None:
    """``latencylens._config`` and friends may change at any release; the service must not care."""
    offending = []
    for path in _files("latencylens_collector"):
        source = path.read_text(encoding="utf-8")
        offending += [
            f"{path.name}:{n}" for n, line in enumerate(source.splitlines(), 1) if PRIVATE_SDK.search(line)
        ]
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "latencylens":
                offending += [f"{path.name}:{node.lineno}" for a in node.names if a.name.startswith("_")]
    assert offending == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from .a import B\nfrom x.y import C\n__all__ = ['B']\n", {"B"}),
        ("from latencylens._config import configure as configure\n_helper = 1\n", {"configure"}),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from latencylens.a import T\n", set()),
        ("def f(): pass\nclass K: pass\nX: int = 1\n__version__ = '1'\n", {"f", "K", "X", "__version__"}),
    ],
)
def test_bound_names_reads_what_a_package_exports(source: str, expected: set[str]) -> None:
    """The check itself: project imports and definitions count; third-party, typing-only and
    private names do not."""
    assert bound_names(source, "latencylens") == expected


def test_the_private_name_pattern() -> None:
    assert PRIVATE_SDK.search("from latencylens._config import API_KEY_ENV")
    assert PRIVATE_SDK.search("latencylens.providers._base.Usage")
    assert not PRIVATE_SDK.search("from latencylens import API_KEY_ENV")
    assert not PRIVATE_SDK.search("from latencylens_collector._migrations import x")
