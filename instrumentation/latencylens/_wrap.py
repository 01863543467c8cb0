"""The decorators: ``request``, ``model_call``, ``retrieval`` and ``tool``.

Span names, static attributes and the provider adapter are settled once, when a function is
decorated; a call then runs through ``_lifecycle.call``: one span start, one context attach/detach
and one span end (plus reading usage for model calls). The span is current while the function runs,
so decorated calls nest. Exceptions from the wrapped code are recorded and re-raised unchanged;
failures in our own code are swallowed and counted (see :func:`internal_errors`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast

from opentelemetry.trace import SpanKind

from latencylens import semconv
from latencylens._guard import internal_error, internal_errors
from latencylens._lifecycle import CallShape, call, coroutine_function
from latencylens.providers import get_adapter
from latencylens.providers._base import ProviderAdapter

__all__ = ["internal_errors", "model_call", "request", "retrieval", "tool"]

F = TypeVar("F", bound=Callable[..., Any])


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
    """Wrap ``func``; the wrapper stays a coroutine function when ``func`` is one (frameworks check).

    What the call returns decides the rest (see ``_lifecycle``); a generator function's spans last
    while its generator is iterated.
    """
    generator = inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func)
    shape = CallShape(span_name, kind, attributes, adapter, model=model, streams=generator)

    if inspect.iscoroutinefunction(func):
        return cast(F, functools.wraps(func)(coroutine_function(shape, func)))

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return call(shape, func, args, kwargs)

    return cast(F, wrapper)
