"""The sender through the real SDKs: request bodies on the wire, spans tagged with the run.

A loopback server replays the providers' documented streams (tests/support/provider_payloads.py);
the spans are the SDK's own, caught by the in-memory exporter of the test session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from provider_payloads import anthropic_stream_events, openai_chunk, openai_usage_chunk
from provider_replay import ReplayServer, sse_reply

from latencylens import semconv
from latencylens_collector.traffic.prompt import word_count
from latencylens_collector.traffic.sender import Sender
from latencylens_collector.traffic.shape import RequestShape
from latencylens_collector.traffic.target import Target

SOURCE = "0af7651916cd43dd8448eb211c80319c"


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    replay = ReplayServer()
    yield replay
    replay.close()


def by_kind(finished: list[ReadableSpan]) -> dict[str, ReadableSpan]:
    return {str(span.attributes.get(semconv.SPAN_KIND)): span for span in finished if span.attributes}


def test_anthropic_call_with_a_cached_prefix(
    server: ReplayServer, spans: Callable[[], list[ReadableSpan]]
) -> None:
    server.route("POST", "/v1/messages", sse_reply(anthropic_stream_events(["Hel", "lo"]), 0.0, done=False))
    target = Target(base_url=server.url, model="claude-opus-4-6", api="anthropic", api_key="k")
    shape = RequestShape(0, 1500, 15, cached_input_tokens=1100, source_trace_id=SOURCE, route="POST /ask")
    Sender(target, "run-a").send(shape)

    body = server.requests[0].json()
    assert body["max_tokens"] == 15 and body["stream"] is True
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert word_count(body["system"][0]["text"]) == 1100
    assert word_count(body["messages"][0]["content"]) == 400
    found = by_kind(spans())
    root, model = found[semconv.KIND_REQUEST], found[semconv.KIND_MODEL]
    assert root.name == "POST /ask"
    assert model.parent is not None and model.parent.span_id == root.context.span_id
    for span in (root, model):
        assert span.attributes[semconv.REPLAY_RUN_ID] == "run-a"
        assert span.attributes[semconv.REPLAY_SOURCE_TRACE_ID] == SOURCE
    assert model.attributes[semconv.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert model.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 15  # message_delta's cumulative usage


def test_openai_compatible_call_to_vllm(
    server: ReplayServer, spans: Callable[[], list[ReadableSpan]]
) -> None:
    events = [openai_chunk({"role": "assistant", "content": ""}), openai_chunk({"content": "Hi"})]
    events += [openai_chunk({}, "stop"), openai_usage_chunk()]
    server.route("POST", "/v1/chat/completions", sse_reply(events, 0.0))
    target = Target(base_url=f"{server.url}/v1", model="llama", provider="vllm")
    Sender(target, "run-b").send(RequestShape(0, 300, 9, source_trace_id=SOURCE))

    body = server.requests[0].json()
    assert (body["max_tokens"], body["min_tokens"], body["ignore_eos"]) == (9, 9, True)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert word_count(body["messages"][0]["content"]) == 300
    found = by_kind(spans())
    assert found[semconv.KIND_REQUEST].name == "replay"  # no recorded route
    model = found[semconv.KIND_MODEL]
    assert model.attributes[semconv.GEN_AI_PROVIDER_NAME] == "vllm"
    assert model.attributes[semconv.REPLAY_RUN_ID] == "run-b"
    assert semconv.STREAM_FIRST_CONTENT_NS in model.attributes


def test_untagged_sender_marks_nothing(server: ReplayServer, spans: Callable[[], list[ReadableSpan]]) -> None:
    server.route(
        "POST", "/v1/chat/completions", sse_reply([openai_chunk({"content": "x"}), openai_usage_chunk()])
    )
    Sender(Target(base_url=f"{server.url}/v1", model="m"), None).send(
        RequestShape(0, 5, 1, source_trace_id=SOURCE)
    )
    assert all(semconv.REPLAY_RUN_ID not in (span.attributes or {}) for span in spans())
    assert "extra_body" not in server.requests[0].json() and "ignore_eos" not in server.requests[0].json()
