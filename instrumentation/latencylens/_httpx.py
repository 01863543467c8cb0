"""The HTTP hook: ``Client.send`` / ``AsyncClient.send`` of httpx (and its fork httpx2) wrapped once.

Inside a model call (decorated or auto-instrumented; see ``_callctx``) the hook injects the W3C
``traceparent`` of the model span into the outgoing request, so a vLLM or TGI server with OTLP
tracing parents its span under ours, and hands the response headers to the adapter (TGI's
``x-queue-time``, OpenAI's ``openai-processing-ms``). Outside a model call, a request to a base URL
registered with :func:`add_route` becomes a model call of its own, run through ``_lifecycle`` like
every other: span, traceparent, usage from the JSON body or, for a body read later (a Server-Sent
Events stream, say), timing while the caller reads it (``_body``). Everything the hook does is
guarded; the caller gets the same response or exception either way.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from latencylens import semconv
from latencylens._callctx import current_call, flags
from latencylens._guard import internal_error
from latencylens._lifecycle import CallShape, call, call_async, model_attributes, start_span
from latencylens.providers._base import ProviderAdapter

HTTPX_MODULES = ("httpx", "httpx2")
"""Modules whose clients are patched when importable (SDKs built on either are covered)."""


class Route(CallShape):
    """Requests whose URL starts with ``base_url`` are model calls served by ``adapter``."""

    __slots__ = ("base_url", "operation")

    def __init__(self, base_url: str, adapter: ProviderAdapter, operation: str) -> None:
        super().__init__(operation, SpanKind.CLIENT, {}, adapter, model=True)
        self.base_url = base_url
        self.operation = operation

    def start(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Span | None, int]:
        """The span of ``send(client, request, ...)``, named after the JSON body's ``model``; the
        request then carries its ``traceparent``."""
        request = args[1]
        model = None
        try:
            body = request.content
            if body[:1] == b"{":
                model = json.loads(body).get("model")
        except Exception:  # a streamed or non-JSON request body: no model name to read
            model = None
        extra: dict[str, Any] = {semconv.SERVER_ADDRESS: request.url.host}
        if request.url.port is not None:
            extra[semconv.SERVER_PORT] = request.url.port
        provider = self.adapter.name if self.adapter is not None else ""
        name, attributes = model_attributes(
            provider, model if isinstance(model, str) else None, self.operation, extra
        )
        span, start = start_span(name, SpanKind.CLIENT, attributes)
        _inject(request, span)
        return span, start


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
        module.Client.send = _make_sync(sync_send)
        module.AsyncClient.send = _make_async(async_send)


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


def _inject(request: Any, span: Span) -> None:
    """Write the model span's context into the request as ``traceparent``."""
    try:
        from opentelemetry import propagate  # loads propagator entry points: only once a hook runs

        propagate.inject(request.headers, context=trace.set_span_in_context(span))
    except Exception:
        internal_error("injecting traceparent")


def _make_sync(original: Callable[..., Any]) -> Callable[..., Any]:
    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        record = current_call()
        if record is not None:
            _inject(request, record.span)
            response = original(self, request, *args, **kwargs)
            record.response = response  # headers: server timings; body: metered if need be
            return response
        route = _match(request.url) if _routes else None
        if route is None:
            return original(self, request, *args, **kwargs)
        return call(route, original, (self, request, *args), kwargs)

    send.__wrapped__ = original  # type: ignore[attr-defined]
    return send


def _make_async(original: Callable[..., Any]) -> Callable[..., Any]:
    async def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        record = current_call()
        if record is not None:
            _inject(request, record.span)
            response = await original(self, request, *args, **kwargs)
            record.response = response  # headers: server timings; body: metered if need be
            return response
        route = _match(request.url) if _routes else None
        if route is None:
            return await original(self, request, *args, **kwargs)
        return await call_async(route, original, (self, request, *args), kwargs)

    send.__wrapped__ = original  # type: ignore[attr-defined]
    return send
