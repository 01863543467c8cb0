"""Decode OTLP protobuf whose strings are not valid UTF-8, or whose spans are not all valid, keeping
what can be kept instead of losing the batch.

Protobuf runtimes refuse a whole message when one ``string`` field holds invalid UTF-8, or when one
span inside it is malformed, which would cost every span of the export. The decoder works with
copies of the OTLP schema (private descriptor pools) that differ from it in a few field types:

* :func:`raw_values_class`: an attribute's ``AnyValue`` is left as its encoded bytes, so the
  collector turns each distinct encoding into text once (the fast path, see ``values``);
* :func:`parse_apart` (the fallback when the body does not parse whole): a resource and each span
  are bytes inside an envelope whose strings are bytes too, so each is parsed on its own; one that
  does not parse is parsed again with strings as bytes, its invalid UTF-8 replaced by U+FFFD and
  re-parsed, and one that still does not is left out and counted, its neighbours kept;
* :func:`parse_repairing`: the whole request with strings repaired (official message classes).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from latencylens_collector.intake.values import NOT_UTF8

_SCHEMA_MODULES = (common_pb2, resource_pb2, trace_pb2, trace_service_pb2)
"""In dependency order: each file only imports the ones before it."""
_REQUEST = "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"
_RESOURCE = "opentelemetry.proto.resource.v1.Resource"
_SPAN = "opentelemetry.proto.trace.v1.Span"


def parse_repairing(body: bytes) -> tuple[trace_service_pb2.ExportTraceServiceRequest, int]:
    """The request with invalid UTF-8 replaced by U+FFFD, and how many strings were repaired.

    Raises :class:`DecodeError` when the body is not a protobuf request even with strings as bytes.
    """
    lenient = _lenient_request_class()()
    lenient.ParseFromString(body)
    repaired = _repair(lenient, _string_fields())
    request = trace_service_pb2.ExportTraceServiceRequest()
    try:
        request.ParseFromString(lenient.SerializeToString())
    except DecodeError as exc:  # pragma: no cover - repaired strings are valid UTF-8
        raise DecodeError(f"could not repair strings: {exc}") from exc
    return request, repaired


def _repair(message: Message, string_fields: frozenset[str]) -> int:
    repaired = 0
    for field, value in message.ListFields():
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            for item in value if _is_repeated(field) else (value,):
                repaired += _repair(item, string_fields)
        elif field.full_name in string_fields:
            if _is_repeated(field):
                fixed = [_valid(raw) for raw in value]
                if fixed != list(value):
                    repaired += sum(a != b for a, b in zip(fixed, value, strict=True))
                    del value[:]
                    value.extend(fixed)
            else:
                text = _valid(value)
                if text != value:
                    repaired += 1
                    setattr(message, field.name, text)
    return repaired


def _valid(raw: bytes) -> bytes:
    return raw.decode("utf-8", errors="replace").encode("utf-8")


def _is_repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)


@cache
def _string_fields() -> frozenset[str]:
    """Full names of the ``string`` fields of the OTLP trace schema."""
    names: set[str] = set()
    for module in _SCHEMA_MODULES:
        for descriptor in module.DESCRIPTOR.message_types_by_name.values():
            names.update(_strings_of(descriptor))
    return frozenset(names)


def _strings_of(descriptor: Descriptor) -> set[str]:
    names = {f.full_name for f in descriptor.fields if f.type == FieldDescriptor.TYPE_STRING}
    for nested in descriptor.nested_types:
        names |= _strings_of(nested)
    return names


@dataclass
class SpanGroup:
    """The spans of one ``ResourceSpans`` read apart: messages of :func:`raw_values_class`."""

    resource: Any | None
    """The resource, or None when it is not a valid one (its spans are then rejected with it)."""
    spans: Iterable[Any]
    """Read once (a generator over a parsed request: its span objects are not all held at once)."""
    malformed: int = 0
    """Spans left out: their bytes are not a ``Span`` even with strings as bytes."""


def parse_apart(body: bytes, warnings: Counter[str]) -> list[SpanGroup]:
    """The request's resources and spans, each parsed on its own (see the module docstring).

    Repaired strings are counted in ``warnings``; raises :class:`DecodeError` when the body is not
    even an envelope of resources and spans."""
    envelope = _variant(True, True, True).request()()
    envelope.ParseFromString(body)
    groups = []
    for resource_spans in envelope.resource_spans:
        spans, malformed = [], 0
        for scope_spans in resource_spans.scope_spans:
            for data in scope_spans.spans:
                span = _part(data, _SPAN, warnings)
                if span is None:
                    malformed += 1
                else:
                    spans.append(span)
        groups.append(SpanGroup(_part(resource_spans.resource, _RESOURCE, warnings), spans, malformed))
    return groups


def _part(data: bytes, name: str, warnings: Counter[str]) -> Any | None:
    """A resource or span as a :func:`raw_values_class` message, its strings repaired if need be;
    None when its bytes are not that message at all."""
    strict = raw_values_class(name)
    try:
        return strict.FromString(data)
    except (DecodeError, ValueError):
        pass
    try:
        lenient = _variant(True, True, False).message(name).FromString(data)
        repaired = _repair(lenient, _string_fields())
        message = strict.FromString(lenient.SerializeToString())
    except (DecodeError, ValueError):
        return None
    if repaired:
        warnings[NOT_UTF8] += repaired
    return message


def raw_values_request_class() -> Any:
    """ExportTraceServiceRequest where ``KeyValue.value`` is ``bytes``: the encoded ``AnyValue``.
    Every other field, strings included, parses (and is checked) as usual."""
    return _variant(False, True, False).request()


def raw_values_class(name: str) -> Any:
    """The message class ``name`` (a full name) of the schema :func:`raw_values_request_class` uses."""
    return _variant(False, True, False).message(name)


def _lenient_request_class() -> Any:
    """ExportTraceServiceRequest where strings are bytes."""
    return _variant(True, False, False).request()


@dataclass(frozen=True)
class _Variant:
    pool: descriptor_pool.DescriptorPool

    def message(self, name: str) -> Any:
        return message_factory.GetMessageClass(self.pool.FindMessageTypeByName(name))

    def request(self) -> Any:
        return self.message(_REQUEST)


_SPLIT_FIELDS: Final = {("ResourceSpans", "resource"), ("ScopeSpans", "spans")}


@cache
def _variant(strings_as_bytes: bool, values_as_bytes: bool, split: bool) -> _Variant:
    """A private pool of the OTLP schema with strings, ``KeyValue.value`` and (``split``) the
    resource and spans of a request made ``bytes``."""
    pool = descriptor_pool.DescriptorPool()
    for module in _SCHEMA_MODULES:
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        for message in proto.message_type:
            _to_bytes(message, strings_as_bytes, values_as_bytes, split)
        pool.Add(proto)
    return _Variant(pool)


def _to_bytes(message: descriptor_pb2.DescriptorProto, strings: bool, values: bool, split: bool) -> None:
    for field_proto in message.field:
        name = (message.name, field_proto.name)
        if (
            (strings and field_proto.type == descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
            or (values and name == ("KeyValue", "value"))
            or (split and name in _SPLIT_FIELDS)
        ):
            field_proto.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
            field_proto.ClearField("type_name")
    for nested in message.nested_type:
        _to_bytes(nested, strings, values, split)
