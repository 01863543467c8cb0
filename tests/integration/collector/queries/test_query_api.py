"""GET /api/requests and /api/requests/{trace_id}."""

from __future__ import annotations

from datetime import datetime, timezone

import httpx
import pytest
from otlp_builders import EXPECTED_PARTS_MS, MS, chat_trace, post_protobuf, recent_base_ns

from latencylens_collector.analysis.attribution import COMPONENTS


@pytest.fixture
def loaded(collector):
    """Three requests: a/m1 1000 ms, b/m2 3000 ms, a/m2 2000 ms."""
    base = recent_base_ns()
    for service, model, scale in (("a", "m1", 1), ("b", "m2", 3), ("a", "m2", 2)):
        assert post_protobuf(
            collector.url, chat_trace(base, service=service, model=model, scale=scale)
        ).is_success
    collector.base_ns = base
    return collector


def get(url: str, **params) -> httpx.Response:
    return httpx.get(f"{url}/api/requests", params=params)


def e2e_ms(response: httpx.Response) -> list[int]:
    assert response.status_code == 200, response.text
    return [r["e2e_ns"] // MS for r in response.json()["requests"]]


def test_slowest_first_with_full_summary(loaded) -> None:
    response = get(loaded.url)
    assert e2e_ms(response) == [3000, 2000, 1000]
    summary = response.json()["requests"][2]
    assert set(summary["parts"]) == set(COMPONENTS)
    assert {k: v // MS for k, v in summary["parts"].items()} == EXPECTED_PARTS_MS
    assert (summary["service"], summary["name"], summary["model"], summary["provider"]) == (
        "a",
        "POST /chat",
        "m1",
        "groq",
    )
    assert summary["provenance"]["decode"] == "reported"
    assert summary["ttft_ns"] == 300 * MS
    assert summary["itl_ns"] == 4 * MS
    assert summary["output_tokens"] == 101
    assert summary["model_calls"] == 1
    assert summary["span_count"] == 4
    assert len(summary["trace_id"]) == 32
    start = datetime.fromisoformat(summary["start_time"].replace("Z", "+00:00"))
    assert abs(start.timestamp() * 1e9 - loaded.base_ns) < 1e6


def test_filters_and_limit(loaded) -> None:
    url = loaded.url
    assert e2e_ms(get(url, service="a")) == [2000, 1000]
    assert e2e_ms(get(url, model="m2")) == [3000, 2000]
    assert e2e_ms(get(url, service="a", model="m2")) == [2000]
    assert e2e_ms(get(url, min_duration_ms=1500)) == [3000, 2000]
    assert e2e_ms(get(url, limit=1)) == [3000]
    base_s = loaded.base_ns / 1e9
    assert e2e_ms(get(url, until=base_s - 1)) == []
    assert e2e_ms(get(url, since=base_s - 1, until=base_s + 1)) == [3000, 2000, 1000]
    iso = datetime.fromtimestamp(base_s - 1, tz=timezone.utc).isoformat()
    assert e2e_ms(get(url, since=iso)) == [3000, 2000, 1000]
    assert e2e_ms(get(url, since=base_s + 10)) == []


@pytest.mark.parametrize(
    "value",
    ["x' OR 1=1 --", "a' OR '1'='1", "a\\' OR 1=1 --", "'; DROP TABLE requests; --", "{service:String}"],
)
def test_injection_attempts_match_nothing(loaded, value: str) -> None:
    assert e2e_ms(get(loaded.url, service=value)) == []
    assert e2e_ms(get(loaded.url, model=value)) == []
    assert e2e_ms(get(loaded.url)) == [3000, 2000, 1000]


@pytest.mark.parametrize(
    "params",
    [{"limit": 0}, {"limit": 1001}, {"min_duration_ms": -1}, {"since": "yesterday"}, {"until": "2024-13-99"}],
)
def test_invalid_query_parameters_are_422(collector, params: dict) -> None:
    assert get(collector.url, **params).status_code == 422


def test_request_detail(loaded) -> None:
    slowest = get(loaded.url, limit=1).json()["requests"][0]
    response = httpx.get(f"{loaded.url}/api/requests/{slowest['trace_id'].upper()}")
    assert response.status_code == 200
    detail = response.json()
    assert detail["trace_id"] == slowest["trace_id"]
    assert detail["parts"] == slowest["parts"]
    assert set(detail["busy"]) == set(COMPONENTS)
    [root] = detail["spans"]
    assert root["kind"] == "request"
    assert root["parent_span_id"] is None
    assert root["status"] == "unset"
    assert [child["kind"] for child in root["children"]] == ["retrieval", "model", "tool"]

    def walk(node):
        yield node
        for child in node["children"]:
            yield from walk(child)

    nodes = list(walk(root))
    assert sum(node["critical_ns"] for node in nodes) == detail["e2e_ns"]
    model = next(node for node in nodes if node["kind"] == "model")
    assert model["duration_ns"] == 2100 * MS
    assert model["self_ns"] == model["duration_ns"]
    assert model["attributes"]["gen_ai.provider.name"] == "groq"


def test_unknown_request_is_404(collector) -> None:
    response = httpx.get(f"{collector.url}/api/requests/{'ab' * 16}")
    assert response.status_code == 404


@pytest.mark.parametrize("trace_id", ["xyz", "ab" * 15, "g" * 32, "ab" * 17])
def test_malformed_trace_id_is_422(collector, trace_id: str) -> None:
    assert httpx.get(f"{collector.url}/api/requests/{trace_id}").status_code == 422


def test_openapi_describes_the_routes(collector) -> None:
    schema = httpx.get(f"{collector.url}/openapi.json").json()
    assert {"/v1/traces", "/api/requests", "/api/requests/{trace_id}", "/healthz"} <= set(schema["paths"])
    assert schema["paths"]["/api/requests"]["get"]["summary"] == "Slowest requests"
    assert "RequestSummary" in schema["components"]["schemas"]
