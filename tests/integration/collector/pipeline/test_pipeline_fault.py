"""ClickHouse unavailable while spans keep arriving, the collector restarted, storage restored:
every acknowledged span is stored exactly once.

chdb cannot be "down", so the unavailable phase runs collectors whose DSN is a ClickHouse server
address nobody listens on (inserts fail → spool); the restored phase starts a collector on the same
spool directory with the session's chdb, which replays the spool.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Callable
from pathlib import Path

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
from otlp_builders import chat_trace, export_request, post_protobuf, recent_base_ns
from pipeline_helpers import grpc_target, metric, span_counts, wait_until

from latencylens_collector.pipeline.spool import SUFFIX, Spool


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _spool_files(spool: Path) -> list[Path]:
    return sorted(spool.glob(f"*{SUFFIX}"))


def test_acknowledged_spans_survive_outage_and_restart(start_collector: Callable, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    down_dsn = f"http://default:@127.0.0.1:{_closed_port()}/"
    acknowledged: set[tuple[int, int]] = set()

    def send_http(url: str, spans: list) -> None:
        response = post_protobuf(url, spans)
        assert response.status_code == 200, response.content
        acknowledged.update((s.context.trace_id, s.context.span_id) for s in spans)

    # Outage, first collector: 3 exports over HTTP, 1 over gRPC, all acknowledged from the spool.
    first = start_collector(clickhouse_dsn=down_dsn, spool_dir=str(spool))
    ready = httpx.get(f"{first.url}/readyz")
    assert ready.status_code == 200
    assert ready.json()["writes_to"] == "spool"
    traces = [chat_trace(recent_base_ns()) for _ in range(4)]
    for spans in traces[:3]:
        send_http(first.url, spans)
    with grpc.insecure_channel(grpc_target(first.url)) as channel:
        TraceServiceStub(channel).Export(export_request(traces[3]), timeout=10)
    acknowledged.update((s.context.trace_id, s.context.span_id) for s in traces[3])
    send_http(first.url, traces[0])  # an exporter retry of an acknowledged batch: same spans again
    assert len(_spool_files(spool)) == 5
    first.service.stop()

    # Outage continues across a restart: a second collector on the same spool adds to it.
    second = start_collector(clickhouse_dsn=down_dsn, spool_dir=str(spool))
    more = chat_trace(recent_base_ns())
    send_http(second.url, more)
    traces.append(more)
    assert len(_spool_files(spool)) == 6
    second.service.stop()
    assert len(acknowledged) == 5 * 4  # 20 distinct spans, 24 sent

    # Storage restored: a collector on chdb replays the spool (oldest first) and empties it.
    written_before = metric("latencylens_spans_written_total", source="spool")
    restored = start_collector(spool_dir=str(spool))
    wait_until(lambda: not _spool_files(spool), what="the spool to drain")
    assert metric("latencylens_spans_written_total", source="spool") - written_before == 24

    # Exactly once: 20 distinct keys; FINAL collapses the resent batch; OPTIMIZE merges it away.
    counts = span_counts(restored.store)
    assert counts["distinct_keys"] == 20
    assert counts["final"] == 20
    restored.store.command(f"OPTIMIZE TABLE {restored.store.database}.spans FINAL")
    assert span_counts(restored.store)["plain"] == 20
    stored_keys = {
        (int.from_bytes(row.trace_id, "big"), int.from_bytes(row.span_id, "big"))
        for row in restored.store.spans_of_traces(
            [spans[0].context.trace_id.to_bytes(16, "big") for spans in traces]
        )
    }
    assert stored_keys == acknowledged
    # Request rows were recomputed by the replay: one per trace, all spans counted.
    listed = httpx.get(f"{restored.url}/api/requests").json()["requests"]
    assert sorted(r["span_count"] for r in listed) == [4] * 5


def test_replayed_spans_are_counted_before_their_spool_file_goes(
    start_collector: Callable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whoever sees the spool empty (an operator, a test) must also see its spans counted in
    ``latencylens_spans_written_total``: the count moves before the file is removed."""
    spool = tmp_path / "spool"
    down = start_collector(
        clickhouse_dsn=f"http://default:@127.0.0.1:{_closed_port()}/", spool_dir=str(spool)
    )
    assert post_protobuf(down.url, chat_trace(recent_base_ns())).status_code == 200
    down.service.stop()
    assert len(_spool_files(spool)) == 1

    counted_at_removal: list[float] = []
    remove = Spool.remove

    def observed_remove(self: Spool, path: Path) -> None:
        counted_at_removal.append(metric("latencylens_spans_written_total", source="spool"))
        remove(self, path)

    monkeypatch.setattr(Spool, "remove", observed_remove)
    written_before = metric("latencylens_spans_written_total", source="spool")
    start_collector(spool_dir=str(spool))
    wait_until(lambda: not _spool_files(spool), what="the spool to drain")
    assert counted_at_removal == [written_before + 4]  # chat_trace: 4 spans, one spool file


def test_a_replay_interrupted_before_the_delete_is_idempotent(
    start_collector: Callable, make_settings: Callable, tmp_path: Path
) -> None:
    """A crash between the insert and deleting the spool file replays the batch again: spans are
    not duplicated (FINAL and after OPTIMIZE) and the request row comes out the same."""
    spool = tmp_path / "spool"
    kept = tmp_path / "kept"
    down = start_collector(
        clickhouse_dsn=f"http://default:@127.0.0.1:{_closed_port()}/", spool_dir=str(spool)
    )
    spans = chat_trace(recent_base_ns())
    assert post_protobuf(down.url, spans).status_code == 200
    down.service.stop()
    [spooled] = _spool_files(spool)
    kept.mkdir()
    shutil.copy(spooled, kept / spooled.name)

    database = make_settings().database
    restored = start_collector(spool_dir=str(spool), database=database)
    wait_until(lambda: not _spool_files(spool), what="the spool to drain")
    first_row = httpx.get(f"{restored.url}/api/requests").json()["requests"]
    restored.service.stop()

    shutil.copy(kept / spooled.name, spool / spooled.name)  # as if the delete never happened
    again = start_collector(spool_dir=str(spool), database=database)
    wait_until(lambda: not _spool_files(spool), what="the second replay")
    assert span_counts(again.store)["final"] == 4
    again.store.command(f"OPTIMIZE TABLE {database}.spans FINAL")
    assert span_counts(again.store)["plain"] == 4
    second_row = httpx.get(f"{again.url}/api/requests").json()["requests"]
    assert len(second_row) == 1
    assert {k: v for k, v in second_row[0].items() if k != "computed_at"} == {
        k: v for k, v in first_row[0].items() if k != "computed_at"
    }


def test_two_collectors_cannot_share_a_spool(start_collector: Callable, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    start_collector(spool_dir=str(spool))
    second = start_collector(spool_dir=str(spool))
    readiness = httpx.get(f"{second.url}/readyz").json()
    assert "in use by another process" in readiness["spool"]
    assert readiness["writes_to"] == "storage"  # chdb is up, so it is still ready
