"""Attribute values (OTLP ``AnyValue``) as the text the spans table stores.

Scalars become text (bools ``true``/``false``), arrays and maps compact JSON, bytes hex. A span's
repeated ``KeyValue`` is read by one of two kinds of reader:

* the fast ones (:func:`attributes_to_dict` for parsed messages, :func:`raw_attributes_to_dict` for
  values left encoded) take well-formed values at most :data:`MAX_VALUE_DEPTH` arrays or maps deep,
  and raise :class:`ValueProblem` for anything else;
* :func:`careful_reader` takes anything: strings that are not UTF-8 get U+FFFD, arrays and maps
  deeper than :data:`MAX_VALUE_DEPTH` are replaced by :data:`DEPTH_MARKER` (both counted in the
  warnings), and bytes that are not an ``AnyValue`` even read field by field raise
  :class:`MalformedValue`, which costs the span that holds them, never the export.

So the common value costs one cached lookup, and no value, however deep or broken, makes the
decoder recurse without bound (protobuf itself stops at 100 nested messages, about 33 maps).
"""

from __future__ import annotations

import json
import struct
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, Final

from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

AttributeReader = Callable[[Iterable[Any]], dict[str, str]]
"""Repeated ``KeyValue`` → attributes as text."""
MAX_VALUE_DEPTH: Final = 16
"""Arrays and maps kept nested in one attribute value; deeper ones become :data:`DEPTH_MARKER`."""
DEPTH_MARKER: Final = f"…[cut: nested deeper than {MAX_VALUE_DEPTH} levels]"
NOT_UTF8: Final = "strings with invalid UTF-8 (bytes replaced by U+FFFD)"
TOO_DEEP: Final = f"attribute values nested deeper than {MAX_VALUE_DEPTH} levels cut"
_json_string: Final = json.encoder.encode_basestring_ascii
"""How :func:`json.dumps` writes a string (ASCII-escaped), as a C function."""
_CONTAINERS: Final = frozenset(("array_value", "kvlist_value"))


class ValueProblem(Exception):
    """A value the fast readers do not take (too deep, not UTF-8, not parseable): read it carefully."""


class MalformedValue(Exception):
    """Bytes that are not an ``AnyValue`` even read field by field: the span holding them is invalid."""


# --- fast readers ----------------------------------------------------------------------------------
def attributes_to_dict(attributes: Iterable[Any]) -> dict[str, str]:
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


_VALUE_TEXTS: dict[bytes, str] = {}
"""Encoded ``AnyValue`` → text, for short values: model names, operations, flags and counts recur
across spans and exports. Cleared when full, so it stays small (at most a few MB)."""
_CACHED_VALUE_BYTES: Final = 256
_CACHED_VALUES: Final = 8192


def raw_attributes_to_dict(attributes: Iterable[Any]) -> dict[str, str]:
    """Attributes whose values are encoded ``AnyValue`` bytes (see ``utf8.raw_values_class``) as
    text, identical to :func:`attributes_to_dict`: a value seen before costs one dict lookup."""
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
        raise ValueProblem(str(exc)) from exc
    return value_to_str(value)


def value_to_str(value: AnyValue, warnings: Counter[str] | None = None) -> str:
    """One attribute value as text, as :func:`attributes_to_dict` writes it. Without ``warnings``
    a value nested too deep raises :class:`ValueProblem`; with them it is cut and counted."""
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value
    if which == "int_value":
        return str(value.int_value)
    if which == "bool_value":
        return "true" if value.bool_value else "false"
    if which == "array_value" and warnings is None:
        return _array_to_str(value)
    return any_value_to_str(value, warnings)


def any_value_to_str(value: AnyValue, warnings: Counter[str] | None = None) -> str:
    """Scalars as text (bools as ``true``/``false``), arrays and maps as JSON."""
    return plain_to_str(_plain(value, MAX_VALUE_DEPTH, warnings))


def plain_to_str(plain: Any) -> str:
    """A value as plain Python data (str, bool, int, float, list, dict) to its stored text."""
    if isinstance(plain, str):
        return plain
    if isinstance(plain, bool):
        return "true" if plain else "false"
    if isinstance(plain, (int, float)):
        return repr(plain)
    return json.dumps(plain, separators=(",", ":"))


def _plain(value: AnyValue, depth: int, warnings: Counter[str] | None) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return ""
    if which in _CONTAINERS:
        if depth <= 0:
            return _cut(warnings)
        if which == "array_value":
            return [_plain(item, depth - 1, warnings) for item in value.array_value.values]
        return {kv.key: _plain(kv.value, depth - 1, warnings) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, which)


