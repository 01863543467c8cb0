"""What one INSERT of the engine path costs: a price per statement, then a price per span.

The engine path (``ingest_path = engine``) sends export bodies to ClickHouse, whose views decode
and flatten them into ``spans`` (:mod:`latencylens_collector.storage.otlp_sql`). Timed in one
process (:mod:`bench._engine_insert_timing`), statement by statement, the cases interleaved:

* **raw insert** (the baseline): :data:`~bench._engine_insert_timing.MANY_BODIES` bodies into a
  ``Null`` table of the landing table's columns, no views: reading the Protobuf and nothing else;
* an INSERT of **one span** (one body cut to its first span), of **one body** (500 spans) and of
  as many bodies as the baseline: what a statement costs before its first span is the one-span
  INSERT, and the slope between it and the large one is the price of each further span;
* where the price per statement goes: planning the flat view (``EXPLAIN PLAN`` of its SELECT
  with the INSERT's settings, less ``EXPLAIN AST``: the view is parsed once, when it is loaded),
  one row into the views after it (``spans``, verdicts, touched traces) and into ``spans`` alone
  (each less a one-row read of spans, which both include), and a one-span body read into the
  ``Null`` table without views.

This is why the writer lets bodies gather for a moment (``pipeline.writer.BODY_FILL_S``, up to
``BODY_BATCH_MIN_BYTES``) and why ``ingest_path = auto`` hands exports to the engine only once
those in flight fill an INSERT. Reported, no target: it says where a change to the views would pay.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from bench import _collector, _payloads
from bench._engine_insert_timing import MANY_BODIES

ROUNDS = 15
DIRECTORY = _collector.ROOT / ".latencylens" / "bench-engine-insert"


def timings() -> dict[str, dict[str, float]]:
    command = [sys.executable, "-m", "bench._engine_insert_timing", str(DIRECTORY), str(ROUNDS)]
    out = subprocess.run(command, cwd=_collector.ROOT, check=True, capture_output=True, text=True).stdout
    result: dict[str, dict[str, float]] = json.loads(out.strip().splitlines()[-1])
    return result


def run(report: Any) -> None:
    t = timings()
    spans = MANY_BODIES * _payloads.SPANS_PER_BODY
    raw, one_span, many = t["raw"]["wall_ms"], t["one_span"]["wall_ms"], t["many_bodies"]["wall_ms"]
    medians = f"median of {ROUNDS} statements"
    report.add(
        f"raw insert: {MANY_BODIES} bodies into a Null table, no views (baseline)",
        raw,
        "ms",
        f"{spans:,} spans; CPU {t['raw']['cpu_ms']:.1f} ms; {medians}",
    )
    report.add(
        "engine INSERT of one span",
        one_span,
        "ms",
        f"CPU {t['one_span']['cpu_ms']:.1f} ms; what a statement costs before its first span",
        ratio=one_span / raw,
    )
    report.add(
        "engine INSERT of one body",
        t["one_body"]["wall_ms"],
        "ms",
        f"{_payloads.SPANS_PER_BODY} spans; CPU {t['one_body']['cpu_ms']:.1f} ms",
        ratio=t["one_body"]["wall_ms"] / raw,
    )
    report.add(
        f"engine INSERT of {MANY_BODIES} bodies",
        many,
        "ms",
        f"{spans:,} spans; CPU {t['many_bodies']['cpu_ms']:.1f} ms",
        ratio=many / raw,
    )
    report.add(
        "engine INSERT, each further span",
        (many - one_span) / (spans - 1) * 1e3,
        "µs/span",
        f"slope from one span to {spans:,}; the statement's own cost spread over {spans:,} spans: "
        f"{one_span / spans * 1e3:.1f} µs/span",
    )
    read = t["read_one_row"]["wall_ms"]
    after_flat = t["after_flat_one_row"]["wall_ms"] - read
    spans_alone = t["spans_one_row"]["wall_ms"] - read
    parsing = t["parse_flat"]["wall_ms"]
    planning = t["plan_flat"]["wall_ms"] - parsing
    reading = t["raw_one_span"]["wall_ms"]
    report.add(
        "of a statement: planning the flat view",
        planning,
        "ms",
        f"EXPLAIN PLAN of its SELECT less EXPLAIN AST ({parsing:.1f} ms: an INSERT reuses the parsed "
        "view), with the INSERT's settings",
    )
    report.add(
        "of a statement: the views after the flat one (one row)",
        after_flat,
        "ms",
        f"of which one row into spans (with its own view) {spans_alone:.1f} ms",
    )
    report.add(
        "of a statement: reading one span's body, no views",
        reading,
        "ms",
        f"the rest of a one-span INSERT: {one_span - planning - after_flat - reading:.1f} ms",
    )
