"""FastAPI + ``AsyncOpenAI`` streaming, the most common production setup, through the real collector.

The app runs in its own process (this file, run as a script) as a production app would: a FastAPI app
served by uvicorn, its root spans from ``opentelemetry-instrumentation-fastapi``, model spans from
``latencylens.instrument_openai()`` alone (no decorator), exported by the real OTLP/HTTP exporter that
``latencylens.configure`` installs. One ``async def`` route streams with ``AsyncOpenAI``, one plain
route with ``OpenAI``; both read the same stream from the loopback replay server (first content
80 ms after the request arrives, three more 30 ms apart, then the usage chunk). Each route notes when
its own code saw the first content and the end of the stream, so every measure the collector
returns can be held between when the server sent a part and when the app saw it, whatever the load.

The async request must get the breakdown the sync one gets: one model call with the stream's TTFT,
its decode, the usage chunk's tokens, and almost no application time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from provider_payloads import OPENAI_MODEL, openai_chunk, openai_usage_chunk
from provider_replay import ReplayServer, sse_reply

HERE = Path(__file__).resolve()
SUPPORT = HERE.parents[1] / "support"
"""Shared test modules, for the app this file runs as a script (pytest's ``pythonpath`` is not a child's)."""

MS = 1_000_000
CONTENT = ["Fast", " models", " stream", " well"]
TTFT_S = 0.080
GAP_S = 0.030
DECODE_S = GAP_S * (len(CONTENT) - 1)
FIRST_PART, LAST_PART, DONE_PART = 1, 6, 7
"""Parts: role chunk, four content chunks (1-4), finish chunk, usage chunk (6), ``[DONE]`` (7)."""
APP_OTHER_MAX_NS = 30 * MS
"""The routes do nothing but stream: FastAPI/ASGI handling is a few ms (30 ms on a loaded machine)."""


def stream_reply() -> Any:
    events = [openai_chunk({"role": "assistant", "content": ""})]
    events += [openai_chunk({"content": text}) for text in CONTENT]
    events += [openai_chunk({}, "stop"), openai_usage_chunk()]
    delays = [0.010, TTFT_S - 0.010] + [GAP_S] * (len(CONTENT) - 1) + [0.0, 0.0]
    return sse_reply(events, delays)


def _child_env() -> dict[str, str]:
    path = [str(SUPPORT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))}


def run_app(collector_url: str, provider_url: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(HERE), collector_url, provider_url],
        env=_child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def fetch_request(url: str, trace_id: str, timeout_s: float = 20.0) -> dict[str, Any]:
    """The request's detail once the collector has its root span and its model call."""
    import httpx

    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = httpx.get(f"{url}/api/requests/{trace_id}", timeout=10)
        if last.status_code == 200 and last.json()["model_calls"] >= 1:
            return dict(last.json())
        time.sleep(0.1)
    raise AssertionError(f"request {trace_id} never appeared: {last}")


def walk(span: dict[str, Any]) -> list[dict[str, Any]]:
    return [span, *(s for child in span.get("children", []) for s in walk(child))]


