"""What the receivers say is wrong: the error that refuses an export whole, the reasons that
reject one span (or the spans of one resource) while the rest of the export is kept, and the
answer to a signal other than traces."""

from __future__ import annotations

from typing import Final


class OtlpDecodeError(ValueError):
    """The body is not a valid OTLP trace export request; the message says why."""


MALFORMED_SPAN: Final = "that are not valid OTLP spans (malformed, or fields of the wrong type)"
MALFORMED_RESOURCE: Final = "under a resource that is not a valid OTLP resource"


def traces_only(signal: str, where: str) -> str:
    """The answer to an export of ``signal`` (``metrics``, ``logs``): an SDK given one endpoint for
    every signal (``OTEL_EXPORTER_OTLP_ENDPOINT``) sends them all here, and its log shows this."""
    upper = signal.upper()
    return (
        f"LatencyLens receives traces only ({where}), not {signal}: send {signal} to another "
        f"backend (OTEL_EXPORTER_OTLP_{upper}_ENDPOINT) or turn them off (OTEL_{upper}_EXPORTER=none)"
    )
