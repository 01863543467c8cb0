"""Every auto-instrumented SDK's real client: sync and async, streamed and not, raw and helper calls.

Each case calls an SDK the way an app does, after ``instrument_<sdk>()``, against the loopback replay
server sending that provider's documented response with known delays. A streamed reply's first
content part is due 50 ms after the request arrived (an empty or metadata part comes first, at
10 ms) and three more follow 20 ms apart; a non-streamed reply is held 60 ms. For every case:

* the caller gets what the SDK gives without instrumentation (same text);
* each call makes exactly one model span (nested SDK methods and the HTTP hook never add another);
* a stream's TTFT is at least the injected delay, and every measured instant lies between when the
  server started writing the part in question and when the caller's own code saw it: first
  content, last content (for Anthropic the last ``content_block_delta``, which the caller sees 60 ms
  before ``message_stop`` is sent) and the span's end (after the last part was sent, before the call
  returned). These bounds hold on any machine, however loaded, and pin each measure as closely as
  the caller followed the server (within a millisecond or two on an idle one). A span that ends when
  the call returns a stream (0.1 ms) fails them;
* a non-streamed call's span lasts at least the hold and ends after the body was sent;
* token counts and provider timings are the documented payload's (arithmetic beside each).

The httpx hook's route for self-hosted servers (``instrument_httpx``) runs through the same matrix
with the OpenAI client.

Every case runs twice on one client; the first call warms the SDK (lazy imports, connection).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import anthropic
import groq
import httpx
import ollama
import openai
import pytest
from cerebras.cloud.sdk import AsyncCerebras, Cerebras
from opentelemetry.sdk.trace import ReadableSpan
from provider_payloads import (
    GROQ_USAGE,
    OPENAI_MODEL,
    anthropic_message,
    anthropic_stream_events,
    cerebras_completion,
    groq_completion,
    groq_stream_chunk,
    ollama_final,
    openai_chat_completion,
    openai_chunk,
    openai_response,
    openai_response_events,
    openai_usage_chunk,
)
from provider_replay import (
    Recorded,
    ReplayServer,
    Reply,
    json_reply,
    ndjson_reply,
    request_offset_ns,
    sse_reply,
)

import latencylens
from latencylens import semconv

Spans = Callable[[], list[ReadableSpan]]
Replay = Callable[[], ReplayServer]

MESSAGES: Any = [{"role": "user", "content": "hi"}]
CONTENT = ["Hel", "lo", " the", "re"]
TEXT = "Hello there"
LEAD_S = 0.010
"""When the first (empty or metadata) part is due."""
TTFT_S = 0.050
"""When the first content part is due, after the request arrived."""
GAP_S = 0.020
"""Between content parts."""
HOLD_S = 0.060
"""How long a non-streamed reply is held before its headers go out."""
TRAILER_S = 0.060
"""Anthropic only: between the last ``content_block_delta`` and ``content_block_stop``."""
PROCESSING_MS = {"openai-processing-ms": "321"}


@dataclass(frozen=True)
class Script:
    """A streamed reply and the indexes of its parts that matter: the first content part, the part
    where decode ends (the last chunk, or for Anthropic the last content part) and the part whose
    arrival completes the answer."""

    reply: Callable[[], Reply]
    first: int
    decode_end: int
    end: int
    content_end: bool = False
    """Decode ends at the last content part (the caller sees it; trailing events follow)."""


def _delays(lead: int, trailing: int, trailer_s: float = 0.0) -> list[float]:
    """``lead`` parts from 10 ms, the content parts, then ``trailing`` parts (after ``trailer_s``)."""
    head = [LEAD_S] + [0.0] * (lead - 1)
    content = [TTFT_S - LEAD_S] + [GAP_S] * (len(CONTENT) - 1)
    return head + content + ([trailer_s] + [0.0] * (trailing - 1) if trailing else [])


def _script(
    events: list[Any],
    lead: int,
    trailing: int,
    *,
    done: bool,
    trailer_s: float = 0.0,
    content_end: bool = False,
) -> Script:
    delays = _delays(lead, trailing, trailer_s)
    decode_end = lead + len(CONTENT) - 1 if content_end else len(events) - 1
    end = len(events) - 1 + (1 if done else 0)  # [DONE] is a part of its own, not a chunk
    return Script(lambda: sse_reply(events, delays, done=done), lead, decode_end, end, content_end)


def _openai_chat_stream() -> Script:
    # role chunk at 10 ms, four content chunks from 50 ms, finish chunk, include_usage chunk, [DONE].
    events = [openai_chunk({"role": "assistant", "content": ""})]
    events += [openai_chunk({"content": text}) for text in CONTENT]
    events += [openai_chunk({}, "stop"), openai_usage_chunk()]
    return _script(events, 1, 2, done=True)


def _openai_responses_stream() -> Script:
    events: list[Any] = openai_response_events(["", *CONTENT])  # created, an empty delta, 4 deltas, completed
    return _script(events, 2, 1, done=False)


def _anthropic_stream() -> Script:
    # message_start, content_block_start, ping; four deltas; content_block_stop 60 ms after the last
    # delta, then message_delta (usage) and message_stop.
    events: list[Any] = anthropic_stream_events(CONTENT)
    return _script(events, 3, 3, done=False, trailer_s=TRAILER_S, content_end=True)


def _groq_stream() -> Script:
    events = [groq_stream_chunk({"role": "assistant", "content": ""})]
    events += [groq_stream_chunk({"content": text}) for text in CONTENT]
    events.append(groq_stream_chunk({}, "stop", final=True))
    return _script(events, 1, 1, done=True)


def _cerebras_stream() -> Script:
    reference = cerebras_completion()
    base = {key: reference[key] for key in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"
    deltas: list[dict[str, Any]] = [{"role": "assistant"}, *({"content": text} for text in CONTENT)]
    events: list[dict[str, Any]] = [{**base, "choices": [{"index": 0, "delta": d}]} for d in deltas]
    final = {"index": 0, "delta": {}, "finish_reason": "stop"}
    events.append(
        {**base, "choices": [final], "usage": reference["usage"], "time_info": reference["time_info"]}
    )
    return _script(events, 1, 1, done=True)


def _ollama_stream(kind: str) -> Script:
    def piece(text: str) -> dict[str, Any]:
        body: dict[str, Any] = {"model": "gemma4", "created_at": "2025-10-17T23:14:07Z", "done": False}
        if kind == "chat":
            body["message"] = {"role": "assistant", "content": text}
        else:
            body["response"] = text
        return body

    final = ollama_final(kind)
    if kind == "generate":
        final["response"] = ""
    objects = [piece(""), *(piece(text) for text in CONTENT), final]
    delays = _delays(1, 1)
    return Script(lambda: ndjson_reply(objects, delays), 1, len(objects) - 1, len(objects) - 1)


# --- What each provider documents -----------------------------------------------------------------

OPENAI_CHAT = {
    semconv.GEN_AI_USAGE_INPUT_TOKENS: 19,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 10,
}
OPENAI_RESPONSES = {
    semconv.GEN_AI_USAGE_INPUT_TOKENS: 12033,  # includes the 11_904 cached ones
    semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 11904,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 44,
}
SERVER_TOTAL_321_MS = {semconv.PROVIDER_SERVER_TOTAL_NS: 321_000_000}  # openai-processing-ms: 321
ANTHROPIC_MESSAGE = {
    # input_tokens 21 + cache_creation 188_086 + cache_read 0 = 188_107 (GenAI input includes cache)
    semconv.GEN_AI_USAGE_INPUT_TOKENS: 188_107,
    semconv.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: 188_086,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 393,
}
ANTHROPIC_STREAM = {
    semconv.GEN_AI_USAGE_INPUT_TOKENS: 25,  # message_start
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 15,  # the cumulative message_delta value, not 1 + 15
}
GROQ_REFERENCE = {
    semconv.GEN_AI_USAGE_INPUT_TOKENS: 18,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 556,
    semconv.PROVIDER_QUEUE_NS: 37_493_756,  # queue_time 0.037493756 s
    semconv.PROVIDER_PREFILL_NS: 680_594,  # prompt_time 0.000680594 s
    semconv.PROVIDER_DECODE_NS: 463_333_333,  # completion_time 0.463333333 s
    # server total = queue_time + total_time = 0.037493756 + 0.464013927 s (total_time excludes queue)
    semconv.PROVIDER_SERVER_TOTAL_NS: 501_507_683,
}
GROQ_STREAM = {
    semconv.GEN_AI_USAGE_INPUT_TOKENS: GROQ_USAGE["prompt_tokens"],  # 45
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: GROQ_USAGE["completion_tokens"],  # 662
    semconv.PROVIDER_QUEUE_NS: 41_905_864,  # 0.041905864 s
    semconv.PROVIDER_PREFILL_NS: 3_940_145,  # 0.003940145 s
    semconv.PROVIDER_DECODE_NS: 2_652_230_333,  # 2.652230333 s
    semconv.PROVIDER_SERVER_TOTAL_NS: 2_698_076_342,  # 0.041905864 + 2.656170478 s
}
CEREBRAS = {
    semconv.GEN_AI_USAGE_INPUT_TOKENS: 12,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 10,
    semconv.PROVIDER_QUEUE_NS: 73_161,  # 0.000073161 s
    semconv.PROVIDER_PREFILL_NS: 1_074_480,  # 0.0010744798888888889 s, rounded to the ns
    semconv.PROVIDER_DECODE_NS: 5_658_071,  # 0.005658071111111111 s
    semconv.PROVIDER_SERVER_TOTAL_NS: 22_224_903,  # total_time 0.022224903106689453 s, queue included
}
OLLAMA = {
    semconv.GEN_AI_USAGE_INPUT_TOKENS: 11,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 18,
    semconv.PROVIDER_QUEUE_NS: 101_397_084,  # load_duration (ns)
    semconv.PROVIDER_PREFILL_NS: 13_074_791,  # prompt_eval_duration
    semconv.PROVIDER_DECODE_NS: 52_479_709,  # eval_duration
    semconv.PROVIDER_SERVER_TOTAL_NS: 174_560_334,  # total_duration
}


@dataclass(frozen=True)
class Sdk:
    """One SDK endpoint: how to instrument it, make its clients, and what its replay sends."""

    instrument: Callable[[str], latencylens.Instrumentation]
    """Called with the replay server's URL."""
    client: Callable[[str], Any]
    async_client: Callable[[str], Any]
    path: str
    plain: Callable[[], Reply]
    stream: Script
    plain_expected: dict[str, Any]
    stream_expected: dict[str, Any]


