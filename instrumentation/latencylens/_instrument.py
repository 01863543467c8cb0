"""Auto-instrumentation of the official provider SDKs: patch their ``create`` / ``chat`` methods once.

Each ``instrument_<sdk>()`` wraps the SDK's model-call methods so every call gets a model span read
by that provider's adapter, and installs the HTTP hook (``_httpx``) so the request carries the span's
``traceparent`` and the adapter sees the response headers. Calling it again returns the same handle
and patches nothing; ``handle()`` (or ``handle.undo()``) restores the original methods. A call made
inside a function already decorated with ``model_call`` is left to that span (no double counting).
A missing SDK raises :class:`MissingDependencyError` naming the package to install.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context

from latencylens import _httpx, semconv
from latencylens._callctx import CallRecord, call_context, current_call
from latencylens._guard import internal_error
from latencylens._wrap import fail_model_span, finish_model_call, start_model_span
from latencylens.providers import get_adapter
from latencylens.providers._base import ProviderAdapter

Target = tuple[str, str, str, str]
"""(module, class, method, gen_ai operation)."""

_CHAT = semconv.OPERATION_CHAT
_SDKS: dict[str, tuple[str, str, list[Target]]] = {
    # sdk key: (provider name, pip package, methods)
    "openai": (
        "openai",
        "openai",
        [
            ("openai.resources.chat.completions.completions", "Completions", "create", _CHAT),
            ("openai.resources.chat.completions.completions", "AsyncCompletions", "create", _CHAT),
            ("openai.resources.responses.responses", "Responses", "create", _CHAT),
            ("openai.resources.responses.responses", "AsyncResponses", "create", _CHAT),
        ],
    ),
    "anthropic": (
        "anthropic",
        "anthropic",
        [
            ("anthropic.resources.messages.messages", "Messages", "create", _CHAT),
            ("anthropic.resources.messages.messages", "AsyncMessages", "create", _CHAT),
        ],
    ),
    "groq": (
        "groq",
        "groq",
        [
            ("groq.resources.chat.completions", "Completions", "create", _CHAT),
            ("groq.resources.chat.completions", "AsyncCompletions", "create", _CHAT),
        ],
    ),
    "cerebras": (
        "cerebras",
        "cerebras-cloud-sdk",
        [
            ("cerebras.cloud.sdk.resources.chat.completions", "CompletionsResource", "create", _CHAT),
            ("cerebras.cloud.sdk.resources.chat.completions", "AsyncCompletionsResource", "create", _CHAT),
        ],
    ),
    "ollama": (
        "ollama",
        "ollama",
        [
            ("ollama._client", "Client", "chat", _CHAT),
            ("ollama._client", "Client", "generate", semconv.OPERATION_TEXT_COMPLETION),
            ("ollama._client", "AsyncClient", "chat", _CHAT),
            ("ollama._client", "AsyncClient", "generate", semconv.OPERATION_TEXT_COMPLETION),
        ],
    ),
}


class MissingDependencyError(ImportError):
    """An ``instrument_*`` function was called without the SDK it instruments installed."""


@dataclass
class Instrumentation:
    """What one ``instrument_*`` call changed; call it (or ``.undo()``) to restore everything."""

    key: str
    _restore: list[Callable[[], None]] = field(default_factory=list)
    active: bool = True

    def undo(self) -> None:
        if not self.active:
            return
        self.active = False
        for restore in reversed(self._restore):
            restore()
        self._restore.clear()
        _active.pop(self.key, None)

    __call__ = undo


_active: dict[str, Instrumentation] = {}


def instrument_sdk(sdk: str) -> Instrumentation:
    """Instrument one SDK from ``_SDKS`` (idempotent)."""
    existing = _active.get(sdk)
    if existing is not None:
        return existing
    provider, package, targets = _SDKS[sdk]
    classes = []
    for module_name, class_name, method, operation in targets:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise MissingDependencyError(
                f"latencylens.instrument_{sdk}() needs the {package!r} package: pip install {package}"
            ) from exc
        cls = getattr(module, class_name, None)
        if cls is not None and hasattr(cls, method):
            classes.append((cls, method, operation))
    adapter = get_adapter(provider)
    handle = Instrumentation(sdk)
    for cls, method, operation in classes:
        original = cls.__dict__.get(method) or getattr(cls, method)
        setattr(cls, method, _wrap_method(original, adapter, operation))
        handle._restore.append(functools.partial(setattr, cls, method, original))
    _httpx.install()
    handle._restore.append(_httpx.uninstall)
    _active[sdk] = handle
    return handle


def instrument_httpx(
    base_urls: list[str], provider: str = "openai", operation: str = semconv.OPERATION_CHAT
) -> Instrumentation:
    """Treat every httpx request to one of ``base_urls`` as a model call served by ``provider``.

    Covers OpenAI-compatible servers (vLLM, llama.cpp, TGI, ...) reached through any httpx-based
    client. The same arguments twice return the same handle.
    """
    key = f"httpx:{provider}:{','.join(sorted(base_urls))}"
    existing = _active.get(key)
    if existing is not None:
        return existing
    adapter = get_adapter(provider)
    handle = Instrumentation(key)
    for base_url in base_urls:
        route = _httpx.Route(base_url.rstrip("/"), adapter, operation)
        _httpx.add_route(route)
        handle._restore.append(functools.partial(_httpx.remove_route, route))
    _httpx.install()
    handle._restore.append(_httpx.uninstall)
    _active[key] = handle
    return handle


def _wrap_method(
    original: Callable[..., Any], adapter: ProviderAdapter, operation: str
) -> Callable[..., Any]:
    """A method that runs ``original`` inside a model span; same result, same exceptions."""
    if inspect.iscoroutinefunction(original):

        @functools.wraps(original)
        async def async_method(*args: Any, **kwargs: Any) -> Any:
            if current_call() is not None:
                return await original(*args, **kwargs)
            span, start = _start(adapter, operation, kwargs)
            if span is None:
                return await original(*args, **kwargs)
            record = CallRecord(span)
            token = otel_context.attach(call_context(span, record))
            try:
                result = await original(*args, **kwargs)
            except BaseException as exc:
                otel_context.detach(token)
                fail_model_span(span, exc)
                raise
            otel_context.detach(token)
            return finish_model_call(span, start, adapter, result, record, from_async=True)

        return async_method

    @functools.wraps(original)
    def method(*args: Any, **kwargs: Any) -> Any:
        if current_call() is not None:
            return original(*args, **kwargs)
        span, start = _start(adapter, operation, kwargs)
        if span is None:
            return original(*args, **kwargs)
        record = CallRecord(span)
        token = otel_context.attach(call_context(span, record))
        try:
            result = original(*args, **kwargs)
        except BaseException as exc:
            otel_context.detach(token)
            fail_model_span(span, exc)
            raise
        otel_context.detach(token)
        return finish_model_call(span, start, adapter, result, record)

    return method


def _start(adapter: ProviderAdapter, operation: str, kwargs: dict[str, Any]) -> tuple[Any, int]:
    model = kwargs.get("model")
    try:
        return start_model_span(adapter.name, model if isinstance(model, str) else None, operation)
    except Exception:
        internal_error("starting an SDK model span")
        return None, 0


def instrument_openai() -> Instrumentation:
    """Model spans for ``openai`` Chat Completions and Responses calls (sync and async)."""
    return instrument_sdk("openai")


def instrument_anthropic() -> Instrumentation:
    """Model spans for ``anthropic`` Messages calls (sync and async)."""
    return instrument_sdk("anthropic")


def instrument_groq() -> Instrumentation:
    """Model spans for ``groq`` Chat Completions calls (sync and async)."""
    return instrument_sdk("groq")


def instrument_cerebras() -> Instrumentation:
    """Model spans for ``cerebras-cloud-sdk`` Chat Completions calls (sync and async)."""
    return instrument_sdk("cerebras")


def instrument_ollama() -> Instrumentation:
    """Model spans for ``ollama`` ``chat`` and ``generate`` (sync and async clients)."""
    return instrument_sdk("ollama")
