"""Issue 15 through a real collector (OTLP/HTTP and OTLP/gRPC): the reproductions of items 1, 2
and 7 get a 4xx naming what is wrong, or are stored with the bad part cut or rejected — never a
500, never a 200 that stores nothing."""

from __future__ import annotations

import gzip
import json
import zlib
from typing import Any

import grpc
import httpx
import pytest
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from otlp_builders import (
    chat_trace,
    export_request,
    json_body,
    new_span_id,
    protobuf_body,
    recent_base_ns,
    span,
)
from pipeline_helpers import grpc_target, metric

from latencylens import semconv
from latencylens_collector.auth import KeyStore

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
MIB = 1024 * 1024


def post(url: str, body: bytes, content_type: str = PROTOBUF, **headers: str) -> httpx.Response:
    headers = {"Content-Type": content_type, **{k.replace("_", "-"): v for k, v in headers.items()}}
    return httpx.post(f"{url}/v1/traces", content=body, headers=headers, timeout=60)


def status_message(response: httpx.Response) -> str:
    if response.headers["content-type"] == JSON:
        return str(response.json()["message"])
    assert response.headers["content-type"] == PROTOBUF
    return Status.FromString(response.content).message


def stored(collector: Any, trace: list) -> list:
    return collector.store.spans_of_traces([trace[0].context.trace_id.to_bytes(16, "big")])


def partial_success(response: httpx.Response, as_json: bool) -> tuple[int, str]:
    if as_json:
        partial = response.json().get("partialSuccess", {})
        return int(partial.get("rejectedSpans", 0)), str(partial.get("errorMessage", ""))
    partial = ExportTraceServiceResponse.FromString(response.content).partial_success
    return partial.rejected_spans, partial.error_message


def test_gzip_bomb_is_refused_with_413_naming_the_limit(collector: Any) -> None:
    """The issue's export: 18 KiB of gzip holding one span with 250 attributes of 60 KB (14 MiB)."""
    base = recent_base_ns()
    attributes = {f"attribute.{i}": "x" * 60_000 for i in range(250)}
    trace = [span("bomb", 0xB0B, 1, None, base, base + 1000, attributes)]
    body = gzip.compress(protobuf_body(trace))
    assert len(body) < 20 * 1024
    refused_before = metric("latencylens_exports_refused_total", protocol="http", reason="too_large")
    response = post(collector.url, body, content_encoding="gzip")
    assert response.status_code == 413
    assert "larger than 8388608 bytes (max_body_bytes) after decompression" in status_message(response)
    assert (
        metric("latencylens_exports_refused_total", protocol="http", reason="too_large") == refused_before + 1
    )
    assert stored(collector, trace) == []


