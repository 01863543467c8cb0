"""An app where two instrumentations see each model call: ``same_call_producer.py SCENARIO COLLECTOR``.

Scenarios: ``anthropic`` (LatencyLens's ``instrument_anthropic()`` around the real anthropic SDK,
whose own OpenTelemetry tracing is on, as it is by default), and ``openllmetry``, ``openinference``,
``openlit`` or ``logfire`` with ``-ours-first`` or ``-ours-last`` (which of the two patches the
real openai SDK first, so which span ends up outside). The anthropic scenario makes one plain and
one streamed call, the openai ones also a stream without usage, each call in its own request,
against a replay server in this process that answers with the documented payloads, and exports
with the real OTLP/HTTP exporter to the collector. It runs in its own process because the
instrumentations patch the SDKs globally; for ``openlit`` in OpenLIT's own virtualenv (it requires
``openai<3``), with ``instrumentation/`` on ``PYTHONPATH``. Prints one JSON line: per call, the
trace id, when the server had the request and when it sent each part of the reply (for TTFT and
decode checks).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # run as a script: not under pytest

from opentelemetry import trace
from provider_payloads import (
    anthropic_message,
    anthropic_stream_events,
    openai_chat_completion,
    openai_chunk,
    openai_usage_chunk,
)
from provider_replay import Recorded, ReplayServer, Reply, json_reply, sse_reply

import latencylens

MESSAGES: Any = [{"role": "user", "content": "hi"}]
ANTHROPIC_STREAM_DELAYS = [0.010, 0.0, 0.0, 0.040, 0.020, 0.020, 0.020, 0.0, 0.0, 0.0]
"""Before each event of ``anthropic_stream_events(["Hello", " wor", "ld", "!"])``: the first text
delta arrives 10 + 40 = 50 ms after the request, the last 60 ms after it."""
OPENAI_STREAM_DELAYS = [0.030, 0.0, 0.020, 0.020, 0.0]
"""Before the role chunk, "Hel", "lo", the finish chunk and the usage chunk (sent only when asked
for): first content 30 ms after the request, the last chunk 40 ms after the first content."""
OPENAI_MODES = ("plain", "stream", "stream-no-usage")


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
    """Install the other instrumentation the way its documentation says."""
    if name == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument()
    elif name == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceInstrumentor

        OpenInferenceInstrumentor().instrument()
    elif name == "openlit":
        import openlit

        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as prices:
            prices.write("{}")  # no price list download: the tests have no internet
        # LatencyLens's provider is global already: OpenLIT reuses it (and adds no exporter).
        openlit.init(
            disable_metrics=True, disable_events=True, capture_message_content=False, pricing_json=prices.name
        )
        os.unlink(prices.name)
    elif name == "logfire":
        import logfire

        logfire.instrument_openai()
    else:
        raise SystemExit(f"unknown instrumentation {name!r}")


def openai_reply(request: Recorded) -> Reply:
    """The documented completion, or a stream whose usage chunk comes only when asked for."""
    body = request.json()
    if not body.get("stream"):
        return json_reply(openai_chat_completion())
    chunks = [
        openai_chunk({"role": "assistant", "content": ""}),
        openai_chunk({"content": "Hel"}),
        openai_chunk({"content": "lo"}),
        openai_chunk({}, "stop"),
    ]
    delays = OPENAI_STREAM_DELAYS[: len(chunks)]
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append(openai_usage_chunk())
        delays = OPENAI_STREAM_DELAYS
    return sse_reply(chunks, delays)


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
    server.route("POST", "/v1/chat/completions", openai_reply)
    calls: dict[str, Any] = {}

    def call(mode: str) -> None:
        # When the app got the first content chunk and the last chunk (after every instrumentation
        # passed them on): no span can have seen them later.
        seen: list[int] = []
        if mode == "plain":
            client.chat.completions.create(model="gpt-4.1", messages=MESSAGES)
        else:
            usage: Any = {"stream_options": {"include_usage": True}} if mode == "stream" else {}
            for chunk in client.chat.completions.create(
                model="gpt-4.1", messages=MESSAGES, stream=True, **usage
            ):
                now = time.time_ns()
                if not seen and chunk.choices and chunk.choices[0].delta.content:
                    seen.append(now)
                last_seen = now
            seen.append(last_seen)
        request = server.requests[-1]
        calls[mode] = {
            "trace_id": trace_id_hex(),
            "received_ns": request.received_ns,
            "sent_ns": request.sent_ns,
            "seen_ns": seen,
            "ttft_s": OPENAI_STREAM_DELAYS[0],
        }

    # Warm every path (the SDK and the instrumentations import and set up what they need on first
    # use, while the app reads the stream) outside the measured requests.
    for mode in OPENAI_MODES:
        call(mode)
    for mode in OPENAI_MODES:
        latencylens.request(name=f"{other}-{mode}")(call)(mode)
    return calls


def main(scenario: str, collector_url: str) -> dict[str, Any]:
    other = scenario.split("-", 1)[0]
    if other == "logfire":
        import logfire

        # Logfire's own provider; LatencyLens exports from the SDK provider behind it.
        logfire.configure(
            send_to_logfire=False,
            console=False,
            service_name=f"same-call-{scenario}",
            inspect_arguments=False,
        )
    provider = latencylens.configure(service_name=f"same-call-{scenario}", endpoint=collector_url)
    server = ReplayServer()
    try:
        if scenario == "anthropic":
            calls = anthropic_calls(server)
            # The streamed call was the last request the server had.
            calls["stream"]["received_ns"] = server.requests[-1].received_ns
        else:
            calls = openai_calls(server, other, ours_first=scenario.endswith("-ours-first"))
    finally:
        server.close()
    provider.force_flush()
    provider.shutdown()
    return calls


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
