"""Spans of one model call, counted once: hand-built traces through the real resolution and row builder.

Each span is classified by the collector's own ``classify`` from attribute sets the real
instrumentations write (observed with the installed packages; see
tests/e2e/test_same_call_instrumentations.py for the packages themselves). Times are ms from the
trace's start.
"""

from __future__ import annotations

from typing import Any

from latencylens import semconv
from latencylens_collector.analysis.attribution import APPLICATION_COMPONENTS, COMPONENTS
from latencylens_collector.analysis.conventions import classify, resolve_trace
from latencylens_collector.analysis.conventions.same_call import KIND_MODEL_WRAPPER, KIND_SAME_CALL
from latencylens_collector.analysis.conventions.trace import KIND_MODEL_SERVER
from latencylens_collector.analysis.records import NO_PARENT, SpanRow
from latencylens_collector.analysis.request_rows import build_request_row
from latencylens_collector.queries.explain import span_tree

MS = 1_000_000
BASE = 1_700_000_000_000_000_000
TRACE = b"\x07" * 16
MODEL_PARTS = tuple(name for name in COMPONENTS if name not in APPLICATION_COMPONENTS)

# Our SDK around anthropic's Messages API (the documented prompt-caching usage: input 21, cache
# creation 188 086, cache read 0, output 393; GenAI input = 21 + 188 086 + 0 = 188 107).
OURS_ANTHROPIC = {
    semconv.SPAN_KIND: "model",
    semconv.GEN_AI_OPERATION_NAME: "chat",
    semconv.GEN_AI_PROVIDER_NAME: "anthropic",
    semconv.GEN_AI_REQUEST_MODEL: "claude-opus-4-6",
    semconv.GEN_AI_RESPONSE_MODEL: "claude-opus-4-6",
    semconv.GEN_AI_RESPONSE_ID: "msg_01",
    semconv.GEN_AI_USAGE_INPUT_TOKENS: "188107",
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: "393",
    semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: "0",
    semconv.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: "188086",
}
# The anthropic SDK's own span of the same call (anthropic 2.14, tracing on by default).
ANTHROPIC_NATIVE = {
    semconv.GEN_AI_OPERATION_NAME: "chat",
    semconv.GEN_AI_PROVIDER_NAME: "anthropic",
    semconv.GEN_AI_REQUEST_MODEL: "claude-opus-4-6",
    semconv.GEN_AI_RESPONSE_MODEL: "claude-opus-4-6",
    semconv.GEN_AI_RESPONSE_ID: "msg_01",
    semconv.GEN_AI_USAGE_INPUT_TOKENS: "188107",
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: "393",
    semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: "0",
    "gen_ai.usage.cache_write.input_tokens": "188086",
    "http.response.status_code": "200",
}
HTTP_CLIENT = {"http.request.method": "POST", "url.full": "https://api.anthropic.com/v1/messages"}


def openai_call(response_id: str, prompt: int, completion: int) -> dict[str, str]:
    """OpenLLMetry's span of one OpenAI chat completion (opentelemetry-instrumentation-openai 0.62)."""
    return {
        semconv.GEN_AI_OPERATION_NAME: "chat",
        semconv.GEN_AI_PROVIDER_NAME: "openai",
        semconv.GEN_AI_REQUEST_MODEL: "gpt-4.1",
        semconv.GEN_AI_RESPONSE_MODEL: "gpt-4.1-2025-04-14",
        semconv.GEN_AI_RESPONSE_ID: response_id,
        semconv.GEN_AI_USAGE_INPUT_TOKENS: str(prompt),
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: str(completion),
        "gen_ai.usage.total_tokens": str(prompt + completion),
        "gen_ai.is_streaming": "false",
    }


def span(
    span_id: int,
    parent: int | None,
    start_ms: float,
    duration_ms: float,
    attributes: dict[str, str] | None = None,
    name: str = "",
) -> SpanRow:
    attributes = attributes or {}
    return SpanRow(
        trace_id=TRACE,
        span_id=span_id.to_bytes(8, "big"),
        parent_span_id=parent.to_bytes(8, "big") if parent is not None else NO_PARENT,
        service="app",
        name=name or f"span {span_id}",
        span_kind="client",
        kind=classify(attributes, has_parent=parent is not None),
        start_ns=BASE + round(start_ms * MS),
        duration_ns=round(duration_ms * MS),
        attributes=dict(attributes),
    )


