"""Trace context to a self-hosted server: vLLM's own span replaces the client's estimates.

The app (its own process) calls a vLLM stand-in (another process) through the httpx hook; the
server reads the ``traceparent`` and exports its ``llm_request`` span to the same collector.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from test_pipeline import fetch_request, run_workload, walk

from latencylens_collector.analysis.attribution import COMPONENTS, DECODE, NETWORK, PREFILL, QUEUE

SERVER = Path(__file__).with_name("vllm_server.py")
MS = 1_000_000


@contextmanager
def vllm_process(collector_url: str) -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, str(SERVER), collector_url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip()
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_vllm_server_span_supplies_queue_prefill_decode(collector: Any) -> None:
    with vllm_process(collector.url) as vllm_url:
        result = run_workload("vllm", collector.url, vllm_url)
        detail = _with_server_span(collector.url, result["trace_id"])
    spans = [span for root in detail["spans"] for span in walk(root)]
    (model,) = [span for span in spans if span["kind"] == "model" and span["service"] != "vllm"]
    (server,) = [span for span in spans if span["name"] == "llm_request"]
    assert server["parent_span_id"] == model["span_id"]  # the traceparent reached the server
    parts = detail["parts"]
    # gen_ai.latency.time_in_queue 0.020 s, time_in_model_prefill 0.030 s, time_in_model_decode 0.050 s
    assert parts[QUEUE] == 20 * MS
    assert parts[PREFILL] == 30 * MS
    assert parts[DECODE] == 50 * MS
    # network = client call duration − server e2e (the span's gen_ai.latency.e2e, ≈ its duration)
    assert parts[NETWORK] == model["duration_ns"] - round(
        float(server["attributes"]["gen_ai.latency.e2e"]) * 1e9
    )
    assert detail["provenance"][QUEUE] == "reported"
    assert detail["input_tokens"] == 42
    assert sum(parts[name] for name in COMPONENTS) == detail["e2e_ns"]


def _with_server_span(url: str, trace_id: str) -> dict[str, Any]:
    """The request once the server's span has joined it (it is exported by another process)."""
    import time

    deadline = time.monotonic() + 20
    while True:
        detail = fetch_request(url, trace_id)
        names = {span["name"] for root in detail["spans"] for span in walk(root)}
        if "llm_request" in names or time.monotonic() > deadline:
            return detail
        time.sleep(0.1)
