"""``GET /api/advice`` on the seeded known-truth workload (tests/support/advice_workload.py).

Golden numbers are worked out by hand from the workload (exact percentiles: position ⌊q·n⌋ of the
sorted values; TTFT = network + queue + prefill; decode = (outputs − 1) × ITL).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from advice_service import SeededAdvice, seeded_collector
from advice_workload import CHANGES, QUEUE_HOURS, exact, workload

MS = 1_000_000
HOUR_NS = 3600 * 1_000_000_000


@pytest.fixture(scope="module")
def seeded(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededAdvice]:
    with seeded_collector(chdb_dsn, Path(tmp_path_factory.mktemp("advice_api")), "advice_api") as running:
        yield running


def get(seeded: SeededAdvice, **params: Any) -> httpx.Response:
    return httpx.get(f"{seeded.url}/api/advice", params=params, timeout=60)


@pytest.fixture(scope="module")
def every_lever(seeded: SeededAdvice) -> dict[tuple[str, str], dict[str, Any]]:
    response = get(seeded, all="true")
    assert response.status_code == 200, response.text
    return {(g["key"]["route"], g["key"]["model"]): g for g in response.json()["groups"]}


def lever(group: dict[str, Any], name: str) -> dict[str, Any]:
    return next(item for item in group["levers"] if item["lever"] == name)


def ms(change: dict[str, Any]) -> tuple[float, ...]:
    return tuple(change[k] / MS for k in ("e2e_p50", "e2e_p95", "ttft_p50", "ttft_p95"))


# --- each route's planted lever ranks first, with the hand-computed change ---------------------------


def test_long_outputs_cap_at_the_p50_length(every_lever) -> None:
    # /story: 30 outputs of 200 tokens, 10 of 1000, 10 ms a token; network 50 + queue 25 + prefill 40.
    # e2e = 115 + (out − 1) × 10 → 2105 ms (30), 10 105 ms (10): p50 = [20] = 2105, p95 = [38] = 10 105.
    # Capped at p50 = 200 tokens: every row 2105 ms → p95 −8000 ms, p50 and TTFT unchanged.
    group = every_lever[("POST /story", "m-writer")]
    top = group["levers"][0]
    assert (top["lever"], top["recommended"]) == ("shorten_outputs", True)
    assert ms(top["change"]) == (0, -8000, 0, 0)
    assert top["after"]["e2e_p95"] == 2105 * MS
    # decode share = (30 × 1990 + 10 × 9990) / (30 × 2105 + 10 × 10 105) = 159 600 / 164 200
    assert top["evidence"]["decode_share"] == round(159_600 / 164_200, 4)
    assert (top["evidence"]["output_tokens_p50"], top["evidence"]["output_tokens_p95"]) == (200, 1000)
    assert top["evidence"]["time_per_output_token_ns"] == 10 * MS
    assert top["evidence"]["requests"] == 40 and top["confidence"] == "medium"
    assert group["dominant"] == "decode"


def test_uncached_prompts_get_prefix_caching(every_lever) -> None:
    # /summarize: 4000-token prompts; 12 read 3000 from the cache (prefill 50 ms), 28 none (200 ms).
    # Rate = (28 × 200 + 12 × 50) ms / (28 × 4000 + 12 × 1000) tokens = 6200 / 124 000 = 50 µs a token.
    # Prefix = median cached share of cached requests = 3000 / 4000 = 75 %.
    # An uncached row caches 0.75 × 4000 = 3000 more tokens: −150 ms of prefill (and of TTFT);
    # e2e 365 → 215 ms (network 40 + queue 30 + prefill 200 + decode 19 × 5), TTFT 270 → 120 ms.
    group = every_lever[("POST /summarize", "m-reader")]
    top = group["levers"][0]
    assert (top["lever"], top["recommended"]) == ("prefix_caching", True)
    assert ms(top["change"]) == (-150, -150, -150, -150)
    evidence = top["evidence"]
    assert evidence["prefill_per_1k_uncached_tokens_ns"] == 50 * MS
    assert evidence["uncached_requests_prefill_per_1k_tokens_ns"] == 50 * MS
    assert evidence["cached_requests_prefill_per_1k_uncached_tokens_ns"] == 50 * MS
    assert (evidence["uncached_requests"], evidence["cached_requests"]) == (28, 12)
    assert evidence["cached_input_share"] == 0.225  # 12 × 3000 / (40 × 4000)
    assert evidence["prefix_share"] == 0.75 and evidence["prefill_rate_source"] == "group"
    assert group["dominant"] == "prefill"


def test_queue_bound_route_moves_to_the_quietest_alternative(seeded, every_lever) -> None:
    # /chat: queue 100 ms, 2000 ms in hours 8–11 (8 of 40 rows); e2e = 270 + queue → 370 / 2270,
    # p50 = 370, p95 = [38] = 2270. The quietest alternative with 20+ requests: m-quick at p-fast
    # (queue 3, 4, 5, 6, 7 ms, six each: median [15] = 5 ms). After: every row 275 ms.
    group = every_lever[("POST /chat", "m-busy")]
    top = group["levers"][0]
    assert (top["lever"], top["recommended"]) == ("queue_alternative", True)
    assert ms(top["change"]) == (-95, -1995, -95, -1995)
    evidence = top["evidence"]
    assert evidence["alternative"] == "m-quick at p-fast" and evidence["alternative_queue_p50_ns"] == 5 * MS
    planted = {(seeded.t0 // HOUR_NS + h) % 24 for h in QUEUE_HOURS}
    assert evidence["worst_hour_utc"] in planted and evidence["worst_hour_queue_p50_ns"] == 2000 * MS
    assert evidence["best_hour_utc"] not in planted and evidence["best_hour_queue_p50_ns"] == 100 * MS


def test_slow_connections_get_network_reuse(every_lever) -> None:
    # /lookup: network 60 ms, 400 ms on 9 of 30; e2e = 29 + network → 89 / 429: p50 [15] = 89,
    # p95 [28] = 429; TTFT = 13 + network → 73 / 413. Network above its median (60) removed.
    top = every_lever[("POST /lookup", "m-quick")]["levers"][0]
    assert (top["lever"], top["recommended"]) == ("network_reuse", True)
    assert ms(top["change"]) == (0, -340, 0, -340)
    assert (top["evidence"]["network_p50_ns"], top["evidence"]["network_p95_ns"]) == (60 * MS, 400 * MS)


def test_slower_model_of_a_route_switches_to_the_faster_one(every_lever) -> None:
    # /answer on gpt-4o (30 ms a token, outputs 80/100/120 ten each): e2e 100 + (out − 1) × 30 →
    # 2470, 3070, 3670: p50 [15] = 3070, p95 [28] = 3670. On gpt-4o-mini (10 ms a token; 7, 7, 6 rows):
    # 890, 1090, 1290: p50 [10] = 1090, p95 [19] = 1290. TTFT is 100 ms on both.
    top = every_lever[("POST /answer", "gpt-4o")]["levers"][0]
    assert (top["lever"], top["recommended"]) == ("switch_model", True)
    assert ms(top["change"]) == (-1980, -2380, 0, 0)
    assert top["evidence"]["alternative"] == "gpt-4o-mini at openai" and top["confidence"] == "medium"
    # Cost side by side (genai-prices' bundled data), for the mean request: 500 input tokens, none
    # cached; outputs 100 on gpt-4o ((80 + 100 + 120) / 3) and 99 on gpt-4o-mini
    # ((7 × 80 + 7 × 100 + 6 × 120) / 20). gpt-4o: $2.50 / M input, $10 / M output →
    # 500 × 2.5e-6 + 100 × 10e-6 = $0.00225; gpt-4o-mini: $0.15 and $0.60 / M →
    # 500 × 0.15e-6 + 99 × 0.6e-6 = $0.0001344.
    assert top["evidence"]["cost_per_request_usd"] == pytest.approx(0.00225)
    assert top["evidence"]["alternative_cost_per_request_usd"] == pytest.approx(0.0001344)
    assert every_lever[("POST /answer", "gpt-4o")]["cost_per_request_usd"] == pytest.approx(0.00225)


def test_models_without_a_price_say_so(seeded, every_lever) -> None:
    story = every_lever[("POST /story", "m-writer")]
    assert story["cost_per_request_usd"] is None and story["priced_requests"] == 40
    assert get(seeded).json()["price_data"].startswith("genai-prices ")


def test_serial_tool_calls_run_at_once(every_lever) -> None:
    # /agent: 20 ms of its own work, two tool calls back to back (300 + 300 ms in 20 requests,
    # 100 + 500 ms in 10), then the model call (network 30 + queue 10 + prefill 40 + decode 95):
    # e2e 795 ms each. At once the tools take max(a, b): saving 300 ms (20) or 100 ms (10), so
    # e2e 495 (20) and 695 (10): p50 [15] = 495, p95 [28] = 695. TTFT (80 ms) is after the tools.
    top = every_lever[("POST /agent", "m-agent")]["levers"][0]
    assert (top["lever"], top["recommended"]) == ("parallel_calls", True)
    assert ms(top["change"]) == (-300, -100, 0, 0)
    assert top["evidence"]["requests_with_serial_siblings"] == 30
    assert top["evidence"]["serial_saving_p50_ns"] == 300 * MS
    # 30 × 600 ms of tool time, all of it on the critical path
    assert top["evidence"]["tool_and_retrieval_busy_ns"] == top["evidence"]["tool_and_retrieval_critical_ns"]
    assert top["evidence"]["tool_and_retrieval_critical_ns"] == 30 * 600 * MS


# --- each lever where it should not be recommended says why ----------------------------------------


@pytest.mark.parametrize(
    ("group", "name", "reason"),
    [
        # 20 tokens every time
        (("POST /summarize", "m-reader"), "shorten_outputs", "outputs are even (p95 20 tokens, p50 20"),
        # 80/100/120 tokens: p95 120 < 1.5 × 100
        (("POST /answer", "gpt-4o-mini"), "shorten_outputs", "outputs are even (p95 120 tokens, p50 100"),
        # prefill 40 × 40 ms of 164 200 ms
        (("POST /story", "m-writer"), "prefix_caching", "prefill is 1% of end-to-end time (below 20%)"),
        # queue 40 × 30 ms of 12 800 ms
        (("POST /summarize", "m-reader"), "queue_alternative", "queue is 9% of end-to-end time"),
        (("POST /classify", "m-quick"), "network_reuse", "network time is even across requests"),
        (("POST /answer", "gpt-4o-mini"), "switch_model", "no other model with 20+ requests on this route"),
        (("POST /chat", "m-busy"), "switch_model", "no other model with 20+ requests on this route"),
        (("POST /story", "m-writer"), "parallel_calls", "tool and retrieval calls are 0% of end-to-end time"),
    ],
)
def test_lever_that_does_not_apply_says_why(every_lever, group, name, reason) -> None:
    found = lever(every_lever[group], name)
    assert not found["recommended"] and found["change"] is None
    assert found["summary"].startswith(reason)


def test_default_lists_recommended_levers_only_and_small_groups_apart(seeded) -> None:
    body = get(seeded, min_requests=35).json()
    assert body["by"] == ["route", "model"] and body["min_requests"] == 35
    assert [(g["key"]["route"], g["count"]) for g in body["groups"]] == [
        ("POST /chat", 40),
        ("POST /story", 40),
        ("POST /summarize", 40),
    ]
    assert all(item["recommended"] for g in body["groups"] for item in g["levers"])
    assert sorted((s["key"]["route"], s["key"]["model"], s["count"]) for s in body["small_groups"]) == [
        ("POST /agent", "m-agent", 30),
        ("POST /answer", "gpt-4o", 30),
        ("POST /answer", "gpt-4o-mini", 20),
        ("POST /classify", "m-quick", 30),
        ("POST /lookup", "m-quick", 30),
    ]
    assert any("floor(q·n)" in line for line in body["method"])


def test_filters_narrow_the_groups_not_the_alternatives(seeded) -> None:
    body = get(seeded, route="POST /chat").json()
    assert [g["key"]["route"] for g in body["groups"]] == ["POST /chat"]
    assert body["groups"][0]["levers"][0]["evidence"]["alternative"] == "m-quick at p-fast"


def test_group_by_route_only_cannot_compare_models(seeded) -> None:
    body = get(seeded, by="route", all="true").json()
    answer = next(g for g in body["groups"] if g["key"] == {"route": "POST /answer"})
    assert answer["count"] == 50
    assert lever(answer, "switch_model")["summary"] == (
        "needs groups by route and model to compare the models of one route"
    )


@pytest.mark.parametrize(
    ("params", "text"),
    [({"by": "colour"}, "allowed: service, route, model, provider"), ({"min_requests": 0}, "min_requests")],
)
def test_bad_parameters_are_422(seeded, params, text) -> None:
    response = get(seeded, **params)
    assert response.status_code == 422 and text in response.text


# --- known truth: the estimate against the workload rerun with the change applied -------------------

TOLERANCE = 0.05
"""An estimate is within 5 % of the route's p95 end-to-end time (before the change) of what the
rerun workload measures."""
PLANTED = {
    "cap_outputs": (("POST /story", "m-writer"), "shorten_outputs"),
    "cache_prefix": (("POST /summarize", "m-reader"), "prefix_caching"),
    "move_queue": (("POST /chat", "m-busy"), "queue_alternative"),
    "reuse_connections": (("POST /lookup", "m-quick"), "network_reuse"),
    "switch_model": (("POST /answer", "gpt-4o"), "switch_model"),
    "parallel_tools": (("POST /agent", "m-agent"), "parallel_calls"),
}


def measured(rows: list[dict[str, Any]]) -> dict[str, float]:
    e2e = [r["e2e_ns"] for r in rows]
    ttft = [r["ttft_ns"] for r in rows]
    return {
        "e2e_p50": exact(e2e, 0.5),
        "e2e_p95": exact(e2e, 0.95),
        "ttft_p50": exact(ttft, 0.5),
        "ttft_p95": exact(ttft, 0.95),
    }


@pytest.mark.parametrize("change", CHANGES)
def test_estimate_matches_the_rerun_with_the_change_applied(seeded, every_lever, change: str) -> None:
    (route, model), name = PLANTED[change]
    group = every_lever[(route, model)]
    assert group["levers"][0]["lever"] == name  # the planted lever ranks first
    # The rerun: the same requests of the route (all its models after a switch), change applied.
    traffic = [r for r in workload(seeded.t0, change) if r["name"] == route]
    if change != "switch_model":
        traffic = [r for r in traffic if r["model"] == model]
    actual = measured(traffic)
    estimated = group["levers"][0]["after"]
    allowed = TOLERANCE * group["e2e_ns"]["p95"]
    for metric, value in actual.items():
        assert abs(estimated[metric] - value) <= allowed, (metric, estimated[metric], value)
