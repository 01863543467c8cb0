"""Decorators on plain and async functions: span tree, attributes, errors, return values."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

import latencylens
from latencylens import _guard, semconv

Spans = Callable[[], list[ReadableSpan]]


class Boom(Exception):
    pass


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def by_name(spans: list[ReadableSpan]) -> dict[str, ReadableSpan]:
    return {span.name: span for span in spans}


def test_nested_sync_calls_form_a_tree(spans: Spans) -> None:
    @latencylens.retrieval(data_source="docs-index")
    def search(query: str) -> list[str]:
        return [query]

    @latencylens.tool(name="weather")
    def weather() -> str:
        return "sunny"

    @latencylens.model_call(provider="openai", model="gpt-4.1")
    def ask() -> dict[str, Any]:
        return {
            "id": "chatcmpl-1",
            "model": "gpt-4.1-2025",
            "usage": {"prompt_tokens": 3, "completion_tokens": 4},
        }

    @latencylens.request(name="POST /chat")
    def handle() -> str:
        search("q")
        weather()
        ask()
        return "done"

    assert handle() == "done"
    named = by_name(spans())
    assert set(named) == {"POST /chat", "retrieval docs-index", "execute_tool weather", "chat gpt-4.1"}
    root = named["POST /chat"]
    assert root.parent is None
    assert root.kind is SpanKind.SERVER
    assert root.attributes == {semconv.SPAN_KIND: semconv.KIND_REQUEST}
    for child in ("retrieval docs-index", "execute_tool weather", "chat gpt-4.1"):
        assert parent_id(named[child]) == root.context.span_id
        assert named[child].context.trace_id == root.context.trace_id
    assert named["retrieval docs-index"].kind is SpanKind.INTERNAL
    assert named["retrieval docs-index"].attributes == {
        semconv.SPAN_KIND: semconv.KIND_RETRIEVAL,
        semconv.GEN_AI_OPERATION_NAME: "retrieval",
        semconv.GEN_AI_DATA_SOURCE_ID: "docs-index",
    }
    assert named["execute_tool weather"].attributes == {
        semconv.SPAN_KIND: semconv.KIND_TOOL,
        semconv.GEN_AI_OPERATION_NAME: "execute_tool",
        semconv.GEN_AI_TOOL_NAME: "weather",
    }
    model = named["chat gpt-4.1"]
    assert model.kind is SpanKind.CLIENT
    assert dict(model.attributes or {}) == {
        semconv.SPAN_KIND: semconv.KIND_MODEL,
        semconv.GEN_AI_OPERATION_NAME: "chat",
        semconv.GEN_AI_PROVIDER_NAME: "openai",
        semconv.GEN_AI_REQUEST_MODEL: "gpt-4.1",
        semconv.GEN_AI_REQUEST_STREAM: False,
        semconv.GEN_AI_RESPONSE_ID: "chatcmpl-1",
        semconv.GEN_AI_RESPONSE_MODEL: "gpt-4.1-2025",
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 3,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 4,
        semconv.PROVIDER_FIELDS_REPORTED: ("usage.prompt_tokens", "usage.completion_tokens"),
    }


def test_default_names_come_from_the_function(spans: Spans) -> None:
    @latencylens.retrieval()
    def lookup() -> None:
        return None

    @latencylens.tool()
    def calculator() -> None:
        return None

    @latencylens.request()
    def endpoint() -> None:
        return None

    @latencylens.model_call(provider="openai")
    def generate() -> None:
        return None

    lookup(), calculator(), endpoint(), generate()
    names = [span.name for span in spans()]
    assert names == [
        "retrieval lookup",
        "execute_tool calculator",
        "test_default_names_come_from_the_function.<locals>.endpoint",
        "chat",
    ]
    assert spans()[1].attributes[semconv.GEN_AI_TOOL_NAME] == "calculator"  # type: ignore[index]


def test_request_inside_an_active_span_becomes_its_child(spans: Spans) -> None:
    @latencylens.request(name="inner request")
    def handle() -> None:
        return None

    with trace.get_tracer("test").start_as_current_span("outer") as outer:
        handle()
    inner = by_name(spans())["inner request"]
    assert inner.parent is not None and inner.parent.span_id == outer.get_span_context().span_id


def test_results_are_returned_unchanged_and_functools_wraps_applies() -> None:
    sentinel = object()

    @latencylens.tool(name="t")
    def give(value: object) -> object:
        """Docstring kept."""
        return value

    assert give(sentinel) is sentinel
    assert give.__name__ == "give"
    assert give.__doc__ == "Docstring kept."
    assert give.__wrapped__ is not None  # type: ignore[attr-defined]


def test_exceptions_propagate_unchanged_and_mark_the_span(spans: Spans) -> None:
    error = Boom("no luck")

    @latencylens.tool(name="fails")
    def fails() -> None:
        raise error

    with pytest.raises(Boom) as raised:
        fails()
    assert raised.value is error
    (span,) = spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes[semconv.ERROR_TYPE] == f"{__name__}.Boom"  # type: ignore[index]
    assert [event.name for event in span.events] == ["exception"]
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_builtin_exception_type_is_bare(spans: Spans) -> None:
    @latencylens.model_call(provider="groq", model="m")
    def fails() -> None:
        raise ValueError("bad")

    with pytest.raises(ValueError):
        fails()
    assert spans()[0].attributes[semconv.ERROR_TYPE] == "ValueError"  # type: ignore[index]


async def test_async_functions_nest_and_return_results(spans: Spans) -> None:
    sentinel = object()

    @latencylens.retrieval(data_source="kv")
    async def fetch() -> object:
        await asyncio.sleep(0)
        return sentinel

    @latencylens.model_call(provider="groq", model="llama")
    async def ask() -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"usage": {"prompt_tokens": 1, "completion_tokens": 2, "queue_time": 0.5}}

    @latencylens.request(name="async root")
    async def handle() -> object:
        results = await asyncio.gather(fetch(), ask())
        return results[0]

    assert await handle() is sentinel
    named = by_name(spans())
    root = named["async root"]
    for child in ("retrieval kv", "chat llama"):
        assert parent_id(named[child]) == root.context.span_id
    model = named["chat llama"].attributes or {}
    assert model[semconv.PROVIDER_QUEUE_NS] == 500_000_000
    assert model[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 2


async def test_async_exception_propagates_unchanged(spans: Spans) -> None:
    error = Boom("async")

    @latencylens.request(name="root")
    async def handle() -> None:
        await asyncio.sleep(0)
        raise error

    with pytest.raises(Boom) as raised:
        await handle()
    assert raised.value is error
    assert spans()[0].status.status_code is StatusCode.ERROR


def test_decorators_need_keyword_arguments() -> None:
    def plain() -> None:
        return None

    with pytest.raises(TypeError):
        latencylens.tool(plain)  # type: ignore[arg-type, call-arg]


class RaisingAdapter:
    """An adapter whose every method fails, standing in for a provider shape bug."""

    name = "broken"

    def extract(self, response: Any, headers: Any = None) -> Any:
        raise RuntimeError("adapter bug")

    def new_stream_state(self) -> Any:
        raise RuntimeError("adapter bug")


def test_failing_adapter_never_reaches_the_caller(
    spans: Spans, monkeypatch: pytest.MonkeyPatch, allow_internal_errors: None
) -> None:
    monkeypatch.setattr(latencylens._wrap, "get_adapter", lambda name: RaisingAdapter())
    response = {"usage": {"prompt_tokens": 1}}

    @latencylens.model_call(provider="broken", model="m")
    def call() -> dict[str, Any]:
        return response

    @latencylens.model_call(provider="broken", model="m")
    def stream() -> Any:
        return iter([1, 2])

    before = _guard.internal_errors()
    assert call() is response
    chunks = stream()
    assert list(chunks) == [1, 2]
    assert _guard.internal_errors() == before + 2
    for span in spans():
        assert span.attributes[semconv.PROVIDER_EXTRACT_ERRORS] == 1  # type: ignore[index]
        assert span.end_time is not None
