"""Query parameters answer 4xx naming what to fix, never 500 and never a silently wrong page; a
span tree of any depth is answered whole (the issue's reproductions as inputs)."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from collector_settings import collector_settings
from otlp_builders import MS, chat_trace, new_span_id, new_trace_id, post_protobuf, recent_base_ns, span

from latencylens import semconv
from latencylens_collector.api.server import ServiceThread
from latencylens_collector.queries.explain import MAX_NESTING

OVER_INT64 = str(2**63)


@pytest.fixture(scope="module")
def served(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceThread]:
    """One collector with three requests (1, 2 and 3 s), shared by the module's tests (each reads
    or adds traces of its own)."""
    folder = tmp_path_factory.mktemp("param_bounds")
    settings = collector_settings(
        chdb_dsn, f"param_bounds_{os.getpid()}", folder, spool_dir=str(folder / "spool")
    )
    service = ServiceThread(settings).start()
    base = recent_base_ns()
    for scale in (1, 2, 3):
        assert post_protobuf(service.url, chat_trace(base, scale=scale)).is_success
    yield service
    service.stop()
    service.store.close()


def detail_text(response: httpx.Response) -> str:
    assert response.headers["content-type"].startswith("application/json")
    return str(response.json()["detail"])


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("inf", "finite"),
        ("-inf", "finite"),
        ("nan", "finite"),
        ("1e300", "less than or equal to 9223372036854"),  # was 200 with every row
        ("1e20", "less than or equal to 9223372036854"),
        ("-1", "greater than or equal to 0"),
        ("ten", "valid number"),
    ],
)
def test_min_duration_ms_out_of_range_is_422(served: Any, value: str, says: str) -> None:
    response = httpx.get(f"{served.url}/api/requests", params={"min_duration_ms": value})
    assert response.status_code == 422, response.text
    assert says in detail_text(response)
    assert "min_duration_ms" in detail_text(response)


def test_the_largest_min_duration_is_taken_and_matches_nothing(served: Any) -> None:
    response = httpx.get(f"{served.url}/api/requests", params={"min_duration_ms": "9223372036854"})
    assert response.status_code == 200, response.text
    assert response.json()["requests"] == []
    # 1500 ms keeps the 2 s and 3 s requests: the bound is read as ms, exactly
    response = httpx.get(f"{served.url}/api/requests", params={"min_duration_ms": "1500"})
    assert [row["e2e_ns"] // MS for row in response.json()["requests"]] == [3000, 2000]


@pytest.mark.parametrize("limit", ["0", "-5", "1001", "99999999999999999999999", "1.5"])
def test_limits_out_of_range_are_422(served: Any, limit: str) -> None:
    response = httpx.get(f"{served.url}/api/requests", params={"limit": limit})
    assert response.status_code == 422
    assert "limit" in detail_text(response)
    response = httpx.get(f"{served.url}/api/alerts", params={"limit": limit})
    assert response.status_code == 422


def _cursor(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        _cursor("9" * 25 + ":" + "0" * 32),  # e2e past Int64: was 200 with rows from nowhere
        _cursor(str(2**63) + ":" + "0" * 32),
        _cursor("-1:" + "0" * 32),
        _cursor("+5:" + "0" * 32),
        _cursor("5:" + "0" * 31),
        _cursor("5:" + "g" * 32),
        "A" * 5000,
        "%%%",
        "\x00",
    ],
)
def test_an_overflowing_or_garbled_cursor_is_422(served: Any, cursor: str) -> None:
    response = httpx.get(f"{served.url}/api/requests", params={"cursor": cursor})
    assert response.status_code == 422
    assert "cursor" in detail_text(response)


def test_a_real_cursor_still_pages(served: Any) -> None:
    first = httpx.get(f"{served.url}/api/requests", params={"limit": 2}).json()
    assert [row["e2e_ns"] // MS for row in first["requests"]] == [3000, 2000]
    rest = httpx.get(f"{served.url}/api/requests", params={"limit": 2, "cursor": first["next_cursor"]}).json()
    assert [row["e2e_ns"] // MS for row in rest["requests"]] == [1000]


@pytest.mark.parametrize(
    "path",
    [
        f"/api/slos/{OVER_INT64}",
        "/api/slos/99999999999999999999",
        "/api/slos/0",
        f"/api/alerts/{OVER_INT64}/history",
        f"/api/alerts?slo_id={OVER_INT64}",
    ],
)
def test_ids_past_signed_64_bits_are_422(served: Any, path: str) -> None:
    response = httpx.get(served.url + path)
    assert response.status_code == 422, response.text
    assert "9223372036854775807" in detail_text(response) or "greater than or equal to 1" in detail_text(
        response
    )


def test_ids_past_signed_64_bits_are_422_for_delete_and_silences(served: Any) -> None:
    assert httpx.delete(f"{served.url}/api/slos/{OVER_INT64}").status_code == 422
    response = httpx.post(
        f"{served.url}/api/silences", json={"slo_id": 2**63, "until": "2099-01-01T00:00:00Z"}
    )
    assert response.status_code == 422
    assert "slo_id" in detail_text(response)
    # the largest id is a real question: no such SLO
    assert httpx.get(f"{served.url}/api/slos/{2**63 - 1}").status_code == 404


def _chain(url: str, depth: int, innermost_kind: str) -> tuple[str, list[int], int]:
    """Post a chain of ``depth`` spans, each 1 µs inside its parent at both ends; the innermost
    lasts 1 s − 2·(depth−1) µs. Returns the trace id, the span ids root first, and the innermost's
    duration in ns."""
    base = recent_base_ns()
    trace = new_trace_id()
    ids = [new_span_id() for _ in range(depth)]
    spans = []
    for level in range(depth):
        attributes = {semconv.SPAN_KIND: innermost_kind} if level == depth - 1 else {}
        spans.append(
            span(
                f"s{level}",
                trace,
                ids[level],
                ids[level - 1] if level else None,
                base + level * 1000,
                base + 1000 * MS - level * 1000,
                attributes,
            )
        )
    assert post_protobuf(url, spans).is_success
    return f"{trace:032x}", ids, 1000 * MS - 2 * (depth - 1) * 1000


def _flatten(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every node of a nested answer, in tree order, without recursion."""
    out: list[dict[str, Any]] = []
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(node["children"]))
    return out


