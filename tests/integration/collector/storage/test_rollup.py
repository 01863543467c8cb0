"""The hourly rollup: aggregates merged from it equal those computed over the request rows, a late
row makes its hour fall back to rows until the hour is rebuilt, and the service keeps it fresh.

Every comparison runs the same query twice on the same data, once reading only request rows
(``rollup="never"``) and once with every fresh hour from the rollup (``"always"``), and asserts the
plan really read rolled-up hours, so an equality can only hold if merging the stored states is
lossless and the hours read from each source neither overlap nor leave a gap.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest
from insert_stamps import move_insert_stamps_back
from queries_data import MS, S, request_row

from latencylens_collector import queries
from latencylens_collector.queries._common import QUANTILES
from latencylens_collector.queries._sources import plan
from latencylens_collector.queries.responses import StatsResponse
from latencylens_collector.queries.scope import NO_FILTERS, Filters
from latencylens_collector.queries.times import window
from latencylens_collector.storage import rollup
from latencylens_collector.storage.store import StorageError, Store

HOUR = 3600 * S
MODELS = ("m1", "m2", "m3")


def first_hour() -> int:
    """Start of the hour five hours ago: four whole closed hours follow, then the open hour."""
    return (time.time_ns() // HOUR - 5) * HOUR


def workload(h0: int) -> list[dict]:
    """240 requests over four whole hours and the open one: three models on two providers, two
    services and routes, every component varying, TTFT on two of three, ITL on half, a cost on
    six of seven (the seventh has no price)."""
    rows = []
    for n in range(240):
        ttft = 40 + n % 37 if n % 3 else None
        rows.append(
            request_row(
                n + 1,
                h0 + (n % 5) * HOUR + (n * 7919 % 3500) * S,
                {
                    "retrieval": n % 11 * 3,
                    "tool": n % 13 * 5,
                    "network": 10 + n % 7,
                    "queue": (n * 31) % 90,
                    "prefill": 5 + n % 17,
                    "decode": 100 + (n * 53) % 900,
                },
                service=("api", "worker")[n % 2],
                route=("POST /chat", "POST /agent")[n // 2 % 2],
                model=MODELS[n % 3],
                provider="openai" if n % 3 == 2 else "groq",
                ttft_ms=ttft,
                itl_ms=2 + n % 9 if n % 2 else None,
                input_tokens=500 + n,
                cached=n,
                tps=None if n % 4 == 0 else 100.0 + n,
                cost_nano_usd=None if n % 7 == 0 else 1_000_000 + n * 12_345,
            )
        )
    return rows


@pytest.fixture
def loaded(store: Store) -> Store:
    store.h0 = first_hour()  # type: ignore[attr-defined]
    store.upsert_requests(workload(store.h0))  # type: ignore[attr-defined]
    built = rollup.refresh(store, settle_s=0)
    assert {b.hour_s for b in built} == {(store.h0 + i * HOUR) // S for i in range(5)}  # type: ignore[attr-defined]
    return store


def same_stats(a: StatsResponse, b: StatsResponse) -> None:
    """Equal, but for the mean decode rate: a sum of sums divides in another order (float)."""
    assert len(a.groups) == len(b.groups) > 0
    for left, right in zip(a.groups, b.groups, strict=True):
        assert left.output_tokens_per_second == pytest.approx(right.output_tokens_per_second)
        assert left.model_copy(update={"output_tokens_per_second": None}) == right.model_copy(
            update={"output_tokens_per_second": None}
        )


def rollup_reads_as_rows(store: Store, since_ns: int, until_ns: int) -> None:
    """Stats by model over the window are the same from the rollup as from the request rows."""
    args = dict(
        now=datetime.now(timezone.utc), since=str(since_ns / 1e9), until=str(until_ns / 1e9), by=["model"]
    )
    same_stats(
        queries.stats(store, "default", rollup="always", **args),
        queries.stats(store, "default", rollup="never", **args),
    )


def rolled_hours(store: Store, since_ns: int, until_ns: int, by: list[str], filters: Filters = NO_FILTERS):
    now = datetime.now(timezone.utc)
    span = window(now, str(since_ns / 1e9), str(until_ns / 1e9))
    return plan(store, "default", [span], by, filters, rollup="always").hours


@pytest.mark.parametrize(
    ("by", "bucket", "filters"),
    [
        ([], None, NO_FILTERS),
        (["model"], None, NO_FILTERS),
        (["provider", "model"], "1h", NO_FILTERS),
        (["route"], "1d", Filters(service="worker")),
        (["service"], None, Filters(model="m2")),
    ],
)
def test_stats_from_the_rollup_equal_stats_from_rows(loaded: Store, by, bucket, filters) -> None:
    now = datetime.now(timezone.utc)
    # From the middle of the first hour to the middle of the open one: partial hours at both ends.
    since, until = loaded.h0 + HOUR // 2, loaded.h0 + 4 * HOUR + HOUR // 2  # type: ignore[attr-defined]
    args = dict(
        now=now, since=str(since / 1e9), until=str(until / 1e9), by=by, bucket=bucket, filters=filters
    )
    from_rows = queries.stats(loaded, "default", rollup="never", **args)
    from_rollup = queries.stats(loaded, "default", rollup="always", **args)
    same_stats(from_rollup, from_rows)
    # The cost too (compared whole by same_stats): an exact sum of nano-dollars, and the requests
    # without a price counted apart, whichever source was read.
    costs = [g.cost for g in from_rows.groups if g.cost is not None]
    assert sum(c.no_price for c in costs) > 0 and all(c.priced + c.no_price > 0 for c in costs)
    assert sum(c.priced for c in costs) == len(
        [
            r
            for r in workload(loaded.h0)  # type: ignore[attr-defined]
            if since <= r["start_time"] < until and _matches(r, filters) and r["cost_nano_usd"] is not None
        ]
    )
    assert len(rolled_hours(loaded, since, until, by, filters)) == 3  # hours 1, 2, 3
    assert sum(g.count for g in from_rows.groups) == len(
        [r for r in workload(loaded.h0) if since <= r["start_time"] < until and _matches(r, filters)]  # type: ignore[attr-defined]
    )


def _matches(row: dict, filters: Filters) -> bool:
    wanted = {"service": filters.service, "name": filters.route, "model": filters.model}
    return all(value is None or row[column] == value for column, value in wanted.items())


@pytest.mark.parametrize(("metric", "quantile"), [("ttft", "p95"), ("e2e", "p50"), ("itl", "p90")])
def test_compare_from_the_rollup_equals_compare_from_rows(loaded: Store, metric: str, quantile: str) -> None:
    now = datetime.now(timezone.utc)
    h0 = loaded.h0  # type: ignore[attr-defined]
    # Overlapping ranges: A = hours 0-2 and half of 3, B = hours 2-4 (the open one partly).
    ranges = dict(
        a_since=str(h0 / 1e9),
        a_until=str((h0 + 3 * HOUR + HOUR // 2) / 1e9),
        b_since=str((h0 + 2 * HOUR) / 1e9),
        b_until=str((h0 + 4 * HOUR + 600 * S) / 1e9),
    )
    args = dict(now=now, by=["provider", "model"], metric=metric, quantile=quantile, **ranges)
    from_rows = queries.compare(loaded, "default", rollup="never", **args)
    from_rollup = queries.compare(loaded, "default", rollup="always", **args)
    assert from_rollup == from_rows  # the cost per request and its ratio included
    assert from_rows.a.count > 0 and from_rows.b.count > 0
    assert from_rows.cost_ratio is not None and from_rows.a.no_price > 0
    a = window(now, ranges["a_since"], ranges["a_until"])
    b = window(now, ranges["b_since"], ranges["b_until"])
    used = plan(loaded, "default", [a, b], ["provider", "model"], NO_FILTERS, rollup="always").hours
    # Hour 3 is cut by A's end and hour 4 by B's: only hours 0, 1 and 2 are wholly in or out of both.
    assert used == tuple((h0 + i * HOUR) // S for i in range(3))


def late_row(h0: int) -> dict:
    """Request 2 of :func:`workload` (hour 1, model m2) recomputed after a late span: its decode
    grows to 60 s, so it becomes m2's slowest request and its p99 (nearest rank of 80: the 80th)."""
    row = request_row(
        2,
        h0 + HOUR + 7919 * S % (3500 * S),
        {"network": 11, "queue": 31, "prefill": 6, "decode": 60_000},
        model="m2",
        provider="groq",
        route="POST /chat",
        service="worker",
        input_tokens=501,
        cached=1,
        tps=101.0,
        computed_at_us=time.time_ns() // 1000 + 1_000_000,
    )
    row["start_time"] = workload(h0)[1]["start_time"]
    return row


