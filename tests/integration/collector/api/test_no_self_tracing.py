"""The collector must not trace its own requests: a process that both exports to it and runs it
(the demo) would otherwise feed every export back into itself."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import sys
    import httpx
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from latencylens_collector.api.server import ServiceThread
    from latencylens_collector.settings import Settings

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    service = ServiceThread(Settings(clickhouse_dsn="chdb://" + sys.argv[1], port=0, environ={})).start()
    try:
        assert httpx.get(service.url + "/healthz").status_code == 200
        assert httpx.post(
            service.url + "/v1/traces", content=b"", headers={"Content-Type": "application/x-protobuf"}
        ).status_code == 200
        assert httpx.get(service.url + "/api/requests").status_code == 200
    finally:
        service.stop()
    names = [span.name for span in exporter.get_finished_spans()]
    print(names)
    sys.exit(1 if names else 0)
    """
)


def test_collector_requests_create_no_spans(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
