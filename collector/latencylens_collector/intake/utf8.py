"""Decode OTLP protobuf whose strings are not valid UTF-8, repairing them instead of losing the batch.

Protobuf runtimes refuse a whole message when one ``string`` field holds invalid UTF-8, which would
cost every span of the export for one bad attribute. The fallback parses with a copy of the OTLP
schema in which every ``string`` is ``bytes``, replaces invalid sequences by U+FFFD, and re-parses
the repaired bytes with the official message class.

:func:`raw_values_request_class` is the decoder's fast path, built the same way: a copy of the
schema in which an attribute's ``AnyValue`` is left as its encoded bytes, so the collector can turn
each distinct encoding into text once (see ``otlp.decode``) instead of walking a message per value.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

_SCHEMA_MODULES = (common_pb2, resource_pb2, trace_pb2, trace_service_pb2)
"""In dependency order: each file only imports the ones before it."""
_REQUEST = "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"


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


@cache
def _lenient_request_class() -> Any:
    """ExportTraceServiceRequest of a private descriptor pool where strings are bytes."""
    pool = descriptor_pool.DescriptorPool()
    for module in _SCHEMA_MODULES:
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        for message in proto.message_type:
            _strings_to_bytes(message)
        pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(_REQUEST))


@cache
def raw_values_request_class() -> Any:
    """ExportTraceServiceRequest of a private pool where ``KeyValue.value`` is ``bytes``: the
    encoded ``AnyValue``. Every other field, strings included, parses (and is checked) as usual."""
    pool = descriptor_pool.DescriptorPool()
    for module in _SCHEMA_MODULES:
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        for message in proto.message_type:
            if message.name == "KeyValue":
                for field in message.field:
                    if field.name == "value":
                        field.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
                        field.ClearField("type_name")
        pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(_REQUEST))


def _strings_to_bytes(message: descriptor_pb2.DescriptorProto) -> None:
    for field in message.field:
        if field.type == descriptor_pb2.FieldDescriptorProto.TYPE_STRING:
            field.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
    for nested in message.nested_type:
        _strings_to_bytes(nested)
