"""OpenLIT (``openlit``): GenAI semconv names, plus timing and usage names of its own.

Names as in ``openlit`` 1.45 (``openlit/semcov``); meanings observed around the real ``openai``
SDK and read in ``openlit/instrumentation/openai/{openai,utils}.py``:

* Its spans carry ``telemetry.sdk.name = openlit`` as a span attribute.
* The chat span starts before the request and, when streamed, ends when the stream is exhausted.
* ``gen_ai.server.time_to_first_token`` (seconds, despite the name measured in the client) starts
  when OpenLIT wraps the stream object, i.e. after the response headers arrived, and stops at the
  first chunk of any kind (a role-only chunk counts). Without the moment the stream began it says
  nothing about the time from the request to the first chunk, so it is used only with the end of
  the call's HTTP client span (OpenLIT turns on the httpx instrumentation; that span ends when the
  headers arrive): first chunk = that end + OpenLIT's value. Otherwise TTFT is unknown. On calls
  that did not stream it is the whole call's duration and is not read.
* ``gen_ai.server.time_per_output_token`` is the mean gap between chunks: informational only.
* When a response carries no usage (a stream without ``include_usage``, or a usage of 0 input
  tokens), OpenLIT writes its own estimate, ``ceil(characters / 2)``, under the usual
  ``gen_ai.usage.input_tokens`` / ``output_tokens`` names. On a stream this is recognisable: the
  cache counts it always writes with a real usage are absent. A non-streamed response without
  usage is estimated too but cannot be told apart (OpenAI always sends usage there).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Final

from latencylens import semconv
from latencylens_collector.analysis.conventions.values import first_seconds_ns, is_true
from latencylens_collector.analysis.records import SpanRow

TELEMETRY_SDK_NAME: Final = "telemetry.sdk.name"
"""``openlit`` on OpenLIT's spans (a span attribute, not only the resource's)."""
SDK_NAME: Final = "openlit"
GEN_AI_SERVER_TIME_TO_FIRST_TOKEN: Final = "gen_ai.server.time_to_first_token"
"""Seconds from the stream object's creation (after the headers) to the first chunk of any kind."""
GEN_AI_SERVER_TIME_PER_OUTPUT_TOKEN: Final = "gen_ai.server.time_per_output_token"
"""Mean seconds between chunks (client-measured in OpenLIT); informational."""
GEN_AI_USAGE_PROMPT_CACHED_TOKENS: Final = "gen_ai.usage.prompt_tokens_details.cached_tokens"
"""Cached input tokens as OpenAI reports them (OpenLIT's name in older releases)."""
OPERATION_VECTORDB: Final = "vectordb"
"""``gen_ai.operation.name`` of OpenLIT's vector-database spans."""

KIND_BY_OPERATION: Final[Mapping[str, str]] = {OPERATION_VECTORDB: semconv.KIND_RETRIEVAL}
CACHE_READ_TOKENS: Final[tuple[str, ...]] = (GEN_AI_USAGE_PROMPT_CACHED_TOKENS,)
USAGE_WITH_REAL_COUNTS: Final = (
    semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    semconv.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
)
"""Written by OpenLIT on a stream only when the provider's usage arrived."""
_HTTP_METHOD_KEYS: Final = ("http.request.method", "http.method")


def kind(attributes: Mapping[str, str]) -> str | None:
    return KIND_BY_OPERATION.get(attributes.get(semconv.GEN_AI_OPERATION_NAME, ""))


def is_openlit(attributes: Mapping[str, str]) -> bool:
    return attributes.get(TELEMETRY_SDK_NAME) == SDK_NAME


def _streamed(attributes: Mapping[str, str]) -> bool:
    return is_true(attributes, semconv.GEN_AI_REQUEST_STREAM)


def usage_estimated(attributes: Mapping[str, str]) -> bool:
    """Whether the span's token counts are OpenLIT's estimate rather than the provider's usage."""
    return (
        is_openlit(attributes)
        and _streamed(attributes)
        and semconv.GEN_AI_USAGE_OUTPUT_TOKENS in attributes
        and not any(key in attributes for key in USAGE_WITH_REAL_COUNTS)
    )


def with_stream_start(spans: Sequence[SpanRow]) -> list[SpanRow]:
    """OpenLIT's streamed model spans with first and last chunk under our names, where derivable.

    First chunk = end of the call's HTTP client child span (the headers) + OpenLIT's TTFT, as an
    offset from the span's start; last chunk = the span's end. Without such a child the call gets
    no stream times (TTFT unknown). Other spans are returned unchanged (the same objects)."""
    streams = [
        row
        for row in spans
        if row.kind == semconv.KIND_MODEL
        and is_openlit(row.attributes)
        and _streamed(row.attributes)
        and semconv.STREAM_FIRST_CONTENT_NS not in row.attributes
    ]
    if not streams:
        return list(spans)
    resolved: dict[bytes, SpanRow] = {}
    for call in streams:
        after_headers = first_seconds_ns(call.attributes, GEN_AI_SERVER_TIME_TO_FIRST_TOKEN)
        headers = _headers_at(call, spans)
        if after_headers is None or headers is None:
            continue
        first = headers - call.start_ns + after_headers
        if not 0 <= first <= call.duration_ns:
            continue
        attributes = dict(call.attributes)
        attributes[semconv.STREAM_FIRST_CONTENT_NS] = str(first)
        attributes[semconv.STREAM_LAST_CHUNK_NS] = str(call.duration_ns)
        resolved[call.span_id] = dataclasses.replace(call, attributes=attributes)
    return [resolved.get(row.span_id, row) for row in spans]


def _headers_at(call: SpanRow, spans: Sequence[SpanRow]) -> int | None:
    """End of the last HTTP client span directly under ``call`` (when its headers arrived)."""
    ends = [
        row.end_ns
        for row in spans
        if row.parent_span_id == call.span_id
        and row.span_kind == "client"
        and any(key in row.attributes for key in _HTTP_METHOD_KEYS)
        and call.start_ns <= row.end_ns <= call.end_ns
    ]
    return max(ends, default=None)