def _openai(url: str) -> Any:
    http = openai.DefaultHttpxClient(trust_env=False)
    return openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, http_client=http)


def _async_openai(url: str) -> Any:
    http = openai.DefaultAsyncHttpxClient(trust_env=False)
    return openai.AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0, http_client=http)


def _anthropic(url: str) -> Any:
    http = anthropic.DefaultHttpxClient(trust_env=False)
    return anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, http_client=http)


def _async_anthropic(url: str) -> Any:
    http = anthropic.DefaultAsyncHttpxClient(trust_env=False)
    return anthropic.AsyncAnthropic(base_url=url, api_key="x", max_retries=0, http_client=http)


def _groq(url: str) -> Any:
    return groq.Groq(base_url=url, api_key="x", max_retries=0, http_client=httpx.Client(trust_env=False))


def _async_groq(url: str) -> Any:
    http = httpx.AsyncClient(trust_env=False)
    return groq.AsyncGroq(base_url=url, api_key="x", max_retries=0, http_client=http)


def _cerebras(url: str) -> Any:
    http = httpx.Client(trust_env=False)
    return Cerebras(base_url=url, api_key="x", max_retries=0, warm_tcp_connection=False, http_client=http)


def _async_cerebras(url: str) -> Any:
    http = httpx.AsyncClient(trust_env=False)
    return AsyncCerebras(
        base_url=url, api_key="x", max_retries=0, warm_tcp_connection=False, http_client=http
    )


