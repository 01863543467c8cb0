"""The real ``openai`` client against a local server replaying Groq's API-reference response."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

import latencylens
from latencylens import semconv

Spans = Callable[[], list[ReadableSpan]]
Serve = Callable[..., Any]

MODEL = "openai/gpt-oss-20b"
COMPLETION_ID = "chatcmpl-f51b2cd2-bef7-417e-964e-a08f0b513c22"
USAGE = {
    "queue_time": 0.037493756,
    "prompt_tokens": 18,
    "prompt_time": 0.000680594,
    "completion_tokens": 556,
    "completion_time": 0.463333333,
    "total_tokens": 574,
    "total_time": 0.464013927,
}
RESPONSE = {
    "id": COMPLETION_ID,
    "object": "chat.completion",
    "created": 1730241104,
    "model": MODEL,
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Fast..."}, "finish_reason": "stop"}
    ],
    "usage": USAGE,
    "system_fingerprint": "fp_179b0f92c9",
    "x_groq": {"id": "req_01jbd6g2qdfw2adyrt2az8hz4w"},
}


def sse_chunks() -> list[dict[str, Any]]:
    """Groq's stream shape: role chunk, content chunks, final chunk with ``x_groq.usage``."""
    base = {"id": COMPLETION_ID, "object": "chat.completion.chunk", "created": 1730241104, "model": MODEL}
    deltas: list[tuple[dict[str, Any], str | None]] = [
        ({"role": "assistant", "content": ""}, None),
        ({"content": "Fast"}, None),
        ({"content": " models"}, None),
        ({}, "stop"),
    ]
    chunks = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": f}]} for d, f in deltas]
    chunks[0]["x_groq"] = {"id": "req_01jbd6g2qdfw2adyrt2az8hz4w"}
    chunks[-1]["x_groq"] = {"id": "req_01jbd6g2qdfw2adyrt2az8hz4w", "usage": copy.deepcopy(USAGE)}
    return chunks


def groq_like(path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], list[bytes]]:
    assert path == "/openai/v1/chat/completions"
    if json.loads(body).get("stream"):
        parts = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in sse_chunks()] + [b"data: [DONE]\n\n"]
        return 200, {"content-type": "text/event-stream"}, parts
    payload = json.dumps(RESPONSE).encode()
    return 200, {"content-type": "application/json", "content-length": str(len(payload))}, [payload]


@pytest.fixture
def client(serve: Serve) -> Any:
    server = serve(groq_like)
    http_client = openai.DefaultHttpxClient(trust_env=False)
    yield openai.OpenAI(
        base_url=f"{server.url}/openai/v1", api_key="x", max_retries=0, http_client=http_client
    )
    http_client.close()


# Groq reference arithmetic: 37_493_756 ns queue + 464_013_927 ns total (prompt + completion) = 501_507_683.
EXPECTED_COMMON = {
    semconv.SPAN_KIND: semconv.KIND_MODEL,
    semconv.GEN_AI_OPERATION_NAME: "chat",
    semconv.GEN_AI_PROVIDER_NAME: "groq",
    semconv.GEN_AI_REQUEST_MODEL: MODEL,
    semconv.GEN_AI_RESPONSE_MODEL: MODEL,
    semconv.GEN_AI_RESPONSE_ID: COMPLETION_ID,
    semconv.GEN_AI_RESPONSE_FINISH_REASONS: ("stop",),
    semconv.GEN_AI_USAGE_INPUT_TOKENS: 18,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 556,
    semconv.PROVIDER_QUEUE_NS: 37_493_756,
    semconv.PROVIDER_PREFILL_NS: 680_594,
    semconv.PROVIDER_DECODE_NS: 463_333_333,
    semconv.PROVIDER_SERVER_TOTAL_NS: 501_507_683,
    semconv.PROVENANCE_QUEUE: semconv.SOURCE_REPORTED,
    semconv.PROVENANCE_PREFILL: semconv.SOURCE_REPORTED,
    semconv.PROVENANCE_DECODE: semconv.SOURCE_REPORTED,
    semconv.PROVENANCE_SERVER_TOTAL: semconv.SOURCE_DERIVED,  # queue_time + total_time
}
TIMED_FIELDS = (
    "prompt_tokens",
    "completion_tokens",
    "queue_time",
    "prompt_time",
    "completion_time",
    "total_time",
)


