"""Issue 18: ``ingest_path = auto`` hands OTLP/protobuf exports to the engine only while enough of
them are in flight to fill an INSERT (or were, within ENGINE_HOLD_S) and no other project sends;
the writer stores whatever bodies it is handed.

A real collector pipeline (queue, writer, chdb), and a real collector over HTTP.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from otlp_builders import MS, chat_trace, protobuf_body, recent_base_ns
from pipeline_helpers import (
    ENGINE_OUTCOMES,
    body_limits,
    chat_body,
    engine_bodies,
    grpc_target,
    row_spans_by_project,
    sent_while_the_writer_waits,
    span_counts,
    wait_until,
)

from latencylens_collector import queries
from latencylens_collector.analysis.records import DEFAULT_PROJECT
from latencylens_collector.auth import KeyStore
from latencylens_collector.pipeline import Outcome, Pipeline
from latencylens_collector.pipeline.service import ENGINE_HOLD_S
from latencylens_collector.pipeline.writer import BODY_BATCH_MIN_BYTES
from latencylens_collector.storage.store import Store

PROTOBUF = {"Content-Type": "application/x-protobuf"}
MIB = 1024 * 1024


def verdict_rows(store: Store) -> int:
    """Bodies the engine's views saw (none when the engine path's tables were never created)."""
    database, table = store.table("otlp_verdicts").split(".")
    exists = store.query(
        "SELECT 1 FROM system.tables WHERE database = {database:String} AND name = {table:String}",
        {"database": database, "table": table},
    )
    if not exists:
        return 0
    [row] = store.query(f"SELECT count() AS n FROM {database}.{table}")
    return int(row["n"])


@pytest.fixture
def pipelines(start_pipeline) -> Callable[..., tuple[Pipeline, Store]]:
    return lambda ingest_path="auto", **kwargs: start_pipeline(
        ingest_path=ingest_path, flush_interval_ms=1000, **kwargs
    )


def test_the_engine_takes_an_export_while_those_in_flight_fill_an_insert(pipelines) -> None:
    """Auto hands an export to the engine once the exports in flight, counted at its size, reach
    BODY_BATCH_MIN_BYTES (2 MiB = 2,097,152 bytes): one of 1 MiB alone is not enough (1,048,576),
    nor two of a byte less (2,097,150); two of 1 MiB are (2,097,152), and so is one of 2 MiB alone.
    Exports of every project count: they share the writer."""
    pipeline, _ = pipelines("auto")
    assert BODY_BATCH_MIN_BYTES == 2 * MIB
    pipeline.check_room(DEFAULT_PROJECT)
    assert pipeline.cpu.in_flight == 1
    assert not pipeline.engine_takes(MIB, DEFAULT_PROJECT)
    pipeline.check_room("other-project")
    assert not pipeline.engine_takes(MIB - 1, DEFAULT_PROJECT)
    assert pipeline.engine_takes(MIB, DEFAULT_PROJECT)
    pipeline.done("other-project")
    pipeline.done(DEFAULT_PROJECT)
    pipeline.done(DEFAULT_PROJECT)  # answered twice: the count does not go below nothing
    assert pipeline.cpu.in_flight == 0


def test_the_engine_keeps_taking_exports_for_a_second_after_they_filled_an_insert(pipelines) -> None:
    """Under a steady load the exports in flight fall short of an INSERT now and then (senders
    between an answer and their next export): for ENGINE_HOLD_S (1 s) after they last filled
    one, every export goes to the engine, a small one too; then none below the bound does. The
    clock is the test's."""
    now = [1000.0]
    pipeline, _ = pipelines("auto", monotonic=lambda: now[0])
    assert ENGINE_HOLD_S == 1.0
    pipeline.check_room(DEFAULT_PROJECT)
    assert not pipeline.engine_takes(1024, DEFAULT_PROJECT)  # nothing filled an INSERT yet
    assert pipeline.engine_takes(2 * MIB, DEFAULT_PROJECT)  # fills one alone: held until 1001.0
    now[0] = 1000.999
    assert pipeline.engine_takes(1024, DEFAULT_PROJECT)
    assert pipeline.engine_takes(2 * MIB, DEFAULT_PROJECT)  # fills one again: held until 1001.999
    now[0] = 1001.5
    assert pipeline.engine_takes(1024, DEFAULT_PROJECT)
    now[0] = 1001.999
    assert not pipeline.engine_takes(1024, DEFAULT_PROJECT)
    pipeline.done(DEFAULT_PROJECT)


