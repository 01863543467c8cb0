"""Timing an HTTP response body while somebody else reads it.

Some calls hand back a response whose body is read later, by the caller or by an SDK object we never
see: the HTTP hook's own routes, an SDK's ``with_raw_response`` / ``with_streaming_response`` and
stream helpers such as anthropic's ``messages.stream()``. :func:`meter` swaps such a response's byte
stream for one that passes every block through unchanged and feeds a sink:

* Server-Sent Events and newline-delimited JSON: each event goes to the adapter's stream state, so
  TTFT, gaps and usage are measured as for a parsed stream (``_stream._StreamProxy``);
* any other body (JSON): kept, and read by the adapter once complete.

The sink ends the span when the body ends, fails or is closed, exactly once.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry.trace import Span

from latencylens import semconv
from latencylens._attributes import set_result_attributes
from latencylens._guard import internal_error, mark_failed
from latencylens._stream import _StreamProxy
from latencylens.providers._base import ProviderAdapter

_HTTPX_MODULES = ("httpx", "httpx2")
_SSE = "text/event-stream"
_NDJSON = ("application/x-ndjson", "application/jsonl", "application/json-lines")


def is_http_response(cls: type) -> bool:
    """Whether ``cls`` is the ``Response`` of httpx or of its fork httpx2."""
    return cls.__name__ == "Response" and cls.__module__.partition(".")[0] in _HTTPX_MODULES


def json_body(content: bytes) -> Any:
    """A read body as JSON, or None when it is empty or not a JSON object/array."""
    stripped = content.lstrip()[:1]
    if stripped not in (b"{", b"["):
        return None
    return json.loads(content)


def meter(response: Any, span: Span, start_ns: int, adapter: ProviderAdapter) -> bool:
    """Time ``response``'s unread body into ``span``, which the meter then owns and ends.

    Returns False, changing nothing, when the body is already read or being read, or the response's
    byte stream is not an httpx one: the caller then ends the span itself.
    """
    if hasattr(response, "_content") or getattr(response, "is_stream_consumed", False):
        return False
    module = sys.modules.get(type(response).__module__.partition(".")[0])
    stream = getattr(response, "stream", None)
    if module is None or stream is None:
        return False
    if isinstance(stream, module.AsyncByteStream):
        is_async, base = True, module.AsyncByteStream
    elif isinstance(stream, module.SyncByteStream):
        is_async, base = False, module.SyncByteStream
    else:
        return False
    headers = response.headers
    content_type = headers.get("content-type", "")
    sink: _EventSink | _BodySink
    if _SSE in content_type or any(kind in content_type for kind in _NDJSON):
        state = adapter.new_stream_state()
        sink = _EventSink(_StreamProxy(None, span, start_ns, state, True), _SSE not in content_type)
    else:
        sink = _BodySink(span, adapter, headers)
    response.stream = _metered_class(base, is_async)(stream, sink)
    return True


class _EventSink:
    """Splits complete SSE events (``data:`` lines) or NDJSON lines out of the body and records each
    JSON payload on the meter; ``data: [DONE]`` marks the stream completed whatever follows."""

    __slots__ = ("_buffer", "_meter", "_ndjson")

    def __init__(self, meter: _StreamProxy, ndjson: bool) -> None:
        self._meter = meter
        self._ndjson = ndjson
        self._buffer = b""

    def feed(self, block: bytes) -> None:
        block = block.replace(b"\r\n", b"\n")
        buffer = self._buffer + block if self._buffer else block
        if self._ndjson:
            *lines, self._buffer = buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    self._record(line)
            return
        meter = self._meter
        while True:
            end = buffer.find(b"\n\n")
            if end < 0:
                break
            event, buffer = buffer[:end], buffer[end + 2 :]
            for line in event.split(b"\n"):
                if line.startswith(b"data:"):
                    payload = line[5:].strip()
                    if payload == b"[DONE]":  # the server said so: completed, whatever the reader does
                        meter._ll_finish(True, None)
                    elif payload:
                        self._record(payload)
        self._buffer = buffer

    def _record(self, payload: bytes) -> None:
        try:
            chunk = json.loads(payload)
        except ValueError:
            chunk = None
        self._meter._ll_record(chunk)

    def finish(self, completed: bool, exc: BaseException | None) -> None:
        self._meter._ll_finish(completed, exc)


class _BodySink:
    """Keeps a whole (JSON) body and reads usage from it once it is complete."""

    __slots__ = ("_adapter", "_done", "_headers", "_parts", "_span")

    def __init__(self, span: Span, adapter: ProviderAdapter, headers: Mapping[str, str]) -> None:
        self._span = span
        self._adapter = adapter
        self._headers = headers
        self._parts: list[bytes] = []
        self._done = False

    def feed(self, block: bytes) -> None:
        self._parts.append(block)

    def finish(self, completed: bool, exc: BaseException | None) -> None:
        if self._done:
            return
        self._done = True
        span = self._span
        try:
            body = json_body(b"".join(self._parts)) if completed else None
            attributes = self._adapter.response_attributes(body, self._headers)
            attributes[semconv.GEN_AI_REQUEST_STREAM] = False
            set_result_attributes(span, attributes)
            if exc is not None and not isinstance(exc, GeneratorExit):
                mark_failed(span, exc)
        except Exception:
            internal_error("reading a metered response body")
            span.set_attribute(semconv.PROVIDER_EXTRACT_ERRORS, 1)
        finally:
            span.end()


def _feed(self: Any, block: bytes) -> None:
    try:
        self._sink.feed(block)
    except Exception:
        internal_error("reading a streamed body")


def _init(self: Any, inner: Any, sink: _EventSink | _BodySink) -> None:
    self._inner = inner
    self._sink = sink


def _sync_iter(self: Any) -> Iterator[bytes]:
    try:
        for block in self._inner:
            _feed(self, block)
            yield block
    except BaseException as exc:
        self._sink.finish(False, exc)
        raise
    self._sink.finish(True, None)


def _sync_close(self: Any) -> None:
    try:
        self._inner.close()
    finally:
        self._sink.finish(False, None)


async def _async_iter(self: Any) -> Any:
    try:
        async for block in self._inner:
            _feed(self, block)
            yield block
    except BaseException as exc:
        self._sink.finish(False, exc)
        raise
    self._sink.finish(True, None)


async def _async_close(self: Any) -> None:
    try:
        await self._inner.aclose()
    finally:
        self._sink.finish(False, None)


_SYNC_MEMBERS = {"__init__": _init, "__iter__": _sync_iter, "close": _sync_close}
_ASYNC_MEMBERS = {"__init__": _init, "__aiter__": _async_iter, "aclose": _async_close}
_classes: dict[tuple[type, bool], type] = {}


def _metered_class(base: type, is_async: bool) -> type:
    """A byte stream of httpx flavour ``base`` that passes blocks through to the reader."""
    key = (base, is_async)
    if key not in _classes:
        members = _ASYNC_MEMBERS if is_async else _SYNC_MEMBERS
        _classes[key] = type("MeteredByteStream", (base,), dict(members))
    return _classes[key]
