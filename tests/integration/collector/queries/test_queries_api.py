"""GET /api/requests (pages, filters), /api/requests/{id} (explanation), /api/stats, /api/compare.

Request rows with hand-picked numbers are written into the store a real collector reads; every
expected percentile is worked out below: ``quantileBFloat16`` picks the nearest-rank value
(ceil(level × n)) and cuts it to 8 significant bits (``bf16``).
"""

from __future__ import annotations

import time

import httpx
import pytest
from queries_data import MS, S, bf16, request_row, trace_id

from latencylens_collector.analysis import vocabulary
from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.analysis.request_rows import build_request_row

INJECTIONS = ["x' OR 1=1 --", "m1' OR '1'='1", "'; DROP TABLE requests; --", "{f_model:String}"]


def hour_start(offset_h: int) -> int:
    return (time.time_ns() // (3600 * S) + offset_h) * 3600 * S


@pytest.fixture
def loaded(collector):
    """Three requests 3 h and 2 h ago, and a huge one in another project that must never show.

    r1 api/m1/groq e2e 200 = network 20 + queue 30 + prefill 10 + decode 140; ttft 60, itl 5,
       1000 input tokens of which 250 cached, 700 tokens/s.
    r2 api/m1/groq e2e 400 = retrieval 100 + network 20 + queue 50 + prefill 10 + decode 220;
       ttft 80, itl 7, 1000 input, 0 cached, 500 tokens/s.
    r3 api/m2/openai e2e 600 = tool 100 + network 40 + queue 10 + prefill 20 + decode 430;
       not streamed (no ttft, itl, rate); 2000 input, 1000 cached.
    """
    h0 = hour_start(-3)
    collector.h0 = h0
    collector.store.upsert_requests(
        [
            request_row(
                1,
                h0 + 600 * S,
                {"network": 20, "queue": 30, "prefill": 10, "decode": 140},
                ttft_ms=60,
                itl_ms=5,
                input_tokens=1000,
                cached=250,
                tps=700.0,
            ),
            request_row(
                2,
                h0 + 1200 * S,
                {"retrieval": 100, "network": 20, "queue": 50, "prefill": 10, "decode": 220},
                ttft_ms=80,
                itl_ms=7,
                input_tokens=1000,
                tps=500.0,
            ),
            request_row(
                3,
                h0 + 3900 * S,
                {"tool": 100, "network": 40, "queue": 10, "prefill": 20, "decode": 430},
                model="m2",
                provider="openai",
                route="POST /agent",
                input_tokens=2000,
                cached=1000,
            ),
            request_row(99, h0 + 700 * S, {"decode": 10_000}, project="secret"),
        ]
    )
    return collector


def api(url: str, path: str, **params) -> httpx.Response:
    return httpx.get(f"{url}{path}", params=params, timeout=30)


def ok(response: httpx.Response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()


# --- /api/requests ------------------------------------------------------------------------------


def e2e_ms(body: dict) -> list[int]:
    return [r["e2e_ns"] // MS for r in body["requests"]]


def test_list_filters_by_route_and_provider(loaded) -> None:
    assert e2e_ms(ok(api(loaded.url, "/api/requests"))) == [600, 400, 200]
    assert e2e_ms(ok(api(loaded.url, "/api/requests", route="POST /agent"))) == [600]
    assert e2e_ms(ok(api(loaded.url, "/api/requests", provider="groq"))) == [400, 200]
    assert e2e_ms(ok(api(loaded.url, "/api/requests", provider="groq", route="POST /agent"))) == []


def test_cursor_pages_walk_every_request_once(collector) -> None:
    # e2e (ms) 500, 300, 300, 300, 100: the three ties are ordered by trace id (2 < 3 < 4).
    base = hour_start(-1)
    collector.store.upsert_requests(
        [
            request_row(n, base + n * S, {"decode": ms})
            for n, ms in ((1, 500), (2, 300), (3, 300), (4, 300), (5, 100))
        ]
    )
    seen, cursor, pages = [], None, 0
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        body = ok(api(collector.url, "/api/requests", **params))
        seen += [(r["e2e_ns"] // MS, r["trace_id"]) for r in body["requests"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == [
        (500, trace_id(1).hex()),
        *((300, trace_id(n).hex()) for n in (2, 3, 4)),
        (100, trace_id(5).hex()),
    ]


def test_older_version_of_a_trace_is_not_listed(collector) -> None:
    # The first computation put the trace at another start time with 5000 ms; the newer one has 150.
    base = hour_start(-1)
    stale = request_row(7, base - 60 * S, {"tool": 5000}, computed_at_us=1_000_000)
    newest = request_row(7, base, {"tool": 150}, computed_at_us=2_000_000)
    collector.store.upsert_requests([stale, newest, request_row(8, base, {"tool": 100})])
    assert e2e_ms(ok(api(collector.url, "/api/requests"))) == [150, 100]
    body = ok(api(collector.url, "/api/requests", limit=1))
    assert e2e_ms(body) == [150] and body["next_cursor"]


@pytest.mark.parametrize("cursor", ["nope", "MTIzOnh5eg", "YWJjOjEyMw"])
def test_malformed_cursor_is_422(collector, cursor: str) -> None:
    assert api(collector.url, "/api/requests", cursor=cursor).status_code == 422


def test_window_longer_than_90_days_is_422(collector) -> None:
    response = api(collector.url, "/api/requests", since="2024-01-01", until="2024-04-15")
    assert response.status_code == 422
    assert "90 days" in response.text


@pytest.mark.parametrize("value", INJECTIONS)
def test_injection_in_filters_is_a_plain_no_match(loaded, value: str) -> None:
    for field in ("service", "route", "model", "provider"):
        assert ok(api(loaded.url, "/api/requests", **{field: value}))["requests"] == []
        assert ok(api(loaded.url, "/api/stats", **{field: value}))["groups"] == []
        assert (
            ok(
                api(
                    loaded.url,
                    "/api/compare",
                    a_since=loaded.h0 // S,
                    a_until=loaded.h0 // S + 3600,
                    **{field: value},
                )
            )["a"]["count"]
            == 0
        )
    assert e2e_ms(ok(api(loaded.url, "/api/requests"))) == [600, 400, 200]


# --- /api/requests/{trace_id} -------------------------------------------------------------------


def test_detail_explains_the_dominant_component(collector) -> None:
    # Root 0–100 ms with tools a (10–50) and b (10–90) in parallel: b owns 80 ms of the critical
    # path, the root's own work 20 ms (10 before, 10 after); a finished early and owns nothing.
    t0 = hour_start(-1)
    tid = trace_id(42)

    def span(n: int, parent: int, start_ms: int, end_ms: int, kind: str, name: str) -> SpanRow:
        return SpanRow(
            trace_id=tid,
            span_id=n.to_bytes(8, "big"),
            parent_span_id=parent.to_bytes(8, "big"),
            service="api",
            name=name,
            span_kind="internal",
            kind=kind,
            start_ns=t0 + start_ms * MS,
            duration_ns=(end_ms - start_ms) * MS,
        )

    spans = [
        span(1, 0, 0, 100, "request", "POST /chat"),
        span(2, 1, 10, 50, "tool", "a"),
        span(3, 1, 10, 90, "tool", "b"),
    ]
    row = build_request_row(spans, time.time_ns() // 1000)
    assert row is not None
    collector.store.insert_spans(spans)
    collector.store.upsert_requests([row])

    detail = ok(api(collector.url, f"/api/requests/{tid.hex()}"))
    assert detail["parts"]["tool"] == 80 * MS and detail["parts"]["app_other"] == 20 * MS
    explanation = detail["explanation"]
    assert explanation["dominant"] == "tool"
    assert explanation["dominant_ns"] == 80 * MS
    assert explanation["share"] == pytest.approx(0.8)
    assert explanation["provenance"] == "measured"
    assert explanation["sentence"] == (
        "Tool calls took 80 ms of the request's 100 ms (80%); measured by the application's spans."
    )
    [root] = detail["spans"]
    by_name = {child["name"]: child for child in root["children"]}
    assert root["critical_share"] == pytest.approx(0.2) and root["self_ns"] == 20 * MS
    assert by_name["b"]["critical_share"] == pytest.approx(0.8) and by_name["b"]["self_ns"] == 80 * MS
    assert by_name["a"]["critical_share"] == 0 and by_name["a"]["self_ns"] == 40 * MS


def test_detail_of_another_projects_request_is_404(loaded) -> None:
    assert api(loaded.url, f"/api/requests/{trace_id(99).hex()}").status_code == 404
    assert api(loaded.url, f"/api/requests/{trace_id(1).hex()}").status_code == 200


# --- /api/stats ---------------------------------------------------------------------------------


def test_stats_by_model(loaded) -> None:
    body = ok(api(loaded.url, "/api/stats", by="model"))
    assert body["by"] == ["model"] and body["bucket"] is None
    m1, m2 = body["groups"]  # most requests first; the other project's m1 request is not counted
    assert (m1["key"], m1["count"], m2["key"], m2["count"]) == ({"model": "m1"}, 2, {"model": "m2"}, 1)
    # m1 e2e [200, 400]: p50 = rank ceil(0.5·2) = 1 → 200; p90/p95/p99 = rank 2 → 400.
    assert m1["e2e_ns"] == {
        "p50": bf16(200 * MS),
        "p90": bf16(400 * MS),
        "p95": bf16(400 * MS),
        "p99": bf16(400 * MS),
    }
    assert m1["ttft_ns"]["p50"] == bf16(60 * MS) and m1["ttft_ns"]["p99"] == bf16(80 * MS)
    assert m1["itl_ns"]["p95"] == bf16(7 * MS)
    # queue [30, 50]; decode [140, 220]; retrieval [0, 100].
    assert m1["components"]["queue"]["p50"] == bf16(30 * MS)
    assert m1["components"]["decode"]["p99"] == bf16(220 * MS)
    assert m1["components"]["retrieval"]["p50"] == 0
    # Shares of the 600 ms total: decode 360, queue 80, retrieval 100, network 40, prefill 20.
    shares = {name: c["share"] for name, c in m1["components"].items()}
    assert shares == pytest.approx(
        {
            "retrieval": 100 / 600,
            "tool": 0,
            "app_other": 0,
            "network": 40 / 600,
            "queue": 80 / 600,
            "prefill": 20 / 600,
            "decode": 360 / 600,
            "inference": 0,
            "server_other": 0,
            "model_unattributed": 0,
        }
    )
    assert m1["output_tokens_per_second"] == pytest.approx(600.0)  # mean of 700 and 500
    assert m1["cached_token_ratio"] == pytest.approx(250 / 2000)
    # m2 was not streamed: no TTFT/ITL/rate; 1000 of 2000 input tokens cached.
    assert m2["ttft_ns"] == {"p50": None, "p90": None, "p95": None, "p99": None}
    assert m2["output_tokens_per_second"] is None
    assert m2["cached_token_ratio"] == pytest.approx(0.5)


def test_stats_without_groups_and_by_two_fields(loaded) -> None:
    [everything] = ok(api(loaded.url, "/api/stats"))["groups"]
    assert everything["key"] == {} and everything["count"] == 3
    # e2e [200, 400, 600]: p50 rank 2 → 400, p90 rank 3 → 600.
    assert everything["e2e_ns"]["p50"] == bf16(400 * MS) and everything["e2e_ns"]["p90"] == bf16(600 * MS)
    assert sum(c["share"] for c in everything["components"].values()) == pytest.approx(1.0)
    keys = [g["key"] for g in ok(api(loaded.url, "/api/stats", by="provider,route"))["groups"]]
    assert keys == [
        {"provider": "groq", "route": "POST /chat"},
        {"provider": "openai", "route": "POST /agent"},
    ]


def test_stats_in_hour_buckets(loaded) -> None:
    body = ok(api(loaded.url, "/api/stats", bucket="1h", by="service"))
    starts = [(g["bucket_start"], g["count"]) for g in body["groups"]]
    first = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(loaded.h0 // S))
    second = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(loaded.h0 // S + 3600))
    assert [(s.replace("+00:00", "Z"), n) for s, n in starts] == [(first, 2), (second, 1)]


@pytest.mark.parametrize("by", ["model,colour", "name", "model;DROP TABLE requests", "model,model"])
def test_unknown_group_by_is_422_listing_the_allowed_fields(loaded, by: str) -> None:
    for path in ("/api/stats", "/api/compare"):
        response = api(loaded.url, path, by=by)
        assert response.status_code == 422, response.text
        if "twice" not in response.text:
            assert "allowed: service, route, model, provider" in response.json()["detail"]


@pytest.mark.parametrize("params", [{"bucket": "2m"}, {"bucket": "1m"}, {"since": "2020-01-01"}])
def test_stats_limits_are_422(loaded, params: dict) -> None:
    # 1m buckets over the default 24 h are 1440 > 1000 buckets; since 2020 is longer than 90 days.
    assert api(loaded.url, "/api/stats", **params).status_code == 422


# --- /api/compare -------------------------------------------------------------------------------


@pytest.fixture
def shifted(collector):
    """Range A (3 h ago) and B (2 h ago), three requests per group per range, TTFT parts in ms:

    groq/m1    A: network 20 + queue 30 + prefill 10 = 60    B: queue 180 → 210
    openai/m2  A and B: network 40 + queue 10 + prefill 20 = 70
    """
    a0 = hour_start(-3)
    rows, n = [], 0
    for offset, groq_queue in ((0, 30), (3600, 180)):
        for i in range(3):
            for model, provider, net, queue, pre in (
                ("m1", "groq", 20, groq_queue, 10),
                ("m2", "openai", 40, 10, 20),
            ):
                n += 1
                rows.append(
                    request_row(
                        n,
                        a0 + (offset + 60 * i) * S,
                        {"network": net, "queue": queue, "prefill": pre, "decode": 100},
                        model=model,
                        provider=provider,
                        ttft_ms=net + queue + pre,
                    )
                )
    collector.store.upsert_requests(rows)
    collector.a0 = a0
    return collector


def unpriced(count: int) -> dict:
    """A compare side whose requests have no price (rows without a cost): none, never $0."""
    return {"cost_per_request_usd": None, "no_price": count}


def test_compare_names_the_component_and_group_that_moved(shifted) -> None:
    a0 = shifted.a0 // S
    body = ok(
        api(
            shifted.url,
            "/api/compare",
            a_since=a0,
            a_until=a0 + 3600,
            b_since=a0 + 3600,
            b_until=a0 + 7200,
            by="provider,model",
            metric="ttft",
            quantile="p95",
        )
    )
    # A TTFT [60×3, 70×3]: p95 rank ceil(5.7) = 6 → 70. B [70×3, 210×3] → 210.
    assert body["a"] == {"count": 6, "value_ns": bf16(70 * MS), **unpriced(6)}
    assert body["b"] == {"count": 6, "value_ns": bf16(210 * MS), **unpriced(6)}
    assert body["delta_ns"] == bf16(210 * MS) - bf16(70 * MS)
    # Queue p95 30 → 180; network (40) and prefill (20) unchanged.
    top, *rest = body["components"]
    assert top == {
        "name": "queue",
        "a_ns": bf16(30 * MS),
        "b_ns": bf16(180 * MS),
        "delta_ns": bf16(180 * MS) - bf16(30 * MS),
    }
    assert {c["name"]: c["delta_ns"] for c in rest} == {
        "network": 0,
        "prefill": 0,
        "server_other": 0,
        "inference": 0,
        "model_unattributed": 0,
    }
    groq, openai = body["groups"]
    assert groq["key"] == {"provider": "groq", "model": "m1"}
    assert groq["delta_ns"] == bf16(210 * MS) - bf16(60 * MS)
    assert groq["top_component"] == "queue"
    assert groq["top_component_delta_ns"] == bf16(180 * MS) - bf16(30 * MS)
    assert openai["delta_ns"] == 0
    # bf16 keeps 8 significant bits: 210 ms → 209.7 ms, 70 ms → 69.9 ms, 180 → 179.3, 30 → 29.9.
    assert body["summary"] == "p95 TTFT +140 ms, of which queue +149 ms on provider groq, model m1"


# TGI reports queue, inference (prefill + decode together) and a total; parts in ms as attribution
# gives them for its reconstructed headers (x-queue-time 15, x-inference-time 1217, x-total-time 1234)
# on a 1300 ms call: network 1300 − 1234 = 66, server other 1234 − 15 − 1217 = 2.
TGI_PROVENANCE = {
    "network": "derived",
    "queue": "reported",
    "inference": "reported",
    "server_other": "derived",
}


def tgi_row(n: int, start_ns: int, inference_ms: int) -> dict:
    row = request_row(
        n,
        start_ns,
        {"network": 66, "queue": 15, "inference": inference_ms, "server_other": 2},
        model="llama-3.1-8b",
        provider="tgi",
    )
    row["provenance"] = TGI_PROVENANCE
    return row


def test_unsplit_inference_in_requests_detail_stats_and_compare(collector) -> None:
    """Range A (3 h ago): three TGI calls with inference 1217 ms; range B (2 h ago): 1417 ms."""
    a0 = hour_start(-3)
    collector.store.upsert_requests(
        [tgi_row(n, a0 + 60 * n * S, 1217) for n in (1, 2, 3)]
        + [tgi_row(n, a0 + (3600 + 60 * n) * S, 1417) for n in (4, 5, 6)]
    )
    since, middle, until = a0 // S, a0 // S + 3600, a0 // S + 7200

    listed = ok(api(collector.url, "/api/requests", since=since, until=until))["requests"]
    assert [r["e2e_ns"] for r in listed] == [1500 * MS] * 3 + [1300 * MS] * 3  # 66 + 15 + 1417 + 2
    assert listed[0]["parts"]["inference"] == 1417 * MS
    assert listed[0]["parts"]["server_other"] == 2 * MS
    assert listed[0]["parts"]["prefill"] == listed[0]["parts"]["decode"] == 0
    assert listed[0]["provenance"]["inference"] == "reported"

    detail = ok(api(collector.url, f"/api/requests/{trace_id(1).hex()}"))
    assert detail["explanation"]["dominant"] == "inference"
    # 1217 / 1300 = 94 %
    assert detail["explanation"]["sentence"] == (
        "Prefill + decode (not split by the provider) on llama-3.1-8b (tgi) took 1.22 s of the request's "
        "1.30 s (94%); tgi reported queue 15 ms and inference (prefill + decode, not split) 1.22 s; "
        "2.0 ms of server time outside them."
    )

    (group,) = ok(api(collector.url, "/api/stats", since=since, until=until, by="provider"))["groups"]
    assert group["key"] == {"provider": "tgi"}
    inference = group["components"]["inference"]
    # Six values [1217×3, 1417×3]: p50 rank 3 → 1217, p90 rank ceil(5.4) = 6 → 1417.
    assert (inference["p50"], inference["p90"]) == (bf16(1217 * MS), bf16(1417 * MS))
    # Shares of 3 × 1300 + 3 × 1500 = 8400 ms: inference 3 × 1217 + 3 × 1417 = 7902, other 6 × 2 = 12.
    assert inference["share"] == pytest.approx(7902 / 8400)
    assert group["components"]["server_other"]["share"] == pytest.approx(12 / 8400)
    assert group["components"]["server_other"]["p99"] == bf16(2 * MS)

    body = ok(
        api(
            collector.url,
            "/api/compare",
            a_since=since,
            a_until=middle,
            b_since=middle,
            b_until=until,
            metric="e2e",
            quantile="p50",
        )
    )
    top = body["components"][0]
    assert (top["name"], top["delta_ns"]) == ("inference", bf16(1417 * MS) - bf16(1217 * MS))
    assert body["summary"].startswith("p50 end-to-end +") and ", of which inference +" in body["summary"]


def test_compare_ranges_may_overlap(shifted) -> None:
    """Both ranges come from one scan; a request in both ranges counts in each."""
    a0 = shifted.a0 // S
    body = ok(
        api(
            shifted.url,
            "/api/compare",
            a_since=a0,
            a_until=a0 + 7200,
            b_since=a0 + 3600,
            b_until=a0 + 7200,
            by="provider",
            metric="ttft",
            quantile="p95",
        )
    )
    # A holds all 12 requests: TTFT [60×3, 70×6, 210×3], the top 3 (ranks 10–12) are 210, so p95
    # (rank ceil(11.4) = 12) is 210. B holds the later 6: [70×3, 210×3] → 210 as well.
    assert body["a"] == {"count": 12, "value_ns": bf16(210 * MS), **unpriced(12)}
    assert body["b"] == {"count": 6, "value_ns": bf16(210 * MS), **unpriced(6)}
    assert body["delta_ns"] == 0
    # groq A [60×3, 210×3] → p95 210 = B's p95; openai 70 in both.
    assert [(g["key"], g["a_ns"], g["b_ns"]) for g in body["groups"]] == [
        ({"provider": "groq"}, bf16(210 * MS), bf16(210 * MS)),
        ({"provider": "openai"}, bf16(70 * MS), bf16(70 * MS)),
    ]


def test_compare_rejects_unknown_metric_and_quantile(collector) -> None:
    assert api(collector.url, "/api/compare", metric="tpot").status_code == 422
    assert api(collector.url, "/api/compare", quantile="p42").status_code == 422


def test_compare_with_an_empty_range_says_so(collector) -> None:
    body = ok(api(collector.url, "/api/compare"))
    assert body["a"]["count"] == 0 and body["delta_ns"] is None
    assert "not enough requests" in body["summary"]


def test_openapi_lists_the_query_routes(collector) -> None:
    schema = ok(api(collector.url, "/openapi.json"))
    assert {"/api/requests", "/api/requests/{trace_id}", "/api/stats", "/api/compare"} <= set(schema["paths"])
    assert {"StatsResponse", "CompareResponse", "Explanation"} <= set(schema["components"]["schemas"])
    parts = schema["components"]["schemas"]["RequestSummary"]["properties"]["parts"]["description"]
    # Every part key is described with its label, in the vocabulary's order.
    keys = [term.key for term in vocabulary.PARTS]
    positions = [parts.index(f'{term.key} ("{term.label}"') for term in vocabulary.PARTS]
    assert positions == sorted(positions) and "model_unattributed" in keys
