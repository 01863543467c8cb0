"""Proxies that pass a stream's chunks through unchanged while timing them.

A proxy owns the span of the call that produced the stream and ends it exactly once: when the stream
is exhausted (completed), raises (error recorded, the same exception re-raised), is closed or left by
``with`` early, or is garbage-collected unfinished (both: not completed). Everything else
(``.response``, ``.close()`` of the SDK object, ...) is forwarded to the wrapped stream. The per-chunk
paths (``__next__``, ``__anext__``, and the generators a ``for`` or ``async for`` loop over a proxy
runs) keep their bookkeeping inlined: a method call per chunk is measurable (``bench decorators``).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator, Iterator
from operator import sub
from types import TracebackType
from typing import Any

from opentelemetry.context import Context
from opentelemetry.trace import Span

from latencylens._attributes import set_result_attributes
from latencylens._callctx import CallRecord, attach, call_context, detach, detach_failed, reset
from latencylens._guard import internal_error, mark_failed
from latencylens.providers._base import StreamState
from latencylens.semconv import (
    END_ABANDONED,
    END_COMPLETED,
    END_ERROR,
    GEN_AI_REQUEST_STREAM,
    GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    PROVENANCE_ITL,
    PROVENANCE_TTFT,
    PROVIDER_EXTRACT_ERRORS,
    SOURCE_ESTIMATED,
    SOURCE_MEASURED,
    STREAM_CHUNKS,
    STREAM_COMPLETED,
    STREAM_CONTENT_CHUNKS,
    STREAM_END_REASON,
    STREAM_FIRST_CONTENT_NS,
    STREAM_GAP_MAX_NS,
    STREAM_GAP_MEAN_NS,
    STREAM_GAP_P50_NS,
    STREAM_GAP_P90_NS,
    STREAM_GAP_P99_NS,
    STREAM_ITL_NS,
    STREAM_LAST_CHUNK_NS,
    STREAM_OUTPUT_TOKENS_PER_SECOND,
)
from latencylens.streamstats import inter_token_latency_ns, output_tokens_per_second, sorted_gap_stats

_OWN_PREFIX = "_ll_"
_END: Any = object()
"""What ``next`` gives at a stream's end in the sync loop's generator (never a chunk)."""
_time_ns = time.time_ns  # bound once: read per chunk
_attach, _detach, _reset = attach, detach, reset  # bound once: called per chunk


class _StreamProxy:
    """Span bookkeeping shared by the sync and async proxies."""

    __slots__ = (
        "_ll_chunks",
        "_ll_ctx",
        "_ll_done",
        "_ll_errors",
        "_ll_inner",
        "_ll_it",
        "_ll_last",
        "_ll_measure",
        "_ll_span",
        "_ll_start",
        "_ll_state",
        "_ll_times",
    )

    _ll_step = "__next__"
    """The method that makes the wrapped object's next chunk; an object without it is opened."""

    @staticmethod
    def _ll_open(inner: Any) -> Any:
        """Nothing to open: the body meter (``_body``) records chunks it parses itself."""
        return inner

    def __init__(
        self,
        inner: Any,
        span: Span,
        start_ns: int,
        state: StreamState | None = None,
        measure: bool = True,
        record: CallRecord | None = None,
        ctx: Context | None = None,
    ) -> None:
        self._ll_inner = inner
        self._ll_it = inner if hasattr(type(inner), self._ll_step) else self._ll_open(inner)
        self._ll_span = span
        self._ll_ctx = call_context(span, record) if ctx is None else ctx
        self._ll_start = start_ns
        self._ll_state = state
        self._ll_measure = measure
        self._ll_chunks = 0
        self._ll_times: list[int] = []
        """Arrival time of each content chunk: TTFT, gaps and the content count all come from it."""
        self._ll_last: int | None = None
        self._ll_errors = 0
        self._ll_done = False

    def __getattr__(self, name: str) -> Any:
        if name.startswith(_OWN_PREFIX):
            raise AttributeError(name)
        return getattr(self._ll_inner, name)

    def __repr__(self) -> str:
        return f"<latencylens stream of {self._ll_inner!r}>"

    def __del__(self) -> None:
        if not getattr(self, "_ll_done", True):
            self._ll_finish(False, None)

    def _ll_record(self, chunk: Any) -> None:
        """Note one chunk's arrival; only called when measuring (model calls).

        Per chunk: one clock read, the adapter's content check, and for content chunks one
        appended timestamp. All summarising waits for the end of the stream. ``__next__``,
        ``__anext__`` and the loop generators carry an inlined copy of this body (a method call per
        chunk is measurable).
        """
        now = _time_ns()
        self._ll_chunks += 1
        self._ll_last = now
        state = self._ll_state
        if state is None:
            return
        try:
            content = state.record_chunk(chunk)
        except Exception:
            self._ll_errors += 1
            internal_error("stream record_chunk")
            return
        if content:
            self._ll_times.append(now)

    def _ll_finish(self, completed: bool, exc: BaseException | None) -> None:
        """Set the stream attributes and end the span, once."""
        if self._ll_done:
            return
        self._ll_done = True
        span = self._ll_span
        try:
            failed = exc is not None and not isinstance(exc, GeneratorExit)
            if self._ll_measure:
                set_result_attributes(span, *self._ll_attributes(completed, failed))
            if failed and exc is not None:
                mark_failed(span, exc)
        except Exception:
            internal_error("finishing a stream span")
        finally:
            span.end()

    def _ll_attributes(self, completed: bool, failed: bool) -> tuple[dict[str, Any], dict[str, Any]]:
        """What the span ends with: the usage the chunks reported (the adapter's attributes), then
        this proxy's own: chunk counts, how the stream ended, first and last chunk, ITL, output rate
        and gap percentiles (ints, floats, bools and our constants: stored without a look at each).
        Written straight through, names bound at import: it runs once per streamed call."""
        start = self._ll_start
        usage: dict[str, Any] = {}
        output_tokens: int | None = None
        state = self._ll_state
        if state is not None:
            try:
                usage = state.usage_attributes()
                output_tokens = usage.get(GEN_AI_USAGE_OUTPUT_TOKENS)
            except Exception:
                usage = {}
                self._ll_errors += 1
                internal_error("stream usage")
        if type(output_tokens) is not int:
            output_tokens = None  # only a count feeds ITL and the rate (adapters give ints)
        times = self._ll_times
        attributes: dict[str, Any] = {
            GEN_AI_REQUEST_STREAM: True,
            STREAM_CHUNKS: self._ll_chunks,
            STREAM_CONTENT_CHUNKS: len(times),
            STREAM_COMPLETED: completed,
            STREAM_END_REASON: END_COMPLETED if completed else END_ERROR if failed else END_ABANDONED,
        }
        last = self._ll_last
        if last is not None:
            if times and state is not None and state.decode_ends_at_last_content:
                last = times[-1]  # what follows the content is bookkeeping (Anthropic's message_delta/stop)
            attributes[STREAM_LAST_CHUNK_NS] = last - start
        if times:
            first = times[0]
            attributes[STREAM_FIRST_CONTENT_NS] = first - start
            attributes[GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = (first - start) / 1e9
            attributes[PROVENANCE_TTFT] = SOURCE_MEASURED
            if last is not None:
                tokens, source = output_tokens, SOURCE_MEASURED
                if tokens is None:
                    tokens, source = len(times), SOURCE_ESTIMATED
                itl = inter_token_latency_ns(first, last, tokens)
                if itl is not None:
                    attributes[STREAM_ITL_NS] = itl
                    attributes[PROVENANCE_ITL] = source
                rate = output_tokens_per_second(tokens, last - start)
                if rate is not None:
                    attributes[STREAM_OUTPUT_TOKENS_PER_SECOND] = rate
                if len(times) > 1:  # consecutive differences and their order, in C
                    mean, p50, p90, p99, top = sorted_gap_stats(sorted(map(sub, times[1:], times)))
                    attributes[STREAM_GAP_MEAN_NS] = mean
                    attributes[STREAM_GAP_P50_NS] = p50
                    attributes[STREAM_GAP_P90_NS] = p90
                    attributes[STREAM_GAP_P99_NS] = p99
                    attributes[STREAM_GAP_MAX_NS] = top
        if self._ll_errors:
            attributes[PROVIDER_EXTRACT_ERRORS] = self._ll_errors
        return usage, attributes


class SpanStream(_StreamProxy):
    """Proxy for a sync iterator; the span is current while the wrapped stream makes a chunk."""

    __slots__ = ()

    @staticmethod
    def _ll_open(inner: Any) -> Any:
        return iter(inner)

    def __iter__(self) -> Iterator[Any]:
        """A generator over the same chunks, with the same bookkeeping as ``__next__``: a ``for``
        loop resumes one frame per chunk instead of calling a method, and the stream's end is a
        return, not a raised StopIteration. Leaving the loop early leaves the span to ``close``,
        ``with`` or garbage collection, as for ``__next__``."""
        return self._ll_chunks_of()

    def _ll_chunks_of(self) -> Iterator[Any]:
        it = self._ll_it
        ctx = self._ll_ctx
        measure = self._ll_measure
        state = self._ll_state
        times = self._ll_times
        while True:
            token = _attach(ctx)
            try:
                chunk = next(it, _END)  # the end is a value, not a StopIteration raised and caught
            except BaseException as exc:
                _detach(token)
                self._ll_finish(False, exc)
                raise
            try:
                _reset(token)  # detach, inlined: it runs per chunk
            except Exception:
                detach_failed()
            if chunk is _END:
                self._ll_finish(True, None)
                return
            if measure:
                now = _time_ns()
                self._ll_chunks += 1
                self._ll_last = now
                if state is not None:
                    try:
                        if state.record_chunk(chunk):
                            times.append(now)
                    except Exception:
                        self._ll_errors += 1
                        internal_error("stream record_chunk")
            yield chunk

    def __next__(self) -> Any:
        token = _attach(self._ll_ctx)
        try:
            chunk = self._ll_it.__next__()
        except StopIteration:
            _detach(token)
            self._ll_finish(True, None)
            raise
        except BaseException as exc:
            _detach(token)
            self._ll_finish(False, exc)
            raise
        _detach(token)
        if self._ll_measure:  # _ll_record, inlined
            now = _time_ns()
            self._ll_chunks += 1
            self._ll_last = now
            state = self._ll_state
            if state is not None:
                try:
                    if state.record_chunk(chunk):
                        self._ll_times.append(now)
                except Exception:
                    self._ll_errors += 1
                    internal_error("stream record_chunk")
        return chunk

    def close(self) -> None:
        """Close the wrapped stream (releasing its connection) and end the span."""
        try:
            closer = getattr(self._ll_inner, "close", None)
            if closer is not None:
                closer()
        finally:
            self._ll_finish(False, None)

    def __enter__(self) -> SpanStream:
        enter = getattr(self._ll_inner, "__enter__", None)
        if enter is not None:
            enter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        try:
            exit_ = getattr(self._ll_inner, "__exit__", None)
            if exit_ is not None:
                return bool(exit_(exc_type, exc, tb))
            closer = getattr(self._ll_inner, "close", None)
            if closer is not None:
                closer()
            return None
        finally:
            self._ll_finish(False, None)


class AsyncSpanStream(_StreamProxy):
    """Proxy for an async iterator or iterable (``openai.AsyncStream``, async generators)."""

    __slots__ = ()

    _ll_step = "__anext__"

    @staticmethod
    def _ll_open(inner: Any) -> Any:
        return inner.__aiter__()

    def __aiter__(self) -> AsyncIterator[Any]:
        """An async generator over the same chunks, with the same bookkeeping as ``__anext__``:
        ``async for`` then resumes one frame per chunk instead of creating a coroutine per chunk.
        Leaving the loop early leaves the span to ``aclose``, ``async with`` or garbage collection,
        as for ``__anext__``."""
        return self._ll_chunks_of()

    async def _ll_chunks_of(self) -> AsyncIterator[Any]:
        step = self._ll_it.__anext__  # not anext(it, default): its wrapper per chunk costs more
        ctx = self._ll_ctx
        measure = self._ll_measure
        state = self._ll_state
        times = self._ll_times
        while True:
            token = _attach(ctx)
            try:
                chunk = await step()
            except StopAsyncIteration:
                _detach(token)
                self._ll_finish(True, None)
                return
            except BaseException as exc:
                _detach(token)
                self._ll_finish(False, exc)
                raise
            try:
                _reset(token)  # detach, inlined: it runs per chunk
            except Exception:
                detach_failed()
            if measure:
                now = _time_ns()
                self._ll_chunks += 1
                self._ll_last = now
                if state is not None:
                    try:
                        if state.record_chunk(chunk):
                            times.append(now)
                    except Exception:
                        self._ll_errors += 1
                        internal_error("stream record_chunk")
            yield chunk

    async def __anext__(self) -> Any:
        token = _attach(self._ll_ctx)
        try:
            chunk = await self._ll_it.__anext__()
        except StopAsyncIteration:
            _detach(token)
            self._ll_finish(True, None)
            raise
        except BaseException as exc:
            _detach(token)
            self._ll_finish(False, exc)
            raise
        _detach(token)
        if self._ll_measure:  # _ll_record, inlined
            now = _time_ns()
            self._ll_chunks += 1
            self._ll_last = now
            state = self._ll_state
            if state is not None:
                try:
                    if state.record_chunk(chunk):
                        self._ll_times.append(now)
                except Exception:
                    self._ll_errors += 1
                    internal_error("stream record_chunk")
        return chunk

    async def aclose(self) -> None:
        """Close the wrapped stream (``aclose`` or async ``close``) and end the span."""
        try:
            inner = self._ll_inner
            closer = getattr(inner, "aclose", None) or getattr(inner, "close", None)
            if closer is not None:
                result = closer()
                if inspect.isawaitable(result):
                    await result
        finally:
            self._ll_finish(False, None)

    close = aclose

    async def __aenter__(self) -> AsyncSpanStream:
        enter = getattr(self._ll_inner, "__aenter__", None)
        if enter is not None:
            await enter()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        try:
            exit_ = getattr(self._ll_inner, "__aexit__", None)
            if exit_ is not None:
                return bool(await exit_(exc_type, exc, tb))
            await self.aclose()
            return None
        finally:
            self._ll_finish(False, None)
