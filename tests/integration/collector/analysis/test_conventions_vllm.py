"""vLLM's ``llm_request`` server span, ingested through POST /v1/traces from recorded OTLP/JSON.

The fixtures carry vLLM's documented attribute set (names from ``vllm/tracing/utils.py``, values
from the reference example): queue 0.0123 s, prefill 0.0729 s, decode 1.2405 s, e2e 1.3342 s,
time to first token 0.0911 s, 42 prompt and 128 completion tokens (deprecated usage names).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from otlp_builders import MS, recent_base_ns

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
US = 1_000


def load_shifted(
    name: str, base_ns: int, edit: Callable[[dict[str, Any]], None] | None = None
) -> tuple[bytes, str]:
    """An OTLP/JSON fixture with every time moved so that its earliest span starts at ``base_ns``;
    ``edit`` may change the spans (by name) first."""
    document = json.loads((FIXTURES / name).read_text())
    spans = [
        span
        for resource in document["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    if edit is not None:
        edit({span["name"]: span for span in spans})
    shift = base_ns - min(int(span["startTimeUnixNano"]) for span in spans)
    for span in spans:
        for key in ("startTimeUnixNano", "endTimeUnixNano"):
            span[key] = str(int(span[key]) + shift)
    return json.dumps(document).encode(), spans[0]["traceId"]


def post_fixture(url: str, name: str, edit: Callable[[dict[str, Any]], None] | None = None) -> str:
    body, trace_id = load_shifted(name, recent_base_ns(), edit)
    response = httpx.post(f"{url}/v1/traces", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    return trace_id


def detail(url: str, trace_id: str) -> dict[str, Any]:
    response = httpx.get(f"{url}/api/requests/{trace_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def nonzero_parts_us(request: dict[str, Any]) -> dict[str, int]:
    """A request's non-zero parts, in whole µs (the fixtures' resolution)."""
    return {name: ns // US for name, ns in request["parts"].items() if ns}


def test_server_span_replaces_the_client_estimate(collector) -> None:
    """Root POST /chat 0–2000 ms; client model call 300–1800 ms (1500 ms, our names, no usage);
    an HTTP client span inside it; vLLM's span below that (its parent, via traceparent).

    Worked numbers (µs): the model call's 1 500 000 split by vLLM's report:
      server total = e2e 1 334 200 → network = 1 500 000 − 1 334 200 = 165 800
      queue 12 300, prefill 72 900, decode 1 240 500 (reported)
      model_unattributed = 1 334 200 − (12 300 + 72 900 + 1 240 500) = 8 500
      app_other = 2 000 000 − 1 500 000 = 500 000; the parts sum to 2 000 000.
    Tokens come from the server span (the client recorded none); one model call, not two.
    """
    trace_id = post_fixture(collector.url, "vllm_with_client.otlp.json")
    request = detail(collector.url, trace_id)
    assert {name: ns // US for name, ns in request["parts"].items()} == {
        "retrieval": 0,
        "tool": 0,
        "app_other": 500_000,
        "network": 165_800,
        "queue": 12_300,
        "prefill": 72_900,
        "decode": 1_240_500,
        "inference": 0,
        "server_other": 0,
        "model_unattributed": 8_500,
    }
    assert sum(request["parts"].values()) == request["e2e_ns"] == 2000 * MS
    assert request["provenance"]["queue"] == request["provenance"]["decode"] == "reported"
    assert request["provenance"]["network"] == "derived"
    assert request["model_calls"] == 1
    assert (request["input_tokens"], request["output_tokens"]) == (42, 128)
    assert request["provider"] == "openai"  # the client's name for who it called
    assert request["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    # The server span is stored and shown, but owns none of the request (not app time).
    server = find_span(request["spans"], "llm_request")
    assert server["critical_ns"] == 0
    assert server["service"] == "vllm"


def test_server_only_trace_is_one_model_call(collector) -> None:
    """vLLM called without trace context: its span is the request and the model call.

    Worked numbers (µs): duration = e2e 1 334 200 (the span itself lasts 1 334 600); network 0;
    queue 12 300, prefill 72 900, decode 1 240 500, model_unattributed 8 500.
    TTFT = vLLM's time to first token, 91 100; ITL = (e2e − TTFT) / (128 − 1)
    = 1 243 100 / 127 = 9 788.19… → 9 788 188 ns.
    """
    trace_id = post_fixture(collector.url, "vllm_server_only.otlp.json")
    request = detail(collector.url, trace_id)
    assert request["e2e_ns"] == 1_334_200 * US
    assert nonzero_parts_us(request) == {
        "queue": 12_300,
        "prefill": 72_900,
        "decode": 1_240_500,
        "model_unattributed": 8_500,
    }
    assert request["provider"] == "vllm"
    assert request["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert (request["input_tokens"], request["output_tokens"]) == (42, 128)
    assert request["ttft_ns"] == 91_100 * US
    assert request["provenance"]["ttft"] == "reported"  # the server's, not a client measurement
    assert request["itl_ns"] == 1_243_100 * US // 127


def find_span(spans: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for span in spans:
        if span["name"] == name:
            return span
        try:
            return find_span(span["children"], name)
        except LookupError:
            continue
    raise LookupError(name)
