"""The advisor's lever arithmetic and rules (analysis/advice.py) on hand-built group measures."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from latencylens_collector.analysis import advice as a
from latencylens_collector.analysis.advice import Alternative, GroupMeasures, Percentiles, PrefillSums

MS = 1_000_000
BY = ("route", "model")


def group(parts_ms: dict[str, int], count: int = 40, **fields: Any) -> GroupMeasures:
    """A group whose summed critical-path parts are ``parts_ms`` (ms, already summed over rows)."""
    values: dict[str, Any] = {
        "key": {"route": "POST /x", "model": "m"},
        "count": count,
        "e2e": Percentiles(1000 * MS, 2000 * MS),
        "ttft": Percentiles(100 * MS, 200 * MS),
        "part_sums": {name: ms * MS for name, ms in parts_ms.items()},
        "route": "POST /x",
        "model": "m",
        "provider": "p",
    }
    values.update(fields)
    return GroupMeasures(**values)


def plan_of(m: GroupMeasures, lever: str, alternatives: tuple[Alternative, ...] = ()) -> a.LeverPlan:
    plan = a.plan_group(m, alternatives, 20, BY)
    return next(p for p in plan.levers if p.lever == lever)


# --- per-row arithmetic ---------------------------------------------------------------------------


def test_decode_saving_is_tokens_above_the_cap_times_itl_never_above_decode() -> None:
    # 1000 tokens capped at 200 at 10 ms a token: 800 × 10 ms = 8000 ms (decode was 9990 ms).
    assert a.decode_saving_ns(1000, 200, 10 * MS, 9990 * MS) == 8000 * MS
    # a decode of 5000 ms cannot give 8000 ms
    assert a.decode_saving_ns(1000, 200, 10 * MS, 5000 * MS) == 5000 * MS
    assert a.decode_saving_ns(150, 200, 10 * MS, 1490 * MS) == 0  # below the cap
    assert a.decode_saving_ns(None, 200, 10 * MS, 1490 * MS) == 0  # count unknown


def test_prefill_saving_is_newly_cached_tokens_times_rate() -> None:
    # 4000 tokens, none cached, a prefix of 75 % → 3000 newly cached × 50 µs = 150 ms of 200 ms.
    assert a.prefill_saving_ns(4000, 0, 50_000, 0.75, 200 * MS) == 150 * MS
    # 3000 already cached: the prefix adds nothing
    assert a.prefill_saving_ns(4000, 3000, 50_000, 0.75, 50 * MS) == 0
    # never more than the row's own prefill
    assert a.prefill_saving_ns(4000, 0, 50_000, 0.75, 100 * MS) == 100 * MS
    assert a.prefill_saving_ns(None, 0, 50_000, 0.75, 100 * MS) == 0


def test_queue_and_network_arithmetic() -> None:
    assert a.queue_change_ns(2000 * MS, 5 * MS) == 1995 * MS
    assert a.queue_change_ns(3 * MS, 5 * MS) == -2 * MS  # a shorter queue than the median gets longer
    assert a.network_saving_ns(400 * MS, 60 * MS) == 340 * MS
    assert a.network_saving_ns(50 * MS, 60 * MS) == 0


def test_confidence_by_samples_coverage_and_ceiling() -> None:
    assert a.confidence(100, 0.9, 20) == "high"
    assert a.confidence(100, 0.5, 20) == "medium"  # most rows lack the value
    assert a.confidence(99, 1.0, 20) == "medium"
    assert a.confidence(19, 1.0, 20) == "low"
    assert a.confidence(500, 1.0, 20, ceiling="medium") == "medium"


def test_prefill_sums_rate_and_addition() -> None:
    both = PrefillSums(28, 5600 * MS, 112_000) + PrefillSums(12, 600 * MS, 12_000)
    assert both == PrefillSums(40, 6200 * MS, 124_000)
    assert both.rate_ns == 50_000  # 6200 ms / 124 000 tokens = 50 µs
    assert PrefillSums().rate_ns is None


# --- shorten_outputs ------------------------------------------------------------------------------

DECODE_BOUND = {"network": 100, "queue": 50, "prefill": 50, "decode": 800}


def test_shorten_outputs_planned_with_the_p50_cap() -> None:
    m = group(
        DECODE_BOUND,
        output_requests=40,
        output_tokens=Percentiles(200, 1000),
        per_token_requests=40,
        per_token_ns=10 * MS,
    )
    plan = a.plan_group(m, (), 20, BY)
    lever = plan.levers[0]
    assert lever.lever == a.SHORTEN_OUTPUTS and lever.reason is None
    assert plan.what_if.output_cap == 200
    assert (
        lever.evidence["output_tokens_p95"] == 1000 and lever.evidence["time_per_output_token_ns"] == 10 * MS
    )
    assert lever.confidence == "medium"  # 40 rows: at least the minimum, below 100


@pytest.mark.parametrize(
    ("parts", "fields", "reason"),
    [
        ({"network": 900, "decode": 100}, {"output_tokens": Percentiles(200, 1000)}, "decode is 10% of"),
        (DECODE_BOUND, {"output_tokens": Percentiles(100, 120)}, "outputs are even (p95 120 tokens, p50 100"),
        (DECODE_BOUND, {"per_token_requests": 0}, "no output token counts"),
    ],
)
def test_shorten_outputs_does_not_apply(parts: dict[str, int], fields: dict[str, Any], reason: str) -> None:
    values = {
        "output_requests": 40,
        "per_token_requests": 40,
        "per_token_ns": 10 * MS,
        "output_tokens": Percentiles(200, 1000),
        **fields,
    }
    lever = plan_of(group(parts, **values), a.SHORTEN_OUTPUTS)
    assert lever.reason is not None and reason in lever.reason


# --- prefix_caching -------------------------------------------------------------------------------

PREFILL_BOUND = {"network": 40, "queue": 30, "prefill": 620, "decode": 95}


def prefill_group(**fields: Any) -> GroupMeasures:
    values: dict[str, Any] = {
        "prefill": PrefillSums(40, 6200 * MS, 124_000),
        "prefill_uncached": PrefillSums(28, 5600 * MS, 112_000),
        "prefill_cached": PrefillSums(12, 600 * MS, 12_000),
        "cached_prefix_share": 0.75,
        "input_tokens": 160_000,
        "cached_tokens": 36_000,
        **fields,
    }
    return group(PREFILL_BOUND, **values)


def test_prefix_caching_uses_the_groups_rate_and_measured_prefix() -> None:
    plan = a.plan_group(prefill_group(), (), 20, BY)
    lever = next(p for p in plan.levers if p.lever == a.PREFIX_CACHING)
    assert lever.reason is None
    assert plan.what_if.prefill_rate_ns == 50_000 and plan.what_if.prefix_share == 0.75
    assert lever.evidence["uncached_requests_prefill_per_1k_tokens_ns"] == 50 * MS
    assert lever.evidence["cached_input_share"] == 0.225  # 36 000 / 160 000
    assert "median cached share" in " ".join(lever.assumptions)


def test_prefix_caching_assumes_a_prefix_share_without_cached_requests() -> None:
    plan = a.plan_group(prefill_group(cached_prefix_share=None, cached_tokens=0), (), 20, BY)
    lever = next(p for p in plan.levers if p.lever == a.PREFIX_CACHING)
    assert plan.what_if.prefix_share == a.DEFAULT_PREFIX_SHARE
    assert any("assumed" in text for text in lever.assumptions)
    assert lever.confidence == "medium"


def test_prefix_caching_falls_back_to_the_models_rate_at_the_provider() -> None:
    elsewhere = Alternative(
        "POST /y", "m", "p", 50, Percentiles(), Percentiles(), 0, PrefillSums(50, 1000 * MS, 100_000)
    )
    plan = a.plan_group(prefill_group(prefill=PrefillSums()), (elsewhere,), 20, BY)
    lever = next(p for p in plan.levers if p.lever == a.PREFIX_CACHING)
    assert plan.what_if.prefill_rate_ns == 10_000  # 1000 ms / 100 000 tokens
    assert lever.evidence["prefill_rate_source"] == "model m at p" and lever.confidence == "low"


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"cached_tokens": 120_000}, "the cache already serves 75% of input tokens"),
        ({"prefill": PrefillSums()}, "no prefill time split by the provider"),
        ({"input_tokens": 0, "cached_tokens": 0}, "no input token counts"),
    ],
)
def test_prefix_caching_does_not_apply(fields: dict[str, Any], reason: str) -> None:
    lever = plan_of(prefill_group(**fields), a.PREFIX_CACHING)
    assert lever.reason == reason or (lever.reason is not None and lever.reason.startswith(reason))


def test_prefix_caching_not_when_prefill_is_small() -> None:
    lever = plan_of(
        dataclasses.replace(prefill_group(), part_sums={"decode": 900 * MS, "prefill": 100 * MS}),
        a.PREFIX_CACHING,
    )
    assert lever.reason == "prefill is 10% of end-to-end time (below 20%)"


# --- queue_alternative ----------------------------------------------------------------------------

QUEUE_BOUND = {"network": 50, "queue": 600, "prefill": 50, "decode": 300}


def alt(model: str, provider: str, count: int, queue_ms: int, route: str = "POST /y") -> Alternative:
    return Alternative(route, model, provider, count, Percentiles(), Percentiles(), queue_ms * MS)


def test_queue_alternative_picks_the_lowest_median_queue_with_enough_requests() -> None:
    m = group(
        QUEUE_BOUND,
        queue=Percentiles(100 * MS, 2000 * MS),
        queue_by_hour=((3, 2, 100 * MS), (12, 2, 2000 * MS)),
    )
    alts = (alt("m", "p", 40, 100), alt("a", "q", 30, 5), alt("b", "r", 5, 1), alt("c", "s", 30, 9))
    plan = a.plan_group(m, alts, 20, BY)
    lever = next(p for p in plan.levers if p.lever == a.QUEUE_ALTERNATIVE)
    assert lever.reason is None
    assert plan.what_if.alternative_queue_ns == 5 * MS  # "b" has 1 ms but only 5 requests
    assert lever.evidence["alternative"] == "a at q"
    assert (lever.evidence["worst_hour_utc"], lever.evidence["best_hour_utc"]) == (12, 3)


def test_queue_alternative_not_without_a_shorter_queue_elsewhere() -> None:
    m = group(QUEUE_BOUND, queue=Percentiles(100 * MS, 2000 * MS))
    lever = plan_of(m, a.QUEUE_ALTERNATIVE, (alt("a", "q", 30, 150),))
    assert lever.reason is not None and lever.reason.startswith("no other provider/model with 20+ requests")


def test_queue_alternative_not_when_queue_is_small() -> None:
    lever = plan_of(
        group(DECODE_BOUND, queue=Percentiles(5 * MS, 9 * MS)), a.QUEUE_ALTERNATIVE, (alt("a", "q", 30, 1),)
    )
    assert lever.reason == "queue is 5% of end-to-end time (below 20%)"


# --- network_reuse --------------------------------------------------------------------------------


def test_network_reuse_caps_at_the_median() -> None:
    plan = a.plan_group(
        group({"network": 800, "decode": 200}, network=Percentiles(60 * MS, 400 * MS)), (), 20, BY
    )
    assert plan.what_if.network_cap_ns == 60 * MS
    assert next(p for p in plan.levers if p.lever == a.NETWORK_REUSE).reason is None


def test_network_reuse_not_when_network_is_even() -> None:
    lever = plan_of(
        group({"network": 800, "decode": 200}, network=Percentiles(60 * MS, 60 * MS)), a.NETWORK_REUSE
    )
    assert lever.reason == "network time is even across requests: no slow connections to remove"


@pytest.mark.parametrize(
    ("reuse", "endpoints", "action", "said"),
    [
        # 8 requests after idle at 300 ms against 32 warm at 40 ms: 300 ≥ 1.5 × 40
        (
            a.ReuseSplit(8, 300 * MS, 32, 40 * MS),
            ("api.near",),
            "reuse connections to api.near",
            "connection set-up is seen",
        ),
        # enough of each, but after-idle requests are no slower: distance, not set-up
        (
            a.ReuseSplit(8, 50 * MS, 32, 40 * MS),
            ("api.near",),
            "reuse connections / a closer region",
            "no sign of",
        ),
        # two endpoints, too few idle requests to tell: call the faster one
        (
            a.ReuseSplit(2, 400 * MS, 43, 40 * MS),
            ("us.geo", "eu.geo"),
            "call eu.geo rather than us.geo",
            "does not tell",
        ),
    ],
)
def test_network_reuse_says_what_the_idle_gap_shows(reuse, endpoints, action, said) -> None:
    listed = tuple(
        a.EndpointNetwork(e, 10, Percentiles(400 * MS - i * 360 * MS, 400 * MS))
        for i, e in enumerate(endpoints)
    )
    lever = plan_of(
        group(
            {"network": 800, "decode": 200},
            network=Percentiles(40 * MS, 300 * MS),
            reuse=reuse,
            endpoints=listed,
        ),
        a.NETWORK_REUSE,
    )
    assert lever.reason is None and lever.action.startswith(action)
    assert any(said in text for text in lever.assumptions)
    assert lever.endpoints == listed
    assert lever.evidence["after_idle_requests"] == reuse.idle_requests


# --- parallel_calls -------------------------------------------------------------------------------


def test_parallel_saving_of_sibling_calls() -> None:
    # back to back, 300 + 300 ms: at once they take 300 ms
    assert a.parallel_saving_ns([(0, 300 * MS), (300 * MS, 300 * MS)]) == 300 * MS
    # 100 then 500 ms with a 50 ms gap: the span is 650 ms, the busy time 600 ms, the longest 500
    assert a.parallel_saving_ns([(0, 100 * MS), (150 * MS, 500 * MS)]) == 100 * MS
    # already overlapping: 0–400 and 100–500 span 500 ms, less the longest (400)
    assert a.parallel_saving_ns([(0, 400 * MS), (100 * MS, 400 * MS)]) == 100 * MS
    assert a.parallel_saving_ns([(0, 400 * MS), (0, 400 * MS)]) == 0  # fully parallel
    assert a.parallel_saving_ns([(0, 400 * MS)]) == 0  # one call has no sibling


TOOL_BOUND = {"tool": 600, "app_other": 20, "decode": 175}


def test_parallel_calls_planned_for_serial_siblings() -> None:
    plan = a.plan_group(
        group(TOOL_BOUND, count=30, serial_requests=30, serial_saving_p50=300 * MS), (), 20, BY
    )
    lever = next(p for p in plan.levers if p.lever == a.PARALLEL_CALLS)
    assert lever.reason is None and plan.what_if.parallel_calls == 1.0
    assert lever.evidence["serial_saving_p50_ns"] == 300 * MS and lever.confidence == "medium"


def test_parallel_calls_not_without_serial_siblings_or_tool_time() -> None:
    lever = plan_of(group(TOOL_BOUND, serial_requests=0), a.PARALLEL_CALLS)
    assert lever.reason == "no sibling tool or retrieval calls ran one after another"
    lever = plan_of(group(DECODE_BOUND, serial_requests=30), a.PARALLEL_CALLS)
    assert lever.reason == "tool and retrieval calls are 0% of end-to-end time (below 20%)"


# --- switch_model ---------------------------------------------------------------------------------


def test_switch_model_takes_the_faster_model_of_the_same_route() -> None:
    m = group(DECODE_BOUND, e2e=Percentiles(3070 * MS, 3670 * MS))
    fast = Alternative(
        "POST /x", "m-fast", "b", 20, Percentiles(1090 * MS, 1290 * MS), Percentiles(100 * MS, 100 * MS), 0
    )
    other_route = Alternative("POST /y", "m-faster", "b", 50, Percentiles(10 * MS, 20 * MS), Percentiles(), 0)
    lever = plan_of(m, a.SWITCH_MODEL, (fast, other_route))
    assert lever.reason is None and lever.measured_after == (fast.e2e, fast.ttft)
    assert lever.evidence["alternative"] == "m-fast at b"


def test_switch_model_not_when_the_other_model_is_slower_or_not_grouped_by_model() -> None:
    m = group(DECODE_BOUND, e2e=Percentiles(1090 * MS, 1290 * MS))
    slow = Alternative("POST /x", "m-slow", "a", 30, Percentiles(3070 * MS, 3670 * MS), Percentiles(), 0)
    assert plan_of(m, a.SWITCH_MODEL, (slow,)).reason == (
        "no other model with 20+ requests on this route is faster at p95"
    )
    lever = next(p for p in a.plan_group(m, (slow,), 20, ("route",)).levers if p.lever == a.SWITCH_MODEL)
    assert lever.reason == "needs groups by route and model to compare the models of one route"


# --- judge and rank -------------------------------------------------------------------------------


def test_judge_recommends_from_a_five_percent_p95_cut_and_ranks_by_p95_saving() -> None:
    m = group(
        QUEUE_BOUND,
        e2e=Percentiles(1000 * MS, 2000 * MS),
        ttft=Percentiles(100 * MS, 200 * MS),
        queue=Percentiles(100 * MS, 2000 * MS),
        network=Percentiles(40 * MS, 60 * MS),
        output_requests=40,
        output_tokens=Percentiles(100, 400),
        per_token_requests=40,
        per_token_ns=MS,
    )
    plan = a.plan_group(m, (alt("a", "q", 30, 5),), 20, BY)
    after = {
        # 2000 → 1900 ms: exactly 5 % → recommended
        a.SHORTEN_OUTPUTS: (Percentiles(1000 * MS, 1900 * MS), m.ttft),
        # 2000 → 500 ms
        a.QUEUE_ALTERNATIVE: (Percentiles(900 * MS, 500 * MS), Percentiles(5 * MS, 10 * MS)),
    }
    verdicts = a.judge(plan, after)
    assert [(v.lever, v.recommended) for v in verdicts[:2]] == [
        (a.QUEUE_ALTERNATIVE, True),
        (a.SHORTEN_OUTPUTS, True),
    ]
    queue = verdicts[0]
    assert queue.change == a.Change(-100 * MS, -1500 * MS, -95 * MS, -190 * MS)
    assert queue.summary == "move to a at q: p95 end-to-end −1.50 s, p95 TTFT −190 ms"
    assert all(not v.recommended for v in verdicts[2:])


def test_judge_does_not_recommend_a_small_cut() -> None:
    m = group(
        DECODE_BOUND,
        output_requests=40,
        output_tokens=Percentiles(100, 400),
        per_token_requests=40,
        per_token_ns=MS,
    )
    plan = a.plan_group(m, (), 20, BY)
    verdicts = a.judge(plan, {a.SHORTEN_OUTPUTS: (Percentiles(1000 * MS, 1950 * MS), m.ttft)})
    shorten = next(v for v in verdicts if v.lever == a.SHORTEN_OUTPUTS)
    assert not shorten.recommended
    # 2000 → 1950 ms: 2.5 %
    assert shorten.summary.startswith(
        "cap outputs at 100 tokens (p50; p95 is 400) would cut p95 by 2.5% only"
    )
    verdicts = a.judge(plan, {a.SHORTEN_OUTPUTS: (m.e2e, m.ttft)})
    shorten = next(v for v in verdicts if v.lever == a.SHORTEN_OUTPUTS)
    assert (
        shorten.summary
        == "cap outputs at 100 tokens (p50; p95 is 400) would not cut p95 end-to-end time or TTFT"
    )
