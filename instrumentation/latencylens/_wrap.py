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
import json
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from latencylens import semconv
from latencylens._callctx import CallRecord, call_context, flags
from latencylens._guard import internal_error, internal_errors, mark_failed
from latencylens._stream import AsyncSpanStream, SpanStream, stream_shape
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
            record = CallRecord(span) if model and flags.hooks_installed else None
            token = otel_context.attach(call_context(span, record))
            try:
                result = await func(*args, **kwargs)
            except BaseException as exc:
                otel_context.detach(token)
                _fail(span, exc)
                raise
            otel_context.detach(token)
            if model:
                return finish_model_call(span, start, adapter, result, record, from_async=True)
            span.end()
            return result

        return cast(F, async_wrapper)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        span, start = _start(span_name, kind, attributes)
        if span is None:
            return func(*args, **kwargs)
        record = CallRecord(span) if model and flags.hooks_installed else None
        token = otel_context.attach(call_context(span, record))
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            otel_context.detach(token)
            _fail(span, exc)
            raise
        otel_context.detach(token)
        if model:
            return finish_model_call(span, start, adapter, result, record)
        span.end()
        return result

    return cast(F, wrapper)


def start_model_span(
    provider: str, model: str | None, operation: str, extra: dict[str, Any] | None = None
) -> tuple[Span | None, int]:
    """Start a model-call span the way :func:`model_call` does, for the SDK and HTTP hooks."""
    attributes: dict[str, Any] = {
        semconv.SPAN_KIND: semconv.KIND_MODEL,
        semconv.GEN_AI_OPERATION_NAME: operation,
        semconv.GEN_AI_PROVIDER_NAME: provider,
    }
    if model is not None:
        attributes[semconv.GEN_AI_REQUEST_MODEL] = model
    if extra:
        attributes.update(extra)
    return _start(f"{operation} {model}" if model else operation, SpanKind.CLIENT, attributes)


def fail_model_span(span: Span, exc: BaseException) -> None:
    """Record the caller-visible exception on ``span`` and end it."""
    _fail(span, exc)


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


def finish_model_call(
    span: Span,
    start: int,
    adapter: ProviderAdapter | None,
    result: Any,
    record: CallRecord | None = None,
    from_async: bool = False,
) -> Any:
    """Read usage from a response, or hand a stream back wrapped (the proxy then ends the span).

    ``result`` is returned as is; only a stream is exchanged for a proxy that yields the same
    chunks (for Bedrock's ``{"stream": ...}`` container, the proxy replaces the container's stream).
    An object iterable both ways (another instrumentation's proxy, say) is taken the way the call
    was made: asynchronously from a coroutine, synchronously otherwise.
    """
    try:
        if span.is_recording():
            sync, asynchronous = stream_shape(type(result))
            if asynchronous and (from_async or not sync):
                return _wrap_stream(result, span, start, adapter, True, True, record)
            if sync:
                return _wrap_stream(result, span, start, adapter, True, False, record)
            if adapter is not None:
                if adapter.find_stream(result) is not None:
                    inner = result["stream"]
                    result["stream"] = _wrap_stream(inner, span, start, adapter, True, False, record)
                    return result
                body, headers = _body_and_headers(result, record)
                usage_attributes = adapter.response_attributes(body, headers)
                usage_attributes[semconv.GEN_AI_REQUEST_STREAM] = False
                span.set_attributes(usage_attributes)
    except Exception:
        _extract_failed(span)
    span.end()
    return result


def _body_and_headers(result: Any, record: CallRecord | None) -> tuple[Any, Any]:
    """The parsed body and HTTP headers: an httpx ``Response`` returned as is gives both."""
    headers = record.headers if record is not None else None
    cls = type(result)
    if cls.__name__ == "Response" and cls.__module__.startswith(("httpx", "httpx2")):
        try:
            content = result.content
        except Exception:  # body not read (a streamed response): headers only
            return None, result.headers
        return (json.loads(content) if content else None), result.headers
    return result, headers


def _wrap_stream(
    stream: Any,
    span: Span,
    start: int,
    adapter: ProviderAdapter | None,
    measure: bool,
    is_async: bool,
    record: CallRecord | None = None,
) -> Any:
    """The stream behind a proxy that owns ``span``; the bare stream if that cannot be built."""
    try:
        if not span.is_recording():
            span.end()
            return stream
        state = adapter.new_stream_state() if adapter is not None else None
        if is_async:
            return AsyncSpanStream(stream, span, start, state, measure, record)
        return SpanStream(stream, span, start, state, measure, record)
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
