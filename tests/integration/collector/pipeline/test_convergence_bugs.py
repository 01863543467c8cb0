"""Each way a request row used to stay wrong for good (issue: rows that converge anywhere), with its
reproduction as the input: two collectors over one real chdb store (convergence_support)."""

from __future__ import annotations

import dataclasses
import os
import random
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from convergence_support import (
    Collector,
    S,
    SharedStore,
    chat,
    check_converged,
    check_rollup_equals_rows,
    lost_root,
    outer_root,
    process_clock,
    stored_rows,
)
from otlp_builders import MS, chat_trace, post_protobuf, recent_base_ns, span

from latencylens_collector.settings import Settings, chdb_path
from latencylens_collector.storage import rollup
from latencylens_collector.storage.store import LOCK_FILE, Store

MINUTE = 60 * S
_runs = iter(range(10**6))


@pytest.fixture(scope="module")
def shared_store(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    metadata = Path(tmp_path_factory.mktemp("convergence_bugs")) / "metadata.db"
    settings = Settings(
        clickhouse_dsn=chdb_dsn, database="convergence_bugs", metadata_url=f"sqlite:///{metadata}", environ={}
    )
    store = Store(settings)
    store.migrate()
    yield store
    store.close()


@pytest.fixture
def project() -> str:
    return f"bug{next(_runs)}"


def two_collectors(store: Store, behind_ns: int = 0) -> tuple[Collector, Collector]:
    """A and B over one store (B's clock ``behind_ns`` behind); ``a.store.shared`` holds back writes."""
    shared = SharedStore(store)
    return Collector.on(shared, "A"), Collector.on(shared, "B", -behind_ns)


def test_a_collector_whose_clock_is_behind_writes_the_complete_row(shared_store: Store, project: str) -> None:
    """B's clock 2 s behind A's: B wrote the complete row with an older version, and the row of 2
    of 4 spans stayed. The version now counts spans: no reconciler needed."""
    a, b = two_collectors(shared_store, behind_ns=2 * S)
    trace = chat(random.Random(1), time.time_ns() - MINUTE, project)
    root, retrieval, model, tool = trace.spans
    assert a.ingest([root, retrieval]) and b.ingest([model, tool])
    check_converged(shared_store, project, [trace])


def test_inserts_not_yet_visible_to_each_other(shared_store: Store, project: str) -> None:
    """Both inserts acknowledged, neither visible yet: A builds a 2-span row from memory, B's batch
    has no root and writes nothing. The reconciler makes the row whole once both are visible."""
    a, b = two_collectors(shared_store)
    trace = chat(random.Random(2), time.time_ns() - MINUTE, project)
    root, retrieval, model, tool = trace.spans
    a.store.span_delay = b.store.span_delay = 1
    assert a.ingest([root, retrieval]) and b.ingest([model, tool])
    a.store.shared.advance()
    [[partial]] = stored_rows(shared_store, project).values()
    assert partial["span_count"] == 2  # what the write path alone leaves
    assert b.reconcile() == 1
    check_converged(shared_store, project, [trace])


def test_a_clock_stepping_back_between_batches(shared_store: Store, project: str) -> None:
    a, _ = two_collectors(shared_store)
    trace = chat(random.Random(3), time.time_ns() - MINUTE, project)
    root, retrieval, model, tool = trace.spans
    assert a.ingest([root, retrieval])
    a.clock_offset_ns = -S  # NTP steps the clock back one second
    assert a.ingest([model, tool])
    check_converged(shared_store, project, [trace])


def test_a_read_back_without_the_batchs_own_insert(shared_store: Store, project: str) -> None:
    """The read-back hits a replica that has not got this batch yet: the batch's own spans still
    count, so the row is whole at once."""
    a, _ = two_collectors(shared_store)
    trace = chat(random.Random(4), time.time_ns() - MINUTE, project)
    root, retrieval, model, tool = trace.spans
    assert a.ingest([root, retrieval])
    a.store.span_delay = 1
    assert a.ingest([model, tool])
    [[row]] = stored_rows(shared_store, project).values()
    assert row["span_count"] == 4
    a.store.shared.advance()
    a.reconcile()  # the version is brought up to the stamp of the insert it could not see
    check_converged(shared_store, project, [trace])


@pytest.mark.parametrize("first_batch_rows", [False, True])
def test_a_collector_dying_between_span_insert_and_row_write(
    shared_store: Store, project: str, first_batch_rows: bool
) -> None:
    """The exporter does not retry: the spans are stored but no row (or a partial one) was written.
    Any collector's reconciler writes it, from the spans."""
    a, b = two_collectors(shared_store)
    trace = chat(random.Random(5), time.time_ns() - MINUTE, project)
    root, retrieval, model, tool = trace.spans
    a.store.die_before_rows = not first_batch_rows
    a.ingest([root, retrieval])
    a.store.die_before_rows = True
    assert not a.ingest([model, tool])
    before = stored_rows(shared_store, project)
    assert [row["span_count"] for rows in before.values() for row in rows] == (
        [2] if first_batch_rows else []
    )
    assert b.reconcile() == 1
    check_converged(shared_store, project, [trace])


def test_rollup_built_on_a_clock_ahead_still_sees_later_rows(shared_store: Store, project: str) -> None:
    """A collector 60 s ahead of the server built an hour's rollup; a row of that hour rewritten
    afterwards (a late span) was stamped before the build's claimed coverage, so the stale build
    was trusted. Builds now cover up to the store's clock."""
    a, _ = two_collectors(shared_store)
    a.clock_offset_ns = 60 * S
    trace = chat(random.Random(6), time.time_ns() - 10 * MINUTE, project)
    root, retrieval, model, tool = trace.spans
    assert a.ingest([root, retrieval, model])
    with process_clock(a.clock_offset_ns):
        assert rollup.refresh(shared_store, settle_s=0)
    assert a.ingest([tool])  # the row changes: the tool call now ends the critical path
    with process_clock(a.clock_offset_ns):
        stale = rollup.stale_hours(shared_store, shared_store.now_ns(), settle_s=0)
        assert (project, trace.spans[0].start_ns // (3600 * S) * 3600) in stale
        rollup.refresh(shared_store, settle_s=0)
    check_rollup_equals_rows(shared_store, project)


def test_a_lost_root_gets_a_row_until_the_root_arrives(shared_store: Store, project: str) -> None:
    """The top span's parent (an upstream gateway) is never exported: the trace had no row at all
    (404, absent from every aggregate). Settled, it is rooted at its top-most span and flagged."""
    a, b = two_collectors(shared_store)
    trace = lost_root(random.Random(7), time.time_ns() - MINUTE, project)
    assert a.ingest(trace.spans)
    assert stored_rows(shared_store, project) == {}
    assert b.reconcile() == 1
    [[row]] = stored_rows(shared_store, project).values()
    top = trace.spans[0]
    assert (row["root_missing"], row["start_time"], row["e2e_ns"]) == (1, top.start_ns, top.duration_ns)
    check_converged(shared_store, project, [trace])


def test_the_true_root_arriving_late_replaces_the_lost_root_row(shared_store: Store, project: str) -> None:
    """The gateway's span comes after the trace was settled: one row, rooted at the gateway."""
    a, b = two_collectors(shared_store)
    trace = lost_root(random.Random(8), time.time_ns() - MINUTE, project)
    top = trace.spans[0]
    gateway = outer_root(random.Random(8), top.start_ns - 20_000_000, project).spans[-1]
    gateway = dataclasses.replace(gateway, trace_id=top.trace_id, span_id=top.parent_span_id)
    assert a.ingest(trace.spans) and b.reconcile() == 1
    assert b.ingest([gateway])  # the write path replaces the row at once
    [[row]] = stored_rows(shared_store, project).values()
    assert (row["root_missing"], row["start_time"]) == (0, gateway.start_ns)
    trace.spans.append(gateway)
    a.reconcile()
    check_converged(shared_store, project, [trace])


def test_a_root_replaced_by_a_longer_parentless_span_leaves_one_row(
    shared_store: Store, project: str
) -> None:
    """The proxy's parentless span (longer, earlier) arrives after the app's root had its row: the
    row moves to the proxy's start time, and the old key gets a tombstone."""
    a, b = two_collectors(shared_store)
    trace = outer_root(random.Random(9), time.time_ns() - MINUTE, project)
    *app, proxy = trace.spans
    assert a.ingest(app) and b.ingest([proxy])
    check_converged(shared_store, project, [trace])
    # Also without FINAL: the newest version of the trace, live rows first, is the proxy's.
    [latest] = shared_store.query(
        "SELECT toUnixTimestamp64Nano(start_time) AS start_ns, is_deleted "
        f"FROM {shared_store.database}.requests WHERE project = {{project:String}} "
        "ORDER BY version DESC, is_deleted LIMIT 1 BY trace_id",
        {"project": project},
    )
    assert latest == {"start_ns": proxy.start_ns, "is_deleted": 0}


SECOND_PROCESS = textwrap.dedent(
    """
    import sys
    from latencylens_collector.api.server import ServiceThread
    from latencylens_collector.settings import Settings
    from latencylens_collector.storage.store import DirectoryInUse, Store

    settings = Settings(clickhouse_dsn=sys.argv[1], database="second", port=0, environ={})
    try:
        Store(settings).claim()
    except DirectoryInUse as exc:
        print(exc)
    try:
        ServiceThread(settings).start(timeout_s=60)
    except RuntimeError as exc:
        print("service:", exc)
        sys.exit(3)
    sys.exit(0)
    """
)


def test_a_second_process_on_the_chdb_directory_cannot_start(shared_store: Store) -> None:
    """This process holds the session's chdb directory; another process on it fails at start with
    one line naming the directory and the holder, and its service never starts (never ready)."""
    dsn = shared_store.settings.clickhouse_dsn
    assert (chdb_path(dsn) / LOCK_FILE).read_text().strip() == str(os.getpid())
    done = subprocess.run(
        [sys.executable, "-c", SECOND_PROCESS, dsn], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 3, done.stdout + done.stderr
    first, second = done.stdout.splitlines()
    assert first == (
        f"the chdb directory {chdb_path(dsn).resolve()} is in use by another process (pid {os.getpid()}): "
        "run one collector per directory, or point every collector at one ClickHouse server "
        "(docs/deployment.md)"
    )
    assert second == "service: the collector stopped during start-up"


def test_serve_on_a_directory_in_use_fails_with_one_line(shared_store: Store, tmp_path: Path) -> None:
    dsn = shared_store.settings.clickhouse_dsn
    done = subprocess.run(
        [sys.executable, "-m", "latencylens_collector.cli.main", "serve", "--dsn", dsn, "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,  # its metadata database (keys) in a directory of its own
    )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: the chdb directory {chdb_path(dsn).resolve()} is in use by another process "
        f"(pid {os.getpid()}): run one collector per directory, or point every collector at one "
        "ClickHouse server (docs/deployment.md)"
    ]


def test_the_service_answers_a_lost_root_request_once_settled(start_collector: Callable[..., Any]) -> None:
    """Through the running service: OTLP in, the service's own reconciler (every second, settle 0
    here), and the query API, which answered 404 for such a trace before."""
    lens = start_collector(reconcile_interval_s=1, reconcile_settle_s=0)
    spans = chat_trace(recent_base_ns())
    top = spans[0]
    orphan = span(
        top.name, top.context.trace_id, top.context.span_id, 0xFEED, top.start_time or 0, top.end_time or 0
    )
    assert post_protobuf(lens.url, [orphan, *spans[1:]]).status_code == 200
    url = f"{lens.url}/api/requests/{top.context.trace_id:032x}"
    deadline = time.monotonic() + 60
    while (answer := httpx.get(url)).status_code == 404 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    # Rooted at the app's POST /chat: chat_trace's 1000 ms, its parts as documented there.
    assert (body["root_missing"], body["name"], body["e2e_ns"]) == (True, "POST /chat", 1000 * MS)
    assert body["parts"]["decode"] == 400 * MS
