from __future__ import annotations

import json

import pytest
from opentelemetry.trace import Status, StatusCode
from otlp_builders import (
    MS,
    chat_trace,
    export_request,
    json_body,
    new_span_id,
    new_trace_id,
    protobuf_body,
    span,
    to_otlp_json,
)

from latencylens import semconv
from latencylens_collector.analysis.records import NO_PARENT
from latencylens_collector.intake import otlp

BASE = 1_700_000_000_000_000_000


def test_protobuf_decode_flattens_spans() -> None:
    spans = chat_trace(BASE, service="shop")
    batch = otlp.flatten(otlp.parse_protobuf(protobuf_body(spans)))
    assert batch.rejected == 0
    rows = {row.name: row for row in batch.spans}
    root = rows["POST /chat"]
    assert root.service == "shop"
    assert root.kind == "request"
    assert root.span_kind == "server"
    assert root.parent_span_id == NO_PARENT
    assert (root.start_ns, root.duration_ns) == (BASE, 1000 * MS)
    assert root.trace_id == spans[0].context.trace_id.to_bytes(16, "big")
    model = rows["chat llama-3.3-70b"]
    assert model.kind == "model"
    assert model.span_kind == "client"
    assert model.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == "101"
    assert model.attributes[semconv.GEN_AI_REQUEST_STREAM] == "true"
    assert model.parent_span_id == root.span_id
    assert rows["retrieve docs"].kind == "retrieval"
    assert rows["execute_tool lookup"].kind == "tool"


def test_json_decode_matches_protobuf_decode() -> None:
    spans = chat_trace(BASE)
    from_proto = otlp.flatten(otlp.parse_protobuf(protobuf_body(spans)))
    from_json = otlp.flatten(otlp.parse_json(json_body(spans)))
    assert from_json.spans == from_proto.spans


def test_json_with_hex_ids_as_in_the_otlp_spec() -> None:
    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
                "scopeSpans": [
                    {
                        "scope": {"name": "x"},
                        "spans": [
                            {
                                "traceId": "5b8efff798038103d269b633813fc60c",
                                "spanId": "eee19b7ec3c1b174",
                                "parentSpanId": "eee19b7ec3c1b173",
                                "name": "I'm a server span",
                                "startTimeUnixNano": "1544712660000000000",
                                "endTimeUnixNano": "1544712661000000000",
                                "kind": 2,
                                "attributes": [
                                    {"key": "my.int", "value": {"intValue": "42"}},
                                    {"key": "my.double", "value": {"doubleValue": 1.5}},
                                    {"key": "my.bool", "value": {"boolValue": False}},
                                    {
                                        "key": "my.array",
                                        "value": {
                                            "arrayValue": {"values": [{"stringValue": "a"}, {"intValue": 1}]}
                                        },
                                    },
                                ],
                                "someFutureField": True,
                            }
                        ],
                    }
                ],
            }
        ]
    }
    batch = otlp.flatten(otlp.parse_json(json.dumps(body).encode()))
    [row] = batch.spans
    assert row.trace_id.hex() == "5b8efff798038103d269b633813fc60c"
    assert row.span_id.hex() == "eee19b7ec3c1b174"
    assert row.parent_span_id.hex() == "eee19b7ec3c1b173"
    assert row.span_kind == "server"
    assert row.kind == "other"
    assert row.duration_ns == 1_000_000_000
    assert row.attributes == {"my.int": "42", "my.double": "1.5", "my.bool": "false", "my.array": '["a",1]'}


def test_explicit_span_kind_wins() -> None:
    trace_id = new_trace_id()
    spans = [
        span("llm", trace_id, new_span_id(), 5, BASE, BASE + 1, {semconv.SPAN_KIND: semconv.KIND_MODEL}),
        span(
            "gen",
            trace_id,
            new_span_id(),
            5,
            BASE,
            BASE + 1,
            {semconv.GEN_AI_OPERATION_NAME: "generate_content"},
        ),
        span("x", trace_id, new_span_id(), 5, BASE, BASE + 1, {semconv.SPAN_KIND: "nonsense"}),
    ]
    kinds = [row.kind for row in otlp.flatten(export_request(spans)).spans]
    assert kinds == ["model", "model", "other"]


def test_invalid_spans_are_rejected_and_valid_ones_kept() -> None:
    good = chat_trace(BASE)
    trace_id = new_trace_id()
    backwards = span("backwards", trace_id, new_span_id(), None, BASE + 10, BASE)
    request = export_request([*good, backwards])
    zero_trace = request.resource_spans[0].scope_spans[0].spans.add()
    zero_trace.CopyFrom(request.resource_spans[0].scope_spans[0].spans[0])
    zero_trace.trace_id = bytes(16)
    short_span = request.resource_spans[0].scope_spans[0].spans.add()
    short_span.CopyFrom(request.resource_spans[0].scope_spans[0].spans[0])
    short_span.span_id = b"\x01\x02"
    batch = otlp.flatten(request)
    assert len(batch.spans) == len(good)
    assert batch.rejected == 3
    assert "rejected 3 of 7 spans" in batch.error_message
    assert "invalid trace id" in batch.error_message
    assert "ending before they start" in batch.error_message


def test_json_with_non_hex_id_rejects_that_span_only() -> None:
    document = to_otlp_json(export_request(chat_trace(BASE)))
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["spanId"] = "not-hex!"
    batch = otlp.flatten(otlp.parse_json(json.dumps(document).encode()))
    assert (len(batch.spans), batch.rejected) == (3, 1)


@pytest.mark.parametrize(
    "body", [b"not a protobuf \xff\xfe", b"\x0a\xff\xff\xff\xff\x0f"], ids=["garbage", "truncated"]
)
def test_undecodable_protobuf(body: bytes) -> None:
    with pytest.raises(otlp.OtlpDecodeError, match="not a protobuf"):
        otlp.parse_protobuf(body)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        # A span of the wrong type costs that span only (test_decode_tolerance.py); a wrong frame, the export.
        (b'{"resourceSpans": [{"scopeSpans": {"spans": []}}]}', r"\[0\]\.scopeSpans must be an array"),
    ],
)
def test_invalid_json(body: bytes, message: str) -> None:
    with pytest.raises(otlp.OtlpDecodeError, match=message):
        otlp.parse_json(body)


def test_status_and_partial_success_encodings() -> None:
    batch = otlp.DecodedBatch(rejected=2)
    batch.reasons["with an invalid trace id"] = 2
    as_json = json.loads(otlp.encode_response(batch, as_json=True))
    assert as_json == {
        "partialSuccess": {
            "rejectedSpans": "2",
            "errorMessage": "rejected 2 of 2 spans: 2 with an invalid trace id",
        }
    }
    assert json.loads(otlp.encode_response(otlp.DecodedBatch(), as_json=True)) == {}
    assert json.loads(otlp.encode_status(3, "bad", as_json=True)) == {"code": 3, "message": "bad"}


def test_error_status_is_recorded() -> None:
    trace_id = new_trace_id()
    failed = span(
        "boom", trace_id, new_span_id(), None, BASE, BASE + MS, status=Status(StatusCode.ERROR, "x")
    )
    [row] = otlp.flatten(export_request([failed])).spans
    assert (row.status_code, row.status_message) == (2, "x")
    assert row.span_kind == "internal"
