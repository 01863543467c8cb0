"""Run one third-party OpenAI instrumentation around a real ``openai`` call, print its spans.

``python conventions_producer.py NAME PROVIDER_URL stream|plain`` prints the spans as a base64
OTLP ExportTraceServiceRequest. It runs in its own process because instrumentations patch the
SDK globally and not all of them undo it fully (OpenLLMetry keeps injecting ``traceparent`` after
``uninstrument``), which would leak into every later test of the same process.
"""

from __future__ import annotations

import base64
import sys
from typing import Any

import openai
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

MODEL = "llama-3.3-70b-versatile"


def instrumentor(name: str) -> Any:
    if name == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        return OpenAIInstrumentor()
    from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceInstrumentor

    return OpenInferenceInstrumentor()


def produce(name: str, url: str, stream: bool) -> bytes:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor(name).instrument(tracer_provider=provider)
    client = openai.OpenAI(base_url=url, api_key="test-key", max_retries=0)
    tracer = provider.get_tracer("tests.app")
    with tracer.start_as_current_span("POST /chat", kind=SpanKind.SERVER):
        with tracer.start_as_current_span("build prompt"):
            pass
        messages: Any = [{"role": "user", "content": "hello"}]
        if stream:
            for _ in client.chat.completions.create(model=MODEL, messages=messages, stream=True):
                pass
        else:
            client.chat.completions.create(model=MODEL, messages=messages)
    provider.force_flush()
    return encode_spans(exporter.get_finished_spans()).SerializeToString()


if __name__ == "__main__":
    name, url, mode = sys.argv[1:4]
    print(base64.b64encode(produce(name, url, mode == "stream")).decode())
