"""A TypeScript app on Vercel's AI SDK, traced by the SDK's own OpenTelemetry integrations (the
current GenAI one and the legacy ``ai.*`` one), exporting over OTLP/HTTP (protobuf, and the
JavaScript SDK's JSON) to a real collector. The real ``ai``, ``@ai-sdk/openai`` and
``@ai-sdk/otel`` packages run in Node (``ai_sdk/app.mjs``) against an OpenAI-compatible replay
server: one chat request whose agent asks for a tool, runs it and answers. The request row must
show two model calls, their first chunks where the server sent them, the tool, the provider's
usage, and no prompt or completion stored.

Needs Node.js and the packages of ``ai_sdk/package-lock.json`` (``make ai-sdk-node``, run by
``make test``); skipped with that reason otherwise."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from provider_payloads import OPENAI_MODEL, openai_chunk, openai_usage_chunk
from provider_replay import MS, Recorded, ReplayServer, Reply, sse_reply

from latencylens_collector import queries
from latencylens_collector.analysis.conventions.content import is_content_key
from latencylens_collector.analysis.conventions.reading import canonical_attributes, first_chunk_ns
from latencylens_collector.analysis.records import DEFAULT_PROJECT

APP = Path(__file__).with_name("ai_sdk") / "app.mjs"
NODE_MODULES = APP.parent / "node_modules"
TOLERANCE_NS = 40 * MS
"""Node's reading lag between the server's write and the AI SDK's clock reading (an event loop
shared with the exporter, on a loaded machine); every injected delay is 100 ms or more."""
FIRST_TOOL_S, FIRST_TEXT_S, TEXT_DECODE_S = 0.3, 0.25, 0.15
"""When the server sends the tool call's first chunk, the answer's first text, and (after it) its
last."""


def _tool_call_reply() -> Reply:
    """The first call: the model asks for the weather tool (OpenAI's streamed tool-call chunks:
    the call's id and name, its arguments, the finish reason), then the documented usage chunk."""
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "weather", "arguments": ""}}
    return sse_reply(
        [
            openai_chunk({"role": "assistant", "content": None, "tool_calls": [call]}),
            openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":"Paris"}'}}]}),
            openai_chunk({}, "tool_calls"),
            openai_usage_chunk(),
        ],
        [FIRST_TOOL_S, 0.05, 0.01, 0.0],
    )


def _answer_reply() -> Reply:
    """The second call: the answer in two text chunks 150 ms apart, then the usage chunk."""
    return sse_reply(
        [
            openai_chunk({"role": "assistant", "content": "Sunny,"}),
            openai_chunk({"content": " 21 degrees."}),
            openai_chunk({}, "stop"),
            openai_usage_chunk(),
        ],
        [FIRST_TEXT_S, TEXT_DECODE_S, 0.01, 0.0],
    )


@pytest.fixture
def provider() -> ReplayServer:
    replies = iter([_tool_call_reply(), _answer_reply()])

    def next_reply(_request: Recorded) -> Reply:
        return next(replies)

    server = ReplayServer().route("POST", "/v1/chat/completions", next_reply)
    yield server
    server.close()


def _run_app(collector, provider: ReplayServer, telemetry: str, encoding: str) -> str:
    node = shutil.which("node")
    if node is None or not NODE_MODULES.is_dir():
        pytest.skip("Node.js or the AI SDK's packages are missing (make ai-sdk-node)")
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("OTEL_")},
        "PROVIDER_URL": provider.url,
        "OTLP_URL": f"{collector.url}/v1/traces",
        "TELEMETRY": telemetry,
        "OTLP_ENCODING": encoding,
    }
    done = subprocess.run([node, str(APP)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("telemetry", "encoding"), [("genai", "protobuf"), ("legacy", "protobuf"), ("legacy", "json")]
)
def test_an_ai_sdk_agent_request_is_attributed(
    collector, provider: ReplayServer, telemetry: str, encoding: str
) -> None:
    """``encoding``: the JavaScript SDK's OTLP/HTTP exporter, protobuf or its own JSON."""
    trace_id = _run_app(collector, provider, telemetry, encoding)
    detail = queries.request_detail(collector.store, DEFAULT_PROJECT, trace_id)
    assert detail is not None
    assert (detail.name, detail.service) == ("POST /api/chat", "ai-sdk-chat")
    stored = collector.store.spans_of_traces([bytes.fromhex(trace_id)], project=DEFAULT_PROJECT)
    kinds = sorted(row.kind for row in stored)
    assert kinds.count("model") == 2 and kinds.count("tool") == 1 and kinds.count("request") == 1, kinds
    # Both calls answered with the documented usage chunk (19 prompt, 10 completion tokens each),
    # from the provider openai (the legacy spans say openai.chat) and the response's model.
    assert (detail.model_calls, detail.input_tokens, detail.output_tokens) == (2, 38, 20)
    assert (detail.provider, detail.model) == ("openai", OPENAI_MODEL)
    # Each call's first output where the server sent it, on the AI SDK's clock from the call's
    # start. Its first output is the first non-empty text or tool-argument delta: the tool call's
    # arguments (part 1, 350 ms after the request: its id and name came 50 ms before) and the
    # answer's first text (part 0, 250 ms).
    calls = sorted((row for row in stored if row.kind == "model"), key=lambda row: row.start_ns)
    for call, request, first_part in zip(calls, provider.requests, (1, 0), strict=True):
        first = first_chunk_ns(call.attributes)
        assert first is not None, call.attributes
        sent = request.sent_ns[first_part] - call.start_ns
        assert abs(first - sent) <= TOLERANCE_NS, (first / MS, sent / MS)
    # The answer's decode: from its first text to the stream's end, 150 ms and the finish chunks.
    answer = canonical_attributes(calls[1].attributes, calls[1].duration_ns)
    decode_ns = int(answer["latencylens.stream.last_chunk_ns"]) - int(
        answer["latencylens.stream.first_content_ns"]
    )
    sent_decode = provider.requests[1].sent_ns[-1] - provider.requests[1].sent_ns[0]
    assert abs(decode_ns - sent_decode) <= TOLERANCE_NS, (decode_ns / MS, sent_decode / MS)
    assert detail.parts["decode"] > 0 and detail.ttft_ns is not None
    # The tool's own 100 ms (its execute waits 100 ms) is tool time on the critical path (the
    # legacy format nests the tool in its provider call, which stays open until the tool returns).
    assert 100 * MS <= detail.parts["tool"] <= 100 * MS + TOLERANCE_NS, detail.parts
    assert sum(detail.parts.values()) == detail.e2e_ns
    # No prompt, completion or tool argument was stored; what was dropped is counted.
    assert not [key for row in stored for key in row.attributes if is_content_key(key)]
    assert sum(int(row.attributes.get("latencylens.content.dropped_attributes", 0)) for row in stored) > 0
