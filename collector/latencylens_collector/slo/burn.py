"""Error-budget arithmetic as pure functions of request counts, so it is tested by hand.

Ratio objectives alert on burn rate, the speed at which the error budget is being spent: a burn
rate of 1 spends exactly the budget over the SLO period. Two window pairs, from Google's SRE
workbook ("Alerting on SLOs", multiwindow multi-burn-rate): 14.4× over 1 h *and* 5 min (2 % of a
30-day budget gone in an hour), 6× over 6 h *and* 30 min (5 % in six hours). The long window makes
a blip too small to page; the short one makes the alert stop soon after the problem does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from latencylens_collector.queries.times import parse_duration


@dataclass(frozen=True)
class WindowPair:
    """Alert when the burn rate exceeds ``factor`` over both windows."""

    long: str
    short: str
    factor: float


FAST_BURN: Final = WindowPair(long="1h", short="5m", factor=14.4)
SLOW_BURN: Final = WindowPair(long="6h", short="30m", factor=6.0)
WINDOW_PAIRS: Final = (FAST_BURN, SLOW_BURN)
BURN_WINDOWS: Final = ("1h", "5m", "6h", "30m")
"""Windows whose burn rate is reported, in the API's order."""
BURN_WINDOW_NS: Final = {name: parse_duration(name) for name in BURN_WINDOWS}


@dataclass(frozen=True)
class Counts:
    """Requests in one window, and how many of them missed the threshold."""

    total: int
    bad: int


def burn_rate(counts: Counts, target: float) -> float | None:
    """Share of bad requests divided by the share allowed: (bad / total) / (1 − target).

    None without requests: no traffic says nothing about the budget.
    """
    if counts.total <= 0:
        return None
    return counts.bad / (counts.total * (1.0 - target))


def budget_remaining(period: Counts, target: float) -> float | None:
    """Share of the period's error budget still unspent: 1 − burn rate over the period.

    1.0 means untouched, 0.0 spent, below zero overspent. None without requests.
    """
    rate = burn_rate(period, target)
    return None if rate is None else 1.0 - rate


@dataclass(frozen=True)
class RatioVerdict:
    """Outcome of the multiwindow rule. ``breached`` is None when no window pair had enough requests."""

    breached: bool | None
    burn_rates: dict[str, float]
    pair: WindowPair | None
    """The first pair that breached (fast before slow)."""


def ratio_verdict(windows: Mapping[str, Counts], target: float, min_requests: int) -> RatioVerdict:
    """Apply both window pairs. A pair is judged only when each of its windows holds at least
    ``min_requests`` requests; below that it can neither fire nor clear an alert."""
    rates = {
        name: rate
        for name in BURN_WINDOWS
        if name in windows and (rate := burn_rate(windows[name], target)) is not None
    }
    judged = False
    for pair in WINDOW_PAIRS:
        long, short = windows.get(pair.long), windows.get(pair.short)
        if long is None or short is None or min(long.total, short.total) < min_requests:
            continue
        judged = True
        if rates[pair.long] > pair.factor and rates[pair.short] > pair.factor:
            return RatioVerdict(breached=True, burn_rates=rates, pair=pair)
    return RatioVerdict(breached=False if judged else None, burn_rates=rates, pair=None)


def percentile_breached(
    value_ns: int | None, total: int, threshold_ns: int, min_requests: int
) -> bool | None:
    """Whether the measured percentile is above the threshold; None below ``min_requests``."""
    if value_ns is None or total < min_requests:
        return None
    return value_ns > threshold_ns


def percentile_burn_rate(window: Counts, quantile: float) -> float | None:
    """A percentile objective read as a ratio: p95 ≤ T means at most 5 % of requests above T.

    The burn rate is that share measured over the window divided by 1 − quantile.
    """
    return burn_rate(window, quantile)
