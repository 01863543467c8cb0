"""Issue 18: a collector with ``ingest_path = engine``, through its real OTLP/HTTP and OTLP/gRPC
receivers and the official exporters: answers, project isolation, group commit, fallbacks.

The equality of the rows with the Python path's is shown in test_engine_ingest_equality.py; here,
what a sender and the query API see.
"""

from __future__ import annotations

import gzip
import socket
from concurrent.futures import ThreadPoolExecutor

import grpc
import httpx
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
from opentelemetry.sdk.trace.export import SpanExportResult
from otlp_builders import MS, chat_trace, export_request, new_span_id, protobuf_body, recent_base_ns, span
from pipeline_helpers import grpc_target, metric, sent_while_the_writer_waits, span_counts, wait_until

from latencylens_collector import queries
from latencylens_collector.analysis.records import DEFAULT_PROJECT
from latencylens_collector.auth import KeyStore
from latencylens_collector.pipeline.reconciler import Reconciler

PROTOBUF = {"Content-Type": "application/x-protobuf"}


def _post(url: str, **kwargs) -> httpx.Response:
    """A POST that waits as long as an exporter would (the machine may be loaded)."""
    return httpx.post(url, timeout=60.0, **kwargs)


def _trace_bytes(spans) -> bytes:
    return spans[0].context.trace_id.to_bytes(16, "big")


def _request_row(store, spans, project: str = DEFAULT_PROJECT) -> dict | None:
    detail = queries.request_detail(store, project, _trace_bytes(spans).hex())
    return None if detail is None else detail.model_dump()


def _engine_counts(store) -> dict[str, int]:
    """Spans the engine's views saw, and those it left to the Python path."""
    [row] = store.query(
        f"SELECT sum(spans) AS spans, sum(not_plain) AS not_plain FROM {store.table('otlp_verdicts')}"
    )
    return {key: int(value) for key, value in row.items()}


def test_official_exporters_over_http_and_grpc_are_stored_by_the_engine(start_collector) -> None:
    """Both receivers hand the body to the engine: the spans are stored (and counted as written
    by one INSERT of bodies), the request row is there at once with its attribution."""
    running = start_collector(ingest_path="engine")
    http_spans, grpc_spans = chat_trace(recent_base_ns()), chat_trace(recent_base_ns())
    received = metric("latencylens_spans_received_total", protocol="http")
    stored = metric("latencylens_engine_bodies_total", outcome="stored")
    assert (
        HttpExporter(endpoint=f"{running.url}/v1/traces", timeout=60).export(http_spans)
        == SpanExportResult.SUCCESS
    )
    exporter = GrpcExporter(endpoint=grpc_target(running.url), insecure=True, timeout=60)
    assert exporter.export(grpc_spans) == SpanExportResult.SUCCESS
    exporter.shutdown()
    assert metric("latencylens_spans_received_total", protocol="http") - received == 4
    assert _engine_counts(running.store) == {"spans": 8, "not_plain": 0}
    assert metric("latencylens_engine_bodies_total", outcome="stored") - stored == 2
    for spans in (http_spans, grpc_spans):
        assert len(running.store.spans_of_traces([_trace_bytes(spans)])) == 4
        row = _request_row(running.store, spans)
        assert row is not None
        # chat_trace's critical path (otlp_builders): decode 400 ms of the 1000 ms request.
        assert row["e2e_ns"] == 1000 * MS
        assert row["parts"]["decode"] == 400 * MS


