"""OpenAI Chat Completions and Responses API through the real ``openai`` client and a replay server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from provider_payloads import (
    OPENAI_MODEL,
    openai_chat_completion,
    openai_chunk,
    openai_response,
    openai_response_events,
    openai_usage_chunk,
)
from provider_replay import ReplayServer, assert_stream_timing, json_reply, sse_reply

import latencylens
from latencylens import semconv

Spans = Callable[[], list[ReadableSpan]]


def make_client(server: ReplayServer) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{server.url}/v1",
        api_key="x",
        max_retries=0,
        http_client=openai.DefaultHttpxClient(trust_env=False),
    )


# role-only at 20 ms, an empty chunk, first content 30 ms later (TTFT 50 ms), then three content
# chunks 20 ms apart (last − first = 60 ms), finish chunk and the include_usage chunk at once.
STREAM = [
    (openai_chunk({"role": "assistant", "content": ""}), 0.020),
    (openai_chunk({"content": ""}), 0.0),
    (openai_chunk({"content": "Hel"}), 0.030),
    (openai_chunk({"content": "lo"}), 0.020),
    (openai_chunk({"content": " the"}), 0.020),
    (openai_chunk({"content": "re"}), 0.020),
    (openai_chunk({}, "stop"), 0.0),
    (openai_usage_chunk(), 0.0),
]


def stream_reply() -> Any:
    return sse_reply([chunk for chunk, _ in STREAM], [delay for _, delay in STREAM])


def test_chat_completion_tokens_match_the_payload(replay: Callable[[], ReplayServer], spans: Spans) -> None:
    server = replay().route("POST", "/v1/chat/completions", json_reply(openai_chat_completion()))
    client = make_client(server)

    @latencylens.model_call(provider="openai", model=OPENAI_MODEL)
    def ask() -> Any:
        return client.chat.completions.create(
            model=OPENAI_MODEL, messages=[{"role": "user", "content": "hi"}]
        )

    assert ask().choices[0].message.content == "Hi"
    values = dict(spans()[0].attributes or {})
    assert values[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 19
    assert values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 10
    assert values[semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 0
    assert values[semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] == 0
    assert values[semconv.GEN_AI_RESPONSE_ID] == "chatcmpl-123"
    assert values[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert semconv.PROVIDER_QUEUE_NS not in values  # OpenAI reports no server split


def test_chat_stream_ttft_and_itl_match_the_injected_delays(
    replay: Callable[[], ReplayServer], spans: Spans
) -> None:
    server = replay().route("POST", "/v1/chat/completions", lambda request: stream_reply())
    client = make_client(server)

    @latencylens.model_call(provider="openai", model=OPENAI_MODEL)
    def ask() -> Any:
        return client.chat.completions.create(
            model=OPENAI_MODEL,
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )

    list(ask())  # warm the client (imports, connection setup) so the measured call is steady
    spans_before = len(spans())
    text = "".join(chunk.choices[0].delta.content or "" for chunk in ask() if chunk.choices)
    assert text == "Hello there"
    values = dict(spans()[spans_before].attributes or {})
    # TTFT = 20 + 0 + 30 ms = 50 ms; last − first = 3 × 20 ms = 60 ms; 10 output tokens → ITL 60/9 ms.
    assert_stream_timing(
        spans()[spans_before], server, ttft_s=0.050, decode_s=0.060, gap_s=0.020, output_tokens=10
    )
    assert values[semconv.STREAM_CHUNKS] == 8
    assert values[semconv.STREAM_CONTENT_CHUNKS] == 4
    assert values[semconv.STREAM_END_REASON] == "completed"
    assert values[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 19
    assert values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 10
    assert values[semconv.PROVENANCE_ITL] == "measured"


def test_responses_api_non_streaming(replay: Callable[[], ReplayServer], spans: Spans) -> None:
    server = replay().route("POST", "/v1/responses", json_reply(openai_response()))
    client = make_client(server)

    @latencylens.model_call(provider="openai", model=OPENAI_MODEL)
    def ask() -> Any:
        return client.responses.create(model=OPENAI_MODEL, input="hi")

    assert ask().id == "resp_0cd5"
    values = dict(spans()[0].attributes or {})
    # input_tokens already includes the 11_904 cached ones (OpenAI: cached ⊂ input).
    assert values[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 12033
    assert values[semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 11904
    assert values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 44
    assert values[semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] == 0
    assert values[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("completed",)
    assert values[semconv.PROVIDER_FIELDS_REPORTED] == (
        "usage.input_tokens",
        "usage.output_tokens",
        "usage.input_tokens_details.cached_tokens",
        "usage.output_tokens_details.reasoning_tokens",
    )


def test_responses_api_stream(replay: Callable[[], ReplayServer], spans: Spans) -> None:
    # created at 10 ms; an empty delta; first text 40 ms later (TTFT 50 ms); three more 20 ms apart.
    events = openai_response_events(["", "Hel", "lo", " the", "re"])
    delays = [0.010, 0.0, 0.040, 0.020, 0.020, 0.020, 0.0]
    server = replay().route("POST", "/v1/responses", lambda r: sse_reply(events, delays, done=False))
    client = make_client(server)

    @latencylens.model_call(provider="openai", model=OPENAI_MODEL)
    def ask() -> Any:
        return client.responses.create(model=OPENAI_MODEL, input="hi", stream=True)

    list(ask())
    spans_before = len(spans())
    kinds = [event.type for event in ask()]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    values = dict(spans()[spans_before].attributes or {})
    # 44 output tokens over last − first = 60 ms: ITL = 60 ms / 43.
    assert_stream_timing(
        spans()[spans_before], server, ttft_s=0.050, decode_s=0.060, gap_s=0.020, output_tokens=44
    )
    assert values[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 12033
    assert values[semconv.GEN_AI_RESPONSE_ID] == "resp_0cd5"


@pytest.mark.parametrize("processing_ms", ["321", "321.5"])
def test_processing_ms_header_is_the_server_total(processing_ms: str) -> None:
    from latencylens.providers.openai import OpenAIAdapter

    usage = OpenAIAdapter().extract(openai_chat_completion(), {"openai-processing-ms": processing_ms})
    # 321 ms = 321_000_000 ns; 321.5 ms = 321_500_000 ns
    assert usage.server_total_ns == round(float(processing_ms) * 1_000_000)
    assert usage.to_attributes()[semconv.PROVENANCE_SERVER_TOTAL] == "reported"
    assert "header.openai-processing-ms" in usage.fields_reported
