"""The call lifecycle decides by what a call returns, not by how the function is declared.

SDKs wrap their async methods in plain functions that return a coroutine (``inspect`` then says
"not a coroutine function"); stream helpers return a context manager; the decorators and SDK
patches must treat each the way it will be consumed, and never change what the caller gets.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

import latencylens
from latencylens import semconv

Spans = Callable[[], list[ReadableSpan]]

RESPONSE = {
    "id": "chatcmpl-123",
    "model": "gpt-4.1",
    "choices": [{"index": 0, "message": {"content": "Hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29},
}
SLEEP_S = 0.030


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def duration_ns(span: ReadableSpan) -> int:
    assert span.start_time is not None and span.end_time is not None
    return span.end_time - span.start_time


async def answer_later() -> dict[str, Any]:
    await asyncio.sleep(SLEEP_S)
    return RESPONSE


def sdk_style_create() -> Coroutine[Any, Any, dict[str, Any]]:
    """Like openai's ``AsyncCompletions.create`` behind ``required_args``: a plain function."""
    return answer_later()


async def test_plain_function_returning_a_coroutine_is_timed_over_the_await(spans: Spans) -> None:
    call = latencylens.model_call(provider="openai", model="gpt-4.1")(sdk_style_create)
    assert not inspect.iscoroutinefunction(call)  # declared as the SDK declares it

    assert await call() is RESPONSE
    (span,) = spans()
    assert duration_ns(span) >= SLEEP_S * 1e9  # the span covers the await, not just the call
    values = attrs(span)
    assert values[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 19  # usage read from the awaited response
    assert values[semconv.GEN_AI_REQUEST_STREAM] is False


async def test_async_function_stays_a_coroutine_function_and_the_span_starts_at_the_await(
    spans: Spans,
) -> None:
    @latencylens.model_call(provider="openai", model="gpt-4.1")
    async def create() -> dict[str, Any]:
        return await answer_later()

    assert inspect.iscoroutinefunction(create)  # frameworks (FastAPI) check this
    pending = create()
    time.sleep(SLEEP_S)  # created but not awaited yet: not part of the call
    before_await = time.time_ns()
    assert await pending is RESPONSE
    (span,) = spans()
    assert span.start_time is not None and span.start_time >= before_await


async def test_tool_returning_a_coroutine_spans_the_await(spans: Spans) -> None:
    @latencylens.tool(name="lookup")
    def lookup() -> Coroutine[Any, Any, dict[str, Any]]:
        return answer_later()

    assert await lookup() is RESPONSE
    (span,) = spans()
    assert duration_ns(span) >= SLEEP_S * 1e9


async def test_exception_from_the_awaited_coroutine_propagates_and_marks_the_span(spans: Spans) -> None:
    error = ConnectionError("reset")

    async def failing() -> None:
        await asyncio.sleep(0)
        raise error

    call = latencylens.model_call(provider="openai", model="m")(lambda: failing())
    with pytest.raises(ConnectionError) as raised:
        await call()
    assert raised.value is error
    (span,) = spans()
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)[semconv.ERROR_TYPE] == "ConnectionError"


class FakeStreamManager:
    """Shaped like an SDK stream helper's manager (anthropic ``MessageStreamManager``)."""

    def __init__(self) -> None:
        self.entered = self.exited = False

    def __enter__(self) -> list[str]:
        self.entered = True
        return ["a", "b"]

    def __exit__(self, *exc_info: object) -> None:
        self.exited = True


def test_stream_manager_without_an_http_hook_spans_the_with_block(spans: Spans) -> None:
    inner = FakeStreamManager()
    stream = latencylens.model_call(provider="anthropic", model="m")(lambda: inner)
    manager = stream()
    assert spans() == []  # the call only made the manager: the span waits for the block
    with manager as items:
        assert items == ["a", "b"]  # what the manager gives, unchanged
        time.sleep(SLEEP_S)
    assert inner.entered and inner.exited
    (span,) = spans()
    assert duration_ns(span) >= SLEEP_S * 1e9
    assert manager.entered is True  # other attributes are the manager's


def test_stream_manager_block_raising_marks_the_span(spans: Spans) -> None:
    manager = latencylens.model_call(provider="anthropic", model="m")(FakeStreamManager)()
    with pytest.raises(KeyError), manager:
        raise KeyError("x")
    (span,) = spans()
    assert span.status.status_code is StatusCode.ERROR


def test_stream_manager_never_entered_ends_its_span_when_dropped(spans: Spans) -> None:
    manager = latencylens.model_call(provider="anthropic", model="m")(FakeStreamManager)()
    del manager
    gc.collect()
    (span,) = spans()
    assert span.status.status_code is StatusCode.UNSET


def test_context_managers_that_are_not_stream_helpers_are_returned_as_is(spans: Spans) -> None:
    class Session:
        def __enter__(self) -> Session:
            return self

        def __exit__(self, *exc_info: object) -> None:
            pass

    session = Session()
    assert latencylens.model_call(provider="openai", model="m")(lambda: session)() is session
    assert len(spans()) == 1  # ended at once: an arbitrary context manager is not a stream


def test_attach_and_detach_are_opentelemetrys_on_its_default_context() -> None:
    from opentelemetry import context as otel_context
    from opentelemetry import trace

    from latencylens import _callctx

    # the default runtime context: the calls go to its ContextVar, with no layer of ours in between
    var = otel_context._RUNTIME_CONTEXT._current_context  # type: ignore[attr-defined]
    assert _callctx.attach == var.set
    assert _callctx.reset == var.reset
    span = trace.NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)
    before = otel_context.get_current()
    token = _callctx.attach(trace.set_span_in_context(span))
    assert trace.get_current_span() is span  # what the API reads
    _callctx.detach(token)
    assert otel_context.get_current() is before


def test_a_token_from_another_context_is_logged_not_raised_as_by_the_api(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import contextvars

    from opentelemetry import context as otel_context

    from latencylens import _callctx

    elsewhere = contextvars.copy_context().run(_callctx.attach, otel_context.set_value("k", 1))
    with caplog.at_level("ERROR", logger="opentelemetry.context"):
        _callctx.detach(elsewhere)  # ContextVar.reset raises ValueError here; the caller never sees it
        ours = [record.getMessage() for record in caplog.records]
        caplog.clear()
        otel_context.detach(elsewhere)
        api = [record.getMessage() for record in caplog.records]
    assert ours == api == ["Failed to detach context"]
