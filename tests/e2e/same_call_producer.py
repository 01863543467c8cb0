"""An app where two instrumentations see each model call: ``same_call_producer.py SCENARIO COLLECTOR``.

Scenarios: ``anthropic`` (LatencyLens's ``instrument_anthropic()`` around the real anthropic SDK,
whose own OpenTelemetry tracing is on, as it is by default), and ``openllmetry`` or
``openinference`` with ``-ours-first`` or ``-ours-last`` (which of the two patches the real openai
SDK first, so which span ends up outside). Each scenario makes one plain and one streamed call,
each in its own request, against a replay server in this process that answers with the documented
payloads, and exports with the real OTLP/HTTP exporter to the collector. It runs in its own
process because the instrumentations patch the SDKs globally. Prints one JSON line: per call, the
trace id and when the server had the request (for TTFT checks).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "providers"))

from opentelemetry import trace
from provider_payloads import (
    anthropic_message,
    anthropic_stream_events,
    openai_chat_completion,
    openai_chunk,
    openai_usage_chunk,
)
from provider_replay import ReplayServer, json_reply, sse_reply

import latencylens

MESSAGES: Any = [{"role": "user", "content": "hi"}]
ANTHROPIC_STREAM_DELAYS = [0.010, 0.0, 0.0, 0.040, 0.020, 0.020, 0.020, 0.0, 0.0, 0.0]
"""Before each event of ``anthropic_stream_events(["Hello", " wor", "ld", "!"])``: the first text
delta arrives 10 + 40 = 50 ms after the request, the last 60 ms after it."""
OPENAI_STREAM_DELAYS = [0.030, 0.0, 0.020, 0.020, 0.0]
"""Before the role chunk, "Hel", "lo", the finish chunk and the usage chunk: first content 30 ms
after the request."""


def trace_id_hex() -> str:
    return f"{trace.get_current_span().get_span_context().trace_id:032x}"


def anthropic_calls(server: ReplayServer) -> dict[str, Any]:
    import anthropic

    os.environ.pop("ANTHROPIC_OPEN_TELEMETRY", None)  # the SDK's own spans: on, its default
    latencylens.instrument_anthropic()
    client = anthropic.Anthropic(
        base_url=server.url,
        api_key="x",
        max_retries=0,
        http_client=anthropic.DefaultHttpxClient(trust_env=False),
    )
    events = anthropic_stream_events(["Hello", " wor", "ld", "!"])
    # Warm the client (its first stream imports what it needs lazily) outside the measured requests.
    server.route("POST", "/v1/messages", sse_reply(events, 0.0, done=False))
    with client.messages.create(model="claude-opus-4-6", max_tokens=9, messages=MESSAGES, stream=True) as s:
        list(s)
    server.route("POST", "/v1/messages", json_reply(anthropic_message()))
    client.messages.create(model="claude-opus-4-6", max_tokens=9, messages=MESSAGES)
    calls: dict[str, Any] = {}

    @latencylens.request(name="anthropic-plain")
    def plain() -> None:
        client.messages.create(model="claude-opus-4-6", max_tokens=9, messages=MESSAGES)
        calls["plain"] = {"trace_id": trace_id_hex()}

    @latencylens.request(name="anthropic-stream")
    def streamed() -> None:
        server.route("POST", "/v1/messages", sse_reply(events, ANTHROPIC_STREAM_DELAYS, done=False))
        with client.messages.create(
            model="claude-opus-4-6", max_tokens=9, messages=MESSAGES, stream=True
        ) as stream:
            list(stream)
        calls["stream"] = {"trace_id": trace_id_hex(), "ttft_s": 0.050}

    plain()
    streamed()
    return calls


def instrument_other(name: str) -> None:
    if name == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument()
    else:
        from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceInstrumentor

        OpenInferenceInstrumentor().instrument()


def openai_calls(server: ReplayServer, other: str, ours_first: bool) -> dict[str, Any]:
    import openai

    if ours_first:
        latencylens.instrument_openai()
        instrument_other(other)
    else:
        instrument_other(other)
        latencylens.instrument_openai()
    client = openai.OpenAI(
        base_url=server.url + "/v1",
        api_key="x",
        max_retries=0,
        http_client=openai.DefaultHttpxClient(trust_env=False),
    )
    chunks = [
        openai_chunk({"role": "assistant", "content": ""}),
        openai_chunk({"content": "Hel"}),
        openai_chunk({"content": "lo"}),
        openai_chunk({}, "stop"),
        openai_usage_chunk(),
    ]
    # Warm the client (its first stream imports what it needs lazily) outside the measured requests.
    server.route("POST", "/v1/chat/completions", sse_reply(chunks, 0.0))
    for _ in client.chat.completions.create(model="gpt-4.1", messages=MESSAGES, stream=True):
        pass
    server.route("POST", "/v1/chat/completions", json_reply(openai_chat_completion()))
    client.chat.completions.create(model="gpt-4.1", messages=MESSAGES)
    calls: dict[str, Any] = {}

    @latencylens.request(name=f"{other}-plain")
    def plain() -> None:
        client.chat.completions.create(model="gpt-4.1", messages=MESSAGES)
        calls["plain"] = {"trace_id": trace_id_hex()}

    @latencylens.request(name=f"{other}-stream")
    def streamed() -> None:
        server.route("POST", "/v1/chat/completions", sse_reply(chunks, OPENAI_STREAM_DELAYS))
        stream = client.chat.completions.create(
            model="gpt-4.1", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
        for _ in stream:
            pass
        calls["stream"] = {"trace_id": trace_id_hex(), "ttft_s": 0.030}

    plain()
    streamed()
    return calls


def main(scenario: str, collector_url: str) -> dict[str, Any]:
    latencylens.configure(service_name=f"same-call-{scenario}", endpoint=collector_url)
    server = ReplayServer()
    try:
        if scenario == "anthropic":
            calls = anthropic_calls(server)
        else:
            other, order = scenario.split("-", 1)
            calls = openai_calls(server, other, ours_first=order == "ours-first")
        # The streamed call was the last request the server had.
        calls["stream"]["received_ns"] = server.requests[-1].received_ns
    finally:
        server.close()
    provider = trace.get_tracer_provider()
    provider.force_flush()  # type: ignore[attr-defined]
    provider.shutdown()  # type: ignore[attr-defined]
    return calls


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