SDKS = {
    "openai-chat": Sdk(
        lambda url: latencylens.instrument_openai(),
        _openai,
        _async_openai,
        "/v1/chat/completions",
        lambda: json_reply(openai_chat_completion(), PROCESSING_MS, delay_s=HOLD_S),
        _openai_chat_stream(),
        {**OPENAI_CHAT, **SERVER_TOTAL_321_MS},
        OPENAI_CHAT,
    ),
    "openai-responses": Sdk(
        lambda url: latencylens.instrument_openai(),
        _openai,
        _async_openai,
        "/v1/responses",
        lambda: json_reply(openai_response(), PROCESSING_MS, delay_s=HOLD_S),
        _openai_responses_stream(),
        {**OPENAI_RESPONSES, **SERVER_TOTAL_321_MS},
        OPENAI_RESPONSES,
    ),
    "anthropic": Sdk(
        lambda url: latencylens.instrument_anthropic(),
        _anthropic,
        _async_anthropic,
        "/v1/messages",
        lambda: json_reply(anthropic_message(), delay_s=HOLD_S),
        _anthropic_stream(),
        ANTHROPIC_MESSAGE,
        ANTHROPIC_STREAM,
    ),
    "groq": Sdk(
        lambda url: latencylens.instrument_groq(),
        _groq,
        _async_groq,
        "/openai/v1/chat/completions",
        lambda: json_reply(groq_completion(), delay_s=HOLD_S),
        _groq_stream(),
        GROQ_REFERENCE,
        GROQ_STREAM,
    ),
    "cerebras": Sdk(
        lambda url: latencylens.instrument_cerebras(),
        _cerebras,
        _async_cerebras,
        "/v1/chat/completions",
        lambda: json_reply(cerebras_completion(), delay_s=HOLD_S),
        _cerebras_stream(),
        CEREBRAS,
        CEREBRAS,
    ),
    # Not an SDK patch: the httpx hook's route for a self-hosted OpenAI-compatible server (vLLM).
    "httpx-hook": Sdk(
        lambda url: latencylens.instrument_httpx(base_urls=[url + "/v1"], provider="vllm"),
        _openai,
        _async_openai,
        "/v1/chat/completions",
        lambda: json_reply(openai_chat_completion(), delay_s=HOLD_S),
        _openai_chat_stream(),
        {**OPENAI_CHAT, semconv.GEN_AI_PROVIDER_NAME: "vllm", semconv.SERVER_ADDRESS: "127.0.0.1"},
        {**OPENAI_CHAT, semconv.GEN_AI_PROVIDER_NAME: "vllm", semconv.SERVER_ADDRESS: "127.0.0.1"},
    ),
    "ollama-chat": Sdk(
        lambda url: latencylens.instrument_ollama(),
        lambda url: ollama.Client(host=url, trust_env=False),
        lambda url: ollama.AsyncClient(host=url, trust_env=False),
        "/api/chat",
        lambda: json_reply(ollama_final("chat"), delay_s=HOLD_S),
        _ollama_stream("chat"),
        OLLAMA,
        OLLAMA,
    ),
    "ollama-generate": Sdk(
        lambda url: latencylens.instrument_ollama(),
        lambda url: ollama.Client(host=url, trust_env=False),
        lambda url: ollama.AsyncClient(host=url, trust_env=False),
        "/api/generate",
        lambda: json_reply(ollama_final(), delay_s=HOLD_S),
        _ollama_stream("generate"),
        OLLAMA,
        OLLAMA,
    ),
}


