"""The engine path reads traces back as ClickHouse writes them out (JSON columns) and parses them
where their rows are built (:class:`ReadBack`): the spans it gets must be the ones the parsed read
(:func:`trace_state.stored_traces`) gives, value for value, whatever the spans hold."""

from __future__ import annotations

import json
import time
from collections import Counter

from latencylens_collector.analysis.records import NO_PARENT, SpanRow
from latencylens_collector.analysis.row_work import ReadBack, ReadPart, TraceToBuild
from latencylens_collector.storage import trace_state
from latencylens_collector.storage.store import Store

BASE_NS = 1_796_000_000_123_456_789


def _span(trace: int, span: int, project: str, **fields: object) -> SpanRow:
    values: dict[str, object] = {
        "trace_id": bytes([trace]) * 16,
        "span_id": span.to_bytes(8, "big"),
        "parent_span_id": NO_PARENT,
        "service": "chat-api",
        "name": f"span {span}",
        "span_kind": "internal",
        "kind": "other",
        "start_ns": BASE_NS + span,
        "duration_ns": 5,
        "project": project,
        **fields,
    }
    return SpanRow(**values)  # type: ignore[arg-type]


AWKWARD = {
    'quote"and\\backslash': 'a "quoted" \\ value\nwith a newline\tand a tab',
    "unicode": "naïve café — 東京 🚀",
    "control": "\x00\x01\x1f end",
    "empty": "",
    "gen_ai.usage.input_tokens": "9223372036854775807",
}


def _stored(store: Store) -> dict[str, list[SpanRow]]:
    spans = {
        "default": [
            _span(0xA1, 1, "default", span_kind="server", kind="request", attributes=AWKWARD),
            _span(
                0xA1,
                2,
                "default",
                parent_span_id=(1).to_bytes(8, "big"),
                kind="model",
                status_code=2,
                duration_ns=2**63 - 1,
                start_ns=BASE_NS,  # before its parent: start order, not insert order
            ),
            _span(0xA2, 3, "default", service="", name="", attributes={}),
        ],
        "other": [_span(0xA1, 1, "other", name="same ids, another project")],
    }
    for rows in spans.values():
        store.insert_spans(rows)
    return spans


def test_read_back_unparsed_gives_the_parsed_reads_spans_and_stamps(store: Store) -> None:
    _stored(store)
    missing = bytes([0xEE]) * 16
    for project, ids in (
        ("default", [bytes([0xA2]) * 16, bytes([0xA1]) * 16, missing]),
        ("other", [bytes([0xA1]) * 16]),
    ):
        parsed = trace_state.stored_traces(store, ids, project)
        expected = [
            TraceToBuild(parsed[trace_id].spans, parsed[trace_id].last_insert_us)
            for trace_id in sorted(ids)
            if trace_id in parsed
        ]
        unparsed = ReadBack((ReadPart(project, trace_state.stored_traces_unparsed(store, ids, project)),), 0)
        assert unparsed.traces() == expected
    [first, _] = ReadBack(
        (
            ReadPart(
                "default",
                trace_state.stored_traces_unparsed(
                    store, [bytes([0xA1]) * 16, bytes([0xA2]) * 16], "default"
                ),
            ),
        ),
        0,
    ).traces()
    model, root = first.spans  # start order
    assert (model.kind, model.status_code, model.duration_ns) == ("model", 2, 2**63 - 1)
    assert root.attributes == AWKWARD and root.project == "default" and root.status_message == ""
    assert first.last_insert_us > 0


def test_nothing_read_back_is_no_trace(store: Store) -> None:
    _stored(store)
    nothing = trace_state.stored_traces_unparsed(store, [bytes([0xEE]) * 16], "default")
    assert ReadBack((ReadPart("default", nothing),), 0).traces() == []
    assert ReadBack((), 0).traces() == []