@pytest.mark.parametrize("cut", ["half", "crc"], ids=["cut_short", "missing_crc"])
def test_gzip_cut_short_or_without_its_crc_is_400_not_200(collector: Any, cut: str) -> None:
    trace = chat_trace(recent_base_ns())
    body = gzip.compress(protobuf_body(trace))
    body = body[: len(body) // 2] if cut == "half" else body[:-8]
    response = post(collector.url, body, content_encoding="gzip")
    assert response.status_code == 400
    assert "gzip body ends before its end" in status_message(response)
    assert stored(collector, trace) == []
    whole = post(collector.url, gzip.compress(protobuf_body(trace)), content_encoding="gzip")
    assert whole.status_code == 200 and len(stored(collector, trace)) == 4


def test_deflate_bodies_are_taken(collector: Any) -> None:
    trace = chat_trace(recent_base_ns())
    response = post(collector.url, zlib.compress(protobuf_body(trace)), content_encoding="deflate")
    assert response.status_code == 200 and len(stored(collector, trace)) == 4


def test_json_nested_100k_deep_is_400(collector: Any) -> None:
    body = b'{"resourceSpans": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    response = post(collector.url, body, JSON)
    assert response.status_code == 400
    assert "resourceSpans[0] must be an object" in status_message(response)


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "protobuf"])
def test_one_span_of_a_wrong_type_costs_that_span_only(collector: Any, as_json: bool) -> None:
    """JSON: one span's name is an object. Protobuf: one span's bytes end inside a field."""
    trace = chat_trace(recent_base_ns())
    if as_json:
        document = json.loads(json_body(trace))
        document["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["name"] = {"not": "a string"}
        body = json.dumps(document).encode()
    else:
        request = export_request(trace)
        spans = request.resource_spans[0].scope_spans[0].spans
        good = [s.SerializeToString() for s in spans]
        del spans[:]
        broken = good[1] + b"\x0a\xff\x01"  # trace_id: 255 bytes announced, none follow
        scope = b"".join(_field(2, item) for item in [good[0], broken, *good[2:]])
        body = request.SerializeToString() + _field(1, _field(2, scope))  # one more ResourceSpans
    response = post(collector.url, body, JSON if as_json else PROTOBUF)
    assert response.status_code == 200, response.content[:300]
    rejected, message = partial_success(response, as_json)
    assert rejected == 1
    assert "rejected 1 of 4 spans: 1 that are not valid OTLP spans" in message
    kept = {row.span_id for row in stored(collector, trace)}
    assert kept == {s.context.span_id.to_bytes(8, "big") for i, s in enumerate(trace) if i != 1}


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (ExportTraceServiceRequest.resource_spans = 1,
    ResourceSpans.scope_spans = 2, ScopeSpans.spans = 2)."""
    size, length = len(payload), bytearray()
    while size > 0x7F:
        length.append(size & 0x7F | 0x80)
        size >>= 7
    length.append(size)
    return bytes([number << 3 | 2]) + bytes(length) + payload


def test_an_attribute_nested_deep_is_cut_and_the_span_stored(collector: Any) -> None:
    trace = chat_trace(recent_base_ns())
    document = json.loads(json_body(trace))
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"] = [
        {"key": "deep", "value": "PLACEHOLDER"}
    ]
    nested = '{"kvlistValue": {"values": [{"key": "k", "value": ' * 1500 + '{"intValue": "1"}' + "}]}}" * 1500
    body = json.dumps(document).replace('"PLACEHOLDER"', nested).encode()
    response = post(collector.url, body, JSON)
    assert response.status_code == 200
    assert partial_success(response, True) == (
        0,
        "kept with changes: 1 attribute values nested deeper than 16 levels cut",
    )
    [root] = [row for row in stored(collector, trace) if "deep" in row.attributes]
    marker = json.dumps("…[cut: nested deeper than 16 levels]")  # "\u2026[cut: ...]", as JSON writes it
    assert root.attributes["deep"] == '{"k":' * 16 + marker + "}" * 16


def test_a_span_over_the_byte_budget_is_stored_cut_and_marked(collector: Any) -> None:
    base = recent_base_ns()
    trace_id, root = 0xB16, new_span_id()
    attributes = {"gen_ai.request.model": "llama-3.3-70b", **{f"blob.{i}": "y" * 60_000 for i in range(100)}}
    trace = [span("big", trace_id, root, None, base, base + 10**6, attributes)]
    response = post(collector.url, gzip.compress(protobuf_body(trace)), content_encoding="gzip")
    assert response.status_code == 200
    assert "1 spans over the per-span byte budget" in partial_success(response, False)[1]
    [row] = stored(collector, trace)
    assert row.attributes["gen_ai.request.model"] == "llama-3.3-70b"
    assert int(row.attributes[semconv.SPAN_BUDGET_CUT_BYTES]) > 4_900_000
    assert sum(len(k) + len(v.encode()) for k, v in row.attributes.items()) <= MIB + 100


def test_an_export_decoding_to_more_than_one_insert_is_413(start_collector: Any) -> None:
    """Many small spans sharing one large resource: small on the wire, large as rows (each span is
    inserted with its resource)."""
    collector = start_collector(max_batch_bytes=2 * MIB)
    base = recent_base_ns()
    request = export_request([span(f"s{i}", 0xAB, i + 1, None, base, base + 1) for i in range(200)])
    resource = request.resource_spans[0].resource
    for i in range(10):
        resource.attributes.add(key=f"host.note.{i}", value=AnyValue(string_value="r" * 5000))
    response = post(collector.url, request.SerializeToString())
    assert response.status_code == 413
    assert "more than max_batch_bytes (2097152 bytes)" in status_message(response)


def test_a_trace_past_the_span_cap_is_stored_and_marked(start_collector: Any) -> None:
    collector = start_collector(max_trace_spans=5)
    base, trace_id = recent_base_ns(), 0x7A11
    pieces = [
        [span(f"s{i}", trace_id, i + 1, None, base + i, base + i + 1) for i in range(start, start + 4)]
        for start in (0, 4)
    ]
    for piece in pieces:
        assert post(collector.url, protobuf_body(piece)).status_code == 200
    rows = sorted(stored(collector, pieces[0]), key=lambda row: row.start_ns)
    assert [row.attributes.get(semconv.TRACE_TOO_LARGE) for row in rows] == [None] * 5 + ["true"] * 3


def test_a_protobuf_request_without_a_key_gets_a_protobuf_401(start_collector: Any, tmp_path: Any) -> None:
    metadata_url = f"sqlite:///{tmp_path / 'metadata.db'}"
    keys = KeyStore(metadata_url)
    keys.create("alpha")
    collector = start_collector(metadata_url=metadata_url)
    body = protobuf_body(chat_trace(recent_base_ns()))
    response = post(collector.url, body)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert Status.FromString(response.content).code == 16  # UNAUTHENTICATED
    assert "missing API key" in status_message(response)
    as_json = post(collector.url, json_body(chat_trace(recent_base_ns())), JSON)
    assert as_json.status_code == 401 and "missing API key" in status_message(as_json)
    keys.close()


def test_grpc_keeps_the_spans_around_a_malformed_one_and_limits_the_message(start_collector: Any) -> None:
    collector = start_collector(max_body_bytes=MIB)
    trace = chat_trace(recent_base_ns())
    request = export_request(trace)
    spans = request.resource_spans[0].scope_spans[0].spans
    broken = spans[3].SerializeToString() + b"\x4b"  # a group that never ends
    del spans[3]
    body = request.SerializeToString() + _field(1, _field(2, _field(2, broken)))
    with grpc.insecure_channel(grpc_target(collector.url)) as channel:
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=lambda raw: raw,
            response_deserializer=ExportTraceServiceResponse.FromString,
        )
        response = export(body, timeout=10)
        assert response.partial_success.rejected_spans == 1
        assert len(stored(collector, trace)) == 3
        # A gzip bomb over gRPC: compressed small, over the limit once inflated.
        bomb = export_request([span("bomb", 0xB0C, 1, None, 1, 2, {"a": "x" * 2 * MIB})]).SerializeToString()
        with pytest.raises(grpc.RpcError) as refused:
            export(bomb, timeout=10, compression=grpc.Compression.Gzip)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
