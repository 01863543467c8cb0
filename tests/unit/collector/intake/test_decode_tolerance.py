"""Issue 15, item 7 (the decoder half): bad input costs the span (or the value) it is in, never the
export, and no body makes the decoder raise anything but OtlpDecodeError.

Each test's input is the reproduction from the issue: JSON nested 100k deep, an attribute nested
1,500 deep or ~30 maps deep, one JSON span of a wrong type (and its protobuf counterpart, a span
whose bytes are broken)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
import wire
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from otlp_builders import chat_trace, export_request, json_body, to_otlp_json

from latencylens_collector.intake import otlp
from latencylens_collector.intake.errors import MALFORMED_RESOURCE, MALFORMED_SPAN
from latencylens_collector.intake.values import DEPTH_MARKER, MAX_VALUE_DEPTH, TOO_DEEP, raw_value_text

BASE = 1_700_000_000_000_000_000
LIMITS = otlp.Limits(now_ns=BASE)


def _decode(body: bytes, as_json: bool) -> otlp.DecodedBatch:
    return otlp.decode(body, as_json, limits=LIMITS)


def _cut_maps() -> str:
    """What a value of more than MAX_VALUE_DEPTH maps keeps: 16 maps, then the marker."""
    value: Any = DEPTH_MARKER
    for _ in range(MAX_VALUE_DEPTH):
        value = {"k": value}
    return json.dumps(value, separators=(",", ":"))


def _cut_arrays() -> str:
    value: Any = DEPTH_MARKER
    for _ in range(MAX_VALUE_DEPTH):
        value = [value]
    return json.dumps(value, separators=(",", ":"))


# --- values nested too deep --------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [20, 30, 40, 1500])
def test_protobuf_attribute_nested_many_maps_deep_is_cut_and_the_export_kept(depth: int) -> None:
    """20 and 30 maps parse with protobuf itself (it stops near 33), 40 and 1,500 do not; all four
    give the same cut value, and the export's other spans are stored."""
    request = export_request(chat_trace(BASE))
    deep_span = request.resource_spans[0].scope_spans[0].spans.pop(0).SerializeToString()
    body = wire.with_spans(
        request.SerializeToString(), deep_span + wire.attribute(b"deep", wire.nested_maps(depth))
    )
    batch = _decode(body, as_json=False)
    assert (len(batch.spans), batch.rejected) == (4, 0)
    [deep] = [row for row in batch.spans if "deep" in row.attributes]
    assert deep.attributes["deep"] == _cut_maps()
    assert batch.warnings == {TOO_DEEP: 1}
    assert f"1 {TOO_DEEP}" in batch.error_message


def test_json_attribute_nested_1500_deep_is_cut_and_the_export_kept() -> None:
    document = to_otlp_json(export_request(chat_trace(BASE)))
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0].setdefault("attributes", []).append({"key": "deep", "value": "PLACEHOLDER"})
    # Written as text: json.dumps itself cannot nest 1,500 levels (4,500 JSON levels).
    nested = '{"arrayValue": {"values": [' * 1500 + '{"stringValue": "leaf"}' + "]}}" * 1500
    body = json.dumps(document).replace('"PLACEHOLDER"', nested).encode()
    batch = _decode(body, as_json=True)
    assert (len(batch.spans), batch.rejected) == (4, 0)
    assert batch.spans[0].attributes["deep"] == _cut_arrays()
    assert batch.warnings == {TOO_DEEP: 1}


def test_json_and_protobuf_cut_the_same_value_to_the_same_text() -> None:
    """33 maps: deep enough to be cut, shallow enough for protobuf to build the request itself."""
    value = AnyValue(string_value="leaf")
    for _ in range(MAX_VALUE_DEPTH + 10):
        outer = AnyValue()
        outer.kvlist_value.values.append(KeyValue(key="k", value=value))
        value = outer
    request = export_request(chat_trace(BASE))
    request.resource_spans[0].scope_spans[0].spans[0].attributes.append(KeyValue(key="deep", value=value))
    from_protobuf = _decode(request.SerializeToString(), as_json=False)
    from_json = _decode(json.dumps(to_otlp_json(request)).encode(), as_json=True)
    assert from_protobuf.spans == from_json.spans
    assert from_protobuf.spans[0].attributes["deep"] == _cut_maps()


