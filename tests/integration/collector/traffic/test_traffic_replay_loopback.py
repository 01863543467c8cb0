"""A recorded workload replayed against a loopback server with four slots, at 1× and at 3×.

Production is an instrumented app (``traffic_recorder.py``, its own process) sending 30 streamed
chat requests, Poisson at 3 per second, to the simulated server (``traffic_slot_provider.py``, its
own process): four slots, prefill 0.2 ms per prompt token, decode 10 ms per output token, so a
request holds a slot for 40-400 ms of prefill and 80-400 ms of decode (0.46 s on average; the four
slots serve about 8.7 requests per second). The server's times are large beside what a busy client
machine adds to what the client measures (tens of ms), so TTFT and ITL are the server's.
``latencylens replay`` (the real command, its own process) then sends the recorded shape to the
same server through the instrumented openai SDK.

At 1× the server sees the production load again (about 35 % busy), so the replay's TTFT and ITL
must match production's: the two-sample Kolmogorov–Smirnov test cannot tell them apart at the
5 % level (distance at most 1.358·√(2/30) = 0.35) and the medians are within 25 %. At 3× the
arrivals come at about 9 per second, past the four slots' capacity: requests wait for a slot, the
queue part the server reports grows (mean at least 20 ms above production's and at least twice
it), and the comparison says "queue grew".
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from latencylens import semconv

HERE = Path(__file__).resolve().parent
COUNT = 30
RATE = 3.0
MODEL = "llama-3.3-70b-versatile"
MS = 1_000_000


@pytest.fixture
def slot_server() -> Iterator[str]:
    process = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "traffic_slot_provider.py"),
            "--slots",
            "4",
            "--prefill-ms-per-token",
            "0.2",
            "--decode-ms-per-token",
            "10",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # http.server prints a reset connection's traceback
        text=True,
    )
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip()
    finally:
        process.terminate()
        process.wait(timeout=10)


def run(*args: str, timeout: float = 180) -> str:
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def wait_for(url: str, path: str, ready: Any, timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    body: Any = None
    while time.monotonic() < deadline:
        response = httpx.get(url + path, timeout=30)
        if response.status_code == 200 and ready(body := response.json()):
            return body
        time.sleep(0.5)
    raise AssertionError(f"{path} not ready: {body}")


def replay(url: str, provider_url: str, since: int, run_id: str, *extra: str) -> str:
    return run(
        "-m",
        "latencylens_collector",
        "replay",
        "--url",
        url,
        "--since",
        str(since),
        "--service",
        "chat",
        "--base-url",
        provider_url,
        "--model",
        MODEL,
        "--adapter",
        "groq",
        "--run-id",
        run_id,
        *extra,
    )


def test_replay_at_1x_matches_production_and_at_3x_the_queue_grows(collector, slot_server) -> None:  # type: ignore[no-untyped-def]
    since = int(time.time()) - 1
    recorded = json.loads(
        run(str(HERE / "traffic_recorder.py"), collector.url, slot_server, str(COUNT), str(RATE), "5")
    )
    assert recorded == {"sent": COUNT, "failed": 0, "errors": {}}
    wait_for(
        collector.url, f"/api/replay/shape?service=chat&since={since}", lambda b: len(b["requests"]) == COUNT
    )

    out = replay(collector.url, slot_server, since, "one-x")
    assert f"{COUNT} requests" in out and f"finished: {COUNT} of {COUNT}" in out
    replay(collector.url, slot_server, since, "three-x", "--speed", "3")

    complete = lambda b: b["replay"]["requests"] == COUNT and b["production"]["requests"] == COUNT  # noqa: E731
    one = wait_for(collector.url, "/api/replay/runs/one-x/compare", complete)
    three = wait_for(collector.url, "/api/replay/runs/three-x/compare", complete)

    # Every span of a replayed request carries the run id and its source; production's none.
    tagged = collector.store.query(
        "SELECT attributes[{run:String}] AS run, count() AS spans, "
        f"countIf(attributes[{{src:String}}] != '') AS sourced FROM {collector.store.table('spans')} "
        "GROUP BY run ORDER BY run",
        {"run": semconv.REPLAY_RUN_ID, "src": semconv.REPLAY_SOURCE_TRACE_ID},
    )
    assert [(r["run"], r["spans"], r["sourced"]) for r in tagged] == [
        ("", 2 * COUNT, 0),
        ("one-x", 2 * COUNT, 2 * COUNT),
        ("three-x", 2 * COUNT, 2 * COUNT),
    ]

    assert one["ttft"]["matches"], one
    assert one["itl"]["matches"], one
    assert one["ttft"]["ks"] <= 0.35 and abs(one["ttft"]["p50_ratio"] - 1) <= 0.25
    assert one["replay"]["input_tokens"] == one["production"]["input_tokens"]
    assert one["replay"]["output_tokens"] == one["production"]["output_tokens"]

    queue_before = three["production"]["parts_mean_ns"]["queue"]
    queue_after = three["replay"]["parts_mean_ns"]["queue"]
    assert queue_after >= 2 * queue_before and queue_after - queue_before >= 20 * MS, three
    assert any(line.startswith("queue grew") for line in three["findings"]), three["findings"]
    assert not any(line.startswith("queue grew") for line in one["findings"]) or (
        one["replay"]["parts_mean_ns"]["queue"] < queue_after / 2
    )

    table = run(
        "-m",
        "latencylens_collector",
        "compare",
        "--url",
        collector.url,
        "--replay",
        "three-x",
        "--ttft-slo-ms",
        "300",
    )
    assert "queue grew" in table and "good under the SLO" in table
