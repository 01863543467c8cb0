"""Reads by trace id send the ids as one ``Array(UInt128)`` parameter turned back into bytes in the
query (:mod:`~latencylens_collector.storage.trace_ids`): every read must find exactly the traces
asked for, whatever their bytes (zero and 0xff bytes at either end, the top bit set, ids that are
the same integer's bytes in the other order, each asked for alone)."""

from __future__ import annotations

import pytest

from latencylens_collector.analysis.records import NO_PARENT, SpanRow
from latencylens_collector.analysis.row_work import ReadBack, ReadPart
from latencylens_collector.storage import trace_state
from latencylens_collector.storage.store import Store
from latencylens_collector.storage.trace_ids import trace_ids_param

START_NS = 1_796_000_000_000_000_000

AWKWARD_IDS = [
    bytes(15) + b"\x01",  # 1 as big-endian: little-endian 2**120
    b"\x01" + bytes(15),  # its mirror: little-endian 1
    b"\xff" * 16,  # the largest UInt128
    b"\x80" + bytes(15),
    bytes(15) + b"\x80",  # top bit of the UInt128 set
    b"\x00\xff" * 8,
    b"\xff\x00" * 8,
    bytes(range(16)),
    bytes(range(16))[::-1],
]


def _span(trace_id: bytes, index: int) -> SpanRow:
    return SpanRow(
        trace_id=trace_id,
        span_id=(index + 1).to_bytes(8, "big"),
        parent_span_id=NO_PARENT,
        service="chat-api",
        name=f"trace {index}",
        span_kind="server",
        kind="request",
        start_ns=START_NS + index,
        duration_ns=10,
        project="default",
    )


@pytest.fixture
def stored(store: Store) -> Store:
    store.insert_spans([_span(trace_id, index) for index, trace_id in enumerate(AWKWARD_IDS)])
    return store


def test_the_parameter_is_each_distinct_id_once_in_order() -> None:
    ids = [b"\x02" + bytes(15), b"\x01" + bytes(15), b"\x02" + bytes(15)]
    assert trace_ids_param(ids) == [1, 2]


@pytest.mark.parametrize(
    "asked",
    [[trace_id] for trace_id in AWKWARD_IDS] + [AWKWARD_IDS[::2], AWKWARD_IDS],
    ids=[f"id{index}" for index in range(len(AWKWARD_IDS))] + ["every-other", "all"],
)
def test_every_read_by_trace_id_finds_exactly_the_traces_asked_for(stored: Store, asked: list[bytes]) -> None:
    missing = b"\xee" * 16
    wanted = {*asked, missing}
    assert set(trace_state.stamps(stored, wanted, "default")) == set(asked)
    assert set(trace_state.stored_traces(stored, wanted, "default")) == set(asked)
    assert {span.trace_id for span in stored.spans_of_traces(wanted)} == set(asked)
    assert {span.trace_id for span in stored.spans_of_traces(wanted, for_requests=True)} == set(asked)
    read = trace_state.stored_traces_unparsed(stored, wanted, "default")
    unparsed = ReadBack((ReadPart("default", read),), 0)
    assert {trace.spans[0].trace_id for trace in unparsed.traces()} == set(asked)
    assert {span.name for span in stored.spans_of_traces(wanted)} == {
        f"trace {AWKWARD_IDS.index(trace_id)}" for trace_id in asked
    }


def test_no_id_reads_nothing(stored: Store) -> None:
    assert trace_state.stamps(stored, [], "default") == {}
    assert stored.spans_of_traces([]) == []