# --- How apps call them ---------------------------------------------------------------------------


class _Seen:
    """When the caller's own code got things during the current call (set by the readers below):
    the first and last content, and the last item of any kind."""

    first: int | None = None
    last: int | None = None
    item: int | None = None

    def reset(self) -> None:
        self.first = self.last = self.item = None


SEEN = _Seen()


def _saw() -> None:
    now = time.time_ns()
    if SEEN.first is None:
        SEEN.first = now
    SEEN.last = now


def _got(item: Any) -> Any:
    SEEN.item = time.time_ns()
    return item


def _seen(text: str) -> str:
    if text:
        _saw()
    return text


def _text(completion: Any) -> str:
    return str(completion.choices[0].message.content)


def _chunk_text(chunk: Any) -> str:
    _got(chunk)
    return _seen(chunk.choices[0].delta.content or "") if chunk.choices else ""


def _chat_text(chunks: Iterator[Any]) -> str:
    return "".join(_chunk_text(chunk) for chunk in chunks)


async def _achat_text(chunks: Any) -> str:
    return "".join([_chunk_text(chunk) async for chunk in chunks])


_CONTENT_TOKENS = [json.dumps(text) for text in CONTENT]


def _seen_line(line: str) -> bool:
    """Count a ``data:`` line (noting when one carrying content was seen)."""
    if any(token in line for token in _CONTENT_TOKENS):
        _saw()
    if line.startswith("data:") and "[DONE]" not in line:
        _got(line)
    return line.startswith("data:")


def _sse_lines(lines: Iterator[str]) -> int:
    return sum(1 for line in lines if _seen_line(line))


async def _asse_lines(lines: Any) -> int:
    return sum([1 async for line in lines if _seen_line(line)])


def _is_delta(event: Any) -> bool:
    return event.type in ("content_block_delta", "response.output_text.delta")


