"""Spans of one trace arriving over several exports: the request row is recomputed each time."""

from __future__ import annotations

import httpx
from otlp_builders import MS, chat_trace, post_protobuf, recent_base_ns, span


def requests_of(url: str) -> list[dict]:
    response = httpx.get(f"{url}/api/requests")
    assert response.status_code == 200
    return response.json()["requests"]


def test_children_first_then_root_then_a_late_child(collector) -> None:
    base = recent_base_ns()
    root, retrieval, model, tool = chat_trace(base)
    trace_id = root.context.trace_id

    assert post_protobuf(collector.url, [retrieval, model]).status_code == 200
    assert requests_of(collector.url) == []  # no root yet: no request row

    assert post_protobuf(collector.url, [root]).status_code == 200
    [first] = requests_of(collector.url)
    assert first["trace_id"] == f"{trace_id:032x}"
    assert first["span_count"] == 3
    assert first["parts"]["tool"] == 0
    assert first["parts"]["app_other"] == 200 * MS  # 0–10, 110–200 and 900–1000 ms

    assert post_protobuf(collector.url, [tool]).status_code == 200
    [latest] = requests_of(collector.url)
    assert latest["span_count"] == 4
    assert latest["parts"]["tool"] == 50 * MS
    assert latest["parts"]["app_other"] == 150 * MS
    detail = httpx.get(f"{collector.url}/api/requests/{latest['trace_id']}").json()
    assert detail["span_count"] == 4
    assert len(detail["spans"][0]["children"]) == 3


def test_a_resent_span_is_not_counted_twice(collector) -> None:
    spans = chat_trace(recent_base_ns())
    post_protobuf(collector.url, spans)
    post_protobuf(collector.url, spans)
    [request] = requests_of(collector.url)
    assert request["span_count"] == 4


def test_orphan_hangs_under_the_root(collector) -> None:
    base = recent_base_ns()
    spans = chat_trace(base)
    root = spans[0]
    orphan = span("orphan", root.context.trace_id, 77, 12345, base + 5 * MS, base + 8 * MS)
    post_protobuf(collector.url, [*spans, orphan])
    [request] = requests_of(collector.url)
    detail = httpx.get(f"{collector.url}/api/requests/{request['trace_id']}").json()
    assert [s["span_id"] for s in detail["spans"]] == [f"{root.context.span_id:016x}"]
    names = {child["name"] for child in detail["spans"][0]["children"]}
    assert "orphan" in names
