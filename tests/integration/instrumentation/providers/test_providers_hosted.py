"""Anthropic, Groq, Cerebras and Ollama through their real SDK clients against a replay server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic
import groq
import httpx
import ollama
from cerebras.cloud.sdk import Cerebras
from opentelemetry.sdk.trace import ReadableSpan
from provider_payloads import (
    anthropic_message,
    anthropic_stream_events,
    cerebras_completion,
    groq_stream_chunk,
    ollama_final,
)
from provider_replay import ReplayServer, assert_stream_timing, json_reply, ndjson_reply, sse_reply

import latencylens
from latencylens import semconv

Spans = Callable[[], list[ReadableSpan]]
Replay = Callable[[], ReplayServer]
MESSAGES = [{"role": "user", "content": "hi"}]


def last_span_attributes(spans: Spans) -> dict[str, Any]:
    return dict(spans()[-1].attributes or {})


# --- Anthropic ------------------------------------------------------------------------------------


def anthropic_client(server: ReplayServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=server.url,
        api_key="x",
        max_retries=0,
        http_client=anthropic.DefaultHttpxClient(trust_env=False),
    )


def test_anthropic_message_input_includes_cache_reads_and_writes(replay: Replay, spans: Spans) -> None:
    server = replay().route("POST", "/v1/messages", json_reply(anthropic_message()))
    client = anthropic_client(server)

    @latencylens.model_call(provider="anthropic", model="claude-opus-4-6")
    def ask() -> Any:
        return client.messages.create(model="claude-opus-4-6", max_tokens=10, messages=MESSAGES)

    assert ask().content[0].text == "Hi"
    values = last_span_attributes(spans)
    # input = 21 uncached + 0 cache read + 188_086 cache write = 188_107
    assert values[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 188_107
    assert values[semconv.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] == 188_086
    assert values[semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 0
    assert values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 393
    assert values[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
    assert values[semconv.GEN_AI_RESPONSE_ID] == "msg_01"


def test_anthropic_stream_takes_the_cumulative_message_delta_usage(replay: Replay, spans: Spans) -> None:
    events = anthropic_stream_events(["Hello", " wor", "ld", "!"])
    # message_start 10 ms, content_block_start, ping, first text 40 ms later (TTFT 50 ms), three more
    # deltas 20 ms apart (last − first 60 ms), then stop, message_delta, message_stop at once.
    delays = [0.010, 0.0, 0.0, 0.040, 0.020, 0.020, 0.020, 0.0, 0.0, 0.0]
    server = replay().route("POST", "/v1/messages", lambda r: sse_reply(events, delays, done=False))
    client = anthropic_client(server)

    @latencylens.model_call(provider="anthropic", model="claude-opus-4-6")
    def ask() -> Any:
        return client.messages.create(model="claude-opus-4-6", max_tokens=10, messages=MESSAGES, stream=True)

    list(ask())
    received = [event.type for event in ask()]
    assert received[0] == "message_start" and received[-1] == "message_stop"
    values = last_span_attributes(spans)
    # output_tokens: message_start says 1, the cumulative message_delta says 15 → 15 (not 16).
    assert values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 15
    assert values[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 25
    assert values[semconv.GEN_AI_RESPONSE_ID] == "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY"
    assert values[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
    assert values[semconv.STREAM_CONTENT_CHUNKS] == 4
    assert_stream_timing(spans()[-1], server, ttft_s=0.050, decode_s=0.060, gap_s=0.020, output_tokens=15)


# --- Groq -----------------------------------------------------------------------------------------


def test_groq_stream_reads_x_groq_usage_on_the_final_chunk(replay: Replay, spans: Spans) -> None:
    chunks = [
        groq_stream_chunk({"role": "assistant", "content": ""}),
        groq_stream_chunk({"content": "Fast"}),
        groq_stream_chunk({"content": " and"}),
        groq_stream_chunk({"content": " low"}),
        groq_stream_chunk({"content": " latency"}),
        groq_stream_chunk({}, "stop", final=True),
    ]
    delays = [0.020, 0.030, 0.020, 0.020, 0.020, 0.0]
    server = replay().route("POST", "/openai/v1/chat/completions", lambda r: sse_reply(chunks, delays))
    client = groq.Groq(
        base_url=server.url, api_key="x", max_retries=0, http_client=httpx.Client(trust_env=False)
    )

    @latencylens.model_call(provider="groq", model="llama-3.3-70b-versatile")
    def ask() -> Any:
        return client.chat.completions.create(model="llama-3.3-70b-versatile", messages=MESSAGES, stream=True)

    list(ask())
    list(ask())
    values = last_span_attributes(spans)
    # queue 0.041905864 s → 41_905_864 ns; prompt 3_940_145 ns; completion 2_652_230_333 ns;
    # server total = queue + total_time = 41_905_864 + 2_656_170_478 = 2_698_076_342 ns.
    assert values[semconv.PROVIDER_QUEUE_NS] == 41_905_864
    assert values[semconv.PROVIDER_PREFILL_NS] == 3_940_145
    assert values[semconv.PROVIDER_DECODE_NS] == 2_652_230_333
    assert values[semconv.PROVIDER_SERVER_TOTAL_NS] == 2_698_076_342
    assert values[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 45
    assert values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 662
    assert_stream_timing(spans()[-1], server, ttft_s=0.050, decode_s=0.060, gap_s=0.020, output_tokens=662)


# --- Cerebras -------------------------------------------------------------------------------------


def cerebras_client(server: ReplayServer) -> Cerebras:
    return Cerebras(
        base_url=server.url,
        api_key="x",
        max_retries=0,
        warm_tcp_connection=False,
        http_client=httpx.Client(trust_env=False),
    )


def test_cerebras_time_info_total_includes_queue(replay: Replay, spans: Spans) -> None:
    server = replay().route("POST", "/v1/chat/completions", json_reply(cerebras_completion()))
    client = cerebras_client(server)

    @latencylens.model_call(provider="cerebras", model="gpt-oss-120b")
    def ask() -> Any:
        return client.chat.completions.create(model="gpt-oss-120b", messages=MESSAGES)

    ask()
    values = last_span_attributes(spans)
    # 0.000073161 s = 73_161 ns; 0.0010744798888888889 s = 1_074_480 ns (rounded);
    # 0.005658071111111111 s = 5_658_071 ns; total_time 0.022224903106689453 s = 22_224_903 ns, reported
    # as is (it already includes the queue, unlike Groq's).
    assert values[semconv.PROVIDER_QUEUE_NS] == 73_161
    assert values[semconv.PROVIDER_PREFILL_NS] == 1_074_480
    assert values[semconv.PROVIDER_DECODE_NS] == 5_658_071
    assert values[semconv.PROVIDER_SERVER_TOTAL_NS] == 22_224_903
    assert values[semconv.PROVENANCE_SERVER_TOTAL] == "reported"
    assert values[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 12
    assert values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 10
    assert values[semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 0


def test_cerebras_stream_final_chunk_has_usage_and_time_info(replay: Replay, spans: Spans) -> None:
    reference = cerebras_completion()
    base = {k: reference[k] for k in ("id", "created", "model", "system_fingerprint")}
    chunks: list[dict[str, Any]] = [
        {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
        for delta in (
            {"role": "assistant"},
            {"content": "a"},
            {"content": "b"},
            {"content": "c"},
            {"content": "d"},
        )
    ]
    chunks.append(
        {
            **base,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": reference["usage"],
            "time_info": reference["time_info"],
        }
    )
    delays = [0.020, 0.030, 0.020, 0.020, 0.020, 0.0]
    server = replay().route("POST", "/v1/chat/completions", lambda r: sse_reply(chunks, delays))
    client = cerebras_client(server)

    @latencylens.model_call(provider="cerebras", model="gpt-oss-120b")
    def ask() -> Any:
        return client.chat.completions.create(model="gpt-oss-120b", messages=MESSAGES, stream=True)

    list(ask())
    list(ask())
    values = last_span_attributes(spans)
    assert values[semconv.PROVIDER_SERVER_TOTAL_NS] == 22_224_903
    assert values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 10
    assert_stream_timing(spans()[-1], server, ttft_s=0.050, decode_s=0.060, gap_s=0.020, output_tokens=10)


# --- Ollama ---------------------------------------------------------------------------------------

# Ollama docs example: total 174_560_334 ns, load 101_397_084 (queue), prompt eval 13_074_791
# (prefill), eval 52_479_709 (decode); 11 prompt tokens (cache hits included), 18 generated.
OLLAMA_EXPECTED = {
    semconv.PROVIDER_SERVER_TOTAL_NS: 174_560_334,
    semconv.PROVIDER_QUEUE_NS: 101_397_084,
    semconv.PROVIDER_PREFILL_NS: 13_074_791,
    semconv.PROVIDER_DECODE_NS: 52_479_709,
    semconv.GEN_AI_USAGE_INPUT_TOKENS: 11,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 18,
    semconv.GEN_AI_RESPONSE_MODEL: "gemma4",
    semconv.GEN_AI_RESPONSE_FINISH_REASONS: ("stop",),
}


def test_ollama_generate_durations_are_nanoseconds(replay: Replay, spans: Spans) -> None:
    server = replay().route("POST", "/api/generate", json_reply(ollama_final()))
    client = ollama.Client(host=server.url, trust_env=False)

    @latencylens.model_call(provider="ollama", model="gemma4")
    def ask() -> Any:
        return client.generate(model="gemma4", prompt="hi")

    assert ask().response == "Hello! How can I help you today?"
    values = last_span_attributes(spans)
    assert {key: values[key] for key in OLLAMA_EXPECTED} == OLLAMA_EXPECTED
    assert values[semconv.PROVENANCE_QUEUE] == "reported"


def test_ollama_chat_stream(replay: Replay, spans: Spans) -> None:
    def piece(text: str) -> dict[str, Any]:
        return {
            "model": "gemma4",
            "created_at": "2025-10-17T23:14:07Z",
            "message": {"role": "assistant", "content": text},
            "done": False,
        }

    final = ollama_final("chat")
    del final["load_duration"]  # a hot model: Ollama omits the zero load_duration
    objects = [piece(""), piece("Hel"), piece("lo"), piece(" the"), piece("re"), final]
    delays = [0.020, 0.030, 0.020, 0.020, 0.020, 0.0]
    server = replay().route("POST", "/api/chat", lambda r: ndjson_reply(objects, delays))
    client = ollama.Client(host=server.url, trust_env=False)

    @latencylens.model_call(provider="ollama", model="gemma4")
    def ask() -> Any:
        return client.chat(model="gemma4", messages=MESSAGES, stream=True)

    list(ask())
    text = "".join(part.message.content for part in ask())
    assert text == "Hello there"
    values = last_span_attributes(spans)
    assert values[semconv.PROVIDER_QUEUE_NS] == 0
    assert values[semconv.PROVENANCE_QUEUE] == "derived"
    assert values[semconv.PROVIDER_DECODE_NS] == 52_479_709
    assert_stream_timing(spans()[-1], server, ttft_s=0.050, decode_s=0.060, gap_s=0.020, output_tokens=18)
