"""The protobuf fast path (attribute values kept encoded, texts cached) must give exactly what the
strict parse gives, for every value type, and hand bodies it cannot take to the strict parse."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from otlp_builders import chat_trace, export_request

from latencylens_collector.intake import otlp

BASE = 1_700_000_000_000_000_000


def _array(*items: AnyValue) -> AnyValue:
    value = AnyValue()
    value.array_value.values.extend(items)
    return value


def _kvlist(**items: AnyValue) -> AnyValue:
    value = AnyValue()
    value.kvlist_value.values.extend(KeyValue(key=k, value=v) for k, v in items.items())
    return value


VALUES = {
    "s": AnyValue(string_value="llama-3.3-70b"),
    "unicode": AnyValue(string_value="é ☃ \U0001f600"),
    "empty_string": AnyValue(string_value=""),
    "i": AnyValue(int_value=-42),
    "big": AnyValue(int_value=2**62),
    "t": AnyValue(bool_value=True),
    "f": AnyValue(bool_value=False),
    "d": AnyValue(double_value=0.25),
    "bytes": AnyValue(bytes_value=b"\x00\xff"),
    "unset": AnyValue(),
    "strings": _array(AnyValue(string_value="stop"), AnyValue(string_value='quo"te')),
    "no_items": _array(),
    "mixed": _array(AnyValue(string_value="a"), AnyValue(int_value=1), AnyValue(bool_value=True)),
    "map": _kvlist(a=AnyValue(int_value=1), b=_array(AnyValue(double_value=1.5))),
}


def _request() -> ExportTraceServiceRequest:
    request = export_request(chat_trace(BASE))
    span = request.resource_spans[0].scope_spans[0].spans[0]
    span.attributes.extend(KeyValue(key=key, value=value) for key, value in VALUES.items())
    span.attributes.add(key="no_value")  # a KeyValue without its value field
    request.resource_spans[0].resource.attributes.add(key="host.cores", value=AnyValue(int_value=8))
    return request


def test_fast_path_equals_the_strict_parse_for_every_value_type() -> None:
    body = _request().SerializeToString()
    strict = otlp.flatten(otlp.parse_protobuf(body))
    for _ in range(2):  # the second decode reads the cached texts
        fast = otlp.decode(body, as_json=False)
        assert fast.spans == strict.spans
    attributes = fast.spans[0].attributes
    # The texts themselves, worked out from the rules in any_value_to_str:
    assert attributes["i"] == "-42" and attributes["big"] == "4611686018427387904"
    assert (attributes["t"], attributes["f"], attributes["d"]) == ("true", "false", "0.25")
    assert attributes["bytes"] == "00ff" and attributes["unset"] == "" and attributes["no_value"] == ""
    assert attributes["strings"] == '["stop","quo\\"te"]' and attributes["no_items"] == "[]"
    assert attributes["mixed"] == '["a",1,true]' and attributes["map"] == '{"a":1,"b":[1.5]}'
    assert fast.spans[0].resource_attributes["host.cores"] == "8"


def test_invalid_utf8_in_a_value_is_still_repaired_and_reported() -> None:
    request = _request()
    span = request.resource_spans[0].scope_spans[0].spans[1]
    span.attributes.add(key="marker", value=AnyValue(string_value="MARKER"))
    body = request.SerializeToString().replace(b"MARKER", b"MA\xffKER")
    batch = otlp.decode(body, as_json=False)
    assert len(batch.spans) == 4 and batch.rejected == 0
    assert batch.spans[1].attributes["marker"] == "MA\ufffdKER"
    assert batch.warnings == {otlp.NOT_UTF8: 1}
