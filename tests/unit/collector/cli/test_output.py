"""The one table style: complete at any width (wrap text, then split columns into blocks), never a
cut id or number; durations and times formatted one way."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from latencylens_collector.cli.output import Column, Table, ms, percent, render, utc

TRACE_A = "0af7651916cd43dd8448eb211c80319c"
TRACE_B = "b7ad6b7169203331b7ad6b7169203331"


def _requests_table() -> Table:
    table = Table(
        "Slowest",
        [
            Column("trace id"),
            Column("service / name", wraps=True),
            Column("e2e", numeric=True),
            Column("decode", numeric=True),
        ],
        notes=["e2e = end to end"],
    )
    table.add(TRACE_A, "shop / POST /chat", "2000.0", "800.0")
    table.add(TRACE_B, "demo-chat / POST /answer", "12834567.5", "0.0")
    return table


def test_a_table_that_fits_is_one_grid() -> None:
    assert render(_requests_table(), 120) == "\n".join(
        [
            "Slowest",
            "",
            "trace id                          service / name                   e2e  decode",
            "────────────────────────────────  ────────────────────────  ──────────  ──────",
            f"{TRACE_A}  shop / POST /chat             2000.0   800.0",
            f"{TRACE_B}  demo-chat / POST /answer  12834567.5     0.0",
            "e2e = end to end",
        ]
    )


def test_free_text_wraps_at_spaces_before_columns_split() -> None:
    # Natural width 78; at 74 the text column gives up 4 characters and wraps (indented 2).
    assert render(_requests_table(), 74) == "\n".join(
        [
            "Slowest",
            "",
            "trace id                          service / name               e2e  decode",
            "────────────────────────────────  ────────────────────  ──────────  ──────",
            f"{TRACE_A}  shop / POST /chat         2000.0   800.0",
            f"{TRACE_B}  demo-chat / POST      12834567.5     0.0",
            "                                    /answer",
            "e2e = end to end",
        ]
    )


def test_a_table_too_wide_splits_into_blocks_led_by_a_row_number() -> None:
    # The key (a 32-character id) is wider than a third of 50 columns: rows are numbered instead.
    assert render(_requests_table(), 50) == "\n".join(
        [
            "Slowest",
            "",
            "#  trace id",
            "─  ────────────────────────────────",
            f"1  {TRACE_A}",
            f"2  {TRACE_B}",
            "",
            "#  service / name                   e2e  decode",
            "─  ────────────────────────  ──────────  ──────",
            "1  shop / POST /chat             2000.0   800.0",
            "2  demo-chat / POST /answer  12834567.5     0.0",
            "e2e = end to end",
        ]
    )


def test_a_narrow_key_leads_every_block() -> None:
    table = Table("", [Column("model"), *(Column(f"metric {n}", numeric=True) for n in range(4))])
    table.add("m-big", "1.0", "22.0", "333.0", "4444.0")
    assert render(table, 30) == "\n".join(
        [
            "model  metric 0  metric 1",
            "─────  ────────  ────────",
            "m-big       1.0      22.0",
            "",
            "model  metric 2  metric 3",
            "─────  ────────  ────────",
            "m-big     333.0    4444.0",
        ]
    )


@pytest.mark.parametrize("columns", [20, 40, 80, 200])
def test_every_value_is_whole_at_any_width(columns: int) -> None:
    text = render(_requests_table(), columns)
    for value in (TRACE_A, TRACE_B, "2000.0", "12834567.5", "800.0"):
        assert value in text
    assert "…" not in text


def test_values() -> None:
    assert ms(1_234_567) == "1.2"
    assert ms(12_834_567_500_000) == "12834567.5"
    assert ms(None) == "-"
    assert ms(-1_500_000, signed=True) == "-1.5" and ms(1_500_000, signed=True) == "+1.5"
    assert percent(0.754) == "75%" and percent(None) == "-"
    assert utc("2025-05-01T12:00:00.123456Z") == "2025-05-01 12:00:00 UTC"
    assert utc("2025-05-01T14:00:00+02:00") == "2025-05-01 12:00:00 UTC"
    assert utc("2025-05-01T12:00:00") == "2025-05-01 12:00:00 UTC"  # the API's naive times are UTC
    assert utc(1_746_100_800_000_000_000) == "2025-05-01 12:00:00 UTC"
    assert utc(datetime(2025, 5, 1, 12, tzinfo=timezone.utc)) == "2025-05-01 12:00:00 UTC"
    assert utc(None) == "-"


def test_several_key_columns_lead_every_block_and_text_wraps_comfortably() -> None:
    table = Table(
        "",
        [Column("hour"), Column("model"), Column("p95", numeric=True), Column("shares", wraps=True)],
        keys=2,
    )
    table.add("07:00", "m-big", "1996.5", "decode 40%, network 23%, app_other 15%")
    table.add("07:00", "m-small", "998.2", "decode 40%")
    # Shares wrapped to their longest word (10) would make one grid of 42 columns; below 20
    # characters a column moves to the next block instead, and wraps there only as far as needed.
    assert render(table, 42) == "\n".join(
        [
            "hour   model       p95",
            "─────  ───────  ──────",
            "07:00  m-big    1996.5",
            "07:00  m-small   998.2",
            "",
            "hour   model    shares",
            "─────  ───────  ──────────────────────────",
            "07:00  m-big    decode 40%, network 23%,",
            "                  app_other 15%",
            "07:00  m-small  decode 40%",
        ]
    )
