"""The decorators: ``request``, ``model_call``, ``retrieval`` and ``tool``.

Span names, static attributes and the provider adapter are settled once, when a function is
decorated; a call then costs one span start, one context attach/detach and one span end (plus
reading usage for model calls). The span is current while the function runs, so decorated calls
nest. Exceptions from the wrapped code are recorded and re-raised unchanged; failures in our own
code are swallowed and counted (see :func:`internal_errors`).
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from latencylens import semconv
from latencylens._guard import internal_error, internal_errors, mark_failed
from latencylens._stream import AsyncSpanStream, SpanStream, is_async_stream, is_sync_stream
from latencylens._version import __version__
from latencylens.providers import get_adapter
from latencylens.providers._base import ProviderAdapter

__all__ = ["internal_errors", "model_call", "request", "retrieval", "tool"]

F = TypeVar("F", bound=Callable[..., Any])

# A ProxyTracer until a provider is installed, then it follows the global provider.
_tracer = trace.get_tracer("latencylens", __version__)


def request(*, name: str | None = None) -> Callable[[F], F]:
    """Mark a request root (SERVER span) where no web framework instrumentation makes one."""

    def decorate(func: F) -> F:
        attributes = {semconv.SPAN_KIND: semconv.KIND_REQUEST}
        return _instrument(func, name or func.__qualname__, SpanKind.SERVER, attributes, None)

    return decorate


def retrieval(*, data_source: str | None = None, name: str | None = None) -> Callable[[F], F]:
    """Time a lookup (vector search, database read) that feeds the model."""

    def decorate(func: F) -> F:
        attributes = {
            semconv.SPAN_KIND: semconv.KIND_RETRIEVAL,
            semconv.GEN_AI_OPERATION_NAME: semconv.OPERATION_RETRIEVAL,
        }
        if data_source is not None:
            attributes[semconv.GEN_AI_DATA_SOURCE_ID] = data_source
        span_name = name or f"{semconv.OPERATION_RETRIEVAL} {data_source or func.__name__}"
        return _instrument(func, span_name, SpanKind.INTERNAL, attributes, None)

    return decorate


def tool(*, name: str | None = None) -> Callable[[F], F]:
    """Time a tool the app executes on the model's behalf."""

    def decorate(func: F) -> F:
        tool_name = name or func.__name__
        attributes = {
            semconv.SPAN_KIND: semconv.KIND_TOOL,
            semconv.GEN_AI_OPERATION_NAME: semconv.OPERATION_EXECUTE_TOOL,
            semconv.GEN_AI_TOOL_NAME: tool_name,
        }
        span_name = f"{semconv.OPERATION_EXECUTE_TOOL} {tool_name}"
        return _instrument(func, span_name, SpanKind.INTERNAL, attributes, None)

    return decorate


def model_call(
    *, provider: str, model: str | None = None, operation: str = semconv.OPERATION_CHAT
) -> Callable[[F], F]:
    """Time a call to an LLM provider and read usage and server timings from what it returns.

    The function returns the provider's response (SDK object or dict) or a stream; a stream is
    handed back wrapped, chunks unchanged, and the span stays open until it ends.
    """

    def decorate(func: F) -> F:
        attributes = {
            semconv.SPAN_KIND: semconv.KIND_MODEL,
            semconv.GEN_AI_OPERATION_NAME: operation,
            semconv.GEN_AI_PROVIDER_NAME: provider,
        }
        if model is not None:
            attributes[semconv.GEN_AI_REQUEST_MODEL] = model
        span_name = f"{operation} {model}" if model else operation
        adapter: ProviderAdapter | None = None
        try:
            adapter = get_adapter(provider)
        except Exception:
            internal_error(f"loading the {provider!r} adapter")
        return _instrument(func, span_name, SpanKind.CLIENT, attributes, adapter, model=True)

    return decorate


def _instrument(
    func: F,
    span_name: str,
    kind: SpanKind,
    attributes: dict[str, Any],
    adapter: ProviderAdapter | None,
    model: bool = False,
) -> F:
    """Pick the wrapper for ``func``'s shape: generator, async generator, coroutine or plain."""
    if inspect.isasyncgenfunction(func) or inspect.isgeneratorfunction(func):
        is_async = inspect.isasyncgenfunction(func)

        @functools.wraps(func)
        def generator_wrapper(*args: Any, **kwargs: Any) -> Any:
            span, start = _start(span_name, kind, attributes)
            if span is None:
                return func(*args, **kwargs)
            try:
                stream = func(*args, **kwargs)
            except BaseException as exc:
                _fail(span, exc)
                raise
            return _wrap_stream(stream, span, start, adapter, model, is_async)

        return cast(F, generator_wrapper)

    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            span, start = _start(span_name, kind, attributes)
            if span is None:
                return await func(*args, **kwargs)
            token = otel_context.attach(trace.set_span_in_context(span))
            try:
                result = await func(*args, **kwargs)
            except BaseException as exc:
                otel_context.detach(token)
                _fail(span, exc)
                raise
            otel_context.detach(token)
            if model:
                return _model_result(span, start, adapter, result)
            span.end()
            return result

        return cast(F, async_wrapper)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        span, start = _start(span_name, kind, attributes)
        if span is None:
            return func(*args, **kwargs)
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            otel_context.detach(token)
            _fail(span, exc)
            raise
        otel_context.detach(token)
        if model:
            return _model_result(span, start, adapter, result)
        span.end()
        return result

    return cast(F, wrapper)


def _start(name: str, kind: SpanKind, attributes: dict[str, Any]) -> tuple[Span | None, int]:
    """Start the span with an explicit start time, so stream offsets share its clock."""
    start = time.time_ns()
    try:
        return _tracer.start_span(name, kind=kind, attributes=attributes, start_time=start), start
    except Exception:
        internal_error("starting a span")
        return None, start


def _fail(span: Span, exc: BaseException) -> None:
    mark_failed(span, exc)
    span.end()


def _model_result(span: Span, start: int, adapter: ProviderAdapter | None, result: Any) -> Any:
    """Read usage from a response, or hand a stream back wrapped (the proxy then ends the span)."""
    try:
        if span.is_recording():
            if is_async_stream(result):
                return _wrap_stream(result, span, start, adapter, True, True)
            if is_sync_stream(result):
                return _wrap_stream(result, span, start, adapter, True, False)
            if adapter is not None:
                usage_attributes = adapter.extract(result).to_attributes()
                usage_attributes[semconv.GEN_AI_REQUEST_STREAM] = False
                span.set_attributes(usage_attributes)
    except Exception:
        _extract_failed(span)
    span.end()
    return result


def _wrap_stream(
    stream: Any, span: Span, start: int, adapter: ProviderAdapter | None, measure: bool, is_async: bool
) -> Any:
    """The stream behind a proxy that owns ``span``; the bare stream if that cannot be built."""
    try:
        if not span.is_recording():
            span.end()
            return stream
        state = adapter.new_stream_state() if adapter is not None else None
        if is_async:
            return AsyncSpanStream(stream, span, start, state, measure)
        return SpanStream(stream, span, start, state, measure)
    except Exception:
        _extract_failed(span)
        span.end()
        return stream


def _extract_failed(span: Span) -> None:
    internal_error("reading a model response")
    try:
        span.set_attribute(semconv.PROVIDER_EXTRACT_ERRORS, 1)
    except Exception:
        internal_error("marking extract errors")
