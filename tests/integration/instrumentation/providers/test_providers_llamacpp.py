"""llama.cpp's native ``/completion`` API through ``instrument_httpx`` with plain httpx: one reply, a
stream of text pieces, and a batch (two prompts) answered as a list and as a stream of interleaved
requests. Its OpenAI-compatible API is tested with the other hooks (test_providers_autoinstrument.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from opentelemetry.sdk.trace import ReadableSpan
from provider_payloads import llamacpp_native, llamacpp_native_batch, llamacpp_native_chunks
from provider_replay import ReplayServer, assert_stream_timing, json_reply, sse_reply

import latencylens
from latencylens import semconv

Spans = Callable[[], list[ReadableSpan]]
Replay = Callable[[], ReplayServer]
PROMPT = {"prompt": "The capital of France is", "n_predict": 32}
BATCH = {**PROMPT, "prompt": ["The capital of France is", "The capital of Germany is"]}
PIECES = [" Paris", ".", " It", ""]
"""Pieces of text; the last is empty (an incomplete UTF-8 piece), so no content."""

# The captured timings (docs: provider-timing reference, llama-server b9910): prompt_ms 651.714 ms
# → 651_714_000 ns of prefill, predicted_ms 73.517 ms → 73_517_000 ns of decode; the prompt is
# cache_n 0 + prompt_n 46 = 46 tokens, 10 generated; stop_type "eos", model "qwen".
DOCUMENTED = {
    semconv.GEN_AI_USAGE_INPUT_TOKENS: 46,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 10,
    semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 0,
    semconv.PROVIDER_PREFILL_NS: 651_714_000,
    semconv.PROVIDER_DECODE_NS: 73_517_000,
    semconv.GEN_AI_RESPONSE_MODEL: "qwen",
    semconv.GEN_AI_RESPONSE_FINISH_REASONS: ("eos",),
}
# Two requests (provider_payloads.llamacpp_native_batch): the prompt is (0 + 46) + (16 + 30) = 92
# tokens, 0 + 16 = 16 of them from the cache, 10 + 12 = 22 generated; the second request took longer
# (700.5 + 80.25 = 780.75 ms against 651.714 + 73.517 = 725.231 ms), so its prefill 700.5 ms =
# 700_500_000 ns and decode 80.25 ms = 80_250_000 ns are the call's.
BATCH_EXPECTED = {
    semconv.GEN_AI_USAGE_INPUT_TOKENS: 92,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 22,
    semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 16,
    semconv.PROVIDER_PREFILL_NS: 700_500_000,
    semconv.PROVIDER_DECODE_NS: 80_250_000,
    semconv.GEN_AI_RESPONSE_MODEL: "qwen",
    semconv.GEN_AI_RESPONSE_FINISH_REASONS: ("eos", "limit"),  # one per request, in order
}


def interleaved() -> list[dict[str, Any]]:
    """The batch streamed: each request's pieces, then its final object, taken in turn."""
    first, second = (llamacpp_native_chunks([" Paris", "."], final) for final in llamacpp_native_batch())
    return [first[0], second[0], first[1], second[1], second[2], first[2]]


def llamacpp_server(replay: Replay) -> ReplayServer:
    def completion(request: Any) -> Any:
        body = request.json()
        if isinstance(body["prompt"], list):  # a batch: one reply per prompt
            if body.get("stream"):
                return sse_reply(interleaved(), 0.040, done=False)
            return json_reply(llamacpp_native_batch())
        if body.get("stream"):
            return sse_reply(llamacpp_native_chunks(PIECES), 0.040, done=False)
        return json_reply(llamacpp_native())

    return replay().route("POST", "/completion", completion)


def attributes_of(span: ReadableSpan, keys: dict[str, Any]) -> dict[str, Any]:
    values = dict(span.attributes or {})
    return {key: values.get(key) for key in keys}


def post(replay: Replay, spans: Spans, undo: Any, body: dict[str, Any]) -> tuple[Any, ReadableSpan]:
    """POST ``body`` to ``/completion``; the parsed reply and its span."""
    server = llamacpp_server(replay)
    undo(latencylens.instrument_httpx(base_urls=[server.url], provider="llama.cpp"))
    with httpx.Client(trust_env=False) as client:
        reply = client.post(server.url + "/completion", json=body).json()
    (span,) = spans()
    return reply, span


def stream(
    replay: Replay, spans: Spans, undo: Any, body: dict[str, Any]
) -> tuple[ReplayServer, ReadableSpan]:
    """Stream ``body`` from ``/completion`` (twice: the first call warms the client); the last span."""
    server = llamacpp_server(replay)
    undo(latencylens.instrument_httpx(base_urls=[server.url], provider="llama.cpp"))
    with httpx.Client(trust_env=False) as client:
        for _ in range(2):
            with client.stream("POST", server.url + "/completion", json={**body, "stream": True}) as response:
                for _line in response.iter_lines():
                    pass
    return server, spans()[-1]


def test_native_completion_reads_the_documented_timings(replay: Replay, spans: Spans, undo: Any) -> None:
    reply, span = post(replay, spans, undo, PROMPT)
    assert reply["timings"]["prompt_n"] == 46  # the caller's reply is untouched
    assert attributes_of(span, DOCUMENTED) == DOCUMENTED
    assert semconv.PROVIDER_FIELDS_MISSING not in dict(span.attributes or {})


def test_native_stream_of_pieces(replay: Replay, spans: Spans, undo: Any) -> None:
    server, span = stream(replay, spans, undo, PROMPT)
    values = dict(span.attributes or {})
    assert attributes_of(span, DOCUMENTED) == DOCUMENTED  # the final chunk's
    # three non-empty pieces are content; the empty fourth and the final object (content "") are not
    assert values[semconv.STREAM_CONTENT_CHUNKS] == 3
    # each part 40 ms after the one before: " Paris" at 40 ms, the final object 4 × 40 = 160 ms
    # later, over the final object's 10 generated tokens
    assert_stream_timing(span, server, ttft_s=0.040, decode_s=0.160, output_tokens=10)


def test_native_batch_sums_counts_and_takes_the_slowest_requests_timing(
    replay: Replay, spans: Spans, undo: Any
) -> None:
    reply, span = post(replay, spans, undo, BATCH)
    assert [each["index"] for each in reply] == [0, 1]  # the caller's reply is untouched
    assert attributes_of(span, BATCH_EXPECTED) == BATCH_EXPECTED
    assert semconv.PROVIDER_FIELDS_MISSING not in dict(span.attributes or {})


def test_native_batch_stream_tells_its_requests_apart_by_index(
    replay: Replay, spans: Spans, undo: Any
) -> None:
    server, span = stream(replay, spans, undo, BATCH)
    assert attributes_of(span, BATCH_EXPECTED) == BATCH_EXPECTED  # each request's final object
    assert dict(span.attributes or {})[semconv.STREAM_CONTENT_CHUNKS] == 4  # " Paris" and "." of each
    # each part 40 ms after the one before: the first " Paris" at 40 ms, the last of the six parts
    # 5 × 40 = 200 ms later, over the two requests' 22 generated tokens
    assert_stream_timing(span, server, ttft_s=0.040, decode_s=0.200, output_tokens=22)
