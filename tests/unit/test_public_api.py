"""Public names are the ones ``__all__`` lists, and the service uses only public SDK names.

For each package of the SDK and of the collector that declares ``__all__``, the names its
``__init__`` binds (its own definitions and what it imports from the project) must be exactly the
ones listed: a new export is listed, a helper is private (``_name``). Submodules bound by an import
may be listed (``latencylens.semconv``) but need not be. Names imported only for type checking
(``if TYPE_CHECKING:``) and names from third-party or standard modules are not exports.

Every other public module that declares ``__all__`` lists each public name it defines (functions,
classes, constants not starting with ``_``), and lists nothing but what it defines or takes from the
project. (Its other imports are for its own use.) Modules inside a private module (``_wrap``) have
no public names to list.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
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


def _run_time_statements(statements: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A module body's statements that run on import, those in ``if``/``try`` blocks included
    (``if TYPE_CHECKING:`` blocks are not)."""
    for node in statements:
        if isinstance(node, ast.If):
            if not _is_type_checking(node):
                yield from _run_time_statements(node.body)
                yield from _run_time_statements(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _run_time_statements(node.body)
        else:
            yield node


def _defined(source: str, top: str | None) -> set[str]:
    """Names bound at run time by definitions and assignments, and by imports from the project
    (``top`` or relative) unless ``top`` is None."""
    names: set[str] = set()
    for node in _run_time_statements(ast.parse(source).body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            names.update(t.id for t in _targets(node) if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom) and top is not None:
            module = node.module or ""
            if node.level or module == top or module.startswith(f"{top}."):
                names.update(alias.asname or alias.name for alias in node.names)
    return names


def bound_names(source: str, top: str) -> set[str]:
    """Names a package ``__init__`` binds at run time: definitions, assignments and imports from the
    project (``top`` or relative), in its body and in ``if``/``try`` blocks."""
    names = _defined(source, top)
    return {name for name in names if name != "__all__" and (not name.startswith("_") or _dunder(name))}


def defined_names(source: str) -> set[str]:
    """Public names a module defines itself at run time (no imports), in its body and in
    ``if``/``try`` blocks."""
    return {name for name in _defined(source, None) if not name.startswith("_")}


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


PUBLIC_MODULES = [
    pytest.param(_module_name(path, PACKAGE_ROOTS[top]), path, top, id=_module_name(path, PACKAGE_ROOTS[top]))
    for top in PACKAGE_ROOTS
    for path in _files(top)
    if path.name != "__init__.py"
    and _declares_all(path)
    and not any(part.startswith("_") for part in _module_name(path, PACKAGE_ROOTS[top]).split("."))
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


@pytest.mark.parametrize(("name", "path", "top"), PUBLIC_MODULES)
def test_all_lists_every_public_name_a_module_defines(name: str, path: Path, top: str) -> None:
    module = importlib.import_module(name)
    source = path.read_text(encoding="utf-8")
    declared = set(module.__all__)
    assert len(declared) == len(module.__all__), "a name is listed twice"
    assert defined_names(source) - declared == set(), (
        "public but not in __all__ (list it, or make it _private)"
    )
    from_project = bound_names(source, top) | defined_names(source)
    assert declared - from_project == set(), "listed in __all__ but neither defined here nor the project's"


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


def test_defined_names_are_a_modules_own_public_definitions() -> None:
    source = "from .a import B\nimport os\n_x = 1\nY: int = 2\ndef f(): pass\nclass K: pass\n"
    source += "try:\n    Z = 3\nexcept E:\n    pass\n"
    assert defined_names(source) == {"Y", "f", "K", "Z"}


def test_the_private_name_pattern() -> None:
    assert PRIVATE_SDK.search("from latencylens._config import API_KEY_ENV")
    assert PRIVATE_SDK.search("latencylens.providers._base.Usage")
    assert not PRIVATE_SDK.search("from latencylens import API_KEY_ENV")
    assert not PRIVATE_SDK.search("from latencylens_collector._migrations import x")