def test_a_late_row_makes_its_hour_read_from_rows_until_rebuilt(loaded: Store) -> None:
    now = datetime.now(timezone.utc)
    h0 = loaded.h0  # type: ignore[attr-defined]
    since, until = h0, h0 + 4 * HOUR
    args = dict(now=now, since=str(since / 1e9), until=str(until / 1e9), by=["model"])
    before = queries.stats(loaded, "default", rollup="always", **args)
    assert len(rolled_hours(loaded, since, until, ["model"])) == 4

    loaded.upsert_requests([late_row(h0)])
    assert rolled_hours(loaded, since, until, ["model"]) == tuple((h0 + i * HOUR) // S for i in (0, 2, 3))
    stale = queries.stats(loaded, "default", rollup="always", **args)
    same_stats(stale, queries.stats(loaded, "default", rollup="never", **args))
    m2 = next(g for g in stale.groups if g.key == {"model": "m2"})
    assert m2.e2e_ns.p99 is not None and m2.e2e_ns.p99 > 59_000 * MS
    assert stale != before

    assert [(b.project, b.hour_s) for b in rollup.refresh(loaded, settle_s=0)] == [
        ("default", (h0 + HOUR) // S)
    ]
    assert len(rolled_hours(loaded, since, until, ["model"])) == 4
    same_stats(queries.stats(loaded, "default", rollup="always", **args), stale)


def test_an_insert_stamped_by_a_clock_behind_the_builders_still_makes_its_hour_stale(
    loaded: Store,
) -> None:
    """The late row's insert stamp is an hour behind the build (a server whose clock is behind,
    or a clock that stepped back): by stamp the build still covers the hour; the count of inserted
    rows says otherwise, so the hour is read from rows, and the next refresh rebuilds it."""
    db = loaded.database
    h0 = loaded.h0  # type: ignore[attr-defined]
    since, until = h0, h0 + 4 * HOUR
    loaded.upsert_requests([late_row(h0)])
    move_insert_stamps_back(loaded, 3600)
    assert loaded.query(
        f"SELECT count() AS n FROM {db}.requests_touched AS t JOIN {db}.requests_rollup_builds AS b FINAL "
        "ON t.hour = b.hour WHERE t.last_insert >= b.covers_until"
    ) == [{"n": 0}]  # no stamp is after its hour's build

    assert rolled_hours(loaded, since, until, ["model"]) == tuple((h0 + i * HOUR) // S for i in (0, 2, 3))
    now = datetime.now(timezone.utc)
    args = dict(now=now, since=str(since / 1e9), until=str(until / 1e9), by=["model"])
    from_rows = queries.stats(loaded, "default", rollup="never", **args)
    same_stats(queries.stats(loaded, "default", rollup="always", **args), from_rows)
    m2 = next(g for g in from_rows.groups if g.key == {"model": "m2"})
    assert m2.e2e_ns.p99 is not None and m2.e2e_ns.p99 > 59_000 * MS

    assert [b.hour_s for b in rollup.refresh(loaded, settle_s=0)] == [(h0 + HOUR) // S]
    assert len(rolled_hours(loaded, since, until, ["model"])) == 4
    same_stats(queries.stats(loaded, "default", rollup="always", **args), from_rows)


def test_the_newest_build_is_read_after_the_clock_stepped_back(loaded: Store) -> None:
    """Hour 1's build was made while the store's clock ran an hour ahead (its id and covers_until
    an hour later than the clock now reads). A row arrives, and the hour is rebuilt: the new build
    gets an id above the old one, so it is the one read, and the hour is not rebuilt again."""
    db = loaded.database
    h0 = loaded.h0  # type: ignore[attr-defined]
    since, until = h0, h0 + 4 * HOUR
    hour = {"h": (h0 + HOUR) // S, "ahead": HOUR}
    loaded.command(
        f"INSERT INTO {db}.requests_rollup SELECT * REPLACE (build + {{ahead:UInt64}} AS build) "
        f"FROM {db}.requests_rollup WHERE hour = toDateTime({{h:UInt32}}, 'UTC')",
        hour,
    )
    loaded.command(
        f"INSERT INTO {db}.requests_rollup_builds SELECT * REPLACE (build + {{ahead:UInt64}} AS build, "
        "covers_until + INTERVAL 1 HOUR AS covers_until) "
        f"FROM {db}.requests_rollup_builds WHERE hour = toDateTime({{h:UInt32}}, 'UTC')",
        hour,
    )
    assert len(rolled_hours(loaded, since, until, ["model"])) == 4
    loaded.upsert_requests([late_row(h0)])
    assert len(rolled_hours(loaded, since, until, ["model"])) == 3  # counted, though stamped before

    assert [b.hour_s for b in rollup.refresh(loaded, settle_s=0)] == [(h0 + HOUR) // S]
    (newest,) = loaded.query(
        f"SELECT build, toUnixTimestamp64Micro(covers_until) AS covers_us FROM {db}.requests_rollup_builds "
        "FINAL WHERE hour = toDateTime({h:UInt32}, 'UTC')",
        hour,
    )
    assert newest["covers_us"] * 1000 < newest["build"] - HOUR // 2  # started on the clock as it reads
    assert len(rolled_hours(loaded, since, until, ["model"])) == 4
    rollup_reads_as_rows(loaded, since, until)
    assert rollup.refresh(loaded, settle_s=0) == []


def test_only_quiet_hours_are_built_and_only_once(store: Store) -> None:
    h0 = first_hour()
    store.upsert_requests(workload(h0))
    assert rollup.refresh(store, settle_s=3600) == []  # every hour was written just now
    assert len(rollup.refresh(store, settle_s=0)) == 5
    assert rollup.refresh(store, settle_s=0) == []  # nothing changed since


def test_what_the_rollup_cannot_answer_is_read_from_rows(loaded: Store) -> None:
    now = datetime.now(timezone.utc)
    h0 = loaded.h0  # type: ignore[attr-defined]
    span = window(now, str(h0 / 1e9), str((h0 + 4 * HOUR) / 1e9))
    # Three dimensions (groupings keep at most two), or buckets finer than an hour.
    three = plan(loaded, "default", [span], ["service", "route"], Filters(model="m1"), rollup="always")
    assert not three.rolled_up and three.raw_ranges == ((span.since_ns, span.until_ns),)
    fine = plan(loaded, "default", [span], ["model"], NO_FILTERS, bucket_s=300, rollup="always")
    assert not fine.rolled_up
    # "auto" weighs the cost: 240 requests make states as large as the rows, so rows win.
    assert not plan(loaded, "default", [span], ["model"], NO_FILTERS).rolled_up
    same_stats(
        queries.stats(loaded, "default", now=now, by=["service", "route"], filters=Filters(model="m1")),
        queries.stats(
            loaded, "default", now=now, by=["service", "route"], filters=Filters(model="m1"), rollup="never"
        ),
    )


def test_auto_reads_the_rollup_when_states_summarize_many_requests(store: Store) -> None:
    """30,000 requests in one hour over three models: each model's states hold at most a few
    hundred distinct values for 10,000 requests, so merging them beats reading the rows."""
    h0 = first_hour()
    store.command(
        f"INSERT INTO {store.database}.requests (project, trace_id, start_time, e2e_ns, model, decode_ns, "
        "ttft_ns, computed_at) "
        "SELECT 'default', toFixedString(reinterpretAsString(number + 1), 16), "
        "fromUnixTimestamp64Nano(toInt64({h0:Int64} + number * 100000000), 'UTC'), "
        "100000000 + number * 7919 % 900000000, ['m1', 'm2', 'm3'][number % 3 + 1], "
        "100000000 + number * 7919 % 900000000, NULL, now64(6) FROM numbers(30000)",
        {"h0": h0},
    )
    assert len(rollup.refresh(store, settle_s=0)) == 1
    now = datetime.now(timezone.utc)
    span = window(now, str(h0 / 1e9), str((h0 + HOUR) / 1e9))
    assert plan(store, "default", [span], ["model"], NO_FILTERS).hours == (h0 // S,)
    args = dict(now=now, since=str(h0 / 1e9), until=str((h0 + HOUR) / 1e9), by=["model"])
    auto = queries.stats(store, "default", **args)
    same_stats(auto, queries.stats(store, "default", rollup="never", **args))
    assert [g.count for g in auto.groups] == [10_000, 10_000, 10_000]


def test_the_service_keeps_the_rollup_fresh(start_collector) -> None:
    collector = start_collector(rollup_interval_s=1, rollup_settle_s=0)
    h0 = first_hour()
    collector.store.upsert_requests(workload(h0))
    deadline = time.monotonic() + 30
    built: list[dict] = []
    while time.monotonic() < deadline and len(built) < 5:
        time.sleep(0.5)
        built = collector.store.query(
            f"SELECT hour FROM {collector.store.database}.requests_rollup_builds FINAL"
        )
    assert len(built) == 5


def test_stored_levels_are_the_api_quantiles() -> None:
    assert rollup.LEVELS == ", ".join(str(level) for level in QUANTILES.values())


def test_a_build_cut_midway_is_never_read(loaded: Store) -> None:
    """Rows of a build whose record was never written (the process died between the two inserts)
    are ignored: here a copy of hour 1's rows with every count and sum doubled."""
    h0 = loaded.h0  # type: ignore[attr-defined]
    now = datetime.now(timezone.utc)
    args = dict(now=now, since=str(h0 / 1e9), until=str((h0 + 4 * HOUR) / 1e9), by=["model"])
    before = queries.stats(loaded, "default", rollup="always", **args)
    loaded.command(
        f"INSERT INTO {loaded.database}.requests_rollup SELECT * REPLACE (build + 1 AS build, "
        "requests * 2 AS requests, sum_e2e * 2 AS sum_e2e) "
        f"FROM {loaded.database}.requests_rollup WHERE hour = toDateTime({{h:UInt32}}, 'UTC')",
        {"h": (h0 + HOUR) // S},
    )
    # A merge may run at any time; forced here, it must not let the cut build's rows replace
    # those of the build its record names (a merge of a table versioned by build would).
    loaded.command(f"OPTIMIZE TABLE {loaded.database}.requests_rollup FINAL")
    same_stats(queries.stats(loaded, "default", rollup="always", **args), before)
    assert len(rolled_hours(loaded, h0, h0 + 4 * HOUR, ["model"])) == 4


def test_rows_of_a_superseded_build_are_deleted_once_it_was_superseded_long_enough(loaded: Store) -> None:
    """A rebuild leaves the hour's old build beside the new one; its rows go once the new build
    started :data:`rollup.SUPERSEDED_AFTER_S` ago (store clock), not before. Builds above the
    newest record (cut, or still running) and other hours' builds stay."""
    db, h0 = loaded.database, loaded.h0  # type: ignore[attr-defined]
    hour_s = (h0 + HOUR) // S

    def builds() -> dict[int, list[int]]:
        rows = loaded.query(
            f"SELECT toUnixTimestamp(hour) AS h, groupUniqArray(build) AS b "
            f"FROM {db}.requests_rollup GROUP BY h"
        )
        return {int(row["h"]): sorted(row["b"]) for row in rows}

    (old,) = builds()[hour_s]
    loaded.upsert_requests([late_row(h0)])
    assert [b.hour_s for b in rollup.refresh(loaded, settle_s=0)] == [hour_s]  # too recent to drop
    (newest,) = [r["b"] for r in loaded.query(f"SELECT max(build) AS b FROM {db}.requests_rollup_builds")]
    loaded.command(
        # (In the subquery: beside ``REPLACE (… AS build)`` a WHERE would read the new build.)
        f"INSERT INTO {db}.requests_rollup SELECT * REPLACE (build + 1 AS build) FROM (SELECT * "
        f"FROM {db}.requests_rollup WHERE hour = toDateTime({{h:UInt32}}, 'UTC') AND build = {{b:UInt64}})",
        {"h": hour_s, "b": newest},
    )
    before = builds()
    assert before[hour_s] == [old, newest, newest + 1]

    after_ns = int(rollup.SUPERSEDED_AFTER_S * 1e9)
    assert rollup.drop_superseded(loaded, now_ns=newest + after_ns) == 0
    assert rollup.drop_superseded(loaded, now_ns=newest + after_ns + 1) == 1
    assert builds() == {**before, hour_s: [newest, newest + 1]}
    assert rollup.drop_superseded(loaded, now_ns=newest + after_ns + 1) == 0

    assert len(rolled_hours(loaded, h0, h0 + 4 * HOUR, ["model"])) == 4
    rollup_reads_as_rows(loaded, h0, h0 + 4 * HOUR)


def test_a_refused_delete_of_superseded_builds_loses_nothing_and_is_retried(loaded: Store) -> None:
    """ClickHouse refusing the DELETE (here: the table has a projection, which a lightweight delete
    refuses by default) is a storage error saying why; the rollup's rows all stay, queries read the
    recorded builds, and the next attempt, once ClickHouse accepts, deletes the superseded one."""
    db, h0 = loaded.database, loaded.h0  # type: ignore[attr-defined]
    loaded.command(
        f"ALTER TABLE {db}.requests_rollup MODIFY SETTING deduplicate_merge_projection_mode = 'drop'"
    )
    loaded.command(f"ALTER TABLE {db}.requests_rollup ADD PROJECTION by_build (SELECT build ORDER BY build)")
    loaded.upsert_requests([late_row(h0)])
    assert len(rollup.refresh(loaded, settle_s=0)) == 1  # hour h0 + 1 h rebuilt: its old build superseded
    (newest,) = [r["b"] for r in loaded.query(f"SELECT max(build) AS b FROM {db}.requests_rollup_builds")]
    rows_before = loaded.query(f"SELECT count() AS n FROM {db}.requests_rollup")
    later_ns = newest + int(rollup.SUPERSEDED_AFTER_S * 1e9) + 1

    with pytest.raises(StorageError, match="has projections"):
        rollup.drop_superseded(loaded, now_ns=later_ns)
    assert loaded.query(f"SELECT count() AS n FROM {db}.requests_rollup") == rows_before
    assert len(rolled_hours(loaded, h0, h0 + 4 * HOUR, ["model"])) == 4
    rollup_reads_as_rows(loaded, h0, h0 + 4 * HOUR)

    loaded.command(f"ALTER TABLE {db}.requests_rollup DROP PROJECTION by_build")
    assert rollup.drop_superseded(loaded, now_ns=later_ns) == 1


def test_a_failed_refresh_is_logged_and_queries_read_rows(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """ClickHouse refusing the build (here: its table is gone) costs a warning, not the service,
    and the queries keep answering from the request rows."""
    h0 = first_hour()
    store.upsert_requests(workload(h0))
    store.command(f"DROP TABLE {store.database}.requests_rollup")
    with caplog.at_level("WARNING", logger="latencylens_collector.storage.rollup"):
        rollup.refresh_in_service(store, settle_s=0)
    assert "rollup refresh failed, retrying at the next interval" in caplog.text
    now = datetime.now(timezone.utc)
    result = queries.stats(store, "default", now=now, since=str(h0 / 1e9), by=["model"])
    assert sum(g.count for g in result.groups) == 240
