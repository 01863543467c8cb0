"""The HTTP hook: ``Client.send`` / ``AsyncClient.send`` of httpx (and its fork httpx2) wrapped once.

Inside a model call (decorated or auto-instrumented; see ``_callctx``) the hook injects the W3C
``traceparent`` of the model span into the outgoing request, so a vLLM or TGI server with OTLP
tracing parents its span under ours, and hands the response headers to the adapter (TGI's
``x-queue-time``, OpenAI's ``openai-processing-ms``). Outside a model call, a request to a base URL
registered with :func:`add_route` becomes a model call of its own: span, traceparent, usage from the
JSON body or, for a Server-Sent-Events stream, per-event timing while the caller reads it.
Everything the hook does is guarded; the caller gets the same response or exception either way.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span

from latencylens import semconv
from latencylens._callctx import CallRecord, call_context, current_call, flags
from latencylens._guard import internal_error, mark_failed
from latencylens._stream import _StreamProxy
from latencylens.providers._base import ProviderAdapter

HTTPX_MODULES = ("httpx", "httpx2")
"""Modules whose clients are patched when importable (SDKs built on either are covered)."""


@dataclass(frozen=True)
class Route:
    """Requests whose URL starts with ``base_url`` are model calls served by ``adapter``."""

    base_url: str
    adapter: ProviderAdapter
    operation: str


_routes: list[Route] = []
_originals: dict[str, tuple[Any, Any, Any]] = {}  # module → (module, sync send, async send)
_users = 0


def add_route(route: Route) -> None:
    _routes.append(route)


def remove_route(route: Route) -> None:
    if route in _routes:
        _routes.remove(route)


def install() -> None:
    """Patch every importable httpx flavour (counted: the last :func:`uninstall` restores)."""
    global _users
    _users += 1
    flags.hooks_installed = True
    for name in HTTPX_MODULES:
        if name in _originals:
            continue
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        sync_send, async_send = module.Client.send, module.AsyncClient.send
        _originals[name] = (module, sync_send, async_send)
        module.Client.send = _make_sync(sync_send, module)
        module.AsyncClient.send = _make_async(async_send, module)


def uninstall() -> None:
    global _users
    _users = max(0, _users - 1)
    if _users:
        return
    for module, sync_send, async_send in _originals.values():
        module.Client.send = sync_send
        module.AsyncClient.send = async_send
    _originals.clear()


def _match(url: Any) -> Route | None:
    text = str(url)
    for route in _routes:
        if text.startswith(route.base_url):
            return route
    return None


def _inject(request: Any, record: CallRecord) -> None:
    """Write the model span's context into the request as ``traceparent``."""
    try:
        from opentelemetry import propagate  # loads propagator entry points: only once a hook runs

        propagate.inject(request.headers, context=trace.set_span_in_context(record.span))
    except Exception:
        internal_error("injecting traceparent")


def _make_sync(original: Callable[..., Any], module: Any) -> Callable[..., Any]:
    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        record = current_call()
        if record is not None:
            _inject(request, record)
            response = original(self, request, *args, **kwargs)
            record.headers = response.headers
            return response
        route = _match(request.url) if _routes else None
        if route is None:
            return original(self, request, *args, **kwargs)
        span, start, record = _start(route, request)
        if span is None:
            return original(self, request, *args, **kwargs)
        token = otel_context.attach(call_context(span, record))
        _inject(request, record)  # type: ignore[arg-type]
        try:
            response = original(self, request, *args, **kwargs)
        except BaseException as exc:
            otel_context.detach(token)
            mark_failed(span, exc)
            span.end()
            raise
        otel_context.detach(token)
        _finish(span, start, route, response, module, is_async=False)
        return response

    send.__wrapped__ = original  # type: ignore[attr-defined]
    return send


def _make_async(original: Callable[..., Any], module: Any) -> Callable[..., Any]:
    async def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        record = current_call()
        if record is not None:
            _inject(request, record)
            response = await original(self, request, *args, **kwargs)
            record.headers = response.headers
            return response
        route = _match(request.url) if _routes else None
        if route is None:
            return await original(self, request, *args, **kwargs)
        span, start, record = _start(route, request)
        if span is None:
            return await original(self, request, *args, **kwargs)
        token = otel_context.attach(call_context(span, record))
        _inject(request, record)  # type: ignore[arg-type]
        try:
            response = await original(self, request, *args, **kwargs)
        except BaseException as exc:
            otel_context.detach(token)
            mark_failed(span, exc)
            span.end()
            raise
        otel_context.detach(token)
        _finish(span, start, route, response, module, is_async=True)
        return response

    send.__wrapped__ = original  # type: ignore[attr-defined]
    return send


