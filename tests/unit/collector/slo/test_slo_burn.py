"""Burn-rate arithmetic and the alert lifecycle, against numbers worked out by hand."""

from __future__ import annotations

import pytest

from latencylens_collector.queries.times import parse_duration
from latencylens_collector.slo.burn import (
    FAST_BURN,
    SLOW_BURN,
    Counts,
    budget_remaining,
    burn_rate,
    percentile_breached,
    percentile_burn_rate,
    ratio_verdict,
)
from latencylens_collector.slo.lifecycle import FIRING, PENDING, RESOLVED, advance

MS = 1_000_000
MIN = 60_000_000_000


def test_burn_rate_is_bad_share_over_allowed_share() -> None:
    # 150 of 1000 bad = 15 %; a 99 % target allows 1 % → burn 15.
    assert burn_rate(Counts(total=1000, bad=150), 0.99) == pytest.approx(15.0)
    # 3 of 600 bad = 0.5 % → half the allowed speed.
    assert burn_rate(Counts(total=600, bad=3), 0.99) == pytest.approx(0.5)
    assert burn_rate(Counts(total=0, bad=0), 0.99) is None


def test_budget_remaining_over_the_period() -> None:
    # 10,000 requests at 99 % may have 100 bad; 40 bad spent 40 % → 60 % left.
    assert budget_remaining(Counts(total=10_000, bad=40), 0.99) == pytest.approx(0.60)
    # 250 bad spent 250 % → 1.5 budgets overspent.
    assert budget_remaining(Counts(total=10_000, bad=250), 0.99) == pytest.approx(-1.5)
    assert budget_remaining(Counts(total=0, bad=0), 0.99) is None


def windows(**counts: tuple[int, int]) -> dict[str, Counts]:
    names = {"h1": "1h", "m5": "5m", "h6": "6h", "m30": "30m"}
    return {names[key]: Counts(total, bad) for key, (total, bad) in counts.items()}


def test_fast_pair_fires_when_both_windows_burn_above_14_4() -> None:
    # 1 h: 180/1200 = 15 % → 15×; 5 min: 20/100 = 20 % → 20×. Both > 14.4.
    # 6 h: 200/7200 → 2.78×; 30 min: 40/600 → 6.67×: the slow pair alone would not fire.
    verdict = ratio_verdict(windows(h1=(1200, 180), m5=(100, 20), h6=(7200, 200), m30=(600, 40)), 0.99, 20)
    assert verdict.breached is True
    assert verdict.pair == FAST_BURN
    assert verdict.burn_rates == pytest.approx({"1h": 15.0, "5m": 20.0, "6h": 200 / 72, "30m": 40 / 6})


def test_a_blip_that_is_over_does_not_fire() -> None:
    # 1 h still at 15×, but the last 5 min are at 5/100 = 5× → the fast pair clears;
    # 6 h at 200/7200 = 2.78× → the slow pair does not fire either.
    verdict = ratio_verdict(windows(h1=(1200, 180), m5=(100, 5), h6=(7200, 200), m30=(600, 40)), 0.99, 20)
    assert verdict.breached is False
    assert verdict.pair is None


def test_slow_pair_fires_on_a_sustained_moderate_burn() -> None:
    # 6 h: 504/7200 = 7 % → 7×; 30 min: 48/600 = 8 % → 8×; both > 6.
    # 1 h: 96/1200 = 8× < 14.4, so it is the slow pair.
    verdict = ratio_verdict(windows(h1=(1200, 96), m5=(100, 8), h6=(7200, 504), m30=(600, 48)), 0.99, 20)
    assert verdict.breached is True
    assert verdict.pair == SLOW_BURN
    assert verdict.burn_rates["6h"] == pytest.approx(7.0)
    assert verdict.burn_rates["30m"] == pytest.approx(8.0)


def test_minimum_request_count_keeps_a_pair_from_judging() -> None:
    # Every request bad, but the 5 min window has 19 < 20 and the 30 min one too.
    verdict = ratio_verdict(windows(h1=(19, 19), m5=(19, 19), h6=(19, 19), m30=(19, 19)), 0.99, 20)
    assert verdict.breached is None
    assert verdict.burn_rates["5m"] == pytest.approx(100.0)  # still reported
    # With 20 in each window the same traffic fires.
    assert ratio_verdict(windows(h1=(20, 20), m5=(20, 20), h6=(20, 20), m30=(20, 20)), 0.99, 20).breached


def test_percentile_objective() -> None:
    assert percentile_breached(900 * MS, total=30, threshold_ns=800 * MS, min_requests=20) is True
    assert percentile_breached(800 * MS, total=30, threshold_ns=800 * MS, min_requests=20) is False
    assert percentile_breached(900 * MS, total=19, threshold_ns=800 * MS, min_requests=20) is None
    assert percentile_breached(None, total=30, threshold_ns=800 * MS, min_requests=20) is None
    # p95 allows 5 % above the threshold; 3 of 30 = 10 % → burn 2, budget −100 %.
    assert percentile_burn_rate(Counts(30, 3), 0.95) == pytest.approx(2.0)


def test_durations() -> None:
    assert parse_duration("5m") == 5 * MIN
    assert parse_duration("30d") == 30 * 24 * 60 * MIN
    assert parse_duration("800ms") == 800 * MS
    for bad in ("5", "1.5h", "5 minutes", "-1m", ""):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_lifecycle_pending_then_firing_after_hold_then_resolved() -> None:
    hold = 10 * MIN
    assert [s.state for s in advance(None, None, True, 0, hold)] == [PENDING]
    assert advance(PENDING, 0, True, 9 * MIN, hold) == []  # held 9 of 10 min
    assert [s.state for s in advance(PENDING, 0, True, 10 * MIN, hold)] == [FIRING]
    assert advance(FIRING, 0, True, 11 * MIN, hold) == []  # dedupe: nothing new while it persists
    assert [s.state for s in advance(FIRING, 0, False, 12 * MIN, hold)] == [RESOLVED]


def test_lifecycle_edges() -> None:
    # No hold duration (ratio alerts): pending and firing in one evaluation.
    assert [s.state for s in advance(None, None, True, 0, 0)] == [PENDING, FIRING]
    assert advance(None, None, False, 0, 0) == []
    assert advance(None, None, None, 0, 0) == []  # too little traffic never opens an alert
    cleared = advance(PENDING, 0, False, MIN, 10 * MIN)
    assert [(s.state, s.note) for s in cleared] == [(RESOLVED, "condition cleared before firing")]
    assert [s.note for s in advance(FIRING, 0, None, MIN, 0)] == ["too few requests to evaluate"]
