"""OTLP trace requests in (protobuf or JSON), flat span rows out.

Invalid spans are dropped one by one and counted, so one bad span never costs the whole batch;
the count and the reasons go back to the sender as OTLP ``partial_success``. Repairable input is
kept with a warning in the same field (``rejected_spans`` 0): strings that are not UTF-8 get U+FFFD,
oversized attribute values are cut with a marker, events beyond the per-span limit are dropped.
Message content is dropped from spans and events unless the collector is told to store it
(:mod:`.conventions.content`).
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
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
from latencylens_collector.intake.utf8 import parse_repairing, raw_values_request_class
from latencylens_collector.settings import Settings

_json_string: Final = json.encoder.encode_basestring_ascii
"""How :func:`json.dumps` writes a string (ASCII-escaped), as a C function."""
AttributeReader = Callable[[Iterable[Any]], dict[str, str]]
"""Repeated ``KeyValue`` → attributes as text."""
UNKNOWN_SERVICE: Final = "unknown_service"
_SPAN_KINDS: Final = {
    Span.SPAN_KIND_UNSPECIFIED: "unspecified",
    Span.SPAN_KIND_INTERNAL: "internal",
    Span.SPAN_KIND_SERVER: "server",
    Span.SPAN_KIND_CLIENT: "client",
    Span.SPAN_KIND_PRODUCER: "producer",
    Span.SPAN_KIND_CONSUMER: "consumer",
}
_ID_FIELDS: Final = ("traceId", "spanId", "parentSpanId")
_TIME_FIELDS: Final = ("startTimeUnixNano", "endTimeUnixNano")
_EVENT_TIME_FIELDS: Final = ("timeUnixNano",)
_JSON_SURROGATE = re.compile(rb"\\u[dD][89abAB]")

HOUR_NS: Final = 3600 * 1_000_000_000
FUTURE_LIMIT_NS: Final = 24 * HOUR_NS
"""Spans starting or ending further than this ahead of the collector's clock are rejected."""
DEFAULT_MAX_ATTRIBUTE_BYTES: Final = 64 * 1024
TRUNCATION_MARKER: Final = "…[truncated {dropped} bytes]"
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
}
# Warnings: the span is kept, changed.
NOT_UTF8: Final = "strings with invalid UTF-8 (bytes replaced by U+FFFD)"
TRUNCATED: Final = "values truncated to the attribute size limit"
EVENTS_DROPPED: Final = f"span events beyond {MAX_EVENTS_PER_SPAN} per span dropped"
EVENT_ATTRIBUTES_DROPPED: Final = f"event attributes beyond {MAX_EVENT_ATTRIBUTES} per event dropped"


class OtlpDecodeError(ValueError):
    """The body is not a valid OTLP trace export request; the message says why."""


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

    @property
    def error_message(self) -> str:
        parts = []
        if self.rejected:
            why = ", ".join(f"{count} {reason}" for reason, count in self.reasons.most_common())
            total = self.rejected + len(self.spans)
            parts.append(f"rejected {self.rejected} of {total} spans: {why}")
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

    @classmethod
    def of(cls, settings: Settings, now_ns: int | None = None) -> Limits:
        """The limits the service's settings give, at ``now_ns`` on the collector's clock."""
        return cls(
            max_attribute_bytes=settings.max_attribute_bytes,
            now_ns=now_ns,
            store_content=settings.store_content,
            max_content_bytes=settings.content_max_bytes,
        )

    @property
    def content_policy(self) -> ContentPolicy:
        return ContentPolicy(store=self.store_content, max_bytes=self.max_content_bytes)


def decode(
    body: bytes, as_json: bool, project: str = DEFAULT_PROJECT, limits: Limits | None = None
) -> DecodedBatch:
    """Body of an export request to span rows (raises :class:`OtlpDecodeError`).

    Protobuf takes the fast path first (attribute values as encoded bytes, see
    :func:`raw_attributes_to_dict`); a body it cannot take (invalid UTF-8 anywhere, not protobuf)
    goes through the strict parse, which repairs or reports it."""
    warnings: Counter[str] = Counter()
    if not as_json:
        fast = _parse_raw_values(body)
        if fast is not None:
            try:
                return flatten(
                    fast, project=project, limits=limits, warnings=warnings, to_text=raw_attributes_to_dict
                )
            except _InvalidValue:
                pass
    request = parse_json(body, warnings) if as_json else parse_protobuf(body, warnings)
    return flatten(request, project=project, limits=limits, warnings=warnings)


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
    """Strict parse first; when that fails, a parse that repairs non-UTF-8 strings (noted in
    ``warnings``) before giving up on the body."""
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


