"""Issue 15, item 1: a span whose attributes exceed the per-span budget is stored with its
attributes cut and counted, not the whole export lost."""

from __future__ import annotations

import gzip
import re

from otlp_builders import chat_trace, export_request, protobuf_body, span

from latencylens import semconv
from latencylens_collector.analysis.records import SpanEvent
from latencylens_collector.intake import otlp, sizes

BASE = 1_700_000_000_000_000_000
MIB = 1024 * 1024


def utf8_total(attributes: dict[str, str], events: tuple[SpanEvent, ...] = ()) -> int:
    text = [*attributes, *attributes.values()]
    for event in events:
        text += [event.name, *event.attributes, *event.attributes.values()]
    return sum(len(item.encode()) for item in text)


def test_water_filling_cuts_only_the_largest_values_to_one_length() -> None:
    attributes = {"model": "llama-3.3-70b", "tokens": "512", "a": "y" * 100_000, "b": "é" * 50_000}
    fitted = sizes.fit(attributes, (), 60_000)
    assert fitted is not None
    kept = fitted.attributes
    assert (kept["model"], kept["tokens"]) == ("llama-3.3-70b", "512")  # small values untouched
    a, b = (len(kept[key].encode()) for key in "ab")
    # Both cut to the same cap c (give or take a split character and the marker's digits), and the
    # cap is the largest that fits: keys 12 bytes + small values 16 bytes + 2c ≈ 60,000.
    assert abs(a - b) <= 4 and 29_900 <= a <= 29_986
    marks = {semconv.SPAN_BUDGET_CUT_BYTES}
    assert utf8_total({k: v for k, v in kept.items() if k not in marks}) <= 60_000
    removed = 200_000 - (len(kept["a"].split("…")[0]) + len(kept["b"].split("…")[0].encode()))
    assert kept[semconv.SPAN_BUDGET_CUT_BYTES] == str(removed)
    assert kept["a"].endswith("bytes]") and kept["b"].startswith("é" * 1000)
    assert sizes.fit(attributes, (), 300_000) is None


def test_when_cutting_is_not_enough_the_smallest_attributes_are_kept() -> None:
    attributes = {f"key.{i:05d}": "v" * (i % 7) for i in range(20_000)}  # keys alone ≈ 180 KB
    fitted = sizes.fit(attributes, (), 50_000)
    assert fitted is not None
    dropped = int(fitted.attributes.pop(semconv.SPAN_BUDGET_DROPPED_ATTRIBUTES))
    cut_bytes = int(fitted.attributes.pop(semconv.SPAN_BUDGET_CUT_BYTES))
    assert len(fitted.attributes) + dropped == 20_000
    assert utf8_total(fitted.attributes) <= 50_000
    assert cut_bytes == utf8_total(attributes) - utf8_total(fitted.attributes)
    # Kept smallest first: every kept value is no longer than any dropped one.
    longest_kept = max(map(len, fitted.attributes.values()))
    shortest_dropped = min(len(v) for k, v in attributes.items() if k not in fitted.attributes)
    assert longest_kept <= shortest_dropped


def test_event_attributes_share_the_span_budget() -> None:
    events = (SpanEvent("chunk", BASE, {"payload": "p" * 40_000}), SpanEvent("end", BASE + 1, {"n": "1"}))
    fitted = sizes.fit({"big": "b" * 40_000}, events, 50_000)
    assert fitted is not None
    assert fitted.events[1] == events[1]
    assert len(fitted.events[0].attributes["payload"]) == len(fitted.attributes["big"]) < 25_000


def test_a_span_over_the_budget_is_stored_cut_with_the_rest_of_the_export() -> None:
    """100 attributes of 60 KB (6 MB, under the 8 MiB body limit, gzipped to a few KB) beside the
    attribution attributes of a real model call: stored within 1 MiB, small values intact."""
    trace = chat_trace(BASE)
    model = trace[2]
    bloated = span(
        model.name,
        model.context.trace_id,
        model.context.span_id,
        model.parent.span_id,
        model.start_time,
        model.end_time,
        {**model.attributes, **{f"blob.{i}": "x" * 60_000 for i in range(100)}},
    )
    body = protobuf_body([*trace[:2], bloated, trace[3]])
    assert len(body) > 6_000_000 and len(gzip.compress(body)) < 20_000
    batch = otlp.decode(body, as_json=False, limits=otlp.Limits(now_ns=BASE))
    assert (len(batch.spans), batch.rejected) == (4, 0)
    stored = batch.spans[2].attributes
    for key, value in model.attributes.items():
        assert stored[key] == (str(value).lower() if isinstance(value, bool) else str(value))
    assert batch.spans[2].kind == otlp.flatten(export_request(trace)).spans[2].kind == "model"
    own = {k: v for k, v in stored.items() if k != semconv.SPAN_BUDGET_CUT_BYTES}
    assert MIB - 4096 < utf8_total(own) <= MIB
    # What was cut is what the markers say, and what the text lost net of the markers.
    cut = int(stored[semconv.SPAN_BUDGET_CUT_BYTES])
    assert cut == sum(int(n) for n in re.findall(r"…\[truncated (\d+) bytes\]", "".join(own.values())))
    limits = otlp.Limits(now_ns=BASE, max_span_bytes=10 * MIB)
    whole = otlp.decode(body, as_json=False, limits=limits).spans[2].attributes
    markers = sum(
        len(m.group().encode()) for m in re.finditer(r"…\[truncated \d+ bytes\]", "".join(own.values()))
    )
    assert utf8_total(whole) - utf8_total(own) == cut - markers
    assert batch.warnings == {otlp.OVER_SPAN_BUDGET: 1}
    assert "1 spans over the per-span byte budget" in batch.error_message
    assert batch.spans[0].attributes == otlp.flatten(export_request(trace)).spans[0].attributes
