"""The span processor ``configure()`` installs: batched OTLP export with a bounded shutdown.

OpenTelemetry's ``BatchSpanProcessor`` exports what is queued when the app shuts down, and the OTLP
exporter retries a failed export with exponential backoff (1, 2, 4 s, ...) until its export timeout
(10 s): with the collector down, an app exits seconds late. Here shutdown still exports what is
queued, but once ``timeout_s`` has passed the exporter is stopped: the retry being waited on is
abandoned, later batches are dropped (the exporter logs them), and shutdown returns. A collector
that accepts the spans is unaffected: the export finishes long before the bound.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class _StoppableExporter(SpanExporter):
    """Forwards to ``inner`` until stopped; stopping shuts ``inner`` down, which ends its retry wait."""

    def __init__(self, inner: SpanExporter) -> None:
        self._inner = inner
        self._stopped = False
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._stopped:
            return SpanExportResult.FAILURE
        return self._inner.export(spans)

    def stop(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._inner.shutdown()

    def shutdown(self) -> None:
        self.stop()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class BoundedShutdownSpanProcessor(BatchSpanProcessor):
    """A ``BatchSpanProcessor`` whose ``shutdown()`` gives up exporting after ``timeout_s`` seconds."""

    def __init__(self, exporter: SpanExporter, timeout_s: float) -> None:
        self._ll_exporter = _StoppableExporter(exporter)
        self._ll_timeout_s = timeout_s
        super().__init__(self._ll_exporter)

    def shutdown(self) -> None:
        timer = threading.Timer(self._ll_timeout_s, self._ll_exporter.stop)
        timer.daemon = True
        timer.start()
        try:
            super().shutdown()
        finally:
            timer.cancel()
