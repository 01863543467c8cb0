"""SDK unit tests: the in-memory OpenTelemetry pipeline (no servers: those are integration tests)."""

from sdk_fixtures import (  # noqa: F401  (fixtures, found by name)
    _session_exporter,
    allow_internal_errors,
    exporter,
    no_internal_errors,
    spans,
)
