"""SGLang through ``instrument_httpx``: its native ``/generate`` API with plain httpx (one reply and
an SSE stream of cumulative text, for one prompt and for a batch), its OpenAI-compatible API with
the real openai SDK (with and without ``return_meta_info``), and one request exported with the real
OTLP/HTTP exporter to a real collector, whose breakdown is read back from its API.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from provider_payloads import (
    sglang_batch_chunks,
    sglang_batch_generate,
    sglang_chat_completion,
    sglang_generate,
    sglang_generate_chunks,
)
from provider_replay import (
    TOLERANCE_NS,
    Part,
    ReplayServer,
    Reply,
    assert_stream_timing,
    cut_reply,
    json_reply,
    sse_reply,
)
from test_providers_tgi import export_and_fetch, model_span

import latencylens
from latencylens import semconv

Spans = Callable[[], list[ReadableSpan]]
Replay = Callable[[], ReplayServer]
HOLD_S = 0.3
"""How long the collector test's server holds its reply: longer than SGLang's reported e2e_latency
(0.24 s), so the client's measurement covers it and network is positive."""
PROMPT = {"text": "The capital of France is", "sampling_params": {"max_new_tokens": 32}}
STREAMED = {**PROMPT, "stream": True}

# The documented meta_info: 5 prompt tokens (2 of them cached), 32 completion tokens, 0 reasoning;
# e2e_latency 0.23950170911848545 s → 239_501_709.118… ns, rounded to 239_501_709 ns.
DOCUMENTED = {
    semconv.GEN_AI_USAGE_INPUT_TOKENS: 5,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 32,
    semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 2,
    semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: 0,
    semconv.PROVIDER_SERVER_TOTAL_NS: 239_501_709,
    semconv.GEN_AI_RESPONSE_ID: "49fa36ead40e4aa5874ba0df46dee79d",
    semconv.GEN_AI_RESPONSE_FINISH_REASONS: ("length",),  # finish_reason {"type": "length", ...}
}
# With --enable-metrics: queue_time 1/128 s = 7_812_500 ns; inference_time 7/32 s = 218_750_000 ns;
# prefill = prefill_finished_time − forward_entry_time = 1780931882.890625 − 1780931882.875
# = 1/64 s = 15_625_000 ns (derived); decode = 218_750_000 − 15_625_000 = 203_125_000 ns (derived).
WITH_METRICS = {
    **DOCUMENTED,
    semconv.PROVIDER_QUEUE_NS: 7_812_500,
    semconv.PROVIDER_INFERENCE_NS: 218_750_000,
    semconv.PROVIDER_PREFILL_NS: 15_625_000,
    semconv.PROVIDER_DECODE_NS: 203_125_000,
}


def sglang_server(replay: Replay, metrics: bool, hold_s: float = 0.0) -> ReplayServer:
    """Native and OpenAI-compatible routes; a native reply is held ``hold_s`` before it is sent."""

    def generate(request: Any) -> Any:
        if isinstance(request.json().get("text"), list):  # a batch: one reply per prompt
            if request.json().get("stream"):
                return sse_reply(sglang_batch_chunks(), 0.040)
            return json_reply(sglang_batch_generate())
        if request.json().get("stream"):
            # the last chunk adds no text (only the final meta_info), as when a stop string ends it
            chunks = sglang_generate_chunks(["Paris", ".", " It", " is the capital.", ""])
            return sse_reply(chunks, [0.030, 0.020, 0.020, 0.020, 0.060])
        return json_reply(sglang_generate(metrics=metrics), delay_s=hold_s)

    server = replay().route("POST", "/generate", generate)
    server.route(
        "POST",
        "/v1/chat/completions",
        lambda r: json_reply(sglang_chat_completion(meta_info=bool(r.json().get("return_meta_info")))),
    )
    return server


def attributes_of(span: ReadableSpan, keys: dict[str, Any]) -> dict[str, Any]:
    values = dict(span.attributes or {})
    return {key: values.get(key) for key in keys}


def post_native(
    replay: Replay, spans: Spans, undo: Any, body: dict[str, Any], metrics: bool
) -> tuple[Any, ReadableSpan]:
    """POST ``body`` to the native ``/generate`` through plain httpx: the parsed reply and its span."""
    server = sglang_server(replay, metrics=metrics)
    undo(latencylens.instrument_httpx(base_urls=[server.url], provider="sglang"))
    with httpx.Client(trust_env=False) as client:
        reply = client.post(server.url + "/generate", json=body).json()
    (span,) = spans()
    return reply, span


