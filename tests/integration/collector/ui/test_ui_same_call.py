"""How a call was counted, on the request page: spans merged as the same call, model spans around
several calls, and where the TTFT came from. Real Chromium, real collector, requests stored through
the real ingest path (the marks and the row come from the collector's own resolution)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_ui_pages import FACTS, chromium_at, shot
from ui_seed import MS

from latencylens import semconv
from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.pipeline.ingest import Ingestor

SAME_CALL_TRACE, WRAPPER_TRACE, VLLM_TRACE = "d" * 32, "e" * 32, "f" * 32
OURS = {
    semconv.SPAN_KIND: "model",
    semconv.GEN_AI_OPERATION_NAME: "chat",
    semconv.GEN_AI_PROVIDER_NAME: "openai",
    semconv.GEN_AI_REQUEST_MODEL: "gpt-4.1",
    semconv.GEN_AI_USAGE_INPUT_TOKENS: "19",
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: "10",
}
OPENLLMETRY = {
    semconv.GEN_AI_OPERATION_NAME: "chat",
    semconv.GEN_AI_REQUEST_MODEL: "gpt-4.1",
    semconv.GEN_AI_USAGE_INPUT_TOKENS: "19",
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: "10",
}
VLLM_CLIENT = {**OURS, semconv.GEN_AI_PROVIDER_NAME: "vllm"}
# vLLM's llm_request span (names from vllm/tracing/utils.py, seconds): first token 0.120 s and the
# last 0.370 s after the request reached the server.
VLLM = {
    "gen_ai.latency.time_in_queue": "0.020",
    "gen_ai.latency.time_in_model_prefill": "0.100",
    "gen_ai.latency.time_in_model_decode": "0.250",
    "gen_ai.latency.time_to_first_token": "0.120",
    "gen_ai.latency.e2e": "0.370",
}
BASE_NS = time.time_ns() - 30 * 60_000 * MS
"""Where the seeded requests start (half an hour ago); span times are ms from here."""
NOTES = "els => els.map(e => [e.closest('.wf-row').dataset.spanId, e.dataset.note, e.textContent])"
BARS = """els => els.map(e => [e.closest('.wf-row').dataset.spanId, e.dataset.component,
    e.classList.contains('critical'), [...e.children].map(c => c.dataset.component || c.className)])"""


def span_id(number: int) -> str:
    return number.to_bytes(8, "big").hex()


def row(
    trace: str, number: int, parent: int, name: str, kind: str, start_ms: int, duration_ms: int, **attrs: str
) -> SpanRow:
    return SpanRow(
        trace_id=bytes.fromhex(trace),
        span_id=number.to_bytes(8, "big"),
        parent_span_id=parent.to_bytes(8, "big"),
        service="chat",
        name=name,
        span_kind="server" if kind == "request" else "client",
        kind=kind,
        start_ns=BASE_NS + start_ms * MS,
        duration_ns=duration_ms * MS,
        attributes=attrs,
    )


def seed(ingestor: Ingestor) -> None:
    # Ours 50–450 ms around OpenLLMetry's span of the same call 51–449 ms.
    ingestor.ingest(
        [
            row(SAME_CALL_TRACE, 1, 0, "POST /chat", "request", 0, 500),
            row(SAME_CALL_TRACE, 2, 1, "chat gpt-4.1", "model", 50, 400, **OURS),
            row(SAME_CALL_TRACE, 3, 2, "openai.chat", "model", 51, 398, **OPENLLMETRY),
        ]
    )
    # A framework's model span 50–950 ms around two calls of ours, 100–400 and 500–900 ms.
    ingestor.ingest(
        [
            row(WRAPPER_TRACE, 1, 0, "POST /agent", "request", 0, 1000),
            row(WRAPPER_TRACE, 2, 1, "ChatOpenAI.chat", "model", 50, 900, **OPENLLMETRY),
            row(WRAPPER_TRACE, 3, 2, "chat gpt-4.1", "model", 100, 300, **OURS),
            row(WRAPPER_TRACE, 4, 2, "chat gpt-4.1", "model", 500, 400, **OURS),
        ]
    )
    # A call that did not stream (no client TTFT) 50–450 ms, served by vLLM 60–430 ms.
    ingestor.ingest(
        [
            row(VLLM_TRACE, 1, 0, "POST /ask", "request", 0, 500),
            row(VLLM_TRACE, 2, 1, "chat llama", "model", 50, 400, **VLLM_CLIENT),
            row(VLLM_TRACE, 3, 2, "llm_request", "model", 60, 370, **VLLM),
        ]
    )


@pytest.fixture
def collector(start_collector: Callable[..., Any]) -> Any:
    running = start_collector()
    seed(Ingestor(running.store))
    return running


def test_ttft_reported_by_the_server_is_labelled_reported(collector: Any, tmp_path: Path) -> None:
    detail = httpx.get(f"{collector.url}/api/requests/{VLLM_TRACE}").json()
    # vLLM's time to first token, 120 ms: the server's share of the client's TTFT (docs/conventions.md).
    assert detail["ttft_ns"] == 120 * MS
    assert detail["provenance"]["ttft"] == "reported"
    # The stored client span says nothing about TTFT: the label must come from the request.
    (root,) = detail["spans"]
    assert semconv.PROVENANCE_TTFT not in root["children"][0]["attributes"]
    streamed = httpx.get(f"{collector.url}/api/requests/{SAME_CALL_TRACE}").json()
    assert streamed["ttft_ns"] is None and "ttft" not in streamed["provenance"]
    with chromium_at(collector.url, tmp_path / "profile") as browser:
        page = browser.open(f"/ui/requests/{VLLM_TRACE}")
        facts = dict(page.locator("#facts .fact").evaluate_all(FACTS))
        assert facts["ttft"] == "120 ms | reported"


def test_spans_of_the_same_call_and_wrappers_are_marked(collector: Any, tmp_path: Path) -> None:
    with chromium_at(collector.url, tmp_path / "profile") as browser:
        page = browser.open(f"/ui/requests/{SAME_CALL_TRACE}")
        assert page.locator("#facts [data-fact=counts] .value").text_content() == "1 · 3"
        notes = page.eval_on_selector_all("#waterfall .wf-name .note", NOTES)
        assert notes == [[span_id(3), "same-call", "same call as chat gpt-4.1"]]
        bars = {bar[0]: bar[1:] for bar in page.eval_on_selector_all("#waterfall .wf-bar", BARS)}
        # OpenLLMetry's span: greyed, not on the critical path, not split into the call's parts.
        assert bars[span_id(3)] == ["same_call", False, ["c-same_call"]]
        # Ours counts the call: on the critical path, split into its parts.
        component, critical, segments = bars[span_id(2)]
        assert component == "model" and critical and "model_unattributed" in segments
        assert "Grey hatched bars" in page.locator("#spans-help").text_content()
        shot(page, "request-same-call")

        page = browser.open(f"/ui/requests/{WRAPPER_TRACE}")
        assert page.locator("#facts [data-fact=counts] .value").text_content() == "2 · 4"
        notes = page.eval_on_selector_all("#waterfall .wf-name .note", NOTES)
        assert notes == [[span_id(2), "wrapper", "around 2 model calls"]]
        assert "Grey hatched bars" not in page.locator("#spans-help").text_content()
        shot(page, "request-model-wrapper")
        bars = {bar[0]: bar[1:] for bar in page.eval_on_selector_all("#waterfall .wf-bar", BARS)}
        # The framework's span is application work around the calls, coloured as such.
        assert bars[span_id(2)][0] == "app_other"
        assert bars[span_id(2)][2] == ["c-app_other"]
        assert bars[span_id(3)][0] == bars[span_id(4)][0] == "model"