def _deep(text: str, where: str) -> bytes:
    """``text`` with arrays nested 100,000 deep in place of ``where``."""
    return text.replace(where, "[" * 100_000 + "]" * 100_000).encode()


@pytest.mark.parametrize(
    "place",
    ["body", "resource_spans", "spans", "unknown_field", "objects"],
)
def test_json_nested_100k_deep_is_a_decode_error(place: str) -> None:
    """Nested that deep anywhere but inside an attribute value (where it is cut), the body is not
    an export: refused whole, never a crash."""
    valid = json_body(chat_trace(BASE)).decode()
    bodies = {
        "body": _deep("X", "X"),
        "resource_spans": _deep('{"resourceSpans": X}', "X"),
        "spans": _deep(valid.replace('"spans": [', '"spans": [X, '), "X"),
        "unknown_field": _deep(valid[:-1] + ', "extra": X}', "X"),
        "objects": ('{"a":' * 100_000 + "1" + "}" * 100_000).encode(),
    }
    with pytest.raises(otlp.OtlpDecodeError, match=r"nested deeper than 100 levels|must be"):
        _decode(bodies[place], as_json=True)


# --- spans of the wrong type -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "detail"),
    [
        (lambda span: span.update(name={"not": "a string"}), "name"),
        (lambda span: span.update(startTimeUnixNano="soon"), "startTimeUnixNano"),
        (lambda span: span.update(kind=[1]), "kind"),
        (lambda span: span.update(attributes=[{"key": "a", "value": {"intValue": "many"}}]), "attributes"),
        (lambda span: span.update(events="not a list"), "events"),
    ],
    ids=["name", "start_time", "kind", "attribute", "events"],
)
def test_one_json_span_of_a_wrong_type_is_rejected_and_the_others_stored(change: Any, detail: str) -> None:
    document = json.loads(json_body(chat_trace(BASE)))
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    bad_id = spans[1]["spanId"]
    change(spans[1])
    batch = _decode(json.dumps(document).encode(), as_json=True)
    assert (len(batch.spans), batch.rejected) == (3, 1)
    assert bad_id not in {row.span_id.hex() for row in batch.spans}
    assert batch.reasons == {MALFORMED_SPAN: 1}
    assert batch.error_message.startswith(f"rejected 1 of 4 spans: 1 {MALFORMED_SPAN} (first: ")
    assert detail in batch.error_message
    response = otlp.export_response(batch)
    assert response.partial_success.rejected_spans == 1


def test_json_spans_that_are_not_objects_are_rejected_one_by_one() -> None:
    document = json.loads(json_body(chat_trace(BASE)))
    document["resourceSpans"][0]["scopeSpans"][0]["spans"] += ["a string", 42, None, [1, 2]]
    batch = _decode(json.dumps(document).encode(), as_json=True)
    assert (len(batch.spans), batch.rejected) == (4, 4)


def test_a_malformed_json_resource_rejects_its_spans_only() -> None:
    document = json.loads(json_body(chat_trace(BASE)))
    other = json.loads(json_body(chat_trace(BASE + 10**9)))["resourceSpans"][0]
    other["resource"] = {"attributes": "not a list"}
    document["resourceSpans"].append(other)
    batch = _decode(json.dumps(document).encode(), as_json=True)
    assert (len(batch.spans), batch.rejected) == (4, 4)
    assert batch.reasons == {MALFORMED_RESOURCE: 4}


