"""TGI, which reports prefill and decode only together, end to end: the real openai SDK (TGI's
Messages API is OpenAI-compatible) through ``instrument_httpx`` against a replay server sending
TGI's documented timing headers, the spans exported with the real OTLP/HTTP exporter to a real
collector, and the request read back from its API.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from provider_payloads import TGI_HEADERS, tgi_chat_completion
from provider_replay import MS, ReplayServer, json_reply

import latencylens

Spans = Callable[[], list[ReadableSpan]]
HOLD_S = 1.25
"""The replay server holds its answer this long, so the client measures more than TGI's
x-total-time of 1234 ms and the network part is positive."""


@pytest.fixture
def tgi_instrumented(replay: Callable[[], ReplayServer]) -> Iterator[ReplayServer]:
    server = replay().route(
        "POST", "/v1/chat/completions", json_reply(tgi_chat_completion(), TGI_HEADERS, delay_s=HOLD_S)
    )
    handle = latencylens.instrument_httpx(base_urls=[server.url + "/v1"], provider="tgi")
    yield server
    handle.undo()


def fetch_request(url: str, trace_id: str, timeout_s: float = 20.0) -> dict[str, Any]:
    """The request's breakdown, once the collector has stored its row."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = httpx.get(f"{url}/api/requests/{trace_id}", timeout=10)
        if response.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def export_and_fetch(finished: list[ReadableSpan], url: str) -> dict[str, Any]:
    """Export the spans with the real OTLP/HTTP exporter to the collector at ``url``; the request's
    breakdown as its API returns it."""
    exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces")
    assert exporter.export(finished) == SpanExportResult.SUCCESS
    exporter.shutdown()
    return fetch_request(url, f"{finished[0].context.trace_id:032x}")


def model_span(detail: dict[str, Any]) -> dict[str, Any]:
    def walk(span: dict[str, Any]) -> list[dict[str, Any]]:
        return [span, *(s for child in span["children"] for s in walk(child))]

    (model,) = [s for root in detail["spans"] for s in walk(root) if s["kind"] == "model"]
    return model


def test_tgi_request_shows_queue_inference_not_split_and_the_servers_other_time(
    tgi_instrumented: ReplayServer, spans: Spans, collector: Any
) -> None:
    client = openai.OpenAI(
        base_url=tgi_instrumented.url + "/v1",
        api_key="-",
        max_retries=0,
        http_client=openai.DefaultHttpxClient(trust_env=False),
    )

    @latencylens.request(name="POST /ask")
    def ask() -> str:
        response = client.chat.completions.create(model="tgi", messages=[{"role": "user", "content": "hi"}])
        return response.choices[0].message.content or ""

    assert ask() == "Hi"
    finished = spans()
    assert len(finished) == 2  # the request and one model call
    detail = export_and_fetch(finished, collector.url)

    parts, provenance = detail["parts"], detail["provenance"]
    # TGI's headers (router/src/server.rs; the provider-timing reference's reconstructed example):
    # x-queue-time 15, x-inference-time 1217 (prefill + decode together), x-total-time 1234 ms.
    assert parts["queue"] == 15 * MS
    assert parts["inference"] == 1217 * MS  # prefill + decode, not split by the provider
    # server other = x-total-time − x-queue-time − x-inference-time = 1234 − 15 − 1217 = 2 ms
    # (here exactly x-validation-time: validation and tokenization in TGI's router)
    assert parts["server_other"] == 2 * MS
    # network = the call's client-measured duration − x-total-time; the server held 1.25 s
    call_ns = model_span(detail)["duration_ns"]
    assert parts["network"] == call_ns - 1234 * MS
    assert parts["network"] >= round(HOLD_S * 1e9) - 1234 * MS
    assert parts["prefill"] == parts["decode"] == parts["model_unattributed"] == 0
    assert sum(parts.values()) == detail["e2e_ns"]
    assert (provenance["queue"], provenance["inference"]) == ("reported", "reported")
    assert (provenance["server_other"], provenance["network"]) == ("derived", "derived")
    assert "prefill" not in provenance and "decode" not in provenance
    assert not detail["inconsistent"]
    assert (detail["provider"], detail["model"]) == ("tgi", "tgi")
    assert (detail["input_tokens"], detail["output_tokens"]) == (28, 100)

    explanation = detail["explanation"]
    assert (explanation["dominant"], explanation["dominant_ns"]) == ("inference", 1217 * MS)
    assert explanation["sentence"].startswith(
        "Prefill + decode (not split by the provider) on tgi (tgi) took 1.22 s of the request's "
    )
    assert explanation["sentence"].endswith(
        "; tgi reported queue 15 ms and inference (prefill + decode, not split) 1.22 s; "
        "2.0 ms of server time outside them."
    )
