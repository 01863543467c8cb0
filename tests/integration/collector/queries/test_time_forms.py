"""Every query route reads its times with the one parser: `since=1h` works on /api/requests as on
/api/stats and /api/compare, and each form of the same moment gives the same answer.

Two requests, 30 and 90 min before now: "an hour ago" must split them on every route.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from queries_data import MS, S, bf16, request_row


@pytest.fixture
def recent(collector):
    now = time.time_ns()
    collector.store.upsert_requests(
        [
            request_row(1, now - 1800 * S, {"decode": 100}, ttft_ms=10),
            request_row(2, now - 5400 * S, {"decode": 200}, ttft_ms=20),
        ]
    )
    return collector


def hour_ago_forms() -> list[str]:
    """The same moment, an hour before now, in every form a time parameter takes (the rows are
    30 min away from it, so the seconds between here and the server's clock do not matter)."""
    moment_s = time.time() - 3600
    utc = datetime.fromtimestamp(moment_s, tz=timezone.utc)
    return [
        "1h",
        "60m",
        "3600s",
        "1.0h",
        utc.strftime("%Y-%m-%dT%H:%M:%SZ"),
        utc.isoformat(),  # +00:00 and microseconds
        utc.replace(tzinfo=None).isoformat(timespec="seconds"),  # no zone: UTC
        utc.astimezone(timezone(timedelta(hours=2))).isoformat(timespec="seconds"),
        str(int(moment_s)),
        f"{moment_s:.3f}",
    ]


def get(url: str, path: str, **params) -> dict:
    response = httpx.get(f"{url}{path}", params=params, timeout=30)
    assert response.status_code == 200, (params, response.text)
    return response.json()


def test_requests_since_1h_lists_only_the_last_hour(recent) -> None:
    listed = get(recent.url, "/api/requests", since="1h")["requests"]
    assert [r["e2e_ns"] // MS for r in listed] == [100]
    assert [r["e2e_ns"] // MS for r in get(recent.url, "/api/requests", since="3h")["requests"]] == [200, 100]
    assert [r["e2e_ns"] // MS for r in get(recent.url, "/api/requests", until="1h")["requests"]] == [200]


def test_every_route_takes_every_form(recent) -> None:
    for form in hour_ago_forms():
        # Since an hour ago: the 30-minute-old request only.
        assert [r["e2e_ns"] // MS for r in get(recent.url, "/api/requests", since=form)["requests"]] == [100]
        assert [g["count"] for g in get(recent.url, "/api/stats", since=form)["groups"]] == [1]
        # B from an hour ago to now, A the hour before: one request on each side.
        compared = get(recent.url, "/api/compare", b_since=form, metric="e2e", quantile="p50")
        assert (compared["a"]["count"], compared["b"]["count"]) == (1, 1), form
        # Until an hour ago: the 90-minute-old request only.
        assert [r["e2e_ns"] // MS for r in get(recent.url, "/api/requests", until=form)["requests"]] == [200]
        ranged = get(recent.url, "/api/compare", a_since="3h", a_until=form, b_since=form, metric="ttft")
        # One request a side, so p95 is its TTFT (cut to 8 significant bits by quantileBFloat16).
        assert (ranged["a"]["value_ns"], ranged["b"]["value_ns"]) == (bf16(20 * MS), bf16(10 * MS)), form


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/api/requests", "since"),
        ("/api/requests", "until"),
        ("/api/stats", "since"),
        ("/api/stats", "until"),
        ("/api/compare", "a_since"),
        ("/api/compare", "a_until"),
        ("/api/compare", "b_since"),
        ("/api/compare", "b_until"),
    ],
)
def test_every_time_parameter_refuses_the_same_way(collector, path: str, name: str) -> None:
    response = httpx.get(f"{collector.url}{path}", params={name: "yesterday"}, timeout=30)
    assert response.status_code == 422
    assert response.json() == {
        "detail": "invalid time 'yesterday': A duration ago (30m, 1h, 7d), ISO-8601 (no zone means UTC) "
        "or unix seconds."
    }
