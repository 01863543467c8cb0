"""Issue 15, item 3: nothing acknowledged is stranded while ClickHouse is reachable but refusing.

The reproduction: ClickHouse refuses inserts (a constraint, too many parts); acknowledged batches
used to move to ``spool/failed/`` for good, invisible to /readyz and /metrics. Here a real chdb
store is made to refuse with real ClickHouse errors:

- ``ADD CONSTRAINT ... CHECK name != 'poison'``: VIOLATED_CONSTRAINT (469) for the spans named
  ``poison`` only, a permanent refusal of some spans;
- ``SYSTEM STOP MERGES`` with ``parts_to_throw_insert = 1``: TOO_MANY_PARTS (252) for every insert
  once the table has a part, a refusal for now.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx
import pytest
from otlp_builders import chat_trace, new_span_id, post_protobuf, recent_base_ns, span
from pipeline_helpers import metric, span_counts, wait_until

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.cli.main import main
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.pipeline.refusals import Triage
from latencylens_collector.pipeline.spool import FAILED_DIR, SUFFIX, Spool
from latencylens_collector.storage.store import Store

POISON = "poison"


def _refuse_poison(store: Store) -> None:
    store.command(f"ALTER TABLE {store.database}.spans ADD CONSTRAINT no_poison CHECK name != '{POISON}'")


def _accept_poison(store: Store) -> None:
    store.command(f"ALTER TABLE {store.database}.spans DROP CONSTRAINT no_poison")


def _too_many_parts(store: Store) -> None:
    store.command(f"SYSTEM STOP MERGES {store.database}.spans")
    store.command(f"ALTER TABLE {store.database}.spans MODIFY SETTING parts_to_throw_insert = 1")


def _parts_allowed(store: Store) -> None:
    store.command(f"ALTER TABLE {store.database}.spans MODIFY SETTING parts_to_throw_insert = 3000")
    store.command(f"SYSTEM START MERGES {store.database}.spans")


def _row(name: str, start_ns: int) -> SpanRow:
    return SpanRow(
        trace_id=os.urandom(16),
        span_id=os.urandom(8),
        parent_span_id=b"\0" * 8,
        service="api",
        name=name,
        span_kind="server",
        kind="",
        start_ns=start_ns,
        duration_ns=1_000_000,
    )


def _writer(store: Store) -> Callable[[Sequence[SpanRow], str], None]:
    ingestor = Ingestor(store)

    def write(spans: Sequence[SpanRow], token: str) -> None:
        ingestor.ingest(spans, dedup_token=token)

    return write


def _stored_names(store: Store) -> list[str]:
    rows = store.query(f"SELECT name FROM {store.database}.spans FINAL ORDER BY name")
    return [row["name"] for row in rows]


def _poisoned_trace(base_ns: int) -> list:
    """A chat request (4 spans) plus one child span the constraint refuses."""
    spans = chat_trace(base_ns)
    root = spans[0]
    poison = span(POISON, root.context.trace_id, new_span_id(), root.context.span_id, base_ns, base_ns + 5)
    return [*spans, poison]


def _ready(url: str) -> dict:
    return httpx.get(f"{url}/readyz").json()


# --- the triage on its own, against a real store ----------------------------------------------------
def test_triage_stores_every_span_but_the_refused_ones_and_names_why(store: Store) -> None:
    _refuse_poison(store)
    start = time.time_ns()
    names = [POISON if i in (3, 17, 28) else f"ok {i:02d}" for i in range(32)]
    rows = [_row(name, start) for name in names]
    triage = Triage("a" * 32, rows)

    assert triage.step(_writer(store), max_writes=1000) is None
    assert triage.done
    assert sorted(triage.refused) == [3, 17, 28]
    for refusal in triage.refused.values():
        assert (refusal.transient, refusal.name, refusal.code) == (False, "VIOLATED_CONSTRAINT", 469)
        assert "no_poison" in refusal.message
    assert triage.stored == 29
    # k = 3 refused among n = 32: at most 1 + 2·k·log2(n) = 1 + 2·3·5 = 31 writes, not one per span.
    assert triage.writes <= 1 + 2 * 3 * math.ceil(math.log2(32))
    assert _stored_names(store) == sorted(name for name in names if name != POISON)


def test_triage_is_done_in_bounded_steps(store: Store) -> None:
    """Each step writes at most ``max_writes`` pieces: the writer serves live exports in between."""
    _refuse_poison(store)
    rows = [_row(POISON if i % 4 == 0 else f"ok {i:02d}", time.time_ns()) for i in range(16)]
    triage = Triage("b" * 32, rows)
    steps = 0
    while not triage.done:
        before = triage.writes
        assert triage.step(_writer(store), max_writes=3) is None
        assert triage.writes - before <= 3
        steps += 1
    assert steps > 1
    assert sorted(triage.refused) == [0, 4, 8, 12]
    assert triage.stored == 12


def test_a_refusal_for_now_is_retried_whole_not_split(store: Store) -> None:
    write = _writer(store)
    write([_row("first", time.time_ns())], "first")  # the table has one part now
    _too_many_parts(store)
    rows = [_row(f"ok {i}", time.time_ns()) for i in range(8)]
    triage = Triage("c" * 32, rows)

    refusal = triage.step(write, max_writes=100)
    assert refusal is not None
    assert (refusal.transient, refusal.name, refusal.code) == (True, "TOO_MANY_PARTS", 252)
    assert (triage.pending, triage.writes, triage.refused) == ([(0, 8)], 1, {})

    _parts_allowed(store)
    assert triage.step(write, max_writes=100) is None
    assert triage.done and triage.stored == 8 and not triage.refused
    assert len(_stored_names(store)) == 9


# --- through a running collector -------------------------------------------------------------------
def test_refused_spans_are_kept_shown_and_replayed_on_request(
    start_collector: Callable, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spool = tmp_path / "spool"
    lens = start_collector(spool_dir=str(spool))
    _refuse_poison(lens.store)
    refused_before = metric("latencylens_spans_refused_total", reason="VIOLATED_CONSTRAINT")

    spans = _poisoned_trace(recent_base_ns())
    response = post_protobuf(lens.url, spans)
    assert response.status_code == 200  # acknowledged: spooled once ClickHouse refused the batch

    def settled() -> dict | None:
        body = _ready(lens.url)
        return body if body["spool_failed_spans"] == 1 and not body["spool_pending_spans"] else None

    ready = wait_until(settled, what="the refused span to be kept")
    assert (ready["status"], ready["writes_to"], ready["storage"]) == ("ready", "storage", "ok")
    assert ready["spool_bytes"] > 0
    assert span_counts(lens.store)["final"] == 4  # the four good spans are stored
    assert metric("latencylens_spans_refused_total", reason="VIOLATED_CONSTRAINT") - refused_before == 1
    exposition = httpx.get(f"{lens.url}/metrics").text
    assert "latencylens_spool_failed_spans 1.0" in exposition
    [kept] = (spool / FAILED_DIR).glob(f"*{SUFFIX}")
    assert kept.name.endswith(f"-1{SUFFIX}")

    capsys.readouterr()
    assert main(["spool", "status", "--spool-dir", str(spool)]) == 0
    status = capsys.readouterr().out
    assert "VIOLATED_CONSTRAINT ×1" in status
    assert "no_poison" in status  # ClickHouse's own words, for the operator
    assert "running (holds the spool)" in status

    _accept_poison(lens.store)  # the operator fixes the cause
    assert main(["spool", "replay", "--spool-dir", str(spool), "--wait", "30"]) == 0
    assert "moved 1 batches (1 spans)" in capsys.readouterr().out
    wait_until(lambda: _ready(lens.url)["spool_failed_spans"] == 0, what="the replay")
    assert span_counts(lens.store)["final"] == 5
    [request] = httpx.get(f"{lens.url}/api/requests").json()["requests"]
    assert request["span_count"] == 5  # the request row was recomputed with the late span


def test_a_restart_replays_the_refused_spans(
    start_collector: Callable, make_settings: Callable, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    database = make_settings().database
    first = start_collector(spool_dir=str(spool), database=database)
    _refuse_poison(first.store)
    assert post_protobuf(first.url, _poisoned_trace(recent_base_ns())).status_code == 200
    wait_until(lambda: _ready(first.url)["spool_failed_spans"] == 1, what="the refused span")
    first.service.stop()
    _accept_poison(first.store)

    second = start_collector(spool_dir=str(spool), database=database)
    wait_until(
        lambda: (body := _ready(second.url))["spool_failed_spans"] == 0 and not body["spool_pending_spans"],
        what="the replay at start-up",
    )
    assert span_counts(second.store)["final"] == 5
    assert POISON in _stored_names(second.store)
    assert not list((spool / FAILED_DIR).glob(f"*{SUFFIX}"))


def test_replay_without_a_running_collector(
    start_collector: Callable, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spool = tmp_path / "spool"
    lens = start_collector(spool_dir=str(spool))
    _refuse_poison(lens.store)
    assert post_protobuf(lens.url, _poisoned_trace(recent_base_ns())).status_code == 200
    wait_until(lambda: _ready(lens.url)["spool_failed_spans"] == 1, what="the refused span")
    lens.service.stop()
    settings = lens.settings
    args = ["spool", "replay", "--spool-dir", str(spool), "--dsn", settings.clickhouse_dsn]
    args += ["--database", settings.database]
    capsys.readouterr()

    # Still refused: kept again, with its reason, and the command says so.
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "ClickHouse refused 1 spans again (VIOLATED_CONSTRAINT ×1)" in out
    assert len(list((spool / FAILED_DIR).glob(f"*{SUFFIX}"))) == 1

    _accept_poison(lens.store)
    assert main(args) == 0
    assert "stored 1 spans of 1 batches" in capsys.readouterr().out
    assert POISON in _stored_names(lens.store)
    assert not list(spool.glob(f"*{SUFFIX}")) and not list((spool / FAILED_DIR).glob(f"*{SUFFIX}"))


def test_too_many_parts_spools_says_so_and_drains_when_it_passes(
    start_collector: Callable, tmp_path: Path
) -> None:
    lens = start_collector(spool_dir=str(tmp_path / "spool"))
    base = recent_base_ns()
    assert post_protobuf(lens.url, chat_trace(base)).status_code == 200  # stored: one part
    _too_many_parts(lens.store)
    refusals_before = metric("latencylens_storage_refusals_total", reason="TOO_MANY_PARTS")

    for _ in range(3):
        assert post_protobuf(lens.url, chat_trace(base)).status_code == 200  # acknowledged from the spool
    ready = _ready(lens.url)
    assert ready["storage"] == "refusing writes: TOO_MANY_PARTS"
    assert (ready["status"], ready["writes_to"]) == ("ready", "spool")
    assert (ready["spool_pending_spans"], ready["spool_failed_spans"]) == (12, 0)
    assert metric("latencylens_storage_refusals_total", reason="TOO_MANY_PARTS") - refusals_before >= 1
    assert span_counts(lens.store)["final"] == 4

    _parts_allowed(lens.store)
    wait_until(lambda: _ready(lens.url)["spool_pending_spans"] == 0, timeout_s=60, what="the spool to drain")
    assert span_counts(lens.store)["final"] == 16
    assert _ready(lens.url)["storage"] == "ok"
    assert _ready(lens.url)["spool_failed_spans"] == 0


def test_an_unreadable_spool_file_is_kept_and_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spool = Spool(tmp_path)
    spool.open()
    broken = tmp_path / f"{1:023d}-{'d' * 32}-7{SUFFIX}"
    broken.write_bytes(b"{not json")
    spool.refresh()
    spool.quarantine(broken)
    spool.close()
    assert main(["spool", "status", "--spool-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "UNREADABLE ×7" in out
    assert "1 batches, 7 spans" in out
