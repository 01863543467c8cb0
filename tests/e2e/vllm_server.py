"""A stand-in for a vLLM server started with ``--otlp-traces-endpoint``: run in its own process.

``python vllm_server.py COLLECTOR_URL`` prints its base URL and serves OpenAI-compatible chat
completions. Like vLLM, it reads the incoming W3C ``traceparent`` and exports one ``llm_request``
SERVER span per request under that parent, carrying ``gen_ai.latency.*`` attributes in seconds.
It spends exactly the times it reports: queue 20 ms, prefill 30 ms, decode 50 ms.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

QUEUE_S, PREFILL_S, DECODE_S = 0.020, 0.030, 0.050
PROMPT_TOKENS, COMPLETION_TOKENS = 42, 128


def serve(collector_url: str) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "vllm"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{collector_url}/v1/traces")))
    tracer = provider.get_tracer("vllm.tracing")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            arrival_ns = time.time_ns()
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
            parent = TraceContextTextMapPropagator().extract(dict(self.headers.items()))
            time.sleep(QUEUE_S + PREFILL_S + DECODE_S)
            e2e_s = (time.time_ns() - arrival_ns) / 1e9
            answer = json.dumps(
                {
                    "id": "chatcmpl-vllm",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "m"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "ok"},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": PROMPT_TOKENS,
                        "completion_tokens": COMPLETION_TOKENS,
                        "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
                    },
                }
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
            self.wfile.flush()
            span = tracer.start_span(
                "llm_request", context=parent, kind=SpanKind.SERVER, start_time=arrival_ns
            )
            span.set_attributes(
                {
                    "gen_ai.request.id": "chatcmpl-vllm",
                    "gen_ai.usage.prompt_tokens": PROMPT_TOKENS,
                    "gen_ai.usage.completion_tokens": COMPLETION_TOKENS,
                    "gen_ai.latency.time_in_queue": QUEUE_S,
                    "gen_ai.latency.time_in_model_prefill": PREFILL_S,
                    "gen_ai.latency.time_in_model_decode": DECODE_S,
                    "gen_ai.latency.time_in_model_inference": PREFILL_S + DECODE_S,
                    "gen_ai.latency.time_to_first_token": QUEUE_S + PREFILL_S,
                    "gen_ai.latency.e2e": e2e_s,
                    "gen_ai.response.finish_reasons": '["stop"]',
                }
            )
            span.end(end_time=arrival_ns + round(e2e_s * 1e9))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    threading.Event().wait()


if __name__ == "__main__":
    serve(sys.argv[1])
