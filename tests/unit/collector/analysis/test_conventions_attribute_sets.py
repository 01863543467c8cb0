"""Attribute sets of other instrumentations, as fixture spans, through decode and row building.

Each set copies the names its producer writes (checked against the packages' source: OpenLIT
1.45 ``openlit/semcov``, pydantic-ai 2.68 ``_instrumentation.py``, OpenLLMetry before and after
``opentelemetry-semantic-conventions-ai`` 0.5, OpenInference 0.1, GenAI semconv v1.41.0, the AI
SDK's ``@ai-sdk/otel`` 1.0 ``legacy-open-telemetry.ts`` and ``open-telemetry.ts``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind
from otlp_builders import MS, export_request, new_span_id, new_trace_id, span

from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.analysis.conventions import classify, token_counts
from latencylens_collector.analysis.request_rows import build_request_row
from latencylens_collector.intake import otlp

BASE = 1_700_000_000_000_000_000


class Trace:
    """Spans of one trace with times in ms from BASE."""

    def __init__(self) -> None:
        self.trace_id = new_trace_id()
        self.spans: list[ReadableSpan] = []

    def add(
        self,
        name: str,
        parent: int | None,
        start_ms: int,
        end_ms: int,
        attributes: Mapping[str, Any] | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> int:
        span_id = new_span_id()
        self.spans.append(
            span(
                name,
                self.trace_id,
                span_id,
                parent,
                BASE + start_ms * MS,
                BASE + end_ms * MS,
                attributes,
                kind=kind,
            )
        )
        return span_id


def row_of(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    rows = otlp.flatten(export_request(spans)).spans
    request = build_request_row(rows, computed_at_us=0)
    assert request is not None
    assert sum(request[f"{name}_ns"] for name in COMPONENTS) == request["e2e_ns"]
    return request


def parts_ms(request: Mapping[str, Any]) -> dict[str, int]:
    return {name: request[f"{name}_ns"] // MS for name in COMPONENTS if request[f"{name}_ns"]}


def kinds(spans: Sequence[ReadableSpan]) -> dict[str, str]:
    return {row.name: row.kind for row in otlp.flatten(export_request(spans)).spans}


OPENLIT_STREAM = {
    "telemetry.sdk.name": "openlit",
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
    "gen_ai.request.stream": True,
    "gen_ai.server.time_to_first_token": 0.05,
    "gen_ai.server.time_per_output_token": 0.0141,
    "gen_ai.usage.input_tokens": 120,
    "gen_ai.usage.output_tokens": 40,
    "gen_ai.usage.cache_read.input_tokens": 64,
    "server.address": "api.openai.com",
    "server.port": 443,
}


def test_openlit_streamed_call() -> None:
    """OpenLIT chat span 100–900 ms, streamed; its httpx child span 110–400 ms ends when the headers
    arrive, and OpenLIT's ``gen_ai.server.time_to_first_token`` 0.05 s counts from there (it starts
    when the stream object is made). First chunk = 400 + 50 = 450 ms, 350 ms into the call; the
    span ends with the last chunk, so decode is measured as 900 − 450 = 450 ms and the 350 ms before
    the first chunk is model_unattributed. ITL = 450 ms / (40 − 1) = 11.538461… ms → 11 538 461 ns."""
    trace = Trace()
    root = trace.add("POST /ask", None, 0, 1000, kind=SpanKind.SERVER)
    call = trace.add("chat gpt-4o-mini", root, 100, 900, OPENLIT_STREAM, kind=SpanKind.CLIENT)
    trace.add("POST", call, 110, 400, {"http.method": "POST", "http.status_code": 200}, kind=SpanKind.CLIENT)
    request = row_of(trace.spans)
    assert parts_ms(request) == {"app_other": 200, "decode": 450, "model_unattributed": 350}
    assert request["provenance"]["decode"] == "measured"
    assert (request["model"], request["provider"]) == ("gpt-4o-mini-2024-07-18", "openai")
    assert (request["input_tokens"], request["output_tokens"], request["cache_read_input_tokens"]) == (
        120,
        40,
        64,
    )
    assert request["tokens_estimated"] == 0
    assert request["ttft_ns"] == 350 * MS
    assert request["itl_ns"] == 450 * MS // 39


def test_openlit_stream_without_its_http_span_has_no_ttft() -> None:
    """Without the HTTP span nothing says when OpenLIT's stream object was made: its 0.05 s cannot
    be placed, so TTFT is unknown and the whole call is model_unattributed (not a 50 ms TTFT)."""
    trace = Trace()
    root = trace.add("POST /ask", None, 0, 1000, kind=SpanKind.SERVER)
    trace.add("chat gpt-4o-mini", root, 100, 900, OPENLIT_STREAM, kind=SpanKind.CLIENT)
    request = row_of(trace.spans)
    assert parts_ms(request) == {"app_other": 200, "model_unattributed": 800}
    assert request["ttft_ns"] is None


def test_openlit_time_to_first_token_is_ignored_when_not_streamed() -> None:
    """Not streamed, OpenLIT's TTFT is the whole call: no decode is claimed."""
    trace = Trace()
    root = trace.add("POST /ask", None, 0, 1000, kind=SpanKind.SERVER)
    trace.add(
        "chat gpt-4o-mini",
        root,
        100,
        900,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.stream": False,
            "gen_ai.server.time_to_first_token": 0.8,
        },
        kind=SpanKind.CLIENT,
    )
    request = row_of(trace.spans)
    assert parts_ms(request) == {"app_other": 200, "model_unattributed": 800}
    assert request["ttft_ns"] is None