def _nesting(nodes: list[dict[str, Any]]) -> int:
    deepest = 0
    stack = [(node, 1) for node in nodes]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in node["children"])
    return deepest


@pytest.mark.parametrize("depth", [255, 300, 10_000])
def test_a_deep_span_tree_is_answered_whole_and_attributed_to_its_bottom(served: Any, depth: int) -> None:
    trace_hex, ids, innermost_ns = _chain(served.url, depth, semconv.KIND_TOOL)
    response = httpx.get(f"{served.url}/api/requests/{trace_hex}", timeout=120)
    assert response.status_code == 200, response.text[:300]  # 255 deep was a 500
    detail = response.json()
    # The innermost span is a tool on the critical path at depth `depth`: the walk reached it
    # (a walk cut at 256 levels gave its time to an ancestor's app_other).
    assert detail["parts"]["tool"] == innermost_ns
    assert detail["parts"]["app_other"] == detail["e2e_ns"] - innermost_ns
    nodes = _flatten(detail["spans"])
    assert [node["span_id"] for node in nodes] == [f"{span_id:016x}" for span_id in ids]
    assert [node["parent_span_id"] for node in nodes] == [None] + [f"{s:016x}" for s in ids[:-1]]
    assert _nesting(detail["spans"]) == min(depth, MAX_NESTING + 1)
    # every span of the chain owns its 2 µs at both ends (the innermost all of its window)
    assert [node["critical_ns"] for node in nodes] == [2000] * (depth - 1) + [innermost_ns]