def _cut(warnings: Counter[str] | None) -> str:
    if warnings is None:
        raise ValueProblem(TOO_DEEP)
    warnings[TOO_DEEP] += 1
    return DEPTH_MARKER


# --- the careful reader ----------------------------------------------------------------------------
def careful_reader(warnings: Counter[str], raw_values: bool) -> AttributeReader:
    """A reader that takes any value (see the module docstring); ``raw_values``: values are encoded
    ``AnyValue`` bytes rather than messages. Repairs and cuts are counted in ``warnings``."""

    def read(attributes: Iterable[Any]) -> dict[str, str]:
        out: dict[str, str] = {}
        for kv in attributes:
            value = kv.value
            out[kv.key] = raw_value_text(value, warnings) if raw_values else value_to_str(value, warnings)
        return out

    return read


def raw_value_text(raw: bytes, warnings: Counter[str]) -> str:
    """Encoded ``AnyValue`` bytes as text, whatever they hold; raises :class:`MalformedValue`."""
    value = AnyValue()
    try:
        value.ParseFromString(raw)
    except (DecodeError, ValueError):  # not UTF-8, deeper than protobuf parses, or broken: by hand
        return plain_to_str(_wire_value(raw, MAX_VALUE_DEPTH, warnings))
    return value_to_str(value, warnings)


def _wire_value(data: bytes, depth: int, warnings: Counter[str]) -> Any:
    """An encoded ``AnyValue`` read field by field, as protobuf would (the last member of the oneof
    wins, a repeated map or array merges), but with strings repaired and depth cut."""
    which: int | None = None
    plain: Any = ""
    for number, wire, payload in _fields(data):
        if number == 1 and wire == 2:
            which, plain = 1, _utf8(payload, warnings)
        elif number == 2 and wire == 0:
            which, plain = 2, payload != 0
        elif number == 3 and wire == 0:
            which, plain = 3, payload - (1 << 64) if payload >= 1 << 63 else payload
        elif number == 4 and wire == 1:
            which, plain = 4, struct.unpack("<d", payload)[0]
        elif number in (5, 6) and wire == 2:
            if depth <= 0:
                which, plain = number, _cut(warnings)
            elif number == 5:
                items = [_wire_value(item, depth - 1, warnings) for item in _entries(payload)]
                plain = [*plain, *items] if which == 5 and isinstance(plain, list) else items
                which = 5
            else:
                pairs = dict(_wire_pair(entry, depth - 1, warnings) for entry in _entries(payload))
                plain = {**plain, **pairs} if which == 6 and isinstance(plain, dict) else pairs
                which = 6
        elif number == 7 and wire == 2:
            which, plain = 7, payload.hex()
        # anything else is an unknown field (or a known one with another wire type): skipped
    return plain


def _wire_pair(data: bytes, depth: int, warnings: Counter[str]) -> tuple[str, Any]:
    """A ``KeyValue`` read by hand: its key (repaired) and its value (``""`` when absent)."""
    key, value = "", b""
    seen_value = False
    for number, wire, payload in _fields(data):
        if number == 1 and wire == 2:
            key = _utf8(payload, warnings)
        elif number == 2 and wire == 2:
            value = value + payload if seen_value else payload  # a repeated message field merges
            seen_value = True
    return key, _wire_value(value, depth, warnings) if seen_value else ""


def _entries(data: bytes) -> list[bytes]:
    """The elements of a repeated field 1 (``ArrayValue.values``, ``KeyValueList.values``)."""
    return [payload for number, wire, payload in _fields(data) if number == 1 and wire == 2]


def _utf8(data: bytes, warnings: Counter[str]) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        warnings[NOT_UTF8] += 1
        return data.decode("utf-8", errors="replace")


def _fields(data: bytes) -> Iterable[tuple[int, int, Any]]:
    """``(field number, wire type, value)`` of each field of an encoded message: varints as ints,
    fixed-size and length-delimited fields as bytes. Raises :class:`MalformedValue` where the bytes
    do not frame (a length past the end, a group, a varint over ten bytes)."""
    position, end = 0, len(data)
    value: Any
    while position < end:
        key, position = _varint(data, position)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise MalformedValue("field number 0")
        if wire == 0:
            value, position = _varint(data, position)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, position = data[position : position + size], position + size
        elif wire == 2:
            size, position = _varint(data, position)
            value, position = data[position : position + size], position + size
        else:
            raise MalformedValue(f"wire type {wire}")
        if position > end:
            raise MalformedValue("truncated field")
        yield number, wire, value


def _varint(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    for _ in range(10):
        if position >= len(data):
            raise MalformedValue("truncated varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result & ((1 << 64) - 1), position
        shift += 7
    raise MalformedValue("varint longer than ten bytes")
