"""OTLP trace requests in (protobuf or JSON), flat span rows out.

Invalid spans are dropped one by one and counted, so one bad span never costs the whole batch;
the count and the reasons go back to the sender as OTLP ``partial_success``. A span is invalid for
what it says (ids, times) or for how it is written: a protobuf span that does not parse, a JSON
span with fields of the wrong type (both read apart from their neighbours: :mod:`.utf8`,
:mod:`.otlp_json`). Repairable input is kept with a warning in the same field (``rejected_spans``
0): strings that are not UTF-8 get U+FFFD, oversized attribute values are cut with a marker,
values nested too deep are cut (:mod:`.values`), a span over the per-span byte budget has its
largest values cut (:mod:`.sizes`), events beyond the per-span limit are dropped. Message content
is dropped from spans and events unless the collector is told to store it
(:mod:`.conventions.content`). Only a body whose frame is not an export request is refused whole
(:class:`OtlpDecodeError`, 400); no body makes the decoder raise anything else.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.resources import SERVICE_NAME

from latencylens_collector.analysis.conventions import classify
from latencylens_collector.analysis.conventions.content import (
    DEFAULT_CONTENT_MAX_BYTES,
    ContentFilter,
    ContentPolicy,
    ContentTally,
)
from latencylens_collector.analysis.conventions.events import stream_attributes
from latencylens_collector.analysis.records import DEFAULT_PROJECT, NO_PARENT, SpanEvent, SpanRow
from latencylens_collector.intake import otlp_json, sizes
from latencylens_collector.intake.errors import MALFORMED_RESOURCE, MALFORMED_SPAN, OtlpDecodeError
from latencylens_collector.intake.sizes import TRUNCATION_MARKER, cut_utf8, truncate_utf8
from latencylens_collector.intake.utf8 import (
    SpanGroup,
    parse_apart,
    parse_repairing,
    raw_values_request_class,
)
from latencylens_collector.intake.values import (
    NOT_UTF8,
    TOO_DEEP,
    AttributeReader,
    MalformedValue,
    ValueProblem,
    any_value_to_str,
    attributes_to_dict,
    careful_reader,
    raw_attributes_to_dict,
    value_to_str,
)
from latencylens_collector.settings import Settings

__all__ = [  # its own public names, and the helpers other modules read through it
    "AT_EPOCH",
    "DEFAULT_MAX_ATTRIBUTE_BYTES",
    "DEFAULT_MAX_SPAN_BYTES",
    "ENDS_BEFORE_START",
    "EVENTS_DROPPED",
    "EVENT_ATTRIBUTES_DROPPED",
    "FUTURE_LIMIT_NS",
    "HOUR_NS",
    "INVALID_PARENT_ID",
    "INVALID_SPAN_ID",
    "INVALID_TRACE_ID",
    "IN_FUTURE",
    "MAX_EVENTS_PER_SPAN",
    "MAX_EVENT_ATTRIBUTES",
    "MAX_RESOURCE_BYTES",
    "NOT_UTF8",
    "OVER_SPAN_BUDGET",
    "REASON_CODES",
    "TOO_DEEP",
    "TRUNCATED",
    "TRUNCATION_MARKER",
    "UNKNOWN_SERVICE",
    "DecodedBatch",
    "Limits",
    "OtlpDecodeError",
    "any_value_to_str",
    "attributes_to_dict",
    "cut_utf8",
    "decode",
    "encode_response",
    "encode_status",
    "export_response",
    "flatten",
    "invalid_reason",
    "parse_json",
    "parse_protobuf",
    "raw_attributes_to_dict",
    "span_row",
    "truncate_utf8",
    "value_to_str",
]

UNKNOWN_SERVICE: Final = "unknown_service"
_SPAN_KINDS: Final = {
    Span.SPAN_KIND_UNSPECIFIED: "unspecified",
    Span.SPAN_KIND_INTERNAL: "internal",
    Span.SPAN_KIND_SERVER: "server",
    Span.SPAN_KIND_CLIENT: "client",
    Span.SPAN_KIND_PRODUCER: "producer",
    Span.SPAN_KIND_CONSUMER: "consumer",
}

HOUR_NS: Final = 3600 * 1_000_000_000
FUTURE_LIMIT_NS: Final = 24 * HOUR_NS
"""Spans starting or ending further than this ahead of the collector's clock are rejected."""
DEFAULT_MAX_ATTRIBUTE_BYTES: Final = 64 * 1024
DEFAULT_MAX_SPAN_BYTES: Final = 1024 * 1024
MAX_RESOURCE_BYTES: Final = 64 * 1024
"""A resource's attributes are cut to this budget like a span's (at most ``max_span_bytes``): every
span of the resource is stored with them."""
MAX_EVENTS_PER_SPAN: Final = 128
"""Events kept per span: the first 127 and the last (a stream's first and last chunk survive)."""
MAX_EVENT_ATTRIBUTES: Final = 128
"""Attributes kept per event (the first ones), as OpenTelemetry SDKs limit them by default."""