def parse_json(body: bytes, warnings: Counter[str] | None = None) -> ExportTraceServiceRequest:
    """OTLP/JSON: ids are hex strings (not protobuf-JSON base64), so they are converted first.

    Bytes that are not UTF-8 and escaped lone surrogates become U+FFFD (noted in ``warnings``);
    negative times become 0 so that span alone is rejected."""
    notes: Counter[str] = Counter() if warnings is None else warnings
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = body.decode("utf-8", errors="replace")
        notes[NOT_UTF8] += text.count("\ufffd") - body.count("\ufffd".encode())
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OtlpDecodeError(f"body is not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise OtlpDecodeError("body must be a JSON object with a 'resourceSpans' array")
    if _JSON_SURROGATE.search(body):
        document, repaired = _without_lone_surrogates(document)
        if repaired:
            notes[NOT_UTF8] += repaired
    for span in _json_spans(document):
        _hex_ids_to_base64(span)
        _negative_times_to_zero(span, _TIME_FIELDS)
        for event in _dicts(span.get("events")):
            _negative_times_to_zero(event, _EVENT_TIME_FIELDS)
        for link in span.get("links") or ():
            if isinstance(link, dict):
                _hex_ids_to_base64(link)
    request = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise OtlpDecodeError(f"JSON is not an OTLP ExportTraceServiceRequest: {exc}") from exc
    return request


def _json_spans(document: dict[str, Any]) -> Iterable[dict[str, Any]]:
    for resource_spans in _dicts(document.get("resourceSpans")):
        for scope_spans in _dicts(resource_spans.get("scopeSpans")):
            yield from _dicts(scope_spans.get("spans"))


def _dicts(value: Any) -> Iterable[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _negative_times_to_zero(span: dict[str, Any], keys: tuple[str, ...]) -> None:
    """A time before 1970 cannot be a fixed64; 0 makes :func:`invalid_reason` reject the span (an
    event at 0 is kept: its span may be valid)."""
    for key in keys:
        value = span.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            try:
                negative = int(value) < 0
            except ValueError:
                continue  # not a number: json_format reports it
            if negative:
                span[key] = "0"


def _without_lone_surrogates(value: Any) -> tuple[Any, int]:
    """The JSON value with unpaired surrogates (``"\\ud800"``) replaced by U+FFFD, and how many
    strings changed; ClickHouse and protobuf need real UTF-8."""
    if isinstance(value, str):
        fixed = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return fixed, int(fixed != value)
    if isinstance(value, list):
        pairs = [_without_lone_surrogates(item) for item in value]
        return [item for item, _ in pairs], sum(n for _, n in pairs)
    if isinstance(value, dict):
        out, total = {}, 0
        for key, item in value.items():
            fixed_key, n_key = _without_lone_surrogates(key)
            out[fixed_key], n = _without_lone_surrogates(item)
            total += n + n_key
        return out, total
    return value, 0


def _hex_ids_to_base64(obj: dict[str, Any]) -> None:
    """Replace hex ids by base64; an id that is not hex becomes empty so its span is rejected."""
    for key in _ID_FIELDS:
        value = obj.get(key)
        if not isinstance(value, str):
            continue
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raw = b"\x00"  # wrong length on purpose: the span is rejected as having an invalid id
        obj[key] = base64.b64encode(raw).decode("ascii")


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
    to_text = to_text or attributes_to_dict
    limits = limits or Limits()
    now_ns = limits.now_ns if limits.now_ns is not None else time.time_ns()
    batch = DecodedBatch(warnings=Counter(warnings or {}))
    clip = _Clipper(limits.max_attribute_bytes, batch.warnings)
    content = ContentFilter(limits.content_policy, cut_utf8)
    batch.content = content.tally
    for resource_spans in request.resource_spans:
        resource = clip.mapping(to_text(resource_spans.resource.attributes))
        service = resource.get(SERVICE_NAME) or UNKNOWN_SERVICE
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                reason = invalid_reason(span, now_ns + limits.future_limit_ns)
                if reason:
                    batch.rejected += 1
                    batch.reasons[reason] += 1
                    continue
                batch.spans.append(span_row(span, service, resource, project, clip, to_text, content))
    return batch


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
) -> SpanRow:
    """One valid span as a row: content dropped (or cut), values clipped, events bounded."""
    clip = clip or _Clipper(DEFAULT_MAX_ATTRIBUTE_BYTES, Counter())
    to_text = to_text or attributes_to_dict
    content = content or ContentFilter(ContentPolicy(), cut_utf8)
    attributes = clip.mapping(content.attributes(to_text(span.attributes)))
    parent = span.parent_span_id or NO_PARENT
    events: tuple[SpanEvent, ...] = ()
    if span.events:
        # Stream times from every event the sender sent, before the per-span limit applies.
        timeline = ((event.name, event.time_unix_nano, None) for event in span.events)
        start, end = span.start_time_unix_nano, span.end_time_unix_nano
        attributes.update(stream_attributes(timeline, start, end, span.dropped_events_count))
        events = _events(span.events, clip, to_text, content)
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
        events=events,
        dropped_events_count=span.dropped_events_count,
    )