def test_a_span_to_reject_gets_the_python_paths_precise_answer(start_collector) -> None:
    """A body with a span ending before it starts: the engine stores nothing of it, the Python
    path rejects that span alone and says so in partial_success, over HTTP and gRPC."""
    running = start_collector(ingest_path="engine")
    base = recent_base_ns()
    for send in ("http", "grpc"):
        good = chat_trace(base)
        backwards = span("backwards", good[0].context.trace_id, new_span_id(), None, base + 10 * MS, base)
        if send == "http":
            answer = _post(
                f"{running.url}/v1/traces", content=protobuf_body([*good, backwards]), headers=PROTOBUF
            )
            assert answer.status_code == 200
            response = ExportTraceServiceResponse.FromString(answer.content)
        else:
            with grpc.insecure_channel(grpc_target(running.url)) as channel:
                response = TraceServiceStub(channel).Export(export_request([*good, backwards]), timeout=60)
        assert response.partial_success.rejected_spans == 1
        assert "ending before they start" in response.partial_success.error_message
        assert len(running.store.spans_of_traces([_trace_bytes(good)])) == 4
    assert _engine_counts(running.store) == {"spans": 10, "not_plain": 2}


def test_garbage_and_json_keep_their_answers(start_collector) -> None:
    """A body that is not OTLP is 400 as before (its frame fails the cheap check, or its INSERT);
    gzip bodies and OTLP/JSON still work."""
    running = start_collector(ingest_path="engine")
    garbage = _post(f"{running.url}/v1/traces", content=b"\x0a\x05abc", headers=PROTOBUF)
    assert garbage.status_code == 400
    cut = protobuf_body(chat_trace(recent_base_ns()))[:-9]
    assert _post(f"{running.url}/v1/traces", content=cut, headers=PROTOBUF).status_code == 400
    spans = chat_trace(recent_base_ns())
    zipped = _post(
        f"{running.url}/v1/traces",
        content=gzip.compress(protobuf_body(spans)),
        headers={**PROTOBUF, "Content-Encoding": "gzip"},
    )
    assert zipped.status_code == 200 and zipped.content == b""
    assert len(running.store.spans_of_traces([_trace_bytes(spans)])) == 4


def test_each_key_stores_under_its_project(start_collector, tmp_path) -> None:
    """Two projects' bodies in the same INSERT: each span is stored under its sender's project."""
    metadata_url = f"sqlite:///{tmp_path / 'metadata.db'}"
    keys = KeyStore(metadata_url)
    _, alpha = keys.create("alpha")
    _, beta = keys.create("beta")
    running = start_collector(metadata_url=metadata_url, ingest_path="engine", flush_interval_ms=300)
    traces = {name: [chat_trace(recent_base_ns()) for _ in range(4)] for name in ("alpha", "beta")}
    secrets = {"alpha": alpha, "beta": beta}

    def send(item: tuple[str, list]) -> int:
        name, spans = item
        headers = {**PROTOBUF, "Authorization": f"Bearer {secrets[name]}"}
        return _post(f"{running.url}/v1/traces", content=protobuf_body(spans), headers=headers).status_code

    jobs = [(name, spans) for name, all_spans in traces.items() for spans in all_spans]
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        assert list(pool.map(send, jobs)) == [200] * len(jobs)
    for name, other in (("alpha", "beta"), ("beta", "alpha")):
        for spans in traces[name]:
            assert len(running.store.spans_of_traces([_trace_bytes(spans)], project=name)) == 4
            assert running.store.spans_of_traces([_trace_bytes(spans)], project=other) == []
            assert _request_row(running.store, spans, name) is not None
            assert _request_row(running.store, spans, other) is None
    keys.close()


def test_concurrent_bodies_share_inserts_and_a_resent_body_is_stored_once(start_collector) -> None:
    """20 exports that wait for the writer together become one INSERT of bodies (group commit;
    the test holds the writer until all 20 are queued, so the senders' timing does not matter);
    a body sent twice collapses to one row per span."""
    running = start_collector(ingest_path="engine", flush_interval_ms=600_000)
    pipeline = running.service.app.state.pipeline
    inserts = metric("latencylens_batch_spans_count")
    traces = [chat_trace(recent_base_ns()) for _ in range(20)]

    def send(spans: list) -> int:
        return _post(f"{running.url}/v1/traces", content=protobuf_body(spans), headers=PROTOBUF).status_code

    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = sent_while_the_writer_waits(pool, pipeline, send, traces)
        assert [answer.result(timeout=60) for answer in answers] == [200] * 20
    assert metric("latencylens_batch_spans_count") - inserts == 1
    again = _post(f"{running.url}/v1/traces", content=protobuf_body(traces[0]), headers=PROTOBUF)
    assert again.status_code == 200
    counts = span_counts(running.store)
    assert counts["final"] == counts["distinct_keys"] == 80