# Why a span was rejected: message text → short code (the metrics' ``reason`` label).
INVALID_TRACE_ID: Final = "with an invalid trace id"
INVALID_SPAN_ID: Final = "with an invalid span id"
INVALID_PARENT_ID: Final = "with an invalid parent span id"
ENDS_BEFORE_START: Final = "ending before they start"
AT_EPOCH: Final = "starting at or before the Unix epoch (start time 0 or negative)"
IN_FUTURE: Final = "with timestamps more than 24 h in the future"
REASON_CODES: Final = {
    INVALID_TRACE_ID: "invalid_trace_id",
    INVALID_SPAN_ID: "invalid_span_id",
    INVALID_PARENT_ID: "invalid_parent_span_id",
    ENDS_BEFORE_START: "end_before_start",
    AT_EPOCH: "time_before_epoch",
    IN_FUTURE: "time_in_future",
    MALFORMED_SPAN: "malformed_span",
    MALFORMED_RESOURCE: "malformed_resource",
}
# Warnings: the span is kept, changed (NOT_UTF8 and TOO_DEEP come from .values).
OVER_SPAN_BUDGET: Final = "spans over the per-span byte budget kept with their largest values cut"
TRUNCATED: Final = "values truncated to the attribute size limit"
EVENTS_DROPPED: Final = f"span events beyond {MAX_EVENTS_PER_SPAN} per span dropped"
EVENT_ATTRIBUTES_DROPPED: Final = f"event attributes beyond {MAX_EVENT_ATTRIBUTES} per event dropped"


@dataclass
class DecodedBatch:
    """Valid spans of one export request, plus what was rejected and why."""

    spans: list[SpanRow] = field(default_factory=list)
    rejected: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    warnings: Counter[str] = field(default_factory=Counter)
    """What was repaired in kept spans, with counts."""
    content: ContentTally = field(default_factory=ContentTally)
    """Message content removed from the kept spans and their events (policy, not a repair)."""
    detail: str = ""
    """What the parser said about the first span it could not read, for the sender."""

    @property
    def error_message(self) -> str:
        parts = []
        if self.rejected:
            why = ", ".join(f"{count} {reason}" for reason, count in self.reasons.most_common())
            total = self.rejected + len(self.spans)
            parts.append(f"rejected {self.rejected} of {total} spans: {why}")
            if self.detail:
                parts[-1] += f" (first: {self.detail})"
        if self.warnings:
            what = ", ".join(f"{count} {warning}" for warning, count in self.warnings.most_common())
            parts.append(f"kept with changes: {what}")
        return "; ".join(parts)


@dataclass(frozen=True)
class Limits:
    """What the decoder accepts; ``now_ns`` is the collector's clock for the far-future check."""

    max_attribute_bytes: int = DEFAULT_MAX_ATTRIBUTE_BYTES
    future_limit_ns: int = FUTURE_LIMIT_NS
    now_ns: int | None = None
    store_content: bool = False
    """Keep message content (opt-in); otherwise it is dropped, its size kept."""
    max_content_bytes: int = DEFAULT_CONTENT_MAX_BYTES
    """With ``store_content``, each content value is cut to this many UTF-8 bytes."""
    max_span_bytes: int = DEFAULT_MAX_SPAN_BYTES
    """A span's attributes and its events' attributes together (UTF-8 bytes of keys and values)."""

    @classmethod
    def of(cls, settings: Settings, now_ns: int | None = None) -> Limits:
        """The limits the service's settings give, at ``now_ns`` on the collector's clock."""
        return cls(
            max_attribute_bytes=settings.max_attribute_bytes,
            now_ns=now_ns,
            store_content=settings.store_content,
            max_content_bytes=settings.content_max_bytes,
            max_span_bytes=settings.max_span_bytes,
        )

    @property
    def content_policy(self) -> ContentPolicy:
        return ContentPolicy(store=self.store_content, max_bytes=self.max_content_bytes)