def _delta_text(event: Any) -> str:
    return _seen(event.delta if isinstance(event.delta, str) else event.delta.text)


def _deltas(events: Iterator[Any]) -> str:
    return "".join(_delta_text(event) for event in events if _is_delta(_got(event)))


async def _adeltas(events: Any) -> str:
    return "".join([_delta_text(event) async for event in events if _is_delta(_got(event))])


STREAM_OPTIONS: Any = {"include_usage": True}
CHAT: Any = {"model": OPENAI_MODEL, "messages": MESSAGES}
CHAT_STREAM: Any = {**CHAT, "stream": True, "stream_options": STREAM_OPTIONS}
RESPONSE: Any = {"model": OPENAI_MODEL, "input": "hi"}
MESSAGE: Any = {"model": "claude-opus-4-6", "max_tokens": 10, "messages": MESSAGES}
GROQ: Any = {"model": "llama-3.3-70b-versatile", "messages": MESSAGES}
CEREBRAS_CHAT: Any = {"model": "gpt-oss-120b", "messages": MESSAGES}
OLLAMA_CHAT: Any = {"model": "gemma4", "messages": MESSAGES}
OLLAMA_GENERATE: Any = {"model": "gemma4", "prompt": "hi"}


async def _with_stream_helper_text(manager: Any) -> str:
    async with manager as stream:
        return "".join([_seen(text) async for text in stream.text_stream])


async def _with_streaming_response(manager: Any, read: Callable[[Any], Awaitable[Any]]) -> Any:
    async with manager as response:
        return await read(response)


async def _awaited_then(awaitable: Awaitable[Any], read: Callable[[Any], Any]) -> Any:
    return read(await awaitable)


async def _parsed(awaitable: Awaitable[Any], read: Callable[[Any], Any]) -> Any:
    """``read`` of the raw response's ``.parse()``: synchronous on openai's legacy raw response, a
    coroutine on the others'."""
    parsed = (await awaitable).parse()
    parsed = await parsed if inspect.isawaitable(parsed) else parsed
    result = read(parsed)
    return await result if inspect.isawaitable(result) else result


async def _awaited_then_async(awaitable: Awaitable[Any], read: Callable[[Any], Awaitable[Any]]) -> Any:
    return await read(await awaitable)


async def _chat_helper(manager: Any) -> str:
    async with manager as stream:
        completion = await stream.get_final_completion()
        return str(completion.choices[0].message.content)


async def _anthropic_helper(manager: Any) -> str:
    async with manager as stream:
        return str(await stream.get_final_text())


def _sync_chat_helper(manager: Any) -> str:
    with manager as stream:
        return str(stream.get_final_completion().choices[0].message.content)


def _sync_anthropic_helper(manager: Any) -> str:
    with manager as stream:
        return str(stream.get_final_text())


def _sync_helper_text(manager: Any) -> str:
    with manager as stream:
        return "".join(_seen(text) for text in stream.text_stream)


def _sync_streaming_response(manager: Any, read: Callable[[Any], Any]) -> Any:
    with manager as response:
        return read(response)


@dataclass(frozen=True)
class Case:
    sdk: str
    mode: str
    streamed: bool
    run: Callable[[Any], Any]
    run_async: Callable[[Any], Awaitable[Any]]
    expect: Any


