"""What the decoders say is wrong: the error that refuses an export whole, and the reasons that
reject one span (or the spans of one resource) while the rest of the export is kept."""

from __future__ import annotations

from typing import Final


class OtlpDecodeError(ValueError):
    """The body is not a valid OTLP trace export request; the message says why."""


MALFORMED_SPAN: Final = "that are not valid OTLP spans (malformed, or fields of the wrong type)"
MALFORMED_RESOURCE: Final = "under a resource that is not a valid OTLP resource"
