"""The embedded engine's statements run side by side, each on its own handle.

chdb runs one engine per process with any number of connection handles; a store lends one handle
per statement (at most ``ENGINE_HANDLES``), so a dashboard's query does not wait for the writer's
INSERT. These tests pin what that must not break: parameters stay with their statement (project
isolation rests on them), and the handles stay few.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.storage.store import ENGINE_HANDLES, StorageError, Store

LONG_STATEMENT = "SELECT sleepEachRow(1) FROM numbers(2) SETTINGS max_block_size = 1"
"""About 2 s inside the engine (one second a row, one row a block)."""


def test_a_statement_does_not_wait_for_a_long_one_on_another_thread(store: Store) -> None:
    """Behind one lock, the short query would end after the long one; here it ends while the long
    one still runs (it takes ≈ 2 s; the short one milliseconds)."""
    started = threading.Event()

    def long_statement() -> None:
        started.set()
        store.query(LONG_STATEMENT)

    long_one = threading.Thread(target=long_statement)
    long_one.start()
    started.wait(10)
    time.sleep(0.2)  # the long statement is inside the engine by now
    assert store.query("SELECT 1 AS one") == [{"one": 1}]
    still_running = long_one.is_alive()
    long_one.join(30)
    assert still_running


def _span(project: str, number: int) -> SpanRow:
    return SpanRow(
        trace_id=number.to_bytes(16, "big"),
        span_id=number.to_bytes(8, "big"),
        parent_span_id=bytes(8),
        service="s",
        name=f"span {number}",
        span_kind="internal",
        kind="other",
        start_ns=1_700_000_000_000_000_000 + number,
        duration_ns=5,
        project=project,
    )


def test_statements_at_once_keep_their_own_parameters(store: Store) -> None:
    """Eight threads, 1,600 parameterized statements at once: each answer is its own statement's,
    and a project's filter counts only its spans (project a: 3 spans, b: 5, c: none)."""
    store.insert_spans([_span("a", n) for n in range(1, 4)] + [_span("b", n) for n in range(4, 9)])
    spans = store.table("spans")
    expected = {"a": 3, "b": 5, "c": 0}

    def statements(worker: int) -> list[str]:
        wrong: list[str] = []
        for number in range(200):
            project = "abc"[(worker + number) % 3]
            echoed = store.query(
                "SELECT {n:UInt64} AS n, {p:String} AS p", {"n": worker * 1000 + number, "p": project}
            )
            if echoed != [{"n": worker * 1000 + number, "p": project}]:
                wrong.append(f"echo {worker}/{number}: {echoed}")
            counted = store.query(
                f"SELECT count() AS n FROM {spans} WHERE project = {{p:String}}", {"p": project}
            )
            if counted[0]["n"] != expected[project]:
                wrong.append(f"count {project}: {counted}")
        return wrong

    with ThreadPoolExecutor(8) as pool:
        wrong = [line for lines in pool.map(statements, range(8)) for line in lines]
    assert wrong == []
    assert 1 < store.engine_handles <= ENGINE_HANDLES


def test_no_more_handles_than_the_limit_however_many_threads_wait(store: Store) -> None:
    """Twice as many long statements as handles, at once: all are answered, and the store opened
    no more than ENGINE_HANDLES (the others waited for one)."""
    statement = "SELECT sleepEachRow(0.2) FROM numbers(2) SETTINGS max_block_size = 1"
    with ThreadPoolExecutor(2 * ENGINE_HANDLES) as pool:
        answers = list(pool.map(lambda _: store.query(statement), range(2 * ENGINE_HANDLES)))
    assert len(answers) == 2 * ENGINE_HANDLES
    assert store.engine_handles == ENGINE_HANDLES


def test_a_failing_statement_gives_its_handle_back(store: Store) -> None:
    """A statement ClickHouse refuses raises StorageError, and its handle goes back: more failures
    than handles, then statements on every handle at once, all answered."""
    for _ in range(2 * ENGINE_HANDLES):
        with pytest.raises(StorageError, match="ClickHouse failed while querying"):
            store.query("SELECT no_such_column FROM system.one")
    statement = "SELECT sleepEachRow(0.1) FROM numbers(1) SETTINGS max_block_size = 1"
    with ThreadPoolExecutor(ENGINE_HANDLES) as pool:
        answers = list(pool.map(lambda _: store.query(statement), range(ENGINE_HANDLES)))
    assert len(answers) == ENGINE_HANDLES
    assert store.engine_handles <= ENGINE_HANDLES