def test_pydantic_ai_agent_run() -> None:
    """pydantic-ai (Logfire): invoke_agent 0–1000 ms; streamed chat 100–700 ms with
    ``gen_ai.client.operation.time_to_first_chunk`` 0.3 s → decode 600 − 300 = 300 ms measured,
    300 ms model_unattributed; execute_tool 700–800 ms → tool 100 ms; app_other 1000 − 700 = 300."""
    trace = Trace()
    root = trace.add("invoke_agent weather_agent", None, 0, 1000, {"gen_ai.operation.name": "invoke_agent"})
    trace.add(
        "chat gpt-4o",
        root,
        100,
        700,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.response.model": "gpt-4o-2024-08-06",
            "gen_ai.usage.input_tokens": 50,
            "gen_ai.usage.output_tokens": 20,
            "gen_ai.client.operation.time_to_first_chunk": 0.3,
            "logfire.span_type": "span",
            "logfire.msg": "chat gpt-4o",
        },
        kind=SpanKind.CLIENT,
    )
    trace.add(
        "execute_tool get_weather",
        root,
        700,
        800,
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"},
    )
    assert kinds(trace.spans) == {
        "invoke_agent weather_agent": "request",
        "chat gpt-4o": "model",
        "execute_tool get_weather": "tool",
    }
    request = row_of(trace.spans)
    assert parts_ms(request) == {"app_other": 300, "tool": 100, "decode": 300, "model_unattributed": 300}
    assert (request["model"], request["input_tokens"], request["output_tokens"]) == (
        "gpt-4o-2024-08-06",
        50,
        20,
    )
    assert request["ttft_ns"] == 300 * MS


def test_openllmetry_before_0_5_workflow_task_tool_and_llm() -> None:
    """Older OpenLLMetry: ``llm.request.type``, ``gen_ai.system``, deprecated usage names and
    ``llm.usage.total_tokens``. workflow 0–1000 (request), task 0–200 (app), llm 200–800 (model),
    tool 800–900 (tool): app_other 200 + 100 (gap at the end) = 300, model 600, tool 100."""
    trace = Trace()
    root = trace.add("answer.workflow", None, 0, 1000, {"traceloop.span.kind": "workflow"})
    trace.add("fetch_context.task", root, 0, 200, {"traceloop.span.kind": "task"})
    trace.add(
        "openai.chat",
        root,
        200,
        800,
        {
            "llm.request.type": "chat",
            "gen_ai.system": "OpenAI",
            "gen_ai.request.model": "gpt-4",
            "gen_ai.response.model": "gpt-4-0613",
            "gen_ai.usage.prompt_tokens": 30,
            "gen_ai.usage.completion_tokens": 10,
            "llm.usage.total_tokens": 40,
            "llm.is_streaming": False,
        },
        kind=SpanKind.CLIENT,
    )
    trace.add("lookup.tool", root, 800, 900, {"traceloop.span.kind": "tool"})
    trace.add("planner.agent", root, 900, 900, {"traceloop.span.kind": "agent"})
    assert kinds(trace.spans) == {
        "answer.workflow": "request",
        "fetch_context.task": "other",
        "openai.chat": "model",
        "lookup.tool": "tool",
        "planner.agent": "other",
    }
    request = row_of(trace.spans)
    assert parts_ms(request) == {"app_other": 300, "tool": 100, "model_unattributed": 600}
    assert (request["model"], request["provider"]) == ("gpt-4-0613", "OpenAI")
    assert (request["input_tokens"], request["output_tokens"]) == (30, 10)


