"""What the HTTP hook and the model-call span share while one model call is in flight.

The httpx hook (see ``_httpx``) cannot see the model span's adapter, and the span cannot see the
HTTP response (its headers, or its body when an SDK hands back a raw response or a stream helper);
a :class:`CallRecord` stored in the OpenTelemetry context next to the span joins them. Stream
proxies attach the same context while the SDK pulls chunks, so an SDK that only sends its request on
the first ``next()`` (Ollama) is covered too. A record is only made when a hook is installed
(``flags.hooks_installed``), so plain decorated calls pay one boolean check.

:func:`attach` and :func:`detach` are OpenTelemetry's, minus their Python layers when its runtime
context is the default one (a ``ContextVar``): a traced call attaches once and a stream once per
chunk, and the two layers cost about 2 % of a short stream (``bench decorators``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span

_CALL_KEY = otel_context.create_key("latencylens-model-call")
_logger = logging.getLogger("opentelemetry.context")


def _runtime_context_var() -> ContextVar[Context] | None:
    """The ``ContextVar`` OpenTelemetry keeps the current context in, when it is its default runtime
    context (``OTEL_PYTHON_CONTEXT`` can name another: that one is used through the API)."""
    try:
        from opentelemetry.context import _RUNTIME_CONTEXT
        from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
    except ImportError:
        return None
    if type(_RUNTIME_CONTEXT) is not ContextVarsRuntimeContext:
        return None
    var = getattr(_RUNTIME_CONTEXT, "_current_context", None)
    return var if isinstance(var, ContextVar) else None


_var = _runtime_context_var()
attach: Callable[[Context], Token[Context]] = otel_context.attach if _var is None else _var.set
reset: Callable[[Token[Context]], None] = otel_context.detach if _var is None else _var.reset
"""Undo an :func:`attach`; raises where ``ContextVar.reset`` does (a token from another context):
per-chunk loops call it in a ``try`` of their own, everything else calls :func:`detach`."""


def detach(token: Token[Context]) -> None:
    """``opentelemetry.context.detach``: a token that cannot be reset here (one made in another
    context) is logged, as there, never raised into the caller."""
    try:
        reset(token)
    except Exception:
        detach_failed()


def detach_failed() -> None:
    """Log a token :func:`reset` refused, with the message the OpenTelemetry API logs."""
    _logger.exception("Failed to detach context")


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
