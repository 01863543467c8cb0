"""Amazon Bedrock (boto3 Converse / ConverseStream) and Gemini (google-genai) against a replay server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config
from google import genai
from google.genai import types as genai_types
from opentelemetry.sdk.trace import ReadableSpan
from provider_payloads import bedrock_converse, gemini_response
from provider_replay import (
    ReplayServer,
    assert_stream_timing,
    aws_event_frame,
    binary_reply,
    json_reply,
    sse_reply,
)

import latencylens
from latencylens import semconv

Spans = Callable[[], list[ReadableSpan]]
Replay = Callable[[], ReplayServer]
BEDROCK_MODEL = "amazon.nova-lite-v1"


def bedrock_client(server: ReplayServer) -> Any:
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=server.url,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"max_attempts": 1}, proxies={}),
    )


def test_bedrock_converse_latency_ms_is_the_server_total(replay: Replay, spans: Spans) -> None:
    server = replay().route("POST", f"/model/{BEDROCK_MODEL}/converse", json_reply(bedrock_converse()))
    client = bedrock_client(server)

    @latencylens.model_call(provider="aws.bedrock", model=BEDROCK_MODEL)
    def ask() -> Any:
        return client.converse(
            modelId=BEDROCK_MODEL, messages=[{"role": "user", "content": [{"text": "hi"}]}]
        )

    assert ask()["output"]["message"]["content"][0]["text"] == "ok"
    values = dict(spans()[-1].attributes or {})
    # metrics.latencyMs 123 ms = 123_000_000 ns; 10 in, 4 out, no cache tokens.
    assert values[semconv.PROVIDER_SERVER_TOTAL_NS] == 123_000_000
    assert values[semconv.PROVENANCE_SERVER_TOTAL] == "reported"
    assert values[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10
    assert values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert values[semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 0
    assert values[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)


def test_bedrock_converse_stream_event_stream_framing(replay: Replay, spans: Spans) -> None:
    reference = bedrock_converse()
    frames = [aws_event_frame("messageStart", {"role": "assistant"})]
    for text in ["", "o", "k", "a", "y"]:
        frames.append(aws_event_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": text}}))
    frames += [
        aws_event_frame("contentBlockStop", {"contentBlockIndex": 0}),
        aws_event_frame("messageStop", {"stopReason": "end_turn"}),
        aws_event_frame("metadata", {"usage": reference["usage"], "metrics": reference["metrics"]}),
    ]
    # messageStart 20 ms, empty delta, first text 30 ms later (TTFT 50 ms), 3 more 20 ms apart.
    delays = [0.020, 0.0, 0.030, 0.020, 0.020, 0.020, 0.0, 0.0, 0.0]
    server = replay().route(
        "POST",
        f"/model/{BEDROCK_MODEL}/converse-stream",
        lambda r: binary_reply(frames, delays, "application/vnd.amazon.eventstream"),
    )
    client = bedrock_client(server)

    @latencylens.model_call(provider="aws.bedrock", model=BEDROCK_MODEL)
    def ask() -> Any:
        return client.converse_stream(
            modelId=BEDROCK_MODEL, messages=[{"role": "user", "content": [{"text": "hi"}]}]
        )

    list(ask()["stream"])
    response = ask()
    text = "".join(
        e["contentBlockDelta"]["delta"]["text"] for e in response["stream"] if "contentBlockDelta" in e
    )
    assert text == "okay"
    values = dict(spans()[-1].attributes or {})
    assert values[semconv.PROVIDER_SERVER_TOTAL_NS] == 123_000_000
    assert values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert values[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
    # 4 output tokens over last − first = 60 ms: ITL = 20 ms.
    assert_stream_timing(spans()[-1], server, ttft_s=0.050, decode_s=0.060, gap_s=0.020, output_tokens=4)


def gemini_client(server: ReplayServer) -> genai.Client:
    return genai.Client(
        api_key="x", http_options=genai_types.HttpOptions(base_url=server.url, api_version="v1beta")
    )


GEMINI_PATH = "/v1beta/models/gemini-2.5-flash"


def test_gemini_usage_metadata(replay: Replay, spans: Spans) -> None:
    server = replay().route("POST", f"{GEMINI_PATH}:generateContent", json_reply(gemini_response("Hi")))
    client = gemini_client(server)

    @latencylens.model_call(provider="gcp.gemini", model="gemini-2.5-flash")
    def ask() -> Any:
        return client.models.generate_content(model="gemini-2.5-flash", contents="hi")

    assert ask().text == "Hi"
    values = dict(spans()[-1].attributes or {})
    # prompt 12 (4 cached among them); output = 8 candidates + 5 thoughts = 13, 5 of them reasoning.
    assert values[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 12
    assert values[semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 4
    assert values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 13
    assert values[semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] == 5
    assert values[semconv.GEN_AI_RESPONSE_MODEL] == "gemini-2.5-flash"
    assert values[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("STOP",)


def test_gemini_stream_last_usage_metadata_wins(replay: Replay, spans: Spans) -> None:
    chunks = [
        gemini_response("", usage=False, finish=False),
        gemini_response("Hel", usage=False, finish=False),
        gemini_response("lo", usage=False, finish=False),
        gemini_response(" the", usage=False, finish=False),
        gemini_response("re", usage=True, finish=True),
    ]
    delays = [0.020, 0.030, 0.020, 0.020, 0.020]
    server = replay().route(
        "POST", f"{GEMINI_PATH}:streamGenerateContent", lambda r: sse_reply(chunks, delays, done=False)
    )
    client = gemini_client(server)

    @latencylens.model_call(provider="gcp.gemini", model="gemini-2.5-flash")
    def ask() -> Any:
        return client.models.generate_content_stream(model="gemini-2.5-flash", contents="hi")

    list(ask())
    assert "".join(chunk.text or "" for chunk in ask()) == "Hello there"
    values = dict(spans()[-1].attributes or {})
    assert values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 13
    # TTFT 50 ms; last − first = 60 ms spread over 13 − 1 tokens.
    assert_stream_timing(spans()[-1], server, ttft_s=0.050, decode_s=0.060, gap_s=0.020, output_tokens=13)