def test_traces_past_most_spans_are_read_in_part_and_left_out(store: Store) -> None:
    """Trace 0xA1 has 2 distinct spans stored, 0xA2 one. A span stored twice (an unmerged copy)
    counts once, as the per-trace cap counts spans. Of a trace with more than ``most_spans``
    spans the read gives ``most_spans + 1``: enough for the parse to leave it out and name it."""
    spans = _stored(store)
    store.insert_spans(spans["default"][2:])  # 0xA2's span again
    a1, a2 = bytes([0xA1]) * 16, bytes([0xA2]) * 16

    def read(most_spans: int) -> tuple[dict[str, int], dict[bytes, int], list[tuple[str, bytes]]]:
        unparsed = trace_state.stored_traces_unparsed(store, [a1, a2], "default", most_spans)
        rows_read = Counter(json.loads(unparsed)[0]) if unparsed.strip() else Counter()
        traces, past_cap = ReadBack((ReadPart("default", unparsed, most_spans),), 0).parsed()
        return dict(rows_read), {trace.spans[0].trace_id: len(trace.spans) for trace in traces}, past_cap

    assert read(2) == ({a1.hex().upper(): 2, a2.hex().upper(): 1}, {a1: 2, a2: 1}, [])
    assert read(1) == ({a1.hex().upper(): 2, a2.hex().upper(): 1}, {a2: 1}, [("default", a1)])
    assert read(0) == ({a1.hex().upper(): 1, a2.hex().upper(): 1}, {}, [("default", a1), ("default", a2)])


def test_json_columns_write_numbers_and_valid_utf8_without_touching_the_session(store: Store) -> None:
    """The read-back's output settings are the query's own (a ``SETTINGS`` clause): 64-bit
    integers as numbers, invalid UTF-8 as U+FFFD, and the next query sees the defaults again."""
    out = store.query_json_columns("SELECT toInt64(9223372036854775807) AS big, unhex('ff') AS bad")
    assert json.loads(out) == [[9223372036854775807], ["\ufffd"]]
    rows = store.query(
        "SELECT name, changed FROM system.settings WHERE name IN "
        "('output_format_json_quote_64bit_integers', 'output_format_json_validate_utf8')"
    )
    assert len(rows) == 2 and not any(row["changed"] for row in rows)


def test_each_read_by_trace_id_gives_a_spans_latest_copy_only(store: Store) -> None:
    """The reads by trace id filter in ``PREWHERE`` under ``FINAL``. A span stored twice, in two
    parts not merged yet, must come back once, as its latest copy: a filter on the sorting key
    keeps every copy of a span for ``FINAL`` to choose from (one on another column, such as
    ``kind``, could keep the older copy alone)."""
    trace = bytes([0xB1]) * 16
    first = _span(0xB1, 1, "default", name="first copy", kind="other", attributes={"v": "1"})
    store.insert_spans([first])
    time.sleep(0.002)  # the copies' stamps (inserted_at, µs) differ: the later one is the latest
    latest = _span(0xB1, 1, "default", name="latest copy", kind="model", attributes={"v": "2"})
    store.insert_spans([latest])  # a later insert: the copy with the latest inserted_at
    parts = store.query(
        "SELECT count() AS parts FROM system.parts WHERE active AND database = {database:String} "
        "AND table = 'spans'",
        {"database": store.database},
    )
    assert parts[0]["parts"] >= 2  # the copies are apart: FINAL, not a merge, must collapse them

    [parsed] = trace_state.stored_traces(store, [trace], "default")[trace].spans
    [unparsed] = ReadBack(
        (ReadPart("default", trace_state.stored_traces_unparsed(store, [trace], "default")),), 0
    ).traces()
    [shown] = store.spans_of_traces([trace], "default")
    [for_rows] = store.spans_of_traces([trace], "default", for_requests=True)
    for span in (parsed, unparsed.spans[0], shown, for_rows):
        assert (span.name, span.kind, span.attributes) == ("latest copy", "model", {"v": "2"})
    assert len(unparsed.spans) == 1
