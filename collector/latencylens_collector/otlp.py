"""OTLP/HTTP trace requests in (protobuf or JSON), flat span rows out.

Invalid spans are dropped one by one and counted, so one bad span never costs the whole batch;
the count and the reasons go back to the sender as OTLP ``partial_success``.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Iterable
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

from latencylens_collector.conventions import classify
from latencylens_collector.rows import DEFAULT_PROJECT, NO_PARENT, SpanRow

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


class OtlpDecodeError(ValueError):
    """The body is not a valid OTLP trace export request; the message says why."""


@dataclass
class DecodedBatch:
    """Valid spans of one export request, plus what was rejected and why."""

    spans: list[SpanRow] = field(default_factory=list)
    rejected: int = 0
    reasons: Counter[str] = field(default_factory=Counter)

    @property
    def error_message(self) -> str:
        if not self.rejected:
            return ""
        why = ", ".join(f"{count} {reason}" for reason, count in self.reasons.most_common())
        total = self.rejected + len(self.spans)
        return f"rejected {self.rejected} of {total} spans: {why}"


# --- decoding ------------------------------------------------------------------------------------
def parse_protobuf(body: bytes) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, ValueError) as exc:
        raise OtlpDecodeError(f"body is not a protobuf ExportTraceServiceRequest: {exc}") from exc
    return request


def parse_json(body: bytes) -> ExportTraceServiceRequest:
    """OTLP/JSON: ids are hex strings (not protobuf-JSON base64), so they are converted first."""
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OtlpDecodeError(f"body is not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise OtlpDecodeError("body must be a JSON object with a 'resourceSpans' array")
    for span in _json_spans(document):
        _hex_ids_to_base64(span)
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
def flatten(request: ExportTraceServiceRequest, project: str = DEFAULT_PROJECT) -> DecodedBatch:
    """Valid spans as rows; invalid ones counted with their reason."""
    batch = DecodedBatch()
    for resource_spans in request.resource_spans:
        resource = attributes_to_dict(resource_spans.resource.attributes)
        service = resource.get(SERVICE_NAME) or UNKNOWN_SERVICE
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                reason = invalid_reason(span)
                if reason:
                    batch.rejected += 1
                    batch.reasons[reason] += 1
                    continue
                batch.spans.append(span_row(span, service, resource, project))
    return batch


def invalid_reason(span: Span) -> str | None:
    """Why a span cannot be stored, or None when it can."""
    if len(span.trace_id) != 16 or span.trace_id == bytes(16):
        return "with an invalid trace id"
    if len(span.span_id) != 8 or span.span_id == NO_PARENT:
        return "with an invalid span id"
    if span.parent_span_id and len(span.parent_span_id) != 8:
        return "with an invalid parent span id"
    if span.end_time_unix_nano < span.start_time_unix_nano:
        return "ending before they start"
    return None


def span_row(span: Span, service: str, resource: dict[str, str], project: str) -> SpanRow:
    attributes = attributes_to_dict(span.attributes)
    parent = span.parent_span_id or NO_PARENT
    return SpanRow(
        project=project,
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_span_id=parent,
        service=service,
        name=span.name,
        span_kind=_SPAN_KINDS.get(span.kind, "unspecified"),
        kind=classify(attributes, has_parent=parent != NO_PARENT),
        start_ns=span.start_time_unix_nano,
        duration_ns=span.end_time_unix_nano - span.start_time_unix_nano,
        status_code=int(span.status.code),
        status_message=span.status.message,
        attributes=attributes,
        resource_attributes=resource,
    )


def attributes_to_dict(attributes: Iterable[KeyValue]) -> dict[str, str]:
    return {kv.key: any_value_to_str(kv.value) for kv in attributes}


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
    """ExportTraceServiceResponse, with ``partial_success`` only when spans were rejected."""
    response = ExportTraceServiceResponse()
    if batch.rejected:
        response.partial_success.rejected_spans = batch.rejected
        response.partial_success.error_message = batch.error_message
    return _encode(response, as_json)


def encode_status(code: int, message: str, as_json: bool) -> bytes:
    """An OTLP error body: a ``google.rpc.Status``."""
    return _encode(status_pb2.Status(code=code, message=message), as_json)


def _encode(message: Any, as_json: bool) -> bytes:
    if as_json:
        return json.dumps(json_format.MessageToDict(message)).encode()
    data: bytes = message.SerializeToString()
    return data
