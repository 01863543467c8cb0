"""The life of one traced call, written once: start → attach context → call → detach → settle or fail.

The decorators (``_wrap``), the SDK patches (``_instrument``) and the HTTP hook's routes (``_httpx``)
describe their calls with a :class:`CallShape` and run them through :func:`call` (or the wrapper
:func:`coroutine_function` makes, for a coroutine function). What happens once the call returns
depends on what it returned, never on how the function was declared (an SDK's async ``create`` is
often a plain function that returns a coroutine):

* a coroutine: awaited with the span's context attached, then settled like the rest;
* a sync iterator or an async iterable (model calls and generator functions): handed back behind a
  stream proxy that owns the span and times each chunk (``_stream``);
* an SDK stream helper's manager (``…StreamManager``, e.g. anthropic ``messages.stream()``): handed
  back behind a proxy that enters it with the span's context and meters the HTTP body the helper
  reads (``_body``), so every way of reading it (iteration, ``text_stream``, ``get_final_message``)
  is timed (any other context manager is an ordinary result);
* the HTTP response, or an SDK raw-response object around it (``with_raw_response``,
  ``with_streaming_response``): usage from the body if it is read, else the body is metered;
* anything else: usage read from it (model calls) and the span ended.

An exception from the call ends the span marked failed and reaches the caller unchanged. Failures in
this module are swallowed and counted (``_guard``); the caller then gets the result as it was.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import CoroutineType, TracebackType
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind

from latencylens import semconv
from latencylens._attributes import set_result_attributes
from latencylens._body import is_http_response, json_body, meter
from latencylens._callctx import CallRecord, attach, call_context, detach, flags
from latencylens._guard import internal_error, mark_failed
from latencylens._spanstart import plain_attributes, start_on
from latencylens._stream import AsyncSpanStream, SpanStream
from latencylens._version import __version__
from latencylens.providers._base import ProviderAdapter

# A ProxyTracer until a provider is installed, then it follows the global provider. Spans are
# started on the tracer it resolved to once it has (its ``_real_tracer``): forwarding through the
# proxy costs about 0.5 µs a call, a tenth of the decorator's own cost.
_tracer = trace.get_tracer("latencylens", __version__)
_time_ns = time.time_ns
_attach, _detach = attach, detach


class CallShape:
    """What the calls of one traced function are, settled once when it is decorated or patched.

    ``model``: a model call (usage read from the result, chunks timed, HTTP hook record kept).
    ``streams``: a returned iterator is handed back behind a proxy that keeps the span open (always
    for model calls; for other spans only when the function is a generator function).
    """

    __slots__ = ("adapter", "attributes", "kind", "model", "name", "plain", "streams")

    def __init__(
        self,
        name: str,
        kind: SpanKind,
        attributes: dict[str, Any],
        adapter: ProviderAdapter | None = None,
        *,
        model: bool = False,
        streams: bool = False,
    ) -> None:
        self.name = name
        self.kind = kind
        self.attributes = attributes
        self.adapter = adapter
        self.model = model
        self.streams = model or streams
        self.plain = plain_attributes(attributes)
        """Whether cleaning would leave the attributes as they are (see ``_spanstart``)."""

    def start(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Span | None, int]:
        """Start this call's span, or return ``(None, 0)`` to run the call untraced."""
        start = _time_ns()  # start_span, inlined: this runs on every decorated call
        tracer = getattr(_tracer, "_real_tracer", None) or _tracer
        return start_on(tracer, self.name, self.kind, self.attributes, self.plain, start), start


def start_span(name: str, kind: SpanKind, attributes: dict[str, Any]) -> tuple[Span, int]:
    """Start a span with an explicit start time, so stream offsets share its clock."""
    start = _time_ns()
    tracer = getattr(_tracer, "_real_tracer", None) or _tracer
    return start_on(tracer, name, kind, attributes, plain_attributes(attributes), start), start


def model_attributes(
    provider: str, model: str | None, operation: str, extra: dict[str, Any] | None = None
) -> tuple[str, dict[str, Any]]:
    """Span name and static attributes of a model call, as ``model_call`` and the hooks set them."""
    attributes: dict[str, Any] = {
        semconv.SPAN_KIND: semconv.KIND_MODEL,
        semconv.GEN_AI_OPERATION_NAME: operation,
        semconv.GEN_AI_PROVIDER_NAME: provider,
    }
    if model is not None:
        attributes[semconv.GEN_AI_REQUEST_MODEL] = model
    if extra:
        attributes.update(extra)
    return (f"{operation} {model}" if model else operation), attributes


