"""The whole pipeline: an app process with the real OTel exporter → collector over HTTP → chdb → API.

The provider is a local HTTP server on 127.0.0.1 that answers like Groq, with chosen delays.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
import pytest

from latencylens_collector.analysis.attribution import (
    APP_OTHER,
    COMPONENTS,
    DECODE,
    MODEL_UNATTRIBUTED,
    NETWORK,
    PREFILL,
    QUEUE,
    RETRIEVAL,
    TOOL,
)
from latencylens_collector.demo.provider_sim import Timing

WORKLOAD = Path(__file__).with_name("workload.py")
MS = 1_000_000
TOLERANCE_NS = 5 * MS

# Groq API reference usage, held for 0.52 s by the local server.
GROQ_REFERENCE = Timing(
    queue_s=0.037493756,
    prefill_s=0.000680594,
    decode_s=0.463333333,
    prompt_tokens=18,
    completion_tokens=556,
    hold_s=0.52,
)


@contextmanager
def provider_process(timing: Timing) -> Iterator[str]:
    """The simulated provider in its own process, so this process's threads cannot delay it."""
    args = [
        f"--{name.replace('_', '-')}={value}" for name, value in asdict(timing).items() if value is not None
    ]
    process = subprocess.Popen(
        [sys.executable, "-m", "latencylens_collector.demo.provider_sim", *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip()
    finally:
        process.terminate()
        process.wait(timeout=10)


def run_workload(scenario: str, collector_url: str, provider_url: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(WORKLOAD), scenario, collector_url, provider_url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def fetch_request(url: str, trace_id: str, timeout_s: float = 20.0) -> dict[str, Any]:
    """The request's breakdown, once the collector has its root span."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        response = httpx.get(f"{url}/api/requests/{trace_id}", timeout=10)
        if response.status_code == 200:
            return response.json()
        time.sleep(0.1)
    raise AssertionError(f"request {trace_id} never appeared: {response.status_code} {response.text}")


def walk(span: dict[str, Any]) -> list[dict[str, Any]]:
    return [span, *(s for child in span.get("children", []) for s in walk(child))]


def model_span(detail: dict[str, Any]) -> dict[str, Any]:
    spans = [s for root in detail["spans"] for s in walk(root)]
    (model,) = [s for s in spans if s["kind"] == "model"]
    return model


def test_golden_groq_reference_through_the_pipeline(collector: Any) -> None:
    with provider_process(GROQ_REFERENCE) as provider_url:
        result = run_workload("golden", collector.url, provider_url)
    detail = fetch_request(collector.url, result["trace_id"])
    parts = detail["parts"]

    # queue_time 0.037493756 s × 1e9 = 37,493,756 ns
    assert parts[QUEUE] == 37_493_756
    # prompt_time 0.000680594 s = 680,594 ns
    assert parts[PREFILL] == 680_594
    # completion_time 0.463333333 s = 463,333,333 ns
    assert parts[DECODE] == 463_333_333
    # server time = queue_time + total_time = 0.037493756 + 0.464013927 = 0.501507683 s
    # network = measured call duration − 501,507,683 ns; the call was held ≥ 0.52 s, so > 18.4 ms
    call_ns = model_span(detail)["duration_ns"]
    assert parts[NETWORK] == call_ns - 501_507_683
    assert parts[NETWORK] >= 520_000_000 - 501_507_683
    assert parts[MODEL_UNATTRIBUTED] == 0  # total_time = prompt_time + completion_time exactly
    # output rate = completion_tokens / completion_time = 556 / 0.463333333 s = 1200 tokens/s
    assert detail["decode_tokens_per_second"] == pytest.approx(1200.0, abs=1e-3)
    assert detail["input_tokens"] == 18
    assert detail["output_tokens"] == 556
    assert detail["provider"] == "groq"
    assert detail["model"] == "openai/gpt-oss-20b"
    assert detail["provenance"][QUEUE] == "reported"
    assert detail["provenance"][NETWORK] == "derived"
    assert not detail["inconsistent"]
    assert sum(parts[name] for name in COMPONENTS) == detail["e2e_ns"]


def test_known_sleeps_are_attributed_within_5_ms(collector: Any) -> None:
    # The provider reports (and spends) queue 40 ms, prefill 10 ms, decode 100 ms.
    timing = Timing(queue_s=0.040, prefill_s=0.010, decode_s=0.100, prompt_tokens=5, completion_tokens=20)
    with provider_process(timing) as provider_url:
        result = run_workload("known_sleeps", collector.url, provider_url)
    detail = fetch_request(collector.url, result["trace_id"])
    parts = detail["parts"]
    server_s = 0.040 + 0.010 + 0.100
    truth = {
        RETRIEVAL: 50 * MS,
        TOOL: 30 * MS,
        QUEUE: 40 * MS,
        PREFILL: 10 * MS,
        DECODE: 100 * MS,
        # Loopback plus HTTP handling on both ends: the call's duration as the app measured it
        # with its own clock around the stream, minus the 150 ms the server spent. (An earlier,
        # uninstrumented call is no truth for this one: on a loaded machine two loopback calls
        # differ by more than 5 ms.)
        NETWORK: round((result["model_s"] - server_s) * 1e9),
        APP_OTHER: 20 * MS,  # the post-processing sleep, plus microseconds of glue
        MODEL_UNATTRIBUTED: 0,
    }
    for name, expected in truth.items():
        assert abs(parts[name] - expected) <= TOLERANCE_NS, (name, parts[name], expected)
    assert sum(parts[name] for name in COMPONENTS) == detail["e2e_ns"]
    # The streamed call's client-side measures are recorded too.
    assert detail["ttft_ns"] is not None
    # TTFT: the server holds the first token for queue 40 + prefill 10 ms; the recorded TTFT is
    # what the app itself saw on this call (its first content chunk), not a guess from the server.
    assert detail["ttft_ns"] >= 50 * MS
    assert abs(detail["ttft_ns"] - result["ttft_s"] * 1e9) <= TOLERANCE_NS
    assert abs(model_span(detail)["duration_ns"] - result["model_s"] * 1e9) <= TOLERANCE_NS


def test_fastapi_app_root_span_comes_from_the_framework(collector: Any) -> None:
    timing = Timing(queue_s=0.005, prefill_s=0.002, decode_s=0.020, prompt_tokens=7, completion_tokens=4)
    with provider_process(timing) as provider_url:
        result = run_workload("fastapi", collector.url, provider_url)
    detail = fetch_request(collector.url, result["trace_id"])
    assert detail["name"] == "POST /chat"
    assert detail["service"] == "fastapi-chat"
    root = detail["spans"][0]
    kinds = {span["kind"] for span in walk(root)}
    assert {"retrieval", "model"} <= kinds
    assert detail["parts"][QUEUE] == 5 * MS
    assert detail["parts"][RETRIEVAL] >= 10 * MS
    assert sum(detail["parts"][name] for name in COMPONENTS) == detail["e2e_ns"]