def _events(
    events: Any, clip: _Clipper, to_text: AttributeReader, content: ContentFilter
) -> tuple[SpanEvent, ...]:
    """A span's events within the limits: the first 127 and the last when there are more than 128
    (counted in the warnings), each with at most 128 attributes, content dropped, values clipped."""
    if len(events) > MAX_EVENTS_PER_SPAN:
        clip.warnings[EVENTS_DROPPED] += len(events) - MAX_EVENTS_PER_SPAN
        events = [*events[: MAX_EVENTS_PER_SPAN - 1], events[-1]]
    out = []
    for event in events:
        name = clip.text(event.name)
        attributes = event.attributes
        if len(attributes) > MAX_EVENT_ATTRIBUTES:
            clip.warnings[EVENT_ATTRIBUTES_DROPPED] += len(attributes) - MAX_EVENT_ATTRIBUTES
            attributes = attributes[:MAX_EVENT_ATTRIBUTES]
        values = clip.mapping(content.event(name, to_text(attributes))) if attributes else {}
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


def truncate_utf8(value: str, limit: int) -> str:
    """``value`` cut to at most ``limit`` UTF-8 bytes plus a marker; ``value`` itself when short."""
    return cut_utf8(value, limit)[0]


def cut_utf8(value: str, limit: int) -> tuple[str, int]:
    """:func:`truncate_utf8` and how many bytes it dropped (0: ``value`` itself)."""
    data = value.encode("utf-8")
    if len(data) <= limit:
        return value, 0
    kept = data[:limit].decode("utf-8", errors="ignore")  # drops a character cut in half
    dropped = len(data) - len(kept.encode("utf-8"))
    return kept + TRUNCATION_MARKER.format(dropped=dropped), dropped


def attributes_to_dict(attributes: Iterable[KeyValue]) -> dict[str, str]:
    """Attributes as text; the common types (string, int, bool, array of strings) are converted
    inline, without a call per value."""
    out: dict[str, str] = {}
    for kv in attributes:
        value = kv.value
        which = value.WhichOneof("value")
        if which == "string_value":
            out[kv.key] = value.string_value
        elif which == "int_value":
            out[kv.key] = str(value.int_value)
        elif which == "bool_value":
            out[kv.key] = "true" if value.bool_value else "false"
        elif which == "array_value":
            out[kv.key] = _array_to_str(value)
        else:
            out[kv.key] = any_value_to_str(value)
    return out


def _array_to_str(value: AnyValue) -> str:
    """An array as compact JSON; an array of strings (the usual kind) without building a list for
    :func:`json.dumps` (same text: ``["a","b"]``)."""
    items = value.array_value.values
    if all(item.WhichOneof("value") == "string_value" for item in items):
        return "[" + ",".join([_json_string(item.string_value) for item in items]) + "]"
    return any_value_to_str(value)


class _InvalidValue(Exception):
    """An encoded attribute value that is not a valid ``AnyValue`` (e.g. invalid UTF-8)."""


_VALUE_TEXTS: dict[bytes, str] = {}
"""Encoded ``AnyValue`` → text, for short values: model names, operations, flags and counts recur
across spans and exports. Cleared when full, so it stays small (at most a few MB)."""
_CACHED_VALUE_BYTES: Final = 256
_CACHED_VALUES: Final = 8192


def raw_attributes_to_dict(attributes: Iterable[Any]) -> dict[str, str]:
    """Attributes whose values are encoded ``AnyValue`` bytes (:func:`raw_values_request_class`)
    as text, identical to :func:`attributes_to_dict`: a value seen before costs one dict lookup.
    Raises :class:`_InvalidValue` for a value the strict parse must handle."""
    out: dict[str, str] = {}
    texts = _VALUE_TEXTS
    for kv in attributes:
        raw = kv.value
        text = texts.get(raw)
        if text is None:
            text = _raw_value_text(raw)
            if len(raw) <= _CACHED_VALUE_BYTES:
                if len(texts) >= _CACHED_VALUES:
                    texts.clear()
                texts[raw] = text
        out[kv.key] = text
    return out


def _raw_value_text(raw: bytes) -> str:
    value = AnyValue()
    try:
        value.ParseFromString(raw)
    except (DecodeError, ValueError) as exc:
        raise _InvalidValue(str(exc)) from exc
    return value_to_str(value)


def value_to_str(value: AnyValue) -> str:
    """One attribute value as text, as :func:`attributes_to_dict` writes it."""
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value
    if which == "int_value":
        return str(value.int_value)
    if which == "bool_value":
        return "true" if value.bool_value else "false"
    if which == "array_value":
        return _array_to_str(value)
    return any_value_to_str(value)


def any_value_to_str(value: AnyValue) -> str:
    """Scalars as text (bools as ``true``/``false``), arrays and maps as JSON."""
    plain = _plain(value)
    if isinstance(plain, str):
        return plain
    if isinstance(plain, bool):
        return "true" if plain else "false"
    if isinstance(plain, (int, float)):
        return repr(plain)
    return json.dumps(plain, separators=(",", ":"))


def _plain(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return ""
    if which == "array_value":
        return [_plain(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _plain(kv.value) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, which)


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
