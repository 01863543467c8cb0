"""An instrumented app process for end-to-end tests: ``python workload.py SCENARIO COLLECTOR PROVIDER``.

It runs in its own process, as a production app would, and exports with the real OTLP/HTTP
exporter that ``latencylens.configure`` installs. It prints one JSON line: the trace id and the
times it measured itself, so the test can compare them with what the collector attributed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import openai
from opentelemetry import trace

import latencylens

GOLDEN_MODEL = "openai/gpt-oss-20b"


def golden(provider_url: str) -> dict[str, object]:
    """One non-streamed model call to a server that holds its answer 0.52 s (Groq reference usage)."""
    client = openai.OpenAI(base_url=provider_url, api_key="test", max_retries=0)

    @latencylens.model_call(provider="groq", model=GOLDEN_MODEL)
    def complete() -> object:
        return client.chat.completions.create(
            model=GOLDEN_MODEL, messages=[{"role": "user", "content": "Explain fast inference"}]
        )

    @latencylens.request(name="golden")
    def handle() -> str:
        complete()
        return trace.get_current_span().get_span_context().trace_id.to_bytes(16, "big").hex()

    return {"trace_id": handle()}


def known_sleeps(provider_url: str) -> dict[str, object]:
    """Retrieval 50 ms, tool 30 ms, a streamed model call, then 20 ms of post-processing."""
    client = openai.OpenAI(base_url=provider_url, api_key="test", max_retries=0)
    measured: dict[str, float] = {}

    @latencylens.retrieval(data_source="kb")
    def retrieve() -> None:
        time.sleep(0.050)

    @latencylens.tool(name="lookup")
    def lookup() -> None:
        time.sleep(0.030)

    @latencylens.model_call(provider="groq", model="sim")
    def complete() -> object:
        return client.chat.completions.create(
            model="sim", messages=[{"role": "user", "content": "hi"}], stream=True
        )

    # The openai client imports its resources lazily on first use (~25 ms): warm it outside the
    # measured request.
    for _chunk in client.chat.completions.create(model="sim", messages=[], stream=True):
        pass

    @latencylens.request(name="known-sleeps")
    def handle() -> str:
        retrieve()
        lookup()
        began = time.perf_counter()
        for chunk in complete():
            if "ttft_s" not in measured and chunk.choices and chunk.choices[0].delta.content:
                measured["ttft_s"] = time.perf_counter() - began
        measured["model_s"] = time.perf_counter() - began
        time.sleep(0.020)
        return trace.get_current_span().get_span_context().trace_id.to_bytes(16, "big").hex()

    return {"trace_id": handle(), **measured}


def fastapi_root(provider_url: str) -> dict[str, object]:
    """The example FastAPI app: its root span comes from the FastAPI instrumentation."""
    import os

    os.environ["LATENCYLENS_PROVIDER_URL"] = provider_url
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from fastapi.testclient import TestClient

    from examples.fastapi_app import app

    response = TestClient(app).post("/chat", params={"question": "refund policy"})
    response.raise_for_status()
    return dict(response.json())


def vllm(provider_url: str) -> dict[str, object]:
    """A self-hosted vLLM reached through the httpx hook: the model call carries ``traceparent``."""
    latencylens.instrument_httpx(base_urls=[provider_url], provider="vllm")
    client = openai.OpenAI(base_url=provider_url, api_key="test", max_retries=0)

    @latencylens.request(name="vllm-chat")
    def handle() -> str:
        client.chat.completions.create(
            model="meta-llama/Llama-3.1-8B", messages=[{"role": "user", "content": "hi"}]
        )
        return trace.get_current_span().get_span_context().trace_id.to_bytes(16, "big").hex()

    return {"trace_id": handle()}


SCENARIOS = {"golden": golden, "known_sleeps": known_sleeps, "fastapi": fastapi_root, "vllm": vllm}

if __name__ == "__main__":
    scenario, collector_url, provider_url = sys.argv[1:4]
    os.environ["LATENCYLENS_ENDPOINT"] = collector_url
    if scenario != "fastapi":  # the FastAPI example configures itself, as an app would
        latencylens.configure(service_name=f"e2e-{scenario}")
    result = SCENARIOS[scenario](provider_url)
    tracer_provider = trace.get_tracer_provider()
    tracer_provider.force_flush()  # type: ignore[attr-defined]
    tracer_provider.shutdown()  # type: ignore[attr-defined]
    print(json.dumps(result))