def call(shape: CallShape, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run ``func(*args, **kwargs)`` as one traced call of ``shape``; same result, same exceptions."""
    try:
        span, start = shape.start(args, kwargs)
    except Exception:
        internal_error("starting a span")
        span, start = None, 0
    if span is None:
        return func(*args, **kwargs)
    record = CallRecord(span) if shape.model and flags.hooks_installed else None
    ctx = call_context(span, record)
    token = _attach(ctx)
    try:
        result = func(*args, **kwargs)
    except BaseException as exc:
        _detach(token)
        fail(span, exc)
        raise
    _detach(token)
    return settle(shape, span, start, result, record, False, ctx)


def coroutine_function(shape: CallShape, func: Callable[..., Any]) -> Callable[..., Any]:
    """A coroutine function that runs ``func``'s calls traced: the wrapper of a coroutine function.

    The span starts when the wrapper's coroutine starts running (so when the call does). Nothing of an
    ``async def`` runs before its coroutine is awaited, so the context is attached for the await only.
    The call runs in this one coroutine, not one awaiting another (:func:`awaited`'s body, written
    out): a coroutine less per call is measurable (``bench decorators``).
    """

    async def traced(*args: Any, **kwargs: Any) -> Any:
        try:
            span, start = shape.start(args, kwargs)
        except Exception:
            internal_error("starting a span")
            span, start = None, 0
        if span is None:
            return await func(*args, **kwargs)
        record = CallRecord(span) if shape.model and flags.hooks_installed else None
        try:
            awaitable = func(*args, **kwargs)
        except BaseException as exc:
            fail(span, exc)
            raise
        ctx = call_context(span, record)
        token = _attach(ctx)
        try:
            result = await awaitable
        except BaseException as exc:
            _detach(token)
            fail(span, exc)
            raise
        _detach(token)
        return settle(shape, span, start, result, record, True, ctx)

    return traced


def call_async(
    shape: CallShape, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """The awaitable of one traced call of coroutine function ``func`` (see :func:`coroutine_function`)."""
    return coroutine_function(shape, func)(*args, **kwargs)


async def awaited(shape: CallShape, span: Span, start: int, awaitable: Any, record: CallRecord | None) -> Any:
    """Await a traced call's coroutine inside its span's context, then settle what it gave."""
    ctx = call_context(span, record)
    token = _attach(ctx)
    try:
        result = await awaitable
    except BaseException as exc:
        _detach(token)
        fail(span, exc)
        raise
    _detach(token)
    return settle(shape, span, start, result, record, True, ctx)


def fail(span: Span, exc: BaseException) -> None:
    """Record the caller-visible exception on ``span`` and end it."""
    mark_failed(span, exc)
    span.end()


# What a result is, cached per type (attribute lookups on pydantic classes are slow when they miss).
_PLAIN, _HTTP, _COROUTINE, _SYNC, _ASYNC, _BOTH, _MANAGER = range(7)
"""Kinds of result; the first two are complete results (an httpx ``Response`` is ``_HTTP``)."""
_KIND_CACHE_LIMIT = 512
_kinds: dict[type, int] = {}


def result_kind(cls: type) -> int:
    """How a result of type ``cls`` is settled (see the module docstring)."""
    kind = _kinds.get(cls)
    if kind is None:
        sync = hasattr(cls, "__next__")
        asynchronous = hasattr(cls, "__anext__") or hasattr(cls, "__aiter__")
        if issubclass(cls, CoroutineType):
            kind = _COROUTINE
        elif sync and asynchronous:
            kind = _BOTH
        elif sync:
            kind = _SYNC
        elif asynchronous:
            kind = _ASYNC
        elif cls.__name__.endswith("StreamManager") and (
            hasattr(cls, "__enter__") or hasattr(cls, "__aenter__")
        ):
            kind = _MANAGER
        elif is_http_response(cls):
            kind = _HTTP
        else:
            kind = _PLAIN
        if len(_kinds) < _KIND_CACHE_LIMIT:  # classes made per call cannot grow it without bound
            _kinds[cls] = kind
    return kind


def settle(
    shape: CallShape,
    span: Span,
    start: int,
    result: Any,
    record: CallRecord | None,
    from_async: bool,
    ctx: Context,
) -> Any:
    """Hand ``result`` back (a stream or manager behind a proxy that now owns ``span``), ending the
    span when nothing is left to wait for. An object iterable both ways (another instrumentation's
    proxy, say) is taken the way the call was made: asynchronously from a coroutine. ``ctx``: the
    call's context (``call_context(span, record)``), which a stream proxy attaches per chunk."""
    try:
        kind = _kinds.get(type(result))
        if kind is None:
            kind = result_kind(type(result))
        if kind <= _HTTP:
            if shape.model and shape.adapter is not None and span.is_recording():
                response = result if kind == _HTTP else None
                if response is None and record is not None and record.response is not None:
                    response = _wrapped_response(result, record.response)
                if _read_model_result(span, start, shape.adapter, result, response, record):
                    return result  # a metered body or a wrapped container stream now owns the span
        elif kind == _COROUTINE:
            return awaited(shape, span, start, result, record)
        elif span.is_recording():
            if kind == _MANAGER:
                if shape.model:
                    return ManagedStream(result, span, start, shape.adapter, record)
            elif shape.streams:
                is_async = kind == _ASYNC or (kind == _BOTH and from_async)
                return _stream_proxy(shape, span, start, result, record, is_async, ctx)
    except Exception:
        _extract_failed(span)
    span.end()
    return result


def _stream_proxy(
    shape: CallShape,
    span: Span,
    start: int,
    stream: Any,
    record: CallRecord | None,
    is_async: bool,
    ctx: Context,
) -> Any:
    """``stream`` behind a proxy that owns ``span``."""
    adapter = shape.adapter
    state = adapter.new_stream_state() if adapter is not None and shape.model else None
    if is_async:
        return AsyncSpanStream(stream, span, start, state, shape.model, record, ctx)
    return SpanStream(stream, span, start, state, shape.model, record, ctx)


def _read_model_result(
    span: Span, start: int, adapter: ProviderAdapter, result: Any, response: Any, record: CallRecord | None
) -> bool:
    """Set the usage of a complete result on ``span``; True when something else now owns the span
    (a metered HTTP body, or the proxy put into Bedrock's ``{"stream": ...}`` container).
    ``response``: the httpx response when ``result`` is it or an SDK's raw response around it."""
    if response is not None:
        if meter(response, span, start, adapter):
            return True
        body = json_body(response.content) if hasattr(response, "_content") else None
        attributes = adapter.response_attributes(body, response.headers)
    else:
        if adapter.find_stream(result) is not None:
            stream = SpanStream(result["stream"], span, start, adapter.new_stream_state(), True, record)
            result["stream"] = stream
            return True
        attributes = adapter.response_attributes(result, record.headers if record is not None else None)
    attributes[semconv.GEN_AI_REQUEST_STREAM] = False
    set_result_attributes(span, attributes)
    return False


def _wrapped_response(result: Any, response: Any) -> Any:
    """``response`` (what the HTTP hook saw for this call) when ``result`` is an SDK's raw-response
    object around it (``with_raw_response``, ``with_streaming_response``), else None."""
    return response if getattr(result, "__dict__", _NO_DICT).get("http_response") is response else None


_NO_DICT: dict[str, Any] = {}


def _extract_failed(span: Span) -> None:
    internal_error("reading a model response")
    try:
        span.set_attribute(semconv.PROVIDER_EXTRACT_ERRORS, 1)
    except Exception:
        internal_error("marking extract errors")


class ManagedStream:
    """An SDK stream helper's manager (``with client.messages.stream(...) as stream:``).

    Entering it runs the helper's request with the model span's context attached, so the HTTP hook
    sees the call; the response body is then metered (``_body``) and the meter ends the span when the
    body ends or is closed. If the body could not be metered (no HTTP hook, body already read), the
    span ends when the ``with`` block does. Everything else is forwarded to the manager.
    """

    __slots__ = ("_ll_adapter", "_ll_inner", "_ll_owned", "_ll_record", "_ll_span", "_ll_start")

    def __init__(
        self,
        inner: Any,
        span: Span,
        start: int,
        adapter: ProviderAdapter | None,
        record: CallRecord | None,
    ) -> None:
        self._ll_inner = inner
        self._ll_span = span
        self._ll_start = start
        self._ll_adapter = adapter
        self._ll_record = record
        self._ll_owned = True
        """True while this proxy, not a body meter, must end the span."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_ll_"):
            raise AttributeError(name)
        return getattr(self._ll_inner, name)

    def __repr__(self) -> str:
        return f"<latencylens managed stream of {self._ll_inner!r}>"

    def __del__(self) -> None:
        if getattr(self, "_ll_owned", False):
            self._ll_end()

    def __enter__(self) -> Any:
        token = _attach(call_context(self._ll_span, self._ll_record))
        try:
            value = self._ll_inner.__enter__()
        except BaseException as exc:
            _detach(token)
            self._ll_fail(exc)
            raise
        _detach(token)
        self._ll_entered()
        return value

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        try:
            return self._ll_inner.__exit__(exc_type, exc, tb)
        finally:
            self._ll_exited(exc)

    async def __aenter__(self) -> Any:
        token = _attach(call_context(self._ll_span, self._ll_record))
        try:
            value = await self._ll_inner.__aenter__()
        except BaseException as exc:
            _detach(token)
            self._ll_fail(exc)
            raise
        _detach(token)
        self._ll_entered()
        return value

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        try:
            return await self._ll_inner.__aexit__(exc_type, exc, tb)
        finally:
            self._ll_exited(exc)

    def _ll_entered(self) -> None:
        """Hand the span to a meter on the response the helper is about to read."""
        try:
            record, adapter = self._ll_record, self._ll_adapter
            response = record.response if record is not None else None
            if response is not None and adapter is not None:
                if meter(response, self._ll_span, self._ll_start, adapter):
                    self._ll_owned = False
        except Exception:
            internal_error("metering a stream helper's response")

    def _ll_exited(self, exc: BaseException | None) -> None:
        if not self._ll_owned:
            return
        if exc is not None:
            self._ll_fail(exc)
        else:
            self._ll_end()

    def _ll_fail(self, exc: BaseException) -> None:
        if self._ll_owned:
            self._ll_owned = False
            fail(self._ll_span, exc)

    def _ll_end(self) -> None:
        if self._ll_owned:
            self._ll_owned = False
            self._ll_span.end()
