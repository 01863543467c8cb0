"""Token counts in the UI: unknown is "—" (never 0), an instrumentation's estimate is "~N" and
marked estimated, and a Logfire span is shown by its rendered message. Real Chromium, real
collector, requests stored through the real ingest path."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_ui_pages import FACTS, TEXTS, chromium_at
from ui_seed import MS

from latencylens import semconv
from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.pipeline.ingest import Ingestor

UNKNOWN_TRACE, ESTIMATED_TRACE = "b" * 32, "c" * 32


def _trace(trace_hex: str, start_ns: int, model_attributes: dict[str, str], model_name: str) -> list[SpanRow]:
    """POST /chat 0–500 ms around one model call 50–450 ms whose spans carry ``model_attributes``."""
    trace = bytes.fromhex(trace_hex)
    root = SpanRow(
        trace, (1).to_bytes(8, "big"), bytes(8), "chat", "POST /chat", "server", "request", start_ns, 500 * MS
    )
    call = SpanRow(
        trace,
        (2).to_bytes(8, "big"),
        (1).to_bytes(8, "big"),
        "chat",
        model_name,
        "client",
        "model",
        start_ns + 50 * MS,
        400 * MS,
        attributes=model_attributes,
    )
    return [root, call]


def seed(ingestor: Ingestor, now_ns: int) -> None:
    chat = {semconv.GEN_AI_OPERATION_NAME: "chat", semconv.GEN_AI_REQUEST_MODEL: "gpt-4.1"}
    # Logfire's non-streamed span against a server that sent no usage: no counts at all.
    unknown = {
        **chat,
        "logfire.span_type": "span",
        "logfire.msg_template": "Chat Completion with {request_data[model]!r}",
        "logfire.msg": "Chat Completion with 'gpt-4.1'",
    }
    # OpenLIT's stream without usage: its own estimate, recognisable by the missing cache counts.
    estimated = {
        **chat,
        "telemetry.sdk.name": "openlit",
        semconv.GEN_AI_REQUEST_STREAM: "true",
        semconv.GEN_AI_USAGE_INPUT_TOKENS: "6",
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: "6",
    }
    ingestor.ingest(
        _trace(UNKNOWN_TRACE, now_ns - 60_000 * MS, unknown, "Chat Completion with {request_data[model]!r}")
    )
    ingestor.ingest(_trace(ESTIMATED_TRACE, now_ns - 50_000 * MS, estimated, "chat gpt-4.1"))


@pytest.fixture
def collector(start_collector: Callable[..., Any]) -> Any:
    running = start_collector()
    seed(Ingestor(running.store), time.time_ns())
    return running


def facts(page: Any) -> dict[str, str]:
    return dict(page.locator("#facts .fact").evaluate_all(FACTS))


def test_unknown_and_estimated_tokens_and_logfire_names(collector: Any, tmp_path: Path) -> None:
    with chromium_at(collector.url, tmp_path / "profile") as browser:
        page = browser.open("/ui/requests")
        rows = page.eval_on_selector_all("#requests tbody tr", "rows => rows.map(r => r.dataset.traceId)")
        cells = page.eval_on_selector_all("#requests tbody tr td:nth-child(7)", TEXTS)
        tokens = dict(zip(rows, cells, strict=True))
        assert tokens[UNKNOWN_TRACE] == "— → —"
        assert tokens[ESTIMATED_TRACE] == "~6 → ~6"

        page = browser.open(f"/ui/requests/{UNKNOWN_TRACE}")
        found = facts(page)
        assert found["input_tokens"] == "— | " and found["output_tokens"] == "— | "
        names = page.eval_on_selector_all(
            "#waterfall .wf-name", "els => els.map(e => e.firstChild.textContent)"
        )
        assert "Chat Completion with 'gpt-4.1'" in names

        page = browser.open(f"/ui/requests/{ESTIMATED_TRACE}")
        found = facts(page)
        assert found["output_tokens"] == "~6 | estimated"
        assert found["cached_tokens"] == "— | "
