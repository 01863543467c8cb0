"""Unit tests run in seconds: none imports chdb, listens on a socket or starts a process.

A test that needs any of them belongs in ``tests/integration/`` (same folder under it). The guard
is cheap: while a unit module is imported and while a unit test runs, importing chdb fails (if an
earlier test already imported it, opening it fails), and so do ``socket.listen`` and starting a
subprocess, each with a message saying where the test goes.
"""

from __future__ import annotations

import importlib.abc
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

import pytest

MOVE = "unit tests must not {what}: this test belongs in tests/integration/ (see docs/architecture.md)"


class UnitTestBoundary(AssertionError):
    """A unit test did what only an integration test may do."""


class _NoChdb(importlib.abc.MetaPathFinder):
    """Refuses the import of chdb (embedded ClickHouse), which starts a database engine."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> None:
        if name == "chdb" or name.startswith("chdb."):
            raise UnitTestBoundary(MOVE.format(what=f"import {name} (embedded ClickHouse)"))
        return None


def _refuse(what: str) -> Any:
    def refused(*_args: Any, **_kwargs: Any) -> Any:
        raise UnitTestBoundary(MOVE.format(what=what))

    return refused


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    """Module-level imports of a unit test file are checked too."""
    if not isinstance(collector, pytest.Module):
        return (yield)
    finder = _NoChdb()
    sys.meta_path.insert(0, finder)
    try:
        return (yield)
    finally:
        sys.meta_path.remove(finder)


@pytest.fixture(autouse=True)
def _unit_boundary(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(socket.socket, "listen", _refuse("listen on a socket (start a server)"))
    monkeypatch.setattr(subprocess, "Popen", _refuse("start a subprocess"))
    chdb = sys.modules.get("chdb")
    if chdb is not None:  # imported by an integration test earlier in this run: refuse to open it
        monkeypatch.setattr(chdb, "connect", _refuse("open chdb (embedded ClickHouse)"))
        monkeypatch.setattr(chdb, "query", _refuse("query chdb (embedded ClickHouse)"))
    finder = _NoChdb()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
