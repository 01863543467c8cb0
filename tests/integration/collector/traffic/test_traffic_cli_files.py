"""``latencylens replay --export-mooncake`` writes the selection as a mooncake trace, and
``--import-aiperf`` stores an AIPerf export as a run that ``compare --replay`` puts beside the
recorded requests named by its conversation ids (the mooncake ``session_id``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from queries_data import MS, S, request_row

from latencylens_collector.cli.main import main

T0 = 1_790_000_000 * S


def seed(store) -> None:  # type: ignore[no-untyped-def]
    store.upsert_requests(
        [
            request_row(
                n,
                T0 + n * 100 * MS,
                {"network": 5, "queue": 10, "prefill": 20, "decode": 100},
                ttft_ms=35,
                itl_ms=5,
                input_tokens=600 * n,
                output_tokens=21,
                cached=512 if n > 1 else 0,
            )
            for n in range(1, 5)
        ]
    )


def test_export_mooncake(collector, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    seed(collector.store)
    out = tmp_path / "trace.jsonl"
    args = ["replay", "--url", collector.url, "--since", str(T0 // S), "--until", str(T0 // S + 60)]
    assert main([*args, "--export-mooncake", str(out)]) == 0
    assert "wrote 4 requests" in capsys.readouterr().out
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["timestamp"] for r in records] == [0, 100, 200, 300]
    assert [(r["input_length"], r["output_length"]) for r in records] == [
        (600, 21),
        (1200, 21),
        (1800, 21),
        (2400, 21),
    ]
    assert records[0]["session_id"] == f"{1:032x}"
    # 512 cached tokens from the second request on: one shared block, then blocks of their own.
    assert "hash_ids" not in records[0]
    assert records[1]["hash_ids"] == [0, 1, 2] and records[2]["hash_ids"] == [0, 3, 4, 5]


def aiperf_line(n: int, start_ns: int, ttft_ms: float, latency_ms: float) -> str:
    return json.dumps(
        {
            "metadata": {
                "session_num": n,
                "conversation_id": f"{n:032x}",
                "turn_index": 0,
                "request_start_ns": start_ns,
                "request_end_ns": start_ns + round(latency_ms * MS),
                "benchmark_phase": "profiling",
                "was_cancelled": False,
            },
            "metrics": {
                "input_sequence_length": {"value": 600 * n, "unit": "tokens"},
                "output_sequence_length": {"value": 21, "unit": "tokens"},
                "time_to_first_token": {"value": ttft_ms, "unit": "ms"},
                "request_latency": {"value": latency_ms, "unit": "ms"},
                "inter_token_latency": {"value": (latency_ms - ttft_ms) / 20, "unit": "ms"},
            },
            "error": None,
        }
    )


def test_import_aiperf_then_compare(collector, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    seed(collector.store)
    export = tmp_path / "profile_export.jsonl"
    start = time.time_ns() - 60 * S
    # TTFT 80 ms and 280 ms end to end: decode 200 ms over 20 gaps, ITL 10 ms.
    export.write_text(
        "\n".join(aiperf_line(n, start + n * 100 * MS, 80.0, 280.0) for n in range(1, 5)) + "\n"
    )
    args = ["replay", "--url", collector.url, "--import-aiperf", str(export), "--run-id", "bench-1"]
    assert main([*args, "--adapter", "vllm", "--model", "m1"]) == 0
    assert "imported 4 AIPerf records as replay run bench-1" in capsys.readouterr().out

    deadline = time.monotonic() + 60
    body: dict = {}
    while time.monotonic() < deadline:
        response = httpx.get(f"{collector.url}/api/replay/runs/bench-1/compare", timeout=30)
        if response.status_code == 200 and (body := response.json())["replay"]["requests"] == 4:
            break
        time.sleep(0.5)
    assert body["production"]["requests"] == 4 and body["replay"]["requests"] == 4
    assert body["replay"]["ttft"]["p50"] == 80 * MS
    assert body["replay"]["itl"]["p50"] == 10 * MS  # (280 - 80) ms / (21 - 1)
    assert body["production"]["ttft"]["p50"] == 35 * MS
    assert main(["compare", "--url", collector.url, "--replay", "bench-1"]) == 0
    table = capsys.readouterr().out
    assert "Replay run bench-1" in table and "TTFT differs from production" in table
    assert httpx.get(f"{collector.url}/api/replay/runs/nope/compare", timeout=30).status_code == 404
