"""Fixtures for provider tests: the shared replay server, and ``undo``, which undoes a test's
instrumentations. The in-memory OTel pipeline (``spans``) and the internal-error check come from the
SDK fixtures (``../conftest.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from provider_replay import ReplayServer

import latencylens


@pytest.fixture
def replay() -> Iterator[Callable[[], ReplayServer]]:
    """Start replay servers on 127.0.0.1 (random ports); all are closed after the test."""
    servers: list[ReplayServer] = []

    def start() -> ReplayServer:
        server = ReplayServer()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def undo() -> Iterator[Callable[[latencylens.Instrumentation], latencylens.Instrumentation]]:
    """Keep instrumentations made by a test and undo them afterwards."""
    made: list[latencylens.Instrumentation] = []

    def keep(handle: latencylens.Instrumentation) -> latencylens.Instrumentation:
        made.append(handle)
        return handle

    yield keep
    for handle in made:
        handle.undo()
