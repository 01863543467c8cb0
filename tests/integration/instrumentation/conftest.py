"""SDK integration tests: the in-memory OpenTelemetry pipeline and local HTTP servers (``serve``)."""

from sdk_fixtures import (  # noqa: F401  (fixtures, found by name)
    _session_exporter,
    allow_internal_errors,
    exporter,
    no_internal_errors,
    serve,
    spans,
)
