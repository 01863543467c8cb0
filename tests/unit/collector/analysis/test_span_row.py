"""The span row as the rest of the collector uses it, compiled or not (``make test`` runs these on
the compiled build, ``LATENCYLENS_PURE_PYTHON=1`` on the Python module)."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from latencylens_collector.analysis.records import NO_PARENT, SpanEvent, SpanRow


def _row() -> SpanRow:
    return SpanRow(
        b"\x01" * 16,
        b"\x02" * 8,
        b"\x03" * 8,
        "checkout",
        "chat gpt-4o",
        "client",
        "model",
        1_700_000_000_000_000_000,
        250_000_000,
        status_code=2,
        status_message="rate limited",
        attributes={"gen_ai.request.model": "gpt-4o"},
        resource_attributes={"service.name": "checkout"},
        project="team-a",
        events=[["gen_ai.content.chunk", 1_700_000_000_100_000_000, {"n": "1"}]],
        dropped_events_count=3,
    )


def test_events_given_as_lists_are_kept_as_span_events() -> None:
    row = _row()
    assert row.events == (SpanEvent("gen_ai.content.chunk", 1_700_000_000_100_000_000, {"n": "1"}),)
    assert type(row.events[0]) is SpanEvent


def test_defaults_are_fresh_for_each_row() -> None:
    first = SpanRow(b"t" * 16, b"a" * 8, NO_PARENT, "s", "n", "internal", "other", 0, 1)
    second = SpanRow(b"t" * 16, b"b" * 8, NO_PARENT, "s", "n", "internal", "other", 0, 1)
    assert first.attributes == {} and first.attributes is not second.attributes
    assert first.resource_attributes is not second.resource_attributes
    assert (first.status_code, first.status_message, first.project, first.events) == (0, "", "default", ())
    assert not first.has_parent and first.end_ns == 1


def test_a_row_pickled_to_a_row_process_comes_back_equal_in_every_field() -> None:
    row = _row()
    back = pickle.loads(pickle.dumps(row, protocol=pickle.HIGHEST_PROTOCOL))
    assert back == row
    assert dataclasses.asdict(back) == dataclasses.asdict(row)
    assert type(back.events[0]) is SpanEvent


def test_replace_makes_a_changed_copy_and_leaves_the_row() -> None:
    row = _row()
    changed = dataclasses.replace(row, kind="model_server", duration_ns=1)
    assert (changed.kind, changed.duration_ns) == ("model_server", 1)
    assert (row.kind, row.duration_ns) == ("model", 250_000_000)
    assert changed.events == row.events and changed.attributes == row.attributes


def test_a_row_takes_no_field_it_does_not_declare() -> None:
    with pytest.raises(AttributeError):
        _row().note = "x"  # type: ignore[attr-defined]
