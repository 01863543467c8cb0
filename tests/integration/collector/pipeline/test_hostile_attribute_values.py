"""A sender's numbers that are no count or duration, through the real collector on both ingest paths.

Another process's spans may carry a token count of 1e25 (a double), a negative time to first
token, or a provider time of NaN. Such a value is not attributed, and the trace's request row is
stored with it unknown. Before, on the Python path, a count past Int64 failed the write of the
whole batch ("Python int too large to convert to C long"): it went to the spool, and neither
trace got a request row; a negative count was read as a count.
"""

from __future__ import annotations

import math

import httpx
import pytest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from otlp_builders import MS, chat_trace, export_request, recent_base_ns

from latencylens import semconv
from latencylens_collector import queries
from latencylens_collector.analysis.records import DEFAULT_PROJECT

PROTOBUF = {"Content-Type": "application/x-protobuf"}
HOSTILE: dict[str, tuple[str, object]] = {
    semconv.GEN_AI_USAGE_INPUT_TOKENS: ("double_value", 1e25),
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: ("int_value", -7),
    semconv.STREAM_FIRST_CONTENT_NS: ("int_value", -5),
    semconv.PROVIDER_QUEUE_NS: ("double_value", math.nan),
    semconv.PROVIDER_PREFILL_NS: ("string_value", "1e300"),
}
"""What the model span of the second trace says instead of chat_trace's values."""


def _spoiled(attributes) -> None:
    kept = [pair for pair in attributes if pair.key not in HOSTILE]
    del attributes[:]
    attributes.extend(kept)
    for key, (field, value) in HOSTILE.items():
        pair = KeyValue(key=key)
        setattr(pair.value, field, value)
        attributes.append(pair)


@pytest.mark.parametrize("ingest_path", ["python", "engine"])
def test_numbers_that_are_no_count_leave_the_row_stored_with_them_unknown(
    start_collector, ingest_path
) -> None:
    running = start_collector(ingest_path=ingest_path)
    base = recent_base_ns()
    good, hostile = chat_trace(base), chat_trace(base)
    request = export_request(good + hostile)
    spans = request.resource_spans[0].scope_spans[0].spans
    [model_span] = [s for s in spans[4:] if s.name.startswith("chat ")]
    _spoiled(model_span.attributes)
    response = httpx.post(
        f"{running.url}/v1/traces", content=request.SerializeToString(), headers=PROTOBUF, timeout=60
    )
    assert response.status_code == 200, response.text

    rows = {}
    for trace in (good, hostile):
        trace_hex = trace[0].context.trace_id.to_bytes(16, "big").hex()
        detail = queries.request_detail(running.store, DEFAULT_PROJECT, trace_hex)
        assert detail is not None, f"no request row for the {'good' if trace is good else 'hostile'} trace"
        rows["good" if trace is good else "hostile"] = detail.model_dump()
    good_row, hostile_row = rows["good"], rows["hostile"]
    assert (good_row["input_tokens"], good_row["output_tokens"]) == (500, 101)
    # Counts that are no count are unknown, not 10**25 nor −7; TTFT −5 ns is no TTFT.
    assert (hostile_row["input_tokens"], hostile_row["output_tokens"]) == (None, None)
    assert hostile_row["ttft_ns"] is None
    # The queue (NaN) and prefill (10^300 ns) are not reported: the call's reported decode (400 ms)
    # stays; what the server total (470 ms) leaves, 70 ms, is no longer split into queue and prefill.
    assert hostile_row["parts"]["decode"] == 400 * MS
    assert hostile_row["parts"].get("queue", 0) == 0 and hostile_row["parts"].get("prefill", 0) == 0
    assert sum(hostile_row["parts"].values()) == hostile_row["e2e_ns"] == 1000 * MS
