"""Mooncake trace export/import and AIPerf per-request records, on documented examples."""

from __future__ import annotations

from typing import Any

import pytest

from latencylens_collector.traffic.aiperf import model_attributes, read_profile_export
from latencylens_collector.traffic.mooncake import dump, read_mooncake, to_mooncake
from latencylens_collector.traffic.shape import RequestShape

MS = 1_000_000
SHAPES = [
    RequestShape(0, 1200, 40, cached_input_tokens=1024, source_trace_id="a" * 32, route="POST /chat"),
    RequestShape(250 * MS, 700, 12, cached_input_tokens=0, source_trace_id="b" * 32, route="POST /chat"),
    RequestShape(
        1_500 * MS + 400_000, 1600, 80, cached_input_tokens=1100, source_trace_id="c" * 32, route="POST /chat"
    ),
    RequestShape(2_000 * MS, 600, 5, cached_input_tokens=512, source_trace_id="d" * 32, route="POST /search"),
]


def check_mooncake_schema(record: dict[str, Any]) -> None:
    """AIPerf's ``MooncakeTrace`` model (aiperf 0.13, dataset/loader/models.py): exactly one input
    mode (here ``input_length``, an int), optional int ``output_length``, list of int ``hash_ids``,
    numeric ``timestamp`` in ms, string ``session_id``; other keys allowed."""
    modes = [
        key for key in ("input_length", "text_input", "messages", "payload") if record.get(key) is not None
    ]
    assert modes == ["input_length"]
    assert isinstance(record["input_length"], int) and record["input_length"] >= 0
    assert isinstance(record["output_length"], int)
    assert isinstance(record["timestamp"], (int, float))
    assert isinstance(record.get("session_id", ""), str)
    assert all(isinstance(i, int) for i in record.get("hash_ids", []))


def test_mooncake_export_follows_the_format() -> None:
    records = to_mooncake(SHAPES)
    for record in records:
        check_mooncake_schema(record)
    assert [r["timestamp"] for r in records] == [0, 250, 1500, 2000]  # ms, whole
    assert [(r["input_length"], r["output_length"]) for r in records] == [
        (1200, 40),
        (700, 12),
        (1600, 80),
        (600, 5),
    ]
    # Blocks of 512: 1,200 tokens are 3 blocks, 2 of them cached (1,024 // 512); 1,600 are 4
    # blocks, 2 cached (1,100 // 512): the route's two prefix blocks again, then new ones.
    assert records[0]["hash_ids"] == [0, 1, 2]
    assert "hash_ids" not in records[1]  # nothing cached: nothing known about blocks
    assert records[2]["hash_ids"] == [0, 1, 3, 4]
    assert records[3]["hash_ids"] == [5, 6]  # another route's prefix is another prefix
    assert records[0]["session_id"] == "a" * 32


def test_mooncake_round_trip() -> None:
    back = read_mooncake(dump(to_mooncake(SHAPES)))
    assert [(s.offset_ns, s.input_tokens, s.output_tokens, s.source_trace_id) for s in back] == [
        (0, 1200, 40, "a" * 32),
        (250 * MS, 700, 12, "b" * 32),
        (1500 * MS, 1600, 80, "c" * 32),  # timestamps are whole ms
        (2000 * MS, 600, 5, "d" * 32),
    ]
    # Cached tokens come back as whole blocks seen before: the third reuses two, the first none.
    assert [s.cached_input_tokens for s in back] == [0, 0, 1024, 0]
    with pytest.raises(ValueError, match="line 2"):
        read_mooncake(['{"input_length": 5, "output_length": 1}', '{"text_input": "hi"}'])


# The successful record of AIPerf's "Working with Profile Export Files" guide (its duplicate
# time_to_first_token key left as published: JSON keeps the last, 4.898... ms).
AIPERF_RECORD = """{"metadata": {"session_num": 45, "x_request_id": "7609a2e7-aa53-4ab1-98f4-f35ecafefd25",
"x_correlation_id": "32ee4f33-cfca-4cfc-988f-79b45408b909",
"conversation_id": "77aa5b0e-b305-423f-88d5-c00da1892599", "turn_index": 0,
"request_start_ns": 1759813207532900363, "request_ack_ns": 1759813207650730976,
"request_end_ns": 1759813207838764604, "worker_id": "worker_359d423a",
"record_processor_id": "record_processor_1fa47cd7", "benchmark_phase": "profiling",
"was_cancelled": false, "cancellation_time_ns": null},
"metrics": {"input_sequence_length": {"value": 550, "unit": "tokens"},
"time_to_first_token": {"value": 255.88656799999998, "unit": "ms"},
"request_latency": {"value": 297.52522799999997, "unit": "ms"}, "output_token_count": {"value": 9,
"unit": "tokens"}, "time_to_first_token": {"value": 4.8984369999999995, "unit": "ms"},
"inter_chunk_latency": {"value": [4.898437, 5.316006, 4.801489, 5.674918, 4.811467, 5.097998,
5.504797, 5.533548], "unit": "ms"}, "output_sequence_length": {"value": 9, "unit": "tokens"},
"inter_token_latency": {"value": 5.2048325, "unit": "ms"},
"output_token_throughput_per_user": {"value": 192.1291415237666, "unit": "tokens/sec/user"}},
"error": null}"""
AIPERF_FAILED = """{"metadata": {"session_num": 80, "conversation_id": "9526b41d-5dbc-41a5-a353-99ae06a53bc5",
"turn_index": 0, "request_start_ns": 1759879161119147826, "request_ack_ns": null,
"request_end_ns": 1759879161119772754, "benchmark_phase": "profiling", "was_cancelled": true,
"cancellation_time_ns": 1759879161119772754}, "metrics": {"error_isl": {"value": 550,
"unit": "tokens"}}, "error": {"code": 499, "type": "RequestCancellationError",
"message": "Request was cancelled after 0.000 seconds"}}"""


def test_aiperf_records_read_from_the_documented_export() -> None:
    ok, failed = read_profile_export([AIPERF_RECORD.replace("\n", " "), "", AIPERF_FAILED.replace("\n", " ")])
    assert ok.start_ns == 1759813207532900363
    assert ok.end_ns == 1759813207532900363 + 297_525_228  # request_latency 297.525228 ms
    assert ok.ttft_ns == 4_898_437  # the last time_to_first_token, 4.898437 ms
    assert (ok.input_tokens, ok.output_tokens, ok.error) == (550, 9, None)
    assert ok.source_trace_id == "77aa5b0e-b305-423f-88d5-c00da1892599"
    assert failed.error == "RequestCancellationError" and failed.ttft_ns is None
    assert failed.end_ns == 1759879161119772754  # no latency metric: request_end_ns
    attributes = model_attributes(ok, provider="vllm", model="m")
    assert attributes["latencylens.stream.first_content_ns"] == 4_898_437
    assert attributes["latencylens.stream.last_chunk_ns"] == 297_525_228
    assert attributes["gen_ai.usage.output_tokens"] == 9
    assert "latencylens.stream.first_content_ns" not in model_attributes(failed, "vllm", "m")
    with pytest.raises(ValueError, match="line 1"):
        read_profile_export(['{"metadata": {}}'])