def test_openinference_kinds_tokens_and_provider() -> None:
    """OpenInference: CHAIN root 0–1000; EMBEDDING 0–50 and RETRIEVER 50–200 (retrieval 200);
    LLM 200–900 (model 700); TOOL 900–950 (tool 50); the CHAIN's own time 50 ms."""
    trace = Trace()
    root = trace.add("RAG", None, 0, 1000, {"openinference.span.kind": "CHAIN"})
    trace.add("embed", root, 0, 50, {"openinference.span.kind": "EMBEDDING", "embedding.model_name": "e5"})
    trace.add("retrieve", root, 50, 200, {"openinference.span.kind": "RETRIEVER"})
    trace.add(
        "ChatCompletion",
        root,
        200,
        900,
        {
            "openinference.span.kind": "LLM",
            "llm.provider": "groq",
            "llm.system": "openai",
            "llm.model_name": "llama-3.3-70b-versatile",
            "llm.token_count.prompt": 300,
            "llm.token_count.completion": 25,
            "llm.token_count.total": 325,
            "llm.token_count.prompt_details.cache_read": 256,
        },
        kind=SpanKind.CLIENT,
    )
    trace.add("get_time", root, 900, 950, {"openinference.span.kind": "TOOL", "tool.name": "get_time"})
    assert kinds(trace.spans) == {
        "RAG": "request",
        "embed": "retrieval",
        "retrieve": "retrieval",
        "ChatCompletion": "model",
        "get_time": "tool",
    }
    request = row_of(trace.spans)
    assert parts_ms(request) == {"retrieval": 200, "app_other": 50, "tool": 50, "model_unattributed": 700}
    assert (request["model"], request["provider"]) == ("llama-3.3-70b-versatile", "groq")
    assert (request["input_tokens"], request["output_tokens"], request["cache_read_input_tokens"]) == (
        300,
        25,
        256,
    )