def test_storage_down_sends_bodies_to_the_python_path_and_the_spool(start_collector, tmp_path) -> None:
    """ClickHouse unreachable: the engine's INSERT fails for now, every body takes the Python path,
    which acknowledges it from the spool; a collector on storage replays the spool later."""
    spool = tmp_path / "spool"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    down = start_collector(
        clickhouse_dsn=f"http://default:@127.0.0.1:{closed}/", spool_dir=str(spool), ingest_path="engine"
    )
    traces = [chat_trace(recent_base_ns()) for _ in range(3)]
    refused = metric("latencylens_engine_bodies_total", outcome="refused")
    for spans in traces:
        assert (
            _post(f"{down.url}/v1/traces", content=protobuf_body(spans), headers=PROTOBUF).status_code == 200
        )
    assert len(list(spool.glob("*.spool"))) == 3
    assert metric("latencylens_engine_bodies_total", outcome="refused") - refused == 3
    down.service.stop()
    restored = start_collector(spool_dir=str(spool), ingest_path="engine")
    wait_until(lambda: not list(spool.glob("*.spool")), what="the spool to drain")
    for spans in traces:
        assert len(restored.store.spans_of_traces([_trace_bytes(spans)])) == 4
        assert _request_row(restored.store, spans) is not None


def test_bodies_whose_verdicts_are_not_seen_take_the_python_path(start_collector) -> None:
    """A verdict is written by the node that ran the INSERT; one the collector does not read back
    (its query went to another node of a cluster) must not count as stored. Here the verdicts'
    view is dropped, so no verdict is written: every body takes the Python path and nothing is
    lost; an empty export (no verdict either) is answered as before."""
    running = start_collector(ingest_path="engine")
    first = chat_trace(recent_base_ns())
    answer = _post(f"{running.url}/v1/traces", content=protobuf_body(first), headers=PROTOBUF)
    assert answer.status_code == 200  # the engine's tables and views now exist
    views = running.store.query(
        "SELECT name FROM system.tables WHERE database = {db:String} AND name LIKE 'otlp_verdicts_mv_%'",
        {"db": running.store.database},
    )
    assert len(views) == 2  # one per set of views: spans without events, spans with events
    for view in views:
        running.store.command(f"DROP VIEW {running.store.database}.{view['name']}")
    unseen = metric("latencylens_engine_bodies_total", outcome="no_verdict")
    stored = metric("latencylens_engine_bodies_total", outcome="stored")
    traces = [chat_trace(recent_base_ns()) for _ in range(3)]
    for spans in traces:
        answer = _post(f"{running.url}/v1/traces", content=protobuf_body(spans), headers=PROTOBUF)
        assert answer.status_code == 200 and answer.content == b""
    empty = _post(f"{running.url}/v1/traces", content=b"", headers=PROTOBUF)
    assert empty.status_code == 200
    assert metric("latencylens_engine_bodies_total", outcome="no_verdict") - unseen == 4
    assert metric("latencylens_engine_bodies_total", outcome="stored") == stored
    assert _engine_counts(running.store) == {"spans": 4, "not_plain": 0}  # the first export's only
    for spans in traces:
        assert len(running.store.spans_of_traces([_trace_bytes(spans)])) == 4
        row = _request_row(running.store, spans)
        assert row is not None and row["e2e_ns"] == 1000 * MS  # chat_trace: a 1000 ms request
    counts = span_counts(running.store)
    assert counts["final"] == counts["distinct_keys"] == 16


