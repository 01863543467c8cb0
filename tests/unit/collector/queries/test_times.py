"""The one time parser: every form it takes, exact to the ns, and the clear refusals (no ClickHouse)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from latencylens_collector.queries import QueryError
from latencylens_collector.queries.times import UNIT_NS, parse_duration, parse_time, to_ns, window

S = 1_000_000_000
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
NOW_NS = 1_714_564_800 * S  # 2024-05-01T12:00:00Z as unix seconds × 10⁹
TEN_UTC_NS = NOW_NS - 2 * 3600 * S  # 2024-05-01T10:00:00Z


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A duration ago, counted back from the caller's now.
        ("1h", NOW_NS - 3600 * S),
        (" 30m ", NOW_NS - 1800 * S),
        ("1.5h", NOW_NS - 5400 * S),
        ("7d", NOW_NS - 7 * 86_400 * S),
        ("2w", NOW_NS - 14 * 86_400 * S),
        ("500ms", NOW_NS - S // 2),
        ("0s", NOW_NS),
        # ISO-8601: a zone, an offset, or none (UTC).
        ("2024-05-01T10:00:00Z", TEN_UTC_NS),
        ("2024-05-01T10:00:00z", TEN_UTC_NS),
        ("2024-05-01T10:00:00+00:00", TEN_UTC_NS),
        ("2024-05-01T12:00:00+02:00", TEN_UTC_NS),
        ("2024-05-01T10:00:00", TEN_UTC_NS),
        ("2024-05-01T10:00:00.000250", TEN_UTC_NS + 250_000),
        ("2024-05-01", NOW_NS - 12 * 3600 * S),
        # Unix seconds, whole or fractional (decimal, so .123 s is exactly 123 000 000 ns).
        ("1714557600", TEN_UTC_NS),
        ("1714557600.123", TEN_UTC_NS + 123_000_000),
        ("-1", -S),
    ],
)
def test_every_form_of_a_time(text: str, expected: int) -> None:
    assert parse_time(text, NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "2024-13-99", "", "1h ago", "-1h", "1 hour", "99999999999"])
def test_a_bad_time_says_which_forms_are_taken(text: str) -> None:
    with pytest.raises(QueryError, match="invalid time") as error:
        parse_time(text, NOW)
    assert "duration ago" in str(error.value) or "1677 to 2262" in str(error.value)


def test_a_time_ago_and_a_duration_use_the_same_units() -> None:
    for unit in UNIT_NS:
        three = 3 * UNIT_NS[unit]
        assert parse_time(f"3{unit}", NOW) == NOW_NS - parse_duration(f"3{unit}") == NOW_NS - three


def test_a_duration_is_a_whole_number_and_one_unit() -> None:
    assert parse_duration("5m") == 300 * S
    assert parse_duration(" 10 s ") == 10 * S
    for bad in ("1.5h", "5", "5 minutes", "-1m", "", "1h30m"):
        with pytest.raises(QueryError, match="whole number and one of ns, us, ms, s, m, h, d, w"):
            parse_duration(bad)


def test_a_window_of_relative_times() -> None:
    span = window(NOW, "2h", "1h")
    assert (span.since_ns, span.until_ns) == (NOW_NS - 7200 * S, NOW_NS - 3600 * S)
    default = window(NOW, "1h", None)
    assert (default.since_ns, default.until_ns) == (NOW_NS - 3600 * S, NOW_NS + 1)
    with pytest.raises(QueryError, match="empty"):
        window(NOW, "1h", "2h")
    with pytest.raises(QueryError, match="90 days"):
        window(NOW, "91d", None)


def test_naive_datetimes_are_utc() -> None:
    assert to_ns(datetime(2024, 5, 1, 10)) == TEN_UTC_NS
    assert to_ns(NOW + timedelta(microseconds=1)) == NOW_NS + 1000
