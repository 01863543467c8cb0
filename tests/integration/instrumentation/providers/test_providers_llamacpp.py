"""llama.cpp's native ``/completion`` API through ``instrument_httpx`` with plain httpx: one reply, a
stream of text pieces, and a batch (two prompts) answered as a list and as a stream of interleaved
requests; a batch exported with the real OTLP/HTTP exporter to a real collector, whose breakdown is
read back from its API. Its OpenAI-compatible API is tested with the other hooks
(test_providers_autoinstrument.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from opentelemetry.sdk.trace import ReadableSpan
from provider_payloads import llamacpp_native, llamacpp_native_batch, llamacpp_native_chunks
from provider_replay import ReplayServer, assert_stream_timing, json_reply, sse_reply
from test_providers_tgi import export_and_fetch, model_span

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


HOLD_S = 0.9
"""How long the breakdown test's server holds its batch reply: longer than the slower request's
reported prefill + decode (780.75 ms), as a real server's answer would take."""


def test_request_breakdown_of_a_native_batch(replay: Replay, spans: Spans, undo: Any, collector: Any) -> None:
    server = replay().route("POST", "/completion", json_reply(llamacpp_native_batch(), delay_s=HOLD_S))
    undo(latencylens.instrument_httpx(base_urls=[server.url], provider="llama.cpp"))

    @latencylens.request(name="POST /ask")
    def ask() -> list[Any]:
        with httpx.Client(trust_env=False) as client:
            replies: list[Any] = client.post(server.url + "/completion", json=BATCH).json()
        return replies

    assert len(ask()) == 2
    finished = spans()
    assert len(finished) == 2  # one model call for the batch, and the request
    detail = export_and_fetch(finished, collector.url)
    parts = detail["parts"]
    parts, provenance = detail["parts"], detail["provenance"]
    assert parts["prefill"] == 700_500_000  # the slower request's prompt_ms, 700.5 ms
    assert parts["decode"] == 80_250_000  # its predicted_ms, 80.25 ms
    # llama.cpp reports no server total: the rest of the call (its duration − 780_750_000 ns) is
    # network, derived, at least the 0.9 s the server held its reply less those 780.75 ms
    call_ns = model_span(detail)["duration_ns"]
    assert parts["network"] == call_ns - 780_750_000
    assert parts["network"] >= round(HOLD_S * 1e9) - 780_750_000
    assert (provenance["prefill"], provenance["decode"], provenance["network"]) == (
        "reported",
        "reported",
        "derived",
    )
    assert (detail["input_tokens"], detail["output_tokens"]) == (92, 22)  # both requests' tokens
    assert sum(parts.values()) == detail["e2e_ns"]
    assert detail["provider"] == "llama.cpp"
    assert not detail["inconsistent"]