def decode(
    body: bytes, as_json: bool, project: str = DEFAULT_PROJECT, limits: Limits | None = None
) -> DecodedBatch:
    """Body of an export request to span rows; raises :class:`OtlpDecodeError` and nothing else.

    Protobuf takes the fast path first (attribute values as encoded bytes, see
    :func:`raw_attributes_to_dict`); a body that does not parse whole (invalid UTF-8, a malformed
    span) is read resource by resource and span by span (:func:`.utf8.parse_apart`)."""
    warnings: Counter[str] = Counter()
    try:
        if as_json:
            rejected: Counter[str] = Counter()
            request, detail = otlp_json.parse(body, warnings, rejected)
            return _flatten(_groups(request), project, limits, warnings, None, rejected, detail)
        fast = _parse_raw_values(body)
        if fast is not None:
            return _flatten(_groups(fast), project, limits, warnings, raw_attributes_to_dict)
        try:
            groups = parse_apart(body, warnings)
        except (DecodeError, ValueError) as exc:
            raise OtlpDecodeError(f"body is not a protobuf ExportTraceServiceRequest: {exc}") from None
        return _flatten(groups, project, limits, warnings, raw_attributes_to_dict)
    except RecursionError:  # a backstop: every reader bounds its depth
        raise OtlpDecodeError("body is nested too deeply to be an OTLP export request") from None


def _parse_raw_values(body: bytes) -> Any:
    """The request with attribute values left encoded, or None when it does not parse so."""
    request = raw_values_request_class()()
    try:
        request.ParseFromString(body)
    except (DecodeError, ValueError):
        return None
    return request


# --- decoding ------------------------------------------------------------------------------------
def parse_protobuf(body: bytes, warnings: Counter[str] | None = None) -> ExportTraceServiceRequest:
    """The request as official messages: strict parse first; when that fails, a parse that repairs
    non-UTF-8 strings (noted in ``warnings``) before giving up on the body. (The receivers use
    :func:`decode`, which also keeps the valid spans of a body holding a malformed one.)"""
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
        return request
    except (DecodeError, ValueError) as exc:
        strict_error = exc
    try:
        request, repaired = parse_repairing(body)
    except (DecodeError, ValueError):
        raise OtlpDecodeError(f"body is not a protobuf ExportTraceServiceRequest: {strict_error}") from None
    if warnings is not None and repaired:
        warnings[NOT_UTF8] += repaired
    return request


def parse_json(
    body: bytes, warnings: Counter[str] | None = None, rejected: Counter[str] | None = None
) -> ExportTraceServiceRequest:
    """OTLP/JSON (hex ids) to the request of every span that parses (:mod:`.otlp_json`); spans
    that do not are counted in ``rejected`` by reason, repairs in ``warnings``."""
    request, _ = otlp_json.parse(
        body, Counter() if warnings is None else warnings, Counter() if rejected is None else rejected
    )
    return request


# --- flattening ----------------------------------------------------------------------------------
def flatten(
    request: ExportTraceServiceRequest,
    project: str = DEFAULT_PROJECT,
    limits: Limits | None = None,
    warnings: Counter[str] | None = None,
    to_text: AttributeReader | None = None,
) -> DecodedBatch:
    """Valid spans as rows; invalid ones counted with their reason, repairs with a warning.

    ``to_text`` reads a repeated ``KeyValue`` (default :func:`attributes_to_dict`)."""
    return _flatten(_groups(request), project, limits, warnings, to_text)


def _groups(request: Any) -> Iterable[SpanGroup]:
    for resource_spans in request.resource_spans:
        spans = (span for scope in resource_spans.scope_spans for span in scope.spans)
        yield SpanGroup(resource_spans.resource, spans)


