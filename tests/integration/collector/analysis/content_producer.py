"""One third-party instrumentation, recording message content, around real ``openai`` calls that
carry a secret; its spans go to a collector through the real OTLP/HTTP exporter.

``python content_producer.py NAME COLLECTOR_URL PROVIDER_URL SECRET`` with NAME one of
``openllmetry``, ``openinference``, ``logfire``, ``openlit``. Under a root span ``POST /chat`` each
(one trace per call) it makes a non-streamed call and a stream whose system and user messages hold
the secret, flushes, and prints ``{"traces": {mode: trace id hex}}``. Every instrumentation is
configured to record content (their defaults, except OpenLIT's). It needs nothing from this
repository, so it also runs in OpenLIT's own virtualenv (openlit requires ``openai<3``).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import openai
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind

MODEL = "gpt-4.1"
MODES = ("plain", "stream")


def instrument(name: str, processor: BatchSpanProcessor) -> tuple[trace.Tracer, Callable[[], object]]:
    """Install ``name`` with content recording on; returns a tracer and a flush."""
    if name == "logfire":
        import logfire

        logfire.configure(
            send_to_logfire=False, console=False, service_name="chat", additional_span_processors=[processor]
        )
        logfire.instrument_openai()
        return trace.get_tracer("tests.app"), logfire.force_flush
    provider = TracerProvider()
    provider.add_span_processor(processor)
    if name == "openlit":
        import openlit

        trace.set_tracer_provider(provider)  # openlit.init() reuses an SDK provider already set
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as prices:
            prices.write("{}")  # no price list download: the tests have no internet
        openlit.init(
            disable_metrics=True, disable_events=True, capture_message_content=True, pricing_json=prices.name
        )
        os.unlink(prices.name)
        return trace.get_tracer("tests.app"), provider.force_flush
    if name == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=provider)
    elif name == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceInstrumentor

        OpenInferenceInstrumentor().instrument(tracer_provider=provider)
    else:
        raise SystemExit(f"unknown instrumentation {name!r}")
    return provider.get_tracer("tests.app"), provider.force_flush


def main(name: str, collector_url: str, provider_url: str, secret: str) -> None:
    os.environ.setdefault("TRACELOOP_TRACE_CONTENT", "true")  # OpenLLMetry's default, made explicit
    processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{collector_url}/v1/traces", timeout=30))
    tracer, flush = instrument(name, processor)
    client = openai.OpenAI(base_url=provider_url, api_key="test-key", max_retries=0)
    messages: Any = [
        {"role": "system", "content": f"Never reveal {secret}."},
        {"role": "user", "content": f"What is the code? I think it is {secret}."},
    ]
    traces = {}
    for mode in MODES:
        with tracer.start_as_current_span("POST /chat", kind=SpanKind.SERVER) as root:
            if mode == "plain":
                client.chat.completions.create(model=MODEL, messages=messages)
            else:
                for _ in client.chat.completions.create(
                    model=MODEL, messages=messages, stream=True, stream_options={"include_usage": True}
                ):
                    pass
        traces[mode] = format(root.get_span_context().trace_id, "032x")
    flush()
    print(json.dumps({"traces": traces}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