def test_a_stream_recorded_as_chunk_events_is_stored_by_the_engine(start_collector) -> None:
    """A model call with one chunk event per chunk received, as OpenLLMetry records a stream: the
    body goes to the views that store span events; its spans keep their events, the model span
    gains the stream times read from them, and the request row is there at once."""
    running = start_collector(ingest_path="engine")
    spans = chat_trace(recent_base_ns())
    request = export_request(spans)
    model = request.resource_spans[0].scope_spans[0].spans[2]
    for index in range(101):  # 101 chunks 4 ms apart, from 300 ms after the call's start
        model.events.add(
            name="gen_ai.content.completion.chunk",
            time_unix_nano=model.start_time_unix_nano + (300 + 4 * index) * MS,
        )
    stored = metric("latencylens_engine_bodies_total", outcome="stored")
    answer = _post(f"{running.url}/v1/traces", content=request.SerializeToString(), headers=PROTOBUF)
    assert answer.status_code == 200 and answer.content == b""
    assert metric("latencylens_engine_bodies_total", outcome="stored") - stored == 1
    rows = {row.name: row for row in running.store.spans_of_traces([_trace_bytes(spans)])}
    assert len(rows) == 4
    call = rows[model.name]
    assert len(call.events) == 101 and call.events[0].name == "gen_ai.content.completion.chunk"
    # The first chunk event at 300 ms, the last at 300 + 4 × 100 = 700 ms after the call's start.
    assert call.attributes["latencylens.events.first_content_ns"] == str(300 * MS)
    assert call.attributes["latencylens.events.last_chunk_ns"] == str(700 * MS)
    row = _request_row(running.store, spans)
    assert row is not None and row["e2e_ns"] == 1000 * MS


def _marked_span_ids(store, trace: bytes) -> set[bytes]:
    """Span ids of the trace stored marked ``latencylens.trace.too_large`` (each span's latest copy)."""
    rows = store.query(
        f"SELECT span_id FROM {store.table('spans')} FINAL WHERE trace_id = {{trace:FixedString(16)}} "
        "AND attributes['latencylens.trace.too_large'] = 'true'",
        {"trace": trace},
    )
    return {bytes(row["span_id"]) for row in rows}


def test_a_body_taking_a_trace_past_its_span_cap_is_marked_as_on_the_python_path(start_collector) -> None:
    """max_trace_spans = 10. A first export brings 8 spans of a trace (stored by the engine, under
    the cap), a second 6 more: 14 > 10, so the second takes the Python path, which marks its last
    4 spans (the 11th to the 14th admitted). A collector on the Python path given the same two
    exports marks the same 4 spans, and both rows say the trace was too large once the reconciler
    wrote them (on the engine path the first row counted the second export's unmarked copies)."""
    base = recent_base_ns()
    trace_id = int.from_bytes(b"cap-trace-000001", "big")
    root = new_span_id()
    spans = [span("root", trace_id, root, None, base, base + 100 * MS)]
    spans += [
        span(f"step {i}", trace_id, new_span_id(), root, base + i * MS, base + (i + 1) * MS)
        for i in range(13)
    ]
    first, second = protobuf_body(spans[:8]), protobuf_body(spans[8:])
    marked: dict[str, set[bytes]] = {}
    for path in ("engine", "python"):
        running = start_collector(ingest_path=path, max_trace_spans=10)
        for body in (first, second):
            answer = _post(f"{running.url}/v1/traces", content=body, headers=PROTOBUF)
            assert answer.status_code == 200 and not ExportTraceServiceResponse.FromString(
                answer.content
            ).HasField("partial_success")
        trace = _trace_bytes(spans)
        assert len(running.store.spans_of_traces([trace])) == 14
        marked[path] = _marked_span_ids(running.store, trace)
        # The trace's row past its cap is the reconciler's, from all its spans once settled (a
        # piece past the cap is not read back): one pass, as the service runs them.
        Reconciler(running.store, settle_s=0, lookback_s=3600).run_once()
        row = _request_row(running.store, spans)
        assert row is not None and row["provenance"]["trace"] == "too_large"
    last_four = {s.context.span_id.to_bytes(8, "big") for s in spans[10:]}
    assert marked == {"engine": last_four, "python": last_four}
