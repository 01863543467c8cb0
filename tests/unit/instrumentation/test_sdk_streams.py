"""Streams: chunks pass through untouched while the model span times them."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, ClassVar

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from starlette.concurrency import iterate_in_threadpool

import latencylens
from latencylens import semconv

Spans = Callable[[], list[ReadableSpan]]


def chunk(content: str | None = None, role: str | None = None, finish: str | None = None) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    return {
        "id": "chatcmpl-s",
        "model": "m-1",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def usage_chunk() -> dict[str, Any]:
    return {
        "id": "chatcmpl-s",
        "model": "m-1",
        "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2},
    }


def make_chunks() -> list[dict[str, Any]]:
    """Role-only and empty chunks first: they must not count as the first content."""
    return [
        chunk(role="assistant"),
        chunk(content=""),
        chunk("Hel"),
        chunk("lo"),
        chunk(finish="stop"),
        usage_chunk(),
    ]


class SDKLikeStream:
    """Shaped like ``openai.Stream``: an iterator with ``response``, ``close`` and ``with`` support."""

    def __init__(self, items: list[Any]) -> None:
        self._items = iter(items)
        self.response = "the http response"
        self.closed = False

    def __next__(self) -> Any:
        return next(self._items)

    def __iter__(self) -> Iterator[Any]:
        return self

    def __enter__(self) -> SDKLikeStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.closed = True


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_chunks_pass_through_identical_and_ttft_skips_empty_chunks(spans: Spans) -> None:
    chunks = make_chunks()

    @latencylens.model_call(provider="openai", model="m")
    def call() -> SDKLikeStream:
        return SDKLikeStream(chunks)

    stream = call()
    assert spans() == []  # the span stays open while the stream is read
    received = list(stream)
    assert len(received) == len(chunks)
    assert all(got is sent for got, sent in zip(received, chunks, strict=True))
    (span,) = spans()
    values = attrs(span)
    assert values[semconv.GEN_AI_REQUEST_STREAM] is True
    assert values[semconv.STREAM_CHUNKS] == 6
    assert values[semconv.STREAM_CONTENT_CHUNKS] == 2
    assert values[semconv.STREAM_COMPLETED] is True
    first, last = values[semconv.STREAM_FIRST_CONTENT_NS], values[semconv.STREAM_LAST_CHUNK_NS]
    assert isinstance(first, int) and isinstance(last, int)
    assert 0 <= first <= last <= span.end_time - span.start_time  # type: ignore[operator]
    assert values[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] == first / 1e9
    assert values[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 5
    assert values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 2
    assert values[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert values[semconv.GEN_AI_RESPONSE_ID] == "chatcmpl-s"


def test_first_content_offset_is_taken_at_the_first_content_chunk(spans: Spans) -> None:
    """Chunk arrival times are read between chunks, so the offset must fall after the empty ones."""
    marks: list[int] = []

    @latencylens.model_call(provider="openai", model="m")
    def call() -> Iterator[dict[str, Any]]:
        import time

        yield chunk(role="assistant")
        yield chunk(content="")
        marks.append(time.time_ns())
        yield chunk("x")
        marks.append(time.time_ns())
        yield chunk("y")

    list(call())
    (span,) = spans()
    start = span.start_time or 0
    first = attrs(span)[semconv.STREAM_FIRST_CONTENT_NS]
    assert marks[0] - start <= first <= marks[1] - start
    assert attrs(span)[semconv.STREAM_LAST_CHUNK_NS] >= marks[1] - start


def test_proxy_forwards_attributes_and_with_statement() -> None:
    inner = SDKLikeStream(make_chunks())

    @latencylens.model_call(provider="openai", model="m")
    def call() -> SDKLikeStream:
        return inner

    with call() as stream:
        assert stream.response == "the http response"
        next(iter(stream))
    assert inner.closed


def test_abandoned_stream_break_and_close(spans: Spans) -> None:
    inner = SDKLikeStream(make_chunks())

    @latencylens.model_call(provider="openai", model="m")
    def call() -> SDKLikeStream:
        return inner

    stream = call()
    for _ in stream:
        break
    assert spans() == []
    stream.close()
    assert inner.closed
    (span,) = spans()
    assert attrs(span)[semconv.STREAM_COMPLETED] is False
    assert attrs(span)[semconv.STREAM_CHUNKS] == 1
    assert span.status.status_code is StatusCode.UNSET
    stream.close()  # a second close ends nothing twice
    assert len(spans()) == 1


def test_next_and_loops_share_one_stream_and_one_span(spans: Spans) -> None:
    """``next()`` goes through ``__next__``, a ``for`` loop through the proxy's generator: pulled
    either way, and across a loop left and taken up again, each chunk is passed on and counted once."""
    chunks = make_chunks()

    @latencylens.model_call(provider="openai", model="m")
    def call() -> SDKLikeStream:
        return SDKLikeStream(chunks)

    stream = call()
    received = [next(stream)]
    for item in stream:
        received.append(item)
        if len(received) == 3:
            break
    assert spans() == []
    received += list(stream)
    assert received == chunks
    (span,) = spans()
    assert attrs(span)[semconv.STREAM_CHUNKS] == 6
    assert attrs(span)[semconv.STREAM_CONTENT_CHUNKS] == 2
    assert attrs(span)[semconv.STREAM_COMPLETED] is True
    assert list(stream) == []  # exhausted: nothing more, and the span is not ended twice
    assert len(spans()) == 1


def test_abandoned_stream_garbage_collected(spans: Spans) -> None:
    @latencylens.model_call(provider="openai", model="m")
    def call() -> Iterator[dict[str, Any]]:
        yield from make_chunks()

    stream = call()
    next(stream)
    next(stream)
    del stream
    gc.collect()
    (span,) = spans()
    assert attrs(span)[semconv.STREAM_COMPLETED] is False
    assert attrs(span)[semconv.STREAM_CHUNKS] == 2


def test_stream_raising_midway_reraises_the_same_exception(spans: Spans) -> None:
    error = ConnectionError("peer went away")

    @latencylens.model_call(provider="openai", model="m")
    def call() -> Iterator[dict[str, Any]]:
        yield chunk(role="assistant")
        yield chunk("partial")
        raise error

    received = []
    with pytest.raises(ConnectionError) as raised:
        for item in call():
            received.append(item)
    assert raised.value is error
    assert len(received) == 2
    (span,) = spans()
    values = attrs(span)
    assert values[semconv.STREAM_COMPLETED] is False
    assert values[semconv.STREAM_CONTENT_CHUNKS] == 1
    assert values[semconv.ERROR_TYPE] == "ConnectionError"
    assert span.status.status_code is StatusCode.ERROR
    # usage never arrived: the span says what is missing rather than guessing
    assert values[semconv.PROVIDER_FIELDS_MISSING] == ("usage.prompt_tokens", "usage.completion_tokens")


def test_generator_function_body_runs_inside_the_model_span(spans: Spans) -> None:
    @latencylens.tool(name="inner")
    def inner() -> str:
        return "x"

    @latencylens.model_call(provider="openai", model="m")
    def call() -> Iterator[dict[str, Any]]:
        yield chunk(inner())

    list(call())
    named = {span.name: span for span in spans()}
    parent = named["execute_tool inner"].parent
    assert parent is not None and parent.span_id == named["chat m"].context.span_id


def test_a_sync_stream_read_from_worker_threads_as_starlette_streams_it(spans: Spans) -> None:
    """A FastAPI ``StreamingResponse`` over a sync stream pulls each chunk in a worker thread
    (``iterate_in_threadpool``): the proxy's generator is resumed from one thread after another,
    and the model span must be current in whichever thread makes the chunk."""
    current: list[int] = []
    threads: set[int] = set()

    @latencylens.model_call(provider="openai", model="m")
    def call() -> Iterator[dict[str, Any]]:
        for item in make_chunks():
            current.append(trace.get_current_span().get_span_context().span_id)
            threads.add(threading.get_ident())
            yield item

    async def read() -> list[Any]:
        return [item async for item in iterate_in_threadpool(call())]

    received = asyncio.run(read())
    assert received == make_chunks()
    (span,) = spans()
    assert current == [span.context.span_id] * len(received)
    assert threading.get_ident() not in threads
    assert attrs(span)[semconv.STREAM_CHUNKS] == 6
    assert attrs(span)[semconv.STREAM_COMPLETED] is True
    assert trace.get_current_span() is trace.INVALID_SPAN  # nothing left attached here


def test_tool_generator_span_covers_the_iteration(spans: Spans) -> None:
    @latencylens.tool(name="lines")
    def lines() -> Iterator[int]:
        yield 1
        yield 2

    produced = lines()
    assert spans() == []
    assert list(produced) == [1, 2]
    (span,) = spans()
    assert semconv.STREAM_CHUNKS not in attrs(span)


async def test_async_generator_stream(spans: Spans) -> None:
    chunks = make_chunks()

    @latencylens.model_call(provider="openai", model="m")
    async def call() -> AsyncIterator[dict[str, Any]]:
        for item in chunks:
            yield item

    received = [item async for item in call()]
    assert all(got is sent for got, sent in zip(received, chunks, strict=True))
    values = attrs(spans()[0])
    assert values[semconv.STREAM_COMPLETED] is True
    assert values[semconv.STREAM_CONTENT_CHUNKS] == 2


class AsyncSDKLikeStream:
    """Shaped like ``openai.AsyncStream``."""

    def __init__(self, items: list[Any]) -> None:
        self._items = iter(items)
        self.closed = False

    async def __anext__(self) -> Any:
        try:
            return next(self._items)
        except StopIteration:
            raise StopAsyncIteration from None

    def __aiter__(self) -> AsyncSDKLikeStream:
        return self

    async def close(self) -> None:
        self.closed = True


async def test_async_function_returning_async_stream_closed_early(spans: Spans) -> None:
    inner = AsyncSDKLikeStream(make_chunks())

    @latencylens.model_call(provider="openai", model="m")
    async def call() -> AsyncSDKLikeStream:
        return inner

    stream = await call()
    async for _ in stream:
        break
    await stream.close()
    assert inner.closed
    values = attrs(spans()[0])
    assert values[semconv.STREAM_COMPLETED] is False
    assert values[semconv.STREAM_CHUNKS] == 1


async def test_async_stream_raising_midway(spans: Spans) -> None:
    error = TimeoutError("slow")

    @latencylens.model_call(provider="openai", model="m")
    async def call() -> AsyncIterator[dict[str, Any]]:
        yield chunk("a")
        raise error

    with pytest.raises(TimeoutError) as raised:
        async for _ in call():
            pass
    assert raised.value is error
    assert spans()[0].status.status_code is StatusCode.ERROR


async def test_anext_and_async_loops_share_one_stream_and_one_span(spans: Spans) -> None:
    """``anext()`` goes through ``__anext__``, an ``async for`` loop through the proxy's async
    generator: pulled either way, and across a loop left and taken up again, each chunk is passed
    on and counted once."""
    chunks = make_chunks()

    @latencylens.model_call(provider="openai", model="m")
    async def call() -> AsyncSDKLikeStream:
        return AsyncSDKLikeStream(chunks)

    stream = await call()
    received = [await anext(stream)]
    async for item in stream:
        received.append(item)
        if len(received) == 3:
            break
    assert spans() == []
    received += [item async for item in stream]
    assert received == chunks
    (span,) = spans()
    assert attrs(span)[semconv.STREAM_CHUNKS] == 6
    assert attrs(span)[semconv.STREAM_CONTENT_CHUNKS] == 2
    assert attrs(span)[semconv.STREAM_COMPLETED] is True
    assert [item async for item in stream] == []  # exhausted, and the span is not ended twice
    assert len(spans()) == 1


async def test_async_stream_left_by_break_then_dropped_ends_its_span_once(spans: Spans) -> None:
    @latencylens.model_call(provider="openai", model="m")
    async def call() -> AsyncSDKLikeStream:
        return AsyncSDKLikeStream(make_chunks())

    stream = await call()
    async for _ in stream:
        break
    await asyncio.sleep(0)  # the event loop closes the loop's dropped async generator
    assert spans() == []
    del stream
    gc.collect()
    await asyncio.sleep(0)
    (span,) = spans()
    assert attrs(span)[semconv.STREAM_COMPLETED] is False
    assert attrs(span)[semconv.STREAM_END_REASON] == semconv.END_ABANDONED
    assert attrs(span)[semconv.STREAM_CHUNKS] == 1


async def test_a_task_cancelled_mid_stream_gets_its_cancellation_and_the_span_ends(spans: Spans) -> None:
    """The cancellation reaches the caller unchanged; the span ends, not completed."""
    first_chunk = asyncio.Event()

    @latencylens.model_call(provider="openai", model="m")
    async def call() -> AsyncIterator[dict[str, Any]]:
        yield chunk("a")
        await asyncio.Event().wait()  # the provider never sends the next chunk
        yield chunk("b")

    async def consume() -> None:
        async for _ in call():
            first_chunk.set()

    task = asyncio.create_task(consume())
    await first_chunk.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (span,) = spans()
    assert attrs(span)[semconv.STREAM_COMPLETED] is False
    assert attrs(span)[semconv.STREAM_CHUNKS] == 1


def test_non_stream_results_are_not_wrapped() -> None:
    values: list[Any] = [{"a": 1}, "text", b"bytes", [1, 2], (1,)]

    for value in values:

        @latencylens.model_call(provider="openai", model="m")
        def call(value: Any = value) -> Any:
            return value

        assert call() is value


class _BrokenUsage:
    """A usage object whose token counts fail when read, as a broken SDK object's might."""

    @property
    def prompt_tokens(self) -> Any:
        raise RuntimeError("property bug")