def test_non_streaming_call(client: openai.OpenAI, spans: Spans) -> None:
    @latencylens.model_call(provider="groq", model=MODEL)
    def ask() -> Any:
        return client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])

    response = ask()
    assert isinstance(response, openai.types.chat.ChatCompletion)
    assert response.choices[0].message.content == "Fast..."
    (span,) = spans()
    assert span.name == f"chat {MODEL}"
    assert span.kind is SpanKind.CLIENT
    assert dict(span.attributes or {}) == {
        **EXPECTED_COMMON,
        semconv.GEN_AI_REQUEST_STREAM: False,
        semconv.PROVIDER_FIELDS_REPORTED: tuple(f"usage.{name}" for name in TIMED_FIELDS),
    }


def test_streaming_call(client: openai.OpenAI, spans: Spans) -> None:
    @latencylens.model_call(provider="groq", model=MODEL)
    def ask() -> Any:
        return client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=True
        )

    with ask() as stream:
        assert stream.response.status_code == 200  # attribute access reaches the SDK stream
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream)
    assert text == "Fast models"
    (span,) = spans()
    values: dict[str, Any] = dict(span.attributes or {})
    first = values.pop(semconv.STREAM_FIRST_CONTENT_NS)
    last = values.pop(semconv.STREAM_LAST_CHUNK_NS)
    ttfc = values.pop(semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK)
    assert 0 < first <= last <= (span.end_time or 0) - (span.start_time or 0)
    assert ttfc == first / 1e9
    # 556 output tokens from x_groq.usage: ITL = (last − first) // 555; rate = 556 / e2e seconds.
    assert values.pop(semconv.STREAM_ITL_NS) == (last - first) // 555
    assert values.pop(semconv.STREAM_OUTPUT_TOKENS_PER_SECOND) == 556 * 1e9 / last
    gap = values.pop(semconv.STREAM_GAP_MAX_NS)  # two content chunks: one gap
    for key in (semconv.STREAM_GAP_MEAN_NS, semconv.STREAM_GAP_P50_NS, semconv.STREAM_GAP_P90_NS):
        assert values.pop(key) == gap
    assert values.pop(semconv.STREAM_GAP_P99_NS) == gap
    assert values == {
        **EXPECTED_COMMON,
        semconv.GEN_AI_REQUEST_STREAM: True,
        semconv.STREAM_CHUNKS: 4,
        semconv.STREAM_CONTENT_CHUNKS: 2,
        semconv.STREAM_COMPLETED: True,
        semconv.STREAM_END_REASON: "completed",
        semconv.PROVENANCE_TTFT: "measured",
        semconv.PROVENANCE_ITL: "measured",
        semconv.PROVIDER_FIELDS_REPORTED: tuple(f"x_groq.usage.{name}" for name in TIMED_FIELDS),
    }


async def test_async_streaming_call(serve: Serve, spans: Spans) -> None:
    server = serve(groq_like)
    async with openai.DefaultAsyncHttpxClient(trust_env=False) as http_client:
        client = openai.AsyncOpenAI(
            base_url=f"{server.url}/openai/v1", api_key="x", max_retries=0, http_client=http_client
        )

        @latencylens.model_call(provider="groq", model=MODEL)
        async def ask() -> Any:
            return await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=True
            )

        stream = await ask()
        chunks = [chunk async for chunk in stream]
    assert len(chunks) == 4
    values = spans()[0].attributes or {}
    assert values[semconv.STREAM_COMPLETED] is True
    assert values[semconv.PROVIDER_SERVER_TOTAL_NS] == 501_507_683
