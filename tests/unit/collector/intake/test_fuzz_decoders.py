"""Issue 15, item 7: a fuzz test of the OTLP decoders in the normal suite, bounded in time.

Properties, for protobuf bytes mutated from real export bodies and for arbitrary JSON trees:
the decoder raises nothing but OtlpDecodeError, and valid spans are never lost — junk where a
span goes, or one span's bytes mangled inside an intact frame, costs that span and no other.
The hand reader of attribute values (used where protobuf refuses one) reads any value protobuf
reads to the same text.

Each property runs a fixed number of examples from a fixed seed (``derandomize``), so the suite is
reproducible; ``--hypothesis-seed=random`` explores further.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from fuzz_settings import reproducible
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from otlp_builders import chat_trace, export_request, json_body

from latencylens_collector.intake import otlp, values

BASE = 1_700_000_000_000_000_000
LIMITS = otlp.Limits(now_ns=BASE)
FUZZ = reproducible(150)


def _request() -> Any:
    """Two chat traces with a bit of everything: events, links, nested values, a resource."""
    request = export_request(chat_trace(BASE) + chat_trace(BASE + 10**9))
    spans = request.resource_spans[0].scope_spans[0].spans
    event = spans[2].events.add(name="gen_ai.content.completion", time_unix_nano=BASE + 5)
    event.attributes.add(key="index", value=AnyValue(int_value=0))
    link = spans[1].links.add(trace_id=spans[5].trace_id, span_id=spans[5].span_id)
    link.attributes.add(key="why", value=AnyValue(string_value="retry"))
    nested = AnyValue()
    nested.kvlist_value.values.add(key="a", value=AnyValue(double_value=1.5))
    nested.kvlist_value.values.add(key="b").value.array_value.values.add(bool_value=True)
    spans[3].attributes.add(key="nested", value=nested)
    return request


REQUEST = _request()
BODY = REQUEST.SerializeToString()
SPANS = [span.SerializeToString() for span in REQUEST.resource_spans[0].scope_spans[0].spans]
SPAN_IDS = {span.span_id for span in REQUEST.resource_spans[0].scope_spans[0].spans}
JSON_DOCUMENT = json.loads(json_body([*chat_trace(BASE), *chat_trace(BASE + 10**9)]))
JSON_SPAN_IDS = {span["spanId"] for span in JSON_DOCUMENT["resourceSpans"][0]["scopeSpans"][0]["spans"]}


def decode(body: bytes, as_json: bool) -> otlp.DecodedBatch | None:
    """The batch, or None for a refused body; any other exception fails the test."""
    try:
        return otlp.decode(body, as_json, limits=LIMITS)
    except otlp.OtlpDecodeError:
        return None


# --- protobuf --------------------------------------------------------------------------------------
@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with a few random edits: bytes overwritten, inserted, deleted, or the end cut."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["overwrite", "insert", "delete", "truncate"]))
        at = draw(st.integers(0, max(0, len(out) - 1)))
        if kind == "overwrite" and out:
            chunk = draw(st.binary(min_size=1, max_size=8))
            out[at : at + len(chunk)] = chunk
        elif kind == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete":
            del out[at : at + draw(st.integers(1, 16))]
        else:
            del out[at:]
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    size, length = len(payload), bytearray()
    while size > 0x7F:
        length.append(size & 0x7F | 0x80)
        size >>= 7
    length.append(size)
    return bytes([number << 3 | 2]) + bytes(length) + payload


@FUZZ
@given(mutated(BODY))
def test_mutated_protobuf_bodies_raise_only_decode_errors(body: bytes) -> None:
    batch = decode(body, as_json=False)
    if batch is not None:
        assert len(batch.spans) + batch.rejected <= len(body)  # sanity: counts are counts


@FUZZ
@given(st.integers(0, len(SPANS) - 1).flatmap(lambda i: st.tuples(st.just(i), mutated(SPANS[i]))))
def test_one_mangled_span_costs_only_itself(case: tuple[int, bytes]) -> None:
    """One span's bytes mutated inside an intact frame: every other span is kept."""
    index, mangled = case
    spans = [*SPANS[:index], mangled, *SPANS[index + 1 :]]
    body = _field(1, _field(2, b"".join(_field(2, span) for span in spans)))
    batch = decode(body, as_json=False)
    assert batch is not None
    others = SPAN_IDS - {REQUEST.resource_spans[0].scope_spans[0].spans[index].span_id}
    assert others <= {row.span_id for row in batch.spans}
    assert len(batch.spans) + batch.rejected == len(SPANS)