def _openai_chat_cases() -> list[Case]:
    def raw_text(raw: Any) -> str:
        return str(raw.parse().choices[0].message.content)

    async def aparse_text(response: Any) -> str:
        return str((await response.parse()).choices[0].message.content)

    def completions(c: Any) -> Any:
        return c.chat.completions

    sdk = "openai-chat"
    return [
        Case(
            sdk,
            "create",
            False,
            lambda c: completions(c).create(**CHAT).choices[0].message.content,
            lambda c: _awaited_then(completions(c).create(**CHAT), lambda r: r.choices[0].message.content),
            "Hi",
        ),
        Case(
            sdk,
            "create-stream",
            True,
            lambda c: _chat_text(completions(c).create(**CHAT_STREAM)),
            lambda c: _awaited_then_async(completions(c).create(**CHAT_STREAM), _achat_text),
            TEXT,
        ),
        Case(
            sdk,
            "with_raw_response",
            False,
            lambda c: raw_text(completions(c).with_raw_response.create(**CHAT)),
            lambda c: _parsed(completions(c).with_raw_response.create(**CHAT), _text),
            "Hi",
        ),
        Case(
            sdk,
            "with_raw_response-stream",
            True,
            lambda c: _chat_text(completions(c).with_raw_response.create(**CHAT_STREAM).parse()),
            lambda c: _parsed(completions(c).with_raw_response.create(**CHAT_STREAM), _achat_text),
            TEXT,
        ),
        Case(
            sdk,
            "with_streaming_response",
            False,
            lambda c: _sync_streaming_response(
                completions(c).with_streaming_response.create(**CHAT),
                lambda r: r.parse().choices[0].message.content,
            ),
            lambda c: _with_streaming_response(
                completions(c).with_streaming_response.create(**CHAT), aparse_text
            ),
            "Hi",
        ),
        Case(
            sdk,
            "with_streaming_response-stream",
            True,
            lambda c: _sync_streaming_response(
                completions(c).with_streaming_response.create(**CHAT_STREAM),
                lambda r: _sse_lines(r.iter_lines()),
            ),
            lambda c: _with_streaming_response(
                completions(c).with_streaming_response.create(**CHAT_STREAM),
                lambda r: _asse_lines(r.iter_lines()),
            ),
            8,  # seven chunks and [DONE]
        ),
        Case(
            sdk,
            "stream-helper",
            True,
            lambda c: _sync_chat_helper(completions(c).stream(**CHAT, stream_options=STREAM_OPTIONS)),
            lambda c: _chat_helper(completions(c).stream(**CHAT, stream_options=STREAM_OPTIONS)),
            TEXT,
        ),
    ]


def _openai_responses_cases() -> list[Case]:
    sdk = "openai-responses"
    return [
        Case(
            sdk,
            "create",
            False,
            lambda c: c.responses.create(**RESPONSE).id,
            lambda c: _awaited_then(c.responses.create(**RESPONSE), lambda r: r.id),
            "resp_0cd5",
        ),
        Case(
            sdk,
            "create-stream",
            True,
            lambda c: _deltas(c.responses.create(**RESPONSE, stream=True)),
            lambda c: _awaited_then_async(c.responses.create(**RESPONSE, stream=True), _adeltas),
            TEXT,
        ),
        Case(
            sdk,
            "with_raw_response",
            False,
            lambda c: c.responses.with_raw_response.create(**RESPONSE).parse().id,
            lambda c: _parsed(c.responses.with_raw_response.create(**RESPONSE), lambda r: r.id),
            "resp_0cd5",
        ),
    ]


def _anthropic_cases() -> list[Case]:
    sdk = "anthropic"

    def stream_text(stream: Any) -> str:
        with stream:
            return _deltas(stream)

    async def astream_text(stream: Any) -> str:
        async with stream:
            return await _adeltas(stream)

    return [
        Case(
            sdk,
            "create",
            False,
            lambda c: c.messages.create(**MESSAGE).content[0].text,
            lambda c: _awaited_then(c.messages.create(**MESSAGE), lambda r: r.content[0].text),
            "Hi",
        ),
        Case(
            sdk,
            "create-stream",
            True,
            lambda c: stream_text(c.messages.create(**MESSAGE, stream=True)),
            lambda c: _awaited_then_async(c.messages.create(**MESSAGE, stream=True), astream_text),
            TEXT,
        ),
        Case(
            sdk,
            "with_raw_response",
            False,
            lambda c: c.messages.with_raw_response.create(**MESSAGE).parse().content[0].text,
            lambda c: _parsed(c.messages.with_raw_response.create(**MESSAGE), lambda r: r.content[0].text),
            "Hi",
        ),
        Case(
            sdk,
            "with_streaming_response-stream",
            True,
            lambda c: _sync_streaming_response(
                c.messages.with_streaming_response.create(**MESSAGE, stream=True),
                lambda r: _sse_lines(r.iter_lines()),
            ),
            lambda c: _with_streaming_response(
                c.messages.with_streaming_response.create(**MESSAGE, stream=True),
                lambda r: _asse_lines(r.iter_lines()),
            ),
            10,  # every event of the stream
        ),
        Case(
            sdk,
            "stream-helper",
            True,
            lambda c: _sync_anthropic_helper(c.messages.stream(**MESSAGE)),
            lambda c: _anthropic_helper(c.messages.stream(**MESSAGE)),
            TEXT,
        ),
        Case(
            sdk,
            "stream-helper-text_stream",
            True,
            lambda c: _sync_helper_text(c.messages.stream(**MESSAGE)),
            lambda c: _with_stream_helper_text(c.messages.stream(**MESSAGE)),
            TEXT,
        ),
    ]


