"""One third-party instrumentation, alone, around three real ``openai`` calls; prints what it exported.

``python semantics_producer.py NAME BASE_URL`` with NAME one of ``openllmetry``, ``openinference``,
``openlit``, ``logfire``. Under a root span ``POST /chat`` each (one trace per call) it makes a
non-streamed call, a stream with ``include_usage`` and a stream without usage, in that order, and
prints one JSON line: ``{"export": <base64 OTLP ExportTraceServiceRequest>, "traces": {mode:
trace id hex}}``. It needs nothing from this repository, so it also runs in OpenLIT's own
virtualenv (openlit requires ``openai<3``). Each instrumentation runs in a process of its own
because they patch the SDK globally and not all of them undo it.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import tempfile
from typing import Any

import openai
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

MODEL = "gpt-4.1"
MODES = ("plain", "stream", "stream-no-usage")


def instrument(name: str, exporter: InMemorySpanExporter) -> trace.Tracer:
    """Install ``name`` the way its documentation says, exporting to ``exporter``."""
    if name == "logfire":
        import logfire

        logfire.configure(
            send_to_logfire=False,
            console=False,
            service_name="chat",
            additional_span_processors=[SimpleSpanProcessor(exporter)],
        )
        logfire.instrument_openai()
        return trace.get_tracer("tests.app")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    if name == "openlit":
        import openlit

        trace.set_tracer_provider(provider)  # openlit.init() reuses an SDK provider already set
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as prices:
            prices.write("{}")  # no price list download: the tests have no internet
        openlit.init(
            disable_metrics=True,
            disable_events=True,
            capture_message_content=False,
            pricing_json=prices.name,
        )
        os.unlink(prices.name)
        return trace.get_tracer("tests.app")
    if name == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=provider)
    elif name == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceInstrumentor

        OpenInferenceInstrumentor().instrument(tracer_provider=provider)
    else:
        raise SystemExit(f"unknown instrumentation {name!r}")
    return provider.get_tracer("tests.app")


def call(client: openai.OpenAI, mode: str) -> None:
    messages: Any = [{"role": "user", "content": "hello"}]
    if mode == "plain":
        client.chat.completions.create(model=MODEL, messages=messages)
        return
    usage: Any = {"stream_options": {"include_usage": True}} if mode == "stream" else {}
    for _ in client.chat.completions.create(model=MODEL, messages=messages, stream=True, **usage):
        pass


def main(name: str, base_url: str) -> None:
    exporter = InMemorySpanExporter()
    tracer = instrument(name, exporter)
    client = openai.OpenAI(base_url=base_url, api_key="test-key", max_retries=0)
    traces = {}
    for mode in MODES:
        with tracer.start_as_current_span("POST /chat", kind=SpanKind.SERVER) as root:
            call(client, mode)
        traces[mode] = format(root.get_span_context().trace_id, "032x")
    export = encode_spans(exporter.get_finished_spans()).SerializeToString()
    print(json.dumps({"export": base64.b64encode(export).decode(), "traces": traces}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
