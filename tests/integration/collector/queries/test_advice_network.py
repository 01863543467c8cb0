"""Known truth for the advisor's network lever: network time per provider endpoint (the model
span's ``server.address``) and connection-reuse evidence, on real chdb.

Two routes, one planted cause each (every request: queue 10 + prefill 20 + decode 100 ms besides
its network time, so e2e = 130 + network and TTFT = 30 + network):

==========  =============================  ==================================================
route       endpoint(s)                    planted cause
==========  =============================  ==================================================
POST /near  api.p-near.example             new connections: 8 bursts of 5 requests 1 s apart,
                                           60 s between bursts; the first of a burst (after
                                           ≥ 5 s idle, its pooled connection closed) takes
                                           300 ms of network, the 4 others 40 ms
POST /geo   eu.p-geo.example (30),         distance: us takes 400 ms of network every time,
            us.p-geo.example (15)          eu 40 ms; requests 1 s apart (us every 3 s: warm)
==========  =============================  ==================================================

Percentiles are exact: the value at 0-based position ⌊q·n⌋ of the n sorted values.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
from advice_workload import exact
from queries_data import MS, S, request_row, trace_id

from latencylens import semconv
from latencylens_collector.analysis.records import NO_PARENT, SpanRow
from latencylens_collector.queries.advice import advice

OTHER_MS = {"queue": 10, "prefill": 20, "decode": 100}


def _request(
    n: int, start_ns: int, route: str, provider: str, host: str, network_ms: float
) -> tuple[dict, list]:
    row = request_row(
        n,
        start_ns,
        {"network": network_ms, **OTHER_MS},
        route=route,
        model="m-net",
        provider=provider,
        ttft_ms=network_ms + 30,
        itl_ms=10,
        input_tokens=100,
        output_tokens=11,
    )
    root, model = b"\x01" * 8, b"\x02" * 8
    spans = [
        SpanRow(
            trace_id=trace_id(n),
            span_id=root,
            parent_span_id=NO_PARENT,
            service="api",
            name=route,
            span_kind="server",
            kind="request",
            start_ns=start_ns,
            duration_ns=row["e2e_ns"],
        ),
        SpanRow(
            trace_id=trace_id(n),
            span_id=model,
            parent_span_id=root,
            service="api",
            name="chat m-net",
            span_kind="client",
            kind="model",
            start_ns=start_ns,
            duration_ns=row["e2e_ns"],
            attributes={semconv.SERVER_ADDRESS: host, semconv.SERVER_PORT: "443"},
        ),
    ]
    return row, spans


def near(t0: int, reuse: bool = False) -> list[tuple[dict, list]]:
    out = []
    for burst in range(8):
        for k in range(5):
            network = 300.0 if k == 0 and not reuse else 40.0
            start = t0 + burst * 60 * S + k * S
            out.append(
                _request(100 + burst * 5 + k, start, "POST /near", "p-near", "api.p-near.example", network)
            )
    return out


def geo(t0: int, move: bool = False) -> list[tuple[dict, list]]:
    out = []
    for i in range(45):
        far = i % 3 == 2  # 15 of 45 go to us
        host = "us.p-geo.example" if far and not move else "eu.p-geo.example"
        out.append(
            _request(
                200 + i,
                t0 + 600 * S + i * S,
                "POST /geo",
                "p-geo",
                host,
                400.0 if host.startswith("us") else 40.0,
            )
        )
    return out


def measured(requests: list[tuple[dict, list]]) -> dict[str, float]:
    e2e = [r["e2e_ns"] for r, _ in requests]
    ttft = [r["ttft_ns"] for r, _ in requests]
    return {
        "e2e_p50": exact(e2e, 0.5),
        "e2e_p95": exact(e2e, 0.95),
        "ttft_p50": exact(ttft, 0.5),
        "ttft_p95": exact(ttft, 0.95),
    }


@pytest.fixture
def groups(store) -> dict[str, Any]:
    t0 = time.time_ns() - 40 * 60 * S
    requests = near(t0) + geo(t0)
    store.upsert_requests([r for r, _ in requests])
    store.insert_spans([s for _, spans in requests for s in spans])
    answer = advice(store, "default", now=datetime.now(UTC), since="1h", include_all=True)
    return {g.key["route"]: g for g in answer.groups} | {"t0": t0}


def _network(group) -> Any:
    (lever,) = [lv for lv in group.levers if lv.lever == "network_reuse"]
    return lever


def test_new_connections_are_seen_and_reuse_is_ranked_first(groups) -> None:
    near_group = groups["POST /near"]
    top = near_group.levers[0]
    assert (top.lever, top.recommended) == ("network_reuse", True)
    # network: 32 × 40 ms, 8 × 300 ms → p50 [20] = 40, p95 [38] = 300; e2e = 130 + network
    assert (top.evidence["network_p50_ns"], top.evidence["network_p95_ns"]) == (40 * MS, 300 * MS)
    # the 8 first requests of a burst came ≥ 5 s after the previous one (the first of all has none)
    assert (top.evidence["after_idle_requests"], top.evidence["after_idle_network_p50_ns"]) == (8, 300 * MS)
    assert (top.evidence["warm_requests"], top.evidence["warm_network_p50_ns"]) == (32, 40 * MS)
    assert top.summary.startswith("reuse connections to api.p-near.example")
    assert any(a.startswith("connection set-up is seen") and "about 260 ms" in a for a in top.assumptions)
    assert [
        (e.endpoint, e.requests, e.network_p50_ns, e.network_p95_ns) for e in top.network_by_endpoint
    ] == [("api.p-near.example", 40, 40 * MS, 300 * MS)]
    # estimate = the rerun with every connection reused (the bursts' first requests at 40 ms too):
    # e2e p95 430 → 170 ms, TTFT p95 330 → 70 ms
    assert top.after.model_dump() == measured(near(groups["t0"], reuse=True))
    assert (top.change.e2e_p95, top.change.ttft_p95) == (-260 * MS, -260 * MS)


def test_a_far_endpoint_is_named_and_reuse_is_not_claimed(groups) -> None:
    top = groups["POST /geo"].levers[0]
    assert (top.lever, top.recommended) == ("network_reuse", True)
    # us: 15 × 400 ms; eu: 30 × 40 ms; slowest p50 first
    assert [
        (e.endpoint, e.requests, e.network_p50_ns, e.network_p95_ns) for e in top.network_by_endpoint
    ] == [
        ("us.p-geo.example", 15, 400 * MS, 400 * MS),
        ("eu.p-geo.example", 30, 40 * MS, 40 * MS),
    ]
    assert (top.evidence["slowest_endpoint"], top.evidence["fastest_endpoint"]) == (
        "us.p-geo.example",
        "eu.p-geo.example",
    )
    assert top.summary.startswith("call eu.p-geo.example rather than us.p-geo.example")
    # only each endpoint's first request came after idle: 2 < 5, too few to tell reuse
    assert (top.evidence["after_idle_requests"], top.evidence["warm_requests"]) == (2, 43)
    assert any(a.startswith("the data does not tell connection reuse") for a in top.assumptions)
    # estimate = the rerun with us's requests sent to eu: all at 40 ms, e2e p95 530 → 170 ms
    assert top.after.model_dump() == measured(geo(groups["t0"], move=True))
    assert top.change.e2e_p95 == -360 * MS


def test_other_levers_carry_no_endpoint_table(groups) -> None:
    others = [lv for lv in groups["POST /near"].levers if lv.lever != "network_reuse"]
    assert others and all(lv.network_by_endpoint is None for lv in others)
