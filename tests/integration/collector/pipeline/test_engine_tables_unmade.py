"""The engine path's landing tables and views cannot be made (here: ``otlp_verdicts`` is a view
someone else made, so adding a column to it fails; on a cluster, DDL the cluster refuses): each
batch of bodies fails once, as a whole, and every body takes the Python path and is stored. The
bodies are not split and retried one by one as if each did not parse."""

from __future__ import annotations

import httpx
from otlp_builders import chat_trace, protobuf_body, recent_base_ns
from pipeline_helpers import body_limits, chat_body, engine_bodies, metric, span_counts

from latencylens_collector.analysis.records import DEFAULT_PROJECT
from latencylens_collector.pipeline import Outcome
from latencylens_collector.storage import otlp_sql

OUTCOMES = ("stored", "failed", "no_verdict", "not_plain")


def test_unmade_tables_send_the_whole_batch_to_the_python_path(start_pipeline) -> None:
    pipeline, store = start_pipeline(ingest_path="engine", flush_interval_ms=1000)
    store.command(f"CREATE VIEW {store.table(otlp_sql.VERDICTS)} AS SELECT 1 AS taken")
    before = engine_bodies()
    with pipeline.decoding():  # the writer takes the three bodies as one batch
        tickets = [pipeline.submit_body(chat_body(5), DEFAULT_PROJECT, body_limits()) for _ in range(3)]
    assert [ticket.future.result(timeout=60) for ticket in tickets] == [Outcome.TAKE_PYTHON_PATH] * 3
    after = engine_bodies()
    assert {outcome: after[outcome] - before[outcome] for outcome in OUTCOMES} == {
        "stored": 0,
        "failed": 3,  # one failure for the batch; split and retried, they would be no_verdict
        "no_verdict": 0,
        "not_plain": 0,
    }
    assert span_counts(store)["final"] == 0  # nothing stored by the engine; receivers decode them


def test_an_export_is_stored_by_the_python_path_when_the_tables_cannot_be_made(start_collector) -> None:
    running = start_collector(ingest_path="engine")
    running.store.command(f"CREATE VIEW {running.store.table(otlp_sql.VERDICTS)} AS SELECT 1 AS taken")
    failed = metric("latencylens_engine_bodies_total", outcome="failed")
    answer = httpx.post(
        f"{running.url}/v1/traces",
        content=protobuf_body(chat_trace(recent_base_ns())),
        headers={"Content-Type": "application/x-protobuf"},
        timeout=60,
    )
    assert answer.status_code == 200 and answer.content == b""  # stored whole, nothing rejected
    assert metric("latencylens_engine_bodies_total", outcome="failed") - failed == 1
    assert span_counts(running.store)["final"] == 4  # chat_trace: four spans