@pytest.mark.parametrize(
    ("names", "operation"),
    [
        (("gen_ai.provider.name", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"), "chat"),
        (
            ("gen_ai.system", "gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens"),
            "text_completion",
        ),
    ],
    ids=["current", "deprecated"],
)
def test_plain_genai_names_current_and_deprecated(names: tuple[str, str, str], operation: str) -> None:
    """GenAI semconv, either name set: root 0–1000, model 100–600 → model 500, app_other 500."""
    provider, inputs, outputs = names
    trace = Trace()
    root = trace.add("POST /complete", None, 0, 1000, kind=SpanKind.SERVER)
    trace.add(
        f"{operation} mixtral",
        root,
        100,
        600,
        {
            "gen_ai.operation.name": operation,
            provider: "groq",
            "gen_ai.request.model": "mixtral-8x7b",
            inputs: 11,
            outputs: 7,
        },
        kind=SpanKind.CLIENT,
    )
    request = row_of(trace.spans)
    assert parts_ms(request) == {"app_other": 500, "model_unattributed": 500}
    assert (request["model"], request["provider"], request["input_tokens"], request["output_tokens"]) == (
        "mixtral-8x7b",
        "groq",
        11,
        7,
    )


AI_SDK_CALL = {
    # What @ai-sdk/otel 1.0's LegacyOpenTelemetry writes on the provider call of streamText
    # (observed around @ai-sdk/openai; times are this test's own).
    "ai.operationId": "ai.streamText.doStream",
    "operation.name": "ai.streamText.doStream chat",
    "ai.model.provider": "openai.chat",
    "ai.model.id": "gpt-4.1",
    "gen_ai.system": "openai.chat",
    "gen_ai.request.model": "gpt-4.1",
    "gen_ai.response.model": "gpt-4.1-2025-04-14",
    "ai.prompt.messages": '[{"role":"user","content":[{"type":"text","text":"weather in Paris?"}]}]',
    "ai.response.text": "Let me look.",
    "ai.response.msToFirstChunk": 200.5,
    "ai.response.msToFinish": 550.25,
    "ai.usage.inputTokens": 19,
    "ai.usage.outputTokens": 10,
    "ai.usage.cachedInputTokens": 4,
    "gen_ai.usage.input_tokens": 19,
    "gen_ai.usage.output_tokens": 10,
}


def test_ai_sdk_legacy_spans_stream_tool_and_content() -> None:
    """AI SDK legacy format, as it nests spans: request 0–1000; ai.streamText 100–950 (application
    work); its provider call ai.streamText.doStream 100–900, first chunk at 200.5 ms and finish at
    550.25 ms of it, open until the tool it asked for (ai.toolCall 700–900, its child) returned.
    The call is cut at its finish (100–650.25) and the tool set beside it: tool 200; decode
    550.25 − 200.5 = 349.75; model_unattributed 200.5 (before the first chunk); app_other 100 + 50
    (the request's own) + 50 (after the tool) + 49.75 (650.25–700, between the call and the tool) =
    249.75. ITL: 349.75 ms over 10 − 1 gaps = 38.861 ms. The provider is openai (of openai.chat);
    the model the response's."""
    trace = Trace()
    root = trace.add("POST /api/chat", None, 0, 1000, kind=SpanKind.SERVER)
    operation = trace.add(
        "ai.streamText",
        root,
        100,
        950,
        {"ai.operationId": "ai.streamText", "ai.prompt": '{"prompt":"weather in Paris?"}'},
    )
    call = trace.add("ai.streamText.doStream", operation, 100, 900, AI_SDK_CALL)
    trace.add(
        "ai.toolCall",
        call,
        700,
        900,
        {
            "ai.operationId": "ai.toolCall",
            "ai.toolCall.name": "weather",
            "ai.toolCall.args": '{"city":"Paris"}',
        },
    )
    assert kinds(trace.spans) == {
        "POST /api/chat": "request",
        "ai.streamText": "other",
        "ai.streamText.doStream": "model",
        "ai.toolCall": "tool",
    }
    request = row_of(trace.spans)
    assert {
        name: request[f"{name}_ns"] for name in ("decode", "model_unattributed", "tool", "app_other")
    } == {
        "decode": 349_750_000,
        "model_unattributed": 200_500_000,
        "tool": 200 * MS,
        "app_other": 249_750_000,
    }
    assert request["ttft_ns"] == 200_500_000
    assert request["itl_ns"] == 38_861_111
    assert (request["model"], request["provider"]) == ("gpt-4.1-2025-04-14", "openai")
    assert (request["input_tokens"], request["output_tokens"], request["cache_read_input_tokens"]) == (
        19,
        10,
        4,
    )
    # Prompts, completions and tool arguments are content: not stored (counted instead).
    stored = {row.name: row.attributes for row in otlp.flatten(export_request(trace.spans)).spans}
    assert not {"ai.prompt", "ai.prompt.messages", "ai.response.text", "ai.toolCall.args"} & {
        key for attributes in stored.values() for key in attributes
    }
    assert stored["ai.streamText.doStream"]["latencylens.content.dropped_attributes"] == "2"


def test_ai_sdk_call_without_a_finish_ends_where_its_tools_begin() -> None:
    """A legacy generateText call (no stream, so no finish time) 100–900 holding its tool 600–900:
    its answer had come when the tool began, so the call is 100–600 (model 500) and the tool 300
    beside it; the request's own 100 + 100 is app_other."""
    trace = Trace()
    root = trace.add("POST /api/chat", None, 0, 1000, kind=SpanKind.SERVER)
    call = trace.add(
        "ai.generateText.doGenerate", root, 100, 900, {"ai.operationId": "ai.generateText.doGenerate"}
    )
    trace.add("ai.toolCall", call, 600, 900, {"ai.operationId": "ai.toolCall"})
    assert parts_ms(row_of(trace.spans)) == {"app_other": 200, "model_unattributed": 500, "tool": 300}


@pytest.mark.parametrize(
    ("older", "names"),
    [
        (False, {"ai.usage.inputTokens": 19, "ai.usage.outputTokens": 10}),
        (True, {"ai.usage.promptTokens": 19, "ai.usage.completionTokens": 10}),
    ],
    ids=["ai 5 and later", "ai 3 and 4"],
)
def test_ai_sdk_usage_names_of_each_release(older: bool, names: dict[str, int]) -> None:
    """Usage only under the AI SDK's own names (no GenAI copy), as its releases wrote them."""
    trace = Trace()
    root = trace.add("POST /api/chat", None, 0, 1000, kind=SpanKind.SERVER)
    trace.add(
        "ai.generateText.doGenerate",
        root,
        100,
        600,
        {"ai.operationId": "ai.generateText.doGenerate", **names},
    )
    request = row_of(trace.spans)
    assert (request["input_tokens"], request["output_tokens"]) == (19, 10)
    assert parts_ms(request) == {"app_other": 500, "model_unattributed": 500}


def test_ai_sdk_genai_spans_and_its_time_to_first_chunk() -> None:
    """AI SDK's current format (@ai-sdk/otel 1.0 ``OpenTelemetry``): invoke_agent 0–1000 (the
    request: no parent), step 1 0–1000 (agent_step: application work), chat 0–800 (the model
    call) with gen_ai.client.operation.time_to_first_chunk 0.1205 s, execute_tool 800–1000. No
    finish time: the stream's last chunk is the span's end, so decode is 800 − 120.5 = 679.5 ms and
    model_unattributed 120.5 ms; tool 200."""
    trace = Trace()
    root = trace.add(
        "invoke_agent gpt-4.1",
        None,
        0,
        1000,
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.usage.input_tokens": 19},
    )
    step = trace.add("step 1", root, 0, 1000, {"gen_ai.operation.name": "agent_step"})
    trace.add(
        "chat gpt-4.1",
        step,
        0,
        800,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4.1",
            "gen_ai.response.model": "gpt-4.1-2025-04-14",
            "gen_ai.client.operation.duration": 0.8,
            "gen_ai.client.operation.time_to_first_chunk": 0.1205,
            "gen_ai.usage.input_tokens": 19,
            "gen_ai.usage.output_tokens": 10,
        },
        kind=SpanKind.CLIENT,
    )
    trace.add("execute_tool weather", step, 800, 1000, {"gen_ai.operation.name": "execute_tool"})
    assert kinds(trace.spans) == {
        "invoke_agent gpt-4.1": "request",
        "step 1": "other",
        "chat gpt-4.1": "model",
        "execute_tool weather": "tool",
    }
    request = row_of(trace.spans)
    assert {name: request[f"{name}_ns"] for name in ("decode", "model_unattributed", "tool")} == {
        "decode": 679_500_000,
        "model_unattributed": 120_500_000,
        "tool": 200 * MS,
    }
    assert request["ttft_ns"] == 120_500_000
    assert (request["provider"], request["input_tokens"], request["model_calls"]) == ("openai", 19, 1)


def test_unknown_spans_are_application_work() -> None:
    """Spans nobody's convention describes: a database call and a cache lookup are app_other."""
    trace = Trace()
    root = trace.add("GET /thing", None, 0, 300, kind=SpanKind.SERVER)
    trace.add("SELECT users", root, 0, 100, {"db.system": "postgresql"}, kind=SpanKind.CLIENT)
    trace.add("redis GET", root, 100, 150, {"db.system": "redis"}, kind=SpanKind.CLIENT)
    assert set(kinds(trace.spans).values()) == {"request", "other"}
    request = row_of(trace.spans)
    assert parts_ms(request) == {"app_other": 300}
    assert request["model_calls"] == 0


def test_totals_complete_a_missing_count_and_classify_is_specific_first() -> None:
    # 49 total − 12 output = 37 input (OpenLLMetry); 325 − 300 = 25 output (OpenInference).
    assert token_counts({"gen_ai.usage.total_tokens": "49", "gen_ai.usage.output_tokens": "12"}) == {
        "gen_ai.usage.input_tokens": 37,
        "gen_ai.usage.output_tokens": 12,
    }
    assert token_counts({"llm.token_count.total": "325", "llm.token_count.prompt": "300"}) == {
        "gen_ai.usage.input_tokens": 300,
        "gen_ai.usage.output_tokens": 25,
    }
    # Our explicit kind wins over everything; a vLLM span is a model call whatever its name.
    assert classify({"latencylens.span.kind": "tool", "gen_ai.operation.name": "chat"}, True) == "tool"
    assert classify({"gen_ai.latency.e2e": "1.0"}, True) == "model"
    # OpenInference's CHAIN is application work even next to a GenAI operation name.
    assert classify({"openinference.span.kind": "CHAIN", "gen_ai.operation.name": "chat"}, True) == "other"
    assert classify({"gen_ai.operation.name": "embeddings"}, True) == "retrieval"
    assert classify({"gen_ai.operation.name": "vectordb"}, True) == "retrieval"
    assert classify({}, False) == "request"
