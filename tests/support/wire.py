"""The protobuf wire format by hand, for bodies the official classes cannot build: a value nested
deeper than protobuf parses (about 33 maps), a span whose bytes are broken, invalid UTF-8.

Field numbers are the OTLP schema's (opentelemetry-proto): ExportTraceServiceRequest.resource_spans
= 1; ResourceSpans.scope_spans = 2; ScopeSpans.spans = 2; Span.attributes = 9; KeyValue.key = 1,
.value = 2; AnyValue.string_value = 1, .array_value = 5, .kvlist_value = 6; ArrayValue.values = 1;
KeyValueList.values = 1. Concatenated encodings of a message merge, and repeated fields append, so
a field appended to a real span's bytes adds to that span.
"""

from __future__ import annotations


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def string_value(text: bytes) -> bytes:
    """An encoded AnyValue holding a string (bytes given as is: they may be invalid UTF-8)."""
    return field(1, text)


def nested_maps(depth: int, leaf: bytes = b"leaf") -> bytes:
    """An encoded AnyValue: ``{"k": {"k": ... "leaf"}}`` with ``depth`` maps."""
    value = string_value(leaf)
    for _ in range(depth):
        value = field(6, field(1, field(1, b"k") + field(2, value)))
    return value


def nested_arrays(depth: int, leaf: bytes = b"leaf") -> bytes:
    """An encoded AnyValue: ``[[[... "leaf"]]]`` with ``depth`` arrays."""
    value = string_value(leaf)
    for _ in range(depth):
        value = field(5, field(1, value))
    return value


def attribute(key: bytes, value: bytes) -> bytes:
    """A Span.attributes entry, to append to a span's bytes."""
    return field(9, field(1, key) + field(2, value))


def with_spans(request: bytes, *spans: bytes) -> bytes:
    """``request`` plus one more ResourceSpans holding ``spans`` (each a Span's bytes)."""
    return request + field(1, field(2, b"".join(field(2, span) for span in spans)))
