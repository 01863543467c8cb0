"""Fixtures for the tests that guard what the SDK's and the collector's speed depends on.

They check properties (what runs per call, what each flush sends to ClickHouse), never timings.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture(scope="session")
def _perf_exporter() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    trace.set_tracer_provider(TracerProvider())  # ignored if another suite set one first
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        pytest.fail(f"global tracer provider is not an SDK provider: {provider!r}")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


@pytest.fixture
def spans(_perf_exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    """The in-memory exporter of the global SDK provider, empty at the start of the test."""
    _perf_exporter.clear()
    yield _perf_exporter
