"""The one reading of times and durations: query parameters, the CLI and SLO definitions share it.

A *time* is any of
- a duration ago, counted back from the caller's ``now``: ``30m``, ``1h``, ``1.5h``, ``7d``;
- ISO-8601, with or without a zone (none means UTC): ``2024-05-01T12:00:00Z``, ``2024-05-01``;
- unix seconds, possibly fractional: ``1714564800``, ``1714564800.25``.

A *duration* (an SLO window) is a whole number and one unit (``ns us ms s m h d w``), so a
window reads one way only. Both become integer ns. Bad input raises :class:`QueryError` (a
``ValueError``) whose message lists the accepted forms.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Final

from latencylens_collector.queries._common import QueryError

NS_PER_S: Final = 1_000_000_000
UNIT_NS: Final = {
    "ns": 1,
    "us": 1_000,
    "ms": 1_000_000,
    "s": NS_PER_S,
    "m": 60 * NS_PER_S,
    "h": 3600 * NS_PER_S,
    "d": 86_400 * NS_PER_S,
    "w": 7 * 86_400 * NS_PER_S,
}
DEFAULT_WINDOW_NS: Final = 24 * 3600 * NS_PER_S
MAX_RANGE_NS: Final = 90 * 24 * 3600 * NS_PER_S
"""Longest time range any query may cover."""
TIME_HELP: Final = "A duration ago (30m, 1h, 7d), ISO-8601 (no zone means UTC) or unix seconds."

_AMOUNT = re.compile(rf"^\s*(\d+(?:\.\d+)?)\s*({'|'.join(UNIT_NS)})\s*$")
_UNIX_SECONDS = re.compile(r"^-?\d+(\.\d+)?$")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MIN_NS: Final = -(2**63)
MAX_NS: Final = 2**63 - 1
"""Times are signed 64-bit ns (ClickHouse parameters, stored times): from 1677 to April 2262."""


def parse_duration(text: str) -> int:
    """``"5m"`` → 300_000_000_000 ns. A whole number and one unit only."""
    match = _AMOUNT.match(text)
    if match is None or "." in match.group(1):
        raise QueryError(f"invalid duration {text!r}: use a whole number and one of {', '.join(UNIT_NS)}")
    return int(match.group(1)) * UNIT_NS[match.group(2)]


def parse_time(text: str, now: datetime) -> int:
    """``text`` as ns since the epoch; a duration (``1h``, fractions allowed) means that long
    before ``now``."""
    value = text.strip()
    ago = _AMOUNT.match(value)
    try:
        if ago is not None:
            ns = to_ns(now) - _exact_ns(ago.group(1), UNIT_NS[ago.group(2)])
        elif _UNIX_SECONDS.match(value):
            ns = _exact_ns(value, NS_PER_S)
        else:
            ns = to_ns(datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00")))
    except ValueError as exc:
        raise QueryError(f"invalid time {text!r}: {TIME_HELP}") from exc
    if not MIN_NS <= ns <= MAX_NS:
        raise QueryError(f"invalid time {text!r}: outside the years 1677 to 2262 that ns since 1970 can hold")
    return ns


MAX_DURATION_MS: Final = MAX_NS // 1_000_000
"""Longest duration a filter takes, in ms: the most an Int64 of ns holds (about 292 years)."""


def duration_ms_ns(value: float, name: str = "min_duration_ms") -> int:
    """A duration in ms (a query parameter) as integer ns; refused unless finite and within
    0..:data:`MAX_DURATION_MS`, so ``inf``, ``nan`` or ``1e300`` never become a wrong filter."""
    if not math.isfinite(value) or not 0 <= value <= MAX_DURATION_MS:
        raise QueryError(f"invalid {name} {value!r}: use a number of ms from 0 to {MAX_DURATION_MS}")
    return round(value * 1_000_000)


def checked_ns(value: int, what: str, low: int = MIN_NS) -> int:
    """``value`` when it fits the signed 64-bit ns a time or duration is stored as (and is at least
    ``low``); QueryError naming ``what`` otherwise."""
    if not low <= value <= MAX_NS:
        raise QueryError(f"invalid {what}: {value} is outside {low}..{MAX_NS}")
    return value


def _exact_ns(number: str, unit_ns: int) -> int:
    """``number`` × ``unit_ns`` rounded to whole ns, in decimal: a float would move ``.123`` s."""
    return int((Decimal(number) * unit_ns).to_integral_value())


def to_ns(moment: datetime) -> int:
    """A datetime (naive means UTC) as integer ns since the epoch, with no float on the way."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * NS_PER_S + delta.microseconds * 1000


def from_ns(ns: int) -> datetime:
    """Integer ns since the epoch as an aware UTC datetime (µs: what a datetime holds)."""
    return _EPOCH + timedelta(microseconds=ns // 1000)


@dataclass(frozen=True)
class Window:
    """[since, until) in ns since the epoch."""

    since_ns: int
    until_ns: int


def window(
    now: datetime,
    since: str | None,
    until: str | None,
    *,
    default_ns: int = DEFAULT_WINDOW_NS,
    default_until_ns: int | None = None,
    label: str = "",
) -> Window:
    """A validated window, by default the ``default_ns`` before ``default_until_ns`` (or ``now``);
    at most 90 days long."""
    fallback_until = default_until_ns if default_until_ns is not None else to_ns(now) + 1
    until_ns = parse_time(until, now) if until else fallback_until
    since_ns = parse_time(since, now) if since else until_ns - default_ns
    name = f"{label}since/{label}until"
    if since_ns >= until_ns:
        raise QueryError(f"{name}: the window is empty ({label}since must be before {label}until)")
    if until_ns - since_ns > MAX_RANGE_NS:
        raise QueryError(f"{name}: the window is longer than the maximum of 90 days")
    return Window(since_ns, until_ns)


__all__ = [
    "DEFAULT_WINDOW_NS",
    "MAX_DURATION_MS",
    "MAX_NS",
    "MAX_RANGE_NS",
    "MIN_NS",
    "NS_PER_S",
    "TIME_HELP",
    "UNIT_NS",
    "Window",
    "checked_ns",
    "duration_ms_ns",
    "from_ns",
    "parse_duration",
    "parse_time",
    "to_ns",
    "window",
]
