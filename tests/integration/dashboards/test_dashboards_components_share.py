"""The overview dashboard's "Where the time goes (share of end-to-end)" panel, run on chdb: each
component's critical-path time over the end-to-end time of the interval's requests."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from queries_data import MS, S, request_row

from latencylens_collector.analysis.attribution import COMPONENTS

OVERVIEW = Path(__file__).resolve().parents[3] / "dashboards" / "json" / "latencylens-overview.json"
TITLE = "Where the time goes (share of end-to-end)"


def panel_sql(database: str) -> str:
    """The panel's SQL with Grafana's macros as Grafana would expand them for all services and
    models, hourly intervals and any time."""
    (panel,) = [p for p in json.loads(OVERVIEW.read_text())["panels"] if p["title"] == TITLE]
    sql = panel["targets"][0]["rawSql"]
    sql = sql.replace("$__timeInterval(start_time)", "toStartOfHour(start_time)")
    sql = sql.replace("$__timeFilter(start_time)", "1")
    sql = re.sub(r"\$__conditionalAll\([^()]*\([^()]*\)[^()]*\)", "1", sql)
    sql = sql.replace("${project}", "default")
    assert "$" not in sql, sql
    return re.sub(r"\bFROM\s+requests\b", f"FROM {database}.requests", sql)


def test_shares_of_end_to_end_per_interval(store) -> None:
    hour = (time.time_ns() // (3600 * S) - 1) * 3600 * S
    store.upsert_requests(
        [
            request_row(1, hour + S, {"decode": 600, "queue": 400}),  # e2e 1000 ms
            request_row(2, hour + 2 * S, {"decode": 200, "network": 800}),  # e2e 1000 ms
        ]
    )
    (row,) = store.query(panel_sql(store.settings.database))
    # decode (600 + 200) / 2000, queue 400 / 2000, network 800 / 2000; the rest 0
    assert row["decode"] == pytest.approx(0.4) and row["network"] == pytest.approx(0.4)
    assert row["queue"] == pytest.approx(0.2)
    assert sum(row[name] for name in COMPONENTS) == pytest.approx(1.0)


P95_TITLE = "Where the time goes (p95 per part)"


def overview_sql(title: str, database: str, route: str | None = None, provider: str | None = None) -> str:
    """A panel's SQL as Grafana expands it for all services and models, ``route`` and ``provider``
    (or all of each), hourly intervals and any time."""
    (panel,) = [p for p in json.loads(OVERVIEW.read_text())["panels"] if p["title"] == title]
    sql = panel["targets"][0]["rawSql"]
    sql = sql.replace("$__timeInterval(start_time)", "toStartOfHour(start_time)")
    sql = sql.replace("$__timeFilter(start_time)", "1")
    for name, value in (("route", route), ("provider", provider)):
        pattern = rf"\$__conditionalAll\(([^()]*) IN \(\$\{{{name}:singlequote\}}\), \${name}\)"
        sql = re.sub(pattern, "1" if value is None else rf"\1 IN ('{value}')", sql)
    sql = re.sub(r"\$__conditionalAll\([^()]*\([^()]*\)[^()]*\)", "1", sql)
    sql = sql.replace("${project}", "default")
    assert "$" not in sql, sql
    return re.sub(r"\bFROM\s+requests\b", f"FROM {database}.requests", sql)


def test_p95_per_part_and_the_route_and_provider_filters(store) -> None:
    hour = (time.time_ns() // (3600 * S) - 1) * 3600 * S
    store.upsert_requests(
        [
            request_row(1, hour + S, {"decode": 600, "queue": 400}, route="POST /a", provider="groq"),
            request_row(2, hour + 2 * S, {"decode": 200, "network": 800}, route="POST /b", provider="openai"),
        ]
    )
    database = store.settings.database
    (row,) = store.query(overview_sql(P95_TITLE, database))
    # quantileExact(0.95) of two values takes the larger: decode max(600, 200), network max(0, 800)
    assert (row["decode"], row["network"], row["queue"]) == (600 * MS, 800 * MS, 400 * MS)
    (only_b,) = store.query(overview_sql(P95_TITLE, database, route="POST /b"))
    assert (only_b["decode"], only_b["queue"]) == (200 * MS, 0)
    (groq,) = store.query(overview_sql(TITLE, database, provider="groq"))
    # groq's one request: decode 600 / 1000, queue 400 / 1000
    assert (groq["decode"], groq["queue"], groq["network"]) == pytest.approx((0.6, 0.4, 0.0))
    assert store.query(overview_sql(TITLE, database, route="POST /a", provider="openai")) == []