class _FinalChunk:
    """A final chunk carrying that usage: the chunk is fine, reading its usage at the end is not."""

    id = "chatcmpl-s"
    model = "m-1"
    choices: ClassVar[list[Any]] = []
    usage = _BrokenUsage()


@pytest.mark.parametrize("provider", ["openai", "groq"])
def test_a_usage_that_breaks_at_the_end_still_ends_the_span_with_its_times(
    spans: Spans, provider: str, allow_internal_errors: None
) -> None:
    chunks = [chunk("Hel"), chunk("lo"), _FinalChunk()]

    @latencylens.model_call(provider=provider, model="m")
    def call() -> SDKLikeStream:
        return SDKLikeStream(chunks)

    assert list(call()) == chunks
    values = attrs(spans()[0])
    assert values[semconv.PROVIDER_EXTRACT_ERRORS] == 1
    assert values[semconv.STREAM_CHUNKS] == 3
    assert values[semconv.STREAM_CONTENT_CHUNKS] == 2
    assert values[semconv.STREAM_COMPLETED] is True
    assert semconv.STREAM_FIRST_CONTENT_NS in values
    assert values[semconv.PROVENANCE_ITL] == semconv.SOURCE_ESTIMATED  # from the 2 content chunks
    assert semconv.GEN_AI_USAGE_OUTPUT_TOKENS not in values
