"""Fixtures for provider tests: the shared replay server. The in-memory OTel pipeline (``spans``)
and the internal-error check come from the SDK fixtures (``../conftest.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from provider_replay import ReplayServer


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