@pytest.mark.parametrize(
    "broken",
    [
        b"\x0a\xff\x01",  # trace_id: a length of 255 with nothing after it
        b"\x3a\x05\x0a\x01",  # attributes: a KeyValue cut short
        b"\x4b",  # a group start, never ended
    ],
    ids=["truncated_field", "truncated_attribute", "open_group"],
)
def test_one_protobuf_span_with_broken_bytes_is_rejected_and_the_others_stored(broken: bytes) -> None:
    request = export_request(chat_trace(BASE))
    good = request.SerializeToString()
    extra = export_request(chat_trace(BASE + 10**9)).resource_spans[0].scope_spans[0].spans
    body = wire.with_spans(good, extra[0].SerializeToString() + broken, extra[1].SerializeToString())
    batch = _decode(body, as_json=False)
    assert (len(batch.spans), batch.rejected) == (5, 1)
    assert batch.reasons == {MALFORMED_SPAN: 1}
    assert extra[0].span_id not in {row.span_id for row in batch.spans}
    assert extra[1].span_id in {row.span_id for row in batch.spans}


def test_a_broken_attribute_value_rejects_its_span_only() -> None:
    """The span frames fine but one value's bytes are not an AnyValue (a varint that never ends)."""
    request = export_request(chat_trace(BASE))
    extra = export_request(chat_trace(BASE + 10**9)).resource_spans[0].scope_spans[0].spans
    broken = extra[0].SerializeToString() + wire.attribute(b"broken", b"\x18" + b"\xff" * 11)
    body = wire.with_spans(request.SerializeToString(), broken, extra[1].SerializeToString())
    batch = _decode(body, as_json=False)
    assert (len(batch.spans), batch.rejected) == (5, 1)
    assert batch.reasons == {MALFORMED_SPAN: 1}


def test_invalid_utf8_in_a_name_and_a_deep_value_in_one_body() -> None:
    """The body does not parse whole (bad UTF-8 in a span name): read span by span, both repaired."""
    request = export_request(chat_trace(BASE))
    request.resource_spans[0].scope_spans[0].spans[2].name = "MARKER"
    body = request.SerializeToString().replace(b"MARKER", b"MA\xffKER")
    extra = export_request(chat_trace(BASE + 10**9)).resource_spans[0].scope_spans[0].spans[0]
    body = wire.with_spans(body, extra.SerializeToString() + wire.attribute(b"deep", wire.nested_maps(50)))
    batch = _decode(body, as_json=False)
    assert (len(batch.spans), batch.rejected) == (5, 0)
    assert "MA\ufffdKER" in {row.name for row in batch.spans}
    assert batch.spans[-1].attributes["deep"] == _cut_maps()
    assert batch.warnings == {otlp.NOT_UTF8: 1, TOO_DEEP: 1}


def test_the_hand_reader_gives_the_parsers_text_for_every_value_type() -> None:
    """A value protobuf refuses (one string is not UTF-8) is read by hand; every other member of it
    reads as the fast path reads it."""
    members = {
        "s": AnyValue(string_value="llama-3.3-70b"),
        "unicode": AnyValue(string_value="é ☃ \U0001f600"),
        "i": AnyValue(int_value=-42),
        "big": AnyValue(int_value=2**62),
        "t": AnyValue(bool_value=True),
        "f": AnyValue(bool_value=False),
        "d": AnyValue(double_value=0.25),
        "nan": AnyValue(double_value=float("nan")),
        "bytes": AnyValue(bytes_value=b"\x00\xff"),
        "unset": AnyValue(),
    }

    def encoded(bad: str) -> bytes:
        value = AnyValue()
        items = {**members, "bad": AnyValue(string_value=bad)}
        value.kvlist_value.values.extend(KeyValue(key=key, value=item) for key, item in items.items())
        array = AnyValue()
        array.array_value.values.extend([value, AnyValue(string_value="x"), AnyValue(int_value=7)])
        return array.SerializeToString()

    expected = otlp.value_to_str(AnyValue.FromString(encoded("MA\ufffdKER")))
    warnings: Counter[str] = Counter()
    raw = encoded("MARKER").replace(b"MARKER", b"MA\xffKER")
    assert raw_value_text(raw, warnings) == expected
    assert '"bad":"MA\\ufffdKER"' in expected and '"big":4611686018427387904' in expected
    assert warnings == {otlp.NOT_UTF8: 1}