def _compatible_cases(sdk: str, body: Any) -> list[Case]:
    """Groq and Cerebras: Chat Completions-shaped SDKs (no stream helper)."""
    stream_body = {**body, "stream": True}
    return [
        Case(
            sdk,
            "create",
            False,
            lambda c: c.chat.completions.create(**body).choices[0].message.content,
            lambda c: _awaited_then(
                c.chat.completions.create(**body), lambda r: r.choices[0].message.content
            ),
            "Hi",
        ),
        Case(
            sdk,
            "create-stream",
            True,
            lambda c: _chat_text(c.chat.completions.create(**stream_body)),
            lambda c: _awaited_then_async(c.chat.completions.create(**stream_body), _achat_text),
            TEXT,
        ),
        Case(
            sdk,
            "with_raw_response",
            False,
            lambda c: c.chat.completions.with_raw_response.create(**body).parse().choices[0].message.content,
            lambda c: _parsed(c.chat.completions.with_raw_response.create(**body), _text),
            "Hi",
        ),
        Case(
            sdk,
            "with_raw_response-stream",
            True,
            lambda c: _chat_text(c.chat.completions.with_raw_response.create(**stream_body).parse()),
            lambda c: _parsed(c.chat.completions.with_raw_response.create(**stream_body), _achat_text),
            TEXT,
        ),
    ]


def _ollama_cases() -> list[Case]:
    async def achat_text(parts: Any) -> str:
        return "".join([_seen(_got(part).message.content) async for part in parts])

    async def agenerate_text(parts: Any) -> str:
        return "".join([_seen(_got(part).response) async for part in parts])

    chat_stream = {**OLLAMA_CHAT, "stream": True}
    generate_stream = {**OLLAMA_GENERATE, "stream": True}
    return [
        Case(
            "ollama-chat",
            "chat",
            False,
            lambda c: c.chat(**OLLAMA_CHAT).message.content,
            lambda c: _awaited_then(c.chat(**OLLAMA_CHAT), lambda r: r.message.content),
            "",
        ),
        Case(
            "ollama-chat",
            "chat-stream",
            True,
            lambda c: "".join(_seen(_got(part).message.content) for part in c.chat(**chat_stream)),
            lambda c: _awaited_then_async(c.chat(**chat_stream), achat_text),
            TEXT,
        ),
        Case(
            "ollama-generate",
            "generate",
            False,
            lambda c: c.generate(**OLLAMA_GENERATE).response,
            lambda c: _awaited_then(c.generate(**OLLAMA_GENERATE), lambda r: r.response),
            "Hello! How can I help you today?",
        ),
        Case(
            "ollama-generate",
            "generate-stream",
            True,
            lambda c: "".join(_seen(_got(part).response) for part in c.generate(**generate_stream)),
            lambda c: _awaited_then_async(c.generate(**generate_stream), agenerate_text),
            TEXT,
        ),
    ]


def _httpx_hook_cases() -> list[Case]:
    """The OpenAI client through the hook's route: plain, streamed, and a raw stream."""
    modes = ("create", "create-stream", "with_raw_response-stream")
    return [replace(case, sdk="httpx-hook") for case in _openai_chat_cases() if case.mode in modes]


CASES = [
    *_openai_chat_cases(),
    *_httpx_hook_cases(),
    *_openai_responses_cases(),
    *_anthropic_cases(),
    *_compatible_cases("groq", GROQ),
    *_compatible_cases("cerebras", CEREBRAS_CHAT),
    *_ollama_cases(),
]


def _run_twice(sdk: Sdk, case: Case, url: str, is_async: bool) -> tuple[list[Any], int]:
    """What two calls returned (the first warms the SDK), and when the second returned."""
    results: list[Any] = []
    returned = 0
    if not is_async:
        client = sdk.client(url)
        try:
            for _ in range(2):
                SEEN.reset()
                results.append(case.run(client))
                returned = time.time_ns()
        finally:
            client.close()
        return results, returned

    async def both() -> int:
        client = sdk.async_client(url)
        returned_ns = 0
        try:
            for _ in range(2):
                SEEN.reset()
                results.append(await case.run_async(client))
                returned_ns = time.time_ns()
        finally:
            closed = client.close()
            if closed is not None:
                await closed
        return returned_ns

    returned = asyncio.run(both())
    return results, returned


