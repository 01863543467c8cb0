"""Auto-instrumentation of the official provider SDKs: patch their model-call methods once.

Each ``instrument_<sdk>()`` wraps the SDK's model-call methods (``create``, and the ``stream()``
helper where it does not go through ``create``) so every call gets a model span read by that
provider's adapter, and installs the HTTP hook (``_httpx``) so the request carries the span's
``traceparent`` and the adapter sees the response. The wrapper is chosen by what a call returns, not
by how the SDK declares the method (see ``_lifecycle``): an SDK's async ``create`` is often a plain
function returning a coroutine. ``with_raw_response`` and ``with_streaming_response`` call the
patched ``create`` and are covered too, when first used after instrumenting (the SDK binds them on
first use). Calling ``instrument_*`` again returns the same handle and patches nothing; ``handle()``
(or ``handle.undo()``) restores the original methods. A call made inside another model call (a
function decorated with ``model_call``) is left to that span (no double counting). A missing SDK
raises :class:`MissingDependencyError` naming the package to install.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import Span, SpanKind

from latencylens import _httpx, semconv
from latencylens._callctx import current_call
from latencylens._lifecycle import CallShape, call, coroutine_function, model_attributes, start_span
from latencylens.providers import get_adapter
from latencylens.providers._base import ProviderAdapter

Target = tuple[str, str, str, str]
"""(module, class, method, gen_ai operation)."""

_CHAT = semconv.OPERATION_CHAT


@dataclass(frozen=True)
class _Sdk:
    """An instrumentable SDK: its provider name, pip package, the oldest version whose methods sit
    where ``targets`` says (also the lower bound in ``pyproject.toml``), and the methods to wrap."""

    provider: str
    package: str
    minimum: str
    targets: list[Target]


_SDKS: dict[str, _Sdk] = {
    "openai": _Sdk(
        "openai",
        "openai",
        "1.66",
        [
            ("openai.resources.chat.completions.completions", "Completions", "create", _CHAT),
            ("openai.resources.chat.completions.completions", "AsyncCompletions", "create", _CHAT),
            ("openai.resources.responses.responses", "Responses", "create", _CHAT),
            ("openai.resources.responses.responses", "AsyncResponses", "create", _CHAT),
        ],
    ),
    "anthropic": _Sdk(
        "anthropic",
        "anthropic",
        "0.41",
        [
            ("anthropic.resources.messages.messages", "Messages", "create", _CHAT),
            ("anthropic.resources.messages.messages", "AsyncMessages", "create", _CHAT),
            # The stream helper posts by itself rather than through ``create``.
            ("anthropic.resources.messages.messages", "Messages", "stream", _CHAT),
            ("anthropic.resources.messages.messages", "AsyncMessages", "stream", _CHAT),
        ],
    ),
    "groq": _Sdk(
        "groq",
        "groq",
        "0.11",
        [
            ("groq.resources.chat.completions", "Completions", "create", _CHAT),
            ("groq.resources.chat.completions", "AsyncCompletions", "create", _CHAT),
        ],
    ),
    "cerebras": _Sdk(
        "cerebras",
        "cerebras-cloud-sdk",
        "1.0",
        [
            ("cerebras.cloud.sdk.resources.chat.completions", "CompletionsResource", "create", _CHAT),
            ("cerebras.cloud.sdk.resources.chat.completions", "AsyncCompletionsResource", "create", _CHAT),
        ],
    ),
    "ollama": _Sdk(
        "ollama",
        "ollama",
        "0.4",
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
    spec = _SDKS[sdk]
    classes = []
    for module_name, class_name, method, operation in spec.targets:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise MissingDependencyError(_missing(sdk, spec, module_name)) from exc
        cls = getattr(module, class_name, None)
        if cls is not None and hasattr(cls, method):
            classes.append((cls, method, operation))
    adapter = get_adapter(spec.provider)
    handle = Instrumentation(sdk)
    for cls, method, operation in classes:
        original = cls.__dict__.get(method) or getattr(cls, method)
        setattr(cls, method, _wrap_method(original, _SdkCall(adapter, operation)))
        handle._restore.append(functools.partial(setattr, cls, method, original))
    _httpx.install()
    handle._restore.append(_httpx.uninstall)
    _active[sdk] = handle
    return handle


def _missing(sdk: str, spec: _Sdk, module_name: str) -> str:
    """What to install: the package, or a newer version when an older one lacks ``module_name``."""
    needs = f"latencylens.instrument_{sdk}() needs"
    top = module_name.partition(".")[0]
    try:
        installed = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        installed = False
    if not installed:
        return f"{needs} the {spec.package!r} package: pip install {spec.package}"
    try:
        version = importlib.metadata.version(spec.package)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return (
        f"{needs} {spec.package}>={spec.minimum} ({version} is installed, without {module_name}): "
        f"pip install -U '{spec.package}>={spec.minimum}'"
    )


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


class _SdkCall(CallShape):
    """A patched SDK method: the span is named after the ``model`` argument of each call."""

    __slots__ = ("operation",)

    def __init__(self, adapter: ProviderAdapter, operation: str) -> None:
        super().__init__(operation, SpanKind.CLIENT, {}, adapter, model=True)
        self.operation = operation

    def start(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Span | None, int]:
        if current_call() is not None:  # inside a decorated model call: that span counts it
            return None, 0
        model = kwargs.get("model")
        provider = self.adapter.name if self.adapter is not None else ""
        model_name = model if isinstance(model, str) else None
        name, attributes = model_attributes(provider, model_name, self.operation)
        return start_span(name, SpanKind.CLIENT, attributes)


def _wrap_method(original: Callable[..., Any], shape: CallShape) -> Callable[..., Any]:
    """A method that runs ``original`` as a traced call; same result, same exceptions. It stays a
    coroutine function when ``original`` is one."""
    if inspect.iscoroutinefunction(original):
        return functools.wraps(original)(coroutine_function(shape, original))

    @functools.wraps(original)
    def method(*args: Any, **kwargs: Any) -> Any:
        return call(shape, original, args, kwargs)

    return method


def instrument_openai() -> Instrumentation:
    """Model spans for ``openai`` Chat Completions and Responses calls (sync and async)."""
    return instrument_sdk("openai")


def instrument_anthropic() -> Instrumentation:
    """Model spans for ``anthropic`` Messages calls and the ``messages.stream()`` helper (sync and async)."""
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