@pytest.mark.parametrize(("path", "takes"), [("engine", True), ("python", False)])
def test_the_other_paths_do_not_look_at_the_load(pipelines, path: str, takes: bool) -> None:
    pipeline, _ = pipelines(path)
    assert pipeline.engine_takes(1, DEFAULT_PROJECT) is takes
    assert pipeline.engine_takes(64 * 1024 * 1024, DEFAULT_PROJECT) is takes


def test_while_another_project_sends_auto_decodes_in_python(pipelines) -> None:
    """While another project has an export queued or put one within ACTIVE_S (10 s), each batch is
    one project's turn of a quarter of the bounds, so the other project's export waits for one
    small insert at most. An INSERT of bodies cannot be cut so, and auto decodes in Python what it
    would hand to the engine otherwise: here a 4 MiB export in flight alone (≥ 2 MiB), while the
    engine is held for the load too. The project's own exports do not count. Each small body put
    here is stored by the engine, which is all a put needs to be seen."""
    pipeline, _ = pipelines("auto")
    pipeline.check_room(DEFAULT_PROJECT)
    assert pipeline.engine_takes(4 * MIB, DEFAULT_PROJECT)
    own = pipeline.submit_body(chat_body(10), DEFAULT_PROJECT, body_limits())
    assert own.future.result(timeout=30) is Outcome.STORED
    assert pipeline.engine_takes(4 * MIB, DEFAULT_PROJECT)
    other = pipeline.submit_body(chat_body(10), "other-project", body_limits())
    assert other.future.result(timeout=30) is Outcome.STORED
    assert not pipeline.engine_takes(4 * MIB, DEFAULT_PROJECT)
    assert not pipeline.engine_takes(4 * MIB, "other-project")  # the default project sent one too
    pipeline.done(DEFAULT_PROJECT)


def test_an_export_beside_another_projects_is_decoded_in_python_over_http(start_collector, tmp_path) -> None:
    """Over HTTP, with a key per project: one export of 4,400 four-span traces (≈ 4.24 MB, so
    alone in flight ≥ 2 MiB) goes to the engine while its project sends alone, and a
    second one to the Python path (no engine counter moves) once another project has sent an
    export within ACTIVE_S. Every span of both is stored once, under its project."""
    metadata_url = f"sqlite:///{tmp_path / 'metadata.db'}"
    keys = KeyStore(metadata_url)
    secrets = {name: keys.create(name)[1] for name in ("heavy", "light")}
    running = start_collector(
        metadata_url=metadata_url, ingest_path="auto", max_batch_spans=100_000, max_batch_bytes=128 * MIB
    )

    def post(name: str, data: bytes) -> int:
        headers = {**PROTOBUF, "Authorization": f"Bearer {secrets[name]}"}
        answer = httpx.post(f"{running.url}/v1/traces", content=data, headers=headers, timeout=120.0)
        return answer.status_code

    alone, beside = chat_body(4_400), chat_body(4_400)
    assert len(alone) >= BODY_BATCH_MIN_BYTES
    before = engine_bodies()
    assert post("heavy", alone) == 200
    after_alone = engine_bodies()
    assert after_alone["stored"] - before["stored"] == 1
    assert post("light", chat_body(1)) == 200  # a small export: decoded in Python at once
    assert post("heavy", beside) == 200
    assert engine_bodies() == after_alone
    [row] = running.store.query(
        f"SELECT countIf(project = 'heavy') AS heavy, countIf(project = 'light') AS light, "
        f"count() AS n, uniqExact(project, trace_id, span_id) AS distinct_keys "
        f"FROM {running.store.table('spans')} FINAL"
    )
    assert {name: int(value) for name, value in row.items()} == {
        "heavy": 2 * 4_400 * 4,
        "light": 4,
        "n": 2 * 4_400 * 4 + 4,
        "distinct_keys": 2 * 4_400 * 4 + 4,
    }
    keys.close()


