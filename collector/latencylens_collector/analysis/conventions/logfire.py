"""pydantic Logfire and pydantic-ai: GenAI semconv names, log records sent as spans, templated names.

What Logfire 5.x writes (observed with ``logfire.instrument_openai()`` around the real ``openai``
SDK, and read in ``logfire/_internal/integrations/llm_providers/llm_provider.py``):

* Every span carries ``logfire.span_type``: ``span`` for real spans, ``log`` for a log record
  (``logfire.info()`` and friends, exported as a span of zero length) and ``pending_span`` for the
  "started" marker Logfire sends its own backend. Only ``span`` can be a call.
* Span names are message templates (``Chat Completion with {request_data[model]!r}``); the
  rendered text is in ``logfire.msg``. Templates keep route names low-cardinality, so the stored
  name stays the template and displays use the message.
* A streamed call is two records. The model span (CLIENT, ``gen_ai.operation.name = chat``) ends
  when the response headers arrive. When the stream is exhausted a log record follows, a *sibling*
  of the model span (same parent): ``streaming response from {request_data[model]!r} took
  {duration:.2f}s``, with ``duration`` in seconds measured from the first read of the stream, the
  log's own timestamp at the stream's end, and the stream's usage and response model when the
  stream carried them (no usage attribute at all otherwise). No first-chunk time is recorded.

pydantic-ai (2.68, ``_instrumentation.py``) writes ``chat {model}`` CLIENT spans that end with the
stream and carry ``gen_ai.client.operation.time_to_first_chunk`` (seconds from the request).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Final

from latencylens import semconv
from latencylens_collector.analysis.conventions import genai
from latencylens_collector.analysis.conventions.values import first_seconds_ns
from latencylens_collector.analysis.records import SpanRow

GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK: Final = "gen_ai.client.operation.time_to_first_chunk"
"""Seconds from request issue to the first chunk, on streamed calls (pydantic-ai; the metric's name)."""
LOGFIRE_SPAN_TYPE: Final = "logfire.span_type"
"""``span``, ``log`` (a log record exported as a zero-length span) or ``pending_span``."""
LOGFIRE_MSG: Final = "logfire.msg"
"""The span's message with its template's fields filled in."""
LOGFIRE_MSG_TEMPLATE: Final = "logfire.msg_template"
"""The message template (also the span's name)."""
GEN_AI_USAGE_RAW: Final = "gen_ai.usage.raw"
"""The provider's usage object as JSON (token counts only)."""
STREAM_DURATION: Final = "duration"
"""Seconds (double) on the stream-end log record: first read of the stream → its end."""

SPAN_TYPE_SPAN: Final = "span"
SPAN_TYPE_LOG: Final = "log"
SPAN_TYPE_PENDING: Final = "pending_span"
NOT_CALLS: Final = frozenset({SPAN_TYPE_LOG, SPAN_TYPE_PENDING})
"""Span types that record something about a call but are not one."""

FIRST_CHUNK_SECONDS: Final[tuple[str, ...]] = (GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK,)

_RAW_CACHED_TOKENS: Final = (
    ("prompt_tokens_details", "cached_tokens"),  # OpenAI chat completions
    ("input_tokens_details", "cached_tokens"),  # OpenAI responses
    (None, "cache_read_input_tokens"),  # Anthropic
)
"""Where each provider's raw usage keeps the cached input tokens."""
_MATCH_SLACK_NS: Final = 1_000_000
"""The stream's first read follows the model span's end in the same process and clock; 1 ms
absorbs the rounding of ``duration`` (a float of seconds)."""
_FROM_STREAM_LOG: Final = ("gen_ai.usage.", "gen_ai.response.")
"""What a stream-end log record knows better than its model span (which sets the response model
to the requested one when it starts)."""


def is_record(attributes: Mapping[str, str]) -> bool:
    """A log record or pending-span marker: never a call, whatever GenAI names it carries."""
    return attributes.get(LOGFIRE_SPAN_TYPE) in NOT_CALLS


def display_name(name: str, attributes: Mapping[str, str]) -> str:
    """The rendered message of a Logfire span, else its name."""
    return attributes.get(LOGFIRE_MSG) or name


def resolve(spans: Sequence[SpanRow]) -> list[SpanRow]:
    """Logfire's model spans as one call each: streams extended to their end, cached tokens filled.

    A stream-end log record (``log``, a model operation, a ``duration``) belongs to the model span
    with the same parent and request model that ended last before the stream was first read
    (log time − ``duration``); each model span takes one record. The model span then lasts until
    the log's time (the stream's last chunk), and takes usage and response model from the record.
    The record itself stays a zero-length span that owns no time.

    Logfire writes ``gen_ai.usage.cache_read.input_tokens`` only when it is not 0; the provider's
    usage is in ``gen_ai.usage.raw``, so a missing cached count is read from there (absent there
    too: unknown). Spans needing neither are returned unchanged (the same objects)."""
    logs = [row for row in spans if _is_stream_log(row.attributes)]
    calls = [
        row
        for row in spans
        if row.kind == semconv.KIND_MODEL and row.attributes.get(LOGFIRE_SPAN_TYPE) == SPAN_TYPE_SPAN
    ]
    if not calls:
        return list(spans)
    resolved: dict[bytes, SpanRow] = {}
    for log in sorted(logs, key=lambda row: row.start_ns):
        call = _call_of(log, calls, resolved)
        if call is not None:
            resolved[call.span_id] = _extend(call, log)
    for call in calls:
        current = resolved.get(call.span_id, call)
        cached = _raw_cached_tokens(current.attributes)
        if cached is not None:
            attributes = {**current.attributes, semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: str(cached)}
            resolved[call.span_id] = dataclasses.replace(current, attributes=attributes)
    return [resolved.get(row.span_id, row) for row in spans]


def _raw_cached_tokens(attributes: Mapping[str, str]) -> int | None:
    """Cached input tokens from ``gen_ai.usage.raw`` when the span has no cached count of its own."""
    raw = attributes.get(GEN_AI_USAGE_RAW)
    if not raw or semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS in attributes:
        return None
    try:
        usage = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(usage, dict):
        return None
    for details_key, count_key in _RAW_CACHED_TOKENS:
        container = usage.get(details_key) if details_key else usage
        if isinstance(container, dict):
            count = container.get(count_key)
            if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
                return count
    return None


def _is_stream_log(attributes: Mapping[str, str]) -> bool:
    return (
        attributes.get(LOGFIRE_SPAN_TYPE) == SPAN_TYPE_LOG
        and STREAM_DURATION in attributes
        and genai.kind(attributes) == semconv.KIND_MODEL
    )


def _call_of(log: SpanRow, calls: Sequence[SpanRow], taken: Mapping[bytes, object]) -> SpanRow | None:
    duration = first_seconds_ns(log.attributes, STREAM_DURATION)
    if duration is None:
        return None
    first_read = log.start_ns - duration
    model = log.attributes.get(semconv.GEN_AI_REQUEST_MODEL)
    candidates = [
        call
        for call in calls
        if call.span_id not in taken
        and call.parent_span_id == log.parent_span_id
        and call.end_ns <= first_read + _MATCH_SLACK_NS
        and call.end_ns <= log.start_ns
        and (model is None or call.attributes.get(semconv.GEN_AI_REQUEST_MODEL) in (None, model))
    ]
    return max(candidates, key=lambda call: (call.end_ns, call.span_id), default=None)


def _extend(call: SpanRow, log: SpanRow) -> SpanRow:
    duration = log.start_ns - call.start_ns
    attributes = dict(call.attributes)
    attributes.update((k, v) for k, v in log.attributes.items() if k.startswith(_FROM_STREAM_LOG))
    attributes[semconv.GEN_AI_REQUEST_STREAM] = "true"
    attributes[semconv.STREAM_LAST_CHUNK_NS] = str(duration)
    return dataclasses.replace(call, duration_ns=duration, attributes=attributes)