def test_native_generate_reads_the_documented_meta_info(replay: Replay, spans: Spans, undo: Any) -> None:
    body, span = post_native(replay, spans, undo, PROMPT, metrics=False)
    assert body["meta_info"]["completion_tokens"] == 32  # the caller's reply is untouched
    values = dict(span.attributes or {})
    assert attributes_of(span, DOCUMENTED) == DOCUMENTED
    assert values[semconv.GEN_AI_PROVIDER_NAME] == "sglang"
    # started without --enable-metrics: no queue, and inference is not expected
    assert values[semconv.PROVIDER_FIELDS_MISSING] == ("meta_info.queue_time",)
    for key in (semconv.PROVIDER_QUEUE_NS, semconv.PROVIDER_PREFILL_NS, semconv.PROVIDER_INFERENCE_NS):
        assert key not in values


def test_native_generate_with_metrics_splits_prefill_and_decode(
    replay: Replay, spans: Spans, undo: Any
) -> None:
    _, span = post_native(replay, spans, undo, PROMPT, metrics=True)
    values = dict(span.attributes or {})
    assert attributes_of(span, WITH_METRICS) == WITH_METRICS
    assert semconv.PROVIDER_FIELDS_MISSING not in values
    assert values[semconv.PROVENANCE_PREFILL] == values[semconv.PROVENANCE_DECODE] == "derived"
    assert values[semconv.PROVENANCE_QUEUE] == values[semconv.PROVENANCE_INFERENCE] == "reported"


def test_native_generate_stream_of_cumulative_text(replay: Replay, spans: Spans, undo: Any) -> None:
    server = sglang_server(replay, metrics=True)
    undo(latencylens.instrument_httpx(base_urls=[server.url], provider="sglang"))
    with httpx.Client(trust_env=False) as client:
        for _ in range(2):  # the first call warms the client
            with client.stream("POST", server.url + "/generate", json=STREAMED) as response:
                lines = [line for line in response.iter_lines() if line.startswith("data: {")]
    assert len(lines) == 5
    span = spans()[-1]
    assert attributes_of(span, WITH_METRICS) == WITH_METRICS  # the last chunk's meta_info
    assert dict(span.attributes or {})[semconv.STREAM_END_REASON] == "completed"
    # "Paris" 30 ms after the request, each longer text 20 ms apart, the final chunk 60 ms later:
    # TTFT 30 ms, last chunk − first content 120 ms over the final meta_info's 32 completion tokens.
    assert_stream_timing(span, server, ttft_s=0.030, decode_s=0.120, output_tokens=32)
    # the gaps are between changed texts only (the first four parts, 20 ms apart as sent): the final
    # chunk, whose text is unchanged, is no content, so the 60 ms before it is not a gap
    sent = server.requests[-1].sent_ns
    content_gap_max = max(later - earlier for earlier, later in itertools.pairwise(sent[:4]))
    gap_max = dict(span.attributes or {})[semconv.STREAM_GAP_MAX_NS]
    assert abs(gap_max - content_gap_max) <= TOLERANCE_NS


def test_native_stream_through_an_async_client(replay: Replay, spans: Spans, undo: Any) -> None:
    """As in a FastAPI handler: ``httpx.AsyncClient`` streams, the same meta_info is read."""
    server = sglang_server(replay, metrics=True)
    undo(latencylens.instrument_httpx(base_urls=[server.url], provider="sglang"))

    async def stream_twice() -> list[str]:
        async with httpx.AsyncClient(trust_env=False) as client:
            for _ in range(2):  # the first call warms the client
                async with client.stream("POST", server.url + "/generate", json=STREAMED) as r:
                    lines = [line async for line in r.aiter_lines() if line.startswith("data: {")]
        return lines

    assert len(asyncio.run(stream_twice())) == 5
    span = spans()[-1]
    assert attributes_of(span, WITH_METRICS) == WITH_METRICS
    assert dict(span.attributes or {})[semconv.STREAM_END_REASON] == "completed"
    assert_stream_timing(span, server, ttft_s=0.030, decode_s=0.120, output_tokens=32)