@FUZZ
@given(st.binary(max_size=2000))
def test_random_bytes_raise_only_decode_errors(body: bytes) -> None:
    decode(body, as_json=False)
    decode(body, as_json=True)


# --- JSON ------------------------------------------------------------------------------------------
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=40,
)
OTLP_KEYS = st.sampled_from(
    [
        "resourceSpans",
        "scopeSpans",
        "spans",
        "resource",
        "attributes",
        "key",
        "value",
        "traceId",
        "spanId",
        "name",
        "kind",
        "startTimeUnixNano",
        "endTimeUnixNano",
        "events",
        "links",
        "status",
        "arrayValue",
        "kvlistValue",
        "values",
        "stringValue",
        "intValue",
    ]
)
OTLP_LIKE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10) | st.sampled_from(["00" * 16, "01" * 8]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(OTLP_KEYS, children, max_size=5),
    max_leaves=40,
)


@FUZZ
@given(mutated(json.dumps(JSON_DOCUMENT).encode()))
def test_mutated_json_bodies_raise_only_decode_errors(body: bytes) -> None:
    decode(body, as_json=True)


@FUZZ
@given(JSON_VALUES | OTLP_LIKE)
def test_arbitrary_json_trees_raise_only_decode_errors(tree: Any) -> None:
    decode(json.dumps(tree).encode(), as_json=True)


@FUZZ
@given(
    junk_spans=st.lists(JSON_VALUES | OTLP_LIKE, max_size=4),
    unknown_fields=st.dictionaries(
        st.text(min_size=1, max_size=8).map(lambda key: f"x_{key}"), JSON_VALUES, max_size=3
    ),
)
def test_junk_beside_valid_json_spans_never_costs_them(
    junk_spans: list[Any], unknown_fields: dict[str, Any]
) -> None:
    document = json.loads(json.dumps(JSON_DOCUMENT))
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    for span in spans:
        span.update(unknown_fields)
    spans.extend(junk_spans)
    batch = decode(json.dumps(document).encode(), as_json=True)
    assert batch is not None
    assert JSON_SPAN_IDS <= {row.span_id.hex() for row in batch.spans}
    assert len(batch.spans) + batch.rejected == len(spans)


# --- attribute values ------------------------------------------------------------------------------
def _any_values() -> st.SearchStrategy[AnyValue]:
    scalars = st.one_of(
        st.text(max_size=8).map(lambda v: AnyValue(string_value=v)),
        st.booleans().map(lambda v: AnyValue(bool_value=v)),
        st.integers(-(2**63), 2**63 - 1).map(lambda v: AnyValue(int_value=v)),
        st.floats().map(lambda v: AnyValue(double_value=v)),
        st.binary(max_size=6).map(lambda v: AnyValue(bytes_value=v)),
        st.just(AnyValue()),
    )

    def array(items: list[AnyValue]) -> AnyValue:
        value = AnyValue()
        value.array_value.values.extend(items)
        return value

    def kvlist(items: dict[str, AnyValue]) -> AnyValue:
        value = AnyValue()
        value.kvlist_value.values.extend(KeyValue(key=k, value=v) for k, v in items.items())
        return value

    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=3).map(array)
            | st.dictionaries(st.text(max_size=4), children, max_size=3).map(kvlist)
        ),
        max_leaves=25,
    )


@FUZZ
@given(_any_values())
def test_the_hand_reader_reads_values_as_protobuf_does(value: AnyValue) -> None:
    raw = value.SerializeToString()
    by_protobuf: Counter[str] = Counter()
    by_hand: Counter[str] = Counter()
    expected = values.value_to_str(AnyValue.FromString(raw), by_protobuf)
    assert values.plain_to_str(values._wire_value(raw, values.MAX_VALUE_DEPTH, by_hand)) == expected
    assert by_hand == by_protobuf