def row_of(spans: list[SpanRow]) -> dict[str, Any]:
    row = build_request_row(spans, computed_at_us=0)
    assert row is not None
    assert sum(row[f"{name}_ns"] for name in COMPONENTS) == row["e2e_ns"]
    return row


def model_ns(row: dict[str, Any]) -> int:
    return sum(row[f"{name}_ns"] for name in MODEL_PARTS)


def resolved_by_id(spans: list[SpanRow]) -> dict[int, SpanRow]:
    return {int.from_bytes(row.span_id, "big"): row for row in resolve_trace(spans)}


def hex_id(span_id: int) -> str:
    return span_id.to_bytes(8, "big").hex()


def test_the_sdk_span_inside_ours_is_the_same_call() -> None:
    spans = [
        span(1, None, 0, 1000, name="POST /chat"),
        span(2, 1, 100, 600, OURS_ANTHROPIC, name="chat claude-opus-4-6"),
        span(3, 2, 101, 598, ANTHROPIC_NATIVE, name="anthropic.messages.create"),
    ]
    assert [row.kind for row in spans] == ["request", "model", "model"]  # both read as model calls
    row = row_of(spans)
    assert row["model_calls"] == 1
    # 188 107 input (21 + 188 086 cache creation + 0 cache read), 393 output: once, not twice.
    assert (row["input_tokens"], row["output_tokens"], row["cache_read_input_tokens"]) == (188107, 393, 0)
    assert model_ns(row) == 600 * MS  # our span's duration, the inner span owns nothing
    assert row["app_other_ns"] == 400 * MS
    resolved = resolved_by_id(spans)
    assert resolved[3].kind == KIND_SAME_CALL
    assert resolved[3].attributes[semconv.SAME_CALL_AS] == hex_id(2)
    assert resolved[2].kind == "model"


def test_the_span_tree_keeps_both_spans_and_marks_the_inner_one() -> None:
    spans = [
        span(1, None, 0, 1000, name="POST /chat"),
        span(2, 1, 100, 600, OURS_ANTHROPIC),
        span(3, 2, 101, 598, ANTHROPIC_NATIVE),
    ]
    (root,) = span_tree(spans)
    (ours,) = root.children
    (native,) = ours.children
    assert native.attributes[semconv.SAME_CALL_AS] == ours.span_id == hex_id(2)
    assert semconv.SAME_CALL_AS not in ours.attributes
    assert (ours.critical_ns, native.critical_ns, native.self_ns) == (600 * MS, 0, 0)


def test_ours_counts_the_call_even_inside_a_longer_span_the_collector_annotated() -> None:
    """The collector adds ``latencylens.content.*`` sizes to any span whose content it dropped:
    that does not make OpenLLMetry's outer (longer) span ours."""
    outer = {**openai_call("chatcmpl-123", 19, 10), "latencylens.content.dropped_attributes": "2"}
    ours = {**openai_call("chatcmpl-123", 19, 10), semconv.SPAN_KIND: "model"}
    spans = [span(1, None, 0, 1000), span(2, 1, 100, 600, outer), span(3, 2, 110, 580, ours)]
    row = row_of(spans)
    assert row["model_calls"] == 1
    resolved = resolved_by_id(spans)
    assert resolved[2].attributes[semconv.SAME_CALL_AS] == hex_id(3)
    assert model_ns(row) == 580 * MS


def test_an_http_client_span_between_the_two_is_still_the_same_call() -> None:
    spans = [
        span(1, None, 0, 1000),
        span(2, 1, 100, 600, OURS_ANTHROPIC),
        span(3, 2, 101, 598, HTTP_CLIENT, name="POST"),
        span(4, 3, 102, 596, ANTHROPIC_NATIVE),
    ]
    assert spans[2].kind == "other"
    row = row_of(spans)
    assert row["model_calls"] == 1
    assert (row["input_tokens"], row["output_tokens"]) == (188107, 393)
    assert resolved_by_id(spans)[4].attributes[semconv.SAME_CALL_AS] == hex_id(2)


