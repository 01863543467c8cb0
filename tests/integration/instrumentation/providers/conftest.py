"""Fixtures for provider tests: the in-memory OTel pipeline and the shared replay server.

The global tracer provider can be set once per process; if another suite set it first, the
in-memory exporter is attached to that one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from provider_replay import ReplayServer

from latencylens import _guard


@pytest.fixture(scope="session")
def _provider_exporter() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    trace.set_tracer_provider(TracerProvider())
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        pytest.fail(f"global tracer provider is not an SDK provider: {provider!r}")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


@pytest.fixture
def spans(_provider_exporter: InMemorySpanExporter) -> Iterator[Callable[[], list[ReadableSpan]]]:
    """Finished spans of this test, in end order."""
    _provider_exporter.clear()
    yield lambda: list(_provider_exporter.get_finished_spans())
    _provider_exporter.clear()


@pytest.fixture(autouse=True)
def no_internal_errors(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test in which LatencyLens swallowed an error, unless it asks for ``allow_internal_errors``."""
    before = _guard.internal_errors()
    yield
    if "allow_internal_errors" not in request.fixturenames:
        assert _guard.internal_errors() == before, "LatencyLens swallowed an internal error"


@pytest.fixture
def allow_internal_errors() -> None:
    """Opt out of :func:`no_internal_errors`."""


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
