"""NVIDIA NIM for LLMs through ``instrument_httpx`` and the real openai SDK: the experimental
per-request ``stats`` block, replied whole and streamed, and a vLLM-backed NIM's ``metrics`` block."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
from opentelemetry.sdk.trace import ReadableSpan
from provider_payloads import NIM_STATS, VLLM_METRICS, nim_chat_completion
from provider_replay import ReplayServer, Reply, assert_stream_timing, json_reply, sse_reply

import latencylens
from latencylens import semconv

Spans = Callable[[], list[ReadableSpan]]
Replay = Callable[[], ReplayServer]
MESSAGES: Any = [{"role": "user", "content": "hi"}]
MODEL = "meta/llama-3.1-8b-instruct"

# stats: time_in_queue_in_ms 10.0 → 10_000_000 ns; generation_time_in_ms 800.0 ("total time for
# LLM processing", prefill + decode not split) → 800_000_000 ns; 512 prompt and 64 output tokens.
EXPECTED = {
    semconv.PROVIDER_QUEUE_NS: 10_000_000,
    semconv.PROVIDER_INFERENCE_NS: 800_000_000,
    semconv.GEN_AI_USAGE_INPUT_TOKENS: 512,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 64,
    semconv.GEN_AI_PROVIDER_NAME: "nim",
}


def nim_stream() -> Reply:
    """Content chunks, ``stats`` on the finishing chunk and ``usage`` on its own last chunk (the
    ``stream_options.include_usage`` shape), so the two are read from different chunks."""
    base = {"id": "chat-5ba1c0a4", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
    chunks: list[dict[str, Any]] = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        for delta in ({"role": "assistant", "content": ""}, {"content": "a"}, {"content": "b"})
    ]
    chunks.append(
        {
            **base,
            "choices": [{"index": 0, "delta": {"content": "c"}, "finish_reason": "stop"}],
            "stats": dict(NIM_STATS),
        }
    )
    usage = {"prompt_tokens": 512, "completion_tokens": 64, "total_tokens": 576}
    chunks.append({**base, "choices": [], "usage": usage})
    return sse_reply(chunks, [0.010, 0.030, 0.020, 0.020, 0.0])


def nim_server(replay: Replay, body: dict[str, Any]) -> ReplayServer:
    return replay().route(
        "POST", "/v1/chat/completions", lambda r: nim_stream() if r.json().get("stream") else json_reply(body)
    )


def client_for(server: ReplayServer) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.url + "/v1",
        api_key="-",
        max_retries=0,
        http_client=openai.DefaultHttpxClient(trust_env=False),
    )


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_stats_give_queue_and_unsplit_inference(replay: Replay, spans: Spans, undo: Any) -> None:
    server = nim_server(replay, nim_chat_completion())
    undo(latencylens.instrument_httpx(base_urls=[server.url + "/v1"], provider="nim"))
    reply = client_for(server).chat.completions.create(model=MODEL, messages=MESSAGES)
    assert reply.choices[0].message.content == "Hi"
    values = attributes(spans()[0])
    assert {key: values.get(key) for key in EXPECTED} == EXPECTED
    assert values[semconv.PROVENANCE_INFERENCE] == "reported"
    # TTFT "from processing start" has no documented origin against the queue: no split is guessed
    for key in (semconv.PROVIDER_PREFILL_NS, semconv.PROVIDER_DECODE_NS, semconv.PROVIDER_SERVER_TOTAL_NS):
        assert key not in values
    assert semconv.PROVIDER_FIELDS_MISSING not in values


def test_stats_alone_give_the_token_counts(replay: Replay, spans: Spans, undo: Any) -> None:
    server = nim_server(replay, nim_chat_completion(usage=False))
    undo(latencylens.instrument_httpx(base_urls=[server.url + "/v1"], provider="nvidia.nim"))
    client_for(server).chat.completions.create(model=MODEL, messages=MESSAGES)
    values = attributes(spans()[0])
    # llm_input_token_length 512, llm_output_token_length 64
    assert values[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 512
    assert values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 64
    assert "stats.llm_input_token_length" in values[semconv.PROVIDER_FIELDS_REPORTED]
    assert values[semconv.GEN_AI_PROVIDER_NAME] == "nvidia.nim"


def test_stream_reads_stats_and_usage_from_different_chunks(replay: Replay, spans: Spans, undo: Any) -> None:
    server = nim_server(replay, nim_chat_completion())
    undo(latencylens.instrument_httpx(base_urls=[server.url + "/v1"], provider="nim"))
    client = client_for(server)
    for _ in range(2):  # the first call warms the client
        stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "abc"
    span = spans()[-1]
    values = attributes(span)
    assert {key: values.get(key) for key in EXPECTED} == EXPECTED
    assert values[semconv.STREAM_END_REASON] == "completed"
    # role chunk at 10 ms, "a" 30 ms later (TTFT 40 ms), "b" and "c" 20 ms apart; 64 tokens.
    assert_stream_timing(span, server, ttft_s=0.040, decode_s=0.040, gap_s=0.020, output_tokens=64)


def test_vllm_backed_nim_metrics_and_a_reply_without_either_block(
    replay: Replay, spans: Spans, undo: Any
) -> None:
    with_metrics = {**nim_chat_completion(), "metrics": dict(VLLM_METRICS)}
    del with_metrics["stats"]
    plain = nim_chat_completion()
    del plain["stats"]
    server = replay()
    server.route("POST", "/a/v1/chat/completions", json_reply(with_metrics))
    server.route("POST", "/b/v1/chat/completions", json_reply(plain))
    undo(latencylens.instrument_httpx(base_urls=[server.url], provider="nim"))
    client_for_path = [
        openai.OpenAI(
            base_url=f"{server.url}/{path}/v1",
            api_key="-",
            max_retries=0,
            http_client=openai.DefaultHttpxClient(trust_env=False),
        )
        for path in ("a", "b")
    ]
    for client in client_for_path:
        client.chat.completions.create(model=MODEL, messages=MESSAGES)
    vllm_span, plain_span = spans()
    values = attributes(vllm_span)
    # vLLM's metrics: queue_time_ms 12.3, time_to_first_token_ms 85.2 (from scheduling: prefill),
    # generation_time_ms 1240.5 (decode), in ns
    assert values[semconv.PROVIDER_QUEUE_NS] == 12_300_000
    assert values[semconv.PROVIDER_PREFILL_NS] == 85_200_000
    assert values[semconv.PROVIDER_DECODE_NS] == 1_240_500_000
    values = attributes(plain_span)
    assert values[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 512
    assert values[semconv.PROVIDER_FIELDS_MISSING] == ("stats.generation_time_in_ms",)
    assert semconv.PROVIDER_INFERENCE_NS not in values
