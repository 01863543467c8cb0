"""``instrument_*()`` on the real SDKs and the httpx hook for self-hosted servers, against replay servers.

Checks: one model span per call with the adapter's numbers, the ``traceparent`` the server received
equals the model span's context, instrumenting twice changes nothing, undo restores the SDK, a
missing SDK names the package to install, and abandoned / failing / unknown responses still end
their span while the caller gets exactly what the SDK gives.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import anthropic
import groq
import httpx
import ollama
import openai
import pytest
from cerebras.cloud.sdk import Cerebras
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from provider_payloads import (
    TGI_HEADERS,
    VLLM_METRICS,
    VLLM_USAGE,
    anthropic_stream_events,
    cerebras_completion,
    llamacpp_completion,
    ollama_final,
    openai_chat_completion,
    openai_chunk,
    tgi_chat_completion,
    vllm_completion,
)
from provider_replay import Part, ReplayServer, Reply, assert_stream_timing, cut_reply, json_reply, sse_reply

import latencylens
from latencylens import semconv

Spans = Callable[[], list[ReadableSpan]]
Replay = Callable[[], ReplayServer]
MESSAGES = [{"role": "user", "content": "hi"}]


def traceparent_of(span: ReadableSpan) -> str:
    context = span.context
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def openai_client(server: ReplayServer, path: str = "/v1") -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.url + path,
        api_key="x",
        max_retries=0,
        http_client=openai.DefaultHttpxClient(trust_env=False),
    )


def test_instrument_openai_reads_processing_ms_and_sends_traceparent(
    replay: Replay, spans: Spans, undo: Any
) -> None:
    server = replay().route(
        "POST", "/v1/chat/completions", json_reply(openai_chat_completion(), {"openai-processing-ms": "321"})
    )
    handle = undo(latencylens.instrument_openai())
    assert latencylens.instrument_openai() is handle  # twice: nothing more is patched
    response = openai_client(server).chat.completions.create(model="gpt-4.1", messages=MESSAGES)
    assert response.choices[0].message.content == "Hi"
    (span,) = spans()
    values = dict(span.attributes or {})
    assert span.name == "chat gpt-4.1"
    assert values[semconv.GEN_AI_PROVIDER_NAME] == "openai"
    assert values[semconv.PROVIDER_SERVER_TOTAL_NS] == 321_000_000  # 321 ms
    assert values[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 19
    assert server.requests[-1].headers["traceparent"] == traceparent_of(span)

    handle()
    openai_client(server).chat.completions.create(model="gpt-4.1", messages=MESSAGES)
    assert len(spans()) == 1  # undone: no span, no header
    assert "traceparent" not in server.requests[-1].headers


def test_decorated_call_around_an_instrumented_sdk_makes_one_span(
    replay: Replay, spans: Spans, undo: Any
) -> None:
    server = replay().route("POST", "/v1/chat/completions", json_reply(openai_chat_completion()))
    undo(latencylens.instrument_openai())
    client = openai_client(server)

    @latencylens.model_call(provider="openai", model="gpt-4.1")
    def ask() -> Any:
        return client.chat.completions.create(model="gpt-4.1", messages=MESSAGES)

    ask()
    (span,) = spans()
    assert server.requests[-1].headers["traceparent"] == traceparent_of(span)


def test_instrument_anthropic_stream(replay: Replay, spans: Spans, undo: Any) -> None:
    events = anthropic_stream_events(["Hello", " wor", "ld", "!"])
    delays = [0.010, 0.0, 0.0, 0.040, 0.020, 0.020, 0.020, 0.0, 0.0, 0.0]
    server = replay().route("POST", "/v1/messages", lambda r: sse_reply(events, delays, done=False))
    undo(latencylens.instrument_anthropic())
    client = anthropic.Anthropic(
        base_url=server.url,
        api_key="x",
        max_retries=0,
        http_client=anthropic.DefaultHttpxClient(trust_env=False),
    )
    for _ in range(2):  # the first call warms the client
        with client.messages.create(
            model="claude-opus-4-6", max_tokens=9, messages=MESSAGES, stream=True
        ) as s:
            list(s)
    span = spans()[-1]
    values = dict(span.attributes or {})
    assert values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 15
    assert server.requests[-1].headers["traceparent"] == traceparent_of(span)
    # TTFT 10 + 40 ms = 50 ms; last − first = 60 ms over 15 − 1 tokens.
    assert_stream_timing(span, server, ttft_s=0.050, decode_s=0.060, gap_s=0.020, output_tokens=15)


def test_instrument_groq_and_cerebras(replay: Replay, spans: Spans, undo: Any) -> None:
    server = replay()
    server.route("POST", "/openai/v1/chat/completions", json_reply(cerebras_completion()))
    server.route("POST", "/v1/chat/completions", json_reply(cerebras_completion()))
    undo(latencylens.instrument_groq())
    undo(latencylens.instrument_cerebras())
    groq_client = groq.Groq(
        base_url=server.url, api_key="x", max_retries=0, http_client=httpx.Client(trust_env=False)
    )
    groq_client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    cerebras = Cerebras(
        base_url=server.url,
        api_key="x",
        max_retries=0,
        warm_tcp_connection=False,
        http_client=httpx.Client(trust_env=False),
    )
    cerebras.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    groq_span, cerebras_span = spans()
    assert dict(groq_span.attributes or {})[semconv.GEN_AI_PROVIDER_NAME] == "groq"
    # Cerebras time_info.total_time 0.022224903106689453 s → 22_224_903 ns, reported as is.
    assert dict(cerebras_span.attributes or {})[semconv.PROVIDER_SERVER_TOTAL_NS] == 22_224_903
    assert [r.headers["traceparent"] for r in server.requests] == [
        traceparent_of(groq_span),
        traceparent_of(cerebras_span),
    ]


def test_instrument_ollama_stream_sends_traceparent_on_first_read(
    replay: Replay, spans: Spans, undo: Any
) -> None:
    objects = [
        {"model": "gemma4", "created_at": "t", "response": "Hi", "done": False},
        ollama_final(),
    ]
    from provider_replay import ndjson_reply

    server = replay().route("POST", "/api/generate", lambda r: ndjson_reply(objects))
    undo(latencylens.instrument_ollama())
    parts = list(
        ollama.Client(host=server.url, trust_env=False).generate(model="gemma4", prompt="hi", stream=True)
    )
    assert len(parts) == 2
    (span,) = spans()
    assert span.name == "text_completion gemma4"
    assert dict(span.attributes or {})[semconv.PROVIDER_QUEUE_NS] == 101_397_084
    # the SDK sends the request lazily, on the first next(): the stream proxy's context covers it
    assert server.requests[-1].headers["traceparent"] == traceparent_of(span)


def vllm_stream() -> Reply:
    base = {"id": "chatcmpl-abc123", "object": "chat.completion.chunk", "created": 1, "model": "llama"}
    chunks: list[dict[str, Any]] = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        for delta in (
            {"role": "assistant", "content": ""},
            {"content": "a"},
            {"content": "b"},
            {"content": "c"},
        )
    ]
    chunks.append({**base, "choices": [{"index": 0, "delta": {"content": "d"}, "finish_reason": "stop"}]})
    chunks.append({**base, "choices": [], "usage": dict(VLLM_USAGE), "metrics": dict(VLLM_METRICS)})
    return sse_reply(chunks, [0.020, 0.030, 0.020, 0.020, 0.020, 0.0])


# vLLM per-request metrics: queue 12.3 ms = 12_300_000 ns, prefill (TTFT from scheduling) 85.2 ms =
# 85_200_000 ns, decode 1240.5 ms = 1_240_500_000 ns; 42 prompt and 128 completion tokens.
VLLM_EXPECTED = {
    semconv.PROVIDER_QUEUE_NS: 12_300_000,
    semconv.PROVIDER_PREFILL_NS: 85_200_000,
    semconv.PROVIDER_DECODE_NS: 1_240_500_000,
    semconv.GEN_AI_USAGE_INPUT_TOKENS: 42,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 128,
    semconv.GEN_AI_PROVIDER_NAME: "vllm",
}


def test_httpx_hook_vllm_through_the_openai_client(replay: Replay, spans: Spans, undo: Any) -> None:
    server = replay()
    server.route(
        "POST",
        "/v1/chat/completions",
        lambda r: vllm_stream() if r.json().get("stream") else json_reply(vllm_completion()),
    )
    handle = undo(latencylens.instrument_httpx(base_urls=[server.url + "/v1"], provider="vllm"))
    assert latencylens.instrument_httpx(base_urls=[server.url + "/v1"], provider="vllm") is handle
    client = openai_client(server)
    client.chat.completions.create(model="llama", messages=MESSAGES)
    (span,) = spans()
    values = dict(span.attributes or {})
    assert {key: values[key] for key in VLLM_EXPECTED} == VLLM_EXPECTED
    assert values[semconv.GEN_AI_REQUEST_MODEL] == "llama"
    assert values[semconv.SERVER_ADDRESS] == "127.0.0.1"
    assert server.requests[-1].headers["traceparent"] == traceparent_of(span)

    for _ in range(2):
        stream = client.chat.completions.create(model="llama", messages=MESSAGES, stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "abcd"
    span = spans()[-1]
    values = dict(span.attributes or {})
    assert {key: values[key] for key in VLLM_EXPECTED} == VLLM_EXPECTED
    assert values[semconv.STREAM_END_REASON] == "completed"
    assert server.requests[-1].headers["traceparent"] == traceparent_of(span)
    # role chunk at 20 ms, first content 30 ms later (TTFT 50 ms); 3 more 20 ms apart; 128 tokens.
    assert_stream_timing(span, server, ttft_s=0.050, decode_s=0.060, gap_s=0.020, output_tokens=128)


def test_httpx_hook_tgi_headers_with_a_plain_httpx_client(replay: Replay, spans: Spans, undo: Any) -> None:
    server = replay().route("POST", "/v1/chat/completions", json_reply(tgi_chat_completion(), TGI_HEADERS))
    undo(latencylens.instrument_httpx(base_urls=[server.url], provider="tgi"))
    with httpx.Client(trust_env=False) as client:
        response = client.post(
            server.url + "/v1/chat/completions", json={"model": "tgi", "messages": MESSAGES}
        )
    assert response.json()["usage"]["completion_tokens"] == 100
    (span,) = spans()
    values = dict(span.attributes or {})
    # x-queue-time 15 ms, x-inference-time 1217 ms (prefill + decode), x-total-time 1234 ms.
    assert values[semconv.PROVIDER_QUEUE_NS] == 15_000_000
    assert values[semconv.PROVIDER_INFERENCE_NS] == 1_217_000_000
    assert values[semconv.PROVIDER_SERVER_TOTAL_NS] == 1_234_000_000
    assert semconv.PROVIDER_PREFILL_NS not in values  # not separable from TGI's headers
    assert values[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 28
    assert server.requests[-1].headers["traceparent"] == traceparent_of(span)


def test_httpx_hook_llamacpp_timings(replay: Replay, spans: Spans, undo: Any) -> None:
    server = replay().route("POST", "/v1/chat/completions", json_reply(llamacpp_completion()))
    undo(latencylens.instrument_httpx(base_urls=[server.url + "/v1"], provider="llama.cpp"))
    openai_client(server).chat.completions.create(model="qwen", messages=MESSAGES)
    values = dict(spans()[0].attributes or {})
    # prompt = cache_n 0 + prompt_n 46; prompt_ms 651.714 → 651_714_000 ns; predicted_ms 73.517 → 73_517_000.
    assert values[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 46
    assert values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 10
    assert values[semconv.PROVIDER_PREFILL_NS] == 651_714_000
    assert values[semconv.PROVIDER_DECODE_NS] == 73_517_000
    assert semconv.PROVIDER_QUEUE_NS not in values


def test_httpx_hook_unknown_body_shape_still_returns(replay: Replay, spans: Spans, undo: Any) -> None:
    server = replay().route("POST", "/generate", json_reply({"result": "ok"}))
    undo(latencylens.instrument_httpx(base_urls=[server.url], provider="vllm"))
    with httpx.Client(trust_env=False) as client:
        assert client.post(server.url + "/generate", json={}).json() == {"result": "ok"}
    values = dict(spans()[0].attributes or {})
    assert values[semconv.PROVIDER_FIELDS_MISSING] == (
        "usage.prompt_tokens",
        "usage.completion_tokens",
        "metrics.queue_time_ms",
        "metrics.time_to_first_token_ms",
        "metrics.generation_time_ms",
    )


def test_abandoned_sdk_stream_ends_its_span(replay: Replay, spans: Spans, undo: Any) -> None:
    chunks = [openai_chunk({"content": "a"}), openai_chunk({"content": "b"}), openai_chunk({}, "stop")]
    server = replay().route("POST", "/v1/chat/completions", lambda r: sse_reply(chunks, 0.0))
    undo(latencylens.instrument_openai())
    stream = openai_client(server).chat.completions.create(model="m", messages=MESSAGES, stream=True)
    for _ in stream:
        break
    stream.close()
    values = dict(spans()[0].attributes or {})
    assert values[semconv.STREAM_END_REASON] == "abandoned"
    assert values[semconv.STREAM_COMPLETED] is False
    assert values[semconv.STREAM_CHUNKS] == 1


def test_stream_cut_midway_raises_the_sdk_error_and_marks_the_span(
    replay: Replay, spans: Spans, undo: Any
) -> None:
    first = f"data: {openai_chunk({'content': 'a'})}\n\n".replace("'", '"').replace("None", "null")
    # A chunked body that stops without its terminating chunk: the client sees a broken stream.
    broken = Reply([Part(first.encode()), Part(b"data: {")], headers={"content-type": "text/event-stream"})
    server = replay().route("POST", "/v1/chat/completions", lambda r: cut_reply(broken))
    undo(latencylens.instrument_openai())
    client = openai_client(server)
    received = []
    with pytest.raises(Exception) as raised_with:
        for chunk in client.chat.completions.create(model="m", messages=MESSAGES, stream=True):
            received.append(chunk)
    undo_all = latencylens.instrument_openai()
    undo_all.undo()
    with pytest.raises(type(raised_with.value)):  # the same error class without LatencyLens
        list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
    span = spans()[0]
    values = dict(span.attributes or {})
    assert len(received) == 1
    assert values[semconv.STREAM_END_REASON] == "error"
    assert values[semconv.STREAM_CONTENT_CHUNKS] == 1
    assert span.status.status_code is StatusCode.ERROR


def test_missing_sdk_says_what_to_install() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["cerebras"] = None
        import latencylens
        try:
            latencylens.instrument_cerebras()
        except latencylens.MissingDependencyError as exc:
            print(exc)
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == (
        "latencylens.instrument_cerebras() needs the 'cerebras-cloud-sdk' package: "
        "pip install cerebras-cloud-sdk"
    )


def test_too_old_sdk_says_which_version_to_install() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["openai.resources.responses.responses"] = None  # as in openai < 1.66
        import latencylens
        try:
            latencylens.instrument_openai()
        except latencylens.MissingDependencyError as exc:
            print(exc)
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == (
        f"latencylens.instrument_openai() needs openai>=1.66 ({openai.__version__} is installed, without "
        "openai.resources.responses.responses): pip install -U 'openai>=1.66'"
    )


def test_declared_lower_bounds_are_the_ones_pyproject_pins() -> None:
    from pathlib import Path

    import tomllib

    from latencylens._instrument import _SDKS

    pyproject = Path(__file__).resolve().parents[4] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    pinned = {
        requirement.split(">=")[0]: requirement.split(">=")[1]
        for requirement in extras["demo"] + extras["test"]
        if ">=" in requirement
    }
    assert {spec.package: pinned[spec.package] for spec in _SDKS.values()} == {
        spec.package: spec.minimum for spec in _SDKS.values()
    }