def test_native_stream_cut_midway_keeps_what_arrived(replay: Replay, spans: Spans, undo: Any) -> None:
    """SGLang dies after two chunks: the caller gets httpx's own error, the span ends marked, and the
    last meta_info that arrived (5 prompt tokens, 2 completion tokens so far) is kept."""
    first_two = sse_reply(sglang_generate_chunks(["Paris", ".", " It"])[:2], 0.0, done=False)
    broken = Reply([*first_two.parts, Part(b"data: {")], headers=first_two.headers)
    server = replay().route("POST", "/generate", lambda r: cut_reply(broken))
    handle = undo(latencylens.instrument_httpx(base_urls=[server.url], provider="sglang"))

    def read_all() -> list[str]:
        with httpx.Client(trust_env=False) as client:
            with client.stream("POST", server.url + "/generate", json=STREAMED) as r:
                return list(r.iter_lines())

    with pytest.raises(httpx.HTTPError) as raised:
        read_all()
    handle.undo()
    with pytest.raises(type(raised.value)):  # the same error class without LatencyLens
        read_all()
    (span,) = spans()
    values = dict(span.attributes or {})
    assert values[semconv.STREAM_END_REASON] == "error"
    assert span.status.status_code is StatusCode.ERROR
    assert values[semconv.STREAM_CONTENT_CHUNKS] == 2  # "Paris", then "Paris."
    assert (values[semconv.GEN_AI_USAGE_INPUT_TOKENS], values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS]) == (5, 2)
    assert semconv.PROVIDER_SERVER_TOTAL_NS not in values  # e2e_latency comes only at the finish


BATCH = {**PROMPT, "text": ["The capital of France is", "The capital of Germany is"]}
# Two requests (provider_payloads.sglang_batch_generate): counts summed, 5 + 7 = 12 prompt tokens,
# 32 + 16 = 48 completion, 2 + 0 = 2 cached, 0 + 0 = 0 reasoning; the timing is the second request's,
# whose e2e_latency is the longer (0.25 s against 0.2395… s): 250_000_000 ns in all, queue 1/64 s =
# 15_625_000 ns, inference 3/16 s = 187_500_000 ns, prefill 1780931882.96875 − 1780931882.9375 = 1/32 s
# = 31_250_000 ns (derived), decode 187_500_000 − 31_250_000 = 156_250_000 ns (derived).
BATCH_EXPECTED = {
    semconv.GEN_AI_USAGE_INPUT_TOKENS: 12,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 48,
    semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 2,
    semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: 0,
    semconv.PROVIDER_SERVER_TOTAL_NS: 250_000_000,
    semconv.PROVIDER_QUEUE_NS: 15_625_000,
    semconv.PROVIDER_INFERENCE_NS: 187_500_000,
    semconv.PROVIDER_PREFILL_NS: 31_250_000,
    semconv.PROVIDER_DECODE_NS: 156_250_000,
    semconv.GEN_AI_RESPONSE_FINISH_REASONS: ("length", "stop"),  # one per request, in order
}


def test_native_batch_sums_counts_and_takes_the_slowest_requests_timing(
    replay: Replay, spans: Spans, undo: Any
) -> None:
    body, span = post_native(replay, spans, undo, BATCH, metrics=True)
    assert [reply["meta_info"]["prompt_tokens"] for reply in body] == [5, 7]  # replies untouched
    values = dict(span.attributes or {})
    assert attributes_of(span, BATCH_EXPECTED) == BATCH_EXPECTED
    assert semconv.GEN_AI_RESPONSE_ID not in values  # each request has its own id: none is the call's
    assert semconv.PROVIDER_FIELDS_MISSING not in values


def test_native_batch_stream_tells_its_requests_apart_by_index(
    replay: Replay, spans: Spans, undo: Any
) -> None:
    server = sglang_server(replay, metrics=True)
    undo(latencylens.instrument_httpx(base_urls=[server.url], provider="sglang"))
    with httpx.Client(trust_env=False) as client:
        for _ in range(2):  # the first call warms the client
            with client.stream("POST", server.url + "/generate", json={**BATCH, "stream": True}) as response:
                lines = [line for line in response.iter_lines() if line.startswith("data: {")]
    assert len(lines) == 5
    span = spans()[-1]
    values = dict(span.attributes or {})
    assert attributes_of(span, BATCH_EXPECTED) == BATCH_EXPECTED  # each request's last meta_info
    # content is a request's text changing: "Paris", " Berlin", "Paris.", " Berlin." (compared
    # with one text for both requests, the last chunk's unchanged "Paris." would count as a fifth)
    assert values[semconv.STREAM_CONTENT_CHUNKS] == 4
    # each chunk 40 ms after the one before: the first request's "Paris" at 40 ms, the last of the
    # five chunks 4 × 40 = 160 ms later
    assert_stream_timing(span, server, ttft_s=0.040, decode_s=0.160, output_tokens=48)