def test_a_tool_between_two_model_spans_keeps_them_two_calls() -> None:
    tool = {semconv.GEN_AI_OPERATION_NAME: "execute_tool", semconv.GEN_AI_TOOL_NAME: "lookup"}
    spans = [
        span(1, None, 0, 1000),
        span(2, 1, 100, 600, openai_call("chatcmpl-a", 19, 10)),
        span(3, 2, 200, 300, tool),
        span(4, 3, 210, 200, openai_call("chatcmpl-b", 21, 11)),
    ]
    row = row_of(spans)
    assert row["model_calls"] == 2
    assert (row["input_tokens"], row["output_tokens"]) == (19 + 21, 10 + 11)


def test_the_owner_takes_what_it_lacks_from_the_other_span() -> None:
    """Ours measured the call and the provider's server time but got no usage; the inner span has
    usage and a first-chunk time. Worked numbers: ours 100–700 ms; the inner span starts at 110 ms
    and saw its first chunk 0.240 s later, at 350 ms, i.e. 250 ms into ours."""
    ours = {
        semconv.SPAN_KIND: "model",
        semconv.GEN_AI_OPERATION_NAME: "chat",
        semconv.GEN_AI_PROVIDER_NAME: "openai",
        semconv.PROVIDER_SERVER_TOTAL_NS: str(500 * MS),
        semconv.PROVENANCE_SERVER_TOTAL: "reported",
    }
    inner = {
        **openai_call("chatcmpl-1", 19, 10),
        semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: "0.240",
        semconv.GEN_AI_REQUEST_STREAM: "true",
    }
    spans = [span(1, None, 0, 1000), span(2, 1, 100, 600, ours), span(3, 2, 110, 580, inner)]
    row = row_of(spans)
    assert row["model_calls"] == 1
    assert (row["input_tokens"], row["output_tokens"]) == (19, 10)
    assert row["model"] == "gpt-4.1-2025-04-14"
    assert row["ttft_ns"] == 250 * MS  # 110 + 240 − 100
    # The provider timing is ours: network = 600 − 500 ms.
    assert row["network_ns"] == 100 * MS
    owner = resolved_by_id(spans)[2]
    # The inner span's last chunk (its end, 690 ms) is 590 ms into ours.
    assert owner.attributes[semconv.STREAM_LAST_CHUNK_NS] == str(590 * MS)


def test_counts_another_span_only_estimated_stay_estimated() -> None:
    """OpenLIT around ours on a stream without usage: ours has no counts, OpenLIT wrote its estimate
    (ceil(characters / 2)) under the usual names. The row takes the counts and says they are an
    estimate; ITL and the decode rate are not derived from them (ours' own ITL, from its content
    chunks, stays: (90 − 50 ms) / (2 − 1))."""
    openlit = {
        "telemetry.sdk.name": "openlit",
        semconv.GEN_AI_OPERATION_NAME: "chat",
        semconv.GEN_AI_PROVIDER_NAME: "openai",
        semconv.GEN_AI_REQUEST_STREAM: "true",
        semconv.GEN_AI_USAGE_INPUT_TOKENS: "4",
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: "3",
    }
    ours = {
        semconv.SPAN_KIND: "model",
        semconv.GEN_AI_OPERATION_NAME: "chat",
        semconv.GEN_AI_PROVIDER_NAME: "openai",
        semconv.STREAM_FIRST_CONTENT_NS: str(50 * MS),
        semconv.STREAM_LAST_CHUNK_NS: str(90 * MS),
        semconv.STREAM_CONTENT_CHUNKS: "2",
        semconv.STREAM_ITL_NS: str(40 * MS),
        semconv.PROVENANCE_ITL: semconv.SOURCE_ESTIMATED,
    }
    spans = [span(1, None, 0, 1000), span(2, 1, 100, 100, openlit), span(3, 2, 101, 98, ours)]
    row = row_of(spans)
    assert row["model_calls"] == 1
    assert (row["input_tokens"], row["output_tokens"]) == (4, 3)
    assert row["tokens_estimated"] == 1
    assert row["itl_ns"] == 40 * MS
    assert row["decode_tokens_per_second"] is None
    assert resolved_by_id(spans)[3].attributes[semconv.PROVENANCE_USAGE] == semconv.SOURCE_ESTIMATED
    # The provider's usage, when ours has it, is not an estimate whatever the other span wrote.
    counted = {**ours, semconv.GEN_AI_USAGE_INPUT_TOKENS: "19", semconv.GEN_AI_USAGE_OUTPUT_TOKENS: "10"}
    spans[2] = span(3, 2, 101, 98, counted)
    row = row_of(spans)
    assert (row["input_tokens"], row["output_tokens"], row["tokens_estimated"]) == (19, 10, 0)


