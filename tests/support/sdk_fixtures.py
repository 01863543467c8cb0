"""Fixtures for the SDK tests (unit and integration conftests import them): one real in-memory
OpenTelemetry pipeline and local HTTP servers.

OpenTelemetry lets a process set its global provider once, so the session installs one SDK provider
(or, if another suite got there first, attaches an in-memory exporter to that one). The decorators
use a ProxyTracer that follows the global provider, so they export here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from latencylens import _guard


@pytest.fixture(scope="session")
def _session_exporter() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    ours = TracerProvider()
    trace.set_tracer_provider(ours)
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        pytest.fail(f"global tracer provider is not an SDK provider: {provider!r}")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


@pytest.fixture
def exporter(_session_exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    """The in-memory exporter, empty at the start of the test."""
    _session_exporter.clear()
    yield _session_exporter
    _session_exporter.clear()


@pytest.fixture
def spans(exporter: InMemorySpanExporter) -> Callable[[], list[ReadableSpan]]:
    """Finished spans so far, in end order."""
    return lambda: list(exporter.get_finished_spans())


@pytest.fixture(autouse=True)
def no_internal_errors(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail any test in which LatencyLens swallowed an error, unless it expects some."""
    before = _guard.internal_errors()
    yield
    if "allow_internal_errors" not in request.fixturenames:
        assert _guard.internal_errors() == before, "LatencyLens swallowed an internal error"


@pytest.fixture
def allow_internal_errors() -> None:
    """Opt out of :func:`no_internal_errors` for tests that provoke internal failures."""


@dataclass
class Captured:
    """Requests a :func:`serve` server received."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""


Responder = Callable[[str, dict[str, str], bytes], tuple[int, dict[str, str], list[bytes]]]


@pytest.fixture
def serve() -> Iterator[Callable[[Responder], Captured]]:
    """Start a stdlib HTTP server on 127.0.0.1 (random port) answering POSTs with ``responder``.

    ``responder(path, headers, body)`` returns status, headers and body parts; each part is
    written and flushed on its own, so SSE streams arrive chunk by chunk.
    """
    servers: list[ThreadingHTTPServer] = []

    def start(responder: Responder) -> Captured:
        captured = Captured()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {key.lower(): value for key, value in self.headers.items()}
                captured.requests.append({"path": self.path, "headers": headers, "body": body})
                status, out_headers, parts = responder(self.path, headers, body)
                self.send_response(status)
                for key, value in out_headers.items():
                    self.send_header(key, value)
                if "content-length" not in {key.lower() for key in out_headers}:
                    self.send_header("connection", "close")
                self.end_headers()
                for part in parts:
                    self.wfile.write(part)
                    self.wfile.flush()
                self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        captured.url = f"http://127.0.0.1:{server.server_address[1]}"
        return captured

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