def test_openai_api_reads_usage_and_the_meta_info_it_was_asked_for(
    replay: Replay, spans: Spans, undo: Any
) -> None:
    server = sglang_server(replay, metrics=True)
    undo(latencylens.instrument_httpx(base_urls=[server.url + "/v1"], provider="sglang"))
    client = openai.OpenAI(
        base_url=server.url + "/v1",
        api_key="-",
        max_retries=0,
        http_client=openai.DefaultHttpxClient(trust_env=False),
    )
    messages: Any = [{"role": "user", "content": "The capital of France?"}]
    model = "qwen/qwen2.5-0.5b-instruct"
    client.chat.completions.create(model=model, messages=messages)
    client.chat.completions.create(model=model, messages=messages, extra_body={"return_meta_info": True})
    plain, with_meta = spans()
    values = dict(plain.attributes or {})
    # usage: 5 prompt tokens, 2 cached (prompt_tokens_details.cached_tokens), 32 completion tokens
    assert values[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 5
    assert values[semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 2
    assert values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 32
    assert values[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("length",)
    # no meta_info without return_meta_info: the timings it would carry are named as missing
    assert values[semconv.PROVIDER_FIELDS_MISSING] == ("meta_info.e2e_latency", "meta_info.queue_time")
    assert semconv.PROVIDER_SERVER_TOTAL_NS not in values
    # with it, the choice's meta_info gives the same timings as the native API (counts from usage)
    assert attributes_of(with_meta, WITH_METRICS) == WITH_METRICS
    assert dict(with_meta.attributes or {})[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("length",)


def test_request_breakdown_from_sglang_metrics(
    replay: Replay, spans: Spans, undo: Any, collector: Any
) -> None:
    server = sglang_server(replay, metrics=True, hold_s=HOLD_S)
    undo(latencylens.instrument_httpx(base_urls=[server.url], provider="sglang"))

    @latencylens.request(name="POST /ask")
    def ask() -> str:
        with httpx.Client(trust_env=False) as client:
            text: str = client.post(server.url + "/generate", json=PROMPT).json()["text"]
        return text

    assert ask().startswith(" Paris")
    finished = spans()
    assert len(finished) == 2  # the model call and the request
    detail = export_and_fetch(finished, collector.url)

    parts, provenance = detail["parts"], detail["provenance"]
    assert parts["queue"] == 7_812_500
    assert parts["prefill"] == 15_625_000
    assert parts["decode"] == 203_125_000
    # e2e_latency − queue − prefill − decode = 239_501_709 − 7_812_500 − 15_625_000 − 203_125_000
    # = 12_939_209 ns of SGLang's own time outside the engine (tokenization, dispatch, detokenization)
    assert parts["model_unattributed"] == 12_939_209
    # network = the call's client-measured duration − e2e_latency; the server held its reply 0.3 s
    call_ns = model_span(detail)["duration_ns"]
    assert parts["network"] == call_ns - 239_501_709
    assert parts["network"] >= round(HOLD_S * 1e9) - 239_501_709
    assert sum(parts.values()) == detail["e2e_ns"]
    assert parts["inference"] == 0  # the finer split wins over the unsplit inference_time
    assert (provenance["queue"], provenance["prefill"], provenance["decode"]) == ("reported",) * 3
    assert (detail["input_tokens"], detail["output_tokens"]) == (5, 32)
    assert detail["provider"] == "sglang"
    assert not detail["inconsistent"]


def test_decorated_calls_without_httpx_read_the_same_meta_info(replay: Replay, spans: Spans) -> None:
    """SGLang's docs call ``/generate`` with ``requests``; any client works under ``@model_call``:
    here the standard library's, one reply and a generator of the stream's parsed chunks."""
    server = sglang_server(replay, metrics=True)

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy from the env

    def post(body: dict[str, Any]) -> Any:
        headers = {"Content-Type": "application/json"}
        data = json.dumps(body).encode()
        return opener.open(urllib.request.Request(server.url + "/generate", data, headers), timeout=10)

    @latencylens.model_call(provider="sglang", model="qwen/qwen2.5-0.5b-instruct")
    def generate() -> dict[str, Any]:
        with post(PROMPT) as response:
            reply: dict[str, Any] = json.load(response)
        return reply

    @latencylens.model_call(provider="sglang", model="qwen/qwen2.5-0.5b-instruct")
    def generate_stream() -> Iterator[dict[str, Any]]:
        with post({**PROMPT, "stream": True}) as response:
            for line in response:
                if line.startswith(b"data: {"):
                    yield json.loads(line[len(b"data: ") :])

    assert generate()["meta_info"]["completion_tokens"] == 32
    texts = [chunk["text"] for chunk in generate_stream()]
    assert texts[-1] == "Paris. It is the capital."
    whole, streamed = spans()
    assert attributes_of(whole, WITH_METRICS) == WITH_METRICS
    assert attributes_of(streamed, WITH_METRICS) == WITH_METRICS
    assert dict(streamed.attributes or {})[semconv.STREAM_END_REASON] == "completed"