def _model_spans(spans: Spans) -> list[ReadableSpan]:
    return [s for s in spans() if (s.attributes or {}).get(semconv.SPAN_KIND) == semconv.KIND_MODEL]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("case", CASES, ids=[f"{case.sdk}-{case.mode}" for case in CASES])
def test_sdk_call_makes_one_model_span_timed_like_the_server_sent_it(
    case: Case, is_async: bool, replay: Replay, spans: Spans, undo: Any
) -> None:
    sdk = SDKS[case.sdk]
    script = sdk.stream
    server = replay()
    server.route(
        "POST",
        sdk.path,
        lambda request: script.reply() if (request.json() or {}).get("stream") is True else sdk.plain(),
    )
    undo(sdk.instrument(server.url))

    results, returned = _run_twice(sdk, case, server.url, is_async)
    assert results == [case.expect, case.expect]

    assert len(server.requests) == 2
    _warm_up, span = _model_spans(spans)  # one model span per call, no more
    request = server.requests[-1]
    attributes = dict(span.attributes or {})
    assert attributes[semconv.GEN_AI_REQUEST_STREAM] is case.streamed
    assert span.start_time is not None and span.end_time is not None
    if case.streamed:
        _check_stream(span, server, request, script, attributes, returned)
        expected = sdk.stream_expected
    else:
        _check_plain(span, server, request, returned)
        expected = sdk.plain_expected
    assert {key: attributes.get(key) for key in expected} == expected


def _between(name: str, value: int, earliest: int, latest: int) -> None:
    """``earliest <= value <= latest`` (absolute ns), with a readable message in ms."""
    assert earliest <= value <= latest, (
        f"{name} at {(value - earliest) / 1e6:+.2f} ms from when the server sent it, "
        f"{(value - latest) / 1e6:+.2f} ms from when the caller saw it"
    )


def _check_plain(span: ReadableSpan, server: ReplayServer, request: Recorded, returned: int) -> None:
    """The span lasts at least the hold and ends between the body's sending and the call's return."""
    assert span.start_time is not None and span.end_time is not None
    duration = span.end_time - span.start_time
    floor = request_offset_ns(span, server) + HOLD_S * 1e9
    assert duration >= floor, f"span {duration / 1e6:.2f} ms, the server held {floor / 1e6:.2f} ms"
    _between("span end", span.end_time, request.sent_ns[-1], returned)


def _check_stream(
    span: ReadableSpan,
    server: ReplayServer,
    request: Recorded,
    script: Script,
    attributes: dict[str, Any],
    returned: int,
) -> None:
    """TTFT, last content and the span's end between the server's sending and the caller's seeing."""
    assert span.start_time is not None and span.end_time is not None
    start = span.start_time
    first = attributes[semconv.STREAM_FIRST_CONTENT_NS]
    last = attributes[semconv.STREAM_LAST_CHUNK_NS]
    floor = request_offset_ns(span, server) + TTFT_S * 1e9
    assert first >= floor, f"TTFT {first / 1e6:.2f} ms, less than the {floor / 1e6:.2f} ms waited"
    sent = request.sent_ns
    _between("first content", start + first, sent[script.first], SEEN.first or returned)
    seen_end = SEEN.last if script.content_end else SEEN.item
    _between("decode end", start + last, sent[script.decode_end], seen_end or returned)
    _between("span end", span.end_time, sent[script.end], returned)
    assert attributes[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] == first / 1e9
    assert attributes[semconv.STREAM_CONTENT_CHUNKS] == len(CONTENT)
    assert attributes[semconv.STREAM_END_REASON] == semconv.END_COMPLETED


def test_matrix_covers_every_instrumented_sdk_sync_async_stream_and_raw() -> None:
    covered = {(case.sdk, case.streamed) for case in CASES}
    assert covered == {(sdk, streamed) for sdk in SDKS for streamed in (False, True)}
    raw = {case.sdk for case in CASES if case.mode.startswith("with_raw_response")}
    assert raw == {"openai-chat", "openai-responses", "anthropic", "groq", "cerebras", "httpx-hook"}
    helpers = {case.sdk for case in CASES if case.mode.startswith("stream-helper")}
    assert helpers == {"openai-chat", "anthropic"}