def test_the_grpc_receiver_decodes_in_python_beside_another_project(start_collector, tmp_path) -> None:
    """The gRPC receiver asks auto with its caller's project too: the same 4,400-trace export
    (≈ 4.24 MB) goes to the engine while its project sends alone, and to the Python path once
    another project has sent an export; each is answered with an empty response and stored once."""
    metadata_url = f"sqlite:///{tmp_path / 'metadata.db'}"
    keys = KeyStore(metadata_url)
    secrets = {name: keys.create(name)[1] for name in ("heavy", "light")}
    running = start_collector(
        metadata_url=metadata_url, ingest_path="auto", max_batch_spans=100_000, max_batch_bytes=128 * MIB
    )

    def send(name: str, data: bytes) -> ExportTraceServiceResponse:
        with grpc.insecure_channel(grpc_target(running.url)) as channel:
            export = channel.unary_unary(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                request_serializer=lambda body: body,
                response_deserializer=ExportTraceServiceResponse.FromString,
            )
            return export(data, metadata=(("authorization", f"Bearer {secrets[name]}"),), timeout=120)

    alone, beside = chat_body(4_400), chat_body(4_400)
    assert len(alone) >= BODY_BATCH_MIN_BYTES
    before = engine_bodies()
    assert send("heavy", alone) == ExportTraceServiceResponse()
    after_alone = engine_bodies()
    assert after_alone["stored"] - before["stored"] == 1
    assert send("light", chat_body(1)) == ExportTraceServiceResponse()
    assert send("heavy", beside) == ExportTraceServiceResponse()
    assert engine_bodies() == after_alone
    counts = span_counts(running.store)
    assert counts["final"] == counts["distinct_keys"] == 2 * 4_400 * 4 + 4
    keys.close()


def test_the_writer_stores_a_lone_small_body_it_is_handed(pipelines) -> None:
    """Which exports the engine takes is the receivers' choice (engine_takes): a small body handed
    to it (within the hold, say) is stored with an INSERT of its own, not sent back. ClickHouse
    read its verdict, and its 40 spans are stored once."""
    pipeline, store = pipelines("auto")
    before = engine_bodies()
    small = chat_body(10)
    assert len(small) < BODY_BATCH_MIN_BYTES
    ticket = pipeline.submit_body(small, DEFAULT_PROJECT, body_limits())
    assert ticket.future.result(timeout=30) is Outcome.STORED
    after = engine_bodies()
    assert {outcome: after[outcome] - before[outcome] for outcome in ENGINE_OUTCOMES} == {
        outcome: 1 if outcome == "stored" else 0 for outcome in ENGINE_OUTCOMES
    }
    assert verdict_rows(store) == 1
    counts = span_counts(store)
    assert counts["final"] == counts["distinct_keys"] == 10 * 4


def _post(url: str, data: bytes) -> int:
    return httpx.post(f"{url}/v1/traces", content=data, headers=PROTOBUF, timeout=120.0).status_code


def test_a_lone_export_is_decoded_in_python_at_once(start_collector) -> None:
    """Over HTTP, one small export with nothing else in flight never reaches the engine: no
    engine counter moves, ClickHouse has no verdict row, and the request row is there."""
    running = start_collector(ingest_path="auto")
    spans = chat_trace(recent_base_ns())
    before = engine_bodies()
    assert _post(running.url, protobuf_body(spans)) == 200
    assert engine_bodies() == before
    assert verdict_rows(running.store) == 0
    trace = spans[0].context.trace_id.to_bytes(16, "big").hex()
    detail = queries.request_detail(running.store, DEFAULT_PROJECT, trace)
    assert detail is not None and detail.span_count == 4