def _start(route: Route, request: Any) -> tuple[Span | None, int, CallRecord | None]:
    from latencylens._wrap import start_model_span

    model = None
    try:
        body = request.content
        if body[:1] == b"{":
            model = json.loads(body).get("model")
    except Exception:  # a streamed or non-JSON request body: no model name to read
        model = None
    attributes = {semconv.SERVER_ADDRESS: request.url.host}
    if request.url.port is not None:
        attributes[semconv.SERVER_PORT] = request.url.port
    span, start = start_model_span(
        route.adapter.name, model if isinstance(model, str) else None, route.operation, attributes
    )
    return span, start, CallRecord(span) if span is not None else None


def _finish(span: Span, start: int, route: Route, response: Any, module: Any, *, is_async: bool) -> None:
    """Non-streamed: read usage now and end the span. Streamed: meter the body until it closes."""
    from latencylens._wrap import finish_model_call

    try:
        streamed = not hasattr(response, "_content")
        if streamed and "text/event-stream" in response.headers.get("content-type", ""):
            meter = _StreamProxy(None, None, span, start, route.adapter.new_stream_state(), True)
            base = module.AsyncByteStream if is_async else module.SyncByteStream
            response.stream = _metered_stream_class(base, is_async)(response.stream, meter)
            return
    except Exception:
        internal_error("metering a streamed response")
    finish_model_call(span, start, route.adapter, response)


_stream_classes: dict[tuple[type, bool], type] = {}


def _metered_stream_class(base: type, is_async: bool) -> type:
    """A byte stream of httpx flavour ``base`` that passes bytes through and times SSE events."""
    key = (base, is_async)
    if key not in _stream_classes:
        members = _ASYNC_MEMBERS if is_async else _SYNC_MEMBERS
        _stream_classes[key] = type("MeteredByteStream", (base,), dict(members))
    return _stream_classes[key]


def _feed(self: Any, block: bytes) -> None:
    """Split complete SSE events out of the buffer and record each ``data:`` JSON payload."""
    buffer = self._buffer + block if self._buffer else block
    meter = self._meter
    while True:
        end = buffer.find(b"\n\n")
        if end < 0:
            break
        event, buffer = buffer[:end], buffer[end + 2 :]
        for line in event.split(b"\n"):
            if line.startswith(b"data:"):
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    meter._ll_finish(
                        True, None
                    )  # the server said so: completed, whatever the reader does next
                elif payload:
                    try:
                        meter._ll_record(json.loads(payload))
                    except ValueError:
                        meter._ll_record(None)
    self._buffer = buffer


def _init(self: Any, inner: Any, meter: _StreamProxy) -> None:
    self._inner = inner
    self._meter = meter
    self._buffer = b""


def _sync_iter(self: Any) -> Iterator[bytes]:
    try:
        for block in self._inner:
            try:
                _feed(self, block.replace(b"\r\n", b"\n"))
            except Exception:
                internal_error("reading a streamed event")
            yield block
    except BaseException as exc:
        self._meter._ll_finish(False, exc)
        raise
    self._meter._ll_finish(True, None)


def _sync_close(self: Any) -> None:
    try:
        self._inner.close()
    finally:
        self._meter._ll_finish(False, None)


async def _async_iter(self: Any) -> Any:
    try:
        async for block in self._inner:
            try:
                _feed(self, block.replace(b"\r\n", b"\n"))
            except Exception:
                internal_error("reading a streamed event")
            yield block
    except BaseException as exc:
        self._meter._ll_finish(False, exc)
        raise
    self._meter._ll_finish(True, None)


async def _async_close(self: Any) -> None:
    try:
        await self._inner.aclose()
    finally:
        self._meter._ll_finish(False, None)


_SYNC_MEMBERS = {"__init__": _init, "__iter__": _sync_iter, "close": _sync_close}
_ASYNC_MEMBERS = {"__init__": _init, "__aiter__": _async_iter, "aclose": _async_close}