def test_sibling_spans_with_the_same_response_id_are_one_call() -> None:
    ours = {**openai_call("chatcmpl-123", 19, 10), semconv.SPAN_KIND: "model"}
    spans = [
        span(1, None, 0, 1000),
        span(2, 1, 100, 500, ours),
        span(3, 1, 105, 520, openai_call("chatcmpl-123", 19, 10)),  # ends after ours
    ]
    row = row_of(spans)
    assert row["model_calls"] == 1
    assert (row["input_tokens"], row["output_tokens"]) == (19, 10)
    resolved = resolved_by_id(spans)
    assert resolved[3].attributes[semconv.SAME_CALL_AS] == hex_id(2)
    # The other span owns no time, not even the 25 ms it outlasts ours: that is the root's own.
    assert model_ns(row) == 500 * MS
    assert row["app_other_ns"] == 500 * MS


def test_the_same_response_id_at_different_times_is_two_calls() -> None:
    """A cache in front of the provider can return an earlier answer again: not the same call."""
    spans = [
        span(1, None, 0, 1000),
        span(2, 1, 100, 300, openai_call("chatcmpl-123", 19, 10)),
        span(3, 1, 500, 300, openai_call("chatcmpl-123", 19, 10)),
    ]
    row = row_of(spans)
    assert row["model_calls"] == 2
    assert (row["input_tokens"], row["output_tokens"]) == (38, 20)


def test_a_framework_span_around_one_provider_call_is_that_call() -> None:
    """pydantic-ai's shape: ``invoke_agent`` > ``chat gpt-4.1`` (the framework's model span, with
    its time to first chunk) > ours around the SDK. Ours counts the call; the framework's 20 ms
    before and after ours are the agent's own application time."""
    framework = {
        semconv.GEN_AI_OPERATION_NAME: "chat",
        semconv.GEN_AI_PROVIDER_NAME: "openai",
        semconv.GEN_AI_REQUEST_MODEL: "gpt-4.1",
        semconv.GEN_AI_USAGE_INPUT_TOKENS: "19",
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: "10",
        "gen_ai.client.operation.time_to_first_chunk": "0.150",
    }
    ours = {
        semconv.SPAN_KIND: "model",
        semconv.GEN_AI_OPERATION_NAME: "chat",
        semconv.GEN_AI_PROVIDER_NAME: "openai",
        semconv.PROVIDER_SERVER_TOTAL_NS: str(300 * MS),
    }
    spans = [
        span(1, None, 0, 1000),
        span(2, 1, 50, 900, {semconv.GEN_AI_OPERATION_NAME: "invoke_agent"}, name="invoke_agent"),
        span(3, 2, 100, 400, framework, name="chat gpt-4.1"),
        span(4, 3, 120, 360, ours),
    ]
    assert [row.kind for row in spans] == ["request", "other", "model", "model"]
    row = row_of(spans)
    assert row["model_calls"] == 1
    assert (row["input_tokens"], row["output_tokens"]) == (19, 10)  # from the framework span
    assert row["ttft_ns"] == 130 * MS  # the framework's 100 + 150 ms, from ours' start at 120 ms
    assert model_ns(row) == 360 * MS
    assert row["network_ns"] == 60 * MS  # 360 − 300 ms reported
    assert row["app_other_ns"] == 1000 * MS - 360 * MS
    resolved = resolved_by_id(spans)
    assert resolved[3].kind == KIND_SAME_CALL
    assert resolved[3].attributes[semconv.SAME_CALL_AS] == hex_id(4)


