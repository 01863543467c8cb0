"""Message content is dropped at ingest unless the collector is told to store it.

Unit part: every attribute and event name listed in ``conventions/content.py`` is dropped from
decoded spans, with its count and UTF-8 size kept; names that only look alike stay; the opt-in
keeps content cut to its cap. End to end: the real OpenLLMetry, OpenInference, Logfire and OpenLIT
instrumentations (each in a process of its own, ``content_producer.py``) record a non-streamed
call and a stream of the real ``openai`` SDK whose prompt and answer hold a secret, and export
with the real OTLP/HTTP exporter to a real collector: the secret is in no column of ``spans`` or
``requests`` and in no API answer; with ``store_content`` it is there. Over OTLP/gRPC (the real
gRPC exporter) the same setting applies.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.sdk.trace.export import SpanExportResult
from otlp_builders import MS, chat_trace, export_request, new_span_id, recent_base_ns, span, to_otlp_json
from pipeline_helpers import grpc_target, wait_until
from provider_payloads import openai_chat_completion, openai_chunk, openai_usage_chunk
from provider_replay import Recorded, ReplayServer, Reply, json_reply, sse_reply

from latencylens_collector.analysis.conventions import content
from latencylens_collector.intake import otlp
from latencylens_collector.settings import Settings

SECRET = "ZEBRA-7f3a9c21-SECRET"
"""ASCII only: a JSON-escaped form of it would slip past the searches below."""
WIDE_SECRET = "geheim-ÆØÅ-☃"
"""For sizes: 6 ASCII + 1 + 2·3 + 1 + 3 = UTF-8 bytes 6 + 1 + 6 + 1 + 3 = 17 (12 characters)."""
REPO = Path(__file__).resolve().parents[4]
PRODUCER = Path(__file__).with_name("content_producer.py")
OPENLIT_PYTHON = REPO / ".venv-openlit" / "bin" / "python"
MODULES = {
    "openllmetry": "opentelemetry.instrumentation.openai",
    "openinference": "openinference.instrumentation.openai",
    "logfire": "logfire",
}
INSTRUMENTATIONS = ("openllmetry", "openinference", "logfire", "openlit")

INDEXED_EXAMPLES = (
    "gen_ai.prompt.0.content",
    "gen_ai.completion.1.content",
    "llm.prompts.0.content",
    "llm.completions.0.content",
    "llm.input_messages.0.message.content",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
    "llm.prompts.0.prompt.text",
    "llm.choices.0.completion.text",
    "retrieval.documents.3.document.content",
    "reranker.input_documents.0.document.content",
    "reranker.output_documents.0.document.content",
    "embedding.embeddings.0.embedding.text",
)
"""One key per indexed family in ``content.INDEXED``."""
LOOK_ALIKES = {
    "gen_ai.prompt.name": "analyze-code",  # GenAI: the prompt's name, not its text
    "gen_ai.prompt.prompt_filter_results": "[]",  # OpenLLMetry: filter verdicts
    "retrieval.documents.3.document.id": "doc-9",
    "retrieval.documents.3.document.score": "0.9",
    "embedding.embeddings.0.embedding.vector": "[0.1]",
    "input.mime_type": "text/plain",
    "llm.prompt_template.version": "v3",
    "logfire.json_schema": '{"properties":{"gen_ai.input.messages":{"type":"array"}}}',
    "gen_ai.usage.input_tokens": "19",
}
"""Attributes that share a prefix with content but are not content: kept."""


def _kv(key: str, text: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=text))


def _decoded(limits: otlp.Limits | None = None, as_json: bool = False) -> otlp.DecodedBatch:
    """The chat trace with every content name on its model span (value: the wide secret) and a
    content event and a chunk event."""
    request = export_request(chat_trace(recent_base_ns()))
    spans = request.resource_spans[0].scope_spans[0].spans
    model = next(span for span in spans if span.name.startswith("chat"))
    names = sorted(content.CONTENT_KEYS) + list(INDEXED_EXAMPLES)
    model.attributes.extend(_kv(key, WIDE_SECRET) for key in names)
    model.attributes.extend(_kv(key, value) for key, value in LOOK_ALIKES.items())
    start = model.start_time_unix_nano
    user = model.events.add(name="gen_ai.user.message", time_unix_nano=start + 1)
    user.attributes.extend([_kv("content", WIDE_SECRET), _kv("role", "user"), _kv("gen_ai.system", "openai")])
    chunk = model.events.add(name="gen_ai.content.completion.chunk", time_unix_nano=start + 2)
    chunk.attributes.append(_kv("gen_ai.completion.0.content", WIDE_SECRET))
    body = json.dumps(to_otlp_json(request)).encode() if as_json else request.SerializeToString()
    return otlp.decode(body, as_json=as_json, limits=limits)


@pytest.mark.parametrize("as_json", [False, True], ids=["protobuf", "json"])
def test_every_listed_content_name_is_dropped_with_its_size(as_json: bool) -> None:
    batch = _decoded(as_json=as_json)
    assert WIDE_SECRET not in repr(batch.spans)
    [model] = [row for row in batch.spans if row.kind == "model"]
    names = len(content.CONTENT_KEYS) + len(INDEXED_EXAMPLES)
    assert not any(content.is_content_key(key) for key in model.attributes)
    assert {key: model.attributes[key] for key in LOOK_ALIKES} == LOOK_ALIKES
    assert model.attributes[content.DROPPED_ATTRIBUTES] == str(names)
    assert model.attributes[content.DROPPED_BYTES] == str(17 * names)
    user, chunk = model.events
    # A content event keeps who and which role, never the message.
    assert user.attributes == {
        "role": "user",
        "gen_ai.system": "openai",
        content.DROPPED_ATTRIBUTES: "1",
        content.DROPPED_BYTES: "17",
    }
    assert chunk.attributes == {content.DROPPED_ATTRIBUTES: "1", content.DROPPED_BYTES: "17"}
    assert (batch.content.attributes, batch.content.bytes) == (names + 2, 17 * (names + 2))
    assert batch.warnings == {}  # a policy, not a repair: nothing to report to the sender


def test_with_the_opt_in_content_is_kept_and_cut_to_the_cap() -> None:
    # A 10-byte cap: the wide secret (17 bytes) keeps "geheim-Æ" (6 + 1 + 2 = 9 bytes; Ø would make 11).
    batch = _decoded(otlp.Limits(store_content=True, max_content_bytes=10))
    [model] = [row for row in batch.spans if row.kind == "model"]
    cut = "geheim-Æ" + otlp.TRUNCATION_MARKER.format(dropped=8)
    assert model.attributes["gen_ai.input.messages"] == cut
    assert model.attributes["llm.input_messages.0.message.content"] == cut
    assert content.DROPPED_BYTES not in model.attributes
    assert model.events[0].attributes["content"] == cut
    names = len(content.CONTENT_KEYS) + len(INDEXED_EXAMPLES)
    assert (batch.content.attributes, batch.content.bytes) == (0, 8 * (names + 2))
    whole = _decoded(otlp.Limits(store_content=True))
    [model] = [row for row in whole.spans if row.kind == "model"]
    assert model.attributes["gen_ai.output.messages"] == WIDE_SECRET


def test_the_setting() -> None:
    assert Settings(environ={}).store_content is False
    opted_in = Settings(environ={"LATENCYLENS_STORE_CONTENT": "true", "LATENCYLENS_CONTENT_MAX_BYTES": "512"})
    assert (opted_in.store_content, opted_in.content_max_bytes) == (True, 512)
    limits = otlp.Limits.of(opted_in, now_ns=1)
    assert (limits.store_content, limits.max_content_bytes, limits.now_ns) == (True, 512, 1)
    assert Settings(store_content=False, environ={"LATENCYLENS_STORE_CONTENT": "true"}).store_content is False


def test_the_docs_list_every_name() -> None:
    section = (REPO / "docs" / "conventions.md").read_text().split("## Content", 1)[1]
    names = content.CONTENT_KEYS | set(content.INDEXED) | content.CONTENT_EVENTS | content.EVENT_KEPT_KEYS
    assert sorted(name for name in names if f"`{name}`" not in section) == []


# --- end to end, with the real instrumentations ---------------------------------------------------
def reply(request: Recorded) -> Reply:
    body = request.json()
    if not body.get("stream"):
        answer = openai_chat_completion()
        answer["choices"][0]["message"]["content"] = f"The code is {SECRET}."
        return json_reply(answer)
    pieces = ["The code is ", SECRET, "."]
    chunks = [openai_chunk({"role": "assistant", "content": ""})]
    chunks += [openai_chunk({"content": piece}) for piece in pieces]
    chunks += [openai_chunk({}, "stop"), openai_usage_chunk()]
    return sse_reply(chunks, 0.005)


@pytest.fixture(scope="module")
def provider_url() -> Iterator[str]:
    server = ReplayServer().route("POST", "/v1/chat/completions", reply)
    try:
        yield f"{server.url}/v1"
    finally:
        server.close()


def _python_for(name: str) -> str:
    if name == "openlit":
        if not OPENLIT_PYTHON.exists():
            pytest.skip(f"OpenLIT runs in its own virtualenv: {OPENLIT_PYTHON} is missing")
        return str(OPENLIT_PYTHON)
    if importlib.util.find_spec(MODULES[name]) is None:
        pytest.skip(f"{MODULES[name]} is not installed (pip install -e '.[test]')")
    return sys.executable


def produce(name: str, collector_url: str, provider_url: str) -> dict[str, str]:
    """Trace ids of the two calls, once the collector has written their request rows."""
    done = subprocess.run(
        [_python_for(name), str(PRODUCER), name, collector_url, provider_url, SECRET],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    traces: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])["traces"]

    def all_there() -> bool:
        return all(httpx.get(f"{collector_url}/api/requests/{t}").status_code == 200 for t in traces.values())

    wait_until(all_there, what="both requests in the API")
    return traces


def rows_with(store: Any, table: str, text: str) -> int:
    """Rows of ``table`` in which ``text`` appears in any column (every column as text)."""
    sql = (
        f"SELECT count() AS n FROM {store.database}.{table} "
        "WHERE position(toString(tuple(*)), {s:String}) > 0"
    )
    return int(store.query(sql, {"s": text})[0]["n"])


def api_answers(url: str, traces: dict[str, str]) -> str:
    """Every API answer a user reads these requests through (list, detail, stats), as text."""
    pages = [httpx.get(f"{url}/api/requests", params={"limit": 100}), httpx.get(f"{url}/api/stats")]
    pages += [httpx.get(f"{url}/api/requests/{trace_id}") for trace_id in traces.values()]
    assert all(page.status_code == 200 for page in pages), [page.text[:200] for page in pages]
    return "\n".join(page.text for page in pages)


@pytest.mark.parametrize("store_content", [False, True], ids=["default", "opt-in"])
def test_over_grpc_the_same_setting_applies(store_content: bool, start_collector: Any) -> None:
    collector = start_collector(store_content=store_content)
    trace = chat_trace(recent_base_ns())
    root = trace[0]
    assert root.context is not None and root.start_time is not None
    model = span(
        "chat gpt-4.1",
        root.context.trace_id,
        new_span_id(),
        root.context.span_id,
        root.start_time + MS,
        root.start_time + 2 * MS,
        {"gen_ai.operation.name": "chat", "gen_ai.input.messages": f'[{{"content": "{SECRET}"}}]'},
    )
    exporter = OTLPSpanExporter(endpoint=grpc_target(collector.url), insecure=True, timeout=30)
    assert exporter.export([*trace, model]) == SpanExportResult.SUCCESS
    exporter.shutdown()
    trace_id = root.context.trace_id.to_bytes(16, "big")
    wait_until(lambda: len(collector.store.spans_of_traces([trace_id])) == 5, what="the spans")
    assert rows_with(collector.store, "spans", SECRET) == (1 if store_content else 0)


@pytest.mark.parametrize("name", INSTRUMENTATIONS)
def test_content_is_stored_nowhere_by_default(name: str, collector: Any, provider_url: str) -> None:
    traces = produce(name, collector.url, provider_url)
    assert rows_with(collector.store, "spans", "POST /chat") >= 2  # the spans are there...
    assert rows_with(collector.store, "spans", SECRET) == 0  # ...without the secret
    assert rows_with(collector.store, "requests", SECRET) == 0
    answers = api_answers(collector.url, traces)
    assert SECRET not in answers
    # It was recorded, and dropped: sizes on the spans, counts in /metrics.
    assert content.DROPPED_BYTES in answers
    metrics = httpx.get(f"{collector.url}/metrics").text
    counter = r'^latencylens_content_dropped_attributes_total\{protocol="http"\} (\S+)$'
    dropped = re.search(counter, metrics, re.MULTILINE)
    assert dropped is not None and float(dropped.group(1)) >= 2


@pytest.mark.parametrize("name", INSTRUMENTATIONS)
def test_with_the_opt_in_content_is_stored(name: str, start_collector: Any, provider_url: str) -> None:
    collector = start_collector(store_content=True)
    traces = produce(name, collector.url, provider_url)
    assert rows_with(collector.store, "spans", SECRET) >= 1
    assert SECRET in api_answers(collector.url, traces)