def _flatten(
    groups: Iterable[SpanGroup],
    project: str,
    limits: Limits | None,
    warnings: Counter[str] | None,
    to_text: AttributeReader | None,
    rejected: Counter[str] | None = None,
    detail: str = "",
) -> DecodedBatch:
    """``to_text`` is a fast reader; a span (or resource) it cannot read is read again with the
    careful reader (:mod:`.values`), and one that reader cannot read either is rejected."""
    fast = to_text or attributes_to_dict
    limits = limits or Limits()
    now_ns = limits.now_ns if limits.now_ns is not None else time.time_ns()
    latest_ns = now_ns + limits.future_limit_ns
    batch = DecodedBatch(warnings=Counter(warnings or {}), detail=detail)
    for why, count in (rejected or {}).items():
        _reject(batch, why, count)
    clip = _Clipper(limits.max_attribute_bytes, batch.warnings)
    careful = careful_reader(batch.warnings, raw_values=fast is raw_attributes_to_dict)
    content = ContentFilter(limits.content_policy, cut_utf8)
    batch.content = content.tally
    span_budget = limits.max_span_bytes
    for group in groups:
        if group.malformed:
            _reject(batch, MALFORMED_SPAN, group.malformed)
        resource = _resource(group.resource, fast, careful, clip, min(span_budget, MAX_RESOURCE_BYTES))
        if resource is None:
            _reject(batch, MALFORMED_RESOURCE, sum(1 for _ in group.spans))
            continue
        service = resource.get(SERVICE_NAME) or UNKNOWN_SERVICE
        for span in group.spans:
            reason = invalid_reason(span, latest_ns)
            if reason:
                _reject(batch, reason)
                continue
            try:
                try:
                    row = span_row(span, service, resource, project, clip, fast, content, span_budget)
                except ValueProblem:
                    row = span_row(span, service, resource, project, clip, careful, content, span_budget)
            except MalformedValue:
                _reject(batch, MALFORMED_SPAN)
                continue
            batch.spans.append(row)
    return batch


def _reject(batch: DecodedBatch, reason: str, count: int = 1) -> None:
    batch.rejected += count
    batch.reasons[reason] += count


def _resource(
    resource: Any, fast: AttributeReader, careful: AttributeReader, clip: _Clipper, budget: int
) -> dict[str, str] | None:
    """A resource's attributes as text, clipped and within ``budget``; None when unreadable."""
    if resource is None:
        return None
    try:
        try:
            attributes = fast(resource.attributes)
        except ValueProblem:
            attributes = careful(resource.attributes)
    except MalformedValue:
        return None
    attributes = clip.mapping(attributes)
    fitted = sizes.fit(attributes, (), budget)
    if fitted is None:
        return attributes
    clip.warnings[OVER_SPAN_BUDGET] += 1
    return fitted.attributes


def invalid_reason(span: Span, latest_ns: int | None = None) -> str | None:
    """Why a span cannot be stored, or None when it can. ``latest_ns``: the latest acceptable time
    (default: 24 h from now)."""
    if len(span.trace_id) != 16 or span.trace_id == bytes(16):
        return INVALID_TRACE_ID
    if len(span.span_id) != 8 or span.span_id == NO_PARENT:
        return INVALID_SPAN_ID
    if span.parent_span_id and len(span.parent_span_id) != 8:
        return INVALID_PARENT_ID
    if span.start_time_unix_nano == 0:
        return AT_EPOCH
    latest = latest_ns if latest_ns is not None else time.time_ns() + FUTURE_LIMIT_NS
    if max(span.start_time_unix_nano, span.end_time_unix_nano) > latest:
        return IN_FUTURE
    if span.end_time_unix_nano < span.start_time_unix_nano:
        return ENDS_BEFORE_START
    return None


