"""A request row from attributes that are no count or duration: every integer fits its Int64
column, no count or time is negative, and the parts still sum to the request's duration.

The values are text, as the collector stores every attribute whatever its OTLP type. Each
property runs a fixed number of examples from a fixed seed (``derandomize``)."""

from __future__ import annotations

import dataclasses

from fuzz_settings import reproducible
from hypothesis import given
from hypothesis import strategies as st
from otlp_builders import MS, chat_trace, export_request

from latencylens import semconv
from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.analysis.conventions import parse_int
from latencylens_collector.analysis.conventions.reading import (
    CACHE_READ_TOKEN_KEYS,
    FIRST_CHUNK_MS_KEYS,
    FIRST_CHUNK_SECONDS_KEYS,
    INPUT_TOKEN_KEYS,
    OUTPUT_TOKEN_KEYS,
)
from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.analysis.request_rows import build_request_row
from latencylens_collector.intake import otlp

BASE = 1_700_000_000_000_000_000
INT64 = range(-(2**63), 2**63)
READ_KEYS = sorted(
    {
        *INPUT_TOKEN_KEYS,
        *OUTPUT_TOKEN_KEYS,
        *CACHE_READ_TOKEN_KEYS,
        *FIRST_CHUNK_SECONDS_KEYS,
        *FIRST_CHUNK_MS_KEYS,
        semconv.PROVIDER_QUEUE_NS,
        semconv.PROVIDER_PREFILL_NS,
        semconv.PROVIDER_DECODE_NS,
        semconv.PROVIDER_INFERENCE_NS,
        semconv.PROVIDER_SERVER_TOTAL_NS,
        semconv.STREAM_FIRST_CONTENT_NS,
        semconv.STREAM_LAST_CHUNK_NS,
        semconv.STREAM_ITL_NS,
    }
)
"""Attributes a model span's numbers are read from."""
HOSTILE_TEXT = st.sampled_from(
    [
        "-5",
        "-0.5",
        "1e25",
        "99999999999999999999999",
        "9223372036854775808",
        "1e300",
        "nan",
        "inf",
        "-inf",
        "x",
        "0",
    ]
)
FUZZ = reproducible(200)


def test_parse_int_reads_counts_and_ns_only() -> None:
    assert [parse_int(v) for v in ("12", "1.5e3", "0", "1e18")] == [12, 1500, 0, 10**18]
    assert [parse_int(v) for v in ("-1", "1e25", "1000000000000000001", "nan", "inf", "1e400")] == [None] * 6


def _priced_trace(values: dict[str, str]) -> list[SpanRow]:
    """chat_trace's spans with ``values`` on its model span, whose model has a price (so that a
    count of 10^18 tokens makes a cost past Int64)."""
    spans = otlp.flatten(export_request(chat_trace(BASE, model="llama-3.3-70b-versatile"))).spans
    return [
        dataclasses.replace(row, attributes={**row.attributes, **values})
        if row.kind == semconv.KIND_MODEL
        else row
        for row in spans
    ]


@FUZZ
@given(values=st.dictionaries(st.sampled_from(READ_KEYS), HOSTILE_TEXT, min_size=1))
def test_a_row_from_hostile_numbers_fits_its_columns(values: dict[str, str]) -> None:
    row = build_request_row(_priced_trace(values))
    assert row is not None
    for column, value in row.items():
        if type(value) is int:
            assert value in INT64, column
    for column in (
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "ttft_ns",
        "itl_ns",
        "cost_nano_usd",
    ):
        assert row[column] is None or row[column] >= 0, column
    parts = [row[f"{name}_ns"] for name in COMPONENTS]
    assert all(part >= 0 for part in parts)
    assert sum(parts) == row["e2e_ns"] == 1000 * MS


def test_a_cost_past_int64_is_unknown() -> None:
    """10^18 input tokens are a count, but at llama-3.3-70b-versatile's $0.59 per million they
    cost 5.9 × 10^20 nano-dollars, past the column's Int64: the cost is unknown, the counts kept."""
    priced = build_request_row(_priced_trace({}))
    assert priced is not None and priced["cost_nano_usd"] > 0  # at chat_trace's own counts
    row = build_request_row(_priced_trace({semconv.GEN_AI_USAGE_INPUT_TOKENS: str(10**18)}))
    assert row is not None
    assert (row["input_tokens"], row["cost_nano_usd"]) == (10**18, None)
