"""What the HTTP hook and the model-call span share while one model call is in flight.

The httpx hook (see ``_httpx``) cannot see the model span's adapter, and the span cannot see the
HTTP response (its headers, or its body when an SDK hands back a raw response or a stream helper);
a :class:`CallRecord` stored in the OpenTelemetry context next to the span joins them. Stream
proxies attach the same context while the SDK pulls chunks, so an SDK that only sends its request on
the first ``next()`` (Ollama) is covered too. A record is only made when a hook is installed
(``flags.hooks_installed``), so plain decorated calls pay one boolean check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span

_CALL_KEY = otel_context.create_key("latencylens-model-call")


class _Flags:
    hooks_installed = False
    """True once any ``instrument_*`` installed the HTTP hook (never reset: records are cheap)."""


flags = _Flags()


class CallRecord:
    """The model span (whose context goes out as ``traceparent``, even if an SDK opened a child span
    of its own in between) and the HTTP response, filled in by the HTTP hook: its headers carry
    server timings, and an SDK's raw response or stream helper is timed by metering its body."""

    __slots__ = ("response", "span")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.response: Any = None
        """The last httpx (or httpx2) ``Response`` the call received, once it has arrived."""

    @property
    def headers(self) -> Mapping[str, str] | None:
        """The HTTP response headers, once a response has arrived."""
        response = self.response
        return None if response is None else response.headers


def call_context(span: Span, record: CallRecord | None) -> Context:
    """A context with ``span`` current and, when given, ``record`` as the current model call."""
    ctx = trace.set_span_in_context(span)
    if record is not None:
        ctx = otel_context.set_value(_CALL_KEY, record, ctx)
    return ctx


def current_call() -> CallRecord | None:
    """The record of the model call running in this context, if a hook-aware call made one."""
    record = otel_context.get_value(_CALL_KEY)
    return record if isinstance(record, CallRecord) else None