def test_a_burst_of_large_exports_is_stored_once_with_the_python_paths_rows(start_collector) -> None:
    """Sixteen exports of 500 traces (≈ 482 kB each, 7.7 MB in all) posted at once over HTTP to an
    auto collector while the test holds its writer (an export "being decoded"): none is answered,
    so the k-th one admitted sees at least k in flight, and from the fifth on 5 × 482 kB ≥ 2 MiB:
    at least 12 go to the engine, and it stores each. The writer's batch can hold all 16 (32,000
    spans), so it takes them together once let go. Whichever went to the engine and
    whichever were decoded in Python, every span is stored once and every request row equals the
    row a Python-path collector writes for the same exports."""
    auto = start_collector(
        ingest_path="auto", flush_interval_ms=600_000, max_batch_spans=100_000, max_batch_bytes=128 * MIB
    )
    python = start_collector(ingest_path="python")
    pipeline: Pipeline = auto.service.app.state.pipeline
    exports = [chat_body(500) for _ in range(16)]
    assert 5 * len(exports[0]) >= BODY_BATCH_MIN_BYTES > 4 * len(exports[0])
    before = engine_bodies()
    with ThreadPoolExecutor(max_workers=len(exports)) as pool:
        answers = sent_while_the_writer_waits(pool, pipeline, lambda data: _post(auto.url, data), exports)
        assert [answer.result(timeout=120) for answer in answers] == [200] * 16
        assert list(pool.map(lambda data: _post(python.url, data), exports)) == [200] * 16
    handed = {outcome: engine_bodies()[outcome] - before[outcome] for outcome in ENGINE_OUTCOMES}
    assert 12 <= handed["stored"] == sum(handed.values()) <= 16  # at once in Python: not counted
    for running in (auto, python):
        counts = span_counts(running.store)
        assert counts["final"] == counts["distinct_keys"] == 16 * 500 * 4
    # The engine's exports are answered once their spans are stored; their rows may follow.
    wait_until(lambda: sum(row_spans_by_project(auto.store).values()) >= 16 * 500 * 4, 60, "auto's rows")
    rows = {  # every column but when the row was computed and its version (insert stamps)
        name: running.store.query(
            f"SELECT * EXCEPT (computed_at, version) FROM {running.store.table('requests')} FINAL "
            "WHERE NOT is_deleted ORDER BY trace_id"
        )
        for name, running in (("auto", auto), ("python", python))
    }
    assert len(rows["python"]) == 16 * 500
    assert rows["auto"] == rows["python"]


def test_the_grpc_receiver_hands_exports_to_the_engine_once_enough_are_in_flight(start_collector) -> None:
    """The gRPC receiver asks auto the same question. Sixteen exports of 500 traces (≈ 482 kB
    each), one sender each, while the test holds the writer (an export "being decoded"): none is
    answered, so the k-th one admitted sees at least k in flight, and from the fifth on
    5 × 482 kB ≥ 2 MiB: at least 12 go to the engine. Once all 16 wait, the writer is let go:
    every answer is an empty ExportTraceServiceResponse, every span is stored once, and every
    trace has its request row (chat_trace: a 1000 ms request)."""
    running = start_collector(ingest_path="auto", flush_interval_ms=600_000)
    pipeline: Pipeline = running.service.app.state.pipeline
    exports = [chat_body(500) for _ in range(16)]
    assert 5 * len(exports[0]) >= BODY_BATCH_MIN_BYTES > 4 * len(exports[0])
    target = grpc_target(running.url)

    def send(data: bytes) -> ExportTraceServiceResponse:
        with grpc.insecure_channel(target) as channel:
            export = channel.unary_unary(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                request_serializer=lambda body: body,
                response_deserializer=ExportTraceServiceResponse.FromString,
            )
            return export(data, timeout=120)

    before = engine_bodies()
    with ThreadPoolExecutor(max_workers=len(exports)) as pool:
        with pipeline.decoding():
            answers = [pool.submit(send, data) for data in exports]
            wait_until(lambda: pipeline.cpu.in_flight == 16, 60, "all 16 exports to be admitted")
        assert [answer.result(timeout=120) for answer in answers] == [ExportTraceServiceResponse()] * 16
    handed = {outcome: engine_bodies()[outcome] - before[outcome] for outcome in ENGINE_OUTCOMES}
    assert 12 <= handed["stored"] == sum(handed.values()) <= 16
    counts = span_counts(running.store)
    assert counts["final"] == counts["distinct_keys"] == 16 * 500 * 4

    def rows() -> tuple[int, int]:
        [row] = running.store.query(
            "SELECT count() AS n, countIf(e2e_ns = {e2e:Int64}) AS whole "
            f"FROM {running.store.table('requests')} FINAL WHERE NOT is_deleted",
            {"e2e": 1000 * MS},
        )
        return int(row["n"]), int(row["whole"])

    # The engine's exports are answered once their spans are stored; their rows follow (built in
    # the worker, then written by the row builder's thread), so they may land after the answers.
    wait_until(lambda: rows()[0] >= 16 * 500, 60, "every trace's request row")
    assert rows() == (16 * 500, 16 * 500)