def test_async_openai_stream_in_fastapi_gets_the_sync_breakdown(
    collector: Any, replay: Callable[[], ReplayServer]
) -> None:
    from latencylens_collector.analysis.attribution import APP_OTHER, COMPONENTS, DECODE

    provider = replay()
    provider.route("POST", "/v1/chat/completions", lambda request: stream_reply())
    result = run_app(collector.url, provider.url + "/v1")
    assert result["sync"]["text"] == result["async"]["text"] == "".join(CONTENT)
    # warm-up and measured call of each route, in the order the app made them
    sync_request, async_request = provider.requests[1], provider.requests[3]

    shapes = {}
    for flavour, request in (("sync", sync_request), ("async", async_request)):
        seen = result[flavour]
        detail = fetch_request(collector.url, seen["trace_id"])
        assert detail["name"] == f"POST /chat-{flavour}"  # the root span is FastAPI's
        assert detail["model_calls"] == 1
        spans = [span for root in detail["spans"] for span in walk(root)]
        (model,) = [span for span in spans if span["kind"] == "model"]
        attributes = model["attributes"]
        start = model["start_ns"]
        first = int(attributes["latencylens.stream.first_content_ns"])
        last = int(attributes["latencylens.stream.last_chunk_ns"])
        # TTFT: at least the injected wait, between the first content's sending and the route seeing it.
        assert detail["ttft_ns"] == first
        assert first >= request.received_ns - start + TTFT_S * 1e9
        assert request.sent_ns[FIRST_PART] <= start + first <= seen["first_content_ns"]
        # Decode runs to the usage chunk, the stream's last chunk; the whole call is on the critical path.
        assert request.sent_ns[LAST_PART] <= start + last <= seen["stream_end_ns"]
        assert detail["parts"][DECODE] == last - first
        # The model span lasts until the stream ended ([DONE]), not until create() returned.
        assert request.sent_ns[DONE_PART] <= start + model["duration_ns"] <= seen["stream_end_ns"]
        assert model["duration_ns"] >= TTFT_S * 1e9 + DECODE_S * 1e9
        assert (detail["input_tokens"], detail["output_tokens"]) == (19, 10)  # the include_usage chunk
        assert detail["parts"][APP_OTHER] <= APP_OTHER_MAX_NS, detail["parts"]
        assert sum(detail["parts"][name] for name in COMPONENTS) == detail["e2e_ns"]
        assert detail["explanation"]["dominant"] != APP_OTHER
        shapes[flavour] = {name for name in COMPONENTS if detail["parts"][name] > 0}
    assert shapes["async"] == shapes["sync"]


# --- The app process ------------------------------------------------------------------------------


def _app(provider_url: str) -> Any:
    """The FastAPI app: two routes streaming the same answer, one async, one sync."""
    import openai
    from fastapi import FastAPI
    from opentelemetry import trace
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    async_client = openai.AsyncOpenAI(
        base_url=provider_url,
        api_key="x",
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(trust_env=False),
    )
    sync_client = openai.OpenAI(
        base_url=provider_url,
        api_key="x",
        max_retries=0,
        http_client=openai.DefaultHttpxClient(trust_env=False),
    )
    app = FastAPI()
    FastAPIInstrumentor.instrument_app(app)
    request: Any = {
        "model": OPENAI_MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }

    def answer(text: str, first: int | None) -> dict[str, Any]:
        trace_id = trace.get_current_span().get_span_context().trace_id
        return {
            "text": text,
            "trace_id": f"{trace_id:032x}",
            "first_content_ns": first,
            "stream_end_ns": time.time_ns(),
        }

    @app.post("/chat-async")
    async def chat_async() -> dict[str, Any]:
        text, first = "", None
        async for chunk in await async_client.chat.completions.create(**request):
            if chunk.choices and chunk.choices[0].delta.content:
                first = first or time.time_ns()
                text += chunk.choices[0].delta.content
        return answer(text, first)

    @app.post("/chat-sync")
    def chat_sync() -> dict[str, Any]:
        text, first = "", None
        for chunk in sync_client.chat.completions.create(**request):
            if chunk.choices and chunk.choices[0].delta.content:
                first = first or time.time_ns()
                text += chunk.choices[0].delta.content
        return answer(text, first)

    return app


def _serve_and_call(collector_url: str, provider_url: str) -> dict[str, Any]:
    import threading

    import httpx
    import uvicorn
    from opentelemetry import trace

    import latencylens

    latencylens.configure(service_name="fastapi-async-openai", endpoint=collector_url)
    latencylens.instrument_openai()
    server = uvicorn.Server(uvicorn.Config(_app(provider_url), host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    result: dict[str, Any] = {}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=30) as client:
        for flavour in ("sync", "async"):
            client.post(f"/chat-{flavour}").raise_for_status()  # warm: lazy imports, connections
            result[flavour] = client.post(f"/chat-{flavour}").json()
    server.should_exit = True
    thread.join(timeout=10)
    provider = trace.get_tracer_provider()
    provider.force_flush()  # type: ignore[attr-defined]
    provider.shutdown()  # type: ignore[attr-defined]
    return result


if __name__ == "__main__":
    print(json.dumps(_serve_and_call(sys.argv[1], sys.argv[2])))


@pytest.fixture
def replay() -> Any:
    servers: list[ReplayServer] = []

    def start() -> ReplayServer:
        servers.append(ReplayServer())
        return servers[-1]

    yield start
    for server in servers:
        server.close()
