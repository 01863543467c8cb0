"""Replay tests: the SDK's in-memory OpenTelemetry pipeline, for the sender's spans."""

from sdk_fixtures import _session_exporter, exporter, spans  # noqa: F401  (fixtures, found by name)