def span_row(
    span: Span,
    service: str,
    resource: dict[str, str],
    project: str,
    clip: _Clipper | None = None,
    to_text: AttributeReader | None = None,
    content: ContentFilter | None = None,
    max_span_bytes: int = DEFAULT_MAX_SPAN_BYTES,
) -> SpanRow:
    """One valid span as a row: content dropped (or cut), values clipped, events bounded, the whole
    within the per-span budget. Every value is read before anything is counted, so a reader that
    raises (:class:`ValueProblem`, :class:`MalformedValue`) leaves no trace in the tallies."""
    clip = clip or _Clipper(DEFAULT_MAX_ATTRIBUTE_BYTES, Counter())
    to_text = to_text or attributes_to_dict
    content = content or ContentFilter(ContentPolicy(), cut_utf8)
    texts = to_text(span.attributes)
    events = span.events
    if events:
        kept: Sequence[Any] = events
        if len(events) > MAX_EVENTS_PER_SPAN:
            kept = [*events[: MAX_EVENTS_PER_SPAN - 1], events[-1]]
        event_texts = [to_text(event.attributes[:MAX_EVENT_ATTRIBUTES]) for event in kept]
    attributes = clip.mapping(content.attributes(texts))
    parent = span.parent_span_id or NO_PARENT
    rows_events: tuple[SpanEvent, ...] = ()
    if events:
        # Stream times from every event the sender sent, before the per-span limit applies.
        timeline = ((event.name, event.time_unix_nano, None) for event in events)
        start, end = span.start_time_unix_nano, span.end_time_unix_nano
        attributes.update(stream_attributes(timeline, start, end, span.dropped_events_count))
        rows_events = _events(events, kept, event_texts, clip, content)
    if rows_events or (sum(map(len, attributes)) + sum(map(len, attributes.values()))) * 4 > max_span_bytes:
        fitted = sizes.fit(attributes, rows_events, max_span_bytes)  # it measures exactly
        if fitted is not None:
            clip.warnings[OVER_SPAN_BUDGET] += 1
            attributes, rows_events = fitted.attributes, fitted.events
    return SpanRow(
        project=project,
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_span_id=parent,
        service=service,
        name=clip.text(span.name),
        span_kind=_SPAN_KINDS.get(span.kind, "unspecified"),
        kind=classify(attributes, has_parent=parent != NO_PARENT),
        start_ns=span.start_time_unix_nano,
        duration_ns=span.end_time_unix_nano - span.start_time_unix_nano,
        status_code=int(span.status.code),
        status_message=clip.text(span.status.message),
        attributes=attributes,
        resource_attributes=resource,
        events=rows_events,
        dropped_events_count=span.dropped_events_count,
    )


def _events(
    events: Sequence[Any],
    kept: Sequence[Any],
    texts: list[dict[str, str]],
    clip: _Clipper,
    content: ContentFilter,
) -> tuple[SpanEvent, ...]:
    """A span's events within the limits: the first 127 and the last when there are more than 128
    (counted in the warnings), each with at most 128 attributes, content dropped, values clipped.
    ``kept`` are those events and ``texts`` their attributes, already read."""
    if len(events) > len(kept):
        clip.warnings[EVENTS_DROPPED] += len(events) - len(kept)
    out = []
    for event, values in zip(kept, texts, strict=True):
        name = clip.text(event.name)
        if len(event.attributes) > MAX_EVENT_ATTRIBUTES:
            clip.warnings[EVENT_ATTRIBUTES_DROPPED] += len(event.attributes) - MAX_EVENT_ATTRIBUTES
        values = clip.mapping(content.event(name, values)) if values else {}
        out.append(SpanEvent(name, event.time_unix_nano, values))
    return tuple(out)


class _Clipper:
    """Cuts texts over ``limit`` UTF-8 bytes (on a character boundary) and appends a marker saying
    how many bytes were dropped; counts the cuts in ``warnings``."""

    def __init__(self, limit: int, warnings: Counter[str]) -> None:
        self.limit, self.warnings = limit, warnings

    def text(self, value: str) -> str:
        if len(value) * 4 <= self.limit:  # cannot be over the limit: skip encoding
            return value
        clipped = truncate_utf8(value, self.limit)
        if clipped is not value:
            self.warnings[TRUNCATED] += 1
        return clipped

    def mapping(self, values: dict[str, str]) -> dict[str, str]:
        """``values`` itself when nothing in it can be over the limit (the common case: one C-level
        pass over the lengths instead of two method calls per attribute)."""
        if not values or max(max(map(len, values)), max(map(len, values.values()))) * 4 <= self.limit:
            return values
        return {self.text(key): self.text(value) for key, value in values.items()}


# --- responses -----------------------------------------------------------------------------------
def encode_response(batch: DecodedBatch, as_json: bool) -> bytes:
    """ExportTraceServiceResponse, with ``partial_success`` only when spans were rejected or changed."""
    return _encode(export_response(batch), as_json)


def export_response(batch: DecodedBatch) -> ExportTraceServiceResponse:
    """``partial_success`` when spans were rejected (or kept with changes, ``rejected_spans`` 0)."""
    response = ExportTraceServiceResponse()
    if batch.rejected or batch.warnings:
        response.partial_success.rejected_spans = batch.rejected
        response.partial_success.error_message = batch.error_message
    return response


def encode_status(code: int, message: str, as_json: bool) -> bytes:
    """An OTLP error body: a ``google.rpc.Status``."""
    return _encode(status_pb2.Status(code=code, message=message), as_json)


def _encode(message: Any, as_json: bool) -> bytes:
    if as_json:
        return json.dumps(json_format.MessageToDict(message)).encode()
    data: bytes = message.SerializeToString()
    return data