def test_a_framework_span_of_another_convention_around_a_provider_span() -> None:
    """OpenInference's LangChain shape: an ``LLM`` span around the OpenAI instrumentation's ``LLM``
    span. Neither names an operation; neither is ours: the longer one counts the call."""
    llm = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4.1-2025-04-14",
        "llm.token_count.prompt": "19",
        "llm.token_count.completion": "10",
    }
    spans = [
        span(1, None, 0, 1000),
        span(2, 1, 100, 600, {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4.1"}),
        span(3, 2, 110, 580, llm),
    ]
    row = row_of(spans)
    assert row["model_calls"] == 1
    assert (row["input_tokens"], row["output_tokens"]) == (19, 10)
    assert model_ns(row) == 600 * MS
    assert resolved_by_id(spans)[3].attributes[semconv.SAME_CALL_AS] == hex_id(2)


def test_a_framework_span_around_two_provider_calls_is_application_work() -> None:
    """An agent loop shown as one ``LLM`` span with the run's summed usage around two provider
    calls: two model calls (19 + 21 input, 10 + 11 output), and the framework span's own time
    between and around them is application time."""
    loop = {
        "openinference.span.kind": "LLM",
        "llm.token_count.prompt": "40",
        "llm.token_count.completion": "21",
    }
    spans = [
        span(1, None, 0, 1000),
        span(2, 1, 100, 800, loop),
        span(3, 2, 150, 200, openai_call("chatcmpl-a", 19, 10)),
        span(4, 2, 450, 300, openai_call("chatcmpl-b", 21, 11)),
    ]
    row = row_of(spans)
    assert row["model_calls"] == 2
    assert (row["input_tokens"], row["output_tokens"]) == (40, 21)  # not 80 and 42
    assert model_ns(row) == 500 * MS
    assert row["app_other_ns"] == 500 * MS
    resolved = resolved_by_id(spans)
    assert resolved[2].kind == KIND_MODEL_WRAPPER
    assert resolved[2].attributes[semconv.WRAPS_MODEL_CALLS] == "2"
    assert semconv.SAME_CALL_AS not in resolved[3].attributes


def test_an_outer_span_that_ends_early_does_not_cut_ours() -> None:
    """OpenLLMetry instrumented after ours sees our stream proxy, not an ``openai.Stream``: it ends
    its span (outer, 14 ms) at once, while ours runs to the last chunk (59 ms)."""
    outer = {
        semconv.GEN_AI_OPERATION_NAME: "chat",
        semconv.GEN_AI_PROVIDER_NAME: "openai",
        "gen_ai.is_streaming": "true",
    }
    ours = {
        **openai_call("chatcmpl-123", 19, 10),
        semconv.SPAN_KIND: "model",
        semconv.STREAM_FIRST_CONTENT_NS: str(32 * MS),
        semconv.STREAM_LAST_CHUNK_NS: str(54 * MS),
    }
    spans = [span(1, None, 0, 66), span(2, 1, 5, 14, outer), span(3, 2, 6, 59, ours)]
    row = row_of(spans)
    assert row["model_calls"] == 1
    assert model_ns(row) == 59 * MS
    assert row["decode_ns"] == 22 * MS  # 54 − 32 ms, measured by ours
    assert row["ttft_ns"] == 32 * MS
    assert row["app_other_ns"] == 7 * MS


def test_resolving_twice_changes_nothing() -> None:
    spans = [
        span(1, None, 0, 1000),
        span(2, 1, 50, 900, {semconv.GEN_AI_OPERATION_NAME: "invoke_agent"}),
        span(3, 2, 100, 400, {semconv.GEN_AI_OPERATION_NAME: "chat", "x": "1"}),
        span(4, 3, 120, 360, OURS_ANTHROPIC),
        span(5, 4, 121, 358, ANTHROPIC_NATIVE),
    ]
    once = resolve_trace(spans)
    assert resolve_trace(once) == once
    assert build_request_row(once, 0) == build_request_row(spans, 0)


def chain(depth: int, ours_at_bottom: bool) -> tuple[list[SpanRow], int, int]:
    """A root, then ``depth`` spans nested one in another: model spans (OpenLLMetry's shape, no
    usage) and HTTP client spans in turn, each 1 µs shorter than its parent; ours is the outermost
    or the innermost model span; a vLLM server span sits below the innermost. Returns the spans,
    ours' id and the server's id."""
    spans = [span(1, None, 0, 1000)]
    model = {semconv.GEN_AI_OPERATION_NAME: "chat", "gen_ai.is_streaming": "false"}
    models = []
    for level in range(depth):
        span_id = level + 2
        attributes = model if level % 2 == 0 else HTTP_CLIENT
        spans.append(span(span_id, span_id - 1, 100 + level * 0.001, 800 - level * 0.002, attributes))
        if level % 2 == 0:
            models.append(span_id)
    ours_id = models[-1] if ours_at_bottom else models[0]
    at = next(i for i, row in enumerate(spans) if int.from_bytes(row.span_id, "big") == ours_id)
    ours = {
        semconv.SPAN_KIND: "model",
        semconv.GEN_AI_OPERATION_NAME: "chat",
        semconv.GEN_AI_PROVIDER_NAME: "vllm",
    }
    spans[at] = span(ours_id, ours_id - 1, (spans[at].start_ns - BASE) / MS, spans[at].duration_ns / MS, ours)
    server_id = depth + 2
    bottom = spans[-1]
    vllm = {
        "gen_ai.latency.time_in_queue": "0.020",
        "gen_ai.latency.time_in_model_prefill": "0.030",
        "gen_ai.latency.time_in_model_decode": "0.050",
        "gen_ai.latency.e2e": "0.100",
        semconv.GEN_AI_USAGE_PROMPT_TOKENS_DEPRECATED: "42",
        semconv.GEN_AI_USAGE_COMPLETION_TOKENS_DEPRECATED: "128",
    }
    start_ms = (bottom.start_ns - BASE) / MS + 1
    spans.append(span(server_id, int.from_bytes(bottom.span_id, "big"), start_ms, 100, vllm))
    return spans, ours_id, server_id


def check_chain(depth: int, ours_at_bottom: bool) -> None:
    spans, ours_id, server_id = chain(depth, ours_at_bottom)
    assert len(spans) == depth + 2
    resolved = resolved_by_id(spans)
    row = row_of(spans)
    ours = resolved[ours_id]
    assert row["model_calls"] == 1
    assert (row["input_tokens"], row["output_tokens"]) == (42, 128)  # vLLM's usage, once
    # vLLM's report: queue 20, prefill 30, decode 50 ms; network = ours − e2e 100 ms.
    assert (row["queue_ns"], row["prefill_ns"], row["decode_ns"]) == (20 * MS, 30 * MS, 50 * MS)
    assert row["network_ns"] == ours.duration_ns - 100 * MS
    assert model_ns(row) == ours.duration_ns  # ours counts the call even at the bottom of the chain
    assert row["app_other_ns"] == 1000 * MS - ours.duration_ns
    assert resolved[server_id].kind == KIND_MODEL_SERVER
    marked = [row for row in resolved.values() if row.kind == KIND_SAME_CALL]
    assert len(marked) == depth // 2 - 1
    assert {row.attributes[semconv.SAME_CALL_AS] for row in marked} == {hex_id(ours_id)}


def test_a_chain_of_8000_nested_spans_is_one_call_with_ours_outermost() -> None:
    check_chain(8000, ours_at_bottom=False)


def test_a_chain_of_8000_nested_spans_is_one_call_with_ours_innermost() -> None:
    check_chain(8000, ours_at_bottom=True)
